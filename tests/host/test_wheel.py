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
The same for the torch_memory_saver drop-in's wheel
(gpusleep_torch_memory_saver-*.whl), whose hook libraries
(torch_memory_saver_hook_mode_*.abi3.so, user/tms/hook.c) are built for
it alone (python.mk): tagged PY_WHEEL_PLAT; each library names no
libgpusleep.so.0 (it loads the gpusleep wheel's at run time: auditwheel
would refuse a library the wheel does not hold) and needs nothing past
GLIBC_2.17; auditwheel agrees; glibc 2.31's loader binds each; and in a
new venv with both wheels, the preloaded hook captures cudaMalloc (the
stand-in CUDA runtime, tests/host/fake_libcudart.c) in the gpusleep
wheel's libgpusleep.so.0, the one copy gpusleep._lib then uses, and a
hook loaded after Python uses Python's copy.
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
         "pip installs it into a new venv; import gpusleep loads it",
         "the drop-in's wheel is tagged as python.mk says: manylinux_2_17",
         "its hook libraries: no libgpusleep.so.0 named, nothing past 2.17",
         "auditwheel show: the drop-in's wheel consistent with 2_17",
         "glibc 2.31's loader loads and binds each hook library",
         "a new venv with both wheels: the preloaded hook and Python share "
         "the gpusleep wheel's libgpusleep"]
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


TMS_NAMES = [f"torch_memory_saver_hook_mode_{m}{v}.abi3.so"
             for m in ("preload", "torch") for v in ("", "_cu12", "_cu13")]
FAKECUDART = os.path.join(REPO, "build", "tests", "host", "fakecudart")


def tms_wheel():
    ws = glob.glob(os.path.join(DIST, "gpusleep_torch_memory_saver-*.whl"))
    if not ws:
        raise Skip(f"no drop-in wheel in {DIST} (make wheel)")
    check(len(ws) == 1, ws)
    return ws[0]


def wheel_tags(w):
    md = [n for n in zipfile.ZipFile(w).namelist()
          if n.endswith(".dist-info/WHEEL")]
    return re.findall(r"^Tag: (\S+)$", zipfile.ZipFile(w).read(
        md[0]).decode(), re.M)


def tms_tagged():
    w = tms_wheel()
    want = plat()
    check(os.path.basename(w).endswith(f"-py3-none-{want}.whl"),
          f"{os.path.basename(w)}: not tagged {want}")
    tags = wheel_tags(w)
    check(sorted(tags) == sorted(f"py3-none-{p}" for p in want.split(".")),
          f"WHEEL tags {tags}")


def tms_libs(tmp):
    """The wheel's hook libraries, extracted into tmp: {name: path}."""
    w = tms_wheel()
    z = zipfile.ZipFile(w)
    check(sorted(n for n in z.namelist() if n.endswith(".abi3.so")) ==
          sorted(TMS_NAMES), f"{w}: hook libraries {z.namelist()}")
    out = {}
    for n in TMS_NAMES:
        out[n] = os.path.join(tmp, n)
        with open(out[n], "wb") as f:
            f.write(z.read(n))
    return out


def tms_libraries():
    with tempfile.TemporaryDirectory() as tmp:
        for n, lib in tms_libs(tmp).items():
            dyn = subprocess.run(["readelf", "-dW", lib], capture_output=True,
                                 text=True, check=True).stdout
            needed = set(re.findall(r"\(NEEDED\).*\[(.*)\]", dyn))
            check(needed <= ALLOWED_NEEDED,
                  f"{n} needs {needed - ALLOWED_NEEDED}")
            syms = subprocess.run(["objdump", "-T", lib], capture_output=True,
                                  text=True, check=True).stdout
            vers = set(re.findall(r"GLIBC_(\d+(?:\.\d+)*)", syms))
            too_new = [v for v in vers
                       if tuple(map(int, v.split("."))) > (2, 17)]
            check(not too_new, f"{n}: glibc versions past 2.17: {too_new}")


