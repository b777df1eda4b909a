// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl metrics --textfile DIR: keep DIR/gpusleep.prom current for
 * node_exporter's textfile collector, with no cron job and no stale window.
 *
 *   - joins the "gpusleep" family's "events" group and nlctrl's "notify"
 *     group (which announces families coming and going: the module being
 *     loaded or unloaded), on one non-blocking socket watched by epoll;
 *   - joins the kernel's uevents (NETLINK_KOBJECT_UEVENT), since a domain
 *     being created is no state transition and has no netlink event: the
 *     KOBJ_ADD of its sysfs device (SUBSYSTEM=gpusleep) is the news;
 *   - after every batch of events, and every --interval seconds as a
 *     fallback, reads sysfs again and rewrites the file: written to
 *     DIR/.gpusleep.prom.PID (node_exporter reads only *.prom), then
 *     renamed over gpusleep.prom, so a scrape sees the old file or the new
 *     one, never a part; on any failure the temporary file is removed;
 *   - on ENOBUFS (events lost) counts it and reads everything again; sysfs
 *     is the whole state, so nothing is missed but the timestamps of the
 *     transitions that were lost;
 *   - without the module it writes gpusleep_up 0, and rejoins when the
 *     family comes back;
 *   - SIGTERM, SIGINT: exit 0 (the file stays: node_textfile_mtime_seconds
 *     tells its age); SIGHUP: rewrite now. Signals are read through a
 *     signalfd, so no write is ever cut in the middle by one.
 * Temporary files of earlier runs that died (SIGKILL) are removed at start.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "metrics.h"
#include "nl.h"

#define PROM_NAME	"gpusleep.prom"
#define TMP_PREFIX	".gpusleep.prom."

struct seen {
	uint32_t id;
	char state[16];
	double since;
};

struct exporter {
	const char *dir;
	int dirfd;
	struct gs_nl nl;
	bool nl_ok;		/* sockets connected */
	int ctrl_grp;		/* nlctrl "notify", < 0 if not joined */
	bool rejoin;		/* the family appeared: join its group */
	bool family_gone;	/* DELFAMILY seen: the module is going away */
	bool dirty;		/* something changed: rewrite */
	bool once;		/* --once: no exporter-only series */
	struct seen *seen;
	size_t nseen;
	struct lease_seen *leases;	/* held now, as sysfs shows them */
	size_t nleases;
	struct metrics_extra x;
	char last_err[256];	/* say a failure once, not every interval */
};

