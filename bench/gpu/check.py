#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The GPU check of gpusleep's data plane (issue 15), in one PyTorch process.

Run by bench/gpu/check.sh on a machine with an NVIDIA GPU and PyTorch
(written for an H200, PyTorch 2.11, CUDA 13: one command of at most 10
minutes, no kernel modules). No module is needed: the adapter runs in
local mode (gpusleep.torch_memory_saver with GPUSLEEP_TMS_LOCAL=1), so
pause/resume go straight to the memory manager.

  1. a plain pinned copy, device to host and back (torch, pinned host
     memory, non_blocking copies): the baseline, measured in this run;
  2. weights (default 40 GiB, backed up) and KV (60 GiB, discarded)
     allocated through the adapter's regions, in 2 GiB tensors, plus a
     1 GiB "hot" weights tensor, a deterministic pattern in the weights;
  3. a CUDA graph captured in the cuda_graph tag (memory with the weights)
     and replayed: its output is the reference;
  4. kernels kept running until the release: a thread launches, on a side
     stream, writes of an increasing counter into the hot tensor and
     matmuls reading the weights and writing the KV; it stops launching
     when the release starts, with work still queued (no synchronise:
     the memory manager must wait for it);
  5. release (pause every tag): torch.cuda.mem_get_info must show at
     least 99% of the released bytes free; the memory manager's own
     verified free is reported;
  6. a second tensor takes 95% of what came free (PyTorch's own
     allocator), is written, freed and given back (empty_cache);
  7. resume: weights bit-identical, the hot tensor holds the last counter
     value launched (the backup waited for the kernels), KV reads zero,
     the graph replays to the reference output;
  8. figures: backup and restore GB/s (copy time reported by the memory
     manager) against the baseline (target: at least 90%; torch_memory_
     saver reaches about 10%), release and resume seconds per GiB.

Output: TAP lines (one per check, "not ok" on failure) and "# " figure
lines; --json FILE writes the figures. Exit status 1 if a check failed.

