/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libgpusleep: userspace side of /dev/gpusleep.
 *
 * Four layers, each usable alone (docs/libgpusleep.md):
 *   gs_*          thin wrappers over the uAPI (uapi/linux/gpusleep.h)
 *   gs_engine_*   the engine's side: callbacks for drain, cache reset,
 *                 KV repair, scheduling; a pollable fd and a dispatch call
 *   gs_mm_*       memory manager: tagged allocations on reserved virtual
 *                 ranges, so pointers stay valid across release/resume
 *   gs_agent_*    the agent: serves PAUSE_TAG/RESUME_TAG with a gs_mm, on
 *                 its own io_uring thread or from the caller's loop
 *
 * Conventions: functions returning int return 0 (or a count, or an fd) on
 * success and -errno on failure; errno is not relied upon. Functions
 * returning a pointer return NULL and set errno. Tags are the uAPI bits of
 * the domain's declaration (by default GPUSLEEP_TAG_WEIGHTS and
 * GPUSLEEP_TAG_KV_CACHE; gs_get_tags() and gs_tags_parse_in() for others).
 */
#ifndef LIBGPUSLEEP_H
#define LIBGPUSLEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/gpusleep.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GS_DEVICE_PATH	"/dev/gpusleep"

/* ------------------------------------------------------------------ */
/* uAPI wrappers                                                       */

/*
 * Open the device (path NULL = GS_DEVICE_PATH) O_RDWR|O_CLOEXEC and do the
 * API handshake asking for the features in need. api (may be NULL)
 * receives the handshake's answer. Returns the device fd or -errno
 * (-EINVAL: API version or a needed feature missing).
 */
int gs_open(const char *path, uint64_t need, struct gpusleep_api *api);

/* Create a domain; returns the engine fd, *id (may be NULL) its id. */
int gs_create_domain(int devfd, const char *name, const char *gpu,
		     uint32_t caps, uint32_t flags, uint32_t *id);
/*
 * The same, declaring the domain's tags: nr_tags entries of tags, in order
 * (tag i is bit i); nr_tags 0 = the default declaration (weights,
 * kv_cache). -EINVAL for a bad declaration (docs/uapi.md).
 */
int gs_create_domain_tags(int devfd, const char *name, const char *gpu,
			  uint32_t caps, uint32_t flags,
			  const struct gpusleep_tag *tags,
			  unsigned int nr_tags, uint32_t *id);
/* A domain's declaration (any role's fd), with each tag's generation. */
int gs_get_tags(int fd, struct gpusleep_tags *tags);

/*
 * Attach to domain id as GPUSLEEP_ROLE_AGENT or _CONTROLLER; returns an fd.
 * -EPERM unless the caller has the owner's euid in the creator's user and
 * pid namespaces (and, for the agent, is the creating process) or
 * CAP_SYS_ADMIN: others get their fd from gs_grant().
 */
int gs_attach(int devfd, uint32_t id, uint32_t role);

/*
 * From the engine's process: an fd of role (AGENT or CONTROLLER) for its
 * domain, to pass over a UNIX socket (SCM_RIGHTS) to a process that may
 * not attach by id (another container, another pid namespace, an agent
 * process of its own). Returns the fd or -errno.
 */
int gs_grant(int engine_fd, uint32_t role);

/*
 * Release / resume. tags 0 = the default (release all / resume what is
 * released); flags GPUSLEEP_OPF_*; timeout_ms 0 = module defaults. out
 * (may be NULL) receives reason, bad_tags and op_id on success and on
 * failure alike. Returns 0 or -errno (the operation's or the refusal's).
 * A blocking call interrupted by a signal (a stop signal too) returns
 * -EINTR with out->op_id set: the operation goes on, gs_wait() for it.
 */
int gs_release(int fd, uint32_t tags, uint32_t flags, uint32_t timeout_ms,
	       struct gpusleep_op *out);
int gs_resume(int fd, uint32_t tags, uint32_t flags, uint32_t timeout_ms,
	      struct gpusleep_op *out);

/* 1 if some tag is released, 0 if not, -errno. */
int gs_is_sleeping(int fd);
int gs_get_state(int fd, struct gpusleep_state *st);

/*
 * Wait for operation op_id (0 = newest), timeout_ms 0 = forever. Returns 0
 * with *res filled (the operation's own outcome is res->error, -EOWNERDEAD
 * if the engine died), or -errno (-ETIMEDOUT, -ENOENT, -EINTR). After
 * -EINTR (a signal handler ran; with a timeout or op_id 0, a stop signal
 * too), res->op_id is the operation it waited for (op_id 0 resolved):
 * wait again for that id with what is left of your deadline to go on; a
 * new call with op_id 0 waits for the newest then. A wait for a named
 * op_id without a timeout is restarted by the kernel.
 */
int gs_wait(int fd, uint64_t op_id, uint32_t timeout_ms,
	    struct gpusleep_result *res);

/* Register (events != 0), update or remove (events 0) an eventfd; efd -1
 * removes all of this fd's registrations. */
int gs_eventfd(int fd, int efd, uint32_t events);

/* Read one record: 1 = read, 0 = end of file (domain dead), -errno
 * (-EAGAIN on a non-blocking fd with nothing queued). */
int gs_read_event(int fd, struct gpusleep_event *ev);

/* Answer the step of ev with status (0 or -errno) and bytes. */
int gs_complete(int fd, const struct gpusleep_event *ev, int status,
		uint64_t bytes);
/*
 * The agent's answer to PAUSE_TAG/RESUME_TAG with what it measured:
 * freed_bytes the driver saw come free (flags GPUSLEEP_CF_MEASURED, and
 * GPUSLEEP_CF_SHORTFALL when less than bytes), lost_bytes of contents a
 * failed pause lost (kv_cache then needs its repair).
 */
