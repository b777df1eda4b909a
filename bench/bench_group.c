// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 7: groups (docs/groups.md) released and resumed as one
 * operation, measured where it can be.
 *
 * Rank processes, each an engine (gs_engine, drain answered at once) with
 * its agent thread (gs_agent over a host-backend gs_mm holding nothing),
 * as one process per GPU of a tensor-parallel engine. Two groups: one of
 * N ranks, N = the guest's online CPUs (the bench VM's --smp, BENCH_SMP),
 * and one of 8. This process is the controller. Samples, weights only,
 * one cycle (release then resume) each, the kinds in alternating blocks:
 *   single    one domain's cycle (rank 0 of the N-group)
 *   groupN    GROUP_RELEASE + GROUP_RESUME of the N ranks (blocking)
 *   group8    the same for the 8-group
 *   serial    the 8 domains' blocking releases one after another, then
 *             their resumes
 *   parallel  8 non-blocking releases, then WAIT on each; the same for
 *             the resumes
 * 7a: groupN / single, target <= 1.2: a group costs one rank's cycle when
 * its ranks run in parallel, so it is measured with a CPU per rank (on
 * one vCPU eight ranks' wake-ups run one after another, which says
 * nothing of the group). 7c: group8 / parallel, target <= 1.05: what the
 * group itself adds (the drain gate, its work item) over the same eight
 * operations issued by hand without all-or-nothing. 7b: group8 / serial
 * (information).
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define RANKS	8	/* the group of 7b and 7c */
#define MAXN	64	/* the N-group of 7a: at most this many ranks */
#define BLOCK	10
#define W	GPUSLEEP_TAG_WEIGHTS

static int drain_now(struct gs_engine *e, void *arg, uint32_t tags, bool ab)
{
	(void)e; (void)arg; (void)tags; (void)ab;
	return 0;
}

/* One rank: its engine on this thread, its agent on another. */
static int rank_main(int id_w, int quit_r)
{
	static const struct gs_engine_ops ops = { .drain = drain_now };
	struct gs_engine_config cfg = { .name = "bench_grp", .gpu = "host" };
	struct gs_engine *e;
	struct gs_agent *a;
	struct gs_mm *mm;
	uint32_t id;

	bn_ck(gs_engine_create(&cfg, &ops, NULL, &e), "engine create");
	id = gs_engine_id(e);
	bn_ck(gs_mm_new(gs_backend_host_new(), &mm), "mm");
	bn_ck(gs_agent_attach(NULL, id, mm, &a), "agent attach");
	bn_ck(gs_agent_start(a), "agent start");
	if (write(id_w, &id, sizeof(id)) != sizeof(id))
		return 1;
	if (bn_engine_serve(e, quit_r))
		return 1;
	gs_agent_stop(a);
	gs_agent_destroy(a);
	gs_mm_destroy(mm);
	gs_engine_destroy(e);
	return 0;
}

static int ctl[RANKS], grp, nctl[MAXN], ngrp, nranks;

static void single_cycle(void)
{
	bn_ck(gs_release(nctl[0], W, 0, 0, NULL), "release");
	bn_ck(gs_resume(nctl[0], W, 0, 0, NULL), "resume");
}

static void groupn_cycle(void)
{
	bn_ck(gs_group_release(ngrp, W, 0, 0, NULL), "group release");
	bn_ck(gs_group_resume(ngrp, W, 0, 0, NULL), "group resume");
}

static void group_cycle(void)
{
	bn_ck(gs_group_release(grp, W, 0, 0, NULL), "group release");
	bn_ck(gs_group_resume(grp, W, 0, 0, NULL), "group resume");
}

static void serial_cycle(void)
{
	int i;

	for (i = 0; i < RANKS; i++)
		bn_ck(gs_release(ctl[i], W, 0, 0, NULL), "release");
	for (i = 0; i < RANKS; i++)
		bn_ck(gs_resume(ctl[i], W, 0, 0, NULL), "resume");
}

static void parallel_half(bool release)
{
	struct gpusleep_result res;
	struct gpusleep_op op[RANKS];
	int i;

	for (i = 0; i < RANKS; i++)
		bn_ck(release ?
		      gs_release(ctl[i], W, GPUSLEEP_OPF_NONBLOCK, 0, &op[i]) :
		      gs_resume(ctl[i], W, GPUSLEEP_OPF_NONBLOCK, 0, &op[i]),
		      "start");
	for (i = 0; i < RANKS; i++) {
		bn_ck(gs_wait(ctl[i], op[i].op_id, 0, &res), "wait");
		bn_ck(res.error, "operation");
	}
}

static void parallel_cycle(void)
{
	parallel_half(true);
	parallel_half(false);
}

static double sample(void (*fn)(void))
{
	uint64_t t = bn_now();

	fn();
	return (double)(bn_now() - t);
}

