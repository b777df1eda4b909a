# SPDX-License-Identifier: LGPL-2.1-or-later
"""vLLM's sleep mode over gpusleep. Checked against vLLM 0.33.0.

vLLM 0.33.0 allocates a sleep-mode worker's memory in tagged pools
(vllm/v1/worker/gpu_worker.py _maybe_get_memory_pool_context: weights,
kv_cache, runtime, workspace; vllm/compilation/cudagraph_pool.py: the
cudagraph pool) of the process's allocator (vllm/device_allocator
get_mem_allocator_instance(): CuMemAllocator.get_instance()), and puts it
to sleep through a sleep-mode backend (vllm/device_allocator/
sleep_mode_backend.py: SleepModeBackendFactory.create_backend(
model_config), named by model_config.sleep_mode_backend /
--sleep-mode-backend, "cumem" by default):

    backend.suspend(level)   # level 1: weights, runtime, cudagraph kept on
                             # the host, the rest discarded; level 2: only
                             # runtime and cudagraph kept
    backend.resume(tags)     # None: all; else those of weights, kv_cache,
                             # and every other tag
    backend.discard(tags)    # dropped, no backup

GpuSleepAllocator is an allocator with CuMemAllocator's whole surface
(get_instance, use_memory_pool, cudagraph_pool, sleep, discard, wake_up,
get_current_usage, release_pools, close) over one gpusleep domain per
worker process (the process's torch_memory_saver adapter,
gpusleep.torch_memory_saver: one torch.cuda.MemPool per tag over
libgpusleep's allocator). sleep(offload_tags) backs the offloaded tags up
and discards the rest, then releases the tags that are awake through
the module; wake_up(tags) resumes; a trainer or gpusleepctl sees the
worker's domain released and resumed. Its drain and cache reset are
answered at once for vLLM's own sleep (the engine paused its scheduler
before: sleep(level, mode) with mode abort, wait or keep, see
docs/integrations/vllm.md). vLLM is released through its sleep API: a
thread of the worker answers its domain's records as they come
(Engine.serve()), and a release started from outside vLLM (a trainer's
gpusleep.release, gpusleepctl) is refused at once: the drain is answered
EOPNOTSUPP (the caller gets EngineFailed saying to use vLLM's sleep, the
worker logs it), nothing is released and the worker stays awake.

Where vLLM has SleepModeBackendFactory (0.33.0; introduced by vLLM's
pull request 44074, 2026), the plugin (gpusleep-vllm) registers the
backend "gpusleep" (gpusleep_vllm.backend.GpuSleepBackend) and routes the
sleep-mode pools of a worker whose config selects it
(--enable-sleep-mode --sleep-mode-backend gpusleep) to GpuSleepAllocator;
CuMemAllocator stays vLLM's. On a vLLM without the factory (before that
pull request) it replaces CuMemAllocator itself, for workers with
enable_sleep_mode. Never for --enable-cumem-allocator alone.

The domain is named GPUSLEEP_DOMAIN_NAME when set, else
"<GPUSLEEP_ENGINE or vllm>-tp<rank>", "<...>-dp<i>-tp<rank>" with
data_parallel_size > 1 (rank: the worker's parallel_config.rank, else
torch.distributed's, else $RANK; i: parallel_config.data_parallel_index).

Tensor parallelism: vLLM's sleep, wake_up and discard reach every worker
at once (the executor's collective_rpc). A worker with tensor-parallel
peers (vLLM's TP group, vllm.distributed.parallel_state.get_tp_group())
makes its part one gpusleep group operation over the TP ranks' domains:
each worker sets its own tags' policies, then the TP ranks meet
(GroupCoordinator.barrier(): every worker is inside vLLM's sleep, so its
drain goes through), TP rank 0 makes the group once (named after the
engine, "<engine>[-dp<i>]", "-pp<stage>" added with pipeline stages;
docs/groups.md) and issues GROUP_RELEASE or GROUP_RESUME, every worker's
engine thread answers its own drain, and rank 0 broadcasts the outcome
(GroupCoordinator.broadcast_object), so that every worker returns or
raises the same: no worker unmaps before every one drained, and a
failure on one rolls the others back. A worker whose own preparation
failed fails its drain, so the group fails. Where the TP ranks' domains
are not all on this node (TP across nodes) or GPUSLEEP_DOMAIN_NAME names
the worker, each worker releases its own domain, as with TP 1, and a
warning says the ranks are not one group.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import importlib
import importlib.abc
import importlib.util
import logging
import os
import pickle
import sys
from typing import (TYPE_CHECKING, Any, Callable, Iterable, Iterator,
                    Optional, Union)

from . import _lib, errors
from .torch_memory_saver import torch_memory_saver as _saver

if TYPE_CHECKING:
    from .engine import Engine
    from .group import Group, GroupResult
    from .trainer import Result

log = logging.getLogger("gpusleep.vllm")

DEV = "/dev/gpusleep"
#: the backend's name in vLLM's SleepModeBackendFactory
BACKEND = "gpusleep"
#: vLLM 0.33.0's pool tags (gpu_worker.py, cudagraph_pool.py), in the
#: domain's release order
VLLM_TAGS = ("weights", "kv_cache", "runtime", "workspace", "cudagraph")
#: the tags a selective wake_up may leave asleep (vllm/device_allocator
#: DEFERRABLE_TAGS); every other tag always wakes
DEFERRABLE_TAGS = ("weights", "kv_cache")
FACTORY = "vllm.device_allocator.sleep_mode_backend"


def offload_tags(level: int) -> tuple[str, ...]:
    """The tags vLLM keeps (backs up) at a sleep level, as its cumem
    backend (CuMemBackend.suspend): runtime state and graph pools always,
    the weights at level 1."""
    tags: tuple[str, ...] = ("runtime", "cudagraph")
    return ("weights", *tags) if level == 1 else tags


def has_factory() -> bool:
    """Whether this vLLM resolves sleep mode through
    SleepModeBackendFactory."""
    try:
        return importlib.util.find_spec(FACTORY) is not None
    except (ImportError, ValueError):
        return False


def selected(vllm_config: Any, factory: Optional[bool] = None) -> bool:
    """Whether a worker of vllm_config sleeps through gpusleep: sleep mode
    enabled and, where vLLM has sleep-mode backends (factory; None: this
    vLLM's), the gpusleep one chosen (--sleep-mode-backend gpusleep).
    Not for --enable-cumem-allocator alone."""
    mc = getattr(vllm_config, "model_config", None)
    if mc is None or not getattr(mc, "enable_sleep_mode", False):
        return False
    if has_factory() if factory is None else factory:
        return getattr(mc, "sleep_mode_backend", "cumem") == BACKEND
    return True


def engine_name(vllm_config: Any = None) -> str:
    """The engine's name, its workers' domain names without "-tp<rank>":
    "<GPUSLEEP_ENGINE or vllm>", "<...>-dp<i>" with data parallelism."""
    pc = getattr(vllm_config, "parallel_config", None)
    engine = os.environ.get("GPUSLEEP_ENGINE", "vllm")
    if pc is not None and getattr(pc, "data_parallel_size", 1) > 1:
        dp = getattr(pc, "data_parallel_index",
                     getattr(pc, "data_parallel_rank", 0))
        return f"{engine}-dp{dp}"
    return engine


def domain_name(vllm_config: Any = None) -> str:
    """The worker's domain name (see the module's docstring)."""
    name = os.environ.get("GPUSLEEP_DOMAIN_NAME")
    if name:
        return name
    pc = getattr(vllm_config, "parallel_config", None)
    rank = getattr(pc, "rank", None)
    if rank is None:
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank()
        except ImportError:
            pass
    if rank is None:
        rank = int(os.environ.get("RANK", "0"))
    return f"{engine_name(vllm_config)}-tp{rank}"


def _current_config() -> Any:
    try:
        from vllm.config import get_current_vllm_config_or_none
    except ImportError:
        return None
    return get_current_vllm_config_or_none()


def tp_group() -> Any:
    """This worker's tensor-parallel group (vLLM's GroupCoordinator) when
    it has peers, else None (TP 1, vLLM's distributed state not set up,
    or not vLLM)."""
    try:
        from vllm.distributed import parallel_state as ps
    except ImportError:
        return None
    try:
        if not ps.model_parallel_is_initialized():
            return None
        tp = ps.get_tp_group()
    except (AssertionError, AttributeError):
        return None
    return tp if getattr(tp, "world_size", 1) > 1 else None


# Exceptions go from TP rank 0 to the others pickled (broadcast_object):
# the attributes a gpusleep error carries besides its arguments with it.
_CARRIED = ("rank", "domain", "peer_errno", "result")


def _portable(e: BaseException) -> tuple[BaseException, dict[str, Any]]:
    extra = {k: getattr(e, k) for k in _CARRIED
             if getattr(e, k, None) is not None}
    try:
        pickle.dumps((e, extra))
    except Exception:	# noqa: anything that does not pickle
        extra = {}
        e = RuntimeError(f"{type(e).__name__}: {e}")
    return e, extra


def _rebuilt(p: tuple[BaseException, dict[str, Any]]) -> BaseException:
    e, extra = p
    for k, v in extra.items():
        setattr(e, k, v)
    return e


class GpuSleepAllocator:
    """CuMemAllocator's surface (vllm/device_allocator/cumem.py in vLLM
    0.33.0) over a gpusleep domain; with tensor-parallel peers, each of
    vLLM's sleep, wake_up and discard is one group operation over the TP
    ranks' domains (the module's docstring)."""

    instance: Optional[GpuSleepAllocator] = None
    default_tag: str = "default"	# vLLM's; an alias of weights

    @staticmethod
    def get_instance() -> GpuSleepAllocator:
        """The process's allocator (one domain per worker process)."""
        if GpuSleepAllocator.instance is None:
            GpuSleepAllocator.instance = GpuSleepAllocator()
            atexit.register(GpuSleepAllocator._shutdown_singleton)
        return GpuSleepAllocator.instance

    @staticmethod
    def _shutdown_singleton() -> None:
        if GpuSleepAllocator.instance is not None:
            try:
                GpuSleepAllocator.instance.release_pools()
            except Exception:	# noqa: at exit, logged
                log.exception("GpuSleepAllocator shutdown failed")

    def __init__(self) -> None:
        self.saver = _saver
        self.current_tag = GpuSleepAllocator.default_tag
        self.vllm_config: Any = None
        # inside our own sleep / wake: read by the drain callback, which
        # runs in the engine's serving thread (Engine.serve())
        self._own = 0
        # this worker's preparation failed: its drain fails with this errno
        self._refuse = 0
        #: the last operation's gpusleep Result (GroupResult with TP
        #: peers), None when it had nothing to do
        self.last_result: Union[Result, GroupResult, None] = None
        self._group: Optional[Group] = None	# TP rank 0's
        self._warned = False

    # -- the domain -------------------------------------------------------
    @property
    def engine(self) -> Optional[Engine]:
        """The worker's gpusleep Engine (made on first need; raises
        errors.ModuleNotLoaded without /dev/gpusleep)."""
        if self.saver._engine is None:
            if not os.path.exists(DEV):
                raise errors.ModuleNotLoaded(DEV)
            try:
                self.saver.configure(
                    name=domain_name(self.vllm_config or _current_config()),
                    tags=[(t, "kv_cache" if t == "kv_cache" else "memory")
                          for t in VLLM_TAGS],
                    prefix_caching=True, prefix_cache_reset=True,
                    drain=self._on_drain, reset_caches=self._on_reset,
                    serve=True)	# nothing else reads its fd
            except FileNotFoundError as e:
                raise errors.ModuleNotLoaded(DEV) from e
        return self.saver.engine

    def _on_drain(self, tags: list[str], abort_inflight: bool) -> int:
        if self._own and self._refuse:
            return -self._refuse	# fails the TP ranks' group operation
        if self._own:
            return 0	# vLLM's sleep: its scheduler is paused already
        log.error("gpusleep.vllm: a release of %s from outside vLLM "
                  "refused: a vLLM worker is released by vLLM's sleep "
                  "(LLM.sleep, POST /sleep), which pauses its scheduler "
                  "first", tags)
        return -errno.EOPNOTSUPP

    def _on_reset(self) -> int:
        # vLLM's sleep resets the prefix cache itself (level >= 1)
        return 0 if self._own else -errno.EOPNOTSUPP

    @contextlib.contextmanager
    def _ours(self) -> Iterator[None]:
        self._own += 1
        try:
            yield
        finally:
            self._own -= 1

    def _tag(self, tag: str) -> str:
        return "weights" if tag == GpuSleepAllocator.default_tag else tag

    def _mm(self) -> int:
        return _lib.lib().gpusleep_mm()

    def _info(self, tag: str) -> Optional[_lib.gs_mm_tag_info]:
        mm = self._mm()
        if not mm:
            return None
        info = _lib.gs_mm_tag_info()
        if _lib.lib().gs_mm_tag_info(mm, self.saver._mask(tag),
                                     ctypes.byref(info)) != 0:
            return None
        return info

    def _released(self) -> set[str]:
        """The tags the module has released (whether or not this process
        allocated anything in them)."""
        return set(self.engine.state().released)

    # -- the pools --------------------------------------------------------
    @contextlib.contextmanager
    def use_memory_pool(self, tag: Optional[str] = None) -> Iterator[None]:
        """Allocations inside go to tag's pool (None: the default tag, the
        weights)."""
        tag = self._tag(tag or GpuSleepAllocator.default_tag)
        self.engine	# the domain exists before the first allocation
        old, self.current_tag = self.current_tag, tag
        try:
            with self.saver.region(tag=tag):
                yield
        finally:
            self.current_tag = old

    @contextlib.contextmanager
    def cudagraph_pool(self) -> Iterator[tuple[int, int]]:
        """The cudagraph tag's pool id, for a capture (torch.cuda.graph(
        pool=...)), as vLLM's cudagraph_pool()."""
        self.engine
        old, self.current_tag = self.current_tag, "cudagraph"
        try:
            yield self.saver.pool("cudagraph").id
        finally:
            self.current_tag = old

    # -- sleep ------------------------------------------------------------
    def sleep(self, offload_tags: Union[tuple[str, ...], str, None] = None
              ) -> Union[Result, GroupResult, None]:
        """Put every awake tag to sleep: the offload_tags backed up to
        host memory (restored by wake_up), the rest discarded. A tag
        already asleep keeps its policy (vLLM's rule). offload_tags: a
        tuple or a str; None is the default tag. Returns the operation's
        gpusleep Result, the GroupResult with TP peers (None when nothing
        was awake or allocated)."""
        if offload_tags is None:
            offload_tags = (GpuSleepAllocator.default_tag,)
        elif isinstance(offload_tags, str):
            offload_tags = (offload_tags,)
        keep = {self._tag(t) for t in offload_tags}

        def prepare() -> list[str]:
            if not self._mm():
                return []
            asleep = self._released()
            awake = [t for t in self.saver.tags if t not in asleep]
            conflict = [t for t in self.saver.tags if t in asleep and
                        self._info(t) is not None and
                        (t in keep) != (self._info(t).policy ==
                                        _lib.GS_MM_BACKUP)]
            if conflict:
                log.warning("gpusleep.vllm: sleep cannot change the policy "
                            "of tags already asleep %s; kept", conflict)
            self._policies(awake, keep)
            return awake
        return self._run("release", prepare)

    def _policies(self, tags: Iterable[str], keep: set[str]) -> None:
        L = _lib.lib()
        for t in tags:
            pol = _lib.GS_MM_BACKUP if t in keep else _lib.GS_MM_DISCARD
            ret = L.gs_mm_set_policy(self._mm(), self.saver._mask(t), pol, 0)
            if ret < 0:
                raise OSError(-ret, f"tag {t}: setting its policy: "
                              f"{os.strerror(-ret)}")

    def discard(self, tags: Union[tuple[str, ...], str]
                ) -> Union[Result, GroupResult, None]:
        """Release tags without a backup (their contents are dropped); a
        tag already asleep is left as it is."""
        if isinstance(tags, str):
            tags = (tags,)
        want = [self._tag(t) for t in tags]

        def prepare() -> list[str]:
            if not self._mm():
                return []
            asleep = self._released()
            awake = [t for t in want if t not in asleep]
            self._policies(awake, set())
            return awake
        return self._run("release", prepare)

    def wake_up(self, tags: Optional[list[str]] = None
                ) -> Union[Result, GroupResult, None]:
        """Wake tags up (None: everything asleep; else those tags of
        weights and kv_cache, and every other tag asleep, as vLLM's
        DEFERRABLE_TAGS rule). Offloaded tags come back as they were, the
        others zero, at the same addresses."""
        want = None if tags is None else {self._tag(t) for t in tags}

        def prepare() -> list[str]:
            if not self._mm():
                return []
            released = self._released()
            return [t for t in self.saver.tags if t in released and
                    (want is None or t in want or
                     t not in DEFERRABLE_TAGS)]
        return self._run("resume", prepare)

    def _run(self, kind: str, prepare: Callable[[], list[str]]
             ) -> Union[Result, GroupResult, None]:
        """One worker's part of vLLM's sleep, wake_up or discard (every
        worker runs it at the same time: collective_rpc): with TP peers
        one group operation of them all, else this worker's own."""
        tp = tp_group()
        res = self._alone(kind, prepare()) if tp is None else \
            self._together(tp, kind, prepare)
        self.last_result = res
        return res

    def _alone(self, kind: str, tags: list[str]) -> Union[Result, None]:
        """This worker's domain released (kind "release") or resumed."""
        if not tags:
            return None
        with self._ours():
            return self.saver.pause(tags) if kind == "release" else \
                self.saver.resume(tags)

    def _together(self, tp: Any, kind: str, prepare: Callable[[], list[str]]
                  ) -> Union[Result, GroupResult, None]:
        """The TP ranks' part as one group operation: every rank prepares
        (its policies; a failure makes its drain fail, so the group
        fails), the ranks meet, TP rank 0 issues the group operation while
        every rank's engine thread lets its drain through, and rank 0's
        outcome goes to every rank, which returns or raises it."""
        err: Optional[Exception] = None
        tags: list[str] = []
        try:
            tags = prepare()
        except Exception as e:	# noqa: failed through the group, raised
            err = e
        out: Any = None
        self._refuse = (getattr(err, "errno", None) or errno.EIO) \
            if err is not None else 0
        try:
            with self._ours():
                tp.barrier()	# every rank is inside vLLM's call now
                if tp.rank_in_group == 0:
                    out = ("error", _portable(err)) if err is not None \
                        else self._lead(tp, kind, tags)
                out = tp.broadcast_object(out, src=0)
                if out[0] == "each" and err is None:
                    if not self._warned:
                        self._warned = True
                        log.warning("gpusleep.vllm: %s: each worker "
                                    "releases and resumes its own domain; "
                                    "the tensor-parallel ranks are not one "
                                    "group (not all or nothing)", out[1])
                    return self._alone(kind, tags)
        finally:
            self._refuse = 0
        if err is not None:
            raise err
        if out[0] == "error":
            raise _rebuilt(out[1])
        return out[1] if out[0] == "ok" else None

    def _peers(self, tp: Any) -> Union[tuple[str, list[str]], str]:
        """The group's name and the TP ranks' domain names, in TP rank
        order; a str saying why there is none."""
        if os.environ.get("GPUSLEEP_DOMAIN_NAME"):
            return "GPUSLEEP_DOMAIN_NAME names one worker"
        prefix, sep, r = self.engine.name.rpartition("-tp")
        if not sep or not r.isdigit():
            return f"domain {self.engine.name!r} is not <engine>-tp<rank>"
        first = int(r) - tp.rank_in_group
        names = [f"{prefix}-tp{first + i}" for i in range(tp.world_size)]
        pc = getattr(self.vllm_config or _current_config(),
                     "parallel_config", None)
        world = getattr(pc, "world_size", tp.world_size)
        name = prefix if world == tp.world_size else \
            f"{prefix}-pp{first // tp.world_size}"
        from .trainer import resolve_domain
        for n in names:
            try:
                resolve_domain(n)
            except (errors.DomainNotFound, errors.AmbiguousDomain) as e:
                return f"the tensor-parallel ranks' domain {n}: {e}"
        return name, names

    def _lead(self, tp: Any, kind: str, tags: list[str]
              ) -> tuple[str, Any]:
        """TP rank 0: the group operation, or why there is none: ("ok",
        GroupResult or None), ("error", _portable(exception)) or ("each",
        reason). Never raises: the other ranks wait for its outcome."""
        try:
            peers = self._peers(tp)
            if isinstance(peers, str):
                return ("each", peers)
            if not tags:
                return ("ok", None)
            g = self._the_group(*peers)
            return ("ok", g.release(tags) if kind == "release" else
                    g.resume(tags))
        except Exception as e:	# noqa: raised by every rank
            return ("error", _portable(e))

    def _the_group(self, name: str, names: list[str]) -> Group:
        """The TP ranks' group, made once (rank i is TP rank i); one a
        controller made of exactly these domains is used as it is."""
        if self._group is not None:
            return self._group
        from .group import Group
        from .trainer import _sysfs_class, resolve_domain
        try:
            g = Group(name, names)
        except errors.GroupExists:
            g = Group.open(name)
            for n in names:
                p = os.path.join(_sysfs_class(),
                                 f"domain{resolve_domain(n)}", "group_id")
                try:
                    with open(p) as f:
                        ok = int(f.read().strip()) == g.id
                except (OSError, ValueError):
                    ok = False
                if not ok:
                    g.close()
                    raise RuntimeError(
                        f"gpusleep.vllm: a group {name!r} exists without "
                        f"domain {n}: vLLM's workers make the group of "
                        f"their domains {names} under that name; close the "
                        "other one")
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            raise RuntimeError(
                f"gpusleep.vllm: a domain of {names} is in another group "
                f"already: vLLM's workers make their own group ({name!r}); "
                "a controller opens it (gpusleep.Group.open) instead of "
                "making one") from e
        self._group = g
        return g

    def get_current_usage(self) -> int:
        """Bytes allocated in the pools (every tag, asleep or awake)."""
        total = 0
        for t in self.saver.tags if self._mm() else ():
            info = self._info(t)
            if info is not None:
                total += info.used_bytes
        return total

    def release_pools(self) -> None:
        """Drop this process's MemPools and then their allocators, in
        that order, before the interpreter's finalization (vLLM's reason:
        a MemPool destroyed after its pluggable allocator calls into
        freed memory). Safe to call more than once; the domain stays
        until the process ends."""
        self.saver.release_pools()

    def close(self) -> None:
        """vLLM's alias of release_pools."""
        self.release_pools()


