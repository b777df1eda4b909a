// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/fake_libcuda.c: a stand-in libcuda.so.1 over host memory.
 *
 * It implements the CUDA Driver API entry points that user/backend_cuda.c
 * uses, so the backend's call order, error paths and bookkeeping can be
 * tested on machines without a GPU:
 *
 *   cuMemAddressReserve   mmap(PROT_NONE) of an aligned range
 *   cuMemCreate           a memfd of the requested size ("physical memory")
 *   cuMemMap              mmap(MAP_FIXED | MAP_SHARED) of the memfd, PROT_NONE
 *   cuMemSetAccess        mprotect(PROT_READ | PROT_WRITE)
 *   cuMemUnmap            mmap(PROT_NONE, MAP_FIXED) anonymous over the range
 *   cuMemHostAlloc        mmap of anonymous memory ("pinned")
 *   cuMemcpy*Async        queued on the stream, run by cuStreamSynchronize
 *
 * Like the driver it checks arguments and order (cuInit first, a current
 * context, sizes and addresses aligned to the granularity, mappings only
 * inside a reservation and never over another mapping, access only on mapped
 * ranges, copies only from accessible ranges) and answers
 * CUDA_ERROR_INVALID_VALUE (or the driver's code) when misused; each misuse
 * is also printed and counted. It is stricter than the driver in two places,
 * to hold gpusleep to its own order: cuMemRelease of a handle that is still
 * mapped is refused (the driver defers the free), and so is cuMemUnmap,
 * cuMemFreeHost or cuStreamDestroy while a queued copy still uses the memory
 * (the caller must cuStreamSynchronize first).
 *
 * Fault injection and counters: see tests/host/fake_libcuda.h and
 * docs/cuda-backend.md. Environment, read when the library is loaded:
 *   FAKECUDA_FAIL=fn:nth[:times[:code]][,...]  as fakecuda_fail()
 *   FAKECUDA_DEVICES=n                         device count (default 1)
 *   FAKECUDA_POISON=1                          new physical memory reads 0xa5
 *                                              (the driver leaves it undefined)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fake_libcuda.h"
#include "gs_cuda.h"	/* gpusleep's declarations of the Driver API */

#define EXPORT __attribute__((visibility("default")))
#define GRAN FAKECUDA_GRANULARITY
#define MAX_DEVICES 8
#define MAX_OBJS 4096
#define MAX_FAULTS 32

#define ENTRY_POINTS(X)					\
	X(cuGetProcAddress) X(cuGetErrorName) X(cuInit)	\
	X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)		\
	X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)	\
	X(cuCtxGetCurrent) X(cuMemGetAllocationGranularity)	\
	X(cuMemAddressReserve) X(cuMemAddressFree)		\
	X(cuMemCreate) X(cuMemRelease) X(cuMemMap)		\
	X(cuMemSetAccess) X(cuMemUnmap) X(cuMemHostAlloc)	\
	X(cuMemFreeHost) X(cuMemcpyDtoHAsync)			\
	X(cuMemcpyHtoDAsync) X(cuMemsetD32Async)		\
	X(cuStreamCreate)					\
	X(cuStreamSynchronize) X(cuStreamDestroy)		\
	X(cuCtxSynchronize) X(cuStreamWaitEvent)		\
	X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)	\
	X(cuEventQuery) X(cuEventDestroy) X(cuMemGetInfo)	\
	X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId)	\
	X(cuStreamIsCapturing) X(cuDeviceGetCount)		\
	X(cuMemGetAccess)

#define AS_ENUM(n) E_##n,
enum entry { ENTRY_POINTS(AS_ENUM) E_COUNT };
#define AS_NAME(n) #n,
static const char *const entry_names[E_COUNT] = { ENTRY_POINTS(AS_NAME) };

struct CUctx_st {
	int device;
	long refs;
};

struct copy_op {
	bool memset;		/* cuMemsetD32Async of value */
	bool kernel;		/* fakecuda_launch(): engine work */
	bool writes;		/* kernel: writes value over the range */
	bool hung;		/* kernel: never ends until fakecuda_unhang() */
	unsigned int value;
	bool to_host;
	void *host;
	uintptr_t dev;
	size_t size;
	bool pinned;
	uint64_t seq;		/* position in its stream */
	uint64_t due;		/* kernel: done by itself at this time (ns) */
};

/* "stream w runs nothing queued after this point before s reached seq" */
struct wait_dep {
	struct CUstream_st *s;
	uint64_t seq;
	uint64_t after;		/* applies to w's ops with seq > after */
};

struct CUstream_st {
	bool live;
	bool engine;		/* made by fakecuda_engine_stream() */
	bool failed;		/* a queued copy hit unmapped memory */
	bool capturing;		/* fakecuda_capture(): a CUDA graph capture */
	bool nonblocking;	/* CU_STREAM_NON_BLOCKING: the legacy stream
				 * does not synchronise with it */
	struct copy_op *ops;
	size_t nops, cap;
	uint64_t seq;		/* of the last op queued */
	struct wait_dep *waits;
	size_t nwaits, wcap;
};

struct CUevent_st {
	struct CUstream_st *s;	/* NULL until recorded, or on the legacy one */
	uint64_t seq;
	bool legacy;		/* recorded on the legacy NULL stream */
	bool captured;		/* recorded into a capture: not a real event */
};

struct phys {
	int fd;
	size_t size;
	int device;
	long maps;
};

struct reservation { uintptr_t base; size_t size; };
/*
 * access: some device may use it (the owner's copies need it); rw, ro:
 * the devices granted read-write, read-only (cuMemSetAccess), bit n for
 * device n.
 */
struct mapping {
	uintptr_t va;
	size_t size;
	struct phys *p;
	bool access;
	unsigned int rw, ro;
};
struct host_buf { void *p; size_t size; };

struct fault {
	enum entry e;
	long first, last;	/* call numbers; last 0 = no end */
	CUresult code;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hung_cv = PTHREAD_COND_INITIALIZER;
static __thread struct CUctx_st *current;
static bool initialized;
static int ndevices = 1;
static bool poison;
static struct CUctx_st contexts[MAX_DEVICES];
static long calls[E_COUNT];
static struct fault faults[MAX_FAULTS];
static int nfaults;
static struct reservation res[MAX_OBJS];
static int nres;
static struct phys *phys[MAX_OBJS];
static int nphys;
static struct mapping maps[MAX_OBJS];
static int nmaps;
static struct host_buf hosts[MAX_OBJS];
static int nhosts;
static struct CUstream_st *streams[MAX_OBJS];
static int nstreams;
static long misuse, pageable_copies;
static struct CUevent_st *events[MAX_OBJS];
static int nevents;
/* the context's sticky error: once set, every call answers it */
static CUresult sticky;
static long races, illegal;
/*
 * async_faults: cuMemUnmap under a running kernel succeeds, as on a GPU;
 * the kernel's fault surfaces (sticky) at the next synchronisation.
 */
static bool async_faults;
static bool fault_pending;
static long capture_errors;	/* calls refused because of a capture */
static long host_free_syncs;	/* cuMemFreeHost: an implicit device sync */
static unsigned long long d2h_bytes, h2d_bytes;	/* copied so far */
/* device memory: cuMemGetInfo, cuMemCreate's OUT_OF_MEMORY */
static unsigned long long capacity = 64ULL << 30;
static unsigned long long used_bytes, other_bytes, freeing_bytes;
static bool lazy_free;
static bool hold_free;		/* released memory never shows free */
static long rdma_handles;	/* made with gpuDirectRDMACapable */
static int rdma_vmm = 1;	/* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
static int numa_id = -1;	/* CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID */
static long long pin_us_per_gib;
static unsigned long long max_pin;
static long long pin_us_total;
/*
 * Each device's allocation granularity (cuMemGetAllocationGranularity):
 * the minimum, which sizes and addresses of cuMemCreate/cuMemMap must be
 * multiples of, and the recommended one (for performance); default
 * FAKECUDA_GRANULARITY both. FAKECUDA_GRAN or the knobs gran_min.N,
 * gran_rec.N set them.
 */
static size_t gran_min[MAX_DEVICES], gran_rec[MAX_DEVICES];
/*
 * The cost of the VMM calls: bytes through each, and a modelled time
 * (vmm_call_us per call of cuMemCreate, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease, plus vmm_us_per_gib per GiB of its range),
 * summed in vmm_us and slept for only when vmm_sleep is set.
 */
static unsigned long long create_bytes, map_bytes, access_bytes,
			  unmap_bytes, release_bytes;
static long long vmm_call_us, vmm_us_per_gib, vmm_us_total;
static bool vmm_sleep;
/*
 * The model (knob "model"; bench/bench_model.c): no memory behind
 * anything (device memory, its mappings, pinned staging are bookkeeping
 * only, so 140 GiB can be "allocated" here), nothing copied, and time
 * modelled, never spent: each call of an entry point costs cost_ns[e]
 * (knobs "cost_ns:cuMemCreate" ...), a copy its bytes at the link's rate
 * ("d2h_mbps", "h2d_mbps", MB/s), a memset at "memset_mbps", pinning
 * "pin_ns_per_gib". The sums: fakecuda_counter("model_ns") and its parts
 * "model_vmm_ns" (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 * cuMemRelease), "model_copy_ns" (copies, memsets), "model_pin_ns".
 */
static bool model;
static long long cost_ns[E_COUNT];
static long long d2h_mbps, h2d_mbps, memset_mbps, pin_ns_per_gib;
static long long model_ns, model_vmm_ns, model_copy_ns, model_pin_ns;

static CUresult bad(const char *fn, const char *why)
{
	misuse++;
	fprintf(stderr, "fakecuda: %s: %s\n", fn, why);
	return CUDA_ERROR_INVALID_VALUE;
}

/*
 * Count the call of e; return the armed fault's code, or CUDA_SUCCESS.
 * Called with the lock held.
 */
static void retire_due(void);
static void fault_surface(void);

static bool vmm_entry(enum entry e)
{
	return e == E_cuMemCreate || e == E_cuMemMap || e == E_cuMemSetAccess ||
	       e == E_cuMemUnmap || e == E_cuMemRelease;
}

/* the modelled time of moving bytes at mbps (MB/s); 0 without a rate */
static long long model_bytes_ns(size_t bytes, long long mbps)
{
	return mbps > 0 ? (long long)((double)bytes * 1e3 / (double)mbps) : 0;
}

static CUresult enter(enum entry e)
{
	long n = ++calls[e];

	if (cost_ns[e]) {
		model_ns += cost_ns[e];
		if (vmm_entry(e))
			model_vmm_ns += cost_ns[e];
	}

	retire_due();
	if (fault_pending && (e == E_cuCtxSynchronize ||
			      e == E_cuStreamSynchronize ||
			      e == E_cuEventSynchronize || e == E_cuEventQuery ||
			      e == E_cuMemFreeHost))
		fault_surface();
	if (sticky && e != E_cuGetErrorName && e != E_cuGetProcAddress)
		return sticky;

	for (int i = 0; i < nfaults; i++) {
		struct fault *f = &faults[i];

		if (f->e == e && n >= f->first && (!f->last || n <= f->last))
			return f->code;
	}
	return CUDA_SUCCESS;
}

/* the checks every call after cuInit makes; lock held */
static CUresult need_ctx(const char *fn)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!current) {
		bad(fn, "no current context on this thread");
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (current->refs <= 0) {
		bad(fn, "the current context was released");
		return CUDA_ERROR_CONTEXT_IS_DESTROYED;
	}
	return CUDA_SUCCESS;
}

