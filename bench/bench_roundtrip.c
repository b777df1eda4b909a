// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 2: the protocol round trip of a weights-only cycle, domain
 * holding 0 bytes: RELEASE(weights) then RESUME(weights), with engine,
 * agent and controller as three processes.
 *
 * gpusleep: the engine process runs libgpusleep's gs_engine (poll +
 * gs_engine_dispatch, drain answered at once); the agent process runs
 * gs_agent's io_uring thread over a gs_mm on the host backend holding
 * nothing; the controller (this process) calls gs_release / gs_resume
 * (blocking ioctls). Messages per cycle, each one process wake-up:
 *   release: controller -> engine (DRAIN) -> agent (PAUSE_TAG) -> controller
 *   resume:  controller -> agent (RESUME_TAG) -> controller,
 *            and RESUME_SCHED to the engine (not waited for)
 * = 5 awaited hops + 1 one-way message.
 *
 * Floor (a): the same six messages between three C processes over AF_UNIX
 * SOCK_SEQPACKET socketpairs, 40-byte records, blocking read/write (each
 * side knows which socket the next message comes on: no poll at all).
 * Reference stand-in (b): bench/pickle_rt.py, the same flow between three
 * python3 processes sending pickled request objects over AF_UNIX
 * SOCK_SEQPACKET, as the seed's ZMQ send_pyobj channel does.
 *
 * Samples: one cycle each, gpusleep and floor in alternating blocks.
 *
 * --native (no module needed, run on the host by bench/run.sh): only the
 * floor and the stand-in, record 2c = pickle cycle / floor cycle. gpusleep
 * costs at least the floor, so 2c bounds from above the speedup 2b could
 * show natively; with 2a's ratio it estimates it (docs/benchmarks.md).
 */
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define BLOCK	25

struct msg {
	uint64_t op;
	uint32_t type, tags, flags, step;
	uint64_t reserved[2];
};

enum { MSG_DRAIN = 1, MSG_RESUME_SCHED = 5, MSG_PAUSE = 6, MSG_RESUME = 7,
	MSG_DONE = 8, MSG_QUIT = 9 };

static int drain_now(struct gs_engine *e, void *arg, uint32_t tags, bool ab)
{
	(void)e; (void)arg; (void)tags; (void)ab;
	return 0;
}

static int engine_main(int id_w, int quit_r)
{
	static const struct gs_engine_ops ops = { .drain = drain_now };
	/* shared: the agent is another process here */
	struct gs_engine_config cfg = { .name = "bench_rt", .gpu = "host",
					.flags = GPUSLEEP_CREATEF_SHARED };
	struct gs_engine *e;
	uint32_t id;

	bn_ck(gs_engine_create(&cfg, &ops, NULL, &e), "engine create");
	id = gs_engine_id(e);
	if (write(id_w, &id, sizeof(id)) != sizeof(id))
		return 1;
	if (bn_engine_serve(e, quit_r))
		return 1;
	gs_engine_destroy(e);
	return 0;
}

static int agent_main(uint32_t id, int ready_w, int quit_r)
{
	struct gs_agent *a;
	struct gs_mm *mm;
	char c = 1;

	bn_ck(gs_mm_new(gs_backend_host_new(), &mm), "mm");
	bn_ck(gs_agent_attach(NULL, id, mm, &a), "agent attach");
	bn_ck(gs_agent_start(a), "agent start");
	if (write(ready_w, &c, 1) != 1)
		return 1;
	while (read(quit_r, &c, 1) > 0)
		;
	gs_agent_stop(a);
	gs_agent_destroy(a);
	gs_mm_destroy(mm);
	return 0;
}

static void xsend(int fd, uint32_t type)
{
	struct msg m = { .type = type, .tags = GPUSLEEP_TAG_WEIGHTS };

	if (write(fd, &m, sizeof(m)) != sizeof(m))
		bn_die("send: %m");
}

static uint32_t xrecv(int fd)
{
	struct msg m;

	if (read(fd, &m, sizeof(m)) != sizeof(m))
		return MSG_QUIT;
	return m.type;
}

/* ce: controller<->engine, ea: engine<->agent, ac: agent<->controller;
 * [0] is the controller / engine / agent end respectively as named first. */
