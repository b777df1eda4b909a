// SPDX-License-Identifier: GPL-2.0
/*
 * The engine contract: the engine never runs on memory that may be gone,
 * and the state never says awake while a tag may be unmapped, whatever
 * fails. One test per failure mode (issue 12), then a randomised run that
 * checks the two rules after every step:
 *   - the engine may schedule (the newest record it read carries
 *     GPUSLEEP_EVF_MAY_SCHEDULE) only while every tag is mapped;
 *   - a final resume always brings the domain back to awake, mapped.
 * The test plays engine, agent and controller itself, so it sees every
 * record; blocking calls run in child processes.
 */
#include <pthread.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>

#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK
#define GO	GPUSLEEP_EVF_MAY_SCHEDULE

FIXTURE(c) {
	int dev, engine, agent, ctl;
	uint32_t id;
};

FIXTURE_SETUP(c)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	/* Shared: some tests play the engine in a forked child. */
	self->engine = gs_create_flags(self->dev, "contract", 0,
				       GPUSLEEP_CREATEF_SHARED, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(c)
{
	if (self->dev < 0)
		return;
	close(self->ctl);
	if (self->agent >= 0)
		close(self->agent);
	close(self->engine);
	close(self->dev);
}

/* Drive a release of tags to success (this process plays every role). */
static int release_ok(int ctl, int engine, int agent, uint32_t tags)
{
	struct gpusleep_op op;
	int r = gs_start(ctl, GPUSLEEP_IOC_RELEASE, tags, 0, &op);

	if (!r)
		r = gs_answer_next(engine, GPUSLEEP_EV_DRAIN, tags, 0, 0);
	if (!r && (tags & KV))
		r = gs_answer_next(engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0);
	if (!r && (tags & W))
		r = gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 100);
	if (!r && (tags & KV))
		r = gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0, 200);
	return r ? r : gs_finish(ctl, op.op_id, NULL);
}

static int no_record(int fd)
{
	struct gpusleep_event ev;

	return gs_next(fd, &ev, 0) == -ETIMEDOUT;
}

/* Records waiting on fd, all read (non-blocking). */
static int drain_records(int fd, struct gpusleep_event *last)
{
	struct gpusleep_event ev;
	int n = 0;

	while (!gs_next(fd, &ev, 0)) {
		n++;
		if (last)
			*last = ev;
	}
	return n;
}

/* ---------------------------------------------------- 1. level, not edge */

TEST_F(c, records_carry_the_scheduling_level)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	EXPECT_EQ(0, ev.flags & GO);
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(GO, ev.flags & GO);
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/*
 * Weights released; a release of kv_cache fails in its drain: the engine
 * is told to stop draining, never to go, and scheduling stays paused.
 */
TEST_F(c, failed_drain_with_weights_released_is_not_go)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, KV, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, KV, -EIO, 0));
	ASSERT_EQ(-EIO, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN_CANCELLED, 0, &ev));
	EXPECT_EQ(0, ev.flags & GO);
	EXPECT_TRUE(no_record(self->engine));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
}

/* The same when a resume cancels the drain: its RESUME_TAG is not done. */
TEST_F(c, cancelled_drain_during_resume_is_not_go)
{
	struct gpusleep_event ev, rt;
	struct gpusleep_op rel, res;
	struct gpusleep_result r;

	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, KV, 0, &rel));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, KV, &ev));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &res));
	ASSERT_EQ(-ECANCELED, gs_finish(self->ctl, rel.op_id, &r));
	EXPECT_EQ(GPUSLEEP_R_CANCELLED, r.reason);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN_CANCELLED, 0, &ev));
	EXPECT_EQ(0, ev.flags & GO);
	EXPECT_TRUE(no_record(self->engine));	/* weights not back yet */
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &rt));
	EXPECT_TRUE(no_record(self->engine));
	ASSERT_EQ(0, gs_answer(self->agent, &rt, 0, 100));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(GO, ev.flags & GO);
	ASSERT_EQ(0, gs_finish(self->ctl, res.op_id, NULL));
}

/* ------------------------------------------ 2. maybe-released is released */

/* The agent read PAUSE_TAG and never answered: the tag counts released. */
TEST_F(c, unanswered_pause_counts_as_released)
{
	struct gpusleep_event pause;
	struct gpusleep_state st;
	struct gpusleep_result r;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &pause));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, &r));
	EXPECT_EQ(GPUSLEEP_R_AGENT_TIMEOUT, r.reason);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(W, st.unconfirmed);
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_AGENT_UNCONFIRMED);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_EQ(1, ioctl(self->ctl, GPUSLEEP_IOC_IS_SLEEPING, 0));
	EXPECT_TRUE(no_record(self->engine));	/* no go */
}

