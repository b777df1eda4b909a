// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: generic netlink sockets, policies and dump (nl.h). */
#include <string.h>

#include "nl.h"

struct nla_policy gs_nl_policy[GPUSLEEP_A_MAX + 1] = {
	[GPUSLEEP_A_ID]		= { .type = NLA_U32 },
	[GPUSLEEP_A_NAME]	= { .type = NLA_STRING },
	[GPUSLEEP_A_GPU]	= { .type = NLA_STRING },
	[GPUSLEEP_A_STATE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RELEASED]	= { .type = NLA_U32 },
	[GPUSLEEP_A_FLAGS]	= { .type = NLA_U32 },
	[GPUSLEEP_A_OP_IN_FLIGHT] = { .type = NLA_U64 },
	[GPUSLEEP_A_OP_ID]	= { .type = NLA_U64 },
	[GPUSLEEP_A_FROM_STATE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RESULT]	= { .type = NLA_NESTED },
	[GPUSLEEP_A_TAG]	= { .type = NLA_NESTED },
	[GPUSLEEP_A_GROUP]	= { .type = NLA_STRING },
	[GPUSLEEP_A_TIME_NS]	= { .type = NLA_U64 },
	[GPUSLEEP_A_ERROR]	= { .type = NLA_U32 },
	[GPUSLEEP_A_REASON]	= { .type = NLA_U32 },
	[GPUSLEEP_A_STEP]	= { .type = NLA_U32 },
	[GPUSLEEP_A_STEP_TYPE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_STEP_PHASE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_STEP_TAGS]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RECLAIM_ID]	= { .type = NLA_U64 },
	[GPUSLEEP_A_ARB_PHASE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_TAKEN_BYTES] = { .type = NLA_U64 },
	[GPUSLEEP_A_BYTES]	= { .type = NLA_U64 },
	[GPUSLEEP_A_WHY]	= { .type = NLA_U32 },
	[GPUSLEEP_A_LEASE_ID]	= { .type = NLA_U64 },
	[GPUSLEEP_A_STILL_RELEASED] = { .type = NLA_U32 },
	[GPUSLEEP_A_VICTIM]	= { .type = NLA_NESTED },
};

static struct nla_policy gs_nl_tag_policy[GPUSLEEP_A_TAG_MAX + 1] = {
	[GPUSLEEP_A_TAG_INDEX]	= { .type = NLA_U32 },
	[GPUSLEEP_A_TAG_NAME]	= { .type = NLA_STRING },
};

void gs_nl_tags(struct nlmsghdr *nlh, struct gpusleep_tags *decl)
{
	struct genlmsghdr *gh = nlmsg_data(nlh);
	struct nlattr *a, *tt[GPUSLEEP_A_TAG_MAX + 1];
	int rem;

	memset(decl, 0, sizeof(*decl));
	nla_for_each_attr(a, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0),
			  rem) {
		uint32_t i;

		if (nla_type(a) != GPUSLEEP_A_TAG ||
		    nla_parse_nested(tt, GPUSLEEP_A_TAG_MAX, a,
				     gs_nl_tag_policy) ||
		    !tt[GPUSLEEP_A_TAG_INDEX] || !tt[GPUSLEEP_A_TAG_NAME])
			continue;
		i = nla_get_u32(tt[GPUSLEEP_A_TAG_INDEX]);
		if (i >= GPUSLEEP_MAX_TAGS)
			continue;
		snprintf(decl->tags[i].name, sizeof(decl->tags[i].name), "%s",
			 nla_get_string(tt[GPUSLEEP_A_TAG_NAME]));
		if (i + 1 > decl->nr_tags)
			decl->nr_tags = i + 1;
	}
}

struct nla_policy gs_nl_res_policy[GPUSLEEP_A_RES_MAX + 1] = {
	[GPUSLEEP_A_RES_OP_ID]		= { .type = NLA_U64 },
	[GPUSLEEP_A_RES_KIND]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_TAGS]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_ERROR]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_REASON]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_DONE_TAGS]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_DURATION_NS]	= { .type = NLA_U64 },
};

int gs_nl_connect(struct gs_nl *n)
{
	int r;

	memset(n, 0, sizeof(*n));
	n->family = -1;
	n->req = nl_socket_alloc();
	n->evs = nl_socket_alloc();
	if (!n->req || !n->evs)
		return -NLE_NOMEM;
	r = genl_connect(n->req);
	if (!r)
		r = genl_connect(n->evs);
	if (r)
		return r;
	nl_socket_disable_seq_check(n->evs);
	return 0;
}

void gs_nl_close(struct gs_nl *n)
{
	nl_socket_free(n->evs);
	nl_socket_free(n->req);
	n->evs = n->req = NULL;
}

int gs_nl_join(struct gs_nl *n, const char **what)
{
	int r;

	*what = "family " GPUSLEEP_GENL_NAME;
	n->family = genl_ctrl_resolve(n->req, GPUSLEEP_GENL_NAME);
	if (n->family < 0)
		return n->family;
	*what = "group " GPUSLEEP_MCGRP_EVENTS;
	n->grp = genl_ctrl_resolve_grp(n->req, GPUSLEEP_GENL_NAME,
				       GPUSLEEP_MCGRP_EVENTS);
	if (n->grp < 0) {
		r = n->grp;
		n->family = -1;
		return r;
	}
	/*
	 * Refused (-NLE_PERM: the group takes CAP_NET_ADMIN over the
	 * network namespace): the family is there all the same.
	 */
	*what = "join group " GPUSLEEP_MCGRP_EVENTS;
	r = nl_socket_add_membership(n->evs, n->grp);
	if (r && r != -NLE_PERM)
		n->family = -1;
	return r;
}

int gs_nl_dump(struct gs_nl *n, void (*on_intr)(void *), void *arg)
{
	struct nl_msg *msg;
	int r, tries;

	for (tries = 0; tries < 10; tries++) {
		msg = nlmsg_alloc();
		if (!msg)
			return -NLE_NOMEM;
		if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, n->family, 0,
				 NLM_F_DUMP, GPUSLEEP_CMD_GET,
				 GPUSLEEP_GENL_VERSION)) {
			nlmsg_free(msg);
			return -NLE_NOMEM;
		}
		r = nl_send_auto(n->req, msg);
		nlmsg_free(msg);
		if (r < 0)
			return r;
		r = nl_recvmsgs_default(n->req);
		if (r != -NLE_DUMP_INTR)
			return r < 0 ? r : 0;
		if (on_intr)
			on_intr(arg);
	}
	return -NLE_DUMP_INTR;
}
