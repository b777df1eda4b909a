#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""torch_memory_saver's hook libraries as gpusleep builds them
(user/tms/hook.c, build/lib/torch_memory_saver_hook_mode_*.abi3.so),
against torch_memory_saver 0.0.10's own (the pinned wheel's .so files:
tests/engines/pins.txt) and the CUDA runtime's documented API (the
toolkit's cuda_runtime_api.h and driver_types.h, parsed here), on the
CUDA backend over the stand-in driver (build/tests/host/fakecuda) and the
stand-in runtime (build/tests/host/fakecudart, called through a library's
PLT as PyTorch calls it):

- the same names, the same exported C functions as the real libraries;
- the stand-in runtime and the hook's interposed functions have the
  runtime's signatures, and the error codes the hook returns are the
  runtime's;
- cudaMalloc is gpusleep's only inside the calling thread's interesting
  region (TMS_INIT_ENABLE until set, per thread), cudaFree gives each
  pointer back to whoever made it; tms_pause / tms_resume (no domain)
  unmap and map through the driver and restore a backup;
- what gpusleep cannot do is refused by name (disk backup, the mmap
  backend), a bad boolean variable ends the process as there, a tag
  gpusleep cannot name is refused (cudaErrorInvalidValue);
- the torch mode's tms_torch_malloc only inside a region.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, Skip, REPO, check  # noqa: E402
import pinned  # noqa: E402

BUILD = os.path.join(REPO, "build")
LIBDIR = os.path.join(BUILD, "lib")
FAKECUDA = os.path.join(BUILD, "tests", "host", "fakecuda", "libcuda.so.1")
FAKECUDART = os.path.join(BUILD, "tests", "host", "fakecudart")
CLIENT = os.path.join(FAKECUDART, "libcudart_client.so")
NAMES = [f"torch_memory_saver_hook_mode_{m}{v}.abi3.so"
         for m in ("preload", "torch") for v in ("", "_cu12", "_cu13")]
HOOK = os.path.join(LIBDIR, "torch_memory_saver_hook_mode_preload_cu12.abi3.so")
TORCH_HOOK = os.path.join(LIBDIR, "torch_memory_saver_hook_mode_torch.abi3.so")
SOURCES = [os.path.join(REPO, "user", "tms", "hook.c"),
           os.path.join(REPO, "tests", "host", "fake_libcudart.c")]

TESTS = ["the six libraries torch_memory_saver 0.0.10 ships, same exports",
         "the runtime's signatures and error codes, from its headers",
         "cudaMalloc: gpusleep's inside the thread's interesting region",
         "cudaFree: each pointer back to who made it",
         "tms_pause/tms_resume: unmapped and mapped by the driver, backup",
         "disk backup, the mmap backend: refused by name",
         "a bad TMS_INIT_ENABLE value ends the process, as there",
         "a tag gpusleep cannot name: cudaErrorInvalidValue",
         "torch mode: tms_torch_malloc only inside a region"]

PRELUDE = rf"""
import ctypes, threading
c = ctypes.CDLL({CLIENT!r})             # RTLD_LOCAL, as Python loads torch
c.client_malloc.restype = ctypes.c_void_p
c.client_malloc.argtypes = [ctypes.c_size_t]
c.client_free.argtypes = [ctypes.c_void_p]
rt = ctypes.CDLL("libcudart.so.12")
rt.fakecudart_calls.argtypes = [ctypes.c_char_p]
rt.fakecudart_calls.restype = ctypes.c_long
hook = ctypes.CDLL({HOOK!r})             # the preloaded one, if it is
hook.tms_set_interesting_region.argtypes = [ctypes.c_bool]
hook.tms_get_interesting_region.restype = ctypes.c_bool
hook.tms_set_current_tag.argtypes = [ctypes.c_char_p]
hook.tms_set_enable_cpu_backup.argtypes = [ctypes.c_bool]
hook.tms_get_cpu_backup_backend.restype = ctypes.c_char_p
hook.tms_pause.argtypes = hook.tms_resume.argtypes = [ctypes.c_char_p]
hook.tms_get_cpu_backup_pointer.restype = ctypes.c_void_p
hook.tms_get_cpu_backup_pointer.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
drv = ctypes.CDLL({FAKECUDA!r})          # the one the backend loads
drv.fakecuda_calls.argtypes = [ctypes.c_char_p]
drv.fakecuda_calls.restype = ctypes.c_long
import gpusleep._lib as _lib
L = _lib.lib()
def ours(p):
    mm = L.gpusleep_mm()
    return bool(mm and L.gs_mm_tag_of(mm, p))
"""


