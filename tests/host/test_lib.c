// SPDX-License-Identifier: GPL-2.0
/*
 * libgpusleep without the module: reason/state/event names, tag parsing,
 * and the engine and agent dispatch logic, fed records through a
 * SOCK_SEQPACKET socketpair (one record per read, like the device), with
 * GPUSLEEP_IOC_COMPLETE redirected to a recorder.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "libgpusleep.h"
#include "internal.h"

#define MiB (1UL << 20)

/* ------------------------------------------------------------------ */
/* Names                                                               */

TEST(reason_strings)
{
	static const int want_errno[GPUSLEEP_R_MAX] = {
		[GPUSLEEP_R_NONE] = 0,
		[GPUSLEEP_R_NOT_ENABLED] = ENOTCONN,
		[GPUSLEEP_R_INVALID] = EINVAL,
		[GPUSLEEP_R_KV_NOT_ALLOWED] = EOPNOTSUPP,
		[GPUSLEEP_R_ALREADY_RELEASED] = EALREADY,
		[GPUSLEEP_R_BUSY] = EBUSY,
		[GPUSLEEP_R_NOT_RELEASED] = ENOENT,
		[GPUSLEEP_R_CANCELLED] = ECANCELED,
		[GPUSLEEP_R_DRAIN_TIMEOUT] = ETIMEDOUT,
		[GPUSLEEP_R_AGENT_TIMEOUT] = ETIMEDOUT,
		[GPUSLEEP_R_ENGINE_FAILED] = EREMOTEIO,
		[GPUSLEEP_R_AGENT_FAILED] = EREMOTEIO,
		[GPUSLEEP_R_AGENT_GONE] = EPIPE,
		[GPUSLEEP_R_ENGINE_GONE] = EOWNERDEAD,
		[GPUSLEEP_R_NO_MEMORY] = ENOMEM,
		[GPUSLEEP_R_QUEUE_FULL] = ENOBUFS,
		[GPUSLEEP_R_ENGINE_TIMEOUT] = ETIMEDOUT,
		[GPUSLEEP_R_LEASED] = EAGAIN,
		[GPUSLEEP_R_HOST_BUDGET] = ENOSPC,
		[GPUSLEEP_R_VERIFY_FAILED] = EBADMSG,
		[GPUSLEEP_R_SHORTFALL] = ENOSPC,
	};

	for (uint32_t r = 0; r < GPUSLEEP_R_MAX; r++) {
		const char *s = gs_reason_str(r), *n = gs_reason_name(r);

		ASSERT_NE(NULL, s);
		ASSERT_NE(NULL, n);
		EXPECT_STRNE("unknown reason", s);
		EXPECT_STRNE("UNKNOWN", n);
		EXPECT_GT(strlen(s), 5);
		EXPECT_EQ(want_errno[r], gs_reason_errno(r)) TH_LOG("reason %s", n);
		for (uint32_t q = 0; q < r; q++) {
			EXPECT_STRNE(gs_reason_name(q), n);
			EXPECT_STRNE(gs_reason_str(q), s);
		}
	}
	EXPECT_STREQ("resumed before release drained",
		     gs_reason_str(GPUSLEEP_R_CANCELLED));
	EXPECT_STREQ("NOT_ENABLED", gs_reason_name(GPUSLEEP_R_NOT_ENABLED));
	EXPECT_STREQ("unknown reason", gs_reason_str(GPUSLEEP_R_MAX));
	EXPECT_STREQ("UNKNOWN", gs_reason_name(0xffffffffu));
	EXPECT_EQ(-1, gs_reason_errno(GPUSLEEP_R_MAX));
}

TEST(state_and_event_names)
{
	for (uint32_t s = 0; s < GPUSLEEP_S_MAX; s++)
		EXPECT_STRNE("unknown", gs_state_name(s));
	for (uint32_t e = 0; e < GPUSLEEP_EV_MAX; e++)
		EXPECT_STRNE("unknown", gs_event_name(e));
	EXPECT_STREQ("released", gs_state_name(GPUSLEEP_S_RELEASED));
	EXPECT_STREQ("pause_tag", gs_event_name(GPUSLEEP_EV_PAUSE_TAG));
	EXPECT_STREQ("unknown", gs_state_name(GPUSLEEP_S_MAX));
	EXPECT_STREQ("unknown", gs_event_name(GPUSLEEP_EV_MAX));
	EXPECT_STREQ("weights", gs_tag_name(GPUSLEEP_TAG_WEIGHTS));
	EXPECT_STREQ("kv_cache", gs_tag_name(GPUSLEEP_TAG_KV_CACHE));
	EXPECT_EQ(NULL, gs_tag_name(GPUSLEEP_TAG_ALL));
	EXPECT_EQ(NULL, gs_tag_name(0));
}

