# SPDX-License-Identifier: GPL-2.0
"""vllm.LLM's sleep mode, one worker in the engine's process (TP 1).
Models vllm 0.33.0 (vllm/entrypoints/llm.py; its LLMEngine and in-process
engine-core client pass these calls to EngineCore as they are): the
engine's arguments load the general plugins first (EngineArgs), sleep
mode turns the cumem allocator on (ModelConfig), sleep(level, mode) and
wake_up(tags) are the engine core's, reset_prefix_cache too. Keyword
arguments the stand-in reads: enable_sleep_mode, sleep_mode_backend,
enable_cumem_allocator, data_parallel_size, data_parallel_rank."""

from vllm.config import ModelConfig, ParallelConfig, VllmConfig
from vllm.plugins import load_general_plugins
from vllm.v1.engine.core import EngineCore
from vllm.v1.executor.uniproc_executor import UniProcExecutor

STANDIN_SUBSET = ("LLM.__init__",)


class LLM:
    def __init__(self, model, *, tensor_parallel_size=1, **kwargs):
        load_general_plugins()
        mc = ModelConfig(
            model=model,
            enable_sleep_mode=kwargs.get("enable_sleep_mode", False),
            sleep_mode_backend=kwargs.get("sleep_mode_backend", "cumem"),
            enable_cumem_allocator=kwargs.get("enable_cumem_allocator",
                                              False))
        if mc.enable_sleep_mode:
            mc.enable_cumem_allocator = True
        pc = ParallelConfig(
            tensor_parallel_size=tensor_parallel_size,
            data_parallel_size=kwargs.get("data_parallel_size", 1),
            data_parallel_rank=kwargs.get("data_parallel_rank", 0))
        self.llm_engine = EngineCore(VllmConfig(model_config=mc,
                                                parallel_config=pc),
                                     UniProcExecutor, log_stats=False)

    def reset_prefix_cache(self, reset_running_requests=False,
                           reset_connector=False):
        return self.llm_engine.reset_prefix_cache(reset_running_requests,
                                                  reset_connector)

    def sleep(self, level=1, mode="abort"):
        self.llm_engine.sleep(level=level, mode=mode)

    def wake_up(self, tags=None):
        return self.llm_engine.wake_up(tags)
