// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 6 (a machine with a GPU; not part of `make check`): the CUDA
 * backend.
 *
 *   6v  per-call cost of the VMM entry points the backend uses
 *       (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
 *       cuMemUnmap, cuMemRelease, cuMemAddressFree), on one granule and on
 *       one large range.
 *   6d  gs_mm release/resume of SIZE on the CUDA backend without backup
 *       (GS_MM_DISCARD): GiB/s.
 *   6b  the same with backup (GS_MM_BACKUP): the backup (release) and
 *       restore (resume) against a plain pinned copy of the same size
 *       (one cuMemcpyDtoHAsync / cuMemcpyHtoDAsync + cuStreamSynchronize
 *       between a mapped device range and cuMemHostAlloc memory).
 *
 * The tag is filled with allocations of 256 MiB (like a model's tensors), so
 * the memory manager's chunks grow as they do in an engine. Sizes above
 * the free device memory (cuMemGetInfo) are skipped; backup is skipped when
 * the size exceeds 3/4 of the host's memory.
 *
 * Usage: bench_cuda [--dry-run] [--lib PATH] [--device N] [--sizes 1,2,4]
 *                   [--reps N]
 * Sizes are GiB. --dry-run loads the tests' stand-in libcuda (FAKECUDA_LIB
 * or build/tests/host/fakecuda/libcuda.so.1), reads sizes as MiB (default
 * 16,64) and allocations of 4 MiB: every code path runs, no figure means
 * anything. One JSON record per line on stdout (bench/bench.h format).
 */
#include "gs_cuda.h"	/* user/: no CUDA toolkit needed */
#include <dlfcn.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define GiB	(1ULL << 30)
#define MiB	(1ULL << 20)

static struct {
	CUresult (*Init)(unsigned int);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*Granularity)(size_t *, const CUmemAllocationProp *,
				CUmemAllocationGranularity_flags);
	CUresult (*AddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
				   unsigned long long);
	CUresult (*AddressFree)(CUdeviceptr, size_t);
	CUresult (*Create)(CUmemGenericAllocationHandle *, size_t,
			   const CUmemAllocationProp *, unsigned long long);
	CUresult (*Release)(CUmemGenericAllocationHandle);
	CUresult (*Map)(CUdeviceptr, size_t, size_t,
			CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*Unmap)(CUdeviceptr, size_t);
	CUresult (*SetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *,
			      size_t);
	CUresult (*HostAlloc)(void **, size_t, unsigned int);
	CUresult (*FreeHost)(void *);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSync)(CUstream);
	CUresult (*DtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*HtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*GetInfo)(size_t *, size_t *);	/* optional */
} cu;

static CUdevice cdev;
static CUstream stream;
static CUmemAllocationProp prop;
static CUmemAccessDesc access_desc;
static size_t gran;

static void load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		bn_die("dlopen %s: %s", lib, dlerror());
#define SYM(f, name) do {						\
		*(void **)&cu.f = dlsym(h, name);			\
		if (!cu.f)						\
			bn_die("%s: no %s", lib, name);			\
	} while (0)
	SYM(Init, "cuInit");
	SYM(DeviceGet, "cuDeviceGet");
	SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(CtxSetCurrent, "cuCtxSetCurrent");
	SYM(Granularity, "cuMemGetAllocationGranularity");
	SYM(AddressReserve, "cuMemAddressReserve");
	SYM(AddressFree, "cuMemAddressFree");
	SYM(Create, "cuMemCreate");
	SYM(Release, "cuMemRelease");
	SYM(Map, "cuMemMap");
	SYM(Unmap, "cuMemUnmap");
	SYM(SetAccess, "cuMemSetAccess");
	SYM(HostAlloc, "cuMemHostAlloc");
	SYM(FreeHost, "cuMemFreeHost");
	SYM(StreamCreate, "cuStreamCreate");
	SYM(StreamDestroy, "cuStreamDestroy_v2");
	SYM(StreamSync, "cuStreamSynchronize");
	SYM(DtoHAsync, "cuMemcpyDtoHAsync_v2");
	SYM(HtoDAsync, "cuMemcpyHtoDAsync_v2");
