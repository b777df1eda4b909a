#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The demo's second part (docs/demo.md, docs/arbiter.md): two engines,
policy and reward, and a trainer sharing one GPU (the host backend's:
memory is host RAM) through leases. Each step the trainer takes what it
needs with gpusleep.acquire() (the module picks the victims: the reward
engine first, its priority is lower; in each engine its discarded KV
cache before its backed-up weights), trains in that memory, and gives the
lease back at the end of its with block, which wakes both engines; then
each engine checks that it still serves its weights.

    leases.py --engine NAME=SOCKET [--engine ...] [--steps N]
              [--train-mib N] [--rows FILE] [--json]

Prints one line per phase (a table, or JSON lines with --json); --rows
FILE gets them too, for tools/demo/plot.py. Exit status 0 when every
check passed, 1 otherwise, 2 on bad usage."""

import argparse
import json
import os
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "user", "python"))
import gpusleep  # noqa: E402

MiB = 1 << 20
# tools/demo/demo.h: struct demo_req, struct demo_rep, enum demo_cmd/val
REQ = struct.Struct("<IIQQ")
NR_V = 24
REP = struct.Struct("<iI%dQ160s" % NR_V)
HELLO, STATS, VERIFY, QUIT = 1, 2, 6, 7
V_PID, V_DOMAIN, V_VERSION, V_PAUSED, V_ERRORS, V_COMPLETED = 0, 1, 4, 9, 15, 6


class Engine:
    def __init__(self, name, path):
        self.name = name
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        rep = self.rpc(HELLO)
        self.pid, self.domain = rep[V_PID], rep[V_DOMAIN]

    def rpc(self, cmd, a=0, b=0):
        self.s.sendall(REQ.pack(cmd, 0, a, b))
        buf = b""
        while len(buf) < REP.size:
            chunk = self.s.recv(REP.size - len(buf))
            if not chunk:
                raise ConnectionError(f"{self.name}: the engine went away")
            buf += chunk
        st, _, *rest = REP.unpack(buf)
        v, msg = rest[:NR_V], rest[NR_V]
        if st:
            why = msg.split(b"\0")[0].decode()
            raise RuntimeError(f"{self.name}: {why} ({os.strerror(-st)})")
        return v


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", action="append", required=True,
                    metavar="NAME=SOCKET")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--train-mib", type=int, default=96)
    ap.add_argument("--rows")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    engines = []
    for spec in a.engine:
        name, _, path = spec.partition("=")
        if not path:
            ap.error(f"--engine {spec}: want NAME=SOCKET")
        engines.append(Engine(name, path))
    rows = open(a.rows, "a") if a.rows else None
    failed = []
    t0 = time.monotonic()

    def row(step, phase, dur=None, **kw):
        mem = {e.name: rss(e.pid) for e in engines}
        mem["trainer"] = rss(os.getpid())
        r = {"part": "leases", "unix_s": time.time(), "step": step,
             "phase": phase, "dur_s": dur, "mem_bytes": mem, **kw}
        if rows:
            rows.write(json.dumps(r) + "\n")
            rows.flush()
        if a.json:
            print(json.dumps(r), flush=True)
            return
        cells = "  ".join(f"{n} {m / MiB:6.1f}" for n, m in mem.items())
        d = f"{dur * 1e3:8.1f} ms" if dur is not None else " " * 11
        extra = kw.get("note", "")
        print(f"{time.monotonic() - t0:6.2f}s  step {step}  {phase:<10} "
              f"{d}  MiB: {cells}  {extra}", flush=True)

    gpu = "host"
    need = a.train_mib * MiB
    if not a.json:
        print(f"trainer: {a.steps} steps, each needing {a.train_mib} MiB on "
              f"the GPU ({gpu}), shared with "
              + ", ".join(f"{e.name} (domain {e.domain}, priority "
                          f"{gpusleep.tenant(e.domain).priority})"
                          for e in engines), flush=True)
    row(0, "start")
    for step in range(1, a.steps + 1):
        t = time.monotonic()
        with gpusleep.acquire(gpu, need, priority=5) as lease:
            took = [{"domain": v.name, "tags": v.tags,
                     "freed_mib": round(v.freed_bytes / MiB, 1)}
                    for v in lease.victims]
            row(step, "acquired", time.monotonic() - t, lease=lease.id,
                taken_mib=round(lease.taken_bytes / MiB, 1), victims=took,
                note="lease %d: " % lease.id + ", ".join(
                    "%s %s" % (v["domain"], "+".join(v["tags"]))
                    for v in took))
            for e in engines:
                st = gpusleep.state(e.domain)
                if st.released and not gpusleep.tenant(e.domain).lease_id:
                    failed.append(f"step {step}: {e.name} released but "
                                  "not leased")
            # the training step: the memory the engines gave, touched
            t = time.monotonic()
            buf = bytearray(need)
            buf[::4096] = b"\x01" * len(range(0, need, 4096))
            row(step, "trained", time.monotonic() - t)
            del buf
            t = time.monotonic()
        # the with block's end gave the lease back: both engines resumed
        row(step, "returned", time.monotonic() - t,
            note="lease %d given back" % lease.id)
        for e in engines:
            st = gpusleep.state(e.domain)
            if st.state != "awake":
                failed.append(f"step {step}: {e.name} {st.state} after the "
                              "lease's end")
            v = e.rpc(STATS)
            try:
                e.rpc(VERIFY, v[V_VERSION])
            except RuntimeError as err:
                failed.append(f"step {step}: {err}")
            if v[V_ERRORS]:
                failed.append(f"step {step}: {e.name} saw {v[V_ERRORS]} "
                              "errors")
    for e in engines:
        try:
            e.rpc(QUIT)	# the engine's own verdict
        except (RuntimeError, ConnectionError) as err:
            failed.append(f"{e.name} at its end: {err}")
    if rows:
        rows.close()
    for f in failed:
        print(f"demo: FAIL: {f}", file=sys.stderr)
    if not a.json:
        print("leases: %s" % ("every engine woke with its weights after "
                              "each lease" if not failed else "FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