TEST(tags_parse)
{
	static const struct {
		const char *s;
		int ret;
		uint32_t tags;
	} cases[] = {
		{ "weights", 0, GPUSLEEP_TAG_WEIGHTS },
		{ "kv_cache", 0, GPUSLEEP_TAG_KV_CACHE },
		{ "weights,kv_cache", 0, GPUSLEEP_TAG_ALL },
		{ "kv_cache,weights", 0, GPUSLEEP_TAG_ALL },
		{ " weights , kv_cache ", 0, GPUSLEEP_TAG_ALL },
		{ "weights,weights", 0, GPUSLEEP_TAG_WEIGHTS },
		{ "all", 0, GPUSLEEP_TAG_ALL },
		{ "", 0, 0 },
		{ "  ", 0, 0 },
		{ "weight", -EINVAL, 0 },
		{ "weightsx", -EINVAL, 0 },
		{ "Weights", -EINVAL, 0 },
		{ "weights,", -EINVAL, 0 },
		{ ",weights", -EINVAL, 0 },
		{ "weights,,kv_cache", -EINVAL, 0 },
		{ "cuda_graph", -EINVAL, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t t = 0xdead;

		EXPECT_EQ(cases[i].ret, gs_tags_parse(cases[i].s, &t))
			TH_LOG("\"%s\"", cases[i].s);
		if (!cases[i].ret) {
			EXPECT_EQ(cases[i].tags, t) TH_LOG("\"%s\"", cases[i].s);
		} else {
			EXPECT_EQ(0xdead, t);	/* untouched on error */
		}
	}
	EXPECT_EQ(-EINVAL, gs_tags_parse(NULL, &(uint32_t){0}));
}

/* Names in a domain's own declaration (GET_TAGS). */
TEST(tags_in_a_declaration)
{
	struct gpusleep_tags d = {
		.nr_tags = 3,
		.tags = { { .name = "weights" }, { .name = "cuda_graph" },
			  { .name = "kv_cache" } },
	};
	char buf[64];
	uint32_t t = 0;

	EXPECT_EQ(0, gs_tags_parse_in(&d, "kv_cache,cuda_graph", &t));
	EXPECT_EQ(0x6, t);
	EXPECT_EQ(0, gs_tags_parse_in(&d, "all", &t));
	EXPECT_EQ(0x7, t);
	EXPECT_EQ(-EINVAL, gs_tags_parse_in(&d, "graph", &t));
	EXPECT_EQ(0x7, t);	/* untouched on error */
	EXPECT_EQ(0, gs_tags_parse_in(NULL, "kv_cache", &t));
	EXPECT_EQ(GPUSLEEP_TAG_KV_CACHE, t);	/* NULL: the default */
	EXPECT_LT(0, gs_tags_format_in(&d, 0x2 | 0x8, buf, sizeof(buf)));
	EXPECT_STREQ("cuda_graph,0x8", buf);
	EXPECT_LT(0, gs_tags_format_in(&d, 0x7, buf, sizeof(buf)));
	EXPECT_STREQ("weights,cuda_graph,kv_cache", buf);
}

TEST(tags_format)
{
	char buf[64];

	EXPECT_EQ(16, gs_tags_format(GPUSLEEP_TAG_ALL, buf, sizeof(buf)));
	EXPECT_STREQ("weights,kv_cache", buf);
	EXPECT_EQ(0, gs_tags_format(0, buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	EXPECT_EQ(8, gs_tags_format(GPUSLEEP_TAG_KV_CACHE, buf, sizeof(buf)));
	EXPECT_STREQ("kv_cache", buf);
	EXPECT_LT(0, gs_tags_format(GPUSLEEP_TAG_WEIGHTS | (1U << 4), buf,
				    sizeof(buf)));
	EXPECT_STREQ("weights,0x10", buf);
	EXPECT_EQ(-ENOSPC, gs_tags_format(GPUSLEEP_TAG_ALL, buf, 10));
	EXPECT_STREQ("weights", buf);
	EXPECT_EQ(-ENOSPC, gs_tags_format(GPUSLEEP_TAG_ALL, buf, 0));

	/* round trip */
	for (uint32_t t = 0; t <= GPUSLEEP_TAG_ALL; t++) {
		uint32_t back;

		ASSERT_LE(0, gs_tags_format(t, buf, sizeof(buf)));
		ASSERT_EQ(0, gs_tags_parse(buf, &back));
		EXPECT_EQ(t, back);
	}
}

/* GPU ids: nvidia-smi's and CUDA's forms, the host stand-in, refusals. */
TEST(gpu_uuid_parse_and_format)
{
	uint8_t u[16], h0[16], h1[16], back[16];
	char s[GS_GPU_UUID_LEN];

	ASSERT_EQ(0, gs_gpu_uuid_parse("GPU-5d1e0a3b-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
				       u));
	EXPECT_EQ(0x5d, u[0]);
	EXPECT_EQ(0x5b, u[15]);
	EXPECT_EQ(40, gs_gpu_uuid_format(u, s, sizeof(s)));
	EXPECT_STREQ("GPU-5d1e0a3b-1c2d-4e5f-8a9b-0c1d2e3f4a5b", s);
	ASSERT_EQ(0, gs_gpu_uuid_parse(s, back));
	EXPECT_EQ(0, memcmp(u, back, 16));
	ASSERT_EQ(0, gs_gpu_uuid_parse("MIG-5d1e0a3b1c2d4e5f8a9b0c1d2e3f4a5b",
				       back));
	EXPECT_EQ(0, memcmp(u, back, 16));
	EXPECT_EQ(-ENOSPC, gs_gpu_uuid_format(u, s, 40));
	/* the host backend's stand-in: stable, one per index, not zero */
	ASSERT_EQ(0, gs_gpu_uuid_parse("host", h0));
	ASSERT_EQ(0, gs_host_gpu_uuid(0, back));
	EXPECT_EQ(0, memcmp(h0, back, 16));
	ASSERT_EQ(0, gs_gpu_uuid_parse("host:1", h1));
	EXPECT_NE(0, memcmp(h0, h1, 16));
	ASSERT_EQ(0, gs_gpu_uuid_parse("host:0", back));
	EXPECT_EQ(0, memcmp(h0, back, 16));
	EXPECT_EQ(0x80, h0[6] & 0xf0);	/* version 8 */
	/* refused: short, long, not hex, all zero, a bad host index */
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("GPU-5d1e", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("5d1e0a3b1c2d4e5f8a9b0c1d2e3f4a5b00", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("xd1e0a3b1c2d4e5f8a9b0c1d2e3f4a5b", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("00000000000000000000000000000000", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("host:", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("host:x", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse("hostile", u));
	EXPECT_EQ(-EINVAL, gs_gpu_uuid_parse(NULL, u));
}

TEST(reclaim_names)
{
	char buf[128];

	EXPECT_EQ(0, gs_rwhy_format(0, buf, sizeof(buf)));
	EXPECT_STREQ("", buf);
	EXPECT_LT(0, gs_rwhy_format(GPUSLEEP_RWHY_PRIORITY |
				    GPUSLEEP_RWHY_HOST_BUDGET | (1U << 30),
				    buf, sizeof(buf)));
	EXPECT_STREQ("priority,host_budget,0x40000000", buf);
	EXPECT_EQ(-ENOSPC, gs_rwhy_format(GPUSLEEP_RWHY_PRIORITY |
					  GPUSLEEP_RWHY_HOST_BUDGET, buf, 12));
	EXPECT_STREQ("priority", buf);	/* whole names only */
	for (uint32_t b = 1; b <= GPUSLEEP_RWHY_CANCELLED; b <<= 1)
		EXPECT_STRNE("unknown", gs_rwhy_str(b));
	EXPECT_STREQ("unknown", gs_rwhy_str(1U << 31));
	EXPECT_LT(0, gs_rvf_format(GPUSLEEP_RVF_GROUP | GPUSLEEP_RVF_RETURNED,
				   buf, sizeof(buf)));
	EXPECT_STREQ("group,returned", buf);
	EXPECT_STREQ("held", gs_lease_state_name(GPUSLEEP_LEASE_HELD));
	EXPECT_STREQ("returned", gs_lease_state_name(GPUSLEEP_LEASE_RETURNED));
	EXPECT_STREQ("unknown", gs_lease_state_name(99));
	EXPECT_STREQ("kept", gs_content_name(GPUSLEEP_CONTENT_KEPT));
	EXPECT_STREQ("zeroed", gs_content_name(GPUSLEEP_CONTENT_ZEROED));
	EXPECT_STREQ("undefined", gs_content_name(GPUSLEEP_CONTENT_UNDEFINED));
	EXPECT_STREQ("backup", gs_policy_name(GPUSLEEP_POLICY_BACKUP));
	EXPECT_STREQ("discard", gs_policy_name(GPUSLEEP_POLICY_DISCARD));
	/* the memory manager's content values are the uAPI's */
	EXPECT_EQ(GPUSLEEP_CONTENT_KEPT, GS_MM_CONTENT_KEPT);
	EXPECT_EQ(GPUSLEEP_CONTENT_ZEROED, GS_MM_CONTENT_ZEROED);
	EXPECT_EQ(GPUSLEEP_CONTENT_UNDEFINED, GS_MM_CONTENT_UNDEFINED);
}

/* The wrappers refuse what the uAPI would, before any ioctl. */
TEST(reclaim_wrappers_check_their_arguments)
{
	struct gpusleep_reclaim_victim v[2];
	struct gpusleep_reclaim out;
	uint8_t u[16];
	uint32_t n = 2;

	ASSERT_EQ(0, gs_host_gpu_uuid(0, u));
	EXPECT_EQ(-EINVAL, gs_reclaim(-1, NULL, 1, 0, 0, 0, &out, NULL, NULL));
	EXPECT_EQ(-EINVAL, gs_reclaim(-1, u, 1, 0, 0, 0, &out, NULL, &n));
	n = 2;
	EXPECT_EQ(-EBADF, gs_reclaim(-1, u, 1, 0, 0, 0, &out, v, &n));
	EXPECT_EQ(0, n);		/* nothing written */
	EXPECT_EQ(-1, out.lease_fd);	/* no lease */
	EXPECT_EQ(-EBADF, gs_acquire(-1, u, 1, 0, 0, &out));
	EXPECT_EQ(-EBADF, gs_reclaim_wait(-1, 0, 0, &out, NULL, NULL));
	EXPECT_EQ(-EBADF, gs_lease_info(-1, NULL, NULL, NULL));
	EXPECT_EQ(-EBADF, gs_lease_return(-1, false));
	EXPECT_EQ(-EBADF, gs_set_tenant(-1, 0, 0));
}

TEST(no_device)
{
	EXPECT_EQ(-ENOENT, gs_open("/nonexistent/gpusleep", 0, NULL));
	EXPECT_EQ(-EINVAL, gs_create_domain(-1, "", NULL, 0, 0, NULL));
	EXPECT_EQ(-ENAMETOOLONG, gs_create_domain(-1, "a-name-that-is-longer-than-31-bytes",
						  NULL, 0, 0, NULL));
	EXPECT_EQ(-EBADF, gs_release(-1, 0, 0, 0, NULL));
	EXPECT_EQ(-EBADF, gs_is_sleeping(-1));
}

/* ------------------------------------------------------------------ */
/* COMPLETE recorder                                                   */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rec_cond = PTHREAD_COND_INITIALIZER;
static struct gpusleep_complete rec[16];
static int nrec;
static int rec_ret;	/* what the fake COMPLETE returns */

static int record_complete(int fd, const struct gpusleep_complete *c)
{
	int ret;

	(void)fd;
	pthread_mutex_lock(&rec_lock);
	if (nrec < 16)
		rec[nrec++] = *c;
	ret = rec_ret;
	pthread_cond_broadcast(&rec_cond);
	pthread_mutex_unlock(&rec_lock);
	return ret;
}

/* REPORT recorder: the newest report, how many, what the fake answers. */
static struct gpusleep_report rep_last;
static int nrep;
static int rep_ret;
static int rep_nrec;	/* COMPLETEs recorded when the newest report came */

static int record_report(int fd, const struct gpusleep_report *r)
{
	int ret;

	(void)fd;
	pthread_mutex_lock(&rec_lock);
	rep_last = *r;
	rep_nrec = nrec;
	nrep++;
	ret = rep_ret;
	pthread_cond_broadcast(&rec_cond);
	pthread_mutex_unlock(&rec_lock);
	return ret;
}

static void rec_reset(void)
{
	pthread_mutex_lock(&rec_lock);
	nrec = 0;
	rec_ret = 0;
	memset(rec, 0, sizeof(rec));
	nrep = 0;
	rep_nrec = 0;
	rep_ret = 0;
	memset(&rep_last, 0, sizeof(rep_last));
	pthread_mutex_unlock(&rec_lock);
	gs_complete_hook = record_complete;
	gs_report_hook = record_report;
}

/* Block until a report satisfies ok (no time limit: the harness's). */
static struct gpusleep_report rep_wait(bool (*ok)(const struct gpusleep_report *))
{
	struct gpusleep_report r;

	pthread_mutex_lock(&rec_lock);
	while (!nrep || !ok(&rep_last))
		pthread_cond_wait(&rec_cond, &rec_lock);
	r = rep_last;
	pthread_mutex_unlock(&rec_lock);
	return r;
}

/* Block until n answers have been recorded (no time limit: the harness's). */
static void rec_wait(int n)
{
	pthread_mutex_lock(&rec_lock);
	while (nrec < n)
		pthread_cond_wait(&rec_cond, &rec_lock);
	pthread_mutex_unlock(&rec_lock);
}

static int send_ev(int fd, uint64_t op, uint32_t type, uint32_t tags,
		   uint32_t flags, uint32_t step)
{
	struct gpusleep_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.op_id = op;
	ev.type = type;
	ev.tags = tags;
	ev.flags = flags;
	ev.step = step;
	return write(fd, &ev, sizeof(ev)) == sizeof(ev) ? 0 : -errno;
}

/* ------------------------------------------------------------------ */
/* Engine                                                              */

struct ectx {
	int drains, cancels, resets, repairs, resumes;
	uint32_t tags;
	bool abort;
	int drain_ret, reset_ret, repair_ret;
};

static int e_drain(struct gs_engine *e, void *arg, uint32_t tags, bool abort)
{
	struct ectx *c = arg;

	(void)e;
	c->drains++;
	c->tags = tags;
	c->abort = abort;
	return c->drain_ret;
}

static void e_cancelled(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct ectx *)arg)->cancels++;
}

static int e_reset(struct gs_engine *e, void *arg)
{
	struct ectx *c = arg;

	(void)e;
	c->resets++;
	return c->reset_ret;
}

static int e_repair(struct gs_engine *e, void *arg)
{
	struct ectx *c = arg;

	(void)e;
	c->repairs++;
	return c->repair_ret;
}

static void e_resume(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct ectx *)arg)->resumes++;
}

static const struct gs_engine_ops eops = {
	.drain = e_drain,
	.drain_cancelled = e_cancelled,
	.reset_caches = e_reset,
	.repair_kv = e_repair,
	.resume_sched = e_resume,
};

FIXTURE(engine) {
	int sv[2];
	struct gs_engine *e;
	struct ectx c;
};

FIXTURE_SETUP(engine)
{
	memset(&self->c, 0, sizeof(self->c));
	rec_reset();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				self->sv));
	ASSERT_EQ(0, gs_engine_from_fd(self->sv[0], 7, &eops, &self->c,
				       &self->e));
}

FIXTURE_TEARDOWN(engine)
{
	gs_engine_destroy(self->e);
	if (self->sv[1] >= 0)
		close(self->sv[1]);
}

TEST_F(engine, release_then_resume_sequence)
{
	int peer = self->sv[1];

	EXPECT_EQ(7, gs_engine_id(self->e));
	EXPECT_EQ(self->sv[0], gs_engine_fd(self->e));
	EXPECT_EQ(0, gs_engine_dispatch(self->e));	/* nothing queued */

	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_ALL,
			     GPUSLEEP_EVF_ABORT_INFLIGHT, 1));
	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_RESET_CACHES, 0, 0, 2));
	ASSERT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_EQ(1, self->c.drains);
	EXPECT_EQ(GPUSLEEP_TAG_ALL, self->c.tags);
	EXPECT_TRUE(self->c.abort);
	EXPECT_EQ(1, self->c.resets);
	EXPECT_TRUE(gs_engine_sched_paused(self->e));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(3, rec[0].op_id);
	EXPECT_EQ(1, rec[0].step);
	EXPECT_EQ(GPUSLEEP_EV_DRAIN, rec[0].type);
	EXPECT_EQ(0, rec[0].status);
	EXPECT_EQ(GPUSLEEP_EV_RESET_CACHES, rec[1].type);
	EXPECT_EQ(2, rec[1].step);

	/* resume: KV repair fails, which the answer carries */
	self->c.repair_ret = -EIO;
	ASSERT_EQ(0, send_ev(peer, 4, GPUSLEEP_EV_REPAIR_KV, 0, 0, 3));
	ASSERT_EQ(0, send_ev(peer, 4, GPUSLEEP_EV_RESUME_SCHED, 0,
			     GPUSLEEP_EVF_MAY_SCHEDULE, 4));
	ASSERT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_EQ(1, self->c.repairs);
	EXPECT_EQ(1, self->c.resumes);
	EXPECT_FALSE(gs_engine_sched_paused(self->e));
	ASSERT_EQ(3, nrec);	/* RESUME_SCHED needs no answer */
	EXPECT_EQ(GPUSLEEP_EV_REPAIR_KV, rec[2].type);
	EXPECT_EQ(-EIO, rec[2].status);
	EXPECT_EQ(4, rec[2].op_id);

	/* unknown and agent-only records are ignored */
	ASSERT_EQ(0, send_ev(peer, 5, 99, 0, 0, 1));
	ASSERT_EQ(0, send_ev(peer, 5, GPUSLEEP_EV_PAUSE_TAG, 1, 0, 1));
	ASSERT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_EQ(3, nrec);

	close(peer);
	self->sv[1] = -1;
	EXPECT_EQ(-EPIPE, gs_engine_dispatch(self->e));
}

