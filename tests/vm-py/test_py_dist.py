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
(tests/vm-py/dist/vllm_worker.py), the driver's GPUSLEEP_* variables
reaching a worker that vLLM's Ray executor starts
(tests/vm-py/dist/vllm_ray.py), and the error naming what is missing
when the library is not there. The stand-ins of torch and vllm are
tests/vm-py/standin (torch: tests/host/fake_torch).
SKIPs without the wheels (python3-setuptools / python3-wheel missing)
and, for what needs it, without /dev/gpusleep."""

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
                                    vllm_ray, no_library]):
            tap.run(name, fn)
    finally:
        if "dir" in S:
            shutil.rmtree(S["dir"], ignore_errors=True)
    tap.done()


if __name__ == "__main__":
    main()
