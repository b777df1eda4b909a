# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exceptions: one per refusal or failure reason of the module.

Every exception is a GpuSleepError (an OSError), carrying
  reason       the uAPI reason code (enum gpusleep_reason, int)
  reason_name  "NOT_ENABLED", "ALREADY_RELEASED", ...
  errno        the errno the module returned (ENOTCONN, EALREADY, ...):
               always the reason's own (EREMOTEIO for EngineFailed and
               AgentFailed)
  peer_errno   EngineFailed, AgentFailed: the errno the engine or agent
               answered with (the result's error), else None
  message      a sentence (libgpusleep's gs_reason_str, or more precise)
  op_id        the operation's id (0 when refused before it started)
  tags         the tags a refusal names (AlreadyReleased, NotReleased),
               else the tags of the failed operation, as names
  result       the operation's Result when one was fetched, else None

Finding the domain: DomainNotFound (a name or an id that no live domain
has; also a LookupError and a FileNotFoundError), AmbiguousDomain (a name
that several domains share: pass the id; also a LookupError),
ModuleNotLoaded (no /dev/gpusleep or sysfs class: load the module),
PermissionDenied (not the domain's owner and no CAP_SYS_ADMIN; also a
PermissionError).

Reclaims and leases (gpusleep.arbiter): Leased, HostBudget, VerifyFailed
and Shortfall are reasons; PriorityNotPermitted (a priority above 0
without CAP_SYS_NICE; also a PermissionError).

Groups: GroupExists (creating a group whose name this user already has
live; also a FileExistsError), GroupNotFound (opening a name this user
has no live group of; also a FileNotFoundError and a LookupError).
"""

from __future__ import annotations

import errno as _errno
import os
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Union

from . import _lib

if TYPE_CHECKING:
    from .arbiter import ReclaimResult
    from .group import GroupResult
    from .trainer import Result

# name, errno, sentence: the same table as libgpusleep's (user/lib.c), kept
# here so that the exceptions need not load the library.
_REASONS = {
    _lib.R_NONE: ("NONE", 0, "success"),
    _lib.R_NOT_ENABLED: ("NOT_ENABLED", _errno.ENOTCONN,
                         "no agent attached: the engine runs without its "
                         "gpusleep agent, so its memory cannot be released"),
    _lib.R_INVALID: ("INVALID", _errno.EINVAL,
                     "invalid request: unknown tags or flags"),
    _lib.R_KV_NOT_ALLOWED: ("KV_NOT_ALLOWED", _errno.EOPNOTSUPP,
                            "cannot release kv_cache: prefix caching is on "
                            "and the engine cannot reset it"),
    _lib.R_ALREADY_RELEASED: ("ALREADY_RELEASED", _errno.EALREADY,
                              "tags already released"),
    _lib.R_BUSY: ("BUSY", _errno.EBUSY,
                  "a pause or release is already in progress"),
    _lib.R_NOT_RELEASED: ("NOT_RELEASED", _errno.ENOENT,
                          "tags not released"),
    _lib.R_CANCELLED: ("CANCELLED", _errno.ECANCELED,
                       "resumed before release drained"),
    _lib.R_DRAIN_TIMEOUT: ("DRAIN_TIMEOUT", _errno.ETIMEDOUT,
                           "the engine did not drain in time"),
    _lib.R_AGENT_TIMEOUT: ("AGENT_TIMEOUT", _errno.ETIMEDOUT,
                           "the agent did not answer in time"),
    _lib.R_ENGINE_FAILED: ("ENGINE_FAILED", _errno.EREMOTEIO,
                           "the engine failed a step (drain, cache reset "
                           "or KV repair)"),
    _lib.R_AGENT_FAILED: ("AGENT_FAILED", _errno.EREMOTEIO,
                          "the agent failed to unmap or remap a tag"),
    _lib.R_AGENT_GONE: ("AGENT_GONE", _errno.EPIPE,
                        "the agent closed its fd during the operation"),
    _lib.R_ENGINE_GONE: ("ENGINE_GONE", _errno.EOWNERDEAD,
                         "the engine closed its fd: the domain is dead"),
    _lib.R_NO_MEMORY: ("NO_MEMORY", _errno.ENOMEM,
                       "the kernel could not allocate memory"),
    _lib.R_QUEUE_FULL: ("QUEUE_FULL", _errno.ENOBUFS, "event queue overflow"),
    _lib.R_ENGINE_TIMEOUT: ("ENGINE_TIMEOUT", _errno.ETIMEDOUT,
                            "the engine did not answer a cache reset or KV "
                            "repair in time"),
    _lib.R_LEASED: ("LEASED", _errno.EAGAIN,
                    "the tags are held by a lease: resumed when it ends"),
    _lib.R_HOST_BUDGET: ("HOST_BUDGET", _errno.ENOSPC,
                         "the backup would pass the node's host-RAM "
                         "budget"),
    _lib.R_VERIFY_FAILED: ("VERIFY_FAILED", _errno.EBADMSG,
                           "a restored backup failed its checksum: "
                           "contents lost"),
    _lib.R_SHORTFALL: ("SHORTFALL", _errno.ENOSPC,
                       "the reclaim could not free the bytes asked for"),
}


def reason_name(reason: int) -> str:
    return _REASONS.get(reason, ("UNKNOWN",))[0]


def reason_errno(reason: int) -> int:
    return _REASONS.get(reason, (None, 0))[1]


def reason_str(reason: int) -> str:
    return _REASONS.get(reason, (None, 0, "unknown reason"))[2]


class GpuSleepError(OSError):
    """Base of every gpusleep refusal or failure."""

    def __init__(self, reason: int = _lib.R_NONE, err: Optional[int] = None,
                 message: Optional[str] = None, *, op_id: int = 0,
                 tags: Iterable[str] = (),
                 result: Union[Result, GroupResult, None] = None,
                 peer_errno: Optional[int] = None) -> None:
        if err is None:
            err = reason_errno(reason) or _errno.EIO
        if message is None:
            message = reason_str(reason) if reason else os.strerror(err)
        super().__init__(err, message)
        self.reason = reason
        self.reason_name = reason_name(reason)
        self.message = message
        self.op_id = op_id
        self.tags = list(tags)
        self.result = result
        self.peer_errno = peer_errno

    def __str__(self) -> str:
        s = f"[{self.reason_name}, {_errno.errorcode.get(self.errno, self.errno)}]"
        s += f" {self.message}"
        if self.tags:
            s += f": {self.tags!r}"
        if self.peer_errno:
            s += (" (peer: "
                  f"{_errno.errorcode.get(self.peer_errno, self.peer_errno)})")
        if self.op_id:
            s += f" (op {self.op_id})"
        return s

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (_rebuild, (type(self), self.reason, self.errno, self.message,
                           self.op_id, self.tags))


def _rebuild(cls: type[GpuSleepError], reason: int, err: int, message: str,
             op_id: int, tags: Iterable[str]) -> GpuSleepError:
    return cls(reason, err, message, op_id=op_id, tags=tags)


class NotEnabled(GpuSleepError):
    """No agent is attached to the domain, so none of its memory can be
    released or resumed (ENOTCONN)."""


class InvalidRequest(GpuSleepError, ValueError):
    """Unknown tags or flags (EINVAL)."""


class KvReleaseNotAllowed(GpuSleepError):
    """kv_cache with prefix caching and no prefix-cache reset (EOPNOTSUPP)."""


class AlreadyReleased(GpuSleepError):
    """Some requested tag is already released; .tags names them (EALREADY)."""


class Busy(GpuSleepError):
    """Another operation is in flight (EBUSY)."""


class NotReleased(GpuSleepError):
    """Resume of tags that are awake; .tags names them (ENOENT)."""


class Cancelled(GpuSleepError):
    """A resume came before the release drained (ECANCELED)."""


class Timeout(GpuSleepError):
    """A step or a wait ran out of time (ETIMEDOUT)."""


class DrainTimeout(Timeout):
    """The engine did not drain in time."""


class AgentTimeout(Timeout):
    """The agent did not answer in time."""


class EngineTimeout(Timeout):
    """The engine did not answer a cache reset or KV repair in time."""


class EngineFailed(GpuSleepError):
    """The engine failed a step (EREMOTEIO); .peer_errno is the engine's."""


class AgentFailed(GpuSleepError):
    """The agent failed to unmap or remap (EREMOTEIO); .peer_errno is the
    agent's."""


class AgentGone(GpuSleepError):
    """The agent closed its fd during the operation (EPIPE)."""


class EngineGone(GpuSleepError):
    """The engine closed its fd: the domain is dead (EOWNERDEAD)."""


class NoMemory(GpuSleepError):
    """The kernel could not allocate memory (ENOMEM)."""


class QueueFull(GpuSleepError):
    """An event queue overflowed (ENOBUFS)."""


class Leased(GpuSleepError, BlockingIOError):
    """A resume of tags a lease holds, by anyone but the lease (EAGAIN):
    try again once the lease ends (it resumes them itself)."""


class HostBudget(GpuSleepError):
    """A release whose backup would pass the node's host-RAM budget
    (ENOSPC; sysfs host_budget_bytes): nothing was released."""


class VerifyFailed(GpuSleepError):
    """A restored backup failed its checksum (EBADMSG): the tag stays
    released, its contents lost; the next resume maps it fresh (zeros)
    and the engine must reload it."""


class Shortfall(GpuSleepError):
    """A reclaim could not free the bytes asked for (ENOSPC): .why names
    what kept it short ("priority", "not_permitted", "refused",
    "host_budget", "deadline"...), .reclaim (an arbiter.ReclaimResult)
    what it tried; nothing was kept unless partial=True."""

    why: tuple[str, ...] = ()
    reclaim: Optional[ReclaimResult] = None


class PriorityNotPermitted(GpuSleepError, PermissionError):
    """A priority above 0 (a claim's, or a tenant's raised) without
    CAP_SYS_NICE in the initial user namespace (EPERM), as nice(2)."""


class DomainNotFound(GpuSleepError, FileNotFoundError, LookupError):
    """No live domain has that name or id (ENOENT). .domain: what was
    asked for."""

    def __init__(self, domain: Union[int, str],
                 message: Optional[str] = None) -> None:
        super().__init__(_lib.R_NONE, _errno.ENOENT, message or
                         f"no gpusleep domain {domain!r} "
                         "(gpusleepctl list shows them)")
        self.domain = domain

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.domain, self.message))


