#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Declared tags from Python and gpusleepctl: an engine declares weights,
kv_cache and cuda_graph; its agent allocates in cuda_graph by name; a
controller attached by id learns the names from the module and releases
cuda_graph alone (no cache reset, no repair); an unknown name is refused
as invalid, naming the domain's tags, by the binding and by gpusleepctl;
a bad declaration is refused at creation. SKIPs without /dev/gpusleep."""

import json
import os
import subprocess

from gstest import Tap, Proc, check, need_device, raises
import gpusleep
from gpusleep import engine as gsengine

NAME = f"pytags{os.getpid()}"
HERE = os.path.dirname(os.path.abspath(__file__))
CTL = os.path.join(HERE, "..", "..", "build", "bin", "gpusleepctl")
MIB = 2
TAGS = ("weights", "kv_cache", "cuda_graph")
TESTS = ["engine declares three tags, agent allocates in cuda_graph",
         "a controller by id learns the names and kinds",
         "release cuda_graph alone: no cache reset",
         "an undeclared name is invalid, the domain's tags named",
         "gpusleepctl: status shows the tags, release --tags by name",
         "gpusleepctl: an undeclared --tags is refused",
         "resume everything: no KV repair (KV never left)",
         "a bad declaration is refused at creation"]

S = {}


def start():
    S["eng"] = eng = Proc("engine", NAME, "--tags",
                          "weights,kv_cache,cuda_graph")
    S["id"] = int(eng.expect("ready ")[0])
    S["agent"] = ag = Proc("agent", S["id"], MIB, "--graph")
    check(ag.expect("ready ") == ["host"], "agent backend")


def names():
    c = S["ctl"] = gpusleep.Controller(S["id"])
    check(c.tag_names == TAGS, repr(c.tag_names))
    kinds = [(n, k) for n, k, _ in c.tags()]
    check(kinds == [("weights", "memory"), ("kv_cache", "kv_cache"),
                    ("cuda_graph", "memory")], repr(kinds))
    check(c.state().tags == list(TAGS), repr(c.state().tags))


def release_graph():
    c, eng = S["ctl"], S["eng"]
    r = c.release(["cuda_graph"])
    check(r.ok and r.tags == ["cuda_graph"], repr(r))
    check(r.bytes.get("cuda_graph", 0) >= 1 << 20, repr(r.bytes))
    check(eng.expect("ev drain ") == ["cuda_graph", "0"], "drain")
    check(not eng.seen("ev reset"), "cache reset for a memory tag")
    st = c.state()
    check(st.released == ["cuda_graph"], repr(st))


def undeclared():
    e = raises(gpusleep.InvalidRequest, S["ctl"].release, ["bogus"])
    check("bogus" in str(e) and "cuda_graph" in str(e), str(e))


def ctl_by_name():
    r = subprocess.run([CTL, "status", str(S["id"]), "--json"],
                       capture_output=True, text=True, timeout=60)
    st = json.loads(r.stdout) if r.returncode == 0 else {}
    check(st.get("tags") == list(TAGS) and
          st.get("released_tags") == ["cuda_graph"] and
          st.get("generation", {}).get("cuda_graph") == 0,
          r.stdout + r.stderr)
    r = subprocess.run([CTL, "release", NAME, "--tags", "weights"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "release weights: ok" in r.stdout,
          r.stdout + r.stderr)
    check(S["ctl"].state().released == ["weights", "cuda_graph"],
          repr(S["ctl"].state()))


def ctl_undeclared():
    r = subprocess.run([CTL, "release", NAME, "--tags", "bogus"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "bogus" in r.stderr and
          "weights,kv_cache,cuda_graph" in r.stderr, r.stdout + r.stderr)


def resume_all():
    c, eng = S["ctl"], S["eng"]
    r = c.resume()
    check(r.ok and r.tags == ["weights", "cuda_graph"], repr(r))
    eng.expect("ev resume_sched")
    check(not eng.seen("ev repair"), "KV repaired though it never left")
    check(S["agent"].ask("check", "check ") == ["weights=same", "kv=filled"],
          "weights kept, KV untouched")


def bad_declaration():
    for bad in (["Weights"], ["a", "a"], [("a", "kv_cache"),
                                          ("b", "kv_cache")],
                [f"t{i}" for i in range(9)]):
        raises(gpusleep.InvalidRequest, gsengine.Engine, NAME + "x",
               tags=bad)
    raises(gpusleep.InvalidRequest, gsengine.Engine, NAME + "x",
           tags=[("a", "graph")])


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    steps = [start, names, release_graph, undeclared, ctl_by_name,
             ctl_undeclared, resume_all, bad_declaration]
    try:
        for name, fn in zip(TESTS, steps):
            before = tap.failed
            tap.run(name, fn)
            if tap.failed != before and fn is start:
                tap.skip_rest(TESTS, "helpers did not start")
                break
    finally:
        for k in ("agent", "eng"):
            if k in S:
                S[k].close()
    tap.done()


if __name__ == "__main__":
    main()
