// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: the "gpusleep" generic netlink family.
 *
 * Spec: Documentation/netlink/specs/gpusleep.yaml. The uAPI header
 * (uapi/linux/gpusleep_netlink.h), the request policies and the op table
 * (gpusleep-nl-gen.[ch]) are generated from it by the kernel's ynl-gen-c
 * (`make nlgen`); this file has the handlers and the family.
 * GET (do and dump) reads domains; RELEASE and RESUME start an operation
 * without waiting for it; STATE_NTF goes to the "events" multicast group at
 * every state transition, STEP_NTF at each start and end of a step. One
 * fill function, gs_nl_fill(), writes a domain for all but STEP_NTF, from
 * a snapshot (struct gs_nl_snap) taken under domain->lock.
 *
 * Namespaces: the family is in every network namespace (netnsok); a
 * domain belongs to the one its creator was in (d->net) and is seen there
 * only, by GET, dump, RELEASE/RESUME and the events group, which needs
 * CAP_NET_ADMIN over that namespace to join (compat.h: kernels without
 * GENL_MCAST_CAP_NET_ADMIN filter the listeners instead).
 *
 * Notifications are built outside domain->lock. Under it, gs_genl_notify()
 * and gs_genl_step_notify() only copy what the message needs into an
 * entry taken from a module-wide pool (struct gs_ntf, preallocated) and
 * queue it with a reference on the domain's network namespace (not on
 * the domain, whose end and quota a queued message must not hold
 * back); gs_ntf_work, one work item,
 * builds and multicasts the queued entries in order (so one domain's
 * notifications keep their order), then refills the pool. A notification
 * that finds the pool empty is dropped, and the listeners of its
 * namespace are told as netlink tells a listener that overran its socket:
 * their next receive fails with ENOBUFS (genl_set_err()), after which
 * they dump again.
 *
 * Locking: doit and dumpit look a domain up in the id table (taking and
 * dropping gs_domains_lock), then take domain->lock for a snapshot and
 * fill the message after dropping it. gs_ntf_lock (a spinlock, a leaf
 * like gs_users_lock: nothing is taken or allocated under it) guards the
 * pool and the queue; it nests inside domain->lock.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uidgid.h>
#include <linux/pid.h>
#include <linux/workqueue.h>
#include <net/genetlink.h>
#include <net/sock.h>
#include <net/net_namespace.h>
#include <net/netlink.h>

#include <linux/gpusleep_netlink.h>

#include "compat.h"
#include "gpusleep.h"
#include "gpusleep-nl-gen.h"

/*
 * The generator writes a multicast group table only beside a family struct
 * of its own, which it does not write for a genetlink-legacy family: the
 * family and its groups are here, indexed by the generated ids.
 */
static const struct genl_multicast_group gs_nl_mcgrps[] = {
	[GPUSLEEP_NLGRP_EVENTS] = {
		.name = GPUSLEEP_MCGRP_EVENTS,
		.flags = GS_MCAST_CAP_NET_ADMIN,
	},
};

static struct genl_family gs_nl_family;

/*
 * What a message says about a domain, copied under domain->lock: a
 * notification needs nothing of the domain after (it holds no reference:
 * the domain, and what is charged for it, go with its last fd).
 */
struct gs_nl_snap {
	u32 id;
	kuid_t owner;
	char name[GPUSLEEP_NAME_LEN];
	char gpu[GPUSLEEP_GPU_LEN];
	struct gs_tagset tags;
	struct gpusleep_state st;	/* st.last: a finished op's result */
	struct gs_counters cnt;
	u32 last_reason;
	u64 last_release_ns;
	u64 last_resume_ns;
	char group[GPUSLEEP_NAME_LEN];	/* "" when in none */
};

/*
 * What GET and a dump add about the tenant (docs/arbiter.md), copied
 * under domain->lock; notifications do not carry it.
 */
struct gs_nl_tenant {
	s32 priority;
	u32 flags;
	u64 idle_ns;
	u64 lease_id;
	u32 leased;
	u64 host_bytes;
	bool reported;
	struct gpusleep_report report;
};

static void gs_nl_tenant_snap(struct gs_domain *d, struct gs_nl_tenant *t)
{
	u64 now = ktime_get_ns();

	lockdep_assert_held(&d->lock);
	t->priority = d->priority;
	t->flags = d->tenant_flags;
	t->idle_ns = now > d->active_ns ? now - d->active_ns : 0;
	t->lease_id = d->lease_id;
	t->leased = d->leased;
	t->host_bytes = d->host_charged;
	t->reported = d->reported;
	if (t->reported)
		t->report = d->report;
}

static void gs_nl_snap(struct gs_domain *d, struct gs_nl_snap *s)
{
	lockdep_assert_held(&d->lock);
	s->id = d->id;
	s->owner = d->owner;
	memcpy(s->name, d->name, sizeof(s->name));
	memcpy(s->gpu, d->gpu, sizeof(s->gpu));
	s->tags = d->tags;
	gs_fill_state(d, &s->st);
	s->cnt = d->cnt;
	s->last_reason = d->last_reason;
	s->last_release_ns = d->last_release_ns;
	s->last_resume_ns = d->last_resume_ns;
	s->group[0] = '\0';
	if (d->group)
		gs_group_name(d->group, s->group, sizeof(s->group));
}

