// SPDX-License-Identifier: GPL-2.0
/*
 * Backing generations and resident memory (issue 16, parts 2 and 3).
 *
 * Generations: per tag, a counter that moves on each time the memory
 * behind the tag is replaced: a confirmed remap of the released tag (on
 * time or late), a pause whose rollback mapped fresh memory (lost_bytes).
 * RESUME_TAG carries the generation the tag will have once mapped back,
 * REPAIR_KV the KV cache's, RESUME_SCHED the tags replaced since the last
 * RESUME_SCHED. Resident: what the agent's pause answer says its process
 * still holds, in the state while something is released.
 *
 * This process plays every role; records are read and answered by hand.
 */
#include <sys/ioctl.h>

#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK
#define GW	0	/* index of weights in the per-tag arrays */
#define GKV	1

FIXTURE(g) {
	int dev, engine, agent, ctl;
	uint32_t id;
};

FIXTURE_SETUP(g)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV, strerror(errno));
	self->engine = gs_create(self->dev, "generation", 0, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(g)
{
	if (self->dev < 0)
		return;
	close(self->ctl);
	close(self->agent);
	close(self->engine);
	close(self->dev);
}

/* An agent's answer with everything it may say. */
static int answer_full(int fd, const struct gpusleep_event *ev, int status,
		       uint64_t bytes, uint64_t lost, uint64_t resident,
		       uint32_t source)
{
	struct gpusleep_complete c;

	gs_complete_of(&c, ev, status, bytes);
	c.lost_bytes = lost;
	c.resident_bytes = resident;
	c.resident_source = source;
	return gs_err(ioctl(fd, GPUSLEEP_IOC_COMPLETE, &c));
}

/* Release tags to success; each pause answered with resident (source). */
static int release_res(struct _test_data_g *s, uint32_t tags,
		       uint64_t resident, uint32_t source)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int r = gs_start(s->ctl, GPUSLEEP_IOC_RELEASE, tags, 0, &op);
	uint32_t t;

	if (!r)
		r = gs_answer_next(s->engine, GPUSLEEP_EV_DRAIN, tags, 0, 0);
	if (!r && (tags & KV))
		r = gs_answer_next(s->engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0);
	for (t = W; !r && t <= KV; t <<= 1) {
		if (!(tags & t))
			continue;
		r = gs_expect(s->agent, GPUSLEEP_EV_PAUSE_TAG, t, &ev);
		if (!r)
			r = answer_full(s->agent, &ev, 0, 4096, 0, resident,
					source);
	}
	return r ? r : gs_finish(s->ctl, op.op_id, NULL);
}

static int release(struct _test_data_g *s, uint32_t tags)
{
	return release_res(s, tags, 0, 0);
}

static uint64_t gen(int fd, unsigned int idx)
{
	struct gpusleep_state st;

	if (gs_state(fd, &st))
		return ~0ULL;
	return st.generation[idx];
}

/* ------------------------------------------------------- generations */

/* Each confirmed remap of a tag counts once, for that tag only. */
TEST_F(g, each_confirmed_resume_counts)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int i;

	for (i = 1; i <= 3; i++) {
		ASSERT_EQ(0, release(self, W));
		EXPECT_EQ(i - 1, gen(self->ctl, GW));
		ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
		ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG,
					    W, 0, 4096));
		ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
		EXPECT_EQ(i, gen(self->ctl, GW));
		EXPECT_EQ(0, gen(self->ctl, GKV));
		ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED,
				       0, &ev));
	}
}

/* RESUME_TAG carries what the tag will be; REPAIR_KV the KV cache's. */
TEST_F(g, resume_and_repair_records_carry_the_generation)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int i;

	for (i = 1; i <= 2; i++) {
		ASSERT_EQ(0, release(self, ALL));
		ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
		ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W,
				       &ev));
		EXPECT_EQ(i, ev.generation);
		ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
		ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, KV,
				       &ev));
		EXPECT_EQ(i, ev.generation);
		ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
		ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_REPAIR_KV, 0,
				       &ev));
		EXPECT_EQ(i, ev.generation);
		ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
		ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
		ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED,
				       0, &ev));
	}
}

