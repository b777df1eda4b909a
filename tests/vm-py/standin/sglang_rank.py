# SPDX-License-Identifier: GPL-2.0
"""One SGLang scheduler process of the stand-in SGLang (sglang 0.5.23's
Scheduler with gpusleep's patch: tests/vm-py/standin/sglang/srt/
managers/scheduler.py), as SGLang's run_scheduler_process starts it: the
ranks published first (get_parallel()), then Scheduler(server_args,
port_args), then its event loop. Its "tokenizer" is stdin: each line is
a request for the scheduler (answered "ok" once the scheduler has
processed it, at its next receive) or a query (answered at the next
receive too, so it sees what the scheduler did with the requests and
the domain's events of the iteration that read it):

    submit N      a generate request of N steps
    abort         AbortReq(abort_all=True), as SGLang's tokenizer sends it
    pause MODE    PauseGenerationReqInput(mode=MODE) (a user's pause)
    continue      ContinueGenerationReqInput()
    release [T..] ReleaseMemoryOccupationReqInput(tags) (SGLang's own)
    resume [T..]  ResumeMemoryOccupationReqInput(tags)
    load DIR      UpdateWeightFromDiskReqInput(model_path=DIR)
    status        "status RUNNING WAITING FINISHED PAUSED"
    aborts        "aborts N": the abort_request calls that had abort_all
    sum           "sum HEX": a digest of the weights
    buf           "buf HEX": a digest of the model's buffer (static state)
    kv            "kv 1" when the KV cache is zero, else "kv 0"
    offload       "offload TAGS": SGLang's offload_tags, sorted
    quit

(sum, buf and kv read the memory: only while it is mapped.)

Usage: GPUSLEEP_ENGINE=NAME sglang_rank.py TP_RANK [--dp D] [--tp-size N]
       [--backup] (--backup: --enable-weights-cpu-backup)"""

import argparse
import ctypes
import hashlib
import os
import select
import sys
import types

from sglang.srt import runtime_context
from sglang.srt.managers import io_struct
from sglang.srt.managers.scheduler import SIZE, Scheduler, _StandinReq


class Tokenizer:
    """The scheduler's input: requests from stdin, answered once
    processed; queries answered then too."""

    def __init__(self):
        self.buf = b""
        self.replies = []
        self.scheduler = None
        self.n = 0

    def reply(self, *words):
        print(*words, flush=True)

    def recv_requests(self):
        # what was received before was processed by now
        for r in self.replies:
            if callable(r):
                r()
            else:
                self.reply(r)
        self.replies = []
        idle = not self.scheduler.waiting_queue and \
            self.scheduler.running_batch.is_empty()
        if not select.select([0], [], [], 0.01 if idle else 0)[0]:
            return []
        chunk = os.read(0, 4096)
        if not chunk:
            self.scheduler.gracefully_exit = True
            return []
        self.buf += chunk
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            req = self.line(line.decode().split())
            if req is not None:
                out.append(req)
                self.replies.append("ok")
        return out

    def line(self, w):
        req = self.request(w)
        if req is None:
            self.replies.append(lambda: self.query(w))
        return req

    def request(self, w):
        if w[0] == "submit":
            self.n += 1
            return _StandinReq(f"r{self.n}", int(w[1]))
        if w[0] == "abort":
            return io_struct.AbortReq(abort_all=True)
        if w[0] == "pause":
            return io_struct.PauseGenerationReqInput(mode=w[1])
        if w[0] == "continue":
            return io_struct.ContinueGenerationReqInput()
        if w[0] == "release":
            return io_struct.ReleaseMemoryOccupationReqInput(
                tags=w[1:] or None)
        if w[0] == "resume":
            return io_struct.ResumeMemoryOccupationReqInput(
                tags=w[1:] or None)
        if w[0] == "load":
            return io_struct.UpdateWeightFromDiskReqInput(model_path=w[1])
        return None

    def query(self, w):
        s = self.scheduler
        if w[0] == "status":
            self.reply("status", len(s.running_batch.reqs),
                       len(s.waiting_queue), s.finished,
                       int(s._engine_paused))
        elif w[0] == "aborts":
            self.reply("aborts", s.abort_all_calls)
        elif w[0] == "sum":
            model = s.tp_worker.model_runner.model
            d = hashlib.sha256(ctypes.string_at(model.weights.ptr, SIZE))
            self.reply("sum", d.hexdigest()[:16])
        elif w[0] == "buf":
            model = s.tp_worker.model_runner.model
            d = hashlib.sha256(model.rotary.clone())
            self.reply("buf", d.hexdigest()[:16])
        elif w[0] == "kv":
            self.reply("kv", int(ctypes.string_at(s.kv.ptr, SIZE) ==
                                 bytes(SIZE)))
        elif w[0] == "offload":
            self.reply("offload", ",".join(sorted(
                s.weight_updater.offload_tags)) or "-")
        elif w[0] == "quit":
            s.gracefully_exit = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tp_rank", type=int)
    ap.add_argument("--dp", type=int, default=None)
    ap.add_argument("--tp-size", type=int, default=1)
    ap.add_argument("--backup", action="store_true")
    a = ap.parse_args()
    server_args = types.SimpleNamespace(
        tp_size=a.tp_size, pp_size=1, enable_dp_attention=False,
        enable_memory_saver=True, enable_weights_cpu_backup=a.backup)
    runtime_context.publish(server_args, role="scheduler",
                            ranks=runtime_context.SpawnRanks(
                                world_rank=a.tp_rank, dp_rank=a.dp))
    tok = Tokenizer()
    s = Scheduler(server_args, types.SimpleNamespace(tokenizer=tok))
    tok.scheduler = s
    print("ready", s.gpusleep.name, flush=True)
    s.event_loop_normal()


if __name__ == "__main__":
    sys.exit(main())
