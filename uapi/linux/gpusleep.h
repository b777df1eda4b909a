/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * gpusleep: put an inference engine's GPU memory to sleep, tag by tag.
 *
 * The one header shared by the kernel module and userspace. Every struct is
 * fixed-size, made of __u8..__u64 only, naturally aligned, a multiple of 8
 * bytes, with explicit padding; reserved fields and padding must be zero on
 * input (else -EINVAL) and are zero on output. Arguments are checked
 * before any state is read. Times: struct gpusleep_event.deadline_ns is
 * the one absolute time handed out (CLOCK_MONOTONIC, in the time namespace
 * of the task that read() it); every other *_ns field is a duration. See
 * docs/uapi.md.
 *
 * Objects:
 *   /dev/gpusleep        the device: handshake, create a domain, attach.
 *   engine fd            returned by GPUSLEEP_IOC_CREATE_DOMAIN; the domain
 *                        lives as long as this fd. Receives engine events
 *                        through read()/poll(); may also control the domain.
 *   agent fd             GPUSLEEP_IOC_ATTACH with GPUSLEEP_ROLE_AGENT; at most
 *                        one per domain. Receives pause/resume-tag events.
 *   controller fd        GPUSLEEP_IOC_ATTACH with GPUSLEEP_ROLE_CONTROLLER;
 *                        release / resume / state / wait / eventfd.
 *                        poll() reports EPOLLIN while an operation has
 *                        finished since this fd last fetched a result
 *                        (WAIT, a blocking RELEASE/RESUME, GET_STATE's
 *                        last), EPOLLHUP once the domain is dead.
 *   group fd             returned by GPUSLEEP_IOC_CREATE_GROUP: a named set
 *                        of domains (ranks) released and resumed as one
 *                        operation, all or nothing (docs/groups.md).
 */
#ifndef _UAPI_LINUX_GPUSLEEP_H
#define _UAPI_LINUX_GPUSLEEP_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define GPUSLEEP_DEVICE_NAME	"gpusleep"
#define GPUSLEEP_API_VERSION	1

/* Features reported by GPUSLEEP_IOC_API (all of them in version 1). */
#define GPUSLEEP_FEAT_EVENTFD		(1ULL << 0)
#define GPUSLEEP_FEAT_TIMEOUTS		(1ULL << 1)
#define GPUSLEEP_FEAT_WAIT_BY_ID	(1ULL << 2)
#define GPUSLEEP_FEAT_SYSFS		(1ULL << 3)
#define GPUSLEEP_FEAT_NETLINK		(1ULL << 4)
#define GPUSLEEP_FEAT_DECLARED_TAGS	(1ULL << 5)	/* tags, GET_TAGS */
#define GPUSLEEP_FEAT_GROUPS		(1ULL << 6)	/* docs/groups.md */
#define GPUSLEEP_FEAT_STEP_DEADLINE	(1ULL << 7)	/* event.deadline_ns */
#define GPUSLEEP_FEAT_STEP_NTF		(1ULL << 8)	/* netlink STEP_NTF */
#define GPUSLEEP_FEAT_TENANTS		(1ULL << 9)	/* docs/arbiter.md */

/*
 * Tags: the parts of an engine's memory, released and resumed on their own.
 * A domain declares its tags when it is created (struct gpusleep_create),
 * in order, at most GPUSLEEP_MAX_TAGS; tag i is bit i of every tag mask of
 * that domain, and bit order is the fixed order in which a release pauses
 * and a resume maps them. The declaration never changes, so 0 in a
 * request ("every tag" for a release, "every released tag" for a resume)
 * means the same for the domain's whole life. The default declaration
 * (nr_tags 0) is the reference controller's: weights (memory), kv_cache
 * (the KV cache); GPUSLEEP_TAG_WEIGHTS and GPUSLEEP_TAG_KV_CACHE are its
 * bits, GPUSLEEP_TAG_ALL its mask. Any other declaration names its bits
 * through GPUSLEEP_IOC_GET_TAGS (and sysfs, netlink).
 */
#define GPUSLEEP_TAG_WEIGHTS	(1U << 0)	/* in the default declaration */
#define GPUSLEEP_TAG_KV_CACHE	(1U << 1)	/* in the default declaration */
#define GPUSLEEP_TAG_ALL	(GPUSLEEP_TAG_WEIGHTS | GPUSLEEP_TAG_KV_CACHE)
#define GPUSLEEP_NR_TAGS	2	/* tags of the default declaration */
#define GPUSLEEP_MAX_TAGS	8	/* tags a domain may declare */
#define GPUSLEEP_TAG_NAME_LEN	16	/* including the terminating NUL */

/*
 * Kinds of tag. A KV cache tag (at most one per domain) is released only
 * after the engine reset its prefix cache (if it has one: see the caps),
 * and the engine repairs it after each resume before it may schedule.
 */
#define GPUSLEEP_TAG_KIND_MEMORY	0	/* plain device memory */
#define GPUSLEEP_TAG_KIND_KV_CACHE	1	/* the KV cache */

/*
 * One tag: declared at creation (generation 0), reported by
 * GPUSLEEP_IOC_GET_TAGS. name: [a-z][a-z0-9_]*, unique in the domain.
 * generation: how many times the memory behind the tag was replaced (each
 * resume that mapped it back): a buffer registered with NCCL or RDMA
 * before the newest replacement must be registered again.
 */
struct gpusleep_tag {
	char name[GPUSLEEP_TAG_NAME_LEN];
	__u32 kind;		/* GPUSLEEP_TAG_KIND_* */
	__u32 flags;		/* must be 0 */
	__u64 generation;	/* out; 0 at creation */
	__u64 reserved;
};

#define GPUSLEEP_NAME_LEN	32	/* including the terminating NUL */
#define GPUSLEEP_GPU_LEN	64	/* including the terminating NUL */

/* Roles of a domain fd. */
#define GPUSLEEP_ROLE_ENGINE		1	/* only through CREATE_DOMAIN */
#define GPUSLEEP_ROLE_AGENT		2
#define GPUSLEEP_ROLE_CONTROLLER	3

/* Engine capabilities declared at creation (struct gpusleep_create.caps). */
#define GPUSLEEP_CAP_PREFIX_CACHING	(1U << 0)	/* prefix caching on */
#define GPUSLEEP_CAP_PREFIX_CACHE_RESET	(1U << 1)	/* engine can reset it */
#define GPUSLEEP_CAP_ALL		(GPUSLEEP_CAP_PREFIX_CACHING | \
					 GPUSLEEP_CAP_PREFIX_CACHE_RESET)

/*
 * Reasons: why an operation was refused or failed. Each has one errno
 * (docs/errors.md), the one a refused or failed RELEASE/RESUME returns.
 * GPUSLEEP_R_NONE with error 0 is success. struct gpusleep_result.error
 * holds that same errno, except for ENGINE_FAILED and AGENT_FAILED, where
 * it is the peer's own status (what the engine or agent answered).
 */