/* ... then the agent dies, a new one attaches, and a resume remaps it. */
TEST_F(c, unanswered_pause_then_agent_dies_then_resume_remaps)
{
	struct gpusleep_event pause, ev;
	struct gpusleep_state st;
	struct gpusleep_op op;
	int explicit;

	for (explicit = 0; explicit < 2; explicit++) {
		ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
		ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W,
					    0, 0));
		ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				       &pause));
		ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
		close(self->agent);
		ASSERT_EQ(0, gs_state(self->ctl, &st));
		EXPECT_EQ(W, st.released);
		EXPECT_EQ(W, st.unconfirmed);
		self->agent = gs_attach(self->dev, self->id,
					GPUSLEEP_ROLE_AGENT);
		ASSERT_LE(0, self->agent);
		ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME,
				   explicit ? W : 0, 0, &op));
		/* Still mapped after all: the agent says so, with its bytes. */
		ASSERT_EQ(0, gs_answer_next(self->agent,
					    GPUSLEEP_EV_RESUME_TAG, W, 0, 100));
		ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED,
				       0, &ev));
		EXPECT_EQ(GO, ev.flags & GO);
		ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
		ASSERT_EQ(0, gs_state(self->ctl, &st));
		EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
		EXPECT_EQ(0, st.released);
		EXPECT_EQ(0, st.unconfirmed);
		EXPECT_EQ(0, st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	}
}

/* A pause the agent never read is taken back: nothing was unmapped. */
TEST_F(c, unread_pause_is_taken_back)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_TRUE(no_record(self->agent));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.unconfirmed);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
}

/* A failed pause that left bytes unmapped keeps the tag released. */
TEST_F(c, failed_pause_with_bytes_left_unmapped_stays_released)
{
	struct gpusleep_state st;
	struct gpusleep_result r;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				    -ENOMEM, 4096));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, &r));
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, r.reason);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(0, st.unconfirmed);
	EXPECT_EQ(4096, st.bytes_released[0]);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_TRUE(no_record(self->engine));
}

/* A resume need not wait for a late agent: it maps the tag back. */
TEST_F(c, resume_while_agent_is_late)
{
	struct gpusleep_event pause, ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &pause));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	/* A release must still wait for the agent's word. */
	EXPECT_EQ(-EBUSY, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, KV, 0, &op));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	/* The agent finishes the pause late, then remaps. */
	ASSERT_EQ(0, gs_answer(self->agent, &pause, 0, 100));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(0, st.unconfirmed);
	EXPECT_TRUE(no_record(self->engine));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
}

/* ------------------------------------------ 3. no notification is lost */

/*
 * Step records the engine never reads pile up no more: each is taken back
 * when its step times out, so the queue never fills and the records the
 * engine finally reads agree with the kernel's scheduling level.
 */
TEST_F(c, unread_engine_steps_never_fill_the_queue)
{
	struct gpusleep_event last;
	struct gpusleep_state st;
	struct gpusleep_result r;
	struct gpusleep_op op;
	int i, n;

	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, KV));
	/* kv_cache comes back; the engine never reads the repair. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 5, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0,
				    200));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, &r));
	EXPECT_EQ(GPUSLEEP_R_ENGINE_TIMEOUT, r.reason);
	for (i = 0; i < 80; i++) {
		ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 5, &op));
		ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, &r));
		ASSERT_EQ(GPUSLEEP_R_ENGINE_TIMEOUT, r.reason);
	}
	n = drain_records(self->engine, &last);
	EXPECT_GE(2, n);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_KV_REPAIR_PENDING);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	if (n)
		EXPECT_EQ(0, last.flags & GO);
	/* A release now is not refused for a full queue. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	/* And the repair still comes before scheduling does. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0, 0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &last));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/* ---------------------------------- 4. return values are the uAPI's own */

static const int peer_errnos[] = { EINTR, ENOTTY, ENODEV, ERESTART, EIO };

