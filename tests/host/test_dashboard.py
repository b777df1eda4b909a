#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""packaging/grafana/gpusleep.json, the Grafana dashboard: valid JSON with
the structure Grafana imports (unique panel ids, grid positions, a
Prometheus datasource variable, a query per target); every gpusleep metric
it uses is one the exporter writes (the # TYPE lines of `gpusleepctl
metrics --textfile DIR --once` over a fake sysfs tree, as
tests/host/test_ctl_exporter.py makes it), every gpusleep:* series a
recording rule of packaging/prometheus/gpusleep-rules.yml, every DCGM
series one of DCGM_FI_DEV_FB_USED / _FREE, every label it groups or joins
on one of the exporter's or DCGM's (gpu, UUID, pci_bus_id, Hostname);
and every query parses as PromQL (promtool check rules, when promtool is
installed). Prints TAP."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
DASH = os.path.join(REPO, "packaging", "grafana", "gpusleep.json")
RULES = os.path.join(REPO, "packaging", "prometheus", "gpusleep-rules.yml")
CTL = os.path.join(REPO, "build", "bin", "gpusleepctl")
sys.path.insert(0, HERE)
from test_ctl_exporter import BOUND, Tap, write_domain  # noqa: E402

DCGM = {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"}
DCGM_LABELS = {"gpu", "UUID", "pci_bus_id", "Hostname", "device",
               "modelName"}
# the exporter's labels (docs/node-tooling.md) and Prometheus's own
LABELS = {"instance", "job", "domain", "name", "tag", "state", "source",
          "gpu_ident", "owner_uid", "file", "alertname", "alertstate",
          "class", "lease", "result", "policy", "content"}


def exprs(dash):
    """Every PromQL query: the panels' targets and the variables'."""
    out = []
    for p in dash["panels"]:
        out += [t["expr"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            out.append(q["query"])
    return out


def promql(e):
    """label_values(EXPR, label) -> EXPR: the part Prometheus runs."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", e)
    return m.group(1) if m else e


def exported():
    """The metric names the exporter writes (its # TYPE lines)."""
    tmp = tempfile.mkdtemp()
    try:
        sysfs, params, tdir = (os.path.join(tmp, d) for d in
                               ("sys", "params", "textfile"))
        for d in (sysfs, params, tdir):
            os.makedirs(d)
        for k in ("drain_timeout_ms", "step_timeout_ms",
                  "host_budget_bytes", "host_used_bytes"):
            with open(os.path.join(params, k), "w") as f:
                f.write("10000\n")
        for k in ("leases", "reclaims"):
            with open(os.path.join(sysfs, k), "w") as f:
                f.write("1\n")
        # a module with tenants (docs/arbiter.md), its agent reported
        write_domain(sysfs, 1, priority="0", yieldable="0",
                     gpu_uuid="5d1e0b3a-0000-1111-2222-333344445555",
                     lease_id="2", leased_tags="weights", host_bytes="4096",
                     tag_policy="backup,discard,discard",
                     tag_content="kept,zeroed,zeroed", tag_verified="0,0,0",
                     tag_size_bytes="4096,0,0", tag_mapped_bytes="0,0,0",
                     tag_host_bytes="4096,0,0", resident_torch_bytes="0",
                     resident_graph_bytes="0", resident_process_bytes="0",
                     resident_process_source="unknown")
        env = dict(os.environ, GPUSLEEP_SYSFS=sysfs,
                   GPUSLEEP_MODULE_PARAMS=params)
        # the running exporter (not --once, which leaves out what only it
        # counts): its first file, then SIGTERM
        p = subprocess.Popen([CTL, "metrics", "--textfile", tdir],
                             stderr=subprocess.PIPE, text=True, env=env)
        prom = os.path.join(tdir, "gpusleep.prom")
        deadline = time.monotonic() + BOUND
        while not os.path.exists(prom) and p.poll() is None and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        p.terminate()
        err = p.communicate(timeout=BOUND)[1]
        if not os.path.exists(prom):
            raise RuntimeError(f"gpusleepctl metrics --textfile: {err}")
        with open(prom) as f:
            return {ln.split()[2] for ln in f if ln.startswith("# TYPE ")}
    finally:
        shutil.rmtree(tmp)


def recorded():
    with open(RULES) as f:
        return set(re.findall(r"^\s*-\s*record:\s*(\S+)", f.read(), re.M))


def main():
    t = Tap()
    print("TAP version 13")
    print("1..5")
    try:
        with open(DASH) as f:
            dash = json.load(f)
        err = ""
    except (OSError, ValueError) as e:
        dash, err = None, str(e)
    t.check("gpusleep.json is valid JSON", dash is not None, err)
    if dash is None:
        for name in ("structure", "metrics", "labels", "PromQL"):
            t.check(name + " # SKIP no dashboard", True)
        return 1

    bad = []
    ids = [p.get("id") for p in dash.get("panels", [])]
    if len(set(ids)) != len(ids) or None in ids:
        bad.append(f"panel ids not unique: {ids}")
    for k in ("title", "uid", "schemaVersion", "panels", "templating"):
        if k not in dash:
            bad.append(f"no {k}")
    if not any(v.get("type") == "datasource" and v.get("query") ==
               "prometheus" for v in dash["templating"]["list"]):
        bad.append("no prometheus datasource variable")
    for p in dash["panels"]:
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "xywh") or \
                g["x"] + g["w"] > 24:
            bad.append(f"panel {p.get('id')}: gridPos {g}")
        if p.get("type") != "row":
            if not p.get("targets") or not all(tg.get("expr") and
                                               tg.get("refId")
                                               for tg in p["targets"]):
                bad.append(f"panel {p.get('title')}: targets")
            if p.get("datasource", {}).get("uid") != "${datasource}":
                bad.append(f"panel {p.get('title')}: datasource")
    t.check("structure: ids, grid, datasource variable, targets",
            not bad, "\n".join(bad))

    have = exported() | recorded() | DCGM | {"ALERTS"}
    used = set()
    for e in exprs(dash):
        used |= set(re.findall(r"\b(gpusleep[_:][A-Za-z0-9_:]*|DCGM_\w+|"
                               r"ALERTS)\b", e))
    missing = sorted(used - have)
    t.check("every metric used is the exporter's, a recording rule's or "
            "DCGM's", not missing and any(u.startswith("DCGM") for u in used),
            f"missing: {missing}; the exporter writes: {sorted(have)}")

    labels = set()
    for e in exprs(dash):
        for grp in re.findall(r"\b(?:by|on|group_left|group_right|without)"
                              r"\s*\(([^)]*)\)", e):
            labels |= {s.strip() for s in grp.split(",") if s.strip()}
        labels |= set(re.findall(r"[{,]\s*(\w+)\s*=~?", e))
        m = re.fullmatch(r"label_values\(.*,\s*(\w+)\)", e)
        if m:
            labels.add(m.group(1))
    unknown = sorted(labels - LABELS - DCGM_LABELS)
    t.check("every label joined or grouped on is the exporter's or DCGM's",
            not unknown and {"UUID", "Hostname", "gpu"} <= labels,
            f"unknown: {unknown}; used: {sorted(labels)}")

    if shutil.which("promtool") is None:
        t.check("every query parses (promtool) # SKIP no promtool", True)
        return 0
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, e in enumerate(exprs(dash)):
            f.write(f"      - record: dashboard:q{i}\n"
                    f"        expr: {json.dumps(promql(e))}\n")
        f.flush()
        r = subprocess.run(["promtool", "check", "rules", f.name],
                           capture_output=True, text=True, timeout=60)
    t.check("every query parses (promtool check rules)", r.returncode == 0,
            r.stdout + r.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
