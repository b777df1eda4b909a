// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/test_cuda_mm.c: the memory manager (user/mm.c) pausing and
 * resuming tags on the CUDA backend, over the stand-in libcuda.so.1
 * (tests/host/fake_libcuda.c, loaded with FAKECUDA_POISON=1 so memory the
 * backend does not clear reads 0xa5, as the driver's may hold old data).
 *
 * Checks: BACKUP tags come back with their contents, DISCARD tags come back
 * as zeros, the pinned staging buffer is allocated once and reused, a tag
 * lives in few physical handles, and after many cycles and gs_mm_destroy()
 * the stand-in holds nothing and saw no call the driver would reject.
 * Built without cuda.h every test is skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"

#include "backend.h"
#include "libgpusleep.h"
#include "fake_libcuda.h"

#ifndef FAKECUDA_LIB
#define FAKECUDA_LIB "build/tests/host/fakecuda/libcuda.so.1"
#endif

#define MiB (1UL << 20)
#define W GPUSLEEP_TAG_WEIGHTS
#define KV GPUSLEEP_TAG_KV_CACHE

static const char *fake_path(void)
{
	const char *p = getenv("FAKECUDA_LIB");

	return p && *p ? p : FAKECUDA_LIB;
}

static void fill(void *p, size_t size, uint32_t seed)
{
	uint32_t *w = p;

	for (size_t i = 0; i < size / 4; i++)
		w[i] = seed ^ ((uint32_t)i * 2654435761u);
}

static int check_fill(const void *p, size_t size, uint32_t seed)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < size / 4; i++)
		if (w[i] != (seed ^ ((uint32_t)i * 2654435761u)))
			return 0;
	return 1;
}

static int all_zero(const void *p, size_t size)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < size; i++)
		if (c[i])
			return 0;
	return 1;
}

FIXTURE(mm) {
	struct gs_mm *mm;
	fakecuda_stats_fn stats;
	fakecuda_calls_fn calls;
};

FIXTURE_SETUP(mm)
{
	struct gs_backend *b;
	void *lib;
	int err = 0;

	ASSERT_EQ(0, setenv("FAKECUDA_POISON", "1", 1));
	b = gs_backend_cuda_new(0, fake_path(), &err);
	if (!b && err == -ENOSYS)
		return;		/* the test says why */
	ASSERT_NE(NULL, b) TH_LOG("cannot load %s: %d", fake_path(), err);
	lib = dlopen(fake_path(), RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NE(NULL, lib);
	self->stats = (fakecuda_stats_fn)dlsym(lib, "fakecuda_stats");
	self->calls = (fakecuda_calls_fn)dlsym(lib, "fakecuda_calls");
	ASSERT_NE(NULL, self->stats);
	ASSERT_NE(NULL, self->calls);
	ASSERT_EQ(0, gs_mm_new(b, &self->mm));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 0));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, KV, GS_MM_DISCARD, 0));
}

FIXTURE_TEARDOWN(mm)
{
	struct fakecuda_stats st;

	if (!self->mm)
		return;
	gs_mm_destroy(self->mm);
	self->stats(&st);
	EXPECT_EQ(0, st.reservations);
	EXPECT_EQ(0, st.handles);
	EXPECT_EQ(0, st.mappings);
	EXPECT_EQ(0, st.host_allocs);
	EXPECT_EQ(0, st.streams);
	EXPECT_EQ(0, st.ctx_refs);
	EXPECT_EQ(0, st.pending);
	EXPECT_EQ(0, st.misuse);
	EXPECT_EQ(0, st.pageable_copies);
}

#define NEED_MM() do { \
	if (!self->mm) \
		SKIP(return, "built with CUDA=0 (no CUDA backend)"); \
} while (0)

/* sizes that span several chunks (16 MiB first, then doubling) */
static const size_t sizes[] = { 1 * MiB, 5 * MiB, 12 * MiB, 20 * MiB };
#define NBUF (sizeof(sizes) / sizeof(sizes[0]))

TEST_F(mm, backup_tag_keeps_contents)
{
	struct gs_mm_tag_info info;
	struct fakecuda_stats st;
	void *p[NBUF];
	uint64_t bytes;

	NEED_MM();
	for (size_t i = 0; i < NBUF; i++) {
		p[i] = gs_mm_alloc(self->mm, W, sizes[i]);
		ASSERT_NE(NULL, p[i]);
		fill(p[i], sizes[i], 100 + i);
	}
	ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	ASSERT_EQ(1, info.paused);
	ASSERT_EQ(0, info.mapped_bytes);
	ASSERT_EQ(info.chunk_bytes, bytes);
	self->stats(&st);
	EXPECT_EQ(0, st.handles);	/* the device memory is really gone */
	EXPECT_EQ(0, st.mappings);

	ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
	for (size_t i = 0; i < NBUF; i++)
		ASSERT_TRUE(check_fill(p[i], sizes[i], 100 + i));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	self->stats(&st);
	/* one physical handle per chunk: few, large */
	EXPECT_EQ(info.nr_chunks, st.handles);
	EXPECT_GE(3, st.handles);
}

TEST_F(mm, discard_tag_comes_back_zeroed)
{
	void *p[NBUF];
	uint64_t bytes;

	NEED_MM();
	for (size_t i = 0; i < NBUF; i++) {
		/* new memory, as from cudaMalloc, holds anything (0xa5 here) */
		p[i] = gs_mm_alloc(self->mm, KV, sizes[i]);
		ASSERT_NE(NULL, p[i]);
		memset(p[i], 0x77, sizes[i]);
	}
	ASSERT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
	ASSERT_EQ(0, gs_mm_resume(self->mm, KV, &bytes));
	for (size_t i = 0; i < NBUF; i++)
		ASSERT_TRUE(all_zero(p[i], sizes[i]));
	/* DISCARD never needs host memory */
	EXPECT_EQ(0, self->calls("cuMemHostAlloc"));
}

