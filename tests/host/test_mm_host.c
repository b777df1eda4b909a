// SPDX-License-Identifier: GPL-2.0
/*
 * gs_mm on the host backend, without the module: addresses stay put across
 * pause/resume, memory really goes back to the kernel, BACKUP tags come back
 * identical, DISCARD tags come back as zeros, big tags use few chunks, the
 * backup staging buffer is reused, and a backend failing at any one call
 * leaves the state truthful and leaks nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "libgpusleep.h"
#include "backend.h"
#include "csum.h"

#define MiB (1UL << 20)

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Bytes of [p, p+len) resident in memory now (mincore). */
static size_t resident_bytes(const void *p, size_t len)
{
	size_t pg = page_size();
	uintptr_t start = (uintptr_t)p & ~(pg - 1);
	uintptr_t end = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);
	size_t n = (end - start) / pg, res = 0;
	unsigned char *vec = malloc(n);

	if (!vec)
		return 0;
	if (mincore((void *)start, end - start, vec)) {
		free(vec);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		res += vec[i] & 1;
	free(vec);
	return res * pg;
}

/* Process RSS in bytes (/proc/self/statm, second field). */
static size_t rss_bytes(void)
{
	unsigned long size, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * page_size();
}

static void fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		w[i] = seed ^ (uint32_t)(i * 2654435761u);
}

static bool check(const void *p, size_t len, uint32_t seed)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		if (w[i] != (seed ^ (uint32_t)(i * 2654435761u)))
			return false;
	return true;
}

static bool is_zero(const void *p, size_t len)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < len; i++)
		if (c[i])
			return false;
	return true;
}

/* ------------------------------------------------------------------ */
/* A backend wrapper: counts live objects, fails the Nth int-op.       */

struct wrap_stats {
	long ops;		/* int-returning calls so far */
	long fail_at;		/* 0 = never; else the op number that fails */
	long failed;		/* how many were failed */
	long reservations, mappings, host_allocs;
	size_t mapped_bytes, host_bytes;
	bool destroyed;
	long unmaps;		/* successful unmaps so far */
	long fence_failed_at;	/* ws.unmaps when a fence was failed */
};

static struct wrap_stats ws;

static bool inject(void)
{
	ws.ops++;
	if (ws.fail_at && ws.ops == ws.fail_at) {
		ws.failed++;
		return true;
	}
	return false;
}

static struct gs_backend *inner(struct gs_backend *b)
{
	return b->ctx;
}

static size_t w_gran(struct gs_backend *b)
{
	return inner(b)->granularity(inner(b));
}

static int w_reserve(struct gs_backend *b, size_t size, void **va)
{
	int ret;

	if (inject())
		return -EIO;
	ret = inner(b)->reserve(inner(b), size, va);
	if (!ret)
		ws.reservations++;
	return ret;
}

static void w_unreserve(struct gs_backend *b, void *va, size_t size)
{
	inner(b)->unreserve(inner(b), va, size);
	ws.reservations--;
}

static int w_map(struct gs_backend *b, void *va, size_t size, void **h)
{
	int ret;

	if (inject())
		return -EIO;
	ret = inner(b)->map(inner(b), va, size, h);
	if (!ret) {
		ws.mappings++;
		ws.mapped_bytes += size;
	}
	return ret;
}

static int w_unmap(struct gs_backend *b, void *va, size_t size, void *h)
{
	int ret;

	if (inject())
		return -EIO;
	ret = inner(b)->unmap(inner(b), va, size, h);
	if (!ret) {
		ws.mappings--;
		ws.mapped_bytes -= size;
		ws.unmaps++;
	}
	return ret;
}

static int w_host_alloc(struct gs_backend *b, size_t size, void **host)
{
	int ret;

	if (inject())
		return -EIO;
	ret = inner(b)->host_alloc(inner(b), size, host);
	if (!ret) {
		ws.host_allocs++;
		ws.host_bytes += size;
	}
	return ret;
}

static void w_host_free(struct gs_backend *b, void *host, size_t size)
{
	inner(b)->host_free(inner(b), host, size);
	ws.host_allocs--;
	ws.host_bytes -= size;
}

