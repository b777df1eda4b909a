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
 * fill function, gs_nl_fill(), writes a domain for all but STEP_NTF,
 * always under domain->lock.
 *
 * Locking: doit and dumpit look a domain up in the id table (taking and
 * dropping gs_domains_lock), then take domain->lock to fill; the two are
 * never held together here. gs_genl_notify() and gs_genl_step_notify()
 * are called with domain->lock held and only allocate (GFP_KERNEL) and
 * multicast.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/lockdep.h>
#include <linux/uidgid.h>
#include <linux/pid.h>
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
	[GPUSLEEP_NLGRP_EVENTS] = { .name = GPUSLEEP_MCGRP_EVENTS, },
};

static struct genl_family gs_nl_family;

/* What a message adds to the domain's own attributes. */
struct gs_nl_extra {
	/* RELEASE / RESUME reply */
	const struct gpusleep_op *op;
	int err;
	/* STATE_NTF */
	bool ntf;
	u32 from;
	u32 to;
	u64 op_id;
	u64 time_ns;		/* CLOCK_REALTIME of the transition */
	const struct gpusleep_result *res;
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
 * the domain's own list (d) its name, kind and generation; bytes and freed
 * from the arrays given.
 */
static int gs_nl_put_tags(struct sk_buff *skb, int type,
			  const struct gs_domain *d, u32 mask,
			  const u64 *bytes, const u64 *freed, const u64 *gen)
{
	struct nlattr *nest;
	u32 i;

	for (i = 0; i < d->tags.nr; i++) {
		if (!(mask & BIT(i)))
			continue;
		nest = nla_nest_start(skb, type);
		if (!nest)
			return -EMSGSIZE;
		if (nla_put_u32(skb, GPUSLEEP_A_TAG_INDEX, i) ||
		    (gen &&
		     (nla_put_string(skb, GPUSLEEP_A_TAG_NAME,
				     d->tags.tag[i].name) ||
		      nla_put_u32(skb, GPUSLEEP_A_TAG_KIND,
				  d->tags.tag[i].kind) ||
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

static int gs_nl_put_result(struct sk_buff *skb, const struct gs_domain *d,
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
	    gs_nl_put_tags(skb, GPUSLEEP_A_RES_TAG, d, r->tags, r->bytes,
			   r->freed_bytes, NULL))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

/*
 * One message about d: its attributes, plus what x adds. With cb (a dump),
 * the message is checked against the id table's generation.
 */
static int gs_nl_fill(struct sk_buff *skb, struct gs_domain *d, u32 portid,
		      u32 seq, int flags, u8 cmd, const struct gs_nl_extra *x,
		      struct netlink_callback *cb)
{
	struct gpusleep_state st;
	void *hdr;

	lockdep_assert_held(&d->lock);
	gs_fill_state(d, &st);
	if (x && x->ntf)
		st.state = x->to;

	hdr = genlmsg_put(skb, portid, seq, &gs_nl_family, flags, cmd);
	if (!hdr)
		return -EMSGSIZE;
	if (cb)
		genl_dump_check_consistent(cb, hdr);

	if (nla_put_u32(skb, GPUSLEEP_A_ID, d->id) ||
	    nla_put_string(skb, GPUSLEEP_A_NAME, d->name) ||
	    nla_put_string(skb, GPUSLEEP_A_GPU, d->gpu) ||
	    nla_put_u32(skb, GPUSLEEP_A_OWNER_UID,
			from_kuid_munged(&init_user_ns, d->owner)) ||
	    nla_put_u32(skb, GPUSLEEP_A_STATE, st.state) ||
	    nla_put_u32(skb, GPUSLEEP_A_RELEASED, st.released) ||
	    nla_put_u32(skb, GPUSLEEP_A_FLAGS, st.flags) ||
	    nla_put_u32(skb, GPUSLEEP_A_CAPS, st.caps) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_OP_IN_FLIGHT, st.op_in_flight,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_OP_ID, st.last_op_id,
			  GPUSLEEP_A_PAD) ||
	    nla_put_u32(skb, GPUSLEEP_A_LAST_REASON, d->last_reason) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_RELEASE_NS, d->last_release_ns,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_u64(skb, GPUSLEEP_A_LAST_RESUME_NS, d->last_resume_ns,
			  GPUSLEEP_A_PAD) ||
	    gs_nl_put_counters(skb, &d->cnt) ||
	    nla_put_u32(skb, GPUSLEEP_A_UNCONFIRMED, st.unconfirmed) ||
	    nla_put_u32(skb, GPUSLEEP_A_SHORTFALL, st.shortfall) ||
	    gs_nl_put_tags(skb, GPUSLEEP_A_TAG, d, d->tags.all,
			   st.bytes_released, st.freed_bytes, st.generation))
		goto err_cancel;

	/*
	 * The creator's pid as the requester's pid namespace numbers it (0
	 * if not there), as /proc shows it. A notification is one message
	 * for listeners in any namespace: it carries none.
	 */
	if (!(x && x->ntf) &&
	    nla_put_u32(skb, GPUSLEEP_A_OWNER_PID, pid_vnr(d->owner_pid)))
		goto err_cancel;

	/* What stays resident: absent while not reported (its enum has no 0). */
	if (st.resident_source &&
	    (gs_nl_put_u64(skb, GPUSLEEP_A_RESIDENT_BYTES, st.resident_bytes,
			   GPUSLEEP_A_PAD) ||
	     nla_put_u32(skb, GPUSLEEP_A_RESIDENT_SOURCE, st.resident_source)))
		goto err_cancel;
	if (d->group) {
		char group[GPUSLEEP_NAME_LEN];

		gs_group_name(d->group, group, sizeof(group));
		if (nla_put_string(skb, GPUSLEEP_A_GROUP, group))
			goto err_cancel;
	}

	if (x && x->op &&
	    (gs_nl_put_u64(skb, GPUSLEEP_A_OP_ID, x->op->op_id,
			   GPUSLEEP_A_PAD) ||
	     nla_put_u32(skb, GPUSLEEP_A_REASON, x->op->reason) ||
	     nla_put_s32(skb, GPUSLEEP_A_ERROR, x->err) ||
	     nla_put_u32(skb, GPUSLEEP_A_BAD_TAGS, x->op->bad_tags)))
		goto err_cancel;

	if (x && x->ntf &&
	    (nla_put_u32(skb, GPUSLEEP_A_FROM_STATE, x->from) ||
	     gs_nl_put_u64(skb, GPUSLEEP_A_OP_ID, x->op_id, GPUSLEEP_A_PAD) ||
	     gs_nl_put_u64(skb, GPUSLEEP_A_TIME_NS, x->time_ns,
			   GPUSLEEP_A_PAD) ||
	     (x->res && gs_nl_put_result(skb, d, x->res))))
		goto err_cancel;

	genlmsg_end(skb, hdr);
	return 0;

err_cancel:
	genlmsg_cancel(skb, hdr);
	return -EMSGSIZE;
}

static struct gs_domain *gs_nl_domain(struct genl_info *info)
{
	struct nlattr *a = info->attrs[GPUSLEEP_A_ID];
	struct gs_domain *d;

	d = gs_ids_get(nla_get_u32(a));
	if (!d)
		NL_SET_ERR_MSG_ATTR(info->extack, a, "no such domain");
	return d;
}

int gpusleep_nl_get_doit(struct sk_buff *skb, struct genl_info *info)
{
	struct gs_domain *d;
	struct sk_buff *msg;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, GPUSLEEP_A_ID))
		return -EINVAL;
	d = gs_nl_domain(info);
	if (!d)
		return -ENOENT;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg) {
		ret = -ENOMEM;
		goto err_put;
	}
	mutex_lock(&d->lock);
	ret = gs_nl_fill(msg, d, info->snd_portid, info->snd_seq, 0,
			 GPUSLEEP_CMD_GET, NULL, NULL);
	mutex_unlock(&d->lock);
	if (ret)
		goto err_free;
	gs_domain_put(d);
	return genlmsg_reply(msg, info);

err_free:
	nlmsg_free(msg);
err_put:
	gs_domain_put(d);
	return ret;
}

/* cb->args[0]: the next domain id to visit. */
int gpusleep_nl_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb)
{
	u32 id = cb->args[0];
	struct gs_domain *d;
	int ret = 0;

	while ((d = gs_ids_next(&id))) {
		/*
		 * Sampled before each domain: a create or destroy since the
		 * previous one, in this pass or an earlier one, flags it.
		 */
		cb->seq = gs_ids_generation();
		mutex_lock(&d->lock);
		ret = gs_nl_fill(skb, d, NETLINK_CB(cb->skb).portid,
				 cb->nlh->nlmsg_seq, NLM_F_MULTI,
				 GPUSLEEP_CMD_GET, NULL, cb);
		mutex_unlock(&d->lock);
		gs_domain_put(d);
		if (ret)
			break;
		id++;
	}
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
 * RELEASE / RESUME: start the operation, reply with how it went. The
 * policy lets through any flag of the spec's op-flags set; one that the
 * operation does not take (abort-inflight on a resume) and a tag the domain
 * did not declare are the state machine's to refuse, as a reply with reason
 * invalid.
 */
static int gs_nl_op(struct sk_buff *skb, struct genl_info *info, u32 kind)
{
	struct gpusleep_op req = {};
	struct gs_nl_extra x = {};
	struct gs_domain *d;
	struct sk_buff *msg;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, GPUSLEEP_A_ID))
		return -EINVAL;
	d = gs_nl_domain(info);
	if (!d)
		return -ENOENT;
	if (!gs_nl_may_control(skb, d)) {
		NL_SET_ERR_MSG(info->extack,
			       "not the domain's owner and no CAP_SYS_ADMIN");
		ret = -EPERM;
		goto err_put;
	}
	if (info->attrs[GPUSLEEP_A_TAGS])
		req.tags = nla_get_u32(info->attrs[GPUSLEEP_A_TAGS]);
	if (info->attrs[GPUSLEEP_A_OP_FLAGS])
		req.flags = nla_get_u32(info->attrs[GPUSLEEP_A_OP_FLAGS]);
	if (info->attrs[GPUSLEEP_A_TIMEOUT_MS])
		req.timeout_ms = nla_get_u32(info->attrs[GPUSLEEP_A_TIMEOUT_MS]);
	/* Nobody waits in the kernel for netlink: the reply has the op id. */
	req.flags |= GPUSLEEP_OPF_NONBLOCK;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg) {
		ret = -ENOMEM;
		goto err_put;
	}
	mutex_lock(&d->lock);
	if (d->dead) {
		ret = -ENODEV;
	} else {
		x.op = &req;
		x.err = kind == GPUSLEEP_OP_RELEASE ? gs_op_release(d, &req) :
						      gs_op_resume(d, &req);
		ret = gs_nl_fill(msg, d, info->snd_portid, info->snd_seq, 0,
				 info->genlhdr->cmd, &x, NULL);
	}
	mutex_unlock(&d->lock);
	if (ret)
		goto err_free;
	gs_domain_put(d);
	return genlmsg_reply(msg, info);

