#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""gpusleepctl's output on the host, against a fake sysfs tree
(GPUSLEEP_SYSFS): human units by default and raw ones with -p, the memory
columns of list, a GPU column that does not overflow, -j before the
command, list --json keys those of status --json, group list and show,
the refusals that need no module (--tags "", --timeout 0, an ambiguous
name) and their JSON error object, and what happens without the module
(metrics: gpusleep_up 0; the others say how to load it). What needs the
module is tests/vm/ctl_test.py. Prints TAP.

GPUSLEEP_CTL runs another gpusleepctl binary (an older one, to see these
checks fail on it)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_ctl_exporter import (Tap as _Tap, write_domain,  # noqa: E402
                               promtool_ok)

CTL = os.environ.get("GPUSLEEP_CTL") or os.path.join(
    HERE, "..", "..", "build", "bin", "gpusleepctl")
GIB14 = str(14 * 1024 ** 3)
UUID = "GPU-5d1e0b3a-0000-1111-2222-333344445555"


class Tap(_Tap):
    failed = 0

    def check(self, name, cond, diag=""):
        self.failed += not cond
        super().check(name, cond, diag)


def ctl(env, *args):
    return subprocess.run([CTL] + list(args), capture_output=True, text=True,
                          env=env, timeout=60)


def jload(text, default):
    """text as JSON, or default when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return default


def columns(header):
    """The start of each column of a table's header line."""
    starts, prev = [], " "
    for i, ch in enumerate(header):
        if ch != " " and prev == " ":
            starts.append(i)
        prev = ch
    return starts


def aligned(lines):
    """Every row's cells start where the header's columns start."""
    starts = columns(lines[0])
    for ln in lines[1:]:
        for s in starts[1:]:
            if s >= len(ln) or ln[s - 1] != " " or ln[s] == " ":
                return False
    return True


