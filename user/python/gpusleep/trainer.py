# SPDX-License-Identifier: LGPL-2.1-or-later
"""The trainer's side (a controller fd): release, resume, state, wait.

    from gpusleep import trainer
    trainer.release("llm0")                 # all tags, waits until done
    ... train ...
    trainer.resume("llm0", ["weights"])     # push fresh weights, then
    trainer.resume("llm0")                  # what is still released

A domain is its id (int) or its name, looked up in
/sys/class/gpusleep/*/name: errors.DomainNotFound when no live domain has
it (name or id alike), errors.AmbiguousDomain when several do (pass the
id), errors.ModuleNotLoaded without the module. Tags: None = the default
(release: every tag; resume: exactly what is released now), or a list of
names ("weights", "kv_cache"); [] is a ValueError. Refusals and failures
raise the gpusleep.errors exception of their reason; bad arguments raise
TypeError or ValueError naming the argument.

state() and is_sleeping() need no privilege: for a domain the caller may
not control they read sysfs, as `gpusleepctl status` does.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno as _errno
import glob
import math
import os
import time
from typing import TYPE_CHECKING, Iterable, Optional, Sequence, Union

from . import _lib, errors

if TYPE_CHECKING:
    from .arbiter import Tenant

SYSFS_CLASS = "/sys/class/gpusleep"

#: A domain: its id, or its name.
DomainRef = Union[int, str]
#: Tags: None (the default), a name, names, or a mask of the domain's bits.
Tags = Optional[Union[str, Iterable[str], int]]


def _sysfs_class() -> str:
    return os.environ.get("GPUSLEEP_SYSFS") or SYSFS_CLASS


def _check_domain(domain: object) -> None:
    if isinstance(domain, bool) or not isinstance(domain, (int, str)):
        raise TypeError("domain: want an id (int) or a name (str), not "
                        f"{type(domain).__name__}")
    if isinstance(domain, int) and domain <= 0:
        raise ValueError(f"domain: {domain} is not a domain id (ids are > 0)")
    if isinstance(domain, str) and not domain:
        raise ValueError("domain: an empty name")


def _owner_seen(top: str) -> bool:
    """Does this process see the creator of the domain at sysfs dir top
    (its owner_pid is not 0 in this pid namespace)?"""
    try:
        with open(os.path.join(top, "owner_pid")) as f:
            return int(f.read().strip()) != 0
    except (OSError, ValueError):
        return False


def resolve_domain(domain: DomainRef) -> int:
    """An id (int, or a string of digits) as is; else the id of the live
    domain with that name in sysfs. Where several have it, the one whose
    creator this process sees (owner_pid is not 0 in its pid namespace):
    inside a container, another container's domain of the same name is not
    a candidate. errors.DomainNotFound if none has it,
    errors.AmbiguousDomain if several remain, errors.ModuleNotLoaded
    without the module."""
    _check_domain(domain)
    if isinstance(domain, int):
        return domain
    if domain.isdigit():
        return int(domain)
    root = _sysfs_class()
    ids, seen = [], []
    for d in sorted(glob.glob(os.path.join(root, "*", "name"))):
        top = os.path.dirname(d)
        try:
            with open(d) as f:
                if f.read().strip() != domain:
                    continue
            with open(os.path.join(top, "id")) as f:
                did = int(f.read().strip())
        except OSError:
            continue	# the domain went away meanwhile
        ids.append(did)
        if _owner_seen(top):
            seen.append(did)
    if len(ids) > 1 and len(seen) == 1:
        return seen[0]
    if len(ids) > 1:
        raise errors.AmbiguousDomain(domain, sorted(ids))
    if ids:
        return ids[0]
    if not os.path.isdir(root):
        raise errors.ModuleNotLoaded(root)
    raise errors.DomainNotFound(domain)


def _timeout_ms(timeout: Optional[float]) -> int:
    if timeout is None:
        return 0
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("timeout: want None or seconds (int or float), not "
                        f"{type(timeout).__name__}")
    if not timeout > 0:
        raise ValueError(f"timeout: want None or seconds > 0, not {timeout!r}")
    return max(1, min(int(timeout * 1000), 0xffffffff))


def _ms_left(deadline: Optional[float]) -> int:
    """The timeout_ms that goes on to deadline (time.monotonic(); None:
    no timeout): what an interrupted wait passes when it waits again."""
    if deadline is None:
        return 0
    return max(1, min(math.ceil((deadline - time.monotonic()) * 1000),
                      0xffffffff))


def _deadline(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + timeout


def _check_bool(name: str, v: object) -> None:
    if not isinstance(v, bool):
        raise TypeError(f"{name}: want True or False, not "
                        f"{type(v).__name__}")


def _check_op_id(op_id: object) -> None:
    if isinstance(op_id, bool) or not isinstance(op_id, int):
        raise TypeError(f"op_id: want an int, not {type(op_id).__name__}")
    if op_id < 0:
        raise ValueError(f"op_id: want 0 (the newest) or an id, not {op_id}")


class Result:
    """A finished operation (struct gpusleep_result); names: the domain's
    tags, in declaration order."""

    def __init__(self, r: _lib.gpusleep_result,
                 names: Sequence[str] = _lib.TAG_NAMES) -> None:
        self.op_id = r.op_id
        self.kind = {_lib.OP_RELEASE: "release",
                     _lib.OP_RESUME: "resume"}.get(r.kind, str(r.kind))
        self.tags = _lib.mask_to_tags(r.tags, names)
        self.done_tags = _lib.mask_to_tags(r.done_tags, names)
        self.error = -r.error		# errno, 0 on success
        self.reason = r.reason
        self.reason_name = errors.reason_name(r.reason)
        self.duration = r.duration_ns / 1e9
        self.bytes = {n: r.bytes[i] for i, n in enumerate(names)
                      if r.bytes[i]}
        # release: what the agent saw come free, per tag (when measured)
        self.freed_bytes = {n: r.freed_bytes[i]
                            for i, n in enumerate(names)
                            if r.freed_bytes[i]}
        self.shortfall_tags = _lib.mask_to_tags(r.shortfall_tags, names)
        self.lost_tags = _lib.mask_to_tags(r.lost_tags, names)

    @property
    def ok(self) -> bool:
        return self.error == 0

    def raise_for_error(self) -> Result:
        if self.error:
            raise errors.from_code(self.error, self.reason, op_id=self.op_id,
                                   tags=self.tags, result=self)
        return self

    def __repr__(self) -> str:
        return (f"Result(op_id={self.op_id}, kind={self.kind!r}, "
                f"tags={self.tags!r}, error={self.error}, "
                f"reason={self.reason_name}, bytes={self.bytes!r})")


class State:
    """struct gpusleep_state, with the names of the domain's tags (names,
    in declaration order; .tags)."""

    def __init__(self, s: _lib.gpusleep_state,
                 names: Sequence[str] = _lib.TAG_NAMES) -> None:
        self.id = s.id
        self.state = (_lib.STATE_NAMES[s.state]
                      if s.state < len(_lib.STATE_NAMES) else str(s.state))
        self.tags = list(names)
        self.released = _lib.mask_to_tags(s.released, names)
        # released tags whose unmap the agent has not confirmed
        self.unconfirmed = _lib.mask_to_tags(s.unconfirmed, names)
        self.flags = s.flags
        self.caps = s.caps
        self.op_in_flight = s.op_in_flight
        self.last_op_id = s.last_op_id
        self.bytes_released = {n: s.bytes_released[i]
                               for i, n in enumerate(names)
                               if s.bytes_released[i]}
        self.freed_bytes = {n: s.freed_bytes[i]
                            for i, n in enumerate(names)
                            if s.freed_bytes[i]}
        # released tags whose memory did not all come free
        self.shortfall = _lib.mask_to_tags(s.shortfall, names)
        # what the agent's process still held after the newest pause, and
        # whose view that is ("process", "device"; None: not reported);
        # 0 and None once nothing is released
        self.resident_bytes = s.resident_bytes
        self.resident_source = (_lib.RESIDENT_SOURCES[s.resident_source]
                                if s.resident_source <
                                len(_lib.RESIDENT_SOURCES)
                                else str(s.resident_source))
        # per tag: how many times its memory was replaced (register buffers
        # again with NCCL/RDMA when it moved on)
        self.generation = {n: s.generation[i]
                           for i, n in enumerate(names)}
        self.last = Result(s.last, names) if s.last.op_id else None
        f = s.flags
        self.drain_pending = bool(f & _lib.SF_DRAIN_PENDING)
        self.agent_attached = bool(f & _lib.SF_AGENT_ATTACHED)
        self.kv_release_allowed = bool(f & _lib.SF_KV_RELEASE_ALLOWED)
        self.sched_paused = bool(f & _lib.SF_SCHED_PAUSED)
        self.dead = bool(f & _lib.SF_DEAD)
        self.kv_repair_pending = bool(f & _lib.SF_KV_REPAIR_PENDING)
        self.agent_unconfirmed = bool(f & _lib.SF_AGENT_UNCONFIRMED)
        self.prefix_caching = bool(s.caps & _lib.CAP_PREFIX_CACHING)
        self.prefix_cache_reset = bool(s.caps & _lib.CAP_PREFIX_CACHE_RESET)

    #: "ioctl" (a controlling fd: every field) or "sysfs" (no fd: no
    #: caps, last_op_id 0, last None)
    source = "ioctl"

    @property
    def is_sleeping(self) -> bool:
        """True while some tag is released."""
        return bool(self.released)

    @classmethod
    def from_sysfs(cls, domain_id: int) -> "State":
        """The domain's state as /sys/class/gpusleep/domainN/ shows it,
        readable by every user. errors.DomainNotFound when it is gone."""
        d = os.path.join(_sysfs_class(), f"domain{domain_id}")

        def rd(name, default=""):
            try:
                with open(os.path.join(d, name)) as f:
                    return f.read().strip()
            except FileNotFoundError:
                if not os.path.isdir(d):
                    raise errors.DomainNotFound(domain_id) from None
                return default

        def nums(name):
            return [int(v) for v in rd(name).split(",") if v]

        names = tuple(n for n in rd("tags").split(",") if n) or \
            _lib.TAG_NAMES

        def mask(name):
            return sum(1 << names.index(t) for t in rd(name).split(",")
                       if t in names)

        s = _lib.gpusleep_state()
        s.id = domain_id
        st = rd("state")
        s.state = (_lib.STATE_NAMES.index(st) if st in _lib.STATE_NAMES
                   else len(_lib.STATE_NAMES))
        s.released = mask("released_tags")
        s.unconfirmed = mask("unconfirmed_tags")
        s.shortfall = mask("shortfall_tags")
        s.flags = ((_lib.SF_DRAIN_PENDING if rd("drain_pending") == "1"
                    else 0) |
                   (_lib.SF_AGENT_ATTACHED if rd("agent_attached") == "1"
                    else 0) |
                   (_lib.SF_KV_RELEASE_ALLOWED
                    if rd("kv_release_allowed") == "1" else 0) |
                   (_lib.SF_DEAD if st == "dead" else 0))
        s.op_in_flight = int(rd("op_in_flight", "0") or 0)
        for arr, name in ((s.bytes_released, "tag_bytes_released"),
                          (s.freed_bytes, "tag_freed_bytes"),
                          (s.generation, "tag_generations")):
            for i, v in enumerate(nums(name)[:len(arr)]):
                arr[i] = v
        src = rd("resident_source", "unknown")
        if src in _lib.RESIDENT_SOURCES:
            s.resident_source = _lib.RESIDENT_SOURCES.index(src)
            s.resident_bytes = int(rd("resident_bytes", "0") or 0)
        self = cls(s, names)
        self.source = "sysfs"
        return self

    def __repr__(self) -> str:
        return (f"State(id={self.id}, state={self.state!r}, "
                f"released={self.released!r}, "
                f"op_in_flight={self.op_in_flight}, "
                f"agent_attached={self.agent_attached})")


class _Ops:
    """Release/resume/state/wait over any controlling fd (a controller fd,
    or the engine fd for gpusleep.engine.Engine)."""

    _fd = -1
    _tag_names: Optional[tuple[str, ...]] = None

    def fileno(self) -> int:
        return self._fd

    @property
    def tag_names(self) -> tuple[str, ...]:
        """The domain's tags, in declaration order (its bit order): fixed
        for the domain's life, so asked once (GPUSLEEP_IOC_GET_TAGS)."""
        if self._tag_names is None:
            self._tag_names = tuple(n for n, _, _ in _lib.get_tags(self._fd))
        return self._tag_names

    def tags(self) -> list[tuple[str, str, int]]:
        """The domain's declaration: [(name, kind, generation)], kind
        "memory" or "kv_cache", generation how many times the tag's memory
        was replaced."""
        return _lib.get_tags(self._fd)

    def _op(self, kind, tags, flags, timeout, wait):
        _check_bool("wait", wait)
        tmo = _timeout_ms(timeout)
        L = _lib.lib()
        # Unknown names go to the module as an unknown bit: it refuses them
        # in its own order (not enabled, invalid, kv not allowed, already
        # released, busy), like the reference controller.
        unknown = []
        names = self.tag_names
        mask = _lib.tags_to_mask(tags, names=names, unknown=unknown)
        call = L.gs_release if kind == _lib.OP_RELEASE else L.gs_resume
        if not wait:
            flags |= _lib.OPF_NONBLOCK
        op = _lib.gpusleep_op()
        ret = call(self._fd, mask, flags, tmo, ctypes.byref(op))
        if ret == -_errno.EINTR and op.op_id:
            # a signal (whose handler did not raise): the operation goes on
            return self.wait(op.op_id)
        if ret < 0:
            err = -ret
            if op.op_id and wait:
                # a started operation failed: its full result, when kept
                res = self._result(op.op_id)
                if res is not None:
                    res.raise_for_error()
            if op.reason == _lib.R_INVALID and unknown:
                raise errors.from_code(
                    err, op.reason, tags=unknown,
                    message=_lib.invalid_tags_message(unknown, names))
            bad = _lib.mask_to_tags(op.bad_tags, names) if op.bad_tags \
                else _lib.mask_to_tags(mask, names)
            raise errors.from_code(err, op.reason, op_id=op.op_id, tags=bad)
        if not wait:
            return op.op_id
        res = self._result(op.op_id)
        if res is None:	# already out of the kept history
            r = _lib.gpusleep_result(op_id=op.op_id, kind=kind, tags=mask)
            res = Result(r, names)
        return res

    def _result(self, op_id):
        """The finished operation op_id's Result, None if forgotten."""
        r = _lib.gpusleep_result()
        ret = _lib.lib().gs_wait(self._fd, op_id, 1, ctypes.byref(r))
        return Result(r, self.tag_names) if ret == 0 else None

    def release(self, tags: Tags = None, abort_inflight: bool = False,
                timeout: Optional[float] = None,
                wait: bool = True) -> Union[Result, int]:
        """Release tags (None = all). timeout: seconds per step (None = the
        module's defaults). wait=True: block until done, return its Result
        (raise on failure); wait=False: return the op id once started."""
        _check_bool("abort_inflight", abort_inflight)
        flags = _lib.OPF_ABORT_INFLIGHT if abort_inflight else 0
        return self._op(_lib.OP_RELEASE, tags, flags, timeout, wait)

    def resume(self, tags: Tags = None, timeout: Optional[float] = None,
               wait: bool = True) -> Union[Result, int]:
        """Resume tags (None = exactly what is released now). As
        release() otherwise."""
        return self._op(_lib.OP_RESUME, tags, 0, timeout, wait)

    def is_sleeping(self) -> bool:
        """True while some tag of the domain is released."""
        ret = _lib.lib().gs_is_sleeping(self._fd)
        if ret < 0:
            raise errors.from_code(-ret)
        return bool(ret)

    def state(self) -> State:
        """The domain's whole state (GPUSLEEP_IOC_GET_STATE): its state
        name, released tags, flags, bytes per tag, the newest result."""
        st = _lib.gpusleep_state()
        ret = _lib.lib().gs_get_state(self._fd, ctypes.byref(st))
        if ret < 0:
            raise errors.from_code(-ret)
        return State(st, self.tag_names)

    def wait(self, op_id: int = 0, timeout: Optional[float] = None) -> Result:
        """Wait for operation op_id (0 = the newest) to finish and return
        its Result; raise its exception (errors.DrainTimeout...) when it
        failed, errors.Timeout when timeout (seconds) passes first."""
        _check_op_id(op_id)
        tmo = _timeout_ms(timeout)
        deadline = _deadline(timeout)
        r = _lib.gpusleep_result()
        while True:
            ret = _lib.lib().gs_wait(self._fd, op_id, tmo, ctypes.byref(r))
            if ret != -_errno.EINTR:
                break
            # a handler that did not raise: the same operation (0 resolved
            # by the interrupted call), to the same deadline
            op_id = r.op_id or op_id
            tmo = _ms_left(deadline)
        if ret < 0:
            raise errors.from_code(-ret, op_id=op_id)
        return Result(r, self.tag_names).raise_for_error()

    def tenant(self) -> "Tenant":
        """The domain as a tenant (GPUSLEEP_IOC_GET_TENANT): priority,
        yieldable, lease, host budget charged, and its agent's newest
        report (GPU, tags, what the process holds outside them)."""
        from .arbiter import get_tenant
        return get_tenant(self._fd, self.tag_names)

    def register_eventfd(self, efd: int,
                         events: int = _lib.EFD_OP_DONE) -> None:
        """Register (events != 0), update or remove (0) an eventfd."""
        ret = _lib.lib().gs_eventfd(self._fd, efd, events)
        if ret < 0:
            raise errors.from_code(-ret)

    def _done(self, op_id):
        try:
            st = self.state()
        except errors.EngineGone:
            return True		# the domain died: WAIT tells the rest
        return op_id <= st.last_op_id and st.op_in_flight != op_id

    async def wait_async(self, op_id: int = 0) -> Result:
        """Await operation op_id (0 = the newest at call time): an eventfd
        registered for OP_DONE wakes the loop (loop.add_reader), then the
        WAIT ioctl fetches the result. Returns the Result or raises."""
        _check_op_id(op_id)
        loop = asyncio.get_running_loop()
        if op_id == 0:
            op_id = self.state().last_op_id
            if op_id == 0:
                raise errors.from_code(_errno.ENOENT,
                                       message="no operation issued yet")
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self.register_eventfd(efd, _lib.EFD_OP_DONE)
            try:
                # registered first, then checked: no wake-up is lost
                while not self._done(op_id):
                    fut = loop.create_future()

                    def ready(f=fut):
                        if not f.done():
                            f.set_result(None)
                    loop.add_reader(efd, ready)
                    try:
                        await fut
                    finally:
                        loop.remove_reader(efd)
                    try:
                        os.eventfd_read(efd)
                    except BlockingIOError:
                        pass
            finally:
                try:
                    self.register_eventfd(efd, 0)
                except OSError:
                    pass	# the domain died: registrations are gone
        finally:
            os.close(efd)
        return self.wait(op_id)


