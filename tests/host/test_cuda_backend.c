// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/test_cuda_backend.c: the CUDA backend (user/backend_cuda.c)
 * against the stand-in libcuda.so.1 (tests/host/fake_libcuda.c).
 *
 * The backend loads the stand-in through its normal dlopen path, given the
 * library's path; the test reaches the stand-in's counters and fault knobs
 * with dlsym on the same (already loaded) library. Every test ends with the
 * backend destroyed and checks, in the teardown, that the stand-in holds no
 * handle, mapping, reservation, host buffer, stream, context reference or
 * queued copy, and saw no call the real driver would reject.
 *
 * Built without cuda.h, libgpusleep's gs_backend_cuda_new() fails with
 * -ENOSYS and every test is skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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
#define GRAN FAKECUDA_GRANULARITY

/* CUresult values used for injected faults (from cuda.h) */
#define CU_INVALID_VALUE	1
#define CU_OUT_OF_MEMORY	2
#define CU_NOT_INITIALIZED	3
#define CU_NO_DEVICE		100
#define CU_ILLEGAL_ADDRESS	700
#define CU_NOT_PERMITTED	800
#define CU_NOT_SUPPORTED	801
#define CU_UNKNOWN		999

static const char *fake_path(void)
{
	const char *p = getenv("FAKECUDA_LIB");

	return p && *p ? p : FAKECUDA_LIB;
}

struct fake {
	void *lib;
	fakecuda_stats_fn stats;
	fakecuda_fail_fn fail;
	fakecuda_calls_fn calls;
	fakecuda_clear_faults_fn clear;
};

/* the stand-in's control functions; lib must already be loaded (NOLOAD) */
static int fake_get(struct fake *f, int flags)
{
	f->lib = dlopen(fake_path(), RTLD_NOW | flags);
	if (!f->lib)
		return -1;
	f->stats = (fakecuda_stats_fn)dlsym(f->lib, "fakecuda_stats");
	f->fail = (fakecuda_fail_fn)dlsym(f->lib, "fakecuda_fail");
	f->calls = (fakecuda_calls_fn)dlsym(f->lib, "fakecuda_calls");
	f->clear = (fakecuda_clear_faults_fn)dlsym(f->lib,
						   "fakecuda_clear_faults");
	return f->stats && f->fail && f->calls && f->clear ? 0 : -1;
}

static struct fakecuda_stats stats_of(struct fake *f)
{
	struct fakecuda_stats st;

	f->stats(&st);
	return st;
}

static void fill(void *p, size_t size, uint32_t seed)
{
	uint32_t *w = p;

	for (size_t i = 0; i < size / 4; i++)
		w[i] = seed + (uint32_t)i * 2654435761u;
}

static int check_fill(const void *p, size_t size, uint32_t seed)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < size / 4; i++)
		if (w[i] != seed + (uint32_t)i * 2654435761u)
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

#define SKIP_NO_CUDA "built with CUDA=0 (no CUDA backend)"

/* ---------------------------------------------------------------- loading */

TEST(missing_library_fails_cleanly)
{
	int err = 0;
	struct gs_backend *b;

	b = gs_backend_cuda_new(0, "/nonexistent/gpusleep/libcuda.so.1", &err);
	if (!b && err == -ENOSYS)
		SKIP(return, SKIP_NO_CUDA);
	ASSERT_EQ(NULL, b);
	ASSERT_EQ(-ENOENT, err);
}

TEST(library_without_driver_symbols_fails_cleanly)
{
	int err = 0;
	struct gs_backend *b;

	/* loadable, but no cuInit: not a driver */
	b = gs_backend_cuda_new(0, "libz.so.1", &err);
	if (!b && err == -ENOSYS)
		SKIP(return, SKIP_NO_CUDA);
	ASSERT_EQ(NULL, b);
	ASSERT_TRUE(err == -ENODEV || err == -ENOENT);
}