def main():
    print("TAP version 13")
    if not os.access(CTL, os.X_OK):
        print("1..0 # SKIP %s not built" % CTL)
        return 0
    print("1..35")
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="gs-ctl-fmt-", dir=os.path.join(HERE, "..", "..", "build"))
    root = os.path.join(tmp, "sys")
    os.makedirs(root)
    write_domain(root, 1, tag_bytes_released=GIB14 + ",0,0",
                 resident_bytes="1288490188", resident_source="process",
                 group="g0")
    write_domain(root, 2, name="llm1", gpu="0000:42:00.0 " + UUID,
                 state="awake", released_tags="", agent_attached="0",
                 group="g0")
    write_domain(root, 3, name="dup", gpu=UUID + "," + UUID, state="awake",
                 released_tags="", group="")
    write_domain(root, 4, name="dup", gpu="gpu0", state="awake",
                 released_tags="", group="")
    env = dict(os.environ, GPUSLEEP_SYSFS=root,
               GPUSLEEP_DEVICE=os.path.join(tmp, "no-device"))
    gone = dict(env, GPUSLEEP_SYSFS=os.path.join(tmp, "no-module"))

    r = ctl(env, "list")
    lines = r.stdout.splitlines()
    row1 = lines[1].split() if len(lines) > 1 else []
    t.check("list: human units in a memory column (released, resident)",
            r.returncode == 0 and lines and
            lines[0].split()[:8] == ["ID", "NAME", "GPU", "STATE",
                                     "RELEASED", "MEMORY", "RESIDENT",
                                     "AGENT"] and
            "14.0 GiB" in lines[1] and "1.2 GiB" in lines[1], r)
    t.check("list: a long GPU string does not push the columns",
            len(lines) == 5 and aligned(lines) and
            all(len(ln) < 100 for ln in lines), r.stdout)
    t.check("list: the GPU column shows the PCI address",
            "0000:41:00.0" in lines[1] if len(lines) > 1 else False, r.stdout)
    r = ctl(env, "-p", "list")
    t.check("-p list: raw bytes", r.returncode == 0 and GIB14 in r.stdout and
            "1288490188" in r.stdout and "GiB" not in r.stdout, r)
    r = ctl(env, "list", "--bytes")
    t.check("list --bytes after the command too",
            r.returncode == 0 and GIB14 in r.stdout, r)

    r = ctl(env, "-j", "list")
    lst = jload(r.stdout, None)
    t.check("-j before the command: JSON", r.returncode == 0 and
            isinstance(lst, list) and len(lst) == 4, r)
    st = json.loads(ctl(env, "status", "1", "--json").stdout or "{}")
    t.check("list --json: status's keys, with bytes and resident",
            bool(lst) and set(lst[0]) <= set(st) and
            lst[0].get("bytes", {}).get("weights") == int(GIB14) and
            lst[0].get("resident") == {"bytes": 1288490188,
                                       "source": "process"}, (lst, st))
    r = ctl(env, "status", "1")
    t.check("status: human units", r.returncode == 0 and
            "weights 14.0 GiB" in r.stdout and "resident 1.2 GiB" in r.stdout
            and "last release 42.0 ms" in r.stdout, r)
    r = ctl(env, "-p", "status", "1")
    t.check("-p status: raw bytes and us", r.returncode == 0 and
            "weights " + GIB14 in r.stdout and
            "resident 1288490188 bytes" in r.stdout and
            "42022 us" in r.stdout, r)

    r = ctl(env, "group", "list")
    t.check("group list: g0 with its two ranks (no group_id file: -)",
            r.returncode == 0 and any(ln.split()[:3] == ["g0", "-", "2"]
                                      for ln in r.stdout.splitlines()), r)
    r = ctl(env, "-j", "group", "show", "g0")
    g = jload(r.stdout, {})
    t.check("group show --json: the ranks as {id, name, ...}",
            r.returncode == 0 and g.get("group") == "g0" and
            [(d["id"], d["name"]) for d in g.get("domains", [])] ==
            [(1, "llm0"), (2, "llm1")], r)
    r = ctl(env, "group", "show", "nope")
    t.check("group show of an unknown group: exit 3, says where to look",
            r.returncode == 3 and "group list" in r.stderr, r)

    r = ctl(env, "release", "llm0", "--tags", "")
    t.check('release --tags "": refused, exit 2 (not every tag)',
            r.returncode == 2 and "--tags" in r.stderr, r)
    r = ctl(env, "release", "llm0", "--timeout", "0")
    t.check("release --timeout 0: refused, exit 2",
            r.returncode == 2 and "--timeout 0" in r.stderr, r)
    r = ctl(env, "-j", "release", "dup")
    e = jload(r.stdout, {})
    t.check("-j release of an ambiguous name: a JSON error on stdout",
            r.returncode == 2 and e.get("status") == 2 and
            e.get("error", 0) < 0 and "give the id" in e.get("message", ""),
            r)

    # Another container's domain of the same name: its creator is not
    # seen here (owner_pid 0), so the name is this side's domain's.
    ctr = os.path.join(tmp, "sys-ctr")
    write_domain(ctr, 5, name="ctr", owner_pid="0")
    write_domain(ctr, 6, name="ctr")
    r = ctl(dict(env, GPUSLEEP_SYSFS=ctr), "-j", "status", "ctr")
    t.check("a name shared with another container's domain: the one seen",
            r.returncode == 0 and jload(r.stdout, {}).get("id") == 6, r)

    # Two groups of one name (two containers, or two users): told apart
    # by group_id; group show picks the one whose ranks are seen here.
    grp = os.path.join(tmp, "sys-grp")
    for did, gid, pid in ((1, "3", "0"), (2, "3", "0"), (3, "7", "42")):
        write_domain(grp, did, name="r%d" % did, group="rl", group_id=gid,
                     owner_pid=pid)
    genv = dict(env, GPUSLEEP_SYSFS=grp)
    r = ctl(genv, "-j", "group", "list")
    gl = jload(r.stdout, [])
    t.check("group list: two groups of one name stay two, with their ids",
            r.returncode == 0 and
            [(x.get("group"), x.get("group_id"), x.get("nr_ranks"))
             for x in gl] == [("rl", 3, 2), ("rl", 7, 1)], r)
    r = ctl(genv, "group", "list")
    t.check("group list text: an ID column",
            r.stdout.splitlines()[0].split()[:3] == ["GROUP", "ID", "RANKS"]
            and [ln.split()[:3] for ln in r.stdout.splitlines()[1:]] ==
            [["rl", "3", "2"], ["rl", "7", "1"]], r)
    r = ctl(genv, "-j", "group", "show", "rl")
    g = jload(r.stdout, {})
    t.check("group show of a shared name: the group whose ranks are seen",
            r.returncode == 0 and g.get("group_id") == 7 and
            [d["id"] for d in g.get("domains", [])] == [3], r)
    write_domain(grp, 2, name="r2", group="rl", group_id="3", owner_pid="9")
    r = ctl(genv, "group", "show", "rl")
    t.check("group show of a name two seen groups have: refused, exit 2",
            r.returncode == 2 and "2 groups" in r.stderr and
            "group list" in r.stderr, r)

    # Tenants (issue 37) and what is left by class (issue 34 item 5).
    ten = os.path.join(tmp, "sys-ten")
    GIB = 1024 ** 3
    write_domain(ten, 7, name="policy", priority="-5", yieldable="1",
                 gpu_uuid=UUID[4:], host_bytes=str(2 * GIB), lease_id="3",
                 leased_tags="kv_cache", released_tags="kv_cache",
                 tag_policy="backup,discard,discard",
                 tag_content="kept,zeroed,undefined",
                 tag_verified="1,0,0",
                 tag_size_bytes="%d,%d,%d" % (2 * GIB, 4 * GIB, GIB // 2),
                 tag_mapped_bytes="%d,0,%d" % (2 * GIB, GIB // 2),
                 tag_host_bytes="%d,0,0" % (2 * GIB),
                 resident_torch_bytes=str(GIB), resident_graph_bytes=str(
                     GIB // 4), resident_process_bytes=str(5 * GIB),
                 resident_process_source="process")
    write_domain(ten, 8, name="old", released_tags="", state="awake")
    with open(os.path.join(ten, "leases"), "w") as f:
        f.write("1\n")
    tenv = dict(env, GPUSLEEP_SYSFS=ten)
    r = ctl(tenv, "status", "policy")
    t.check("status: the tenant (priority, yieldable, GPU, lease)",
            r.returncode == 0 and "priority -5" in r.stdout and
            "yieldable yes" in r.stdout and "lease 3 (kv_cache)" in r.stdout
            and UUID[4:] in r.stdout and "host charged 2.0 GiB" in r.stdout,
            r)
    t.check("status: per tag policy, content after resume, verified",
            "policy: weights backup, kv_cache discard, cuda_graph discard"
            in r.stdout and "content after resume: weights kept, kv_cache "
            "zeroed, cuda_graph undefined" in r.stdout and
            "verified: weights 1" in r.stdout, r.stdout)
    # left: tags 2.5 GiB mapped, torch 1, graphs 0.25, of process 5: 1.25
    t.check("status: what is left on the GPU, by class",
            "left on the GPU: tags 2.5 GiB, torch 1.0 GiB, graphs 256.0 MiB,"
            " other 1.2 GiB of 5.0 GiB (process)" in r.stdout, r.stdout)
    s7 = jload(ctl(tenv, "-j", "status", "policy").stdout, {})
    t.check("status --json: tenant, per-tag report and left by class",
            s7.get("tenant") == {"priority": -5, "yieldable": True,
                                 "gpu_uuid": UUID[4:], "lease_id": 3,
                                 "leased_tags": ["kv_cache"],
                                 "host_charged_bytes": 2 * GIB} and
            s7.get("policy") == {"weights": "backup", "kv_cache": "discard",
                                 "cuda_graph": "discard"} and
            s7.get("content", {}).get("cuda_graph") == "undefined" and
            s7.get("verified") == {"weights": 1, "kv_cache": 0,
                                   "cuda_graph": 0} and
            s7.get("left") == {"tags": 2 * GIB + GIB // 2, "torch": GIB,
                               "graphs": GIB // 4,
                               "other": 5 * GIB - (2 * GIB + GIB // 2) -
                               GIB - GIB // 4,
                               "process": 5 * GIB, "source": "process"},
            s7)
    s8 = jload(ctl(tenv, "-j", "status", "old").stdout, {})
    t.check("status --json of a domain without tenant files: no such keys",
            "tenant" not in s8 and "left" not in s8 and "policy" not in s8,
            s8)
    r = ctl(tenv, "list")
    lines = r.stdout.splitlines()
    t.check("list: PRIO and LEASE columns",
            lines and lines[0].split()[8:10] == ["PRIO", "LEASE"] and
            lines[1].split()[-2:] == ["-5", "3"] and
            lines[2].split()[-2:] == ["-", "-"] and aligned(lines), r.stdout)

    params = os.path.join(tmp, "params")
    os.makedirs(params)
    for k, v in (("host_budget_bytes", str(64 * GIB)),
                 ("host_used_bytes", str(2 * GIB))):
        with open(os.path.join(params, k), "w") as f:
            f.write(v + "\n")
    r = ctl(dict(tenv, GPUSLEEP_MODULE_PARAMS=params), "metrics")
    ok, why = promtool_ok(r.stdout)
    t.check("metrics of tenants: promtool clean", r.returncode == 0 and ok,
            why)
    want = ['gpusleep_tenant_priority{domain="7",name="policy"} -5',
            'gpusleep_domain_leased{domain="7",name="policy"} 1',
            'gpusleep_tag_leased{domain="7",name="policy",tag="kv_cache"} 1',
            'gpusleep_tag_policy{domain="7",name="policy",tag="weights",'
            'policy="backup"} 1',
            'gpusleep_tag_content{domain="7",name="policy",'
            'tag="cuda_graph",content="undefined"} 1',
            'gpusleep_tag_mapped_bytes{domain="7",name="policy",'
            'tag="weights"} %d' % (2 * GIB),
            'gpusleep_resident_class_bytes{domain="7",name="policy",'
            'class="other"} %d' % (5 * GIB - 3 * GIB - GIB // 2 - GIB // 4),
            'gpusleep_resident_process_bytes{domain="7",name="policy",'
            'source="process"} %d' % (5 * GIB),
            "gpusleep_leases 1", "gpusleep_host_budget_bytes %d" % (64 * GIB),
            "gpusleep_host_used_bytes %d" % (2 * GIB)]
    lines = r.stdout.splitlines()
    t.check("metrics of tenants: priority, lease, per-tag report, left by "
            "class, the node's budget",
            all(w in lines for w in want) and
            'gpusleep_resident_class_bytes{domain="8"' not in r.stdout,
            [w for w in want if w not in lines])

    r = ctl(gone, "metrics")
    t.check("metrics without the module: gpusleep_up 0, exit 0",
            r.returncode == 0 and "gpusleep_up 0" in r.stdout.splitlines(), r)
    r = ctl(gone, "list")
    t.check("list without the module: exit 3, says how to load it",
            r.returncode == 3 and "modprobe gpusleep" in r.stderr, r)
    r = ctl(env, "release", "--group", "g0")
    t.check("release --group without the device: exit 3, says how to load it",
            r.returncode == 3 and "modprobe gpusleep" in r.stderr, r)
    r = ctl(gone, "-j", "status")
    e = jload(r.stdout, {})
    t.check("-j status without the module: a JSON error object",
            r.returncode == 3 and e.get("status") == 3 and
            "modprobe" in e.get("message", ""), r)

    r = ctl(env, "--version")
    r2 = ctl(env, "-V")
    t.check("--version and -V", r.returncode == 0 and r2.returncode == 0 and
            r.stdout.startswith("gpusleepctl ") and r.stdout == r2.stdout,
            (r, r2))
    r = ctl(env, "-j", "frobnicate")
    e = jload(r.stdout, {})
    t.check("-j unknown command: exit 2 and a JSON error",
            r.returncode == 2 and e.get("status") == 2, r)
    r = ctl(env, "--help")
    t.check("--help names -j, -p and the group command",
            r.returncode == 0 and "--json" in r.stdout and
            "--bytes" in r.stdout and "group list" in r.stdout, r)

    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