TEST_F(engine, async_drain)
{
	int peer = self->sv[1];

	self->c.drain_ret = GS_PENDING;
	EXPECT_EQ(-ESTALE, gs_engine_complete(self->e, 0));
	ASSERT_EQ(0, send_ev(peer, 9, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_FALSE(self->c.abort);
	EXPECT_EQ(0, nrec);
	EXPECT_TRUE(gs_engine_pending(self->e));
	EXPECT_TRUE(gs_engine_sched_paused(self->e));
	/* the scheduler finished its requests */
	EXPECT_EQ(0, gs_engine_complete(self->e, 0));
	EXPECT_FALSE(gs_engine_pending(self->e));
	ASSERT_EQ(1, nrec);
	EXPECT_EQ(9, rec[0].op_id);
	EXPECT_EQ(GPUSLEEP_EV_DRAIN, rec[0].type);
	EXPECT_EQ(-ESTALE, gs_engine_complete(self->e, 0));
	EXPECT_EQ(1, nrec);

	/* a failing async answer carries its errno */
	ASSERT_EQ(0, send_ev(peer, 10, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_EQ(0, gs_engine_complete(self->e, -EBUSY));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(-EBUSY, rec[1].status);

	/* a kernel refusing the late answer (-ESTALE) is passed on */
	ASSERT_EQ(0, send_ev(peer, 11, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	rec_ret = -ESTALE;
	EXPECT_EQ(-ESTALE, gs_engine_complete(self->e, 0));
}

TEST_F(engine, drain_cancelled)
{
	int peer = self->sv[1];

	self->c.drain_ret = GS_PENDING;
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_ALL, 0, 1));
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_DRAIN_CANCELLED, 0, 0, 2));
	ASSERT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_EQ(1, self->c.cancels);
	EXPECT_FALSE(gs_engine_pending(self->e));
	/* "stop draining" is not "go": the kernel's go comes on its own */
	EXPECT_TRUE(gs_engine_sched_paused(self->e));
	EXPECT_EQ(0, self->c.resumes);
	/* the scheduler's late "drained" goes nowhere */
	EXPECT_EQ(-ESTALE, gs_engine_complete(self->e, 0));
	EXPECT_EQ(0, nrec);
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_SCHED, 0,
			     GPUSLEEP_EVF_MAY_SCHEDULE, 2));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_FALSE(gs_engine_sched_paused(self->e));
	EXPECT_EQ(1, self->c.resumes);
}

