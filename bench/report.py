#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Merge benchmark records into build/bench/results.json, print the table
and the verdict; render the Markdown table and the SVG chart the docs show.

Records of the same benchmark (id, env) from several repetitions of the
whole comparison ("rep") are merged into one: its ratio is the median of
the repetitions' ratios, with ratio_min, ratio_max and ratios (every one);
the medians_ns are those of the repetition whose ratio is the median;
"met" is judged on the median ratio, and met_reps counts the repetitions
that met the target on their own. A record with a "meta" key is not a
benchmark: its fields (the guest's kernel, vCPUs) go to the run's header.

Usage:
  report.py OUT.json IN.jsonl... [--meta KEY=VALUE]...
      merge (missing inputs are skipped), write OUT.json, print the table
      and "N met, M missed"; exit 1 when a target was missed, unless
      BENCH_STRICT=0 (then only report)
  report.py --markdown RESULTS.json
      print the Markdown table of a results file (what the docs carry)
  report.py --svg RESULTS.json OUT.svg
      draw each targeted ratio, its range and its target (an SVG written
      by hand, as tools/demo/plot.py draws the demo's: no plotting package)
  report.py --update RESULTS.json FILE...
      replace, in each FILE, the lines between <!-- bench-table --> and
      <!-- /bench-table --> by the Markdown table
"""
import json
import math
import os
import sys
from html import escape

BEGIN = "<!-- bench-table -->"
END = "<!-- /bench-table -->"


def fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def targeted(r):
    """Does the record carry a target (counted in N met, M missed)?"""
    return r.get("target_kind") in ("max", "min")


def skipped(r):
    return r.get("note", "").startswith("skipped")


def verdict(r):
    kind = r.get("target_kind")
    if skipped(r):
        return "skipped"
    if kind == "none":
        return "ok" if r.get("met", True) else "FAILED"
    v = "met" if r.get("met") else "MISSED"
    if r.get("reps", 1) > 1 and "met_reps" in r:
        v += f" ({r['met_reps']}/{len(r['ratios'])})"
    return v


def target_str(r):
    kind = r.get("target_kind")
    if kind == "max":
        return f"<= {r['target']:g}x"
    if kind == "min":
        return f">= {r['target']:g}x faster"
    return "-"


def met_one(r, ratio):
    kind = r.get("target_kind")
    if kind == "max":
        return ratio <= r["target"]
    if kind == "min":
        return ratio >= r["target"]
    return bool(r.get("met", True))


def merge(recs):
    """One record per (env, id), in first-seen order, over repetitions."""
    groups = {}
    for r in recs:
        groups.setdefault((r.get("env", ""), r["id"]), []).append(r)
    merged = []
    for runs in groups.values():
        ok = [r for r in runs if r.get("ratio")]
        if not ok:
            merged.append(dict(runs[0], reps=len(runs)))
            continue
        ok.sort(key=lambda r: r["ratio"])
        mid = ok[(len(ok) - 1) // 2]   # lower median: an observed value
        m = dict(mid)
        m.pop("rep", None)
        m["ratios"] = [r["ratio"] for r in sorted(ok, key=lambda r: r.get("rep", 0))]
        m["ratio_min"] = ok[0]["ratio"]
        m["ratio_max"] = ok[-1]["ratio"]
        m["reps"] = len(runs)
        m["met"] = met_one(mid, mid["ratio"])
        m["met_reps"] = sum(met_one(r, r["ratio"]) for r in ok)
        merged.append(m)
    return merged


def tally(recs):
    """(met, missed): targeted records, a skipped one counts as missed."""
    met = missed = 0
    for r in recs:
        if not targeted(r):
            if r.get("target_kind") == "none" and not r.get("met", True):
                missed += 1     # a run that failed (bench/gpu dry run)
            continue
        if r.get("met") and r.get("ratio") and not skipped(r):
            met += 1
        else:
            missed += 1
    return met, missed


def ratio_str(r, digits=2):
    if not r.get("ratio"):
        return "-"
    s = f"{r['ratio']:.{digits}f}x"
    if len(r.get("ratios", [])) > 1:
        s += f" [{r['ratio_min']:.{digits}f}-{r['ratio_max']:.{digits}f}]"
    return s


def subject_baseline(r):
    """The medians shown beside the ratio: subject, baseline."""
    med = list(r.get("medians_ns", {}).items())
    d = r.get("medians_ns", {})
    subj = fmt_ns(med[0][1]) if med else "-"
    base = fmt_ns(med[1][1]) if len(med) > 1 else "-"
    if r["id"] == "2a":
        base = fmt_ns(d["afunix_cycle"])
    if r["id"] == "2b":
        base = fmt_ns(d["pickle_cycle"])
    if r["id"] == "2c":
        subj, base = fmt_ns(d["pickle_cycle"]), fmt_ns(d["afunix_cycle"])
    if r["id"].startswith("5-") and "one_domain_cycle" in d:
        base = fmt_ns(d["one_domain_cycle"])
    return subj, base


def print_table(recs):
    rows = [("id", "env", "benchmark", "subject", "baseline",
             "ratio median [min-max] (n)", "target", "result")]
    for r in recs:
        ratio = ratio_str(r)
        if r.get("ratio") and len(r.get("ratios", [])) > 1:
            ratio += f" ({len(r['ratios'])})"
        subj, base = subject_baseline(r)
        rows.append((r["id"], r.get("env", ""), r["name"], subj, base,
                     ratio, target_str(r), verdict(r)))
    w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(row))
              + " |")
        if k == 0:
            print("| " + " | ".join("-" * w[i] for i in range(len(w))) + " |")


def header(res):
    parts = [f"Run of {res.get('date', '?')}", f"`{res.get('command', '?')}`"]
    if res.get("kernel"):
        parts.append(f"guest kernel {res['kernel']}")
    if res.get("vcpus"):
        parts.append(f"{res['vcpus']} vCPU(s) under qemu TCG")
    if res.get("host"):
        parts.append(res["host"])
    parts.append(f"{res.get('repetitions', '?')} repetitions, "
                 "median [min-max] of the repetitions' ratios")
    return ", ".join(parts) + "."


def markdown(res):
    """The table the README and docs/benchmarks.md carry (one renderer)."""
    recs = res["results"]
    out = [header(res), "",
           "| id | env | benchmark | ratio | target | result |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in recs:
        ratio = ratio_str(r)
        if "bytes_per_domain" in r.get("sizes", {}):
            ratio += f" ({r['sizes']['bytes_per_domain']:.0f} bytes)"
        out.append(f"| {r['id']} | {r.get('env', '')} | {r['name']} | "
                   f"{ratio} | {target_str(r)} | {verdict(r)} |")
    met, missed = tally(recs)
    out += ["", f"{met} met, {missed} missed. Chart: "
            "[bench-results.svg](docs/bench-results.svg)."]
    return "\n".join(out) + "\n"


def svg(res):
    """Each targeted ratio (log scale): a dot at the median, a bar from min
    to max, a tick at the target; green when met, red when missed."""
    recs = [r for r in res["results"] if targeted(r) and r.get("ratio")]
    row, left, width = 22, 330, 420
    h = 70 + row * max(len(recs), 1) + 30
    w = left + width + 40
    lo, hi = 0.1, 30.0

    def x(v):
        v = min(max(v, lo), hi)
        return left + (math.log10(v) - math.log10(lo)) / \
            (math.log10(hi) - math.log10(lo)) * width

    p = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
         'font-family="sans-serif" font-size="12">',
         '<rect width="100%" height="100%" fill="white"/>',
         f'<text x="10" y="20" font-size="14">gpusleep benchmarks: ratio to '
         f'the baseline (log scale; lower is better, "faster" rows higher)'
         f'</text>',
         f'<text x="10" y="38" fill="#555">{escape(header(res))[:150]}</text>']
    for v in (0.1, 0.5, 1, 2, 5, 10, 30):
        xx = x(v)
        p.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="50" y2="{h - 25}" '
                 f'stroke="{"#999" if v == 1 else "#e5e5e5"}"/>'
                 f'<text x="{xx:.1f}" y="{h - 10}" text-anchor="middle">'
                 f'{v:g}x</text>')
    for i, r in enumerate(recs):
        y = 62 + i * row
        color = "#2ca02c" if r.get("met") else "#d62728"
        label = f"{r['id']} ({r.get('env', '')}) {r['name']}"[:52]
        p.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">'
                 f'{escape(label)}</text>')
        a, b = x(r.get("ratio_min", r["ratio"])), x(r.get("ratio_max", r["ratio"]))
        p.append(f'<line x1="{a:.1f}" x2="{max(b, a + 1):.1f}" y1="{y}" '
                 f'y2="{y}" stroke="{color}" stroke-width="3"/>')
        p.append(f'<circle cx="{x(r["ratio"]):.1f}" cy="{y}" r="4" '
                 f'fill="{color}"><title>{escape(ratio_str(r))} '
                 f'target {escape(target_str(r))}</title></circle>')
        t = x(r["target"])
        p.append(f'<line x1="{t:.1f}" x2="{t:.1f}" y1="{y - 7}" '
                 f'y2="{y + 7}" stroke="#000" stroke-width="2"/>')
    p.append("</svg>")
    return "\n".join(p) + "\n"


def split(text, path):
    """(before, block, after) around the marker lines (each alone on its
    line), or None when the text has none."""
    lines = text.splitlines(keepends=True)
    try:
        b = next(i for i, ln in enumerate(lines) if ln.strip() == BEGIN)
        e = next(i for i, ln in enumerate(lines) if ln.strip() == END and i > b)
    except StopIteration:
        return None
    return ("".join(lines[:b + 1]), "".join(lines[b + 1:e]),
            "".join(lines[e:]))


def update(res, paths):
    table = markdown(res)
    for path in paths:
        with open(path) as f:
            parts = split(f.read(), path)
        if parts is None:
            raise SystemExit(f"report: {path}: no {BEGIN} ... {END} lines")
        table_here = table
        if os.path.dirname(os.path.abspath(path)).endswith(os.sep + "docs"):
            table_here = table.replace("(docs/bench-results.svg)",
                                       "(bench-results.svg)")
        with open(path, "w") as f:
            f.write(parts[0] + table_here + parts[2])


def block(path):
    """The text between the marker lines of path (for the docs' test)."""
    with open(path) as f:
        parts = split(f.read(), path)
    return parts[1] if parts else None


def load(path):
    with open(path) as f:
        return json.load(f)


def main(argv):
    if len(argv) >= 2 and argv[1] == "--markdown":
        sys.stdout.write(markdown(load(argv[2])))
        return 0
    if len(argv) >= 3 and argv[1] == "--svg":
        with open(argv[3], "w") as f:
            f.write(svg(load(argv[2])))
        return 0
    if len(argv) >= 3 and argv[1] == "--update":
        update(load(argv[2]), argv[3:])
        return 0
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    out, inputs, meta = argv[1], [], {}
    args = iter(argv[2:])
    for a in args:
        if a == "--meta":
            k, _, v = next(args).partition("=")
            meta[k] = int(v) if v.isdigit() else v
        else:
            inputs.append(a)
    recs = []
    for path in inputs:
        if not os.path.exists(path):
            print(f"report: {path}: missing (skipped)", file=sys.stderr)
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    print(f"report: {path}: {e}", file=sys.stderr)
                    continue
                if "meta" in r:
                    meta.update({k: v for k, v in r.items() if k != "meta"})
                else:
                    recs.append(r)
    recs = merge(recs)
    res = dict(meta, results=recs)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print_table(recs)
    met, missed = tally(recs)
    print(f"\n{len(recs)} records in {out}")
    print(f"{met} met, {missed} missed")
    return 1 if missed and os.environ.get("BENCH_STRICT", "1") != "0" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
