// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: the output layer shared by text and --json (output.h). */
#include <ctype.h>
#include <stdarg.h>
#include <string.h>

#include "gpusleepctl.h"
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

void json_key_num(struct out *o, const char *key, const char *fmt, ...)
{
	va_list ap;

	if (!o->json)
		return;
	json_key(o, key);
	va_start(ap, fmt);
	vfprintf(o->f, fmt, ap);
	va_end(ap);
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
	if (o->json)
		jerr.printed = true;
}

const char *fmt_size(uint64_t v, bool bare, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	double x = (double)v;
	size_t u = 0;

	if (opt_bytes) {
		snprintf(buf, len, "%llu%s", (unsigned long long)v,
			 bare ? "" : " bytes");
		return buf;
	}
	if (v < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)v);
		return buf;
	}
	x /= 1024;
	while (x >= 1024 && u < sizeof(units) / sizeof(units[0]) - 1) {
		x /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", x, units[u]);
	return buf;
}

const char *fmt_us(uint64_t us, char *buf, size_t len)
{
	if (opt_bytes || us < 1000)
		snprintf(buf, len, "%llu us", (unsigned long long)us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1f ms", (double)us / 1e3);
	else
		snprintf(buf, len, "%.2f s", (double)us / 1e6);
	return buf;
}

void out_size(struct out *o, const char *key, const char *fmt, uint64_t v)
{
	char buf[32];

	if (o->json)
		out_u64(o, key, NULL, v);
	else if (fmt)
		fprintf(o->f, fmt, fmt_size(v, false, buf, sizeof(buf)));
}

void out_us(struct out *o, const char *key, const char *fmt, uint64_t us)
{
	char buf[32];

	if (o->json)
		out_u64(o, key, NULL, us);
	else if (fmt)
		fprintf(o->f, fmt, fmt_us(us, buf, sizeof(buf)));
}

void out_domain(struct out *o, const char *key, const char *fmt,
		uint32_t id, const char *name)
{
	char buf[16];

	if (o->json) {
		out_obj_open(o, key);
		out_u64(o, "id", NULL, id);
		out_str(o, "name", NULL, name ? name : "");
		out_obj_close(o);
		return;
	}
	if (!fmt)
		return;
	if (!name || !name[0]) {
		snprintf(buf, sizeof(buf), "%u", id);
		name = buf;
	}
	fprintf(o->f, fmt, name);
}

const char *gpu_short(const char *gpu, size_t width, char *buf, size_t len)
{
	size_t n = strcspn(gpu, ",; \t");
	bool more = gpu[n] && gpu[n + strspn(gpu + n, ",; \t")];

	if (!n) {
		snprintf(buf, len, "-");
		return buf;
	}
	if (width < 4)
		width = 4;
	if (n + more > width)
		snprintf(buf, len, "%.*s...", (int)(width - 3), gpu);
	else
		snprintf(buf, len, "%.*s%s", (int)n, gpu, more ? "+" : "");
	return buf;
}

void reason_lower(uint32_t reason, char *buf, size_t len)
{
	const char *r = gs_reason_name(reason);
	size_t i;

	for (i = 0; r[i] && i < len - 1; i++)
		buf[i] = (char)tolower((unsigned char)r[i]);
	buf[i] = '\0';
}
