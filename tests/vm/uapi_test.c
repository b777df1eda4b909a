// SPDX-License-Identifier: GPL-2.0
/*
 * The uAPI's edges: one bad input per check, each with its errno, and the
 * access rules (owner uid or CAP_SYS_ADMIN) and limits.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include "kselftest_harness.h"
#include "gs_test.h"

FIXTURE(dev) {
	int dev;
};

FIXTURE_SETUP(dev)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->dev >= 0)
		close(self->dev);
}

static int create_raw(int dev, struct gpusleep_create *c)
{
	return gs_err(ioctl(dev, GPUSLEEP_IOC_CREATE_DOMAIN, c));
}

static void fill_create(struct gpusleep_create *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	snprintf(c->gpu, sizeof(c->gpu), "GPU-0000:3b:00.0");
}

TEST_F(dev, unknown_ioctl_on_device)
{
	EXPECT_EQ(-1, ioctl(self->dev, _IO(GPUSLEEP_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(ENOTTY, errno);
	/* A domain-fd command is unknown on the device. */
	EXPECT_EQ(-1, ioctl(self->dev, GPUSLEEP_IOC_IS_SLEEPING, 0));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, unknown_ioctl_on_domain)
{
	int e = gs_create(self->dev, "u1", 0, NULL);

	ASSERT_LE(0, e);
	EXPECT_EQ(-1, ioctl(e, _IO(GPUSLEEP_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(e, GPUSLEEP_IOC_CREATE_DOMAIN, NULL));
	EXPECT_EQ(ENOTTY, errno);
	close(e);
}

struct op_short { __u32 tags, flags; };
struct op_long { struct gpusleep_op op; __u64 more; };
struct state_long { struct gpusleep_state st; __u64 more[3]; };
struct event_long { struct gpusleep_event ev; __u64 more; };

TEST_F(dev, short_and_oversized_struct)
{
	struct op_short s = { 0 };
	struct op_long l;
	int e = gs_create(self->dev, "u2", 0, NULL);

	ASSERT_LE(0, e);
	/* Smaller than the first version: refused. */
	EXPECT_EQ(-1, ioctl(e, _IOWR(GPUSLEEP_IOC_MAGIC, 0x10, struct op_short),
			    &s));
	EXPECT_EQ(EINVAL, errno);
	/* A newer caller's tail this module does not know must be zero. */
	memset(&l, 0, sizeof(l));
	l.more = 1;
	EXPECT_EQ(-1, ioctl(e, _IOWR(GPUSLEEP_IOC_MAGIC, 0x10, struct op_long),
			    &l));
	EXPECT_EQ(E2BIG, errno);
	/* Zero: accepted, and understood (no agent: not enabled). */
	memset(&l, 0, sizeof(l));
	EXPECT_EQ(-1, ioctl(e, _IOWR(GPUSLEEP_IOC_MAGIC, 0x10, struct op_long),
			    &l));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, l.op.reason);
	/* Another direction is another command. */
	EXPECT_EQ(-1, ioctl(e, _IOW(GPUSLEEP_IOC_MAGIC, 0x10, struct gpusleep_op),
			    &l.op));
	EXPECT_EQ(ENOTTY, errno);
	close(e);
}

/* Output to a newer caller: what the module lacks reads as zero. */
TEST_F(dev, larger_output_struct_is_cleared)
{
	struct state_long sl;
	int e = gs_create(self->dev, "u3", 0, NULL);

	ASSERT_LE(0, e);
	memset(&sl, 0xcc, sizeof(sl));
	ASSERT_EQ(0, ioctl(e, _IOR(GPUSLEEP_IOC_MAGIC, 0x13, struct state_long),
			   &sl));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, sl.st.state);
	EXPECT_EQ(0, sl.more[0]);
	EXPECT_EQ(0, sl.more[2]);
	close(e);
}