static int w_backup(struct gs_backend *b, void *host, const void *va, size_t n)
{
	if (inject())
		return -EIO;
	return inner(b)->backup(inner(b), host, va, n);
}

static int w_restore(struct gs_backend *b, void *va, const void *host, size_t n)
{
	if (inject())
		return -EIO;
	return inner(b)->restore(inner(b), va, host, n);
}

static int w_sync(struct gs_backend *b)
{
	if (inject())
		return -EIO;
	return inner(b)->sync(inner(b));
}

/* the host backend has no GPU work to wait for; the wrapper can fail it */
static int w_fence(struct gs_backend *b)
{
	if (inject()) {
		ws.fence_failed_at = ws.unmaps;
		return -EIO;
	}
	return inner(b)->fence ? inner(b)->fence(inner(b)) : 0;
}

static void w_destroy(struct gs_backend *b)
{
	inner(b)->destroy(inner(b));
	free(b);
	ws.destroyed = true;
}

static struct gs_backend *wrap_new(long fail_at)
{
	struct gs_backend *b = calloc(1, sizeof(*b));

	memset(&ws, 0, sizeof(ws));
	ws.fail_at = fail_at;
	if (!b)
		return NULL;
	b->ctx = gs_backend_host_new();
	if (!b->ctx) {
		free(b);
		return NULL;
	}
	b->name = "wrap";
	b->granularity = w_gran;
	b->reserve = w_reserve;
	b->unreserve = w_unreserve;
	b->map = w_map;
	b->unmap = w_unmap;
	b->host_alloc = w_host_alloc;
	b->host_free = w_host_free;
	b->fence = w_fence;
	b->backup = w_backup;
	b->restore = w_restore;
	b->sync = w_sync;
	b->destroy = w_destroy;
	return b;
}

/* ------------------------------------------------------------------ */

TEST(host_backend_same_va_and_rss)
{
	struct gs_backend *b = gs_backend_host_new();
	size_t len = 64 * MiB, before, after;
	void *va, *h;

	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, b->reserve(b, len, &va));
	ASSERT_EQ(0, b->map(b, va, len, &h));
	ASSERT_TRUE(is_zero(va, len));
	fill(va, len, 1);
	before = resident_bytes(va, len);
	ASSERT_GE(before, len * 95 / 100);
	ASSERT_EQ(0, b->unmap(b, va, len, h));
	after = resident_bytes(va, len);
	/* the range's pages went back to the kernel */
	EXPECT_LE(after, len * 5 / 100);
	/* the range is still ours: nothing else can be mapped there */
	void *again = mmap(va, page_size(), PROT_READ,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	EXPECT_EQ(MAP_FAILED, again);
	ASSERT_EQ(0, b->map(b, va, len, &h));
	EXPECT_TRUE(is_zero(va, len));
	fill(va, len, 2);
	EXPECT_TRUE(check(va, len, 2));
	ASSERT_EQ(0, b->unmap(b, va, len, h));
	b->unreserve(b, va, len);
	b->destroy(b);
}

/*
 * The host backend keeps /proc/self/statm open for its measures: a forked
 * child measures its own memory, not its parent's.
 */
TEST(host_mem_info_follows_a_fork)
{
	struct gs_backend *b = gs_backend_host_new();
	uint64_t free0, free1, total;
	int st;
	pid_t pid;

	ASSERT_NE(NULL, b);
	ASSERT_EQ(0, b->mem_info(b, &free0, &total));	/* opened here */
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		size_t len = 32 * MiB;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED || b->mem_info(b, &free0, &total))
			_exit(2);
		memset(p, 1, len);
		if (b->mem_info(b, &free1, &total))
			_exit(2);
		/* the child's 32 MiB show, whatever the parent holds */
		_exit(free0 - free1 >= 16 * MiB ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	b->destroy(b);
}

TEST(cuda_backend_absent_or_present)
{
	int err = 0;
	struct gs_backend *b = gs_backend_cuda_new(0, "/nonexistent/libcuda.so.1",
						   &err);

	/* never a backend from a library that does not exist */
	EXPECT_EQ(NULL, b);
	EXPECT_LT(err, 0);
}