#define BEGIN(e) \
	CUresult rc_; \
	pthread_mutex_lock(&lock); \
	rc_ = enter(e); \
	if (rc_ != CUDA_SUCCESS) \
		goto out
#define BEGIN_CTX(e, fn) \
	BEGIN(e); \
	rc_ = need_ctx(fn); \
	if (rc_ != CUDA_SUCCESS) \
		goto out
#define END \
out: \
	pthread_mutex_unlock(&lock); \
	return rc_

/* the smallest minimum granularity of the devices: any range's floor */
static size_t gran_floor(void)
{
	size_t g = 0;

	for (int i = 0; i < ndevices; i++)
		if (!g || gran_min[i] < g)
			g = gran_min[i];
	return g ? g : GRAN;
}

static bool aligned(uintptr_t v)
{
	return (v & (gran_floor() - 1)) == 0;
}

/* aligned to device dev's minimum granularity */
static bool aligned_dev(uintptr_t v, int dev)
{
	size_t g = dev >= 0 && dev < MAX_DEVICES ? gran_min[dev] : GRAN;

	return (v & (g - 1)) == 0;
}

/* the modelled time of a VMM call over size bytes (lock held) */
static long long vmm_cost(size_t size)
{
	long long us = vmm_call_us +
		       (long long)((double)size / (1ULL << 30) * vmm_us_per_gib);

	vmm_us_total += us;
	return vmm_sleep ? us : 0;
}

/* unlock, spend the call's modelled time (vmm_sleep), return rc_ */
#define END_COST(us) \
out: \
	pthread_mutex_unlock(&lock); \
	if ((us) > 0) \
		usleep((useconds_t)(us)); \
	return rc_

static int find_entry(const char *name)
{
	for (int i = 0; i < E_COUNT; i++)
		if (!strcmp(entry_names[i], name))
			return i;
	return -1;
}

static bool covered(uintptr_t va, size_t size, bool whole, bool need_access);
static void fault_sticky(const char *what, uintptr_t dev, size_t size);
static CUresult queue_op(struct CUstream_st *s, struct copy_op *op);
static int find_stream(CUstream s);
static uint64_t now_ns(void);
static bool run_all(void);
static bool run_stream(struct CUstream_st *s);
static void synchronized(void);

/* ---- control interface for the tests ---- */

