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

import contextlib
import ctypes
import errno as _errno
import os
import threading

from . import _lib, errors


# The adapter's declaration: the reference controller's two tags, then
# SGLang's graph memory (released after the KV cache in a full release).
TMS_TAGS = (("weights", "memory"), ("kv_cache", "kv_cache"),
            ("cuda_graph", "memory"))


class TorchMemorySaver:
    def __init__(self):
        self._engine = None
        self._policies = {}		# tag name -> backup?
        self._agent = False
        self._allocators = {}		# tag name -> CUDAPluggableAllocator
        self._pools = {}		# tag name -> torch.cuda.MemPool
        self._user_disabled = False
        self._local = os.environ.get("GPUSLEEP_TMS_LOCAL") == "1"
        self._lock = threading.Lock()
        self._tls = threading.local()
        # the declaration of the domain made on first need (configure)
        self._decl = list(TMS_TAGS)
        self._alloc_declared = None	# names told to the allocator
        # torch_memory_saver's default tag is the weights
        self.tag_aliases = {"default": "weights"}
        self._hook_mode = "torch"

    # ------------------------------------------------------------ setup
    def configure(self, engine=None, *, local=None, tags=None,
                  **engine_kwargs):
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
    def engine(self):
        """The bound Engine (made on first need)."""
        if self._engine is None:
            self.configure()
        return self._engine

    @property
    def local(self):
        """True: pause/resume act on the memory directly (no module)."""
        return self._local

    @property
    def enabled(self):
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
    def enabled(self, value):
        """False turns region/pause/resume into no-ops."""
        self._user_disabled = not value

    @property
    def hook_mode(self):
        """Accepted for compatibility: allocations are always captured
        through MemPools ("torch" mode); "preload" is not offered."""
        return self._hook_mode

    @hook_mode.setter
    def hook_mode(self, mode):
        if mode not in ("torch", "preload"):
            raise ValueError(f"hook_mode {mode!r}: want 'torch' or 'preload'")
        self._hook_mode = mode

    # ------------------------------------------------------------ tags
    @property
    def tags(self):
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

    def _pool(self, torch, tag):
        """The MemPool of tag, made on first use (any device: the pool's
        allocator serves the process's memory manager)."""
        with self._lock:
            pool = self._pools.get(tag)
            if pool is None:
                bit = self.tags.index(tag)
                alloc = torch.cuda.memory.CUDAPluggableAllocator(
                    _lib.path(), f"gpusleep_malloc_tag{bit}",
                    "gpusleep_free")
                pool = torch.cuda.MemPool(alloc.allocator())
                self._allocators[tag] = alloc
                self._pools[tag] = pool
            return pool

    def pool(self, tag="weights"):
        """The torch.cuda.MemPool of tag (for torch.cuda.graph(pool=
        ....id) or torch.cuda.use_mem_pool)."""
        torch = self._torch()
        if torch is None:
            raise RuntimeError("torch is not importable")
        return self._pool(torch, self._tag(tag))

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
    def region(self, tag="weights", enable_cpu_backup=False):
        """Allocations of the calling thread inside go to tag;
        enable_cpu_backup: kept across pause (copied to host memory),
        else discarded (zero after resume)."""
        if not self.enabled:
            yield
            return
        tag = self._tag(tag)
        self._set_policy(tag, enable_cpu_backup)
        torch = self._torch()
        with contextlib.ExitStack() as stack:
            if torch is not None:
                stack.enter_context(torch.cuda.use_mem_pool(
                    self._pool(torch, tag)))
            stack.enter_context(self._thread_tag(tag))
            yield
        self._set_policy(tag, enable_cpu_backup)
        self._ensure_agent()

    @contextlib.contextmanager
    def cuda_graph(self, cuda_graph, pool=None, stream=None,
                   capture_error_mode="global", tag="cuda_graph",
                   enable_cpu_backup=False):
        """torch.cuda.graph(...), with the graph's memory in tag's pool, so
        that it is released and brought back with that tag. pool: None
        (tag's MemPool), or the pool of a graph captured here (graphs
        share it); a foreign pool keeps the graph's memory out of
        gpusleep (said with a warning)."""
        torch = self._torch()
        if torch is None:
            raise RuntimeError("cuda_graph needs torch")
        if not self.enabled:
            with torch.cuda.graph(cuda_graph, pool=pool, stream=stream,
                                  capture_error_mode=capture_error_mode):
                yield
            return
        tag = self._tag(tag)
        self._set_policy(tag, enable_cpu_backup)
        mine = self._pool(torch, tag)
        if pool is None:
            pool = mine.id
        elif tuple(pool) not in [tuple(p.id) for p in self._pools.values()]:
            import warnings
            warnings.warn("gpusleep: cuda_graph(pool=...) is not one of "
                          "gpusleep's pools: the graph's memory will not "
                          "be released")
        with self._thread_tag(tag):
            with torch.cuda.graph(cuda_graph, pool=pool, stream=stream,
                                  capture_error_mode=capture_error_mode):
                yield
        self._ensure_agent()

    @contextlib.contextmanager
    def disable(self):
        """Allocations inside a region that must stay with PyTorch's own
        allocator: a plain MemPool (PyTorch's allocator) for the calling
        thread, dropped afterwards (torch_memory_saver does the same)."""
        torch = self._torch()
        if torch is None or not self.enabled:
            yield
            return
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            yield
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

    def pause(self, tag=None):
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

    def resume(self, tag=None):
        """Resume tag (None = exactly what is paused) through the module."""
        if not self.enabled:
            return None
        if self._local:
            return self._local_op(False, tag)
        eng = self.engine
        self._ensure_agent()
        return eng.resume(self._tags(tag))

    def last_result(self, tag):
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

    def close(self):
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
def configure_subprocess():
    """torch_memory_saver's LD_PRELOAD set-up for child processes: nothing
    to set up here (no preload; MemPools work in any process), kept so
    that engines calling it run unchanged."""
    yield


def __getattr__(name):
    if name == "enabled":
        return torch_memory_saver.enabled
    raise AttributeError(name)
