// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: look at and control gpusleep domains on this node.
 *
 *   list / status      read /sys/class/gpusleep/ (text or --json)
 *   release / resume   attach as a controller through /dev/gpusleep
 *   wait               eventfd (OP_DONE) + epoll, then GPUSLEEP_IOC_WAIT
 *   monitor            the "gpusleep" generic netlink family, group "events"
 *   metrics            Prometheus text exposition from sysfs
 *
 * Exit status: 0 ok, 1 the operation failed or was refused, 2 usage,
 * 3 no such domain or no module, 4 permission denied. See gpusleepctl(8).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include <linux/gpusleep.h>
#include <linux/gpusleep_netlink.h>

#include "libgpusleep.h"

#define EX_OK		0
#define EX_FAILED	1
#define EX_USAGE	2
#define EX_NOTFOUND	3
#define EX_PERM		4

#define SYSFS_DEFAULT	"/sys/class/gpusleep"

static const char *prog = "gpusleepctl";
static const char *sysfs_root = SYSFS_DEFAULT;
static const char *dev_path;	/* NULL: GS_DEVICE_PATH */

static void errmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The exit status an errno from the device or the id table stands for. */
static int errno_exit(int err)
{
	switch (err) {
	case ENOENT:
	case ENODEV:
	case ENXIO:
		return EX_NOTFOUND;
	case EPERM:
	case EACCES:
		return EX_PERM;
	default:
		return EX_FAILED;
	}
}

/* ------------------------------------------------------------------ */
/* sysfs                                                               */

struct domain {
	uint32_t id;
	char name[GPUSLEEP_NAME_LEN];
	char gpu[GPUSLEEP_GPU_LEN];
	uint32_t owner_uid;
	int owner_pid;
	char state[16];
	char released_tags[64];
	int drain_pending, agent_attached, kv_release_allowed;
	uint64_t op_in_flight;
	uint64_t releases, resumes, failures, cancels, timeouts;
	char last_error[32];
	uint64_t last_release_us, last_resume_us;
	uint64_t bytes_weights, bytes_kv_cache;
};

/* Read one attribute, without its newline. -errno on failure. */
static int read_attr(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	close(fd);
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char buf[32], *end;
	int r = read_attr(dir, name, buf, sizeof(buf));

	if (r)
		return r;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	return 0;
}

static int read_int(const char *dir, const char *name, int *v)
{
	uint64_t u;
	int r = read_u64(dir, name, &u);

	if (!r)
		*v = (int)u;
	return r;
}

#define STR_FIELD(f)	{ #f, offsetof(struct domain, f), sizeof(((struct domain *)0)->f), 's' }
#define U64_FIELD(f)	{ #f, offsetof(struct domain, f), 0, 'u' }
#define INT_FIELD(f)	{ #f, offsetof(struct domain, f), 0, 'i' }

static const struct field {
	const char *name;
	size_t off;
	size_t len;
	char type;
} fields[] = {
	STR_FIELD(name), STR_FIELD(gpu), INT_FIELD(owner_pid),
	STR_FIELD(state), STR_FIELD(released_tags), INT_FIELD(drain_pending),
	INT_FIELD(agent_attached), INT_FIELD(kv_release_allowed),
	U64_FIELD(op_in_flight), U64_FIELD(releases), U64_FIELD(resumes),
	U64_FIELD(failures), U64_FIELD(cancels), U64_FIELD(timeouts),
	STR_FIELD(last_error), U64_FIELD(last_release_us),
	U64_FIELD(last_resume_us), U64_FIELD(bytes_weights),
	U64_FIELD(bytes_kv_cache),
};

/* Load domain id from sysfs. -ENOENT when it is gone (or never was). */
static int domain_load(uint32_t id, struct domain *d)
{
	char dir[PATH_MAX];
	char *base = (char *)d;
	uint64_t v;
	size_t i;
	int r;

	memset(d, 0, sizeof(*d));
	snprintf(dir, sizeof(dir), "%s/domain%u", sysfs_root, id);
	d->id = id;
	r = read_u64(dir, "owner_uid", &v);
	if (r)
		return r;
	d->owner_uid = (uint32_t)v;
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct field *f = &fields[i];

		if (f->type == 's')
			r = read_attr(dir, f->name, base + f->off, f->len);
		else if (f->type == 'i')
			r = read_int(dir, f->name, (int *)(base + f->off));
		else
			r = read_u64(dir, f->name, (uint64_t *)(base + f->off));
		if (r)
			return r;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* The ids of the domains in sysfs, sorted; *n their count. */
static int domain_ids(uint32_t **ids, size_t *n)
{
	size_t cap = 0, cnt = 0;
	uint32_t *v = NULL, *nv;
	struct dirent *de;
	unsigned long id;
	char *end;
	DIR *dir;

	dir = opendir(sysfs_root);
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, "domain", 6) || !isdigit(de->d_name[6]))
			continue;
		id = strtoul(de->d_name + 6, &end, 10);
		if (*end || id > UINT32_MAX)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(dir);
				return -ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = (uint32_t)id;
	}
	closedir(dir);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_u32);
	*ids = v;
	*n = cnt;
	return 0;
}

static int no_module(void)
{
	errmsg("%s: %s (is the gpusleep module loaded?)", sysfs_root,
	       strerror(ENOENT));
	return EX_NOTFOUND;
}

