#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The docs' pictures drawn by tools/figures: each committed SVG is what
its script draws (run here into a scratch directory and compared byte
for byte: regenerate with the command the failure names), parses as
SVG, and shows what it must:
- docs/deployment.svg: the names the deployment files use (the
  DaemonSets, the Secret, the node label, the CDI spec's path and device
  name), each found in those files too, so that a rename there fails
  here;
- docs/figures/{sglang,vllm,rollback}.svg, drawn by sequence.py from the
  runs tools/figures/record.sh recorded in the VM (the .jsonl beside
  them): each recording shows what its picture claims. SGLang: the
  trainer's calls in order, every rank drained before any rank unmapped
  (the group's rule), weights mapped back before the staged weights were
  loaded, then the rest and the KV repair. vLLM: the worker's own release
  and two resumes. Rollback: rank 1's KV unmap failed, every rank that
  unmapped was mapped back after it, the trainer got AgentFailed naming
  rank 1, every rank rolled back.
Prints TAP."""

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
from gstest import Tap, check, REPO  # noqa: E402

FIG = os.path.join(REPO, "tools", "figures")
NS = "{http://www.w3.org/2000/svg}"


def drawn(script, committed, *inputs):
    """Draw with script into a scratch file; it must equal committed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, os.path.basename(committed))
        p = subprocess.run([sys.executable, os.path.join(FIG, script)] +
                           [os.path.join(REPO, i) for i in inputs] + [out],
                           capture_output=True, text=True)
        check(p.returncode == 0, p.stderr)
        with open(out) as f:
            new = f.read()
    with open(os.path.join(REPO, committed)) as f:
        old = f.read()
    check(new == old, f"{committed} is not what tools/figures/{script} "
          f"draws: run python3 tools/figures/{script} "
          f"{' '.join(inputs + (committed,))}")
    root = ET.fromstring(new)
    check(root.tag == NS + "svg", root.tag)
    return root, " ".join(t.text or "" for t in root.iter(NS + "text"))


def deployment():
    _, text = drawn("deployment.py", "docs/deployment.svg")
    files = ""
    for d in ("packaging/kubernetes", "packaging/cdi", "packaging/containers"):
        for f in sorted(os.listdir(os.path.join(REPO, d))):
            with open(os.path.join(REPO, d, f)) as fh:
                files += fh.read()
    for name in ("gpusleep-driver", "gpusleep-exporter", "gpusleep-mok",
                 "gpusleep.io/node=true", "/etc/cdi/gpusleep.yaml",
                 "/dev/gpusleep", "gpusleepctl metrics --textfile",
                 "hostNetwork"):
        check(name in text, f"the picture does not show {name!r}")
        flat = name.replace("gpusleep.io/node=true",
                            'gpusleep.io/node: "true"')
        check(flat in files or name in files,
              f"{name!r} is in the picture, not in the deployment files")


def recording(name):
    import json
    with open(os.path.join(REPO, "docs", "figures", name + ".jsonl")) as f:
        rec = [json.loads(ln) for ln in f]
    calls = [e for e in rec if e.get("event") == "call"]
    ops = []
    for e in rec:
        if e.get("event") == "timeline":
            start = e["timestamp"] - e["duration_us"] / 1e6
            for st in e["steps"]:
                t0 = start + st["start_us"] / 1e6
                ops.append((e["domain"]["name"], e["kind"], st["type"],
                            tuple(st["tags"]), st["reason"], t0,
                            t0 + (st["duration_us"] or 0) / 1e6))
    return rec, calls, ops


def steps(ops, kind=None, typ=None, tag=None):
    return [o for o in ops if (kind is None or o[1] == kind) and
            (typ is None or o[2] == typ) and (tag is None or tag in o[3])]


def seq_sglang():
    drawn("sequence.py", "docs/figures/sglang.svg",
          "docs/figures/sglang.jsonl")
    _, calls, ops = recording("sglang")
    check([c["what"].split("(")[0] for c in calls] ==
          ["EngineSleep.release", "train", "EngineSleep.resume_weights",
           "gpusleep.weights.stage", "update_weights_from_disk",
           "update_weights_from_disk", "EngineSleep.resume"],
          [c["what"] for c in calls])
    check(all(c["result"] == "ok" for c in calls), calls)
    ranks = {o[0] for o in ops}
    check(len(ranks) == 2, ranks)
    rel = steps(ops, "release")
    drained = max(o[6] for o in steps(rel, typ="drain"))
    unmaps = steps(rel, typ="pause_tag")
    check(len(unmaps) == 6 and drained <= min(o[5] for o in unmaps),
          "a rank unmapped before every rank had drained")
    mapped = max(o[6] for o in steps(ops, "resume", "resume_tag", "weights"))
    loaded = min(c["t0"] for c in calls
                 if c["what"].startswith("update_weights_from_disk"))
    check(mapped <= loaded, "weights loaded before they were mapped back")
    check(len(steps(ops, "resume", "repair_kv")) == 2 and
          all(o[4] == "none" for o in ops), ops)


def seq_vllm():
    drawn("sequence.py", "docs/figures/vllm.svg", "docs/figures/vllm.jsonl")
    _, calls, ops = recording("vllm")
    check([c["what"] for c in calls if c.get("via") is not None] ==
          ["llm.sleep(level=1)", "llm.wake_up(tags=['weights'])",
           "llm.wake_up(tags=['kv_cache'])"], calls)
    check([(o[1], o[2], o[3]) for o in ops] == [
        ("release", "drain", ("weights", "kv_cache")),
        ("release", "reset_caches", ("kv_cache",)),
        ("release", "pause_tag", ("weights",)),
        ("release", "pause_tag", ("kv_cache",)),
        ("resume", "resume_tag", ("weights",)),
        ("resume", "resume_tag", ("kv_cache",)),
        ("resume", "repair_kv", ("kv_cache",))], ops)


def seq_rollback():
    drawn("sequence.py", "docs/figures/rollback.svg",
          "docs/figures/rollback.jsonl")
    rec, calls, ops = recording("rollback")
    fail = [o for o in ops if o[4] == "agent_failed"]
    check(len(fail) == 1 and fail[0][0] == "llm0-tp1" and
          fail[0][3] == ("kv_cache",), fail)
    unmapped = {(o[0], o[3]) for o in steps(ops, "release", "pause_tag")
                if o[4] == "none"}
    remapped = {(o[0], o[3]) for o in steps(ops, "resume", "resume_tag")
                if o[5] >= fail[0][6] - 1e-3 and o[4] == "none"}
    check(unmapped and unmapped <= remapped,
          f"unmapped {unmapped}, mapped back {remapped}")
    check(len(calls) == 1 and calls[0]["result"].startswith(
        "AgentFailed") and "rank 1" in calls[0]["result"], calls)
    res = [e for e in rec if e.get("event") == "group_result"]
    check(res and all("rolled_back" in r["outcome"] for r in res[0]["ranks"])
          and not any(r["released"] for r in res[0]["ranks"]), res)


def main():
    tests = [("docs/deployment.svg: drawn by its script, names as "
              "deployed", deployment),
             ("docs/figures/sglang.svg: drawn from its recording; drains "
              "before unmaps, weights mapped before loaded", seq_sglang),
             ("docs/figures/vllm.svg: drawn from its recording; the "
              "worker's release and resumes", seq_vllm),
             ("docs/figures/rollback.svg: drawn from its recording; what "
              "was unmapped is mapped back", seq_rollback)]
    tap = Tap([t for t, _ in tests])
    for name, fn in tests:
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