err_free:
	nlmsg_free(msg);
err_put:
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
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.split_ops	= gpusleep_nl_ops,
	.n_split_ops	= ARRAY_SIZE(gpusleep_nl_ops),
	/* .resv_start_op stays 0 (6.1+): every command is validated strictly */
	.mcgrps		= gs_nl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(gs_nl_mcgrps),
};

int gs_genl_init(void)
{
	gs_genl_split_ops_compat(&gs_nl_family, gpusleep_nl_ops);
	return genl_register_family(&gs_nl_family);
}

void gs_genl_exit(void)
{
	genl_unregister_family(&gs_nl_family);
}

/* Under domain->lock: announce d's transition from -> to. */
void gs_genl_notify(struct gs_domain *d, u32 from, u32 to, u64 op_id,
		    const struct gpusleep_result *res)
{
	struct gs_nl_extra x = {
		.ntf = true,
		.from = from,
		.to = to,
		.op_id = op_id,
		.time_ns = ktime_get_real_ns(),
		.res = res,
	};
	struct sk_buff *msg;

	lockdep_assert_held(&d->lock);
	if (!genl_has_listeners(&gs_nl_family, &init_net, GPUSLEEP_NLGRP_EVENTS))
		return;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	if (gs_nl_fill(msg, d, 0, 0, 0, GPUSLEEP_CMD_STATE_NTF, &x, NULL)) {
		nlmsg_free(msg);
		return;
	}
	genlmsg_multicast(&gs_nl_family, msg, 0, GPUSLEEP_NLGRP_EVENTS,
			  GFP_KERNEL);
}

