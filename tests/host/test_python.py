#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of the Python bindings (no module needed): import without
the library, ctypes layouts against the C compiler's, tag lists, the
exception table against libgpusleep's, the engine's callback answers, the
host-backend memory manager with its memoryviews, the adapter disabled
without /dev/gpusleep, `make python-install DESTDIR=...`, the adapter in
local mode (no module) and over a stand-in of the torch calls it makes
(MemPool per tag, use_mem_pool, graphs); against a fake sysfs tree
(GPUSLEEP_SYSFS): a shared name is AmbiguousDomain, an unknown one
DomainNotFound, no module ModuleNotLoaded saying how to load it, the state
read from sysfs; bad arguments raise TypeError/ValueError naming the
argument; the public calls have type hints and docstrings; every public
function and method of the packages (py.typed) has resolvable annotations
on every parameter and its return."""

import ctypes
import errno
import os
import subprocess
import sys
import tempfile
import typing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "vm-py"))
from gstest import Tap, Skip, check, check_layouts, raises, REPO  # noqa: E402

TESTS = ["import gpusleep loads no library",
         "ctypes layouts match the C header",
         "tag lists: None, names, order, [] and unknown names",
         "one exception class per reason, names and errnos as libgpusleep",
         "engine callback answers",
         "memory manager on the host backend: views, backup, discard",
         "memory manager: a verified backup whose host copy changed "
         "fails the resume (EBADMSG), then comes back zeroed",
         "no /dev/gpusleep: Controller raises, adapter says how to fix it",
         "arbiter without the module: GPU names, arguments checked, "
         "ModuleNotLoaded",
         "drop-in: what PyTorch holds outside the regions, by class, from "
         "a memory snapshot",
         "make python-install DESTDIR: import gpusleep from the stage, "
         "the drop-in's hook libraries where it finds them",
         "adapter in local mode: regions, pause/resume, verified free",
         "adapter over a stand-in torch: one MemPool per tag, graphs",
         "stand-in torch: a released tag's region raises EBUSY",
         "stand-in torch: regions with expandable_segments:True",
         "stand-in torch: a foreign graph pool is the cuda_graph tag's",
         "stand-in torch: nested regions and two threads in one tag",
         "stand-in torch: a region on another device is refused",
         "stand-in torch: empty_cache() releases only pools whose use "
         "count fell to 0, and their memory is free",
         "a name two domains share: AmbiguousDomain, with their ids",
         "a name shared with another container's domain: the one seen",
         "an unknown name: DomainNotFound (a LookupError)",
         "no module: ModuleNotLoaded says how to load it",
         "State.from_sysfs: what any user can read",
         "bad arguments: TypeError/ValueError naming the argument",
         "public calls: type hints and docstrings; MemoryManager a with",
         "py.typed: every public function and method fully annotated"]


def lazy_import():
    code = ("import sys; sys.path.insert(0, %r); import gpusleep, "
            "gpusleep.engine, gpusleep.agent, gpusleep.torch_memory_saver; "
            "from gpusleep import _lib; assert _lib._lib is None; "
            "print(gpusleep.lib_path())" % os.path.join(REPO, "user", "python"))
    out = subprocess.run([sys.executable, "-B", "-c", code], check=True,
                         capture_output=True, text=True).stdout.strip()
    check(os.path.basename(out).startswith("libgpusleep.so"), out)


def tags():
    from gpusleep import _lib
    import gpusleep
    m = _lib.tags_to_mask
    check(m(None) == 0 and m(None, default=3) == 3, "None")
    check(m(["kv_cache", "weights"]) == 3 and m("weights") == 1, "names")
    check(_lib.mask_to_tags(3) == ["weights", "kv_cache"], "fixed order")
    check(_lib.mask_to_tags(0x81) == ["weights", "0x80"], "unknown bits")
    raises(ValueError, m, [])
    raises(ValueError, m, 0)
    e = raises(gpusleep.InvalidRequest, m, ["weights", "cuda_graph"])
    check(e.errno == errno.EINVAL and "cuda_graph" in str(e), str(e))
    check(m(1 << 7) == 1 << 7, "raw bits go to the kernel")
    # unknown names, for the module to refuse in its own order
    u = []
    check(m(["weights", "cuda_graph"], unknown=u) == 1 | _lib.TAG_UNKNOWN
          and u == ["cuda_graph"], f"unknown names {u}")


def exceptions():
    from gpusleep import _lib, errors
    L = _lib.lib()
    # every reason the library names has its Python one (issue 37's too)
    check(L.gs_reason_name(_lib.R_MAX) == b"UNKNOWN" and
          L.gs_reason_name(_lib.R_MAX - 1) != b"UNKNOWN",
          f"R_MAX {_lib.R_MAX} is libgpusleep's")
    for r in range(1, _lib.R_MAX):
        e = errors.from_code(errors.reason_errno(r) or errno.EIO, r)
        check(type(e).__name__ != "GpuSleepError", f"reason {r} has a class")
        check(e.reason_name == L.gs_reason_name(r).decode(), e.reason_name)
        check(errors.reason_errno(r) == L.gs_reason_errno(r), f"errno {r}")
        check(errors.reason_str(r) and e.message, "message")
    want = {"NOT_ENABLED": "NotEnabled", "INVALID": "InvalidRequest",
            "KV_NOT_ALLOWED": "KvReleaseNotAllowed",
            "ALREADY_RELEASED": "AlreadyReleased", "BUSY": "Busy",
            "NOT_RELEASED": "NotReleased", "CANCELLED": "Cancelled",
            "LEASED": "Leased", "HOST_BUDGET": "HostBudget",
            "VERIFY_FAILED": "VerifyFailed", "SHORTFALL": "Shortfall"}
    for r in range(1, _lib.R_MAX):
        n = errors.reason_name(r)
        if n in want:
            check(type(errors.from_code(1, r)).__name__ == want[n], n)
    for r in (_lib.R_DRAIN_TIMEOUT, _lib.R_AGENT_TIMEOUT,
              _lib.R_ENGINE_TIMEOUT):
        check(isinstance(errors.from_code(errno.ETIMEDOUT, r),
                         errors.Timeout), "timeouts")
    e = errors.from_code(errno.ETIMEDOUT)
    check(type(e) is errors.Timeout and e.reason == 0, "a wait's timeout")


def answers():
    from gpusleep import engine
    a = engine._answer
    check(a(None) == 0 and a(0) == 0 and a(True) == 0, "done")
    check(a(engine.PENDING) == engine.PENDING, "pending")
    check(a(-errno.EIO) == -errno.EIO, "errno")
    check(a(7) == -errno.EINVAL and a("x") == -errno.EINVAL, "bad")


def memory():
    from gpusleep import agent
    mm = agent.MemoryManager("host")
    check(mm.backend == "host", mm.backend)
    mm.set_policy("weights", backup=True)
    mm.set_policy("kv_cache", backup=False)
    w = mm.alloc("weights", 1 << 20)
    k = mm.alloc("kv_cache", 1 << 20)
    check(w.addr % 512 == 0 and len(w.view) == 1 << 20, repr(w))
    pat = bytes(range(256)) * 4096
    w.view[:] = pat
    k.view[:] = b"\x55" * (1 << 20)
    check(mm.pause("weights") >= 1 << 20 and mm.pause("kv_cache") >= 1 << 20,
          "pause")
    check(mm.tag_info("weights")["paused"] == 1, "paused")
    e = raises(OSError, mm.alloc, "weights", 4096)
    check(e.errno == errno.EBUSY, str(e))
    mm.resume("weights")
    mm.resume("kv_cache")
    check(w.view.tobytes() == pat, "weights restored")
    check(k.view.tobytes() == bytes(1 << 20), "KV zero")
    check(bytes(w.as_ctypes()[:4]) == pat[:4], "ctypes view")
    e = raises(OSError, mm.resume, "weights")
    check(e.errno == errno.EALREADY, str(e))
    mm.set_fence_streams([0x1234])	# the host backend has none to wait for
    r = mm.pause_ex("kv_cache")
    check(r["status"] == 0 and r["bytes"] >= 1 << 20 and r["measured"],
          repr(r))
    check(mm.resume_ex("kv_cache")["bytes"] >= 1 << 20, "resume_ex")
    mm.set_fence_streams()
    mm.set_fence_timeout(5000)
    check("fault" in r and not r["fault"], repr(r))
    pinned, limit = mm.pinned()
    check(pinned >= 1 << 20 and limit == 0, f"pinned {pinned}, {limit}")
    mm.set_pin_limit(1 << 40)
    check(mm.pinned()[1] == 1 << 40, "pin limit")
    mm.set_pin_limit(0)
    check(mm.trim() == 0, "nothing empty to trim")
    mm.set_staging("weights", free_after_resume=True)
    mm.free(w)
    mm.free(k)
    mm.close()
    check(agent.MemoryManager("auto").backend in ("host", "cuda"), "auto")


def verify():
    from gpusleep import agent
    from gpusleep import _lib
    mm = agent.MemoryManager("host")
    mm.set_policy("weights", backup=True)
    check(mm.verify is False, "off by default")
    check(mm.tag_info("weights")["content"] == "kept", "kept")
    mm.set_verify(True)
    check(mm.verify is True and mm.tag_info("weights")["verified"] == 1,
          "on")
    raises(TypeError, mm.set_verify, 1)
    w = mm.alloc("weights", 1 << 20)
    w.view[:] = b"\x5a" * (1 << 20)
    r = mm.pause_ex("weights")
    check(r["verified"] and r["verify_bytes"] == 1 << 20, repr(r))
    host = ctypes.c_void_p()
    check(_lib.lib().gs_mm_backup_ptr(mm.handle, w.addr + 7, 1,
                                      ctypes.byref(host)) == 0, "backup_ptr")
    b = ctypes.c_ubyte.from_address(host.value)
    b.value ^= 1
    e = raises(OSError, mm.resume, "weights")
    check(e.errno == errno.EBADMSG, str(e))
    check(e.result["verify_failed"] and e.result["lost_bytes"] >= 1 << 20,
          repr(e.result))
    i = mm.tag_info("weights")
    check(i["paused"] == 1 and i["content"] == "zeroed" and i["lost"] == 1,
          repr(i))
    r = mm.resume_ex("weights")
    check(r["lost_bytes"] >= 1 << 20 and w.view.tobytes() == bytes(1 << 20),
          "zeroed after")
    mm.close()


def no_device():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here")
    import gpusleep
    from gpusleep.torch_memory_saver import torch_memory_saver as tms
    e = raises(OSError, gpusleep.Controller, 1)
    check(e.errno == errno.ENOENT, str(e))
    raises(gpusleep.ModuleNotLoaded, gpusleep.resolve_domain,
           "nosuchdomain")
    # never a silent no-op: enabled, as torch_memory_saver's, and what
    # cannot work says how to make it work (issue 33, defect 3)
    check(tms.enabled, "adapter enabled")
    if tms.local:
        raise Skip("GPUSLEEP_TMS_LOCAL=1 here")
    e = raises(gpusleep.ModuleNotLoaded,
               lambda: tms.region("weights").__enter__())
    check("GPUSLEEP_TMS_LOCAL=1" in str(e), str(e))
    raises(gpusleep.ModuleNotLoaded, tms.pause)
    raises(gpusleep.ModuleNotLoaded, tms.resume)


def arbiter_args():
    import gpusleep
    from gpusleep import arbiter
    u = arbiter.gpu_uuid("GPU-5d1e0a3b-1c2d-4e5f-8a9b-0c1d2e3f4a5b")
    check(len(u) == 16 and u[0] == 0x5d, repr(u))
    check(arbiter.format_uuid(u) ==
          "GPU-5d1e0a3b-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "format")
    check(arbiter.gpu_uuid(u) == u and arbiter.gpu_uuid(bytearray(u)) == u,
          "bytes")
    h = arbiter.gpu_uuid("host")
    check(h == arbiter.gpu_uuid("host:0") != arbiter.gpu_uuid("host:1"),
          "host stand-ins")
    for bad, exc in (("GPU-5d1e", ValueError), (b"short", ValueError),
                     (True, TypeError), (1.5, TypeError),
                     ("cuda:x", ValueError), (-1, ValueError)):
        e = raises(exc, arbiter.gpu_uuid, bad)
        check("gpu" in str(e), str(e))
    # no driver here: an ordinal says what to do instead
    os.environ["GPUSLEEP_CUDA_LIB"] = "/nonexistent/libcuda.so.1"
    try:
        e = raises(OSError, arbiter.gpu_uuid, 0)
        check("host" in str(e) and e.errno == errno.ENOENT, str(e))
    finally:
        del os.environ["GPUSLEEP_CUDA_LIB"]
    for args, exc, word in (((h, 0), ValueError, "nbytes"),
                            ((h, True), TypeError, "nbytes"),
                            ((h, 1, 1001), ValueError, "priority"),
                            ((h, 1, "1"), TypeError, "priority"),
                            ((h, 1, 0, -1), ValueError, "timeout")):
        e = raises(exc, gpusleep.acquire, *args)
        check(word in str(e), f"{args}: {e}")
        e = raises(exc, gpusleep.reclaim, *args)
        check(word in str(e), f"{args}: {e}")
    e = raises(TypeError, gpusleep.acquire, h, 1, partial=1)
    check("partial" in str(e), str(e))
    e = raises(gpusleep.ModuleNotLoaded, gpusleep.acquire, h, 1 << 20,
               dev_path="/nonexistent/gpusleep")
    check("modprobe" in str(e), str(e))
    e = raises(gpusleep.ModuleNotLoaded, gpusleep.reclaim, "host", 1,
               dev_path="/nonexistent/gpusleep")
    # each new reason's class, its errno, and what kind of error it is
    from gpusleep import errors, _lib
    for r, cls, en in ((_lib.R_LEASED, errors.Leased, errno.EAGAIN),
                       (_lib.R_HOST_BUDGET, errors.HostBudget, errno.ENOSPC),
                       (_lib.R_VERIFY_FAILED, errors.VerifyFailed,
                        errno.EBADMSG),
                       (_lib.R_SHORTFALL, errors.Shortfall, errno.ENOSPC)):
        e = errors.from_code(en, r)
        check(type(e) is cls and e.errno == en, repr(e))
    check(issubclass(errors.Leased, BlockingIOError), "Leased: try again")
    check(issubclass(errors.PriorityNotPermitted, PermissionError), "EPERM")


def outside():
    from gpusleep import torch_memory_saver as tms
    snap = [{"device": 0, "segment_pool_id": (0, 0), "total_size": 100},
            {"device": 0, "segment_pool_id": (0, 0), "total_size": 20},
            {"device": 0, "segment_pool_id": (0, 7), "total_size": 1000},
            {"device": 0, "segment_pool_id": (3, 0), "total_size": 40},
            {"device": 0, "segment_pool_id": (0, 9), "total_size": 5},
            {"device": 1, "segment_pool_id": (0, 0), "total_size": 7000}]
    # the regions' pools (0, 7) aside; a graph's (3, 0) and another
    # MemPool (0, 9) are outside them; device 1 is not this process's GPU
    check(tms.outside_of(snap, [(0, 7)], 0) == (120, 45),
          repr(tms.outside_of(snap, [(0, 7)], 0)))
    check(tms.outside_of(snap, [], None) == (7120, 1045), "every device")
    check(tms.outside_of([], [(0, 7)], 0) == (0, 0), "nothing")
    # without torch in use here: unknown, 0
    check(tms.torch_memory_saver.outside() == (0, 0) or
          "torch" in sys.modules, "no torch: (0, 0)")


def install():
    with tempfile.TemporaryDirectory() as stage:
        r = subprocess.run(["make", "-C", REPO, "-s", "--no-print-directory",
                            "python-install", f"DESTDIR={stage}"],
                           capture_output=True, text=True)
        check(r.returncode == 0, r.stderr)
        ver = "python%d.%d" % sys.version_info[:2]
        site = os.path.join(stage, "usr", "local", "lib", ver,
                            "dist-packages")
        check(os.path.isfile(os.path.join(site, "gpusleep", "__init__.py")),
              f"nothing in {site}")
        env = dict(os.environ, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1",
                   GPUSLEEP_LIB=os.path.join(REPO, "build", "lib",
                                             "libgpusleep.so.0"))
        code = ("import gpusleep, gpusleep._install as i; "
                "print(gpusleep.__file__); print(i.LIBDIR); "
                "print(gpusleep.lib_path())")
        out = subprocess.run(["/usr/bin/python3", "-c", code], env=env,
                             cwd=stage, check=True, capture_output=True,
                             text=True).stdout.split()
        check(out[0].startswith(site), out[0])
        check(out[1] == "/usr/local/lib", out[1])
        check("build/lib/libgpusleep.so" in out[2], out[2])
        installed_hooks(stage, site, env)


HOOK_NAMES = [f"torch_memory_saver_hook_mode_{m}{v}.abi3.so"
              for m in ("preload", "torch") for v in ("", "_cu12", "_cu13")]
# the drop-in of an installed tree: its hook library for LD_PRELOAD
# (configure_subprocess), which then captures the stand-in runtime's
# cudaMalloc with the library gpusleep uses
HOOKED = r"""
import ctypes, os, subprocess, sys
import gpusleep.torch_memory_saver as m
with m.configure_subprocess():
    pre = os.environ["LD_PRELOAD"]
    child = subprocess.run([sys.executable, "-c", sys.argv[1]],
                           capture_output=True, text=True)
