// SPDX-License-Identifier: GPL-2.0
/*
 * The "gpusleep" generic netlink family over raw netlink sockets: GET (do
 * and dump), every transition of a release/resume cycle on the "events"
 * group in order, the start and end of every step of an operation, a dump of 100 domains while another process creates and
 * destroys domains (NLM_F_DUMP_INTR), RELEASE/RESUME and their permission
 * check, policy refusals.
 */
#define _GNU_SOURCE
#include <sched.h>
#include "kselftest_harness.h"
#include "gs_nl.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK

/* ------------------------------------------------------------------ */

FIXTURE(nl) {
	int dev, engine, agent, ctl, sk;
	uint32_t id, group;
	uint16_t family;
};

FIXTURE_SETUP(nl)
{
	self->sk = -1;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		SKIP(return, "%s: %s (module not loaded)", GS_DEV, strerror(errno));
	self->sk = nl_open();
	ASSERT_LE(0, self->sk);
	ASSERT_EQ(0, nl_resolve(self->sk, &self->family, &self->group));
	self->engine = gs_create(self->dev, "genl", 0, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(nl)
{
	if (self->dev < 0)
		return;
	close(self->sk);
	close(self->ctl);
	if (self->agent >= 0)
		close(self->agent);
	if (self->engine >= 0)
		close(self->engine);
	close(self->dev);
}

TEST_F(nl, get_one)
{
	struct nlattr *tb[NL_MAX_ATTR], *cb[NL_MAX_ATTR];
	char out[NL_BUF];

	ASSERT_EQ(0, nl_get(self->sk, self->family, self->id, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	ASSERT_NE(NULL, tb[GPUSLEEP_A_ID]);
	EXPECT_EQ(self->id, nla_u32(tb[GPUSLEEP_A_ID]));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_NAME]);
	EXPECT_STREQ("genl", (char *)nla_data_(tb[GPUSLEEP_A_NAME]));
	EXPECT_STREQ("test-gpu-0", (char *)nla_data_(tb[GPUSLEEP_A_GPU]));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, nla_u32(tb[GPUSLEEP_A_STATE]));
	EXPECT_EQ(0, nla_u32(tb[GPUSLEEP_A_RELEASED]));
	EXPECT_TRUE(nla_u32(tb[GPUSLEEP_A_FLAGS]) & GPUSLEEP_SF_AGENT_ATTACHED);
	EXPECT_EQ(geteuid(), nla_u32(tb[GPUSLEEP_A_OWNER_UID]));
	EXPECT_EQ(getpid(), nla_u32(tb[GPUSLEEP_A_OWNER_PID]));
	EXPECT_EQ(0, nla_u64(tb[GPUSLEEP_A_OP_IN_FLIGHT]));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_COUNTERS]);
	nl_parse(cb, nla_data_(tb[GPUSLEEP_A_COUNTERS]),
		 tb[GPUSLEEP_A_COUNTERS]->nla_len - NLA_HDRLEN);
	ASSERT_NE(NULL, cb[GPUSLEEP_A_CNT_RELEASES]);
	EXPECT_EQ(0, nla_u64(cb[GPUSLEEP_A_CNT_RELEASES]));
}

