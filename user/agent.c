// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * gs_agent: serves a domain's PAUSE_TAG / RESUME_TAG steps with a gs_mm.
 *
 * Either stepped from the caller's loop (gs_agent_fd + gs_agent_dispatch)
 * or run on its own thread: an io_uring with one multishot poll on the agent
 * fd and one on a stop eventfd. A multishot poll stays armed while its CQEs
 * carry IORING_CQE_F_MORE; one without it (overflow, cancel) means the poll
 * ended and is armed again. cqe->res is the poll mask, or -errno.
 *
 * Built where liburing is missing (GS_HAVE_URING 0: a GPU machine with
 * only the toolkit, for the GPU check), the thread poll()s the same fds
 * instead; everything else is the same.
 *
 * Reports (GPUSLEEP_IOC_REPORT, docs/arbiter.md): what the agent knows of
 * its tags (sizes, policy, content after resume, verification) and of
 * its process (what it holds outside the tags, by class). Sent when the
 * thread starts (or at the first dispatch), after each step it answers,
 * and, from the thread, when the memory manager's sizes change (its kick
 * eventfd) or the process's figures do (gs_agent_set_outside): at most
 * one every GS_AGENT_REPORT_MS, the next one on a timerfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef GS_HAVE_URING
#define GS_HAVE_URING 1
#endif
#if GS_HAVE_URING
#include <liburing.h>
#endif

#include "libgpusleep.h"
#include "internal.h"

enum { UD_AGENT = 1, UD_STOP = 2, UD_KICK = 3, UD_TIMER = 4 };

/* A report at most this often from the thread (after a step: at once). */
#define GS_AGENT_REPORT_MS	100

struct gs_agent {
	int fd;
	struct gs_mm *mm;
	pthread_mutex_t lock;		/* stats, last, cb */
	struct gs_agent_stats stats;
	struct gs_agent_result last[GPUSLEEP_MAX_TAGS];
	gs_agent_result_fn cb;
	void *cb_arg;
	/* the thread */
	bool running;
	pthread_t thread;
	int stop_efd;
#if GS_HAVE_URING
	struct io_uring ring;
#endif
	int thread_ret;
	/* The thread's start: its polls armed (or why not), under lock. */
	pthread_cond_t started_cv;
	bool started;
	int start_ret;
	/* reports (under lock but for the fds, the thread's) */
	int kick_efd;		/* the mm's kick, and gs_agent_set_outside's */
	int timer_fd;		/* the next report, when too soon */
	bool timer_armed;
	uint64_t last_report_ns;
	bool reported;		/* one was sent (or tried) */
	bool report_off;	/* the module has no REPORT (-ENOTTY) */
	bool report_said;	/* a failure said once on stderr */
	uint32_t nr_tags;	/* the domain's declaration, 0: not asked */
	uint64_t torch_reserved, graph_pool;	/* gs_agent_set_outside */
	bool outside_dirty;	/* changed since the last report */
	uint64_t report_gen;	/* the mm's generation it described */
	struct gs_agent_report_stats rstats;
	/* what the module holds: the last report it took (valid: any) */
	struct gpusleep_report last_sent;
	bool last_sent_valid;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int gs_agent_from_fd(int fd, struct gs_mm *mm, struct gs_agent **out)
{
	struct gs_agent *a;
	int fl;

	if (fd < 0)
		return -EBADF;
	if (!mm)
		return -EINVAL;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = fd;
	a->mm = mm;
	a->stop_efd = -1;
	a->kick_efd = -1;
	a->timer_fd = -1;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->started_cv, NULL);
	*out = a;
	return 0;
}

int gs_agent_attach(const char *dev_path, uint32_t id, struct gs_mm *mm,
		    struct gs_agent **out)
{
	int devfd, fd, ret;

	if (!mm)
		return -EINVAL;
	devfd = gs_open(dev_path, 0, NULL);
	if (devfd < 0)
		return devfd;
	fd = gs_attach(devfd, id, GPUSLEEP_ROLE_AGENT);
	close(devfd);
	if (fd < 0)
		return fd;
	ret = gs_agent_from_fd(fd, mm, out);
	if (ret)
		close(fd);
	return ret;
}

