/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleep: kernel-version differences, behind the newest API.
 *
 * The logic files are written against the newest kernel's interfaces and
 * carry no version #if; this header makes those interfaces exist on older
 * kernels. Which kernel has what is decided at build time by the probes of
 * kmod/conftest.sh (GS_HAVE_* in the generated gs_conftest.h), not by
 * LINUX_VERSION_CODE: distribution kernels carry interfaces from later
 * versions than their number says.
 *
 * Supported: 5.10 to 7.3 (built warning-free with W=1 against Debian's
 * 5.10, 6.1, 6.12 and 7.3 by `make check`). What changed, for every API
 * the module uses:
 *
 * Handled here:
 * - eventfd_signal(): 6.8 dropped the count argument and the return
 *   value: eventfd_signal(ctx) adds 1. GS_HAVE_EVENTFD_SIGNAL_1ARG.
 * - class attributes: 6.4 made show()/store() take const struct class *
 *   and const struct class_attribute *. Write the parameter types as
 *   "GS_CLASS_CONST struct class *" and "GS_CLASS_CONST struct
 *   class_attribute *": const from 6.4, nothing before, so the code on an
 *   older kernel is what it always was. GS_HAVE_CLASS_ATTR_CONST.
 * - split genetlink ops (struct genl_split_ops, genl_family.split_ops):
 *   new in 6.2. The generated op table (gpusleep-nl-gen.c, which Kbuild
 *   compiles with this header included first) has one entry per command
 *   and mode, do and dump apart. Before 6.2 a family has one struct
 *   genl_ops per command: there the table is a struct genl_ops array,
 *   .split_ops names .ops, and gs_genl_split_ops_compat() folds the do
 *   and the dump entry of a command into one before the family is
 *   registered (a dump takes the do's policy then, as it always did here;
 *   from 6.2 a dump, which the spec gives no request attributes, has
 *   none). GS_HAVE_GENL_SPLIT_OPS.
 * - GENL_REQ_ATTR_CHECK(): new in 6.1, with the extended ack's
 *   missing-attribute report (NL_SET_ERR_ATTR_MISS). Before 6.1 the same
 *   test, with a text message in the extended ack instead.
 *   GS_HAVE_GENL_REQ_ATTR_CHECK.
 * - a multicast group that needs CAP_NET_ADMIN to join
 *   (GENL_MCAST_CAP_NET_ADMIN): 6.7, and the stable updates of 6.1 and
 *   6.6 (Debian's 6.1 has it; its 5.10 does not). Where it is missing,
 *   gs_genl_multicast_admin() sends through netlink_broadcast_filtered()
 *   (5.10 has it) with a filter that skips every socket whose opener
 *   lacks CAP_NET_ADMIN over the network namespace: such a listener joins
 *   but is sent nothing. Where both are missing the group carries
 *   nothing (never every user's domains to anyone). GS_HAVE_GENL_MCAST_CAP,
 *   GS_HAVE_NETLINK_BROADCAST_FILTERED.
 *
 * No compat needed (checked in each version's source):
 * - struct class.owner: removed in 6.4; it was never used,
 *   so the module does not set it on any kernel. class_register() takes a
 *   const struct class * from 6.4: a non-const one converts.
 * - struct genl_family.resv_start_op: new in 6.1; commands
 *   at or above it get strict validation and a checked reserved header
 *   field. The module leaves it 0 (every command), which is the default
 *   of a zero-initialised family, so no initialiser names it. Before 6.1
 *   genetlink validates every op strictly anyway (since 5.2, absent
 *   GENL_DONT_VALIDATE_STRICT), only the reserved header byte is unchecked.
 * - per-op policies (genl_ops.policy, .maxattr): new in 5.10,
 *   the oldest kernel supported.
 * - sysfs_emit(): new in 5.10.
 * - timens_add_monotonic() (time namespaces): new in 5.6, a no-op without
 *   CONFIG_TIME_NS.
 * - genl_family.netnsok, genlmsg_multicast_netns(), genl_info_net():
 *   unchanged from 5.10 to 7.3.
 * - anon_inode_getfile(), get_unused_fd_flags(), fd_install(), misc_register(),
 *   eventfd_ctx_fdget()/_put(), delayed work (mod_delayed_work,
 *   cancel_delayed_work_sync), wait_event_interruptible_hrtimeout(),
 *   idr_alloc_cyclic(), kernfs_notify(),
 *   genl_has_listeners(), netlink_capable(), nla_put_u64_64bit(),
 *   module_param_cb(): unchanged from 5.10 to 7.3.
 */
#ifndef _GPUSLEEP_COMPAT_H
#define _GPUSLEEP_COMPAT_H

#include <linux/device.h>
#include <linux/eventfd.h>
#include <net/genetlink.h>

/*
 * Out of the tree, Kbuild runs kmod/conftest.sh and defines GS_CONFTEST; in
 * the kernel tree the API is the tree's own, the newest, and this header
 * adapts nothing.
 */
#ifdef GS_CONFTEST
#include "gs_conftest.h"
#else
#define GS_HAVE_EVENTFD_SIGNAL_1ARG 1
#define GS_HAVE_CLASS_ATTR_CONST 1
#define GS_HAVE_GENL_REQ_ATTR_CHECK 1
#define GS_HAVE_GENL_SPLIT_OPS 1
#define GS_HAVE_GENL_MCAST_CAP 1
#endif

#ifndef GS_HAVE_EVENTFD_SIGNAL_1ARG
#define eventfd_signal(ctx) eventfd_signal((ctx), 1)
#endif

#ifdef GS_HAVE_CLASS_ATTR_CONST
#define GS_CLASS_CONST const
#else
#define GS_CLASS_CONST
#endif

#ifndef GS_HAVE_GENL_REQ_ATTR_CHECK
#define GENL_REQ_ATTR_CHECK(info, attr) ({				\
	const struct genl_info *__info = (info);			\
	bool __missing = !__info->attrs[(attr)];			\
									\
	if (__missing)							\
		NL_SET_ERR_MSG(__info->extack, "missing attribute");	\
	__missing;							\
})
#endif

#ifdef GS_HAVE_GENL_SPLIT_OPS
static inline void gs_genl_split_ops_compat(struct genl_family *family,
					    const struct genl_split_ops *ops)
{
}
#else
#define genl_split_ops genl_ops
#define split_ops ops
#define n_split_ops n_ops

/* Fold a split table (in f->ops) into one genl_ops per command, in buf. */
static inline void gs_genl_fold_split_ops(struct genl_family *f,
					  struct genl_ops *buf)
{
	const u8 caps = GENL_CMD_CAP_DO | GENL_CMD_CAP_DUMP |
			GENL_CMD_CAP_HASPOL;
	unsigned int i, j, n = 0;

	for (i = 0; i < f->n_ops; i++) {
		const struct genl_ops *s = &f->ops[i];

		for (j = 0; j < n && buf[j].cmd != s->cmd; j++)
			;
		if (j == n)
			buf[n++] = (struct genl_ops){ .cmd = s->cmd };
		if (s->doit)
			buf[j].doit = s->doit;
		if (s->dumpit)
			buf[j].dumpit = s->dumpit;
		if (s->policy && (s->doit || !buf[j].policy)) {
			buf[j].policy = s->policy;
			buf[j].maxattr = s->maxattr;
		}
		buf[j].flags |= s->flags & ~caps;
		buf[j].validate |= s->validate;
	}
	f->ops = buf;
	f->n_ops = n;
}

#define gs_genl_split_ops_compat(family, split) do {			\
	static struct genl_ops __gs_folded[ARRAY_SIZE(split)];		\
									\
	gs_genl_fold_split_ops((family), __gs_folded);			\
} while (0)
#endif

