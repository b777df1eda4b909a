// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: the release/resume state machine of a domain.
 *
 * One operation at a time. Each step is an event record queued to the
 * engine or the agent; a step that needs an answer is "awaited" (op.await)
 * under a deadline kept by timeout_work. An answer, a timeout, a resume that
 * cancels a pending drain, or the death of a peer moves the machine on.
 * docs/design.md has the sequences and the state diagram.
 *
 * Two rules hold whatever fails:
 *  - Scheduling is a level (d->sched_paused) that every record to the
 *    engine carries (GPUSLEEP_EVF_MAY_SCHEDULE); it is lowered before DRAIN
 *    and raised only by gs_maybe_resume_sched(), with RESUME_SCHED, when no
 *    operation runs, nothing is released, no agent answer is outstanding
 *    and KV is repaired.
 *  - Maybe released is released: a tag counts released from the moment
 *    PAUSE_TAG is queued (unconfirmed until the agent answers) until the
 *    agent confirms RESUME_TAG. A step record never read is taken back when
 *    its step ends, so the kernel knows the agent never saw it.
 *
 * This file decides; gs_announce() tells sysfs, netlink, eventfds and the
 * waiters. Everything here runs with domain->lock held, except
 * gs_op_timeout_work(), which takes it.
 */
#include <linux/errno.h>
#include <linux/jiffies.h>
#include <linux/lockdep.h>
#include <linux/printk.h>
#include <linux/string.h>
#include <linux/bitops.h>
#include <linux/sched.h>

#include "gpusleep.h"

static const char * const gs_reason_names[GPUSLEEP_R_MAX] = {
	[GPUSLEEP_R_NONE]		= "none",
	[GPUSLEEP_R_NOT_ENABLED]	= "not_enabled",
	[GPUSLEEP_R_INVALID]		= "invalid",
	[GPUSLEEP_R_KV_NOT_ALLOWED]	= "kv_not_allowed",
	[GPUSLEEP_R_ALREADY_RELEASED]	= "already_released",
	[GPUSLEEP_R_BUSY]		= "busy",
	[GPUSLEEP_R_NOT_RELEASED]	= "not_released",
	[GPUSLEEP_R_CANCELLED]		= "cancelled",
	[GPUSLEEP_R_DRAIN_TIMEOUT]	= "drain_timeout",
	[GPUSLEEP_R_AGENT_TIMEOUT]	= "agent_timeout",
	[GPUSLEEP_R_ENGINE_FAILED]	= "engine_failed",
	[GPUSLEEP_R_AGENT_FAILED]	= "agent_failed",
	[GPUSLEEP_R_AGENT_GONE]		= "agent_gone",
	[GPUSLEEP_R_ENGINE_GONE]	= "engine_gone",
	[GPUSLEEP_R_NO_MEMORY]		= "no_memory",
	[GPUSLEEP_R_QUEUE_FULL]		= "queue_full",
	[GPUSLEEP_R_ENGINE_TIMEOUT]	= "engine_timeout",
	[GPUSLEEP_R_LEASED]		= "leased",
	[GPUSLEEP_R_HOST_BUDGET]	= "host_budget",
	[GPUSLEEP_R_VERIFY_FAILED]	= "verify_failed",
	[GPUSLEEP_R_SHORTFALL]		= "shortfall",
};

static const char * const gs_state_names[GPUSLEEP_S_MAX] = {
	[GPUSLEEP_S_AWAKE]	= "awake",
	[GPUSLEEP_S_DRAINING]	= "draining",
	[GPUSLEEP_S_RELEASING]	= "releasing",
	[GPUSLEEP_S_RELEASED]	= "released",
	[GPUSLEEP_S_RESUMING]	= "resuming",
	[GPUSLEEP_S_DEAD]	= "dead",
};

const char *gs_reason_name(u32 reason)
{
	return reason < GPUSLEEP_R_MAX ? gs_reason_names[reason] : "unknown";
}

const char *gs_state_name(u32 state)
{
	return state < GPUSLEEP_S_MAX ? gs_state_names[state] : "unknown";
}

static const int gs_reason_errnos[GPUSLEEP_R_MAX] = {
	[GPUSLEEP_R_NONE]		= 0,
	[GPUSLEEP_R_NOT_ENABLED]	= ENOTCONN,
	[GPUSLEEP_R_INVALID]		= EINVAL,
	[GPUSLEEP_R_KV_NOT_ALLOWED]	= EOPNOTSUPP,
	[GPUSLEEP_R_ALREADY_RELEASED]	= EALREADY,
	[GPUSLEEP_R_BUSY]		= EBUSY,
	[GPUSLEEP_R_NOT_RELEASED]	= ENOENT,
	[GPUSLEEP_R_CANCELLED]		= ECANCELED,
	[GPUSLEEP_R_DRAIN_TIMEOUT]	= ETIMEDOUT,
	[GPUSLEEP_R_AGENT_TIMEOUT]	= ETIMEDOUT,
	[GPUSLEEP_R_ENGINE_FAILED]	= EREMOTEIO,
	[GPUSLEEP_R_AGENT_FAILED]	= EREMOTEIO,
	[GPUSLEEP_R_AGENT_GONE]		= EPIPE,
	[GPUSLEEP_R_ENGINE_GONE]	= EOWNERDEAD,
	[GPUSLEEP_R_NO_MEMORY]		= ENOMEM,
	[GPUSLEEP_R_QUEUE_FULL]		= ENOBUFS,
	[GPUSLEEP_R_ENGINE_TIMEOUT]	= ETIMEDOUT,
	[GPUSLEEP_R_LEASED]		= EAGAIN,
	[GPUSLEEP_R_HOST_BUDGET]	= ENOSPC,
	[GPUSLEEP_R_VERIFY_FAILED]	= EBADMSG,
	[GPUSLEEP_R_SHORTFALL]		= ENOSPC,
};

