// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: reclaims and leases (docs/arbiter.md).
 *
 * A reclaim (RECLAIM on /dev/gpusleep) asks for bytes on one GPU, named by
 * the UUID its tenants report, at a priority, by a deadline. It runs as a
 * job on its GPU's queue: the GPU's jobs (reclaims, and lease returns) run
 * one at a time, in the order queued, from one work item per GPU on
 * gs_arb_wq, so two claimants never race for the same victims and a
 * lease's return comes after the reclaim that filled it. The job takes a
 * snapshot of the candidates (gs_reclaim_candidates(): the domains on
 * that GPU the claimant may take from, ordered lowest priority first,
 * then least recently active, then id; within a domain its awake tags,
 * discard-kind before backup-kind, in declared order), then releases
 * them one at a time, each an ordinary release (op.c: drain, reset,
 * pauses, every truth rule; a group's through its group, whole), until
 * the bytes the agents saw come free reach the bytes asked. A victim that
 * refuses or fails is reported and the next is tried; what it had
 * released already is resumed. Short of bytes, everything taken is
 * resumed again unless the claim said PARTIAL. The result (per victim:
 * tags, bytes, its op id, outcome) is kept with the reclaim, which
 * RECLAIM_WAIT finds by its node-wide id.
 *
 * A lease (RECLAIMF_LEASE) is the fd that keeps what a reclaim took: its
 * tags are marked leased in each domain (d->leased, d->lease_id), and a
 * resume of them by anyone but the lease is refused (GPUSLEEP_R_LEASED).
 * Its close (or LEASE_RETURN) queues its return on the GPU's queue: every
 * domain it holds is resumed, highest priority first, then most recently
 * active; a resume that fails is reported and the next tried.
 *
 * Lifetimes. A reclaim (kref): one for its queued or running job, one
 * for its entry in gs_reclaims (from its start until it is one of more
 * than GS_RECLAIM_HIST finished ones), one per blocking caller waiting on
 * it. A lease (kref): one for its fd, one for the reclaim running for it,
 * one for its queued or running return. Each holds a reference on its
 * GPU's queue (struct gs_gpu, kref; the last put unlists and frees it),
 * the reclaim until it ends, the lease until returned, and each run of
 * the GPU's work one more. Candidates hold a reference on their domain
 * (and group): the reclaim drops those it does not keep when it ends,
 * the lease the rest once returned: no finished reclaim holds a domain,
 * a group or a GPU queue, only its result. A GPU queue holds the module
 * (its work may outlive every fd); module exit destroys gs_arb_wq, which
 * waits for a work that dropped the last one.
 *
 * Locking. gs_arb_lock (a mutex) guards the GPU queues, the list of
 * reclaims, the leases' state and their entries, and the ids; it is
 * taken before any domain->lock and never held with one (nothing here
 * nests a domain's lock in it, nor it in a domain's). A job holds no lock
 * while it waits for a victim's operation: it waits on that operation
 * like any waiter (gs_waiter on the domain's or the group's list). No
 * copy_to_user()/copy_from_user() under any lock: results are copied to
 * a kernel buffer under gs_arb_lock and to the user after.
 */
#include <linux/anon_inodes.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/nsproxy.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>

#include <linux/gpusleep_netlink.h>

#include "gpusleep.h"

static unsigned int gs_reclaim_timeout_ms = 60000;
module_param_named(reclaim_timeout_ms, gs_reclaim_timeout_ms, uint, 0644);
MODULE_PARM_DESC(reclaim_timeout_ms,
		 "A reclaim's deadline when its caller gives none, in ms (default 60000)");

#define GS_RECLAIM_MAX_CAND	GPUSLEEP_RECLAIM_MAX_VICTIMS
#define GS_RECLAIM_HIST		16	/* finished reclaims remembered */
#define GS_RESUME_TRIES		4	/* a busy domain's resume, retried */

/* One GPU's queue of jobs. */
struct gs_gpu {
	struct kref kref;
	struct list_head node;		/* on gs_gpus */
	u8 uuid[16];
	struct list_head jobs;		/* struct gs_job, in order */
	struct work_struct work;
};

/* A reclaim to run, or a lease to return. */
struct gs_job {
	struct list_head node;
	struct gs_reclaim *rc;
	struct gs_lease *ls;
};

/* A candidate of a reclaim; a victim once tried. */
struct gs_cand {
	struct gs_domain *d;		/* referenced */
	struct gs_group *g;		/* its group, referenced, or NULL */
	s32 prio;
	u64 active_ns;
	u32 id;
	u32 n;				/* tags it may give, in order[] */
	u32 order[GPUSLEEP_MAX_TAGS];
	u64 expect[GPUSLEEP_MAX_TAGS];	/* their mapped bytes */
	u32 tags;			/* chosen: its release's */
	bool tried;
	bool kept;			/* released, kept by the reclaim */
	struct gpusleep_reclaim_victim out;
};

struct gs_reclaim {
	struct kref kref;
	struct list_head node;		/* on gs_reclaims */
	struct gs_job job;
	struct gs_gpu *gpu;		/* referenced until it ends */
	u64 id;
	u8 uuid[16];
	u64 bytes;
	s32 prio;
	u32 flags;
	ktime_t deadline;
	/* The claimant, as it was when it asked. */
	const struct cred *cred;
	struct pid_namespace *pidns;
	bool admin;			/* CAP_SYS_ADMIN (initial user ns) */
	struct net *net;
	struct gs_lease *lease;		/* referenced while it runs */
	u64 lease_id;
	struct gs_cand *c;		/* candidates, while it runs */
	unsigned int nc;
	/* The result; done and what follows under gs_arb_lock. */
	bool done;
	u32 reason;
	u32 why;
	u64 taken;
	unsigned int nv;
	struct gpusleep_reclaim_victim v[GS_RECLAIM_MAX_CAND];
};

struct gs_lease {
	struct kref kref;
	struct gs_job ret;
	struct gs_gpu *gpu;		/* referenced until returned */
	u64 id;
	u64 reclaim_id;
	u8 uuid[16];
	struct net *net;
	struct gs_uid uid;		/* charged one GS_UC_FDS for its fd */
	/* Under gs_arb_lock: */
	u32 state;			/* GPUSLEEP_LEASE_* */
	bool closed;			/* fd released or LEASE_RETURN */
	bool queued;			/* its return is queued */
	u32 still_released;
	u64 taken;
	ktime_t since;			/* its reclaim's end */
	ktime_t until;			/* its return's start */
	struct gs_cand *c;		/* the victims it keeps */
	unsigned int nc;
};

static DEFINE_MUTEX(gs_arb_lock);
static LIST_HEAD(gs_gpus);
static LIST_HEAD(gs_reclaims);		/* by id: running, then finished */
static u64 gs_reclaim_last;
static u64 gs_lease_last;
static unsigned int gs_leases_live;
static DECLARE_WAIT_QUEUE_HEAD(gs_arb_wq);	/* a reclaim ended, a lease */
static struct workqueue_struct *gs_arb_workq;

static const struct file_operations gs_lease_fops;

static bool gs_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

unsigned int gs_leases_held(void)
{
	return READ_ONCE(gs_leases_live);
}

u64 gs_reclaims_started(void)
{
	return READ_ONCE(gs_reclaim_last);
}

/* ------------------------------------------------------------------ */
/* GPU queues                                                          */

static void gs_gpu_work(struct work_struct *work);

/* The queue of uuid, referenced (created if none); gs_arb_lock held. */
static struct gs_gpu *gs_gpu_get(const u8 *uuid)
{
	struct gs_gpu *gpu;

	lockdep_assert_held(&gs_arb_lock);
	list_for_each_entry(gpu, &gs_gpus, node) {
		if (!memcmp(gpu->uuid, uuid, sizeof(gpu->uuid))) {
			kref_get(&gpu->kref);
			return gpu;
		}
	}
	gpu = gs_kzalloc(sizeof(*gpu), GFP_KERNEL);
	if (!gpu)
		return NULL;
	kref_init(&gpu->kref);
	memcpy(gpu->uuid, uuid, sizeof(gpu->uuid));
	INIT_LIST_HEAD(&gpu->jobs);
	INIT_WORK(&gpu->work, gs_gpu_work);
	list_add(&gpu->node, &gs_gpus);
	/* Its work may outlive every fd: it holds the module. */
	__module_get(THIS_MODULE);
	return gpu;
}

static void gs_gpu_free(struct kref *kref)
{
	struct gs_gpu *gpu = container_of(kref, struct gs_gpu, kref);

	list_del(&gpu->node);
	mutex_unlock(&gs_arb_lock);
	WARN_ON(!list_empty(&gpu->jobs));
	kfree(gpu);
	module_put(THIS_MODULE);	/* gs_arb_exit() waits for the work */
}

static void gs_gpu_put(struct gs_gpu *gpu)
{
	kref_put_mutex(&gpu->kref, gs_gpu_free, &gs_arb_lock);
}

/* Queue job on gpu and have its work run; gs_arb_lock held. */
static void gs_gpu_queue(struct gs_gpu *gpu, struct gs_job *job)
{
	lockdep_assert_held(&gs_arb_lock);
	list_add_tail(&job->node, &gpu->jobs);
	kref_get(&gpu->kref);		/* the run's */
	if (!queue_work(gs_arb_workq, &gpu->work))
		kref_put(&gpu->kref, gs_gpu_free);	/* never the last */
}

static void gs_reclaim_run(struct gs_reclaim *rc);
static void gs_lease_return_run(struct gs_lease *ls);

/*
 * The GPU's jobs, one at a time, in order. A work item never runs twice
 * at once: a job queued while it runs is taken by this run or the next.
 */
static void gs_gpu_work(struct work_struct *work)
{
	struct gs_gpu *gpu = container_of(work, struct gs_gpu, work);
	struct gs_job *job;

	for (;;) {
		mutex_lock(&gs_arb_lock);
		job = list_first_entry_or_null(&gpu->jobs, struct gs_job, node);
		if (job)
			list_del_init(&job->node);
		mutex_unlock(&gs_arb_lock);
		if (!job)
			break;
		if (job->rc)
			gs_reclaim_run(job->rc);
		else
			gs_lease_return_run(job->ls);
	}
	gs_gpu_put(gpu);		/* the run's; may free gpu */
}

/* ------------------------------------------------------------------ */
/* Objects                                                             */

static void gs_lease_free(struct kref *kref)
{
	struct gs_lease *ls = container_of(kref, struct gs_lease, kref);
	unsigned int i;

	/* Returned, or never filled: it holds no domain, no GPU queue. */
	WARN_ON(ls->gpu);
	for (i = 0; i < ls->nc; i++)
		WARN_ON(ls->c[i].d);
	kfree(ls->c);
	put_net(ls->net);
	kfree(ls);
}

static void gs_lease_put(struct gs_lease *ls)
{
	kref_put(&ls->kref, gs_lease_free);
}

static void gs_reclaim_free(struct kref *kref)
{
	struct gs_reclaim *rc = container_of(kref, struct gs_reclaim, kref);

	WARN_ON(rc->c || rc->gpu || rc->lease);
	put_pid_ns(rc->pidns);
	put_cred(rc->cred);
	kfree(rc);
}

static void gs_reclaim_put(struct gs_reclaim *rc)
{
	kref_put(&rc->kref, gs_reclaim_free);
}

/* Drop what candidates c[0..n) hold, and the array. */
static void gs_cands_free(struct gs_cand *c, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (c[i].g)
			gs_group_put_ref(c[i].g);
		gs_domain_put(c[i].d);
	}
	kfree(c);
}

