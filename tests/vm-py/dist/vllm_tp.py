# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
torch and vllm (vLLM 0.33.0's) on PYTHONPATH: one worker of a vLLM engine
with tensor_parallel_size=2, started as vLLM's executor starts each
(WorkerWrapperBase with its rpc_rank, init_worker, init_device: the
world and the TP group, over the stand-in's socket at INIT, load_model,
initialize_from_config), of a config with sleep mode and
--sleep-mode-backend gpusleep. Argument: RANK INIT. Then lines in on
stdin, as vLLM's collective_rpc calls every worker (the test sends each
line to both workers), lines out:

  sleep LEVEL       worker.sleep(level): "slept OP_ID KIND" (the group
                    operation's id and kind, the same on both workers),
                    or "failed CLASS RANK PEER_ERRNO"
  wake [TAG...]     worker.wake_up(tags or None): "woke OP_ID KIND" or
                    "failed ..."
  discard TAG...    worker.discard(tags): as sleep
  faildrain         this worker's next drain fails (EIO): "armed"
  peekdrain NAME    this worker's next drain first reads the state of
                    domain NAME: "armed"
  peeked            what it read: "peeked STATE RELEASED" (RELEASED
                    "-" for none)
  data              "data WEIGHTS_OK KV_ZERO RUNTIME_OK"
  quit
Prints "ready DOMAIN" once up."""

import ctypes
import errno
import sys

import gpusleep

SIZE = 1 << 20


def main(rank, init):
    from vllm.config import ModelConfig, ParallelConfig, VllmConfig
    from vllm.v1.worker.worker_base import WorkerWrapperBase
    import gpusleep.vllm as gv
    cfg = VllmConfig(model_config=ModelConfig(
        enable_sleep_mode=True, sleep_mode_backend="gpusleep",
        enable_cumem_allocator=True),
        parallel_config=ParallelConfig(tensor_parallel_size=2))
    w = WorkerWrapperBase(rpc_rank=rank)
    w.init_worker([dict(vllm_config=cfg, local_rank=r, rank=r,
                        distributed_init_method=f"file://{init}",
                        is_driver_worker=r == 0) for r in range(2)])
    w.init_device()
    w.load_model()
    w.initialize_from_config([None, None])
    worker = w.worker
    a = gv.GpuSleepAllocator.get_instance()
    eng = a.engine
    model = worker.model_runner.model
    wp, kp, rp = model.weights.ptr, worker.kv_cache.ptr, worker.runtime.ptr
    want = bytes((i * (rank + 3)) & 0xff for i in range(256)) * (SIZE // 256)
    ctypes.memmove(wp, want, SIZE)
    ctypes.memset(kp, 0xcd, SIZE)
    ctypes.memset(rp, 0x42, 4096)
    print("ready", eng.name, flush=True)
    peeked = []

    def arm(fn):
        orig = eng.drain

        def drain(tags, abort):
            eng.drain = orig
            return fn(tags, abort, orig)
        eng.drain = drain

    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        try:
            if cmd[0] in ("sleep", "wake", "discard"):
                if cmd[0] == "sleep":
                    worker.sleep(level=int(cmd[1]))
                elif cmd[0] == "wake":
                    worker.wake_up(cmd[1:] or None)
                else:
                    worker.discard(tuple(cmd[1:]))
                r = a.last_result
                print({"sleep": "slept", "wake": "woke",
                       "discard": "discarded"}[cmd[0]],
                      r.op_id if r is not None else 0,
                      r.kind if r is not None else "-", flush=True)
            elif cmd[0] == "faildrain":
                arm(lambda tags, abort, orig: -errno.EIO)
                print("armed", flush=True)
            elif cmd[0] == "peekdrain":
                def peek(tags, abort, orig, name=cmd[1]):
                    peeked.append(gpusleep.state(name))
                    return orig(tags, abort)
                arm(peek)
                print("armed", flush=True)
            elif cmd[0] == "peeked":
                st = peeked.pop()
                print("peeked", st.state, ",".join(st.released) or "-",
                      flush=True)
            elif cmd[0] == "data":
                ok = [ctypes.string_at(wp, SIZE) == want,
                      ctypes.string_at(kp, SIZE) == bytes(SIZE),
                      ctypes.string_at(rp, 4096) == b"\x42" * 4096]
                print("data", *map(int, ok), flush=True)
            else:
                print("error unknown command", cmd[0], flush=True)
        except gpusleep.GpuSleepError as e:
            print("failed", type(e).__name__, getattr(e, "rank", None),
                  e.peer_errno, flush=True)
    w.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
