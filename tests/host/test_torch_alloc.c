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

TEST_HARNESS_MAIN
