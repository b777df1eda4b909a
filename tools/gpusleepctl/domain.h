/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleepctl: a domain as sysfs shows it (/sys/class/gpusleep/domainN/).
 *
 * GS_DOMAIN_FIELDS is the one list of the per-domain sysfs files. Each line
 * declares the member of struct domain, how it is read and shown (status
 * text and --json) and, when it has one, its Prometheus metric; list,
 * status, metrics and the exporter all walk it. A new sysfs file is one new
 * line here (F_OPT if older modules lack it).
 *
 * X(member, kind, flags, json group, json key, status text format,
 *   companion (US: its counter; RES: its source), metric, metric label,
 *   metric type, help)
 *
 * kinds:  STR   a string               U64   a number
 *         BOOL  0 or 1                 TAGS  "weights,kv_cache" or empty
 *         TAGU64 one number per declared tag, "4096,0", in the order
 *               of the domain's "tags" (JSON: an object by tag name)
 *         OP    an operation id, 0 none
 *         US    a duration in us; "never" (JSON null, no sample) while
 *               the companion counter and the value are both 0
 *         STATE the state name (metric: one sample per state, 1 for it)
 *         RES   bytes whose companion STR field says whose view they
 *               are (metric label source="..."; no sample while it is
 *               "unknown": nothing reported)
 * flags:  F_LIST in `list --json`; F_OPT the file may be absent;
 *         F_BYTES its numbers are bytes (text: 14.0 GiB, -p raw)
 * metric: NULL for none. BOOL, OP and TAGS samples are 0/1 (TAGS: one per
 *         declared tag, label tag="..."); TAGU64 one per declared tag,
 *         label tag="..."; US in seconds. Fields that share a metric
 *         name give one sample each, told apart by the metric label.
 */
#ifndef GPUSLEEPCTL_DOMAIN_H
#define GPUSLEEPCTL_DOMAIN_H

#include <stddef.h>
#include <stdint.h>

#include <linux/gpusleep.h>

#define F_LIST	0x1
#define F_OPT	0x2
#define F_BYTES	0x4

#define GS_DOMAIN_FIELDS(X) \
X(name, STR, F_LIST, NULL, "name", NULL, NONE, NULL, NULL, NULL, NULL) \
X(gpu, STR, F_LIST, NULL, "gpu", "\tgpu %s", NONE, NULL, NULL, NULL, NULL) \
X(tags, TAGS, F_LIST, NULL, "tags", "  tags %s", NONE, NULL, NULL, NULL, NULL) \
X(tag_kinds, TAGS, 0, NULL, "tag_kinds", " (%s)", NONE, NULL, NULL, NULL, NULL) \
X(group, STR, F_LIST | F_OPT, NULL, "group", "  group %s", NONE, NULL, NULL, NULL, NULL) \
X(group_id, U64, F_LIST | F_OPT, NULL, "group_id", NULL, NONE, NULL, NULL, NULL, NULL) \
X(owner_uid, U64, 0, NULL, "owner_uid", "  owner uid %llu", NONE, NULL, NULL, NULL, NULL) \
X(owner_pid, U64, 0, NULL, "owner_pid", " pid %llu\n", NONE, NULL, NULL, NULL, NULL) \
X(state, STATE, F_LIST, NULL, "state", "\tstate %s", NONE, "gpusleep_domain_state", NULL, "gauge", "1 for the domain's current state, 0 for the others.") \
X(released_tags, TAGS, F_LIST, NULL, "released_tags", "  released %s", NONE, "gpusleep_tag_released", NULL, "gauge", "1 if the tag's memory is released.") \
X(unconfirmed_tags, TAGS, F_OPT, NULL, "unconfirmed_tags", "  unconfirmed %s", NONE, "gpusleep_tag_unconfirmed", NULL, "gauge", "1 while the tag's unmap is unconfirmed (it counts released; a resume remaps it).") \
X(shortfall_tags, TAGS, F_OPT, NULL, "shortfall_tags", "  short of free %s", NONE, "gpusleep_tag_shortfall", NULL, "gauge", "1 while a released tag's memory did not all come free, as the agent measured it.") \
X(drain_pending, BOOL, 0, NULL, "drain_pending", "  drain pending %s\n", NONE, "gpusleep_drain_pending", NULL, "gauge", "1 while a release waits for the engine to drain.") \
X(agent_attached, BOOL, F_LIST, NULL, "agent_attached", "\tagent attached %s", NONE, "gpusleep_agent_attached", NULL, "gauge", "1 if an agent is attached (without one, nothing can be released).") \
X(kv_release_allowed, BOOL, 0, NULL, "kv_release_allowed", "  kv release allowed %s", NONE, "gpusleep_kv_release_allowed", NULL, "gauge", "1 if the engine allows its KV cache to be released.") \
X(op_in_flight, OP, F_LIST, NULL, "op_in_flight", "  op in flight %s\n", NONE, "gpusleep_operation_in_flight", NULL, "gauge", "1 while a release or resume is running.") \
X(releases, U64, 0, "counters", "releases", "\treleases %llu", NONE, "gpusleep_releases_total", NULL, "counter", "Release operations that succeeded.") \
X(resumes, U64, 0, "counters", "resumes", "  resumes %llu", NONE, "gpusleep_resumes_total", NULL, "counter", "Resume operations that succeeded.") \
X(failures, U64, 0, "counters", "failures", "  failures %llu", NONE, "gpusleep_failures_total", NULL, "counter", "Operations that failed, for any reason.") \
X(cancels, U64, 0, "counters", "cancels", "  cancels %llu", NONE, "gpusleep_cancels_total", NULL, "counter", "Releases cancelled by a resume before they drained.") \
X(timeouts, U64, 0, "counters", "timeouts", "  timeouts %llu", NONE, "gpusleep_timeouts_total", NULL, "counter", "Operations failed by a step timeout.") \
X(shortfalls, U64, F_OPT, "counters", "shortfalls", "  shortfalls %llu\n", NONE, "gpusleep_shortfalls_total", NULL, "counter", "Pauses whose memory did not all come free.") \
X(last_error, STR, 0, NULL, "last_error", "\tlast error %s", NONE, NULL, NULL, NULL, NULL) \
X(last_release_us, US, 0, NULL, "last_release_us", "  last release %s", releases, "gpusleep_last_release_duration_seconds", NULL, "gauge", "Duration of the newest finished release; no sample if there was none.") \
X(last_resume_us, US, 0, NULL, "last_resume_us", "  last resume %s\n", resumes, "gpusleep_last_resume_duration_seconds", NULL, "gauge", "Duration of the newest finished resume; no sample if there was none.") \
X(tag_bytes_released, TAGU64, F_LIST | F_BYTES, NULL, "bytes", "\tmemory released: %s\n", NONE, "gpusleep_released_bytes", NULL, "gauge", "Bytes the agent reported released, per tag.") \
X(tag_freed_bytes, TAGU64, F_BYTES, NULL, "freed_bytes", "\tmemory seen freed: %s\n", NONE, "gpusleep_freed_bytes", NULL, "gauge", "Device memory the agent saw come free when it released the tag (0: not measured).") \
X(tag_generations, TAGU64, 0, NULL, "generation", "\tgenerations: %s\n", NONE, "gpusleep_tag_generation_total", NULL, "counter", "Times the memory behind the tag was replaced (its backing generation): buffers registered with NCCL or RDMA before the newest must be registered again.") \
X(resident_bytes, RES, F_LIST | F_OPT | F_BYTES, "resident", "bytes", "\tresident %s", resident_source, "gpusleep_resident_bytes", NULL, "gauge", "Device memory the engine's process still held after its newest pause, as its driver sees it: source process (NVML, its own) or device (cuMemGetInfo, every process on the GPU); no sample when not reported or nothing is released.") \
X(resident_source, STR, F_LIST | F_OPT, "resident", "source", " (%s)\n", NONE, NULL, NULL, NULL, NULL)

