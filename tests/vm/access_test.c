// SPDX-License-Identifier: GPL-2.0
/*
 * Who may reach a domain by its id: the owner's euid in the creator's
 * user and pid namespaces (the agent role: the creating process only),
 * or CAP_SYS_ADMIN; anyone else through a grant, an fd the engine makes
 * (GPUSLEEP_IOC_GRANT) and passes over a UNIX socket. The domains here
 * belong to uid 65534 so that no test process has CAP_SYS_ADMIN.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/socket.h>
#include "kselftest_harness.h"
#include "gs_test.h"

#define NOBODY	65534

static int become_nobody(void)
{
	return setresgid(NOBODY, NOBODY, NOBODY) ||
	       setresuid(NOBODY, NOBODY, NOBODY) ? -1 : 0;
}

static int send_fd(int sk, int fd)
{
	char c = 'f', buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = buf, .msg_controllen = sizeof(buf) };
	struct cmsghdr *cm;

	memset(buf, 0, sizeof(buf));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sk, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sk)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = buf, .msg_controllen = sizeof(buf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sk, &m, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static int grant(int engine, uint32_t role)
{
	struct gpusleep_grant g = { .role = role };

	return gs_err(ioctl(engine, GPUSLEEP_IOC_GRANT, &g));
}

/*
 * The engine: uid 65534, creates a domain, reports its id on sk, then
 * answers each role byte on sk with a granted fd of that role, until EOF.
 */
static pid_t engine_as_nobody(int dev, int sk)
{
	pid_t p = fork();

	if (p == 0) {
		uint32_t id = 0, role;
		int e, fd;

		if (become_nobody())
			_exit(10);
		e = gs_create(dev, "access", 0, &id);
		if (e < 0 || write(sk, &id, sizeof(id)) != sizeof(id))
			_exit(11);
		while (read(sk, &role, sizeof(role)) == sizeof(role)) {
			fd = grant(e, role);
			if (fd < 0 || send_fd(sk, fd))
				_exit(12);
			close(fd);
		}
		_exit(0);
	}
	return p;
}

/* Ask the engine for a granted fd of role. */
static int ask_grant(int sk, uint32_t role)
{
	if (write(sk, &role, sizeof(role)) != sizeof(role))
		return -1;
	return recv_fd(sk);
}

FIXTURE(acc) {
	int dev, sv[2];
	uint32_t id;
	pid_t engine;
};

FIXTURE_SETUP(acc)
{
	self->engine = 0;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	if (geteuid() != 0)
		GS_SETUP_SKIP("needs root to switch uids");
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				self->sv));
	self->engine = engine_as_nobody(self->dev, self->sv[1]);
	ASSERT_EQ(sizeof(self->id), read(self->sv[0], &self->id,
					 sizeof(self->id)));
}

FIXTURE_TEARDOWN(acc)
{
	if (self->dev < 0)
		return;
	close(self->sv[0]);
	close(self->sv[1]);
	if (self->engine > 0) {
		kill(self->engine, SIGKILL);
		waitpid(self->engine, NULL, 0);
	}
	close(self->dev);
}

/* Run fn in a child as uid 65534; its exit status. */
static int as_nobody(int (*fn)(FIXTURE_DATA(acc) *), FIXTURE_DATA(acc) *self)
{
	pid_t p = fork();
	int st;

	if (p == 0) {
		if (become_nobody())
			_exit(100);
		_exit(fn(self));
	}
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Same uid and namespaces, another process: controller yes, agent no. */
static int same_ns(FIXTURE_DATA(acc) *self)
{
	int c, a;

	c = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	if (c < 0)
		return 1;
	close(c);
	if (gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT) != -EPERM)
		return 2;
	/* The engine's grant makes it the agent. */
	a = ask_grant(self->sv[0], GPUSLEEP_ROLE_AGENT);
	if (a < 0)
		return 3;
	if (gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT) != -EPERM)
		return 4;
	close(a);
	return 0;
}

