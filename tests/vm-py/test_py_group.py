#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Groups from Python and gpusleepctl (docs/groups.md): three ranks, each an
engine process and an agent process of its own (gsproc.py, host backend),
released and resumed as one operation by gpusleep.Group and by
`gpusleepctl release --group NAME`; a rank whose engine holds its drain
past the deadline fails the whole group, which rolls back, naming it. The
ranks are named as the integrations name them, NAME-tp<rank>. A second
creator of a live group's name gets gpusleep.GroupExists with a hint, an
open of a name no group has GroupNotFound. Recovery (docs/groups.md):
the process that created the group exits with the ranks released (the
group ends with it): `gpusleepctl resume --group NAME` finds the ranks by
their names and resumes them; a name with no ranks either exits 3,
saying what to run.
SKIPs without /dev/gpusleep."""

import json
import os
import subprocess
import sys

from gstest import (REPO, Tap, Proc, check, check_layouts, need_device,
                    raises)
import gpusleep

sys.path.insert(0, os.path.join(REPO, "tests", "host"))
import mankeys  # noqa: E402

N = 3
MIB = 4
GROUP = f"pygrp{os.getpid()}"
CTL = os.environ.get("GPUSLEEP_CTL") or os.path.join(REPO, "build", "bin",
                                                    "gpusleepctl")
TESTS = ["ctypes layouts match the C header", "ranks start",
         "Group release: one op, every rank released",
         "Group resume: every rank awake, weights kept",
         "a rank past the deadline: group fails, others rolled back",
         "gpusleepctl release/resume --group NAME",
         "gpusleepctl --json: ranks' domains as {id, name}, lower-case reasons",
         "gpusleepctl wait --group NAME: the newest group op's result",
         "gpusleepctl group list and group show NAME",
         "Group.open by name; closing the group frees the name",
         "a second creator: GroupExists; no such group: GroupNotFound",
         "creator gone, ranks released: gpusleepctl resume --group NAME",
         "creator gone, no ranks by that name: exit 3, says what to run"]

S = {"eng": [], "agent": [], "ids": []}


def start():
    for i in range(N):
        eng = Proc("engine", f"{GROUP}-tp{i}", "--prefix-caching")
        S["eng"].append(eng)
        did = int(eng.expect("ready ")[0])
        S["ids"].append(did)
        ag = Proc("agent", did, MIB)
        S["agent"].append(ag)
        check(ag.expect("ready ") == ["host"], "agent backend")
    # by id, by name: the group attaches as a controller and keeps them
    S["g"] = gpusleep.Group(GROUP, [S["ids"][0], f"{GROUP}-tp1",
                                    S["ids"][2]])


def release():
    r = S["g"].release()
    check(r.ok and r.kind == "release" and r.rank is None, repr(r))
    check(len(r.ranks) == N, repr(r))
    for i, rk in enumerate(r.ranks):
        check(rk.done and rk.domain == S["ids"][i], repr(rk))
        check(rk.released == ["weights", "kv_cache"], repr(rk))
        st = gpusleep.state(S["ids"][i])
        check(st.state == "released", repr(st))
        S["eng"][i].expect("ev drain ")
        S["eng"][i].expect("ev reset")


def resume():
    r = S["g"].resume()
    check(r.ok and all(rk.done for rk in r.ranks), repr(r))
    for i in range(N):
        S["eng"][i].expect("ev repair")
        S["eng"][i].expect("ev resume_sched")
        check(gpusleep.state(S["ids"][i]).state == "awake", "awake")
        check(S["agent"][i].ask("check", "check ")[0] == "weights=same",
              "weights kept")


def deadline():
    late = S["eng"][1]
    late.ask("hold 1", "holding ")	# applied before the release starts
    try:
        try:
            S["g"].release(timeout=0.5)
            check(False, "the group release should have failed")
        except gpusleep.DrainTimeout as e:
            check(e.rank == 1 and e.domain == S["ids"][1], str(e))
            rks = e.result.ranks
            check(rks[0].cancelled and rks[2].cancelled, repr(rks))
            check(rks[1].failed, repr(rks))
    finally:
        # whatever the release said: the later cases need rank 1 to drain
        late.ask("hold 0", "holding ")
    for i in range(N):
        st = gpusleep.state(S["ids"][i])
        check(st.state == "awake" and not st.released, repr(st))
    for i in (0, 2):
        S["eng"][i].expect("ev cancelled")
        S["eng"][i].expect("ev resume_sched")


def ctl():
    p = subprocess.run([CTL, "release", "--group", GROUP, "--json"],
                       capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    o = json.loads(p.stdout)
    check(o["error"] == 0 and len(o["ranks"]) == N, p.stdout)
    check(all(r["outcome"] == "done" for r in o["ranks"]), p.stdout)
    check(all(gpusleep.is_sleeping(i) for i in S["ids"]), "released")
    # refused by a rank: named, nothing changed
    p = subprocess.run([CTL, "release", "--group", GROUP],
                       capture_output=True, text=True)
    check(p.returncode == 1 and "rank 0" in p.stderr, p.stderr)
    p = subprocess.run([CTL, "resume", "--group", GROUP],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.count("done") == N, p.stdout)
    check(not any(gpusleep.is_sleeping(i) for i in S["ids"]), "awake")
    p = subprocess.run([CTL, "release", "--group", "no-such-group"],
                       capture_output=True, text=True)
    check(p.returncode == 3, p.stderr)


def run_ctl(*args):
    return subprocess.run([CTL] + list(args), capture_output=True, text=True)


def ctl_json():
    p = run_ctl("-j", "release", "--group", GROUP, "--tags", "weights")
    o = json.loads(p.stdout)
    check(p.returncode == 0 and o["reason"] == "none", p.stdout)
    names = [f"{GROUP}-tp{i}" for i in range(N)]
    check([r["domain"] for r in o["ranks"]] ==
          [{"id": S["ids"][i], "name": names[i]} for i in range(N)], p.stdout)
    check(mankeys.json_keys(o) <= mankeys.man_keys("group-result"),
          "keys not in gpusleepctl(8): %r" %
          (mankeys.json_keys(o) - mankeys.man_keys("group-result")))
    # refused by rank 0 (already released): a JSON error, reason lower case
    p = run_ctl("-j", "release", "--group", GROUP, "--tags", "weights")
    e = json.loads(p.stdout)
    check(p.returncode == 1 and e["reason"] == "already_released" and
          e["domain"] == {"id": S["ids"][0], "name": names[0]} and
          e["group"] == GROUP, p.stdout)


def ctl_wait():
    p = run_ctl("-j", "wait", "--group", GROUP)
    o = json.loads(p.stdout)
    check(p.returncode == 0 and o["kind"] == "release" and
          o["tags"] == ["weights"] and len(o["ranks"]) == N, p.stdout)
    p = run_ctl("resume", "--group", GROUP, "--no-wait")
    check(p.returncode == 0 and "started" in p.stdout, p.stdout + p.stderr)
    op = int(p.stdout.split(" op ")[1].split()[0])
    p = run_ctl("wait", "--group", GROUP, str(op))
    check(p.returncode == 0 and f"op {op} resume" in p.stdout and
          p.stdout.count("done") == N, p.stdout + p.stderr)
    p = run_ctl("wait", "--group", "no-such-group")
    check(p.returncode == 3 and "group list" in p.stderr, p.stderr)


def ctl_show():
    p = run_ctl("group", "list")
    rows = [ln.split() for ln in p.stdout.splitlines()]
    check(p.returncode == 0 and
          [GROUP, str(S["g"].id), str(N)] in [r[:3] for r in rows], p.stdout)
    p = run_ctl("-j", "group", "show", GROUP)
    o = json.loads(p.stdout)
    check(p.returncode == 0 and o["nr_ranks"] == N and
          o["group_id"] == S["g"].id and
          sorted(d["id"] for d in o["domains"]) == sorted(S["ids"]) and
          all(d["state"] == "awake" for d in o["domains"]), p.stdout)


def reopen():
    g2 = gpusleep.Group.open(GROUP)
    check(g2.id == S["g"].id, "same group")
    S["g"].close()
    r = g2.release(tags=["weights"])
    check(r.ok, repr(r))
    r = g2.resume()
    check(r.ok, repr(r))
    g2.close()
    try:
        gpusleep.Group.open(GROUP)
        check(False, "the group should be gone")
    except FileNotFoundError:
        pass


def exists():
    names = [f"{GROUP}-tp{i}" for i in range(N)]
    with gpusleep.Group(GROUP, names[:1]):
        e = raises(gpusleep.GroupExists, gpusleep.Group, GROUP, names[1:])
        check(isinstance(e, FileExistsError) and e.group == GROUP and
              "Group.open" in str(e) and "gpusleepctl group list" in str(e),
              str(e))
    e = raises(gpusleep.GroupNotFound, gpusleep.Group.open, "no-such-grp")
    check(isinstance(e, FileNotFoundError) and e.group == "no-such-grp" and
          "gpusleepctl group list" in str(e), str(e))


def creator_gone():
    """The trainer made the group, released it and died: the group ended,
    its ranks stay released (nobody to resume them)."""
    names = [f"{GROUP}-tp{i}" for i in range(N)]
    code = ("import sys, gpusleep; g = gpusleep.Group(sys.argv[1], "
            "sys.argv[2:]); g.release(); print('released', flush=True)")
    p = subprocess.run([sys.executable, "-c", code, GROUP] + names,
                       capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(
                           REPO, "user", "python")))
    check(p.returncode == 0 and p.stdout == "released\n", p.stderr)
    for i in range(N):
        S["eng"][i].expect("ev drain ")
        S["eng"][i].expect("ev reset")
        check(gpusleep.is_sleeping(S["ids"][i]), "released")
        with open(f"/sys/class/gpusleep/domain{S['ids'][i]}/group") as f:
            check(f.read() == "\n", "the group ended")
    p = run_ctl("resume", "--group", GROUP)
    check(p.returncode == 0 and p.stdout.count(": done") == N,
          p.stdout + p.stderr)
    check("no live group" in p.stderr and f"{GROUP}-tp0" in p.stderr,
          p.stderr)
    for i in range(N):
        S["eng"][i].expect("ev repair")
        S["eng"][i].expect("ev resume_sched")
        check(gpusleep.state(S["ids"][i]).state == "awake", "awake")
        check(S["agent"][i].ask("check", "check ")[0] == "weights=same",
              "weights kept")
    # the group it made for the resume is gone with it
    p = run_ctl("group", "list")
    check(GROUP not in p.stdout, p.stdout)


def creator_gone_no_ranks():
    p = run_ctl("resume", "--group", "no-such-group")
    check(p.returncode == 3 and "no such group" in p.stderr and
          "no-such-group-tp0" in p.stderr and
          "gpusleepctl resume DOMAIN" in p.stderr, p.stderr)


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], check_layouts)
    need_device(tap, TESTS)
    steps = [start, release, resume, deadline, ctl, ctl_json, ctl_wait,
             ctl_show, reopen, exists, creator_gone, creator_gone_no_ranks]
    try:
        for name, fn in zip(TESTS[1:], steps):
            before = tap.failed
            tap.run(name, fn)
            if tap.failed != before and fn is start:
                tap.skip_rest(TESTS, "helpers did not start")
                break
    finally:
        if "g" in S:
            S["g"].close()
        for p in S["eng"] + S["agent"]:
            p.close()
    tap.done()


if __name__ == "__main__":
    main()
