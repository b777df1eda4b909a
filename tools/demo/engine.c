// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep demo engine: a toy LLM inference engine that can sleep.
 *
 * One process, three threads:
 *   main       the engine's event loop: gs_engine callbacks (drain, reset
 *              caches, KV repair, resume scheduling) and the trainer's
 *              control socket (stats, weight push, checks)
 *   scheduler  serves synthetic generation requests, a few at a time: each
 *              token "computes" over a slice of the weights (checking it
 *              holds the version being served) and writes a page of its KV
 *              block; a prompt whose prefix is cached reads the cached
 *              block instead (checking it is not stale)
 *   agent      gs_agent's io_uring thread: pauses/resumes the tags in a
 *              gs_mm on the host backend, weights BACKUP, kv_cache DISCARD
 *
 * Usage: engine --socket PATH [--weights-mib N] [--kv-mib N]
 *               [--max-inflight N] [--name NAME] [--priority P]
 *               [--fault WHAT]
 * --priority P: the tenant's priority (docs/arbiter.md): a reclaim takes
 * from lower priorities first.
 * --fault stale-prefix: reset_caches keeps the prefix-cache table;
 * --fault bad-push: one bit of every pushed version is flipped. Both exist
 * to see the demo's checks fail (docs/demo.md).
 * Exits 0 after DEMO_QUIT when nothing went wrong, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "libgpusleep.h"
#include "demo.h"

#define KV_BLOCK	(64 * 1024)	/* one request's KV: 16 pages */
#define KV_PAGE		4096		/* one token writes one page */
#define KV_MAGIC	0x4b56424c4f434bULL	/* "KVBLOCK" */
#define PREFIX_SLOTS	16		/* distinct prompts */
#define MAX_INFLIGHT	16
#define SLICE		(64 * 1024)	/* weights read per token */
#define TICK_US		20000		/* "GPU time" of one batch step */

struct req {
	uint64_t id;
	uint32_t prompt;
	uint32_t tokens, done;
	uint32_t block;
};

struct engine {
	/* memory, through the memory manager */
	struct gs_mm *mm;
	struct gs_agent *agent;
	struct gs_engine *ge;
	uint64_t *w;
	size_t wbytes;
	unsigned char *kv;
	size_t kvbytes;
	uint32_t nblocks;

	/* scheduler state, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool paused, abort_req, drain_pending, quit;
	uint64_t version;
	struct req reqs[MAX_INFLIGHT];
	unsigned int inflight, max_inflight;
	uint64_t next_id, completed, aborted, prefix_hits, drain_waited;
	int32_t prefix[PREFIX_SLOTS];	/* cached prefix block, -1 if none */
	unsigned char *block_used;
	uint32_t cursor;
	uint64_t errors;
	char first_error[160];

	/* callbacks, counted by the main thread */
	uint64_t drains, resets, repairs, resumes, cancels;

	/* --fault: break one thing on purpose, to see the checks fire */
	bool fault_stale_prefix, fault_bad_push;

	int drained_efd;	/* scheduler -> main: in-flight work is done */
	int push_fd;		/* the trainer's memfd */
	size_t push_size;
};

static struct timespec t0;

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
}

static void logf_(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%8.3f] engine: ", now_s());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Record a correctness failure (lock held). */
static void fail_locked(struct engine *en, const char *fmt, ...)
{
	va_list ap;

	if (!en->errors) {
		va_start(ap, fmt);
		vsnprintf(en->first_error, sizeof(en->first_error), fmt, ap);
		va_end(ap);
		logf_("ERROR: %s", en->first_error);
	}
	en->errors++;
}

/* ------------------------------------------------------------------ */
/* KV blocks and the prefix cache (lock held)                          */

static int block_get(struct engine *en)
{
	for (uint32_t n = 0; n < en->nblocks; n++) {
		uint32_t b = (en->cursor + n) % en->nblocks;

		if (!en->block_used[b]) {
			en->block_used[b] = 1;
			en->cursor = b + 1;
			return (int)b;
		}
	}
	return -1;
}

static uint64_t *block_hdr(struct engine *en, uint32_t b)
{
	return (uint64_t *)(en->kv + (size_t)b * KV_BLOCK);
}

