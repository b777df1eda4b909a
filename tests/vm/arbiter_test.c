// SPDX-License-Identifier: GPL-2.0
/*
 * The arbiter (docs/arbiter.md): tenants' reports and statements, the
 * host-RAM budget, reclaims and leases. No GPU: every engine and agent is
 * this process, answering each step with chosen bytes and statuses
 * (pump()), or a child playing a tenant that dies on cue.
 *
 * Fixture ten: one domain, played by hand. Fixture arb: several domains
 * on one GPU (the same UUID in their reports), taken from by reclaims.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define NB	GPUSLEEP_OPF_NONBLOCK
#define MiB	(1ULL << 20)
#define NOBODY	65534
#define MAXD	6

static const uint8_t gpu_a[16] = { 0x47, 0x50, 0x55, 0x2d, 0xa1, 1, 2, 3,
				   4, 5, 6, 7, 8, 9, 10, 11 };
static const uint8_t gpu_b[16] = { 0x47, 0x50, 0x55, 0x2d, 0xb2, 1, 2, 3,
				   4, 5, 6, 7, 8, 9, 10, 11 };

/* A report for a default-declared domain (weights, kv_cache). */
static void report_of(struct gpusleep_report *r, const uint8_t *uuid,
		      uint64_t w_bytes, uint32_t w_policy, uint64_t kv_bytes,
		      uint32_t kv_policy)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->gpu_uuid, uuid, 16);
	r->nr_tags = 2;
	r->tags[0].size_bytes = w_bytes;
	r->tags[0].mapped_bytes = w_bytes;
	r->tags[0].policy = w_policy;
	r->tags[0].content = w_policy == GPUSLEEP_POLICY_BACKUP ?
			     GPUSLEEP_CONTENT_KEPT : GPUSLEEP_CONTENT_UNDEFINED;
	r->tags[1].size_bytes = kv_bytes;
	r->tags[1].mapped_bytes = kv_bytes;
	r->tags[1].policy = kv_policy;
}

static int report(int agent, const struct gpusleep_report *r)
{
	return gs_err(ioctl(agent, GPUSLEEP_IOC_REPORT, r));
}

static int get_tenant(int fd, struct gpusleep_tenant *t)
{
	memset(t, 0xcc, sizeof(*t));
	return gs_err(ioctl(fd, GPUSLEEP_IOC_GET_TENANT, t));
}

static int set_tenant(int engine, int32_t prio, uint32_t flags)
{
	struct gpusleep_tenant_set t = { .priority = prio, .flags = flags };

	return gs_err(ioctl(engine, GPUSLEEP_IOC_SET_TENANT, &t));
}

/* Drop one capability from this process's effective set. */
static int drop_cap(int cap)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[cap / 32].effective &= ~(1U << (cap % 32));
	return syscall(SYS_capset, &h, d) ? -1 : 0;
}

/* The host budget (module parameter), as a string; "0": none. */
static int budget(const char *v)
{
	return gs_param_set("host_budget_bytes", v, NULL, 0);
}

static uint64_t host_used(void)
{
	char path[] = GS_PARAM_DIR "host_used_bytes", buf[32] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return ~0ULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtoull(buf, NULL, 10) : ~0ULL;
}

/* ------------------------------------------------------------------ */
/* One domain, played by hand                                          */

FIXTURE(ten) {
	int dev, engine, agent, ctl;
	uint32_t id;
};