/* ------------------------------------------------------------------ */
/* Netlink                                                             */

static void gs_arb_ntf(struct net *net, u8 cmd, u32 phase,
		       const struct gs_reclaim *rc, const struct gs_lease *ls,
		       const struct gpusleep_reclaim_victim *v)
{
	struct gs_arb_ntf n = {
		.cmd = cmd,
		.phase = phase,
		.victim = v,
	};

	if (rc) {
		n.reclaim_id = rc->id;
		memcpy(n.uuid, rc->uuid, sizeof(n.uuid));
		n.bytes = rc->bytes;
		n.priority = rc->prio;
		n.taken = rc->taken;
		n.reason = rc->reason;
		n.why = rc->why;
		n.lease_id = rc->lease_id;
	}
	if (ls) {
		n.reclaim_id = ls->reclaim_id;
		n.lease_id = ls->id;
		memcpy(n.uuid, ls->uuid, sizeof(n.uuid));
		n.taken = ls->taken;
		n.still_released = ls->still_released;
	}
	gs_genl_arb_notify(net, &n);
}

/* ------------------------------------------------------------------ */
/* Who may take from whom, and the candidates                          */

/*
 * May the claimant take from d (d->lock held)? 0, or the GPUSLEEP_RWHY_*
 * that says why not: its owner (the attach rule) takes at or below its
 * claim's priority; another user only from a domain that consents
 * (yieldable) and is below it; CAP_SYS_ADMIN from anyone below it.
 */
static u32 gs_may_take(const struct gs_reclaim *rc, struct gs_domain *d)
{
	bool owner = gs_may_control_ns(d, rc->cred, rc->pidns);
	bool yieldable = d->tenant_flags & GPUSLEEP_TENF_YIELDABLE;

	lockdep_assert_held(&d->lock);
	if (owner && d->priority <= rc->prio)
		return 0;
	if ((yieldable || rc->admin) && d->priority < rc->prio)
		return 0;
	if (!owner && !yieldable && !rc->admin)
		return GPUSLEEP_RWHY_NOT_PERMITTED;
	return GPUSLEEP_RWHY_PRIORITY;
}

struct gs_rank_check {
	const struct gs_reclaim *rc;
	u32 why;
};