/*
 * Issue 12, item 1: weights are released, a release of kv_cache is
 * cancelled. The engine must stay paused: only the level says go.
 */
TEST_F(engine, drain_cancelled_with_weights_released_stays_paused)
{
	int peer = self->sv[1];

	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_WEIGHTS,
			     0, 1));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_TRUE(gs_engine_sched_paused(self->e));
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_DRAIN, GPUSLEEP_TAG_KV_CACHE,
			     0, 1));
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_DRAIN_CANCELLED, 0, 0, 0));
	ASSERT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_TRUE(gs_engine_sched_paused(self->e));
	EXPECT_EQ(0, self->c.resumes);
	/* Any record tells the level: one that says go lifts the pause. */
	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_RESUME_SCHED, 0,
			     GPUSLEEP_EVF_MAY_SCHEDULE, 0));
	ASSERT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_FALSE(gs_engine_sched_paused(self->e));
	EXPECT_EQ(1, self->c.resumes);
}

TEST_F(engine, stale_answer_is_not_an_error)
{
	rec_ret = -ESTALE;	/* the step timed out in the kernel */
	ASSERT_EQ(0, send_ev(self->sv[1], 2, GPUSLEEP_EV_DRAIN, 1, 0, 1));
	EXPECT_EQ(1, gs_engine_dispatch(self->e));
	rec_ret = -ENODEV;	/* the domain died */
	ASSERT_EQ(0, send_ev(self->sv[1], 3, GPUSLEEP_EV_DRAIN, 1, 0, 1));
	EXPECT_EQ(-ENODEV, gs_engine_dispatch(self->e));
}

