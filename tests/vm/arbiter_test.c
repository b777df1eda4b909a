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
		case 0:	/* no GPU */
			memset(r.gpu_uuid, 0, 16);
			break;
		case 1:	/* not the declaration */
			r.nr_tags = 1;
			break;
		case 2:
			r.nr_tags = 3;
			break;
		case 3:
			r.flags = 1;
			break;
		case 4:
			r.pad = 1;
			break;
		case 5:
			r.reserved[3] = 1;
			break;
		case 6:	/* past nr_tags */
			r.tags[2].size_bytes = 1;
			break;
		case 7:
			r.tags[0].policy = 2;
			break;
		case 8:
			r.tags[0].content = 3;
			break;
		case 9:
			r.tags[0].flags = 2;
			break;
		case 10:	/* > size */
			r.tags[0].mapped_bytes = 9 * MiB;
			break;
		case 11:
			r.tags[1].content = GPUSLEEP_CONTENT_KEPT;
			break;
		case 12:
			r.tags[1].flags = GPUSLEEP_RTF_VERIFIED;
			break;
		case 13:	/* without a source */
			r.process_bytes = 1;
			break;
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

/* ------------------------------------------------------------------ */
/* Several tenants on one GPU: reclaims and leases                     */

#define LOGN	512

/* What a tenant does with a record: answer (default), hold it, fail it. */
struct script {
	uint32_t hold;
	uint32_t fail;
	uint32_t fail_tag;	/* fail only this tag's step (0: any) */
	int status;
};

struct logent {
	int dom;
	uint32_t type;
	uint32_t tags;
};

FIXTURE(arb) {
	int dev, n;
	int eng[MAXD], agent[MAXD], ctl[MAXD];
	uint32_t id[MAXD];
	struct gpusleep_report rep[MAXD];
	struct script sc[MAXD];
	struct gpusleep_event held[MAXD];	/* the record held back */
	struct logent log[LOGN];
	int nlog;
	uint8_t gpu[16];
};

FIXTURE_SETUP(arb)
{
	memset(self->eng, 0xff, sizeof(self->eng));
	memset(self->agent, 0xff, sizeof(self->agent));
	memset(self->ctl, 0xff, sizeof(self->ctl));
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	if (geteuid() != 0)
		GS_SETUP_SKIP("needs root (priorities above 0, other users)");
	/* A GPU of this test's own: other tests' domains are elsewhere. */
	memcpy(self->gpu, gpu_a, 16);
	self->gpu[15] = (uint8_t)getpid();
	self->gpu[14] = (uint8_t)(getpid() >> 8);
}

FIXTURE_TEARDOWN(arb)
{
	int i;

	if (self->dev < 0)
		return;
	budget("0");
	for (i = 0; i < MAXD; i++) {
		if (self->ctl[i] >= 0)
			close(self->ctl[i]);
		if (self->agent[i] >= 0)
			close(self->agent[i]);
		if (self->eng[i] >= 0)
			close(self->eng[i]);
	}
	close(self->dev);
}

/*
 * Tenant i: a domain with weights and kv_cache of w and kv bytes with
 * those policies, on this test's GPU, at priority prio with flags.
 */
static void tenant(struct __test_metadata *_metadata, FIXTURE_DATA(arb) *self,
		   int i, int32_t prio, uint32_t flags, uint64_t w,
		   uint32_t wpol, uint64_t kv, uint32_t kvpol)
{
	char nm[32];

	snprintf(nm, sizeof(nm), "ten%d", i);
	self->eng[i] = gs_create(self->dev, nm, 0, &self->id[i]);
	ASSERT_LE(0, self->eng[i]);
	self->agent[i] = gs_attach(self->dev, self->id[i], GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent[i]);
	self->ctl[i] = gs_attach(self->dev, self->id[i],
				 GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl[i]);
	/* A record seen by poll() may be gone by the read: never block. */
	ASSERT_EQ(0, fcntl(self->eng[i], F_SETFL, O_NONBLOCK));
	ASSERT_EQ(0, fcntl(self->agent[i], F_SETFL, O_NONBLOCK));
	ASSERT_EQ(0, set_tenant(self->eng[i], prio, flags));
	report_of(&self->rep[i], self->gpu, w, wpol, kv, kvpol);
	ASSERT_EQ(0, report(self->agent[i], &self->rep[i]));
	if (i >= self->n)
		self->n = i + 1;
}

static void logit(FIXTURE_DATA(arb) *self, int dom,
		  const struct gpusleep_event *ev)
{
	if (self->nlog < LOGN) {
		self->log[self->nlog].dom = dom;
		self->log[self->nlog].type = ev->type;
		self->log[self->nlog].tags = ev->tags;
		self->nlog++;
	}
}