int gs_complete_tag(int fd, const struct gpusleep_event *ev, int status,
		    uint64_t bytes, uint64_t freed_bytes, uint64_t lost_bytes,
		    uint32_t flags);
/*
 * Any answer, filled by the caller (a PAUSE_TAG's resident_bytes and
 * resident_source too); op_id, step and type are set from ev.
 */
int gs_complete_ex(int fd, const struct gpusleep_event *ev,
		   struct gpusleep_complete *c);

/* ------------------------------------------------------------------ */
/* Groups (docs/groups.md): the ranks of one engine as one operation   */

/* Create a group named name; the group fd (O_CLOEXEC) or -errno. */
int gs_group_create(int devfd, const char *name, uint32_t *id);
/* Another fd for the live group named name (-ENOENT, -EPERM). */
int gs_group_open(int devfd, const char *name, uint32_t *id);
/* Add the domain of an engine or controller fd as the next rank. */
int gs_group_add(int gfd, int domain_fd, uint32_t *rank);
/*
 * Release / resume every rank as one operation, all or nothing (as
 * gs_release()). out (may be NULL) names the rank that refused or failed
 * (out->rank, out->domain, out->reason). A blocking call interrupted by a
 * signal returns -EINTR with out->op_id set: the operation goes on, and
 * gs_group_wait() picks it up.
 */
int gs_group_release(int gfd, uint32_t tags, uint32_t flags,
		     uint32_t timeout_ms, struct gpusleep_group_op *out);
int gs_group_resume(int gfd, uint32_t tags, uint32_t flags,
		    uint32_t timeout_ms, struct gpusleep_group_op *out);
/*
 * Wait for group operation op_id (0 = newest), timeout_ms 0 = forever;
 * *res and, when ranks is given, up to *nr_ranks entries of the per-rank
 * breakdown (*nr_ranks set to the number written). After -EINTR,
 * res->op_id is the operation it waited for, as for gs_wait().
 */
int gs_group_wait(int gfd, uint64_t op_id, uint32_t timeout_ms,
		  struct gpusleep_group_result *res,
		  struct gpusleep_group_rank *ranks, uint32_t *nr_ranks);
/* Signal efd when a group operation finishes; efd -1 removes it. */
int gs_group_eventfd(int gfd, int efd);

/* ------------------------------------------------------------------ */
/* Tenants, reclaims and leases (docs/arbiter.md; GPUSLEEP_FEAT_TENANTS) */

/*
 * The tenant's own statement, from its engine fd: priority in
 * [GPUSLEEP_PRIO_MIN, GPUSLEEP_PRIO_MAX] (lower yields first; above 0 and
 * above its current value needs CAP_SYS_NICE: -EPERM), flags
 * GPUSLEEP_TENF_* (YIELDABLE: other users may reclaim it).
 */
int gs_set_tenant(int engine_fd, int32_t priority, uint32_t flags);
/* Any domain fd: its statement, its lease, the agent's newest report. */
int gs_get_tenant(int fd, struct gpusleep_tenant *t);
/* Agent fd: what the agent knows of its tags and its process (whole). */
int gs_report(int agent_fd, const struct gpusleep_report *r);

/*
 * Take bytes of device memory on the GPU uuid (16 bytes, as the tenants'
 * reports name it: gs_gpu_uuid_parse) at priority, within timeout_ms (0:
 * the module's reclaim_timeout_ms), flags GPUSLEEP_RECLAIMF_*. out (may
 * be NULL) receives the whole answer (op_id, state, taken_bytes, reason,
 * why, lease_id); victims (may be NULL) up to *nr_victims entries, and
 * *nr_victims is set to the number written. Returns 0, with
 * GPUSLEEP_RECLAIMF_LEASE the lease fd (O_CLOEXEC: close it, or
 * gs_lease_return(), to give back what was taken), or -errno: -ENOSPC
 * short of bytes (out->why says what kept it short; nothing is kept
 * unless PARTIAL), -EINTR interrupted (out->op_id written, the reclaim
 * goes on: gs_reclaim_wait; with LEASE, out->lease_fd is the lease, which
 * the caller then owns), -EPERM priority > 0 without CAP_SYS_NICE.
 */
int gs_reclaim(int devfd, const uint8_t uuid[16], uint64_t bytes,
	       int32_t priority, uint32_t flags, uint32_t timeout_ms,
	       struct gpusleep_reclaim *out,
	       struct gpusleep_reclaim_victim *victims, uint32_t *nr_victims);
/* The same with GPUSLEEP_RECLAIMF_LEASE: the lease fd or -errno. */
int gs_acquire(int devfd, const uint8_t uuid[16], uint64_t bytes,
	       int32_t priority, uint32_t timeout_ms,
	       struct gpusleep_reclaim *out);
/*
 * Wait for reclaim op_id (0: the caller's newest), timeout_ms 0: forever;
 * out and victims as gs_reclaim. -EINTR: out->op_id is the reclaim it
 * waited for (wait again for it).
 */
int gs_reclaim_wait(int devfd, uint64_t op_id, uint32_t timeout_ms,
		    struct gpusleep_reclaim *out,
		    struct gpusleep_reclaim_victim *victims,
		    uint32_t *nr_victims);
/* A lease fd: what it holds (victims as gs_reclaim). */
int gs_lease_info(int lease_fd, struct gpusleep_lease *out,
		  struct gpusleep_reclaim_victim *victims,
		  uint32_t *nr_victims);
/*
 * Give a lease back now (its close does too): every domain it took is
 * resumed. Returns how many were left released (0: all awake), or
 * -errno (-EINTR: the return goes on; poll the lease fd, EPOLLIN once
 * returned). nonblock: start it and return at once (0).
 */
int gs_lease_return(int lease_fd, bool nonblock);

