#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The trainer side of torch_memory_saver through gpusleep: a process set
up as slime's actor group sets up Megatron with --offload (THUDM/slime at
624b824a, slime/ray/actor_group.py: LD_PRELOAD of the preload hook found
beside the torch_memory_saver package, TMS_INIT_ENABLE=1,
TMS_INIT_ENABLE_CPU_BACKUP=1) allocates through cudaMalloc (the stand-in
CUDA runtime, called through a library's PLT as PyTorch calls it), and
pauses and resumes itself with torch_memory_saver.pause() / resume()
(tests/vm-py/tms_trainer.py). Its memory is a gpusleep domain with its own
tags ("default", and "grad_buffer" from a region as slime's Megatron
patch makes), seen from outside; the released memory really leaves the
process (host backend: its RSS drops, the agent measured it come free),
what it allocated inside disable() stays with the runtime, untouched, and
every address stays valid: the parameters come back identical, the
discarded gradients zero. A release from another process is not the
trainer's to answer (it has no scheduler; its drain is its own pause()):
the trainer refuses it at once (EngineFailed, EOPNOTSUPP, saying how to
release it), nothing unmapped; inside torch_memory_saver.releasable()
(the trainer's safe point) such a release goes through, and leaving it
resumes the memory. SKIPs without /dev/gpusleep."""

import errno

import os
import sys

from gstest import Tap, Proc, REPO, check, need_device
import gpusleep

NAME = f"slimetrainer{os.getpid()}"
MiB = 1 << 20
BUILD = os.path.join(REPO, "build")
# slime's choice among the names (its list, its order)
HOOKS = [os.path.join(BUILD, "lib", n) for n in (
    "torch_memory_saver_hook_mode_preload_cu13.abi3.so",
    "torch_memory_saver_hook_mode_preload_cu12.abi3.so",
    "torch_memory_saver_hook_mode_preload.abi3.so")]
TESTS = ["the trainer allocates: cudaMalloc in tag default, disable() not",
         "slime's read of _impl: the hook library's interesting region",
         "pause(): a domain of the trainer's own tags, released",
         "released memory left the process; the runtime's stayed",
         "tms_pause() of the C API is refused: the domain owns the memory",
         "resume(): same addresses, parameters identical, gradients zero",
         "a release from outside: refused at once (EOPNOTSUPP), nothing "
         "unmapped",
         "inside releasable(): a release from outside goes through; "
         "leaving it resumes"]
S = {}


def start():
    import subprocess
    t = S["t"] = Proc.__new__(Proc)	# its line protocol, another script
    hook = next((h for h in HOOKS if os.path.exists(h)), None)
    check(hook, f"none of {HOOKS} built")
    env = dict(os.environ)
    for k in [k for k in env if k.startswith(("TMS_", "GPUSLEEP_"))]:
        del env[k]
    env.update({"LD_PRELOAD": hook, "TMS_INIT_ENABLE": "1",
                "TMS_INIT_ENABLE_CPU_BACKUP": "1",
                "GPUSLEEP_BACKEND": "host", "GPUSLEEP_DOMAIN_NAME": NAME,
                "PYTHONDONTWRITEBYTECODE": "1",
                "LD_LIBRARY_PATH": os.path.join(BUILD, "tests", "host",
                                                "fakecudart"),
                "PYTHONPATH": os.pathsep.join([
                    os.path.join(REPO, "user", "python", "dist-tms"),
                    os.path.join(REPO, "user", "python")])})
    t.p = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "tms_trainer.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        env=env)
    t.buf, t.lines, t.pos = b"", [], 0
    t.expect("ready")


def alloc():
    start()
    w = S["t"].ask("alloc", "allocated ")
    S["ptrs"] = [int(x, 16) for x in w[:3]]
    check(all(S["ptrs"]), f"allocations {w}")
    check(int(w[3]) == 8 * MiB,
          f"the runtime's own cudaMalloc holds {w[3]} bytes, want only the "
          "8 MiB of disable()")


def impl():
    w = S["t"].ask("impl", "impl ")
    check(w == ["1"], f"TMS_INIT_ENABLE: interesting region {w}")


def pause():
    w = S["t"].ask("pause", "paused ")
    S["paused"] = [int(x) for x in w]
    st = gpusleep.state(NAME)
    check(st.state == "released", repr(st))
    check(st.released == ["default", "grad_buffer"], repr(st.released))
    with gpusleep.Controller(NAME) as c:
        tags = [n for n, _, _ in c.tags()]
    check(tags == ["default", "grad_buffer"], f"declaration {tags}")


def released():
    before, after, freed_default, freed_grad, outside_ok = S["paused"]
    # the discarded gradients leave nothing behind (the parameters'
    # backup is host memory here, as their "device" memory was)
    check(before - after >= 32 * MiB * 9 // 10,
          f"RSS {before} -> {after}: the gradients did not leave")
    check(freed_default >= 64 * MiB * 9 // 10,
          f"parameters: {freed_default} bytes seen to come free")
    check(freed_grad >= 32 * MiB * 9 // 10,
          f"gradients: {freed_grad} bytes seen to come free")
    check(outside_ok == 1, "the runtime's memory (disable()) changed")


def cpause():
    w = S["t"].ask("cpause", "cpause ")
    check(w == ["800"], f"tms_pause returned {w}, want "
          "cudaErrorNotPermitted (800)")
    check(gpusleep.state(NAME).state == "released", "state changed")


def resume():
    w = S["t"].ask("resume", "resumed ")
    check(w == ["1", "1", "1"], f"params ok, grads zero, outside ok: {w}")
    check(gpusleep.state(NAME).state == "awake", "not awake")


def outside():
    # nothing in the trainer drains for another process: its engine
    # thread answers the drain with EOPNOTSUPP at once (no timeout here:
    # a drain left unanswered would end in DrainTimeout, not this)
    from gstest import raises
    e = raises(gpusleep.EngineFailed, gpusleep.release, NAME)
    check(e.peer_errno == errno.EOPNOTSUPP, f"peer errno {e.peer_errno}")
    check("pause()" in str(e) and "releasable()" in str(e), str(e))
    st = gpusleep.state(NAME)
    check(st.state == "awake" and st.released == [], repr(st))
    w = S["t"].ask("pause", "paused ")		# its own still works
    check(gpusleep.state(NAME).released == ["default", "grad_buffer"],
          "the trainer's own pause after it")
    check(S["t"].ask("resume", "resumed ") == ["1", "1", "1"], "resume")


def window():
    S["t"].ask("window", "window")
    r = gpusleep.release(NAME)
    check(r.tags == ["default", "grad_buffer"], repr(r))
    check(gpusleep.state(NAME).released == ["default", "grad_buffer"],
          "not released from outside inside the window")
    w = S["t"].ask("endwindow", "endwindow ")
    check(w == ["1", "1", "1"], f"params ok, grads zero, outside ok: {w}")
    st = gpusleep.state(NAME)
    check(st.state == "awake" and st.released == [], repr(st))
    # the window is closed again: refused at once
    from gstest import raises
    e = raises(gpusleep.EngineFailed, gpusleep.release, NAME)
    check(e.peer_errno == errno.EOPNOTSUPP, f"peer errno {e.peer_errno}")


def main():
    tap = Tap(TESTS)
    need_device(tap, TESTS)
    try:
        for name, fn in zip(TESTS, [alloc, impl, pause, released, cpause,
                                    resume, outside, window]):
            tap.run(name, fn)
    finally:
        if "t" in S:
            S["t"].close()
    tap.done()


if __name__ == "__main__":
    main()
