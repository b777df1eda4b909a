// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/test_cuda_dataplane.c: the memory manager and the agent on the
 * CUDA backend with the engine's own GPU work in flight, over the stand-in
 * libcuda.so.1 (tests/host/fake_libcuda.c).
 *
 * Every pause, free and rollback here runs while "engine kernels"
 * (fakecuda_launch) are still pending on an engine stream, as they are on
 * a GPU when the last request's kernels were launched but have not
 * finished. The stand-in answers an unmap under a pending kernel with a
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS and counts a device-to-host copy that
 * races a kernel's writes, so the data plane must order itself after the
 * engine's work. One test per defect of issue 15 (and the agent part of
 * issue 12). Built without cuda.h every test is skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "backend.h"
#include "internal.h"
#include "libgpusleep.h"
#include "fake_libcuda.h"
#include "gs_cuda.h"

/* CUresult, without cuda.h (built with or without it) */
typedef int CUresult_t;

#ifndef FAKECUDA_LIB
#define FAKECUDA_LIB "build/tests/host/fakecuda/libcuda.so.1"
#endif

#define MiB (1UL << 20)
#define W GPUSLEEP_TAG_WEIGHTS
#define KV GPUSLEEP_TAG_KV_CACHE
#define UNTIL_SYNC (-1LL)	/* a kernel that ends only when waited for */

static const char *fake_path(void)
{
	const char *p = getenv("FAKECUDA_LIB");

	return p && *p ? p : FAKECUDA_LIB;
}

static int all_u32(const void *p, size_t size, uint32_t v)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < size / 4; i++)
		if (w[i] != v)
			return 0;
	return 1;
}

/* ---- COMPLETE recorder (the agent's answers) ---- */

static struct gpusleep_complete rec[16];
static uint64_t rec_ns[16];	/* when each answer was sent (CLOCK_MONOTONIC) */
static int nrec;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int record_complete(int fd, const struct gpusleep_complete *c)
{
	(void)fd;
	if (nrec < 16) {
		rec_ns[nrec] = mono_ns();
		rec[nrec++] = *c;
	}
	return 0;
}

/* a step record as the kernel sends it; deadline_ns 0: none */
static int send_ev_by(int fd, uint64_t op, uint32_t type, uint32_t tags,
		      uint32_t step, uint64_t deadline_ns)
{
	struct gpusleep_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.size = sizeof(ev);
	ev.op_id = op;
	ev.type = type;
	ev.tags = tags;
	ev.step = step;
	ev.deadline_ns = deadline_ns;
	return write(fd, &ev, sizeof(ev)) == sizeof(ev) ? 0 : -errno;
}

static int send_ev(int fd, uint64_t op, uint32_t type, uint32_t tags,
		   uint32_t step)
{
	return send_ev_by(fd, op, type, tags, step, 0);
}

FIXTURE(dp) {
	struct gs_mm *mm;
	fakecuda_stats_fn stats;
	fakecuda_calls_fn calls;
	fakecuda_fail_fn fail;
	fakecuda_launch_fn launch;
	fakecuda_set_fn set;
	void *engine;		/* the engine's stream */
	struct gs_agent *a;
	int sv[2];
};

FIXTURE_SETUP(dp)
{
	struct gs_backend *b;
	fakecuda_engine_stream_fn es;
	void *lib;
	int err = 0;

	self->sv[0] = self->sv[1] = -1;
	ASSERT_EQ(0, setenv("FAKECUDA_POISON", "1", 1));
	b = gs_backend_cuda_new(0, fake_path(), &err);
	if (!b && err == -ENOSYS)
		return;		/* the test says why */
	ASSERT_NE(NULL, b) TH_LOG("cannot load %s: %d", fake_path(), err);
	lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NE(NULL, lib);
	self->stats = (fakecuda_stats_fn)dlsym(lib, "fakecuda_stats");
	self->calls = (fakecuda_calls_fn)dlsym(lib, "fakecuda_calls");
	self->fail = (fakecuda_fail_fn)dlsym(lib, "fakecuda_fail");
	self->launch = (fakecuda_launch_fn)dlsym(lib, "fakecuda_launch");
	self->set = (fakecuda_set_fn)dlsym(lib, "fakecuda_set");
	es = (fakecuda_engine_stream_fn)dlsym(lib, "fakecuda_engine_stream");
	ASSERT_NE(NULL, self->stats);
	ASSERT_NE(NULL, self->calls);
	ASSERT_NE(NULL, self->fail);
	ASSERT_NE(NULL, self->launch);
	ASSERT_NE(NULL, self->set);
	ASSERT_NE(NULL, es);
	self->engine = es();
	ASSERT_NE(NULL, self->engine);
	ASSERT_EQ(0, gs_mm_new(b, &self->mm));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 0));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, KV, GS_MM_DISCARD, 0));
	nrec = 0;
	gs_complete_hook = record_complete;
}

FIXTURE_TEARDOWN(dp)
{
	struct fakecuda_stats st;

	if (!self->mm)
		return;
	if (self->a)
		gs_agent_destroy(self->a);
	if (self->sv[1] >= 0)
		close(self->sv[1]);
	gs_mm_destroy(self->mm);
	self->stats(&st);
	EXPECT_EQ(0, st.sticky);
	EXPECT_EQ(0, st.illegal);
	EXPECT_EQ(0, st.races);
	EXPECT_EQ(0, st.misuse);
	EXPECT_EQ(0, st.reservations);
	EXPECT_EQ(0, st.handles);
	EXPECT_EQ(0, st.mappings);
	EXPECT_EQ(0, st.host_allocs);
	EXPECT_EQ(0, st.streams);
	EXPECT_EQ(0, st.pending);
}

#define NEED_MM() do { \
	if (!self->mm) \
		SKIP(return, "built with CUDA=0 (no CUDA backend)"); \
} while (0)

static long long counter(const char *name)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_counter_fn fn = lib ? (fakecuda_counter_fn)dlsym(lib,
					"fakecuda_counter") : NULL;

	return fn ? fn(name) : -2;
}

static struct fakecuda_stats stats(struct _test_data_dp *self)
{
	struct fakecuda_stats st;

	self->stats(&st);
	return st;
}

/*
 * The engine's kernel. DP_NO_ENGINE_WORK=1 launches nothing: to see each
 * defect on its own, without the unsynchronised unmap hiding the rest
 * (the checks of what the kernels wrote then fail by design).
 */
static int launch(struct _test_data_dp *self, void *va, size_t size,
		  long long value, long long delay_us)
{
	const char *off = getenv("DP_NO_ENGINE_WORK");

	if (off && *off == '1')
		return 0;
	return self->launch(self->engine, va, size, value, delay_us);
}

static void agent_up(struct __test_metadata *_metadata,
		     struct _test_data_dp *self)
{
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				self->sv));
	ASSERT_EQ(0, gs_agent_from_fd(self->sv[0], self->mm, &self->a));
}

/*
 * Defect 1: the backup must see what the engine's kernels wrote, and the
 * unmap must come after them. The kernels are still running when the
 * pause starts (the drain returned once requests were done on the CPU).
 */
TEST_F(dp, pause_waits_for_engine_kernels)
{
	struct fakecuda_stats st;
	void *w, *kv;
	uint64_t bytes;

	NEED_MM();
	w = gs_mm_alloc(self->mm, W, 6 * MiB);
	kv = gs_mm_alloc(self->mm, KV, 6 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, kv);
	/* the last layer update and a KV write, still in flight */
	ASSERT_EQ(0, launch(self, w, 6 * MiB, 0x1234, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, kv, 6 * MiB, 0x77, UNTIL_SYNC));
	EXPECT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
	st = stats(self);
	EXPECT_EQ(0, st.races);
	EXPECT_EQ(0, st.illegal);
	EXPECT_EQ(0, st.kernels);
	ASSERT_EQ(0, st.sticky);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	ASSERT_EQ(0, gs_mm_resume(self->mm, KV, &bytes));
	/* the backup holds the kernel's result, not what was there before */
	EXPECT_TRUE(all_u32(w, 6 * MiB, 0x1234));
	EXPECT_TRUE(all_u32(kv, 6 * MiB, 0));
}

/* Kernels that end by themselves a little later: the same, with time. */
TEST_F(dp, pause_waits_for_kernels_that_end_later)
{
	void *w;
	uint64_t bytes;

	NEED_MM();
	w = gs_mm_alloc(self->mm, W, 4 * MiB);
	ASSERT_NE(NULL, w);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(0, launch(self, w, 4 * MiB, 10 + i,
					  20000 * (i + 1)));
	EXPECT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	ASSERT_EQ(0, stats(self).sticky);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_TRUE(all_u32(w, 4 * MiB, 13));
}

/*
 * Defect 2: PyTorch frees when the last reference drops on the CPU, while
 * kernels may still use the memory: a free must not unmap it.
 */
TEST_F(dp, free_never_unmaps_under_engine_work)
{
	void *kv;

	NEED_MM();
	kv = gs_mm_alloc(self->mm, KV, 4 * MiB);	/* alone in its chunk */
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, kv, 4 * MiB, 5, UNTIL_SYNC));
	EXPECT_EQ(0, gs_mm_free(self->mm, kv));
	EXPECT_EQ(0, stats(self).illegal);
	ASSERT_EQ(0, stats(self).sticky);
}