/* Event records say their size; a larger buffer gets one record. */
TEST_F(dev, event_records_say_their_size)
{
	struct event_long el;
	struct gpusleep_op op;
	uint32_t id;
	int e, a, c;

	e = gs_create(self->dev, "u4", 0, &id);
	ASSERT_LE(0, e);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, a);
	ASSERT_LE(0, c);
	ASSERT_EQ(0, gs_release(c, GPUSLEEP_TAG_WEIGHTS, GPUSLEEP_OPF_NONBLOCK,
				&op));
	memset(&el, 0xcc, sizeof(el));
	EXPECT_EQ(-1, read(e, &el, GPUSLEEP_EVENT_SIZE_VER0 - 8));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(sizeof(struct gpusleep_event), read(e, &el, sizeof(el)));
	EXPECT_EQ(sizeof(struct gpusleep_event), el.ev.size);
	EXPECT_EQ(GPUSLEEP_EV_DRAIN, el.ev.type);
	EXPECT_EQ(0xccccccccccccccccULL, el.more);	/* not written */
	close(c);
	close(a);
	close(e);
}

/*
 * A step record carries its step's deadline (CLOCK_MONOTONIC): the time
 * it was sent plus the step timeout the operation asked for, so that the
 * agent can end its waits for the GPU in time. A notification carries 0,
 * and a reader of the first version's 40 bytes still gets its record.
 */
TEST_F(dev, step_records_carry_their_deadline)
{
	const uint64_t ms = 1000000, rel_ms = 7000, res_ms = 9000;
	struct gpusleep_event ev, drain;
	struct gpusleep_op op;
	uint64_t t0, t1;
	uint32_t id;
	int e, a, c;

	e = gs_create(self->dev, "u9", 0, &id);
	ASSERT_LE(0, e);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, a);
	ASSERT_LE(0, c);
	t0 = gs_mono_ns();
	ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RELEASE, GPUSLEEP_TAG_WEIGHTS,
			      rel_ms, &op));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN, 0, &drain));
	t1 = gs_mono_ns();
	EXPECT_EQ(sizeof(struct gpusleep_event), drain.size);
	EXPECT_LE(t0 + rel_ms * ms, drain.deadline_ns);
	EXPECT_GE(t1 + rel_ms * ms, drain.deadline_ns);
	/* the PAUSE_TAG step is sent while the drain is answered */
	t0 = gs_mono_ns();
	ASSERT_EQ(0, gs_answer(e, &drain, 0, 0));
	ASSERT_EQ(0, gs_expect(a, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_WEIGHTS,
			       &ev));
	t1 = gs_mono_ns();
	EXPECT_LE(t0 + rel_ms * ms, ev.deadline_ns);
	EXPECT_GE(t1 + rel_ms * ms, ev.deadline_ns);
	ASSERT_EQ(0, gs_answer(a, &ev, 0, GS_TAG_BYTES(ev.tags)));
	ASSERT_EQ(0, gs_finish(c, op.op_id, NULL));

	t0 = gs_mono_ns();
	ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RESUME, GPUSLEEP_TAG_WEIGHTS,
			      res_ms, &op));
	ASSERT_EQ(0, gs_expect(a, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_WEIGHTS,
			       &ev));
	t1 = gs_mono_ns();
	EXPECT_LE(t0 + res_ms * ms, ev.deadline_ns);
	EXPECT_GE(t1 + res_ms * ms, ev.deadline_ns);
	ASSERT_EQ(0, gs_answer(a, &ev, 0, GS_TAG_BYTES(ev.tags)));
	ASSERT_EQ(0, gs_finish(c, op.op_id, NULL));
	/* notifications (RESUME_SCHED) have no deadline */
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(0, ev.deadline_ns);

	/* a first-version reader: 40 bytes of a step record, the rest not */
	ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RELEASE, GPUSLEEP_TAG_WEIGHTS,
			      rel_ms, &op));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN, 0, &drain));
	ASSERT_EQ(0, gs_answer(e, &drain, 0, 0));
	{
		struct pollfd p = { .fd = a, .events = POLLIN };

		ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	}
	memset(&ev, 0xcc, sizeof(ev));
	ASSERT_EQ(GPUSLEEP_EVENT_SIZE_VER0,
		  read(a, &ev, GPUSLEEP_EVENT_SIZE_VER0));
	EXPECT_EQ(GPUSLEEP_EV_PAUSE_TAG, ev.type);
	EXPECT_EQ(GPUSLEEP_EVENT_SIZE_VER0, ev.size);	/* what it got */
	EXPECT_EQ(0xccccccccccccccccULL, ev.deadline_ns);	/* not written */
	ASSERT_EQ(0, gs_answer(a, &ev, 0, GS_TAG_BYTES(ev.tags)));
	ASSERT_EQ(0, gs_finish(c, op.op_id, NULL));
	close(c);
	close(a);
	close(e);
}

