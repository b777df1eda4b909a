/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A minimal raw generic netlink client for the in-VM kselftests of the
 * "gpusleep" family (genl_test, fuzz_test): requests, attributes, replies.
 */
#ifndef GS_NL_H
#define GS_NL_H

#include <sys/socket.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/gpusleep_netlink.h>

#include "gs_test.h"

#define NL_BUF		8192	/* also sizes the kernel's dump skbs */
#define NL_MAX_ATTR	64

/* ------------------------------------------------------------------ */
/* A minimal raw generic netlink client                                */

struct nl_req {
	struct nlmsghdr nh;
	struct genlmsghdr gh;
	char attrs[256];
};

static inline int nl_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	int one = 1;

	if (fd < 0)
		return -errno;
	/* Error acks with the extended ack's message, without the request. */
	if (setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -errno;
	}
	return fd;
}

static inline void nl_init(struct nl_req *r, uint16_t family, uint8_t cmd,
		    uint16_t flags)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->nh.nlmsg_type = family;
	r->nh.nlmsg_flags = NLM_F_REQUEST | flags;
	r->nh.nlmsg_seq = 1;
	r->gh.cmd = cmd;
	r->gh.version = GPUSLEEP_GENL_VERSION;
}

static inline void nl_put(struct nl_req *r, uint16_t type, const void *data,
		   uint16_t len)
{
	struct nlattr *a = (void *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static inline void nl_put_u32(struct nl_req *r, uint16_t type, uint32_t v)
{
	nl_put(r, type, &v, sizeof(v));
}

static inline int nl_send(int fd, struct nl_req *r)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };

	if (sendto(fd, r, r->nh.nlmsg_len, 0, (struct sockaddr *)&sa,
		   sizeof(sa)) < 0)
		return -errno;
	return 0;
}

/* Parse the attributes at p..p+len into tb (indexed by type). */
static inline void nl_parse(struct nlattr **tb, void *p, int len)
{
	struct nlattr *a;

	memset(tb, 0, NL_MAX_ATTR * sizeof(*tb));
	for (a = p; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	     a->nla_len <= len;
	     len -= NLA_ALIGN(a->nla_len),
	     a = (void *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) < NL_MAX_ATTR)
			tb[a->nla_type & NLA_TYPE_MASK] = a;
}

static inline void nl_parse_genl(struct nlattr **tb, struct nlmsghdr *nh)
{
	nl_parse(tb, (char *)NLMSG_DATA(nh) + GENL_HDRLEN,
		 nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN));
}

static inline void *nla_data_(struct nlattr *a)
{
	return (char *)a + NLA_HDRLEN;
}

static inline uint32_t nla_u32(struct nlattr *a)
{
	uint32_t v;

	memcpy(&v, nla_data_(a), sizeof(v));
	return v;
}

static inline uint64_t nla_u64(struct nlattr *a)
{
	uint64_t v;

	memcpy(&v, nla_data_(a), sizeof(v));
	return v;
}

/* Receive one datagram within GS_WAIT_MS. Returns its length or -errno. */
static inline int nl_recv(int fd, char *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int r = poll(&p, 1, GS_WAIT_MS);

	if (r < 0)
		return -errno;
	if (!r)
		return -ETIMEDOUT;
	n = recv(fd, buf, len, 0);
	return n < 0 ? -errno : (int)n;
}

/*
 * Send r and read the answer: 0 with the first reply message copied to out
 * (if out), or the -errno of an NLMSG_ERROR, whose extended ack's message
 * goes to msg (if msg; "" when there is none).
 */
