# SPDX-License-Identifier: GPL-2.0
"""A trainer as slime runs Megatron with --offload (THUDM/slime at
624b824a: slime/ray/actor_group.py starts it with LD_PRELOAD of
torch_memory_saver_hook_mode_preload*.so, TMS_INIT_ENABLE=1 and
TMS_INIT_ENABLE_CPU_BACKUP=1; slime/backends/megatron_utils/actor.py
calls torch_memory_saver.pause() in sleep() and resume() in wake_up(),
and wraps the weight update in torch_memory_saver.disable()), without
PyTorch: its "CUDA" allocations are cudaMalloc calls through the PLT of a
library linked against the stand-in runtime (build/tests/host/fakecudart),
as PyTorch's libc10_cuda makes them. Run by test_py_tms_preload.py with
that environment; lines in on stdin, lines out:

  alloc           params (64 MiB, from the start: tag "default", backed
                  up), grads (32 MiB in region(tag="grad_buffer",
                  enable_cpu_backup=False), as slime's Megatron patch),
                  outside (8 MiB inside disable(): the runtime's own);
                  "allocated PARAMS GRADS OUTSIDE RUNTIME_BYTES"
  pause / resume  torch_memory_saver.pause() / resume();
                  "paused RSS_BEFORE RSS_AFTER FREED_default FREED_grad
                  OUTSIDE_OK"
                  / "resumed PARAMS_OK GRADS_ZERO OUTSIDE_OK"
  cpause          tms_pause(NULL) of the hook library, as a C caller
                  would: "cpause RET"
  impl            what slime reads: "impl INTERESTING"
  window          enter torch_memory_saver.releasable() (a release from
                  another process is drained meanwhile): "window"
  endwindow       leave it (what was released is resumed): "endwindow
                  PARAMS_OK GRADS_ZERO OUTSIDE_OK"
  quit
"""

import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.dont_write_bytecode = True

MiB = 1 << 20
SIZES = {"params": 64 * MiB, "grads": 32 * MiB, "outside": 8 * MiB}


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pattern(n, seed):
    return (bytes((i * seed) & 0xff for i in range(251)) * (n // 251 + 1))[:n]


def main():
    import torch_memory_saver
    saver = torch_memory_saver.torch_memory_saver
    client = ctypes.CDLL(os.path.join(REPO, "build", "tests", "host",
                                      "fakecudart", "libcudart_client.so"))
    client.client_malloc.restype = ctypes.c_void_p
    client.client_malloc.argtypes = [ctypes.c_size_t]
    rt = ctypes.CDLL("libcudart.so.12")
    rt.fakecudart_live_bytes.restype = ctypes.c_size_t
    ptrs = {}
    want = {}
    window = None
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "alloc":
            ptrs["params"] = client.client_malloc(SIZES["params"])
            with saver.region(tag="grad_buffer", enable_cpu_backup=False):
                ptrs["grads"] = client.client_malloc(SIZES["grads"])
            with saver.disable():
                ptrs["outside"] = client.client_malloc(SIZES["outside"])
            for k, seed in (("params", 7), ("grads", 11), ("outside", 13)):
                want[k] = pattern(SIZES[k], seed)
                ctypes.memmove(ptrs[k], want[k], SIZES[k])
            print("allocated", *(hex(ptrs[k] or 0) for k in SIZES),
                  rt.fakecudart_live_bytes(), flush=True)
        elif cmd[0] == "impl":
            cdll = saver._impl._binary_wrapper.cdll
            print("impl", int(cdll.tms_get_interesting_region()),
                  flush=True)
        elif cmd[0] == "pause":
            before = rss()
            saver.pause()
            after = rss()
            freed = [saver.last_result(t)["mm"]["freed_bytes"]
                     for t in ("default", "grad_buffer")]
            outside = ctypes.string_at(ptrs["outside"], SIZES["outside"])
            print("paused", before, after, *freed,
                  int(outside == want["outside"]), flush=True)
        elif cmd[0] == "cpause":
            cdll = saver._impl._binary_wrapper.cdll
            print("cpause", cdll.tms_pause(None), flush=True)
        elif cmd[0] in ("resume", "endwindow"):
            if cmd[0] == "resume":
                saver.resume()
            else:
                window.__exit__(None, None, None)
            ok = [ctypes.string_at(ptrs["params"], SIZES["params"]) ==
                  want["params"],
                  ctypes.string_at(ptrs["grads"], SIZES["grads"]) ==
                  bytes(SIZES["grads"]),
                  ctypes.string_at(ptrs["outside"], SIZES["outside"]) ==
                  want["outside"]]
            print("resumed" if cmd[0] == "resume" else "endwindow",
                  *map(int, ok), flush=True)
        elif cmd[0] == "window":
            window = saver.releasable()
            window.__enter__()
            print("window", flush=True)
        else:
            print("error unknown command", cmd[0], flush=True)
    saver.close()


if __name__ == "__main__":
    main()