/* domain_ids() for a command: 0, or the exit status after saying why. */
static int all_domain_ids(uint32_t **ids, size_t *n)
{
	int r = domain_ids(ids, n);

	if (r == -ENOENT)
		return no_module();
	if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_FAILED;
	}
	return 0;
}

/*
 * DOMAIN is an id or a name. Returns 0 with *id, or an exit status after
 * saying why on stderr.
 */
static int resolve(const char *arg, uint32_t *id)
{
	struct domain d;
	uint32_t *ids, found = 0;
	size_t n, i, matches = 0;
	unsigned long v;
	char *end;
	int r;

	if (access(sysfs_root, F_OK))
		return no_module();
	if (isdigit((unsigned char)arg[0])) {
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (!errno && !*end && v && v <= UINT32_MAX) {
			if (domain_load((uint32_t)v, &d)) {
				errmsg("domain %s: no such domain", arg);
				return EX_NOTFOUND;
			}
			*id = (uint32_t)v;
			return 0;
		}
	}
	r = domain_ids(&ids, &n);
	if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_NOTFOUND;
	}
	for (i = 0; i < n; i++) {
		if (domain_load(ids[i], &d) || strcmp(d.name, arg))
			continue;
		if (!matches++)
			found = ids[i];
	}
	free(ids);
	if (!matches) {
		errmsg("domain %s: no such domain", arg);
		return EX_NOTFOUND;
	}
	if (matches > 1) {
		errmsg("domain %s: %zu domains have that name; give the id",
		       arg, matches);
		return EX_USAGE;
	}
	*id = found;
	return 0;
}

/* ------------------------------------------------------------------ */
/* JSON and text output                                                */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A reason name as the sysfs files spell it: lower case. */
static void json_lower(FILE *f, const char *s)
{
	char buf[64];
	size_t i;

	for (i = 0; s[i] && i < sizeof(buf) - 1; i++)
		buf[i] = (char)tolower((unsigned char)s[i]);
	buf[i] = '\0';
	json_str(f, buf);
}

/* "weights,kv_cache" as a JSON array of strings. */
static void json_tags(FILE *f, const char *list)
{
	const char *p = list;
	bool first = true;

	fputc('[', f);
	while (*p) {
		size_t n = strcspn(p, ",");
		char tag[32];

		snprintf(tag, sizeof(tag), "%.*s", (int)n, p);
		fputs(first ? "" : ",", f);
		json_str(f, tag);
		first = false;
		p += n;
		if (*p == ',')
			p++;
	}
	fputc(']', f);
}

static void json_tag_bits(FILE *f, uint32_t tags)
{
	char buf[128];

	if (gs_tags_format(tags, buf, sizeof(buf)) < 0)
		buf[0] = '\0';
	json_tags(f, buf);
}

static void json_domain(FILE *f, const struct domain *d, bool full)
{
	fprintf(f, "{\"id\":%u,\"name\":", d->id);
	json_str(f, d->name);
	fputs(",\"gpu\":", f);
	json_str(f, d->gpu);
	fputs(",\"state\":", f);
	json_str(f, d->state);
	fputs(",\"released_tags\":", f);
	json_tags(f, d->released_tags);
	fprintf(f, ",\"agent_attached\":%s,\"op_in_flight\":%llu",
		d->agent_attached ? "true" : "false",
		(unsigned long long)d->op_in_flight);
	if (full) {
		fprintf(f, ",\"owner_uid\":%u,\"owner_pid\":%d", d->owner_uid,
			d->owner_pid);
		fprintf(f, ",\"drain_pending\":%s,\"kv_release_allowed\":%s",
			d->drain_pending ? "true" : "false",
			d->kv_release_allowed ? "true" : "false");
		fprintf(f, ",\"counters\":{\"releases\":%llu,\"resumes\":%llu,"
			"\"failures\":%llu,\"cancels\":%llu,\"timeouts\":%llu}",
			(unsigned long long)d->releases,
			(unsigned long long)d->resumes,
			(unsigned long long)d->failures,
			(unsigned long long)d->cancels,
			(unsigned long long)d->timeouts);
		fputs(",\"last_error\":", f);
		json_str(f, d->last_error);
		fprintf(f, ",\"last_release_us\":%llu,\"last_resume_us\":%llu",
			(unsigned long long)d->last_release_us,
			(unsigned long long)d->last_resume_us);
		fprintf(f, ",\"bytes\":{\"weights\":%llu,\"kv_cache\":%llu}",
			(unsigned long long)d->bytes_weights,
			(unsigned long long)d->bytes_kv_cache);
	}
	fputc('}', f);
}

static void text_status(const struct domain *d)
{
	printf("domain %u: %s\n", d->id, d->name);
	printf("\tgpu %s  owner uid %u pid %d\n", d->gpu[0] ? d->gpu : "-",
	       d->owner_uid, d->owner_pid);
	printf("\tstate %s  released %s  drain pending %s\n", d->state,
	       d->released_tags[0] ? d->released_tags : "-",
	       d->drain_pending ? "yes" : "no");
	printf("\tagent %s  kv release %s  op in flight ",
	       d->agent_attached ? "attached" : "none",
	       d->kv_release_allowed ? "allowed" : "not allowed");
	if (d->op_in_flight)
		printf("%llu\n", (unsigned long long)d->op_in_flight);
	else
		printf("none\n");
	printf("\treleases %llu  resumes %llu  failures %llu  cancels %llu  timeouts %llu\n",
	       (unsigned long long)d->releases, (unsigned long long)d->resumes,
	       (unsigned long long)d->failures, (unsigned long long)d->cancels,
	       (unsigned long long)d->timeouts);
	printf("\tlast error %s  last release %llu us  last resume %llu us\n",
	       d->last_error, (unsigned long long)d->last_release_us,
	       (unsigned long long)d->last_resume_us);
	printf("\treleased bytes: weights %llu  kv_cache %llu\n",
	       (unsigned long long)d->bytes_weights,
	       (unsigned long long)d->bytes_kv_cache);
}

