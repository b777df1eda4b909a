// SPDX-License-Identifier: GPL-2.0
/*
 * A multi-process fuzzer: engines, agents and controllers of several
 * domains as separate processes; random valid and invalid ioctls, grants
 * (valid and not) whose fds are used and closed, netlink commands (GET do
 * and dump, RELEASE, RESUME, malformed requests) from a netlink
 * controller, groups of the domains (created, ranks added, released,
 * resumed and waited for, blocking or not, closed mid-operation so that
 * the kernel finishes a rollback alone) from a group controller, tenants
 * (agents' reports valid and not, engines' priorities and consent),
 * reclaims and leases on the slots' GPU from a claimant (blocking or
 * not, short deadlines, leases returned, closed or dying with it),
 * a host budget that comes and goes, random
 * SIGKILLs of every role, eventfds closed and registered again, injected
 * faults; for GS_FUZZ_SECONDS (60 by default), seeded by GS_FUZZ_SEED (the
 * seed is printed for replay). Afterwards every surviving domain's state
 * must be what its agent confirmed (a pause whose answer was lost counts
 * as released, unconfirmed), and nothing may be stuck; the VM
 * runner then checks the kernel log and that the module unloads.
 */
#define _GNU_SOURCE
#include <sys/eventfd.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include "kselftest_harness.h"
#include "gs_nl.h"

#define SLOTS		4
#define CONTROLLERS	4	/* by ioctl; then one netlink, one group */
#define NR_CTL		(CONTROLLERS + 3)
#define ROLE_CTL	2
#define ROLE_NL		3
#define ROLE_GROUP	4
#define ROLE_ARB	5

/* The GPU every slot's agent reports its domain on. */
static const uint8_t fuzz_gpu[16] = { 0xf0, 0x22, 3, 4, 5, 6, 7, 8, 9,
				      10, 11, 12, 13, 14, 15, 16 };

struct slot {
	volatile uint32_t id;		/* current domain, 0 while none */
	volatile pid_t engine, agent;
	volatile uint32_t confirmed;	/* tags the agent got accepted */
	volatile uint32_t inflight;	/* a tag whose answer is under way */
	volatile uint32_t generation;	/* bumped with each new domain */
};

struct shared {
	struct slot slot[SLOTS];
	volatile unsigned long ops, bad_inputs, answers;
	volatile unsigned long group_ops;	/* group operations started */
	volatile unsigned long reclaims;	/* reclaims started */
};

static struct shared *sh;

static unsigned int rnd(unsigned int *seed, unsigned int n)
{
	return n ? rand_r(seed) % n : 0;
}

/*
 * The engine grants an fd (mostly a controller's; never an agent's, which
 * would take the agent's place), uses it a little and closes it.
 */
static void engine_grant(int e, unsigned int *seed)
{
	static const uint32_t roles[] = {
		GPUSLEEP_ROLE_CONTROLLER, GPUSLEEP_ROLE_CONTROLLER,
		GPUSLEEP_ROLE_ENGINE, 0, 77,
	};
	struct gpusleep_grant g;
	struct gpusleep_op op;
	int fd, efd;

	memset(&g, 0, sizeof(g));
	g.role = roles[rnd(seed, 5)];
	if (!rnd(seed, 8))
		g.flags = 1 + rnd(seed, 8);
	if (!rnd(seed, 8))
		g.reserved[rnd(seed, 2)] = 1;
	fd = ioctl(e, GPUSLEEP_IOC_GRANT, &g);
	if (fd < 0)
		return;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd >= 0 && rnd(seed, 2))
		gs_eventfd(fd, efd, GPUSLEEP_EFD_ALL);
	memset(&op, 0, sizeof(op));
	op.tags = rnd(seed, 4);
	op.flags = GPUSLEEP_OPF_NONBLOCK;
	ioctl(fd, rnd(seed, 2) ? GPUSLEEP_IOC_RELEASE : GPUSLEEP_IOC_RESUME,
	      &op);
	if (efd >= 0)
		close(efd);
	close(fd);
}