/*
 * GPU ids. gs_gpu_uuid_parse: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
 * (nvidia-smi -L's, CUDA's), "MIG-..." (a MIG instance's), 32 hex digits,
 * or "host" / "host:N": the host backend's stand-in for device N (what
 * its agents report, the same for every process of the node). -EINVAL
 * otherwise. gs_gpu_uuid_format: "GPU-..." (the length, or -ENOSPC;
 * buf of GS_GPU_UUID_LEN). gs_host_gpu_uuid: the stand-in (from
 * /etc/machine-id, else the boot id; a version-8 UUID).
 */
#define GS_GPU_UUID_LEN	41
int gs_gpu_uuid_parse(const char *s, uint8_t uuid[16]);
int gs_gpu_uuid_format(const uint8_t uuid[16], char *buf, size_t len);
int gs_host_gpu_uuid(unsigned int index, uint8_t uuid[16]);
/*
 * CUDA device ordinal's UUID (libpath NULL: libcuda.so.1), no context
 * made: -ENOENT no driver, -ENODEV no such device, -ENOSYS built with
 * CUDA=0.
 */
int gs_cuda_device_uuid(int device, const char *libpath, uint8_t uuid[16]);

/* ------------------------------------------------------------------ */
/* Names and strings                                                   */

/* "no agent attached (memory saver not enabled)"...; never NULL. */
const char *gs_reason_str(uint32_t reason);
/* "NOT_ENABLED"...; never NULL ("UNKNOWN" past the table). */
const char *gs_reason_name(uint32_t reason);
/* The errno a reason stands for (ENOTCONN...), 0 for NONE and for the two
 * reasons whose errno comes from the engine or agent; -1 if unknown. */
int gs_reason_errno(uint32_t reason);
const char *gs_state_name(uint32_t state);	/* "awake", "draining"... */
const char *gs_event_name(uint32_t type);	/* "drain", "pause_tag"... */
/* Names of GPUSLEEP_LEASE_*, GPUSLEEP_CONTENT_*, GPUSLEEP_POLICY_*. */
const char *gs_lease_state_name(uint32_t state);	/* "held"... */
const char *gs_content_name(uint32_t content);	/* "kept", "zeroed"... */
const char *gs_policy_name(uint32_t policy);	/* "backup", "discard" */
/*
 * GPUSLEEP_RWHY_* bits as "no_candidate,priority,..." (unknown bits as
 * 0x...); "" for 0. The length, or -ENOSPC (whole names only).
 */
int gs_rwhy_format(uint32_t why, char *buf, size_t len);
/* One GPUSLEEP_RWHY_* bit as a sentence ("no domain left to try"). */
const char *gs_rwhy_str(uint32_t bit);
/* GPUSLEEP_RVF_* bits as "unmeasured,group,..." (as gs_rwhy_format). */
int gs_rvf_format(uint32_t flags, char *buf, size_t len);

/* The default declaration's names: one bit: "weights"; else NULL. */
const char *gs_tag_name(uint32_t tag);

/*
 * Parse "weights,kv_cache" (names separated by commas, spaces allowed
 * around them; "all" = every tag; "" = 0) into the bits of the tags decl
 * declares (gs_get_tags; NULL = the default declaration). -EINVAL on a
 * name decl lacks or an empty one (a doubled comma).
 */
int gs_tags_parse_in(const struct gpusleep_tags *decl, const char *s,
		     uint32_t *tags);
/*
 * Write the names of decl's tags in tags joined by ',' (bits decl lacks as
 * 0x..); "" for 0. Returns the length written, or -ENOSPC (buf then holds
 * the names that fit).
 */
int gs_tags_format_in(const struct gpusleep_tags *decl, uint32_t tags,
		      char *buf, size_t len);
