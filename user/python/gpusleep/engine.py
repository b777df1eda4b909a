# SPDX-License-Identifier: LGPL-2.1-or-later
"""The engine's side: a domain and its callbacks (libgpusleep's gs_engine).

    from gpusleep.engine import Engine, PENDING

    def drain(tags, abort_inflight):
        scheduler.pause(abort=abort_inflight)
        return PENDING                # answered once in-flight work is done

    eng = Engine("llm0", gpu="0000:41:00.0", prefix_caching=True,
                 prefix_cache_reset=True, drain=drain,
                 reset_caches=scheduler.reset_prefix_cache,
                 repair_kv=kv_pools.zero_, resume_sched=scheduler.resume,
                 drain_cancelled=scheduler.stop_draining)
    loop.add_reader(eng.fileno(), eng.dispatch)   # or eng.add_to_loop()
    ...
    eng.complete(0)                   # when the last request finished

Callbacks (each may be None: answered with success / ignored):
  drain(tags, abort_inflight)  tags: list of names being released
  reset_caches()               reset the prefix cache (kv_cache released)
  repair_kv()                  KV memory is back (zeros): rebuild the pools
  resume_sched()               start scheduling again (no answer): the
                               only "go"; the module sends it once nothing
                               is released and KV is repaired
  drain_cancelled()            the drain was called off (a resume came
                               first, or it failed or timed out): stop
                               draining, a pending drain is dropped. NOT
                               "go": scheduling stays paused (other tags
                               may still be released) until resume_sched
Scheduling is a level the module owns: every record carries it, and
sched_paused follows the newest record read.
An engine without a loop of its own (a trainer's memory, vLLM's workers,
whose code reads nothing between operations) calls serve(): a thread of
the engine reads its records and runs the callbacks as they come, so that
a drain is answered at once (refused, or let through) and never waits for
the drain timeout; its own release()/resume() then wait in the kernel.
Backing generations: the memory behind a tag is new after each resume, so
buffers registered with NCCL or RDMA must be registered again. In
resume_sched, replaced_tags names the tags replaced since the previous
resume_sched; in repair_kv, kv_generation is the KV cache's generation;
generation(tag) reads a tag's generation from the module at any time.
drain, reset_caches and repair_kv return None or 0 (done), a negative errno
(fails the operation: ENGINE_FAILED), or PENDING (answer later with
complete()). An exception in a callback fails the step with its errno
(EIO when it has none) and is logged. Callbacks may be set or replaced any
time (they are looked up when an event arrives).
"""

from __future__ import annotations

import ctypes
import errno as _errno
import logging
import os
import select
import threading
from typing import (TYPE_CHECKING, Callable, Iterable, Literal, Optional,
                    Union)

from . import _lib, errors
from .trainer import Result, Tags, _Ops

if TYPE_CHECKING:
    import asyncio

PENDING = _lib.GS_PENDING
log = logging.getLogger("gpusleep.engine")

#: drain(tags, abort_inflight): None or 0 (done), -errno, or PENDING
DrainCallback = Callable[[list[str], bool], Optional[int]]
#: reset_caches(), repair_kv(): None or 0 (done), -errno, or PENDING
StepCallback = Callable[[], Optional[int]]
#: drain_cancelled(), resume_sched(): a notice (what it returns is ignored)
NoticeCallback = Callable[[], object]
#: A tag declaration: names (kind memory, except "kv_cache") or (name,
#: kind) pairs, kind "memory" or "kv_cache".
TagDecl = Iterable[Union[str, tuple[str, str]]]


def _answer(value):
    if value is None or value is False:
        return 0
    if value is True:
        return 0
    if isinstance(value, int):
        if value == PENDING or value <= 0:
            return value
    log.error("callback returned %r: want None, 0, -errno or PENDING", value)
    return -_errno.EINVAL


