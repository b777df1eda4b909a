# SPDX-License-Identifier: GPL-2.0
"""What of the driver's environment Ray workers get. Models vllm 0.33.0
(vllm/v1/executor/ray_env_utils.py): all of os.environ, less the
worker-specific variables and RAY_NON_CARRY_OVER_ENV_VARS."""

import os

from vllm.ray.ray_env import RAY_NON_CARRY_OVER_ENV_VARS


def get_driver_env_vars(worker_specific_vars):
    exclude_vars = worker_specific_vars | RAY_NON_CARRY_OVER_ENV_VARS
    return {key: value for key, value in os.environ.items()
            if key not in exclude_vars}