static double now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Report a failure once until it changes or clears (a daemon's log). */
static void exp_err(struct exporter *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void exp_err(struct exporter *e, const char *fmt, ...)
{
	char buf[sizeof(e->last_err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!strcmp(buf, e->last_err))
		return;
	snprintf(e->last_err, sizeof(e->last_err), "%s", buf);
	errmsg("%s", buf);
}

static struct seen *seen_find(struct exporter *e, uint32_t id)
{
	size_t i;

	for (i = 0; i < e->nseen; i++)
		if (e->seen[i].id == id)
			return &e->seen[i];
	return NULL;
}

/* A transition seen on netlink: the new state began now. */
static void seen_transition(struct exporter *e, uint32_t id, const char *state)
{
	struct seen *s = seen_find(e, id);

	if (!s)
		return;		/* new: the next sysfs scan records it */
	snprintf(s->state, sizeof(s->state), "%s", state);
	s->since = now_unix();
}

/*
 * Keep one entry per live domain, in the order of ds; a state that differs
 * from the one remembered (or a domain not seen before) began now.
 */
static int seen_update(struct exporter *e, const struct domain *ds, size_t n,
		       double **since)
{
	struct seen *nv = calloc(n ? n : 1, sizeof(*nv));
	double *sv = calloc(n ? n : 1, sizeof(*sv));
	double t = now_unix();
	size_t i;

	if (!nv || !sv) {
		free(nv);
		free(sv);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		struct seen *old = seen_find(e, ds[i].id);

		nv[i].id = ds[i].id;
		snprintf(nv[i].state, sizeof(nv[i].state), "%s", ds[i].state);
		nv[i].since = old && !strcmp(old->state, ds[i].state) ?
			      old->since : t;
		sv[i] = nv[i].since;
	}
	free(e->seen);
	e->seen = nv;
	e->nseen = n;
	*since = sv;
	return 0;
}

/*
 * The leases holding some domain's tags (sysfs lease_id), each with the
 * time it was first seen: a lease held past a bound is alerted on.
 */
static int leases_update(struct exporter *e, const struct domain *ds,
			 size_t n)
{
	struct lease_seen *nv = calloc(n ? n : 1, sizeof(*nv));
	double t = now_unix();
	size_t i, j, k = 0;

	if (!nv)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned long long id = ds[i].lease_id;
		bool dup = false;

		if (!(ds[i].present & (1ULL << FLD_lease_id)) || !id)
			continue;
		for (j = 0; j < k && !dup; j++)
			dup = nv[j].id == id;
		if (dup)
			continue;
		nv[k].id = id;
		nv[k].since = t;
		for (j = 0; j < e->nleases; j++)
			if (e->leases[j].id == id)
				nv[k].since = e->leases[j].since;
		k++;
	}
	free(e->leases);
	e->leases = nv;
	e->nleases = k;
	e->x.leases = nv;
	e->x.nr_leases = k;
	return 0;
}

/* Write the file: a temporary one, then rename. 0 or -errno. */
static int exp_write(struct exporter *e)
{
	char tmp[64];
	struct domain *ds = NULL;
	double *since = NULL;
	size_t n = 0;
	bool up;
	FILE *f;
	int fd, r;

	r = domain_load_all(&ds, &n);
	/*
	 * The module unregisters its family first and its sysfs class last:
	 * after DELFAMILY it is going, even while the class is still there.
	 */
	up = !r && !e->family_gone;
	if (e->family_gone) {
		free(ds);
		ds = NULL;
		n = 0;
	}
	if (r && r != -ENOENT) {
		exp_err(e, "%s: %s", sysfs_root, strerror(-r));
		return r;
	}
	r = seen_update(e, ds, n, &since);
	if (!r)
		r = leases_update(e, ds, n);
	if (r)
		goto out;
	e->x.state_since = since;

	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d", (int)getpid());
	fd = openat(e->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0644);
	if (fd < 0) {
		r = -errno;
		exp_err(e, "%s/%s: %s", e->dir, tmp, strerror(errno));
		goto out;
	}
	f = fdopen(fd, "w");
	if (!f) {
		r = -errno;
		close(fd);
		goto unlink;
	}
	r = metrics_write(f, up, ds, n, e->once ? NULL : &e->x);
	if (fflush(f) && !r)
		r = -errno;
	if (fclose(f) && !r)
		r = -errno;
	if (r) {
		exp_err(e, "%s/%s: write: %s", e->dir, tmp, strerror(-r));
		goto unlink;
	}
	if (renameat(e->dirfd, tmp, e->dirfd, PROM_NAME)) {
		r = -errno;
		exp_err(e, "%s/%s: rename: %s", e->dir, PROM_NAME,
			strerror(errno));
		goto unlink;
	}
	e->last_err[0] = '\0';
	e->dirty = false;
	goto out;
unlink:
	unlinkat(e->dirfd, tmp, 0);
out:
	e->x.state_since = NULL;
	free(since);
	free(ds);
	return r;
}

/* Temporary files of runs that are gone (killed before they renamed). */
static void remove_stale(struct exporter *e)
{
	struct dirent *de;
	long pid;
	char *end;
	DIR *d;
	int fd = dup(e->dirfd);

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)))
			continue;
		pid = strtol(de->d_name + strlen(TMP_PREFIX), &end, 10);
		if (*end || pid <= 0 ||
		    (pid != getpid() && !kill((pid_t)pid, 0)) ||
		    (pid != getpid() && errno != ESRCH))
			continue;
		unlinkat(e->dirfd, de->d_name, 0);
	}
	closedir(d);
}

