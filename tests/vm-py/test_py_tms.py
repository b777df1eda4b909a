#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""gpusleep.torch_memory_saver used the way an engine uses
torch_memory_saver: allocations inside region(tag, enable_cpu_backup) (made
here through gpusleep_malloc, the pluggable allocator's entry point that
PyTorch would call, on the host backend), then pause / resume from the
engine's own thread, through the module: the weights come back identical,
the KV cache zero, and a trainer (a separate process) sees the same state
and can release / resume the same domain while the engine's loop runs.
Last, the same drop-in as a trainer's (issue 37): its tags released,
torch_memory_saver.acquire() takes their size from an engine of another
process on the same GPU (the host backend's) in a lease, resumes them
for the block and at its end releases them again and gives the lease
back, which wakes the engine. SKIPs without /dev/gpusleep."""

import ctypes
import os
import select
import threading

os.environ["GPUSLEEP_BACKEND"] = "host"		# before the first allocation

from gstest import Tap, Proc, check, need_device, raises, until
import gpusleep
from gpusleep import _lib
from gpusleep.torch_memory_saver import torch_memory_saver as tms
import gpusleep.torch_memory_saver as tms_module

NAME = f"pytms{os.getpid()}"
SIZE = 4 << 20
TESTS = ["enabled, read-only; a bad tag name refused",
         "region tags allocations and sets the policies",
         "the agent serves the domain after the first region",
         "pause() releases every tag through the module",
         "resume weights: identical; KV still released",
         "resume(): KV zero and repaired, scheduling resumed",
         "pause/resume kv_cache alone, weights untouched",
         "a trainer process releases and resumes while the engine loop runs",
         "a tag first used after the domain was made: refused, the fix named",
         "acquire(): the trainer's tags back from another tenant through a "
         "lease, released again and the lease given back at the block's end"]
S = {"events": []}


def pattern(n):
    return (bytes(range(253)) * (n // 253 + 1))[:n]


def view(addr):
    return memoryview((ctypes.c_ubyte * SIZE).from_address(addr)).cast("B")


def enabled():
    check(tms.enabled and tms_module.enabled, "enabled")
    raises(AttributeError, setattr, tms, "enabled", False)
    with raises_ctx(gpusleep.InvalidRequest):
        with tms.region(tag="Bogus!"):
            pass


class raises_ctx:
    def __init__(self, cls):
        self.cls = cls

    def __enter__(self):
        return self

    def __exit__(self, t, e, tb):
        if t is None:
            raise AssertionError(f"no {self.cls.__name__}")
        return issubclass(t, self.cls)


def regions():
    L = _lib.lib()
    ev = S["events"]
    # made before any tag is used: SGLang's tags; the graph memory is a
    # tag of the domain's own
    tms.configure(name=NAME,
                  drain=lambda tags, abort: ev.append(("drain", tuple(tags))),
                  reset_caches=lambda: ev.append(("reset",)),
                  repair_kv=lambda: ev.append(("repair",)),
                  resume_sched=lambda: ev.append(("sched",)))
    # callbacks of the caller's: its loop dispatches (gpusleep.sglang's
    # scheduler does), no thread of the drop-in reads the fd besides
    check(not tms.engine.served, "the drop-in serves a domain whose "
          "engine loop dispatches itself")
    with tms.region(tag="weights", enable_cpu_backup=True):
        w = L.gpusleep_malloc(SIZE, 0, None)
    with tms.region(tag="kv_cache", enable_cpu_backup=False):
        k = L.gpusleep_malloc(SIZE, 0, None)
        with tms.region(tag="weights", enable_cpu_backup=True):
            w2 = L.gpusleep_malloc(4096, 0, None)
        k2 = L.gpusleep_malloc(4096, 0, None)	# back to the outer tag
    with tms.region(tag="cuda_graph"):
        g = L.gpusleep_malloc(4096, 0, None)
    check(w and k and w2 and k2 and g, "allocations")
    check(tms.tags == ["weights", "kv_cache", "cuda_graph"], repr(tms.tags))
    mm = L.gpusleep_mm()
    tag_of = L.gs_mm_tag_of
    check(tag_of(mm, w) == _lib.TAG_WEIGHTS and tag_of(mm, w2) ==
          _lib.TAG_WEIGHTS, "weights tagged")
    check(tag_of(mm, k) == _lib.TAG_KV_CACHE and tag_of(mm, k2) ==
          _lib.TAG_KV_CACHE, "kv tagged")
    check(tag_of(mm, g) == 1 << 2, "cuda_graph tagged: bit 2")
    for t, pol in ((_lib.TAG_WEIGHTS, _lib.GS_MM_BACKUP),
                   (_lib.TAG_KV_CACHE, _lib.GS_MM_DISCARD)):
        info = _lib.gs_mm_tag_info()
        check(L.gs_mm_tag_info(mm, t, ctypes.byref(info)) == 0, "tag_info")
        check(info.policy == pol, f"tag {t}: policy {info.policy}")
    S["w"], S["k"] = view(w), view(k)
    S["want"] = pattern(SIZE)
    S["w"][:] = S["want"]
    S["k"][:] = b"\xcd" * SIZE


def agent_up():
    S["ctl"] = c = gpusleep.Controller(NAME)
    st = c.state()
    check(st.agent_attached and st.state == "awake", repr(st))
    check(st.id == tms.engine.id, "same domain")


def pause_all():
    r = tms.pause()
    check(r.ok and r.tags == ["weights", "kv_cache", "cuda_graph"], repr(r))
    check(r.bytes["weights"] >= SIZE and r.bytes["kv_cache"] >= SIZE and
          r.bytes["cuda_graph"] >= 4096, repr(r.bytes))
    # what the agent measured: the memory came free (host backend: RSS)
    for t in ("weights", "kv_cache"):
        lr = tms.last_result(t)
        check(lr is not None and lr["mm"]["status"] == 0 and
              lr["mm"]["measured"] and not lr["mm"]["shortfall"] and
              lr["mm"]["bytes"] == r.bytes[t], repr(lr))
    ev = S["events"]
    check(ev[:2] == [("drain", ("weights", "kv_cache", "cuda_graph")),
                     ("reset",)], repr(ev))
    st = S["ctl"].state()
    check(st.released == ["weights", "kv_cache", "cuda_graph"], repr(st))
    check(gpusleep.is_sleeping(NAME), "a trainer sees it sleeping")
    e = raises(gpusleep.AlreadyReleased, tms.pause, "weights")
    check(e.tags == ["weights"], repr(e.tags))


def resume_weights():
    r = tms.resume("weights")
    check(r.ok and r.tags == ["weights"], repr(r))
    check(S["w"].tobytes() == S["want"], "weights identical")
    check(S["ctl"].state().released == ["kv_cache", "cuda_graph"],
          "kv and the graph still released")
    check(("sched",) not in S["events"], "scheduling resumed too early")


def resume_rest():
    r = tms.resume()
    check(r.ok and r.tags == ["kv_cache", "cuda_graph"], repr(r))
    check(S["k"].tobytes() == bytes(SIZE), "KV zero")
    check(("repair",) in S["events"] and ("sched",) in S["events"],
          repr(S["events"]))
    check(not S["ctl"].is_sleeping(), "awake")
    e = raises(gpusleep.NotReleased, tms.resume, "kv_cache")
    check(e.tags == ["kv_cache"], repr(e.tags))


def kv_only():
    S["k"][:] = b"\xcd" * SIZE
    check(tms.pause("kv_cache").tags == ["kv_cache"], "pause kv")
    check(tms.resume().tags == ["kv_cache"], "resume")
    check(S["k"].tobytes() == bytes(SIZE), "KV zero")
    check(S["w"].tobytes() == S["want"], "weights identical")


def trainer_proc():
    eng = tms.engine
    rd, wr = os.pipe()
    stop = threading.Event()

    def loop():		# the engine's loop, as a scheduler thread
        p = select.poll()
        p.register(eng.fileno(), select.POLLIN)
        p.register(rd, select.POLLIN)
        while not stop.is_set():
            for fd, _ in p.poll():
                if fd == eng.fileno():
                    eng.dispatch()
    th = threading.Thread(target=loop)
    th.start()
    try:
        S["k"][:] = b"\xcd" * SIZE
        t = Proc("trainer", NAME, "release", "-")
        w = t.expect("result ")
        check(w[:3] == ["release", "weights,kv_cache,cuda_graph", "0"],
              repr(w))
        t.close()
        t = Proc("trainer", NAME, "resume", "-")
        check(t.expect("result ")[:3] == ["resume",
                                          "weights,kv_cache,cuda_graph", "0"],
              "resume")
        t.close()
    finally:
        stop.set()
        os.write(wr, b"x")
        th.join()
        os.close(rd)
        os.close(wr)
    check(S["w"].tobytes() == S["want"], "weights identical")
    check(S["k"].tobytes() == bytes(SIZE), "KV zero")


def late_tag():
    e = raises(gpusleep.InvalidRequest,
               lambda: tms.region(tag="weights_drafter").__enter__())
    check("GPUSLEEP_TMS_TAGS=weights,kv_cache,cuda_graph,weights_drafter"
          in str(e), str(e))
    check(tms.tags == ["weights", "kv_cache", "cuda_graph"], repr(tms.tags))
    # a tag never used holds nothing: nothing to do, as torch_memory_saver
    check(tms.pause("weights_drafter") is None, "pause of an unused tag")
    check(not S["ctl"].is_sleeping(), "nothing released")


def acquire():
    # another tenant on the host backend's GPU: an engine and its agent,
    # 64 MiB a tag (gsproc.py), more than the trainer needs back, reported
    eng = Proc("engine", f"{NAME}-e")
    S["procs"] = [eng]
    other = int(eng.expect("ready ")[0])
    ag = Proc("agent", other, 64)
    S["procs"].append(ag)
    check(ag.expect("ready ") == ["host"], "agent backend")
    until("the engine reported", lambda: gpusleep.tenant(other).reported)
    S["w"][:] = S["want"]
    r = tms.pause()
    check(r.ok and S["ctl"].state().released ==
          ["weights", "kv_cache", "cuda_graph"], repr(r))
    mine = gpusleep.tenant(tms.engine.id)
    check(mine.gpu == gpusleep.tenant(other).gpu, "one GPU")
    need = tms._released_size(None)
    check(need >= 2 * SIZE, f"the trainer's released bytes: {need}")
    with tms.acquire() as lease:
        check(lease is not None, "a lease")
        check(lease.taken_bytes >= need, f"taken {lease.taken_bytes}")
        st = gpusleep.state(other)
        # its discard-kind tag is enough
        check(st.released == ["kv_cache"], f"the engine's {st.released}")
        check(not S["ctl"].is_sleeping(), "the trainer's tags resumed")
        check(S["w"].tobytes() == S["want"], "weights identical")
    check(S["ctl"].state().released ==
          ["weights", "kv_cache", "cuda_graph"], "released again")
    until("the engine awake", lambda: gpusleep.state(other).state ==
          "awake")
    check(gpusleep.state(other).released == [], "the engine whole")
    tms.resume()
    check(S["w"].tobytes() == S["want"], "weights identical at the end")


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    try:
        for name, fn in zip(TESTS, [enabled, regions, agent_up, pause_all,
                                    resume_weights, resume_rest, kv_only,
                                    trainer_proc, late_tag, acquire]):
            tap.run(name, fn)
    finally:
        for p in S.get("procs", []):
            p.close()
        if "ctl" in S:
            S["ctl"].close()
        tms.close()
    tap.done()


if __name__ == "__main__":
    main()
