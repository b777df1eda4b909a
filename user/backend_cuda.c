// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * user/backend_cuda.c: the CUDA Driver API memory backend.
 *
 * The driver is loaded at run time with dlopen("libcuda.so.1"), so
 * libgpusleep builds and runs where there is no GPU. Not even the CUDA
 * toolkit is needed to build it: the types, values and prototypes of the
 * entry points it calls are gpusleep's own (user/gs_cuda.h), checked
 * against the toolkit's cuda.h wherever one is installed
 * (tests/host/test_cuda_decls.sh).
 *
 * Entry points: cuGetProcAddress_v2 (exported by drivers of CUDA 12.0 and
 * later, five arguments) is looked up with dlsym, falling back to the
 * four-argument cuGetProcAddress of CUDA 11.3 - 11.8. Every other entry
 * point is asked for by its base name with cudaVersion 12000, which yields
 * the ABI of the prototypes in gs_cuda.h (64-bit sizes:
 * cuMemcpyDtoHAsync_v2 and so on). When that lookup fails, the exported
 * versioned name is taken with dlsym instead (GS_CU_ENTRY_POINTS).
 *
 * One backend = one device: cuInit(0), cuDeviceGet, the primary context
 * retained (and made current on whichever thread calls an op), one
 * non-blocking stream for the backup and restore copies. See
 * docs/cuda-backend.md for the operations, the errno table and the stand-in
 * driver used by the tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "gs_cuda.h"

#include <dlfcn.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define CUDA_LIB_DEFAULT "libcuda.so.1"
/* the ABI the prototypes of gs_cuda.h follow */
#define CUDA_ABI_VERSION 12000
/* NUMA nodes a memory policy mask here can name */
#define NUMA_BITS 1024

typedef __typeof__(cuGetProcAddress_v2) *getproc_v2_fn;
/* the CUDA 11.3 - 11.8 prototype, still exported by later drivers */
typedef CUresult (*getproc_v1_fn)(const char *symbol, void **pfn,
				  int cudaVersion, cuuint64_t flags);

/*
 * The driver entry points, one member per base name, with the prototype
 * of the exported name gs_cuda.h declares (the CUDA 12.0 ABI).
 */
#define API_MEMBER(base, exported) __typeof__(exported) *base;
struct cuda_api {
	GS_CU_ENTRY_POINTS(API_MEMBER)
};
#undef API_MEMBER

/* base name for cuGetProcAddress, exported name for dlsym */
#define SYM(base, exported) \
	{ #base, #exported, offsetof(struct cuda_api, base) },
static const struct {
	const char *base;
	const char *exported;
	size_t off;
} syms[] = {
	GS_CU_ENTRY_POINTS(SYM)
};
#undef SYM

/*
 * Entry points the backend does without: it says less (no error names),
 * finds NVML by PCI bus id or not at all, cannot tell a capture (then
 * never synchronises in an allocation), or restores no peer's access.
 * Those it never calls are not needed either.
 */
static bool sym_optional(const char *base)
{
	static const char *const opt[] = {
		"cuGetErrorName", "cuDeviceGetPCIBusId", "cuDeviceGetUuid",
		"cuStreamIsCapturing", "cuDeviceGetCount", "cuMemGetAccess",
		"cuStreamWaitEvent", "cuEventQuery", "cuGetProcAddress",
	};

	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		if (!strcmp(base, opt[i]))
			return true;
	return false;
}

struct cuda_backend {
	struct gs_backend b;
	struct cuda_api api;
	void *lib;
	int ordinal;
	CUdevice dev;
	CUcontext ctx;
	bool ctx_retained;
	CUstream stream;
	size_t gran;		/* the device's minimum granularity */
	size_t gran_rec;	/* the one it recommends (>= gran) */
	int numa_node;		/* host NUMA node closest to the GPU, or -1 */
	CUmemAllocationProp prop;
	CUmemAccessDesc access;
	char name[32];
	int ndev;		/* devices of the system (cuDeviceGetCount) */
	struct gs_nvml *nvml;	/* NVML's view of the device, once looked for */
	bool nvml_tried;
};

/*
 * What map() hands out. The handle remembers its range, and whether the
 * range is still mapped, so that an unmap() whose cuMemRelease failed can
 * be called again to finish the job.
 */
struct cuda_handle {
	CUmemGenericAllocationHandle h;
	uintptr_t va;
	size_t size;
	bool mapped;
};

static struct cuda_backend *cb_of(struct gs_backend *b)
{
	return b->ctx;
}

/* CUresult -> -errno; the table is in docs/cuda-backend.md */
static int cu_errno(CUresult rc)
{
	switch (rc) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUDA_ERROR_INVALID_VALUE:
	case CUDA_ERROR_INVALID_HANDLE:
		return -EINVAL;
	case CUDA_ERROR_NOT_INITIALIZED:
	case CUDA_ERROR_DEINITIALIZED:
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
	case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
	case CUDA_ERROR_STUB_LIBRARY:	/* the toolkit's stub, not a driver */
		return -ENODEV;
	case CUDA_ERROR_NOT_PERMITTED:
		return -EPERM;
	case CUDA_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case CUDA_ERROR_NOT_FOUND:
		return -ENOENT;
	/*
	 * Sticky errors: a kernel faulted, the context is lost and every
	 * later call answers the same (the process must restart its CUDA
	 * work): not an I/O error that a retry could clear.
	 */
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
		return -ENOTRECOVERABLE;
	default:
		return -EIO;
	}
}

