# SPDX-License-Identifier: GPL-2.0
"""RayDistributedExecutor's worker start as vLLM's
vllm/v1/executor/ray_executor.py (_init_workers_ray) has it (read, not
copied): the actors are made (RayWorkerWrapper), each is given its device
variable, then get_env_vars_to_copy(exclude_vars=WORKER_SPECIFIC_ENV_VARS,
additional_vars=ADDITIONAL_ENV_VARS) picks what of the driver's
os.environ is copied, collective_rpc("update_environment_variables")
sets it in every worker, then collective_rpc("init_worker"). The actors
are processes (vllm.v1.executor.ray_utils) started with a bare
environment, as Ray starts them."""

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

from vllm.ray.ray_env import get_env_vars_to_copy


class RayDistributedExecutor:
    WORKER_SPECIFIC_ENV_VARS = {"VLLM_HOST_IP", "VLLM_HOST_PORT",
                                "LOCAL_RANK", "CUDA_VISIBLE_DEVICES"}
    ADDITIONAL_ENV_VARS = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}

    def __init__(self, world_size: int = 1) -> None:
        self.workers: List[subprocess.Popen] = []
        # the node's environment and the job's code paths (Ray's
        # runtime_env), nothing else of the driver's
        code = os.pathsep.join([sys.path[0]] + [
            p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p])
        for rank in range(world_size):
            self.workers.append(subprocess.Popen(
                [sys.executable, "-m", "vllm.v1.executor.ray_utils",
                 str(rank)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, cwd="/",
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                     "PYTHONPATH": code, "PYTHONDONTWRITEBYTECODE": "1"}))
        envs_list: List[Dict[str, str]] = [
            {"CUDA_VISIBLE_DEVICES": str(r)} for r in range(world_size)]
        copy = get_env_vars_to_copy(
            exclude_vars=self.WORKER_SPECIFIC_ENV_VARS,
            additional_vars=set(self.ADDITIONAL_ENV_VARS),
            destination="workers")
        for args in envs_list:
            for name in copy:
                if name in os.environ:
                    args[name] = os.environ[name]
        self.collective_rpc("update_environment_variables", (envs_list,))
        self.collective_rpc("init_worker",
                            ([{} for _ in range(world_size)],))

    def collective_rpc(self, method: str, args: tuple = ()) -> List[Any]:
        for w in self.workers:
            w.stdin.write(json.dumps({"method": method,
                                      "args": list(args)}) + "\n")
            w.stdin.flush()
        out = []
        for w in self.workers:
            ans = json.loads(w.stdout.readline() or '{"error": "exited"}')
            if "error" in ans:
                raise RuntimeError(f"{method}: {ans['error']}")
            out.append(ans["ok"])
        return out

    def shutdown(self) -> None:
        for w in self.workers:
            w.stdin.close()
            w.wait(60)
