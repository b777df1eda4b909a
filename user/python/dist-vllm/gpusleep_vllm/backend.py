# SPDX-License-Identifier: LGPL-2.1-or-later
"""The sleep-mode backend "gpusleep", for vLLM's SleepModeBackendFactory
(vllm/device_allocator/sleep_mode_backend.py; vLLM 0.33.0), which imports
this module when a worker's config selects it (--sleep-mode-backend
gpusleep): vLLM's cumem levels over gpusleep.vllm.GpuSleepAllocator, one
gpusleep domain per worker. Only imported inside vLLM."""

from typing import List, Optional, Tuple

from vllm.device_allocator.sleep_mode_backend import SleepModeBackend

import gpusleep.vllm as gv


class GpuSleepBackend(SleepModeBackend):
    """suspend(level): level 1 keeps the weights, runtime state and graph
    pools on the host and discards the rest; level 2 keeps runtime state
    and graph pools only. resume(tags), discard(tags): as vLLM's cumem
    backend, through the module."""

    def suspend(self, level: int = 1) -> None:
        self._state = "SUSPENDED"
        gv.suspend(level)

    def resume(self, tags: Optional[List[str]] = None) -> None:
        self._state = "RESUMING"
        gv.resume(tags)
        self._state = "RUNNING"

    def discard(self, tags: Tuple[str, ...]) -> None:
        gv.discard(tags)
        self._state = "SUSPENDED"

    @classmethod
    def preserves_communicators(cls) -> bool:
        # NCCL's memory is not in the pools: communicators stay
        return True
