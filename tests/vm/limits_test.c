// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user limits: one user may hold only its share of domains, of agent
 * and controller fds and of eventfd registrations, and of registrations
 * on one domain (EDQUOT past it), so that /dev/gpusleep being open to all
 * lets no user starve the others. The user is the euid, or in a user
 * namespace the namespace's owner; a registration is charged to whoever
 * makes it, through any fd. Each test lowers a module parameter and puts
 * it back.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/eventfd.h>
#include "kselftest_harness.h"
#include "gs_test.h"

FIXTURE(lim) {
	int dev;
	char old[32];
	const char *param;
};

FIXTURE_SETUP(lim)
{
	self->param = NULL;
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	if (geteuid() != 0)
		GS_SETUP_SKIP("needs root to set module parameters");
}

FIXTURE_TEARDOWN(lim)
{
	if (self->param)
		gs_param_set(self->param, self->old, NULL, 0);
	if (self->dev >= 0)
		close(self->dev);
}

static void lower(FIXTURE_DATA(lim) *self, const char *param, const char *v)
{
	self->param = param;
	gs_param_set(param, v, self->old, sizeof(self->old));
}

/* Create a domain as uid in a child; its exit status: 0 or errno. */
static int create_as(int dev, uid_t uid)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int e;

		if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(100);
		e = gs_create(dev, "other", 0, NULL);
		_exit(e < 0 ? -e : 0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

TEST_F(lim, domains_per_user)
{
	int a, b, c;

	lower(self, "max_domains_per_user", "2");
	a = gs_create(self->dev, "q1", 0, NULL);
	b = gs_create(self->dev, "q2", 0, NULL);
	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	EXPECT_EQ(-EDQUOT, gs_create(self->dev, "q3", 0, NULL));
	/* Another user is not starved by this one. */
	EXPECT_EQ(0, create_as(self->dev, 65534));
	/* The share comes back with the domain. */
	close(b);
	c = gs_create(self->dev, "q3", 0, NULL);
	EXPECT_LE(0, c);
	close(a);
	if (c >= 0)
		close(c);
}

TEST_F(lim, fds_per_user)
{
	uint32_t id = 0;
	int e, fds[3], i, x;

	e = gs_create(self->dev, "fds", 0, &id);
	ASSERT_LE(0, e);
	lower(self, "max_fds_per_user", "3");
	fds[0] = gs_attach(self->dev, id, GPUSLEEP_ROLE_AGENT);
	fds[1] = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	fds[2] = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	for (i = 0; i < 3; i++)
		ASSERT_LE(0, fds[i]);
	EXPECT_EQ(-EDQUOT, gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER));
	close(fds[1]);
	x = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	EXPECT_LE(0, x);
	close(x);
	close(fds[0]);
	close(fds[2]);
	close(e);
}

TEST_F(lim, eventfds_per_user)
{
	int e, c, efd[3], i;
	uint32_t id = 0;

	e = gs_create(self->dev, "efds", 0, &id);
	ASSERT_LE(0, e);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	for (i = 0; i < 3; i++) {
		efd[i] = eventfd(0, EFD_CLOEXEC);
		ASSERT_LE(0, efd[i]);
	}
	lower(self, "max_eventfds_per_user", "2");
	EXPECT_EQ(0, gs_eventfd(c, efd[0], GPUSLEEP_EFD_ALL));
	EXPECT_EQ(0, gs_eventfd(e, efd[1], GPUSLEEP_EFD_OP_DONE));
	EXPECT_EQ(-EDQUOT, gs_eventfd(c, efd[2], GPUSLEEP_EFD_ALL));
	/* Changing a registration is not a new one. */
	EXPECT_EQ(0, gs_eventfd(c, efd[0], GPUSLEEP_EFD_DRAINED));
	EXPECT_EQ(0, gs_eventfd(c, efd[0], 0));
	EXPECT_EQ(0, gs_eventfd(c, efd[2], GPUSLEEP_EFD_ALL));
	/* A closed fd gives its registrations back. */
	close(c);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	EXPECT_EQ(0, gs_eventfd(c, efd[0], GPUSLEEP_EFD_ALL));
	for (i = 0; i < 3; i++)
		close(efd[i]);
	close(c);
	close(e);
}