class AmbiguousDomain(GpuSleepError, LookupError):
    """Several domains have that name: pass the id (EINVAL). .domain: the
    name; .ids: the ids that have it."""

    def __init__(self, domain: str, ids: Iterable[int] = ()) -> None:
        self.ids = list(ids)
        super().__init__(_lib.R_NONE, _errno.EINVAL,
                         f"{len(self.ids)} gpusleep domains are named "
                         f"{domain!r} (ids {self.ids}): pass the id")
        self.domain = domain

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.domain, self.ids))


class ModuleNotLoaded(GpuSleepError, FileNotFoundError):
    """The gpusleep module is not loaded: no /dev/gpusleep, no
    /sys/class/gpusleep (ENOENT). Load it: sudo modprobe gpusleep."""

    def __init__(self, path: str = "/dev/gpusleep",
                 message: Optional[str] = None) -> None:
        super().__init__(_lib.R_NONE, _errno.ENOENT, message or
                         f"{path}: missing: the gpusleep module is not "
                         "loaded (load it: sudo modprobe gpusleep)")
        self.path = path

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.path, self.message))


class PermissionDenied(GpuSleepError, PermissionError):
    """Not the domain's owner and no CAP_SYS_ADMIN (EPERM): run as its
    owner or root, or use a controller fd the engine granted
    (Engine.grant, Controller.from_fd). Reading its state needs no
    permission: gpusleep.state() reads sysfs then."""

    def __init__(self, domain: Union[int, str],
                 message: Optional[str] = None) -> None:
        super().__init__(_lib.R_NONE, _errno.EPERM, message or
                         f"domain {domain!r}: permission denied: only its "
                         "owner or root (CAP_SYS_ADMIN) may control it; run "
                         "with sudo, or use a controller fd the engine "
                         "granted (Engine.grant, Controller.from_fd)")
        self.domain = domain

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.domain, self.message))


