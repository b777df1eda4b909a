// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 5: many domains released concurrently (1, 16, 256).
 *
 * Every domain has its own engine and agent responders: two threads of this
 * process per domain (processes would be 512 at 256 domains), each blocked
 * in read(2) on its fd and answering every step at once with
 * GPUSLEEP_IOC_COMPLETE. One controller thread (main) holds a controller fd
 * per domain: a cycle issues RELEASE(weights, NONBLOCK) on every domain of
 * the group, then GPUSLEEP_IOC_WAIT on each, then the same for RESUME.
 * Time per domain = cycle time / domains. The three groups (1 + 16 + 256
 * domains) live at once and their cycles are interleaved, so drift hits all
 * of them alike. Ratio: per-domain time at 256 (and 16) over that at 1.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

static void *responder(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct gpusleep_event ev;

	while (gs_read_event(fd, &ev) == 1) {
		switch (ev.type) {
		case GPUSLEEP_EV_DRAIN:
		case GPUSLEEP_EV_RESET_CACHES:
		case GPUSLEEP_EV_REPAIR_KV:
		case GPUSLEEP_EV_PAUSE_TAG:
		case GPUSLEEP_EV_RESUME_TAG:
			gs_complete(fd, &ev, 0, 0);
			break;
		default:
			break;
		}
	}
	return NULL;
}

struct group {
	unsigned int n;
	int *ctl;
	uint64_t *op;
	double *rel, *res, *cyc;
};

static void spawn(int fd)
{
	pthread_attr_t at;
	pthread_t t;

	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	if (pthread_create(&t, &at, responder, (void *)(intptr_t)fd))
		bn_die("pthread_create");
	pthread_attr_destroy(&at);
}

static void setup(struct group *g, int dev, unsigned int n, unsigned int reps)
{
	unsigned int d;

	g->n = n;
	g->ctl = bn_xcalloc(n, sizeof(int));
	g->op = bn_xcalloc(n, sizeof(uint64_t));
	g->rel = bn_xcalloc(reps, sizeof(double));
	g->res = bn_xcalloc(reps, sizeof(double));
	g->cyc = bn_xcalloc(reps, sizeof(double));
	for (d = 0; d < n; d++) {
		uint32_t id;
		/* shared: the engine and agent are played by children */
		int eng = bn_ck(gs_create_domain(dev, "bench_scale", "host", 0,
						 GPUSLEEP_CREATEF_SHARED, &id),
				"create domain");

		spawn(eng);
		spawn(bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_AGENT), "agent"));
		g->ctl[d] = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER),
				  "controller");
	}
}

static void phase(struct group *g, int release)
{
	struct gpusleep_result res;
	struct gpusleep_op op;
	unsigned int d;

	for (d = 0; d < g->n; d++) {
		if (release)
			bn_ck(gs_release(g->ctl[d], GPUSLEEP_TAG_WEIGHTS,
					 GPUSLEEP_OPF_NONBLOCK, 0, &op), "release");
		else
			bn_ck(gs_resume(g->ctl[d], GPUSLEEP_TAG_WEIGHTS,
					GPUSLEEP_OPF_NONBLOCK, 0, &op), "resume");
		g->op[d] = op.op_id;
	}
	for (d = 0; d < g->n; d++) {
		bn_ck(gs_wait(g->ctl[d], g->op[d], 0, &res), "wait");
		if (res.error)
			bn_die("operation failed: %s", strerror(-res.error));
	}
}

static void cycle(struct group *g, unsigned int r)
{
	uint64_t t0 = bn_now(), t1, t2;

	phase(g, 1);
	t1 = bn_now();
	phase(g, 0);
	t2 = bn_now();
	g->rel[r] = (double)(t1 - t0) / g->n;
	g->res[r] = (double)(t2 - t1) / g->n;
	g->cyc[r] = (double)(t2 - t0) / g->n;
}

int main(void)
{
	static const unsigned int sizes[] = { 1, 16, 256 };
	unsigned int reps = bn_reps(40, 6), r, i;
	struct rlimit rl = { 4096, 4096 };
	struct group g[3];
	double m[3][3];
	struct bn_json j;
	int dev;

	setrlimit(RLIMIT_NOFILE, &rl);
	dev = bn_ck(gs_open(NULL, 0, NULL), "open");
	for (i = 0; i < 3; i++)
		setup(&g[i], dev, sizes[i], reps);
	for (i = 0; i < 3; i++)	/* warm up */
		cycle(&g[i], 0);
	for (r = 0; r < reps; r++)
		for (i = 0; i < 3; i++)
			cycle(&g[i], r);
	for (i = 0; i < 3; i++) {
		m[i][0] = bn_median(g[i].cyc, reps);
		m[i][1] = bn_median(g[i].rel, reps);
		m[i][2] = bn_median(g[i].res, reps);
	}
	for (i = 1; i < 3; i++) {
		char id[16];

		snprintf(id, sizeof(id), "5-%u", sizes[i]);
		bn_json_begin(&j, id, "per-domain cycle time, N domains vs 1",
			      m[i][0] / m[0][0], 1.5, "max");
		bn_json_median(&j, "per_domain_cycle", m[i][0]);
		bn_json_median(&j, "per_domain_release", m[i][1]);
		bn_json_median(&j, "per_domain_resume", m[i][2]);
		bn_json_median(&j, "one_domain_cycle", m[0][0]);
		bn_json_median(&j, "one_domain_release", m[0][1]);
		bn_json_median(&j, "one_domain_resume", m[0][2]);
		bn_json_size(&j, "domains", sizes[i]);
		bn_json_size(&j, "reps", reps);
		bn_json_end(&j, "responders: 2 threads per domain; one controller thread, NONBLOCK + WAIT");
	}
	fflush(stdout);
	_exit(0);	/* the responder threads end with the process */
}