FIXTURE_SETUP(ten)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	self->engine = gs_create(self->dev, "tenant", 0, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(ten)
{
	if (self->dev < 0)
		return;
	budget("0");
	close(self->ctl);
	close(self->agent);
	close(self->engine);
	close(self->dev);
}

/* Release tags, every step answered with success and bytes. */
static int release_by_hand(struct _test_data_ten *s, uint32_t tags,
			   uint64_t bytes)
{
	struct gpusleep_op op;
	uint32_t t;
	int r = gs_start(s->ctl, GPUSLEEP_IOC_RELEASE, tags, 0, &op);

	if (!r)
		r = gs_answer_next(s->engine, GPUSLEEP_EV_DRAIN, tags, 0, 0);
	if (!r && (tags & KV))
		r = gs_answer_next(s->engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0);
	for (t = W; !r && t <= KV; t <<= 1)
		if (tags & t)
			r = gs_answer_next(s->agent, GPUSLEEP_EV_PAUSE_TAG, t,
					   0, bytes);
	return r ? r : gs_finish(s->ctl, op.op_id, NULL);
}

/* A report is kept whole and read back by any fd, as it was sent. */
TEST_F(ten, report_read_back)
{
	struct gpusleep_report r;
	struct gpusleep_tenant t;

	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(0, t.report.nr_tags);	/* none yet */
	EXPECT_EQ(0, t.priority);
	EXPECT_EQ(0, t.flags);
	report_of(&r, gpu_a, 64 * MiB, GPUSLEEP_POLICY_BACKUP, 32 * MiB,
		  GPUSLEEP_POLICY_DISCARD);
	r.tags[0].flags = GPUSLEEP_RTF_VERIFIED;
	r.tags[1].content = GPUSLEEP_CONTENT_ZEROED;
	r.torch_reserved_bytes = 3 * MiB;
	r.graph_pool_bytes = 2 * MiB;
	r.process_bytes = 200 * MiB;
	r.process_source = GPUSLEEP_RESIDENT_PROCESS;
	ASSERT_EQ(0, report(self->agent, &r));
	ASSERT_EQ(0, get_tenant(self->engine, &t));
	EXPECT_EQ(0, memcmp(&r, &t.report, sizeof(r)));
	EXPECT_EQ(0, t.lease_id);
	EXPECT_EQ(0, t.leased_tags);
	EXPECT_EQ(0, t.pad);
	ASSERT_EQ(0, get_tenant(self->agent, &t));
	EXPECT_EQ(0, memcmp(&r, &t.report, sizeof(r)));
	/* The next replaces it whole. */
	report_of(&r, gpu_b, 1 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
		  GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, report(self->agent, &r));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(0, memcmp(&r, &t.report, sizeof(r)));
}

/*
 * Bad input: EINVAL, and the report in place stays as it was. One case
 * per rule of docs/arbiter.md's report.
 */
TEST_F(ten, report_invalid_changes_nothing)
{
	struct gpusleep_report good, r;
	struct gpusleep_tenant t;
	unsigned int c;

	report_of(&good, gpu_a, 8 * MiB, GPUSLEEP_POLICY_BACKUP, 4 * MiB,
		  GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, report(self->agent, &good));
	for (c = 0; c < 14; c++) {
		r = good;
		switch (c) {
		case 0: memset(r.gpu_uuid, 0, 16); break;	/* no GPU */
		case 1: r.nr_tags = 1; break;		/* not the declaration */
		case 2: r.nr_tags = 3; break;
		case 3: r.flags = 1; break;
		case 4: r.pad = 1; break;
		case 5: r.reserved[3] = 1; break;
		case 6: r.tags[2].size_bytes = 1; break;	/* past nr_tags */
		case 7: r.tags[0].policy = 2; break;
		case 8: r.tags[0].content = 3; break;
		case 9: r.tags[0].flags = 2; break;
		case 10: r.tags[0].mapped_bytes = 9 * MiB; break; /* > size */
		case 11: r.tags[1].content = GPUSLEEP_CONTENT_KEPT; break;
		case 12: r.tags[1].flags = GPUSLEEP_RTF_VERIFIED; break;
		case 13: r.process_bytes = 1; break;	/* without a source */
		}
		EXPECT_EQ(-EINVAL, report(self->agent, &r)) TH_LOG("case %u", c);
	}
	r = good;
	r.process_source = 3;
	EXPECT_EQ(-EINVAL, report(self->agent, &r));
	r = good;
	r.tags[1].pad = 1;
	EXPECT_EQ(-EINVAL, report(self->agent, &r));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(0, memcmp(&good, &t.report, sizeof(good)));
}

/* Only the domain's agent reports: EPERM on the engine and controller fds. */
TEST_F(ten, report_only_from_the_agent)
{
	struct gpusleep_report r;
	int agent2;

	report_of(&r, gpu_a, MiB, GPUSLEEP_POLICY_DISCARD, MiB,
		  GPUSLEEP_POLICY_DISCARD);
	EXPECT_EQ(-EPERM, report(self->engine, &r));
	EXPECT_EQ(-EPERM, report(self->ctl, &r));
	agent2 = dup(self->agent);
	close(self->agent);
	/* A copy of the closed agent's file is that same agent. */
	EXPECT_EQ(0, report(agent2, &r));
	close(agent2);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	EXPECT_EQ(0, report(self->agent, &r));
}

/* A dead domain takes no report: ENODEV (the form is checked first). */
TEST_F(ten, report_on_dead_domain)
{
	struct gpusleep_report r;

	report_of(&r, gpu_a, MiB, GPUSLEEP_POLICY_DISCARD, MiB,
		  GPUSLEEP_POLICY_DISCARD);
	close(self->engine);
	self->engine = -1;
	EXPECT_EQ(-ENODEV, report(self->agent, &r));
	r.flags = 1;
	EXPECT_EQ(-EINVAL, report(self->agent, &r));
	self->engine = open("/dev/null", O_RDONLY);
}

/* Priority and consent: read back; the form checked; engine fd only. */
TEST_F(ten, set_tenant_read_back)
{
	struct gpusleep_tenant_set ts;
	struct gpusleep_tenant t;

	ASSERT_EQ(0, set_tenant(self->engine, -5, GPUSLEEP_TENF_YIELDABLE));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(-5, t.priority);
	EXPECT_EQ(GPUSLEEP_TENF_YIELDABLE, t.flags);
	EXPECT_EQ(-EPERM, set_tenant(self->ctl, 0, 0));
	EXPECT_EQ(-EPERM, set_tenant(self->agent, 0, 0));
	EXPECT_EQ(-EINVAL, set_tenant(self->engine, GPUSLEEP_PRIO_MAX + 1, 0));
	EXPECT_EQ(-EINVAL, set_tenant(self->engine, GPUSLEEP_PRIO_MIN - 1, 0));
	EXPECT_EQ(-EINVAL, set_tenant(self->engine, 0, 2));
	memset(&ts, 0, sizeof(ts));
	ts.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->engine, GPUSLEEP_IOC_SET_TENANT,
					&ts)));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(-5, t.priority);
	EXPECT_EQ(GPUSLEEP_TENF_YIELDABLE, t.flags);
}

