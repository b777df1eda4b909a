// SPDX-License-Identifier: GPL-2.0
/*
 * A domain belongs to the process that created it: it dies when that
 * process closes its last copy of the engine fd (close, exec, exit) or
 * exits, even if a forked child still holds one or another process shares
 * its fd table (CLONE_FILES), and only that process acts as the
 * engine; GPUSLEEP_CREATEF_SHARED opts out. The creator's pid is shown in
 * each reader's pid namespace.
 */
#define _GNU_SOURCE
#include <sched.h>
#include "kselftest_harness.h"
#include "gs_test.h"

FIXTURE(own) {
	int dev;
};

FIXTURE_SETUP(own)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
}

FIXTURE_TEARDOWN(own)
{
	if (self->dev >= 0)
		close(self->dev);
}

/*
 * A creator process: creates a domain (flags), forks a child that keeps
 * the engine fd and waits on hold; reports the id and the child's pid on
 * rep, then exits. The child, told to go, reads its engine fd once
 * (non-blocking) and writes on rep 0 for EOF, 1 for EPERM, 2 for EAGAIN.
 */
static pid_t creator(int dev, uint32_t flags, int rep, int hold)
{
	pid_t p = fork();

	if (p == 0) {
		uint32_t id = 0;
		int e = gs_create_flags(dev, "owned", 0, flags, &id);
		pid_t c;

		if (e < 0)
			_exit(10);
		c = fork();
		if (c == 0) {
			struct gpusleep_event ev;
			char go;
			ssize_t n;

			if (read(hold, &go, 1) != 1)
				_exit(20);
			fcntl(e, F_SETFL, O_NONBLOCK);
			n = read(e, &ev, sizeof(ev));
			go = n == 0 ? 0 : errno == EPERM ? 1 :
			     errno == EAGAIN ? 2 : 3;
			_exit(write(rep, &go, 1) == 1 ? 0 : 21);
		}
		if (write(rep, &id, sizeof(id)) != sizeof(id) ||
		    write(rep, &c, sizeof(c)) != sizeof(c))
			_exit(11);
		_exit(0);
	}
	return p;
}

/* The grandchild's verdict, written on the report pipe. */
static int child_verdict(int rep)
{
	char v;

	return read(rep, &v, 1) == 1 ? v : -1;
}

TEST_F(own, forked_child_does_not_keep_the_domain)
{
	int rep[2], hold[2], st;
	uint32_t id = 0;
	pid_t p, c;

	ASSERT_EQ(0, pipe(rep));
	ASSERT_EQ(0, pipe(hold));
	p = creator(self->dev, 0, rep[1], hold[0]);
	ASSERT_EQ(sizeof(id), read(rep[0], &id, sizeof(id)));
	ASSERT_EQ(sizeof(c), read(rep[0], &c, sizeof(c)));
	ASSERT_EQ(p, waitpid(p, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	/* The creator is gone: so is its domain, the child's copy or not. */
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER));
	ASSERT_EQ(1, write(hold[1], "g", 1));
	EXPECT_EQ(0, child_verdict(rep[0]));	/* EOF: dead */
	(void)c;
}

TEST_F(own, shared_domain_lives_with_any_copy)
{
	int rep[2], hold[2], st, ctl;
	uint32_t id = 0;
	pid_t p, c;

	ASSERT_EQ(0, pipe(rep));
	ASSERT_EQ(0, pipe(hold));
	p = creator(self->dev, GPUSLEEP_CREATEF_SHARED, rep[1], hold[0]);
	ASSERT_EQ(sizeof(id), read(rep[0], &id, sizeof(id)));
	ASSERT_EQ(sizeof(c), read(rep[0], &c, sizeof(c)));
	ASSERT_EQ(p, waitpid(p, &st, 0));
	ctl = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, ctl);
	ASSERT_EQ(1, write(hold[1], "g", 1));
	EXPECT_EQ(2, child_verdict(rep[0]));	/* it may act as the engine */
	/* Its copy goes with it: then the domain is dead. */
	{
		struct gpusleep_state s = { .state = 0 };
		int i;

		for (i = 0; i < GS_WAIT_MS / 10; i++) {
			ASSERT_EQ(0, gs_state(ctl, &s));
			if (s.state == GPUSLEEP_S_DEAD)
				break;
			usleep(10000);
		}
		EXPECT_EQ(GPUSLEEP_S_DEAD, s.state);
	}
	(void)c;
	close(ctl);
}

