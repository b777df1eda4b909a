# SPDX-License-Identifier: GPL-2.0
"""vllm.envs: a table environment_variables, name -> a function reading
os.environ, and a module __getattr__ that calls it on each access.
Models vllm 0.33.0 (vllm/envs.py); only the entries the stand-ins read.
The two VLLM_RAY_EXTRA_* names are read by vllm/ray/ray_env.py
get_env_vars_to_copy() (comma-separated, added to its defaults)."""

import os
from typing import Any, Callable

environment_variables: dict[str, Callable[[], Any]] = {
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


def __getattr__(name: str):
    if name in environment_variables:
        return environment_variables[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