static inline int nl_call_msg(int fd, struct nl_req *r, char *out,
			      size_t outlen, char *msg, size_t msglen)
{
	char buf[NL_BUF];
	struct nlmsghdr *nh;
	int n, ret = 1;

	if (msg)
		msg[0] = 0;

	r->nh.nlmsg_flags |= NLM_F_ACK;
	n = nl_send(fd, r);
	if (n)
		return n;
	while (ret > 0) {
		n = nl_recv(fd, buf, sizeof(buf));
		if (n < 0)
			return n;
		for (nh = (void *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(nh);
				struct nlattr *tb[NL_MAX_ATTR] = { 0 };
				int tl = (int)nh->nlmsg_len -
					 NLMSG_LENGTH(sizeof(*e));

				ret = e->error;
				/* capped ack: the TLVs follow the header */
				if (msg && (nh->nlmsg_flags & NLM_F_ACK_TLVS) &&
				    tl > 0) {
					nl_parse(tb, e + 1, tl);
					if (tb[NLMSGERR_ATTR_MSG])
						snprintf(msg, msglen, "%s",
							 (char *)nla_data_(tb[NLMSGERR_ATTR_MSG]));
				}
				break;
			}
			if (out && nh->nlmsg_len <= outlen)
				memcpy(out, nh, nh->nlmsg_len);
		}
	}
	return ret;
}

static inline int nl_call(int fd, struct nl_req *r, char *out, size_t outlen)
{
	return nl_call_msg(fd, r, out, outlen, NULL, 0);
}

/* Resolve the family id and the events group id. */
static inline int nl_resolve(int fd, uint16_t *family, uint32_t *group)
{
	struct nlattr *tb[NL_MAX_ATTR], *gt[NL_MAX_ATTR], *a;
	char out[NL_BUF];
	struct nl_req r;
	int ret, len;

	nl_init(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0);
	r.gh.version = 1;
	nl_put(&r, CTRL_ATTR_FAMILY_NAME, GPUSLEEP_GENL_NAME,
	       sizeof(GPUSLEEP_GENL_NAME));
	ret = nl_call(fd, &r, out, sizeof(out));
	if (ret)
		return ret;
	nl_parse_genl(tb, (void *)out);
	if (!tb[CTRL_ATTR_FAMILY_ID] || !tb[CTRL_ATTR_MCAST_GROUPS])
		return -EPROTO;
	memcpy(family, nla_data_(tb[CTRL_ATTR_FAMILY_ID]), sizeof(*family));
	a = nla_data_(tb[CTRL_ATTR_MCAST_GROUPS]);
	len = tb[CTRL_ATTR_MCAST_GROUPS]->nla_len - NLA_HDRLEN;
	for (; len >= NLA_HDRLEN; len -= NLA_ALIGN(a->nla_len),
	     a = (void *)((char *)a + NLA_ALIGN(a->nla_len))) {
		nl_parse(gt, nla_data_(a), a->nla_len - NLA_HDRLEN);
		if (gt[CTRL_ATTR_MCAST_GRP_NAME] && gt[CTRL_ATTR_MCAST_GRP_ID] &&
		    !strcmp(nla_data_(gt[CTRL_ATTR_MCAST_GRP_NAME]),
			    GPUSLEEP_MCGRP_EVENTS)) {
			*group = nla_u32(gt[CTRL_ATTR_MCAST_GRP_ID]);
			return 0;
		}
	}
	return -ENOENT;
}

/* GET doit, reply into out. */
static inline int nl_get(int fd, uint16_t family, uint32_t id, char *out, size_t len)
{
	struct nl_req r;

	nl_init(&r, family, GPUSLEEP_CMD_GET, 0);
	nl_put_u32(&r, GPUSLEEP_A_ID, id);
	return nl_call(fd, &r, out, len);
}

static inline int nl_op(int fd, uint16_t family, uint8_t cmd, uint32_t id,
		 uint32_t tags, char *out, size_t len)
{
	struct nl_req r;

	nl_init(&r, family, cmd, 0);
	nl_put_u32(&r, GPUSLEEP_A_ID, id);
	if (tags)
		nl_put_u32(&r, GPUSLEEP_A_TAGS, tags);
	return nl_call(fd, &r, out, len);
}


#endif /* GS_NL_H */