/* A group is taken whole: the claimant may take from every rank. */
static bool gs_rank_permitted(struct gs_domain *d, void *arg)
{
	struct gs_rank_check *k = arg;

	mutex_lock(&d->lock);
	k->why |= d->dead ? GPUSLEEP_RWHY_REFUSED : gs_may_take(k->rc, d);
	if (!d->dead && (d->op_active || d->late.valid))
		k->why |= GPUSLEEP_RWHY_REFUSED;
	mutex_unlock(&d->lock);
	return !k->why;
}

static bool gs_kv_allowed(const struct gs_domain *d)
{
	return !(d->caps & GPUSLEEP_CAP_PREFIX_CACHING) ||
		(d->caps & GPUSLEEP_CAP_PREFIX_CACHE_RESET);
}

/*
 * Fill c with what d could give (d->lock held): its awake tags with
 * bytes mapped, discard-kind first then backup-kind, each in declared
 * order. 0, or the GPUSLEEP_RWHY_* of what was left out.
 */
static u32 gs_cand_tags(const struct gs_reclaim *rc, struct gs_domain *d,
			struct gs_cand *c)
{
	u32 awake = d->tags.all & ~d->released & ~d->leased;
	u32 pass, i, why = 0;

	c->n = 0;
	for (pass = GPUSLEEP_POLICY_DISCARD; pass <= GPUSLEEP_POLICY_BACKUP;
	     pass++) {
		for (i = 0; i < d->tags.nr; i++) {
			const struct gpusleep_report_tag *t = &d->report.tags[i];

			if (!(awake & BIT(i)) || t->policy != pass ||
			    !t->mapped_bytes)
				continue;
			/* A release of KV needs its prefix-cache rule met. */
			if ((BIT(i) & d->tags.kv) && !gs_kv_allowed(d))
				continue;
			if (pass == GPUSLEEP_POLICY_BACKUP &&
			    (rc->flags & GPUSLEEP_RECLAIMF_DISCARD_ONLY))
				continue;
			if (pass == GPUSLEEP_POLICY_BACKUP &&
			    !gs_tenant_fits(d, BIT(i))) {
				why |= GPUSLEEP_RWHY_HOST_BUDGET;
				continue;
			}
			c->order[c->n] = BIT(i);
			c->expect[c->n] = t->mapped_bytes;
			c->n++;
		}
	}
	return why;
}

