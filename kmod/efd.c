// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: eventfd registrations of a domain, signalled when a drain
 * completes (GPUSLEEP_EFD_DRAINED) and when an operation finishes
 * (GPUSLEEP_EFD_OP_DONE), for epoll waiters in any process.
 *
 * Each registration belongs to the domain fd that made it and holds one
 * eventfd_ctx reference, put when it is removed, replaced or its fd closes.
 * It is charged to the user who made it (gs_user_current()), whoever made
 * the fd: a granted fd's registrations are the grantee's, not the
 * granter's. One user holds at most max_eventfds_per_user_per_domain on
 * one domain, so that one controller cannot take a domain's every slot
 * (max_eventfds). The list is protected by domain->lock.
 */
#include <linux/errno.h>
#include <linux/eventfd.h>
#include <linux/slab.h>
#include <linux/err.h>
#include <linux/moduleparam.h>

#include "compat.h"
#include "gpusleep.h"

static unsigned int gs_max_efds_user_domain = 64;
module_param_named(max_eventfds_per_user_per_domain, gs_max_efds_user_domain,
		   uint, 0644);
MODULE_PARM_DESC(max_eventfds_per_user_per_domain,
		 "Most eventfd registrations one user may hold on one domain, 0 for no limit (default 64)");

struct gs_efd {
	struct list_head node;
	struct eventfd_ctx *ctx;
	struct gs_file *owner;
	struct gs_uid uid;	/* charged one GS_UC_EVENTFDS */
	u32 events;
};

static struct gs_efd *gs_efd_find(struct gs_domain *d, struct gs_file *owner,
				  struct eventfd_ctx *ctx)
{
	struct gs_efd *e;

	list_for_each_entry(e, &d->efds, node)
		if (e->owner == owner && e->ctx == ctx)
			return e;
	return NULL;
}

static void gs_efd_free(struct gs_domain *d, struct gs_efd *e)
{
	list_del(&e->node);
	d->nr_efds--;
	gs_user_uncharge(e->uid, GS_UC_EVENTFDS);
	eventfd_ctx_put(e->ctx);
	kfree(e);
}

void gs_efd_drop_owner(struct gs_domain *d, struct gs_file *owner)
{
	struct gs_efd *e, *tmp;

	lockdep_assert_held(&d->lock);
	list_for_each_entry_safe(e, tmp, &d->efds, node)
		if (e->owner == owner)
			gs_efd_free(d, e);
}

/* Within uid's share of d's registrations? 0 or -EDQUOT. */
static int gs_efd_user_room(struct gs_domain *d, struct gs_uid uid)
{
	unsigned int limit = READ_ONCE(gs_max_efds_user_domain);
	unsigned int n = 0;
	struct gs_efd *e;

	if (!limit)
		return 0;
	list_for_each_entry(e, &d->efds, node)
		if (gs_uid_eq(e->uid, uid) && ++n >= limit)
			return -EDQUOT;
	return 0;
}

int gs_efd_set(struct gs_domain *d, struct gs_file *owner,
	       const struct gpusleep_eventfd *req)
{
	struct gs_uid uid = gs_user_current();
	struct eventfd_ctx *ctx;
	struct gs_efd *e, *new = NULL;
	bool add = false;
	int ret = 0;

	if (req->reserved || (req->events & ~GPUSLEEP_EFD_ALL))
		return -EINVAL;
	if (req->fd == -1) {
		if (req->events)
			return -EINVAL;
		mutex_lock(&d->lock);
		gs_efd_drop_owner(d, owner);
		mutex_unlock(&d->lock);
		return 0;
	}
	if (req->fd < 0)
		return -EBADF;

	/* Take the new reference before anything is replaced. */
	ctx = gs_fault() ? ERR_PTR(-EBADF) : eventfd_ctx_fdget(req->fd);
	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	if (req->events) {
		new = gs_kzalloc(sizeof(*new), GFP_KERNEL_ACCOUNT);
		if (!new) {
			eventfd_ctx_put(ctx);
			return -ENOMEM;
		}
	}

	mutex_lock(&d->lock);
	e = gs_efd_find(d, owner, ctx);
	if (d->dead) {
		/* Its death was signalled already: a new one would never be. */
		ret = -ENODEV;
	} else if (!req->events) {
		if (e)
			gs_efd_free(d, e);
		else
			ret = -ENOENT;
	} else if (e) {
		e->events = req->events;
	} else if (d->nr_efds >= gs_max_eventfds) {
		ret = -ENOSPC;
	} else {
		/* A new registration: within the user's shares (else EDQUOT). */
		ret = gs_efd_user_room(d, uid);
		if (!ret)
			ret = gs_user_charge(uid, GS_UC_EVENTFDS);
		add = !ret;
	}
	if (add) {
		new->ctx = ctx;
		new->owner = owner;
		new->uid = uid;
		new->events = req->events;
		list_add_tail(&new->node, &d->efds);
		d->nr_efds++;
		ctx = NULL;	/* the registration owns the reference */
		new = NULL;
	}
	mutex_unlock(&d->lock);

	kfree(new);
	if (ctx)
		eventfd_ctx_put(ctx);
	return ret;
}

void gs_efd_signal(struct gs_domain *d, u32 events)
{
	struct gs_efd *e;

	lockdep_assert_held(&d->lock);
	list_for_each_entry(e, &d->efds, node)
		if (e->events & events)
			eventfd_signal(e->ctx);
}