/*
 * Multicast skb to group of family in net, to the listeners that have
 * CAP_NET_ADMIN over net only; the group is declared with
 * GS_MCAST_CAP_NET_ADMIN in its flags.
 */
#ifdef GS_HAVE_GENL_MCAST_CAP
#define GS_MCAST_CAP_NET_ADMIN	GENL_MCAST_CAP_NET_ADMIN

static inline int gs_genl_multicast_admin(const struct genl_family *family,
					  struct net *net, struct sk_buff *skb,
					  unsigned int group)
{
	/* The kernel refused every other listener at the join. */
	return genlmsg_multicast_netns(family, net, skb, 0, group, GFP_KERNEL);
}
#elif defined(GS_HAVE_NETLINK_BROADCAST_FILTERED)
#include <linux/capability.h>
#include <linux/net.h>
#include <net/sock.h>

#define GS_MCAST_CAP_NET_ADMIN	0

/* Skip (non-zero) a listener whose socket's opener is no admin of net. */
static inline int gs_genl_mcast_filter(struct sock *dsk, struct sk_buff *skb,
				       void *data)
{
	const struct net *net = data;
	const struct socket *sock = dsk->sk_socket;

	return !(sock && sock->file &&
		 file_ns_capable(sock->file, net->user_ns, CAP_NET_ADMIN));
}

static inline int gs_genl_multicast_admin(const struct genl_family *family,
					  struct net *net, struct sk_buff *skb,
					  unsigned int group)
{
	group += family->mcgrp_offset;
	NETLINK_CB(skb).dst_group = group;
	return netlink_broadcast_filtered(net->genl_sock, skb, 0, group,
					  GFP_KERNEL, gs_genl_mcast_filter, net);
}
#else
#define GS_MCAST_CAP_NET_ADMIN	0

static inline int gs_genl_multicast_admin(const struct genl_family *family,
					  struct net *net, struct sk_buff *skb,
					  unsigned int group)
{
	/* No way to keep it to the namespace's admins: send nothing. */
	nlmsg_free(skb);
	return 0;
}
#endif

#endif /* _GPUSLEEP_COMPAT_H */
