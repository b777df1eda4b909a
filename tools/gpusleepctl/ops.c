// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: release, resume and wait, through /dev/gpusleep attached as
 * a controller (libgpusleep); wait sleeps on an eventfd registered for
 * OP_DONE, then fetches the result with GPUSLEEP_IOC_WAIT.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "output.h"

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

const char *kind_name(uint32_t kind)
{
	return kind == GPUSLEEP_OP_RELEASE ? "release" :
	       kind == GPUSLEEP_OP_RESUME ? "resume" : "operation";
}

/* A reason name as the sysfs files spell it: lower case. */
static void reason_lower(uint32_t reason, char *buf, size_t len)
{
	const char *r = gs_reason_name(reason);
	size_t i;

	for (i = 0; r[i] && i < len - 1; i++)
		buf[i] = (char)tolower((unsigned char)r[i]);
	buf[i] = '\0';
}

/*
 * Print a finished operation (text, or one JSON object with --json);
 * returns the exit status it means. A failure is also said on stderr.
 */
static int print_result(const char *what, const struct gpusleep_tags *decl,
			const struct gpusleep_result *res, bool json)
{
	char tags[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8], reason[64];
	struct out o;
	uint32_t i;

	out_init(&o, stdout, json);
	if (gs_tags_format_in(decl, res->tags, tags, sizeof(tags)) < 0)
		tags[0] = '\0';
	reason_lower(res->reason, reason, sizeof(reason));
	out_obj_open(&o, NULL);
	out_str(&o, "domain", "domain %s: ", what);
	out_u64(&o, "op", "op %llu ", res->op_id);
	out_str(&o, "kind", "%s ", kind_name(res->kind));
	if (json)
		out_tags(&o, "tags", NULL, tags);
	else
		out_text(&o, "%s: ", tags[0] ? tags : "(nothing)");
	out_s64(&o, "error", NULL, res->error);
	out_str(&o, "reason", NULL, reason);
	out_tag_bits(&o, decl, "done_tags", NULL, res->done_tags);
	if (!res->error)
		out_u64(&o, "duration_us", "ok in %llu us",
			res->duration_ns / 1000);
	else {
		out_text(&o, "failed");
		out_u64(&o, "duration_us", NULL, res->duration_ns / 1000);
	}
	out_obj_open(&o, "bytes");
	for (i = 0; i < decl->nr_tags && i < GPUSLEEP_MAX_TAGS; i++) {
		bool done = !res->error && (res->done_tags & (1U << i));

		if (done)
			out_text(&o, ", %s", decl->tags[i].name);
		out_u64(&o, decl->tags[i].name, done ? " %llu bytes" : NULL,
			res->bytes[i]);
	}
	out_obj_close(&o);
	out_obj_close(&o);
	out_end_line(&o);
	if (!res->error)
		return EX_OK;
	errmsg("domain %s: op %llu %s failed: %s (%s)", what,
	       (unsigned long long)res->op_id, kind_name(res->kind),
	       gs_reason_str(res->reason), strerror(-res->error));
	return EX_FAILED;
}

static const char release_usage[] =
	"Usage: gpusleepctl release DOMAIN|--group NAME [--tags TAGS]\n"
	"                           [--abort-inflight] [--timeout S] [--no-wait]\n"
	"                           [--json]\n"
	"Release DOMAIN's GPU memory: TAGS is a comma list of the tags DOMAIN\n"
	"declared (gpusleepctl status shows them; default: all).\n"
	"--abort-inflight aborts running requests instead of\n"
	"draining them; --timeout S bounds every step (default: the module's);\n"
	"--no-wait prints the operation id and returns once it started;\n"
	"--json prints the result (or the start) as one JSON object.\n"
	"--group NAME releases every rank of group NAME as one operation, all\n"
	"or nothing (--timeout S then also bounds the whole operation), and\n"
	"prints one line per rank.\n";

static const char resume_usage[] =
	"Usage: gpusleepctl resume DOMAIN|--group NAME [--tags TAGS] [--timeout S]\n"
	"                          [--no-wait] [--json]\n"
	"Resume DOMAIN's released tags (default: every released tag), or every\n"
	"rank of group NAME as one operation.\n";