/* Defect 2: allocation and free served by the cache: no driver calls. */
TEST_F(dp, hot_path_makes_no_driver_calls)
{
	static const char *const heavy[] = {
		"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
		"cuMemRelease", "cuMemsetD32Async", "cuStreamSynchronize",
		"cuCtxSynchronize", "cuMemAddressReserve", "cuMemAddressFree",
	};
	long before[sizeof(heavy) / sizeof(heavy[0])];
	void *p;

	NEED_MM();
	p = gs_mm_alloc(self->mm, KV, 3 * MiB);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, launch(self, p, 3 * MiB, 1, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_free(self->mm, p));
	for (size_t i = 0; i < sizeof(heavy) / sizeof(heavy[0]); i++)
		before[i] = self->calls(heavy[i]);
	for (int i = 0; i < 100; i++) {
		p = gs_mm_alloc(self->mm, KV, 3 * MiB);
		ASSERT_NE(NULL, p);
		ASSERT_EQ(0, gs_mm_free(self->mm, p));
	}
	for (size_t i = 0; i < sizeof(heavy) / sizeof(heavy[0]); i++) {
		const char *fn = heavy[i];
		long was = before[i];

		EXPECT_EQ(was, self->calls(fn)) {
			TH_LOG("%s called on the hot path", fn);
		}
	}
	ASSERT_EQ(0, stats(self).sticky);
}

/* Defect 4: a backup loop that fails leaves nothing queued behind it. */
TEST_F(dp, failed_backup_leaves_no_copy_queued)
{
	struct gs_mm_tag_info info;
	void *a, *b;
	uint64_t bytes;

	NEED_MM();
	a = gs_mm_alloc(self->mm, W, 10 * MiB);		/* chunk 1: 16 MiB */
	b = gs_mm_alloc(self->mm, W, 20 * MiB);		/* chunk 2: 32 MiB */
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 3, UNTIL_SYNC));
	ASSERT_EQ(0, self->fail("cuMemcpyDtoHAsync", 2, 1, 999));
	EXPECT_NE(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(0, stats(self).pending);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(0, info.paused);
	EXPECT_EQ(info.chunk_bytes, info.mapped_bytes);
	ASSERT_EQ(0, stats(self).sticky);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 3));
}

/*
 * Defect 4 and issue 12: a pause whose rollback cannot map a chunk back
 * leaves that chunk unmapped; the agent must not answer "failed, 0 bytes"
 * (the kernel would resume scheduling over unmapped memory) but say what
 * is still unmapped, and a resume must bring it back with its contents.
 */
TEST_F(dp, agent_reports_what_a_failed_rollback_left_unmapped)
{
	void *a, *b;

	NEED_MM();
	agent_up(_metadata, self);
	a = gs_mm_alloc(self->mm, W, 10 * MiB);
	b = gs_mm_alloc(self->mm, W, 20 * MiB);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 0xab, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 0xcd, UNTIL_SYNC));
	/* the second chunk will not unmap, the first will not map back */
	ASSERT_EQ(0, self->fail("cuMemUnmap", 2, 1, 999));
	ASSERT_EQ(0, self->fail("cuMemCreate", 1, 1, 2));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, W, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrec);
	EXPECT_NE(0, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);	/* still unmapped */
	ASSERT_EQ(0, stats(self).sticky);
	/* whatever died, a resume brings it back */
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_RESUME_TAG, W, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(0, rec[1].status);
	EXPECT_EQ(16 * MiB, rec[1].bytes);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0xab));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 0xcd));
}

/*
 * Issue 12: resuming a tag whose unmap never happened (the agent died
 * before it, or the kernel timed the step out) is success, with its bytes.
 */
TEST_F(dp, agent_resume_of_a_mapped_tag_is_success_with_bytes)
{
	void *w;

	NEED_MM();
	agent_up(_metadata, self);
	w = gs_mm_alloc(self->mm, W, 6 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_EQ(0, launch(self, w, 6 * MiB, 9, UNTIL_SYNC));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_RESUME_TAG, W, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrec);
	EXPECT_EQ(0, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);
	/* an empty tag too */
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_RESUME_TAG, KV, 2));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_EQ(0, rec[1].status);
	EXPECT_EQ(0, rec[1].bytes);
	ASSERT_EQ(0, stats(self).sticky);
}

/*
 * Defect 5: the staging buffer is pinned ahead of time (when the backed-up
 * tag grows) in bounded pieces, not in one cuMemHostAlloc of the whole tag
 * inside the pause step.
 */
TEST_F(dp, staging_is_pinned_ahead_in_pieces)
{
	void *a, *b;
	long pins;
	uint64_t bytes;

	NEED_MM();
	ASSERT_EQ(0, self->set("pin_us_per_gib", 100000));	/* 0.1 s/GiB */
	a = gs_mm_alloc(self->mm, W, 10 * MiB);
	b = gs_mm_alloc(self->mm, W, 20 * MiB);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 4, UNTIL_SYNC));
	pins = self->calls("cuMemHostAlloc");
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(pins, self->calls("cuMemHostAlloc"))
		TH_LOG("pinned memory allocated inside the pause");
	EXPECT_GT(48 * MiB, stats(self).max_pin);	/* not one piece of 48 */
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 4));
}

/*
 * Defect 6: when the pause returns, the memory is free as the driver sees
 * it (the stand-in frees released memory at the next synchronisation).
 */
TEST_F(dp, memory_is_free_when_pause_returns)
{
	struct fakecuda_stats st;
	void *kv;
	uint64_t bytes;

	NEED_MM();
	ASSERT_EQ(0, self->set("lazy_free", 1));
	kv = gs_mm_alloc(self->mm, KV, 40 * MiB);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, kv, 40 * MiB, 4, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
	st = stats(self);
	EXPECT_EQ(0, st.used_bytes);
	EXPECT_EQ(0, st.freeing_bytes);
	ASSERT_EQ(0, gs_mm_resume(self->mm, KV, &bytes));
}

/* Defect 4: the full result of a failed DISCARD pause says what was lost. */
TEST_F(dp, agent_result_says_what_a_rollback_lost)
{
	struct gs_agent_result r;
	struct gs_agent_stats as;
	void *a, *b;

	NEED_MM();
	agent_up(_metadata, self);
	a = gs_mm_alloc(self->mm, KV, 10 * MiB);	/* chunk 1: 16 MiB */
	b = gs_mm_alloc(self->mm, KV, 20 * MiB);	/* chunk 2: 32 MiB */
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 7, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 8, UNTIL_SYNC));
	ASSERT_EQ(0, self->fail("cuMemUnmap", 2, 1, 999));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_NE(0, rec[0].status);
	EXPECT_EQ(0, rec[0].bytes);	/* everything mapped again */
	ASSERT_EQ(0, gs_agent_last_result(self->a, KV, &r));
	EXPECT_EQ(1, r.op_id);
	EXPECT_EQ(rec[0].status, r.mm.status);
	EXPECT_EQ(0, r.mm.unmapped_bytes);
	/*
	 * chunk 1 came back fresh (zeros); chunk 2 never unmapped (the
	 * backend said its contents are intact): only chunk 1 is lost
	 */
	EXPECT_EQ(16 * MiB, r.mm.lost_bytes);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 8));
	gs_agent_get_stats(self->a, &as);
	EXPECT_EQ(16 * MiB, as.lost_bytes);
	EXPECT_EQ(-ENOENT, gs_agent_last_result(self->a, W, &r));
	ASSERT_EQ(0, stats(self).sticky);
}

/* Defect 6: the agent measures what came free and reports it. */
TEST_F(dp, agent_reports_verified_free)
{
	struct gs_agent_result r;
	struct gs_agent_stats as;
	void *w, *kv;

	NEED_MM();
	ASSERT_EQ(0, self->set("lazy_free", 1));
	agent_up(_metadata, self);
	w = gs_mm_alloc(self->mm, W, 20 * MiB);
	kv = gs_mm_alloc(self->mm, KV, 40 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, w, 20 * MiB, 1, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, kv, 40 * MiB, 2, UNTIL_SYNC));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, W, 1));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, KV, 2));
	ASSERT_EQ(2, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, gs_agent_last_result(self->a, KV, &r));
	EXPECT_EQ(0, r.mm.status);
	EXPECT_TRUE(r.mm.flags & GS_MM_RES_MEASURED);
	EXPECT_FALSE(r.mm.flags & GS_MM_RES_SHORTFALL);
	EXPECT_EQ(rec[1].bytes, r.mm.bytes);
	EXPECT_EQ(r.mm.bytes, r.mm.freed_bytes);
	EXPECT_EQ(r.mm.free_after - r.mm.free_before, r.mm.freed_bytes);
	gs_agent_get_stats(self->a, &as);
	EXPECT_EQ(rec[0].bytes + rec[1].bytes, as.released_bytes);
	EXPECT_EQ(as.released_bytes, as.freed_bytes);
	EXPECT_EQ(0, as.shortfalls);

	/* memory that does not come free is a shortfall, not silence */
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_RESUME_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, self->set("hold_free", 1));
	ASSERT_EQ(0, send_ev(self->sv[1], 3, GPUSLEEP_EV_PAUSE_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, gs_agent_last_result(self->a, KV, &r));
	EXPECT_EQ(0, r.mm.status);
	EXPECT_TRUE(r.mm.flags & GS_MM_RES_SHORTFALL);
	EXPECT_EQ(0, r.mm.freed_bytes);
	gs_agent_get_stats(self->a, &as);
	EXPECT_EQ(1, as.shortfalls);
	ASSERT_EQ(0, self->set("hold_free", 0));
	ASSERT_EQ(0, stats(self).sticky);
}

