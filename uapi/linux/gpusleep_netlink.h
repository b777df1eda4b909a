/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * gpusleep: the "gpusleep" generic netlink family.
 *
 * Described by Documentation/netlink/specs/gpusleep.yaml; docs/node-tooling.md has the
 * walk-through. Values are those of uapi/linux/gpusleep.h (states, tags,
 * reasons, GPUSLEEP_SF_* flags, GPUSLEEP_OPF_* flags). Tag masks are
 * u32 with the domain's own bits: GPUSLEEP_A_TAG names them, one nest per
 * declared tag.
 *
 * Commands:
 *   GET        do: GPUSLEEP_A_ID -> one domain; dump: every live domain.
 *              Unprivileged. A dump that spans a domain's creation or
 *              destruction has NLM_F_DUMP_INTR set on a message.
 *   RELEASE    GPUSLEEP_A_ID, [TAGS], [OP_FLAGS], [TIMEOUT_MS]: start a
 *   RESUME     release / resume without waiting (GPUSLEEP_OPF_NONBLOCK is
 *              implied). Allowed to the domain owner's euid and to
 *              CAP_SYS_ADMIN, else -EPERM. The reply carries OP_ID (0 if
 *              refused), REASON, ERROR (0 or -errno) and BAD_TAGS; a
 *              refusal by the state machine is a reply, not an error.
 *   STATE_NTF  multicast on the "events" group at every state transition:
 *              the domain's attributes, FROM_STATE, OP_ID, TIME_NS (when
 *              it happened, CLOCK_REALTIME) and, when an operation
 *              finished, a RESULT nest. Never requested.
 *   STEP_NTF   multicast on "events" at each start and end of a step of
 *              an operation (drain, cache reset, each tag's unmap or map,
 *              KV repair), while the group has listeners: ID, NAME,
 *              [GROUP], OP_ID, STEP, STEP_TYPE, STEP_PHASE, STEP_TAGS,
 *              TIME_NS and, at the end, ERROR and REASON. Never requested.
 */
/*
 * GPUSLEEP_A_OWNER_PID is the creating process's pid in the pid namespace
 * of whoever asked (GET, RELEASE/RESUME replies; 0 where it is not seen)
 * and, in STATE_NTF, which has no one reader, in the initial namespace.
 */
#ifndef _UAPI_LINUX_GPUSLEEP_NETLINK_H
#define _UAPI_LINUX_GPUSLEEP_NETLINK_H

#define GPUSLEEP_GENL_NAME		"gpusleep"
#define GPUSLEEP_GENL_VERSION		1
#define GPUSLEEP_MCGRP_EVENTS		"events"

enum {
	GPUSLEEP_CMD_UNSPEC,
	GPUSLEEP_CMD_GET,
	GPUSLEEP_CMD_RELEASE,
	GPUSLEEP_CMD_RESUME,
	GPUSLEEP_CMD_STATE_NTF,
	GPUSLEEP_CMD_STEP_NTF,

	__GPUSLEEP_CMD_MAX,
	GPUSLEEP_CMD_MAX = (__GPUSLEEP_CMD_MAX - 1)
};

/* Attribute set "domain": requests, replies and notifications. */
enum {
	GPUSLEEP_A_UNSPEC,
	GPUSLEEP_A_PAD,
	GPUSLEEP_A_ID,			/* u32 */
	GPUSLEEP_A_NAME,		/* string */
	GPUSLEEP_A_GPU,			/* string */
	GPUSLEEP_A_OWNER_UID,		/* u32 */
	GPUSLEEP_A_OWNER_PID,		/* u32, see the note below */
	GPUSLEEP_A_STATE,		/* u32, enum gpusleep_dstate */
	GPUSLEEP_A_RELEASED,		/* u32, tag mask (the domain's bits) */
	GPUSLEEP_A_FLAGS,		/* u32, GPUSLEEP_SF_* */
	GPUSLEEP_A_CAPS,		/* u32, GPUSLEEP_CAP_* */
	GPUSLEEP_A_OP_IN_FLIGHT,	/* u64, op id or 0 */
	GPUSLEEP_A_LAST_OP_ID,		/* u64 */
	GPUSLEEP_A_LAST_REASON,		/* u32, newest failure's reason */
	GPUSLEEP_A_LAST_RELEASE_NS,	/* u64 */
	GPUSLEEP_A_LAST_RESUME_NS,	/* u64 */
	GPUSLEEP_A_COUNTERS,		/* nest, GPUSLEEP_A_CNT_* */
	GPUSLEEP_A_TAGS,		/* u32, request: tag mask, 0 default */
	GPUSLEEP_A_OP_FLAGS,		/* u32, request: GPUSLEEP_OPF_* */
	GPUSLEEP_A_TIMEOUT_MS,		/* u32, request: per step, 0 default */
	GPUSLEEP_A_OP_ID,		/* u64, reply / notification */
	GPUSLEEP_A_REASON,		/* u32, reply: enum gpusleep_reason */
	GPUSLEEP_A_ERROR,		/* s32, reply: 0 or -errno */
	GPUSLEEP_A_BAD_TAGS,		/* u32, reply */
	GPUSLEEP_A_FROM_STATE,		/* u32, notification */
	GPUSLEEP_A_RESULT,		/* nest, notification: GPUSLEEP_A_RES_* */
	GPUSLEEP_A_UNCONFIRMED,		/* u32, released tags not confirmed */
	GPUSLEEP_A_SHORTFALL,		/* u32, released tags not all freed */
	GPUSLEEP_A_TAG,			/* nest, multi: GPUSLEEP_A_TAG_*, in order */
	GPUSLEEP_A_RESIDENT_BYTES,	/* u64, held after the newest release */
	GPUSLEEP_A_RESIDENT_SOURCE,	/* u32, GPUSLEEP_RESIDENT_*, 0 unknown */
	GPUSLEEP_A_GROUP,		/* string, the domain's group, if any */
	GPUSLEEP_A_TIME_NS,		/* u64, notification: CLOCK_REALTIME */
	GPUSLEEP_A_STEP,		/* u32, step notification: its number */
	GPUSLEEP_A_STEP_TYPE,		/* u32, enum gpusleep_event_type */
	GPUSLEEP_A_STEP_PHASE,		/* u32, enum gpusleep_step_phase */
	GPUSLEEP_A_STEP_TAGS,		/* u32, the tags the step is about */

