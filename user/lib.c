// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libgpusleep: uAPI wrappers, reason/state/event names, tag parsing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
		 cmd != GPUSLEEP_IOC_RESUME && cmd != GPUSLEEP_IOC_WAIT &&
		 cmd != GPUSLEEP_IOC_RECLAIM &&
		 cmd != GPUSLEEP_IOC_RECLAIM_WAIT &&
		 cmd != GPUSLEEP_IOC_LEASE_RETURN);
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
/* Tenants, reclaims and leases                                        */

int gs_set_tenant(int engine_fd, int32_t priority, uint32_t flags)
{
	struct gpusleep_tenant_set t;
	int ret;

	memset(&t, 0, sizeof(t));
	t.priority = priority;
	t.flags = flags;
	ret = sys_ioctl(engine_fd, GPUSLEEP_IOC_SET_TENANT, &t);
	return ret < 0 ? ret : 0;
}

int gs_get_tenant(int fd, struct gpusleep_tenant *t)
{
	int ret;

	memset(t, 0, sizeof(*t));
	ret = sys_ioctl(fd, GPUSLEEP_IOC_GET_TENANT, t);
	return ret < 0 ? ret : 0;
}

static int report_ioctl(int fd, const struct gpusleep_report *r)
{
	return sys_ioctl(fd, GPUSLEEP_IOC_REPORT, (void *)r);
}

/* Replaced by the host tests, as gs_complete_hook. */
GS_HIDDEN gs_report_fn gs_report_hook = report_ioctl;

int gs_report(int agent_fd, const struct gpusleep_report *r)
{
	int ret = gs_report_hook(agent_fd, r);

	return ret < 0 ? ret : 0;
}

/* The entries written, out of the caller's: *nr_victims in and out. */
static int victims_in(struct gpusleep_reclaim_victim *victims,
		      uint32_t *nr_victims, __u64 *addr, __u32 *nr,
		      __u32 *size)
{
	*addr = 0;
	*nr = 0;
	*size = 0;
	if (!nr_victims || !*nr_victims)
		return 0;
	if (!victims)
		return -EINVAL;
	memset(victims, 0, *nr_victims * sizeof(*victims));
	*addr = (uint64_t)(uintptr_t)victims;
	*nr = *nr_victims;
	*size = sizeof(*victims);
	return 0;
}

static void victims_out(uint32_t *nr_victims, uint32_t written)
{
	if (nr_victims)
		*nr_victims = written < *nr_victims ? written : *nr_victims;
}

int gs_reclaim(int devfd, const uint8_t uuid[16], uint64_t bytes,
	       int32_t priority, uint32_t flags, uint32_t timeout_ms,
	       struct gpusleep_reclaim *out,
	       struct gpusleep_reclaim_victim *victims, uint32_t *nr_victims)
{
	struct gpusleep_reclaim r;
	int ret;

	memset(&r, 0, sizeof(r));
	if (!uuid)
		return -EINVAL;
	memcpy(r.gpu_uuid, uuid, sizeof(r.gpu_uuid));
	r.bytes = bytes;
	r.priority = priority;
	r.flags = flags;
	r.timeout_ms = timeout_ms;
	r.lease_fd = -1;
	ret = victims_in(victims, nr_victims, &r.victims, &r.nr_victims,
			 &r.victim_size);
	if (ret)
		return ret;
	ret = sys_ioctl(devfd, GPUSLEEP_IOC_RECLAIM, &r);
	victims_out(nr_victims, ret < 0 && ret != -ENOSPC ? 0 : r.nr_victims);
	if (out)
		*out = r;
	return ret;
}

int gs_acquire(int devfd, const uint8_t uuid[16], uint64_t bytes,
	       int32_t priority, uint32_t timeout_ms,
	       struct gpusleep_reclaim *out)
{
	return gs_reclaim(devfd, uuid, bytes, priority,
			  GPUSLEEP_RECLAIMF_LEASE, timeout_ms, out, NULL,
			  NULL);
}