TEST_F(c, agent_errno_is_not_the_return_value)
{
	struct gpusleep_result r;
	pid_t agent;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(peer_errnos); i++) {
		struct gs_responder rs = {
			.fail = GPUSLEEP_EV_PAUSE_TAG,
			.fail_status = -peer_errnos[i], .log_fd = -1,
		};
		pid_t eng = gs_spawn_responder(self->engine, NULL);
		struct gpusleep_op op;

		agent = gs_spawn_responder(self->agent, &rs);
		EXPECT_EQ(-EREMOTEIO, gs_release(self->ctl, W, 0, &op));
		EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, op.reason);
		ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &r));
		EXPECT_EQ(-peer_errnos[i], r.error);
		EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, r.reason);
		kill(agent, SIGKILL);
		kill(eng, SIGKILL);
		gs_reap(agent);
		gs_reap(eng);
	}
}

TEST_F(c, engine_errno_is_not_the_return_value)
{
	struct gpusleep_result r;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(peer_errnos); i++) {
		struct gs_responder rs = {
			.fail = GPUSLEEP_EV_DRAIN,
			.fail_status = -peer_errnos[i], .log_fd = -1,
		};
		pid_t eng = gs_spawn_responder(self->engine, &rs);
		struct gpusleep_op op;

		EXPECT_EQ(-EREMOTEIO, gs_release(self->ctl, W, 0, &op));
		EXPECT_EQ(GPUSLEEP_R_ENGINE_FAILED, op.reason);
		ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, &r));
		EXPECT_EQ(-peer_errnos[i], r.error);
		kill(eng, SIGKILL);
		gs_reap(eng);
	}
}

/* ------------------------------ 5. interrupted calls keep nothing */

static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

/*
 * A child blocked in RELEASE. An interrupted RELEASE returns -EINTR with
 * its op id, after a stop signal and with SA_RESTART too (a restart would
 * start another release): the child then waits for that id, as
 * libgpusleep's callers do. Exit status: 0 when the operation succeeded,
 * else its result's error; 97 when the RELEASE was not interrupted.
 */
static pid_t blocked_release(int ctl, int sa_restart, int ready)
{
	pid_t c = fork();

	if (c == 0) {
		struct sigaction sa = { .sa_handler = on_usr1,
					.sa_flags = sa_restart ? SA_RESTART : 0 };
		struct gpusleep_result res;
		struct gpusleep_op op;
		unsigned char t = 1;
		int r;

		sigaction(SIGUSR1, &sa, NULL);
		if (write(ready, &t, 1) != 1)
			_exit(99);
		r = gs_release(ctl, W, 0, &op);
		if (r != -EINTR || !op.op_id)
			_exit(97);
		do
			r = gs_wait(ctl, op.op_id, 0, &res);
		while (r == -EINTR);
		if (!r)
			r = res.op_id == op.op_id ? res.error : -EPROTO;
		_exit(r < 0 ? -r : 0);
	}
	return c;
}

static int wait_stopped(pid_t c)
{
	int st;

	return waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st) ? 0 : -1;
}

