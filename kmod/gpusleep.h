/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleep: internal definitions shared by the module's files.
 *
 * Files, one concern each:
 *   main.c    module init/exit, parameters, /dev/gpusleep (API, create, attach)
 *   domain.c  domain lifetime, id table, the domain fds (ioctl, read, poll)
 *   op.c      the release/resume state machine, step timeouts, death: it
 *             decides, and tells the rest through gs_announce() only
 *   announce.c fans a change out to its observers: sysfs, netlink,
 *             eventfds, waiters of blocking calls
 *   evq.c     the bounded event queues read by the engine and the agent
 *   user.c    what one user (a uid in a user namespace) may hold
 *   uarg.c    ioctl arguments that can grow (sizes, copy in and out)
 *   tags.c    the tags a domain declares (names, kinds, their bits)
 *   efd.c     eventfd registrations and their signalling
 *   sysfs.c   /sys/class/gpusleep/ state for node tooling
 *   genl.c    the "gpusleep" generic netlink family
 *   fault.c   fault injection for the reliability tests
 *   group.c   groups of domains: one release/resume over every rank
 *   tenant.c  what a tenant states (priority, consent), its agent's
 *             reports, and the node's host-RAM budget
 *   reclaim.c reclaims (bytes on a GPU, taken from its tenants) and the
 *             leases that give them back (docs/arbiter.md)
 *
 * Lock order (outer first):
 *   gs_arb_lock      (reclaim.c: per-GPU queues, reclaim history, leases;
 *                     no domain->lock is taken under it)
 *   gs_domains_lock  (main.c: the id table, the domain count)
 *   gs_groups_lock   (group.c: names and fd counts of live groups;
 *                     nothing nests in it)
 *   group->lock      (group.c: a group's ranks and its operation)
 *     domain->lock   (everything mutable in a domain; at most ONE domain's
 *                     lock is held at a time, so ranks need no order)
 *       gs_users_lock (user.c: per-user counts; a spinlock, a leaf)
 *       gs_ntf_lock   (genl.c: the notification pool and queue; a
 *                     spinlock, a leaf)
 *       gs_budget_lock (tenant.c: the node's host-RAM sum; a spinlock,
 *                     a leaf)
 * A domain tells its group of a change under domain->lock by queueing the
 * group's work (gs_group_kick()), never by taking group->lock. An
 * engine's or agent's COMPLETE whose answer the group waits for steps the
 * group itself after domain->lock, with a reference on it, if group->lock
 * is free; else the lock's holder steps it on unlocking
 * (gs_group_answered()).
 * No copy_to_user()/copy_from_user() runs under any of them: records and
 * results are copied to the stack under the lock and to the user after.
 *
 * Lifetimes (docs/blocking-and-lifetimes.md): each domain fd (engine,
 * agent, controller) holds one kref on its domain. The id table holds
 * none: it is emptied of a domain when the engine fd closes, and the
 * engine fd's reference covers the time before. The sysfs device of a
 * domain lives from creation to the engine fd's close. A group is freed
 * with its last kref: one per group fd, one for its ranks' back-pointers
 * (domain->group, set and cleared under domain->lock) until the group
 * detaches from them, one per queued run of its work. A group holds one
 * kref on each member domain, and its id, until it is freed. Blocking
 * calls keep nothing once they return: an interrupted one returns -EINTR
 * (or restarts, where that asks the same again).
 */
#ifndef _GPUSLEEP_INTERNAL_H
#define _GPUSLEEP_INTERNAL_H

#include <linux/types.h>
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/list.h>
#include <linux/lockdep.h>
#include <linux/uidgid.h>
#include <linux/ktime.h>
#include <linux/time_namespace.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include <linux/gpusleep.h>

struct net;
struct pid_namespace;
struct user_namespace;

/*
 * A user: a uid (kuid) in a user namespace. While something is charged to
 * it, user.c holds a reference on ns.
 */
struct gs_uid {
	struct user_namespace *ns;
	kuid_t uid;
};

/*
 * Records queued per reader, at most. op.c keeps at most one step record
 * (unread ones are taken back when their step ends) and one of each
 * notification (an unread one is replaced by the newer) in a queue: 3.
 */
#define GS_EVQ_LEN	8
#define GS_HIST_LEN	16	/* finished operations remembered */

/* Module parameters (main.c). */
extern unsigned int gs_max_domains;
extern unsigned int gs_max_eventfds;
extern unsigned int gs_drain_timeout_ms;
extern unsigned int gs_step_timeout_ms;

struct gs_evq {
	struct gpusleep_event rec[GS_EVQ_LEN];
	unsigned int head;
	unsigned int count;
	u64 dropped;		/* notifications lost to a full queue */
	/*
	 * hold: a pusher wakes no reader yet (a group starting its ranks
	 * under group->lock, gs_evq_hold()); due: one is owed since.
	 */
	bool hold;
	bool due;
	wait_queue_head_t wq;
};

/* The operation in flight; valid while domain->op_active. */
struct gs_op {
	u64 id;
	u32 kind;		/* GPUSLEEP_OP_* */
	u32 tags;		/* resolved tags */
	u32 flags;		/* GPUSLEEP_OPF_* */
	u32 timeout_ms;		/* per step; 0 = module parameters */
	u32 step;		/* number of the newest step sent */
	u32 await;		/* event type awaited, or GPUSLEEP_EV_NONE */
	u32 await_tag;		/* the tag of an awaited agent step */
	u32 todo;		/* tags still to pause/resume */
	u32 done_tags;		/* tags the agent confirmed */
	bool repair_sent;	/* resume: REPAIR_KV queued */
	bool paused_sched;	/* release: this op's DRAIN paused scheduling */
	bool hold;		/* release of a group's rank: stop drained */
	bool held;		/* drained, waiting for the group's go */
	bool stop;		/* its group failed: no new unmap step */
	u64 bytes[GPUSLEEP_MAX_TAGS];
	u64 freed[GPUSLEEP_MAX_TAGS];	/* measured to come free, per tag */
	u32 shortfall_tags;
	u32 lost_tags;
	ktime_t start;
	/* The step announced started and not yet ended (type 0: none). */
	u32 ntf_type;
	u32 ntf_tags;
};

/* An agent step that timed out; its late answer still updates the state. */
struct gs_late {
	bool valid;
	u64 op_id;
	u32 step;
	u32 type;
	u32 tag;
};

struct gs_counters {
	u64 releases;		/* release operations that succeeded */
	u64 resumes;		/* resume operations that succeeded */
	u64 failures;		/* operations that failed (any reason) */
	u64 cancels;		/* releases cancelled by a resume */
	u64 timeouts;		/* operations failed by a timeout */
	u64 shortfalls;		/* pauses whose memory did not all come free */
};

/* One declared tag (tags.c). */
struct gs_tag_decl {
	char name[GPUSLEEP_TAG_NAME_LEN];
	u32 kind;		/* GPUSLEEP_TAG_KIND_* */
};

/* A domain's declaration: fixed at creation, read without a lock. */
struct gs_tagset {
	u32 nr;			/* tags declared; tag i is BIT(i) */
	u32 all;		/* the mask of every declared tag */
	u32 kv;			/* the KV cache tag's bit, or 0 */
	struct gs_tag_decl tag[GPUSLEEP_MAX_TAGS];
};

struct gs_domain {
	struct kref kref;
	u32 id;
	/* owner is charged one GS_UC_DOMAINS until the domain is freed. */
	char name[GPUSLEEP_NAME_LEN];
	char gpu[GPUSLEEP_GPU_LEN];
	u32 caps;
	struct gs_tagset tags;
	kuid_t owner;
	struct gs_uid charged;	/* charged GS_UC_DOMAINS (gs_user_current()) */
	const struct cred *cred;	/* the creator's (its user namespace) */
	struct pid *owner_pid;	/* the creating process (referenced) */
	bool shared;		/* GPUSLEEP_CREATEF_SHARED */
	/*
	 * Unless shared: on owner_pid's exit wait queue (woken when the
	 * process exits, as for a pidfd), so that the creator's exit ends
	 * the domain even when no close passes (an fd table shared with
	 * CLONE_FILES lives on); owner_work kills it. Both go in free.
	 */
	struct wait_queue_entry owner_wait;
	struct work_struct owner_work;

	struct mutex lock;	/* protects everything below */
	u32 state;		/* enum gpusleep_dstate */
	/*
	 * Tags counted released: from the moment PAUSE_TAG may have been
	 * read until the agent confirms the tag mapped again.
	 */
	u32 released;
	u32 unconfirmed;	/* released tags whose unmap is unconfirmed */
	bool sched_paused;	/* the level: the engine may not schedule */
	bool kv_needs_repair;	/* kv_cache remapped, REPAIR_KV not yet done */
	bool dead;		/* engine fd closed */
	void *agent;		/* the agent's struct gs_file, or NULL */
	struct gs_group *group;	/* the group it is a rank of, or NULL */
	u32 group_rank;		/* its rank in group, when group is set */
	/*
	 * An engine's or agent's COMPLETE is running: a change the group
	 * acts on sets group_due instead of queueing the group's work, and
	 * the answering thread steps the group itself after the unlock
	 * (gs_group_answered()): no kworker per answer.
	 */
	bool group_defer;
	bool group_due;
	bool op_active;
	struct gs_op op;
	struct gs_late late;
	u64 next_op_id;
	u64 last_done_id;	/* newest finished operation (READ_ONCE ok) */
	struct gpusleep_result hist[GS_HIST_LEN];
	u64 bytes_released[GPUSLEEP_MAX_TAGS];
	u64 freed_bytes[GPUSLEEP_MAX_TAGS];	/* of released tags, measured */
	u32 shortfall;		/* released tags that did not all come free */
	/*
	 * What the agent's newest PAUSE_TAG answer said its process still
	 * holds (GPUSLEEP_RESIDENT_*; 0: not reported); cleared once nothing
	 * is released.
	 */
	u64 resident_bytes;
	u32 resident_source;
	/*
	 * Per tag: how many times the memory behind it was replaced (a
	 * confirmed remap of the released tag, a rollback that lost
	 * contents); replaced: the tags replaced since the last RESUME_SCHED.
	 */
	u64 generation[GPUSLEEP_MAX_TAGS];
	u32 replaced;
	struct gs_counters cnt;
	/*
	 * The tenant (tenant.c, docs/arbiter.md): its statement, when it
	 * was last made awake (ktime ns: created, or a resume that left
	 * nothing released), its agent's newest report, and the host RAM
	 * the node's budget counts for it: per tag the larger of what the
	 * report says its backup holds and what a release of it counts on
	 * (host_pending, from its start until the tag is resumed).
	 */
	s32 priority;
	u32 tenant_flags;	/* GPUSLEEP_TENF_* */
	u64 active_ns;
	bool reported;
	struct gpusleep_report report;
	u64 host_pending[GPUSLEEP_MAX_TAGS];
	u64 host_charged;	/* its share of the node's sum */
	/* reclaim.c: the lease holding leased (released, or being released) */
	u64 lease_id;
	u32 leased;
	u32 last_reason;	/* reason of the newest failed operation */
	u64 last_release_ns;
	u64 last_resume_ns;
	struct gs_evq engine_q;
	struct gs_evq agent_q;
	struct list_head efds;
	unsigned int nr_efds;
	struct list_head waiters;	/* struct gs_waiter, of the op in flight */

	wait_queue_head_t op_wq;	/* operation finished, domain died */
	struct delayed_work timeout_work;
	u64 timer_op;		/* the step the timer is armed for */
	u32 timer_step;
	ktime_t timer_deadline;	/* when that step times out (ktime) */

	/*
	 * The network namespace the creator was in (referenced): netlink
	 * shows the domain there only.
	 */
	struct net *net;

	struct device *dev;	/* sysfs; NULL when sysfs is unavailable */
	struct kernfs_node *kn_state;	/* sysfs_notify targets (sysfs.c) */
	struct kernfs_node *kn_released;
	struct kernfs_node *kn_leased;
	struct kernfs_node *kn_host;
	u32 notified_state;	/* values last noted for the watchers */
	u32 notified_released;
	u32 notified_leased;
	u64 notified_host;
	/*
	 * Changes notified late (sysfs.c): the nodes owed a notification,
	 * the work that sends it, and until when (jiffies) a change waits
	 * for it rather than being notified at once.
	 */
	u32 sysfs_owed;
	struct delayed_work sysfs_work;
	unsigned long sysfs_quiet_until;
};

/*
 * A blocking call waiting for an operation's result: a domain's (on
 * d->waiters, under domain->lock; announce.c delivers res) or a group's
 * (on the group's waiters, under its lock; group.c delivers gres). The
 * deliverer fills the result, sets done and unlinks it (list_del_init),
 * so every waiter gets its own operation's result however many
 * operations finish after it. node is always initialised: empty when on
 * no list.
 */
struct gs_waiter {
	struct list_head node;
	u64 op_id;
	bool done;
	union {
		struct gpusleep_result res;
		struct gpusleep_group_result gres;
	};
};

/* private_data of every domain fd. */
struct gs_file {
	struct gs_domain *d;
	u32 role;		/* GPUSLEEP_ROLE_* */
	/* The user charged for this fd (GS_UC_FDS, agents and controllers). */
	struct gs_uid uid;
	/*
	 * Controller: the newest finished operation whose result this fd
	 * fetched (WAIT, a blocking RELEASE/RESUME, GET_STATE's last);
	 * poll() reports EPOLLIN while a newer one has finished.
	 */
	u64 seen_done;
};

/*
 * An fd fetched the result of operation id: its seen_done moves up to id,
 * never down. No lock: seen_done is only compared by poll(), and two
 * threads of one fd may race here.
 */
static inline void gs_seen_upto(u64 *seen, u64 id)
{
	u64 old = READ_ONCE(*seen);

	while (id > old) {
		u64 cur = cmpxchg64(seen, old, id);

		if (cur == old)
			break;
		old = cur;
	}
}

/* uarg.c: an ioctl argument, with the caller's size of it. */
struct gs_uarg {
	void __user *p;
	size_t size;
};

/*
 * Is cmd the command want (any size from ver0 on)? 0, -ENOTTY (another
 * command), -EINVAL (smaller than the first version of the struct).
 */
int gs_uarg_init(struct gs_uarg *ua, unsigned int cmd, unsigned long arg,
		 unsigned int want, size_t ver0);
/* Copy in: 0, -EFAULT, -E2BIG (a newer caller's unknown tail not zero). */
int gs_uarg_in(const struct gs_uarg *ua, void *k, size_t ksize);
/* Copy out, up to the caller's size, clearing what the module lacks. */
int gs_uarg_out(const struct gs_uarg *ua, const void *k, size_t ksize);

/* user.c */
enum gs_ucount {
	GS_UC_DOMAINS,
	GS_UC_FDS,
	GS_UC_EVENTFDS,
	GS_UC_MAX
};

/* The user charged for what the caller makes: its euid in its namespace. */
struct gs_uid gs_user_current(void);
bool gs_uid_eq(struct gs_uid a, struct gs_uid b);
/*
 * Count one more of what for who, and for the owners of who's namespaces
 * up the chain (user.c): 0, -EDQUOT past a limit, -ENOMEM.
 */
int gs_user_charge(struct gs_uid who, enum gs_ucount what);
void gs_user_uncharge(struct gs_uid who, enum gs_ucount what);

/* domain.c */
/*
 * A new domain owned by the caller's euid, with the tags ts declares, or
 * ERR_PTR(-ENOMEM/-EDQUOT).
 */
struct gs_domain *gs_domain_create(const struct gpusleep_create *req,
				   const struct gs_tagset *ts);
void gs_domain_put(struct gs_domain *d);
/* The slab cache of domains (module init and exit). */
int gs_domains_cache_init(void);
void gs_domains_cache_exit(void);
struct gs_domain *gs_domain_get_by_id(u32 id);
/*
 * An fd of role for d; the caller's reference on d passes to it. Attaching
 * (granted false) checks who may; a grant from the engine does not.
 */
int gs_domain_open_fd(struct gs_domain *d, u32 role, bool granted);
/* May the caller attach to d with role (by id)? */
bool gs_may_attach(const struct gs_domain *d, u32 role);
/* May the holder of cred, in the caller's pid namespace, control d? */
bool gs_may_control(const struct gs_domain *d, const struct cred *cred);
/* The same for a caller whose pid namespace is ns (a work acting for it). */
bool gs_may_control_ns(const struct gs_domain *d, const struct cred *cred,
		       struct pid_namespace *ns);
/* Does the calling process act for the engine of d? */
bool gs_engine_here(const struct gs_domain *d);
/* The engine is gone: unlist the domain, fail what waits (idempotent). */
void gs_domain_kill(struct gs_domain *d);

/*
 * Blocking calls (domain.c), for domain and group fds alike: wait on wq
 * for w until deadline (0: none), lock (the domain's or the group's, whose
 * list w is on) not held. 0 when done; else -ETIMEDOUT or -ERESTARTSYS,
 * with w unlinked: an interrupted call keeps nothing, and its caller
 * decides whether the call may restart (docs/blocking-and-lifetimes.md).
 */
int gs_waiter_wait(struct mutex *lock, wait_queue_head_t *wq,
		   struct gs_waiter *w, ktime_t deadline);
/*
 * Make w wait for d's operation id: at once from the history if it
 * finished, else on d->waiters; domain->lock held. -ENOENT if finished
 * too long ago to be remembered.
 */
int gs_waiter_add(struct gs_domain *d, u64 id, struct gs_waiter *w);

/* tags.c */
/* The declaration of req (its default if none): 0 or -EINVAL. */
int gs_tags_declare(struct gs_tagset *ts, const struct gpusleep_create *req);
/* Do two declarations name the same tags, of the same kinds, in order? */
bool gs_tags_same(const struct gs_tagset *a, const struct gs_tagset *b);
/* GPUSLEEP_IOC_GET_TAGS's answer; domain->lock held (generations). */
void gs_tags_fill(const struct gs_domain *d, struct gpusleep_tags *out);
/* The names of mask's tags joined by ',', in order; the length written. */
int gs_tags_format(const struct gs_domain *d, u32 mask, char *buf,
		   size_t size);
const char *gs_tag_kind_name(u32 kind);

/* The domain of fd, an engine or controller fd, referenced; or ERR_PTR. */
struct gs_domain *gs_domain_from_fd(int fd);

/*
 * Deadlines are ktime (CLOCK_MONOTONIC), and none ends early. A jiffies
 * timer may fire up to a tick before the time asked for, measured in
 * ktime: a timer work armed with gs_jiffies_until() compares ktime with
 * its deadline when it runs and, early, arms itself again for the rest.
 */
static inline unsigned long gs_jiffies_until(ktime_t deadline)
{
	s64 ns = ktime_to_ns(ktime_sub(deadline, ktime_get()));

	/* Rounded up, plus the tick already under way. */
	return ns > 0 ? DIV_ROUND_UP_ULL(ns, TICK_NSEC) + 1 : 0;
}

/*
 * An absolute CLOCK_MONOTONIC time (ns, the host's) as the calling task
 * reads that clock: in its time namespace, whose offset a process moved
 * by CRIU carries. Every such time that leaves the module passes here,
 * in the reader's context (timens_add_monotonic() adds nothing outside a
 * time namespace, or without CONFIG_TIME_NS).
 */
static inline u64 gs_mono_for_reader(u64 ns)
{
	struct timespec64 ts = ns_to_timespec64(ns);

	timens_add_monotonic(&ts);
	return timespec64_to_ns(&ts);
}

/* What is left until deadline (0: none, KTIME_MAX), never negative. */
static inline ktime_t gs_time_left(ktime_t deadline)
{
	ktime_t left;

	if (!deadline)
		return KTIME_MAX;
	left = ktime_sub(deadline, ktime_get());
	return left > 0 ? left : 0;
}

/*
 * Wait interruptibly for cond until deadline (ktime; 0: no deadline):
 * 0 once cond holds, -ETIMEDOUT at the deadline, or -ERESTARTSYS. The
 * timeout is an hrtimer: it never fires before the deadline.
 */
#define gs_wait_until(wq, cond, deadline) ({				\
	long __r = wait_event_interruptible_hrtimeout(wq, cond,		\
						gs_time_left(deadline)); \
	__r == -ETIME ? -ETIMEDOUT : __r;				\
})

