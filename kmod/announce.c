// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: tell the observers of a domain what the state machine did.
 *
 * op.c decides and calls gs_announce() once per change; this file fans it
 * out: sysfs pollers, the netlink "events" group, registered eventfds, the
 * blocking calls waiting for an operation's result, and the domain's
 * group. op.c also calls gs_step_started() and gs_step_ended() at each
 * boundary of a step, for the timelines of netlink listeners only. Nothing
 * here calls back into op.c. Runs with domain->lock held (every callee
 * only queues or wakes: kernfs_notify(), genl.c's notifications (a copy
 * into a preallocated entry, built and sent by its work: nothing is
 * allocated here), eventfd_signal(), wake_up_all(), queue_work()).
 */
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/wait.h>

#include <linux/gpusleep_netlink.h>

#include "gpusleep.h"

/* Hand the result to every waiter of that operation, and let it go. */
static void gs_deliver(struct gs_domain *d, const struct gpusleep_result *res)
{
	struct gs_waiter *w, *tmp;

	list_for_each_entry_safe(w, tmp, &d->waiters, node) {
		if (w->op_id != res->op_id)
			continue;
		w->res = *res;
		w->done = true;
		list_del_init(&w->node);
	}
}

void gs_announce(struct gs_domain *d, const struct gs_change *c)
{
	lockdep_assert_held(&d->lock);
	/* The host budget counts what the state now says (tenant.c). */
	gs_tenant_sync(d);
	gs_sysfs_changed(d);
	if (c->from != d->state || c->res)
		gs_genl_notify(d, c->from, d->state, c->op_id, c->res);
	if (c->efd)
		gs_efd_signal(d, c->efd);
	if (c->res)
		gs_deliver(d, c->res);
	/*
	 * The group looks at its ranks again, from its own work, when what
	 * it acts on changed: a rank's operation ended, a rank drained (held
	 * for the group's go), its agent left or its engine died. Not at
	 * every step in between: each look is a kworker wake-up.
	 */
	if (d->group && (c->res || c->efd || c->agent_gone ||
			 d->state == GPUSLEEP_S_DEAD))
		gs_group_kick(d);
	if (c->res || d->state == GPUSLEEP_S_DEAD)
		wake_up_all(&d->op_wq);
	/* Readers of a dead domain see the hang-up (read() 0, EPOLLHUP). */
	if (d->state == GPUSLEEP_S_DEAD && c->from != GPUSLEEP_S_DEAD) {
		wake_up_all(&d->engine_q.wq);
		wake_up_all(&d->agent_q.wq);
	}
}

void gs_step_started(struct gs_domain *d, u32 type, u32 tags)
{
	struct gs_op *op = &d->op;
	struct gs_step_ntf s = {
		.op_id = op->id,
		.step = op->step,
		.type = type,
		.phase = GPUSLEEP_STEP_START,
		.tags = tags,
	};

	lockdep_assert_held(&d->lock);
	op->ntf_type = type;
	op->ntf_tags = tags;
	gs_genl_step_notify(d, &s);
}

void gs_step_ended(struct gs_domain *d, int err, u32 reason)
{
	struct gs_op *op = &d->op;
	struct gs_step_ntf s = {
		.op_id = op->id,
		.step = op->step,
		.type = op->ntf_type,
		.phase = GPUSLEEP_STEP_END,
		.tags = op->ntf_tags,
		.err = err,
		.reason = reason,
	};

	lockdep_assert_held(&d->lock);
	if (!op->ntf_type)
		return;
	op->ntf_type = 0;
	gs_genl_step_notify(d, &s);
}
