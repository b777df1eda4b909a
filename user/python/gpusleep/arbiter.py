# SPDX-License-Identifier: LGPL-2.1-or-later
"""One GPU shared by every tenant: reclaims and leases (docs/arbiter.md).

    import gpusleep
    with gpusleep.acquire("GPU-5d1e...", 40 << 30, priority=10) as lease:
        train_step()                  # the engines' memory is the trainer's
    # the lease's end resumed every engine it took from

A claimant asks the module for bytes of device memory on a GPU, at a
priority; the module picks the tenants to release (lower priority first,
then least recently active; discard-kind tags before backup-kind) and
releases them through the ordinary protocol. acquire() keeps what it took
in a Lease until the lease ends (its with block, give_back(), close(), or
the process's death: the engines never stay stranded); reclaim() takes it
for good (someone resumes the domains later).

A GPU is named by its UUID as CUDA and nvidia-smi give it ("GPU-...",
"MIG-..." or 32 hex digits), 16 bytes, a CUDA ordinal (int, or
"cuda:N"), "host" / "host:N" (the host backend's stand-in, the tests and
the demo), or "domain:NAME" (the GPU a domain's agent reports).

A reclaim that cannot free the bytes raises errors.Shortfall (what it
tried in .result, what kept it short in .why); a priority above 0 without
CAP_SYS_NICE raises errors.PriorityNotPermitted.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import logging
import os
import select
import time
from typing import Optional, Union

from . import _lib, errors
from .trainer import (DomainRef, _check_bool, _deadline, _ms_left,
                      _sysfs_class, _timeout_ms, resolve_domain)

log = logging.getLogger("gpusleep.arbiter")

#: A GPU: its UUID (str or 16 bytes), a CUDA ordinal, "host[:N]",
#: "cuda:N" or "domain:NAME".
GpuRef = Union[str, bytes, int]

# entries of victims asked for: a reclaim tries at most that many
# (GPUSLEEP_RECLAIM_MAX_VICTIMS)
_MAX_VICTIMS = _lib.RECLAIM_MAX_VICTIMS


def _uuid_array(u: bytes) -> ctypes.Array[ctypes.c_uint8]:
    return (ctypes.c_uint8 * 16).from_buffer_copy(u)


def format_uuid(uuid: bytes) -> str:
    """16 bytes as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"."""
    if not isinstance(uuid, (bytes, bytearray)) or len(uuid) != 16:
        raise ValueError("uuid: want 16 bytes")
    h = bytes(uuid).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _domain_gpu(name: str) -> bytes:
    did = resolve_domain(name)
    p = os.path.join(_sysfs_class(), f"domain{did}", "gpu_uuid")
    try:
        with open(p) as f:
            s = f.read().strip()
    except FileNotFoundError:
        raise errors.from_code(
            _errno.ENOENT, message=f"gpu: domain {name!r} shows no "
            f"gpu_uuid ({p}): a module without tenants") from None
    if not s or set(s.replace("-", "").replace("GPU", "")) <= {"0"}:
        raise errors.from_code(
            _errno.ENODATA, message=f"gpu: domain {name!r}'s agent has not "
            "reported its GPU yet")
    return gpu_uuid(s)


