# SPDX-License-Identifier: GPL-2.0
"""The sleep-mode allocator's protocol and where it comes from. Models
vllm 0.33.0 (vllm/device_allocator/__init__.py): MemAllocator is what a
sleep-mode allocator has (use_memory_pool, sleep, discard, wake_up,
get_current_usage); get_mem_allocator_instance() gives CUDA's,
CuMemAllocator.get_instance(); a selective wake may leave only
DEFERRABLE_TAGS asleep."""

from contextlib import AbstractContextManager
from typing import Protocol

DEFERRABLE_TAGS: tuple[str, ...] = ("weights", "kv_cache")


class MemAllocator(Protocol):
    def use_memory_pool(self, tag: str | None = None) -> AbstractContextManager: ...

    def sleep(self, offload_tags: tuple[str, ...] | str | None = None) -> None: ...

    def discard(self, tags: tuple[str, ...] | str) -> None: ...

    def wake_up(self, tags: list[str] | None = None) -> None: ...

    def get_current_usage(self) -> int: ...


def get_mem_allocator_instance() -> MemAllocator:
    from vllm.device_allocator.cumem import CuMemAllocator
    return CuMemAllocator.get_instance()