/* Read and handle one record of fd (tenant i); 1 if there was one. */
static int pump_fd(FIXTURE_DATA(arb) *self, int i, int fd)
{
	struct script *sc = &self->sc[i];
	struct gpusleep_complete c;
	struct gpusleep_event ev;
	uint64_t bytes;

	if (fd < 0 || gs_next(fd, &ev, 0))
		return 0;
	logit(self, i, &ev);
	if (!gs_needs_answer(ev.type))
		return 1;
	if (sc->hold && ev.type == sc->hold) {
		self->held[i] = ev;
		return 1;
	}
	bytes = ev.type == GPUSLEEP_EV_PAUSE_TAG ||
		ev.type == GPUSLEEP_EV_RESUME_TAG ?
		self->rep[i].tags[ev.tags == KV].mapped_bytes : 0;
	gs_complete_of(&c, &ev, 0, bytes);
	if (sc->fail && ev.type == sc->fail &&
	    (!sc->fail_tag || sc->fail_tag == ev.tags)) {
		c.status = sc->status;
		c.bytes = 0;
	} else if (ev.type == GPUSLEEP_EV_PAUSE_TAG) {
		/* The driver saw all of it come free. */
		c.flags = GPUSLEEP_CF_MEASURED;
		c.freed_bytes = bytes;
	}
	ioctl(fd, GPUSLEEP_IOC_COMPLETE, &c);
	return 1;
}

/* Play every tenant until nothing comes for quiet_ms. */
static void pump(FIXTURE_DATA(arb) *self, int quiet_ms)
{
	struct pollfd p[2 * MAXD];
	int i, n, r;

	for (;;) {
		n = 0;
		for (i = 0; i < self->n; i++) {
			p[n].fd = self->eng[i];
			p[n++].events = POLLIN;
			p[n].fd = self->agent[i];
			p[n++].events = POLLIN;
		}
		r = poll(p, n, quiet_ms);
		if (r <= 0)
			return;
		r = 0;
		for (i = 0; i < self->n; i++) {
			r += pump_fd(self, i, self->eng[i]);
			r += pump_fd(self, i, self->agent[i]);
		}
		if (!r)
			return;
	}
}

static void reclaim_of(struct gpusleep_reclaim *r, const uint8_t *uuid,
		       uint64_t bytes, int32_t prio, uint32_t flags)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->gpu_uuid, uuid, 16);
	r->bytes = bytes;
	r->priority = prio;
	r->flags = flags;
}

static int reclaim_wait(int dev, uint64_t id, uint32_t ms,
			struct gpusleep_reclaim *out,
			struct gpusleep_reclaim_victim *v, uint32_t nv)
{
	struct gpusleep_reclaim r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.op_id = id;
	r.timeout_ms = ms;
	r.victims = (uintptr_t)v;
	r.nr_victims = v ? nv : 0;
	r.victim_size = sizeof(*v);
	ret = gs_err(ioctl(dev, GPUSLEEP_IOC_RECLAIM_WAIT, &r));
	if (out)
		*out = r;
	return ret;
}

/*
 * How long a helper plays the tenants before it gives up and says what
 * it waited for: inside the harness's 30 s per test, so that a hang is
 * reported with its place, not as the harness's bare timeout.
 */
#define PLAY_MS	20000

/* What each tenant is, on stderr: for a helper that gave up. */
static void say_states(FIXTURE_DATA(arb) *self, const char *what)
{
	struct gpusleep_state st;
	int i;

	for (i = 0; i < self->n; i++) {
		if (self->ctl[i] < 0 || gs_state(self->ctl[i], &st)) {
			fprintf(stderr, "# %s: tenant %d: no state\n", what, i);
			continue;
		}
		fprintf(stderr, "# %s: tenant %d: state %u released %#x op %llu in flight %llu\n",
			what, i, st.state, st.released,
			(unsigned long long)st.last_op_id,
			(unsigned long long)st.op_in_flight);
	}
}

/* Run a started reclaim to its end, playing every tenant. */
static int drive(FIXTURE_DATA(arb) *self, uint64_t id,
		 struct gpusleep_reclaim *out,
		 struct gpusleep_reclaim_victim *v, uint32_t nv)
{
	uint64_t end = gs_mono_ns() + PLAY_MS * 1000000ULL;
	int r;

	do {
		pump(self, 20);
		r = reclaim_wait(self->dev, id, 10, out, v, nv);
		if (r != -ETIMEDOUT)
			return r;
	} while (gs_mono_ns() < end);
	say_states(self, "the reclaim never ended");
	return -ETIMEDOUT;
}

/* Start a reclaim (NONBLOCK) and drive it: RECLAIM_WAIT's answer. */
static int take(FIXTURE_DATA(arb) *self, uint64_t bytes, int32_t prio,
		uint32_t flags, struct gpusleep_reclaim *out,
		struct gpusleep_reclaim_victim *v, uint32_t nv, int *lease)
{
	struct gpusleep_reclaim r;
	int ret;

	reclaim_of(&r, self->gpu, bytes, prio,
		   flags | GPUSLEEP_RECLAIMF_NONBLOCK);
	ret = gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r));
	if (lease)
		*lease = (flags & GPUSLEEP_RECLAIMF_LEASE) ? ret : -1;
	if (ret < 0)
		return ret;
	if (r.state != GPUSLEEP_RECLAIM_RUNNING && r.state != GPUSLEEP_RECLAIM_DONE)
		return -EPROTO;
	return drive(self, r.op_id, out, v, nv);
}

static uint32_t released(FIXTURE_DATA(arb) *self, int i)
{
	struct gpusleep_state st;

	if (gs_state(self->ctl[i], &st))
		return ~0U;
	return st.released;
}