/* The index of a one-bit tag in the per-tag arrays (its bit number). */
static inline u32 gs_tag_index(u32 tag)
{
	return tag ? __ffs(tag) : 0;
}

/* main.c: the id table */
int gs_ids_add(struct gs_domain *d);
void gs_ids_remove(struct gs_domain *d);
struct gs_domain *gs_ids_get(u32 id);
unsigned int gs_ids_count(void);
/* The first live domain with id >= *id, referenced; *id is set to its id. */
struct gs_domain *gs_ids_next(u32 *id);
/* Bumped on every add and remove: the dump's consistency check (genl.c). */
unsigned int gs_ids_generation(void);

/*
 * op.c; all with domain->lock held unless noted. The *_valid() checks read
 * no state and need no lock: a request's own form (flags, padding,
 * reserved fields) is checked before anything about the domain, 0 or
 * -EINVAL (a RELEASE/RESUME refusal is written into req, reason invalid).
 */
int gs_op_req_valid(u32 kind, struct gpusleep_op *req);
/* Would gs_op_release() start? 0, or its refusal (req's out fields). */
int gs_op_release_check(struct gs_domain *d, struct gpusleep_op *req);
int gs_op_complete_valid(const struct gpusleep_complete *c);
int gs_op_release(struct gs_domain *d, struct gpusleep_op *req);
int gs_op_resume(struct gs_domain *d, struct gpusleep_op *req);
int gs_op_complete(struct gs_domain *d, struct gs_file *gf,
		   const struct gpusleep_complete *c);