def run(code, env=None, preload=HOOK):
    for f in (HOOK, TORCH_HOOK, CLIENT, FAKECUDA):
        if not os.path.exists(f):
            raise Skip(f"{f}: not built (make; the stand-in driver needs "
                       "cuda.h)")
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("TMS_", "GPUSLEEP_", "LD_PRELOAD"))}
    e.update(PYTHONDONTWRITEBYTECODE="1", GPUSLEEP_BACKEND="cuda",
             GPUSLEEP_CUDA_LIB=FAKECUDA, GPUSLEEP_NVML_LIB="off",
             LD_LIBRARY_PATH=FAKECUDART,
             PYTHONPATH=os.path.join(REPO, "user", "python"))
    e.update(env or {})
    if preload:
        e["LD_PRELOAD"] = preload
    r = subprocess.run([sys.executable, "-c", PRELUDE + code], env=e,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def ok(code, **kw):
    rc, out, err = run(code, **kw)
    check(rc == 0 and out.rstrip().endswith("ok"),
          f"rc {rc}, output:\n{out}{err}")
    return out, err


def exports(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return {ln.split()[-1] for ln in out.splitlines()
            if ln.split()[-2:-1] == ["T"] and
            not ln.split()[-1].startswith("_")}


def libraries():
    real = pinned.release("torch-memory-saver")
    for n in NAMES:
        theirs = real.path(n)
        ours = os.path.join(LIBDIR, n)
        check(os.path.exists(theirs), f"{real}: no {n} (the wheel changed)")
        check(os.path.exists(ours), f"{ours}: not built")
        want = {s for s in exports(theirs) if not s.startswith("tms_xpu")}
        have = exports(ours)
        check(want == have, f"{n}: {real} exports {sorted(want - have)} "
              f"that gpusleep's does not; gpusleep's {sorted(have - want)}"
              " that it does not")


def cuda_include():
    r = subprocess.run([os.path.join(REPO, "tools", "find-cuda-h.sh")],
                       capture_output=True, text=True)
    d = r.stdout.strip()
    if r.returncode or not os.path.exists(os.path.join(
            d, "cuda_runtime_api.h")):
        raise Skip("no cuda_runtime_api.h (the CUDA toolkit's headers)")
    return d


C_TYPE_WORDS = {"const", "unsigned", "signed", "int", "char", "long",
                "short", "void", "float", "double"}


def norm(params):
    """'void **devPtr, size_t size' -> ['void**', 'size_t']: the types,
    without the names, enum and struct."""
    out = []
    params = re.sub(r"\s*__dv\([^)]*\)", "", params).strip()
    if params in ("", "void"):
        return out
    for p in params.split(","):
        toks = re.findall(r"[A-Za-z_]\w*|\*", p)
        toks = [t for t in toks if t not in ("enum", "struct")]
        if len(toks) > 1 and toks[-1] != "*" and \
                toks[-1] not in C_TYPE_WORDS:
            toks = toks[:-1]		# the parameter's name
        check(toks, f"cannot read parameter {p!r}")
        words = " ".join(t for t in toks if t != "*")
        out.append(words + "*" * toks.count("*"))
    return out


def header_protos(inc):
    with open(os.path.join(inc, "cuda_runtime_api.h")) as f:
        text = f.read()
    protos = {}
    for m in re.finditer(r"extern\s+__host__\s+(?:__cudart_builtin__\s+)?"
                         r"(const\s+char\s*\*|cudaError_t)\s+CUDARTAPI\s+"
                         r"(cuda\w+)\s*\(([^;]*?)\)\s*;", text):
        ret = re.sub(r"\s+", "", m.group(1))
        protos.setdefault(m.group(2), (ret, m.group(3)))
    return protos


def source_defs(path):
    """The exported definitions of a source: {name: (ret, params)}."""
    with open(path) as f:
        text = f.read()
    out = {}
    for m in re.finditer(r"^EXPORT\s+(const\s+char\s*\*|cudaError_t)\s*"
                         r"(cuda\w+)\s*\(([^)]*)\)", text, re.M):
        out[m.group(2)] = (re.sub(r"\s+", "", m.group(1)), norm(m.group(3)))
    return out


def signatures():
    inc = cuda_include()
    protos = header_protos(inc)
    seen = 0
    for src in SOURCES:
        for name, (ret, params) in source_defs(src).items():
            check(name in protos, f"{src}: {name} is not in "
                  f"{inc}/cuda_runtime_api.h")
            # cudaError_t is an enum, passed as int: the same ABI
            want_ret, want = protos[name][0], norm(protos[name][1])
            got_ret = "cudaError_t" if ret == "cudaError_t" else ret
            check(got_ret == want_ret and params == want,
                  f"{src}: {name}({', '.join(params)}) -> {ret}; the "
                  f"runtime's: ({', '.join(want)}) -> {want_ret}")
            seen += 1
    check(seen >= 8, f"only {seen} definitions read: the parser drifted")
    # the functions the hook calls by name in the runtime
    with open(SOURCES[0]) as f:
        called = set(re.findall(r'cudart_sym\("(cuda\w+)"\)', f.read()))
    check(called <= set(protos), f"{called - set(protos)}: not the runtime's")
    # the error codes both return
    with open(os.path.join(inc, "driver_types.h")) as f:
        codes = dict(re.findall(r"\b(cuda(?:Success|Error\w+))\s*=\s*(\d+)",
                                f.read()))
    for src in SOURCES:
        with open(src) as f:
            mine = re.findall(r"#define\s+(cuda(?:Success|Error\w+))\s+(\d+)",
                              f.read())
        check(mine, f"{src}: no error codes read")
        for name, v in mine:
            check(codes.get(name) == v, f"{src}: {name} {v}, driver_types.h "
                  f"{codes.get(name)}")


def interesting():
    ok("""
assert not hook.tms_get_interesting_region()       # TMS_INIT_ENABLE unset
n = rt.fakecudart_calls(b"cudaMalloc")
a = c.client_malloc(1 << 20)
assert a and not ours(a) and rt.fakecudart_calls(b"cudaMalloc") == n + 1
maps = drv.fakecuda_calls(b"cuMemMap")
hook.tms_set_interesting_region(True)
b = c.client_malloc(1 << 20)
assert b and ours(b), "not gpusleep's in the region"
assert rt.fakecudart_calls(b"cudaMalloc") == n + 1, "the runtime was asked"
assert drv.fakecuda_calls(b"cuMemMap") > maps, "not mapped by the driver"
other = {}
th = threading.Thread(target=lambda: other.update(p=c.client_malloc(4096)))
th.start(); th.join()
assert other["p"] and not ours(other["p"]), "the region leaked to a thread"
assert L.gs_mm_tag_of(L.gpusleep_mm(), b) == 1       # tag "default": bit 0
print('ok')
""")
    # TMS_INIT_ENABLE: every thread's, until it says otherwise
    ok("""
assert hook.tms_get_interesting_region()
b = c.client_malloc(4096)
assert ours(b)
other = {}
th = threading.Thread(target=lambda: other.update(p=c.client_malloc(4096)))
th.start(); th.join()
assert ours(other["p"])
hook.tms_set_interesting_region(False)
assert not ours(c.client_malloc(4096))
print('ok')
""", env={"TMS_INIT_ENABLE": "yes"})


def free():
    ok("""
a = c.client_malloc(8192)
hook.tms_set_interesting_region(True)
b = c.client_malloc(8192)
hook.tms_set_interesting_region(False)
n = rt.fakecudart_calls(b"cudaFree")
assert c.client_free(b) == 0 and rt.fakecudart_calls(b"cudaFree") == n
info = _lib.gs_mm_tag_info()
L.gs_mm_tag_info(L.gpusleep_mm(), 1, ctypes.byref(info))
assert info.nr_allocs == 0, "not given back to gpusleep"
hook.tms_set_interesting_region(True)              # in a region or not
assert c.client_free(a) == 0 and rt.fakecudart_calls(b"cudaFree") == n + 1
assert c.client_free(None) == 0                    # the runtime's
print('ok')
""")


def pause_resume():
    ok("""
hook.tms_set_interesting_region(True)
hook.tms_set_current_tag(b"weights")
hook.tms_set_enable_cpu_backup(True)
w = c.client_malloc(1 << 20)
hook.tms_set_current_tag(b"kv_cache")
hook.tms_set_enable_cpu_backup(False)
k = c.client_malloc(1 << 20)
want = bytes(range(256)) * 4096
ctypes.memmove(w, want, len(want))
ctypes.memset(k, 0xcd, 1 << 20)
assert not hook.tms_get_cpu_backup_pointer(w, 16)     # awake: none
unmaps = drv.fakecuda_calls(b"cuMemUnmap")
assert hook.tms_pause(b"kv_cache") == 0
assert drv.fakecuda_calls(b"cuMemUnmap") == unmaps + 1
assert hook.tms_pause(None) == 0                    # the rest: weights
assert drv.fakecuda_calls(b"cuMemUnmap") == unmaps + 2
p = hook.tms_get_cpu_backup_pointer(w + 256, 256)
assert p and ctypes.string_at(p, 256) == want[256:512], "backup"
maps = drv.fakecuda_calls(b"cuMemMap")
assert hook.tms_resume(None) == 0
assert drv.fakecuda_calls(b"cuMemMap") == maps + 2
assert ctypes.string_at(w, len(want)) == want, "weights not restored"
assert ctypes.string_at(k, 1 << 20) == bytes(1 << 20), "kv_cache not zero"
assert hook.tms_pause(b"never_used") == 0          # nothing in it
print('ok')
""")


def refused():
    out, err = ok("""
hook.tms_set_interesting_region(True)
p = ctypes.c_void_p()
lib = ctypes.CDLL(None)               # the global scope: the hook first
assert lib.cudaMalloc(ctypes.byref(p), 4096) == 801
print('ok')
""", env={"TMS_INIT_ENABLE_DISK_BACKUP": "1"})
    check("TMS_INIT_ENABLE_DISK_BACKUP" in err, err)
    out, err = ok("""
hook.tms_set_interesting_region(True)
hook.tms_set_enable_cpu_backup(True)
assert hook.tms_get_cpu_backup_backend() == b"mmap"
p = ctypes.c_void_p()
assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), 4096) == 801
hook.tms_set_enable_cpu_backup(False)              # mmap, unused: fine
assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), 4096) == 0
print('ok')
""", env={"TMS_INIT_CPU_BACKUP_BACKEND": "mmap"})
    check("TMS_INIT_CPU_BACKUP_BACKEND" in err and "mmap" in err, err)
    ok("""
assert hook.tms_get_cpu_backup_backend() == b"pinned"  # the default
print('ok')
""")


def bad_bool():
    rc, out, err = run("""
c.client_malloc(4096)
print('ok')
""", env={"TMS_INIT_ENABLE": "maybe"})
    check(rc == 1 and "TMS_INIT_ENABLE" in err and "maybe" in err,
          f"rc {rc}: {out}{err}")


def bad_tag():
    out, err = ok("""
hook.tms_set_interesting_region(True)
p = ctypes.c_void_p()
for tag in (b"Weights", b"x" * 80, b"a-b"):
    hook.tms_set_current_tag(tag)
    assert ctypes.CDLL(None).cudaMalloc(ctypes.byref(p), 4096) == 1, tag
print('ok')
""")
    check("[a-z][a-z0-9_]*" in err, err)


def torch_mode():
    ok(f"""
t = ctypes.CDLL({TORCH_HOOK!r})
t.tms_torch_malloc.restype = ctypes.c_void_p
t.tms_torch_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
t.tms_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                             ctypes.c_void_p]
t.tms_set_interesting_region.argtypes = [ctypes.c_bool]
assert not t.tms_torch_malloc(4096, 0, None)        # outside a region
t.tms_set_interesting_region(True)
p = t.tms_torch_malloc(4096, 0, None)
assert p and ours(p)
t.tms_torch_free(p, 4096, 0, None)
print('ok')
""", preload=None)


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [libraries, signatures, interesting, free,
                                pause_resume, refused, bad_bool, bad_tag,
                                torch_mode]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
