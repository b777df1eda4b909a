# SPDX-License-Identifier: LGPL-2.1-or-later
"""Host-staged weight updates (docs/weight-updates.md): the trainer writes
the new weights into shared memory (a tmpfs, /dev/shm) as one safetensors
file, each tensor with its dtype and shape; the engine loads them into its
parameters, which resume(["weights"]) brought back at their addresses;
the shared memory is removed on every path.

    staged = gpusleep.weights.stage(model.state_dict())   # the trainer
    with staged:
        sleep.resume_weights()
        engine.update_weights_from_disk(staged.path)       # SGLang
    # removed here, whether the load returned or raised

SGLang's update_weights_from_disk(path) loads a directory of
*.safetensors files (its DefaultModelLoader), so staged.path is what it
takes. An engine without such a loader reads the file with load(path),
e.g. vLLM's model.load_weights(t.to_torch() for t in load(path)).

The contract:
- stage(tensors, directory): a fresh directory gpusleep-w-XXXXXXXX under
  directory (mode 0700) holding model.safetensors: the safetensors
  format (a little-endian u64 header length, a JSON header naming each
  tensor's dtype, shape and data offsets, then the data), the tensors in
  the order given. Tensors are torch.Tensors (on any device: copied to
  the host), numpy arrays, or memoryviews with a format and a shape
  (memoryview(buf).cast("f", [2, 3])); plain bytes are refused (they have
  no dtype). dtypes: those of DTYPES.
- the directory is removed: by StagedWeights.remove() or the end of its
  with block (returned or raised); by stage() itself when writing fails
  (nothing is left half-written); by load(path, remove=True) (the reader
  consumes it); when the StagedWeights is collected or the interpreter
  exits; and, for a writer killed before any of these, by the next
  stage() or sweep() in that directory (the writer holds a lock on the
  directory while it lives, so only the directories of dead writers are
  swept).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import math
import mmap
import os
import shutil
import struct
import tempfile
import weakref
from typing import Any, Iterable, Iterator, Mapping, Optional, Union

PREFIX = "gpusleep-w-"
FILE = "model.safetensors"
LOCK = ".writer.lock"

# safetensors dtype -> bytes per element
DTYPES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
# torch's dtype names, numpy's dtype.str, memoryview formats -> safetensors
_TORCH = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
    "int16": "I16", "uint16": "U16", "float16": "F16", "bfloat16": "BF16",
    "int32": "I32", "uint32": "U32", "float32": "F32",
    "int64": "I64", "uint64": "U64", "float64": "F64",
}
_NUMPY = {
    "|b1": "BOOL", "|u1": "U8", "|i1": "I8", "<i2": "I16", "<u2": "U16",
    "<f2": "F16", "<i4": "I32", "<u4": "U32", "<f4": "F32", "<i8": "I64",
    "<u8": "U64", "<f8": "F64",
}
_FORMATS = {
    "?": "BOOL", "B": "U8", "b": "I8", "h": "I16", "H": "U16", "e": "F16",
    "i": "I32", "I": "U32", "f": "F32", "q": "I64", "Q": "U64", "d": "F64",
}
_FORMATS.update({"l": "I64", "L": "U64"} if struct.calcsize("l") == 8
                else {"l": "I32", "L": "U32"})
_TO_TORCH = {v: k for k, v in _TORCH.items()}

Tensors = Union[Mapping[str, Any], Iterable["tuple[str, Any]"]]


class StagedTensor:
    """One tensor of a staged file: name, dtype (a safetensors name, as
    in DTYPES), shape, data (its bytes, a read-only memoryview into the
    mapped file)."""

    def __init__(self, name: str, dtype: str, shape: tuple[int, ...],
                 data: memoryview) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.data = data

    @property
    def nbytes(self) -> int:
        return len(self.data)

    def to_torch(self, device: Optional[str] = None) -> Any:
        """A torch.Tensor of this dtype and shape (a copy of the data;
        on device when given)."""
        import torch
        t = torch.frombuffer(bytearray(self.data),
                             dtype=getattr(torch, _TO_TORCH[self.dtype]))
        t = t.reshape(self.shape)
        return t.to(device) if device is not None else t

    def __repr__(self) -> str:
        return (f"StagedTensor({self.name!r}, {self.dtype}, "
                f"{list(self.shape)}, {self.nbytes} bytes)")


def _remove(path: str, lockfd: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    if lockfd >= 0:
        try:
            os.close(lockfd)
        except OSError:
            pass


class StagedWeights:
    """The weights stage() wrote: path (the directory, what the engine
    loads), file (its model.safetensors), tensors (name -> (dtype, shape)),
    nbytes (of tensor data). remove() or the end of a with block removes
    the directory; so does collecting the object."""

    def __init__(self, path: str, tensors: dict[str, tuple[str, tuple[int, ...]]],
                 nbytes: int, lockfd: int) -> None:
        self.path = path
        self.file = os.path.join(path, FILE)
        self.tensors = tensors
        self.nbytes = nbytes
        self._finalizer = weakref.finalize(self, _remove, path, lockfd)

    @property
    def removed(self) -> bool:
        return not self._finalizer.alive or not os.path.exists(self.path)

    def remove(self) -> None:
        """Remove the directory and its file (again: nothing to do, even
        after the reader removed it)."""
        self._finalizer()

    def __enter__(self) -> StagedWeights:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return (f"StagedWeights({self.path!r}, {len(self.tensors)} tensors, "
                f"{self.nbytes} bytes{', removed' if self.removed else ''})")


def _as_raw(name: str, t: Any) -> tuple[str, tuple[int, ...], memoryview,
                                        Any]:
    """(dtype, shape, the bytes, what keeps them alive) of one tensor."""
    if isinstance(t, (bytes, bytearray)):
        raise TypeError(f"tensor {name!r}: {type(t).__name__} has no dtype "
                        "or shape; give a torch.Tensor, a numpy array or a "
                        "memoryview with them (memoryview(b).cast('f', "
                        "[rows, cols]))")
    if hasattr(t, "data_ptr") and hasattr(t, "element_size"):	# torch
        dt = str(t.dtype).replace("torch.", "")
        if dt not in _TORCH:
            raise TypeError(f"tensor {name!r}: dtype {t.dtype} has no "
                            "safetensors name (gpusleep.weights.DTYPES)")
        t = t.detach()
        if str(t.device) != "cpu":
            t = t.cpu()
        t = t.contiguous()
        n = t.numel() * t.element_size()
        raw = (ctypes.c_char * n).from_address(t.data_ptr()) if n else b""
        return _TORCH[dt], tuple(int(d) for d in t.shape), \
            memoryview(raw).cast("B"), t
    if hasattr(t, "__array_interface__") and hasattr(t, "dtype"):  # numpy
        key = t.dtype.str
        if key not in _NUMPY:
            raise TypeError(f"tensor {name!r}: numpy dtype {t.dtype} "
                            f"({key}) has no safetensors name "
                            "(little-endian only; gpusleep.weights.DTYPES)")
        import numpy
        a = numpy.ascontiguousarray(t)
        return _NUMPY[key], tuple(int(d) for d in a.shape), \
            memoryview(a).cast("B") if a.nbytes else memoryview(b""), a
    try:
        mv = memoryview(t)
    except TypeError:
        raise TypeError(f"tensor {name!r}: {type(t).__name__} is not a "
                        "tensor (torch.Tensor, numpy array, or memoryview "
                        "with a format and a shape)") from None
    fmt = mv.format.lstrip("@=<")
    if fmt not in _FORMATS:
        raise TypeError(f"tensor {name!r}: memoryview format "
                        f"{mv.format!r} has no safetensors name")
    if not mv.c_contiguous:
        raise ValueError(f"tensor {name!r}: not C-contiguous")
    return _FORMATS[fmt], tuple(mv.shape or ()), mv.cast("B"), mv


def _writer_gone(path: str) -> bool:
    """The directory's writer has exited (its lock is free), or it has no
    lock file (an old or foreign directory: not ours to judge)."""
    try:
        fd = os.open(os.path.join(path, LOCK), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    finally:
        os.close(fd)


def sweep(directory: str = "/dev/shm") -> list[str]:
    """Remove the staging directories under directory whose writer has
    exited without removing them (killed); returns their paths. Only this
    user's: another user's are not removable here."""
    gone = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return gone
    for n in sorted(names):
        p = os.path.join(directory, n)
        if not n.startswith(PREFIX) or not os.path.isdir(p):
            continue
        try:
            if os.stat(p).st_uid != os.geteuid() or not _writer_gone(p):
                continue
        except OSError:
            continue
        shutil.rmtree(p, ignore_errors=True)
        if not os.path.exists(p):
            gone.append(p)
    return gone


def stage(tensors: Tensors, directory: str = "/dev/shm") -> StagedWeights:
    """Write tensors (a mapping or (name, tensor) pairs: a state_dict) as
    one safetensors file in a fresh directory under directory, a tmpfs
    the engine can read (its /dev/shm: the same host, the same IPC and
    mount namespace or a shared volume). Removes the directories of
    writers that died first (sweep). On any failure (a tensor of no known
    dtype, a full tmpfs) nothing is left and the error is raised."""
    sweep(directory)
    items = list(tensors.items()) if isinstance(tensors, Mapping) \
        else list(tensors)
    path = tempfile.mkdtemp(prefix=PREFIX, dir=directory)
    lockfd = -1
    try:
        # the lock file appears locked (a sweep never sees it free while
        # this process lives)
        tmp = os.path.join(path, LOCK + ".new")
        lockfd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR |
                         os.O_CLOEXEC, 0o600)
        fcntl.flock(lockfd, fcntl.LOCK_SH)
        os.rename(tmp, os.path.join(path, LOCK))
        header: dict[str, Any] = {}
        raws = []
        off = 0
        seen = set()
        for name, t in items:
            if not isinstance(name, str) or not name or name in seen or \
                    name == "__metadata__":
                raise ValueError(f"tensor name {name!r}: names are "
                                 "distinct non-empty strings")
            seen.add(name)
            dt, shape, raw, keep = _as_raw(name, t)
            if len(raw) != math.prod(shape) * DTYPES[dt]:
                raise ValueError(f"tensor {name!r}: {len(raw)} bytes for "
                                 f"{dt} {list(shape)}")
            header[name] = {"dtype": dt, "shape": list(shape),
                            "data_offsets": [off, off + len(raw)]}
            raws.append((raw, keep))
            off += len(raw)
        header["__metadata__"] = {"format": "pt", "writer": "gpusleep"}
        hdr = json.dumps(header, separators=(",", ":")).encode()
        hdr += b" " * (-len(hdr) % 8)	# the data 8-byte aligned
        with open(os.path.join(path, FILE), "wb") as f:
            f.write(struct.pack("<Q", len(hdr)))
            f.write(hdr)
            for raw, _ in raws:
                f.write(raw)
    except BaseException:
        _remove(path, lockfd)
        raise
    return StagedWeights(path, {n: (h["dtype"], tuple(h["shape"]))
                                for n, h in header.items()
                                if n != "__metadata__"}, off, lockfd)


def _parse(buf: memoryview, file: str) -> Iterator[StagedTensor]:
    if len(buf) < 8:
        raise ValueError(f"{file}: not a safetensors file (too short)")
    (n,) = struct.unpack_from("<Q", buf, 0)
    if n > len(buf) - 8:
        raise ValueError(f"{file}: header of {n} bytes past the end")
    try:
        header = json.loads(bytes(buf[8:8 + n]))
    except ValueError as e:
        raise ValueError(f"{file}: header is not JSON: {e}") from None
    data = buf[8 + n:]
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (b, e) = h["dtype"], tuple(h["shape"]), h["data_offsets"]
        if dt not in DTYPES or not 0 <= b <= e <= len(data) or \
                e - b != math.prod(shape) * DTYPES[dt]:
            raise ValueError(f"{file}: tensor {name!r}: {dt} {list(shape)} "
                             f"at [{b}, {e}) does not fit the file")
        yield StagedTensor(name, dt, shape, data[b:e])


def load(path: str, remove: bool = False) -> list[StagedTensor]:
    """The tensors of a staged directory (or of a safetensors file), in
    file order, their data mapped from it (no copy). remove: remove the
    directory (or the file) now, having mapped it (the mapping stays
    valid; its memory is freed when the last StagedTensor goes), also
    when reading fails."""
    file = os.path.join(path, FILE) if os.path.isdir(path) else path
    try:
        with open(file, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            mm = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ) if size \
                else b""
        return list(_parse(memoryview(mm), file))
    finally:
        if remove:
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) \
                else _unlink(path)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
