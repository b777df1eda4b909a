// SPDX-License-Identifier: GPL-2.0
/*
 * The whole system with the real module, in three processes:
 *   engine      gs_engine on the domain it creates (drain answered later,
 *               as a scheduler finishing its requests would)
 *   agent       gs_mm on the host backend, served by gs_agent's io_uring
 *               thread: weights 64 MiB BACKUP, kv_cache 64 MiB DISCARD
 *   controller  this test: release all, resume all, through libgpusleep
 * After a release the agent's RSS has fallen by at least 95% of the bytes
 * the module reports released (measured on the second cycle: the backup
 * staging buffer is allocated once, on the first); after a resume the
 * weights read back identical, the KV cache reads as zeros, and the
 * pointers handed out before the release still work. Once a release or
 * a resume has returned, the agent's report to the module (what the
 * arbiter chooses from) already says what the step did: no tag mapped
 * after the release, both whole after the resume.
 *
 * SKIPs when /dev/gpusleep does not exist (module not loaded).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "libgpusleep.h"

#define MiB		(1UL << 20)
#define TAG_BYTES	(64 * MiB)
#define PIECE		(4 * MiB)
#define NPIECES		(TAG_BYTES / PIECE)
#define CYCLES		3

/* ------------------------------------------------------------------ */
/* Engine process                                                      */

struct engine_counts {
	int drains, resets, repairs, resumes, cancels, pending;
};

static int eng_drain(struct gs_engine *e, void *arg, uint32_t tags, bool abort)
{
	struct engine_counts *c = arg;

	(void)e;
	(void)abort;
	c->drains += tags == GPUSLEEP_TAG_ALL;
	c->pending = 1;
	return GS_PENDING;	/* answered after dispatch returns */
}

static int eng_reset(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct engine_counts *)arg)->resets++;
	return 0;
}

static int eng_repair(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct engine_counts *)arg)->repairs++;
	return 0;
}

static void eng_resume(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct engine_counts *)arg)->resumes++;
}

static void eng_cancelled(struct gs_engine *e, void *arg)
{
	(void)e;
	((struct engine_counts *)arg)->cancels++;
}

/* Serve until quit_fd reaches end of file; exit 0 if all went as expected. */
static int engine_main(int id_fd, int quit_fd)
{
	static const struct gs_engine_ops ops = {
		.drain = eng_drain,
		.drain_cancelled = eng_cancelled,
		.reset_caches = eng_reset,
		.repair_kv = eng_repair,
		.resume_sched = eng_resume,
	};
	struct gs_engine_config cfg = {
		.name = "test_agent_cycle",
		.gpu = "host-0",
		.caps = GPUSLEEP_CAP_PREFIX_CACHING | GPUSLEEP_CAP_PREFIX_CACHE_RESET,
		/* shared: the agent runs in a process of its own here */
		.flags = GPUSLEEP_CREATEF_SHARED,
	};
	struct engine_counts c = { 0 };
	struct gs_engine *e;
	uint32_t id;
	int ret;

	ret = gs_engine_create(&cfg, &ops, &c, &e);
	if (ret) {
		fprintf(stderr, "engine: create domain: %s\n", strerror(-ret));
		return 1;
	}
	id = gs_engine_id(e);
	if (write(id_fd, &id, sizeof(id)) != sizeof(id))
		return 1;
	close(id_fd);
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = gs_engine_fd(e), .events = POLLIN },
			{ .fd = quit_fd, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("engine: poll");
			return 1;
		}
		if (p[1].revents)
			break;
		ret = gs_engine_dispatch(e);
		if (ret < 0) {
			fprintf(stderr, "engine: dispatch: %s\n", strerror(-ret));
			return 1;
		}
		if (c.pending) {
			c.pending = 0;
			ret = gs_engine_complete(e, 0);
			if (ret) {
				fprintf(stderr, "engine: complete drain: %s\n",
					strerror(-ret));
				return 1;
			}
		}
	}
	gs_engine_destroy(e);
	if (c.drains != CYCLES || c.resets != CYCLES || c.repairs != CYCLES ||
	    c.resumes != CYCLES || c.cancels) {
		fprintf(stderr, "engine: drains %d resets %d repairs %d resumes %d cancels %d, want %d each and 0 cancels\n",
			c.drains, c.resets, c.repairs, c.resumes, c.cancels,
			CYCLES);
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Agent process                                                       */

static size_t rss_bytes(void)
{
	unsigned long size, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * (size_t)sysconf(_SC_PAGESIZE);
}

static void fill(void *p, size_t len, uint32_t seed)
{
	uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = ((uint64_t)seed << 32) ^ (i * 0x9e3779b97f4a7c15ull);
}

static bool check(const void *p, size_t len, uint32_t seed)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != (((uint64_t)seed << 32) ^ (i * 0x9e3779b97f4a7c15ull)))
			return false;
	return true;
}