/* What a message adds to the domain's own attributes. */
struct gs_nl_extra {
	/* GET (do, dump), RELEASE / RESUME reply: the tenant */
	const struct gs_nl_tenant *tenant;
	/* RELEASE / RESUME reply */
	const struct gpusleep_op *op;
	/* STATE_NTF */
	bool ntf;
	u32 from;
	u64 op_id;
	u64 time_ns;		/* CLOCK_REALTIME of the transition */
	bool res;		/* carries the finished op's result (st.last) */
};

static int gs_nl_put_u64(struct sk_buff *skb, int type, u64 v, int pad)
{
	return nla_put_u64_64bit(skb, type, v, pad);
}

static int gs_nl_put_counters(struct sk_buff *skb, const struct gs_counters *c)
{
	struct nlattr *nest;

	nest = nla_nest_start(skb, GPUSLEEP_A_COUNTERS);
	if (!nest)
		return -EMSGSIZE;
	if (gs_nl_put_u64(skb, GPUSLEEP_A_CNT_RELEASES, c->releases,
			  GPUSLEEP_A_CNT_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_CNT_RESUMES, c->resumes,
			  GPUSLEEP_A_CNT_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_CNT_FAILURES, c->failures,
			  GPUSLEEP_A_CNT_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_CNT_CANCELS, c->cancels,
			  GPUSLEEP_A_CNT_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_CNT_TIMEOUTS, c->timeouts,
			  GPUSLEEP_A_CNT_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_CNT_SHORTFALLS, c->shortfalls,
			  GPUSLEEP_A_CNT_PAD))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

/*
 * One GPUSLEEP_A_TAG-like nest (type) per tag of mask: its index, and for
 * the domain's own list (gen given) its name, kind and generation; bytes
 * and freed from the arrays given. ts: the domain's declaration.
 */
static int gs_nl_put_tags(struct sk_buff *skb, int type,
			  const struct gs_tagset *ts, u32 mask,
			  const u64 *bytes, const u64 *freed, const u64 *gen)
{
	struct nlattr *nest;
	u32 i;

	for (i = 0; i < ts->nr; i++) {
		if (!(mask & BIT(i)))
			continue;
		nest = nla_nest_start(skb, type);
		if (!nest)
			return -EMSGSIZE;
		if (nla_put_u32(skb, GPUSLEEP_A_TAG_INDEX, i) ||
		    (gen &&
		     (nla_put_string(skb, GPUSLEEP_A_TAG_NAME,
				     ts->tag[i].name) ||
		      nla_put_u32(skb, GPUSLEEP_A_TAG_KIND,
				  ts->tag[i].kind) ||
		      gs_nl_put_u64(skb, GPUSLEEP_A_TAG_GENERATION, gen[i],
				    GPUSLEEP_A_TAG_PAD))) ||
		    gs_nl_put_u64(skb, GPUSLEEP_A_TAG_BYTES, bytes[i],
				  GPUSLEEP_A_TAG_PAD) ||
		    gs_nl_put_u64(skb, GPUSLEEP_A_TAG_FREED, freed[i],
				  GPUSLEEP_A_TAG_PAD))
			return -EMSGSIZE;
		nla_nest_end(skb, nest);
	}
	return 0;
}

/* Per tag of the report: one more GPUSLEEP_A_TAG nest each. */
static int gs_nl_put_report_tags(struct sk_buff *skb,
				 const struct gs_tagset *ts,
				 const struct gpusleep_report *r)
{
	struct nlattr *nest;
	u32 i;

	for (i = 0; i < ts->nr; i++) {
		const struct gpusleep_report_tag *t = &r->tags[i];

		nest = nla_nest_start(skb, GPUSLEEP_A_TAG);
		if (!nest)
			return -EMSGSIZE;
		if (nla_put_u32(skb, GPUSLEEP_A_TAG_INDEX, i) ||
		    gs_nl_put_u64(skb, GPUSLEEP_A_TAG_SIZE, t->size_bytes,
				  GPUSLEEP_A_TAG_PAD) ||
		    gs_nl_put_u64(skb, GPUSLEEP_A_TAG_MAPPED, t->mapped_bytes,
				  GPUSLEEP_A_TAG_PAD) ||
		    gs_nl_put_u64(skb, GPUSLEEP_A_TAG_HOST, t->host_bytes,
				  GPUSLEEP_A_TAG_PAD) ||
		    nla_put_u32(skb, GPUSLEEP_A_TAG_POLICY, t->policy) ||
		    nla_put_u32(skb, GPUSLEEP_A_TAG_CONTENT, t->content) ||
		    nla_put_u32(skb, GPUSLEEP_A_TAG_REPORT_FLAGS, t->flags))
			return -EMSGSIZE;
		nla_nest_end(skb, nest);
	}
	return 0;
}

/*
 * The tenant: its statement and lease always; once its agent reported,
 * the GPU, what stays resident by class, and per tag what the report
 * says (a second GPUSLEEP_A_TAG nest per tag, with the same index).
 */
static int gs_nl_put_tenant(struct sk_buff *skb, const struct gs_tagset *ts,
			    const struct gs_nl_tenant *t)
{
	const struct gpusleep_report *r = &t->report;

	if (nla_put_s32(skb, GPUSLEEP_A_PRIORITY, t->priority) ||
	    nla_put_u32(skb, GPUSLEEP_A_TENANT_FLAGS, t->flags) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_IDLE_NS, t->idle_ns,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_HOST_BYTES, t->host_bytes,
			  GPUSLEEP_A_PAD) ||
	    nla_put_u32(skb, GPUSLEEP_A_LEASED_TAGS, t->leased))
		return -EMSGSIZE;
	if (t->lease_id && gs_nl_put_u64(skb, GPUSLEEP_A_LEASE_ID, t->lease_id,
					 GPUSLEEP_A_PAD))
		return -EMSGSIZE;
	if (!t->reported)
		return 0;
	if (nla_put(skb, GPUSLEEP_A_GPU_UUID, sizeof(r->gpu_uuid),
		    r->gpu_uuid) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_RESIDENT_TORCH_BYTES,
			  r->torch_reserved_bytes, GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_RESIDENT_GRAPH_BYTES,
			  r->graph_pool_bytes, GPUSLEEP_A_PAD))
		return -EMSGSIZE;
	if (r->process_source &&
	    (gs_nl_put_u64(skb, GPUSLEEP_A_RESIDENT_PROCESS_BYTES,
			   r->process_bytes, GPUSLEEP_A_PAD) ||
	     nla_put_u32(skb, GPUSLEEP_A_RESIDENT_PROCESS_SOURCE,
			 r->process_source)))
		return -EMSGSIZE;
	return gs_nl_put_report_tags(skb, ts, r);
}