int gs_op_result(struct gs_domain *d, u64 id, struct gpusleep_result *res);
void gs_op_agent_gone(struct gs_domain *d);
void gs_op_engine_gone(struct gs_domain *d);
void gs_op_timeout_work(struct work_struct *work);	/* takes the lock */
/* A record popped from q for a reader whose copy failed: never seen. */
void gs_op_unread(struct gs_domain *d, struct gs_evq *q,
		  const struct gpusleep_event *ev);
void gs_op_hold(struct gs_domain *d);
void gs_op_group_go(struct gs_domain *d, u64 op_id);
bool gs_op_group_cancel(struct gs_domain *d, u64 op_id);
bool gs_op_group_stop(struct gs_domain *d, u64 op_id);
void gs_fill_state(struct gs_domain *d, struct gpusleep_state *st);
/* The errno a failed or refused RELEASE/RESUME returns for a reason. */
int gs_reason_errno(u32 reason);
const char *gs_reason_name(u32 reason);
const char *gs_state_name(u32 state);

/*
 * announce.c: what op.c tells its observers, with domain->lock held. from
 * is the state before the change (d->state is the one after); op_id the
 * operation concerned, or 0; res the result of an operation that just
 * finished, or NULL; efd the GPUSLEEP_EFD_* events to signal.
 */
