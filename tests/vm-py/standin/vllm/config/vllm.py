# SPDX-License-Identifier: GPL-2.0
"""The whole configuration and the current one. Models vllm 0.33.0
(vllm/config/vllm.py): set_current_vllm_config(cfg) makes cfg current
for what runs inside (a worker's construction, init_device, the body of
load_model...), get_current_vllm_config_or_none() reads it (None
outside)."""

from contextlib import contextmanager
from dataclasses import dataclass

from vllm.config.model import ModelConfig
from vllm.config.parallel import ParallelConfig

from vllm.config.parallel import Field

STANDIN_ONLY = ("Field",)


@dataclass
class VllmConfig:
    model_config: ModelConfig = None
    parallel_config: ParallelConfig = Field(default_factory=ParallelConfig)


_current_vllm_config = None


@contextmanager
def set_current_vllm_config(vllm_config, check_compile=False, prefix=None):
    global _current_vllm_config
    old = _current_vllm_config
    _current_vllm_config = vllm_config
    try:
        yield
    finally:
        _current_vllm_config = old


def get_current_vllm_config_or_none():
    return _current_vllm_config
