// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libgpusleep: uAPI wrappers, reason/state/event names, tag parsing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "libgpusleep.h"
#include "internal.h"

static int sys_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret;

	do {
		ret = ioctl(fd, cmd, arg);
	} while (ret < 0 && errno == EINTR && cmd != GPUSLEEP_IOC_RELEASE &&
		 cmd != GPUSLEEP_IOC_RESUME && cmd != GPUSLEEP_IOC_WAIT);
	return ret < 0 ? -errno : ret;
}

static int complete_ioctl(int fd, const struct gpusleep_complete *c)
{
	return sys_ioctl(fd, GPUSLEEP_IOC_COMPLETE, (void *)c);
}

/* Replaced by the host tests, which feed records through a socketpair. */
GS_HIDDEN gs_complete_fn gs_complete_hook = complete_ioctl;

int gs_open(const char *path, uint64_t need, struct gpusleep_api *api)
{
	struct gpusleep_api a;
	int fd, ret;

	fd = open(path ? path : GS_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.api = GPUSLEEP_API_VERSION;
	a.features = need;
	ret = sys_ioctl(fd, GPUSLEEP_IOC_API, &a);
	if (api)
		*api = a;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

static int copy_name(char *dst, size_t len, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= len)
		return -ENAMETOOLONG;
	memset(dst, 0, len);
	if (n)
		memcpy(dst, src, n);
	return 0;
}

int gs_create_domain(int devfd, const char *name, const char *gpu,
		     uint32_t caps, uint32_t flags, uint32_t *id)
{
	return gs_create_domain_tags(devfd, name, gpu, caps, flags, NULL, 0,
				     id);
}

int gs_create_domain_tags(int devfd, const char *name, const char *gpu,
			  uint32_t caps, uint32_t flags,
			  const struct gpusleep_tag *tags,
			  unsigned int nr_tags, uint32_t *id)
{
	struct gpusleep_create c;
	int ret;

	memset(&c, 0, sizeof(c));
	if (!name || !*name || nr_tags > GPUSLEEP_MAX_TAGS ||
	    (nr_tags && !tags))
		return -EINVAL;
	ret = copy_name(c.name, sizeof(c.name), name);
	if (!ret)
		ret = copy_name(c.gpu, sizeof(c.gpu), gpu);
	if (ret)
		return ret;
	c.caps = caps;
	c.flags = flags;
	c.nr_tags = nr_tags;
	if (nr_tags)
		memcpy(c.tags, tags, nr_tags * sizeof(tags[0]));
	ret = sys_ioctl(devfd, GPUSLEEP_IOC_CREATE_DOMAIN, &c);
	if (ret >= 0 && id)
		*id = c.id;
	return ret;
}

int gs_get_tags(int fd, struct gpusleep_tags *tags)
{
	memset(tags, 0, sizeof(*tags));
	return sys_ioctl(fd, GPUSLEEP_IOC_GET_TAGS, tags);
}

int gs_grant(int engine_fd, uint32_t role)
{
	struct gpusleep_grant g;

	memset(&g, 0, sizeof(g));
	g.role = role;
	return sys_ioctl(engine_fd, GPUSLEEP_IOC_GRANT, &g);
}

int gs_attach(int devfd, uint32_t id, uint32_t role)
{
	struct gpusleep_attach a;

	memset(&a, 0, sizeof(a));
	a.id = id;
	a.role = role;
	return sys_ioctl(devfd, GPUSLEEP_IOC_ATTACH, &a);
}

static int do_op(int fd, unsigned long cmd, uint32_t tags, uint32_t flags,
		 uint32_t timeout_ms, struct gpusleep_op *out)
{
	struct gpusleep_op op;
	int ret;

	memset(&op, 0, sizeof(op));
	op.tags = tags;
	op.flags = flags;
	op.timeout_ms = timeout_ms;
	ret = sys_ioctl(fd, cmd, &op);
	if (out)
		*out = op;
	return ret < 0 ? ret : 0;
}

int gs_release(int fd, uint32_t tags, uint32_t flags, uint32_t timeout_ms,
	       struct gpusleep_op *out)
{
	return do_op(fd, GPUSLEEP_IOC_RELEASE, tags, flags, timeout_ms, out);
}

int gs_resume(int fd, uint32_t tags, uint32_t flags, uint32_t timeout_ms,
	      struct gpusleep_op *out)
{
	return do_op(fd, GPUSLEEP_IOC_RESUME, tags, flags, timeout_ms, out);
}

int gs_is_sleeping(int fd)
{
	return sys_ioctl(fd, GPUSLEEP_IOC_IS_SLEEPING, NULL);
}

int gs_get_state(int fd, struct gpusleep_state *st)
{
	int ret;

	memset(st, 0, sizeof(*st));
	ret = sys_ioctl(fd, GPUSLEEP_IOC_GET_STATE, st);
	return ret < 0 ? ret : 0;
}

int gs_wait(int fd, uint64_t op_id, uint32_t timeout_ms,
	    struct gpusleep_result *res)
{
	struct gpusleep_wait w;
	int ret;

	memset(&w, 0, sizeof(w));
	w.op_id = op_id;
	w.timeout_ms = timeout_ms;
	ret = sys_ioctl(fd, GPUSLEEP_IOC_WAIT, &w);
	/* After -EINTR, result.op_id is the one it waited for. */
	if (res)
		*res = w.result;
	return ret < 0 ? ret : 0;
}

int gs_eventfd(int fd, int efd, uint32_t events)
{
	struct gpusleep_eventfd e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.fd = efd;
	e.events = events;
	ret = sys_ioctl(fd, GPUSLEEP_IOC_EVENTFD, &e);
	return ret < 0 ? ret : 0;
}

int gs_read_event(int fd, struct gpusleep_event *ev)
{
	ssize_t n;

	do {
		n = read(fd, ev, sizeof(*ev));
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	/* an older module's record is smaller: its later fields read 0 */
	if ((size_t)n < GPUSLEEP_EVENT_SIZE_VER0 || (size_t)n > sizeof(*ev))
		return -EPROTO;
	memset((char *)ev + n, 0, sizeof(*ev) - (size_t)n);
	return 1;
}

int gs_complete(int fd, const struct gpusleep_event *ev, int status,
		uint64_t bytes)
{
	return gs_complete_tag(fd, ev, status, bytes, 0, 0, 0);
}

int gs_complete_tag(int fd, const struct gpusleep_event *ev, int status,
		    uint64_t bytes, uint64_t freed_bytes, uint64_t lost_bytes,
		    uint32_t flags)
{
	struct gpusleep_complete c;

	memset(&c, 0, sizeof(c));
	c.status = status;
	c.bytes = bytes;
	c.freed_bytes = freed_bytes;
	c.lost_bytes = lost_bytes;
	c.flags = flags;
	return gs_complete_ex(fd, ev, &c);
}

int gs_complete_ex(int fd, const struct gpusleep_event *ev,
		   struct gpusleep_complete *c)
{
	int ret;

	c->op_id = ev->op_id;
	c->step = ev->step;
	c->type = ev->type;
	ret = gs_complete_hook(fd, c);
	return ret < 0 ? ret : 0;
}

/* ------------------------------------------------------------------ */

struct reason_desc {
	const char *name;
	const char *str;
	int err;
};

static const struct reason_desc reasons[GPUSLEEP_R_MAX] = {
	[GPUSLEEP_R_NONE] = { "NONE", "success", 0 },
	[GPUSLEEP_R_NOT_ENABLED] = { "NOT_ENABLED",
		"memory saver not enabled: no agent attached", ENOTCONN },
	[GPUSLEEP_R_INVALID] = { "INVALID",
		"invalid request: unknown tags or flags, or non-zero reserved fields",
		EINVAL },
	[GPUSLEEP_R_KV_NOT_ALLOWED] = { "KV_NOT_ALLOWED",
		"cannot release kv_cache: prefix caching is on and the engine cannot reset it",
		EOPNOTSUPP },
	[GPUSLEEP_R_ALREADY_RELEASED] = { "ALREADY_RELEASED",
		"tags already released", EALREADY },
	[GPUSLEEP_R_BUSY] = { "BUSY",
		"a pause or release is already in progress", EBUSY },
	[GPUSLEEP_R_NOT_RELEASED] = { "NOT_RELEASED",
		"tags not released", ENOENT },
	[GPUSLEEP_R_CANCELLED] = { "CANCELLED",
		"resumed before release drained", ECANCELED },
	[GPUSLEEP_R_DRAIN_TIMEOUT] = { "DRAIN_TIMEOUT",
		"the engine did not drain in time", ETIMEDOUT },
	[GPUSLEEP_R_AGENT_TIMEOUT] = { "AGENT_TIMEOUT",
		"the agent did not answer in time", ETIMEDOUT },
	[GPUSLEEP_R_ENGINE_FAILED] = { "ENGINE_FAILED",
		"the engine failed a step (drain, cache reset or KV repair)",
		EREMOTEIO },
	[GPUSLEEP_R_AGENT_FAILED] = { "AGENT_FAILED",
		"the agent failed to unmap or remap a tag", EREMOTEIO },
	[GPUSLEEP_R_AGENT_GONE] = { "AGENT_GONE",
		"the agent closed its fd during the operation", EPIPE },
	[GPUSLEEP_R_ENGINE_GONE] = { "ENGINE_GONE",
		"the engine closed its fd: the domain is dead", EOWNERDEAD },
	[GPUSLEEP_R_NO_MEMORY] = { "NO_MEMORY",
		"the kernel could not allocate memory", ENOMEM },
	[GPUSLEEP_R_QUEUE_FULL] = { "QUEUE_FULL",
		"event queue overflow", ENOBUFS },
	[GPUSLEEP_R_ENGINE_TIMEOUT] = { "ENGINE_TIMEOUT",
		"the engine did not answer a cache reset or KV repair in time",
		ETIMEDOUT },
	[GPUSLEEP_R_LEASED] = { "LEASED",
		"the tags are held by a lease: resumed when it ends", EAGAIN },
	[GPUSLEEP_R_HOST_BUDGET] = { "HOST_BUDGET",
		"the backup would pass the node's host-RAM budget", ENOSPC },
	[GPUSLEEP_R_VERIFY_FAILED] = { "VERIFY_FAILED",
		"a restored backup failed its checksum: contents lost", EBADMSG },
	[GPUSLEEP_R_SHORTFALL] = { "SHORTFALL",
		"the reclaim could not free the bytes asked for", ENOSPC },
};

const char *gs_reason_str(uint32_t reason)
{
	if (reason >= GPUSLEEP_R_MAX || !reasons[reason].str)
		return "unknown reason";
	return reasons[reason].str;
}

const char *gs_reason_name(uint32_t reason)
{
	if (reason >= GPUSLEEP_R_MAX || !reasons[reason].name)
		return "UNKNOWN";
	return reasons[reason].name;
}

int gs_reason_errno(uint32_t reason)
{
	if (reason >= GPUSLEEP_R_MAX || !reasons[reason].name)
		return -1;
	return reasons[reason].err;
}

static const char *const state_names[GPUSLEEP_S_MAX] = {
	[GPUSLEEP_S_AWAKE] = "awake",
	[GPUSLEEP_S_DRAINING] = "draining",
	[GPUSLEEP_S_RELEASING] = "releasing",
	[GPUSLEEP_S_RELEASED] = "released",
	[GPUSLEEP_S_RESUMING] = "resuming",
	[GPUSLEEP_S_DEAD] = "dead",
};

const char *gs_state_name(uint32_t state)
{
	if (state >= GPUSLEEP_S_MAX || !state_names[state])
		return "unknown";
	return state_names[state];
}

static const char *const event_names[GPUSLEEP_EV_MAX] = {
	[GPUSLEEP_EV_NONE] = "none",
	[GPUSLEEP_EV_DRAIN] = "drain",
	[GPUSLEEP_EV_DRAIN_CANCELLED] = "drain_cancelled",
	[GPUSLEEP_EV_RESET_CACHES] = "reset_caches",
	[GPUSLEEP_EV_REPAIR_KV] = "repair_kv",
	[GPUSLEEP_EV_RESUME_SCHED] = "resume_sched",
	[GPUSLEEP_EV_PAUSE_TAG] = "pause_tag",
	[GPUSLEEP_EV_RESUME_TAG] = "resume_tag",
};

const char *gs_event_name(uint32_t type)
{
	if (type >= GPUSLEEP_EV_MAX || !event_names[type])
		return "unknown";
	return event_names[type];
}

static const struct gpusleep_tags default_tags = {
	.nr_tags = GPUSLEEP_NR_TAGS,
	.tags = {
		{ .name = "weights", .kind = GPUSLEEP_TAG_KIND_MEMORY },
		{ .name = "kv_cache", .kind = GPUSLEEP_TAG_KIND_KV_CACHE },
	},
};

/* The name of one-bit tag in decl, or NULL. */
static const char *decl_name(const struct gpusleep_tags *decl, uint32_t tag)
{
	uint32_t n = decl->nr_tags < GPUSLEEP_MAX_TAGS ? decl->nr_tags :
							 GPUSLEEP_MAX_TAGS;

	for (uint32_t i = 0; i < n; i++)
		if (tag == (1U << i))
			return decl->tags[i].name;
	return NULL;
}

const char *gs_tag_name(uint32_t tag)
{
	return decl_name(&default_tags, tag);
}

int gs_tags_parse(const char *s, uint32_t *tags)
{
	return gs_tags_parse_in(NULL, s, tags);
}

int gs_tags_parse_in(const struct gpusleep_tags *decl, const char *s,
		     uint32_t *tags)
{
	uint32_t t = 0, n;
	const char *p = s;

	if (!decl)
		decl = &default_tags;
	n = decl->nr_tags < GPUSLEEP_MAX_TAGS ? decl->nr_tags :
						GPUSLEEP_MAX_TAGS;
	if (!s)
		return -EINVAL;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p) {
		*tags = 0;
		return 0;
	}
	for (;;) {
		const char *start, *end;
		size_t len;
		bool found = false;

		while (*p == ' ' || *p == '\t')
			p++;
		start = p;
		while (*p && *p != ',')
			p++;
		end = p;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		len = (size_t)(end - start);
		if (len == 3 && !strncmp(start, "all", 3)) {
			t |= n ? (uint32_t)((1ULL << n) - 1) : 0;
			found = true;
		}
		for (uint32_t i = 0; !found && i < n; i++) {
			const char *name = decl->tags[i].name;

			if (strnlen(name, GPUSLEEP_TAG_NAME_LEN) == len &&
			    !strncmp(start, name, len)) {
				t |= 1U << i;
				found = true;
			}
		}
		if (!found)
			return -EINVAL;
		if (!*p)
			break;
		p++;	/* the comma */
	}
	*tags = t;
	return 0;
}

int gs_tags_format(uint32_t tags, char *buf, size_t len)
{
	return gs_tags_format_in(NULL, tags, buf, len);
}

int gs_tags_format_in(const struct gpusleep_tags *decl, uint32_t tags,
		      char *buf, size_t len)
{
	size_t off = 0;
	bool trunc = false;

	if (!len)
		return -ENOSPC;
	buf[0] = 0;
	for (unsigned int i = 0; i < 32; i++) {
		char unk[16];
		const char *name;
		int n;

		if (!(tags & (1U << i)))
			continue;
		name = decl_name(decl ? decl : &default_tags, 1U << i);
		if (!name) {
			snprintf(unk, sizeof(unk), "0x%x", 1U << i);
			name = unk;
		}
		n = snprintf(buf + off, len - off, "%s%.*s", off ? "," : "",
			     GPUSLEEP_TAG_NAME_LEN, name);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = 0;	/* whole names only */
			trunc = true;
			break;
		}
		off += (size_t)n;
	}
	return trunc ? -ENOSPC : (int)off;
}