static int gs_nl_put_result(struct sk_buff *skb, const struct gs_tagset *ts,
			    const struct gpusleep_result *r)
{
	struct nlattr *nest;

	nest = nla_nest_start(skb, GPUSLEEP_A_RESULT);
	if (!nest)
		return -EMSGSIZE;
	if (gs_nl_put_u64(skb, GPUSLEEP_A_RES_OP_ID, r->op_id,
			  GPUSLEEP_A_RES_PAD) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_KIND, r->kind) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_TAGS, r->tags) ||
	    nla_put_s32(skb, GPUSLEEP_A_RES_ERROR, r->error) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_REASON, r->reason) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_DONE_TAGS, r->done_tags) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_RES_DURATION_NS, r->duration_ns,
			  GPUSLEEP_A_RES_PAD) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_SHORTFALL_TAGS, r->shortfall_tags) ||
	    nla_put_u32(skb, GPUSLEEP_A_RES_LOST_TAGS, r->lost_tags) ||
	    gs_nl_put_tags(skb, GPUSLEEP_A_RES_TAG, ts, r->tags, r->bytes,
			   r->freed_bytes, NULL))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

/*
 * One message about a domain from its snapshot s, plus what x adds; no
 * lock. owner_pid: the domain's creator, for a reply (a notification
 * carries no pid: NULL). With cb (a dump), the message is checked
 * against the id table's generation.
 */
static int gs_nl_fill(struct sk_buff *skb, const struct gs_nl_snap *s,
		      struct pid *owner_pid, u32 portid, u32 seq, int flags,
		      u8 cmd, const struct gs_nl_extra *x,
		      struct netlink_callback *cb)
{
	const struct gpusleep_state *st = &s->st;
	void *hdr;

	hdr = genlmsg_put(skb, portid, seq, &gs_nl_family, flags, cmd);
	if (!hdr)
		return -EMSGSIZE;
	if (cb)
		genl_dump_check_consistent(cb, hdr);

	if (nla_put_u32(skb, GPUSLEEP_A_ID, s->id) ||
	    nla_put_string(skb, GPUSLEEP_A_NAME, s->name) ||
	    nla_put_string(skb, GPUSLEEP_A_GPU, s->gpu) ||
	    nla_put_u32(skb, GPUSLEEP_A_OWNER_UID,
			from_kuid_munged(&init_user_ns, s->owner)) ||
	    nla_put_u32(skb, GPUSLEEP_A_STATE, st->state) ||
	    nla_put_u32(skb, GPUSLEEP_A_RELEASED, st->released) ||
	    nla_put_u32(skb, GPUSLEEP_A_FLAGS, st->flags) ||
	    nla_put_u32(skb, GPUSLEEP_A_CAPS, st->caps) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_OP_IN_FLIGHT, st->op_in_flight,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_OP_ID, st->last_op_id,
			  GPUSLEEP_A_PAD) ||
	    nla_put_u32(skb, GPUSLEEP_A_LAST_REASON, s->last_reason) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_RELEASE_NS, s->last_release_ns,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_RESUME_NS, s->last_resume_ns,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_counters(skb, &s->cnt) ||
	    nla_put_u32(skb, GPUSLEEP_A_UNCONFIRMED, st->unconfirmed) ||
	    nla_put_u32(skb, GPUSLEEP_A_SHORTFALL, st->shortfall) ||
	    gs_nl_put_tags(skb, GPUSLEEP_A_TAG, &s->tags, s->tags.all,
			   st->bytes_released, st->freed_bytes, st->generation))
		goto err_cancel;

	/*
	 * The creator's pid as the requester's pid namespace numbers it (0
	 * if not there), as /proc shows it. A notification is one message
	 * for listeners in any namespace: it carries none.
	 */
	if (owner_pid &&
	    nla_put_u32(skb, GPUSLEEP_A_OWNER_PID, pid_vnr(owner_pid)))
		goto err_cancel;

	/* What stays resident: absent while not reported (its enum has no 0). */
	if (st->resident_source &&
	    (gs_nl_put_u64(skb, GPUSLEEP_A_RESIDENT_BYTES, st->resident_bytes,
			   GPUSLEEP_A_PAD) ||
	     nla_put_u32(skb, GPUSLEEP_A_RESIDENT_SOURCE, st->resident_source)))
		goto err_cancel;
	if (s->group[0] && nla_put_string(skb, GPUSLEEP_A_GROUP, s->group))
		goto err_cancel;
	if (x && x->tenant && gs_nl_put_tenant(skb, &s->tags, x->tenant))
		goto err_cancel;

	/* A started operation: a refusal is an error ack, not a reply. */
	if (x && x->op &&
	    (gs_nl_put_u64(skb, GPUSLEEP_A_OP_ID, x->op->op_id,
			   GPUSLEEP_A_PAD) ||
	     nla_put_u32(skb, GPUSLEEP_A_REASON, x->op->reason) ||
	     nla_put_s32(skb, GPUSLEEP_A_ERROR, 0) ||
	     nla_put_u32(skb, GPUSLEEP_A_BAD_TAGS, x->op->bad_tags)))
		goto err_cancel;

	if (x && x->ntf &&
	    (nla_put_u32(skb, GPUSLEEP_A_FROM_STATE, x->from) ||
	     gs_nl_put_u64(skb, GPUSLEEP_A_OP_ID, x->op_id, GPUSLEEP_A_PAD) ||
	     gs_nl_put_u64(skb, GPUSLEEP_A_TIME_NS, x->time_ns,
			   GPUSLEEP_A_PAD) ||
	     (x->res && gs_nl_put_result(skb, &s->tags, &st->last))))
		goto err_cancel;

	genlmsg_end(skb, hdr);
	return 0;