FIXTURE(mm) {
	struct gs_mm *mm;
};

FIXTURE_SETUP(mm)
{
	ASSERT_EQ(0, gs_mm_new(gs_backend_host_new(), &self->mm));
}

FIXTURE_TEARDOWN(mm)
{
	gs_mm_destroy(self->mm);
}

TEST_F(mm, backup_round_trip_same_pointers)
{
	struct gs_mm_tag_info info;
	const size_t n = 8, sz = 4 * MiB + 1000;
	void *p[8];
	uint64_t bytes = 0;

	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 0));
	for (size_t i = 0; i < n; i++) {
		p[i] = gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, sz);
		ASSERT_NE(NULL, p[i]);
		EXPECT_EQ(0, (uintptr_t)p[i] % GS_MM_ALIGN);
		EXPECT_EQ(GPUSLEEP_TAG_WEIGHTS, gs_mm_tag_of(self->mm, p[i]));
		fill(p[i], sz, (uint32_t)i + 100);
	}
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	ASSERT_EQ(0, gs_mm_pause(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
	EXPECT_EQ(info.chunk_bytes, bytes);
	for (size_t i = 0; i < n; i++)
		EXPECT_LE(resident_bytes(p[i], sz), page_size());
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(1, info.paused);
	EXPECT_EQ(0, info.mapped_bytes);
	/* no allocations on a sleeping tag; the other tag is unaffected */
	errno = 0;
	EXPECT_EQ(NULL, gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, 100));
	EXPECT_EQ(EBUSY, errno);
	EXPECT_EQ(-EALREADY, gs_mm_pause(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
	EXPECT_EQ(-EBUSY, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
					   GS_MM_DISCARD, 0));

	ASSERT_EQ(0, gs_mm_resume(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
	EXPECT_EQ(info.chunk_bytes, bytes);
	for (size_t i = 0; i < n; i++) {
		EXPECT_TRUE(check(p[i], sz, (uint32_t)i + 100));
		fill(p[i], sz, (uint32_t)i + 200);	/* still writable */
		EXPECT_TRUE(check(p[i], sz, (uint32_t)i + 200));
	}
	EXPECT_EQ(-EALREADY, gs_mm_resume(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
	for (size_t i = 0; i < n; i++)
		EXPECT_EQ(0, gs_mm_free(self->mm, p[i]));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(0, info.nr_allocs);
	/* a free never unmaps: the empty chunks stay, a cache ... */
	EXPECT_NE(0, info.nr_chunks);
	EXPECT_EQ(info.chunk_bytes, info.mapped_bytes);
	/* ... until a fenced point gives them back */
	ASSERT_EQ(0, gs_mm_trim(self->mm, 0, &bytes));
	EXPECT_EQ(info.chunk_bytes, bytes);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(0, info.nr_chunks);
	EXPECT_EQ(0, info.staging_bytes);
}

TEST_F(mm, discard_reads_zero_and_rss_falls)
{
	struct gs_mm_tag_info info;
	const size_t sz = 32 * MiB;
	char *kv, *w;
	uint64_t bytes = 0;
	size_t rss0, rss1;

	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_KV_CACHE,
				      GS_MM_DISCARD, 64 * MiB));
	kv = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, sz);
	ASSERT_NE(NULL, kv);
	w = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, sz);
	ASSERT_NE(NULL, w);
	fill(kv, sz, 7);
	fill(w, sz, 8);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(1, info.nr_chunks);	/* both fit the 64 MiB chunk */
	rss0 = rss_bytes();
	ASSERT_EQ(0, gs_mm_pause(self->mm, GPUSLEEP_TAG_KV_CACHE, &bytes));
	rss1 = rss_bytes();
	EXPECT_EQ(64 * MiB, bytes);
	EXPECT_GE(rss0 - rss1, bytes * 95 / 100)
		TH_LOG("RSS %zu -> %zu, released %lu", rss0, rss1,
		       (unsigned long)bytes);
	ASSERT_EQ(0, gs_mm_resume(self->mm, GPUSLEEP_TAG_KV_CACHE, &bytes));
	EXPECT_TRUE(is_zero(kv, sz));
	EXPECT_TRUE(is_zero(w, sz));
	fill(kv, sz, 9);
	EXPECT_TRUE(check(kv, sz, 9));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(NULL, info.staging);	/* DISCARD never stages */
	EXPECT_EQ(0, info.lost);
}

/*
 * Issue 34 defect 3: a throughput divides the bytes the copies moved,
 * not the chunks' size (the slack and the free blocks are not copied),
 * and a call that copied nothing says 0.
 */
TEST_F(mm, copied_bytes_are_the_bytes_copied)
{
	const size_t sz = MiB + 1000, live = 3 * (MiB + 1024);
	struct gs_mm_result r;
	void *p[4];

	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 0));
	for (int i = 0; i < 4; i++)
		ASSERT_NE(NULL, p[i] = gs_mm_alloc(self->mm,
						   GPUSLEEP_TAG_WEIGHTS, sz));
	ASSERT_EQ(0, gs_mm_free(self->mm, p[1]));	/* a hole: not copied */
	ASSERT_NE(NULL, gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, sz));
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(16 * MiB, r.bytes);		/* the chunk, unmapped */
	EXPECT_EQ(live, r.copied_bytes);	/* what the backup moved */
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(live, r.copied_bytes);
	/* discarded: nothing copied either way */
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, GPUSLEEP_TAG_KV_CACHE, &r));
	EXPECT_EQ(16 * MiB, r.bytes);
	EXPECT_EQ(0, r.copied_bytes);
	EXPECT_EQ(0, r.copy_ns);
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, GPUSLEEP_TAG_KV_CACHE, &r));
	EXPECT_EQ(0, r.copied_bytes);
	EXPECT_EQ(0, r.copy_ns);
}

