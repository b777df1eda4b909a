// SPDX-License-Identifier: GPL-2.0
/*
 * Release / resume / is_sleeping semantics of one domain, driven step by
 * step from one process holding the engine, agent and controller fds: every
 * refusal of the reference controller, the step order, cancel, failures.
 */
#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK

FIXTURE(dom) {
	int dev, engine, agent, ctl;
	uint32_t id;
};

FIXTURE_VARIANT(dom) {
	uint32_t caps;
	int agent;
};

FIXTURE_VARIANT_ADD(dom, plain) { .caps = 0, .agent = 1 };
FIXTURE_VARIANT_ADD(dom, prefix_reset) {
	.caps = GPUSLEEP_CAP_PREFIX_CACHING | GPUSLEEP_CAP_PREFIX_CACHE_RESET,
	.agent = 1,
};

FIXTURE_SETUP(dom)
{
	self->agent = -1;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	self->engine = gs_create(self->dev, "ops", variant->caps, &self->id);
	ASSERT_LE(0, self->engine);
	if (variant->agent) {
		self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
		ASSERT_LE(0, self->agent);
	}
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(dom)
{
	if (self->dev < 0)
		return;
	close(self->ctl);
	if (self->agent >= 0)
		close(self->agent);
	close(self->engine);
	close(self->dev);
}

/* Drive a started release of tags to success, checking every step. */
static int drive_release(int engine, int agent, uint32_t tags)
{
	int r;

	r = gs_answer_next(engine, GPUSLEEP_EV_DRAIN, tags, 0, 0);
	if (!r && (tags & KV))
		r = gs_answer_next(engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0);
	if (!r && (tags & W))
		r = gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 100);
	if (!r && (tags & KV))
		r = gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0, 200);
	return r;
}

static int drive_resume(int engine, int agent, uint32_t tags, int awake)
{
	struct gpusleep_event ev;
	int r = 0;

	if (tags & W)
		r = gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, W, 0, 100);
	if (!r && (tags & KV))
		r = gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, KV, 0, 200);
	if (!r && (tags & KV))
		r = gs_answer_next(engine, GPUSLEEP_EV_REPAIR_KV, 0, 0, 0);
	if (!r && awake)
		r = gs_expect(engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev);
	return r;
}

static int no_event(int fd)
{
	struct gpusleep_event ev;

	return gs_next(fd, &ev, 0) == -ETIMEDOUT;
}

TEST_F(dom, handshake)
{
	struct gpusleep_api a;

	memset(&a, 0, sizeof(a));
	a.api = GPUSLEEP_API_VERSION;
	ASSERT_EQ(0, ioctl(self->dev, GPUSLEEP_IOC_API, &a));
	EXPECT_NE(0, a.features & GPUSLEEP_FEAT_EVENTFD);
	/* What this module does is announced: step deadlines, step events. */
	EXPECT_NE(0, a.features & GPUSLEEP_FEAT_STEP_DEADLINE);
	EXPECT_NE(0, a.features & GPUSLEEP_FEAT_STEP_NTF);
	EXPECT_LT(0, a.max_domains);
	a.api = GPUSLEEP_API_VERSION + 1;
	a.features = 0;
	a.max_domains = 0;
	EXPECT_EQ(-1, ioctl(self->dev, GPUSLEEP_IOC_API, &a));
	EXPECT_EQ(EINVAL, errno);
	a.api = GPUSLEEP_API_VERSION;
	a.features = 1ULL << 63;
	a.max_domains = 0;
	EXPECT_EQ(-1, ioctl(self->dev, GPUSLEEP_IOC_API, &a));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dom, full_cycle_in_order)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_state st;

	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	EXPECT_EQ(1, op.op_id);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_DRAINING, st.state);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_DRAIN_PENDING);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	/* Nothing reaches the agent before the drain is done. */
	EXPECT_TRUE(no_event(self->agent));
	ASSERT_EQ(0, drive_release(self->engine, self->agent, ALL));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(ALL, res.tags);
	EXPECT_EQ(ALL, res.done_tags);
	EXPECT_EQ(100, res.bytes[0]);
	EXPECT_EQ(200, res.bytes[1]);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_EQ(ALL, st.released);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_DRAIN_PENDING);
	EXPECT_EQ(100, st.bytes_released[0]);
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	EXPECT_TRUE(no_event(self->engine));

	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	EXPECT_EQ(2, op.op_id);
	ASSERT_EQ(0, drive_resume(self->engine, self->agent, ALL, 1));
	ASSERT_EQ(0, gs_wait(self->ctl, 0, GS_WAIT_MS, &res));
	EXPECT_EQ(2, res.op_id);
	EXPECT_EQ(0, res.error);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_EQ(0, st.bytes_released[0]);
	EXPECT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

