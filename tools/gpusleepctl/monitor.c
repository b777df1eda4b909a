// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl monitor: join the "events" group, dump every domain, then
 * print each transition as it comes (text or JSON lines, one output layer).
 * On ENOBUFS (events lost) say so and dump again. -t stamps each line with
 * the transition's time (GPUSLEEP_A_TIME_NS; for a dump line, or a module
 * without it, the time gpusleepctl received it); DOMAIN or --group NAME
 * keeps the lines of those domains only. --timeline prints one operation
 * a line, with the time in each state and, from the step notifications
 * (GPUSLEEP_CMD_STEP_NTF), each step's start and duration.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "nl.h"
#include "output.h"

#define TL_OPS		32	/* operations followed at once (--timeline) */
#define TL_PHASES	8
#define TL_STEPS	(GPUSLEEP_MAX_TAGS + 4)	/* drain, reset, unmaps */

/* --timeline: a step of an operation, from its start and end. */
struct tl_step {
	uint32_t step, type, tags, reason;
	int32_t error;
	double start, end;	/* Unix seconds; end 0: not seen */
};

/* --timeline: one operation of one domain, the times of its states. */
struct tl_op {
	bool used;
	uint32_t domain;
	uint64_t op;
	double t0;		/* its first event (Unix seconds) */
	const char *state;	/* the state entered last */
	double since;		/* when (Unix seconds: the kernel's, or receipt) */
	unsigned int n;
	struct { const char *state; double s; } ph[TL_PHASES];
	unsigned int ns;
	struct tl_step st[TL_STEPS];
};

struct mon {
	struct out o;
	long count;		/* transitions left to print; < 0: forever */
	const char *kind;	/* "snapshot" or "resync" while dumping */
	bool stamp;		/* -t */
	const char *domain;	/* DOMAIN: an id or a name; NULL: all */
	const char *group;	/* --group NAME; NULL: all */
	bool timeline;		/* --timeline: one line per finished op */
	long dumped;		/* domains the dumps listed */
	double when;		/* the line's time (Unix s): kernel's or now */
	struct tl_op tl[TL_OPS];
};

