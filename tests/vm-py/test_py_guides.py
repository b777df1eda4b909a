#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The integration guides' code (docs/integrations/*.md) against
stand-ins of the engines: every code block a guide marks
<!-- from: FILE --> is in FILE (its lines in a row, indentation aside);
then that code runs:
- SGLang (sglang.md, trainers.md): two scheduler processes (TP ranks,
  tests/vm-py/standin/sglang_scheduler.py) with the guide's patch, a
  request in flight on rank 0; the trainer's EngineSleep
  (user/python/examples/trainer_actor.py) releases the group (the drain
  waits for the request; no request admitted while released), resumes
  the weights and stages new weights in host memory for the engine's load
  from disk (update_weights_staged: gpusleep.weights, removed after the
  load), resumes the rest (KV cache zero, the waiting request runs);
  a second release started without waiting, then wait(op); a release
  with abort_inflight while a long request runs reaches the scheduler's
  abort_request(AbortReq(abort_all=True)) (SGLang's own abort path) and
  completes at once; without SGLang's AbortReq (absent, or too old to
  have abort_all) the drain's abort says so.
- vLLM (vllm.md): examples/vllm_trainer.py's train_step over the stand-in
  vllm.LLM with the gpusleep-vllm plugin.
SKIPs the runs without /dev/gpusleep."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from gstest import Tap, Skip, check, REPO, DEVICE, GUARD_S

DOCS = os.path.join(REPO, "docs", "integrations")
PYDIR = os.path.join(REPO, "user", "python")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
FULL_TORCH = os.path.join(REPO, "tests", "host", "fake_torch")
sys.path.insert(0, os.path.join(PYDIR, "examples"))
TESTS = ["every <!-- from: FILE --> block of the guides is in FILE",
         "SGLang: two ranks start with the patch, a request in flight",
         "trainer: group release waits for the drain, admits nothing",
         "trainer: weights back, staged weights loaded, then the rest",
         "trainer: release without waiting, then wait(op); resume",
         "SGLang: abort_inflight goes through abort_request(AbortReq)",
         "SGLang: no AbortReq, or one without abort_all: a clear error",
         "vLLM: train_step through the plugin, each rank's domain"]
S = {"procs": []}


def env():
    torch = FULL_TORCH
    e = {k: v for k, v in os.environ.items() if k != "GPUSLEEP_LIB"}
    e.update(GPUSLEEP_BACKEND="host", PYTHONDONTWRITEBYTECODE="1",
             PYTHONPATH=os.pathsep.join([torch, STANDIN, PYDIR,
                                         os.path.join(PYDIR, "dist-tms"),
                                         os.path.join(PYDIR, "dist-vllm")]))
    return e


def blocks():
    bad, n = [], 0
    for doc in sorted(os.listdir(DOCS)):
        if not doc.endswith(".md"):
            continue
        with open(os.path.join(DOCS, doc)) as f:
            text = f.read()
        for path, code in re.findall(r"<!-- from: (\S+) -->\s*\n```\w*\n"
                                     r"(.*?)```", text, re.S):
            n += 1
            # the block's lines, in a row, in the file (indentation aside)
            want = [ln.strip() for ln in code.splitlines()]
            with open(os.path.join(REPO, path)) as f:
                have = [ln.strip() for ln in f.read().splitlines()]
            if not any(have[i:i + len(want)] == want
                       for i in range(len(have) - len(want) + 1)):
                bad.append(f"{doc}: block not in {path}:\n{code}")
    check(n >= 3, f"only {n} marked blocks")
    check(not bad, "\n".join(bad))


class Rank:
    def __init__(self, engine, r):
        e = env()
        e["GPUSLEEP_ENGINE"] = engine
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(STANDIN, "sglang_scheduler.py"),
             str(r)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=e, cwd="/")
        S["procs"].append(self)
        self.ready = self.p.stdout.readline().split()

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(GUARD_S)
        except subprocess.TimeoutExpired:
            self.p.kill()


def need_dev():
    if not os.path.exists(DEVICE):
        raise Skip(f"no {DEVICE} (module not loaded)")


def sglang_start():
    need_dev()
    S["engine"] = eng = f"pyguide{os.getpid()}"
    S["ranks"] = [Rank(eng, r) for r in range(2)]
    check([r.ready for r in S["ranks"]] ==
          [["ready", f"{eng}-tp0"], ["ready", f"{eng}-tp1"]],
          [r.ready for r in S["ranks"]])
    S["sum0"] = S["ranks"][0].ask("sum")
    check(S["ranks"][0].ask("submit 40") == ["ok"], "submit")
    from trainer_actor import EngineSleep
    S["sleep"] = EngineSleep(eng, 2, timeout=GUARD_S)


def need_ranks():
    need_dev()
    if "sleep" not in S:
        raise Skip("the ranks did not start")


def release():
    need_ranks()
    r0 = S["ranks"][0]
    r = S["sleep"].release()
    check([x.released for x in r.ranks] == [["weights", "kv_cache",
                                             "cuda_graph"]] * 2,
          repr(r.ranks))
    check(r0.ask("status") == ["status", "0", "0", "1"],
          "the request in flight finished before the release")
    check(r0.ask("submit 1") == ["ok"], "submit")
    check(r0.ask("status") == ["status", "0", "1", "1"],
          "a request admitted while released")


