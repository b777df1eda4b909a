# SPDX-License-Identifier: GPL-2.0
"""A stand-in SGLang scheduler process (one TP rank) with the gpusleep
patch of docs/integrations/sglang.md applied: SchedulerHook made in
__init__ before the model is loaded, poll() once per event-loop iteration,
no admission while paused. Its "model" is weights and a KV cache
allocated in torch_memory_saver regions (the stand-in torch). Requests run
a number of iterations each. Driven by lines on stdin:

    submit N      a request of N iterations (waits while paused)
    status        "status RUNNING WAITING FINISHED"
    aborts        "aborts N": the abort_request calls that had abort_all
    load DIR      update_weights_from_disk: tensor "w" of DIR's
                  safetensors file (gpusleep.weights.load, as SGLang's
                  loader reads DIR/*.safetensors) into the weights
    sum           "sum WEIGHTS_HEX": a digest of the weights
    kv            "kv 1" when the KV cache is zero, else "kv 0" (only
                  while it is not released: reading it then faults)
    quit

Usage: GPUSLEEP_ENGINE=NAME sglang_scheduler.py TP_RANK"""

import ctypes
import hashlib
import os
import select
import sys

import torch
import torch_memory_saver

SIZE = 1 << 20


def ptr(t):
    return t.data_ptr() if hasattr(t, "data_ptr") else t


class Scheduler:
    def __init__(self, tp_rank):
        self.tp_rank = tp_rank
        # the patch: before the model runner allocates anything
        from gpusleep.sglang import SchedulerHook
        self.gpusleep = SchedulerHook(self, engine=os.environ.get(
            "GPUSLEEP_ENGINE", "sglang"), tp_rank=self.tp_rank)
        saver = torch_memory_saver.torch_memory_saver
        with saver.region(tag="weights", enable_cpu_backup=True):
            self.weights = ptr(torch.empty(SIZE))
        with saver.region(tag="kv_cache"):
            self.kv = ptr(torch.empty(SIZE))
        ctypes.memset(self.weights, tp_rank + 1, SIZE)
        ctypes.memset(self.kv, 0xcd, SIZE)
        self.waiting, self.running, self.finished = [], [], 0
        self.flushes = 0
        self.abort_all_calls = 0

    # what SGLang's scheduler has
    def is_fully_idle(self):
        return not self.running and not self.waiting

    def flush_cache(self):
        self.flushes += 1
        return self.is_fully_idle()

    def abort_request(self, recv_req):
        # SGLang's Scheduler.abort_request(recv_req: AbortReq)
        # (python/sglang/srt/managers/scheduler.py): requests whose rid
        # starts with recv_req.rid, or every one with recv_req.abort_all.
        # It has no abort_all() method.
        from sglang.srt.managers.io_struct import AbortReq
        assert isinstance(recv_req, AbortReq), recv_req
        if recv_req.abort_all:
            self.abort_all_calls += 1
            self.waiting, self.running = [], []

    def update_weights_from_disk(self, path):
        import gpusleep.weights
        (w,) = [t for t in gpusleep.weights.load(path) if t.name == "w"]
        data = bytes(w.data)
        ctypes.memmove(self.weights, data, min(len(data), SIZE))

    def get_new_batch_prefill(self):
        # the patch: admission
        if self.gpusleep.paused:
            return None
        batch, self.waiting = self.waiting, []
        return batch

    def event_loop_iteration(self):
        # the patch: the domain's events, once per iteration
        self.gpusleep.poll()
        self.running += self.get_new_batch_prefill() or []
        for r in self.running:
            r[0] -= 1
        done = [r for r in self.running if r[0] <= 0]
        self.finished += len(done)
        self.running = [r for r in self.running if r[0] > 0]


def main(tp_rank):
    s = Scheduler(int(tp_rank))
    print("ready", s.gpusleep.name, flush=True)
    buf = b""
    while True:
        r = select.select([0], [], [], 0.01)[0]
        if r:
            chunk = os.read(0, 4096)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                w = line.decode().split()
                if w[0] == "submit":
                    s.waiting.append([int(w[1])])
                    print("ok", flush=True)
                elif w[0] == "status":
                    print("status", len(s.running), len(s.waiting),
                          s.finished, flush=True)
                elif w[0] == "aborts":
                    print("aborts", s.abort_all_calls, flush=True)
                elif w[0] == "load":
                    s.update_weights_from_disk(w[1])
                    print("ok", flush=True)
                elif w[0] == "sum":
                    d = hashlib.sha256(ctypes.string_at(s.weights, SIZE))
                    print("sum", d.hexdigest()[:16], flush=True)
                elif w[0] == "kv":
                    kv0 = ctypes.string_at(s.kv, SIZE) == bytes(SIZE)
                    print("kv", int(kv0), flush=True)
                elif w[0] == "quit":
                    return
        s.event_loop_iteration()


if __name__ == "__main__":
    main(sys.argv[1])