def gpu_uuid(gpu: GpuRef) -> bytes:
    """The 16-byte UUID of gpu (see the module's docstring)."""
    if isinstance(gpu, bool):
        raise TypeError("gpu: want a UUID (str or 16 bytes), a CUDA "
                        "ordinal (int), 'host[:N]', 'cuda:N' or "
                        "'domain:NAME', not bool")
    if isinstance(gpu, (bytes, bytearray)):
        if len(gpu) != 16:
            raise ValueError(f"gpu: want 16 bytes, not {len(gpu)}")
        return bytes(gpu)
    L = _lib.lib()
    out = (ctypes.c_uint8 * 16)()
    if isinstance(gpu, int) or (isinstance(gpu, str) and
                                gpu.startswith("cuda:")):
        n = gpu if isinstance(gpu, int) else gpu[5:]
        try:
            n = int(n)
        except ValueError:
            raise ValueError(f"gpu: {gpu!r} names no CUDA ordinal") from None
        if n < 0:
            raise ValueError(f"gpu: {gpu!r}: an ordinal is >= 0")
        lib = os.environ.get("GPUSLEEP_CUDA_LIB")
        ret = L.gs_cuda_device_uuid(n, lib.encode() if lib else None, out)
        if ret < 0:
            raise OSError(-ret, f"gpu: CUDA device {n}: "
                          f"{os.strerror(-ret)} (no NVIDIA driver here? "
                          "name the GPU by its UUID, or 'host' for the "
                          "host backend)")
        return bytes(out)
    if not isinstance(gpu, str):
        raise TypeError("gpu: want a UUID (str or 16 bytes), a CUDA "
                        "ordinal (int), 'host[:N]', 'cuda:N' or "
                        f"'domain:NAME', not {type(gpu).__name__}")
    if gpu.startswith("domain:"):
        return _domain_gpu(gpu[7:])
    ret = L.gs_gpu_uuid_parse(gpu.encode(), out)
    if ret < 0:
        raise ValueError(f"gpu: {gpu!r} is not a GPU UUID (GPU-..., MIG-..., "
                         "32 hex digits), 'host[:N]', 'cuda:N' or "
                         "'domain:NAME'")
    return bytes(out)


def _check_bytes(nbytes: object) -> int:
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"nbytes: want an int, not {type(nbytes).__name__}")
    if nbytes <= 0:
        raise ValueError(f"nbytes: want bytes > 0, not {nbytes}")
    return nbytes


def _check_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError("priority: want an int, not "
                        f"{type(priority).__name__}")
    if not _lib.PRIO_MIN <= priority <= _lib.PRIO_MAX:
        raise ValueError(f"priority: want {_lib.PRIO_MIN}..{_lib.PRIO_MAX}, "
                         f"not {priority}")
    return priority


def _domain_tag_names(domain: int) -> tuple[str, ...]:
    p = os.path.join(_sysfs_class(), f"domain{domain}", "tags")
    try:
        with open(p) as f:
            names = tuple(n for n in f.read().strip().split(",") if n)
    except OSError:
        names = ()
    return names or _lib.TAG_NAMES


def _domain_name(domain: int) -> Optional[str]:
    try:
        with open(os.path.join(_sysfs_class(), f"domain{domain}",
                               "name")) as f:
            return f.read().strip()
    except OSError:
        return None


class Victim:
    """One domain a reclaim tried (struct gpusleep_reclaim_victim): the
    tags its release took, what came free, how its release ended, and the
    resume that gave them back (a rollback or the lease's end)."""

    def __init__(self, v: _lib.gpusleep_reclaim_victim) -> None:
        self.domain = v.domain
        self.name = _domain_name(v.domain)
        names = _domain_tag_names(v.domain)
        self.tags = _lib.mask_to_tags(v.tags, names)
        self.op_id = v.op_id
        self.freed_bytes = v.freed_bytes
        self.error = -v.error if v.error < 0 else v.error
        self.reason = v.reason
        self.reason_name = errors.reason_name(v.reason)
        self.flags = _lib.bit_names(v.flags, _lib.RVF_NAMES)
        self.group = v.group
        self.resume_op_id = v.resume_op_id
        self.resume_error = -v.resume_error if v.resume_error < 0 \
            else v.resume_error
        self.resume_reason = v.resume_reason
        self.resume_reason_name = errors.reason_name(v.resume_reason)

    @property
    def measured(self) -> bool:
        """freed_bytes as the agent measured it (else: the bytes unmapped)."""
        return "unmeasured" not in self.flags

    def as_dict(self) -> dict[str, object]:
        return dict(vars(self))

    def __repr__(self) -> str:
        return (f"Victim(domain={self.domain}, name={self.name!r}, "
                f"tags={self.tags!r}, freed_bytes={self.freed_bytes}, "
                f"flags={self.flags!r}, reason={self.reason_name})")


