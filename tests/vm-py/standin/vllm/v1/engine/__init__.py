# SPDX-License-Identifier: GPL-2.0
"""The engine's shared types. Models vllm 0.33.0 (vllm/v1/engine/
__init__.py): the pause modes of sleep() and pause_scheduler()."""

from typing import Literal

PauseMode = Literal["abort", "wait", "keep"]
