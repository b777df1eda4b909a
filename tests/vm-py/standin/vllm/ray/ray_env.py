# SPDX-License-Identifier: GPL-2.0
"""get_env_vars_to_copy(): the names of the driver's environment
variables vLLM copies to the Ray actors it starts for engine cores
(vllm/v1/engine/utils.py). Models vllm 0.33.0 (vllm/ray/ray_env.py):
every vllm.envs.environment_variables name, the variables of os.environ
whose name starts with one of DEFAULT_ENV_VAR_PREFIXES or of
VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY, DEFAULT_EXTRA_ENV_VARS and the
names of VLLM_RAY_EXTRA_ENV_VARS_TO_COPY, and the caller's
additional_vars; less exclude_vars and RAY_NON_CARRY_OVER_ENV_VARS (the
names listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json).
(Ray workers get the whole driver environment in 0.33.0:
vllm/v1/executor/ray_env_utils.py.)"""

import json
import os

import vllm.envs as envs

RAY_NON_CARRY_OVER_ENV_VARS_FILE = os.path.join(
    envs.VLLM_CONFIG_ROOT, "ray_non_carry_over_env_vars.json")
try:
    with open(RAY_NON_CARRY_OVER_ENV_VARS_FILE) as f:
        RAY_NON_CARRY_OVER_ENV_VARS = set(json.load(f))
except (OSError, ValueError):
    RAY_NON_CARRY_OVER_ENV_VARS = set()

DEFAULT_ENV_VAR_PREFIXES: set[str] = {
    "VLLM_",
    "FLASH_ATTENTION_",
    "LMCACHE_",
    "NCCL_",
    "UCX_",
    "HF_",
    "HUGGING_FACE_",
}

DEFAULT_EXTRA_ENV_VARS: set[str] = {
    "PYTHONHASHSEED",
}


def _parse_csv(value: str) -> set[str]:
    return {tok.strip() for tok in value.split(",") if tok.strip()}


def get_env_vars_to_copy(
    exclude_vars: set[str] | None = None,
    additional_vars: set[str] | None = None,
    destination: str | None = None,
) -> set[str]:
    names = set(envs.environment_variables) | set(additional_vars or ())
    prefixes = DEFAULT_ENV_VAR_PREFIXES | _parse_csv(
        envs.VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY)
    names |= {n for n in os.environ if n.startswith(tuple(prefixes))}
    names |= DEFAULT_EXTRA_ENV_VARS | _parse_csv(
        envs.VLLM_RAY_EXTRA_ENV_VARS_TO_COPY)
    return names - set(exclude_vars or ()) - RAY_NON_CARRY_OVER_ENV_VARS