assert child.returncode == 0, child.stdout + child.stderr
print(pre); print(child.stdout.strip())
"""
HOOKED_CHILD = r"""
import ctypes, os
c = ctypes.CDLL(os.path.join(os.environ["FAKECUDART"], "libcudart_client.so"))
c.client_malloc.restype = ctypes.c_void_p
c.client_malloc.argtypes = [ctypes.c_size_t]
hook = ctypes.CDLL(os.environ["LD_PRELOAD"])
hook.tms_set_interesting_region.argtypes = [ctypes.c_bool]
hook.tms_set_interesting_region(True)
p = c.client_malloc(1 << 20)
from gpusleep import _lib
L = _lib.lib()
assert p and L.gs_mm_tag_of(L.gpusleep_mm(), ctypes.c_void_p(p)), "not ours"
print("captured")
"""


def installed_hooks(stage, site, env):
    """make python-install puts the hook libraries where the drop-in
    finds them (configure_subprocess, hook_library)."""
    hookdir = os.path.join(stage, "usr", "local", "lib", "gpusleep")
    have = sorted(os.listdir(hookdir)) if os.path.isdir(hookdir) else []
    check(have == sorted(HOOK_NAMES), f"{hookdir}: {have}")
    # the staged tree stands for PREFIX: where _install.py says they are
    with open(os.path.join(site, "gpusleep", "_install.py")) as f:
        text = f.read()
    check('HOOKDIR = "/usr/local/lib/gpusleep"' in text, text)
    with open(os.path.join(site, "gpusleep", "_install.py"), "w") as f:
        f.write(text.replace('"/usr/local/lib', f'"{stage}/usr/local/lib'))
    fakecudart = os.path.join(REPO, "build", "tests", "host", "fakecudart")
    e = dict(env, GPUSLEEP_BACKEND="host", FAKECUDART=fakecudart,
             LD_LIBRARY_PATH=fakecudart)
    r = subprocess.run(["/usr/bin/python3", "-c", HOOKED, HOOKED_CHILD],
                       env=e, cwd=stage, capture_output=True, text=True)
    check(r.returncode == 0, r.stdout + r.stderr)
    pre, said = r.stdout.split()
    # the variant of the CUDA runtime found, as torch_memory_saver picks
    check(os.path.dirname(pre) == hookdir and os.path.basename(pre) in
          HOOK_NAMES and "_preload" in pre, pre)
    check(said == "captured", r.stdout)


LOCAL = r"""
import ctypes, os, sys, threading
os.environ["GPUSLEEP_BACKEND"] = "host"
os.environ["GPUSLEEP_TMS_LOCAL"] = "1"
sys.path.insert(0, sys.argv[1])
import gpusleep.torch_memory_saver as m
from gpusleep import _lib
tms = m.torch_memory_saver
L = _lib.lib()
SIZE = 8 << 20
assert tms.enabled and tms.local, "local mode"
tms.hook_mode = "torch"
with m.configure_subprocess():
    pass
