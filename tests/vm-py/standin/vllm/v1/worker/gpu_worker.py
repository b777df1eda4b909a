# SPDX-License-Identifier: GPL-2.0
"""The GPU worker's sleep mode. Models vllm 0.33.0
(vllm/v1/worker/gpu_worker.py):

- with the cumem allocator on (sleep mode turns it on), its memory is
  allocated in tagged pools of get_mem_allocator_instance()
  (_maybe_get_memory_pool_context: "weights" for the model, asserting the
  allocator is empty first; "runtime" around the KV cache's
  initialisation; "kv_cache"; "workspace"); without it, in PyTorch's own
  allocator;
- load_model asks for the weights pool before it makes the config
  current;
- sleep(level): at level 2 the model's buffers are saved to the host
  first (a weight push does not carry them), then the sleep-mode backend
  (made on first use by SleepModeBackendFactory from model_config)
  suspends; wake_up(tags): the backend resumes, then the buffers come
  back when the weights do; discard(tags) through the backend;
- shutdown releases vLLM's CuMemAllocator's pools when it has an
  instance;
- init_device sets up the distributed environment
  (init_worker_distributed_environment: the world of parallel_config's
  world_size, then the model-parallel groups; the stand-in's
  vllm.distributed.parallel_state).
The model is weights and one buffer (the stand-in torch's memory)."""

import ctypes
from contextlib import nullcontext

from vllm.config import set_current_vllm_config
from vllm.device_allocator import get_mem_allocator_instance
from vllm.distributed.parallel_state import (
    ensure_model_parallel_initialized, init_distributed_environment)
from vllm.v1.worker.worker_base import WorkerBase

STANDIN_ONLY = ("_StandinTensor", "_StandinModel", "_StandinModelRunner",
                "SIZE")
SIZE = 1 << 20


class _StandinTensor:
    """Device memory of the stand-in torch (plain memory where PyTorch's
    own allocator serves it): cpu() a host copy, copy_ from one."""

    def __init__(self, nbytes=None, data=None):
        if data is not None:
            self.host = bytes(data)
            self.ptr, self.nbytes = None, len(data)
            return
        import torch
        t = torch.empty(nbytes)
        self.ptr = t.data_ptr() if hasattr(t, "data_ptr") else t
        if not self.ptr:	# PyTorch's own allocator: plain memory
            self._buf = ctypes.create_string_buffer(nbytes)
            self.ptr = ctypes.addressof(self._buf)
        self.nbytes = nbytes

    @property
    def data(self):
        return self

    def cpu(self):
        return _StandinTensor(data=ctypes.string_at(self.ptr, self.nbytes))

    def clone(self):
        return self

    def copy_(self, src):
        ctypes.memmove(self.ptr, src.host, self.nbytes)


class _StandinModel:
    def __init__(self):
        self.weights = _StandinTensor(SIZE)
        self.rotary = _StandinTensor(4096)
        ctypes.memset(self.rotary.ptr, 0x7b, 4096)

    def named_buffers(self):
        return [("rotary", self.rotary)]


class _StandinModelRunner:
    def __init__(self):
        self.model = _StandinModel()


class Worker(WorkerBase):
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        super().__init__(vllm_config, local_rank, rank,
                         distributed_init_method, is_driver_worker)
        self._sleep_saved_buffers = {}
        self._sleep_mode_backend = None
        self.model_runner = None

    @property
    def sleep_mode_backend(self):
        if self._sleep_mode_backend is None:
            from vllm.device_allocator.sleep_mode_backend import \
                SleepModeBackendFactory
            self._sleep_mode_backend = SleepModeBackendFactory.create_backend(
                self.vllm_config.model_config)
        return self._sleep_mode_backend

    def sleep(self, level=1):
        if level == 2:
            model = self.model_runner.model
            self._sleep_saved_buffers = {
                name: buffer.cpu().clone()
                for name, buffer in model.named_buffers()}
        self.sleep_mode_backend.suspend(level)

    def wake_up(self, tags=None):
        self.sleep_mode_backend.resume(tags)
        wake_weights = tags is None or "weights" in tags
        if wake_weights and len(self._sleep_saved_buffers):
            model = self.model_runner.model
            for name, buffer in model.named_buffers():
                if name in self._sleep_saved_buffers:
                    buffer.data.copy_(self._sleep_saved_buffers[name].data)
            self._sleep_saved_buffers = {}

    def discard(self, tags):
        self.sleep_mode_backend.discard(tags)

    def _maybe_get_memory_pool_context(self, tag):
        if not self.vllm_config.model_config.enable_cumem_allocator:
            return nullcontext()
        allocator = get_mem_allocator_instance()
        if tag == "weights":
            assert allocator.get_current_usage() == 0, (
                "CuMem allocator can only be used for one instance per "
                "process.")
        return allocator.use_memory_pool(tag=tag)

    def init_device(self):
        self.device = "cuda:0"
        init_worker_distributed_environment(self.vllm_config, self.rank,
                                            self.distributed_init_method,
                                            self.local_rank)

    def load_model(self, *, load_dummy_weights=False):
        with self._maybe_get_memory_pool_context(tag="weights"), \
                set_current_vllm_config(self.vllm_config):
            self.model_runner = _StandinModelRunner()

    def initialize_from_config(self, kv_cache_config):
        mem_pool_context = self._maybe_get_memory_pool_context(tag="kv_cache")
        with self._maybe_get_memory_pool_context(tag="runtime"):
            with mem_pool_context:
                self.kv_cache = _StandinTensor(SIZE)
            self.runtime = _StandinTensor(4096)
        with self._maybe_get_memory_pool_context(tag="workspace"):
            self.workspace = _StandinTensor(4096)

    def shutdown(self):
        from vllm.device_allocator.cumem import CuMemAllocator
        if CuMemAllocator.instance is not None:
            CuMemAllocator.instance.release_pools()


def init_worker_distributed_environment(vllm_config, rank,
                                        distributed_init_method=None,
                                        local_rank=-1, backend="nccl"):
    parallel_config = vllm_config.parallel_config
    init_method = distributed_init_method or "env://"
    init_distributed_environment(parallel_config.world_size, rank,
                                 init_method, local_rank, backend, None)
    ensure_model_parallel_initialized(
        parallel_config.tensor_parallel_size,
        parallel_config.pipeline_parallel_size,
        parallel_config.prefill_context_parallel_size)
