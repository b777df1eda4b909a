// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 4: the host backend's release and resume against raw mmap calls.
 *
 * Subject: a gs_mm on the host backend with one DISCARD tag (weights) whose
 * chunk size is the allocation size (one chunk), one allocation of SIZE,
 * every page touched.
 *   release = gs_mm_pause()            (madvise(DONTNEED) + mprotect(NONE))
 *   resume  = gs_mm_resume() + write one byte to every page
 * Baseline, on the same sizes:
 *   release = madvise(MADV_DONTNEED) of a touched anonymous mapping
 *   resume  = mmap(anonymous) + write one byte to every page
 * Also timed on the baseline's range: mprotect(PROT_NONE) right after its
 * madvise, the second call of the backend's unmap (extra
 * mprotect_after_dontneed_ms): what a single-call unmap could save.
 * Only one of the two is resident at a time (the VM has 2 GiB). Samples
 * alternate subject and baseline; medians; GiB/s = SIZE / median.
 * Transparent huge pages are turned off for this process
 * (PR_SET_THP_DISABLE) so both sides fault 4 KiB pages; BENCH_THP=1 leaves
 * the system setting.
 *
 * Usage: bench_host [SIZE_MiB...]   (default 64 256 1024)
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

static size_t page;

static void touch(volatile char *p, size_t size)
{
	size_t o;

	for (o = 0; o < size; o += page)
		p[o] = 1;
}

static double gib_s(size_t size, double ns)
{
	return ns > 0 ? (double)size / (1 << 30) / (ns / 1e9) : 0;
}

static void run(size_t mib, unsigned int reps)
{
	size_t size = mib << 20;
	double *gp = bn_xcalloc(reps, sizeof(double));
	double *gr = bn_xcalloc(reps, sizeof(double));
	double *rp = bn_xcalloc(reps, sizeof(double));
	double *rr = bn_xcalloc(reps, sizeof(double));
	double *mp = bn_xcalloc(reps, sizeof(double));
	double m[4];
	struct bn_json j;
	struct gs_mm *mm;
	uint64_t bytes, t0;
	unsigned int r;
	char id[16];
	char *p;

	bn_ck(gs_mm_new(gs_backend_host_new(), &mm), "mm");
	bn_ck(gs_mm_set_policy(mm, GPUSLEEP_TAG_WEIGHTS, GS_MM_DISCARD, size),
	      "set policy");
	p = gs_mm_alloc(mm, GPUSLEEP_TAG_WEIGHTS, size);
	if (!p)
		bn_die("gs_mm_alloc %zu MiB: %m", mib);
	touch(p, size);
	for (r = 0; r < reps + 1; r++) {	/* round 0 warms up */
		char *q;

		t0 = bn_now();
		bn_ck(gs_mm_pause(mm, GPUSLEEP_TAG_WEIGHTS, &bytes), "pause");
		if (r)
			gp[r - 1] = (double)(bn_now() - t0);
		if (bytes < size)
			bn_die("paused %llu bytes of %zu",
			       (unsigned long long)bytes, size);

		t0 = bn_now();
		q = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q == MAP_FAILED)
			bn_die("mmap: %m");
		touch(q, size);
		if (r)
			rr[r - 1] = (double)(bn_now() - t0);
		t0 = bn_now();
		if (madvise(q, size, MADV_DONTNEED))
			bn_die("madvise: %m");
		if (r)
			rp[r - 1] = (double)(bn_now() - t0);
		t0 = bn_now();
		if (mprotect(q, size, PROT_NONE))
			bn_die("mprotect: %m");
		if (r)
			mp[r - 1] = (double)(bn_now() - t0);
		munmap(q, size);

		t0 = bn_now();
		bn_ck(gs_mm_resume(mm, GPUSLEEP_TAG_WEIGHTS, &bytes), "resume");
		touch(p, size);
		if (r)
			gr[r - 1] = (double)(bn_now() - t0);
	}
	gs_mm_free(mm, p);
	gs_mm_destroy(mm);
	m[0] = bn_median(gp, reps);
	m[1] = bn_median(rp, reps);
	m[2] = bn_median(gr, reps);
	m[3] = bn_median(rr, reps);

	snprintf(id, sizeof(id), "4r-%zuM", mib);
	bn_json_begin(&j, id, "host release (gs_mm_pause) vs madvise(DONTNEED)",
		      m[0] / m[1], 1.2, "max");
	bn_json_median(&j, "gs_mm_pause", m[0]);
	bn_json_median(&j, "madvise_dontneed", m[1]);
	bn_json_size(&j, "bytes", (double)size);
	bn_json_size(&j, "reps", reps);
	bn_json_extra(&j, "gs_gib_s", gib_s(size, m[0]));
	bn_json_extra(&j, "raw_gib_s", gib_s(size, m[1]));
	bn_json_extra(&j, "mprotect_after_dontneed_ms", bn_median(mp, reps) / 1e6);
	bn_json_end(&j, getenv("BENCH_THP") ? "THP: system setting" : "THP off");

	snprintf(id, sizeof(id), "4m-%zuM", mib);
	bn_json_begin(&j, id, "host resume (gs_mm_resume+touch) vs mmap+touch",
		      m[2] / m[3], 1.2, "max");
	bn_json_median(&j, "gs_mm_resume_touch", m[2]);
	bn_json_median(&j, "mmap_touch", m[3]);
	bn_json_size(&j, "bytes", (double)size);
	bn_json_size(&j, "reps", reps);
	bn_json_extra(&j, "gs_gib_s", gib_s(size, m[2]));
	bn_json_extra(&j, "raw_gib_s", gib_s(size, m[3]));
	bn_json_end(&j, getenv("BENCH_THP") ? "THP: system setting" : "THP off");
	free(gp);
	free(gr);
	free(rp);
	free(rr);
	free(mp);
}

int main(int argc, char **argv)
{
	int a;

	page = (size_t)sysconf(_SC_PAGESIZE);
	if (!getenv("BENCH_THP"))
		prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	if (argc < 2) {
		run(64, bn_reps(15, 5));
		run(256, bn_reps(6, 3));
		run(1024, bn_reps(4, 3));
	}
	for (a = 1; a < argc; a++)
		run((size_t)atol(argv[a]), bn_reps(10, 3));
	return 0;
}