/* Events: transitions of the gpusleep family, families of nlctrl. */
static int exp_valid(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nh = nlmsg_hdr(msg);
	struct genlmsghdr *gh = nlmsg_data(nh);
	struct exporter *e = arg;

	if (nh->nlmsg_type == GENL_ID_CTRL) {
		static struct nla_policy cp[CTRL_ATTR_MAX + 1] = {
			[CTRL_ATTR_FAMILY_NAME] = { .type = NLA_STRING },
		};
		struct nlattr *tb[CTRL_ATTR_MAX + 1];

		if (genlmsg_parse(nh, 0, tb, CTRL_ATTR_MAX, cp) ||
		    !tb[CTRL_ATTR_FAMILY_NAME] ||
		    strcmp(nla_get_string(tb[CTRL_ATTR_FAMILY_NAME]),
			   GPUSLEEP_GENL_NAME))
			return NL_OK;
		if (gh->cmd == CTRL_CMD_NEWFAMILY)
			e->rejoin = true;
		else if (gh->cmd == CTRL_CMD_DELFAMILY) {
			e->nl.family = -1;	/* its groups went with it */
			e->family_gone = true;
		}
		e->dirty = true;
		return NL_OK;
	}
	if (e->nl.family >= 0 && nh->nlmsg_type == e->nl.family &&
	    gh->cmd == GPUSLEEP_CMD_STATE_NTF) {
		struct nlattr *tb[GPUSLEEP_A_MAX + 1];
		uint32_t state;

		if (genlmsg_parse(nh, 0, tb, GPUSLEEP_A_MAX, gs_nl_policy) ||
		    !tb[GPUSLEEP_A_ID])
			return NL_OK;
		state = gs_attr_u32(tb, GPUSLEEP_A_STATE);
		if (state != gs_attr_u32(tb, GPUSLEEP_A_FROM_STATE))
			seen_transition(e, gs_attr_u32(tb, GPUSLEEP_A_ID),
					gs_state_name(state));
		if (state == GPUSLEEP_S_DEAD &&
		    gs_attr_u32(tb, GPUSLEEP_A_FROM_STATE) != GPUSLEEP_S_DEAD) {
			e->x.deaths++;
			if (gs_attr_u32(tb, GPUSLEEP_A_RELEASED))
				e->x.deaths_released++;
		}
		e->dirty = true;
	}
	/* a reclaim's end: counted by result, its bytes summed */
	if (e->nl.family >= 0 && nh->nlmsg_type == e->nl.family &&
	    gh->cmd == GPUSLEEP_CMD_RECLAIM_NTF) {
		struct nlattr *tb[GPUSLEEP_A_MAX + 1];

		if (genlmsg_parse(nh, 0, tb, GPUSLEEP_A_MAX, gs_nl_policy) ||
		    gs_attr_u32(tb, GPUSLEEP_A_ARB_PHASE) != GPUSLEEP_ARB_END)
			return NL_OK;
		if (gs_attr_u32(tb, GPUSLEEP_A_REASON) == GPUSLEEP_R_NONE)
			e->x.reclaims_taken++;
		else
			e->x.reclaims_short++;
		e->x.reclaimed_bytes += gs_attr_u64(tb, GPUSLEEP_A_TAKEN_BYTES);
		e->dirty = true;
	}
	/* a lease taken or returned: sysfs says which domains it holds */
	if (e->nl.family >= 0 && nh->nlmsg_type == e->nl.family &&
	    gh->cmd == GPUSLEEP_CMD_LEASE_NTF)
		e->dirty = true;
	return NL_OK;
}

static void exp_join(struct exporter *e)
{
	const char *what;
	int r;

	e->rejoin = false;
	if (!e->nl_ok || e->nl.family >= 0)
		return;
	r = gs_nl_join(&e->nl, &what);
	if (!r)
		e->family_gone = false;
	else if (r != -NLE_OBJ_NOTFOUND)
		exp_err(e, "netlink %s: %s%s", what, nl_geterror(r),
			r == -NLE_PERM ? " (joining takes CAP_NET_ADMIN over the network namespace; the metrics come from sysfs at each interval)" : "");
	if (r)
		e->nl.family = -1;	/* not joined: try again later */
	e->dirty = true;
}

static int exp_netlink(struct exporter *e)
{
	int r;

	r = gs_nl_connect(&e->nl);
	if (r) {
		errmsg("netlink: connect: %s", nl_geterror(r));
		return r;
	}
	nl_socket_modify_cb(e->nl.evs, NL_CB_VALID, NL_CB_CUSTOM, exp_valid, e);
	nl_socket_set_nonblocking(e->nl.evs);
	nl_socket_set_buffer_size(e->nl.evs, 1 << 20, 0);
	e->ctrl_grp = genl_ctrl_resolve_grp(e->nl.req, "nlctrl", "notify");
	if (e->ctrl_grp >= 0)
		r = nl_socket_add_membership(e->nl.evs, e->ctrl_grp);
	if (e->ctrl_grp < 0 || r)
		errmsg("netlink: nlctrl notify: %s; module loads are seen at the next interval",
		       nl_geterror(e->ctrl_grp < 0 ? e->ctrl_grp : r));
	e->nl_ok = true;
	e->nl.family = -1;
	exp_join(e);
	return 0;
}

/*
 * The kernel's uevents, group 1 (readable without privilege): -1 when the
 * socket cannot be had (the timer then covers domain creation).
 */
