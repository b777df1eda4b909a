// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection walk: fail the Nth allocation / fd creation / eventfd
 * lookup / user copy of a full release/resume cycle, for every N the cycle
 * reaches. Each failure must come back as a clean errno, the state must
 * stay what the agent confirmed (a pause whose answer was lost counts as
 * released, unconfirmed), nothing may stay behind once the process
 * is gone, and the module must still unload (checked by the VM runner).
 */
#define _GNU_SOURCE
#include <sys/eventfd.h>
#include "kselftest_harness.h"
#include "gs_test.h"

/* Errnos an injected fault may surface as. */
static int fault_errno(int r)
{
	return r == -ENOMEM || r == -EFAULT || r == -EMFILE || r == -EBADF;
}

struct cycle {
	int dev, engine, agent, ctl, efd;
	uint32_t id;
	uint32_t confirmed;	/* tags whose unmap the agent got accepted */
	int failed;		/* first failure seen (an errno), 0 if none */
	int bad;		/* a failure that is not a clean fault errno */
	int report;		/* pipe to the parent */
};

static void note(struct cycle *c, const char *what, int r)
{
	if (r >= 0 || c->failed)
		return;
	c->failed = r;
	if (!fault_errno(r)) {
		c->bad = 1;
		fprintf(stderr, "# %s failed with %d (not a fault errno)\n",
			what, r);
	}
}

/* Read one record; a fault in the copy must leave it queued. */
static int next_retry(struct cycle *c, int fd, struct gpusleep_event *ev)
{
	int r = gs_next(fd, ev, GS_WAIT_MS);

	if (r == -EFAULT) {
		note(c, "read", r);
		c->failed = 0;	/* recoverable: the record is still there */
		r = gs_next(fd, ev, GS_WAIT_MS);
		if (r)
			c->bad = 1;
	}
	return r;
}

static int answer(struct cycle *c, int fd, uint32_t type, int is_agent)
{
	struct gpusleep_event ev;
	int r = next_retry(c, fd, &ev);

	if (r) {
		note(c, "next", r);
		return r;
	}
	if (ev.type != type) {
		fprintf(stderr, "# got event %u, wanted %u\n", ev.type, type);
		c->bad = 1;
		return -EPROTO;
	}
	r = gs_answer(fd, &ev, 0, 4096);
	note(c, "complete", r);
	if (!r && is_agent) {
		if (type == GPUSLEEP_EV_PAUSE_TAG)
			c->confirmed |= ev.tags;
		else
			c->confirmed &= ~ev.tags;
	}
	return r;
}

static int op_drive(struct cycle *c, int release)
{
	struct gpusleep_op op;
	struct gpusleep_result res;
	int r;

	r = release ? gs_release(c->ctl, 0, GPUSLEEP_OPF_NONBLOCK, &op) :
		      gs_resume(c->ctl, 0, GPUSLEEP_OPF_NONBLOCK, &op);
	note(c, release ? "release" : "resume", r);
	if (r)
		return r;
	if (release) {
		if (answer(c, c->engine, GPUSLEEP_EV_DRAIN, 0) ||
		    answer(c, c->engine, GPUSLEEP_EV_RESET_CACHES, 0) ||
		    answer(c, c->agent, GPUSLEEP_EV_PAUSE_TAG, 1) ||
		    answer(c, c->agent, GPUSLEEP_EV_PAUSE_TAG, 1))
			return -1;
	} else {
		if (answer(c, c->agent, GPUSLEEP_EV_RESUME_TAG, 1) ||
		    answer(c, c->agent, GPUSLEEP_EV_RESUME_TAG, 1) ||
		    answer(c, c->engine, GPUSLEEP_EV_REPAIR_KV, 0))
			return -1;
	}
	r = gs_wait(c->ctl, op.op_id, GS_WAIT_MS, &res);
	note(c, "wait", r);
	if (!r && res.error) {
		fprintf(stderr, "# op failed: %d\n", res.error);
		c->bad = 1;
	}
	return r;
}

/* The state must be what the agent confirmed (the fault has fired). */
static void check_truth(struct cycle *c)
{
	struct gpusleep_state st;
	int fd = c->ctl >= 0 ? c->ctl : c->engine;
	int r;

	if (fd < 0)
		return;
	r = gs_state(fd, &st);
	if (r == -EFAULT) {	/* the injected fault hit this very copy */
		note(c, "state", r);
		r = gs_state(fd, &st);
	}
	if (r) {
		c->bad = 1;
		return;
	}
	/*
	 * Released and confirmed must be what the agent got accepted; a
	 * pause whose answer was lost counts released, unconfirmed.
	 */
	if ((st.released & ~st.unconfirmed) != c->confirmed ||
	    (st.unconfirmed & ~st.released)) {
		fprintf(stderr, "# released %#x (unconfirmed %#x), agent confirmed %#x\n",
			st.released, st.unconfirmed, c->confirmed);
		c->bad = 1;
	}
}

