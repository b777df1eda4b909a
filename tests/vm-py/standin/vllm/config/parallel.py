# SPDX-License-Identifier: GPL-2.0
"""The parallel configuration, what a worker's identity needs. Models
vllm 0.33.0 (vllm/config/parallel.py): the worker's rank (set by
WorkerBase.__init__), the PP and TP sizes and world_size (their product
with the prefill-context size), the data-parallel size and rank, and
data_parallel_index (the DP rank, kept for dense models too)."""

from dataclasses import dataclass, field

STANDIN_ONLY = ("Field",)


def Field(default=None, init=True, default_factory=None, **constraints):
    """pydantic's Field, as the stand-in's dataclasses take it."""
    if default_factory is not None:
        return field(default_factory=default_factory, init=init)
    return field(default=default, init=init)


@dataclass
class ParallelConfig:
    pipeline_parallel_size: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    prefill_context_parallel_size: int = Field(default=1, ge=1)
    data_parallel_size: int = Field(default=1, ge=1)
    data_parallel_rank: int = Field(default=0, ge=0)
    worker_cls: str = "auto"
    world_size: int = Field(init=False)
    rank: int = 0
    data_parallel_index: int = Field(init=False)

    def __post_init__(self) -> None:
        self.world_size = (
            self.pipeline_parallel_size
            * self.tensor_parallel_size
            * self.prefill_context_parallel_size
        )
        self.data_parallel_index = self.data_parallel_rank
