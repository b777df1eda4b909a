# SPDX-License-Identifier: GPL-2.0
"""AbortReq as SGLang's python/sglang/srt/managers/io_struct.py has it
(read, not copied): keyword fields, rid (from BaseReq, None: no single
request) and abort_all (False), which Scheduler.abort_request(recv_req)
reads to drop every waiting and running request. SGLang declares it a
msgspec Struct (kw_only) in its newest sources and a dataclass before;
both take AbortReq(abort_all=True)."""

from dataclasses import dataclass
from typing import Any, Dict, Optional


@dataclass
class AbortReq:
    rid: Optional[str] = None
    http_worker_ipc: Optional[str] = None
    abort_all: bool = False
    finished_reason: Optional[Dict[str, Any]] = None
    aborted_message: Optional[str] = None