enum gpusleep_reason {
	GPUSLEEP_R_NONE = 0,
	GPUSLEEP_R_NOT_ENABLED = 1,	/* ENOTCONN: no agent attached */
	GPUSLEEP_R_INVALID = 2,		/* EINVAL: tags, flags, reserved */
	GPUSLEEP_R_KV_NOT_ALLOWED = 3,	/* EOPNOTSUPP: prefix cache, no reset */
	GPUSLEEP_R_ALREADY_RELEASED = 4,/* EALREADY: bad_tags names them */
	GPUSLEEP_R_BUSY = 5,		/* EBUSY: pause/release in progress */
	GPUSLEEP_R_NOT_RELEASED = 6,	/* ENOENT: resume of awake tags */
	GPUSLEEP_R_CANCELLED = 7,	/* ECANCELED: resumed before drained */
	GPUSLEEP_R_DRAIN_TIMEOUT = 8,	/* ETIMEDOUT: engine did not drain */
	GPUSLEEP_R_AGENT_TIMEOUT = 9,	/* ETIMEDOUT: agent did not answer */
	GPUSLEEP_R_ENGINE_FAILED = 10,	/* EREMOTEIO: drain/reset/repair failed */
	GPUSLEEP_R_AGENT_FAILED = 11,	/* EREMOTEIO: pause/resume tag failed */
	GPUSLEEP_R_AGENT_GONE = 12,	/* EPIPE: agent fd closed mid-op */
	GPUSLEEP_R_ENGINE_GONE = 13,	/* EOWNERDEAD: engine fd closed */
	GPUSLEEP_R_NO_MEMORY = 14,	/* ENOMEM: kernel allocation failed */
	GPUSLEEP_R_QUEUE_FULL = 15,	/* ENOBUFS: event queue overflow */
	GPUSLEEP_R_ENGINE_TIMEOUT = 16,	/* ETIMEDOUT: no reset/repair answer */
	GPUSLEEP_R_LEASED = 17,		/* EAGAIN: resume of tags a lease holds */
	GPUSLEEP_R_HOST_BUDGET = 18,	/* ENOSPC: backup past host_budget_bytes */
	GPUSLEEP_R_VERIFY_FAILED = 19,	/* EBADMSG: restored backup's checksum */
	GPUSLEEP_R_SHORTFALL = 20,	/* ENOSPC: RECLAIM took less than asked */
	GPUSLEEP_R_MAX
};

/* Domain states (struct gpusleep_state.state). */
enum gpusleep_dstate {
	GPUSLEEP_S_AWAKE = 0,		/* nothing released, no operation */
	GPUSLEEP_S_DRAINING = 1,	/* release waits for the engine drain */
	GPUSLEEP_S_RELEASING = 2,	/* cache reset / agent unmapping */
	GPUSLEEP_S_RELEASED = 3,	/* some tag released, no operation */
	GPUSLEEP_S_RESUMING = 4,	/* agent remapping / KV repair */
	GPUSLEEP_S_DEAD = 5,		/* engine fd closed */
	GPUSLEEP_S_MAX
};

/* ------------------------------------------------------------------ */
/* /dev/gpusleep ioctls                                                */

/*
 * GPUSLEEP_IOC_API: handshake. In: api = GPUSLEEP_API_VERSION, features =
 * the features the caller needs (0 is fine). Out: features = all features
 * the module has, max_domains. -EINVAL if api differs or a needed feature
 * is missing (features then holds what is available).
 */
struct gpusleep_api {
	__u32 api;
	__u32 max_domains;	/* out */
	__u64 features;		/* in: needed; out: available */
	__u64 reserved[2];
};

/*
 * GPUSLEEP_IOC_CREATE_DOMAIN: create a domain; returns the engine fd
 * (O_CLOEXEC). name and gpu are NUL-terminated printable ASCII; name must
 * not be empty. tags[0..nr_tags) is the declaration (see Tags); -EINVAL
 * for more than GPUSLEEP_MAX_TAGS, a bad or repeated name, an unknown
 * kind, a second KV cache tag, non-zero flags, generation or reserved, or
 * a non-zero entry past nr_tags. Out: id. -ENOSPC past the max_domains
 * module parameter, -EDQUOT past the caller's max_domains_per_user.
 *
 * The domain belongs to the creating process: it dies when that process
 * closes its last copy of the engine fd (close, exec, exit) or exits, even
 * if a forked child still holds one or another process shares its fd
 * table (CLONE_FILES; such a copy then reads as dead), and
 * only that process may act as the engine (read(), COMPLETE; -EPERM
 * elsewhere). GPUSLEEP_CREATEF_SHARED makes it live as long as any copy of
 * the engine fd and lets any holder act as the engine, for an engine that
 * hands its fd to another process on purpose.
 */
#define GPUSLEEP_CREATEF_SHARED		(1U << 0)
#define GPUSLEEP_CREATEF_MASK		(GPUSLEEP_CREATEF_SHARED)

struct gpusleep_create {
	char name[GPUSLEEP_NAME_LEN];
	char gpu[GPUSLEEP_GPU_LEN];
	__u32 caps;		/* GPUSLEEP_CAP_* */
	__u32 flags;		/* GPUSLEEP_CREATEF_* */
	__u32 id;		/* out: domain id, >= 1 */
	__u32 pad;
	__u64 reserved[2];
	/* The tags, in order (nr_tags 0: the default declaration). */
	__u32 nr_tags;
	__u32 pad2;
	struct gpusleep_tag tags[GPUSLEEP_MAX_TAGS];
};

/*
 * GPUSLEEP_IOC_ATTACH: attach to domain id with a role (AGENT or
 * CONTROLLER); returns an fd (O_CLOEXEC). -ENOENT: no such domain;
 * -EPERM: the caller has CAP_SYS_ADMIN (in the initial user namespace),
 * or else it has the owner's euid and is in the creator's user and pid
 * namespaces, and for the agent role it is the creating process itself
 * (unless the domain is GPUSLEEP_CREATEF_SHARED). Anyone else needs a
 * grant: an fd the engine makes with GPUSLEEP_IOC_GRANT and passes over a
 * UNIX socket. -EBUSY: an agent is already attached. -EDQUOT: the
 * caller's max_fds_per_user.
 */
struct gpusleep_attach {
	__u32 id;
	__u32 role;
	__u32 flags;		/* must be 0 */
	__u32 pad;
	__u64 reserved[2];
};

/* ------------------------------------------------------------------ */
/* Controller ioctls (controller fd or engine fd)                     */

#define GPUSLEEP_OP_RELEASE	1
#define GPUSLEEP_OP_RESUME	2

/* Flags of struct gpusleep_op. */
#define GPUSLEEP_OPF_ABORT_INFLIGHT	(1U << 0) /* release: abort, not wait */
#define GPUSLEEP_OPF_NONBLOCK		(1U << 1) /* return once started */
#define GPUSLEEP_OPF_RELEASE_MASK	(GPUSLEEP_OPF_ABORT_INFLIGHT | \
					 GPUSLEEP_OPF_NONBLOCK)
#define GPUSLEEP_OPF_RESUME_MASK	(GPUSLEEP_OPF_NONBLOCK)

/*
 * GPUSLEEP_IOC_RELEASE / GPUSLEEP_IOC_RESUME.
 * In: tags (0 = default: release all tags / resume what is released),
 * flags, timeout_ms (per step; 0 = the module parameters).
 * Out, on success and on failure alike: reason, bad_tags (the tags a
 * refusal names), op_id (0 when refused before an operation started).
 * Output fields are ignored on input: every call is a new request.
 * A refusal returns its errno and changes nothing. A started operation
 * without GPUSLEEP_OPF_NONBLOCK is waited for: the ioctl returns 0 or the
 * errno of the operation's reason (docs/errors.md), however many other
 * operations finish meanwhile. Any signal ends that wait with -EINTR, op_id
 * written: a handler with or without SA_RESTART, and a stop signal
 * (SIGSTOP, ptrace, the freezer) too, as for epoll_wait(2) in signal(7);
 * the call is never restarted, since a restart would start another
 * operation. The operation goes on; GPUSLEEP_IOC_WAIT with op_id waits for
 * it. The kernel keeps nothing of an interrupted call.
 */
