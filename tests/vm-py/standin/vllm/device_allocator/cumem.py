# SPDX-License-Identifier: GPL-2.0
"""vLLM's CuMemAllocator, where its CUDA extension cannot run (no GPU
here). Models vllm 0.33.0 (vllm/device_allocator/cumem.py): a singleton
(get_instance; the worker's shutdown calls release_pools on the
instance when there is one); its pools are tagged (use_memory_pool,
cudagraph_pool); sleep(offload_tags) backs those up and discards the
rest; discard(tags); wake_up(tags) wakes those of DEFERRABLE_TAGS and
every other tag. Here any pool raises: a worker that reaches vLLM's own
allocator was not given gpusleep's."""

from contextlib import contextmanager

cumem_available = True


class CuMemAllocator:
    instance = None
    default_tag: str = "default"

    @staticmethod
    def get_instance():
        assert cumem_available, "cumem allocator is not available"
        if CuMemAllocator.instance is None:
            CuMemAllocator.instance = CuMemAllocator()
        return CuMemAllocator.instance

    def __init__(self):
        self.pools_released = 0

    def release_pools(self) -> None:
        self.pools_released += 1

    def close(self) -> None:
        self.release_pools()

    @contextmanager
    def use_memory_pool(self, tag: str | None = None):
        raise RuntimeError(f"vLLM's own CuMemAllocator ({tag} pool): no "
                           "CUDA here (the stand-in's)")
        yield

    @contextmanager
    def cudagraph_pool(self):
        raise RuntimeError("vLLM's own CuMemAllocator: no CUDA here")
        yield

    def sleep(self, offload_tags: tuple[str, ...] | str | None = None) -> None:
        raise RuntimeError("vLLM's own CuMemAllocator: no CUDA here")

    def discard(self, tags: tuple[str, ...] | str) -> None:
        raise RuntimeError("vLLM's own CuMemAllocator: no CUDA here")

    def wake_up(self, tags: list[str] | None = None) -> None:
        raise RuntimeError("vLLM's own CuMemAllocator: no CUDA here")

    def get_current_usage(self) -> int:
        return 0