class ReclaimResult:
    """A reclaim (struct gpusleep_reclaim, answered): op_id, state
    ("running", "done"), bytes asked, taken_bytes, reason (NONE or
    SHORTFALL) and why (what kept it short), victims, and lease_id."""

    def __init__(self, r: _lib.gpusleep_reclaim,
                 victims: list[Victim]) -> None:
        self.op_id = r.op_id
        self.state = {_lib.RECLAIM_RUNNING: "running",
                      _lib.RECLAIM_DONE: "done"}.get(r.state, str(r.state))
        self.gpu = format_uuid(bytes(r.gpu_uuid)) if any(r.gpu_uuid) \
            else None
        self.bytes = r.bytes
        self.priority = r.priority
        self.taken_bytes = r.taken_bytes
        self.reason = r.reason
        self.reason_name = errors.reason_name(r.reason)
        self.why = _lib.bit_names(r.why, _lib.RWHY_NAMES)
        self.victims = victims
        self.lease_id = r.lease_id

    @property
    def ok(self) -> bool:
        return self.reason == _lib.R_NONE and self.state == "done"

    def as_dict(self) -> dict[str, object]:
        d = {k: v for k, v in vars(self).items() if k != "victims"}
        d["victims"] = [v.as_dict() for v in self.victims]
        return d

    def __repr__(self) -> str:
        return (f"ReclaimResult(op_id={self.op_id}, state={self.state!r}, "
                f"taken_bytes={self.taken_bytes}, reason={self.reason_name}"
                f", why={self.why!r}, victims={len(self.victims)})")


def _victims(arr: ctypes.Array[_lib.gpusleep_reclaim_victim],
             n: int) -> list[Victim]:
    return [Victim(arr[i]) for i in range(n)]


def _open_dev(dev_path: Optional[str]) -> int:
    dev = _lib.lib().gs_open(dev_path.encode() if dev_path else None, 0,
                             None)
    if dev < 0:
        path = dev_path or "/dev/gpusleep"
        if -dev in (_errno.ENOENT, _errno.ENODEV, _errno.ENXIO):
            raise errors.ModuleNotLoaded(path)
        raise OSError(-dev, f"{path}: {os.strerror(-dev)}")
    return dev


def _raise_for(ret: int, res: ReclaimResult, what: str,
               priority: int) -> None:
    if ret == -_errno.ENOSPC or res.reason == _lib.R_SHORTFALL:
        short = res.bytes - res.taken_bytes if res.bytes > res.taken_bytes \
            else 0
        e = errors.from_code(
            _errno.ENOSPC, _lib.R_SHORTFALL, op_id=res.op_id,
            message=f"{what}: {short} of {res.bytes} bytes could not be "
            f"freed ({', '.join(res.why) or 'no reason given'}); tried "
            f"{len(res.victims)} domain(s)")
        e.why = tuple(res.why)
        e.reclaim = res
        raise e
    if ret == -_errno.EPERM:
        raise errors.PriorityNotPermitted(
            _lib.R_NONE, _errno.EPERM,
            f"{what}: priority {priority} > 0 needs CAP_SYS_NICE in the "
            "initial user namespace (as nice(2)); claim at 0 or below")
    if ret < 0:
        raise errors.from_code(-ret, op_id=res.op_id,
                               message=f"{what}: {os.strerror(-ret)}")


def _wait_reclaim(dev: int, op_id: int, deadline: Optional[float],
                  what: str, priority: int) -> ReclaimResult:
    """RECLAIM_WAIT for op_id to its end (PEP 475: a signal whose handler
    does not raise waits again, to the same deadline)."""
    L = _lib.lib()
    while True:
        r = _lib.gpusleep_reclaim()
        arr = (_lib.gpusleep_reclaim_victim * _MAX_VICTIMS)()
        n = ctypes.c_uint32(_MAX_VICTIMS)
        ret = L.gs_reclaim_wait(dev, op_id, _ms_left(deadline), r, arr,
                                ctypes.byref(n))
        if ret == -_errno.EINTR:
            op_id = r.op_id or op_id
            continue
        res = ReclaimResult(r, _victims(arr, n.value))
        if ret == -_errno.ETIMEDOUT:
            raise errors.from_code(_errno.ETIMEDOUT, op_id=op_id,
                                   message=f"{what}: still running")
        _raise_for(ret, res, what, priority)
        return res


