// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: the tags a domain declares.
 *
 * An engine names the parts of its memory at creation, in order, each with
 * a kind; tag i is bit i of every tag mask of the domain, and bit order is
 * the order in which a release pauses and a resume maps them. Without a
 * declaration a domain has the reference controller's two tags, weights
 * and kv_cache. The declaration never changes after creation, so it is
 * read without a lock; the generations it reports are read under
 * domain->lock by the caller of gs_tags_fill().
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>

#include "gpusleep.h"

static const struct gs_tag_decl gs_default_tags[GPUSLEEP_NR_TAGS] = {
	{ .name = "weights",	.kind = GPUSLEEP_TAG_KIND_MEMORY },
	{ .name = "kv_cache",	.kind = GPUSLEEP_TAG_KIND_KV_CACHE },
};

static const char * const gs_kind_names[] = {
	[GPUSLEEP_TAG_KIND_MEMORY]	= "memory",
	[GPUSLEEP_TAG_KIND_KV_CACHE]	= "kv_cache",
};

const char *gs_tag_kind_name(u32 kind)
{
	return kind < ARRAY_SIZE(gs_kind_names) ? gs_kind_names[kind] :
						  "unknown";
}

/* [a-z][a-z0-9_]*, NUL-terminated inside the array, then zeros only. */
static bool gs_tag_name_ok(const char *s)
{
	size_t len = strnlen(s, GPUSLEEP_TAG_NAME_LEN);
	size_t i;

	if (!len || len == GPUSLEEP_TAG_NAME_LEN || s[0] < 'a' || s[0] > 'z')
		return false;
	for (i = 1; i < len; i++) {
		unsigned char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return !memchr_inv(s + len, 0, GPUSLEEP_TAG_NAME_LEN - len);
}

int gs_tags_declare(struct gs_tagset *ts, const struct gpusleep_create *req)
{
	u32 i, j;

	memset(ts, 0, sizeof(*ts));
	if (req->pad2 || req->nr_tags > GPUSLEEP_MAX_TAGS)
		return -EINVAL;
	/* What lies past the declaration must be zero: nothing is ignored. */
	if (memchr_inv(req->tags + req->nr_tags, 0,
		       (GPUSLEEP_MAX_TAGS - req->nr_tags) * sizeof(req->tags[0])))
		return -EINVAL;
	if (!req->nr_tags) {
		memcpy(ts->tag, gs_default_tags, sizeof(gs_default_tags));
		ts->nr = GPUSLEEP_NR_TAGS;
		ts->all = GPUSLEEP_TAG_ALL;
		ts->kv = GPUSLEEP_TAG_KV_CACHE;
		return 0;
	}
	for (i = 0; i < req->nr_tags; i++) {
		const struct gpusleep_tag *t = &req->tags[i];

		if (!gs_tag_name_ok(t->name) || t->flags || t->generation ||
		    t->reserved)
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (!strcmp(t->name, req->tags[j].name))
				return -EINVAL;
		switch (t->kind) {
		case GPUSLEEP_TAG_KIND_MEMORY:
			break;
		case GPUSLEEP_TAG_KIND_KV_CACHE:
			if (ts->kv)
				return -EINVAL;	/* one KV cache per domain */
			ts->kv = BIT(i);
			break;
		default:
			return -EINVAL;
		}
		memcpy(ts->tag[i].name, t->name, sizeof(ts->tag[i].name));
		ts->tag[i].kind = t->kind;
	}
	ts->nr = req->nr_tags;
	ts->all = GENMASK(ts->nr - 1, 0);
	return 0;
}

bool gs_tags_same(const struct gs_tagset *a, const struct gs_tagset *b)
{
	u32 i;

	if (a->nr != b->nr)
		return false;
	for (i = 0; i < a->nr; i++)
		if (a->tag[i].kind != b->tag[i].kind ||
		    strcmp(a->tag[i].name, b->tag[i].name))
			return false;
	return true;
}

void gs_tags_fill(const struct gs_domain *d, struct gpusleep_tags *out)
{
	u32 i;

	lockdep_assert_held(&d->lock);
	memset(out, 0, sizeof(*out));
	out->nr_tags = d->tags.nr;
	for (i = 0; i < d->tags.nr; i++) {
		memcpy(out->tags[i].name, d->tags.tag[i].name,
		       sizeof(out->tags[i].name));
		out->tags[i].kind = d->tags.tag[i].kind;
		out->tags[i].generation = d->generation[i];
	}
}

int gs_tags_format(const struct gs_domain *d, u32 mask, char *buf,
		   size_t size)
{
	size_t off = 0;
	u32 i;

	if (size)
		buf[0] = '\0';
	for (i = 0; i < d->tags.nr; i++) {
		int n;

		if (!(mask & BIT(i)))
			continue;
		n = scnprintf(buf + off, size - off, "%s%s", off ? "," : "",
			      d->tags.tag[i].name);
		off += n;
	}
	return off;
}
