# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the parts of torch that gpusleep.torch_memory_saver and
the GPU check's dry run call, with the behaviour of PyTorch's caching
allocator that matters to them (PyTorch 2.x, c10/cuda/CUDACachingAllocator
and torch/cuda/memory.py, as read; no code of theirs):

- CUDAPluggableAllocator(path, alloc_fn, free_fn) loads the two symbols;
- MemPool(allocator) belongs to the device current at its creation; its
  id is a tuple; graph_pool_handle() is an id of a pool of PyTorch's own
  allocator;
- use_mem_pool(pool, device) routes the calling thread's allocations on
  that device to the pool; a pool that is not on that device is not found
  there and PyTorch's own allocator serves them (the silent fallback);
  entering a pool that is already being allocated to (another thread, or
  the same one twice) raises "already recording to mempool_id"; with
  several pools active on one thread, the first entered serves;
- a pool caches what is freed to it (free() here) and serves it again
  without calling its allocator. Its memory goes back to its allocator
  only when PyTorch gives memory back: empty_cache() (emptyCache ->
  release_cached_blocks) releases the default pools' blocks (PyTorch's
  own, not modelled) and, of the private pools (MemPools, graph pools),
  only those whose use count fell to 0 (graph_pools_freeable): a MemPool
  holds one count while it lives (createOrIncrefPool; its destructor
  releasePool), use_mem_pool and a capture one more while entered
  (beginAllocateToPool / releasePool), a graph one from its capture until
  it is reset (pytorch#133327, #133602). So a live pool keeps its cached
  blocks whatever empty_cache() is asked; a pool dropped, or a reset
  graph's, gives back its whole cached segments. While any thread
  allocates to a pool or captures, empty_cache() does nothing
  (pytorch#158152). Out of memory inside a pool, PyTorch frees nothing
  before raising (its release_cached_blocks retry needs no pool or
  capture under way; the release of one oversize cached block needs
  max_split_size_mb, not modelled);
- expandable segments (PYTORCH_CUDA_ALLOC_CONF or
  torch.cuda.memory._set_allocator_settings) cannot serve a pool with its
  own allocator: "MemPool doesn't currently support expandable_segments";
- torch.cuda.graph(g, pool=id) allocates the capture from that pool;
- PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (read at start, as
  PyTorch chooses its allocator backend once): that backend has no pools,
  MemPool() and a capture into a pool raise "cudaMallocAsync does not
  yet support createOrIncrefPool" (CUDAAllocator's default);
  cuda.get_allocator_backend() says which backend runs;
- an allocator returning NULL raises torch.OutOfMemoryError;
- frombuffer(buf, dtype=uint8) is a CPU tensor over buf (clone(): a copy).

Tensors are Tensor objects: ptr is the device address for memory of a
pluggable allocator, None for PyTorch's own allocator.
"""

import contextlib
import ctypes
import itertools
import os
import threading

__version__ = "0.0-stand-in"
_ids = itertools.count(1)
_lock = threading.RLock()
_tls = threading.local()
_pools = {}			# id -> _Pool: c10's graph_pools
_handles = set()		# ids from graph_pool_handle(), no pool yet
_active = []			# [(pool, thread ident)] in order of entry
_settings = {}


class OutOfMemoryError(RuntimeError):
    pass


def _parse_conf(s):
    for kv in (s or "").split(","):
        if ":" in kv:
            k, v = kv.split(":", 1)
            _settings[k.strip()] = v.strip()


_parse_conf(os.environ.get("PYTORCH_CUDA_ALLOC_CONF",
                           os.environ.get("PYTORCH_ALLOC_CONF")))
# chosen once, at start
_backend = _settings.get("backend", "native")


class _Alloc:
    def __init__(self, path, alloc_fn, free_fn):
        lib = ctypes.CDLL(path)
        self.malloc = getattr(lib, alloc_fn)
        self.free = getattr(lib, free_fn)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int,
                                ctypes.c_void_p]
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t,
                              ctypes.c_int, ctypes.c_void_p]
        self.alloc_fn = alloc_fn

    def allocator(self):
        return self


class _Pool:
    """c10's PrivatePool: the cached blocks of one pool id, its allocator
    (None: PyTorch's own), the use count that keeps them."""

    def __init__(self, pid, allocator, device):
        self.id, self.allocator, self.device = pid, allocator, device
        self.use_count = 0
        self.cached = []		# freed blocks, served again
        self.calls = 0			# allocator calls
        self.segments = 0		# of them not freed back yet


def _incref(pid, allocator=None, device=None):
    """createOrIncrefPool"""
    if _backend == "cudaMallocAsync":
        raise RuntimeError("cudaMallocAsync does not yet support "
                           "createOrIncrefPool. If you need it, please "
                           "file an issue describing your use case.")
    with _lock:
        p = _pools.get(pid)
        if p is None:
            p = _pools[pid] = _Pool(pid, allocator, device)
        p.use_count += 1
        return p


def _decref(pid):
    """releasePool: at 0 the pool is freeable (empty_cache releases it)"""
    with _lock:
        p = _pools.get(pid)
        if p is not None and p.use_count > 0:
            p.use_count -= 1


class MemPool:
    def __init__(self, allocator=None, _private=False):
        self.allocator = allocator
        self.device = cuda.current_device()
        self.id = (0, next(_ids)) if not _private else (next(_ids), 0)
        self._pool = _incref(self.id, allocator, self.device)

    def use_count(self):
        return self._pool.use_count

    @property
    def cached(self):
        return self._pool.cached

    @property
    def calls(self):
        return self._pool.calls

    def __del__(self):
        try:
            _decref(self.id)
        except Exception:	# interpreter shutdown
            pass


uint8 = "torch.uint8"


class Tensor:
    """A CUDA tensor of nbytes bytes (dtype uint8, one dimension)."""
    dtype = uint8

    def __init__(self, ptr, nbytes, pool, device):
        self.ptr, self.nbytes, self.pool, self.device = \
            ptr, nbytes, pool, device
        self.shape = (nbytes,)
        self.is_cuda = True

    def data_ptr(self):
        return self.ptr or 0

    def is_contiguous(self):
        return True

    def stride(self):
        return (1,)

    def numel(self):
        return self.nbytes

    def element_size(self):
        return 1


class CpuTensor:
    """A CPU tensor over a buffer (torch.frombuffer), or a copy (clone)."""
    dtype = uint8
    is_cuda = False

    def __init__(self, buf):
        self.buf = memoryview(buf).cast("B")
        self.shape = (len(self.buf),)
        self.device = "cpu"

    def view(self, what):
        return self		# uint8 to uint8, (n,) to (n,)

    def clone(self):
        return CpuTensor(bytearray(self.buf))

    def data_ptr(self):
        import ctypes
        return ctypes.addressof(ctypes.c_char.from_buffer(self.buf)) \
            if not self.buf.readonly else 0

    def tobytes(self):
        return self.buf.tobytes()


def frombuffer(buf, dtype=uint8):
    assert dtype == uint8, dtype
    return CpuTensor(buf)


class _Memory:
    CUDAPluggableAllocator = _Alloc

    @staticmethod
    def _set_allocator_settings(s):
        _parse_conf(s)

    @staticmethod
    def _get_allocator_settings():
        return dict(_settings)


class CUDAGraph:
    def __init__(self):
        self.pool_id = None
        self._holds = False

    def pool(self):
        return self.pool_id

    def replay(self):
        pass

    def reset(self):
        """The graph gives up its pool (releasePool)."""
        if self._holds:
            self._holds = False
            _decref(self.pool_id)

    def __del__(self):
        try:
            self.reset()
        except Exception:
            pass


class Stream:
    def __init__(self, device=None):
        self.device = device

    def query(self):
        return True

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass


def _pool_for(device):
    """The pool serving the calling thread on device: the first entered."""
    me = threading.get_ident()
    with _lock:
        for pool, tid in _active:
            if tid == me and pool.device == device:
                return pool
    return None


class cuda:
    memory = _Memory
    MemPool = MemPool
    CUDAGraph = CUDAGraph
    Stream = Stream
    OutOfMemoryError = OutOfMemoryError
    graphs = []
    _device = 0

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_allocator_backend():
        return _backend

    @staticmethod
    def current_device():
        return getattr(_tls, "device", cuda._device)

    @staticmethod
    def set_device(d):
        _tls.device = int(getattr(d, "index", d) or 0)

    @staticmethod
    @contextlib.contextmanager
    def device(d):
        old = cuda.current_device()
        cuda.set_device(d)
        try:
            yield
        finally:
            cuda.set_device(old)

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def graph_pool_handle():
        """A fresh id; the pool is made by the first capture into it."""
        pid = (next(_ids), 0)
        _handles.add(pid)
        return pid

    @staticmethod
    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        dev = cuda.current_device() if device is None else int(device)
        if pool.device != dev:
            # not found on that device: a private pool of PyTorch's own
            pool = MemPool(None, _private=True)
            pool.device = pool._pool.device = dev
        with cuda._allocate_to(pool._pool):
            yield

    @staticmethod
    @contextlib.contextmanager
    def _allocate_to(p):
        """beginAllocateToPool .. endAllocateToPool + releasePool: the
        calling thread's allocations on p's device go to p, which holds
        one more use meanwhile."""
        with _lock:
            if any(q is p for q, _ in _active):
                raise RuntimeError("beginAllocateToPool: already recording "
                                   f"to mempool_id {p.id}")
            entry = (p, threading.get_ident())
            _active.append(entry)
            p.use_count += 1
        try:
            yield
        finally:
            with _lock:
                _active.remove(entry)
            _decref(p.id)

    @staticmethod
    @contextlib.contextmanager
    def graph(g, pool=None, stream=None, capture_error_mode="global"):
        if pool is None:
            pid = (next(_ids), 0)
            p = _incref(pid, None, cuda.current_device())
        else:
            pid = tuple(pool)
            if pid not in _pools and pid not in _handles:
                raise RuntimeError(f"graph: no pool {pool}")
            p = _incref(pid, None, cuda.current_device())
        # the graph holds its pool until it is reset
        g.pool_id, g._holds = p.id, True
        cuda.graphs.append((g, p.id, capture_error_mode))
        with cuda._allocate_to(p):
            yield

    @staticmethod
    def empty_cache():
        """release_cached_blocks: of the private pools, those whose use
        count fell to 0, their cached segments back to their allocator
        (a pool with nothing left is forgotten); nothing while a thread
        allocates to a pool or captures."""
        with _lock:
            if _active:
                return
            for pid, pool in list(_pools.items()):
                if pool.use_count:
                    continue
                for t in pool.cached:
                    if pool.allocator is not None:
                        pool.allocator.free(t.ptr, t.nbytes, pool.device,
                                            None)
                    pool.segments -= 1
                pool.cached = []
                if pool.segments <= 0:
                    del _pools[pid]


def empty(nbytes, device=None, dtype=None):
    """A new tensor of nbytes, as the caching allocator serves it; with a
    dtype (uint8), a CPU tensor (torch.empty(n, dtype=torch.uint8))."""
    if dtype is not None:
        return CpuTensor(bytearray(nbytes))
    dev = cuda.current_device() if device is None else int(device)
    pool = _pool_for(dev)
    if pool is None or pool.allocator is None:
        return Tensor(None, nbytes, pool, dev)	# PyTorch's own allocator
    if _settings.get("expandable_segments", "False") == "True":
        raise RuntimeError("MemPool doesn't currently support "
                           "expandable_segments.")
    for i, t in enumerate(pool.cached):
        if t.nbytes >= nbytes:
            del pool.cached[i]
            return Tensor(t.ptr, t.nbytes, pool, dev)
    pool.calls += 1
    p = pool.allocator.malloc(nbytes, dev, None)
    if not p:
        # inside a pool PyTorch frees nothing before raising
        raise OutOfMemoryError(f"CUDA out of memory: tried to allocate "
                               f"{nbytes} bytes (pool {pool.id})")
    pool.segments += 1
    return Tensor(p, nbytes, pool, dev)


def free(t):
    """The tensor's last reference dropped: its block goes to its pool's
    cache (PyTorch's own memory: nothing to do here)."""
    if t.pool is not None and t.ptr:
        t.pool.cached.append(t)
