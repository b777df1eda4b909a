// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: groups of domains, released and resumed as one operation.
 *
 * A group is an fd (anon inode) with up to GPUSLEEP_GROUP_MAX_RANKS member
 * domains, its ranks. A group release asks every rank for a release that
 * stops after its drain (held, op.c); when every rank is held, every rank
 * goes on to unmap; when every rank has finished, the group's operation
 * finishes. Any failure rolls the ranks back: drains are cancelled, ranks
 * that released something are resumed, and only then does the group's
 * operation finish, naming the first rank that failed. An operation with
 * a deadline finishes by it: what its ranks still do then (a rollback, a
 * resume's remaps) goes on as the next operation id (settling).
 * docs/groups.md has the sequences, docs/blocking-and-lifetimes.md the
 * rules below.
 *
 * Lifetime. g->kref counts the references: one per group fd, one for the
 * ranks' back-pointers (domain->group) from creation until
 * gs_group_detach() has cleared every one of them, and one per queued
 * run of g->work. nr_files counts the fds (under gs_groups_lock, with the
 * name list): the last close detaches an idle group at once; a group
 * closed mid-operation cancels a release (rollback) or lets a resume
 * finish, from its work, which detaches it once idle. Freed with its last
 * reference (gs_group_free()): the id, the members, the module reference.
 * Nothing frees g while a lock of it is held: every put comes after the
 * unlock, by a holder of another reference or by the work's own.
 *
 * Locking: gs_groups_lock (names, nr_files; nothing nests in it), then
 * group->lock, then one domain->lock at a time (gpusleep.h). The group
 * steps (gs_group_step()) under group->lock only: in the ioctl that
 * starts an operation; in g->work, a delayed work on an ordered queue,
 * queued by a change of a rank (gs_group_kick(), under that rank's
 * domain->lock: it never takes group->lock) and armed for the deadline;
 * and in the engine's or agent's thread whose COMPLETE changed what the
 * group waits for (gs_group_answered(): if group->lock is held, its
 * holder steps for it in gs_group_unlock()). A group release holds its
 * engines' wake-ups until group->lock is dropped.
 */
#include <linux/anon_inodes.h>
#include <linux/bitmap.h>
#include <linux/bitops.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/eventfd.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "compat.h"
#include "gpusleep.h"

#define GS_GROUP_HIST	8	/* finished group results remembered */
#define GS_GF_STEP	0	/* bit of gs_group.flags */

enum gs_gphase {
	GS_GP_IDLE,
	GS_GP_DRAIN,		/* release: waiting for every rank's drain */
	GS_GP_UNMAP,		/* release: every rank unmapping */
	GS_GP_RESUME,		/* resume: every rank remapping */
	GS_GP_ROLLBACK,		/* release failed: undoing it */
};

enum gs_mstate {
	GS_M_IDLE,		/* no part in the operation (not started) */
	GS_M_RUNNING,		/* its operation out.op_id runs */
	GS_M_FINISHED,		/* it finished (out.error, out.reason) */
	GS_M_RB_RUNNING,	/* the rollback's resume runs */
	GS_M_RB_FINISHED,	/* nothing more to undo */
};

/* A rank: allocated when it joins, freed with its group. */
struct gs_member {
	struct gs_domain *d;	/* referenced */
	u32 st;			/* enum gs_mstate */
	u32 tags;		/* the tags its release resolved to */
	bool held;		/* drained, waiting for the go */
	bool no_agent;		/* held with no agent to unmap */
	/* On d->waiters for its running operation (or rollback): its result. */
	struct gs_waiter w;
	struct gpusleep_group_rank out;
	/* Its entry in the newest result (g->last_done_id). */
	struct gpusleep_group_rank last;
};

/* Fixed for its life: id, name, cred, pid. */
struct gs_group {
	struct kref kref;
	struct list_head node;	/* on gs_groups while nr_files */
	unsigned int nr_files;	/* under gs_groups_lock */
	u32 id;
	char name[GPUSLEEP_NAME_LEN];
	const struct cred *cred;	/* the creator's */
	struct pid *pid;		/* the creator's: its pid namespace */
	struct mutex lock;	/* everything below */
	/*
	 * Ranks whose state changed since the group last looked at them
	 * (atomic, set under the rank's domain->lock): a step looks at
	 * those alone.
	 */
	DECLARE_BITMAP(changed, GPUSLEEP_GROUP_MAX_RANKS);
	/*
	 * GS_GF_STEP (atomic, outside the lock): a rank's answer found the
	 * lock held; whoever unlocks next steps the group for it.
	 */
	unsigned long flags;
	/* No fd is left: a release is cancelled, idle it detaches. */
	bool closed;
	bool detached;		/* no rank points here any more */
	unsigned int nr;
	struct gs_member *m[GPUSLEEP_GROUP_MAX_RANKS];

	/* The operation in flight (phase != GS_GP_IDLE). */
	u32 phase;
	u64 op_id;
	u64 last_id;		/* newest operation issued */
	u32 kind;
	u32 tags;
	u32 timeout_ms;
	ktime_t start;
	ktime_t deadline;	/* 0: none */
	u32 fail_rank;		/* GPUSLEEP_GROUP_NO_RANK while none failed */
	u32 fail_reason;
	s32 fail_error;

	/* Finished operations. */
	u64 last_done_id;	/* READ_ONCE outside the lock */
	struct gpusleep_group_result hist[GS_GROUP_HIST];
	struct eventfd_ctx *efd;

	struct list_head waiters;	/* struct gs_waiter of blocked calls */
	wait_queue_head_t wq;	/* an operation finished */
	/* Steps g: queued by a rank's change, or armed for the deadline. */
	struct delayed_work work;
};

/* private_data of a group fd. */
struct gs_gfile {
	struct gs_group *g;
	struct gs_uid uid;	/* charged one GS_UC_FDS */
	u64 seen_done;		/* newest result this fd fetched (poll) */
	/*
	 * Ranks added through this fd (bit i: rank i), under g->lock: its
	 * holder proved with an engine or controller fd that it may control
	 * them, as a domain fd proves it (a grant).
	 */
	u64 added;
};

/*
 * Every group's work runs here, one at a time (ordered): module exit
 * destroys it, and no group outlives the module (each holds it).
 */
static struct workqueue_struct *gs_group_wq;

/* Live groups' names, and their nr_files. Nothing is taken under it. */
static DEFINE_MUTEX(gs_groups_lock);
static LIST_HEAD(gs_groups);
static DEFINE_IDA(gs_group_ids);

static const struct file_operations gs_group_fops;

/* The last reference is gone: no fd, no rank, no work can reach g. */
static void gs_group_free(struct kref *kref)
{
	struct gs_group *g = container_of(kref, struct gs_group, kref);
	unsigned int i;

	WARN_ON(!g->detached || g->nr_files);
	for (i = 0; i < g->nr; i++) {
		gs_domain_put(g->m[i]->d);
		kfree(g->m[i]);
	}
	if (g->efd)
		eventfd_ctx_put(g->efd);
	/* Its id is free only now: no rank shows it any more. */
	ida_free(&gs_group_ids, g->id);
	put_pid(g->pid);
	put_cred(g->cred);
	mutex_destroy(&g->lock);
	kfree(g);
	/* gs_groups_exit() waits for a work that puts the last one. */
	module_put(THIS_MODULE);
}

/*
 * Put a reference. The last one frees g: it is put with no lock held (by
 * a work run, an fd's release, an answer). A put under a lock (a
 * redundant one of a queueing, a cancelled work's) is of a reference the
 * caller does not live on, while it holds another: never the last.
 */
static void gs_group_put(struct gs_group *g)
{
	kref_put(&g->kref, gs_group_free);
}

/*
 * Run g's work now, with a reference for the run. The caller holds a
 * reference of its own (an fd, the back-pointer of a rank whose lock it
 * holds, the running work's), so the put of a redundant one is never the
 * last.
 */
static void gs_group_queue_now(struct gs_group *g)
{
	kref_get(&g->kref);
	if (mod_delayed_work(gs_group_wq, &g->work, 0))
		gs_group_put(g);	/* it was queued, with its reference */
}

/* Run g's work at when, unless it is queued already (sooner). */
static void gs_group_queue_at(struct gs_group *g, ktime_t when)
{
	kref_get(&g->kref);
	if (!queue_delayed_work(gs_group_wq, &g->work, gs_jiffies_until(when)))
		gs_group_put(g);
}

/*
 * A rank's state changed (its domain->lock held, d->group set: the
 * back-pointers' reference holds g): mark it changed and have the work
 * look again while an operation runs. Between operations there is
 * nothing to move on, and a queued work would only wake a kworker per
 * rank transition. A phase set concurrently is seen: gs_group_start()
 * steps the group itself once the phase is set, looking at every rank.
 */
void gs_group_kick(struct gs_domain *d)
{
	struct gs_group *g = d->group;

	lockdep_assert_held(&d->lock);
	set_bit(d->group_rank, g->changed);
	if (READ_ONCE(g->phase) == GS_GP_IDLE)
		return;
	if (d->group_defer)
		d->group_due = true;	/* gs_group_answered() steps it */
	else
		gs_group_queue_now(g);
}

struct gs_group *gs_group_due(struct gs_domain *d)
{
	lockdep_assert_held(&d->lock);
	if (!d->group_due)
		return NULL;
	d->group_due = false;
	/* d->group is set: the back-pointers' reference holds g. */
	kref_get(&d->group->kref);
	return d->group;
}

void gs_group_name(const struct gs_group *g, char *buf, size_t size)
{
	strscpy(buf, g->name, size);
}

u32 gs_group_id(const struct gs_group *g)
{
	return g->id;
}

static bool gs_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/* Record rank i as the cause of the failure, if it is the first. */
static void gs_group_fail(struct gs_group *g, unsigned int i, u32 reason,
			  s32 error)
{
	g->m[i]->out.flags |= GPUSLEEP_GRF_FAILED;
	if (g->fail_rank != GPUSLEEP_GROUP_NO_RANK)
		return;
	g->fail_rank = i;
	g->fail_reason = reason;
	g->fail_error = error ? error : gs_reason_errno(reason);
}

/*
 * Follow rank m's operation id (its release or resume, or the rollback's
 * resume): its result is delivered to m->w, however many operations the
 * rank runs after it. domain->lock held.
 */
static void gs_member_follow(struct gs_member *m, u64 id)
{
	lockdep_assert_held(&m->d->lock);
	list_del_init(&m->w.node);
	if (gs_waiter_add(m->d, id, &m->w)) {
		/* It has just started: in flight, or the newest result. */
		memset(&m->w.res, 0, sizeof(m->w.res));
		m->w.res.op_id = id;
		m->w.res.reason = GPUSLEEP_R_BUSY;
		m->w.res.error = gs_reason_errno(GPUSLEEP_R_BUSY);
		m->w.done = true;
	}
}

/* Stop following rank m's operation (the group lets it go). */
static void gs_member_unfollow(struct gs_member *m)
{
	mutex_lock(&m->d->lock);
	list_del_init(&m->w.node);
	mutex_unlock(&m->d->lock);
}

/* Follow rank m's operation (or its rollback) to its end. */
static void gs_member_sync(struct gs_member *m)
{
	struct gs_domain *d = m->d;
	struct gpusleep_result res;
	bool rb = m->st == GS_M_RB_RUNNING;

	if (m->st != GS_M_RUNNING && !rb)
		return;
	mutex_lock(&d->lock);
	if (!m->w.done) {
		m->held = d->op_active && d->op.id == m->w.op_id &&
			  d->op.held;
		m->no_agent = m->held && !d->agent;
		mutex_unlock(&d->lock);
		return;
	}
	res = m->w.res;
	m->out.released = d->released;
	mutex_unlock(&d->lock);

	m->held = false;
	m->no_agent = false;
	if (rb) {
		m->st = GS_M_RB_FINISHED;
		if (!res.error)
			m->out.flags |= GPUSLEEP_GRF_ROLLED_BACK;
		return;
	}
	m->st = GS_M_FINISHED;
	m->tags = res.tags;
	m->out.error = res.error;
	m->out.reason = res.reason;
	if (!res.error)
		m->out.flags |= GPUSLEEP_GRF_DONE;
}

/* Why rank m, still running at the deadline, is late. */
static u32 gs_member_late_reason(struct gs_member *m)
{
	struct gs_domain *d = m->d;
	u32 reason;

	mutex_lock(&d->lock);
	if (d->state == GPUSLEEP_S_DRAINING)
		reason = GPUSLEEP_R_DRAIN_TIMEOUT;
	else if (d->op_active && (d->op.await == GPUSLEEP_EV_RESET_CACHES ||
				  d->op.await == GPUSLEEP_EV_REPAIR_KV))
		reason = GPUSLEEP_R_ENGINE_TIMEOUT;
	else
		reason = GPUSLEEP_R_AGENT_TIMEOUT;
	mutex_unlock(&d->lock);
	return reason;
}

/*
 * The result of the operation in flight, to its waiters, the eventfd and
 * pollers; every rank's entry kept as the newest breakdown. flags and
 * settle_op_id as the result says (a settling operation: ranks still at
 * work are flagged GPUSLEEP_GRF_RUNNING).
 */
static void gs_group_publish(struct gs_group *g, u32 flags, u64 settle_id)
{
	struct gpusleep_group_result *res = &g->hist[g->op_id % GS_GROUP_HIST];
	bool failed = g->fail_rank != GPUSLEEP_GROUP_NO_RANK;
	struct gs_waiter *w, *tmp;
	unsigned int i;

	lockdep_assert_held(&g->lock);
	memset(res, 0, sizeof(*res));
	res->op_id = g->op_id;
	res->kind = g->kind;
	res->tags = g->tags;
	res->nr_ranks = g->nr;
	res->rank = g->fail_rank;
	res->duration_ns = ktime_to_ns(ktime_sub(ktime_get(), g->start));
	res->flags = flags;
	res->settle_op_id = settle_id;
	if (failed) {
		res->error = g->fail_error;
		res->reason = g->fail_reason;
		res->domain = g->m[g->fail_rank]->d->id;
	}
	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];
		struct gs_domain *d = m->d;

		mutex_lock(&d->lock);
		m->out.released = d->released;
		mutex_unlock(&d->lock);
		m->last = m->out;
		if (m->st == GS_M_RUNNING || m->st == GS_M_RB_RUNNING)
			m->last.flags |= GPUSLEEP_GRF_RUNNING;
		/* A failed release that could not be undone on this rank. */
		else if (!settle_id && failed && g->kind == GPUSLEEP_OP_RELEASE &&
			 (m->out.released & m->tags))
			m->last.flags |= GPUSLEEP_GRF_STILL_RELEASED;
	}
	WRITE_ONCE(g->last_done_id, g->op_id);
	/* Every blocked call of this operation gets its own copy. */
	list_for_each_entry_safe(w, tmp, &g->waiters, node) {
		if (w->op_id != res->op_id)
			continue;
		w->gres = *res;
		w->done = true;
		list_del_init(&w->node);
	}
	if (g->efd)
		eventfd_signal(g->efd);
	wake_up_all(&g->wq);
}