/* What a STEP_NTF can take: seven u32, two u64, two names. */
#define GS_NL_STEP_SIZE	(7 * nla_total_size(sizeof(u32)) +		\
			 2 * nla_total_size_64bit(sizeof(u64)) +	\
			 2 * nla_total_size(GPUSLEEP_NAME_LEN))

/*
 * Under domain->lock: announce a boundary of one of d's steps. Nothing is
 * made or taken while no one listens, so the ioctl path pays one check.
 */
void gs_genl_step_notify(struct gs_domain *d, const struct gs_step_ntf *s)
{
	char group[GPUSLEEP_NAME_LEN];
	struct sk_buff *msg;
	void *hdr;

	lockdep_assert_held(&d->lock);
	if (!genl_has_listeners(&gs_nl_family, &init_net, GPUSLEEP_NLGRP_EVENTS))
		return;
	msg = genlmsg_new(GS_NL_STEP_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &gs_nl_family, 0, GPUSLEEP_CMD_STEP_NTF);
	if (!hdr)
		goto err_free;
	if (d->group)
		gs_group_name(d->group, group, sizeof(group));
	if (nla_put_u32(msg, GPUSLEEP_A_ID, d->id) ||
	    nla_put_string(msg, GPUSLEEP_A_NAME, d->name) ||
	    (d->group && nla_put_string(msg, GPUSLEEP_A_GROUP, group)) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_OP_ID, s->op_id, GPUSLEEP_A_PAD) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP, s->step) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_TYPE, s->type) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_PHASE, s->phase) ||
	    nla_put_u32(msg, GPUSLEEP_A_STEP_TAGS, s->tags) ||
	    (s->phase == GPUSLEEP_STEP_END &&
	     (nla_put_s32(msg, GPUSLEEP_A_ERROR, s->err) ||
	      nla_put_u32(msg, GPUSLEEP_A_REASON, s->reason))) ||
	    gs_nl_put_u64(msg, GPUSLEEP_A_TIME_NS, ktime_get_real_ns(),
			  GPUSLEEP_A_PAD))
		goto err_free;
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&gs_nl_family, msg, 0, GPUSLEEP_NLGRP_EVENTS,
			  GFP_KERNEL);
	return;

err_free:
	nlmsg_free(msg);
}
