// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-test: a module whose init hits WARN_ON(1) and still loads, so
 * that the VM runner must notice the WARNING in the guest kernel log.
 */
#include <linux/module.h>
#include <linux/bug.h>

static int __init harness_warn_init(void)
{
	WARN_ON(1);
	return 0;
}

static void __exit harness_warn_exit(void)
{
}

module_init(harness_warn_init);
module_exit(harness_warn_exit);
MODULE_DESCRIPTION("gpusleep test harness self-test: WARN_ON in init");
MODULE_LICENSE("GPL");
