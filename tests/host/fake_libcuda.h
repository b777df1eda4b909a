/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tests/host/fake_libcuda.h: the control interface of the stand-in
 * libcuda.so.1 (tests/host/fake_libcuda.c).
 *
 * Tests reach these functions with dlsym() on the same library the backend
 * loaded (dlopen(path, RTLD_NOW | RTLD_NOLOAD)), so nothing here needs
 * cuda.h and the test binary links without the stand-in.
 */
#ifndef GPUSLEEP_TESTS_FAKE_LIBCUDA_H
#define GPUSLEEP_TESTS_FAKE_LIBCUDA_H

/*
 * The stand-in's default allocation granularity, minimum and recommended,
 * on every device: 2 MiB, like most real GPUs. Each device's own values:
 * FAKECUDA_GRAN=min[:rec][,min[:rec]...] (device 0, 1, ...; K/M/G
 * suffixes) at load, or the knobs "gran_min.N" / "gran_rec.N" (before the
 * backend asks). cuMemCreate and cuMemMap want sizes and addresses that
 * are multiples of the handle's device's minimum; cuMemAddressReserve
 * aligns a range to the alignment asked for (at least the smallest
 * minimum) and never to more.
 */
#define FAKECUDA_GRANULARITY (2UL << 20)

struct fakecuda_stats {
	long reservations;	/* live cuMemAddressReserve ranges */
	long handles;		/* live cuMemCreate handles */
	long mappings;		/* live cuMemMap mappings */
	long accessible;	/* mappings with access set by cuMemSetAccess */
	long host_allocs;	/* live cuMemHostAlloc buffers */
	long streams;		/* live streams */
	long ctx_refs;		/* primary context references (all devices) */
	long pending;		/* queued async copies not yet executed */
	long misuse;		/* calls the real driver would reject */
	long pageable_copies;	/* async copies with a non-pinned host side */
	long kernels;		/* engine kernels (fakecuda_launch) not yet done */
	long events;		/* live events */
	long races;		/* device-to-host copies racing a kernel's writes */
	long illegal;		/* device faults (unmap under a kernel...) */
	long sticky;		/* the context's sticky CUresult, 0 if none */
	unsigned long long used_bytes;	 /* device memory held by handles */
	unsigned long long freeing_bytes; /* released, free at the next sync */
	unsigned long long max_pin;	 /* largest single cuMemHostAlloc */
	long long pin_us;		 /* time spent pinning (simulated) */
	long rdma_handles;	/* cuMemCreate with gpuDirectRDMACapable */
};
/*
 * The layout above is fixed (bench/gpu/check.py mirrors it with ctypes);
 * later counters are read by name: fakecuda_counter("capture_errors")
 * (calls refused while a stream is captured), "host_free_syncs"
 * (cuMemFreeHost calls, each a device synchronisation), "d2h_bytes",
 * "h2d_bytes" (bytes copied each way so far); the cost of the VMM calls:
 * "create_bytes", "map_bytes", "access_bytes", "unmap_bytes",
 * "release_bytes" (bytes through each of cuMemCreate, cuMemMap,
 * cuMemSetAccess, cuMemUnmap, cuMemRelease that succeeded; their calls:
 * fakecuda_calls()), "vmm_us" (their modelled time: the knobs
 * "vmm_call_us" per call plus "vmm_us_per_gib"; spent for real, outside
 * the stand-in's lock, only with the knob "vmm_sleep" 1); -1 for an
 * unknown name.
 */
typedef long long (*fakecuda_counter_fn)(const char *name);

/* fakecuda_stats(): fill *st with the live counters */
typedef void (*fakecuda_stats_fn)(struct fakecuda_stats *st);
/*
 * fakecuda_fail(fn, nth, times, code): the nth call of entry point fn
 * counted from now (1 = the next one) and the times - 1 calls after it
 * (times 0 = every call from then on) return CUresult code without doing
 * anything. fn is the base name ("cuMemMap", "cuMemcpyDtoHAsync").
 * Returns 0, or -1 for an unknown name or a full fault table.
 */
typedef int (*fakecuda_fail_fn)(const char *fn, unsigned int nth,
				unsigned int times, int code);