int gs_reason_errno(u32 reason)
{
	return reason < GPUSLEEP_R_MAX ? -gs_reason_errnos[reason] : -EIO;
}

static bool gs_kv_release_allowed(const struct gs_domain *d)
{
	return !(d->caps & GPUSLEEP_CAP_PREFIX_CACHING) ||
		(d->caps & GPUSLEEP_CAP_PREFIX_CACHE_RESET);
}

static bool gs_reserved_zero(const u64 *r, unsigned int n)
{
	while (n--)
		if (r[n])
			return false;
	return true;
}

static bool gs_engine_step(u32 type)
{
	return type == GPUSLEEP_EV_DRAIN || type == GPUSLEEP_EV_RESET_CACHES ||
	       type == GPUSLEEP_EV_REPAIR_KV;
}

static struct gs_evq *gs_step_queue(struct gs_domain *d, u32 type)
{
	return gs_engine_step(type) ? &d->engine_q : &d->agent_q;
}

static void gs_timer_cancel(struct gs_domain *d)
{
	d->timer_op = 0;
	d->timer_step = 0;
	cancel_delayed_work(&d->timeout_work);
}

/* When a step of type sent now times out. */
static ktime_t gs_step_deadline(const struct gs_domain *d, u32 type)
{
	unsigned int ms = d->op.timeout_ms;

	if (!ms)
		ms = type == GPUSLEEP_EV_DRAIN ? gs_drain_timeout_ms :
						 gs_step_timeout_ms;
	return ktime_add_ms(ktime_get(), ms);
}

static void gs_timer_arm(struct gs_domain *d, ktime_t deadline)
{
	d->timer_op = d->op.id;
	d->timer_step = d->op.step;
	d->timer_deadline = deadline;
	mod_delayed_work(system_wq, &d->timeout_work,
			 gs_jiffies_until(d->timer_deadline));
}

/* Tell the observers what changed, the state included (from: before). */
static void gs_changed(struct gs_domain *d, u32 from)
{
	struct gs_change c = {
		.from = from,
		.op_id = d->op_active ? d->op.id : 0,
	};

	gs_announce(d, &c);
}

static void gs_set_state(struct gs_domain *d, u32 to)
{
	u32 from = d->state;

	d->state = to;
	gs_changed(d, from);
}

static u32 gs_rest_state(const struct gs_domain *d)
{
	if (d->dead)
		return GPUSLEEP_S_DEAD;
	return d->released ? GPUSLEEP_S_RELEASED : GPUSLEEP_S_AWAKE;
}

/* Queue a record to the engine; it carries the scheduling level. */
static int gs_engine_push(struct gs_domain *d, struct gpusleep_event *ev)
{
	if (!d->sched_paused)
		ev->flags |= GPUSLEEP_EVF_MAY_SCHEDULE;
	return gs_evq_push(&d->engine_q, ev);
}

/*
 * A notification (no answer). An unread one of the same type is replaced:
 * only the newest says what holds now (with the tags of the one it
 * replaces too). With at most one step record queued besides, the queue
 * always has room.
 */
static void gs_notify_engine(struct gs_domain *d, u32 type, u64 op_id,
			     u32 tags)
{
	struct gpusleep_event ev = {
		.op_id = op_id,
		.type = type,
	};

	gs_evq_withdraw_type(&d->engine_q, type, &tags);
	ev.tags = tags;
	/*
	 * Cannot fail while the queue holds at most one step record and one
	 * of each notification (gs_op_unread() keeps it so); never a WARN,
	 * whatever userspace does.
	 */
	if (gs_engine_push(d, &ev))
		pr_err_ratelimited("gpusleep: domain %u: engine queue full, record %u lost\n",
				   d->id, type);
}

/*
 * Raise the level: only between operations, with nothing released (an
 * unconfirmed tag is released), no agent answer outstanding, KV repaired.
 * The record names the tags whose memory was replaced since the last one,
 * for the engine to register again before it schedules.
 */
static void gs_maybe_resume_sched(struct gs_domain *d, u64 op_id)
{
	if (d->op_active || d->released || !d->sched_paused || d->dead ||
	    d->late.valid || d->kv_needs_repair)
		return;
	d->sched_paused = false;
	gs_notify_engine(d, GPUSLEEP_EV_RESUME_SCHED, op_id, d->replaced);
	d->replaced = 0;
}

/* The memory behind tag is new: its generation moves on. */
static void gs_replaced(struct gs_domain *d, u32 tag)
{
	d->generation[gs_tag_index(tag)]++;
	d->replaced |= tag;
}

/* What stayed resident describes a release: none is left once awake. */
static void gs_resident_forget(struct gs_domain *d)
{
	if (d->released)
		return;
	d->resident_bytes = 0;
	d->resident_source = 0;
}

/*
 * The agent failed to pause tag. It rolled back unless bytes says how
 * much stayed unmapped; then the tag stays released (a resume maps it).
 */