/* ------------------------------------------------------------------ */
/* list, status                                                        */

/* Options of list, status, metrics: --json only. */
static int parse_json_opt(int argc, char **argv, bool *json,
			  const char *usage)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if (!json)
				goto bad;
			*json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(EX_OK);
		default:
			goto bad;
		}
	}
	return 0;
bad:
	fputs(usage, stderr);
	return -1;
}

static const char list_usage[] =
	"Usage: gpusleepctl list [--json]\n"
	"List the domains of this node: id, name, GPU, state, released tags.\n";

static int cmd_list(int argc, char **argv)
{
	struct domain d;
	uint32_t *ids;
	size_t n, i;
	bool json = false, first = true;
	int r;

	if (parse_json_opt(argc, argv, &json, list_usage))
		return EX_USAGE;
	if (optind != argc) {
		fputs(list_usage, stderr);
		return EX_USAGE;
	}
	r = all_domain_ids(&ids, &n);
	if (r)
		return r;
	if (json)
		putchar('[');
	else
		printf("%-6s %-20s %-16s %-10s %-18s %s\n", "ID", "NAME", "GPU",
		       "STATE", "RELEASED", "AGENT");
	for (i = 0; i < n; i++) {
		if (domain_load(ids[i], &d))
			continue;	/* went away meanwhile */
		if (json) {
			fputs(first ? "" : ",", stdout);
			json_domain(stdout, &d, false);
		} else {
			printf("%-6u %-20s %-16s %-10s %-18s %s\n", d.id, d.name,
			       d.gpu[0] ? d.gpu : "-", d.state,
			       d.released_tags[0] ? d.released_tags : "-",
			       d.agent_attached ? "yes" : "no");
		}
		first = false;
	}
	if (json)
		puts("]");
	free(ids);
	return EX_OK;
}

static const char status_usage[] =
	"Usage: gpusleepctl status [DOMAIN] [--json]\n"
	"Show every sysfs value of DOMAIN (an id or a name), or of every domain.\n"
	"With --json: one object for DOMAIN, an array without it.\n";

static int cmd_status(int argc, char **argv)
{
	struct domain d;
	uint32_t *ids, id;
	size_t n, i;
	bool json = false, first = true;
	int r;

	if (parse_json_opt(argc, argv, &json, status_usage))
		return EX_USAGE;
	if (argc - optind > 1) {
		fputs(status_usage, stderr);
		return EX_USAGE;
	}
	if (optind < argc) {
		r = resolve(argv[optind], &id);
		if (r)
			return r;
		if (domain_load(id, &d)) {
			errmsg("domain %s: no such domain", argv[optind]);
			return EX_NOTFOUND;
		}
		if (json) {
			json_domain(stdout, &d, true);
			putchar('\n');
		} else {
			text_status(&d);
		}
		return EX_OK;
	}
	r = all_domain_ids(&ids, &n);
	if (r)
		return r;
	if (json)
		putchar('[');
	for (i = 0; i < n; i++) {
		if (domain_load(ids[i], &d))
			continue;
		if (json) {
			fputs(first ? "" : ",", stdout);
			json_domain(stdout, &d, true);
		} else {
			text_status(&d);
		}
		first = false;
	}
	if (json)
		puts("]");
	free(ids);
	return EX_OK;
}

/* ------------------------------------------------------------------ */
/* release, resume, wait                                               */

/* Attach to id as a controller; returns the fd or an exit status < 0. */
static int attach_controller(uint32_t id, const char *what)
{
	int dev, fd;

	dev = gs_open(dev_path, 0, NULL);
	if (dev < 0) {
		errmsg("%s: %s", dev_path ? dev_path : GS_DEVICE_PATH,
		       strerror(-dev));
		return -errno_exit(-dev);
	}
	fd = gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER);
	close(dev);
	if (fd < 0) {
		if (fd == -EPERM)
			errmsg("domain %s: %s: not its owner and no CAP_SYS_ADMIN",
			       what, strerror(EPERM));
		else
			errmsg("domain %s: attach: %s", what, strerror(-fd));
		return -errno_exit(-fd);
	}
	return fd;
}

static const char *kind_name(uint32_t kind)
{
	return kind == GPUSLEEP_OP_RELEASE ? "release" :
	       kind == GPUSLEEP_OP_RESUME ? "resume" : "operation";
}

static unsigned int tag_index(uint32_t tag)
{
	unsigned int i = 0;

	while (tag > 1) {
		tag >>= 1;
		i++;
	}
	return i;
}

/* Print a finished operation; returns the exit status it means. */
static int print_result(const char *what, const struct gpusleep_result *res)
{
	char tags[128];
	uint32_t t;

	if (gs_tags_format(res->tags, tags, sizeof(tags)) < 0)
		tags[0] = '\0';
	printf("domain %s: op %llu %s %s: ", what,
	       (unsigned long long)res->op_id, kind_name(res->kind),
	       tags[0] ? tags : "(nothing)");
	if (!res->error) {
		printf("ok in %llu us", (unsigned long long)(res->duration_ns / 1000));
		for (t = 1; t & GPUSLEEP_TAG_ALL; t <<= 1)
			if (res->done_tags & t)
				printf(", %s %llu bytes", gs_tag_name(t),
				       (unsigned long long)res->bytes[tag_index(t)]);
		putchar('\n');
		return EX_OK;
	}
	printf("failed\n");
	errmsg("domain %s: op %llu %s failed: %s (%s)", what,
	       (unsigned long long)res->op_id, kind_name(res->kind),
	       gs_reason_str(res->reason), strerror(-res->error));
	return EX_FAILED;
}