TEST_F(c, stopped_blocking_release_returns_eintr_with_its_op)
{
	struct gpusleep_event ev;
	struct gpusleep_state s;
	int p[2], st;
	unsigned char t;
	pid_t c;

	ASSERT_EQ(0, pipe(p));
	c = blocked_release(self->ctl, 0, p[1]);
	ASSERT_EQ(1, read(p[0], &t, 1));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	ASSERT_EQ(0, kill(c, SIGSTOP));
	ASSERT_EQ(0, wait_stopped(c));
	ASSERT_EQ(0, kill(c, SIGCONT));
	/* Still the one operation: nothing restarted, nothing new. */
	ASSERT_EQ(0, gs_state(self->ctl, &s));
	EXPECT_EQ(ev.op_id, s.op_in_flight);
	EXPECT_EQ(ev.op_id, s.last_op_id);
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

TEST_F(c, sa_restart_handler_does_not_restart_a_blocking_release)
{
	struct gpusleep_event ev;
	struct gpusleep_state s;
	int p[2], st, i;
	unsigned char t;
	pid_t c;

	ASSERT_EQ(0, pipe(p));
	c = blocked_release(self->ctl, 1, p[1]);
	ASSERT_EQ(1, read(p[0], &t, 1));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	for (i = 0; i < 5; i++) {
		kill(c, SIGUSR1);
		usleep(20000);
	}
	/* One operation in flight: not started again. */
	ASSERT_EQ(0, gs_state(self->ctl, &s));
	EXPECT_EQ(ev.op_id, s.op_in_flight);
	EXPECT_EQ(ev.op_id, s.last_op_id);
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	/* 97: the SA_RESTART handler restarted the release. */
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

/*
 * A WAIT with a timeout is never restarted, by a stop signal nor by an
 * SA_RESTART handler (its timeout would start again): -EINTR, with
 * result.op_id the operation it waited for and its inputs as they were,
 * for the caller to go on to its own deadline.
 */
TEST_F(c, timed_wait_is_never_restarted)
{
	struct gpusleep_op op;
	struct gpusleep_wait *w;
	int st, i, stop;
	pid_t c;

	w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, w);
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 60000, &op));
	for (stop = 0; stop < 2; stop++) {
		memset(w, 0, sizeof(*w));
		w->op_id = op.op_id;
		w->timeout_ms = 60000;
		st = -1;
		c = fork();
		ASSERT_LE(0, c);
		if (c == 0) {
			struct sigaction sa = { .sa_handler = on_usr1,
						.sa_flags = SA_RESTART };

			sigaction(SIGUSR1, &sa, NULL);
			_exit(ioctl(self->ctl, GPUSLEEP_IOC_WAIT, w) ?
			      errno : 0);
		}
		/* Until it returns: a signal before its wait is not seen. */
		for (i = 0; i < 400 && waitpid(c, &st, WNOHANG) != c; i++) {
			usleep(50000);
			if (!stop) {
				kill(c, SIGUSR1);
			} else if (kill(c, SIGSTOP) == 0) {
				if (waitpid(c, &st, WUNTRACED) == c &&
				    !WIFSTOPPED(st))
					break;
				kill(c, SIGCONT);
			}
		}
		ASSERT_TRUE(WIFEXITED(st));
		EXPECT_EQ(EINTR, WEXITSTATUS(st));
		EXPECT_EQ(op.op_id, w->result.op_id);
		EXPECT_EQ(0, w->result.kind);
		EXPECT_EQ(op.op_id, w->op_id);
		EXPECT_EQ(60000, w->timeout_ms);
	}
	/* The operation went on. */
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	EXPECT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	munmap(w, sizeof(*w));
}

/*
 * A WAIT for a named op_id without a timeout asks the same whenever it is
 * asked: stop signals and SA_RESTART handlers restart it transparently,
 * and it returns the operation's result.
 */
TEST_F(c, untimed_wait_by_id_restarts)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int p[2], st, i;
	unsigned char t = 1;
	pid_t c;

	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 60000, &op));
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		struct sigaction sa = { .sa_handler = on_usr1,
					.sa_flags = SA_RESTART };
		struct gpusleep_result res;
		int r;

		sigaction(SIGUSR1, &sa, NULL);
		if (write(p[1], &t, 1) != 1)
			_exit(99);
		r = gs_wait(self->ctl, op.op_id, 0, &res);
		if (!r && !handled)
			_exit(98);	/* never interrupted: no test */
		_exit(r ? -r : res.op_id == op.op_id && !res.error ? 0 : 96);
	}
	ASSERT_EQ(1, read(p[0], &t, 1));
	for (i = 0; i < 10; i++) {
		usleep(30000);
		if (i & 1) {
			kill(c, SIGUSR1);
		} else {
			ASSERT_EQ(0, kill(c, SIGSTOP));
			ASSERT_EQ(0, wait_stopped(c));
			ASSERT_EQ(0, kill(c, SIGCONT));
		}
	}
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0, 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

/* ----------------------- 6. a result outlives the call that asked it */

/*
 * A releaser stopped through the end of its operation and 10 more (fewer
 * than the 16 results a domain remembers) returns -EINTR once continued,
 * and finds its operation's result by id: the caller keeps the id, the
 * kernel keeps nothing of the call.
 */
