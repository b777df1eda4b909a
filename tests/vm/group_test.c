// SPDX-License-Identifier: GPL-2.0
/*
 * Groups of domains (docs/groups.md): one release/resume over every rank,
 * all or nothing. The test plays every rank's engine and agent itself
 * (pump()), so it sees every record in the order the ranks read them, and
 * can hold an answer back, fail it, or kill a rank's engine or agent in
 * the middle. One test per failure: a rank refusing, timing out, its
 * engine or its agent killed, a rank in two groups, a rank destroyed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "gs_test.h"
#include "gs_nl.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK
#define GO	GPUSLEEP_EVF_MAY_SCHEDULE
#define MAXR	8
#define NOR	GPUSLEEP_GROUP_NO_RANK
#define CAPS	(GPUSLEEP_CAP_PREFIX_CACHING | GPUSLEEP_CAP_PREFIX_CACHE_RESET)
#define LOGN	1024

/* What a rank does with a record: answer (default), hold it, fail it. */
struct script {
	uint32_t hold;
	uint32_t fail;
	int status;
};

struct logent {
	int rank;
	uint32_t type;
	uint32_t flags;
};

FIXTURE(g) {
	int dev, n, grp;
	int eng[MAXR], agent[MAXR];
	uint32_t id[MAXR];
	struct script sc[MAXR];
	struct gpusleep_event held[MAXR];	/* the record held back */
	int has_held[MAXR];
	struct logent log[LOGN];
	int nlog;
	char name[32];
};

static int mkgroup(int dev, const char *name)
{
	struct gpusleep_group_create c;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	return gs_err(ioctl(dev, GPUSLEEP_IOC_CREATE_GROUP, &c));
}

static int addrank(int grp, int fd, uint32_t *rank)
{
	struct gpusleep_group_add a;
	int r;

	memset(&a, 0, sizeof(a));
	a.fd = fd;
	r = gs_err(ioctl(grp, GPUSLEEP_IOC_GROUP_ADD, &a));
	if (rank)
		*rank = a.rank;
	return r;
}

static int gop(int grp, unsigned long cmd, uint32_t tags, uint32_t flags,
	       uint32_t ms, struct gpusleep_group_op *out)
{
	struct gpusleep_group_op o;
	int r;

	memset(&o, 0, sizeof(o));
	o.tags = tags;
	o.flags = flags;
	o.timeout_ms = ms;
	r = gs_err(ioctl(grp, cmd, &o));
	if (out)
		*out = o;
	return r;
}

static int gwait(int grp, uint64_t id, uint32_t ms,
		 struct gpusleep_group_result *res,
		 struct gpusleep_group_rank *ranks, uint32_t n)
{
	struct gpusleep_group_wait w;
	int r;

	memset(&w, 0, sizeof(w));
	w.op_id = id;
	w.timeout_ms = ms;
	w.ranks = (uintptr_t)ranks;
	w.nr_ranks = ranks ? n : 0;
	w.rank_size = sizeof(*ranks);
	r = gs_err(ioctl(grp, GPUSLEEP_IOC_GROUP_WAIT, &w));
	if (res)
		*res = w.result;
	return r;
}

/* Ranks self->n..n-1: a domain each, with its agent. */
static void add_ranks(struct __test_metadata *_metadata,
		      FIXTURE_DATA(g) *self, int n)
{
	char nm[32];
	int i;

	for (i = self->n; i < n; i++) {
		snprintf(nm, sizeof(nm), "grank%d", i);
		self->eng[i] = gs_create(self->dev, nm, CAPS, &self->id[i]);
		ASSERT_LE(0, self->eng[i]);
		self->agent[i] = gs_attach(self->dev, self->id[i],
					   GPUSLEEP_ROLE_AGENT);
		ASSERT_LE(0, self->agent[i]);
		ASSERT_EQ(0, addrank(self->grp, self->eng[i], NULL));
		self->n = i + 1;
	}
}

FIXTURE_SETUP(g)
{
	memset(self->eng, 0xff, sizeof(self->eng));
	memset(self->agent, 0xff, sizeof(self->agent));
	self->grp = -1;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	snprintf(self->name, sizeof(self->name), "tp%d", getpid());
	self->grp = mkgroup(self->dev, self->name);
	ASSERT_LE(0, self->grp);
	add_ranks(_metadata, self, 3);
}

FIXTURE_TEARDOWN(g)
{
	int i;

	if (self->dev < 0)
		return;
	if (self->grp >= 0)
		close(self->grp);
	for (i = 0; i < MAXR; i++) {
		if (self->agent[i] >= 0)
			close(self->agent[i]);
		if (self->eng[i] >= 0)
			close(self->eng[i]);
	}
	close(self->dev);
}

static void logit(FIXTURE_DATA(g) *self, int rank,
		  const struct gpusleep_event *ev)
{
	if (self->nlog < LOGN) {
		self->log[self->nlog].rank = rank;
		self->log[self->nlog].type = ev->type;
		self->log[self->nlog].flags = ev->flags;
		self->nlog++;
	}
}

/* Read and handle what one fd has; 1 if it had a record. */
static int pump_fd(FIXTURE_DATA(g) *self, int rank, int fd)
{
	struct script *sc = &self->sc[rank];
	struct gpusleep_event ev;

	if (fd < 0 || gs_next(fd, &ev, 0))
		return 0;
	logit(self, rank, &ev);
	if (!gs_needs_answer(ev.type))
		return 1;
	if (sc->hold && ev.type == sc->hold) {
		self->held[rank] = ev;
		self->has_held[rank] = 1;
		return 1;
	}
	if (sc->fail && ev.type == sc->fail)
		gs_answer(fd, &ev, sc->status, 0);
	else
		gs_answer(fd, &ev, 0, GS_TAG_BYTES(ev.tags));
	return 1;
}

/* Play every engine and agent until nothing comes for quiet_ms. */
static void pump(FIXTURE_DATA(g) *self, int quiet_ms)
{
	struct pollfd p[2 * MAXR];
	int i, n, r;

	for (;;) {
		n = 0;
		for (i = 0; i < self->n; i++) {
			p[n].fd = self->eng[i];
			p[n++].events = POLLIN;
			p[n].fd = self->agent[i];
			p[n++].events = POLLIN;
		}
		r = poll(p, n, quiet_ms);
		if (r <= 0)
			return;
		r = 0;
		for (i = 0; i < self->n; i++) {
			r += pump_fd(self, i, self->eng[i]);
			r += pump_fd(self, i, self->agent[i]);
		}
		if (!r)	/* only hang-ups left */
			return;
	}
}

static int engine_type(uint32_t type)
{
	return type == GPUSLEEP_EV_DRAIN || type == GPUSLEEP_EV_RESET_CACHES ||
	       type == GPUSLEEP_EV_REPAIR_KV;
}

/* Answer the record rank holds back (success). */
static int release_held(FIXTURE_DATA(g) *self, int rank)
{
	struct gpusleep_event *ev = &self->held[rank];
	int fd = engine_type(ev->type) ? self->eng[rank] :
					       self->agent[rank];

	self->has_held[rank] = 0;
	self->sc[rank].hold = 0;
	return gs_answer(fd, ev, 0, GS_TAG_BYTES(ev->tags));
}

/* Position of the first record of type in the log (any rank), or -1. */
static int first_of(FIXTURE_DATA(g) *self, uint32_t type)
{
	int i;

	for (i = 0; i < self->nlog; i++)
		if (self->log[i].type == type)
			return i;
	return -1;
}

static int last_of(FIXTURE_DATA(g) *self, uint32_t type)
{
	int i;

	for (i = self->nlog - 1; i >= 0; i--)
		if (self->log[i].type == type)
			return i;
	return -1;
}

static int count_of(FIXTURE_DATA(g) *self, int rank, uint32_t type)
{
	int i, c = 0;

	for (i = 0; i < self->nlog; i++)
		if (self->log[i].type == type &&
		    (rank < 0 || self->log[i].rank == rank))
			c++;
	return c;
}

/* The newest record rank's engine read lets it schedule. */
static int may_schedule(FIXTURE_DATA(g) *self, int rank)
{
	int i;

	for (i = self->nlog - 1; i >= 0; i--)
		if (self->log[i].rank == rank &&
		    (self->log[i].type <= GPUSLEEP_EV_RESUME_SCHED))
			return !!(self->log[i].flags & GO);
	return 1;
}

static void expect_awake(struct __test_metadata *_metadata,
			 FIXTURE_DATA(g) *self, int rank)
{
	struct gpusleep_state st;

	ASSERT_EQ(0, gs_state(self->eng[rank], &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.flags & (GPUSLEEP_SF_SCHED_PAUSED |
				 GPUSLEEP_SF_OP_IN_FLIGHT |
				 GPUSLEEP_SF_GROUP_HELD));
	EXPECT_TRUE(may_schedule(self, rank));
}

/* Run a started group op to its end, playing every rank. */
static int drive(FIXTURE_DATA(g) *self, uint64_t id,
		 struct gpusleep_group_result *res,
		 struct gpusleep_group_rank *ranks)
{
	int i, r;

	for (i = 0; i < 400; i++) {
		pump(self, 20);
		r = gwait(self->grp, id, 10, res, ranks, MAXR);
		if (r != -ETIMEDOUT)
			return r;
	}
	return -ETIMEDOUT;
}

TEST_F(g, release_resume_one_op)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct gpusleep_state st;
	int i;

	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, NB, 0, &o));
	ASSERT_NE(0, o.op_id);
	EXPECT_EQ(NOR, o.rank);
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(NOR, res.rank);
	EXPECT_EQ(3, res.nr_ranks);
	/* No rank unmapped anything before every rank had drained. */
	EXPECT_EQ(3, count_of(self, -1, GPUSLEEP_EV_DRAIN));
	EXPECT_LT(last_of(self, GPUSLEEP_EV_DRAIN),
		  first_of(self, GPUSLEEP_EV_RESET_CACHES));
	EXPECT_LT(last_of(self, GPUSLEEP_EV_DRAIN),
		  first_of(self, GPUSLEEP_EV_PAUSE_TAG));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(self->id[i], rk[i].domain);
		EXPECT_EQ(GPUSLEEP_GRF_DONE, rk[i].flags);
		EXPECT_EQ(ALL, rk[i].released);
		EXPECT_NE(0, rk[i].op_id);
		ASSERT_EQ(0, gs_state(self->eng[i], &st));
		EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
		EXPECT_EQ(ALL, st.released);
	}
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(0, res.error);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(GPUSLEEP_GRF_DONE, rk[i].flags);
		EXPECT_EQ(0, rk[i].released);
		expect_awake(_metadata, self, i);
	}
	EXPECT_EQ(3, count_of(self, -1, GPUSLEEP_EV_REPAIR_KV));
}