EXPORT int fakecuda_fail(const char *fn, unsigned int nth, unsigned int times,
			 int code)
{
	int e = find_entry(fn);
	int ret = -1;

	pthread_mutex_lock(&lock);
	if (e >= 0 && nth > 0 && nfaults < MAX_FAULTS) {
		struct fault *f = &faults[nfaults++];

		f->e = e;
		f->first = calls[e] + nth;
		f->last = times ? f->first + times - 1 : 0;
		f->code = (CUresult)code;
		ret = 0;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/* an engine stream: not the backend's, not counted in stats.streams */
EXPORT void *fakecuda_engine_stream_flags(unsigned int flags)
{
	struct CUstream_st *s = NULL;

	pthread_mutex_lock(&lock);
	if (nstreams < MAX_OBJS && (s = calloc(1, sizeof(*s)))) {
		s->live = true;
		s->engine = true;
		s->nonblocking = flags & CU_STREAM_NON_BLOCKING;
		streams[nstreams++] = s;
	}
	pthread_mutex_unlock(&lock);
	return s;
}

/* a blocking one, as cuStreamCreate(&s, 0) makes */
EXPORT void *fakecuda_engine_stream(void)
{
	return fakecuda_engine_stream_flags(0);
}

EXPORT int fakecuda_launch(void *stream, void *va, size_t size,
			   long long value, long long delay_us)
{
	struct CUstream_st *s = stream;
	struct copy_op op = { .kernel = true, .dev = (uintptr_t)va,
			      .size = size & ~(size_t)3 };
	int ret = -1;

	pthread_mutex_lock(&lock);
	retire_due();
	if (!s || find_stream(s) < 0 || !op.size) {
		bad("fakecuda_launch", "unknown stream or size < 4");
	} else if (sticky) {
		/* a lost context runs nothing */
	} else if (!covered(op.dev, op.size, false, true)) {
		fault_sticky("kernel launched", op.dev, op.size);
	} else {
		op.writes = value >= 0;
		op.value = (unsigned int)value;
		op.hung = delay_us == FAKECUDA_HANG;
		op.due = delay_us < 0 ? 0 : now_ns() + (uint64_t)delay_us * 1000;
		if (!op.due && delay_us >= 0)
			op.due = 1;
		ret = queue_op(s, &op) == CUDA_SUCCESS ? 0 : -1;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/* the hung kernels end (when something waits for them) */
EXPORT void fakecuda_unhang(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nstreams; i++)
		for (size_t j = 0; j < streams[i]->nops; j++)
			streams[i]->ops[j].hung = false;
	pthread_cond_broadcast(&hung_cv);
	pthread_mutex_unlock(&lock);
}

/*
 * A synchronisation that waits for a hung kernel (on s, or on any stream
 * when s is NULL) blocks, without the lock, until fakecuda_unhang().
 */
static bool has_hung(struct CUstream_st *s)
{
	for (int i = 0; i < nstreams; i++) {
		if (s && streams[i] != s)
			continue;
		for (size_t j = 0; j < streams[i]->nops; j++)
			if (streams[i]->ops[j].hung)
				return true;
	}
	return false;
}

static void wait_hung(struct CUstream_st *s)
{
	while (has_hung(s))
		pthread_cond_wait(&hung_cv, &lock);
}

EXPORT int fakecuda_capture(void *stream, int on)
{
	struct CUstream_st *s = stream;
	int ret = -1;

	pthread_mutex_lock(&lock);
	if (s && find_stream(s) >= 0) {
		s->capturing = on != 0;
		ret = 0;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

/*
 * "gran_min.N" / "gran_rec.N": device N's minimum / recommended
 * granularity (a power of two; the recommended one a multiple of the
 * minimum). True if knob was one of them and value fits.
 */
static bool set_gran(const char *knob, long long value)
{
	bool rec = !strncmp(knob, "gran_rec.", 9);
	char *end;
	long dev;

	if (!rec && strncmp(knob, "gran_min.", 9))
		return false;
	dev = strtol(knob + 9, &end, 10);
	if (*end || dev < 0 || dev >= MAX_DEVICES || value <= 0 ||
	    (value & (value - 1)))
		return false;
	if (rec)
		gran_rec[dev] = (size_t)value;
	else
		gran_min[dev] = (size_t)value;
	if (gran_rec[dev] < gran_min[dev])
		gran_rec[dev] = gran_min[dev];
	return true;
}

EXPORT int fakecuda_set(const char *knob, long long value)
{
	int ret = 0;

	pthread_mutex_lock(&lock);
	if (!strcmp(knob, "capacity"))
		capacity = (unsigned long long)value;
	else if (!strcmp(knob, "other_used"))
		other_bytes = (unsigned long long)value;
	else if (!strcmp(knob, "lazy_free"))
		lazy_free = value != 0;
	else if (!strcmp(knob, "hold_free"))
		hold_free = value != 0;
	else if (!strcmp(knob, "pin_us_per_gib"))
		pin_us_per_gib = value;
	else if (!strcmp(knob, "rdma_vmm"))
		rdma_vmm = (int)value;
	else if (!strcmp(knob, "numa_id"))
		numa_id = (int)value;
	else if (!strcmp(knob, "async_faults"))
		async_faults = value != 0;
	else if (!strcmp(knob, "vmm_call_us"))
		vmm_call_us = value;
	else if (!strcmp(knob, "vmm_us_per_gib"))
		vmm_us_per_gib = value;
	else if (!strcmp(knob, "vmm_sleep"))
		vmm_sleep = value != 0;
	else if (!strcmp(knob, "model"))
		model = value != 0;
	else if (!strncmp(knob, "cost_ns:", 8) && find_entry(knob + 8) >= 0)
		cost_ns[find_entry(knob + 8)] = value;
	else if (!strcmp(knob, "d2h_mbps"))
		d2h_mbps = value;
	else if (!strcmp(knob, "h2d_mbps"))
		h2d_mbps = value;
	else if (!strcmp(knob, "memset_mbps"))
		memset_mbps = value;
	else if (!strcmp(knob, "pin_ns_per_gib"))
		pin_ns_per_gib = value;
	else if (!set_gran(knob, value))
		ret = -1;
	pthread_mutex_unlock(&lock);
	return ret;
}

EXPORT void fakecuda_clear_faults(void)
{
	pthread_mutex_lock(&lock);
	nfaults = 0;
	pthread_mutex_unlock(&lock);
}

EXPORT long fakecuda_calls(const char *fn)
{
	int e = find_entry(fn);
	long n;

	pthread_mutex_lock(&lock);
	n = e >= 0 ? calls[e] : -1;
	pthread_mutex_unlock(&lock);
	return n;
}

EXPORT long long fakecuda_counter(const char *name)
{
	long long v = -1;

	pthread_mutex_lock(&lock);
	if (!strcmp(name, "capture_errors"))
		v = capture_errors;
	else if (!strcmp(name, "host_free_syncs"))
		v = host_free_syncs;
	else if (!strcmp(name, "d2h_bytes"))
		v = (long long)d2h_bytes;
	else if (!strcmp(name, "h2d_bytes"))
		v = (long long)h2d_bytes;
	else if (!strcmp(name, "create_bytes"))
		v = (long long)create_bytes;
	else if (!strcmp(name, "map_bytes"))
		v = (long long)map_bytes;
	else if (!strcmp(name, "access_bytes"))
		v = (long long)access_bytes;
	else if (!strcmp(name, "unmap_bytes"))
		v = (long long)unmap_bytes;
	else if (!strcmp(name, "release_bytes"))
		v = (long long)release_bytes;
	else if (!strcmp(name, "vmm_us"))
		v = vmm_us_total;
	else if (!strcmp(name, "model_ns"))
		v = model_ns;
	else if (!strcmp(name, "model_vmm_ns"))
		v = model_vmm_ns;
	else if (!strcmp(name, "model_copy_ns"))
		v = model_copy_ns;
	else if (!strcmp(name, "model_pin_ns"))
		v = model_pin_ns;
	pthread_mutex_unlock(&lock);
	return v;
}

EXPORT void fakecuda_stats(struct fakecuda_stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&lock);
	st->reservations = nres;
	st->handles = nphys;
	st->mappings = nmaps;
	for (int i = 0; i < nmaps; i++)
		st->accessible += maps[i].access;
	st->host_allocs = nhosts;
	st->streams = nstreams;
	for (int i = 0; i < MAX_DEVICES; i++)
		st->ctx_refs += contexts[i].refs;
	st->streams = 0;
	for (int i = 0; i < nstreams; i++) {
		st->streams += !streams[i]->engine;
		for (size_t j = 0; j < streams[i]->nops; j++) {
			if (streams[i]->ops[j].kernel)
				st->kernels++;
			else
				st->pending++;
		}
	}
	st->events = nevents;
	st->races = races;
	st->illegal = illegal;
	st->sticky = sticky;
	st->used_bytes = used_bytes;
	st->freeing_bytes = freeing_bytes;
	st->max_pin = max_pin;
	st->pin_us = pin_us_total;
	st->rdma_handles = rdma_handles;
	st->misuse = misuse;
	st->pageable_copies = pageable_copies;
	pthread_mutex_unlock(&lock);
}

/* a size with an optional K, M or G suffix; 0 if it is not one */
static long long parse_size(const char *s, char **end)
{
	long long v = strtoll(s, end, 10);

	switch (**end) {
	case 'G':
		v <<= 10;
		/* fall through */
	case 'M':
		v <<= 10;
		/* fall through */
	case 'K':
		v <<= 10;
		(*end)++;
	}
	return v;
}

/* FAKECUDA_GRAN=min[:rec][,min[:rec]...]: device 0, 1... in turn */
static void parse_gran(const char *s)
{
	char name[24], *end;

	for (int dev = 0; *s && dev < MAX_DEVICES; dev++) {
		long long min = parse_size(s, &end), rec = min;

		if (*end == ':')
			rec = parse_size(end + 1, &end);
		snprintf(name, sizeof(name), "gran_min.%d", dev);
		if (!set_gran(name, min))
			fprintf(stderr, "fakecuda: FAKECUDA_GRAN: bad minimum for device %d\n", dev);
		snprintf(name, sizeof(name), "gran_rec.%d", dev);
		if (!set_gran(name, rec))
			fprintf(stderr, "fakecuda: FAKECUDA_GRAN: bad recommended granularity for device %d\n", dev);
		if (*end != ',')
			break;
		s = end + 1;
	}
}

__attribute__((constructor)) static void fakecuda_load(void)
{
	const char *s = getenv("FAKECUDA_DEVICES");
	char *spec, *tok, *save;

	if (s)
		ndevices = atoi(s) < 0 ? 0 : atoi(s) > MAX_DEVICES ?
			   MAX_DEVICES : atoi(s);
	for (int i = 0; i < MAX_DEVICES; i++)
		gran_min[i] = gran_rec[i] = GRAN;
	s = getenv("FAKECUDA_GRAN");
	if (s)
		parse_gran(s);
	s = getenv("FAKECUDA_POISON");
	poison = s && *s && strcmp(s, "0");
	s = getenv("FAKECUDA_MEM_MIB");
	if (s && atoll(s) > 0)
		capacity = (unsigned long long)atoll(s) << 20;
	s = getenv("FAKECUDA_LAZY_FREE");
	lazy_free = s && *s && strcmp(s, "0");
	s = getenv("FAKECUDA_PIN_MS_PER_GIB");
	if (s)
		pin_us_per_gib = atoll(s) * 1000;
	s = getenv("FAKECUDA_FAIL");
	if (!s || !(spec = strdup(s)))
		return;
	for (tok = strtok_r(spec, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char name[64];
		unsigned int nth = 0, times = 1;
		int code = CUDA_ERROR_UNKNOWN;

		if (sscanf(tok, "%63[^:]:%u:%u:%d", name, &nth, &times,
			   &code) < 2 || fakecuda_fail(name, nth, times, code))
			fprintf(stderr, "fakecuda: FAKECUDA_FAIL: bad entry '%s'\n",
				tok);
	}
	free(spec);
}

/* ---- lookup helpers; lock held ---- */

static int find_res(uintptr_t va, size_t size)
{
	for (int i = 0; i < nres; i++)
		if (va >= res[i].base && size <= res[i].size &&
		    va - res[i].base <= res[i].size - size)
			return i;
	return -1;
}

static int find_phys(CUmemGenericAllocationHandle h)
{
	for (int i = 0; i < nphys; i++)
		if ((uintptr_t)phys[i] == h)
			return i;
	return -1;
}

static bool overlaps(uintptr_t a, size_t an, uintptr_t b, size_t bn)
{
	return a < b + bn && b < a + an;
}

/*
 * Is [va, va+size) covered, without holes, by whole mappings (and, when
 * need_access, accessible ones)? Partially covered mappings make it false.
 */
static bool covered(uintptr_t va, size_t size, bool whole, bool need_access)
{
	uintptr_t pos = va, end = va + size;

	while (pos < end) {
		int i;

		for (i = 0; i < nmaps; i++)
			if (pos >= maps[i].va && pos < maps[i].va + maps[i].size)
				break;
		if (i == nmaps || (need_access && !maps[i].access))
			return false;
		if (whole && (maps[i].va != pos ||
			      maps[i].va + maps[i].size > end))
			return false;
		pos = maps[i].va + maps[i].size;
	}
	return true;
}

static int find_host(const void *p, size_t size)
{
	uintptr_t a = (uintptr_t)p;

	for (int i = 0; i < nhosts; i++) {
		uintptr_t b = (uintptr_t)hosts[i].p;

		if (a >= b && size <= hosts[i].size &&
		    a - b <= hosts[i].size - size)
			return i;
	}
	return -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* does queued work (kernels: only when kernels) still use dev or host? */
static bool pending_on_kind(uintptr_t dev, size_t dsize, const void *host,
			    size_t hsize, bool kernels)
{
	for (int s = 0; s < nstreams; s++)
		for (size_t i = 0; i < streams[s]->nops; i++) {
			struct copy_op *op = &streams[s]->ops[i];

			if (kernels && !op->kernel)
				continue;
			if (dsize && overlaps(op->dev, op->size, dev, dsize))
				return true;
			if (hsize && !op->memset && !op->kernel &&
			    overlaps((uintptr_t)op->host, op->size,
				     (uintptr_t)host, hsize))
				return true;
		}
	return false;
}

/* does a queued copy or memset (not a kernel) still use dev? */
static bool pending_copy_on(uintptr_t dev, size_t dsize)
{
	for (int s = 0; s < nstreams; s++)
		for (size_t i = 0; i < streams[s]->nops; i++) {
			struct copy_op *op = &streams[s]->ops[i];

			if (!op->kernel && overlaps(op->dev, op->size, dev, dsize))
				return true;
		}
	return false;
}

static bool pending_on(uintptr_t dev, size_t dsize, const void *host,
		       size_t hsize)
{
	return pending_on_kind(dev, dsize, host, hsize, false);
}

static int find_stream(CUstream s)
{
	for (int i = 0; i < nstreams; i++)
		if (streams[i] == s)
			return i;
	return -1;
}

/* a device fault: the context is lost, as with the driver's sticky errors */
static void fault_sticky(const char *what, uintptr_t dev, size_t size)
{
	misuse++;
	illegal++;
	fprintf(stderr, "fakecuda: %s of %zu bytes at %#lx: memory not mapped: CUDA_ERROR_ILLEGAL_ADDRESS (sticky: every later call fails)\n",
		what, size, (unsigned long)dev);
	sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
}

/*
 * async_faults: a kernel ran into memory unmapped under it. The driver
 * learns of it asynchronously; the next synchronising call (and every
 * call after it) answers the sticky error. The lost context runs nothing
 * more: the kernels still queued are dropped.
 */
static void fault_surface(void)
{
	fault_pending = false;
	illegal++;
	fprintf(stderr, "fakecuda: a kernel faulted on memory unmapped under it: CUDA_ERROR_ILLEGAL_ADDRESS at this synchronisation (sticky)\n");
	sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
	for (int i = 0; i < nstreams; i++) {
		struct CUstream_st *s = streams[i];
		size_t k = 0;

		for (size_t j = 0; j < s->nops; j++)
			if (!s->ops[j].kernel)
				s->ops[k++] = s->ops[j];
		s->nops = k;
	}
}

/* a stream of this context is being captured into a CUDA graph */
static bool any_capture(void)
{
	for (int i = 0; i < nstreams; i++)
		if (streams[i]->capturing)
			return true;
	return false;
}

/*
 * A blocking stream (not CU_STREAM_NON_BLOCKING) is being captured: the
 * legacy NULL stream, which synchronises with every blocking stream, is
 * then unusable, and asking about it answers
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (the driver's documentation of
 * cuStreamIsCapturing). A non-blocking stream's capture (PyTorch's
 * streams are all non-blocking) leaves it alone, and the driver says
 * nothing about it there.
 */
static bool blocking_capture(void)
{
	for (int i = 0; i < nstreams; i++)
		if (streams[i]->capturing && !streams[i]->nonblocking)
			return true;
	return false;
}

/* a use of the legacy stream while a blocking stream is captured */
static CUresult legacy_check(const char *fn)
{
	if (!blocking_capture())
		return CUDA_SUCCESS;
	capture_errors++;
	misuse++;
	fprintf(stderr, "fakecuda: %s: the legacy stream while a blocking stream is captured (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)\n",
		fn);
	return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

/* the legacy stream's work: every blocking stream's, to its end */
static bool run_legacy(void)
{
	bool ok = true;

	for (int i = 0; i < nstreams; i++)
		if (!streams[i]->nonblocking)
			ok &= run_stream(streams[i]);
	return ok;
}

/*
 * A call that synchronises or may not run while a graph is captured:
 * refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (the driver also
 * invalidates the capture), counted.
 */
static CUresult capture_check(const char *fn)
{
	if (!any_capture())
		return CUDA_SUCCESS;
	capture_errors++;
	misuse++;
	fprintf(stderr, "fakecuda: %s: not allowed while a stream is captured (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)\n",
		fn);
	return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* execute one op; false if its memory is gone */
static bool exec_op(struct CUstream_st *s, struct copy_op *op)
{
	if (!covered(op->dev, op->size, false, true) ||
	    (op->pinned && find_host(op->host, op->size) < 0)) {
		if (op->kernel) {
			fault_sticky("kernel", op->dev, op->size);
		} else {
			misuse++;
			fprintf(stderr, "fakecuda: stream: queued copy of %zu bytes at %#lx: memory no longer mapped\n",
				op->size, (unsigned long)op->dev);
		}
		s->failed = true;
		return false;
	}
	if (model) {
		long long ns = op->kernel ? 0 : op->memset ?
			       model_bytes_ns(op->size, memset_mbps) :
			       model_bytes_ns(op->size, op->to_host ? d2h_mbps :
					      h2d_mbps);

		model_ns += ns;
		model_copy_ns += ns;
		return true;
	}
	if (op->kernel) {
		if (op->writes)
			for (size_t j = 0; j < op->size / 4; j++)
				((unsigned int *)op->dev)[j] = op->value;
	} else if (op->memset) {
		for (size_t j = 0; j < op->size / 4; j++)
			((unsigned int *)op->dev)[j] = op->value;
	} else if (op->to_host) {
		memcpy(op->host, (void *)op->dev, op->size);
	} else {
		memcpy((void *)op->dev, op->host, op->size);
	}
	return true;
}

static void run_upto(struct CUstream_st *s, uint64_t seq, int depth);

/* before s runs op: what it waits for (cuStreamWaitEvent) runs first */
static void run_deps(struct CUstream_st *s, const struct copy_op *op,
		     int depth)
{
	for (size_t w = 0; w < s->nwaits; w++)
		if (op->seq > s->waits[w].after)
			run_upto(s->waits[w].s, s->waits[w].seq, depth + 1);
}

/* run s's ops with seq <= seq, in order */
static void run_upto(struct CUstream_st *s, uint64_t seq, int depth)
{
	size_t n = 0;

	if (depth > 8)
		return;
	while (n < s->nops && s->ops[n].seq <= seq) {
		run_deps(s, &s->ops[n], depth);
		exec_op(s, &s->ops[n]);
		n++;
	}
	memmove(s->ops, s->ops + n, (s->nops - n) * sizeof(*s->ops));
	s->nops -= n;
}

/* run everything queued on s; false if an op hit memory that is gone */
static bool run_stream(struct CUstream_st *s)
{
	run_upto(s, UINT64_MAX, 0);
	return !s->failed;
}

/* released memory counts as used until a synchronisation (lazy_free) */
static void synchronized(void)
{
	if (!hold_free)
		freeing_bytes = 0;
}

/* kernels whose time has come finish by themselves (in stream order) */
static void retire_due(void)
{
	uint64_t now = 0;

	for (int i = 0; i < nstreams; i++) {
		struct CUstream_st *s = streams[i];
		size_t n = 0;

		while (n < s->nops && s->ops[n].kernel && s->ops[n].due) {
			if (!now)
				now = now_ns();
			if (s->ops[n].due > now)
				break;
			exec_op(s, &s->ops[n]);
			n++;
		}
		if (n) {
			memmove(s->ops, s->ops + n,
				(s->nops - n) * sizeof(*s->ops));
			s->nops -= n;
		}
	}
}

/* is stream w ordered after op (seq) of stream s? */
static bool ordered_after(struct CUstream_st *w, struct CUstream_st *s,
			  uint64_t seq)
{
	for (size_t i = 0; i < w->nwaits; i++)
		if (w->waits[i].s == s && w->waits[i].seq >= seq)
			return true;
	return false;
}

/*
 * A device-to-host copy queued on w over [dev, +size) while another
 * stream still has a kernel writing there that w is not ordered after:
 * the backup would read stale or torn data.
 */
static bool races_pending_write(struct CUstream_st *w, uintptr_t dev,
				size_t size)
{
	for (int i = 0; i < nstreams; i++) {
		struct CUstream_st *s = streams[i];

		if (s == w)
			continue;
		for (size_t j = 0; j < s->nops; j++) {
			struct copy_op *op = &s->ops[j];

			if (!op->kernel || !op->writes ||
			    !overlaps(op->dev, op->size, dev, size))
				continue;
			if (!ordered_after(w, s, op->seq))
				return true;
		}
	}
	return false;
}

/* ---- the driver API ---- */

EXPORT CUresult cuGetErrorName(CUresult error, const char **str)
{
	static const struct { CUresult c; const char *n; } names[] = {
#define N(c) { c, #c }
		N(CUDA_SUCCESS), N(CUDA_ERROR_INVALID_VALUE),
		N(CUDA_ERROR_OUT_OF_MEMORY), N(CUDA_ERROR_NOT_INITIALIZED),
		N(CUDA_ERROR_DEINITIALIZED), N(CUDA_ERROR_NO_DEVICE),
		N(CUDA_ERROR_INVALID_DEVICE), N(CUDA_ERROR_INVALID_CONTEXT),
		N(CUDA_ERROR_CONTEXT_IS_DESTROYED), N(CUDA_ERROR_NOT_FOUND),
		N(CUDA_ERROR_ILLEGAL_ADDRESS), N(CUDA_ERROR_INVALID_HANDLE),
		N(CUDA_ERROR_NOT_PERMITTED), N(CUDA_ERROR_NOT_SUPPORTED),
		N(CUDA_ERROR_UNKNOWN), N(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED),
		N(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT),
#undef N
	};
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (enter(E_cuGetErrorName) == CUDA_SUCCESS && str) {
		*str = NULL;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (names[i].c == error) {
				*str = names[i].n;
				rc = CUDA_SUCCESS;
			}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

EXPORT CUresult cuInit(unsigned int flags)
{
	BEGIN(E_cuInit);
	if (flags)
		rc_ = bad("cuInit", "flags must be 0");
	else if (!ndevices)
		rc_ = CUDA_ERROR_NO_DEVICE;
	else
		initialized = true;
	END;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	BEGIN(E_cuDeviceGet);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!dev)
		rc_ = bad("cuDeviceGet", "NULL device");
	else if (ordinal < 0 || ordinal >= ndevices)
		rc_ = CUDA_ERROR_INVALID_DEVICE;
	else
		*dev = ordinal;
	END;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	BEGIN(E_cuDevicePrimaryCtxRetain);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!ctx)
		rc_ = bad("cuDevicePrimaryCtxRetain", "NULL context");
	else if (dev < 0 || dev >= ndevices)
		rc_ = CUDA_ERROR_INVALID_DEVICE;
	else {
		contexts[dev].device = dev;
		contexts[dev].refs++;
		*ctx = &contexts[dev];
	}
	END;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	BEGIN(E_cuDevicePrimaryCtxRelease);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (dev < 0 || dev >= ndevices)
		rc_ = CUDA_ERROR_INVALID_DEVICE;
	else if (contexts[dev].refs <= 0)
		rc_ = bad("cuDevicePrimaryCtxRelease", "context not retained");
	else
		contexts[dev].refs--;
	END;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	BEGIN(E_cuCtxSetCurrent);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (ctx && (ctx < &contexts[0] || ctx >= &contexts[MAX_DEVICES]))
		rc_ = bad("cuCtxSetCurrent", "unknown context");
	else
		current = ctx;
	END;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	BEGIN(E_cuCtxGetCurrent);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!ctx)
		rc_ = bad("cuCtxGetCurrent", "NULL context");
	else
		*ctx = current;
	END;
}

static CUresult check_prop(const char *fn, const CUmemAllocationProp *prop)
{
	if (!prop)
		return bad(fn, "NULL prop");
	if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return bad(fn, "prop.type is not CU_MEM_ALLOCATION_TYPE_PINNED");
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return bad(fn, "prop.location.type is not a device");
	if (prop->location.id < 0 || prop->location.id >= ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
	    prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return bad(fn, "only the POSIX file descriptor handle type is modelled");
	if (prop->allocFlags.gpuDirectRDMACapable && !rdma_vmm)
		return bad(fn, "gpuDirectRDMACapable on a device without GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *gran,
		const CUmemAllocationProp *prop,
		CUmemAllocationGranularity_flags option)
{
	BEGIN(E_cuMemGetAllocationGranularity);
	if (!initialized) {
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
		goto out;
	}
	rc_ = check_prop("cuMemGetAllocationGranularity", prop);
	if (rc_ != CUDA_SUCCESS)
		goto out;
	if (!gran || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
		      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		rc_ = bad("cuMemGetAllocationGranularity", "bad argument");
	else if (option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
		*gran = gran_rec[prop->location.id];
	else
		*gran = gran_min[prop->location.id];
	END;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
				    size_t alignment, CUdeviceptr addr,
				    unsigned long long flags)
{
	uintptr_t base, start;
	size_t align, span;
	void *m;

	(void)addr;	/* only a hint, as for the driver */
	BEGIN_CTX(E_cuMemAddressReserve, "cuMemAddressReserve");
	if (!ptr || !size || flags || !aligned(size) ||
	    (alignment & (alignment - 1))) {
		rc_ = bad("cuMemAddressReserve",
			  "NULL ptr, size 0 or not a multiple of the granularity, bad alignment or flags");
		goto out;
	}
	if (nres == MAX_OBJS) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	align = alignment > gran_floor() ? alignment : gran_floor();
	/*
	 * Aligned to align and never to more: a caller that needs a larger
	 * alignment (a device's granularity) must ask for it.
	 */
	span = size + 2 * align;
	m = mmap(NULL, span, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	base = (uintptr_t)m;
	start = (base + align - 1) & ~(uintptr_t)(align - 1);
	if (!(start & (2 * align - 1)))
		start += align;
	if (start > base)
		munmap(m, start - base);
	if (base + span > start + size)
		munmap((void *)(start + size), base + span - start - size);
	res[nres++] = (struct reservation){ start, size };
	*ptr = start;
	END;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	int i;

	BEGIN_CTX(E_cuMemAddressFree, "cuMemAddressFree");
	for (i = 0; i < nres; i++)
		if (res[i].base == ptr && res[i].size == size)
			break;
	if (i == nres) {
		rc_ = bad("cuMemAddressFree", "not a reservation (base and size must match)");
		goto out;
	}
	for (int j = 0; j < nmaps; j++)
		if (overlaps(maps[j].va, maps[j].size, ptr, size)) {
			rc_ = bad("cuMemAddressFree", "range still mapped");
			goto out;
		}
	munmap((void *)ptr, size);
	res[i] = res[--nres];
	END;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			    const CUmemAllocationProp *prop,
			    unsigned long long flags)
{
	long long cost = 0;
	struct phys *p;

	BEGIN_CTX(E_cuMemCreate, "cuMemCreate");
	rc_ = check_prop("cuMemCreate", prop);
	if (rc_ != CUDA_SUCCESS)
		goto out;
	if (!handle || !size || !aligned_dev(size, prop->location.id) || flags) {
		rc_ = bad("cuMemCreate", "NULL handle, size 0 or not a multiple of the device's granularity, or flags");
		goto out;
	}
	if (used_bytes + freeing_bytes + other_bytes + size > capacity) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (nphys == MAX_OBJS || !(p = calloc(1, sizeof(*p)))) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	p->fd = model ? -1 : memfd_create("fakecuda-phys", MFD_CLOEXEC);
	if (!model && (p->fd < 0 || ftruncate(p->fd, size))) {
		if (p->fd >= 0)
			close(p->fd);
		free(p);
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (poison && !model) {
		void *m = mmap(NULL, size, PROT_WRITE, MAP_SHARED, p->fd, 0);

		if (m != MAP_FAILED) {
			memset(m, 0xa5, size);
			munmap(m, size);
		}
	}
	p->size = size;
	used_bytes += size;
	create_bytes += size;
	cost = vmm_cost(size);
	rdma_handles += prop->allocFlags.gpuDirectRDMACapable != 0;
	p->device = prop->location.id;
	phys[nphys++] = p;
	*handle = (uintptr_t)p;
	END_COST(cost);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	long long cost = 0;
	int i;

	BEGIN_CTX(E_cuMemRelease, "cuMemRelease");
	i = find_phys(handle);
	if (i < 0) {
		rc_ = bad("cuMemRelease", "unknown or already released handle");
	} else if (phys[i]->maps) {
		rc_ = bad("cuMemRelease", "handle still mapped (gpusleep unmaps first)");
	} else {
		if (phys[i]->fd >= 0)
			close(phys[i]->fd);
		used_bytes -= phys[i]->size;
		release_bytes += phys[i]->size;
		cost = vmm_cost(phys[i]->size);
		if (lazy_free)
			freeing_bytes += phys[i]->size;
		free(phys[i]);
		phys[i] = phys[--nphys];
	}
	END_COST(cost);
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			 CUmemGenericAllocationHandle handle,
			 unsigned long long flags)
{
	long long cost = 0;
	struct phys *p;
	int i;

	BEGIN_CTX(E_cuMemMap, "cuMemMap");
	i = find_phys(handle);
	if (i < 0) {
		rc_ = bad("cuMemMap", "unknown or released handle");
		goto out;
	}
	p = phys[i];
	if (!size || !aligned_dev(ptr, p->device) ||
	    !aligned_dev(size, p->device) || offset || flags) {
		rc_ = bad("cuMemMap", "address or size not a multiple of the device's granularity, or offset/flags not 0");
		goto out;
	}
	if (size > p->size) {
		rc_ = bad("cuMemMap", "size larger than the allocation");
		goto out;
	}
	if (find_res(ptr, size) < 0) {
		rc_ = bad("cuMemMap", "range not inside one reservation");
		goto out;
	}
	for (int j = 0; j < nmaps; j++)
		if (overlaps(maps[j].va, maps[j].size, ptr, size)) {
			rc_ = bad("cuMemMap", "range already mapped");
			goto out;
		}
	if (nmaps == MAX_OBJS ||
	    (!model && mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
			    p->fd, 0) == MAP_FAILED)) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	p->maps++;
	maps[nmaps++] = (struct mapping){ ptr, size, p, false, 0, 0 };
	map_bytes += size;
	cost = vmm_cost(size);
	END_COST(cost);
}

/*
 * One descriptor per device, each setting that device's access to the
 * range (the others' stays): the memory is host memory, readable and
 * writable while any device may use it.
 */
EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
			       const CUmemAccessDesc *desc, size_t count)
{
	long long cost = 0;
	unsigned int rw = 0, ro = 0, none = 0;
	int prot;

	BEGIN_CTX(E_cuMemSetAccess, "cuMemSetAccess");
	if (!desc || !count || count > (size_t)ndevices) {
		rc_ = bad("cuMemSetAccess", "expects one descriptor per device, at most the device count");
		goto out;
	}
	for (size_t k = 0; k < count; k++) {
		unsigned int bit;

		if (desc[k].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
		    desc[k].location.id < 0 ||
		    desc[k].location.id >= ndevices) {
			rc_ = bad("cuMemSetAccess", "a descriptor is not for a device of this system");
			goto out;
		}
		bit = 1U << desc[k].location.id;
		if ((rw | ro | none) & bit) {
			rc_ = bad("cuMemSetAccess", "two descriptors for one device");
			goto out;
		}
		switch (desc[k].flags) {
		case CU_MEM_ACCESS_FLAGS_PROT_NONE:
			none |= bit;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READ:
			ro |= bit;
			break;
		case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
			rw |= bit;
			break;
		default:
			rc_ = bad("cuMemSetAccess", "bad access flags");
			goto out;
		}
	}
	if (!size || !aligned(ptr) || !aligned(size) ||
	    !covered(ptr, size, true, false)) {
		rc_ = bad("cuMemSetAccess", "range not exactly covered by mappings");
		goto out;
	}
	for (int j = 0; j < nmaps; j++) {
		struct mapping *m = &maps[j];
		unsigned int set = rw | ro | none;

		if (!overlaps(m->va, m->size, ptr, size))
			continue;
		m->rw = (m->rw & ~set) | rw;
		m->ro = (m->ro & ~set) | ro;
		m->access = m->rw || m->ro;
		prot = m->rw ? PROT_READ | PROT_WRITE :
		       m->ro ? PROT_READ : PROT_NONE;
		if (!model && mprotect((void *)m->va, m->size, prot)) {
			rc_ = CUDA_ERROR_UNKNOWN;
			goto out;
		}
	}
	access_bytes += size;
	cost = vmm_cost(size);
	END_COST(cost);
}

/* the access device location->id has to the mapping at ptr */
EXPORT CUresult cuMemGetAccess(unsigned long long *flags,
			       const CUmemLocation *location, CUdeviceptr ptr)
{
	int j;

	BEGIN_CTX(E_cuMemGetAccess, "cuMemGetAccess");
	if (!flags || !location ||
	    location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    location->id < 0 || location->id >= ndevices) {
		rc_ = bad("cuMemGetAccess", "NULL argument or not a device of this system");
		goto out;
	}
	for (j = 0; j < nmaps; j++)
		if (ptr >= maps[j].va && ptr < maps[j].va + maps[j].size)
			break;
	if (j == nmaps) {
		rc_ = bad("cuMemGetAccess", "address not mapped");
		goto out;
	}
	*flags = maps[j].rw & (1U << location->id) ?
		 CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
		 maps[j].ro & (1U << location->id) ?
		 CU_MEM_ACCESS_FLAGS_PROT_READ : CU_MEM_ACCESS_FLAGS_PROT_NONE;
	END;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
	BEGIN(E_cuDeviceGetCount);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!count)
		rc_ = bad("cuDeviceGetCount", "NULL count");
	else
		*count = ndevices;
	END;
}

/* for the tests: device dev's access to the mapping at va (CU_MEM_ACCESS_FLAGS_*), -1 if unmapped */
EXPORT int fakecuda_access(void *va, int dev)
{
	int ret = -1;

	pthread_mutex_lock(&lock);
	for (int j = 0; j < nmaps; j++)
		if ((uintptr_t)va >= maps[j].va &&
		    (uintptr_t)va < maps[j].va + maps[j].size && dev >= 0 &&
		    dev < MAX_DEVICES) {
			ret = maps[j].rw & (1U << dev) ? 3 :
			      maps[j].ro & (1U << dev) ? 1 : 0;
			break;
		}
	pthread_mutex_unlock(&lock);
	return ret;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	long long cost = 0;

	BEGIN_CTX(E_cuMemUnmap, "cuMemUnmap");
	if (!size || !aligned(ptr) || !aligned(size) ||
	    !covered(ptr, size, true, false)) {
		rc_ = bad("cuMemUnmap", "range not exactly covered by whole mappings");
		goto out;
	}
	if (pending_on_kind(ptr, size, NULL, 0, true)) {
		/* on a GPU the unmap goes through and the kernel faults */
		if (async_faults) {
			fault_pending = true;	/* seen at the next sync */
		} else {
			fault_sticky("cuMemUnmap under a running kernel", ptr,
				     size);
			rc_ = sticky;
			goto out;
		}
	}
	if (pending_copy_on(ptr, size)) {
		rc_ = bad("cuMemUnmap", "a queued copy still uses the range (synchronize first)");
		goto out;
	}
	if (!model && mmap((void *)ptr, size, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			   MAP_FIXED, -1, 0) == MAP_FAILED) {
		rc_ = CUDA_ERROR_UNKNOWN;
		goto out;
	}
	for (int j = 0; j < nmaps; )
		if (overlaps(maps[j].va, maps[j].size, ptr, size)) {
			maps[j].p->maps--;
			maps[j] = maps[--nmaps];
		} else {
			j++;
		}
	unmap_bytes += size;
	cost = vmm_cost(size);
	END_COST(cost);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
	void *m;

	BEGIN_CTX(E_cuMemHostAlloc, "cuMemHostAlloc");
	if (!pp || !size || (flags & ~0xfu)) {
		rc_ = bad("cuMemHostAlloc", "NULL pointer, size 0 or bad flags");
		goto out;
	}
	/* the model: an address range only, no memory behind it */
	m = mmap(NULL, size, model ? PROT_NONE : PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | (model ? MAP_NORESERVE : 0),
		 -1, 0);
	if (nhosts == MAX_OBJS || m == MAP_FAILED) {
		if (m != MAP_FAILED)
			munmap(m, size);
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	hosts[nhosts++] = (struct host_buf){ m, size };
	*pp = m;
	if (size > max_pin)
		max_pin = size;
	if (model) {
		long long ns = (long long)((double)size / (1ULL << 30) *
					   (double)pin_ns_per_gib);

		model_ns += ns;
		model_pin_ns += ns;
	} else if (pin_us_per_gib > 0) {
		/* pinning costs time per GiB (the driver locks every page) */
		long long us = (long long)((double)size / (1ULL << 30) *
					   pin_us_per_gib);

		pin_us_total += us;
		pthread_mutex_unlock(&lock);
		usleep(us);
		return CUDA_SUCCESS;
	}
	END;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	int i;

	BEGIN_CTX(E_cuMemFreeHost, "cuMemFreeHost");
	for (i = 0; i < nhosts; i++)
		if (hosts[i].p == p)
			break;
	if (i == nhosts) {
		rc_ = bad("cuMemFreeHost", "not a cuMemHostAlloc pointer");
	} else if (pending_on(0, 0, p, hosts[i].size)) {
		rc_ = bad("cuMemFreeHost", "a queued copy still uses the buffer (synchronize first)");
	} else if ((rc_ = capture_check("cuMemFreeHost")) != CUDA_SUCCESS) {
		goto out;
	} else {
		/* the driver synchronises the device before freeing */
		host_free_syncs++;
		run_all();
		synchronized();
		munmap(p, hosts[i].size);
		hosts[i] = hosts[--nhosts];
	}
	END;
}

static CUresult queue_op(struct CUstream_st *s, struct copy_op *op)
{
	if (s->nops == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		struct copy_op *ops = realloc(s->ops, cap * sizeof(*ops));

		if (!ops)
			return CUDA_ERROR_OUT_OF_MEMORY;
		s->ops = ops;
		s->cap = cap;
	}
	op->seq = ++s->seq;
	s->ops[s->nops++] = *op;
	return CUDA_SUCCESS;
}

static CUresult queue_copy(const char *fn, bool to_host, void *host,
			   CUdeviceptr dev, size_t size, CUstream hs)
{
	struct CUstream_st *s = hs;
	struct copy_op op = { .to_host = to_host, .host = host, .dev = dev,
			      .size = size };

	if (!host || !size)
		return bad(fn, "NULL host pointer or size 0");
	if (!covered(dev, size, false, true))
		return bad(fn, "device range not mapped and accessible");
	if (s && find_stream(s) < 0)
		return bad(fn, "unknown stream");
	op.pinned = find_host(host, size) >= 0;
	if (to_host)
		d2h_bytes += size;
	else
		h2d_bytes += size;
	if (to_host && s && races_pending_write(s, dev, size)) {
		races++;
		bad(fn, "copies device memory that a kernel on another stream may still be writing (synchronize or cuStreamWaitEvent first)");
	}
	if (!op.pinned || !s) {
		/* pageable memory or the NULL stream: done before returning */
		pageable_copies += !op.pinned;
		if (model) {
			long long ns = model_bytes_ns(size, to_host ? d2h_mbps :
						      h2d_mbps);

			model_ns += ns;
			model_copy_ns += ns;
		} else if (to_host)
			memcpy(host, (void *)dev, size);
		else
			memcpy((void *)dev, host, size);
		return CUDA_SUCCESS;
	}
	return queue_op(s, &op);
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value,
				 size_t count, CUstream hs)
{
	struct CUstream_st *s = hs;
	struct copy_op op = { .memset = true, .value = value, .dev = dst,
			      .size = count * 4 };

	BEGIN_CTX(E_cuMemsetD32Async, "cuMemsetD32Async");
	if (!count || (dst & 3) || count > SIZE_MAX / 4 ||
	    !covered(dst, op.size, false, true)) {
		rc_ = bad("cuMemsetD32Async", "range not mapped and accessible, or misaligned");
		goto out;
	}
	if (s && find_stream(s) < 0) {
		rc_ = bad("cuMemsetD32Async", "unknown stream");
		goto out;
	}
	if (!s && model) {
		model_ns += model_bytes_ns(op.size, memset_mbps);
		model_copy_ns += model_bytes_ns(op.size, memset_mbps);
	} else if (!s) {
		for (size_t j = 0; j < count; j++)
			((unsigned int *)dst)[j] = value;
	} else {
		rc_ = queue_op(s, &op);
	}
	END;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t size,
				     CUstream s)
{
	BEGIN_CTX(E_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync");
	rc_ = queue_copy("cuMemcpyDtoHAsync", true, dst, src, size, s);
	END;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
				     size_t size, CUstream s)
{
	BEGIN_CTX(E_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync");
	rc_ = queue_copy("cuMemcpyHtoDAsync", false, (void *)src, dst, size, s);
	END;
}

/* the pre-3.2 entry points with 32-bit sizes: a caller that ends up here
 * looked up the wrong (unversioned) symbol */
EXPORT CUresult cuMemcpyDtoHAsync(void *dst, unsigned int src,
				  unsigned int size, CUstream s)
{
	(void)dst, (void)src, (void)size, (void)s;
	pthread_mutex_lock(&lock);
	bad("cuMemcpyDtoHAsync", "v1 ABI (32-bit) entry point called; use cuMemcpyDtoHAsync_v2");
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemcpyHtoDAsync(unsigned int dst, const void *src,
				  unsigned int size, CUstream s)
{
	(void)dst, (void)src, (void)size, (void)s;
	pthread_mutex_lock(&lock);
	bad("cuMemcpyHtoDAsync", "v1 ABI (32-bit) entry point called; use cuMemcpyHtoDAsync_v2");
	pthread_mutex_unlock(&lock);
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags)
{
	struct CUstream_st *s;

	BEGIN_CTX(E_cuStreamCreate, "cuStreamCreate");
	if (!ps || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING)) {
		rc_ = bad("cuStreamCreate", "NULL stream or bad flags");
		goto out;
	}
	if (nstreams == MAX_OBJS || !(s = calloc(1, sizeof(*s)))) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	s->live = true;
	s->nonblocking = flags & CU_STREAM_NON_BLOCKING;
	streams[nstreams++] = s;
	*ps = s;
	END;
}

/*
 * An injected fault here drops the queued work unrun, as a stream in error
 * would: the caller sees the failure and nothing stays in flight.
 */
EXPORT CUresult cuStreamSynchronize(CUstream hs)
{
	CUresult rc, fault;
	int i;

	pthread_mutex_lock(&lock);
	fault = enter(E_cuStreamSynchronize);
	rc = need_ctx("cuStreamSynchronize");
	if (rc != CUDA_SUCCESS)
		goto out;
	if (!hs) {
		/* the legacy stream: waits for every blocking stream */
		if (fault == CUDA_SUCCESS &&
		    (rc = legacy_check("cuStreamSynchronize")) == CUDA_SUCCESS) {
			wait_hung(NULL);
			if (!run_legacy())
				rc = CUDA_ERROR_ILLEGAL_ADDRESS;
			else
				synchronized();
		}
		goto out;
	}
	i = find_stream(hs);
	if (i < 0)
		rc = bad("cuStreamSynchronize", "unknown stream");
	else if (streams[i]->capturing)
		rc = capture_check("cuStreamSynchronize");
	else if (fault != CUDA_SUCCESS)
		streams[i]->nops = 0;
	else if (wait_hung(streams[i]), !run_stream(streams[i]))
		rc = CUDA_ERROR_ILLEGAL_ADDRESS;
	else
		synchronized();
	if (sticky)
		rc = sticky;
out:
	pthread_mutex_unlock(&lock);
	return fault != CUDA_SUCCESS ? fault : rc;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hs)
{
	int i;

	BEGIN_CTX(E_cuStreamDestroy, "cuStreamDestroy");
	i = find_stream(hs);
	if (i < 0) {
		rc_ = bad("cuStreamDestroy", "unknown stream");
		goto out;
	}
	/* the driver lets queued work finish; run it now */
	run_stream(streams[i]);
	/* nobody waits on it any more */
	for (int j = 0; j < nstreams; j++)
		for (size_t k = 0; k < streams[j]->nwaits; )
			if (streams[j]->waits[k].s == hs)
				streams[j]->waits[k] =
					streams[j]->waits[--streams[j]->nwaits];
			else
				k++;
	for (int j = 0; j < nevents; j++)
		if (events[j]->s == hs)
			events[j]->s = NULL;
	free(streams[i]->waits);
	free(streams[i]->ops);
	free(streams[i]);
	streams[i] = streams[--nstreams];
	END;
}

/* run every stream to its end (cuCtxSynchronize); false on a fault */
static bool run_all(void)
{
	bool ok = true;

	for (int i = 0; i < nstreams; i++)
		ok &= run_stream(streams[i]);
	return ok;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	BEGIN_CTX(E_cuCtxSynchronize, "cuCtxSynchronize");
	rc_ = capture_check("cuCtxSynchronize");
	if (rc_ != CUDA_SUCCESS)
		goto out;
	wait_hung(NULL);
	if (!run_all())
		rc_ = CUDA_ERROR_ILLEGAL_ADDRESS;
	else
		synchronized();
	if (sticky)
		rc_ = sticky;
	END;
}

static int find_event(CUevent ev)
{
	for (int i = 0; i < nevents; i++)
		if (events[i] == ev)
			return i;
	return -1;
}

EXPORT CUresult cuEventCreate(CUevent *pev, unsigned int flags)
{
	struct CUevent_st *ev;

	BEGIN_CTX(E_cuEventCreate, "cuEventCreate");
	if (!pev || (flags & ~0xfu)) {
		rc_ = bad("cuEventCreate", "NULL event or bad flags");
		goto out;
	}
	if (nevents == MAX_OBJS || !(ev = calloc(1, sizeof(*ev)))) {
		rc_ = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	events[nevents++] = ev;
	*pev = ev;
	END;
}

EXPORT CUresult cuEventRecord(CUevent hev, CUstream hs)
{
	int i;

	BEGIN_CTX(E_cuEventRecord, "cuEventRecord");
	i = find_event(hev);
	if (i < 0 || (hs && find_stream(hs) < 0)) {
		rc_ = bad("cuEventRecord", "unknown event or stream");
		goto out;
	}
	if (!hs) {
		rc_ = legacy_check("cuEventRecord");
		if (rc_ != CUDA_SUCCESS)
			goto out;
	}
	events[i]->s = hs;
	events[i]->seq = hs ? hs->seq : 0;
	events[i]->legacy = !hs;
	/* in a capture the record is a node of the graph, not an event */
	events[i]->captured = hs && hs->capturing;
	END;
}

EXPORT CUresult cuEventSynchronize(CUevent hev)
{
	int i;

	BEGIN_CTX(E_cuEventSynchronize, "cuEventSynchronize");
	i = find_event(hev);
	if (i < 0) {
		rc_ = bad("cuEventSynchronize", "unknown event");
		goto out;
	}
	if (events[i]->captured) {
		/* waiting for a node of a graph being captured */
		rc_ = capture_check("cuEventSynchronize");
		if (rc_ == CUDA_SUCCESS)
			rc_ = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		goto out;
	}
	if (events[i]->s) {
		wait_hung(events[i]->s);
		run_upto(events[i]->s, events[i]->seq, 0);
		if (events[i]->s->failed)
			rc_ = CUDA_ERROR_ILLEGAL_ADDRESS;
	} else if (events[i]->legacy) {
		/* over-approximated: the blocking streams to their end */
		wait_hung(NULL);
		if (!run_legacy())
			rc_ = CUDA_ERROR_ILLEGAL_ADDRESS;
	}
	synchronized();
	if (sticky)
		rc_ = sticky;
	END;
}

EXPORT CUresult cuEventQuery(CUevent hev)
{
	int i;

	BEGIN_CTX(E_cuEventQuery, "cuEventQuery");
	i = find_event(hev);
	if (i < 0) {
		rc_ = bad("cuEventQuery", "unknown event");
		goto out;
	}
	if (events[i]->s && events[i]->s->nops &&
	    events[i]->s->ops[0].seq <= events[i]->seq)
		rc_ = CUDA_ERROR_NOT_READY;
	END;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hev)
{
	int i;

	BEGIN_CTX(E_cuEventDestroy, "cuEventDestroy");
	i = find_event(hev);
	if (i < 0) {
		rc_ = bad("cuEventDestroy", "unknown event");
		goto out;
	}
	free(events[i]);
	events[i] = events[--nevents];
	END;
}

EXPORT CUresult cuStreamWaitEvent(CUstream hs, CUevent hev, unsigned int flags)
{
	struct CUstream_st *w = hs;
	int i;

	BEGIN_CTX(E_cuStreamWaitEvent, "cuStreamWaitEvent");
	i = find_event(hev);
	if (i < 0 || !w || find_stream(w) < 0 || flags) {
		rc_ = bad("cuStreamWaitEvent", "unknown event, unknown or NULL stream, or flags");
		goto out;
	}
	if (!events[i]->s || events[i]->s == w)
		goto out;	/* nothing to wait for */
	if (w->nwaits == w->wcap) {
		size_t cap = w->wcap ? 2 * w->wcap : 8;
		struct wait_dep *n = realloc(w->waits, cap * sizeof(*n));

		if (!n) {
			rc_ = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		w->waits = n;
		w->wcap = cap;
	}
	w->waits[w->nwaits++] = (struct wait_dep){ events[i]->s,
						   events[i]->seq, w->seq };
	END;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp)
{
	unsigned long long taken;

	BEGIN_CTX(E_cuMemGetInfo, "cuMemGetInfo");
	if (!freep || !totalp) {
		rc_ = bad("cuMemGetInfo", "NULL pointer");
		goto out;
	}
	taken = used_bytes + freeing_bytes + other_bytes;
	*totalp = capacity;
	*freep = taken > capacity ? 0 : capacity - taken;
	END;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib,
				     CUdevice dev)
{
	BEGIN(E_cuDeviceGetAttribute);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!pi)
		rc_ = bad("cuDeviceGetAttribute", "NULL value");
	else if (dev < 0 || dev >= ndevices)
		rc_ = CUDA_ERROR_INVALID_DEVICE;
	else if (attrib == CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)
		*pi = rdma_vmm;
	else if (attrib == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)
		*pi = 1;
	else if (attrib == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
		*pi = 1;
	else if (attrib == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)
		*pi = numa_id;
	else
		rc_ = CUDA_ERROR_INVALID_VALUE;
	END;
}

/*
 * The legacy NULL stream is never captured itself, but asking about it
 * while a blocking stream is captured is CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * (it would synchronise with the captured stream); a non-blocking
 * stream's capture is not seen there (blocking_capture()).
 */
EXPORT CUresult cuStreamIsCapturing(CUstream hs,
				    CUstreamCaptureStatus *status)
{
	int i;

	BEGIN_CTX(E_cuStreamIsCapturing, "cuStreamIsCapturing");
	if (!status) {
		rc_ = bad("cuStreamIsCapturing", "NULL status");
		goto out;
	}
	if (!hs) {
		/* nothing is said about a non-blocking stream's capture */
		*status = CU_STREAM_CAPTURE_STATUS_NONE;
		if (blocking_capture())
			rc_ = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		goto out;
	}
	i = find_stream(hs);
	if (i < 0) {
		rc_ = bad("cuStreamIsCapturing", "unknown stream");
		goto out;
	}
	*status = streams[i]->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE :
		  CU_STREAM_CAPTURE_STATUS_NONE;
	END;
}

/* Device n sits at bus n + 1: "00000000:01:00.0" for device 0. */
EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
	BEGIN(E_cuDeviceGetPCIBusId);
	if (!initialized)
		rc_ = CUDA_ERROR_NOT_INITIALIZED;
	else if (!id || len < 13)
		rc_ = bad("cuDeviceGetPCIBusId", "NULL or short buffer");
	else if (dev < 0 || dev >= ndevices)
		rc_ = CUDA_ERROR_INVALID_DEVICE;
	else
		snprintf(id, len, "00000000:%02X:00.0", dev + 1);
	END;
}

/* ---- cuGetProcAddress ---- */

static const struct { const char *name; void *fn; } procs[] = {
	{ "cuGetProcAddress", (void *)cuGetProcAddress_v2 },
	{ "cuGetErrorName", (void *)cuGetErrorName },
	{ "cuInit", (void *)cuInit },
	{ "cuDeviceGet", (void *)cuDeviceGet },
	{ "cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain },
	{ "cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2 },
	{ "cuCtxSetCurrent", (void *)cuCtxSetCurrent },
	{ "cuCtxGetCurrent", (void *)cuCtxGetCurrent },
	{ "cuMemGetAllocationGranularity", (void *)cuMemGetAllocationGranularity },
	{ "cuMemAddressReserve", (void *)cuMemAddressReserve },
	{ "cuMemAddressFree", (void *)cuMemAddressFree },
	{ "cuMemCreate", (void *)cuMemCreate },
	{ "cuMemRelease", (void *)cuMemRelease },
	{ "cuMemMap", (void *)cuMemMap },
	{ "cuMemSetAccess", (void *)cuMemSetAccess },
	{ "cuMemUnmap", (void *)cuMemUnmap },
	{ "cuMemHostAlloc", (void *)cuMemHostAlloc },
	{ "cuMemFreeHost", (void *)cuMemFreeHost },
	{ "cuMemcpyDtoHAsync", (void *)cuMemcpyDtoHAsync_v2 },
	{ "cuMemcpyHtoDAsync", (void *)cuMemcpyHtoDAsync_v2 },
	{ "cuMemsetD32Async", (void *)cuMemsetD32Async },
	{ "cuStreamCreate", (void *)cuStreamCreate },
	{ "cuStreamSynchronize", (void *)cuStreamSynchronize },
	{ "cuStreamDestroy", (void *)cuStreamDestroy_v2 },
	{ "cuCtxSynchronize", (void *)cuCtxSynchronize },
	{ "cuStreamWaitEvent", (void *)cuStreamWaitEvent },
	{ "cuEventCreate", (void *)cuEventCreate },
	{ "cuEventRecord", (void *)cuEventRecord },
	{ "cuEventSynchronize", (void *)cuEventSynchronize },
	{ "cuEventQuery", (void *)cuEventQuery },
	{ "cuEventDestroy", (void *)cuEventDestroy_v2 },
	{ "cuMemGetInfo", (void *)cuMemGetInfo_v2 },
	{ "cuDeviceGetAttribute", (void *)cuDeviceGetAttribute },
	{ "cuDeviceGetPCIBusId", (void *)cuDeviceGetPCIBusId },
	{ "cuStreamIsCapturing", (void *)cuStreamIsCapturing },
	{ "cuDeviceGetCount", (void *)cuDeviceGetCount },
	{ "cuMemGetAccess", (void *)cuMemGetAccess },
};

/*
 * Like the driver: symbol is a base name (no _v2 suffix); the version
 * returned is the newest whose ABI matches cudaVersion. The stand-in only
 * models the ABI of CUDA 11.0 and later (where every name above resolves
 * to the same function), and answers VERSION_NOT_SUFFICIENT below that.
 */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
				    int cudaVersion, cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status)
{
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

	BEGIN(E_cuGetProcAddress);
	if (!symbol || !pfn || flags > 2) {
		rc_ = bad("cuGetProcAddress", "NULL symbol or pfn, or bad flags");
		goto out;
	}
	*pfn = NULL;
	rc_ = CUDA_ERROR_NOT_FOUND;
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (strcmp(procs[i].name, symbol))
			continue;
		if (cudaVersion < 11000) {
			st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
			break;
		}
		*pfn = procs[i].fn;
		st = CU_GET_PROC_ADDRESS_SUCCESS;
		rc_ = CUDA_SUCCESS;
	}
	if (status)
		*status = st;
	END;
}

/* the CUDA 11.3 - 11.8 prototype, still exported by the driver */
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
				 int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/*
 * Issue 21 (NVML by UUID): device n's UUID is the 16 bytes
 * 0x10 * (n + 1) + i, i = 0..15 ("GPU-10111213-..." for device 0, or
 * "MIG-..." where NVML calls it a MIG instance). Resolved with dlsym: not
 * in the entry point table (no counting, no armed failures).
 */
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	if (!initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!uuid || dev < 0 || dev >= ndevices)
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(0x10 * (dev + 1) + i);
	return CUDA_SUCCESS;
}
