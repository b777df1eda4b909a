#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The performance figures cannot drift: the tables between the
<!-- bench-table --> markers of README.md and docs/benchmarks.md are what
bench/report.py renders from the committed run, docs/bench-results.json,
and docs/bench-results.svg is its chart. Also the report's verdict on a
made-up run: "N met, M missed" and a non-zero status when a target was
missed, unless BENCH_STRICT=0. No benchmark runs. Prints TAP."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import report  # noqa: E402

n = failed = 0


def check(name, cond, diag=""):
    global n, failed
    n += 1
    failed += not cond
    print("%s %d %s" % ("ok" if cond else "not ok", n, name))
    if not cond:
        for line in str(diag).splitlines()[:40]:
            print("# " + line)
    sys.stdout.flush()


def main():
    res = report.load(os.path.join(REPO, "docs", "bench-results.json"))
    for key in ("date", "command", "kernel", "repetitions", "results"):
        check("bench-results.json has %s" % key, key in res)
    table = report.markdown(res)
    for page, link in (("README.md", "docs/bench-results.svg"),
                       (os.path.join("docs", "benchmarks.md"),
                        "bench-results.svg")):
        want = table.replace("(docs/bench-results.svg)", "(%s)" % link)
        got = report.block(os.path.join(REPO, page))
        check("%s: the table is the committed run's" % page, got == want,
              "expected (make bench-docs):\n" + want + "\ngot:\n" + str(got))
    with open(os.path.join(REPO, "docs", "bench-results.svg")) as f:
        check("docs/bench-results.svg is the committed run's chart",
              f.read() == report.svg(res))

    # the verdict of a made-up run
    recs = [{"id": "x1", "name": "a", "env": "vm-tcg", "ratio": 1.1,
             "target": 1.2, "target_kind": "max", "met": True},
            {"id": "x2", "name": "b", "env": "vm-tcg", "ratio": 3.0,
             "target": 2.0, "target_kind": "max", "met": False},
            {"id": "x3", "name": "c", "env": "vm-tcg", "ratio": 0.5,
             "target": 0, "target_kind": "none", "met": True}]
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.jsonl")
        with open(inp, "w") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")
        out = os.path.join(tmp, "out.json")
        cmd = [sys.executable, os.path.join(REPO, "bench", "report.py"),
               out, inp, "--meta", "date=today"]
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, BENCH_STRICT="1"))
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        check("a missed target: last line '1 met, 1 missed'",
              last == "1 met, 1 missed", p.stdout + p.stderr)
        check("a missed target: non-zero status", p.returncode != 0)
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, BENCH_STRICT="0"))
        check("BENCH_STRICT=0: status 0", p.returncode == 0, p.stderr)
        with open(out) as f:
            got = json.load(f)
        check("results.json: the run's fields and the records",
              got.get("date") == "today" and len(got["results"]) == 3)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