int gs_reclaim_wait(int devfd, uint64_t op_id, uint32_t timeout_ms,
		    struct gpusleep_reclaim *out,
		    struct gpusleep_reclaim_victim *victims,
		    uint32_t *nr_victims)
{
	struct gpusleep_reclaim r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.op_id = op_id;
	r.timeout_ms = timeout_ms;
	r.lease_fd = -1;
	ret = victims_in(victims, nr_victims, &r.victims, &r.nr_victims,
			 &r.victim_size);
	if (ret)
		return ret;
	ret = sys_ioctl(devfd, GPUSLEEP_IOC_RECLAIM_WAIT, &r);
	victims_out(nr_victims, ret < 0 && ret != -ENOSPC ? 0 : r.nr_victims);
	if (out)
		*out = r;
	return ret < 0 ? ret : 0;
}

int gs_lease_info(int lease_fd, struct gpusleep_lease *out,
		  struct gpusleep_reclaim_victim *victims,
		  uint32_t *nr_victims)
{
	struct gpusleep_lease l;
	int ret;

	memset(&l, 0, sizeof(l));
	ret = victims_in(victims, nr_victims, &l.victims, &l.nr_victims,
			 &l.victim_size);
	if (ret)
		return ret;
	ret = sys_ioctl(lease_fd, GPUSLEEP_IOC_LEASE_INFO, &l);
	victims_out(nr_victims, ret < 0 ? 0 : l.nr_victims);
	if (out)
		*out = l;
	return ret < 0 ? ret : 0;
}

int gs_lease_return(int lease_fd, bool nonblock)
{
	int ret;

	/* never retried: -EINTR goes to the caller, the return goes on */
	ret = ioctl(lease_fd, GPUSLEEP_IOC_LEASE_RETURN,
		    nonblock ? GPUSLEEP_LEASE_RETURN_NONBLOCK : 0UL);
	return ret < 0 ? -errno : ret;
}

/* ------------------------------------------------------------------ */
/* GPU ids                                                             */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int gs_gpu_uuid_parse(const char *s, uint8_t uuid[16])
{
	unsigned int n = 0;

	if (!s)
		return -EINVAL;
	if (!strncmp(s, "host", 4)) {
		unsigned long idx = 0;
		char *end;

		if (!s[4])
			return gs_host_gpu_uuid(0, uuid);
		if (s[4] != ':' || !s[5])
			return -EINVAL;
		errno = 0;
		idx = strtoul(s + 5, &end, 10);
		if (errno || *end || idx > 1023 || s[5] == '-' || s[5] == '+')
			return -EINVAL;
		return gs_host_gpu_uuid((unsigned int)idx, uuid);
	}
	if (!strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4))
		s += 4;
	for (; *s; s++) {
		int hi, lo;

		if (*s == '-')
			continue;
		hi = hexval(s[0]);
		lo = hi < 0 || !s[1] ? -1 : hexval(s[1]);
		if (lo < 0 || n == 16)
			return -EINVAL;
		uuid[n++] = (uint8_t)(hi << 4 | lo);
		s++;
	}
	if (n != 16)
		return -EINVAL;
	for (n = 0; n < 16 && !uuid[n]; n++)
		;
	return n == 16 ? -EINVAL : 0;	/* all zero names no GPU */
}

int gs_gpu_uuid_format(const uint8_t uuid[16], char *buf, size_t len)
{
	int n;

	n = snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		     uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5],
		     uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11],
		     uuid[12], uuid[13], uuid[14], uuid[15]);
	if (n < 0 || (size_t)n >= len) {
		if (len)
			buf[0] = 0;
		return -ENOSPC;
	}
	return n;
}

/* FNV-1a, 64 bits: a stable digest of a short string, nothing more. */
static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int gs_host_gpu_uuid(unsigned int index, uint8_t uuid[16])
{
	static const char *const files[] = {
		"/etc/machine-id", "/var/lib/dbus/machine-id",
		"/proc/sys/kernel/random/boot_id",
	};
	char id[128], salt[64];
	uint64_t a, b;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && !n; i++) {
		FILE *f = fopen(files[i], "re");

		if (!f)
			continue;
		n = fread(id, 1, sizeof(id) - 1, f);
		fclose(f);
		while (n && (id[n - 1] == '\n' || id[n - 1] == ' '))
			n--;
	}
	if (!n)
		return -ENOENT;
	snprintf(salt, sizeof(salt), "gpusleep host backend %u", index);
	a = fnv1a(fnv1a(0xcbf29ce484222325ull, id, n), salt, strlen(salt));
	b = fnv1a(fnv1a(0x84222325cbf29ce4ull, salt, strlen(salt)), id, n);
	for (int i = 0; i < 8; i++) {
		uuid[i] = (uint8_t)(a >> (56 - 8 * i));
		uuid[8 + i] = (uint8_t)(b >> (56 - 8 * i));
	}
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x80);	/* version 8 */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);	/* RFC 9562 variant */
	return 0;
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

