# SPDX-License-Identifier: LGPL-2.1-or-later
"""The vllm.general_plugins entry point: vLLM calls register() in every
process it starts, before the worker allocates. Where vLLM has
SleepModeBackendFactory (vLLM 0.33.0) it registers the sleep-mode
backend "gpusleep" (gpusleep_vllm.backend.GpuSleepBackend, chosen with
--sleep-mode-backend gpusleep) and routes the sleep-mode pools of the
workers that choose it to gpusleep.vllm.GpuSleepAllocator; on an older
vLLM it puts GpuSleepAllocator in CuMemAllocator's place for workers
with enable_sleep_mode (gpusleep.vllm.install). Set GPUSLEEP_VLLM=0 to
leave vLLM alone (or leave "gpusleep" out of VLLM_PLUGINS).

In the driver, register() also has vLLM's Ray executor copy the
GPUSLEEP_* variables to its workers: Ray actors do not inherit the
driver's environment, only what vllm/ray/ray_env.py
get_env_vars_to_copy() names (docs/integrations/vllm.md)."""

import os
from typing import Callable, Optional

PREFIX = "GPUSLEEP_"
PREFIXES_VAR = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"


def _getter(name: str) -> Callable[[], Optional[str]]:
    return lambda: os.environ.get(name)


def copy_env_to_ray_workers() -> None:
    """Newer vLLM copies the variables whose prefix is listed in
    $VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY (comma-separated, added to
    its defaults): GPUSLEEP_ is added there, keeping what the user set.
    Older vLLM (no such name in vllm.envs.environment_variables) copies
    the names of that table: the GPUSLEEP_* names set now are added to
    it. Either way, before the executor starts its workers (vLLM loads
    the plugins in EngineArgs.__post_init__)."""
    try:
        import vllm.envs as envs
    except ImportError:
        return
    table = getattr(envs, "environment_variables", None)
    if not isinstance(table, dict):
        return
    if PREFIXES_VAR in table:
        have = [p.strip() for p in os.environ.get(PREFIXES_VAR, "").split(",")
                if p.strip()]
        if PREFIX not in have:
            os.environ[PREFIXES_VAR] = ",".join(have + [PREFIX])
        return
    for name in [n for n in os.environ if n.startswith(PREFIX)]:
        table.setdefault(name, _getter(name))


def register() -> None:
    copy_env_to_ray_workers()	# GPUSLEEP_VLLM=0 included
    if os.environ.get("GPUSLEEP_VLLM", "1") == "0":
        return
    from gpusleep.vllm import install
    install()
