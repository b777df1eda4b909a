#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""gpusleepctl metrics and metrics --textfile on the host, against a fake
sysfs tree (GPUSLEEP_SYSFS) and fake module parameters
(GPUSLEEP_MODULE_PARAMS): the exposition (promtool check metrics when
present), the GPU identity labels, "never" for what did not happen, the
textfile written atomically with no temporary file left, rewritten on the
timer and on SIGHUP, stale temporary files of dead runs removed, SIGTERM,
no module, usage and errors. The netlink half (events, module load and
unload) is tested in the VM (tests/vm/exporter_test.py). Prints TAP."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CTL = os.path.join(HERE, "..", "..", "build", "bin", "gpusleepctl")
BOUND = 20.0  # seconds: a bound for "never happens", not a timing check

DOMAIN = {
    "name": "llm0", "gpu": "0000:41:00.0,GPU-5d1e0b3a-0000-1111-2222-333344445555",
    "owner_uid": "0", "owner_pid": "42", "state": "released",
    "released_tags": "weights", "drain_pending": "0", "agent_attached": "1",
    "kv_release_allowed": "1", "op_in_flight": "0", "releases": "1",
    "resumes": "0", "failures": "0", "cancels": "0", "timeouts": "0",
    "last_error": "none", "last_release_us": "42022", "last_resume_us": "0",
    "tags": "weights,kv_cache,cuda_graph",
    "tag_kinds": "memory,kv_cache,memory",
    "tag_bytes_released": "4096,0,0", "tag_freed_bytes": "0,0,0",
    "tag_generations": "0,0,3",
}