# the tag is per thread: a region here does not move another thread
other = {}
def alloc_other():
    other["p"] = L.gpusleep_malloc(4096, 0, None)
with tms.region(tag="weights", enable_cpu_backup=True):
    w = L.gpusleep_malloc(SIZE, 0, None)
with tms.region(tag="kv_cache"):
    k = L.gpusleep_malloc(SIZE, 0, None)
    th = threading.Thread(target=alloc_other)
    th.start(); th.join()
    with tms.region(tag="cuda_graph"):          # a tag of its own: bit 2
        g = L.gpusleep_malloc(4096, 0, None)
    with tms.region(tag="default"):             # torch_memory_saver's own
        dflt = L.gpusleep_malloc(4096, 0, None)
mm = L.gpusleep_mm()
# declared on first use, in that order
assert tms.tags == ["weights", "kv_cache", "cuda_graph", "default"], tms.tags
assert L.gs_mm_tag_of(mm, w) == 1 and L.gs_mm_tag_of(mm, g) == 4
assert L.gs_mm_tag_of(mm, dflt) == 8
assert L.gs_mm_tag_of(mm, k) == 2 and L.gs_mm_tag_of(mm, other["p"]) == 1
# a later region asking no backup does not drop the weights' backup
with tms.region(tag="weights", enable_cpu_backup=False):
    pass