/*
 * gs_backend_cuda_new() failing part-way (knob set through the environment,
 * read when the stand-in is loaded): the expected errno, and nothing left
 * behind (no context reference, no stream).
 */
FIXTURE(new_fail) {
	int unused;
};

FIXTURE_VARIANT(new_fail) {
	const char *env;	/* FAKECUDA_FAIL, or FAKECUDA_DEVICES=0 */
	int device;
	int want;
};

FIXTURE_VARIANT_ADD(new_fail, no_device) {
	.env = "FAKECUDA_DEVICES=0", .device = 0, .want = -ENODEV,
};
FIXTURE_VARIANT_ADD(new_fail, bad_ordinal) {
	.env = NULL, .device = 3, .want = -ENODEV,
};
FIXTURE_VARIANT_ADD(new_fail, init_unknown) {
	.env = "FAKECUDA_FAIL=cuInit:1", .device = 0, .want = -EIO,
};
FIXTURE_VARIANT_ADD(new_fail, retain_oom) {
	.env = "FAKECUDA_FAIL=cuDevicePrimaryCtxRetain:1:1:2", .device = 0,
	.want = -ENOMEM,
};
FIXTURE_VARIANT_ADD(new_fail, granularity_invalid) {
	.env = "FAKECUDA_FAIL=cuMemGetAllocationGranularity:1:1:1",
	.device = 0, .want = -EINVAL,
};
FIXTURE_VARIANT_ADD(new_fail, stream_oom) {
	.env = "FAKECUDA_FAIL=cuStreamCreate:1:1:2", .device = 0,
	.want = -ENOMEM,
};

FIXTURE_SETUP(new_fail) {}
FIXTURE_TEARDOWN(new_fail) {}

TEST_F(new_fail, leaves_nothing)
{
	struct fakecuda_stats st;
	struct gs_backend *b;
	struct fake f;
	int err = 0;

	if (variant->env)
		ASSERT_EQ(0, putenv((char *)variant->env));
	b = gs_backend_cuda_new(variant->device, fake_path(), &err);
	if (!b && err == -ENOSYS)
		SKIP(return, SKIP_NO_CUDA);
	ASSERT_EQ(NULL, b);
	ASSERT_EQ(variant->want, err);
	/* the backend may have unloaded it: load it again to look */
	ASSERT_EQ(0, fake_get(&f, 0));
	st = stats_of(&f);
	EXPECT_EQ(0, st.ctx_refs);
	EXPECT_EQ(0, st.streams);
	EXPECT_EQ(0, st.misuse);
}

/* --------------------------------------------------------------- fixtures */

/* load the backend over the stand-in; b stays NULL (skip) without cuda.h */
static void backend_up(struct __test_metadata *_metadata,
		       struct gs_backend **b, struct fake *f)
{
	int err = 0;

	*b = gs_backend_cuda_new(0, fake_path(), &err);
	if (!*b && err == -ENOSYS)
		return;		/* NEED_BACKEND() in the test says why */
	ASSERT_NE(NULL, *b) TH_LOG("cannot load %s: %d", fake_path(), err);
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, fake_get(f, RTLD_NOLOAD))
		TH_LOG("%s is not the stand-in", fake_path());
}

/* destroy the backend; the stand-in must be back to nothing */
static void backend_down(struct __test_metadata *_metadata,
			 struct gs_backend *b, struct fake *f)
{
	struct fakecuda_stats st;

	if (!b)
		return;
	b->destroy(b);
	st = stats_of(f);
	EXPECT_EQ(0, st.reservations);
	EXPECT_EQ(0, st.handles);
	EXPECT_EQ(0, st.mappings);
	EXPECT_EQ(0, st.host_allocs);
	EXPECT_EQ(0, st.streams);
	EXPECT_EQ(0, st.ctx_refs);
	EXPECT_EQ(0, st.pending);
	EXPECT_EQ(0, st.misuse);
}

FIXTURE(cuda) {
	struct gs_backend *b;
	struct fake f;
};

