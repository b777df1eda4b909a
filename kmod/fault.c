// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: fault injection for the reliability tests.
 *
 * Every allocation, fd/file creation, eventfd lookup and user copy of the
 * module goes through gs_fault(). Writing N to the fail_nth parameter
 * makes the Nth such site reached from then on fail once (an allocation
 * returns NULL, a copy reports nothing copied, a lookup returns -EBADF);
 * fault_fired then reads 1. 0 (the default) turns it off; the cost is
 * then one READ_ONCE per site. Root only.
 */
#include <linux/atomic.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>

#include "gpusleep.h"

static unsigned int gs_fail_nth;
static atomic_t gs_fault_seen = ATOMIC_INIT(0);
static int gs_fault_fired;

static int gs_fail_nth_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_uint(val, kp);

	if (!ret) {
		atomic_set(&gs_fault_seen, 0);
		WRITE_ONCE(gs_fault_fired, 0);
	}
	return ret;
}

static const struct kernel_param_ops gs_fail_nth_ops = {
	.set = gs_fail_nth_set,
	.get = param_get_uint,
};

module_param_cb(fail_nth, &gs_fail_nth_ops, &gs_fail_nth, 0600);
MODULE_PARM_DESC(fail_nth, "Fail the Nth allocation, eventfd lookup or user copy from now (0 = off)");
module_param_named(fault_fired, gs_fault_fired, int, 0400);
MODULE_PARM_DESC(fault_fired, "1 once the fault armed by fail_nth was injected");

bool gs_fault(void)
{
	unsigned int nth = READ_ONCE(gs_fail_nth);

	if (likely(!nth))
		return false;
	if (atomic_inc_return(&gs_fault_seen) != nth)
		return false;
	WRITE_ONCE(gs_fail_nth, 0);
	WRITE_ONCE(gs_fault_fired, 1);
	pr_info("gpusleep: injected fault at site %u (%pS)\n", nth,
		__builtin_return_address(0));
	return true;
}