static const char release_usage[] =
	"Usage: gpusleepctl release DOMAIN [--tags TAGS] [--abort-inflight]\n"
	"                           [--timeout S] [--no-wait]\n"
	"Release DOMAIN's GPU memory: TAGS is a comma list of weights, kv_cache\n"
	"(default: all). --abort-inflight aborts running requests instead of\n"
	"draining them; --timeout S bounds every step (default: the module's);\n"
	"--no-wait prints the operation id and returns once it started.\n";

static const char resume_usage[] =
	"Usage: gpusleepctl resume DOMAIN [--tags TAGS] [--timeout S] [--no-wait]\n"
	"Resume DOMAIN's released tags (default: every released tag).\n";

static int cmd_op(int argc, char **argv, bool release)
{
	static const struct option opts[] = {
		{ "tags", required_argument, NULL, 't' },
		{ "abort-inflight", no_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *usage = release ? release_usage : resume_usage;
	struct gpusleep_result res;
	struct gpusleep_op op = { 0 };
	uint32_t tags = 0, flags = 0, timeout_ms = 0, id;
	unsigned long secs;
	const char *what;
	char *end;
	int c, r, fd;

	optind = 0;
	while ((c = getopt_long(argc, argv, "t:aT:nh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (gs_tags_parse(optarg, &tags)) {
				errmsg("--tags %s: unknown tag (weights, kv_cache, all)",
				       optarg);
				return EX_USAGE;
			}
			break;
		case 'a':
			if (!release)
				goto usage;
			flags |= GPUSLEEP_OPF_ABORT_INFLIGHT;
			break;
		case 'T':
			errno = 0;
			secs = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || secs > UINT32_MAX / 1000) {
				errmsg("--timeout %s: not a number of seconds", optarg);
				return EX_USAGE;
			}
			timeout_ms = (uint32_t)secs * 1000;
			break;
		case 'n':
			flags |= GPUSLEEP_OPF_NONBLOCK;
			break;
		case 'h':
			fputs(usage, stdout);
			return EX_OK;
		default:
			goto usage;
		}
	}
	if (argc - optind != 1)
		goto usage;
	what = argv[optind];
	r = resolve(what, &id);
	if (r)
		return r;
	fd = attach_controller(id, what);
	if (fd < 0)
		return -fd;

	r = release ? gs_release(fd, tags, flags, timeout_ms, &op) :
		      gs_resume(fd, tags, flags, timeout_ms, &op);
	if (!op.op_id) {
		char bad[128] = "";

		if (op.bad_tags && gs_tags_format(op.bad_tags, bad, sizeof(bad)) > 0)
			errmsg("domain %s: %s refused: %s (%s; tags %s)", what,
			       release ? "release" : "resume",
			       gs_reason_str(op.reason), strerror(-r), bad);
		else
			errmsg("domain %s: %s refused: %s (%s)", what,
			       release ? "release" : "resume",
			       gs_reason_str(op.reason), strerror(-r));
		close(fd);
		return r == -ENODEV ? EX_NOTFOUND : EX_FAILED;
	}
	if (flags & GPUSLEEP_OPF_NONBLOCK) {
		printf("domain %s: op %llu %s started\n", what,
		       (unsigned long long)op.op_id,
		       release ? "release" : "resume");
		close(fd);
		return EX_OK;
	}
	/* The ioctl waited; fetch the whole result for the bytes and time. */
	if (gs_wait(fd, op.op_id, 0, &res)) {
		memset(&res, 0, sizeof(res));
		res.op_id = op.op_id;
		res.kind = release ? GPUSLEEP_OP_RELEASE : GPUSLEEP_OP_RESUME;
		res.error = r;
		res.reason = op.reason;
	}
	close(fd);
	return print_result(what, &res);
usage:
	fputs(usage, stderr);
	return EX_USAGE;
}

static const char wait_usage[] =
	"Usage: gpusleepctl wait DOMAIN [OP] [--timeout S]\n"
	"Wait for operation OP (default: the newest) of DOMAIN to finish and\n"
	"print its result; exit 1 if it failed.\n";

/* Is op finished? 1 yes, 0 no, -errno (-ENOENT: never issued). */
static int op_finished(int fd, uint64_t op)
{
	struct gpusleep_state st;
	int r = gs_get_state(fd, &st);

	if (r)
		return r;
	if (!op || op > st.last_op_id)
		return -ENOENT;
	return st.op_in_flight != op;
}

static int cmd_wait(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct epoll_event ev = { .events = EPOLLIN };
	struct gpusleep_result res;
	struct gpusleep_state st;
	unsigned long long op = 0;
	long timeout_ms = -1;
	unsigned long secs;
	const char *what;
	uint64_t cnt;
	uint32_t id;
	int c, r, fd, efd = -1, ep = -1, ret = EX_FAILED;
	char *end;

	optind = 0;
	while ((c = getopt_long(argc, argv, "T:h", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			errno = 0;
			secs = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || secs > INT_MAX / 1000) {
				errmsg("--timeout %s: not a number of seconds", optarg);
				return EX_USAGE;
			}
			timeout_ms = (long)secs * 1000;
			break;
		case 'h':
			fputs(wait_usage, stdout);
			return EX_OK;
		default:
			fputs(wait_usage, stderr);
			return EX_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		fputs(wait_usage, stderr);
		return EX_USAGE;
	}
	what = argv[optind];
	if (argc - optind == 2) {
		errno = 0;
		op = strtoull(argv[optind + 1], &end, 10);
		if (errno || *end || !op) {
			errmsg("%s: not an operation id", argv[optind + 1]);
			return EX_USAGE;
		}
	}
	r = resolve(what, &id);
	if (r)
		return r;
	fd = attach_controller(id, what);
	if (fd < 0)
		return -fd;
	if (!op) {
		r = gs_get_state(fd, &st);
		if (r) {
			errmsg("domain %s: state: %s", what, strerror(-r));
			goto out;
		}
		op = st.last_op_id;
	}

	/* Register before looking, so a finish in between still wakes us. */
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (efd < 0 || ep < 0) {
		errmsg("eventfd/epoll: %s", strerror(errno));
		goto out;
	}
	r = gs_eventfd(fd, efd, GPUSLEEP_EFD_OP_DONE);
	if (r) {
		errmsg("domain %s: eventfd: %s", what, strerror(-r));
		ret = errno_exit(-r);
		goto out;
	}
	ev.data.fd = efd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev)) {
		errmsg("epoll_ctl: %s", strerror(errno));
		goto out;
	}
	while ((r = op_finished(fd, op)) == 0) {
		r = epoll_wait(ep, &ev, 1, (int)timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errmsg("epoll_wait: %s", strerror(errno));
			goto out;
		}
		if (r == 0) {
			errmsg("domain %s: op %llu: still running after %ld s",
			       what, op, timeout_ms / 1000);
			goto out;
		}
		if (read(efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN) {
			errmsg("eventfd read: %s", strerror(errno));
			goto out;
		}
	}
	if (r < 0) {
		errmsg("domain %s: op %llu: %s", what, op,
		       r == -ENOENT ? "no such operation" : strerror(-r));
		ret = r == -ENOENT ? EX_NOTFOUND : EX_FAILED;
		goto out;
	}
	r = gs_wait(fd, op, 0, &res);
	if (r) {
		errmsg("domain %s: op %llu: %s", what, op,
		       r == -ENOENT ? "too old to be remembered" : strerror(-r));
		ret = r == -ENOENT ? EX_NOTFOUND : EX_FAILED;
		goto out;
	}
	ret = print_result(what, &res);
out:
	if (ep >= 0)
		close(ep);
	if (efd >= 0)
		close(efd);
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------ */
/* monitor                                                             */

struct mon {
	bool json;
	long count;		/* transitions left to print; < 0: forever */
	const char *kind;	/* "snapshot" or "resync" while dumping */
};

static struct nla_policy mon_policy[GPUSLEEP_A_MAX + 1] = {
	[GPUSLEEP_A_ID]		= { .type = NLA_U32 },
	[GPUSLEEP_A_NAME]	= { .type = NLA_STRING },
	[GPUSLEEP_A_GPU]	= { .type = NLA_STRING },
	[GPUSLEEP_A_STATE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RELEASED]	= { .type = NLA_U32 },
	[GPUSLEEP_A_FLAGS]	= { .type = NLA_U32 },
	[GPUSLEEP_A_OP_IN_FLIGHT] = { .type = NLA_U64 },
	[GPUSLEEP_A_OP_ID]	= { .type = NLA_U64 },
	[GPUSLEEP_A_FROM_STATE]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RESULT]	= { .type = NLA_NESTED },
};

static struct nla_policy mon_res_policy[GPUSLEEP_A_RES_MAX + 1] = {
	[GPUSLEEP_A_RES_OP_ID]		= { .type = NLA_U64 },
	[GPUSLEEP_A_RES_KIND]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_TAGS]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_ERROR]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_REASON]		= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_DONE_TAGS]	= { .type = NLA_U32 },
	[GPUSLEEP_A_RES_DURATION_NS]	= { .type = NLA_U64 },
};