TEST_F(c, stopped_release_finds_its_result_by_id)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int p[2], st, i;
	unsigned char t;
	pid_t c;

	ASSERT_EQ(0, pipe(p));
	c = blocked_release(self->ctl, 0, p[1]);
	ASSERT_EQ(1, read(p[0], &t, 1));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	/* The releaser sleeps through the end of its operation... */
	ASSERT_EQ(0, kill(c, SIGSTOP));
	ASSERT_EQ(0, wait_stopped(c));
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				    -EIO, 0));
	/* ... and through 10 more. */
	for (i = 0; i < 10; i++)
		ASSERT_EQ(0, gs_resume(self->ctl, 0, 0, &op));
	ASSERT_EQ(0, kill(c, SIGCONT));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	/* The result's error: the failing agent's own status. */
	EXPECT_EQ(EIO, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

/* ------------------------------------------------ 7. ASCII-only names */

static int create_raw(int dev, const char *name, const char *gpu)
{
	struct gpusleep_create cr;
	int fd;

	memset(&cr, 0, sizeof(cr));
	memcpy(cr.name, name, strlen(name));
	memcpy(cr.gpu, gpu, strlen(gpu));
	fd = ioctl(dev, GPUSLEEP_IOC_CREATE_DOMAIN, &cr);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return -errno;
}

TEST_F(c, names_are_printable_ascii)
{
	EXPECT_EQ(-EINVAL, create_raw(self->dev, "caf\xe9\xff", "gpu"));
	EXPECT_EQ(-EINVAL, create_raw(self->dev, "\xc0\xc1", "gpu"));
	EXPECT_EQ(-EINVAL, create_raw(self->dev, "a\x7f", "gpu"));
	EXPECT_EQ(-EINVAL, create_raw(self->dev, "ok", "gpu \xe9"));
	EXPECT_EQ(-EINVAL, create_raw(self->dev, "ok", "gpu\t0"));
	EXPECT_EQ(0, create_raw(self->dev, "llm-0.rank_1:a@b", "GPU 0 (x~y)"));
}

/* ----------------------------------------- what came free, what was lost */

static int answer_tag(int fd, const struct gpusleep_event *ev, int status,
		      uint64_t bytes, uint64_t freed, uint64_t lost,
		      uint32_t flags)
{
	struct gpusleep_complete c;

	memset(&c, 0, sizeof(c));
	c.op_id = ev->op_id;
	c.step = ev->step;
	c.type = ev->type;
	c.status = status;
	c.bytes = bytes;
	c.freed_bytes = freed;
	c.lost_bytes = lost;
	c.flags = flags;
	return gs_err(ioctl(fd, GPUSLEEP_IOC_COMPLETE, &c));
}

/* The agent's measure of freed memory reaches the result and the state. */
TEST_F(c, freed_bytes_and_shortfall_are_shown)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_result r;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, ALL, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, ALL, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	/* Flags belong to tag answers, and only known ones. */
	EXPECT_EQ(-EINVAL, answer_tag(self->agent, &ev, 0, 100, 100, 0, 1U << 7));
	ASSERT_EQ(0, answer_tag(self->agent, &ev, 0, 100 << 20, 100 << 20, 0,
				GPUSLEEP_CF_MEASURED));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV, &ev));
	ASSERT_EQ(0, answer_tag(self->agent, &ev, 0, 200 << 20, 50 << 20, 0,
				GPUSLEEP_CF_MEASURED | GPUSLEEP_CF_SHORTFALL));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, &r));
	EXPECT_EQ(100 << 20, r.freed_bytes[0]);
	EXPECT_EQ(50 << 20, r.freed_bytes[1]);
	EXPECT_EQ(KV, r.shortfall_tags);
	EXPECT_EQ(0, r.lost_tags);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(KV, st.shortfall);
	EXPECT_EQ(50 << 20, st.freed_bytes[1]);
	/* Mapped again: nothing is short any more. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0, 1));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0, 1));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0, 0));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.shortfall);
	EXPECT_EQ(0, st.freed_bytes[1]);
}

/* A failed pause that lost KV contents: KV is repaired before any go. */
TEST_F(c, lost_kv_contents_are_repaired_before_scheduling)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_result r;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, KV, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, KV, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV, &ev));
	/* It failed, mapped everything back, but the contents are zeros. */
	ASSERT_EQ(0, answer_tag(self->agent, &ev, -ENOMEM, 0, 0, 4096, 0));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, &r));
	EXPECT_EQ(KV, r.lost_tags);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_KV_REPAIR_PENDING);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	EXPECT_TRUE(no_record(self->engine));	/* no go */
	/* A resume repairs it, then says go. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0, 0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/* ------------------------------- 8. a read that faults (issue 26, 14) */

/*
 * A page whose first touch waits in userfaultfd until *uffd reports it:
 * a copy_to_user() into it sleeps, so the test can end the step first.
 * NULL (errno set) when userfaultfd is unavailable.
 */
static void *uffd_page(int *uffd, size_t len)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	void *p;

	*uffd = syscall(__NR_userfaultfd, O_CLOEXEC);
	if (*uffd < 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		goto err_close;
	memset(&reg, 0, sizeof(reg));
	reg.range.start = (unsigned long)p;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(*uffd, UFFDIO_API, &api) ||
	    ioctl(*uffd, UFFDIO_REGISTER, &reg))
		goto err_unmap;
	return p;