/* What the agent said stays resident, next to the released bytes. */
TEST_F(nl, resident_after_a_release)
{
	struct nlattr *tb[NL_MAX_ATTR];
	struct gpusleep_complete c;
	struct gpusleep_event ev;
	struct gpusleep_op op;
	char out[NL_BUF];

	/* Not reported: absent (the spec's enum has no 0). */
	ASSERT_EQ(0, nl_get(self->sk, self->family, self->id, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	EXPECT_EQ(NULL, tb[GPUSLEEP_A_RESIDENT_BYTES]);
	EXPECT_EQ(NULL, tb[GPUSLEEP_A_RESIDENT_SOURCE]);

	ASSERT_EQ(0, gs_release(self->ctl, GPUSLEEP_TAG_WEIGHTS,
				GPUSLEEP_OPF_NONBLOCK, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, 0, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, 0, &ev));
	gs_complete_of(&c, &ev, 0, 4096);
	c.resident_bytes = 5ULL << 32;
	c.resident_source = GPUSLEEP_RESIDENT_DEVICE;
	ASSERT_EQ(0, ioctl(self->agent, GPUSLEEP_IOC_COMPLETE, &c));

	ASSERT_EQ(0, nl_get(self->sk, self->family, self->id, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	ASSERT_NE(NULL, tb[GPUSLEEP_A_RESIDENT_BYTES]);
	EXPECT_EQ(5ULL << 32, nla_u64(tb[GPUSLEEP_A_RESIDENT_BYTES]));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_RESIDENT_SOURCE]);
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE,
		  nla_u32(tb[GPUSLEEP_A_RESIDENT_SOURCE]));
}

/*
 * Issue 35: an id no live domain of this network namespace has is ENODEV
 * for every command (ENOENT is a resume's "not released"); a request's
 * own form is judged first, before the domain is looked up.
 */
TEST_F(nl, get_unknown_id)
{
	struct nl_req r;
	char out[NL_BUF], msg[128];
	uint32_t flags = GPUSLEEP_OPF_ABORT_INFLIGHT;

	EXPECT_EQ(-ENODEV, nl_get(self->sk, self->family, 0x7ffffff0, out,
				  sizeof(out)));
	EXPECT_EQ(-ENODEV, nl_op(self->sk, self->family, GPUSLEEP_CMD_RELEASE,
				 0x7ffffff0, 0, out, sizeof(out)));
	/* abort-inflight is a release's flag: EINVAL, whatever the id */
	nl_init(&r, self->family, GPUSLEEP_CMD_RESUME, 0);
	nl_put_u32(&r, GPUSLEEP_A_ID, 0x7ffffff0);
	nl_put_u32(&r, GPUSLEEP_A_OP_FLAGS, flags);
	EXPECT_EQ(-EINVAL, nl_call_msg(self->sk, &r, NULL, 0, msg,
				       sizeof(msg)));
	EXPECT_NE(0, msg[0]);
}

TEST_F(nl, get_without_id)
{
	struct nl_req r;

	nl_init(&r, self->family, GPUSLEEP_CMD_GET, 0);
	EXPECT_EQ(-EINVAL, nl_call(self->sk, &r, NULL, 0));
}

TEST_F(nl, unknown_attribute_rejected)
{
	struct nl_req r;

	nl_init(&r, self->family, GPUSLEEP_CMD_GET, 0);
	nl_put_u32(&r, GPUSLEEP_A_ID, self->id);
	nl_put_u32(&r, GPUSLEEP_A_MAX + 1, 0);
	EXPECT_EQ(-EINVAL, nl_call(self->sk, &r, NULL, 0));
}

/*
 * Like nl_op, and the extended ack's message of a refusal in msg (sized
 * NL_MSG_LEN).
 */
#define NL_MSG_LEN	128
static int nl_op_msg(int fd, uint16_t family, uint8_t cmd, uint32_t id,
		     uint32_t tags, char *msg)
{
	struct nl_req r;

	nl_init(&r, family, cmd, 0);
	nl_put_u32(&r, GPUSLEEP_A_ID, id);
	if (tags)
		nl_put_u32(&r, GPUSLEEP_A_TAGS, tags);
	return nl_call_msg(fd, &r, NULL, 0, msg, NL_MSG_LEN);
}

/*
 * Issue 35: a refusal is an error ack (the reason's errno) with a message
 * in the extended ack, not a reply that carries an error attribute. A tag
 * the domain did not declare: EINVAL, the tags attribute named.
 */
TEST_F(nl, release_undeclared_tag_refused)
{
	struct gpusleep_state st;
	char msg[NL_MSG_LEN];

	EXPECT_EQ(-EINVAL, nl_op_msg(self->sk, self->family,
				     GPUSLEEP_CMD_RELEASE, self->id,
				     W | (1u << 7), msg));
	EXPECT_NE(NULL, strstr(msg, "declare")) TH_LOG("message: %s", msg);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
}

TEST_F(nl, notification_command_not_requestable)
{
	struct nl_req r;

	nl_init(&r, self->family, GPUSLEEP_CMD_STATE_NTF, 0);
	EXPECT_EQ(-EOPNOTSUPP, nl_call(self->sk, &r, NULL, 0));
}

/* Transition n of the expected sequence. */
struct trans {
	uint32_t from, to;
	uint64_t op;
	int res;		/* 1: carries a result */
	int32_t error;
};

/*
 * The next notification about domain id, its attributes in tb (buf holds
 * them): its command, or -errno.
 */
static int recv_about(int fd, uint32_t id, char *buf, struct nlattr **tb)
{
	struct nlmsghdr *nh = (void *)buf;
	int n;

	for (;;) {
		n = nl_recv(fd, buf, NL_BUF);
		if (n < 0)
			return n;
		if (!NLMSG_OK(nh, n))
			return -EPROTO;
		nl_parse_genl(tb, nh);
		if (tb[GPUSLEEP_A_ID] && nla_u32(tb[GPUSLEEP_A_ID]) == id)
			return ((struct genlmsghdr *)NLMSG_DATA(nh))->cmd;
	}
}

static int expect_trans(int fd, uint32_t id, const struct trans *t)
{
	struct nlattr *tb[NL_MAX_ATTR], *rb[NL_MAX_ATTR];
	char buf[NL_BUF];
	int cmd;

	do {		/* the steps' are for steps_* below */
		cmd = recv_about(fd, id, buf, tb);
	} while (cmd == GPUSLEEP_CMD_STEP_NTF);
	if (cmd < 0)
		return cmd;
	if (cmd != GPUSLEEP_CMD_STATE_NTF || !tb[GPUSLEEP_A_FROM_STATE] ||
	    !tb[GPUSLEEP_A_STATE] || !tb[GPUSLEEP_A_OP_ID])
		return -EPROTO;
	if (nla_u32(tb[GPUSLEEP_A_FROM_STATE]) != t->from ||
	    nla_u32(tb[GPUSLEEP_A_STATE]) != t->to ||
	    nla_u64(tb[GPUSLEEP_A_OP_ID]) != t->op ||
	    !!tb[GPUSLEEP_A_RESULT] != t->res) {
		fprintf(stderr, "# got %u -> %u op %llu result %d; expected %u -> %u op %llu result %d\n",
			nla_u32(tb[GPUSLEEP_A_FROM_STATE]),
			nla_u32(tb[GPUSLEEP_A_STATE]),
			(unsigned long long)nla_u64(tb[GPUSLEEP_A_OP_ID]),
			!!tb[GPUSLEEP_A_RESULT], t->from, t->to,
			(unsigned long long)t->op, t->res);
		return -EPROTO;
	}
	if (t->res) {
		nl_parse(rb, nla_data_(tb[GPUSLEEP_A_RESULT]),
			 tb[GPUSLEEP_A_RESULT]->nla_len - NLA_HDRLEN);
		if (!rb[GPUSLEEP_A_RES_OP_ID] || !rb[GPUSLEEP_A_RES_ERROR] ||
		    nla_u64(rb[GPUSLEEP_A_RES_OP_ID]) != t->op ||
		    (int32_t)nla_u32(rb[GPUSLEEP_A_RES_ERROR]) != t->error)
			return -EPROTO;
	}
	return 0;
}

TEST_F(nl, events_follow_a_cycle)
{
	static const struct trans seq[] = {
		{ GPUSLEEP_S_AWAKE, GPUSLEEP_S_DRAINING, 1, 0, 0 },
		{ GPUSLEEP_S_DRAINING, GPUSLEEP_S_RELEASING, 1, 0, 0 },
		{ GPUSLEEP_S_RELEASING, GPUSLEEP_S_RELEASED, 1, 1, 0 },
		{ GPUSLEEP_S_RELEASED, GPUSLEEP_S_RESUMING, 2, 0, 0 },
		{ GPUSLEEP_S_RESUMING, GPUSLEEP_S_AWAKE, 2, 1, 0 },
		{ GPUSLEEP_S_AWAKE, GPUSLEEP_S_DRAINING, 3, 0, 0 },
		{ GPUSLEEP_S_DRAINING, GPUSLEEP_S_AWAKE, 3, 1, -EIO },
		{ GPUSLEEP_S_AWAKE, GPUSLEEP_S_DEAD, 0, 0, 0 },
	};
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int lsn, grp;
	size_t i;

	lsn = nl_open();
	ASSERT_LE(0, lsn);
	grp = self->group;
	ASSERT_EQ(0, setsockopt(lsn, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
				&grp, sizeof(grp)));

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, -EIO,
				    0));
	close(self->engine);
	self->engine = -1;

	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++)
		ASSERT_EQ(0, expect_trans(lsn, self->id, &seq[i]))
			TH_LOG("transition %zu", i);
	close(lsn);
}

/* One boundary of a step, as a STEP_NTF says it. */
struct step {
	uint32_t step, type, phase, tags;
	int32_t error;		/* ends only */
	uint32_t reason;	/* ends only */
};