/* Start a rank process; its domain's id comes back on id_p. */
static pid_t rank_start(int id_p[2], int quit_p[2])
{
	pid_t pid = fork();

	if (pid < 0)
		bn_die("fork: %m");
	if (!pid) {
		close(quit_p[1]);
		_exit(rank_main(id_p[1], quit_p[0]));
	}
	return pid;
}

/* Attach to the next rank that started and add it to group g. */
static int rank_join(int dev, int g, int id_r, int r)
{
	uint32_t id;
	int fd;

	if (read(id_r, &id, sizeof(id)) != sizeof(id))
		bn_die("rank %d did not start", r);
	fd = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER), "attach");
	bn_ck(gs_group_add(g, fd, NULL), "group add");
	return fd;
}

int main(void)
{
	enum { SINGLE, GROUPN, GROUP8, SERIAL, PARALLEL, NK };
	static void (*const kinds[NK])(void) = {
		single_cycle, groupn_cycle, group_cycle, serial_cycle,
		parallel_cycle,
	};
	unsigned int cycles = bn_reps(200, 20), i, k, n = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int id_p[2], quit_p[2], dev, r, st;
	double *s[NK], m[NK];
	pid_t pid[RANKS + MAXN];
	char name[64];
	struct bn_json j;

	nranks = ncpu < 1 ? 1 : ncpu > MAXN ? MAXN : (int)ncpu;
	signal(SIGPIPE, SIG_IGN);
	if (pipe(id_p) || pipe(quit_p))
		bn_die("pipe: %m");
	dev = bn_ck(gs_open(NULL, 0, NULL), "open");
	grp = bn_ck(gs_group_create(dev, "bench_group", NULL), "group create");
	ngrp = bn_ck(gs_group_create(dev, "bench_group_n", NULL),
		     "group create");
	/* one rank at a time: ids come back in the order of the forks */
	for (r = 0; r < RANKS; r++) {
		pid[r] = rank_start(id_p, quit_p);
		ctl[r] = rank_join(dev, grp, id_p[0], r);
	}
	for (r = 0; r < nranks; r++) {
		pid[RANKS + r] = rank_start(id_p, quit_p);
		nctl[r] = rank_join(dev, ngrp, id_p[0], RANKS + r);
	}
	close(quit_p[0]);
	for (k = 0; k < NK; k++) {
		s[k] = bn_xcalloc(cycles, sizeof(double));
		kinds[k]();	/* warm up */
	}
	for (i = 0; i < cycles; i += BLOCK) {
		unsigned int b = cycles - i < BLOCK ? cycles - i : BLOCK;

		for (k = 0; k < NK; k++)
			for (r = 0; r < (int)b; r++)
				s[k][n + r] = sample(kinds[k]);
		n += b;
	}
	for (k = 0; k < NK; k++)
		m[k] = bn_median(s[k], n);

	snprintf(name, sizeof(name),
		 "group of N = %d (the vCPUs) vs one domain's cycle", nranks);
	bn_json_begin(&j, "7a", name, m[GROUPN] / m[SINGLE], 1.2, "max");
	bn_json_median(&j, "group_cycle", m[GROUPN]);
	bn_json_median(&j, "one_domain_cycle", m[SINGLE]);
	bn_json_size(&j, "ranks", nranks);
	bn_json_size(&j, "vcpus", ncpu);
	bn_json_size(&j, "cycles", n);
	bn_json_end(&j, "a CPU per rank: N = the vCPUs of the run");
	bn_json_begin(&j, "7b", "group of 8 vs 8 single-domain cycles one after another",
		      m[GROUP8] / m[SERIAL], 0, "none");
	bn_json_median(&j, "group_cycle", m[GROUP8]);
	bn_json_median(&j, "serial_cycle", m[SERIAL]);
	bn_json_size(&j, "ranks", RANKS);
	bn_json_end(&j, "information");
	bn_json_begin(&j, "7c", "group of 8 vs 8 non-blocking ops then waited",
		      m[GROUP8] / m[PARALLEL], 1.05, "max");
	bn_json_median(&j, "group_cycle", m[GROUP8]);
	bn_json_median(&j, "parallel_cycle", m[PARALLEL]);
	bn_json_size(&j, "ranks", RANKS);
	bn_json_end(&j, "the group's own cost: its drain gate and work item");

	close(quit_p[1]);
	close(grp);
	close(ngrp);
	for (r = 0; r < RANKS; r++)
		close(ctl[r]);
	for (r = 0; r < nranks; r++)
		close(nctl[r]);
	close(dev);
	for (r = 0; r < RANKS + nranks; r++)
		waitpid(pid[r], &st, 0);
	for (k = 0; k < NK; k++)
		free(s[k]);
	return 0;
}