void gs_agent_destroy(struct gs_agent *a)
{
	if (!a)
		return;
	if (a->running)
		gs_agent_stop(a);
	close(a->fd);
	pthread_cond_destroy(&a->started_cv);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

int gs_agent_fd(const struct gs_agent *a)
{
	return a->fd;
}

void gs_agent_get_stats(struct gs_agent *a, struct gs_agent_stats *st)
{
	pthread_mutex_lock(&a->lock);
	*st = a->stats;
	pthread_mutex_unlock(&a->lock);
}

void gs_agent_set_result_cb(struct gs_agent *a, gs_agent_result_fn fn,
			    void *arg)
{
	pthread_mutex_lock(&a->lock);
	a->cb = fn;
	a->cb_arg = arg;
	pthread_mutex_unlock(&a->lock);
}

int gs_agent_last_result(struct gs_agent *a, uint32_t tag,
			 struct gs_agent_result *r)
{
	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++)
		if (tag == (1U << i)) {
			pthread_mutex_lock(&a->lock);
			*r = a->last[i];
			pthread_mutex_unlock(&a->lock);
			return r->op_id ? 0 : -ENOENT;
		}
	return -EINVAL;
}

/* The domain's number of tags: GET_TAGS once; else the default's. */
static uint32_t agent_nr_tags(struct gs_agent *a)
{
	struct gpusleep_tags t;

	if (!a->nr_tags) {
		if (!gs_get_tags(a->fd, &t) && t.nr_tags &&
		    t.nr_tags <= GPUSLEEP_MAX_TAGS)
			a->nr_tags = t.nr_tags;
		else
			a->nr_tags = GPUSLEEP_NR_TAGS;	/* not a module's fd */
	}
	return a->nr_tags;
}

int gs_agent_fill_report(struct gs_agent *a, struct gpusleep_report *r)
{
	uint64_t held = 0;
	uint32_t nr;
	int ret, src;

	memset(r, 0, sizeof(*r));
	ret = gs_mm_gpu_uuid(a->mm, r->gpu_uuid);
	if (ret)
		return ret;
	pthread_mutex_lock(&a->lock);
	nr = agent_nr_tags(a);
	r->torch_reserved_bytes = a->torch_reserved;
	r->graph_pool_bytes = a->graph_pool;
	a->outside_dirty = false;
	pthread_mutex_unlock(&a->lock);
	a->report_gen = gs_mm_generation(a->mm);
	r->nr_tags = nr;
	for (uint32_t i = 0; i < nr; i++) {
		struct gpusleep_report_tag *rt = &r->tags[i];
		struct gs_mm_tag_info info;

		ret = gs_mm_tag_info(a->mm, 1U << i, &info);
		if (ret)
			return ret;
		rt->size_bytes = info.chunk_bytes;
		rt->mapped_bytes = info.mapped_bytes;
		rt->host_bytes = info.staging_bytes;
		rt->policy = info.policy == GS_MM_BACKUP ?
			     GPUSLEEP_POLICY_BACKUP : GPUSLEEP_POLICY_DISCARD;
		rt->content = info.content;
		rt->flags = info.verified ? GPUSLEEP_RTF_VERIFIED : 0;
	}
	/* the whole process, NVML's figure (or the device's: an upper bound) */
	src = gs_mm_resident(a->mm, &held);
	if (src == GPUSLEEP_RESIDENT_PROCESS || src == GPUSLEEP_RESIDENT_DEVICE) {
		r->process_bytes = held;
		r->process_source = (uint32_t)src;
	}
	return 0;
}

/*
 * Send a report now; the failure is counted (and said once). Unless
 * forced, a report the same as the last the module took is not sent
 * again (a step that changed nothing: the module's copy is already true).
 */
