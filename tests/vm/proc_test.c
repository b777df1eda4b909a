// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep across processes: engine, agent and controllers as separate
 * processes; timeouts; death of each role mid-operation; eventfd wake-ups
 * of epoll waiters in other processes; interrupted waits; racing
 * controllers.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK

FIXTURE(proc) {
	int dev, engine, agent, ctl;
	uint32_t id;
	pid_t epid, apid;
	int elog[2], alog[2];
};

FIXTURE_SETUP(proc)
{
	self->epid = self->apid = 0;
	self->engine = self->agent = -1;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	/* Shared: the engine is played by a forked child. */
	self->engine = gs_create_flags(self->dev, "proc",
				       GPUSLEEP_CAP_PREFIX_CACHING |
				       GPUSLEEP_CAP_PREFIX_CACHE_RESET,
				       GPUSLEEP_CREATEF_SHARED, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
	ASSERT_EQ(0, pipe(self->elog));
	ASSERT_EQ(0, pipe(self->alog));
}

static void kill_reap(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
		*pid = 0;
	}
}

FIXTURE_TEARDOWN(proc)
{
	if (self->dev < 0)
		return;
	kill_reap(&self->epid);
	kill_reap(&self->apid);
	close(self->ctl);
	if (self->agent >= 0)
		close(self->agent);
	if (self->engine >= 0)
		close(self->engine);
	close(self->elog[0]);
	close(self->elog[1]);
	close(self->alog[0]);
	close(self->alog[1]);
	close(self->dev);
}

/* Hand the engine (or agent) fd to a responder child; the parent's copy
 * is closed so that the child is the only holder. */
static pid_t spawn(int *fd, int log_fd, uint32_t hold, uint32_t fail,
		   int fail_status)
{
	struct gs_responder rs = {
		.hold = hold, .fail = fail, .fail_status = fail_status,
		.log_fd = log_fd,
	};
	pid_t pid = gs_spawn_responder(*fd, &rs);

	close(*fd);
	*fd = -1;
	return pid;
}

/* Read n logged event types from a responder's log pipe. */
static int read_log(int fd, unsigned char *buf, int n)
{
	int got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, GS_WAIT_MS) <= 0)
			return got;
		r = read(fd, buf + got, n - got);
		if (r <= 0)
			return got;
		got += r;
	}
	return got;
}

TEST_F(proc, full_cycle_three_processes)
{
	unsigned char elog[4], alog[4];
	struct gpusleep_op op;
	struct gpusleep_state st;

	self->epid = spawn(&self->engine, self->elog[1], 0, 0, 0);
	self->apid = spawn(&self->agent, self->alog[1], 0, 0, 0);

	ASSERT_EQ(0, gs_release(self->ctl, 0, 0, &op));	/* blocking */
	EXPECT_EQ(GPUSLEEP_R_NONE, op.reason);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(ALL, st.released);
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_EQ((uint64_t)W << 20, st.bytes_released[0]);
	EXPECT_EQ((uint64_t)KV << 20, st.bytes_released[1]);

	ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, &op));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);

	ASSERT_EQ(4, read_log(self->elog[0], elog, 4));
	EXPECT_EQ(GPUSLEEP_EV_DRAIN, elog[0]);
	EXPECT_EQ(GPUSLEEP_EV_RESET_CACHES, elog[1]);
	EXPECT_EQ(GPUSLEEP_EV_REPAIR_KV, elog[2]);
	EXPECT_EQ(GPUSLEEP_EV_RESUME_SCHED, elog[3]);
	ASSERT_EQ(4, read_log(self->alog[0], alog, 4));
	EXPECT_EQ(GPUSLEEP_EV_PAUSE_TAG, alog[0]);
	EXPECT_EQ(GPUSLEEP_EV_PAUSE_TAG, alog[1]);
	EXPECT_EQ(GPUSLEEP_EV_RESUME_TAG, alog[2]);
	EXPECT_EQ(GPUSLEEP_EV_RESUME_TAG, alog[3]);
}

static int release_timeout(int fd, uint32_t tags, uint32_t ms,
			   struct gpusleep_op *op)
{
	memset(op, 0, sizeof(*op));
	op->tags = tags;
	op->timeout_ms = ms;
	return gs_err(ioctl(fd, GPUSLEEP_IOC_RELEASE, op));
}