/* Records that are not about new memory carry 0. */
TEST_F(g, other_records_carry_no_generation)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(1, gen(self->ctl, GW));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(0, ev.generation);
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	EXPECT_EQ(0, ev.generation);
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	EXPECT_EQ(0, ev.generation);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/* A failed remap replaced nothing the engine may use. */
TEST_F(g, failed_resume_does_not_count)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W,
				    -ENOMEM, 0));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(0, gen(self->ctl, GW));
}

/* A remap that timed out counts only once the agent confirms it, late. */
TEST_F(g, timed_out_resume_counts_when_confirmed_late)
{
	struct gpusleep_event ev, sched;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 100, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(0, gen(self->ctl, GW));
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	EXPECT_EQ(1, gen(self->ctl, GW));
	/* ... and the go that follows names it. */
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0,
			       &sched));
	EXPECT_EQ(W, sched.tags);
}

/* A remap record the agent never read is taken back: nothing new. */
TEST_F(g, unread_resume_does_not_count)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 100, &op));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->agent, &ev, 0));
	EXPECT_EQ(0, gen(self->ctl, GW));
}

/*
 * A late remap and the next resume's remap of the same memory: the memory
 * was replaced once, and the second answer (which found it mapped) keeps
 * the generation its record announced.
 */
TEST_F(g, late_remap_then_resume_counts_once)
{
	struct gpusleep_event late, ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 100, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &late));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(self->agent, &late, 0, 4096));
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(1, gen(self->ctl, GW));
}

/*
 * An unmap never confirmed (the agent went away mid-pause), then mapped
 * "again": the kernel cannot vouch that the memory is the same, so it
 * counts.
 */
TEST_F(g, remap_of_an_unconfirmed_unmap_counts)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	close(self->agent);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(1, gen(self->ctl, GW));
}

/* A pause whose rollback mapped fresh memory replaced the tag's memory. */
TEST_F(g, rollback_that_lost_contents_counts)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	ASSERT_EQ(0, answer_full(self->agent, &ev, -ENOMEM, 0, 4096, 0, 0));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(1, gen(self->ctl, GW));
	/* Nothing is released: the go comes at once, naming the tag. */
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(W, ev.tags);
}

/* Release weights, start a resume: its RESUME_TAG, read, in *ev. */
static int release_then_remap(struct _test_data_g *s, struct gpusleep_op *op,
			      struct gpusleep_event *ev)
{
	int r = release(s, W);

	if (!r)
		r = gs_start(s->ctl, GPUSLEEP_IOC_RESUME, 0, 0, op);
	return r ? r : gs_expect(s->agent, GPUSLEEP_EV_RESUME_TAG, W, ev);
}

/*
 * Issue 26, 16: a remap whose answer reports lost contents is still one
 * replacement: +1, what its RESUME_TAG announced.
 */
TEST_F(g, remap_with_lost_bytes_counts_once)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_then_remap(self, &op, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, answer_full(self->agent, &ev, 0, 4096, 4096, 0, 0));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(ev.generation, gen(self->ctl, GW));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(W, ev.tags);
}

/*
 * Issue 35: a pause that succeeded unmapped its tag, so it has no
 * contents to have lost: its answer carrying lost_bytes is refused
 * (EINVAL, the step stays awaited), where it used to be taken and count
 * a replacement on top of the remap's (+2 for one cycle). The proper
 * answer then goes through, and the cycle counts once.
 */
TEST_F(g, successful_pause_with_lost_bytes_is_refused)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	EXPECT_EQ(-EINVAL, answer_full(self->agent, &ev, 0, 4096, 4096, 0, 0));
	EXPECT_EQ(0, gen(self->ctl, GW));
	ASSERT_EQ(0, answer_full(self->agent, &ev, 0, 4096, 0, 0, 0));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(1, gen(self->ctl, GW));
}

/* A failed remap, lost contents or not, replaced nothing. */
TEST_F(g, failed_remap_with_lost_bytes_does_not_count)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_then_remap(self, &op, &ev));
	ASSERT_EQ(0, answer_full(self->agent, &ev, -ENOMEM, 0, 4096, 0, 0));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(0, gen(self->ctl, GW));
	/* The next remap announces and counts the first replacement. */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(1, gen(self->ctl, GW));
}

/* A rollback that mapped back the same memory replaced nothing. */
TEST_F(g, rollback_without_loss_does_not_count)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W,
				    -ENOMEM, 0));
	ASSERT_EQ(-ENOMEM, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(0, gen(self->ctl, GW));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(0, ev.tags);
}