static int gs_cand_cmp(const void *a, const void *b)
{
	const struct gs_cand *x = a, *y = b;

	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	if (x->active_ns != y->active_ns)
		return x->active_ns < y->active_ns ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * The snapshot: every live domain on rc's GPU, with an agent and a
 * report, idle (no operation, no late agent answer), that the claimant
 * may take from (its own process's too: a hybrid engine and trainer
 * share one, as verl's do; priorities order them) and that has something
 * to give; ordered by priority, then least recently active, then id. A
 * group appears once, by its first rank found on the GPU.
 */
static void gs_reclaim_candidates(struct gs_reclaim *rc)
{
	struct gs_domain *d;
	u32 id = 1, why;
	unsigned int i;
	bool dup;

	rc->c = kcalloc(GS_RECLAIM_MAX_CAND, sizeof(*rc->c), GFP_KERNEL);
	if (!rc->c)
		return;
	while (rc->nc < GS_RECLAIM_MAX_CAND && (d = gs_ids_next(&id))) {
		struct gs_cand *c = &rc->c[rc->nc];

		id++;
		mutex_lock(&d->lock);
		if (d->dead || !d->agent || !d->reported ||
		    memcmp(d->report.gpu_uuid, rc->uuid, sizeof(rc->uuid))) {
			mutex_unlock(&d->lock);
			gs_domain_put(d);
			continue;
		}
		why = gs_may_take(rc, d);
		if (!why && (d->op_active || d->late.valid))
			why = GPUSLEEP_RWHY_REFUSED;	/* busy */
		if (!why) {
			/* What the budget left out counts, taken or not. */
			rc->why |= gs_cand_tags(rc, d, c);
			if (!c->n)
				why = GPUSLEEP_RWHY_NO_CANDIDATE;
		}
		if (!why) {
			c->d = d;
			c->g = gs_group_get(d);
			c->prio = d->priority;
			c->active_ns = d->active_ns;
			c->id = d->id;
			c->out.domain = d->id;
		}
		mutex_unlock(&d->lock);
		rc->why |= why & ~GPUSLEEP_RWHY_NO_CANDIDATE;
		if (!c->d) {
			gs_domain_put(d);
			memset(c, 0, sizeof(*c));
			continue;
		}
		/* A group is one candidate, taken whole. */
		dup = false;
		for (i = 0; c->g && i < rc->nc; i++)
			dup |= rc->c[i].g == c->g;
		if (dup) {
			gs_group_put_ref(c->g);
			gs_domain_put(d);
			memset(c, 0, sizeof(*c));
			continue;
		}
		rc->nc++;
	}
	sort(rc->c, rc->nc, sizeof(*rc->c), gs_cand_cmp, NULL);
}

/* ------------------------------------------------------------------ */
/* Releases and resumes of one victim                                  */

/* Mark (or unmark) tags of d leased by lease id; d->lock held. */
static void gs_mark_leased(struct gs_domain *d, u64 id, u32 tags, bool on)
{
	struct gs_change c = { .from = d->state };

	lockdep_assert_held(&d->lock);
	if (on) {
		d->leased |= tags;
		d->lease_id = id;
	} else if (d->lease_id == id) {
		d->leased &= ~tags;
		if (!d->leased)
			d->lease_id = 0;
	}
	gs_announce(d, &c);
}

struct gs_lease_mark {
	u64 id;
	u32 tags;
	bool on;
};

static bool gs_rank_mark(struct gs_domain *d, void *arg)
{
	struct gs_lease_mark *m = arg;

	mutex_lock(&d->lock);
	if (!d->dead)
		gs_mark_leased(d, m->id, m->tags & d->released, m->on);
	mutex_unlock(&d->lock);
	return true;
}

/*
 * Wait for d's operation id (d->lock not held) until deadline: 0 and its
 * result, or -ETIMEDOUT. At the deadline, a release still draining is
 * called off, one unmapping sends no new step (the one read ends as it
 * ends), and its end is waited for: *cancelled says so.
 */
static int gs_victim_wait(struct gs_domain *d, u64 id, ktime_t deadline,
			  struct gpusleep_result *res, bool *cancelled)
{
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	int ret;

	mutex_lock(&d->lock);
	ret = gs_waiter_add(d, id, &w);
	mutex_unlock(&d->lock);
	if (ret)
		return ret;
	if (!w.done && gs_waiter_wait(&d->lock, &d->op_wq, &w, deadline)) {
		mutex_lock(&d->lock);
		*cancelled = gs_op_group_cancel(d, id) ||
			     gs_op_group_stop(d, id);
		ret = gs_waiter_add(d, id, &w);
		mutex_unlock(&d->lock);
		if (ret)
			return ret;
		/* Its steps time out on their own: this ends. */
		if (!w.done)
			gs_waiter_wait(&d->lock, &d->op_wq, &w, 0);
		ret = -ETIMEDOUT;
	}
	*res = w.res;
	return ret;
}

/*
 * Resume tags of c's domain (its group's ranks, for a group), letting go
 * of a lease's hold on them first: the result in *res. A domain busy with
 * another operation is waited for and tried again, a few times. 0 when
 * nothing was left to resume.
 */
static int gs_victim_resume(struct gs_cand *c, u64 lease_id, u32 tags,
			    struct gpusleep_result *res)
{
	struct gs_domain *d = c->d;
	struct gpusleep_op req;
	unsigned int tries;
	bool cancelled;
	u64 busy;
	int ret;

	memset(res, 0, sizeof(*res));
	if (c->g) {
		struct gs_lease_mark m = { .id = lease_id, .tags = tags };
		struct gpusleep_group_result gres;
		u64 gid;
		u32 reason;

		if (lease_id)
			gs_group_each(c->g, gs_rank_mark, &m);
		ret = gs_group_start_for(c->g, GPUSLEEP_OP_RESUME, tags, &gid,
					 &reason);
		if (!ret)
			ret = gs_group_wait_for(c->g, gid, 0, &gres);
		res->op_id = gid;
		res->error = ret ? ret : gres.error;
		res->reason = ret ? reason : gres.reason;
		return res->error;
	}
	for (tries = 0; tries < GS_RESUME_TRIES; tries++) {
		memset(&req, 0, sizeof(req));
		memset(res, 0, sizeof(*res));	/* not the busy one's */
		busy = 0;
		mutex_lock(&d->lock);
		if (d->dead) {
			mutex_unlock(&d->lock);
			res->error = -EOWNERDEAD;
			res->reason = GPUSLEEP_R_ENGINE_GONE;
			return res->error;
		}
		if (lease_id)
			gs_mark_leased(d, lease_id, tags, false);
		req.tags = tags & d->released;
		if (!req.tags) {
			mutex_unlock(&d->lock);
			return 0;	/* nothing of it left released */
		}
		ret = gs_op_resume(d, &req);
		if (ret == -EBUSY && d->op_active)
			busy = d->op.id;
		mutex_unlock(&d->lock);
		if (busy) {
			/* Its own operation first; then try again. */
			gs_victim_wait(d, busy, 0, res, &cancelled);
			continue;
		}
		if (ret) {
			res->error = ret;
			res->reason = req.reason;
			return ret;
		}
		gs_victim_wait(d, req.op_id, 0, res, &cancelled);
		return res->error;
	}
	res->error = -EBUSY;
	res->reason = GPUSLEEP_R_BUSY;
	return res->error;
}

/* Give c's tags back (a rollback): flags say how it went. */
static void gs_victim_rollback(struct gs_reclaim *rc, struct gs_cand *c)
{
	struct gpusleep_result res;

	gs_victim_resume(c, rc->lease_id, c->tags, &res);
	c->out.resume_op_id = res.op_id;
	c->out.resume_error = res.error;
	c->out.resume_reason = res.reason;
	if (res.reason == GPUSLEEP_R_ENGINE_GONE)
		c->out.flags |= GPUSLEEP_RVF_GONE;
	else if (res.error)
		c->out.flags |= GPUSLEEP_RVF_STILL_RELEASED;
	else if (res.op_id)
		c->out.flags |= GPUSLEEP_RVF_ROLLED_BACK;
	c->kept = false;
}

/* Choose c's tags: the fewest, in its order, that reach need. */
static void gs_victim_choose(struct gs_cand *c, u64 need)
{
	u64 sum = 0;
	u32 i;

	c->tags = 0;
	for (i = 0; i < c->n && sum < need; i++) {
		c->tags |= c->order[i];
		sum += c->expect[i];
	}
	c->out.tags = c->tags;
}

/* What c's release freed on the GPU, from its domain's result. */
static void gs_victim_count(struct gs_cand *c, const struct gpusleep_result *r)
{
	u32 i;

	c->out.freed_bytes = 0;
	for (i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		if (!(c->tags & BIT(i)))
			continue;
		if (r->freed_bytes[i]) {
			c->out.freed_bytes += r->freed_bytes[i];
		} else {
			c->out.freed_bytes += r->bytes[i];
			c->out.flags |= GPUSLEEP_RVF_UNMEASURED;
		}
	}
}

/* A group victim: its ranks' release, whole; bytes of c's own rank. */
static int gs_victim_take_group(struct gs_reclaim *rc, struct gs_cand *c)
{
	struct gs_rank_check k = { .rc = rc };
	struct gpusleep_group_result gres;
	struct gpusleep_result res;
	struct gs_domain *d = c->d;
	u32 reason, i;
	u64 gid;
	int ret;

	c->out.flags |= GPUSLEEP_RVF_GROUP;
	c->out.group = gs_group_id(c->g);
	if (!gs_group_each(c->g, gs_rank_permitted, &k)) {
		rc->why |= k.why;
		c->out.flags |= GPUSLEEP_RVF_FAILED;
		c->out.reason = k.why & GPUSLEEP_RWHY_REFUSED ?
				GPUSLEEP_R_BUSY : GPUSLEEP_R_NONE;
		c->out.error = k.why & GPUSLEEP_RWHY_REFUSED ? -EBUSY : -EPERM;
		return c->out.error;
	}
	ret = gs_group_start_for(c->g, GPUSLEEP_OP_RELEASE, c->tags, &gid,
				 &reason);
	c->out.op_id = gid;
	if (!ret)
		ret = gs_group_wait_for(c->g, gid, 0, &gres);
	if (ret || gres.error) {
		c->out.flags |= GPUSLEEP_RVF_FAILED;
		c->out.error = ret ? ret : gres.error;
		c->out.reason = ret ? reason : gres.reason;
		/* A failed group release rolled its ranks back itself. */
		return c->out.error;
	}
	/* What came free on this GPU: the rank on it, as its state says. */
	memset(&res, 0, sizeof(res));
	mutex_lock(&d->lock);
	for (i = 0; i < d->tags.nr; i++) {
		res.freed_bytes[i] = d->freed_bytes[i];
		res.bytes[i] = d->bytes_released[i];
	}
	mutex_unlock(&d->lock);
	gs_victim_count(c, &res);
	if (rc->lease) {
		struct gs_lease_mark m = {
			.id = rc->lease_id, .tags = c->tags, .on = true,
		};

		gs_group_each(c->g, gs_rank_mark, &m);
	}
	return 0;
}

/*
 * Take from victim c: an ordinary release of its chosen tags. A failure
 * resumes what it had released already (nothing is left half-released).
 */
static int gs_victim_take(struct gs_reclaim *rc, struct gs_cand *c)
{
	struct gs_domain *d = c->d;
	struct gpusleep_op req;
	struct gpusleep_result res;
	bool cancelled = false;
	int ret;

	c->tried = true;
	if (c->g)
		return gs_victim_take_group(rc, c);
	memset(&req, 0, sizeof(req));
	req.tags = c->tags;
	mutex_lock(&d->lock);
	if (d->dead) {
		req.reason = GPUSLEEP_R_ENGINE_GONE;
		ret = gs_reason_errno(req.reason);
	} else {
		ret = gs_op_release(d, &req);
		/* Leased from its start: nobody else calls it off. */
		if (!ret && rc->lease)
			gs_mark_leased(d, rc->lease_id, c->tags, true);
	}
	mutex_unlock(&d->lock);
	c->out.op_id = req.op_id;
	if (ret) {
		c->out.flags |= GPUSLEEP_RVF_FAILED;
		c->out.error = ret;
		c->out.reason = req.reason;
		return ret;
	}
	memset(&res, 0, sizeof(res));
	ret = gs_victim_wait(d, req.op_id, rc->deadline, &res, &cancelled);
	if (ret == -ETIMEDOUT)
		rc->why |= GPUSLEEP_RWHY_DEADLINE;
	if (cancelled)
		c->out.flags |= GPUSLEEP_RVF_CANCELLED;
	/* Its result forgotten (16 operations since): not counted. */
	if (ret && ret != -ETIMEDOUT)
		res.error = ret;
	c->out.error = res.error;
	c->out.reason = res.reason;
	if (res.error) {
		c->out.flags |= GPUSLEEP_RVF_FAILED;
		gs_victim_rollback(rc, c);
		return res.error;
	}
	gs_victim_count(c, &res);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The reclaim's job                                                   */

static bool gs_lease_closed(const struct gs_lease *ls)
{
	bool closed;

	if (!ls)
		return false;
	mutex_lock(&gs_arb_lock);
	closed = ls->closed;
	mutex_unlock(&gs_arb_lock);
	return closed;
}

/* Victims in turn until the bytes are reached, or none is left. */
static void gs_reclaim_take(struct gs_reclaim *rc)
{
	unsigned int i;

	for (i = 0; i < rc->nc && rc->taken < rc->bytes; i++) {
		struct gs_cand *c = &rc->c[i];

		if (gs_lease_closed(rc->lease)) {
			rc->why |= GPUSLEEP_RWHY_CANCELLED;
			return;
		}
		if (ktime_compare(ktime_get(), rc->deadline) >= 0) {
			rc->why |= GPUSLEEP_RWHY_DEADLINE;
			return;
		}
		gs_victim_choose(c, rc->bytes - rc->taken);
		if (gs_victim_take(rc, c)) {
			rc->why |= GPUSLEEP_RWHY_REFUSED;
		} else {
			c->kept = true;
			rc->taken += c->out.freed_bytes;
		}
		gs_arb_ntf(rc->net, GPUSLEEP_CMD_RECLAIM_NTF,
			   GPUSLEEP_ARB_VICTIM, rc, NULL, &c->out);
	}
	if (rc->taken < rc->bytes && i == rc->nc)
		rc->why |= GPUSLEEP_RWHY_NO_CANDIDATE;
}

/* Short, all or nothing: everything taken is resumed, last first. */
static void gs_reclaim_rollback(struct gs_reclaim *rc)
{
	unsigned int i;

	for (i = rc->nc; i-- > 0;) {
		if (!rc->c[i].kept)
			continue;
		gs_victim_rollback(rc, &rc->c[i]);
		rc->taken -= rc->c[i].out.freed_bytes;
	}
}

/* Move the kept victims to the lease, drop the rest. */
static void gs_reclaim_settle(struct gs_reclaim *rc)
{
	struct gs_lease *ls = rc->lease;
	unsigned int i, n = 0;

	for (i = 0; i < rc->nc; i++)
		if (rc->c[i].tried)
			rc->v[rc->nv++] = rc->c[i].out;
	for (i = 0; ls && i < rc->nc; i++) {
		if (!rc->c[i].kept)
			continue;
		if (n != i)
			swap(rc->c[n], rc->c[i]);
		n++;
	}
	mutex_lock(&gs_arb_lock);
	if (ls) {
		ls->c = n ? rc->c : NULL;
		ls->nc = n;
		ls->taken = rc->taken;
		ls->since = ktime_get();
		WRITE_ONCE(ls->state, GPUSLEEP_LEASE_HELD);
	}
	mutex_unlock(&gs_arb_lock);
	if (ls && n) {
		/* The lease holds those; the others go now. */
		for (i = n; i < rc->nc; i++) {
			if (rc->c[i].g)
				gs_group_put_ref(rc->c[i].g);
			gs_domain_put(rc->c[i].d);
		}
	} else {
		gs_cands_free(rc->c, rc->nc);
	}
	rc->c = NULL;
	rc->nc = 0;
}

/* Forget the oldest finished reclaims past GS_RECLAIM_HIST. */
static void gs_reclaims_trim(struct list_head *out)
{
	struct gs_reclaim *rc, *tmp;
	unsigned int done = 0;

	lockdep_assert_held(&gs_arb_lock);
	list_for_each_entry_reverse(rc, &gs_reclaims, node)
		if (rc->done)
			done++;
	list_for_each_entry_safe(rc, tmp, &gs_reclaims, node) {
		if (done <= GS_RECLAIM_HIST)
			break;
		if (!rc->done)
			continue;
		list_move(&rc->node, out);
		done--;
	}
}

static void gs_reclaim_run(struct gs_reclaim *rc)
{
	struct gs_lease *ls = rc->lease;
	struct gs_reclaim *old, *tmp;
	LIST_HEAD(gone);

	if (gs_lease_closed(ls))
		rc->why |= GPUSLEEP_RWHY_CANCELLED;
	else if (ktime_compare(ktime_get(), rc->deadline) >= 0)
		rc->why |= GPUSLEEP_RWHY_DEADLINE;
	else
		gs_reclaim_candidates(rc);
	if (rc->c)
		gs_reclaim_take(rc);
	if (rc->taken < rc->bytes) {
		rc->reason = GPUSLEEP_R_SHORTFALL;
		rc->why |= rc->nc ? 0 : GPUSLEEP_RWHY_NO_CANDIDATE;
		if (!(rc->flags & GPUSLEEP_RECLAIMF_PARTIAL) && rc->c)
			gs_reclaim_rollback(rc);
	}
	/* Only what kept it short is said. */
	if (rc->taken >= rc->bytes)
		rc->why = 0;
	gs_reclaim_settle(rc);

	mutex_lock(&gs_arb_lock);
	WRITE_ONCE(rc->done, true);
	gs_reclaims_trim(&gone);
	mutex_unlock(&gs_arb_lock);
	wake_up_all(&gs_arb_wq);
	gs_arb_ntf(rc->net, GPUSLEEP_CMD_RECLAIM_NTF, GPUSLEEP_ARB_END, rc,
		   NULL, NULL);
	if (ls && ls->nc)
		gs_arb_ntf(rc->net, GPUSLEEP_CMD_LEASE_NTF, GPUSLEEP_ARB_TAKEN,
			   NULL, ls, NULL);

	put_net(rc->net);
	rc->net = NULL;
	gs_gpu_put(rc->gpu);
	rc->gpu = NULL;
	rc->lease = NULL;
	if (ls)
		gs_lease_put(ls);	/* the reclaim's */
	list_for_each_entry_safe(old, tmp, &gone, node) {
		list_del(&old->node);
		gs_reclaim_put(old);	/* the list's */
	}
	gs_reclaim_put(rc);		/* the job's */
}

/* ------------------------------------------------------------------ */
/* Leases                                                              */

static int gs_lease_cmp(const void *a, const void *b)
{
	const struct gs_cand *x = a, *y = b;

	/* Highest priority first, then the most recently active. */
	if (x->prio != y->prio)
		return x->prio > y->prio ? -1 : 1;
	if (x->active_ns != y->active_ns)
		return x->active_ns > y->active_ns ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void gs_lease_return_run(struct gs_lease *ls)
{
	struct gpusleep_result res;
	unsigned int i;

	mutex_lock(&gs_arb_lock);
	WRITE_ONCE(ls->state, GPUSLEEP_LEASE_RETURNING);
	ls->until = ktime_get();
	mutex_unlock(&gs_arb_lock);
	sort(ls->c, ls->nc, sizeof(*ls->c), gs_lease_cmp, NULL);
	for (i = 0; i < ls->nc; i++) {
		struct gs_cand *c = &ls->c[i];
		u32 flags;

		gs_victim_resume(c, ls->id, c->tags, &res);
		if (res.reason == GPUSLEEP_R_ENGINE_GONE)
			flags = GPUSLEEP_RVF_GONE;
		else if (res.error)
			flags = GPUSLEEP_RVF_STILL_RELEASED;
		else
			flags = GPUSLEEP_RVF_RETURNED;
		mutex_lock(&gs_arb_lock);
		c->out.flags |= flags;
		c->out.resume_op_id = res.op_id;
		c->out.resume_error = res.error;
		c->out.resume_reason = res.reason;
		if (flags == GPUSLEEP_RVF_STILL_RELEASED)
			ls->still_released++;
		mutex_unlock(&gs_arb_lock);
		gs_arb_ntf(ls->net, GPUSLEEP_CMD_LEASE_NTF, GPUSLEEP_ARB_RESUME,
			   NULL, ls, &c->out);
	}
	mutex_lock(&gs_arb_lock);
	WRITE_ONCE(ls->state, GPUSLEEP_LEASE_RETURNED);
	gs_leases_live--;
	mutex_unlock(&gs_arb_lock);
	wake_up_all(&gs_arb_wq);
	gs_arb_ntf(ls->net, GPUSLEEP_CMD_LEASE_NTF, GPUSLEEP_ARB_RETURNED, NULL,
		   ls, NULL);
	/* Returned: it holds no domain any more (LEASE_INFO reads none). */
	for (i = 0; i < ls->nc; i++) {
		if (ls->c[i].g)
			gs_group_put_ref(ls->c[i].g);
		gs_domain_put(ls->c[i].d);
		ls->c[i].g = NULL;
		ls->c[i].d = NULL;
	}
	gs_gpu_put(ls->gpu);
	ls->gpu = NULL;
	gs_lease_put(ls);		/* the return's */
}

/* Give ls back (once): its return goes on its GPU's queue. */
static void gs_lease_end(struct gs_lease *ls)
{
	mutex_lock(&gs_arb_lock);
	ls->closed = true;
	/* Never started (its RECLAIM failed first): nothing to give back. */
	if (!ls->gpu) {
		WRITE_ONCE(ls->state, GPUSLEEP_LEASE_RETURNED);
	} else if (!ls->queued) {
		ls->queued = true;
		kref_get(&ls->kref);	/* the return's */
		gs_gpu_queue(ls->gpu, &ls->ret);
	}
	mutex_unlock(&gs_arb_lock);
}

static int gs_lease_release(struct inode *inode, struct file *file)
{
	struct gs_lease *ls = file->private_data;

	/* Closed, or its holder died: what it took comes back. */
	gs_lease_end(ls);
	gs_user_uncharge(ls->uid, GS_UC_FDS);
	gs_lease_put(ls);
	return 0;
}

static __poll_t gs_lease_poll(struct file *file, poll_table *wait)
{
	struct gs_lease *ls = file->private_data;

	poll_wait(file, &gs_arb_wq, wait);
	if (READ_ONCE(ls->state) == GPUSLEEP_LEASE_RETURNED)
		return EPOLLIN | EPOLLRDNORM;
	return 0;
}

/* Copy n entries out, each cut or cleared to the caller's size. */
static int gs_victims_out(u64 uaddr, u32 size,
			  const struct gpusleep_reclaim_victim *v,
			  unsigned int n)
{
	void __user *p = u64_to_user_ptr(uaddr);
	size_t k = min_t(size_t, size, sizeof(*v));
	unsigned int i;

	for (i = 0; i < n; i++, p += size) {
		if (gs_copy_to_user(p, &v[i], k))
			return -EFAULT;
		if (size > k && clear_user(p + k, size - k))
			return -EFAULT;
	}
	return 0;
}

static long gs_lease_info(struct gs_lease *ls, const struct gs_uarg *ua)
{
	struct gpusleep_reclaim_victim *v = NULL;
	struct gpusleep_lease li;
	unsigned int i, n = 0;
	ktime_t end;
	long ret;

	ret = gs_uarg_in(ua, &li, sizeof(li));
	if (ret)
		return ret;
	if (!gs_zero(li.reserved, sizeof(li.reserved)) ||
	    (li.victims && li.nr_victims &&
	     li.victim_size < GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0))
		return -EINVAL;
	if (li.victims && li.nr_victims) {
		n = min_t(u32, li.nr_victims, GS_RECLAIM_MAX_CAND);
		v = gs_kzalloc(sizeof(*v) * n, GFP_KERNEL);
		if (!v)
			return -ENOMEM;
	}
	mutex_lock(&gs_arb_lock);
	li.id = ls->id;
	li.reclaim_op_id = ls->reclaim_id;
	li.state = ls->state;
	li.still_released = ls->still_released;
	li.taken_bytes = ls->taken;
	memcpy(li.gpu_uuid, ls->uuid, sizeof(li.gpu_uuid));
	li.held_ns = 0;
	if (ls->state >= GPUSLEEP_LEASE_HELD) {
		end = ls->state == GPUSLEEP_LEASE_HELD ? ktime_get() : ls->until;
		li.held_ns = ktime_to_ns(ktime_sub(end, ls->since));
	}
	n = min(n, ls->nc);
	for (i = 0; i < n; i++) {
		v[i] = ls->c[i].out;
		/* A domain that died while held has left the lease. */
		if (ls->state == GPUSLEEP_LEASE_HELD &&
		    READ_ONCE(ls->c[i].d->dead))
			v[i].flags |= GPUSLEEP_RVF_GONE;
	}
	mutex_unlock(&gs_arb_lock);
	if (n)
		ret = gs_victims_out(li.victims, li.victim_size, v, n);
	kfree(v);
	if (ret)
		return ret;
	li.nr_victims = n;
	li.victim_size = sizeof(struct gpusleep_reclaim_victim);
	return gs_uarg_out(ua, &li, sizeof(li)) ? -EFAULT : 0;
}

/* LEASE_RETURN: give it back now; blocking unless NONBLOCK. */
static long gs_lease_return(struct gs_lease *ls, unsigned long arg)
{
	int ret;

	if (arg & ~GPUSLEEP_LEASE_RETURN_NONBLOCK)
		return -EINVAL;
	gs_lease_end(ls);
	if (arg & GPUSLEEP_LEASE_RETURN_NONBLOCK)
		return READ_ONCE(ls->state) == GPUSLEEP_LEASE_RETURNED ?
		       READ_ONCE(ls->still_released) : -EINPROGRESS;
	ret = wait_event_interruptible(gs_arb_wq, READ_ONCE(ls->state) ==
				       GPUSLEEP_LEASE_RETURNED);
	if (ret)
		return -EINTR;	/* it goes on: poll() says when it ends */
	return READ_ONCE(ls->still_released);
}

static long gs_lease_ioctl(struct file *file, unsigned int cmd,
			   unsigned long arg)
{
	struct gs_lease *ls = file->private_data;
	struct gs_uarg ua;
	int ret;

	if (cmd == GPUSLEEP_IOC_LEASE_RETURN)
		return gs_lease_return(ls, arg);
	ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_LEASE_INFO,
			   GPUSLEEP_LEASE_SIZE_VER0);
	if (ret)
		return ret;
	return gs_lease_info(ls, &ua);
}

static const struct file_operations gs_lease_fops = {
	.owner		= THIS_MODULE,
	.release	= gs_lease_release,
	.poll		= gs_lease_poll,
	.unlocked_ioctl	= gs_lease_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct gs_lease *gs_lease_new(const struct gs_reclaim *rc)
{
	struct gs_lease *ls = gs_kzalloc(sizeof(*ls), GFP_KERNEL_ACCOUNT);

	if (!ls)
		return NULL;
	kref_init(&ls->kref);		/* its fd's */
	ls->ret.ls = ls;
	INIT_LIST_HEAD(&ls->ret.node);
	memcpy(ls->uuid, rc->uuid, sizeof(ls->uuid));
	ls->net = get_net(current->nsproxy->net_ns);
	ls->state = GPUSLEEP_LEASE_TAKING;
	ls->uid = gs_user_current();
	return ls;
}

/* ------------------------------------------------------------------ */
/* RECLAIM and RECLAIM_WAIT                                            */

static int gs_reclaim_valid(const struct gpusleep_reclaim *r, bool wait)
{
	if (r->pad || !gs_zero(r->reserved, sizeof(r->reserved)) ||
	    (r->victims && r->nr_victims &&
	     r->victim_size < GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0))
		return -EINVAL;
	if (wait)
		return 0;
	if ((r->flags & ~GPUSLEEP_RECLAIMF_MASK) || !r->bytes ||
	    gs_zero(r->gpu_uuid, sizeof(r->gpu_uuid)) ||
	    r->priority < GPUSLEEP_PRIO_MIN || r->priority > GPUSLEEP_PRIO_MAX)
		return -EINVAL;
	return 0;
}

/* The caller's view of reclaim rc (state, result), and its entries. */
static noinline_for_stack int gs_reclaim_out(struct gs_reclaim *rc,
					     struct gpusleep_reclaim *r)
{
	struct gpusleep_reclaim_victim *v = NULL;
	unsigned int n = 0;
	int ret = 0;

	if (r->victims && r->nr_victims) {
		n = min_t(u32, r->nr_victims, GS_RECLAIM_MAX_CAND);
		v = gs_kzalloc(sizeof(*v) * n, GFP_KERNEL);
		if (!v)
			return -ENOMEM;
	}
	mutex_lock(&gs_arb_lock);
	r->op_id = rc->id;
	memcpy(r->gpu_uuid, rc->uuid, sizeof(r->gpu_uuid));
	r->bytes = rc->bytes;
	r->priority = rc->prio;
	r->flags = rc->flags;
	r->state = rc->done ? GPUSLEEP_RECLAIM_DONE : GPUSLEEP_RECLAIM_RUNNING;
	r->lease_id = rc->lease_id;
	if (rc->done) {
		r->reason = rc->reason;
		r->why = rc->why;
		r->taken_bytes = rc->taken;
		n = min(n, rc->nv);
		memcpy(v, rc->v, sizeof(*v) * n);
	} else {
		r->reason = 0;
		r->why = 0;
		r->taken_bytes = 0;
		n = 0;
	}
	mutex_unlock(&gs_arb_lock);
	if (n)
		ret = gs_victims_out(r->victims, r->victim_size, v, n);
	kfree(v);
	r->nr_victims = n;
	r->victim_size = sizeof(struct gpusleep_reclaim_victim);
	return ret;
}

static struct gs_reclaim *gs_reclaim_new(const struct gpusleep_reclaim *r)
{
	struct gs_reclaim *rc = gs_kzalloc(sizeof(*rc), GFP_KERNEL_ACCOUNT);
	u32 ms = r->timeout_ms ? r->timeout_ms : gs_reclaim_timeout_ms;

	if (!rc)
		return NULL;
	kref_init(&rc->kref);		/* the job's */
	INIT_LIST_HEAD(&rc->node);
	INIT_LIST_HEAD(&rc->job.node);
	rc->job.rc = rc;
	memcpy(rc->uuid, r->gpu_uuid, sizeof(rc->uuid));
	rc->bytes = r->bytes;
	rc->prio = r->priority;
	rc->flags = r->flags;
	rc->deadline = ktime_add_ms(ktime_get(), ms);
	rc->cred = get_current_cred();
	rc->pidns = get_pid_ns(task_active_pid_ns(current));
	rc->admin = capable(CAP_SYS_ADMIN);
	rc->net = get_net(current->nsproxy->net_ns);
	return rc;
}

/* Throw away a reclaim that never started, and its lease. */
static void gs_reclaim_discard(struct gs_reclaim *rc)
{
	put_net(rc->net);
	rc->net = NULL;
	gs_reclaim_put(rc);
}

/*
 * A lease fd for ls (O_CLOEXEC), charged to the caller: the fd, not yet
 * installed, and its file in *filep; or -errno.
 */
static int gs_lease_file(struct gs_lease *ls, struct file **filep)
{
	struct file *file;
	int fd, ret;

	ret = gs_user_charge(ls->uid, GS_UC_FDS);
	if (ret)
		return ret;
	fd = gs_fault() ? -EMFILE : get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_uncharge;
	}
	file = gs_fault() ? ERR_PTR(-ENOMEM) :
		anon_inode_getfile("[gpusleep-lease]", &gs_lease_fops, ls,
				   O_RDWR);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
		goto err_put_fd;
	}
	*filep = file;
	return fd;

err_put_fd:
	put_unused_fd(fd);
err_uncharge:
	gs_user_uncharge(ls->uid, GS_UC_FDS);
	return ret;
}

long gs_reclaim(const struct gs_uarg *ua)
{
	struct gpusleep_reclaim req;
	struct gs_lease *ls = NULL;
	struct file *file = NULL;
	struct gs_reclaim *rc;
	int fd = -1;
	bool lease, done;
	long ret;

	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	ret = gs_reclaim_valid(&req, false);
	if (ret)
		return ret;
	/* A claim above the default is a privilege, as nice(2). */
	if (req.priority > 0 && !capable(CAP_SYS_NICE))
		return -EPERM;
	lease = req.flags & GPUSLEEP_RECLAIMF_LEASE;

	rc = gs_reclaim_new(&req);
	if (!rc)
		return -ENOMEM;
	if (lease) {
		ls = gs_lease_new(rc);
		if (!ls) {
			ret = -ENOMEM;
			goto err_rc;
		}
		fd = gs_lease_file(ls, &file);
		if (fd < 0) {
			ret = fd;
			goto err_ls;
		}
	}

	mutex_lock(&gs_arb_lock);
	rc->gpu = gs_gpu_get(rc->uuid);
	if (!rc->gpu) {
		mutex_unlock(&gs_arb_lock);
		ret = -ENOMEM;
		goto err_file;
	}
	rc->id = ++gs_reclaim_last;
	if (ls) {
		ls->id = ++gs_lease_last;
		ls->reclaim_id = rc->id;
		kref_get(&rc->gpu->kref);
		ls->gpu = rc->gpu;
		kref_get(&ls->kref);	/* the reclaim's */
		rc->lease = ls;
		rc->lease_id = ls->id;
		gs_leases_live++;
	}
	kref_get(&rc->kref);		/* the list's */
	list_add_tail(&rc->node, &gs_reclaims);
	kref_get(&rc->kref);		/* ours, while we look at it */
	/* Before its job can run: the start comes first. */
	gs_arb_ntf(rc->net, GPUSLEEP_CMD_RECLAIM_NTF, GPUSLEEP_ARB_START, rc,
		   NULL, NULL);
	gs_gpu_queue(rc->gpu, &rc->job);
	mutex_unlock(&gs_arb_lock);

	ret = 0;
	if (!(req.flags & GPUSLEEP_RECLAIMF_NONBLOCK)) {
		ret = wait_event_interruptible(gs_arb_wq, READ_ONCE(rc->done));
		if (ret)
			ret = -EINTR;	/* it goes on: RECLAIM_WAIT */
	}
	done = READ_ONCE(rc->done);
	req.lease_fd = fd;
	if (gs_reclaim_out(rc, &req))
		ret = -EFAULT;
	/*
	 * A blocking call that came short, all or nothing: nothing was
	 * kept, no lease to hand out. (NONBLOCK: RECLAIM_WAIT tells.)
	 */
	if (!ret && done && !(req.flags & GPUSLEEP_RECLAIMF_NONBLOCK) &&
	    req.reason && !(req.flags & GPUSLEEP_RECLAIMF_PARTIAL))
		ret = gs_reason_errno(req.reason);
	if (ret && ret != -EINTR && file) {
		req.lease_fd = -1;
		req.lease_id = 0;
	}
	if (gs_uarg_out(ua, &req, sizeof(req)) && ret != -EFAULT) {
		ret = -EFAULT;
		req.lease_fd = -1;
	}
	gs_reclaim_put(rc);
	if (file) {
		if (req.lease_fd < 0) {
			/* Given back at once: whatever was kept returns. */
			fput(file);
			put_unused_fd(fd);
		} else {
			fd_install(fd, file);
		}
	}
	if (!ret && lease)
		return fd;
	return ret;

err_file:
	if (file) {
		fput(file);		/* takes the fd's reference on ls */
		put_unused_fd(fd);
		ls = NULL;
	}
err_ls:
	if (ls)
		gs_lease_put(ls);
err_rc:
	gs_reclaim_discard(rc);
	return ret;
}

/* May the caller see reclaim rc? Its claimant, or CAP_SYS_ADMIN. */
static bool gs_reclaim_mine(const struct gs_reclaim *rc)
{
	const struct cred *cred = current_cred();

	return uid_eq(cred->euid, rc->cred->euid) &&
	       cred->user_ns == rc->cred->user_ns &&
	       task_active_pid_ns(current) == rc->pidns;
}

long gs_reclaim_wait(const struct gs_uarg *ua)
{
	struct gpusleep_reclaim req;
	struct gs_reclaim *rc, *found = NULL;
	bool any = false;
	long ret;

	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	ret = gs_reclaim_valid(&req, true);
	if (ret)
		return ret;
	mutex_lock(&gs_arb_lock);
	list_for_each_entry_reverse(rc, &gs_reclaims, node) {
		if (req.op_id ? rc->id != req.op_id : !gs_reclaim_mine(rc))
			continue;
		any = true;
		if (gs_reclaim_mine(rc) || capable(CAP_SYS_ADMIN)) {
			kref_get(&rc->kref);
			found = rc;
		}
		break;
	}
	mutex_unlock(&gs_arb_lock);
	if (!found)
		return any ? -EPERM : -ENOENT;
	if (req.timeout_ms)
		ret = gs_wait_until(gs_arb_wq, READ_ONCE(found->done),
				    ktime_add_ms(ktime_get(), req.timeout_ms));
	else
		ret = wait_event_interruptible(gs_arb_wq,
					       READ_ONCE(found->done));
	/* As WAIT: only a named id without a timeout is restarted. */
	if (ret == -ERESTARTSYS && (!req.op_id || req.timeout_ms))
		ret = -EINTR;
	if (ret == -EINTR || ret == -ERESTARTSYS) {
		u64 id = found->id;

		memset(&req, 0, sizeof(req));
		req.op_id = id;
		req.lease_fd = -1;
		if (gs_uarg_out(ua, &req, sizeof(req)))
			ret = -EFAULT;
		gs_reclaim_put(found);
		return ret;
	}
	if (!ret) {
		req.lease_fd = -1;
		ret = gs_reclaim_out(found, &req);
		if (!ret && gs_uarg_out(ua, &req, sizeof(req)))
			ret = -EFAULT;
	}
	gs_reclaim_put(found);
	return ret;
}

int gs_arb_init(void)
{
	gs_arb_workq = alloc_workqueue("gpusleep_arbiter", WQ_UNBOUND, 0);
	return gs_arb_workq ? 0 : -ENOMEM;
}

void gs_arb_exit(void)
{
	struct gs_reclaim *rc, *tmp;

	/*
	 * Every GPU queue holds the module until freed: none is left but
	 * the end of a work that put the last one, which this waits for.
	 */
	destroy_workqueue(gs_arb_workq);
	WARN_ON(!list_empty(&gs_gpus));
	list_for_each_entry_safe(rc, tmp, &gs_reclaims, node) {
		list_del(&rc->node);
		gs_reclaim_put(rc);
	}
}
