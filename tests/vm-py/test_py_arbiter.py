#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The arbiter from Python (docs/arbiter.md, issue 37): three engines on
the host backend's GPU (each an engine process and an agent process of
its own, gsproc.py), at priorities -5, 0 and 0, reported by their agents;
gpusleep.acquire() takes the lowest priority first and its discard-kind
tag first, holds it in a Lease (a resume by anyone else is
gpusleep.Leased), and its with block's end resumes it; a bigger claim
takes a whole domain and then the next; a claim nobody can meet is
gpusleep.Shortfall and keeps nothing; reclaim() takes for good; a holder
killed with its lease wakes the engines; an unprivileged claim above 0 is
PriorityNotPermitted; a backup whose host copy changed is VerifyFailed
through the module (issue 34 item 6), and the next resume maps it fresh;
what a process holds outside its tags reaches the tenant (issue 34
item 5); Engine(priority=) states itself. gpusleepctl: acquire holds a
lease while a command runs and gives it back at its end, or until
SIGTERM; leases and status show it; reclaim takes for good; status says
what is left on the GPU by class. SKIPs without /dev/gpusleep."""

import json
import os
import signal
import subprocess
import sys

from gstest import (GUARD_S, REPO, Tap, Proc, check, need_device, raises,
                    until)
import gpusleep
from gpusleep import arbiter

sys.path.insert(0, os.path.join(REPO, "tests", "host"))
import mankeys  # noqa: E402

MiB = 1 << 20
MIB = 4			# per tag, in a 16 MiB chunk: each tag holds 16 MiB
TAG = 16 * MiB
NAME = f"arb{os.getpid()}"
CTL = os.environ.get("GPUSLEEP_CTL") or os.path.join(REPO, "build", "bin",
                                                    "gpusleepctl")
TESTS = ["three tenants report their GPU, tags and priority",
         "acquire: the lowest priority, its discard-kind tag first; "
         "held, a resume by another is Leased; the end resumes it",
         "a bigger claim: a whole domain, then the next",
         "a claim nobody can meet: Shortfall, nothing kept",
         "discard_only: the three engines' KV caches, no weights",
         "reclaim: taken for good, resumed by hand",
         "a holder killed with its lease: the engines wake",
         "an unprivileged claim above priority 0: PriorityNotPermitted",
         "a verified backup changed while released: VerifyFailed, "
         "then fresh",
         "what the process holds outside its tags reaches the tenant",
         "Engine(priority=, yieldable=) states itself",
         "gpusleepctl acquire -- COMMAND: held while it runs (leases, "
         "status show it), given back at its end",
         "gpusleepctl acquire until SIGTERM, on domain:NAME's GPU",
         "gpusleepctl reclaim for good; status: tenant, what is left by "
         "class"]

S = {"eng": [], "agent": [], "ids": []}
PRIOS = (-5, 0, 0)


def start():
    for i, p in enumerate(PRIOS):
        eng = Proc("engine", f"{NAME}-{i}", "--priority", p)
        S["eng"].append(eng)
        did = int(eng.expect("ready ")[0])
        S["ids"].append(did)
        args = ["agent", did, MIB] + (["--verify"] if i == 1 else [])
        ag = Proc(*args)
        S["agent"].append(ag)
        check(ag.expect("ready ") == ["host"], "agent backend")
    host = arbiter.format_uuid(arbiter.gpu_uuid("host"))
    for i, did in enumerate(S["ids"]):
        until(f"domain {did} reported",
              lambda: gpusleep.tenant(did).reported)
        t = gpusleep.tenant(did)
        check(t.priority == PRIOS[i] and not t.yieldable, repr(t))
        check(t.gpu == host, f"{t.gpu} != {host}")
        w, kv = t.tags
        check((w.name, w.policy, w.content, w.size_bytes, w.mapped_bytes)
              == ("weights", "backup", "kept", TAG, TAG), repr(w))
        check((kv.name, kv.policy, kv.content) ==
              ("kv_cache", "discard", "zeroed"), repr(kv))
        check(w.verified == (i == 1) and not kv.verified, repr(t.tags))
        check(t.lease_id == 0 and t.leased_tags == [], repr(t))
    # sysfs says the same to anyone
    with open(f"/sys/class/gpusleep/domain{S['ids'][0]}/gpu_uuid") as f:
        check(arbiter.gpu_uuid(f.read().strip()) ==
              arbiter.gpu_uuid("host"), "sysfs gpu_uuid")


def awake(i):
    return gpusleep.state(S["ids"][i]).state == "awake"


def agent_check(i, want):
    got = S["agent"][i].ask("check", "check ")
    check(got == want, f"agent {i}: {got} != {want}")


def acquire_lowest():
    low = S["ids"][0]
    with gpusleep.acquire("host", 8 * MiB) as lease:
        check(isinstance(lease, gpusleep.Lease) and lease.id > 0,
              repr(lease))
        check(lease.taken_bytes >= 8 * MiB, repr(lease))
        check([v.domain for v in lease.victims] == [low], repr(lease))
        v = lease.victims[0]
        check(v.tags == ["kv_cache"] and v.error == 0 and
              v.name == f"{NAME}-0", repr(v))
        st = gpusleep.state(low)
        check(st.released == ["kv_cache"], repr(st))
        t = gpusleep.tenant(low)
        check(t.lease_id == lease.id and t.leased_tags == ["kv_cache"],
              repr(t))
        info = lease.info()
        check(info.state == "held" and info.id == lease.id, repr(info))
        e = raises(gpusleep.Leased, gpusleep.resume, low)
        check(e.reason_name == "LEASED", str(e))
        check(gpusleep.state(S["ids"][1]).state == "awake", "others awake")
    check(lease.closed and lease.still_released == [], repr(lease))
    check(awake(0), "resumed at the lease's end")
    agent_check(0, ["weights=same", "kv=zero"])
    S["agent"][0].ask("fill", "filled")


def acquire_bigger():
    with gpusleep.acquire("host", 40 * MiB) as lease:
        ds = [v.domain for v in lease.victims]
        check(len(ds) == 2 and ds[0] == S["ids"][0], repr(lease.victims))
        check(sorted(lease.victims[0].tags) == ["kv_cache", "weights"],
              repr(lease.victims[0]))
        check(lease.taken_bytes >= 40 * MiB, repr(lease))
    for i in range(3):
        check(awake(i), f"engine {i} awake")
    agent_check(0, ["weights=same", "kv=zero"])
    for i in range(3):
        S["agent"][i].ask("fill", "filled")


def shortfall():
    e = raises(gpusleep.Shortfall, gpusleep.acquire, "host", 1 << 40)
    check(e.errno == __import__("errno").ENOSPC and e.why, repr(e.why))
    check(e.reclaim is not None and e.reclaim.taken_bytes < 1 << 40,
          repr(e.reclaim))
    for i in range(3):
        check(awake(i), f"engine {i}: nothing kept")
        # taken and given back: the weights restored, KV fresh
        agent_check(i, ["weights=same", "kv=zero"])
        S["agent"][i].ask("fill", "filled")


def discard_only():
    with gpusleep.acquire("host", 40 * MiB, discard_only=True) as lease:
        check(sorted(v.domain for v in lease.victims) == sorted(S["ids"])
              and all(v.tags == ["kv_cache"] for v in lease.victims),
              repr(lease.victims))
    for i in range(3):
        check(awake(i), f"engine {i} awake")
        agent_check(i, ["weights=same", "kv=zero"])
        S["agent"][i].ask("fill", "filled")


def reclaim_for_good():
    r = gpusleep.reclaim("host", 8 * MiB)
    check(r.ok and [v.domain for v in r.victims] == [S["ids"][0]] and
          r.lease_id == 0, repr(r))
    check(gpusleep.state(S["ids"][0]).released == ["kv_cache"], "released")
    res = gpusleep.resume(S["ids"][0])
    check(res.ok, repr(res))
    S["agent"][0].ask("fill", "filled")


HOLDER = """
import sys, time
sys.path.insert(0, %r)
import gpusleep
lease = gpusleep.acquire("host", 8 << 20)
print("held", lease.victims[0].domain, flush=True)
time.sleep(3600)
""" % os.path.join(REPO, "user", "python")


def holder_killed():
    p = subprocess.Popen([sys.executable, "-c", HOLDER],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        check(line[:1] == ["held"] and int(line[1]) == S["ids"][0], line)
        check(not awake(0), "released while held")
    finally:
        p.kill()
        p.wait()
    until("the lease's end resumed it", lambda: awake(0))
    agent_check(0, ["weights=same", "kv=zero"])
    S["agent"][0].ask("fill", "filled")


NICE = """
import os, sys
sys.path.insert(0, %r)
os.setgid(65534); os.setuid(65534)
import gpusleep
try:
    gpusleep.acquire("host", 1 << 20, priority=5)
