// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: acquire, reclaim, leases (docs/arbiter.md).
 *
 *   acquire --gpu GPU --size N [-- COMMAND...]   a lease held while
 *            COMMAND runs (its exit status is ours), or until SIGINT /
 *            SIGTERM; given back, every engine resumed, before exiting
 *   reclaim --gpu GPU --size N                   taken for good
 *   leases                                       the leases holding tags
 *
 * A GPU is a UUID ("GPU-...", "MIG-...", the 8-4-4-4-12 hex sysfs
 * gpu_uuid shows), a CUDA ordinal ("0", "cuda:0"), "host[:N]" (the host
 * backend's stand-in) or "domain:NAME" (the GPU a domain's agent
 * reports).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#include "domain.h"
#include "gpusleepctl.h"
#include "libgpusleep.h"
#include "output.h"

/* --size: bytes, with an optional K, M, G, T (powers of 1024, "GiB"). */
static int parse_size(const char *arg, uint64_t *v)
{
	unsigned long long n;
	unsigned int shift = 0;
	char *end;

	errno = 0;
	n = strtoull(arg, &end, 10);
	if (errno || end == arg || arg[0] == '-')
		goto bad;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	}
	if (shift && (!strcasecmp(end, "iB") || !strcasecmp(end, "B")))
		end += strlen(end);
	if (*end || !n || (shift && n > (ULLONG_MAX >> shift)))
		goto bad;
	*v = (uint64_t)n << shift;
	return 0;
bad:
	errmsg("--size %s: want a number of bytes > 0, with K, M, G or T for KiB, MiB, GiB, TiB (40G)",
	       arg);
	return -1;
}

/* --gpu: see the file's comment. 0, or an exit status after saying why. */
static int parse_gpu(const char *arg, uint8_t uuid[16])
{
	char path[PATH_MAX], buf[64];
	unsigned long n;
	uint32_t id;
	char *end;
	FILE *f;
	int r;

	if (!strncmp(arg, "domain:", 7)) {
		r = resolve(arg + 7, &id);
		if (r)
			return r;
		snprintf(path, sizeof(path), "%s/domain%u/gpu_uuid",
			 sysfs_root, id);
		f = fopen(path, "re");
		if (!f || !fgets(buf, sizeof(buf), f)) {
			if (f)
				fclose(f);
			errmsg("--gpu %s: the domain shows no GPU (%s): a module without tenants",
			       arg, path);
			return EX_NOTFOUND;
		}
		fclose(f);
		buf[strcspn(buf, "\n")] = 0;
		if (!buf[0] || gs_gpu_uuid_parse(buf, uuid)) {
			errmsg("--gpu %s: its agent has not reported its GPU yet",
			       arg);
			return EX_NOTFOUND;
		}
		return 0;
	}
	if (isdigit((unsigned char)arg[0]) || !strncmp(arg, "cuda:", 5)) {
		const char *s = arg[0] == 'c' ? arg + 5 : arg;

		errno = 0;
		n = strtoul(s, &end, 10);
		if (!errno && !*end && end != s && n < 1024) {
			r = gs_cuda_device_uuid((int)n, getenv("GPUSLEEP_CUDA_LIB"),
						uuid);
			if (r) {
				errmsg("--gpu %s: CUDA device %lu: %s (no NVIDIA driver here? give the GPU's UUID, or host for the host backend)",
				       arg, n, strerror(-r));
				return EX_NOTFOUND;
			}
			return 0;
		}
	}
	if (gs_gpu_uuid_parse(arg, uuid)) {
		errmsg("--gpu %s: not a GPU: a UUID (GPU-..., MIG-...), a CUDA ordinal (0, cuda:0), host[:N] or domain:NAME",
		       arg);
		return EX_USAGE;
	}
	return 0;
}