/* print what failed and why; return the errno for rc */
static int cu_fail(struct cuda_api *api, CUresult rc, const char *what)
{
	const char *name = NULL;

	if (!api->cuGetErrorName || api->cuGetErrorName(rc, &name) != CUDA_SUCCESS ||
	    !name)
		name = "unknown CUresult";
	fprintf(stderr, "gpusleep: cuda: %s failed: %s (%d)\n", what, name,
		(int)rc);
	return cu_errno(rc);
}

/* the ops may run on any thread (the agent's): make our context current */
static int use_ctx(struct cuda_backend *cb)
{
	CUcontext cur = NULL;
	CUresult rc = cb->api.cuCtxGetCurrent(&cur);

	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuCtxGetCurrent");
	if (cur == cb->ctx)
		return 0;
	rc = cb->api.cuCtxSetCurrent(cb->ctx);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuCtxSetCurrent");
	return 0;
}

static bool misaligned(struct cuda_backend *cb, uintptr_t v)
{
	return v & (cb->gran - 1);
}

static size_t round_up(struct cuda_backend *cb, size_t size)
{
	return (size + cb->gran - 1) & ~(cb->gran - 1);
}

static size_t cuda_granularity(struct gs_backend *b)
{
	return cb_of(b)->gran;
}

static size_t cuda_chunk_granularity(struct gs_backend *b)
{
	return cb_of(b)->gran_rec;
}

static int cuda_reserve(struct gs_backend *b, size_t size, void **va)
{
	struct cuda_backend *cb = cb_of(b);
	CUdeviceptr ptr = 0;
	CUresult rc;
	int ret;

	if (!size || !va || size > SIZE_MAX - cb->gran) {
		fprintf(stderr, "gpusleep: cuda: reserve: bad size %zu\n", size);
		return -EINVAL;
	}
	ret = use_ctx(cb);
	if (ret)
		return ret;
	/* aligned as the device recommends, when the size is made of it */
	rc = cb->api.cuMemAddressReserve(&ptr, round_up(cb, size),
				       size % cb->gran_rec ? cb->gran :
				       cb->gran_rec, 0, 0);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemAddressReserve");
	*va = (void *)(uintptr_t)ptr;
	return 0;
}

static void cuda_unreserve(struct gs_backend *b, void *va, size_t size)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;

	if (!va || use_ctx(cb))
		return;
	rc = cb->api.cuMemAddressFree((uintptr_t)va, round_up(cb, size));
	if (rc != CUDA_SUCCESS)
		cu_fail(&cb->api, rc, "cuMemAddressFree");
}

