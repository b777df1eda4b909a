# SPDX-License-Identifier: LGPL-2.1-or-later
"""The agent's side: tagged memory (gs_mm) served to a domain (gs_agent).

    from gpusleep.agent import MemoryManager, Agent
    mm = MemoryManager()                    # CUDA if libcuda loads, else host
    mm.set_policy("weights", backup=True)   # copied to host on release
    w = mm.alloc("weights", 64 << 20)       # w.addr, w.size (and w.view)
    agent = Agent(domain_id, mm)            # attached, io_uring thread runs
    ...
    agent.close()

Or, for the whole process, start_agent(domain) makes both.

Buffers keep their addresses across release/resume. On the host backend
Buffer.view is a writable memoryview of the memory (for tests and CPU-only
runs); touching it while its tag is released faults (the pages are
PROT_NONE), as a GPU kernel would on unmapped memory. On the CUDA backend
view is None and addr is a device pointer.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
from typing import Container, Literal, Optional, Sequence, TypedDict, Union

from . import _lib, errors
from .trainer import DomainRef, Tags, resolve_domain

#: The memory manager's backends: "auto" is CUDA when libcuda loads, else
#: the host's.
Backend = Literal["auto", "cuda", "host"]
#: A tag: its name, or its bit.
TagRef = Union[str, int]


class StepResult(TypedDict):
    """The last step served for a tag (a dict, as last_result gives it)."""
    op_id: int
    type: int
    tag: int
    complete_ret: int
    mm: dict[str, int]		# result_dict() of the memory manager's result


class AgentStepResult(StepResult):
    """Agent.last_result: a StepResult with what the process still held
    (resident_source None: not reported) and the tag's generation."""
    resident_bytes: int
    resident_source: Optional[str]
    generation: int


def _tag_bit(tag, names=_lib.TAG_NAMES):
    if isinstance(tag, int):
        return tag
    if tag not in names:
        raise errors.InvalidRequest(
            _lib.R_INVALID, message=f"invalid tag {tag!r}; valid: "
            f"{list(names)}")
    return 1 << names.index(tag)


def _make_backend(backend, device, cuda_lib):
    """(gs_backend pointer, its name). auto: CUDA when libcuda loads and
    the backend starts on device, else host."""
    L = _lib.lib()
    if backend not in ("auto", "cuda", "host"):
        raise ValueError("backend: want 'auto', 'cuda' or 'host'")
    if backend == "auto":
        try:	# quietly: libgpusleep reports a missing driver on stderr
            ctypes.CDLL(cuda_lib or "libcuda.so.1")
        except OSError:
            backend = "host"
    if backend in ("auto", "cuda"):
        err = ctypes.c_int(0)
        b = L.gs_backend_cuda_new(device,
                                  cuda_lib.encode() if cuda_lib else None,
                                  ctypes.byref(err))
        if b:
            return b, "cuda"
        if backend == "cuda":
            e = -err.value or _errno.ENODEV
            raise OSError(e, f"CUDA backend (device {device}): "
                          f"{os.strerror(e)}")
    b = L.gs_backend_host_new()
    if not b:
        e = ctypes.get_errno() or _errno.ENOMEM
        raise OSError(e, f"host backend: {os.strerror(e)}")
    return b, "host"


def result_dict(r: _lib.gs_mm_result) -> dict[str, int]:
    """struct gs_mm_result as a dict, flags as booleans."""
    d = {k: getattr(r, k) for k, _ in r._fields_ if k != "flags"}
    d["measured"] = bool(r.flags & _lib.GS_MM_RES_MEASURED)
    d["shortfall"] = bool(r.flags & _lib.GS_MM_RES_SHORTFALL)
    d["partial"] = bool(r.flags & _lib.GS_MM_RES_PARTIAL)
    d["fault"] = bool(r.flags & _lib.GS_MM_RES_FAULT)
    d["verified"] = bool(r.flags & _lib.GS_MM_RES_VERIFIED)
    d["verify_failed"] = bool(r.flags & _lib.GS_MM_RES_VERIFY_FAILED)
    return d


class Buffer:
    """One allocation: addr, size, tag; view (host backend) or None."""

    def __init__(self, mm: MemoryManager, addr: int, size: int,
                 tag: str) -> None:
        self.mm = mm
        self.addr = addr
        self.size = size
        self.tag = tag
        self.view: Optional[memoryview] = None
        if mm.backend == "host":
            arr = (ctypes.c_ubyte * size).from_address(addr)
            self.view = memoryview(arr).cast("B")

    def as_ctypes(self) -> ctypes.Array[ctypes.c_ubyte]:
        """A ctypes array over the memory (host backend only)."""
        if self.view is None:
            raise TypeError("device memory has no host view")
        return (ctypes.c_ubyte * self.size).from_address(self.addr)

    def __repr__(self) -> str:
        return f"Buffer(addr={self.addr:#x}, size={self.size}, tag={self.tag!r})"


