# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver, as SGLang imports it, served by gpusleep.

    import torch_memory_saver
    saver = torch_memory_saver.torch_memory_saver     # the process's one
    saver.hook_mode = "torch"
    with saver.region(tag="weights", enable_cpu_backup=True): ...
    saver.pause(tag="kv_cache"); saver.resume(tag="kv_cache")
    with torch_memory_saver.configure_subprocess(): proc.start()

Every name is gpusleep.torch_memory_saver's (one adapter per process, one
gpusleep domain): installed as a distribution, the module is found by
every process a spawn start method creates, where a sys.modules entry
made in the parent is not. TorchMemorySaver() (the older spelling)
returns that same adapter: a second one would be a second domain over the
same allocator. docs/integrations/sglang.md.
"""

from typing import Union

from gpusleep import torch_memory_saver as _adapter
from gpusleep.torch_memory_saver import (TorchMemorySaver as _Impl,
                                         configure_subprocess,
                                         torch_memory_saver)

__all__ = ["torch_memory_saver", "TorchMemorySaver", "memory_saver",
           "configure_subprocess", "region", "cuda_graph", "disable",
           "pause", "resume", "configure", "enabled", "hook_mode"]

# torch_memory_saver's older module-level name for the same object
memory_saver = torch_memory_saver


def TorchMemorySaver() -> _Impl:
    """The process's adapter (torch_memory_saver.torch_memory_saver)."""
    return torch_memory_saver


region = torch_memory_saver.region
cuda_graph = torch_memory_saver.cuda_graph
disable = torch_memory_saver.disable
pause = torch_memory_saver.pause
resume = torch_memory_saver.resume
configure = _adapter.configure


def __getattr__(name: str) -> Union[bool, str]:
    # read at each access, as the adapter's properties are
    if name in ("enabled", "hook_mode"):
        return getattr(torch_memory_saver, name)
    raise AttributeError(f"module 'torch_memory_saver' has no attribute "
                         f"{name!r}")
