# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.utils: the helpers its callers may use."""

import contextlib
import os
from pathlib import Path
from typing import Iterator

from gpusleep.torch_memory_saver import HOOK_STEMS, hook_library

__all__ = ["is_xpu", "get_binary_path_from_package", "change_env"]


def is_xpu() -> bool:
    """gpusleep drives CUDA only."""
    return False


def get_binary_path_from_package(stem: str) -> Path:
    """The hook library named stem, for the CUDA runtime in use."""
    for mode, s in HOOK_STEMS.items():
        if s == stem:
            return Path(hook_library(mode))
    raise RuntimeError(f"torch_memory_saver (gpusleep): no library {stem!r}"
                       f"; have {sorted(HOOK_STEMS.values())}")


@contextlib.contextmanager
def change_env(key: str, value: str) -> Iterator[None]:
    """os.environ[key] = value inside, restored after."""
    old = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old
