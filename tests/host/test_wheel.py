#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The gpusleep wheel (make wheel, build/python/dist) loads wherever its
tag says it installs:
- its tag is python.mk's PY_WHEEL_PLAT, manylinux_2_17 (and the legacy
  manylinux2014), not this machine's linux_x86_64;
- its libgpusleep.so.0 needs no liburing.so.2 (liburing is linked in,
  its symbols kept inside: the same exports as make's library) and only
  glibc's own libraries, with no symbol version past GLIBC_2.17;
- auditwheel show (PyPI, pinned in tools/pytools/requirements.txt, in
  build/pytools/venv) finds the wheel consistent with manylinux_2_17;
- glibc 2.31's loader (Debian 11's libc6, downloaded once into
  build/glibc-2.31 and checked against its sha256) loads it and binds
  every symbol (ldd -r's way: LD_BIND_NOW, LD_WARN), where the library
  `make` builds for this machine needs GLIBC_2.34;
- pip installs it into a new, empty venv (no system site-packages, no
  index) and `import gpusleep` there loads the bundled library.
Prints TAP."""

import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
from gstest import Tap, Skip, check, REPO  # noqa: E402

DIST = os.path.join(REPO, "build", "python", "dist")
PYMK = os.path.join(REPO, "user", "python", "python.mk")
# Debian 11's glibc, the last of its point releases (frozen): the
# Filename and SHA256 of bullseye's main Packages index.
GLIBC = ("pool/main/g/glibc/libc6_2.31-13+deb11u11_amd64.deb",
         "05f7264da867b37f4c5ce49266b558ea1e81e05a9464f623152fca70f3550282")
GLIBC_DIR = os.path.join(REPO, "build", "glibc-2.31")
ALLOWED_NEEDED = {"libc.so.6", "libpthread.so.0", "libdl.so.2",
                  "ld-linux-x86-64.so.2"}
TESTS = ["the gpusleep wheel is tagged as python.mk says: manylinux_2_17",
         "its libgpusleep.so.0: no liburing.so.2, no glibc symbol past 2.17",
         "auditwheel show: consistent with manylinux_2_17_x86_64",
         "glibc 2.31's loader loads and binds it (make's own library: no)",
         "pip installs it into a new venv; import gpusleep loads it"]
S = {}


def plat():
    with open(PYMK) as f:
        m = re.search(r"^PY_WHEEL_PLAT\s*:=\s*(\S+)", f.read(), re.M)
    check(m, "no PY_WHEEL_PLAT in python.mk")
    return m.group(1)


def the_wheel():
    ws = glob.glob(os.path.join(DIST, "gpusleep-*.whl"))
    if not ws:
        raise Skip(f"no wheel in {DIST} (make wheel; needs "
                   "python3-setuptools, python3-wheel)")
    check(len(ws) == 1, ws)
    return ws[0]


def tagged():
    w = the_wheel()
    want = plat()
    check(want.startswith("manylinux_2_17_x86_64"), f"PY_WHEEL_PLAT {want}")
    check(os.path.basename(w).endswith(f"-py3-none-{want}.whl"),
          f"{os.path.basename(w)}: not tagged {want}")
    wheel_md = [n for n in zipfile.ZipFile(w).namelist()
                if n.endswith(".dist-info/WHEEL")]
    tags = re.findall(r"^Tag: (\S+)$", zipfile.ZipFile(w).read(
        wheel_md[0]).decode(), re.M)
    check(sorted(tags) == sorted(f"py3-none-{p}" for p in want.split(".")),
          f"WHEEL tags {tags}")
    S["wheel"] = w


def bundled_lib(tmp):
    w = S.get("wheel") or the_wheel()
    lib = os.path.join(tmp, "libgpusleep.so.0")
    with open(lib, "wb") as f:
        f.write(zipfile.ZipFile(w).read("gpusleep/libgpusleep.so.0"))
    return lib


def exported(objdump_t):
    """The functions a library defines and exports (objdump -T)."""
    return {ln.split()[-1] for ln in objdump_t.splitlines()
            if " .text" in ln and " g " in ln}


def library():
    with tempfile.TemporaryDirectory() as tmp:
        lib = bundled_lib(tmp)
        dyn = subprocess.run(["readelf", "-dW", lib], capture_output=True,
                             text=True, check=True).stdout
        needed = set(re.findall(r"\(NEEDED\).*\[(.*)\]", dyn))
        check(needed <= ALLOWED_NEEDED, f"needs {needed - ALLOWED_NEEDED}")
        syms = subprocess.run(["objdump", "-T", lib], capture_output=True,
                              text=True, check=True).stdout
        vers = set(re.findall(r"GLIBC_(\d+(?:\.\d+)*)", syms))
        too_new = [v for v in vers
                   if tuple(map(int, v.split("."))) > (2, 17)]
        check(not too_new, f"glibc versions past 2.17: {too_new}")
        check(not re.search(r"\bio_uring_\w+$", syms, re.M),
              "liburing's functions exported")
        # the same API as the library make builds for this machine
        real = glob.glob(os.path.join(REPO, "build", "lib",
                                      "libgpusleep.so.0.*"))
        if real:
            mine = subprocess.run(["objdump", "-T", real[0]],
                                  capture_output=True, text=True,
                                  check=True).stdout
            check(exported(syms) == exported(mine),
                  f"exports differ: {exported(syms) ^ exported(mine)}")


def auditwheel():
    w = S.get("wheel") or the_wheel()
    p = subprocess.run([os.path.join(REPO, "tools", "pytools.sh")],
                       capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    bin_dir = p.stdout.strip()
    out = subprocess.run([os.path.join(bin_dir, "auditwheel"), "show", w],
                         capture_output=True, text=True)
    check(out.returncode == 0, out.stdout + out.stderr)
    text = " ".join(out.stdout.split())
    check('is consistent with the following platform tag: '
          '"manylinux_2_17_x86_64"' in text, out.stdout)


def mirror():
    for f in ["/etc/apt/sources.list"] + glob.glob(
            "/etc/apt/sources.list.d/*"):
        try:
            text = open(f).read()
        except OSError:
            continue
        for ln in text.splitlines():
            if ln.lstrip().startswith("#"):
                continue
            m = re.search(r"((?:https?|file)://\S+/debian)/?(\s|$)", ln)
            if m:
                return m.group(1)
    return "http://deb.debian.org/debian"


def glibc_231():
    """build/glibc-2.31/lib/x86_64-linux-gnu: fetched once, checked."""
    libdir = os.path.join(GLIBC_DIR, "root", "lib", "x86_64-linux-gnu")
    if os.path.exists(os.path.join(libdir, "ld-2.31.so")):
        return libdir
    os.makedirs(GLIBC_DIR, exist_ok=True)
    deb = os.path.join(GLIBC_DIR, os.path.basename(GLIBC[0]))
    if not os.path.exists(deb):
        url = f"{mirror()}/{GLIBC[0]}"
        try:
            data = urllib.request.urlopen(url, timeout=60).read()
        except OSError as e:
            raise AssertionError(f"cannot download {url}: {e}") from None
        got = hashlib.sha256(data).hexdigest()
        check(got == GLIBC[1], f"{url}: sha256 {got}, pinned {GLIBC[1]}")
        with open(deb + ".part", "wb") as f:
            f.write(data)
        os.rename(deb + ".part", deb)
    subprocess.run(["dpkg-deb", "-x", deb, os.path.join(GLIBC_DIR, "root")],
                   check=True)
    return libdir


def ldd_r(libdir, lib):
    """ldd -r under that glibc: its loader, its libraries first, no
    ld.so.cache; LD_BIND_NOW and LD_WARN report every symbol not bound."""
    env = dict(os.environ, LD_BIND_NOW="1", LD_WARN="yes")
    return subprocess.run([os.path.join(libdir, "ld-2.31.so"),
                           "--inhibit-cache", "--library-path", libdir,
                           "--list", lib], capture_output=True, text=True,
                          env=env)


def old_glibc():
    libdir = glibc_231()
    with tempfile.TemporaryDirectory() as tmp:
        lib = bundled_lib(tmp)
        p = ldd_r(libdir, lib)
        out = p.stdout + p.stderr
        check(p.returncode == 0 and "not found" not in out and
              "undefined symbol" not in out, out)
        check(f"libc.so.6 => {libdir}/libc.so.6" in out,
              f"not glibc 2.31's libc: {out}")
    # the negative control: the library make builds for this machine
    real = glob.glob(os.path.join(REPO, "build", "lib",
                                  "libgpusleep.so.0.*"))
    if real:
        p = ldd_r(libdir, real[0])
        check("version `GLIBC_2.34' not found" in p.stdout + p.stderr,
              f"the control loaded: {p.stdout + p.stderr}")


def clean_venv():
    w = S.get("wheel") or the_wheel()
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                       check=True)
        py = os.path.join(venv, "bin", "python")
        p = subprocess.run([sys.executable, "-m", "pip", "--python", py,
                            "install", "-q", "--no-index", "--no-deps",
                            "--disable-pip-version-check", w],
                           capture_output=True, text=True)
        check(p.returncode == 0, p.stdout + p.stderr)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GPUSLEEP_LIB", "LD_LIBRARY_PATH")}
        p = subprocess.run([py, "-c", "import gpusleep, sys; "
                            "print(gpusleep.lib_path()); "
                            "print(gpusleep.__file__)"],
                           capture_output=True, text=True, env=env, cwd="/")
        check(p.returncode == 0, p.stderr)
        lib, pkg = p.stdout.split()
        check(pkg.startswith(venv) and
              lib == os.path.join(os.path.dirname(pkg), "libgpusleep.so.0"),
              p.stdout)


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [tagged, library, auditwheel, old_glibc,
                                clean_venv]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