#define S_START	GPUSLEEP_STEP_START
#define S_END	GPUSLEEP_STEP_END
/* Step n, of type, about tags, starts; ends with error and reason. */
#define START(n, type, tags)	{ n, GPUSLEEP_EV_##type, S_START, tags, 0, 0 }
#define END(n, type, tags, error, reason) \
	{ n, GPUSLEEP_EV_##type, S_END, tags, error, GPUSLEEP_R_##reason }
#define OK(n, type, tags)	END(n, type, tags, 0, NONE)

/*
 * Read the notifications about domain id up to the state notification
 * with op's result, and check that they announce the steps want[0..n) in
 * that order, each of op, and that their times (TIME_NS, of the state
 * notifications too) never go back.
 */
static int expect_steps(int fd, uint32_t id, uint64_t op,
			const struct step *want, size_t n)
{
	struct nlattr *tb[NL_MAX_ATTR];
	uint64_t t, last = 0;
	char buf[NL_BUF];
	size_t i = 0;
	int cmd;

	for (;;) {
		cmd = recv_about(fd, id, buf, tb);
		if (cmd < 0)
			return cmd;
		if (!tb[GPUSLEEP_A_TIME_NS] || !tb[GPUSLEEP_A_OP_ID])
			return -EPROTO;
		t = nla_u64(tb[GPUSLEEP_A_TIME_NS]);
		if (t < last) {
			fprintf(stderr, "# time went back: %llu after %llu\n",
				(unsigned long long)t, (unsigned long long)last);
			return -ERANGE;
		}
		last = t;
		if (cmd == GPUSLEEP_CMD_STATE_NTF) {
			if (tb[GPUSLEEP_A_RESULT] &&
			    nla_u64(tb[GPUSLEEP_A_OP_ID]) == op)
				break;
			continue;
		}
		if (cmd != GPUSLEEP_CMD_STEP_NTF || !tb[GPUSLEEP_A_STEP] ||
		    !tb[GPUSLEEP_A_STEP_TYPE] || !tb[GPUSLEEP_A_STEP_PHASE] ||
		    !tb[GPUSLEEP_A_STEP_TAGS] || !tb[GPUSLEEP_A_NAME])
			return -EPROTO;
		if (i == n) {
			fprintf(stderr, "# a step more than the %zu expected\n", n);
			return -E2BIG;
		}
		if (nla_u64(tb[GPUSLEEP_A_OP_ID]) != op ||
		    nla_u32(tb[GPUSLEEP_A_STEP]) != want[i].step ||
		    nla_u32(tb[GPUSLEEP_A_STEP_TYPE]) != want[i].type ||
		    nla_u32(tb[GPUSLEEP_A_STEP_PHASE]) != want[i].phase ||
		    nla_u32(tb[GPUSLEEP_A_STEP_TAGS]) != want[i].tags ||
		    !!tb[GPUSLEEP_A_ERROR] != (want[i].phase == S_END) ||
		    (tb[GPUSLEEP_A_ERROR] &&
		     ((int32_t)nla_u32(tb[GPUSLEEP_A_ERROR]) != want[i].error ||
		      !tb[GPUSLEEP_A_REASON] ||
		      nla_u32(tb[GPUSLEEP_A_REASON]) != want[i].reason))) {
			fprintf(stderr, "# step ntf %zu: op %llu step %u type %u phase %u tags %#x error %d; expected op %llu step %u type %u phase %u tags %#x error %d reason %u\n",
				i, (unsigned long long)nla_u64(tb[GPUSLEEP_A_OP_ID]),
				nla_u32(tb[GPUSLEEP_A_STEP]),
				nla_u32(tb[GPUSLEEP_A_STEP_TYPE]),
				nla_u32(tb[GPUSLEEP_A_STEP_PHASE]),
				nla_u32(tb[GPUSLEEP_A_STEP_TAGS]),
				tb[GPUSLEEP_A_ERROR] ?
				(int32_t)nla_u32(tb[GPUSLEEP_A_ERROR]) : 0,
				(unsigned long long)op, want[i].step,
				want[i].type, want[i].phase, want[i].tags,
				want[i].error, want[i].reason);
			return -EPROTO;
		}
		i++;
	}
	if (i != n) {
		fprintf(stderr, "# %zu step notifications, expected %zu\n", i, n);
		return -ENODATA;
	}
	return 0;
}

static int join_events(uint32_t group)
{
	int lsn = nl_open(), grp = group;

	if (lsn >= 0 && setsockopt(lsn, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
				   &grp, sizeof(grp))) {
		close(lsn);
		return -errno;
	}
	return lsn;
}

/*
 * Issue 23: a release and a resume announce each step's start and end,
 * in order, with the operation's id and the step's number, before the
 * result; their times never go back.
 */
TEST_F(nl, steps_of_a_release_and_a_resume)
{
	static const struct step rel[] = {
		START(1, DRAIN, W | KV),
		OK(1, DRAIN, W | KV),
		START(2, RESET_CACHES, KV),
		OK(2, RESET_CACHES, KV),
		START(3, PAUSE_TAG, W),
		OK(3, PAUSE_TAG, W),
		START(4, PAUSE_TAG, KV),
		OK(4, PAUSE_TAG, KV),
	};
	static const struct step res[] = {
		START(1, RESUME_TAG, W),
		OK(1, RESUME_TAG, W),
		START(2, RESUME_TAG, KV),
		OK(2, RESUME_TAG, KV),
		START(3, REPAIR_KV, KV),
		OK(3, REPAIR_KV, KV),
	};
	struct gpusleep_op op1, op2;
	int engine, agent, ctl, lsn;
	uint32_t id;

	engine = gs_create(self->dev, "genl-steps", GPUSLEEP_CAP_ALL, &id);
	ASSERT_LE(0, engine);
	agent = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, agent);
	ctl = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, ctl);
	lsn = join_events(self->group);
	ASSERT_LE(0, lsn);

	ASSERT_EQ(0, gs_release(ctl, W | KV, NB, &op1));
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_DRAIN, W | KV, 0, 0));
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_RESET_CACHES, KV, 0, 0));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 100));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0, 100));
	ASSERT_EQ(0, gs_resume(ctl, 0, NB, &op2));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, W, 0, 100));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, KV, 0, 100));
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_REPAIR_KV, KV, 0, 0));

	EXPECT_EQ(0, expect_steps(lsn, id, op1.op_id, rel, ARRAY_SIZE(rel)));
	EXPECT_EQ(0, expect_steps(lsn, id, op2.op_id, res, ARRAY_SIZE(res)));
	close(lsn);
	close(ctl);
	close(agent);
	close(engine);
}

/*
 * A step that does not end with its answer ends all the same, once, with
 * why: called off by a resume, timed out, failed by its peer.
 */