/*
 * Issue 35: read() hands out whole records only, of the largest version
 * that fits the buffer, and says in size which one it is: a buffer
 * between two versions gets the smaller one whole, never the start of
 * the larger one cut at the buffer's end.
 */
TEST_F(dev, read_returns_whole_record_versions)
{
	unsigned char buf[sizeof(struct gpusleep_event) + 16];
	struct gpusleep_event ev;
	struct gpusleep_op op;
	size_t sz;
	uint32_t id;
	int e, a, c;

	e = gs_create(self->dev, "whole", 0, &id);
	ASSERT_LE(0, e);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, a);
	ASSERT_LE(0, c);
	for (sz = GPUSLEEP_EVENT_SIZE_VER0 - 1; sz <= sizeof(buf); sz++) {
		size_t want = sz >= GPUSLEEP_EVENT_SIZE_VER1 ?
			      GPUSLEEP_EVENT_SIZE_VER1 :
			      GPUSLEEP_EVENT_SIZE_VER0;
		ssize_t n;

		ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RELEASE,
				      GPUSLEEP_TAG_WEIGHTS, 0, &op));
		memset(buf, 0xcc, sizeof(buf));
		n = read(e, buf, sz);
		if (sz < GPUSLEEP_EVENT_SIZE_VER0) {
			/* smaller than any record: refused, left queued */
			EXPECT_EQ(-1, n);
			EXPECT_EQ(EINVAL, errno);
			n = read(e, buf, sizeof(buf));
			want = GPUSLEEP_EVENT_SIZE_VER1;
		}
		ASSERT_EQ((ssize_t)want, n) TH_LOG("buffer of %zu bytes", sz);
		memcpy(&ev, buf, sizeof(ev));
		EXPECT_EQ(want, ev.size) TH_LOG("buffer of %zu bytes", sz);
		EXPECT_EQ(GPUSLEEP_EV_DRAIN, ev.type);
		EXPECT_EQ(op.op_id, ev.op_id);
		/* nothing past the record it says it is */
		EXPECT_EQ(0xcc, buf[want]) TH_LOG("buffer of %zu bytes", sz);
		/* called off: the engine is told to stop draining */
		ASSERT_EQ(0, gs_resume(c, 0, 0, NULL));
		ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN_CANCELLED, 0, &ev));
		ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	}
	close(c);
	close(a);
	close(e);
}

/*
 * In a child: enter a new time namespace whose CLOCK_MONOTONIC is off by
 * off_s seconds, read one record from fd there and send it back with the
 * child's CLOCK_MONOTONIC right after the read. 0; -errno: the
 * namespace could not be set up (the caller skips); > 0: the read failed.
 */
static int read_in_timens(int fd, long long off_s, struct gpusleep_event *ev,
			  uint64_t *now)
{
	int p[2], st, r = 0;
	char line[64];
	pid_t pid;

	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int ofd;
		pid_t kid;

		/* the offsets apply to the children made after unshare */
		if (unshare(CLONE_NEWTIME)) {
			r = -errno;
			goto out;
		}
		snprintf(line, sizeof(line), "monotonic %lld 0\n", off_s);
		ofd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
		if (ofd < 0 || write(ofd, line, strlen(line)) < 0) {
			r = -errno;
			goto out;
		}
		close(ofd);
		kid = fork();
		if (kid == 0) {
			struct gpusleep_event e;
			uint64_t t;
			int k;

			k = gs_next(fd, &e, GS_WAIT_MS);
			t = gs_mono_ns();
			k = k ? 1000 - k : 0;	/* a failed read: > 0 */
			if (write(p[1], &k, sizeof(k)) != sizeof(k) ||
			    (!k && (write(p[1], &e, sizeof(e)) != sizeof(e) ||
				    write(p[1], &t, sizeof(t)) != sizeof(t))))
				_exit(1);
			_exit(0);
		}
		_exit(kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st) ?
		      WEXITSTATUS(st) : 2);
out:
		(void)!write(p[1], &r, sizeof(r));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &r, sizeof(r)) != sizeof(r))
		r = -EIO;
	else if (!r && (read(p[0], ev, sizeof(*ev)) != sizeof(*ev) ||
			read(p[0], now, sizeof(*now)) != sizeof(*now)))
		r = -EIO;
	close(p[0]);
	waitpid(pid, &st, 0);
	return r;
}