/* Nothing runs any more: the operation ends. */
static void gs_group_finish(struct gs_group *g)
{
	unsigned int i;

	gs_group_publish(g, 0, 0);
	for (i = 0; i < g->nr; i++)
		g->m[i]->st = GS_M_IDLE;
	WRITE_ONCE(g->phase, GS_GP_IDLE);
	/* An armed deadline has nothing left to do (and holds g). */
	if (cancel_delayed_work(&g->work))
		gs_group_put(g);	/* not the last: the caller has its own */
}

/*
 * The deadline passed and ranks are still at work (a rollback's resume,
 * the step a rank has read, a resume's remaps): the operation ends now,
 * its result saying so, and what its ranks still do goes on as the next
 * operation id, started by the kernel: the same kind, tags and failure,
 * no deadline (each rank's steps time out on their own). The group takes
 * no new operation (-EBUSY) until that one ends; GROUP_WAIT waits for it.
 */
static void gs_group_settle(struct gs_group *g)
{
	gs_group_publish(g, GPUSLEEP_GROUP_RF_SETTLING, g->last_id + 1);
	g->op_id = ++g->last_id;
	g->deadline = 0;
}

/*
 * Undo a failed group release, rank by rank: cancel what still drains,
 * wait for what unmaps, resume what was released. Finishes the group's
 * operation once nothing runs any more.
 */
