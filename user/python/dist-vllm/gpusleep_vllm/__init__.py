# SPDX-License-Identifier: LGPL-2.1-or-later
"""The vllm.general_plugins entry point: vLLM calls register() in every
process it starts, before the worker allocates; it replaces vLLM's
CuMemAllocator with gpusleep.vllm.GpuSleepAllocator. Set
GPUSLEEP_VLLM=0 to leave vLLM's own allocator in place (or leave
"gpusleep" out of VLLM_PLUGINS)."""

import os


def register() -> None:
    if os.environ.get("GPUSLEEP_VLLM", "1") == "0":
        return
    from gpusleep.vllm import install
    install()
