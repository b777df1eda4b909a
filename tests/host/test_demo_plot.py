#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""tools/demo/plot.py on a made-up run: the SVG parses, has one memory
line per process with a point per timeline row, one bar per state the
domain went through (with its duration), says so when the events carry
no timestamps, and one bar per step of the monitor --timeline objects;
the second part (leases): a memory line per process sharing the GPU with
a point per row, and one shaded span per lease naming what it took.
Prints TAP."""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "..", "..", "tools", "demo", "plot.py")
NS = "{http://www.w3.org/2000/svg}"
MIB = 1 << 20


def run(rows, events, tmp, timeline=None, leases=None):
    paths = []
    files = [("rows.jsonl", rows), ("events.jsonl", events)]
    if timeline is not None:
        files.append(("timeline.jsonl", timeline))
    if leases is not None:
        files.append(("leases.jsonl", leases))
    for name, items in files:
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            f.write("".join(json.dumps(i) + "\n" for i in items))
            f.write("not json\n")
        paths.append(p)
    out = os.path.join(tmp, "demo.svg")
    r = subprocess.run([sys.executable, PLOT] + paths[:2] + [out] +
                       paths[2:],
                       capture_output=True, text=True)
    return r, (ET.parse(out).getroot() if r.returncode == 0 else None)


def main():
    print("TAP version 13\n1..5")
    t0 = 1796319569.0
    rows = [{"step": s, "phase": ph, "unix_s": t0 + i,
             "engine_rss_bytes": e * MIB, "trainer_rss_bytes": tr * MIB}
            for i, (s, ph, e, tr) in enumerate(
                [(0, "start", 769, 1), (1, "release all", 257, 1),
                 (1, "train", 257, 513), (1, "resume weights", 513, 1)])]
    dom = {"id": 1, "name": "demo-llm"}
    evs = [{"timestamp": t0 + 0.5 + i * 0.1, "event": "transition",
            "domain": dom, "from": a, "to": b, "op": op}
           for i, (a, b, op) in enumerate(
               [("awake", "draining", 1), ("draining", "releasing", 1),
                ("releasing", "released", 1), ("released", "resuming", 2),
                ("resuming", "awake", 2)])]
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        r, svg = run(rows, evs, tmp)
        lines = svg.findall(NS + "polyline") if svg is not None else []
        ok = len(lines) == 2 and all(
            len(pl.get("points").split()) == len(rows) for pl in lines)
        print("%s 1 two memory lines, a point per row" % ("ok" if ok else "not ok"))
        fails += not ok
        bars = [el.find(NS + "title").text for el in svg.iter(NS + "rect")
                if el.find(NS + "title") is not None] if svg is not None else []
        want = ["op 1 draining", "op 1 releasing", "op 1 released",
                "op 2 resuming"]
        ok = [b.rsplit(" ", 2)[0] for b in bars] == want and \
            all(b.endswith(" ms") for b in bars)
        print("%s 2 one bar per state, in order, with its duration"
              % ("ok" if ok else "not ok"))
        if not ok:
            print("# %r %r" % (bars, r.stderr))
        fails += not ok
        r, svg = run(rows, [{k: v for k, v in e.items() if k != "timestamp"}
                            for e in evs], tmp)
        text = " ".join(el.text or "" for el in svg.iter(NS + "text")) \
            if svg is not None else ""
        ok = "no timestamped events" in text
        print("%s 3 events without timestamps: said so" % ("ok" if ok else "not ok"))
        fails += not ok
        # the steps, from monitor --timeline objects: a bar each, placed
        # from its operation's first transition
        tl = [{"event": "timeline", "domain": dom, "op": 1, "steps": [
                  {"step": 1, "type": "drain", "tags": ["weights"],
                   "start_us": 1000, "duration_us": 90000, "error": 0},
                  {"step": 2, "type": "pause_tag", "tags": ["weights"],
                   "start_us": 101000, "duration_us": 50000,
                   "error": -110}]},
              {"event": "timeline", "domain": dom, "op": 2, "steps": [
                  {"step": 1, "type": "resume_tag", "tags": ["weights"],
                   "start_us": 0, "duration_us": 70000, "error": 0}]}]
        r, svg = run(rows, evs, tmp, tl)
        bars = [(el.find(NS + "title").text, float(el.get("x")))
                for el in svg.iter(NS + "rect")
                if el.find(NS + "title") is not None and
                "ing " not in el.find(NS + "title").text and
                "released" not in el.find(NS + "title").text] \
            if svg is not None else []
        ok = [b for b, _ in bars] == ["op 1 drain 90.0 ms",
                                      "op 1 unmap weights 50.0 ms failed",
                                      "op 2 map weights 70.0 ms"] and \
            bars[0][1] < bars[1][1] < bars[2][1]
        print("%s 4 one bar per step, after its operation's start, with its "
              "duration" % ("ok" if ok else "not ok"))
        if not ok:
            print("# %r %r" % (bars, r.stderr))
        fails += not ok
        # part 2: two engines and a trainer through two leases
        lr, t = [], t0 + 10
        for step in (1, 2):
            for ph, pol, rew, tr in (("acquired", 16, 0, 1),
                                     ("trained", 16, 0, 97),
                                     ("returned", 97, 64, 1)):
                t += 0.4
                lr.append({"part": "leases", "unix_s": t, "step": step,
                           "phase": ph, "dur_s": 0.2, "lease": step,
                           "mem_bytes": {"policy": pol * MIB,
                                         "reward": rew * MIB,
                                         "trainer": tr * MIB},
                           "victims": [{"domain": "reward",
                                        "tags": ["kv_cache", "weights"]},
                                       {"domain": "policy",
                                        "tags": ["kv_cache"]}]})
        r, svg = run(rows, evs, tmp, tl, lr)
        lines = svg.findall(NS + "polyline") if svg is not None else []
        spans = [el.find(NS + "title").text for el in svg.iter(NS + "rect")
                 if el.find(NS + "title") is not None and
                 el.find(NS + "title").text.startswith("lease ")] \
            if svg is not None else []
        ok = len(lines) == 2 + 3 and \
            all(len(pl.get("points").split()) == len(lr)
                for pl in lines[2:]) and \
            spans == ["lease %d: reward kv_cache+weights, policy kv_cache"
                      % s for s in (1, 2)]
        print("%s 5 leases: a line per process sharing the GPU, a span per "
              "lease with what it took" % ("ok" if ok else "not ok"))
        if not ok:
            print("# %r %r %r" % (len(lines), spans, r.stderr))
        fails += not ok
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