static uint32_t attr_u32(struct nlattr **tb, int a)
{
	return tb[a] ? nla_get_u32(tb[a]) : 0;
}

static uint64_t attr_u64(struct nlattr **tb, int a)
{
	return tb[a] ? nla_get_u64(tb[a]) : 0;
}

static void mon_print_result(struct mon *m, struct nlattr *nest)
{
	struct nlattr *rb[GPUSLEEP_A_RES_MAX + 1];
	int32_t err;

	if (nla_parse_nested(rb, GPUSLEEP_A_RES_MAX, nest, mon_res_policy))
		return;
	err = rb[GPUSLEEP_A_RES_ERROR] ? nla_get_s32(rb[GPUSLEEP_A_RES_ERROR]) : 0;
	if (m->json) {
		printf(",\"result\":{\"op\":%llu,\"kind\":\"%s\",\"tags\":",
		       (unsigned long long)attr_u64(rb, GPUSLEEP_A_RES_OP_ID),
		       kind_name(attr_u32(rb, GPUSLEEP_A_RES_KIND)));
		json_tag_bits(stdout, attr_u32(rb, GPUSLEEP_A_RES_TAGS));
		printf(",\"done_tags\":");
		json_tag_bits(stdout, attr_u32(rb, GPUSLEEP_A_RES_DONE_TAGS));
		printf(",\"error\":%d,\"reason\":", err);
		json_lower(stdout, gs_reason_name(attr_u32(rb, GPUSLEEP_A_RES_REASON)));
		printf(",\"duration_us\":%llu}",
		       (unsigned long long)attr_u64(rb, GPUSLEEP_A_RES_DURATION_NS) / 1000);
	} else if (!err) {
		printf("; %s ok", kind_name(attr_u32(rb, GPUSLEEP_A_RES_KIND)));
	} else {
		printf("; %s failed: %s (%s)",
		       kind_name(attr_u32(rb, GPUSLEEP_A_RES_KIND)),
		       gs_reason_str(attr_u32(rb, GPUSLEEP_A_RES_REASON)),
		       strerror(-err));
	}
}

