# SPDX-License-Identifier: GPL-2.0
"""A batch and the scheduler's plan. Models sglang 0.5.23
(sglang/srt/managers/schedule_batch.py): get_next_batch_to_run and
get_new_batch_prefill return a NextBatchPlan, whose batch_to_run the
event loop runs (None: nothing) and whose running_batch becomes the
scheduler's. A ScheduleBatch's reqs are the requests in it."""

from dataclasses import dataclass
from typing import Any, List, Optional


@dataclass
class ScheduleBatch:
    reqs: List[Any]

    def batch_size(self):
        return len(self.reqs)

    def is_empty(self):
        return len(self.reqs) == 0


@dataclass
class NextBatchPlan:
    batch_to_run: Optional[ScheduleBatch]
    running_batch: ScheduleBatch