def tms_auditwheel():
    w = tms_wheel()
    p = subprocess.run([os.path.join(REPO, "tools", "pytools.sh")],
                       capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    out = subprocess.run([os.path.join(p.stdout.strip(), "auditwheel"),
                          "show", w], capture_output=True, text=True)
    check(out.returncode == 0, out.stdout + out.stderr)
    # its libraries may need less than the gpusleep wheel's (2_5): the
    # 2_17 tag holds where auditwheel names 2_17 or older
    text = " ".join(out.stdout.split())
    m = re.search(r'is consistent with the following platform tag: '
                  r'"manylinux_2_(\d+)_x86_64"', text)
    check(m and int(m.group(1)) <= 17, out.stdout)
    check("requires no external shared libraries" in text, out.stdout)


def tms_old_glibc():
    libdir = glibc_231()
    with tempfile.TemporaryDirectory() as tmp:
        for n, lib in tms_libs(tmp).items():
            p = ldd_r(libdir, lib)
            out = p.stdout + p.stderr
            check(p.returncode == 0 and "not found" not in out and
                  "undefined symbol" not in out, f"{n}: {out}")


# In the venv: the preloaded hook captures a cudaMalloc of the stand-in
# runtime's client inside the interesting region, then Python's
# gpusleep._lib finds the copy the hook loaded (one memory manager).
PRELOADED = r"""
import ctypes, os, sys
c = ctypes.CDLL(os.path.join(sys.argv[1], "libcudart_client.so"))
c.client_malloc.restype = ctypes.c_void_p
c.client_malloc.argtypes = [ctypes.c_size_t]
hook = ctypes.CDLL(os.environ["LD_PRELOAD"])
hook.tms_set_interesting_region.argtypes = [ctypes.c_bool]
hook.tms_set_interesting_region(True)
p = c.client_malloc(4 << 20)
assert p, "cudaMalloc in the region failed"
from gpusleep import _lib
L = _lib.lib()
assert L.gs_mm_tag_of(L.gpusleep_mm(), ctypes.c_void_p(p)) == 1, "not ours"
maps = {ln.split()[-1] for ln in open("/proc/self/maps")
        if "libgpusleep.so" in ln}
print(_lib.path()); print(len(maps)); print("ok")
"""
# Python loads first, then the torch mode's library: it uses that copy
LOADED_FIRST = r"""
import ctypes, os, sys
from gpusleep import _lib
L = _lib.lib()
hook = ctypes.CDLL(sys.argv[2])
hook.tms_set_interesting_region.argtypes = [ctypes.c_bool]
hook.tms_torch_malloc.restype = ctypes.c_void_p
hook.tms_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int,
                                  ctypes.c_void_p]
hook.tms_set_interesting_region(True)
p = hook.tms_torch_malloc(1 << 20, 0, None)
assert p and L.gs_mm_tag_of(L.gpusleep_mm(), ctypes.c_void_p(p)) == 1
maps = {ln.split()[-1] for ln in open("/proc/self/maps")
        if "libgpusleep.so" in ln}
print(_lib.path()); print(len(maps)); print("ok")
"""


def tms_clean_venv():
    w, tw = S.get("wheel") or the_wheel(), tms_wheel()
    client = os.path.join(FAKECUDART, "libcudart_client.so")
    check(os.path.exists(client), f"{client}: not built (make)")
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv],
                       check=True)
        py = os.path.join(venv, "bin", "python")
        p = subprocess.run([sys.executable, "-m", "pip", "--python", py,
                            "install", "-q", "--no-index", "--no-deps",
                            "--disable-pip-version-check", w, tw],
                           capture_output=True, text=True)
        check(p.returncode == 0, p.stdout + p.stderr)
        site = subprocess.run([py, "-c", "import sysconfig; print("
                               "sysconfig.get_paths()['platlib'])"],
                              capture_output=True, text=True,
                              check=True).stdout.strip()
        want = os.path.join(site, "gpusleep", "libgpusleep.so.0")
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "GPUSLEEP_LIB", "LD_LIBRARY_PATH",
                            "LD_PRELOAD") and not k.startswith("TMS_")}
        env.update(LD_LIBRARY_PATH=FAKECUDART, GPUSLEEP_BACKEND="host",
                   PYTHONDONTWRITEBYTECODE="1")
        for code, pre, arg in (
                (PRELOADED, "torch_memory_saver_hook_mode_preload.abi3.so",
                 ""),
                (LOADED_FIRST, None,
                 os.path.join(site, "torch_memory_saver_hook_mode_torch"
                              ".abi3.so"))):
            e = dict(env)
            if pre:
                e["LD_PRELOAD"] = os.path.join(site, pre)
            p = subprocess.run([py, "-c", code, FAKECUDART, arg],
                               capture_output=True, text=True, env=e, cwd="/")
            check(p.returncode == 0 and p.stdout.split()[-1:] == ["ok"],
                  f"rc {p.returncode}: {p.stdout}{p.stderr}")
            lib, copies, _ = p.stdout.split()
            check(lib == want, f"libgpusleep from {lib}, want {want}")
            check(copies == "1", f"{copies} copies of libgpusleep loaded")


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [tagged, library, auditwheel, old_glibc,
                                clean_venv, tms_tagged, tms_libraries,
                                tms_auditwheel, tms_old_glibc,
                                tms_clean_venv]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
