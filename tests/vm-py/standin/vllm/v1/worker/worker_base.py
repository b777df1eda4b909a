# SPDX-License-Identifier: GPL-2.0
"""The worker's base and its wrapper. Models vllm 0.33.0
(vllm/v1/worker/worker_base.py): WorkerBase keeps the config and writes
the worker's rank into parallel_config.rank; the executor makes the
WorkerWrapperBase first (rpc_rank), then init_worker(all_kwargs) loads
the general plugins (gpusleep-vllm's register() runs here) and only then
resolves the worker class (parallel_config.worker_cls, "auto": the GPU
worker, whose module is imported now) and makes the worker with the
config current; init_device and initialize_from_config run with it
current too, load_model does not (gpu_worker.py sets it itself). An
attribute the wrapper lacks is the worker's."""

import importlib
import os

from vllm.config import set_current_vllm_config


class WorkerBase:
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        self.vllm_config = vllm_config
        self.model_config = vllm_config.model_config
        self.parallel_config = vllm_config.parallel_config
        self.parallel_config.rank = rank
        self.local_rank = local_rank
        self.rank = rank
        self.distributed_init_method = distributed_init_method
        self.is_driver_worker = is_driver_worker

    def load_model(self, *, load_dummy_weights=False):
        raise NotImplementedError

    def shutdown(self) -> None:
        pass


class WorkerWrapperBase:
    def __init__(self, rpc_rank=0, global_rank=None):
        self.rpc_rank = rpc_rank
        self.global_rank = self.rpc_rank if global_rank is None else \
            global_rank
        self.worker = None

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()

    def update_environment_variables(self, envs_list):
        os.environ.update(envs_list[self.rpc_rank])

    def init_worker(self, all_kwargs):
        kwargs = all_kwargs[self.rpc_rank]
        vllm_config = kwargs.get("vllm_config")
        assert vllm_config is not None
        self.vllm_config = vllm_config
        from vllm.plugins import load_general_plugins
        load_general_plugins()
        qualname = vllm_config.parallel_config.worker_cls
        if qualname == "auto":
            qualname = "vllm.v1.worker.gpu_worker.Worker"
        mod, cls = qualname.rsplit(".", 1)
        worker_class = getattr(importlib.import_module(mod), cls)
        with set_current_vllm_config(self.vllm_config):
            self.worker = worker_class(**kwargs)

    def initialize_from_config(self, kv_cache_configs):
        kv_cache_config = kv_cache_configs[self.global_rank]
        with set_current_vllm_config(self.vllm_config):
            self.worker.initialize_from_config(kv_cache_config)

    def init_device(self):
        with set_current_vllm_config(self.vllm_config):
            self.worker.init_device()

    def __getattr__(self, attr):
        if attr == "worker":
            raise AttributeError(attr)
        return getattr(self.worker, attr)