/* Give back a lease by closing it, and play the resumes it brings. */
static void give_back(FIXTURE_DATA(arb) *self, int lease)
{
	int i, k, left = 1;

	close(lease);
	for (i = 0; i < 200 && left; i++) {
		pump(self, 20);
		for (k = left = 0; k < self->n; k++)
			left |= self->eng[k] >= 0 && released(self, k);
	}
}

/* Return a lease with LEASE_RETURN while playing: its answer. */
static int lease_return(FIXTURE_DATA(arb) *self, int lease)
{
	struct pollfd p = { .fd = lease, .events = POLLIN };
	int r;

	uint64_t end = gs_mono_ns() + PLAY_MS * 1000000ULL;

	r = gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_RETURN,
			 GPUSLEEP_LEASE_RETURN_NONBLOCK));
	if (r != -EINPROGRESS)
		return r;
	do {
		pump(self, 10);
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
			break;
	} while (gs_mono_ns() < end);
	/* Never blocking: a return that did not end is -EINPROGRESS. */
	r = gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_RETURN,
			 GPUSLEEP_LEASE_RETURN_NONBLOCK));
	if (r == -EINPROGRESS)
		say_states(self, "the lease's return never ended");
	return r;
}

/* The position of tenant i's first record of type in the log, or -1. */
static int first_of(FIXTURE_DATA(arb) *self, int i, uint32_t type)
{
	int k;

	for (k = 0; k < self->nlog; k++)
		if (self->log[k].dom == i && self->log[k].type == type)
			return k;
	return -1;
}

/* Lowest priority first; the owner takes at or below its claim. */
TEST_F(arb, lowest_priority_first)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, 5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	tenant(_metadata, self, 1, -10, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	tenant(_metadata, self, 2, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_RECLAIM_DONE, r.state);
	EXPECT_EQ(0, r.reason);
	EXPECT_EQ(0, r.why);
	EXPECT_EQ(64 * MiB, r.taken_bytes);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[1], v[0].domain);
	EXPECT_EQ(W, v[0].tags);
	EXPECT_EQ(64 * MiB, v[0].freed_bytes);
	EXPECT_EQ(0, v[0].flags);
	EXPECT_NE(0, v[0].op_id);
	EXPECT_EQ(W, released(self, 1));
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(0, released(self, 2));
	/* More than the claim may take: priority 5 is above it. */
	ASSERT_EQ(0, take(self, 256 * MiB, 0, GPUSLEEP_RECLAIMF_PARTIAL, &r,
			  v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_EQ(64 * MiB, r.taken_bytes);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[2], v[0].domain);
	EXPECT_TRUE(r.why & GPUSLEEP_RWHY_PRIORITY);
	EXPECT_EQ(0, released(self, 0));
}

/* Among equals, the least recently active (made awake) first, not id. */
TEST_F(arb, least_recently_active_among_equals)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	struct gpusleep_op op;
	int i;

	for (i = 0; i < 3; i++)
		tenant(_metadata, self, i, 0, 0, 64 * MiB,
		       GPUSLEEP_POLICY_DISCARD, 0, 0);
	/* 0 and 1 are made awake again, in that order: 2 is the oldest. */
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, gs_release(self->ctl[i], W, NB, &op));
		pump(self, 50);
		ASSERT_EQ(0, gs_resume(self->ctl[i], W, NB, &op));
		pump(self, 50);
		ASSERT_EQ(0, released(self, i));
	}
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[2], v[0].domain);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[0], v[0].domain);
}

/* Within a domain: discard-kind before backup-kind, the fewest that reach. */
TEST_F(arb, discard_tags_before_backup)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	/* weights (declared first) backs up, kv_cache discards. */
	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_BACKUP,
	       32 * MiB, GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, take(self, 32 * MiB, 0, 0, &r, v, 4, NULL));
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(KV, v[0].tags);
	EXPECT_EQ(KV, released(self, 0));
	/* The engine reset its prefix cache before KV went. */
	EXPECT_LE(0, first_of(self, 0, GPUSLEEP_EV_RESET_CACHES));
	EXPECT_GT(first_of(self, 0, GPUSLEEP_EV_PAUSE_TAG),
		  first_of(self, 0, GPUSLEEP_EV_RESET_CACHES));
	/* Then weights, its backup-kind tag. */
	ASSERT_EQ(0, take(self, 32 * MiB, 0, 0, &r, v, 4, NULL));
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(W, v[0].tags);
}

/* Both kinds in one release when one tag is not enough. */
TEST_F(arb, fewest_tags_that_reach)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_BACKUP,
	       32 * MiB, GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, take(self, 80 * MiB, 0, 0, &r, v, 4, NULL));
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(W | KV, v[0].tags);
	EXPECT_EQ(96 * MiB, r.taken_bytes);
}

/* A tenant that refuses (its engine fails the drain) is reported; next. */
TEST_F(arb, refusing_tenant_reported_next_tried)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	tenant(_metadata, self, 1, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	self->sc[0].fail = GPUSLEEP_EV_DRAIN;
	self->sc[0].status = -EIO;
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(0, r.reason);
	ASSERT_EQ(2, r.nr_victims);
	EXPECT_EQ(self->id[0], v[0].domain);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_FAILED);
	EXPECT_EQ(GPUSLEEP_R_ENGINE_FAILED, v[0].reason);
	EXPECT_EQ(-EIO, v[0].error);
	EXPECT_EQ(0, v[0].freed_bytes);
	EXPECT_EQ(self->id[1], v[1].domain);
	EXPECT_EQ(0, v[1].flags);
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(W, released(self, 1));
}

