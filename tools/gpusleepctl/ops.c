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

int dev_open_failed(int err)
{
	const char *dev = dev_path ? dev_path : GS_DEVICE_PATH;

	jerr.err = -err;
	if (err == ENOENT || err == ENODEV || err == ENXIO)
		errmsg("%s: missing: the gpusleep module is not loaded (load it: sudo modprobe gpusleep)",
		       dev);
	else if (err == EACCES || err == EPERM)
		errmsg("%s: permission denied: run with sudo, or give your user access to the device (packaging/60-gpusleep.rules makes it 0666)",
		       dev);
	else
		errmsg("%s: %s", dev, strerror(err));
	return errno_exit(err);
}

void perm_hint(const char *what, uint32_t id)
{
	struct domain d;

	jerr.err = -EPERM;
	if (!domain_load(id, &d))
		errmsg("domain %s: permission denied: only its owner (uid %llu) or root (CAP_SYS_ADMIN) may control it; run with sudo, or use a controller fd the engine granted (gs_grant, Engine.grant)",
		       what, (unsigned long long)d.owner_uid);
	else
		errmsg("domain %s: permission denied: only its owner or root (CAP_SYS_ADMIN) may control it; run with sudo, or use a controller fd the engine granted (gs_grant, Engine.grant)",
		       what);
}

/* What jerr says about the domain of a command: id and name. */
static void jerr_domain(uint32_t id, const char *name)
{
	jerr.has_domain = true;
	jerr.domain = id;
	snprintf(jerr.name, sizeof(jerr.name), "%s", name);
}

/* Attach to id as a controller; returns the fd or an exit status < 0. */
int attach_controller(uint32_t id, const char *what)
{
	int dev, fd;

	dev = gs_open(dev_path, 0, NULL);
	if (dev < 0)
		return -dev_open_failed(-dev);
	fd = gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER);
	close(dev);
	if (fd < 0) {
		if (fd == -EPERM || fd == -EACCES) {
			perm_hint(what, id);
		} else {
			jerr.err = fd;
			errmsg("domain %s: attach: %s", what, strerror(-fd));
		}
		return -errno_exit(-fd);
	}
	return fd;
}

const char *kind_name(uint32_t kind)
{
	return kind == GPUSLEEP_OP_RELEASE ? "release" :
	       kind == GPUSLEEP_OP_RESUME ? "resume" : "operation";
}

/*
 * Why a failed operation failed, for a person: the reason's sentence and,
 * when the engine or agent answered with an errno, that errno.
 */
void failure_text(uint32_t reason, int32_t error, char *buf, size_t len)
{
	if (reason == GPUSLEEP_R_ENGINE_FAILED && error)
		snprintf(buf, len, "%s (the engine answered: %s)",
			 gs_reason_str(reason), strerror(-error));
	else if (reason == GPUSLEEP_R_AGENT_FAILED && error)
		snprintf(buf, len, "%s (the agent answered: %s)",
			 gs_reason_str(reason), strerror(-error));
	else if (reason == GPUSLEEP_R_NONE)
		snprintf(buf, len, "%s", strerror(-error));
	else if (reason == GPUSLEEP_R_NOT_ENABLED)
		snprintf(buf, len, "no agent is attached (its engine runs without the gpusleep agent)");
	else
		snprintf(buf, len, "%s", gs_reason_str(reason));
}

/*
 * Print a finished operation (text, or one JSON object with --json);
 * returns the exit status it means. A failure is also said on stderr.
 */
static int print_result(const char *what, uint32_t id, const char *name,
			const struct gpusleep_tags *decl,
			const struct gpusleep_result *res)
{
	char tags[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8], reason[64];
	char why[256];
	struct out o;
	uint32_t i;

	out_init(&o, stdout, opt_json);
	if (gs_tags_format_in(decl, res->tags, tags, sizeof(tags)) < 0)
		tags[0] = '\0';
	reason_lower(res->reason, reason, sizeof(reason));
	out_obj_open(&o, NULL);
	if (o.json)
		out_domain(&o, "domain", NULL, id, name);
	else
		out_text(&o, "domain %s: ", what);
	out_u64(&o, "op", "op %llu ", res->op_id);
	out_str(&o, "kind", "%s ", kind_name(res->kind));
	if (o.json)
		out_tags(&o, "tags", NULL, tags);
	else
		out_text(&o, "%s: ", tags[0] ? tags : "(nothing)");
	out_s64(&o, "error", NULL, res->error);
	out_str(&o, "reason", NULL, reason);
	out_tag_bits(&o, decl, "done_tags", NULL, res->done_tags);
	out_text(&o, res->error ? "failed after " : "ok in ");
	out_us(&o, "duration_us", "%s", res->duration_ns / 1000);
	out_obj_open(&o, "bytes");
	for (i = 0; i < decl->nr_tags && i < GPUSLEEP_MAX_TAGS; i++) {
		bool done = !res->error && (res->done_tags & (1U << i));

		if (done)
			out_text(&o, ", %s ", decl->tags[i].name);
		out_size(&o, decl->tags[i].name, done ? "%s" : NULL,
			 res->bytes[i]);
	}
	out_obj_close(&o);
	out_obj_close(&o);
	out_end_line(&o);
	if (!res->error)
		return EX_OK;
	failure_text(res->reason, res->error, why, sizeof(why));
	errmsg("domain %s: op %llu %s failed: %s", what,
	       (unsigned long long)res->op_id, kind_name(res->kind), why);
	return EX_FAILED;
}

