# SPDX-License-Identifier: LGPL-2.1-or-later
"""A drop-in for the surface engines call on torch_memory_saver.

    from torch_memory_saver import torch_memory_saver          # before
    from gpusleep.torch_memory_saver import torch_memory_saver # after

    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):
        model = load_model()
    with torch_memory_saver.region(tag="kv_cache"):
        kv_pools = allocate_kv_cache()
    with torch_memory_saver.cuda_graph(graph, tag="cuda_graph"):
        out = model(static_input)               # captured
    torch_memory_saver.pause("kv_cache")      # or pause(): every tag
    torch_memory_saver.resume()               # exactly what is paused
    torch_memory_saver.enabled

Tags: the domain declares weights, kv_cache (the KV cache) and cuda_graph,
in that order (the order of a full release), so SGLang's graph memory is
released and brought back on its own; configure(tags=[...]) declares
others (gpusleep.engine.Engine's tags), and a tag the domain did not
declare is refused as invalid. "default" (torch_memory_saver's default
tag) is weights.

How allocations are captured (torch_memory_saver's "torch" hook mode, and
vLLM's CuMemAllocator): one torch.cuda.MemPool per tag, whose allocator is
libgpusleep's pluggable allocator for that tag's bit (gpusleep_malloc_tagN,
gpusleep_free); region(tag) enters that pool
with torch.cuda.use_mem_pool for the calling thread. So it works after CUDA
is initialised (SGLang and vLLM initialise it before any region), PyTorch's
caching allocator sits on top (memory_stats, empty_cache, graph pools work),
everything outside a region stays with PyTorch's own allocator, and an
allocation the memory manager cannot make raises torch.OutOfMemoryError.
Without torch importable, region() only sets the calling thread's tag for
gpusleep_malloc (what the tests without PyTorch use).

Regions nest (the innermost serves the thread), several threads may be in
one tag's region (each gets a pool of the tag), a released tag's region
or capture raises gpusleep.errors.Busy (its pools' cached blocks are
unmapped), expandable segments are switched off while a region is open
(PyTorch's MemPools refuse them), a foreign graph pool id is replaced by a
pool of the tag, and a region on another device than the memory
manager's raises RuntimeError (docs/pytorch.md).

pause() and resume(), where the gpusleep module is loaded, do not unmap
memory behind the kernel's back: they issue RELEASE / RESUME on the domain,
from the engine fd, and drive the engine's events (drain, cache reset, KV
repair, resume scheduling) until the operation ends; the memory is
unmapped and remapped by this process's agent thread, exactly as when a
trainer releases the domain from outside. The domain is the
gpusleep.engine.Engine given to configure(), or one made on first need,
named $GPUSLEEP_DOMAIN_NAME or "tms-PID". Call pause/resume from the thread
that runs the engine's loop.

Where there is no module (a GPU machine that cannot load kernel modules),
configure(local=True) or GPUSLEEP_TMS_LOCAL=1 makes pause/resume act on
this process's memory manager directly, as torch_memory_saver does: the
memory manager waits for all GPU work of the context before it copies or
unmaps, and each call returns the memory manager's results per tag
(bytes, and the bytes the driver saw come free).

Differences from torch_memory_saver (its current source, point by point)
are listed in docs/pytorch.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import os
import threading
from typing import (TYPE_CHECKING, Any, Iterable, Iterator, Optional,
                    Union)

from . import _lib, errors

if TYPE_CHECKING:
    import torch

    from .agent import StepResult
    from .engine import Engine, TagDecl
    from .trainer import Result


# The adapter's declaration: the reference controller's two tags, then
# SGLang's graph memory (released after the KV cache in a full release).
TMS_TAGS = (("weights", "memory"), ("kv_cache", "kv_cache"),
            ("cuda_graph", "memory"))


class TorchMemorySaver:
    def __init__(self) -> None:
        self._engine = None
        self._policies = {}		# tag name -> backup?
        self._agent = False
        self._allocators = {}		# tag name -> CUDAPluggableAllocator
        self._pools = {}		# (tag, device) -> [torch.cuda.MemPool]
        self._owner = {}		# id(pool) -> (thread, depth) using it
        self._foreign = {}		# (pool id, tag, device) -> MemPool
        self._expandable_users = 0	# regions open with it switched off
        self._user_disabled = False
        self._local = os.environ.get("GPUSLEEP_TMS_LOCAL") == "1"
        self._lock = threading.RLock()
        self._tls = threading.local()
        # the declaration of the domain made on first need (configure)
        self._decl = list(TMS_TAGS)
        self._alloc_declared = None	# names told to the allocator
        # torch_memory_saver's default tag is the weights
        self.tag_aliases = {"default": "weights"}
        self._hook_mode = "torch"

    # ------------------------------------------------------------ setup
    def configure(self, engine: Optional[Engine] = None, *,
                  local: Optional[bool] = None,
                  tags: Optional[TagDecl] = None,
                  **engine_kwargs: Any) -> Optional[Engine]:
        """Bind the domain: an Engine of this process, or the keyword
        arguments of a new one (name, gpu, prefix_caching,
        prefix_cache_reset, callbacks...). tags: the new domain's
        declaration (default weights, kv_cache, cuda_graph); an engine
        given has its own. Returns the engine. local=True: no domain;
        pause/resume act on the memory directly."""
        if local is not None:
            self._local = bool(local)
        if tags is not None:
            self._decl = _lib.declaration(tags)
        if self._local:
            self._declare_allocator()
            return None
        if self._engine is not None:
            raise RuntimeError("torch_memory_saver: already configured "
                               f"(domain {self._engine.id})")
        if engine is None:
            from .engine import Engine
            engine_kwargs.setdefault(
                "name", os.environ.get("GPUSLEEP_DOMAIN_NAME",
                                       f"tms-{os.getpid()}"))
            engine = Engine(tags=self._decl, **engine_kwargs)
        else:
            self._decl = [(n, "memory") for n in engine.tag_names]
        self._declare_allocator()
        self._engine = engine
        self._ensure_agent()
        return engine

    @property
    def engine(self) -> Optional[Engine]:
        """The bound Engine (made on first need)."""
        if self._engine is None:
            self.configure()
        return self._engine

    @property
    def local(self) -> bool:
        """True: pause/resume act on the memory directly (no module)."""
        return self._local

    @property
    def enabled(self) -> bool:
        """True when the memory saver works here: not disabled, the
        library loads, and /dev/gpusleep exists (or local mode)."""
        if self._user_disabled:
            return False
        try:
            _lib.lib()
        except OSError:
            return False
        return self._local or os.path.exists("/dev/gpusleep")

    @enabled.setter
    def enabled(self, value: bool) -> None:
        """False turns region/pause/resume into no-ops."""
        self._user_disabled = not value

    @property
    def hook_mode(self) -> str:
        """Accepted for compatibility: allocations are always captured
        through MemPools ("torch" mode); "preload" is not offered."""
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, mode: str) -> None:
        if mode not in ("torch", "preload"):
            raise ValueError(f"hook_mode {mode!r}: want 'torch' or 'preload'")
        self._hook_mode = mode

    # ------------------------------------------------------------ tags
    @property
    def tags(self) -> list[str]:
        """The domain's tags, in declaration order."""
        return [n for n, _ in self._decl]

    def _declare_allocator(self):
        """Tell the allocator the tags' names (their bits), once, before
        its first allocation; a later, different declaration is an
        error (the memory already allocated is filed by bit)."""
        names = ",".join(self.tags)
        if self._alloc_declared == names:
            return
        if self._alloc_declared is not None or _lib.lib().gpusleep_mm():
            raise RuntimeError(
                f"torch_memory_saver: tags {self.tags} declared after memory "
                f"was allocated with {self._alloc_declared or 'the default'}"
                "; configure() before the first region")
        _lib.check(_lib.lib().gpusleep_declare_tags(names.encode()),
                   f"declare_tags({names!r})")
        self._alloc_declared = names

    def _tag(self, tag):
        tag = self.tag_aliases.get(tag, tag)
        if tag not in self.tags:
            raise errors.InvalidRequest(
                _lib.R_INVALID, message=f"invalid tag {tag!r}; valid: "
                f"{self.tags} (declare it: configure(tags=...))")
        self._declare_allocator()
        return tag

    def _mask(self, tag):
        return _lib.tags_to_mask([tag], names=self.tags)

    def _set_policy(self, tag, backup):
        """One policy per tag; a backup once asked for is kept (never
        silently discard what some region wanted kept)."""
        self._policies[tag] = self._policies.get(tag, False) or bool(backup)
        L = _lib.lib()
        mm = L.gpusleep_mm()
        if not mm:
            # before the first allocation: the allocator reads its
            # policies from the environment when it makes its mm
            keep = [t for t in self.tags
                    if self._policies.get(t, t == "weights")]
            os.environ["GPUSLEEP_BACKUP_TAGS"] = ",".join(keep)
            return
        for t, b in self._policies.items():
            p = _lib.GS_MM_BACKUP if b else _lib.GS_MM_DISCARD
            ret = L.gs_mm_set_policy(mm, self._mask(t), p, 0)
            if ret == -_errno.EBUSY:
                continue	# paused now: applies from its resume on
            if ret < 0:
                raise OSError(-ret, f"tag {t}: setting its policy: "
                              f"{os.strerror(-ret)}")

    # ----------------------------------------------------- memory pools
    @staticmethod
    def _torch():
        try:
            import torch
        except ImportError:
            return None
        return torch

    def _new_pool(self, torch, tag, dev):
        """A new MemPool of tag on device dev: its allocator is tag's
        entry point, and the pool belongs to the device current at its
        creation (PyTorch looks pools up by device)."""
        alloc = self._allocators.get(tag)
        if alloc is None:
            bit = self.tags.index(tag)
            alloc = torch.cuda.memory.CUDAPluggableAllocator(
                _lib.path(), f"gpusleep_malloc_tag{bit}", "gpusleep_free")
            self._allocators[tag] = alloc
        # (a torch without torch.cuda.device, as minimal stand-ins: as is)
        on_dev = getattr(torch.cuda, "device", None)
        with self._no_expandable(torch), \
                (on_dev(dev) if on_dev else contextlib.nullcontext()):
            pool = torch.cuda.MemPool(alloc.allocator())
        self._pools.setdefault((tag, dev), []).append(pool)
        return pool

    def _pool(self, torch, tag, dev=None):
        """The first MemPool of tag on device dev (default: current), made
        on first use."""
        if dev is None:
            dev = torch.cuda.current_device()
        with self._lock:
            pools = self._pools.get((tag, dev))
            return pools[0] if pools else self._new_pool(torch, tag, dev)

    def _acquire(self, torch, tag, dev):
        """A MemPool of tag on dev that no other thread allocates to (PyTorch
        lets one thread at a time record to a pool): this thread's own if
        it has one, a free one, or a new one. Counted per thread."""
        me = threading.get_ident()
        with self._lock:
            for pool in self._pools.get((tag, dev), []):
                owner = self._owner.get(id(pool))
                if owner is None or owner[0] == me:
                    self._owner[id(pool)] = (me, (owner or (me, 0))[1] + 1)
                    return pool
            pool = self._new_pool(torch, tag, dev)
            self._owner[id(pool)] = (me, 1)
            return pool

    def _unacquire(self, pool):
        with self._lock:
            me, n = self._owner[id(pool)]
            if n > 1:
                self._owner[id(pool)] = (me, n - 1)
            else:
                del self._owner[id(pool)]

    def pool(self, tag: str = "weights") -> torch.cuda.MemPool:
        """The torch.cuda.MemPool of tag on the current device (for
        torch.cuda.graph(pool=....id) or torch.cuda.use_mem_pool)."""
        torch = self._torch()
        if torch is None:
            raise RuntimeError("torch is not importable")
        return self._pool(torch, self._tag(tag))

    @staticmethod
    def _expandable_env():
        conf = ",".join(os.environ.get(v, "") for v in (
            "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
        return "expandable_segments:true" in conf.replace(" ", "").lower()

    @contextlib.contextmanager
    def _no_expandable(self, torch):
        """PyTorch's MemPools with an allocator of their own refuse
        expandable segments: switched off while any region or capture
        is open (process-wide: PyTorch has one setting), back on after
        the last one, as vLLM's CuMemAllocator does."""
        if not self._expandable_env():
            yield
            return
        with self._lock:
            self._expandable_users += 1
            if self._expandable_users == 1:
                torch.cuda.memory._set_allocator_settings(
                    "expandable_segments:False")
        try:
            yield
        finally:
            with self._lock:
                self._expandable_users -= 1
                if self._expandable_users == 0:
                    torch.cuda.memory._set_allocator_settings(
                        "expandable_segments:True")

    def _check_awake(self, tag):
        """A released tag's pools still cache its (unmapped) blocks:
        serving them would fault. Refused with EBUSY until its resume."""
        L = _lib.lib()
        mm = L.gpusleep_mm()
        if mm and self._paused(mm, tag):
            raise errors.Busy(
                _lib.R_BUSY, message=f"tag {tag!r} is released: no region "
                "or graph capture in it before its resume")

    def _check_device(self, torch, dev):
        """One memory manager per process, on one device."""
        have = _lib.lib().gpusleep_device()
        if have >= 0 and have != dev:
            raise RuntimeError(
                f"gpusleep: a region on device {dev}, but this process's "
                f"memory is on device {have}: one device per process")

    def _frames(self):
        st = getattr(self._tls, "frames", None)
        if st is None:
            st = self._tls.frames = []
        return st

    def _switch(self, torch, frames, want):
        """Make want ((pool, dev) or None) the pool this thread allocates
        to: PyTorch serves a thread from the first pool it entered, so
        an outer region's pool is left while an inner one is open."""
        cur = getattr(self._tls, "active", None)
        if cur is not None and want is not None and cur[0] is want[0]:
            return
        if cur is not None:
            self._tls.active = None
            cur[1].__exit__(None, None, None)
        if want is not None:
            cm = torch.cuda.use_mem_pool(want[0], device=want[1])
            cm.__enter__()
            self._tls.active = (want[0], cm)

    @contextlib.contextmanager
    def _in_pool(self, torch, tag):
        """The calling thread allocates to a pool of tag, on the current
        device, inside; nests (the same tag again, or other tags)."""
        dev = torch.cuda.current_device()
        frames = self._frames()
        pool = self._acquire(torch, tag, dev)
        frames.append((pool, dev))
        try:
            with self._no_expandable(torch):
                self._switch(torch, frames, frames[-1])
                try:
                    yield
                finally:
                    frames.pop()
                    self._switch(torch, frames,
                                 frames[-1] if frames else None)
        finally:
            self._unacquire(pool)

    @contextlib.contextmanager
    def _thread_tag(self, tag):
        """The calling thread's tag for gpusleep_malloc, restored after."""
        L = _lib.lib()
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        _lib.check(L.gpusleep_set_tag(tag.encode()), f"set_tag({tag!r})")
        stack.append(tag)
        try:
            yield
        finally:
            stack.pop()
            L.gpusleep_set_tag((stack[-1] if stack else
                                self.tags[0]).encode())

    @contextlib.contextmanager
    def region(self, tag: str = "weights",
               enable_cpu_backup: bool = False) -> Iterator[None]:
        """Allocations of the calling thread inside go to tag;
        enable_cpu_backup: kept across pause (copied to host memory),
        else discarded (zero after resume). Regions nest (the same tag
        or others; the innermost serves) and several threads may be in
        one tag's region (each gets a pool of that tag). A released tag
        raises gpusleep.errors.Busy (EBUSY)."""
        if not self.enabled:
            yield
            return
        tag = self._tag(tag)
        self._check_awake(tag)
        self._set_policy(tag, enable_cpu_backup)
        torch = self._torch()
        with contextlib.ExitStack() as stack:
            if torch is not None:
                self._check_device(torch, torch.cuda.current_device())
                stack.enter_context(self._in_pool(torch, tag))
            stack.enter_context(self._thread_tag(tag))
            yield
        self._set_policy(tag, enable_cpu_backup)
        self._ensure_agent()

    def _graph_pool(self, torch, tag, pool):
        """The pool a capture of tag goes to: tag's pool for None, a pool
        of ours as given, and for any other id (SGLang's
        graph_pool_handle(), shared by its graphs) a pool of tag of its
        own, the same for every capture given that id."""
        dev = torch.cuda.current_device()
        if pool is None:
            # the tag's pool, unless another thread is in a region of the
            # tag with it (one recorder per pool): then another of tag's
            pool = self._acquire(torch, tag, dev)
            self._unacquire(pool)
            return pool
        pool = tuple(pool)
        with self._lock:
            for pools in self._pools.values():
                for p in pools:
                    if tuple(p.id) == pool:
                        return p
            mine = self._foreign.get((pool, tag, dev))
            if mine is None:
                mine = self._foreign[(pool, tag, dev)] = \
                    self._new_pool(torch, tag, dev)
            return mine

    @contextlib.contextmanager
    def cuda_graph(self, cuda_graph: torch.cuda.CUDAGraph,
                   pool: Optional[tuple[int, int]] = None,
                   stream: Optional[torch.cuda.Stream] = None,
                   capture_error_mode: str = "global",
                   tag: str = "cuda_graph",
                   enable_cpu_backup: bool = False) -> Iterator[None]:
        """torch.cuda.graph(...), with the graph's memory in a pool of tag,
        so that it is released and brought back with that tag. pool: None
        (tag's MemPool), a pool of ours (graph.pool() of a graph captured
        here: graphs share it), or any other pool id, such as SGLang's
        graph_pool_handle(): replaced by a pool of tag of its own, shared
        by the captures given the same id."""
        torch = self._torch()
        if torch is None:
            raise RuntimeError("cuda_graph needs torch")
        if not self.enabled:
            with torch.cuda.graph(cuda_graph, pool=pool, stream=stream,
                                  capture_error_mode=capture_error_mode):
                yield
            return
        tag = self._tag(tag)
        self._check_awake(tag)
        self._check_device(torch, torch.cuda.current_device())
        self._set_policy(tag, enable_cpu_backup)
        gpool = self._graph_pool(torch, tag, pool)
        frames = self._frames()
        # the capture records to gpool: this thread's region pool is left
        # meanwhile (one pool per thread at a time)
        self._switch(torch, frames, None)
        try:
            with self._no_expandable(torch), self._thread_tag(tag):
                with torch.cuda.graph(cuda_graph, pool=gpool.id,
                                      stream=stream,
                                      capture_error_mode=capture_error_mode):
                    yield
        finally:
            self._switch(torch, frames, frames[-1] if frames else None)
        self._ensure_agent()

    @contextlib.contextmanager
    def disable(self) -> Iterator[None]:
        """Allocations inside a region that must stay with PyTorch's own
        allocator: a plain MemPool (PyTorch's allocator) for the calling
        thread, dropped afterwards (torch_memory_saver does the same)."""
        torch = self._torch()
        if torch is None or not self.enabled:
            yield
            return
        pool = torch.cuda.MemPool()
        frames = self._frames()
        frames.append((pool, torch.cuda.current_device()))
        try:
            self._switch(torch, frames, frames[-1])
            yield
        finally:
            frames.pop()
            self._switch(torch, frames, frames[-1] if frames else None)
        del pool

    # -------------------------------------------------------- the agent
    def _ensure_agent(self):
        """Serve the domain with the allocator's memory, once it exists."""
        if self._agent or self._engine is None or self._local:
            return self._agent
        L = _lib.lib()
        if not L.gpusleep_mm():
            return False		# nothing allocated yet
        ret = L.gpusleep_agent_start(self._engine.id)
        if ret < 0 and ret != -_errno.EALREADY:
            raise OSError(-ret, f"agent for domain {self._engine.id}: "
                          f"{os.strerror(-ret)}")
        self._agent = True
        return True

    # ---------------------------------------------------- pause / resume
    def _tags(self, tag):
        if tag is None:
            return None
        if isinstance(tag, str):
            return [self._tag(tag)]
        return [self._tag(t) for t in tag]

    def _local_op(self, pause, tag):
        """pause/resume on this process's memory manager directly; a dict
        tag -> result (gpusleep.agent.result_dict). Already in the asked
        state is success. A failure raises OSError with .result."""
        from .agent import result_dict
        L = _lib.lib()
        mm = L.gpusleep_mm()
        out = {}
        if not mm:
            return out
        fn = L.gs_mm_pause_ex if pause else L.gs_mm_resume_ex
        tags = self._tags(tag)
        if tags is None:	# every tag; resume(): exactly what is paused
            tags = self.tags if pause else \
                [t for t in self.tags if self._paused(mm, t)]
        for t in tags:
            r = _lib.gs_mm_result()
            ret = fn(mm, self._mask(t), ctypes.byref(r))
            d = out[t] = result_dict(r)
            if ret < 0 and ret != -_errno.EALREADY:
                e = OSError(-ret, f"{'pause' if pause else 'resume'}"
                            f"({t!r}): {os.strerror(-ret)}")
                e.result = d
                e.results = out
                raise e
        return out

    def _paused(self, mm, tag):
        info = _lib.gs_mm_tag_info()
        ret = _lib.lib().gs_mm_tag_info(mm, self._mask(tag),
                                        ctypes.byref(info))
        return ret == 0 and bool(info.paused)

    def pause(self, tag: Union[str, Iterable[str], None] = None
              ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Release tag (None = every tag) through the module; returns the
        operation's Result. Refusals raise gpusleep.errors exceptions.
        Local mode: the memory manager's results per tag."""
        if not self.enabled:
            return None
        if self._local:
            return self._local_op(True, tag)
        eng = self.engine
        self._ensure_agent()
        return eng.release(self._tags(tag))

    def resume(self, tag: Union[str, Iterable[str], None] = None
               ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Resume tag (None = exactly what is paused) through the module."""
        if not self.enabled:
            return None
        if self._local:
            return self._local_op(False, tag)
        eng = self.engine
        self._ensure_agent()
        return eng.resume(self._tags(tag))

    def last_result(self, tag: str) -> Optional[StepResult]:
        """What the last release or resume of tag did to the memory, as
        gpusleep.agent.result_dict (bytes, freed_bytes: what the driver
        saw come free, unmapped_bytes, lost_bytes, ...) under 'mm', with
        op_id and the COMPLETE answer; None if none yet. In local mode,
        pause()/resume() return these directly."""
        from .agent import result_dict
        r = _lib.gs_agent_result()
        ret = _lib.lib().gpusleep_agent_last_result(
            self._mask(self._tag(tag)), ctypes.byref(r))
        if ret < 0:
            return None
        return {"op_id": r.op_id, "type": r.type, "tag": r.tag,
                "complete_ret": r.complete_ret, "mm": result_dict(r.mm)}

    def close(self) -> None:
        """Stop the agent thread and close the domain (tests)."""
        if self._agent:
            _lib.lib().gpusleep_agent_stop()
            self._agent = False
        if self._engine is not None:
            self._engine.close()
            self._engine = None


torch_memory_saver = TorchMemorySaver()

# Module-level spellings, for `import gpusleep.torch_memory_saver as tms`.
region = torch_memory_saver.region
pause = torch_memory_saver.pause
resume = torch_memory_saver.resume
configure = torch_memory_saver.configure


@contextlib.contextmanager
def configure_subprocess() -> Iterator[None]:
    """torch_memory_saver's LD_PRELOAD set-up for child processes: nothing
    to set up here (no preload; MemPools work in any process), kept so
    that engines calling it run unchanged."""
    yield


def __getattr__(name: str) -> bool:
    if name == "enabled":
        return torch_memory_saver.enabled
    raise AttributeError(name)