/* A victim failing mid-release: what it released is resumed, nothing half. */
TEST_F(arb, failing_victim_rolled_back)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       64 * MiB, GPUSLEEP_POLICY_DISCARD);
	tenant(_metadata, self, 1, 0, 0, 128 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	self->sc[0].fail = GPUSLEEP_EV_PAUSE_TAG;
	/* A release pauses in bit order: weights went, kv_cache fails. */
	self->sc[0].fail_tag = KV;
	self->sc[0].status = -ENOMEM;
	ASSERT_EQ(0, take(self, 128 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(0, r.reason);
	ASSERT_EQ(2, r.nr_victims);
	EXPECT_EQ(W | KV, v[0].tags);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_FAILED);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_ROLLED_BACK);
	EXPECT_NE(0, v[0].resume_op_id);
	EXPECT_EQ(0, v[0].resume_error);
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(W, released(self, 1));
}

/* Short, all or nothing: what was taken is resumed; ENOSPC's reason. */
TEST_F(arb, shortfall_gives_back_everything)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, take(self, 128 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_TRUE(r.why & GPUSLEEP_RWHY_NO_CANDIDATE);
	EXPECT_EQ(0, r.taken_bytes);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_ROLLED_BACK);
	EXPECT_EQ(0, released(self, 0));
}

/* PARTIAL keeps what it took. */
TEST_F(arb, partial_keeps_what_it_took)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, take(self, 128 * MiB, 0, GPUSLEEP_RECLAIMF_PARTIAL, &r,
			  v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_EQ(64 * MiB, r.taken_bytes);
	EXPECT_EQ(0, v[0].flags & GPUSLEEP_RVF_ROLLED_BACK);
	EXPECT_EQ(W, released(self, 0));
}

/* A blocking RECLAIM that comes short is ENOSPC, with the result written. */
TEST_F(arb, blocking_shortfall_is_enospc)
{
	struct gpusleep_reclaim r;

	reclaim_of(&r, self->gpu, 64 * MiB, 0, 0);
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r)));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_EQ(GPUSLEEP_RWHY_NO_CANDIDATE, r.why);
	EXPECT_EQ(GPUSLEEP_RECLAIM_DONE, r.state);
	EXPECT_NE(0, r.op_id);
	EXPECT_EQ(-1, r.lease_fd);
}

/* The form of a request: EINVAL, nothing started; priority > 0: EPERM. */
TEST_F(arb, reclaim_invalid)
{
	struct gpusleep_reclaim r, r0;
	uint64_t before;
	unsigned int c;

	reclaim_of(&r0, self->gpu, 64 * MiB, 0, 0);
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r0)));
	before = r0.op_id;
	for (c = 0; c < 8; c++) {
		r = r0;
		r.op_id = 0;
		switch (c) {
		case 0:
			r.bytes = 0;
			break;
		case 1:
			memset(r.gpu_uuid, 0, 16);
			break;
		case 2:
			r.flags = 1U << 4;
			break;
		case 3:
			r.pad = 1;
			break;
		case 4:
			r.reserved[0] = 1;
			break;
		case 5:
			r.priority = GPUSLEEP_PRIO_MIN - 1;
			break;
		case 6:
			r.victims = 8;
			r.nr_victims = 1;
			r.victim_size = 8;
			break;
		case 7:
			r.priority = GPUSLEEP_PRIO_MAX + 1;
			break;
		}
		EXPECT_EQ(-EINVAL, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM,
						&r))) TH_LOG("case %u", c);
	}
	r = r0;
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r)));
	EXPECT_EQ(before + 1, r.op_id);	/* none of those started */
	EXPECT_EQ(-ENOENT, reclaim_wait(self->dev, r.op_id + 100, 0, NULL,
					NULL, 0));
}

/* ----------------------------------------------------------- leases */

/*
 * A lease keeps what it took: a resume by anyone else is LEASED (EAGAIN);
 * its close resumes it, and the lease lets go of it.
 */
