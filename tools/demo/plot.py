#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The demo's pictures, as one SVG written by hand (no plotting package):
the engine's and the trainer's memory (VmRSS) over the run, one point per
timeline row, and below it the release timeline: per operation, the
domain's states (draining, releasing, released, resuming) as bars, from
the watcher's `gpusleepctl -j monitor -t` lines.

    plot.py ROWS.jsonl EVENTS.jsonl OUT.svg

ROWS: the trainer's --rows file ({"unix_s", "phase", "step",
"engine_rss_bytes", "trainer_rss_bytes"}). EVENTS: monitor lines with a
"timestamp" (the kernel's time of each transition). Lines that do
not parse are skipped; an empty run gives an SVG that says so."""

import json
import sys
from html import escape

W, H = 900, 520
LEFT, RIGHT = 70, 20
MEM_TOP, MEM_H = 40, 260
TL_TOP, TL_ROW = 350, 26
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


def svg(rows, events):
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" font-size="12">' % (W, H),
             '<rect width="100%" height="100%" fill="white"/>']
    rows = [r for r in rows if "unix_s" in r]
    if not rows:
        parts.append('<text x="20" y="40">no timeline rows</text></svg>')
        return "\n".join(parts)
    domain = None
    for e in events:
        if e.get("event") == "transition":
            domain = e.get("domain", {}).get("id")
            break
    sp = spans(events, domain)
    t0 = min([r["unix_s"] for r in rows] + [s[2] for s in sp])
    t1 = max([r["unix_s"] for r in rows] + [s[3] for s in sp])
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
    parts.append("</svg>")
    return "\n".join(parts)


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[3], "w") as f:
        f.write(svg(load(argv[1]), load(argv[2])) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