struct gs_change {
	u32 from;
	u64 op_id;
	const struct gpusleep_result *res;
	u32 efd;
	bool agent_gone;	/* the agent left: the group looks again */
};

void gs_announce(struct gs_domain *d, const struct gs_change *c);
/*
 * A step of the operation in flight started (the record of type, about
 * tags, was queued as d->op.step), or ended with err (0 or -errno) and
 * reason. An end without a start announced is ignored, so every way a
 * step or its operation ends may call gs_step_ended().
 */
void gs_step_started(struct gs_domain *d, u32 type, u32 tags);
void gs_step_ended(struct gs_domain *d, int err, u32 reason);

/* group.c */
struct gs_group;
long gs_group_create(const struct gs_uarg *ua);
long gs_group_open(const struct gs_uarg *ua);
int gs_groups_init(void);
/*
 * Rank d's state changed (d->lock held, d->group set): its group looks
 * at it again, from its work (or, during a COMPLETE, from the answering
 * thread: group_defer).
 */
void gs_group_kick(struct gs_domain *d);
/*
 * After a COMPLETE set d->group_due (d->lock held): a reference on d's
 * group, for gs_group_answered() once d->lock is dropped; or NULL.
 */
struct gs_group *gs_group_due(struct gs_domain *d);
/* Step g in the answering thread (no lock held), then put it. */
void gs_group_answered(struct gs_group *g);
/*
 * For the arbiter: d's group, referenced (d->lock held), or NULL; its
 * put; fn on each rank (group->lock held, no domain's) until it says
 * false; start a group release or resume of tags (0 and its id, or the
 * refusal's errno and reason); wait for a group operation to end, until
 * deadline (0: none): 0 and its result, or -ETIMEDOUT.
 */