TEST_F(arb, lease_holds_until_closed)
{
	struct gpusleep_tenant t;
	struct gpusleep_reclaim r;
	struct gpusleep_op op;
	int lease;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	ASSERT_LE(0, lease);
	EXPECT_NE(0, r.lease_id);
	ASSERT_EQ(0, get_tenant(self->ctl[0], &t));
	EXPECT_EQ(r.lease_id, t.lease_id);
	EXPECT_EQ(W, t.leased_tags);
	EXPECT_EQ(-EAGAIN, gs_resume(self->ctl[0], 0, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_LEASED, op.reason);
	EXPECT_EQ(W, op.bad_tags);
	EXPECT_EQ(-EAGAIN, gs_resume(self->ctl[0], W, NB, &op));
	EXPECT_EQ(W, released(self, 0));
	give_back(self, lease);
	EXPECT_EQ(0, released(self, 0));
	ASSERT_EQ(0, get_tenant(self->ctl[0], &t));
	EXPECT_EQ(0, t.lease_id);
	EXPECT_EQ(0, t.leased_tags);
}

/* Read a file of the class, or of domain id's directory, no newline. */
static int sysfs_read(uint32_t id, const char *name, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	if (id)
		snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/%s",
			 id, name);
	else
		snprintf(path, sizeof(path), "/sys/class/gpusleep/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

/*
 * A lease in sysfs: the domain's leased_tags and lease_id (poll() wakes on
 * leased_tags), the class's count of leases held.
 */
TEST_F(arb, lease_shown_in_sysfs)
{
	struct gpusleep_reclaim r;
	char path[256], buf[64];
	struct pollfd p;
	long before;
	int lease;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, sysfs_read(0, "leases", buf, sizeof(buf)));
	before = atol(buf);
	snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/leased_tags",
		 self->id[0]);
	p.fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, p.fd);
	ASSERT_LE(0, read(p.fd, buf, sizeof(buf)));
	p.events = POLLPRI | POLLERR;
	ASSERT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	ASSERT_EQ(0, sysfs_read(self->id[0], "leased_tags", buf, sizeof(buf)));
	EXPECT_STREQ("weights", buf);
	ASSERT_EQ(0, sysfs_read(self->id[0], "lease_id", buf, sizeof(buf)));
	EXPECT_EQ(r.lease_id, strtoull(buf, NULL, 10));
	ASSERT_EQ(0, sysfs_read(0, "leases", buf, sizeof(buf)));
	EXPECT_EQ(before + 1, atol(buf));
	ASSERT_EQ(0, sysfs_read(0, "reclaims", buf, sizeof(buf)));
	EXPECT_LE(r.op_id, strtoull(buf, NULL, 10));
	give_back(self, lease);
	ASSERT_EQ(0, sysfs_read(self->id[0], "leased_tags", buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	ASSERT_EQ(0, sysfs_read(0, "leases", buf, sizeof(buf)));
	EXPECT_EQ(before, atol(buf));
	close(p.fd);
}

/* LEASE_INFO and LEASE_RETURN: the victims, their resumes, the count. */
TEST_F(arb, lease_info_and_return)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	struct gpusleep_lease li;
	int lease;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	memset(&li, 0, sizeof(li));
	li.victims = (uintptr_t)v;
	li.nr_victims = 4;
	li.victim_size = sizeof(v[0]);
	ASSERT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	EXPECT_EQ(r.lease_id, li.id);
	EXPECT_EQ(r.op_id, li.reclaim_op_id);
	EXPECT_EQ(GPUSLEEP_LEASE_HELD, li.state);
	EXPECT_EQ(64 * MiB, li.taken_bytes);
	EXPECT_EQ(0, memcmp(li.gpu_uuid, self->gpu, 16));
	ASSERT_EQ(1, li.nr_victims);
	EXPECT_EQ(self->id[0], v[0].domain);
	EXPECT_EQ(0, lease_return(self, lease));
	memset(&li, 0, sizeof(li));
	li.victims = (uintptr_t)v;
	li.nr_victims = 4;
	li.victim_size = sizeof(v[0]);
	ASSERT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	EXPECT_EQ(GPUSLEEP_LEASE_RETURNED, li.state);
	EXPECT_EQ(0, li.still_released);
	ASSERT_EQ(1, li.nr_victims);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_RETURNED);
	EXPECT_NE(0, v[0].resume_op_id);
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(-EINVAL, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_RETURN, 2)));
	close(lease);
}