def _reclaim(gpu: GpuRef, nbytes: int, priority: int,
             timeout: Optional[float], flags: int,
             dev_path: Optional[str], what: str
             ) -> tuple[int, ReclaimResult]:
    """(lease fd or -1, result) of one RECLAIM, waited for."""
    uuid = gpu_uuid(gpu)
    _check_bytes(nbytes)
    _check_priority(priority)
    tmo = _timeout_ms(timeout)
    deadline = _deadline(timeout)
    L = _lib.lib()
    dev = _open_dev(dev_path)
    lease_fd = -1
    try:
        r = _lib.gpusleep_reclaim()
        arr = (_lib.gpusleep_reclaim_victim * _MAX_VICTIMS)()
        n = ctypes.c_uint32(_MAX_VICTIMS)
        ret = L.gs_reclaim(dev, _uuid_array(uuid), nbytes, priority, flags,
                           tmo, r, arr, ctypes.byref(n))
        if r.lease_fd >= 0:
            lease_fd = r.lease_fd	# ours now, whatever comes
        if ret == -_errno.EINTR and r.op_id:
            # a handler that did not raise: the reclaim goes on
            res = _wait_reclaim(dev, r.op_id, deadline, what, priority)
        else:
            res = ReclaimResult(r, _victims(arr, n.value))
            _raise_for(ret, res, what, priority)
        return lease_fd, res
    except BaseException:
        if lease_fd >= 0:
            os.close(lease_fd)	# gives back whatever it holds
        raise
    finally:
        os.close(dev)


def reclaim(gpu: GpuRef, nbytes: int, priority: int = 0,
            timeout: Optional[float] = None, *, partial: bool = False,
            discard_only: bool = False,
            dev_path: Optional[str] = None) -> ReclaimResult:
    """Free nbytes of device memory on gpu for good, at priority (lower
    yields first; above 0 needs CAP_SYS_NICE), within timeout seconds
    (None: the module's reclaim_timeout_ms). Returns the ReclaimResult
    (what it took, from whom); errors.Shortfall when short (nothing is
    kept unless partial=True, then what it took is returned).
    discard_only: take no tag whose release copies to host RAM."""
    _check_bool("partial", partial)
    _check_bool("discard_only", discard_only)
    flags = (_lib.RECLAIMF_PARTIAL if partial else 0) | \
        (_lib.RECLAIMF_DISCARD_ONLY if discard_only else 0)
    _, res = _reclaim(gpu, nbytes, priority, timeout, flags, dev_path,
                      "reclaim")
    return res


def reclaim_wait(op_id: int = 0, timeout: Optional[float] = None,
                 dev_path: Optional[str] = None) -> ReclaimResult:
    """The end of reclaim op_id (0: this process's newest): its
    ReclaimResult, errors.Shortfall when it was short, errors.Timeout
    past timeout seconds."""
    if isinstance(op_id, bool) or not isinstance(op_id, int) or op_id < 0:
        raise TypeError("op_id: want 0 or a reclaim id (int)")
    _timeout_ms(timeout)
    dev = _open_dev(dev_path)
    try:
        return _wait_reclaim(dev, op_id, _deadline(timeout),
                             "reclaim_wait", 0)
    finally:
        os.close(dev)


class LeaseInfo:
    """What a lease holds (struct gpusleep_lease): state ("taking",
    "held", "returning", "returned"), taken_bytes, held (seconds since
    its reclaim ended), still_released (once returned: domains whose
    resume failed), victims."""

    def __init__(self, li: _lib.gpusleep_lease,
                 victims: list[Victim]) -> None:
        self.id = li.id
        self.reclaim_op_id = li.reclaim_op_id
        self.state = _lib.LEASE_STATES[li.state] \
            if 0 < li.state < len(_lib.LEASE_STATES) else str(li.state)
        self.taken_bytes = li.taken_bytes
        self.held = li.held_ns / 1e9
        self.still_released = li.still_released
        self.gpu = format_uuid(bytes(li.gpu_uuid)) if any(li.gpu_uuid) \
            else None
        self.victims = victims

    def __repr__(self) -> str:
        return (f"LeaseInfo(id={self.id}, state={self.state!r}, "
                f"taken_bytes={self.taken_bytes}, held={self.held:.3f}, "
                f"victims={len(self.victims)})")