static int send_report(struct gs_agent *a, bool force)
{
	struct gpusleep_report r;
	int ret;

	pthread_mutex_lock(&a->lock);
	if (a->report_off) {
		pthread_mutex_unlock(&a->lock);
		return 0;
	}
	pthread_mutex_unlock(&a->lock);
	ret = gs_agent_fill_report(a, &r);
	if (!ret && !force) {
		bool same;

		pthread_mutex_lock(&a->lock);
		same = a->last_sent_valid &&
		       !memcmp(&a->last_sent, &r, sizeof(r));
		pthread_mutex_unlock(&a->lock);
		if (same)
			return 0;
	}
	if (!ret)
		ret = gs_report(a->fd, &r);
	pthread_mutex_lock(&a->lock);
	a->reported = true;
	a->last_report_ns = mono_ns();
	a->last_sent_valid = !ret;
	if (ret) {
		a->rstats.failed++;
		a->rstats.last_error = ret;
		if (ret == -ENOTTY)
			a->report_off = true;	/* a module without tenants */
	} else {
		a->rstats.sent++;
		a->last_sent = r;
	}
	if (ret && !a->report_said) {
		a->report_said = true;
		fprintf(stderr, "gpusleep agent: report to the module failed (%s)%s\n",
			strerror(-ret), ret == -ENOTTY ?
			": the module takes no reports (older than GPUSLEEP_FEAT_TENANTS); the arbiter does not see this process's tags" :
			ret == -EOPNOTSUPP ? ": the memory manager's backend names no GPU" : "");
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

int gs_agent_report(struct gs_agent *a)
{
	return send_report(a, true);
}

void gs_agent_get_report_stats(struct gs_agent *a,
			       struct gs_agent_report_stats *st)
{
	pthread_mutex_lock(&a->lock);
	*st = a->rstats;
	pthread_mutex_unlock(&a->lock);
}

/* Wake the thread for a report (rate-limited there). */
static void kick(struct gs_agent *a)
{
	uint64_t one = 1;

	if (a->kick_efd >= 0 &&
	    write(a->kick_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fprintf(stderr, "gpusleep agent: kick: %s\n", strerror(errno));
}

void gs_agent_set_outside(struct gs_agent *a, uint64_t torch_reserved,
			  uint64_t graph_pool)
{
	pthread_mutex_lock(&a->lock);
	if (a->torch_reserved != torch_reserved || a->graph_pool != graph_pool)
		a->outside_dirty = true;
	a->torch_reserved = torch_reserved;
	a->graph_pool = graph_pool;
	if (a->outside_dirty)
		kick(a);
	pthread_mutex_unlock(&a->lock);
}

/*
 * The thread, kicked or at its timer: a report if something changed,
 * at most one per GS_AGENT_REPORT_MS (else the timer is set for it).
 */
static void report_due(struct gs_agent *a)
{
	uint64_t now = mono_ns(), next;
	bool dirty;

	pthread_mutex_lock(&a->lock);
	dirty = a->outside_dirty || !a->reported;
	next = a->last_report_ns + GS_AGENT_REPORT_MS * 1000000ull;
	pthread_mutex_unlock(&a->lock);
	if (!dirty && gs_mm_generation(a->mm) == a->report_gen)
		return;
	if (a->reported && now < next) {
		struct itimerspec its;

		if (a->timer_armed)
			return;		/* it comes */
		memset(&its, 0, sizeof(its));
		its.it_value.tv_sec = (time_t)(next / 1000000000ull);
		its.it_value.tv_nsec = (long)(next % 1000000000ull);
		if (!timerfd_settime(a->timer_fd, TFD_TIMER_ABSTIME, &its, NULL)) {
			a->timer_armed = true;
			pthread_mutex_lock(&a->lock);
			a->rstats.coalesced++;
			pthread_mutex_unlock(&a->lock);
			return;
		}
	}
	send_report(a, false);
}

/* A readable kick eventfd or timerfd, emptied. */
static void drain_fd(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) == sizeof(v))
		;
}

/*
 * The bytes a step is answered with. Success: what the step unmapped /
 * mapped; a tag already in the asked state is what was asked (a late
 * answer after a timeout, a resume of a tag whose unmap never happened,
 * an empty tag): success with the tag's bytes. A failed pause that left
 * part of the tag unmapped answers its error with the bytes still
 * unmapped, never 0: the tag is then partly released, and the kernel must
 * count it released (unconfirmed) so that a resume maps it back.
 */
static uint64_t answer_bytes(const struct gs_mm_result *r, bool pause)
{
	if (!r->status)
		return r->bytes;
	return pause ? r->unmapped_bytes : 0;
}

/* What the module learns of the measure (GPUSLEEP_CF_*). */
static uint32_t answer_flags(const struct gs_mm_result *r, bool pause)
{
	uint32_t f = 0;

	if (pause && (r->flags & GS_MM_RES_MEASURED))
		f |= GPUSLEEP_CF_MEASURED;
	if (pause && (r->flags & GS_MM_RES_SHORTFALL))
		f |= GPUSLEEP_CF_SHORTFALL;
	return f;
}

static int handle(struct gs_agent *a, const struct gpusleep_event *ev)
{
	struct gpusleep_complete c;
	struct gs_agent_result ar;
	struct gs_mm_result r;
	gs_agent_result_fn cb;
	void *cb_arg;
	int status, ret, ti = -1;
	uint64_t held = 0;
	bool pause;

	switch (ev->type) {
	case GPUSLEEP_EV_PAUSE_TAG:
		pause = true;
		/* its waits for the GPU end before the step does */
		gs_mm_pause_until(a->mm, ev->tags, ev->deadline_ns, &r);
		break;
	case GPUSLEEP_EV_RESUME_TAG:
		pause = false;
		gs_mm_resume_ex(a->mm, ev->tags, &r);
		break;
	default:
		return 0;	/* not an agent's event */
	}
	if (r.status == -EALREADY)
		r.status = 0;
	status = r.status;
	if (status && pause && r.unmapped_bytes)
		fprintf(stderr, "gpusleep agent: pausing %s failed (%s) and %llu bytes of it stay unmapped: answering them, a resume maps them back\n",
			gs_tag_name(ev->tags) ? gs_tag_name(ev->tags) : "?",
			strerror(-status), (unsigned long long)r.unmapped_bytes);
	if (r.lost_bytes && pause)
		fprintf(stderr, "gpusleep agent: %s: %llu bytes of discarded contents were lost by the rollback (they read as zeros)\n",
			gs_tag_name(ev->tags) ? gs_tag_name(ev->tags) : "?",
			(unsigned long long)r.lost_bytes);
	if (r.lost_bytes && !pause && !status)
		fprintf(stderr, "gpusleep agent: %s: resumed fresh, %llu bytes of its contents were lost before (they read as zeros: reload them)\n",
			gs_tag_name(ev->tags) ? gs_tag_name(ev->tags) : "?",
			(unsigned long long)r.lost_bytes);
	if (r.flags & GS_MM_RES_VERIFY_FAILED)
		fprintf(stderr, "gpusleep agent: resuming %s failed: its backup's host copy changed since the release (checksum mismatch); %llu bytes of contents are lost, answered EBADMSG: the tag stays released, the next resume maps it fresh (zeros) and the engine must reload it\n",
			gs_tag_name(ev->tags) ? gs_tag_name(ev->tags) : "?",
			(unsigned long long)r.lost_bytes);
	if (r.flags & GS_MM_RES_SHORTFALL)
		fprintf(stderr, "gpusleep agent: %s: released %llu bytes but the driver saw only %llu come free\n",
			gs_tag_name(ev->tags) ? gs_tag_name(ev->tags) : "?",
			(unsigned long long)r.bytes,
			(unsigned long long)r.freed_bytes);
	memset(&c, 0, sizeof(c));
	c.status = status;
	c.bytes = answer_bytes(&r, pause);
	c.freed_bytes = pause ? r.freed_bytes : 0;
	c.lost_bytes = r.lost_bytes;
	c.flags = answer_flags(&r, pause);
	/* What stays: the process's own figure, else the device's. */
	if (pause) {
		c.resident_source = gs_mm_resident(a->mm, &held);
		c.resident_bytes = held;
	}
	/*
	 * What the tags are now, for the arbiter, before the step's answer:
	 * once the answer ends the operation, a caller's next reclaim reads
	 * this report and must not find the tags as they were before it.
	 */
	send_report(a, false);
	ret = gs_complete_ex(a->fd, ev, &c);

	memset(&ar, 0, sizeof(ar));
	ar.op_id = ev->op_id;
	ar.type = ev->type;
	ar.tag = ev->tags;
	ar.complete_ret = ret;
	ar.mm = r;
	ar.resident_bytes = c.resident_bytes;
	ar.resident_source = c.resident_source;
	if (!pause)
		ar.generation = ev->generation;
	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++)
		if (ev->tags == (1U << i))
			ti = i;
	pthread_mutex_lock(&a->lock);
	if (ti >= 0)
		a->last[ti] = ar;
	if (status)
		a->stats.failures++;
	else if (pause)
		a->stats.pauses++;
	else
		a->stats.resumes++;
	if (pause && !status) {
		a->stats.released_bytes += r.bytes;
		a->stats.freed_bytes += r.freed_bytes;
		if (r.flags & GS_MM_RES_SHORTFALL)
			a->stats.shortfalls++;
	}
	a->stats.lost_bytes += r.lost_bytes;
	if (ret)
		a->stats.complete_errors++;
	cb = a->cb;
	cb_arg = a->cb_arg;
	pthread_mutex_unlock(&a->lock);
	if (cb)
		cb(a, &ar, cb_arg);
	/* -ESTALE: the kernel gave up on the step; the mm state is still true */
	return ret == -ESTALE ? 0 : ret;
}

int gs_agent_dispatch(struct gs_agent *a)
{
	struct gpusleep_event ev;
	int n = 0, ret;
	bool first;

	pthread_mutex_lock(&a->lock);
	first = !a->reported;
	pthread_mutex_unlock(&a->lock);
	if (first)
		send_report(a, true);	/* once attached: what it has */
	for (;;) {
		ret = gs_read_event(a->fd, &ev);
		if (ret == -EAGAIN)
			return n;
		if (ret == 0)
			return -EPIPE;
		if (ret < 0)
			return ret;
		n++;
		pthread_mutex_lock(&a->lock);
		a->stats.events++;
		pthread_mutex_unlock(&a->lock);
		ret = handle(a, &ev);
		if (ret < 0)
			return ret;
	}
}

/* Tell gs_agent_start() how the thread's start went. */
static void agent_started(struct gs_agent *a, int ret)
{
	pthread_mutex_lock(&a->lock);
	a->start_ret = ret;
	a->started = true;
	pthread_cond_signal(&a->started_cv);
	pthread_mutex_unlock(&a->lock);
}

#if GS_HAVE_URING
static int arm(struct io_uring *ring, int fd, uint64_t ud)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	int ret;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_multishot(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud);
	ret = io_uring_submit(ring);
	return ret < 0 ? ret : 0;
}

