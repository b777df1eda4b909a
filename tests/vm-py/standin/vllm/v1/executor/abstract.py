# SPDX-License-Identifier: GPL-2.0
"""The executor's sleep bookkeeping. Models vllm 0.33.0
(vllm/v1/executor/abstract.py): sleep(level) puts every worker to sleep
(collective_rpc) unless the weights already sleep, and marks weights and
kv_cache asleep; wake_up(tags) refuses a tag that is not asleep, wakes
the workers and marks them awake; discard(tags) drops those awake;
is_sleeping while any tag is."""

from abc import ABC, abstractmethod

SLEEP_TAGS = frozenset(("weights", "kv_cache"))


class Executor(ABC):
    def __init__(self, vllm_config):
        self.vllm_config = vllm_config
        self.sleeping_tags = set()
        self._init_executor()

    @abstractmethod
    def _init_executor(self):
        raise NotImplementedError

    def initialize_from_config(self, kv_cache_configs):
        self.collective_rpc("initialize_from_config", args=(kv_cache_configs,))

    @abstractmethod
    def collective_rpc(self, method, timeout=None, args=(), kwargs=None,
                       non_block=False):
        raise NotImplementedError

    def shutdown(self):
        pass

    @property
    def is_sleeping(self):
        return bool(self.sleeping_tags)

    def sleep(self, level=1):
        if "weights" in self.sleeping_tags:
            return
        self.collective_rpc("sleep", kwargs=dict(level=level))
        self.sleeping_tags |= SLEEP_TAGS

    def wake_up(self, tags=None):
        if not self.is_sleeping:
            return
        if tags:
            for tag in tags:
                if tag not in self.sleeping_tags:
                    return
        self.collective_rpc("wake_up", kwargs=dict(tags=tags))
        if tags:
            for tag in tags:
                self.sleeping_tags.remove(tag)
        else:
            self.sleeping_tags.clear()

    def discard(self, tags):
        tags_to_discard = set(tags) - self.sleeping_tags
        if not tags_to_discard:
            return
        try:
            self.collective_rpc("discard", args=(tuple(tags_to_discard),))
        finally:
            self.sleeping_tags |= tags_to_discard