TEST_F(proc, drain_timeout_unread)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;
	struct gpusleep_state st;

	/* The engine (this process) does not even read the drain request. */
	EXPECT_EQ(-ETIMEDOUT, release_timeout(self->ctl, 0, 50, &op));
	EXPECT_EQ(GPUSLEEP_R_DRAIN_TIMEOUT, op.reason);
	/* The unread request was taken back: nothing to cancel or resume. */
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 0));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_EQ(-ETIMEDOUT, st.last.error);
	EXPECT_EQ(GPUSLEEP_R_DRAIN_TIMEOUT, st.last.reason);
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->agent, &ev, 0));
}

TEST_F(proc, drain_timeout_read_not_answered)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_event ev;
	struct gpusleep_state st;

	memset(&op, 0, sizeof(op));
	op.flags = NB;
	op.timeout_ms = 50;
	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, ALL, &ev));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_R_DRAIN_TIMEOUT, res.reason);
	/* The engine is told to stop draining and to schedule again. */
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN_CANCELLED, 0,
			       &ev));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	/* Its late answer is stale. */
	ev.type = GPUSLEEP_EV_DRAIN;
	ev.op_id = op.op_id;
	ev.step = 1;
	EXPECT_EQ(-ESTALE, gs_answer(self->engine, &ev, 0, 0));
}

TEST_F(proc, drain_timeout_module_parameter)
{
	struct gpusleep_op op;
	char old[32];

	ASSERT_EQ(0, gs_param_set("drain_timeout_ms", "50", old, sizeof(old)));
	EXPECT_EQ(-ETIMEDOUT, gs_release(self->ctl, W, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_DRAIN_TIMEOUT, op.reason);
	EXPECT_EQ(0, gs_param_set("drain_timeout_ms", old, NULL, 0));
}

TEST_F(proc, agent_timeout_then_late_answer)
{
	struct gpusleep_op op;
	struct gpusleep_event ev, pause;
	struct gpusleep_state st;

	struct gpusleep_result res;

	self->epid = spawn(&self->engine, -1, 0, 0, 0);
	/* The agent (this process) reads the pause but answers too late. */
	memset(&op, 0, sizeof(op));
	op.tags = W;
	op.flags = NB;
	op.timeout_ms = 100;
	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &pause));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_TIMEOUT, res.reason);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);	/* maybe released is released */
	EXPECT_EQ(W, st.unconfirmed);
	/* Until the agent says what it did, no release may start. */
	EXPECT_EQ(-EBUSY, gs_release(self->ctl, KV, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_BUSY, op.reason);
	/* The late confirmation makes the state follow the agent. */
	ASSERT_EQ(0, gs_answer(self->agent, &pause, 0, 4096));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_EQ(4096, st.bytes_released[0]);
	/* A second late answer is stale. */
	EXPECT_EQ(-ESTALE, gs_answer(self->agent, &pause, 0, 4096));
	(void)ev;
}

TEST_F(proc, agent_timeout_keeps_scheduler_paused)
{
	struct gpusleep_op op;
	struct gpusleep_event ev, pause;
	struct gpusleep_state st;

	/* The engine is this process; the agent reads the pause, no answer. */
	memset(&op, 0, sizeof(op));
	op.tags = W;
	op.flags = NB;
	op.timeout_ms = 100;
	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &pause));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	/* The agent may be unmapping right now: no resume for the engine. */
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 0));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_AGENT_UNCONFIRMED);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	/* The agent says it did nothing after all: now it may resume. */
	ASSERT_EQ(0, gs_answer(self->agent, &pause, -EIO, 0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_AGENT_UNCONFIRMED);
	EXPECT_EQ(0, st.released);
}

TEST_F(proc, late_kv_resume_is_repaired_before_scheduling)
{
	struct gpusleep_op op;
	struct gpusleep_event ev, late;
	struct gpusleep_state st;

	/* Release kv_cache, driven by hand. */
	ASSERT_EQ(0, gs_release(self->ctl, KV, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, KV, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0,
				    1));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	/* Resume it; the agent answers only after the step timed out. */
	memset(&op, 0, sizeof(op));
	op.flags = NB;
	op.timeout_ms = 100;
	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RESUME, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, &late));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_answer(self->agent, &late, 0, 1));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_KV_REPAIR_PENDING);
	/* Fresh KV pages, never repaired: the engine must not schedule. */
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 0));
	/* A default resume has nothing to remap but repairs KV first. */
	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0,
				    0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_KV_REPAIR_PENDING);
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
}

