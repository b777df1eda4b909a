// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 6m: an H100-sized sleep/wake cycle, modelled (issue 34 item
 * 4). Nothing that large is allocated and no time is spent: the tests'
 * stand-in libcuda (tests/host/fake_libcuda.c) runs in its model mode,
 * where device memory, mappings and pinned staging are bookkeeping only,
 * nothing is copied, and each driver call and each copy adds what it
 * would cost to a modelled clock (fakecuda_counter("model_ns")).
 *
 * What it models, and nothing else:
 * - the per-call cost of the VMM entry points, as kvcached's bench_vmm
 *   measured them per 2 MiB page on an A100 (ovg-project/kvcached,
 *   benchmarks/bench_vmm: cuMemCreate 193 us, cuMemMap 1.45 us,
 *   cuMemSetAccess 36 us, cuMemUnmap 25.6 us, cuMemAddressReserve 19 us),
 *   charged per call whatever its size (gpusleep's calls are on chunks of
 *   16 MiB to 1 GiB: how their cost grows with size is not known here;
 *   extra "wake_if_create_per_2mib_s" bounds it by charging cuMemCreate
 *   per 2 MiB); cuMemRelease, not measured there, at cuMemUnmap's cost;
 * - the link: pinned copies at 35 GB/s host-to-device and 52.8 GB/s
 *   device-to-host, an H100's (NVIDIA/nvbandwidth #24), one at a time;
 * - zeroing a discarded tag's memory at 2000 GB/s (an assumption: about
 *   60% of the H100 SXM's 3.35 TB/s HBM3);
 * - pinning host memory at 0.25 s per GiB (an assumption, of the order of
 *   vLLM #58066's first level-1 sleep: 21.9 s, against 1.16 s once the
 *   pinned buffers were prepared at start); the GPU check measures it
 *   (check.json "pin_s_per_gib").
 * Not modelled: gpusleep's own CPU time (microseconds per chunk), the
 * fence (no GPU work is in flight), NVML, the engine's side.
 *
 * The cycle: weights 80 GiB backed up (1280 allocations of 64 MiB, as an
 * engine's tensors), KV cache 60 GiB discarded (80 layers of 768 MiB), a
 * cuda_graph tag of 1 GiB backed up (256 allocations of 4 MiB): the sizes
 * of the issue, more than one H100 holds; the model needs no fit. The
 * staging is gpusleep's default (eager: pinned when allocated, kept).
 * Three cycles: release (pause weights, kv_cache, cuda_graph) then wake
 * (resume the three).
 *
 * Beside it, the same cycle done the way torch_memory_saver does it
 * (its CUDA hook: one cuMemCreate handle per allocation, each mapped and
 * made accessible on its own; a pause copies each backed-up allocation
 * to a cudaMallocHost buffer allocated then and waits for it, then unmaps
 * and releases; a resume creates and maps each again, copies each back
 * and frees its buffer: torch_memory_saver #111 saw 2.41 GiB/s where a
 * pinned copy does 24, #86 4.85 s where retained buffers give 0.62 s),
 * driven on the same stand-in with the same costs. It zeroes nothing.
 *
 * Rows (env "model"; targets of issue 34):
 *   6m-wake     wake / the weights' host-to-device copy       <= 1.1
 *   6m-release  release / the weights' device-to-host copy     <= 1.1
 *   6m-vmm      VMM call time / copy time, over a cycle        <= 0.02
 *   6m-kv       KV discard release, ms per GiB / 5 ms          <= 1
 *   6m-first    the first cycle / the later ones               <= 1.1
 *   6m-tms-wake, 6m-tms-release: torch_memory_saver's way / gpusleep's
 *               (information)
 *   6m-lazy-first: the first cycle / the later ones with
 *               GPUSLEEP_STAGING=lazy (information: pinning moved into
 *               the first release)
 *
 * Usage: bench_model [--lib PATH]   (default: FAKECUDA_LIB, the build's)
 */
#include <dlfcn.h>
#include <string.h>

#include "bench.h"
#include "libgpusleep.h"
#include "gs_cuda.h"
#include "fake_libcuda.h"

#ifndef FAKECUDA_LIB
#define FAKECUDA_LIB "build/tests/host/fakecuda/libcuda.so.1"
#endif

#define GiB	(1ULL << 30)
#define MiB	(1ULL << 20)
#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define G	(1U << 2)
#define CYCLES	3

/* per call, ns (kvcached bench_vmm, A100, 2 MiB pages; see above) */
#define COST_CREATE	193320LL
#define COST_MAP	1450LL
#define COST_ACCESS	35990LL
#define COST_UNMAP	25630LL
#define COST_RELEASE	COST_UNMAP	/* not measured: as cuMemUnmap */
#define COST_RESERVE	19000LL
#define H2D_MBPS	35000LL		/* nvbandwidth #24, H100 */
#define D2H_MBPS	52800LL
#define MEMSET_MBPS	2000000LL	/* assumption */
#define PIN_NS_PER_GIB	250000000LL	/* assumption */

static const struct {
	uint32_t tag;
	enum gs_mm_policy policy;
	size_t each;
	unsigned int n;
} layout[] = {
	{ W, GS_MM_BACKUP, 64 * MiB, 1280 },
	{ KV, GS_MM_DISCARD, 768 * MiB, 80 },
	{ G, GS_MM_BACKUP, 4 * MiB, 256 },
};
#define NTAGS (sizeof(layout) / sizeof(layout[0]))

static fakecuda_counter_fn counter;
static fakecuda_set_fn knob;
static void *lib;

static long long now_model(void)
{
	return counter("model_ns");
}

static void set(const char *k, long long v)
{
	if (knob(k, v))
		bn_die("stand-in knob %s refused", k);
}

static void model_on(void)
{
	set("model", 1);
	set("capacity", 1LL << 40);
	set("cost_ns:cuMemCreate", COST_CREATE);
	set("cost_ns:cuMemMap", COST_MAP);
	set("cost_ns:cuMemSetAccess", COST_ACCESS);
	set("cost_ns:cuMemUnmap", COST_UNMAP);
	set("cost_ns:cuMemRelease", COST_RELEASE);
	set("cost_ns:cuMemAddressReserve", COST_RESERVE);
	set("h2d_mbps", H2D_MBPS);
	set("d2h_mbps", D2H_MBPS);
	set("memset_mbps", MEMSET_MBPS);
	set("pin_ns_per_gib", PIN_NS_PER_GIB);
}

struct cycle {
	long long release, wake, vmm, copy, pin;	/* ns */
	long long kv_release;
};

/* gpusleep: the cycles through a gs_mm on the stand-in's CUDA backend */
static void gpusleep_cycles(const char *path, unsigned int staging,
			    struct cycle *c, long long *load_pin,
			    unsigned int *chunks)
{
	struct gs_backend *b;
	struct gs_mm *mm;
	int err = 0;
	long long t0;

	b = gs_backend_cuda_new(0, path, &err);
	if (!b)
		bn_die("the stand-in backend: %s", strerror(-err));
	bn_ck(gs_mm_new(b, &mm), "gs_mm_new");
	t0 = counter("model_pin_ns");
	*chunks = 0;
	for (size_t k = 0; k < NTAGS; k++) {
		struct gs_mm_tag_info info;

		bn_ck(gs_mm_set_policy(mm, layout[k].tag, layout[k].policy, 0),
		      "gs_mm_set_policy");
		bn_ck(gs_mm_set_staging(mm, layout[k].tag, staging),
		      "gs_mm_set_staging");
		for (unsigned int i = 0; i < layout[k].n; i++)
			if (!gs_mm_alloc(mm, layout[k].tag, layout[k].each))
				bn_die("allocating %zu bytes: %s",
				       layout[k].each, strerror(errno));
		bn_ck(gs_mm_tag_info(mm, layout[k].tag, &info), "tag_info");
		*chunks += info.nr_chunks;
	}
	*load_pin = counter("model_pin_ns") - t0;
	for (int r = 0; r < CYCLES; r++) {
		long long v0 = counter("model_vmm_ns"),
			  c0 = counter("model_copy_ns"),
			  p0 = counter("model_pin_ns"), k0;
		uint64_t bytes;

		t0 = now_model();
		for (size_t k = 0; k < NTAGS; k++) {
			k0 = now_model();
			bn_ck(gs_mm_pause(mm, layout[k].tag, &bytes), "pause");
			if (layout[k].tag == KV)
				c[r].kv_release = now_model() - k0;
		}
		c[r].release = now_model() - t0;
		t0 = now_model();
		for (size_t k = 0; k < NTAGS; k++)
			bn_ck(gs_mm_resume(mm, layout[k].tag, &bytes), "resume");
		c[r].wake = now_model() - t0;
		c[r].vmm = counter("model_vmm_ns") - v0;
		c[r].copy = counter("model_copy_ns") - c0;
		c[r].pin = counter("model_pin_ns") - p0;
	}
	gs_mm_destroy(mm);
}

/* the Driver API entry points torch_memory_saver's way needs */
static struct {
	__typeof__(cuInit) *init;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDevicePrimaryCtxRetain) *retain;
	__typeof__(cuDevicePrimaryCtxRelease_v2) *release_ctx;
	__typeof__(cuCtxSetCurrent) *set_current;
	__typeof__(cuMemAddressReserve) *reserve;
	__typeof__(cuMemAddressFree) *addr_free;
	__typeof__(cuMemCreate) *create;
	__typeof__(cuMemRelease) *release;
	__typeof__(cuMemMap) *map;
	__typeof__(cuMemSetAccess) *access;
	__typeof__(cuMemUnmap) *unmap;
	__typeof__(cuMemHostAlloc) *host_alloc;
	__typeof__(cuMemFreeHost) *free_host;
	__typeof__(cuMemcpyDtoHAsync_v2) *d2h;
	__typeof__(cuMemcpyHtoDAsync_v2) *h2d;
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamSynchronize) *stream_sync;
	__typeof__(cuStreamDestroy_v2) *stream_destroy;
} cu;

#define CK(call) do {							\
		CUresult rc_ = (call);					\
		if (rc_ != CUDA_SUCCESS)				\
			bn_die("%s: CUresult %d", #call, (int)rc_);	\
	} while (0)

static void load_cu(void)
{
#define SYM(f, name) do {						\
		*(void **)&cu.f = dlsym(lib, name);			\
		if (!cu.f)						\
			bn_die("the stand-in has no %s", name);		\
	} while (0)
	SYM(init, "cuInit");
	SYM(device_get, "cuDeviceGet");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(release_ctx, "cuDevicePrimaryCtxRelease_v2");
	SYM(set_current, "cuCtxSetCurrent");
	SYM(reserve, "cuMemAddressReserve");
	SYM(addr_free, "cuMemAddressFree");
	SYM(create, "cuMemCreate");
	SYM(release, "cuMemRelease");
	SYM(map, "cuMemMap");
	SYM(access, "cuMemSetAccess");
	SYM(unmap, "cuMemUnmap");
	SYM(host_alloc, "cuMemHostAlloc");
	SYM(free_host, "cuMemFreeHost");
	SYM(d2h, "cuMemcpyDtoHAsync_v2");
	SYM(h2d, "cuMemcpyHtoDAsync_v2");
	SYM(stream_create, "cuStreamCreate");
	SYM(stream_sync, "cuStreamSynchronize");
	SYM(stream_destroy, "cuStreamDestroy_v2");
#undef SYM
}

