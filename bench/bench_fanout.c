// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 3: completion fan-out to N epoll waiters in other processes
 * (N = 1, 64, 1024).
 *
 * Each waiter is its own process with its own controller fd (gs_open +
 * gs_attach) and its own eventfd, registered on that controller fd for
 * GPUSLEEP_EFD_OP_DONE and watched by its own epoll instance. On a wake it
 * stamps CLOCK_MONOTONIC into its slot of a shared page, reads the eventfd
 * and counts itself; the last one to wake writes a "done" eventfd the
 * driver sleeps on.
 *
 * gpusleep: the driver (this process) holds the engine and agent fds of the
 * domain and steps a weights release / resume with GPUSLEEP_OPF_NONBLOCK:
 * it answers the DRAIN, reads the PAUSE_TAG (RESUME_TAG), stamps t0 and
 * issues the agent's COMPLETE, which ends the operation; the module then
 * signals the N registered eventfds inside that ioctl.
 * Baseline: the same waiters, the same eventfds: stamp t0, write(2) each
 * eventfd in turn (what a userspace broker would have to do).
 * Sample: max over waiters of (stamp - t0), "all woken". Rounds alternate.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

struct shared {
	atomic_uint ready;
	atomic_uint woken;
	uint32_t n;
	uint32_t pad;
	uint64_t stamp[];
};

static void waiter(struct shared *sh, uint32_t i, uint32_t id, int efd,
		   int done)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int dev, ctl, ep;
	uint64_t v;

	dev = bn_ck(gs_open(NULL, 0, NULL), "waiter open");
	ctl = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER), "waiter attach");
	close(dev);
	bn_ck(gs_eventfd(ctl, efd, GPUSLEEP_EFD_OP_DONE), "waiter eventfd");
	ep = epoll_create1(0);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev))
		bn_die("epoll: %m");
	v = 1;
	if (atomic_fetch_add(&sh->ready, 1) + 1 == sh->n &&
	    write(done, &v, sizeof(v)) != sizeof(v))
		bn_die("ready: %m");
	for (;;) {
		if (epoll_wait(ep, &ev, 1, -1) != 1)
			continue;
		sh->stamp[i] = bn_now();
		if (read(efd, &v, sizeof(v)) != sizeof(v))
			continue;
		v = 1;
		if (atomic_fetch_add(&sh->woken, 1) + 1 == sh->n &&
		    write(done, &v, sizeof(v)) != sizeof(v))
			bn_die("done: %m");
	}
}

/*
 * Wait for the waiters' signal on done. A waiter that dies (its attach or
 * eventfd refused: a per-user share, the domain limit) would leave it
 * unsignalled for ever: the run fails instead, saying which and why.
 */
static pid_t *waiters;		/* the waiter processes, for wait_done() */
static uint32_t nr_waiters;

static void wait_done(int done)
{
	struct pollfd p = { .fd = done, .events = POLLIN };
	uint64_t v;
	pid_t dead;
	int st;

	for (;;) {
		if (poll(&p, 1, 1000) == 1)
			break;
		dead = waitpid(-1, &st, WNOHANG);
		if (dead <= 0)
			continue;
		for (uint32_t i = 0; i < nr_waiters; i++)
			if (waiters[i] > 0)
				kill(waiters[i], SIGKILL);
		while (wait(NULL) > 0)
			;
		bn_die("waiter %d %s %d before the round ended", dead,
			       WIFSIGNALED(st) ? "killed by signal" :
						 "exited with status",
			       WIFSIGNALED(st) ? WTERMSIG(st) :
						 WEXITSTATUS(st));
	}
	if (read(done, &v, sizeof(v)) != sizeof(v))
		bn_die("done read: %m");
}

static double all_woken(struct shared *sh, uint64_t t0)
{
	uint64_t m = 0;
	uint32_t i;

	for (i = 0; i < sh->n; i++)
		if (sh->stamp[i] > m)
			m = sh->stamp[i];
	return (double)(m - t0);
}

static void expect(int fd, uint32_t type, struct gpusleep_event *ev)
{
	if (gs_read_event(fd, ev) != 1 || ev->type != type)
		bn_die("expected event %u, got %u", type, ev->type);
}