struct gpusleep_op {
	__u32 tags;
	__u32 flags;
	__u32 timeout_ms;
	__u32 reason;		/* out: enum gpusleep_reason */
	__u64 op_id;		/* out */
	__u32 bad_tags;		/* out */
	__u32 pad;
	__u64 reserved[2];
};

/* The result of a finished operation. */
struct gpusleep_result {
	__u64 op_id;
	__u32 kind;		/* GPUSLEEP_OP_* */
	__u32 tags;		/* the tags the operation resolved to */
	__s32 error;		/* 0 or -errno */
	__u32 reason;		/* enum gpusleep_reason */
	__u32 done_tags;	/* tags the agent confirmed in this op */
	__u32 pad;
	__u64 duration_ns;
	__u64 bytes[GPUSLEEP_MAX_TAGS];	/* per tag bit, from the agent */
	/*
	 * Release: per tag, the device memory the agent saw come free (its
	 * driver's free memory after a synchronise, GPUSLEEP_CF_MEASURED), 0
	 * when not measured.
	 */
	__u64 freed_bytes[GPUSLEEP_MAX_TAGS];
	__u32 shortfall_tags;	/* less came free than was unmapped */
	__u32 lost_tags;	/* contents lost (a failed pause's rollback) */
};

/*
 * GPUSLEEP_IOC_WAIT: wait for operation op_id (0 = the newest one) to
 * finish, at most timeout_ms (0 = forever), interruptibly. Returns 0 and
 * fills result (whatever the operation's own outcome, in result.error; an
 * operation cut short by the engine's death has -EOWNERDEAD there);
 * -ENOENT for an id never issued or finished too long ago to be remembered
 * (the last 16 finished are; an operation that is waited for when it
 * finishes is always delivered); -ETIMEDOUT. Interrupted by a signal, the
 * call writes result.op_id (the operation it waited for, 0 resolved; the
 * rest of result zero) and leaves op_id and timeout_ms as they were. A
 * wait for a named op_id without a timeout asks the same whenever it is
 * asked: it is restarted after a stop signal or an SA_RESTART handler
 * (-EINTR after a handler without SA_RESTART). Any other wait (op_id 0,
 * which could resolve to a newer operation, or a timeout, which would
 * start again) returns -EINTR, stop signals included: the caller waits
 * again for result.op_id with what is left of its own deadline.
 */
struct gpusleep_wait {
	__u64 op_id;
	__u32 timeout_ms;
	__u32 pad;
	__u64 reserved[2];
	struct gpusleep_result result;	/* out */
};

/* Flags of struct gpusleep_state.flags. */
#define GPUSLEEP_SF_DRAIN_PENDING	(1U << 0)
#define GPUSLEEP_SF_OP_IN_FLIGHT	(1U << 1)
#define GPUSLEEP_SF_AGENT_ATTACHED	(1U << 2)
#define GPUSLEEP_SF_KV_RELEASE_ALLOWED	(1U << 3)
#define GPUSLEEP_SF_SCHED_PAUSED	(1U << 4)
#define GPUSLEEP_SF_DEAD		(1U << 5)
/* kv_cache came back but the engine has not repaired it yet */
#define GPUSLEEP_SF_KV_REPAIR_PENDING	(1U << 6)
/*
 * An agent step is unanswered past its deadline, or a released tag's unmap
 * is unconfirmed (struct gpusleep_state.unconfirmed): the scheduler stays
 * paused until the agent answers or a resume maps the tags back.
 */
#define GPUSLEEP_SF_AGENT_UNCONFIRMED	(1U << 7)
/*
 * A release of a group's rank: the engine drained, nothing is unmapped, the
 * rank waits (state draining) until every rank of the group has drained.
 */
#define GPUSLEEP_SF_GROUP_HELD		(1U << 8)

/*
 * GPUSLEEP_IOC_GET_STATE: the domain's state (is_sleeping = released != 0).
 * A tag counts as released from the moment the agent is asked to unmap it
 * until the agent confirms it mapped again: "maybe released is released".
 * unconfirmed names the released tags whose unmap the agent has not
 * confirmed (still running, timed out, or the agent went away); a resume
 * remaps them like any released tag.
 */
struct gpusleep_state {
	__u32 id;
	__u32 state;		/* enum gpusleep_dstate */
	__u32 released;		/* released tags, confirmed or not */
	__u32 flags;		/* GPUSLEEP_SF_* */
	__u32 caps;
	__u32 unconfirmed;	/* released tags the agent has not confirmed */
	__u64 op_in_flight;	/* id, or 0 */
	__u64 last_op_id;	/* newest operation issued, or 0 */
	__u64 bytes_released[GPUSLEEP_MAX_TAGS];
	/* per released tag: what its pause saw come free (0: unmeasured) */
	__u64 freed_bytes[GPUSLEEP_MAX_TAGS];
	__u32 shortfall;	/* released tags not all seen to come free */
	__u32 pad2;
	/*
	 * The device memory the agent's process still held when it answered
	 * the newest release's last pause, as the driver sees it; source says
	 * whose view that is (GPUSLEEP_RESIDENT_*; 0: not reported). Every
	 * PAUSE_TAG answer the module takes (on time or late, success or
	 * failure) replaces both (one without them sets 0); they are kept
	 * while any tag is released and cleared once nothing is.
	 */
	__u64 resident_bytes;
	__u32 resident_source;
	__u32 pad3;
	__u64 generation[GPUSLEEP_MAX_TAGS];	/* per tag (struct gpusleep_tag) */
	__u64 reserved[2];
	struct gpusleep_result last;	/* newest finished operation */
};

/*
 * Sources of resident_bytes: the process's own used device memory (NVML's
 * per-process accounting), or, where that is not available, the whole
 * device's used memory (cuMemGetInfo), which counts every process on it.
 */
#define GPUSLEEP_RESIDENT_PROCESS	1
#define GPUSLEEP_RESIDENT_DEVICE	2

/* Events of struct gpusleep_eventfd.events. */
#define GPUSLEEP_EFD_DRAINED	(1U << 0)	/* engine reported drained */
#define GPUSLEEP_EFD_OP_DONE	(1U << 1)	/* an operation finished */
#define GPUSLEEP_EFD_ALL	(GPUSLEEP_EFD_DRAINED | GPUSLEEP_EFD_OP_DONE)

/*
 * GPUSLEEP_IOC_EVENTFD: fd >= 0 with events != 0 registers (or updates)
 * that eventfd for this file; fd >= 0 with events == 0 removes it; fd == -1
 * (events 0) removes every registration of this file. Registrations end
 * with the file. -EBADF: not an open fd; -EINVAL: not an eventfd, bad
 * events; -ENOSPC: the domain's max_eventfds is reached; -EDQUOT: the
 * caller's max_eventfds_per_user, or its max_eventfds_per_user_per_domain
 * on this domain (a registration is charged to whoever makes it, also
 * through a granted fd); -ENOENT: removing an eventfd that is not
 * registered. When the domain dies every registered eventfd is signalled.
 */