static int cuda_map_common(struct gs_backend *b, void *va, size_t size,
			   void **handle, bool zero)
{
	struct cuda_backend *cb = cb_of(b);
	uintptr_t ptr = (uintptr_t)va;
	struct cuda_handle *hs;
	CUresult rc;
	int ret;

	if (!va || !size || !handle || misaligned(cb, ptr) ||
	    misaligned(cb, size)) {
		fprintf(stderr, "gpusleep: cuda: map: address %p and size %zu must be non-zero multiples of the granularity (%zu)\n",
			va, size, cb->gran);
		return -EINVAL;
	}
	ret = use_ctx(cb);
	if (ret)
		return ret;
	hs = calloc(1, sizeof(*hs));
	if (!hs) {
		fprintf(stderr, "gpusleep: cuda: map: out of memory\n");
		return -ENOMEM;
	}
	hs->va = ptr;
	hs->size = size;
	/* one physical allocation for the whole range: fewer handles map faster */
	rc = cb->api.cuMemCreate(&hs->h, size, &cb->prop, 0);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemCreate");
		goto err_free;
	}
	rc = cb->api.cuMemMap(ptr, size, 0, hs->h, 0);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemMap");
		goto err_release;
	}
	rc = cb->api.cuMemSetAccess(ptr, size, &cb->access, 1);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemSetAccess");
		goto err_unmap;
	}
	/*
	 * cuMemCreate leaves the contents undefined (old data of this or
	 * another process may show through); the backend contract is that
	 * fresh memory reads as zeros. Zero it on our stream and wait, so
	 * the engine's streams never see the memory before it is cleared.
	 */
	if (!zero)
		goto done;
	rc = cb->api.cuMemsetD32Async(ptr, 0, size / 4, cb->stream);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemsetD32Async");
		goto err_unmap;
	}
	rc = cb->api.cuStreamSynchronize(cb->stream);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuStreamSynchronize (zeroing)");
		goto err_unmap;
	}
done:
	hs->mapped = true;
	*handle = hs;
	return 0;

err_unmap:
	rc = cb->api.cuMemUnmap(ptr, size);
	if (rc != CUDA_SUCCESS)
		cu_fail(&cb->api, rc, "cuMemUnmap (undoing a failed map)");
err_release:
	rc = cb->api.cuMemRelease(hs->h);
	if (rc != CUDA_SUCCESS)
		cu_fail(&cb->api, rc, "cuMemRelease (undoing a failed map)");
err_free:
	free(hs);
	return ret;
}

static int cuda_map(struct gs_backend *b, void *va, size_t size,
		    void **handle)
{
	return cuda_map_common(b, va, size, handle, true);
}

static int cuda_map_nozero(struct gs_backend *b, void *va, size_t size,
			   void **handle)
{
	return cuda_map_common(b, va, size, handle, false);
}

/*
 * cuMemUnmap, then cuMemRelease. A failure changes nothing the caller can
 * see: if cuMemUnmap fails the range is still mapped; if cuMemRelease fails
 * the same physical memory (contents intact) is mapped back and made
 * accessible again. Either way the handle stays valid and unmap() may be
 * called again. Only if that re-map fails too is the range left unmapped
 * (said on stderr); a later unmap() then only retries the release.
 * The handle is freed only on success.
 */
static int cuda_unmap(struct gs_backend *b, void *va, size_t size,
		      void *handle)
{
	struct cuda_backend *cb = cb_of(b);
	struct cuda_handle *hs = handle;
	CUresult rc;
	int ret;

	if (!hs || hs->va != (uintptr_t)va || hs->size != size) {
		fprintf(stderr, "gpusleep: cuda: unmap: handle %p does not belong to [%p, +%zu)\n",
			handle, va, size);
		return -EINVAL;
	}
	ret = use_ctx(cb);
	if (ret)
		return ret;
	if (hs->mapped) {
		rc = cb->api.cuMemUnmap(hs->va, size);
		if (rc != CUDA_SUCCESS)
			return cu_fail(&cb->api, rc, "cuMemUnmap");
		hs->mapped = false;
	} else {
		/* unmapped before: only the release is left (the range may
		 * be mapped with another handle meanwhile) */
		rc = cb->api.cuMemRelease(hs->h);
		if (rc != CUDA_SUCCESS)
			return -(-cu_fail(&cb->api, rc, "cuMemRelease") |
				 GS_UNMAP_GONE);
		free(hs);
		return 0;
	}
	rc = cb->api.cuMemRelease(hs->h);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemRelease");
		rc = cb->api.cuMemMap(hs->va, size, 0, hs->h, 0);
		if (rc == CUDA_SUCCESS) {
			rc = cb->api.cuMemSetAccess(hs->va, size, &cb->access, 1);
			if (rc == CUDA_SUCCESS) {
				hs->mapped = true;
				return ret;
			}
			cb->api.cuMemUnmap(hs->va, size);
		}
		cu_fail(&cb->api, rc, "mapping back after the failed release");
		fprintf(stderr, "gpusleep: cuda: [%p, +%zu) stays unmapped; its handle is kept until unmap succeeds\n",
			va, size);
		return -(-ret | GS_UNMAP_GONE);
	}
	free(hs);
	return 0;
}

