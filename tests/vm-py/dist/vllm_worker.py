# SPDX-License-Identifier: GPL-2.0
"""Run by tests/vm-py/test_py_dist.py with the venv's python, the stand-in
torch and vllm (vLLM 0.33.0's) on PYTHONPATH: a worker started as vLLM
starts it (WorkerWrapperBase: init_worker loads the general plugins,
where the installed gpusleep-vllm registers its sleep-mode backend, then
makes the GPU worker), of a config with sleep mode and
--sleep-mode-backend gpusleep, makes vLLM's calls in vLLM's order:
init_device, load_model (weights pool), initialize_from_config (runtime,
kv_cache, workspace pools), sleep(1) (weights and runtime kept, KV
discarded), wake_up(["weights"]) (the runtime state wakes with it),
wake_up(["kv_cache"]), sleep(2) (the weights discarded, the model's
buffers saved by vLLM and put back), wake_up(), discard(kv_cache); a
release from outside vLLM is refused at once by the worker (EngineFailed,
the worker's EOPNOTSUPP, naming vLLM's sleep), nothing released; shutdown. vLLM's CuMemAllocator stays
in place. A trainer's view of the domain (gpusleep.state) is checked
after each step. Prints "ok" or raises."""

import ctypes
import errno
import sys

import gpusleep


def main(name):
    from vllm.config import ModelConfig, VllmConfig
    from vllm.device_allocator.cumem import CuMemAllocator
    from vllm.device_allocator.sleep_mode_backend import \
        SleepModeBackendFactory
    from vllm.v1.worker.worker_base import WorkerWrapperBase
    cfg = VllmConfig(model_config=ModelConfig(
        enable_sleep_mode=True, sleep_mode_backend="gpusleep",
        enable_cumem_allocator=True))
    w = WorkerWrapperBase(rpc_rank=0)
    w.init_worker([dict(vllm_config=cfg, local_rank=0, rank=0,
                        distributed_init_method="env://",
                        is_driver_worker=True)])
    assert "gpusleep" in SleepModeBackendFactory._registry
    assert CuMemAllocator.__module__ == "vllm.device_allocator.cumem"
    w.init_device()
    w.load_model()
    w.initialize_from_config([None])
    worker = w.worker
    import gpusleep.vllm as gv
    a = gv.GpuSleepAllocator.get_instance()
    model = worker.model_runner.model
    wp, kp, rp = model.weights.ptr, worker.kv_cache.ptr, worker.runtime.ptr
    n = model.weights.nbytes
    assert a.get_current_usage() >= 2 * n, a.get_current_usage()
    want = bytes(range(256)) * (n // 256)
    ctypes.memmove(wp, want, n)
    ctypes.memset(kp, 0xcd, n)
    ctypes.memset(rp, 0x42, 4096)
    rotary = ctypes.string_at(model.rotary.ptr, 4096)
    everything = list(gv.VLLM_TAGS)

    worker.sleep(level=1)
    st = gpusleep.state(name)
    assert st.released == everything, st.released
    assert type(worker.sleep_mode_backend).__name__ == "GpuSleepBackend"
    assert a.get_current_usage() >= 2 * n, "usage counts sleeping pools"
    worker.wake_up(["weights"])
    assert ctypes.string_at(wp, n) == want, "level 1: weights not restored"
    assert ctypes.string_at(rp, 4096) == b"\x42" * 4096, "runtime lost"
    assert gpusleep.state(name).released == ["kv_cache"], \
        gpusleep.state(name).released
    worker.wake_up(["kv_cache"])
    assert ctypes.string_at(kp, n) == bytes(n), "level 1: KV not discarded"
    assert not gpusleep.is_sleeping(name)

    worker.sleep(level=2)
    assert gpusleep.state(name).released == everything
    worker.wake_up()
    assert ctypes.string_at(wp, n) == bytes(n), "level 2: weights kept"
    assert ctypes.string_at(model.rotary.ptr, 4096) == rotary, \
        "level 2: the model's buffers not put back"
    assert ctypes.string_at(rp, 4096) == b"\x42" * 4096, "runtime lost"
    assert not gpusleep.is_sleeping(name)

    worker.discard(("kv_cache",))
    assert gpusleep.state(name).released == ["kv_cache"]
    worker.wake_up(["kv_cache"])
    assert not gpusleep.is_sleeping(name)

    # vLLM sleeps through its API: the worker's engine thread answers a
    # release from outside at once, refusing it (no timeout given: a drain
    # left unanswered would end in DrainTimeout, not EngineFailed)
    try:
        gpusleep.release(name)
    except gpusleep.EngineFailed as e:
        assert e.peer_errno == errno.EOPNOTSUPP, e
        assert "vLLM's sleep" in str(e), e
    else:
        raise AssertionError("a release from outside vLLM went through")
    assert not gpusleep.is_sleeping(name)

    w.shutdown()
    a.release_pools()
    a.close()
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