class Engine(_Ops):
    """A domain, owned: closing the engine (or the process) kills it.
    tags: its declaration, in release order: names (kind memory, except
    "kv_cache") or (name, kind) pairs, kind "memory" or "kv_cache" (at
    most one); None: weights, kv_cache."""

    PENDING = PENDING

    def __init__(self, name: str, gpu: Optional[str] = "", *,
                 prefix_caching: bool = False,
                 prefix_cache_reset: bool = False,
                 dev_path: Optional[str] = None,
                 drain: Optional[DrainCallback] = None,
                 drain_cancelled: Optional[NoticeCallback] = None,
                 reset_caches: Optional[StepCallback] = None,
                 repair_kv: Optional[StepCallback] = None,
                 resume_sched: Optional[NoticeCallback] = None,
                 shared: bool = False,
                 tags: Optional[TagDecl] = None,
                 priority: int = 0,
                 yieldable: bool = False) -> None:
        L = _lib.lib()
        # tags: the declaration, in release order (None: weights, kv_cache)
        decl = _lib.declaration(tags) if tags is not None else \
            list(_lib.DEFAULT_DECL)
        c_tags, nr_tags = _lib.c_declaration(decl) if tags is not None \
            else (None, 0)
        self.drain = drain
        self.drain_cancelled = drain_cancelled
        self.reset_caches = reset_caches
        self.repair_kv = repair_kv
        self.resume_sched = resume_sched
        self._e = None
        self._loop = None
        self._server: Optional[_Server] = None
        # trampolines: kept alive as long as the engine
        self._c_ops = _lib.gs_engine_ops(
            drain=_lib.DRAIN_FN(self._t_drain),
            drain_cancelled=_lib.VOID_FN(self._t_cancelled),
            reset_caches=_lib.INT_FN(self._t_reset),
            repair_kv=_lib.INT_FN(self._t_repair),
            resume_sched=_lib.VOID_FN(self._t_resume))
        caps = (_lib.CAP_PREFIX_CACHING if prefix_caching else 0) | \
            (_lib.CAP_PREFIX_CACHE_RESET if prefix_cache_reset else 0)
        # shared=False: the domain belongs to this process (the agent
        # attaches from it; a forked child's copy does not keep it alive)
        cfg = _lib.gs_engine_config(
            dev_path=dev_path.encode() if dev_path else None,
            name=name.encode(), gpu=(gpu or "").encode(), caps=caps,
            flags=_lib.CREATEF_SHARED if shared else 0,
            tags=ctypes.cast(c_tags, ctypes.POINTER(_lib.gpusleep_tag))
            if c_tags is not None else None, nr_tags=nr_tags)
        e = ctypes.c_void_p()
        ret = L.gs_engine_create(ctypes.byref(cfg), ctypes.byref(self._c_ops),
                                 None, ctypes.byref(e))
        if ret == -_errno.EINVAL and tags is not None:
            raise errors.InvalidRequest(
                _lib.R_INVALID, message=f"creating domain {name!r}: tag "
                f"declaration {decl!r} refused: names [a-z][a-z0-9_]*, "
                f"unique, at most {_lib.MAX_TAGS}, one kv_cache kind")
        if ret < 0:
            raise OSError(-ret, f"creating domain {name!r}: "
                          f"{os.strerror(-ret)}")
        self._e = e
        self._tag_names = tuple(n for n, _ in decl)
        self.name = name
        self.id = L.gs_engine_id(e)
        self._fd = L.gs_engine_fd(e)
        # the tenant's statement (docs/arbiter.md): said only when not
        # the default, so that a module without tenants still serves it
        if priority or yieldable:
            try:
                self.set_tenant(priority, yieldable)
            except BaseException:
                self.close()
                raise

    # -- trampolines (called by gs_engine_dispatch, GIL re-acquired) ----
    def _call(self, what, fn, *args, void=False):
        if fn is None:
            return 0
        try:
            ret = fn(*args)
            return 0 if void else _answer(ret)
        except Exception as e:	# a callback's failure fails the step
            log.exception("engine callback %s failed", what)
            err = getattr(e, "errno", None)
            return -(err if isinstance(err, int) and err > 0 else _errno.EIO)

    def _t_drain(self, e, arg, tags, abort):
        return self._call("drain", self.drain,
                          _lib.mask_to_tags(tags, self.tag_names),
                          bool(abort))

    def _t_reset(self, e, arg):
        return self._call("reset_caches", self.reset_caches)

    def _t_repair(self, e, arg):
        return self._call("repair_kv", self.repair_kv)

    def _t_cancelled(self, e, arg):
        self._call("drain_cancelled", self.drain_cancelled, void=True)

    def _t_resume(self, e, arg):
        self._call("resume_sched", self.resume_sched, void=True)

    # -- the loop ----------------------------------------------------------
    def _check_open(self):
        if self._e is None:
            raise ValueError("engine closed")

    def dispatch(self) -> int:
        """Read every queued event and run its callback. Returns the number
        handled (0: none queued); EngineGone once the domain is dead."""
        self._check_open()
        ret = _lib.lib().gs_engine_dispatch(self._e)
        if ret == -_errno.EPIPE:
            raise errors.EngineGone(_lib.R_ENGINE_GONE)
        if ret < 0:
            raise OSError(-ret, f"engine dispatch: {os.strerror(-ret)}")
        return ret

    def complete(self, status: int = 0) -> bool:
        """Answer the pending step (a callback returned PENDING) with 0 or
        -errno. False if nothing is pending (it was cancelled or timed
        out), True when answered."""
        self._check_open()
        ret = _lib.lib().gs_engine_complete(self._e, status)
        if ret == -_errno.ESTALE:
            return False
        if ret < 0:
            raise OSError(-ret, f"engine complete: {os.strerror(-ret)}")
        return True

    @property
    def sched_paused(self) -> bool:
        """The module's level as of the newest record: True from DRAIN until
        RESUME_SCHED (a DRAIN_CANCELLED leaves it True). Schedule only
        while it is False."""
        self._check_open()
        return bool(_lib.lib().gs_engine_sched_paused(self._e))

    @property
    def pending(self) -> bool:
        """True while a step answered PENDING awaits complete()."""
        self._check_open()
        return bool(_lib.lib().gs_engine_pending(self._e))

    @property
    def replaced_tags(self) -> list[str]:
        """The tags whose memory the newest RESUME_SCHED says was replaced
        since the previous one: register their buffers again."""
        self._check_open()
        return _lib.mask_to_tags(_lib.lib().gs_engine_replaced_tags(self._e),
                                 self.tag_names)

    @property
    def kv_generation(self) -> int:
        """The KV cache's backing generation the newest REPAIR_KV carried
        (0 before the first)."""
        self._check_open()
        return int(_lib.lib().gs_engine_kv_generation(self._e))

    def generation(self, tag: str) -> int:
        """A tag's backing generation now, from the module's state."""
        self._check_open()
        gen = ctypes.c_uint64()
        ret = _lib.lib().gs_engine_generation(
            self._e, _lib.tags_to_mask([tag], names=self.tag_names),
            ctypes.byref(gen))
        if ret < 0:
            raise OSError(-ret, f"generation: {os.strerror(-ret)}")
        return gen.value

    def add_to_loop(self,
                    loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        """Dispatch from an asyncio loop whenever the fd is readable."""
        import asyncio
        self._loop = loop or asyncio.get_event_loop()
        self._loop.add_reader(self._fd, self._dispatch_quietly)

    def remove_from_loop(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._loop = None

    def _dispatch_quietly(self):
        try:
            self.dispatch()
        except errors.EngineGone:
            self.remove_from_loop()

    def serve(self) -> None:
        """Read this engine's records and run its callbacks from a thread
        of its own (named gpusleep-engine-ID), from now until close(): for
        an engine with no loop that reads its fd, so that every record is
        answered as it comes (a drain refused or let through at once, a KV
        repair of a resume another process started). The callbacks then
        run in that thread. release() and resume() of the engine itself
        wait in the kernel meanwhile. Idempotent."""
        self._check_open()
        if self._server is None:
            if self._loop is not None:
                raise RuntimeError("engine: already dispatched from an "
                                   "asyncio loop (add_to_loop)")
            self._server = _Server(self)
            self._server.start()

    @property
    def served(self) -> bool:
        """True while serve()'s thread answers the records."""
        return self._server is not None

    # -- operations started by the engine itself ---------------------------
    def run_until_done(self, op_id: int) -> Result:
        """Drive this engine's events until operation op_id has finished
        (for an operation the engine's own loop started: nobody else would
        answer its drain). Returns its Result or raises its error. A
        callback that answers PENDING must complete() from inside another
        callback or a signal handler, else the kernel's step timeout ends
        the operation."""
        efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            self.register_eventfd(efd, _lib.EFD_OP_DONE)
            p = select.poll()
            p.register(self._fd, select.POLLIN)
            p.register(efd, select.POLLIN)
            try:
                while not self._done(op_id):
                    for fd, ev in p.poll():
                        if fd == efd:
                            try:
                                os.eventfd_read(efd)
                            except BlockingIOError:
                                pass
                        elif ev & select.POLLIN:
                            self.dispatch()
                        elif ev & (select.POLLHUP | select.POLLERR):
                            raise errors.EngineGone(_lib.R_ENGINE_GONE)
                self.dispatch()		# e.g. RESUME_SCHED sent at the end
            finally:
                try:
                    self.register_eventfd(efd, 0)
                except OSError:
                    pass
        finally:
            os.close(efd)
        return self.wait(op_id)

    def release(self, tags: Tags = None, abort_inflight: bool = False,
                timeout: Optional[float] = None,
                wait: bool = True) -> Union[Result, int]:
        """Release from the engine itself (always non-blocking in the
        kernel). wait=True drives this engine's loop until it is done
        (run_until_done) and returns the Result; wait=False returns the op
        id, and the engine's loop answers the steps."""
        op_id = super().release(tags, abort_inflight=abort_inflight,
                                timeout=timeout, wait=False)
        if not wait:
            return op_id
        return self.wait(op_id) if self.served else \
            self.run_until_done(op_id)

    def resume(self, tags: Tags = None, timeout: Optional[float] = None,
               wait: bool = True) -> Union[Result, int]:
        """Resume from the engine itself; see release()."""
        op_id = super().resume(tags, timeout=timeout, wait=False)
        if not wait:
            return op_id
        return self.wait(op_id) if self.served else \
            self.run_until_done(op_id)

    def grant(self,
              role: Literal["controller", "agent"] = "controller") -> int:
        """An fd of role ("controller" or "agent") for this domain, to pass
        over a UNIX socket (socket.send_fds) to a process that may not
        attach by id: another container or pid namespace, or an agent
        process of its own. The caller owns the fd."""
        self._check_open()
        roles = {"controller": _lib.ROLE_CONTROLLER, "agent": _lib.ROLE_AGENT}
        if role not in roles:
            raise ValueError(f"role: want one of {sorted(roles)}")
        ret = _lib.lib().gs_grant(self._fd, roles[role])
        if ret < 0:
            raise errors.from_code(-ret)
        return ret

    def set_tenant(self, priority: int = 0, yieldable: bool = False) -> None:
        """The tenant's own statement (docs/arbiter.md): priority (lower
        yields first to a reclaim; above 0 needs CAP_SYS_NICE:
        errors.PriorityNotPermitted) and yieldable (other users may
        reclaim it; else only its owner and root)."""
        from .arbiter import set_tenant
        self._check_open()
        set_tenant(self._fd, priority, yieldable)

    def close(self) -> None:
        """Close the engine fd: the domain dies."""
        if self._server is not None:
            server, self._server = self._server, None
            server.stop()
        if self._e is not None:
            self.remove_from_loop()
            _lib.lib().gs_engine_destroy(self._e)
            self._e = None
            self._fd = -1

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _Server(threading.Thread):
    """Engine.serve()'s thread: poll() on the engine fd and on a pipe of
    its own (stop), dispatch on POLLIN, end at the domain's death or
    stop(). A callback that raises fails its step (Engine._call); any
    other error is logged and ends the thread."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(name=f"gpusleep-engine-{engine.id}", daemon=True)
        self.engine = engine
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)

    def run(self) -> None:
        p = select.poll()
        p.register(self.engine.fileno(), select.POLLIN)
        p.register(self._stop_r, select.POLLIN)
        try:
            while True:
                for fd, ev in p.poll():
                    if fd == self._stop_r:
                        return
                    if ev & select.POLLIN:
                        self.engine.dispatch()
                    elif ev & (select.POLLHUP | select.POLLERR):
                        return		# the domain is dead
        except errors.EngineGone:
            return
        except Exception:	# noqa: logged; nothing answers from now on
            log.exception("engine %s: serving its records failed",
                          self.engine.name)

    def stop(self) -> None:
        os.write(self._stop_w, b"x")
        if self is not threading.current_thread():
            self.join()
        os.close(self._stop_r)
        os.close(self._stop_w)