static void run_cycle(struct cycle *c)
{
	int r;

	c->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (c->dev < 0)
		return;
	r = gs_api(c->dev);
	note(c, "api", r);
	if (r)
		return;
	c->engine = gs_create(c->dev, "fault", GPUSLEEP_CAP_PREFIX_CACHING |
			      GPUSLEEP_CAP_PREFIX_CACHE_RESET, &c->id);
	note(c, "create", c->engine);
	if (c->engine < 0)
		return;
	if (write(c->report, &c->id, sizeof(c->id)) != sizeof(c->id))
		c->bad = 1;
	c->agent = gs_attach(c->dev, c->id, GPUSLEEP_ROLE_AGENT);
	note(c, "attach agent", c->agent);
	if (c->agent < 0)
		return;
	c->ctl = gs_attach(c->dev, c->id, GPUSLEEP_ROLE_CONTROLLER);
	note(c, "attach controller", c->ctl);
	if (c->ctl < 0)
		return;
	c->efd = eventfd(0, EFD_CLOEXEC);
	r = gs_eventfd(c->ctl, c->efd, GPUSLEEP_EFD_ALL);
	note(c, "eventfd", r);
	if (r)
		return;
	if (op_drive(c, 1))
		return;
	check_truth(c);
	if (op_drive(c, 0))
		return;
	r = gs_eventfd(c->ctl, -1, 0);
	note(c, "eventfd clear", r);
}

