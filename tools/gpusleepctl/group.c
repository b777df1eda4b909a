// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: release / resume / wait --group NAME: one operation over
 * every rank of a group (docs/groups.md), opened by name through
 * /dev/gpusleep; group list and group show, from sysfs (every domain's
 * "group" file), which need no privilege.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "output.h"

static const char *grf_name(uint32_t flags)
{
	if (flags & GPUSLEEP_GRF_STILL_RELEASED)
		return "still_released";
	if (flags & GPUSLEEP_GRF_RUNNING)
		return "running";	/* settling: group wait for what follows */
	if (flags & GPUSLEEP_GRF_FAILED)
		return "failed";
	if (flags & GPUSLEEP_GRF_ROLLED_BACK)
		return "rolled_back";
	if (flags & GPUSLEEP_GRF_CANCELLED)
		return "cancelled";
	if (flags & GPUSLEEP_GRF_DONE)
		return "done";
	return "not_started";
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * gs_group_wait() to one deadline: an interrupted wait (-EINTR, a stop
 * signal too) goes on for the operation it waited for (op 0 resolved),
 * with what is left of timeout_ms (0: none).
 */
static int wait_to_deadline(int gfd, uint64_t op, uint32_t timeout_ms,
			    struct gpusleep_group_result *res,
			    struct gpusleep_group_rank *rk, uint32_t *n)
{
	uint64_t end = now_ms() + timeout_ms, t;
	uint32_t left = timeout_ms, cap = *n;
	int r;

	for (;;) {
		*n = cap;
		r = gs_group_wait(gfd, op, left, res, rk, n);
		if (r != -EINTR)
			return r;
		if (res->op_id)
			op = res->op_id;
		if (timeout_ms) {
			t = now_ms();
			left = t >= end ? 1 : (uint32_t)(end - t);
		}
	}
}

/* The result, one line per rank (text) or one JSON object. */
static int print_group(const char *name, const struct gpusleep_tags *decl,
		       const struct gpusleep_group_result *res,
		       const struct gpusleep_group_rank *rk, uint32_t n)
{
	char reason[64], why[256], dn[GPUSLEEP_NAME_LEN + 1];
	struct out o;
	uint32_t i;

	out_init(&o, stdout, opt_json);
	out_obj_open(&o, NULL);
	out_str(&o, "group", "group %s: ", name);
	out_u64(&o, "op", "op %llu ", res->op_id);
	out_str(&o, "kind", "%s ", kind_name(res->kind));
	out_tag_bits(&o, decl, "tags", NULL, res->tags);
	out_s64(&o, "error", NULL, res->error);
	reason_lower(res->reason, reason, sizeof(reason));
	out_str(&o, "reason", NULL, reason);
	out_text(&o, res->error ? "failed after " : "ok in ");
	out_us(&o, "duration_us", "%s", res->duration_ns / 1000);
	if (res->error) {
		domain_name(res->domain, dn, sizeof(dn));
		out_u64(&o, "rank", ": rank %llu", res->rank);
		out_domain(&o, "domain", " (domain %s)", res->domain, dn);
		failure_text(res->reason, res->error, why, sizeof(why));
		out_str(&o, "message", ": %s", why);
	}
	out_arr_open(&o, "ranks");
	for (i = 0; i < n; i++) {
		domain_name(rk[i].domain, dn, sizeof(dn));
		out_obj_open(&o, NULL);
		out_text(&o, "\n  ");
		out_u64(&o, "rank", "rank %llu ", i);
		out_domain(&o, "domain", "domain %s: ", rk[i].domain, dn);
		out_str(&o, "outcome", "%s", grf_name(rk[i].flags));
		out_u64(&o, "op", " (op %llu", rk[i].op_id);
		reason_lower(rk[i].reason, reason, sizeof(reason));
		out_str(&o, "reason", ", %s)", reason);
		out_s64(&o, "error", NULL, rk[i].error);
		out_u64(&o, "rollback_op", NULL, rk[i].rollback_op_id);
		out_tag_bits(&o, decl, "released", NULL, rk[i].released);
		out_obj_close(&o);
	}
	out_arr_close(&o);
	out_obj_close(&o);
	out_end_line(&o);
	if (!res->error)
		return EX_OK;
	failure_text(res->reason, res->error, why, sizeof(why));
	errmsg("group %s: op %llu %s failed at rank %u (domain %u): %s",
	       name, (unsigned long long)res->op_id, kind_name(res->kind),
	       res->rank, res->domain, why);
	return EX_FAILED;
}

/*
 * The rank r of domain, when it is named as the integrations name the
 * ranks of group: "<group>-tp<r>" (gpusleep.sglang, gpusleep.vllm); else
 * -1.
 */
static long rank_of(const char *group, const char *domain)
{
	size_t len = strlen(group);
	const char *p = domain + len + 3;
	char *end;
	long r;

	if (strncmp(domain, group, len) || strncmp(domain + len, "-tp", 3) ||
	    !isdigit((unsigned char)*p) || (*p == '0' && p[1]))
		return -1;
	errno = 0;
	r = strtol(p, &end, 10);
	if (errno || *end || r >= GPUSLEEP_GROUP_MAX_RANKS)
		return -1;
	return r;
}

/* A creator of the domain is seen from here (pick_group's rule). */
static bool creator_seen(const struct domain *d)
{
	return (d->present & (1ULL << FLD_owner_pid)) && d->owner_pid;
}

/*
 * resume --group NAME where the caller has no live group NAME: a group
 * ends when the process that created it (an engine's trainer) exits, and
 * leaves its ranks as they were, released maybe. Its ranks, found by the
 * names the integrations give them, NAME-tp<r> (domains in no group; of
 * two of one name, the one whose creator this process sees), become a
 * new group NAME made here for this one resume (closed after it, which
 * ends it). Returns the group fd; or -ENOENT when no domain has such a
 * name, -EEXIST when the name was taken meanwhile; or -1 with *status the
 * exit status, after saying why.
 */
static int adopt_ranks(int dev, const char *name, int *status)
{
	uint32_t ids[GPUSLEEP_GROUP_MAX_RANKS] = { 0 };
	unsigned int cands[GPUSLEEP_GROUP_MAX_RANKS] = { 0 };
	unsigned int seen[GPUSLEEP_GROUP_MAX_RANKS] = { 0 };
	char list[4096] = "", what[GPUSLEEP_NAME_LEN + 8];
	struct domain *ds;
	size_t n, i, len = 0;
	long r, top = -1;
	int gfd, fd, ret;

	ret = all_domains(&ds, &n);
	if (ret) {
		*status = ret;
		return -1;
	}
	for (i = 0; i < n; i++) {
		r = rank_of(name, ds[i].name);
		if (r < 0 || ds[i].group[0])
			continue;
		cands[r]++;
		if (creator_seen(&ds[i]))
			seen[r]++;
		if (cands[r] == 1 || (creator_seen(&ds[i]) && seen[r] == 1))
			ids[r] = ds[i].id;
		if (r > top)
			top = r;
	}
	free(ds);
	if (top < 0)
		return -ENOENT;
	for (r = 0; r <= top; r++) {
		if (!cands[r]) {
			jerr.err = -ENOENT;
			*status = EX_NOTFOUND;
			errmsg("group %s: no live group of that name, and of its ranks' names no domain has %s-tp%ld (gpusleepctl list shows the domains): resume each rank, gpusleepctl resume DOMAIN",
			       name, name, r);
			return -1;
		}
		if (cands[r] > 1 && seen[r] != 1) {
			jerr.err = -EINVAL;
			*status = EX_USAGE;
			errmsg("group %s: no live group of that name, and %u domains are named %s-tp%ld: resume each rank by its id, gpusleepctl resume ID (gpusleepctl list shows them)",
			       name, cands[r], name, r);
			return -1;
		}
		if (len < sizeof(list))
			len += snprintf(list + len, sizeof(list) - len,
					"%s%s-tp%ld (domain %u)", r ? ", " : "",
					name, r, ids[r]);
	}
	fprintf(stderr, "%s: group %s: no live group of that name (a group ends when the process that created it exits, leaving its ranks as they were); resuming the domains named after it, %s, as a new group %s for this resume\n",
		prog, name, list, name);
	gfd = gs_group_create(dev, name, NULL);
	if (gfd == -EEXIST)
		return gfd;
	if (gfd < 0) {
		jerr.err = gfd;
		errmsg("group %s: creating it: %s", name, strerror(-gfd));
		*status = errno_exit(-gfd);
		return -1;
	}
	for (r = 0; r <= top; r++) {
		snprintf(what, sizeof(what), "%s-tp%ld", name, r);
		fd = attach_controller(ids[r], what);
		if (fd < 0) {
			close(gfd);
			*status = -fd;
			return -1;
		}
		ret = gs_group_add(gfd, fd, NULL);
		close(fd);
		if (ret) {
			jerr.err = ret;
			errmsg("group %s: adding domain %s (%u): %s", name, what,
			       ids[r], ret == -EBUSY ?
			       "it is a rank of another group now" :
			       ret == -EXDEV ?
			       "its tags differ from rank 0's" :
			       ret == -ENOENT ? "it is dead (its engine exited)" :
			       strerror(-ret));
			close(gfd);
			*status = EX_FAILED;
			return -1;
		}
	}
	return gfd;
}

/*
 * Open group name and read its tags (the ranks', which all declare the
 * same) into decl; the fd, or an exit status < 0 after saying why.
 * adopt (resume): a name with no live group resumes the ranks named
 * after it (adopt_ranks).
 */
static int open_group(const char *name, struct gpusleep_tags *decl,
		      bool adopt)
{
	int dev, gfd, r, tries = 0, status = 0;

	snprintf(jerr.group, sizeof(jerr.group), "%s", name);
	dev = gs_open(dev_path, 0, NULL);
	if (dev < 0)
		return -dev_open_failed(-dev);
	do {
		gfd = gs_group_open(dev, name, NULL);
		if (gfd == -ENOENT && adopt)
			gfd = adopt_ranks(dev, name, &status);
	} while (gfd == -EEXIST && adopt && ++tries < 3);
	close(dev);
	if (status)
		return -status;		/* said */
	if (gfd >= 0) {
		r = gs_get_tags(gfd, decl);
		if (!r)
			return gfd;
		jerr.err = r;
		errmsg("group %s: reading its tags: %s", name, strerror(-r));
		close(gfd);
		return -EX_FAILED;
	}
	jerr.err = gfd;
	if (gfd == -ENOENT && adopt)
		errmsg("group %s: no such group, and no domain is named %s-tp0, %s-tp1, ... (a group ends when the process that created it exits, leaving its ranks as they were: resume each of them, gpusleepctl resume DOMAIN; gpusleepctl list shows the domains)",
		       name, name, name);
	else if (gfd == -ENOENT)
		errmsg("group %s: no such group (gpusleepctl group list shows them; a group ends when the process that created it exits: gpusleepctl resume --group %s then resumes its ranks, named %s-tp<rank>)",
		       name, name, name);
	else if (gfd == -EPERM || gfd == -EACCES)
		errmsg("group %s: permission denied: only the group creator's user or root (CAP_SYS_ADMIN) may control it; run with sudo",
		       name);
	else
		errmsg("group %s: %s", name, strerror(-gfd));
	return -errno_exit(-gfd);
}

int group_op(const char *name, bool release, const char *tag_list,
	     uint32_t flags, uint32_t timeout_ms)
{
	struct gpusleep_tags decl;
	uint32_t tags = 0;
	struct gpusleep_group_rank rk[GPUSLEEP_GROUP_MAX_RANKS];
	struct gpusleep_group_result res;
	struct gpusleep_group_op op;
	uint32_t n = GPUSLEEP_GROUP_MAX_RANKS;
	const char *what = release ? "release" : "resume";
	int gfd, r;

	gfd = open_group(name, &decl, !release);
	if (gfd < 0)
		return -gfd;
	if (tag_list && gs_tags_parse_in(&decl, tag_list, &tags)) {
		char all[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];

		gs_tags_format_in(&decl, (uint32_t)((1ULL << decl.nr_tags) - 1),
				  all, sizeof(all));
		errmsg("--tags %s: group %s's ranks have no such tag (their tags: %s, all)",
		       tag_list, name, all);
		close(gfd);
		return EX_USAGE;
	}
	/* Start it, then wait: the result comes with its breakdown. */
	r = release ? gs_group_release(gfd, tags, flags | GPUSLEEP_OPF_NONBLOCK,
				       timeout_ms, &op) :
		      gs_group_resume(gfd, tags, flags | GPUSLEEP_OPF_NONBLOCK,
				      timeout_ms, &op);
	if (r) {
		static char reason[64];

		jerr.err = r;
		reason_lower(op.reason, reason, sizeof(reason));
		jerr.reason = op.reason ? reason : NULL;
		if (op.rank != GPUSLEEP_GROUP_NO_RANK) {
			char why[256];

			jerr.has_domain = true;
			jerr.domain = op.domain;
			domain_name(op.domain, jerr.name, sizeof(jerr.name));
			failure_text(op.reason, 0, why, sizeof(why));
			errmsg("group %s: %s refused by rank %u (domain %u): %s",
			       name, what, op.rank, op.domain, why);
		} else {
			errmsg("group %s: %s: %s", name, what, strerror(-r));
		}
		close(gfd);
		return EX_FAILED;
	}
	if (flags & GPUSLEEP_OPF_NONBLOCK) {
		struct out o;

		out_init(&o, stdout, opt_json);
		out_obj_open(&o, NULL);
		out_str(&o, "group", "group %s: ", name);
		out_u64(&o, "op", "op %llu ", op.op_id);
		out_str(&o, "kind", "%s", what);
		out_bool(&o, "started", " started%.0s", true);
		out_obj_close(&o);
		out_end_line(&o);
		close(gfd);
		return EX_OK;
	}
	r = wait_to_deadline(gfd, op.op_id, 0, &res, rk, &n);
	close(gfd);
	if (r) {
		errmsg("group %s: op %llu: %s", name,
		       (unsigned long long)op.op_id, strerror(-r));
		return EX_FAILED;
	}
	return print_group(name, &decl, &res, rk, n);
}

int group_wait(const char *name, uint64_t op, uint32_t timeout_ms)
{
	struct gpusleep_group_rank rk[GPUSLEEP_GROUP_MAX_RANKS];
	uint32_t n = GPUSLEEP_GROUP_MAX_RANKS;
	struct gpusleep_group_result res;
	struct gpusleep_tags decl;
	int gfd, r;

	gfd = open_group(name, &decl, false);
	if (gfd < 0)
		return -gfd;
	r = wait_to_deadline(gfd, op, timeout_ms, &res, rk, &n);
	close(gfd);
	if (r) {
		jerr.err = r;
		if (r == -ETIMEDOUT)
			errmsg("group %s: still running after %u s (it goes on; wait again to see its result)",
			       name, timeout_ms / 1000);
		else if (r == -ENOENT)
			errmsg("group %s: %s", name, op ?
			       "no such operation (or too old to be remembered)" :
			       "no operation issued yet");
		else
			errmsg("group %s: wait: %s", name, strerror(-r));
		return r == -ENOENT ? EX_NOTFOUND : EX_FAILED;
	}
	return print_group(name, &decl, &res, rk, n);
}

/*
 * group list / show: the domains with a group, from sysfs. A group is its
 * ranks' (group, group_id): names are scoped to their creator, so two
 * groups of one node (two users, two containers) may share one; a module
 * without group_id gives 0 for every rank and groups go by name alone.
 */
static const char group_usage[] =
	"Usage: gpusleepctl group list\n"
	"       gpusleepctl group show NAME [-j|--json]\n"
	"list: one line per group: its name, its id, its ranks' domains and\n"
	"their states. show NAME: the ranks of group NAME as gpusleepctl list\n"
	"shows domains; where groups of other users or containers have that\n"
	"name too, the one whose ranks' creators this process sees. From sysfs\n"
	"(each domain's group and group_id files): needs no privilege.\n"
	"Release, resume and wait a group with --group NAME.\n";

static int cmp_group(const void *a, const void *b)
{
	const struct domain *x = a, *y = b;
	int c = strcmp(x->group, y->group);

	if (!c)
		c = (x->group_id > y->group_id) - (x->group_id < y->group_id);
	return c ? c : (x->id > y->id) - (x->id < y->id);
}

/* ds[i] and ds[j] are ranks of one group. */
static bool same_group(const struct domain *x, const struct domain *y)
{
	return !strcmp(x->group, y->group) && x->group_id == y->group_id;
}

/* Some rank of the group ds[i..j) has a creator this process sees. */
static bool group_seen(const struct domain *ds, size_t i, size_t j)
{
	for (; i < j; i++)
		if ((ds[i].present & (1ULL << FLD_owner_pid)) && ds[i].owner_pid)
			return true;
	return false;
}

/*
 * show NAME: the first rank (in ds, sorted) of the group to show, in *at;
 * where several groups have the name, the one whose ranks are seen here.
 * EX_OK, EX_NOTFOUND, or EX_USAGE when still ambiguous (said).
 */
static int pick_group(const struct domain *ds, size_t n, const char *want,
		      size_t *at)
{
	size_t i, j, groups = 0, seen = 0, mine = 0;

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && same_group(&ds[j], &ds[i]); j++)
			;
		if (strcmp(want, ds[i].group))
			continue;
		if (!groups++)
			*at = i;
		if (group_seen(ds, i, j) && !seen++)
			mine = i;
	}
	snprintf(jerr.group, sizeof(jerr.group), "%s", want);
	if (!groups) {
		errmsg("group %s: no such group (gpusleepctl group list shows them)",
		       want);
		return EX_NOTFOUND;
	}
	if (groups > 1 && seen != 1) {
		jerr.err = -EINVAL;
		errmsg("group %s: %zu groups have that name (gpusleepctl group list shows them, with their ids)",
		       want, groups);
		return EX_USAGE;
	}
	if (groups > 1)
		*at = mine;
	return EX_OK;
}

