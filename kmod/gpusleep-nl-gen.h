/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/* Do not edit directly, auto-generated from: */
/*	Documentation/netlink/specs/gpusleep.yaml */
/* YNL-GEN kernel header */

#ifndef _LINUX_GPUSLEEP_GEN_H
#define _LINUX_GPUSLEEP_GEN_H

#include <net/netlink.h>
#include <net/genetlink.h>

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

/* Ops table for gpusleep */
extern const struct genl_split_ops gpusleep_nl_ops[4];

int gpusleep_nl_get_doit(struct sk_buff *skb, struct genl_info *info);
int gpusleep_nl_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int gpusleep_nl_release_doit(struct sk_buff *skb, struct genl_info *info);
int gpusleep_nl_resume_doit(struct sk_buff *skb, struct genl_info *info);

enum {
	GPUSLEEP_NLGRP_EVENTS,
};

#endif /* _LINUX_GPUSLEEP_GEN_H */