TEST_F(proc, engine_step_timeout)
{
	struct gpusleep_op op;

	self->apid = spawn(&self->agent, -1, 0, 0, 0);
	/* Drain is answered, the cache reset is not. */
	memset(&op, 0, sizeof(op));
	op.flags = NB;
	op.timeout_ms = 100;
	ASSERT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_RELEASE, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, 0, 0, 0));
	struct gpusleep_result res;

	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-ETIMEDOUT, res.error);
	EXPECT_EQ(GPUSLEEP_R_ENGINE_TIMEOUT, res.reason);
	EXPECT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

TEST_F(proc, sigkill_engine_mid_operation)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_state st;
	unsigned char t;
	uint64_t n = 0;
	int efd, a_st;

	efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, efd);
	ASSERT_EQ(0, gs_eventfd(self->ctl, efd, GPUSLEEP_EFD_OP_DONE));
	self->epid = spawn(&self->engine, self->elog[1], GPUSLEEP_EV_DRAIN, 0, 0);
	self->apid = spawn(&self->agent, -1, 0, 0, 0);
	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(1, read_log(self->elog[0], &t, 1));	/* drain seen */
	kill_reap(&self->epid);

	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-EOWNERDEAD, res.error);
	EXPECT_EQ(GPUSLEEP_R_ENGINE_GONE, res.reason);
	ASSERT_EQ(sizeof(n), read(efd, &n, sizeof(n)));
	EXPECT_LE(1, n);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_DEAD, st.state);
	/* The agent sees the hang-up and its loop ends by itself. */
	ASSERT_EQ(self->apid, waitpid(self->apid, &a_st, 0));
	self->apid = 0;
	EXPECT_TRUE(WIFEXITED(a_st));
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, self->id,
				     GPUSLEEP_ROLE_CONTROLLER));
	close(efd);
}

TEST_F(proc, sigkill_engine_wakes_blocked_releaser)
{
	unsigned char t;
	pid_t waiter;
	int st;

	self->epid = spawn(&self->engine, self->elog[1], GPUSLEEP_EV_DRAIN, 0, 0);
	waiter = fork();
	ASSERT_LE(0, waiter);
	if (waiter == 0) {
		struct gpusleep_op op;
		int r = gs_release(self->ctl, W, 0, &op);

		_exit(r == -EOWNERDEAD && op.reason == GPUSLEEP_R_ENGINE_GONE ?
		      0 : 1);
	}
	ASSERT_EQ(1, read_log(self->elog[0], &t, 1));
	kill_reap(&self->epid);
	ASSERT_EQ(waiter, waitpid(waiter, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

TEST_F(proc, sigkill_agent_mid_operation)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	struct gpusleep_state st;
	unsigned char t;
	int a2;

	self->epid = spawn(&self->engine, -1, 0, 0, 0);
	self->apid = spawn(&self->agent, self->alog[1], GPUSLEEP_EV_PAUSE_TAG,
			   0, 0);
	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(1, read_log(self->alog[0], &t, 1));	/* pause seen */
	kill_reap(&self->apid);

	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(-EPIPE, res.error);
	EXPECT_EQ(GPUSLEEP_R_AGENT_GONE, res.reason);
	/* It read the pause and died: weights may be unmapped. */
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(W, st.unconfirmed);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_AGENT_ATTACHED);
	/* "Not enabled" until an agent attaches again. */
	EXPECT_EQ(-ENOTCONN, gs_release(self->ctl, KV, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, op.reason);
	EXPECT_EQ(-ENOTCONN, gs_resume(self->ctl, 0, NB, &op));
	a2 = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, a2);
	self->apid = spawn(&a2, -1, 0, 0, 0);
	/* A resume maps them back through the new agent. */
	EXPECT_EQ(0, gs_resume(self->ctl, 0, 0, &op));
	EXPECT_EQ(0, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	EXPECT_EQ(0, gs_release(self->ctl, W, 0, &op));
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

TEST_F(proc, controller_dies_mid_wait)
{
	struct gpusleep_result res;
	struct gpusleep_event ev;
	pid_t c;

	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		gs_release(self->ctl, W, 0, NULL);	/* blocks */
		_exit(0);
	}
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	/* The operation goes on without its controller. */
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    1));
	ASSERT_EQ(0, gs_wait(self->ctl, ev.op_id, GS_WAIT_MS, &res));
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
}