err_cancel:
	genlmsg_cancel(skb, hdr);
	return -EMSGSIZE;
}

/*
 * The live domain with the request's id in the requester's network
 * namespace, referenced; or NULL, with ENODEV's message in the extended
 * ack (ENOENT is a resume's "not released").
 */
static struct gs_domain *gs_nl_domain(struct genl_info *info)
{
	struct nlattr *a = info->attrs[GPUSLEEP_A_ID];
	struct gs_domain *d;

	d = gs_ids_get(nla_get_u32(a));
	if (d && !net_eq(d->net, genl_info_net(info))) {
		gs_domain_put(d);
		d = NULL;
	}
	if (!d)
		NL_SET_ERR_MSG_ATTR(info->extack, a,
				    "no live domain with this id in this network namespace");
	return d;
}

/* A snapshot for GET and a dump: the domain, and the tenant. */
struct gs_nl_get {
	struct gs_nl_snap snap;
	struct gs_nl_tenant tenant;
};

static void gs_nl_get_snap(struct gs_domain *d, struct gs_nl_get *g)
{
	mutex_lock(&d->lock);
	gs_nl_snap(d, &g->snap);
	gs_nl_tenant_snap(d, &g->tenant);
	mutex_unlock(&d->lock);
}

int gpusleep_nl_get_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct gs_nl_extra x = {};
	struct gs_nl_get *snap;
	struct gs_domain *d;
	struct sk_buff *msg;
	int ret = -ENOMEM;

	if (GENL_REQ_ATTR_CHECK(info, GPUSLEEP_A_ID))
		return -EINVAL;
	d = gs_nl_domain(info);
	if (!d)
		return -ENODEV;
	snap = kmalloc(sizeof(*snap), GFP_KERNEL);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!snap || !msg)
		goto err;
	gs_nl_get_snap(d, snap);
	x.tenant = &snap->tenant;
	ret = gs_nl_fill(msg, &snap->snap, d->owner_pid, info->snd_portid,
			 info->snd_seq, 0, GPUSLEEP_CMD_GET, &x, NULL);
	if (ret)
		goto err;
	kfree(snap);
	gs_domain_put(d);
	return genlmsg_reply(msg, info);

err:
	nlmsg_free(msg);
	kfree(snap);
	gs_domain_put(d);
	return ret;
}

/*
 * cb->args[0]: the next domain id to visit. Only the domains of the
 * requester's network namespace.
 */
int gpusleep_nl_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb)
{
	const struct net *net = sock_net(cb->skb->sk);
	u32 id = cb->args[0];
	struct gs_nl_extra x = {};
	struct gs_nl_get *snap;
	struct gs_domain *d;
	int ret = 0;

	snap = kmalloc(sizeof(*snap), GFP_KERNEL);
	if (!snap)
		return -ENOMEM;
	while ((d = gs_ids_next(&id))) {
		/*
		 * Sampled before each domain: a create or destroy since the
		 * previous one, in this pass or an earlier one, flags it.
		 */
		cb->seq = gs_ids_generation();
		if (net_eq(d->net, net)) {
			gs_nl_get_snap(d, snap);
			x.tenant = &snap->tenant;
			ret = gs_nl_fill(skb, &snap->snap, d->owner_pid,
					 NETLINK_CB(cb->skb).portid,
					 cb->nlh->nlmsg_seq, NLM_F_MULTI,
					 GPUSLEEP_CMD_GET, &x, cb);
		}
		gs_domain_put(d);
		if (ret)
			break;
		id++;
	}
	kfree(snap);
	cb->args[0] = id;
	if (ret && !skb->len)
		return ret;
	return skb->len;
}