struct gpusleep_eventfd {
	__s32 fd;
	__u32 events;
	__u64 reserved;
};

/*
 * GPUSLEEP_IOC_GET_TAGS (any domain fd): the domain's declaration, with
 * each tag's generation. Entries past nr_tags are zero.
 */
struct gpusleep_tags {
	__u32 nr_tags;
	__u32 pad;
	__u64 reserved[3];
	struct gpusleep_tag tags[GPUSLEEP_MAX_TAGS];
};

/*
 * GPUSLEEP_IOC_GRANT (engine fd, in the engine's process): make an fd of
 * role (AGENT or CONTROLLER) for this domain, returned (O_CLOEXEC) for
 * the engine to pass to whom it trusts (SCM_RIGHTS over a UNIX socket);
 * whoever holds it has the role, whatever its namespaces or euid. The fd
 * is charged to the engine's euid. -EBUSY: an agent is attached already.
 */
struct gpusleep_grant {
	__u32 role;
	__u32 flags;		/* must be 0 */
	__u64 reserved[2];
};

/* ------------------------------------------------------------------ */
/* Engine and agent: events read() from the fd, answered by COMPLETE   */

enum gpusleep_event_type {
	GPUSLEEP_EV_NONE = 0,
	/* to the engine */
	GPUSLEEP_EV_DRAIN = 1,		/* pause scheduling, drain; answer */
	GPUSLEEP_EV_DRAIN_CANCELLED = 2,/* stop draining; no answer */
	GPUSLEEP_EV_RESET_CACHES = 3,	/* reset prefix cache; answer */
	GPUSLEEP_EV_REPAIR_KV = 4,	/* KV is back: repair it; answer */
	GPUSLEEP_EV_RESUME_SCHED = 5,	/* resume scheduling; no answer */
	/* to the agent */
	GPUSLEEP_EV_PAUSE_TAG = 6,	/* unmap tag; answer with bytes */
	GPUSLEEP_EV_RESUME_TAG = 7,	/* remap tag; answer with bytes */
	GPUSLEEP_EV_MAX
};

/* Flags of struct gpusleep_event.flags. */
#define GPUSLEEP_EVF_ABORT_INFLIGHT	(1U << 0)	/* DRAIN: abort requests */
/*
 * Every record to the engine carries the kernel's one truth about
 * scheduling: set when, after this record, the engine may schedule. The
 * kernel sets it on RESUME_SCHED only; DRAIN_CANCELLED and every other
 * record carry it clear while the scheduler must stay paused. An engine
 * schedules only while the newest record it read has it set (and before
 * the first record).
 */
#define GPUSLEEP_EVF_MAY_SCHEDULE	(1U << 1)

/*
 * One whole record per read(): the newest version of the record that fits
 * the buffer (GPUSLEEP_EVENT_SIZE_VER1 bytes for a buffer of at least that
 * many, GPUSLEEP_EVENT_SIZE_VER0 for a buffer of 40 to 47 bytes), never a
 * newer record cut short; read() returns its size and size says it too.
 * A buffer smaller than GPUSLEEP_EVENT_SIZE_VER0 is -EINVAL (the record
 * stays queued). -EAGAIN under O_NONBLOCK; poll() reports EPOLLIN when a record is
 * queued and EPOLLHUP once the domain is dead.
 * Nothing is lost to a full queue: a step record that was never read is
 * taken back when its step ends (timed out, cancelled), and an unread
 * DRAIN_CANCELLED or RESUME_SCHED is replaced by the newer one, so at most
 * one step record and one notification wait in a queue.
 */
struct gpusleep_event {
	__u32 size;		/* this record's size: read()'s result */
	__u32 type;		/* enum gpusleep_event_type */
	__u64 op_id;
	__u32 tags;		/* DRAIN: the release's tags; *_TAG: one tag */
	__u32 flags;		/* GPUSLEEP_EVF_* */
	__u32 step;		/* echo in struct gpusleep_complete */
	__u32 pad;
	/*
	 * RESUME_TAG: the generation the tag's memory has once mapped back;
	 * REPAIR_KV: the KV cache tag's generation. 0 otherwise.
	 * (RESUME_SCHED's tags name the tags whose memory was replaced since
	 * the previous RESUME_SCHED: register those again before scheduling.)
	 */
	__u64 generation;
	/*
	 * Since GPUSLEEP_EVENT_SIZE_VER1 (older modules send 40 bytes: read
	 * it as 0). A step record (one awaiting an answer: DRAIN, PAUSE_TAG,
	 * RESUME_TAG, ...): when the step times out, as CLOCK_MONOTONIC
	 * nanoseconds in the time namespace of the task that called read()
	 * (what its clock_gettime(CLOCK_MONOTONIC) reads); an answer after
	 * it is -ESTALE and the operation has failed. The agent bounds its
	 * waits for the GPU by it. 0 on notifications.
	 */
	__u64 deadline_ns;
};

/*
 * GPUSLEEP_IOC_COMPLETE (engine or agent fd): answer the step (op_id, step)
 * of an event that needs an answer. status 0 or -errno (a failure fails the
 * operation: ENGINE_FAILED or AGENT_FAILED, with status in the result's
 * error). bytes: for PAUSE_TAG, the bytes unmapped; on a failed PAUSE_TAG,
 * non-zero bytes say that much of the tag stayed unmapped (the tag then
 * stays released, and a resume maps it back); for RESUME_TAG, the bytes
 * mapped. -ESTALE if that step is not the one awaited (already timed out,
 * cancelled, or never sent), except that a late answer to a timed-out
 * agent step still updates the released tags, so the state follows what
 * the agent really did. A RESUME_TAG answered -EBADMSG says the restored
 * backup failed its checksum (GPUSLEEP_RTF_VERIFIED): the resume fails
 * with GPUSLEEP_R_VERIFY_FAILED, the tag stays released and its contents
 * are reported lost (the result's lost_tags).
 */
struct gpusleep_complete {
	__u64 op_id;
	__u32 step;
	__u32 type;		/* the event type answered */
	__s32 status;
	__u32 flags;		/* GPUSLEEP_CF_*, answers to *_TAG only */
	__u64 bytes;
	__u64 freed_bytes;	/* PAUSE_TAG: seen to come free (CF_MEASURED) */
	__u64 lost_bytes;	/* contents lost: kv_cache needs repair */
	/*
	 * PAUSE_TAG: the device memory this process still holds after the
	 * pause, and whose view that is (GPUSLEEP_RESIDENT_*; 0: not known).
	 * -EINVAL in any other answer or from the engine, for an unknown
	 * source, bytes without a source, or a non-zero pad.
	 */
	__u64 resident_bytes;
	__u32 resident_source;
	__u32 pad;
};

/*
 * Flags of struct gpusleep_complete.flags. lost_bytes are contents a
 * failed pause lost when it mapped memory back fresh (zeros): kv_cache is
 * then repaired before the engine may schedule. A PAUSE_TAG answer with
 * status 0 unmapped the tag and lost nothing: with lost_bytes it is
 * -EINVAL (the step stays awaited).
 */