/* A waiter process: its own controller fd, eventfd and epoll. */
static pid_t spawn_epoll_waiter(int dev, uint32_t id, uint32_t events,
				int ready_fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct epoll_event ee = { .events = EPOLLIN }, out;
		int c = gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER);
		int efd = eventfd(0, EFD_CLOEXEC);
		int ep = epoll_create1(EPOLL_CLOEXEC);
		uint64_t n = 0;
		char one = 1;

		if (c < 0 || efd < 0 || ep < 0 || gs_eventfd(c, efd, events) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ee))
			_exit(2);
		if (write(ready_fd, &one, 1) != 1)
			_exit(3);
		if (epoll_wait(ep, &out, 1, GS_WAIT_MS) != 1)
			_exit(4);
		if (read(efd, &n, sizeof(n)) != sizeof(n) || n < 1)
			_exit(5);
		_exit(0);
	}
	return pid;
}

TEST_F(proc, eventfd_wakes_epoll_waiter_in_other_process)
{
	struct gpusleep_op op;
	int ready[2], st;
	pid_t w;
	char c;

	ASSERT_EQ(0, pipe(ready));
	w = spawn_epoll_waiter(self->dev, self->id, GPUSLEEP_EFD_OP_DONE,
			       ready[1]);
	ASSERT_LE(0, w);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	self->epid = spawn(&self->engine, -1, 0, 0, 0);
	self->apid = spawn(&self->agent, -1, 0, 0, 0);
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(w, waitpid(w, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(ready[0]);
	close(ready[1]);
}

TEST_F(proc, eventfd_drained_fires_before_done)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;
	uint64_t n = 0;
	int efd;

	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ASSERT_LE(0, efd);
	ASSERT_EQ(0, gs_eventfd(self->ctl, efd, GPUSLEEP_EFD_DRAINED));
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	EXPECT_EQ(-1, read(efd, &n, sizeof(n)));	/* not yet */
	EXPECT_EQ(EAGAIN, errno);
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(sizeof(n), read(efd, &n, sizeof(n)));
	EXPECT_EQ(1, n);
	/* Only the drain: the pause step has not been answered. */
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 0));
	EXPECT_EQ(-1, read(efd, &n, sizeof(n)));	/* no OP_DONE bit */
	EXPECT_EQ(EAGAIN, errno);
	close(efd);
}

TEST_F(proc, eventfd_closed_controller_drops_registration)
{
	int c, efd;
	uint64_t n;

	c = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ASSERT_LE(0, efd);
	ASSERT_EQ(0, gs_eventfd(c, efd, GPUSLEEP_EFD_ALL));
	close(c);
	ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, NULL));	/* an op finishes */
	EXPECT_EQ(-1, read(efd, &n, sizeof(n)));
	EXPECT_EQ(EAGAIN, errno);
	close(efd);
}

static void on_usr1(int sig)
{
	(void)sig;
}

TEST_F(proc, interrupted_release_then_wait_by_id)
{
	struct gpusleep_event ev;
	unsigned char t;
	int rep[2], st;
	pid_t c;

	struct sigaction sa = { .sa_handler = on_usr1 };

	ASSERT_EQ(0, pipe(rep));
	self->apid = spawn(&self->agent, -1, 0, 0, 0);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));	/* no SA_RESTART */
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		struct gpusleep_result res;
		struct gpusleep_op op;
		int r;

		r = gs_release(self->ctl, W, 0, &op);
		if (r != -EINTR || !op.op_id)
			_exit(10);
		t = 1;
		if (write(rep[1], &t, 1) != 1)
			_exit(11);
		r = gs_wait(self->ctl, op.op_id, 0, &res);
		_exit(r == 0 && res.error == 0 && res.op_id == op.op_id ? 0 : 12);
	}
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	/* Interrupt until the child reports the EINTR. */
	for (;;) {
		struct pollfd p = { .fd = rep[0], .events = POLLIN };

		kill(c, SIGUSR1);
		if (poll(&p, 1, 50) == 1)
			break;
	}
	ASSERT_EQ(1, read(rep[0], &t, 1));
	/* The release kept going: finish it. */
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	close(rep[0]);
	close(rep[1]);
}