/*
 * As for an attach by id (gs_may_control(): the owner's euid, in the
 * creator's user and pid namespaces) or CAP_SYS_ADMIN, judged, as
 * netlink_capable() judges a capability, by both the sender (doit runs in
 * the sending task: current) and whoever opened the socket. A socket
 * opened by root and used after a setuid() grants its user nothing, and
 * a privileged process that merely writes into someone else's socket
 * grants nothing either.
 */
static bool gs_nl_may_control(struct sk_buff *skb, const struct gs_domain *d)
{
	const struct socket *sock = NETLINK_CB(skb).sk->sk_socket;

	if (sock && sock->file && gs_may_control(d, sock->file->f_cred) &&
	    gs_may_control(d, current_cred()))
		return true;
	return netlink_capable(skb, CAP_SYS_ADMIN);
}

/*
 * A refused RELEASE/RESUME: its errno, with the reason in words in the
 * extended ack (NL_SET_ERR_MSG keeps a literal: one per reason).
 */
static void gs_nl_refused(struct genl_info *info, u32 reason, u32 bad_tags)
{
	struct netlink_ext_ack *ext = info->extack;

	switch (reason) {
	case GPUSLEEP_R_NOT_ENABLED:
		NL_SET_ERR_MSG(ext, "refused (not_enabled): no agent is attached to the domain");
		break;
	case GPUSLEEP_R_INVALID:
		if (bad_tags)
			NL_SET_ERR_MSG_ATTR(ext, info->attrs[GPUSLEEP_A_TAGS],
					    "refused (invalid): a tag the domain did not declare");
		else
			NL_SET_ERR_MSG(ext, "refused (invalid): unknown flags");
		break;
	case GPUSLEEP_R_KV_NOT_ALLOWED:
		NL_SET_ERR_MSG(ext, "refused (kv_not_allowed): prefix caching on, no reset");
		break;
	case GPUSLEEP_R_ALREADY_RELEASED:
		NL_SET_ERR_MSG(ext, "refused (already_released): a tag is released already");
		break;
	case GPUSLEEP_R_BUSY:
		NL_SET_ERR_MSG(ext, "refused (busy): an operation is in flight");
		break;
	case GPUSLEEP_R_NOT_RELEASED:
		NL_SET_ERR_MSG(ext, "refused (not_released): a tag asked for is not released");
		break;
	default:
		NL_SET_ERR_MSG(ext, "refused");
		break;
	}
}

/*
 * RELEASE / RESUME: start the operation, reply with its id. The policy
 * lets through any flag of the spec's op-flags set; one that the
 * operation does not take (abort-inflight on a resume) is EINVAL before
 * the domain is looked up. A refusal of the state machine changes
 * nothing and is an error ack (gs_nl_refused()).
 */
static int gs_nl_op(struct sk_buff *skb, struct genl_info *info, u32 kind)
{
	struct gpusleep_op req = {};
	struct gs_nl_extra x = {};
	struct gs_nl_snap *snap = NULL;
	struct sk_buff *msg = NULL;
	struct gs_domain *d;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, GPUSLEEP_A_ID))
		return -EINVAL;
	if (info->attrs[GPUSLEEP_A_TAGS])
		req.tags = nla_get_u32(info->attrs[GPUSLEEP_A_TAGS]);
	if (info->attrs[GPUSLEEP_A_OP_FLAGS])
		req.flags = nla_get_u32(info->attrs[GPUSLEEP_A_OP_FLAGS]);
	if (info->attrs[GPUSLEEP_A_TIMEOUT_MS])
		req.timeout_ms = nla_get_u32(info->attrs[GPUSLEEP_A_TIMEOUT_MS]);
	/* Nobody waits in the kernel for netlink: the reply has the op id. */
	req.flags |= GPUSLEEP_OPF_NONBLOCK;
	ret = gs_op_req_valid(kind, &req);
	if (ret) {
		NL_SET_ERR_MSG_ATTR(info->extack,
				    info->attrs[GPUSLEEP_A_OP_FLAGS],
				    "refused (invalid): a flag this operation does not take");
		return ret;
	}

	d = gs_nl_domain(info);
	if (!d)
		return -ENODEV;
	if (!gs_nl_may_control(skb, d)) {
		NL_SET_ERR_MSG(info->extack,
			       "not the domain's owner and no CAP_SYS_ADMIN");
		ret = -EPERM;
		goto out;
	}
	ret = -ENOMEM;
	snap = kmalloc(sizeof(*snap), GFP_KERNEL);
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!snap || !msg)
		goto out;

	mutex_lock(&d->lock);
	if (d->dead) {
		ret = -ENODEV;
	} else {
		ret = kind == GPUSLEEP_OP_RELEASE ? gs_op_release(d, &req) :
						    gs_op_resume(d, &req);
		if (!ret)
			gs_nl_snap(d, snap);
	}
	mutex_unlock(&d->lock);
	if (ret == -ENODEV) {
		NL_SET_ERR_MSG_ATTR(info->extack, info->attrs[GPUSLEEP_A_ID],
				    "the domain is dead");
		goto out;
	}
	if (ret) {
		gs_nl_refused(info, req.reason, req.bad_tags);
		goto out;
	}
	x.op = &req;
	ret = gs_nl_fill(msg, snap, d->owner_pid, info->snd_portid,
			 info->snd_seq, 0, info->genlhdr->cmd, &x, NULL);
	if (ret)
		goto out;
	kfree(snap);
	gs_domain_put(d);
	return genlmsg_reply(msg, info);

