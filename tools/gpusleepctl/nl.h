/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleepctl: the "gpusleep" generic netlink family, shared by monitor and
 * the exporter. Two sockets, as libnl advises: req for requests (dumps),
 * evs for the multicast group "events".
 */
#ifndef GPUSLEEPCTL_NL_H
#define GPUSLEEPCTL_NL_H

#include <stdbool.h>
#include <stdint.h>

#include <netlink/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include <linux/gpusleep.h>
#include <linux/gpusleep_netlink.h>

struct gs_nl {
	struct nl_sock *req, *evs;
	int family;		/* < 0 until resolved */
	int grp;
};

extern struct nla_policy gs_nl_policy[GPUSLEEP_A_MAX + 1];
extern struct nla_policy gs_nl_res_policy[GPUSLEEP_A_RES_MAX + 1];

/* The tag declaration a domain message carries (its GPUSLEEP_A_TAGs). */
void gs_nl_tags(struct nlmsghdr *nlh, struct gpusleep_tags *decl);

/* Allocate and connect both sockets. 0 or a libnl error (< 0). */
int gs_nl_connect(struct gs_nl *n);
void gs_nl_close(struct gs_nl *n);

/*
 * Resolve the family and its group, join the group on evs. 0, or a libnl
 * error: -NLE_OBJ_NOTFOUND when the module is not loaded (family < 0),
 * -NLE_PERM when the caller may not join the group (no CAP_NET_ADMIN
 * over its network namespace; family resolved). *what says which step
 * failed.
 */
int gs_nl_join(struct gs_nl *n, const char **what);

/*
 * Dump every domain through req (GET, NLM_F_DUMP) into the req socket's
 * NL_CB_VALID callback. An interrupted dump (NLM_F_DUMP_INTR) is run again,
 * up to 10 times; on_intr, if not NULL, is called before each retry.
 */
int gs_nl_dump(struct gs_nl *n, void (*on_intr)(void *), void *arg);

static inline uint32_t gs_attr_u32(struct nlattr **tb, int a)
{
	return tb[a] ? nla_get_u32(tb[a]) : 0;
}

static inline uint64_t gs_attr_u64(struct nlattr **tb, int a)
{
	return tb[a] ? nla_get_u64(tb[a]) : 0;
}

#endif
