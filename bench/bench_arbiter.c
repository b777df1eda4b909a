// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 9: the arbiter (docs/arbiter.md): a reclaim and a lease's
 * return against the same work issued by the caller.
 *
 * Three engine processes (fork and exec, as a launcher starts them), each
 * an engine (gs_engine, drain answered at once) with its agent thread over
 * a host-backend gs_mm whose kv_cache tag (DISCARD) holds KV_MIB MiB: the
 * memory a trainer wants back. This process is the claimant and the
 * controller. One cycle of each kind:
 *   lease     RECLAIM with LEASE of 2.5 x KV_MIB MiB on the host GPU,
 *             discard-kind tags only: the module picks the three engines
 *             (their KV caches, one after another) and answers once the
 *             bytes came free [acquire]; then LEASE_RETURN, blocking until
 *             every engine it took is resumed [return]
 *   caller    the same three KV releases issued by the caller, blocking,
 *             one after another, in the order the reclaim took them
 *             [release]; then their resumes, the same way [resume]
 * The kinds alternate in blocks. 9a: acquire / release, target <= 1.1:
 * what choosing the victims and driving them costs over the caller's own
 * releases. 9b: return / resume, target <= 1.1: the time from a lease's
 * end to every engine awake, against explicit resumes. A reclaim that
 * comes short says what it tried (stderr) and ends the benchmark.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define ENGINES	3	/* on the GPU */
#define TAKEN	3	/* of them, the claim needs */
#define KV_MIB	4
#define BLOCK	5
#define KV	GPUSLEEP_TAG_KV_CACHE

static int drain_now(struct gs_engine *e, void *arg, uint32_t tags, bool ab)
{
	(void)e; (void)arg; (void)tags; (void)ab;
	return 0;
}

/* One engine: its KV cache in the memory manager, its agent reporting. */
static int engine_main(int id_w, int quit_r, int k)
{
	static const struct gs_engine_ops ops = { .drain = drain_now };
	struct gs_engine_config cfg = { .gpu = "host",
					.flags = GPUSLEEP_CREATEF_SHARED };
	char name[32];
	struct gs_engine *e;
	struct gs_agent *a;
	struct gs_mm *mm;
	uint32_t id;
	void *kv;

	snprintf(name, sizeof(name), "bench_arb%d", k);
	cfg.name = name;
	bn_ck(gs_engine_create(&cfg, &ops, NULL, &e), "engine create");
	id = gs_engine_id(e);
	bn_ck(gs_mm_new(gs_backend_host_new(), &mm), "mm");
	bn_ck(gs_mm_set_policy(mm, GPUSLEEP_TAG_WEIGHTS, GS_MM_BACKUP, 0),
	      "policy");
	bn_ck(gs_mm_set_policy(mm, KV, GS_MM_DISCARD, KV_MIB << 20), "policy");
	kv = gs_mm_alloc(mm, KV, KV_MIB << 20);
	if (!kv)
		bn_die("kv alloc: %m");
	memset(kv, 0x5a, KV_MIB << 20);
	bn_ck(gs_agent_attach(NULL, id, mm, &a), "agent attach");
	bn_ck(gs_agent_start(a), "agent start");	/* reports its tags */
	if (write(id_w, &id, sizeof(id)) != sizeof(id))
		return 1;
	if (bn_engine_serve(e, quit_r))
		return 1;
	gs_agent_stop(a);
	gs_agent_destroy(a);
	gs_mm_destroy(mm);
	gs_engine_destroy(e);
	return 0;
}

static int dev, ctl[ENGINES], order[ENGINES];
static uint32_t ids[ENGINES];
static uint8_t gpu[16];
static uint64_t want;