/* Defect 5: torch_memory_saver's choice: staging freed after resume. */
/*
 * Issue 34 defect 7: a policy change never gives staging back (the torch
 * adapter sets the policy at every region entry and exit, a capture's
 * among them, and cuMemFreeHost synchronises the device): a tag set to
 * DISCARD keeps its pinned staging until its next pause, a fenced point.
 */
TEST_F(dp, policy_change_keeps_staging_until_the_pause)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_capture_fn capture = (fakecuda_capture_fn)dlsym(lib,
							"fakecuda_capture");
	struct gs_mm_tag_info info;
	uint64_t bytes;
	void *w;

	NEED_MM();
	w = gs_mm_alloc(self->mm, W, 6 * MiB);
	ASSERT_NE(NULL, w);
	EXPECT_EQ(1, stats(self).host_allocs);		/* pinned ahead */
	ASSERT_EQ(0, capture(self->engine, 1));
	EXPECT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_DISCARD, 0));
	EXPECT_EQ(0, counter("capture_errors"));
	EXPECT_EQ(1, stats(self).host_allocs);		/* kept */
	ASSERT_EQ(0, capture(self->engine, 0));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(16 * MiB, info.staging_bytes);	/* its chunk's piece */
	/* the pause of a DISCARD tag gives it back (it fences anyway) */
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(0, stats(self).host_allocs);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

TEST_F(dp, staging_freed_after_resume_when_asked)
{
	struct gs_mm_tag_info info;
	void *w;
	uint64_t bytes, left = 1;

	NEED_MM();
	ASSERT_EQ(0, gs_mm_set_staging(self->mm, W,
				       GS_MM_STAGING_FREE_AFTER_RESUME));
	w = gs_mm_alloc(self->mm, W, 6 * MiB);
	ASSERT_NE(NULL, w);
	for (int round = 0; round < 3; round++) {
		ASSERT_EQ(0, launch(self, w, 6 * MiB, 100 + round, UNTIL_SYNC));
		ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
		EXPECT_EQ(1, stats(self).host_allocs);
		ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
		EXPECT_EQ(0, stats(self).host_allocs);
		ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
		EXPECT_EQ(0, info.staging_bytes);
		EXPECT_TRUE(all_u32(w, 6 * MiB, 100 + round));
	}
	/* pinning ahead, in bounded steps, is still possible */
	ASSERT_EQ(0, gs_mm_pin_staging(self->mm, W, 0, &left));
	EXPECT_EQ(0, left);
	EXPECT_EQ(1, stats(self).host_allocs);
	ASSERT_EQ(0, gs_mm_set_staging(self->mm, W, GS_MM_STAGING_LAZY));
	EXPECT_EQ(-EINVAL, gs_mm_set_staging(self->mm, W, 1U << 7));
	/*
	 * a tag that is no longer backed up keeps no pinned memory past its
	 * next pause (a policy change itself gives nothing back: issue 34)
	 */
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_DISCARD, 0));
	EXPECT_EQ(1, stats(self).host_allocs);
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(0, stats(self).host_allocs);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	ASSERT_EQ(0, gs_mm_set_staging(self->mm, W, 0));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 0));
	EXPECT_EQ(1, stats(self).host_allocs);	/* pinned ahead again */
}

/* Defect 5: gpuDirectRDMACapable where the device supports it with VMM. */
TEST_F(dp, allocations_are_rdma_capable)
{
	void *w;

	NEED_MM();
	w = gs_mm_alloc(self->mm, W, 1 * MiB);
	ASSERT_NE(NULL, w);
	EXPECT_EQ(stats(self).handles, stats(self).rdma_handles);
	EXPECT_LT(0, stats(self).rdma_handles);
}

/* Defect 2: empty chunks go back at a fenced point: gs_mm_trim. */
TEST_F(dp, trim_gives_back_empty_chunks_after_the_gpu)
{
	struct gs_mm_tag_info info;
	long syncs;
	void *kv, *keep;
	uint64_t bytes;

	NEED_MM();
	keep = gs_mm_alloc(self->mm, KV, 10 * MiB);	/* chunk 1 */
	kv = gs_mm_alloc(self->mm, KV, 20 * MiB);	/* chunk 2 */
	ASSERT_NE(NULL, keep);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, kv, 20 * MiB, 5, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
	syncs = self->calls("cuCtxSynchronize");
	ASSERT_EQ(0, gs_mm_trim(self->mm, 0, &bytes));
	EXPECT_EQ(32 * MiB, bytes);
	EXPECT_LT(syncs, self->calls("cuCtxSynchronize"));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, KV, &info));
	EXPECT_EQ(1, info.nr_chunks);
	EXPECT_EQ(0, stats(self).illegal);
	EXPECT_EQ(-EINVAL, gs_mm_trim(self->mm, 1U << 9, &bytes));
}

/* A failed resume unmaps what it mapped only once its copies are done. */
TEST_F(dp, failed_restore_leaves_nothing_queued)
{
	struct gs_mm_tag_info info;
	void *a, *b;
	uint64_t bytes;

	NEED_MM();
	a = gs_mm_alloc(self->mm, W, 10 * MiB);
	b = gs_mm_alloc(self->mm, W, 20 * MiB);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 0x31, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 0x32, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	ASSERT_EQ(0, self->fail("cuMemcpyHtoDAsync", 2, 1, 999));
	EXPECT_NE(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_EQ(0, stats(self).pending);
	EXPECT_EQ(0, stats(self).misuse);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(1, info.paused);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0x31));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 0x32));
}

/*
 * A new chunk is not cleared (nothing promised it, as for cudaMalloc): no
 * memset and no stream synchronisation, neither allowed while a CUDA graph
 * is captured (the caching allocator may call us then). A resumed DISCARD
 * tag is cleared; a resumed BACKUP tag is only restored.
 */
TEST_F(dp, new_chunks_and_restores_are_not_cleared)
{
	long memsets, syncs;
	void *w, *kv;
	uint64_t bytes;

	NEED_MM();
	memsets = self->calls("cuMemsetD32Async");
	syncs = self->calls("cuStreamSynchronize") + self->calls("cuCtxSynchronize");
	w = gs_mm_alloc(self->mm, W, 10 * MiB);
	kv = gs_mm_alloc(self->mm, KV, 10 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, kv);
	EXPECT_EQ(memsets, self->calls("cuMemsetD32Async"));
	EXPECT_EQ(syncs, self->calls("cuStreamSynchronize") +
			 self->calls("cuCtxSynchronize"));
	ASSERT_EQ(0, launch(self, w, 10 * MiB, 0x5eed, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, kv, 10 * MiB, 0x5eed, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	ASSERT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
	memsets = self->calls("cuMemsetD32Async");
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_EQ(memsets, self->calls("cuMemsetD32Async"));
	EXPECT_TRUE(all_u32(w, 10 * MiB, 0x5eed));
	ASSERT_EQ(0, gs_mm_resume(self->mm, KV, &bytes));
	EXPECT_LT(memsets, self->calls("cuMemsetD32Async"));
	EXPECT_TRUE(all_u32(kv, 10 * MiB, 0));
}

/*
 * The stand-in itself: a device-to-host copy ordered after the engine's
 * kernel with an event (cuStreamWaitEvent) is no race and sees the
 * kernel's result; one not ordered is a race; cuEventSynchronize and
 * cuCtxSynchronize finish the work; launching on unmapped memory is a
 * sticky fault that every later call answers.
 */
typedef CUresult_t (*ev_create_fn)(void **ev, unsigned int flags);
typedef CUresult_t (*ev_record_fn)(void *ev, void *stream);
typedef CUresult_t (*ev_sync_fn)(void *ev);
typedef CUresult_t (*ev_destroy_fn)(void *ev);
typedef CUresult_t (*wait_fn)(void *stream, void *ev, unsigned int flags);
typedef CUresult_t (*stream_create_fn)(void **s, unsigned int flags);
typedef CUresult_t (*stream_sync_fn)(void *s);
typedef CUresult_t (*stream_destroy_fn)(void *s);
typedef CUresult_t (*d2h_fn)(void *dst, uintptr_t src, size_t n, void *s);
typedef CUresult_t (*host_alloc_fn)(void **p, size_t n, unsigned int fl);
typedef CUresult_t (*free_host_fn)(void *p);
typedef CUresult_t (*ctx_sync_fn)(void);

TEST_F(dp, stand_in_orders_copies_by_events_and_faults_stick)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	ev_create_fn ev_create = (ev_create_fn)dlsym(lib, "cuEventCreate");
	ev_record_fn ev_record = (ev_record_fn)dlsym(lib, "cuEventRecord");
	ev_sync_fn ev_sync = (ev_sync_fn)dlsym(lib, "cuEventSynchronize");
	ev_destroy_fn ev_destroy = (ev_destroy_fn)dlsym(lib, "cuEventDestroy_v2");
	wait_fn wait = (wait_fn)dlsym(lib, "cuStreamWaitEvent");
	stream_create_fn s_create = (stream_create_fn)dlsym(lib, "cuStreamCreate");
	stream_sync_fn s_sync = (stream_sync_fn)dlsym(lib, "cuStreamSynchronize");
	stream_destroy_fn s_destroy = (stream_destroy_fn)dlsym(lib, "cuStreamDestroy_v2");
	d2h_fn d2h = (d2h_fn)dlsym(lib, "cuMemcpyDtoHAsync_v2");
	host_alloc_fn host_alloc = (host_alloc_fn)dlsym(lib, "cuMemHostAlloc");
	free_host_fn free_host = (free_host_fn)dlsym(lib, "cuMemFreeHost");
	ctx_sync_fn ctx_sync = (ctx_sync_fn)dlsym(lib, "cuCtxSynchronize");
	void *w, *host, *ev, *copy;
	struct fakecuda_stats st;
	uint64_t bytes;

	NEED_MM();
	ASSERT_NE(NULL, ev_create);
	ASSERT_NE(NULL, wait);
	ASSERT_NE(NULL, ctx_sync);
	w = gs_mm_alloc(self->mm, KV, 2 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_EQ(0, host_alloc(&host, 2 * MiB, 0));
	ASSERT_EQ(0, s_create(&copy, 1));
	ASSERT_EQ(0, ev_create(&ev, 0));

	/* ordered by an event: no race, and the copy sees the kernel's data */
	ASSERT_EQ(0, self->launch(self->engine, w, 2 * MiB, 0x42, UNTIL_SYNC));
	ASSERT_EQ(0, ev_record(ev, self->engine));
	ASSERT_EQ(0, wait(copy, ev, 0));
	ASSERT_EQ(0, d2h(host, (uintptr_t)w, 2 * MiB, copy));
	ASSERT_EQ(0, s_sync(copy));
	EXPECT_EQ(0, stats(self).races);
	EXPECT_EQ(0, stats(self).kernels);	/* ran first */
	EXPECT_TRUE(all_u32(host, 2 * MiB, 0x42));

	/* not ordered: a race */
	ASSERT_EQ(0, self->launch(self->engine, w, 2 * MiB, 0x43, UNTIL_SYNC));
	EXPECT_EQ(0, d2h(host, (uintptr_t)w, 2 * MiB, copy));
	EXPECT_EQ(1, stats(self).races);
	ASSERT_EQ(0, s_sync(copy));
	/* cuEventSynchronize on the engine's stream finishes its kernel */
	ASSERT_EQ(0, ev_record(ev, self->engine));
	ASSERT_EQ(0, ev_sync(ev));
	EXPECT_EQ(0, stats(self).kernels);
	EXPECT_TRUE(all_u32(w, 2 * MiB, 0x43));
	ASSERT_EQ(0, ev_destroy(ev));
	ASSERT_EQ(0, s_destroy(copy));
	ASSERT_EQ(0, free_host(host));

	/* a kernel launched on unmapped memory: sticky ILLEGAL_ADDRESS */
	ASSERT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
	EXPECT_EQ(-1, self->launch(self->engine, w, 2 * MiB, 1, UNTIL_SYNC));
	st = stats(self);
	EXPECT_EQ(700, st.sticky);	/* CUDA_ERROR_ILLEGAL_ADDRESS */
	EXPECT_EQ(700, ctx_sync());
	EXPECT_EQ(-ENOTRECOVERABLE, gs_mm_resume(self->mm, KV, &bytes));
	/* the teardown would count the fault: this test wanted it */
	gs_mm_destroy(self->mm);
	self->mm = NULL;
	_exit(_metadata->passed ? 0 : 1);
}

/*
 * The agent on its own thread, as in an engine: the engine's last kernels
 * end by themselves a little after the pause arrives; the answer comes
 * after them, with the kernels' data in the backup.
 */
TEST_F(dp, agent_thread_pauses_after_kernels_that_end_later)
{
	struct gs_agent_result r;
	void *w;

	NEED_MM();
	agent_up(_metadata, self);
	w = gs_mm_alloc(self->mm, W, 8 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_EQ(0, gs_agent_start(self->a));
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, launch(self, w, 8 * MiB, 0x100 + i,
				    10000 * (i + 1)));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, W, 1));
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_RESUME_TAG, W, 1));
	memset(&r, 0, sizeof(r));
	for (int i = 0; i < 2000; i++) {
		if (!gs_agent_last_result(self->a, W, &r) && r.op_id == 2)
			break;
		usleep(5000);
	}
	ASSERT_EQ(0, gs_agent_stop(self->a));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(0, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);
	EXPECT_EQ(0, rec[1].status);
	EXPECT_TRUE(all_u32(w, 8 * MiB, 0x107));
	ASSERT_EQ(0, stats(self).sticky);
}

