/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the in-VM kselftests of gpusleep: raw uAPI calls, reading
 * event records with a bound, and a scripted responder that plays the
 * engine or the agent in a child process.
 */
#ifndef GS_TEST_H
#define GS_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#define GS_DEV		"/dev/gpusleep"

/*
 * SKIP from a FIXTURE_SETUP. The 6.1 harness runs the test body after a
 * setup that only SKIPped; exiting the test's child with 255 is what it
 * reports as a skip, so the body never runs.
 */
#define GS_SETUP_SKIP(fmt, ...) SKIP(_exit(255), fmt, ##__VA_ARGS__)
#define GS_WAIT_MS	20000	/* a bound for "never happens" in tests */

static inline int gs_err(long r)
{
	return r < 0 ? -errno : (int)r;
}

static inline int gs_api(int dev)
{
	struct gpusleep_api a = { .api = GPUSLEEP_API_VERSION };

	return gs_err(ioctl(dev, GPUSLEEP_IOC_API, &a));
}

/* Create a domain with GPUSLEEP_CREATEF_* flags; the engine fd or -errno. */
static inline int gs_create_flags(int dev, const char *name, uint32_t caps,
				  uint32_t flags, uint32_t *id)
{
	struct gpusleep_create c;
	int fd;

	if (id)
		*id = 0;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	snprintf(c.gpu, sizeof(c.gpu), "test-gpu-0");
	c.caps = caps;
	c.flags = flags;
	fd = ioctl(dev, GPUSLEEP_IOC_CREATE_DOMAIN, &c);
	if (fd < 0)
		return -errno;
	if (id)
		*id = c.id;
	return fd;
}

/* Create a domain owned by this process; the engine fd or -errno. */
static inline int gs_create(int dev, const char *name, uint32_t caps,
			    uint32_t *id)
{
	return gs_create_flags(dev, name, caps, 0, id);
}

static inline int gs_attach(int dev, uint32_t id, uint32_t role)
{
	struct gpusleep_attach a = { .id = id, .role = role };

	return gs_err(ioctl(dev, GPUSLEEP_IOC_ATTACH, &a));
}

/* Release or resume; returns 0 or -errno, fills *out. */
static inline int gs_op(int fd, unsigned long cmd, uint32_t tags,
			uint32_t flags, struct gpusleep_op *out)
{
	struct gpusleep_op o;
	int r;

	memset(&o, 0, sizeof(o));
	o.tags = tags;
	o.flags = flags;
	r = gs_err(ioctl(fd, cmd, &o));
	if (out)
		*out = o;
	return r;
}

static inline int gs_release(int fd, uint32_t tags, uint32_t flags,
			     struct gpusleep_op *out)
{
	return gs_op(fd, GPUSLEEP_IOC_RELEASE, tags, flags, out);
}

static inline int gs_resume(int fd, uint32_t tags, uint32_t flags,
			    struct gpusleep_op *out)
{
	return gs_op(fd, GPUSLEEP_IOC_RESUME, tags, flags, out);
}

static inline int gs_state(int fd, struct gpusleep_state *st)
{
	memset(st, 0xcc, sizeof(*st));
	return gs_err(ioctl(fd, GPUSLEEP_IOC_GET_STATE, st));
}

static inline int gs_wait(int fd, uint64_t op_id, uint32_t timeout_ms,
			  struct gpusleep_result *res)
{
	struct gpusleep_wait w;
	int r;

	memset(&w, 0, sizeof(w));
	w.op_id = op_id;
	w.timeout_ms = timeout_ms;
	r = gs_err(ioctl(fd, GPUSLEEP_IOC_WAIT, &w));
	if (res)
		*res = w.result;
	return r;
}

/* Start an operation without waiting, with a per-step timeout. */
static inline int gs_start(int fd, unsigned long cmd, uint32_t tags,
			   uint32_t ms, struct gpusleep_op *op)
{
	memset(op, 0, sizeof(*op));
	op->tags = tags;
	op->flags = GPUSLEEP_OPF_NONBLOCK;
	op->timeout_ms = ms;
	return gs_err(ioctl(fd, cmd, op));
}

/* Wait for an operation; its result's error (0 or -errno); res may be NULL. */
static inline int gs_finish(int ctl, uint64_t id, struct gpusleep_result *res)
{
	struct gpusleep_result r;
	int ret = gs_wait(ctl, id, GS_WAIT_MS, &r);

	if (res)
		*res = r;
	return ret ? ret : r.error;
}

static inline int gs_eventfd(int fd, int efd, uint32_t events)
{
	struct gpusleep_eventfd e = { .fd = efd, .events = events };

	return gs_err(ioctl(fd, GPUSLEEP_IOC_EVENTFD, &e));
}

#define GS_PARAM_DIR	"/sys/module/gpusleep/parameters/"

/*
 * Set module parameter name to val; with old, first read its value there
 * (to put it back). Returns 0 or -errno.
 */
static inline int gs_param_set(const char *name, const char *val, char *old,
			       size_t oldlen)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), GS_PARAM_DIR "%s", name);
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -errno;
	if (old) {
		n = read(fd, old, oldlen - 1);
		old[n > 0 ? n : 0] = 0;
		lseek(fd, 0, SEEK_SET);
	}
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* A module parameter's value as an int, or -errno. */
static inline int gs_param_get(const char *name)
{
	char path[128], buf[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), GS_PARAM_DIR "%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : -EIO;
}

