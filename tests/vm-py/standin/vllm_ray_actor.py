# SPDX-License-Identifier: GPL-2.0
"""The stand-in of a Ray actor for vLLM's RayExecutorV2
(tests/vm-py/standin/vllm/v1/executor/ray_executor_v2.py): a process
started with the node's environment, not the driver's, which runs the
calls it is sent (pickled, one per line): "make" receives the
RayWorkerProc, "initialize_worker" and the worker's methods run on it,
"module:function" runs a function given it."""

import base64
import importlib
import pickle
import sys
import traceback


def main():
    proc = None
    for line in sys.stdin:
        method, args = pickle.loads(base64.b64decode(line))
        try:
            if method == "make":
                proc, out = args[0], None
            elif ":" in method:
                mod, fn = method.split(":", 1)
                out = getattr(importlib.import_module(mod), fn)(proc, *args)
            elif method == "initialize_worker":
                out = proc.initialize_worker(*args)
            else:
                out = getattr(proc.worker, method)(*args)
            ans = (True, out)
        except Exception:
            ans = (False, traceback.format_exc())
        print(base64.b64encode(pickle.dumps(ans)).decode(), flush=True)


if __name__ == "__main__":
    main()
