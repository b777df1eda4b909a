// SPDX-License-Identifier: GPL-2.0
/*
 * The PyTorch pluggable allocator entry points on the host backend
 * (GPUSLEEP_BACKEND=host): tags follow gpusleep_set_tag(), per thread, and
 * the per-tag entry points; the policies follow GPUSLEEP_BACKUP_TAGS, bad
 * input is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"

#include "libgpusleep.h"

TEST(torch_entry_points)
{
	struct gs_mm_tag_info info;
	uint64_t bytes;
	char *w, *kv;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_BACKUP_TAGS", "weights", 1));
	EXPECT_EQ(NULL, gpusleep_mm());
	EXPECT_EQ(-1, gpusleep_device());	/* no memory manager yet */
	EXPECT_EQ(-ENOENT, gpusleep_agent_start(1));	/* nothing to serve */

	w = gpusleep_malloc(1 << 20, 0, NULL);	/* default tag: weights */
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, gpusleep_mm());
	EXPECT_EQ(GPUSLEEP_TAG_WEIGHTS, gs_mm_tag_of(gpusleep_mm(), w));
	EXPECT_EQ(0, gpusleep_set_tag("kv_cache"));
	kv = gpusleep_malloc(1 << 20, 0, NULL);
	ASSERT_NE(NULL, kv);
	EXPECT_EQ(GPUSLEEP_TAG_KV_CACHE, gs_mm_tag_of(gpusleep_mm(), kv));
	EXPECT_EQ(-EINVAL, gpusleep_set_tag("weights,kv_cache"));
	EXPECT_EQ(-EINVAL, gpusleep_set_tag("cuda_graph"));
	EXPECT_EQ(-EINVAL, gpusleep_set_tag(NULL));
	/* one device per process, the adapter asks which (issue 21) */
	EXPECT_EQ(0, gpusleep_device());
	EXPECT_EQ(NULL, gpusleep_malloc(4096, 1, NULL));
	EXPECT_EQ(NULL, gpusleep_malloc(-1, 0, NULL));

	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(GS_MM_BACKUP, info.policy);
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), GPUSLEEP_TAG_KV_CACHE, &info));
	EXPECT_EQ(GS_MM_DISCARD, info.policy);

	memset(w, 0x5a, 1 << 20);
	ASSERT_EQ(0, gs_mm_pause(gpusleep_mm(), GPUSLEEP_TAG_WEIGHTS, &bytes));
	ASSERT_EQ(0, gs_mm_resume(gpusleep_mm(), GPUSLEEP_TAG_WEIGHTS, &bytes));
	EXPECT_EQ(0x5a, w[0]);
	EXPECT_EQ(0x5a, w[(1 << 20) - 1]);

	gpusleep_free(w, 1 << 20, 0, NULL);
	gpusleep_free(kv, 1 << 20, 0, NULL);
	gpusleep_free(NULL, 0, 0, NULL);
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), GPUSLEEP_TAG_WEIGHTS, &info));
	EXPECT_EQ(0, info.nr_allocs);
	EXPECT_EQ(-EINVAL, gpusleep_agent_stop());
	{
		struct gs_agent_result r;

		EXPECT_EQ(-ENOENT, gpusleep_agent_last_result(
			GPUSLEEP_TAG_WEIGHTS, &r));	/* no agent */
	}
}

struct tagged {
	const char *tag;
	void *p;
	uint32_t got;
};

static void *alloc_in_thread(void *arg)
{
	struct tagged *t = arg;

	if (t->tag && gpusleep_set_tag(t->tag))
		return NULL;
	t->p = gpusleep_malloc(4096, 0, NULL);
	if (t->p)
		t->got = gs_mm_tag_of(gpusleep_mm(), t->p);
	return NULL;
}

/*
 * Issue 15: the tag is per thread (a region on one thread does not move
 * another thread's allocations), and each tag has an entry point of its
 * own for a MemPool whose allocations may come from any thread.
 */