static double now_unix(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/*
 * -t: JSON "timestamp" (Unix seconds), text "2026-12-03T17:14:24.123456",
 * of m->when (0: now).
 */
static void mon_stamp(struct mon *m)
{
	struct timeval tv;
	struct tm tm;
	char buf[32];

	if (!m->stamp)
		return;
	if (m->when > 0) {
		tv.tv_sec = (time_t)m->when;
		tv.tv_usec = (long)((m->when - (double)tv.tv_sec) * 1e6);
	} else {
		gettimeofday(&tv, NULL);
	}
	if (m->o.json) {
		json_key_num(&m->o, "timestamp", "%lld.%06ld",
			     (long long)tv.tv_sec, (long)tv.tv_usec);
		return;
	}
	localtime_r(&tv.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	out_text(&m->o, "%s.%06ld ", buf, (long)tv.tv_usec);
}

/* Does a message about domain id, named name, in group, pass the filter? */
static bool mon_match(const struct mon *m, uint32_t id, const char *name,
		      const char *group)
{
	char *end;
	unsigned long v;

	if (m->group && strcmp(m->group, group))
		return false;
	if (!m->domain)
		return true;
	v = strtoul(m->domain, &end, 10);
	if (!*end && end != m->domain)
		return v == id;
	return !strcmp(m->domain, name);
}

/* An event line with nothing but its name. */
static void mon_event(struct mon *m, const char *text, const char *event)
{
	m->when = 0;	/* now */
	out_obj_open(&m->o, NULL);
	mon_stamp(m);
	out_str(&m->o, "event", text, event);
	out_obj_close(&m->o);
	out_end_line(&m->o);
	fflush(stdout);
}

static void mon_result(struct mon *m, const struct gpusleep_tags *decl,
		       struct nlattr *nest)
{
	struct nlattr *rb[GPUSLEEP_A_RES_MAX + 1];
	char lower[64], why[256];
	int32_t err;

	if (nla_parse_nested(rb, GPUSLEEP_A_RES_MAX, nest, gs_nl_res_policy))
		return;
	err = rb[GPUSLEEP_A_RES_ERROR] ? nla_get_s32(rb[GPUSLEEP_A_RES_ERROR]) : 0;
	reason_lower(gs_attr_u32(rb, GPUSLEEP_A_RES_REASON), lower,
		     sizeof(lower));

	out_obj_open(&m->o, "result");
	out_u64(&m->o, "op", NULL, gs_attr_u64(rb, GPUSLEEP_A_RES_OP_ID));
	out_str(&m->o, "kind", "; %s",
		kind_name(gs_attr_u32(rb, GPUSLEEP_A_RES_KIND)));
	out_tag_bits(&m->o, decl, "tags", NULL,
		     gs_attr_u32(rb, GPUSLEEP_A_RES_TAGS));
	out_tag_bits(&m->o, decl, "done_tags", NULL,
		     gs_attr_u32(rb, GPUSLEEP_A_RES_DONE_TAGS));
	out_s64(&m->o, "error", NULL, err);
	out_str(&m->o, "reason", NULL, lower);
	if (!err) {
		out_text(&m->o, " ok in ");
	} else {
		failure_text(gs_attr_u32(rb, GPUSLEEP_A_RES_REASON), err, why,
			     sizeof(why));
		out_text(&m->o, " failed: %s, after ", why);
	}
	out_us(&m->o, "duration_us", "%s",
	       gs_attr_u64(rb, GPUSLEEP_A_RES_DURATION_NS) / 1000);
	out_obj_close(&m->o);
}

/* The entry of (domain, op), or a new one (free, or the oldest) from now. */
static struct tl_op *tl_find(struct mon *m, uint32_t domain, uint64_t op,
			     double now)
{
	struct tl_op *t, *free_ = NULL, *old = &m->tl[0];

	for (t = m->tl; t < m->tl + TL_OPS; t++) {
		if (t->used && t->domain == domain && t->op == op)
			return t;
		if (!t->used && !free_)
			free_ = t;
		if (t->used && t->since < old->since)
			old = t;
	}
	t = free_ ? free_ : old;
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->domain = domain;
	t->op = op;
	t->t0 = t->since = now;
	return t;
}

/* --timeline: a step started or ended (a STEP_NTF, at m->when). */
static void tl_step(struct mon *m, struct nlattr **tb, uint32_t id)
{
	double now = m->when > 0 ? m->when : now_unix();
	struct tl_op *t = tl_find(m, id, gs_attr_u64(tb, GPUSLEEP_A_OP_ID),
				  now);
	uint32_t n = gs_attr_u32(tb, GPUSLEEP_A_STEP);
	struct tl_step *s;
	unsigned int i;

	if (gs_attr_u32(tb, GPUSLEEP_A_STEP_PHASE) == GPUSLEEP_STEP_START) {
		if (t->ns == TL_STEPS)
			return;
		s = &t->st[t->ns++];
		memset(s, 0, sizeof(*s));
		s->step = n;
		s->type = gs_attr_u32(tb, GPUSLEEP_A_STEP_TYPE);
		s->tags = gs_attr_u32(tb, GPUSLEEP_A_STEP_TAGS);
		s->start = now;
		return;
	}
	for (i = t->ns; i-- > 0;) {
		s = &t->st[i];
		if (s->step != n)
			continue;
		s->end = now;
		s->error = tb[GPUSLEEP_A_ERROR] ?
			   nla_get_s32(tb[GPUSLEEP_A_ERROR]) : 0;
		s->reason = gs_attr_u32(tb, GPUSLEEP_A_REASON);
		return;
	}
}

/* What a step does, for a reader: "reset prefix cache", "unmap"... */
static const char *tl_step_text(uint32_t type)
{
	switch (type) {
	case GPUSLEEP_EV_DRAIN:
		return "drain";
	case GPUSLEEP_EV_RESET_CACHES:
		return "reset prefix cache";
	case GPUSLEEP_EV_REPAIR_KV:
		return "repair KV";
	case GPUSLEEP_EV_PAUSE_TAG:
		return "unmap";
	case GPUSLEEP_EV_RESUME_TAG:
		return "map";
	default:
		return gs_event_name(type);
	}
}

static uint64_t tl_us(double s)
{
	return s > 0 ? (uint64_t)(s * 1e6 + 0.5) : 0;
}

/*
 * The steps of t, in the order they started: text, one a line under the
 * operation's ("+START  WHAT [TAG]: DURATION"); JSON, the "steps" array.
 */
static void tl_print_steps(struct mon *m, const struct tl_op *t,
			   const struct gpusleep_tags *decl)
{
	const struct tl_step *s;
	struct out *o = &m->o;
	char lower[64], why[256], at[32];
	bool tag;

	out_arr_open(o, "steps");
	for (s = t->st; s < t->st + t->ns; s++) {
		tag = s->type == GPUSLEEP_EV_PAUSE_TAG ||
		      s->type == GPUSLEEP_EV_RESUME_TAG;
		out_obj_open(o, NULL);
		out_u64(o, "step", NULL, s->step);
		out_str(o, "type", NULL, gs_event_name(s->type));
		if (!o->json) {
			fmt_us(tl_us(s->start - t->t0), at, sizeof(at));
			out_text(o, "\n  +%-10s %s", at, tl_step_text(s->type));
		}
		out_tag_bits(o, decl, "tags", tag ? " %s" : NULL, s->tags);
		out_us(o, "start_us", NULL, tl_us(s->start - t->t0));
		if (!s->end) {
			out_null(o, "duration_us", ": %.0sno end seen");
			out_obj_close(o);
			continue;
		}
		out_us(o, "duration_us", ": %s", tl_us(s->end - s->start));
		out_s64(o, "error", NULL, s->error);
		reason_lower(s->reason, lower, sizeof(lower));
		out_str(o, "reason", NULL, lower);
		if (s->error) {
			failure_text(s->reason, s->error, why, sizeof(why));
			out_text(o, ", failed (%s)", why);
		}
		out_obj_close(o);
	}
	out_arr_close(o);
}

/*
 * --timeline: a transition of op. The time in each state is measured
 * between the transitions' times (the kernel's, when the event has it);
 * the transition that carries the result prints the operation's line.
 */
static bool mon_timeline(struct mon *m, struct nlattr **tb, uint32_t id,
			 const char *name, const struct gpusleep_tags *decl)
{
	struct nlattr *rb[GPUSLEEP_A_RES_MAX + 1];
	double now = m->when > 0 ? m->when : now_unix();
	struct tl_op *t = tl_find(m, id, gs_attr_u64(tb, GPUSLEEP_A_OP_ID),
				  now);
	struct out *o = &m->o;
	char lower[64], why[256];
	int32_t err;
	unsigned int i;

	if (t->state && t->n < TL_PHASES) {
		t->ph[t->n].state = t->state;
		t->ph[t->n++].s = now - t->since;
	}
	t->state = gs_state_name(gs_attr_u32(tb, GPUSLEEP_A_STATE));
	t->since = now;
	if (!tb[GPUSLEEP_A_RESULT] ||
	    nla_parse_nested(rb, GPUSLEEP_A_RES_MAX, tb[GPUSLEEP_A_RESULT],
			     gs_nl_res_policy))
		return false;
	err = rb[GPUSLEEP_A_RES_ERROR] ? nla_get_s32(rb[GPUSLEEP_A_RES_ERROR]) : 0;
	out_obj_open(o, NULL);
	mon_stamp(m);
	out_str(o, "event", NULL, "timeline");
	out_text(o, "domain %u (%s): ", id, name);
	out_domain(o, "domain", NULL, id, name);
	out_u64(o, "op", "op %llu ", t->op);
	out_str(o, "kind", "%s ", kind_name(gs_attr_u32(rb, GPUSLEEP_A_RES_KIND)));
	out_tag_bits(o, decl, "tags", "%s",
		     gs_attr_u32(rb, GPUSLEEP_A_RES_TAGS));
	out_s64(o, "error", NULL, err);
	reason_lower(gs_attr_u32(rb, GPUSLEEP_A_RES_REASON), lower,
		     sizeof(lower));
	out_str(o, "reason", NULL, lower);
	if (err) {
		failure_text(gs_attr_u32(rb, GPUSLEEP_A_RES_REASON), err, why,
			     sizeof(why));
		out_text(o, " failed (%s) after ", why);
	} else {
		out_text(o, " ok in ");
	}
	out_us(o, "duration_us", "%s",
	       gs_attr_u64(rb, GPUSLEEP_A_RES_DURATION_NS) / 1000);
	out_arr_open(o, "phases");
	for (i = 0; i < t->n; i++) {
		out_obj_open(o, NULL);
		out_str(o, "state", i ? ", %s " : ": %s ", t->ph[i].state);
		out_us(o, "duration_us", "%s", (uint64_t)(t->ph[i].s * 1e6));
		out_obj_close(o);
	}
	out_arr_close(o);
	tl_print_steps(m, t, decl);
	out_obj_close(o);
	out_end_line(o);
	fflush(stdout);
	t->used = false;
	return true;
}

static int mon_valid(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[GPUSLEEP_A_MAX + 1];
	struct gpusleep_tags decl;
	struct mon *m = arg;
	struct out *o = &m->o;
	bool ntf = gh->cmd == GPUSLEEP_CMD_STATE_NTF;
	bool step = gh->cmd == GPUSLEEP_CMD_STEP_NTF;
	const char *name, *group;
	uint32_t id;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, GPUSLEEP_A_MAX, gs_nl_policy) ||
	    !tb[GPUSLEEP_A_ID])
		return NL_SKIP;
	if (!ntf && !step)
		m->dumped++;
	if (ntf && !m->count)
		return NL_STOP;
	id = gs_attr_u32(tb, GPUSLEEP_A_ID);
	m->when = (ntf || step) && tb[GPUSLEEP_A_TIME_NS] ?
		(double)nla_get_u64(tb[GPUSLEEP_A_TIME_NS]) / 1e9 : 0;
	name = tb[GPUSLEEP_A_NAME] ? nla_get_string(tb[GPUSLEEP_A_NAME]) : "";
	group = tb[GPUSLEEP_A_GROUP] ? nla_get_string(tb[GPUSLEEP_A_GROUP]) : "";
	if (!mon_match(m, id, name, group))
		return NL_OK;
	/* A step is a part of a timeline, not a line of its own. */
	if (step) {
		if (m->timeline)
			tl_step(m, tb, id);
		return NL_OK;
	}
	if (m->timeline && ntf) {
		gs_nl_tags(nlmsg_hdr(msg), &decl);
		if (mon_timeline(m, tb, id, name, &decl) && m->count > 0)
			m->count--;
		return m->count ? NL_OK : NL_STOP;
	}

	out_obj_open(o, NULL);
	mon_stamp(m);
	out_str(o, "event", ntf ? "%.0s" : "%s: ", ntf ? "transition" : m->kind);
	out_text(o, "domain %u (%s): ", id, name);
	out_domain(o, "domain", NULL, id, name);
	if (group[0])
		out_str(o, "group", NULL, group);
	if (ntf) {
		out_str(o, "from", "%s -> ",
			gs_state_name(gs_attr_u32(tb, GPUSLEEP_A_FROM_STATE)));
		out_str(o, "to", "%s",
			gs_state_name(gs_attr_u32(tb, GPUSLEEP_A_STATE)));
		out_u64(o, "op", ", op %llu", gs_attr_u64(tb, GPUSLEEP_A_OP_ID));
	} else {
		out_str(o, "state", "%s",
			gs_state_name(gs_attr_u32(tb, GPUSLEEP_A_STATE)));
		out_u64(o, "op_in_flight", NULL,
			gs_attr_u64(tb, GPUSLEEP_A_OP_IN_FLIGHT));
	}
	gs_nl_tags(nlmsg_hdr(msg), &decl);
	out_tag_bits(o, &decl, "released_tags", ", released %s",
		     gs_attr_u32(tb, GPUSLEEP_A_RELEASED));
	if (ntf && tb[GPUSLEEP_A_RESULT])
		mon_result(m, &decl, tb[GPUSLEEP_A_RESULT]);
	out_obj_close(o);
	out_end_line(o);
	fflush(stdout);
	if (ntf && m->count > 0)
		m->count--;
	return m->count ? NL_OK : NL_STOP;
}