/* What the records say was replaced, for the engine to register again. */
TEST_F(engine, replaced_tags_and_kv_generation_follow_the_records)
{
	struct gpusleep_event ev;

	EXPECT_EQ(0, gs_engine_replaced_tags(self->e));
	EXPECT_EQ(0, gs_engine_kv_generation(self->e));
	memset(&ev, 0, sizeof(ev));
	ev.op_id = 4;
	ev.type = GPUSLEEP_EV_REPAIR_KV;
	ev.tags = GPUSLEEP_TAG_KV_CACHE;
	ev.step = 3;
	ev.generation = 5;
	ASSERT_EQ(sizeof(ev), write(self->sv[1], &ev, sizeof(ev)));
	ASSERT_EQ(0, send_ev(self->sv[1], 4, GPUSLEEP_EV_RESUME_SCHED,
			     GPUSLEEP_TAG_ALL, GPUSLEEP_EVF_MAY_SCHEDULE, 0));
	EXPECT_EQ(2, gs_engine_dispatch(self->e));
	EXPECT_EQ(5, gs_engine_kv_generation(self->e));
	EXPECT_EQ(GPUSLEEP_TAG_ALL, gs_engine_replaced_tags(self->e));
	/* the next go names only what it replaced */
	ASSERT_EQ(0, send_ev(self->sv[1], 6, GPUSLEEP_EV_RESUME_SCHED, 0,
			     GPUSLEEP_EVF_MAY_SCHEDULE, 0));
	EXPECT_EQ(1, gs_engine_dispatch(self->e));
	EXPECT_EQ(0, gs_engine_replaced_tags(self->e));
	EXPECT_EQ(5, gs_engine_kv_generation(self->e));
}