class Controller(_Ops):
    """A controller fd on one domain (GPUSLEEP_ROLE_CONTROLLER); a context
    manager that closes it. errors.DomainNotFound, AmbiguousDomain,
    ModuleNotLoaded, PermissionDenied when it cannot be had."""

    def __init__(self, domain: DomainRef,
                 dev_path: Optional[str] = None) -> None:
        if dev_path is not None and not isinstance(dev_path, str):
            raise TypeError("dev_path: want None or a path (str), not "
                            f"{type(dev_path).__name__}")
        self.domain_id = resolve_domain(domain)
        L = _lib.lib()
        dev = L.gs_open(dev_path.encode() if dev_path else None, 0, None)
        if dev < 0:
            path = dev_path or "/dev/gpusleep"
            if -dev in (_errno.ENOENT, _errno.ENODEV, _errno.ENXIO):
                raise errors.ModuleNotLoaded(path)
            raise OSError(-dev, f"{path}: {os.strerror(-dev)}")
        try:
            fd = L.gs_attach(dev, self.domain_id, _lib.ROLE_CONTROLLER)
        finally:
            os.close(dev)
        if fd < 0:
            if -fd in (_errno.ENOENT, _errno.ENODEV):
                raise errors.DomainNotFound(domain)
            if -fd in (_errno.EPERM, _errno.EACCES):
                raise errors.PermissionDenied(domain)
            raise OSError(-fd, f"attaching to domain {self.domain_id}: "
                          f"{os.strerror(-fd)}")
        self._fd = fd

    @classmethod
    def from_fd(cls, fd: int) -> "Controller":
        """A controller over an fd granted by the engine (Engine.grant,
        received with socket.recv_fds); owned from now on."""
        self = cls.__new__(cls)
        st = _lib.gpusleep_state()
        ret = _lib.lib().gs_get_state(fd, ctypes.byref(st))
        if ret < 0:
            raise errors.from_code(-ret)
        self.domain_id = st.id
        self._fd = fd
        return self

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "Controller":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# ---------------------------------------------------- one-call functions

