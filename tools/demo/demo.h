/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tools/demo: what the demo engine and the demo trainer share.
 *
 * The two processes talk over a UNIX stream socket (the engine listens):
 * the trainer sends a struct demo_req, the engine answers with a struct
 * demo_rep. Weights are pushed through a memfd the trainer passes once
 * (SCM_RIGHTS with DEMO_MEMFD): the trainer writes one bucket into it, then
 * DEMO_PUSH tells the engine to copy it into its weights at an offset.
 *
 * The weights of version v are the words demo_word(v, i), so both sides
 * can produce and check them independently.
 */
#ifndef GPUSLEEP_DEMO_H
#define GPUSLEEP_DEMO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define DEMO_MiB		(1ULL << 20)

enum demo_cmd {
	DEMO_HELLO = 1,	/* -> v[DEMO_V_PID], [DEMO_V_DOMAIN], sizes */
	DEMO_STATS,	/* -> the counters below */
	DEMO_MEMFD,	/* a: bucket size; the fd rides along (SCM_RIGHTS) */
	DEMO_PUSH,	/* a: weights offset, b: length (<= bucket) */
	DEMO_COMMIT,	/* a: version: check all weights, serve it from now */
	DEMO_VERIFY,	/* a: version: check all weights hold it */
	DEMO_QUIT,	/* -> final counters; status: the engine's verdict */
};

/* Indexes of struct demo_rep.v (DEMO_HELLO, DEMO_STATS, DEMO_QUIT). */
enum demo_val {
	DEMO_V_PID,
	DEMO_V_DOMAIN,
	DEMO_V_WEIGHTS_BYTES,
	DEMO_V_KV_BYTES,
	DEMO_V_VERSION,		/* weights version being served */
	DEMO_V_INFLIGHT,	/* requests in flight */
	DEMO_V_COMPLETED,	/* requests finished */
	DEMO_V_ABORTED,		/* requests aborted by an abort drain */
	DEMO_V_PREFIX_HITS,
	DEMO_V_PAUSED,		/* 1 while scheduling is paused */
	DEMO_V_BACKUP_BYTES,	/* host staging of the weights backup */
	DEMO_V_DRAINS,		/* callbacks run: drain */
	DEMO_V_RESETS,		/* reset_caches */
	DEMO_V_REPAIRS,		/* repair_kv (successful) */
	DEMO_V_RESUMES,		/* resume_sched */
	DEMO_V_ERRORS,		/* wrong weights / stale prefix / KV not zero */
	DEMO_V_AGENT_PAUSES,
	DEMO_V_AGENT_RESUMES,
	DEMO_V_AGENT_FAILURES,
	DEMO_V_CANCELS,		/* drain_cancelled */
	DEMO_V_DRAIN_WAITED,	/* requests the last drain waited for */
	DEMO_NR_V = 24
};

struct demo_req {
	uint32_t cmd;
	uint32_t pad;
	uint64_t a, b;
};

struct demo_rep {
	int32_t status;		/* 0 or -errno */
	uint32_t pad;
	uint64_t v[DEMO_NR_V];
	char msg[160];		/* why, when status != 0 */
};

/* Word i of the weights of version v (splitmix64 of both). */
static inline uint64_t demo_word(uint64_t v, uint64_t i)
{
	uint64_t z = v * 0xd1b54a32d192ed03ULL + i + 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* VmRSS of a process (pid 0 = self) in bytes; 0 if unreadable. */
static inline uint64_t demo_rss(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kib = 0;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib * 1024;
}

#endif /* GPUSLEEP_DEMO_H */
