#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Record the runs the sequence pictures are drawn from (docs/figures/),
inside the VM with gpusleep.ko loaded (tools/figures/record.sh boots it):
each scenario runs the real gpusleep code (the module, libgpusleep, the
Python package, its SGLang hook and vLLM plugin) against the stand-ins
of the engines that the tests use (tests/vm-py/standin), while
`gpusleepctl -j monitor -t --timeline` records every operation's steps
as the kernel saw them. Writes one JSON line per event to OUT:

  {"event": "call", "who": "trainer", "what": ..., "t0": s, "t1": s,
   "result": ...}        a call the trainer made (wall clock, seconds)
  {"event": "domain", "id": N, "name": ..., "rank": r}
  the monitor's timeline objects (one per finished operation)

    record.py sglang|vllm|rollback OUT.jsonl

Scenarios:
  sglang    SGLang (verl, slime): two scheduler ranks with the hook,
            EngineSleep (user/python/examples/trainer_actor.py): release,
            then update_weights_staged: resume_weights, gpusleep.weights
            stage, each rank's update_weights_from_disk; then resume
  vllm      vLLM (OpenRLHF): one worker with the gpusleep-vllm plugin,
            examples/vllm_trainer.py's train_step
  rollback  a group of three ranks (tests/vm-py/gsproc.py engines and
            agents) whose rank 1's agent (played here) unmaps the weights
            but fails to unmap the KV cache: AgentFailed, and every rank
            mapped back (rolled back)"""

import json
import os
import subprocess
import sys
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
PY = os.path.join(REPO, "user", "python")
STANDIN = os.path.join(REPO, "tests", "vm-py", "standin")
CTL = os.path.join(REPO, "build", "bin", "gpusleepctl")
sys.path[:0] = [PY, os.path.join(PY, "examples"),
                os.path.join(REPO, "tests", "vm-py")]

import gpusleep  # noqa: E402

OUT = []


def env(**kw):
    e = {k: v for k, v in os.environ.items() if k != "GPUSLEEP_LIB"}
    e.update(GPUSLEEP_BACKEND="host", PYTHONDONTWRITEBYTECODE="1",
             PYTHONPATH=os.pathsep.join([
                 os.path.join(REPO, "tests", "host", "fake_torch"), STANDIN,
                 PY, os.path.join(PY, "dist-tms"), os.path.join(PY, "dist-vllm"),
                 os.path.join(PY, "examples")]))
    e.update(kw)
    return e


def call(what, fn, *args, **kw):
    t0 = time.time()
    try:
        r = fn(*args, **kw)
        res = "ok"
    except gpusleep.GpuSleepError as e:
        r, res = e, f"{type(e).__name__}: {e}"
    OUT.append({"event": "call", "who": "trainer", "what": what,
                "t0": t0, "t1": time.time(), "result": res})
    return r


def domains(names):
    for r, n in enumerate(names):
        OUT.append({"event": "domain", "id": gpusleep.resolve_domain(n),
                    "name": n, "rank": r})


class Rank:
    """A stand-in SGLang scheduler (one TP rank) with the gpusleep hook."""

    def __init__(self, engine, r):
        self.p = subprocess.Popen(
            [sys.executable, os.path.join(STANDIN, "sglang_scheduler.py"),
             str(r)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, env=env(GPUSLEEP_ENGINE=engine), cwd="/")
        self.ready = self.p.stdout.readline().split()

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def close(self):
        self.p.stdin.close()
        self.p.wait(60)


def scenario(name, title, trainer, engine, agent):
    OUT.append({"event": "scenario", "name": name, "title": title,
                "trainer": trainer, "engine": engine, "agent": agent})


def sglang():
    from trainer_actor import EngineSleep
    scenario("sglang", "SGLang with verl or slime: one RL step, two TP ranks",
             "trainer's actor (EngineSleep)", "SGLang scheduler (hook)",
             "agent (torch_memory_saver)")
    eng = "llm0"
    ranks = [Rank(eng, r) for r in range(2)]
    try:
        assert [r.ready[0] for r in ranks] == ["ready", "ready"], ranks
        domains([f"{eng}-tp{r}" for r in range(2)])
        sleep = EngineSleep(eng, 2, timeout=60)
        resume_weights = sleep.resume_weights
        sleep.resume_weights = lambda: call("EngineSleep.resume_weights()",
                                            resume_weights)
        call("EngineSleep.release()", sleep.release)
        OUT.append({"event": "call", "who": "trainer", "what": "train()",
                    "t0": time.time(), "t1": time.time(), "result": "ok"})

        def load(path):
            for i, r in enumerate(ranks):
                t0 = time.time()
                assert r.ask(f"load {path}") == ["ok"]
                OUT.append({"event": "call", "who": "trainer", "rank": i,
                            "what": "update_weights_from_disk(staged.path)",
                            "t0": t0, "t1": time.time(), "result": "ok"})

        import gpusleep.weights
        stage = gpusleep.weights.stage

        def staged(*a, **kw):
            t0 = time.time()
            r = stage(*a, **kw)
            OUT.append({"event": "call", "who": "trainer",
                        "what": "gpusleep.weights.stage(state_dict)",
                        "t0": t0, "t1": time.time(), "result": "ok"})
            return r

        gpusleep.weights.stage = staged

        # resume_weights, stage, load (each recorded as it happens)
        sleep.update_weights_staged({"w": memoryview(b"\x5a" * (1 << 20))},
                                    load)
        call("EngineSleep.resume()", sleep.resume)
        sleep.close()
    finally:
        for r in ranks:
            r.close()


def vllm():
    scenario("vllm", "vLLM with OpenRLHF: one RL step, one worker",
             "trainer (LLMRayActor)", "vLLM worker (plugin)",
             "agent (plugin's allocator)")
    code = ("import sys, json, time, vllm, gpusleep_vllm\n"
            "gpusleep_vllm.register()\n"
            "from vllm_trainer import train_step\n"
            "llm = vllm.LLM(enable_sleep_mode=True)\n"
            "log = []\n"
            "def wrap(name, kernel, fn):\n"
            "    def w(*a, **k):\n"
            "        t0 = time.time(); r = fn(*a, **k)\n"
            "        log.append({'event': 'call', 'who': 'trainer',\n"
            "                    'what': name, 't0': t0, 't1': time.time(),\n"
            "                    'result': 'ok', 'via': 0,\n"
            "                    'kernel': kernel})\n"
            "        return r\n"
            "    return w\n"
            "llm.sleep = wrap('llm.sleep(level=1)', 'release its domain',\n"
            "                 llm.sleep)\n"
            "wake = llm.wake_up\n"
            "llm.wake_up = lambda tags=None: wrap(\n"
            "    f'llm.wake_up(tags={tags!r})',\n"
            "    'resume ' + ','.join(tags), wake)(tags=tags)\n"
            "print(json.dumps({'event': 'domain', 'name': 'llm0-tp0',\n"
            "                  'rank': 0}), flush=True)\n"
            "train_step(llm, 'llm0', 1, lambda: log.append({'event': 'call',"
            " 'who': 'trainer', 'what': 'train()', 't0': time.time(),"
            " 't1': time.time(), 'result': 'ok'}), lambda: log.append("
            "{'event': 'call', 'who': 'trainer', 'what': "
            "'broadcast weights (NCCL) into them', 't0': time.time(), "
            "'t1': time.time(), 'result': 'ok'}))\n"
            "for e in log:\n"
            "    print(json.dumps(e))\n")
    p = subprocess.run([sys.executable, "-c", code],
                       env=env(GPUSLEEP_ENGINE="llm0", RANK="0"),
                       capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    for ln in p.stdout.splitlines():
        e = json.loads(ln)
        if e["event"] == "domain":
            e["id"] = None	# the process is gone: from the timeline
        OUT.append(e)


class FailingAgent:
    """Rank 1's agent, played here: it unmaps weights (after 0.3 s: the
    other ranks are done by then), fails to unmap kv_cache (EIO), and maps
    back whatever it is asked to."""

    def __init__(self, dom):
        import ctypes
        import select
        import threading
        from gpusleep import _lib
        L = _lib.lib()
        dev = L.gs_open(None, 0, None)
        self.fd = L.gs_attach(dev, dom, _lib.ROLE_AGENT)
        os.close(dev)
        assert self.fd >= 0, self.fd
        self.stop = False

        def loop():
            ev = _lib.gpusleep_event()
            while not self.stop:
                if not select.select([self.fd], [], [], 0.1)[0]:
                    continue
                if L.gs_read_event(self.fd, ctypes.byref(ev)) < 0:
                    continue
                if ev.type == _lib.EV_PAUSE_TAG and ev.tags == 1:
                    time.sleep(0.3)
                    L.gs_complete(self.fd, ctypes.byref(ev), 0, 1 << 20)
                elif ev.type == _lib.EV_PAUSE_TAG:
                    L.gs_complete(self.fd, ctypes.byref(ev), -5, 0)
                elif ev.type == _lib.EV_RESUME_TAG:
                    L.gs_complete(self.fd, ctypes.byref(ev), 0, 0)

        self.t = threading.Thread(target=loop, daemon=True)
        self.t.start()

    def close(self):
        self.stop = True
        self.t.join()
        os.close(self.fd)


def rollback():
    from gstest import Proc
    scenario("rollback", "A group's rollback: rank 1 fails to unmap its KV "
             "cache, every rank is mapped back", "trainer (gpusleep.Group)",
             "engine", "agent")
    names = [f"llm0-tp{r}" for r in range(3)]
    eng = [Proc("engine", n, "--prefix-caching") for n in names]
    ids = [int(e.expect("ready ")[0]) for e in eng]
    ag = [Proc("agent", i, 1) for i in ids[::2]]
    for a in ag:
        a.expect("ready ")
    bad = FailingAgent(ids[1])
    try:
        domains(names)
        g = gpusleep.Group("llm0", names)
        e = call("Group.release()", g.release, timeout=30)
        assert isinstance(e, gpusleep.AgentFailed), e
        OUT.append({"event": "group_result", "rank": e.rank,
                    "reason": e.result.reason_name.lower(),
                    "ranks": [{"rank": rk.rank, "domain": rk.domain,
                               "outcome": "|".join(
                                   n for n in ("done", "failed", "cancelled",
                                               "rolled_back",
                                               "still_released")
                                   if getattr(rk, n)),
                               "released": rk.released}
                              for rk in e.result.ranks]})
        g.close()
    finally:
        bad.close()
        for p in eng + ag:
            p.close()


def main(scenario, out):
    mon = subprocess.Popen([CTL, "-j", "monitor", "-t", "--timeline"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(1)		# subscribed before the first operation
    try:
        {"sglang": sglang, "vllm": vllm, "rollback": rollback}[scenario]()
        time.sleep(1)	# the last timeline objects
    finally:
        mon.terminate()
        lines = mon.communicate(timeout=30)[0]
    for ln in lines.splitlines():
        try:
            OUT.append(json.loads(ln))
        except ValueError:
            pass
    with open(out, "w") as f:
        for e in OUT:
            f.write(json.dumps(e, sort_keys=True) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