static void *agent_thread(void *p)
{
	struct gs_agent *a = p;
	int ret;

	/*
	 * Armed from this thread: io_uring completes a poll as task work of
	 * the task that submitted it, so a record for the agent wakes this
	 * thread alone, not also the thread that started it.
	 */
	ret = arm(&a->ring, a->stop_efd, UD_STOP);
	if (!ret)
		ret = arm(&a->ring, a->kick_efd, UD_KICK);
	if (!ret)
		ret = arm(&a->ring, a->timer_fd, UD_TIMER);
	if (!ret)
		ret = arm(&a->ring, a->fd, UD_AGENT);
	agent_started(a, ret);
	if (ret)
		return NULL;
	report_due(a);		/* once attached */
	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t ud;
		bool more;
		int res;

		ret = io_uring_wait_cqe(&a->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break;
		ud = io_uring_cqe_get_data64(cqe);
		res = cqe->res;
		more = cqe->flags & IORING_CQE_F_MORE;
		io_uring_cqe_seen(&a->ring, cqe);

		if (ud == UD_STOP) {
			ret = 0;
			break;
		}
		if (res < 0 && res != -ECANCELED) {
			ret = res;
			break;
		}
		if (ud == UD_KICK || ud == UD_TIMER) {
			int fd = ud == UD_KICK ? a->kick_efd : a->timer_fd;

			drain_fd(fd);
			if (ud == UD_TIMER)
				a->timer_armed = false;
			report_due(a);
			if (!more)
				ret = arm(&a->ring, fd, ud);
			if (ret < 0)
				break;
			continue;
		}
		/* records first, even with POLLHUP: read() drains, then EOF */
		ret = gs_agent_dispatch(a);
		if (ret == -EPIPE) {
			ret = 0;	/* the domain died: nothing left to serve */
			break;
		}
		if (ret < 0)
			break;
		if (!more) {
			ret = arm(&a->ring, a->fd, UD_AGENT);
			if (ret < 0)
				break;
		}
	}
	a->thread_ret = ret;
	return NULL;
}