/* The names of bits of domain id's declaration (sysfs "tags"). */
static void tag_names(uint32_t id, uint32_t bits, char *buf, size_t len)
{
	struct domain d;
	char name[GPUSLEEP_TAG_NAME_LEN];
	size_t off = 0;

	buf[0] = 0;
	if (domain_load(id, &d))
		d.tags[0] = 0;
	for (unsigned int i = 0; i < 32 && off + 1 < len; i++) {
		if (!(bits & (1U << i)))
			continue;
		if (list_item(d.tags, i, name, sizeof(name)))
			snprintf(name, sizeof(name), "0x%x", 1U << i);
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					off ? "," : "", name);
	}
}

static void victim_out(struct out *o, const struct gpusleep_reclaim_victim *v)
{
	char name[64], tags[160], fl[160], sz[32];

	domain_name(v->domain, name, sizeof(name));
	tag_names(v->domain, v->tags, tags, sizeof(tags));
	gs_rvf_format(v->flags, fl, sizeof(fl));
	out_obj_open(o, NULL);
	out_domain(o, "domain", "  %s:", v->domain, name);
	out_tags(o, "tags", " %s", tags);
	out_size(o, "freed_bytes", NULL, v->freed_bytes);
	out_text(o, ", %s freed%s", fmt_size(v->freed_bytes, true, sz,
					     sizeof(sz)),
		 v->flags & GPUSLEEP_RVF_UNMEASURED ? " (unmeasured)" : "");
	out_u64(o, "op_id", NULL, v->op_id);
	if (v->group)
		out_u64(o, "group", " (group %llu)", v->group);
	out_tags(o, "flags", fl[0] ? " [%s]" : NULL, fl);
	if (v->reason || v->error) {
		char r[32];

		reason_lower(v->reason, r, sizeof(r));
		out_s64(o, "error", NULL, v->error);
		out_str(o, "reason", " %s", r);
	}
	if (v->resume_op_id) {
		char r[32];

		reason_lower(v->resume_reason, r, sizeof(r));
		out_u64(o, "resume_op_id", NULL, v->resume_op_id);
		out_s64(o, "resume_error", NULL, v->resume_error);
		out_str(o, "resume_reason", v->resume_reason ?
			", resume %s" : NULL, r);
	}
	out_text(o, "\n");
	out_obj_close(o);
}

static void reclaim_out(struct out *o, const char *what,
			const struct gpusleep_reclaim *r,
			const struct gpusleep_reclaim_victim *v, uint32_t n)
{
	char why[160], uuid[GS_GPU_UUID_LEN], reason[32];

	gs_rwhy_format(r->why, why, sizeof(why));
	gs_gpu_uuid_format(r->gpu_uuid, uuid, sizeof(uuid));
	reason_lower(r->reason, reason, sizeof(reason));
	out_obj_open(o, NULL);
	out_str(o, "kind", NULL, what);
	out_u64(o, "op_id", "reclaim %llu", r->op_id);
	if (r->lease_id)
		out_u64(o, "lease_id", ", lease %llu", r->lease_id);
	out_str(o, "gpu", " on %s", uuid);
	out_size(o, "taken_bytes", ": took %s", r->taken_bytes);
	out_size(o, "bytes", " of %s", r->bytes);
	out_s64(o, "priority", " at priority %lld", r->priority);
	out_str(o, "reason", NULL, reason);
	out_tags(o, "why", r->why ? " (short: %s)" : NULL, why);
	out_text(o, "\n");
	out_arr_open(o, "victims");
	for (uint32_t i = 0; i < n; i++)
		victim_out(o, &v[i]);
	out_arr_close(o);
	out_obj_close(o);
	out_end_line(o);
}