#define GPUSLEEP_CF_MEASURED	(1U << 0)	/* freed_bytes was measured */
#define GPUSLEEP_CF_SHORTFALL	(1U << 1)	/* less came free than bytes */
#define GPUSLEEP_CF_MASK	(GPUSLEEP_CF_MEASURED | GPUSLEEP_CF_SHORTFALL)

/* ------------------------------------------------------------------ */
/* Groups: the ranks of one engine, released and resumed as one       */
/* operation (docs/groups.md).                                        */

#define GPUSLEEP_GROUP_MAX_RANKS	64
#define GPUSLEEP_GROUP_NO_RANK		0xffffffffU	/* rank: none */

/*
 * GPUSLEEP_IOC_CREATE_GROUP (/dev/gpusleep): create a group named name
 * (the domain name rules); returns the group fd (O_CLOEXEC). The group
 * lives as long as a group fd (this one, its copies, or one opened by
 * GPUSLEEP_IOC_OPEN_GROUP). Out: id. Names are per owner (the creator's
 * euid in its user namespace and pid namespace): -EEXIST: a live group of
 * the caller's has that name; -EDQUOT: the caller's max_fds_per_user.
 *
 * GPUSLEEP_IOC_OPEN_GROUP (/dev/gpusleep, same struct): another fd for the
 * caller's own live group named name (the caller's euid, user namespace
 * and pid namespace; a tool acting on an engine's group runs as its owner,
 * in its container). -ENOENT: no such group of the caller's; -EPERM: the
 * caller lacks CAP_SYS_ADMIN and may not control every rank. GROUP_RELEASE and
 * GROUP_RESUME check again, for every rank (-EPERM naming the rank).
 */
struct gpusleep_group_create {
	char name[GPUSLEEP_NAME_LEN];
	__u32 flags;		/* must be 0 */
	__u32 id;		/* out: group id, >= 1 */
	__u64 reserved[2];
};

/*
 * GPUSLEEP_IOC_GROUP_ADD (group fd): add the domain of fd, an engine or
 * controller fd (holding it proves the right to control the domain), as
 * the next rank. Out: rank, domain (its id). -EBADF/-EINVAL: fd is not a
 * domain fd; -EPERM: an agent fd; -ENODEV: the domain is dead; -EEXIST:
 * the domain is in a group already (this one or another); -EBUSY: a group
 * operation is in flight; -ENOSPC: GPUSLEEP_GROUP_MAX_RANKS reached;
 * -EXDEV: the domain's tags differ from the group's ranks' (names, kinds
 * or order: one tag mask must mean the same on every rank).
 * GPUSLEEP_IOC_GET_TAGS on a group fd gives its ranks' declaration
 * (without generations; nr_tags 0 before the first rank).
 */
struct gpusleep_group_add {
	__s32 fd;
	__u32 flags;		/* must be 0 */
	__u32 rank;		/* out */
	__u32 domain;		/* out */
	__u64 reserved[2];
};

/*
 * GPUSLEEP_IOC_GROUP_RELEASE / GPUSLEEP_IOC_GROUP_RESUME (group fd): one
 * operation over every rank. In: tags (0: as for one domain), flags
 * (GPUSLEEP_OPF_*), timeout_ms (per step of every rank, and the group
 * operation's deadline, by which it ends: see GPUSLEEP_GROUP_RF_SETTLING;
 * 0: the module parameters, no deadline). Out: op_id (0 when
 * refused), and the first rank that refused or failed: reason, rank,
 * domain, bad_tags (GPUSLEEP_GROUP_NO_RANK and 0 on success). A refusal
 * returns that rank's errno with nothing changed on any rank; a started
 * operation without GPUSLEEP_OPF_NONBLOCK is waited for and returns 0 or
 * the failing rank's errno (its breakdown: GPUSLEEP_IOC_GROUP_WAIT). An
 * interrupted wait returns -EINTR with op_id written, never restarted (as
 * GPUSLEEP_IOC_RELEASE); the operation goes on. Output fields are ignored
 * on input. -EBUSY: a group operation is in flight; -ENODATA: no ranks
 * (-ENOENT is a rank's GPUSLEEP_R_NOT_RELEASED).
 */
struct gpusleep_group_op {
	__u32 tags;
	__u32 flags;
	__u32 timeout_ms;
	__u32 reason;		/* out: enum gpusleep_reason */
	__u64 op_id;		/* out */
	__u32 rank;		/* out */
	__u32 domain;		/* out */
	__u32 bad_tags;		/* out */
	__u32 pad;
	__u64 reserved[2];
};

/* Flags of struct gpusleep_group_rank.flags. */
#define GPUSLEEP_GRF_DONE		(1U << 0) /* its operation succeeded */
#define GPUSLEEP_GRF_FAILED		(1U << 1) /* it failed: the cause */
#define GPUSLEEP_GRF_CANCELLED		(1U << 2) /* called off, nothing unmapped */
#define GPUSLEEP_GRF_ROLLED_BACK	(1U << 3) /* released, resumed again */
#define GPUSLEEP_GRF_STILL_RELEASED	(1U << 4) /* could not be resumed */
#define GPUSLEEP_GRF_RUNNING		(1U << 5) /* still at work (settling) */

/* One rank of a group operation's result. */
struct gpusleep_group_rank {
	__u32 domain;		/* domain id */
	__u32 flags;		/* GPUSLEEP_GRF_* */
	__u64 op_id;		/* the rank's own operation, or 0 */
	__u64 rollback_op_id;	/* the rollback's resume, or 0 */
	__s32 error;		/* the rank's operation's error */
	__u32 reason;		/* its reason */
	__u32 released;		/* tags released when the group finished */
	__u32 pad;
};

/*
 * Flags of struct gpusleep_group_result.flags. SETTLING: the operation
 * ended at its deadline while ranks were still at work (a release's
 * rollback resuming them, a step a rank had read, a resume's remaps;
 * their entries flagged GPUSLEEP_GRF_RUNNING): what they do goes on as
 * group operation settle_op_id, started by the kernel (the same kind,
 * tags and failure; no deadline, each rank's steps time out on their
 * own). The group refuses new operations (-EBUSY) until it ends, and
 * GPUSLEEP_IOC_GROUP_WAIT for settle_op_id returns then, with the final
 * breakdown (ROLLED_BACK, STILL_RELEASED).
 */
#define GPUSLEEP_GROUP_RF_SETTLING	(1U << 0)

/* The result of a finished group operation. */
struct gpusleep_group_result {
	__u64 op_id;
	__u32 kind;		/* GPUSLEEP_OP_* */
	__u32 tags;		/* as asked */
	__s32 error;		/* 0 or the failing rank's errno */
	__u32 reason;		/* the failing rank's reason */
	__u32 rank;		/* the failing rank, or GPUSLEEP_GROUP_NO_RANK */
	__u32 domain;		/* its domain id, or 0 */
	__u32 nr_ranks;
	__u32 pad;
	__u64 duration_ns;
	__u32 flags;		/* GPUSLEEP_GROUP_RF_* */
	__u32 pad2;
	__u64 settle_op_id;	/* SETTLING: the operation that goes on */
};

