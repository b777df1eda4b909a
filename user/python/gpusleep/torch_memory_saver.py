# SPDX-License-Identifier: LGPL-2.1-or-later
"""A drop-in for torch_memory_saver 0.0.10, over gpusleep.

    from torch_memory_saver import torch_memory_saver          # the wheel
    from gpusleep.torch_memory_saver import torch_memory_saver # the same

    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):
        model = load_model()
    with torch_memory_saver.region(tag="kv_cache"):
        kv_pools = allocate_kv_cache()
    with torch_memory_saver.cuda_graph(graph, tag="cuda_graph"):
        out = model(static_input)               # captured
    torch_memory_saver.pause("kv_cache")      # or pause(): every tag
    torch_memory_saver.resume()               # exactly what is paused

torch_memory_saver's whole public surface (TorchMemorySaver and its
methods and properties with their defaults, the module's singleton,
configure_subprocess(), _impl where slime reads it), checked against the
pinned release by tests/host/test_tms_pinned.py; the differences, point
by point, are in docs/pytorch.md. What gpusleep cannot do (disk backup,
the "mmap" backup backend) raises an error that names it.

Tags: any name, as in torch_memory_saver, declared on first use (the
domain's tag i is the allocator's bit i, gpusleep_tag_bit()), at most 8
per process, [a-z][a-z0-9_]* of at most 15 characters (the module's rule):
else errors.InvalidRequest. A domain's tags are fixed when it is made:
the tags used so far, or, when none was used yet, those of
configure(tags=...), else $GPUSLEEP_TMS_TAGS ("a,b,c"), else SGLang's
weights, kv_cache, cuda_graph (their order is the order of a release). A
tag first used after that raises errors.InvalidRequest naming the fix.
"default" is torch_memory_saver's default tag, a tag of its own.

How allocations are captured: one torch.cuda.MemPool per tag, whose
allocator is libgpusleep's pluggable allocator for that tag's bit
(gpusleep_malloc_tagN, gpusleep_free); region(tag) enters that pool with
torch.cuda.use_mem_pool for the calling thread, in both hook modes. So it
works after CUDA is initialised, PyTorch's caching allocator sits on top
(memory_stats, empty_cache, graph pools work), everything outside a region
stays with PyTorch's own allocator, and an allocation the memory manager
cannot make raises torch.OutOfMemoryError. Where the preload hook library
is loaded (LD_PRELOAD: configure_subprocess(), or slime's trainer), a
region also sets its per-thread settings, as torch_memory_saver does, so
that cudaMalloc calls of the thread that do not go through PyTorch are
captured too, and TMS_INIT_ENABLE captures a whole process's
(user/tms/hook.c). Without torch importable, region() only sets the
calling thread's tag for gpusleep_malloc (what the tests without PyTorch
use).

Regions nest (the innermost serves the thread), several threads may be in
one tag's region (each gets a pool of the tag), a released tag's region
or capture raises gpusleep.errors.Busy (its pools' cached blocks are
unmapped), expandable segments are switched off while a region is open
(PyTorch's MemPools refuse them), a foreign graph pool id is replaced by a
pool of the tag, and a region on another device than the memory
manager's raises RuntimeError (docs/pytorch.md).

pause() and resume() do not unmap memory behind the kernel's back: they
issue RELEASE / RESUME on the process's domain, from the engine fd, and
drive the engine's events (drain, cache reset, KV repair, resume
scheduling) until the operation ends; the memory is unmapped and remapped
by this process's agent thread, exactly as when a trainer releases the
domain from outside. The domain is the gpusleep.engine.Engine given to
configure(), or one made on first need, named $GPUSLEEP_DOMAIN_NAME or
"tms-PID", whose records a thread of its own answers as they come
(Engine.serve()): its drain is let through when the release is this
process's own pause() (a trainer has no scheduler: its pause() is the
moment it stops using the memory) or comes while the process is inside
releasable() (its safe point: a controller may release it then, and
leaving releasable() resumes what was released), and refused at once
otherwise (EOPNOTSUPP: the controller gets EngineFailed saying so, never
a drain timeout).

Without /dev/gpusleep, region(), cuda_graph(), pause() and resume() raise
gpusleep.errors.ModuleNotLoaded naming the two fixes: load the module, or
GPUSLEEP_TMS_LOCAL=1 (configure(local=True)), with which pause/resume act
on this process's memory manager directly, as torch_memory_saver does: the
memory manager waits for all GPU work of the context before it copies or
unmaps, and each call returns the memory manager's results per tag
(bytes, and the bytes the driver saw come free). `enabled` is always True,
as torch_memory_saver's: nothing is ever a silent no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as _errno
import gc
import glob
import logging
import os
import sys
import threading
from typing import (TYPE_CHECKING, Any, Iterable, Iterator, Literal,
                    Optional, Union)

from . import _lib, errors

if TYPE_CHECKING:
    import torch

    from .agent import StepResult
    from .arbiter import GpuRef, Lease
    from .engine import Engine, TagDecl
    from .trainer import Result

log = logging.getLogger("gpusleep.torch_memory_saver")

#: torch_memory_saver's backup backends; gpusleep's staging is pinned
CpuBackupBackend = Literal["mmap", "pinned"]
#: torch_memory_saver's hook modes
HookMode = Literal["preload", "torch"]

# torch_memory_saver's default tag
_TAG_DEFAULT = "default"
# The declaration of a domain made before any tag was used: the
# reference controller's two tags, then SGLang's graph memory (released
# after the KV cache in a full release).
TMS_TAGS = (("weights", "memory"), ("kv_cache", "kv_cache"),
            ("cuda_graph", "memory"))
# The hook libraries' names (torch_memory_saver 0.0.10's wheel; built
# from user/tms/hook.c), beside the torch_memory_saver package
HOOK_STEMS = {"preload": "torch_memory_saver_hook_mode_preload",
              "torch": "torch_memory_saver_hook_mode_torch"}
NO_MODULE = ("torch_memory_saver (gpusleep): {path} is missing: the gpusleep "
             "module is not loaded. Load it (sudo modprobe gpusleep) so "
             "that this process's memory is a domain a trainer can release,"
             " or set GPUSLEEP_TMS_LOCAL=1 (configure(local=True)) to "
             "release it in this process only, as torch_memory_saver does")
DEVICE = "/dev/gpusleep"


def bool_env(name: str) -> bool:
    """A boolean variable as torch_memory_saver reads it: unset, 0, false,
    FALSE, no, NO are False; 1, true, TRUE, yes, YES True; else
    ValueError (torch_memory_saver ends the process)."""
    v = os.environ.get(name)
    if v is None or v in ("0", "false", "FALSE", "no", "NO"):
        return False
    if v in ("1", "true", "TRUE", "yes", "YES"):
        return True
    raise ValueError(f"{name}={v!r}: want 1, true, yes or 0, false, no")


def _cuda_major() -> Optional[int]:
    """The CUDA runtime's major version, as torch_memory_saver picks its
    binaries: torch.version.cuda, else a libcudart that loads."""
    try:
        import torch
        v = getattr(getattr(torch, "version", None), "cuda", None)
        if v:
            return int(str(v).split(".", 1)[0])
    except (ImportError, ValueError):
        pass
    for major in (13, 12):
        try:
            ctypes.CDLL(f"libcudart.so.{major}")
            return major
        except OSError:
            pass
    return None


def hook_dirs() -> list[str]:
    """Where the hook libraries are looked for, in order: beside the
    torch_memory_saver package (the wheel, as torch_memory_saver and
    slime look), beside the gpusleep package, where make install put
    them (_install.HOOKDIR, PREFIX/lib/gpusleep), beside libgpusleep.so.0
    (build/lib in the tree)."""
    out = []
    import importlib.util
    try:
        spec = importlib.util.find_spec("torch_memory_saver")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        out.append(os.path.dirname(os.path.dirname(spec.origin)))
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.dirname(here))
    try:
        from . import _install	# written by `make python-install`
        out.append(getattr(_install, "HOOKDIR"))
    except (ImportError, AttributeError):
        pass
    try:
        out.append(os.path.dirname(_lib.path()))
    except OSError:
        pass
    out.append(os.path.normpath(os.path.join(here, "..", "..", "..",
                                             "build", "lib")))
    seen = []
    for d in out:
        if d not in seen:
            seen.append(d)
    return seen


def is_gpusleep_hook(path: str) -> bool:
    """Is the library at path gpusleep's hook (it loads libgpusleep.so.0,
    whose name it holds), not torch_memory_saver's own of the same
    name?"""
    try:
        with open(path, "rb") as f:
            return _lib.SONAME.encode() in f.read()
    except OSError:
        return False


REAL_TMS = ("{path} is torch_memory_saver's own library, not gpusleep's: "
            "the real torch-memory-saver is installed; pip uninstall "
            "torch-memory-saver, then install gpusleep-torch-memory-saver "
            "again (both own these names)")


def hook_library(mode: str = "preload") -> str:
    """The path of gpusleep's hook library of mode ("preload" or "torch"):
    the variant of the CUDA runtime in use (torch_memory_saver's choice),
    else the unsuffixed one. FileNotFoundError naming where it looked;
    RuntimeError when only torch_memory_saver's own are there."""
    stem = HOOK_STEMS[mode]
    major = _cuda_major()
    names = ([f"{stem}_cu{major}.abi3.so"] if major else []) + \
        [f"{stem}.abi3.so"]
    dirs = hook_dirs()
    foreign = None
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.exists(p):
                if is_gpusleep_hook(p):
                    return p
                foreign = foreign or p
    if foreign is not None:
        raise RuntimeError("torch_memory_saver (gpusleep): " +
                           REAL_TMS.format(path=foreign))
    raise FileNotFoundError(
        _errno.ENOENT, f"torch_memory_saver (gpusleep): none of {names} in "
        f"{dirs}: install the gpusleep-torch-memory-saver wheel (make "
        "wheel), which ships them")


def preloaded_hook() -> Optional[str]:
    """The hook library this process has preloaded (LD_PRELOAD, as
    torch_memory_saver finds it: the entry naming torch_memory_saver),
    if it is loaded, else None."""
    for p in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":"):
        if "torch_memory_saver" in p and os.path.exists(p):
            try:
                ctypes.CDLL(p, mode=os.RTLD_NOLOAD)
            except OSError:
                continue
            if not is_gpusleep_hook(p):
                # its cudaMalloc captures memory gpusleep cannot release
                raise RuntimeError("torch_memory_saver (gpusleep): "
                                   "LD_PRELOAD: " + REAL_TMS.format(path=p))
            return p
    return None


