# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a trainer's Ray actor (verl, OpenRLHF, slime) holds to put a
colocated SGLang engine to sleep through gpusleep and wake it, and the
host-staged weight update that replaces CUDA IPC of the engine's tensors.
docs/integrations/trainers.md quotes it; tests/vm-py/test_py_guides.py
runs it against a stand-in SGLang scheduler."""

import os

import gpusleep
from gpusleep.sglang import domain_names


class EngineSleep:
    """One SGLang engine of dp_size replicas of tp_size ranks, domains
    "<engine>-tp<rank>" ("<engine>-dp<d>-tp<rank>" with dp_size > 1: the
    naming convention of gpusleep.sglang), released and resumed as one
    group named engine, all or nothing."""

    def __init__(self, engine, tp_size, dp_size=1, timeout=300):
        self.names = domain_names(engine, tp_size, dp_size)
        self.timeout = timeout
        self.group = gpusleep.Group(engine, self.names)

    def release(self):
        # every rank pauses generation (SGLang's, in lockstep), drains,
        # exports its static state; then every rank unmaps
        return self.group.release(timeout=self.timeout)

    def resume_weights(self):
        # the weights' memory back, at the addresses it had: push the
        # weights now (SGLang discards them unless it was started with
        # --enable-weights-cpu-backup)
        return self.group.resume(["weights"], timeout=self.timeout)

    def resume(self):
        # what is still released (KV cache, graphs); scheduling resumes
        return self.group.resume(timeout=self.timeout)

    def start_release(self):
        # the same, not waiting: an op id for wait()
        return self.group.release(timeout=self.timeout, wait=False)

    def wait(self, op_id):
        return self.group.wait(op_id, timeout=self.timeout)

    def close(self):
        self.group.close()


def stage_weights(named, directory="/dev/shm"):
    """The trainer writes the new weights (name -> bytes) into host memory
    the engine can read: one file per tensor under a fresh directory of a
    tmpfs. Returns the directory, for the engine's load from disk."""
    step = 0
    while os.path.exists(os.path.join(directory, f"gpusleep-w{step}")):
        step += 1
    path = os.path.join(directory, f"gpusleep-w{step}")
    os.mkdir(path)
    for name, data in named.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    return path
