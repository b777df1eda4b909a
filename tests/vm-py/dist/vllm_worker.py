# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
torch and vllm on PYTHONPATH: vLLM's general plugins are loaded (the
installed gpusleep-vllm's entry point puts gpusleep's allocator in
CuMemAllocator's place), then a worker makes vLLM's calls in vLLM's
order: init_device, load_model (weights pool), initialize_from_config
(kv_cache pool), sleep(1) (weights kept, KV discarded), wake_up
(["weights"]), wake_up(["kv_cache"]), sleep(2) (both discarded),
wake_up(). A trainer's view of the domain (gpusleep.state) is checked
after each step. Prints "ok" or raises."""

import ctypes
import sys

import gpusleep
from vllm.plugins import load_general_plugins


def ptr(t):
    return t.data_ptr() if hasattr(t, "data_ptr") else t


def main(name):
    load_general_plugins()
    from vllm.device_allocator.cumem import CuMemAllocator
    from vllm.v1.worker.gpu_worker import Worker
    assert CuMemAllocator.__module__ == "gpusleep.vllm", CuMemAllocator
    worker = Worker()
    worker.init_device()
    worker.load_model()
    worker.initialize_from_config()
    a = CuMemAllocator.get_instance()
    w, k = ptr(worker.weights), ptr(worker.kv_cache)
    n = worker.weight_bytes
    assert a.get_current_usage() >= 2 * n, a.get_current_usage()
    want = bytes(range(256)) * (n // 256)
    ctypes.memmove(w, want, n)
    ctypes.memset(k, 0xcd, n)

    worker.sleep(level=1)
    st = gpusleep.state(name)
    assert st.released == ["weights", "kv_cache"], st.released
    assert a.get_current_usage() >= 2 * n, "usage counts sleeping pools"
    worker.wake_up(["weights"])
    assert ctypes.string_at(w, n) == want, "level 1: weights not restored"
    assert gpusleep.state(name).released == ["kv_cache"]
    worker.wake_up(["kv_cache"])
    assert ctypes.string_at(k, n) == bytes(n), "level 1: KV not discarded"
    assert not gpusleep.is_sleeping(name)

    worker.sleep(level=2)
    assert gpusleep.state(name).released == ["weights", "kv_cache"]
    worker.wake_up()
    assert ctypes.string_at(w, n) == bytes(n), "level 2: weights kept"
    assert not gpusleep.is_sleeping(name)
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