/* Out of device memory: NULL and ENOMEM, nothing half made. */
TEST_F(dp, out_of_device_memory_is_enomem)
{
	struct fakecuda_stats before, after;
	void *p;

	NEED_MM();
	ASSERT_EQ(0, self->set("capacity", 64 * MiB));
	p = gs_mm_alloc(self->mm, KV, 40 * MiB);
	ASSERT_NE(NULL, p);
	before = stats(self);
	errno = 0;
	EXPECT_EQ(NULL, gs_mm_alloc(self->mm, KV, 40 * MiB));
	EXPECT_EQ(ENOMEM, errno);
	after = stats(self);
	EXPECT_EQ(before.reservations, after.reservations);
	EXPECT_EQ(before.handles, after.handles);
	EXPECT_EQ(0, gs_mm_free(self->mm, p));
}

/*
 * Declared streams: the pause waits for the engine's declared stream (an
 * event recorded and waited for), not for the whole context: work of an
 * undeclared stream on other memory stays queued.
 */
TEST_F(dp, pause_waits_for_declared_streams_only)
{
	fakecuda_engine_stream_fn es;
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	void *other, *w, *outside;
	long ctx_syncs;
	uint64_t bytes;

	NEED_MM();
	es = (fakecuda_engine_stream_fn)dlsym(lib, "fakecuda_engine_stream");
	other = es();
	ASSERT_NE(NULL, other);
	ASSERT_EQ(0, gs_mm_set_fence_streams(self->mm, &self->engine, 1));
	w = gs_mm_alloc(self->mm, W, 4 * MiB);
	outside = gs_mm_alloc(self->mm, KV, 4 * MiB);	/* not paused here */
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, outside);
	ASSERT_EQ(0, launch(self, w, 4 * MiB, 0x77, UNTIL_SYNC));
	ASSERT_EQ(0, self->launch(other, outside, 4 * MiB, 1, UNTIL_SYNC));
	ctx_syncs = self->calls("cuCtxSynchronize");
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(ctx_syncs, self->calls("cuCtxSynchronize"));
	EXPECT_EQ(1, stats(self).kernels);	/* the other stream's */
	EXPECT_EQ(0, stats(self).races);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_TRUE(all_u32(w, 4 * MiB, 0x77));
	/* back to the whole context */
	ASSERT_EQ(0, gs_mm_set_fence_streams(self->mm, NULL, 0));
	EXPECT_EQ(-EINVAL, gs_mm_set_fence_streams(self->mm, NULL, 2));
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(0, stats(self).kernels);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
}

/*
 * A DISCARD pause whose rollback cannot map a chunk back: that chunk stays
 * unmapped (answered with its bytes) and its contents count as lost.
 */
TEST_F(dp, discard_rollback_left_unmapped_is_lost_and_reported)
{
	struct gs_agent_result r;
	void *a, *b;

	NEED_MM();
	agent_up(_metadata, self);
	a = gs_mm_alloc(self->mm, KV, 10 * MiB);	/* chunk 1: 16 MiB */
	b = gs_mm_alloc(self->mm, KV, 20 * MiB);	/* chunk 2: 32 MiB */
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 9, UNTIL_SYNC));
	ASSERT_EQ(0, self->fail("cuMemUnmap", 2, 1, 999));
	ASSERT_EQ(0, self->fail("cuMemCreate", 1, 1, 2));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_NE(0, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);
	ASSERT_EQ(0, gs_agent_last_result(self->a, KV, &r));
	EXPECT_TRUE(r.mm.flags & GS_MM_RES_PARTIAL);
	EXPECT_EQ(16 * MiB, r.mm.unmapped_bytes);
	EXPECT_EQ(16 * MiB, r.mm.lost_bytes);	/* chunk 2 kept its data */
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_RESUME_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_EQ(0, rec[1].status);
	EXPECT_EQ(16 * MiB, rec[1].bytes);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 9));	/* never unmapped */
	ASSERT_EQ(0, stats(self).sticky);
}

/* ---- issue 21 ---- */

/*
 * Item 1: on a GPU an unmap under a running kernel is not refused; the
 * kernel faults and the sticky error shows at the next synchronisation,
 * the post-unmap fence. The pause must fail with it (ENOTRECOVERABLE, the
 * fault flag, the bytes unmapped), and the agent answer so.
 */
TEST_F(dp, fault_at_the_post_unmap_fence_fails_the_pause)
{
	fakecuda_engine_stream_fn es;
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	struct gs_agent_result r;
	void *other, *w;

	NEED_MM();
	ASSERT_EQ(0, self->set("async_faults", 1));
	es = (fakecuda_engine_stream_fn)dlsym(lib, "fakecuda_engine_stream");
	other = es();
	ASSERT_NE(NULL, other);
	agent_up(_metadata, self);
	/* the engine declared one stream but uses another on the tag */
	ASSERT_EQ(0, gs_mm_set_fence_streams(self->mm, &self->engine, 1));
	w = gs_mm_alloc(self->mm, KV, 4 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_EQ(0, self->launch(other, w, 4 * MiB, 0x55, UNTIL_SYNC));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, KV, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrec);
	EXPECT_EQ(-ENOTRECOVERABLE, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);	/* unmapped: stays released */
	ASSERT_EQ(0, gs_agent_last_result(self->a, KV, &r));
	EXPECT_TRUE(r.mm.flags & GS_MM_RES_FAULT);
	EXPECT_EQ(16 * MiB, r.mm.unmapped_bytes);
	EXPECT_EQ(700, stats(self).sticky);
	/* the context is lost: the teardown would count the fault */
	gs_agent_destroy(self->a);
	gs_mm_destroy(self->mm);
	self->mm = NULL;
	_exit(_metadata->passed ? 0 : 1);
}