/* fakecuda_calls(fn): calls of entry point fn since load (faults included) */
typedef long (*fakecuda_calls_fn)(const char *fn);
/* fakecuda_clear_faults(): drop every armed fault */
typedef void (*fakecuda_clear_faults_fn)(void);
/*
 * The engine's own GPU work. fakecuda_engine_stream(): a new stream of
 * "the engine" (not counted in stats.streams). fakecuda_launch(stream, va,
 * size, value, delay_us): queue a kernel over [va, +size) that writes the
 * 32-bit value everywhere (value < 0: only reads) and finishes by itself
 * delay_us after now (< 0: only when synchronized: cuCtxSynchronize, a
 * cuStreamSynchronize/cuEventSynchronize that waits for it). Launching on
 * unmapped memory, or unmapping memory a pending kernel uses, is a device
 * fault: CUDA_ERROR_ILLEGAL_ADDRESS, sticky (every later call fails).
 * delay_us FAKECUDA_HANG: a kernel that does not end (a collective waiting
 * for a rank that never comes): whatever synchronises with it blocks until
 * fakecuda_unhang(), other threads' calls go on meanwhile.
 * Returns 0 or -1.
 */
#define FAKECUDA_HANG (-2LL)	/* delay_us: ends only after fakecuda_unhang() */
typedef void *(*fakecuda_engine_stream_fn)(void);
/*
 * fakecuda_engine_stream_flags(flags): the same with cuStreamCreate's
 * flags; fakecuda_engine_stream() is flags 0, a blocking stream, which
 * the legacy NULL stream synchronises with (an event recorded on it, or
 * its synchronisation, waits for every blocking stream's work). With
 * CU_STREAM_NON_BLOCKING (1), as PyTorch makes all of its streams, it
 * does not, and its capture is not seen from the legacy stream.
 */
typedef void *(*fakecuda_engine_stream_flags_fn)(unsigned int flags);
typedef int (*fakecuda_launch_fn)(void *stream, void *va, unsigned long size,
				  long long value, long long delay_us);
/*
 * fakecuda_set(knob, value): "capacity" (device bytes, default 64 GiB),
 * "other_used" (bytes held by others), "lazy_free" (released memory shows
 * free in cuMemGetInfo only after the next synchronisation), "hold_free"
 * (with lazy_free: never, as if someone else took it at once),
 * "pin_us_per_gib" (cuMemHostAlloc takes that long per GiB), "rdma_vmm"
 * (GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED), "numa_id" (HOST_NUMA_ID),
 * "async_faults" (cuMemUnmap under a pending kernel succeeds, as on a GPU,
 * and the fault surfaces, sticky, at the next synchronising call).
 * The model (bench/bench_model.c), set before anything is allocated:
 * "model" (no memory behind device memory, mappings or pinned staging,
 * nothing copied: sizes far beyond this machine's memory are bookkeeping
 * only; the time each call would take is summed, never spent),
 * "cost_ns:ENTRY" (ns per call of entry point ENTRY, e.g.
 * "cost_ns:cuMemCreate"), "d2h_mbps", "h2d_mbps", "memset_mbps" (MB/s of
 * copies and memsets), "pin_ns_per_gib" (cuMemHostAlloc); the sums are
 * fakecuda_counter("model_ns"), "model_vmm_ns", "model_copy_ns",
 * "model_pin_ns".
 * Returns 0, -1 for an unknown knob.
 */
typedef int (*fakecuda_set_fn)(const char *knob, long long value);
/*
 * fakecuda_capture(stream, on): stream is (on = 1) or is no longer being
 * captured into a CUDA graph. While any stream is captured,
 * cuCtxSynchronize, cuMemFreeHost, cuStreamSynchronize of the captured
 * stream and cuEventSynchronize of an event recorded in the capture
 * answer CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (counted as capture_errors
 * and misuse). As the driver documents for cuStreamIsCapturing, only a
 * blocking stream's capture is seen from the legacy NULL stream: then
 * cuStreamIsCapturing(NULL) answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
 * and cuEventRecord or cuStreamSynchronize on it are refused with that
 * code (counted too); a non-blocking stream's capture leaves the legacy
 * stream usable and reported as not capturing. Returns 0 or -1.
 */
typedef int (*fakecuda_capture_fn)(void *stream, int on);
/*
 * fakecuda_access(va, dev): device dev's access to the mapping at va,
 * as cuMemSetAccess set it: 3 read-write, 1 read, 0 none, -1 unmapped.
 * cuMemSetAccess takes one descriptor per device (of FAKECUDA_DEVICES),
 * each setting that device's access and leaving the others';
 * cuMemGetAccess reads it.
 */
typedef int (*fakecuda_access_fn)(void *va, int dev);
/* fakecuda_unhang(): the FAKECUDA_HANG kernels may end now */
typedef void (*fakecuda_unhang_fn)(void);

#endif /* GPUSLEEP_TESTS_FAKE_LIBCUDA_H */