/* The caller's flags and tags reach every rank's DRAIN unchanged. */
TEST_F(g, abort_inflight_reaches_every_rank)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i, n = 0;

	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, KV,
			 NB | GPUSLEEP_OPF_ABORT_INFLIGHT, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(KV, res.tags);
	for (i = 0; i < self->nlog; i++) {
		if (self->log[i].type != GPUSLEEP_EV_DRAIN)
			continue;
		EXPECT_TRUE(self->log[i].flags & GPUSLEEP_EVF_ABORT_INFLIGHT);
		n++;
	}
	EXPECT_EQ(3, n);
	EXPECT_EQ(3, count_of(self, -1, GPUSLEEP_EV_PAUSE_TAG));
}

/* The drain gate: ranks that drained wait, unmapping nothing. */
TEST_F(g, no_unmap_before_every_rank_drained)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct gpusleep_state st;
	int i;

	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 200);
	EXPECT_EQ(-1, first_of(self, GPUSLEEP_EV_PAUSE_TAG));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, gs_state(self->eng[i], &st));
		EXPECT_EQ(GPUSLEEP_S_DRAINING, st.state);
		EXPECT_TRUE(st.flags & GPUSLEEP_SF_GROUP_HELD);
		EXPECT_EQ(0, st.released);
	}
	EXPECT_EQ(-ETIMEDOUT, gwait(self->grp, o.op_id, 50, &res, NULL, 0));
	ASSERT_TRUE(self->has_held[2]);
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(3, count_of(self, -1, GPUSLEEP_EV_PAUSE_TAG));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, gs_state(self->eng[i], &st));
		EXPECT_EQ(W, st.released);
	}
}

/* A rank refusing: nothing changes on any rank, the rank is named. */
TEST_F(g, refused_already_released)
{
	struct gpusleep_group_op o;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->eng[1], W, NB, &op));
	pump(self, 50);
	ASSERT_EQ(-EALREADY, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, 0,
				 0, &o));
	EXPECT_EQ(GPUSLEEP_R_ALREADY_RELEASED, o.reason);
	EXPECT_EQ(1, o.rank);
	EXPECT_EQ(self->id[1], o.domain);
	EXPECT_EQ(W, o.bad_tags);
	EXPECT_EQ(0, o.op_id);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 2);
	/* Checked before any rank started: no DRAIN reached rank 0. */
	EXPECT_EQ(0, count_of(self, 0, GPUSLEEP_EV_DRAIN));
}

TEST_F(g, refused_kv_not_allowed)
{
	struct gpusleep_group_op o;
	uint32_t id;
	int e;

	e = gs_create(self->dev, "grank-nokv", GPUSLEEP_CAP_PREFIX_CACHING,
		      &id);
	ASSERT_LE(0, e);
	self->eng[3] = e;
	self->agent[3] = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent[3]);
	ASSERT_EQ(0, addrank(self->grp, e, NULL));
	self->n = 4;
	ASSERT_EQ(-EOPNOTSUPP, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, 0,
				   0, &o));
	EXPECT_EQ(GPUSLEEP_R_KV_NOT_ALLOWED, o.reason);
	EXPECT_EQ(3, o.rank);
	EXPECT_EQ(id, o.domain);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	/* Weights alone are fine for every rank. */
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, NULL, NULL));
}

TEST_F(g, refused_no_agent)
{
	struct gpusleep_group_op o;

	close(self->agent[2]);
	self->agent[2] = -1;
	ASSERT_EQ(-ENOTCONN, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, 0,
				 0, &o));
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, o.reason);
	EXPECT_EQ(2, o.rank);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 1);
}

/* A rank's agent fails its unmap: every other rank is resumed. */
/*
 * Rank 1's unmap fails after ranks 0 and 2 unmapped: both are resumed.
 * Rank 1's step is held until the others have answered theirs, so the
 * order does not depend on which record the pump happens to read first.
 */
TEST_F(g, rank_fails_all_rolled_back)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i;

	self->sc[1].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	for (i = 0; i < 200 && !(self->has_held[1] &&
				 count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG) &&
				 count_of(self, 2, GPUSLEEP_EV_PAUSE_TAG)); i++)
		pump(self, 20);
	ASSERT_TRUE(self->has_held[1]);
	EXPECT_EQ(1, count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG));
	EXPECT_EQ(1, count_of(self, 2, GPUSLEEP_EV_PAUSE_TAG));
	self->has_held[1] = 0;
	self->sc[1].hold = 0;
	ASSERT_EQ(0, gs_answer(self->agent[1], &self->held[1], -EIO, 0));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(-EIO, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, res.reason);
	EXPECT_EQ(1, res.rank);
	EXPECT_EQ(self->id[1], res.domain);
	EXPECT_TRUE(rk[1].flags & GPUSLEEP_GRF_FAILED);
	for (i = 0; i < 3; i += 2) {
		EXPECT_EQ(GPUSLEEP_GRF_DONE | GPUSLEEP_GRF_ROLLED_BACK,
			  rk[i].flags);
		EXPECT_NE(0, rk[i].rollback_op_id);
	}
	pump(self, 50);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, rk[i].released);
		expect_awake(_metadata, self, i);
	}
	EXPECT_EQ(2, count_of(self, -1, GPUSLEEP_EV_RESUME_TAG));
}

/*
 * Rank 1's unmap fails while rank 2's unmap step is still unread: that
 * step is taken back (nothing of it was done), rank 2's release ends
 * cancelled with nothing to resume; rank 0, which unmapped, is resumed.
 */
TEST_F(g, rank_fails_unread_step_taken_back)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int fd2 = self->agent[2];
	int i;

	self->sc[1].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	/* Rank 2's agent reads nothing until rank 1 has failed. */
	self->agent[2] = -1;
	for (i = 0; i < 200 && !(self->has_held[1] &&
				 count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG)); i++)
		pump(self, 20);
	ASSERT_TRUE(self->has_held[1]);
	self->has_held[1] = 0;
	self->sc[1].hold = 0;
	ASSERT_EQ(0, gs_answer(self->agent[1], &self->held[1], -EIO, 0));
	/* Ends without rank 2 reading its step: it was taken back. */
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	self->agent[2] = fd2;
	EXPECT_EQ(-EIO, res.error);
	EXPECT_EQ(1, res.rank);
	EXPECT_EQ(0, count_of(self, 2, GPUSLEEP_EV_PAUSE_TAG));
	EXPECT_EQ(GPUSLEEP_GRF_CANCELLED, rk[2].flags);
	EXPECT_EQ(GPUSLEEP_R_CANCELLED, rk[2].reason);
	EXPECT_EQ(0, rk[2].rollback_op_id);
	EXPECT_EQ(GPUSLEEP_GRF_DONE | GPUSLEEP_GRF_ROLLED_BACK, rk[0].flags);
	pump(self, 50);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, rk[i].released);
		expect_awake(_metadata, self, i);
	}
	EXPECT_EQ(1, count_of(self, -1, GPUSLEEP_EV_RESUME_TAG));
	EXPECT_EQ(1, count_of(self, 0, GPUSLEEP_EV_RESUME_TAG));
}

/* The blocking ioctl waits for every rank and returns the rank's errno. */
static void *pump_thread(void *arg)
{
	FIXTURE_DATA(g) *self = arg;

	pump(self, 500);
	return NULL;
}

TEST_F(g, blocking_release_and_failure)
{
	struct gpusleep_group_op o;
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, pump_thread, self));
	EXPECT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, 0, 0, &o));
	EXPECT_EQ(NOR, o.rank);
	pthread_join(t, NULL);
	self->sc[0].fail = GPUSLEEP_EV_RESUME_TAG;
	self->sc[0].status = -ENOMEM;
	ASSERT_EQ(0, pthread_create(&t, NULL, pump_thread, self));
	EXPECT_EQ(-EREMOTEIO, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, 0,
				  0, &o));
	EXPECT_EQ(0, o.rank);
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, o.reason);
	pthread_join(t, NULL);
	/* A failed resume leaves the rank truthfully released: retry. */
	self->sc[0].fail = 0;
	ASSERT_EQ(0, pthread_create(&t, NULL, pump_thread, self));
	EXPECT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, 0, 0, &o));
	pthread_join(t, NULL);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 1);
}

/* One rank never drains: the group's deadline fails and cancels all. */
TEST_F(g, rank_times_out)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i;

	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, NB, 300,
			 &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_R_DRAIN_TIMEOUT, res.reason);
	EXPECT_EQ(2, res.rank);
	EXPECT_GE(res.duration_ns, 300000000ULL);
	EXPECT_EQ(-1, first_of(self, GPUSLEEP_EV_PAUSE_TAG));
	EXPECT_EQ(-1, first_of(self, GPUSLEEP_EV_RESET_CACHES));
	for (i = 0; i < 2; i++)
		EXPECT_TRUE(rk[i].flags & GPUSLEEP_GRF_CANCELLED);
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
	EXPECT_EQ(2, count_of(self, -1, GPUSLEEP_EV_DRAIN_CANCELLED) -
		  count_of(self, 2, GPUSLEEP_EV_DRAIN_CANCELLED));
}

/*
 * The group's deadline and the late rank's own drain timeout come due
 * together (the same timeout_ms, counted from nearly the same moment), so
 * the group's look at its ranks and that rank's own timeout race on the
 * VM's two CPUs. Whichever comes first, the group names what failed
 * first: rank 0, which never drained, for drain_timeout, never for a step
 * it was not in. Many short rounds; no timed assertion.
 */
TEST_F_TIMEOUT(g, late_rank_named_with_its_own_reason, 240)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i, wrong = 0;

	for (i = 0; i < 200; i++) {
		self->nlog = 0;		/* each round's records only */
		self->sc[0].hold = GPUSLEEP_EV_DRAIN;
		ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB,
				 10 + i % 5, &o));
		pump(self, 2);		/* ranks 1 and 2 drain, or not */
		ASSERT_EQ(0, gwait(self->grp, o.op_id, GS_WAIT_MS, &res, rk,
				   MAXR));
		self->sc[0].hold = 0;
		pump(self, 1);
		ASSERT_EQ(-ETIMEDOUT, res.error);
		ASSERT_EQ(0, res.flags & GPUSLEEP_GROUP_RF_SETTLING);
		EXPECT_TRUE(rk[0].flags & GPUSLEEP_GRF_FAILED);
		if (res.rank != 0 || res.reason != GPUSLEEP_R_DRAIN_TIMEOUT) {
			TH_LOG("round %d: rank %u, reason %u (rank 0: %u)", i,
			       res.rank, res.reason, rk[0].reason);
			wrong++;
		}
	}
	EXPECT_EQ(0, wrong);
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/*
 * No deadline ends before its time, measured as the kernel measures
 * (CLOCK_MONOTONIC, ktime): the group's deadline, a rank's step timeout,
 * the timeouts of GROUP_WAIT and WAIT. Short deadlines, many times: a
 * timer that may fire a tick early is caught in a few rounds.
 */
