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
 * kinds:  STR   a string               U64   a number (F_BYTES: a size)
 *         S64   a signed number        BOOL  0 or 1
 *         TAGS  "weights,kv_cache" or empty
 *         TAGSTR one word per declared tag, "backup,discard" (JSON: an
 *               object by tag name; metric: one sample per tag, value 1,
 *               the word in the metric label)
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

#include <stdbool.h>
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
X(resident_source, STR, F_LIST | F_OPT, "resident", "source", " (%s)\n", NONE, NULL, NULL, NULL, NULL) \
X(priority, S64, F_LIST | F_OPT, "tenant", "priority", "\ttenant: priority %lld", NONE, "gpusleep_tenant_priority", NULL, "gauge", "The tenant's priority (docs/arbiter.md): a reclaim takes from lower priorities first.") \
X(yieldable, BOOL, F_LIST | F_OPT, "tenant", "yieldable", "  yieldable %s", NONE, "gpusleep_tenant_yieldable", NULL, "gauge", "1 if users other than the domain's owner may reclaim it.") \
X(gpu_uuid, STR, F_LIST | F_OPT, "tenant", "gpu_uuid", "  gpu %s\n", NONE, NULL, NULL, NULL, NULL) \
X(lease_id, OP, F_LIST | F_OPT, "tenant", "lease_id", "\tlease %s", NONE, "gpusleep_domain_leased", NULL, "gauge", "1 while a lease holds some of the domain's tags.") \
X(leased_tags, TAGS, F_OPT, "tenant", "leased_tags", " (%s)", NONE, "gpusleep_tag_leased", NULL, "gauge", "1 while a lease holds the tag: a resume by anyone else is refused until the lease ends.") \
X(host_bytes, U64, F_OPT | F_BYTES, "tenant", "host_charged_bytes", "  host charged %s\n", NONE, "gpusleep_host_charged_bytes", NULL, "gauge", "Host RAM the node's host budget counts for the domain (its backups and kept staging).") \
X(tag_policy, TAGSTR, F_OPT, NULL, "policy", "\tpolicy: %s\n", NONE, "gpusleep_tag_policy", "policy", "gauge", "1 for the tag's release policy as its agent reports it: backup (copied to host RAM first) or discard.") \
X(tag_content, TAGSTR, F_OPT, NULL, "content", "\tcontent after resume: %s\n", NONE, "gpusleep_tag_content", "content", "gauge", "1 for what the tag holds after its next resume: kept (restored from its backup), zeroed or undefined.") \
X(tag_verified, TAGU64, F_OPT, NULL, "verified", "\tverified: %s\n", NONE, "gpusleep_tag_verified", NULL, "gauge", "1 if the tag's backup is checksummed when taken and checked at restore (a mismatch fails the resume).") \
X(tag_size_bytes, TAGU64, F_OPT | F_BYTES, NULL, "size_bytes", "\tsize: %s\n", NONE, "gpusleep_tag_size_bytes", NULL, "gauge", "The tag's device memory, mapped or not, as its agent reports it.") \
X(tag_mapped_bytes, TAGU64, F_OPT | F_BYTES, NULL, "mapped_bytes", "\tmapped now: %s\n", NONE, "gpusleep_tag_mapped_bytes", NULL, "gauge", "Of the tag's device memory, the bytes mapped now (what the tag still holds on the GPU).") \
X(tag_host_bytes, TAGU64, F_OPT | F_BYTES, NULL, "host_bytes", "\thost copy: %s\n", NONE, "gpusleep_tag_host_bytes", NULL, "gauge", "Host RAM the tag's backup and kept staging hold now.") \
X(resident_torch_bytes, U64, F_OPT | F_BYTES, NULL, "resident_torch_bytes", NULL, NONE, "gpusleep_resident_torch_bytes", NULL, "gauge", "PyTorch's reserved memory outside the domain's regions, as its agent reports it (0: unknown).") \
X(resident_graph_bytes, U64, F_OPT | F_BYTES, NULL, "resident_graph_bytes", NULL, NONE, "gpusleep_resident_graph_bytes", NULL, "gauge", "CUDA graph pools outside the domain's regions, as its agent reports it (0: unknown).") \
X(resident_process_bytes, RES, F_OPT | F_BYTES, NULL, "resident_process_bytes", NULL, resident_process_source, "gpusleep_resident_process_bytes", NULL, "gauge", "The device memory the domain's process holds, all of it, as its agent's newest report says: source process (NVML) or device (every process on the GPU).") \
X(resident_process_source, STR, F_OPT, NULL, "resident_process_source", NULL, NONE, NULL, NULL, NULL, NULL)

#define GS_STR_LEN	GPUSLEEP_GPU_LEN

enum field_kind { K_STR, K_U64, K_S64, K_BOOL, K_TAGS, K_TAGU64, K_TAGSTR,
		  K_OP, K_US, K_STATE, K_RES };

typedef char fv_STR[GS_STR_LEN];
typedef char fv_TAGS[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN + 8];
typedef char fv_TAGU64[GPUSLEEP_MAX_TAGS * 21 + 8];
typedef char fv_TAGSTR[GPUSLEEP_MAX_TAGS * 12 + 8];
typedef char fv_STATE[16];
typedef uint64_t fv_U64, fv_S64, fv_BOOL, fv_OP, fv_US, fv_RES;

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

/*
 * What the domain's process holds on the GPU, by class (issue 34 item 5),
 * from its agent's newest report: the tags' mapped bytes, PyTorch's
 * reserved memory outside the regions, graph pools outside them, and
 * the rest of the process (other: its whole figure less those three,
 * known only from NVML's per-process figure). false: no report.
 */
struct left {
	uint64_t tags, torch, graphs, other, process;
	bool other_known;
	const char *source;	/* "process", "device", "unknown" */
};
bool domain_left(const struct domain *d, struct left *l);

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