/* Engine of slot s: creates the domain, answers (mostly) with success. */
static void engine_main(int s, unsigned int seed)
{
	struct gpusleep_event ev;
	uint32_t id = 0;
	int dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	int e, r;

	if (dev < 0)
		_exit(2);
	do {
		/* shared: its agent is another process */
		e = gs_create_flags(dev, "fuzz", GPUSLEEP_CAP_PREFIX_CACHING |
				    GPUSLEEP_CAP_PREFIX_CACHE_RESET,
				    GPUSLEEP_CREATEF_SHARED, &id);
	} while (e == -EFAULT || e == -ENOMEM || e == -EMFILE);
	if (e < 0)
		_exit(3);
	sh->slot[s].confirmed = 0;
	sh->slot[s].inflight = 0;
	sh->slot[s].id = id;
	__sync_fetch_and_add(&sh->slot[s].generation, 1);
	for (;;) {
		if (!rnd(&seed, 8))
			engine_grant(e, &seed);
		if (!rnd(&seed, 16)) {	/* its statement, valid or not */
			struct gpusleep_tenant_set t = {
				.priority = (int)rnd(&seed, 12) - 8,
				.flags = rnd(&seed, 3),
			};

			ioctl(e, GPUSLEEP_IOC_SET_TENANT, &t);
		}
		r = gs_next(e, &ev, 1000);
		if (r == -ETIMEDOUT || r == -EFAULT || r == -EINTR)
			continue;
		if (r)
			_exit(0);
		if (!gs_needs_answer(ev.type))
			continue;
		switch (rnd(&seed, 20)) {
		case 0:		/* never answer: the step times out */
			continue;
		case 1:
			gs_answer(e, &ev, -EIO, 0);
			continue;
		case 2:
			usleep(rnd(&seed, 5000));
			break;
		}
		gs_answer(e, &ev, 0, 0);
		__sync_fetch_and_add(&sh->answers, 1);
	}
}

/* A report of the agent's tags, mostly valid, on the fuzz GPU. */
static void agent_report(int a, unsigned int *seed)
{
	struct gpusleep_report r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	memcpy(r.gpu_uuid, fuzz_gpu, 16);
	r.nr_tags = 2;
	for (i = 0; i < 2; i++) {
		r.tags[i].size_bytes = (1 + rnd(seed, 64)) << 20;
		r.tags[i].mapped_bytes = rnd(seed, 4) ? r.tags[i].size_bytes :
					 0;
		r.tags[i].policy = rnd(seed, 2);
		if (r.tags[i].policy == GPUSLEEP_POLICY_BACKUP) {
			r.tags[i].content = GPUSLEEP_CONTENT_KEPT;
			r.tags[i].host_bytes = rnd(seed, 2) << 20;
			r.tags[i].flags = rnd(seed, 2);
		}
	}
	r.process_bytes = rnd(seed, 1000);
	r.process_source = r.process_bytes ? 1 + rnd(seed, 2) : 0;
	if (!rnd(seed, 8)) {	/* bad input: refused, the report stays */
		r.nr_tags = rnd(seed, 4);
		r.tags[rnd(seed, 8)].pad = rnd(seed, 2);
		r.flags = rnd(seed, 2);
		__sync_fetch_and_add(&sh->bad_inputs, 1);
	}
	ioctl(a, GPUSLEEP_IOC_REPORT, &r);
}