TEST_F_TIMEOUT(g, deadlines_never_early, 240)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct gpusleep_result r;
	struct gpusleep_op op;
	uint32_t ms;
	uint64_t t0;
	int i;

	add_ranks(_metadata, self, MAXR);
	for (i = 0; i < 16; i++) {
		ms = 5 + i % 7;
		/*
		 * The group's deadline, rank 0 never drains: its step timer
		 * is the first armed, the group's deadline counts from before.
		 */
		self->sc[0].hold = GPUSLEEP_EV_DRAIN;
		ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB,
				 ms, &o));
		ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
		/* Any rank may be late under load: each step times out. */
		EXPECT_EQ(-ETIMEDOUT, res.error);
		EXPECT_GE(res.duration_ns, ms * 1000000ULL);
		self->sc[0].hold = 0;
		/* One domain's step timeout: its DRAIN is never answered. */
		pump(self, 1);
		ASSERT_EQ(0, gs_start(self->eng[1], GPUSLEEP_IOC_RELEASE, W, ms,
				      &op));
		ASSERT_EQ(-ETIMEDOUT, gs_finish(self->eng[1], op.op_id, &r));
		EXPECT_GE(r.duration_ns, ms * 1000000ULL);
	}
	/* The timeouts of the blocking waits, on operations that go on. */
	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 20);
	for (i = 0; i < 16; i++) {
		ms = 3 + i % 7;
		t0 = gs_mono_ns();
		ASSERT_EQ(-ETIMEDOUT, gwait(self->grp, o.op_id, ms, &res,
					    NULL, 0));
		EXPECT_GE(gs_mono_ns() - t0, ms * 1000000ULL);
	}
	/* A resume of rank 0 cancels it, and so the group's operation. */
	ASSERT_EQ(0, gs_start(self->eng[0], GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(-ECANCELED, res.error);
	ASSERT_EQ(0, gs_start(self->eng[0], GPUSLEEP_IOC_RELEASE, W, 0, &op));
	for (i = 0; i < 16; i++) {
		ms = 3 + i % 7;
		t0 = gs_mono_ns();
		ASSERT_EQ(-ETIMEDOUT, gs_wait(self->eng[0], op.op_id, ms, &r));
		EXPECT_GE(gs_mono_ns() - t0, ms * 1000000ULL);
	}
	ASSERT_EQ(0, gs_start(self->eng[0], GPUSLEEP_IOC_RESUME, 0, 0, &op));
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/*
 * Blocking calls interrupted by stop signals and SA_RESTART handlers: a
 * child process (with one or two threads) blocks, the test stops and
 * continues it while it plays every rank, and the child reports through
 * shared memory what its calls returned. An interrupted release returns
 * -EINTR with its op id (never restarted): the child then waits for that
 * id, as libgpusleep's callers do.
 */
struct blocked {
	int ret[2];
	int eintr[2];		/* the call returned -EINTR first */
	uint32_t rank[2], reason[2];
	uint64_t id[2];		/* the operation the call was about */
	uint64_t ns[2];		/* how long the call took */
	volatile uint64_t started;	/* thread 0's operation, once known */
	int grp, fd;
	uint32_t wait_ms;
};

static struct blocked *blocked_new(void)
{
	void *p = mmap(NULL, sizeof(struct blocked), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, sizeof(struct blocked));
	return p;
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* A blocking GROUP_RELEASE of weights (then its GROUP_WAIT if need be). */
static void *blk_group_release(void *arg)
{
	struct blocked *b = arg;
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	uint64_t t0 = gs_mono_ns();
	int r;

	memset(&o, 0, sizeof(o));
	o.tags = W;
	r = gs_err(ioctl(b->grp, GPUSLEEP_IOC_GROUP_RELEASE, &o));
	b->id[0] = o.op_id;
	b->rank[0] = o.rank;
	b->reason[0] = o.reason;
	if (r == -EINTR && o.op_id) {
		b->eintr[0] = 1;
		do
			r = gwait(b->grp, o.op_id, 0, &res, NULL, 0);
		while (r == -EINTR);
		if (!r) {
			r = res.error;
			b->rank[0] = res.rank;
			b->reason[0] = res.reason;
		}
	}
	b->ns[0] = gs_mono_ns() - t0;
	b->ret[0] = r;
	return NULL;
}

/* A GROUP_WAIT (wait_ms, 0: none) for the operation thread 0 started. */
static void *blk_group_wait(void *arg)
{
	struct blocked *b = arg;
	struct gpusleep_group_result res;
	uint64_t t0;

	while (!b->started)
		usleep(1000);
	t0 = gs_mono_ns();
	b->ret[1] = gwait(b->grp, b->started, b->wait_ms, &res, NULL, 0);
	b->ns[1] = gs_mono_ns() - t0;
	b->id[1] = res.op_id;
	b->reason[1] = res.reason;
	b->rank[1] = res.rank;
	return NULL;
}

/* A blocking RELEASE of weights through a domain fd (then its WAIT). */
static void *blk_release(void *arg)
{
	struct blocked *b = arg;
	struct gpusleep_result res;
	struct gpusleep_op o;
	int r;

	r = gs_release(b->fd, W, 0, &o);
	b->id[0] = o.op_id;
	b->reason[0] = o.reason;
	if (r == -EINTR && o.op_id) {
		b->eintr[0] = 1;
		do
			r = gs_wait(b->fd, o.op_id, 0, &res);
		while (r == -EINTR);
		if (!r) {
			r = res.error;
			b->reason[0] = res.reason;
		}
	}
	b->ret[0] = r;
	return NULL;
}

/* A WAIT (no timeout) through the same fd for thread 0's operation. */
static void *blk_wait(void *arg)
{
	struct blocked *b = arg;
	struct gpusleep_state st;
	struct gpusleep_result r;

	do {
		usleep(1000);
		if (gs_state(b->fd, &st))
			return NULL;
	} while (!st.op_in_flight);
	b->ret[1] = gs_wait(b->fd, st.op_in_flight, 0, &r);
	b->id[1] = r.op_id;
	b->reason[1] = r.reason;
	return NULL;
}

/* In a child: run fn0 (and fn1) in threads, exit once they return. */
static pid_t blocked_spawn(struct blocked *b, void *(*fn0)(void *),
			   void *(*fn1)(void *))
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	pthread_t t[2];
	pid_t pid = fork();

	if (pid)
		return pid;
	sigaction(SIGUSR1, &sa, NULL);
	b->ret[0] = b->ret[1] = 1;	/* still blocked */
	pthread_create(&t[0], NULL, fn0, b);
	if (fn1)
		pthread_create(&t[1], NULL, fn1, b);
	/* SIGUSR1 goes to a blocked thread, not to this one. */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &sa.sa_mask, NULL);
	pthread_join(t[0], NULL);
	if (fn1)
		pthread_join(t[1], NULL);
	_exit(0);
}

/* Stop and continue pid (every thread), and interrupt it with SIGUSR1. */
static void stop_cont(pid_t pid, int usr1)
{
	int st;

	kill(pid, SIGSTOP);
	waitpid(pid, &st, WUNTRACED);
	usleep(20000);
	kill(pid, SIGCONT);
	usleep(20000);
	if (usr1) {
		kill(pid, SIGUSR1);
		usleep(20000);
	}
}

/* Play every rank until pid exits; its exit status, or -1. */
static int pump_until_exit(FIXTURE_DATA(g) *self, pid_t pid)
{
	int i, st;

	for (i = 0; i < 500; i++) {
		pump(self, 20);
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/*
 * A blocking GROUP_RELEASE stopped and continued, and interrupted by an
 * SA_RESTART handler, is not restarted (that would start a second
 * operation): -EINTR with its op id, whose GROUP_WAIT then gives its own
 * result; one operation.
 */
TEST_F(g, blocking_group_release_interrupted_returns_eintr)
{
	struct gpusleep_group_result res;
	struct blocked *b = blocked_new();
	pid_t pid;
	int k;

	ASSERT_NE(NULL, b);
	b->grp = self->grp;
	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	pid = blocked_spawn(b, blk_group_release, NULL);
	ASSERT_LE(0, pid);
	pump(self, 200);
	ASSERT_TRUE(self->has_held[2]);
	for (k = 0; k < 3; k++) {
		stop_cont(pid, 1);
		pump(self, 10);
	}
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, pump_until_exit(self, pid));
	EXPECT_EQ(1, b->eintr[0]);
	EXPECT_EQ(0, b->ret[0]);
	EXPECT_EQ(NOR, b->rank[0]);
	ASSERT_EQ(0, gwait(self->grp, 0, 1000, &res, NULL, 0));
	EXPECT_EQ(b->id[0], res.op_id);
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(3, count_of(self, -1, GPUSLEEP_EV_DRAIN));
	munmap(b, sizeof(*b));
}

/*
 * A GROUP_WAIT with a timeout is not restarted after a stop signal (its
 * timeout would start again): -EINTR, with result.op_id the operation it
 * waited for; the caller goes on to its own deadline.
 */
TEST_F(g, group_wait_with_timeout_not_restarted)
{
	struct gpusleep_group_op o;
	struct blocked *b = blocked_new();
	pid_t pid;
	int st, k;

	ASSERT_NE(NULL, b);
	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 50);
	b->grp = self->grp;
	b->started = o.op_id;
	b->wait_ms = 60000;
	pid = blocked_spawn(b, blk_group_wait, NULL);
	ASSERT_LE(0, pid);
	for (k = 0; k < 200 && waitpid(pid, &st, WNOHANG) != pid; k++)
		stop_cont(pid, 0);
	EXPECT_EQ(-EINTR, b->ret[1]);
	EXPECT_EQ(o.op_id, b->id[1]);
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, drive(self, o.op_id, NULL, NULL));
	munmap(b, sizeof(*b));
}

/*
 * GROUP_WAIT for the newest operation (op_id 0), interrupted by a handler
 * without SA_RESTART: -EINTR with result.op_id written. A new GROUP_WAIT for the
 * newest, once a second operation is in flight, waits for that one, not
 * for the interrupted call's older, finished operation.
 */
