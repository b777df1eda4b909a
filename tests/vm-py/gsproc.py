#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Helper processes of the Python VM tests (driven by gstest.Proc).

  gsproc.py engine NAME [--hold] [--prefix-caching] [--no-reset]
                   [--priority N] [--yieldable]
      An Engine (gpusleep.engine) on a new domain. Prints "ready ID", then
      one line per event: "ev drain TAGS ABORT", "ev reset", "ev repair",
      "ev resume_sched", "ev cancelled". --hold: drains are answered only
      on "complete STATUS" (prints "completed True|False"). Commands:
      complete STATUS, hold 0|1, paused (prints "paused 0|1"), quit.
  gsproc.py agent DOMAIN MIB [BACKEND] [--verify]
      A MemoryManager (weights: backup, kv_cache: discard) with MIB MiB in
      each tag, weights filled with a pattern and KV with 0xab, served by
      an Agent thread (--verify: backups checksummed). Prints "ready
      BACKEND". Commands: check (prints "check weights=same|zero|diff
      kv=zero|filled|other"), fill (refills KV and the weights' pattern),
      stats (prints "stats EVENTS PAUSES RESUMES FAILURES"), corrupt
      (flips a byte of the released weights' host copy: prints "corrupted
      0|-ERRNO"), outside TORCH GRAPH (gs_agent_set_outside: prints
      "outside"), quit.
  gsproc.py trainer DOMAIN CMD [TAGS]
      One call of the gpusleep module functions: CMD release|resume|state;
      TAGS "weights,kv_cache" or "-" for None. Prints "result ..." or
      "error CLASS ERRNO REASON_NAME", and exits.
"""

import ctypes
import os
import select
import sys

import gstest  # noqa: F401  (sys.path, bytecode)
import gpusleep
from gpusleep import _lib as gslib
from gpusleep import agent as gsagent
from gpusleep import engine as gsengine

MiB = 1 << 20


def out(*words):
    print(*words, flush=True)


def engine(argv):
    name = argv[0]
    hold = "--hold" in argv
    # --tags a,b:kv_cache,c: a declaration (name or name:kind)
    tags = None
    if "--tags" in argv:
        tags = [tuple(t.split(":")) if ":" in t else t
                for t in argv[argv.index("--tags") + 1].split(",")]
    # shared: the tests run the agent in a process of its own
    prio = int(argv[argv.index("--priority") + 1]) \
        if "--priority" in argv else 0
    eng = gsengine.Engine(name, gpu="vm-py",
                          prefix_caching="--prefix-caching" in argv,
                          prefix_cache_reset="--no-reset" not in argv,
                          shared=True, tags=tags, priority=prio,
                          yieldable="--yieldable" in argv)
    st = {"hold": hold}

    def drain(tags, abort):
        out("ev drain", ",".join(tags), int(abort))
        return gsengine.PENDING if st["hold"] else 0

    eng.drain = drain
    eng.reset_caches = lambda: out("ev reset")
    eng.repair_kv = lambda: out("ev repair")
    eng.resume_sched = lambda: out("ev resume_sched")
    eng.drain_cancelled = lambda: out("ev cancelled")
    out("ready", eng.id)
    stdin = sys.stdin.fileno()
    buf = b""
    while True:
        r, _, _ = select.select([eng.fileno(), stdin], [], [])
        if eng.fileno() in r:
            try:
                eng.dispatch()
            except gpusleep.EngineGone:
                out("gone")
                return 0
        if stdin in r:
            data = os.read(stdin, 4096)
            if not data:
                return 0
            buf += data
            *cmds, buf = buf.split(b"\n")
            for c in cmds:
                w = c.decode().split()
                if not w:
                    continue
                if w[0] == "quit":
                    eng.close()
                    return 0
                if w[0] == "complete":
                    out("completed", eng.complete(int(w[1])))
                elif w[0] == "hold":
                    st["hold"] = w[1] == "1"
                    out("holding", int(st["hold"]))
                elif w[0] == "paused":
                    out("paused", int(eng.sched_paused))


def pattern(n):
    return (bytes(range(251)) * (n // 251 + 1))[:n]


def agent(argv):
    dom, mib = int(argv[0]), int(argv[1])
    backend = argv[2] if len(argv) > 2 and not argv[2].startswith("--") \
        else "host"
    mm = gsagent.MemoryManager(backend)
    mm.set_policy("weights", backup=True)
    mm.set_policy("kv_cache", backup=False)
    size = mib * MiB
    w = mm.alloc("weights", size)
    k = mm.alloc("kv_cache", size)
    want = pattern(size)
    w.view[:] = want
    k.view[:] = b"\xab" * size
    if "--verify" in argv:
        mm.set_verify(True)
    a = gsagent.Agent(dom, mm)
    # --graph: 1 MiB in cuda_graph, a tag the domain declared (by name:
    # the memory manager names tags as the domain does once attached)
    g = mm.alloc("cuda_graph", MiB) if "--graph" in argv else None
    out("ready", mm.backend)
    for line in sys.stdin:
        c = line.split()
        if not c:
            continue
        if c[0] == "quit":
            break
        if c[0] == "check":
            kv = k.view.tobytes()
            kvs = ("zero" if kv == bytes(size) else
                   "filled" if kv == b"\xab" * size else "other")
            wv = w.view.tobytes()
            out("check", "weights=" + ("same" if wv == want else
                                       "zero" if wv == bytes(size) else
                                       "diff"), "kv=" + kvs)
        elif c[0] == "fill":
            k.view[:] = b"\xab" * size
            w.view[:] = want
            out("filled")
        elif c[0] == "corrupt":
            host = ctypes.c_void_p()
            r = gslib.lib().gs_mm_backup_ptr(mm.handle, w.addr + 4099, 1,
                                             ctypes.byref(host))
            if r == 0 and host.value:
                b = ctypes.c_ubyte.from_address(host.value)
                b.value ^= 0x20
            out("corrupted", r if r else (0 if host.value else -1))
        elif c[0] == "outside":
            a.set_outside(int(c[1]), int(c[2]))
            out("outside")
        elif c[0] == "stats":
            s = a.stats()
            out("stats", s["events"], s["pauses"], s["resumes"],
                s["failures"])
    a.close()
    if g is not None:
        mm.free(g)
    mm.close()
    return 0


def trainer(argv):
    dom, cmd = argv[0], argv[1]
    tags = None
    if len(argv) > 2 and argv[2] != "-":
        tags = argv[2].split(",")
    try:
        if cmd == "release":
            r = gpusleep.release(dom, tags)
        elif cmd == "resume":
            r = gpusleep.resume(dom, tags)
        else:
            s = gpusleep.state(dom)
            out("result", s.state, ",".join(s.released) or "-")
            return 0
    except gpusleep.GpuSleepError as e:
        out("error", type(e).__name__, e.errno, e.reason_name)
        return 0
    out("result", r.kind, ",".join(r.tags) or "-", r.error,
        sum(r.bytes.values()))
    return 0


if __name__ == "__main__":
    role = sys.argv[1]
    sys.exit({"engine": engine, "agent": agent,
              "trainer": trainer}[role](sys.argv[2:]))
