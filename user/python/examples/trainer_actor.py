# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a trainer's Ray actor (verl, OpenRLHF, slime) holds to put a
colocated SGLang engine to sleep through gpusleep and wake it, and the
host-staged weight update (gpusleep.weights; docs/weight-updates.md).
docs/integrations/trainers.md quotes it; tests/vm-py/test_py_guides.py
runs it against a stand-in SGLang scheduler."""

import gpusleep
from gpusleep.sglang import domain_names
import gpusleep.weights


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

    def update_weights_staged(self, named, load_from_disk,
                              directory="/dev/shm"):
        # the weights back, then the new ones (name -> tensor: a
        # state_dict) through host memory: one safetensors file in a
        # tmpfs, loaded by the engine (SGLang: update_weights_from_disk),
        # removed whether the load returned or raised
        self.resume_weights()
        with gpusleep.weights.stage(named, directory) as staged:
            return load_from_disk(staged.path)

    def close(self):
        self.group.close()