# -- the plugin's hooks into vLLM --------------------------------------------
_state: dict[str, Any] = {"selected": None}


def route(orig: Callable[[], Any]) -> Callable[[], Any]:
    """vLLM's get_mem_allocator_instance, routed: GpuSleepAllocator for a
    worker that selected gpusleep (its config current, else as its first
    pool decided), vLLM's own otherwise."""
    if getattr(orig, "_gpusleep", False):
        return orig

    def get_mem_allocator_instance() -> Any:
        cfg = _current_config()
        use = selected(cfg) if cfg is not None else _state["selected"]
        if use:
            a = GpuSleepAllocator.get_instance()
            if cfg is not None and a.vllm_config is None:
                a.vllm_config = cfg
            return a
        return orig()

    get_mem_allocator_instance._gpusleep = True	# type: ignore[attr-defined]
    return get_mem_allocator_instance


def _pool_context(orig: Callable[..., Any]) -> Callable[..., Any]:
    """Worker._maybe_get_memory_pool_context, routed: the worker's config
    decides (it is not current when load_model asks for the weights
    pool)."""
    if getattr(orig, "_gpusleep", False):
        return orig

    def _maybe_get_memory_pool_context(self: Any, tag: str) -> Any:
        use = selected(self.vllm_config)
        _state["selected"] = use
        if not use:
            return orig(self, tag)
        a = GpuSleepAllocator.get_instance()
        if a.vllm_config is None:
            a.vllm_config = self.vllm_config
        if tag == "weights":
            assert a.get_current_usage() == 0, (
                "CuMem allocator can only be used for one instance per "
                "process.")
        return a.use_memory_pool(tag=tag)

    _maybe_get_memory_pool_context._gpusleep = True	# type: ignore
    return _maybe_get_memory_pool_context


