# SPDX-License-Identifier: GPL-2.0
"""The model's configuration, the sleep-mode fields. Models vllm 0.33.0
(vllm/config/model.py): enable_sleep_mode; sleep_mode_backend, the
name SleepModeBackendFactory resolves ("cumem" by default,
--sleep-mode-backend); enable_cumem_allocator, which sleep mode turns on
(ModelConfig.__post_init__: "sleep mode requires it") and which may be
on without sleep mode (--enable-cumem-allocator)."""

from dataclasses import dataclass


@dataclass
class ModelConfig:
    model: str = "Qwen/Qwen3-0.6B"
    enable_sleep_mode: bool = False
    sleep_mode_backend: str = "cumem"
    enable_cumem_allocator: bool = False