TEST_F(g, group_wait_for_the_newest_after_eintr)
{
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	struct gpusleep_group_op a, b;
	int rep[2], go[2], st;
	unsigned char t = 1;
	uint64_t written;
	pid_t pid;

	ASSERT_EQ(0, pipe(rep));
	ASSERT_EQ(0, pipe(go));
	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &a));
	pump(self, 50);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct gpusleep_group_wait w;
		ssize_t n;

		memset(&w, 0, sizeof(w));	/* op_id 0: the newest */
		if (ioctl(self->grp, GPUSLEEP_IOC_GROUP_WAIT, &w) != -1 ||
		    errno != EINTR)
			_exit(10);
		if (write(rep[1], &w.result.op_id, sizeof(w.result.op_id)) !=
		    sizeof(w.result.op_id))
			_exit(11);
		do
			n = read(go[0], &t, 1);
		while (n < 0 && errno == EINTR);
		memset(&w, 0, sizeof(w));	/* a new call: the newest */
		w.timeout_ms = 300;
		if (ioctl(self->grp, GPUSLEEP_IOC_GROUP_WAIT, &w) == 0)
			_exit(w.result.op_id == a.op_id ? 12 : 13);
		_exit(errno == ETIMEDOUT ? 0 : 14);
	}
	for (;;) {
		struct pollfd p = { .fd = rep[0], .events = POLLIN };

		kill(pid, SIGUSR1);
		if (poll(&p, 1, 50) == 1)
			break;
	}
	ASSERT_EQ(sizeof(written), read(rep[0], &written, sizeof(written)));
	EXPECT_EQ(a.op_id, written);
	/* Finish the release, then hold a resume in flight. */
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, drive(self, a.op_id, NULL, NULL));
	self->sc[2].hold = GPUSLEEP_EV_RESUME_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, W, NB, 0, &b));
	pump(self, 50);
	ASSERT_EQ(1, write(go[1], &t, 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	/* 12: the new call returned the interrupted call's older result. */
	EXPECT_EQ(0, WEXITSTATUS(st));
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, drive(self, b.op_id, NULL, NULL));
	close(rep[0]);
	close(rep[1]);
	close(go[0]);
	close(go[1]);
}

/*
 * Two threads blocked on one fd, the process stopped: the release returns
 * -EINTR and its thread waits by id, the wait by id restarts. The rank
 * given holds its DRAIN while the threads block; both must end with the same
 * operation's success, and no second operation may start.
 */
static void two_blocked(struct __test_metadata *_metadata,
			FIXTURE_DATA(g) *self, struct blocked *b,
			void *(*fn0)(void *), void *(*fn1)(void *), int rank)
{
	pid_t pid;
	int k;

	self->sc[rank].hold = GPUSLEEP_EV_DRAIN;
	pid = blocked_spawn(b, fn0, fn1);
	ASSERT_LE(0, pid);
	pump(self, 200);
	ASSERT_TRUE(self->has_held[rank]);
	/* The fixture's group is new: thread 0's operation is its first. */
	b->started = 1;
	usleep(100000);
	for (k = 0; k < 3; k++)
		stop_cont(pid, 0);
	ASSERT_EQ(0, release_held(self, rank));
	ASSERT_EQ(0, pump_until_exit(self, pid));
	EXPECT_EQ(0, b->ret[0]);
	EXPECT_EQ(0, b->ret[1]);
	EXPECT_EQ(b->id[0], b->id[1]);
	EXPECT_EQ(1, count_of(self, rank, GPUSLEEP_EV_DRAIN));
}

TEST_F(g, stopped_release_and_wait_on_one_group_fd)
{
	struct blocked *b = blocked_new();

	ASSERT_NE(NULL, b);
	b->grp = self->grp;
	two_blocked(_metadata, self, b, blk_group_release, blk_group_wait, 2);
	munmap(b, sizeof(*b));
}

TEST_F(g, stopped_release_and_wait_on_one_domain_fd)
{
	struct blocked *b = blocked_new();

	ASSERT_NE(NULL, b);
	b->fd = gs_attach(self->dev, self->id[0], GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, b->fd);
	two_blocked(_metadata, self, b, blk_release, blk_wait, 0);
	close(b->fd);
	munmap(b, sizeof(*b));
}

/*
 * Issue 35, defect 1. A blocking release interrupted by a handler without
 * SA_RESTART returns -EINTR with its op id; the caller waits for that id,
 * resumes, then issues the release again with the same struct, into which
 * the kernel wrote the id. op_id is output only: that is a new release,
 * which drains every engine again and returns a new id, never the old
 * operation's result.
 */
struct again {
	int ret;		/* the second call's */
	uint64_t first, second;	/* op ids */
};

/* In a child, with no SA_RESTART: call, -EINTR, wait, resume, call again. */
static int again_child(int fd, int grp, int rep)
{
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	struct gpusleep_group_op go;
	struct gpusleep_op op;
	struct again a = { 0 };
	sigset_t usr1;
	int r;

	sigaction(SIGUSR1, &sa, NULL);
	memset(&op, 0, sizeof(op));
	memset(&go, 0, sizeof(go));
	op.tags = W;
	go.tags = W;
	r = grp >= 0 ? ioctl(grp, GPUSLEEP_IOC_GROUP_RELEASE, &go) :
		       ioctl(fd, GPUSLEEP_IOC_RELEASE, &op);
	a.first = grp >= 0 ? go.op_id : op.op_id;
	if (r != -1 || errno != EINTR || !a.first)
		return 10;
	if (write(rep, &a.first, sizeof(a.first)) != sizeof(a.first))
		return 11;
	/* The rest is not interrupted: the test stops signalling. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	if (grp >= 0) {
		struct gpusleep_group_result res;

		if (gwait(grp, a.first, 0, &res, NULL, 0) || res.error)
			return 12;
		if (gop(grp, GPUSLEEP_IOC_GROUP_RESUME, W, 0, 0, NULL))
			return 13;
		a.ret = gs_err(ioctl(grp, GPUSLEEP_IOC_GROUP_RELEASE, &go));
		a.second = go.op_id;
	} else {
		struct gpusleep_result res;

		if (gs_wait(fd, a.first, 0, &res) || res.error)
			return 12;
		if (gs_resume(fd, W, 0, NULL))
			return 13;
		a.ret = gs_err(ioctl(fd, GPUSLEEP_IOC_RELEASE, &op));
		a.second = op.op_id;
	}
	return write(rep, &a, sizeof(a)) == sizeof(a) ? 0 : 14;
}

static void release_again(struct __test_metadata *_metadata,
			  FIXTURE_DATA(g) *self, int fd, int grp, int rank)
{
	int rep[2], before = count_of(self, -1, GPUSLEEP_EV_DRAIN);
	uint64_t first = 0;
	struct again a;
	pid_t pid;

	ASSERT_EQ(0, pipe(rep));
	self->sc[rank].hold = GPUSLEEP_EV_DRAIN;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(again_child(fd, grp, rep[1]));
	pump(self, 200);
	ASSERT_TRUE(self->has_held[rank]);
	for (;;) {
		struct pollfd p = { .fd = rep[0], .events = POLLIN };

		kill(pid, SIGUSR1);
		if (poll(&p, 1, 50) == 1)
			break;
	}
	ASSERT_EQ(sizeof(first), read(rep[0], &first, sizeof(first)));
	ASSERT_EQ(0, release_held(self, rank));
	/* 0: it waited, resumed and released again. */
	ASSERT_EQ(0, pump_until_exit(self, pid));
	ASSERT_EQ(sizeof(a), read(rep[0], &a, sizeof(a)));
	EXPECT_EQ(first, a.first);
	EXPECT_EQ(0, a.ret);
	/* A new operation, not the interrupted one's result again. */
	EXPECT_LT(first, a.second);
	/* Every engine it covers drained twice. */
	EXPECT_EQ(before + 2 * (grp >= 0 ? self->n : 1),
		  count_of(self, -1, GPUSLEEP_EV_DRAIN));
	close(rep[0]);
	close(rep[1]);
}

TEST_F(g, release_again_after_eintr_is_a_new_release)
{
	int fd = gs_attach(self->dev, self->id[0], GPUSLEEP_ROLE_CONTROLLER);

	ASSERT_LE(0, fd);
	release_again(_metadata, self, fd, -1, 0);
	close(fd);
}

TEST_F(g, group_release_again_after_eintr_is_a_new_release)
{
	release_again(_metadata, self, -1, self->grp, 2);
}

/*
 * Issue 35, defect 3. A blocking release and 64 waits on one fd are
 * interrupted together (each by an SA_RESTART handler, all in their
 * handlers at once, as a process-wide stop, the freezer or ptrace has
 * them), the release first. The release must not come back -EBUSY while
 * its own operation runs (nor start another): it returns -EINTR with its
 * op id, and every wait still gets the operation's result.
 */
#define BURST	64

struct burst {
	int fd, grp;
	struct gpusleep_op op;		/* the release's struct */
	struct gpusleep_group_op gop;
	volatile uint64_t id;		/* its op id, once written */
	int release_ret;
	int wait_ret[BURST];
	uint64_t wait_id[BURST];
	volatile pid_t tid[BURST + 1];
	volatile sig_atomic_t in_handler[BURST + 1];
	volatile sig_atomic_t go;
};

static struct burst *burst;
static __thread int burst_slot;

/* Stay in the handler until every call has been interrupted. */
static void on_burst(int sig)
{
	(void)sig;
	burst->in_handler[burst_slot] = 1;
	while (!burst->go)
		usleep(1000);
}

static void *burst_release(void *arg)
{
	(void)arg;
	burst_slot = BURST;
	burst->tid[BURST] = gettid();
	if (burst->grp >= 0) {
		burst->gop.tags = W;
		burst->release_ret = gs_err(ioctl(burst->grp,
						  GPUSLEEP_IOC_GROUP_RELEASE,
						  &burst->gop));
	} else {
		burst->op.tags = W;
		burst->release_ret = gs_err(ioctl(burst->fd,
						  GPUSLEEP_IOC_RELEASE,
						  &burst->op));
	}
	return NULL;
}

static void *burst_wait(void *arg)
{
	int i = (int)(intptr_t)arg;

	burst_slot = i;
	burst->tid[i] = gettid();
	if (burst->grp >= 0) {
		struct gpusleep_group_result res;

		burst->wait_ret[i] = gwait(burst->grp, burst->id, 0, &res,
					   NULL, 0);
		burst->wait_id[i] = res.op_id;
	} else {
		struct gpusleep_result res;

		burst->wait_ret[i] = gs_wait(burst->fd, burst->id, 0, &res);
		burst->wait_id[i] = res.op_id;
	}
	return NULL;
}

/* Is thread tid blocked in ioctl(2)? */
static int in_ioctl(pid_t tid)
{
	char path[64], buf[32] = "";
	int fd, n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && atoi(buf) == __NR_ioctl;
}