TEST_F(mm, big_tag_few_chunks)
{
	struct gs_mm_tag_info info;
	void *p;

	/* 256 MiB in 1 MiB pieces: 16+32+64+128+256 MiB chunks at most */
	for (int i = 0; i < 256; i++) {
		p = gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, MiB);
		ASSERT_NE(NULL, p);
	}
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(256, info.nr_allocs);
	EXPECT_EQ(256 * MiB, info.used_bytes);
	EXPECT_LE(info.nr_chunks, 5);
	/* an allocation larger than the next chunk gets its own, exact size */
	p = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, 100 * MiB);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(1, info.nr_chunks);
	EXPECT_EQ(100 * MiB, info.chunk_bytes);
}

TEST_F(mm, staging_reused_across_cycles)
{
	struct gs_mm_tag_info info;
	void *staging = NULL;
	uint64_t bytes;
	char *p;

	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 8 * MiB));
	p = gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, 6 * MiB);
	ASSERT_NE(NULL, p);
	for (int cycle = 0; cycle < 4; cycle++) {
		fill(p, 6 * MiB, (uint32_t)cycle);
		ASSERT_EQ(0, gs_mm_pause(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
		ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
		ASSERT_NE(NULL, info.staging);
		if (!cycle)
			staging = info.staging;
		EXPECT_EQ(staging, info.staging);
		EXPECT_EQ(8 * MiB, info.staging_bytes);
		ASSERT_EQ(0, gs_mm_resume(self->mm, GPUSLEEP_TAG_WEIGHTS, &bytes));
		EXPECT_TRUE(check(p, 6 * MiB, (uint32_t)cycle));
	}
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(4, info.pauses);
	EXPECT_EQ(4, info.resumes);
}

TEST_F(mm, free_while_paused_and_bad_frees)
{
	struct gs_mm_tag_info info;
	uint64_t bytes;
	char local;
	void *a, *b;

	a = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, 1000);
	b = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, 1000);
	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	EXPECT_EQ(-EINVAL, gs_mm_free(self->mm, &local));
	EXPECT_EQ(-EINVAL, gs_mm_free(self->mm, (char *)a + 8));
	EXPECT_EQ(0, gs_mm_tag_of(self->mm, &local));
	ASSERT_EQ(0, gs_mm_pause(self->mm, GPUSLEEP_TAG_KV_CACHE, &bytes));
	EXPECT_EQ(0, gs_mm_free(self->mm, a));
	EXPECT_EQ(-EINVAL, gs_mm_free(self->mm, a));	/* double free */
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(1, info.paused);
	EXPECT_EQ(1, info.nr_allocs);
	EXPECT_EQ(0, gs_mm_free(self->mm, b));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(0, info.nr_chunks);
	EXPECT_EQ(0, info.paused);	/* nothing left asleep */
	EXPECT_EQ(-EINVAL, gs_mm_pause(self->mm, GPUSLEEP_TAG_ALL, &bytes));
	EXPECT_EQ(-EINVAL, gs_mm_set_policy(self->mm, 0, GS_MM_BACKUP, 0));
	errno = 0;
	EXPECT_EQ(NULL, gs_mm_alloc(self->mm, 1U << GPUSLEEP_MAX_TAGS, 10));
	EXPECT_EQ(EINVAL, errno);
}