static void gs_pause_failed(struct gs_domain *d, u32 tag, u64 bytes)
{
	d->unconfirmed &= ~tag;
	if (bytes) {
		d->bytes_released[gs_tag_index(tag)] = bytes;
	} else {
		d->released &= ~tag;
		d->bytes_released[gs_tag_index(tag)] = 0;
		gs_resident_forget(d);
	}
}

static void gs_pause_done(struct gs_domain *d, u32 tag, u64 bytes)
{
	d->unconfirmed &= ~tag;
	d->bytes_released[gs_tag_index(tag)] = bytes;
}

/*
 * What an agent's answer says besides its status: for a pause, how much
 * the driver saw come free and whether that fell short, and what the
 * process still holds (any pause answer replaces the figure); for any
 * step, contents lost (a rollback mapped memory back fresh: the tag's
 * memory is new, and KV needs its repair before the engine may use it).
 */
static void gs_agent_report(struct gs_domain *d, struct gs_op *op, u32 type,
			    u32 tag, const struct gpusleep_complete *c)
{
	u32 idx = gs_tag_index(tag);

	if (type == GPUSLEEP_EV_PAUSE_TAG) {
		d->freed_bytes[idx] = c->flags & GPUSLEEP_CF_MEASURED ?
				      c->freed_bytes : 0;
		d->shortfall &= ~tag;
		if (c->flags & GPUSLEEP_CF_SHORTFALL) {
			d->shortfall |= tag;
			d->cnt.shortfalls++;
		}
		if (op) {
			op->freed[idx] = d->freed_bytes[idx];
			if (c->flags & GPUSLEEP_CF_SHORTFALL)
				op->shortfall_tags |= tag;
		}
		d->resident_bytes = c->resident_bytes;
		d->resident_source = c->resident_source;
	}
	if (!c->lost_bytes)
		return;
	if (op)
		op->lost_tags |= tag;
	/*
	 * A remap replaces the memory anyway: once, when confirmed
	 * (gs_resume_done()), as its record announced; a failed one
	 * replaced nothing. A pause that lost contents replaced it.
	 */
	if (type == GPUSLEEP_EV_RESUME_TAG)
		return;
	gs_replaced(d, tag);
	if (tag & d->tags.kv)
		d->kv_needs_repair = true;
}

static void gs_resume_done(struct gs_domain *d, u32 tag)
{
	/* Mapped again: new memory (a late remap's twin finds it mapped). */
	if (d->released & tag)
		gs_replaced(d, tag);
	d->released &= ~tag;
	d->unconfirmed &= ~tag;
	d->bytes_released[gs_tag_index(tag)] = 0;
	d->freed_bytes[gs_tag_index(tag)] = 0;
	d->shortfall &= ~tag;
	gs_resident_forget(d);
	if (tag & d->tags.kv)
		d->kv_needs_repair = true;	/* new pages: repair first */
	/* A late answer about this tag is overtaken by this one. */
	if (d->late.valid && d->late.tag == tag)
		d->late.valid = false;
}

/*
 * The awaited step ends unanswered: take its record back if it was never
 * read. The reader never saw it, so nothing was done: a DRAIN that was
 * the only reason to pause lifts the pause, a PAUSE_TAG's tag is not
 * released. True if the record was taken back.
 */
static bool gs_step_take_back(struct gs_domain *d)
{
	struct gs_op *op = &d->op;

	if (op->await == GPUSLEEP_EV_NONE ||
	    !gs_evq_withdraw(gs_step_queue(d, op->await), op->id, op->await))
		return false;
	if (op->await == GPUSLEEP_EV_DRAIN && op->paused_sched)
		d->sched_paused = false;
	if (op->await == GPUSLEEP_EV_PAUSE_TAG) {
		d->released &= ~op->await_tag;
		d->unconfirmed &= ~op->await_tag;
	}
	op->await = GPUSLEEP_EV_NONE;
	return true;
}

/* End the operation in flight with reason; peer: the peer's status. */
static void gs_op_finish(struct gs_domain *d, u32 reason, int peer)
{
	struct gs_op *op = &d->op;
	struct gpusleep_result *res = &d->hist[op->id % GS_HIST_LEN];
	struct gs_change c = {
		.from = d->state,
		.op_id = op->id,
		.res = res,
		.efd = GPUSLEEP_EFD_OP_DONE,
	};
	int err = gs_reason_errno(reason);
	bool taken;
	u64 ns;

	lockdep_assert_held(&d->lock);
	gs_timer_cancel(d);
	gs_step_ended(d, peer ? peer : err, reason);
	taken = gs_step_take_back(d);
	ns = ktime_to_ns(ktime_sub(ktime_get(), op->start));

	memset(res, 0, sizeof(*res));
	res->op_id = op->id;
	res->kind = op->kind;
	res->tags = op->tags;
	res->error = peer ? peer : err;
	res->reason = reason;
	res->done_tags = op->done_tags;
	res->duration_ns = ns;
	memcpy(res->bytes, op->bytes, sizeof(res->bytes));
	memcpy(res->freed_bytes, op->freed, sizeof(res->freed_bytes));
	res->shortfall_tags = op->shortfall_tags;
	res->lost_tags = op->lost_tags;

	if (err) {
		d->cnt.failures++;
		d->last_reason = reason;
		if (err == -ETIMEDOUT)
			d->cnt.timeouts++;
		if (reason == GPUSLEEP_R_CANCELLED)
			d->cnt.cancels++;
	} else if (op->kind == GPUSLEEP_OP_RELEASE) {
		d->cnt.releases++;
	} else {
		d->cnt.resumes++;
	}
	if (op->kind == GPUSLEEP_OP_RELEASE)
		d->last_release_ns = ns;
	else
		d->last_resume_ns = ns;

	/*
	 * A drain the engine read and never finished is called off: "stop
	 * draining", never "go" (the record carries the level, still low).
	 */
	if (c.from == GPUSLEEP_S_DRAINING && err && !d->dead && !taken)
		gs_notify_engine(d, GPUSLEEP_EV_DRAIN_CANCELLED, op->id, 0);

	d->op_active = false;
	WRITE_ONCE(d->last_done_id, op->id);
	/* Made awake: the arbiter's "least recently active" reads this. */
	if (op->kind == GPUSLEEP_OP_RESUME && !d->released && !d->dead)
		d->active_ns = ktime_get_ns();
	gs_maybe_resume_sched(d, op->id);
	d->state = gs_rest_state(d);
	gs_announce(d, &c);
}

