# SPDX-License-Identifier: GPL-2.0
"""WorkerWrapperBase as vLLM's vllm/v1/worker/worker_base.py has it
(read, not copied), the part the Ray executor drives: the wrapper is made
first (rpc_rank), update_environment_variables(envs_list) sets this
worker's entry of the driver's list in os.environ, and only then
init_worker(all_kwargs) loads the general plugins (gpusleep-vllm's
register() runs here, seeing the copied variables) and makes the worker.
A method name or a callable is run on the wrapper (execute_method)."""

import os
from typing import Any, Callable, Dict, List, Union


class WorkerWrapperBase:
    def __init__(self, rpc_rank: int = 0) -> None:
        self.rpc_rank = rpc_rank
        self.worker: Any = None

    def update_environment_variables(self,
                                     envs_list: List[Dict[str, str]]) -> None:
        os.environ.update(envs_list[self.rpc_rank])

    def init_worker(self, all_kwargs: List[Dict[str, Any]]) -> None:
        from vllm.plugins import load_general_plugins
        from vllm.v1.worker.gpu_worker import Worker
        load_general_plugins()
        self.worker = Worker(**all_kwargs[self.rpc_rank])

    def execute_method(self, method: Union[str, Callable[..., Any]],
                       *args: Any) -> Any:
        if callable(method):
            return method(self, *args)
        return getattr(self, method)(*args)

    def __getattr__(self, attr: str) -> Any:
        if attr == "worker":
            raise AttributeError(attr)
        return getattr(self.worker, attr)