static int cmd_op(int argc, char **argv, bool release)
{
	static const struct option opts[] = {
		{ "tags", required_argument, NULL, 't' },
		{ "abort-inflight", no_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "group", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *usage = release ? release_usage : resume_usage;
	const char *group = NULL;
	bool json = false;
	struct out o;
	struct gpusleep_result res;
	struct gpusleep_op op = { 0 };
	uint32_t tags = 0, flags = 0, timeout_ms = 0, id;
	const char *tag_list = NULL;
	struct gpusleep_tags decl;
	unsigned long secs;
	const char *what;
	char *end;
	int c, r, fd;

	optind = 0;
	while ((c = getopt_long(argc, argv, "t:aT:njg:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			group = optarg;
			break;
		case 't':
			tag_list = optarg;	/* the domain's names */
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
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return EX_OK;
		default:
			goto usage;
		}
	}
	if (group && argc - optind == 0)
		return group_op(group, release, tag_list, flags, timeout_ms,
				json);
	if (group || argc - optind != 1)
		goto usage;
	what = argv[optind];
	r = resolve(what, &id);
	if (r)
		return r;
	fd = attach_controller(id, what);
	if (fd < 0)
		return -fd;
	r = gs_get_tags(fd, &decl);
	if (r) {
		errmsg("domain %s: reading its tags: %s", what, strerror(-r));
		close(fd);
		return r == -ENODEV ? EX_NOTFOUND : EX_FAILED;
	}
	if (tag_list && gs_tags_parse_in(&decl, tag_list, &tags)) {
		char all[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];

		gs_tags_format_in(&decl, (uint32_t)((1ULL << decl.nr_tags) - 1),
				  all, sizeof(all));
		errmsg("--tags %s: domain %s has no such tag (its tags: %s, all)",
		       tag_list, what, all);
		close(fd);
		return EX_USAGE;
	}

	r = release ? gs_release(fd, tags, flags, timeout_ms, &op) :
		      gs_resume(fd, tags, flags, timeout_ms, &op);
	if (!op.op_id) {
		char bad[128] = "";

		if (op.bad_tags &&
		    gs_tags_format_in(&decl, op.bad_tags, bad, sizeof(bad)) > 0)
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
		out_init(&o, stdout, json);
		out_obj_open(&o, NULL);
		out_str(&o, "domain", "domain %s: ", what);
		out_u64(&o, "op", "op %llu ", op.op_id);
		out_str(&o, "kind", "%s", release ? "release" : "resume");
		out_bool(&o, "started", " started%.0s", true);
		out_obj_close(&o);
		out_end_line(&o);
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
	return print_result(what, &decl, &res, json);
usage:
	fputs(usage, stderr);
	return EX_USAGE;
}

int cmd_release(int argc, char **argv)
{
	return cmd_op(argc, argv, true);
}

int cmd_resume(int argc, char **argv)
{
	return cmd_op(argc, argv, false);
}

static const char wait_usage[] =
	"Usage: gpusleepctl wait DOMAIN [OP] [--timeout S] [--json]\n"
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

int cmd_wait(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct epoll_event ev = { .events = EPOLLIN };
	bool json = false;
	struct gpusleep_result res;
	struct gpusleep_state st;
	struct gpusleep_tags decl;
	unsigned long long op = 0;
	long timeout_ms = -1;
	unsigned long secs;
	const char *what;
	uint64_t cnt;
	uint32_t id;
	int c, r, fd, efd = -1, ep = -1, ret = EX_FAILED;
	char *end;

	optind = 0;
	while ((c = getopt_long(argc, argv, "T:jh", opts, NULL)) != -1) {
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
		case 'j':
			json = true;
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
	r = gs_get_tags(fd, &decl);
	if (r) {
		errmsg("domain %s: reading its tags: %s", what, strerror(-r));
		close(fd);
		return r == -ENODEV ? EX_NOTFOUND : EX_FAILED;
	}
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
	ret = print_result(what, &decl, &res, json);
out:
	if (ep >= 0)
		close(ep);
	if (efd >= 0)
		close(efd);
	close(fd);
	return ret;
}