/* The same for the default declaration. */
int gs_tags_parse(const char *s, uint32_t *tags);
int gs_tags_format(uint32_t tags, char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* Engine helper                                                       */

struct gs_engine;

/* A callback's return value meaning "I will answer with gs_engine_complete". */
#define GS_PENDING	1

/*
 * Engine callbacks; each may be NULL (answered with 0 / ignored). drain,
 * reset_caches and repair_kv return 0, -errno, or GS_PENDING; at most one
 * step is outstanding at a time, so a pending answer is simply the next
 * gs_engine_complete(). drain_cancelled means the drain was called off (a
 * resume cancelled the release, or it failed or timed out): stop draining
 * (a pending drain is dropped, the library answers nothing) but do NOT
 * schedule: scheduling stays paused until resume_sched, which is the only
 * "go" (the kernel sends it once nothing is released and KV is repaired).
 * Every record carries the kernel's level (GPUSLEEP_EVF_MAY_SCHEDULE);
 * gs_engine_sched_paused() follows it.
 */
struct gs_engine_ops {
	int (*drain)(struct gs_engine *e, void *arg, uint32_t tags,
		     bool abort_inflight);
	void (*drain_cancelled)(struct gs_engine *e, void *arg);
	int (*reset_caches)(struct gs_engine *e, void *arg);
	int (*repair_kv)(struct gs_engine *e, void *arg);
	void (*resume_sched)(struct gs_engine *e, void *arg);
};

struct gs_engine_config {
	const char *dev_path;	/* NULL = GS_DEVICE_PATH */
	const char *name;	/* domain name, not empty */
	const char *gpu;	/* NULL = "" */
	uint32_t caps;		/* GPUSLEEP_CAP_* */
	/*
	 * GPUSLEEP_CREATEF_*: 0 binds the domain to this process (the
	 * agent attaches from it; a forked child's copy does not keep it);
	 * SHARED for an engine that hands its fd to other processes.
	 */
	uint32_t flags;
	/* The tags, in order (NULL, 0: the default weights, kv_cache). */
	const struct gpusleep_tag *tags;
	unsigned int nr_tags;
};

/* Open the device, create the domain; the engine fd is non-blocking. */
int gs_engine_create(const struct gs_engine_config *cfg,
		     const struct gs_engine_ops *ops, void *arg,
		     struct gs_engine **out);
/* Wrap an existing engine fd (owned from now on; made non-blocking). */
int gs_engine_from_fd(int fd, uint32_t id, const struct gs_engine_ops *ops,
		      void *arg, struct gs_engine **out);
/* Closes the engine fd: the domain dies. */
void gs_engine_destroy(struct gs_engine *e);

int gs_engine_fd(const struct gs_engine *e);	/* poll for POLLIN */
uint32_t gs_engine_id(const struct gs_engine *e);
/*
 * The kernel's scheduling level as of the newest record read: true from
 * DRAIN until RESUME_SCHED (a DRAIN_CANCELLED leaves it true). Schedule
 * only while it is false.
 */
bool gs_engine_sched_paused(const struct gs_engine *e);
/* True while a callback answered GS_PENDING and is not yet completed. */
bool gs_engine_pending(const struct gs_engine *e);

/*
 * Backing generations: the memory behind a tag is replaced by each resume
 * (and by a failed pause that lost contents); a buffer registered with
 * NCCL or RDMA before that must be registered again.
 * gs_engine_replaced_tags(): the tags the newest RESUME_SCHED named,
 * replaced since the previous one (read it in resume_sched: register
 * those again before scheduling). gs_engine_kv_generation(): the KV cache
 * tag's generation that the newest REPAIR_KV carried (in repair_kv).
 * gs_engine_generation(): one tag's (one bit's) generation now, from the
 * module's state; 0 or -errno.
 */
uint32_t gs_engine_replaced_tags(const struct gs_engine *e);
uint64_t gs_engine_kv_generation(const struct gs_engine *e);
int gs_engine_generation(const struct gs_engine *e, uint32_t tag,
			 uint64_t *gen);

/*
 * Read every queued record and run its callback, answering COMPLETE where
 * the step needs one. Returns the number of records handled (0: none
 * queued), -EPIPE once the domain is dead (end of file), or -errno.
 */
int gs_engine_dispatch(struct gs_engine *e);
/* Answer the pending step. -ESTALE if none is pending (or it was
 * cancelled); else the COMPLETE ioctl's result. */
int gs_engine_complete(struct gs_engine *e, int status);

/* ------------------------------------------------------------------ */
/* Memory manager                                                      */

struct gs_backend;	/* user/backend.h */
struct gs_mm;

/* Backends (owned by the gs_mm they are given to). */
struct gs_backend *gs_backend_host_new(void);
struct gs_backend *gs_backend_cuda_new(int device, const char *libpath,
				       int *err);

enum gs_mm_policy {
	GS_MM_DISCARD = 0,	/* resumed memory reads as zeros */
	GS_MM_BACKUP = 1,	/* copied to host staging on pause, back on resume */
};

/* Takes ownership of b (destroyed with the mm, or here on failure). */
int gs_mm_new(struct gs_backend *b, struct gs_mm **out);
/* Frees every allocation, chunk and staging buffer, then the backend. */
void gs_mm_destroy(struct gs_mm *mm);

/*
 * Per tag: policy (default GS_MM_DISCARD) and chunk_size, the size of the
 * tag's first chunk of virtual memory (0 = 16 MiB); each later chunk doubles
 * the previous one up to 1 GiB, an allocation larger than that gets a chunk
 * of its own size, so a big tag lives in a few large chunks. Calling it
 * again keeps the growth reached (it restarts only for a tag without
 * chunks, or a larger chunk_size). Chunk sizes are rounded up to the
 * device's recommended allocation granularity (CUDA: RECOMMENDED, when
 * it is at most 1 GiB; else the minimum). -EBUSY while the tag is paused
 * or being paused. Never gives staging back (that synchronises the
 * device; a policy change may come during a graph capture): a tag set to
 * GS_MM_DISCARD keeps its pinned staging until its next pause.
 */
int gs_mm_set_policy(struct gs_mm *mm, uint32_t tag, enum gs_mm_policy p,
		     size_t chunk_size);

/* Allocate size bytes (aligned to GS_MM_ALIGN) in tag; NULL + errno
 * (EINVAL, ENOMEM, EBUSY while the tag is paused, or the backend's). */
#define GS_MM_ALIGN	512
void *gs_mm_alloc(struct gs_mm *mm, uint32_t tag, size_t size);
/*
 * The same, for work on stream (a CUstream; NULL: the legacy default
 * stream): its free is ordered on that stream (as cudaFreeAsync); work
 * on other streams must be ordered before the free. Out of device
 * memory, the empty chunks of every tag (kept mapped as a cache after
 * their frees) are given back once the work on the streams they were
 * allocated for (and the declared fence streams) is done, never with a
 * context-wide synchronisation, and the allocation is tried again; not
 * while stream is captured into a CUDA graph (ENOMEM then), and a chunk
 * whose stream is captured stays.
 * gs_mm_alloc(mm, tag, size) is gs_mm_alloc_on(mm, tag, size, NULL).
 */
void *gs_mm_alloc_on(struct gs_mm *mm, uint32_t tag, size_t size,
		     void *stream);
/* Free ptr (also allowed while its tag is paused). -EINVAL if unknown. */
int gs_mm_free(struct gs_mm *mm, void *ptr);
/*
 * The same; flags GS_MM_FREE_GIVE_BACK: the caller gives the memory back
 * to the device, as with cudaFree (PyTorch frees a pool's segment to its
 * allocator only so): a chunk the free empties is unmapped and released
 * at once, after the work queued on the streams it was allocated for (as
 * the out-of-memory reclaim), instead of staying mapped as a cache;
 * unless one of those streams is being captured into a CUDA graph (then
 * it stays, until the next pause, trim or reclaim). The torch allocator's
 * gpusleep_free() frees so.
 */
#define GS_MM_FREE_GIVE_BACK	(1U << 0)
int gs_mm_free_ex(struct gs_mm *mm, void *ptr, unsigned int flags);
/* The tag of an allocation's pointer, 0 if not ours. */
uint32_t gs_mm_tag_of(struct gs_mm *mm, const void *ptr);

/*
 * Pause: back up the tag if its policy says so, then unmap every chunk;
 * *bytes = the bytes unmapped. Resume: map every chunk again at the same
 * addresses, restore a backup; *bytes = the bytes mapped. On failure all
 * that was done is undone and -errno returned; the tag's state (see
 * gs_mm_tag_info) says where it is. -EALREADY: already paused / awake
 * (*bytes is then the tag's size).
 */
int gs_mm_pause(struct gs_mm *mm, uint32_t tag, uint64_t *bytes);
int gs_mm_resume(struct gs_mm *mm, uint32_t tag, uint64_t *bytes);

/*
 * What a pause or resume did, exactly, success or not: what the kernel's
 * state (and the KV repair / weight push that follow) must be built on.
 */
struct gs_mm_result {
	int32_t status;		/* 0 or -errno (-EALREADY: already so) */
	uint32_t flags;		/* GS_MM_RES_* */
	uint64_t bytes;		/* pause: unmapped (and given back) by this
				 * call; resume: mapped by this call */
	uint64_t unmapped_bytes; /* of the tag, not holding its contents
				 * after the call: unmapped, or mapped back
				 * and not restored (non-zero after a failed
				 * pause: the tag is partly released, resume
				 * it) */
	uint64_t lost_bytes;	/* contents lost: DISCARD chunks a failed
				 * pause had to map back fresh (zeros) or
				 * could not map back, chunks mapped back
				 * whose restore failed (until a resume) */
	uint64_t freed_bytes;	/* pause: device memory the driver saw come
				 * free (cuMemGetInfo after a synchronise) */
	uint64_t free_before;	/* cuMemGetInfo free, before and after */
	uint64_t free_after;
	uint64_t duration_ns;
	uint64_t copy_ns;	/* of which backup (pause) / restore (resume)
				 * copies, queued to synchronised (0 when
				 * nothing was copied) */
	uint64_t copied_bytes;	/* what those copies moved: the live
				 * allocations, not the chunks' slack or free
				 * blocks (a rate is copied_bytes / copy_ns;
				 * none when 0) */
	uint64_t verify_ns;	/* verification (gs_mm_set_verify): time
				 * spent taking (pause) or checking (resume)
				 * the checksums of the host copy, not
				 * counted in copy_ns */
	uint64_t verify_bytes;	/* the bytes summed */
};
#define GS_MM_RES_MEASURED	(1U << 0)	/* freed_bytes was measured (never
						 * for a tag holding nothing) */