TEST_F(nl, steps_that_fail_end_with_why)
{
	static const struct step cancelled[] = {
		START(1, DRAIN, W),
		END(1, DRAIN, W, -ECANCELED, CANCELLED),
	};
	static const struct step timed_out[] = {
		START(1, DRAIN, W),
		END(1, DRAIN, W, -ETIMEDOUT, DRAIN_TIMEOUT),
	};
	static const struct step failed[] = {
		START(1, DRAIN, W),
		OK(1, DRAIN, W),
		START(2, PAUSE_TAG, W),
		END(2, PAUSE_TAG, W, -EIO, AGENT_FAILED),
	};
	struct gpusleep_op o = { .tags = W, .flags = NB, .timeout_ms = 50 };
	struct gpusleep_op op1, op3;
	int lsn = join_events(self->group);

	ASSERT_LE(0, lsn);
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op1));
	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, NULL));
	EXPECT_EQ(0, expect_steps(lsn, self->id, op1.op_id, cancelled,
				  ARRAY_SIZE(cancelled)));

	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &o));
	EXPECT_EQ(0, expect_steps(lsn, self->id, o.op_id, timed_out,
				  ARRAY_SIZE(timed_out)));

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op3));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				    -EIO, 0));
	EXPECT_EQ(0, expect_steps(lsn, self->id, op3.op_id, failed,
				  ARRAY_SIZE(failed)));
	close(lsn);
}

/*
 * In a child: pid 1 of a new pid namespace joins "events" (writes 'r'),
 * then reports on rep the OWNER_PID of the first notification about id:
 * 'a' absent, 'z' zero (not seen from there), 'p' a pid of another
 * namespace. Exits 50 when a pid namespace cannot be made.
 */
static pid_t listen_from_another_pid_ns(uint32_t group, uint32_t id, int rep)
{
	pid_t c = fork();

	if (c == 0) {
		pid_t g;
		int st;

		if (unshare(CLONE_NEWPID))
			_exit(50);
		g = fork();
		if (g == 0) {
			struct nlattr *tb[NL_MAX_ATTR];
			char buf[NL_BUF], v;
			int lsn = nl_open(), n;

			if (lsn < 0 || setsockopt(lsn, SOL_NETLINK,
						  NETLINK_ADD_MEMBERSHIP,
						  &group, sizeof(group)) ||
			    write(rep, "r", 1) != 1)
				_exit(51);
			do {
				n = nl_recv(lsn, buf, sizeof(buf));
				if (n < 0 || !NLMSG_OK((struct nlmsghdr *)buf, n))
					_exit(52);
				nl_parse_genl(tb, (void *)buf);
			} while (!tb[GPUSLEEP_A_ID] ||
				 nla_u32(tb[GPUSLEEP_A_ID]) != id);
			v = !tb[GPUSLEEP_A_OWNER_PID] ? 'a' :
			    !nla_u32(tb[GPUSLEEP_A_OWNER_PID]) ? 'z' : 'p';
			_exit(write(rep, &v, 1) == 1 ? 0 : 53);
		}
		_exit(g > 0 && waitpid(g, &st, 0) == g && WIFEXITED(st) ?
		      WEXITSTATUS(st) : 54);
	}
	return c;
}

/*
 * Issue 26, 12: a listener in another pid namespace is not shown the
 * creator's pid as the initial namespace numbers it (notifications carry
 * no pid; GET and dump show the requester's view).
 */
TEST_F(nl, notification_shows_no_foreign_pid)
{
	struct gpusleep_op op;
	int rep[2], st;
	char v = 0;
	pid_t c;

	ASSERT_EQ(0, pipe(rep));
	c = listen_from_another_pid_ns(self->group, self->id, rep[1]);
	ASSERT_LT(0, c);
	close(rep[1]);
	if (read(rep[0], &v, 1) != 1) {
		waitpid(c, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 50)
			SKIP(return, "unshare(CLONE_NEWPID): %s", strerror(errno));
		ASSERT_EQ(0, WEXITSTATUS(st));
	}
	ASSERT_EQ('r', v);
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(1, read(rep[0], &v, 1));
	EXPECT_NE('p', v);
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(rep[0]);
}

