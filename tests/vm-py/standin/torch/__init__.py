# SPDX-License-Identifier: GPL-2.0
"""A stand-in for the torch calls gpusleep.torch_memory_saver makes, for
the tests of the installed distributions (tests/vm-py/test_py_dist.py):
CUDAPluggableAllocator(path, alloc_fn, free_fn) loads the two symbols;
MemPool(allocator) has an id; use_mem_pool(pool) routes the calling
thread's allocations to the pool, whose allocator serves new memory (at
once here: no caching); empty(n) is a new tensor of n bytes. When
tests/host/fake_torch exists (the host tests' fuller stand-in), the tests
use that one instead."""

import contextlib
import ctypes
import itertools
import threading

__version__ = "0.0-stand-in"
_ids = itertools.count(1)
_tls = threading.local()
_settings = {}


class _Alloc:
    def __init__(self, path, alloc_fn, free_fn):
        lib = ctypes.CDLL(path)
        self.malloc = getattr(lib, alloc_fn)
        self.malloc.restype = ctypes.c_void_p
        self.malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int,
                                ctypes.c_void_p]
        self.alloc_fn = alloc_fn

    def allocator(self):
        return self


class MemPool:
    def __init__(self, allocator=None):
        self.allocator = allocator
        self.id = (0, next(_ids))


class Tensor:
    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes

    def data_ptr(self):
        return self.ptr or 0


class _Memory:
    CUDAPluggableAllocator = _Alloc

    @staticmethod
    def _set_allocator_settings(s):
        for kv in s.split(","):
            if ":" in kv:
                k, v = kv.split(":", 1)
                _settings[k] = v

    @staticmethod
    def _get_allocator_settings():
        return dict(_settings)


def _stack():
    if not hasattr(_tls, "pools"):
        _tls.pools = []
    return _tls.pools


class cuda:
    memory = _Memory
    MemPool = MemPool

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    @contextlib.contextmanager
    def use_mem_pool(pool, device=None):
        _stack().append(pool)
        try:
            yield
        finally:
            _stack().pop()


def empty(nbytes, device=None):
    pools = _stack()
    if not pools or pools[-1].allocator is None:
        return Tensor(None, nbytes)		# PyTorch's own allocator
    p = pools[-1].allocator.malloc(nbytes, 0, None)
    if not p:
        raise RuntimeError(f"CUDA out of memory: {nbytes} bytes")
    return Tensor(p, nbytes)
