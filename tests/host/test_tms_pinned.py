#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The torch_memory_saver drop-in (user/python/dist-tms over
gpusleep.torch_memory_saver) against the pinned releases
(tests/engines/pins.txt), read with ast, nothing of theirs imported:

- its surface against torch_memory_saver 0.0.10's: every public module,
  function, class, method and property of the real package (its
  testing_utils.py aside: "not to be used by end users"), with the same
  parameters in the same order and the same defaults; properties
  settable where the real ones are;
- every use SGLang 0.5.23, verl 0.9.1 and OpenRLHF 0.11.2 make of
  torch_memory_saver: each file importing it, each attribute read or set
  on the module or on its saver, each call's keyword arguments and
  positional count (SGLang's cuda_graph(**kwargs) followed to its
  callers' keywords, those torch_memory_saver 0.0.10 takes: its NPU
  backend's auto_dispatch_capture is for another build); verl and OpenRLHF reach it only through the
  engines (enable_memory_saver), which the test states by finding no
  import in them;
- slime's current code (THUDM/slime at 624b824a, 2026-08-21, read with
  the search tools; not pinned, cited here by path and line);
- every TMS_* variable the real libraries read: read by gpusleep's too
  (user/tms/hook.c), or used only by what gpusleep refuses.

A drift fails naming the real file:line and what gpusleep lacks.
"""

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, REPO, check  # noqa: E402
import pinned  # noqa: E402

DIST = os.path.join(REPO, "user", "python", "dist-tms")
sys.path[:0] = [DIST, os.path.join(REPO, "user", "python")]
TMS = "torch-memory-saver"
PKG = "torch_memory_saver"
# the real package's modules, as its callers import them
MODULES = ["__init__", "entrypoint", "binary_wrapper", "utils",
           "hooks/base", "hooks/mode_preload", "hooks/mode_torch"]
NOT_PUBLIC = {"testing_utils"}	# "Not to be used by end users"
CALLERS = {"sglang": "sglang", "verl": "verl", "openrlhf": "openrlhf"}

# slime's uses (THUDM/slime, commit 624b824a898a, 2026-08-21): path, line,
# what it does. Its Megatron patch's line is the patch file's.
SLIME = "THUDM/slime@624b824a"
SLIME_USES = [
    ("slime/ray/actor_group.py", 74, "module", "__file__"),
    ("slime/ray/actor_group.py", 77, "library",
     "torch_memory_saver_hook_mode_preload_cu13.abi3.so"),
    ("slime/ray/actor_group.py", 78, "library",
     "torch_memory_saver_hook_mode_preload_cu12.abi3.so"),
    ("slime/ray/actor_group.py", 79, "library",
     "torch_memory_saver_hook_mode_preload.abi3.so"),
    ("slime/ray/actor_group.py", 93, "env", "TMS_INIT_ENABLE"),
    ("slime/ray/actor_group.py", 94, "env", "TMS_INIT_ENABLE_CPU_BACKUP"),
    ("slime/backends/megatron_utils/__init__.py", 16, "read", "_impl"),
    ("slime/backends/megatron_utils/__init__.py", 21, "cdll",
     "tms_get_interesting_region"),
    ("slime/backends/megatron_utils/__init__.py", 22, "cdll",
     "tms_set_interesting_region"),
    ("slime/backends/megatron_utils/actor.py", 220, "call", ("pause", [])),
    ("slime/backends/megatron_utils/actor.py", 229, "call", ("resume", [])),
    ("slime/backends/megatron_utils/actor.py", 638, "call", ("disable", [])),
    ("slime/backends/megatron_utils/update_weight/common.py", 150, "call",
     ("get_cpu_backup", ["zero_copy"])),
    ("docker/patch/latest/megatron.patch", 127, "call",
     ("region", ["tag", "enable_cpu_backup"])),
    ("docker/patch/latest/megatron.patch", 458, "set", "hook_mode"),
]
# TMS_* variables of the real libraries that only disk backup reads,
# which gpusleep refuses (enable_disk_backup, TMS_INIT_ENABLE_DISK_BACKUP)
DISK_ONLY = {"TMS_DISK_BACKUP_DIR", "TMS_DISK_BACKUP_CHUNK_MB"}

TESTS = ["the drop-in's modules, functions, classes: torch_memory_saver's",
         "parameters, order and defaults: torch_memory_saver's",
         "SGLang 0.5.23's uses of torch_memory_saver, all served",
         "verl 0.9.1, OpenRLHF 0.11.2: torch_memory_saver through engines",
         "slime's uses (cited): served",
         "every TMS_* variable the real libraries read"]


def ours(mod):
    name = PKG if mod == "__init__" else PKG + "." + mod.replace("/", ".")
    return importlib.import_module(name)


def real_rel(mod):
    return f"{PKG}/{mod}.py"


def real_tree(mod):
    return pinned.release(TMS).tree(real_rel(mod))


def where(mod, node):
    return f"{pinned.release(TMS)} {real_rel(mod)}:{node.lineno}"


def public_defs(tree):
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and \
                not n.name.startswith("_"):
            yield n


def members(cls):
    """Public methods and properties of a real class, and __init__:
    {name: (node, kind)} kind "method", "static", "property",
    "property+setter"."""
    out = {}
    for n in cls.body:
        if not isinstance(n, ast.FunctionDef):
            continue
        if n.name.startswith("_") and n.name != "__init__":
            continue
        decos = [ast.unparse(d) for d in n.decorator_list]
        if "property" in decos:
            out[n.name] = (n, "property")
        elif any(d.endswith(".setter") for d in decos):
            out[n.name] = (out[n.name][0], "property+setter")
        elif "staticmethod" in decos:
            out[n.name] = (n, "static")
        else:
            out[n.name] = (n, "method")
    return out


def module_consts(tree):
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                isinstance(n.targets[0], ast.Name):
            try:
                out[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:
                pass
    return out


def real_params(fn, consts, skip_self):
    """[(name, kind, default)] of a real def; defaults evaluated (a
    module constant resolved), None when there is none."""
    a = fn.args
    pos = a.posonlyargs + a.args
    d = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    out = []

    def value(node):
        if node is None:
            return inspect.Parameter.empty
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        return ast.literal_eval(node)
    for p, dv in zip(pos, d):
        out.append((p.arg, "pos", value(dv)))
    if a.vararg:
        out.append((a.vararg.arg, "*", inspect.Parameter.empty))
    for p, dv in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "kw", value(dv)))
    if a.kwarg:
        out.append((a.kwarg.arg, "**", inspect.Parameter.empty))
    return out[1:] if skip_self and out and out[0][0] in ("self", "cls") \
        else out


def our_params(fn):
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "pos",
             inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
             inspect.Parameter.VAR_POSITIONAL: "*",
             inspect.Parameter.KEYWORD_ONLY: "kw",
             inspect.Parameter.VAR_KEYWORD: "**"}
    return [(p.name, kinds[p.kind], p.default)
            for p in inspect.signature(fn).parameters.values()]


def surface():
    real = pinned.release(TMS)
    mods = sorted(os.path.relpath(p, PKG)[:-3] for p in
                  pinned.py_files(TMS, PKG))
    for m in mods:
        if m.split("/")[-1] in NOT_PUBLIC or m.endswith("/__init__") and \
                m != "__init__":
            continue
        check(m in MODULES, f"{real} {real_rel(m)}: a module gpusleep's "
              "drop-in does not have (add it to user/python/dist-tms)")
    for m in MODULES:
        mod = ours(m)
        tree = real_tree(m)
        for n in public_defs(tree):
            check(hasattr(mod, n.name),
                  f"{where(m, n)}: {n.name} missing from "
                  f"{mod.__name__}")
            if isinstance(n, ast.ClassDef):
                cls = getattr(mod, n.name)
                check(inspect.isclass(cls), f"{where(m, n)}: {n.name} is "
                      f"a class; gpusleep's is {cls!r}")
                for name, (fn, kind) in members(n).items():
                    st = inspect.getattr_static(cls, name, None)
                    check(st is not None, f"{where(m, fn)}: "
                          f"{n.name}.{name} missing from {mod.__name__}")
                    if kind.startswith("property"):
                        check(isinstance(st, property),
                              f"{where(m, fn)}: {n.name}.{name} is a "
                              f"property; gpusleep's is {st!r}")
                        check((st.fset is not None) ==
                              (kind == "property+setter"),
                              f"{where(m, fn)}: {n.name}.{name}: setter "
                              f"{kind == 'property+setter'} there, "
                              f"{st.fset is not None} in gpusleep's")
                    elif kind == "static":
                        check(isinstance(st, staticmethod),
                              f"{where(m, fn)}: {n.name}.{name} is a "
                              "staticmethod")
        # the module-level names its __init__ binds (the singleton)
        if m == "__init__":
            for n in tree.body:
                for t in getattr(n, "targets", []) + [
                        a for a in getattr(n, "names", [])]:
                    name = getattr(t, "id", None) or \
                        getattr(t, "asname", None) or getattr(t, "name", "")
                    if name and not name.startswith("_"):
                        check(hasattr(mod, name.split(".")[-1]),
                              f"{where(m, n)}: {name} missing from "
                              f"{PKG}")


def parameters():
    n_checked = 0
    for m in MODULES:
        mod = ours(m)
        tree = real_tree(m)
        consts = module_consts(tree)
        for n in public_defs(tree):
            if isinstance(n, ast.FunctionDef):
                pairs = [(n, getattr(mod, n.name), False, n.name)]
            else:
                cls = getattr(mod, n.name)
                pairs = []
                for name, (fn, kind) in members(n).items():
                    if kind.startswith("property"):
                        continue
                    ourfn = inspect.getattr_static(cls, name)
                    ourfn = getattr(ourfn, "__func__", ourfn)
                    pairs.append((fn, ourfn, kind != "static",
                                  f"{n.name}.{name}"))
            for fn, ourfn, is_method, qual in pairs:
                want = real_params(fn, consts, is_method)
                have = our_params(ourfn)
                if is_method and have and have[0][0] in ("self", "cls"):
                    have = have[1:]
                check([(a, k) for a, k, _ in want] ==
                      [(a, k) for a, k, _ in have],
                      f"{where(m, fn)}: {qual}"
                      f"({', '.join(a for a, _, _ in want)}); gpusleep's "
                      f"({', '.join(a for a, _, _ in have)})")
                for (a, _, dw), (_, _, dh) in zip(want, have):
                    check(dw == dh, f"{where(m, fn)}: {qual}: {a}="
                          f"{dw!r} there, {dh!r} in gpusleep's")
                n_checked += 1
    check(n_checked >= 20, f"only {n_checked} functions compared")


# ------------------------------------------------------------ callers
def bindings(tree):
    """Names bound to the torch_memory_saver module and to its saver in a
    file: ({module names}, {saver names})."""
    mods, savers = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == PKG:
                    mods.add(a.asname or PKG)
        elif isinstance(n, ast.ImportFrom) and n.module == PKG:
            for a in n.names:
                if a.name in ("torch_memory_saver", "memory_saver"):
                    savers.add(a.asname or a.name)
    for n in ast.walk(tree):	# x = torch_memory_saver.torch_memory_saver
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) \
                and isinstance(n.value.value, ast.Name) and \
                n.value.value.id in mods and \
                n.value.attr == "torch_memory_saver":
            for t in n.targets:
                if isinstance(t, ast.Name):
                    savers.add(t.id)
    return mods, savers


def receiver(node, mods, savers):
    """'module', 'saver' or None for the object of an attribute."""
    if isinstance(node, ast.Name):
        return "module" if node.id in mods else \
            "saver" if node.id in savers else None
    if isinstance(node, ast.Attribute) and node.attr == "torch_memory_saver" \
            and isinstance(node.value, ast.Name) and node.value.id in mods:
        return "saver"
    return None


def uses(rel, tree):
    """[(line, on, attr, how, keywords, npos)]: how is read, set or call."""
    mods, savers = bindings(tree)
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Attribute):
            continue
        on = receiver(n.value, mods, savers)
        if on is None or (on == "module" and n.attr == "torch_memory_saver"):
            continue
        parent = getattr(n, "parent", None)
        if isinstance(n.ctx, ast.Store):
            out.append((n.lineno, on, n.attr, "set", [], 0))
        elif isinstance(parent, ast.Call) and parent.func is n:
            out.append((n.lineno, on, n.attr, "call",
                        [k.arg for k in parent.keywords],
                        len(parent.args)))
        else:
            out.append((n.lineno, on, n.attr, "read", [], 0))
    return out


def check_use(who, line, on, attr, how, kws, npos):
    import torch_memory_saver as m
    cls = m.TorchMemorySaver
    obj = m if on == "module" else cls
    at = f"{who}:{line}"
    if on == "saver" and attr == "_impl":
        check("_impl" in cls.__slots__, f"{at}: reads _impl")
        return
    st = inspect.getattr_static(obj, attr, None)
    if st is None and on == "module":
        st = getattr(m, attr, None)
    check(st is not None, f"{at}: {on} .{attr}: gpusleep's drop-in has "
          "no such attribute")
    if how == "set":
        check(isinstance(st, property) and st.fset is not None,
              f"{at}: sets .{attr}: not settable in gpusleep's")
    if how == "call":
        fn = getattr(st, "__func__", st)
        if isinstance(fn, property):
            return
        params = our_params(fn)
        if on == "saver" and params and params[0][0] == "self":
            params = params[1:]
        names = [p for p, k, _ in params if k in ("pos", "kw")]
        for k in kws:
            check(k is None or k in names or
                  any(kd == "**" for _, kd, _ in params),
                  f"{at}: .{attr}({k}=...): gpusleep's {attr} has no "
                  f"parameter {k} ({', '.join(names)})")
        npos_ok = sum(1 for _, k, _ in params if k == "pos")
        check(npos <= npos_ok or any(k == "*" for _, k, _ in params),
              f"{at}: .{attr}() with {npos} positional arguments; "
              f"gpusleep's takes {npos_ok}")


def importing_files(name):
    out = []
    for rel in pinned.py_files(name):
        text = pinned.release(name).text(rel)
        if "torch_memory_saver" not in text:
            continue
        tree = pinned.release(name).tree(rel)
        mods, savers = bindings(tree)
        if mods or savers:
            out.append((rel, tree))
    return out


def graph_kwargs(name):
    """SGLang's adapter forwards cuda_graph(**kwargs): the keywords its
    callers give, directly or through functools.partial and the call of
    what the partial is bound to, in the same function."""
    out = []
    for rel in pinned.py_files(name):
        text = pinned.release(name).text(rel)
        if "memory_saver_adapter" not in text or "cuda_graph" not in text:
            continue
        tree = pinned.release(name).tree(rel)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            bound = {}
            for n in ast.walk(fn):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                target = None
                kws = [k.arg for k in n.keywords]
                if isinstance(f, ast.Attribute) and f.attr == "cuda_graph" \
                        and "memory_saver" in ast.unparse(f.value):
                    target = n
                elif ast.unparse(f).split(".")[-1] == "partial" and n.args \
                        and isinstance(n.args[0], ast.Attribute) and \
                        n.args[0].attr == "cuda_graph" and \
                        "memory_saver" in ast.unparse(n.args[0].value):
                    target = n
                    parent = getattr(n, "parent", None)
                    if isinstance(parent, ast.Assign):
                        for t in parent.targets:
                            bound[ast.unparse(t)] = kws
                if target is not None:
                    out.append((f"{pinned.release(name)} {rel}:{n.lineno}",
                                kws, len(n.args) - (1 if target is not n or
                                                    "partial" in
                                                    ast.unparse(f) else 0)))
            for n in ast.walk(fn):
                if isinstance(n, ast.Call) and ast.unparse(n.func) in bound:
                    out.append((f"{pinned.release(name)} {rel}:{n.lineno}",
                                bound[ast.unparse(n.func)] +
                                [k.arg for k in n.keywords], len(n.args)))
    return out


def sglang():
    files = importing_files("sglang")
    check(files, f"{pinned.release('sglang')}: no file imports "
          "torch_memory_saver (it moved: follow it)")
    n = 0
    for rel, tree in files:
        for line, on, attr, how, kws, npos in uses(rel, tree):
            check_use(f"{pinned.release('sglang')} {rel}", line, on, attr,
                      how, kws, npos)
            n += 1
    check(n >= 8, f"only {n} uses found: the reading drifted")
    import torch_memory_saver as m
    g = graph_kwargs("sglang")
    check(g, "no caller of the adapter's cuda_graph(**kwargs) found")
    params = [p for p, _, _ in our_params(m.TorchMemorySaver.cuda_graph)]
    # what torch_memory_saver 0.0.10 itself takes: a keyword it refuses
    # too is for another build of it (SGLang's NPU backend passes
    # auto_dispatch_capture, for the NPU fork), not the drop-in's to serve
    tms = pinned.find(TMS, real_rel("entrypoint"),
                      "TorchMemorySaver.cuda_graph")
    real = [p for p, _ in pinned.params(tms)]
    served = 0
    for at, kws, _ in g:
        for k in kws:
            if k not in real:
                continue
            served += 1
            check(k in params, f"{at}: cuda_graph({k}=...) reaches "
                  f"gpusleep's cuda_graph, which has no {k}")
    check(served >= 4, f"only {served} keywords of cuda_graph's callers")


def trainers():
    for name in ("verl", "openrlhf"):
        files = importing_files(name)
        check(not files, f"{pinned.release(name)} now imports "
              f"torch_memory_saver in {[f for f, _ in files]}: add its "
              "uses to this test")


def slime():
    import torch_memory_saver as m
    for path, line, kind, what in SLIME_USES:
        at = f"{SLIME} {path}:{line}"
        if kind == "module":
            check(hasattr(m, what), f"{at}: torch_memory_saver.{what}")
        elif kind == "library":
            lib = os.path.join(REPO, "build", "lib", what)
            check(os.path.exists(lib), f"{at}: {lib} not built")
            # the drop-in's wheel ships it at its top (site-packages)
            import glob
            import zipfile
            whl = glob.glob(os.path.join(REPO, "build", "python", "dist",
                                         "gpusleep_torch_memory_saver-*"
                                         ".whl"))
            if whl:
                check(what in zipfile.ZipFile(whl[0]).namelist(),
                      f"{at}: {whl[0]} does not ship {what}")
            else:
                dist = os.path.join(REPO, "user", "python", "python.mk")
                with open(dist) as f:
                    check("PY_TMS_LIBS" in f.read(), f"{at}: the wheel "
                          "does not ship the hook libraries")
        elif kind == "env":
            with open(os.path.join(REPO, "user", "tms", "hook.c")) as f:
                check(f'"{what}"' in f.read(), f"{at}: {what} not read by "
                      "user/tms/hook.c")
        elif kind == "read":
            check(what in m.TorchMemorySaver.__slots__, f"{at}: .{what}")
        elif kind == "cdll":
            from gpusleep.torch_memory_saver import _Impl
            cdll = _Impl("preload")._binary_wrapper.cdll
            check(hasattr(cdll, what), f"{at}: _impl._binary_wrapper.cdll"
                  f".{what}")
        elif kind == "call":
            fn, kws = what
            check_use(f"{SLIME} {path}", line, "saver", fn, "call", kws, 0)
        elif kind == "set":
            check_use(f"{SLIME} {path}", line, "saver", what, "set", [], 0)


def variables():
    real = pinned.release(TMS)
    with open(os.path.join(REPO, "user", "tms", "hook.c")) as f:
        ours_read = set(re.findall(r'"(TMS_[A-Z0-9_]+)"', f.read()))
    for n in ("torch_memory_saver_hook_mode_preload_cu12.abi3.so",
              "torch_memory_saver_hook_mode_torch_cu12.abi3.so"):
        out = subprocess.run(["strings", "-n", "6", real.path(n)],
                             check=True, capture_output=True,
                             text=True).stdout
        theirs = set(re.findall(r"^(TMS_[A-Z0-9_]+)$", out, re.M))
        check(theirs, f"{real} {n}: no TMS_* variable found")
        missing = theirs - ours_read - DISK_ONLY
        check(not missing, f"{real} {n} reads {sorted(missing)}; "
              "user/tms/hook.c does not")


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [surface, parameters, sglang, trainers,
                                slime, variables]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
