# SPDX-License-Identifier: GPL-2.0
"""vLLM's configuration. Models vllm 0.33.0 (vllm/config/__init__.py
re-exports these from vllm/config/vllm.py)."""

from vllm.config.model import ModelConfig
from vllm.config.parallel import ParallelConfig
from vllm.config.vllm import (VllmConfig, get_current_vllm_config_or_none,
                              set_current_vllm_config)

__all__ = ["ModelConfig", "ParallelConfig", "VllmConfig",
           "get_current_vllm_config_or_none", "set_current_vllm_config"]