FIXTURE_SETUP(cuda)
{
	backend_up(_metadata, &self->b, &self->f);
}

FIXTURE_TEARDOWN(cuda)
{
	backend_down(_metadata, self->b, &self->f);
}

/* the 6.1 harness runs the body after a SKIP in the setup */
#define NEED_BACKEND() do { if (!self->b) SKIP(return, SKIP_NO_CUDA); } while (0)

TEST_F(cuda, granularity)
{
	NEED_BACKEND();
	ASSERT_EQ(GRAN, self->b->granularity(self->b));
	ASSERT_STREQ("cuda:0", self->b->name);
}

TEST_F(cuda, reserve_is_aligned_and_rounded)
{
	struct gs_backend *b = self->b;
	void *va = NULL;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, 3 * MiB, &va));
	ASSERT_EQ(0, (uintptr_t)va % GRAN);
	ASSERT_EQ(1, stats_of(&self->f).reservations);
	/* rounded to 4 MiB: a 4 MiB mapping fits */
	void *h = NULL;
	ASSERT_EQ(0, b->map(b, va, 4 * MiB, &h));
	ASSERT_EQ(0, b->unmap(b, va, 4 * MiB, h));
	b->unreserve(b, va, 3 * MiB);
	ASSERT_EQ(0, stats_of(&self->f).reservations);
}

TEST_F(cuda, map_unmap_remap_keeps_va)
{
	struct gs_backend *b = self->b;
	struct fakecuda_stats st;
	void *va = NULL, *h = NULL;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, 8 * MiB, &va));
	for (int round = 0; round < 3; round++) {
		ASSERT_EQ(0, b->map(b, va, 8 * MiB, &h));
		st = stats_of(&self->f);
		/* one physical handle for the whole range */
		ASSERT_EQ(1, st.handles);
		ASSERT_EQ(1, st.mappings);
		ASSERT_EQ(1, st.accessible);
		/* fresh memory reads as zeros, then is ours to write */
		ASSERT_TRUE(all_zero(va, 8 * MiB));
		fill(va, 8 * MiB, round);
		ASSERT_TRUE(check_fill(va, 8 * MiB, round));
		ASSERT_EQ(0, b->unmap(b, va, 8 * MiB, h));
		st = stats_of(&self->f);
		ASSERT_EQ(0, st.handles);
		ASSERT_EQ(0, st.mappings);
		ASSERT_EQ(1, st.reservations);
	}
	b->unreserve(b, va, 8 * MiB);
}

TEST_F(cuda, map_rejects_misaligned)
{
	struct gs_backend *b = self->b;
	void *va = NULL, *h = NULL;
	long creates;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, 8 * MiB, &va));
	creates = self->f.calls("cuMemCreate");
	EXPECT_EQ(-EINVAL, b->map(b, (char *)va + 4096, 2 * MiB, &h));
	EXPECT_EQ(-EINVAL, b->map(b, va, 2 * MiB + 4096, &h));
	EXPECT_EQ(-EINVAL, b->map(b, va, 0, &h));
	/* refused before reaching the driver */
	EXPECT_EQ(creates, self->f.calls("cuMemCreate"));
	ASSERT_EQ(0, b->map(b, va, 2 * MiB, &h));
	/* a handle with another range is refused, and nothing changes */
	EXPECT_EQ(-EINVAL, b->unmap(b, (char *)va + 2 * MiB, 2 * MiB, h));
	EXPECT_EQ(1, stats_of(&self->f).mappings);
	ASSERT_EQ(0, b->unmap(b, va, 2 * MiB, h));
	b->unreserve(b, va, 8 * MiB);
}

/* the driver leaves new memory undefined: the backend must zero it */
FIXTURE(poison) {
	struct gs_backend *b;
	struct fake f;
};