#define GS_STR_LEN	GPUSLEEP_GPU_LEN

enum field_kind { K_STR, K_U64, K_BOOL, K_TAGS, K_TAGU64, K_OP, K_US,
		  K_STATE, K_RES };

typedef char fv_STR[GS_STR_LEN];
typedef char fv_TAGS[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];
typedef char fv_TAGU64[GPUSLEEP_MAX_TAGS * 21 + 8];
typedef char fv_STATE[16];
typedef uint64_t fv_U64, fv_BOOL, fv_OP, fv_US, fv_RES;

enum field_id {
#define X(m, ...) FLD_##m,
	GS_DOMAIN_FIELDS(X)
#undef X
	FLD_COUNT
};

struct domain {
	uint32_t id;
	uint64_t present;		/* 1 << FLD_x: the file was read */
	char none_;			/* the companion of fields without one */
#define X(m, k, ...) fv_##k m;
	GS_DOMAIN_FIELDS(X)
#undef X
};

struct field {
	const char *name;		/* the sysfs file */
	enum field_kind kind;
	unsigned int flags;
	const char *jgroup, *jkey, *text;
	size_t off, aux_off;		/* aux: the companion counter, or 0 */
	const char *metric, *mlabel, *mtype, *help;
};

extern const struct field domain_fields[FLD_COUNT];

#define FIELD_PTR(d, f)	((char *)(d) + (f)->off)
#define FIELD_U64(d, f)	(*(const uint64_t *)((const char *)(d) + (f)->off))

/* Load domain id from sysfs. -ENOENT when it is gone (or never was). */
int domain_load(uint32_t id, struct domain *d);
/* The ids of the domains in sysfs, sorted; *n their count. -errno. */
int domain_ids(uint32_t **ids, size_t *n);
/* domain_ids() for a command: 0, or the exit status after saying why. */
int all_domain_ids(uint32_t **ids, size_t *n);
/* Load every domain: *ds (free it), *n. 0 or -errno (-ENOENT: no module). */
int domain_load_all(struct domain **ds, size_t *n);
/* domain_load_all() for a command: 0, or the exit status after saying why. */
int all_domains(struct domain **ds, size_t *n);
/* The module is not loaded: say so, return EX_NOTFOUND. */
int no_module(void);
/* DOMAIN (an id or a name) -> id; 0, or an exit status after saying why. */
int resolve(const char *arg, uint32_t *id);

/* Domain id's name from sysfs into buf ("" when it is gone). */
void domain_name(uint32_t id, char *buf, size_t len);

/* The bytes the agent reported for the tags released now. */
uint64_t domain_released_bytes(const struct domain *d);

/* A field never happened: US with both value and companion 0. */
int field_never(const struct domain *d, const struct field *f);

/* Is tag in the comma list? */
int has_tag(const char *list, const char *tag);
/*
 * The i-th entry of a comma list into buf (size len): 0, or -ENOENT past
 * its end.
 */
int list_item(const char *list, size_t i, char *buf, size_t len);

extern const char *const state_names[];
extern const size_t n_state_names;

#endif