TEST(engine_defaults)
{
	struct gs_engine *e;
	int sv[2];

	rec_reset();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	ASSERT_EQ(0, gs_engine_from_fd(sv[0], 1, NULL, NULL, &e));
	ASSERT_EQ(0, send_ev(sv[1], 1, GPUSLEEP_EV_DRAIN, 1, 0, 1));
	ASSERT_EQ(0, send_ev(sv[1], 1, GPUSLEEP_EV_RESUME_SCHED, 0,
			     GPUSLEEP_EVF_MAY_SCHEDULE, 2));
	EXPECT_EQ(2, gs_engine_dispatch(e));
	EXPECT_EQ(1, nrec);	/* no callbacks: answered with success */
	EXPECT_EQ(0, rec[0].status);
	gs_engine_destroy(e);
	close(sv[1]);
	EXPECT_EQ(-EBADF, gs_engine_from_fd(-1, 1, NULL, NULL, &e));
}

/* ------------------------------------------------------------------ */
/* Agent                                                               */

static void fill(void *p, size_t len, uint32_t seed)
{
	uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		w[i] = seed + (uint32_t)i;
}

static bool check(const void *p, size_t len, uint32_t seed)
{
	const uint32_t *w = p;

	for (size_t i = 0; i < len / 4; i++)
		if (w[i] != seed + (uint32_t)i)
			return false;
	return true;
}

FIXTURE(agent) {
	int sv[2];
	struct gs_mm *mm;
	struct gs_agent *a;
	char *w, *kv;
};

FIXTURE_SETUP(agent)
{
	rec_reset();
	ASSERT_EQ(0, gs_mm_new(gs_backend_host_new(), &self->mm));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_WEIGHTS,
				      GS_MM_BACKUP, 4 * MiB));
	ASSERT_EQ(0, gs_mm_set_policy(self->mm, GPUSLEEP_TAG_KV_CACHE,
				      GS_MM_DISCARD, 4 * MiB));
	self->w = gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, 4 * MiB);
	self->kv = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, 4 * MiB);
	ASSERT_NE(NULL, self->w);
	ASSERT_NE(NULL, self->kv);
	fill(self->w, 4 * MiB, 1);
	fill(self->kv, 4 * MiB, 2);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				self->sv));
	ASSERT_EQ(0, gs_agent_from_fd(self->sv[0], self->mm, &self->a));
}

FIXTURE_TEARDOWN(agent)
{
	gs_agent_destroy(self->a);
	if (self->sv[1] >= 0)
		close(self->sv[1]);
	gs_mm_destroy(self->mm);
}

TEST_F(agent, dispatch_pause_resume)
{
	struct gs_agent_stats st;
	int peer = self->sv[1];

	EXPECT_EQ(0, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_WEIGHTS, 0, 2));
	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 3));
	ASSERT_EQ(2, gs_agent_dispatch(self->a));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(GPUSLEEP_EV_PAUSE_TAG, rec[0].type);
	EXPECT_EQ(2, rec[0].step);
	EXPECT_EQ(0, rec[0].status);
	EXPECT_EQ(4 * MiB, rec[0].bytes);
	EXPECT_EQ(4 * MiB, rec[1].bytes);

	/* pausing a paused tag is what was asked: success, its size */
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 1));
	/* two tags in one step is not valid */
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_ALL, 0, 2));
	ASSERT_EQ(2, gs_agent_dispatch(self->a));
	ASSERT_EQ(4, nrec);
	EXPECT_EQ(0, rec[2].status);
	EXPECT_EQ(4 * MiB, rec[2].bytes);
	EXPECT_EQ(-EINVAL, rec[3].status);
	EXPECT_EQ(0, rec[3].bytes);

	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 2));
	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_DRAIN, 0, 0, 3));	/* not ours */
	ASSERT_EQ(3, gs_agent_dispatch(self->a));
	ASSERT_EQ(6, nrec);
	EXPECT_EQ(GPUSLEEP_EV_RESUME_TAG, rec[4].type);
	EXPECT_EQ(0, rec[4].status);
	EXPECT_EQ(4 * MiB, rec[5].bytes);
	EXPECT_TRUE(check(self->w, 4 * MiB, 1));
	EXPECT_EQ(0, self->kv[0]);
	EXPECT_EQ(0, self->kv[4 * MiB - 1]);

	gs_agent_get_stats(self->a, &st);
	EXPECT_EQ(7, st.events);
	EXPECT_EQ(3, st.pauses);
	EXPECT_EQ(2, st.resumes);
	EXPECT_EQ(1, st.failures);
	EXPECT_EQ(0, st.complete_errors);

	close(peer);
	self->sv[1] = -1;
	EXPECT_EQ(-EPIPE, gs_agent_dispatch(self->a));
}

