# SPDX-License-Identifier: GPL-2.0
"""The calls vLLM's GPU worker makes to its allocator with
enable_sleep_mode, in its order: the allocator is empty when the device
is set up; the model is loaded in the "weights" pool and the KV cache
allocated in the "kv_cache" pool; sleep(level) offloads the weights at
level 1 and nothing at level 2; wake_up(tags) passes the tags on. The
model and its KV cache are buffers of the stand-in torch."""

import torch


class Worker:
    def __init__(self, weight_bytes=1 << 20, kv_bytes=1 << 20):
        self.weight_bytes = weight_bytes
        self.kv_bytes = kv_bytes
        self.weights = self.kv_cache = None

    def init_device(self):
        from vllm.device_allocator.cumem import CuMemAllocator
        allocator = CuMemAllocator.get_instance()
        assert allocator.get_current_usage() == 0, \
            "Sleep mode can only be used for one instance per process."

    def load_model(self):
        from vllm.device_allocator.cumem import CuMemAllocator
        allocator = CuMemAllocator.get_instance()
        with allocator.use_memory_pool(tag="weights"):
            self.weights = torch.empty(self.weight_bytes)

    def initialize_from_config(self):
        from vllm.device_allocator.cumem import CuMemAllocator
        allocator = CuMemAllocator.get_instance()
        with allocator.use_memory_pool(tag="kv_cache"):
            self.kv_cache = torch.empty(self.kv_bytes)

    def sleep(self, level=1):
        from vllm.device_allocator.cumem import CuMemAllocator
        allocator = CuMemAllocator.get_instance()
        allocator.sleep(offload_tags=("weights",) if level == 1 else tuple())

    def wake_up(self, tags=None):
        from vllm.device_allocator.cumem import CuMemAllocator
        allocator = CuMemAllocator.get_instance()
        allocator.wake_up(tags)
