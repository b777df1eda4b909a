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

/* the stand-in's allocation granularity: 2 MiB, like most real GPUs */
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
};

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

#endif /* GPUSLEEP_TESTS_FAKE_LIBCUDA_H */
