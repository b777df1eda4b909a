#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Merge benchmark records (JSON lines) into one JSON array and print a table.

Records of the same benchmark (id, env) from several repetitions of the
whole comparison ("rep") are merged into one: its ratio is the median of
the repetitions' ratios, with ratio_min, ratio_max and ratios (every one);
the medians_ns are those of the repetition whose ratio is the median;
"met" is judged on the median ratio, and met_reps counts the repetitions
that met the target on their own.

Usage: report.py OUT.json IN.jsonl...   (missing inputs are skipped)
"""
import json
import os
import sys


def fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} us"
    return f"{ns:.0f} ns"


def verdict(r):
    kind = r.get("target_kind")
    if r.get("note", "").startswith("skipped"):
        return "skipped"
    if kind == "none":
        return "ok" if r.get("met") else "FAILED"
    if r["id"] in ("1c", "1d"):
        return "(info)"
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
    return bool(r.get("met"))


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


def main():
    out, inputs = sys.argv[1], sys.argv[2:]
    recs = []
    for path in inputs:
        if not os.path.exists(path):
            print(f"report: {path}: missing (skipped)", file=sys.stderr)
            continue
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        recs.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        print(f"report: {path}: {e}", file=sys.stderr)
    recs = merge(recs)
    with open(out, "w") as f:
        json.dump(recs, f, indent=1)
        f.write("\n")

    rows = [("id", "env", "benchmark", "subject", "baseline",
             "ratio median [min-max] (n)", "target", "result")]
    for r in recs:
        med = list(r.get("medians_ns", {}).items())
        subj = f"{fmt_ns(med[0][1])}" if med else "-"
        base = f"{fmt_ns(med[1][1])}" if len(med) > 1 else "-"
        if r["id"] == "2a":
            base = fmt_ns(r["medians_ns"]["afunix_cycle"])
        if r["id"] == "2b":
            base = fmt_ns(r["medians_ns"]["pickle_cycle"])
        if r["id"] == "2c":
            subj = fmt_ns(r["medians_ns"]["pickle_cycle"])
            base = fmt_ns(r["medians_ns"]["afunix_cycle"])
        if r["id"].startswith("5-"):
            base = fmt_ns(r["medians_ns"]["one_domain_cycle"])
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else "-"
        if r.get("ratio") and len(r.get("ratios", [])) > 1:
            ratio += (f" [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]"
                      f" ({len(r['ratios'])})")
        rows.append((r["id"], r.get("env", ""), r["name"], subj, base, ratio,
                     target_str(r), verdict(r)))
    w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(row))
              + " |")
        if k == 0:
            print("| " + " | ".join("-" * w[i] for i in range(len(w))) + " |")
    print(f"\n{len(recs)} records in {out}")


if __name__ == "__main__":
    main()
