/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bench/bench.h: timing, medians and JSON output shared by the benchmarks.
 *
 * Every figure a benchmark reports is a ratio of two medians measured in the
 * same run (gpusleep against a baseline), so the slowness and skew of qemu
 * TCG cancel out as far as they can. A sample is one call, one cycle or one
 * batch of calls divided by its length; subject and baseline samples are
 * taken in alternating blocks so that drift hits both.
 */
#ifndef GPUSLEEP_BENCH_H
#define GPUSLEEP_BENCH_H

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libgpusleep.h"

static inline uint64_t bn_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int bn_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static inline double bn_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), bn_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline void *bn_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p) {
		perror("bench: calloc");
		exit(1);
	}
	return p;
}

__attribute__((noreturn, format(printf, 1, 2)))
static inline void bn_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* Die on a -errno result. */
static inline int bn_ck(int ret, const char *what)
{
	if (ret < 0)
		bn_die("%s: %s", what, strerror(-ret));
	return ret;
}

/*
 * One JSON object per benchmark, one per line, on stdout:
 *   {"id":"1a","name":...,"env":...,"ratio":R,"target":T,"met":B,
 *    "target_kind":"max"|"min","medians_ns":{...},"sizes":{...},"note":...}
 * Build it with bn_json_begin, then bn_json_median / bn_json_size calls
 * (each section opened by the first call), then bn_json_end.
 */
struct bn_json {
	char buf[8192];
	size_t len;
	int section;	/* 0 none, 1 medians, 2 sizes, 3 extra */
	int first;
};

__attribute__((format(printf, 2, 3)))
static inline void bn_json_put(struct bn_json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(j->buf) - j->len)
		bn_die("json record too long");
	j->len += (size_t)n;
}

static inline const char *bn_env(void)
{
	if (getenv("BENCH_ENV"))	/* bench_model: "model" */
		return getenv("BENCH_ENV");
	return getenv("GPUSLEEP_VM") ? "vm-tcg" : "native";
}

/*
 * ratio = subject / baseline (a time ratio: lower is better for gpusleep).
 * target_kind "max": met when ratio <= target; "min": met when
 * ratio >= target (used for "at least N times faster", stated as a
 * speedup = baseline / subject).
 */
static inline void bn_json_begin(struct bn_json *j, const char *id,
				 const char *name, double ratio, double target,
				 const char *kind)
{
	int met = kind[1] == 'a' ? ratio <= target : ratio >= target;

	j->len = 0;
	j->section = 0;
	bn_json_put(j, "{\"id\":\"%s\",\"name\":\"%s\",\"env\":\"%s\","
		    "\"ratio\":%.4f,\"target\":%.3f,\"target_kind\":\"%s\","
		    "\"met\":%s", id, name, bn_env(), ratio, target, kind,
		    met ? "true" : "false");
}

static inline void bn_json_section(struct bn_json *j, int s, const char *name)
{
	if (j->section != s) {
		if (j->section)
			bn_json_put(j, "}");
		bn_json_put(j, ",\"%s\":{", name);
		j->section = s;
		j->first = 1;
	}
	if (!j->first)
		bn_json_put(j, ",");
	j->first = 0;
}

static inline void bn_json_median(struct bn_json *j, const char *k, double ns)
{
	bn_json_section(j, 1, "medians_ns");
	bn_json_put(j, "\"%s\":%.1f", k, ns);
}

static inline void bn_json_size(struct bn_json *j, const char *k, double v)
{
	bn_json_section(j, 2, "sizes");
	bn_json_put(j, "\"%s\":%.0f", k, v);
}

static inline void bn_json_extra(struct bn_json *j, const char *k, double v)
{
	bn_json_section(j, 3, "extra");
	bn_json_put(j, "\"%s\":%.4f", k, v);
}

static inline void bn_json_end(struct bn_json *j, const char *note)
{
	if (j->section)
		bn_json_put(j, "}");
	bn_json_put(j, ",\"note\":\"%s\"}\n", note ? note : "");
	fputs(j->buf, stdout);
	fflush(stdout);
}

/*
 * Context switches of the whole machine so far (/proc/stat "ctxt"), or 0
 * when unreadable: the difference over a block of cycles, divided by the
 * cycles, is the switches one cycle costs (the guest runs nothing else).
 */
static inline unsigned long long bn_ctxt(void)
{
	unsigned long long v = 0;
	char line[256];
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "ctxt %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Repetition counts scale with BENCH_SCALE (default 1; "make bench
 * BENCH_SCALE=0.2" for a quick run). At least min. */
static inline unsigned int bn_reps(unsigned int n, unsigned int min)
{
	const char *s = getenv("BENCH_SCALE");
	double f = s ? atof(s) : 1.0;
	unsigned int r = (unsigned int)(n * (f > 0 ? f : 1.0));

	return r < min ? min : r;
}

/*
 * An engine's loop: dispatch its records until quit_r is readable (or hung
 * up). 0, or -1 when dispatching failed.
 */
static inline int bn_engine_serve(struct gs_engine *e, int quit_r)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = gs_engine_fd(e), .events = POLLIN },
			{ .fd = quit_r, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents)
			return 0;
		if (gs_engine_dispatch(e) < 0)
			return -1;
	}
}

#endif /* GPUSLEEP_BENCH_H */