/* One gpusleep sample: a release (odd) or resume (even) of weights. */
static double gs_round(struct shared *sh, int ctl, int eng, int agt, int done,
		       int release)
{
	struct gpusleep_event ev;
	uint64_t t0;

	atomic_store(&sh->woken, 0);
	if (release) {
		bn_ck(gs_release(ctl, GPUSLEEP_TAG_WEIGHTS,
				 GPUSLEEP_OPF_NONBLOCK, 0, NULL), "release");
		expect(eng, GPUSLEEP_EV_DRAIN, &ev);
		bn_ck(gs_complete(eng, &ev, 0, 0), "complete drain");
		expect(agt, GPUSLEEP_EV_PAUSE_TAG, &ev);
	} else {
		bn_ck(gs_resume(ctl, GPUSLEEP_TAG_WEIGHTS,
				GPUSLEEP_OPF_NONBLOCK, 0, NULL), "resume");
		expect(agt, GPUSLEEP_EV_RESUME_TAG, &ev);
	}
	t0 = bn_now();
	bn_ck(gs_complete(agt, &ev, 0, 0), "complete tag");
	wait_done(done);
	if (!release)
		expect(eng, GPUSLEEP_EV_RESUME_SCHED, &ev);
	return all_woken(sh, t0);
}

static double raw_round(struct shared *sh, const int *efd, int done)
{
	uint64_t t0, v = 1;
	uint32_t i;

	atomic_store(&sh->woken, 0);
	t0 = bn_now();
	for (i = 0; i < sh->n; i++)
		if (write(efd[i], &v, sizeof(v)) != sizeof(v))
			bn_die("eventfd write: %m");
	wait_done(done);
	return all_woken(sh, t0);
}

static void run(uint32_t n, unsigned int rounds)
{
	size_t shsz = sizeof(struct shared) + n * sizeof(uint64_t);
	double *g = bn_xcalloc(rounds, sizeof(double));
	double *w = bn_xcalloc(rounds, sizeof(double));
	int *efd = bn_xcalloc(n, sizeof(int));
	pid_t *pid = bn_xcalloc(n, sizeof(pid_t));
	int dev, eng, agt, ctl, done;
	struct shared *sh;
	unsigned int r;
	struct bn_json j;
	char id_s[8];
	double mg, mw;
	uint32_t id, i, k;

	sh = mmap(NULL, shsz, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		bn_die("mmap: %m");
	sh->n = n;
	dev = bn_ck(gs_open(NULL, 0, NULL), "open");
	eng = bn_ck(gs_create_domain(dev, "bench_fanout", "host", 0, 0, &id),
		    "create");
	agt = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_AGENT), "attach agent");
	ctl = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER), "attach ctl");
	done = eventfd(0, EFD_CLOEXEC);
	if (done < 0)
		bn_die("eventfd: %m");
	for (i = 0; i < n; i++) {
		efd[i] = eventfd(0, EFD_NONBLOCK);
		if (efd[i] < 0)
			bn_die("eventfd: %m");
	}
	fflush(stdout);
	for (i = 0; i < n; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			bn_die("fork: %m");
		if (pid[i] == 0) {
			close(eng);
			close(agt);
			close(ctl);
			close(dev);
			for (k = 0; k < n; k++)
				if (k != i)
					close(efd[k]);
			waiter(sh, i, id, efd[i], done);
		}
	}
	waiters = pid;
	nr_waiters = n;
	wait_done(done);	/* all registered */

	for (r = 0; r < 4; r++) {	/* warm up */
		gs_round(sh, ctl, eng, agt, done, !(r & 1));
		raw_round(sh, efd, done);
	}
	for (r = 0; r < rounds; r++) {
		g[r] = gs_round(sh, ctl, eng, agt, done, !(r & 1));
		w[r] = raw_round(sh, efd, done);
	}
	mg = bn_median(g, rounds);
	mw = bn_median(w, rounds);

	for (i = 0; i < n; i++)
		kill(pid[i], SIGKILL);
	for (i = 0; i < n; i++) {
		waitpid(pid[i], NULL, 0);
		close(efd[i]);
	}
	close(ctl);
	close(agt);
	close(eng);
	close(dev);
	close(done);
	munmap(sh, shsz);

	snprintf(id_s, sizeof(id_s), "3-%u", n);
	bn_json_begin(&j, id_s, "completion fan-out vs raw eventfd writes",
		      mg / mw, 1.5, "max");
	bn_json_median(&j, "gpusleep_all_woken", mg);
	bn_json_median(&j, "raw_eventfd_all_woken", mw);
	bn_json_size(&j, "waiters", n);
	bn_json_size(&j, "rounds", rounds);
	bn_json_end(&j, "one process, controller fd, eventfd and epoll per waiter");
	free(g);
	free(w);
	free(efd);
	free(pid);
}

int main(int argc, char **argv)
{
	struct rlimit rl = { 65536, 65536 };
	int a;

	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (argc < 2) {
		run(1, bn_reps(300, 20));
		run(64, bn_reps(100, 10));
		run(1024, bn_reps(30, 6));
	}
	for (a = 1; a < argc; a++)
		run((uint32_t)atoi(argv[a]), bn_reps(50, 6));
	return 0;
}