/* Run one cycle in a child; returns its verdict. */
static int child_cycle(uint32_t *id)
{
	int p[2], st;
	pid_t pid;

	*id = 0;
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct cycle c = {
			.dev = -1, .engine = -1, .agent = -1, .ctl = -1,
			.efd = -1, .report = p[1],
		};

		close(p[0]);
		run_cycle(&c);
		if (c.failed)
			check_truth(&c);
		_exit(c.bad ? 1 : 0);	/* exit closes every fd */
	}
	close(p[1]);
	if (read(p[0], id, sizeof(*id)) != sizeof(*id))
		*id = 0;
	close(p[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * The same walk over a group's cycle: two ranks created, a group made and
 * opened again by name, both added, a group release and resume driven
 * rank by rank, the result fetched with its breakdown. The group's own
 * sites (its allocation, id, fds, copies, the breakdown's buffer) fail in
 * turn as well as the ranks'.
 */
#define GRANKS	2

static int group_drive(struct cycle *c, int grp, int release)
{
	struct gpusleep_group_rank rk[GRANKS];
	struct gpusleep_group_result res;
	struct gpusleep_group_wait w;
	struct gpusleep_group_op op;
	int i, r;

	memset(&op, 0, sizeof(op));
	op.flags = GPUSLEEP_OPF_NONBLOCK;
	r = gs_err(ioctl(grp, release ? GPUSLEEP_IOC_GROUP_RELEASE :
				       GPUSLEEP_IOC_GROUP_RESUME, &op));
	note(c, release ? "group release" : "group resume", r);
	if (r)
		return r;
	for (i = 0; release && i < GRANKS; i++)
		if (answer(c, c[i].engine, GPUSLEEP_EV_DRAIN, 0))
			return -1;
	for (i = 0; i < GRANKS; i++) {
		if (release &&
		    (answer(c, c[i].engine, GPUSLEEP_EV_RESET_CACHES, 0) ||
		     answer(c, c[i].agent, GPUSLEEP_EV_PAUSE_TAG, 1) ||
		     answer(c, c[i].agent, GPUSLEEP_EV_PAUSE_TAG, 1)))
			return -1;
		if (!release &&
		    (answer(c, c[i].agent, GPUSLEEP_EV_RESUME_TAG, 1) ||
		     answer(c, c[i].agent, GPUSLEEP_EV_RESUME_TAG, 1) ||
		     answer(c, c[i].engine, GPUSLEEP_EV_REPAIR_KV, 0)))
			return -1;
	}
	memset(&w, 0, sizeof(w));
	w.op_id = op.op_id;
	w.timeout_ms = GS_WAIT_MS;
	w.ranks = (uintptr_t)rk;
	w.nr_ranks = GRANKS;
	w.rank_size = sizeof(rk[0]);
	r = gs_err(ioctl(grp, GPUSLEEP_IOC_GROUP_WAIT, &w));
	note(c, "group wait", r);
	res = w.result;
	if (!r && (res.error || w.nr_ranks != GRANKS)) {
		fprintf(stderr, "# group op failed: %d\n", res.error);
		c->bad = 1;
	}
	return r;
}

static void run_group_cycle(struct cycle *c, const char *name)
{
	struct gpusleep_group_create gc;
	struct gpusleep_group_add ga;
	int i, r, grp = -1, grp2 = -1;

	c->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (c->dev < 0)
		return;
	for (i = 0; i < GRANKS; i++) {
		c[i].engine = gs_create(c->dev, "gfault",
					GPUSLEEP_CAP_PREFIX_CACHING |
					GPUSLEEP_CAP_PREFIX_CACHE_RESET,
					&c[i].id);
		note(c, "create", c[i].engine);
		if (c[i].engine < 0)
			return;
		c[i].agent = gs_attach(c->dev, c[i].id, GPUSLEEP_ROLE_AGENT);
		note(c, "attach agent", c[i].agent);
		if (c[i].agent < 0)
			return;
	}
	memset(&gc, 0, sizeof(gc));
	snprintf(gc.name, sizeof(gc.name), "%s", name);
	grp = gs_err(ioctl(c->dev, GPUSLEEP_IOC_CREATE_GROUP, &gc));
	note(c, "create group", grp);
	if (grp < 0)
		return;
	grp2 = gs_err(ioctl(c->dev, GPUSLEEP_IOC_OPEN_GROUP, &gc));
	note(c, "open group", grp2);
	if (grp2 < 0)
		return;
	close(grp);	/* the group lives on in grp2 */
	for (i = 0; i < GRANKS; i++) {
		memset(&ga, 0, sizeof(ga));
		ga.fd = c[i].engine;
		r = gs_err(ioctl(grp2, GPUSLEEP_IOC_GROUP_ADD, &ga));
		note(c, "group add", r);
		if (r)
			return;
	}
	if (group_drive(c, grp2, 1))
		return;
	group_drive(c, grp2, 0);
}

static int child_group_cycle(const char *name)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		struct cycle c[GRANKS];
		int i;

		memset(c, 0, sizeof(c));
		for (i = 0; i < GRANKS; i++) {
			c[i].dev = c[i].engine = c[i].agent = c[i].ctl = -1;
			c[i].efd = c[i].report = -1;
		}
		run_group_cycle(c, name);
		_exit(c[0].bad ? 1 : 0);	/* exit closes every fd */
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

FIXTURE(fault) {
	int dev;
};

FIXTURE_SETUP(fault)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	if (!gs_fault_available())
		GS_SETUP_SKIP("no %s: module built without GPUSLEEP_FAULT_INJECTION (the debug kernel's suite has it)",
			      GS_FAULT_DIR);
}

FIXTURE_TEARDOWN(fault)
{
	if (self->dev >= 0) {
		gs_fault_off();
		close(self->dev);
	}
}

TEST_F_TIMEOUT(fault, walk_every_site_of_a_cycle, 600)
{
	unsigned int n, fired = 0;
	uint32_t id;

	/* A clean cycle first: the baseline must pass. */
	ASSERT_EQ(0, child_cycle(&id));
	for (n = 1; n < 1000; n++) {
		ASSERT_EQ(0, gs_fault_arm(n));
		EXPECT_EQ(0, child_cycle(&id)) {
			TH_LOG("fault at site %u was not handled cleanly", n);
		}
		if (gs_fault_fired() != 1)
			break;	/* the cycle has fewer than n sites */
		fired++;
		/* Nothing of the dead process's domain stays attachable. */
		if (id)
			EXPECT_EQ(-ENOENT, gs_attach(self->dev, id,
						     GPUSLEEP_ROLE_CONTROLLER));
	}
	ASSERT_EQ(0, gs_fault_off());
	TH_LOG("injected %u faults", fired);
	EXPECT_LT(20, fired);	/* the walk did reach the cycle's sites */
	/* And a clean cycle still works afterwards. */
	EXPECT_EQ(0, child_cycle(&id));
}

TEST_F_TIMEOUT(fault, walk_every_site_of_a_group_cycle, 600)
{
	struct gpusleep_group_create gc;
	unsigned int n, fired = 0;
	char name[32];

	snprintf(name, sizeof(name), "gfault%d", getpid());
	memset(&gc, 0, sizeof(gc));
	snprintf(gc.name, sizeof(gc.name), "%s", name);
	ASSERT_EQ(0, child_group_cycle(name));
	for (n = 1; n < 2000; n++) {
		ASSERT_EQ(0, gs_fault_arm(n));
		EXPECT_EQ(0, child_group_cycle(name)) {
			TH_LOG("fault at site %u was not handled cleanly", n);
		}
		if (gs_fault_fired() != 1)
			break;
		fired++;
		/* The group went with the process's fds. */
		EXPECT_EQ(-ENOENT, gs_err(ioctl(self->dev,
						GPUSLEEP_IOC_OPEN_GROUP, &gc)));
	}
	ASSERT_EQ(0, gs_fault_off());
	TH_LOG("injected %u faults", fired);
	EXPECT_LT(40, fired);
	EXPECT_EQ(0, child_group_cycle(name));
}

TEST_HARNESS_MAIN