#else /* !GS_HAVE_URING */
static void *agent_thread(void *p)
{
	struct gs_agent *a = p;
	int ret = 0;

	agent_started(a, 0);
	report_due(a);		/* once attached */
	for (;;) {
		struct pollfd pfd[4] = {
			{ .fd = a->fd, .events = POLLIN },
			{ .fd = a->stop_efd, .events = POLLIN },
			{ .fd = a->kick_efd, .events = POLLIN },
			{ .fd = a->timer_fd, .events = POLLIN },
		};

		if (poll(pfd, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		/* records first, even with POLLHUP: read() drains, then EOF */
		if (pfd[0].revents) {
			ret = gs_agent_dispatch(a);
			if (ret == -EPIPE) {
				ret = 0;	/* the domain died */
				break;
			}
			if (ret < 0)
				break;
		}
		if (pfd[1].revents) {
			ret = 0;
			break;
		}
		if (pfd[2].revents || pfd[3].revents) {
			drain_fd(a->kick_efd);
			if (pfd[3].revents) {
				drain_fd(a->timer_fd);
				a->timer_armed = false;
			}
			report_due(a);
		}
	}
	a->thread_ret = ret;
	return NULL;
}
#endif

int gs_agent_start(struct gs_agent *a)
{
	int ret;

	if (a->running)
		return -EALREADY;
	a->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->stop_efd < 0)
		return -errno;
	a->kick_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	a->timer_fd = timerfd_create(CLOCK_MONOTONIC,
				     TFD_CLOEXEC | TFD_NONBLOCK);
	if (a->kick_efd < 0 || a->timer_fd < 0) {
		ret = -errno;
		goto err_kick;
	}
	a->timer_armed = false;
#if GS_HAVE_URING
	ret = io_uring_queue_init(8, &a->ring, 0);
	if (ret < 0)
		goto err_efd;
#endif
	a->thread_ret = 0;
	a->started = false;
	ret = -pthread_create(&a->thread, NULL, agent_thread, a);
	if (ret)
		goto err_ring;
	/* The thread arms its own polls: wait for that, and its error. */
	pthread_mutex_lock(&a->lock);
	while (!a->started)
		pthread_cond_wait(&a->started_cv, &a->lock);
	ret = a->start_ret;
	pthread_mutex_unlock(&a->lock);
	if (ret) {
		pthread_join(a->thread, NULL);
		goto err_ring;
	}
	a->running = true;
	/* the memory manager's changes kick the thread for a report */
	gs_mm_set_notify(a->mm, a->kick_efd);
	return 0;

err_ring:
#if GS_HAVE_URING
	io_uring_queue_exit(&a->ring);
err_efd:
#endif
err_kick:
	if (a->kick_efd >= 0)
		close(a->kick_efd);
	if (a->timer_fd >= 0)
		close(a->timer_fd);
	a->kick_efd = a->timer_fd = -1;
	close(a->stop_efd);
	a->stop_efd = -1;
	return ret;
}

int gs_agent_stop(struct gs_agent *a)
{
	uint64_t one = 1;

	if (!a->running)
		return -EINVAL;
	gs_mm_clear_notify(a->mm, a->kick_efd);
	/* the counter only grows: a failed write cannot lose the wakeup */
	if (write(a->stop_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fprintf(stderr, "gpusleep agent: stop eventfd write: %s\n",
			strerror(errno));
	pthread_join(a->thread, NULL);
	a->running = false;
#if GS_HAVE_URING
	io_uring_queue_exit(&a->ring);
#endif
	close(a->stop_efd);
	a->stop_efd = -1;
	pthread_mutex_lock(&a->lock);	/* kick() reads it under the lock */
	close(a->kick_efd);
	a->kick_efd = -1;
	pthread_mutex_unlock(&a->lock);
	close(a->timer_fd);
	a->timer_fd = -1;
	return a->thread_ret;
}
