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
  without calling its allocator; empty_cache() gives a pool's cached
  blocks back to its allocator only when no thread allocates to it;
- expandable segments (PYTORCH_CUDA_ALLOC_CONF or
  torch.cuda.memory._set_allocator_settings) cannot serve a pool with its
  own allocator: "MemPool doesn't currently support expandable_segments";
- torch.cuda.graph(g, pool=id) allocates the capture from that pool;
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
_pools = {}			# id -> MemPool
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


class MemPool:
    def __init__(self, allocator=None, _private=False):
        self.allocator = allocator
        self.device = cuda.current_device()
        self.id = (0, next(_ids)) if not _private else (next(_ids), 0)
        self.cached = []		# freed blocks, served again
        self.calls = 0			# allocator calls
        _pools[self.id] = self


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

    def pool(self):
        return self.pool_id

    def replay(self):
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
        return MemPool(None, _private=True).id

    @staticmethod
    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        dev = cuda.current_device() if device is None else int(device)
        if pool.device != dev:
            # not found on that device: a private pool of PyTorch's own
            pool = MemPool(None, _private=True)
            pool.device = dev
        with _lock:
            if any(p is pool for p, _ in _active):
                raise RuntimeError("beginAllocateToPool: already recording "
                                   f"to mempool_id {pool.id}")
            entry = (pool, threading.get_ident())
            _active.append(entry)
        try:
            yield
        finally:
            with _lock:
                _active.remove(entry)

    @staticmethod
    @contextlib.contextmanager
    def graph(g, pool=None, stream=None, capture_error_mode="global"):
        if pool is None:
            p = MemPool(None, _private=True)
        else:
            p = _pools.get(tuple(pool))
            if p is None:
                raise RuntimeError(f"graph: no pool {pool}")
        g.pool_id = p.id
        cuda.graphs.append((g, p.id, capture_error_mode))
        with cuda.use_mem_pool(p, device=p.device):
            yield

    @staticmethod
    def empty_cache():
        with _lock:
            busy = {id(p) for p, _ in _active}
            for pool in _pools.values():
                if id(pool) in busy or pool.allocator is None:
                    continue
                for t in pool.cached:
                    pool.allocator.free(t.ptr, t.nbytes, pool.device, None)
                pool.cached = []


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
        raise OutOfMemoryError(f"CUDA out of memory: tried to allocate "
                               f"{nbytes} bytes (pool {pool.id})")
    return Tensor(p, nbytes, pool, dev)


def free(t):
    """The tensor's last reference dropped: its block goes to its pool's
    cache (PyTorch's own memory: nothing to do here)."""
    if t.pool is not None and t.ptr:
        t.pool.cached.append(t)
