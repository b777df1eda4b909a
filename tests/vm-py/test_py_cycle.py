#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A full release/resume cycle driven from Python on all three sides, each
its own process: an engine (gpusleep.engine.Engine), an agent
(gpusleep.agent, host backend, 8 MiB weights backed up, 8 MiB KV
discarded) and trainers (this process with a Controller, and a separate one
using the module functions with the domain's name). Also checks the ctypes
layouts against the C compiler's. SKIPs without /dev/gpusleep."""

import os

from gstest import Tap, Proc, check, check_layouts, need_device, raises
import gpusleep

NAME = f"pycycle{os.getpid()}"
MIB = 8
TESTS = ["ctypes layouts match the C header", "engine and agent start",
         "state awake, agent attached, domain found by name",
         "release all", "resume weights only", "resume the rest",
         "trainer process by name: release kv_cache, resume",
         "engine exit kills the domain"]


S = {}


def start():
    S["eng"] = eng = Proc("engine", NAME)
    S["id"] = int(eng.expect("ready ")[0])
    S["ctl"] = gpusleep.Controller(S["id"])
    raises(gpusleep.NotEnabled, S["ctl"].release)
    S["agent"] = ag = Proc("agent", S["id"], MIB)
    check(ag.expect("ready ") == ["host"], "agent backend")


def awake():
    c = S["ctl"]
    st = c.state()
    check(st.state == "awake" and st.released == [], repr(st))
    check(st.agent_attached and not c.is_sleeping(), repr(st))
    check(gpusleep.resolve_domain(NAME) == S["id"], "sysfs lookup")
    check(gpusleep.state(NAME).id == S["id"], "state by name")


def release_all():
    c, eng = S["ctl"], S["eng"]
    r = c.release()
    check(r.ok and r.kind == "release", repr(r))
    check(r.tags == ["weights", "kv_cache"], repr(r))
    check(r.done_tags == ["weights", "kv_cache"], repr(r))
    for t in r.tags:
        check(r.bytes.get(t, 0) >= MIB << 20, f"bytes {t}: {r.bytes}")
    check(eng.expect("ev drain ") == ["weights,kv_cache", "0"], "drain")
    eng.expect("ev reset")
    st = c.state()
    check(st.state == "released" and c.is_sleeping(), repr(st))
    check(st.released == ["weights", "kv_cache"], repr(st))
    check(st.sched_paused, "scheduler stays paused while released")


def resume_weights():
    c, eng = S["ctl"], S["eng"]
    r = c.resume(["weights"])
    check(r.ok and r.tags == ["weights"], repr(r))
    st = c.state()
    check(st.released == ["kv_cache"] and st.state == "released", repr(st))
    check(not eng.seen("ev resume_sched"), "scheduling resumed too early")
    check(not eng.seen("ev repair"), "KV repaired without KV")


def resume_rest():
    c, eng, ag = S["ctl"], S["eng"], S["agent"]
    r = c.resume()		# None: exactly what is released (kv_cache)
    check(r.ok and r.tags == ["kv_cache"], repr(r))
    eng.expect("ev repair")
    eng.expect("ev resume_sched")
    check(not c.is_sleeping() and c.state().state == "awake", "awake")
    check(ag.ask("check", "check ") == ["weights=same", "kv=zero"],
          "weights kept, KV zero")
    ag.ask("fill", "filled")


def trainer_proc():
    eng, ag = S["eng"], S["agent"]
    t = Proc("trainer", NAME, "release", "kv_cache")
    w = t.expect("result ")
    check(w[:3] == ["release", "kv_cache", "0"] and int(w[3]) >= MIB << 20,
          repr(w))
    t.close()
    check(eng.expect("ev drain ") == ["kv_cache", "0"], "drain kv")
    check(S["ctl"].state().released == ["kv_cache"], "released kv")
    t = Proc("trainer", NAME, "resume", "-")
    check(t.expect("result ")[:3] == ["resume", "kv_cache", "0"], "resume")
    t.close()
    eng.expect("ev resume_sched")
    check(ag.ask("check", "check ") == ["weights=same", "kv=zero"],
          "weights kept, KV zero")


def engine_exit():
    c = S["ctl"]
    check(S["eng"].close() == 0, "engine exit status")
    st = c.state()		# still readable: the domain reads as dead
    check(st.state == "dead" and st.dead, repr(st))
    raises(gpusleep.EngineGone, c.release)
    check(S["agent"].close() == 0, "agent exit status")
    raises(LookupError, gpusleep.resolve_domain, NAME)


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], check_layouts)
    need_device(tap, TESTS)
    steps = [start, awake, release_all, resume_weights, resume_rest,
             trainer_proc, engine_exit]
    try:
        for name, fn in zip(TESTS[1:], steps):
            before = tap.failed
            tap.run(name, fn)
            if tap.failed != before and fn is start:
                tap.skip_rest(TESTS, "helpers did not start")
                break
    finally:
        for k in ("eng", "agent"):
            if k in S:
                S[k].close()
    tap.done()


if __name__ == "__main__":
    main()
