// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep demo trainer: the RL trainer's side of the loop, as a controller
 * of the engine's domain. For each step:
 *
 *   release all      GPUSLEEP_OPF_NONBLOCK release, completion awaited on an
 *                    eventfd through epoll, then gs_wait for the result;
 *                    the engine's RSS must fall by what it gave back
 *   train            allocate and touch as much memory as was given back
 *   resume weights   the backup comes back: the old version must be there
 *   push weights     version N through a memfd, bucket by bucket; the
 *                    engine checks every word
 *   resume kv_cache  the engine checks the KV reads as zeros, re-initialises
 *                    it; scheduling resumes
 *   serve            wait until the engine has finished a few requests
 *
 * and prints one row per phase (a table, or JSON lines with --json).
 * Exits 1 on any mismatch. Durations are printed, never checked.
 *
 * Usage: trainer --socket PATH [--engine-pid PID] [--steps N]
 *                [--abort-step N] [--bucket-mib N] [--serve N]
 *                [--timeout-s S] [--events FILE] [--status-cmd CMD]
 *                [--json]
 * --events FILE: `gpusleepctl monitor --json` output to check at the end
 * (every operation announced by netlink, from start to successful end).
 * --status-cmd CMD: run "CMD DOMAIN" before the engine quits.
 * --rows FILE: every timeline row also as a JSON line in FILE (with the
 *   wall-clock time, unix_s), for tools/demo/plot.py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libgpusleep.h"
#include "demo.h"

struct trainer {
	int sock;		/* to the engine */
	pid_t engine_pid;
	uint32_t domain;
	uint64_t wbytes, kvbytes;
	int cfd;		/* controller fd */
	int efd, ep;		/* eventfd and its epoll */
	int memfd;
	size_t bucket;
	unsigned int timeout_s, serve;
	bool json, tty;
	FILE *rows;		/* --rows FILE: every row as a JSON line */
	int failures;
	uint64_t ops[64];	/* op ids issued, for the event check */
	unsigned int nops;
};

static struct timespec t0;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
}