/* RESUME_SCHED names the tags replaced since the previous one, once. */
TEST_F(g, resume_sched_names_the_replaced_tags)
{
	struct gpusleep_event ev;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, ALL));
	/* weights first: KV still released, no go yet */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	EXPECT_EQ(-ETIMEDOUT, gs_next(self->engine, &ev, 0));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, KV, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0,
				    4096));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0,
				    0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(ALL, ev.tags);
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	/* The next cycle names only what it replaced. */
	ASSERT_EQ(0, release(self, KV));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0,
				    4096));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0,
				    0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(KV, ev.tags);
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/*
 * A declared domain whose KV cache tag is bit 0 and whose memory tag is
 * bit 1: the records, the state and GET_TAGS count by the domain's bits.
 */
TEST(declared_tags_count_by_their_own_bits)
{
	struct gpusleep_event ev;
	struct gpusleep_create c;
	struct gpusleep_state st;
	struct gpusleep_tags t;
	struct gpusleep_op op;
	int dev, engine, agent;

	dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		SKIP(return, "%s: %s (module not loaded)", GS_DEV,
		     strerror(errno));
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "gen-declared");
	c.nr_tags = 2;
	snprintf(c.tags[0].name, sizeof(c.tags[0].name), "kv");
	c.tags[0].kind = GPUSLEEP_TAG_KIND_KV_CACHE;
	snprintf(c.tags[1].name, sizeof(c.tags[1].name), "experts");
	c.tags[1].kind = GPUSLEEP_TAG_KIND_MEMORY;
	engine = gs_err(ioctl(dev, GPUSLEEP_IOC_CREATE_DOMAIN, &c));
	ASSERT_LE(0, engine);
	agent = gs_attach(dev, c.id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, agent);

	ASSERT_EQ(0, gs_start(engine, GPUSLEEP_IOC_RELEASE, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_DRAIN, 3, 0, 0));
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_RESET_CACHES, 0, 0, 0));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, 1, 0, 4096));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, 2, 0, 4096));
	ASSERT_EQ(0, gs_finish(engine, op.op_id, NULL));
	/* the memory tag only: KV (bit 0) keeps generation 0 */
	ASSERT_EQ(0, gs_start(engine, GPUSLEEP_IOC_RESUME, 2, 0, &op));
	ASSERT_EQ(0, gs_expect(agent, GPUSLEEP_EV_RESUME_TAG, 2, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(engine, op.op_id, NULL));
	/* then KV: its repair carries its own generation */
	ASSERT_EQ(0, gs_start(engine, GPUSLEEP_IOC_RESUME, 1, 0, &op));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, 1, 0, 4096));
	ASSERT_EQ(0, gs_expect(engine, GPUSLEEP_EV_REPAIR_KV, 1, &ev));
	EXPECT_EQ(1, ev.generation);
	ASSERT_EQ(0, gs_answer(engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_finish(engine, op.op_id, NULL));
	ASSERT_EQ(0, gs_state(engine, &st));
	EXPECT_EQ(1, st.generation[0]);
	EXPECT_EQ(1, st.generation[1]);
	ASSERT_EQ(0, gs_start(engine, GPUSLEEP_IOC_RELEASE, 2, 0, &op));
	ASSERT_EQ(0, gs_expect(engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_EQ(3, ev.tags);
	ASSERT_EQ(0, gs_answer_next(engine, GPUSLEEP_EV_DRAIN, 2, 0, 0));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_PAUSE_TAG, 2, 0, 4096));
	ASSERT_EQ(0, gs_finish(engine, op.op_id, NULL));
	ASSERT_EQ(0, gs_start(engine, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(agent, GPUSLEEP_EV_RESUME_TAG, 2, 0, 4096));
	ASSERT_EQ(0, gs_finish(engine, op.op_id, NULL));
	memset(&t, 0, sizeof(t));
	ASSERT_EQ(0, gs_err(ioctl(engine, GPUSLEEP_IOC_GET_TAGS, &t)));
	EXPECT_EQ(1, t.tags[0].generation);
	EXPECT_EQ(2, t.tags[1].generation);
	close(agent);
	close(engine);
	close(dev);
}

/* ---------------------------------------------------------- resident */

/* The newest pause answer's figure stands while something is released. */
TEST_F(g, resident_follows_the_newest_pause_answer)
{
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_res(self, W, 7 << 20, GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(7 << 20, st.resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, st.resident_source);
	ASSERT_EQ(0, release_res(self, KV, 3 << 20, GPUSLEEP_RESIDENT_DEVICE));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(3 << 20, st.resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, st.resident_source);
	/* weights back, KV still released: the figure stays */
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(3 << 20, st.resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, st.resident_source);
}

/* Once nothing is released, nothing is reported resident. */
TEST_F(g, resident_is_cleared_when_awake)
{
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, release_res(self, W, 7 << 20, GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.resident_bytes);
	EXPECT_EQ(0, st.resident_source);
}

/* A pause answer that does not report replaces an older figure. */
TEST_F(g, unreported_resident_replaces_the_older_figure)
{
	struct gpusleep_state st;

	ASSERT_EQ(0, release_res(self, W, 7 << 20, GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, release_res(self, KV, 0, 0));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(0, st.resident_bytes);
	EXPECT_EQ(0, st.resident_source);
}

/* A late pause answer reports too. */
TEST_F(g, late_pause_answer_reports_resident)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 100, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	ASSERT_EQ(-ETIMEDOUT, gs_finish(self->ctl, op.op_id, NULL));
	ASSERT_EQ(0, answer_full(self->agent, &ev, 0, 4096, 0, 5 << 20,
				 GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(5 << 20, st.resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, st.resident_source);
}

/*
 * Refusals: each is EINVAL and changes nothing; the step is still awaited
 * and a proper answer then takes it.
 */
static void refused_then_ok(struct __test_metadata *_metadata,
			    struct _test_data_g *self, uint64_t resident,
			    uint32_t source, uint32_t pad)
{
	struct gpusleep_complete c;
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev));
	gs_complete_of(&c, &ev, 0, 4096);
	c.resident_bytes = resident;
	c.resident_source = source;
	c.pad = pad;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->agent, GPUSLEEP_IOC_COMPLETE,
					&c)));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.unconfirmed);
	EXPECT_EQ(0, st.resident_bytes);
	EXPECT_EQ(0, st.resident_source);
	EXPECT_EQ(op.op_id, st.op_in_flight);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

