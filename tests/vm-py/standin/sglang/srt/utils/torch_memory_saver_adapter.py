# SPDX-License-Identifier: GPL-2.0
"""SGLang's adapter over torch_memory_saver. Models sglang 0.5.23
(sglang/srt/utils/torch_memory_saver_adapter.py): create(enable) gives
the real adapter with --enable-memory-saver, which calls the process's
torch_memory_saver singleton (gpusleep's drop-in here): region(tag,
enable_cpu_backup), pause(tag), resume(tag)."""

from abc import ABC

import torch_memory_saver

_memory_saver = torch_memory_saver.torch_memory_saver


class TorchMemorySaverAdapter(ABC):
    @staticmethod
    def create(enable: bool):
        return (_TorchMemorySaverAdapterReal() if enable
                else _TorchMemorySaverAdapterNoop())

    def region(self, tag: str, enable_cpu_backup: bool = False):
        raise NotImplementedError

    def pause(self, tag: str):
        raise NotImplementedError

    def resume(self, tag: str):
        raise NotImplementedError


class _TorchMemorySaverAdapterReal(TorchMemorySaverAdapter):
    def region(self, tag: str, enable_cpu_backup: bool = False):
        return _memory_saver.region(tag=tag,
                                    enable_cpu_backup=enable_cpu_backup)

    def pause(self, tag: str):
        return _memory_saver.pause(tag)

    def resume(self, tag: str):
        return _memory_saver.resume(tag)


class _TorchMemorySaverAdapterNoop(TorchMemorySaverAdapter):
    pass