/*
 * Issue 34 item 6: a backup that fails its verification is answered as
 * a failed RESUME_TAG, EBADMSG (the module's VERIFY_FAILED), with the
 * bytes lost; never as success. The next resume maps it fresh.
 */
TEST_F(agent, resume_of_a_corrupted_backup_is_answered_ebadmsg)
{
	struct gs_agent_result ar;
	struct gs_agent_stats st;
	int peer = self->sv[1];
	char *host = NULL;

	ASSERT_EQ(0, gs_mm_set_verify(self->mm, true));
	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, rec[0].status);
	ASSERT_EQ(0, gs_mm_backup_ptr(self->mm, self->w + 100, 1,
				      (void **)&host));
	ASSERT_NE(NULL, host);
	*host ^= 0x40;
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(2, nrec);
	EXPECT_EQ(GPUSLEEP_EV_RESUME_TAG, rec[1].type);
	EXPECT_EQ(-EBADMSG, rec[1].status);
	EXPECT_EQ(0, rec[1].bytes);
	EXPECT_EQ(4 * MiB, rec[1].lost_bytes);
	ASSERT_EQ(0, gs_agent_last_result(self->a, GPUSLEEP_TAG_WEIGHTS, &ar));
	EXPECT_NE(0, ar.mm.flags & GS_MM_RES_VERIFY_FAILED);
	gs_agent_get_stats(self->a, &st);
	EXPECT_EQ(1, st.failures);
	EXPECT_EQ(0, st.resumes);

	ASSERT_EQ(0, send_ev(peer, 3, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_WEIGHTS, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_EQ(0, rec[2].status);
	EXPECT_EQ(4 * MiB, rec[2].bytes);
	EXPECT_EQ(4 * MiB, rec[2].lost_bytes);	/* said again */
	EXPECT_EQ(0, self->w[100]);		/* zeros, not garbage */
}

/*
 * Issue 37 item 1 / issue 34 item 5: the agent tells the module what its
 * tags are (size, mapped, host bytes, policy, content after resume,
 * verified) and what its process holds, once attached and after every
 * step.
 */
TEST_F(agent, reports_its_tags_once_attached_and_after_each_step)
{
	int peer = self->sv[1];
	uint8_t host[16];
	struct gs_agent_report_stats rs;

	ASSERT_EQ(0, gs_host_gpu_uuid(0, host));
	ASSERT_EQ(0, gs_mm_set_verify(self->mm, true));
	EXPECT_EQ(0, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrep);		/* once attached */
	EXPECT_EQ(0, memcmp(host, rep_last.gpu_uuid, 16));
	EXPECT_EQ(GPUSLEEP_NR_TAGS, rep_last.nr_tags);
	EXPECT_EQ(0, rep_last.flags);
	EXPECT_EQ(4 * MiB, rep_last.tags[0].size_bytes);
	EXPECT_EQ(4 * MiB, rep_last.tags[0].mapped_bytes);
	EXPECT_EQ(4 * MiB, rep_last.tags[0].host_bytes);	/* pinned ahead */
	EXPECT_EQ(GPUSLEEP_POLICY_BACKUP, rep_last.tags[0].policy);
	EXPECT_EQ(GPUSLEEP_CONTENT_KEPT, rep_last.tags[0].content);
	EXPECT_EQ(GPUSLEEP_RTF_VERIFIED, rep_last.tags[0].flags);
	EXPECT_EQ(GPUSLEEP_POLICY_DISCARD, rep_last.tags[1].policy);
	EXPECT_EQ(GPUSLEEP_CONTENT_ZEROED, rep_last.tags[1].content);
	EXPECT_EQ(0, rep_last.tags[1].flags);
	EXPECT_EQ(0, rep_last.tags[1].host_bytes);
	EXPECT_EQ(0, rep_last.tags[2].size_bytes);	/* past nr_tags */
	/* the host backend has no device: the process's figure unknown */
	EXPECT_EQ(0, rep_last.process_bytes);
	EXPECT_EQ(0, rep_last.process_source);

	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(2, nrep);		/* after the step */
	EXPECT_EQ(4 * MiB, rep_last.tags[1].size_bytes);
	EXPECT_EQ(0, rep_last.tags[1].mapped_bytes);
	EXPECT_EQ(4 * MiB, rep_last.tags[0].mapped_bytes);
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_DRAIN, 0, 0, 2));	/* not ours */
	ASSERT_EQ(2, gs_agent_dispatch(self->a));
	ASSERT_EQ(3, nrep);		/* a step each, not per record */
	EXPECT_EQ(4 * MiB, rep_last.tags[1].mapped_bytes);
	gs_agent_get_report_stats(self->a, &rs);
	EXPECT_EQ(3, rs.sent);
	EXPECT_EQ(0, rs.failed);
}

/*
 * The report of a step goes before the step's answer: the answer may end
 * the operation, and a reclaim issued right after it must read the tags
 * as the step left them (bench 9 found none to take when the report came
 * after the answer).
 */
TEST_F(agent, reports_each_step_before_answering_it)
{
	int peer = self->sv[1];

	EXPECT_EQ(0, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrep);
	ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrec);
	ASSERT_EQ(2, nrep);
	EXPECT_EQ(0, rep_nrec);		/* reported, then answered */
	EXPECT_EQ(0, rep_last.tags[1].mapped_bytes);
	ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_TAG, GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(2, nrec);
	ASSERT_EQ(3, nrep);
	EXPECT_EQ(1, rep_nrec);
	EXPECT_EQ(4 * MiB, rep_last.tags[1].mapped_bytes);
}

/*
 * A step that changed nothing (a resume of an awake tag) sends no report:
 * the module's copy is already true. gs_agent_report() sends one all the
 * same.
 */