TEST_F(mm, many_cycles_reuse_staging_and_leak_nothing)
{
	struct fakecuda_stats st;
	void *w, *kv;
	void *staging = NULL;
	struct gs_mm_tag_info info;
	uint64_t bytes;

	NEED_MM();
	/* fences in this thread: 25 cycles, no hand-off to the fence thread */
	ASSERT_EQ(0, gs_mm_set_fence_timeout(self->mm, 0));
	w = gs_mm_alloc(self->mm, W, 6 * MiB);
	kv = gs_mm_alloc(self->mm, KV, 6 * MiB);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, kv);
	for (uint32_t round = 0; round < 25; round++) {
		fill(w, 6 * MiB, round);
		fill(kv, 6 * MiB, ~round);
		/* release all, then wake weights first, as RL trainers do */
		ASSERT_EQ(0, gs_mm_pause(self->mm, W, &bytes));
		ASSERT_EQ(0, gs_mm_pause(self->mm, KV, &bytes));
		self->stats(&st);
		ASSERT_EQ(0, st.handles);
		ASSERT_EQ(0, st.mappings);
		ASSERT_EQ(0, gs_mm_resume(self->mm, W, &bytes));
		ASSERT_EQ(0, gs_mm_resume(self->mm, KV, &bytes));
		ASSERT_TRUE(check_fill(w, 6 * MiB, round));
		ASSERT_TRUE(all_zero(kv, 6 * MiB));
		ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
		if (!staging)
			staging = info.staging;
		ASSERT_EQ(staging, info.staging);
	}
	/* the pinned staging buffer was allocated once */
	EXPECT_EQ(1, self->calls("cuMemHostAlloc"));
	self->stats(&st);
	EXPECT_EQ(1, st.host_allocs);
	EXPECT_EQ(0, st.misuse);
	ASSERT_EQ(0, gs_mm_free(self->mm, w));
	ASSERT_EQ(0, gs_mm_free(self->mm, kv));
}

/*
 * Issue 34 item 6, on the CUDA backend: the checksum is taken of the
 * pinned staging once the device-to-host copies are synchronised, and
 * checked before the host-to-device copies; a staging byte changed in
 * between fails the resume (EBADMSG) before any chunk is mapped.
 */
TEST_F(mm, verify_corrupted_staging_fails_the_resume)
{
	struct gs_mm_tag_info info;
	struct gs_mm_result r;
	struct fakecuda_stats st;
	char *host = NULL;
	void *p;

	NEED_MM();
	ASSERT_EQ(0, gs_mm_set_fence_timeout(self->mm, 0));
	gs_mm_destroy(self->mm);
	self->mm = NULL;
	{
		struct gs_backend *b;
		int err = 0;

		ASSERT_EQ(0, setenv("GPUSLEEP_VERIFY", "1", 1));
		b = gs_backend_cuda_new(0, fake_path(), &err);
		ASSERT_NE(NULL, b);
		ASSERT_EQ(0, gs_mm_new(b, &self->mm));
		unsetenv("GPUSLEEP_VERIFY");
	}
	ASSERT_EQ(0, gs_mm_set_fence_timeout(self->mm, 0));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, W, GS_MM_BACKUP, 0));
	p = gs_mm_alloc(self->mm, W, 5 * MiB);
	ASSERT_NE(NULL, p);
	fill(p, 5 * MiB, 33);
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, W, &r));
	ASSERT_EQ(0, gs_mm_backup_ptr(self->mm, (char *)p + 4 * MiB, 1,
				      (void **)&host));
	ASSERT_NE(NULL, host);
	*host ^= 1;
	EXPECT_EQ(-EBADMSG, gs_mm_resume_ex(self->mm, W, &r));
	EXPECT_NE(0, r.lost_bytes);
	EXPECT_EQ(0, r.copied_bytes);		/* nothing restored */
	self->stats(&st);
	EXPECT_EQ(0, st.handles);		/* nothing mapped */
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, W, &info));
	EXPECT_EQ(1, info.paused);
	/* then fresh memory, zeros (never the poisoned 0xa5, nor garbage) */
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, W, &r));
	EXPECT_NE(0, r.lost_bytes);
	EXPECT_TRUE(all_zero(p, 5 * MiB));
	ASSERT_EQ(0, gs_mm_free(self->mm, p));
}

/*
 * The GPU the agent reports (issue 37): the device's UUID, the same a
 * claimant gets for the ordinal without making a context.
 */
TEST_F(mm, gpu_uuid_is_the_devices)
{
	uint8_t a[16], b[16], zero[16] = { 0 };

	NEED_MM();
	ASSERT_EQ(0, gs_mm_gpu_uuid(self->mm, a));
	ASSERT_EQ(0, gs_cuda_device_uuid(0, fake_path(), b));
	EXPECT_EQ(0, memcmp(a, b, 16));
	EXPECT_NE(0, memcmp(a, zero, 16));
	EXPECT_EQ(-ENODEV, gs_cuda_device_uuid(7, fake_path(), b));
	EXPECT_EQ(-ENOENT, gs_cuda_device_uuid(0, "/nonexistent/libcuda.so.1",
					       b));
}

TEST_HARNESS_MAIN