class Tap:
    def __init__(self):
        self.n = 0

    def check(self, name, cond, diag=""):
        self.n += 1
        print("%s %d %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond:
            for line in str(diag).splitlines():
                print("# " + line)
        sys.stdout.flush()


def write_domain(root, did, **over):
    d = os.path.join(root, "domain%d" % did)
    os.makedirs(d, exist_ok=True)
    for k, v in dict(DOMAIN, **over).items():
        with open(os.path.join(d, k), "w") as f:
            f.write(v + "\n")


def wait_for(pred, bound=BOUND):
    end = time.monotonic() + bound
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def promtool_ok(text):
    if not shutil.which("promtool"):
        return True, "promtool missing: not run"
    r = subprocess.run(["promtool", "check", "metrics"], input=text,
                       capture_output=True, text=True)
    return r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def main():
    print("TAP version 13")
    if not os.access(CTL, os.X_OK):
        print("1..0 # SKIP %s not built" % CTL)
        return 0
    print("1..19")
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="gs-exporter-")
    sysfs = os.path.join(tmp, "sys")
    params = os.path.join(tmp, "params")
    tdir = os.path.join(tmp, "textfile")
    os.makedirs(sysfs)
    os.makedirs(params)
    os.makedirs(tdir)
    for k, v in (("drain_timeout_ms", "30000"), ("step_timeout_ms", "10000")):
        with open(os.path.join(params, k), "w") as f:
            f.write(v + "\n")
    write_domain(sysfs, 3)
    write_domain(sysfs, 4, name='a"b', gpu="41:00.0", state="awake",
                 released_tags="", releases="0", last_release_us="0",
                 tag_bytes_released="0,0,0")
    env = dict(os.environ, GPUSLEEP_SYSFS=sysfs, GPUSLEEP_MODULE_PARAMS=params)

    def ctl(*args, **kw):
        return subprocess.run([CTL] + list(args), capture_output=True,
                              text=True, timeout=BOUND, env=kw.pop("env", env),
                              **kw)

    # one-shot exposition
    r = ctl("metrics")
    ok, diag = promtool_ok(r.stdout)
    t.check("metrics: exit 0, promtool check metrics clean",
            r.returncode == 0 and ok, diag + r.stderr)
    lines = r.stdout.splitlines()
    info = [ln for ln in lines if ln.startswith('gpusleep_domain_info{domain="3"')]
    t.check("metrics: pci_bus_id (nvidia-smi form) and UUID from the gpu string",
            len(info) == 1 and 'pci_bus_id="00000000:41:00.0"' in info[0] and
            'UUID="GPU-5d1e0b3a-0000-1111-2222-333344445555"' in info[0], info)
    info4 = [ln for ln in lines if ln.startswith('gpusleep_domain_info{domain="4"')]
    t.check("metrics: a bare BB:DD.F gets domain 0; no UUID is an empty label; name escaped",
            len(info4) == 1 and 'pci_bus_id="00000000:41:00.0"' in info4[0] and
            'UUID=""' in info4[0] and 'name="a\\"b"' in info4[0], info4)
    t.check("metrics: a duration that never happened has no sample, one that did has seconds",
            'gpusleep_last_release_duration_seconds{domain="3",name="llm0"} 0.042022' in lines
            and not any(ln.startswith("gpusleep_last_resume_duration_seconds{")
                        for ln in lines)
            and not any(ln.startswith('gpusleep_last_release_duration_seconds{domain="4"')
                        for ln in lines), r.stdout)
    t.check("metrics: no operation id as a value; module deadlines in seconds",
            'gpusleep_operation_in_flight{domain="3",name="llm0"} 0' in lines and
            "gpusleep_drain_timeout_seconds 30" in lines and
            "gpusleep_step_timeout_seconds 10" in lines and
            not any(ln.startswith("gpusleep_op_in_flight") for ln in lines),
            r.stdout)
    lab = '{domain="3",name="llm0",tag="cuda_graph"}'
    t.check("metrics: one sample per tag the domain declared, by its name",
            "gpusleep_released_bytes" + lab + " 0" in lines and
            'gpusleep_released_bytes{domain="3",name="llm0",tag="weights"}'
            " 4096" in lines and
            "gpusleep_tag_released" + lab + " 0" in lines and
            "gpusleep_tag_generation_total" + lab + " 3" in lines,
            r.stdout)
    st = json.loads(ctl("status", "3", "--json").stdout or "{}")
    txt = ctl("status", "3").stdout
    t.check("status: the declared tags, their kinds and per-tag numbers",
            st.get("tags") == ["weights", "kv_cache", "cuda_graph"] and
            st.get("tag_kinds") == ["memory", "kv_cache", "memory"] and
            st.get("bytes") == {"weights": 4096, "kv_cache": 0,
                                "cuda_graph": 0} and
            st.get("generation", {}).get("cuda_graph") == 3 and
            "tags weights,kv_cache,cuda_graph" in txt and
            "memory released: weights 4.0 KiB, kv_cache 0 B, cuda_graph 0 B"
            in txt,
            (st, txt))
    t.check("status: never as JSON null and text 'never'",
            st.get("last_resume_us", 0) is None and
            st.get("last_release_us") == 42022 and
            "last resume never" in txt, (st, txt))

    # --once: atomic, nothing else left in the directory
    r = ctl("metrics", "--textfile", tdir, "--once")
    body = read(os.path.join(tdir, "gpusleep.prom"))
    t.check("--once: exit 0, gpusleep.prom written, no other file",
            r.returncode == 0 and os.listdir(tdir) == ["gpusleep.prom"] and
            "gpusleep_up 1" in body and promtool_ok(body)[0],
            (r, os.listdir(tdir)))
    r = ctl("metrics", "--textfile", tdir, "--once",
            env=dict(env, GPUSLEEP_SYSFS=os.path.join(tmp, "absent")))
    body = read(os.path.join(tdir, "gpusleep.prom"))
    t.check("--once without the module: gpusleep_up 0, no temporary file left",
            r.returncode == 0 and os.listdir(tdir) == ["gpusleep.prom"] and
            "gpusleep_up 0" in body.splitlines() and
            "gpusleep_domains" not in body, (r, os.listdir(tdir), body))

    # the daemon: stale temporary files, timer, SIGHUP, SIGTERM
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = os.path.join(tdir, ".gpusleep.prom.%d" % dead.pid)
    live = os.path.join(tdir, ".gpusleep.prom.%d" % os.getpid())
    for p in (stale, live):
        open(p, "w").close()
    os.unlink(os.path.join(tdir, "gpusleep.prom"))
    p = subprocess.Popen([CTL, "metrics", "--textfile", tdir, "--interval", "1"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    prom = os.path.join(tdir, "gpusleep.prom")
    got = wait_for(lambda: "gpusleep_up 1" in read(prom))
    t.check("daemon: writes the file; removes a dead run's temporary file, keeps a live one's",
            got and not os.path.exists(stale) and os.path.exists(live),
            os.listdir(tdir))
    os.unlink(live)
    body = read(prom)
    since = re.search(r'gpusleep_domain_state_since_timestamp_seconds\{domain="3",name="llm0"\} (\S+)', body)
    t.check("daemon: state-since timestamp (Unix time) and exporter counters",
            since and abs(float(since.group(1)) - time.time()) < 3600 and
            "gpusleep_engine_deaths_released_total 0" in body and
            promtool_ok(body)[0], body)
    write_domain(sysfs, 3, state="resuming")
    want = 'gpusleep_domain_state{domain="3",name="llm0",state="resuming"} 1'
    got = wait_for(lambda: want in read(prom).splitlines())
    body = read(prom)
    since2 = re.search(r'gpusleep_domain_state_since_timestamp_seconds\{domain="3",name="llm0"\} (\S+)', body)
    t.check("daemon: a change in sysfs shows at the next timer rewrite, with a newer since",
            got and since2 and float(since2.group(1)) > float(since.group(1)),
            body)
    shutil.rmtree(os.path.join(sysfs, "domain4"))
    ino = os.stat(prom).st_ino
    p.send_signal(signal.SIGHUP)
    got = wait_for(lambda: 'domain="4"' not in read(prom))
    t.check("daemon: SIGHUP rewrites (replaced by rename, a new inode)",
            got and os.stat(prom).st_ino != ino, read(prom))
    os.rename(sysfs, sysfs + ".gone")
    got = wait_for(lambda: "gpusleep_up 0" in read(prom).splitlines())
    os.rename(sysfs + ".gone", sysfs)
    got2 = wait_for(lambda: "gpusleep_up 1" in read(prom).splitlines())
    t.check("daemon: the module going and coming back: gpusleep_up 0, then 1",
            got and got2, read(prom))
    p.send_signal(signal.SIGTERM)
    try:
        out, err = p.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    t.check("daemon: SIGTERM: exit 0, only gpusleep.prom left",
            p.returncode == 0 and os.listdir(tdir) == ["gpusleep.prom"],
            (p.returncode, os.listdir(tdir), err))

    # usage and errors
    r = ctl("metrics", "--once")
    t.check("--once without --textfile: usage, exit 2",
            r.returncode == 2 and "Usage" in r.stderr, r)
    r = ctl("metrics", "--textfile", os.path.join(tmp, "nodir"), "--once")
    t.check("--textfile of a missing directory: exit 3, named on stderr",
            r.returncode == 3 and "nodir" in r.stderr, r)
    ro = os.path.join(tmp, "ro")
    os.makedirs(ro)
    os.chmod(tmp, 0o755)
    os.chmod(ro, 0o555)
    r = ctl("metrics", "--textfile", ro, "--once",
            preexec_fn=(lambda: os.setuid(65534)) if os.geteuid() == 0 else None)
    t.check("--textfile not writable: exit 4, why on stderr, nothing left",
            r.returncode == 4 and "Permission denied" in r.stderr and
            os.listdir(ro) == [], r)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