#undef SYM
	*(void **)&cu.GetInfo = dlsym(h, "cuMemGetInfo_v2");
}

#define CK(call) do {							\
		CUresult rc_ = (call);					\
		if (rc_ != CUDA_SUCCESS)				\
			bn_die("%s: CUresult %d", #call, (int)rc_);	\
	} while (0)

static void init(int device)
{
	CUcontext ctx;

	CK(cu.Init(0));
	CK(cu.DeviceGet(&cdev, device));
	CK(cu.PrimaryCtxRetain(&ctx, cdev));
	CK(cu.CtxSetCurrent(ctx));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = cdev;
	access_desc.location = prop.location;
	access_desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CK(cu.Granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CK(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
}

/* A mapped, accessible device range of size (one handle). */
struct drange {
	CUdeviceptr va;
	CUmemGenericAllocationHandle h;
	size_t size;
};

static void dmap(struct drange *r, size_t size)
{
	r->size = size;
	CK(cu.AddressReserve(&r->va, size, gran, 0, 0));
	CK(cu.Create(&r->h, size, &prop, 0));
	CK(cu.Map(r->va, size, 0, r->h, 0));
	CK(cu.SetAccess(r->va, size, &access_desc, 1));
}

static void dunmap(struct drange *r)
{
	CK(cu.Unmap(r->va, r->size));
	CK(cu.Release(r->h));
	CK(cu.AddressFree(r->va, r->size));
}

/* 6v: per-call costs on a range of size. */
static void vmm_calls(size_t size, unsigned int reps)
{
	enum { RES, CRE, MAP, ACC, UNM, REL, FRE, NR };
	static const char *const names[NR] = {
		"cuMemAddressReserve", "cuMemCreate", "cuMemMap",
		"cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
		"cuMemAddressFree",
	};
	double *s[NR], m[NR];
	struct drange r = { .size = size };
	struct bn_json j;
	unsigned int i, k;
	uint64_t t[NR + 1];
	char id[32];

	for (k = 0; k < NR; k++)
		s[k] = bn_xcalloc(reps, sizeof(double));
	for (i = 0; i < reps; i++) {
		t[0] = bn_now();
		CK(cu.AddressReserve(&r.va, size, gran, 0, 0));
		t[1] = bn_now();
		CK(cu.Create(&r.h, size, &prop, 0));
		t[2] = bn_now();
		CK(cu.Map(r.va, size, 0, r.h, 0));
		t[3] = bn_now();
		CK(cu.SetAccess(r.va, size, &access_desc, 1));
		t[4] = bn_now();
		CK(cu.Unmap(r.va, size));
		t[5] = bn_now();
		CK(cu.Release(r.h));
		t[6] = bn_now();
		CK(cu.AddressFree(r.va, size));
		t[7] = bn_now();
		for (k = 0; k < NR; k++)
			s[k][i] = (double)(t[k + 1] - t[k]);
	}
	for (k = 0; k < NR; k++)
		m[k] = bn_median(s[k], reps);
	snprintf(id, sizeof(id), "6v-%lluM", (unsigned long long)(size / MiB));
	/* ratio: map path (create+map+access) over unmap path (unmap+release) */
	bn_json_begin(&j, id, "VMM per-call costs (ratio: map path / unmap path)",
		      (m[CRE] + m[MAP] + m[ACC]) / (m[UNM] + m[REL]), 0, "none");
	for (k = 0; k < NR; k++)
		bn_json_median(&j, names[k], m[k]);
	bn_json_size(&j, "bytes", (double)size);
	bn_json_size(&j, "reps", reps);
	bn_json_end(&j, "");
	for (k = 0; k < NR; k++)
		free(s[k]);
}

/* Plain pinned copies of size: medians of DtoH and HtoD (ns). */
static void plain_copy(size_t size, unsigned int reps, double *dtoh,
		       double *htod)
{
	double *a = bn_xcalloc(reps, sizeof(double));
	double *b = bn_xcalloc(reps, sizeof(double));
	struct drange r;
	unsigned int i;
	void *host;

	dmap(&r, size);
	CK(cu.HostAlloc(&host, size, CU_MEMHOSTALLOC_PORTABLE));
	for (i = 0; i < reps + 1; i++) {	/* 0 warms up */
		uint64_t t0 = bn_now(), t1;

		CK(cu.DtoHAsync(host, r.va, size, stream));
		CK(cu.StreamSync(stream));
		t1 = bn_now();
		CK(cu.HtoDAsync(r.va, host, size, stream));
		CK(cu.StreamSync(stream));
		if (i) {
			a[i - 1] = (double)(t1 - t0);
			b[i - 1] = (double)(bn_now() - t1);
		}
	}
	CK(cu.FreeHost(host));
	dunmap(&r);
	*dtoh = bn_median(a, reps);
	*htod = bn_median(b, reps);
	free(a);
	free(b);
}

/* gs_mm pause/resume medians (ns) of a tag of size with policy p. */
static void mm_cycle(const char *lib, int device, size_t size, size_t piece,
		     enum gs_mm_policy p, unsigned int reps, double *pause,
		     double *resume, uint32_t *chunks)
{
	double *a = bn_xcalloc(reps, sizeof(double));
	double *b = bn_xcalloc(reps, sizeof(double));
	struct gs_mm_tag_info info;
	struct gs_backend *be;
	struct gs_mm *mm;
	size_t done, n = 0;
	void **ptr = bn_xcalloc(size / piece + 1, sizeof(void *));
	unsigned int i;
	uint64_t bytes;
	int err = 0;

	be = gs_backend_cuda_new(device, lib, &err);
	if (!be)
		bn_die("gs_backend_cuda_new: %s", strerror(-err));
	bn_ck(gs_mm_new(be, &mm), "gs_mm_new");
	bn_ck(gs_mm_set_policy(mm, GPUSLEEP_TAG_WEIGHTS, p, 0), "policy");
	for (done = 0; done < size; done += piece) {
		ptr[n] = gs_mm_alloc(mm, GPUSLEEP_TAG_WEIGHTS, piece);
		if (!ptr[n++])
			bn_die("gs_mm_alloc: %m");
	}
	for (i = 0; i < reps + 1; i++) {	/* 0 allocates staging */
		uint64_t t0 = bn_now(), t1;

		bn_ck(gs_mm_pause(mm, GPUSLEEP_TAG_WEIGHTS, &bytes), "pause");
		t1 = bn_now();
		bn_ck(gs_mm_resume(mm, GPUSLEEP_TAG_WEIGHTS, &bytes), "resume");
		if (i) {
			a[i - 1] = (double)(t1 - t0);
			b[i - 1] = (double)(bn_now() - t1);
		}
	}
	gs_mm_tag_info(mm, GPUSLEEP_TAG_WEIGHTS, &info);
	*chunks = info.nr_chunks;
	while (n)
		gs_mm_free(mm, ptr[--n]);
	gs_mm_destroy(mm);
	*pause = bn_median(a, reps);
	*resume = bn_median(b, reps);
	free(a);
	free(b);
	free(ptr);
}

static double gib_s(size_t size, double ns)
{
	return ns > 0 ? (double)size / GiB / (ns / 1e9) : 0;	/* 0: noise */
}

static void mm_bench(const char *lib, int device, size_t size, size_t piece,
		     unsigned int reps, const char *tag, int dry)
{
	double dp, dr, bp, br, pd, ph;
	size_t freeb = 0, total = 0;
	uint32_t chunks;
	struct bn_json j;
	char id[32];
	int backup;

	if (cu.GetInfo && cu.GetInfo(&freeb, &total) == CUDA_SUCCESS &&
	    size + 2 * GiB > freeb && !dry) {
		fprintf(stderr, "bench_cuda: %s: skipped, %zu MiB free on the device\n",
			tag, freeb >> 20);
		return;
	}
	backup = dry || size < (size_t)sysconf(_SC_PHYS_PAGES) /
		 4 * 3 * (size_t)sysconf(_SC_PAGESIZE);

	mm_cycle(lib, device, size, piece, GS_MM_DISCARD, reps, &dp, &dr,
		 &chunks);
	snprintf(id, sizeof(id), "6d-%s", tag);
	bn_json_begin(&j, id, "CUDA release/resume without backup (ratio: resume/release)",
		      dr / dp, 0, "none");
	bn_json_median(&j, "release", dp);
	bn_json_median(&j, "resume", dr);
	bn_json_size(&j, "bytes", (double)size);
	bn_json_size(&j, "chunks", chunks);
	bn_json_size(&j, "reps", reps);
	bn_json_extra(&j, "release_gib_s", gib_s(size, dp));
	bn_json_extra(&j, "resume_gib_s", gib_s(size, dr));
	bn_json_end(&j, dry ? "dry run: stand-in libcuda" : "");
	if (!backup) {
		fprintf(stderr, "bench_cuda: %s: backup skipped (host memory)\n",
			tag);
		return;
	}
	plain_copy(size, reps, &pd, &ph);
	mm_cycle(lib, device, size, piece, GS_MM_BACKUP, reps, &bp, &br,
		 &chunks);
	snprintf(id, sizeof(id), "6b-%s", tag);
	/*
	 * Ratio: the backup policy's release + resume against what a plain
	 * pinned copy each way costs on top of the discard policy's release
	 * + resume (the unmap/map work is the same in both).
	 */
	bn_json_begin(&j, id, "CUDA backup+restore vs discard + plain pinned copies",
		      (bp + br) / (dp + dr + pd + ph), 1.2, "max");
	bn_json_median(&j, "release_backup", bp);
	bn_json_median(&j, "resume_restore", br);
	bn_json_median(&j, "release_discard", dp);
	bn_json_median(&j, "resume_discard", dr);
	bn_json_median(&j, "plain_dtoh", pd);
	bn_json_median(&j, "plain_htod", ph);
	bn_json_size(&j, "bytes", (double)size);
	bn_json_size(&j, "chunks", chunks);
	bn_json_size(&j, "reps", reps);
	bn_json_extra(&j, "backup_gib_s", gib_s(size, bp - dp));
	bn_json_extra(&j, "restore_gib_s", gib_s(size, br - dr));
	bn_json_extra(&j, "plain_dtoh_gib_s", gib_s(size, pd));
	bn_json_extra(&j, "plain_htod_gib_s", gib_s(size, ph));
	bn_json_end(&j, dry ? "dry run: stand-in libcuda" :
		    "copy time = backup-policy time - discard-policy time");
}

int main(int argc, char **argv)
{
	const char *lib = NULL, *sizes = NULL, *fake = getenv("FAKECUDA_LIB");
	unsigned int reps = 0;
	int device = 0, dry = 0, a;
	size_t unit, piece;
	char *list, *tok, *save;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--dry-run"))
			dry = 1;
		else if (!strcmp(argv[a], "--lib") && a + 1 < argc)
			lib = argv[++a];
		else if (!strcmp(argv[a], "--device") && a + 1 < argc)
			device = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--sizes") && a + 1 < argc)
			sizes = argv[++a];
		else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
			reps = (unsigned int)atoi(argv[++a]);
		else
			bn_die("usage: bench_cuda [--dry-run] [--lib PATH] [--device N] [--sizes GiB,...] [--reps N]");
	}
	if (dry) {
		lib = lib ? lib : fake ? fake :
			"build/tests/host/fakecuda/libcuda.so.1";
		sizes = sizes ? sizes : "16,64";
		reps = reps ? reps : 2;
		unit = MiB;
		piece = 4 * MiB;
	} else {
		lib = lib ? lib : "libcuda.so.1";
		sizes = sizes ? sizes : "1,2,4,8,16,32,64,100";
		reps = reps ? reps : 5;
		unit = GiB;
		piece = 256 * MiB;
	}
	load(lib);
	init(device);

	vmm_calls(gran, dry ? 3 : 100);
	vmm_calls(dry ? 64 * MiB : GiB, dry ? 3 : 20);

	list = strdup(sizes);
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		size_t size = (size_t)atol(tok) * unit;
		char tag[32];

		if (!size)
			continue;
		snprintf(tag, sizeof(tag), "%s%s", tok, dry ? "M" : "G");
		mm_bench(lib, device, size, size < piece ? size : piece, reps,
			 tag, dry);
	}
	free(list);
	CK(cu.StreamDestroy(stream));
	CK(cu.PrimaryCtxRelease(cdev));
	return 0;
}