struct tms_alloc {
	CUdeviceptr va;
	size_t size;
	CUmemGenericAllocationHandle h;
	void *host;
	bool backup;
};

static void tms_map(struct tms_alloc *a, const CUmemAllocationProp *prop,
		    const CUmemAccessDesc *acc)
{
	CK(cu.create(&a->h, a->size, prop, 0));
	CK(cu.map(a->va, a->size, 0, a->h, 0));
	CK(cu.access(a->va, a->size, acc, 1));
}

/* torch_memory_saver's way, the same allocations and cycles */
static void tms_cycles(struct cycle *c)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemAccessDesc acc = {
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	struct tms_alloc *a;
	unsigned int n = 0, total = 0;
	CUcontext ctx;
	CUdevice dev;
	CUstream s;

	load_cu();
	CK(cu.init(0));
	CK(cu.device_get(&dev, 0));
	CK(cu.retain(&ctx, dev));
	CK(cu.set_current(ctx));
	CK(cu.stream_create(&s, CU_STREAM_NON_BLOCKING));
	for (size_t k = 0; k < NTAGS; k++)
		total += layout[k].n;
	a = bn_xcalloc(total, sizeof(*a));
	for (size_t k = 0; k < NTAGS; k++)
		for (unsigned int i = 0; i < layout[k].n; i++, n++) {
			a[n].size = layout[k].each;
			a[n].backup = layout[k].policy == GS_MM_BACKUP;
			CK(cu.reserve(&a[n].va, a[n].size, 0, 0, 0));
			tms_map(&a[n], &prop, &acc);
		}
	for (int r = 0; r < CYCLES; r++) {
		long long v0 = counter("model_vmm_ns"),
			  c0 = counter("model_copy_ns"),
			  p0 = counter("model_pin_ns"), t0 = now_model();

		for (unsigned int i = 0; i < n; i++) {
			if (a[i].backup) {
				CK(cu.host_alloc(&a[i].host, a[i].size, 0));
				CK(cu.d2h(a[i].host, a[i].va, a[i].size, s));
				CK(cu.stream_sync(s));
			}
			CK(cu.unmap(a[i].va, a[i].size));
			CK(cu.release(a[i].h));
		}
		c[r].release = now_model() - t0;
		t0 = now_model();
		for (unsigned int i = 0; i < n; i++) {
			tms_map(&a[i], &prop, &acc);
			if (a[i].backup) {
				CK(cu.h2d(a[i].va, a[i].host, a[i].size, s));
				CK(cu.stream_sync(s));
				CK(cu.free_host(a[i].host));
				a[i].host = NULL;
			}
		}
		c[r].wake = now_model() - t0;
		c[r].vmm = counter("model_vmm_ns") - v0;
		c[r].copy = counter("model_copy_ns") - c0;
		c[r].pin = counter("model_pin_ns") - p0;
	}
	for (unsigned int i = 0; i < n; i++) {
		CK(cu.unmap(a[i].va, a[i].size));
		CK(cu.release(a[i].h));
		CK(cu.addr_free(a[i].va, a[i].size));
	}
	CK(cu.stream_destroy(s));
	CK(cu.release_ctx(dev));
	free(a);
}