/*
 * GPUSLEEP_IOC_GROUP_WAIT (group fd): wait for group operation op_id
 * (0: the newest) at most timeout_ms (0: forever), interruptibly (-EINTR).
 * Fills result, and when ranks is not 0, up to nr_ranks entries of
 * rank_size bytes each (at least GPUSLEEP_GROUP_RANK_SIZE_VER0; fields
 * past the module's entry cleared) at user address ranks; out: nr_ranks =
 * entries written, rank_size = the module's entry size. The results of
 * the last 8 group operations are kept, the entries of the newest only
 * (nr_ranks 0 for an older one). -ENOENT: an id never issued, or
 * finished too long ago; -ETIMEDOUT. Interrupted, it writes result.op_id
 * and is restarted or returns -EINTR as GPUSLEEP_IOC_WAIT does.
 */
struct gpusleep_group_wait {
	__u64 op_id;
	__u32 timeout_ms;
	__u32 nr_ranks;		/* in: entries at ranks; out: written */
	__u64 ranks;		/* user address of the entries, or 0 */
	__u32 rank_size;	/* in: size of one entry; out: the module's */
	__u32 pad;
	__u64 reserved[2];
	struct gpusleep_group_result result;	/* out */
};

#define GPUSLEEP_GROUP_CREATE_SIZE_VER0	56
#define GPUSLEEP_GROUP_ADD_SIZE_VER0	32
#define GPUSLEEP_GROUP_OP_SIZE_VER0	56
#define GPUSLEEP_GROUP_RANK_SIZE_VER0	40
#define GPUSLEEP_GROUP_RESULT_SIZE_VER0	64
#define GPUSLEEP_GROUP_WAIT_SIZE_VER0	112

/* ------------------------------------------------------------------ */
/* Tenants: reports, priorities, reclaims and leases                  */
/* (docs/arbiter.md; feature GPUSLEEP_FEAT_TENANTS).                  */

/* What a release of a tag costs (struct gpusleep_report_tag.policy). */
#define GPUSLEEP_POLICY_DISCARD		0	/* frees; nothing kept */
#define GPUSLEEP_POLICY_BACKUP		1	/* copies to host RAM first */
/* What a tag holds after its next resume (.content). */
#define GPUSLEEP_CONTENT_UNDEFINED	0	/* whatever the pages hold */
#define GPUSLEEP_CONTENT_ZEROED		1	/* zeros */
#define GPUSLEEP_CONTENT_KEPT		2	/* as before the release */
/*
 * Flags of struct gpusleep_report_tag.flags. VERIFIED: its backup is
 * checksummed when taken and checked at restore; a mismatch is a failed
 * resume (GPUSLEEP_R_VERIFY_FAILED), never a silent success. Only with
 * GPUSLEEP_POLICY_BACKUP.
 */
#define GPUSLEEP_RTF_VERIFIED		(1U << 0)
#define GPUSLEEP_RTF_MASK		(GPUSLEEP_RTF_VERIFIED)

/*
 * One tag as the agent sees it. mapped_bytes <= size_bytes. host_bytes:
 * the host RAM its backup and the staging kept across cycles hold now
 * (counted against the node's host_budget_bytes module parameter). A
 * release of a backup-kind tag is counted as needing
 * max(mapped_bytes, host_bytes) of host RAM until it is resumed.
 * CONTENT_KEPT needs POLICY_BACKUP (a discarded tag keeps nothing).
 */
struct gpusleep_report_tag {
	__u64 size_bytes;	/* its device memory, mapped or not */
	__u64 mapped_bytes;	/* of it, mapped now */
	__u64 host_bytes;	/* host RAM its backup and kept staging hold */
	__u32 policy;		/* GPUSLEEP_POLICY_* */
	__u32 content;		/* GPUSLEEP_CONTENT_*: after the next resume */
	__u32 flags;		/* GPUSLEEP_RTF_* */
	__u32 pad;
};

/*
 * GPUSLEEP_IOC_REPORT (agent fd): what the agent knows of its tags and its
 * process; it replaces the previous report whole. Sent once attached,
 * after each step it answers, and when sizes change (at most every
 * 100 ms is plenty). gpu_uuid: the device's (cuDeviceGetUuid; a MIG
 * instance has its own; the host backend a stable stand-in): not all
 * zero. nr_tags: the domain's declaration's count (GET_TAGS), tags[i]
 * describing tag i; entries past it zero. What the process holds outside
 * its tags, by class (0: unknown): PyTorch's reserved memory outside the
 * regions, CUDA graph pools outside them, and the process's whole device
 * memory with whose view that is (GPUSLEEP_RESIDENT_*; bytes need a
 * source). -EINVAL for any of that broken, and nothing changes;
 * -EPERM on another fd than an agent's; -ENOTCONN from an agent that is
 * no longer the domain's; -ENODEV on a dead domain.
 */
struct gpusleep_report {
	__u8  gpu_uuid[16];
	__u32 nr_tags;
	__u32 flags;		/* must be 0 */
	__u64 torch_reserved_bytes;	/* PyTorch's reserved, outside regions */
	__u64 graph_pool_bytes;		/* CUDA graph pools outside regions */
	__u64 process_bytes;		/* the process's device memory, all */
	__u32 process_source;		/* GPUSLEEP_RESIDENT_*, 0: unknown */
	__u32 pad;
	__u64 reserved[4];
	struct gpusleep_report_tag tags[GPUSLEEP_MAX_TAGS];
};

/* Priorities (struct gpusleep_tenant_set.priority, gpusleep_reclaim). */
#define GPUSLEEP_PRIO_MIN		(-1000)
#define GPUSLEEP_PRIO_MAX		1000

/* Flags of a tenant. YIELDABLE: users other than its owner may reclaim it. */
#define GPUSLEEP_TENF_YIELDABLE		(1U << 0)
#define GPUSLEEP_TENF_MASK		(GPUSLEEP_TENF_YIELDABLE)

/*
 * GPUSLEEP_IOC_SET_TENANT (engine fd, in the engine's process): the
 * tenant's own statement. priority in [GPUSLEEP_PRIO_MIN,
 * GPUSLEEP_PRIO_MAX], 0 by default, lower yields first: raising it above
 * both 0 and its current value needs CAP_SYS_NICE in the initial user
 * namespace (-EPERM), as nice(2); lowering is free. -EINVAL: out of
 * range, unknown flags, reserved not zero; -ENODEV: dead.
 */
struct gpusleep_tenant_set {
	__s32 priority;
	__u32 flags;		/* GPUSLEEP_TENF_* */
	__u64 reserved[2];
};

/*
 * GPUSLEEP_IOC_GET_TENANT (any domain fd): the tenant's statement, its
 * lease and the agent's newest report (zero before any: nr_tags 0).
 * host_charged_bytes: what the node's host budget counts for it now.
 */
struct gpusleep_tenant {
	__s32 priority;
	__u32 flags;		/* GPUSLEEP_TENF_* */
	__u64 idle_ns;		/* since it was last made awake (a duration) */
	__u64 lease_id;		/* the lease holding some of its tags, or 0 */
	__u32 leased_tags;	/* the tags that lease holds */
	__u32 pad;
	__u64 host_charged_bytes;
	__u64 reserved[3];
	struct gpusleep_report report;
};

/* Flags of struct gpusleep_reclaim.flags. */
#define GPUSLEEP_RECLAIMF_LEASE		(1U << 0) /* hand out a lease fd */
#define GPUSLEEP_RECLAIMF_NONBLOCK	(1U << 1) /* return once started */
#define GPUSLEEP_RECLAIMF_PARTIAL	(1U << 2) /* keep what was taken if short */
#define GPUSLEEP_RECLAIMF_DISCARD_ONLY	(1U << 3) /* take no backup-kind tag */
#define GPUSLEEP_RECLAIMF_MASK		(GPUSLEEP_RECLAIMF_LEASE | \
					 GPUSLEEP_RECLAIMF_NONBLOCK | \
					 GPUSLEEP_RECLAIMF_PARTIAL | \
					 GPUSLEEP_RECLAIMF_DISCARD_ONLY)

