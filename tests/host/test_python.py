#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of the Python bindings (no module needed): import without
the library, ctypes layouts against the C compiler's, tag lists, the
exception table against libgpusleep's, the engine's callback answers, the
host-backend memory manager with its memoryviews, the adapter disabled
without /dev/gpusleep, `make python-install DESTDIR=...`, the adapter in
local mode (no module) and over a stand-in of the torch calls it makes
(MemPool per tag, use_mem_pool, graphs)."""

import errno
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "vm-py"))
from gstest import Tap, Skip, check, check_layouts, raises, REPO  # noqa: E402

TESTS = ["import gpusleep loads no library",
         "ctypes layouts match the C header",
         "tag lists: None, names, order, [] and unknown names",
         "one exception class per reason, names and errnos as libgpusleep",
         "engine callback answers",
         "memory manager on the host backend: views, backup, discard",
         "no /dev/gpusleep: Controller raises, adapter disabled",
         "make python-install DESTDIR: import gpusleep from the stage",
         "adapter in local mode: regions, pause/resume, verified free",
         "adapter over a stand-in torch: one MemPool per tag, graphs"]


def lazy_import():
    code = ("import sys; sys.path.insert(0, %r); import gpusleep, "
            "gpusleep.engine, gpusleep.agent, gpusleep.torch_memory_saver; "
            "from gpusleep import _lib; assert _lib._lib is None; "
            "print(gpusleep.lib_path())" % os.path.join(REPO, "user", "python"))
    out = subprocess.run([sys.executable, "-B", "-c", code], check=True,
                         capture_output=True, text=True).stdout.strip()
    check(out.endswith("libgpusleep.so") or out.endswith("libgpusleep.so.0"),
          out)


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
    for r in range(1, _lib.R_MAX):
        e = errors.from_code(errors.reason_errno(r) or errno.EIO, r)
        check(type(e).__name__ != "GpuSleepError", f"reason {r} has a class")
        check(e.reason_name == L.gs_reason_name(r).decode(), e.reason_name)
        check(errors.reason_errno(r) == L.gs_reason_errno(r), f"errno {r}")
        check(errors.reason_str(r) and e.message, "message")
    want = {"NOT_ENABLED": "NotEnabled", "INVALID": "InvalidRequest",
            "KV_NOT_ALLOWED": "KvReleaseNotAllowed",
            "ALREADY_RELEASED": "AlreadyReleased", "BUSY": "Busy",
            "NOT_RELEASED": "NotReleased", "CANCELLED": "Cancelled"}
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


def no_device():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here")
    import gpusleep
    from gpusleep.torch_memory_saver import torch_memory_saver as tms
    e = raises(OSError, gpusleep.Controller, 1)
    check(e.errno == errno.ENOENT, str(e))
    raises(LookupError, gpusleep.resolve_domain, "nosuchdomain")
    check(not tms.enabled, "adapter disabled")
    with tms.region("weights", enable_cpu_backup=True):
        pass
    check(tms.pause() is None and tms.resume() is None, "no-ops")


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
    with tms.region(tag="default"):             # torch_memory_saver's
        dflt = L.gpusleep_malloc(4096, 0, None)
mm = L.gpusleep_mm()
assert tms.tags == ["weights", "kv_cache", "cuda_graph"], tms.tags
assert L.gs_mm_tag_of(mm, w) == 1 and L.gs_mm_tag_of(mm, g) == 4
assert L.gs_mm_tag_of(mm, dflt) == 1
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
assert list(r) == ["weights", "kv_cache", "cuda_graph"], r
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
    with tms.region(tag="bogus"):
        pass
    raise AssertionError("bogus tag accepted")
except m.errors.InvalidRequest:
    pass
print("ok")
"""


