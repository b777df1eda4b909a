/* SPDX-License-Identifier: GPL-2.0 */
/*
 * One output layer for text and --json, in the manner of iproute2's
 * lib/json_print.c: every value is printed once, with a JSON key and a
 * text format; in text mode the format is used (the key is not), in JSON
 * mode the key is (the format is not). Objects and arrays nest; commas are
 * placed by the layer. Text-only decoration goes through out_text().
 */
#ifndef GPUSLEEPCTL_OUTPUT_H
#define GPUSLEEPCTL_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/gpusleep.h>

#define OUT_DEPTH	8

struct out {
	FILE *f;
	bool json;
	int depth;
	bool first[OUT_DEPTH];	/* nothing printed yet at this depth */
};

void out_init(struct out *o, FILE *f, bool json);

/* key: NULL inside an array or at the top. No text output. */
void out_obj_open(struct out *o, const char *key);
void out_obj_close(struct out *o);
void out_arr_open(struct out *o, const char *key);
void out_arr_close(struct out *o);

/* fmt: a printf format for the text mode with one conversion (%s, %llu). */
void out_str(struct out *o, const char *key, const char *fmt, const char *v);
void out_u64(struct out *o, const char *key, const char *fmt, uint64_t v);
void out_s64(struct out *o, const char *key, const char *fmt, int64_t v);
/* text: yes/no through fmt's %s; JSON: true/false */
void out_bool(struct out *o, const char *key, const char *fmt, bool v);
/* JSON null; text: fmt with "never" (or what fmt says) */
void out_null(struct out *o, const char *key, const char *fmt);
/* "weights,kv_cache": a JSON array of strings; text: the list or "-" */
void out_tags(struct out *o, const char *key, const char *fmt, const char *list);
/* tags: bits of decl's tags (the domain's; NULL: the default ones) */
void out_tag_bits(struct out *o, const struct gpusleep_tags *decl,
		  const char *key, const char *fmt, uint32_t tags);

/* Text mode only. */
void out_text(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* End of a record: "\n" in both modes at depth 0 (JSON lines). */
void out_end_line(struct out *o);

/* A JSON string literal (quotes and escapes) on f. */
void json_str(FILE *f, const char *s);

#endif