/* Agent of slot s: records what the kernel accepted in shared memory. */
static void agent_main(int s, uint32_t id, unsigned int seed)
{
	struct slot *sl = &sh->slot[s];
	struct gpusleep_event ev;
	int dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	int a, r, status;
	uint64_t bytes;

	if (dev < 0)
		_exit(2);
	do {
		a = gs_attach(dev, id, GPUSLEEP_ROLE_AGENT);
	} while (a == -EFAULT || a == -ENOMEM || a == -EMFILE);
	if (a < 0)
		_exit(0);	/* the domain died already */
	agent_report(a, &seed);
	for (;;) {
		if (!rnd(&seed, 4))
			agent_report(a, &seed);
		r = gs_next(a, &ev, 1000);
		if (r == -ETIMEDOUT || r == -EFAULT || r == -EINTR)
			continue;
		if (r)
			_exit(0);
		if (!gs_needs_answer(ev.type))
			continue;
		status = 0;
		bytes = GS_TAG_BYTES(ev.tags);
		switch (rnd(&seed, 30)) {
		case 0:
			continue;	/* no answer: agent timeout */
		case 3:
			/* A restored backup that fails its checksum. */
			if (ev.type == GPUSLEEP_EV_RESUME_TAG) {
				status = -EBADMSG;
				bytes = 0;
			}
			break;
		case 1:
			/*
			 * A failed step: rolled back (no bytes), or, for a
			 * pause, with that much left unmapped (bytes): the
			 * tag then stays released.
			 */
			status = -ENOMEM;
			if (rnd(&seed, 2))
				bytes = 0;
			break;
		case 2:
			usleep(rnd(&seed, 5000));
			break;
		}
		/* A kill between the answer and the record is allowed for. */
		sl->inflight = ev.tags;
		r = gs_answer(a, &ev, status, bytes);
		if (!r && ev.type == GPUSLEEP_EV_PAUSE_TAG && (!status || bytes))
			sl->confirmed |= ev.tags;
		else if (!r && ev.type == GPUSLEEP_EV_RESUME_TAG && !status)
			sl->confirmed &= ~ev.tags;
		sl->inflight = 0;
		__sync_fetch_and_add(&sh->answers, 1);
	}
}

static const unsigned long cmds[] = {
	GPUSLEEP_IOC_API, GPUSLEEP_IOC_CREATE_DOMAIN, GPUSLEEP_IOC_ATTACH,
	GPUSLEEP_IOC_RELEASE, GPUSLEEP_IOC_RESUME, GPUSLEEP_IOC_IS_SLEEPING,
	GPUSLEEP_IOC_GET_STATE, GPUSLEEP_IOC_WAIT, GPUSLEEP_IOC_EVENTFD,
	GPUSLEEP_IOC_COMPLETE, GPUSLEEP_IOC_REPORT, GPUSLEEP_IOC_SET_TENANT,
	GPUSLEEP_IOC_GET_TENANT, GPUSLEEP_IOC_RECLAIM,
	GPUSLEEP_IOC_RECLAIM_WAIT, GPUSLEEP_IOC_LEASE_INFO,
};

#define NR_CMDS	ARRAY_SIZE(cmds)

