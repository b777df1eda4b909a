# SPDX-License-Identifier: LGPL-2.1-or-later
"""SGLang's scheduler as a gpusleep engine: one domain per scheduler
process, named "<engine>-tp<tp_rank>" ("<engine>-dp<dp_rank>-tp<tp_rank>"
under SGLang's data-parallel controller), over the process's
torch_memory_saver adapter (the gpusleep-torch-memory-saver distribution
installed in TMS's place). Checked against SGLang 0.5.23.

Three additions to sglang/srt/managers/scheduler.py (the patch,
user/python/examples/sglang-0.5.23-scheduler.patch;
docs/integrations/sglang.md):

    self.gpusleep = SchedulerHook(self)           # __init__, before the model
    local_reqs += self.gpusleep.local_requests()  # ingest_requests, rank 0
    self.gpusleep.poll(recv_reqs)                 # ingest_requests, each rank

The ranks are SGLang's own (sglang.srt.runtime_context.get_parallel():
tp_rank, dp_rank; the Scheduler has no tp_rank attribute). The tags are
SGLang's, in SGLang's release order (sglang.srt.constants
GPU_MEMORY_ALL_TYPES: kv_cache, weights, cuda_graph), so the module
unmaps them in the order SGLang's own release_memory_occupation pauses
them.

A release started by a trainer (gpusleep.Group.release) goes through
SGLang's own sequence, in lockstep on every TP rank:

1. drain: the receiving rank (pp, attention TP and CP rank 0) puts
   SGLang's own requests into the input it broadcasts to every TP rank:
   AbortReq(abort_all=True) first when abort_inflight, then
   PauseGenerationReqInput(mode="retract") (running requests go back to
   the waiting queue; their KV is recomputed after the resume). Every
   rank processes them in the same iteration. The drain of each rank is
   done once SGLang is paused and idle (is_fully_idle(ignore_waiting=
   True), SGLang's own precondition of a release); then SGLang's static
   state is exported when the weights go (_export_static_state of the
   model, into SchedulerWeightUpdaterManager.stashed_model_static_state,
   where SGLang's own resume_memory_occupation finds it), and the tags
   are added to its offload_tags.
2. reset caches: Scheduler.flush_cache().
3. the tags are unmapped by this process's agent, kv_cache, weights,
   cuda_graph.

A resume remaps them; at the first poll() with the weights mapped again
the static state is imported (_import_static_state: the model's buffers,
which a weight push does not carry, as they were), before any request
is processed; once every TP rank's domain may schedule again (an
all-reduce over SGLang's TP CPU group, in the iterations gpusleep holds
the pause), every rank calls continue_generation in the same iteration
(unless generation was paused before gpusleep paused it).

The weights: SGLang's default, enable_weights_cpu_backup=False, loads
them in a region without CPU backup, so a release discards them: after
resume(["weights"]) their memory is back, zero, and the trainer must push
the weights (update_weights_from_distributed / _from_disk / _from_tensor)
before it resumes the rest. With --enable-weights-cpu-backup they come
back as they were.

A release SGLang starts itself (release_memory_occupation: it pauses each
tag through torch_memory_saver, from its own request handler, already in
lockstep and idle by its assertion) is a release of the same domain from
the scheduler's thread: the hook answers its drain at once and leaves
the static state and offload_tags to SGLang.
"""

from __future__ import annotations

import errno
import os
import select
from typing import TYPE_CHECKING, Any, Iterable, Optional

from . import errors
from .engine import PENDING
from .torch_memory_saver import torch_memory_saver

if TYPE_CHECKING:
    from sglang.srt.managers.scheduler import Scheduler

    from .engine import Engine
    from .torch_memory_saver import TorchMemorySaver

DEV = "/dev/gpusleep"
#: the rid of the PauseGenerationReqInput the hook puts into SGLang's input
PAUSE_RID = "gpusleep-pause"
#: SGLang's memory tags in its release order, where SGLang cannot be
#: imported (sglang.srt.constants GPU_MEMORY_ALL_TYPES in 0.5.23)
SGLANG_TAGS = ("kv_cache", "weights", "cuda_graph")


