// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: tenants (docs/arbiter.md).
 *
 * What a domain says of itself as a tenant of its GPU: the engine's
 * statement (SET_TENANT: its priority and whether other users may take
 * from it), and its agent's newest report (REPORT: the GPU's UUID, per
 * tag its size, mapped and host bytes, policy and content after a resume,
 * and what the process holds outside its tags, by class). GET_TENANT
 * reads both back. The reclaims of reclaim.c choose their victims from
 * these.
 *
 * The node's host-RAM budget (host_budget_bytes, 0: none) is kept here:
 * per domain, per tag, the larger of the host bytes its report says the
 * tag's backup and kept staging hold, and the bytes a release of a
 * backup-kind tag counts on (max(mapped, host) of the report, from the
 * release's start until the tag is resumed: host_pending); their sum over
 * the node is gs_host_sum. A release whose backups would take the sum past
 * the budget is refused (GPUSLEEP_R_HOST_BUDGET) before anything starts,
 * checked again and counted atomically as it starts (gs_tenant_reserve()).
 * A domain without a report counts nothing: the module knows only what
 * agents report.
 *
 * Locking: everything per domain under domain->lock. gs_budget_lock, a
 * spinlock and a leaf (taken under domain->lock, nothing under it),
 * guards gs_host_sum, so that the check and the count of a release are
 * one step across every domain of the node. No copy_*_user() under
 * either: the ioctls copy on the stack before and after.
 */
#include <linux/capability.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/lockdep.h>
#include <linux/minmax.h>
#include <linux/moduleparam.h>
#include <linux/spinlock.h>
#include <linux/string.h>

#include "gpusleep.h"

static unsigned long long gs_host_budget_bytes;
module_param_named(host_budget_bytes, gs_host_budget_bytes, ullong, 0644);
MODULE_PARM_DESC(host_budget_bytes,
		 "Most host RAM the tenants' backups may hold, in bytes (0: no limit)");

static DEFINE_SPINLOCK(gs_budget_lock);
static u64 gs_host_sum;

u64 gs_host_budget(void)
{
	return READ_ONCE(gs_host_budget_bytes);
}

u64 gs_host_used(void)
{
	u64 v;

	spin_lock(&gs_budget_lock);
	v = gs_host_sum;
	spin_unlock(&gs_budget_lock);
	return v;
}

static int gs_host_used_get(char *buf, const struct kernel_param *kp)
{
	return scnprintf(buf, PAGE_SIZE, "%llu\n",
			 (unsigned long long)gs_host_used());
}

static const struct kernel_param_ops gs_host_used_ops = {
	.get = gs_host_used_get,
};

module_param_cb(host_used_bytes, &gs_host_used_ops, NULL, 0444);
MODULE_PARM_DESC(host_used_bytes,
		 "Host RAM the tenants' backups hold or count on, in bytes (read-only)");

static bool gs_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/* What a release of tag (one bit) would count on: backup-kind only. */
u64 gs_tenant_backup_bytes(const struct gs_domain *d, u32 tag)
{
	const struct gpusleep_report_tag *t;

	if (!d->reported || !tag)
		return 0;
	t = &d->report.tags[gs_tag_index(tag)];
	if (t->policy != GPUSLEEP_POLICY_BACKUP)
		return 0;
	return max(t->mapped_bytes, t->host_bytes);
}

/* What tag i counts now: reported, or counted on by a release. */
static u64 gs_tag_charge(const struct gs_domain *d, u32 i)
{
	u64 host = d->reported ? d->report.tags[i].host_bytes : 0;

	return max(host, d->host_pending[i]);
}

/* What d would count with tags' backups counted on too (none: 0). */
static u64 gs_tenant_charge(const struct gs_domain *d, u32 tags)
{
	u64 sum = 0;
	u32 i;

	if (d->dead)
		return 0;
	for (i = 0; i < d->tags.nr; i++) {
		u64 c = gs_tag_charge(d, i);

		if (tags & BIT(i))
			c = max(c, gs_tenant_backup_bytes(d, BIT(i)));
		sum += c;
	}
	return sum;
}

/* Would the node's sum, with d counting want, stay within the budget? */
static bool gs_budget_room(const struct gs_domain *d, u64 want)
{
	u64 budget = gs_host_budget();
	u64 rest;

	lockdep_assert_held(&gs_budget_lock);
	if (!budget || want <= d->host_charged)
		return true;
	rest = gs_host_sum - d->host_charged;
	return rest <= budget && want <= budget - rest;
}

static void gs_budget_set(struct gs_domain *d, u64 charge)
{
	lockdep_assert_held(&gs_budget_lock);
	gs_host_sum = gs_host_sum - d->host_charged + charge;
	d->host_charged = charge;
}

bool gs_tenant_fits(struct gs_domain *d, u32 tags)
{
	u64 want;
	bool ok;

	lockdep_assert_held(&d->lock);
	want = gs_tenant_charge(d, tags);
	spin_lock(&gs_budget_lock);
	ok = gs_budget_room(d, want);
	spin_unlock(&gs_budget_lock);
	return ok;
}

bool gs_tenant_reserve(struct gs_domain *d, u32 tags)
{
	u64 want;
	bool ok;
	u32 i;

	lockdep_assert_held(&d->lock);
	want = gs_tenant_charge(d, tags);
	spin_lock(&gs_budget_lock);
	ok = gs_budget_room(d, want);
	if (ok)
		gs_budget_set(d, want);
	spin_unlock(&gs_budget_lock);
	if (!ok)
		return false;
	for (i = 0; i < d->tags.nr; i++)
		if (tags & BIT(i))
			d->host_pending[i] = max(d->host_pending[i],
						 gs_tenant_backup_bytes(d, BIT(i)));
	return true;
}

void gs_tenant_sync(struct gs_domain *d)
{
	u32 keep = d->released;
	u64 charge;
	u32 i;

	lockdep_assert_held(&d->lock);
	/* A release counts on its tags from its start until resumed. */
	if (d->op_active && d->op.kind == GPUSLEEP_OP_RELEASE)
		keep |= d->op.todo;
	for (i = 0; i < d->tags.nr; i++)
		if (!(keep & BIT(i)))
			d->host_pending[i] = 0;
	charge = gs_tenant_charge(d, 0);
	if (charge == d->host_charged)
		return;
	spin_lock(&gs_budget_lock);
	gs_budget_set(d, charge);
	spin_unlock(&gs_budget_lock);
}

/*
 * A report's own form, against the domain's declaration (fixed for its
 * life, read without a lock): 0 or -EINVAL.
 */
static int gs_report_valid(const struct gs_domain *d,
			   const struct gpusleep_report *r)
{
	u32 i;

	if (r->flags || r->pad || !gs_zero(r->reserved, sizeof(r->reserved)))
		return -EINVAL;
	if (gs_zero(r->gpu_uuid, sizeof(r->gpu_uuid)))
		return -EINVAL;
	if (r->nr_tags != d->tags.nr)
		return -EINVAL;
	/* Bytes are the agent's to say with whose view they are. */
	if (r->process_source > GPUSLEEP_RESIDENT_DEVICE ||
	    (r->process_bytes && !r->process_source))
		return -EINVAL;
	for (i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		const struct gpusleep_report_tag *t = &r->tags[i];

		if (i >= r->nr_tags) {
			if (!gs_zero(t, sizeof(*t)))
				return -EINVAL;
			continue;
		}
		if (t->policy > GPUSLEEP_POLICY_BACKUP ||
		    t->content > GPUSLEEP_CONTENT_KEPT ||
		    (t->flags & ~GPUSLEEP_RTF_MASK) || t->pad ||
		    t->mapped_bytes > t->size_bytes)
			return -EINVAL;
		/* A discarded tag keeps nothing and has no backup to check. */
		if (t->policy != GPUSLEEP_POLICY_BACKUP &&
		    (t->content == GPUSLEEP_CONTENT_KEPT ||
		     (t->flags & GPUSLEEP_RTF_VERIFIED)))
			return -EINVAL;
	}
	return 0;
}

/* REPORT (agent fd): the agent's newest word replaces the previous whole. */
noinline_for_stack long gs_ioc_report(struct gs_file *gf,
				      const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gpusleep_report r;
	long ret;

	if (gf->role != GPUSLEEP_ROLE_AGENT)
		return -EPERM;
	ret = gs_uarg_in(ua, &r, sizeof(r));
	if (ret)
		return ret;
	ret = gs_report_valid(d, &r);
	if (ret)
		return ret;

	mutex_lock(&d->lock);
	if (d->dead) {
		ret = -ENODEV;
	} else if (d->agent != gf) {
		ret = -ENOTCONN;
	} else {
		struct gs_change c = { .from = d->state };

		d->report = r;
		d->reported = true;
		gs_announce(d, &c);	/* the budget's count follows it */
	}
	mutex_unlock(&d->lock);
	return ret;
}

/* SET_TENANT (engine fd, in the engine's process: domain.c checked). */
long gs_ioc_set_tenant(struct gs_file *gf, const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gpusleep_tenant_set t;
	long ret;

	ret = gs_uarg_in(ua, &t, sizeof(t));
	if (ret)
		return ret;
	if ((t.flags & ~GPUSLEEP_TENF_MASK) ||
	    !gs_zero(t.reserved, sizeof(t.reserved)) ||
	    t.priority < GPUSLEEP_PRIO_MIN || t.priority > GPUSLEEP_PRIO_MAX)
		return -EINVAL;

	mutex_lock(&d->lock);
	if (d->dead) {
		ret = -ENODEV;
	} else if (t.priority > 0 && t.priority > d->priority &&
		   !capable(CAP_SYS_NICE)) {
		/* As nice(2): above the default, and higher, is a privilege. */
		ret = -EPERM;
	} else {
		struct gs_change c = { .from = d->state };

		d->priority = t.priority;
		d->tenant_flags = t.flags;
		gs_announce(d, &c);
	}
	mutex_unlock(&d->lock);
	return ret;
}

/* GET_TENANT (any domain fd). */
noinline_for_stack long gs_ioc_get_tenant(struct gs_file *gf,
					  const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gpusleep_tenant t;
	u64 now = ktime_get_ns();

	memset(&t, 0, sizeof(t));
	mutex_lock(&d->lock);
	t.priority = d->priority;
	t.flags = d->tenant_flags;
	t.idle_ns = now > d->active_ns ? now - d->active_ns : 0;
	t.lease_id = d->lease_id;
	t.leased_tags = d->leased;
	t.host_charged_bytes = d->host_charged;
	if (d->reported)
		t.report = d->report;
	mutex_unlock(&d->lock);
	return gs_uarg_out(ua, &t, sizeof(t)) ? -EFAULT : 0;
}