def _setup_signatures(cdll: ctypes.CDLL) -> None:
    c_bool, c_char_p = ctypes.c_bool, ctypes.c_char_p
    cdll.tms_set_current_tag.argtypes = [c_char_p]
    cdll.tms_get_current_tag.restype = c_char_p
    cdll.tms_set_interesting_region.argtypes = [c_bool]
    cdll.tms_get_interesting_region.restype = c_bool
    cdll.tms_set_enable_cpu_backup.argtypes = [c_bool]
    cdll.tms_get_enable_cpu_backup.restype = c_bool
    cdll.tms_set_cpu_backup_backend.argtypes = [c_char_p]
    cdll.tms_get_cpu_backup_backend.restype = c_char_p
    cdll.tms_set_enable_disk_backup.argtypes = [c_bool]
    cdll.tms_get_enable_disk_backup.restype = c_bool
    cdll.tms_set_disk_backup_dir.argtypes = [c_char_p]
    cdll.tms_pause.argtypes = [c_char_p]
    cdll.tms_pause.restype = ctypes.c_int
    cdll.tms_resume.argtypes = [c_char_p]
    cdll.tms_resume.restype = ctypes.c_int
    cdll.set_memory_margin_bytes.argtypes = [ctypes.c_uint64]
    cdll.tms_set_retain_cpu_backup.argtypes = [c_bool]
    cdll.tms_get_retain_cpu_backup.restype = c_bool
    cdll.tms_get_cpu_backup_pointer.argtypes = [
        ctypes.POINTER(ctypes.c_uint8), ctypes.c_uint64]
    cdll.tms_get_cpu_backup_pointer.restype = ctypes.POINTER(ctypes.c_uint8)


