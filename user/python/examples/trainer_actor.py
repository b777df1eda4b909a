# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a trainer's Ray actor (verl, OpenRLHF, slime) holds to put a
colocated SGLang engine to sleep through gpusleep and wake it, and the
host-staged weight update that replaces CUDA IPC of the engine's tensors.
docs/integrations/trainers.md quotes it; tests/vm-py/test_py_guides.py
runs it against a stand-in SGLang scheduler."""

import os

import gpusleep


class EngineSleep:
    """One engine of tp_size ranks, domains "<engine>-tp<rank>" (the
    naming convention of gpusleep.sglang and gpusleep.vllm), released and
    resumed as one group named engine, all or nothing."""

    def __init__(self, engine, tp_size, timeout=300):
        self.names = [f"{engine}-tp{r}" for r in range(tp_size)]
        self.timeout = timeout
        self.group = gpusleep.Group(engine, self.names)

    def release(self):
        # every rank drains (finishes what runs, admits nothing), then
        # every rank unmaps: weights backed up, KV cache dropped
        return self.group.release(timeout=self.timeout)

    def resume_weights(self):
        # the weights back, at the addresses they had: update them now
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
