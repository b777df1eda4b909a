// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 7: a group of 8 ranks released and resumed as one operation
 * (docs/groups.md), against the same 8 domains driven one by one.
 *
 * Eight rank processes, each an engine (gs_engine, drain answered at
 * once) with its agent thread (gs_agent over a host-backend gs_mm holding
 * nothing), as one process per GPU of a tensor-parallel engine. This
 * process is the controller. Samples, weights only, one cycle (release
 * then resume) each, the four kinds in alternating blocks:
 *   single    one domain's cycle (rank 0): the baseline of the target
 *   group     GROUP_RELEASE + GROUP_RESUME of all 8 (blocking)
 *   serial    8 blocking releases one after another, then 8 resumes
 *   parallel  8 non-blocking releases, then WAIT on each; the same for
 *             the resumes
 * 7a: group / single, target <= 1.2 (the group costs about one rank's
 * cycle when the ranks run in parallel: it needs as many CPUs as ranks;
 * on one vCPU every rank's wake-ups are serialised); 7b: group / serial;
 * 7c: group / parallel (what the all-or-nothing gate costs).
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define RANKS	8
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

static int ctl[RANKS], grp;

static void single_cycle(void)
{
	bn_ck(gs_release(ctl[0], W, 0, 0, NULL), "release");
	bn_ck(gs_resume(ctl[0], W, 0, 0, NULL), "resume");
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

int main(void)
{
	static void (*const kinds[4])(void) = {
		single_cycle, group_cycle, serial_cycle, parallel_cycle,
	};
	unsigned int cycles = bn_reps(200, 20), i, k, n = 0;
	int id_p[2], quit_p[2], dev, r, st;
	double *s[4], m[4];
	pid_t pid[RANKS];
	struct bn_json j;
	uint32_t id;

	signal(SIGPIPE, SIG_IGN);
	if (pipe(id_p) || pipe(quit_p))
		bn_die("pipe: %m");
	for (r = 0; r < RANKS; r++) {
		pid[r] = fork();
		if (pid[r] < 0)
			bn_die("fork: %m");
		if (!pid[r]) {
			close(quit_p[1]);
			_exit(rank_main(id_p[1], quit_p[0]));
		}
	}
	close(quit_p[0]);
	dev = bn_ck(gs_open(NULL, 0, NULL), "open");
	grp = bn_ck(gs_group_create(dev, "bench_group", NULL), "group create");
	for (r = 0; r < RANKS; r++) {
		if (read(id_p[0], &id, sizeof(id)) != sizeof(id))
			bn_die("rank %d did not start", r);
		ctl[r] = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER),
			       "attach");
		bn_ck(gs_group_add(grp, ctl[r], NULL), "group add");
	}
	for (k = 0; k < 4; k++) {
		s[k] = bn_xcalloc(cycles, sizeof(double));
		kinds[k]();	/* warm up */
	}
	for (i = 0; i < cycles; i += BLOCK) {
		unsigned int b = cycles - i < BLOCK ? cycles - i : BLOCK;

		for (k = 0; k < 4; k++)
			for (r = 0; r < (int)b; r++)
				s[k][n + r] = sample(kinds[k]);
		n += b;
	}
	for (k = 0; k < 4; k++)
		m[k] = bn_median(s[k], n);

	bn_json_begin(&j, "7a", "group of 8: release+resume vs one domain's cycle",
		      m[1] / m[0], 1.2, "max");
	bn_json_median(&j, "group_cycle", m[1]);
	bn_json_median(&j, "single_cycle", m[0]);
	bn_json_size(&j, "ranks", RANKS);
	bn_json_size(&j, "cycles", n);
	bn_json_end(&j, "needs a CPU per rank: on one vCPU the 8 ranks' wake-ups run one after another");
	bn_json_begin(&j, "7b", "group of 8 vs 8 single-domain cycles one after another",
		      m[1] / m[2], 1.0, "max");
	bn_json_median(&j, "group_cycle", m[1]);
	bn_json_median(&j, "serial_cycle", m[2]);
	bn_json_size(&j, "ranks", RANKS);
	bn_json_end(&j, "");
	bn_json_begin(&j, "7c", "group of 8 vs 8 non-blocking ops then waited",
		      m[1] / m[3], 1.2, "max");
	bn_json_median(&j, "group_cycle", m[1]);
	bn_json_median(&j, "parallel_cycle", m[3]);
	bn_json_size(&j, "ranks", RANKS);
	bn_json_end(&j, "the price of all-or-nothing (the drain gate, the group's work item)");

	close(quit_p[1]);
	close(grp);
	for (r = 0; r < RANKS; r++)
		close(ctl[r]);
	close(dev);
	for (r = 0; r < RANKS; r++)
		waitpid(pid[r], &st, 0);
	for (k = 0; k < 4; k++)
		free(s[k]);
	return 0;
}