static double mib(uint64_t b)
{
	return (double)b / DEMO_MiB;
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static void fail(struct trainer *t, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	t->failures++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write: other processes share the output. */
	fprintf(stderr, "demo: FAIL: %s\n", msg);
	fflush(stderr);
}

static double progress_last;

/* Progress of a long phase: a spinner on a terminal, else a line every 2 s. */
static void progress(struct trainer *t, const char *phase, double since,
		     const char *fmt, ...)
{
	static const char spin[] = "|/-\\";
	static unsigned int n;
	double el = now_s() - since;
	char detail[160] = "";
	va_list ap;

	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	if (t->json && !t->tty)
		return;		/* machines read stdout; keep it clean */
	if (t->tty) {
		fprintf(stderr, "\r\033[K  %c %s %.1f s %s", spin[n++ % 4], phase,
			el, detail);
	} else {
		if (el < 2 || now_s() - progress_last < 2)
			return;
		fprintf(stderr, "     .. %s %.1f s %s\n", phase, el, detail);
	}
	progress_last = now_s();
	fflush(stderr);
}

static void progress_end(struct trainer *t)
{
	if (t->tty) {
		fprintf(stderr, "\r\033[K");
		fflush(stderr);
	}
	progress_last = 0;
}

/* s as a JSON string literal on f. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* One timeline row as a JSON line on f (stdout with --json, --rows FILE). */
static void row_json(FILE *f, int step, const char *phase, double dur,
		     uint64_t ers, uint64_t trs, const char *note)
{
	struct timespec rt;

	clock_gettime(CLOCK_REALTIME, &rt);
	fprintf(f, "{\"step\":%d,\"phase\":", step);
	json_str(f, phase);
	fprintf(f, ",\"t_s\":%.3f,\"unix_s\":%lld.%06ld,\"duration_s\":",
		now_s(), (long long)rt.tv_sec, rt.tv_nsec / 1000);
	if (dur < 0)
		fputs("null", f);
	else
		fprintf(f, "%.3f", dur);
	fprintf(f, ",\"engine_rss_bytes\":%llu,\"trainer_rss_bytes\":%llu,\"note\":",
		(unsigned long long)ers, (unsigned long long)trs);
	json_str(f, note);
	fputs("}\n", f);
	fflush(f);
}

/* One timeline row; ers, trs: the RSS to show, 0 = measure now. */
static void row(struct trainer *t, int step, const char *phase, double dur,
		uint64_t ers, uint64_t trs, const char *fmt, ...)
{
	char note[256] = "";
	va_list ap;

	if (!ers)
		ers = demo_rss(t->engine_pid);
	if (!trs)
		trs = demo_rss(0);
	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	progress_end(t);
	if (t->rows)
		row_json(t->rows, step, phase, dur, ers, trs, note);
	if (t->json) {
		row_json(stdout, step, phase, dur, ers, trs, note);
	} else {
		char d[16] = "-";

		if (dur >= 0)
			snprintf(d, sizeof(d), "%.2f s", dur);
		printf("%4d  %-16s %9s %9.1f MiB %9.1f MiB  %s\n", step, phase, d,
		       mib(ers), mib(trs), note);
	}
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* The engine's control socket                                         */

static int rpc(struct trainer *t, uint32_t cmd, uint64_t a, uint64_t b,
	       int fd, struct demo_rep *rep, const char *phase, double since)
{
	struct demo_req rq = { .cmd = cmd, .a = a, .b = b };
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &rq, .iov_len = sizeof(rq) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	size_t got = 0;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(t->sock, &mh, MSG_NOSIGNAL) != sizeof(rq)) {
		fprintf(stderr, "demo: send to the engine: %s\n", strerror(errno));
		return -EPIPE;
	}
	while (got < sizeof(*rep)) {
		struct pollfd p = { .fd = t->sock, .events = POLLIN };
		ssize_t n;
		int r = poll(&p, 1, 500);

		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0) {
			if (phase)
				progress(t, phase, since, "(engine working)");
			continue;
		}
		n = recv(t->sock, (char *)rep + got, sizeof(*rep) - got, 0);
		if (n <= 0) {
			fprintf(stderr, "demo: the engine closed its socket (did it exit? see its log)\n");
			return -EPIPE;
		}
		got += n;
	}
	rep->msg[sizeof(rep->msg) - 1] = 0;
	return rep->status;
}

static int stats(struct trainer *t, struct demo_rep *rep)
{
	int ret = rpc(t, DEMO_STATS, 0, 0, -1, rep, NULL, 0);

	if (ret)
		fprintf(stderr, "demo: engine stats: %s\n", strerror(-ret));
	return ret;
}

static int connect_engine(struct trainer *t, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double start = now_s();

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "demo: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	for (;;) {
		t->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (t->sock < 0) {
			perror("demo: socket");
			return -1;
		}
		if (!connect(t->sock, (struct sockaddr *)&sa, sizeof(sa)))
			return 0;
		close(t->sock);
		if (errno != ENOENT && errno != ECONNREFUSED) {
			fprintf(stderr, "demo: connect to the engine at %s: %s\n",
				path, strerror(errno));
			return -1;
		}
		if (t->engine_pid && kill(t->engine_pid, 0) && errno == ESRCH) {
			fprintf(stderr, "demo: the engine (pid %d) exited before it listened on %s\n",
				(int)t->engine_pid, path);
			return -1;
		}
		if (now_s() - start > t->timeout_s) {
			fprintf(stderr, "demo: no engine listening on %s after %u s\n",
				path, t->timeout_s);
			return -1;
		}
		progress(t, "engine start", start, "(filling weights and KV cache)");
		usleep(100000);
	}
}

/* ------------------------------------------------------------------ */
/* Operations: started NONBLOCK, completion seen on the eventfd         */

/*
 * Start a release or resume, wait on epoll until the eventfd says it is
 * done, then fetch the result. *drain_s gets when the drain was signalled
 * (release only; -1 if not seen). Returns 0 if the operation succeeded.
 */