TEST_F(acc, agent_only_in_the_engines_process_or_granted)
{
	EXPECT_EQ(0, as_nobody(same_ns, self));
}

/* A process in another pid namespace, same uid: needs a grant. */
static int other_pidns(FIXTURE_DATA(acc) *self)
{
	struct gpusleep_state st;
	pid_t g;
	int s;

	if (unshare(CLONE_NEWPID))
		return 50;
	g = fork();
	if (g == 0) {
		int c;

		if (become_nobody())
			_exit(100);
		if (gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER) !=
		    -EPERM)
			_exit(1);
		c = ask_grant(self->sv[0], GPUSLEEP_ROLE_CONTROLLER);
		if (c < 0 || gs_state(c, &st) || st.id != self->id)
			_exit(2);
		_exit(0);
	}
	if (waitpid(g, &s, 0) != g || !WIFEXITED(s))
		return 60;
	return WEXITSTATUS(s);
}

TEST_F(acc, another_pid_namespace_needs_a_grant)
{
	pid_t p = fork();	/* root: unshare needs CAP_SYS_ADMIN */
	int st;

	if (p == 0)
		_exit(other_pidns(self));
	ASSERT_EQ(p, waitpid(p, &st, 0));
	if (WEXITSTATUS(st) == 50)
		SKIP(return, "unshare(CLONE_NEWPID) failed");
	EXPECT_EQ(0, WEXITSTATUS(st));
}

/* Another user namespace, same kuid (a container without a uid map). */
static int other_userns(FIXTURE_DATA(acc) *self)
{
	struct gpusleep_state st;
	int c;

	if (unshare(CLONE_NEWUSER))
		return 50;
	if (gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER) != -EPERM)
		return 1;
	c = ask_grant(self->sv[0], GPUSLEEP_ROLE_CONTROLLER);
	if (c < 0 || gs_state(c, &st) || st.id != self->id)
		return 2;
	return 0;
}

TEST_F(acc, another_user_namespace_needs_a_grant)
{
	int r = as_nobody(other_userns, self);

	if (r == 50)
		SKIP(return, "unshare(CLONE_NEWUSER) refused (user namespaces off, or the test runs in a chroot)");
	EXPECT_EQ(0, r);
}

/* Root (CAP_SYS_ADMIN) may attach to anyone's domain, in any role. */
TEST_F(acc, admin_may_attach)
{
	int a = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);

	EXPECT_LE(0, a);
	if (a >= 0)
		close(a);
}

/* Bad grants change nothing. */
TEST_F(acc, grant_refusals)
{
	struct gpusleep_grant g = { .role = GPUSLEEP_ROLE_ENGINE };
	int e, c;

	e = gs_create(self->dev, "g", 0, NULL);
	ASSERT_LE(0, e);
	EXPECT_EQ(-1, ioctl(e, GPUSLEEP_IOC_GRANT, &g));
	EXPECT_EQ(EINVAL, errno);
	g.role = GPUSLEEP_ROLE_CONTROLLER;
	g.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(e, GPUSLEEP_IOC_GRANT, &g));
	EXPECT_EQ(EINVAL, errno);
	g.reserved[1] = 0;
	c = gs_err(ioctl(e, GPUSLEEP_IOC_GRANT, &g));
	ASSERT_LE(0, c);
	/* Only the engine fd grants. */
	EXPECT_EQ(-1, ioctl(c, GPUSLEEP_IOC_GRANT, &g));
	EXPECT_EQ(EPERM, errno);
	g.role = GPUSLEEP_ROLE_AGENT;
	EXPECT_LE(0, grant(e, GPUSLEEP_ROLE_AGENT));
	EXPECT_EQ(-EBUSY, grant(e, GPUSLEEP_ROLE_AGENT));
	close(c);
	close(e);
}

TEST_HARNESS_MAIN
