#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The torch_memory_saver drop-in (user/python/dist-tms over
gpusleep.torch_memory_saver) as the callers of torch_memory_saver 0.0.10
use it: SGLang 0.5.23's adapter and slime's trainer (THUDM/slime at
624b824a, 2026-08-21; the call sites are cited in
tests/host/test_tms_pinned.py). Issue 33's defects, one test each:

  2. slime's trainer with --offload: slime/ray/actor_group.py
     LD_PRELOADs torch_memory_saver_hook_mode_preload*.so from the
     directory above the package and sets TMS_INIT_ENABLE and
     TMS_INIT_ENABLE_CPU_BACKUP; slime/backends/megatron_utils/__init__.py
     reads torch_memory_saver._impl.
  3. without /dev/gpusleep nothing may be a silent no-op: the real
     `enabled` is always True.
  4. the real surface: TorchMemorySaver a class, its methods and
     properties, no stray attribute, any tag name.

Each test runs in a process of its own (one memory manager per process),
on the host backend, with the package from the tree.
"""

import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
from gstest import Tap, Skip, REPO, check  # noqa: E402

PY = os.path.join(REPO, "user", "python")
DIST = os.path.join(PY, "dist-tms")
BUILD = os.path.join(REPO, "build")
VENV = os.path.join(BUILD, "python", "venv")
# the names slime's actor group looks for, in its order
# (slime/ray/actor_group.py, RayTrainGroup._allocate_gpus_for_actor)
SLIME_NAMES = ["torch_memory_saver_hook_mode_preload_cu13.abi3.so",
               "torch_memory_saver_hook_mode_preload_cu12.abi3.so",
               "torch_memory_saver_hook_mode_preload.abi3.so"]
HOOK = os.path.join(BUILD, "lib", SLIME_NAMES[1])
# the stand-in CUDA runtime and a library calling it as PyTorch's
# libc10_cuda does (through its PLT), user/cuda.mk
FAKECUDART = os.path.join(BUILD, "tests", "host", "fakecudart")
CLIENT = os.path.join(FAKECUDART, "libcudart_client.so")

TESTS = ["defect 2: slime finds the preload library beside the package",
         "defect 2: torch_memory_saver._impl exists, None before first use",
         "defect 2: LD_PRELOAD + TMS_INIT_ENABLE: cudaMalloc is gpusleep's",
         "defect 3: no /dev/gpusleep: enabled, region() raises the fix",
         "defect 4: TorchMemorySaver a class with the real surface",
         "defect 4: an unknown attribute is refused, not created",
         "defect 4: any tag name, declared on first use, 8 at most",
         "what gpusleep cannot do raises, naming the option",
         "hook_mode: write-only, before the first use",
         "memory_margin_bytes and retain_cpu_backup (TMS_RETAIN_CPU_BACKUP)",
         "get_cpu_backup: the host copy of a released tensor",
         "configure_subprocess: LD_PRELOAD of the preload library, restored",
         "torch_memory_saver's own hook preloaded: refused, the fix named",
         "PyTorch's cudaMallocAsync backend: region() refused, saying why"]
FAKE_TORCH = os.path.join(HERE, "fake_torch")


def run(code, env=None, preload=None):
    """code in a fresh python3, the drop-in's tree first on sys.path;
    returns (rc, stdout, stderr)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("TMS_", "GPUSLEEP_", "LD_PRELOAD"))}
    e.update(PYTHONDONTWRITEBYTECODE="1", GPUSLEEP_BACKEND="host",
             PYTHONPATH=os.pathsep.join([DIST, PY]))
    e.update(env or {})
    if preload:
        e["LD_PRELOAD"] = preload
    r = subprocess.run([sys.executable, "-c", code], env=e,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def ok(code, **kw):
    rc, out, err = run(code, **kw)
    check(rc == 0 and out.rstrip().endswith("ok"),
          f"rc {rc}, output:\n{out}{err}")
    return out


def slime_finds():
    site = glob.glob(os.path.join(VENV, "lib", "python3*", "site-packages"))
    if not site:
        raise Skip(f"no {VENV} (make wheel: Debian's python3-wheel)")
    init = os.path.join(site[0], "torch_memory_saver", "__init__.py")
    check(os.path.isfile(init), f"the drop-in is not installed: no {init}")
    # slime: os.path.dirname(os.path.dirname(torch_memory_saver.__file__))
    top = os.path.dirname(os.path.dirname(init))
    found = [n for n in SLIME_NAMES if os.path.exists(os.path.join(top, n))]
    check(found, f"none of {SLIME_NAMES} in {top}: slime's actor group "
          "raises FileNotFoundError with --offload")


def impl_exists():
    ok("import torch_memory_saver as m\n"
       "t = m.torch_memory_saver\n"
       "assert t._impl is None, t._impl\n"
       "print('ok')")


def preload_init_enable():
    for f in (HOOK, CLIENT):
        check(os.path.exists(f), f"{f}: not built")
    ok(f"""
import ctypes
# loaded as PyTorch loads libcudart (RTLD_LOCAL), called through its PLT
c = ctypes.CDLL({CLIENT!r})
c.client_malloc.restype = ctypes.c_void_p
c.client_malloc.argtypes = [ctypes.c_size_t]
p = c.client_malloc(1 << 20)
assert p, "cudaMalloc failed"
from gpusleep import _lib
L = _lib.lib()
mm = L.gpusleep_mm()
assert mm and L.gs_mm_tag_of(mm, p) == 1, "not in gpusleep's first tag"
print('ok')
""", env={"TMS_INIT_ENABLE": "1", "TMS_INIT_ENABLE_CPU_BACKUP": "1",
          "LD_LIBRARY_PATH": FAKECUDART}, preload=HOOK)


def no_module():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here")
    ok("""
import torch_memory_saver as m
from gpusleep import errors
t = m.torch_memory_saver
assert t.enabled is True
for call in (lambda: t.region(tag="weights").__enter__(),
             lambda: t.pause(), lambda: t.resume()):
    try:
        call()
    except errors.ModuleNotLoaded as e:
        assert "GPUSLEEP_TMS_LOCAL=1" in str(e), str(e)
        assert "modprobe gpusleep" in str(e), str(e)
    else:
        raise AssertionError("no error without /dev/gpusleep")
print('ok')
""")


def real_surface():
    ok("""
import inspect
import torch_memory_saver as m
assert inspect.isclass(m.TorchMemorySaver), m.TorchMemorySaver
t = m.torch_memory_saver
assert isinstance(t, m.TorchMemorySaver)
for name in ("memory_margin_bytes", "retain_cpu_backup"):
    assert isinstance(inspect.getattr_static(m.TorchMemorySaver, name),
                      property), name
for name in ("get_cpu_backup", "set_disk_backup_dir", "region",
             "cuda_graph", "disable", "pause", "resume"):
    assert callable(getattr(t, name)), name
p = inspect.signature(t.region).parameters
assert list(p) == ["tag", "enable_cpu_backup", "enable_disk_backup",
                   "cpu_backup_backend"], list(p)
assert p["tag"].default == "default", p["tag"].default
p = inspect.signature(t.cuda_graph).parameters
assert "cpu_backup_backend" in p, list(p)
assert list(inspect.signature(t.get_cpu_backup).parameters) == \
    ["x", "zero_copy"]
print('ok')
""")


def no_stray():
    ok("""
import torch_memory_saver as m
t = m.torch_memory_saver
try:
    t.memory_margin = 1 << 30        # a misspelt memory_margin_bytes
except AttributeError as e:
    assert "memory_margin" in str(e), str(e)
else:
    raise AssertionError("a stray attribute was created")
assert not hasattr(t, "memory_margin")
try:
    t.enabled = False                # read-only, as in torch_memory_saver
except AttributeError:
    pass
else:
    raise AssertionError("enabled was set")
print('ok')
""")


def any_tag():
    ok("""
import torch_memory_saver as m
from gpusleep import _lib
t = m.torch_memory_saver
L = _lib.lib()
names = ["weights", "kv_cache", "cuda_graph", "weights_drafter", "default",
         "t5", "t6", "t7"]
ptrs = {}
for n in names:
    with t.region(tag=n):
        ptrs[n] = L.gpusleep_malloc(4096, 0, None)
mm = L.gpusleep_mm()
for i, n in enumerate(names):
    assert L.gs_mm_tag_of(mm, ptrs[n]) == 1 << i, (n, i)
try:
    with t.region(tag="t8"):
        pass
except ValueError as e:
    assert "8" in str(e) and "t8" in str(e), str(e)
else:
    raise AssertionError("a 9th tag was accepted")
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1"})


def cannot():
    ok("""
import torch_memory_saver as m
t = m.torch_memory_saver
def refused(exc, words, fn, *a, **kw):
    try:
        fn(*a, **kw)
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
    else:
        raise AssertionError(f"{fn} {a} {kw}: nothing raised")
enter = lambda **kw: t.region(**kw).__enter__()
refused(NotImplementedError, ["enable_disk_backup"], enter, tag="w",
        enable_disk_backup=True)
refused(ValueError, ["mutually exclusive"], enter, tag="w",
        enable_cpu_backup=True, enable_disk_backup=True)
refused(NotImplementedError, ["mmap"], enter, tag="w",
        enable_cpu_backup=True, cpu_backup_backend="mmap")
refused(ValueError, ["requires enable_cpu_backup"], enter, tag="w",
        cpu_backup_backend="pinned")
refused(NotImplementedError, ["set_disk_backup_dir", "disk backup"],
        t.set_disk_backup_dir, "/tmp/x")
with t.region(tag="w", enable_cpu_backup=True, cpu_backup_backend="pinned"):
    pass
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1"})


def hook_mode():
    ok("""
import torch_memory_saver as m
t = m.torch_memory_saver
assert not hasattr(t, "hook_mode")         # write-only, as there
try:
    t.hook_mode = "cuda"
except ValueError:
    pass
else:
    raise AssertionError("hook_mode 'cuda' accepted")
t.hook_mode = "torch"
assert t._impl is None
t.pause()                                  # the first use
assert t._impl._hook_mode == "torch"
try:
    t.hook_mode = "preload"
except RuntimeError as e:
    assert "after initialization" in str(e), str(e)
else:
    raise AssertionError("hook_mode set after initialization")
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1"})


def margin_retain():
    ok("""
import torch_memory_saver as m
from gpusleep import _lib
t = m.torch_memory_saver
L = _lib.lib()
try:
    t.memory_margin_bytes
except NotImplementedError:
    pass
else:
    raise AssertionError("memory_margin_bytes read")
t.memory_margin_bytes = 1 << 62            # more than any machine has
with t.region(tag="w"):
    assert not L.gpusleep_malloc(4096, 0, None), "allocated past the margin"
t.memory_margin_bytes = 0
with t.region(tag="w"):
    assert L.gpusleep_malloc(4096, 0, None)
assert t.retain_cpu_backup is True         # TMS_RETAIN_CPU_BACKUP=1
t.retain_cpu_backup = False
assert t.retain_cpu_backup is False
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1", "TMS_RETAIN_CPU_BACKUP": "1"})
    ok("""
import torch_memory_saver as m
assert m.torch_memory_saver.retain_cpu_backup is False     # the default
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1"})


def cpu_backup():
    ok(f"""
import sys
sys.path.insert(0, {FAKE_TORCH!r})
import ctypes, torch
import torch_memory_saver as m
t = m.torch_memory_saver
with t.region(tag="weights", enable_cpu_backup=True):
    w = torch.empty(1 << 16)
with t.region(tag="kv_cache"):
    k = torch.empty(4096)
want = bytes(range(256)) * 256
ctypes.memmove(w.data_ptr(), want, len(want))
assert t.get_cpu_backup(w) is None, "awake: the tensor is current"
t.pause()
copy = t.get_cpu_backup(w)
view = t.get_cpu_backup(w, zero_copy=True)
assert copy.tobytes() == want and view.tobytes() == want
assert copy.data_ptr() != view.data_ptr(), "zero_copy=False shares"
try:
    t.get_cpu_backup(k)
except RuntimeError as e:
    assert "without a backup" in str(e), str(e)
else:
    raise AssertionError("a discarded tag's backup")
try:
    t.get_cpu_backup(torch.empty(4096))       # PyTorch's own memory
except ValueError as e:
    assert "not allocated in a region" in str(e), str(e)
else:
    raise AssertionError("memory of no region")
t.resume()
assert t.get_cpu_backup(w) is None
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1"})


def subprocess_preload():
    ok("""
import os
import torch_memory_saver as m
os.environ["LD_PRELOAD"] = "/lib/x.so"
with m.configure_subprocess():
    first, rest = os.environ["LD_PRELOAD"].split(":", 1)
    assert os.path.basename(first).startswith(
        "torch_memory_saver_hook_mode_preload"), first
    assert os.path.exists(first) and rest == "/lib/x.so"
assert os.environ["LD_PRELOAD"] == "/lib/x.so"
print('ok')
""")


def real_preloaded():
    sys.path.insert(0, os.path.join(HERE, "..", "engines"))
    import pinned
    real = pinned.release("torch-memory-saver").path(SLIME_NAMES[1])
    rc, out, err = run("""
import torch_memory_saver as m
try:
    m.torch_memory_saver.pause()
except RuntimeError as e:
    assert "pip uninstall torch-memory-saver" in str(e), str(e)
else:
    raise AssertionError("the real hook library was driven")
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1", "LD_LIBRARY_PATH": os.pathsep.join([
        FAKECUDART, os.path.join(BUILD, "tests", "host", "fakecuda")])},
        preload=real)
    if "cannot be preloaded" in err or "error while loading" in err:
        raise Skip(f"{real}: does not load here (its CUDA libraries)")
    check(rc == 0 and out.rstrip().endswith("ok"), f"rc {rc}: {out}{err}")


def malloc_async():
    """backend:cudaMallocAsync has no MemPools (PyTorch raises "does not
    yet support createOrIncrefPool" at MemPool()): the drop-in says so
    in its own words, naming the setting to change."""
    ok("""
import torch_memory_saver as m
t = m.torch_memory_saver
try:
    with t.region(tag="weights"):
        pass
except RuntimeError as e:
    s = str(e)
    assert "cudaMallocAsync" in s and "backend:native" in s, s
else:
    raise AssertionError("a region under cudaMallocAsync was entered")
print('ok')
""", env={"GPUSLEEP_TMS_LOCAL": "1", "PYTHONPATH": os.pathsep.join(
        [DIST, PY, FAKE_TORCH]),
        "PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [slime_finds, impl_exists, preload_init_enable,
                                no_module, real_surface, no_stray, any_tag,
                                cannot, hook_mode, margin_retain, cpu_backup,
                                subprocess_preload, real_preloaded,
                                malloc_async]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