/* Interrupt the release, then each wait, then let them all go on. */
static int burst_child(void)
{
	struct sigaction sa = { .sa_handler = on_burst,
				.sa_flags = SA_RESTART };
	pthread_t t[BURST + 1];
	int i, k;

	sigaction(SIGUSR1, &sa, NULL);
	if (pthread_create(&t[BURST], NULL, burst_release, NULL))
		return 10;
	for (k = 0; !(burst->id = burst->grp >= 0 ? burst->gop.op_id :
						  burst->op.op_id); k++) {
		if (k > 20000)
			return 11;
		usleep(1000);
	}
	for (i = 0; i < BURST; i++)
		if (pthread_create(&t[i], NULL, burst_wait,
				   (void *)(intptr_t)i))
			return 12;
	for (i = 0; i <= BURST; i++) {
		for (k = 0; !burst->tid[i] || !in_ioctl(burst->tid[i]); k++) {
			if (k > 20000)
				return 13;
			usleep(1000);
		}
	}
	/* The release first: its call is the oldest one interrupted. */
	for (k = BURST; k >= 0; k--) {
		i = k == BURST ? BURST : BURST - 1 - k;
		pthread_kill(t[i], SIGUSR1);
		while (!burst->in_handler[i])
			usleep(1000);
	}
	burst->go = 1;
	pthread_join(t[BURST], NULL);
	for (i = 0; i < BURST; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static void burst_run(struct __test_metadata *_metadata,
		      FIXTURE_DATA(g) *self, int fd, int grp, int rank)
{
	int before = count_of(self, -1, GPUSLEEP_EV_DRAIN), i, st;
	pid_t pid;

	burst = mmap(NULL, sizeof(*burst), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, burst);
	memset(burst, 0, sizeof(*burst));
	burst->fd = fd;
	burst->grp = grp;
	burst->release_ret = 1;
	self->sc[rank].hold = GPUSLEEP_EV_DRAIN;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(burst_child());
	/* Held until every call was interrupted and went on. */
	for (i = 0; i < 2000 && burst->release_ret == 1; i++) {
		pump(self, 10);
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
	}
	ASSERT_TRUE(self->has_held[rank]);
	/* Not -EBUSY: its operation is still running. */
	EXPECT_EQ(-EINTR, burst->release_ret);
	EXPECT_NE(0, burst->id);
	ASSERT_EQ(0, release_held(self, rank));
	EXPECT_EQ(0, pump_until_exit(self, pid));
	for (i = 0; i < BURST; i++) {
		EXPECT_EQ(0, burst->wait_ret[i]);
		EXPECT_EQ(burst->id, burst->wait_id[i]);
	}
	/* One release, no second one. */
	EXPECT_EQ(before + (grp >= 0 ? self->n : 1),
		  count_of(self, -1, GPUSLEEP_EV_DRAIN));
	munmap(burst, sizeof(*burst));
}

TEST_F_TIMEOUT(g, release_interrupted_with_64_waits, 120)
{
	int fd = gs_attach(self->dev, self->id[0], GPUSLEEP_ROLE_CONTROLLER);

	ASSERT_LE(0, fd);
	burst_run(_metadata, self, fd, -1, 0);
	close(fd);
}

TEST_F_TIMEOUT(g, group_release_interrupted_with_64_group_waits, 120)
{
	burst_run(_metadata, self, -1, self->grp, 2);
}

/*
 * A GROUP_RELEASE stopped through the end of its operation and 6 more
 * (fewer than the 8 results a group remembers) returns -EINTR once
 * continued, and its GROUP_WAIT by id gives its own result.
 */
TEST_F_TIMEOUT(g, stopped_group_release_finds_its_result_by_id, 120)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct blocked *b = blocked_new();
	pid_t pid;
	int st, k;

	ASSERT_NE(NULL, b);
	b->grp = self->grp;
	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	self->sc[0].fail = GPUSLEEP_EV_PAUSE_TAG;
	self->sc[0].status = -EIO;
	pid = blocked_spawn(b, blk_group_release, NULL);
	ASSERT_LE(0, pid);
	pump(self, 200);
	ASSERT_TRUE(self->has_held[2]);
	kill(pid, SIGSTOP);
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	ASSERT_EQ(0, release_held(self, 2));
	ASSERT_EQ(0, drive(self, 0, &res, NULL));
	EXPECT_EQ(-EIO, res.error);
	self->sc[0].fail = 0;
	for (k = 0; k < 3; k++) {
		ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB,
				 0, &o));
		ASSERT_EQ(0, drive(self, o.op_id, NULL, NULL));
		ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB,
				 0, &o));
		ASSERT_EQ(0, drive(self, o.op_id, NULL, NULL));
	}
	kill(pid, SIGCONT);
	ASSERT_EQ(0, pump_until_exit(self, pid));
	EXPECT_EQ(1, b->eintr[0]);
	/* The result's error: the failing agent's own status. */
	EXPECT_EQ(-EIO, b->ret[0]);
	EXPECT_EQ(0, b->rank[0]);
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, b->reason[0]);
	munmap(b, sizeof(*b));
}

/*
 * Rank 0 reads its RESET_CACHES, holds it hold_ms, answers it, then holds
 * its first PAUSE_TAG (weights): the other ranks have released all.
 */
static void rank0_unmapping(struct __test_metadata *_metadata,
			    FIXTURE_DATA(g) *self, int hold_ms)
{
	self->sc[0].hold = GPUSLEEP_EV_RESET_CACHES;
	pump(self, 100);
	ASSERT_TRUE(self->has_held[0]);
	usleep(hold_ms * 1000);
	ASSERT_EQ(0, release_held(self, 0));
	self->sc[0].hold = GPUSLEEP_EV_PAUSE_TAG;
	pump(self, 100);
	ASSERT_TRUE(self->has_held[0]);
	ASSERT_EQ(GPUSLEEP_EV_PAUSE_TAG, self->held[0].type);
}

/* Play every rank until rank has read a RESUME_TAG (the rollback). */
static int pump_until_resume(FIXTURE_DATA(g) *self, int rank)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (count_of(self, rank, GPUSLEEP_EV_RESUME_TAG))
			return 0;
		pump(self, 10);
	}
	return -ETIMEDOUT;
}

/*
 * Once the group failed (its deadline passed while rank 0 unmaps), rank 0
 * gets no new unmap step: its PAUSE_TAG in progress ends, and it is
 * rolled back with the others.
 */
TEST_F(g, no_unmap_step_after_group_failed)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i;

	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, ALL, NB,
			 1000, &o));
	/* Its PAUSE_TAG starts 400 ms in: it times out 400 ms after. */
	rank0_unmapping(_metadata, self, 400);
	/* The deadline passes: the group fails, the others roll back. */
	ASSERT_EQ(0, pump_until_resume(self, 1));
	ASSERT_EQ(0, release_held(self, 0));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_TIMEOUT, res.reason);
	EXPECT_EQ(0, res.rank);
	EXPECT_EQ(1, count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG));
	pump(self, 50);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, rk[i].released);
		expect_awake(_metadata, self, i);
	}
}

/*
 * The group's last fd closes while rank 0 unmaps and the others have
 * released: the kernel rolls every rank back itself.
 */
TEST_F(g, group_closed_while_unmapping)
{
	struct gpusleep_group_op o;
	int i;

	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, ALL, NB, 0,
			 &o));
	rank0_unmapping(_metadata, self, 0);
	close(self->grp);
	self->grp = -1;
	ASSERT_EQ(0, pump_until_resume(self, 1));
	ASSERT_EQ(0, release_held(self, 0));
	pump(self, 200);
	EXPECT_EQ(1, count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG));
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/*
 * Issue 35: a group release ends by its deadline. Rank 0 holds its
 * PAUSE_TAG and from then on nobody answers (the rollback's resumes
 * neither): the operation still ends at its deadline, its result saying
 * that ranks are still at work (GPUSLEEP_GROUP_RF_SETTLING, settle_op_id,
 * their entries GPUSLEEP_GRF_RUNNING). The group refuses another
 * operation until the settling one ends, and GROUP_WAIT for that one
 * gives the final breakdown. No timed assertion: what the results say
 * (before, the result came once the rollback had ended, settling
 * nothing); GS_WAIT_MS is only a guard.
 */
TEST_F(g, deadline_ends_the_operation_rollback_settles)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res, fin;
	struct gpusleep_group_op o, busy;
	int i;

	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, ALL, NB,
			 1000, &o));
	rank0_unmapping(_metadata, self, 0);
	/* Nobody answers from here: only the deadline ends it. */
	ASSERT_EQ(0, gwait(self->grp, o.op_id, GS_WAIT_MS, &res, rk, MAXR));
	EXPECT_EQ(o.op_id, res.op_id);
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_GROUP_RF_SETTLING, res.flags);
	EXPECT_EQ(o.op_id + 1, res.settle_op_id);
	EXPECT_EQ(3, res.nr_ranks);
	/* Ranks 1 and 2 released all: their rollback's resume runs. */
	for (i = 1; i < 3; i++)
		EXPECT_TRUE(rk[i].flags & GPUSLEEP_GRF_RUNNING);
	EXPECT_EQ(-EBUSY, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0,
			      &busy));
	/* Answered (late, maybe), and the rollback goes on to its end. */
	release_held(self, 0);
	ASSERT_EQ(0, drive(self, res.settle_op_id, &fin, rk));
	EXPECT_EQ(res.settle_op_id, fin.op_id);
	EXPECT_EQ(0, fin.flags);
	EXPECT_EQ(-ETIMEDOUT, fin.error);
	for (i = 0; i < 3; i++) {
		EXPECT_FALSE(rk[i].flags & GPUSLEEP_GRF_RUNNING);
		EXPECT_TRUE(rk[i].flags & (GPUSLEEP_GRF_ROLLED_BACK |
					   GPUSLEEP_GRF_CANCELLED |
					   GPUSLEEP_GRF_STILL_RELEASED));
	}
	/* Whatever a late answer left released, a group resume maps back. */
	if (gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0, &o) == 0)
		ASSERT_EQ(0, drive(self, o.op_id, NULL, NULL));
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/*
 * The group's last fd closes during a rollback (rank 1 failed, rank 0
 * still unmapping): the rollback goes on to its end.
 */
TEST_F(g, group_closed_during_rollback)
{
	struct gpusleep_group_op o;
	int i;

	self->sc[1].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, ALL, NB, 0,
			 &o));
	rank0_unmapping(_metadata, self, 0);
	ASSERT_TRUE(self->has_held[1]);
	self->has_held[1] = 0;
	ASSERT_EQ(0, gs_answer(self->agent[1], &self->held[1], -EIO, 0));
	ASSERT_EQ(0, pump_until_resume(self, 2));
	close(self->grp);
	self->grp = -1;
	ASSERT_EQ(0, release_held(self, 0));
	pump(self, 200);
	EXPECT_EQ(1, count_of(self, 0, GPUSLEEP_EV_PAUSE_TAG));
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/* A rank's engine dies while the others are held: all cancelled. */
TEST_F(g, engine_killed_while_draining)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;

	self->sc[1].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, NB, 0, &o));
	pump(self, 100);
	close(self->eng[1]);
	self->eng[1] = -1;
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(-EOWNERDEAD, res.error);
	EXPECT_EQ(GPUSLEEP_R_ENGINE_GONE, res.reason);
	EXPECT_EQ(1, res.rank);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 2);
	/* The dead rank stays in the group: later operations name it. */
	ASSERT_EQ(-EOWNERDEAD, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0,
				   0, 0, &o));
	EXPECT_EQ(1, o.rank);
}

