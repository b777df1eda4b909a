// SPDX-License-Identifier: GPL-2.0
/*
 * The PyTorch pluggable allocator entry points on the host backend
 * (GPUSLEEP_BACKEND=host): tags follow gpusleep_set_tag(), the policies
 * follow GPUSLEEP_BACKUP_TAGS, bad input is refused.
 */
#include <errno.h>
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
	/* one device per process */
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
}

TEST_HARNESS_MAIN