def _patch_worker(mod: Any) -> None:
    w = getattr(mod, "Worker", None)
    if w is not None and hasattr(w, "_maybe_get_memory_pool_context"):
        w._maybe_get_memory_pool_context = _pool_context(
            w._maybe_get_memory_pool_context)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs fn(module) once module name has been executed (the worker's
    module is imported after vLLM loads its plugins)."""

    def __init__(self, name: str, fn: Callable[[Any], None]) -> None:
        self.name, self.fn = name, fn

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        fn = self.fn

        def exec_module(module: Any) -> None:
            run(module)
            fn(module)

        spec.loader.exec_module = exec_module	# type: ignore[method-assign]
        return spec


def install_backend() -> None:
    """vLLM with SleepModeBackendFactory: the backend "gpusleep"
    registered, get_mem_allocator_instance and the GPU worker's pool
    context routed (only for workers that select it)."""
    factory = importlib.import_module(FACTORY).SleepModeBackendFactory
    if BACKEND not in factory._registry:
        factory.register_backend(BACKEND, "gpusleep_vllm.backend",
                                 "GpuSleepBackend")
    pkg = importlib.import_module("vllm.device_allocator")
    orig = pkg.get_mem_allocator_instance
    pkg.get_mem_allocator_instance = route(orig)
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.") and mod is not None and \
                getattr(mod, "get_mem_allocator_instance", None) is orig:
            mod.get_mem_allocator_instance = pkg.get_mem_allocator_instance
    worker = "vllm.v1.worker.gpu_worker"
    if worker in sys.modules:
        _patch_worker(sys.modules[worker])
    elif not any(isinstance(f, _AfterImport) and f.name == worker
                 for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(worker, _patch_worker))


def _cumem_for_sleep_mode(orig: type) -> type:
    """On a vLLM without sleep-mode backends: GpuSleepAllocator in
    CuMemAllocator's place, for workers with enable_sleep_mode (the
    current config says; vLLM's own allocator otherwise)."""

    class CuMemAllocator(GpuSleepAllocator):
        __doc__ = GpuSleepAllocator.__doc__

        @staticmethod
        def get_instance() -> Any:
            cfg = _current_config()
            if cfg is not None and not selected(cfg):
                # vLLM's own (its get_instance would make one of this
                # class: it names CuMemAllocator through its module)
                if orig.instance is None:
                    orig.instance = orig()
                return orig.instance
            return GpuSleepAllocator.get_instance()

    CuMemAllocator.__module__ = __name__
    return CuMemAllocator