out:
	nlmsg_free(msg);
	kfree(snap);
	gs_domain_put(d);
	return ret;
}

int gpusleep_nl_release_doit(struct sk_buff *skb, struct genl_info *info)
{
	return gs_nl_op(skb, info, GPUSLEEP_OP_RELEASE);
}

int gpusleep_nl_resume_doit(struct sk_buff *skb, struct genl_info *info)
{
	return gs_nl_op(skb, info, GPUSLEEP_OP_RESUME);
}

static struct genl_family gs_nl_family __ro_after_init = {
	.name		= GPUSLEEP_GENL_NAME,
	.version	= GPUSLEEP_GENL_VERSION,
	.maxattr	= GPUSLEEP_A_MAX,
	/* In every network namespace: each domain is seen in its own. */
	.netnsok	= true,
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.split_ops	= gpusleep_nl_ops,
	.n_split_ops	= ARRAY_SIZE(gpusleep_nl_ops),
	/* .resv_start_op stays 0 (6.1+): every command is validated strictly */
	.mcgrps		= gs_nl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(gs_nl_mcgrps),
};

/* ------------------------------------------------------------------ */
/* Notifications, built outside domain->lock                           */

/*
 * A notification queued for gs_ntf_work: all its message says, and the
 * domain's network namespace (referenced while queued; NULL in the pool).
 */
struct gs_ntf {
	struct list_head node;
	struct net *net;
	u8 cmd;			/* GPUSLEEP_CMD_STATE_NTF or _STEP_NTF */
	u64 time_ns;		/* CLOCK_REALTIME, under domain->lock */
	union {
		struct {
			struct gs_nl_snap snap;
			struct gs_nl_extra x;
		} state;
		struct {
			struct gs_step_ntf s;
			u32 id;
			char name[GPUSLEEP_NAME_LEN];
			char group[GPUSLEEP_NAME_LEN];
		} step;
		struct {
			struct gs_arb_ntf n;	/* its victim: v, or none */
			bool has_victim;
			struct gpusleep_reclaim_victim v;
		} arb;
	};
};

/*
 * The pool: GS_NTF_MIN entries from module init on, refilled up to
 * GS_NTF_POOL by the work once notifications flow (someone listens).
 * An entry is a kmalloc of under 1 KiB: at most 64 KiB for the module,
 * however many domains.
 */
#define GS_NTF_MIN	16
#define GS_NTF_POOL	64

static DEFINE_SPINLOCK(gs_ntf_lock);
static LIST_HEAD(gs_ntf_free);		/* the pool */
static unsigned int gs_ntf_nr_free;
static LIST_HEAD(gs_ntf_queue);		/* to send, in order */
static void gs_ntf_workfn(struct work_struct *work);
static DECLARE_WORK(gs_ntf_work, gs_ntf_workfn);

/* Allocate entries (no lock held) until the pool has n; 0 or -ENOMEM. */
static int gs_ntf_fill(unsigned int n)
{
	struct gs_ntf *e;

	while (READ_ONCE(gs_ntf_nr_free) < n) {
		/*
		 * Not gs_kzalloc(): the work refills at any time, and must
		 * not take a fault the tests aim at an ioctl's allocation.
		 */
		e = kzalloc(sizeof(*e), GFP_KERNEL);
		if (!e)
			return -ENOMEM;
		spin_lock(&gs_ntf_lock);
		list_add(&e->node, &gs_ntf_free);
		gs_ntf_nr_free++;
		spin_unlock(&gs_ntf_lock);
	}
	return 0;
}

static void gs_ntf_drain_pool(void)
{
	struct gs_ntf *e, *tmp;

	list_for_each_entry_safe(e, tmp, &gs_ntf_free, node) {
		list_del(&e->node);
		kfree(e);
	}
	gs_ntf_nr_free = 0;
}

/*
 * An entry from the pool for a notification in net (about a domain:
 * under its lock; about a reclaim or a lease: in its job), with a
 * reference on net; NULL when the pool is empty:
 * the notification is dropped, and the listeners in that namespace get
 * ENOBUFS at their next receive, as for an overrun socket
 * (netlink_set_err(): it sets their sockets' error and wakes them, no
 * allocation), so that they dump again.
 */
static struct gs_ntf *gs_ntf_get(struct net *net, u8 cmd)
{
	struct gs_ntf *e = NULL;

	spin_lock(&gs_ntf_lock);
	if (!list_empty(&gs_ntf_free)) {
		e = list_first_entry(&gs_ntf_free, struct gs_ntf, node);
		list_del(&e->node);
		gs_ntf_nr_free--;
	}
	spin_unlock(&gs_ntf_lock);
	if (!e) {
		genl_set_err(&gs_nl_family, net, 0, GPUSLEEP_NLGRP_EVENTS,
			     -ENOBUFS);
		queue_work(system_wq, &gs_ntf_work);	/* the refill */
		return NULL;
	}
	e->net = get_net(net);
	e->cmd = cmd;
	e->time_ns = ktime_get_real_ns();
	return e;
}

/* Queue a filled entry; the work sends it (domain->lock held). */
static void gs_ntf_queue_one(struct gs_ntf *e)
{
	spin_lock(&gs_ntf_lock);
	list_add_tail(&e->node, &gs_ntf_queue);
	spin_unlock(&gs_ntf_lock);
	queue_work(system_wq, &gs_ntf_work);
}