/* What kept a reclaim short (struct gpusleep_reclaim.why). */
#define GPUSLEEP_RWHY_NO_CANDIDATE	(1U << 0) /* no domain left to try */
#define GPUSLEEP_RWHY_PRIORITY		(1U << 1) /* domains at or above the claim */
#define GPUSLEEP_RWHY_NOT_PERMITTED	(1U << 2) /* not the caller's, not yieldable */
#define GPUSLEEP_RWHY_REFUSED		(1U << 3) /* victims refused or failed */
#define GPUSLEEP_RWHY_HOST_BUDGET	(1U << 4) /* backup tags past the budget */
#define GPUSLEEP_RWHY_DEADLINE		(1U << 5) /* its deadline came */
#define GPUSLEEP_RWHY_CANCELLED		(1U << 6) /* its lease closed first */

/* A reclaim tries at most this many victims (entries of its result). */
#define GPUSLEEP_RECLAIM_MAX_VICTIMS	64

/* struct gpusleep_reclaim.state */
#define GPUSLEEP_RECLAIM_RUNNING	1
#define GPUSLEEP_RECLAIM_DONE		2

/* Flags of struct gpusleep_reclaim_victim.flags. */
#define GPUSLEEP_RVF_UNMEASURED		(1U << 0) /* freed: unmapped, not measured */
#define GPUSLEEP_RVF_GROUP		(1U << 1) /* taken with its group: op_id */
#define GPUSLEEP_RVF_FAILED		(1U << 2) /* refused or failed: error */
#define GPUSLEEP_RVF_ROLLED_BACK	(1U << 3) /* resumed again: not kept */
#define GPUSLEEP_RVF_STILL_RELEASED	(1U << 4) /* a resume failed: released */
#define GPUSLEEP_RVF_CANCELLED		(1U << 5) /* called off at the deadline */
#define GPUSLEEP_RVF_RETURNED		(1U << 6) /* resumed at its lease's end */
#define GPUSLEEP_RVF_GONE		(1U << 7) /* the domain died meanwhile */

/*
 * One domain a reclaim tried, in the order tried: the tags its release
 * took (tags) and its op_id (a group's: the group operation, GROUP),
 * freed_bytes counted on the reclaim's GPU (measured by the agent, else
 * the bytes unmapped: UNMEASURED), its release's error and reason
 * (FAILED), and the resume that gave the tags back (resume_op_id: a
 * rollback or the lease's return; its error and reason).
 */
struct gpusleep_reclaim_victim {
	__u32 domain;
	__u32 tags;
	__u64 op_id;
	__u64 freed_bytes;
	__s32 error;
	__u32 reason;
	__u32 flags;		/* GPUSLEEP_RVF_* */
	__u32 group;		/* group id (GPUSLEEP_RVF_GROUP), else 0 */
	__u64 resume_op_id;
	__s32 resume_error;
	__u32 resume_reason;
};

/*
 * GPUSLEEP_IOC_RECLAIM (/dev/gpusleep): free bytes of device memory on
 * the GPU gpu_uuid (as the tenants' reports name it) at priority, within
 * timeout_ms (0: the reclaim_timeout_ms module parameter). The module
 * picks the victims among the domains on that GPU the caller may take
 * from (docs/arbiter.md: lowest priority first, then least recently
 * active, then id; within a domain discard-kind tags before backup-kind,
 * in declared order; a domain in a group with its whole group) and
 * releases them one at a time, each an ordinary release with every rule,
 * until bytes came free. Short of bytes, what it took is resumed again
 * (all or nothing) unless PARTIAL. One reclaim at a time per GPU; ids are
 * node-wide, from 1. Out: op_id, state, and when done taken_bytes,
 * reason (NONE or SHORTFALL), why, and up to nr_victims entries of
 * victim_size bytes at victims (out: nr_victims written, victim_size the
 * module's). With LEASE: lease_fd (O_CLOEXEC; also the return value) and
 * lease_id; closing it gives back what was taken. Blocking unless
 * NONBLOCK; interrupted, -EINTR with op_id (and with LEASE, lease_fd)
 * written: the reclaim goes on (RECLAIM_WAIT). Returns 0 (the lease fd
 * with LEASE), -ENOSPC when short (nothing kept unless PARTIAL; then 0).
 * -EINVAL: unknown flags, reserved or pad not zero, bytes 0, gpu_uuid
 * zero, priority out of range, victims without victim_size >=
 * GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0; -EPERM: priority > 0 without
 * CAP_SYS_NICE (initial user namespace).
 */
struct gpusleep_reclaim {
	__u8  gpu_uuid[16];
	__u64 bytes;		/* wanted */
	__s32 priority;		/* the claim's */
	__u32 flags;		/* GPUSLEEP_RECLAIMF_* */
	__u32 timeout_ms;	/* RECLAIM: its deadline; RECLAIM_WAIT: the wait's */
	__u32 reason;		/* out: GPUSLEEP_R_NONE or _SHORTFALL */
	__u64 op_id;		/* out; RECLAIM_WAIT: in (0: the caller's newest) */
	__u64 taken_bytes;	/* out */
	__u64 victims;		/* user address of entries, or 0 */
	__u32 nr_victims;	/* in: entries there; out: written */
	__u32 victim_size;	/* in: one entry's size; out: the module's */
	__u32 why;		/* out: GPUSLEEP_RWHY_* */
	__u32 state;		/* out: GPUSLEEP_RECLAIM_* */
	__s32 lease_fd;		/* out: the lease fd, or -1 */
	__u32 pad;
	__u64 lease_id;		/* out: with LEASE, else 0 */
	__u64 reserved[2];
};

/* struct gpusleep_lease.state */
#define GPUSLEEP_LEASE_TAKING		1	/* its reclaim runs */
#define GPUSLEEP_LEASE_HELD		2
#define GPUSLEEP_LEASE_RETURNING	3	/* resuming what it took */
#define GPUSLEEP_LEASE_RETURNED		4

/*
 * GPUSLEEP_IOC_LEASE_INFO (lease fd): what the lease holds, each victim
 * as RECLAIM gives it (RETURNED once resumed at the lease's end,
 * STILL_RELEASED when that resume failed, GONE when it died). While held,
 * a resume of its tags by anyone else is refused (GPUSLEEP_R_LEASED).
 * GPUSLEEP_IOC_LEASE_RETURN (lease fd; arg 0 or
 * GPUSLEEP_LEASE_RETURN_NONBLOCK): give it back now, as its close does:
 * every domain it took is resumed, highest priority first, then most
 * recently active; a resume that fails is reported and the next tried.
 * Returns the number of domains left released (0: all resumed), or
 * -EINTR (the return goes on; poll() says when it ends). poll(): EPOLLIN
 * once returned.
 */
#define GPUSLEEP_LEASE_RETURN_NONBLOCK	1UL