/* Its return resumes the highest priority first. */
TEST_F(arb, lease_returns_highest_priority_first)
{
	struct gpusleep_reclaim r;
	int lease;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	tenant(_metadata, self, 1, -1, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	ASSERT_EQ(0, take(self, 128 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	EXPECT_EQ(W, released(self, 0));
	EXPECT_EQ(W, released(self, 1));
	self->nlog = 0;
	EXPECT_EQ(0, lease_return(self, lease));
	close(lease);
	ASSERT_LE(0, first_of(self, 1, GPUSLEEP_EV_RESUME_TAG));
	EXPECT_LT(first_of(self, 1, GPUSLEEP_EV_RESUME_TAG),
		  first_of(self, 0, GPUSLEEP_EV_RESUME_TAG));
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(0, released(self, 1));
}

/* A resume that fails at the return is reported; the next is tried. */
TEST_F(arb, lease_return_failure_reported_next_tried)
{
	struct gpusleep_reclaim r;
	int lease;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	tenant(_metadata, self, 1, -1, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	ASSERT_EQ(0, take(self, 128 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	/* The GPU is still full for tenant 1: its remap fails. */
	self->sc[1].fail = GPUSLEEP_EV_RESUME_TAG;
	self->sc[1].status = -ENOMEM;
	EXPECT_EQ(1, lease_return(self, lease));
	close(lease);
	EXPECT_EQ(W, released(self, 1));	/* truthful, resumable by hand */
	EXPECT_EQ(0, released(self, 0));
}

/* The holder dies: its lease closes with it, and the victims wake. */
TEST_F(arb, dying_lease_holder_wakes_the_victims)
{
	pid_t p;
	int i, st = -1;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	p = fork();
	ASSERT_LE(0, p);
	if (p == 0) {
		struct gpusleep_reclaim r;
		int fd;

		reclaim_of(&r, self->gpu, 64 * MiB, 0,
			   GPUSLEEP_RECLAIMF_LEASE);
		fd = ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r);
		if (fd < 0)
			_exit(10);
		raise(SIGKILL);		/* dies holding it */
		_exit(11);
	}
	for (i = 0; i < 1000 && waitpid(p, &st, WNOHANG) == 0; i++)
		pump(self, 10);
	ASSERT_TRUE(WIFSIGNALED(st));
	for (i = 0; i < 100 && released(self, 0); i++)
		pump(self, 20);
	EXPECT_EQ(0, released(self, 0));
}

/* A victim that dies while leased leaves the lease; the rest come back. */
TEST_F(arb, dying_victim_leaves_the_lease)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	struct gpusleep_lease li;
	int lease, i;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	tenant(_metadata, self, 1, -1, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	ASSERT_EQ(0, take(self, 128 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	close(self->eng[0]);	/* tenant 0's engine dies */
	self->eng[0] = -1;
	memset(&li, 0, sizeof(li));
	li.victims = (uintptr_t)v;
	li.nr_victims = 4;
	li.victim_size = sizeof(v[0]);
	ASSERT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	ASSERT_EQ(2, li.nr_victims);
	for (i = 0; i < 2; i++)
		EXPECT_EQ(v[i].domain == self->id[0],
			  !!(v[i].flags & GPUSLEEP_RVF_GONE));
	EXPECT_EQ(0, lease_return(self, lease));
	li.nr_victims = 4;
	ASSERT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	for (i = 0; i < 2; i++)
		EXPECT_EQ(v[i].domain == self->id[0] ? GPUSLEEP_RVF_GONE :
			  GPUSLEEP_RVF_RETURNED,
			  v[i].flags & (GPUSLEEP_RVF_GONE |
					GPUSLEEP_RVF_RETURNED));
	EXPECT_EQ(0, released(self, 1));
	close(lease);
}

/* Two claims on one GPU run one after the other: never the same victim. */
TEST_F(arb, concurrent_reclaims_on_one_gpu)
{
	struct gpusleep_reclaim_victim v1[4], v2[4];
	struct gpusleep_reclaim a, b;
	int i;

	for (i = 0; i < 2; i++)
		tenant(_metadata, self, i, 0, 0, 64 * MiB,
		       GPUSLEEP_POLICY_DISCARD, 0, 0);
	reclaim_of(&a, self->gpu, 64 * MiB, 0, GPUSLEEP_RECLAIMF_NONBLOCK);
	reclaim_of(&b, self->gpu, 64 * MiB, 0, GPUSLEEP_RECLAIMF_NONBLOCK);
	ASSERT_EQ(0, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &a)));
	ASSERT_EQ(0, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &b)));
	EXPECT_EQ(a.op_id + 1, b.op_id);
	ASSERT_EQ(0, drive(self, b.op_id, &b, v2, 4));
	ASSERT_EQ(0, drive(self, a.op_id, &a, v1, 4));
	EXPECT_EQ(0, a.reason);
	EXPECT_EQ(0, b.reason);
	ASSERT_EQ(1, a.nr_victims);
	ASSERT_EQ(1, b.nr_victims);
	EXPECT_NE(v1[0].domain, v2[0].domain);
	EXPECT_EQ(W, released(self, 0));
	EXPECT_EQ(W, released(self, 1));
	/* In order: the first claim took the first in line. */
	EXPECT_EQ(self->id[0], v1[0].domain);
}

/* ------------------------------------------------------ host budget */

/* A backup-kind tag that does not fit is skipped; discard-kind is taken. */
TEST_F(arb, budget_skips_backups_that_do_not_fit)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_BACKUP, 0,
	       0);
	tenant(_metadata, self, 1, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	ASSERT_EQ(0, budget("33554432"));	/* 32 MiB */
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(0, r.reason);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[1], v[0].domain);
	EXPECT_EQ(0, released(self, 0));
	/* Short, the budget is named among the causes. */
	ASSERT_EQ(0, take(self, 64 * MiB, 0, 0, &r, v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_TRUE(r.why & GPUSLEEP_RWHY_HOST_BUDGET);
	/* DISCARD_ONLY: no backup even within the budget. */
	ASSERT_EQ(0, budget("0"));
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_DISCARD_ONLY,
			  &r, v, 4, NULL));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_EQ(0, released(self, 0));
}

/* ------------------------------------------ who may take from whom */

/*
 * Run a blocking RECLAIM in a child with who() applied first, playing
 * the tenants meanwhile: the child's exit status is its errno, its why
 * in bits 0-6 of a second byte... (status: errno, or 100 + why).
 */
static int claim_as(struct __test_metadata *_metadata,
		    FIXTURE_DATA(arb) *self, int (*who)(void), int32_t prio,
		    uint32_t *why)
{
	int pfd[2], st = -1, i;
	uint32_t w = ~0U;
	pid_t p;

	ASSERT_EQ(0, pipe(pfd));
	p = fork();
	if (p == 0) {
		struct gpusleep_reclaim r;
		int ret;

		close(pfd[0]);
		if (who())
			_exit(99);
		reclaim_of(&r, self->gpu, 64 * MiB, prio, 0);
		ret = gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r));
		if (write(pfd[1], &r.why, 4) != 4)
			_exit(98);
		_exit(-ret);
	}
	close(pfd[1]);
	for (i = 0; i < 1000 && waitpid(p, &st, WNOHANG) == 0; i++)
		pump(self, 10);
	if (read(pfd[0], &w, 4) != 4)
		w = ~0U;
	close(pfd[0]);
	*why = w;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int as_nobody(void)
{
	return setresgid(NOBODY, NOBODY, NOBODY) ||
	       setresuid(NOBODY, NOBODY, NOBODY) ? -1 : 0;
}