def domain_name(engine: str, tp_rank: int,
                dp_rank: Optional[int] = None) -> str:
    """The naming convention: "<engine>-tp<tp_rank>", or
    "<engine>-dp<dp_rank>-tp<tp_rank>" when SGLang's data-parallel
    controller gives the scheduler a dp_rank (each DP replica has TP ranks
    0..tp_size-1 of its own)."""
    if dp_rank is None:
        return f"{engine}-tp{tp_rank}"
    return f"{engine}-dp{dp_rank}-tp{tp_rank}"


def domain_names(engine: str, tp_size: int, dp_size: int = 1) -> list[str]:
    """Every scheduler's domain name of an engine of dp_size replicas of
    tp_size ranks, as a trainer derives them (dp_size 1: no DP
    controller, no dp part)."""
    if dp_size == 1:
        return [domain_name(engine, r) for r in range(tp_size)]
    return [domain_name(engine, r, d) for d in range(dp_size)
            for r in range(tp_size)]


def _parallel() -> Any:
    try:
        from sglang.srt.runtime_context import get_parallel
    except ImportError as e:
        raise RuntimeError(
            "gpusleep.sglang: needs SGLang's sglang.srt.runtime_context."
            f"get_parallel (SGLang 0.5.23), which does not import here ({e})"
            "; pass tp_rank= and dp_rank= to SchedulerHook") from e
    return get_parallel()


def scheduler_ranks() -> tuple[Optional[int], int]:
    """(dp_rank, tp_rank) of this scheduler process, from SGLang's
    ParallelContext (dp_rank None without the data-parallel controller)."""
    p = _parallel()
    return p.dp_rank, p.tp_rank


def release_order() -> list[str]:
    """SGLang's memory tags in the order its release_memory_occupation
    pauses them (sglang.srt.constants.GPU_MEMORY_ALL_TYPES), else
    SGLANG_TAGS."""
    try:
        from sglang.srt.constants import GPU_MEMORY_ALL_TYPES
    except ImportError:
        return list(SGLANG_TAGS)
    return list(GPU_MEMORY_ALL_TYPES)


def _io_struct(name: str) -> Any:
    try:
        from sglang.srt.managers import io_struct
    except ImportError as e:
        raise RuntimeError(
            f"gpusleep.sglang: needs SGLang's sglang.srt.managers.io_struct."
            f"{name}, which does not import here ({e})") from e
    cls = getattr(io_struct, name, None)
    if cls is None:
        raise RuntimeError(f"gpusleep.sglang: this SGLang's io_struct has "
                           f"no {name} (SGLang 0.5.23 has)")
    return cls


def abort_all_request() -> object:
    """SGLang's request to abort every waiting and running request:
    AbortReq(abort_all=True) (sglang.srt.managers.io_struct; a msgspec
    Struct with keyword fields in SGLang 0.5.23). Imported here, in the
    scheduler's process, where SGLang is."""
    try:
        from sglang.srt.managers.io_struct import AbortReq
    except ImportError as e:
        raise RuntimeError(
            "gpusleep.sglang: abort_inflight needs SGLang's "
            "sglang.srt.managers.io_struct.AbortReq, which does not "
            f"import here ({e})") from e
    try:
        return AbortReq(abort_all=True)
    except TypeError as e:
        raise RuntimeError(
            "gpusleep.sglang: abort_inflight needs an SGLang whose AbortReq "
            f"has abort_all (this one is too old: {e})") from e


def pause_request() -> object:
    """SGLang's PauseGenerationReqInput(mode="retract"), marked as the
    hook's (rid PAUSE_RID)."""
    return _io_struct("PauseGenerationReqInput")(mode="retract",
                                                 rid=PAUSE_RID)


def continue_request() -> object:
    """SGLang's ContinueGenerationReqInput()."""
    return _io_struct("ContinueGenerationReqInput")()