TEST_F(dom, refuse_not_enabled)
{
	struct gpusleep_op op;
	struct gpusleep_state st;

	close(self->agent);
	self->agent = -1;
	EXPECT_EQ(-ENOTCONN, gs_release(self->ctl, 0, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, op.reason);
	EXPECT_EQ(0, op.op_id);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, refuse_invalid_tags)
{
	struct gpusleep_op op;

	EXPECT_EQ(-EINVAL, gs_release(self->ctl, 1u << 5, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, refuse_invalid_flags)
{
	struct gpusleep_op op;

	EXPECT_EQ(-EINVAL, gs_release(self->ctl, 0, 1u << 9, &op));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	EXPECT_EQ(-EINVAL, gs_resume(self->ctl, 0,
				     GPUSLEEP_OPF_ABORT_INFLIGHT, &op));
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, refuse_reserved_nonzero)
{
	struct gpusleep_op o;

	memset(&o, 0, sizeof(o));
	o.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &o));
	EXPECT_EQ(EINVAL, errno);
	memset(&o, 0, sizeof(o));
	o.pad = 1;
	EXPECT_EQ(-1, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &o));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, refuse_already_released)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, drive_release(self->engine, self->agent, W));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	EXPECT_EQ(-EALREADY, gs_release(self->ctl, 0, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_ALREADY_RELEASED, op.reason);
	EXPECT_EQ(W, op.bad_tags);
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, refuse_busy)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	EXPECT_EQ(-EBUSY, gs_release(self->ctl, KV, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_BUSY, op.reason);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	EXPECT_TRUE(no_event(self->engine));	/* no second drain */
}

TEST_F(dom, refusal_order_not_enabled_first)
{
	struct gpusleep_op op;

	close(self->agent);
	self->agent = -1;
	/* Invalid tags too, but "not enabled" is checked first. */
	EXPECT_EQ(-ENOTCONN, gs_release(self->ctl, 1u << 7, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, op.reason);
}

TEST_F(dom, weights_only_then_bare_resume)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_state st;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, drive_release(self->engine, self->agent, W));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	/* No reset for a weights-only release. */
	EXPECT_TRUE(no_event(self->engine));

	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, drive_resume(self->engine, self->agent, W, 1));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(W, res.tags);
	EXPECT_TRUE(no_event(self->engine));	/* no KV repair */
	EXPECT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

TEST_F(dom, staged_resume_weights_then_kv)
{
	struct gpusleep_op op;
	struct gpusleep_state st;

	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, drive_release(self->engine, self->agent, ALL));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));

	ASSERT_EQ(0, gs_resume(self->ctl, W, NB, &op));
	/* Weights back, KV still out: scheduling stays paused. */
	ASSERT_EQ(0, drive_resume(self->engine, self->agent, W, 0));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(KV, st.released);
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_TRUE(no_event(self->engine));

	ASSERT_EQ(0, gs_resume(self->ctl, KV, NB, &op));
	ASSERT_EQ(0, drive_resume(self->engine, self->agent, KV, 1));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
}