except gpusleep.GpuSleepError as e:
    print(type(e).__name__, e.errno, isinstance(e, PermissionError))
else:
    print("none")
""" % os.path.join(REPO, "user", "python")


def unprivileged_priority():
    out = subprocess.run([sys.executable, "-c", NICE], capture_output=True,
                         text=True, timeout=GUARD_S)
    check(out.stdout.split() == ["PriorityNotPermitted", "1", "True"],
          out.stdout + out.stderr)


def verify_failed():
    mid, ag = S["ids"][1], S["agent"][1]
    r = gpusleep.release(mid, ["weights"])
    check(r.ok, repr(r))
    check(ag.ask("corrupt", "corrupted ") == ["0"], "corrupted")
    e = raises(gpusleep.VerifyFailed, gpusleep.resume, mid)
    check(e.reason_name == "VERIFY_FAILED" and
          e.errno == __import__("errno").EBADMSG, str(e))
    st = gpusleep.state(mid)
    check("weights" in st.released, repr(st))
    r = gpusleep.resume(mid)
    check(r.ok and awake(1), repr(r))
    agent_check(1, ["weights=zero", "kv=filled"])	# fresh, not garbage
    ag.ask("fill", "filled")


def outside():
    mid, ag = S["ids"][1], S["agent"][1]
    ag.ask(f"outside {3 * MiB} {5 * MiB}", "outside")
    until("the report with the outside figures",
          lambda: gpusleep.tenant(mid).torch_reserved_bytes == 3 * MiB)
    t = gpusleep.tenant(mid)
    check(t.graph_pool_bytes == 5 * MiB and t.held_by_tags == 2 * TAG,
          repr(t))
    with open(f"/sys/class/gpusleep/domain{mid}/resident_torch_bytes") as f:
        check(int(f.read()) == 3 * MiB, "sysfs resident_torch_bytes")


def engine_priority():
    from gpusleep.engine import Engine
    with Engine(f"{NAME}-own", priority=7, yieldable=True) as e:
        t = e.tenant()
        check(t.priority == 7 and t.yieldable and not t.reported, repr(t))
        e.set_tenant(-3)
        t = gpusleep.tenant(e.id)
        check(t.priority == -3 and not t.yieldable, repr(t))
        raises(ValueError, e.set_tenant, 1001)


def run_ctl(*args, **kw):
    return subprocess.run([CTL] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=GUARD_S,
                          **kw)


def ctl_acquire_command():
    low = S["ids"][0]
    inner = f"{CTL} -j leases; {CTL} -j status {low}"
    p = run_ctl("-j", "acquire", "--gpu", "host", "--size", "8M", "--",
                "sh", "-c", inner)
    objs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]
    check(p.returncode == 0 and len(objs) == 4, p.stdout + p.stderr)
    got, leases, st, back = objs
    check(got["kind"] == "acquired" and got["lease_id"] > 0 and
          [v["domain"]["id"] for v in got["victims"]] == [low] and
          got["victims"][0]["tags"] == ["kv_cache"] and
          got["taken_bytes"] >= 8 * MiB, got)
    check([x["lease_id"] for x in leases] == [got["lease_id"]] and
          leases[0]["domains"][0]["id"] == low and
          leases[0]["domains"][0]["leased_tags"] == ["kv_cache"], leases)
    check(st["tenant"]["lease_id"] == got["lease_id"] and
          st["tenant"]["priority"] == -5 and
          st["released_tags"] == ["kv_cache"], st)
    check(back["kind"] == "returned" and back["still_released"] == 0 and
          "returned" in back["victims"][0]["flags"], back)
    # the keys gpusleepctl(8) documents, and only those
    for o, doc in ((got, mankeys.man_keys("acquire")),
                   (back, mankeys.man_keys("returned"))):
        check(mankeys.json_keys(o) <= doc and
              {"kind", "victims", "lease_id"} <= mankeys.json_keys(o),
              mankeys.json_keys(o) - doc)
    check(mankeys.json_keys(leases) == mankeys.man_keys("leases"),
          mankeys.json_keys(leases) ^ mankeys.man_keys("leases"))
    check(awake(0), "given back")
    # the command's exit status is gpusleepctl's
    p = run_ctl("acquire", "-g", "host", "-s", "8M", "--", "sh", "-c",
                "exit 7")
    check(p.returncode == 7 and awake(0), p.stdout + p.stderr)
    S["agent"][0].ask("fill", "filled")
    p = run_ctl("acquire", "--gpu", "host", "--size", "1T")
    check(p.returncode == 1 and "short" in p.stderr, p.stderr)
    p = run_ctl("acquire", "--gpu", "nonsense", "--size", "1M")
    check(p.returncode == 2 and "--gpu" in p.stderr, p.stderr)


def ctl_acquire_signal():
    p = subprocess.Popen([CTL, "acquire", "--gpu", f"domain:{NAME}-1",
                          "--size", "1M"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        first = p.stdout.readline()
        check("lease" in first and "took" in first, first)
        check(not awake(0), "held")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=GUARD_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(p.returncode == 0 and "every domain resumed" in out, out + err)
    check(awake(0), "given back at SIGTERM")
    S["agent"][0].ask("fill", "filled")


def ctl_reclaim_status():
    low = S["ids"][0]
    p = run_ctl("reclaim", "--gpu", "host", "--size", "1M")
    check(p.returncode == 0 and "reclaim" in p.stdout and
          f"{NAME}-0" in p.stdout, p.stdout + p.stderr)
    check(gpusleep.state(low).released == ["kv_cache"], "taken for good")
    p = run_ctl("status", low)
    check(p.returncode == 0 and "priority -5" in p.stdout and
          "content after resume: weights kept, kv_cache zeroed"
          in p.stdout and "left on the GPU: tags 16.0 MiB" in p.stdout,
          p.stdout)
    p = run_ctl("-j", "status", low)
    o = json.loads(p.stdout)
    check(o["left"]["tags"] == TAG and o["mapped_bytes"] ==
          {"weights": TAG, "kv_cache": 0}, o)
    check(gpusleep.resume(low).ok, "resumed by hand")
    S["agent"][0].ask("fill", "filled")


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    try:
        for name, fn in zip(TESTS, [start, acquire_lowest, acquire_bigger,
                                    shortfall, discard_only,
                                    reclaim_for_good,
                                    holder_killed, unprivileged_priority,
                                    verify_failed, outside,
                                    engine_priority, ctl_acquire_command,
                                    ctl_acquire_signal,
                                    ctl_reclaim_status]):
            tap.run(name, fn)
    finally:
        for p in S["agent"] + S["eng"]:
            p.close()
    tap.done()


if __name__ == "__main__":
    main()
