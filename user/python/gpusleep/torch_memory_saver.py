# SPDX-License-Identifier: LGPL-2.1-or-later
"""A drop-in for the surface engines call on torch_memory_saver.

    from torch_memory_saver import torch_memory_saver          # before
    from gpusleep.torch_memory_saver import torch_memory_saver # after

    with torch_memory_saver.region(tag="weights", enable_cpu_backup=True):
        model = load_model()
    with torch_memory_saver.region(tag="kv_cache"):
        kv_pools = allocate_kv_cache()
    torch_memory_saver.pause("kv_cache")      # or pause(): every tag
    torch_memory_saver.resume()               # exactly what is paused
    torch_memory_saver.enabled

Allocations are made by libgpusleep's PyTorch pluggable allocator
(gpusleep_malloc/gpusleep_free, docs/pytorch.md): region() sets its current
tag (gpusleep_set_tag) and the tag's policy (enable_cpu_backup: backed up to
host memory, else discarded and zero after resume), and installs the
allocator on first use when torch is imported and CUDA not yet initialised
(install_torch_allocator() does it explicitly; GPUSLEEP_TORCH_ALLOCATOR=0
turns that off).

pause() and resume() do not unmap memory behind the kernel's back: they
issue RELEASE / RESUME on the domain, from the engine fd, and drive the
engine's events (drain, cache reset, KV repair, resume scheduling) until the
operation ends; the memory is unmapped and remapped by this process's agent
thread (gpusleep_agent_start), exactly as when a trainer releases the domain
from outside. So the state a trainer sees (is_sleeping, released tags, sysfs)
always matches. The domain is the gpusleep.engine.Engine given to
configure(), or one made on first need, named $GPUSLEEP_DOMAIN_NAME or
"tms-PID". Call pause/resume from the thread that runs the engine's loop.
"""

import contextlib
import errno as _errno
import os
import sys
import threading
import warnings

from . import _lib, errors


class TorchMemorySaver:
    def __init__(self):
        self._engine = None
        self._policies = {}		# tag name -> backup?
        self._agent = False
        self._allocator = None
        self._user_disabled = False
        self._local = threading.local()
        self.tag_aliases = {}		# e.g. {"cuda_graph": "kv_cache"}

    # ------------------------------------------------------------ setup
    def configure(self, engine=None, **engine_kwargs):
        """Bind the domain: an Engine of this process, or the keyword
        arguments of a new one (name, gpu, prefix_caching,
        prefix_cache_reset, callbacks...). Returns the engine."""
        if self._engine is not None:
            raise RuntimeError("torch_memory_saver: already configured "
                               f"(domain {self._engine.id})")
        if engine is None:
            from .engine import Engine
            engine_kwargs.setdefault(
                "name", os.environ.get("GPUSLEEP_DOMAIN_NAME",
                                       f"tms-{os.getpid()}"))
            engine = Engine(**engine_kwargs)
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
    def enabled(self):
        """True when the memory saver works here: not disabled, the
        library loads and /dev/gpusleep exists."""
        if self._user_disabled:
            return False
        try:
            _lib.lib()
        except OSError:
            return False
        return os.path.exists("/dev/gpusleep")

    @enabled.setter
    def enabled(self, value):
        """False turns region/pause/resume into no-ops."""
        self._user_disabled = not value

    def install_torch_allocator(self):
        """Make libgpusleep PyTorch's CUDA allocator (before any CUDA use)."""
        if self._allocator is not None:
            return self._allocator
        import torch
        alloc = torch.cuda.memory.CUDAPluggableAllocator(
            _lib.path(), "gpusleep_malloc", "gpusleep_free")
        torch.cuda.memory.change_current_allocator(alloc)
        self._allocator = alloc
        return alloc

    def _maybe_install_allocator(self):
        if (self._allocator is not None or "torch" not in sys.modules
                or os.environ.get("GPUSLEEP_TORCH_ALLOCATOR") == "0"):
            return
        try:
            self.install_torch_allocator()
        except Exception as e:
            self._allocator = False	# do not retry
            warnings.warn(f"gpusleep: could not install the PyTorch "
                          f"allocator ({e}); call install_torch_allocator() "
                          f"before CUDA is initialised")

    # ------------------------------------------------------------ tags
    def _tag(self, tag):
        tag = self.tag_aliases.get(tag, tag)
        if tag not in _lib.TAG_NAMES:
            raise errors.InvalidRequest(
                _lib.R_INVALID, message=f"invalid tag {tag!r}; valid: "
                f"{list(_lib.TAG_NAMES)} (or set tag_aliases)")
        return tag

    def _apply_policies(self):
        L = _lib.lib()
        mm = L.gpusleep_mm()
        if not mm:
            # before the first allocation: the allocator reads its
            # policies from the environment when it makes its mm
            keep = [t for t in _lib.TAG_NAMES
                    if self._policies.get(t, t == "weights")]
            os.environ["GPUSLEEP_BACKUP_TAGS"] = ",".join(keep)
            return
        for t, backup in self._policies.items():
            p = _lib.GS_MM_BACKUP if backup else _lib.GS_MM_DISCARD
            ret = L.gs_mm_set_policy(mm, _lib.tags_to_mask([t]), p, 0)
            if ret < 0:
                raise OSError(-ret, f"tag {t}: setting its policy: "
                              f"{os.strerror(-ret)}")

    @contextlib.contextmanager
    def region(self, tag="weights", enable_cpu_backup=False):
        """Allocations inside go to tag; enable_cpu_backup: kept across
        pause (copied to host memory), else discarded (zero after resume)."""
        if not self.enabled:
            yield
            return
        L = _lib.lib()
        tag = self._tag(tag)
        self._maybe_install_allocator()
        self._policies[tag] = bool(enable_cpu_backup)
        self._apply_policies()
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        _lib.check(L.gpusleep_set_tag(tag.encode()), f"set_tag({tag!r})")
        stack.append(tag)
        try:
            yield
        finally:
            stack.pop()
            # back to the enclosing region's tag, or the safe default
            prev = stack[-1] if stack else "weights"
            L.gpusleep_set_tag(prev.encode())
            self._apply_policies()
            if self._engine is not None:
                self._ensure_agent()

    # -------------------------------------------------------- the agent
    def _ensure_agent(self):
        """Serve the domain with the allocator's memory, once it exists."""
        if self._agent or self._engine is None:
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

    def pause(self, tag=None):
        """Release tag (None = every tag) through the module; returns the
        operation's Result. Refusals raise gpusleep.errors exceptions."""
        if not self.enabled:
            return None
        eng = self.engine
        self._ensure_agent()
        return eng.release(self._tags(tag))

    def resume(self, tag=None):
        """Resume tag (None = exactly what is paused) through the module."""
        if not self.enabled:
            return None
        eng = self.engine
        self._ensure_agent()
        return eng.resume(self._tags(tag))

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


def __getattr__(name):
    if name == "enabled":
        return torch_memory_saver.enabled
    raise AttributeError(name)