static int mon_valid(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[GPUSLEEP_A_MAX + 1];
	struct mon *m = arg;
	char released[128];
	bool ntf = gh->cmd == GPUSLEEP_CMD_STATE_NTF;
	const char *name;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, GPUSLEEP_A_MAX, mon_policy) ||
	    !tb[GPUSLEEP_A_ID])
		return NL_SKIP;
	if (ntf && !m->count)
		return NL_STOP;
	name = tb[GPUSLEEP_A_NAME] ? nla_get_string(tb[GPUSLEEP_A_NAME]) : "";
	if (gs_tags_format(attr_u32(tb, GPUSLEEP_A_RELEASED), released,
			   sizeof(released)) < 0)
		released[0] = '\0';
	if (m->json) {
		printf("{\"event\":\"%s\",\"domain\":%u,\"name\":",
		       ntf ? "transition" : m->kind, attr_u32(tb, GPUSLEEP_A_ID));
		json_str(stdout, name);
		if (ntf)
			printf(",\"from\":\"%s\",\"to\":\"%s\",\"op\":%llu",
			       gs_state_name(attr_u32(tb, GPUSLEEP_A_FROM_STATE)),
			       gs_state_name(attr_u32(tb, GPUSLEEP_A_STATE)),
			       (unsigned long long)attr_u64(tb, GPUSLEEP_A_OP_ID));
		else
			printf(",\"state\":\"%s\",\"op_in_flight\":%llu",
			       gs_state_name(attr_u32(tb, GPUSLEEP_A_STATE)),
			       (unsigned long long)attr_u64(tb, GPUSLEEP_A_OP_IN_FLIGHT));
		printf(",\"released_tags\":");
		json_tags(stdout, released);
		if (ntf && tb[GPUSLEEP_A_RESULT])
			mon_print_result(m, tb[GPUSLEEP_A_RESULT]);
		printf("}\n");
	} else if (ntf) {
		printf("domain %u (%s): %s -> %s, op %llu, released %s",
		       attr_u32(tb, GPUSLEEP_A_ID), name,
		       gs_state_name(attr_u32(tb, GPUSLEEP_A_FROM_STATE)),
		       gs_state_name(attr_u32(tb, GPUSLEEP_A_STATE)),
		       (unsigned long long)attr_u64(tb, GPUSLEEP_A_OP_ID),
		       released[0] ? released : "-");
		if (tb[GPUSLEEP_A_RESULT])
			mon_print_result(m, tb[GPUSLEEP_A_RESULT]);
		putchar('\n');
	} else {
		printf("%s: domain %u (%s): %s, released %s\n", m->kind,
		       attr_u32(tb, GPUSLEEP_A_ID), name,
		       gs_state_name(attr_u32(tb, GPUSLEEP_A_STATE)),
		       released[0] ? released : "-");
	}
	fflush(stdout);
	if (ntf && m->count > 0)
		m->count--;
	return m->count ? NL_OK : NL_STOP;
}

/* Dump every domain through sk, printing each; retried when interrupted. */
static int mon_dump(struct nl_sock *sk, int family, struct mon *m)
{
	struct nl_msg *msg;
	int r, tries;

	for (tries = 0; tries < 10; tries++) {
		msg = nlmsg_alloc();
		if (!msg)
			return -NLE_NOMEM;
		if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0,
				 NLM_F_DUMP, GPUSLEEP_CMD_GET,
				 GPUSLEEP_GENL_VERSION)) {
			nlmsg_free(msg);
			return -NLE_NOMEM;
		}
		r = nl_send_auto(sk, msg);
		nlmsg_free(msg);
		if (r < 0)
			return r;
		r = nl_recvmsgs_default(sk);
		if (r != -NLE_DUMP_INTR)
			return r < 0 ? r : 0;
		if (m->json)
			printf("{\"event\":\"dump_interrupted\"}\n");
		else
			printf("dump interrupted by a domain change; again\n");
	}
	return -NLE_DUMP_INTR;
}

static const char monitor_usage[] =
	"Usage: gpusleepctl monitor [--json] [--count N]\n"
	"Print every domain's state, then every state transition as it happens\n"
	"(generic netlink family \"gpusleep\", group \"events\"). When events\n"
	"were lost, say so and print the state of every domain again.\n"
	"--count N: exit after N transitions.\n";