#define GS_MM_RES_SHORTFALL	(1U << 1)	/* freed_bytes short of bytes by
						 * more than 1% or 1 MiB */
#define GS_MM_RES_PARTIAL	(1U << 2)	/* failed, tag left partly unmapped */
#define GS_MM_RES_FAULT		(1U << 3)	/* failed: the synchronisation
						 * after the unmaps saw a GPU
						 * fault (status
						 * -ENOTRECOVERABLE: the CUDA
						 * context is lost) */
#define GS_MM_RES_VERIFIED	(1U << 4)	/* pause: the backup's host copy
						 * was checksummed; resume: it
						 * was checked and matched */
#define GS_MM_RES_VERIFY_FAILED	(1U << 5)	/* resume failed (-EBADMSG):
						 * the host copy changed since
						 * its backup; nothing mapped,
						 * the tag still released, its
						 * contents lost (lost_bytes);
						 * the next resume maps those
						 * chunks fresh (zeros) */
int gs_mm_pause_ex(struct gs_mm *mm, uint32_t tag, struct gs_mm_result *res);

/*
 * Verification of backups (off by default; GPUSLEEP_VERIFY=1 in the
 * environment turns it on for every mm made after): a backup's host copy
 * is checksummed (CRC-32C in three lanes, user/csum.c) once the
 * device-to-host copies are synchronised, and checked before a resume
 * maps anything; a mismatch fails the resume with -EBADMSG and
 * GS_MM_RES_VERIFY_FAILED (the agent answers RESUME_TAG so: the module's
 * VERIFY_FAILED). It finds a host copy that changed in between (a stray
 * write, a staging reuse bug, memory corruption); not a copy that read
 * wrong device memory, nor one that wrote the device wrong on the way
 * back (docs/cuda-backend.md, Verification). Applies from the next
 * pause; a backup taken without it is restored unchecked.
 */
int gs_mm_set_verify(struct gs_mm *mm, bool on);
bool gs_mm_verify(struct gs_mm *mm);
/*
 * gs_mm_pause_ex with a deadline (CLOCK_MONOTONIC ns, 0: none): the
 * pause's waits for the GPU end before it, by a margin for the answer
 * (a tenth of the time left, 20 ms to 500 ms), or at the fence timeout
 * if that comes first: -ETIMEDOUT then, and nothing unmapped when the
 * wait was the one before the first copy or unmap. The agent passes the
 * step's deadline from its PAUSE_TAG record (gpusleep_event.deadline_ns).
 */
int gs_mm_pause_until(struct gs_mm *mm, uint32_t tag, uint64_t deadline_ns,
		      struct gs_mm_result *res);
int gs_mm_resume_ex(struct gs_mm *mm, uint32_t tag, struct gs_mm_result *res);