wv = (ctypes.c_ubyte * SIZE).from_address(w)
kv = (ctypes.c_ubyte * SIZE).from_address(k)
pat = bytes(range(251)) * (SIZE // 251) + bytes(SIZE % 251)
ctypes.memmove(w, pat, SIZE)
ctypes.memset(k, 0xcd, SIZE)
r = tms.pause()
assert list(r) == ["weights", "kv_cache", "cuda_graph", "default"], r
assert r["cuda_graph"]["status"] == 0 and r["cuda_graph"]["bytes"] >= 4096
for t in ("weights", "kv_cache"):
    assert r[t]["status"] == 0 and r[t]["bytes"] >= SIZE, r
    assert r[t]["measured"], r
    # the host backend's "device memory" is the process's RSS
    assert r[t]["freed_bytes"] >= SIZE // 2, r
assert tms.pause("weights")["weights"]["status"] == -114    # EALREADY
r = tms.resume("weights")
assert r["weights"]["bytes"] >= SIZE, r
assert bytes(wv) == pat, "weights identical"
tms.resume()
assert bytes(kv) == bytes(SIZE), "KV zero"
try:
    with tms.region(tag="Bogus!"):     # not a name the module takes
        pass
    raise AssertionError("bad tag name accepted")
except m.errors.InvalidRequest:
    pass
print("ok")
"""


# The stand-in torch (tests/host/fake_torch/torch): MemPools, use_mem_pool,
# graphs, the caching and the refusals of PyTorch's allocator.
FAKE_TORCH = os.path.join(REPO, "tests", "host", "fake_torch")

# Each script runs in a process of its own (one memory manager per
# process), with the stand-in torch first on sys.path.
TORCH_PRELUDE = r"""
import os, sys
os.environ["GPUSLEEP_BACKEND"] = "host"
os.environ["GPUSLEEP_TMS_LOCAL"] = "1"
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import threading, warnings
import torch
import gpusleep.torch_memory_saver as m
from gpusleep import _lib, errors
tms = m.torch_memory_saver
L = _lib.lib()
def tag_of(t):
    return L.gs_mm_tag_of(L.gpusleep_mm(), t.ptr) if t.ptr else 0
"""

TORCH_MODE = r"""
with tms.region(tag="weights", enable_cpu_backup=True):
    w = torch.empty(1 << 20)
with tms.region(tag="kv_cache"):
    k = torch.empty(1 << 20)
    with tms.disable():
        assert torch.empty(4096).ptr is None  # PyTorch's own allocator
    assert tag_of(torch.empty(4096)) == 2, "back in kv_cache after disable"
outside = torch.empty(4096)
assert outside.ptr is None, "outside a region: not ours"
assert tag_of(w) == 1 and tag_of(k) == 2
assert {t for t, _ in tms._pools} == {"weights", "kv_cache"}, tms._pools
assert tms._allocators["kv_cache"].alloc_fn == "gpusleep_malloc_tag1"
g = torch.cuda.CUDAGraph()
with tms.cuda_graph(g, tag="cuda_graph"):
    gbuf = torch.empty(4096)                 # the graph's own memory
assert tms._allocators["cuda_graph"].alloc_fn == "gpusleep_malloc_tag2"
assert tag_of(gbuf) == 4, "graph memory in cuda_graph"
g2 = torch.cuda.CUDAGraph()
with tms.cuda_graph(g2, pool=g.pool()):     # graphs sharing a pool
    assert tag_of(torch.empty(4096)) == 4
assert g2.pool() == g.pool()
r = tms.pause()
assert all(r[t]["status"] == 0 for t in tms.tags), r
assert r["cuda_graph"]["bytes"] >= 4096, r
tms.resume()
print("ok")
"""

# Issue 21 item 9: a released tag's pool still caches blocks (unmapped
# now); entering its region must not serve them.
TORCH_RELEASED = r"""
with tms.region(tag="kv_cache"):
    k = torch.empty(1 << 20)
torch.free(k)                                # cached in the pool
tms.pause("kv_cache")
for enter in (lambda: tms.region(tag="kv_cache"),
              lambda: tms.cuda_graph(torch.cuda.CUDAGraph(), tag="kv_cache")):
    try:
        with enter():
            t = torch.empty(4096)
        raise AssertionError(f"served {t.ptr:#x} of a released tag")
    except errors.Busy as e:
        assert e.errno == 16 and "kv_cache" in str(e), e
tms.resume("kv_cache")
with tms.region(tag="kv_cache"):
    assert tag_of(torch.empty(4096)) == 1     # the first tag used: bit 0
print("ok")
"""

# Item 10: expandable segments on, as SGLang and vLLM deployments set them.
TORCH_EXPANDABLE = r"""
assert torch.cuda.memory._get_allocator_settings()[
    "expandable_segments"] == "True"
with tms.region(tag="weights"):
    w = torch.empty(1 << 20)
    with tms.region(tag="kv_cache"):
        k = torch.empty(1 << 20)
with tms.cuda_graph(torch.cuda.CUDAGraph()):
    gb = torch.empty(4096)
assert tag_of(w) == 1 and tag_of(k) == 2 and tag_of(gb) == 4
assert torch.cuda.memory._get_allocator_settings()[
    "expandable_segments"] == "True", "restored outside the regions"
print("ok")
"""

# Item 11: SGLang's capture, cuda_graph(g, pool=graph_pool_handle()) with
# one handle shared by every graph: the memory is the cuda_graph tag's.
TORCH_FOREIGN_POOL = r"""
h = torch.cuda.graph_pool_handle()
bufs = []
with warnings.catch_warnings():
    warnings.simplefilter("error")
    for bs in (1, 2, 4):
        g = torch.cuda.CUDAGraph()
        with tms.cuda_graph(g, pool=h, tag="cuda_graph"):
            bufs.append(torch.empty(4096 * bs))
bit = 1 << tms.tags.index("cuda_graph")      # declared on first use
assert [tag_of(b) for b in bufs] == [bit] * 3, [tag_of(b) for b in bufs]
assert len({b.pool.id for b in bufs}) == 1, "one handle, one pool"
r = tms.pause("cuda_graph")
assert r["cuda_graph"]["bytes"] >= 7 * 4096, r
tms.resume("cuda_graph")
print("ok")
"""

# Item 12: the same tag's region nested, another tag's inside it, and two
# threads in the same tag's region at once.
TORCH_NESTED = r"""
with tms.region(tag="weights"):
    with tms.region(tag="weights"):
        a = torch.empty(4096)
        with tms.region(tag="kv_cache"):
            b = torch.empty(4096)
        c = torch.empty(4096)
    d = torch.empty(4096)
assert [tag_of(x) for x in (a, b, c, d)] == [1, 2, 1, 1], \
    [tag_of(x) for x in (a, b, c, d)]
inside, out, errs = threading.Barrier(2), [], []
def worker():
    try:
        with tms.region(tag="kv_cache"):
            inside.wait(10)
            out.append(tag_of(torch.empty(4096)))
            inside.wait(10)
    except Exception as e:
        errs.append(repr(e))
        inside.abort()
ts = [threading.Thread(target=worker) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not errs and out == [2, 2], (errs, out)
print("ok")
"""

# Item 13: one memory manager serves one device: a region on another
# device is refused, never served by PyTorch's own allocator.
TORCH_DEVICE = r"""
torch.cuda.set_device(1)
with tms.region(tag="weights"):
    w = torch.empty(4096)
assert tag_of(w) == 1 and w.device == 1
torch.cuda.set_device(0)
try:
    with tms.region(tag="weights"):
        x = torch.empty(4096)
    raise AssertionError(f"device 0 served by {x.pool.id} ptr {x.ptr}")
except RuntimeError as e:
    assert "device 1" in str(e) and "device 0" in str(e), e
print("ok")
"""


# Issue 34 defect 5: the stand-in's empty_cache() as PyTorch's
# (c10/cuda/CUDACachingAllocator.cpp: emptyCache -> release_cached_blocks
# releases the default pools' blocks and, of the private pools, only those
# in graph_pools_freeable, whose use count fell to 0; a MemPool holds one
# count while it lives, use_mem_pool one more while entered, a graph one
# from its capture until it is reset; pytorch#133327, #133602). So a live
# pool keeps its cached blocks; a dropped pool's and a reset graph's go
# back to their allocator; and memory given back through gpusleep_free is
# free on the device, not only in gpusleep's cache.
TORCH_EMPTY_CACHE = r"""
import gc
alloc = torch.cuda.memory.CUDAPluggableAllocator(
    L._name, "gpusleep_malloc_tag1", "gpusleep_free")
def kv():
    i = _lib.gs_mm_tag_info()
    assert L.gs_mm_tag_info(L.gpusleep_mm(), 2, ctypes.byref(i)) == 0
    return i.nr_allocs, i.mapped_bytes
import ctypes
pool = torch.cuda.MemPool(alloc.allocator())
assert pool.use_count() == 1, pool.use_count()
with torch.cuda.use_mem_pool(pool):
    assert pool.use_count() == 2, pool.use_count()
    t = torch.empty(1 << 20)
assert pool.use_count() == 1
torch.free(t)                                # cached in the live pool
torch.cuda.empty_cache()
assert kv()[0] == 1, f"a live pool keeps its blocks: {kv()}"
del pool, t
gc.collect()
torch.cuda.empty_cache()                     # use count 0: released
assert kv() == (0, 0), f"a dropped pool's blocks, given back: {kv()}"
h = torch.cuda.graph_pool_handle()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, pool=h):
    pass
gpool = torch.cuda.MemPool(alloc.allocator())
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2, pool=gpool.id):
    b = torch.empty(1 << 20)
