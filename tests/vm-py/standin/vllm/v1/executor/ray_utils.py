# SPDX-License-Identifier: GPL-2.0
"""RayWorkerWrapper (vllm/v1/executor/ray_utils.py: WorkerWrapperBase as a
Ray actor), and the stand-in of Ray itself: an actor is a process of its
own, started with the node's environment, not the driver's (here: only
PATH and the job's code paths), which runs the calls the executor sends
it. Requests and answers are JSON lines on its stdin and stdout; a call
is a method name or "module:function" (a function given the wrapper, as
collective_rpc runs a callable)."""

import importlib
import json
import sys
import traceback
from typing import Any

from vllm.v1.worker.worker_base import WorkerWrapperBase


class RayWorkerWrapper(WorkerWrapperBase):
    pass


def _resolve(method: str) -> Any:
    if ":" not in method:
        return method
    mod, fn = method.split(":", 1)
    return getattr(importlib.import_module(mod), fn)


def actor_main() -> None:
    wrapper = RayWorkerWrapper(rpc_rank=int(sys.argv[1]))
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = {"ok": wrapper.execute_method(_resolve(req["method"]),
                                                *req["args"])}
        except Exception:
            out = {"error": traceback.format_exc()}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    actor_main()
