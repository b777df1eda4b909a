// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: list and status, from sysfs, through the output layer. */
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
	char tag[GPUSLEEP_TAG_NAME_LEN], val[24], text[sizeof(fv_TAGU64) +
						       sizeof(fv_TAGS)];
	size_t i, off = 0;

	if (o->json)
		out_obj_open(o, f->jkey);
	text[0] = '\0';
	for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)) &&
		    !list_item(s, i, val, sizeof(val)); i++) {
		if (o->json) {
			out_u64(o, tag, NULL, strtoull(val, NULL, 10));
			continue;
		}
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
		tag_values_out(o, d, f, s);
		break;
	case K_BOOL:
		out_bool(o, f->jkey, f->text, FIELD_U64(d, f) != 0);
		break;
	case K_U64:
	case K_RES:
		out_u64(o, f->jkey, f->text, FIELD_U64(d, f));
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
		v = FIELD_U64(d, f);
		if (o->json) {
			out_u64(o, f->jkey, NULL, v);
			break;
		}
		snprintf(buf, sizeof(buf), "%llu us", (unsigned long long)v);
		out_str(o, NULL, f->text, buf);
		break;
	}
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
		field_out(o, d, f);
	}
	if (group)
		out_obj_close(o);
	out_obj_close(o);
}

static const char list_usage[] =
	"Usage: gpusleepctl list [--json]\n"
	"List the domains of this node: id, name, GPU, state, released tags.\n";

int cmd_list(int argc, char **argv)
{
	struct domain d;
	struct out o;
	uint32_t *ids;
	size_t n, i;
	bool json = false;
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
	out_init(&o, stdout, json);
	out_arr_open(&o, NULL);
	out_text(&o, "%-6s %-20s %-16s %-10s %-18s %s\n", "ID", "NAME", "GPU",
		 "STATE", "RELEASED", "AGENT");
	for (i = 0; i < n; i++) {
		if (domain_load(ids[i], &d))
			continue;	/* went away meanwhile */
		if (json) {
			domain_out(&o, &d, false);
			continue;
		}
		printf("%-6u %-20s %-16s %-10s %-18s %s\n", d.id, d.name,
		       d.gpu[0] ? d.gpu : "-", d.state,
		       d.released_tags[0] ? d.released_tags : "-",
		       d.agent_attached ? "yes" : "no");
	}
	out_arr_close(&o);
	if (json)
		putchar('\n');
	free(ids);
	return EX_OK;
}

static const char status_usage[] =
	"Usage: gpusleepctl status [DOMAIN] [--json]\n"
	"Show every sysfs value of DOMAIN (an id or a name), or of every domain.\n"
	"With --json: one object for DOMAIN, an array without it.\n";

int cmd_status(int argc, char **argv)
{
	struct domain d;
	struct out o;
	uint32_t *ids, id;
	size_t n, i;
	bool json = false;
	int r;

	if (parse_json_opt(argc, argv, &json, status_usage))
		return EX_USAGE;
	if (argc - optind > 1) {
		fputs(status_usage, stderr);
		return EX_USAGE;
	}
	out_init(&o, stdout, json);
	if (optind < argc) {
		r = resolve(argv[optind], &id);
		if (r)
			return r;
		if (domain_load(id, &d)) {
			errmsg("domain %s: no such domain", argv[optind]);
			return EX_NOTFOUND;
		}
		domain_out(&o, &d, true);
		if (json)
			putchar('\n');
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
	if (json)
		putchar('\n');
	free(ids);
	return EX_OK;
}
