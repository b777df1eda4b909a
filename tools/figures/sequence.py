#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A sequence picture of one recorded run (tools/figures/record.py): the
trainer's calls and, from the kernel's own timeline of every operation
(`gpusleepctl -j monitor -t --timeline`), each step the module asked of
each rank's engine (drain, prefix-cache reset, KV repair) and agent
(unmap, map a tag), in the order they happened, with the time of each
since the first, and the answers (an error in red).

    sequence.py RECORDING.jsonl OUT.svg

Lifelines: the trainer, gpusleep.ko, then per rank its engine and its
agent. Rows are events in time order (not to scale: the times are
written on the left). tests/host/test_figures.py checks that each
docs/figures/*.svg is what this script draws from its recording, and
what the recording shows."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svg import Svg  # noqa: E402

ROW = 19
TOP = 118
LEFT = 78
STEP = {"drain": ("engine", "drain"), "reset_caches": ("engine",
                                                       "reset prefix cache"),
        "repair_kv": ("engine", "repair KV"),
        "pause_tag": ("agent", "unmap"), "resume_tag": ("agent", "map")}
COLOR = {"engine": "#c2570c", "agent": "#6a3d9a", "call": "#1f5fa8",
         "error": "#c0392b", "note": "#555"}


def load(path):
    out = []
    with open(path) as f:
        for ln in f:
            try:
                out.append(json.loads(ln))
            except ValueError:
                pass
    return out


def events(rec):
    """(t, seq, kind, fields) in time order; the ranks' names."""
    meta = next((e for e in rec if e.get("event") == "scenario"), {})
    ranks = {e["name"]: e["rank"] for e in rec if e.get("event") == "domain"}
    evs, seq = [], 0
    failed_at = None	# a rank's step failed: the resumes after are a rollback

    def add(t, kind, **kw):
        nonlocal seq
        evs.append((t, seq, kind, kw))
        seq += 1

    for e in rec:
        if e.get("event") == "call":
            gs = not e["what"].startswith(("train()", "update_weights_from",
                                           "broadcast", "gpusleep.weights"))
            if not gs:
                add(e["t0"], "note", text=e["what"], rank=e.get("rank"))
                continue
            add(e["t0"], "call", text=e["what"], via=e.get("via"))
            if e.get("via") is not None:	# the engine's process asks
                add(e["t0"] + 1e-9, "via", rank=e["via"], text=e["kernel"])
            add(e["t1"], "return", text=e["result"],
                error=e["result"] != "ok", via=e.get("via"))
        elif e.get("event") == "timeline":
            r = ranks.get(e["domain"]["name"])
            if r is None:
                continue
            start = e["timestamp"] - e["duration_us"] / 1e6
            if e["kind"] == "resume" and failed_at is not None and \
                    start > failed_at:
                add(start - 1e-9, "phase", text="rollback: the module maps "
                    "back what the ranks unmapped (no caller needed)")
            for st in e["steps"]:
                who, verb = STEP[st["type"]]
                tags = ",".join(st["tags"])
                label = verb if st["type"] in ("drain", "repair_kv",
                                               "reset_caches") else \
                    f"{verb} {tags}"
                t0 = start + st["start_us"] / 1e6
                add(t0, "step", rank=r, who=who, text=label,
                    op=f"{e['kind']} op {e['op']}")
                if st.get("duration_us") is not None:
                    err = st["reason"] if st["error"] else ""
                    if err and err != "cancelled" and failed_at is None:
                        failed_at = t0
                    add(t0 + st["duration_us"] / 1e6, "answer", rank=r,
                        who=who, text=err or "done", error=bool(err))
        elif e.get("event") == "group_result":
            t = max((x[0] for x in evs), default=0)
            add(t + 1e-6, "result", text="; ".join(
                f"rank {k['rank']}: {k['outcome'].replace('|', ', ')}"
                for k in e["ranks"]))
    evs.sort(key=lambda x: (x[0], x[1]))
    # one rollback row only, before the first of its steps
    phases = [i for i, x in enumerate(evs) if x[2] == "phase"]
    for i in reversed(phases[1:]):
        del evs[i]
    return meta, ranks, evs


def draw(rec, out):
    meta, ranks, evs = events(rec)
    n = max(ranks.values(), default=0) + 1
    names = [meta.get("trainer", "trainer"), "gpusleep.ko"]
    for r in range(n):
        names += [f"rank {r}|{meta.get('engine', 'engine')}",
                  f"rank {r}|{meta.get('agent', 'agent')}"]
    col = 150 if n < 3 else 122
    xs = [LEFT + 70 + i * col for i in range(len(names))]
    width = xs[-1] + 110
    height = TOP + len(evs) * ROW + 40
    s = Svg(width, height, meta.get("title", "a recorded run"))
    s.text(width / 2, 24, meta.get("title", "a recorded run"), 15, "middle",
           "bold")
    s.text(width / 2, 42, "recorded in the VM (tools/figures/record.py): "
           "the kernel's timeline of each operation; rows in time order, "
           "not to scale", 10, "middle", color="#555", italic=True)
    for x, name in zip(xs, names):
        rows = []
        for part in name.split("|"):
            head, _, tail = part.partition(" (")
            rows += [head] + (["(" + tail] if tail else [])
        s.box(x - col / 2 + 6, 52, col - 12, 50, fill="#f4f4f4")
        for j, r in enumerate(rows[:3]):
            s.text(x, 66 + j * 14, r, 10 if j else 10.5, "middle",
                   "normal" if j else "bold")
        s.line(x, 102, x, height - 20)
    t_first = evs[0][0] if evs else 0
    x_of = {"trainer": xs[0], "ko": xs[1]}

    def lx(rank, who):
        return xs[2 + 2 * rank + (who == "agent")]

    for i, (t, _, kind, f) in enumerate(evs):
        y = TOP + i * ROW
        s.text(LEFT + 14, y + 4, f"{(t - t_first) * 1e3:7.1f} ms", 9.5,
               "end", color="#666")
        if kind == "call":
            to = x_of["ko"] if f.get("via") is None else lx(f["via"],
                                                            "engine")
            s.arrow(x_of["trainer"], y, to, y, color=COLOR["call"])
            s.text(x_of["trainer"] + 4, y - 4, f["text"], 10,
                   color=COLOR["call"])
        elif kind == "via":
            x = lx(f["rank"], "engine")
            s.arrow(x, y, x_of["ko"], y, color=COLOR["call"])
            s.text(x_of["ko"] + 4, y - 4, f["text"], 10, color=COLOR["call"])
        elif kind == "phase":
            s.line(xs[0], y, xs[-1], y, color="#c0392b", dash=True)
            s.text(xs[1] + 6, y - 4, f["text"], 10, color="#c0392b",
                   italic=True)
        elif kind == "return":
            c = COLOR["error"] if f["error"] else COLOR["call"]
            frm = x_of["ko"] if f.get("via") is None else lx(f["via"],
                                                             "engine")
            s.arrow(frm, y, x_of["trainer"], y, color=c, dash=True)
            s.text(x_of["trainer"] + 4, y - 4, f["text"][:110], 10,
                   color=c)
        elif kind == "note":
            x = x_of["trainer"] if f.get("rank") is None else \
                lx(f["rank"], "engine")
            if f.get("rank") is None:
                s.text(x + 4, y + 4, f["text"], 10, color=COLOR["note"],
                       italic=True)
            else:
                s.arrow(x_of["trainer"], y, x, y, color=COLOR["note"])
                s.text(x_of["trainer"] + 4, y - 4,
                       f"rank {f['rank']}: {f['text']}", 10,
                       color=COLOR["note"])
        elif kind == "step":
            x = lx(f["rank"], f["who"])
            s.arrow(x_of["ko"], y, x, y, color=COLOR[f["who"]])
            s.text(x - 4, y - 4, f["text"], 10, "end",
                   color=COLOR[f["who"]])
        elif kind == "answer":
            x = lx(f["rank"], f["who"])
            c = COLOR["error"] if f["error"] else COLOR[f["who"]]
            s.arrow(x, y, x_of["ko"], y, color=c, dash=True)
            if f["error"]:
                s.text(x_of["ko"] + 6, y - 4, f["text"], 10, color=c,
                       weight="bold")
        elif kind == "result":
            s.text(x_of["trainer"] + 4, y + 4, "group result: " + f["text"],
                   10, color=COLOR["note"], italic=True)
    s.write(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    draw(load(sys.argv[1]), sys.argv[2])