/*
 * Fault injection (a module built with GPUSLEEP_FAULT_INJECTION=y, on a
 * kernel with CONFIG_FAULT_INJECTION_DEBUG_FS): the kernel's knobs in
 * debugfs. gs_fault_arm(n) fails the nth site reached from now, once.
 */
#define GS_FAULT_DIR	"/sys/kernel/debug/fail_gpusleep/"

static inline int gs_fault_knob(const char *knob, const char *val)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), GS_FAULT_DIR "%s", knob);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static inline int gs_fault_available(void)
{
	return access(GS_FAULT_DIR "times", W_OK) == 0;
}

static inline int gs_fault_arm(unsigned int nth)
{
	char v[16];

	snprintf(v, sizeof(v), "%u", nth);
	if (gs_fault_knob("times", "0") || gs_fault_knob("verbose", "0") ||
	    gs_fault_knob("interval", "1") || gs_fault_knob("space", v) ||
	    gs_fault_knob("probability", "100"))
		return -1;
	return gs_fault_knob("times", "1");
}

static inline int gs_fault_off(void)
{
	return gs_fault_knob("times", "0");
}

/* 1 once the armed fault fired (times went to 0), 0 if not, or -errno. */
static inline int gs_fault_fired(void)
{
	char buf[16] = "";
	int fd, n;

	fd = open(GS_FAULT_DIR "times", O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && atoi(buf) == 0;
}

/* Read one record within ms; 0, -ETIMEDOUT, -EPIPE on hang-up/EOF. */
/* CLOCK_MONOTONIC in ns: the clock of the module's deadlines. */
static inline uint64_t gs_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline int gs_next(int fd, struct gpusleep_event *ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;
	int r;

	r = poll(&p, 1, ms);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	if (!(p.revents & POLLIN))
		return -EPIPE;
	memset(ev, 0xcc, sizeof(*ev));
	n = read(fd, ev, sizeof(*ev));
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	return n == sizeof(*ev) ? 0 : -EIO;
}

/* Expect the next record to be of type (and tags when non-zero). */
static inline int gs_expect(int fd, uint32_t type, uint32_t tags,
			    struct gpusleep_event *ev)
{
	int r = gs_next(fd, ev, GS_WAIT_MS);

	if (r)
		return r;
	if (ev->type != type || (tags && ev->tags != tags)) {
		fprintf(stderr, "# expected event %u tags %#x, got %u tags %#x\n",
			type, tags, ev->type, ev->tags);
		return -EPROTO;
	}
	return 0;
}

/* The answer to ev with status and bytes, the rest zero (to add to). */
static inline void gs_complete_of(struct gpusleep_complete *c,
				  const struct gpusleep_event *ev, int status,
				  uint64_t bytes)
{
	memset(c, 0, sizeof(*c));
	c->op_id = ev->op_id;
	c->step = ev->step;
	c->type = ev->type;
	c->status = status;
	c->bytes = bytes;
}

static inline int gs_answer(int fd, const struct gpusleep_event *ev,
			    int status, uint64_t bytes)
{
	struct gpusleep_complete c;

	gs_complete_of(&c, ev, status, bytes);
	return gs_err(ioctl(fd, GPUSLEEP_IOC_COMPLETE, &c));
}

static inline int gs_answer_next(int fd, uint32_t type, uint32_t tags,
				 int status, uint64_t bytes)
{
	struct gpusleep_event ev;
	int r = gs_expect(fd, type, tags, &ev);

	return r ? r : gs_answer(fd, &ev, status, bytes);
}

static inline int gs_needs_answer(uint32_t type)
{
	return type == GPUSLEEP_EV_DRAIN || type == GPUSLEEP_EV_RESET_CACHES ||
	       type == GPUSLEEP_EV_REPAIR_KV || type == GPUSLEEP_EV_PAUSE_TAG ||
	       type == GPUSLEEP_EV_RESUME_TAG;
}

#define GS_TAG_BYTES(tag)	((uint64_t)(tag) << 20)

/*
 * A responder in a child process: answers every record on fd with success
 * (bytes = tag << 20) until hang-up, except that a record of type hold is
 * never answered and a record of type fail is answered with fail_status.
 * Writes each record's type as one byte to log_fd (if >= 0).
 */
struct gs_responder {
	uint32_t hold;
	uint32_t fail;
	int fail_status;
	int log_fd;
};

static inline void gs_respond_loop(int fd, const struct gs_responder *rs)
{
	struct gpusleep_event ev;
	unsigned char t;

	for (;;) {
		if (gs_next(fd, &ev, -1))
			return;
		t = (unsigned char)ev.type;
		if (rs && rs->log_fd >= 0 && write(rs->log_fd, &t, 1) != 1)
			return;
		if (!gs_needs_answer(ev.type))
			continue;
		if (rs && rs->hold && ev.type == rs->hold)
			continue;
		if (rs && rs->fail && ev.type == rs->fail)
			gs_answer(fd, &ev, rs->fail_status, 0);
		else
			gs_answer(fd, &ev, 0, GS_TAG_BYTES(ev.tags));
	}
}

/* Fork a responder on fd; the parent should close its copy if it wants
 * the child to be the only holder. Returns the pid. */
static inline pid_t gs_spawn_responder(int fd, const struct gs_responder *rs)
{
	pid_t pid = fork();

	if (pid == 0) {
		int i;

		/* Hold no other domain fd: a test kills roles one by one. */
		for (i = 3; i < 1024; i++)
			if (i != fd && (!rs || i != rs->log_fd))
				close(i);
		gs_respond_loop(fd, rs);
		_exit(0);
	}
	return pid;
}

static inline int gs_reap(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return st;
}

#endif /* GS_TEST_H */