static int cuda_host_alloc(struct gs_backend *b, size_t size, void **host)
{
	struct cuda_backend *cb = cb_of(b);
	unsigned long mask[NUMA_BITS / 64] = { 0 }, oldmask[NUMA_BITS / 64];
	bool policy_set = false;
	int oldmode = 0;
	void *p = NULL;
	CUresult rc;
	int ret;

	if (!size || !host) {
		fprintf(stderr, "gpusleep: cuda: host_alloc: size 0\n");
		return -EINVAL;
	}
	ret = use_ctx(cb);
	if (ret)
		return ret;
	/*
	 * On the NUMA node nearest the GPU: the driver allocates the pages
	 * under the calling thread's memory policy, so prefer that node for
	 * the time of the call (best effort: without NUMA it does nothing).
	 */
	if (cb->numa_node >= 0 && cb->numa_node < NUMA_BITS &&
	    !syscall(SYS_get_mempolicy, &oldmode, oldmask, NUMA_BITS + 1,
		     NULL, 0)) {
		mask[cb->numa_node / 64] |= 1UL << (cb->numa_node % 64);
		policy_set = !syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask,
				      NUMA_BITS + 1);
	}
	rc = cb->api.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
	if (policy_set)
		syscall(SYS_set_mempolicy, oldmode, oldmask, NUMA_BITS + 1);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemHostAlloc");
	*host = p;
	return 0;
}

static void cuda_host_free(struct gs_backend *b, void *host, size_t size)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;

	(void)size;
	if (!host || use_ctx(cb))
		return;
	rc = cb->api.cuMemFreeHost(host);
	if (rc != CUDA_SUCCESS)
		cu_fail(&cb->api, rc, "cuMemFreeHost");
}

static int cuda_backup(struct gs_backend *b, void *host, const void *va,
		       size_t size)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;
	int ret;

	if (!size)
		return 0;
	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuMemcpyDtoHAsync(host, (uintptr_t)va, size, cb->stream);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemcpyDtoHAsync");
	return 0;
}

static int cuda_restore(struct gs_backend *b, void *va, const void *host,
			size_t size)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;
	int ret;

	if (!size)
		return 0;
	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuMemcpyHtoDAsync((uintptr_t)va, host, size, cb->stream);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemcpyHtoDAsync");
	return 0;
}

static int cuda_sync(struct gs_backend *b)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;
	int ret;

	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuStreamSynchronize(cb->stream);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuStreamSynchronize");
	return 0;
}

/*
 * Wait for every stream of the context: the engine's kernels as well as
 * our copies. The engine's streams are not ours to know; the primary
 * context is shared with the CUDA runtime (PyTorch), so synchronising it
 * orders us after all of its work, as torch.cuda.synchronize() would.
 */
static int cuda_fence(struct gs_backend *b)
{
	struct cuda_backend *cb = cb_of(b);
	CUresult rc;
	int ret;

	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuCtxSynchronize();
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuCtxSynchronize");
	return 0;
}

/*
 * Wait for what is queued so far on the engine's declared streams: one
 * event recorded on each, then waited for. Work queued later, or on other
 * streams, is not waited for.
 */
