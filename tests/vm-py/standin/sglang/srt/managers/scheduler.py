# SPDX-License-Identifier: GPL-2.0
"""SGLang's Scheduler, with gpusleep's patch
(user/python/examples/sglang-0.5.23-scheduler.patch) applied. Models
sglang 0.5.23 (sglang/srt/managers/scheduler.py), the parts the patch
and gpusleep.sglang go through, in the same methods:

- __init__(server_args, port_args): the ranks are published before
  (runtime_context.publish; the Scheduler has no tp_rank), the hook is
  made before init_model_worker loads the model: its weights and its
  static state (buffers) in the weights region, with CPU backup only
  with enable_weights_cpu_backup (False by default, as SGLang's); then
  the KV cache and graph memory in their regions;
- event_loop_normal: ingest_requests (receive, broadcast, then process:
  with the patch, the receiving rank adds the hook's requests to what it
  broadcasts and every rank polls the hook with what it received); while
  generation is paused (_engine_paused) nothing else runs; else
  get_next_batch_to_run(running_batch, last_batch), which returns a
  NextBatchPlan, as get_new_batch_prefill(running_batch) does;
- pause_generation(in_place | retract), continue_generation,
  abort_request(AbortReq), is_fully_idle(ignore_waiting), flush_cache,
  and release / resume / weight updates through the weight updater.
A batch step reads every running request's weights and writes its KV:
memory released under it faults. No collectives (one process, TP 1)."""

import ctypes
import os

from sglang.srt.managers.io_struct import (AbortReq,
                                           ContinueGenerationReqInput,
                                           PauseGenerationReqInput,
                                           ReleaseMemoryOccupationReqInput,
                                           ResumeMemoryOccupationReqInput,
                                           UpdateWeightFromDiskReqInput)
from sglang.srt.managers.schedule_batch import NextBatchPlan, ScheduleBatch
from sglang.srt.managers.scheduler_components.weight_updater import \
    SchedulerWeightUpdaterManager
from sglang.srt.runtime_context import get_parallel
from sglang.srt.utils.torch_memory_saver_adapter import \
    TorchMemorySaverAdapter

#: what the stand-in adds for the tests: its requests, tensors and model
STANDIN_ONLY = ("_StandinReq", "_StandinBuffer", "_StandinModel",
                "_StandinTpWorker", "_standin_alloc", "SIZE")
SIZE = 1 << 20


def _standin_alloc(nbytes):
    """nbytes of device memory (the stand-in torch's): its address."""
    import torch
    t = torch.empty(nbytes)
    ptr = t.data_ptr() if hasattr(t, "data_ptr") else t
    if not ptr:	# PyTorch's own allocator: plain memory
        buf = ctypes.create_string_buffer(nbytes)
        _standin_alloc.keep.append(buf)
        ptr = ctypes.addressof(buf)
    return ptr


_standin_alloc.keep = []


class _StandinReq:
    """A generate request of `left` steps."""

    def __init__(self, rid, left):
        self.rid = rid
        self.left = left

    def finished(self):
        return self.left <= 0