static int cmd_monitor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mon m = { .count = -1, .kind = "snapshot" };
	struct nl_sock *req = NULL, *evs = NULL;
	int c, r, family, grp, ret = EX_FAILED;
	char *end;

	optind = 0;
	while ((c = getopt_long(argc, argv, "jc:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			m.json = true;
			break;
		case 'c':
			errno = 0;
			m.count = strtol(optarg, &end, 10);
			if (errno || *end || m.count <= 0) {
				errmsg("--count %s: not a positive number", optarg);
				return EX_USAGE;
			}
			break;
		case 'h':
			fputs(monitor_usage, stdout);
			return EX_OK;
		default:
			fputs(monitor_usage, stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc) {
		fputs(monitor_usage, stderr);
		return EX_USAGE;
	}

	/* One socket for requests, one for events (libnl's advice). */
	req = nl_socket_alloc();
	evs = nl_socket_alloc();
	if (!req || !evs) {
		errmsg("netlink: out of memory");
		goto out;
	}
	r = genl_connect(req);
	if (!r)
		r = genl_connect(evs);
	if (r) {
		errmsg("netlink: connect: %s", nl_geterror(r));
		goto out;
	}
	family = genl_ctrl_resolve(req, GPUSLEEP_GENL_NAME);
	if (family < 0) {
		errmsg("netlink family %s: %s (is the gpusleep module loaded?)",
		       GPUSLEEP_GENL_NAME, nl_geterror(family));
		ret = EX_NOTFOUND;
		goto out;
	}
	grp = genl_ctrl_resolve_grp(req, GPUSLEEP_GENL_NAME,
				    GPUSLEEP_MCGRP_EVENTS);
	if (grp < 0) {
		errmsg("netlink group %s: %s", GPUSLEEP_MCGRP_EVENTS,
		       nl_geterror(grp));
		ret = EX_NOTFOUND;
		goto out;
	}
	nl_socket_disable_seq_check(evs);
	nl_socket_modify_cb(evs, NL_CB_VALID, NL_CB_CUSTOM, mon_valid, &m);
	nl_socket_modify_cb(req, NL_CB_VALID, NL_CB_CUSTOM, mon_valid, &m);
	r = nl_socket_add_membership(evs, grp);
	if (r) {
		errmsg("netlink: join group %s: %s", GPUSLEEP_MCGRP_EVENTS,
		       nl_geterror(r));
		goto out;
	}
	/* Joined first, dumped second: nothing falls between the two. */
	r = mon_dump(req, family, &m);
	if (r) {
		errmsg("netlink: dump: %s", nl_geterror(r));
		goto out;
	}
	m.kind = "resync";
	while (m.count) {
		r = nl_recvmsgs_default(evs);
		if (r == -NLE_NOMEM) {
			/* ENOBUFS: the socket overran and events are gone. */
			if (m.json)
				printf("{\"event\":\"lost\"}\n");
			else
				printf("events lost (receive buffer overrun); state now:\n");
			r = mon_dump(req, family, &m);
		}
		if (r < 0 && r != -NLE_INTR && r != -NLE_AGAIN) {
			errmsg("netlink: receive: %s", nl_geterror(r));
			goto out;
		}
	}
	ret = EX_OK;
out:
	nl_socket_free(evs);
	nl_socket_free(req);
	return ret;
}

/* ------------------------------------------------------------------ */
/* metrics                                                             */

static void prom_label(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			printf("\\n");
		else
			putchar(*s);
	}
}

static void prom_labels(const struct domain *d, const char *k, const char *v)
{
	printf("{domain=\"%u\",name=\"", d->id);
	prom_label(d->name);
	putchar('"');
	if (k) {
		printf(",%s=\"", k);
		prom_label(v);
		putchar('"');
	}
	putchar('}');
}

struct metric {
	const char *name;
	const char *type;
	const char *help;
};

static const struct metric metrics[] = {
	{ "gpusleep_domain_info", "gauge",
	  "Domain identity: GPU and owner in labels, value 1." },
	{ "gpusleep_domain_state", "gauge",
	  "1 for the domain's current state, 0 for the others." },
	{ "gpusleep_tag_released", "gauge",
	  "1 if the tag's memory is released." },
	{ "gpusleep_released_bytes", "gauge",
	  "Bytes the agent reported released, per tag." },
	{ "gpusleep_agent_attached", "gauge",
	  "1 if an agent is attached (memory saver enabled)." },
	{ "gpusleep_drain_pending", "gauge",
	  "1 while a release waits for the engine to drain." },
	{ "gpusleep_op_in_flight", "gauge",
	  "Id of the operation in flight, 0 if none." },
	{ "gpusleep_releases_total", "counter",
	  "Release operations that succeeded." },
	{ "gpusleep_resumes_total", "counter",
	  "Resume operations that succeeded." },
	{ "gpusleep_failures_total", "counter",
	  "Operations that failed, for any reason." },
	{ "gpusleep_cancels_total", "counter",
	  "Releases cancelled by a resume before they drained." },
	{ "gpusleep_timeouts_total", "counter",
	  "Operations failed by a step timeout." },
	{ "gpusleep_last_release_seconds", "gauge",
	  "Duration of the newest release operation." },
	{ "gpusleep_last_resume_seconds", "gauge",
	  "Duration of the newest resume operation." },
};

static const char * const state_names[] = {
	"awake", "draining", "releasing", "released", "resuming", "dead",
};

static bool has_tag(const char *list, const char *tag)
{
	size_t n = strlen(tag);
	const char *p = list;

	while ((p = strstr(p, tag))) {
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
		p += n;
	}
	return false;
}

static void metric_value(unsigned int i, const struct domain *d)
{
	char uid[16];
	size_t s;

	switch (i) {
	case 0:
		printf("gpusleep_domain_info{domain=\"%u\",name=\"", d->id);
		prom_label(d->name);
		printf("\",gpu=\"");
		prom_label(d->gpu);
		snprintf(uid, sizeof(uid), "%u", d->owner_uid);
		printf("\",owner_uid=\"%s\"} 1\n", uid);
		break;
	case 1:
		for (s = 0; s < sizeof(state_names) / sizeof(state_names[0]); s++) {
			printf("%s", metrics[i].name);
			prom_labels(d, "state", state_names[s]);
			printf(" %d\n", !strcmp(d->state, state_names[s]));
		}
		break;
	case 2:
	case 3:
		printf("%s", metrics[i].name);
		prom_labels(d, "tag", "weights");
		if (i == 2)
			printf(" %d\n", has_tag(d->released_tags, "weights"));
		else
			printf(" %llu\n", (unsigned long long)d->bytes_weights);
		printf("%s", metrics[i].name);
		prom_labels(d, "tag", "kv_cache");
		if (i == 2)
			printf(" %d\n", has_tag(d->released_tags, "kv_cache"));
		else
			printf(" %llu\n", (unsigned long long)d->bytes_kv_cache);
		break;
	default: {
		unsigned long long v[] = {
			[4] = d->agent_attached,
			[5] = d->drain_pending,
			[6] = d->op_in_flight,
			[7] = d->releases,
			[8] = d->resumes,
			[9] = d->failures,
			[10] = d->cancels,
			[11] = d->timeouts,
		};

		printf("%s", metrics[i].name);
		prom_labels(d, NULL, NULL);
		if (i == 12 || i == 13)
			printf(" %.6f\n", (double)(i == 12 ? d->last_release_us :
						   d->last_resume_us) / 1e6);
		else
			printf(" %llu\n", v[i]);
		break;
	}
	}
}

static const char metrics_usage[] =
	"Usage: gpusleepctl metrics\n"
	"Print every domain's state and counters in the Prometheus text format,\n"
	"for node_exporter's textfile collector.\n";

static int cmd_metrics(int argc, char **argv)
{
	struct domain *ds = NULL;
	uint32_t *ids;
	size_t n, i, nd = 0;
	unsigned int m;
	int r;

	if (parse_json_opt(argc, argv, NULL, metrics_usage))
		return EX_USAGE;
	if (optind != argc) {
		fputs(metrics_usage, stderr);
		return EX_USAGE;
	}
	r = all_domain_ids(&ids, &n);
	if (r)
		return r;
	ds = calloc(n ? n : 1, sizeof(*ds));
	if (!ds) {
		free(ids);
		errmsg("out of memory");
		return EX_FAILED;
	}
	for (i = 0; i < n; i++)
		if (!domain_load(ids[i], &ds[nd]))
			nd++;
	free(ids);

	printf("# HELP gpusleep_domains Domains alive on this node.\n");
	printf("# TYPE gpusleep_domains gauge\n");
	printf("gpusleep_domains %zu\n", nd);
	for (m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
		printf("# HELP %s %s\n", metrics[m].name, metrics[m].help);
		printf("# TYPE %s %s\n", metrics[m].name, metrics[m].type);
		for (i = 0; i < nd; i++)
			metric_value(m, &ds[i]);
	}
	free(ds);
	return EX_OK;
}

/* ------------------------------------------------------------------ */

static const char main_usage[] =
	"Usage: gpusleepctl COMMAND [ARGS]\n"
	"Commands:\n"
	"  list [--json]                      the domains of this node\n"
	"  status [DOMAIN] [--json]           everything sysfs says about them\n"
	"  release DOMAIN [--tags T] [--abort-inflight] [--timeout S] [--no-wait]\n"
	"  resume DOMAIN [--tags T] [--timeout S] [--no-wait]\n"
	"  wait DOMAIN [OP] [--timeout S]     wait for an operation's result\n"
	"  monitor [--json] [--count N]       print state transitions as they happen\n"
	"  metrics                            Prometheus text exposition\n"
	"DOMAIN is an id or a name. COMMAND --help for more.\n"
	"Exit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 permission denied.\n";

int main(int argc, char **argv)
{
	const char *env, *cmd;

	env = getenv("GPUSLEEP_SYSFS");
	if (env && *env)
		sysfs_root = env;
	env = getenv("GPUSLEEP_DEVICE");
	if (env && *env)
		dev_path = env;
	if (argc < 2) {
		fputs(main_usage, stderr);
		return EX_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(main_usage, stdout);
		return EX_OK;
	}
	if (!strcmp(cmd, "--version")) {
		printf("gpusleepctl, gpusleep API %d\n", GPUSLEEP_API_VERSION);
		return EX_OK;
	}
	argc--;
	argv++;
	if (!strcmp(cmd, "list"))
		return cmd_list(argc, argv);
	if (!strcmp(cmd, "status"))
		return cmd_status(argc, argv);
	if (!strcmp(cmd, "release"))
		return cmd_op(argc, argv, true);
	if (!strcmp(cmd, "resume"))
		return cmd_op(argc, argv, false);
	if (!strcmp(cmd, "wait"))
		return cmd_wait(argc, argv);
	if (!strcmp(cmd, "monitor"))
		return cmd_monitor(argc, argv);
	if (!strcmp(cmd, "metrics"))
		return cmd_metrics(argc, argv);
	errmsg("unknown command '%s'", cmd);
	fputs(main_usage, stderr);
	return EX_USAGE;
}
