# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.hooks.mode_preload: the LD_PRELOAD hook library."""

import os

from gpusleep.torch_memory_saver import (configure_subprocess,  # noqa: F401
                                         hook_library)

from .base import HookUtilBase

__all__ = ["HookUtilModePreload", "configure_subprocess"]


class HookUtilModePreload(HookUtilBase):
    def get_path_binary(self) -> str:
        """The hook library in LD_PRELOAD (the one entry naming
        torch_memory_saver), else the packaged one."""
        found = [p for p in os.environ.get("LD_PRELOAD", "").split(":")
                 if "torch_memory_saver" in p]
        if len(found) > 1:
            raise RuntimeError(f"torch_memory_saver: LD_PRELOAD names "
                               f"several hook libraries: {found}")
        return found[0] if found else hook_library("preload")