/* One random call: returns 1 if it was a deliberately bad input. */
static int random_call(int dev, int ctl, int *efds, unsigned int *seed)
{
	unsigned char buf[512];
	struct gpusleep_op op;
	unsigned int i, pick = rnd(seed, 12);
	int fd = rnd(seed, 4) ? ctl : dev;

	switch (pick) {
	case 0:		/* garbage struct for a real command */
		for (i = 0; i < sizeof(buf); i++)
			buf[i] = rnd(seed, 256);
		ioctl(fd, cmds[rnd(seed, NR_CMDS)], buf);
		return 1;
	case 1:		/* unknown command or wrong size */
		ioctl(fd, _IOC(rnd(seed, 4), GPUSLEEP_IOC_MAGIC,
			       rnd(seed, 64), rnd(seed, 300)), buf);
		return 1;
	case 2:		/* a bad pointer */
		ioctl(fd, cmds[rnd(seed, NR_CMDS)],
		      (void *)(uintptr_t)rnd(seed, 4096));
		return 1;
	case 3:		/* eventfd churn */
		i = rnd(seed, 3);
		if (efds[i] >= 0 && rnd(seed, 2)) {
			close(efds[i]);
			efds[i] = -1;
		} else if (efds[i] < 0) {
			efds[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		}
		gs_eventfd(ctl, rnd(seed, 4) ? efds[i] : -1,
			   efds[i] >= 0 ? 1 + rnd(seed, 3) : 0);
		return 0;
	case 4:
		gs_wait(ctl, rnd(seed, 2) ? 0 : rnd(seed, 50), 1 + rnd(seed, 50),
			NULL);
		return 0;
	case 5:
		ioctl(ctl, GPUSLEEP_IOC_IS_SLEEPING, 0);
		return 0;
	case 6: {
		struct gpusleep_state st;

		gs_state(ctl, &st);
		return 0;
	}
	default:	/* a well-formed release or resume */
		memset(&op, 0, sizeof(op));
		op.tags = rnd(seed, 4);
		op.flags = rnd(seed, 4);
		op.timeout_ms = rnd(seed, 3) ? 0 : 1 + rnd(seed, 200);
		if (pick % 2) {
			op.flags &= GPUSLEEP_OPF_RELEASE_MASK;
			ioctl(ctl, GPUSLEEP_IOC_RELEASE, &op);
		} else {
			op.flags &= GPUSLEEP_OPF_RESUME_MASK;
			ioctl(ctl, GPUSLEEP_IOC_RESUME, &op);
		}
		return 0;
	}
}

static void controller_main(unsigned int seed)
{
	int dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	int efds[3] = { -1, -1, -1 };
	int ctl = -1, n = 0;

	if (dev < 0)
		_exit(2);
	for (;;) {
		if (ctl < 0 || !rnd(&seed, 50)) {
			if (ctl >= 0)
				close(ctl);
			ctl = gs_attach(dev, sh->slot[rnd(&seed, SLOTS)].id,
					GPUSLEEP_ROLE_CONTROLLER);
			if (ctl < 0) {
				usleep(1000);
				continue;
			}
		}
		if (random_call(dev, ctl, efds, &seed))
			__sync_fetch_and_add(&sh->bad_inputs, 1);
		__sync_fetch_and_add(&sh->ops, 1);
		if (!(++n % 64))
			sched_yield();
	}
}

/* A dump of every domain, read to its end (or an error, or a bound). */
static void nl_dump(int sk, uint16_t family)
{
	struct nlmsghdr *nh;
	char buf[NL_BUF];
	struct nl_req r;
	int n, done = 0;

	nl_init(&r, family, GPUSLEEP_CMD_GET, NLM_F_DUMP);
	if (nl_send(sk, &r))
		return;
	while (!done) {
		n = nl_recv(sk, buf, sizeof(buf));
		if (n <= 0)
			return;
		for (nh = (void *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n))
			if (nh->nlmsg_type == NLMSG_DONE ||
			    nh->nlmsg_type == NLMSG_ERROR)
				done = 1;
	}
}

/*
 * The netlink controller: GET do (a live or a random id) and dump,
 * RELEASE and RESUME with random tags, flags and timeouts, and requests
 * with random attributes or commands. Returns only if the family is gone.
 */
static void nl_main(unsigned int seed)
{
	char out[NL_BUF];
	struct nl_req r;
	uint16_t family;
	uint32_t group, id, v;
	int sk = nl_open(), i, n;

	if (sk < 0 || nl_resolve(sk, &family, &group))
		_exit(2);
	for (;;) {
		id = rnd(&seed, 8) ? sh->slot[rnd(&seed, SLOTS)].id :
				     rnd(&seed, 100000);
		switch (rnd(&seed, 6)) {
		case 0:
			nl_get(sk, family, id, out, sizeof(out));
			break;
		case 1:
			nl_dump(sk, family);
			break;
		case 2:		/* malformed: random attributes, sizes, command */
			nl_init(&r, family, rnd(&seed, 8), 0);
			n = rnd(&seed, 6);
			for (i = 0; i < n; i++) {
				v = rand_r(&seed);
				nl_put(&r, rnd(&seed, GPUSLEEP_A_MAX + 3), &v,
				       rnd(&seed, 5));
			}
			nl_call(sk, &r, NULL, 0);
			break;
		default:	/* a well-formed release or resume */
			nl_init(&r, family, rnd(&seed, 2) ?
				GPUSLEEP_CMD_RELEASE : GPUSLEEP_CMD_RESUME, 0);
			nl_put_u32(&r, GPUSLEEP_A_ID, id);
			if (rnd(&seed, 2))
				nl_put_u32(&r, GPUSLEEP_A_TAGS, rnd(&seed, 4));
			if (rnd(&seed, 2))
				nl_put_u32(&r, GPUSLEEP_A_OP_FLAGS,
					   rnd(&seed, 4));
			if (rnd(&seed, 2))
				nl_put_u32(&r, GPUSLEEP_A_TIMEOUT_MS,
					   rnd(&seed, 300));
			nl_call(sk, &r, out, sizeof(out));
			break;
		}
		__sync_fetch_and_add(&sh->ops, 1);
		if (!rnd(&seed, 16))
			usleep(1000);
	}
}

/* A fresh group named after this process and n, with 1-3 random ranks. */
static int group_new(int dev, unsigned int *seed, unsigned int n)
{
	struct gpusleep_group_create c;
	struct gpusleep_group_add a;
	int g, fd, i, ranks = 1 + rnd(seed, 3);

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "fz%d-%u", getpid(), n);
	g = ioctl(dev, GPUSLEEP_IOC_CREATE_GROUP, &c);
	if (g < 0)
		return -1;
	for (i = 0; i < ranks; i++) {
		fd = gs_attach(dev, sh->slot[rnd(seed, SLOTS)].id,
			       GPUSLEEP_ROLE_CONTROLLER);
		if (fd < 0)
			continue;
		memset(&a, 0, sizeof(a));
		a.fd = fd;
		if (!rnd(seed, 16))
			a.flags = 1;	/* bad input: refused, nothing added */
		ioctl(g, GPUSLEEP_IOC_GROUP_ADD, &a);
		close(fd);
	}
	return g;
}

