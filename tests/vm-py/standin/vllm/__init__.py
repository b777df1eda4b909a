# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the parts of vLLM that its sleep mode goes through, as
vLLM's sources have them (vllm/plugins/__init__.py,
vllm/device_allocator/cumem.py, vllm/v1/worker/gpu_worker.py; read, not
copied): the general plugins loaded from their entry points, the
CuMemAllocator singleton the worker asks for, and the worker's calls to it
in the order it makes them; and the Ray executor's start of its workers
(vllm/envs.py, vllm/ray/ray_env.py, vllm/v1/executor/ray_executor.py and
ray_utils.py, vllm/v1/worker/worker_base.py): what of the driver's
environment a worker gets. Used by tests/vm-py/test_py_dist.py and
test_py_guides.py."""


class LLM:
    """vllm.LLM's sleep mode, one worker in this process (TP 1): sleep()
    resets the prefix cache, then puts the worker to sleep; wake_up(tags)
    wakes it."""

    def __init__(self, enable_sleep_mode=True):
        from vllm.plugins import load_general_plugins
        from vllm.v1.worker.gpu_worker import Worker
        assert enable_sleep_mode
        load_general_plugins()
        self.worker = Worker()
        self.worker.init_device()
        self.worker.load_model()
        self.worker.initialize_from_config()
        self.prefix_cache_resets = 0

    def reset_prefix_cache(self):
        self.prefix_cache_resets += 1

    def sleep(self, level=1):
        self.reset_prefix_cache()
        self.worker.sleep(level)

    def wake_up(self, tags=None):
        self.worker.wake_up(tags)