FIXTURE_SETUP(poison)
{
	/* read by the stand-in when it loads (in this test's process) */
	ASSERT_EQ(0, setenv("FAKECUDA_POISON", "1", 1));
	backend_up(_metadata, &self->b, &self->f);
}

FIXTURE_TEARDOWN(poison)
{
	backend_down(_metadata, self->b, &self->f);
}

TEST_F(poison, fresh_memory_reads_zeros)
{
	struct gs_backend *b = self->b;
	void *va = NULL, *h = NULL;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, 4 * MiB, &va));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, b->map(b, va, 4 * MiB, &h));
		ASSERT_TRUE(all_zero(va, 4 * MiB));
		memset(va, 0x5a, 4 * MiB);
		ASSERT_EQ(0, b->unmap(b, va, 4 * MiB, h));
	}
	b->unreserve(b, va, 4 * MiB);
}

TEST_F(cuda, backup_restore_roundtrip)
{
	struct gs_backend *b = self->b;
	struct fakecuda_stats st;
	void *va = NULL, *h = NULL, *host = NULL;
	const size_t size = 6 * MiB;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, size, &va));
	ASSERT_EQ(0, b->map(b, va, size, &h));
	fill(va, size, 7);
	ASSERT_EQ(0, b->host_alloc(b, size, &host));
	ASSERT_EQ(0, b->backup(b, host, va, size));
	/* async: queued on the stream until sync */
	ASSERT_EQ(1, stats_of(&self->f).pending);
	ASSERT_EQ(0, b->sync(b));
	ASSERT_EQ(0, stats_of(&self->f).pending);
	ASSERT_TRUE(check_fill(host, size, 7));
	ASSERT_EQ(0, b->unmap(b, va, size, h));

	ASSERT_EQ(0, b->map(b, va, size, &h));
	ASSERT_TRUE(all_zero(va, size));
	ASSERT_EQ(0, b->restore(b, va, host, size));
	ASSERT_EQ(0, b->sync(b));
	ASSERT_TRUE(check_fill(va, size, 7));

	st = stats_of(&self->f);
	EXPECT_EQ(0, st.pageable_copies);	/* staged through pinned memory */
	ASSERT_EQ(0, b->unmap(b, va, size, h));
	b->host_free(b, host, size);
	b->unreserve(b, va, size);
}

TEST_F(cuda, staging_buffer_is_reused)
{
	struct gs_backend *b = self->b;
	void *va = NULL, *h = NULL, *host = NULL;
	const size_t size = 4 * MiB;
	long allocs;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, size, &va));
	ASSERT_EQ(0, b->map(b, va, size, &h));
	ASSERT_EQ(0, b->host_alloc(b, size, &host));
	allocs = self->f.calls("cuMemHostAlloc");
	for (uint32_t i = 0; i < 20; i++) {
		fill(va, size, i);
		ASSERT_EQ(0, b->backup(b, host, va, size));
		ASSERT_EQ(0, b->sync(b));
		ASSERT_EQ(0, b->unmap(b, va, size, h));
		ASSERT_EQ(0, b->map(b, va, size, &h));
		ASSERT_EQ(0, b->restore(b, va, host, size));
		ASSERT_EQ(0, b->sync(b));
		ASSERT_TRUE(check_fill(va, size, i));
	}
	/* the backend never allocates pinned memory behind the caller */
	EXPECT_EQ(allocs, self->f.calls("cuMemHostAlloc"));
	EXPECT_EQ(1, stats_of(&self->f).host_allocs);
	EXPECT_EQ(0, stats_of(&self->f).pageable_copies);
	ASSERT_EQ(0, b->unmap(b, va, size, h));
	b->host_free(b, host, size);
	b->unreserve(b, va, size);
}

struct thread_args {
	struct gs_backend *b;
	void *va;
	void *h;
	int ret;
};

static void *map_in_thread(void *arg)
{
	struct thread_args *a = arg;

	a->ret = a->b->map(a->b, a->va, 2 * MiB, &a->h);
	return NULL;
}