struct gs_group *gs_group_get(struct gs_domain *d);
void gs_group_put_ref(struct gs_group *g);
bool gs_group_each(struct gs_group *g,
		   bool (*fn)(struct gs_domain *d, void *arg), void *arg);
int gs_group_start_for(struct gs_group *g, u32 kind, u32 tags, u64 *op_id,
		       u32 *reason);
int gs_group_wait_for(struct gs_group *g, u64 op_id, ktime_t deadline,
		      struct gpusleep_group_result *res);
/* Copy the group's name (fixed for its life) into buf. */
void gs_group_name(const struct gs_group *g, char *buf, size_t size);
/* Its id (fixed for its life, unique among live groups). */
u32 gs_group_id(const struct gs_group *g);
void gs_groups_exit(void);

/*
 * tenant.c. The ioctls, on a domain fd whose role domain.c checked;
 * gs_tenant_*() with domain->lock held.
 */
long gs_ioc_report(struct gs_file *gf, const struct gs_uarg *ua);
long gs_ioc_set_tenant(struct gs_file *gf, const struct gs_uarg *ua);
long gs_ioc_get_tenant(struct gs_file *gf, const struct gs_uarg *ua);
/* Would a release of tags fit the host budget? true if so. */
bool gs_tenant_fits(struct gs_domain *d, u32 tags);
/* Count a starting release of tags against it: false if it no longer fits. */
bool gs_tenant_reserve(struct gs_domain *d, u32 tags);
/* The state changed: what the budget counts for d follows it. */
void gs_tenant_sync(struct gs_domain *d);
/* What a release of tag would count on (backup-kind), else 0. */
u64 gs_tenant_backup_bytes(const struct gs_domain *d, u32 tag);
/* The node's budget (0: none) and the sum counted against it. */
u64 gs_host_budget(void);
u64 gs_host_used(void);