err_unmap:
	munmap(p, len);
err_close:
	close(*uffd);
	return NULL;
}

struct faulty_read {
	int fd;
	void *buf;
	int err;	/* read()'s errno, 0 if it read */
};

static void *faulty_reader(void *arg)
{
	struct faulty_read *fr = arg;

	fr->err = read(fr->fd, fr->buf, sizeof(struct gpusleep_event)) < 0 ?
		  errno : 0;
	return NULL;
}

#define NO_UFFD	(-2)	/* no userfaultfd in this kernel: skip */

/*
 * The reader of fd takes its next record and faults copying it; while it
 * waits, during(arg) runs; then the copy fails. Returns read()'s errno
 * (EFAULT), NO_UFFD, or -1 with the reason printed.
 */
static int read_faults_during(int fd, int (*during)(void *), void *arg)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct faulty_read fr = { .fd = fd };
	struct pollfd p;
	struct uffd_msg msg;
	pthread_t th;
	int uffd, r;

	fr.buf = uffd_page(&uffd, pg);
	if (!fr.buf) {
		fprintf(stderr, "# userfaultfd: %s\n", strerror(errno));
		return errno == ENOSYS ? NO_UFFD : -1;
	}
	if (pthread_create(&th, NULL, faulty_reader, &fr))
		return -1;
	/* The reader took the record and waits in its copy to the user. */
	p.fd = uffd;
	p.events = POLLIN;
	r = poll(&p, 1, GS_WAIT_MS) == 1 &&
	    read(uffd, &msg, sizeof(msg)) == sizeof(msg) ? 0 : -1;
	if (!r && during(arg)) {
		fprintf(stderr, "# what ran during the faulted read failed\n");
		r = -1;
	}
	/* The buffer goes: the woken copy fails. */
	munmap(fr.buf, pg);
	close(uffd);
	pthread_join(th, NULL);
	return r ? r : fr.err;
}

struct finish_arg {
	int ctl, want;
	uint64_t id;
};

static int finish_op(void *arg)
{
	struct finish_arg *f = arg;

	return gs_finish(f->ctl, f->id, NULL) != f->want;
}

/* While the read faults, op id's step ends (want: its result). */
static int read_faults_after(int fd, int ctl, uint64_t id, int want)
{
	struct finish_arg f = { .ctl = ctl, .want = want, .id = id };

	return read_faults_during(fd, finish_op, &f);
}

/*
 * The engine's read of DRAIN faults after the drain timed out: the
 * record is stale, so it does not come back; the engine reads "stop
 * draining" and "go", the state agrees, and the next release runs.
 */
TEST_F(c, faulted_read_puts_back_no_stale_step)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;
	int n = 0, go = 0, r;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 200, &op));
	r = read_faults_after(self->engine, self->ctl, op.op_id, -ETIMEDOUT);
	if (r == NO_UFFD)
		SKIP(return, "no userfaultfd (CONFIG_USERFAULTFD) in this kernel");
	ASSERT_EQ(EFAULT, r);
	while (!gs_next(self->engine, &ev, 0)) {
		EXPECT_NE(GPUSLEEP_EV_DRAIN, ev.type);
		go = !!(ev.flags & GO);
		n++;
	}
	EXPECT_LT(0, n);
	EXPECT_EQ(1, go);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_FALSE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, W));
}

/*
 * The agent's read of PAUSE_TAG faults after its step timed out: the
 * agent never saw it, so the tag is not released and no late answer is
 * awaited; the next release runs.
 */
TEST_F(c, faulted_agent_read_unreleases_the_tag)
{
	struct gpusleep_event ev = { .flags = 0 };
	struct gpusleep_state st;
	struct gpusleep_op op;
	int r;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 200, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	r = read_faults_after(self->agent, self->ctl, op.op_id, -ETIMEDOUT);
	if (r == NO_UFFD)
		SKIP(return, "no userfaultfd (CONFIG_USERFAULTFD) in this kernel");
	ASSERT_EQ(EFAULT, r);
	EXPECT_TRUE(no_record(self->agent));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_AGENT_UNCONFIRMED);
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	drain_records(self->engine, &ev);
	EXPECT_EQ(GO, ev.flags & GO);
	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, W));
}

struct drain_arg {
	int ctl, engine;
	struct gpusleep_op op;
};