/*
 * What a pause waits for before its first copy and its first unmap: by
 * default (n = 0) all GPU work of the context (cuCtxSynchronize); or only
 * the work queued so far on the engine's own streams (CUstream values, an
 * event recorded on each and waited for), when other streams of the
 * process must not be waited for. The engine must then declare every
 * stream that touches the tags' memory.
 */
int gs_mm_set_fence_streams(struct gs_mm *mm, void *const *streams,
			    unsigned int n);
/*
 * How long a fence (a pause's, gs_mm_trim's, an allocation's reclaim) may
 * wait for the GPU: timeout_ms (0: no bound; default 25000, under the
 * module's default step timeout of 30 s). Past it the call fails with
 * -ETIMEDOUT and has unmapped nothing. A pause with a deadline
 * (gs_mm_pause_until: the agent passes the step's) ends its fences before
 * that deadline too, whichever comes first. The wait never holds the
 * memory manager's lock: allocations and frees go on meanwhile.
 */
int gs_mm_set_fence_timeout(struct gs_mm *mm, unsigned int timeout_ms);

/*
 * Give the empty chunks of tags (0 = all) back to the backend, after
 * waiting for the GPU's work (a free never unmaps: kernels may still use
 * the memory; empty chunks are a cache until a pause or this call).
 */
int gs_mm_trim(struct gs_mm *mm, uint32_t tags, uint64_t *bytes);

/*
 * Backup staging of a GS_MM_BACKUP tag: pinned host memory in pieces of at
 * most 256 MiB per chunk, pinned when a chunk is made or the tag becomes
 * BACKUP, reused every cycle. Flags: GS_MM_STAGING_LAZY pins only at the
 * pause (or gs_mm_pin_staging); GS_MM_STAGING_FREE_AFTER_RESUME gives it
 * back after each resume (torch_memory_saver's choice: less host memory,
 * pinning again at every pause).
 */
#define GS_MM_STAGING_LAZY		(1U << 0)
#define GS_MM_STAGING_FREE_AFTER_RESUME	(1U << 1)
int gs_mm_set_staging(struct gs_mm *mm, uint32_t tag, unsigned int flags);
/* Pin what is missing, at most max_bytes (0: all) now; *left = still to
 * pin. Call repeatedly for progress in bounded steps. */
int gs_mm_pin_staging(struct gs_mm *mm, uint32_t tag, uint64_t max_bytes,
		      uint64_t *left);
/*
 * Only what is live is staged: a piece is pinned when an allocation lands
 * in it (or at the pause), and given back at a pause when no allocation
 * is left in it; the copies skip a chunk's slack and free blocks (an
 * allocator's cache). gs_mm_set_pin_limit caps the pinned staging of all
 * tags (0: no cap, the default): past it a piece is not pinned (said on
 * stderr when ahead) and a pause that needs it fails with -ENOMEM,
 * nothing unmapped. gs_mm_pinned: pinned now, and the cap.
 */
int gs_mm_set_pin_limit(struct gs_mm *mm, uint64_t max_bytes);
/*
 * A new chunk is refused (ENOMEM, as out of device memory) when mapping
 * it would leave less than bytes of device memory free (the backend's
 * mem_info: cuMemGetInfo); 0 (the default): no margin. Allocations carved
 * from chunks already mapped, and resumes, are not checked
 * (torch_memory_saver's memory_margin_bytes).
 */
int gs_mm_set_margin(struct gs_mm *mm, uint64_t bytes);
/*
 * The host copy of [ptr, ptr + size), which must lie in one allocation,
 * while its chunk is released with a backup: *host points into the
 * staging. 0 with *host NULL: the chunk is mapped (the device memory is
 * current; there is no backup to read). -ENOENT: not an allocation of
 * mm; -ERANGE: the range leaves its allocation; -ENODATA: released
 * without a backup (GS_MM_DISCARD); -EXDEV: the copy is not contiguous
 * (it straddles two pieces of staging): read it with gs_mm_backup_read.
 * The pointer is valid until the chunk is resumed (its staging may be
 * given back then: GS_MM_STAGING_FREE_AFTER_RESUME) or freed.
 */
int gs_mm_backup_ptr(struct gs_mm *mm, const void *ptr, size_t size,
		     void **host);
/* Copy that backup into dst; the same errors, and -EAGAIN for mapped. */
int gs_mm_backup_read(struct gs_mm *mm, const void *ptr, size_t size,
		      void *dst);
/*
 * Other GPUs' access to the tags' memory. A mapping's access goes with
 * it: at a pause, the devices the driver says have access to a chunk
 * (cuMemGetAccess: whoever granted it, a collective library's
 * registration or a custom all-reduce's cuMemSetAccess included) are
 * noted, and the resume grants them the same again. devices (bit n:
 * device n; 0: none) are granted read-write access to every chunk mapped
 * now and from now on (a peer of the engine's NVLink P2P). -EOPNOTSUPP
 * on a backend without peers (host).
 */
int gs_mm_set_peer_access(struct gs_mm *mm, uint64_t devices);
void gs_mm_pinned(struct gs_mm *mm, uint64_t *bytes, uint64_t *limit);

/*
 * The device memory this process holds now, as the driver sees it (what
 * the agent reports with each pause): returns GPUSLEEP_RESIDENT_PROCESS
 * (NVML's figure for this process), GPUSLEEP_RESIDENT_DEVICE (NVML not
 * there or not listing the process: the whole device's used memory,
 * cuMemGetInfo, every process on the GPU counted), or 0 (not known, *bytes
 * 0: the host backend, which has no device).
 */
int gs_mm_resident(struct gs_mm *mm, uint64_t *bytes);

/*
 * The device's 16-byte UUID (cuDeviceGetUuid; the host backend: the
 * node's stand-in, gs_host_gpu_uuid(0)): what the agent reports and a
 * claimant names (gs_reclaim). -EOPNOTSUPP if the backend has none.
 */