/*
 * The group controller: groups over the slots' domains (a domain is in
 * one group at most, so most adds of a busy domain are refused), random
 * group releases and resumes, mostly non-blocking, sometimes blocking
 * with a short deadline; waits for random operations; eventfds; garbage;
 * and the group fd closed at any moment, in flight or not.
 */
static void group_main(unsigned int seed)
{
	struct gpusleep_group_rank ranks[4];
	struct gpusleep_group_wait w;
	struct gpusleep_group_op o;
	unsigned char buf[256];
	int dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	int g = -1, efd = -1;
	unsigned int n = 0, i;

	if (dev < 0)
		_exit(2);
	for (;;) {
		if (g < 0 || !rnd(&seed, 40)) {
			if (g >= 0)
				close(g);	/* perhaps mid-operation */
			g = group_new(dev, &seed, n++);
			if (g < 0) {
				usleep(1000);
				continue;
			}
		}
		switch (rnd(&seed, 7)) {
		case 0:
		case 1:
		case 2:
			memset(&o, 0, sizeof(o));
			o.tags = rnd(&seed, 4);
			o.flags = rnd(&seed, 4) ? GPUSLEEP_OPF_NONBLOCK : 0;
			o.timeout_ms = rnd(&seed, 3) ? 0 : 1 + rnd(&seed, 300);
			if (!o.flags && !o.timeout_ms)
				o.timeout_ms = 1 + rnd(&seed, 300);
			ioctl(g, rnd(&seed, 2) ? GPUSLEEP_IOC_GROUP_RELEASE :
				 GPUSLEEP_IOC_GROUP_RESUME, &o);
			if (o.op_id)
				__sync_fetch_and_add(&sh->group_ops, 1);
			break;
		case 3:
			memset(&w, 0, sizeof(w));
			w.op_id = rnd(&seed, 2) ? 0 : rnd(&seed, 64);
			w.timeout_ms = 1 + rnd(&seed, 100);
			if (rnd(&seed, 2)) {
				w.ranks = (uintptr_t)ranks;
				w.nr_ranks = 1 + rnd(&seed, 4);
				w.rank_size = sizeof(ranks[0]);
			}
			ioctl(g, GPUSLEEP_IOC_GROUP_WAIT, &w);
			break;
		case 4: {	/* eventfd on the group, or cleared */
			struct gpusleep_eventfd e = {
				.fd = -1, .events = GPUSLEEP_EFD_ALL,
			};

			if (efd < 0)
				efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (rnd(&seed, 3))
				e.fd = efd;
			ioctl(g, GPUSLEEP_IOC_GROUP_EVENTFD, &e);
			break;
		}
		case 5:		/* garbage for a group command */
			for (i = 0; i < sizeof(buf); i++)
				buf[i] = rnd(&seed, 256);
			ioctl(g, rnd(&seed, 2) ? GPUSLEEP_IOC_GROUP_RELEASE :
				 GPUSLEEP_IOC_GROUP_WAIT, buf);
			__sync_fetch_and_add(&sh->bad_inputs, 1);
			break;
		default: {	/* another fd for this group, by name */
			struct gpusleep_group_create c;
			int fd;

			memset(&c, 0, sizeof(c));
			snprintf(c.name, sizeof(c.name), "fz%d-%u", getpid(),
				 n - 1);
			fd = ioctl(dev, GPUSLEEP_IOC_OPEN_GROUP, &c);
			if (fd >= 0)
				close(fd);
			break;
		}
		}
		__sync_fetch_and_add(&sh->ops, 1);
		if (!rnd(&seed, 8))
			usleep(1000);
	}
}

