#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The smallest gpusleep engine: a domain NAME with the default tags
(weights backed up, kv_cache discarded), an agent serving 1 MiB of each
(CUDA when libcuda loads, else host memory: GPUSLEEP_BACKEND=host), and a
loop answering the domain's events. Prints "ready NAME ID", then one line
per event it answers; exits on SIGTERM or SIGINT (kill %1, Ctrl-C) or,
when its standard input is a pipe, when that closes, printing whether the
weights came through intact. It never reads a terminal: as a background
job (`&`) it would be stopped (SIGTTIN) at the first key typed there, and
a release would then wait for its drain until DrainTimeout.

    python3 engine.py llm0 &     # then: python3 trainer.py llm0; kill %1
"""

import os
import select
import signal
import sys

from gpusleep.agent import Agent, MemoryManager
from gpusleep.engine import Engine

PATTERN = bytes(range(256)) * 4096	# 1 MiB


def say(*words):
    print(*words, flush=True)


def main(name):
    eng = Engine(name,
                 drain=lambda tags, abort: say("drain", ",".join(tags)),
                 reset_caches=lambda: say("reset_caches"),
                 repair_kv=lambda: say("repair_kv"),
                 resume_sched=lambda: say("resume_sched"))
    mm = MemoryManager()
    mm.set_policy("weights", backup=True)
    mm.set_policy("kv_cache", backup=False)
    weights = mm.alloc("weights", len(PATTERN))
    mm.alloc("kv_cache", len(PATTERN))
    if weights.view is not None:		# host memory: fill it
        weights.view[:] = PATTERN
    agent = Agent(eng.id, mm)		# unmaps / remaps on its own thread
    # a signal writes a byte into this pipe, which the loop polls
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    say("ready", name, eng.id)
    poll = select.poll()
    poll.register(eng.fileno(), select.POLLIN)
    poll.register(wake_r, select.POLLIN)
    if not sys.stdin.isatty():
        poll.register(sys.stdin.fileno(), select.POLLIN)
    done = False
    while not done:
        for fd, _ in poll.poll():
            if fd == eng.fileno():
                eng.dispatch()
            elif fd == wake_r or not sys.stdin.buffer.read1(4096):
                done = True
    intact = weights.view is None or weights.view.tobytes() == PATTERN
    say("weights", "intact" if intact else "CHANGED")
    agent.close()
    eng.close()
    return 0 if intact else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "llm0"))
