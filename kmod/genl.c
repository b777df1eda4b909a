// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: the "gpusleep" generic netlink family (placeholder).
 */
#include "gpusleep.h"

int gs_genl_init(void)
{
	return 0;
}

void gs_genl_exit(void)
{
}

void gs_genl_notify(struct gs_domain *d, u32 from, u32 to, u64 op_id,
		    const struct gpusleep_result *res)
{
}
