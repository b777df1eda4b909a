# SPDX-License-Identifier: LGPL-2.1-or-later
"""SGLang's scheduler as a gpusleep engine: one domain per TP rank, named
"<engine>-tp<rank>", over the process's torch_memory_saver adapter (the
gpusleep-torch-memory-saver distribution installed in TMS's place).

Three lines in SGLang's Scheduler (docs/integrations/sglang.md):

    self.gpusleep = SchedulerHook(self, engine="llm0", tp_rank=self.tp_rank)
    self.gpusleep.poll()          # once per event-loop iteration
    if self.gpusleep.paused: ...  # admit no new request (prefill batch)

The drain in SGLang's terms: the scheduler stops admitting (paused), lets
what runs finish (abort_inflight: the scheduler's own abort path,
abort_request(AbortReq(abort_all=True)), as in SGLang's
python/sglang/srt/managers/scheduler.py Scheduler.abort_request and
io_struct.py AbortReq), and
the drain completes once scheduler.is_fully_idle() holds (SGLang's own
precondition of release_memory_occupation); the cache reset is
scheduler.flush_cache(); resume_sched lifts the pause. A release started
by SGLang itself (release_memory_occupation, which pauses each tag through
torch_memory_saver) goes through the same domain: the scheduler is idle
then, so the drain is done at once.
"""

from __future__ import annotations

import errno
import os
import select
from typing import TYPE_CHECKING, Optional

from .engine import PENDING
from .torch_memory_saver import torch_memory_saver

if TYPE_CHECKING:
    from sglang.srt.managers.scheduler import Scheduler

    from .torch_memory_saver import TorchMemorySaver


def domain_name(engine: str, tp_rank: int) -> str:
    """The naming convention: what a trainer derives from the engine's name
    and its TP size (the group is named engine)."""
    return f"{engine}-tp{tp_rank}"


def abort_all_request() -> object:
    """SGLang's request to abort every waiting and running request:
    AbortReq(abort_all=True) (sglang.srt.managers.io_struct; a keyword
    field of a dataclass, a msgspec Struct in newer SGLang). Imported
    here, in the scheduler's process, where SGLang is."""
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


class SchedulerHook:
    """The gpusleep side of one SGLang scheduler (one TP rank)."""

    def __init__(self, scheduler: Scheduler, engine: Optional[str] = None,
                 tp_rank: int = 0,
                 saver: Optional[TorchMemorySaver] = None) -> None:
        self.scheduler = scheduler
        self.name = domain_name(engine or os.environ.get(
            "GPUSLEEP_ENGINE", "sglang"), tp_rank)
        self.paused = False		# admission stopped
        self.draining = False
        self.saver = saver or torch_memory_saver
        self.engine = self.saver.configure(
            name=self.name, prefix_caching=True, prefix_cache_reset=True,
            drain=self._drain, drain_cancelled=self._drain_cancelled,
            reset_caches=self._reset_caches,
            resume_sched=self._resume_sched)

    # the module's events, run by poll() (or by pause/resume themselves)
    def _drain(self, tags: list[str], abort_inflight: bool) -> object:
        self.paused = True
        if abort_inflight:
            self.scheduler.abort_request(abort_all_request())
        if self.scheduler.is_fully_idle():
            return None
        self.draining = True
        return PENDING

    def _drain_cancelled(self):
        # stays paused: only resume_sched says go
        self.draining = False

    def _reset_caches(self):
        return 0 if self.scheduler.flush_cache() else -errno.EBUSY

    def _resume_sched(self):
        self.paused = False

    def poll(self) -> None:
        """Once per scheduler iteration: run the queued events (never
        blocks), and answer the drain once the scheduler is idle."""
        fd = self.engine.fileno()
        if select.select([fd], [], [], 0)[0]:
            self.engine.dispatch()
        if self.draining and self.scheduler.is_fully_idle():
            self.draining = False
            self.engine.complete(0)