/* The reclaim's victims as indexes into ids[], in the order taken. */
static void victims_order(const struct gpusleep_reclaim_victim *v,
			  uint32_t n)
{
	if (n != TAKEN)
		bn_die("the reclaim took %u domains, not %d (first: %u tags %#x freed %llu)",
		       n, TAKEN, n ? v[0].domain : 0, n ? v[0].tags : 0,
		       n ? (unsigned long long)v[0].freed_bytes : 0ULL);
	for (uint32_t i = 0; i < n; i++) {
		int k;

		for (k = 0; k < ENGINES && ids[k] != v[i].domain; k++)
			;
		if (k == ENGINES || v[i].tags != KV)
			bn_die("victim %u: domain %u tags %#x", i, v[i].domain,
			       v[i].tags);
		order[i] = k;
	}
}

static void lease_cycle(double *acq, double *ret)
{
	struct gpusleep_reclaim_victim v[GPUSLEEP_RECLAIM_MAX_VICTIMS];
	uint32_t n = GPUSLEEP_RECLAIM_MAX_VICTIMS;
	struct gpusleep_reclaim r;
	uint64_t t = bn_now();
	int lfd;

	lfd = gs_reclaim(dev, gpu, want, 0, GPUSLEEP_RECLAIMF_LEASE |
			 GPUSLEEP_RECLAIMF_DISCARD_ONLY, 0, &r, v, &n);
	if (lfd < 0) {
		char why[128];

		gs_rwhy_format(r.why, why, sizeof(why));
		for (uint32_t i = 0; i < n; i++)
			fprintf(stderr, "bench: victim %u: domain %u tags %#x freed %llu flags %#x error %d reason %u\n",
				i, v[i].domain, v[i].tags,
				(unsigned long long)v[i].freed_bytes, v[i].flags,
				v[i].error, v[i].reason);
		bn_die("reclaim of %llu bytes: %s (took %llu; %s)",
		       (unsigned long long)want, strerror(-lfd),
		       (unsigned long long)r.taken_bytes, why);
	}
	*acq = (double)(bn_now() - t);
	victims_order(v, n);
	t = bn_now();
	if (bn_ck(gs_lease_return(lfd, false), "lease return"))
		bn_die("the lease's return left domains released");
	*ret = (double)(bn_now() - t);
	close(lfd);
}

static void caller_cycle(double *rel, double *res)
{
	uint64_t t = bn_now();
	int i;

	for (i = 0; i < TAKEN; i++)
		bn_ck(gs_release(ctl[order[i]], KV, 0, 0, NULL), "release");
	*rel = (double)(bn_now() - t);
	t = bn_now();
	for (i = 0; i < TAKEN; i++)
		bn_ck(gs_resume(ctl[order[i]], KV, 0, 0, NULL), "resume");
	*res = (double)(bn_now() - t);
}

/*
 * The caller's controller fds, attached for a block of caller cycles and
 * closed before the next reclaim (outside the timed part): the claimant
 * holds none while it reclaims, as a trainer holding no controller would.
 */
static void ctl_open(void)
{
	for (int e = 0; e < ENGINES; e++)
		ctl[e] = bn_ck(gs_attach(dev, ids[e], GPUSLEEP_ROLE_CONTROLLER),
			       "attach");
}

static void ctl_close(void)
{
	for (int e = 0; e < ENGINES; e++)
		close(ctl[e]);
}

/* Until every engine's agent reported its KV cache (sysfs gpu_uuid). */
static void wait_reports(void)
{
	struct gpusleep_tenant t;

	for (int i = 0; i < ENGINES; i++)
		for (;;) {
			bn_ck(gs_get_tenant(ctl[i], &t), "get tenant");
			if (t.report.nr_tags &&
			    t.report.tags[1].mapped_bytes >= (KV_MIB << 20)) {
				if (memcmp(t.report.gpu_uuid, gpu, 16))
					bn_die("engine %d reports another GPU", i);
				break;
			}
			usleep(10000);
		}
}