/*
 * Above the default needs CAP_SYS_NICE, as nice(2); lowering is free,
 * also from a priority a privileged engine set.
 */
TEST_F(ten, priority_above_default_needs_cap_sys_nice)
{
	pid_t p;

	if (geteuid() != 0)
		SKIP(return, "needs root to hold CAP_SYS_NICE first");
	p = fork();
	ASSERT_LE(0, p);
	if (p == 0) {
		struct gpusleep_tenant t;
		uint32_t id;
		int e, r = 0;

		e = gs_create(self->dev, "nice", 0, &id);
		if (e < 0)
			_exit(10);
		if (set_tenant(e, 10, 0))
			_exit(11);
		if (drop_cap(CAP_SYS_NICE))
			_exit(12);
		if (set_tenant(e, 11, 0) != -EPERM)
			r |= 1;
		if (set_tenant(e, 5, 0))		/* lower: free */
			r |= 2;
		if (set_tenant(e, 6, 0) != -EPERM)	/* up again: not */
			r |= 4;
		if (set_tenant(e, 0, 0) || set_tenant(e, -3, 0))
			r |= 8;
		if (get_tenant(e, &t) || t.priority != -3)
			r |= 16;
		_exit(r);
	}
	EXPECT_EQ(0, gs_reap(p));
}

/* ------------------------------------------------ verified contents */

/*
 * A RESUME_TAG answered -EBADMSG (its backup failed the checksum): the
 * resume fails VERIFY_FAILED/EBADMSG, never a silent success; the tag
 * stays released with its contents reported lost, and its generation
 * moves on once (when a later remap is confirmed), as for lost contents.
 */
