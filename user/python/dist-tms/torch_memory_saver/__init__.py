# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver 0.0.10's module, served by gpusleep
(gpusleep.torch_memory_saver; docs/pytorch.md lists the differences).

    import torch_memory_saver
    saver = torch_memory_saver.torch_memory_saver     # the process's one
    with saver.region(tag="weights", enable_cpu_backup=True): ...
    saver.pause(tag="kv_cache"); saver.resume(tag="kv_cache")
    with torch_memory_saver.configure_subprocess(): proc.start()

Installed as a distribution (gpusleep-torch-memory-saver), the module is
found by every process a spawn start method creates, and its hook
libraries (torch_memory_saver_hook_mode_preload*.abi3.so,
..._torch*.abi3.so) lie beside the package, where torch_memory_saver and
slime look for them. TorchMemorySaver() is the process's one saver (one
memory manager, one gpusleep domain per process).
"""

from typing import Union

from gpusleep import torch_memory_saver as _adapter

from .entrypoint import TorchMemorySaver
from .hooks.mode_preload import configure_subprocess

__all__ = ["torch_memory_saver", "TorchMemorySaver", "configure_subprocess",
           "memory_saver", "region", "cuda_graph", "disable", "pause",
           "resume", "configure", "enabled"]

# Global singleton (torch_memory_saver's name)
torch_memory_saver = TorchMemorySaver()
# an older module-level name for the same object
memory_saver = torch_memory_saver

region = torch_memory_saver.region
cuda_graph = torch_memory_saver.cuda_graph
disable = torch_memory_saver.disable
pause = torch_memory_saver.pause
resume = torch_memory_saver.resume
configure = _adapter.configure


def __getattr__(name: str) -> Union[bool, str]:
    # read at each access, as the saver's property is
    if name == "enabled":
        return torch_memory_saver.enabled
    raise AttributeError(f"module 'torch_memory_saver' has no attribute "
                         f"{name!r}")