def install() -> type:
    """The plugin: install_backend() where vLLM has the factory, else
    CuMemAllocator replaced for sleep-mode workers. Returns what is in
    place (the factory's backend class name, or the allocator class)."""
    if has_factory():
        install_backend()
        return GpuSleepAllocator
    cumem = importlib.import_module("vllm.device_allocator.cumem")
    orig = getattr(cumem, "CuMemAllocator", None)
    if orig is not None and issubclass(orig, GpuSleepAllocator):
        return orig
    new = _cumem_for_sleep_mode(orig) if orig is not None else \
        GpuSleepAllocator
    cumem.CuMemAllocator = new
    pkg = sys.modules.get("vllm.device_allocator")
    if pkg is not None and hasattr(pkg, "get_mem_allocator_instance"):
        pkg.get_mem_allocator_instance = new.get_instance
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm.") and mod is not None and orig is not None \
                and getattr(mod, "CuMemAllocator", None) is orig:
            mod.CuMemAllocator = new
    return new


# -- what the gpusleep sleep-mode backend does (gpusleep_vllm.backend:
#    GpuSleepBackend, vLLM's SleepModeBackend calling these) -----------------
def suspend(level: int = 1) -> Union[Result, None]:
    """The backend's suspend(level): vLLM's cumem levels (offload_tags)
    over GpuSleepAllocator."""
    return GpuSleepAllocator.get_instance().sleep(
        offload_tags=offload_tags(level))


def resume(tags: Optional[list[str]] = None) -> Union[Result, None]:
    """The backend's resume(tags)."""
    return GpuSleepAllocator.get_instance().wake_up(tags)


def discard(tags: tuple[str, ...]) -> Union[Result, None]:
    """The backend's discard(tags)."""
    return GpuSleepAllocator.get_instance().discard(tags)