static double later(const struct cycle *c, size_t off)
{
	double v[CYCLES - 1];

	for (int r = 1; r < CYCLES; r++)
		v[r - 1] = (double)*(const long long *)((const char *)&c[r] +
							off);
	return bn_median(v, CYCLES - 1);
}

#define LATER(c, f) later(c, offsetof(struct cycle, f))

int main(int argc, char **argv)
{
	const char *path = getenv("FAKECUDA_LIB") ? getenv("FAKECUDA_LIB") :
			   FAKECUDA_LIB;
	struct cycle gs[CYCLES], lazy[CYCLES], tms[CYCLES];
	double wbytes = 0, bbytes = 0, kvbytes = 0, h2d, d2h, wake, rel,
	       vmm, copy, tms_wake, tms_rel;
	long long load_pin, lazy_load_pin;
	unsigned int chunks, handles = 0;
	struct bn_json j;

	if (argc == 3 && !strcmp(argv[1], "--lib"))
		path = argv[2];
	else if (argc != 1)
		bn_die("usage: bench_model [--lib PATH]");
	setenv("GPUSLEEP_NVML_LIB", "off", 0);
	setenv("BENCH_ENV", "model", 1);
	lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib)
		bn_die("the stand-in libcuda %s: %s", path, dlerror());
	counter = (fakecuda_counter_fn)dlsym(lib, "fakecuda_counter");
	knob = (fakecuda_set_fn)dlsym(lib, "fakecuda_set");
	if (!counter || !knob)
		bn_die("%s is not the stand-in libcuda", path);
	model_on();
	for (size_t k = 0; k < NTAGS; k++) {
		double b = (double)layout[k].each * layout[k].n;

		handles += layout[k].n;
		if (layout[k].tag == W)
			wbytes = b;
		if (layout[k].tag == KV)
			kvbytes = b;
		if (layout[k].policy == GS_MM_BACKUP)
			bbytes += b;
	}
	h2d = wbytes / (H2D_MBPS * 1e6) * 1e9;	/* ns */
	d2h = wbytes / (D2H_MBPS * 1e6) * 1e9;

	gpusleep_cycles(path, 0, gs, &load_pin, &chunks);
	gpusleep_cycles(path, GS_MM_STAGING_LAZY, lazy, &lazy_load_pin,
			&chunks);
	tms_cycles(tms);

	wake = LATER(gs, wake);
	rel = LATER(gs, release);
	vmm = LATER(gs, vmm);
	copy = LATER(gs, copy);
	tms_wake = LATER(tms, wake);
	tms_rel = LATER(tms, release);

	bn_json_begin(&j, "6m-wake", "modelled H100 wake (80 GiB weights restored, 60 GiB KV, 1 GiB graphs) vs the weights' H2D copy at 35 GB/s",
		      wake / h2d, 1.1, "max");
	bn_json_median(&j, "gpusleep_wake", wake);
	bn_json_median(&j, "weights_h2d_copy", h2d);
	bn_json_size(&j, "weights_bytes", wbytes);
	bn_json_size(&j, "kv_bytes", kvbytes);
	bn_json_size(&j, "chunks", chunks);
	bn_json_extra(&j, "wake_s", wake / 1e9);
	bn_json_extra(&j, "tms_wake_s", tms_wake / 1e9);
	bn_json_extra(&j, "wake_if_create_per_2mib_s",
		      (wake + (double)COST_CREATE *
		       ((kvbytes + bbytes) / (2.0 * MiB) - chunks)) / 1e9);
	bn_json_end(&j, "model: per-call VMM costs (kvcached, A100), H100 link rates (nvbandwidth #24); no GPU");

	bn_json_begin(&j, "6m-release", "modelled H100 release (weights backed up, KV and graphs) vs the weights' D2H copy at 52.8 GB/s",
		      rel / d2h, 1.1, "max");
	bn_json_median(&j, "gpusleep_release", rel);
	bn_json_median(&j, "weights_d2h_copy", d2h);
	bn_json_extra(&j, "release_s", rel / 1e9);
	bn_json_extra(&j, "tms_release_s", tms_rel / 1e9);
	bn_json_end(&j, "model: the graphs' 1 GiB is copied too");

	bn_json_begin(&j, "6m-vmm", "modelled VMM call time of a cycle vs its copy time",
		      vmm / copy, 0.02, "max");
	bn_json_median(&j, "vmm_calls", vmm);
	bn_json_median(&j, "copies", copy);
	bn_json_size(&j, "chunks", chunks);
	bn_json_size(&j, "tms_handles", handles);
	bn_json_extra(&j, "tms_vmm_s", LATER(tms, vmm) / 1e9);
	bn_json_end(&j, "model: each call charged its 2 MiB cost whatever its size");

	bn_json_begin(&j, "6m-kv", "modelled KV discard release, ms per GiB vs 5 ms",
		      LATER(gs, kv_release) / 1e6 / (kvbytes / GiB) / 5.0, 1.0,
		      "max");
	bn_json_median(&j, "kv_release", LATER(gs, kv_release));
	bn_json_median(&j, "five_ms_per_gib", 5e6 * kvbytes / GiB);
	bn_json_extra(&j, "kv_ms_per_gib",
		      LATER(gs, kv_release) / 1e6 / (kvbytes / GiB));
	bn_json_end(&j, "model");

	bn_json_begin(&j, "6m-first", "modelled first cycle vs the later ones (staging pinned at allocation, kept)",
		      (double)(gs[0].release + gs[0].wake) /
		      (LATER(gs, release) + LATER(gs, wake)), 1.1, "max");
	bn_json_median(&j, "first_cycle", (double)(gs[0].release + gs[0].wake));
	bn_json_median(&j, "later_cycle", LATER(gs, release) + LATER(gs, wake));
	bn_json_extra(&j, "pinned_at_load_s", load_pin / 1e9);
	bn_json_end(&j, "model: pinning (0.25 s/GiB, an assumption) is paid when the tags are allocated");

	bn_json_begin(&j, "6m-lazy-first", "modelled first cycle vs the later ones, GPUSLEEP_STAGING=lazy (information)",
		      (double)(lazy[0].release + lazy[0].wake) /
		      (LATER(lazy, release) + LATER(lazy, wake)), 0, "none");
	bn_json_median(&j, "first_cycle",
		       (double)(lazy[0].release + lazy[0].wake));
	bn_json_median(&j, "later_cycle",
		       LATER(lazy, release) + LATER(lazy, wake));
	bn_json_extra(&j, "first_release_pin_s", lazy[0].pin / 1e9);
	bn_json_end(&j, "model: lazy staging moves the pinning into the first release");

	bn_json_begin(&j, "6m-tms-wake", "modelled wake the way torch_memory_saver does it vs gpusleep's (information)",
		      tms_wake / wake, 0, "none");
	bn_json_median(&j, "tms_wake", tms_wake);
	bn_json_median(&j, "gpusleep_wake", wake);
	bn_json_size(&j, "tms_handles", handles);
	bn_json_end(&j, "model: one handle per allocation, a copy and a wait each, its pinned buffer freed after");

	bn_json_begin(&j, "6m-tms-release", "modelled release the way torch_memory_saver does it vs gpusleep's (information)",
		      tms_rel / rel, 0, "none");
	bn_json_median(&j, "tms_release", tms_rel);
	bn_json_median(&j, "gpusleep_release", rel);
	bn_json_extra(&j, "tms_pin_s", LATER(tms, pin) / 1e9);
	bn_json_end(&j, "model: a pinned buffer allocated per allocation at every release (0.25 s/GiB, an assumption)");
	return 0;
}