int gs_mm_gpu_uuid(struct gs_mm *mm, uint8_t uuid[16]);
/*
 * A number that moves whenever what the agent reports of the tags
 * changes: a chunk made or given back, staging pinned or given back, a
 * policy or verification change, a pause or resume.
 */
uint64_t gs_mm_generation(struct gs_mm *mm);

struct gs_mm_tag_info {
	uint32_t policy;	/* enum gs_mm_policy */
	uint32_t paused;	/* 1 if some chunk is unmapped */
	uint32_t nr_chunks;
	uint32_t nr_allocs;
	uint64_t chunk_bytes;	/* virtual memory reserved by the chunks */
	uint64_t mapped_bytes;	/* of which backed by memory now */
	uint64_t used_bytes;	/* handed out by gs_mm_alloc */
	void *staging;		/* backup staging buffer, NULL if none */
	uint64_t staging_bytes;
	uint64_t pauses;	/* successful pauses */
	uint64_t resumes;	/* successful resumes */
	uint32_t lost;		/* 1 if a failed pause lost DISCARD contents,
				 * or a backup failed its verification */
	uint32_t content;	/* after the next resume (GS_MM_CONTENT_*):
				 * BACKUP: kept; DISCARD: zeroed; a paused
				 * tag whose backup failed its check or a
				 * rollback lost: zeroed */
	uint32_t verified;	/* 1: BACKUP with verification on (its
				 * next resume is checked) */
	uint32_t pad;
};
/* What a tag holds after a resume: the uAPI's GPUSLEEP_CONTENT_* values. */
#define GS_MM_CONTENT_UNDEFINED	0	/* whatever the pages hold */
#define GS_MM_CONTENT_ZEROED	1	/* zeros */
#define GS_MM_CONTENT_KEPT	2	/* what it held before the release */
int gs_mm_tag_info(struct gs_mm *mm, uint32_t tag, struct gs_mm_tag_info *info);

/* ------------------------------------------------------------------ */
/* Agent                                                               */

struct gs_agent;

/* Attach to domain id as agent (dev_path NULL = GS_DEVICE_PATH). The agent
 * uses mm but does not own it. */
int gs_agent_attach(const char *dev_path, uint32_t id, struct gs_mm *mm,
		    struct gs_agent **out);
/* Wrap an existing agent fd (owned from now on; made non-blocking). */
int gs_agent_from_fd(int fd, struct gs_mm *mm, struct gs_agent **out);
/* Stops the thread if running, closes the agent fd. */
void gs_agent_destroy(struct gs_agent *a);

/* Step it from the caller's loop: poll gs_agent_fd() for POLLIN, then
 * gs_agent_dispatch(): records handled, 0 if none, -EPIPE at end of file. */
int gs_agent_fd(const struct gs_agent *a);
int gs_agent_dispatch(struct gs_agent *a);

/*
 * Or run it on its own thread, an io_uring loop with a multishot poll on
 * the agent fd and on a stop eventfd. gs_agent_stop() wakes and joins it;
 * returns 0 if it ran until stopped or until the domain died, else the
 * -errno that ended it.
 */
int gs_agent_start(struct gs_agent *a);
int gs_agent_stop(struct gs_agent *a);

struct gs_agent_stats {
	uint64_t events;	/* records read */
	uint64_t pauses, resumes;	/* answered with status 0 */
	uint64_t failures;	/* answered with a negative status */
	uint64_t complete_errors;	/* COMPLETE ioctl refused (-ESTALE...) */
	uint64_t released_bytes;	/* unmapped by successful pauses */
	uint64_t freed_bytes;	/* of which the driver saw come free */
	uint64_t shortfalls;	/* pauses after which less came free */
	uint64_t lost_bytes;	/* DISCARD contents lost by rollbacks */
};
void gs_agent_get_stats(struct gs_agent *a, struct gs_agent_stats *st);

/*
 * Reports (GPUSLEEP_IOC_REPORT, docs/arbiter.md): what the agent tells
 * the module of its tags (per tag: size, mapped, host bytes, policy,
 * content after the next resume, verified) and of its process (what it
 * holds outside the tags, by class: PyTorch's reserved memory outside
 * the regions and CUDA graph pools, as gs_agent_set_outside() last said;
 * the process's whole device memory, gs_mm_resident()). Sent when the
 * thread starts (or at the first gs_agent_dispatch()), with every step
 * before answering it, and from the thread whenever the memory manager's
 * sizes change or gs_agent_set_outside() says something new: at most one
 * per 100 ms, the rest coalesced. A report the same as the last one the
 * module took is not sent again. A module without reports (-ENOTTY) is
 * said once on stderr and not asked again.
 * gs_agent_report(): one now, whatever the rate, sent even if unchanged
 * (0 or -errno).
 * gs_agent_fill_report(): what it would send.
 */
int gs_agent_report(struct gs_agent *a);
int gs_agent_fill_report(struct gs_agent *a, struct gpusleep_report *r);
/*
 * What the process holds outside its tags that only it knows (the
 * Python side: torch.cuda.memory_reserved() outside the regions' pools,
 * and graph pools outside them); 0: unknown. Kicks a report.
 */
void gs_agent_set_outside(struct gs_agent *a, uint64_t torch_reserved,
			  uint64_t graph_pool);
struct gs_agent_report_stats {
	uint64_t sent;		/* reports the module took */
	uint64_t failed;	/* refused or not built (no GPU id) */
	uint64_t coalesced;	/* changes folded into a later report */
	int32_t last_error;	/* of the newest failure, -errno */
	uint32_t pad;
};
void gs_agent_get_report_stats(struct gs_agent *a,
			       struct gs_agent_report_stats *st);