/*
 * A refused release or resume, said so that it tells what to do. bad: the
 * tags the refusal names (ALREADY_RELEASED, NOT_RELEASED), "" if none.
 */
static void refusal(const char *what, bool release, uint32_t reason, int r,
		    const char *bad)
{
	const char *op = release ? "release" : "resume";

	switch (reason) {
	case GPUSLEEP_R_NOT_ENABLED:
		errmsg("domain %s: %s refused: no agent is attached to the domain (its engine runs without the gpusleep agent), so none of its memory can be released or resumed",
		       what, op);
		break;
	case GPUSLEEP_R_KV_NOT_ALLOWED:
		errmsg("domain %s: %s refused: kv_cache cannot be released: the engine caches prefixes and cannot reset that cache; release the other tags (--tags weights)",
		       what, op);
		break;
	case GPUSLEEP_R_ALREADY_RELEASED:
		errmsg("domain %s: %s refused: already released: %s; resume first (gpusleepctl resume %s --tags %s), or release only the other tags",
		       what, op, bad[0] ? bad : "some tags", what,
		       bad[0] ? bad : "TAGS");
		break;
	case GPUSLEEP_R_NOT_RELEASED:
		errmsg("domain %s: %s refused: not released: %s (awake already; gpusleepctl status %s shows what is released)",
		       what, op, bad[0] ? bad : "the tags", what);
		break;
	case GPUSLEEP_R_BUSY:
		errmsg("domain %s: %s refused: another release or resume is running; wait for it (gpusleepctl wait %s) and try again",
		       what, op, what);
		break;
	case GPUSLEEP_R_INVALID:
		errmsg("domain %s: %s refused: the module found the tags or flags invalid",
		       what, op);
		break;
	case GPUSLEEP_R_NONE:
		if (r == -ENODEV || r == -EOWNERDEAD) {
			errmsg("domain %s: %s refused: the domain is dead (its engine exited)",
			       what, op);
			break;
		}
		errmsg("domain %s: %s failed: %s", what, op, strerror(-r));
		break;
	default:
		errmsg("domain %s: %s refused: %s", what, op,
		       gs_reason_str(reason));
		break;
	}
}

static const char release_usage[] =
	"Usage: gpusleepctl release DOMAIN|--group NAME [-t|--tags TAGS]\n"
	"                   [-a|--abort-inflight] [-T|--timeout S] [-n|--no-wait]\n"
	"Release DOMAIN's GPU memory: TAGS is a comma list of the tags DOMAIN\n"
	"declared (gpusleepctl status shows them), or all; leave --tags out\n"
	"for all (an empty TAGS is refused).\n"
	"--abort-inflight aborts running requests instead of draining them;\n"
	"--timeout S bounds every step to S seconds, 1 or more (left out: the\n"
	"module's drain_timeout_ms and step_timeout_ms);\n"
	"--no-wait prints the operation id and returns once it started;\n"
	"-j, --json prints the result (or the start, or the refusal) as one\n"
	"JSON object; -p, --bytes raw bytes and microseconds.\n"
	"--group NAME releases every rank of group NAME as one operation, all\n"
	"or nothing (--timeout S then also bounds the whole operation), and\n"
	"prints one line per rank.\n";

static const char resume_usage[] =
	"Usage: gpusleepctl resume DOMAIN|--group NAME [-t|--tags TAGS]\n"
	"                   [-T|--timeout S] [-n|--no-wait]\n"
	"Resume DOMAIN's released tags (--tags left out: every released tag), or\n"
	"every rank of group NAME as one operation. Options as for release.\n"
	"A NAME with no live group (it ended with the process that created it)\n"
	"resumes the domains NAME-tp0, NAME-tp1, ... as a new group, saying so.\n";