class BinaryWrapper:
    """torch_memory_saver's handle on a hook library: cdll, the library
    (ctypes; the tms_* functions typed), and set_config()."""

    def __init__(self, path_binary: str) -> None:
        self.cdll = ctypes.CDLL(path_binary)
        _setup_signatures(self.cdll)

    def set_config(self, *, tag: str, interesting_region: bool,
                   enable_cpu_backup: bool,
                   cpu_backup_backend: Optional[str] = None,
                   enable_disk_backup: bool = False) -> None:
        """The calling thread's settings in the library."""
        self.cdll.tms_set_current_tag(tag.encode("utf-8"))
        self.cdll.tms_set_interesting_region(interesting_region)
        self.cdll.tms_set_enable_cpu_backup(enable_cpu_backup)
        if cpu_backup_backend is not None:
            self.cdll.tms_set_cpu_backup_backend(
                cpu_backup_backend.encode("utf-8"))
        self.cdll.tms_set_enable_disk_backup(enable_disk_backup)


class _Impl:
    """What torch_memory_saver keeps in TorchMemorySaver._impl once it is
    initialised, as far as its callers read it (slime reads
    _impl._binary_wrapper.cdll.tms_get/set_interesting_region): the hook
    mode and the hook library, the preloaded one where there is one, else
    the packaged library of the mode, loaded on first use."""

    def __init__(self, hook_mode: HookMode = "preload") -> None:
        self._hook_mode = hook_mode
        self._is_xpu = False
        self._bw: Optional[BinaryWrapper] = None
        pre = preloaded_hook()
        if pre is not None:
            self._bw = BinaryWrapper(pre)

    @property
    def _binary_wrapper(self) -> BinaryWrapper:
        if self._bw is None:
            self._bw = BinaryWrapper(hook_library(self._hook_mode))
        return self._bw

    def _cdll_if_loaded(self) -> Optional[ctypes.CDLL]:
        return self._bw.cdll if self._bw is not None else None