static bool is_zero(const void *p, size_t len)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i])
			return false;
	return true;
}

static int reply(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

/*
 * Commands on cmd_fd, answers on rep_fd:
 *   'r'  RSS in bytes (uint64_t)
 *   'c'  check after a resume, then dirty the KV cache again: status byte
 *   'q'  stop the agent: status byte, then exit
 * The first answer, once the agent serves the domain, is a status byte.
 */
static int agent_main(uint32_t id, int cmd_fd, int rep_fd)
{
	struct gs_mm *mm;
	struct gs_agent *a;
	char *w[NPIECES], *kv[NPIECES];
	unsigned char st = 0;
	int ret;
	char cmd;

	ret = gs_mm_new(gs_backend_host_new(), &mm);
	if (!ret)
		ret = gs_mm_set_policy(mm, GPUSLEEP_TAG_WEIGHTS, GS_MM_BACKUP,
				       TAG_BYTES);
	if (!ret)
		ret = gs_mm_set_policy(mm, GPUSLEEP_TAG_KV_CACHE, GS_MM_DISCARD,
				       TAG_BYTES);
	if (ret) {
		fprintf(stderr, "agent: memory manager: %s\n", strerror(-ret));
		return 1;
	}
	for (unsigned int i = 0; i < NPIECES; i++) {
		w[i] = gs_mm_alloc(mm, GPUSLEEP_TAG_WEIGHTS, PIECE);
		kv[i] = gs_mm_alloc(mm, GPUSLEEP_TAG_KV_CACHE, PIECE);
		if (!w[i] || !kv[i]) {
			perror("agent: gs_mm_alloc");
			return 1;
		}
		fill(w[i], PIECE, i);
		fill(kv[i], PIECE, 1000 + i);
	}
	ret = gs_agent_attach(NULL, id, mm, &a);
	if (!ret) {
		ret = gs_agent_start(a);
		if (ret)
			gs_agent_destroy(a);
	}
	if (ret) {
		fprintf(stderr, "agent: attach to domain %u: %s\n", id,
			strerror(-ret));
		return 1;
	}
	if (reply(rep_fd, &st, 1))
		return 1;

	while (read(cmd_fd, &cmd, 1) == 1) {
		uint64_t rss;

		switch (cmd) {
		case 'r':
			rss = rss_bytes();
			if (reply(rep_fd, &rss, sizeof(rss)))
				return 1;
			break;
		case 'c':
			st = 0;
			for (unsigned int i = 0; i < NPIECES; i++) {
				if (!check(w[i], PIECE, i))
					st |= 1;
				if (!is_zero(kv[i], PIECE))
					st |= 2;
				/* the old pointers are live memory again */
				fill(kv[i], PIECE, 2000 + i);
				if (!check(kv[i], PIECE, 2000 + i))
					st |= 4;
			}
			if (reply(rep_fd, &st, 1))
				return 1;
			break;
		case 'q':
			ret = gs_agent_stop(a);
			gs_agent_destroy(a);
			gs_mm_destroy(mm);
			st = ret ? 8 : 0;
			if (ret)
				fprintf(stderr, "agent: thread ended with %s\n",
					strerror(-ret));
			reply(rep_fd, &st, 1);
			return st;
		default:
			return 1;
		}
	}
	return 1;	/* the controller went away */
}

/* ------------------------------------------------------------------ */
/* Controller: the test                                                */

FIXTURE(cycle) {
	int dev;
	pid_t engine, agent;
	int quit_w;		/* engine quits at end of file */
	int cmd_w, rep_r;	/* agent commands and answers */
};

FIXTURE_SETUP(cycle)
{
	self->engine = self->agent = -1;
	self->quit_w = self->cmd_w = self->rep_r = -1;
	self->dev = gs_open(NULL, 0, NULL);
	if (self->dev == -ENOENT)
		SKIP(return, "%s absent: module not loaded", GS_DEVICE_PATH);
	ASSERT_LE(0, self->dev) TH_LOG("open %s: %s", GS_DEVICE_PATH,
				       strerror(-self->dev));
}

FIXTURE_TEARDOWN(cycle)
{
	/* end of file on their pipes ends both children */
	if (self->quit_w >= 0)
		close(self->quit_w);
	if (self->cmd_w >= 0)
		close(self->cmd_w);
	if (self->rep_r >= 0)
		close(self->rep_r);
	if (self->agent > 0)
		waitpid(self->agent, NULL, 0);
	if (self->engine > 0)
		waitpid(self->engine, NULL, 0);
	if (self->dev >= 0)
		close(self->dev);
}

static int ask(int cmd_w, int rep_r, char cmd, void *ans, size_t len)
{
	if (write(cmd_w, &cmd, 1) != 1)
		return -1;
	return read(rep_r, ans, len) == (ssize_t)len ? 0 : -1;
}

/*
 * The tags' mapped bytes as the module holds them from the agent's last
 * report, read at once: the report must not trail the step's answer.
 */
static int reported_mapped(int ctl, uint64_t *w, uint64_t *kv)
{
	struct gpusleep_tenant t;
	int ret = gs_get_tenant(ctl, &t);

	if (ret)
		return ret;
	if (t.report.nr_tags < 2)
		return -ENODATA;
	*w = t.report.tags[0].mapped_bytes;
	*kv = t.report.tags[1].mapped_bytes;
	return 0;
}

static int child_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F_TIMEOUT(cycle, release_resume_all, 600)
{
	struct gpusleep_result res;
	struct gpusleep_state st;
	struct gpusleep_op op;
	int idp[2], quitp[2], cmdp[2], repp[2];
	uint32_t id = 0;
	unsigned char ok;
	int ctl, ret;

	/* the 6.1 harness runs the body after a SKIP in the setup */
	if (self->dev < 0)
		SKIP(return, "%s absent: module not loaded", GS_DEVICE_PATH);
	ASSERT_EQ(0, pipe(idp));
	ASSERT_EQ(0, pipe(quitp));
	self->engine = fork();
	ASSERT_LE(0, self->engine);
	if (!self->engine) {
		close(idp[0]);
		close(quitp[1]);
		_exit(engine_main(idp[1], quitp[0]));
	}
	close(idp[1]);
	close(quitp[0]);
	self->quit_w = quitp[1];
	ASSERT_EQ(sizeof(id), read(idp[0], &id, sizeof(id)));
	close(idp[0]);
	ASSERT_NE(0, id);

	/* no agent yet: the memory saver is not enabled */
	ctl = gs_attach(self->dev, id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, ctl) TH_LOG("attach controller: %s", strerror(-ctl));
	EXPECT_EQ(-ENOTCONN, gs_release(ctl, 0, 0, 0, &op));
	EXPECT_EQ(GPUSLEEP_R_NOT_ENABLED, op.reason);

	ASSERT_EQ(0, pipe(cmdp));
	ASSERT_EQ(0, pipe(repp));
	self->agent = fork();
	ASSERT_LE(0, self->agent);
	if (!self->agent) {
		close(cmdp[1]);
		close(repp[0]);
		close(self->quit_w);
		_exit(agent_main(id, cmdp[0], repp[1]));
	}
	close(cmdp[0]);
	close(repp[1]);
	self->cmd_w = cmdp[1];
	self->rep_r = repp[0];
	ASSERT_EQ(1, read(self->rep_r, &ok, 1)) TH_LOG("the agent did not start");
	ASSERT_EQ(0, ok);

	for (int cycle = 0; cycle < CYCLES; cycle++) {
		uint64_t rss0, rss1, released, mw, mkv;

		ASSERT_EQ(0, ask(self->cmd_w, self->rep_r, 'r', &rss0, sizeof(rss0)));
		ret = gs_release(ctl, 0, 0, 0, &op);
		ASSERT_EQ(0, ret) TH_LOG("release: %s (%s)", strerror(-ret),
					 gs_reason_str(op.reason));
		ASSERT_EQ(GPUSLEEP_R_NONE, op.reason);
		ASSERT_EQ(0, reported_mapped(ctl, &mw, &mkv));
		EXPECT_EQ(0, mw) TH_LOG("cycle %d: released, weights reported mapped", cycle);
		EXPECT_EQ(0, mkv) TH_LOG("cycle %d: released, KV reported mapped", cycle);
		ASSERT_EQ(0, ask(self->cmd_w, self->rep_r, 'r', &rss1, sizeof(rss1)));

		ASSERT_EQ(0, gs_wait(ctl, op.op_id, 0, &res));
		EXPECT_EQ(0, res.error);
		EXPECT_EQ(GPUSLEEP_OP_RELEASE, res.kind);
		EXPECT_EQ(GPUSLEEP_TAG_ALL, res.tags);
		EXPECT_EQ(GPUSLEEP_TAG_ALL, res.done_tags);
		EXPECT_EQ(TAG_BYTES, res.bytes[0]);
		EXPECT_EQ(TAG_BYTES, res.bytes[1]);
		released = res.bytes[0] + res.bytes[1];

		EXPECT_EQ(1, gs_is_sleeping(ctl));
		ASSERT_EQ(0, gs_get_state(ctl, &st));
		EXPECT_EQ(GPUSLEEP_S_RELEASED, st.state);
		EXPECT_EQ(GPUSLEEP_TAG_ALL, st.released);

		/* from the second cycle on, staging is already resident */
		if (cycle > 0) {
			EXPECT_GE(rss0 - rss1, released * 95 / 100)
				TH_LOG("cycle %d: agent RSS %lu -> %lu MiB, released %lu MiB",
				       cycle, (unsigned long)(rss0 / MiB),
				       (unsigned long)(rss1 / MiB),
				       (unsigned long)(released / MiB));
		}

		ret = gs_resume(ctl, 0, 0, 0, &op);
		ASSERT_EQ(0, ret) TH_LOG("resume: %s (%s)", strerror(-ret),
					 gs_reason_str(op.reason));
		ASSERT_EQ(0, reported_mapped(ctl, &mw, &mkv));
		EXPECT_EQ(TAG_BYTES, mw) TH_LOG("cycle %d: resumed, weights reported %lu", cycle, (unsigned long)mw);
		EXPECT_EQ(TAG_BYTES, mkv) TH_LOG("cycle %d: resumed, KV reported %lu", cycle, (unsigned long)mkv);
		ASSERT_EQ(0, gs_wait(ctl, op.op_id, 0, &res));
		EXPECT_EQ(0, res.error);
		EXPECT_EQ(GPUSLEEP_TAG_ALL, res.tags);
		EXPECT_EQ(TAG_BYTES, res.bytes[0]);
		EXPECT_EQ(TAG_BYTES, res.bytes[1]);
		EXPECT_EQ(0, gs_is_sleeping(ctl));

		ASSERT_EQ(0, ask(self->cmd_w, self->rep_r, 'c', &ok, 1));
		EXPECT_EQ(0, ok & 1) TH_LOG("cycle %d: weights changed", cycle);
		EXPECT_EQ(0, ok & 2) TH_LOG("cycle %d: KV cache not zero", cycle);
		EXPECT_EQ(0, ok & 4) TH_LOG("cycle %d: old pointers not usable", cycle);
	}

	ASSERT_EQ(0, ask(self->cmd_w, self->rep_r, 'q', &ok, 1));
	EXPECT_EQ(0, ok);
	EXPECT_EQ(0, child_status(self->agent));
	self->agent = -1;
	close(ctl);
	close(self->quit_w);
	self->quit_w = -1;
	EXPECT_EQ(0, child_status(self->engine));
	self->engine = -1;
}

TEST_HARNESS_MAIN