TEST_F(dom, resume_explicit_not_released)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, drive_release(self->engine, self->agent, W));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	EXPECT_EQ(-ENOENT, gs_resume(self->ctl, ALL, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_NOT_RELEASED, op.reason);
	EXPECT_EQ(KV, op.bad_tags);
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	EXPECT_TRUE(no_event(self->agent));
}

TEST_F(dom, default_resume_when_awake_is_noop)
{
	struct gpusleep_op op;
	struct gpusleep_result res;

	/* Blocking: completes at once. */
	ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, &op));
	EXPECT_LT(0, op.op_id);
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(0, res.tags);
	EXPECT_TRUE(no_event(self->agent));
	EXPECT_TRUE(no_event(self->engine));
}

TEST_F(dom, resume_during_drain_cancels_release)
{
	struct gpusleep_op rel, res_op;
	struct gpusleep_result res;
	struct gpusleep_event ev;
	struct gpusleep_state st;

	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &rel));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, ALL, &ev));
	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &res_op));
	ASSERT_EQ(0, gs_wait(self->ctl, rel.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-ECANCELED, res.error);
	EXPECT_EQ(GPUSLEEP_R_CANCELLED, res.reason);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN_CANCELLED, 0,
			       &ev));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	/* The late drain answer is stale and changes nothing. */
	ev.type = GPUSLEEP_EV_DRAIN;
	ev.op_id = rel.op_id;
	ev.step = 1;
	EXPECT_EQ(-ESTALE, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_wait(self->ctl, res_op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_TRUE(no_event(self->agent));
}

TEST_F(dom, blocking_release_returns_ecanceled)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;
	pid_t pid;
	int st;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int r = gs_release(self->ctl, 0, 0, &op);

		_exit(r == -ECANCELED && op.reason == GPUSLEEP_R_CANCELLED ?
		      0 : 1);
	}
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, ALL, &ev));
	ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, NULL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

TEST_F(dom, abort_inflight_flag_reaches_engine)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB | GPUSLEEP_OPF_ABORT_INFLIGHT,
				&op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	EXPECT_EQ(GPUSLEEP_EVF_ABORT_INFLIGHT, ev.flags);
	EXPECT_EQ(op.op_id, ev.op_id);
}

TEST_F(dom, agent_failure_keeps_confirmed_tags)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_state st;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, 0, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV,
				    -EIO, 0));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-EIO, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, res.reason);
	EXPECT_EQ(W, res.done_tags);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);	/* the state never lies */
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	/* Something is still released: scheduling stays paused. */
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 0));
}

TEST_F(dom, agent_failure_on_first_tag_resumes_scheduling)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, 0, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				    -ENOMEM, 0));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-ENOMEM, res.error);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

TEST_F(dom, engine_drain_failure)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, 0,
				    -EINTR, 0));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-EINTR, res.error);
	EXPECT_EQ(GPUSLEEP_R_ENGINE_FAILED, res.reason);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN_CANCELLED, 0,
			       &ev));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_TRUE(no_event(self->agent));
}

TEST_F(dom, complete_wrong_step_is_stale)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;
	struct gpusleep_state st;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	ev.step++;
	EXPECT_EQ(-ESTALE, gs_answer(self->engine, &ev, 0, 0));
	ev.step--;
	ev.op_id++;
	EXPECT_EQ(-ESTALE, gs_answer(self->engine, &ev, 0, 0));
	ev.op_id--;
	/* The agent cannot answer the engine's step. */
	EXPECT_EQ(-ESTALE, gs_answer(self->agent, &ev, 0, 0));
	/* A controller cannot answer at all. */
	EXPECT_EQ(-EPERM, gs_answer(self->ctl, &ev, 0, 0));
	/* Not an answerable type. */
	ev.type = GPUSLEEP_EV_RESUME_SCHED;
	EXPECT_EQ(-EINVAL, gs_answer(self->engine, &ev, 0, 0));
	ev.type = GPUSLEEP_EV_DRAIN;
	EXPECT_EQ(-EINVAL, gs_answer(self->engine, &ev, 5, 0));
	/* Kernel-internal codes are not errnos an answer may carry. */
	EXPECT_EQ(-EINVAL, gs_answer(self->engine, &ev, -512, 0));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_DRAINING, st.state);
	EXPECT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
}

