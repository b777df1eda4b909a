# SPDX-License-Identifier: LGPL-2.1-or-later
"""gpusleep: Python bindings of libgpusleep (ctypes, stdlib only).

  gpusleep.trainer             release / resume / state / wait of a domain
                               (Controller; wait_async for asyncio)
  gpusleep.group               Group: the ranks of one engine released and
                               resumed as one operation, all or nothing
  gpusleep.arbiter             acquire (a Lease), reclaim: memory taken
                               from other tenants of a GPU
  gpusleep.engine              Engine: a domain and its callbacks
  gpusleep.agent               MemoryManager, Agent: tagged memory served
  gpusleep.torch_memory_saver  drop-in for torch_memory_saver's surface
  gpusleep.errors              GpuSleepError and one subclass per reason

The trainer's calls are re-exported here: gpusleep.release("llm0") etc.
The library is loaded on first use (see gpusleep._lib for where from).
See docs/python.md.
"""

from . import errors
from .errors import (GpuSleepError, NotEnabled, InvalidRequest,
                     KvReleaseNotAllowed, AlreadyReleased, Busy, NotReleased,
                     Cancelled, Timeout, DrainTimeout, AgentTimeout,
                     EngineTimeout, EngineFailed, AgentFailed, AgentGone,
                     EngineGone, NoMemory, QueueFull, DomainNotFound,
                     AmbiguousDomain, ModuleNotLoaded, PermissionDenied,
                     GroupExists, GroupNotFound, Leased, HostBudget,
                     VerifyFailed, Shortfall, PriorityNotPermitted)
from .trainer import (Controller, Result, State, release, resume,
                      is_sleeping, state, wait, resolve_domain)
from .group import Group, GroupResult, RankResult
from .arbiter import (acquire, reclaim, reclaim_wait, tenant, gpu_uuid,
                      Lease, LeaseInfo, ReclaimResult, Victim, Tenant)
from ._lib import TAG_NAMES as TAGS

__version__ = "0.1"


def lib_path() -> str:
    """The libgpusleep file in use (loads it)."""
    from . import _lib
    return _lib.path()


__all__ = [
    "errors", "GpuSleepError", "NotEnabled", "InvalidRequest",
    "KvReleaseNotAllowed", "AlreadyReleased", "Busy", "NotReleased",
    "Cancelled", "Timeout", "DrainTimeout", "AgentTimeout", "EngineTimeout",
    "EngineFailed", "AgentFailed", "AgentGone", "EngineGone", "NoMemory",
    "QueueFull", "Controller", "Result", "State", "release", "resume",
    "is_sleeping", "state", "wait", "resolve_domain", "TAGS", "lib_path",
    "Group", "GroupResult", "RankResult", "DomainNotFound",
    "AmbiguousDomain", "ModuleNotLoaded", "PermissionDenied",
    "GroupExists", "GroupNotFound", "Leased", "HostBudget",
    "VerifyFailed", "Shortfall", "PriorityNotPermitted", "acquire",
    "reclaim", "reclaim_wait", "tenant", "gpu_uuid", "Lease", "LeaseInfo",
    "ReclaimResult", "Victim", "Tenant",
]
