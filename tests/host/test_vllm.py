#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""vLLM's integration (docs/integrations/vllm.md: gpusleep.vllm and the
gpusleep-vllm plugin) against the pinned vLLM, vllm 0.33.0
(tests/engines/pins.txt), read from its sources, and run over its
stand-in (tests/vm-py/standin/vllm, checked against it by
test_standins.py) where no module is needed:

- GpuSleepAllocator has CuMemAllocator's whole surface (and the
  MemAllocator protocol's), names, parameters and kinds as vLLM's;
- every call vLLM makes on its sleep-mode allocator resolves on it;
- the plugin's sleep-mode backend implements vLLM's SleepModeBackend;
  its levels are vLLM's cumem levels; the tags are vLLM's pool tags;
- register() registers the backend where vLLM has the factory and
  leaves CuMemAllocator alone; without the factory it replaces
  CuMemAllocator, for sleep-mode workers only;
- only sleep mode with the gpusleep backend takes a worker over (not
  --enable-cumem-allocator alone, not the cumem backend): such a
  worker's pools are gpusleep's (here: ModuleNotLoaded, no module), the
  others vLLM's;
- without /dev/gpusleep: ModuleNotLoaded with its hint;
- domain names unique per (data-parallel index, rank)."""

import ast
import inspect
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, Skip, check, raises, REPO  # noqa: E402
import pinned  # noqa: E402

PY = os.path.join(REPO, "user", "python")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
FAKE_TORCH = os.path.join(REPO, "tests", "host", "fake_torch")
BACKEND = os.path.join(PY, "dist-vllm", "gpusleep_vllm", "backend.py")
CUMEM = "vllm/device_allocator/cumem.py"
SMB = "vllm/device_allocator/sleep_mode_backend.py"

TESTS = ["GpuSleepAllocator has vllm 0.33.0's CuMemAllocator surface",
         "every call vLLM makes on its allocator resolves on it",
         "the gpusleep backend implements vLLM's SleepModeBackend",
         "the backend's levels are vLLM's cumem levels; vLLM's pool tags",
         "register(): the backend in vLLM's factory, CuMemAllocator vLLM's",
         "a vLLM without the factory: CuMemAllocator for sleep mode only",
         "taken over only with sleep mode and the gpusleep backend",
         "a worker of each config: gpusleep's pools or vLLM's",
         "no /dev/gpusleep: ModuleNotLoaded with its hint",
         "domain names unique per (data-parallel index, rank)"]


def kinds(node):
    return {ast.unparse(d).split(".")[-1] for d in node.decorator_list} & \
        {"staticmethod", "classmethod", "property", "contextmanager",
         "abstractmethod"}


def ours():
    from gpusleep.vllm import GpuSleepAllocator
    src = inspect.getsource(GpuSleepAllocator)
    tree = ast.parse("class X:\n" + "\n".join(
        "    " + ln for ln in src.splitlines()[1:]))
    return GpuSleepAllocator, {n.name: n for n in tree.body[0].body
                               if isinstance(n, ast.FunctionDef)}


def surface():
    cls, defs = ours()
    real = pinned.find("vllm", CUMEM, "CuMemAllocator")
    bad = []
    for n in real.body:
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("_") \
                or isinstance(n, ast.FunctionDef) and n.name == "__init__":
            if n.name == "__init__":
                continue
            mine = defs.get(n.name)
            where = f"{real.where.split(':')[0]}:{n.lineno}"
            if mine is None:
                bad.append(f"no {n.name} ({where})")
                continue
            if pinned.params(mine) != pinned.params(n):
                bad.append(f"{n.name}{pinned.params(mine)}, {where}: "
                           f"{pinned.params(n)}")
            if kinds(mine) != kinds(n):
                bad.append(f"{n.name} {sorted(kinds(mine))}, {where}: "
                           f"{sorted(kinds(n))}")
        elif isinstance(n, (ast.AnnAssign, ast.Assign)):
            t = n.target if isinstance(n, ast.AnnAssign) else n.targets[0]
            if not hasattr(cls, t.id):
                bad.append(f"no {t.id} ({CUMEM}:{n.lineno})")
    proto = pinned.find("vllm", "vllm/device_allocator/__init__.py",
                        "MemAllocator")
    for n in proto.body:
        if isinstance(n, ast.FunctionDef) and (
                n.name not in defs or
                pinned.params(defs[n.name]) != pinned.params(n)):
            bad.append(f"MemAllocator.{n.name}{pinned.params(n)} "
                       f"({proto.where})")
    check(not bad, "\n".join(bad))


CALLERS = ("vllm/v1/worker/gpu_worker.py", SMB,
           "vllm/v1/worker/lora_model_runner_mixin.py",
           "vllm/compilation/cudagraph_pool.py")
RECEIVERS = ("allocator", "get_mem_allocator_instance()",
             "CuMemAllocator.instance", "CuMemAllocator.get_instance()",
             "instance")


def calls():
    cls, defs = ours()
    bad, n = [], 0
    sig = {k: inspect.signature(getattr(cls, k)) for k in defs
           if callable(getattr(cls, k))}
    for rel in CALLERS:
        for node in ast.walk(pinned.release("vllm").tree(rel)):
            if not (isinstance(node, ast.Call) and
                    isinstance(node.func, ast.Attribute)):
                continue
            recv = ast.unparse(node.func.value)
            if recv not in RECEIVERS:
                continue
            n += 1
            attr = node.func.attr
            where = f"vllm {pinned.release('vllm').version} {rel}:" \
                    f"{node.lineno}"
            if attr not in sig:
                bad.append(f"{where}: {recv}.{attr}(): GpuSleepAllocator "
                           "has none")
                continue
            try:
                args = [None] * len(node.args)
                kw = {k.arg: None for k in node.keywords if k.arg}
                sig[attr].bind(None, *args, **kw) if not isinstance(
                    inspect.getattr_static(cls, attr), staticmethod) else \
                    sig[attr].bind(*args, **kw)
            except TypeError as e:
                bad.append(f"{where}: {ast.unparse(node)}: {e}")
    check(n >= 8, f"only {n} allocator calls found in {CALLERS}")
    check(not bad, "\n".join(bad))


def backend():
    check(os.path.exists(BACKEND), f"no {os.path.relpath(BACKEND, REPO)}")
    with open(BACKEND) as f:
        tree = ast.parse(f.read())
    imp = [n for n in tree.body if isinstance(n, ast.ImportFrom) and
           n.module == SMB[:-3].replace("/", ".")]
    check(imp and "SleepModeBackend" in [a.name for a in imp[0].names],
          "backend.py does not import vLLM's SleepModeBackend")
    cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and
           n.name == "GpuSleepBackend"]
    check(cls, "no class GpuSleepBackend")
    cls = cls[0]
    check("SleepModeBackend" in [ast.unparse(b) for b in cls.bases],
          "GpuSleepBackend is not a SleepModeBackend")
    mine = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    real = pinned.find("vllm", SMB, "SleepModeBackend")
    bad = []
    for n in real.body:
        if not isinstance(n, ast.FunctionDef):
            continue
        if "abstractmethod" in kinds(n) and n.name not in mine:
            bad.append(f"abstract {n.name} not implemented "
                       f"({SMB}:{n.lineno})")
        if n.name in mine and (pinned.params(mine[n.name]) !=
                               pinned.params(n) or
                               (kinds(mine[n.name]) - {"abstractmethod"}) !=
                               (kinds(n) - {"abstractmethod"})):
            bad.append(f"{n.name}{pinned.params(mine[n.name])}, {SMB}:"
                       f"{n.lineno}: {pinned.params(n)}")
    if "discard" not in mine:
        bad.append("no discard (vLLM's default raises)")
    check(not bad, "\n".join(bad))


def levels():
    import gpusleep.vllm as gv
    check(hasattr(gv, "offload_tags"), "gpusleep.vllm has no offload_tags")
    fn = pinned.find("vllm", SMB, "CuMemBackend.suspend")
    tuples = [n for n in ast.walk(fn) if isinstance(n, ast.Tuple)]
    base = [ast.literal_eval(t) for t in tuples
            if all(isinstance(e, ast.Constant) for e in t.elts)]
    extra = [[e.value for e in t.elts if isinstance(e, ast.Constant)]
             for t in tuples if any(isinstance(e, ast.Starred)
                                    for e in t.elts)]
    check(len(base) == 1 and len(extra) == 1, f"{fn.where}: {ast.unparse(fn)}")
    check(gv.offload_tags(2) == base[0] and
          gv.offload_tags(1) == tuple(extra[0]) + base[0],
          f"offload_tags {gv.offload_tags(1)}, {gv.offload_tags(2)}; "
          f"{fn.where}: {base}, {extra}")
    # the pool tags vLLM uses, and the deferrable ones
    tags = set()
    for rel in pinned.py_files("vllm", "vllm"):
        for ln in pinned.release("vllm").text(rel).splitlines():
            for kw in ("_maybe_get_memory_pool_context(tag=",
                       "use_memory_pool(tag=",
                       '_maybe_get_memory_pool_context("'):
                if kw in ln:
                    rest = ln.split(kw, 1)[1].lstrip('"')
                    t = rest.split('"')[0] if rest[:1] != "'" else \
                        rest[1:].split("'")[0]
                    if t.isidentifier():
                        tags.add(t)
    check(pinned.release("vllm").grep(CUMEM, 'self.current_tag = "cudagraph"'),
          f"{CUMEM}: no cudagraph tag")
    tags.add("cudagraph")
    check(tags >= {"weights", "kv_cache", "runtime", "workspace"},
          f"vLLM's pool tags found: {tags}")
    check(set(gv.VLLM_TAGS) == tags,
          f"VLLM_TAGS {gv.VLLM_TAGS}, vLLM's pools {sorted(tags)}")
    d = pinned.find("vllm", "vllm/device_allocator/__init__.py",
                    "DEFERRABLE_TAGS")
    check(gv.DEFERRABLE_TAGS == ast.literal_eval(d.value),
          f"DEFERRABLE_TAGS {gv.DEFERRABLE_TAGS}, {d.where}")


def run(code, hide_factory=False, env=None):
    pre = ""
    if hide_factory:
        pre = ("import sys, importlib.abc\n"
               "class _Hide(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, n, p=None, t=None):\n"
               "        if n == 'vllm.device_allocator.sleep_mode_backend':\n"
               "            raise ImportError(n)\n"
               "sys.meta_path.insert(0, _Hide())\n")
    e = {k: v for k, v in os.environ.items() if k != "GPUSLEEP_LIB"}
    e.update(PYTHONDONTWRITEBYTECODE="1", GPUSLEEP_BACKEND="host",
             GPUSLEEP_LIB=os.path.join(REPO, "build", "lib",
                                       "libgpusleep.so.0"),
             PYTHONPATH=os.pathsep.join([FAKE_TORCH, STANDIN, PY,
                                         os.path.join(PY, "dist-vllm")]))
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", pre + code], env=e,
                       capture_output=True, text=True, timeout=120, cwd="/")
    check(r.returncode == 0 and r.stdout.strip().endswith("ok"),
          f"{code}\n-> {r.stdout}{r.stderr}")
    return r.stdout


def register_factory():
    run("import gpusleep_vllm\n"
        "gpusleep_vllm.register()\n"
        "from vllm.device_allocator.sleep_mode_backend import "
        "SleepModeBackendFactory as F, SleepModeBackend\n"
        "from vllm.device_allocator.cumem import CuMemAllocator\n"
        "assert 'gpusleep' in F._registry, F._registry\n"
        "cls = F.get_backend_class('gpusleep')\n"
        "assert issubclass(cls, SleepModeBackend), cls\n"
        "assert cls.__name__ == 'GpuSleepBackend', cls\n"
        "assert CuMemAllocator.__module__ == 'vllm.device_allocator.cumem'\n"
        "gpusleep_vllm.register()   # loaded twice: no error\n"
        "print('ok')\n")


def no_factory():
    run("import gpusleep_vllm, types\n"
        "gpusleep_vllm.register()\n"
        "import vllm.device_allocator.cumem as cumem\n"
        "from vllm.config import (VllmConfig, ModelConfig, "
        "set_current_vllm_config)\n"
        "import gpusleep.vllm as gv\n"
        "assert cumem.CuMemAllocator.__module__ == 'gpusleep.vllm'\n"
        "off = VllmConfig(model_config=ModelConfig("
        "enable_cumem_allocator=True))\n"
        "with set_current_vllm_config(off):\n"
        "    a = cumem.CuMemAllocator.get_instance()\n"
        "assert not isinstance(a, gv.GpuSleepAllocator), a\n"
        "on = VllmConfig(model_config=ModelConfig(enable_sleep_mode=True))\n"
        "with set_current_vllm_config(on):\n"
        "    a = cumem.CuMemAllocator.get_instance()\n"
        "assert isinstance(a, gv.GpuSleepAllocator), a\n"
        "print('ok')\n", hide_factory=True)


def take_over():
    import gpusleep.vllm as gv
    check(hasattr(gv, "selected"), "gpusleep.vllm has no selected()")

    def cfg(**mc):
        return types.SimpleNamespace(model_config=types.SimpleNamespace(
            **mc))
    for factory in (True, False):
        check(not gv.selected(cfg(enable_sleep_mode=False,
                                  enable_cumem_allocator=True,
                                  sleep_mode_backend="gpusleep"), factory),
              "--enable-cumem-allocator without sleep mode taken over")
        check(gv.selected(cfg(enable_sleep_mode=True,
                              sleep_mode_backend="gpusleep"), factory),
              "not taken over")
    check(not gv.selected(cfg(enable_sleep_mode=True,
                              sleep_mode_backend="cumem"), True),
          "sleep mode with vLLM's cumem backend taken over")
    check(gv.selected(cfg(enable_sleep_mode=True), False),
          "a vLLM without the factory: sleep mode decides")


def workers():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here: the VM tests run workers")
    # the plugin called as vLLM's loader would (it is not installed here)
    code = ("import vllm, gpusleep, gpusleep_vllm\n"
            "import sys\n"
            "gpusleep_vllm.register()\n"
            "kw = eval(sys.argv[1])\n"
            "try:\n"
            "    vllm.LLM('m', **kw)\n"
            "    print('made')\n"
            "except gpusleep.ModuleNotLoaded:\n"
            "    print('gpusleep')\n"
            "except RuntimeError as e:\n"
            "    print('vllm' if \"vLLM's own CuMemAllocator\" in str(e) "
            "else e)\n"
            "print('ok')\n")
    for kw, want in (
            (dict(enable_sleep_mode=True, sleep_mode_backend="gpusleep"),
             "gpusleep"),
            (dict(enable_sleep_mode=True), "vllm"),
            (dict(enable_cumem_allocator=True), "vllm"),
            (dict(), "made")):
        e = dict(os.environ)
        out = subprocess.run(
            [sys.executable, "-c", code, repr(kw)],
            env=dict(e, PYTHONDONTWRITEBYTECODE="1", GPUSLEEP_BACKEND="host",
                     PYTHONPATH=os.pathsep.join(
                         [FAKE_TORCH, STANDIN, PY,
                          os.path.join(PY, "dist-vllm")])),
            capture_output=True, text=True, timeout=120, cwd="/")
        check(out.returncode == 0, out.stdout + out.stderr)
        got = out.stdout.split()[0] if out.stdout.split() else out.stderr
        if got != want:
            check(False, f"LLM({kw}): {got}, want {want}:\n{out.stdout}"
                  f"{out.stderr}")


def no_module():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here")
    import gpusleep
    from gpusleep.vllm import GpuSleepAllocator
    e = raises(gpusleep.ModuleNotLoaded,
               lambda: GpuSleepAllocator().use_memory_pool("weights")
               .__enter__())
    check("modprobe gpusleep" in str(e), str(e))


def names():
    import gpusleep.vllm as gv

    def cfg(dp, index, rank):
        return types.SimpleNamespace(parallel_config=types.SimpleNamespace(
            data_parallel_size=dp, data_parallel_index=index, rank=rank))
    try:
        a, b = gv.domain_name(cfg(2, 0, 0)), gv.domain_name(cfg(2, 1, 0))
    except TypeError as e:
        check(False, f"domain_name takes no config: {e}")
    check(a != b, f"DP replicas 0 and 1 of rank 0: {a}, {b}")
    check(gv.domain_name(cfg(1, 0, 3)) == "vllm-tp3",
          gv.domain_name(cfg(1, 0, 3)))


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [surface, calls, backend, levels,
                                register_factory, no_factory, take_over,
                                workers, no_module, names]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