static void mon_intr(void *arg)
{
	mon_event(arg, "dump interrupted by a domain change; again%.0s",
		  "dump_interrupted");
}

/*
 * Netlink shows a domain in its creator's network namespace only, sysfs
 * every domain: when the dump listed none and sysfs lists some, this runs
 * in another namespace than theirs. Say so (and go on: a domain made
 * here later shows).
 */
static void mon_other_netns(const struct mon *m)
{
	uint32_t *ids = NULL;
	size_t n = 0;

	if (m->dumped || domain_ids(&ids, &n) || !n) {
		free(ids);
		return;
	}
	free(ids);
	fprintf(stderr,
		"%s: monitor: no domain is in this network namespace, and %s lists %zu: netlink shows each domain only in the network namespace its creator was in (run monitor there, e.g. nsenter --net=/proc/PID/ns/net); waiting for this namespace's\n",
		prog, sysfs_root, n);
}

static const char monitor_usage[] =
	"Usage: gpusleepctl monitor [DOMAIN|--group NAME] [-t|--timestamp]\n"
	"                   [--timeline] [-c|--count N]\n"
	"Print every domain's state, then every state transition as it happens\n"
	"(generic netlink family \"gpusleep\", group \"events\"). When events\n"
	"were lost, say so and print the state of every domain again.\n"
	"DOMAIN (an id or a name), --group NAME: only those domains' lines.\n"
	"-t, --timestamp: each line starts with the time of the transition\n"
	"(the kernel's; of a snapshot: when received; JSON: \"timestamp\",\n"
	"Unix seconds).\n"
	"--timeline: instead of the transitions, one line per finished\n"
	"operation: its result and the time spent in each state (draining,\n"
	"releasing...), from the same times, then one line per step (drain,\n"
	"prefix-cache reset, each tag's unmap or map, KV repair): when it\n"
	"started, after the operation's first event, and how long it took.\n"
	"--count N: exit after N transitions (--timeline: N operations) of the\n"
	"domains shown.\n";

