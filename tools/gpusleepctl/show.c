// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: list and status, from sysfs, through the output layer. */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "output.h"

/*
 * Numbers per declared tag: JSON {"weights": 4096, ...}; text "weights
 * 4096, kv_cache 0" through the field's format.
 */
static void tag_values_out(struct out *o, const struct domain *d,
			   const struct field *f, const char *s)
{
	char tag[GPUSLEEP_TAG_NAME_LEN], val[32], text[sizeof(fv_TAGU64) +
						       sizeof(fv_TAGS)];
	size_t i, off = 0;

	if (o->json)
		out_obj_open(o, f->jkey);
	text[0] = '\0';
	for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)) &&
		    !list_item(s, i, val, sizeof(val)); i++) {
		if (o->json && f->kind == K_TAGSTR) {
			out_str(o, tag, NULL, val);
			continue;
		}
		if (o->json) {
			out_u64(o, tag, NULL, strtoull(val, NULL, 10));
			continue;
		}
		if (f->flags & F_BYTES)
			fmt_size(strtoull(val, NULL, 10), false, val,
				 sizeof(val));
		off += (size_t)snprintf(text + off, sizeof(text) - off,
					"%s%s %s", i ? ", " : "", tag, val);
		if (off >= sizeof(text))
			break;
	}
	if (o->json)
		out_obj_close(o);
	else
		out_str(o, NULL, f->text, text[0] ? text : "-");
}

static void field_out(struct out *o, const struct domain *d,
		      const struct field *f)
{
	const char *s = FIELD_PTR(d, f);
	uint64_t v;
	char buf[32];

	switch (f->kind) {
	case K_STR:
	case K_STATE:
		out_str(o, f->jkey, f->text, s[0] || o->json ? s : "-");
		break;
	case K_TAGS:
		out_tags(o, f->jkey, f->text, s);
		break;
	case K_TAGU64:
	case K_TAGSTR:
		tag_values_out(o, d, f, s);
		break;
	case K_BOOL:
		out_bool(o, f->jkey, f->text, FIELD_U64(d, f) != 0);
		break;
	case K_U64:
		if (f->flags & F_BYTES)
			out_size(o, f->jkey, f->text, FIELD_U64(d, f));
		else
			out_u64(o, f->jkey, f->text, FIELD_U64(d, f));
		break;
	case K_S64:
		out_s64(o, f->jkey, f->text, (int64_t)FIELD_U64(d, f));
		break;
	case K_RES:
		out_size(o, f->jkey, f->text, FIELD_U64(d, f));
		break;
	case K_OP:
		v = FIELD_U64(d, f);
		if (o->json) {
			out_u64(o, f->jkey, NULL, v);
			break;
		}
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
		out_str(o, NULL, f->text, v ? buf : "none");
		break;
	case K_US:
		if (field_never(d, f)) {
			out_null(o, f->jkey, f->text);
			break;
		}
		out_us(o, f->jkey, f->text, FIELD_U64(d, f));
		break;
	}
}

/*
 * What is left on the GPU, by class (issue 34 item 5): JSON "left":
 * {tags, torch, graphs, other (null unless the process's own figure is
 * known), process, source}; text one line.
 */
static void left_out(struct out *o, const struct domain *d)
{
	char a[32], b[32], c[32], e[32], p[32];
	struct left l;

	if (!domain_left(d, &l))
		return;
	if (o->json) {
		out_obj_open(o, "left");
		out_u64(o, "tags", NULL, l.tags);
		out_u64(o, "torch", NULL, l.torch);
		out_u64(o, "graphs", NULL, l.graphs);
		if (l.other_known)
			out_u64(o, "other", NULL, l.other);
		else
			out_null(o, "other", NULL);
		out_u64(o, "process", NULL, l.process);
		out_str(o, "source", NULL, l.source);
		out_obj_close(o);
		return;
	}
	fmt_size(l.tags, true, a, sizeof(a));
	fmt_size(l.torch, true, b, sizeof(b));
	fmt_size(l.graphs, true, c, sizeof(c));
	if (l.other_known)
		fmt_size(l.other, true, e, sizeof(e));
	else
		snprintf(e, sizeof(e), "?");
	if (strcmp(l.source, "unknown"))
		fmt_size(l.process, true, p, sizeof(p));
	else
		snprintf(p, sizeof(p), "?");
	out_text(o, "\tleft on the GPU: tags %s, torch %s, graphs %s, other %s of %s (%s)\n",
		 a, b, c, e, p, l.source);
}