static const char *const lease_states[] = {
	[0] = "none",
	[GPUSLEEP_LEASE_TAKING] = "taking",
	[GPUSLEEP_LEASE_HELD] = "held",
	[GPUSLEEP_LEASE_RETURNING] = "returning",
	[GPUSLEEP_LEASE_RETURNED] = "returned",
};

const char *gs_lease_state_name(uint32_t state)
{
	if (state >= sizeof(lease_states) / sizeof(lease_states[0]))
		return "unknown";
	return lease_states[state];
}

const char *gs_content_name(uint32_t content)
{
	switch (content) {
	case GPUSLEEP_CONTENT_UNDEFINED: return "undefined";
	case GPUSLEEP_CONTENT_ZEROED: return "zeroed";
	case GPUSLEEP_CONTENT_KEPT: return "kept";
	}
	return "unknown";
}

const char *gs_policy_name(uint32_t policy)
{
	switch (policy) {
	case GPUSLEEP_POLICY_DISCARD: return "discard";
	case GPUSLEEP_POLICY_BACKUP: return "backup";
	}
	return "unknown";
}

struct bit_desc {
	uint32_t bit;
	const char *name;
	const char *str;
};

static const struct bit_desc rwhy_bits[] = {
	{ GPUSLEEP_RWHY_NO_CANDIDATE, "no_candidate", "no domain left to try" },
	{ GPUSLEEP_RWHY_PRIORITY, "priority",
	  "the other domains' priority is at or above the claim's" },
	{ GPUSLEEP_RWHY_NOT_PERMITTED, "not_permitted",
	  "domains of other users, not yieldable" },
	{ GPUSLEEP_RWHY_REFUSED, "refused", "victims refused or failed their release" },
	{ GPUSLEEP_RWHY_HOST_BUDGET, "host_budget",
	  "backups would pass the node's host-RAM budget" },
	{ GPUSLEEP_RWHY_DEADLINE, "deadline", "its deadline came" },
	{ GPUSLEEP_RWHY_CANCELLED, "cancelled", "its lease was closed first" },
};

static const struct bit_desc rvf_bits[] = {
	{ GPUSLEEP_RVF_UNMEASURED, "unmeasured", NULL },
	{ GPUSLEEP_RVF_GROUP, "group", NULL },
	{ GPUSLEEP_RVF_FAILED, "failed", NULL },
	{ GPUSLEEP_RVF_ROLLED_BACK, "rolled_back", NULL },
	{ GPUSLEEP_RVF_STILL_RELEASED, "still_released", NULL },
	{ GPUSLEEP_RVF_CANCELLED, "cancelled", NULL },
	{ GPUSLEEP_RVF_RETURNED, "returned", NULL },
	{ GPUSLEEP_RVF_GONE, "gone", NULL },
};

static int bits_format(const struct bit_desc *d, size_t nd, uint32_t bits,
		       char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return -ENOSPC;
	buf[0] = 0;
	for (unsigned int i = 0; i < 32; i++) {
		uint32_t bit = 1U << i;
		const char *name = NULL;
		char unk[16];
		int n;

		if (!(bits & bit))
			continue;
		for (size_t k = 0; k < nd; k++)
			if (d[k].bit == bit)
				name = d[k].name;
		if (!name) {
			snprintf(unk, sizeof(unk), "0x%x", bit);
			name = unk;
		}
		n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", name);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = 0;
			return -ENOSPC;
		}
		off += (size_t)n;
	}
	return (int)off;
}

int gs_rwhy_format(uint32_t why, char *buf, size_t len)
{
	return bits_format(rwhy_bits, sizeof(rwhy_bits) / sizeof(rwhy_bits[0]),
			   why, buf, len);
}

const char *gs_rwhy_str(uint32_t bit)
{
	for (size_t k = 0; k < sizeof(rwhy_bits) / sizeof(rwhy_bits[0]); k++)
		if (rwhy_bits[k].bit == bit)
			return rwhy_bits[k].str;
	return "unknown";
}

int gs_rvf_format(uint32_t flags, char *buf, size_t len)
{
	return bits_format(rvf_bits, sizeof(rvf_bits) / sizeof(rvf_bits[0]),
			   flags, buf, len);
}
