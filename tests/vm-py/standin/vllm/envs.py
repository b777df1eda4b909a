# SPDX-License-Identifier: GPL-2.0
"""vllm.envs as vLLM has it (vllm/envs.py, read, not copied): a table
environment_variables, name -> a function reading os.environ, and a
module __getattr__ that calls it on each access. Only the entries the
stand-ins read; the two VLLM_RAY_EXTRA_* names are those newer vLLM reads
in vllm/ray/ray_env.py get_env_vars_to_copy() (comma-separated, added to
its own defaults)."""

import os
from typing import Any, Callable, Dict

environment_variables: Dict[str, Callable[[], Any]] = {
    "VLLM_PLUGINS": lambda: None if "VLLM_PLUGINS" not in os.environ
    else os.environ["VLLM_PLUGINS"].split(","),
    "VLLM_CONFIG_ROOT": lambda: os.path.expanduser(
        os.getenv("VLLM_CONFIG_ROOT", "~/.config/vllm")),
    "VLLM_RAY_PER_WORKER_GPUS": lambda: float(
        os.getenv("VLLM_RAY_PER_WORKER_GPUS", "1.0")),
    "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": lambda: os.getenv(
        "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", ""),
    "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY": lambda: os.getenv(
        "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY", ""),
}


def __getattr__(name: str) -> Any:
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