/* A release of KV, drained and its cache reset by the engine. */
static int drain_kv(void *arg)
{
	struct drain_arg *a = arg;
	int r = gs_start(a->ctl, GPUSLEEP_IOC_RELEASE, KV, 0, &a->op);

	if (!r)
		r = gs_answer_next(a->engine, GPUSLEEP_EV_DRAIN, KV, 0, 0);
	if (!r)
		r = gs_answer_next(a->engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0);
	return r;
}

/*
 * One engine thread's read of a go (RESUME_SCHED) faults while another
 * thread reads and answers a new release's drain: the go no longer
 * holds, so it does not come back after the drain (the engine would
 * schedule while the agent unmaps); the tags it named come with the
 * next go.
 */
TEST_F(c, faulted_read_of_go_does_not_come_back_after_a_drain)
{
	struct drain_arg a = { .ctl = self->ctl, .engine = self->engine };
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;
	int r;

	ASSERT_EQ(0, release_ok(self->ctl, self->engine, self->agent, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    0));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	/* The engine's queue holds the go alone; its read faults. */
	r = read_faults_during(self->engine, drain_kv, &a);
	if (r == NO_UFFD)
		SKIP(return, "no userfaultfd (CONFIG_USERFAULTFD) in this kernel");
	ASSERT_EQ(EFAULT, r);
	while (!gs_next(self->engine, &ev, 0))
		EXPECT_EQ(0, ev.flags & GO);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_SCHED_PAUSED);
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0,
				    200));
	ASSERT_EQ(0, gs_finish(self->ctl, a.op.op_id, NULL));
	/* KV back: the go names both, weights from the go never seen. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, KV, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0,
				    0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0,
				    0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, W | KV,
			       &ev));
	EXPECT_EQ(GO, ev.flags & GO);
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/* ----------------------------------------------- randomised contract */

/*
 * The memory as the agent process sees it (mapped tags), the engine's
 * level (the newest record's MAY_SCHEDULE), and the one record each role
 * may hold unanswered. After every step: the engine may schedule only
 * with every tag mapped; the kernel's SCHED_PAUSED, once the engine has
 * read everything, agrees with the engine; SCHED_PAUSED is set whenever a
 * tag is released or unconfirmed.
 */
struct model {
	uint32_t mapped;
	int go;
	int held_engine, held_agent;
	struct gpusleep_event he, ha;
	unsigned int seed;
};

static unsigned int rnd(struct model *m, unsigned int n)
{
	return (unsigned int)rand_r(&m->seed) % n;
}

static int check_truth(struct __test_metadata *_metadata, int ctl,
		       struct model *m, int engine_caught_up)
{
	struct gpusleep_state st;

	if (gs_state(ctl, &st))
		return -1;
	if (m->go && m->mapped != ALL) {
		TH_LOG("engine may schedule with tags %#x unmapped",
		       ALL & ~m->mapped);
		return -1;
	}
	if ((ALL & ~m->mapped) & ~st.released) {
		TH_LOG("tags %#x unmapped but released only %#x",
		       ALL & ~m->mapped, st.released);
		return -1;
	}
	if ((st.released || st.unconfirmed) &&
	    !(st.flags & GPUSLEEP_SF_SCHED_PAUSED)) {
		TH_LOG("released %#x but scheduling not paused", st.released);
		return -1;
	}
	if (!st.released && st.state == GPUSLEEP_S_RELEASED) {
		TH_LOG("state released with nothing released");
		return -1;
	}
	if (engine_caught_up && m->go != !(st.flags & GPUSLEEP_SF_SCHED_PAUSED)) {
		TH_LOG("engine level %d, kernel flags %#x", m->go, st.flags);
		return -1;
	}
	return 0;
}

/* The engine reads what is queued; answers or holds steps at random. */
static void engine_step(struct model *m, int engine, int answer_all)
{
	struct gpusleep_event ev;

	if (m->held_engine && (answer_all || !rnd(m, 3))) {
		gs_answer(engine, &m->he, rnd(m, 5) || answer_all ? 0 : -EIO, 0);
		m->held_engine = 0;
	}
	while (!gs_next(engine, &ev, 0)) {
		m->go = !!(ev.flags & GO);
		if (!gs_needs_answer(ev.type))
			continue;
		switch (answer_all ? 0 : rnd(m, 6)) {
		case 0: case 1: case 2:
			gs_answer(engine, &ev, 0, 0);
			break;
		case 3:
			gs_answer(engine, &ev, -EIO, 0);
			break;
		default:
			m->he = ev;	/* answer later, or never */
			m->held_engine = 1;
			break;
		}
	}
}