def _static_state() -> tuple[Any, Any]:
    try:
        from sglang.srt.managers.scheduler_components.weight_updater import (
            _export_static_state, _import_static_state)
    except ImportError as e:
        raise RuntimeError(
            "gpusleep.sglang: needs SGLang's _export_static_state / "
            "_import_static_state (sglang.srt.managers.scheduler_components"
            f".weight_updater in SGLang 0.5.23): {e}") from e
    return _export_static_state, _import_static_state


class SchedulerHook:
    """The gpusleep side of one SGLang scheduler process (one TP rank of
    one DP replica). tp_rank, dp_rank: SGLang's (get_parallel()) unless
    given; engine: the engine's name (else $GPUSLEEP_ENGINE, else
    "sglang"). Raises errors.ModuleNotLoaded without /dev/gpusleep, and
    RuntimeError for what the patch does not cover (pipeline parallelism,
    DP attention)."""

    def __init__(self, scheduler: Scheduler, engine: Optional[str] = None,
                 tp_rank: Optional[int] = None,
                 dp_rank: Optional[int] = None,
                 saver: Optional[TorchMemorySaver] = None) -> None:
        if not os.path.exists(DEV):
            raise errors.ModuleNotLoaded(DEV)
        self.scheduler = scheduler
        self.leader = True		# receives and broadcasts the input
        self.tp_size = 1
        self._cpu_group = None
        if tp_rank is None:
            p = _parallel()
            tp_rank, dp_rank = p.tp_rank, p.dp_rank
            if p.pp_size > 1:
                raise RuntimeError(
                    "gpusleep.sglang: pipeline parallelism (pp_size "
                    f"{p.pp_size}) runs event loops the patch does not "
                    "cover")
            if getattr(p, "attn_dp_enabled", False):
                raise RuntimeError(
                    "gpusleep.sglang: DP attention broadcasts the hook's "
                    "requests to one attention-DP group only, while every "
                    "group must pause in the same iteration: not "
                    "supported")
            self.leader = (p.pp_rank == 0 and p.attn_tp_rank == 0 and
                           p.attn_cp_rank == 0)
            self.tp_size = p.tp_size
            if self.tp_size > 1:
                self._cpu_group = p.tp_group.cpu_group
        self.tp_rank, self.dp_rank = tp_rank, dp_rank
        self.name = domain_name(engine or os.environ.get(
            "GPUSLEEP_ENGINE", "sglang"), tp_rank, dp_rank)
        self.tags = release_order()
        self._drain: Optional[tuple[list[str], bool]] = None
        self._outbox: list[object] = []
        self._held = False		# gpusleep's pause, seen by every rank
        self._user_paused = False	# generation was paused before it
        self._in_poll = False
        self.saver = saver or torch_memory_saver
        try:
            self.engine: Engine = self.saver.configure(
                name=self.name, tags=self.tags, prefix_caching=True,
                prefix_cache_reset=True, drain=self._on_drain,
                drain_cancelled=self._on_drain_cancelled,
                reset_caches=self._on_reset_caches)
        except FileNotFoundError as e:
            raise errors.ModuleNotLoaded(DEV) from e

    @property
    def paused(self) -> bool:
        """True while the scheduler must not schedule: gpusleep holds
        SGLang's generation paused, or the module's level says so (from a
        drain until resume scheduling)."""
        return self._held or self.engine.sched_paused

    # -- the module's events (run by poll, or by the adapter's own
    #    pause/resume when SGLang releases itself) -------------------------
    def _on_drain(self, tags: list[str], abort_inflight: bool) -> object:
        s = self.scheduler
        wu = getattr(s, "weight_updater", None)
        if not self._in_poll and wu is not None and \
                set(tags) <= wu.offload_tags and \
                s.is_fully_idle(ignore_waiting=s._engine_paused):
            # SGLang's own release_memory_occupation, from its handler
            # (it adds the tags to offload_tags before it pauses them):
            # idle by its assertion, in lockstep; it stashes the state
            return None
        self._drain = (tags, abort_inflight)
        if self.leader:
            if abort_inflight:
                self._outbox.append(abort_all_request())
            self._pause()
        return PENDING

    def _pause(self) -> None:
        """Queue SGLang's pause (the receiving rank), once."""
        if not self._held and not any(
                getattr(r, "rid", None) == PAUSE_RID for r in self._outbox):
            self._outbox.append(pause_request())

    def _on_drain_cancelled(self) -> None:
        # scheduling stays paused: only resume_sched (the level) says go
        self._drain = None

    def _on_reset_caches(self) -> int:
        return 0 if self.scheduler.flush_cache() else -errno.EBUSY

    # -- the scheduler's loop -----------------------------------------------
    def local_requests(self) -> list[object]:
        """On the receiving rank, in ingest_requests: SGLang requests the
        hook queued (AbortReq, PauseGenerationReqInput), broadcast to every
        TP rank with the input."""
        out, self._outbox = self._outbox, []
        return out

    def poll(self, recv_reqs: Iterable[object] = ()) -> None:
        """Once per scheduler iteration, in ingest_requests, with the
        requests every TP rank received: run the module's queued events
        (never blocks), answer the drain once SGLang is paused and idle,
        bring the static state back once the weights are, and end the
        pause once every rank may schedule."""
        fd = self.engine.fileno()
        if select.select([fd], [], [], 0)[0]:
            self._in_poll = True
            try:
                self.engine.dispatch()
            finally:
                self._in_poll = False
        s = self.scheduler
        for r in recv_reqs:
            if getattr(r, "rid", None) == PAUSE_RID and \
                    type(r).__name__ == "PauseGenerationReqInput" and \
                    not self._held:
                self._held = True
                self._user_paused = s._engine_paused
        if self.leader and self.engine.sched_paused and \
                not s._engine_paused:
            # the module's level says no (a release SGLang started
            # itself, without pausing generation first): SGLang's pause
            self._pause()
        self._restore()
        if self._drain is not None and s._engine_paused and \
                s.is_fully_idle(ignore_waiting=True):
            self._drained()
        if self._held and self._all_ranks(self._drain is None and
                                          not self.engine.sched_paused and
                                          self._stash() is None):
            self._held = False
            if not self._user_paused:
                s.continue_generation(continue_request())

    def _stash(self) -> Any:
        wu = getattr(self.scheduler, "weight_updater", None)
        return getattr(wu, "stashed_model_static_state", None)

    def _drained(self) -> None:
        tags, _ = self._drain
        wu = self.scheduler.weight_updater
        if "weights" in tags and self._stash() is None:
            export, _ = _static_state()
            wu.stashed_model_static_state = export(
                self.scheduler.tp_worker.model_runner.model)
        wu.offload_tags.update(tags)
        self._drain = None
        self.engine.complete(0)

    def _restore(self) -> None:
        """The static state back once the weights are mapped again, and
        SGLang's offload_tags as the module's released tags (outside
        SGLang's own handlers, which keep both themselves)."""
        wu = getattr(self.scheduler, "weight_updater", None)
        if wu is None or (self._stash() is None and not wu.offload_tags):
            return
        st = self.engine.state()
        if st.op_in_flight or self._drain is not None:
            return		# a release or resume under way: after it
        released = set(st.released)
        if self._stash() is not None and "weights" not in released:
            _, imp = _static_state()
            imp(self.scheduler.tp_worker.model_runner.model, self._stash())
            wu.stashed_model_static_state = None
        wu.offload_tags.intersection_update(released)

    def _all_ranks(self, ready: bool) -> bool:
        """ready on every TP rank (the TP CPU group's all-reduce; every
        rank calls it in the same iteration: while gpusleep's pause is
        held, which every rank saw in the same input)."""
        if self._cpu_group is None:
            return ready
        import torch
        import torch.distributed as dist
        t = torch.tensor([1 if ready else 0], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self._cpu_group)
        return bool(t.item())
