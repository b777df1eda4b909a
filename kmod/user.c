// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: what one user may hold, so that no user can starve the others.
 *
 * /dev/gpusleep is open to everyone and max_domains is one pool for the
 * machine; each user is also held to its own share of domains, of domain
 * fds (agents, controllers, groups) and of eventfd registrations, with
 * EDQUOT past it (as keyrings do with their per-user quota). Event queues
 * are bounded per domain (GS_EVQ_LEN), so they are bounded per user
 * through domains.
 *
 * The user charged is the caller's euid in the initial user namespace. In
 * a user namespace it is the namespace's owner, that of the outermost one
 * below the initial namespace: the kernel's ucounts (RLIMIT_NPROC and the
 * other per-user limits) charge each namespace level up to the initial
 * one to the user that created it, so a container that maps many uids
 * holds its creator's share, not one share per uid, and a user that makes
 * many namespaces still holds one share.
 *
 * A small hash of per-uid counters under a spinlock that is a leaf: it is
 * taken under gs_domains_lock or domain->lock, never the other way round,
 * and nothing sleeps under it. An entry goes when all its counts are zero.
 */
#include <linux/hashtable.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/cred.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

#include "gpusleep.h"

static unsigned int gs_user_limit[GS_UC_MAX] = {
	[GS_UC_DOMAINS]		= 64,
	[GS_UC_FDS]		= 1024,
	[GS_UC_EVENTFDS]	= 4096,
};
module_param_named(max_domains_per_user, gs_user_limit[GS_UC_DOMAINS], uint,
		   0644);
MODULE_PARM_DESC(max_domains_per_user,
		 "Most domains one euid may own at once, 0 for no limit (default 64)");
module_param_named(max_fds_per_user, gs_user_limit[GS_UC_FDS], uint, 0644);
MODULE_PARM_DESC(max_fds_per_user,
		 "Most agent and controller fds one euid may hold, 0 for no limit (default 1024)");
module_param_named(max_eventfds_per_user, gs_user_limit[GS_UC_EVENTFDS], uint,
		   0644);
MODULE_PARM_DESC(max_eventfds_per_user,
		 "Most eventfd registrations one euid may hold, 0 for no limit (default 4096)");

struct gs_user {
	struct hlist_node node;
	kuid_t uid;
	unsigned int n[GS_UC_MAX];
};

kuid_t gs_user_current(void)
{
	const struct user_namespace *ns = current_user_ns();

	if (ns == &init_user_ns)
		return current_euid();
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	return ns->owner;
}

static DEFINE_SPINLOCK(gs_users_lock);
static DEFINE_HASHTABLE(gs_users, 6);

static struct gs_user *gs_user_find(kuid_t uid)
{
	struct gs_user *u;

	lockdep_assert_held(&gs_users_lock);
	hash_for_each_possible(gs_users, u, node, __kuid_val(uid))
		if (uid_eq(u->uid, uid))
			return u;
	return NULL;
}

static bool gs_user_empty(const struct gs_user *u)
{
	unsigned int i;

	for (i = 0; i < GS_UC_MAX; i++)
		if (u->n[i])
			return false;
	return true;
}

int gs_user_charge(kuid_t uid, enum gs_ucount what)
{
	unsigned int limit = READ_ONCE(gs_user_limit[what]);
	struct gs_user *u, *new = NULL;
	int ret = 0;

	spin_lock(&gs_users_lock);
	u = gs_user_find(uid);
	if (!u) {
		/* The first charge of this uid: allocate outside the lock. */
		spin_unlock(&gs_users_lock);
		new = gs_kzalloc(sizeof(*new), GFP_KERNEL);
		if (!new)
			return -ENOMEM;
		new->uid = uid;
		spin_lock(&gs_users_lock);
		u = gs_user_find(uid);
		if (!u) {
			hash_add(gs_users, &new->node, __kuid_val(uid));
			u = new;
			new = NULL;
		}
	}
	if (limit && u->n[what] >= limit) {
		ret = -EDQUOT;
		if (gs_user_empty(u)) {
			hash_del(&u->node);
			new = u;	/* freed below */
		}
	} else {
		u->n[what]++;
	}
	spin_unlock(&gs_users_lock);
	kfree(new);
	return ret;
}

void gs_user_uncharge(kuid_t uid, enum gs_ucount what)
{
	struct gs_user *u;

	spin_lock(&gs_users_lock);
	u = gs_user_find(uid);
	if (WARN_ON_ONCE(!u || !u->n[what])) {
		spin_unlock(&gs_users_lock);
		return;
	}
	u->n[what]--;
	if (gs_user_empty(u))
		hash_del(&u->node);
	else
		u = NULL;
	spin_unlock(&gs_users_lock);
	kfree(u);
}