/* reclaim.c */
int gs_arb_init(void);
void gs_arb_exit(void);
long gs_reclaim(const struct gs_uarg *ua);
long gs_reclaim_wait(const struct gs_uarg *ua);
unsigned int gs_leases_held(void);
u64 gs_reclaims_started(void);

/* main.c: a name or GPU label: 0, -EINVAL, -ENAMETOOLONG */
int gs_check_label(const char *s, size_t size, bool name);

/* evq.c */
void gs_evq_init(struct gs_evq *q);
int gs_evq_push(struct gs_evq *q, const struct gpusleep_event *ev);
/* Hold the readers' wake-ups (domain->lock held). */
void gs_evq_hold(struct gs_evq *q);
/* Stop holding; true: a wake-up is owed (gs_evq_wake() after unlock). */
bool gs_evq_unhold(struct gs_evq *q);
void gs_evq_wake(struct gs_evq *q);
bool gs_evq_pop(struct gs_evq *q, struct gpusleep_event *ev);
void gs_evq_unpop(struct gs_evq *q, const struct gpusleep_event *ev);
bool gs_evq_withdraw(struct gs_evq *q, u64 op_id, u32 type);
bool gs_evq_withdraw_type(struct gs_evq *q, u32 type, u32 *tags);
void gs_evq_clear(struct gs_evq *q);