static int cmd_op(int argc, char **argv, bool release)
{
	static const struct option opts[] = {
		{ "tags", required_argument, NULL, 't' },
		{ "abort-inflight", no_argument, NULL, 'a' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "bytes", no_argument, NULL, 'p' },
		{ "group", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *usage = release ? release_usage : resume_usage;
	const char *kind = release ? "release" : "resume";
	const char *group = NULL;
	struct out o;
	struct gpusleep_result res;
	struct gpusleep_op op = { 0 };
	uint32_t tags = 0, flags = 0, timeout_ms = 0, id;
	const char *tag_list = NULL;
	struct gpusleep_tags decl;
	char name[GPUSLEEP_NAME_LEN + 1];
	unsigned long secs;
	const char *what;
	int c, r, fd;

	jerr.kind = kind;
	optind = 0;
	while ((c = getopt_long(argc, argv, "t:aT:njpg:h", opts, NULL)) != -1) {
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
			if (parse_timeout(optarg, UINT32_MAX / 1000, &secs))
				return EX_USAGE;
			timeout_ms = (uint32_t)secs * 1000;
			break;
		case 'n':
			flags |= GPUSLEEP_OPF_NONBLOCK;
			break;
		case 'j':
			opt_json = true;
			break;
		case 'p':
			opt_bytes = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return EX_OK;
		default:
			goto usage;
		}
	}
	if (tag_list && check_tag_list(tag_list, release ? "every tag" :
				       "every released tag"))
		return EX_USAGE;
	if (group && argc - optind == 0)
		return group_op(group, release, tag_list, flags, timeout_ms);
	if (group || argc - optind != 1)
		goto usage;
	what = argv[optind];
	r = resolve(what, &id);
	if (r)
		return r;
	domain_name(id, name, sizeof(name));
	jerr_domain(id, name);
	fd = attach_controller(id, what);
	if (fd < 0)
		return -fd;
	r = gs_get_tags(fd, &decl);
	if (r) {
		jerr.err = r;
		errmsg("domain %s: reading its tags: %s", what, strerror(-r));
		close(fd);
		return r == -ENODEV ? EX_NOTFOUND : EX_FAILED;
	}
	if (tag_list && gs_tags_parse_in(&decl, tag_list, &tags)) {
		char all[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];

		gs_tags_format_in(&decl, (uint32_t)((1ULL << decl.nr_tags) - 1),
				  all, sizeof(all));
		jerr.err = -EINVAL;
		errmsg("--tags %s: domain %s has no such tag (its tags: %s, all)",
		       tag_list, what, all);
		close(fd);
		return EX_USAGE;
	}

	r = release ? gs_release(fd, tags, flags, timeout_ms, &op) :
		      gs_resume(fd, tags, flags, timeout_ms, &op);
	if (!op.op_id) {
		static char reason[64];
		char bad[128] = "";

		if (op.bad_tags &&
		    gs_tags_format_in(&decl, op.bad_tags, bad, sizeof(bad)) <= 0)
			bad[0] = '\0';
		reason_lower(op.reason, reason, sizeof(reason));
		jerr.err = r;
		jerr.reason = op.reason ? reason : NULL;
		if (bad[0]) {
			jerr.has_tags = true;
			snprintf(jerr.tags, sizeof(jerr.tags), "%s", bad);
		}
		refusal(what, release, op.reason, r, bad);
		close(fd);
		return r == -ENODEV ? EX_NOTFOUND : EX_FAILED;
	}
	if (flags & GPUSLEEP_OPF_NONBLOCK) {
		out_init(&o, stdout, opt_json);
		out_obj_open(&o, NULL);
		if (o.json)
			out_domain(&o, "domain", NULL, id, name);
		else
			out_text(&o, "domain %s: ", what);
		out_u64(&o, "op", "op %llu ", op.op_id);
		out_str(&o, "kind", "%s", kind);
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
	return print_result(what, id, name, &decl, &res);
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
	"Usage: gpusleepctl wait DOMAIN|--group NAME [OP] [-T|--timeout S]\n"
	"Wait for operation OP (default: the newest) of DOMAIN, or of group NAME,\n"
	"to finish and print its result; exit 1 if it failed. --timeout S: give\n"
	"up after S seconds, 1 or more (exit 1; left out: wait as long as it\n"
	"takes).\n";

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
		{ "bytes", no_argument, NULL, 'p' },
		{ "group", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct epoll_event ev = { .events = EPOLLIN };
	char name[GPUSLEEP_NAME_LEN + 1];
	const char *group = NULL;
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
	while ((c = getopt_long(argc, argv, "T:jpg:h", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			if (parse_timeout(optarg, INT_MAX / 1000, &secs))
				return EX_USAGE;
			timeout_ms = (long)secs * 1000;
			break;
		case 'j':
			opt_json = true;
			break;
		case 'p':
			opt_bytes = true;
			break;
		case 'g':
			group = optarg;
			break;
		case 'h':
			fputs(wait_usage, stdout);
			return EX_OK;
		default:
			fputs(wait_usage, stderr);
			return EX_USAGE;
		}
	}
	if (argc - optind > (group ? 1 : 2) || argc - optind < (group ? 0 : 1)) {
		fputs(wait_usage, stderr);
		return EX_USAGE;
	}
	what = group ? NULL : argv[optind++];
	if (optind < argc) {
		errno = 0;
		op = strtoull(argv[optind], &end, 10);
		if (errno || *end || !op) {
			errmsg("%s: not an operation id", argv[optind]);
			return EX_USAGE;
		}
	}
	if (group)
		return group_wait(group, op, timeout_ms < 0 ? 0 :
				  (uint32_t)timeout_ms);
	r = resolve(what, &id);
	if (r)
		return r;
	domain_name(id, name, sizeof(name));
	jerr_domain(id, name);
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
			jerr.err = -ETIMEDOUT;
			errmsg("domain %s: op %llu: still running after %ld s (it goes on; wait again to see its result)",
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
	ret = print_result(what, id, name, &decl, &res);
out:
	if (ep >= 0)
		close(ep);
	if (efd >= 0)
		close(efd);
	close(fd);
	return ret;
}