/* A grant of role from engine e: the new fd, or -errno. */
static int grant(int e, uint32_t role)
{
	struct gpusleep_grant g = { .role = role };

	return gs_err(ioctl(e, GPUSLEEP_IOC_GRANT, &g));
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/*
 * In a child as uid: register n new eventfds through fd; the number of
 * registrations made before the first refusal, or 100 + errno of a
 * refusal other than EDQUOT.
 */
static int register_as(int fd, uid_t uid, int n)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int i, r;

		if (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(200);
		for (i = 0; i < n; i++) {
			r = gs_eventfd(fd, eventfd(0, EFD_CLOEXEC),
				       GPUSLEEP_EFD_ALL);
			if (r == -EDQUOT)
				break;
			if (r)
				_exit(100 - r);
		}
		_exit(i);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * Issue 26, 11: registrations made through a granted fd are charged to
 * whoever makes them, not to the engine that granted the fd: root's own
 * share is full, nobody registers within nobody's.
 */
TEST_F(lim, eventfds_through_a_grant_are_charged_to_the_caller)
{
	int e, g, efd[2], i;
	uint32_t id = 0;

	e = gs_create(self->dev, "grant-efds", 0, &id);
	ASSERT_LE(0, e);
	g = grant(e, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, g);
	for (i = 0; i < 2; i++) {
		efd[i] = eventfd(0, EFD_CLOEXEC);
		ASSERT_LE(0, efd[i]);
	}
	lower(self, "max_eventfds_per_user", "2");
	ASSERT_EQ(0, gs_eventfd(e, efd[0], GPUSLEEP_EFD_ALL));
	ASSERT_EQ(0, gs_eventfd(e, efd[1], GPUSLEEP_EFD_ALL));
	/* nobody's registrations: nobody's share (2), not root's (full) */
	EXPECT_EQ(2, register_as(g, 65534, 3));
	/* and root's share is still root's */
	EXPECT_EQ(0, register_as(g, 0, 1));
	for (i = 0; i < 2; i++)
		close(efd[i]);
	close(g);
	close(e);
}

/* Issue 26, 11: one user's registrations on one domain are bounded. */
TEST_F(lim, eventfds_per_user_per_domain)
{
	int e, c, e2, c2;
	uint32_t id = 0, id2 = 0;

	e = gs_create(self->dev, "dom-efds", 0, &id);
	ASSERT_LE(0, e);
	c = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c);
	e2 = gs_create(self->dev, "dom-efds2", 0, &id2);
	ASSERT_LE(0, e2);
	c2 = gs_attach(self->dev, id2, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, c2);
	lower(self, "max_eventfds_per_user_per_domain", "3");
	ASSERT_STREQ("64\n", self->old);	/* the default */
	/* every fd of this user on the domain counts: the controller's too */
	EXPECT_EQ(2, register_as(e, 0, 2));
	EXPECT_EQ(1, register_as(c, 0, 5));
	/* another domain has its own bound; another user its own */
	EXPECT_EQ(3, register_as(c2, 0, 5));
	EXPECT_EQ(3, register_as(c, 65534, 5));
	close(c2);
	close(e2);
	close(c);
	close(e);
}

/*
 * In a new user namespace made by creator (a uid of the initial
 * namespace) with 4 uids mapped (0..3 inside, base.. out), each uid
 * creates domains until refused (at most 8) and keeps them; the total.
 */
static int userns_create_all(int dev, uid_t creator, unsigned int base,
			     int *skipped)
{
	int go[2], rep[2], total = 0, n, i, st;
	char buf[64], line[32];
	pid_t c;

	*skipped = 0;
	if (pipe(go) || pipe(rep))
		return -1;
	c = fork();
	if (c == 0) {
		pid_t kids[4];
		char x;

		close(go[1]);
		if (creator && (setresgid(creator, creator, creator) ||
				setresuid(creator, creator, creator)))
			_exit(2);
		if (unshare(CLONE_NEWUSER)) {
			n = -errno;
			_exit(write(rep[1], &n, sizeof(n)) == sizeof(n) ? 3 : 4);
		}
		n = 0;
		if (write(rep[1], &n, sizeof(n)) != sizeof(n) ||
		    read(go[0], &x, 1) != 1)
			_exit(5);
		for (i = 0; i < 4; i++) {
			kids[i] = fork();
			if (kids[i] == 0) {
				int k = 0;

				if (setresgid(i, i, i) || setresuid(i, i, i))
					_exit(6);
				while (k < 8 && gs_create(dev, "ns", 0, NULL) >= 0)
					k++;
				if (write(rep[1], &k, sizeof(k)) != sizeof(k))
					_exit(7);
				/* keep them until the namespace's root goes */
				(void)read(go[0], &x, 1);
				_exit(0);
			}
		}
		/* hold until the parent has read every count */
		(void)read(go[0], &x, 1);
		for (i = 0; i < 4; i++)
			kill(kids[i], SIGKILL);
		_exit(0);
	}
	close(go[0]);
	if (read(rep[0], &n, sizeof(n)) != sizeof(n))
		return -1;
	if (n < 0) {
		*skipped = -n;
		waitpid(c, &st, 0);
		return 0;
	}
	snprintf(line, sizeof(line), "0 %u 4\n", base);
	snprintf(buf, sizeof(buf), "/proc/%d/uid_map", c);
	if (write_file(buf, line))
		return -1;
	snprintf(buf, sizeof(buf), "/proc/%d/gid_map", c);
	if (write_file(buf, line))
		return -1;
	if (write(go[1], "g", 1) != 1)
		return -1;
	for (i = 0; i < 4; i++) {
		if (read(rep[0], &n, sizeof(n)) != sizeof(n))
			return -1;
		total += n;
	}
	close(go[1]);	/* EOF: every holder lets go */
	waitpid(c, &st, 0);
	close(rep[0]);
	close(rep[1]);
	return total;
}

/*
 * Issue 26, 10: a user does not get more shares by making a user
 * namespace with 4 mapped uids. What is made in a namespace is charged to
 * the namespace's owner too, up the chain of namespaces (as the kernel's
 * ucounts climb): with a share of 2, nobody's container makes 2 domains
 * in all.
 */
TEST_F(lim, a_user_namespace_does_not_multiply_the_share)
{
	int skipped, total;

	lower(self, "max_domains_per_user", "2");
	total = userns_create_all(self->dev, 65534, 200000, &skipped);
	if (skipped)
		SKIP(return, "unshare(CLONE_NEWUSER) as uid 65534: %s (unprivileged user namespaces off, or the test runs in a chroot)",
		     strerror(skipped));
	EXPECT_EQ(2, total);
}

/*
 * Issue 35: a user namespace that root made (a Kubernetes pod's, a
 * container runtime's) is not pooled into uid 0's one share: each of its
 * users has a share of its own there (here 4 uids, 2 each), and root's
 * own share, full here, is untouched; a second such namespace has its
 * own shares again. Namespaces made by anyone else are charged up to
 * their owner (the test above).
 */
TEST_F(lim, a_user_namespace_root_made_has_its_own_shares)
{
	int a, b, skipped, total;

	lower(self, "max_domains_per_user", "2");
	a = gs_create(self->dev, "root1", 0, NULL);
	b = gs_create(self->dev, "root2", 0, NULL);
	ASSERT_LE(0, a);
	ASSERT_LE(0, b);
	EXPECT_EQ(-EDQUOT, gs_create(self->dev, "root3", 0, NULL));
	total = userns_create_all(self->dev, 0, 100000, &skipped);
	if (skipped)
		SKIP(goto out, "unshare(CLONE_NEWUSER): %s (user namespaces off, or the test runs in a chroot)",
		     strerror(skipped));
	EXPECT_EQ(8, total);
	total = userns_create_all(self->dev, 0, 300000, &skipped);
	EXPECT_EQ(8, total);
	/* and root's own share is still full */
	EXPECT_EQ(-EDQUOT, gs_create(self->dev, "root3", 0, NULL));
out:
	close(a);
	close(b);
}

TEST_HARNESS_MAIN