TEST_F(dom, agent_cannot_control)
{
	struct gpusleep_op op;

	EXPECT_EQ(-EPERM, gs_release(self->agent, 0, 0, &op));
	EXPECT_EQ(-EPERM, gs_resume(self->agent, 0, 0, &op));
}

TEST_F(dom, engine_fd_may_control)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->engine, W, NB, &op));
	EXPECT_EQ(1, op.op_id);
}

TEST_F(dom, result_history_and_wait_unknown)
{
	struct gpusleep_result res;

	EXPECT_EQ(-ENOENT, gs_wait(self->ctl, 0, 0, &res));
	EXPECT_EQ(-ENOENT, gs_wait(self->ctl, 7, 0, &res));
}

TEST_F(dom, wait_times_out)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	EXPECT_EQ(-ETIMEDOUT, gs_wait(self->ctl, op.op_id, 10, NULL));
}

TEST_F(dom, read_short_buffer)
{
	char buf[8];

	EXPECT_EQ(-1, read(self->engine, buf, sizeof(buf)));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, read(self->ctl, buf, sizeof(buf)));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dom, read_nonblock_empty)
{
	struct gpusleep_event ev;
	int fl = fcntl(self->engine, F_GETFL);

	ASSERT_EQ(0, fcntl(self->engine, F_SETFL, fl | O_NONBLOCK));
	EXPECT_EQ(-1, read(self->engine, &ev, sizeof(ev)));
	EXPECT_EQ(EAGAIN, errno);
}

/* poll() on a controller fd: readable once an operation finished, until
 * the fd fetched its result. */
TEST_F(dom, controller_poll_reports_finished_operations)
{
	struct pollfd p = { .fd = self->ctl, .events = POLLIN };
	struct gpusleep_result res;
	struct gpusleep_state st;
	struct gpusleep_op op;

	if (!variant->agent)
		SKIP(return, "needs an agent");
	EXPECT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	EXPECT_EQ(0, poll(&p, 1, 0));	/* running, not finished */
	ASSERT_EQ(0, drive_release(self->engine, self->agent, W));
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	EXPECT_EQ(POLLIN, p.revents & POLLIN);
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, 0, &res));
	EXPECT_EQ(0, poll(&p, 1, 0));	/* fetched */
	/* A no-op resume finishes at once; GET_STATE's last fetches it. */
	ASSERT_EQ(0, gs_resume(self->ctl, KV, NB, &op) == -ENOENT ? 0 : -1);
	ASSERT_EQ(0, gs_resume(self->ctl, W, NB, &op));
	ASSERT_EQ(0, drive_resume(self->engine, self->agent, W, 1));
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(op.op_id, st.last.op_id);
	EXPECT_EQ(0, poll(&p, 1, 0));
	/* Another controller's view is its own. */
	{
		int c2 = gs_attach(self->dev, self->id,
				   GPUSLEEP_ROLE_CONTROLLER);
		struct pollfd p2 = { .fd = c2, .events = POLLIN };

		ASSERT_LE(0, c2);
		EXPECT_EQ(0, poll(&p2, 1, 0));	/* nothing since it attached */
		ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, &op));
		EXPECT_EQ(1, poll(&p2, 1, 0));
		EXPECT_EQ(0, poll(&p, 1, 0));	/* blocking call fetched it */
		close(c2);
	}
}

TEST_HARNESS_MAIN
