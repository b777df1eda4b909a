# SPDX-License-Identifier: GPL-2.0
"""One worker in the engine's process. Models vllm 0.33.0
(vllm/v1/executor/uniproc_executor.py): a WorkerWrapperBase, then
init_worker, init_device, load_model; collective_rpc calls the method
on it (a list of one result)."""

from vllm.v1.executor.abstract import Executor
from vllm.v1.worker.worker_base import WorkerWrapperBase


class UniProcExecutor(Executor):
    def _init_executor(self):
        self.driver_worker = WorkerWrapperBase(rpc_rank=0)
        kwargs = dict(vllm_config=self.vllm_config, local_rank=0, rank=0,
                      distributed_init_method="env://",
                      is_driver_worker=True)
        self.driver_worker.init_worker(all_kwargs=[kwargs])
        self.driver_worker.init_device()
        self.driver_worker.load_model()

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None,
                       non_block=False, single_value=False):
        out = getattr(self.driver_worker, method)(*args, **(kwargs or {}))
        return out if single_value else [out]

    def shutdown(self):
        self.driver_worker.shutdown()