class TorchMemorySaver:
    """torch_memory_saver's TorchMemorySaver over gpusleep. One per
    process (there is one memory manager and one domain per process, as
    torch_memory_saver has one C++ singleton): TorchMemorySaver() returns
    the module's torch_memory_saver. Assigning an attribute it does not
    have raises AttributeError."""

    __slots__ = ("_impl", "_impl_ctor_kwargs", "_ready", "_engine",
                 "_agent", "_allocators", "_pools", "_owner", "_foreign",
                 "_expandable_users", "_local", "_lock", "_tls", "_decl",
                 "_declared", "_own_op", "_outside", "_retain",
                 "tag_aliases")
    _instance: Optional[TorchMemorySaver] = None

    def __new__(cls: type[TorchMemorySaver]) -> TorchMemorySaver:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self) -> None:
        if getattr(self, "_ready", False):
            return
        self._impl: Optional[_Impl] = None
        self._impl_ctor_kwargs: Optional[dict[str, Any]] = {}
        self._engine: Optional[Engine] = None
        self._agent = False
        self._allocators: dict[str, Any] = {}	# tag -> pluggable allocator
        self._pools: dict[tuple[str, int], list[Any]] = {}
        self._owner: dict[int, tuple[int, int]] = {}  # id(pool) -> (thr, n)
        self._foreign: dict[tuple[Any, str, int], Any] = {}
        self._expandable_users = 0	# regions open with it switched off
        self._local = os.environ.get("GPUSLEEP_TMS_LOCAL") == "1"
        self._lock = threading.RLock()
        self._tls = threading.local()
        # the declaration asked for (configure(tags=)), applied at the
        # first tag used or at the domain's making
        self._decl: Optional[list[tuple[str, str]]] = None
        self._declared = False		# a tag was declared here
        self._own_op = False		# a pause()/resume() of ours runs
        self._outside = 0		# releasable() windows open
        self._retain: Optional[bool] = None
        #: names mapped to another tag before anything else (empty: as
        #: torch_memory_saver, every name is a tag of its own)
        self.tag_aliases: dict[str, str] = {}
        self._ready = True

    # ------------------------------------------------------------ setup
    def _ensure_initialized(self) -> _Impl:
        """torch_memory_saver's lazy initialisation: _impl from the
        settings made before (hook_mode)."""
        if self._impl is None:
            kw = self._impl_ctor_kwargs or {}
            self._impl = _Impl(**kw)
            self._impl_ctor_kwargs = None
            if self._impl._cdll_if_loaded() is None:
                # the hook applies TMS_RETAIN_CPU_BACKUP when it loads
                self._set_retain(bool_env("TMS_RETAIN_CPU_BACKUP"))
        return self._impl

    def configure(self, engine: Optional[Engine] = None, *,
                  local: Optional[bool] = None,
                  tags: Optional[TagDecl] = None,
                  serve: Optional[bool] = None,
                  **engine_kwargs: Any) -> Optional[Engine]:
        """Bind the domain: an Engine of this process, or the keyword
        arguments of a new one (name, gpu, prefix_caching,
        prefix_cache_reset, callbacks...). tags: declared first, in this
        order (when no tag was used yet, the domain's; default weights,
        kv_cache, cuda_graph); an engine given has its own, which must be
        the allocator's. serve: a new engine's records answered by a
        thread of its own (Engine.serve()), for callers with no loop that
        dispatches it (vLLM's workers); default: only when the drop-in
        answers the drain itself (no drain= given: a trainer's memory).
        Returns the engine. local=True: no domain; pause/resume act on
        the memory directly."""
        if local is not None:
            self._local = bool(local)
        if tags is not None:
            self._decl = _lib.declaration(tags)
            if self._declared:
                for n, _ in self._decl:
                    self._declare(n)
        if self._local:
            return None
        if self._engine is not None:
            raise RuntimeError("torch_memory_saver: already configured "
                               f"(domain {self._engine.id})")
        self._need_module()
        if engine is None:
            from .engine import Engine
            engine_kwargs.setdefault(
                "name", os.environ.get("GPUSLEEP_DOMAIN_NAME",
                                       f"tms-{os.getpid()}"))
            if serve is None:
                serve = "drain" not in engine_kwargs
            engine_kwargs.setdefault("drain", self._own_drain)
            decl = [(n, "kv_cache" if n == "kv_cache" else "memory")
                    for n in self._domain_tags()]
            engine = Engine(tags=decl, **engine_kwargs)
            if serve:	# no loop reads its fd: a thread answers
                engine.serve()
        else:
            for i, n in enumerate(engine.tag_names):
                if self._declare(n) != i:
                    raise RuntimeError(
                        f"torch_memory_saver: domain {engine.id}'s tags "
                        f"{list(engine.tag_names)} are not the allocator's "
                        f"{self.tags} (bit order): configure() before "
                        "the first region")
        _lib.lib().gpusleep_freeze_tags()
        self._engine = engine
        self._ensure_agent()
        return engine

    def _own_drain(self, tags: list[str], abort_inflight: bool) -> int:
        """The drain of a domain made here: nothing schedules work on the
        memory but this process's own code, which stops using it by
        calling pause(), or says it may be released inside releasable();
        a release from elsewhere at any other time is refused at once
        (EOPNOTSUPP)."""
        if self._own_op or self._outside:
            return 0
        log.warning("torch_memory_saver (gpusleep): a release of domain %s "
                    "(%s) from another process refused: this process's "
                    "memory is released by its own pause(), or from "
                    "outside only while it is inside "
                    "torch_memory_saver.releasable()",
                    self._engine.id if self._engine else "?", tags)
        return -_errno.EOPNOTSUPP

    @contextlib.contextmanager
    def releasable(self, resume: bool = True) -> Iterator[None]:
        """The process's safe point: inside, it does not touch the memory
        of its regions, and a release of its domain from another process
        (a trainer's controller, gpusleepctl) is let through at once, as
        its own pause() is; outside, such a release is refused
        (EOPNOTSUPP). On leaving, new releases are refused again, one
        still running is waited for, and (resume=True) what is released
        is resumed by this process before its code goes on: its memory is
        mapped, backups restored, whatever released it. resume=False
        leaves it released (the caller resumes it, or waits for the
        controller's resume, before touching it). Nests. Needs the module
        (not local mode): the domain is made if it is not yet."""
        self._ensure_initialized()
        if self._local:
            raise RuntimeError("torch_memory_saver (gpusleep): releasable() "
                               "needs the module; in local mode nothing "
                               "outside the process can release it")
        eng = self.engine
        if not eng.served:
            raise RuntimeError("torch_memory_saver (gpusleep): releasable() "
                               "is for a domain whose drain the drop-in "
                               f"answers; domain {eng.id}'s engine loop "
                               "answers its own (configure() was given an "
                               "engine or a drain callback)")
        self._ensure_agent()
        with self._lock:
            self._outside += 1
        try:
            yield
        finally:
            with self._lock:
                self._outside -= 1
                last = self._outside == 0
            if last:
                st = eng.state()
                if st.op_in_flight:
                    try:
                        eng.wait(st.op_in_flight)
                    except errors.GpuSleepError:
                        pass	# its outcome is in the state read next
                if resume and eng.state().released:
                    self._own_op = True
                    try:
                        eng.resume()
                    finally:
                        self._own_op = False

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

    def _need_module(self) -> None:
        if not self._local and not os.path.exists(DEVICE):
            raise errors.ModuleNotLoaded(
                DEVICE, NO_MODULE.format(path=DEVICE))

    @property
    def enabled(self) -> bool:
        """Always True, as torch_memory_saver's (read-only): what cannot
        work raises instead (region() without the module, an option
        gpusleep does not have)."""
        return True

    @property
    def hook_mode(self) -> HookMode:
        """Write-only, as torch_memory_saver's; the mode in use is
        _impl._hook_mode."""
        raise AttributeError("torch_memory_saver: hook_mode can only be "
                             "set (before the first use)")

    @hook_mode.setter
    def hook_mode(self, hook_mode: HookMode) -> None:
        """"preload" (the default) or "torch", before the first use: which
        hook library _impl._binary_wrapper is. Allocations are captured
        through MemPools in both (docs/pytorch.md)."""
        if hook_mode not in HOOK_STEMS:
            raise ValueError(f"hook_mode {hook_mode!r}: want 'preload' or "
                             "'torch'")
        if self._impl_ctor_kwargs is None:
            raise RuntimeError("torch_memory_saver: hook_mode cannot be "
                               "set after initialization (the first "
                               "region, pause or resume)")
        self._impl_ctor_kwargs["hook_mode"] = hook_mode

    @property
    def memory_margin_bytes(self) -> int:
        """Write-only, as torch_memory_saver's."""
        raise NotImplementedError("Only setter is supported")

    @memory_margin_bytes.setter
    def memory_margin_bytes(self, value: int) -> None:
        """An allocation that would leave less device memory free fails
        as out of memory (gpusleep: when it needs a new chunk)."""
        self._ensure_initialized()
        if value < 0:
            raise ValueError(f"memory_margin_bytes {value}: want >= 0")
        _lib.check(_lib.lib().gpusleep_set_margin(int(value)),
                   "memory_margin_bytes")

    def _set_retain(self, value: bool) -> None:
        cdll = self._impl._cdll_if_loaded() if self._impl else None
        if cdll is not None:
            cdll.tms_set_retain_cpu_backup(bool(value))
        else:
            _lib.check(_lib.lib().gpusleep_set_staging_all(
                0 if value else _lib.GS_MM_STAGING_FREE_AFTER_RESUME),
                "retain_cpu_backup")
        self._retain = bool(value)

    @property
    def retain_cpu_backup(self) -> bool:
        """Keep the host copy of backed-up memory after its resume
        (TMS_RETAIN_CPU_BACKUP; default False: given back, pinned again
        at the next pause, as torch_memory_saver)."""
        impl = self._ensure_initialized()
        cdll = impl._cdll_if_loaded()
        if cdll is not None:
            return bool(cdll.tms_get_retain_cpu_backup())
        return bool(self._retain)

    @retain_cpu_backup.setter
    def retain_cpu_backup(self, value: bool) -> None:
        self._ensure_initialized()
        self._set_retain(value)

    def set_disk_backup_dir(self, path: str) -> None:
        """torch_memory_saver's disk backup: not in gpusleep (raises)."""
        self._ensure_initialized()
        raise NotImplementedError(
            f"torch_memory_saver (gpusleep): set_disk_backup_dir({path!r}):"
            " disk backup is not supported; released memory is backed up "
            "to pinned host memory (enable_cpu_backup=True) or discarded")

    @staticmethod
    def _validate_cpu_backup_backend(
            enable_cpu_backup: bool,
            cpu_backup_backend: Optional[CpuBackupBackend]) -> None:
        if cpu_backup_backend is None:
            return
        if not enable_cpu_backup:
            raise ValueError("cpu_backup_backend requires "
                             "enable_cpu_backup=True")
        if cpu_backup_backend == "mmap":
            raise NotImplementedError(
                "torch_memory_saver (gpusleep): cpu_backup_backend='mmap' is "
                "not supported: gpusleep's backups are pinned host memory "
                "(cpu_backup_backend='pinned')")
        if cpu_backup_backend != "pinned":
            raise ValueError(f"cpu_backup_backend {cpu_backup_backend!r}: "
                             "want 'pinned' or 'mmap'")

    @staticmethod
    def _validate_disk_backup(enable_cpu_backup: bool,
                              enable_disk_backup: bool) -> None:
        if enable_cpu_backup and enable_disk_backup:
            raise ValueError("enable_cpu_backup and enable_disk_backup are "
                             "mutually exclusive")
        if enable_disk_backup:
            raise NotImplementedError(
                "torch_memory_saver (gpusleep): enable_disk_backup=True is "
                "not supported; released memory is backed up to pinned "
                "host memory (enable_cpu_backup=True) or discarded")

    # ------------------------------------------------------------ tags
    @property
    def tags(self) -> list[str]:
        """The tags declared so far, in bit order (the domain's order)."""
        buf = ctypes.create_string_buffer(
            _lib.MAX_TAGS * _lib.TAG_NAME_LEN)
        n = _lib.lib().gpusleep_tag_names(buf, len(buf))
        _lib.check(n, "tag names")
        return buf.value.decode().split(",") if n else []

    def _first_use(self) -> None:
        """Before the first tag: the declaration asked for, if any."""
        if self._declared:
            return
        asked = self._decl
        if asked is None and os.environ.get("GPUSLEEP_TMS_TAGS"):
            asked = _lib.declaration(
                os.environ["GPUSLEEP_TMS_TAGS"].split(","))
        for n, _ in asked or ():
            self._declare(n)

    def _declare(self, tag: str) -> int:
        """The bit of tag, declared on first use."""
        bit = _lib.lib().gpusleep_tag_bit(tag.encode(), 1)
        if bit >= 0:
            self._declared = True
            return bit
        if bit == -_errno.ENOSPC:
            msg = (f"tag {tag!r}: {_lib.MAX_TAGS} tags are declared already "
                   f"({self.tags}), gpusleep's limit per process")
        elif bit == -_errno.EBUSY:
            msg = (f"tag {tag!r} is not in domain "
                   f"{self._engine.id if self._engine else '?'}'s "
                   f"declaration {self.tags}: a domain's tags are fixed "
                   "when it is made; name it before: configure(tags=[...])"
                   " or GPUSLEEP_TMS_TAGS=" + ",".join(self.tags + [tag]))
        else:
            msg = (f"tag {tag!r}: gpusleep tags are [a-z][a-z0-9_]*, at most "
                   f"{_lib.TAG_NAME_LEN - 1} characters")
        raise errors.InvalidRequest(_lib.R_INVALID, message=msg)

    def _tag(self, tag: str) -> str:
        if not isinstance(tag, str):
            raise TypeError(f"tag: want a str, not {type(tag).__name__}")
        tag = self.tag_aliases.get(tag, tag)
        self._first_use()
        self._declare(tag)
        return tag

    def _domain_tags(self) -> list[str]:
        """The declaration a domain made now gets: the tags used so far,
        or, none used yet, the one asked for, else TMS_TAGS."""
        if not self._declared and not _lib.lib().gpusleep_mm() and \
                self._decl is None and \
                not os.environ.get("GPUSLEEP_TMS_TAGS"):
            self._decl = list(TMS_TAGS)
        self._first_use()
        return self.tags

    def _mask(self, tag: str) -> int:
        bit = _lib.lib().gpusleep_tag_bit(tag.encode(), 0)
        if bit < 0:
            raise errors.InvalidRequest(
                _lib.R_INVALID, message=f"tag {tag!r}: not declared "
                f"(declared: {self.tags})")
        return 1 << bit

    def _set_policy(self, tag: str, backup: bool) -> None:
        """One policy per tag; a backup once asked for is kept (never
        silently discard what some region wanted kept)."""
        bit = self._mask(tag).bit_length() - 1
        _lib.check(_lib.lib().gpusleep_set_backup(bit, int(bool(backup))),
                   f"tag {tag}: setting its policy")

    # ----------------------------------------------------- memory pools
    @staticmethod
    def _torch() -> Any:
        try:
            import torch
        except ImportError:
            return None
        return torch

    def _new_pool(self, torch: Any, tag: str, dev: int) -> Any:
        """A new MemPool of tag on device dev: its allocator is tag's
        entry point, and the pool belongs to the device current at its
        creation (PyTorch looks pools up by device)."""
        backend = getattr(torch.cuda, "get_allocator_backend", None)
        if backend is not None and backend() != "native":
            raise RuntimeError(
                f"torch_memory_saver (gpusleep): PyTorch's allocator backend "
                f"is {backend()}, which has no MemPools (regions are one "
                "MemPool per tag): run with PYTORCH_CUDA_ALLOC_CONF="
                "backend:native (the default; expandable_segments may stay)")
        alloc = self._allocators.get(tag)
        if alloc is None:
            bit = self._mask(tag).bit_length() - 1
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

    def _pool(self, torch: Any, tag: str, dev: Optional[int] = None) -> Any:
        """The first MemPool of tag on device dev (default: current), made
        on first use."""
        if dev is None:
            dev = torch.cuda.current_device()
        with self._lock:
            pools = self._pools.get((tag, dev))
            return pools[0] if pools else self._new_pool(torch, tag, dev)

    def _acquire(self, torch: Any, tag: str, dev: int) -> Any:
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

    def _unacquire(self, pool: Any) -> None:
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
    def _expandable_env() -> bool:
        conf = ",".join(os.environ.get(v, "") for v in (
            "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"))
        return "expandable_segments:true" in conf.replace(" ", "").lower()

    @contextlib.contextmanager
    def _no_expandable(self, torch: Any) -> Iterator[None]:
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

    def _check_awake(self, tag: str) -> None:
        """A released tag's pools still cache its (unmapped) blocks:
        serving them would fault. Refused with EBUSY until its resume."""
        L = _lib.lib()
        mm = L.gpusleep_mm()
        if mm and self._paused(mm, tag):
            raise errors.Busy(
                _lib.R_BUSY, message=f"tag {tag!r} is released: no region "
                "or graph capture in it before its resume")

    def _check_device(self, torch: Any, dev: int) -> None:
        """One memory manager per process, on one device."""
        have = _lib.lib().gpusleep_device()
        if have >= 0 and have != dev:
            raise RuntimeError(
                f"gpusleep: a region on device {dev}, but this process's "
                f"memory is on device {have}: one device per process")

    def _frames(self) -> list[Any]:
        st = getattr(self._tls, "frames", None)
        if st is None:
            st = self._tls.frames = []
        return st

    def _switch(self, torch: Any, frames: list[Any], want: Any) -> None:
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
    def _in_pool(self, torch: Any, tag: str) -> Iterator[None]:
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
    def _thread_tag(self, tag: str) -> Iterator[None]:
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
    def _hook_config(self, tag: str, enable_cpu_backup: bool,
                     interesting: bool = True) -> Iterator[None]:
        """The hook library's settings of the calling thread inside (as
        torch_memory_saver's region), where a hook library is loaded."""
        cdll = self._impl._cdll_if_loaded() if self._impl else None
        if cdll is None:
            yield
            return
        orig = (cdll.tms_get_current_tag(), cdll.tms_get_interesting_region(),
                cdll.tms_get_enable_cpu_backup())
        cdll.tms_set_current_tag(tag.encode())
        cdll.tms_set_interesting_region(interesting)
        cdll.tms_set_enable_cpu_backup(enable_cpu_backup)
        try:
            yield
        finally:
            cdll.tms_set_current_tag(orig[0])
            cdll.tms_set_interesting_region(orig[1])
            cdll.tms_set_enable_cpu_backup(orig[2])

    @contextlib.contextmanager
    def region(self, tag: str = _TAG_DEFAULT,
               enable_cpu_backup: bool = False,
               enable_disk_backup: bool = False,
               cpu_backup_backend: Optional[CpuBackupBackend] = None
               ) -> Iterator[None]:
        """Allocations of the calling thread inside go to tag (any name,
        declared on first use); enable_cpu_backup: kept across pause
        (copied to pinned host memory), else discarded (zero after
        resume). enable_disk_backup, cpu_backup_backend="mmap": not in
        gpusleep (NotImplementedError). Regions nest (the same tag or
        others; the innermost serves) and several threads may be in one
        tag's region (each gets a pool of that tag). A released tag
        raises gpusleep.errors.Busy (EBUSY); no module and no local mode,
        gpusleep.errors.ModuleNotLoaded."""
        self._validate_cpu_backup_backend(enable_cpu_backup,
                                          cpu_backup_backend)
        self._validate_disk_backup(enable_cpu_backup, enable_disk_backup)
        self._ensure_initialized()
        self._need_module()
        tag = self._tag(tag)
        self._check_awake(tag)
        self._set_policy(tag, enable_cpu_backup)
        torch = self._torch()
        with contextlib.ExitStack() as stack:
            if torch is not None:
                self._check_device(torch, torch.cuda.current_device())
                stack.enter_context(self._in_pool(torch, tag))
            stack.enter_context(self._thread_tag(tag))
            stack.enter_context(self._hook_config(tag, enable_cpu_backup))
            yield
        self._ensure_agent()

    def _graph_pool(self, torch: Any, tag: str, pool: Any) -> Any:
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
                   tag: str = _TAG_DEFAULT,
                   enable_cpu_backup: bool = False,
                   cpu_backup_backend: Optional[CpuBackupBackend] = None
                   ) -> Iterator[None]:
        """torch.cuda.graph(...), with the graph's memory in a pool of tag,
        so that it is released and brought back with that tag (in both
        hook modes). pool: None (tag's MemPool), a pool of ours
        (graph.pool() of a graph captured here: graphs share it), or any
        other pool id, such as SGLang's graph_pool_handle(): replaced by a
        pool of tag of its own, shared by the captures given the same
        id."""
        self._validate_cpu_backup_backend(enable_cpu_backup,
                                          cpu_backup_backend)
        self._ensure_initialized()
        torch = self._torch()
        if torch is None:
            raise RuntimeError("cuda_graph needs torch")
        self._need_module()
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
            with self._no_expandable(torch), self._thread_tag(tag), \
                    self._hook_config(tag, enable_cpu_backup):
                with torch.cuda.graph(cuda_graph, pool=gpool.id,
                                      stream=stream,
                                      capture_error_mode=capture_error_mode):
                    yield
        finally:
            self._switch(torch, frames, frames[-1] if frames else None)
        self._ensure_agent()

    @contextlib.contextmanager
    def disable(self) -> Iterator[None]:
        """Allocations inside stay with PyTorch's own allocator (and,
        where the preload hook is loaded, cudaMalloc with the CUDA
        runtime's): a plain MemPool for the calling thread, dropped
        afterwards, as torch_memory_saver does."""
        impl = self._ensure_initialized()
        cdll = impl._cdll_if_loaded()
        prev = None
        if cdll is not None:
            prev = cdll.tms_get_interesting_region()
            cdll.tms_set_interesting_region(False)
        try:
            torch = self._torch()
            if torch is None:
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
        finally:
            if cdll is not None:
                cdll.tms_set_interesting_region(prev)

    # -------------------------------------------------------- the agent
    def _ensure_agent(self) -> bool:
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
    def _tags(self, tag: Union[str, Iterable[str], None]
              ) -> Optional[list[str]]:
        """The tags named that hold memory (declared), None for every
        tag; [] when none of them was ever used."""
        if tag is None:
            return None
        names = [tag] if isinstance(tag, str) else list(tag)
        out = []
        for t in names:
            t = self.tag_aliases.get(t, t)
            if _lib.lib().gpusleep_tag_bit(t.encode(), 0) >= 0:
                out.append(t)
        return out

    def _local_op(self, pause: bool, tag: Union[str, Iterable[str], None]
                  ) -> dict[str, dict[str, int]]:
        """pause/resume on this process's memory manager directly; a dict
        tag -> result (gpusleep.agent.result_dict). Already in the asked
        state is success. A failure raises OSError with .result."""
        from .agent import result_dict
        L = _lib.lib()
        mm = L.gpusleep_mm()
        out: dict[str, dict[str, int]] = {}
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
                e.result = d	# type: ignore[attr-defined]
                e.results = out	# type: ignore[attr-defined]
                raise e
        return out

    def _paused(self, mm: int, tag: str) -> bool:
        info = _lib.gs_mm_tag_info()
        ret = _lib.lib().gs_mm_tag_info(mm, self._mask(tag),
                                        ctypes.byref(info))
        return ret == 0 and bool(info.paused)

    def _op(self, pause: bool, tag: Union[str, Iterable[str], None]
            ) -> Union[Result, dict[str, dict[str, int]], None]:
        self._ensure_initialized()
        self._need_module()
        if self._local:
            return self._local_op(pause, tag)
        tags = self._tags(tag)
        if tags == []:
            return None	# never used: nothing in it, as torch_memory_saver
        eng = self.engine
        self._ensure_agent()
        self._own_op = True
        try:
            return eng.release(tags) if pause else eng.resume(tags)
        finally:
            self._own_op = False
            self.report_outside()	# what PyTorch holds now, by class

    def pause(self, tag: Optional[str] = None
              ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Release tag (None: every tag) through the module; returns the
        operation's Result. Refusals raise gpusleep.errors exceptions. A
        tag never used holds nothing: None, nothing done (as
        torch_memory_saver). Local mode: the memory manager's results per
        tag."""
        return self._op(True, tag)

    def resume(self, tag: Optional[str] = None
               ) -> Union[Result, dict[str, dict[str, int]], None]:
        """Resume tag (None: exactly what is released) through the module;
        see pause()."""
        return self._op(False, tag)

    def get_cpu_backup(self, x: torch.Tensor,
                       zero_copy: bool = False) -> Optional[torch.Tensor]:
        """The host copy of x (a contiguous CUDA tensor allocated in a
        region) while its tag is released with a backup: a CPU tensor of
        x's dtype and shape, sharing the backup with zero_copy (valid
        until the resume), else a copy. None while the tag is mapped (x
        itself is current then). ValueError for memory not allocated in a
        region; RuntimeError for a tag released without a backup."""
        self._ensure_initialized()
        torch = self._torch()
        if torch is None:
            raise RuntimeError("get_cpu_backup needs torch")
        if not x.is_contiguous():
            raise ValueError(f"get_cpu_backup: x is not contiguous "
                             f"(shape {tuple(x.shape)}, stride "
                             f"{tuple(x.stride())})")
        L = _lib.lib()
        mm = L.gpusleep_mm()
        nbytes = x.numel() * x.element_size()
        ptr = ctypes.c_void_p(x.data_ptr())
        host = ctypes.c_void_p()
        ret = L.gs_mm_backup_ptr(mm, ptr, nbytes, ctypes.byref(host)) \
            if mm and nbytes else -_errno.ENOENT
        if ret == 0 and not host.value:
            return None
        if ret == -_errno.ENOENT:
            raise ValueError("get_cpu_backup: x was not allocated in a "
                             "region (not gpusleep memory)")
        if ret == -_errno.ENODATA:
            raise RuntimeError("get_cpu_backup: x's tag is released without "
                               "a backup (enable_cpu_backup=False)")
        if ret == -_errno.EXDEV:
            out = torch.empty(nbytes, dtype=torch.uint8)
            _lib.check(L.gs_mm_backup_read(mm, ptr, nbytes,
                                           ctypes.c_void_p(out.data_ptr())),
                       "get_cpu_backup")
            return out.view(x.dtype).view(x.shape)
        _lib.check(ret, "get_cpu_backup")
        buf = (ctypes.c_uint8 * nbytes).from_address(host.value)
        ans = torch.frombuffer(buf, dtype=torch.uint8)
        ans = ans.view(x.dtype).view(x.shape)
        return ans if zero_copy else ans.clone()

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

    def outside(self) -> tuple[int, int]:
        """What this process's PyTorch holds on its GPU outside the
        regions' pools (issue 34 item 5): (reserved memory of PyTorch's
        default pools, graph pools and other private pools), bytes, from
        torch.cuda.memory_snapshot(); (0, 0) when torch is not in use
        here (not imported, or CUDA not initialised)."""
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None) if torch is not None else None
        if cuda is None or not getattr(cuda, "is_initialized",
                                       lambda: False)():
            return 0, 0
        snap = getattr(cuda, "memory_snapshot", None)
        if snap is None:
            return 0, 0
        with self._lock:
            ours = [p.id for ps in self._pools.values() for p in ps]
            ours += [p.id for p in self._foreign.values()
                     if hasattr(p, "id")]
        dev = _lib.lib().gpusleep_device()
        return outside_of(snap(), ours, dev if dev >= 0 else None)

    def report_outside(self) -> tuple[int, int]:
        """Tell this process's agent what PyTorch holds outside the regions
        (outside()): the module shows it (gpusleepctl status, left on the
        GPU by class) with the agent's next report. Called after each
        pause() and resume(); call it after your own allocations change.
        Returns the figures sent."""
        torch_b, graph_b = self.outside()
        _lib.lib().gpusleep_set_outside(torch_b, graph_b)
        return torch_b, graph_b

    @contextlib.contextmanager
    def acquire(self, nbytes: Optional[int] = None, *,
                gpu: Optional[GpuRef] = None, priority: int = 0,
                timeout: Optional[float] = None,
                tags: Optional[list[str]] = None
                ) -> Iterator[Optional[Lease]]:
        """The trainer's side of an RL step (docs/arbiter.md), its own
        memory included:

            with torch_memory_saver.acquire():
                train_step()

        takes nbytes on the trainer's GPU from the other tenants (default:
        what its released tags need back: their size as the memory
        manager has them), in a Lease; resumes the trainer's tags (tags;
        None: what is released); and at the block's end releases them
        again (backups as their policy says) and gives the lease back,
        which resumes the engines. gpu: default this process's device
        (its UUID, as its agent reports it). errors.Shortfall when the
        other tenants cannot free enough (nothing held, nothing resumed).
        Yields the Lease (None when nothing had to be taken: nothing of
        the trainer's was released)."""
        from .arbiter import acquire as _acquire
        names = self._tags(tags) if tags is not None else None
        if nbytes is None:
            nbytes = self._released_size(names)
        if gpu is None:
            gpu = self._gpu_uuid()
        lease = _acquire(gpu, nbytes, priority, timeout) if nbytes else None
        try:
            if self._released_size(names):
                self._op(False, tags)	# the trainer's memory back
            yield lease
            self._op(True, tags)	# and released again, by its policy
        finally:
            if lease is not None:
                lease.__exit__(None, None, None)	# the engines wake

    def _released_size(self, names: Optional[list[str]]) -> int:
        """Bytes the released tags (of names; None: all) map back."""
        mm = _lib.lib().gpusleep_mm()
        if not mm:
            return 0
        total = 0
        for t in names if names is not None else self._domain_tags():
            info = _lib.gs_mm_tag_info()
            if _lib.lib().gs_mm_tag_info(mm, self._mask(t),
                                         ctypes.byref(info)) == 0 and \
                    info.paused:
                total += info.chunk_bytes - info.mapped_bytes
        return total

    def _gpu_uuid(self) -> bytes:
        mm = _lib.lib().gpusleep_mm()
        if not mm:
            raise RuntimeError("torch_memory_saver.acquire: nothing "
                               "allocated yet: no GPU known; pass gpu=")
        out = (ctypes.c_uint8 * 16)()
        _lib.check(_lib.lib().gs_mm_gpu_uuid(mm, out), "gpu uuid")
        return bytes(out)

    def release_pools(self) -> None:
        """Drop this process's MemPools, then their allocators, in that
        order (a MemPool destroyed after its pluggable allocator calls
        into freed memory): for a worker's shutdown before the
        interpreter's finalization (vLLM's Worker.shutdown). The domain
        and the memory manager stay; a later region makes new pools."""
        with self._lock:
            pools = [p for ps in self._pools.values() for p in ps]
            pools += list(self._foreign.values())
            self._pools.clear()
            self._foreign.clear()
            self._owner.clear()
        pools.clear()
        gc.collect()
        with self._lock:
            self._allocators.clear()

    def close(self) -> None:
        """Stop the agent thread and close the domain (tests)."""
        if self._agent:
            _lib.lib().gpusleep_agent_stop()
            self._agent = False
        if self._engine is not None:
            self._engine.close()
            self._engine = None


torch_memory_saver = TorchMemorySaver()

def outside_of(segments: Iterable[dict[str, Any]], ours: Iterable[Any],
               device: Optional[int] = None) -> tuple[int, int]:
    """(PyTorch's default pools' reserved bytes, other private pools'
    bytes: graph pools and MemPools not ours) of a
    torch.cuda.memory_snapshot(), leaving out the segments of the pools
    in ours (the regions'); device: only that device's segments."""
    own = {tuple(p) for p in ours}
    default = private = 0
    for seg in segments:
        if device is not None and seg.get("device", device) != device:
            continue
        pid = tuple(seg.get("segment_pool_id") or (0, 0))
        size = int(seg.get("total_size", 0))
        if pid in own:
            continue
        if pid == (0, 0):
            default += size
        else:
            private += size
    return default, private


# Module-level spellings, for `import gpusleep.torch_memory_saver as tms`.
region = torch_memory_saver.region
pause = torch_memory_saver.pause
resume = torch_memory_saver.resume
configure = torch_memory_saver.configure


@contextlib.contextmanager
def configure_subprocess() -> Iterator[None]:
    """torch_memory_saver's: LD_PRELOAD the preload hook library in the
    processes started inside (SGLang's schedulers), for the CUDA runtime
    in use; restored after."""
    lib = hook_library("preload")
    old = os.environ.get("LD_PRELOAD")
    os.environ["LD_PRELOAD"] = f"{lib}:{old}" if old else lib
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LD_PRELOAD", None)
        else:
            os.environ["LD_PRELOAD"] = old


def __getattr__(name: str) -> bool:
    if name == "enabled":
        return torch_memory_saver.enabled
    raise AttributeError(name)