TEST_F(ten, verify_failed_resume)
{
	struct gpusleep_result res;
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_by_hand(self, W, 8 * MiB));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, -EBADMSG, 0));
	EXPECT_EQ(-EBADMSG, gs_finish(self->ctl, op.op_id, &res));
	EXPECT_EQ(GPUSLEEP_R_VERIFY_FAILED, res.reason);
	EXPECT_EQ(W, res.lost_tags);
	EXPECT_EQ(0, res.done_tags);
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(0, st.generation[0]);
	EXPECT_EQ(GPUSLEEP_R_VERIFY_FAILED, st.last.reason);
	/* A blocking resume says so too, with its errno. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 8 * MiB));
	EXPECT_EQ(0, gs_finish(self->ctl, op.op_id, &res));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.released);
	EXPECT_EQ(1, st.generation[0]);
}

/* Another failed remap stays agent_failed: EBADMSG alone means the check. */
TEST_F(ten, other_resume_failure_is_agent_failed)
{
	struct gpusleep_result res;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_by_hand(self, W, 8 * MiB));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W,
				    -ENOMEM, 0));
	EXPECT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, &res));
	EXPECT_EQ(GPUSLEEP_R_AGENT_FAILED, res.reason);
	EXPECT_EQ(0, res.lost_tags);
}

/* ------------------------------------------------------ host budget */

/*
 * A release whose backup would pass the budget: refused HOST_BUDGET
 * (ENOSPC) before anything starts, naming the backup tags; nothing
 * changes (no drain, no counter, no operation id).
 */
TEST_F(ten, release_past_budget_refused)
{
	struct gpusleep_report r;
	struct gpusleep_state st;
	struct gpusleep_event ev;
	struct gpusleep_op op;

	report_of(&r, gpu_a, 64 * MiB, GPUSLEEP_POLICY_BACKUP, 32 * MiB,
		  GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, report(self->agent, &r));
	ASSERT_EQ(0, budget("33554432"));	/* 32 MiB */
	EXPECT_EQ(-ENOSPC, gs_release(self->ctl, 0, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_HOST_BUDGET, op.reason);
	EXPECT_EQ(W, op.bad_tags);
	EXPECT_EQ(0, op.op_id);
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 50));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
	/* A discard-kind release costs no host RAM. */
	EXPECT_EQ(0, release_by_hand(self, KV, 32 * MiB));
}

/*
 * What the budget counts: a release of a backup-kind tag counts on
 * max(mapped, host) from its start until the tag is resumed; after, what
 * the report says the tag holds. Seen in host_used_bytes and GET_TENANT.
 */
TEST_F(ten, budget_counts_a_release_until_resumed)
{
	struct gpusleep_report r;
	struct gpusleep_tenant t;
	struct gpusleep_op op;
	uint64_t base = host_used();

	report_of(&r, gpu_a, 64 * MiB, GPUSLEEP_POLICY_BACKUP, 32 * MiB,
		  GPUSLEEP_POLICY_DISCARD);
	r.tags[0].host_bytes = 16 * MiB;	/* staging kept across cycles */
	ASSERT_EQ(0, report(self->agent, &r));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(16 * MiB, t.host_charged_bytes);
	EXPECT_EQ(base + 16 * MiB, host_used());
	ASSERT_EQ(0, release_by_hand(self, W, 64 * MiB));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(64 * MiB, t.host_charged_bytes);
	EXPECT_EQ(base + 64 * MiB, host_used());
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    64 * MiB));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, get_tenant(self->ctl, &t));
	EXPECT_EQ(16 * MiB, t.host_charged_bytes);
	/* A dead domain holds nothing. */
	close(self->engine);
	self->engine = open("/dev/null", O_RDONLY);
	EXPECT_EQ(base, host_used());
}

/* Two domains: the second's backup does not fit beside the first's. */
TEST_F(ten, budget_is_node_wide)
{
	struct gpusleep_report r;
	struct gpusleep_op op;
	uint32_t id2;
	int e2, a2;

	report_of(&r, gpu_a, 64 * MiB, GPUSLEEP_POLICY_BACKUP, 0,
		  GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, report(self->agent, &r));
	e2 = gs_create(self->dev, "tenant2", 0, &id2);
	ASSERT_LE(0, e2);
	a2 = gs_attach(self->dev, id2, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, a2);
	ASSERT_EQ(0, report(a2, &r));
	ASSERT_EQ(0, budget("100663296"));	/* 96 MiB */
	ASSERT_EQ(0, release_by_hand(self, W, 64 * MiB));
	EXPECT_EQ(-ENOSPC, gs_release(e2, W, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_HOST_BUDGET, op.reason);
	ASSERT_EQ(0, budget("0"));		/* no limit */
	EXPECT_EQ(0, gs_release(e2, W, NB, &op));
	close(a2);
	close(e2);
}

TEST_HARNESS_MAIN