struct pause_arg {
	struct gs_mm *mm;
	struct gs_mm_result r;
	volatile int done;
};

static void *pause_thread(void *p)
{
	struct pause_arg *pa = p;

	gs_mm_pause_ex(pa->mm, W, &pa->r);
	__atomic_store_n(&pa->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* *w: 4 MiB of weights under a kernel that ends only at fakecuda_unhang() */
static void hang_weights(struct __test_metadata *_metadata,
			 struct _test_data_dp *self, void **w)
{
	*w = gs_mm_alloc(self->mm, W, 4 * MiB);
	ASSERT_NE(NULL, *w);
	ASSERT_EQ(0, self->launch(self->engine, *w, 4 * MiB, 0x5,
				  FAKECUDA_HANG));
}

/*
 * fn(arg) on a thread; once it waits for the GPU, an allocation (*kv)
 * must not wait for it (*done still 0); then the thread is joined.
 */
static void alloc_while_fencing(struct __test_metadata *_metadata,
				struct _test_data_dp *self,
				void *(*fn)(void *), void *arg,
				volatile int *done, void **kv)
{
	long syncs = self->calls("cuCtxSynchronize");
	pthread_t th;

	ASSERT_EQ(0, pthread_create(&th, NULL, fn, arg));
	while (self->calls("cuCtxSynchronize") == syncs)
		usleep(1000);
	*kv = gs_mm_alloc(self->mm, KV, 1 * MiB);
	EXPECT_NE(NULL, *kv);
	EXPECT_EQ(0, __atomic_load_n(done, __ATOMIC_SEQ_CST))
		TH_LOG("the allocation waited for the fence");
	pthread_join(th, NULL);
}

/*
 * Item 2: a kernel that never ends (a collective waiting for a rank that
 * is itself pausing). The fence is bounded: -ETIMEDOUT, nothing unmapped,
 * and allocations go on while the pause waits.
 */
TEST_F(dp, fence_is_bounded_and_holds_no_allocator_lock)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_unhang_fn unhang = (fakecuda_unhang_fn)dlsym(lib,
							"fakecuda_unhang");
	struct pause_arg pa = { 0 };
	struct gs_mm_tag_info info;
	void *w, *kv = NULL;
	uint64_t bytes;

	NEED_MM();
	ASSERT_NE(NULL, unhang);
	ASSERT_EQ(0, gs_mm_set_fence_timeout(self->mm, 3000));
	hang_weights(_metadata, self, &w);
	pa.mm = self->mm;
	/* the pause is waiting for the GPU: the allocator is not */
	alloc_while_fencing(_metadata, self, pause_thread, &pa, &pa.done, &kv);
	EXPECT_EQ(-ETIMEDOUT, pa.r.status);
	EXPECT_EQ(0, pa.r.unmapped_bytes);
	EXPECT_EQ(0, pa.r.bytes);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(0, info.paused);
	EXPECT_EQ(info.chunk_bytes, info.mapped_bytes);
	/* the kernel ends: the next pause goes through, its data backed up */
	unhang();
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_TRUE(all_u32(w, 4 * MiB, 0x5));
	EXPECT_EQ(0, gs_mm_free(self->mm, kv));
}

struct dispatch_arg {
	struct gs_agent *a;
	int ret;
	volatile int done;
};

static void *dispatch_thread(void *p)
{
	struct dispatch_arg *da = p;

	da->ret = gs_agent_dispatch(da->a);
	__atomic_store_n(&da->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * Item 2, the step's deadline: the kernel's PAUSE_TAG record says when
 * the step times out. With a kernel that never ends, the agent's fence
 * gives up before that deadline (well before the fence timeout set, 8 s
 * here), answers -ETIMEDOUT with nothing unmapped, and allocations go on
 * while it waits.
 */
TEST_F(dp, agent_fence_ends_before_the_step_deadline)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_unhang_fn unhang = (fakecuda_unhang_fn)dlsym(lib,
							"fakecuda_unhang");
	struct dispatch_arg da = { 0 };
	struct gs_mm_tag_info info;
	uint64_t deadline;
	void *w, *kv = NULL;

	NEED_MM();
	ASSERT_NE(NULL, unhang);
	ASSERT_EQ(0, gs_mm_set_fence_timeout(self->mm, 8000));
	agent_up(_metadata, self);
	hang_weights(_metadata, self, &w);
	deadline = mono_ns() + 3000000000ULL;
	ASSERT_EQ(0, send_ev_by(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, W, 1,
				deadline));
	da.a = self->a;
	/* the agent waits for the GPU: the allocator does not */
	alloc_while_fencing(_metadata, self, dispatch_thread, &da, &da.done,
			    &kv);
	EXPECT_EQ(1, da.ret);
	ASSERT_EQ(1, nrec);
	EXPECT_EQ(-ETIMEDOUT, rec[0].status);
	EXPECT_EQ(0, rec[0].bytes);
	/* answered before the kernel would have timed the step out */
	EXPECT_GT(deadline, rec_ns[0])
		TH_LOG("answered %lld ms after the step deadline",
		       (long long)(rec_ns[0] - deadline) / 1000000);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(0, info.paused);
	EXPECT_EQ(info.chunk_bytes, info.mapped_bytes);
	unhang();
	EXPECT_EQ(0, gs_mm_free(self->mm, kv));
	EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

/*
 * Item 3: a rollback whose restore fails after the map-back leaves that
 * chunk mapped over garbage: it counts as not back (PARTIAL, its bytes,
 * lost), and a resume restores it.
 */
TEST_F(dp, rollback_whose_restore_fails_is_partial_and_lost)
{
	struct gs_agent_result r;
	void *a, *b;

	NEED_MM();
	agent_up(_metadata, self);
	a = gs_mm_alloc(self->mm, W, 10 * MiB);	/* chunk 1: 16 MiB */
	b = gs_mm_alloc(self->mm, W, 20 * MiB);	/* chunk 2: 32 MiB */
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 0x11, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, b, 20 * MiB, 0x12, UNTIL_SYNC));
	/* chunk 2 will not unmap; chunk 1 maps back but is not restored */
	ASSERT_EQ(0, self->fail("cuMemUnmap", 2, 1, 999));
	ASSERT_EQ(0, self->fail("cuMemcpyHtoDAsync", 1, 1, 999));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG, W, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_NE(0, rec[0].status);
	EXPECT_EQ(16 * MiB, rec[0].bytes);	/* not back: stays released */
	EXPECT_EQ(16 * MiB, rec[0].lost_bytes);	/* reload forced */
	ASSERT_EQ(0, gs_agent_last_result(self->a, W, &r));
	EXPECT_TRUE(r.mm.flags & GS_MM_RES_PARTIAL);
	EXPECT_EQ(16 * MiB, r.mm.lost_bytes);
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_RESUME_TAG, W, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_EQ(0, rec[1].status);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0x11));
	EXPECT_TRUE(all_u32(b, 20 * MiB, 0x12));
	ASSERT_EQ(0, stats(self).sticky);
}

/*
 * Item 4: the unmap went through, the release failed and mapping back
 * failed too: the chunk is unmapped with its handle kept. The pause says
 * so, and a resume releases the old handle and brings the chunk back.
 */
TEST_F(dp, unmapped_chunk_whose_release_failed_resumes)
{
	struct gs_mm_result r;
	struct gs_mm_tag_info info;
	void *a;

	NEED_MM();
	a = gs_mm_alloc(self->mm, W, 10 * MiB);
	ASSERT_NE(NULL, a);
	ASSERT_EQ(0, launch(self, a, 10 * MiB, 0x21, UNTIL_SYNC));
	ASSERT_EQ(0, self->fail("cuMemRelease", 1, 1, 999));
	ASSERT_EQ(0, self->fail("cuMemMap", 1, 2, 2));
	EXPECT_NE(0, gs_mm_pause_ex(self->mm, W, &r));
	EXPECT_TRUE(r.flags & GS_MM_RES_PARTIAL);
	EXPECT_EQ(16 * MiB, r.unmapped_bytes);
	EXPECT_EQ(0, stats(self).misuse);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(1, info.paused);
	EXPECT_EQ(0, info.mapped_bytes);
	EXPECT_EQ(0, gs_mm_resume_ex(self->mm, W, &r));
	EXPECT_EQ(16 * MiB, r.bytes);
	EXPECT_TRUE(all_u32(a, 10 * MiB, 0x21));
	EXPECT_EQ(1, stats(self).handles);	/* the old one released */
	EXPECT_EQ(0, stats(self).misuse);
}

/*
 * Item 6: a freed KV allocation's empty chunk is given back when another
 * tag needs the memory (after the GPU's work on it is done).
 */