/*
 * One domain: every field (status) or the F_LIST ones (list --json).
 * Text: "domain ID: NAME" then the fields' formats.
 */
static void domain_out(struct out *o, const struct domain *d, bool full)
{
	const char *group = NULL;
	size_t i;

	out_obj_open(o, NULL);
	out_u64(o, "id", "domain %llu: ", d->id);
	out_text(o, "%s\n", d->name);
	for (i = 0; i < FLD_COUNT; i++) {
		const struct field *f = &domain_fields[i];

		if (!(d->present & (1ULL << i)) ||
		    (!full && !(f->flags & F_LIST)))
			continue;
		if (group && (!f->jgroup || strcmp(group, f->jgroup))) {
			out_obj_close(o);
			group = NULL;
		}
		if (f->jgroup && !group) {
			group = f->jgroup;
			out_obj_open(o, group);
		}
		if (!o->json && f == &domain_fields[FLD_name])
			continue;	/* in the heading */
		if (!o->json && f == &domain_fields[FLD_leased_tags] &&
		    !d->lease_id)
			continue;	/* "lease none": no tags to name */
		field_out(o, d, f);
	}
	if (group)
		out_obj_close(o);
	if (full)
		left_out(o, d);
	out_obj_close(o);
}

static const char list_usage[] =
	"Usage: gpusleepctl list [-j|--json] [-p|--bytes]\n"
	"List the domains of this node: id, name, GPU, state, released tags,\n"
	"the memory released and what stayed resident, whether an agent is\n"
	"attached. -p: raw byte counts. -j: a JSON array (the keys of status).\n";

enum { COL_ID, COL_NAME, COL_GPU, COL_STATE, COL_RELEASED, COL_MEMORY,
       COL_RESIDENT, COL_AGENT, COL_PRIO, COL_LEASE, NCOLS };
#define GPU_WIDTH	20	/* a PCI address fits; a UUID is cut */
#define CELL_LEN	(GS_STR_LEN + 8)

static void list_row(const struct domain *d, char cell[NCOLS][CELL_LEN])
{
	snprintf(cell[COL_ID], CELL_LEN, "%u", d->id);
	snprintf(cell[COL_NAME], CELL_LEN, "%s", d->name[0] ? d->name : "-");
	gpu_short(d->gpu, GPU_WIDTH, cell[COL_GPU], CELL_LEN);
	snprintf(cell[COL_STATE], CELL_LEN, "%s", d->state);
	snprintf(cell[COL_RELEASED], CELL_LEN, "%.*s", CELL_LEN - 1,
		 d->released_tags[0] ? d->released_tags : "-");
	if (d->released_tags[0])
		fmt_size(domain_released_bytes(d), true, cell[COL_MEMORY], CELL_LEN);
	else
		snprintf(cell[COL_MEMORY], CELL_LEN, "-");
	if (d->released_tags[0] && d->resident_source[0] &&
	    strcmp(d->resident_source, "unknown"))
		fmt_size(d->resident_bytes, true, cell[COL_RESIDENT], CELL_LEN);
	else
		snprintf(cell[COL_RESIDENT], CELL_LEN, "-");
	snprintf(cell[COL_AGENT], CELL_LEN, "%s",
		 d->agent_attached ? "yes" : "no");
	/* the tenant (docs/arbiter.md); "-" from a module without tenants */
	if (d->present & (1ULL << FLD_priority))
		snprintf(cell[COL_PRIO], CELL_LEN, "%lld",
			 (long long)(int64_t)d->priority);
	else
		snprintf(cell[COL_PRIO], CELL_LEN, "-");
	if ((d->present & (1ULL << FLD_lease_id)) && d->lease_id)
		snprintf(cell[COL_LEASE], CELL_LEN, "%llu",
			 (unsigned long long)d->lease_id);
	else
		snprintf(cell[COL_LEASE], CELL_LEN, "-");
}