static int cuda_fence_streams(struct gs_backend *b, void *const *streams,
			      unsigned int n)
{
	struct cuda_backend *cb = cb_of(b);
	CUevent ev = NULL;
	CUresult rc;
	int ret;

	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuEventCreate");
	for (unsigned int i = 0; i < n && !ret; i++) {
		rc = cb->api.cuEventRecord(ev, (CUstream)streams[i]);
		if (rc != CUDA_SUCCESS) {
			ret = cu_fail(&cb->api, rc, "cuEventRecord (fence)");
			break;
		}
		rc = cb->api.cuEventSynchronize(ev);
		if (rc != CUDA_SUCCESS)
			ret = cu_fail(&cb->api, rc, "cuEventSynchronize (fence)");
	}
	rc = cb->api.cuEventDestroy(ev);
	if (rc != CUDA_SUCCESS)
		cu_fail(&cb->api, rc, "cuEventDestroy");
	return ret;
}

/*
 * Is work queued on stream being captured into a graph, so that nothing
 * may wait for it? stream NULL is the legacy default stream: the driver
 * answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT while a blocking stream is
 * captured (the legacy stream would wait for it), and nothing about a
 * non-blocking stream's capture, which the legacy stream does not wait
 * for. An error, or a query that cannot be made, counts as captured.
 */
static int cuda_capturing(struct gs_backend *b, void *stream)
{
	struct cuda_backend *cb = cb_of(b);
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;

	if (!cb->api.cuStreamIsCapturing || use_ctx(cb))
		return 1;
	if (cb->api.cuStreamIsCapturing((CUstream)stream, &st) != CUDA_SUCCESS ||
	    st != CU_STREAM_CAPTURE_STATUS_NONE)
		return 1;
	return 0;
}

/*
 * The other devices with access to the range at va, as the driver says:
 * whoever granted it (our grant, a collective library's registration, a
 * custom all-reduce's cuMemSetAccess), it is lost with the mapping.
 */
static int cuda_peers(struct gs_backend *b, void *va, uint64_t *rw,
		      uint64_t *ro)
{
	struct cuda_backend *cb = cb_of(b);
	int ret;

	*rw = *ro = 0;
	if (cb->ndev < 2 || !cb->api.cuMemGetAccess)
		return 0;
	ret = use_ctx(cb);
	if (ret)
		return ret;
	for (int d = 0; d < cb->ndev && d < 64; d++) {
		CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
				      .id = d };
		unsigned long long flags = 0;
		CUresult rc;

		if (d == cb->dev)
			continue;
		rc = cb->api.cuMemGetAccess(&flags, &loc, (uintptr_t)va);
		if (rc != CUDA_SUCCESS)
			return cu_fail(&cb->api, rc, "cuMemGetAccess");
		if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			*rw |= 1ULL << d;
		else if (flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
			*ro |= 1ULL << d;
	}
	return 0;
}

/* Give the devices of rw and ro that access to [va, +size). */
static int cuda_grant(struct gs_backend *b, void *va, size_t size,
		      uint64_t rw, uint64_t ro)
{
	struct cuda_backend *cb = cb_of(b);
	CUmemAccessDesc desc[64];
	size_t n = 0;
	CUresult rc;
	int ret;

	for (int d = 0; d < 64 && d < cb->ndev; d++) {
		if (d == cb->dev || !((rw | ro) & (1ULL << d)))
			continue;
		desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		desc[n].location.id = d;
		desc[n].flags = rw & (1ULL << d) ?
				CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
				CU_MEM_ACCESS_FLAGS_PROT_READ;
		n++;
	}
	if (!n)
		return 0;
	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuMemSetAccess((uintptr_t)va, round_up(cb, size), desc, n);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemSetAccess (peers)");
	return 0;
}

static int cuda_mem_info(struct gs_backend *b, uint64_t *free_b,
			 uint64_t *total)
{
	struct cuda_backend *cb = cb_of(b);
	size_t f = 0, t = 0;
	CUresult rc;
	int ret;

	ret = use_ctx(cb);
	if (ret)
		return ret;
	rc = cb->api.cuMemGetInfo(&f, &t);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuMemGetInfo");
	*free_b = f;
	*total = t;
	return 0;
}

/*
 * NVML's view of the device (by its UUID, else its PCI bus id), looked for
 * once: when the backend is made, so that loading and initialising NVML is
 * not part of the first pause.
 */
