# SPDX-License-Identifier: LGPL-2.1-or-later
"""vLLM's sleep mode over gpusleep: an allocator with CuMemAllocator's
surface and semantics, and the plugin hook that puts it in vLLM's place.

vLLM's GPU worker, with enable_sleep_mode, does (vllm/v1/worker/
gpu_worker.py, vllm/device_allocator/cumem.py):

    allocator = CuMemAllocator.get_instance()
    assert allocator.get_current_usage() == 0
    with allocator.use_memory_pool(tag="weights"):
        load_model()
    with allocator.use_memory_pool(tag="kv_cache"):
        initialize_kv_cache()
    allocator.sleep(offload_tags=("weights",) if level == 1 else ())
    allocator.wake_up(tags)              # None, ["weights"], ["kv_cache"]

GpuSleepAllocator does the same through one gpusleep domain per worker
(the process's torch_memory_saver adapter, gpusleep.torch_memory_saver):
use_memory_pool(tag) is the adapter's region(tag) (one torch.cuda.MemPool
per tag over libgpusleep's pluggable allocator); sleep(offload_tags) sets
each tag's policy (the offloaded tags backed up to host memory, the rest
discarded) and releases every tag through the module; wake_up(tags)
resumes those tags (None: every released one), the offloaded ones with
their contents, the others zero. So level 1 keeps the weights and drops
the KV cache, level 2 drops both, and a trainer or gpusleepctl sees the
worker's domain released and resumed.

The domain is named GPUSLEEP_DOMAIN_NAME when set, else
"<GPUSLEEP_ENGINE or vllm>-tp<rank>" (rank: torch.distributed's when it is
initialised, else $RANK, else 0). vLLM's own sleep() preconditions are the
drain: the engine sleeps only with no request running, and it resets its
prefix cache before it puts the workers to sleep; the domain's drain and
cache-reset steps are therefore answered done at once
(docs/integrations/vllm.md).

install() (the vllm.general_plugins entry point of the gpusleep-vllm
distribution) replaces vllm.device_allocator.cumem.CuMemAllocator, and
vllm.device_allocator.get_mem_allocator_instance where vLLM has it, with
this allocator, in the vllm modules already imported too.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

from . import _lib
from .torch_memory_saver import torch_memory_saver as _saver

if TYPE_CHECKING:
    from .engine import Engine
    from .trainer import Result

VLLM_TAGS = ("weights", "kv_cache")


def domain_name() -> str:
    """The worker's domain name (see the module's docstring)."""
    name = os.environ.get("GPUSLEEP_DOMAIN_NAME")
    if name:
        return name
    rank = None
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank()
    except ImportError:
        pass
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    return f"{os.environ.get('GPUSLEEP_ENGINE', 'vllm')}-tp{rank}"


class GpuSleepAllocator:
    """CuMemAllocator's surface (get_instance, use_memory_pool, sleep,
    wake_up, get_current_usage) over a gpusleep domain."""

    instance = None
    default_tag = "default"	# vLLM's; the adapter aliases it to weights

    @staticmethod
    def get_instance() -> GpuSleepAllocator:
        if GpuSleepAllocator.instance is None:
            GpuSleepAllocator.instance = GpuSleepAllocator()
        return GpuSleepAllocator.instance

    def __init__(self) -> None:
        self.saver = _saver
        self.current_tag = GpuSleepAllocator.default_tag

    @property
    def engine(self) -> Optional[Engine]:
        """The worker's gpusleep Engine (made on first need)."""
        if self.saver._engine is None:
            self.saver.configure(name=domain_name(), tags=list(VLLM_TAGS),
                                 prefix_caching=True,
                                 prefix_cache_reset=True)
        return self.saver.engine

    @contextlib.contextmanager
    def use_memory_pool(self, tag: Optional[str] = None) -> Iterator[None]:
        """Allocations inside go to tag's pool (None: the default tag,
        the weights)."""
        tag = tag or GpuSleepAllocator.default_tag
        self.engine	# the domain exists before the first allocation
        old, self.current_tag = self.current_tag, tag
        try:
            with self.saver.region(tag=tag,
                                   enable_cpu_backup=self._tag(tag) ==
                                   "weights"):
                yield
        finally:
            self.current_tag = old

    def _tag(self, tag):
        return self.saver._tag(tag)

    def _mm(self):
        return _lib.lib().gpusleep_mm()

    def sleep(self, offload_tags: Union[str, Iterable[str], None] = None
              ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Release every tag; the offload_tags are backed up (restored by
        wake_up), the rest discarded. offload_tags: a tuple or a str;
        None is the default tag. Returns the operation's gpusleep Result
        (None when nothing was allocated)."""
        if offload_tags is None:
            offload_tags = (GpuSleepAllocator.default_tag,)
        elif isinstance(offload_tags, str):
            offload_tags = (offload_tags,)
        keep = {self._tag(t) for t in offload_tags}
        mm = self._mm()
        if not mm:
            return None
        L = _lib.lib()
        for t in self.saver.tags:
            pol = _lib.GS_MM_BACKUP if t in keep else _lib.GS_MM_DISCARD
            ret = L.gs_mm_set_policy(mm, self.saver._mask(t), pol, 0)
            if ret < 0:
                raise OSError(-ret, f"tag {t}: setting its policy: "
                              f"{os.strerror(-ret)}")
        return self.saver.pause()

    def wake_up(self, tags: Optional[Iterable[str]] = None
                ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Resume tags (None: every released tag)."""
        if not self._mm():
            return None
        return self.saver.resume(None if tags is None else
                                 [self._tag(t) for t in tags])

    def get_current_usage(self) -> int:
        """Bytes allocated in the pools (every tag, asleep or awake)."""
        mm = self._mm()
        if not mm:
            return 0
        total = 0
        for t in self.saver.tags:
            info = _lib.gs_mm_tag_info()
            if _lib.lib().gs_mm_tag_info(mm, self.saver._mask(t),
                                         ctypes.byref(info)) == 0:
                total += info.used_bytes
        return total


def install() -> type[GpuSleepAllocator]:
    """Put GpuSleepAllocator in CuMemAllocator's place (the plugin)."""
    import importlib
    cumem = importlib.import_module("vllm.device_allocator.cumem")
    orig = getattr(cumem, "CuMemAllocator", None)
    cumem.CuMemAllocator = GpuSleepAllocator
    pkg = sys.modules.get("vllm.device_allocator")
    if pkg is not None and hasattr(pkg, "get_mem_allocator_instance"):
        pkg.get_mem_allocator_instance = GpuSleepAllocator.get_instance
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.") and mod is not None and orig is not None \
                and getattr(mod, "CuMemAllocator", None) is orig:
            mod.CuMemAllocator = GpuSleepAllocator
    return GpuSleepAllocator
