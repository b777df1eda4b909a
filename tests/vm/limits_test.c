// SPDX-License-Identifier: GPL-2.0
/*
 * Per-user limits: one euid may hold only its share of domains, of agent
 * and controller fds and of eventfd registrations (EDQUOT past it), so
 * that /dev/gpusleep being open to all lets no user starve the others.
 * Each test lowers a module parameter and puts it back.
 */
#define _GNU_SOURCE
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

TEST_HARNESS_MAIN