static void cuda_nvml_open(struct cuda_backend *cb)
{
	const char *env = getenv("GPUSLEEP_NVML_LIB");
	char bus[32];
	CUuuid uuid;
	bool have_uuid;

	if (cb->nvml_tried)
		return;
	cb->nvml_tried = true;
	/* by UUID first: a MIG instance shares its parent's bus id */
	have_uuid = cb->api.cuDeviceGetUuid &&
		    cb->api.cuDeviceGetUuid(&uuid, cb->dev) == CUDA_SUCCESS;
	if (!cb->api.cuDeviceGetPCIBusId ||
	    cb->api.cuDeviceGetPCIBusId(bus, sizeof(bus), cb->dev) !=
	    CUDA_SUCCESS)
		bus[0] = 0;
	if (bus[0] || have_uuid)
		cb->nvml = gs_nvml_open(bus, have_uuid ?
					(const unsigned char *)uuid.bytes : NULL);
	if (!cb->nvml && !(env && !strcmp(env, "off")))
		fprintf(stderr, "gpusleep: cuda: NVML not usable for device %d: what stays resident after a pause is reported as the whole device's used memory (cuMemGetInfo)\n",
			cb->ordinal);
}

/* The device's UUID (a MIG instance's own), as cuDeviceGetUuid says. */
static int cuda_uuid(struct gs_backend *b, uint8_t out[16])
{
	struct cuda_backend *cb = cb_of(b);
	CUuuid uuid;
	CUresult rc;

	if (!cb->api.cuDeviceGetUuid)
		return -EOPNOTSUPP;
	rc = cb->api.cuDeviceGetUuid(&uuid, cb->dev);
	if (rc != CUDA_SUCCESS)
		return cu_fail(&cb->api, rc, "cuDeviceGetUuid");
	memcpy(out, uuid.bytes, 16);
	return 0;
}

/*
 * What this process holds on the device: NVML's per-process figure; else
 * the device's used memory (cuMemGetInfo), which counts every process on
 * the GPU; unknown (0) where NVML lists another pid namespace's pids.
 */
static int cuda_resident(struct gs_backend *b, uint64_t *bytes)
{
	struct cuda_backend *cb = cb_of(b);
	uint64_t f = 0, t = 0;
	int ret = -ENODEV;

	cuda_nvml_open(cb);
	if (cb->nvml) {
		ret = gs_nvml_process_used(cb->nvml, getpid(), bytes);
		if (!ret)
			return GPUSLEEP_RESIDENT_PROCESS;
	}
	*bytes = 0;
	if (ret == -ESRCH)
		return 0;
	if (cuda_mem_info(b, &f, &t) || f > t)
		return 0;
	*bytes = t - f;
	return GPUSLEEP_RESIDENT_DEVICE;
}

/*
 * Undo what cuda_backend_init() did, in reverse. The driver library stays
 * loaded once cuInit ran: it registers process exit handlers, and unloading
 * it under them is not safe.
 */
static void cuda_teardown(struct cuda_backend *cb, bool initialized)
{
	CUresult rc;

	gs_nvml_close(cb->nvml);
	if (cb->stream) {
		if (!use_ctx(cb)) {
			rc = cb->api.cuStreamSynchronize(cb->stream);
			if (rc != CUDA_SUCCESS)
				cu_fail(&cb->api, rc, "cuStreamSynchronize");
		}
		rc = cb->api.cuStreamDestroy(cb->stream);
		if (rc != CUDA_SUCCESS)
			cu_fail(&cb->api, rc, "cuStreamDestroy");
	}
	if (cb->ctx_retained) {
		rc = cb->api.cuDevicePrimaryCtxRelease(cb->dev);
		if (rc != CUDA_SUCCESS)
			cu_fail(&cb->api, rc, "cuDevicePrimaryCtxRelease");
	}
	if (cb->lib && !initialized)
		dlclose(cb->lib);
	free(cb);
}

static void cuda_destroy(struct gs_backend *b)
{
	if (b)
		cuda_teardown(cb_of(b), true);
}

