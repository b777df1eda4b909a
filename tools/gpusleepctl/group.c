// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: release / resume --group NAME: one operation over every
 * rank of a group (docs/groups.md), opened by name through /dev/gpusleep.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "output.h"

static const char *grf_name(uint32_t flags)
{
	if (flags & GPUSLEEP_GRF_STILL_RELEASED)
		return "still_released";
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

/* The result, one line per rank (text) or one JSON object. */
static int print_group(const char *name, const struct gpusleep_tags *decl,
		       const struct gpusleep_group_result *res,
		       const struct gpusleep_group_rank *rk, uint32_t n, bool json)
{
	struct out o;
	uint32_t i;

	out_init(&o, stdout, json);
	out_obj_open(&o, NULL);
	out_str(&o, "group", "group %s: ", name);
	out_u64(&o, "op", "op %llu ", res->op_id);
	out_str(&o, "kind", "%s ", kind_name(res->kind));
	out_s64(&o, "error", NULL, res->error);
	out_str(&o, "reason", NULL, gs_reason_name(res->reason));
	out_text(&o, res->error ? "failed" : "ok");
	out_u64(&o, "duration_us", " in %llu us", res->duration_ns / 1000);
	if (res->error) {
		out_u64(&o, "rank", ": rank %llu", res->rank);
		out_u64(&o, "domain", " (domain %llu)", res->domain);
		out_str(&o, "reason_text", ": %s", gs_reason_str(res->reason));
	}
	out_arr_open(&o, "ranks");
	for (i = 0; i < n; i++) {
		out_obj_open(&o, NULL);
		out_text(&o, "\n  ");
		out_u64(&o, "rank", "rank %llu ", i);
		out_u64(&o, "domain", "domain %llu: ", rk[i].domain);
		out_str(&o, "outcome", "%s", grf_name(rk[i].flags));
		out_u64(&o, "op", " (op %llu", rk[i].op_id);
		out_str(&o, "reason", ", %s)", gs_reason_name(rk[i].reason));
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
	errmsg("group %s: op %llu %s failed at rank %u (domain %u): %s",
	       name, (unsigned long long)res->op_id, kind_name(res->kind),
	       res->rank, res->domain, gs_reason_str(res->reason));
	return EX_FAILED;
}

int group_op(const char *name, bool release, const char *tag_list,
	     uint32_t flags, uint32_t timeout_ms, bool json)
{
	struct gpusleep_tags decl;
	uint32_t tags = 0;
	struct gpusleep_group_rank rk[GPUSLEEP_GROUP_MAX_RANKS];
	struct gpusleep_group_result res;
	struct gpusleep_group_op op;
	uint32_t n = GPUSLEEP_GROUP_MAX_RANKS;
	const char *what = release ? "release" : "resume";
	int dev, gfd, r;

	dev = gs_open(dev_path, 0, NULL);
	if (dev < 0) {
		errmsg("%s: %s", dev_path ? dev_path : GS_DEVICE_PATH,
		       strerror(-dev));
		return errno_exit(-dev);
	}
	gfd = gs_group_open(dev, name, NULL);
	close(dev);
	if (gfd < 0) {
		errmsg("group %s: %s", name,
		       gfd == -ENOENT ? "no such group" : strerror(-gfd));
		return errno_exit(-gfd);
	}
	/* Tag names are the ranks' (they all declare the same). */
	r = gs_get_tags(gfd, &decl);
	if (r) {
		errmsg("group %s: reading its tags: %s", name, strerror(-r));
		close(gfd);
		return EX_FAILED;
	}
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
		if (op.rank != GPUSLEEP_GROUP_NO_RANK)
			errmsg("group %s: %s refused by rank %u (domain %u): %s (%s)",
			       name, what, op.rank, op.domain,
			       gs_reason_str(op.reason), strerror(-r));
		else
			errmsg("group %s: %s: %s", name, what, strerror(-r));
		close(gfd);
		return EX_FAILED;
	}
	if (flags & GPUSLEEP_OPF_NONBLOCK) {
		struct out o;

		out_init(&o, stdout, json);
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
	do {
		r = gs_group_wait(gfd, op.op_id, 0, &res, rk, &n);
	} while (r == -EINTR);
	close(gfd);
	if (r) {
		errmsg("group %s: op %llu: %s", name,
		       (unsigned long long)op.op_id, strerror(-r));
		return EX_FAILED;
	}
	return print_group(name, &decl, &res, rk, n, json);
}
