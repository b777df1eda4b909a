# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
vllm on PYTHONPATH: a vLLM driver with distributed_executor_backend="ray".
The driver loads the general plugins (vLLM does, in EngineArgs'
__post_init__: the installed gpusleep-vllm's register() runs), then the
Ray executor starts one worker (an actor: a process with a bare
environment), copies what vLLM copies of the driver's environment, and
initialises it (update_environment_variables, then init_worker, which
loads the plugins there). Prints, as JSON, what the worker sees: its
gpusleep domain name, its GPUSLEEP_* and MYLIB_* variables and the
CuMemAllocator in place. With "old" as argument, vllm.envs loses the
VLLM_RAY_EXTRA_* names first (vLLM before them)."""

import json
import os
import sys
from typing import Any, Dict


def probe(wrapper: Any) -> Dict[str, Any]:
    """Run in the worker."""
    import gpusleep.vllm
    from vllm.device_allocator.cumem import CuMemAllocator
    return {"domain": gpusleep.vllm.domain_name(),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("GPUSLEEP_", "MYLIB_"))},
            "allocator": CuMemAllocator.__module__}


def main() -> None:
    if sys.argv[1:] == ["old"]:
        import vllm.envs
        for k in ("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY",
                  "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"):
            del vllm.envs.environment_variables[k]
    from vllm.plugins import load_general_plugins
    load_general_plugins()
    from vllm.v1.executor.ray_executor import RayDistributedExecutor
    ex = RayDistributedExecutor(world_size=1)
    try:
        [seen] = ex.collective_rpc("vllm_ray:probe")
    finally:
        ex.shutdown()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