struct gpusleep_lease {
	__u64 id;
	__u64 reclaim_op_id;
	__u32 state;		/* GPUSLEEP_LEASE_* */
	__u32 nr_victims;	/* in: entries at victims; out: written */
	__u64 victims;		/* user address of entries, or 0 */
	__u32 victim_size;	/* in: one entry's size; out: the module's */
	__u32 still_released;	/* out: returned, domains left released */
	__u64 taken_bytes;
	__u64 held_ns;		/* since its reclaim ended (a duration) */
	__u8  gpu_uuid[16];
	__u64 reserved[2];
};

#define GPUSLEEP_REPORT_TAG_SIZE_VER0		40
#define GPUSLEEP_REPORT_SIZE_VER0		408
#define GPUSLEEP_TENANT_SET_SIZE_VER0		24
#define GPUSLEEP_TENANT_SIZE_VER0		472
#define GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0	56
#define GPUSLEEP_RECLAIM_SIZE_VER0		112
#define GPUSLEEP_LEASE_SIZE_VER0		88

/*
 * 0xBC, numbers 0x00-0x3F: free in Documentation/userspace-api/ioctl/
 * ioctl-number.rst of 6.12 and 7.3 (0xB5 is rpmsg's). docs/uapi.md.
 * /dev/gpusleep 0x00-0x0F, domain fds 0x10-0x2F, group fd 0x30-0x37,
 * lease fd 0x38-0x3F.
 */
#define GPUSLEEP_IOC_MAGIC	0xBC

/*
 * Structures grow at their end only. The size of an ioctl's struct is the
 * one its command carries (_IOC_SIZE): a caller built against a newer,
 * larger struct is accepted when the part this module does not know is
 * zero (else -E2BIG); one built against an older, smaller struct is
 * zero-extended; below the first version's size it is -EINVAL. Output is
 * copied back up to the caller's size, the rest cleared. struct
 * gpusleep_result stays the last member of gpusleep_wait and
 * gpusleep_state. The sizes of the first version:
 */
#define GPUSLEEP_API_SIZE_VER0		32
#define GPUSLEEP_CREATE_SIZE_VER0	128	/* no tags: the default */
#define GPUSLEEP_ATTACH_SIZE_VER0	32
#define GPUSLEEP_OP_SIZE_VER0		48
#define GPUSLEEP_RESULT_SIZE_VER0	176
#define GPUSLEEP_WAIT_SIZE_VER0		208
#define GPUSLEEP_STATE_SIZE_VER0	448
#define GPUSLEEP_EVENTFD_SIZE_VER0	16
#define GPUSLEEP_EVENT_SIZE_VER0	40
#define GPUSLEEP_EVENT_SIZE_VER1	48	/* + deadline_ns */
#define GPUSLEEP_COMPLETE_SIZE_VER0	64
#define GPUSLEEP_GRANT_SIZE_VER0	24
#define GPUSLEEP_TAGS_SIZE_VER0		352
/* The second version of struct gpusleep_create: declared tags. */
#define GPUSLEEP_CREATE_SIZE_VER1	456

/* /dev/gpusleep */
#define GPUSLEEP_IOC_API		_IOWR(GPUSLEEP_IOC_MAGIC, 0x00, struct gpusleep_api)
#define GPUSLEEP_IOC_CREATE_DOMAIN	_IOWR(GPUSLEEP_IOC_MAGIC, 0x01, struct gpusleep_create)
#define GPUSLEEP_IOC_ATTACH		_IOW(GPUSLEEP_IOC_MAGIC, 0x02, struct gpusleep_attach)
#define GPUSLEEP_IOC_CREATE_GROUP	\
	_IOWR(GPUSLEEP_IOC_MAGIC, 0x03, struct gpusleep_group_create)
#define GPUSLEEP_IOC_OPEN_GROUP		\
	_IOWR(GPUSLEEP_IOC_MAGIC, 0x04, struct gpusleep_group_create)
#define GPUSLEEP_IOC_RECLAIM		\
	_IOWR(GPUSLEEP_IOC_MAGIC, 0x05, struct gpusleep_reclaim)
#define GPUSLEEP_IOC_RECLAIM_WAIT	\
	_IOWR(GPUSLEEP_IOC_MAGIC, 0x06, struct gpusleep_reclaim)
/* controller or engine fd */
#define GPUSLEEP_IOC_RELEASE		_IOWR(GPUSLEEP_IOC_MAGIC, 0x10, struct gpusleep_op)
#define GPUSLEEP_IOC_RESUME		_IOWR(GPUSLEEP_IOC_MAGIC, 0x11, struct gpusleep_op)
#define GPUSLEEP_IOC_IS_SLEEPING	_IO(GPUSLEEP_IOC_MAGIC, 0x12)	/* returns 0/1 */
#define GPUSLEEP_IOC_GET_STATE		_IOR(GPUSLEEP_IOC_MAGIC, 0x13, struct gpusleep_state)
#define GPUSLEEP_IOC_WAIT		_IOWR(GPUSLEEP_IOC_MAGIC, 0x14, struct gpusleep_wait)
#define GPUSLEEP_IOC_EVENTFD		_IOW(GPUSLEEP_IOC_MAGIC, 0x15, struct gpusleep_eventfd)
/* any domain fd */
#define GPUSLEEP_IOC_GET_TAGS		_IOR(GPUSLEEP_IOC_MAGIC, 0x16, struct gpusleep_tags)
#define GPUSLEEP_IOC_GET_TENANT		_IOR(GPUSLEEP_IOC_MAGIC, 0x17, struct gpusleep_tenant)
/* engine or agent fd */
#define GPUSLEEP_IOC_COMPLETE		_IOW(GPUSLEEP_IOC_MAGIC, 0x20, struct gpusleep_complete)
/* engine fd */
#define GPUSLEEP_IOC_GRANT		_IOW(GPUSLEEP_IOC_MAGIC, 0x21, struct gpusleep_grant)
/* agent fd */
#define GPUSLEEP_IOC_REPORT		_IOW(GPUSLEEP_IOC_MAGIC, 0x22, struct gpusleep_report)
/* engine fd */
#define GPUSLEEP_IOC_SET_TENANT		\
	_IOW(GPUSLEEP_IOC_MAGIC, 0x23, struct gpusleep_tenant_set)
/* group fd */
#define GPUSLEEP_IOC_GROUP_ADD		_IOWR(GPUSLEEP_IOC_MAGIC, 0x30, struct gpusleep_group_add)
#define GPUSLEEP_IOC_GROUP_RELEASE	_IOWR(GPUSLEEP_IOC_MAGIC, 0x31, struct gpusleep_group_op)
#define GPUSLEEP_IOC_GROUP_RESUME	_IOWR(GPUSLEEP_IOC_MAGIC, 0x32, struct gpusleep_group_op)
#define GPUSLEEP_IOC_GROUP_WAIT		_IOWR(GPUSLEEP_IOC_MAGIC, 0x33, struct gpusleep_group_wait)
#define GPUSLEEP_IOC_GROUP_EVENTFD	_IOW(GPUSLEEP_IOC_MAGIC, 0x34, struct gpusleep_eventfd)
/* lease fd */
#define GPUSLEEP_IOC_LEASE_INFO		_IOWR(GPUSLEEP_IOC_MAGIC, 0x38, struct gpusleep_lease)
#define GPUSLEEP_IOC_LEASE_RETURN	_IO(GPUSLEEP_IOC_MAGIC, 0x39)

#endif /* _UAPI_LINUX_GPUSLEEP_H */
