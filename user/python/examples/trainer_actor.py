# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a trainer's Ray actor (verl, OpenRLHF, slime) holds to put a
colocated SGLang engine to sleep through gpusleep and wake it, and the
host-staged weight update (gpusleep.weights; docs/weight-updates.md).
docs/integrations/trainers.md quotes it; tests/vm-py/test_py_guides.py
runs it against a stand-in SGLang scheduler."""

import gpusleep
import gpusleep.weights


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