/* The agent does what it is asked (really), answering now, late or never. */
static void agent_act(struct model *m, const struct gpusleep_event *ev)
{
	if (ev->type == GPUSLEEP_EV_PAUSE_TAG)
		m->mapped &= ~ev->tags;
	else if (ev->type == GPUSLEEP_EV_RESUME_TAG)
		m->mapped |= ev->tags;
}

static void agent_step(struct model *m, int agent, int answer_all)
{
	struct gpusleep_event ev;

	if (agent < 0)
		return;
	if (m->held_agent) {
		if (!answer_all && rnd(m, 3))
			return;	/* still busy with it */
		agent_act(m, &m->ha);
		gs_answer(agent, &m->ha, 0, 4096);
		m->held_agent = 0;
	}
	while (!gs_next(agent, &ev, 0)) {
		switch (answer_all ? 0 : rnd(m, 7)) {
		case 0: case 1: case 2: case 3:
			agent_act(m, &ev);
			gs_answer(agent, &ev, 0, 4096);
			break;
		case 4:	/* fails and rolls back: nothing changed */
			gs_answer(agent, &ev, -EIO, 0);
			break;
		case 5:	/* does it, then is slow to say so */
			agent_act(m, &ev);
			m->ha = ev;
			m->held_agent = 1;
			break;
		default:	/* read, nothing done yet, answers later */
			m->ha = ev;
			m->held_agent = 1;
			break;
		}
		if (m->held_agent)
			return;	/* one record at a time, in order */
	}
}

TEST_F_TIMEOUT(c, randomised_contract, 240)
{
	struct model m = { .mapped = ALL, .go = 1 };
	const char *s = getenv("GS_CONTRACT_STEPS");
	int steps = s ? atoi(s) : 400;
	struct gpusleep_state st;
	struct gpusleep_op op;
	unsigned int seed;
	int i, tries;

	seed = getenv("GS_CONTRACT_SEED") ?
	       (unsigned int)atoi(getenv("GS_CONTRACT_SEED")) :
	       (unsigned int)time(NULL);
	m.seed = seed;
	TH_LOG("seed %u, %d steps (GS_CONTRACT_SEED, GS_CONTRACT_STEPS)",
	       seed, steps);
	for (i = 0; i < steps; i++) {
		switch (rnd(&m, 8)) {
		case 0: case 1:
			gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, rnd(&m, 4),
			      rnd(&m, 2) ? 20 : 0, &op);
			break;
		case 2: case 3:
			gs_start(self->ctl, GPUSLEEP_IOC_RESUME,
			      rnd(&m, 3) ? 0 : 1 + rnd(&m, 3),
			      rnd(&m, 2) ? 20 : 0, &op);
			break;
		case 4:
			usleep(30000);	/* let step timers fire */
			break;
		case 5:
			if (self->agent >= 0 && !rnd(&m, 4)) {
				close(self->agent);	/* the agent dies */
				self->agent = -1;
				m.held_agent = 0;
			} else if (self->agent < 0) {
				self->agent = gs_attach(self->dev, self->id,
							GPUSLEEP_ROLE_AGENT);
				ASSERT_LE(0, self->agent);
			}
			break;
		default:
			break;
		}
		engine_step(&m, self->engine, 0);
		agent_step(&m, self->agent, 0);
		ASSERT_EQ(0, check_truth(_metadata, self->ctl, &m, 0)) {
			TH_LOG("step %d (seed %u)", i, seed);
		}
	}

	/* Whatever happened: an agent, answers, and a resume bring it back. */
	if (self->agent < 0) {
		self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
		ASSERT_LE(0, self->agent);
		m.held_agent = 0;
	}
	for (tries = 0; tries < 200; tries++) {
		engine_step(&m, self->engine, 1);
		agent_step(&m, self->agent, 1);
		ASSERT_EQ(0, gs_state(self->ctl, &st));
		if (st.op_in_flight) {
			usleep(10000);
			continue;
		}
		if (st.state == GPUSLEEP_S_AWAKE &&
		    !(st.flags & GPUSLEEP_SF_SCHED_PAUSED) && m.go)
			break;
		if (gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 2000, &op) == -EBUSY)
			usleep(10000);
	}
	engine_step(&m, self->engine, 1);
	ASSERT_EQ(0, check_truth(_metadata, self->ctl, &m, 1));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(ALL, m.mapped);
	EXPECT_EQ(1, m.go);
}

TEST_HARNESS_MAIN