int cmd_monitor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "count", required_argument, NULL, 'c' },
		{ "timestamp", no_argument, NULL, 't' },
		{ "group", required_argument, NULL, 'g' },
		{ "timeline", no_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mon m = { .count = -1, .kind = "snapshot" };
	struct gs_nl n;
	const char *what;
	int c, r, ret = EX_FAILED;
	char *end;

	optind = 0;
	while ((c = getopt_long(argc, argv, "jc:tg:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt_json = true;
			break;
		case 't':
			m.stamp = true;
			break;
		case 'g':
			m.group = optarg;
			break;
		case 'L':
			m.timeline = true;
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
	if (argc - optind > (m.group ? 0 : 1)) {
		fputs(monitor_usage, stderr);
		return EX_USAGE;
	}
	if (optind < argc)
		m.domain = argv[optind];
	out_init(&m.o, stdout, opt_json);

	r = gs_nl_connect(&n);
	if (r) {
		errmsg("netlink: connect: %s", nl_geterror(r));
		goto out;
	}
	r = gs_nl_join(&n, &what);
	if (r == -NLE_OBJ_NOTFOUND && n.family < 0) {
		errmsg("netlink %s: %s: the gpusleep module is not loaded (load it: sudo modprobe gpusleep)",
		       what, nl_geterror(r));
		ret = EX_NOTFOUND;
		goto out;
	}
	if (r == -NLE_PERM) {
		jerr.err = -EPERM;
		errmsg("netlink %s: %s: the group shows every domain of this network namespace, so joining it takes CAP_NET_ADMIN over the namespace: run as root (list, status and wait need no privilege)",
		       what, nl_geterror(r));
		ret = EX_PERM;
		goto out;
	}
	if (r) {
		errmsg("netlink %s: %s", what, nl_geterror(r));
		goto out;
	}
	nl_socket_modify_cb(n.evs, NL_CB_VALID, NL_CB_CUSTOM, mon_valid, &m);
	nl_socket_modify_cb(n.req, NL_CB_VALID, NL_CB_CUSTOM, mon_valid, &m);
	/* Joined first, dumped second: nothing falls between the two. */
	r = gs_nl_dump(&n, mon_intr, &m);
	if (r) {
		errmsg("netlink: dump: %s", nl_geterror(r));
		goto out;
	}
	mon_other_netns(&m);
	m.kind = "resync";
	while (m.count) {
		r = nl_recvmsgs_default(n.evs);
		if (r == -NLE_NOMEM) {
			/* ENOBUFS: the socket overran and events are gone. */
			mon_event(&m, "events %s (receive buffer overrun); state now:",
				  "lost");
			r = gs_nl_dump(&n, mon_intr, &m);
		}
		if (r < 0 && r != -NLE_INTR && r != -NLE_AGAIN) {
			errmsg("netlink: receive: %s", nl_geterror(r));
			goto out;
		}
	}
	ret = EX_OK;
out:
	gs_nl_close(&n);
	return ret;
}
