# SPDX-License-Identifier: GPL-2.0
"""The scheduler's requests that gpusleep.sglang and its tests use.
Models sglang 0.5.23 (sglang/srt/managers/io_struct.py): msgspec Structs
with keyword fields there, dataclasses here; rid and http_worker_ipc
come from BaseReq; AbortReq(abort_all=True) drops every waiting and
running request (its rid becomes "" when None); PauseGenerationReqInput
's mode is "abort" (handled by the tokenizer manager), "retract" or
"in_place" (the scheduler's); ContinueGenerationReqInput empties
PyTorch's cache by default."""

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional


@dataclass(kw_only=True)
class BaseReq:
    rid: Optional[str] = None
    http_worker_ipc: Optional[str] = None


@dataclass(kw_only=True)
class PauseGenerationReqInput(BaseReq):
    mode: Literal["abort", "retract", "in_place"] = "abort"


@dataclass(kw_only=True)
class ContinueGenerationReqInput(BaseReq):
    torch_empty_cache: bool = True


@dataclass(kw_only=True)
class UpdateWeightFromDiskReqInput(BaseReq):
    model_path: str
    load_format: Optional[str] = None


@dataclass(kw_only=True)
class ReleaseMemoryOccupationReqInput(BaseReq):
    tags: Optional[List[str]] = None


@dataclass(kw_only=True)
class ResumeMemoryOccupationReqInput(BaseReq):
    tags: Optional[List[str]] = None


@dataclass(kw_only=True)
class AbortReq(BaseReq):
    abort_all: bool = False
    finished_reason: Optional[Dict[str, Any]] = None
    abort_message: Optional[str] = None

    def __post_init__(self):
        if self.rid is None:
            self.rid = ""