/* A rank's engine dies while the others have unmapped: they are resumed. */
TEST_F(g, engine_killed_while_unmapping)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;

	self->sc[1].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	ASSERT_TRUE(self->has_held[1]);
	close(self->eng[1]);
	self->eng[1] = -1;
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(GPUSLEEP_R_ENGINE_GONE, res.reason);
	EXPECT_EQ(1, res.rank);
	EXPECT_TRUE(rk[0].flags & GPUSLEEP_GRF_ROLLED_BACK);
	EXPECT_TRUE(rk[2].flags & GPUSLEEP_GRF_ROLLED_BACK);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 2);
}

/* A rank's agent dies mid-unmap: the others resumed, it stays released. */
TEST_F(g, agent_killed_while_unmapping)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct gpusleep_state st;

	self->sc[1].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	ASSERT_TRUE(self->has_held[1]);
	close(self->agent[1]);
	self->agent[1] = -1;
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(-EPIPE, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_GONE, res.reason);
	EXPECT_EQ(1, res.rank);
	EXPECT_TRUE(rk[1].flags & GPUSLEEP_GRF_STILL_RELEASED);
	EXPECT_EQ(W, rk[1].released);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 2);
	/* Maybe released is released: rank 1 says so, scheduler paused. */
	ASSERT_EQ(0, gs_state(self->eng[1], &st));
	EXPECT_EQ(W, st.released);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	/* A new agent maps it back through a group resume. */
	self->agent[1] = gs_attach(self->dev, self->id[1], GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent[1]);
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	expect_awake(_metadata, self, 1);
}

/* A held rank's agent goes away: the group fails before anyone unmaps. */
TEST_F(g, agent_killed_while_held)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i;

	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	close(self->agent[0]);
	self->agent[0] = -1;
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(GPUSLEEP_R_AGENT_GONE, res.reason);
	EXPECT_EQ(0, res.rank);
	EXPECT_EQ(-1, first_of(self, GPUSLEEP_EV_PAUSE_TAG));
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/* An individual resume of a held rank cancels it, and so the group. */
TEST_F(g, single_resume_cancels_group)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct gpusleep_op op;
	int i;

	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	ASSERT_EQ(0, gs_resume(self->eng[0], 0, NB, &op));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(-ECANCELED, res.error);
	EXPECT_EQ(0, res.rank);
	pump(self, 50);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
}

/* A domain is in one group at most; only engine/controller fds join. */
TEST_F(g, membership_rules)
{
	char nm[40];
	int g2, ctl, efd;

	snprintf(nm, sizeof(nm), "%s-b", self->name);
	EXPECT_EQ(-EEXIST, mkgroup(self->dev, self->name));
	g2 = mkgroup(self->dev, nm);
	ASSERT_LE(0, g2);
	EXPECT_EQ(-EEXIST, addrank(g2, self->eng[0], NULL));
	EXPECT_EQ(-EEXIST, addrank(self->grp, self->eng[0], NULL));
	ctl = gs_attach(self->dev, self->id[0], GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, ctl);
	EXPECT_EQ(-EEXIST, addrank(g2, ctl, NULL));
	EXPECT_EQ(-EPERM, addrank(g2, self->agent[1], NULL));
	efd = eventfd(0, 0);
	EXPECT_EQ(-EINVAL, addrank(g2, efd, NULL));
	EXPECT_EQ(-EBADF, addrank(g2, 999, NULL));
	/* An empty group has nothing to release. */
	EXPECT_EQ(-ENODATA, gop(g2, GPUSLEEP_IOC_GROUP_RELEASE, 0, 0, 0, NULL));
	/* Once the first group is gone, the domain may join another. */
	close(self->grp);
	self->grp = -1;
	EXPECT_EQ(0, addrank(g2, ctl, NULL));
	close(efd);
	close(ctl);
	close(g2);
}

/*
 * Every rank declares the same tags: a domain with another declaration is
 * refused (EXDEV), and GET_TAGS on the group fd gives the ranks' one.
 */
/*
 * One errno, one meaning (docs/errors.md): a group with no ranks is
 * ENODATA, for a release and a resume alike, while ENOENT stays a
 * rank's not_released.
 */
TEST_F(g, empty_group_is_enodata)
{
	struct gpusleep_group_op o;
	char nm[40];
	int g2;

	snprintf(nm, sizeof(nm), "%s-e", self->name);
	g2 = mkgroup(self->dev, nm);
	ASSERT_LE(0, g2);
	EXPECT_EQ(-ENODATA, gop(g2, GPUSLEEP_IOC_GROUP_RELEASE, 0, 0, 0, &o));
	EXPECT_EQ(0, o.op_id);
	EXPECT_EQ(-ENODATA, gop(g2, GPUSLEEP_IOC_GROUP_RESUME, 0, 0, 0, &o));
	EXPECT_EQ(0, o.op_id);
	close(g2);
}

/* A rank whose tag is awake: the resume is refused ENOENT, naming it. */
TEST_F(g, resume_of_awake_rank_is_enoent)
{
	struct gpusleep_group_op o;

	EXPECT_EQ(-ENOENT, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, W, 0, 0,
			       &o));
	EXPECT_EQ(GPUSLEEP_R_NOT_RELEASED, o.reason);
	EXPECT_EQ(0, o.rank);
	EXPECT_EQ(W, o.bad_tags);
}

/* A dead domain joins nothing: ENODEV, as its own fds answer. */
TEST_F(g, add_dead_domain_is_enodev)
{
	uint32_t id;
	int e, ctl;

	e = gs_create(self->dev, "gdead", CAPS, &id);
	ASSERT_LE(0, e);
	ctl = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, ctl);
	close(e);
	EXPECT_EQ(-ENODEV, gs_release(ctl, 0, 0, NULL));
	EXPECT_EQ(-ENODEV, addrank(self->grp, ctl, NULL));
	close(ctl);
}

/* A domain in a group already: EEXIST (EBUSY is the group's operation). */
TEST_F(g, add_member_of_a_group_is_eexist)
{
	char nm[40];
	int g2;

	snprintf(nm, sizeof(nm), "%s-m", self->name);
	g2 = mkgroup(self->dev, nm);
	ASSERT_LE(0, g2);
	EXPECT_EQ(-EEXIST, addrank(g2, self->eng[1], NULL));
	close(g2);
}

/* A group operation in flight: GROUP_ADD is EBUSY, the domain untouched. */
TEST_F(g, add_during_group_op_is_ebusy)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	uint32_t id;
	int e, g2;
	char nm[40];

	e = gs_create(self->dev, "gnew", CAPS, &id);
	ASSERT_LE(0, e);
	self->sc[0].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 50);
	EXPECT_EQ(-EBUSY, addrank(self->grp, e, NULL));
	/* Not taken: another group may have it. */
	snprintf(nm, sizeof(nm), "%s-b", self->name);
	g2 = mkgroup(self->dev, nm);
	ASSERT_LE(0, g2);
	EXPECT_EQ(0, addrank(g2, e, NULL));
	ASSERT_EQ(0, release_held(self, 0));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	close(g2);
	close(e);
}

TEST_F(g, ranks_share_one_tag_declaration)
{
	struct gpusleep_create c;
	struct gpusleep_tags t;
	char nm[40];
	int g2, e;

	memset(&t, 0xcc, sizeof(t));
	ASSERT_EQ(0, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GET_TAGS, &t)));
	EXPECT_EQ(2, t.nr_tags);
	EXPECT_STREQ("weights", t.tags[0].name);
	EXPECT_STREQ("kv_cache", t.tags[1].name);
	EXPECT_EQ(GPUSLEEP_TAG_KIND_KV_CACHE, t.tags[1].kind);
	EXPECT_EQ(0, t.tags[0].generation);

	/* kv_cache declared as plain memory: not the same declaration */
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "tagx-%d", getpid());
	c.nr_tags = 2;
	snprintf(c.tags[0].name, sizeof(c.tags[0].name), "weights");
	snprintf(c.tags[1].name, sizeof(c.tags[1].name), "kv_cache");
	e = gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_DOMAIN, &c));
	ASSERT_LE(0, e);
	snprintf(nm, sizeof(nm), "tagg-%d", getpid());
	g2 = mkgroup(self->dev, nm);
	ASSERT_LE(0, g2);
	memset(&t, 0xcc, sizeof(t));
	ASSERT_EQ(0, gs_err(ioctl(g2, GPUSLEEP_IOC_GET_TAGS, &t)));
	EXPECT_EQ(0, t.nr_tags);	/* no rank yet */
	EXPECT_EQ(-EXDEV, addrank(self->grp, e, NULL));
	EXPECT_EQ(0, addrank(g2, e, NULL));	/* a group of its own */
	ASSERT_EQ(0, gs_err(ioctl(g2, GPUSLEEP_IOC_GET_TAGS, &t)));
	EXPECT_EQ(GPUSLEEP_TAG_KIND_MEMORY, t.tags[1].kind);
	close(g2);
	close(e);
}

/* A rank destroyed while in a group: refused by name, group still ends. */
TEST_F(g, rank_destroyed_in_group)
{
	struct gpusleep_group_op o;

	close(self->agent[1]);
	close(self->eng[1]);
	self->agent[1] = self->eng[1] = -1;
	ASSERT_EQ(-EOWNERDEAD, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0,
				   0, 0, &o));
	EXPECT_EQ(GPUSLEEP_R_ENGINE_GONE, o.reason);
	EXPECT_EQ(1, o.rank);
	EXPECT_EQ(self->id[1], o.domain);
	ASSERT_EQ(-EOWNERDEAD, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0,
				   0, 0, &o));
	EXPECT_EQ(1, o.rank);
	pump(self, 50);
	expect_awake(_metadata, self, 0);
	expect_awake(_metadata, self, 2);
}

/* Closing the group while ranks are held cancels them. */
TEST_F(g, group_closed_while_held)
{
	struct gpusleep_group_op o;
	int i;

	self->sc[2].hold = GPUSLEEP_EV_DRAIN;
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	close(self->grp);
	self->grp = -1;
	pump(self, 50);
	/* Rank 2 read its DRAIN and never answered: called off too. */
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
	EXPECT_EQ(0, count_of(self, -1, GPUSLEEP_EV_PAUSE_TAG));
}

static int read_sysfs(uint32_t id, const char *attr, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/%s", id,
		 attr);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