static int run_op(struct trainer *t, bool release, uint32_t tags,
		  uint32_t flags, const char *phase, struct gpusleep_result *res,
		  double *drain_s)
{
	struct gpusleep_op op;
	double start = now_s();
	char tn[64];
	int ret;

	if (drain_s)
		*drain_s = -1;
	gs_tags_format(tags ? tags : GPUSLEEP_TAG_ALL, tn, sizeof(tn));
	memset(res, 0, sizeof(*res));
	if (release)
		ret = gs_release(t->cfd, tags, flags | GPUSLEEP_OPF_NONBLOCK, 0, &op);
	else
		ret = gs_resume(t->cfd, tags, flags | GPUSLEEP_OPF_NONBLOCK, 0, &op);
	if (ret) {
		fail(t, "%s of %s refused: %s (%s: %s)", release ? "release" : "resume",
		     tn, strerror(-ret), gs_reason_name(op.reason),
		     gs_reason_str(op.reason));
		return ret;
	}
	if (t->nops < sizeof(t->ops) / sizeof(t->ops[0]))
		t->ops[t->nops++] = op.op_id;
	for (;;) {
		struct epoll_event ev;
		struct gpusleep_state st;
		uint64_t cnt;
		int n = epoll_wait(t->ep, &ev, 1, 500);

		if (n < 0 && errno != EINTR) {
			fail(t, "epoll_wait: %s", strerror(errno));
			return -errno;
		}
		if (n > 0 && read(t->efd, &cnt, 8) != 8 && errno != EAGAIN) {
			fail(t, "read eventfd: %s", strerror(errno));
			return -errno;
		}
		ret = gs_get_state(t->cfd, &st);
		if (ret) {
			fail(t, "get state of domain %u: %s", t->domain, strerror(-ret));
			return ret;
		}
		if (n > 0 && drain_s && *drain_s < 0 &&
		    st.state != GPUSLEEP_S_DRAINING)
			*drain_s = now_s() - start;
		if (st.op_in_flight != op.op_id) {
			if (n <= 0) {
				/* Done, but the eventfd has not said so yet:
				 * give it its chance before calling it missing. */
				n = epoll_wait(t->ep, &ev, 1, 1000);
				if (n <= 0) {
					fail(t, "operation %llu finished but the eventfd was not signalled",
					     (unsigned long long)op.op_id);
					return -EPROTO;
				}
				if (read(t->efd, &cnt, 8) != 8 && errno != EAGAIN)
					return -errno;
			}
			break;
		}
		if (now_s() - start > t->timeout_s) {
			fail(t, "operation %llu (%s of %s) not done after %u s (state %s)",
			     (unsigned long long)op.op_id,
			     release ? "release" : "resume", tn, t->timeout_s,
			     gs_state_name(st.state));
			return -ETIMEDOUT;
		}
		progress(t, phase, start, "(%s)", gs_state_name(st.state));
	}
	ret = gs_wait(t->cfd, op.op_id, 1000, res);
	if (ret) {
		fail(t, "wait for operation %llu: %s", (unsigned long long)op.op_id,
		     strerror(-ret));
		return ret;
	}
	if (res->error) {
		fail(t, "%s of %s failed: %s (%s: %s)",
		     release ? "release" : "resume", tn, strerror(-res->error),
		     gs_reason_name(res->reason), gs_reason_str(res->reason));
		return res->error;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Phases                                                              */

static volatile uint64_t train_sum;	/* keeps the passes */

/* "Train" on size bytes: touch every page, a few passes over it. */
static int train(struct trainer *t, int step, size_t size, uint64_t *peak)
{
	double start = now_s();
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t before = demo_rss(0), sum = 0;
	unsigned char *m;

	m = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		fail(t, "train: allocating %.1f MiB: %s", mib(size), strerror(errno));
		return -1;
	}
	for (size_t off = 0; off < size; off += pg) {
		m[off] = (unsigned char)(off / pg + step);
		if (!(off & ((64u << 20) - 1)))
			progress(t, "train", start, "(%.0f of %.0f MiB touched)",
				 mib(off), mib(size));
	}
	for (size_t off = 0; off < size; off += pg)
		sum += m[off];
	train_sum += sum;
	*peak = demo_rss(0);
	munmap(m, size);
	if (*peak < before + size * 9 / 10)
		fail(t, "train: trainer RSS rose by %.1f MiB only, for %.1f MiB touched",
		     mib(*peak - before), mib(size));
	return 0;
}

static int push_weights(struct trainer *t, uint64_t version, unsigned int *nb)
{
	double start = now_s();
	struct demo_rep rep;
	uint64_t *buf;
	int ret = 0;

	*nb = 0;
	buf = mmap(NULL, t->bucket, PROT_READ | PROT_WRITE, MAP_SHARED, t->memfd, 0);
	if (buf == MAP_FAILED) {
		fail(t, "push: mmap of the weights memfd: %s", strerror(errno));
		return -errno;
	}
	for (uint64_t off = 0; off < t->wbytes; off += t->bucket) {
		uint64_t len = t->wbytes - off < t->bucket ? t->wbytes - off : t->bucket;

		for (uint64_t i = 0; i < len / 8; i++)
			buf[i] = demo_word(version, off / 8 + i);
		ret = rpc(t, DEMO_PUSH, off, len, -1, &rep, "push weights", start);
		if (ret) {
			fail(t, "push of the bucket at %.0f MiB: %s", mib(off),
			     rep.msg[0] ? rep.msg : strerror(-ret));
			break;
		}
		(*nb)++;
		progress(t, "push weights", start, "(%.0f of %.0f MiB)",
			 mib(off + len), mib(t->wbytes));
	}
	munmap(buf, t->bucket);
	/* The bucket's pages are not needed until the next push. */
	if (fallocate(t->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      t->bucket))
		fprintf(stderr, "demo: punch the weights memfd: %s\n", strerror(errno));
	if (ret)
		return ret;
	ret = rpc(t, DEMO_COMMIT, version, 0, -1, &rep, "push weights", start);
	if (ret)
		fail(t, "weights version %llu after the push: %s",
		     (unsigned long long)version,
		     rep.msg[0] ? rep.msg : strerror(-ret));
	return ret;
}

/* ------------------------------------------------------------------ */
/* The netlink events seen by `gpusleepctl monitor --json`             */

/* Value of "key": in a JSON line, as a number; -1 if absent. */
static long long json_num(const char *line, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\"", key);
	for (p = strstr(line, pat); p; p = strstr(p + 1, pat)) {
		const char *q = p + strlen(pat);

		while (*q == ' ')
			q++;
		if (*q++ != ':')
			continue;
		while (*q == ' ' || *q == '"')
			q++;
		if (*q >= '0' && *q <= '9')
			return strtoll(q, NULL, 10);
	}
	return -1;
}

