#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The integration guides' code (docs/integrations/*.md) against
stand-ins of the engines: every code block a guide marks
<!-- from: FILE --> is in FILE (its lines in a row, indentation aside);
then that code runs:
- SGLang (sglang.md, trainers.md), against the stand-in of sglang 0.5.23
  with the guide's scheduler patch (tests/vm-py/standin/sglang_rank.py):
  two scheduler processes, DP replicas 0 and 1 of TP rank 0 (domains
  NAME-dp0-tp0, NAME-dp1-tp0: unique per (dp, tp)), replica 1 with
  --enable-weights-cpu-backup, a request running on replica 0. The
  trainer's EngineSleep (user/python/examples/trainer_actor.py) releases
  the group: SGLang's own pause (retract) reaches the scheduler through
  its input, nothing runs while released (a step would fault), the tags
  are SGLang's offload_tags; resume_weights: the static state (buffers)
  is back, the weights are zero where SGLang discards them (its
  default) and kept with the backup; new weights are staged in host
  memory for the engine's load from disk (update_weights_staged:
  gpusleep.weights, removed after the load); resume: generation continues (the retracted request runs
  again); a release started without waiting, then
  wait(op); abort_inflight reaches abort_request(AbortReq(abort_all=
  True)) through SGLang's input and the release completes at once;
  SGLang's own release_memory_occupation / resume_memory_occupation
  (after a user's pause) go through the same domain, the static state
  SGLang's; a trainer's release resumed by SGLang's own
  resume_memory_occupation gets its static state back; without SGLang's
  AbortReq (absent, or too old to have abort_all) the drain's abort says
  so.
- vLLM (vllm.md): examples/vllm_trainer.py's train_step over the stand-in
  of vLLM 0.33.0's LLM with the gpusleep-vllm plugin's sleep-mode
  backend, then vLLM's pause modes (keep, abort; wait refused in
  process).
SKIPs the runs without /dev/gpusleep."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

from gstest import Tap, Skip, check, REPO, DEVICE, GUARD_S
import gpusleep  # noqa: E402 (gstest puts user/python on sys.path)

DOCS = os.path.join(REPO, "docs", "integrations")
PYDIR = os.path.join(REPO, "user", "python")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
FULL_TORCH = os.path.join(REPO, "tests", "host", "fake_torch")
sys.path.insert(0, os.path.join(PYDIR, "examples"))
TESTS = ["every <!-- from: FILE --> block of the guides is in FILE",
         "SGLang: two DP replicas with the patch, names per (dp, tp)",
         "trainer release: SGLang paused in its input, nothing runs",
         "trainer resume: static state back, weights pushed, then the rest",
         "trainer: release without waiting, then wait(op); resume",
         "SGLang: abort_inflight goes through SGLang's AbortReq",
         "SGLang's own release/resume_memory_occupation: the same domain",
         "a trainer's release, resumed by SGLang's own resume",
         "SGLang: no AbortReq, or one without abort_all: a clear error",
         "vLLM: train_step through the plugin, each rank's domain"]