torch.free(b)
del gpool
gc.collect()
torch.cuda.empty_cache()
assert kv()[0] == 1, f"a captured graph holds its pool: {kv()}"
g2.reset()
torch.cuda.empty_cache()
assert kv() == (0, 0), f"the reset graph's pool, given back: {kv()}"
print("ok")
"""


def run_torch(script, env=None):
    e = dict(os.environ)
    e.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    e.update(env or {})
    out = subprocess.run([sys.executable, "-B", "-c", TORCH_PRELUDE + script,
                          os.path.join(REPO, "user", "python"), FAKE_TORCH],
                         capture_output=True, text=True, timeout=120, env=e)
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def torch_mode():
    run_torch(TORCH_MODE)


def torch_released():
    run_torch(TORCH_RELEASED)


def torch_expandable():
    run_torch(TORCH_EXPANDABLE,
              {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})


def torch_foreign_pool():
    run_torch(TORCH_FOREIGN_POOL)


def torch_nested():
    run_torch(TORCH_NESTED)


def torch_device():
    run_torch(TORCH_DEVICE)


def torch_empty_cache():
    run_torch(TORCH_EMPTY_CACHE)


def local_mode():
    out = subprocess.run([sys.executable, "-B", "-c", LOCAL,
                          os.path.join(REPO, "user", "python")],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def fake_sysfs(tmp):
    """Two domains named dup (ids 3, 4), llm0 (id 1, weights released),
    and two named ctr (5, another container's, whose creator is not seen
    here: owner_pid 0; 6, whose creator is) under tmp; GPUSLEEP_SYSFS
    points there."""
    vals = {"tags": "weights,kv_cache", "state": "awake",
            "released_tags": "", "unconfirmed_tags": "", "drain_pending": "0",
            "agent_attached": "1", "kv_release_allowed": "1",
            "op_in_flight": "0", "tag_bytes_released": "0,0",
            "tag_freed_bytes": "0,0", "tag_generations": "0,0",
            "resident_source": "unknown", "resident_bytes": "0"}
    for did, name, over in ((1, "llm0", {"state": "released",
                                          "released_tags": "weights",
                                          "tag_bytes_released": "4096,0",
                                          "tag_generations": "2,0",
                                          "resident_source": "process",
                                          "resident_bytes": "77"}),
                            (3, "dup", {}), (4, "dup", {}),
                            (5, "ctr", {"owner_pid": "0"}),
                            (6, "ctr", {"owner_pid": "4321"})):
        d = os.path.join(tmp, f"domain{did}")
        os.makedirs(d)
        for k, v in dict(vals, id=str(did), name=name, **over).items():
            with open(os.path.join(d, k), "w") as f:
                f.write(v + "\n")
    os.environ["GPUSLEEP_SYSFS"] = tmp


def with_sysfs(fn):
    def run():
        with tempfile.TemporaryDirectory() as tmp:
            fake_sysfs(tmp)
            try:
                fn()
            finally:
                del os.environ["GPUSLEEP_SYSFS"]
    return run


@with_sysfs
def ambiguous():
    import gpusleep
    e = raises(gpusleep.AmbiguousDomain, gpusleep.resolve_domain, "dup")
    check(isinstance(e, LookupError) and e.ids == [3, 4] and
          "pass the id" in str(e), str(e))
    for fn in (gpusleep.release, gpusleep.state, gpusleep.is_sleeping):
        raises(gpusleep.AmbiguousDomain, fn, "dup")
    check(gpusleep.resolve_domain("llm0") == 1, "a unique name")


@with_sysfs
def shared_with_another_container():
    import gpusleep
    check(gpusleep.resolve_domain("ctr") == 6,
          "the domain whose creator this process sees")


@with_sysfs
def not_found():
    import gpusleep
    e = raises(gpusleep.DomainNotFound, gpusleep.resolve_domain, "nope")
    check(isinstance(e, LookupError) and isinstance(e, FileNotFoundError)
          and e.errno == errno.ENOENT and "nope" in str(e), str(e))
    raises(gpusleep.DomainNotFound, gpusleep.State.from_sysfs, 99)


def module_not_loaded():
    import gpusleep
    os.environ["GPUSLEEP_SYSFS"] = "/nonexistent/gpusleep"
    try:
        e = raises(gpusleep.ModuleNotLoaded, gpusleep.resolve_domain, "x")
    finally:
        del os.environ["GPUSLEEP_SYSFS"]
    check("modprobe gpusleep" in str(e) and e.errno == errno.ENOENT, str(e))
    if not os.path.exists("/dev/gpusleep"):
        e = raises(gpusleep.ModuleNotLoaded, gpusleep.Controller, 1)
        check("modprobe gpusleep" in str(e), str(e))


@with_sysfs
def from_sysfs():
    import gpusleep
    st = gpusleep.State.from_sysfs(1)
    check(st.source == "sysfs" and st.id == 1 and st.state == "released" and
          st.released == ["weights"] and st.is_sleeping and
          st.bytes_released == {"weights": 4096} and
          st.generation == {"weights": 2, "kv_cache": 0} and
          st.resident_bytes == 77 and st.resident_source == "process" and
          st.agent_attached and st.last is None, repr(st))
    st = gpusleep.State.from_sysfs(3)
    check(st.state == "awake" and not st.is_sleeping and
          st.resident_source is None, repr(st))


@with_sysfs
def bad_args():
    import gpusleep
    for call, arg in ((lambda: gpusleep.release("llm0", timeout="abc"),
                       "timeout"),
                      (lambda: gpusleep.resume("llm0", timeout=[1]),
                       "timeout"),
                      (lambda: gpusleep.wait("llm0", op_id="1"), "op_id"),
                      (lambda: gpusleep.release("llm0", abort_inflight="no"),
                       "abort_inflight"),
                      (lambda: gpusleep.release("llm0", wait=1), "wait"),
                      (lambda: gpusleep.release(None), "domain"),
                      (lambda: gpusleep.state(1.5), "domain"),
                      (lambda: gpusleep.Controller(1, dev_path=3),
                       "dev_path")):
        e = raises(TypeError, call)
        check(str(e).startswith(arg + ":"), str(e))
    for call, arg in ((lambda: gpusleep.release("llm0", timeout=0),
                       "timeout"),
                      (lambda: gpusleep.wait("llm0", timeout=-1), "timeout"),
                      (lambda: gpusleep.wait("llm0", op_id=-2), "op_id"),
                      (lambda: gpusleep.release(0), "domain"),
                      (lambda: gpusleep.release(""), "domain")):
        e = raises(ValueError, call)
        check(str(e).startswith(arg + ":"), str(e))


def hints():
    import inspect
    import gpusleep
    from gpusleep import agent
    for fn in (gpusleep.release, gpusleep.resume, gpusleep.state,
               gpusleep.wait, gpusleep.is_sleeping, gpusleep.resolve_domain,
               gpusleep.acquire, gpusleep.reclaim, gpusleep.reclaim_wait,
               gpusleep.tenant, gpusleep.Lease.give_back,
               gpusleep.Controller.tenant,
               gpusleep.Controller.release, gpusleep.Controller.resume,
               gpusleep.Controller.state, gpusleep.Controller.wait,
               gpusleep.Controller.is_sleeping):
        sig = inspect.signature(fn)
        check(sig.return_annotation is not inspect.Signature.empty and
              all(p.annotation is not inspect.Parameter.empty
                  for n, p in sig.parameters.items() if n != "self"),
              f"{fn.__qualname__}{sig}")
        check(fn.__doc__ and len(fn.__doc__) > 30, fn.__qualname__)
    with agent.MemoryManager("host") as mm:
        check(mm._mm, "open inside the with")
    check(not mm._mm, "closed after it")

# The modules that ship py.typed: the gpusleep package (its private modules
# aside) and the two small distributions.
def typed_modules():
    import ast
    import importlib
    import importlib.util
    py = os.path.join(REPO, "user", "python")
    mods = []
    for f in sorted(os.listdir(os.path.join(py, "gpusleep"))):
        name, ext = os.path.splitext(f)
        if ext == ".py" and (name == "__init__" or not name.startswith("_")):
            mods.append(importlib.import_module(
                "gpusleep" if name == "__init__" else "gpusleep." + name))
    for d in sorted(os.listdir(py)):
        if not d.startswith("dist-"):
            continue
        for pkg in sorted(os.listdir(os.path.join(py, d))):
            init = os.path.join(py, d, pkg, "__init__.py")
            if os.path.isfile(init):
                # by path, under its own name: a torch_memory_saver
                # installed in the system is not the one checked
                # (a package: its own submodules import relatively)
                spec = importlib.util.spec_from_file_location(
                    pkg, init, submodule_search_locations=[
                        os.path.dirname(init)])
                m = importlib.util.module_from_spec(spec)
                saved = sys.modules.get(pkg)
                sys.modules[pkg] = m
                try:
                    spec.loader.exec_module(m)
                finally:
                    if saved is None:
                        sys.modules.pop(pkg, None)
                    else:
                        sys.modules[pkg] = saved
                mods.append(m)
    check(len(mods) >= 11, f"modules found: {[m.__name__ for m in mods]}")
    # names imported only for type checkers (if TYPE_CHECKING:) resolve to
    # an opaque type, so that their annotations can be evaluated here
    for m in mods:
        m_only = {}
        for node in ast.walk(ast.parse(open(m.__file__).read())):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in \
                    ast.unparse(node.test):
                for imp in node.body:
                    for a in getattr(imp, "names", []):
                        m_only[(a.asname or a.name).split(".")[0]] = _Opaque
        yield m, m_only


class _OpaqueMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return cls


class _Opaque(metaclass=_OpaqueMeta):
    pass


def _typed_callables(mod):
    """(qualname, function, is_method, binds_first) for every public
    function of mod and every public method (or dunder) of its public
    classes, including what they inherit from the package's private bases;
    properties' getters and setters."""
    import inspect
    seen = set()

    def members(cls):
        for klass in cls.__mro__:
            if klass.__module__ != mod.__name__:
                continue
            for name, v in vars(klass).items():
                if name.startswith("_") and not (name.startswith("__") and
                                                 name.endswith("__")):
                    continue
                if isinstance(v, property):
                    fns = [(f, True) for f in (v.fget, v.fset, v.fdel) if f]
                elif isinstance(v, staticmethod):
                    fns = [(v.__func__, False)]
                elif isinstance(v, classmethod):
                    fns = [(v.__func__, True)]
                elif inspect.isfunction(v):
                    fns = [(v, True)]
                else:
                    fns = []
                for f, binds in fns:
                    if f.__qualname__.startswith(klass.__qualname__ + ".") \
                            and f not in seen:
                        seen.add(f)
                        yield f, binds

    for name, v in vars(mod).items():
        if name.startswith("_") and name != "__getattr__":
            continue
        if inspect.isfunction(v) and v.__module__ == mod.__name__ and \
                "." not in v.__qualname__:
            yield v, False
        elif inspect.isclass(v) and v.__module__ == mod.__name__:
            yield from members(v)