TEST_F(g, sysfs_poll_eventfd)
{
	struct gpusleep_eventfd e = { .fd = -1 };
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	char buf[64], want[64];
	struct pollfd p;
	uint64_t v = 0;

	ASSERT_EQ(0, read_sysfs(self->id[1], "group", buf, sizeof(buf)));
	snprintf(want, sizeof(want), "%s\n", self->name);
	EXPECT_STREQ(want, buf);
	e.fd = eventfd(0, EFD_NONBLOCK);
	ASSERT_LE(0, e.fd);
	e.events = GPUSLEEP_EFD_OP_DONE;
	ASSERT_EQ(0, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GROUP_EVENTFD, &e)));
	p.fd = self->grp;
	p.events = POLLIN;
	EXPECT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	pump(self, 100);
	EXPECT_EQ(1, poll(&p, 1, 1000));
	EXPECT_EQ(sizeof(v), read(e.fd, &v, sizeof(v)));
	EXPECT_EQ(1, v);
	ASSERT_EQ(0, gwait(self->grp, 0, 1000, &res, NULL, 0));
	EXPECT_EQ(o.op_id, res.op_id);
	EXPECT_EQ(0, poll(&p, 1, 0));
	close(e.fd);
	close(self->grp);
	self->grp = -1;
	ASSERT_EQ(0, read_sysfs(self->id[1], "group", buf, sizeof(buf)));
	EXPECT_STREQ("\n", buf);
}

/* Every rank's group_id is the id OPEN_GROUP gives; 0 once it is gone. */
TEST_F(g, sysfs_group_id)
{
	struct gpusleep_group_create c;
	char buf[32], want[32];
	int fd, i;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", self->name);
	fd = gs_err(ioctl(self->dev, GPUSLEEP_IOC_OPEN_GROUP, &c));
	ASSERT_LE(0, fd);
	ASSERT_LT(0, c.id);
	snprintf(want, sizeof(want), "%u\n", c.id);
	for (i = 0; i < self->n; i++) {
		ASSERT_EQ(0, read_sysfs(self->id[i], "group_id", buf,
					sizeof(buf)));
		EXPECT_STREQ(want, buf);
	}
	close(fd);
	close(self->grp);
	self->grp = -1;
	ASSERT_EQ(0, read_sysfs(self->id[0], "group_id", buf, sizeof(buf)));
	EXPECT_STREQ("0\n", buf);
}

/*
 * Issue 35, defect 2. A group release that rank 2 refuses (its weights
 * are released already) changes nothing on any rank: ranks 0 and 1 get
 * no operation (their last op id stays 0), count no failure or cancel in
 * sysfs, signal no eventfd, send no netlink STATE_NTF or STEP_NTF, and
 * their engines read nothing.
 */
TEST_F(g, refused_release_changes_no_other_rank)
{
	uint16_t family;
	uint32_t nlgrp;
	struct gpusleep_group_op o;
	struct gpusleep_state st;
	struct gpusleep_op op;
	char buf[NL_BUF];
	int lsn, efd[2], i, n;
	uint64_t v;

	for (i = 0; i < 2; i++) {
		efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ASSERT_LE(0, efd[i]);
		ASSERT_EQ(0, gs_eventfd(self->eng[i], efd[i],
					GPUSLEEP_EFD_ALL));
	}
	ASSERT_EQ(0, gs_release(self->eng[2], W, NB, &op));
	pump(self, 50);
	ASSERT_EQ(0, gs_finish(self->eng[2], op.op_id, NULL));
	lsn = nl_open();
	ASSERT_LE(0, lsn);
	ASSERT_EQ(0, nl_resolve(lsn, &family, &nlgrp));
	ASSERT_EQ(0, setsockopt(lsn, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
				&nlgrp, sizeof(nlgrp)));

	ASSERT_EQ(-EALREADY, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, W, 0,
				 0, &o));
	EXPECT_EQ(2, o.rank);
	EXPECT_EQ(0, o.op_id);
	pump(self, 50);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, gs_state(self->eng[i], &st));
		EXPECT_EQ(0, st.last_op_id);
		EXPECT_EQ(0, st.last.op_id);
		ASSERT_EQ(0, read_sysfs(self->id[i], "failures", buf,
					sizeof(buf)));
		EXPECT_STREQ("0\n", buf);
		ASSERT_EQ(0, read_sysfs(self->id[i], "cancels", buf,
					sizeof(buf)));
		EXPECT_STREQ("0\n", buf);
		EXPECT_EQ(-1, read(efd[i], &v, sizeof(v)));
		EXPECT_EQ(EAGAIN, errno);
		EXPECT_EQ(0, count_of(self, i, GPUSLEEP_EV_DRAIN));
		EXPECT_EQ(0, count_of(self, i, GPUSLEEP_EV_DRAIN_CANCELLED));
		close(efd[i]);
	}
	/* Not a word on netlink about ranks 0 and 1. */
	while ((n = recv(lsn, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct nlmsghdr *nh = (void *)buf;
		struct nlattr *tb[NL_MAX_ATTR];

		for (; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			nl_parse_genl(tb, nh);
			if (!tb[GPUSLEEP_A_ID])
				continue;
			EXPECT_NE(self->id[0], nla_u32(tb[GPUSLEEP_A_ID]));
			EXPECT_NE(self->id[1], nla_u32(tb[GPUSLEEP_A_ID]));
		}
	}
	close(lsn);
}

/*
 * Issue 35, defect 5. A group whose last fd closed while rank 0 unmaps
 * lives on until its rollback ends, holding its ranks: its id is not
 * given to a new group meanwhile (two live groups would share it in
 * sysfs and gpusleepctl group list).
 */
TEST_F(g, group_id_not_reused_while_its_group_lives)
{
	struct gpusleep_group_create c;
	struct gpusleep_group_op o;
	char buf[32], old[32];
	int fd, i;

	ASSERT_EQ(0, read_sysfs(self->id[0], "group_id", old, sizeof(old)));
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, ALL, NB, 0,
			 &o));
	rank0_unmapping(_metadata, self, 0);
	close(self->grp);
	self->grp = -1;
	/* Still the ranks' group, rolling back: the same id in sysfs. */
	ASSERT_EQ(0, read_sysfs(self->id[0], "group_id", buf, sizeof(buf)));
	EXPECT_STREQ(old, buf);
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "tn%d", getpid());
	fd = gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_GROUP, &c));
	ASSERT_LE(0, fd);
	EXPECT_NE((uint32_t)atoi(old), c.id);
	ASSERT_EQ(0, pump_until_resume(self, 1));
	ASSERT_EQ(0, release_held(self, 0));
	pump(self, 200);
	for (i = 0; i < 3; i++)
		expect_awake(_metadata, self, i);
	/* The old group ended: its ranks are in no group. */
	ASSERT_EQ(0, read_sysfs(self->id[0], "group_id", buf, sizeof(buf)));
	EXPECT_STREQ("0\n", buf);
	close(fd);
}

static int opengroup(int dev, const char *name)
{
	struct gpusleep_group_create c;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	return gs_err(ioctl(dev, GPUSLEEP_IOC_OPEN_GROUP, &c));
}

/* A tool opens the engine's group by name; the group lives on with it. */
TEST_F(g, open_by_name)
{
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	struct pollfd p;
	pid_t pid;
	int st, g2;

	EXPECT_EQ(-ENOENT, opengroup(self->dev, "no-such-group"));
	/* Another euid does not even find it: names are per owner. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(seteuid(65534) ? 2 :
		      opengroup(self->dev, self->name) == -ENOENT ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));

	g2 = opengroup(self->dev, self->name);
	ASSERT_LE(0, g2);
	close(self->grp);
	self->grp = g2;
	ASSERT_EQ(0, gop(g2, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	p.fd = g2;
	p.events = POLLIN;
	EXPECT_EQ(0, poll(&p, 1, 0));	/* drive() fetched it */
	ASSERT_EQ(0, gop(g2, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0, &o));
	pump(self, 100);
	EXPECT_EQ(1, poll(&p, 1, 1000));
	ASSERT_EQ(0, drive(self, o.op_id, &res, NULL));
	EXPECT_EQ(0, res.error);
	/* The last fd closed: the name is free again. */
	close(g2);
	self->grp = -1;
	EXPECT_EQ(-ENOENT, opengroup(self->dev, self->name));
}

/* Eight ranks, with kv_cache: the same one operation. */
TEST_F(g, eight_ranks)
{
	struct gpusleep_group_rank rk[MAXR];
	struct gpusleep_group_result res;
	struct gpusleep_group_op o;
	int i;

	add_ranks(_metadata, self, MAXR);
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RELEASE, 0, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(MAXR, res.nr_ranks);
	EXPECT_LT(last_of(self, GPUSLEEP_EV_DRAIN),
		  first_of(self, GPUSLEEP_EV_RESET_CACHES));
	for (i = 0; i < MAXR; i++)
		EXPECT_EQ(ALL, rk[i].released);
	ASSERT_EQ(0, gop(self->grp, GPUSLEEP_IOC_GROUP_RESUME, 0, NB, 0, &o));
	ASSERT_EQ(0, drive(self, o.op_id, &res, rk));
	EXPECT_EQ(0, res.error);
	for (i = 0; i < MAXR; i++)
		expect_awake(_metadata, self, i);
}

/* Bad arguments change nothing. */
TEST_F(g, invalid)
{
	struct gpusleep_group_create c;
	struct gpusleep_group_op o;
	struct gpusleep_group_wait w;

	memset(&c, 0, sizeof(c));
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_GROUP,
					&c)));	/* empty name */
	snprintf(c.name, sizeof(c.name), "x");
	c.flags = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_GROUP,
					&c)));
	memset(&o, 0, sizeof(o));
	o.flags = 0x80;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GROUP_RELEASE,
					&o)));
	o.flags = GPUSLEEP_OPF_ABORT_INFLIGHT;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GROUP_RESUME,
					&o)));
	o.flags = 0;
	o.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GROUP_RELEASE,
					&o)));
	memset(&w, 0, sizeof(w));
	EXPECT_EQ(-ENOENT, gs_err(ioctl(self->grp, GPUSLEEP_IOC_GROUP_WAIT,
					&w)));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(self->grp, GPUSLEEP_IOC_RELEASE, &o)));
	pump(self, 20);
	expect_awake(_metadata, self, 0);
}

/* Shared between the processes of the access tests. */
struct access_run {
	volatile int step;
	int open_ret, op_ret, drained, id_a, id_b;
};

/* Shared with the test's children; the results not yet written are 1. */
static struct access_run *access_run_new(void)
{
	struct access_run *a = mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED)
		return NULL;
	memset(a, 0, sizeof(*a));
	a->open_ret = a->op_ret = 1;
	return a;
}

static void wait_step(struct access_run *a, int step)
{
	int i;

	for (i = 0; i < 20000 && a->step < step; i++)
		usleep(1000);
}

/* Drop to uid (every uid: no capability left). */
static int become(uid_t uid)
{
	return setresuid(uid, uid, uid);
}

