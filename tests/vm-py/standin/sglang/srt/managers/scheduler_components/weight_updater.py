# SPDX-License-Identifier: GPL-2.0
"""The scheduler's weight updates and SGLang's own release / resume of
its memory. Models sglang 0.5.23
(sglang/srt/managers/scheduler_components/weight_updater.py):

release_memory_occupation(tags) asserts the scheduler is idle (waiting
requests aside while generation is paused), adds the tags to
offload_tags, then in GPU_MEMORY_ALL_TYPES order: kv_cache (pause, then
flush_cache), weights (_export_static_state of the model into
stashed_model_static_state, a TP barrier, pause), cuda_graph (pause).
resume_memory_occupation(tags) takes them out of offload_tags (a tag
not there: KeyError), then cuda_graph, weights (resume, barrier,
_import_static_state, the stash deleted), kv_cache. The static state is
the model's buffers, which a weight push does not carry."""

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sglang.srt.constants import (GPU_MEMORY_ALL_TYPES,
                                  GPU_MEMORY_TYPE_CUDA_GRAPH,
                                  GPU_MEMORY_TYPE_KV_CACHE,
                                  GPU_MEMORY_TYPE_WEIGHTS)


@dataclass(kw_only=True, slots=True)
class SchedulerWeightUpdaterManager:
    tp_worker: Any
    draft_worker: Any
    memory_saver_adapter: Any
    flush_cache: Callable[..., bool]
    is_fully_idle: Callable[..., bool]
    scheduler: Optional[Any] = None
    metrics_collector: Optional[Any] = None
    offload_tags: set = field(default_factory=set)
    stashed_model_static_state: Any = None

    def update_weights_from_disk(self, recv_req):
        self.tp_worker.model_runner.model.load_from_disk(recv_req.model_path)
        self.flush_cache()

    def release_memory_occupation(self, recv_req):
        scheduler = self.scheduler
        assert self.is_fully_idle(
            ignore_waiting=scheduler is not None and scheduler._engine_paused
        ), "release_memory_occupation should be called only when server is idle."
        tags = recv_req.tags
        if tags is None or len(tags) == 0:
            tags = GPU_MEMORY_ALL_TYPES
        for tag in tags:
            self.offload_tags.add(tag)
        if GPU_MEMORY_TYPE_KV_CACHE in tags:
            self.memory_saver_adapter.pause(GPU_MEMORY_TYPE_KV_CACHE)
            self.flush_cache()
        if GPU_MEMORY_TYPE_WEIGHTS in tags:
            self.stashed_model_static_state = _export_static_state(
                self.tp_worker.model_runner.model)
            self.memory_saver_adapter.pause(GPU_MEMORY_TYPE_WEIGHTS)
        if GPU_MEMORY_TYPE_CUDA_GRAPH in tags:
            self.memory_saver_adapter.pause(GPU_MEMORY_TYPE_CUDA_GRAPH)

    def resume_memory_occupation(self, recv_req):
        tags = recv_req.tags
        if tags is None or len(tags) == 0:
            tags = GPU_MEMORY_ALL_TYPES
        for tag in tags:
            self.offload_tags.remove(tag)
        if GPU_MEMORY_TYPE_CUDA_GRAPH in tags:
            self.memory_saver_adapter.resume(GPU_MEMORY_TYPE_CUDA_GRAPH)
        if GPU_MEMORY_TYPE_WEIGHTS in tags:
            self.memory_saver_adapter.resume(GPU_MEMORY_TYPE_WEIGHTS)
            _import_static_state(self.tp_worker.model_runner.model,
                                 self.stashed_model_static_state)
            del self.stashed_model_static_state
        if GPU_MEMORY_TYPE_KV_CACHE in tags:
            self.memory_saver_adapter.resume(GPU_MEMORY_TYPE_KV_CACHE)


def _export_static_state(model):
    return dict(buffers=[(name, buffer.clone())
                         for name, buffer in model.named_buffers()])


def _import_static_state(model, static_params):
    named = dict(model.named_buffers())
    for name, tensor in static_params["buffers"]:
        named[name].copy_(tensor)