int cmd_list(int argc, char **argv)
{
	static const char *const head[NCOLS] = {
		"ID", "NAME", "GPU", "STATE", "RELEASED", "MEMORY", "RESIDENT",
		"AGENT", "PRIO", "LEASE",
	};
	char (*cells)[NCOLS][CELL_LEN];
	size_t width[NCOLS], n, i, c;
	struct domain *ds;
	struct out o;
	int r;

	if (parse_json_opt(argc, argv, list_usage))
		return EX_USAGE;
	if (optind != argc) {
		fputs(list_usage, stderr);
		return EX_USAGE;
	}
	r = all_domains(&ds, &n);
	if (r)
		return r;
	out_init(&o, stdout, opt_json);
	if (opt_json) {
		out_arr_open(&o, NULL);
		for (i = 0; i < n; i++)
			domain_out(&o, &ds[i], false);
		out_arr_close(&o);
		out_end_line(&o);
		free(ds);
		return EX_OK;
	}
	/* Columns as wide as their widest cell: nothing overflows. */
	cells = calloc(n ? n : 1, sizeof(*cells));
	if (!cells) {
		free(ds);
		errmsg("out of memory");
		return EX_FAILED;
	}
	for (c = 0; c < NCOLS; c++)
		width[c] = strlen(head[c]);
	for (i = 0; i < n; i++) {
		list_row(&ds[i], cells[i]);
		for (c = 0; c < NCOLS; c++)
			if (strlen(cells[i][c]) > width[c])
				width[c] = strlen(cells[i][c]);
	}
	for (c = 0; c < NCOLS; c++)
		printf("%-*s%s", c + 1 < NCOLS ? (int)width[c] : 0, head[c],
		       c + 1 < NCOLS ? "  " : "\n");
	for (i = 0; i < n; i++)
		for (c = 0; c < NCOLS; c++)
			printf("%-*s%s", c + 1 < NCOLS ? (int)width[c] : 0,
			       cells[i][c], c + 1 < NCOLS ? "  " : "\n");
	free(cells);
	free(ds);
	return EX_OK;
}

static const char status_usage[] =
	"Usage: gpusleepctl status [DOMAIN] [-j|--json] [-p|--bytes]\n"
	"Show every sysfs value of DOMAIN (an id or a name), or of every domain.\n"
	"With --json: one object for DOMAIN, an array without it.\n";

int cmd_status(int argc, char **argv)
{
	struct domain d;
	struct out o;
	uint32_t *ids, id;
	size_t n, i;
	int r;

	if (parse_json_opt(argc, argv, status_usage))
		return EX_USAGE;
	if (argc - optind > 1) {
		fputs(status_usage, stderr);
		return EX_USAGE;
	}
	out_init(&o, stdout, opt_json);
	if (optind < argc) {
		r = resolve(argv[optind], &id);
		if (r)
			return r;
		if (domain_load(id, &d)) {
			errmsg("domain %s: no such domain", argv[optind]);
			return EX_NOTFOUND;
		}
		domain_out(&o, &d, true);
		if (opt_json)
			out_end_line(&o);
		return EX_OK;
	}
	r = all_domain_ids(&ids, &n);
	if (r)
		return r;
	out_arr_open(&o, NULL);
	for (i = 0; i < n; i++)
		if (!domain_load(ids[i], &d))
			domain_out(&o, &d, true);
	out_arr_close(&o);
	if (opt_json)
		out_end_line(&o);
	free(ids);
	return EX_OK;
}