TEST_F(dp, out_of_memory_reclaims_empty_chunks)
{
	void *kv, *w;

	NEED_MM();
	ASSERT_EQ(0, self->set("capacity", 64 * MiB));
	kv = gs_mm_alloc(self->mm, KV, 40 * MiB);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, kv, 40 * MiB, 3, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
	w = gs_mm_alloc(self->mm, W, 40 * MiB);
	EXPECT_NE(NULL, w);
	EXPECT_EQ(0, stats(self).illegal);
	EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

/* ... but not while the allocating stream is captured into a graph. */
TEST_F(dp, out_of_memory_in_a_capture_does_not_synchronise)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_capture_fn capture = (fakecuda_capture_fn)dlsym(lib,
							"fakecuda_capture");
	void *kv, *w;

	NEED_MM();
	ASSERT_NE(NULL, capture);
	ASSERT_EQ(0, self->set("capacity", 64 * MiB));
	kv = gs_mm_alloc(self->mm, KV, 40 * MiB);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
	ASSERT_EQ(0, capture(self->engine, 1));
	errno = 0;
	EXPECT_EQ(NULL, gs_mm_alloc_on(self->mm, W, 40 * MiB, self->engine));
	EXPECT_EQ(ENOMEM, errno);
	/* the legacy stream while another is captured: no reclaim either */
	EXPECT_EQ(NULL, gs_mm_alloc_on(self->mm, W, 40 * MiB, NULL));
	EXPECT_EQ(0, counter("capture_errors"));
	ASSERT_EQ(0, capture(self->engine, 0));
	w = gs_mm_alloc_on(self->mm, W, 40 * MiB, self->engine);
	EXPECT_NE(NULL, w);
	EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

/*
 * Issue 34 defect 6: a capture on a non-blocking stream (PyTorch captures
 * on one: all of its streams are non-blocking) is not seen from the
 * legacy stream. An allocation on another stream that runs out of memory
 * must still not synchronise the context (cuCtxSynchronize would break
 * that capture): it waits only for the streams that used the memory it
 * gives back, here the legacy stream (whose kernel, on a blocking stream,
 * it orders after).
 */
TEST_F(dp, out_of_memory_while_another_stream_captures)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_capture_fn capture = (fakecuda_capture_fn)dlsym(lib,
							"fakecuda_capture");
	fakecuda_engine_stream_flags_fn esf = (fakecuda_engine_stream_flags_fn)
		dlsym(lib, "fakecuda_engine_stream_flags");
	void *torch_capture, *kv, *w;

	NEED_MM();
	ASSERT_NE(NULL, capture);
	ASSERT_NE(NULL, esf);
	torch_capture = esf(1 /* CU_STREAM_NON_BLOCKING */);
	ASSERT_NE(NULL, torch_capture);
	ASSERT_EQ(0, self->set("capacity", 64 * MiB));
	kv = gs_mm_alloc(self->mm, KV, 40 * MiB);	/* legacy stream */
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, launch(self, kv, 40 * MiB, 3, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
	ASSERT_EQ(0, capture(torch_capture, 1));
	w = gs_mm_alloc(self->mm, W, 40 * MiB);
	EXPECT_NE(NULL, w);
	EXPECT_EQ(0, counter("capture_errors"));
	EXPECT_EQ(0, stats(self).illegal);	/* the kernel was waited for */
	ASSERT_EQ(0, capture(torch_capture, 0));
	if (w)
		EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

/*
 * ... and memory last used on the captured stream itself is not given
 * back (that would wait for it): the allocation fails instead.
 */
TEST_F(dp, out_of_memory_never_waits_for_a_captured_stream)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	fakecuda_capture_fn capture = (fakecuda_capture_fn)dlsym(lib,
							"fakecuda_capture");
	fakecuda_engine_stream_flags_fn esf = (fakecuda_engine_stream_flags_fn)
		dlsym(lib, "fakecuda_engine_stream_flags");
	void *torch_capture, *other, *kv, *w;

	NEED_MM();
	ASSERT_NE(NULL, esf);
	torch_capture = esf(1);
	other = esf(1);
	ASSERT_NE(NULL, other);
	ASSERT_EQ(0, self->set("capacity", 64 * MiB));
	kv = gs_mm_alloc_on(self->mm, KV, 40 * MiB, torch_capture);
	ASSERT_NE(NULL, kv);
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
	ASSERT_EQ(0, capture(torch_capture, 1));
	errno = 0;
	EXPECT_EQ(NULL, gs_mm_alloc_on(self->mm, W, 40 * MiB, other));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(0, counter("capture_errors"));
	ASSERT_EQ(0, capture(torch_capture, 0));
	/* the capture over, the same allocation reclaims the chunk */
	w = gs_mm_alloc_on(self->mm, W, 40 * MiB, other);
	EXPECT_NE(NULL, w);
	if (w)
		EXPECT_EQ(0, gs_mm_free(self->mm, w));
}

/*
 * Item 7: the torch adapter sets the policy at each region entry and
 * exit; chunk growth must not restart at 16 MiB each time.
 */
TEST_F(dp, chunk_growth_survives_policy_changes)
{
	struct gs_mm_tag_info info;
	void *p[8];

	NEED_MM();
	for (int i = 0; i < 8; i++) {
		ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 0));
		p[i] = gs_mm_alloc(self->mm, W, 12 * MiB);
		ASSERT_NE(NULL, p[i]);
	}
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	/* 16, 32, 64 MiB chunks hold 1 + 2 + 5 of them */
	EXPECT_EQ(3, info.nr_chunks);
	for (int i = 0; i < 8; i++)
		EXPECT_EQ(0, gs_mm_free(self->mm, p[i]));
}

/*
 * Item 8: a pause backs up only what is live (not the chunk's slack nor
 * its free blocks), pins only the pieces that hold it, and the pinned
 * staging has a cap the trainer can read.
 */
TEST_F(dp, backup_copies_and_pins_only_live_allocations)
{
	struct gs_mm_tag_info info;
	long long d2h0, h2d0;
	uint64_t bytes, pinned, limit;
	void *a, *b, *cache;

	NEED_MM();
	/* one 512 MiB chunk: two pieces of 256 MiB */
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 512 * MiB));
	a = gs_mm_alloc(self->mm, W, 4 * MiB);
	cache = gs_mm_alloc(self->mm, W, 8 * MiB);
	b = gs_mm_alloc(self->mm, W, 2 * MiB);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(NULL, cache);
	ASSERT_EQ(0, gs_mm_free(self->mm, cache));	/* a cached free block */
	ASSERT_EQ(0, launch(self, a, 4 * MiB, 0x81, UNTIL_SYNC));
	ASSERT_EQ(0, launch(self, b, 2 * MiB, 0x82, UNTIL_SYNC));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(256 * MiB, info.staging_bytes);	/* the live piece */
	gs_mm_pinned(self->mm, &pinned, &limit);
	EXPECT_EQ(256 * MiB, pinned);
	EXPECT_EQ(0, limit);
	d2h0 = counter("d2h_bytes");
	h2d0 = counter("h2d_bytes");
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	EXPECT_EQ(512 * MiB, bytes);
	EXPECT_EQ(6 * MiB, counter("d2h_bytes") - d2h0);
	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	EXPECT_EQ(6 * MiB, counter("h2d_bytes") - h2d0);
	EXPECT_TRUE(all_u32(a, 4 * MiB, 0x81));
	EXPECT_TRUE(all_u32(b, 2 * MiB, 0x82));
	/* a cap below what a pause needs: -ENOMEM, nothing unmapped */
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, KV, GS_MM_BACKUP, 0));
	ASSERT_EQ(0, gs_mm_set_staging(self->mm, KV, GS_MM_STAGING_LAZY));
	ASSERT_NE(NULL, gs_mm_alloc(self->mm, KV, 1 * MiB));
	ASSERT_EQ(0, gs_mm_set_pin_limit(self->mm, 256 * MiB));
	EXPECT_EQ(-ENOMEM, gs_mm_pause(self->mm, KV, &bytes));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, KV, &info));
	EXPECT_EQ(0, info.paused);
	EXPECT_EQ(info.chunk_bytes, info.mapped_bytes);
	gs_mm_pinned(self->mm, &pinned, &limit);
	EXPECT_EQ(256 * MiB, pinned);
	EXPECT_EQ(256 * MiB, limit);
}

/* ---- the cost of the VMM calls, each device's granularity ---- */

static const char *const vmm_fns[] = {
	"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
	"cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
};
#define NVMM (sizeof(vmm_fns) / sizeof(vmm_fns[0]))
static const char *const vmm_bytes[] = {
	"create_bytes", "map_bytes", "access_bytes", "unmap_bytes",
	"release_bytes",
};
#define NVMMB (sizeof(vmm_bytes) / sizeof(vmm_bytes[0]))

struct vmm_count {
	long calls[NVMM];
	long long bytes[NVMMB];
	long long us;
};

static struct vmm_count vmm_now(struct _test_data_dp *self)
{
	struct vmm_count v;

	for (size_t i = 0; i < NVMM; i++)
		v.calls[i] = self->calls(vmm_fns[i]);
	for (size_t i = 0; i < NVMMB; i++)
		v.bytes[i] = counter(vmm_bytes[i]);
	v.us = counter("vmm_us");
	return v;
}

/* what happened since v, against the calls (in vmm_fns order) expected */
static void vmm_expect(struct __test_metadata *_metadata,
		       struct _test_data_dp *self, const struct vmm_count *v,
		       const long want[NVMM], const long long want_b[NVMMB],
		       const char *what)
{
	struct vmm_count n = vmm_now(self);

	for (size_t k = 0; k < NVMM; k++) {
		const char *fn = vmm_fns[k];

		EXPECT_EQ(want[k], n.calls[k] - v->calls[k])
			TH_LOG("%s: calls of %s", what, fn);
	}
	for (size_t k = 0; k < NVMMB; k++) {
		const char *name = vmm_bytes[k];

		EXPECT_EQ(want_b[k], n.bytes[k] - v->bytes[k])
			TH_LOG("%s: %s", what, name);
	}
}

/*
 * Item 1, the cost of create/map/unmap: a release and a resume of a tag
 * make one call of each kind per chunk holding allocations, over the
 * whole chunk (no call per page or per allocation), and none for the
 * reserved ranges, which stay; an empty chunk is given back at the pause
 * (its range too) and not made again by the resume. Two cycles, the same
 * calls each time; the stand-in's modelled time is the calls' sum.
 */