/*
 * Issue 35, 4: a step's deadline is an absolute CLOCK_MONOTONIC time, so
 * it is handed out in the reader's time namespace: an agent restored by
 * CRIU into a namespace 100000 s ahead would otherwise read a deadline
 * long past, and one behind (a negative offset) a deadline too far off.
 */
TEST_F(dev, deadlines_are_in_the_readers_time_namespace)
{
	const uint64_t ms = 1000000, step_ms = 600000;
	long long offs[2] = { 100000, 0 };
	struct gpusleep_event drain, ev;
	struct gpusleep_op op;
	struct timespec up;
	uint64_t now;
	uint32_t id;
	int e, a, c, i, r;

	if (access("/proc/self/timens_offsets", F_OK))
		SKIP(return, "no time namespaces (CONFIG_TIME_NS)");
	/* behind: as far as the namespace's clock may go (not below 0) */
	clock_gettime(CLOCK_MONOTONIC, &up);
	offs[1] = -(long long)(up.tv_sec / 2);
	e = gs_create(self->dev, "timens", 0, &id);
	ASSERT_LE(0, e);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, a);
	ASSERT_LE(0, c);
	for (i = 0; i < 2; i++) {
		if (!offs[i])
			continue;
		ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RELEASE,
				      GPUSLEEP_TAG_WEIGHTS, step_ms, &op));
		ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN, 0, &drain));
		ASSERT_EQ(0, gs_answer(e, &drain, 0, 0));
		r = read_in_timens(a, offs[i], &ev, &now);
		if (r < 0)
			SKIP(break, "a time namespace: %s", strerror(-r));
		ASSERT_EQ(0, r);
		EXPECT_EQ(GPUSLEEP_EV_PAUSE_TAG, ev.type);
		/* ahead of the reader's now, by at most the step's timeout */
		EXPECT_LT(now, ev.deadline_ns) TH_LOG("offset %lld s", offs[i]);
		EXPECT_GE(now + step_ms * ms, ev.deadline_ns)
			TH_LOG("offset %lld s", offs[i]);
		ASSERT_EQ(0, gs_answer(a, &ev, 0, GS_TAG_BYTES(ev.tags)));
		ASSERT_EQ(0, gs_finish(c, op.op_id, NULL));
		ASSERT_EQ(0, gs_start(c, GPUSLEEP_IOC_RESUME, 0, 0, &op));
		ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0, 0, 0));
		ASSERT_EQ(0, gs_finish(c, op.op_id, NULL));
		ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	}
	close(c);
	close(a);
	close(e);
}

/*
 * Issue 35: arguments are checked before any state is read. A request
 * that is malformed (unknown flags, non-zero padding or reserved fields)
 * is EINVAL whatever the domain's state: without an agent, dead, or from
 * an agent fd that is no longer the agent.
 */
TEST_F(dev, malformed_requests_are_einval_before_state)
{
	struct gpusleep_complete cp;
	struct gpusleep_op op;
	uint32_t id;
	int e, a, c;

	e = gs_create(self->dev, "malformed", 0, &id);
	ASSERT_LE(0, e);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	/* no agent: the request's flags are wrong first */
	memset(&op, 0, sizeof(op));
	op.flags = 1u << 7;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(c, GPUSLEEP_IOC_RELEASE, &op)));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	memset(&op, 0, sizeof(op));
	op.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(c, GPUSLEEP_IOC_RELEASE, &op)));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, a);
	/* dead: every malformed request is still EINVAL, not ENODEV */
	close(e);
	memset(&op, 0, sizeof(op));
	op.pad = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(c, GPUSLEEP_IOC_RELEASE, &op)));
	memset(&op, 0, sizeof(op));
	op.flags = GPUSLEEP_OPF_ABORT_INFLIGHT;	/* a release's flag */
	EXPECT_EQ(-EINVAL, gs_err(ioctl(c, GPUSLEEP_IOC_RESUME, &op)));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	memset(&cp, 0, sizeof(cp));
	cp.type = GPUSLEEP_EV_RESUME_SCHED;	/* takes no answer */
	EXPECT_EQ(-EINVAL, gs_err(ioctl(a, GPUSLEEP_IOC_COMPLETE, &cp)));
	memset(&cp, 0, sizeof(cp));
	cp.type = GPUSLEEP_EV_PAUSE_TAG;
	cp.status = 1;				/* not 0 or -errno */
	EXPECT_EQ(-EINVAL, gs_err(ioctl(a, GPUSLEEP_IOC_COMPLETE, &cp)));
	memset(&cp, 0, sizeof(cp));
	cp.type = GPUSLEEP_EV_PAUSE_TAG;
	cp.flags = 1u << 9;			/* unknown */
	EXPECT_EQ(-EINVAL, gs_err(ioctl(a, GPUSLEEP_IOC_COMPLETE, &cp)));
	/* well-formed: the death is what counts */
	EXPECT_EQ(-ENODEV, gs_release(c, 0, 0, NULL));
	cp.flags = 0;
	EXPECT_EQ(-ENODEV, gs_err(ioctl(a, GPUSLEEP_IOC_COMPLETE, &cp)));
	close(a);
	close(c);
}