/* Send an awaited step; on a full queue the operation fails. */
static bool gs_send_step(struct gs_domain *d, u32 type, u32 tags, u32 flags)
{
	struct gs_op *op = &d->op;
	struct gpusleep_event ev = {
		.op_id = op->id,
		.type = type,
		.tags = tags,
		.flags = flags,
		.step = op->step + 1,
	};
	ktime_t deadline = gs_step_deadline(d, type);
	int ret;

	/* The agent bounds its waits for the GPU by it (CLOCK_MONOTONIC). */
	ev.deadline_ns = ktime_to_ns(deadline);
	/* What the tag's memory will be: a remap replaces it. */
	if (type == GPUSLEEP_EV_RESUME_TAG)
		ev.generation = d->generation[gs_tag_index(tags)] + 1;
	else if (type == GPUSLEEP_EV_REPAIR_KV)
		ev.generation = d->generation[gs_tag_index(tags)];
	if (gs_engine_step(type))
		ret = gs_engine_push(d, &ev);
	else
		ret = gs_evq_push(&d->agent_q, &ev);
	if (ret) {
		gs_op_finish(d, GPUSLEEP_R_QUEUE_FULL, 0);
		return false;
	}
	op->step++;
	op->await = type;
	op->await_tag = gs_engine_step(type) ? 0 : tags;
	gs_step_started(d, type, tags);
	if (type == GPUSLEEP_EV_PAUSE_TAG) {
		/* From now on the agent may be unmapping it. */
		d->released |= tags;
		d->unconfirmed |= tags;
		d->bytes_released[gs_tag_index(tags)] = 0;
		gs_changed(d, d->state);
	}
	gs_timer_arm(d, deadline);
	return true;
}

static void gs_release_next(struct gs_domain *d)
{
	struct gs_op *op = &d->op;
	u32 tag;

	op->await = GPUSLEEP_EV_NONE;
	if (!op->todo) {
		gs_op_finish(d, GPUSLEEP_R_NONE, 0);
		return;
	}
	/* Its group failed: nothing more is unmapped. */
	if (op->stop) {
		gs_op_finish(d, GPUSLEEP_R_CANCELLED, 0);
		return;
	}
	if (!d->agent) {
		gs_op_finish(d, GPUSLEEP_R_AGENT_GONE, 0);
		return;
	}
	tag = op->todo & -op->todo;	/* lowest bit: the fixed order */
	gs_send_step(d, GPUSLEEP_EV_PAUSE_TAG, tag, 0);
}

static void gs_resume_next(struct gs_domain *d)
{
	struct gs_op *op = &d->op;
	u32 tag;

	op->await = GPUSLEEP_EV_NONE;
	if (op->todo) {
		if (!d->agent) {
			gs_op_finish(d, GPUSLEEP_R_AGENT_GONE, 0);
			return;
		}
		tag = op->todo & -op->todo;
		gs_send_step(d, GPUSLEEP_EV_RESUME_TAG, tag, 0);
		return;
	}
	if (d->kv_needs_repair && !op->repair_sent) {
		/*
		 * KV is back with new pages (in this operation, or late in an
		 * earlier one): the engine repairs it, once.
		 */
		op->repair_sent = true;
		gs_send_step(d, GPUSLEEP_EV_REPAIR_KV, d->tags.kv, 0);
		return;
	}
	gs_op_finish(d, GPUSLEEP_R_NONE, 0);
}

/* The engine drained: on to the unmapping (state releasing). */
static void gs_drained(struct gs_domain *d)
{
	if (d->op.tags & d->tags.kv) {
		/* Stale prefix-cache entries go before KV does. */
		gs_send_step(d, GPUSLEEP_EV_RESET_CACHES, d->tags.kv, 0);
		return;
	}
	gs_release_next(d);
}

static void gs_op_begin(struct gs_domain *d, u32 kind, u32 tags,
			const struct gpusleep_op *req)
{
	struct gs_op *op = &d->op;

	memset(op, 0, sizeof(*op));
	op->id = d->next_op_id++;
	op->kind = kind;
	op->tags = tags;
	op->todo = tags;
	op->flags = req->flags;
	op->timeout_ms = req->timeout_ms;
	op->start = ktime_get();
	d->op_active = true;
}

