#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Backing generations and resident memory from Python: State.generation,
State.resident_bytes/resident_source, Engine.replaced_tags,
Engine.kv_generation, Engine.generation(). One process plays every role:
an Engine, a Controller, and an agent answered by hand (raw fd), so that
its pause answer can say what stays resident. SKIPs without
/dev/gpusleep."""

import ctypes
import os

from gstest import Tap, check, need_device
import gpusleep
from gpusleep import _lib, engine as gsengine

NAME = f"pygen{os.getpid()}"
MIB = 1 << 20
TESTS = ["a fresh domain: generations 0, nothing resident",
         "a pause answer's resident figure shows in State",
         "a resume moves the tag's generation on, in State and Engine",
         "resume_sched sees the replaced tags",
         "repair_kv sees the KV cache's generation",
         "nothing resident once awake",
         "a declared domain: generations by its own tag names"]
S = {}


def agent_fd(dom):
    L = _lib.lib()
    dev = L.gs_open(None, 0, None)
    check(dev >= 0, f"open: {dev}")
    fd = L.gs_attach(dev, dom, _lib.ROLE_AGENT)
    os.close(dev)
    check(fd >= 0, f"attach agent: {fd}")
    return fd


def next_event(fd, want):
    ev = _lib.gpusleep_event()
    ret = _lib.lib().gs_read_event(fd, ctypes.byref(ev))
    check(ret == 1, f"read: {ret}")
    check(ev.type == want, f"event {ev.type}, expected {want}")
    return ev


def answer(fd, ev, nbytes, resident=0, source=0):
    c = _lib.gpusleep_complete(bytes=nbytes, resident_bytes=resident,
                               resident_source=source)
    ret = _lib.lib().gs_complete_ex(fd, ctypes.byref(ev), ctypes.byref(c))
    check(ret == 0, f"complete: {ret}")


def release(tags, resident=0, source=0):
    """Release tags; the agent answers each pause with resident."""
    eng, ctl, fd = S["eng"], S["ctl"], S["agent"]
    op = ctl.release(tags, wait=False)
    eng.dispatch()			# drain (and reset) answered
    for _ in tags:
        answer(fd, next_event(fd, _lib.EV_PAUSE_TAG), 4 * MIB, resident,
               source)
    ctl.wait(op)


def resume(tags):
    """Resume tags; returns the generations the RESUME_TAG records said."""
    eng, ctl, fd = S["eng"], S["ctl"], S["agent"]
    op = ctl.resume(tags, wait=False)
    gens = {}
    for t in tags:
        ev = next_event(fd, _lib.EV_RESUME_TAG)
        gens[t] = ev.generation
        answer(fd, ev, 4 * MIB)
    eng.run_until_done(op)		# REPAIR_KV
    eng.dispatch()			# RESUME_SCHED, sent as it ended
    return gens


def fresh():
    st = S["ctl"].state()
    check(st.generation == {"weights": 0, "kv_cache": 0}, repr(st.generation))
    check(st.resident_bytes == 0 and st.resident_source is None,
          f"{st.resident_bytes} {st.resident_source}")


def resident_shows():
    release(["weights"], 7 * MIB, _lib.RESIDENT_PROCESS)
    st = S["ctl"].state()
    check(st.resident_bytes == 7 * MIB, repr(st.resident_bytes))
    check(st.resident_source == "process", repr(st.resident_source))


def generation_moves_on():
    gens = resume(["weights"])
    check(gens == {"weights": 1}, repr(gens))
    st = S["ctl"].state()
    check(st.generation == {"weights": 1, "kv_cache": 0},
          repr(st.generation))
    check(S["eng"].generation("weights") == 1, "Engine.generation")


def replaced_seen():
    check(S["seen"]["replaced"] == [["weights"]], repr(S["seen"]))


def kv_generation_seen():
    release(["weights", "kv_cache"], 3 * MIB, _lib.RESIDENT_DEVICE)
    check(S["ctl"].state().resident_source == "device", "device view")
    resume(["weights", "kv_cache"])
    check(S["seen"]["kv"] == [1], repr(S["seen"]))
    check(S["eng"].kv_generation == 1, "Engine.kv_generation")
    check(S["seen"]["replaced"][-1] == ["weights", "kv_cache"],
          repr(S["seen"]))
    check(S["ctl"].state().generation == {"weights": 2, "kv_cache": 1},
          "generations after two cycles")


def awake_nothing_resident():
    st = S["ctl"].state()
    check(st.state == "awake", st.state)
    check(st.resident_bytes == 0 and st.resident_source is None,
          f"{st.resident_bytes} {st.resident_source}")


def declared():
    """Tag bits are the domain's own: weights is bit 2 here."""
    seen = []
    eng = gsengine.Engine(NAME + "d", gpu="vm-py",
                          tags=["experts", ("kv", "kv_cache"), "weights"])
    eng.resume_sched = lambda: seen.append(eng.replaced_tags)
    saved = dict(S)
    S["eng"], S["ctl"] = eng, gpusleep.Controller(eng.id)
    S["agent"] = agent_fd(eng.id)
    try:
        release(["weights"])
        resume(["weights"])
        st = S["ctl"].state()
        check(st.generation == {"experts": 0, "kv": 0, "weights": 1},
              repr(st.generation))
        check(eng.generation("weights") == 1 and
              eng.generation("experts") == 0, "Engine.generation by name")
        check(seen == [["weights"]], repr(seen))
    finally:
        os.close(S["agent"])
        eng.close()
        S.update(saved)


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    seen = S["seen"] = {"replaced": [], "kv": []}
    eng = S["eng"] = gsengine.Engine(NAME, gpu="vm-py")
    eng.resume_sched = lambda: seen["replaced"].append(eng.replaced_tags)
    eng.repair_kv = lambda: seen["kv"].append(eng.kv_generation)
    S["ctl"] = gpusleep.Controller(eng.id)
    S["agent"] = agent_fd(eng.id)
    try:
        for name, fn in zip(TESTS, [fresh, resident_shows,
                                    generation_moves_on, replaced_seen,
                                    kv_generation_seen,
                                    awake_nothing_resident, declared]):
            tap.run(name, fn)
    finally:
        os.close(S["agent"])
        eng.close()
    tap.done()


if __name__ == "__main__":
    main()