TEST_F(dev, bad_pointer_is_efault)
{
	EXPECT_EQ(-1, ioctl(self->dev, GPUSLEEP_IOC_CREATE_DOMAIN, (void *)8));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(dev, api_reserved_nonzero)
{
	struct gpusleep_api a = { .api = GPUSLEEP_API_VERSION };

	a.reserved[0] = 1;
	EXPECT_EQ(-1, ioctl(self->dev, GPUSLEEP_IOC_API, &a));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(dev, create_name_too_long)
{
	struct gpusleep_create c;

	fill_create(&c, "x");
	memset(c.name, 'a', sizeof(c.name));
	EXPECT_EQ(-ENAMETOOLONG, create_raw(self->dev, &c));
}

TEST_F(dev, create_gpu_too_long)
{
	struct gpusleep_create c;

	fill_create(&c, "x");
	memset(c.gpu, 'a', sizeof(c.gpu));
	EXPECT_EQ(-ENAMETOOLONG, create_raw(self->dev, &c));
}

TEST_F(dev, create_name_empty)
{
	struct gpusleep_create c;

	fill_create(&c, "");
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_name_bad_char)
{
	struct gpusleep_create c;

	fill_create(&c, "a/b");
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_garbage_after_nul)
{
	struct gpusleep_create c;

	fill_create(&c, "ok");
	c.name[10] = 'z';
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_unknown_caps)
{
	struct gpusleep_create c;

	fill_create(&c, "ok");
	c.caps = 1u << 8;
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_flags_unknown)
{
	struct gpusleep_create c;

	fill_create(&c, "ok");
	c.flags = GPUSLEEP_CREATEF_MASK + 1;	/* an unknown flag */
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_reserved_nonzero)
{
	struct gpusleep_create c;

	fill_create(&c, "ok");
	c.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &c));
}

TEST_F(dev, create_returns_cloexec_fd_and_id)
{
	struct gpusleep_create c;
	int e;

	fill_create(&c, "ok");
	e = create_raw(self->dev, &c);
	ASSERT_LE(0, e);
	EXPECT_LT(0, c.id);
	EXPECT_TRUE(fcntl(e, F_GETFD) & FD_CLOEXEC);
	close(e);
}

TEST_F(dev, attach_unknown_domain)
{
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, 0x7ffffff0,
				     GPUSLEEP_ROLE_CONTROLLER));
}

TEST_F(dev, attach_bad_role)
{
	uint32_t id = 0;
	int e = gs_create(self->dev, "r", 0, &id);

	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, gs_attach(self->dev, id, GPUSLEEP_ROLE_ENGINE));
	EXPECT_EQ(-EINVAL, gs_attach(self->dev, id, 99));
	close(e);
}

TEST_F(dev, second_agent_busy)
{
	uint32_t id = 0;
	int e = gs_create(self->dev, "a2", 0, &id);
	int a1, a2;

	ASSERT_LE(0, e);
	a1 = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, a1);
	EXPECT_EQ(-EBUSY, gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT));
	close(a1);
	/* The slot is free again once the first agent is gone. */
	a2 = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	EXPECT_LE(0, a2);
	close(a2);
	close(e);
}

TEST_F(dev, attach_after_engine_closed)
{
	uint32_t id = 0;
	int e = gs_create(self->dev, "gone", 0, &id);

	ASSERT_LE(0, e);
	close(e);
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER));
}