/*
 * Control of a group is checked at every operation, against every rank:
 * a process with the owner's euid opens the owner's empty group (it may:
 * it controls no rank yet), the owner adds a rank it holds through a
 * grant, and that opener's release is refused: it may not control that
 * rank. The rank's engine never hears of it.
 */
TEST_F(g, control_checked_at_every_op)
{
	struct access_run *a = access_run_new();
	struct gpusleep_grant gr = { .role = GPUSLEEP_ROLE_CONTROLLER };
	struct gpusleep_event ev;
	char name[40];
	pid_t owner, other;
	int st, e, ag, c;
	uint32_t id;

	ASSERT_NE(NULL, a);
	snprintf(name, sizeof(name), "own-%d", getpid());
	/* A rank of root's: uid 1000 controls it only through the grant. */
	e = gs_create(self->dev, "granted-rank", CAPS, &id);
	ASSERT_LE(0, e);
	ag = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, ag);
	c = gs_err(ioctl(e, GPUSLEEP_IOC_GRANT, &gr));
	ASSERT_LE(0, c);
	owner = fork();
	ASSERT_LE(0, owner);
	if (owner == 0) {
		int grp;

		close(e);
		close(ag);
		if (become(1000))
			_exit(2);
		grp = mkgroup(self->dev, name);
		a->step = 1;
		wait_step(a, 2);
		if (grp < 0 || addrank(grp, c, NULL))
			_exit(3);
		a->step = 3;
		wait_step(a, 4);
		_exit(0);
	}
	other = fork();
	ASSERT_LE(0, other);
	if (other == 0) {
		struct gpusleep_group_op o;
		int gf;

		close(e);
		close(ag);
		close(c);
		if (become(1000))
			_exit(2);
		wait_step(a, 1);
		gf = opengroup(self->dev, name);
		a->open_ret = gf < 0 ? gf : 0;
		a->step = 2;
		wait_step(a, 3);
		if (gf >= 0)
			a->op_ret = gop(gf, GPUSLEEP_IOC_GROUP_RELEASE, W, NB, 0,
					&o);
		a->step = 4;
		_exit(0);
	}
	close(c);
	ASSERT_EQ(other, waitpid(other, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	ASSERT_EQ(owner, waitpid(owner, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, a->open_ret);
	EXPECT_EQ(-EPERM, a->op_ret);
	a->drained = !gs_next(e, &ev, 100) && ev.type == GPUSLEEP_EV_DRAIN;
	EXPECT_EQ(0, a->drained);
	close(ag);
	close(e);
	munmap(a, sizeof(*a));
}

/*
 * In a child: on into a new pid namespace (unshare(), then fork: the
 * grandchild returns, this child exits with its status); exit 4 when pid
 * namespaces are refused here.
 */
static void into_new_pid_namespace(void)
{
	pid_t in;
	int st;

	if (unshare(CLONE_NEWPID))
		_exit(4);
	in = fork();
	if (in) {
		waitpid(in, &st, 0);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 5);
	}
}

/*
 * A group is opened only from its creator's pid namespace, as a domain is
 * controlled: the owner's euid in another pid namespace does not find it
 * (its name is in the creator's scope), even while the group is empty,
 * and the same euid in the creator's namespace opens it.
 */
TEST_F(g, open_from_another_pid_namespace_refused)
{
	struct access_run *a = access_run_new();
	char name[40];
	pid_t owner, other;
	int st;

	ASSERT_NE(NULL, a);
	snprintf(name, sizeof(name), "pidns-%d", getpid());
	owner = fork();
	ASSERT_LE(0, owner);
	if (owner == 0) {
		int grp, same;

		if (become(1000))
			_exit(2);
		grp = mkgroup(self->dev, name);
		a->step = 1;
		wait_step(a, 2);
		/* The same euid in the creator's pid namespace may open it. */
		same = opengroup(self->dev, name);
		a->op_ret = same < 0 ? same : 0;
		_exit(grp < 0 ? 3 : 0);
	}
	other = fork();
	ASSERT_LE(0, other);
	if (other == 0) {
		int gf;

		into_new_pid_namespace();
		if (become(1000))
			_exit(2);
		wait_step(a, 1);
		gf = opengroup(self->dev, name);
		a->open_ret = gf < 0 ? gf : 0;
		a->step = 2;
		_exit(0);
	}
	ASSERT_EQ(other, waitpid(other, &st, 0));
	if (WEXITSTATUS(st) == 4) {
		a->step = 2;
		waitpid(owner, &st, 0);
		SKIP(return, "no pid namespaces here");
	}
	EXPECT_EQ(0, WEXITSTATUS(st));
	ASSERT_EQ(owner, waitpid(owner, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(-ENOENT, a->open_ret);
	EXPECT_EQ(0, a->op_ret);
	munmap(a, sizeof(*a));
}

/* CREATE_GROUP or OPEN_GROUP (cmd) of name: the fd, and the group's id. */
static int group_by_name(int dev, unsigned long cmd, const char *name,
			 int *id)
{
	struct gpusleep_group_create c;
	int r;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	r = gs_err(ioctl(dev, cmd, &c));
	*id = c.id;
	return r;
}

#define mkgroup_id(dev, name, id) \
	group_by_name(dev, GPUSLEEP_IOC_CREATE_GROUP, name, id)
#define opengroup_id(dev, name, id) \
	group_by_name(dev, GPUSLEEP_IOC_OPEN_GROUP, name, id)

/*
 * Two containers that share the user namespace and the euid (root in two
 * containers without user namespaces) each name their groups: the same
 * name in another pid namespace is another group, not -EEXIST, and each
 * side opens its own.
 */
TEST_F(g, group_names_scoped_to_pid_namespace)
{
	struct access_run *a = access_run_new();
	int mine, gf, f, id, id2;
	char name[40];
	pid_t other;

	ASSERT_NE(NULL, a);
	snprintf(name, sizeof(name), "pidscope-%d", getpid());
	gf = mkgroup_id(self->dev, name, &id);
	ASSERT_LE(0, gf);
	other = fork();
	ASSERT_LE(0, other);
	if (other == 0) {
		int cf, of;

		into_new_pid_namespace();
		cf = mkgroup_id(self->dev, name, &a->id_a);
		a->op_ret = cf < 0 ? cf : 0;
		of = opengroup_id(self->dev, name, &a->id_b);
		a->open_ret = of < 0 ? of : 0;
		_exit(0);
	}
	ASSERT_EQ(other, waitpid(other, &mine, 0));
	if (WEXITSTATUS(mine) == 4)
		SKIP(return, "no pid namespaces here");
	EXPECT_EQ(0, WEXITSTATUS(mine));
	EXPECT_EQ(0, a->op_ret);	/* -EEXIST: one scope for both */
	EXPECT_EQ(0, a->open_ret);
	EXPECT_EQ(a->id_a, a->id_b);
	EXPECT_NE(id, a->id_a);
	/* This side's name still opens this side's group. */
	f = opengroup_id(self->dev, name, &id2);
	ASSERT_LE(0, f);
	EXPECT_EQ(id, id2);
	close(f);
	close(gf);
	munmap(a, sizeof(*a));
}

/*
 * Group names belong to their owner (euid, user namespace): another user
 * holding a name squats nothing, and opening by name, even privileged,
 * finds only the caller's own group.
 */
TEST_F(g, group_names_scoped_to_owner)
{
	struct access_run *a = access_run_new();
	char name[40];
	pid_t pid;
	int st, mine, fd, id;

	ASSERT_NE(NULL, a);
	snprintf(name, sizeof(name), "sq-%d", getpid());
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int gf, g2;

		if (become(1000))
			_exit(2);
		gf = mkgroup_id(self->dev, name, &a->id_a);
		a->step = 1;
		wait_step(a, 2);
		/* Its own name still opens its own group. */
		g2 = opengroup_id(self->dev, name, &a->id_b);
		_exit(gf >= 0 && g2 >= 0 ? 0 : 1);
	}
	wait_step(a, 1);
	mine = mkgroup_id(self->dev, name, &id);
	ASSERT_LE(0, mine);
	EXPECT_NE(a->id_a, id);
	fd = opengroup_id(self->dev, name, &st);
	ASSERT_LE(0, fd);
	EXPECT_EQ(id, st);
	close(fd);
	a->step = 2;
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(a->id_a, a->id_b);
	/* A third user finds neither. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(become(1001) ? 2 :
		      opengroup(self->dev, name) == -ENOENT ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(mine);
	munmap(a, sizeof(*a));
}

/*
 * Names are scoped to the user namespace too: the owner's kernel euid in
 * a user namespace of its own finds nothing by the owner's group name and
 * may create a group of that name there, which the owner never sees.
 */
TEST_F(g, group_names_scoped_to_user_namespace)
{
	struct access_run *a = access_run_new();
	char name[40];
	pid_t pid, in;
	int st, mine;

	ASSERT_NE(NULL, a);
	snprintf(name, sizeof(name), "userns-%d", getpid());
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int gf, f;

		if (become(1000))
			_exit(2);
		gf = mkgroup_id(self->dev, name, &a->id_a);
		if (gf < 0)
			_exit(3);
		a->step = 1;
		wait_step(a, 2);
		/* Still only the owner's own group under that name. */
		f = opengroup_id(self->dev, name, &a->id_b);
		_exit(f >= 0 ? 0 : 1);
	}
	wait_step(a, 1);
	in = fork();
	ASSERT_LE(0, in);
	if (in == 0) {
		char map[32];
		int f, n, gf;

		/* Dumpable again after setresuid(): /proc/self stays ours. */
		if (become(1000) || prctl(PR_SET_DUMPABLE, 1))
			_exit(2);
		if (unshare(CLONE_NEWUSER))
			_exit(4);
		/* Its own euid mapped: the same kernel uid, another namespace. */
		n = snprintf(map, sizeof(map), "0 1000 1\n");
		f = open("/proc/self/uid_map", O_WRONLY);
		if (f < 0 || write(f, map, n) != n)
			_exit(5);
		close(f);
		a->open_ret = opengroup(self->dev, name);
		gf = mkgroup(self->dev, name);
		a->op_ret = gf < 0 ? gf : 0;
		_exit(0);
	}
	ASSERT_EQ(in, waitpid(in, &st, 0));
	a->step = 2;
	ASSERT_EQ(pid, waitpid(pid, &mine, 0));
	if (WEXITSTATUS(st) == 4)
		SKIP(return, "unshare(CLONE_NEWUSER) refused here");
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, WEXITSTATUS(mine));
	EXPECT_EQ(-ENOENT, a->open_ret);
	EXPECT_EQ(0, a->op_ret);
	EXPECT_EQ(a->id_a, a->id_b);
	munmap(a, sizeof(*a));
}

TEST_HARNESS_MAIN