TEST(tag_is_per_thread)
{
	struct tagged kv = { .tag = "kv_cache" }, dflt = { 0 };
	pthread_t a, b;
	void *w, *k;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	ASSERT_EQ(0, gpusleep_set_tag("kv_cache"));
	ASSERT_EQ(0, pthread_create(&b, NULL, alloc_in_thread, &dflt));
	ASSERT_EQ(0, pthread_join(b, NULL));
	ASSERT_NE(NULL, dflt.p);
	/* this thread's kv_cache does not leak into another thread */
	EXPECT_EQ(GPUSLEEP_TAG_WEIGHTS, dflt.got);
	ASSERT_EQ(0, gpusleep_set_tag("weights"));
	ASSERT_EQ(0, pthread_create(&a, NULL, alloc_in_thread, &kv));
	ASSERT_EQ(0, pthread_join(a, NULL));
	ASSERT_NE(NULL, kv.p);
	EXPECT_EQ(GPUSLEEP_TAG_KV_CACHE, kv.got);

	w = gpusleep_malloc_weights(8192, 0, NULL);
	k = gpusleep_malloc_kv_cache(8192, 0, NULL);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, k);
	EXPECT_EQ(GPUSLEEP_TAG_WEIGHTS, gs_mm_tag_of(gpusleep_mm(), w));
	EXPECT_EQ(GPUSLEEP_TAG_KV_CACHE, gs_mm_tag_of(gpusleep_mm(), k));
	gpusleep_free(w, 8192, 0, NULL);
	gpusleep_free(k, 8192, 0, NULL);
	gpusleep_free(kv.p, 4096, 0, NULL);
	gpusleep_free(dflt.p, 4096, 0, NULL);
}

/* The engine's own tags: names and bits from gpusleep_declare_tags(). */
TEST(torch_declared_tags)
{
	struct gs_mm_tag_info info;
	char *g, *g2;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_BACKUP_TAGS", "weights,cuda_graph", 1));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags(""));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags("a,,b"));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags("a,"));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags("a,b,c,d,e,f,g,h,i"));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags("sixteen_chars_xx"));
	EXPECT_EQ(-EINVAL, gpusleep_declare_tags(NULL));
	/* before a declaration, only the default names exist */
	EXPECT_EQ(-EINVAL, gpusleep_set_tag("cuda_graph"));
	ASSERT_EQ(0, gpusleep_declare_tags("weights,kv_cache,cuda_graph"));
	ASSERT_EQ(0, gpusleep_set_tag("cuda_graph"));
	g = gpusleep_malloc(4096, 0, NULL);
	ASSERT_NE(NULL, g);
	EXPECT_EQ(1U << 2, gs_mm_tag_of(gpusleep_mm(), g));
	g2 = gpusleep_malloc_tag2(4096, 0, NULL);
	ASSERT_NE(NULL, g2);
	EXPECT_EQ(1U << 2, gs_mm_tag_of(gpusleep_mm(), g2));
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), 1U << 2, &info));
	EXPECT_EQ(GS_MM_BACKUP, info.policy);	/* named in BACKUP_TAGS */
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), GPUSLEEP_TAG_KV_CACHE,
				    &info));
	EXPECT_EQ(GS_MM_DISCARD, info.policy);
	/* memory is filed by bit: too late to rename */
	EXPECT_EQ(-EBUSY, gpusleep_declare_tags("a,b"));
	gpusleep_free(g, 4096, 0, NULL);
	gpusleep_free(g2, 4096, 0, NULL);
}

/*
 * torch_memory_saver's callers name any tag: declared on first use, the
 * default declaration giving way to the first name, 8 at most, none once
 * frozen (the domain's declaration is made).
 */
