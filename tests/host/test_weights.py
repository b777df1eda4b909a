#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""gpusleep.weights, the host-staged weight update (docs/weight-updates.md),
without the module: stage() writes one safetensors file (read back here
by this test's own parser: header, dtypes, shapes, offsets, bytes) from
typed tensors (memoryviews with a format and a shape; an object with
torch.Tensor's calls, on a device, is copied to the host), and refuses
plain bytes; load() gives them back; the staging directory is removed on
every path: the with block returning or raising, a failure while staging
(a refused tensor, a file-size limit hit mid-write), the reader's
load(remove=True), the object collected, and a writer killed with
SIGKILL (swept by the next stage(); a live writer's directory is kept).
Prints TAP."""

import array
import ctypes
import gc
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "vm-py"))
from gstest import Tap, check, raises, REPO  # noqa: E402
import gpusleep.weights as W  # noqa: E402

TESTS = ["stage: one safetensors file, dtypes, shapes and data as given",
         "load: the tensors back, in order, with dtype and shape",
         "a torch-like tensor on a device: copied to the host, BF16",
         "plain bytes or an unknown format: TypeError naming the tensor",
         "removed when the with block ends, and when it raises",
         "a failure while staging (refused tensor, file too big): nothing left",
         "load(remove=True): the reader removes it; data still readable",
         "collected without remove(): removed",
         "a writer killed: swept by the next stage; a live writer's kept"]
ENV = dict(os.environ, PYTHONPATH=os.path.join(REPO, "user", "python"),
           PYTHONDONTWRITEBYTECODE="1")


def staged_dirs(d):
    return sorted(n for n in os.listdir(d) if n.startswith(W.PREFIX))


def sample():
    f32 = memoryview(array.array("f", [1.5, -2, 3, 4, 5, 6.25])).cast(
        "B").cast("f", [2, 3])
    i64 = memoryview(array.array("q", [1, -2, 3, 1 << 40]))
    i16 = memoryview(array.array("h", [7, -8, 9]))
    flags = memoryview(bytes([1, 0])).cast("?")
    return {"layer.0.weight": f32, "step": i64, "short": i16, "mask": flags}


def parse(file):
    """The safetensors format, read here without gpusleep: u64 header
    size, JSON header, data."""
    with open(file, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    check((8 + n) % 8 == 0, f"data not 8-byte aligned: header {n}")
    return header, raw[8 + n:]


def stage_file(tmp):
    s = W.stage(sample(), tmp)
    try:
        check(os.path.dirname(s.path) == tmp and
              os.path.basename(s.path).startswith(W.PREFIX), s.path)
        check(os.stat(s.path).st_mode & 0o777 == 0o700, "mode 0700")
        header, data = parse(s.file)
        want = {"layer.0.weight": ("F32", [2, 3]), "step": ("I64", [4]),
                "short": ("I16", [3]), "mask": ("BOOL", [2])}
        names = [k for k in header if k != "__metadata__"]
        check(names == list(want), names)
        off = 0
        for name, (dt, shape) in want.items():
            h = header[name]
            check((h["dtype"], h["shape"]) == (dt, shape), f"{name}: {h}")
            b, e = h["data_offsets"]
            check(b == off, f"{name}: offsets {b}, {e}")
            check(data[b:e] == bytes(sample()[name].cast("B")),
                  f"{name}: data")
            off = e
        check(off == len(data) == s.nbytes, f"{off} {len(data)} {s.nbytes}")
        check(s.tensors["layer.0.weight"] == ("F32", (2, 3)), s.tensors)
        check(W.stage.__defaults__ == ("/dev/shm",), "default /dev/shm")
    finally:
        s.remove()


def load_back(tmp):
    with W.stage(sample(), tmp) as s:
        ts = W.load(s.path)
        check([t.name for t in ts] == list(sample()), repr(ts))
        for t in ts:
            mv = sample()[t.name]
            check(t.shape == tuple(mv.shape), repr(t))
            check(bytes(t.data) == bytes(mv.cast("B")), t.name)
        check(ts[0].dtype == "F32" and ts[0].nbytes == 24, repr(ts[0]))
        check(array.array("f", bytes(ts[0].data)).tolist() ==
              [1.5, -2, 3, 4, 5, 6.25], "F32 values")


class FakeTorchTensor:
    """What stage() calls on a torch.Tensor: dtype, shape, device,
    detach, cpu, contiguous, numel, element_size, data_ptr."""

    def __init__(self, data, shape, dtype, device):
        self.buf = ctypes.create_string_buffer(bytes(data), len(data))
        self.shape, self.dtype, self.device = shape, dtype, device
        self.copied = False

    def detach(self):
        return self

    def cpu(self):
        t = FakeTorchTensor(self.buf.raw, self.shape, self.dtype, "cpu")
        t.copied = True
        FakeTorchTensor.last = t
        return t

    def contiguous(self):
        return self

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return 2

    def data_ptr(self):
        return ctypes.addressof(self.buf)


def torch_like(tmp):
    data = bytes(range(12))
    t = FakeTorchTensor(data, (2, 3), "torch.bfloat16", "cuda:0")
    with W.stage([("w", t)], tmp) as s:
        check(FakeTorchTensor.last.copied, "copied to the host")
        (w,) = W.load(s.path)
        check((w.dtype, w.shape, bytes(w.data)) == ("BF16", (2, 3), data),
              repr(w))
    bad = FakeTorchTensor(data, (3,), "torch.complex64", "cpu")
    e = raises(TypeError, W.stage, {"c": bad}, tmp)
    check("'c'" in str(e) and "complex64" in str(e), str(e))
    check(staged_dirs(tmp) == [], staged_dirs(tmp))


def refused(tmp):
    e = raises(TypeError, W.stage, {"w": b"\x5a" * 16}, tmp)
    check("'w'" in str(e) and "no dtype" in str(e), str(e))
    e = raises(TypeError, W.stage, {"c": memoryview(b"ab").cast("c")}, tmp)
    check("'c'" in str(e) and "format" in str(e), str(e))
    raises(ValueError, W.stage, [("a", sample()["step"]),
                                 ("a", sample()["step"])], tmp)
    check(staged_dirs(tmp) == [], staged_dirs(tmp))


def with_block(tmp):
    with W.stage(sample(), tmp) as s:
        check(os.path.isfile(s.file), "written")
    check(not os.path.exists(s.path) and s.removed, "removed after with")
    try:
        with W.stage(sample(), tmp) as s:
            raise KeyError("the engine's load failed")
    except KeyError:
        pass
    check(not os.path.exists(s.path), "removed after an exception")
    s.remove()		# again: nothing to do
    check(staged_dirs(tmp) == [], staged_dirs(tmp))


def failure(tmp):
    # a tensor refused after two were accepted
    t = dict(sample(), bad=b"raw")
    raises(TypeError, W.stage, t, tmp)
    check(staged_dirs(tmp) == [], f"left: {staged_dirs(tmp)}")
    # the file cannot grow past 64 bytes (a full tmpfs, as the writer sees
    # it): EFBIG mid-write, in a child with RLIMIT_FSIZE
    code = ("import resource, signal, sys, array; "
            "import gpusleep.weights as W; "
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)); "
            "big = memoryview(array.array('f', [0.0] * 4096)); "
            "\ntry:\n    W.stage({'big': big}, sys.argv[1])\n"
            "except OSError as e:\n    print('raised', e.errno)\n")
    p = subprocess.run([sys.executable, "-c", code, tmp], env=ENV,
                       capture_output=True, text=True)
    import errno
    check(p.stdout.split() == ["raised", str(errno.EFBIG)],
          p.stdout + p.stderr)
    check(staged_dirs(tmp) == [], f"left: {staged_dirs(tmp)}")


def reader_removes(tmp):
    s = W.stage(sample(), tmp)
    ts = W.load(s.path, remove=True)
    check(not os.path.exists(s.path), "the reader removed it")
    check(bytes(ts[1].data) == bytes(sample()["step"].cast("B")),
          "mapped data still readable")
    s.remove()		# the writer's remove after the reader's: nothing
    check(s.removed, repr(s))
    # a reader that fails to parse still removes
    d = os.path.join(tmp, W.PREFIX + "broken")
    os.mkdir(d)
    with open(os.path.join(d, W.FILE), "wb") as f:
        f.write(struct.pack("<Q", 1 << 40))
    raises(ValueError, W.load, d, remove=True)
    check(not os.path.exists(d), "removed after a failed read")


def collected(tmp):
    s = W.stage(sample(), tmp)
    path = s.path
    del s
    gc.collect()
    check(not os.path.exists(path), f"{path} left")


def killed(tmp):
    code = ("import os, sys, array; import gpusleep.weights as W; "
            "s = W.stage({'w': memoryview(array.array('f', [1.0]))}, "
            "sys.argv[1]); print(s.path, flush=True); sys.stdin.read(); "
            "s.remove()")
    dead = subprocess.Popen([sys.executable, "-c", code, tmp], env=ENV,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    live = subprocess.Popen([sys.executable, "-c", code, tmp], env=ENV,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        dpath = dead.stdout.readline().strip()
        lpath = live.stdout.readline().strip()
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        check(os.path.isdir(dpath), "a killed writer leaves its directory")
        with W.stage(sample(), tmp) as s:
            check(not os.path.exists(dpath), "swept by the next stage")
            check(os.path.isdir(lpath), "a live writer's directory kept")
            check(W.sweep(tmp) == [], "nothing more to sweep")
            check(os.path.isdir(s.path), "its own kept")
    finally:
        live.communicate("", timeout=60)
    check(live.returncode == 0 and not os.path.exists(lpath),
          "the live writer removed its own")
    check(staged_dirs(tmp) == [], staged_dirs(tmp))


def main():
    tap = Tap(TESTS)
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in zip(TESTS, [stage_file, load_back, torch_like,
                                    refused, with_block, failure,
                                    reader_removes, collected, killed]):
            tap.run(name, fn, tmp)
    tap.done()


if __name__ == "__main__":
    main()