def release(domain: DomainRef, tags: Tags = None,
            abort_inflight: bool = False, timeout: Optional[float] = None,
            wait: bool = True,
            dev_path: Optional[str] = None) -> Union[Result, int]:
    """Release tags of domain (None = all). wait=True: the Result (raises on
    refusal or failure); wait=False: the op id (wait with wait())."""
    _check_bool("abort_inflight", abort_inflight)
    _check_bool("wait", wait)
    _timeout_ms(timeout)
    with Controller(domain, dev_path) as c:
        return c.release(tags, abort_inflight=abort_inflight,
                         timeout=timeout, wait=wait)


def resume(domain: DomainRef, tags: Tags = None,
           timeout: Optional[float] = None, wait: bool = True,
           dev_path: Optional[str] = None) -> Union[Result, int]:
    """Resume tags of domain (None = exactly what is released)."""
    _check_bool("wait", wait)
    _timeout_ms(timeout)
    with Controller(domain, dev_path) as c:
        return c.resume(tags, timeout=timeout, wait=wait)


def is_sleeping(domain: DomainRef, dev_path: Optional[str] = None) -> bool:
    """True while some tag of domain is released. Needs no privilege: for
    a domain the caller may not control it reads sysfs."""
    return state(domain, dev_path).is_sleeping


def state(domain: DomainRef, dev_path: Optional[str] = None) -> State:
    """The domain's State. As its owner or root: every field, through a
    controller fd (State.source "ioctl"). Any other user: what sysfs shows,
    as `gpusleepctl status` does (State.source "sysfs": no caps,
    last_op_id 0, last None). errors.DomainNotFound, AmbiguousDomain,
    ModuleNotLoaded when the domain cannot be found."""
    try:
        c = Controller(domain, dev_path)
    except errors.PermissionDenied:
        return State.from_sysfs(resolve_domain(domain))
    with c:
        return c.state()


def wait(domain: DomainRef, op_id: int = 0, timeout: Optional[float] = None,
         dev_path: Optional[str] = None) -> Result:
    """Wait for operation op_id (0 = the newest) of domain to finish: its
    Result, or its exception when it failed; errors.Timeout when timeout
    (seconds) passes first. Needs control of the domain (its owner, root
    or a granted fd)."""
    _check_op_id(op_id)
    _timeout_ms(timeout)
    with Controller(domain, dev_path) as c:
        return c.wait(op_id, timeout)
