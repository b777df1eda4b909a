// SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause)
/* Do not edit directly, auto-generated from: */
/*	Documentation/netlink/specs/gpusleep.yaml */
/* YNL-GEN kernel source */

#include <net/netlink.h>
#include <net/genetlink.h>

#include "gpusleep-nl-gen.h"

#include <uapi/linux/gpusleep_netlink.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>
#include <linux/gpusleep.h>

/* GPUSLEEP_CMD_GET - do */
static const struct nla_policy gpusleep_get_nl_policy[GPUSLEEP_A_ID + 1] = {
	[GPUSLEEP_A_ID] = { .type = NLA_U32, },
};

/* GPUSLEEP_CMD_RELEASE - do */
static const struct nla_policy gpusleep_release_nl_policy[GPUSLEEP_A_TIMEOUT_MS + 1] = {
	[GPUSLEEP_A_ID] = { .type = NLA_U32, },
	[GPUSLEEP_A_TAGS] = { .type = NLA_U32, },
	[GPUSLEEP_A_OP_FLAGS] = NLA_POLICY_MASK(NLA_U32, 0x3),
	[GPUSLEEP_A_TIMEOUT_MS] = { .type = NLA_U32, },
};

/* GPUSLEEP_CMD_RESUME - do */
static const struct nla_policy gpusleep_resume_nl_policy[GPUSLEEP_A_TIMEOUT_MS + 1] = {
	[GPUSLEEP_A_ID] = { .type = NLA_U32, },
	[GPUSLEEP_A_TAGS] = { .type = NLA_U32, },
	[GPUSLEEP_A_OP_FLAGS] = NLA_POLICY_MASK(NLA_U32, 0x3),
	[GPUSLEEP_A_TIMEOUT_MS] = { .type = NLA_U32, },
};

/* Ops table for gpusleep */
const struct genl_split_ops gpusleep_nl_ops[4] = {
	{
		.cmd		= GPUSLEEP_CMD_GET,
		.doit		= gpusleep_nl_get_doit,
		.policy		= gpusleep_get_nl_policy,
		.maxattr	= GPUSLEEP_A_ID,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd	= GPUSLEEP_CMD_GET,
		.dumpit	= gpusleep_nl_get_dumpit,
		.flags	= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= GPUSLEEP_CMD_RELEASE,
		.doit		= gpusleep_nl_release_doit,
		.policy		= gpusleep_release_nl_policy,
		.maxattr	= GPUSLEEP_A_TIMEOUT_MS,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= GPUSLEEP_CMD_RESUME,
		.doit		= gpusleep_nl_resume_doit,
		.policy		= gpusleep_resume_nl_policy,
		.maxattr	= GPUSLEEP_A_TIMEOUT_MS,
		.flags		= GENL_CMD_CAP_DO,
	},
};

static const struct genl_multicast_group gpusleep_nl_mcgrps[] = {
	[GPUSLEEP_NLGRP_EVENTS] = { "events", },
};