TEST_F(dp, release_resume_make_one_vmm_call_per_chunk)
{
	/*
	 * create, map, access, unmap, release, reserve, address free; the
	 * first cycle gives the empty chunk (and its range) back
	 */
	static const long pause_calls[2][NVMM] = {
		{ 0, 0, 0, 3, 3, 0, 1 }, { 0, 0, 0, 2, 2, 0, 0 },
	};
	static const long resume_calls[NVMM] = { 2, 2, 2, 0, 0, 0, 0 };
	static const long long pause_b[2][NVMMB] = {
		{ 0, 0, 0, 112 * MiB, 112 * MiB }, { 0, 0, 0, 48 * MiB, 48 * MiB },
	};
	static const long long resume_b[NVMMB] = { 48 * MiB, 48 * MiB,
						   48 * MiB, 0, 0 };
	struct gs_mm_tag_info info;
	struct vmm_count v;
	void *p[3];
	uint64_t bytes;

	NEED_MM();
	ASSERT_EQ(0, self->set("vmm_call_us", 1000));
	/* chunks of 16, 32 and 64 MiB; the last one freed: empty */
	p[0] = gs_mm_alloc(self->mm, W, 10 * MiB);
	p[1] = gs_mm_alloc(self->mm, W, 20 * MiB);
	p[2] = gs_mm_alloc(self->mm, W, 40 * MiB);
	for (int i = 0; i < 3; i++)
		ASSERT_NE(NULL, p[i]);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	ASSERT_EQ(3, info.nr_chunks);
	ASSERT_EQ(112 * MiB, info.chunk_bytes);
	ASSERT_EQ(0, gs_mm_free(self->mm, p[2]));
	for (int round = 0; round < 2; round++) {
		v = vmm_now(self);
		ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
		vmm_expect(_metadata, self, &v, pause_calls[round],
			   pause_b[round], "pause");
		/* the modelled time: 1 ms per unmap and per release */
		EXPECT_EQ((pause_calls[round][3] + pause_calls[round][4]) * 1000,
			  counter("vmm_us") - v.us);
		v = vmm_now(self);
		ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
		EXPECT_EQ(48 * MiB, bytes);
		vmm_expect(_metadata, self, &v, resume_calls, resume_b,
			   "resume");
		EXPECT_EQ(6 * 1000, counter("vmm_us") - v.us);
	}
	EXPECT_EQ(0, gs_mm_free(self->mm, p[0]));
	EXPECT_EQ(0, gs_mm_free(self->mm, p[1]));
}

/*
 * Item 1, each device's own granularity: device 1's minimum (4 MiB)
 * rounds what its backend reserves and maps, and each device's
 * recommended granularity (device 0: 32 MiB, device 1: 64 MiB, both
 * above the 16 MiB first chunk) sizes the chunks and aligns their
 * ranges. The stand-in refuses sizes and addresses that are not
 * multiples of the handle's device's minimum, and aligns a reservation
 * to no more than it was asked.
 */
TEST(granularity_is_each_devices_own)
{
	void *lib;
	fakecuda_stats_fn stats_fn;
	struct fakecuda_stats st;
	struct gs_backend *b0, *b1;
	struct gs_mm *m0 = NULL, *m1 = NULL;
	struct gs_mm_tag_info info;
	void *va = NULL, *h = NULL, *p0, *p1;
	uint64_t bytes;
	int err = 0;

	ASSERT_EQ(0, setenv("FAKECUDA_DEVICES", "2", 1));
	ASSERT_EQ(0, setenv("FAKECUDA_GRAN", "2M:32M,4M:64M", 1));
	b1 = gs_backend_cuda_new(1, fake_path(), &err);
	if (!b1 && err == -ENOSYS)
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, b1) TH_LOG("cannot load %s: %d", fake_path(), err);
	b0 = gs_backend_cuda_new(0, fake_path(), &err);
	ASSERT_NE(NULL, b0);
	lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NE(NULL, lib);
	stats_fn = (fakecuda_stats_fn)dlsym(lib, "fakecuda_stats");
	ASSERT_NE(NULL, stats_fn);

	EXPECT_EQ(2 * MiB, b0->granularity(b0));
	EXPECT_EQ(4 * MiB, b1->granularity(b1));
	/* device 1: 6 MiB reserved is 8 MiB, aligned to 4 MiB */
	ASSERT_EQ(0, b1->reserve(b1, 6 * MiB, &va));
	EXPECT_EQ(0, (uintptr_t)va % (4 * MiB));
	ASSERT_EQ(0, b1->map(b1, va, 8 * MiB, &h));
	ASSERT_EQ(0, b1->unmap(b1, va, 8 * MiB, h));
	b1->unreserve(b1, va, 6 * MiB);

	ASSERT_EQ(0, gs_mm_new(b0, &m0));
	ASSERT_EQ(0, gs_mm_new(b1, &m1));
	ASSERT_EQ(0, gs_mm_set_policy(m1, W, GS_MM_BACKUP, 0));
	p0 = gs_mm_alloc(m0, W, 1 * MiB);
	p1 = gs_mm_alloc(m1, W, 1 * MiB);
	ASSERT_NE(NULL, p0);
	ASSERT_NE(NULL, p1);
	ASSERT_EQ(0, gs_mm_tag_info(m0, W, &info));
	EXPECT_EQ(32 * MiB, info.chunk_bytes);
	EXPECT_EQ(0, (uintptr_t)p0 % (32 * MiB));
	ASSERT_EQ(0, gs_mm_tag_info(m1, W, &info));
	EXPECT_EQ(64 * MiB, info.chunk_bytes);
	EXPECT_EQ(0, (uintptr_t)p1 % (64 * MiB));
	/* a chunk size asked for is rounded to it too */
	ASSERT_EQ(0, gs_mm_set_policy(m1, KV, GS_MM_DISCARD, 6 * MiB));
	ASSERT_NE(NULL, gs_mm_alloc(m1, KV, 1 * MiB));
	ASSERT_EQ(0, gs_mm_tag_info(m1, KV, &info));
	EXPECT_EQ(64 * MiB, info.chunk_bytes);
	/* and a cycle on device 1 */
	memset(p1, 0x3c, 1 * MiB);
	ASSERT_EQ(0, gs_mm_pause(m1, W, &bytes));
	ASSERT_EQ(0, gs_mm_resume(m1, W, &bytes));
	EXPECT_TRUE(all_u32(p1, 1 * MiB, 0x3c3c3c3c));
	gs_mm_destroy(m1);
	gs_mm_destroy(m0);
	stats_fn(&st);
	EXPECT_EQ(0, st.misuse);
	EXPECT_EQ(0, st.reservations);
	EXPECT_EQ(0, st.handles);
}

/*
 * Issue 34 defect 5: PyTorch frees a MemPool's segment to its allocator
 * only to give memory back (empty_cache, or its out-of-memory path, of
 * the pools whose use count fell to 0; a live pool keeps its blocks), as
 * it would cudaFree it. Through the torch allocator (gpusleep_free) that
 * memory must then be free on the device, once the work queued on the
 * segment's stream is done; a segment whose stream is being captured
 * stays mapped (nothing may wait for it) until the next release or trim.
 */
TEST(torch_free_gives_the_memory_back)
{
	void *lib;
	fakecuda_stats_fn stats_fn;
	fakecuda_launch_fn launch_fn;
	fakecuda_capture_fn capture;
	fakecuda_engine_stream_flags_fn esf;
	struct fakecuda_stats st;
	unsigned long long used;
	void *s, *p, *q;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "cuda", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_CUDA_LIB", fake_path(), 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_BACKUP_TAGS", "", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", "off", 1));
	p = gpusleep_malloc_tag1(4096, 0, NULL);	/* loads the stand-in */
	if (!p && !gpusleep_mm())
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, p);
	lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NE(NULL, lib);
	stats_fn = (fakecuda_stats_fn)dlsym(lib, "fakecuda_stats");
	launch_fn = (fakecuda_launch_fn)dlsym(lib, "fakecuda_launch");
	capture = (fakecuda_capture_fn)dlsym(lib, "fakecuda_capture");
	esf = (fakecuda_engine_stream_flags_fn)dlsym(lib,
					"fakecuda_engine_stream_flags");
	ASSERT_NE(NULL, esf);
	s = esf(1);			/* a PyTorch stream: non-blocking */
	ASSERT_NE(NULL, s);
	stats_fn(&st);
	used = st.used_bytes;
	q = gpusleep_malloc_tag1(40 * MiB, 0, s);
	ASSERT_NE(NULL, q);
	ASSERT_EQ(0, launch_fn(s, q, 40 * MiB, 5, UNTIL_SYNC));
	stats_fn(&st);
	ASSERT_EQ(used + 40 * MiB, st.used_bytes);
	gpusleep_free(q, 40 * MiB, 0, s);	/* PyTorch's raw_delete */
	stats_fn(&st);
	EXPECT_EQ(used, st.used_bytes);		/* free on the device */
	EXPECT_EQ(0, st.illegal);		/* after the kernel on s */
	EXPECT_EQ(0, st.kernels);
	/* the same while s is captured: it stays, nothing waits for s */
	q = gpusleep_malloc_tag1(40 * MiB, 0, s);
	ASSERT_NE(NULL, q);
	stats_fn(&st);
	used = st.used_bytes;
	ASSERT_EQ(0, capture(s, 1));
	gpusleep_free(q, 40 * MiB, 0, s);
	stats_fn(&st);
	EXPECT_EQ(used, st.used_bytes);
	EXPECT_EQ(0, st.misuse);
	ASSERT_EQ(0, capture(s, 0));
	gpusleep_free(p, 4096, 0, NULL);
}