--dry-run runs the same sequence over the tests' stand-in libcuda without
torch (small sizes, device memory is host memory there; the graph and the
torch-specific steps are skipped and say so). It is part of make check
(tests/host/test_gpu_check.sh); its figures mean nothing.
"""

import argparse
import ctypes
import json
import os
import sys
import threading
import time

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(
    __file__)), "..", ".."))
GiB = 1 << 30
MiB = 1 << 20


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, what, why=""):
        self.n += 1
        if not cond:
            self.failed += 1
        print(f"{'ok' if cond else 'not ok'} {self.n} - {what}"
              f"{'' if cond or not why else ' # ' + why}", flush=True)
        return cond

    def skip(self, what, why):
        self.n += 1
        print(f"ok {self.n} - {what} # SKIP {why}", flush=True)

    def note(self, msg):
        print(f"# {msg}", flush=True)


# --------------------------------------------------------------- torch ops
class TorchOps:
    """The real thing: PyTorch on a GPU."""
    dry = False

    def __init__(self, args):
        import torch
        self.torch = torch
        self.dev = torch.device("cuda", args.device)
        torch.cuda.set_device(self.dev)
        torch.cuda.init()		# CUDA initialised before any region
        self.side = torch.cuda.Stream()
        self.chunk = GiB

    def mem_get_info(self):
        self.torch.cuda.synchronize()
        return self.torch.cuda.mem_get_info()[0]

    def pinned_copy(self, nbytes):
        t = self.torch
        d = t.empty(nbytes, dtype=t.uint8, device=self.dev)
        h = t.empty(nbytes, dtype=t.uint8, pin_memory=True)
        d.fill_(7)
        out = []
        for direction in ("d2h", "h2d"):
            best = None
            for _ in range(3):
                t.cuda.synchronize()
                t0 = time.perf_counter()
                if direction == "d2h":
                    h.copy_(d, non_blocking=True)
                else:
                    d.copy_(h, non_blocking=True)
                t.cuda.synchronize()
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
            out.append(nbytes / best / 1e9)
        del d, h
        t.cuda.empty_cache()
        return out

    def alloc(self, nbytes):
        return self.torch.empty(nbytes, dtype=self.torch.uint8,
                                device=self.dev)

    def _pattern(self, n32, base):
        t = self.torch
        i = t.arange(base, base + n32, dtype=t.int64, device=self.dev)
        return ((i * 2654435761 + 12345) & 0x7fffffff).to(t.int32)

    def fill_pattern(self, buf, seed):
        n32 = buf.numel() // 4
        v = buf.view(self.torch.int32)
        step = self.chunk // 4
        for off in range(0, n32, step):
            m = min(step, n32 - off)
            v[off:off + m].copy_(self._pattern(m, seed * (1 << 40) + off))

    def check_pattern(self, buf, seed):
        n32 = buf.numel() // 4
        v = buf.view(self.torch.int32)
        step = self.chunk // 4
        for off in range(0, n32, step):
            m = min(step, n32 - off)
            if not self.torch.equal(v[off:off + m],
                                    self._pattern(m, seed * (1 << 40) + off)):
                return False
        return True

    def all_value(self, buf, value):
        v = buf.view(self.torch.int32)
        step = self.chunk // 4
        for off in range(0, v.numel(), step):
            s = v[off:off + step]
            if not bool((s == value).all()):
                return False
        return True

    def start_work(self, hot, weights, kv):
        """Launch until stopped; returns a stop() giving the last value
        launched into hot (kernels may still be queued then)."""
        t = self.torch
        stop = threading.Event()
        state = {"n": 0}
        w = weights[0].view(t.float16)[: 4096 * 4096].view(4096, 4096)
        k = kv[0].view(t.float16)[: 4096 * 4096].view(4096, 4096)

        def loop():
            t.cuda.set_device(self.dev)
            with t.cuda.stream(self.side):
                while not stop.is_set():
                    state["n"] += 1
                    hot.view(t.int32).fill_(state["n"])
                    t.matmul(w, w, out=k)
                    time.sleep(0.001)
                # the last requests' kernels: a burst still queued when
                # the release starts
                for _ in range(64):
                    state["n"] += 1
                    hot.view(t.int32).fill_(state["n"])
                    t.matmul(w, w, out=k)
        th = threading.Thread(target=loop)
        th.start()

        def stopper():
            stop.set()
            th.join()
            return state["n"], not self.side.query()
        return stopper

    def take(self, nbytes):
        t = self.torch
        x = t.empty(nbytes, dtype=t.uint8, device=self.dev)
        x.fill_(1)
        t.cuda.synchronize()
        del x
        t.cuda.empty_cache()

    def graph_capture(self, tms, weights):
        t = self.torch
        # room in the graph's pool before the capture, so that the capture
        # is served from memory already mapped (and its staging pinned)
        with tms.region(tag="cuda_graph", enable_cpu_backup=True):
            warm = t.empty(256 * MiB, dtype=t.uint8, device=self.dev)
        del warm
        w = weights[1].view(t.float16)[: 1024 * 1024].view(1024, 1024)
        self.g_in = t.randn(64, 1024, dtype=t.float16, device=self.dev)
        s = t.cuda.Stream()
        s.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(s):			# warm up outside the graph
            t.relu(self.g_in @ w)
        t.cuda.current_stream().wait_stream(s)
        self.graph = t.cuda.CUDAGraph()
        with tms.cuda_graph(self.graph, tag="cuda_graph"):
            self.g_out = t.relu(self.g_in @ w) * 2
        self.graph.replay()
        t.cuda.synchronize()
        return self.g_out.clone()

    def graph_replay(self):
        self.graph.replay()
        self.torch.cuda.synchronize()
        return self.g_out.clone()

    def equal(self, a, b):
        return self.torch.equal(a, b)

    def sync(self):
        self.torch.cuda.synchronize()


# ---------------------------------------------------------- stand-in ops
class FakeStats(ctypes.Structure):
    """tests/host/fake_libcuda.h struct fakecuda_stats"""
    _fields_ = [(n, ctypes.c_long) for n in (
        "reservations", "handles", "mappings", "accessible", "host_allocs",
        "streams", "ctx_refs", "pending", "misuse", "pageable_copies",
        "kernels", "events", "races", "illegal", "sticky")] + [
        ("used_bytes", ctypes.c_ulonglong),
        ("freeing_bytes", ctypes.c_ulonglong),
        ("max_pin", ctypes.c_ulonglong), ("pin_us", ctypes.c_longlong),
        ("rdma_handles", ctypes.c_long)]


class Buf:
    def __init__(self, addr, size):
        self.addr, self.size = addr, size


class FakeOps:
    """The same sequence over the stand-in libcuda (host memory), no torch:
    allocations through gpusleep_malloc in the region's thread tag,
    "kernels" with fakecuda_launch."""
    dry = True

    def __init__(self, args):
        from gpusleep import _lib
        self.L = _lib.lib()
        self.capacity = args.fake_mem_mib * MiB
        self.fake = ctypes.CDLL(args.lib)	# the handle the backend uses
        self.fake.fakecuda_engine_stream.restype = ctypes.c_void_p
        self.fake.fakecuda_launch.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong,
            ctypes.c_longlong, ctypes.c_longlong]
        self.fake.fakecuda_set.argtypes = [ctypes.c_char_p,
                                           ctypes.c_longlong]
        self.fake.fakecuda_set(b"capacity", self.capacity)
        self.fake.fakecuda_set(b"lazy_free", 1)
        self.stream = self.fake.fakecuda_engine_stream()
        self.other = 0

    def stats(self):
        st = FakeStats()
        self.fake.fakecuda_stats(ctypes.byref(st))
        return st

    def mem_get_info(self):
        st = self.stats()
        return self.capacity - st.used_bytes - st.freeing_bytes - self.other

    def pinned_copy(self, nbytes):
        a = (ctypes.c_ubyte * nbytes)()
        b = (ctypes.c_ubyte * nbytes)()
        t0 = time.perf_counter()
        ctypes.memmove(b, a, nbytes)
        dt = time.perf_counter() - t0
        return [nbytes / dt / 1e9] * 2

    def alloc(self, nbytes):
        p = self.L.gpusleep_malloc(nbytes, 0, None)
        if not p:
            raise MemoryError(f"gpusleep_malloc({nbytes})")
        return Buf(p, nbytes)

    @staticmethod
    def _pattern(n, seed):
        b = bytes((seed * 7 + i * 13) & 0xff for i in range(4099))
        return (b * (n // len(b) + 1))[:n]

    def fill_pattern(self, buf, seed):
        ctypes.memmove(buf.addr, self._pattern(buf.size, seed), buf.size)

    def check_pattern(self, buf, seed):
        return ctypes.string_at(buf.addr, buf.size) == \
            self._pattern(buf.size, seed)

    def all_value(self, buf, value):
        want = value.to_bytes(4, "little") * (buf.size // 4)
        return ctypes.string_at(buf.addr, buf.size) == want

    def start_work(self, hot, weights, kv):
        n = 0
        for i in range(1, 6):		# queued, done only when waited for
            n = i
            if self.fake.fakecuda_launch(self.stream, hot.addr, hot.size, i,
                                         -1):
                raise RuntimeError("fakecuda_launch failed")
            self.fake.fakecuda_launch(self.stream, kv[0].addr, kv[0].size,
                                      0x77, -1)

        def stopper():
            return n, self.stats().kernels > 0
        return stopper

    def take(self, nbytes):
        if nbytes > self.mem_get_info():
            raise MemoryError(f"{nbytes} bytes are not free")
        self.other = nbytes
        self.fake.fakecuda_set(b"other_used", nbytes)
        self.other = 0
        self.fake.fakecuda_set(b"other_used", 0)

    def sync(self):
        pass


# ------------------------------------------------------------ the check
def sized(total, piece):
    out, left = [], total
    while left > 0:
        out.append(min(piece, left))
        left -= out[-1]
    return out


def run(args, tap):
    from gpusleep.torch_memory_saver import torch_memory_saver as tms
    ops = FakeOps(args) if args.dry_run else TorchOps(args)
    fig = {"dry_run": args.dry_run, "date": time.strftime(
        "%Y-%m-%d %H:%M:%S %Z"), "argv": sys.argv[1:]}
    unit = MiB if args.dry_run else GiB
    wb, kb, hb = (int(args.weights_gib * unit), int(args.kv_gib * unit),
                  int(args.hot_gib * unit))
    piece = 2 * unit if not args.dry_run else 8 * MiB

    tap.ok(tms.enabled and tms.local, "adapter enabled in local mode")
    d2h, h2d = ops.pinned_copy(int(args.baseline_gib * unit))
    fig["baseline_gbps"] = {"d2h": d2h, "h2d": h2d}
    tap.note(f"plain pinned copy: D2H {d2h:.1f} GB/s, H2D {h2d:.1f} GB/s")

    with tms.region(tag="weights", enable_cpu_backup=True):
        weights = [ops.alloc(n) for n in sized(wb, piece)]
        hot = ops.alloc(hb)
    with tms.region(tag="kv_cache", enable_cpu_backup=False):
        kv = [ops.alloc(n) for n in sized(kb, piece)]
    for i, w in enumerate(weights):
        ops.fill_pattern(w, i + 1)
    ops.sync()
    tap.ok(True, f"allocated weights {wb / unit:g} + hot {hb / unit:g} and "
           f"KV {kb / unit:g} {'MiB' if args.dry_run else 'GiB'} in regions")

    ref = None
    if ops.dry:
        tap.skip("CUDA graph captured in the cuda_graph tag",
                 "dry run: no CUDA graphs in the stand-in")
    else:
        ref = ops.graph_capture(tms, weights)
        tap.ok(True, "CUDA graph captured in the cuda_graph tag and replayed")

    stop = ops.start_work(hot, weights, kv)
    time.sleep(0 if ops.dry else args.work_seconds)
    last, in_flight = stop()
    tap.note(f"engine work: {last} counter writes launched, work still "
             f"queued at the release: {in_flight}")

    free0 = ops.mem_get_info()
    t0 = time.perf_counter()
    try:
        res = tms.pause()
    except OSError as e:
        tap.ok(False, "release", f"{e} {getattr(e, 'results', '')}")
        return fig
    t_rel = time.perf_counter() - t0
    free1 = ops.mem_get_info()
    released = sum(r["bytes"] for r in res.values())
    came = free1 - free0
    fig["release"] = {"seconds": t_rel, "bytes": released, "came_free": came,
                      "per_tag": res}
    tap.ok(all(r["status"] == 0 for r in res.values()), "release: every tag",
           repr(res))
    tap.ok(came >= 0.99 * released,
           f"mem_get_info: {came} of {released} released bytes came free",
           f"only {came / max(released, 1):.2%}")
    for t, r in res.items():
        tap.ok(r["measured"] and not r["shortfall"],
               f"{t}: verified free {r['freed_bytes']} of {r['bytes']}",
               "shortfall")
    wr = res["weights"]
    backup = wr["bytes"] / (wr["copy_ns"] / 1e9) / 1e9 if wr["copy_ns"] \
        else 0.0
    fig["backup_gbps"] = backup
    fig["release_s_per_gib"] = {t: r["duration_ns"] / 1e9 / (r["bytes"] / GiB)
                                for t, r in res.items() if r["bytes"]}
    tap.note(f"release {t_rel:.3f} s for {released / GiB:.2f} GiB; backup "
             f"{backup:.1f} GB/s; per GiB: " + ", ".join(
                 f"{t} {v:.4f} s" for t, v in fig["release_s_per_gib"].items()))

    try:
        ops.take(int(came * 0.95))
        tap.ok(True, "a second tensor took 95% of what came free, freed")
    except Exception as e:	# torch.OutOfMemoryError among others
        tap.ok(False, "a second tensor takes what came free", str(e))

    t0 = time.perf_counter()
    try:
        res = tms.resume()
    except OSError as e:
        tap.ok(False, "resume", f"{e} {getattr(e, 'results', '')}")
        return fig
    t_res = time.perf_counter() - t0
    tap.ok(all(r["status"] == 0 for r in res.values()), "resume: every tag",
           repr(res))
    wr = res["weights"]
    restore = wr["bytes"] / (wr["copy_ns"] / 1e9) / 1e9 if wr["copy_ns"] \
        else 0.0
    mapped = sum(r["bytes"] for r in res.values())
    fig["resume"] = {"seconds": t_res, "bytes": mapped, "per_tag": res}
    fig["restore_gbps"] = restore
    fig["resume_s_per_gib"] = {t: r["duration_ns"] / 1e9 / (r["bytes"] / GiB)
                               for t, r in res.items() if r["bytes"]}
    tap.note(f"resume {t_res:.3f} s for {mapped / GiB:.2f} GiB; restore "
             f"{restore:.1f} GB/s; per GiB: " + ", ".join(
                 f"{t} {v:.4f} s" for t, v in fig["resume_s_per_gib"].items()))

    tap.ok(all(ops.check_pattern(w, i + 1) for i, w in enumerate(weights)),
           "weights bit-identical after resume")
    tap.ok(ops.all_value(hot, last),
           f"hot weights hold the last value launched ({last}): the backup "
           f"waited for the engine's kernels")
    tap.ok(all(ops.all_value(k, 0) for k in kv), "KV reads zero after resume")
    if ref is not None:
        tap.ok(ops.equal(ops.graph_replay(), ref),
               "CUDA graph replays to the same output after resume")
    if ops.dry:
        st = ops.stats()
        tap.ok(st.misuse == 0 and st.sticky == 0 and st.races == 0,
               "stand-in: no misuse, no device fault, no racing copy",
               f"misuse {st.misuse} sticky {st.sticky} races {st.races}")
        tap.skip("backup/restore at least 90% of a plain pinned copy",
                 "dry run: the stand-in's figures mean nothing")
    else:
        tap.ok(backup >= 0.9 * d2h,
               f"backup {backup:.1f} GB/s >= 90% of the pinned D2H copy "
               f"{d2h:.1f} GB/s", f"{backup / d2h:.0%}")
        tap.ok(restore >= 0.9 * h2d,
               f"restore {restore:.1f} GB/s >= 90% of the pinned H2D copy "
               f"{h2d:.1f} GB/s", f"{restore / h2d:.0%}")
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--lib", default=os.path.join(
        REPO, "build", "tests", "host", "fakecuda", "libcuda.so.1"),
        help="dry run: the stand-in libcuda")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--weights-gib", type=float, default=40)
    ap.add_argument("--kv-gib", type=float, default=60)
    ap.add_argument("--hot-gib", type=float, default=1)
    ap.add_argument("--baseline-gib", type=float, default=8)
    ap.add_argument("--work-seconds", type=float, default=3,
                    help="engine kernels run this long before the release")
    ap.add_argument("--fake-mem-mib", type=int, default=1024)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.dry_run:
        # sizes are MiB in a dry run
        args.weights_gib = min(args.weights_gib, 40)
        args.kv_gib = min(args.kv_gib, 60)
        args.hot_gib = min(args.hot_gib, 4)
        args.baseline_gib = min(args.baseline_gib, 8)
        os.environ["GPUSLEEP_CUDA_LIB"] = args.lib
    os.environ["GPUSLEEP_TMS_LOCAL"] = "1"
    os.environ.setdefault("GPUSLEEP_BACKEND", "cuda")
    sys.path.insert(0, os.path.join(REPO, "user", "python"))
    tap = Tap()
    fig = run(args, tap)
    fig["checks"] = tap.n
    fig["failed"] = tap.failed
    if args.json:
        with open(args.json, "w") as f:
            json.dump(fig, f, indent=1, default=str)
    print(f"1..{tap.n}")
    print(f"# {tap.n - tap.failed} passed, {tap.failed} failed")
    sys.exit(1 if tap.failed else 0)


if __name__ == "__main__":
    main()