static void unix_engine(int ce, int ea)
{
	for (;;) {
		uint32_t t = xrecv(ce);

		if (t == MSG_QUIT) {
			xsend(ea, MSG_QUIT);
			_exit(0);
		}
		if (t == MSG_DRAIN)
			xsend(ea, MSG_PAUSE);
		/* MSG_RESUME_SCHED: scheduling resumes, no answer */
	}
}

static void unix_agent(int ea, int ac)
{
	for (;;) {
		if (xrecv(ea) != MSG_PAUSE)
			_exit(0);
		xsend(ac, MSG_DONE);
		if (xrecv(ac) != MSG_RESUME)
			_exit(0);
		xsend(ac, MSG_DONE);
	}
}

static void unix_cycle(int ce, int ac, uint64_t *rel, uint64_t *res)
{
	uint64_t t0 = bn_now(), t1;

	xsend(ce, MSG_DRAIN);
	if (xrecv(ac) != MSG_DONE)
		bn_die("unix floor: lost a peer");
	t1 = bn_now();
	xsend(ac, MSG_RESUME);
	if (xrecv(ac) != MSG_DONE)
		bn_die("unix floor: lost a peer");
	xsend(ce, MSG_RESUME_SCHED);
	*res = bn_now() - t1;
	*rel = t1 - t0;
}

static void gs_cycle(int ctl, uint64_t *rel, uint64_t *res)
{
	uint64_t t0 = bn_now(), t1;

	bn_ck(gs_release(ctl, GPUSLEEP_TAG_WEIGHTS, 0, 0, NULL), "release");
	t1 = bn_now();
	bn_ck(gs_resume(ctl, GPUSLEEP_TAG_WEIGHTS, 0, 0, NULL), "resume");
	*res = bn_now() - t1;
	*rel = t1 - t0;
}

static int sp(int sv[2])
{
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
}

/* Run the pickle stand-in; its last line: "<cycle> <release> <resume>" ns. */
static int run_pickle(unsigned int cycles, double out[3])
{
	const char *py = getenv("BENCH_PYTHON");
	char cmd[512], line[256];
	FILE *f;
	int ok = 0;

	snprintf(cmd, sizeof(cmd), "%s bench/pickle_rt.py %u",
		 py ? py : "/usr/bin/python3", cycles);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lf %lf %lf", &out[0], &out[1], &out[2]) == 3)
			ok = 1;
	return pclose(f) == 0 && ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	int native = argc > 1 && !strcmp(argv[1], "--native");
	unsigned int cycles = bn_reps(1000, 50), pycycles = bn_reps(400, 40);
	double *gr, *gs, *gc, *ur, *us, *uc, py[3], m[6];
	int idp[2], rdy[2], qp[2], ce[2], ea[2], ac[2];
	pid_t eng, agt, ue, ua;
	unsigned long long gsw = 0, usw = 0, c0;
	unsigned int i, k;
	struct bn_json j;
	uint32_t id;
	char c;
	int ctl, dev;

	signal(SIGPIPE, SIG_IGN);
	if (pipe(idp) || pipe(rdy) || pipe(qp))
		bn_die("pipe: %m");
	if (native) {
		eng = agt = -1;
		ctl = dev = -1;
		goto floor;
	}
	eng = fork();
	if (eng == 0) {
		close(qp[1]);
		_exit(engine_main(idp[1], qp[0]));
	}
	if (read(idp[0], &id, sizeof(id)) != sizeof(id))
		bn_die("engine did not start");
	agt = fork();
	if (agt == 0) {
		close(qp[1]);
		_exit(agent_main(id, rdy[1], qp[0]));
	}
	if (read(rdy[0], &c, 1) != 1)
		bn_die("agent did not start");
	close(qp[0]);
	dev = bn_ck(gs_open(NULL, 0, NULL), "open");
	ctl = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER), "attach");