static void gs_group_rollback(struct gs_group *g)
{
	struct gpusleep_op req;
	bool waiting = false;
	unsigned int i;
	int ret;

	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];
		struct gs_domain *d = m->d;

		if (m->st == GS_M_RUNNING) {
			/*
			 * Draining or held: called off. Unmapping: no new
			 * step; a step not read yet is taken back (called
			 * off too), the one read ends within its timeout.
			 */
			mutex_lock(&d->lock);
			if (gs_op_group_cancel(d, m->out.op_id) ||
			    gs_op_group_stop(d, m->out.op_id))
				m->out.flags |= GPUSLEEP_GRF_CANCELLED;
			mutex_unlock(&d->lock);
			gs_member_sync(m);
		}
		if (m->st == GS_M_FINISHED) {
			memset(&req, 0, sizeof(req));
			req.timeout_ms = g->timeout_ms;
			mutex_lock(&d->lock);
			req.tags = d->released & m->tags;
			/* Nothing released: a repair may still be due. */
			if (d->dead || (!req.tags &&
					(d->released || !d->kv_needs_repair)))
				ret = -ENOENT;
			else
				ret = gs_op_resume(d, &req);
			if (!ret)
				gs_member_follow(m, req.op_id);
			mutex_unlock(&d->lock);
			if (!ret) {
				m->out.rollback_op_id = req.op_id;
				m->st = GS_M_RB_RUNNING;
				gs_member_sync(m);
			} else {
				m->st = GS_M_RB_FINISHED;
			}
		}
		if (m->st == GS_M_RUNNING || m->st == GS_M_RB_RUNNING)
			waiting = true;
	}
	if (!waiting)
		gs_group_finish(g);
}

/* Rank i, still at work at the deadline, makes the group late. */
static void gs_group_late(struct gs_group *g)
{
	struct gs_member *m;
	unsigned int i, late = GPUSLEEP_GROUP_NO_RANK;

	for (i = 0; i < g->nr; i++) {
		m = g->m[i];
		if (m->st != GS_M_RUNNING)
			continue;
		/* The first rank still at work; else the first held. */
		if (!m->held) {
			late = i;
			break;
		}
		if (late == GPUSLEEP_GROUP_NO_RANK)
			late = i;
	}
	if (late != GPUSLEEP_GROUP_NO_RANK)
		gs_group_fail(g, late, gs_member_late_reason(g->m[late]), 0);
}

/* Look at the ranks that changed and move the group's operation on. */
static void gs_group_advance(struct gs_group *g, bool late)
{
	bool all_held = true, running = false;
	unsigned int i;

	if (g->phase == GS_GP_ROLLBACK) {
		gs_group_rollback(g);
		return;
	}
	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];

		if (m->st == GS_M_FINISHED && m->out.error)
			gs_group_fail(g, i, m->out.reason, m->out.error);
		else if (m->st == GS_M_RUNNING && m->no_agent)
			gs_group_fail(g, i, GPUSLEEP_R_AGENT_GONE, 0);
		if (m->st == GS_M_RUNNING) {
			running = true;
			if (!m->held)
				all_held = false;
		}
	}
	/* Its last fd closed: nobody wants it any more, roll back. */
	if (g->closed && g->phase != GS_GP_RESUME)
		gs_group_fail(g, 0, GPUSLEEP_R_CANCELLED, 0);
	/* Past the deadline: the first rank still at work is the late one. */
	if (late && running)
		gs_group_late(g);

	switch (g->phase) {
	case GS_GP_DRAIN:
	case GS_GP_UNMAP:
		if (g->fail_rank != GPUSLEEP_GROUP_NO_RANK) {
			WRITE_ONCE(g->phase, GS_GP_ROLLBACK);
			gs_group_rollback(g);
			return;
		}
		if (g->phase == GS_GP_DRAIN && all_held && running) {
			/* Every rank drained: every rank unmaps now. */
			WRITE_ONCE(g->phase, GS_GP_UNMAP);
			for (i = 0; i < g->nr; i++) {
				struct gs_domain *d = g->m[i]->d;

				g->m[i]->held = false;
				mutex_lock(&d->lock);
				gs_op_group_go(d, g->m[i]->out.op_id);
				mutex_unlock(&d->lock);
			}
			return;	/* each rank's change queues the work */
		}
		if (!running)
			gs_group_finish(g);
		return;
	case GS_GP_RESUME:
		/* A resume is not undone: every rank finishes on its own. */
		if (!running)
			gs_group_finish(g);
		return;
	default:
		return;
	}
}

/*
 * Look at every rank that changed and move the group's operation on
 * (group->lock held). An operation still running at its deadline ends
 * then (gs_group_settle()); one with a deadline to come has the work
 * armed for it.
 */
static void gs_group_step(struct gs_group *g)
{
	unsigned int i;
	bool late;

	lockdep_assert_held(&g->lock);
	if (g->detached || g->phase == GS_GP_IDLE)
		return;
	/* A rank that did not change has nothing new to say. */
	for (i = 0; i < g->nr; i++)
		if (test_and_clear_bit(i, g->changed))
			gs_member_sync(g->m[i]);
	late = g->deadline && ktime_compare(ktime_get(), g->deadline) >= 0;
	gs_group_advance(g, late);
	if (g->phase == GS_GP_IDLE)
		return;
	if (late)
		gs_group_settle(g);
	else if (g->deadline)
		gs_group_queue_at(g, g->deadline);
}

/*
 * Detach g from its ranks (group->lock held, no operation): no rank
 * points here any more, so nothing can queue its work again; the caller
 * then puts the back-pointers' reference, after the unlock.
 */