/* efd.c */
int gs_efd_set(struct gs_domain *d, struct gs_file *owner,
	       const struct gpusleep_eventfd *req);
void gs_efd_signal(struct gs_domain *d, u32 events);
void gs_efd_drop_owner(struct gs_domain *d, struct gs_file *owner);

/* sysfs.c */
int gs_sysfs_init(void);
void gs_sysfs_exit(void);
int gs_sysfs_add(struct gs_domain *d);
void gs_sysfs_remove(struct gs_domain *d);
/* Set up a new domain's delayed notification (before any change). */
void gs_sysfs_init_domain(struct gs_domain *d);
void gs_sysfs_changed(struct gs_domain *d);

/* genl.c */
int gs_genl_init(void);
void gs_genl_exit(void);
void gs_genl_notify(struct gs_domain *d, u32 from, u32 to, u64 op_id,
		    const struct gpusleep_result *res);
/* One boundary of a step (GPUSLEEP_CMD_STEP_NTF). */
struct gs_step_ntf {
	u64 op_id;
	u32 step;
	u32 type;		/* GPUSLEEP_EV_* */
	u32 phase;		/* GPUSLEEP_STEP_* */
	u32 tags;
	int err;		/* end: 0 or -errno */
	u32 reason;		/* end: GPUSLEEP_R_* */
};