TEST_F(nl, release_and_resume_by_netlink)
{
	struct nlattr *tb[NL_MAX_ATTR];
	struct gpusleep_result res;
	char out[NL_BUF], msg[NL_MSG_LEN];

	ASSERT_EQ(0, nl_op(self->sk, self->family, GPUSLEEP_CMD_RELEASE,
			   self->id, W, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	ASSERT_NE(NULL, tb[GPUSLEEP_A_OP_ID]);
	EXPECT_EQ(1, nla_u64(tb[GPUSLEEP_A_OP_ID]));
	EXPECT_EQ(0, (int32_t)nla_u32(tb[GPUSLEEP_A_ERROR]));
	EXPECT_EQ(GPUSLEEP_R_NONE, nla_u32(tb[GPUSLEEP_A_REASON]));
	EXPECT_EQ(GPUSLEEP_S_DRAINING, nla_u32(tb[GPUSLEEP_A_STATE]));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_wait(self->ctl, 1, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);

	/* Already released: an error ack, with the reason in words. */
	EXPECT_EQ(-EALREADY, nl_op_msg(self->sk, self->family,
				       GPUSLEEP_CMD_RELEASE, self->id, W, msg));
	EXPECT_NE(NULL, strstr(msg, "already_released")) TH_LOG("%s", msg);

	ASSERT_EQ(0, nl_op(self->sk, self->family, GPUSLEEP_CMD_RESUME,
			   self->id, 0, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	EXPECT_EQ(2, nla_u64(tb[GPUSLEEP_A_OP_ID]));
	EXPECT_EQ(GPUSLEEP_S_RESUMING, nla_u32(tb[GPUSLEEP_A_STATE]));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_wait(self->ctl, 2, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
}

TEST_F(nl, release_refused_without_agent)
{
	char msg[NL_MSG_LEN];

	close(self->agent);
	self->agent = -1;
	EXPECT_EQ(-ENOTCONN, nl_op_msg(self->sk, self->family,
				       GPUSLEEP_CMD_RELEASE, self->id, 0, msg));
	EXPECT_NE(NULL, strstr(msg, "agent")) TH_LOG("message: %s", msg);
}

/* Run fn in a child with uid/gid 65534; returns its exit status. */
static int as_nobody(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(100);
		_exit(fn(arg));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

struct perm_arg {
	uint16_t family;
	uint32_t id;
	int sk;		/* a socket root opened, or -1 */
};

/* 0 if RELEASE of root's domain is refused with EPERM. */
static int nobody_release_root(void *p)
{
	struct perm_arg *a = p;
	char out[NL_BUF];
	int sk = nl_open();

	if (sk < 0)
		return 101;
	return nl_op(sk, a->family, GPUSLEEP_CMD_RELEASE, a->id, 0, out,
		     sizeof(out)) == -EPERM ? 0 : 1;
}

/*
 * 0 if RELEASE of root's domain through the socket root opened, sent
 * after dropping to nobody, is refused with EPERM: the sender is judged.
 */
static int nobody_release_root_via_roots_socket(void *p)
{
	struct perm_arg *a = p;
	char out[NL_BUF];

	return nl_op(a->sk, a->family, GPUSLEEP_CMD_RELEASE, a->id, 0, out,
		     sizeof(out)) == -EPERM ? 0 : 1;
}

/* 0 if nobody's RELEASE of its own domain starts operation 1. */
static int nobody_release_own(void *p)
{
	struct perm_arg *a = p;
	struct nlattr *tb[NL_MAX_ATTR];
	char out[NL_BUF];
	uint32_t id = 0;
	int dev, e, ag, sk, r;

	dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return 102;
	e = gs_create(dev, "nobody", 0, &id);
	if (e < 0)
		return 103;
	ag = gs_attach(dev, id, GPUSLEEP_ROLE_AGENT);
	sk = nl_open();
	if (ag < 0 || sk < 0)
		return 104;
	r = nl_op(sk, a->family, GPUSLEEP_CMD_RELEASE, id, 0, out, sizeof(out));
	if (r)
		return 105;
	nl_parse_genl(tb, (void *)out);
	if (!tb[GPUSLEEP_A_OP_ID] || nla_u64(tb[GPUSLEEP_A_OP_ID]) != 1)
		return 106;
	return 0;
}

TEST_F(nl, unprivileged_release_of_roots_domain_eperm)
{
	struct perm_arg a = { .family = self->family, .id = self->id };
	struct gpusleep_state st;

	EXPECT_EQ(0, as_nobody(nobody_release_root, &a));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
	a.id = 0;
	EXPECT_EQ(0, as_nobody(nobody_release_own, &a));
}

/* Issue 26, 9: a socket opened by root grants nothing to its later user. */
TEST_F(nl, root_socket_used_after_setuid_is_judged_by_the_sender)
{
	struct perm_arg a = { .family = self->family, .id = self->id };
	struct gpusleep_state st;

	a.sk = nl_open();
	ASSERT_LE(0, a.sk);
	EXPECT_EQ(0, as_nobody(nobody_release_root_via_roots_socket, &a));
	close(a.sk);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
}

/* ------------------------------------------------------------------ */
/* Who sees what: network namespaces, the events group's capability    */

/*
 * In a child as nobody: join "events" and report on rep 'e' if the join
 * is refused with EPERM, else 'j', then 'm' when a notification about id
 * arrives within 3 s, 'n' when none does. Exits 0, or 60.. on an error.
 */
static pid_t listen_as_nobody(uint32_t group, uint32_t id, int rep)
{
	pid_t c = fork();

	if (c == 0) {
		struct nlattr *tb[NL_MAX_ATTR];
		struct pollfd p;
		char buf[NL_BUF], v;
		int lsn, n;

		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(60);
		lsn = nl_open();
		if (lsn < 0)
			_exit(61);
		if (setsockopt(lsn, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
			       &group, sizeof(group)))
			_exit(errno == EPERM && write(rep, "e", 1) == 1 ? 0 : 62);
		if (write(rep, "j", 1) != 1)
			_exit(63);
		p.fd = lsn;
		p.events = POLLIN;
		v = 'n';
		while (poll(&p, 1, 3000) == 1) {
			n = recv(lsn, buf, sizeof(buf), 0);
			if (n < 0 || !NLMSG_OK((struct nlmsghdr *)buf, n))
				_exit(64);
			nl_parse_genl(tb, (void *)buf);
			if (tb[GPUSLEEP_A_ID] &&
			    nla_u32(tb[GPUSLEEP_A_ID]) == id) {
				v = 'm';
				break;
			}
		}
		_exit(write(rep, &v, 1) == 1 ? 0 : 65);
	}
	return c;
}

/*
 * Issue 35: the events group shows the domains of its network namespace
 * to who administers that namespace (CAP_NET_ADMIN in its user
 * namespace), not every user's domains to anyone: an unprivileged
 * listener is refused at the join (GENL_MCAST_CAP_NET_ADMIN), or, on a
 * kernel without it, sent nothing.
 */
TEST_F(nl, unprivileged_listener_sees_no_transitions)
{
	struct gpusleep_op op;
	int rep[2], st;
	char v = 0;
	pid_t c;

	if (geteuid() != 0)
		SKIP(return, "needs root to switch uid");
	ASSERT_EQ(0, pipe(rep));
	c = listen_as_nobody(self->group, self->id, rep[1]);
	ASSERT_LT(0, c);
	close(rep[1]);
	ASSERT_EQ(1, read(rep[0], &v, 1));
	if (v == 'j') {
		ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
		ASSERT_EQ(1, read(rep[0], &v, 1));
		EXPECT_EQ('n', v);	/* nothing about root's domain */
	} else {
		EXPECT_EQ('e', v);
	}
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(rep[0]);
}

/*
 * A notification waiting to be sent holds nothing of its domain: a
 * domain closed while its last notifications are queued gives its
 * creator's share back at once (with a share of 1, close and create again
 * at once, with a listener that the work must send to).
 */
TEST_F(nl, queued_notifications_hold_no_share)
{
	char old[32];
	int lsn, i, e;

	lsn = join_events(self->group);
	ASSERT_LE(0, lsn);
	/* the fixture's domain goes with its last fd: its share back */
	close(self->ctl);
	close(self->agent);
	close(self->engine);
	self->ctl = self->agent = self->engine = -1;
	ASSERT_EQ(0, gs_param_set("max_domains_per_user", "1", old,
				  sizeof(old)));
	for (i = 0; i < 200; i++) {
		e = gs_create(self->dev, "share", 0, NULL);
		EXPECT_LE(0, e) TH_LOG("create %d: %s", i, strerror(-e));
		if (e < 0)
			break;
		close(e);	/* awake -> dead, announced */
	}
	gs_param_set("max_domains_per_user", old, NULL, 0);
	close(lsn);
}

/* The ids a dump of the family lists (at most n), or -errno. */
static int dump_ids(int sk, uint16_t family, uint32_t *ids, int n)
{
	struct nlattr *tb[NL_MAX_ATTR];
	char buf[NL_BUF];
	struct nl_req r;
	struct nlmsghdr *nh;
	int len, found = 0;

	nl_init(&r, family, GPUSLEEP_CMD_GET, NLM_F_DUMP);
	len = nl_send(sk, &r);
	if (len)
		return len;
	for (;;) {
		len = nl_recv(sk, buf, sizeof(buf));
		if (len < 0)
			return len;
		for (nh = (void *)buf; NLMSG_OK(nh, len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_type == NLMSG_DONE)
				return found;
			if (nh->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
			nl_parse_genl(tb, nh);
			if (tb[GPUSLEEP_A_ID] && found < n)
				ids[found++] = nla_u32(tb[GPUSLEEP_A_ID]);
		}
	}
}

static int has_id(const uint32_t *ids, int n, uint32_t id)
{
	while (n-- > 0)
		if (ids[n] == id)
			return 1;
	return 0;
}

/*
 * In a child, in a new network namespace: the family is there; the
 * parent's domain (other) is not (GET: ENODEV; not in a dump); a domain
 * made here is, and its transitions reach a listener here. Writes the
 * new domain's id on rep. Exits 0, 20 when no network namespace can be
 * made, or the number of the check that failed.
 */
static pid_t netns_child(int dev, uint32_t other, int rep)
{
	pid_t c = fork();

	if (c == 0) {
		struct nlattr *tb[NL_MAX_ATTR];
		uint32_t ids[256], id = 0, group;
		char buf[NL_BUF];
		struct gpusleep_op op;
		uint16_t family;
		int sk, lsn, e, a, n;

		if (unshare(CLONE_NEWNET))
			_exit(20);
		sk = nl_open();
		lsn = nl_open();
		if (sk < 0 || lsn < 0)
			_exit(21);
		if (nl_resolve(sk, &family, &group))
			_exit(22);	/* the family is in every namespace */
		if (nl_get(sk, family, other, buf, sizeof(buf)) != -ENODEV)
			_exit(23);
		if (setsockopt(lsn, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
			       &group, sizeof(group)))
			_exit(24);
		e = gs_create(dev, "netns-b", 0, &id);
		a = gs_attach(dev, id, GPUSLEEP_ROLE_AGENT);
		if (e < 0 || a < 0)
			_exit(25);
		n = dump_ids(sk, family, ids, 256);
		if (n < 0 || !has_id(ids, n, id) || has_id(ids, n, other))
			_exit(26);
		if (nl_get(sk, family, id, buf, sizeof(buf)))
			_exit(27);
		if (gs_release(e, W, NB, &op) ||
		    recv_about(lsn, id, buf, tb) != GPUSLEEP_CMD_STATE_NTF)
			_exit(28);
		if (write(rep, &id, sizeof(id)) != sizeof(id))
			_exit(29);
		_exit(0);
	}
	return c;
}

/*
 * Issue 35: the family is in every network namespace (netnsok), and a
 * domain is seen (GET, dump, RELEASE/RESUME, the events group) in the
 * network namespace its creator was in when it made it, only there.
 */
TEST_F(nl, a_domain_is_seen_in_its_creators_network_namespace)
{
	struct nlattr *tb[NL_MAX_ATTR];
	uint32_t ids[256], theirs = 0;
	struct gpusleep_op op;
	char buf[NL_BUF];
	int rep[2], st, lsn, cmd, n;
	pid_t c;

	lsn = join_events(self->group);
	ASSERT_LE(0, lsn);
	ASSERT_EQ(0, pipe(rep));
	c = netns_child(self->dev, self->id, rep[1]);
	ASSERT_LT(0, c);
	close(rep[1]);
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	if (WEXITSTATUS(st) == 20)
		SKIP(return, "unshare(CLONE_NEWNET) failed");
	ASSERT_EQ(0, WEXITSTATUS(st)) TH_LOG("check %d failed in the child",
					      WEXITSTATUS(st));
	ASSERT_EQ(sizeof(theirs), read(rep[0], &theirs, sizeof(theirs)));
	close(rep[0]);
	/* not listed here (it may be gone already: its creator exited) */
	n = dump_ids(self->sk, self->family, ids, 256);
	ASSERT_LE(0, n);
	EXPECT_TRUE(has_id(ids, n, self->id));
	EXPECT_FALSE(has_id(ids, n, theirs));
	/*
	 * Its transitions came before this one; none reached this
	 * namespace's listener.
	 */
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	for (;;) {
		n = nl_recv(lsn, buf, sizeof(buf));
		ASSERT_LT(0, n);
		nl_parse_genl(tb, (void *)buf);
		cmd = ((struct genlmsghdr *)NLMSG_DATA((struct nlmsghdr *)buf))->cmd;
		ASSERT_NE(NULL, tb[GPUSLEEP_A_ID]);
		EXPECT_NE(theirs, nla_u32(tb[GPUSLEEP_A_ID]));
		if (nla_u32(tb[GPUSLEEP_A_ID]) == self->id &&
		    cmd == GPUSLEEP_CMD_STATE_NTF)
			break;
	}
	close(lsn);
}

/* ------------------------------------------------------------------ */
/* Dump consistency                                                    */

#define NR_DOMAINS	100
#define MAX_DUMPS	3000

/* One dump: *intr if a message had NLM_F_DUMP_INTR; ids seen in seen[]. */
static int dump_all(int sk, uint16_t family, const uint32_t *ids,
		    int *found, int *intr)
{
	struct nlattr *tb[NL_MAX_ATTR];
	char buf[NL_BUF];
	struct nl_req r;
	struct nlmsghdr *nh;
	int n, i, done = 0;

	*found = 0;
	*intr = 0;
	nl_init(&r, family, GPUSLEEP_CMD_GET, NLM_F_DUMP);
	n = nl_send(sk, &r);
	if (n)
		return n;
	while (!done) {
		n = nl_recv(sk, buf, sizeof(buf));
		if (n < 0)
			return n;
		for (nh = (void *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_flags & NLM_F_DUMP_INTR)
				*intr = 1;
			if (nh->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (nh->nlmsg_type == NLMSG_ERROR)
				return ((struct nlmsgerr *)NLMSG_DATA(nh))->error;
			nl_parse_genl(tb, nh);
			if (!tb[GPUSLEEP_A_ID])
				return -EPROTO;
			for (i = 0; i < NR_DOMAINS; i++)
				if (ids[i] == nla_u32(tb[GPUSLEEP_A_ID]))
					(*found)++;
		}
	}
	return 0;
}

TEST_F_TIMEOUT(nl, dump_100_domains_under_churn, 600)
{
	int fds[NR_DOMAINS], found, intr, seen_intr = 0, complete = 0, i, st;
	uint32_t ids[NR_DOMAINS];
	char name[32], old[32];
	pid_t churn;

	/* More domains than one user's default share. */
	ASSERT_EQ(0, gs_param_set("max_domains_per_user", "0", old,
				  sizeof(old)));
	for (i = 0; i < NR_DOMAINS; i++) {
		snprintf(name, sizeof(name), "dump-%d", i);
		fds[i] = gs_create(self->dev, name, 0, &ids[i]);
		ASSERT_LE(0, fds[i]);
	}
	/* Quiet: one complete dump without interruption. */
	ASSERT_EQ(0, dump_all(self->sk, self->family, ids, &found, &intr));
	EXPECT_EQ(0, intr);
	EXPECT_EQ(NR_DOMAINS, found);

	churn = fork();
	ASSERT_LE(0, churn);
	if (churn == 0) {
		int dev = open(GS_DEV, O_RDWR | O_CLOEXEC), e;

		for (;;) {
			e = gs_create(dev, "churn", 0, NULL);
			if (e >= 0)
				close(e);
		}
	}
	for (i = 0; i < MAX_DUMPS && !seen_intr; i++) {
		ASSERT_EQ(0, dump_all(self->sk, self->family, ids, &found,
				      &intr));
		if (intr) {
			seen_intr = 1;
		} else {
			/* Not interrupted: every one of the 100 is there. */
			EXPECT_EQ(NR_DOMAINS, found);
			complete++;
		}
	}
	kill(churn, SIGKILL);
	waitpid(churn, &st, 0);
	TH_LOG("%d dumps, %d complete without interruption", i, complete);
	EXPECT_TRUE(seen_intr);
	for (i = 0; i < NR_DOMAINS; i++)
		close(fds[i]);
	gs_param_set("max_domains_per_user", old, NULL, 0);
}

/* ------------------------------------------------- tenants, reclaims */

/* The n-th nest of type in the message's top level (multi-attr), or NULL. */
static struct nlattr *nth_attr(struct nlmsghdr *nh, int type, int n)
{
	int len = nh->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
	struct nlattr *a = (void *)((char *)NLMSG_DATA(nh) + GENL_HDRLEN);

	for (; len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	     a->nla_len <= len;
	     len -= NLA_ALIGN(a->nla_len),
	     a = (void *)((char *)a + NLA_ALIGN(a->nla_len)))
		if ((a->nla_type & NLA_TYPE_MASK) == type && !n--)
			return a;
	return NULL;
}

static const uint8_t nl_uuid[16] = { 0x4e, 0x4c, 1, 2, 3, 4, 5, 6, 7, 8,
				     9, 10, 11, 12, 13, 14 };

static int nl_report(int agent, uint64_t w, uint32_t wpol)
{
	struct gpusleep_report r;

	memset(&r, 0, sizeof(r));
	memcpy(r.gpu_uuid, nl_uuid, 16);
	r.nr_tags = 2;
	r.tags[0].size_bytes = w;
	r.tags[0].mapped_bytes = w;
	r.tags[0].host_bytes = w / 2;
	r.tags[0].policy = wpol;
	r.tags[0].content = wpol ? GPUSLEEP_CONTENT_KEPT : 0;
	r.torch_reserved_bytes = 7;
	r.graph_pool_bytes = 9;
	r.process_bytes = 11;
	r.process_source = GPUSLEEP_RESIDENT_PROCESS;
	return gs_err(ioctl(agent, GPUSLEEP_IOC_REPORT, &r));
}

/* GET: the tenant's statement always; its report once sent. */
TEST_F(nl, get_shows_the_tenant)
{
	struct gpusleep_tenant_set ts = { .priority = -3,
					  .flags = GPUSLEEP_TENF_YIELDABLE };
	struct nlattr *tb[NL_MAX_ATTR], *g[NL_MAX_ATTR], *a;
	char out[NL_BUF];
	int i, seen = 0;

	ASSERT_EQ(0, nl_get(self->sk, self->family, self->id, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	ASSERT_NE(NULL, tb[GPUSLEEP_A_PRIORITY]);
	EXPECT_EQ(0, nla_u32(tb[GPUSLEEP_A_PRIORITY]));
	EXPECT_EQ(NULL, tb[GPUSLEEP_A_GPU_UUID]);	/* no report yet */
	EXPECT_EQ(NULL, tb[GPUSLEEP_A_LEASE_ID]);

	ASSERT_EQ(0, gs_err(ioctl(self->engine, GPUSLEEP_IOC_SET_TENANT, &ts)));
	ASSERT_EQ(0, nl_report(self->agent, 64 << 20, GPUSLEEP_POLICY_BACKUP));
	ASSERT_EQ(0, nl_get(self->sk, self->family, self->id, out, sizeof(out)));
	nl_parse_genl(tb, (void *)out);
	ASSERT_NE(NULL, tb[GPUSLEEP_A_PRIORITY]);
	EXPECT_EQ(-3, (int32_t)nla_u32(tb[GPUSLEEP_A_PRIORITY]));
	EXPECT_EQ(GPUSLEEP_TENF_YIELDABLE, nla_u32(tb[GPUSLEEP_A_TENANT_FLAGS]));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_GPU_UUID]);
	EXPECT_EQ(NLA_HDRLEN + 16, tb[GPUSLEEP_A_GPU_UUID]->nla_len);
	EXPECT_EQ(0, memcmp(nla_data_(tb[GPUSLEEP_A_GPU_UUID]), nl_uuid, 16));
	EXPECT_EQ(32 << 20, nla_u64(tb[GPUSLEEP_A_HOST_BYTES]));
	EXPECT_EQ(7, nla_u64(tb[GPUSLEEP_A_RESIDENT_TORCH_BYTES]));
	EXPECT_EQ(9, nla_u64(tb[GPUSLEEP_A_RESIDENT_GRAPH_BYTES]));
	EXPECT_EQ(11, nla_u64(tb[GPUSLEEP_A_RESIDENT_PROCESS_BYTES]));
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS,
		  nla_u32(tb[GPUSLEEP_A_RESIDENT_PROCESS_SOURCE]));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_IDLE_NS]);
	/* The report's per-tag nests, beside the declaration's. */
	for (i = 0; (a = nth_attr((void *)out, GPUSLEEP_A_TAG, i)); i++) {
		nl_parse(g, nla_data_(a), a->nla_len - NLA_HDRLEN);
		if (!g[GPUSLEEP_A_TAG_POLICY])
			continue;
		ASSERT_NE(NULL, g[GPUSLEEP_A_TAG_INDEX]);
		if (nla_u32(g[GPUSLEEP_A_TAG_INDEX]) != 0)
			continue;
		seen = 1;
		EXPECT_EQ(GPUSLEEP_POLICY_BACKUP,
			  nla_u32(g[GPUSLEEP_A_TAG_POLICY]));
		EXPECT_EQ(GPUSLEEP_CONTENT_KEPT,
			  nla_u32(g[GPUSLEEP_A_TAG_CONTENT]));
		EXPECT_EQ(64 << 20, nla_u64(g[GPUSLEEP_A_TAG_SIZE]));
		EXPECT_EQ(64 << 20, nla_u64(g[GPUSLEEP_A_TAG_MAPPED]));
		EXPECT_EQ(32 << 20, nla_u64(g[GPUSLEEP_A_TAG_HOST]));
	}
	EXPECT_TRUE(seen);
}

/* The next message of cmd on fd (others skipped): its attributes. */
static int recv_cmd(int fd, int cmd, char *buf, struct nlattr **tb)
{
	struct nlmsghdr *nh = (void *)buf;
	int n;

	for (;;) {
		n = nl_recv(fd, buf, NL_BUF);
		if (n < 0)
			return n;
		if (!NLMSG_OK(nh, n))
			return -EPROTO;
		if (((struct genlmsghdr *)NLMSG_DATA(nh))->cmd != cmd)
			continue;
		nl_parse_genl(tb, nh);
		return 0;
	}
}

static uint32_t arb_phase(struct nlattr **tb)
{
	return tb[GPUSLEEP_A_ARB_PHASE] ? nla_u32(tb[GPUSLEEP_A_ARB_PHASE]) :
					  0;
}

/*
 * A reclaim and its lease on the events group: the reclaim's start, its
 * victim, its end; the lease taken, each resume of its return, returned.
 */
TEST_F(nl, reclaim_and_lease_events)
{
	struct nlattr *tb[NL_MAX_ATTR], *v[NL_MAX_ATTR];
	struct gpusleep_reclaim r;
	char buf[NL_BUF];
	int lsn, lease;

	lsn = join_events(self->group);
	ASSERT_LE(0, lsn);
	ASSERT_EQ(0, nl_report(self->agent, 64 << 20, GPUSLEEP_POLICY_DISCARD));
	memset(&r, 0, sizeof(r));
	memcpy(r.gpu_uuid, nl_uuid, 16);
	r.bytes = 64 << 20;
	r.flags = GPUSLEEP_RECLAIMF_LEASE | GPUSLEEP_RECLAIMF_NONBLOCK;
	lease = gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r));
	ASSERT_LE(0, lease);
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    64 << 20));

	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_RECLAIM_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_START, arb_phase(tb));
	EXPECT_EQ(r.op_id, nla_u64(tb[GPUSLEEP_A_RECLAIM_ID]));
	EXPECT_EQ(64 << 20, nla_u64(tb[GPUSLEEP_A_BYTES]));
	EXPECT_EQ(r.lease_id, nla_u64(tb[GPUSLEEP_A_LEASE_ID]));
	EXPECT_EQ(0, memcmp(nla_data_(tb[GPUSLEEP_A_GPU_UUID]), nl_uuid, 16));
	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_RECLAIM_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_VICTIM, arb_phase(tb));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_VICTIM]);
	nl_parse(v, nla_data_(tb[GPUSLEEP_A_VICTIM]),
		 tb[GPUSLEEP_A_VICTIM]->nla_len - NLA_HDRLEN);
	EXPECT_EQ(self->id, nla_u32(v[GPUSLEEP_A_VICTIM_DOMAIN]));
	EXPECT_EQ(W, nla_u32(v[GPUSLEEP_A_VICTIM_TAGS]));
	EXPECT_EQ(0, nla_u32(v[GPUSLEEP_A_VICTIM_ERROR]));
	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_RECLAIM_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_END, arb_phase(tb));
	EXPECT_EQ(0, nla_u32(tb[GPUSLEEP_A_REASON]));
	EXPECT_EQ(64 << 20, nla_u64(tb[GPUSLEEP_A_TAKEN_BYTES]));
	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_LEASE_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_TAKEN, arb_phase(tb));
	EXPECT_EQ(r.lease_id, nla_u64(tb[GPUSLEEP_A_LEASE_ID]));

	close(lease);
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    64 << 20));
	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_LEASE_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_RESUME, arb_phase(tb));
	ASSERT_NE(NULL, tb[GPUSLEEP_A_VICTIM]);
	nl_parse(v, nla_data_(tb[GPUSLEEP_A_VICTIM]),
		 tb[GPUSLEEP_A_VICTIM]->nla_len - NLA_HDRLEN);
	EXPECT_TRUE(nla_u32(v[GPUSLEEP_A_VICTIM_FLAGS]) &
		    GPUSLEEP_RVF_RETURNED);
	ASSERT_EQ(0, recv_cmd(lsn, GPUSLEEP_CMD_LEASE_NTF, buf, tb));
	EXPECT_EQ(GPUSLEEP_ARB_RETURNED, arb_phase(tb));
	EXPECT_EQ(0, nla_u32(tb[GPUSLEEP_A_STILL_RELEASED]));
	close(lsn);
}

