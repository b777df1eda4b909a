# SPDX-License-Identifier: GPL-2.0
"""Pluggable sleep-mode backends. Models vllm 0.33.0
(vllm/device_allocator/sleep_mode_backend.py): a SleepModeBackend frees
(suspend(level)) and restores (resume(tags)) a worker's GPU state, may
discard(tags), and reports its state; SleepModeBackendFactory resolves
model_config.sleep_mode_backend ("cumem" built in, others registered by
name, module and class, e.g. from a vllm.general_plugins entry point)
and the worker makes its backend on its first sleep. CuMemBackend, the
default: level 1 keeps weights, runtime state and graph pools (backed
up), level 2 only runtime state and graph pools."""

import importlib
from abc import ABC, abstractmethod
from typing import Callable, Literal

SleepModeState = Literal["RUNNING", "SUSPENDED", "RESUMING"]


class SleepModeBackend(ABC):
    def __init__(self) -> None:
        self._state = "RUNNING"

    @abstractmethod
    def suspend(self, level: int = 1) -> None:
        raise NotImplementedError

    @abstractmethod
    def resume(self, tags: list[str] | None = None) -> None:
        raise NotImplementedError

    def state(self):
        return self._state

    def discard(self, tags: tuple[str, ...]) -> None:
        raise RuntimeError(f"Sleep-mode backend {type(self).__name__!r} does "
                           "not support selective discard.")

    @classmethod
    def is_supported(cls) -> bool:
        return True

    @classmethod
    def preserves_communicators(cls) -> bool:
        return False


class CuMemBackend(SleepModeBackend):
    def suspend(self, level: int = 1) -> None:
        from vllm.device_allocator import get_mem_allocator_instance
        self._state = "SUSPENDED"
        offload_tags = ("runtime", "cudagraph")
        if level == 1:
            offload_tags = ("weights", *offload_tags)
        get_mem_allocator_instance().sleep(offload_tags=offload_tags)

    def resume(self, tags: list[str] | None = None) -> None:
        from vllm.device_allocator import get_mem_allocator_instance
        self._state = "RESUMING"
        get_mem_allocator_instance().wake_up(tags)
        self._state = "RUNNING"

    def discard(self, tags: tuple[str, ...]) -> None:
        from vllm.device_allocator import get_mem_allocator_instance
        get_mem_allocator_instance().discard(tags)
        self._state = "SUSPENDED"

    @classmethod
    def preserves_communicators(cls) -> bool:
        return True


class SleepModeBackendFactory:
    _registry: dict[str, Callable[[], type]] = {}

    @classmethod
    def register_backend(cls, name: str, module_path: str,
                         class_name: str) -> None:
        if name in cls._registry:
            raise ValueError(
                f"Sleep-mode backend '{name}' is already registered.")

        def loader():
            return getattr(importlib.import_module(module_path), class_name)

        cls._registry[name] = loader

    @classmethod
    def get_backend_class(cls, name: str):
        if name not in cls._registry:
            raise ValueError(
                f"Unsupported sleep-mode backend '{name}'. Registered "
                f"backends: {', '.join(sorted(cls._registry)) or '<none>'}.")
        return cls._registry[name]()

    @classmethod
    def create_backend(cls, model_config):
        name = model_config.sleep_mode_backend
        backend_cls = cls.get_backend_class(name)
        if not backend_cls.is_supported():
            raise ValueError(f"Sleep-mode backend '{name}' is not supported "
                             "on this platform.")
        return backend_cls()


SleepModeBackendFactory.register_backend(
    "cumem",
    "vllm.device_allocator.sleep_mode_backend",
    "CuMemBackend",
)