/* The id of a line's "domain":{"id":N,"name":...}; -1 if absent. */
static long long json_domain(const char *line)
{
	const char *p = strstr(line, "\"domain\":{");

	return p ? json_num(p, "id") : -1;
}

/*
 * Every operation must have been announced as finished: a line for this
 * domain naming its op id with a result. Returns the number missing.
 */
static unsigned int scan_events(struct trainer *t, const char *path,
				bool *seen, unsigned int *lines)
{
	unsigned int n = 0, trans[64] = { 0 };
	char line[4096];
	FILE *f = fopen(path, "r");

	*lines = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		long long op = json_num(line, "op");

		(*lines)++;
		if (json_domain(line) != t->domain ||
		    !strstr(line, "\"transition\""))
			continue;
		for (unsigned int i = 0; i < t->nops; i++) {
			if (op != (long long)t->ops[i])
				continue;
			trans[i]++;
			/* The finishing transition carries the result. */
			if (strstr(line, "\"result\"") &&
			    json_num(line, "error") == 0 && trans[i] >= 2 &&
			    !seen[i]) {
				seen[i] = true;
				n++;
			}
		}
	}
	fclose(f);
	return n;
}

/* The watcher writes as it goes: give it up to 5 s to catch up. */
static int check_events(struct trainer *t, const char *path)
{
	bool seen[64];
	unsigned int lines = 0;
	double start = now_s();
	int missing = 0;

	do {
		memset(seen, 0, sizeof(seen));
		if (scan_events(t, path, seen, &lines) == t->nops)
			break;
		usleep(200000);
	} while (now_s() - start < 5);
	for (unsigned int i = 0; i < t->nops; i++)
		if (!seen[i]) {
			fail(t, "events: operation %llu not announced (start and successful end) in %s",
			     (unsigned long long)t->ops[i], path);
			missing++;
		}
	if (!missing && !t->json)
		printf("events: %u lines from the watcher; all %u operations announced, started and finished\n",
		       lines, t->nops);
	return missing;
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: trainer --socket PATH [--engine-pid PID] [--steps N] [--abort-step N]\n"
		   "               [--bucket-mib N] [--serve N] [--timeout-s S] [--events FILE]\n"
		   "               [--status-cmd CMD] [--rows FILE] [--json]\n");
}