void gs_genl_step_notify(struct gs_domain *d, const struct gs_step_ntf *s);

/* A step of a reclaim or a lease (GPUSLEEP_CMD_RECLAIM_NTF, _LEASE_NTF). */
struct gs_arb_ntf {
	u8 cmd;
	u32 phase;		/* GPUSLEEP_ARB_* */
	u64 reclaim_id;
	u64 lease_id;
	u8 uuid[16];
	u64 bytes;		/* asked */
	u64 taken;
	s32 priority;
	u32 reason;
	u32 why;		/* GPUSLEEP_RWHY_* */
	u32 still_released;
	const struct gpusleep_reclaim_victim *victim;	/* or NULL */
};

void gs_genl_arb_notify(struct net *net, const struct gs_arb_ntf *n);

/*
 * fault.c: every allocation, fd creation, eventfd lookup and user copy goes
 * through gs_fault(), so the tests can fail each one in turn. Only in a
 * build with GPUSLEEP_FAULT_INJECTION=y (the kernel's should_fail()).
 */
#ifdef GS_FAULT_INJECTION
bool gs_fault(void);
int gs_fault_init(void);
void gs_fault_exit(void);
#else
static inline bool gs_fault(void)
{
	return false;
}

static inline int gs_fault_init(void)
{
	return 0;
}

static inline void gs_fault_exit(void)
{
}
#endif

static inline void *gs_kzalloc(size_t size, gfp_t gfp)
{
	return gs_fault() ? NULL : kzalloc(size, gfp);
}

static __always_inline unsigned long
gs_copy_from_user(void *to, const void __user *from, unsigned long n)
{
	return gs_fault() ? n : copy_from_user(to, from, n);
}

static __always_inline unsigned long
gs_copy_to_user(void __user *to, const void *from, unsigned long n)
{
	return gs_fault() ? n : copy_to_user(to, from, n);
}

#endif /* _GPUSLEEP_INTERNAL_H */
