#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""SGLang's integration (docs/integrations/sglang.md, gpusleep.sglang)
against the pinned SGLang, sglang 0.5.23 (tests/engines/pins.txt), read
from its sources (no torch, no GPU):

- the guide's scheduler patch is user/python/examples/
  sglang-0.5.23-scheduler.patch, applies to the pinned
  sglang/srt/managers/scheduler.py (patch --dry-run) and the patched
  file compiles;
- what the patch adds reads only what the pinned Scheduler has (it has
  no tp_rank: its ranks are SGLang's get_parallel());
- the patched get_new_batch_prefill returns what the real one is
  annotated to (NextBatchPlan; callers read .batch_to_run);
- gpusleep.sglang's imports from SGLang, the Scheduler methods and fields
  it calls, and the requests it makes exist there with those parameters;
- the hook's tags are SGLang's, in SGLang's release order
  (GPU_MEMORY_ALL_TYPES);
- domain names are unique per (dp rank, tp rank), the ranks read from
  SGLang's ParallelContext (the stand-in runtime_context here);
- without /dev/gpusleep the hook raises gpusleep's ModuleNotLoaded with
  its hint."""

import ast
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm-py"))
sys.path.insert(0, os.path.join(HERE, "..", "engines"))
from gstest import Tap, Skip, check, raises, REPO  # noqa: E402
import pinned  # noqa: E402

GUIDE = os.path.join(REPO, "docs", "integrations", "sglang.md")
PATCH = os.path.join(REPO, "user", "python", "examples",
                     "sglang-0.5.23-scheduler.patch")
HOOK = os.path.join(REPO, "user", "python", "gpusleep", "sglang.py")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
SCHED = "sglang/srt/managers/scheduler.py"

TESTS = ["the guide's patch is the patch file, for the pinned sglang",
         "the patch applies to the pinned scheduler.py, which compiles",
         "what the patch adds reads only what the pinned Scheduler has",
         "patched get_new_batch_prefill returns its annotated NextBatchPlan",
         "the hook's SGLang imports, calls and requests exist there",
         "the hook's tags are SGLang's, in its release order",
         "domain names unique per (dp rank, tp rank), ranks SGLang's",
         "no /dev/gpusleep: ModuleNotLoaded with its hint"]


def guide():
    with open(GUIDE) as f:
        return f.read()


def added_code():
    """The lines the guide adds to the scheduler: its diff's + lines, or
    (a guide without one) its python blocks."""
    text = guide()
    diffs = re.findall(r"```diff\n(.*?)```", text, re.S)
    if diffs:
        return [ln[1:] for d in diffs for ln in d.splitlines()
                if ln.startswith("+") and not ln.startswith("+++")]
    return [ln for b in re.findall(r"```python\n(.*?)```", text, re.S)
            for ln in b.splitlines()]


def patch_file():
    sgl = pinned.release("sglang")
    text = guide()
    check(os.path.exists(PATCH), f"no {os.path.relpath(PATCH, REPO)}")
    with open(PATCH) as f:
        want = f.read()
    diffs = re.findall(r"```diff\n(.*?)```", text, re.S)
    check(diffs == [want], "the guide's diff block is not the patch file "
          f"{os.path.relpath(PATCH, REPO)}")
    check(f"sglang {sgl.version}" in text.lower(),
          f"the guide does not name sglang {sgl.version}")


def patched(tmp):
    """The pinned scheduler.py copied under tmp, the patch applied."""
    sgl = pinned.release("sglang")
    dst = os.path.join(tmp, SCHED)
    os.makedirs(os.path.dirname(dst))
    shutil.copy(sgl.path(SCHED), dst)
    check(os.path.exists(PATCH), f"no {os.path.relpath(PATCH, REPO)}")
    for dry in (["--dry-run"], []):
        r = subprocess.run(["patch", "-p1", "--batch", "--forward", "-i",
                            PATCH] + dry, cwd=tmp, capture_output=True,
                           text=True)
        check(r.returncode == 0 and "FAILED" not in r.stdout and
              "fuzz" not in r.stdout.lower(),
              f"patch {' '.join(dry)} against {sgl} {SCHED}:\n"
              f"{r.stdout}{r.stderr}")
    return dst


def applies():
    tmp = tempfile.mkdtemp()
    try:
        dst = patched(tmp)
        py_compile.compile(dst, cfile=os.path.join(tmp, "x.pyc"),
                           doraise=True)
    finally:
        shutil.rmtree(tmp)


def scheduler_has(name):
    """Whether the pinned Scheduler sets or defines self.name."""
    sgl = pinned.release("sglang")
    if pinned.has("sglang", SCHED, f"Scheduler.{name}"):
        return True
    return bool(re.search(rf"\bself\.{re.escape(name)}\s*(:[^=]*)?=[^=]",
                          sgl.text(SCHED)))


def reads():
    code = added_code()
    check(code, "the guide adds no code to the scheduler")
    names = sorted({m for ln in code for m in
                    re.findall(r"\bself\.([A-Za-z_]\w*)", ln)} - {"gpusleep"})
    missing = [n for n in names if not scheduler_has(n)]
    check(not missing, f"the guide's scheduler code reads self."
          f"{', self.'.join(missing)}, which {pinned.release('sglang')}'s "
          f"Scheduler ({SCHED}) never sets")


def returns():
    text = guide()
    if not re.findall(r"```diff\n(.*?)```", text, re.S):
        # the guide's own early return
        blocks = re.findall(r"```python\n(.*?)```", text, re.S)
        rets = [ln.strip() for b in blocks for ln in b.splitlines()
                if ln.strip().startswith("return")]
        real = pinned.find("sglang", SCHED, "Scheduler.get_new_batch_prefill")
        want = ast.unparse(real.returns)
        bad = [r for r in rets if not r.startswith(f"return {want}(")]
        check(not bad, f"the guide's get_new_batch_prefill returns {bad}; "
              f"{real.where} returns {want}")
        return
    tmp = tempfile.mkdtemp()
    try:
        dst = patched(tmp)
        with open(dst) as f:
            tree = ast.parse(f.read())
    finally:
        shutil.rmtree(tmp)
    cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and
           n.name == "Scheduler"][0]
    fn = [n for n in cls.body if isinstance(n, ast.FunctionDef) and
          n.name == "get_new_batch_prefill"][0]
    want = ast.unparse(fn.returns)
    check(want == "NextBatchPlan", f"annotated {want}")
    bad = [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Return)
           and not (isinstance(n.value, ast.Call) and
                    ast.unparse(n.value.func) == want)]
    check(not bad, f"patched get_new_batch_prefill: {bad}")


def hook_tree():
    with open(HOOK) as f:
        return ast.parse(f.read())


def surface():
    sgl = pinned.release("sglang")
    bad = []
    # every name imported from sglang exists in its module
    for n in ast.walk(hook_tree()):
        if isinstance(n, ast.ImportFrom) and n.module and \
                n.module.startswith("sglang"):
            rel = n.module.replace(".", "/") + ".py"
            for a in n.names:
                if rel == "sglang/srt/managers/__init__.py" or not \
                        os.path.exists(sgl.path(rel)):
                    rel2 = n.module.replace(".", "/") + f"/{a.name}.py"
                    if os.path.exists(sgl.path(rel2)):
                        continue
                if not pinned.has("sglang", rel, a.name):
                    bad.append(f"from {n.module} import {a.name}: not in "
                               f"{sgl} {rel}")
    # the Scheduler calls and fields the hook uses
    p = {k: [n for n, _ in pinned.params(
        pinned.find("sglang", SCHED, f"Scheduler.{k}"))]
        for k in ("flush_cache", "is_fully_idle", "continue_generation",
                  "pause_generation", "abort_request")}
    if "ignore_waiting" not in p["is_fully_idle"]:
        bad.append(f"Scheduler.is_fully_idle{p['is_fully_idle']}")
    for k in ("continue_generation", "pause_generation", "abort_request"):
        if len(p[k]) != 2:
            bad.append(f"Scheduler.{k}{p[k]}: want (self, recv_req)")
    for attr in ("_engine_paused", "weight_updater", "tp_worker"):
        if not scheduler_has(attr):
            bad.append(f"Scheduler has no self.{attr}")
    if not sgl.grep(SCHED, "self.tp_worker.model_runner"):
        bad.append("no self.tp_worker.model_runner in Scheduler")
    wu = "sglang/srt/managers/scheduler_components/weight_updater.py"
    for f in ("offload_tags", "stashed_model_static_state", "tp_worker"):
        pinned.find("sglang", wu, f"SchedulerWeightUpdaterManager.{f}")
    for fn, want in (("_export_static_state", ["model"]),
                     ("_import_static_state", ["model", "static_params"])):
        got = [n for n, _ in pinned.params(pinned.find("sglang", wu, fn))]
        if got != want:
            bad.append(f"{fn}{got}, the hook passes {want}")
    # the requests it makes: PauseGenerationReqInput(mode="retract",
    # rid=...), ContinueGenerationReqInput(), AbortReq(abort_all=True)
    io = "sglang/srt/managers/io_struct.py"
    mode = pinned.find("sglang", io, "PauseGenerationReqInput.mode")
    if "retract" not in ast.unparse(mode.annotation):
        bad.append(f"{mode.where}: mode {ast.unparse(mode.annotation)}")
    pg = pinned.find("sglang", SCHED, "Scheduler.pause_generation")
    if "'retract'" not in ast.unparse(pg) and '"retract"' not in \
            ast.unparse(pg):
        bad.append(f"{pg.where}: pause_generation without retract")
    pinned.find("sglang", io, "BaseReq.rid")
    pinned.find("sglang", io, "AbortReq.abort_all")
    pinned.find("sglang", io, "ContinueGenerationReqInput")
    # the ParallelContext fields it reads, as SGLang reads them
    text = "".join(sgl.text(f) for f in (
        SCHED, "sglang/srt/managers/scheduler_components/request_receiver.py"))
    for f in ("tp_rank", "dp_rank", "pp_size", "pp_rank", "attn_tp_rank",
              "attn_cp_rank", "attn_dp_enabled", "tp_size", "tp_group"):
        if f"get_parallel().{f}" not in text:
            bad.append(f"SGLang never reads get_parallel().{f}")
    check(not bad, "\n".join(bad))


def tag_order():
    import gpusleep.sglang as gs
    node = pinned.find("sglang", "sglang/srt/constants.py",
                       "GPU_MEMORY_ALL_TYPES")
    consts = {}
    for n in pinned.release("sglang").tree("sglang/srt/constants.py").body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant):
            consts[n.targets[0].id] = n.value.value
    want = [consts[e.id] if isinstance(e, ast.Name) else e.value
            for e in node.value.elts]
    check(list(gs.SGLANG_TAGS) == want,
          f"gpusleep.sglang.SGLANG_TAGS {gs.SGLANG_TAGS}, {node.where}: "
          f"{want}")


def names():
    import gpusleep.sglang as gs
    check(hasattr(gs, "domain_names") and hasattr(gs, "scheduler_ranks"),
          "gpusleep.sglang has no domain_names / scheduler_ranks")
    all4 = gs.domain_names("e", tp_size=2, dp_size=2)
    check(len(set(all4)) == 4, f"domain_names: {all4}")
    check(gs.domain_names("e", tp_size=2) == ["e-tp0", "e-tp1"],
          "no DP controller: e-tp<r>")
    check(gs.domain_name("e", 0, 1) in all4 and
          gs.domain_name("e", 0, 1) != gs.domain_name("e", 0, 0),
          "dp ranks 0 and 1 of tp rank 0 share a name")
    # the ranks as SGLang's ParallelContext has them (the stand-in's)
    sys.path.insert(0, STANDIN)
    try:
        import types
        from sglang.srt import runtime_context as rc
        args = types.SimpleNamespace(tp_size=2, pp_size=1, dp_size=2,
                                     enable_dp_attention=False)
        for dp, tp in ((1, 0), (None, 1)):
            rc.publish(args, role="scheduler",
                       ranks=rc.SpawnRanks(world_rank=tp, dp_rank=dp))
            check(gs.scheduler_ranks() == (dp, tp),
                  f"scheduler_ranks {gs.scheduler_ranks()}, want {(dp, tp)}")
    finally:
        sys.path.remove(STANDIN)


def no_module():
    if os.path.exists("/dev/gpusleep"):
        raise Skip("/dev/gpusleep exists here")
    import gpusleep
    from gpusleep.sglang import SchedulerHook
    e = raises(gpusleep.ModuleNotLoaded, SchedulerHook, object(),
               engine="x", tp_rank=0)
    check("modprobe gpusleep" in str(e), str(e))


def main():
    tap = Tap(TESTS)
    for name, fn in zip(TESTS, [patch_file, applies, reads, returns, surface,
                                tag_order, names, no_module]):
        tap.run(name, fn)
    tap.done()


if __name__ == "__main__":
    main()
