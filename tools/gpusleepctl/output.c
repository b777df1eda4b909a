// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: the output layer shared by text and --json (output.h). */
#include <stdarg.h>
#include <string.h>

#include "libgpusleep.h"
#include "output.h"

void out_init(struct out *o, FILE *f, bool json)
{
	memset(o, 0, sizeof(*o));
	o->f = f;
	o->json = json;
	o->first[0] = true;
}

void json_str(FILE *f, const char *s)
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

/* A comma when needed, then "key": when there is a key. */
static void json_key(struct out *o, const char *key)
{
	if (!o->first[o->depth])
		fputc(',', o->f);
	o->first[o->depth] = false;
	if (key) {
		json_str(o->f, key);
		fputc(':', o->f);
	}
}

static void open_(struct out *o, const char *key, char c)
{
	if (!o->json)
		return;
	json_key(o, key);
	fputc(c, o->f);
	if (o->depth < OUT_DEPTH - 1)
		o->depth++;
	o->first[o->depth] = true;
}

static void close_(struct out *o, char c)
{
	if (!o->json)
		return;
	fputc(c, o->f);
	if (o->depth > 0)
		o->depth--;
}

void out_obj_open(struct out *o, const char *key)
{
	open_(o, key, '{');
}

void out_obj_close(struct out *o)
{
	close_(o, '}');
}

void out_arr_open(struct out *o, const char *key)
{
	open_(o, key, '[');
}

void out_arr_close(struct out *o)
{
	close_(o, ']');
}

void out_str(struct out *o, const char *key, const char *fmt, const char *v)
{
	if (o->json) {
		json_key(o, key);
		json_str(o->f, v);
	} else if (fmt) {
		fprintf(o->f, fmt, v);
	}
}

void out_u64(struct out *o, const char *key, const char *fmt, uint64_t v)
{
	if (o->json) {
		json_key(o, key);
		fprintf(o->f, "%llu", (unsigned long long)v);
	} else if (fmt) {
		fprintf(o->f, fmt, (unsigned long long)v);
	}
}

void out_s64(struct out *o, const char *key, const char *fmt, int64_t v)
{
	if (o->json) {
		json_key(o, key);
		fprintf(o->f, "%lld", (long long)v);
	} else if (fmt) {
		fprintf(o->f, fmt, (long long)v);
	}
}

void out_bool(struct out *o, const char *key, const char *fmt, bool v)
{
	if (o->json) {
		json_key(o, key);
		fputs(v ? "true" : "false", o->f);
	} else if (fmt) {
		fprintf(o->f, fmt, v ? "yes" : "no");
	}
}

void out_null(struct out *o, const char *key, const char *fmt)
{
	if (o->json) {
		json_key(o, key);
		fputs("null", o->f);
	} else if (fmt) {
		fprintf(o->f, fmt, "never");
	}
}

void out_tags(struct out *o, const char *key, const char *fmt, const char *list)
{
	const char *p = list;

	if (!o->json) {
		if (fmt)
			fprintf(o->f, fmt, list[0] ? list : "-");
		return;
	}
	out_arr_open(o, key);
	while (*p) {
		size_t n = strcspn(p, ",");
		char tag[32];

		snprintf(tag, sizeof(tag), "%.*s", (int)n, p);
		out_str(o, NULL, NULL, tag);
		p += n;
		if (*p == ',')
			p++;
	}
	out_arr_close(o);
}

void out_tag_bits(struct out *o, const struct gpusleep_tags *decl,
		  const char *key, const char *fmt, uint32_t tags)
{
	char buf[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];

	if (gs_tags_format_in(decl, tags, buf, sizeof(buf)) < 0)
		buf[0] = '\0';
	out_tags(o, key, fmt, buf);
}

void out_text(struct out *o, const char *fmt, ...)
{
	va_list ap;

	if (o->json)
		return;
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
}

void out_end_line(struct out *o)
{
	fputc('\n', o->f);
	if (o->json && !o->depth)
		o->first[0] = true;
}