/*
 * The claimant: reclaims on the slots' GPU, valid and not, blocking with
 * a short deadline or not, most with a lease; RECLAIM_WAIT by id and for
 * its newest; its leases looked at, returned (blocking or not) or closed
 * at any moment, and held when it is killed.
 */
static void arb_main(unsigned int seed)
{
	struct gpusleep_reclaim_victim v[4];
	struct gpusleep_reclaim r;
	struct gpusleep_lease li;
	int dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	int leases[4] = { -1, -1, -1, -1 };
	unsigned char buf[256];
	unsigned int i, k;
	int fd;

	if (dev < 0)
		_exit(2);
	for (;;) {
		k = rnd(&seed, 4);
		switch (rnd(&seed, 6)) {
		case 0:
		case 1:
			memset(&r, 0, sizeof(r));
			memcpy(r.gpu_uuid, fuzz_gpu, 16);
			r.bytes = (1 + rnd(&seed, 128)) << 20;
			r.priority = -(int)rnd(&seed, 4);
			r.flags = rnd(&seed, 16) &
				  ~(unsigned int)GPUSLEEP_RECLAIMF_NONBLOCK;
			r.flags |= rnd(&seed, 4) ? GPUSLEEP_RECLAIMF_NONBLOCK : 0;
			r.timeout_ms = rnd(&seed, 2) ? 1 + rnd(&seed, 500) : 0;
			if (!(r.flags & GPUSLEEP_RECLAIMF_NONBLOCK) &&
			    !r.timeout_ms)
				r.timeout_ms = 1 + rnd(&seed, 500);
			r.victims = (uintptr_t)v;
			r.nr_victims = rnd(&seed, 5);
			r.victim_size = sizeof(v[0]);
			fd = ioctl(dev, GPUSLEEP_IOC_RECLAIM, &r);
			if (r.op_id)
				__sync_fetch_and_add(&sh->reclaims, 1);
			if (fd >= 0 && (r.flags & GPUSLEEP_RECLAIMF_LEASE)) {
				if (leases[k] >= 0)
					close(leases[k]);
				leases[k] = fd;
			}
			break;
		case 2:
			memset(&r, 0, sizeof(r));
			r.op_id = rnd(&seed, 2) ? 0 : rnd(&seed, 64);
			r.timeout_ms = 1 + rnd(&seed, 50);
			ioctl(dev, GPUSLEEP_IOC_RECLAIM_WAIT, &r);
			break;
		case 3:
			if (leases[k] < 0)
				break;
			memset(&li, 0, sizeof(li));
			li.victims = (uintptr_t)v;
			li.nr_victims = rnd(&seed, 5);
			li.victim_size = sizeof(v[0]);
			ioctl(leases[k], GPUSLEEP_IOC_LEASE_INFO, &li);
			if (rnd(&seed, 2))
				ioctl(leases[k], GPUSLEEP_IOC_LEASE_RETURN,
				      rnd(&seed, 3) ?
				      GPUSLEEP_LEASE_RETURN_NONBLOCK : 0);
			break;
		case 4:
			if (leases[k] >= 0) {
				close(leases[k]);
				leases[k] = -1;
			}
			break;
		default:	/* garbage for the arbiter's commands */
			for (i = 0; i < sizeof(buf); i++)
				buf[i] = rnd(&seed, 256);
			ioctl(dev, rnd(&seed, 2) ? GPUSLEEP_IOC_RECLAIM :
			      GPUSLEEP_IOC_RECLAIM_WAIT, buf);
			__sync_fetch_and_add(&sh->bad_inputs, 1);
			break;
		}
		__sync_fetch_and_add(&sh->ops, 1);
		if (!rnd(&seed, 4))
			usleep(1000);
	}
}

static pid_t spawn_fn(int role, int s, unsigned int seed)
{
	pid_t pid = fork();

	if (pid)
		return pid;
	if (role == 0)
		engine_main(s, seed);
	else if (role == 1)
		agent_main(s, sh->slot[s].id, seed);
	else if (role == ROLE_CTL)
		controller_main(seed);
	else if (role == ROLE_NL)
		nl_main(seed);
	else if (role == ROLE_ARB)
		arb_main(seed);
	else
		group_main(seed);
	_exit(0);
}

