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
 * A user is a uid in a user namespace, and shares are counted as the
 * kernel's ucounts count (inotify's instances, for one): what a caller
 * makes is charged to (its user namespace, its euid), and, level by
 * level up the chain of namespaces, to (the parent namespace, the
 * namespace's owner), each level held to its own share. A user that makes
 * namespaces with many mapped uids still holds one share of its own; a
 * container's users each have theirs inside it.
 *
 * The chain stops at a namespace that global root (uid 0 of the initial
 * namespace) made: a Kubernetes pod's, a container runtime's. Its users'
 * shares are not charged to root as well, so that the pods of a node are
 * not pooled into root's one share; every domain still counts against
 * the node's max_domains. Only root can make such a namespace, and root
 * sets the limits anyway. (Module code cannot add a ucount type, and
 * memcg accounting alone (the domains' memory is charged to the
 * creator's memory cgroup already) would bound memory, not the node-wide
 * pool of domain ids that a user could take whole: docs/design.md.)
 *
 * A small hash of counters keyed by (namespace, uid) under a spinlock that
 * is a leaf: it is taken under gs_domains_lock or domain->lock, never the
 * other way round, and nothing sleeps or allocates under it. An entry
 * holds a reference on its namespace and goes when all its counts are
 * zero.
 */
#include <linux/hash.h>
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
		 "Most domains one user (a uid in a user namespace) may own at once, 0 for no limit (default 64)");
module_param_named(max_fds_per_user, gs_user_limit[GS_UC_FDS], uint, 0644);
MODULE_PARM_DESC(max_fds_per_user,
		 "Most agent and controller fds one user may hold, 0 for no limit (default 1024)");
module_param_named(max_eventfds_per_user, gs_user_limit[GS_UC_EVENTFDS], uint,
		   0644);
MODULE_PARM_DESC(max_eventfds_per_user,
		 "Most eventfd registrations one user may hold, 0 for no limit (default 4096)");

struct gs_user {
	struct hlist_node node;
	struct gs_uid who;	/* who.ns referenced */
	unsigned int n[GS_UC_MAX];
};

/* User namespaces nest 32 deep at most: the levels of a chain. */
#define GS_USER_LEVELS	33

struct gs_uid gs_user_current(void)
{
	return (struct gs_uid){
		.ns = current_user_ns(),
		.uid = current_euid(),
	};
}

bool gs_uid_eq(struct gs_uid a, struct gs_uid b)
{
	return a.ns == b.ns && uid_eq(a.uid, b.uid);
}

/*
 * The level above who: the namespace's owner in its parent. False at the
 * top: the initial namespace, or one global root made.
 */
static bool gs_user_up(struct gs_uid *who)
{
	const struct user_namespace *ns = who->ns;

	if (ns == &init_user_ns || uid_eq(ns->owner, GLOBAL_ROOT_UID))
		return false;
	who->uid = ns->owner;
	who->ns = ns->parent;
	return true;
}

static DEFINE_SPINLOCK(gs_users_lock);
static DEFINE_HASHTABLE(gs_users, 6);

static u32 gs_user_hash(struct gs_uid who)
{
	return hash_ptr(who.ns, 32) ^ __kuid_val(who.uid);
}

static struct gs_user *gs_user_find(struct gs_uid who)
{
	struct gs_user *u;

	lockdep_assert_held(&gs_users_lock);
	hash_for_each_possible(gs_users, u, node, gs_user_hash(who))
		if (gs_uid_eq(u->who, who))
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

/* Free what left the table (no lock held): its namespace goes too. */
static void gs_user_free_list(struct hlist_head *gone)
{
	struct hlist_node *tmp;
	struct gs_user *u;

	hlist_for_each_entry_safe(u, tmp, gone, node) {
		hlist_del(&u->node);
		if (u->who.ns)
			put_user_ns(u->who.ns);
		kfree(u);
	}
}

/* Unlink an entry whose counts are all zero, onto gone. */
static void gs_user_drop_empty(struct gs_user *u, struct hlist_head *gone)
{
	lockdep_assert_held(&gs_users_lock);
	if (!gs_user_empty(u))
		return;
	hash_del(&u->node);
	hlist_add_head(&u->node, gone);
}

/* How many levels of who's chain have no entry yet (lock held). */
static unsigned int gs_user_missing(struct gs_uid who)
{
	unsigned int n = 0;

	do {
		if (!gs_user_find(who))
			n++;
	} while (gs_user_up(&who));
	return n;
}

int gs_user_charge(struct gs_uid who, enum gs_ucount what)
{
	unsigned int limit = READ_ONCE(gs_user_limit[what]);
	struct gs_user *lvl[GS_USER_LEVELS], *u;
	HLIST_HEAD(spare);
	HLIST_HEAD(gone);
	unsigned int nspare = 0, missing, i, n = 0;
	struct gs_uid at = who;
	int ret = 0;

	/*
	 * An entry for every level that lacks one, allocated outside the
	 * lock; a level may lose its entry meanwhile: count again.
	 */
	for (;;) {
		spin_lock(&gs_users_lock);
		missing = gs_user_missing(who);
		if (missing <= nspare)
			break;
		spin_unlock(&gs_users_lock);
		while (nspare < missing) {
			u = gs_kzalloc(sizeof(*u), GFP_KERNEL);
			if (!u) {
				gs_user_free_list(&spare);
				return -ENOMEM;
			}
			hlist_add_head(&u->node, &spare);
			nspare++;
		}
	}
	do {
		u = gs_user_find(at);
		if (!u) {
			u = hlist_entry(spare.first, struct gs_user, node);
			hlist_del(&u->node);
			u->who = at;
			get_user_ns(at.ns);
			hash_add(gs_users, &u->node, gs_user_hash(at));
		}
		lvl[n++] = u;
		if (limit && u->n[what] >= limit)
			ret = -EDQUOT;
	} while (n < GS_USER_LEVELS && gs_user_up(&at));
	for (i = 0; i < n; i++) {
		if (!ret)
			lvl[i]->n[what]++;
		else
			gs_user_drop_empty(lvl[i], &gone);
	}
	spin_unlock(&gs_users_lock);
	gs_user_free_list(&spare);
	gs_user_free_list(&gone);
	return ret;
}

void gs_user_uncharge(struct gs_uid who, enum gs_ucount what)
{
	unsigned int n = 0;
	struct gs_user *u;
	HLIST_HEAD(gone);

	spin_lock(&gs_users_lock);
	do {
		u = gs_user_find(who);
		if (WARN_ON_ONCE(!u || !u->n[what]))
			break;
		u->n[what]--;
		gs_user_drop_empty(u, &gone);
	} while (++n < GS_USER_LEVELS && gs_user_up(&who));
	spin_unlock(&gs_users_lock);
	gs_user_free_list(&gone);
}
