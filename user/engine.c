// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * gs_engine: the engine's side of a domain. The engine fd is polled by the
 * scheduler's loop; gs_engine_dispatch() reads the queued records and runs
 * the callbacks (drain, reset caches, KV repair, resume scheduling, drain
 * cancelled), answering GPUSLEEP_IOC_COMPLETE for the steps that need it.
 * A callback may answer later (GS_PENDING + gs_engine_complete()), as a real
 * scheduler finishes its in-flight requests before it reports drained.
 *
 * Scheduling is a level the kernel owns: every record carries it
 * (GPUSLEEP_EVF_MAY_SCHEDULE) and sched_paused follows the newest record
 * read. Only RESUME_SCHED raises it; DRAIN_CANCELLED means "stop
 * draining", never "go" (weights may still be released).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libgpusleep.h"

struct gs_engine {
	int fd;
	uint32_t id;
	struct gs_engine_ops ops;
	void *arg;
	pthread_mutex_t lock;		/* sched_paused, pending, pending_ev, */
	bool sched_paused;		/* replaced, kv_generation */
	bool pending;
	struct gpusleep_event pending_ev;
	uint32_t replaced;		/* tags of the newest RESUME_SCHED */
	uint64_t kv_generation;		/* of the newest REPAIR_KV */
};

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int gs_engine_from_fd(int fd, uint32_t id, const struct gs_engine_ops *ops,
		      void *arg, struct gs_engine **out)
{
	struct gs_engine *e;
	int ret;

	if (fd < 0)
		return -EBADF;
	ret = set_nonblock(fd);
	if (ret)
		return ret;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = fd;
	e->id = id;
	if (ops)
		e->ops = *ops;
	e->arg = arg;
	pthread_mutex_init(&e->lock, NULL);
	*out = e;
	return 0;
}

int gs_engine_create(const struct gs_engine_config *cfg,
		     const struct gs_engine_ops *ops, void *arg,
		     struct gs_engine **out)
{
	uint32_t id = 0;
	int devfd, fd, ret;

	if (!cfg || !cfg->name || !*cfg->name)
		return -EINVAL;
	devfd = gs_open(cfg->dev_path, 0, NULL);
	if (devfd < 0)
		return devfd;
	fd = gs_create_domain_tags(devfd, cfg->name, cfg->gpu, cfg->caps,
				   cfg->flags, cfg->tags, cfg->nr_tags, &id);
	close(devfd);
	if (fd < 0)
		return fd;
	ret = gs_engine_from_fd(fd, id, ops, arg, out);
	if (ret)
		close(fd);
	return ret;
}