def annotated():
    import inspect
    missing = []
    for mod, only in typed_modules():
        for fn, binds in _typed_callables(mod):
            where = f"{mod.__name__}.{fn.__qualname__}"
            sig = inspect.signature(fn)
            for i, (n, p) in enumerate(sig.parameters.items()):
                if binds and i == 0:
                    continue	# self / cls
                if p.annotation is inspect.Parameter.empty:
                    missing.append(f"{where}({n})")
            if sig.return_annotation is inspect.Signature.empty:
                missing.append(f"{where}(return)")
            try:
                f = inspect.unwrap(fn)
                typing.get_type_hints(f, globalns=dict(f.__globals__, **only))
            except Exception as e:
                missing.append(f"{where}: annotations do not resolve: "
                               f"{type(e).__name__}: {e}")
    check(not missing, f"{len(missing)} missing:\n  " +
          "\n  ".join(missing))


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], lazy_import)
    tap.run(TESTS[1], check_layouts)
    for name, fn in zip(TESTS[2:], [tags, exceptions, answers, memory, verify,
                                    no_device, arbiter_args, outside,
                                    install,
                                    local_mode,
                                    torch_mode, torch_released,
                                    torch_expandable, torch_foreign_pool,
                                    torch_nested, torch_device,
                                    torch_empty_cache, ambiguous,
                                    shared_with_another_container,
                                    not_found, module_not_loaded, from_sysfs,
                                    bad_args, hints, annotated]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