TEST_F(proc, interrupted_wait_returns_eintr)
{
	struct gpusleep_op op;
	int rep[2], st;
	unsigned char t;
	pid_t c;

	struct sigaction sa = { .sa_handler = on_usr1 };

	ASSERT_EQ(0, pipe(rep));
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	/* Installed before the fork: no SA_RESTART, so the wait sees it. */
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		int r;

		r = gs_wait(self->ctl, op.op_id, 0, NULL);
		t = r == -EINTR;
		_exit(write(rep[1], &t, 1) == 1 && t ? 0 : 1);
	}
	for (;;) {
		struct pollfd p = { .fd = rep[0], .events = POLLIN };

		kill(c, SIGUSR1);
		if (poll(&p, 1, 50) == 1)
			break;
	}
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* The operation is still in flight. */
	struct gpusleep_state s;

	ASSERT_EQ(0, gs_state(self->ctl, &s));
	EXPECT_EQ(op.op_id, s.op_in_flight);
	close(rep[0]);
	close(rep[1]);
}

/* Signal child c until it writes a report of n bytes to fd; read it. */
static int interrupt_until_report(pid_t c, int fd, void *rep, size_t n)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		kill(c, SIGUSR1);
		if (poll(&p, 1, 50) == 1)
			break;
	}
	return read(fd, rep, n) == (ssize_t)n ? 0 : -1;
}

/* read() that a stray SIGUSR1 (no SA_RESTART) does not end. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

/*
 * Release weights without waiting, then fork: the child's SIGUSR1 handler
 * has no SA_RESTART. fork()'s value, or -1.
 */
static pid_t release_then_fork(int ctl, struct gpusleep_op *a)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	if (gs_release(ctl, W, NB, a) || sigaction(SIGUSR1, &sa, NULL))
		return -1;
	return fork();
}

/* WAIT as w says, which a signal must end: 0 when it ended with EINTR. */
static int wait_interrupted(int ctl, struct gpusleep_wait *w)
{
	return ioctl(ctl, GPUSLEEP_IOC_WAIT, w) == -1 && errno == EINTR ?
	       0 : -1;
}

/*
 * WAIT for the newest operation (op_id 0), interrupted by a handler
 * without SA_RESTART: -EINTR, with result.op_id written (the operation it
 * was waiting for). A new WAIT for the newest, once another operation is in
 * flight, waits for that one: it must not pick up the interrupted call's
 * wait for the older, finished operation.
 */