TEST_F(agent, an_unchanged_report_is_not_sent_again)
{
	struct gs_agent_report_stats rs;

	EXPECT_EQ(0, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrep);
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_RESUME_TAG,
			     GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	ASSERT_EQ(1, nrec);
	EXPECT_EQ(0, rec[0].status);
	EXPECT_EQ(1, nrep);
	EXPECT_EQ(0, gs_agent_report(self->a));
	EXPECT_EQ(2, nrep);
	gs_agent_get_report_stats(self->a, &rs);
	EXPECT_EQ(2, rs.sent);
}

/* A module without REPORT is said once and not asked again. */
TEST_F(agent, a_module_without_reports_is_not_asked_again)
{
	struct gs_agent_report_stats rs;

	rep_ret = -ENOTTY;
	EXPECT_EQ(0, gs_agent_dispatch(self->a));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG,
			     GPUSLEEP_TAG_KV_CACHE, 0, 1));
	ASSERT_EQ(1, gs_agent_dispatch(self->a));
	EXPECT_EQ(0, rec[0].status);	/* the step is served all the same */
	EXPECT_EQ(1, nrep);
	gs_agent_get_report_stats(self->a, &rs);
	EXPECT_EQ(1, rs.failed);
	EXPECT_EQ(-ENOTTY, rs.last_error);
	EXPECT_EQ(0, gs_agent_report(self->a));	/* off: nothing sent */
	EXPECT_EQ(1, nrep);
}

static bool has_kv_chunk_of_12(const struct gpusleep_report *r)
{
	return r->tags[1].size_bytes == 12 * MiB;
}

static bool has_outside(const struct gpusleep_report *r)
{
	/* the last of the five: what the module must end up with */
	return r->torch_reserved_bytes == 5 * MiB &&
	       r->graph_pool_bytes == 7 * MiB;
}

/*
 * From the thread: a new chunk (sizes changed) and the process's own
 * figures (gs_agent_set_outside) each bring a report, never more reports
 * than changes.
 */
TEST_F(agent, thread_reports_when_sizes_change)
{
	struct gs_agent_report_stats rs;
	void *p;

	ASSERT_EQ(0, gs_agent_start(self->a));
	/* 4 MiB chunk full: a second chunk of 8 MiB */
	p = gs_mm_alloc(self->mm, GPUSLEEP_TAG_KV_CACHE, 8 * MiB);
	ASSERT_NE(NULL, p);
	rep_wait(has_kv_chunk_of_12);
	for (int i = 1; i <= 5; i++)
		gs_agent_set_outside(self->a, (uint64_t)i * MiB,
				     (uint64_t)(i + 2) * MiB);
	rep_wait(has_outside);
	EXPECT_EQ(0, gs_agent_stop(self->a));
	gs_agent_get_report_stats(self->a, &rs);
	/* at start, the chunk (and its pinning), five figures at most */
	EXPECT_LE(rs.sent, 1 + 2 + 5);
	EXPECT_EQ(rs.sent, (uint64_t)nrep);
	EXPECT_EQ(0, gs_mm_free(self->mm, p));
}

TEST_F(agent, thread_serves_until_stopped)
{
	struct gs_agent_stats st;
	int peer = self->sv[1];

	ASSERT_EQ(0, gs_agent_start(self->a));
	EXPECT_EQ(-EALREADY, gs_agent_start(self->a));
	for (int cycle = 0; cycle < 3; cycle++) {
		ASSERT_EQ(0, send_ev(peer, 1, GPUSLEEP_EV_PAUSE_TAG,
				     GPUSLEEP_TAG_WEIGHTS, 0, 1));
		rec_wait(2 * cycle + 1);
		ASSERT_EQ(0, send_ev(peer, 2, GPUSLEEP_EV_RESUME_TAG,
				     GPUSLEEP_TAG_WEIGHTS, 0, 1));
		rec_wait(2 * cycle + 2);
	}
	EXPECT_EQ(0, gs_agent_stop(self->a));
	EXPECT_EQ(-EINVAL, gs_agent_stop(self->a));
	gs_agent_get_stats(self->a, &st);
	EXPECT_EQ(3, st.pauses);
	EXPECT_EQ(3, st.resumes);
	EXPECT_EQ(0, st.failures);
	for (int i = 0; i < 6; i++)
		EXPECT_EQ(0, rec[i].status);
	EXPECT_TRUE(check(self->w, 4 * MiB, 1));
	/* and it can be started again */
	ASSERT_EQ(0, gs_agent_start(self->a));
	EXPECT_EQ(0, gs_agent_stop(self->a));
}

TEST_F(agent, thread_ends_when_domain_dies)
{
	ASSERT_EQ(0, gs_agent_start(self->a));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG,
			     GPUSLEEP_TAG_KV_CACHE, 0, 1));
	close(self->sv[1]);	/* end of file, like a dead domain */
	self->sv[1] = -1;
	EXPECT_EQ(0, gs_agent_stop(self->a));	/* joins the ended thread */
	ASSERT_EQ(1, nrec);	/* the queued record was still served */
	EXPECT_EQ(0, rec[0].status);
}

TEST_F(agent, thread_reports_complete_failure)
{
	rec_ret = -ENODEV;
	ASSERT_EQ(0, gs_agent_start(self->a));
	ASSERT_EQ(0, send_ev(self->sv[1], 1, GPUSLEEP_EV_PAUSE_TAG,
			     GPUSLEEP_TAG_KV_CACHE, 0, 1));
	rec_wait(1);
	EXPECT_EQ(-ENODEV, gs_agent_stop(self->a));
}

TEST_HARNESS_MAIN