TEST_F(dev, dead_domain_ioctls_enodev)
{
	struct gpusleep_state st;
	uint32_t id = 0;
	int e = gs_create(self->dev, "dead", 0, &id);
	int c;

	ASSERT_LE(0, e);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	close(e);
	EXPECT_EQ(-ENODEV, gs_release(c, 0, 0, NULL));
	EXPECT_EQ(-ENODEV, gs_resume(c, 0, 0, NULL));
	ASSERT_EQ(0, gs_state(c, &st));
	EXPECT_EQ(GPUSLEEP_S_DEAD, st.state);
	EXPECT_TRUE(st.flags & GPUSLEEP_SF_DEAD);
	close(c);
}

TEST_F(dev, state_fields_all_written)
{
	struct gpusleep_state st;
	uint32_t id = 0;
	int e = gs_create(self->dev, "st", GPUSLEEP_CAP_PREFIX_CACHING, &id);

	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_state(e, &st));	/* pre-filled with 0xcc */
	EXPECT_EQ(id, st.id);
	EXPECT_EQ(0, st.unconfirmed);
	EXPECT_EQ(0, st.reserved[0]);
	EXPECT_EQ(0, st.reserved[1]);
	EXPECT_EQ(0, st.resident_bytes);
	EXPECT_EQ(0, st.resident_source);
	EXPECT_EQ(0, st.pad3);
	EXPECT_EQ(0, st.generation[0]);
	EXPECT_EQ(0, st.generation[GPUSLEEP_MAX_TAGS - 1]);
	EXPECT_EQ(0, st.pad2);
	EXPECT_EQ(0, st.shortfall);
	EXPECT_EQ(0, st.freed_bytes[0]);
	EXPECT_EQ(0, st.last.op_id);
	EXPECT_EQ(0, st.last.pad);
	EXPECT_EQ(0, st.bytes_released[GPUSLEEP_MAX_TAGS - 1]);
	EXPECT_EQ(GPUSLEEP_CAP_PREFIX_CACHING, st.caps);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_KV_RELEASE_ALLOWED);
	EXPECT_EQ(0, st.flags & GPUSLEEP_SF_AGENT_ATTACHED);
	close(e);
}

TEST_F(dev, is_sleeping_arg_nonzero)
{
	int e = gs_create(self->dev, "s", 0, NULL);

	ASSERT_LE(0, e);
	EXPECT_EQ(-1, ioctl(e, GPUSLEEP_IOC_IS_SLEEPING, 1));
	EXPECT_EQ(EINVAL, errno);
	close(e);
}

TEST_F(dev, refuse_kv_without_prefix_reset)
{
	struct gpusleep_op op;
	struct gpusleep_state st;
	struct gpusleep_event ev;
	uint32_t id = 0;
	int e = gs_create(self->dev, "kv", GPUSLEEP_CAP_PREFIX_CACHING, &id);
	int a;

	ASSERT_LE(0, e);
	a = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, a);
	/*
	 * Issue 35: one errno, one meaning. EPERM is the caller's (an agent
	 * fd may not release); a KV release this domain cannot do is
	 * EOPNOTSUPP.
	 */
	EXPECT_EQ(-EPERM, gs_release(a, GPUSLEEP_TAG_WEIGHTS, 0, &op));
	EXPECT_EQ(-EOPNOTSUPP, gs_release(e, 0, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_KV_NOT_ALLOWED, op.reason);
	EXPECT_EQ(-EOPNOTSUPP, gs_release(e, GPUSLEEP_TAG_KV_CACHE, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_KV_NOT_ALLOWED, op.reason);
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
	EXPECT_EQ(-ETIMEDOUT, gs_next(e, &ev, 0));
	/* Weights alone are fine. */
	EXPECT_EQ(0, gs_release(e, GPUSLEEP_TAG_WEIGHTS, GPUSLEEP_OPF_NONBLOCK,
				&op));
	close(a);
	close(e);
}

TEST_F(dev, eventfd_bad_inputs)
{
	int e = gs_create(self->dev, "efd", 0, NULL);
	int p[2], efd;

	ASSERT_LE(0, e);
	ASSERT_EQ(0, pipe(p));
	efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, efd);
	/* Not an eventfd. */
	EXPECT_EQ(-EINVAL, gs_eventfd(e, p[0], GPUSLEEP_EFD_OP_DONE));
	/* Not an open fd. */
	EXPECT_EQ(-EBADF, gs_eventfd(e, 9999, GPUSLEEP_EFD_OP_DONE));
	EXPECT_EQ(-EBADF, gs_eventfd(e, -5, GPUSLEEP_EFD_OP_DONE));
	/* Unknown event bits. */
	EXPECT_EQ(-EINVAL, gs_eventfd(e, efd, 1u << 7));
	/* -1 clears and takes no events. */
	EXPECT_EQ(-EINVAL, gs_eventfd(e, -1, GPUSLEEP_EFD_OP_DONE));
	/* Removing what is not registered. */
	EXPECT_EQ(-ENOENT, gs_eventfd(e, efd, 0));
	EXPECT_EQ(0, gs_eventfd(e, efd, GPUSLEEP_EFD_ALL));
	EXPECT_EQ(0, gs_eventfd(e, efd, GPUSLEEP_EFD_OP_DONE));	/* update */
	EXPECT_EQ(0, gs_eventfd(e, efd, 0));
	EXPECT_EQ(0, gs_eventfd(e, -1, 0));
	close(efd);
	close(p[0]);
	close(p[1]);
	close(e);
}