static void gs_group_detach(struct gs_group *g)
{
	unsigned int i;

	lockdep_assert_held(&g->lock);
	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];
		struct gs_domain *d = m->d;
		struct gs_change c = { .efd = 0 };

		mutex_lock(&d->lock);
		list_del_init(&m->w.node);
		d->group = NULL;
		c.from = d->state;
		gs_announce(d, &c);
		mutex_unlock(&d->lock);
	}
	g->detached = true;
}

/*
 * Unlock g; the caller holds a reference, so g outlives this. A rank's
 * answer that found the lock held left its step here (GS_GF_STEP): take
 * the lock again and step, before anyone else would have to. A closed
 * group whose operation has ended detaches first, and the back-pointers'
 * reference is put once the lock is dropped (never the last: the
 * caller's).
 */
static void gs_group_unlock(struct gs_group *g)
{
	bool detached = false;

	for (;;) {
		if (g->closed && !g->detached && g->phase == GS_GP_IDLE) {
			gs_group_detach(g);
			detached = true;
		}
		mutex_unlock(&g->lock);
		/* Pairs with smp_mb__after_atomic() in gs_group_answered(). */
		smp_mb();
		if (!test_bit(GS_GF_STEP, &g->flags) ||
		    !mutex_trylock(&g->lock))
			break;
		if (test_and_clear_bit(GS_GF_STEP, &g->flags))
			gs_group_step(g);
	}
	if (detached)
		gs_group_put(g);	/* the back-pointers' */
}

/*
 * The work: a rank changed, or the deadline came (a jiffies timer may run
 * a tick early: gs_group_step() compares ktime and arms it again), or the
 * last fd closed.
 */
static void gs_group_work(struct work_struct *work)
{
	struct gs_group *g = container_of(to_delayed_work(work),
					  struct gs_group, work);

	mutex_lock(&g->lock);
	gs_group_step(g);
	gs_group_unlock(g);
	gs_group_put(g);		/* this run's; may free g */
}

/*
 * A rank's answer changed what g waits for: step g here, in the
 * answering thread, rather than wake a kworker for it. If group->lock is
 * held, its holder steps for us as it unlocks (gs_group_unlock()): the
 * flag is set before the lock is tried, and the holder unlocks before it
 * reads the flag, so one of the two sees the other. Measured, both
 * matter: with a kworker per answer, or an answer blocking on the lock,
 * the group benchmarks 7a and 7c are missed (docs/benchmarks.md).
 */
void gs_group_answered(struct gs_group *g)
{
	set_bit(GS_GF_STEP, &g->flags);
	smp_mb__after_atomic();	/* the flag set before the lock is tried */
	if (mutex_trylock(&g->lock)) {
		if (test_and_clear_bit(GS_GF_STEP, &g->flags))
			gs_group_step(g);
		gs_group_unlock(g);
	}
	gs_group_put(g);	/* gs_group_due()'s; the holder has its own */
}

/*
 * The engines of ranks [0, nr) hear of their drains now, with group->lock
 * dropped (the caller holds a reference on g; a rank, once added, stays).
 * Woken under it, an engine would answer while the lock is held and
 * block on it.
 */
static void gs_group_wake_engines(struct gs_group *g, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		struct gs_domain *d = g->m[i]->d;
		bool due;

		mutex_lock(&d->lock);
		due = gs_evq_unhold(&d->engine_q);
		mutex_unlock(&d->lock);
		if (due)
			gs_evq_wake(&d->engine_q);
	}
}

/* A rank refused: name it in req. */
static int gs_group_refused(struct gs_group *g, unsigned int i,
			    struct gpusleep_group_op *req,
			    const struct gpusleep_op *op, u32 reason)
{
	req->reason = reason;
	req->rank = i;
	req->domain = g->m[i]->d->id;
	req->bad_tags = op ? op->bad_tags : 0;
	return gs_reason_errno(reason);
}

static void gs_group_reset_members(struct gs_group *g)
{
	unsigned int i;

	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];

		gs_member_unfollow(m);
		memset(&m->out, 0, sizeof(m->out));
		m->out.domain = m->d->id;
		m->st = GS_M_IDLE;
		m->tags = 0;
		m->held = false;
		m->no_agent = false;
	}
}

/* rank d's release as the group asks it (d->lock not needed). */
static void gs_group_rank_op(struct gpusleep_op *op,
			     const struct gpusleep_group_op *req)
{
	memset(op, 0, sizeof(*op));
	op->tags = req->tags;
	op->flags = req->flags & GPUSLEEP_OPF_ABORT_INFLIGHT;
	op->timeout_ms = req->timeout_ms;
}

/*
 * Validate, then commit: check every rank first, and a refusal (returned,
 * naming the rank) changes nothing on any rank. Then start a held release
 * on every rank. A rank that refuses despite the check (its own
 * controller started something meanwhile) fails the started operation,
 * which rolls the others back, as any failure does.
 */
static int gs_group_start_release(struct gs_group *g,
				  struct gpusleep_group_op *req)
{
	struct gpusleep_op op;
	unsigned int i;
	u32 reason;
	int ret;

	for (i = 0; i < g->nr; i++) {
		struct gs_domain *d = g->m[i]->d;

		gs_group_rank_op(&op, req);
		mutex_lock(&d->lock);
		if (d->dead) {
			op.reason = GPUSLEEP_R_ENGINE_GONE;
			ret = gs_reason_errno(op.reason);
		} else {
			ret = gs_op_release_check(d, &op);
		}
		mutex_unlock(&d->lock);
		if (ret)
			return gs_group_refused(g, i, req, &op, op.reason);
	}
	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];
		struct gs_domain *d = m->d;

		gs_group_rank_op(&op, req);
		mutex_lock(&d->lock);
		/* Woken once group->lock is dropped: gs_group_wake_engines(). */
		gs_evq_hold(&d->engine_q);
		if (d->dead) {
			reason = GPUSLEEP_R_ENGINE_GONE;
			ret = gs_reason_errno(reason);
		} else {
			ret = gs_op_release(d, &op);
			reason = op.reason;
			if (!ret) {
				gs_op_hold(d);
				gs_member_follow(m, op.op_id);
			}
		}
		mutex_unlock(&d->lock);
		if (ret) {
			m->st = GS_M_FINISHED;
			m->out.error = ret;
			m->out.reason = reason;
			continue;
		}
		m->out.op_id = op.op_id;
		m->st = GS_M_RUNNING;
	}
	return 0;
}

/* May rank d resume tags now? GPUSLEEP_R_NONE or why not. */
static u32 gs_resume_check(struct gs_domain *d, u32 tags, u32 *bad)
{
	u32 want;

	lockdep_assert_held(&d->lock);
	*bad = 0;
	if (d->dead)
		return GPUSLEEP_R_ENGINE_GONE;
	if (d->op_active && d->state != GPUSLEEP_S_DRAINING)
		return GPUSLEEP_R_BUSY;
	*bad = tags & ~d->released;
	if (*bad)
		return GPUSLEEP_R_NOT_RELEASED;
	want = tags ? tags : d->released;
	/* A lease holds them (reclaim.c): as for one domain's resume. */
	*bad = want & d->leased;
	if (*bad)
		return GPUSLEEP_R_LEASED;
	if (d->op_active && (d->op.tags & d->leased)) {
		*bad = d->op.tags & d->leased;
		return GPUSLEEP_R_LEASED;
	}
	if (want && !d->agent)
		return GPUSLEEP_R_NOT_ENABLED;
	return GPUSLEEP_R_NONE;
}

