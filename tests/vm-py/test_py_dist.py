#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The Python distributions as a user installs them: the wheels `make
wheel` builds (build/python/dist: gpusleep with libgpusleep.so.0 bundled,
gpusleep-torch-memory-saver, gpusleep-vllm), which make installs with pip,
offline, into a new venv (build/python/venv, which sees neither Debian's
dist-packages nor this tree), then, from that venv's python: import gpusleep (the bundled
library, py.typed), the engine and trainer examples
(user/python/examples) through the module, a spawned child importing
torch_memory_saver and pausing / resuming through the module
(tests/vm-py/dist/tms_spawn.py), vLLM's worker calls through the plugin
(tests/vm-py/dist/vllm_worker.py), the two workers of a vLLM engine with
tensor_parallel_size=2 sleeping and waking as one group operation, a
drain failing on one leaving both awake, releases from outside refused
(tests/vm-py/dist/vllm_tp.py), the driver's GPUSLEEP_* variables
reaching a worker that vLLM's Ray executor starts
(tests/vm-py/dist/vllm_ray.py), and the error naming what is missing
when the library is not there. The stand-ins of torch and vllm are
tests/vm-py/standin (torch: tests/host/fake_torch).
SKIPs without the wheels (python3-setuptools / python3-wheel missing)
and, for what needs it, without /dev/gpusleep."""

import errno
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from gstest import Tap, Skip, check, REPO, DEVICE, GUARD_S

DIST = os.path.join(REPO, "build", "python", "dist")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
FULL_TORCH = os.path.join(REPO, "tests", "host", "fake_torch")
EXAMPLES = os.path.join(REPO, "user", "python", "examples")
PY = "/usr/bin/python3"
TESTS = ["the gpusleep wheel bundles libgpusleep.so.0 and py.typed",
         "the new venv make made holds the three wheels, pip-installed",
         "import gpusleep in the venv: the bundled library",
         "engine and trainer examples run from the venv",
         "torch_memory_saver: a spawned child pauses and resumes",
         "gpusleep-vllm: the plugin's allocator under vLLM's worker calls",
         "gpusleep-vllm under Ray: a worker sees the driver's GPUSLEEP_*",
         "gpusleep-vllm TP=2: vLLM's sleep is one group operation; no "
         "worker unmaps before both drained",
         "gpusleep-vllm TP=2: each wake_up one group resume; the data back",
         "gpusleep-vllm TP=2: a drain failing on one worker: both sleeps "
         "fail, neither is released",
         "gpusleep-vllm TP=2: a release from outside (a worker, the group): "
         "refused at once",
         "no library: the error names libgpusleep.so.0 and the ways to get it"]
S = {}


def wheels():
    return sorted(glob.glob(os.path.join(DIST, "*.whl")))


def venv_run(args, env_extra=None, timeout=GUARD_S, stdin=None,
             pythonpath=()):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPUSLEEP_LIB")}
    env["GPUSLEEP_BACKEND"] = "host"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env.update(env_extra or {})
    return subprocess.run([S["py"]] + args, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd="/", stdin=stdin)


def need_venv():
    if "py" not in S:
        raise Skip("no venv")


def need_dev():
    need_venv()
    if not os.path.exists(DEVICE):
        raise Skip(f"no {DEVICE} (module not loaded)")


def wheel_contents():
    ws = [w for w in wheels() if os.path.basename(w).startswith("gpusleep-")]
    check(len(ws) == 1, f"one gpusleep wheel in {DIST}: {wheels()}")
    check(ws[0].endswith("-py3-none-manylinux_2_17_x86_64."
                         "manylinux2014_x86_64.whl"), ws[0])
    names = zipfile.ZipFile(ws[0]).namelist()
    for f in ("gpusleep/libgpusleep.so.0", "gpusleep/py.typed",
              "gpusleep/__init__.py", "gpusleep/vllm.py"):
        check(f in names, f"{f} not in {names}")
    for prefix in ("gpusleep_torch_memory_saver-", "gpusleep_vllm-"):
        check(any(os.path.basename(w).startswith(prefix) for w in wheels()),
              f"no {prefix}*.whl")


def made_venv():
    """The venv `make` made (user/python/python.mk): new, pip-installed,
    offline, from the wheels (installing under qemu would take minutes)."""
    venv = os.path.join(REPO, "build", "python", "venv")
    check(os.path.exists(os.path.join(venv, ".stamp")),
          f"{venv}: not made (make wheel)")
    with open(os.path.join(venv, "pyvenv.cfg")) as f:
        cfg = f.read()
    check("include-system-site-packages = false" in cfg, cfg)
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
    check(len(site) == 1, site)
    have = os.listdir(site[0])
    for d in ("gpusleep-", "gpusleep_torch_memory_saver-", "gpusleep_vllm-"):
        check(any(h.startswith(d) and h.endswith(".dist-info")
                  for h in have), f"no {d}*.dist-info in {have}")
    S["venv"], S["py"] = venv, os.path.join(venv, "bin", "python")


def importing():
    need_venv()
    out = venv_run(["-c", "import gpusleep, torch_memory_saver, "
                    "gpusleep_vllm, sys; print(gpusleep.__file__); "
                    "print(gpusleep.lib_path()); print(gpusleep.__version__)"
                    "; print('/usr/lib/python3/dist-packages' in sys.path)"])
    check(out.returncode == 0, out.stderr)
    pkg, lib, ver, debian = out.stdout.split()
    site = os.path.dirname(pkg)
    check(pkg.startswith(S["venv"]), f"gpusleep from {pkg}")
    check(lib == os.path.join(site, "libgpusleep.so.0"), f"library {lib}")
    check(os.path.exists(os.path.join(site, "py.typed")), "py.typed")
    check(debian == "False", "the venv sees Debian's dist-packages")
    with open(os.path.join(REPO, "dkms.conf")) as f:
        want = [ln.split('"')[1] for ln in f
                if ln.startswith("PACKAGE_VERSION=")][0]
    check(ver == want, f"version {ver}, dkms.conf {want}")


def examples():
    need_dev()
    name = f"pydist{os.getpid()}"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPUSLEEP_LIB")}
    env.update(GPUSLEEP_BACKEND="host", PYTHONDONTWRITEBYTECODE="1")
    eng = subprocess.Popen([S["py"], os.path.join(EXAMPLES, "engine.py"),
                            name], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, cwd="/")
    try:
        line = eng.stdout.readline()
        check(line.startswith(f"ready {name} "), line + eng.stderr.read()
              if not line else line)
        tr = venv_run([os.path.join(EXAMPLES, "trainer.py"), name])
        check(tr.returncode == 0, tr.stdout + tr.stderr)
        check(tr.stdout.splitlines() == [
            "released weights,kv_cache " + tr.stdout.split()[2] + " bytes",
            "resumed weights", "resumed kv_cache", "awake"], tr.stdout)
        check(int(tr.stdout.split()[2]) >= 2 << 20, tr.stdout)
    finally:
        out, err = eng.communicate(timeout=GUARD_S)	# closes its stdin
    check(eng.returncode == 0, out + err)
    lines = out.splitlines()
    check(lines[-1] == "weights intact", out)
    for ev in ("drain weights,kv_cache", "reset_caches", "repair_kv",
               "resume_sched"):
        check(ev in lines, f"{ev!r} not in {lines}")


def torch_path():
    return FULL_TORCH


def tms_spawn():
    need_dev()
    out = venv_run([os.path.join(REPO, "tests", "vm-py", "dist",
                                 "tms_spawn.py"), S["venv"]],
                   {"GPUSLEEP_DOMAIN_NAME": f"pytmsspawn{os.getpid()}"},
                   timeout=GUARD_S * 2, pythonpath=[torch_path()])
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def vllm_worker():
    need_dev()
    name = f"pyvllm{os.getpid()}"
    out = venv_run([os.path.join(REPO, "tests", "vm-py", "dist",
                                 "vllm_worker.py"), f"{name}-tp0"],
                   {"GPUSLEEP_ENGINE": name, "RANK": "0"},
                   timeout=GUARD_S * 2, pythonpath=[torch_path(), STANDIN])
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def vllm_ray():
    """A Ray actor inherits nothing of the driver's environment: vLLM
    0.33.0's RayExecutorV2 gives its workers the driver's (all but the
    worker-specific variables), so the worker sees GPUSLEEP_* and loads
    the plugin; the engine-core actors get what get_env_vars_to_copy()
    names, GPUSLEEP_* included once the plugin asked for them in the
    driver (with or without VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY in
    vllm.envs). No device needed: the worker only names its domain."""
    need_venv()
    site = os.path.dirname(os.path.dirname(venv_run(
        ["-c", "import gpusleep; print(gpusleep.__file__)"]).stdout.strip()))
    lib = os.path.join(site, "gpusleep", "libgpusleep.so.0")
    name = f"pyvllmray{os.getpid()}"
    script = os.path.join(REPO, "tests", "vm-py", "dist", "vllm_ray.py")
    base = {"GPUSLEEP_ENGINE": name, "GPUSLEEP_LIB": lib, "RANK": "0"}
    for args, extra, backend in (
            ([], {"VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY": "MYLIB_",
                  "MYLIB_X": "1"}, True),
            (["old"], {}, True),
            ([], {"GPUSLEEP_VLLM": "0"}, False)):
        env = dict(base, **extra)
        out = venv_run([script] + args, env,
                       pythonpath=[torch_path(), STANDIN])
        check(out.returncode == 0, out.stdout + out.stderr)
        # the driver's GPUSLEEP_* and MYLIB_* (venv_run's environment:
        # this one's, GPUSLEEP_BACKEND=host, env)
        driver = {k: v for k, v in os.environ.items() if k != "GPUSLEEP_LIB"}
        driver.update(GPUSLEEP_BACKEND="host", **env)
        want = {"domain": f"{name}-tp0", "backend": backend,
                "copied": True,
                "env": {k: v for k, v in driver.items()
                        if k.startswith(("GPUSLEEP_", "MYLIB_"))}}
        seen = json.loads(out.stdout)
        check(seen == want, f"{args} {extra}: the worker saw {seen}, "
              f"not {want}")


def tp_workers():
    """The two workers of a TP=2 engine (vllm_tp.py), started once."""
    need_dev()
    if "tp" in S:
        return S["tp"]
    from gstest import Proc
    name = f"pyvllmtp{os.getpid()}"
    S["tpdir"] = d = tempfile.mkdtemp(prefix="gsvllmtp")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GPUSLEEP_LIB")}
    env.update(GPUSLEEP_BACKEND="host", PYTHONDONTWRITEBYTECODE="1",
               GPUSLEEP_ENGINE=name,
               PYTHONPATH=os.pathsep.join([torch_path(), STANDIN]))
    ws = []
    for r in range(2):
        w = Proc.__new__(Proc)	# its line protocol, another script
        w.p = subprocess.Popen(
            [S["py"], os.path.join(REPO, "tests", "vm-py", "dist",
                                   "vllm_tp.py"), str(r),
             os.path.join(d, "init.sock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            bufsize=1, env=env, cwd="/")
        w.buf, w.lines, w.pos = b"", [], 0
        ws.append(w)
    S["tp"] = ws
    S["tpnames"] = [ws[r].expect("ready ")[0] for r in range(2)]
    check(S["tpnames"] == [f"{name}-tp0", f"{name}-tp1"], S["tpnames"])
    S["tpname"] = name
    return ws


def both(cmd, answer):
    """cmd to both workers at once (vLLM's collective_rpc), their answers."""
    ws = tp_workers()
    for w in ws:
        w.send(cmd)
    return [w.expect(answer) for w in ws]


def group_of(domain):
    """The name of the group domain is in (sysfs), "" for none."""
    from gpusleep.trainer import resolve_domain
    path = f"/sys/class/gpusleep/domain{resolve_domain(domain)}/group"
    with open(path) as f:
        return f.read().strip()


def tp_sleep():
    ws = tp_workers()
    import gpusleep
    import gpusleep.vllm as gv
    # rank 1's drain first looks at rank 0: drained at most, nothing
    # unmapped (the group lets no rank unmap before every rank drained)
    check(ws[1].ask(f"peekdrain {S['tpnames'][0]}", "armed") == [], "arm")
    out = both("sleep 1", "")
    check(all(o[0] == "slept" for o in out), f"sleep: {out}")
    check(out[0][1] == out[1][1] != "0" and out[0][2] == "release",
          f"not one group operation: {out}")
    for n in S["tpnames"]:
        g = group_of(n)
        check(g == S["tpname"], f"{n} in group {g!r}, want {S['tpname']}")
        check(gpusleep.state(n).released == list(gv.VLLM_TAGS),
              f"{n}: {gpusleep.state(n).released}")
    st = ws[1].ask("peeked", "peeked ")
    check(st == ["draining", "-"], f"rank 0 while rank 1 drained: {st}")


def tp_wake():
    tp_workers()
    import gpusleep
    out = both("wake weights", "")
    check(all(o[0] == "woke" for o in out) and out[0][1] == out[1][1] and
          out[0][2] == "resume", f"wake weights: {out}")
    for n in S["tpnames"]:
        check(gpusleep.state(n).released == ["kv_cache"],
              f"{n}: {gpusleep.state(n).released}")
    out = both("wake kv_cache", "")
    check(all(o[0] == "woke" for o in out) and out[0][1] == out[1][1],
          f"wake kv_cache: {out}")
    for n in S["tpnames"]:
        check(not gpusleep.is_sleeping(n), f"{n} still sleeps")
    check(both("data", "data ") == [["1", "1", "1"]] * 2,
          "weights back, KV zero, runtime state back on both")


def tp_fail():
    ws = tp_workers()
    import gpusleep
    check(ws[1].ask("faildrain", "armed") == [], "arm")
    out = both("sleep 1", "")
    check(out == [["failed", "EngineFailed", "1", str(errno.EIO)]] * 2,
          f"a drain failing on rank 1: {out}")
    for n in S["tpnames"]:
        check(not gpusleep.is_sleeping(n), f"{n} released")
    # and the engine sleeps and wakes again
    out = both("sleep 2", "")
    check(all(o[0] == "slept" for o in out), f"sleep 2 after: {out}")
    out = both("wake", "")
    check(all(o[0] == "woke" for o in out), f"wake after: {out}")
    check(not any(gpusleep.is_sleeping(n) for n in S["tpnames"]), "asleep")


def tp_outside():
    tp_workers()
    import gpusleep
    from gstest import raises
    # no timeout given: an unanswered drain would end in DrainTimeout
    e = raises(gpusleep.EngineFailed, gpusleep.release, S["tpnames"][1])
    check(e.peer_errno == errno.EOPNOTSUPP and "vLLM's sleep" in str(e),
          str(e))
    with gpusleep.Group.open(S["tpname"]) as g:
        e = raises(gpusleep.EngineFailed, g.release)
    check(e.peer_errno == errno.EOPNOTSUPP, str(e))
    check(not any(gpusleep.is_sleeping(n) for n in S["tpnames"]), "asleep")


def no_library():
    need_venv()
    probe = venv_run(["-c", "import ctypes; ctypes.CDLL('libgpusleep.so.0')"])
    if probe.returncode == 0:
        raise Skip("libgpusleep.so.0 is installed on this system")
    # a copy of the venv (the tree is read-only here), without the library
    S["dir"] = d = tempfile.mkdtemp(prefix="gsvenv")
    copy = os.path.join(d, "venv")
    shutil.copytree(S["venv"], copy, symlinks=True)
    site = glob.glob(os.path.join(copy, "lib", "python3*",
                                  "site-packages", "gpusleep"))[0]
    os.unlink(os.path.join(site, "libgpusleep.so.0"))
    code = ("import gpusleep\n"
            "try:\n    gpusleep.lib_path()\n"
            "except OSError as e:\n    print(e)\n")
    py, S["py"] = S["py"], os.path.join(copy, "bin", "python")
    try:
        out = venv_run(["-c", code])
    finally:
        S["py"] = py
    check(out.returncode == 0, out.stderr)
    for s in ("libgpusleep.so.0", "not found", "make install",
              "make wheel", "GPUSLEEP_LIB"):
        check(s in out.stdout, f"{s!r} not in: {out.stdout}")
    # the system's library (here the tree's, through GPUSLEEP_LIB)
    lib = os.path.join(REPO, "build", "lib", "libgpusleep.so.0")
    S["py"] = os.path.join(copy, "bin", "python")
    try:
        out = venv_run(["-c", "import gpusleep; print(gpusleep.lib_path())"],
                       {"GPUSLEEP_LIB": lib})
    finally:
        S["py"] = py
    check(out.returncode == 0 and
          out.stdout.strip() == os.path.realpath(lib), out.stdout + out.stderr)


def main():
    tap = Tap(TESTS)
    if not wheels():
        tap.skip_rest(TESTS, f"no wheels in {DIST} (make wheel: needs "
                      "python3-setuptools, python3-wheel, python3-pip)")
        tap.done()
    try:
        for name, fn in zip(TESTS, [wheel_contents, made_venv, importing,
                                    examples, tms_spawn, vllm_worker,
                                    vllm_ray, tp_sleep, tp_wake, tp_fail,
                                    tp_outside, no_library]):
            tap.run(name, fn)
    finally:
        for w in S.get("tp", []):
            w.close()
        for d in ("dir", "tpdir"):
            if d in S:
                shutil.rmtree(S[d], ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