TEST_F(dev, eventfd_limit)
{
	char old[32];
	int e = gs_create(self->dev, "efdmax", 0, NULL);
	int efd[4], i;

	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_param_set("max_eventfds", "3", old, sizeof(old)));
	for (i = 0; i < 4; i++) {
		efd[i] = eventfd(0, EFD_CLOEXEC);
		ASSERT_LE(0, efd[i]);
	}
	for (i = 0; i < 3; i++)
		EXPECT_EQ(0, gs_eventfd(e, efd[i], GPUSLEEP_EFD_OP_DONE));
	EXPECT_EQ(-ENOSPC, gs_eventfd(e, efd[3], GPUSLEEP_EFD_OP_DONE));
	EXPECT_EQ(0, gs_param_set("max_eventfds", old, NULL, 0));
	for (i = 0; i < 4; i++)
		close(efd[i]);
	close(e);
}

TEST_F(dev, domain_limit)
{
	char old[32];
	int e[3], i;

	ASSERT_EQ(0, gs_param_set("max_domains", "2", old, sizeof(old)));
	e[0] = gs_create(self->dev, "m0", 0, NULL);
	e[1] = gs_create(self->dev, "m1", 0, NULL);
	e[2] = gs_create(self->dev, "m2", 0, NULL);
	EXPECT_LE(0, e[0]);
	EXPECT_LE(0, e[1]);
	EXPECT_EQ(-ENOSPC, e[2]);
	EXPECT_EQ(0, gs_param_set("max_domains", old, NULL, 0));
	for (i = 0; i < 3; i++)
		if (e[i] >= 0)
			close(e[i]);
}

/* A child as another uid, reporting the errno of its attach. */
static int attach_as(int dev, uint32_t id, uid_t uid)
{
	int p[2], st, r = 0;
	pid_t pid;

	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid == 0) {
		if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			r = -100;
		else
			r = gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER);
		if (write(p[1], &r, sizeof(r)) != sizeof(r))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &r, sizeof(r)) != sizeof(r))
		r = -101;
	close(p[0]);
	waitpid(pid, &st, 0);
	return r;
}

TEST_F(dev, other_uid_refused)
{
	uint32_t id = 0;
	int e = gs_create(self->dev, "mine", 0, &id);
	int r;

	ASSERT_LE(0, e);
	if (geteuid() != 0)
		SKIP(close(e); return, "needs root to switch uid");
	r = attach_as(self->dev, id, 65534);
	EXPECT_EQ(-EPERM, r);
	close(e);
}