S = {"procs": []}
ZERO = "30e14955ebf13522"	# sha256 of 1 MiB of zeros, as "sum" shows it


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
    def __init__(self, engine, tp, dp=None, backup=False):
        e = env()
        e["GPUSLEEP_ENGINE"] = engine
        args = [str(tp)] + (["--dp", str(dp)] if dp is not None else []) + \
            (["--backup"] if backup else [])
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(STANDIN, "sglang_rank.py")] + args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=e, cwd="/")
        S["procs"].append(self)
        self.ready = self.p.stdout.readline().split()
        self.name = self.ready[1] if len(self.ready) == 2 else None

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def status(self):
        """[running, waiting, finished, paused]"""
        st = self.ask("status")
        check(st[:1] == ["status"], f"status: {st}")
        return [int(x) for x in st[1:]]

    def until(self, want, what):
        """Ask status until it is want (each ask is a scheduler step)."""
        for _ in range(10000):
            st = self.status()
            if st == want:
                return
        check(False, f"{what}: status {st}, want {want}")

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
    S["ranks"] = [Rank(eng, 0, dp=0), Rank(eng, 0, dp=1, backup=True)]
    check([r.ready for r in S["ranks"]] ==
          [["ready", f"{eng}-dp0-tp0"], ["ready", f"{eng}-dp1-tp0"]],
          [r.ready for r in S["ranks"]])
    r0, r1 = S["ranks"]
    S["sum0"], S["sum1"] = r0.ask("sum"), r1.ask("sum")
    S["buf0"] = r0.ask("buf")
    # a request of 10^6 steps (hours): it runs until something stops it
    check(r0.ask("submit 1000000") == ["ok"], "submit")
    check(r0.status()[0] == 1, "the request runs")
    from trainer_actor import EngineSleep
    S["sleep"] = EngineSleep(eng, tp_size=1, dp_size=2, timeout=GUARD_S)
    check(S["sleep"].names == [r.name for r in S["ranks"]], S["sleep"].names)


def need_ranks():
    need_dev()
    if "sleep" not in S:
        raise Skip("the ranks did not start")


def release():
    need_ranks()
    r0 = S["ranks"][0]
    r = S["sleep"].release()
    check([x.released for x in r.ranks] == [["kv_cache", "weights",
                                             "cuda_graph"]] * 2,
          repr(r.ranks))
    st = r0.status()
    check(st == [0, 1, 0, 1],
          f"SGLang's retract: the running request back to waiting, paused:"
          f" {st}")
    check(r0.ask("submit 1") == ["ok"], "submit")
    # steps while released: a scheduled batch would fault on its memory
    for _ in range(20):
        st = r0.status()
        check(st == [0, 2, 0, 1], f"something ran while released: {st}")
    check(r0.ask("offload") == ["offload", "cuda_graph,kv_cache,weights"],
          "SGLang's offload_tags")


def weights():
    need_ranks()
    r0, r1 = S["ranks"]
    d = tempfile.mkdtemp()

    def load(path):
        # update_weights_staged resumed the weights and staged the new
        # ones: what SGLang has before it loads them
        check(r0.ask("buf") == S["buf0"], "static state not back")
        check(r0.ask("sum") == ["sum", ZERO],
              "weights kept, SGLang's default discards them")
        check(r1.ask("sum") == S["sum1"],
              "--enable-weights-cpu-backup: weights not kept")
        st = r0.status()
        check(st == [0, 2, 0, 1], f"ran before the rest was back: {st}")
        check(r0.ask(f"load {path}") == ["ok"], "load")

    try:
        S["sleep"].update_weights_staged(
            {"w": memoryview(b"\x5a" * (1 << 20))}, load, directory=d)
        new = r0.ask("sum")
        check(new not in (S["sum0"], ["sum", ZERO]), "weights updated")
        check(os.listdir(d) == [], f"staged weights left: {os.listdir(d)}")
    finally:
        shutil.rmtree(d)
    S["sleep"].resume()
    r0.until([1, 0, 1, 0], "generation continues: the short request "
             "finishes, the retracted one runs")
    check(r0.ask("sum") == new, "weights as loaded")
    check(r0.ask("offload") == ["offload", "-"], "offload_tags left")
    check(r0.ask("abort") == ["ok"], "abort")
    r0.until([0, 0, 1, 0], "the long request aborted")


def nowait():
    need_ranks()
    op = S["sleep"].start_release()
    check(isinstance(op, int) and op > 0, repr(op))
    r = S["sleep"].wait(op)
    check(all(x.released for x in r.ranks), repr(r.ranks))
    S["sleep"].resume()
    S["ranks"][1].until([0, 0, 0, 0], "replica 1 serving")


