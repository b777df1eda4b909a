# SPDX-License-Identifier: GPL-2.0
"""Ray helpers of the executor. Models vllm 0.33.0
(vllm/v1/executor/ray_utils.py): the variables that are a worker's own,
never copied from the driver."""

WORKER_SPECIFIC_ENV_VARS: set[str] = {
    "VLLM_HOST_IP",
    "VLLM_HOST_PORT",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "LOCAL_RANK",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
}
