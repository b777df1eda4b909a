# SPDX-License-Identifier: GPL-2.0
"""SGLang's process-wide parallel context. Models sglang 0.5.23
(sglang/srt/runtime_context.py): run_scheduler_process publishes the
launcher's ranks (SpawnRanks: the WORLD rank, and the DP rank from the
data-parallel controller, None without one) before it makes the
Scheduler; everything reads them through get_parallel() (tp_rank,
tp_size, dp_rank, pp_rank, pp_size, attention TP/CP/DP ranks...), the
Scheduler has no rank attributes of its own. Here: one TP/PP group per
process, no DP attention; tp_group has no CPU group (no
torch.distributed in the tests)."""

import types
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class SpawnRanks:
    world_rank: int
    dp_rank: Optional[int] = None
    gpu_id: Optional[int] = None


class ParallelContext:
    def __init__(self):
        self.tp_rank = 0
        self.tp_size = 1
        self.dp_rank = None
        self.pp_rank = 0
        self.pp_size = 1
        self.attn_tp_rank = 0
        self.attn_cp_rank = 0
        self.attn_dp_enabled = False
        self.tp_group = types.SimpleNamespace(cpu_group=None)


_PARALLEL = ParallelContext()


def get_parallel():
    return _PARALLEL


def publish(server_args, *, role, hf_config=None, ranks=None):
    """The ranks from the WORLD rank as SGLang derives them
    (rank = tp_size * pp_rank + tp_rank), the DP rank as given."""
    p = _PARALLEL
    p.tp_size = server_args.tp_size
    p.pp_size = server_args.pp_size
    if ranks is not None:
        p.tp_rank = ranks.world_rank % p.tp_size
        p.pp_rank = ranks.world_rank // p.tp_size
        p.dp_rank = ranks.dp_rank
    p.attn_tp_rank = p.tp_rank
    p.attn_dp_enabled = bool(server_args.enable_dp_attention)
    return None
