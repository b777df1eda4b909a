#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The demo's pictures, as one SVG written by hand (no plotting package):
the engine's and the trainer's memory (VmRSS) over the run, one point per
timeline row; below it the release timeline: per operation, the domain's
states (draining, releasing, released, resuming) as bars, from the
watcher's `gpusleepctl -j monitor -t` lines; and below that the steps of
each operation (drain, prefix-cache reset, each tag's unmap and map, KV
repair) as bars, from `gpusleepctl -j monitor --timeline` lines.

    plot.py ROWS.jsonl EVENTS.jsonl OUT.svg [TIMELINE.jsonl [LEASES.jsonl]]

ROWS: the trainer's --rows file ({"unix_s", "phase", "step",
"engine_rss_bytes", "trainer_rss_bytes"}). EVENTS: monitor lines with a
"timestamp" (the kernel's time of each transition). TIMELINE: one
"timeline" object per operation, whose steps' "start_us" count from the
operation's first transition in EVENTS. LEASES: the second part's rows
(tools/demo/leases.py: {"unix_s", "step", "phase", "dur_s", "mem_bytes":
{process: VmRSS}, "victims"}): below the rest, the memory of the two
engines and the trainer sharing one GPU through leases, each lease's
span shaded, with what it took. Lines that do not parse are skipped; an
empty run gives an SVG that says so."""

import json
import sys
from html import escape

W = 900
LEFT, RIGHT = 130, 20
MEM_TOP, MEM_H = 40, 260
TL_TOP, TL_ROW = 350, 26
STEP_TOP, STEP_ROW = 520, 20
STEP_TEXT = {"drain": "drain", "reset_caches": "reset prefix cache",
             "pause_tag": "unmap", "resume_tag": "map",
             "repair_kv": "repair KV"}
LEASE_H = 200
LEASE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#8c564b"]
COLORS = {"engine": "#1f77b4", "trainer": "#d62728",
          "draining": "#ff7f0e", "releasing": "#9467bd",
          "released": "#7f7f7f", "resuming": "#2ca02c"}


def load(path):
    out = []
    try:
        with open(path) as f:
            for ln in f:
                try:
                    out.append(json.loads(ln))
                except ValueError:
                    continue
    except OSError:
        pass
    return out


def spans(events, domain):
    """[(op, state, start, end)] from the transitions of domain."""
    res, open_ = [], {}
    for e in events:
        if e.get("event") != "transition" or \
                not isinstance(e.get("timestamp"), (int, float)):
            continue
        if domain is not None and e.get("domain", {}).get("id") != domain:
            continue
        t, op = e["timestamp"], e.get("op", 0)
        if op in open_:
            st, t0 = open_.pop(op)
            res.append((op, st, t0, t))
        if e.get("to") in ("draining", "releasing", "resuming"):
            open_[op] = (e["to"], t)
        elif e.get("to") == "released":
            res.append((op, "released", t, None))	# closed by the next op
    # a released span ends where the next operation starts
    out = []
    starts = sorted(s for _, _, s, _ in res)
    for op, st, t0, t1 in res:
        if t1 is None:
            later = [s for s in starts if s > t0]
            t1 = later[0] if later else t0
        out.append((op, st, t0, t1))
    return sorted(out, key=lambda s: s[2])


def steps(timeline, events, domain):
    """[(label, op, start, end, failed)] of domain's operations' steps:
    each timeline object's steps, from its operation's first transition."""
    first = {}
    for e in events:
        if e.get("event") == "transition" and \
                isinstance(e.get("timestamp"), (int, float)) and \
                e.get("domain", {}).get("id") == domain:
            first.setdefault(e.get("op"), e["timestamp"])
    out = []
    for tl in timeline:
        if tl.get("event") != "timeline" or \
                tl.get("domain", {}).get("id") != domain or \
                tl.get("op") not in first:
            continue
        for st in tl.get("steps", []):
            if not isinstance(st.get("start_us"), int):
                continue
            label = STEP_TEXT.get(st.get("type"), str(st.get("type")))
            if st.get("type") in ("pause_tag", "resume_tag"):
                label += " " + ",".join(st.get("tags", []))
            a = first[tl["op"]] + st["start_us"] / 1e6
            b = a + (st.get("duration_us") or 0) / 1e6
            out.append((label, tl["op"], a, b, bool(st.get("error"))))
    return out


def lease_panel(leases, top):
    """The second part: memory of each process over the lease steps, the
    leases' spans shaded. [svg parts], its height."""
    leases = [r for r in leases if isinstance(r.get("unix_s"), (int, float))
              and isinstance(r.get("mem_bytes"), dict)]
    if not leases:
        return [], 0
    procs = []
    for r in leases:
        for k in r["mem_bytes"]:
            if k not in procs:
                procs.append(k)
    procs = [p for p in procs if p != "trainer"] + ["trainer"]
    t0 = min(r["unix_s"] - (r.get("dur_s") or 0) for r in leases)
    t1 = max(r["unix_s"] for r in leases)
    span = max(t1 - t0, 1e-3)
    mib = max(max(r["mem_bytes"].values()) for r in leases) / 2**20 or 1
    y0 = top + 30

    def x(t):
        return LEFT + (t - t0) / span * (W - LEFT - RIGHT)

    def y(b):
        return y0 + LEASE_H - b / 2**20 / mib * LEASE_H

    parts = ['<text x="%d" y="%d" font-size="15">part 2: two engines and '
             'a trainer sharing one GPU through leases (VmRSS)</text>'
             % (LEFT, top + 14)]
    for i in range(5):
        v = mib * i / 4
        yy = y(v * 2**20)
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" '
                     'stroke="#ddd"/><text x="%d" y="%.1f" '
                     'text-anchor="end">%.0f MiB</text>'
                     % (LEFT, W - RIGHT, yy, yy, LEFT - 4, yy + 4, v))
    # each lease: from its acquire's start to its return
    start = {}
    for r in leases:
        if r.get("phase") == "acquired":
            start[r.get("step")] = (r["unix_s"] - (r.get("dur_s") or 0), r)
        elif r.get("phase") == "returned" and r.get("step") in start:
            a, acq = start.pop(r.get("step"))
            took = ", ".join("%s %s" % (v.get("domain"),
                                        "+".join(v.get("tags", [])))
                             for v in acq.get("victims", []))
            parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" '
                         'fill="#eee"><title>lease %s: %s</title></rect>'
                         '<text x="%.1f" y="%d" fill="#555">lease %s: %s'
                         '</text>'
                         % (x(a), y0, max(x(r["unix_s"]) - x(a), 1.5),
                            LEASE_H, acq.get("lease"), escape(took),
                            x(a) + 3, y0 + 12, acq.get("lease"),
                            escape(took)))
    for i, p in enumerate(procs):
        color = COLORS["trainer"] if p == "trainer" else \
            LEASE_COLORS[i % len(LEASE_COLORS)]
        pts = " ".join("%.1f,%.1f" % (x(r["unix_s"]),
                                      y(r["mem_bytes"].get(p, 0)))
                       for r in leases)
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2" '
                     'points="%s"/>' % (color, pts))
        parts.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>'
                     '<text x="%d" y="%d">%s</text>'
                     % (W - 300 + i * 90, top + 4, color, W - 284 + i * 90,
                        top + 14, escape(p)))
    ay = y0 + LEASE_H + 16
    for i in range(6):
        t = span * i / 5
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%.1f s'
                     '</text>' % (x(t0 + t), ay, t))
    return parts, LEASE_H + 60