class GroupExists(GpuSleepError, FileExistsError):
    """Creating a group whose name this user (in this user and pid
    namespace) already has live (EEXIST): another process made it (the one
    that creates an engine's group is the trainer's side, e.g. EngineSleep,
    docs/groups.md), or this one did. .group: the name."""

    def __init__(self, group: str, message: Optional[str] = None) -> None:
        super().__init__(_lib.R_NONE, _errno.EEXIST, message or
                         f"group {group!r} exists: a live group of that name "
                         "was made by this user, by another process (the "
                         "creator of an engine's group is its trainer's "
                         "side, docs/groups.md) or by this one; use it "
                         f"(gpusleep.Group.open({group!r}) gives another fd "
                         "for it) or close it first; gpusleepctl group list "
                         "shows the groups")
        self.group = group

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.group, self.message))


class GroupNotFound(GpuSleepError, FileNotFoundError, LookupError):
    """Opening a group name this user (in this user and pid namespace) has
    no live group of (ENOENT): a group ends when its last fd closes, so
    when the process that created it exits. .group: the name."""

    def __init__(self, group: str, message: Optional[str] = None) -> None:
        super().__init__(_lib.R_NONE, _errno.ENOENT, message or
                         f"no live group {group!r} of this user (a group "
                         "ends when its last fd closes, e.g. when the "
                         "process that created it exits; its ranks keep "
                         "their state); gpusleepctl group list shows the "
                         f"groups; gpusleepctl resume --group {group} "
                         f"resumes the ranks named {group}-tp<rank>")
        self.group = group

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Callable[..., GpuSleepError],
                                  tuple[object, ...]]:
        return (type(self), (self.group, self.message))