static int in_user_ns(void)
{
	return unshare(CLONE_NEWUSER);
}

static int without_cap_sys_nice(void)
{
	return drop_cap(CAP_SYS_NICE);
}

/* Another user takes nothing without consent: not permitted. */
TEST_F(arb, cross_user_needs_consent)
{
	uint32_t why;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	EXPECT_EQ(ENOSPC, claim_as(_metadata, self, as_nobody, 0, &why));
	EXPECT_TRUE(why & GPUSLEEP_RWHY_NOT_PERMITTED);
	EXPECT_EQ(0, released(self, 0));
}

/* ... and with it (yieldable), only below its claim's priority. */
TEST_F(arb, cross_user_yieldable_below_priority)
{
	uint32_t why;

	tenant(_metadata, self, 0, 0, GPUSLEEP_TENF_YIELDABLE, 64 * MiB,
	       GPUSLEEP_POLICY_DISCARD, 0, 0);
	EXPECT_EQ(ENOSPC, claim_as(_metadata, self, as_nobody, 0, &why));
	EXPECT_EQ(GPUSLEEP_RWHY_PRIORITY | GPUSLEEP_RWHY_NO_CANDIDATE, why);
	EXPECT_EQ(0, released(self, 0));
	ASSERT_EQ(0, set_tenant(self->eng[0], -1, GPUSLEEP_TENF_YIELDABLE));
	EXPECT_EQ(0, claim_as(_metadata, self, as_nobody, 0, &why));
	EXPECT_EQ(W, released(self, 0));
}

/* Another user namespace, even the same uid: not the owner either. */
TEST_F(arb, cross_namespace_needs_consent)
{
	uint32_t why;

	tenant(_metadata, self, 0, -5, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       0, 0);
	EXPECT_EQ(ENOSPC, claim_as(_metadata, self, in_user_ns, 0, &why));
	EXPECT_TRUE(why & GPUSLEEP_RWHY_NOT_PERMITTED);
	EXPECT_EQ(0, released(self, 0));
	ASSERT_EQ(0, set_tenant(self->eng[0], -5, GPUSLEEP_TENF_YIELDABLE));
	EXPECT_EQ(0, claim_as(_metadata, self, in_user_ns, 0, &why));
	EXPECT_EQ(W, released(self, 0));
}

/* A claim above the default priority needs CAP_SYS_NICE: EPERM. */
TEST_F(arb, claim_above_default_needs_cap_sys_nice)
{
	uint32_t why;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	EXPECT_EQ(EPERM, claim_as(_metadata, self, without_cap_sys_nice, 1,
				  &why));
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(0, claim_as(_metadata, self, without_cap_sys_nice, 0, &why));
}

/* RECLAIM_WAIT: by id, the caller's newest by 0; someone else's: EPERM. */
TEST_F(arb, reclaim_wait_is_the_claimants)
{
	struct gpusleep_reclaim r, w;
	pid_t p;

	reclaim_of(&r, self->gpu, 64 * MiB, 0, 0);
	EXPECT_EQ(-ENOSPC, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r)));
	ASSERT_EQ(0, reclaim_wait(self->dev, 0, 0, &w, NULL, 0));
	EXPECT_EQ(r.op_id, w.op_id);
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, w.reason);
	EXPECT_EQ(64 * MiB, w.bytes);
	EXPECT_EQ(0, memcmp(w.gpu_uuid, self->gpu, 16));
	ASSERT_EQ(0, reclaim_wait(self->dev, r.op_id, 0, &w, NULL, 0));
	EXPECT_EQ(GPUSLEEP_RECLAIM_DONE, w.state);
	p = fork();
	ASSERT_LE(0, p);
	if (p == 0) {
		if (as_nobody())
			_exit(99);
		_exit(-reclaim_wait(self->dev, r.op_id, 0, NULL, NULL, 0));
	}
	EXPECT_EQ(EPERM << 8, gs_reap(p));
}

/* A deadline reached while a victim drains: called off, short, resumed. */
TEST_F(arb, deadline_cancels_the_draining_victim)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	int i;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	self->sc[0].hold = GPUSLEEP_EV_DRAIN;
	reclaim_of(&r, self->gpu, 64 * MiB, 0, GPUSLEEP_RECLAIMF_NONBLOCK);
	r.timeout_ms = 300;
	ASSERT_EQ(0, gs_err(ioctl(self->dev, GPUSLEEP_IOC_RECLAIM, &r)));
	ASSERT_EQ(0, drive(self, r.op_id, &r, v, 4));
	EXPECT_EQ(GPUSLEEP_R_SHORTFALL, r.reason);
	EXPECT_TRUE(r.why & GPUSLEEP_RWHY_DEADLINE);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_CANCELLED);
	EXPECT_EQ(GPUSLEEP_R_CANCELLED, v[0].reason);
	for (i = 0; i < 10; i++)
		pump(self, 20);
	EXPECT_EQ(0, released(self, 0));
}