	__GPUSLEEP_A_MAX,
	GPUSLEEP_A_MAX = (__GPUSLEEP_A_MAX - 1)
};

/* GPUSLEEP_A_STEP_PHASE: which boundary of a step a STEP_NTF announces. */
enum gpusleep_step_phase {
	GPUSLEEP_STEP_START = 1,	/* its record was queued */
	GPUSLEEP_STEP_END = 2,		/* answered, failed, timed out, called off */
};

/* Attribute set "counters" (nested in GPUSLEEP_A_COUNTERS). */
enum {
	GPUSLEEP_A_CNT_UNSPEC,
	GPUSLEEP_A_CNT_PAD,
	GPUSLEEP_A_CNT_RELEASES,	/* u64, successful releases */
	GPUSLEEP_A_CNT_RESUMES,		/* u64, successful resumes */
	GPUSLEEP_A_CNT_FAILURES,	/* u64, failed operations */
	GPUSLEEP_A_CNT_CANCELS,		/* u64, releases cancelled by a resume */
	GPUSLEEP_A_CNT_TIMEOUTS,	/* u64, operations failed by a timeout */
	GPUSLEEP_A_CNT_SHORTFALLS,	/* u64, pauses that fell short */

	__GPUSLEEP_A_CNT_MAX,
	GPUSLEEP_A_CNT_MAX = (__GPUSLEEP_A_CNT_MAX - 1)
};

/* Attribute set "result" (nested in GPUSLEEP_A_RESULT): struct gpusleep_result. */
enum {
	GPUSLEEP_A_RES_UNSPEC,
	GPUSLEEP_A_RES_PAD,
	GPUSLEEP_A_RES_OP_ID,		/* u64 */
	GPUSLEEP_A_RES_KIND,		/* u32, GPUSLEEP_OP_* */
	GPUSLEEP_A_RES_TAGS,		/* u32 */
	GPUSLEEP_A_RES_ERROR,		/* s32, 0 or -errno */
	GPUSLEEP_A_RES_REASON,		/* u32 */
	GPUSLEEP_A_RES_DONE_TAGS,	/* u32 */
	GPUSLEEP_A_RES_DURATION_NS,	/* u64 */
	GPUSLEEP_A_RES_SHORTFALL_TAGS,	/* u32 */
	GPUSLEEP_A_RES_LOST_TAGS,	/* u32 */
	GPUSLEEP_A_RES_TAG,		/* nest, multi: GPUSLEEP_A_TAG_* */

	__GPUSLEEP_A_RES_MAX,
	GPUSLEEP_A_RES_MAX = (__GPUSLEEP_A_RES_MAX - 1)
};

/*
 * Attribute set "tag": one declared tag (nested in GPUSLEEP_A_TAG, one
 * nest per tag in declaration order, and in GPUSLEEP_A_RES_TAG, one per
 * tag the operation resolved to, with INDEX, BYTES and FREED only).
 */
enum {
	GPUSLEEP_A_TAG_UNSPEC,
	GPUSLEEP_A_TAG_PAD,
	GPUSLEEP_A_TAG_INDEX,		/* u32, its bit in the domain's masks */
	GPUSLEEP_A_TAG_NAME,		/* string */
	GPUSLEEP_A_TAG_KIND,		/* u32, GPUSLEEP_TAG_KIND_* */
	GPUSLEEP_A_TAG_BYTES,		/* u64, released (domain) / done (result) */
	GPUSLEEP_A_TAG_FREED,		/* u64, seen to come free */
	GPUSLEEP_A_TAG_GENERATION,	/* u64, backing generation */

	__GPUSLEEP_A_TAG_MAX,
	GPUSLEEP_A_TAG_MAX = (__GPUSLEEP_A_TAG_MAX - 1)
};

#endif /* _UAPI_LINUX_GPUSLEEP_NETLINK_H */