TEST_F(own, only_the_creator_acts_as_the_engine)
{
	struct gpusleep_complete cp;
	int e, st;
	pid_t c;

	e = gs_create(self->dev, "mine", 0, NULL);
	ASSERT_LE(0, e);
	c = fork();
	if (c == 0) {
		struct gpusleep_event ev;
		int ok;

		fcntl(e, F_SETFL, O_NONBLOCK);
		ok = read(e, &ev, sizeof(ev)) < 0 && errno == EPERM;
		memset(&cp, 0, sizeof(cp));
		cp.type = GPUSLEEP_EV_DRAIN;
		ok = ok && ioctl(e, GPUSLEEP_IOC_COMPLETE, &cp) < 0 &&
		     errno == EPERM;
		_exit(ok ? 0 : 1);
	}
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* The child's exit closed its copy: the domain lives on. */
	EXPECT_EQ(0, ioctl(e, GPUSLEEP_IOC_IS_SLEEPING, 0));
	close(e);
}

TEST_F(own, a_dup_in_the_creator_keeps_it)
{
	uint32_t id = 0;
	int e, d2, c;

	e = gs_create(self->dev, "dup", 0, &id);
	ASSERT_LE(0, e);
	d2 = dup(e);
	ASSERT_LE(0, d2);
	close(e);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);	/* still alive */
	close(c);
	close(d2);
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER));
}

TEST_F(own, exec_ends_the_domain)
{
	int rep[2], i, gone = 0;
	uint32_t id = 0;
	pid_t p;

	ASSERT_EQ(0, pipe(rep));
	p = fork();
	if (p == 0) {
		int e = gs_create(self->dev, "exec", 0, &id);

		if (e < 0 || write(rep[1], &id, sizeof(id)) != sizeof(id))
			_exit(10);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(11);
	}
	ASSERT_EQ(sizeof(id), read(rep[0], &id, sizeof(id)));
	/* O_CLOEXEC: the exec closes the creator's only copy. */
	for (i = 0; i < GS_WAIT_MS / 10 && !gone; i++) {
		int c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);

		if (c == -ENOENT)
			gone = 1;
		else if (c >= 0)
			close(c);
		if (!gone)
			usleep(10000);
	}
	EXPECT_TRUE(gone);
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
}

/* A clone(CLONE_FILES) child: creates a domain in the shared table. */
struct files_creator {
	int dev;
	int fd;
	uint32_t id;
};

static int create_in_shared_table(void *arg)
{
	struct files_creator *fc = arg;

	fc->fd = gs_create(fc->dev, "clone-files", 0, &fc->id);
	return fc->fd < 0 ? 1 : 0;
}

/*
 * Issue 26, 15: the creator shares its fd table (CLONE_FILES) and exits.
 * No close passes (the table lives on in this process), yet the domain
 * ends with its creator, as for a plain exit: its engine fd here hangs
 * up and the id is gone.
 */
TEST_F(own, creator_sharing_its_fd_table_ends_the_domain_at_exit)
{
	size_t stack_len = 256 * 1024;
	struct files_creator fc = { .dev = self->dev, .fd = -1 };
	struct pollfd p;
	char *stack;
	pid_t c;
	int st;

	stack = malloc(stack_len);
	ASSERT_NE(NULL, stack);
	/* CLONE_VM too: fc is filled in for this process to read. */
	c = clone(create_in_shared_table, stack + stack_len,
		  CLONE_FILES | CLONE_VM | SIGCHLD, &fc);
	ASSERT_LT(0, c);
	ASSERT_EQ(c, waitpid(c, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	ASSERT_LE(0, fc.fd);	/* in this table too */
	p.fd = fc.fd;
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	EXPECT_TRUE(p.revents & POLLHUP);
	EXPECT_EQ(-ENOENT, gs_attach(self->dev, fc.id,
				     GPUSLEEP_ROLE_CONTROLLER));
	close(fc.fd);
	free(stack);
}

static int sysfs_owner_pid(uint32_t id)
{
	char path[96], buf[32] = "";
	int fd, n;

	snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/owner_pid",
		 id);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : -1;
}

TEST_F(own, owner_pid_in_the_readers_pid_namespace)
{
	uint32_t id = 0;
	int e, st;
	pid_t c;

	e = gs_create(self->dev, "pidns", 0, &id);
	ASSERT_LE(0, e);
	EXPECT_EQ(getpid(), sysfs_owner_pid(id));
	if (unshare(CLONE_NEWPID))
		SKIP(close(e); return, "unshare(CLONE_NEWPID): %s",
		     strerror(errno));
	c = fork();	/* pid 1 of a new namespace */
	if (c == 0)
		_exit(sysfs_owner_pid(id) == 0 ? 0 : 1);
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));	/* not seen from there: 0 */
	close(e);
}

TEST_HARNESS_MAIN