/*
 * Check every rank, then resume every rank. A rank that refuses despite
 * the check (it changed meanwhile) fails the operation, the others go on.
 */
static int gs_group_start_resume(struct gs_group *g,
				 struct gpusleep_group_op *req)
{
	struct gpusleep_op op = { .bad_tags = 0 };
	unsigned int i;
	u32 reason;
	int ret;

	for (i = 0; i < g->nr; i++) {
		struct gs_domain *d = g->m[i]->d;

		mutex_lock(&d->lock);
		reason = gs_resume_check(d, req->tags, &op.bad_tags);
		mutex_unlock(&d->lock);
		if (reason) {
			gs_group_refused(g, i, req, &op, reason);
			return gs_reason_errno(reason);
		}
	}
	for (i = 0; i < g->nr; i++) {
		struct gs_member *m = g->m[i];
		struct gs_domain *d = m->d;

		memset(&op, 0, sizeof(op));
		op.tags = req->tags;
		op.timeout_ms = req->timeout_ms;
		mutex_lock(&d->lock);
		if (d->dead) {
			op.reason = GPUSLEEP_R_ENGINE_GONE;
			ret = gs_reason_errno(op.reason);
		} else {
			ret = gs_op_resume(d, &op);
			if (!ret)
				gs_member_follow(m, op.op_id);
		}
		mutex_unlock(&d->lock);
		if (ret) {
			m->st = GS_M_FINISHED;
			m->out.error = ret;
			m->out.reason = op.reason;
			continue;
		}
		m->out.op_id = op.op_id;
		m->st = GS_M_RUNNING;
	}
	return 0;
}

/* A group result by id, if remembered. */
static const struct gpusleep_group_result *
gs_group_result(struct gs_group *g, u64 id)
{
	const struct gpusleep_group_result *r = &g->hist[id % GS_GROUP_HIST];

	lockdep_assert_held(&g->lock);
	if (!id || id > g->last_done_id || r->op_id != id)
		return NULL;
	return r;
}

static void gs_group_seen(struct gs_gfile *gf, u64 id)
{
	lockdep_assert_held(&gf->g->lock);
	if (id > gf->seen_done)
		WRITE_ONCE(gf->seen_done, id);
}

/*
 * Make w wait for group operation id: at once from the history if it
 * finished, else on g->waiters. -ENOENT if finished too long ago.
 */
static int gs_group_waiter_add(struct gs_group *g, u64 id,
			       struct gs_waiter *w)
{
	const struct gpusleep_group_result *r;

	lockdep_assert_held(&g->lock);
	w->op_id = id;
	w->done = false;
	if (id <= g->last_done_id) {
		r = gs_group_result(g, id);
		if (!r)
			return -ENOENT;
		w->gres = *r;
		w->done = true;
		return 0;
	}
	/* Group operations finish in id order: this one is in flight. */
	list_add_tail(&w->node, &g->waiters);
	return 0;
}

/*
 * May the caller control every rank? By the domains' own rules: a rank
 * added through this fd (with a domain fd, a grant), or the caller's euid
 * in the creator's user and pid namespaces (gs_may_control()), or
 * CAP_SYS_ADMIN. Checked at every operation: ranks join after an open.
 * -EPERM naming the first rank it may not control in req.
 */
static int gs_group_check_control(struct gs_gfile *gf,
				  struct gpusleep_group_op *req)
{
	struct gs_group *g = gf->g;
	const struct cred *cred = current_cred();
	unsigned int i;

	lockdep_assert_held(&g->lock);
	for (i = 0; i < g->nr; i++) {
		if ((gf->added & BIT_ULL(i)) ||
		    gs_may_control(g->m[i]->d, cred))
			continue;
		if (capable(CAP_SYS_ADMIN))
			return 0;
		req->rank = i;
		req->domain = g->m[i]->d->id;
		return -EPERM;
	}
	return 0;
}

/* Start a group operation (group->lock held): 0 or the refusal. */
static long gs_group_start(struct gs_group *g, u32 kind,
			   struct gpusleep_group_op *req)
{
	/* Before any rank starts: no rank's step ends before the deadline. */
	ktime_t start = ktime_get();
	long ret;

	lockdep_assert_held(&g->lock);
	/* Nothing to act on; ENOENT is a rank's not_released. */
	if (!g->nr)
		return -ENODATA;
	if (g->phase != GS_GP_IDLE)
		return -EBUSY;
	gs_group_reset_members(g);
	g->fail_rank = GPUSLEEP_GROUP_NO_RANK;
	g->fail_reason = GPUSLEEP_R_NONE;
	g->fail_error = 0;
	if (kind == GPUSLEEP_OP_RELEASE)
		ret = gs_group_start_release(g, req);
	else
		ret = gs_group_start_resume(g, req);
	if (ret)
		return ret;
	g->op_id = ++g->last_id;
	g->kind = kind;
	g->tags = req->tags;
	g->timeout_ms = req->timeout_ms;
	g->start = start;
	g->deadline = 0;
	if (req->timeout_ms)
		g->deadline = ktime_add_ms(g->start, req->timeout_ms);
	WRITE_ONCE(g->phase, kind == GPUSLEEP_OP_RELEASE ? GS_GP_DRAIN :
						       GS_GP_RESUME);
	req->op_id = g->op_id;
	/* The first look is at every rank; it arms the deadline. */
	bitmap_fill(g->changed, GPUSLEEP_GROUP_MAX_RANKS);
	gs_group_step(g);
	return 0;
}

static long gs_group_ioc_op(struct gs_gfile *gf, unsigned int cmd,
			    const struct gs_uarg *ua)
{
	struct gs_group *g = gf->g;
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	struct gpusleep_group_op req;
	u32 kind = cmd == GPUSLEEP_IOC_GROUP_RELEASE ? GPUSLEEP_OP_RELEASE :
						       GPUSLEEP_OP_RESUME;
	u32 mask = kind == GPUSLEEP_OP_RELEASE ? GPUSLEEP_OPF_RELEASE_MASK :
						 GPUSLEEP_OPF_RESUME_MASK;
	unsigned int held = 0;
	bool block;
	long ret;

	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	/* Output fields are ignored on input. */
	if ((req.flags & ~mask) || req.pad ||
	    !gs_zero(req.reserved, sizeof(req.reserved)))
		return -EINVAL;
	block = !(req.flags & GPUSLEEP_OPF_NONBLOCK);

	mutex_lock(&g->lock);
	req.op_id = 0;
	req.reason = GPUSLEEP_R_NONE;
	req.rank = GPUSLEEP_GROUP_NO_RANK;
	req.domain = 0;
	req.bad_tags = 0;
	ret = gs_group_check_control(gf, &req);
	if (!ret && g->phase == GS_GP_IDLE && kind == GPUSLEEP_OP_RELEASE)
		held = g->nr;	/* their engines' wake-ups are held */
	if (!ret)
		ret = gs_group_start(g, kind, &req);
	/* Registered under the same lock: no result can slip by. */
	if (!ret && block)
		ret = gs_group_waiter_add(g, req.op_id, &w);
	gs_group_unlock(g);
	gs_group_wake_engines(g, held);

	/* Tell the caller the id (or who refused) before waiting. */
	if (gs_uarg_out(ua, &req, sizeof(req))) {
		ret = -EFAULT;
		goto out_unwait;
	}
	if (ret || !block)
		return ret;

	/* Interrupted: -EINTR, never a restart (as a domain's RELEASE). */
	if (!w.done && gs_waiter_wait(&g->lock, &g->wq, &w, 0))
		return -EINTR;
	req.op_id = w.op_id;
	req.reason = w.gres.reason;
	req.rank = w.gres.rank;
	req.domain = w.gres.domain;
	if (gs_uarg_out(ua, &req, sizeof(req)))
		return -EFAULT;
	mutex_lock(&g->lock);
	gs_group_seen(gf, w.op_id);
	gs_group_unlock(g);
	return w.gres.reason ? gs_reason_errno(w.gres.reason) : 0;

out_unwait:
	mutex_lock(&g->lock);
	list_del_init(&w.node);
	gs_group_unlock(g);
	return ret;
}