/* fill cb->api; 0 or -errno */
static int cuda_load(struct cuda_backend *cb, const char *path)
{
	getproc_v2_fn getproc_v2;
	getproc_v1_fn getproc_v1 = NULL;

	dlerror();
	getproc_v2 = (getproc_v2_fn)dlsym(cb->lib, "cuGetProcAddress_v2");
	if (!getproc_v2)
		getproc_v1 = (getproc_v1_fn)dlsym(cb->lib, "cuGetProcAddress");

	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void **slot = (void **)((char *)&cb->api + syms[i].off);
		CUdriverProcAddressQueryResult status = 0;
		void *fn = NULL;
		CUresult rc = CUDA_ERROR_NOT_FOUND;

		if (getproc_v2)
			rc = getproc_v2(syms[i].base, &fn, CUDA_ABI_VERSION,
					CU_GET_PROC_ADDRESS_DEFAULT, &status);
		else if (getproc_v1)
			rc = getproc_v1(syms[i].base, &fn, CUDA_ABI_VERSION,
					CU_GET_PROC_ADDRESS_DEFAULT);
		if (rc != CUDA_SUCCESS || !fn)
			fn = dlsym(cb->lib, syms[i].exported);
		if (!fn && !sym_optional(syms[i].base)) {
			fprintf(stderr, "gpusleep: cuda: %s has no %s (driver older than CUDA 11?)\n",
				path, syms[i].exported);
			return -ENODEV;
		}
		*slot = fn;
	}
	return 0;
}

static int dev_attr(struct cuda_backend *cb, CUdevice_attribute a, int dflt)
{
	int v = dflt;

	if (cb->api.cuDeviceGetAttribute(&v, a, cb->dev) != CUDA_SUCCESS)
		return dflt;
	return v;
}

/*
 * What the device offers beyond plain VMM memory:
 * - gpuDirectRDMACapable, when the device supports it with VMM: NICs
 *   (NCCL over InfiniBand/RoCE) can then register the memory;
 * - an exportable POSIX file descriptor handle, asked for with
 *   GPUSLEEP_CUDA_HANDLE=fd, for processes that share the memory (CUDA
 *   IPC of tensors on it needs the allocation to be exportable);
 * - the host NUMA node nearest the GPU, for the pinned staging.
 */
static void cuda_set_features(struct cuda_backend *cb)
{
	const char *h = getenv("GPUSLEEP_CUDA_HANDLE");

	if (dev_attr(cb, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0))
		cb->prop.allocFlags.gpuDirectRDMACapable = 1;
	if (h && !strcmp(h, "fd")) {
		if (dev_attr(cb, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0))
			cb->prop.requestedHandleTypes =
				CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		else
			fprintf(stderr, "gpusleep: cuda: GPUSLEEP_CUDA_HANDLE=fd: the device cannot export POSIX file descriptors; allocations are not exportable\n");
	}
	/* CUDA 12.2 and later; an older driver refuses it: -1 */
	cb->numa_node = dev_attr(cb, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1);
}

/*
 * The UUID of CUDA device ordinal (cuDeviceGetUuid), without a context:
 * what a claimant names the GPU of its reclaim by (gpusleepctl acquire
 * --gpu 0, gpusleep.acquire(0, ...)). The driver stays loaded (cuInit
 * registers exit handlers).
 */
