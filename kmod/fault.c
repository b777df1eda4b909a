// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: fault injection for the reliability tests, through the
 * kernel's fault-injection framework.
 *
 * Built only with GPUSLEEP_FAULT_INJECTION=y (Kbuild), which needs a
 * kernel with CONFIG_FAULT_INJECTION (and CONFIG_FAULT_INJECTION_DEBUG_FS
 * for the knobs): the tests turn it on for the debug kernel; a release
 * build has no such code and gs_fault() is a constant false.
 *
 * Every allocation, fd/file creation, eventfd lookup and user copy of the
 * module asks gs_fault() first. The knobs are the framework's own, in
 * /sys/kernel/debug/fail_gpusleep/ (Documentation/fault-injection/):
 * probability 100, interval 1, times 1 and space N fail the Nth site
 * reached from then on, once; times reads 0 once it fired.
 */
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fault-inject.h>

#include "gpusleep.h"

static DECLARE_FAULT_ATTR(gs_fault_attr);
static struct dentry *gs_fault_dir;

bool gs_fault(void)
{
	return should_fail(&gs_fault_attr, 1);
}

int gs_fault_init(void)
{
	gs_fault_dir = fault_create_debugfs_attr("fail_gpusleep", NULL,
						 &gs_fault_attr);
	return PTR_ERR_OR_ZERO(gs_fault_dir);
}

void gs_fault_exit(void)
{
	debugfs_remove_recursive(gs_fault_dir);
}