#: EngineFailed with the engine's EOPNOTSUPP: the engine is released only
#: through its own API, and said so by refusing the drain at once
OUTSIDE_REFUSED = ("the engine refused the release (EOPNOTSUPP): it is "
                   "released only through its own API: a vLLM worker by "
                   "vLLM's sleep (LLM.sleep, POST /sleep), a "
                   "torch_memory_saver trainer by its own pause(), or by "
                   "another process only while it is inside "
                   "torch_memory_saver.releasable()")

_BY_REASON = {
    _lib.R_NOT_ENABLED: NotEnabled,
    _lib.R_INVALID: InvalidRequest,
    _lib.R_KV_NOT_ALLOWED: KvReleaseNotAllowed,
    _lib.R_ALREADY_RELEASED: AlreadyReleased,
    _lib.R_BUSY: Busy,
    _lib.R_NOT_RELEASED: NotReleased,
    _lib.R_CANCELLED: Cancelled,
    _lib.R_DRAIN_TIMEOUT: DrainTimeout,
    _lib.R_AGENT_TIMEOUT: AgentTimeout,
    _lib.R_ENGINE_FAILED: EngineFailed,
    _lib.R_AGENT_FAILED: AgentFailed,
    _lib.R_AGENT_GONE: AgentGone,
    _lib.R_ENGINE_GONE: EngineGone,
    _lib.R_NO_MEMORY: NoMemory,
    _lib.R_QUEUE_FULL: QueueFull,
    _lib.R_ENGINE_TIMEOUT: EngineTimeout,
    _lib.R_LEASED: Leased,
    _lib.R_HOST_BUDGET: HostBudget,
    _lib.R_VERIFY_FAILED: VerifyFailed,
    _lib.R_SHORTFALL: Shortfall,
}

# Errors without a reason (a WAIT that timed out, a dead domain's -ENODEV...)
_BY_ERRNO = {
    _errno.ETIMEDOUT: Timeout,
    _errno.EOWNERDEAD: EngineGone,
    _errno.ENODEV: EngineGone,
}


def from_code(err: int, reason: int = _lib.R_NONE, *, op_id: int = 0,
              tags: Iterable[str] = (), result: Optional[Result] = None,
              message: Optional[str] = None) -> GpuSleepError:
    """The exception for errno err (positive) and a reason code."""
    cls = _BY_REASON.get(reason) or _BY_ERRNO.get(err, GpuSleepError)
    if message is None and not reason:
        message = os.strerror(err)
    peer = None
    if reason in (_lib.R_ENGINE_FAILED, _lib.R_AGENT_FAILED):
        # the syscall's errno is the reason's; the peer's is the result's
        if result is not None:
            peer = -result.error if result.error < 0 else result.error
        elif err != _errno.EREMOTEIO:
            peer = err
        err = _errno.EREMOTEIO
    if reason == _lib.R_ENGINE_FAILED and peer == _errno.EOPNOTSUPP and \
            message is None:
        message = OUTSIDE_REFUSED
    return cls(reason, err, message, op_id=op_id, tags=tags, result=result,
               peer_errno=peer)