class MemoryManager:
    """A gs_mm on the CUDA backend (when libcuda loads and a device is
    there) or the host backend. backend: 'auto', 'cuda' or 'host'. tags:
    the names of the domain's tags in declaration order (tag i is bit i);
    an Agent sets them from its domain."""

    def __init__(self, backend: Backend = "auto", device: int = 0,
                 cuda_lib: Optional[str] = None, *,
                 tags: Sequence[str] = _lib.TAG_NAMES) -> None:
        L = _lib.lib()
        self.tags = tuple(tags)
        b, self.backend = _make_backend(backend, device, cuda_lib)
        mm = ctypes.c_void_p()
        ret = L.gs_mm_new(b, ctypes.byref(mm))	# owns b, even on failure
        if ret < 0:
            raise OSError(-ret, f"memory manager: {os.strerror(-ret)}")
        self._mm: Optional[ctypes.c_void_p] = mm
        self._bufs: dict[int, Buffer] = {}

    @property
    def handle(self) -> Optional[ctypes.c_void_p]:
        return self._mm

    def set_policy(self, tag: TagRef, backup: bool,
                   chunk_size: int = 0) -> None:
        """backup=True: copied to host on release, restored on resume;
        False: discarded, reads as zeros after resume."""
        p = _lib.GS_MM_BACKUP if backup else _lib.GS_MM_DISCARD
        _lib.check(_lib.lib().gs_mm_set_policy(
            self._mm, _tag_bit(tag, self.tags), p, chunk_size),
                   f"set_policy({tag!r})")

    def alloc(self, tag: TagRef, size: int) -> Buffer:
        """A Buffer of size bytes in tag (EBUSY while the tag is released)."""
        addr = _lib.lib().gs_mm_alloc(self._mm, _tag_bit(tag, self.tags),
                                      size)
        if not addr:
            e = ctypes.get_errno() or _errno.ENOMEM
            raise OSError(e, f"alloc({tag!r}, {size}): {os.strerror(e)}")
        name = tag if isinstance(tag, str) else \
            _lib.mask_to_tags(tag, self.tags)[0]
        buf = Buffer(self, addr, size, name)
        self._bufs[addr] = buf
        return buf

    def free(self, buf: Union[Buffer, int]) -> None:
        addr = buf.addr if isinstance(buf, Buffer) else buf
        self._bufs.pop(addr, None)
        _lib.check(_lib.lib().gs_mm_free(self._mm, addr), "free")

    def pause(self, tag: TagRef) -> int:
        """Unmap a tag directly (no domain involved); the bytes unmapped."""
        return self.pause_ex(tag)["bytes"]

    def resume(self, tag: TagRef) -> int:
        return self.resume_ex(tag)["bytes"]

    def _op_ex(self, fn, what, tag, check):
        r = _lib.gs_mm_result()
        ret = fn(self._mm, _tag_bit(tag, self.tags), ctypes.byref(r))
        d = result_dict(r)
        if check and ret < 0:
            e = OSError(-ret, f"{what}({tag!r}): {os.strerror(-ret)}")
            e.result = d
            raise e
        return d

    def pause_ex(self, tag: TagRef, check: bool = True) -> dict[str, int]:
        """Pause, returning struct gs_mm_result as a dict: bytes
        unmapped, unmapped_bytes (what stays unmapped), lost_bytes,
        freed_bytes (what the driver saw come free; measured, shortfall
        and partial as booleans). A failure raises OSError with .result
        (check=False: returns it, with status)."""
        return self._op_ex(_lib.lib().gs_mm_pause_ex, "pause", tag, check)

    def resume_ex(self, tag: TagRef, check: bool = True) -> dict[str, int]:
        return self._op_ex(_lib.lib().gs_mm_resume_ex, "resume", tag, check)

    def trim(self, tags: Tags = 0) -> int:
        """Give empty chunks back (after waiting for the GPU); bytes."""
        n = ctypes.c_uint64()
        mask = tags if isinstance(tags, int) else \
            _lib.tags_to_mask(tags, names=self.tags)
        _lib.check(_lib.lib().gs_mm_trim(self._mm, mask, ctypes.byref(n)),
                   "trim")
        return n.value

    def set_fence_streams(self, streams: Sequence[int] = ()) -> None:
        """What a pause waits for before copying and unmapping: () = all
        GPU work of the context (default); else only the work queued on
        these CUDA streams (ints: cudaStream_t, e.g.
        torch.cuda.current_stream().cuda_stream)."""
        arr = (ctypes.c_void_p * max(len(streams), 1))(*streams)
        _lib.check(_lib.lib().gs_mm_set_fence_streams(
            self._mm, arr, len(streams)), "set_fence_streams")

    def set_fence_timeout(self, ms: int) -> None:
        """How long a fence may wait for the GPU (0: no bound; default
        25000): past it the pause fails with ETIMEDOUT, nothing unmapped."""
        _lib.check(_lib.lib().gs_mm_set_fence_timeout(self._mm, ms),
                   "set_fence_timeout")

    def set_pin_limit(self, max_bytes: int) -> None:
        """Cap the pinned backup staging of all tags (0: none)."""
        _lib.check(_lib.lib().gs_mm_set_pin_limit(self._mm, max_bytes),
                   "set_pin_limit")

    def set_verify(self, on: bool = True) -> None:
        """Checksum each backup's host copy and check it before a resume
        restores it (also GPUSLEEP_VERIFY=1 in the environment): a copy
        that changed in between fails the resume (OSError EBADMSG; the
        agent answers it so: the module's VERIFY_FAILED), its contents
        said lost; the next resume maps it fresh (zeros)."""
        if not isinstance(on, bool):
            raise TypeError(f"on: want bool, not {type(on).__name__}")
        _lib.check(_lib.lib().gs_mm_set_verify(self._mm, on), "set_verify")

    @property
    def verify(self) -> bool:
        """Whether backups are verified (set_verify)."""
        return bool(_lib.lib().gs_mm_verify(self._mm))

    def pinned(self) -> tuple[int, int]:
        """(pinned staging bytes now, the cap or 0)."""
        b, lim = ctypes.c_uint64(), ctypes.c_uint64()
        _lib.lib().gs_mm_pinned(self._mm, ctypes.byref(b), ctypes.byref(lim))
        return b.value, lim.value

    def set_staging(self, tag: TagRef, lazy: bool = False,
                    free_after_resume: bool = False) -> None:
        """Backup staging: pinned ahead (default) or at the pause (lazy);
        kept across cycles (default) or freed after each resume."""
        f = (_lib.GS_MM_STAGING_LAZY if lazy else 0) | \
            (_lib.GS_MM_STAGING_FREE_AFTER_RESUME if free_after_resume
             else 0)
        _lib.check(_lib.lib().gs_mm_set_staging(
            self._mm, _tag_bit(tag, self.tags), f),
                   f"set_staging({tag!r})")

    def resident(self) -> tuple[int, Optional[str]]:
        """The device memory this process holds now, as the driver sees
        it (what the agent reports after each pause): (bytes, source),
        source "process" (NVML), "device" (cuMemGetInfo, every process on
        the GPU), or None (not known: the host backend)."""
        b = ctypes.c_uint64()
        src = _lib.lib().gs_mm_resident(self.handle, ctypes.byref(b))
        return b.value, _lib.RESIDENT_SOURCES[src] if 0 <= src < len(
            _lib.RESIDENT_SOURCES) else None

    def tag_info(self, tag: TagRef) -> dict[str, Union[int, str, None]]:
        """struct gs_mm_tag_info as a dict; content as its name
        ("kept", "zeroed", "undefined": what the tag holds after its
        next resume)."""
        i = _lib.gs_mm_tag_info()
        _lib.check(_lib.lib().gs_mm_tag_info(self._mm,
                                             _tag_bit(tag, self.tags),
                                             ctypes.byref(i)), "tag_info")
        d: dict[str, Union[int, str, None]] = {
            k: getattr(i, k) for k, _ in i._fields_ if k != "pad"}
        d["content"] = _lib.CONTENTS[i.content] if i.content < len(
            _lib.CONTENTS) else str(i.content)
        return d

    def close(self) -> None:
        """Destroy the manager: every buffer it handed out is gone."""
        if self._mm:
            _lib.lib().gs_mm_destroy(self._mm)
            self._mm = None
            self._bufs.clear()

    def __enter__(self) -> MemoryManager:
        """with MemoryManager(...) as mm: closed at the end of the block."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Agent:
    """The agent of a domain (GPUSLEEP_ROLE_AGENT) serving a MemoryManager.
    thread=True: on libgpusleep's io_uring thread; thread=False: poll
    fileno() and call dispatch() from your loop."""

    def __init__(self, domain: DomainRef, mm: MemoryManager, *,
                 thread: bool = True, dev_path: Optional[str] = None) -> None:
        L = _lib.lib()
        self.domain_id = resolve_domain(domain)
        self.mm = mm
        a = ctypes.c_void_p()
        ret = L.gs_agent_attach(dev_path.encode() if dev_path else None,
                                self.domain_id, mm.handle, ctypes.byref(a))
        if ret < 0:
            raise OSError(-ret, f"agent for domain {self.domain_id}: "
                          f"{os.strerror(-ret)}")
        self._a = a
        self._thread = False
        if thread:
            ret = L.gs_agent_start(a)
            if ret < 0:
                L.gs_agent_destroy(a)
                self._a = None
                raise OSError(-ret, f"agent thread: {os.strerror(-ret)}")
            self._thread = True
        # the memory manager names tags as the domain declared them
        mm.tags = tuple(n for n, _, _ in _lib.get_tags(self.fileno()))

    def fileno(self) -> int:
        return _lib.lib().gs_agent_fd(self._a)

    def dispatch(self) -> int:
        """Serve the queued events; the number handled. EngineGone at the
        end (the domain died)."""
        ret = _lib.lib().gs_agent_dispatch(self._a)
        if ret == -_errno.EPIPE:
            raise errors.EngineGone(_lib.R_ENGINE_GONE)
        return _lib.check(ret, "agent dispatch")

    def stats(self) -> dict[str, int]:
        st = _lib.gs_agent_stats()
        _lib.lib().gs_agent_get_stats(self._a, ctypes.byref(st))
        return {k: getattr(st, k) for k, _ in st._fields_}

    def last_result(self, tag: TagRef) -> Optional[AgentStepResult]:
        """The last step served for tag (a dict: op_id, type, tag,
        complete_ret, and the memory manager's result under 'mm', with
        freed_bytes: what the driver saw come free), or None."""
        r = _lib.gs_agent_result()
        ret = _lib.lib().gs_agent_last_result(
            self._a, _tag_bit(tag, self.mm.tags), ctypes.byref(r))
        if ret == -_errno.ENOENT:
            return None
        _lib.check(ret, "last_result")
        return {"op_id": r.op_id, "type": r.type, "tag": r.tag,
                "complete_ret": r.complete_ret, "mm": result_dict(r.mm),
                "resident_bytes": r.resident_bytes,
                "resident_source": _lib.RESIDENT_SOURCES[r.resident_source]
                if r.resident_source < len(_lib.RESIDENT_SOURCES) else None,
                "generation": r.generation}

    def set_outside(self, torch_reserved: int = 0,
                    graph_pool: int = 0) -> None:
        """What the process holds outside its tags that only it knows:
        PyTorch's reserved memory outside the regions' pools, and CUDA
        graph pools outside them (0: unknown). Sent in the agent's next
        report (the thread's: at most one per 100 ms)."""
        for name, v in (("torch_reserved", torch_reserved),
                        ("graph_pool", graph_pool)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TypeError(f"{name}: want bytes (int >= 0), not {v!r}")
        _lib.lib().gs_agent_set_outside(self._a, torch_reserved, graph_pool)

    def report(self) -> None:
        """Send a report to the module now (GPUSLEEP_IOC_REPORT): the
        tags' sizes, policies, content after resume, verification, and
        what the process holds; OSError when the module refuses it."""
        _lib.check(_lib.lib().gs_agent_report(self._a), "report")

    def report_stats(self) -> dict[str, int]:
        """Reports sent, failed, coalesced; last_error (-errno)."""
        st = _lib.gs_agent_report_stats()
        _lib.lib().gs_agent_get_report_stats(self._a, ctypes.byref(st))
        return {k: getattr(st, k) for k, _ in st._fields_ if k != "pad"}

    def stop(self) -> int:
        """Stop the thread; 0, or the -errno that ended it."""
        if self._thread:
            self._thread = False
            return _lib.lib().gs_agent_stop(self._a)
        return 0

    def close(self) -> None:
        """Stop, and close the agent fd (the domain is 'not enabled' then)."""
        if self._a:
            self.stop()
            _lib.lib().gs_agent_destroy(self._a)
            self._a = None

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def start_agent(domain: DomainRef, backend: Backend = "auto", *,
                device: int = 0, backup: Container[str] = ("weights",),
                dev_path: Optional[str] = None) -> Agent:
    """The agent of this process: a MemoryManager (CUDA when a GPU is
    there, else host) with the tags in backup backed up and the others
    discarded, served on a thread. Returns the Agent (agent.mm allocates)."""
    mm = MemoryManager(backend, device)
    agent = Agent(domain, mm, dev_path=dev_path)
    for t in mm.tags:
        mm.set_policy(t, backup=t in backup)
    return agent
