# SPDX-License-Identifier: GPL-2.0
"""The engine core's sleep, in process. Models vllm 0.33.0
(vllm/v1/engine/core.py EngineCore):

- pause_scheduler(mode, clear_cache): "abort" finishes every request
  (aborted) and queues new ones; "keep" pauses everything, requests kept;
  "wait" (let what runs finish) cannot be used in process (ValueError;
  the engine-core process supports it); the prefix cache is reset when
  clear_cache;
- sleep(level, mode): pauses the scheduler with mode (clearing the
  prefix cache from level 1 on); level 0 stops there, levels 1 and 2 put
  the executor to sleep;
- wake_up(tags): "scheduling" alone resumes scheduling; other tags wake
  the executor's memory; scheduling resumes once nothing sleeps; returns
  whether everything is awake.
Requests run a number of steps each."""

from enum import IntEnum

STANDIN_ONLY = ("_StandinPause",)


class _StandinPause(IntEnum):
    UNPAUSED = 0
    PAUSED_NEW = 1
    PAUSED_ALL = 2


class EngineCore:
    def __init__(self, vllm_config, executor_class, log_stats,
                 executor_fail_callback=None, include_finished_set=False):
        self.vllm_config = vllm_config
        self.model_executor = executor_class(vllm_config)
        self.model_executor.initialize_from_config([None])
        self.pause_state = _StandinPause.UNPAUSED
        self.running, self.queued = [], []
        self.finished = self.aborted = self.prefix_cache_resets = 0

    def add_request(self, request, request_wave=0):
        (self.queued if self.pause_state else self.running).append(request)

    def step(self):
        if self.pause_state == _StandinPause.PAUSED_ALL:
            return {}, False
        for r in self.running:
            r[0] -= 1
        self.finished += sum(1 for r in self.running if r[0] <= 0)
        self.running = [r for r in self.running if r[0] > 0]
        return {}, bool(self.running)

    def reset_prefix_cache(self, reset_running_requests=False,
                           reset_connector=False):
        self.prefix_cache_resets += 1
        return True

    def pause_scheduler(self, mode="abort", clear_cache=True):
        if mode not in ("abort", "wait", "keep"):
            raise ValueError(f"Invalid pause mode: {mode}")
        if mode == "wait":
            raise ValueError("'wait' mode can't be used in inproc-engine mode")
        if mode == "abort":
            self.aborted += len(self.running)
            self.running = []
        self.pause_state = _StandinPause.PAUSED_ALL if mode == "keep" \
            else _StandinPause.PAUSED_NEW
        if clear_cache:
            self.reset_prefix_cache()

    def resume_scheduler(self):
        self.pause_state = _StandinPause.UNPAUSED
        self.running += self.queued
        self.queued = []

    def is_scheduler_paused(self):
        return self.pause_state != _StandinPause.UNPAUSED

    def sleep(self, level=1, mode="abort"):
        self.pause_scheduler(mode=mode, clear_cache=level >= 1)
        if level < 1:
            return None
        self.model_executor.sleep(level)
        return None

    def wake_up(self, tags=None):
        if tags is not None and "scheduling" in tags:
            tags = [t for t in tags if t != "scheduling"]
        if tags is None or tags:
            self.model_executor.wake_up(tags)
        fully_awake = not self.model_executor.is_sleeping
        if fully_awake:
            self.resume_scheduler()
        return fully_awake

    def is_sleeping(self):
        return self.is_scheduler_paused() or self.model_executor.is_sleeping
