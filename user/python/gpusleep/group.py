# SPDX-License-Identifier: LGPL-2.1-or-later
"""Groups: the ranks of one engine, released and resumed as one operation.

    from gpusleep import Group
    with Group("llm0", ["llm0-tp0", "llm0-tp1"]) as g:   # creates it
        g.release()          # every rank drains, then every rank unmaps
        ... train ...
        g.resume()

    Group.open("llm0").release()   # a group another process created

All or nothing (docs/groups.md): if any rank refuses, fails, times out or
dies, the ranks already released are resumed and the call raises the
gpusleep.errors exception of that rank's reason, naming it (exc.rank,
exc.domain, exc.result.ranks: the per-rank breakdown).
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
from typing import Iterable, Optional, Protocol, Sequence, Union

from . import _lib, errors
from .trainer import (DomainRef, Tags, resolve_domain, _deadline, _ms_left,
                      _timeout_ms)


class SupportsFileno(Protocol):
    """What holds an engine or controller fd of a domain (Engine,
    Controller): Group.add takes it as the domain."""

    def fileno(self) -> int: ...


class RankResult:
    """One rank of a group operation (struct gpusleep_group_rank)."""

    def __init__(self, rank: int, r: _lib.gpusleep_group_rank,
                 names: Sequence[str] = _lib.TAG_NAMES) -> None:
        self.rank = rank
        self.domain = r.domain
        self.flags = r.flags
        self.op_id = r.op_id
        self.rollback_op_id = r.rollback_op_id
        self.error = -r.error		# errno, 0 on success
        self.reason = r.reason
        self.reason_name = errors.reason_name(r.reason)
        self.released = _lib.mask_to_tags(r.released, names)
        self.done = bool(r.flags & _lib.GRF_DONE)
        self.failed = bool(r.flags & _lib.GRF_FAILED)
        self.cancelled = bool(r.flags & _lib.GRF_CANCELLED)
        self.rolled_back = bool(r.flags & _lib.GRF_ROLLED_BACK)
        self.still_released = bool(r.flags & _lib.GRF_STILL_RELEASED)
        self.running = bool(r.flags & _lib.GRF_RUNNING)

    def __repr__(self) -> str:
        what = [n for n in ("done", "failed", "cancelled", "rolled_back",
                            "still_released", "running")
                if getattr(self, n)]
        return (f"RankResult(rank={self.rank}, domain={self.domain}, "
                f"{'|'.join(what) or 'not_started'}, "
                f"reason={self.reason_name}, released={self.released!r})")


class GroupResult:
    """A finished group operation, with its per-rank breakdown."""

    def __init__(self, r: _lib.gpusleep_group_result,
                 ranks: list[RankResult]) -> None:
        self.op_id = r.op_id
        self.kind = {_lib.OP_RELEASE: "release",
                     _lib.OP_RESUME: "resume"}.get(r.kind, str(r.kind))
        self.error = -r.error if r.error < 0 else r.error
        self.reason = r.reason
        self.reason_name = errors.reason_name(r.reason)
        self.rank = None if r.rank == _lib.GROUP_NO_RANK else r.rank
        self.domain = r.domain or None
        self.duration = r.duration_ns / 1e9
        self.ranks = ranks
        # Ended at its deadline with ranks still at work: they go on as
        # group operation settle_op_id (wait() for it); None otherwise.
        self.settle_op_id: Optional[int] = \
            r.settle_op_id if r.flags & _lib.GROUP_RF_SETTLING else None

    @property
    def ok(self) -> bool:
        return self.error == 0

    def raise_for_error(self) -> GroupResult:
        if self.error:
            raise _group_error(self.error, self.reason, self.rank,
                               self.domain, op_id=self.op_id, result=self)
        return self

    def __repr__(self) -> str:
        settling = f", settle_op_id={self.settle_op_id}" \
            if self.settle_op_id else ""
        return (f"GroupResult(op_id={self.op_id}, kind={self.kind!r}, "
                f"error={self.error}, reason={self.reason_name}, "
                f"rank={self.rank}{settling}, ranks={self.ranks!r})")


def _group_error(err, reason, rank, domain, *, op_id=0, result=None,
                 tags=()):
    msg = errors.reason_str(reason) if reason else os.strerror(err)
    if rank is not None:
        msg = f"rank {rank} (domain {domain}): {msg}"
    e = errors.from_code(err, reason, op_id=op_id, tags=tags, message=msg)
    e.rank = rank
    e.domain = domain
    e.result = result
    return e


class Group:
    """A group fd: create one (with its ranks) or open a live one by name.
    The group lives as long as some fd of it: the process that creates it
    (an engine's: the trainer's side) ends it by exiting. Creating a name
    this user has live raises errors.GroupExists.

    domains: ids, names, or objects with fileno() holding an engine or
    controller fd of the domain (Controller, Engine)."""

    def __init__(self, name: str,
                 domains: Iterable[Union[DomainRef, SupportsFileno]] = (),
                 dev_path: Optional[str] = None, *,
                 _open: bool = False) -> None:
        L = _lib.lib()
        self.name = name
        dev = L.gs_open(dev_path.encode() if dev_path else None, 0, None)
        if dev < 0:
            path = dev_path or "/dev/gpusleep"
            if -dev in (_errno.ENOENT, _errno.ENODEV, _errno.ENXIO):
                raise errors.ModuleNotLoaded(path)
            raise OSError(-dev, f"{path}: {os.strerror(-dev)}")
        self._dev_path = dev_path
        gid = _lib.u32()
        try:
            call = L.gs_group_open if _open else L.gs_group_create
            fd = call(dev, name.encode(), ctypes.byref(gid))
        finally:
            os.close(dev)
        if fd == -_errno.EEXIST and not _open:
            raise errors.GroupExists(name)
        if fd == -_errno.ENOENT and _open:
            raise errors.GroupNotFound(name)
        if fd < 0:
            what = "opening" if _open else "creating"
            raise OSError(-fd, f"{what} group {name!r}: {os.strerror(-fd)}")
        self._fd = fd
        self.id = gid.value
        try:
            for d in domains:
                self.add(d)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, name: str, dev_path: Optional[str] = None) -> Group:
        """Another fd for the live group named name (gpusleepctl's way);
        errors.GroupNotFound when this user has none of that name."""
        return cls(name, dev_path=dev_path, _open=True)

    def fileno(self) -> int:
        return self._fd

    def add(self, domain: Union[DomainRef, SupportsFileno]) -> int:
        """Add a domain as the next rank; returns its rank."""
        L = _lib.lib()
        rank = _lib.u32()
        if hasattr(domain, "fileno"):
            ret = L.gs_group_add(self._fd, domain.fileno(),
                                 ctypes.byref(rank))
        else:
            dev = L.gs_open(self._dev_path.encode() if self._dev_path
                            else None, 0, None)
            if dev < 0:
                raise OSError(-dev, os.strerror(-dev))
            try:
                cfd = L.gs_attach(dev, resolve_domain(domain),
                                  _lib.ROLE_CONTROLLER)
            finally:
                os.close(dev)
            if cfd < 0:
                raise OSError(-cfd, f"attaching to domain {domain!r}: "
                              f"{os.strerror(-cfd)}")
            try:	# the group keeps the domain; the fd is not needed
                ret = L.gs_group_add(self._fd, cfd, ctypes.byref(rank))
            finally:
                os.close(cfd)
        if ret == -_errno.EXDEV:
            raise OSError(-ret, f"group {self.name!r}: adding {domain!r}: "
                          "its tags differ from the group's ranks'")
        if ret < 0:
            raise OSError(-ret, f"group {self.name!r}: adding {domain!r}: "
                          f"{os.strerror(-ret)}")
        return rank.value

    @property
    def tag_names(self) -> tuple[str, ...]:
        """The ranks' tags, in declaration order (they all declare the
        same); asked each time, since ranks may be added."""
        return tuple(n for n, _, _ in _lib.get_tags(self._fd)) or \
            _lib.TAG_NAMES

    def _op(self, kind, tags, flags, timeout, wait):
        L = _lib.lib()
        names = self.tag_names
        mask = _lib.tags_to_mask(tags, names=names)
        call = L.gs_group_release if kind == _lib.OP_RELEASE else \
            L.gs_group_resume
        op = _lib.gpusleep_group_op()
        ret = call(self._fd, mask, flags | _lib.OPF_NONBLOCK,
                   _timeout_ms(timeout), ctypes.byref(op))
        if ret < 0:	# refused: nothing changed on any rank
            rank = None if op.rank == _lib.GROUP_NO_RANK else op.rank
            bad = _lib.mask_to_tags(op.bad_tags, names) if op.bad_tags \
                else ()
            raise _group_error(-ret, op.reason, rank, op.domain or None,
                               tags=bad)
        if not wait:
            return op.op_id
        return self.wait(op.op_id).raise_for_error()

    def release(self, tags: Tags = None, abort_inflight: bool = False,
                timeout: Optional[float] = None,
                wait: bool = True) -> Union[GroupResult, int]:
        """Release every rank as one operation; a GroupResult (wait=False:
        the op id). timeout: seconds, per step and for the whole."""
        flags = _lib.OPF_ABORT_INFLIGHT if abort_inflight else 0
        return self._op(_lib.OP_RELEASE, tags, flags, timeout, wait)

    def resume(self, tags: Tags = None, timeout: Optional[float] = None,
               wait: bool = True) -> Union[GroupResult, int]:
        """Resume every rank as one operation (None: what each released)."""
        return self._op(_lib.OP_RESUME, tags, 0, timeout, wait)

    def wait(self, op_id: int = 0,
             timeout: Optional[float] = None) -> GroupResult:
        """The GroupResult of op_id (0: the newest), waiting for it.
        TimeoutError past timeout seconds."""
        L = _lib.lib()
        res = _lib.gpusleep_group_result()
        ranks = (_lib.gpusleep_group_rank * _lib.GROUP_MAX_RANKS)()
        tmo = _timeout_ms(timeout)
        deadline = _deadline(timeout)
        while True:
            n = _lib.u32(_lib.GROUP_MAX_RANKS)
            ret = L.gs_group_wait(self._fd, op_id, tmo,
                                  ctypes.byref(res), ranks, ctypes.byref(n))
            if ret != -_errno.EINTR:
                break
            # a handler that did not raise: the same operation (0 resolved
            # by the interrupted call), to the same deadline
            op_id = res.op_id or op_id
            tmo = _ms_left(deadline)
        if ret == -_errno.ETIMEDOUT:
            raise TimeoutError(f"group {self.name!r}: op {op_id} still "
                               "running")
        if ret < 0:
            raise OSError(-ret, f"group {self.name!r}: wait: "
                          f"{os.strerror(-ret)}")
        names = self.tag_names
        return GroupResult(res, [RankResult(i, ranks[i], names)
                                 for i in range(n.value)])

    def register_eventfd(self, efd: int) -> None:
        """Signal efd when a group operation finishes (-1: none)."""
        ret = _lib.lib().gs_group_eventfd(self._fd, efd)
        if ret < 0:
            raise OSError(-ret, os.strerror(-ret))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
