# SPDX-License-Identifier: GPL-2.0
"""vLLM's CuMemAllocator where its C extension is missing (as on a
machine without vLLM's CUDA build): get_instance() fails, so a worker
that reaches it was not given gpusleep's allocator."""

cumem_available = False


class CuMemAllocator:
    instance = None
    default_tag = "default"

    @staticmethod
    def get_instance():
        raise AssertionError("cumem allocator is not available")