TEST_F(dev, admin_may_attach_others_domain)
{
	int p[2], q[2], st;
	uint32_t id = 0;
	char go = 0;
	pid_t pid;
	int c;

	if (geteuid() != 0)
		SKIP(return, "needs root to switch uid");
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, pipe(q));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int e;

		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		e = gs_create(self->dev, "nobody", 0, &id);
		if (e < 0 || write(p[1], &id, sizeof(id)) != sizeof(id))
			_exit(3);
		if (read(q[0], &go, 1) != 1)
			_exit(4);
		_exit(0);
	}
	ASSERT_EQ(sizeof(id), read(p[0], &id, sizeof(id)));
	/* Root (CAP_SYS_ADMIN) may attach to a domain of uid 65534. */
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	EXPECT_LE(0, c);
	/* Another unprivileged uid may not. */
	EXPECT_EQ(-EPERM, attach_as(self->dev, id, 65533));
	ASSERT_EQ(1, write(q[1], &go, 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	if (c >= 0)
		close(c);
}

/* ------------------------------------------ tenants, reclaims, leases */

/* Each new command belongs to one kind of fd: elsewhere, ENOTTY. */
TEST_F(dev, tenant_commands_on_the_wrong_fd)
{
	struct gpusleep_reclaim r;
	struct gpusleep_report rep;
	int e = gs_create(self->dev, "u5", 0, NULL);

	ASSERT_LE(0, e);
	memset(&rep, 0, sizeof(rep));
	memset(&r, 0, sizeof(r));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(self->dev, GPUSLEEP_IOC_REPORT, &rep)));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(self->dev, GPUSLEEP_IOC_GET_TENANT,
					&rep)));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(e, GPUSLEEP_IOC_RECLAIM, &r)));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(e, GPUSLEEP_IOC_LEASE_INFO, &r)));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(self->dev, GPUSLEEP_IOC_LEASE_RETURN,
					0)));
	close(e);
}

struct reclaim_long { struct gpusleep_reclaim r; __u64 more; };

/*
 * RECLAIM grows at its end: smaller than its first version EINVAL, a
 * newer caller's unknown tail must be zero (E2BIG), and is cleared.
 */
TEST_F(dev, reclaim_struct_sizes)
{
	struct reclaim_long l;

	memset(&l, 0, sizeof(l));
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->dev,
		_IOWR(GPUSLEEP_IOC_MAGIC, 0x05, struct gpusleep_lease), &l)));
	l.r.gpu_uuid[0] = 1;
	l.r.bytes = 1;
	l.more = 1;
	EXPECT_EQ(-E2BIG, gs_err(ioctl(self->dev,
		_IOWR(GPUSLEEP_IOC_MAGIC, 0x05, struct reclaim_long), &l)));
	l.more = 0;
	l.r.gpu_uuid[0] = 0xee;		/* a GPU nobody is on */
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev,
		_IOWR(GPUSLEEP_IOC_MAGIC, 0x05, struct reclaim_long), &l)));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, l.r.reason);
	EXPECT_EQ(0, l.more);
}

/* A lease fd: O_CLOEXEC, unknown commands ENOTTY, LEASE_INFO's sizes. */
TEST_F(dev, lease_fd_basics)
{
	struct gpusleep_reclaim r;
	struct gpusleep_lease li;
	int lease, flags;

	memset(&r, 0, sizeof(r));
	r.gpu_uuid[0] = 0xef;
	r.bytes = 1;
	r.flags = GPUSLEEP_RECLAIMF_LEASE | GPUSLEEP_RECLAIMF_NONBLOCK |
		  GPUSLEEP_RECLAIMF_PARTIAL;
	lease = gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r));
	ASSERT_LE(0, lease);
	EXPECT_EQ(lease, r.lease_fd);
	flags = fcntl(lease, F_GETFD);
	EXPECT_TRUE(flags & FD_CLOEXEC);
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(lease, _IO(GPUSLEEP_IOC_MAGIC, 0x3f))));
	EXPECT_EQ(-ENOTTY, gs_err(ioctl(lease, GPUSLEEP_IOC_GET_STATE, &li)));
	memset(&li, 0, sizeof(li));
	li.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	memset(&li, 0, sizeof(li));
	EXPECT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	EXPECT_EQ(r.lease_id, li.id);
	EXPECT_EQ(GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0, li.victim_size);
	close(lease);
}

/* The handshake reports the tenants feature. */
TEST_F(dev, api_reports_tenants)
{
	struct gpusleep_api a = { .api = GPUSLEEP_API_VERSION,
				  .features = GPUSLEEP_FEAT_TENANTS };

	EXPECT_EQ(0, gs_err(ioctl(self->dev, GPUSLEEP_IOC_API, &a)));
	EXPECT_TRUE(a.features & GPUSLEEP_FEAT_TENANTS);
}

TEST_HARNESS_MAIN