int cmd_group(int argc, char **argv)
{
	struct domain *ds;
	const char *sub, *want = NULL;
	size_t n, i, j, first = 0;
	struct out o;
	int r;

	if (parse_json_opt(argc, argv, group_usage))
		return EX_USAGE;
	if (optind >= argc) {
		fputs(group_usage, stderr);
		return EX_USAGE;
	}
	sub = argv[optind++];
	if (!strcmp(sub, "show") && argc - optind == 1) {
		want = argv[optind];
	} else if (strcmp(sub, "list") || optind != argc) {
		fputs(group_usage, stderr);
		return EX_USAGE;
	}
	r = all_domains(&ds, &n);
	if (r)
		return r;
	qsort(ds, n, sizeof(*ds), cmp_group);
	if (want) {
		r = pick_group(ds, n, want, &first);
		if (r) {
			free(ds);
			return r;
		}
	}
	out_init(&o, stdout, opt_json);
	if (!want)
		out_arr_open(&o, NULL);
	if (!want)
		out_text(&o, "%-20s %-6s %-6s %s\n", "GROUP", "ID", "RANKS",
			 "DOMAINS");
	for (i = want ? first : 0; i < n; i = j) {
		size_t k;

		for (j = i + 1; j < n && same_group(&ds[j], &ds[i]); j++)
			;
		if (!ds[i].group[0])
			continue;
		out_obj_open(&o, NULL);
		out_str(&o, "group", want ? "group %s" : "%-20s ", ds[i].group);
		if (ds[i].present & (1ULL << FLD_group_id))
			out_u64(&o, "group_id", want ? " (id %llu):" : "%-6llu ",
				ds[i].group_id);
		else if (o.json)
			out_null(&o, "group_id", NULL);	/* an older module */
		else if (want)
			out_text(&o, ":");
		else
			out_text(&o, "%-6s ", "-");
		out_u64(&o, "nr_ranks", want ? " %llu ranks\n" : "%-6llu ", j - i);
		out_arr_open(&o, "domains");
		for (k = i; k < j; k++) {
			char mem[32];

			out_obj_open(&o, NULL);
			if (want) {
				out_u64(&o, "id", "  domain %llu", ds[k].id);
				out_str(&o, "name", " %s", ds[k].name);
				out_str(&o, "state", ": %s", ds[k].state);
				out_tags(&o, "released_tags", ", released %s",
					 ds[k].released_tags);
				if (ds[k].released_tags[0])
					out_text(&o, " (%s)",
						 fmt_size(domain_released_bytes(&ds[k]),
							  false, mem, sizeof(mem)));
				out_bool(&o, "agent_attached", ", agent %s\n",
					 ds[k].agent_attached);
			} else {
				out_u64(&o, "id", k > i ? ",%llu" : "%llu",
					ds[k].id);
				out_str(&o, "name", "(%s)", ds[k].name);
				out_str(&o, "state", NULL, ds[k].state);
			}
			out_obj_close(&o);
		}
		out_arr_close(&o);
		out_obj_close(&o);
		if (want)
			break;
		out_text(&o, "\n");
	}
	if (!want)
		out_arr_close(&o);
	if (opt_json)
		out_end_line(&o);
	free(ds);
	return EX_OK;
}