/* Copy n rank entries out, each cut or cleared to the caller's size. */
static int gs_group_ranks_out(u64 uaddr, u32 size,
			      const struct gpusleep_group_rank *r,
			      unsigned int n)
{
	void __user *p = u64_to_user_ptr(uaddr);
	size_t k = min_t(size_t, size, sizeof(*r));
	unsigned int i;

	for (i = 0; i < n; i++, p += size) {
		if (gs_copy_to_user(p, &r[i], k))
			return -EFAULT;
		if (size > k && clear_user(p + k, size - k))
			return -EFAULT;
	}
	return 0;
}

static long gs_group_ioc_wait(struct gs_gfile *gf, const struct gs_uarg *ua)
{
	struct gs_group *g = gf->g;
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	struct gpusleep_group_rank *ranks = NULL;
	struct gpusleep_group_wait wt;
	ktime_t deadline = 0;
	unsigned int i, n = 0;
	long ret;
	u64 id;

	ret = gs_uarg_in(ua, &wt, sizeof(wt));
	if (ret)
		return ret;
	if (wt.pad || !gs_zero(wt.reserved, sizeof(wt.reserved)) ||
	    (wt.ranks && wt.nr_ranks &&
	     wt.rank_size < GPUSLEEP_GROUP_RANK_SIZE_VER0))
		return -EINVAL;
	if (wt.ranks && wt.nr_ranks) {
		n = min_t(u32, wt.nr_ranks, GPUSLEEP_GROUP_MAX_RANKS);
		ranks = gs_kzalloc(sizeof(*ranks) * n, GFP_KERNEL);
		if (!ranks)
			return -ENOMEM;
	}

	mutex_lock(&g->lock);
	id = wt.op_id ? wt.op_id : g->last_id;
	ret = (!id || id > g->last_id) ? -ENOENT : 0;
	if (!ret)
		ret = gs_group_waiter_add(g, id, &w);
	gs_group_unlock(g);
	if (!ret && wt.timeout_ms)
		deadline = ktime_add_ms(ktime_get(), wt.timeout_ms);
	/* Interrupted: as WAIT (domain.c, gs_ioc_wait()). */
	if (!ret && !w.done) {
		ret = gs_waiter_wait(&g->lock, &g->wq, &w, deadline);
		if (ret == -ERESTARTSYS) {
			if (!wt.op_id || wt.timeout_ms)
				ret = -EINTR;
			memset(&wt.result, 0, sizeof(wt.result));
			wt.result.op_id = id;
			if (gs_uarg_out(ua, &wt, sizeof(wt)))
				ret = -EFAULT;
		}
	}
	if (ret)
		goto out_free;

	mutex_lock(&g->lock);
	/* The breakdown is kept for the newest operation only. */
	if (ranks && w.op_id == g->last_done_id) {
		n = min_t(unsigned int, n, w.gres.nr_ranks);
		for (i = 0; i < n; i++)
			ranks[i] = g->m[i]->last;
	} else {
		n = 0;
	}
	gs_group_seen(gf, w.op_id);
	gs_group_unlock(g);
	if (n)
		ret = gs_group_ranks_out(wt.ranks, wt.rank_size, ranks, n);
	if (ret)
		goto out_free;
	wt.op_id = w.op_id;
	wt.result = w.gres;
	wt.nr_ranks = n;
	wt.rank_size = sizeof(struct gpusleep_group_rank);
	if (gs_uarg_out(ua, &wt, sizeof(wt)))
		ret = -EFAULT;
out_free:
	kfree(ranks);
	return ret;
}

static long gs_group_ioc_add(struct gs_gfile *gf, const struct gs_uarg *ua)
{
	struct gs_group *g = gf->g;
	struct gpusleep_group_add a;
	struct gs_member *m;
	struct gs_domain *d;
	long ret;

	ret = gs_uarg_in(ua, &a, sizeof(a));
	if (ret)
		return ret;
	/* rank and domain are output only. */
	if (a.flags || !gs_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	d = gs_domain_from_fd(a.fd);
	if (IS_ERR(d))
		return PTR_ERR(d);
	/* A rank is allocated as it joins; the group frees it. */
	m = gs_kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m) {
		gs_domain_put(d);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&m->w.node);
	m->d = d;
	m->out.domain = d->id;

	mutex_lock(&g->lock);
	if (g->phase != GS_GP_IDLE) {
		ret = -EBUSY;
	} else if (g->nr >= GPUSLEEP_GROUP_MAX_RANKS) {
		ret = -ENOSPC;
	} else if (g->nr && !gs_tags_same(&g->m[0]->d->tags, &d->tags)) {
		/* One tag mask means the same on every rank. */
		ret = -EXDEV;
	} else {
		mutex_lock(&d->lock);
		if (d->dead) {
			ret = -ENODEV;	/* as the domain's own fds answer */
		} else if (d->group) {
			ret = -EEXIST;	/* one group per domain */
		} else {
			struct gs_change c = { .from = d->state };

			d->group = g;
			d->group_rank = g->nr;
			gs_announce(d, &c);
		}
		mutex_unlock(&d->lock);
	}
	if (!ret) {
		a.rank = g->nr;
		a.domain = d->id;
		m->last.domain = d->id;
		g->m[g->nr] = m;
		gf->added |= BIT_ULL(g->nr);
		g->nr++;
	}
	gs_group_unlock(g);
	if (ret) {
		kfree(m);
		gs_domain_put(d);
		return ret;
	}
	/* The rank counts from here; a caller that cannot read it has it. */
	if (gs_uarg_out(ua, &a, sizeof(a)))
		return -EFAULT;
	return 0;
}

static long gs_group_ioc_eventfd(struct gs_group *g, const struct gs_uarg *ua)
{
	struct eventfd_ctx *ctx = NULL, *old;
	struct gpusleep_eventfd e;
	long ret;

	ret = gs_uarg_in(ua, &e, sizeof(e));
	if (ret)
		return ret;
	if (e.reserved)
		return -EINVAL;
	/* fd >= 0 with OP_DONE registers it; -1 with 0 removes it. */
	if (e.fd == -1 && !e.events) {
		ctx = NULL;
	} else if (e.fd >= 0 && e.events == GPUSLEEP_EFD_OP_DONE) {
		ctx = gs_fault() ? ERR_PTR(-EBADF) : eventfd_ctx_fdget(e.fd);
		if (IS_ERR(ctx))
			return PTR_ERR(ctx);
	} else {
		return -EINVAL;
	}
	mutex_lock(&g->lock);
	old = g->efd;
	g->efd = ctx;
	gs_group_unlock(g);
	if (old)
		eventfd_ctx_put(old);
	return 0;
}

/*
 * GET_TAGS on a group fd: its ranks' declaration (they all have the same),
 * without generations (each rank has its own); nothing before a rank.
 */