/* the agent thread is not the thread that created the backend */
TEST_F(cuda, ops_work_from_another_thread)
{
	struct gs_backend *b = self->b;
	struct thread_args a = { .b = b };
	pthread_t t;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, 2 * MiB, &a.va));
	ASSERT_EQ(0, pthread_create(&t, NULL, map_in_thread, &a));
	ASSERT_EQ(0, pthread_join(t, NULL));
	ASSERT_EQ(0, a.ret);
	ASSERT_EQ(1, stats_of(&self->f).mappings);
	ASSERT_EQ(0, b->unmap(b, a.va, 2 * MiB, a.h));
	b->unreserve(b, a.va, 2 * MiB);
}

/* ------------------------------------------------------- injected faults */

enum op { OP_RESERVE, OP_MAP, OP_UNMAP, OP_HOST_ALLOC, OP_BACKUP, OP_RESTORE,
	  OP_SYNC };

FIXTURE(fault) {
	struct gs_backend *b;
	struct fake f;
};

FIXTURE_SETUP(fault)
{
	backend_up(_metadata, &self->b, &self->f);
}

FIXTURE_TEARDOWN(fault)
{
	backend_down(_metadata, self->b, &self->f);
}

FIXTURE_VARIANT(fault) {
	const char *fn;		/* entry point to fail */
	int code;		/* CUresult it returns */
	enum op op;		/* backend op that calls it */
	int want;		/* -errno the op returns */
};

#define FAULT(name, f, c, o, w) \
	FIXTURE_VARIANT_ADD(fault, name) { .fn = f, .code = c, .op = o, .want = w }

FAULT(reserve_oom, "cuMemAddressReserve", CU_OUT_OF_MEMORY, OP_RESERVE, -ENOMEM);
FAULT(create_oom, "cuMemCreate", CU_OUT_OF_MEMORY, OP_MAP, -ENOMEM);
FAULT(create_invalid, "cuMemCreate", CU_INVALID_VALUE, OP_MAP, -EINVAL);
FAULT(create_not_initialized, "cuMemCreate", CU_NOT_INITIALIZED, OP_MAP, -ENODEV);
FAULT(map_oom, "cuMemMap", CU_OUT_OF_MEMORY, OP_MAP, -ENOMEM);
FAULT(set_access_unknown, "cuMemSetAccess", CU_UNKNOWN, OP_MAP, -EIO);
FAULT(zeroing_unknown, "cuMemsetD32Async", CU_UNKNOWN, OP_MAP, -EIO);
FAULT(zeroing_sync_unknown, "cuStreamSynchronize", CU_UNKNOWN, OP_MAP, -EIO);
FAULT(unmap_not_permitted, "cuMemUnmap", CU_NOT_PERMITTED, OP_UNMAP, -EPERM);
FAULT(release_not_supported, "cuMemRelease", CU_NOT_SUPPORTED, OP_UNMAP, -EOPNOTSUPP);
FAULT(host_alloc_oom, "cuMemHostAlloc", CU_OUT_OF_MEMORY, OP_HOST_ALLOC, -ENOMEM);
FAULT(backup_illegal, "cuMemcpyDtoHAsync", CU_ILLEGAL_ADDRESS, OP_BACKUP, -ENOTRECOVERABLE);
FAULT(restore_illegal, "cuMemcpyHtoDAsync", CU_ILLEGAL_ADDRESS, OP_RESTORE, -ENOTRECOVERABLE);
FAULT(sync_unknown, "cuStreamSynchronize", CU_UNKNOWN, OP_SYNC, -EIO);
FAULT(no_device, "cuMemCreate", CU_NO_DEVICE, OP_MAP, -ENODEV);

/*
 * Set up a mapped range with a pattern and a staging buffer, fail fn once
 * inside op, check the errno and that nothing leaked or changed, then check
 * that the same op works when called again.
 */