/*
 * Nothing of a reclaim reaches a listener in another network namespace:
 * notifications go out in the order they were made, so a state change
 * made there after the reclaim ended comes first to it.
 */
TEST_F(nl, reclaim_events_stay_in_the_claimants_namespace)
{
	struct gpusleep_reclaim r;
	int sv[2];
	char ok;
	pid_t c;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		struct nlattr *tb[NL_MAX_ATTR];
		struct gpusleep_op op;
		struct nlmsghdr *nh;
		char buf[NL_BUF];
		uint16_t family;
		uint32_t group, id;
		int lsn, sk, e, a, n;

		if (unshare(CLONE_NEWNET))
			_exit(20);
		sk = nl_open();
		if (sk < 0 || nl_resolve(sk, &family, &group))
			_exit(21);
		lsn = join_events(group);
		if (lsn < 0 || write(sv[1], "j", 1) != 1)
			_exit(22);
		if (read(sv[1], buf, 1) != 1)	/* the reclaim ended */
			_exit(23);
		e = gs_create(self->dev, "netns-r", 0, &id);
		a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
		if (e < 0 || a < 0 || gs_release(e, W, NB, &op))
			_exit(24);
		for (;;) {
			n = nl_recv(lsn, buf, NL_BUF);
			nh = (void *)buf;
			if (n < 0 || !NLMSG_OK(nh, n))
				_exit(25);
			if (((struct genlmsghdr *)NLMSG_DATA(nh))->cmd ==
			    GPUSLEEP_CMD_RECLAIM_NTF)
				_exit(26);
			nl_parse_genl(tb, nh);
			if (tb[GPUSLEEP_A_ID] &&
			    nla_u32(tb[GPUSLEEP_A_ID]) == id)
				_exit(0);
		}
	}
	ASSERT_EQ(1, read(sv[0], &ok, 1));
	memset(&r, 0, sizeof(r));
	memcpy(r.gpu_uuid, nl_uuid, 16);
	r.bytes = 64 << 20;
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r)));
	ASSERT_EQ(1, write(sv[0], "d", 1));
	EXPECT_EQ(0, gs_reap(c));
	close(sv[0]);
	close(sv[1]);
}

TEST_HARNESS_MAIN