static int ctl_role(int i)
{
	return i < CONTROLLERS ? ROLE_CTL :
	       i == CONTROLLERS ? ROLE_NL :
	       i == CONTROLLERS + 1 ? ROLE_GROUP : ROLE_ARB;
}

/* Leases held now (their returns resume domains), or -1. */
static int leases_held(void)
{
	char buf[32] = "";
	int fd = open("/sys/class/gpusleep/leases", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : -1;
}

/* Start slot s: an engine (which creates the domain), then its agent. */
static void start_slot(int s, unsigned int *seed)
{
	uint32_t gen = sh->slot[s].generation;
	int i;

	sh->slot[s].id = 0;
	sh->slot[s].engine = spawn_fn(0, s, rand_r(seed));
	for (i = 0; i < 2000 && sh->slot[s].generation == gen; i++)
		usleep(1000);
	sh->slot[s].agent = spawn_fn(1, s, rand_r(seed));
}

static void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static int alive(pid_t pid)
{
	return pid > 0 && kill(pid, 0) == 0 &&
	       waitpid(pid, NULL, WNOHANG) == 0;
}

/* Any live slot's domain with an operation in flight? */
static int busy(int dev)
{
	struct gpusleep_state st;
	int i, c, b = 0;

	for (i = 0; i < SLOTS && !b; i++) {
		if (!alive(sh->slot[i].engine) || !alive(sh->slot[i].agent))
			continue;
		c = gs_attach(dev, sh->slot[i].id, GPUSLEEP_ROLE_CONTROLLER);
		if (c < 0)
			continue;
		b = gs_state(c, &st) == 0 && st.op_in_flight;
		close(c);
	}
	return b;
}

/*
 * A group whose fd died with its controller finishes alone: a rank may
 * be quiet between its release and the rollback's resume. Settled is
 * quiet on every domain twice, half a second apart (bounded).
 */
static void settle(int dev)
{
	int quiet = 0, tries;

	for (tries = 0; tries < 120 && quiet < 2; tries++) {
		/* A lease given back by its dead holder resumes its victims. */
		quiet = busy(dev) || leases_held() > 0 ? 0 : quiet + 1;
		usleep(500000);
	}
}

FIXTURE(fuzz) {
	int unused;
};

FIXTURE_SETUP(fuzz)
{
}

FIXTURE_TEARDOWN(fuzz)
{
}

/* The run takes GS_FUZZ_SECONDS plus settling; the bound is generous. */
TEST_F_TIMEOUT(fuzz, processes, 900)
{
	const char *s_secs = getenv("GS_FUZZ_SECONDS");
	const char *s_seed = getenv("GS_FUZZ_SEED");
	unsigned int secs = s_secs ? atoi(s_secs) : 60;
	unsigned int seed = s_seed ? strtoul(s_seed, NULL, 0) : time(NULL);
	unsigned long kills = 0, faults = 0, checked = 0;
	char old_drain[32], old_step[32];
	pid_t ctl[NR_CTL];
	time_t end;
	int i, dev;

	dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		SKIP(return, "%s: %s (module not loaded)", GS_DEV, strerror(errno));
	TH_LOG("seed %u (GS_FUZZ_SEED=%u repeats its choices), %u s", seed, seed, secs);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	/* Short timeouts, so that unanswered steps end within the run. */
	gs_param_set("drain_timeout_ms", "300", old_drain, sizeof(old_drain));
	gs_param_set("step_timeout_ms", "300", old_step, sizeof(old_step));

	for (i = 0; i < SLOTS; i++)
		start_slot(i, &seed);
	for (i = 0; i < NR_CTL; i++)
		ctl[i] = spawn_fn(ctl_role(i), 0, rand_r(&seed));

	end = time(NULL) + secs;
	while (time(NULL) < end) {
		int s = rnd(&seed, SLOTS);

		usleep(20000 + rnd(&seed, 80000));
		reap_all();
		switch (rnd(&seed, 8)) {
		case 0:		/* kill an engine: its domain dies */
			kill(sh->slot[s].engine, SIGKILL);
			kill(sh->slot[s].agent, SIGKILL);
			kills += 2;
			reap_all();
			start_slot(s, &seed);
			break;
		case 1:		/* kill an agent, attach a new one */
			kill(sh->slot[s].agent, SIGKILL);
			kills++;
			waitpid(sh->slot[s].agent, NULL, 0);
			sh->slot[s].inflight = 0;
			sh->slot[s].agent = spawn_fn(1, s, rand_r(&seed));
			break;
		case 2:		/* kill a controller (the last: netlink's) */
			i = rnd(&seed, NR_CTL);
			kill(ctl[i], SIGKILL);
			kills++;
			waitpid(ctl[i], NULL, 0);
			ctl[i] = spawn_fn(ctl_role(i), 0,
					  rand_r(&seed));
			break;
		case 3:	/* arm a fault somewhere ahead (a fault build) */
			if (gs_fault_arm(1 + rnd(&seed, 200)) == 0)
				faults++;
			break;
		case 4:	/* a host budget comes, or goes */
			gs_param_set("host_budget_bytes",
				     rnd(&seed, 2) ? "0" : "67108864", NULL, 0);
			break;
		default:
			/* An agent that exited (its domain died) is replaced
			 * together with its engine. */
			if (!alive(sh->slot[s].agent) ||
			    !alive(sh->slot[s].engine)) {
				kill(sh->slot[s].engine, SIGKILL);
				kill(sh->slot[s].agent, SIGKILL);
				reap_all();
				start_slot(s, &seed);
			}
			break;
		}
	}

	/* Stop the controllers and the fault; let the domains settle. */
	for (i = 0; i < NR_CTL; i++) {
		kill(ctl[i], SIGKILL);
		waitpid(ctl[i], NULL, 0);
	}
	gs_fault_off();
	gs_param_set("host_budget_bytes", "0", NULL, 0);
	settle(dev);
	for (i = 0; i < SLOTS; i++) {
		struct slot *sl = &sh->slot[i];
		struct gpusleep_state st;
		int c, tries;

		if (!alive(sl->engine) || !alive(sl->agent))
			continue;
		c = gs_attach(dev, sl->id, GPUSLEEP_ROLE_CONTROLLER);
		if (c < 0)
			continue;
		/* Bounded: every step has a 300 ms deadline. */
		for (tries = 0; tries < 200; tries++) {
			ASSERT_EQ(0, gs_state(c, &st));
			if (!st.op_in_flight && !sl->inflight)
				break;
			usleep(50000);
		}
		EXPECT_EQ(0, st.op_in_flight);
		/* A pause whose answer was lost counts released, unconfirmed. */
		if ((st.released & ~st.unconfirmed) != sl->confirmed)
			TH_LOG("slot %d domain %u: released %#x (unconfirmed %#x), agent confirmed %#x",
			       i, sl->id, st.released, st.unconfirmed,
			       sl->confirmed);
		EXPECT_EQ(sl->confirmed, st.released & ~st.unconfirmed);
		EXPECT_EQ(0, st.unconfirmed & ~st.released);
		EXPECT_EQ(st.released ? GPUSLEEP_S_RELEASED : GPUSLEEP_S_AWAKE,
			  st.state);
		checked++;
		close(c);
	}
	for (i = 0; i < SLOTS; i++) {
		kill(sh->slot[i].engine, SIGKILL);
		kill(sh->slot[i].agent, SIGKILL);
	}
	while (wait(NULL) > 0)
		;
	gs_param_set("drain_timeout_ms", old_drain, NULL, 0);
	gs_param_set("step_timeout_ms", old_step, NULL, 0);
	TH_LOG("ops %lu (group operations started %lu, reclaims %lu), bad inputs %lu, answers %lu, kills %lu, faults armed %lu, domains checked %lu",
	       sh->ops, sh->group_ops, sh->reclaims, sh->bad_inputs,
	       sh->answers, kills, faults, checked);
	EXPECT_LT(0, sh->ops);
	EXPECT_LT(0, sh->group_ops);
	EXPECT_LT(0, sh->reclaims);
	EXPECT_EQ(0, leases_held());
	close(dev);
}

TEST_HARNESS_MAIN