/* A failed RECLAIM: an exit status, after saying why. */
static int reclaim_failed(int ret, const struct gpusleep_reclaim *r,
			  int32_t prio)
{
	char why[160];

	jerr.err = ret;
	if (ret == -ENOSPC) {
		gs_rwhy_format(r->why, why, sizeof(why));
		jerr.reason = "shortfall";
		errmsg("reclaim %llu: short: took %llu of %llu bytes (%s); nothing kept (--partial keeps what was taken)",
		       (unsigned long long)r->op_id,
		       (unsigned long long)r->taken_bytes,
		       (unsigned long long)r->bytes, why[0] ? why : "no reason");
		return EX_FAILED;
	}
	if (ret == -EPERM) {
		errmsg("priority %d: above 0 needs CAP_SYS_NICE (as nice(2)): run with sudo, or claim at 0 or below",
		       prio);
		return EX_PERM;
	}
	if (ret == -ENOTTY || ret == -EINVAL)
		errmsg("reclaim: %s (a module without tenants? gpusleep API %d)",
		       strerror(-ret), GPUSLEEP_API_VERSION);
	else
		errmsg("reclaim: %s", strerror(-ret));
	return ret == -ENOTTY ? EX_FAILED : errno_exit(-ret);
}

static const char acquire_usage[] =
	"Usage: gpusleepctl acquire -g|--gpu GPU -s|--size N [-P|--priority P]\n"
	"           [-T|--timeout S] [--partial] [--discard-only] [-j] [-p]\n"
	"           [-- COMMAND [ARGS...]]\n"
	"Take N bytes (K, M, G, T suffixes) of device memory on GPU from the\n"
	"tenants below priority P (default 0; above 0 needs CAP_SYS_NICE) and\n"
	"hold them in a lease while COMMAND runs (exit status: COMMAND's), or\n"
	"without COMMAND until SIGINT or SIGTERM; then give them back: every\n"
	"domain the lease took is resumed before gpusleepctl exits.\n"
	"GPU: a UUID (GPU-..., MIG-...), a CUDA ordinal (0, cuda:0), host[:N]\n"
	"(the host backend) or domain:NAME (the GPU that domain reports).\n"
	"Short of N bytes: exit 1, nothing held (--partial: hold what came).\n";

static const char reclaim_usage[] =
	"Usage: gpusleepctl reclaim -g|--gpu GPU -s|--size N [-P|--priority P]\n"
	"           [-T|--timeout S] [--partial] [--discard-only] [-j] [-p]\n"
	"Take N bytes of device memory on GPU from the tenants below priority\n"
	"P for good: the domains taken stay released until resumed\n"
	"(gpusleepctl resume). As acquire otherwise.\n";

struct claim {
	uint8_t uuid[16];
	uint64_t size;
	int32_t prio;
	uint32_t flags, timeout_ms;
	int argi;		/* COMMAND's index in argv, 0: none */
};