/* Back to the pool (no lock held). */
static void gs_ntf_put(struct gs_ntf *e)
{
	spin_lock(&gs_ntf_lock);
	list_add(&e->node, &gs_ntf_free);
	gs_ntf_nr_free++;
	spin_unlock(&gs_ntf_lock);
}

/* What a STEP_NTF can take: seven u32, two u64, two names. */
#define GS_NL_STEP_SIZE	(7 * nla_total_size(sizeof(u32)) +		\
			 2 * nla_total_size_64bit(sizeof(u64)) +	\
			 2 * nla_total_size(GPUSLEEP_NAME_LEN))

static struct sk_buff *gs_ntf_build_step(const struct gs_ntf *e)
{
	const struct gs_step_ntf *s = &e->step.s;
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(GS_NL_STEP_SIZE, GFP_KERNEL);
	if (!msg)
		return NULL;
	hdr = genlmsg_put(msg, 0, 0, &gs_nl_family, 0, GPUSLEEP_CMD_STEP_NTF);
	if (!hdr)
		goto err_free;
	if (nla_put_u32(msg, GPUSLEEP_A_ID, e->step.id) ||
	    nla_put_string(msg, GPUSLEEP_A_NAME, e->step.name) ||
	    (e->step.group[0] &&
	     nla_put_string(msg, GPUSLEEP_A_GROUP, e->step.group)) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_OP_ID, s->op_id, GPUSLEEP_A_PAD) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP, s->step) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_TYPE, s->type) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_PHASE, s->phase) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_TAGS, s->tags) ||
	    (s->phase == GPUSLEEP_STEP_END &&
	     (nla_put_s32(msg, GPUSLEEP_A_ERROR, s->err) ||
	      nla_put_u32(msg, GPUSLEEP_A_REASON, s->reason))) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_TIME_NS, e->time_ns, GPUSLEEP_A_PAD))
		goto err_free;
	genlmsg_end(msg, hdr);
	return msg;

err_free:
	nlmsg_free(msg);
	return NULL;
}

static int gs_nl_put_victim(struct sk_buff *skb,
			    const struct gpusleep_reclaim_victim *v)
{
	struct nlattr *nest = nla_nest_start(skb, GPUSLEEP_A_VICTIM);

	if (!nest)
		return -EMSGSIZE;
	if (nla_put_u32(skb, GPUSLEEP_A_VICTIM_DOMAIN, v->domain) ||
	    nla_put_u32(skb, GPUSLEEP_A_VICTIM_TAGS, v->tags) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_VICTIM_OP_ID, v->op_id,
			  GPUSLEEP_A_VICTIM_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_VICTIM_FREED, v->freed_bytes,
			  GPUSLEEP_A_VICTIM_PAD) ||
	    nla_put_s32(skb, GPUSLEEP_A_VICTIM_ERROR, v->error) ||
	    nla_put_u32(skb, GPUSLEEP_A_VICTIM_REASON, v->reason) ||
	    nla_put_u32(skb, GPUSLEEP_A_VICTIM_FLAGS, v->flags) ||
	    nla_put_u32(skb, GPUSLEEP_A_VICTIM_GROUP, v->group) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_VICTIM_RESUME_OP_ID, v->resume_op_id,
			  GPUSLEEP_A_VICTIM_PAD) ||
	    nla_put_s32(skb, GPUSLEEP_A_VICTIM_RESUME_ERROR, v->resume_error) ||
	    nla_put_u32(skb, GPUSLEEP_A_VICTIM_RESUME_REASON, v->resume_reason))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

/* RECLAIM_NTF or LEASE_NTF: what e says of its reclaim or lease. */
static struct sk_buff *gs_ntf_build_arb(const struct gs_ntf *e)
{
	const struct gs_arb_ntf *n = &e->arb.n;
	bool reclaim = e->cmd == GPUSLEEP_CMD_RECLAIM_NTF;
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return NULL;
	hdr = genlmsg_put(msg, 0, 0, &gs_nl_family, 0, e->cmd);
	if (!hdr)
		goto err_free;
	if (gs_nl_put_u64(msg, GPUSLEEP_A_RECLAIM_ID, n->reclaim_id,
			  GPUSLEEP_A_PAD) ||
	    nla_put_u32(msg, GPUSLEEP_A_ARB_PHASE, n->phase) ||
	    nla_put(msg, GPUSLEEP_A_GPU_UUID, sizeof(n->uuid), n->uuid) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_TAKEN_BYTES, n->taken,
			  GPUSLEEP_A_PAD) ||
	    (n->lease_id &&
	     gs_nl_put_u64(msg, GPUSLEEP_A_LEASE_ID, n->lease_id,
			   GPUSLEEP_A_PAD)) ||
	    (reclaim &&
	     (gs_nl_put_u64(msg, GPUSLEEP_A_BYTES, n->bytes, GPUSLEEP_A_PAD) ||
	      nla_put_s32(msg, GPUSLEEP_A_PRIORITY, n->priority) ||
	      (n->phase == GPUSLEEP_ARB_END &&
	       (nla_put_u32(msg, GPUSLEEP_A_REASON, n->reason) ||
		nla_put_u32(msg, GPUSLEEP_A_WHY, n->why))))) ||
	    (!reclaim && n->phase == GPUSLEEP_ARB_RETURNED &&
	     nla_put_u32(msg, GPUSLEEP_A_STILL_RELEASED, n->still_released)) ||
	    (e->arb.has_victim && gs_nl_put_victim(msg, &e->arb.v)) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_TIME_NS, e->time_ns, GPUSLEEP_A_PAD))
		goto err_free;
	genlmsg_end(msg, hdr);
	return msg;