TEST_F(proc, wait_for_the_newest_after_eintr_waits_for_the_newest)
{
	struct gpusleep_event ev;
	struct gpusleep_op a, b;
	int rep[2], go[2], st;
	uint64_t written;
	unsigned char t = 1;
	pid_t c;

	ASSERT_EQ(0, pipe(rep));
	ASSERT_EQ(0, pipe(go));
	c = release_then_fork(self->ctl, &a);
	ASSERT_LE(0, c);
	if (c == 0) {
		struct gpusleep_wait w;

		memset(&w, 0, sizeof(w));	/* op_id 0: the newest */
		if (wait_interrupted(self->ctl, &w))
			_exit(10);
		if (write(rep[1], &w.result.op_id, sizeof(w.result.op_id)) !=
		    sizeof(w.result.op_id) ||
		    read_full(go[0], &t, 1) != 1)
			_exit(11);
		memset(&w, 0, sizeof(w));	/* a new call: the newest */
		w.timeout_ms = 300;
		if (ioctl(self->ctl, GPUSLEEP_IOC_WAIT, &w) == 0)
			_exit(w.result.op_id == a.op_id ? 12 : 13);
		_exit(errno == ETIMEDOUT ? 0 : 14);
	}
	ASSERT_EQ(0, interrupt_until_report(c, rep[0], &written,
					    sizeof(written)));
	EXPECT_EQ(a.op_id, written);
	/* The release goes on: finish it, then start a resume and hold it. */
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_finish(self->ctl, a.op_id, NULL));
	ASSERT_EQ(0, gs_resume(self->ctl, W, NB, &b));
	ASSERT_EQ(1, write(go[1], &t, 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	/* 12: the new call returned the interrupted call's older result. */
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(rep[0]);
	close(rep[1]);
	close(go[0]);
	close(go[1]);
}

/*
 * WAIT with a timeout, interrupted by a handler without SA_RESTART:
 * -EINTR, with result.op_id written and its inputs (op_id, timeout_ms)
 * as they were: the kernel keeps nothing of it. A new WAIT for the
 * same operation, without a timeout, well after the first one's deadline,
 * waits until the operation ends: it has its own timeout, not the
 * interrupted call's deadline.
 */
TEST_F(proc, wait_after_eintr_has_its_own_timeout)
{
	struct gpusleep_wait written;
	struct gpusleep_event ev;
	struct gpusleep_op a;
	int rep[2], st;
	unsigned char t;
	pid_t c;

	ASSERT_EQ(0, pipe(rep));
	c = release_then_fork(self->ctl, &a);
	ASSERT_LE(0, c);
	if (c == 0) {
		struct gpusleep_wait w;

		memset(&w, 0, sizeof(w));
		w.op_id = a.op_id;
		w.timeout_ms = 300;
		if (wait_interrupted(self->ctl, &w))
			_exit(10);
		if (write(rep[1], &w, sizeof(w)) != sizeof(w))
			_exit(11);
		usleep(600 * 1000);	/* past the first call's deadline */
		t = 1;
		if (write(rep[1], &t, 1) != 1)
			_exit(11);
		memset(&w, 0, sizeof(w));
		w.op_id = a.op_id;	/* timeout_ms 0: until it ends */
		if (ioctl(self->ctl, GPUSLEEP_IOC_WAIT, &w))
			_exit(errno == ETIMEDOUT ? 12 : 13);
		_exit(w.result.op_id == a.op_id && !w.result.error ? 0 : 14);
	}
	ASSERT_EQ(0, interrupt_until_report(c, rep[0], &written,
					    sizeof(written)));
	EXPECT_EQ(a.op_id, written.op_id);
	EXPECT_EQ(a.op_id, written.result.op_id);
	EXPECT_EQ(300, written.timeout_ms);
	ASSERT_EQ(1, read_full(rep[0], &t, 1));
	usleep(300 * 1000);	/* let it block; ending earlier proves nothing */
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	/* 12: the new call timed out at the interrupted call's deadline. */
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(rep[0]);
	close(rep[1]);
}

static int errno_ok(int r)
{
	switch (r) {
	case 0:
	case -EALREADY:	/* tags already released */
	case -EBUSY:	/* another op in flight */
	case -ENOENT:	/* explicit tags not released */
	case -ECANCELED:/* resumed before drained */
	case -EINTR:
		return 1;
	default:
		return 0;
	}
}

static unsigned int stress_seconds(void)
{
	const char *s = getenv("GS_STRESS_SECONDS");

	return s ? (unsigned int)atoi(s) : 10;
}

TEST_F_TIMEOUT(proc, racing_controllers, 120)
{
	unsigned int secs = stress_seconds();
	pid_t kids[4];
	int i, st;
	struct gpusleep_state s;

	self->epid = spawn(&self->engine, -1, 0, 0, 0);
	self->apid = spawn(&self->agent, -1, 0, 0, 0);
	for (i = 0; i < 4; i++) {
		kids[i] = fork();
		ASSERT_LE(0, kids[i]);
		if (kids[i] == 0) {
			time_t end = time(NULL) + secs;
			unsigned int seed = getpid();
			int c = gs_attach(self->dev, self->id,
					  GPUSLEEP_ROLE_CONTROLLER);

			if (c < 0)
				_exit(2);
			while (time(NULL) < end) {
				uint32_t tags = rand_r(&seed) % 4;
				uint32_t fl = rand_r(&seed) % 2 ? NB : 0;
				int r;

				if (rand_r(&seed) % 2)
					r = gs_release(c, tags, fl, NULL);
				else
					r = gs_resume(c, tags, fl, NULL);
				if (!errno_ok(r)) {
					fprintf(stderr, "# unexpected %d\n", r);
					_exit(3);
				}
				ioctl(c, GPUSLEEP_IOC_IS_SLEEPING, 0);
			}
			_exit(0);
		}
	}
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(kids[i], waitpid(kids[i], &st, 0));
		EXPECT_TRUE(WIFEXITED(st));
		EXPECT_EQ(0, WEXITSTATUS(st));
	}
	/* Settle: wait for the last op, then a default resume wakes all. */
	gs_wait(self->ctl, 0, GS_WAIT_MS, NULL);
	ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &s));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, s.state);
	EXPECT_EQ(0, s.released);
	EXPECT_EQ(0, s.flags & GPUSLEEP_SF_SCHED_PAUSED);
}

TEST_HARNESS_MAIN