int main(int argc, char **argv)
{
	unsigned int cycles = bn_reps(60, 10), i, b, n = 0;
	double *acq, *ret, *rel, *res, m[4];
	int id_p[2], quit_p[2], st;
	pid_t pid[ENGINES];
	struct bn_json j;

	/* an engine, started by the claimant (fork and exec, as a launcher) */
	if (argc == 5 && !strcmp(argv[1], "--engine"))
		return engine_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	signal(SIGPIPE, SIG_IGN);
	if (pipe(id_p) || pipe(quit_p))
		bn_die("pipe: %m");
	bn_ck(gs_host_gpu_uuid(0, gpu), "host gpu uuid");
	/* the engines first: none inherits the claimant's fds */
	for (int e = 0; e < ENGINES; e++) {
		pid[e] = fork();
		if (pid[e] < 0)
			bn_die("fork: %m");
		if (!pid[e]) {
			char a[3][16];

			close(quit_p[1]);
			snprintf(a[0], sizeof(a[0]), "%d", id_p[1]);
			snprintf(a[1], sizeof(a[1]), "%d", quit_p[0]);
			snprintf(a[2], sizeof(a[2]), "%d", e);
			execl("/proc/self/exe", argv[0], "--engine", a[0], a[1],
			      a[2], (char *)NULL);
			_exit(127);
		}
		if (read(id_p[0], &ids[e], sizeof(ids[e])) != sizeof(ids[e]))
			bn_die("engine %d did not start", e);
	}
	dev = bn_ck(gs_open(NULL, GPUSLEEP_FEAT_TENANTS, NULL),
		    "open (a module with tenants)");
	ctl_open();
	close(quit_p[0]);
	wait_reports();
	ctl_close();
	/* more than two KV caches: the three are needed */
	want = (uint64_t)(KV_MIB << 20) * 5 / 2;
	acq = bn_xcalloc(cycles, sizeof(double));
	ret = bn_xcalloc(cycles, sizeof(double));
	rel = bn_xcalloc(cycles, sizeof(double));
	res = bn_xcalloc(cycles, sizeof(double));
	lease_cycle(&acq[0], &ret[0]);	/* warm up; learns the order */
	ctl_open();
	caller_cycle(&rel[0], &res[0]);
	ctl_close();
	for (i = 0; i < cycles; i += BLOCK) {
		b = cycles - i < BLOCK ? cycles - i : BLOCK;
		for (unsigned int k = 0; k < b; k++)
			lease_cycle(&acq[n + k], &ret[n + k]);
		ctl_open();
		for (unsigned int k = 0; k < b; k++)
			caller_cycle(&rel[n + k], &res[n + k]);
		ctl_close();
		n += b;
	}
	m[0] = bn_median(acq, n);
	m[1] = bn_median(rel, n);
	m[2] = bn_median(ret, n);
	m[3] = bn_median(res, n);

	bn_json_begin(&j, "9a", "acquire N bytes held by 3 engines vs the same releases one by one",
		      m[0] / m[1], 1.1, "max");
	bn_json_median(&j, "acquire", m[0]);
	bn_json_median(&j, "caller_releases", m[1]);
	bn_json_size(&j, "engines", ENGINES);
	bn_json_size(&j, "taken", TAKEN);
	bn_json_size(&j, "kv_mib", KV_MIB);
	bn_json_size(&j, "cycles", n);
	bn_json_end(&j, "RECLAIM with LEASE, discard-kind only, taking the 3 engines' KV caches, vs 3 blocking RELEASEs in the reclaim's order");
	bn_json_begin(&j, "9b", "lease's end to every engine awake vs explicit resumes",
		      m[2] / m[3], 1.1, "max");
	bn_json_median(&j, "lease_return", m[2]);
	bn_json_median(&j, "caller_resumes", m[3]);
	bn_json_size(&j, "taken", TAKEN);
	bn_json_size(&j, "cycles", n);
	bn_json_end(&j, "LEASE_RETURN (blocking until every resume ended) vs 3 blocking RESUMEs");

	close(quit_p[1]);
	close(dev);
	for (int e = 0; e < ENGINES; e++)
		waitpid(pid[e], &st, 0);
	free(acq);
	free(ret);
	free(rel);
	free(res);
	return 0;
}