int gs_cuda_device_uuid(int device, const char *libpath, uint8_t uuid[16])
{
	CUresult (*init)(unsigned int);
	CUresult (*get)(CUdevice *, int);
	CUresult (*get_uuid)(CUuuid *, CUdevice);
	CUdevice dev;
	CUuuid u;
	void *lib;

	lib = dlopen(libpath ? libpath : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return -ENOENT;
	*(void **)&init = dlsym(lib, "cuInit");
	*(void **)&get = dlsym(lib, "cuDeviceGet");
	*(void **)&get_uuid = dlsym(lib, "cuDeviceGetUuid_v2");
	if (!get_uuid)
		*(void **)&get_uuid = dlsym(lib, "cuDeviceGetUuid");
	if (!init || !get || !get_uuid)
		return -ENODEV;
	if (init(0) != CUDA_SUCCESS || get(&dev, device) != CUDA_SUCCESS)
		return -ENODEV;
	if (get_uuid(&u, dev) != CUDA_SUCCESS)
		return -EIO;
	memcpy(uuid, u.bytes, 16);
	return 0;
}

struct gs_backend *gs_backend_cuda_new(int device, const char *libpath,
				       int *err)
{
	const char *path = libpath ? libpath : CUDA_LIB_DEFAULT;
	struct cuda_backend *cb;
	bool initialized = false;
	CUresult rc;
	int ret, dummy;

	if (!err)
		err = &dummy;
	cb = calloc(1, sizeof(*cb));
	if (!cb) {
		fprintf(stderr, "gpusleep: cuda: out of memory\n");
		*err = -ENOMEM;
		return NULL;
	}
	cb->ordinal = device;
	cb->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!cb->lib) {
		fprintf(stderr, "gpusleep: cuda: cannot load %s (no NVIDIA driver here?): %s\n",
			path, dlerror());
		ret = -ENOENT;
		goto fail;
	}
	ret = cuda_load(cb, path);
	if (ret)
		goto fail;

	rc = cb->api.cuInit(0);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuInit");
		goto fail;
	}
	initialized = true;
	rc = cb->api.cuDeviceGet(&cb->dev, device);
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "gpusleep: cuda: no device %d\n", device);
		ret = cu_fail(&cb->api, rc, "cuDeviceGet");
		goto fail;
	}
	rc = cb->api.cuDevicePrimaryCtxRetain(&cb->ctx, cb->dev);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuDevicePrimaryCtxRetain");
		goto fail;
	}
	cb->ctx_retained = true;
	ret = use_ctx(cb);
	if (ret)
		goto fail;

	cb->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	cb->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	cb->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	cb->prop.location.id = cb->dev;
	cuda_set_features(cb);
	cb->access.location = cb->prop.location;
	cb->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	rc = cb->api.cuMemGetAllocationGranularity(&cb->gran, &cb->prop,
			CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (rc != CUDA_SUCCESS) {
		ret = cu_fail(&cb->api, rc, "cuMemGetAllocationGranularity");
		goto fail;
	}
	if (!cb->gran || (cb->gran & (cb->gran - 1))) {
		fprintf(stderr, "gpusleep: cuda: granularity %zu is not a power of two\n",
			cb->gran);
		ret = -EIO;
		goto fail;
	}
	/*
	 * The recommended granularity sizes and aligns the large ranges
	 * (chunks); one that is not a power-of-two multiple of the minimum
	 * (or cannot be asked) is not used.
	 */
	rc = cb->api.cuMemGetAllocationGranularity(&cb->gran_rec, &cb->prop,
			CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
	if (rc != CUDA_SUCCESS || cb->gran_rec < cb->gran ||
	    (cb->gran_rec & (cb->gran_rec - 1)))
		cb->gran_rec = cb->gran;
	rc = cb->api.cuStreamCreate(&cb->stream, CU_STREAM_NON_BLOCKING);
	if (rc != CUDA_SUCCESS) {
		cb->stream = NULL;
		ret = cu_fail(&cb->api, rc, "cuStreamCreate");
		goto fail;
	}
	cb->ndev = 1;
	if (cb->api.cuDeviceGetCount &&
	    cb->api.cuDeviceGetCount(&cb->ndev) != CUDA_SUCCESS)
		cb->ndev = 1;
	cuda_nvml_open(cb);

	snprintf(cb->name, sizeof(cb->name), "cuda:%d", device);
	cb->b = (struct gs_backend){
		.name = cb->name,
		.ctx = cb,
		.granularity = cuda_granularity,
		.chunk_granularity = cuda_chunk_granularity,
		.reserve = cuda_reserve,
		.unreserve = cuda_unreserve,
		.map = cuda_map,
		.map_nozero = cuda_map_nozero,
		.unmap = cuda_unmap,
		.host_alloc = cuda_host_alloc,
		.host_free = cuda_host_free,
		.backup = cuda_backup,
		.restore = cuda_restore,
		.sync = cuda_sync,
		.fence = cuda_fence,
		.fence_streams = cuda_fence_streams,
		.mem_info = cuda_mem_info,
		.capturing = cuda_capturing,
		.resident = cuda_resident,
		.peers = cuda_peers,
		.grant = cuda_grant,
		.uuid = cuda_uuid,
		.destroy = cuda_destroy,
	};
	*err = 0;
	return &cb->b;

fail:
	cuda_teardown(cb, initialized);
	*err = ret;
	return NULL;
}