def weights():
    need_ranks()
    r0 = S["ranks"][0]
    d = tempfile.mkdtemp()

    def load(path):
        check(r0.ask("sum") == S["sum0"], "weights kept by the resume")
        check(r0.ask(f"load {path}") == ["ok"], "load")

    try:
        S["sleep"].update_weights_staged(
            {"w": memoryview(b"\x5a" * (1 << 20))}, load, directory=d)
        new = r0.ask("sum")
        check(new != S["sum0"], "weights updated")
        check(os.listdir(d) == [], f"staged weights left: {os.listdir(d)}")
    finally:
        shutil.rmtree(d)
    S["sleep"].resume()
    check(r0.ask("sum") == new, "weights as loaded")
    check(r0.ask("kv") == ["kv", "1"], "KV cache zero after resume")
    check(r0.ask("status") == ["status", "0", "0", "2"],
          "the waiting request ran once resumed")


def nowait():
    need_ranks()
    op = S["sleep"].start_release()
    check(isinstance(op, int) and op > 0, repr(op))
    r = S["sleep"].wait(op)
    check(all(x.released for x in r.ranks), repr(r.ranks))
    S["sleep"].resume()
    check(S["ranks"][1].ask("status") == ["status", "0", "0", "0"],
          "rank 1 alive")


def abort():
    need_ranks()
    r0 = S["ranks"][0]
    before = r0.ask("status")
    # a request of 10^6 iterations (hours): only an abort ends it soon
    check(r0.ask("submit 1000000") == ["ok"], "submit")
    r0.ask("status")	# an iteration: the request runs
    r = S["sleep"].group.release(abort_inflight=True, timeout=20)
    check(all(x.released for x in r.ranks), repr(r.ranks))
    check(r0.ask("aborts") == ["aborts", "1"],
          "abort_inflight did not reach abort_request(AbortReq(abort_all))")
    check(r0.ask("status") == ["status", "0", "0", before[3]],
          "the aborted request still there, or counted finished")
    S["sleep"].resume()


def abort_errors():
    code = ("from gpusleep.sglang import abort_all_request\n"
            "try:\n    abort_all_request()\n"
            "except RuntimeError as e:\n    print(e)\n")
    d = tempfile.mkdtemp()
    try:
        # an SGLang whose AbortReq has no abort_all (rid only)
        pkg = os.path.join(d, "sglang", "srt", "managers")
        os.makedirs(pkg)
        for sub in ("sglang", "sglang/srt", "sglang/srt/managers"):
            open(os.path.join(d, sub, "__init__.py"), "w").close()
        with open(os.path.join(pkg, "io_struct.py"), "w") as f:
            f.write("from dataclasses import dataclass\n@dataclass\n"
                    "class AbortReq:\n    rid: str = ''\n")
        for path, want in ((PYDIR, "sglang.srt.managers.io_struct.AbortReq"),
                           (os.pathsep.join([d, PYDIR]), "too old")):
            e = env()
            e["PYTHONPATH"] = path
            out = subprocess.run([sys.executable, "-c", code], env=e,
                                 capture_output=True, text=True,
                                 timeout=GUARD_S, cwd="/")
            check(out.returncode == 0 and want in out.stdout,
                  f"PYTHONPATH={path}: {out.stdout}{out.stderr}")
    finally:
        shutil.rmtree(d)


def vllm():
    need_dev()
    # the plugin's register() called as vLLM's plugin loader would (the
    # entry point itself is tested on the installed wheel, test_py_dist)
    code = ("import sys, vllm, gpusleep_vllm\n"
            "gpusleep_vllm.register()\n"
            "from vllm_trainer import train_step\n"
            "llm = vllm.LLM(enable_sleep_mode=True)\n"
            "calls = []\n"
            "st = train_step(llm, sys.argv[1], 1, lambda: calls.append('t'),"
            " lambda: calls.append('p'))\n"
            "assert calls == ['t', 'p'] and st == ['awake'], (calls, st)\n"
            "assert llm.prefix_cache_resets == 1\n"
            "print('ok')\n")
    name = f"pyguidevllm{os.getpid()}"
    e = env()
    e.update(GPUSLEEP_ENGINE=name, RANK="0")
    e["PYTHONPATH"] += os.pathsep + os.path.join(PYDIR, "examples")
    out = subprocess.run([sys.executable, "-c", code, name], env=e,
                         capture_output=True, text=True, timeout=GUARD_S,
                         cwd="/")
    check(out.returncode == 0 and out.stdout.strip() == "ok",
          out.stdout + out.stderr)


def main():
    tap = Tap(TESTS)
    try:
        for name, fn in zip(TESTS, [blocks, sglang_start, release, weights,
                                    nowait, abort, abort_errors, vllm]):
            tap.run(name, fn)
    finally:
        if "sleep" in S:
            S["sleep"].close()
        for r in S["procs"]:
            r.close()
    tap.done()


if __name__ == "__main__":
    main()