def svg(rows, events, timeline=(), leases=()):
    rows = [r for r in rows if "unix_s" in r]
    domain = None
    for e in events:
        if e.get("event") == "transition":
            domain = e.get("domain", {}).get("id")
            break
    sp = spans(events, domain)
    stp = steps(timeline, events, domain)
    labels = []
    for lb, _, _, _, _ in stp:
        if lb not in labels:
            labels.append(lb)
    height = STEP_TOP + max(len(labels), 1) * STEP_ROW + 40
    lparts, lheight = lease_panel(leases, height)
    height += lheight
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" font-size="12">' % (W, height),
             '<rect width="100%" height="100%" fill="white"/>']
    if not rows:
        parts.append('<text x="20" y="40">no timeline rows</text></svg>')
        return "\n".join(parts)
    t0 = min([r["unix_s"] for r in rows] + [s[2] for s in sp] +
             [s[2] for s in stp])
    t1 = max([r["unix_s"] for r in rows] + [s[3] for s in sp] +
             [s[3] for s in stp])
    span = max(t1 - t0, 1e-3)
    mib = max(max(r["engine_rss_bytes"], r["trainer_rss_bytes"])
              for r in rows) / 2**20 or 1

    def x(t):
        return LEFT + (t - t0) / span * (W - LEFT - RIGHT)

    def y(b):
        return MEM_TOP + MEM_H - b / 2**20 / mib * MEM_H

    parts.append('<text x="%d" y="22" font-size="15">gpusleep demo: memory '
                 '(VmRSS) of the engine and the trainer</text>' % LEFT)
    for i in range(5):		# y grid, MiB
        v = mib * i / 4
        yy = y(v * 2**20)
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" '
                     'stroke="#ddd"/>' % (LEFT, W - RIGHT, yy, yy))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.0f MiB'
                     '</text>' % (LEFT - 4, yy + 4, v))
    for who in ("engine", "trainer"):
        pts = " ".join("%.1f,%.1f" % (x(r["unix_s"]), y(r[who + "_rss_bytes"]))
                       for r in rows)
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2" '
                     'points="%s"/>' % (COLORS[who], pts))
    for n, who in enumerate(("engine", "trainer")):
        parts.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>'
                     '<text x="%d" y="%d">%s</text>'
                     % (W - 200 + n * 90, 28, COLORS[who],
                        W - 184 + n * 90, 38, who))
    # phase ticks: the step's release rows
    for r in rows:
        if r.get("phase", "").startswith("release"):
            xx = x(r["unix_s"])
            parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" '
                         'stroke="#bbb" stroke-dasharray="3,3"/>'
                         '<text x="%.1f" y="%d" fill="#555">step %s</text>'
                         % (xx, xx, MEM_TOP, MEM_TOP + MEM_H, xx + 3,
                            MEM_TOP + 12, escape(str(r.get("step")))))
    # the release timeline
    parts.append('<text x="%d" y="%d" font-size="15">release timeline '
                 '(domain states, from gpusleepctl monitor -t)'
                 '</text>' % (LEFT, TL_TOP - 14))
    states = ["draining", "releasing", "released", "resuming"]
    for i, st in enumerate(states):
        yy = TL_TOP + i * TL_ROW
        parts.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                     % (LEFT - 4, yy + 16, st))
        for op, s, a, b in sp:
            if s != st:
                continue
            parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" '
                         'fill="%s"><title>op %s %s %.1f ms</title></rect>'
                         % (x(a), yy + 4, max(x(b) - x(a), 1.5), TL_ROW - 8,
                            COLORS[st], op, st, (b - a) * 1e3))
    ay = TL_TOP + len(states) * TL_ROW + 16
    parts.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>'
                 % (LEFT, W - RIGHT, ay - 12, ay - 12))
    for i in range(6):
        t = span * i / 5
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%.1f s'
                     '</text>' % (x(t0 + t), ay + 2, t))
    if not sp:
        parts.append('<text x="%d" y="%d" fill="#a00">no timestamped events '
                     '(the watcher did not run with -t)</text>'
                     % (LEFT, TL_TOP + 40))
    # the steps within the states
    parts.append('<text x="%d" y="%d" font-size="15">steps of each '
                 'operation (from gpusleepctl monitor --timeline)</text>'
                 % (LEFT, STEP_TOP - 14))
    for i, lb in enumerate(labels):
        yy = STEP_TOP + i * STEP_ROW
        parts.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                     % (LEFT - 4, yy + 14, escape(lb)))
        for lb2, op, a, b, failed in stp:
            if lb2 != lb:
                continue
            parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" '
                         'fill="%s"><title>op %s %s %.1f ms%s</title></rect>'
                         % (x(a), yy + 3, max(x(b) - x(a), 1.5), STEP_ROW - 6,
                            "#d62728" if failed else "#17becf", op,
                            escape(lb), (b - a) * 1e3,
                            " failed" if failed else ""))
    if not stp:
        parts.append('<text x="%d" y="%d" fill="#a00">no step timeline '
                     '(no gpusleepctl monitor --timeline lines)</text>'
                     % (LEFT, STEP_TOP + 14))
    parts += lparts
    parts.append("</svg>")
    return "\n".join(parts)


def main(argv):
    if len(argv) not in (4, 5, 6):
        sys.stderr.write(__doc__)
        return 2
    timeline = load(argv[4]) if len(argv) >= 5 else []
    leases = load(argv[5]) if len(argv) == 6 else []
    with open(argv[3], "w") as f:
        f.write(svg(load(argv[1]), load(argv[2]), timeline, leases) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