static unsigned long num_arg(const char *name, const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !*s || v > max) {
		fprintf(stderr, "demo: --%s: not a number in 0..%lu: %s\n", name, max, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "engine-pid", required_argument, NULL, 'p' },
		{ "steps", required_argument, NULL, 'n' },
		{ "abort-step", required_argument, NULL, 'a' },
		{ "bucket-mib", required_argument, NULL, 'b' },
		{ "serve", required_argument, NULL, 'r' },
		{ "timeout-s", required_argument, NULL, 't' },
		{ "events", required_argument, NULL, 'e' },
		{ "status-cmd", required_argument, NULL, 'S' },
		{ "rows", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct trainer t = { .timeout_s = 300, .serve = 3, .memfd = -1 };
	const char *sock_path = NULL, *events = NULL, *status_cmd = NULL;
	unsigned long steps = 3, abort_step = ~0UL, bucket_mib = 32;
	struct epoll_event eev = { .events = EPOLLIN };
	struct demo_rep rep, hello;
	int devfd, ret, c;
	uint64_t end_rss;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	t.tty = isatty(2);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock_path = optarg; break;
		case 'p': t.engine_pid = num_arg("engine-pid", optarg, 1UL << 22); break;
		case 'n': steps = num_arg("steps", optarg, 20); break;
		case 'a': abort_step = num_arg("abort-step", optarg, 20); break;
		case 'b': bucket_mib = num_arg("bucket-mib", optarg, 4096); break;
		case 'r': t.serve = num_arg("serve", optarg, 1000); break;
		case 't': t.timeout_s = num_arg("timeout-s", optarg, 86400); break;
		case 'e': events = optarg; break;
		case 'S': status_cmd = optarg; break;
		case 'R':
			t.rows = fopen(optarg, "we");
			if (!t.rows) {
				fprintf(stderr, "demo: --rows %s: %s\n", optarg,
					strerror(errno));
				return 2;
			}
			break;
		case 'j': t.json = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!sock_path || optind != argc || !steps || !bucket_mib || !t.timeout_s) {
		usage(stderr);
		return 2;
	}
	if (abort_step == ~0UL)
		abort_step = steps >= 2 ? steps : 0;	/* the last step aborts */
	t.bucket = bucket_mib * DEMO_MiB;

	/* The engine: who it is, and the weights channel. */
	if (connect_engine(&t, sock_path))
		return 1;
	ret = rpc(&t, DEMO_HELLO, 0, 0, -1, &hello, NULL, 0);
	if (ret) {
		fprintf(stderr, "demo: hello to the engine: %s\n", strerror(-ret));
		return 1;
	}
	t.engine_pid = hello.v[DEMO_V_PID];
	t.domain = hello.v[DEMO_V_DOMAIN];
	t.wbytes = hello.v[DEMO_V_WEIGHTS_BYTES];
	t.kvbytes = hello.v[DEMO_V_KV_BYTES];
	if (t.bucket > t.wbytes)
		t.bucket = t.wbytes;
	t.memfd = memfd_create("gpusleep-demo-weights", MFD_CLOEXEC);
	if (t.memfd < 0 || ftruncate(t.memfd, t.bucket)) {
		fprintf(stderr, "demo: weights memfd of %zu bytes: %s\n", t.bucket,
			strerror(errno));
		return 1;
	}
	ret = rpc(&t, DEMO_MEMFD, t.bucket, 0, t.memfd, &rep, NULL, 0);
	if (ret) {
		fprintf(stderr, "demo: passing the weights memfd: %s (%s)\n",
			strerror(-ret), rep.msg);
		return 1;
	}

	/* The controller, and its eventfd under epoll. */
	devfd = gs_open(NULL, GPUSLEEP_FEAT_EVENTFD, NULL);
	if (devfd < 0) {
		fprintf(stderr, "demo: open %s: %s\n", GS_DEVICE_PATH, strerror(-devfd));
		return 1;
	}
	t.cfd = gs_attach(devfd, t.domain, GPUSLEEP_ROLE_CONTROLLER);
	close(devfd);
	if (t.cfd < 0) {
		fprintf(stderr, "demo: attach to domain %u as controller: %s\n",
			t.domain, strerror(-t.cfd));
		return 1;
	}
	t.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t.ep = epoll_create1(EPOLL_CLOEXEC);
	if (t.efd < 0 || t.ep < 0 || epoll_ctl(t.ep, EPOLL_CTL_ADD, t.efd, &eev)) {
		perror("demo: eventfd/epoll");
		return 1;
	}
	ret = gs_eventfd(t.cfd, t.efd, GPUSLEEP_EFD_ALL);
	if (ret) {
		fprintf(stderr, "demo: register the eventfd: %s\n", strerror(-ret));
		return 1;
	}

	if (!t.json) {
		char ab[64] = "";

		if (abort_step)
			snprintf(ab, sizeof(ab), "; step %lu aborts in-flight requests",
				 abort_step);
		printf("%lu step(s), each: release all -> train -> resume weights -> push weights -> resume kv_cache -> serve\n"
		       "(release drains by waiting for in-flight requests%s)\n\n",
		       steps, ab);
		printf("step  phase             duration    engine RSS   trainer RSS  notes\n");
		printf("----  ---------------- --------- ------------- -------------  -----\n");
	}
	row(&t, 0, "start", -1, 0, 0,
	    "domain %u, pid %d: weights %.0f MiB (BACKUP) v0, kv_cache %.0f MiB (DISCARD)",
	    t.domain, (int)t.engine_pid, mib(t.wbytes), mib(t.kvbytes));

	for (unsigned int s = 1; s <= steps && !t.failures; s++) {
		struct gpusleep_result res;
		uint64_t e_before, e_after, backup_before, backup_new, freed;
		uint64_t expect, peak, completed, aborted_before;
		bool abort = s == abort_step;
		char extra[64];
		double start, drain_s;
		unsigned int nb;

		/* Release while requests are in flight. */
		start = now_s();
		do {
			if (stats(&t, &rep))
				goto out;
			if (!rep.v[DEMO_V_INFLIGHT])
				usleep(20000);
		} while (!rep.v[DEMO_V_INFLIGHT] && now_s() - start < t.timeout_s);
		backup_before = rep.v[DEMO_V_BACKUP_BYTES];
		aborted_before = rep.v[DEMO_V_ABORTED];
		e_before = demo_rss(t.engine_pid);
		start = now_s();
		if (run_op(&t, true, 0, abort ? GPUSLEEP_OPF_ABORT_INFLIGHT : 0,
			   "release", &res, &drain_s))
			break;
		e_after = demo_rss(t.engine_pid);
		if (stats(&t, &rep))
			break;
		freed = res.bytes[0] + res.bytes[1];
		/* The backup staging is host memory the engine keeps; the
		 * first release allocates it, so RSS falls by that much less. */
		backup_new = rep.v[DEMO_V_BACKUP_BYTES] - backup_before;
		expect = freed - backup_new;
		snprintf(extra, sizeof(extra), " (+%.0f MiB new host backup)",
			 mib(backup_new));
		row(&t, s, "release all", now_s() - start, 0, 0,
		    "op %llu: drain %s %.2f s (%llu request(s) %s); %.0f MiB unmapped; engine -%.0f MiB%s",
		    (unsigned long long)res.op_id, abort ? "abort" : "wait", drain_s,
		    (unsigned long long)(abort ? rep.v[DEMO_V_ABORTED] - aborted_before :
					 rep.v[DEMO_V_DRAIN_WAITED]),
		    abort ? "aborted" : "finished", mib(freed),
		    e_before > e_after ? mib(e_before - e_after) : 0.0,
		    backup_new ? extra : "");
		if (res.bytes[0] < t.wbytes || res.bytes[1] < t.kvbytes)
			fail(&t, "release unmapped %.1f MiB of weights and %.1f MiB of KV, want %.0f and %.0f",
			     mib(res.bytes[0]), mib(res.bytes[1]), mib(t.wbytes),
			     mib(t.kvbytes));
		if (e_before < e_after || e_before - e_after < expect * 9 / 10)
			fail(&t, "memory not returned: engine RSS fell by %.1f MiB, want >= 90%% of %.1f MiB (%.1f released - %.1f new backup)",
			     e_before > e_after ? mib(e_before - e_after) : -mib(e_after - e_before),
			     mib(expect), mib(freed),
			     mib(rep.v[DEMO_V_BACKUP_BYTES] - backup_before));
		if (!rep.v[DEMO_V_PAUSED] || rep.v[DEMO_V_INFLIGHT])
			fail(&t, "engine still scheduling after the release (%llu in flight)",
			     (unsigned long long)rep.v[DEMO_V_INFLIGHT]);
		if (t.failures)
			break;

		/* Train in what was given back. */
		start = now_s();
		if (train(&t, s, freed, &peak))
			break;
		row(&t, s, "train", now_s() - start, 0, peak,
		    "touched %.0f MiB (trainer RSS at its peak); freed: back to %.1f MiB",
		    mib(freed), mib(demo_rss(0)));
		if (t.failures)
			break;

		/* Weights back: the backup must hold the previous version. */
		start = now_s();
		if (run_op(&t, false, GPUSLEEP_TAG_WEIGHTS, 0, "resume weights",
			   &res, NULL))
			break;
		ret = rpc(&t, DEMO_VERIFY, s - 1, 0, -1, &rep, "resume weights", start);
		if (ret) {
			fail(&t, "wrong weights after resume: %s",
			     rep.msg[0] ? rep.msg : strerror(-ret));
			break;
		}
		row(&t, s, "resume weights", now_s() - start, 0, 0,
		    "op %llu: %.0f MiB mapped, backup restored, v%u verified",
		    (unsigned long long)res.op_id, mib(res.bytes[0]), s - 1);

		start = now_s();
		if (push_weights(&t, s, &nb))
			break;
		row(&t, s, "push weights", now_s() - start, 0, 0,
		    "v%u in %u bucket(s) of %.0f MiB through a memfd, verified by the engine",
		    s, nb, mib(t.bucket));

		/* KV back: the engine checks zeros and re-initialises it. */
		start = now_s();
		if (run_op(&t, false, GPUSLEEP_TAG_KV_CACHE, 0, "resume kv_cache",
			   &res, NULL))
			break;
		if (stats(&t, &rep))
			break;
		row(&t, s, "resume kv_cache", now_s() - start, 0, 0,
		    "op %llu: %.0f MiB mapped, read back as zeros, re-initialised; scheduling %s",
		    (unsigned long long)res.op_id, mib(res.bytes[1]),
		    rep.v[DEMO_V_PAUSED] ? "STILL PAUSED" : "resumed");
		if (rep.v[DEMO_V_PAUSED])
			fail(&t, "scheduling not resumed after everything came back");

		/* Serve again. */
		start = now_s();
		completed = rep.v[DEMO_V_COMPLETED];
		while (rep.v[DEMO_V_COMPLETED] < completed + t.serve) {
			if (now_s() - start > t.timeout_s) {
				fail(&t, "engine finished %llu request(s) in %u s after waking, want %u",
				     (unsigned long long)(rep.v[DEMO_V_COMPLETED] - completed),
				     t.timeout_s, t.serve);
				break;
			}
			usleep(50000);
			progress(&t, "serve", start, "(%llu done)",
				 (unsigned long long)(rep.v[DEMO_V_COMPLETED] - completed));
			if (stats(&t, &rep))
				goto out;
		}
		if (rep.v[DEMO_V_ERRORS])
			fail(&t, "the engine saw an error: %s", rep.msg);
		row(&t, s, "serve", now_s() - start, 0, 0,
		    "%llu request(s) completed on v%llu (%llu total, %llu prefix hits)",
		    (unsigned long long)(rep.v[DEMO_V_COMPLETED] - completed),
		    (unsigned long long)rep.v[DEMO_V_VERSION],
		    (unsigned long long)rep.v[DEMO_V_COMPLETED],
		    (unsigned long long)rep.v[DEMO_V_PREFIX_HITS]);
	}
out:
	/* What node tooling sees, while the domain still exists. */
	if (status_cmd) {
		char cmd[512];

		snprintf(cmd, sizeof(cmd), "%s %u%s", status_cmd, t.domain,
			 t.json ? " --json" : "");
		if (!t.json)
			printf("\n$ %s\n", cmd);
		fflush(stdout);
		ret = system(cmd);
		if (ret)
			fprintf(stderr, "demo: '%s' exited with status %d\n", cmd, ret);
		if (!t.json)
			printf("\n");
	}
	/* The engine's verdict and every callback it should have run. */
	end_rss = demo_rss(t.engine_pid);
	ret = rpc(&t, DEMO_QUIT, 0, 0, -1, &rep, NULL, 0);
	if (ret == -EPIPE) {
		fail(&t, "no final report from the engine");
	} else {
		uint64_t n = steps, *v = rep.v;

		if (ret)
			fail(&t, "the engine reports: %s",
			     rep.msg[0] ? rep.msg : strerror(-ret));
		if (!t.failures &&
		    (v[DEMO_V_DRAINS] != n || v[DEMO_V_RESETS] != n ||
		     v[DEMO_V_REPAIRS] != n || v[DEMO_V_RESUMES] != n ||
		     v[DEMO_V_CANCELS] || v[DEMO_V_AGENT_PAUSES] != 2 * n ||
		     v[DEMO_V_AGENT_RESUMES] != 2 * n || v[DEMO_V_AGENT_FAILURES]))
			fail(&t, "engine events: drain %llu, reset %llu, repair %llu, resume %llu, cancelled %llu, agent pause %llu resume %llu failed %llu; want %llu, %llu, %llu, %llu, 0, %llu, %llu, 0",
			     (unsigned long long)v[DEMO_V_DRAINS],
			     (unsigned long long)v[DEMO_V_RESETS],
			     (unsigned long long)v[DEMO_V_REPAIRS],
			     (unsigned long long)v[DEMO_V_RESUMES],
			     (unsigned long long)v[DEMO_V_CANCELS],
			     (unsigned long long)v[DEMO_V_AGENT_PAUSES],
			     (unsigned long long)v[DEMO_V_AGENT_RESUMES],
			     (unsigned long long)v[DEMO_V_AGENT_FAILURES],
			     (unsigned long long)n, (unsigned long long)n,
			     (unsigned long long)n, (unsigned long long)n,
			     (unsigned long long)(2 * n), (unsigned long long)(2 * n));
		row(&t, 0, "end", now_s(), end_rss, 0,
		    "whole run; %llu requests served (%llu aborted), %llu callbacks, %llu agent steps, %llu error(s)",
		    (unsigned long long)v[DEMO_V_COMPLETED],
		    (unsigned long long)v[DEMO_V_ABORTED],
		    (unsigned long long)(v[DEMO_V_DRAINS] + v[DEMO_V_RESETS] +
					 v[DEMO_V_REPAIRS] + v[DEMO_V_RESUMES]),
		    (unsigned long long)(v[DEMO_V_AGENT_PAUSES] + v[DEMO_V_AGENT_RESUMES]),
		    (unsigned long long)v[DEMO_V_ERRORS]);
	}
	if (events)
		check_events(&t, events);
	if (t.json)
		printf("{\"result\":\"%s\",\"failures\":%d,\"steps\":%lu,\"operations\":%u}\n",
		       t.failures ? "fail" : "ok", t.failures, steps, t.nops);
	else
		printf("result: %s (%d failure(s))\n", t.failures ? "FAIL" : "ok",
		       t.failures);
	close(t.cfd);
	close(t.sock);
	return t.failures ? 1 : 0;
}