static int gs_refuse(struct gpusleep_op *req, u32 reason, u32 bad)
{
	req->reason = reason;
	req->bad_tags = bad;
	req->op_id = 0;
	return gs_reason_errno(reason);
}

int gs_op_req_valid(u32 kind, struct gpusleep_op *req)
{
	u32 mask = kind == GPUSLEEP_OP_RELEASE ? GPUSLEEP_OPF_RELEASE_MASK :
						 GPUSLEEP_OPF_RESUME_MASK;

	if ((req->flags & ~mask) || req->pad ||
	    !gs_reserved_zero(req->reserved, ARRAY_SIZE(req->reserved)))
		return gs_refuse(req, GPUSLEEP_R_INVALID, 0);
	return 0;
}

/* A tag the domain did not declare is invalid; bad_tags names it. */
static int gs_op_tags_check(const struct gs_domain *d, struct gpusleep_op *req)
{
	if (req->tags & ~d->tags.all)
		return gs_refuse(req, GPUSLEEP_R_INVALID,
				 req->tags & ~d->tags.all);
	return 0;
}

/* The tags of mask whose release is a backup to host RAM. */
static u32 gs_op_backup_tags(const struct gs_domain *d, u32 mask)
{
	u32 i, out = 0;

	for (i = 0; i < d->tags.nr; i++)
		if ((mask & BIT(i)) && gs_tenant_backup_bytes(d, BIT(i)))
			out |= BIT(i);
	return out;
}

int gs_op_release_check(struct gs_domain *d, struct gpusleep_op *req)
{
	u32 tags = req->tags ? req->tags : d->tags.all;
	u32 already;
	int ret;

	lockdep_assert_held(&d->lock);
	/*
	 * The request itself first (it reads no state), then the seed's
	 * order: enabled, declared tags, kv allowed, released, busy.
	 */
	ret = gs_op_req_valid(GPUSLEEP_OP_RELEASE, req);
	if (ret)
		return ret;
	if (!d->agent)
		return gs_refuse(req, GPUSLEEP_R_NOT_ENABLED, 0);
	ret = gs_op_tags_check(d, req);
	if (ret)
		return ret;
	if ((tags & d->tags.kv) && !gs_kv_release_allowed(d))
		return gs_refuse(req, GPUSLEEP_R_KV_NOT_ALLOWED, d->tags.kv);
	already = tags & d->released;
	if (already)
		return gs_refuse(req, GPUSLEEP_R_ALREADY_RELEASED, already);
	/* Nothing new is unmapped before the agent said what it did. */
	if (d->op_active || d->late.valid)
		return gs_refuse(req, GPUSLEEP_R_BUSY, 0);
	/* Backups past the node's host budget: refused, never a host OOM. */
	if (!gs_tenant_fits(d, tags))
		return gs_refuse(req, GPUSLEEP_R_HOST_BUDGET,
				 gs_op_backup_tags(d, tags));
	return 0;
}

int gs_op_release(struct gs_domain *d, struct gpusleep_op *req)
{
	u32 tags = req->tags ? req->tags : d->tags.all;
	int ret;

	ret = gs_op_release_check(d, req);
	if (ret)
		return ret;
	/* Checked and counted as one step against every other release. */
	if (!gs_tenant_reserve(d, tags))
		return gs_refuse(req, GPUSLEEP_R_HOST_BUDGET,
				 gs_op_backup_tags(d, tags));
	gs_op_begin(d, GPUSLEEP_OP_RELEASE, tags, req);
	req->reason = GPUSLEEP_R_NONE;
	req->bad_tags = 0;
	req->op_id = d->op.id;
	d->op.paused_sched = !d->sched_paused;
	d->sched_paused = true;
	gs_set_state(d, GPUSLEEP_S_DRAINING);
	gs_send_step(d, GPUSLEEP_EV_DRAIN, tags,
		     req->flags & GPUSLEEP_OPF_ABORT_INFLIGHT ?
		     GPUSLEEP_EVF_ABORT_INFLIGHT : 0);
	return 0;
}

int gs_op_resume(struct gs_domain *d, struct gpusleep_op *req)
{
	u32 tags, missing;
	bool cancel;
	int ret;

	lockdep_assert_held(&d->lock);
	ret = gs_op_req_valid(GPUSLEEP_OP_RESUME, req);
	if (!ret)
		ret = gs_op_tags_check(d, req);
	if (ret)
		return ret;
	cancel = d->op_active && d->state == GPUSLEEP_S_DRAINING;
	/*
	 * A late agent does not block a resume: its records are read in
	 * order, so the remap comes after whatever it is still doing.
	 */
	if (d->op_active && !cancel)
		return gs_refuse(req, GPUSLEEP_R_BUSY, 0);
	if (req->tags) {
		missing = req->tags & ~d->released;
		if (missing)
			return gs_refuse(req, GPUSLEEP_R_NOT_RELEASED, missing);
		tags = req->tags;
	} else {
		tags = d->released;
	}
	/*
	 * A lease holds its tags (reclaim.c): no one else resumes them, nor
	 * calls off the release that takes them. The lease's own return
	 * lets go of them before it resumes.
	 */
	if (tags & d->leased)
		return gs_refuse(req, GPUSLEEP_R_LEASED, tags & d->leased);
	if (cancel && (d->op.tags & d->leased))
		return gs_refuse(req, GPUSLEEP_R_LEASED, d->op.tags & d->leased);
	if (tags && !d->agent)
		return gs_refuse(req, GPUSLEEP_R_NOT_ENABLED, 0);
	/*
	 * The reference controller calls a pending drain off only when the
	 * resume leaves nothing released; otherwise the release carries on.
	 * One operation runs at a time, so such a resume is refused busy
	 * (docs/design.md): the caller resumes once the release has ended.
	 */
	if (cancel && (d->released & ~tags))
		return gs_refuse(req, GPUSLEEP_R_BUSY, 0);

	if (cancel)
		gs_op_finish(d, GPUSLEEP_R_CANCELLED, 0);

	gs_op_begin(d, GPUSLEEP_OP_RESUME, tags, req);
	req->reason = GPUSLEEP_R_NONE;
	req->bad_tags = 0;
	req->op_id = d->op.id;
	if (tags || d->kv_needs_repair)
		gs_set_state(d, GPUSLEEP_S_RESUMING);
	gs_resume_next(d);
	return 0;
}

