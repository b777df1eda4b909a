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

/*
 * A size in bytes: JSON the number; text fmt's %s with fmt_size(). And a
 * duration in us: JSON the number; text fmt's %s with fmt_us().
 */
void out_size(struct out *o, const char *key, const char *fmt, uint64_t v);
void out_us(struct out *o, const char *key, const char *fmt, uint64_t us);
/*
 * A domain: JSON {"id":N,"name":"..."} (always both); text fmt's %s with
 * the name, or the id when it has none.
 */
void out_domain(struct out *o, const char *key, const char *fmt,
		uint32_t id, const char *name);

/*
 * Human units unless -p (opt_bytes): "14.0 GiB", "512 B"; raw "15032385536
 * bytes", or the bare number when bare. Returns buf.
 */
const char *fmt_size(uint64_t v, bool bare, char *buf, size_t len);
/* "31.2 ms", "950 us", "2.50 s"; raw (-p) "31245 us". Returns buf. */
const char *fmt_us(uint64_t us, char *buf, size_t len);
/*
 * A domain's gpu string as a table shows it: its first token (a PCI
 * address, a UUID...) cut to width with "..." when longer, "+" when more
 * tokens follow; "-" when empty. Returns buf.
 */
const char *gpu_short(const char *gpu, size_t width, char *buf, size_t len);
/* A reason in lower case ("already_released"), as sysfs spells them. */
void reason_lower(uint32_t reason, char *buf, size_t len);

/* JSON only: "key": and a number printed with fmt (e.g. "%lld.%06ld"). */
void json_key_num(struct out *o, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Text mode only. */
void out_text(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* End of a record: "\n" in both modes at depth 0 (JSON lines). */
void out_end_line(struct out *o);

/* A JSON string literal (quotes and escapes) on f. */
void json_str(FILE *f, const char *s);

#endif
