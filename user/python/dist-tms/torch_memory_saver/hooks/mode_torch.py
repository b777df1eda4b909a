# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.hooks.mode_torch: the pluggable-allocator library
(tms_torch_malloc / tms_torch_free, in the calling thread's tag).
gpusleep's regions use one MemPool per tag over libgpusleep's allocator
instead (docs/pytorch.md); this is the library's own, for callers that
ask for it."""

from typing import Any

from gpusleep.torch_memory_saver import hook_library

from .base import HookUtilBase

__all__ = ["HookUtilModeTorch"]


class HookUtilModeTorch(HookUtilBase):
    def __init__(self) -> None:
        from torch.cuda.memory import CUDAPluggableAllocator
        self.allocator = CUDAPluggableAllocator(
            self.get_path_binary(), "tms_torch_malloc", "tms_torch_free")

    def get_path_binary(self) -> str:
        return hook_library("torch")

    def get_allocator(self) -> Any:
        return self.allocator.allocator()