/*
 * Issue 34 item 6: with verification on (GPUSLEEP_VERIFY=1, or
 * gs_mm_set_verify), a backup whose host copy changed between the pause
 * and the resume is never restored as if it were the tag's contents: the
 * resume fails with EBADMSG, nothing mapped, the tag still released and
 * its contents said lost; the next resume maps it fresh (zeros), saying
 * again what was lost, never the corrupted bytes.
 */
TEST(verify_corrupted_staging_fails_the_resume)
{
	const size_t sz = 3 * MiB;
	struct gs_mm_tag_info info;
	struct gs_mm_result r;
	struct gs_mm *mm;
	char *p, *q, *host = NULL;

	ASSERT_EQ(0, setenv("GPUSLEEP_VERIFY", "1", 1));
	ASSERT_EQ(0, gs_mm_new(gs_backend_host_new(), &mm));
	unsetenv("GPUSLEEP_VERIFY");
	ASSERT_EQ(0, gs_mm_set_policy(mm, GPUSLEEP_TAG_WEIGHTS, GS_MM_BACKUP,
				      8 * MiB));
	p = gs_mm_alloc(mm, GPUSLEEP_TAG_WEIGHTS, sz);
	q = gs_mm_alloc(mm, GPUSLEEP_TAG_WEIGHTS, sz);
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, q);
	fill(p, sz, 11);
	fill(q, sz, 12);
	ASSERT_EQ(0, gs_mm_pause_ex(mm, GPUSLEEP_TAG_WEIGHTS, &r));
	/* one byte of the host copy changes while the tag is released */
	ASSERT_EQ(0, gs_mm_backup_ptr(mm, q + 12345, 1, (void **)&host));
	ASSERT_NE(NULL, host);
	*host ^= 0x10;

	EXPECT_EQ(-EBADMSG, gs_mm_resume_ex(mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(-EBADMSG, r.status);
	EXPECT_EQ(8 * MiB, r.lost_bytes);	/* the chunk's contents */
	ASSERT_EQ(0, gs_mm_tag_info(mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(1, info.paused);		/* still released ... */
	EXPECT_EQ(0, info.mapped_bytes);	/* ... nothing mapped */
	EXPECT_EQ(1, info.lost);
	EXPECT_EQ(GS_MM_CONTENT_ZEROED, info.content);	/* what comes back */
	EXPECT_NE(0, r.flags & GS_MM_RES_VERIFY_FAILED);

	/* the next resume maps it fresh: zeros, the loss said again */
	ASSERT_EQ(0, gs_mm_resume_ex(mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(8 * MiB, r.lost_bytes);
	EXPECT_EQ(0, r.copied_bytes);
	EXPECT_TRUE(is_zero(p, sz));
	EXPECT_TRUE(is_zero(q, sz));
	ASSERT_EQ(0, gs_mm_tag_info(mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(0, info.paused);

	/* reloaded, the next cycle keeps it again */
	fill(p, sz, 21);
	fill(q, sz, 22);
	ASSERT_EQ(0, gs_mm_pause_ex(mm, GPUSLEEP_TAG_WEIGHTS, &r));
	ASSERT_EQ(0, gs_mm_resume_ex(mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(0, r.lost_bytes);
	EXPECT_TRUE(check(p, sz, 21));
	EXPECT_TRUE(check(q, sz, 22));
	gs_mm_destroy(mm);
}

/*
 * The checksum: a flipped bit anywhere (each lane, the tail) changes it,
 * and the CPU's CRC instruction and the table agree.
 */
TEST(csum_sees_every_flipped_bit)
{
	static const size_t lens[] = { 0, 1, 7, 23, 24, 25, 48, 1000, 4099 };
	unsigned char *buf = malloc(4099);

	ASSERT_NE(NULL, buf);
	for (size_t i = 0; i < 4099; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		size_t n = lens[l];
		uint64_t s0 = gs_csum(buf, n);

		EXPECT_EQ(s0, gs_csum_table(buf, n));
		for (size_t i = 0; i < n; i++)
			for (int bit = 0; bit < 8; bit += 3) {
				buf[i] ^= (unsigned char)(1u << bit);
				if (gs_csum(buf, n) == s0)
					TH_LOG("len %zu: byte %zu bit %d unseen",
					       n, i, bit);
				EXPECT_NE(s0, gs_csum(buf, n));
				buf[i] ^= (unsigned char)(1u << bit);
			}
		EXPECT_EQ(s0, gs_csum(buf, n));
	}
	/* the length counts: a zero byte more is another sum */
	memset(buf, 0, 64);
	EXPECT_NE(gs_csum(buf, 48), gs_csum(buf, 49));
	free(buf);
}

/*
 * Verification switched on by the API: a cycle that changed nothing says
 * it was checked (pause: summed, resume: matched) and what it cost; the
 * tag says it is kept and verified. Off, nothing is summed.
 */
TEST_F(mm, verify_by_the_api_says_what_it_checked)
{
	struct gs_mm_tag_info info;
	struct gs_mm_result r;
	void *p;

	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 0));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_KV_CACHE,
				      GS_MM_DISCARD, 0));
	p = gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, 2 * MiB);
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, MiB));
	fill(p, 2 * MiB, 5);
	EXPECT_FALSE(gs_mm_verify(self->mm));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(GS_MM_CONTENT_KEPT, info.content);
	EXPECT_EQ(0, info.verified);
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(0, r.flags & GS_MM_RES_VERIFIED);
	EXPECT_EQ(0, r.verify_bytes);
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(0, r.flags & GS_MM_RES_VERIFIED);

	ASSERT_EQ(0, gs_mm_set_verify(self->mm, true));
	EXPECT_TRUE(gs_mm_verify(self->mm));
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(1, info.verified);
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_NE(0, r.flags & GS_MM_RES_VERIFIED);
	EXPECT_EQ(2 * MiB, r.verify_bytes);	/* what was copied */
	EXPECT_EQ(r.copied_bytes, r.verify_bytes);
	EXPECT_NE(0, r.verify_ns);
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(GS_MM_CONTENT_KEPT, info.content);
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_NE(0, r.flags & GS_MM_RES_VERIFIED);
	EXPECT_EQ(0, r.flags & GS_MM_RES_VERIFY_FAILED);
	EXPECT_EQ(2 * MiB, r.verify_bytes);
	EXPECT_EQ(0, r.lost_bytes);
	EXPECT_TRUE(check(p, 2 * MiB, 5));

	/* a discarded tag has nothing to check, and comes back zeroed */
	ASSERT_EQ(0, gs_mm_tag_info(self->mm, GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(GS_MM_CONTENT_ZEROED, info.content);
	EXPECT_EQ(0, info.verified);
	ASSERT_EQ(0, gs_mm_pause_ex(self->mm, GPUSLEEP_TAG_KV_CACHE, &r));
	EXPECT_EQ(0, r.flags & GS_MM_RES_VERIFIED);
	ASSERT_EQ(0, gs_mm_resume_ex(self->mm, GPUSLEEP_TAG_KV_CACHE, &r));
	EXPECT_EQ(0, r.verify_bytes);
}

/* A domain may declare up to GPUSLEEP_MAX_TAGS tags: each bit is a tag. */
TEST_F(mm, every_declarable_tag_bit)
{
	uint32_t last = 1U << (GPUSLEEP_MAX_TAGS - 1);
	uint64_t bytes = 0;
	void *p;

	p = gs_mm_alloc(self->mm, last, 4096);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(last, gs_mm_tag_of(self->mm, p));
	ASSERT_EQ(0, gs_mm_pause(self->mm, last, &bytes));
	EXPECT_LE(4096, bytes);
	ASSERT_EQ(0, gs_mm_resume(self->mm, last, &bytes));
	EXPECT_EQ(0, gs_mm_free(self->mm, p));
}

/* ------------------------------------------------------------------ */
/* Fail each backend call of a full cycle in turn.                     */

struct world {
	struct gs_mm *mm;
	void *w[4];
	void *kv[2];
};

#define W_SZ	(3 * MiB)
#define KV_SZ	(2 * MiB)

/* Live backend objects agree with what the mm says it holds. */
static bool consistent(struct gs_mm *mm)
{
	struct gs_mm_tag_info a, b;

	gs_mm_tag_info(mm, GPUSLEEP_TAG_WEIGHTS, &a);
	gs_mm_tag_info(mm, GPUSLEEP_TAG_KV_CACHE, &b);
	return ws.reservations == (long)(a.nr_chunks + b.nr_chunks) &&
	       ws.mapped_bytes == a.mapped_bytes + b.mapped_bytes &&
	       ws.host_bytes == a.staging_bytes + b.staging_bytes;
}

enum step_kind { ST_PAUSE, ST_RESUME };

/*
 * One step that may hit the injected failure. On failure: the tag's state is
 * what it was before (the single failure is always undone), the books agree
 * with the backend, and the step then succeeds on retry.
 */
static int step(struct __test_metadata *_metadata, struct world *wd,
		enum step_kind k, uint32_t tag)
{
	struct gs_mm_tag_info info;
	uint64_t bytes;
	long failed = ws.failed, unmaps = ws.unmaps;
	int ret;

	ws.fence_failed_at = -1;
	ret = k == ST_PAUSE ? gs_mm_pause(wd->mm, tag, &bytes) :
			      gs_mm_resume(wd->mm, tag, &bytes);
	gs_mm_tag_info(wd->mm, tag, &info);
	EXPECT_TRUE(consistent(wd->mm));
	if (ret && k == ST_PAUSE && ws.fence_failed_at > unmaps) {
		/*
		 * The synchronisation after the unmaps failed (on a GPU: a
		 * kernel faulted on what was unmapped): the pause fails,
		 * and the tag is what it is, unmapped.
		 */
		EXPECT_EQ(-EIO, ret);
		EXPECT_EQ(1, info.paused);
		EXPECT_EQ(0, info.mapped_bytes);
	} else if (ret) {
		EXPECT_EQ(-EIO, ret);
		EXPECT_EQ(failed + 1, ws.failed);
		/* truthful: still in the state it was in */
		EXPECT_EQ(k == ST_PAUSE ? 0U : 1U, info.paused);
		EXPECT_EQ(k == ST_PAUSE ? info.chunk_bytes : 0, info.mapped_bytes);
		if (k == ST_PAUSE && tag == GPUSLEEP_TAG_WEIGHTS)
			for (int i = 0; i < 4; i++)
				EXPECT_TRUE(check(wd->w[i], W_SZ, (uint32_t)i));
		ret = k == ST_PAUSE ? gs_mm_pause(wd->mm, tag, &bytes) :
				      gs_mm_resume(wd->mm, tag, &bytes);
		EXPECT_EQ(0, ret);
		gs_mm_tag_info(wd->mm, tag, &info);
		EXPECT_TRUE(consistent(wd->mm));
	}
	EXPECT_EQ(k == ST_PAUSE ? 1U : 0U, info.paused);
	return ret;
}

/* Returns the number of backend ops a full run took. */
static long run_world(struct __test_metadata *_metadata, long fail_at)
{
	struct world wd = { 0 };
	bool alloc_failed = false;
	long ops;

	ASSERT_EQ(0, gs_mm_new(wrap_new(fail_at), &wd.mm));
	/* unbounded fences run in this thread: no fence thread per world */
	ASSERT_EQ(0, gs_mm_set_fence_timeout(wd.mm, 0));
	ASSERT_EQ(0, gs_mm_set_policy(wd.mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 4 * MiB));
	ASSERT_EQ(0, gs_mm_set_policy(wd.mm, GPUSLEEP_TAG_KV_CACHE,
				      GS_MM_DISCARD, 2 * MiB));
	for (int i = 0; i < 4 && !alloc_failed; i++) {
		wd.w[i] = gs_mm_alloc(wd.mm, GPUSLEEP_TAG_WEIGHTS, W_SZ);
		if (!wd.w[i]) {
			EXPECT_EQ(EIO, errno);
			alloc_failed = true;
		} else {
			fill(wd.w[i], W_SZ, (uint32_t)i);
		}
	}
	for (int i = 0; i < 2 && !alloc_failed; i++) {
		wd.kv[i] = gs_mm_alloc(wd.mm, GPUSLEEP_TAG_KV_CACHE, KV_SZ);
		if (!wd.kv[i]) {
			EXPECT_EQ(EIO, errno);
			alloc_failed = true;
		} else {
			fill(wd.kv[i], KV_SZ, 50 + (uint32_t)i);
		}
	}
	EXPECT_TRUE(consistent(wd.mm));
	if (!alloc_failed) {
		struct gs_mm_tag_info info;

		gs_mm_tag_info(wd.mm, GPUSLEEP_TAG_WEIGHTS, &info);
		EXPECT_EQ(3, info.nr_chunks);	/* 4 + 8 + 16 MiB */
		step(_metadata, &wd, ST_PAUSE, GPUSLEEP_TAG_WEIGHTS);
		step(_metadata, &wd, ST_PAUSE, GPUSLEEP_TAG_KV_CACHE);
		step(_metadata, &wd, ST_RESUME, GPUSLEEP_TAG_WEIGHTS);
		step(_metadata, &wd, ST_RESUME, GPUSLEEP_TAG_KV_CACHE);
		for (int i = 0; i < 4; i++)
			EXPECT_TRUE(check(wd.w[i], W_SZ, (uint32_t)i));
		for (int i = 0; i < 2; i++)
			EXPECT_TRUE(is_zero(wd.kv[i], KV_SZ));
		/* a second cycle reuses staging: no host_alloc to fail */
		step(_metadata, &wd, ST_PAUSE, GPUSLEEP_TAG_WEIGHTS);
		step(_metadata, &wd, ST_RESUME, GPUSLEEP_TAG_WEIGHTS);
		for (int i = 0; i < 4; i++)
			EXPECT_TRUE(check(wd.w[i], W_SZ, (uint32_t)i));
		for (int i = 0; i < 4; i++)
			EXPECT_EQ(0, gs_mm_free(wd.mm, wd.w[i]));
		EXPECT_TRUE(consistent(wd.mm));
	}
	ops = ws.ops;
	gs_mm_destroy(wd.mm);
	/* nothing leaked: every reservation, mapping, staging buffer gone */
	EXPECT_TRUE(ws.destroyed);
	EXPECT_EQ(0, ws.reservations);
	EXPECT_EQ(0, ws.mappings);
	EXPECT_EQ(0, ws.host_allocs);
	EXPECT_EQ(0, ws.mapped_bytes);
	EXPECT_EQ(fail_at ? 1 : 0, ws.failed);
	return ops;
}

TEST(fail_each_backend_call)
{
	long total = run_world(_metadata, 0);

	ASSERT_GT(total, 20);
	for (long n = 1; n <= total; n++) {
		run_world(_metadata, n);
		if (!_metadata->passed) {
			TH_LOG("failing backend call #%ld of %ld", n, total);
			break;
		}
	}
}

TEST_HARNESS_MAIN