static noinline_for_stack long gs_group_ioc_get_tags(struct gs_group *g,
						     const struct gs_uarg *ua)
{
	struct gpusleep_tags t;
	u32 i;

	memset(&t, 0, sizeof(t));
	mutex_lock(&g->lock);
	if (g->nr) {
		struct gs_domain *d = g->m[0]->d;

		mutex_lock(&d->lock);
		gs_tags_fill(d, &t);
		mutex_unlock(&d->lock);
	}
	gs_group_unlock(g);
	for (i = 0; i < GPUSLEEP_MAX_TAGS; i++)
		t.tags[i].generation = 0;
	return gs_uarg_out(ua, &t, sizeof(t)) ? -EFAULT : 0;
}

static const struct {
	unsigned int cmd;
	size_t ver0;
} gs_group_cmds[] = {
	{ GPUSLEEP_IOC_GROUP_ADD,	GPUSLEEP_GROUP_ADD_SIZE_VER0 },
	{ GPUSLEEP_IOC_GROUP_RELEASE,	GPUSLEEP_GROUP_OP_SIZE_VER0 },
	{ GPUSLEEP_IOC_GROUP_RESUME,	GPUSLEEP_GROUP_OP_SIZE_VER0 },
	{ GPUSLEEP_IOC_GROUP_WAIT,	GPUSLEEP_GROUP_WAIT_SIZE_VER0 },
	{ GPUSLEEP_IOC_GROUP_EVENTFD,	GPUSLEEP_EVENTFD_SIZE_VER0 },
	{ GPUSLEEP_IOC_GET_TAGS,	GPUSLEEP_TAGS_SIZE_VER0 },
};

static long gs_group_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct gs_gfile *gf = file->private_data;
	struct gs_group *g = gf->g;
	struct gs_uarg ua;
	unsigned int i;
	int ret = -ENOTTY;

	for (i = 0; i < ARRAY_SIZE(gs_group_cmds); i++) {
		if (_IOC_TYPE(cmd) == _IOC_TYPE(gs_group_cmds[i].cmd) &&
		    _IOC_NR(cmd) == _IOC_NR(gs_group_cmds[i].cmd)) {
			ret = gs_uarg_init(&ua, cmd, arg, gs_group_cmds[i].cmd,
					   gs_group_cmds[i].ver0);
			break;
		}
	}
	if (ret)
		return ret;
	switch (gs_group_cmds[i].cmd) {
	case GPUSLEEP_IOC_GROUP_ADD:
		return gs_group_ioc_add(gf, &ua);
	case GPUSLEEP_IOC_GROUP_RELEASE:
	case GPUSLEEP_IOC_GROUP_RESUME:
		return gs_group_ioc_op(gf, gs_group_cmds[i].cmd, &ua);
	case GPUSLEEP_IOC_GROUP_WAIT:
		return gs_group_ioc_wait(gf, &ua);
	case GPUSLEEP_IOC_GET_TAGS:
		return gs_group_ioc_get_tags(g, &ua);
	default:
		return gs_group_ioc_eventfd(g, &ua);
	}
}

static __poll_t gs_group_poll(struct file *file, poll_table *wait)
{
	struct gs_gfile *gf = file->private_data;
	struct gs_group *g = gf->g;

	poll_wait(file, &g->wq, wait);
	if (READ_ONCE(g->last_done_id) > READ_ONCE(gf->seen_done))
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

/*
 * The last fd is gone (closed, or its process died). An idle group
 * detaches now. Mid-operation, all or nothing still holds: its work fails
 * a release as cancelled and rolls it back as for any failure (a rank
 * unmapping finishes its step, then is resumed), lets a resume run to its
 * end, and detaches the group after; the back-pointers' reference keeps
 * it until then.
 */
static void gs_group_close(struct gs_group *g)
{
	mutex_lock(&g->lock);
	g->closed = true;
	if (g->phase != GS_GP_IDLE)
		gs_group_queue_now(g);
	gs_group_unlock(g);	/* idle: it detaches */
}

/* An fd's hold on g ends: its nr_files and its reference. */
static void gs_group_file_put(struct gs_group *g)
{
	bool last;

	mutex_lock(&gs_groups_lock);
	last = !--g->nr_files;
	/* The name is free again: OPEN_GROUP no longer finds it. */
	if (last)
		list_del_init(&g->node);
	mutex_unlock(&gs_groups_lock);
	if (last)
		gs_group_close(g);
	gs_group_put(g);
}

static int gs_group_file_release(struct inode *inode, struct file *file)
{
	struct gs_gfile *gf = file->private_data;

	gs_user_uncharge(gf->uid, GS_UC_FDS);
	gs_group_file_put(gf->g);
	kfree(gf);
	return 0;
}

static const struct file_operations gs_group_fops = {
	.owner		= THIS_MODULE,
	.release	= gs_group_file_release,
	.poll		= gs_group_poll,
	.unlocked_ioctl	= gs_group_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

/*
 * A new fd (O_CLOEXEC) for g, charged as one fd to the caller's euid. The
 * caller's hold on g (gs_group_file_put()) passes to it on success.
 */
static int gs_group_open_fd(struct gs_group *g)
{
	struct gs_gfile *gf;
	struct file *file;
	int fd, ret;

	ret = gs_user_charge(gs_user_current(), GS_UC_FDS);
	if (ret)
		return ret;
	gf = gs_kzalloc(sizeof(*gf), GFP_KERNEL_ACCOUNT);
	if (!gf) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	gf->g = g;
	gf->uid = gs_user_current();
	fd = gs_fault() ? -EMFILE : get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}
	file = gs_fault() ? ERR_PTR(-ENOMEM) :
		anon_inode_getfile("[gpusleep-group]", &gs_group_fops, gf,
				   O_RDWR);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
		goto err_put_fd;
	}
	fd_install(fd, file);
	return fd;

err_put_fd:
	put_unused_fd(fd);
err_free:
	kfree(gf);
err_uncharge:
	gs_user_uncharge(gs_user_current(), GS_UC_FDS);
	return ret;
}

/*
 * Group names are scoped to their owner: the creator's euid in the
 * creator's user namespace and pid namespace (containers that share a user
 * namespace and an euid, as root in two containers does, each have their
 * own names). Nobody can take a name in another owner's scope, and a
 * lookup finds only a group of the caller's own.
 */
static bool gs_group_named(const struct gs_group *g, const char *name,
			   const struct cred *cred, struct pid_namespace *ns)
{
	return uid_eq(g->cred->euid, cred->euid) &&
	       g->cred->user_ns == cred->user_ns &&
	       ns_of_pid(g->pid) == ns && !strcmp(g->name, name);
}

/*
 * List g under its name, with an id and the first fd's place in
 * nr_files: 0, -EEXIST, -ENOMEM.
 */
static int gs_group_list(struct gs_group *g)
{
	struct gs_group *o;
	int id;

	mutex_lock(&gs_groups_lock);
	list_for_each_entry(o, &gs_groups, node) {
		if (gs_group_named(o, g->name, g->cred, ns_of_pid(g->pid))) {
			mutex_unlock(&gs_groups_lock);
			return -EEXIST;
		}
	}
	id = gs_fault() ? -ENOMEM :
		ida_alloc_min(&gs_group_ids, 1, GFP_KERNEL);
	if (id >= 0) {
		g->id = id;
		g->nr_files = 1;
		list_add_tail(&g->node, &gs_groups);
	}
	mutex_unlock(&gs_groups_lock);
	return id < 0 ? id : 0;
}