/*
 * The full outcome of each PAUSE_TAG / RESUME_TAG step the agent served:
 * the memory manager's result (bytes unmapped or mapped, what stays
 * unmapped, what was lost, the bytes the driver saw come free) and what
 * COMPLETE answered. The uAPI's COMPLETE carries only status and bytes: a
 * failed pause that left part of the tag unmapped is answered with its
 * error and the bytes still unmapped; the rest is here, for the engine
 * (and, once the uAPI carries it, the kernel).
 */
struct gs_agent_result {
	uint64_t op_id;
	uint32_t type;		/* GPUSLEEP_EV_PAUSE_TAG or _RESUME_TAG */
	uint32_t tag;
	int32_t complete_ret;	/* what the COMPLETE ioctl returned */
	uint32_t pad;
	struct gs_mm_result mm;
	/*
	 * PAUSE_TAG: what the process still held after the pause, as
	 * answered (gs_mm_resident(): GPUSLEEP_RESIDENT_*, 0 not known).
	 * RESUME_TAG: generation is the tag's backing generation once
	 * mapped (the record's; 0 from a module without generations).
	 */
	uint64_t resident_bytes;
	uint32_t resident_source;
	uint32_t pad2;
	uint64_t generation;
};
typedef void (*gs_agent_result_fn)(struct gs_agent *a,
				   const struct gs_agent_result *r, void *arg);
/* Called on the agent's thread after each step is answered (NULL: none). */
void gs_agent_set_result_cb(struct gs_agent *a, gs_agent_result_fn fn,
			    void *arg);
/* The last step served for one tag; -ENOENT if none yet. */
int gs_agent_last_result(struct gs_agent *a, uint32_t tag,
			 struct gs_agent_result *r);

/* ------------------------------------------------------------------ */
/* PyTorch pluggable allocator (docs/pytorch.md)                       */

/* Allocates in the calling thread's tag (gpusleep_set_tag). */
void *gpusleep_malloc(ssize_t size, int device, void *stream);
/*
 * Allocate in one tag, whatever the thread: one MemPool per tag. tagN is
 * the tag of bit N; weights and kv_cache are tag0 and tag1.
 */
void *gpusleep_malloc_weights(ssize_t size, int device, void *stream);
void *gpusleep_malloc_kv_cache(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag0(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag1(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag2(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag3(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag4(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag5(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag6(ssize_t size, int device, void *stream);
void *gpusleep_malloc_tag7(ssize_t size, int device, void *stream);
void gpusleep_free(void *ptr, ssize_t size, int device, void *stream);
/*
 * The names of the engine's tags in its declaration's order ("weights,
 * kv_cache,cuda_graph"), before the first allocation: what set_tag and
 * GPUSLEEP_BACKUP_TAGS name. Default "weights,kv_cache". -EINVAL, -EBUSY.
 */
int gpusleep_declare_tags(const char *names);
/* A declared tag's name: the tag of the calling thread's later
 * gpusleep_malloc() allocations (the first tag until set). */
int gpusleep_set_tag(const char *tag);
/*
 * Tags declared on first use (the torch_memory_saver drop-in, whose
 * callers name any tag): the bit of tag name, or with declare, the next
 * free bit given to it, at any time (memory already allocated is filed
 * by bit: a new name takes a bit nobody uses). The default declaration
 * gives way to the first name so declared while nothing is allocated.
 * -ENOENT (not declared, declare 0), -EINVAL (not [a-z][a-z0-9_]*, at
 * most 15 characters), -ENOSPC (GPUSLEEP_MAX_TAGS declared), -EBUSY
 * (gpusleep_freeze_tags() was called: the domain's declaration is made).
 */
int gpusleep_tag_bit(const char *name, int declare);
/* The names, in bit order, "a,b,c" into buf; returns how many. */
int gpusleep_tag_names(char *buf, size_t len);
/* No name is added from now on (the domain was made with these). */
int gpusleep_freeze_tags(void);
/* Allocate in the tag of bit, whatever the thread (NULL: see above). */
void *gpusleep_malloc_bit(unsigned int bit, ssize_t size, int device,
			 void *stream);
/*
 * The tag of bit backed up on release (want) or discarded; a backup once
 * asked for stays (never silently discard what some allocation wanted
 * kept). Before the memory manager exists, applied when it is made (and
 * over GPUSLEEP_BACKUP_TAGS for that tag).
 */
int gpusleep_set_backup(unsigned int bit, int want);
/* gs_mm_set_margin() of the process's memory manager, now or when made. */
int gpusleep_set_margin(uint64_t bytes);
/* gs_mm_set_staging() of every tag, now and when the mm is made. */
int gpusleep_set_staging_all(unsigned int flags);
/* The domain the process's agent serves (gpusleep_agent_start), 0: none. */
unsigned int gpusleep_agent_domain(void);
/* The process's memory manager, NULL before the first allocation. */
struct gs_mm *gpusleep_mm(void);
/* The device of this process's memory manager, -1 before it is made. */
int gpusleep_device(void);
/* Serve domain_id with that memory manager on an agent thread. */
int gpusleep_agent_start(unsigned int domain_id);
int gpusleep_agent_stop(void);
/*
 * What the process holds outside its tags that only PyTorch knows
 * (gs_agent_set_outside of the process's agent, now or once started).
 */
int gpusleep_set_outside(uint64_t torch_reserved, uint64_t graph_pool);
/* A report from that agent now (gs_agent_report); -ENOENT without one. */
int gpusleep_agent_report(void);
/* That agent's last step for tag (gs_agent_last_result); -ENOENT if none. */
int gpusleep_agent_last_result(unsigned int tag, struct gs_agent_result *r);

#ifdef __cplusplus
}
#endif

#endif /* LIBGPUSLEEP_H */
