# SPDX-License-Identifier: LGPL-2.1-or-later
"""torch_memory_saver.binary_wrapper: the handle on a hook library."""

from gpusleep.torch_memory_saver import BinaryWrapper  # noqa: F401

__all__ = ["BinaryWrapper"]
