// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libgpusleep: groups of domains (docs/groups.md), one release/resume over
 * every rank of an engine.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>

#include "libgpusleep.h"
#include "internal.h"

/*
 * No retry on EINTR: a group operation goes on after an interrupted wait,
 * and issuing it again would be refused EBUSY; gs_group_wait() picks it up.
 */
static int group_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret = ioctl(fd, cmd, arg);

	return ret < 0 ? -errno : ret;
}

static int group_named(int devfd, unsigned long cmd, const char *name,
		       uint32_t *id)
{
	struct gpusleep_group_create c;
	size_t n = name ? strlen(name) : 0;
	int ret;

	if (n >= sizeof(c.name))
		return -ENAMETOOLONG;
	memset(&c, 0, sizeof(c));
	if (n)
		memcpy(c.name, name, n);
	ret = group_ioctl(devfd, cmd, &c);
	if (ret >= 0 && id)
		*id = c.id;
	return ret;
}

int gs_group_create(int devfd, const char *name, uint32_t *id)
{
	return group_named(devfd, GPUSLEEP_IOC_CREATE_GROUP, name, id);
}

int gs_group_open(int devfd, const char *name, uint32_t *id)
{
	return group_named(devfd, GPUSLEEP_IOC_OPEN_GROUP, name, id);
}

int gs_group_add(int gfd, int domain_fd, uint32_t *rank)
{
	struct gpusleep_group_add a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.fd = domain_fd;
	ret = group_ioctl(gfd, GPUSLEEP_IOC_GROUP_ADD, &a);
	if (!ret && rank)
		*rank = a.rank;
	return ret;
}

static int group_op(int gfd, unsigned long cmd, uint32_t tags, uint32_t flags,
		    uint32_t timeout_ms, struct gpusleep_group_op *out)
{
	struct gpusleep_group_op o;
	int ret;

	memset(&o, 0, sizeof(o));
	o.tags = tags;
	o.flags = flags;
	o.timeout_ms = timeout_ms;
	ret = group_ioctl(gfd, cmd, &o);
	if (out)
		*out = o;
	return ret;
}

int gs_group_release(int gfd, uint32_t tags, uint32_t flags,
		     uint32_t timeout_ms, struct gpusleep_group_op *out)
{
	return group_op(gfd, GPUSLEEP_IOC_GROUP_RELEASE, tags, flags,
			timeout_ms, out);
}

int gs_group_resume(int gfd, uint32_t tags, uint32_t flags,
		    uint32_t timeout_ms, struct gpusleep_group_op *out)
{
	return group_op(gfd, GPUSLEEP_IOC_GROUP_RESUME, tags, flags,
			timeout_ms, out);
}

int gs_group_wait(int gfd, uint64_t op_id, uint32_t timeout_ms,
		  struct gpusleep_group_result *res,
		  struct gpusleep_group_rank *ranks, uint32_t *nr_ranks)
{
	struct gpusleep_group_wait w;
	int ret;

	memset(&w, 0, sizeof(w));
	w.op_id = op_id;
	w.timeout_ms = timeout_ms;
	if (ranks && nr_ranks && *nr_ranks) {
		w.ranks = (uintptr_t)ranks;
		w.nr_ranks = *nr_ranks;
		w.rank_size = sizeof(*ranks);
	}
	ret = group_ioctl(gfd, GPUSLEEP_IOC_GROUP_WAIT, &w);
	if (ret == -EINTR && res)
		res->op_id = w.result.op_id;	/* the one it waited for */
	if (ret)
		return ret;
	if (res)
		*res = w.result;
	if (nr_ranks)
		*nr_ranks = w.nr_ranks;
	return 0;
}

int gs_group_eventfd(int gfd, int efd)
{
	struct gpusleep_eventfd e;

	memset(&e, 0, sizeof(e));
	e.fd = efd;
	e.events = efd >= 0 ? GPUSLEEP_EFD_OP_DONE : 0;
	return group_ioctl(gfd, GPUSLEEP_IOC_GROUP_EVENTFD, &e);
}
