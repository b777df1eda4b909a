# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.hooks.base: the hook modes."""

from typing import Any, Optional

from gpusleep.torch_memory_saver import HookMode

__all__ = ["HookMode", "HookUtilBase"]


class HookUtilBase:
    """A hook mode: its library and, for "torch", its allocator."""

    @staticmethod
    def create(hook_mode: HookMode) -> "HookUtilBase":
        from .mode_preload import HookUtilModePreload
        from .mode_torch import HookUtilModeTorch
        modes: dict[str, type[HookUtilBase]] = {
            "preload": HookUtilModePreload, "torch": HookUtilModeTorch}
        return modes[hook_mode]()

    def get_path_binary(self) -> str:
        raise NotImplementedError

    def get_allocator(self) -> Optional[Any]:
        return None