TEST(tags_on_first_use)
{
	char names[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN];
	static const char *const more[] = { "t4", "t5", "t6", "t7" };
	void *p, *q;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	EXPECT_EQ(-ENOENT, gpusleep_tag_bit("weights_drafter", 0));
	EXPECT_EQ(1, gpusleep_tag_bit("kv_cache", 0));	/* the default's */
	EXPECT_EQ(0, gpusleep_tag_bit("weights_drafter", 1));
	EXPECT_EQ(0, gpusleep_tag_bit("weights_drafter", 1));
	EXPECT_EQ(-ENOENT, gpusleep_tag_bit("kv_cache", 0));	/* gave way */
	EXPECT_EQ(1, gpusleep_tag_bit("default", 1));
	EXPECT_EQ(2, gpusleep_tag_names(names, sizeof(names)));
	EXPECT_STREQ("weights_drafter,default", names);
	EXPECT_EQ(-ENOSPC, gpusleep_tag_names(names, 8));
	EXPECT_EQ(2, gpusleep_tag_bit("weights", 1));
	EXPECT_EQ(-EINVAL, gpusleep_tag_bit("Weights", 1));
	EXPECT_EQ(-EINVAL, gpusleep_tag_bit("", 1));
	EXPECT_EQ(-EINVAL, gpusleep_tag_bit("a-b", 1));
	EXPECT_EQ(-EINVAL, gpusleep_tag_bit("sixteen_chars_xx", 1));
	EXPECT_EQ(-EINVAL, gpusleep_tag_bit(NULL, 1));
	p = gpusleep_malloc_bit(1, 4096, 0, NULL);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(1U << 1, gs_mm_tag_of(gpusleep_mm(), p));
	EXPECT_EQ(NULL, gpusleep_malloc_bit(GPUSLEEP_MAX_TAGS, 4096, 0, NULL));
	/* memory exists: a new name still takes a free bit */
	EXPECT_EQ(3, gpusleep_tag_bit("cuda_graph", 1));
	q = gpusleep_malloc_bit(3, 4096, 0, NULL);
	ASSERT_NE(NULL, q);
	EXPECT_EQ(1U << 3, gs_mm_tag_of(gpusleep_mm(), q));
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(4 + i, gpusleep_tag_bit(more[i], 1));
	EXPECT_EQ(-ENOSPC, gpusleep_tag_bit("t8", 1));
	EXPECT_EQ(7, gpusleep_tag_bit("t7", 1));	/* known: still fine */
	gpusleep_free(p, 4096, 0, NULL);
	gpusleep_free(q, 4096, 0, NULL);
}

/* The default's own name declared first: the default gives way too. */
TEST(default_gives_way_to_its_own_name)
{
	char names[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN];

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	EXPECT_EQ(0, gpusleep_tag_bit("weights", 1));
	EXPECT_EQ(1, gpusleep_tag_bit("cuda_graph", 1));
	EXPECT_EQ(2, gpusleep_tag_names(names, sizeof(names)));
	EXPECT_STREQ("weights,cuda_graph", names);
}

TEST(tags_frozen)
{
	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	EXPECT_EQ(0, gpusleep_tag_bit("default", 1));
	EXPECT_EQ(0, gpusleep_freeze_tags());
	EXPECT_EQ(-EBUSY, gpusleep_tag_bit("weights_drafter", 1));
	EXPECT_EQ(0, gpusleep_tag_bit("default", 1));
	EXPECT_EQ(-EBUSY, gpusleep_declare_tags("a,b"));
}

/* A backup asked for stays; a policy asked for overrides the default. */
TEST(backup_asked_for_stays)
{
	struct gs_mm_tag_info info;
	void *w, *k;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	ASSERT_EQ(0, setenv("GPUSLEEP_BACKUP_TAGS", "weights,kv_cache", 1));
	EXPECT_EQ(0, gpusleep_set_backup(0, 0));	/* before the mm */
	EXPECT_EQ(-EINVAL, gpusleep_set_backup(GPUSLEEP_MAX_TAGS, 1));
	w = gpusleep_malloc_bit(0, 4096, 0, NULL);
	k = gpusleep_malloc_bit(1, 4096, 0, NULL);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, k);
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), 1U << 0, &info));
	EXPECT_EQ(GS_MM_DISCARD, info.policy);	/* asked: over the env */
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), 1U << 1, &info));
	EXPECT_EQ(GS_MM_BACKUP, info.policy);	/* not asked: the env */
	EXPECT_EQ(0, gpusleep_set_backup(0, 1));
	EXPECT_EQ(0, gpusleep_set_backup(0, 0));
	ASSERT_EQ(0, gs_mm_tag_info(gpusleep_mm(), 1U << 0, &info));
	EXPECT_EQ(GS_MM_BACKUP, info.policy);	/* once asked, kept */
	gpusleep_free(w, 4096, 0, NULL);
	gpusleep_free(k, 4096, 0, NULL);
}