TEST_F(g, resident_with_unknown_source_is_refused)
{
	refused_then_ok(_metadata, self, 1 << 20, GPUSLEEP_RESIDENT_DEVICE + 1,
			0);
}

TEST_F(g, resident_bytes_without_source_are_refused)
{
	refused_then_ok(_metadata, self, 1 << 20, 0, 0);
}

TEST_F(g, complete_pad_must_be_zero)
{
	refused_then_ok(_metadata, self, 1 << 20, GPUSLEEP_RESIDENT_PROCESS, 1);
}

/* Only a pause answer says what stays resident: not a remap's. */
TEST_F(g, resident_in_a_resume_answer_is_refused)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, release(self, W));
	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RESUME, 0, 0, &op));
	ASSERT_EQ(0, gs_expect(self->agent, GPUSLEEP_EV_RESUME_TAG, W, &ev));
	EXPECT_EQ(-EINVAL, answer_full(self->agent, &ev, 0, 4096, 0, 1 << 20,
				       GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(W, st.released);
	EXPECT_EQ(0, st.generation[GW]);
	EXPECT_EQ(op.op_id, st.op_in_flight);
	ASSERT_EQ(0, gs_answer(self->agent, &ev, 0, 4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

/* ... nor the engine's, whatever step it answers. */
TEST_F(g, resident_from_the_engine_is_refused)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_start(self->ctl, GPUSLEEP_IOC_RELEASE, W, 0, &op));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_DRAIN, W, &ev));
	EXPECT_EQ(-EINVAL, answer_full(self->engine, &ev, 0, 0, 0, 1 << 20,
				       GPUSLEEP_RESIDENT_PROCESS));
	ASSERT_EQ(0, gs_state(self->ctl, &st));
	EXPECT_EQ(GPUSLEEP_S_DRAINING, st.state);
	ASSERT_EQ(0, gs_answer(self->engine, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    4096));
	ASSERT_EQ(0, gs_finish(self->ctl, op.op_id, NULL));
}

TEST_HARNESS_MAIN
