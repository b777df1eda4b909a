// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-test: a kselftest with one passing and one failing test. Run
 * by tests/harness/selftest.sh; never part of the real suite.
 */
#include "kselftest_harness.h"

TEST(passes)
{
	EXPECT_EQ(1, 1);
}

TEST(fails_on_purpose)
{
	EXPECT_EQ(1, 2) {
		TH_LOG("this failure is expected by the harness self-test");
	}
}

TEST_HARNESS_MAIN