# A stand-in for the parts of torch the adapter calls, with the semantics
# PyTorch documents: CUDAPluggableAllocator(path, alloc_fn, free_fn) loads
# the two symbols; MemPool(allocator) has an id; use_mem_pool(pool) routes
# the calling thread's allocations to the pool, whose allocator is called
# for new memory (here at once: no caching); torch.cuda.graph(g, pool=id).
FAKE_TORCH = r"""
import contextlib, ctypes, itertools, threading
_ids = itertools.count(1)
_tls = threading.local()
class _Alloc:
    def __init__(self, path, alloc_fn, free_fn):
        lib = ctypes.CDLL(path)
        self.malloc = getattr(lib, alloc_fn)
        self.free = getattr(lib, free_fn)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                              ctypes.c_void_p]
        self.alloc_fn = alloc_fn
    def allocator(self):
        return self
_pools = {}
class MemPool:
    def __init__(self, allocator=None):
        self.allocator = allocator
        self.id = (0, next(_ids))
        _pools[self.id] = self
class _Memory:
    CUDAPluggableAllocator = _Alloc
class CUDAGraph:
    pass
def _stack():
    if not hasattr(_tls, "pools"):
        _tls.pools = []
    return _tls.pools
class cuda:
    memory = _Memory
    MemPool = MemPool
    CUDAGraph = CUDAGraph
    graphs = []
    @staticmethod
    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        _stack().append(pool)
        try:
            yield
        finally:
            _stack().pop()
    @staticmethod
    @contextlib.contextmanager
    def graph(g, pool=None, stream=None, capture_error_mode="global"):
        # a capture allocates from the pool it is given (a private one
        # of PyTorch's own allocator otherwise)
        cuda.graphs.append((g, pool, capture_error_mode))
        _stack().append(_pools.get(tuple(pool) if pool else None,
                                   MemPool()))
        try:
            yield
        finally:
            _stack().pop()
def empty(nbytes):
    # what the caching allocator does for a new block of the current pool
    pools = _stack()
    if not pools or pools[-1].allocator is None:
        return None
    return pools[-1].allocator.malloc(nbytes, 0, None)
"""

TORCH_MODE = r"""
import os, sys
os.environ["GPUSLEEP_BACKEND"] = "host"
os.environ["GPUSLEEP_TMS_LOCAL"] = "1"
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import torch
import gpusleep.torch_memory_saver as m
from gpusleep import _lib
tms = m.torch_memory_saver
L = _lib.lib()
with tms.region(tag="weights", enable_cpu_backup=True):
    w = torch.empty(1 << 20)
with tms.region(tag="kv_cache"):
    k = torch.empty(1 << 20)
    with tms.disable():
        assert torch.empty(4096) is None     # PyTorch's own allocator
outside = torch.empty(4096)
assert outside is None, "outside a region: not ours"
mm = L.gpusleep_mm()
assert L.gs_mm_tag_of(mm, w) == 1 and L.gs_mm_tag_of(mm, k) == 2
assert set(tms._pools) == {"weights", "kv_cache"}
assert tms._allocators["kv_cache"].alloc_fn == "gpusleep_malloc_tag1"
g = torch.cuda.CUDAGraph()
with tms.cuda_graph(g, tag="cuda_graph"):
    gbuf = torch.empty(4096)                 # the graph's own memory
assert torch.cuda.graphs[-1][1] == tms._pools["cuda_graph"].id, \
    torch.cuda.graphs
assert tms._allocators["cuda_graph"].alloc_fn == "gpusleep_malloc_tag2"
assert L.gs_mm_tag_of(mm, gbuf) == 4, "graph memory in cuda_graph"
with tms.cuda_graph(g, pool=tms.pool("weights").id):
    pass
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with tms.cuda_graph(g, pool=(9, 9)):
        pass
assert caught and "not one of gpusleep's pools" in str(caught[0].message)
r = tms.pause()
assert all(r[t]["status"] == 0 for t in tms.tags), r
assert r["cuda_graph"]["bytes"] >= 4096, r
tms.resume()
print("ok")
"""


def torch_mode():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "torch.py"), "w") as f:
            f.write(FAKE_TORCH)
        out = subprocess.run([sys.executable, "-B", "-c", TORCH_MODE,
                              os.path.join(REPO, "user", "python"), d],
                             capture_output=True, text=True, timeout=120)
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def local_mode():
    out = subprocess.run([sys.executable, "-B", "-c", LOCAL,
                          os.path.join(REPO, "user", "python")],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def main():
    tap = Tap(TESTS)
    tap.run(TESTS[0], lazy_import)
    tap.run(TESTS[1], check_layouts)
    for name, fn in zip(TESTS[2:], [tags, exceptions, answers, memory,
                                    no_device, install, local_mode,
                                    torch_mode]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
