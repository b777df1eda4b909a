#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""tools/demo/plot.py on a made-up run: the SVG parses, has one memory
line per process with a point per timeline row, one bar per state the
domain went through (with its duration), and says so when the events
carry no timestamps. Prints TAP."""

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


def run(rows, events, tmp):
    paths = []
    for name, items in (("rows.jsonl", rows), ("events.jsonl", events)):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            f.write("".join(json.dumps(i) + "\n" for i in items))
            f.write("not json\n")
        paths.append(p)
    out = os.path.join(tmp, "demo.svg")
    r = subprocess.run([sys.executable, PLOT] + paths + [out],
                       capture_output=True, text=True)
    return r, (ET.parse(out).getroot() if r.returncode == 0 else None)


def main():
    print("TAP version 13\n1..3")
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
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
