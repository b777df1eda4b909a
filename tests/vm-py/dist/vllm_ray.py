# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
vllm (vLLM 0.33.0's) on PYTHONPATH: a vLLM driver with
distributed_executor_backend="ray". The driver loads the general plugins
(vLLM does, in EngineArgs: the installed gpusleep-vllm's register()
runs), then RayExecutorV2 starts one worker (an actor: a process with a
bare environment), which gets the driver's environment from vLLM
(initialize_worker: get_driver_env_vars) and loads the plugins there.
Prints, as JSON, what the worker sees: its gpusleep domain name, its
GPUSLEEP_* and MYLIB_* variables, whether the gpusleep backend is
registered there; and whether the names vLLM copies to its engine-core
actors (get_env_vars_to_copy) include the driver's GPUSLEEP_ENGINE. With
"old" as argument, vllm.envs loses the VLLM_RAY_EXTRA_* names first
(vLLM before them, whose get_env_vars_to_copy copies the names of
vllm.envs.environment_variables): the plugin must have added
GPUSLEEP_ENGINE to that table."""

import json
import os
import sys
from typing import Any, Dict


def probe(proc: Any) -> Dict[str, Any]:
    """Run in the worker (given its RayWorkerProc)."""
    import gpusleep.vllm
    from vllm.device_allocator.sleep_mode_backend import \
        SleepModeBackendFactory
    return {"domain": gpusleep.vllm.domain_name(proc.worker.vllm_config),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("GPUSLEEP_", "MYLIB_"))},
            "backend": "gpusleep" in SleepModeBackendFactory._registry}


def main() -> None:
    if sys.argv[1:] == ["old"]:
        import vllm.envs
        for k in ("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY",
                  "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"):
            del vllm.envs.environment_variables[k]
    from vllm.plugins import load_general_plugins
    load_general_plugins()
    from vllm.config import ModelConfig, ParallelConfig, VllmConfig
    from vllm.ray.ray_env import get_env_vars_to_copy
    from vllm.v1.executor.ray_executor_v2 import RayExecutorV2
    if sys.argv[1:] == ["old"]:	# (its ray_env reads the table only)
        import vllm.envs
        copied = "GPUSLEEP_ENGINE" in vllm.envs.environment_variables
    else:
        copied = "GPUSLEEP_ENGINE" in get_env_vars_to_copy()
    ex = RayExecutorV2(VllmConfig(model_config=ModelConfig(
        enable_sleep_mode=True, sleep_mode_backend="gpusleep"),
        parallel_config=ParallelConfig()))
    try:
        [seen] = ex.collective_rpc("vllm_ray:probe")
    finally:
        ex.shutdown()
    seen["copied"] = copied
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
