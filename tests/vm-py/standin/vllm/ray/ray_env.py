# SPDX-License-Identifier: GPL-2.0
"""get_env_vars_to_copy() as vLLM's vllm/ray/ray_env.py has it (read, not
copied): the names of the driver's environment variables that the Ray
executor copies to its workers (Ray actors, which do not inherit the
driver's environment). Newer vLLM: every vllm.envs.environment_variables
name, the variables of os.environ whose name starts with one of its
default prefixes (VLLM_, LMCACHE_, NCCL_, UCX_, HF_, HUGGING_FACE_) or of
VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY, PYTHONHASHSEED and the names of
VLLM_RAY_EXTRA_ENV_VARS_TO_COPY, and the caller's additional_vars; less
exclude_vars and the names listed in
$VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json. Older vLLM (whose
vllm.envs has no VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY): only the
environment_variables names and additional_vars, less the same
exclusions; tests/vm-py/dist/vllm_ray.py drops those names from the table
to stand for it."""

import json
import os
from typing import Optional, Set

import vllm.envs as envs

RAY_NON_CARRY_OVER_ENV_VARS_FILE = os.path.join(
    envs.VLLM_CONFIG_ROOT, "ray_non_carry_over_env_vars.json")
try:
    with open(RAY_NON_CARRY_OVER_ENV_VARS_FILE) as _f:
        RAY_NON_CARRY_OVER_ENV_VARS: Set[str] = set(json.load(_f))
except (OSError, ValueError):
    RAY_NON_CARRY_OVER_ENV_VARS = set()

DEFAULT_ENV_VAR_PREFIXES = {"VLLM_", "LMCACHE_", "NCCL_", "UCX_", "HF_",
                            "HUGGING_FACE_"}
DEFAULT_EXTRA_ENV_VARS = {"PYTHONHASHSEED"}


def _names(csv: str) -> Set[str]:
    return {s.strip() for s in csv.split(",") if s.strip()}


def get_env_vars_to_copy(exclude_vars: Optional[Set[str]] = None,
                         additional_vars: Optional[Set[str]] = None,
                         destination: Optional[str] = None) -> Set[str]:
    names = set(envs.environment_variables) | set(additional_vars or ())
    if "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY" in envs.environment_variables:
        prefixes = DEFAULT_ENV_VAR_PREFIXES | _names(
            envs.VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY)
        names |= {n for n in os.environ if n.startswith(tuple(prefixes))}
        names |= DEFAULT_EXTRA_ENV_VARS | _names(
            envs.VLLM_RAY_EXTRA_ENV_VARS_TO_COPY)
    return names - set(exclude_vars or ()) - RAY_NON_CARRY_OVER_ENV_VARS
