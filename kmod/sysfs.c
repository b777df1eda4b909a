// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: sysfs state for node tooling (placeholder until the class
 * devices land).
 */
#include "gpusleep.h"

int gs_sysfs_init(void)
{
	return 0;
}

void gs_sysfs_exit(void)
{
}

int gs_sysfs_add(struct gs_domain *d)
{
	return 0;
}

void gs_sysfs_remove(struct gs_domain *d)
{
}

void gs_sysfs_changed(struct gs_domain *d)
{
}