class _StandinBuffer:
    """Device memory: a pointer and a size (clone: a host copy)."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes

    def clone(self):
        return ctypes.string_at(self.ptr, self.nbytes)

    def copy_(self, src):
        ctypes.memmove(self.ptr, src, self.nbytes)


class _StandinModel:
    """Weights (what a push writes) and a buffer (what it does not: the
    static state)."""

    def __init__(self, rank):
        self.weights = _StandinBuffer(_standin_alloc(SIZE), SIZE)
        self.rotary = _StandinBuffer(_standin_alloc(4096), 4096)
        ctypes.memset(self.weights.ptr, rank + 1, SIZE)
        ctypes.memset(self.rotary.ptr, 0x70 + rank, 4096)

    def named_buffers(self):
        return [("rotary", self.rotary)]

    def load_from_disk(self, path):
        # SGLang's loader reads path/*.safetensors: the tensor "w" of the
        # file gpusleep.weights.stage wrote (gpusleep.weights.load)
        import gpusleep.weights
        (w,) = [t for t in gpusleep.weights.load(path) if t.name == "w"]
        data = bytes(w.data)
        ctypes.memmove(self.weights.ptr, data, min(len(data), SIZE))


class _StandinTpWorker:
    def __init__(self, model):
        self.model_runner = type("ModelRunner", (), {})()
        self.model_runner.model = model


class Scheduler:
    def __init__(self, server_args, port_args):
        self.server_args = server_args
        self.gracefully_exit = False
        self.draft_worker = None
        self.init_ipc_channels(port_args)

        # gpusleep: this scheduler's domain, before the model is loaded
        from gpusleep.sglang import SchedulerHook

        self.gpusleep = SchedulerHook(self)

        # Launch a model worker and draft model worker if using speculative decoding
        self.init_model_worker()
        self.memory_saver_adapter = TorchMemorySaverAdapter.create(
            enable=server_args.enable_memory_saver)
        with self.memory_saver_adapter.region("kv_cache"):
            self.kv = _StandinBuffer(_standin_alloc(SIZE), SIZE)
        with self.memory_saver_adapter.region("cuda_graph"):
            self.graph = _StandinBuffer(_standin_alloc(4096), 4096)
        ctypes.memset(self.kv.ptr, 0xcd, SIZE)
        self.init_running_status()
        self.init_weight_updater()

    def init_ipc_channels(self, port_args):
        self.recv_from_tokenizer = port_args.tokenizer

    def init_model_worker(self):
        adapter = TorchMemorySaverAdapter.create(
            enable=self.server_args.enable_memory_saver)
        with adapter.region(
                "weights",
                enable_cpu_backup=self.server_args.enable_weights_cpu_backup):
            model = _StandinModel(get_parallel().tp_rank +
                                  (get_parallel().dp_rank or 0))
        self.tp_worker = _StandinTpWorker(model)

    def init_running_status(self):
        self.running_batch = ScheduleBatch(reqs=[])
        self.waiting_queue = []
        self.last_batch = None
        self.chunked_req = None
        self._engine_paused = False
        self.finished = 0
        self.abort_all_calls = 0
        self.flushes = 0

    def init_weight_updater(self) -> None:
        self.weight_updater = SchedulerWeightUpdaterManager(
            tp_worker=self.tp_worker,
            draft_worker=self.draft_worker,
            memory_saver_adapter=self.memory_saver_adapter,
            flush_cache=self.flush_cache,
            is_fully_idle=self.is_fully_idle,
            scheduler=self,
        )

    def _poll_timeout_aborts(self):
        return []

    def ingest_requests(self, stop_at_pause=False):
        local_reqs = []
        if (
            get_parallel().pp_rank == 0
            and get_parallel().attn_tp_rank == 0
            and get_parallel().attn_cp_rank == 0
        ):
            local_reqs = self._poll_timeout_aborts()
            local_reqs += self.gpusleep.local_requests()
        # receive and broadcast (one rank here): the pulled requests,
        # then the local ones
        recv_reqs = [*self.recv_from_tokenizer.recv_requests(), *local_reqs]
        self.gpusleep.poll(recv_reqs)
        self.process_input_requests(recv_reqs)
        return recv_reqs

    def process_input_requests(self, recv_reqs):
        for req in recv_reqs:
            if isinstance(req, _StandinReq):
                self.waiting_queue.append(req)
            elif isinstance(req, AbortReq):
                self.abort_request(req)
            elif isinstance(req, PauseGenerationReqInput):
                self.pause_generation(req)
            elif isinstance(req, ContinueGenerationReqInput):
                self.continue_generation(req)
            elif isinstance(req, ReleaseMemoryOccupationReqInput):
                self.weight_updater.release_memory_occupation(req)
            elif isinstance(req, ResumeMemoryOccupationReqInput):
                self.weight_updater.resume_memory_occupation(req)
            elif isinstance(req, UpdateWeightFromDiskReqInput):
                self.weight_updater.update_weights_from_disk(req)
            else:
                raise ValueError(f"no handler for {req!r}")

    def event_loop_normal(self):
        while True:
            if self.gracefully_exit:
                break
            self.ingest_requests()
            if self._engine_paused:
                continue
            plan = self.get_next_batch_to_run(
                running_batch=self.running_batch, last_batch=self.last_batch)
            self.running_batch = plan.running_batch
            batch = plan.batch_to_run
            if batch:
                for r in batch.reqs:	# the forward: weights read, KV written
                    ctypes.string_at(self.tp_worker.model_runner.model
                                     .weights.ptr, 64)
                    ctypes.memset(self.kv.ptr, 1, 64)
                    r.left -= 1
                self.finished += sum(1 for r in batch.reqs if r.finished())
            self.last_batch = batch

    def get_next_batch_to_run(self, running_batch, last_batch):
        running_batch.reqs = [r for r in running_batch.reqs
                              if not r.finished()]
        prefill_plan = self.get_new_batch_prefill(running_batch)
        running_batch = prefill_plan.running_batch
        if prefill_plan.batch_to_run is not None:
            running_batch.reqs += prefill_plan.batch_to_run.reqs
        ret = None if running_batch.is_empty() else \
            ScheduleBatch(reqs=list(running_batch.reqs))
        return NextBatchPlan(batch_to_run=ret, running_batch=running_batch)

    def get_new_batch_prefill(self, running_batch):
        if not self.waiting_queue and self.chunked_req is None:
            return NextBatchPlan(batch_to_run=None,
                                 running_batch=running_batch)
        ret = ScheduleBatch(reqs=self.waiting_queue)
        self.waiting_queue = []
        return NextBatchPlan(batch_to_run=ret, running_batch=running_batch)

    def is_fully_idle(self, for_health_check=False, ignore_waiting=False):
        idle = (self.running_batch.is_empty() and self.chunked_req is None
                and (self.last_batch is None or self.last_batch.is_empty()))
        if not ignore_waiting:
            idle &= len(self.waiting_queue) == 0
        return idle

    def flush_cache(self, empty_cache=True):
        self.flushes += 1
        if self.is_fully_idle(ignore_waiting=self._engine_paused):
            self.last_batch = None
            return True
        return False

    def abort_request(self, recv_req):
        if recv_req.abort_all:
            self.abort_all_calls += 1
        drop = [r for r in self.waiting_queue + self.running_batch.reqs
                if recv_req.abort_all or r.rid.startswith(recv_req.rid)]
        self.waiting_queue = [r for r in self.waiting_queue if r not in drop]
        for r in drop:
            r.left = -1	# finished, aborted: leaves at the next step

    def pause_generation(self, recv_req):
        assert recv_req.mode in ("in_place", "retract")
        self._engine_paused = True
        if recv_req.mode == "in_place":
            return
        retract = [r for r in self.running_batch.reqs if not r.finished()]
        self.last_batch = None
        self.running_batch.reqs = []
        self.waiting_queue += retract

    def continue_generation(self, recv_req):
        self._engine_paused = False