static int uevent_open(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			NETLINK_KOBJECT_UEVENT);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Drain the uevent socket; a gpusleep device came or went: rewrite. */
static void uevent_recv(struct exporter *e, int fd)
{
	static const char key[] = "SUBSYSTEM=" "gpusleep";
	char buf[8192];
	ssize_t n, o;

	while ((n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = '\0';
		/* "ACTION@DEVPATH\0KEY=VALUE\0..." */
		for (o = 0; o < n; o += (ssize_t)strlen(buf + o) + 1)
			if (!strcmp(buf + o, key))
				e->dirty = true;
	}
	if (n < 0 && errno == ENOBUFS)
		e->dirty = true;	/* some were lost: read sysfs anyway */
}

/* Read every queued event; 0, or -1 when the socket failed for good. */
static int exp_recv(struct exporter *e)
{
	int r;

	for (;;) {
		r = nl_recvmsgs_default(e->nl.evs);
		if (r == -NLE_AGAIN)
			return 0;
		if (r == -NLE_NOMEM) {
			/* ENOBUFS: events were lost; sysfs has the state. */
			e->x.lost++;
			e->dirty = true;
			continue;
		}
		if (r < 0 && r != -NLE_INTR) {
			errmsg("netlink: receive: %s", nl_geterror(r));
			return -1;
		}
	}
}

int exporter_run(const char *dir, bool once, unsigned int interval_s)
{
	struct itimerspec its = { { interval_s, 0 }, { interval_s, 0 } };
	struct exporter e = { .dir = dir, .ctrl_grp = -1, .once = once };
	struct epoll_event ev, evs[4];
	struct signalfd_siginfo si;
	int sfd = -1, tfd = -1, ufd = -1, ep = -1, ret = EX_FAILED, i, nev;
	uint64_t ticks;
	sigset_t mask;

	e.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (e.dirfd < 0) {
		errmsg("--textfile %s: %s", dir, strerror(errno));
		return errno == ENOENT ? EX_NOTFOUND :
		       errno == EACCES ? EX_PERM : EX_FAILED;
	}
	remove_stale(&e);
	if (once) {
		ret = exp_write(&e);
		ret = ret ? errno_exit(-ret) : EX_OK;
		goto out;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || tfd < 0 || ep < 0 ||
	    timerfd_settime(tfd, 0, &its, NULL)) {
		errmsg("signalfd/timerfd/epoll: %s", strerror(errno));
		goto out;
	}
	if (exp_netlink(&e))
		goto out;
	ev.events = EPOLLIN;
	ev.data.fd = sfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	ev.data.fd = tfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	ev.data.fd = nl_socket_get_fd(e.nl.evs);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev)) {
		errmsg("epoll_ctl: %s", strerror(errno));
		goto out;
	}
	ufd = uevent_open();
	if (ufd < 0) {
		errmsg("uevent socket: %s; new domains show at the next interval",
		       strerror(errno));
	} else {
		ev.data.fd = ufd;
		epoll_ctl(ep, EPOLL_CTL_ADD, ufd, &ev);
	}
	exp_write(&e);

	for (;;) {
		nev = epoll_wait(ep, evs, 4, -1);
		if (nev < 0 && errno == EINTR)
			continue;
		if (nev < 0) {
			errmsg("epoll_wait: %s", strerror(errno));
			goto out;
		}
		for (i = 0; i < nev; i++) {
			int fd = evs[i].data.fd;

			if (fd == sfd) {
				while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo != SIGHUP) {
						ret = EX_OK;
						goto out;
					}
					e.dirty = true;
				}
			} else if (fd == tfd) {
				if (read(tfd, &ticks, sizeof(ticks)) < 0 &&
				    errno != EAGAIN)
					continue;
				if (e.nl.family < 0)
					exp_join(&e);
				e.dirty = true;
			} else if (fd == ufd) {
				uevent_recv(&e, ufd);
			} else if (exp_recv(&e)) {
				goto out;
			}
		}
		if (e.rejoin)
			exp_join(&e);
		if (e.dirty)
			exp_write(&e);
	}
out:
	if (e.nl_ok)
		gs_nl_close(&e.nl);
	if (ep >= 0)
		close(ep);
	if (ufd >= 0)
		close(ufd);
	if (tfd >= 0)
		close(tfd);
	if (sfd >= 0)
		close(sfd);
	free(e.seen);
	free(e.leases);
	close(e.dirfd);
	return ret;
}