static void prefix_clear(struct engine *en)
{
	for (int p = 0; p < PREFIX_SLOTS; p++) {
		if (en->prefix[p] >= 0)
			en->block_used[en->prefix[p]] = 0;
		en->prefix[p] = -1;
	}
}

/* ------------------------------------------------------------------ */
/* The scheduler thread                                                */

static void admit(struct engine *en)
{
	while (!en->paused && en->inflight < en->max_inflight) {
		struct req *r = &en->reqs[en->inflight];
		uint64_t id = en->next_id++;
		uint32_t p = demo_word(~0ULL, id) % PREFIX_SLOTS;
		int b;

		if (en->prefix[p] >= 0) {
			uint64_t *h = block_hdr(en, en->prefix[p]);

			/* A hit must find the prefix it cached. */
			if (h[0] != KV_MAGIC || h[1] != p)
				fail_locked(en, "stale prefix-cache hit: prompt %u's cached KV block %d no longer holds its prefix (the cache was not reset when the KV cache was discarded)",
					    p, en->prefix[p]);
			en->prefix_hits++;
		} else {
			b = block_get(en);
			if (b >= 0) {
				uint64_t *h = block_hdr(en, b);

				h[0] = KV_MAGIC;
				h[1] = p;
				en->prefix[p] = b;
			}
		}
		b = block_get(en);
		if (b < 0)
			return;		/* KV full: wait for completions */
		r->id = id;
		r->prompt = p;
		r->tokens = 4 + demo_word(id, 1) % 12;
		r->done = 0;
		r->block = b;
		en->inflight++;
	}
}

/* One token of r: read a slice of the weights, write a page of KV. */
static void step(struct engine *en, struct req *r, uint64_t version)
{
	size_t nw = en->wbytes / 8, sw = SLICE / 8;
	size_t off = (demo_word(r->id, r->done + 2) % (nw / sw)) * sw;
	uint64_t acc = 0, *kv;

	for (size_t i = 0; i < sw; i++)
		acc += en->w[off + i];
	/* The weights must be the version being served. */
	for (size_t i = 0; i < sw; i += sw / 8)
		if (en->w[off + i] != demo_word(version, off + i)) {
			pthread_mutex_lock(&en->lock);
			fail_locked(en, "request %llu read wrong weights at word %zu (serving version %llu)",
				    (unsigned long long)r->id, off + i,
				    (unsigned long long)version);
			pthread_mutex_unlock(&en->lock);
			break;
		}
	kv = (uint64_t *)(en->kv + (size_t)r->block * KV_BLOCK +
			  (size_t)(r->done % (KV_BLOCK / KV_PAGE)) * KV_PAGE);
	for (size_t i = 0; i < KV_PAGE / 8; i++)
		kv[i] = acc ^ (r->id << 8) ^ i ^ 1;
	r->done++;
}