/* memory_margin_bytes: a new chunk leaving less free is out of memory */
TEST(margin)
{
	void *p, *q;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	EXPECT_EQ(0, gpusleep_set_margin(1ULL << 62));	/* before the mm */
	errno = 0;
	EXPECT_EQ(NULL, gpusleep_malloc_bit(0, 4096, 0, NULL));
	EXPECT_EQ(0, gpusleep_set_margin(0));
	p = gpusleep_malloc_bit(0, 4096, 0, NULL);
	q = gpusleep_malloc_bit(0, 4096, 0, NULL);
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, q);
	EXPECT_EQ(0, gpusleep_set_margin(1ULL << 62));
	/*
	 * Carved from the chunk already mapped (q keeps it: a chunk freed
	 * whole is given back to the device): no new memory, no check.
	 */
	gpusleep_free(p, 4096, 0, NULL);
	p = gpusleep_malloc_bit(0, 4096, 0, NULL);
	EXPECT_NE(NULL, p);
	EXPECT_EQ(NULL, gpusleep_malloc_bit(0, 64 << 20, 0, NULL));
	gpusleep_free(p, 4096, 0, NULL);
	gpusleep_free(q, 4096, 0, NULL);
}

/* get_cpu_backup: the host copy of a released, backed-up allocation */
TEST(backup_pointer)
{
	unsigned char buf[8192];
	struct gs_mm *mm;
	unsigned char *w, *k;
	void *host = (void *)1;
	uint64_t bytes;

	ASSERT_EQ(0, setenv("GPUSLEEP_BACKEND", "host", 1));
	EXPECT_EQ(0, gpusleep_set_backup(0, 1));
	EXPECT_EQ(0, gpusleep_set_backup(1, 0));
	w = gpusleep_malloc_bit(0, 8192, 0, NULL);
	k = gpusleep_malloc_bit(1, 8192, 0, NULL);
	ASSERT_NE(NULL, w);
	ASSERT_NE(NULL, k);
	mm = gpusleep_mm();
	for (int i = 0; i < 8192; i++)
		w[i] = (unsigned char)(i * 7);
	/* awake: the device memory is current, no backup to read */
	EXPECT_EQ(0, gs_mm_backup_ptr(mm, w, 8192, &host));
	EXPECT_EQ(NULL, host);
	EXPECT_EQ(-EAGAIN, gs_mm_backup_read(mm, w, 8192, buf));
	ASSERT_EQ(0, gs_mm_pause(mm, 1U << 0, &bytes));
	ASSERT_EQ(0, gs_mm_pause(mm, 1U << 1, &bytes));
	ASSERT_EQ(0, gs_mm_backup_ptr(mm, w + 100, 4000, &host));
	ASSERT_NE(NULL, host);
	for (int i = 0; i < 4000; i++)
		ASSERT_EQ((unsigned char)((i + 100) * 7),
			  ((unsigned char *)host)[i]);
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, gs_mm_backup_read(mm, w, 8192, buf));
	EXPECT_EQ(0, memcmp(buf, host - 100, 8192));
	EXPECT_EQ(-ENODATA, gs_mm_backup_ptr(mm, k, 16, &host));
	EXPECT_EQ(-ENODATA, gs_mm_backup_read(mm, k, 16, buf));
	EXPECT_EQ(-ENOENT, gs_mm_backup_ptr(mm, buf, 16, &host));
	EXPECT_EQ(-ERANGE, gs_mm_backup_ptr(mm, w + 8000, 8192, &host));
	EXPECT_EQ(-EINVAL, gs_mm_backup_ptr(mm, w, 0, &host));
	ASSERT_EQ(0, gs_mm_resume(mm, 1U << 0, &bytes));
	ASSERT_EQ(0, gs_mm_resume(mm, 1U << 1, &bytes));
	EXPECT_EQ(0, gs_mm_backup_ptr(mm, w, 8192, &host));
	EXPECT_EQ(NULL, host);
	gpusleep_free(w, 8192, 0, NULL);
	gpusleep_free(k, 8192, 0, NULL);
}

TEST_HARNESS_MAIN