/*
 * Groups (group.c): the release just started by gs_op_release() stops
 * after its drain, held, until gs_op_group_go() or gs_op_group_cancel().
 */
void gs_op_hold(struct gs_domain *d)
{
	lockdep_assert_held(&d->lock);
	if (d->op_active && d->op.kind == GPUSLEEP_OP_RELEASE)
		d->op.hold = true;
}

/* Every rank drained: let held release op_id unmap. */
void gs_op_group_go(struct gs_domain *d, u64 op_id)
{
	lockdep_assert_held(&d->lock);
	if (!d->op_active || d->op.id != op_id || !d->op.held)
		return;
	d->op.hold = false;
	d->op.held = false;
	gs_set_state(d, GPUSLEEP_S_RELEASING);
	gs_drained(d);
}

/*
 * Call off release op_id while nothing of it is unmapped (draining, or
 * held): it fails "cancelled", the engine is told to stop draining and
 * may schedule again. False if op_id is not such a release.
 */
bool gs_op_group_cancel(struct gs_domain *d, u64 op_id)
{
	lockdep_assert_held(&d->lock);
	if (!d->op_active || d->op.id != op_id ||
	    d->state != GPUSLEEP_S_DRAINING)
		return false;
	gs_op_finish(d, GPUSLEEP_R_CANCELLED, 0);
	return true;
}

/*
 * The group of release op_id failed while it unmaps: it sends no new
 * unmap step. A step record not read yet is taken back (nothing of it was
 * done) and the release ends "cancelled" now: true. A step read ends as
 * it ends (an answer, or its timeout), and the release with it: false.
 */
bool gs_op_group_stop(struct gs_domain *d, u64 op_id)
{
	lockdep_assert_held(&d->lock);
	if (!d->op_active || d->op.id != op_id ||
	    d->op.kind != GPUSLEEP_OP_RELEASE)
		return false;
	d->op.stop = true;
	if (d->op.await != GPUSLEEP_EV_NONE && !gs_step_take_back(d))
		return false;
	gs_op_finish(d, GPUSLEEP_R_CANCELLED, 0);
	return true;
}

/*
 * Why a step answered with status failed. A RESUME_TAG answered -EBADMSG:
 * the restored backup failed its checksum (GPUSLEEP_RTF_VERIFIED).
 */
static u32 gs_step_fail_reason(u32 type, int status)
{
	if (type == GPUSLEEP_EV_RESUME_TAG && status == -EBADMSG)
		return GPUSLEEP_R_VERIFY_FAILED;
	return gs_engine_step(type) ? GPUSLEEP_R_ENGINE_FAILED :
				      GPUSLEEP_R_AGENT_FAILED;
}

/* A late answer to a timed-out agent step: make the state follow it. */
static int gs_op_complete_late(struct gs_domain *d,
			       const struct gpusleep_complete *c)
{
	u32 tag = d->late.tag;

	d->late.valid = false;
	gs_agent_report(d, NULL, d->late.type, tag, c);
	if (d->late.type == GPUSLEEP_EV_PAUSE_TAG) {
		if (c->status)
			gs_pause_failed(d, tag, c->bytes);
		else
			gs_pause_done(d, tag, c->bytes);
	} else if (!c->status) {
		gs_resume_done(d, tag);
	}
	/* A resume may be running meanwhile: its end decides the rest. */
	if (!d->op_active) {
		gs_maybe_resume_sched(d, 0);
		gs_set_state(d, gs_rest_state(d));
	} else {
		gs_changed(d, d->state);
	}
	return 0;
}

int gs_op_complete_valid(const struct gpusleep_complete *c)
{
	switch (c->type) {
	case GPUSLEEP_EV_DRAIN:
	case GPUSLEEP_EV_RESET_CACHES:
	case GPUSLEEP_EV_REPAIR_KV:
	case GPUSLEEP_EV_PAUSE_TAG:
	case GPUSLEEP_EV_RESUME_TAG:
		break;
	default:
		return -EINVAL;	/* not an event that takes an answer */
	}
	/* Only errnos userspace knows: never -ERESTARTSYS and its kin. */
	if (c->status > 0 || c->status < -EHWPOISON)
		return -EINVAL;
	/* What was freed or lost is the agent's to say, about a tag. */
	if ((c->flags & ~GPUSLEEP_CF_MASK) ||
	    (gs_engine_step(c->type) &&
	     (c->flags || c->freed_bytes || c->lost_bytes)))
		return -EINVAL;
	/*
	 * A pause that succeeded unmapped its tag: no contents of it were
	 * lost (the remap replaces the memory, and counts that once).
	 */
	if (c->type == GPUSLEEP_EV_PAUSE_TAG && !c->status && c->lost_bytes)
		return -EINVAL;
	return 0;
}