static void *scheduler(void *arg)
{
	struct engine *en = arg;

	pthread_mutex_lock(&en->lock);
	for (;;) {
		uint64_t version;

		if (en->paused && en->abort_req && en->inflight) {
			for (unsigned int i = 0; i < en->inflight; i++)
				en->block_used[en->reqs[i].block] = 0;
			en->aborted += en->inflight;
			en->inflight = 0;
		}
		if (en->drain_pending && !en->inflight) {
			uint64_t one = 1;

			en->drain_pending = false;
			if (write(en->drained_efd, &one, 8) != 8)
				logf_("write drained eventfd: %s", strerror(errno));
		}
		if (en->quit)
			break;
		admit(en);
		if (!en->inflight) {
			pthread_cond_wait(&en->cond, &en->lock);
			continue;
		}
		version = en->version;
		pthread_mutex_unlock(&en->lock);

		/* The batch runs without the lock: a drain lets it finish. */
		for (unsigned int i = 0; i < en->inflight; i++)
			step(en, &en->reqs[i], version);
		usleep(TICK_US);

		pthread_mutex_lock(&en->lock);
		for (unsigned int i = 0; i < en->inflight;) {
			struct req *r = &en->reqs[i];

			if (r->done < r->tokens) {
				i++;
				continue;
			}
			en->block_used[r->block] = 0;
			en->completed++;
			if (en->drain_pending)
				en->drain_waited++;
			*r = en->reqs[--en->inflight];
		}
	}
	pthread_mutex_unlock(&en->lock);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* gs_engine callbacks (main thread)                                   */

static int cb_drain(struct gs_engine *e, void *arg, uint32_t tags,
		    bool abort_inflight)
{
	struct engine *en = arg;
	unsigned int n;
	char t[64];

	(void)e;
	gs_tags_format(tags, t, sizeof(t));
	pthread_mutex_lock(&en->lock);
	en->drains++;
	en->paused = true;
	en->abort_req = abort_inflight;
	en->drain_waited = 0;
	n = en->inflight;
	if (n)
		en->drain_pending = true;
	pthread_mutex_unlock(&en->lock);
	logf_("drain for release of %s: scheduling paused, %u request(s) in flight, %s",
	      t, n, abort_inflight ? "aborting them" : "letting them finish");
	return n ? GS_PENDING : 0;
}

static void cb_drain_cancelled(struct gs_engine *e, void *arg)
{
	struct engine *en = arg;

	(void)e;
	/*
	 * Stop draining, but do not schedule: only resume_sched says go
	 * (another tag may still be released).
	 */
	pthread_mutex_lock(&en->lock);
	en->cancels++;
	en->abort_req = false;
	en->drain_pending = false;
	pthread_cond_broadcast(&en->cond);
	pthread_mutex_unlock(&en->lock);
	logf_("drain cancelled: stop draining, scheduling stays paused");
}

static int cb_reset_caches(struct gs_engine *e, void *arg)
{
	struct engine *en = arg;

	(void)e;
	pthread_mutex_lock(&en->lock);
	en->resets++;
	if (!en->fault_stale_prefix)
		prefix_clear(en);
	pthread_mutex_unlock(&en->lock);
	logf_(en->fault_stale_prefix ?
	      "reset caches: NOT clearing the prefix-cache table (--fault stale-prefix)" :
	      "reset caches: prefix-cache table cleared");
	return 0;
}

/* Fresh KV: every page written (resident, as device memory is), every
 * block headed free. The prefix-cache table is not the KV's: clearing it
 * is reset_caches' job, so blocks it still names stay in use (and read as
 * free blocks, which a later hit reports as stale). */
static void kv_init(struct engine *en)
{
	memset(en->kv, 0, en->kvbytes);
	memset(en->block_used, 0, en->nblocks);
	for (uint32_t b = 0; b < en->nblocks; b++) {
		uint64_t *h = block_hdr(en, b);

		h[0] = KV_MAGIC;
		h[1] = ~0ULL;
	}
	for (int p = 0; p < PREFIX_SLOTS; p++)
		if (en->prefix[p] >= 0)
			en->block_used[en->prefix[p]] = 1;
}

static int cb_repair_kv(struct gs_engine *e, void *arg)
{
	struct engine *en = arg;
	const uint64_t *q = (const uint64_t *)en->kv;

	(void)e;
	/* DISCARD: what comes back must be zeros, whatever was there. */
	for (size_t i = 0; i < en->kvbytes / 8; i++)
		if (q[i]) {
			pthread_mutex_lock(&en->lock);
			fail_locked(en, "KV cache not zero after resume: byte %zu holds %#llx",
				    i * 8, (unsigned long long)q[i]);
			pthread_mutex_unlock(&en->lock);
			return -EIO;
		}
	pthread_mutex_lock(&en->lock);
	kv_init(en);
	en->repairs++;
	pthread_mutex_unlock(&en->lock);
	logf_("repair KV: %zu MiB read back as zeros, re-initialised (%u blocks)",
	      en->kvbytes / DEMO_MiB, en->nblocks);
	return 0;
}

static void cb_resume_sched(struct gs_engine *e, void *arg)
{
	struct engine *en = arg;

	(void)e;
	pthread_mutex_lock(&en->lock);
	en->resumes++;
	en->paused = false;
	en->abort_req = false;
	pthread_cond_broadcast(&en->cond);
	pthread_mutex_unlock(&en->lock);
	logf_("resume scheduling (weights version %llu)",
	      (unsigned long long)en->version);
}

/* ------------------------------------------------------------------ */
/* Control socket (main thread)                                        */

/* 0 if every weight word holds version v, else -EILSEQ and why. */
static int check_weights(struct engine *en, uint64_t v, char *why, size_t len)
{
	struct gs_mm_tag_info ti;

	if (!gs_mm_tag_info(en->mm, GPUSLEEP_TAG_WEIGHTS, &ti) && ti.paused) {
		snprintf(why, len, "weights are released");
		return -EAGAIN;
	}
	for (size_t i = 0; i < en->wbytes / 8; i++)
		if (en->w[i] != demo_word(v, i)) {
			snprintf(why, len,
				 "weights word %zu is %#llx, version %llu has %#llx",
				 i, (unsigned long long)en->w[i],
				 (unsigned long long)v,
				 (unsigned long long)demo_word(v, i));
			return -EILSEQ;
		}
	return 0;
}

static void fill_stats(struct engine *en, struct demo_rep *rep)
{
	struct gs_mm_tag_info ti;
	struct gs_agent_stats as;

	memset(&ti, 0, sizeof(ti));
	gs_mm_tag_info(en->mm, GPUSLEEP_TAG_WEIGHTS, &ti);
	gs_agent_get_stats(en->agent, &as);
	pthread_mutex_lock(&en->lock);
	rep->v[DEMO_V_PID] = (uint64_t)getpid();
	rep->v[DEMO_V_DOMAIN] = gs_engine_id(en->ge);
	rep->v[DEMO_V_WEIGHTS_BYTES] = en->wbytes;
	rep->v[DEMO_V_KV_BYTES] = en->kvbytes;
	rep->v[DEMO_V_VERSION] = en->version;
	rep->v[DEMO_V_INFLIGHT] = en->inflight;
	rep->v[DEMO_V_COMPLETED] = en->completed;
	rep->v[DEMO_V_ABORTED] = en->aborted;
	rep->v[DEMO_V_PREFIX_HITS] = en->prefix_hits;
	rep->v[DEMO_V_PAUSED] = en->paused;
	rep->v[DEMO_V_BACKUP_BYTES] = ti.staging_bytes;
	rep->v[DEMO_V_DRAINS] = en->drains;
	rep->v[DEMO_V_RESETS] = en->resets;
	rep->v[DEMO_V_REPAIRS] = en->repairs;
	rep->v[DEMO_V_RESUMES] = en->resumes;
	rep->v[DEMO_V_ERRORS] = en->errors;
	rep->v[DEMO_V_AGENT_PAUSES] = as.pauses;
	rep->v[DEMO_V_AGENT_RESUMES] = as.resumes;
	rep->v[DEMO_V_AGENT_FAILURES] = as.failures + as.complete_errors;
	rep->v[DEMO_V_CANCELS] = en->cancels;
	rep->v[DEMO_V_DRAIN_WAITED] = en->drain_waited;
	if (en->errors)
		snprintf(rep->msg, sizeof(rep->msg), "%s", en->first_error);
	pthread_mutex_unlock(&en->lock);
}

/* Receive one request, and the fd riding with DEMO_MEMFD. 0 at EOF. */
static int recv_req(int s, struct demo_req *rq, int *fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = rq, .iov_len = sizeof(*rq) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	if (n != sizeof(*rq))
		return -EPROTO;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 1;
}

/* Handle one trainer request; returns true after DEMO_QUIT. */
static bool handle(struct engine *en, int s, const struct demo_req *rq,
		   int fd, struct demo_rep *rep)
{
	void *src;
	int ret;

	memset(rep, 0, sizeof(*rep));
	switch (rq->cmd) {
	case DEMO_HELLO:
	case DEMO_STATS:
		fill_stats(en, rep);
		break;
	case DEMO_MEMFD:
		if (fd < 0) {
			rep->status = -EBADF;
			snprintf(rep->msg, sizeof(rep->msg), "no memfd came with DEMO_MEMFD");
			break;
		}
		if (en->push_fd >= 0)
			close(en->push_fd);
		en->push_fd = fd;
		en->push_size = rq->a;
		fd = -1;
		logf_("weights channel: memfd of %llu MiB from the trainer",
		      (unsigned long long)(rq->a / DEMO_MiB));
		break;
	case DEMO_PUSH:
		if (en->push_fd < 0 || rq->b > en->push_size ||
		    rq->a > en->wbytes || rq->b > en->wbytes - rq->a ||
		    rq->a % 8 || rq->b % 8) {
			rep->status = -EINVAL;
			snprintf(rep->msg, sizeof(rep->msg),
				 "bad push: offset %llu length %llu (weights %zu, bucket %zu)",
				 (unsigned long long)rq->a,
				 (unsigned long long)rq->b, en->wbytes,
				 en->push_size);
			break;
		}
		pthread_mutex_lock(&en->lock);
		ret = en->paused;
		pthread_mutex_unlock(&en->lock);
		if (!ret) {
			rep->status = -EBUSY;
			snprintf(rep->msg, sizeof(rep->msg),
				 "push refused: the engine is serving (release first)");
			break;
		}
		src = mmap(NULL, rq->b, PROT_READ, MAP_SHARED, en->push_fd, 0);
		if (src == MAP_FAILED) {
			rep->status = -errno;
			snprintf(rep->msg, sizeof(rep->msg), "mmap of the memfd: %s",
				 strerror(errno));
			break;
		}
		memcpy((char *)en->w + rq->a, src, rq->b);
		munmap(src, rq->b);
		if (en->fault_bad_push && rq->a + rq->b == en->wbytes) {
			en->w[(rq->a + rq->b / 2) / 8] ^= 1;
			logf_("flipped a bit of the pushed weights (--fault bad-push)");
		}
		break;
	case DEMO_VERIFY:
	case DEMO_COMMIT:
		rep->status = check_weights(en, rq->a, rep->msg, sizeof(rep->msg));
		if (!rep->status && rq->cmd == DEMO_COMMIT) {
			pthread_mutex_lock(&en->lock);
			en->version = rq->a;
			pthread_mutex_unlock(&en->lock);
			logf_("weights version %llu pushed and verified",
			      (unsigned long long)rq->a);
		} else if (!rep->status) {
			logf_("weights verified: version %llu",
			      (unsigned long long)rq->a);
		} else {
			pthread_mutex_lock(&en->lock);
			fail_locked(en, "%s", rep->msg);
			pthread_mutex_unlock(&en->lock);
		}
		break;
	case DEMO_QUIT:
		fill_stats(en, rep);
		if (en->errors)
			rep->status = -EILSEQ;
		break;
	default:
		rep->status = -EINVAL;
		snprintf(rep->msg, sizeof(rep->msg), "unknown command %u", rq->cmd);
	}
	if (fd >= 0)
		close(fd);
	if (rq->cmd != DEMO_QUIT &&
	    send(s, rep, sizeof(*rep), MSG_NOSIGNAL) != sizeof(*rep))
		logf_("reply to the trainer: %s", strerror(errno));
	return rq->cmd == DEMO_QUIT;
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: engine --socket PATH [--weights-mib N] [--kv-mib N] [--max-inflight N]\n"
		   "              [--name NAME] [--priority P] [--fault stale-prefix|bad-push]\n");
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "engine: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		perror("engine: socket");
		return -1;
	}
	unlink(path);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, 1)) {
		fprintf(stderr, "engine: listen on %s: %s\n", path, strerror(errno));
		close(s);
		return -1;
	}
	return s;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "weights-mib", required_argument, NULL, 'w' },
		{ "kv-mib", required_argument, NULL, 'k' },
		{ "max-inflight", required_argument, NULL, 'm' },
		{ "name", required_argument, NULL, 'n' },
		{ "priority", required_argument, NULL, 'p' },
		{ "fault", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const struct gs_engine_ops ops = {
		.drain = cb_drain,
		.drain_cancelled = cb_drain_cancelled,
		.reset_caches = cb_reset_caches,
		.repair_kv = cb_repair_kv,
		.resume_sched = cb_resume_sched,
	};
	struct gs_engine_config cfg = {
		.name = "demo-llm",
		.gpu = "host-memory",
		.caps = GPUSLEEP_CAP_PREFIX_CACHING | GPUSLEEP_CAP_PREFIX_CACHE_RESET,
	};
	static struct engine en;
	const char *sock_path = NULL;
	unsigned long wmib = 256, kvmib = 256, maxin = 4;
	long prio = 0;
	bool prio_set = false;
	pthread_t sched;
	int lsock, csock = -1, ret, c, status = 0;
	bool quit = false;
	struct demo_rep rep;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;
		unsigned long v = 0;

		if (c == 'w' || c == 'k' || c == 'm') {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !v || v > 65536) {
				fprintf(stderr, "engine: --%s: not a number in 1..65536: %s\n",
					c == 'w' ? "weights-mib" : c == 'k' ? "kv-mib" : "max-inflight",
					optarg);
				return 2;
			}
		}
		switch (c) {
		case 's': sock_path = optarg; break;
		case 'w': wmib = v; break;
		case 'k': kvmib = v; break;
		case 'm': maxin = v; break;
		case 'n': cfg.name = optarg; break;
		case 'p':
			errno = 0;
			prio = strtol(optarg, &end, 10);
			if (errno || *end || prio < GPUSLEEP_PRIO_MIN ||
			    prio > GPUSLEEP_PRIO_MAX) {
				fprintf(stderr, "engine: --priority: a number in %d..%d: %s\n",
					GPUSLEEP_PRIO_MIN, GPUSLEEP_PRIO_MAX, optarg);
				return 2;
			}
			prio_set = true;
			break;
		case 'f':
			if (!strcmp(optarg, "stale-prefix")) {
				en.fault_stale_prefix = true;
			} else if (!strcmp(optarg, "bad-push")) {
				en.fault_bad_push = true;
			} else {
				fprintf(stderr, "engine: --fault: stale-prefix or bad-push, not %s\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!sock_path || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (maxin > MAX_INFLIGHT) {
		fprintf(stderr, "engine: --max-inflight: at most %d\n", MAX_INFLIGHT);
		return 2;
	}

	en.wbytes = wmib * DEMO_MiB;
	en.kvbytes = kvmib * DEMO_MiB;
	en.nblocks = en.kvbytes / KV_BLOCK;
	en.max_inflight = maxin;
	en.push_fd = -1;
	pthread_mutex_init(&en.lock, NULL);
	pthread_cond_init(&en.cond, NULL);
	en.block_used = calloc(en.nblocks, 1);
	en.drained_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!en.block_used || en.drained_efd < 0) {
		perror("engine: setup");
		return 1;
	}

	/* Memory: weights BACKUP, KV DISCARD, each in one chunk. */
	ret = gs_mm_new(gs_backend_host_new(), &en.mm);
	if (!ret)
		ret = gs_mm_set_policy(en.mm, GPUSLEEP_TAG_WEIGHTS, GS_MM_BACKUP,
				       en.wbytes);
	if (!ret)
		ret = gs_mm_set_policy(en.mm, GPUSLEEP_TAG_KV_CACHE,
				       GS_MM_DISCARD, en.kvbytes);
	/*
	 * The weights' backup is checksummed and checked at each restore: a
	 * host copy that changed while released fails the resume
	 * (VERIFY_FAILED), never a silent success.
	 */
	if (!ret)
		ret = gs_mm_set_verify(en.mm, true);
	if (ret) {
		fprintf(stderr, "engine: memory manager on the host backend: %s\n",
			strerror(-ret));
		return 1;
	}
	en.w = gs_mm_alloc(en.mm, GPUSLEEP_TAG_WEIGHTS, en.wbytes);
	en.kv = gs_mm_alloc(en.mm, GPUSLEEP_TAG_KV_CACHE, en.kvbytes);
	if (!en.w || !en.kv) {
		fprintf(stderr, "engine: allocating %lu MiB of weights and %lu MiB of KV cache: %s\n",
			wmib, kvmib, strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < en.wbytes / 8; i++)
		en.w[i] = demo_word(0, i);
	for (int p = 0; p < PREFIX_SLOTS; p++)
		en.prefix[p] = -1;
	kv_init(&en);

	/* The domain, then the agent serving it. */
	ret = gs_engine_create(&cfg, &ops, &en, &en.ge);
	if (ret) {
		fprintf(stderr, "engine: create domain on %s: %s\n", GS_DEVICE_PATH,
			strerror(-ret));
		return 1;
	}
	if (prio_set) {
		ret = gs_set_tenant(gs_engine_fd(en.ge), (int32_t)prio, 0);
		if (ret) {
			fprintf(stderr, "engine: priority %ld: %s\n", prio,
				strerror(-ret));
			return 1;
		}
	}
	ret = gs_agent_attach(NULL, gs_engine_id(en.ge), en.mm, &en.agent);
	if (!ret) {
		ret = gs_agent_start(en.agent);
		if (ret)
			gs_agent_destroy(en.agent);
	}
	if (ret) {
		fprintf(stderr, "engine: agent for domain %u: %s\n",
			gs_engine_id(en.ge), strerror(-ret));
		return 1;
	}
	ret = pthread_create(&sched, NULL, scheduler, &en);
	if (ret) {
		fprintf(stderr, "engine: scheduler thread: %s\n", strerror(ret));
		return 1;
	}
	lsock = listen_on(sock_path);
	if (lsock < 0)
		return 1;
	logf_("domain %u '%s': weights %lu MiB (BACKUP, version 0), kv_cache %lu MiB (DISCARD, %u blocks), serving up to %lu requests, priority %ld",
	      gs_engine_id(en.ge), cfg.name, wmib, kvmib, en.nblocks, maxin,
	      prio);

	while (!quit) {
		struct pollfd p[4] = {
			{ .fd = gs_engine_fd(en.ge), .events = POLLIN },
			{ .fd = en.drained_efd, .events = POLLIN },
			{ .fd = csock >= 0 ? csock : lsock, .events = POLLIN },
		};

		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("engine: poll");
			status = 1;
			break;
		}
		if (p[0].revents) {
			ret = gs_engine_dispatch(en.ge);
			if (ret < 0) {
				fprintf(stderr, "engine: dispatch of domain events: %s\n",
					strerror(-ret));
				status = 1;
				break;
			}
		}
		if (p[1].revents) {
			uint64_t n;

			if (read(en.drained_efd, &n, 8) == 8 &&
			    gs_engine_pending(en.ge)) {
				pthread_mutex_lock(&en.lock);
				logf_("drained: %llu request(s) finished, %llu aborted so far",
				      (unsigned long long)en.drain_waited,
				      (unsigned long long)en.aborted);
				pthread_mutex_unlock(&en.lock);
				ret = gs_engine_complete(en.ge, 0);
				if (ret && ret != -ESTALE) {
					fprintf(stderr, "engine: answer the drain: %s\n",
						strerror(-ret));
					status = 1;
					break;
				}
			}
		}
		if (p[2].revents && csock < 0) {
			csock = accept4(lsock, NULL, NULL, SOCK_CLOEXEC);
			if (csock < 0)
				perror("engine: accept");
		} else if (p[2].revents) {
			struct demo_req rq;
			int fd;

			ret = recv_req(csock, &rq, &fd);
			if (ret <= 0) {
				fprintf(stderr, "engine: the trainer went away%s%s\n",
					ret ? ": " : "", ret ? strerror(-ret) : "");
				status = 1;
				break;
			}
			quit = handle(&en, csock, &rq, fd, &rep);
		}
	}

	pthread_mutex_lock(&en.lock);
	en.quit = true;
	pthread_cond_broadcast(&en.cond);
	pthread_mutex_unlock(&en.lock);
	pthread_join(sched, NULL);
	ret = gs_agent_stop(en.agent);
	if (ret) {
		fprintf(stderr, "engine: agent thread ended with: %s\n", strerror(-ret));
		status = 1;
	}
	if (quit) {
		/* Final counters, after the threads stopped. */
		fill_stats(&en, &rep);
		if (en.errors)
			rep.status = -EILSEQ;
		if (rep.status)
			status = 1;
		logf_("served %llu requests (%llu aborted, %llu prefix hits), %llu error(s)",
		      (unsigned long long)en.completed,
		      (unsigned long long)en.aborted,
		      (unsigned long long)en.prefix_hits,
		      (unsigned long long)en.errors);
		if (send(csock, &rep, sizeof(rep), MSG_NOSIGNAL) != sizeof(rep))
			logf_("final reply to the trainer: %s", strerror(errno));
	}
	gs_agent_destroy(en.agent);
	gs_engine_destroy(en.ge);
	gs_mm_destroy(en.mm);
	if (csock >= 0)
		close(csock);
	close(lsock);
	unlink(sock_path);
	return status;
}
