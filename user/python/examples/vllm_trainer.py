# SPDX-License-Identifier: LGPL-2.1-or-later
"""A colocated trainer's step with vLLM put to sleep through gpusleep (the
gpusleep-vllm plugin installed, enable_sleep_mode=True,
sleep_mode_backend="gpusleep"): vLLM's own sleep / wake_up calls, the
workers' domains "<engine>-tp<rank>" released and resumed (with
tensor_parallel_size > 1 as one group operation, the group "<engine>"),
which the trainer can check.
docs/integrations/vllm.md quotes it; tests/vm-py/test_py_guides.py runs it
against a stand-in of vLLM's LLM and worker."""

import gpusleep


def train_step(llm, engine, tp_size, train, push_weights):
    llm.sleep(level=1)                 # weights kept on the host, KV dropped
    names = [f"{engine}-tp{r}" for r in range(tp_size)]
    assert all(gpusleep.is_sleeping(n) for n in names)
    train()                            # the GPU memory is the trainer's
    llm.wake_up(tags=["weights"])      # same addresses as before
    push_weights()                     # e.g. NCCL broadcast into them
    llm.wake_up(tags=["kv_cache"])     # KV cache back (zero), serving
    return [gpusleep.state(n).state for n in names]