/*
 * The return finds a victim busy with an operation of its own (its owner
 * releasing another tag, unmapping): it waits for that one, then resumes
 * what the lease took; the owner's release is not called off.
 */
TEST_F(arb, lease_return_waits_for_the_victims_own_operation)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	struct gpusleep_lease li;
	struct gpusleep_op op;
	int lease, i;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD,
	       64 * MiB, GPUSLEEP_POLICY_DISCARD);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r,
			  NULL, 0, &lease));
	ASSERT_EQ(W, released(self, 0));
	self->sc[0].hold = GPUSLEEP_EV_PAUSE_TAG;
	ASSERT_EQ(0, gs_release(self->ctl[0], KV, NB, &op));
	pump(self, 50);
	ASSERT_EQ(GPUSLEEP_EV_PAUSE_TAG, self->held[0].type);
	ASSERT_EQ(-EINPROGRESS, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_RETURN,
					     GPUSLEEP_LEASE_RETURN_NONBLOCK)));
	pump(self, 100);
	EXPECT_EQ(W | KV, released(self, 0));	/* the return waits */
	self->sc[0].hold = 0;
	ASSERT_EQ(0, gs_answer(self->agent[0], &self->held[0], 0, 64 * MiB));
	for (i = 0; i < 100 && released(self, 0) != KV; i++)
		pump(self, 20);
	EXPECT_EQ(0, gs_finish(self->ctl[0], op.op_id, NULL));
	EXPECT_EQ(KV, released(self, 0));
	memset(&li, 0, sizeof(li));
	li.victims = (uintptr_t)v;
	li.nr_victims = 4;
	li.victim_size = sizeof(v[0]);
	ASSERT_EQ(0, gs_err(ioctl(lease, GPUSLEEP_IOC_LEASE_INFO, &li)));
	EXPECT_EQ(GPUSLEEP_LEASE_RETURNED, li.state);
	ASSERT_EQ(1, li.nr_victims);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_RETURNED);
	EXPECT_GT(v[0].resume_op_id, op.op_id);	/* its own resume */
	EXPECT_EQ(0, v[0].resume_error);
	close(lease);
}

/* ------------------------------------------------------------ groups */

static int group_of(FIXTURE_DATA(arb) *self, int n)
{
	struct gpusleep_group_create c;
	struct gpusleep_group_add a;
	int g, i;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "arb%d", getpid());
	g = gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_GROUP, &c));
	for (i = 0; g >= 0 && i < n; i++) {
		memset(&a, 0, sizeof(a));
		a.fd = self->eng[i];
		if (ioctl(g, GPUSLEEP_IOC_GROUP_ADD, &a)) {
			close(g);
			return -errno;
		}
	}
	return g;
}

/*
 * A domain in a group is taken with its whole group (a tensor-parallel
 * engine does not run with one rank asleep): the bytes counted are those
 * of its rank on the GPU asked; its lease gives every rank back.
 */
TEST_F(arb, group_taken_whole)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_group_op go;
	struct gpusleep_reclaim r;
	int g, lease;

	tenant(_metadata, self, 0, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	tenant(_metadata, self, 1, 0, 0, 64 * MiB, GPUSLEEP_POLICY_DISCARD, 0,
	       0);
	/* Rank 1 is on another GPU. */
	memcpy(self->rep[1].gpu_uuid, gpu_b, 16);
	ASSERT_EQ(0, report(self->agent[1], &self->rep[1]));
	g = group_of(self, 2);
	ASSERT_LE(0, g);
	ASSERT_EQ(0, take(self, 64 * MiB, 0, GPUSLEEP_RECLAIMF_LEASE, &r, v,
			  4, &lease));
	EXPECT_EQ(0, r.reason);
	EXPECT_EQ(64 * MiB, r.taken_bytes);
	ASSERT_EQ(1, r.nr_victims);
	EXPECT_EQ(self->id[0], v[0].domain);
	EXPECT_TRUE(v[0].flags & GPUSLEEP_RVF_GROUP);
	EXPECT_NE(0, v[0].group);
	EXPECT_EQ(W, released(self, 0));
	EXPECT_EQ(W, released(self, 1));
	/* Leased on every rank: the group's own resume is refused. */
	memset(&go, 0, sizeof(go));
	go.flags = GPUSLEEP_OPF_NONBLOCK;
	EXPECT_EQ(-EAGAIN, gs_err(ioctl(g, GPUSLEEP_IOC_GROUP_RESUME, &go)));
	EXPECT_EQ(GPUSLEEP_R_LEASED, go.reason);
	give_back(self, lease);
	EXPECT_EQ(0, released(self, 0));
	EXPECT_EQ(0, released(self, 1));
	close(g);
}

TEST_HARNESS_MAIN