err_free:
	nlmsg_free(msg);
	return NULL;
}

/* Build e's message and multicast it in its domain's namespace. */
static void gs_ntf_send(struct gs_ntf *e)
{
	struct sk_buff *msg;

	if (e->cmd == GPUSLEEP_CMD_STEP_NTF) {
		msg = gs_ntf_build_step(e);
	} else if (e->cmd == GPUSLEEP_CMD_RECLAIM_NTF ||
		   e->cmd == GPUSLEEP_CMD_LEASE_NTF) {
		msg = gs_ntf_build_arb(e);
	} else {
		msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
		if (msg && gs_nl_fill(msg, &e->state.snap, NULL, 0, 0, 0,
				      GPUSLEEP_CMD_STATE_NTF, &e->state.x,
				      NULL)) {
			nlmsg_free(msg);
			msg = NULL;
		}
	}
	if (msg)
		gs_genl_multicast_admin(&gs_nl_family, e->net, msg,
					GPUSLEEP_NLGRP_EVENTS);
}

/* Move the queue, in order, to the end of batch. */
static void gs_ntf_take_queue(struct list_head *batch)
{
	spin_lock(&gs_ntf_lock);
	list_splice_tail_init(&gs_ntf_queue, batch);
	spin_unlock(&gs_ntf_lock);
}

/* Send batch's entries in order; each goes back to the pool. */
static void gs_ntf_send_batch(struct list_head *batch)
{
	struct gs_ntf *e, *tmp;

	list_for_each_entry_safe(e, tmp, batch, node) {
		list_del(&e->node);
		gs_ntf_send(e);
		put_net(e->net);
		e->net = NULL;
		gs_ntf_put(e);
	}
}

/*
 * Send what is queued, in order, then refill the pool. One work item:
 * never two runs at once, so order holds.
 */
static void gs_ntf_workfn(struct work_struct *work)
{
	LIST_HEAD(batch);

	gs_ntf_take_queue(&batch);
	gs_ntf_send_batch(&batch);
	gs_ntf_fill(GS_NTF_POOL);
}

int gs_genl_init(void)
{
	int ret;

	ret = gs_ntf_fill(GS_NTF_MIN);
	if (ret)
		goto err_pool;
	gs_genl_split_ops_compat(&gs_nl_family, gpusleep_nl_ops);
	ret = genl_register_family(&gs_nl_family);
	if (ret)
		goto err_pool;
	return 0;

err_pool:
	gs_ntf_drain_pool();
	return ret;
}

/* What is queued is sent before the family goes. */
void gs_genl_exit(void)
{
	flush_work(&gs_ntf_work);
	genl_unregister_family(&gs_nl_family);
	gs_ntf_drain_pool();
}

static bool gs_genl_listened(const struct gs_domain *d)
{
	return genl_has_listeners(&gs_nl_family, d->net, GPUSLEEP_NLGRP_EVENTS);
}

/*
 * Under domain->lock: announce d's transition from -> to. Nothing is
 * taken while no one listens in d's namespace.
 */
void gs_genl_notify(struct gs_domain *d, u32 from, u32 to, u64 op_id,
		    const struct gpusleep_result *res)
{
	struct gs_ntf *e;

	lockdep_assert_held(&d->lock);
	if (!gs_genl_listened(d))
		return;
	e = gs_ntf_get(d->net, GPUSLEEP_CMD_STATE_NTF);
	if (!e)
		return;
	gs_nl_snap(d, &e->state.snap);
	e->state.snap.st.state = to;
	if (res)
		e->state.snap.st.last = *res;
	e->state.x = (struct gs_nl_extra){
		.ntf = true,
		.from = from,
		.op_id = op_id,
		.time_ns = e->time_ns,
		.res = !!res,
	};
	gs_ntf_queue_one(e);
}

/* Under domain->lock: announce a boundary of one of d's steps. */
void gs_genl_step_notify(struct gs_domain *d, const struct gs_step_ntf *s)
{
	struct gs_ntf *e;

	lockdep_assert_held(&d->lock);
	if (!gs_genl_listened(d))
		return;
	e = gs_ntf_get(d->net, GPUSLEEP_CMD_STEP_NTF);
	if (!e)
		return;
	e->step.s = *s;
	e->step.id = d->id;
	memcpy(e->step.name, d->name, sizeof(e->step.name));
	e->step.group[0] = '\0';
	if (d->group)
		gs_group_name(d->group, e->step.group, sizeof(e->step.group));
	gs_ntf_queue_one(e);
}

/*
 * A reclaim's or a lease's step, in net (the claimant's), from its job
 * (reclaim.c; no domain's lock). Nothing is taken while no one listens.
 */
void gs_genl_arb_notify(struct net *net, const struct gs_arb_ntf *n)
{
	struct gs_ntf *e;

	if (!genl_has_listeners(&gs_nl_family, net, GPUSLEEP_NLGRP_EVENTS))
		return;
	e = gs_ntf_get(net, n->cmd);
	if (!e)
		return;
	e->arb.n = *n;
	e->arb.n.victim = NULL;
	e->arb.has_victim = n->victim;
	if (n->victim)
		e->arb.v = *n->victim;
	gs_ntf_queue_one(e);
}