TEST_F(fault, op_fails_cleanly)
{
	struct gs_backend *b = self->b;
	struct fakecuda_stats before, after;
	void *va = NULL, *h = NULL, *host = NULL, *va2 = NULL, *host2 = NULL;
	const size_t size = 4 * MiB;
	int ret = 0;

	NEED_BACKEND();
	ASSERT_EQ(0, b->reserve(b, size, &va));
	ASSERT_EQ(0, b->host_alloc(b, size, &host));
	if (variant->op != OP_MAP) {
		ASSERT_EQ(0, b->map(b, va, size, &h));
		fill(va, size, 42);
	}
	if (variant->op == OP_RESTORE)
		fill(host, size, 42);
	before = stats_of(&self->f);
	ASSERT_EQ(0, self->f.fail(variant->fn, 1, 1, variant->code));

	switch (variant->op) {
	case OP_RESERVE:
		ret = b->reserve(b, size, &va2);
		break;
	case OP_MAP:
		ret = b->map(b, va, size, &h);
		break;
	case OP_UNMAP:
		ret = b->unmap(b, va, size, h);
		break;
	case OP_HOST_ALLOC:
		ret = b->host_alloc(b, size, &host2);
		break;
	case OP_BACKUP:
		ret = b->backup(b, host, va, size);
		break;
	case OP_RESTORE:
		ret = b->restore(b, va, host, size);
		break;
	case OP_SYNC:
		ASSERT_EQ(0, b->backup(b, host, va, size));
		before = stats_of(&self->f);
		ret = b->sync(b);
		break;
	}
	ASSERT_EQ(variant->want, ret);

	/* a failed op leaves the stand-in exactly as it found it */
	after = stats_of(&self->f);
	EXPECT_EQ(before.reservations, after.reservations);
	EXPECT_EQ(before.handles, after.handles);
	EXPECT_EQ(before.mappings, after.mappings);
	EXPECT_EQ(before.accessible, after.accessible);
	EXPECT_EQ(before.host_allocs, after.host_allocs);
	if (variant->op == OP_SYNC) {
		/* a failed sync leaves nothing in flight */
		EXPECT_EQ(0, after.pending);
	} else {
		EXPECT_EQ(before.pending, after.pending);
	}
	EXPECT_EQ(0, after.misuse);
	/* a failed unmap keeps the contents */
	if (variant->op == OP_UNMAP)
		EXPECT_TRUE(check_fill(va, size, 42));

	/* the fault fired once: the same op now works */
	switch (variant->op) {
	case OP_RESERVE:
		ASSERT_EQ(0, b->reserve(b, size, &va2));
		b->unreserve(b, va2, size);
		break;
	case OP_MAP:
		ASSERT_EQ(0, b->map(b, va, size, &h));
		ASSERT_TRUE(all_zero(va, size));
		break;
	case OP_UNMAP:
		ASSERT_EQ(0, b->unmap(b, va, size, h));
		h = NULL;
		break;
	case OP_HOST_ALLOC:
		ASSERT_EQ(0, b->host_alloc(b, size, &host2));
		b->host_free(b, host2, size);
		break;
	case OP_BACKUP:
		ASSERT_EQ(0, b->backup(b, host, va, size));
		ASSERT_EQ(0, b->sync(b));
		ASSERT_TRUE(check_fill(host, size, 42));
		break;
	case OP_RESTORE:
		fill(va, size, 0);
		ASSERT_EQ(0, b->restore(b, va, host, size));
		ASSERT_EQ(0, b->sync(b));
		ASSERT_TRUE(check_fill(va, size, 42));
		break;
	case OP_SYNC:
		ASSERT_EQ(0, b->backup(b, host, va, size));
		ASSERT_EQ(0, b->sync(b));
		ASSERT_TRUE(check_fill(host, size, 42));
		break;
	}
	if (h)
		ASSERT_EQ(0, b->unmap(b, va, size, h));
	b->host_free(b, host, size);
	b->unreserve(b, va, size);
}

TEST_HARNESS_MAIN