floor:
	if (sp(ce) || sp(ea) || sp(ac))
		bn_die("socketpair: %m");
	ue = fork();
	if (ue == 0) {
		close(qp[1]);
		unix_engine(ce[1], ea[0]);
	}
	ua = fork();
	if (ua == 0) {
		close(qp[1]);
		unix_agent(ea[1], ac[1]);
	}

	gr = bn_xcalloc(cycles, sizeof(double));
	gs = bn_xcalloc(cycles, sizeof(double));
	gc = bn_xcalloc(cycles, sizeof(double));
	ur = bn_xcalloc(cycles, sizeof(double));
	us = bn_xcalloc(cycles, sizeof(double));
	uc = bn_xcalloc(cycles, sizeof(double));
	for (i = 0; i < 20; i++) {	/* warm up */
		uint64_t a, b;

		if (!native)
			gs_cycle(ctl, &a, &b);
		unix_cycle(ce[0], ac[0], &a, &b);
	}
	for (i = 0; i < cycles; i += BLOCK) {
		c0 = bn_ctxt();
		for (k = i; k < cycles && k < i + BLOCK && !native; k++) {
			uint64_t a, b;

			gs_cycle(ctl, &a, &b);
			gr[k] = a; gs[k] = b; gc[k] = a + b;
		}
		gsw += bn_ctxt() - c0;
		c0 = bn_ctxt();
		for (k = i; k < cycles && k < i + BLOCK; k++) {
			uint64_t a, b;

			unix_cycle(ce[0], ac[0], &a, &b);
			ur[k] = a; us[k] = b; uc[k] = a + b;
		}
		usw += bn_ctxt() - c0;
	}
	m[0] = bn_median(gc, cycles);
	m[1] = bn_median(gr, cycles);
	m[2] = bn_median(gs, cycles);
	m[3] = bn_median(uc, cycles);
	m[4] = bn_median(ur, cycles);
	m[5] = bn_median(us, cycles);

	/* stop the C trios before python runs */
	xsend(ce[0], MSG_QUIT);
	close(ce[0]);
	close(ac[0]);
	close(qp[1]);
	waitpid(ue, NULL, 0);
	waitpid(ua, NULL, 0);
	if (native) {
		if (run_pickle(pycycles, py))
			bn_die("bench/pickle_rt.py failed");
		bn_json_begin(&j, "2c", "python pickle stand-in vs C AF_UNIX floor (speedup, native)",
			      py[0] / m[3], 0, "none");
		bn_json_median(&j, "afunix_cycle", m[3]);
		bn_json_median(&j, "pickle_cycle", py[0]);
		bn_json_size(&j, "cycles", cycles);
		bn_json_size(&j, "pickle_cycles", pycycles);
		bn_json_end(&j, "information: the most 2b could be natively (gpusleep >= the floor)");
		return 0;
	}
	waitpid(agt, NULL, 0);
	close(ctl);
	waitpid(eng, NULL, 0);
	close(dev);

	bn_json_begin(&j, "2a", "round trip vs C AF_UNIX floor (same hops)",
		      m[0] / m[3], 1.2, "max");
	bn_json_median(&j, "gpusleep_cycle", m[0]);
	bn_json_median(&j, "gpusleep_release", m[1]);
	bn_json_median(&j, "gpusleep_resume", m[2]);
	bn_json_median(&j, "afunix_cycle", m[3]);
	bn_json_median(&j, "afunix_release", m[4]);
	bn_json_median(&j, "afunix_resume", m[5]);
	bn_json_size(&j, "cycles", cycles);
	bn_json_size(&j, "hops_awaited", 5);
	bn_json_size(&j, "messages", 6);
	bn_json_size(&j, "bytes_held", 0);
	bn_json_extra(&j, "release_ratio", m[1] / m[4]);
	bn_json_extra(&j, "resume_ratio", m[2] / m[5]);
	/* Context switches per cycle, the whole guest (/proc/stat). */
	bn_json_extra(&j, "gpusleep_switches", (double)gsw / cycles);
	bn_json_extra(&j, "afunix_switches", (double)usw / cycles);
	bn_json_end(&j, "");

	if (run_pickle(pycycles, py)) {
		bn_json_begin(&j, "2b", "round trip vs python pickle stand-in (speedup)",
			      0, 0, "none");
		bn_json_end(&j, "skipped: bench/pickle_rt.py failed");
		return 0;
	}
	bn_json_begin(&j, "2b", "round trip vs python pickle stand-in (speedup)",
		      py[0] / m[0], 0, "none");
	bn_json_median(&j, "gpusleep_cycle", m[0]);
	bn_json_median(&j, "pickle_cycle", py[0]);
	bn_json_median(&j, "pickle_release", py[1]);
	bn_json_median(&j, "pickle_resume", py[2]);
	bn_json_size(&j, "cycles", cycles);
	bn_json_size(&j, "pickle_cycles", pycycles);
	bn_json_size(&j, "messages", 6);
	bn_json_end(&j, "information, a speedup (pickle / gpusleep): the 10x target assumed ZeroMQ, see docs/benchmarks.md");
	return 0;
}