/* run fn with stderr captured into buf (for what a refusal says) */
static void capture_stderr(char *buf, size_t len, void (*fn)(void *),
			   void *arg)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n = 0;

	fflush(stderr);
	if (tmp)
		dup2(fileno(tmp), 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	buf[0] = 0;
	if (tmp) {
		rewind(tmp);
		n = fread(buf, 1, len - 1, tmp);
		buf[n] = 0;
		fclose(tmp);
	}
}

struct torch_pause {
	uint32_t tag;
	int ret;
	struct gs_mm_result r;
};

static void pause_fn(void *p)
{
	struct torch_pause *a = p;

	a->ret = gs_mm_pause_ex(gpusleep_mm(), a->tag, &a->r);
}

/*
 * Issue 34 defect 7: the host staging of the backed-up tags is prepared
 * or kept by policy (GPUSLEEP_STAGING: eager, at allocation, kept across
 * cycles, the default; lazy, at the first release, kept; per-cycle, at
 * each release, given back after the resume, as torch_memory_saver) and
 * counted against a budget the user sets (GPUSLEEP_PIN_LIMIT, as
 * gs_mm_set_pin_limit): past it the release is refused, nothing unmapped,
 * saying so.
 */
static fakecuda_stats_fn torch_fake_stats(void)
{
	void *lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);

	return lib ? (fakecuda_stats_fn)dlsym(lib, "fakecuda_stats") : NULL;
}

static void torch_env(const char *staging, const char *limit)
{
	setenv("GPUSLEEP_BACKEND", "cuda", 1);
	setenv("GPUSLEEP_CUDA_LIB", fake_path(), 1);
	setenv("GPUSLEEP_NVML_LIB", "off", 1);
	setenv("GPUSLEEP_BACKUP_TAGS", "weights", 1);
	if (staging)
		setenv("GPUSLEEP_STAGING", staging, 1);
	if (limit)
		setenv("GPUSLEEP_PIN_LIMIT", limit, 1);
}

TEST(torch_staging_policy_and_budget)
{
	struct torch_pause a = { .tag = W };
	struct gs_mm_tag_info info;
	uint64_t pinned = 0, limit = 0, bytes;
	fakecuda_stats_fn stats_fn;
	struct fakecuda_stats st;
	char err[4096];
	void *w, *w2;

	torch_env("lazy", "24M");
	w = gpusleep_malloc_tag0(20 * MiB, 0, NULL);
	if (!w && !gpusleep_mm())
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, w);
	stats_fn = torch_fake_stats();
	ASSERT_NE(NULL, stats_fn);
	gs_mm_pinned(gpusleep_mm(), &pinned, &limit);
	EXPECT_EQ(24 * MiB, limit);
	EXPECT_EQ(0, pinned);		/* lazy: nothing at allocation */
	stats_fn(&st);
	EXPECT_EQ(0, st.host_allocs);
	/* the first release prepares it (its 20 MiB chunk), kept after */
	ASSERT_EQ(0, gs_mm_pause(gpusleep_mm(), W, &bytes));
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(20 * MiB, pinned);
	ASSERT_EQ(0, gs_mm_resume(gpusleep_mm(), W, &bytes));
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(20 * MiB, pinned);
	/* 10 MiB more (a 32 MiB chunk): past the budget, refused */
	w2 = gpusleep_malloc_tag0(10 * MiB, 0, NULL);
	ASSERT_NE(NULL, w2);
	capture_stderr(err, sizeof(err), pause_fn, &a);
	EXPECT_EQ(-ENOMEM, a.ret);
	EXPECT_EQ(0, a.r.unmapped_bytes);	/* nothing released */
	EXPECT_NE(NULL, strstr(err, "budget")) TH_LOG("said: %s", err);
	EXPECT_NE(NULL, strstr(err, "GPUSLEEP_PIN_LIMIT")) TH_LOG("said: %s", err);
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), W, &info));
	EXPECT_EQ(0, info.paused);
	/* a budget raised, the release goes through */
	ASSERT_EQ(0, gs_mm_set_pin_limit(gpusleep_mm(), 64 * MiB));
	EXPECT_EQ(0, gs_mm_pause(gpusleep_mm(), W, &bytes));
	EXPECT_EQ(0, gs_mm_resume(gpusleep_mm(), W, &bytes));
}

/* per-cycle: prepared at each release, given back after the resume */
TEST(torch_staging_per_cycle)
{
	uint64_t pinned = 1, bytes;
	void *w;

	torch_env("per-cycle", NULL);
	w = gpusleep_malloc_tag0(6 * MiB, 0, NULL);
	if (!w && !gpusleep_mm())
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, w);
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(0, pinned);
	ASSERT_EQ(0, gs_mm_pause(gpusleep_mm(), W, &bytes));
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(16 * MiB, pinned);
	ASSERT_EQ(0, gs_mm_resume(gpusleep_mm(), W, &bytes));
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(0, pinned);
}

/* the default, eager: at allocation, kept; bad settings refused */
TEST(torch_staging_eager_and_bad_settings)
{
	uint64_t pinned = 0;
	void *w;

	torch_env("bogus", NULL);
	EXPECT_EQ(NULL, gpusleep_malloc_tag0(6 * MiB, 0, NULL));
	EXPECT_EQ(NULL, gpusleep_mm());
	torch_env("eager", "12 apples");
	EXPECT_EQ(NULL, gpusleep_malloc_tag0(6 * MiB, 0, NULL));
	EXPECT_EQ(NULL, gpusleep_mm());
	unsetenv("GPUSLEEP_STAGING");
	torch_env(NULL, "1G");
	w = gpusleep_malloc_tag0(6 * MiB, 0, NULL);
	if (!w && !gpusleep_mm())
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, w);
	gs_mm_pinned(gpusleep_mm(), &pinned, NULL);
	EXPECT_EQ(16 * MiB, pinned);	/* eager: its chunk's piece */
}

/*
 * Issue 34 defect 7: another GPU given access to a tag's memory (custom
 * all-reduce's buffers, NVLink P2P, an NCCL registration: cuMemSetAccess
 * with a descriptor for that device) still has it after a release and a
 * resume: every device that had access is granted it again.
 */
TEST(peer_access_survives_a_cycle)
{
	void *lib;
	fakecuda_access_fn access;
	__typeof__(cuMemSetAccess) *set_access;
	struct gs_backend *b;
	struct gs_mm *mm = NULL;
	struct gs_mm_tag_info info;
	CUmemAccessDesc peer = {
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 },
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	uint64_t bytes;
	void *w, *kv, *kv2;
	int err = 0;

	ASSERT_EQ(0, setenv("FAKECUDA_DEVICES", "2", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", "off", 1));
	b = gs_backend_cuda_new(0, fake_path(), &err);
	if (!b && err == -ENOSYS)
		SKIP(return, "built with CUDA=0 (no CUDA backend)");
	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, gs_mm_new(b, &mm));
	ASSERT_EQ(0, gs_mm_set_policy(mm, W, GS_MM_BACKUP, 0));
	lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	access = (fakecuda_access_fn)dlsym(lib, "fakecuda_access");
	set_access = (__typeof__(cuMemSetAccess) *)dlsym(lib, "cuMemSetAccess");
	ASSERT_NE(NULL, access);
	ASSERT_NE(NULL, set_access);
	w = gs_mm_alloc(mm, W, 4 * MiB);	/* at its chunk's start */
	ASSERT_NE(NULL, w);
	ASSERT_EQ(0, gs_mm_tag_info(mm, W, &info));
	EXPECT_EQ(3, access(w, 0));
	EXPECT_EQ(0, access(w, 1));
	/* the engine's collective library grants device 1, on its own */
	ASSERT_EQ(CUDA_SUCCESS, set_access((uintptr_t)w, info.chunk_bytes,
					   &peer, 1));
	EXPECT_EQ(3, access(w, 1));
	memset(w, 0x42, 4 * MiB);
	ASSERT_EQ(0, gs_mm_pause(mm, W, &bytes));
	EXPECT_EQ(-1, access(w, 1));
	ASSERT_EQ(0, gs_mm_resume(mm, W, &bytes));
	EXPECT_EQ(3, access(w, 0));
	EXPECT_EQ(3, access(w, 1)) TH_LOG("device 1 lost its access");
	EXPECT_TRUE(all_u32(w, 4 * MiB, 0x42424242));
	/* through the library: every chunk, now and later, for device 1 */
	ASSERT_EQ(0, gs_mm_set_policy(mm, KV, GS_MM_DISCARD, 0));
	kv = gs_mm_alloc(mm, KV, 4 * MiB);
	ASSERT_NE(NULL, kv);
	EXPECT_EQ(0, access(kv, 1));
	ASSERT_EQ(0, gs_mm_set_peer_access(mm, 1U << 1));
	EXPECT_EQ(3, access(kv, 1));
	kv2 = gs_mm_alloc(mm, KV, 64 * MiB);	/* a new chunk */
	ASSERT_NE(NULL, kv2);
	EXPECT_EQ(3, access(kv2, 1));
	ASSERT_EQ(0, gs_mm_pause(mm, KV, &bytes));
	ASSERT_EQ(0, gs_mm_resume(mm, KV, &bytes));
	EXPECT_EQ(3, access(kv, 1));
	EXPECT_EQ(3, access(kv2, 1));
	EXPECT_EQ(-EINVAL, gs_mm_free(mm, (char *)kv + 1));
	gs_mm_destroy(mm);
}

TEST_HARNESS_MAIN
