# SPDX-License-Identifier: GPL-2.0
"""The Ray executor's start of its workers. Models vllm 0.33.0
(vllm/v1/executor/ray_executor_v2.py): each worker is a RayWorkerProc
actor, made light (its config and rank kept), then initialize_worker(
local_rank, env_vars, distributed_init_method, driver_env_vars): the
driver's variables (get_driver_env_vars: all but the worker-specific
ones) set where the actor's environment has none, env_vars over them,
then the worker process proper: a WorkerWrapperBase, init_worker (which
loads the general plugins) and init_device. The actors are processes of
their own started with a bare environment, as Ray starts them
(tests/vm-py/standin/vllm_ray_actor.py); calls go to them as pickles."""

import base64
import os
import pickle
import subprocess
import sys

from vllm.v1.executor.abstract import Executor
from vllm.v1.executor.ray_env_utils import get_driver_env_vars
from vllm.v1.executor.ray_utils import WORKER_SPECIFIC_ENV_VARS
from vllm.v1.worker.worker_base import WorkerWrapperBase

STANDIN_ONLY = ("RayExecutorV2.collective_rpc", "RayExecutorV2._call")


class RayWorkerProc:
    def __init__(self, vllm_config, rank, input_shm_handle, is_driver_worker,
                 is_driver_node=False):
        self._init_kwargs = dict(vllm_config=vllm_config, rank=rank,
                                 is_driver_worker=is_driver_worker)

    def initialize_worker(self, local_rank, env_vars, distributed_init_method,
                          driver_env_vars=None,
                          assigned_physical_gpu_ids=None):
        if driver_env_vars:
            for key, value in driver_env_vars.items():
                os.environ.setdefault(key, value)
        for key, value in env_vars.items():
            os.environ[key] = value
        kw = self._init_kwargs
        self.worker = WorkerWrapperBase(rpc_rank=0, global_rank=kw["rank"])
        self.worker.init_worker(all_kwargs=[dict(
            vllm_config=kw["vllm_config"], local_rank=local_rank,
            rank=kw["rank"], distributed_init_method=distributed_init_method,
            is_driver_worker=kw["is_driver_worker"])])
        self.worker.init_device()


class RayExecutorV2(Executor):
    def __init__(self, vllm_config):
        super().__init__(vllm_config)

    def _init_executor(self):
        world = self.vllm_config.parallel_config.tensor_parallel_size
        code = os.pathsep.join([sys.path[0]] + [
            p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p])
        self.actors = [subprocess.Popen(
            [sys.executable, "-m", "vllm_ray_actor"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                 "PYTHONPATH": code, "PYTHONDONTWRITEBYTECODE": "1"})
            for _ in range(world)]
        self.driver_env_vars = get_driver_env_vars(
            worker_specific_vars=WORKER_SPECIFIC_ENV_VARS)
        for rank, a in enumerate(self.actors):
            self._call(a, "make", RayWorkerProc(self.vllm_config, rank, None,
                                                rank == 0))
            self._call(a, "initialize_worker", rank, {}, "env://",
                       self.driver_env_vars)

    @staticmethod
    def _call(actor, method, *args):
        actor.stdin.write(base64.b64encode(pickle.dumps((method, args)))
                          .decode() + "\n")
        actor.stdin.flush()
        ok, out = pickle.loads(base64.b64decode(actor.stdout.readline()))
        if not ok:
            raise RuntimeError(f"{method}: {out}")
        return out

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None,
                       non_block=False):
        return [self._call(a, method, *args) for a in self.actors]

    def shutdown(self):
        for a in self.actors:
            a.stdin.close()
            a.wait(60)