static int parse_claim(int argc, char **argv, const char *usage, bool lease,
		       struct claim *c)
{
	static const struct option opts[] = {
		{ "gpu", required_argument, NULL, 'g' },
		{ "size", required_argument, NULL, 's' },
		{ "priority", required_argument, NULL, 'P' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "partial", no_argument, NULL, 'a' },
		{ "discard-only", no_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "bytes", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *gpu = NULL;
	unsigned long secs;
	long prio;
	char *end;
	int ch, r;

	memset(c, 0, sizeof(*c));
	optind = 0;
	while ((ch = getopt_long(argc, argv, "+g:s:P:T:jph", opts, NULL)) != -1) {
		switch (ch) {
		case 'g':
			gpu = optarg;
			break;
		case 's':
			if (parse_size(optarg, &c->size))
				return EX_USAGE;
			break;
		case 'P':
			errno = 0;
			prio = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg ||
			    prio < GPUSLEEP_PRIO_MIN || prio > GPUSLEEP_PRIO_MAX) {
				errmsg("--priority %s: want %d..%d", optarg,
				       GPUSLEEP_PRIO_MIN, GPUSLEEP_PRIO_MAX);
				return EX_USAGE;
			}
			c->prio = (int32_t)prio;
			break;
		case 'T':
			if (parse_timeout(optarg, UINT32_MAX / 1000, &secs))
				return EX_USAGE;
			c->timeout_ms = (uint32_t)(secs * 1000);
			break;
		case 'a':
			c->flags |= GPUSLEEP_RECLAIMF_PARTIAL;
			break;
		case 'd':
			c->flags |= GPUSLEEP_RECLAIMF_DISCARD_ONLY;
			break;
		case 'j':
			opt_json = true;
			break;
		case 'p':
			opt_bytes = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(EX_OK);
		default:
			fputs(usage, stderr);
			return EX_USAGE;
		}
	}
	if (!gpu || !c->size) {
		errmsg("%s", !gpu ? "--gpu GPU is needed" : "--size N is needed");
		fputs(usage, stderr);
		return EX_USAGE;
	}
	if (optind < argc) {
		if (!lease || strcmp(argv[optind - 1], "--")) {
			errmsg("unexpected argument '%s'%s", argv[optind],
			       lease ? " (a command goes after --)" : "");
			return EX_USAGE;
		}
		c->argi = optind;
	}
	if (lease)
		c->flags |= GPUSLEEP_RECLAIMF_LEASE;
	r = parse_gpu(gpu, c->uuid);
	return r;
}

/* Run argv[0] with the lease held: its exit status (128 + a signal). */
static int run_command(char **argv, const sigset_t *old)
{
	siginfo_t si;
	sigset_t set;
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		errmsg("fork: %s", strerror(errno));
		return EX_FAILED;
	}
	if (!pid) {
		sigprocmask(SIG_SETMASK, old, NULL);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s: %s\n", prog, argv[0], strerror(errno));
		_exit(127);
	}
	/* SIGINT, SIGTERM go to the command; its end ends the lease */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	for (;;) {
		if (sigwaitinfo(&set, &si) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (si.si_signo != SIGCHLD) {
			kill(pid, si.si_signo);
			continue;
		}
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			       128 + WTERMSIG(st);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Until SIGINT, SIGTERM or SIGHUP. */
static void hold(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	while (sigwait(&set, &sig))
		;
}

/* Give the lease back, print what its return did; 0 or EX_FAILED. */
static int give_back(struct out *o, int lfd, uint64_t id)
{
	struct gpusleep_reclaim_victim v[GPUSLEEP_RECLAIM_MAX_VICTIMS];
	struct gpusleep_lease l;
	uint32_t n = GPUSLEEP_RECLAIM_MAX_VICTIMS;
	int left, r;

	left = gs_lease_return(lfd, false);
	while (left == -EINTR)	/* the return goes on: wait for its end */
		left = gs_lease_return(lfd, false);
	if (left < 0) {
		errmsg("lease %llu: giving it back: %s", (unsigned long long)id,
		       strerror(-left));
		return EX_FAILED;
	}
	r = gs_lease_info(lfd, &l, v, &n);
	out_obj_open(o, NULL);
	out_str(o, "kind", NULL, "returned");
	out_u64(o, "lease_id", "lease %llu given back", id);
	out_u64(o, "still_released", NULL, (uint64_t)left);
	out_text(o, left ? ": %d domain(s) still released (their resume failed):\n" :
		 ": every domain resumed\n", left);
	out_arr_open(o, "victims");
	for (uint32_t i = 0; !r && i < n; i++)
		victim_out(o, &v[i]);
	out_arr_close(o);
	out_obj_close(o);
	out_end_line(o);
	if (left)
		errmsg("lease %llu: %d domain(s) left released: resume them (gpusleepctl resume DOMAIN) once the GPU has room",
		       (unsigned long long)id, left);
	return left ? EX_FAILED : EX_OK;
}

static int claim_cmd(int argc, char **argv, bool lease)
{
	struct gpusleep_reclaim_victim v[GPUSLEEP_RECLAIM_MAX_VICTIMS];
	uint32_t n = GPUSLEEP_RECLAIM_MAX_VICTIMS;
	struct gpusleep_reclaim r;
	sigset_t set, old;
	struct claim c;
	struct out o;
	int dev, ret, st, back;

	ret = parse_claim(argc, argv, lease ? acquire_usage : reclaim_usage,
			  lease, &c);
	if (ret)
		return ret;
	/* signals wait for us from now: none cuts the lease's return */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	dev = gs_open(dev_path, 0, NULL);
	if (dev < 0)
		return dev_open_failed(-dev);
	ret = gs_reclaim(dev, c.uuid, c.size, c.prio, c.flags, c.timeout_ms,
			 &r, v, &n);
	close(dev);
	if (ret < 0) {
		if (r.lease_fd >= 0)
			close(r.lease_fd);
		if (ret == -ENOSPC && n) {
			out_init(&o, stderr, false);
			for (uint32_t i = 0; i < n; i++)
				victim_out(&o, &v[i]);
		}
		return reclaim_failed(ret, &r, c.prio);
	}
	out_init(&o, stdout, opt_json);
	reclaim_out(&o, lease ? "acquired" : "reclaimed", &r, v, n);
	jerr.printed = true;
	if (!lease)
		return EX_OK;
	fflush(stdout);
	st = EX_OK;
	if (c.argi)
		st = run_command(argv + c.argi, &old);
	else
		hold();
	back = give_back(&o, r.lease_fd, r.lease_id);
	close(r.lease_fd);
	return st ? st : back;
}

int cmd_acquire(int argc, char **argv)
{
	return claim_cmd(argc, argv, true);
}

int cmd_reclaim(int argc, char **argv)
{
	return claim_cmd(argc, argv, false);
}

static const char leases_usage[] =
	"Usage: gpusleepctl leases [-j|--json]\n"
	"The leases holding some domain's tags (sysfs lease_id, leased_tags):\n"
	"per lease, the domains it took and their tags.\n";

int cmd_leases(int argc, char **argv)
{
	struct domain *ds;
	struct out o;
	size_t n, i, j;
	int r;

	if (parse_json_opt(argc, argv, leases_usage))
		return EX_USAGE;
	if (optind != argc) {
		fputs(leases_usage, stderr);
		return EX_USAGE;
	}
	r = all_domains(&ds, &n);
	if (r)
		return r;
	out_init(&o, stdout, opt_json);
	out_arr_open(&o, NULL);
	if (!o.json)
		printf("%-6s %-6s %-20s %s\n", "LEASE", "ID", "NAME", "TAGS");
	/* by lease id, each lease once, its domains in id order */
	for (i = 0; i < n; i++) {
		uint64_t id = ds[i].lease_id;
		bool dup = false;

		if (!(ds[i].present & (1ULL << FLD_lease_id)) || !id)
			continue;
		for (j = 0; j < i && !dup; j++)
			dup = ds[j].lease_id == id;
		if (dup)
			continue;
		out_obj_open(&o, NULL);
		out_u64(&o, "lease_id", NULL, id);
		out_arr_open(&o, "domains");
		for (j = i; j < n; j++) {
			if (ds[j].lease_id != id)
				continue;
			if (!o.json)
				printf("%-6llu %-6u %-20s %s\n",
				       (unsigned long long)id, ds[j].id,
				       ds[j].name, ds[j].leased_tags[0] ?
				       ds[j].leased_tags : "-");
			out_obj_open(&o, NULL);
			out_u64(&o, "id", NULL, ds[j].id);
			out_str(&o, "name", NULL, ds[j].name);
			out_tags(&o, "leased_tags", NULL, ds[j].leased_tags);
			out_str(&o, "state", NULL, ds[j].state);
			out_obj_close(&o);
		}
		out_arr_close(&o);
		out_obj_close(&o);
	}
	out_arr_close(&o);
	if (o.json)
		out_end_line(&o);
	free(ds);
	return EX_OK;
}