def abort():
    need_ranks()
    r0 = S["ranks"][0]
    before = r0.status()
    aborts = int(r0.ask("aborts")[1])
    # a request of 10^6 steps (hours): only an abort ends it soon
    check(r0.ask("submit 1000000") == ["ok"], "submit")
    check(r0.status()[0] == 1, "the request runs")
    r = S["sleep"].group.release(abort_inflight=True, timeout=20)
    check(all(x.released for x in r.ranks), repr(r.ranks))
    check(r0.ask("aborts") == ["aborts", str(aborts + 1)],
          "abort_inflight did not reach abort_request(AbortReq(abort_all))")
    check(r0.status() == [0, 0, before[2], 1],
          "the aborted request still there, or counted finished")
    S["sleep"].resume()
    r0.until([0, 0, before[2], 0], "serving again")


def sglang_own():
    need_ranks()
    r0 = S["ranks"][0]
    name = r0.name
    check(r0.ask("pause retract") == ["ok"], "pause")
    check(r0.ask("release") == ["ok"], "release_memory_occupation")
    st = gpusleep.state(name)
    check(st.released == ["kv_cache", "weights", "cuda_graph"],
          f"released {st.released}")
    check(r0.ask("offload") == ["offload", "cuda_graph,kv_cache,weights"],
          "offload_tags")
    check(r0.ask("resume weights") == ["ok"], "resume weights")
    check(r0.ask("buf") == S["buf0"], "SGLang's import of its static state")
    check(r0.ask("resume kv_cache cuda_graph") == ["ok"], "resume")
    check(not gpusleep.is_sleeping(name), "still released")
    check(r0.status()[3] == 1, "gpusleep lifted the user's pause")
    check(r0.ask("continue") == ["ok"], "continue")
    r0.until([0, 0, r0.status()[2], 0], "serving")


def mixed():
    need_ranks()
    r0 = S["ranks"][0]
    gpusleep.release(r0.name, timeout=GUARD_S)
    check(r0.status()[3] == 1, "paused")
    check(r0.ask("resume") == ["ok"], "SGLang's resume_memory_occupation")
    check(r0.ask("buf") == S["buf0"], "static state not back")
    check(not gpusleep.is_sleeping(r0.name), "still released")
    r0.until([0, 0, r0.status()[2], 0], "serving")
    check(r0.ask("offload") == ["offload", "-"], "offload_tags left")


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
    # entry point itself is tested on the installed wheel, test_py_dist);
    # then vLLM's sleep modes: keep (requests kept, run after the wake),
    # abort (the default: requests aborted), wait (not in process)
    code = ("import sys, vllm, gpusleep_vllm\n"
            "gpusleep_vllm.register()\n"
            "from vllm_trainer import train_step\n"
            "llm = vllm.LLM('m', enable_sleep_mode=True,"
            " sleep_mode_backend='gpusleep')\n"
            "calls = []\n"
            "st = train_step(llm, sys.argv[1], 1, lambda: calls.append('t'),"
            " lambda: calls.append('p'))\n"
            "assert calls == ['t', 'p'] and st == ['awake'], (calls, st)\n"
            "core = llm.llm_engine\n"
            "assert core.prefix_cache_resets == 1\n"
            "assert not core.is_sleeping()\n"
            "core.add_request([3])\n"
            "llm.sleep(level=1, mode='keep')\n"
            "assert core.running == [[3]] and core.step() == ({}, False)\n"
            "assert llm.wake_up() and core.step()[1] and not core.aborted\n"
            "llm.sleep(level=1)\n"
            "assert core.aborted == 1 and not core.running\n"
            "llm.wake_up()\n"
            "try:\n"
            "    llm.sleep(level=1, mode='wait')\n"
            "    raise SystemExit('wait in process')\n"
            "except ValueError:\n"
            "    pass\n"
            "print('ok')\n")
    name = f"pyguidevllm{os.getpid()}"
    e = env()
    e.update(GPUSLEEP_ENGINE=name)
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
                                    nowait, abort, sglang_own, mixed,
                                    abort_errors, vllm]):
            tap.run(name, fn)
    finally:
        if "sleep" in S:
            S["sleep"].close()
        for r in S["procs"]:
            r.close()
    tap.done()


if __name__ == "__main__":
    main()