void gs_engine_destroy(struct gs_engine *e)
{
	if (!e)
		return;
	close(e->fd);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

int gs_engine_fd(const struct gs_engine *e)
{
	return e->fd;
}

uint32_t gs_engine_id(const struct gs_engine *e)
{
	return e->id;
}

bool gs_engine_sched_paused(const struct gs_engine *e)
{
	struct gs_engine *m = (struct gs_engine *)e;
	bool v;

	pthread_mutex_lock(&m->lock);
	v = m->sched_paused;
	pthread_mutex_unlock(&m->lock);
	return v;
}

bool gs_engine_pending(const struct gs_engine *e)
{
	struct gs_engine *m = (struct gs_engine *)e;
	bool v;

	pthread_mutex_lock(&m->lock);
	v = m->pending;
	pthread_mutex_unlock(&m->lock);
	return v;
}

uint32_t gs_engine_replaced_tags(const struct gs_engine *e)
{
	struct gs_engine *m = (struct gs_engine *)e;
	uint32_t v;

	pthread_mutex_lock(&m->lock);
	v = m->replaced;
	pthread_mutex_unlock(&m->lock);
	return v;
}

uint64_t gs_engine_kv_generation(const struct gs_engine *e)
{
	struct gs_engine *m = (struct gs_engine *)e;
	uint64_t v;

	pthread_mutex_lock(&m->lock);
	v = m->kv_generation;
	pthread_mutex_unlock(&m->lock);
	return v;
}

int gs_engine_generation(const struct gs_engine *e, uint32_t tag,
			 uint64_t *gen)
{
	struct gpusleep_state st;
	int ret;

	if (!tag || (tag & (tag - 1)) || tag >= (1U << GPUSLEEP_MAX_TAGS))
		return -EINVAL;
	ret = gs_get_state(e->fd, &st);
	if (ret)
		return ret;
	*gen = st.generation[__builtin_ctz(tag)];
	return 0;
}

/* Answer now, or remember the step for gs_engine_complete(). */
static int answer(struct gs_engine *e, const struct gpusleep_event *ev, int ret)
{
	if (ret == GS_PENDING) {
		pthread_mutex_lock(&e->lock);
		e->pending = true;
		e->pending_ev = *ev;
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	if (ret > 0)
		ret = -EINVAL;	/* a callback bug: fail the step, loudly */
	ret = gs_complete(e->fd, ev, ret, 0);
	/* -ESTALE: the step timed out or was cancelled meanwhile */
	return ret == -ESTALE ? 0 : ret;
}

static int handle(struct gs_engine *e, const struct gpusleep_event *ev)
{
	const struct gs_engine_ops *o = &e->ops;
	int ret;

	pthread_mutex_lock(&e->lock);
	/* The kernel's truth, carried by every record. */
	e->sched_paused = !(ev->flags & GPUSLEEP_EVF_MAY_SCHEDULE);
	/*
	 * A new step supersedes an unanswered one (the kernel gave up on
	 * it); "stop draining" and "go" end a pending drain.
	 */
	if (ev->type == GPUSLEEP_EV_DRAIN || ev->type == GPUSLEEP_EV_RESET_CACHES ||
	    ev->type == GPUSLEEP_EV_REPAIR_KV ||
	    ((ev->type == GPUSLEEP_EV_DRAIN_CANCELLED ||
	      ev->type == GPUSLEEP_EV_RESUME_SCHED) &&
	     e->pending && e->pending_ev.type == GPUSLEEP_EV_DRAIN))
		e->pending = false;
	/* What the callbacks may ask about: new memory, to register again. */
	if (ev->type == GPUSLEEP_EV_RESUME_SCHED)
		e->replaced = ev->tags;
	if (ev->type == GPUSLEEP_EV_REPAIR_KV)
		e->kv_generation = ev->generation;
	pthread_mutex_unlock(&e->lock);

	switch (ev->type) {
	case GPUSLEEP_EV_DRAIN:
		ret = o->drain ? o->drain(e, e->arg, ev->tags,
					  ev->flags & GPUSLEEP_EVF_ABORT_INFLIGHT) : 0;
		return answer(e, ev, ret);
	case GPUSLEEP_EV_RESET_CACHES:
		ret = o->reset_caches ? o->reset_caches(e, e->arg) : 0;
		return answer(e, ev, ret);
	case GPUSLEEP_EV_REPAIR_KV:
		ret = o->repair_kv ? o->repair_kv(e, e->arg) : 0;
		return answer(e, ev, ret);
	case GPUSLEEP_EV_DRAIN_CANCELLED:
		/* Stop draining; scheduling stays paused. */
		if (o->drain_cancelled)
			o->drain_cancelled(e, e->arg);
		return 0;
	case GPUSLEEP_EV_RESUME_SCHED:
		if (o->resume_sched)
			o->resume_sched(e, e->arg);
		return 0;
	default:
		/* a newer module's event, or an agent's: nothing to do */
		return 0;
	}
}

int gs_engine_dispatch(struct gs_engine *e)
{
	struct gpusleep_event ev;
	int n = 0, ret;

	for (;;) {
		ret = gs_read_event(e->fd, &ev);
		if (ret == -EAGAIN)
			return n;
		if (ret == 0)
			return -EPIPE;
		if (ret < 0)
			return ret;
		n++;
		ret = handle(e, &ev);
		if (ret < 0)
			return ret;
	}
}

int gs_engine_complete(struct gs_engine *e, int status)
{
	struct gpusleep_event ev;
	int ret;

	pthread_mutex_lock(&e->lock);
	if (!e->pending) {
		pthread_mutex_unlock(&e->lock);
		return -ESTALE;
	}
	e->pending = false;
	ev = e->pending_ev;
	pthread_mutex_unlock(&e->lock);
	if (status > 0)
		status = -EINVAL;
	ret = gs_complete(e->fd, &ev, status, 0);
	return ret;
}