int gs_op_complete(struct gs_domain *d, struct gs_file *gf,
		   const struct gpusleep_complete *c)
{
	struct gs_op *op = &d->op;
	bool engine = gf->role == GPUSLEEP_ROLE_ENGINE;
	u32 idx, reason;
	int ret;

	lockdep_assert_held(&d->lock);
	ret = gs_op_complete_valid(c);
	if (ret)
		return ret;
	if (!engine && d->late.valid && d->late.op_id == c->op_id &&
	    d->late.step == c->step && d->late.type == c->type)
		return gs_op_complete_late(d, c);
	if (!d->op_active || op->id != c->op_id || op->step != c->step ||
	    op->await != c->type || engine != gs_engine_step(c->type))
		return -ESTALE;

	reason = c->status ? gs_step_fail_reason(c->type, c->status) :
			     GPUSLEEP_R_NONE;
	gs_step_ended(d, c->status, reason);
	if (!engine)
		gs_agent_report(d, op, c->type, op->await_tag, c);
	if (c->status) {
		if (c->type == GPUSLEEP_EV_PAUSE_TAG)
			gs_pause_failed(d, op->await_tag, c->bytes);
		/*
		 * Its backup's contents are lost: never a silent success. The
		 * tag stays released (its remap, when confirmed, is new
		 * memory: the generation moves on then, as for any remap).
		 */
		if (reason == GPUSLEEP_R_VERIFY_FAILED)
			op->lost_tags |= op->await_tag;
		op->await = GPUSLEEP_EV_NONE;
		gs_op_finish(d, reason, c->status);
		return 0;
	}

	switch (c->type) {
	case GPUSLEEP_EV_DRAIN: {
		struct gs_change chg = {
			.from = d->state,
			.op_id = op->id,
			.efd = GPUSLEEP_EFD_DRAINED,
		};

		op->await = GPUSLEEP_EV_NONE;
		/* A group's rank waits, drained, for the group's go. */
		if (op->hold) {
			op->held = true;
			gs_announce(d, &chg);
			break;
		}
		d->state = GPUSLEEP_S_RELEASING;
		gs_announce(d, &chg);
		gs_drained(d);
		break;
	}
	case GPUSLEEP_EV_RESET_CACHES:
		gs_release_next(d);
		break;
	case GPUSLEEP_EV_PAUSE_TAG:
		idx = gs_tag_index(op->await_tag);
		gs_pause_done(d, op->await_tag, c->bytes);
		op->bytes[idx] = c->bytes;
		op->done_tags |= op->await_tag;
		op->todo &= ~op->await_tag;
		gs_changed(d, d->state);
		gs_release_next(d);
		break;
	case GPUSLEEP_EV_RESUME_TAG:
		idx = gs_tag_index(op->await_tag);
		gs_resume_done(d, op->await_tag);
		op->bytes[idx] = c->bytes;
		op->done_tags |= op->await_tag;
		op->todo &= ~op->await_tag;
		gs_changed(d, d->state);
		gs_resume_next(d);
		break;
	case GPUSLEEP_EV_REPAIR_KV:
		d->kv_needs_repair = false;
		gs_resume_next(d);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

void gs_op_unread(struct gs_domain *d, struct gs_evq *q,
		  const struct gpusleep_event *ev)
{
	struct gpusleep_complete c = { .status = -EFAULT };
	struct gs_op *op = &d->op;

	lockdep_assert_held(&d->lock);
	/*
	 * A go whose level fell since it was taken (a release began, and
	 * another engine thread may have read its drain already): put back,
	 * it would tell the engine to schedule after that drain. It is
	 * dropped; the tags it named go with the next go.
	 */
	if (ev->type == GPUSLEEP_EV_RESUME_SCHED && d->sched_paused) {
		d->replaced |= ev->tags;
		return;
	}
	/* A notification: back in line, or merged into a newer one. */
	if (!gs_engine_step(ev->type) && ev->type != GPUSLEEP_EV_PAUSE_TAG &&
	    ev->type != GPUSLEEP_EV_RESUME_TAG) {
		gs_evq_unpop(q, ev);
		return;
	}
	/* A step record goes back only while its step is the one awaited. */
	if (d->op_active && op->id == ev->op_id && op->step == ev->step &&
	    op->await == ev->type) {
		gs_evq_unpop(q, ev);
		return;
	}
	/*
	 * Its step ended meanwhile (it timed out, or the operation was
	 * called off) and counted it read. An agent step awaiting its late
	 * answer gets none: it is over as if taken back unread (a failed
	 * answer: a pause rolled back, a remap not done). Anything else
	 * the step's end has settled already.
	 */
	if (d->late.valid && d->late.op_id == ev->op_id &&
	    d->late.step == ev->step && d->late.type == ev->type)
		gs_op_complete_late(d, &c);
}

int gs_op_result(struct gs_domain *d, u64 id, struct gpusleep_result *res)
{
	const struct gpusleep_result *h;

	lockdep_assert_held(&d->lock);
	if (!id || id > d->last_done_id)
		return -ENOENT;
	h = &d->hist[id % GS_HIST_LEN];
	if (h->op_id != id)
		return -ENOENT;
	*res = *h;
	return 0;
}

void gs_op_agent_gone(struct gs_domain *d)
{
	struct gs_change c = { .agent_gone = true };

	lockdep_assert_held(&d->lock);
	d->agent = NULL;
	/*
	 * What the agent did with a step it read and never answered is now
	 * unknowable: its tag stays released (unconfirmed for a pause), and a
	 * resume through the next agent maps it back.
	 */
	d->late.valid = false;
	if (d->op_active && d->op.await != GPUSLEEP_EV_NONE &&
	    !gs_engine_step(d->op.await))
		gs_op_finish(d, GPUSLEEP_R_AGENT_GONE, 0);
	gs_evq_clear(&d->agent_q);
	c.from = d->state;
	c.op_id = d->op_active ? d->op.id : 0;
	gs_announce(d, &c);
}

void gs_op_engine_gone(struct gs_domain *d)
{
	struct gs_change c = { .efd = GPUSLEEP_EFD_ALL };

	lockdep_assert_held(&d->lock);
	WRITE_ONCE(d->dead, true);
	d->late.valid = false;
	d->sched_paused = false;	/* there is no scheduler any more */
	gs_evq_clear(&d->engine_q);
	gs_evq_clear(&d->agent_q);	/* the agent's read() returns 0 now */
	if (d->op_active)
		gs_op_finish(d, GPUSLEEP_R_ENGINE_GONE, 0);
	gs_timer_cancel(d);
	c.from = d->state;
	d->state = GPUSLEEP_S_DEAD;
	gs_announce(d, &c);
}

void gs_op_timeout_work(struct work_struct *work)
{
	struct gs_domain *d = container_of(to_delayed_work(work),
					   struct gs_domain, timeout_work);
	struct gs_op *op = &d->op;
	u32 reason;

	mutex_lock(&d->lock);
	/*
	 * A step answered while this work waited for the lock may have armed
	 * the timer again (for the next step, or a new operation): that newer
	 * arm is pending, and this run is not its expiry.
	 */
	if (delayed_work_pending(&d->timeout_work))
		goto out;
	if (!d->op_active || op->await == GPUSLEEP_EV_NONE ||
	    d->timer_op != op->id || d->timer_step != op->step)
		goto out;
	/* A jiffies timer may fire a little early: never end a step early. */
	if (ktime_before(ktime_get(), d->timer_deadline)) {
		mod_delayed_work(system_wq, &d->timeout_work,
				 gs_jiffies_until(d->timer_deadline));
		goto out;
	}
	switch (op->await) {
	case GPUSLEEP_EV_DRAIN:
		reason = GPUSLEEP_R_DRAIN_TIMEOUT;
		break;
	case GPUSLEEP_EV_PAUSE_TAG:
	case GPUSLEEP_EV_RESUME_TAG:
		reason = GPUSLEEP_R_AGENT_TIMEOUT;
		/* Read and unanswered: the answer may still come. */
		if (!gs_step_take_back(d)) {
			d->late.valid = true;
			d->late.op_id = op->id;
			d->late.step = op->step;
			d->late.type = op->await;
			d->late.tag = op->await_tag;
		}
		break;
	default:
		reason = GPUSLEEP_R_ENGINE_TIMEOUT;
		break;
	}
	gs_op_finish(d, reason, 0);
out:
	mutex_unlock(&d->lock);
}

void gs_fill_state(struct gs_domain *d, struct gpusleep_state *st)
{
	u64 last = d->last_done_id;

	lockdep_assert_held(&d->lock);
	memset(st, 0, sizeof(*st));
	st->id = d->id;
	st->state = d->state;
	st->released = d->released;
	st->unconfirmed = d->unconfirmed;
	st->caps = d->caps;
	if (d->state == GPUSLEEP_S_DRAINING)
		st->flags |= GPUSLEEP_SF_DRAIN_PENDING;
	if (d->op_active)
		st->flags |= GPUSLEEP_SF_OP_IN_FLIGHT;
	if (d->agent)
		st->flags |= GPUSLEEP_SF_AGENT_ATTACHED;
	if (gs_kv_release_allowed(d))
		st->flags |= GPUSLEEP_SF_KV_RELEASE_ALLOWED;
	if (d->sched_paused)
		st->flags |= GPUSLEEP_SF_SCHED_PAUSED;
	if (d->dead)
		st->flags |= GPUSLEEP_SF_DEAD;
	if (d->kv_needs_repair)
		st->flags |= GPUSLEEP_SF_KV_REPAIR_PENDING;
	if (d->late.valid || d->unconfirmed)
		st->flags |= GPUSLEEP_SF_AGENT_UNCONFIRMED;
	if (d->op_active && d->op.held)
		st->flags |= GPUSLEEP_SF_GROUP_HELD;
	st->op_in_flight = d->op_active ? d->op.id : 0;
	st->last_op_id = d->next_op_id - 1;
	memcpy(st->bytes_released, d->bytes_released,
	       sizeof(st->bytes_released));
	memcpy(st->freed_bytes, d->freed_bytes, sizeof(st->freed_bytes));
	st->shortfall = d->shortfall;
	st->resident_bytes = d->resident_bytes;
	st->resident_source = d->resident_source;
	memcpy(st->generation, d->generation, sizeof(st->generation));
	if (last)
		st->last = d->hist[last % GS_HIST_LEN];
}