/*
 * The caller's group named name, with a hold for a new fd (a place in
 * nr_files and a reference; gs_group_file_put() ends it), or NULL. A
 * group whose last fd closed is off the list: it is gone for a lookup.
 */
static struct gs_group *gs_group_find(const char *name)
{
	struct gs_group *g, *found = NULL;

	mutex_lock(&gs_groups_lock);
	list_for_each_entry(g, &gs_groups, node) {
		if (gs_group_named(g, name, current_cred(),
				   task_active_pid_ns(current))) {
			g->nr_files++;
			kref_get(&g->kref);	/* an fd holds one already */
			found = g;
			break;
		}
	}
	mutex_unlock(&gs_groups_lock);
	return found;
}

/*
 * May the caller open g (one of its own scope: its creator's euid and
 * user namespace)? CAP_SYS_ADMIN may; anyone else must be in the
 * creator's pid namespace, as for a domain (gs_may_control()), even while
 * g is empty, and be able to control every rank now. Every operation
 * checks again (gs_group_check_control()), for the ranks added later.
 */
static bool gs_group_may_open(struct gs_group *g)
{
	const struct cred *cred = current_cred();
	bool ok;
	unsigned int i;

	if (capable(CAP_SYS_ADMIN))
		return true;
	if (!uid_eq(cred->euid, g->cred->euid) ||
	    cred->user_ns != g->cred->user_ns ||
	    task_active_pid_ns(current) != ns_of_pid(g->pid))
		return false;
	mutex_lock(&g->lock);
	ok = true;
	for (i = 0; i < g->nr && ok; i++)
		ok = gs_may_control(g->m[i]->d, cred);
	gs_group_unlock(g);
	return ok;
}

static int gs_group_req(const struct gs_uarg *ua,
			struct gpusleep_group_create *req)
{
	int ret;

	ret = gs_uarg_in(ua, req, sizeof(*req));
	if (ret)
		return ret;
	/* id is output only. */
	if (req->flags || !gs_zero(req->reserved, sizeof(req->reserved)))
		return -EINVAL;
	return gs_check_label(req->name, sizeof(req->name), true);
}

/*
 * Tell the caller g's id and return a new fd for g, which takes over the
 * caller's hold on g; on failure that hold ends.
 */
static long gs_group_hand_out(const struct gs_uarg *ua,
			      struct gpusleep_group_create *req,
			      struct gs_group *g)
{
	int ret;

	req->id = g->id;
	if (gs_uarg_out(ua, req, sizeof(*req))) {
		ret = -EFAULT;
		goto err_put;
	}
	ret = gs_group_open_fd(g);
	if (ret < 0)
		goto err_put;
	return ret;

err_put:
	gs_group_file_put(g);
	return ret;
}

long gs_group_open(const struct gs_uarg *ua)
{
	struct gpusleep_group_create req;
	struct gs_group *g;
	int ret;

	ret = gs_group_req(ua, &req);
	if (ret)
		return ret;
	g = gs_group_find(req.name);
	if (!g)
		return -ENOENT;
	if (!gs_group_may_open(g)) {
		ret = -EPERM;
		goto err_put;
	}
	return gs_group_hand_out(ua, &req, g);

err_put:
	gs_group_file_put(g);
	return ret;
}

long gs_group_create(const struct gs_uarg *ua)
{
	struct gpusleep_group_create req;
	struct gs_group *g;
	int ret;

	ret = gs_group_req(ua, &req);
	if (ret)
		return ret;
	g = gs_kzalloc(sizeof(*g), GFP_KERNEL_ACCOUNT);
	if (!g)
		return -ENOMEM;
	/* The first fd's reference. */
	kref_init(&g->kref);
	mutex_init(&g->lock);
	memcpy(g->name, req.name, sizeof(g->name));
	g->cred = get_current_cred();
	g->pid = get_pid(task_tgid(current));
	g->fail_rank = GPUSLEEP_GROUP_NO_RANK;
	INIT_LIST_HEAD(&g->node);
	INIT_LIST_HEAD(&g->waiters);
	init_waitqueue_head(&g->wq);
	INIT_DELAYED_WORK(&g->work, gs_group_work);

	ret = gs_group_list(g);
	if (ret) {
		put_pid(g->pid);
		put_cred(g->cred);
		mutex_destroy(&g->lock);
		kfree(g);
		return ret;
	}
	/* Its work may outlive every fd: g holds the module, as an fd does. */
	__module_get(THIS_MODULE);
	/* The ranks' back-pointers', until gs_group_detach(). */
	kref_get(&g->kref);
	return gs_group_hand_out(ua, &req, g);
}

/* ------------------------------------------------------------------ */
/* For the arbiter (reclaim.c): a group taken whole, and given back.   */

struct gs_group *gs_group_get(struct gs_domain *d)
{
	lockdep_assert_held(&d->lock);
	if (!d->group)
		return NULL;
	/* d->group is set: the back-pointers' reference holds g. */
	kref_get(&d->group->kref);
	return d->group;
}

void gs_group_put_ref(struct gs_group *g)
{
	gs_group_put(g);
}

bool gs_group_each(struct gs_group *g,
		   bool (*fn)(struct gs_domain *d, void *arg), void *arg)
{
	unsigned int i;
	bool ok = true;

	mutex_lock(&g->lock);
	for (i = 0; i < g->nr && ok; i++)
		ok = fn(g->m[i]->d, arg);
	gs_group_unlock(g);
	return ok;
}

int gs_group_start_for(struct gs_group *g, u32 kind, u32 tags, u64 *op_id,
		       u32 *reason)
{
	struct gpusleep_group_op req = { .tags = tags };
	unsigned int held = 0;
	int ret;

	mutex_lock(&g->lock);
	req.rank = GPUSLEEP_GROUP_NO_RANK;
	if (g->closed || g->detached) {
		ret = -ENODEV;	/* nobody holds it any more */
	} else {
		if (g->phase == GS_GP_IDLE && kind == GPUSLEEP_OP_RELEASE)
			held = g->nr;	/* their engines' wake-ups are held */
		ret = gs_group_start(g, kind, &req);
	}
	gs_group_unlock(g);
	gs_group_wake_engines(g, held);
	*op_id = req.op_id;
	*reason = ret == -EBUSY ? GPUSLEEP_R_BUSY : req.reason;
	return ret;
}

int gs_group_wait_for(struct gs_group *g, u64 op_id, ktime_t deadline,
		      struct gpusleep_group_result *res)
{
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	int ret;

	mutex_lock(&g->lock);
	ret = gs_group_waiter_add(g, op_id, &w);
	gs_group_unlock(g);
	if (!ret && !w.done)
		ret = gs_waiter_wait(&g->lock, &g->wq, &w, deadline);
	if (!ret)
		*res = w.gres;
	return ret;
}

int gs_groups_init(void)
{
	gs_group_wq = alloc_ordered_workqueue("gpusleep_group", 0);
	return gs_group_wq ? 0 : -ENOMEM;
}

void gs_groups_exit(void)
{
	/*
	 * Every group holds the module until it is freed, and a queued
	 * work holds its group: none is left but the return of a work that
	 * put the last reference, which this waits for.
	 */
	destroy_workqueue(gs_group_wq);
	WARN_ON(!list_empty(&gs_groups));
	ida_destroy(&gs_group_ids);
}