class Lease:
    """Device memory taken from other tenants, held while this object's
    fd is open. A context manager: the with block's end gives it back
    (every domain it took resumed, highest priority first) and waits for
    that; so do give_back() and close() (close without waiting). A
    process that dies with it gives it back too."""

    def __init__(self, fd: int, reclaim: ReclaimResult) -> None:
        self._fd = fd
        self.reclaim = reclaim
        self.id = reclaim.lease_id
        self.gpu = reclaim.gpu
        self.taken_bytes = reclaim.taken_bytes
        self.victims = reclaim.victims
        #: once given back: the domains left released (their resume
        #: failed: the GPU still full), by id
        self.still_released: list[int] = []

    def fileno(self) -> int:
        """The lease fd (poll: readable once given back); -1 once closed."""
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def info(self) -> LeaseInfo:
        """What the lease holds now (GPUSLEEP_IOC_LEASE_INFO)."""
        if self._fd < 0:
            raise ValueError("lease closed")
        li = _lib.gpusleep_lease()
        arr = (_lib.gpusleep_reclaim_victim * _MAX_VICTIMS)()
        n = ctypes.c_uint32(_MAX_VICTIMS)
        ret = _lib.lib().gs_lease_info(self._fd, li, arr, ctypes.byref(n))
        if ret < 0:
            raise errors.from_code(-ret, message=f"lease {self.id}: "
                                   f"{os.strerror(-ret)}")
        return LeaseInfo(li, _victims(arr, n.value))

    def wait_returned(self, timeout: Optional[float] = None) -> bool:
        """Wait until the lease is given back (every resume ended): True,
        or False when timeout seconds pass first."""
        if self._fd < 0:
            raise ValueError("lease closed")
        _timeout_ms(timeout)
        deadline = _deadline(timeout)
        p = select.poll()
        p.register(self._fd, select.POLLIN)
        while True:
            ms = None if deadline is None else \
                max(0, int((deadline - time.monotonic()) * 1000))
            if p.poll(ms):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def give_back(self, wait: bool = True) -> list[int]:
        """Give the memory back now: every domain the lease took is
        resumed. wait=True (default): once every resume ended; returns
        the domains left released (their resume failed: see their
        state), [] when all are awake. wait=False: started, returns []."""
        _check_bool("wait", wait)
        if self._fd < 0:
            raise ValueError("lease closed")
        ret = _lib.lib().gs_lease_return(self._fd, not wait)
        if ret == -_errno.EINTR:
            self.wait_returned()	# PEP 475: the return goes on
            ret = 0
        if ret < 0:
            raise errors.from_code(-ret, message=f"lease {self.id}: giving "
                                   f"it back: {os.strerror(-ret)}")
        if not wait:
            return []
        info = self.info()
        self.still_released = [v.domain for v in info.victims
                               if "still_released" in v.flags]
        return list(self.still_released)

    def close(self) -> None:
        """Close the lease fd: gives back what it still holds, without
        waiting."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            left = self.give_back() if self._fd >= 0 else []
            if left:
                log.warning("lease %d: domains %s stay released (their "
                            "resume failed: is the GPU still full?); "
                            "resume them by hand", self.id, left)
        finally:
            self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return (f"Lease(id={self.id}, gpu={self.gpu!r}, "
                f"taken_bytes={self.taken_bytes}, "
                f"victims={[v.domain for v in self.victims]!r})")


def acquire(gpu: GpuRef, nbytes: int, priority: int = 0,
            timeout: Optional[float] = None, *, partial: bool = False,
            discard_only: bool = False,
            dev_path: Optional[str] = None) -> Lease:
    """Take nbytes of device memory on gpu from the tenants the caller may
    take from (below priority, or its own at or below it), within timeout
    seconds, and hold it in a Lease until the lease ends:

        with gpusleep.acquire(gpu, nbytes) as lease:
            train_step()

    errors.Shortfall when short (nothing is held unless partial=True),
    errors.PriorityNotPermitted for a priority above 0 without
    CAP_SYS_NICE."""
    _check_bool("partial", partial)
    _check_bool("discard_only", discard_only)
    flags = _lib.RECLAIMF_LEASE | \
        (_lib.RECLAIMF_PARTIAL if partial else 0) | \
        (_lib.RECLAIMF_DISCARD_ONLY if discard_only else 0)
    fd, res = _reclaim(gpu, nbytes, priority, timeout, flags, dev_path,
                       "acquire")
    if fd < 0:
        raise errors.from_code(_errno.EPROTO, op_id=res.op_id,
                               message="acquire: the module answered "
                               "without a lease fd")
    return Lease(fd, res)


class TagReport:
    """One tag as its agent reported it."""

    def __init__(self, name: str, t: _lib.gpusleep_report_tag) -> None:
        self.name = name
        self.size_bytes = t.size_bytes
        self.mapped_bytes = t.mapped_bytes
        self.host_bytes = t.host_bytes
        self.policy = _lib.POLICIES[t.policy] \
            if t.policy < len(_lib.POLICIES) else str(t.policy)
        self.content = _lib.CONTENTS[t.content] \
            if t.content < len(_lib.CONTENTS) else str(t.content)
        self.verified = bool(t.flags & _lib.RTF_VERIFIED)

    def __repr__(self) -> str:
        return (f"TagReport({self.name!r}, size={self.size_bytes}, "
                f"mapped={self.mapped_bytes}, policy={self.policy!r}, "
                f"content={self.content!r}, verified={self.verified})")


class Tenant:
    """A domain as a tenant (GPUSLEEP_IOC_GET_TENANT): its priority,
    yieldable, idle (seconds since it was last made awake), the lease
    holding some of its tags (lease_id, leased_tags), host_charged_bytes
    (what the node's host budget counts for it), and its agent's newest
    report: gpu, tags (TagReport), and what the process holds outside
    its tags, by class: torch_reserved_bytes, graph_pool_bytes,
    process_bytes (process_source "process" or "device"; 0/None:
    unknown)."""

    def __init__(self, t: _lib.gpusleep_tenant,
                 names: tuple[str, ...]) -> None:
        self.priority = t.priority
        self.yieldable = bool(t.flags & _lib.TENF_YIELDABLE)
        self.idle = t.idle_ns / 1e9
        self.lease_id = t.lease_id
        self.leased_tags = _lib.mask_to_tags(t.leased_tags, names)
        self.host_charged_bytes = t.host_charged_bytes
        r = t.report
        self.reported = r.nr_tags > 0
        self.gpu = format_uuid(bytes(r.gpu_uuid)) if any(r.gpu_uuid) \
            else None
        self.tags = [TagReport(names[i] if i < len(names) else f"tag{i}",
                               r.tags[i]) for i in range(min(r.nr_tags,
                                                             _lib.MAX_TAGS))]
        self.torch_reserved_bytes = r.torch_reserved_bytes
        self.graph_pool_bytes = r.graph_pool_bytes
        self.process_bytes = r.process_bytes
        self.process_source = _lib.RESIDENT_SOURCES[r.process_source] \
            if r.process_source < len(_lib.RESIDENT_SOURCES) \
            else str(r.process_source)

    @property
    def held_by_tags(self) -> int:
        """Device memory the tags hold (mapped) now."""
        return sum(t.mapped_bytes for t in self.tags)

    def __repr__(self) -> str:
        return (f"Tenant(priority={self.priority}, "
                f"yieldable={self.yieldable}, lease_id={self.lease_id}, "
                f"gpu={self.gpu!r}, tags={self.tags!r})")


def get_tenant(fd: int, names: tuple[str, ...]) -> Tenant:
    """GET_TENANT on a domain fd (any role)."""
    t = _lib.gpusleep_tenant()
    ret = _lib.lib().gs_get_tenant(fd, ctypes.byref(t))
    if ret < 0:
        raise errors.from_code(-ret)
    return Tenant(t, names)


def set_tenant(fd: int, priority: int = 0, yieldable: bool = False) -> None:
    """SET_TENANT on an engine fd: its priority (above 0 needs
    CAP_SYS_NICE) and whether other users may reclaim it."""
    _check_priority(priority)
    _check_bool("yieldable", yieldable)
    ret = _lib.lib().gs_set_tenant(
        fd, priority, _lib.TENF_YIELDABLE if yieldable else 0)
    if ret == -_errno.EPERM:
        raise errors.PriorityNotPermitted(
            _lib.R_NONE, _errno.EPERM,
            f"priority {priority}: raising it above 0 needs CAP_SYS_NICE "
            "in the initial user namespace (as nice(2))")
    if ret < 0:
        raise errors.from_code(-ret)


def tenant(domain: DomainRef, dev_path: Optional[str] = None) -> Tenant:
    """The domain's Tenant (needs control of it: its owner or root)."""
    from .trainer import Controller
    with Controller(domain, dev_path) as c:
        return c.tenant()
