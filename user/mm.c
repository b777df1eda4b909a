// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * gs_mm: tagged allocations whose pointers stay valid across sleep.
 *
 * Each tag owns a list of chunks. A chunk is one reserved virtual range,
 * backed (mapped) as a whole by one backend allocation, and carved into
 * blocks by a first-fit allocator. Pausing a tag unmaps its chunks (after a
 * backup into the tag's staging buffer for GS_MM_BACKUP); resuming maps them
 * again at the same addresses and restores the backup. Chunks grow
 * geometrically, so a big tag is a few large backend allocations (the cost
 * of a VMM map grows with the number of physical handles).
 *
 * State kept truthful on every failure path, per chunk:
 *   mapped  the range is backed by memory now
 *   saved   the staging buffer holds this chunk's contents and its own
 *           memory does not (it was unmapped after a backup, or a restore
 *           failed): the next resume must restore it
 * and per tag: paused = some chunk is unmapped.
 *
 * The engine's GPU work: a pause fences (b->fence: cuCtxSynchronize on
 * CUDA) before its first backup copy and again before its first unmap, so
 * the backup sees what the engine's kernels wrote and nothing is unmapped
 * under them. A free never unmaps: PyTorch frees when the last reference
 * drops on the CPU, while kernels may still use the memory. An empty chunk
 * stays mapped, a cache the next allocation is carved from without any
 * driver call; empty chunks go back to the backend only at a fenced point
 * (a pause of their tag, gs_mm_trim(), gs_mm_destroy()).
 *
 * Staging (GS_MM_BACKUP): each chunk has its own pieces of pinned host
 * memory, at most GS_MM_PIN_PIECE each, pinned when the chunk is made (or
 * the tag becomes BACKUP) rather than all at once inside a pause step, and
 * kept across cycles unless GS_MM_STAGING_FREE_AFTER_RESUME.
 *
 * Verification (gs_mm_set_verify, GPUSLEEP_VERIFY=1): each copy a backup
 * queues is a segment of its chunk's staging; once the copies are
 * synchronised each segment's checksum (user/csum.c) is taken, and a
 * resume checks them all before it maps anything: a mismatch fails it
 * (-EBADMSG), nothing mapped, and marks the chunk bad: the next resume
 * maps it fresh (zeros) and says its contents were lost.
 *
 * Locking: one mutex per mm, held across a whole pause/resume/alloc/free.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libgpusleep.h"
#include "backend.h"
#include "csum.h"
#include "internal.h"

#define GS_MM_CHUNK_DEFAULT	(16UL << 20)
#define GS_MM_CHUNK_MAX		(1UL << 30)
#define GS_MM_PIN_PIECE		(256UL << 20)
/* streams remembered per chunk for the out-of-memory reclaim */
#define GS_MM_OWNERS		4
/* a pause's fence, bounded below the module's default step timeout */
#define GS_MM_FENCE_MS		25000
/* what a fence leaves of the time to a deadline, for the answer */
#define GS_MM_DEADLINE_MARGIN_MIN	(20ULL * 1000000)
#define GS_MM_DEADLINE_MARGIN_MAX	(500ULL * 1000000)

struct block {
	struct block *prev, *next;	/* address order */
	size_t off, size;
	bool used;
};

struct piece {
	void *host;		/* pinned staging, NULL until pinned */
	size_t size;
};

/* One copy of a backup (within one piece) and its checksum. */
struct seg {
	size_t off, len;	/* in the chunk, and so in its staging */
	uint64_t sum;
};

struct chunk {
	struct chunk *next;
	char *va;
	size_t size;
	void *handle;
	void *stale;		/* unmapped, its release failed: retried */
	struct piece *pieces;	/* staging: size split in GS_MM_PIN_PIECE */
	unsigned int npieces;
	bool mapped;
	bool saved;
	bool fresh;		/* mapped by the resume in progress */
	size_t used;
	unsigned int nr_allocs;
	struct block *blocks;
	/*
	 * The streams its allocations were made for (gs_mm_alloc_on; NULL:
	 * the legacy stream): what may still use it once they are freed.
	 * owners_unknown: more than GS_MM_OWNERS of them.
	 */
	void *owners[GS_MM_OWNERS];
	unsigned int nowners;
	bool owners_unknown;
	uint64_t peers_rw;	/* other devices with access when it was */
	uint64_t peers_ro;	/* last unmapped: granted again at the map */
	uint64_t carves;	/* allocations made in it, ever */
	uint64_t reclaim_at;	/* carves when a reclaim fenced its owners */
	uint64_t reclaim_id;	/* ... that reclaim, if they could be */
	/*
	 * Verification: the segments the newest backup copied (nsegs 0:
	 * not checksummed), and bad: its staging failed the check, its
	 * contents are lost (the next resume maps it fresh).
	 */
	struct seg *segs;
	unsigned int nsegs, capsegs;
	bool bad;
};

struct tag {
	enum gs_mm_policy policy;
	unsigned int staging_flags;	/* GS_MM_STAGING_* */
	size_t first_chunk;
	size_t next_chunk;
	struct chunk *chunks;		/* in creation order */
	bool paused;
	bool pausing;		/* a pause waits for the GPU, unlocked */
	bool lost;
	uint64_t pauses, resumes;
};

struct gs_mm {
	struct gs_backend *b;
	size_t gran;
	size_t chunk_gran;	/* chunk sizes are multiples (>= gran) */
	void **fence_streams;	/* declared engine streams; none: context */
	unsigned int nfence;
	unsigned int fence_ms;	/* bound of a fence; 0: none */
	uint64_t peers;		/* devices granted access to every chunk */
	uint64_t reclaims;	/* mm_reclaim() calls, numbering them */
	uint64_t pinned;	/* staging pinned now, all tags */
	uint64_t pin_limit;	/* cap on it; 0: none */
	uint64_t margin;	/* device memory a new chunk must leave free */
	bool verify;		/* checksum backups, check them at resume */
	uint64_t gen;		/* gs_mm_generation */
	int notify_efd;		/* the agent's kick, -1: none */
	pthread_mutex_t lock;
	/*
	 * The fence thread: waits for the GPU on behalf of a caller that
	 * gives up at its deadline (a fence cannot be interrupted). Requests
	 * are numbered; done is the last one answered, ret its result.
	 */
	pthread_mutex_t flock;
	pthread_cond_t fcv;
	pthread_t fthread;
	bool fthread_up, fstop;
	uint64_t fasked, fdone;
	int fret;
	void **fstreams;	/* the streams of the newest request */
	unsigned int fn;
	struct tag tags[GPUSLEEP_MAX_TAGS];
};

static int tag_index(uint32_t tag)
{
	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++)
		if (tag == (1U << i))
			return i;
	return -1;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/*
 * What the agent reports changed (under mm->lock): the generation moves
 * and the agent's thread is kicked (an eventfd write never blocks).
 */
static void mm_changed(struct gs_mm *mm)
{
	uint64_t one = 1;

	mm->gen++;
	if (mm->notify_efd >= 0 &&
	    write(mm->notify_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fprintf(stderr, "gpusleep: mm: kicking the agent: %s\n",
			strerror(errno));
}

void gs_mm_set_notify(struct gs_mm *mm, int efd)
{
	pthread_mutex_lock(&mm->lock);
	mm->notify_efd = efd;
	pthread_mutex_unlock(&mm->lock);
}

void gs_mm_clear_notify(struct gs_mm *mm, int efd)
{
	pthread_mutex_lock(&mm->lock);
	if (mm->notify_efd == efd)
		mm->notify_efd = -1;
	pthread_mutex_unlock(&mm->lock);
}

uint64_t gs_mm_generation(struct gs_mm *mm)
{
	uint64_t g;

	pthread_mutex_lock(&mm->lock);
	g = mm->gen;
	pthread_mutex_unlock(&mm->lock);
	return g;
}

int gs_mm_gpu_uuid(struct gs_mm *mm, uint8_t uuid[16])
{
	if (!mm->b->uuid)
		return -EOPNOTSUPP;
	return mm->b->uuid(mm->b, uuid);
}

/* GPUSLEEP_VERIFY: 1 (yes, true, on) or 0 (no, false, off, unset). */
static bool verify_env(void)
{
	static const char *const on[] = { "1", "yes", "true", "on" };
	static const char *const off[] = { "", "0", "no", "false", "off" };
	const char *v = getenv("GPUSLEEP_VERIFY");

	if (!v)
		return false;
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		if (!strcmp(v, on[i]))
			return true;
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (!strcmp(v, off[i]))
			return false;
	/* never a silent no-op: it was asked for, in some spelling */
	fprintf(stderr, "gpusleep: mm: GPUSLEEP_VERIFY=%s is neither 1 nor 0: backups are verified\n",
		v);
	return true;
}

int gs_mm_new(struct gs_backend *b, struct gs_mm **out)
{
	struct gs_mm *mm;
	size_t gran;

	if (!b)
		return -EINVAL;
	gran = b->granularity(b);
	if (!gran || (gran & (gran - 1))) {
		b->destroy(b);
		return -EINVAL;
	}
	mm = calloc(1, sizeof(*mm));
	if (!mm) {
		b->destroy(b);
		return -ENOMEM;
	}
	mm->b = b;
	mm->gran = gran;
	/*
	 * The device's recommended granularity sizes the chunks (and so
	 * aligns their ranges), unless it is larger than a chunk may be.
	 */
	mm->chunk_gran = b->chunk_granularity ? b->chunk_granularity(b) : 0;
	if (mm->chunk_gran < gran || (mm->chunk_gran & (mm->chunk_gran - 1)) ||
	    mm->chunk_gran > GS_MM_CHUNK_MAX)
		mm->chunk_gran = gran;
	mm->fence_ms = GS_MM_FENCE_MS;
	mm->verify = verify_env();
	mm->notify_efd = -1;
	pthread_mutex_init(&mm->lock, NULL);
	pthread_mutex_init(&mm->flock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&mm->fcv, &ca);
		pthread_condattr_destroy(&ca);
	}
	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		mm->tags[i].policy = GS_MM_DISCARD;
		mm->tags[i].first_chunk = round_up(GS_MM_CHUNK_DEFAULT,
						   mm->chunk_gran);
		mm->tags[i].next_chunk = mm->tags[i].first_chunk;
	}
	*out = mm;
	return 0;
}

static void chunk_free_blocks(struct chunk *c)
{
	struct block *bl = c->blocks, *n;

	for (; bl; bl = n) {
		n = bl->next;
		free(bl);
	}
	c->blocks = NULL;
}

/* Pin one piece of staging, within the cap; 0 or -errno. */
static int piece_pin(struct gs_mm *mm, struct piece *pc)
{
	int ret;

	if (pc->host)
		return 0;
	if (mm->pin_limit && mm->pinned + pc->size > mm->pin_limit) {
		fprintf(stderr, "gpusleep: mm: %zu bytes more of pinned backup staging would pass the host staging budget of %llu bytes (%llu pinned; GPUSLEEP_PIN_LIMIT, gs_mm_set_pin_limit): refused\n",
			pc->size, (unsigned long long)mm->pin_limit,
			(unsigned long long)mm->pinned);
		return -ENOMEM;
	}
	ret = mm->b->host_alloc(mm->b, pc->size, &pc->host);
	if (ret) {
		pc->host = NULL;
		return ret;
	}
	mm->pinned += pc->size;
	mm_changed(mm);
	return 0;
}

static void piece_unpin(struct gs_mm *mm, struct piece *pc)
{
	if (!pc->host)
		return;
	mm->b->host_free(mm->b, pc->host, pc->size);
	pc->host = NULL;
	mm->pinned -= pc->size;
	mm_changed(mm);
}

/* Give the chunk's pinned staging back (no copy may be queued on it). */
static void chunk_unpin(struct gs_mm *mm, struct chunk *c)
{
	for (unsigned int i = 0; i < c->npieces; i++)
		piece_unpin(mm, &c->pieces[i]);
}

/* Does a live allocation of c lie in piece k? */
static bool piece_live(const struct chunk *c, unsigned int k)
{
	size_t lo = (size_t)k * GS_MM_PIN_PIECE, hi = lo + c->pieces[k].size;

	for (const struct block *bl = c->blocks; bl; bl = bl->next)
		if (bl->used && bl->off < hi && bl->off + bl->size > lo)
			return true;
	return false;
}

/*
 * Pin what is missing of the staging of c's live allocations, piece by
 * piece, and (give_back: at a pause) give back the pieces that hold none:
 * cuMemFreeHost synchronises the device, which is not allowed everywhere
 * (a policy change may come during a graph capture); 0 or -errno.
 */
static int chunk_pin(struct gs_mm *mm, struct chunk *c, bool give_back)
{
	for (unsigned int i = 0; i < c->npieces; i++) {
		int ret;

		if (!piece_live(c, i)) {
			if (give_back)
				piece_unpin(mm, &c->pieces[i]);
			continue;
		}
		ret = piece_pin(mm, &c->pieces[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Pin the staging of [off, off+size) of c (a new allocation), ahead. */
static void chunk_pin_range(struct gs_mm *mm, struct chunk *c, size_t off,
			    size_t size)
{
	for (size_t k = off / GS_MM_PIN_PIECE;
	     k <= (off + size - 1) / GS_MM_PIN_PIECE && k < c->npieces; k++) {
		int ret = piece_pin(mm, &c->pieces[k]);

		if (ret) {
			fprintf(stderr, "gpusleep: mm: pinning %zu bytes of backup staging ahead of time failed (%s); the pause will try again\n",
				c->pieces[k].size, strerror(-ret));
			return;
		}
	}
}

/* Note one segment of a backup for its checksum; 0 or -ENOMEM. */
static int chunk_add_seg(struct chunk *c, size_t off, size_t len)
{
	if (c->nsegs == c->capsegs) {
		unsigned int cap = c->capsegs ? 2 * c->capsegs : 8;
		struct seg *n = realloc(c->segs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->segs = n;
		c->capsegs = cap;
	}
	c->segs[c->nsegs].off = off;
	c->segs[c->nsegs].len = len;
	c->segs[c->nsegs].sum = 0;
	c->nsegs++;
	return 0;
}

static const void *seg_host(const struct chunk *c, const struct seg *sg)
{
	size_t k = sg->off / GS_MM_PIN_PIECE;

	return (const char *)c->pieces[k].host + (sg->off - k * GS_MM_PIN_PIECE);
}

/*
 * Copy the live allocations of c to (to_host) or from its staging, each
 * run of adjacent ones at once, split at the pieces' edges: the slack and
 * the free blocks (an allocator's cache) are not copied. Queued; the
 * caller syncs. Adds the bytes queued to *copied. A backup with
 * verification on notes each copy as a segment, summed once synchronised
 * (chunk_sum_segs).
 */
static int chunk_copy(struct gs_mm *mm, struct chunk *c, bool to_host,
		      uint64_t *copied)
{
	struct gs_backend *b = mm->b;
	bool segs = to_host && mm->verify;

	for (const struct block *bl = c->blocks; bl; bl = bl->next) {
		size_t pos, end;

		if (!bl->used || (bl->prev && bl->prev->used))
			continue;	/* not the start of a run */
		end = bl->off + bl->size;
		for (const struct block *n = bl->next; n && n->used; n = n->next)
			end = n->off + n->size;
		for (pos = bl->off; pos < end; ) {
			size_t k = pos / GS_MM_PIN_PIECE;
			size_t in = pos - k * GS_MM_PIN_PIECE;
			size_t len = c->pieces[k].size - in;
			char *host = (char *)c->pieces[k].host + in;
			int ret;

			if (len > end - pos)
				len = end - pos;
			if (!c->pieces[k].host)
				return -ENOMEM;	/* not pinned: cannot be */
			if (segs) {
				ret = chunk_add_seg(c, pos, len);
				if (ret)
					return ret;
			}
			ret = to_host ? b->backup(b, host, c->va + pos, len) :
					b->restore(b, c->va + pos, host, len);
			if (ret)
				return ret;
			*copied += len;
			pos += len;
		}
	}
	return 0;
}

/*
 * Give a chunk back to the backend (its blocks are all free or abandoned).
 * The caller has fenced the engine's work, or the chunk is not mapped.
 */
static void chunk_destroy(struct gs_mm *mm, struct chunk *c)
{
	if (c->mapped)
		mm->b->unmap(mm->b, c->va, c->size, c->handle);
	if (c->stale)
		mm->b->unmap(mm->b, c->va, c->size, c->stale);
	mm->b->unreserve(mm->b, c->va, c->size);
	chunk_unpin(mm, c);
	free(c->pieces);
	free(c->segs);
	chunk_free_blocks(c);
	free(c);
	mm_changed(mm);
}

/* The checksums of the segments the backup of c copied (synchronised). */
static void chunk_sum_segs(struct chunk *c, uint64_t *bytes)
{
	for (unsigned int i = 0; i < c->nsegs; i++) {
		c->segs[i].sum = gs_csum(seg_host(c, &c->segs[i]),
					 c->segs[i].len);
		*bytes += c->segs[i].len;
	}
}

/*
 * Check the staging of c against its backup's checksums: true if it
 * matches (or was not checksummed). The first mismatch is said.
 */
static bool chunk_check_segs(struct chunk *c, uint32_t tag, uint64_t *bytes)
{
	for (unsigned int i = 0; i < c->nsegs; i++) {
		uint64_t sum = gs_csum(seg_host(c, &c->segs[i]),
				       c->segs[i].len);

		*bytes += c->segs[i].len;
		if (sum != c->segs[i].sum) {
			fprintf(stderr, "gpusleep: mm: tag %#x: the host copy of [%p, +%zu) changed since its backup (checksum %016llx, now %016llx): its contents are lost, the resume fails (EBADMSG)\n",
				tag, (void *)(c->va + c->segs[i].off),
				c->segs[i].len,
				(unsigned long long)c->segs[i].sum,
				(unsigned long long)sum);
			return false;
		}
	}
	return true;
}

/* Wait for the GPU work of the context (n = 0) or of the n streams. */
static int backend_fence(struct gs_backend *b, void *const *streams,
			 unsigned int n)
{
	if (n && b->fence_streams)
		return b->fence_streams(b, streams, n);
	return b->fence ? b->fence(b) : 0;
}

static void *fence_main(void *p)
{
	struct gs_mm *mm = p;

	pthread_mutex_lock(&mm->flock);
	for (;;) {
		uint64_t gen;
		void **st;
		unsigned int n;
		int ret;

		while (!mm->fstop && mm->fdone == mm->fasked)
			pthread_cond_wait(&mm->fcv, &mm->flock);
		if (mm->fdone == mm->fasked)
			break;		/* stopping, nothing asked */
		gen = mm->fasked;
		st = mm->fstreams;
		n = mm->fn;
		mm->fstreams = NULL;
		pthread_mutex_unlock(&mm->flock);
		ret = backend_fence(mm->b, st, n);
		free(st);
		pthread_mutex_lock(&mm->flock);
		mm->fdone = gen;
		mm->fret = ret;
		pthread_cond_broadcast(&mm->fcv);
	}
	pthread_mutex_unlock(&mm->flock);
	return NULL;
}

/*
 * Fence on the fence thread, waiting at most ms: -ETIMEDOUT then (the
 * thread goes on waiting for the GPU; a later request is answered after
 * it). Takes st (n streams; NULL, 0: the context).
 */
static int fence_bounded(struct gs_mm *mm, void **st, unsigned int n,
			 unsigned int ms)
{
	struct timespec dl;
	uint64_t mine;
	int ret = 0, wr = 0;

	pthread_mutex_lock(&mm->flock);
	if (!mm->fthread_up) {
		if (pthread_create(&mm->fthread, NULL, fence_main, mm)) {
			/* no thread: wait here, unbounded */
			pthread_mutex_unlock(&mm->flock);
			ret = backend_fence(mm->b, st, n);
			free(st);
			return ret;
		}
		mm->fthread_up = true;
	}
	free(mm->fstreams);
	mm->fstreams = st;
	mm->fn = n;
	mine = ++mm->fasked;
	pthread_cond_broadcast(&mm->fcv);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (mm->fdone < mine && wr != ETIMEDOUT)
		wr = pthread_cond_timedwait(&mm->fcv, &mm->flock, &dl);
	ret = mm->fdone >= mine ? mm->fret : -ETIMEDOUT;
	pthread_mutex_unlock(&mm->flock);
	return ret;
}

static uint64_t now_ns(void);

/*
 * The bound of a fence: fence_ms (0: none), and when the caller has a
 * deadline (CLOCK_MONOTONIC ns; 0: none, the kernel's step deadline for
 * the agent), the time left until it less a margin for the answer to
 * reach the kernel: a tenth of it, at least 20 ms and at most 500 ms.
 */
static unsigned int fence_bound_ms(const struct gs_mm *mm, uint64_t deadline)
{
	unsigned int ms = mm->fence_ms;
	uint64_t now = now_ns(), left, margin, until;

	if (!deadline)
		return ms;
	left = deadline > now ? deadline - now : 0;
	margin = left / 10;
	if (margin < GS_MM_DEADLINE_MARGIN_MIN)
		margin = GS_MM_DEADLINE_MARGIN_MIN;
	if (margin > GS_MM_DEADLINE_MARGIN_MAX)
		margin = GS_MM_DEADLINE_MARGIN_MAX;
	until = left > margin ? (left - margin) / 1000000 : 0;
	if (!until)
		until = 1;	/* nothing left: only what is done at once */
	if (!ms || until < ms)
		ms = until > UINT32_MAX ? UINT32_MAX : (unsigned int)until;
	return ms;
}

/*
 * Wait for the GPU work of the context (the engine's too), or of the
 * declared streams, with mm->lock held on entry and on return but not
 * while waiting: allocations go on meanwhile. Bounded by fence_ms and by
 * deadline (fence_bound_ms()).
 */
/*
 * The same for the n streams st (taken; NULL, 0: the context), whatever
 * the declared ones.
 */
static int mm_fence_streams_until(struct gs_mm *mm, void **st,
				  unsigned int n, uint64_t deadline)
{
	unsigned int ms = fence_bound_ms(mm, deadline);
	int ret;

	if (!mm->b->fence && !n) {
		free(st);
		return 0;
	}
	pthread_mutex_unlock(&mm->lock);
	if (ms) {
		ret = fence_bounded(mm, st, n, ms);
	} else {
		ret = backend_fence(mm->b, st, n);
		free(st);
	}
	pthread_mutex_lock(&mm->lock);
	return ret;
}

static int mm_fence_until(struct gs_mm *mm, uint64_t deadline)
{
	unsigned int n = mm->b->fence_streams ? mm->nfence : 0;
	void **st = NULL;

	if (n) {
		st = malloc(n * sizeof(*st));
		if (!st)
			return -ENOMEM;
		memcpy(st, mm->fence_streams, n * sizeof(*st));
	}
	return mm_fence_streams_until(mm, st, n, deadline);
}

static int mm_fence_unlocked(struct gs_mm *mm)
{
	return mm_fence_until(mm, 0);
}

int gs_mm_set_peer_access(struct gs_mm *mm, uint64_t devices)
{
	int ret = 0;

	pthread_mutex_lock(&mm->lock);
	mm->peers = devices;
	for (int i = 0; i < GPUSLEEP_MAX_TAGS && !ret; i++)
		for (struct chunk *c = mm->tags[i].chunks; c && !ret;
		     c = c->next)
			if (c->mapped && devices && mm->b->grant)
				ret = mm->b->grant(mm->b, c->va, c->size, devices,
						   0);
	if (devices && !mm->b->grant)
		ret = -EOPNOTSUPP;
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

int gs_mm_set_verify(struct gs_mm *mm, bool on)
{
	pthread_mutex_lock(&mm->lock);
	if (mm->verify != on)
		mm_changed(mm);
	mm->verify = on;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

bool gs_mm_verify(struct gs_mm *mm)
{
	bool on;

	pthread_mutex_lock(&mm->lock);
	on = mm->verify;
	pthread_mutex_unlock(&mm->lock);
	return on;
}

int gs_mm_set_pin_limit(struct gs_mm *mm, uint64_t max_bytes)
{
	pthread_mutex_lock(&mm->lock);
	mm->pin_limit = max_bytes;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

void gs_mm_pinned(struct gs_mm *mm, uint64_t *bytes, uint64_t *limit)
{
	pthread_mutex_lock(&mm->lock);
	if (bytes)
		*bytes = mm->pinned;
	if (limit)
		*limit = mm->pin_limit;
	pthread_mutex_unlock(&mm->lock);
}

int gs_mm_set_margin(struct gs_mm *mm, uint64_t bytes)
{
	pthread_mutex_lock(&mm->lock);
	mm->margin = bytes;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

int gs_mm_set_fence_timeout(struct gs_mm *mm, unsigned int timeout_ms)
{
	pthread_mutex_lock(&mm->lock);
	mm->fence_ms = timeout_ms;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

int gs_mm_set_fence_streams(struct gs_mm *mm, void *const *streams,
			    unsigned int n)
{
	void **copy = NULL;

	if (n && !streams)
		return -EINVAL;
	if (n) {
		copy = calloc(n, sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, streams, n * sizeof(*copy));
	}
	pthread_mutex_lock(&mm->lock);
	free(mm->fence_streams);
	mm->fence_streams = copy;
	mm->nfence = n;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

void gs_mm_destroy(struct gs_mm *mm)
{
	if (!mm)
		return;
	if (mm->fthread_up) {
		pthread_mutex_lock(&mm->flock);
		mm->fstop = true;
		pthread_cond_broadcast(&mm->fcv);
		pthread_mutex_unlock(&mm->flock);
		pthread_join(mm->fthread, NULL);
	}
	free(mm->fstreams);
	/* nothing is unmapped under the engine's kernels, even now */
	backend_fence(mm->b, mm->fence_streams, mm->nfence);
	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		struct tag *t = &mm->tags[i];
		struct chunk *c, *n;

		for (c = t->chunks; c; c = n) {
			n = c->next;
			chunk_destroy(mm, c);
		}
	}
	mm->b->destroy(mm->b);
	pthread_mutex_destroy(&mm->lock);
	pthread_mutex_destroy(&mm->flock);
	pthread_cond_destroy(&mm->fcv);
	free(mm->fence_streams);
	free(mm);
}

/* Pin ahead of a pause; a failure is only said: the pause pins again. */
static void tag_pin_ahead(struct gs_mm *mm, struct tag *t)
{
	if (t->policy != GS_MM_BACKUP || (t->staging_flags & GS_MM_STAGING_LAZY))
		return;
	for (struct chunk *c = t->chunks; c; c = c->next) {
		int ret = c->nr_allocs ? chunk_pin(mm, c, false) : 0;

		if (ret) {
			fprintf(stderr, "gpusleep: mm: pinning %zu bytes of backup staging ahead of time failed (%s); the pause will try again\n",
				c->size, strerror(-ret));
			return;
		}
	}
}

int gs_mm_set_policy(struct gs_mm *mm, uint32_t tag, enum gs_mm_policy p,
		     size_t chunk_size)
{
	int i = tag_index(tag);
	int ret = 0;

	if (i < 0 || (p != GS_MM_DISCARD && p != GS_MM_BACKUP) ||
	    chunk_size > GS_MM_CHUNK_MAX)
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	if (mm->tags[i].paused || mm->tags[i].pausing) {
		ret = -EBUSY;
	} else {
		size_t cs = chunk_size ? chunk_size : GS_MM_CHUNK_DEFAULT;

		cs = round_up(cs, mm->chunk_gran);
		mm->tags[i].policy = p;
		mm->tags[i].first_chunk = cs;
		/*
		 * Growth goes on across policy changes (the torch adapter
		 * sets the policy at every region entry and exit); it starts
		 * again only for a tag without chunks, or a larger first size.
		 */
		if (!mm->tags[i].chunks || cs > mm->tags[i].next_chunk)
			mm->tags[i].next_chunk = cs;
		/*
		 * DISCARD: the staging is not given back here (cuMemFreeHost
		 * synchronises the device, and a policy change may come in a
		 * graph capture: the adapter sets it at every region entry and
		 * exit), but at the tag's next pause, after its fence.
		 */
		tag_pin_ahead(mm, &mm->tags[i]);
		mm_changed(mm);
	}
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

int gs_mm_set_staging(struct gs_mm *mm, uint32_t tag, unsigned int flags)
{
	int i = tag_index(tag);

	if (i < 0 || (flags & ~(GS_MM_STAGING_LAZY |
				GS_MM_STAGING_FREE_AFTER_RESUME)))
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	mm->tags[i].staging_flags = flags;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}

int gs_mm_pin_staging(struct gs_mm *mm, uint32_t tag, uint64_t max_bytes,
		      uint64_t *left)
{
	int i = tag_index(tag);
	uint64_t done = 0, todo = 0;
	int ret = 0;

	if (i < 0)
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	if (mm->tags[i].policy == GS_MM_BACKUP) {
		for (struct chunk *c = mm->tags[i].chunks; c; c = c->next)
			for (unsigned int k = 0; k < c->npieces; k++) {
				struct piece *pc = &c->pieces[k];

				if (pc->host || !piece_live(c, k))
					continue;
				if (ret || (max_bytes && done >= max_bytes)) {
					todo += pc->size;
					continue;
				}
				ret = piece_pin(mm, pc);
				if (ret) {
					todo += pc->size;
				} else {
					done += pc->size;
				}
			}
	}
	pthread_mutex_unlock(&mm->lock);
	if (left)
		*left = todo;
	return ret;
}

/*
 * map c; zero = it must read as zeros (else its contents are undefined).
 * The other devices that had access to it when it was last unmapped, and
 * those every chunk is granted to (gs_mm_set_peer_access), get it again:
 * a mapping's access goes with it. A grant that fails undoes the map.
 */
static int chunk_map(struct gs_mm *mm, struct chunk *c, bool zero)
{
	struct gs_backend *b = mm->b;
	uint64_t rw = c->peers_rw | mm->peers, ro = c->peers_ro & ~rw;
	int ret;

	if (!zero && b->map_nozero)
		ret = b->map_nozero(b, c->va, c->size, &c->handle);
	else
		ret = b->map(b, c->va, c->size, &c->handle);
	if (ret || !(rw | ro) || !b->grant)
		return ret;
	ret = b->grant(b, c->va, c->size, rw, ro);
	if (ret) {
		int r = b->unmap(b, c->va, c->size, c->handle);

		if (r)
			fprintf(stderr, "gpusleep: mm: undoing a map whose peers' access failed: %s\n",
				strerror(-gs_unmap_errno(r)));
		else
			c->handle = NULL;
	}
	return ret;
}

/* the other devices' access to c, before its mapping goes */
static void chunk_note_peers(struct gs_mm *mm, struct chunk *c)
{
	uint64_t rw = 0, ro = 0;

	if (!mm->b->peers || !c->mapped)
		return;
	if (!mm->b->peers(mm->b, c->va, &rw, &ro)) {
		c->peers_rw = rw;
		c->peers_ro = ro;
	}
}

static int chunk_new(struct gs_mm *mm, struct tag *t, size_t need,
		     struct chunk **out)
{
	struct gs_backend *b = mm->b;
	struct chunk *c;
	size_t size = t->next_chunk > need ? t->next_chunk : need;
	unsigned int np;
	int ret;

	size = round_up(size, mm->chunk_gran);
	if (size < need)
		return -ENOMEM;	/* overflow */
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	np = (unsigned int)((size + GS_MM_PIN_PIECE - 1) / GS_MM_PIN_PIECE);
	c->blocks = calloc(1, sizeof(*c->blocks));
	c->pieces = calloc(np, sizeof(*c->pieces));
	if (!c->blocks || !c->pieces) {
		ret = -ENOMEM;
		goto err_free;
	}
	c->npieces = np;
	for (unsigned int i = 0; i < np; i++)
		c->pieces[i].size = i + 1 < np ? GS_MM_PIN_PIECE :
				    size - (size_t)i * GS_MM_PIN_PIECE;
	c->size = size;
	c->blocks->size = size;
	if (mm->margin && b->mem_info) {
		uint64_t free_b = 0, total = 0;

		/* torch_memory_saver's memory_margin_bytes: out of memory
		 * rather than leave less than the margin free */
		ret = b->mem_info(b, &free_b, &total);
		if (!ret && free_b < size + mm->margin)
			ret = -ENOMEM;
		if (ret)
			goto err_free;
	}
	ret = b->reserve(b, size, (void **)&c->va);
	if (ret)
		goto err_free;
	/* no contents promised (as cudaMalloc): no memset, no sync */
	ret = chunk_map(mm, c, false);
	if (ret)
		goto err_unreserve;
	c->mapped = true;
	if (t->next_chunk < GS_MM_CHUNK_MAX)
		t->next_chunk *= 2;
	/* append: allocation searches oldest (and largest-used) chunks first */
	struct chunk **pp = &t->chunks;

	while (*pp)
		pp = &(*pp)->next;
	*pp = c;
	*out = c;
	mm_changed(mm);
	return 0;

err_unreserve:
	b->unreserve(b, c->va, size);
err_free:
	free(c->pieces);
	free(c->blocks);
	free(c);
	return ret;
}

/* First fit in c; split the block. NULL if nothing fits (or no memory). */
static void *chunk_carve(struct chunk *c, size_t size, int *err)
{
	for (struct block *bl = c->blocks; bl; bl = bl->next) {
		if (bl->used || bl->size < size)
			continue;
		if (bl->size > size) {
			struct block *rest = calloc(1, sizeof(*rest));

			if (!rest) {
				*err = -ENOMEM;
				return NULL;
			}
			rest->off = bl->off + size;
			rest->size = bl->size - size;
			rest->prev = bl;
			rest->next = bl->next;
			if (bl->next)
				bl->next->prev = rest;
			bl->next = rest;
			bl->size = size;
		}
		bl->used = true;
		c->used += size;
		c->nr_allocs++;
		return c->va + bl->off;
	}
	return NULL;
}

/* Remember that c was allocated from for work on stream. */
static void chunk_note_owner(struct chunk *c, void *stream)
{
	c->carves++;
	if (c->owners_unknown)
		return;
	for (unsigned int i = 0; i < c->nowners; i++)
		if (c->owners[i] == stream)
			return;
	if (c->nowners == GS_MM_OWNERS) {
		c->owners_unknown = true;
		return;
	}
	c->owners[c->nowners++] = stream;
}

/* Allocate from t's chunks, or a new one, for stream; mm->lock held. */
static void *tag_alloc(struct gs_mm *mm, struct tag *t, size_t size,
		       void *stream, int *err)
{
	struct chunk *c;
	void *p = NULL;
	bool fresh = false;

	*err = 0;
	if (t->paused || t->pausing) {
		*err = -EBUSY;
		return NULL;
	}
	for (c = t->chunks; c && !p && !*err; c = c->next)
		if (c->size - c->used >= size &&
		    (p = chunk_carve(c, size, err)))
			break;
	if (p || *err)
		goto pin;
	*err = chunk_new(mm, t, size, &c);
	if (*err)
		return NULL;
	p = chunk_carve(c, size, err);
	fresh = true;
pin:
	if (p)
		chunk_note_owner(c, stream);
	/* a backed-up tag's staging is pinned now, not in the pause */
	if (p && t->policy == GS_MM_BACKUP &&
	    !(t->staging_flags & GS_MM_STAGING_LAZY))
		chunk_pin_range(mm, c, (size_t)((char *)p - c->va), size);
	if (!p && fresh) {
		/* only -ENOMEM for the split block can get here */
		struct chunk **pp = &t->chunks;

		while (*pp != c)
			pp = &(*pp)->next;
		*pp = NULL;
		chunk_destroy(mm, c);
	}
	return p;
}

static uint64_t tag_trim(struct gs_mm *mm, struct tag *t, uint64_t reclaim);
static int mm_fence_streams_until(struct gs_mm *mm, void **st,
				  unsigned int n, uint64_t deadline);

/* an empty chunk kept mapped as a cache, which a trim may give back */
static bool chunk_trimmable(const struct chunk *c)
{
	return !c->nr_allocs && c->mapped && !c->saved;
}

/* add s to the n streams of set (at most max); false if it is full */
static bool stream_set_add(void **set, unsigned int *n, unsigned int max,
			   void *s)
{
	for (unsigned int i = 0; i < *n; i++)
		if (set[i] == s)
			return true;
	if (*n == max)
		return false;
	set[(*n)++] = s;
	return true;
}

/*
 * Out of device memory: give back the empty chunks kept as a cache (of
 * any tag), once the GPU work that may still use them is done; mm->lock
 * held (dropped while waiting). Returns the bytes given back.
 *
 * That work was queued on the streams the chunks' allocations were made
 * for: a free is ordered on its allocation's stream (as cudaFreeAsync;
 * PyTorch's caching allocator frees a block stream-ordered on its
 * allocation stream, and waits for the other streams it was used on, its
 * record_stream() events, before it frees a segment to us). So only those
 * streams are waited for, with the streams the engine declared
 * (gs_mm_set_fence_streams), never the whole context: the driver cannot
 * tell whether any stream of the context is being captured into a CUDA
 * graph (cuStreamIsCapturing answers for one stream; asked about the
 * legacy stream it sees only blocking streams' captures, and PyTorch
 * captures on non-blocking ones), and a context-wide synchronisation
 * would break such a capture. A stream that is being captured cannot be
 * waited for either (nor the legacy stream while a blocking stream is):
 * the chunks it used stay, as do chunks used on more streams than were
 * remembered; they go at the next pause of their tag or gs_mm_trim().
 * A chunk allocated from again while the lock was dropped stays too.
 * only: that chunk alone (a free that gives its memory back).
 */
static uint64_t mm_reclaim(struct gs_mm *mm, const struct chunk *only)
{
	struct gs_backend *b = mm->b;
	unsigned int max = GS_MM_OWNERS * 8 + mm->nfence, n = 0, nbad = 0;
	void **set, **bad;
	uint64_t got = 0, id = ++mm->reclaims;
	bool any = false;
	int ret;

	set = calloc(2 * (size_t)max, sizeof(*set));
	if (!set)
		return 0;
	bad = set + max;
	for (int k = 0; k < GPUSLEEP_MAX_TAGS; k++) {
		if (mm->tags[k].pausing)
			continue;
		for (struct chunk *c = mm->tags[k].chunks; c; c = c->next) {
			bool fits = true;

			if (!chunk_trimmable(c) || c->owners_unknown ||
			    (only && c != only))
				continue;
			/* its streams, unless the set is full */
			for (unsigned int i = 0; i < c->nowners && fits; i++)
				fits = stream_set_add(set, &n, max,
						      c->owners[i]);
			/*
			 * This reclaim's (a later one, while this one waits,
			 * takes it: this one then leaves it, unfenced by it)
			 */
			if (fits) {
				c->reclaim_id = id;
				c->reclaim_at = c->carves;
			}
			any |= fits;
		}
	}
	if (!any)
		goto out;
	if (b->fence_streams && mm->nfence)
		for (unsigned int i = 0; i < mm->nfence; i++)
			stream_set_add(set, &n, max, mm->fence_streams[i]);
	/* the streams that cannot be waited for, and what they used */
	if (b->capturing) {
		unsigned int w = 0;

		for (unsigned int i = 0; i < n; i++) {
			if (b->capturing(b, set[i]))
				bad[nbad++] = set[i];
			else
				set[w++] = set[i];
		}
		n = w;
	}
	for (int k = 0; k < GPUSLEEP_MAX_TAGS && nbad; k++)
		for (struct chunk *c = mm->tags[k].chunks; c; c = c->next)
			for (unsigned int i = 0; i < c->nowners &&
			     c->reclaim_id == id; i++)
				for (unsigned int j = 0; j < nbad; j++)
					if (c->owners[i] == bad[j])
						c->reclaim_id = 0;
	if (b->fence_streams) {
		void **st = NULL;

		if (n) {
			st = malloc(n * sizeof(*st));
			if (!st)
				goto out;
			memcpy(st, set, n * sizeof(*st));
		}
		ret = n ? mm_fence_streams_until(mm, st, n, 0) : 0;
	} else {
		/* no streams to wait for one by one (host): the backend's */
		ret = b->capturing ? -EOPNOTSUPP : mm_fence_unlocked(mm);
	}
	if (ret)
		goto out;
	for (int k = 0; k < GPUSLEEP_MAX_TAGS; k++)
		if (!mm->tags[k].pausing)
			got += tag_trim(mm, &mm->tags[k], id);
out:
	free(set);
	return got;
}

void *gs_mm_alloc_on(struct gs_mm *mm, uint32_t tag, size_t size,
		     void *stream)
{
	int i = tag_index(tag);
	struct tag *t;
	void *p;
	int err = 0;

	if (i < 0 || size > GS_MM_CHUNK_MAX * 64) {
		errno = EINVAL;
		return NULL;
	}
	size = round_up(size ? size : 1, GS_MM_ALIGN);
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	p = tag_alloc(mm, t, size, stream, &err);
	/*
	 * Out of device memory: the empty chunks kept as a cache (of any
	 * tag) go back once the work on their streams is done
	 * (mm_reclaim()), then once more. Not while the allocating stream
	 * is captured into a graph (the caching allocator allocates in a
	 * capture): nothing may wait for it then.
	 */
	if (!p && err == -ENOMEM &&
	    !(mm->b->capturing && mm->b->capturing(mm->b, stream)) &&
	    mm_reclaim(mm, NULL))
		p = tag_alloc(mm, t, size, stream, &err);
	pthread_mutex_unlock(&mm->lock);
	if (!p)
		errno = err ? -err : ENOMEM;
	return p;
}

void *gs_mm_alloc(struct gs_mm *mm, uint32_t tag, size_t size)
{
	return gs_mm_alloc_on(mm, tag, size, NULL);
}

static struct chunk *find_chunk(struct gs_mm *mm, const void *ptr,
				int *tag_idx, struct chunk ***link)
{
	const char *p = ptr;

	for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		struct chunk **pp = &mm->tags[i].chunks;

		for (; *pp; pp = &(*pp)->next) {
			struct chunk *c = *pp;

			if (p >= c->va && p < c->va + c->size) {
				if (tag_idx)
					*tag_idx = i;
				if (link)
					*link = pp;
				return c;
			}
		}
	}
	return NULL;
}

/* paused = some chunk is unmapped, or mapped without its contents. */
static void tag_update_paused(struct tag *t)
{
	bool paused = false;

	for (const struct chunk *c = t->chunks; c; c = c->next)
		paused |= !c->mapped || c->saved;
	t->paused = paused;
}

int gs_mm_free(struct gs_mm *mm, void *ptr)
{
	return gs_mm_free_ex(mm, ptr, 0);
}

int gs_mm_free_ex(struct gs_mm *mm, void *ptr, unsigned int flags)
{
	struct chunk *c, **link;
	struct block *bl;
	int ti, ret = -EINVAL;

	if (flags & ~GS_MM_FREE_GIVE_BACK)
		return -EINVAL;
	if (!ptr)
		return 0;
	pthread_mutex_lock(&mm->lock);
	c = find_chunk(mm, ptr, &ti, &link);
	if (!c)
		goto out;
	for (bl = c->blocks; bl; bl = bl->next)
		if (c->va + bl->off == (char *)ptr)
			break;
	if (!bl || !bl->used)
		goto out;
	bl->used = false;
	c->used -= bl->size;
	c->nr_allocs--;
	if (bl->next && !bl->next->used) {
		struct block *n = bl->next;

		bl->size += n->size;
		bl->next = n->next;
		if (n->next)
			n->next->prev = bl;
		free(n);
	}
	if (bl->prev && !bl->prev->used) {
		struct block *pv = bl->prev;

		pv->size += bl->size;
		pv->next = bl->next;
		if (bl->next)
			bl->next->prev = pv;
		free(bl);
	}
	ret = 0;
	/*
	 * Never unmap here: the engine's kernels may still use the memory.
	 * An empty mapped chunk stays as a cache for later allocations and
	 * goes back at the next fenced point (pause, gs_mm_trim, destroy).
	 * An empty chunk that is not mapped (its tag is paused) cannot be
	 * in use on the GPU: it goes now.
	 */
	if (!c->nr_allocs && !c->mapped) {
		*link = c->next;
		chunk_destroy(mm, c);
		tag_update_paused(&mm->tags[ti]);
	} else if ((flags & GS_MM_FREE_GIVE_BACK) && chunk_trimmable(c) &&
		   !mm->tags[ti].pausing) {
		/*
		 * Asked to give the memory back (PyTorch's raw_delete: its
		 * cudaFree): the emptied chunk goes, once the work on its
		 * streams is done, unless one is captured (it stays then).
		 */
		mm_reclaim(mm, c);
	}
out:
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

/*
 * The chunk and used block holding [ptr, ptr + size), mm->lock held:
 * -ENOENT if ptr is no allocation's, -ERANGE if the range leaves it.
 */
static int find_range(struct gs_mm *mm, const void *ptr, size_t size,
		      struct chunk **cp, size_t *off)
{
	struct chunk *c = find_chunk(mm, ptr, NULL, NULL);
	size_t o;

	if (!c)
		return -ENOENT;
	o = (size_t)((const char *)ptr - c->va);
	for (const struct block *bl = c->blocks; bl; bl = bl->next) {
		if (!bl->used || o < bl->off || o >= bl->off + bl->size)
			continue;
		if (size > bl->off + bl->size - o)
			return -ERANGE;
		*cp = c;
		*off = o;
		return 0;
	}
	return -ENOENT;
}

/* Does c's staging hold its contents? 0, 1 (mapped and current: no
 * backup to read), or -ENODATA (unmapped without a backup). */
static int chunk_backed(const struct chunk *c)
{
	if (c->saved)
		return 0;
	return c->mapped ? 1 : -ENODATA;
}

int gs_mm_backup_ptr(struct gs_mm *mm, const void *ptr, size_t size,
		     void **host)
{
	struct chunk *c;
	size_t off, k;
	int ret;

	*host = NULL;
	if (!size)
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	ret = find_range(mm, ptr, size, &c, &off);
	if (!ret)
		ret = chunk_backed(c);
	if (!ret) {
		k = off / GS_MM_PIN_PIECE;
		if ((off + size - 1) / GS_MM_PIN_PIECE != k)
			ret = -EXDEV;
		else if (!c->pieces[k].host)
			ret = -ENODATA;
		else
			*host = (char *)c->pieces[k].host +
				(off - k * GS_MM_PIN_PIECE);
	}
	pthread_mutex_unlock(&mm->lock);
	return ret < 0 ? ret : 0;
}

int gs_mm_backup_read(struct gs_mm *mm, const void *ptr, size_t size,
		      void *dst)
{
	struct chunk *c;
	size_t off, done = 0;
	int ret;

	if (!size)
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	ret = find_range(mm, ptr, size, &c, &off);
	if (!ret)
		ret = chunk_backed(c);
	if (ret) {
		pthread_mutex_unlock(&mm->lock);
		return ret < 0 ? ret : -EAGAIN;
	}
	while (done < size) {
		size_t pos = off + done, k = pos / GS_MM_PIN_PIECE;
		size_t in = pos - k * GS_MM_PIN_PIECE;
		size_t len = c->pieces[k].size - in;

		if (len > size - done)
			len = size - done;
		if (!c->pieces[k].host) {
			ret = -ENODATA;
			break;
		}
		memcpy((char *)dst + done, (char *)c->pieces[k].host + in, len);
		done += len;
	}
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

uint32_t gs_mm_tag_of(struct gs_mm *mm, const void *ptr)
{
	int ti = -1;

	pthread_mutex_lock(&mm->lock);
	if (!find_chunk(mm, ptr, &ti, NULL))
		ti = -1;
	pthread_mutex_unlock(&mm->lock);
	return ti < 0 ? 0 : 1U << ti;
}

static uint64_t tag_chunk_bytes(const struct tag *t)
{
	uint64_t sum = 0;

	for (const struct chunk *c = t->chunks; c; c = c->next)
		sum += c->size;
	return sum;
}

/* not holding their contents: unmapped, or mapped and not restored */
static uint64_t tag_unmapped_bytes(const struct tag *t)
{
	uint64_t sum = 0;

	for (const struct chunk *c = t->chunks; c; c = c->next)
		if (!c->mapped || c->saved)
			sum += c->size;
	return sum;
}

/*
 * After a failed unmap of c: note what it left (ret, GS_UNMAP_*). Returns
 * true if c lost its contents (unmapped, or its pages dropped).
 */
static bool chunk_unmap_failed(struct chunk *c, int ret)
{
	int left = gs_unmap_left(ret);

	if (left & GS_UNMAP_GONE) {
		c->mapped = false;
		c->stale = c->handle;
		c->handle = NULL;
	}
	return left != 0;
}

/* Retry the release of a handle whose range was unmapped before. */
static void chunk_release_stale(struct gs_mm *mm, struct chunk *c)
{
	if (c->stale && !mm->b->unmap(mm->b, c->va, c->size, c->stale))
		c->stale = NULL;
}

/*
 * Unmap and give back the empty mapped chunks of t; the caller fenced
 * (reclaim, an mm_reclaim() call's number: only the streams of the
 * chunks it marked, which have not been allocated from since; 0: all).
 * A chunk that will not unmap stays, empty and mapped. Returns the bytes.
 */
static uint64_t tag_trim(struct gs_mm *mm, struct tag *t, uint64_t reclaim)
{
	struct chunk **pp = &t->chunks;
	uint64_t bytes = 0;

	while (*pp) {
		struct chunk *c = *pp;
		int ret;

		if (!chunk_trimmable(c) ||
		    (reclaim && (c->reclaim_id != reclaim ||
				 c->carves != c->reclaim_at))) {
			pp = &c->next;
			continue;
		}
		ret = mm->b->unmap(mm->b, c->va, c->size, c->handle);
		/* still mapped: stays; unmapped, release failed: goes too */
		if (ret && !(gs_unmap_left(ret) & GS_UNMAP_GONE)) {
			pp = &c->next;
			continue;
		}
		if (ret)
			chunk_unmap_failed(c, ret);
		c->mapped = false;
		bytes += c->size;
		*pp = c->next;
		chunk_destroy(mm, c);
	}
	return bytes;
}

int gs_mm_trim(struct gs_mm *mm, uint32_t tags, uint64_t *bytes)
{
	uint64_t sum = 0;
	int ret;

	if (tags & ~(uint32_t)((1ULL << GPUSLEEP_MAX_TAGS) - 1))
		return -EINVAL;
	pthread_mutex_lock(&mm->lock);
	ret = mm_fence_unlocked(mm);
	if (!ret)
		for (int i = 0; i < GPUSLEEP_MAX_TAGS; i++)
			if ((!tags || (tags & (1U << i))) &&
			    !mm->tags[i].pausing)
				sum += tag_trim(mm, &mm->tags[i], 0);
	pthread_mutex_unlock(&mm->lock);
	if (bytes)
		*bytes = sum;
	return ret;
}

/* Queue the restore of c's live allocations; the caller syncs. */
static int chunk_restore(struct gs_mm *mm, struct chunk *c, uint64_t *copied)
{
	return chunk_copy(mm, c, false, copied);
}

/* Map c again and bring its contents back if they are in staging. */
static int chunk_bring_back(struct gs_mm *mm, struct chunk *c)
{
	struct gs_backend *b = mm->b;
	int ret;

	if (!c->mapped) {
		chunk_release_stale(mm, c);
		ret = chunk_map(mm, c, !c->saved);
		if (ret)
			return ret;
		c->mapped = true;
	}
	if (c->saved) {
		uint64_t copied = 0;

		ret = chunk_restore(mm, c, &copied);
		if (!ret)
			ret = b->sync(b);
		else
			b->sync(b);	/* nothing stays queued */
		if (ret)
			return ret;
		c->saved = false;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* free device memory as the backend sees it; false if it cannot tell */
static bool mm_free_now(struct gs_mm *mm, uint64_t *free_b)
{
	uint64_t total;

	return mm->b->mem_info && !mm->b->mem_info(mm->b, free_b, &total);
}

/*
 * Back up every chunk of t into its staging; nothing queued on return.
 * res->copied_bytes: the bytes queued; with verification, the checksums
 * of what arrived in the staging (res->verify_ns, _bytes).
 */
static int tag_backup(struct gs_mm *mm, struct tag *t, struct gs_mm_result *res)
{
	struct gs_backend *b = mm->b;
	struct chunk *c;
	uint64_t v0;
	int ret = 0;

	for (c = t->chunks; c && !ret; c = c->next) {
		c->nsegs = 0;
		c->bad = false;
		if (!c->nr_allocs)
			continue;	/* empty: nothing to keep */
		/* pinned ahead; what is missing now, piece by piece */
		ret = chunk_pin(mm, c, true);
		if (!ret)
			ret = chunk_copy(mm, c, true, &res->copied_bytes);
	}
	if (ret) {
		b->sync(b);	/* never return with copies in flight */
		return ret;
	}
	ret = b->sync(b);
	if (ret || !mm->verify)
		return ret;
	/* the host copy as it arrived: its checksums */
	v0 = now_ns();
	for (c = t->chunks; c; c = c->next)
		chunk_sum_segs(c, &res->verify_bytes);
	res->verify_ns = now_ns() - v0;
	res->flags |= GS_MM_RES_VERIFIED;
	return 0;
}

/*
 * Before a resume maps anything: the staging of every chunk to restore
 * against its backup's checksums. A chunk that fails is bad (its
 * contents lost, mapped fresh next time); -EBADMSG if one did.
 */
static int tag_check(struct tag *t, uint32_t tag,
		     struct gs_mm_result *res)
{
	uint64_t v0 = now_ns();
	bool checked = false, failed = false;

	for (struct chunk *c = t->chunks; c; c = c->next) {
		if (!c->saved || c->bad || !c->nsegs)
			continue;
		checked = true;
		if (!chunk_check_segs(c, tag, &res->verify_bytes))
			failed = c->bad = true;
	}
	/* lost, this time or a failed check before: said every time */
	for (struct chunk *c = t->chunks; c; c = c->next)
		if (c->bad)
			res->lost_bytes += c->size;
	if (checked)
		res->verify_ns = now_ns() - v0;
	if (failed) {
		res->flags |= GS_MM_RES_VERIFY_FAILED;
		t->lost = true;
		return -EBADMSG;
	}
	if (checked)
		res->flags |= GS_MM_RES_VERIFIED;
	return 0;
}

int gs_mm_pause_ex(struct gs_mm *mm, uint32_t tag, struct gs_mm_result *res)
{
	return gs_mm_pause_until(mm, tag, 0, res);
}

int gs_mm_pause_until(struct gs_mm *mm, uint32_t tag, uint64_t deadline_ns,
		      struct gs_mm_result *res)
{
	struct gs_backend *b = mm->b;
	int i = tag_index(tag);
	struct tag *t;
	struct chunk *c, *failed = NULL;
	uint64_t start = now_ns(), done = 0;
	bool measured, gone = false;
	int ret = 0;

	memset(res, 0, sizeof(*res));
	if (i < 0)
		return res->status = -EINVAL;
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	if (t->paused) {
		res->bytes = tag_chunk_bytes(t);
		res->unmapped_bytes = tag_unmapped_bytes(t);
		ret = -EALREADY;
		goto out;
	}
	if (t->pausing) {
		ret = -EBUSY;
		goto out;
	}
	/* no allocation in t, no policy change while the lock is dropped */
	t->pausing = true;
	/*
	 * The engine's kernels may still be running (it answered its drain
	 * when the requests were done on the CPU): wait for all of them
	 * before the first copy, so the backup holds what they wrote. At
	 * most fence_ms (a kernel that never ends: -ETIMEDOUT, nothing
	 * done), and without mm->lock (allocations go on meanwhile).
	 */
	ret = mm_fence_until(mm, deadline_ns);
	if (ret)
		goto out_pausing;
	if (t->policy == GS_MM_DISCARD)
		/* fenced: staging kept from a BACKUP past goes back now */
		for (c = t->chunks; c; c = c->next)
			chunk_unpin(mm, c);
	if (t->policy == GS_MM_BACKUP && t->chunks) {
		uint64_t c0 = now_ns();

		ret = tag_backup(mm, t, res);
		res->copy_ns = res->copied_bytes ?
			       now_ns() - c0 - res->verify_ns : 0;
		if (ret) {
			fprintf(stderr, "gpusleep: mm: the release of tag %#x is refused, nothing released: its backup failed (%s)%s\n",
				tag, strerror(-ret),
				mm->pin_limit && ret == -ENOMEM ?
				"; its staging does not fit the host staging budget (GPUSLEEP_PIN_LIMIT, gs_mm_set_pin_limit): raise it, or discard the tag" : "");
			goto out_pausing;	/* nothing unmapped */
		}
	}
	/* and before the first unmap: nothing is unmapped under a kernel */
	ret = mm_fence_until(mm, deadline_ns);
	if (ret)
		goto out_pausing;
	/*
	 * A tag holding nothing frees nothing: no measure (on the host
	 * backend two reads of /proc/self/statm, as costly under TCG as a
	 * hop of the protocol).
	 */
	measured = t->chunks && mm_free_now(mm, &res->free_before);
	/* empty chunks are given back with the rest */
	done = tag_trim(mm, t, 0);
	for (c = t->chunks; c; c = c->next) {
		chunk_note_peers(mm, c);
		ret = b->unmap(b, c->va, c->size, c->handle);
		if (ret) {
			failed = c;
			gone = chunk_unmap_failed(c, ret);
			ret = gs_unmap_errno(ret);
			break;
		}
		c->mapped = false;
		c->handle = NULL;
		c->saved = t->policy == GS_MM_BACKUP && c->nr_allocs;
		done += c->size;
	}
	if (failed) {
		/*
		 * Undo: map the chunks unmapped here again and restore them.
		 * The failed chunk kept its contents unless the backend says
		 * otherwise (host: pages dropped, then mprotect failed; CUDA:
		 * unmapped, then the release and the map-back failed): then
		 * it is restored from the backup, or lost. What cannot be
		 * mapped back or restored stays "not back" (unmapped, or
		 * saved) and is said in res: the tag is then partly released
		 * and a resume brings it back.
		 */
		if (gone && failed->nr_allocs) {
			if (t->policy == GS_MM_BACKUP)
				failed->saved = true;
			else
				res->lost_bytes += failed->size;
		}
		for (c = t->chunks; c; c = c->next) {
			if (c != failed && c->mapped)
				continue;
			/* DISCARD: gone, whether it maps back (zeros) or not */
			if (c != failed && t->policy == GS_MM_DISCARD &&
			    c->nr_allocs)
				res->lost_bytes += c->size;
			chunk_bring_back(mm, c);
			if (c == failed)
				break;
		}
		/*
		 * A chunk mapped back whose restore failed holds garbage
		 * until a resume restores it: lost for now (the weights are
		 * reloaded, KV repaired), and not back.
		 */
		for (c = t->chunks; c; c = c->next)
			if (c->mapped && c->saved)
				res->lost_bytes += c->size;
		if (t->policy == GS_MM_DISCARD && res->lost_bytes)
			t->lost = true;
		tag_update_paused(t);
		res->bytes = 0;
		res->unmapped_bytes = tag_unmapped_bytes(t);
		if (res->unmapped_bytes)
			res->flags |= GS_MM_RES_PARTIAL;
		goto out_pausing;
	}
	t->paused = t->chunks != NULL;
	res->bytes = done;
	res->unmapped_bytes = tag_unmapped_bytes(t);
	/*
	 * After the unmaps, a synchronisation: on a GPU an unmap under a
	 * kernel still running (one the fence did not cover: an undeclared
	 * stream, work queued since) is not refused, the kernel faults and
	 * the sticky error shows here. Then the pause failed: the memory is
	 * unmapped (the tag stays released) and the context is lost.
	 */
	ret = mm_fence_until(mm, deadline_ns);
	if (ret) {
		if (ret == -ENOTRECOVERABLE)
			res->flags |= GS_MM_RES_FAULT;
		fprintf(stderr, "gpusleep: mm: the synchronisation after unmapping %llu bytes failed (%s)%s\n",
			(unsigned long long)done, strerror(-ret),
			ret == -ENOTRECOVERABLE ?
			": a kernel still used the memory; the GPU context is lost" : "");
		res->unmapped_bytes = tag_unmapped_bytes(t);
		goto out_pausing;
	}
	t->pauses++;
	/*
	 * Verified free: after that synchronisation, how much device memory
	 * the driver now reports free that was not before.
	 */
	if (measured && mm_free_now(mm, &res->free_after)) {
		res->flags |= GS_MM_RES_MEASURED;
		res->freed_bytes = res->free_after > res->free_before ?
				   res->free_after - res->free_before : 0;
		/*
		 * Short of 1% or 1 MiB, whichever is more: other allocations
		 * meanwhile (host backend: the process's RSS) blur the rest.
		 */
		uint64_t slack = done / 100 > (1U << 20) ? done / 100 : 1U << 20;

		if (res->freed_bytes + slack < done)
			res->flags |= GS_MM_RES_SHORTFALL;
	}
out_pausing:
	t->pausing = false;
	mm_changed(mm);
out:
	pthread_mutex_unlock(&mm->lock);
	res->status = ret;
	res->duration_ns = now_ns() - start;
	return ret;
}

int gs_mm_resume_ex(struct gs_mm *mm, uint32_t tag, struct gs_mm_result *res)
{
	struct gs_backend *b = mm->b;
	int i = tag_index(tag);
	struct tag *t;
	struct chunk *c;
	uint64_t start = now_ns(), done = 0, copy0;
	int ret = 0, r;

	memset(res, 0, sizeof(*res));
	if (i < 0)
		return res->status = -EINVAL;
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	if (!t->paused) {
		res->bytes = tag_chunk_bytes(t);
		ret = -EALREADY;
		goto out;
	}
	if (t->pausing) {
		ret = -EBUSY;
		goto out;
	}
	/*
	 * Verification: the host copies are checked before anything is
	 * mapped. A mismatch fails this resume, the tag still released;
	 * the next one maps the bad chunks fresh (zeros), their contents
	 * lost and said so, and restores the others.
	 */
	ret = tag_check(t, tag, res);
	if (ret)
		goto out;
	for (c = t->chunks; c; c = c->next)
		if (c->bad) {
			c->saved = false;	/* nothing to restore: mapped */
			c->nsegs = 0;		/* fresh, zeros */
		}
	for (c = t->chunks; c; c = c->next) {
		if (c->mapped)
			continue;
		chunk_release_stale(mm, c);
		/* DISCARD: zeros; a backup about to be restored: no memset */
		ret = chunk_map(mm, c, !c->saved);
		if (ret)
			goto undo;
		c->mapped = true;
		c->fresh = true;
		done += c->size;
	}
	copy0 = now_ns();
	for (c = t->chunks; c; c = c->next) {
		if (!c->saved)
			continue;
		ret = chunk_restore(mm, c, &res->copied_bytes);
		if (ret)
			goto undo;
	}
	/* nothing queued (a discarded tag): no copy, no rate */
	ret = res->copied_bytes ? b->sync(b) : 0;
	res->copy_ns = res->copied_bytes ? now_ns() - copy0 : 0;
	if (ret)
		goto undo;
	for (c = t->chunks; c; c = c->next) {
		c->saved = false;
		c->fresh = false;
		c->bad = false;
		if (t->staging_flags & GS_MM_STAGING_FREE_AFTER_RESUME)
			chunk_unpin(mm, c);
	}
	t->paused = false;
	t->resumes++;
	res->bytes = done;
	goto out;

undo:
	/*
	 * Back to paused: unmap what this call mapped (its contents, if any,
	 * are still in staging: saved stays set), once no copy of ours is
	 * queued on it. A chunk that will not unmap stays mapped and saved,
	 * and is restored next time.
	 */
	b->sync(b);
	for (c = t->chunks; c; c = c->next) {
		if (!c->fresh)
			continue;
		c->fresh = false;
		r = b->unmap(b, c->va, c->size, c->handle);
		if (!r) {
			c->mapped = false;
			c->handle = NULL;
		} else {
			chunk_unmap_failed(c, r);
		}
	}
	tag_update_paused(t);
out:
	res->unmapped_bytes = tag_unmapped_bytes(t);
	if (ret != -EALREADY && ret != -EBUSY)
		mm_changed(mm);
	pthread_mutex_unlock(&mm->lock);
	res->status = ret;
	res->duration_ns = now_ns() - start;
	return ret;
}

int gs_mm_pause(struct gs_mm *mm, uint32_t tag, uint64_t *bytes)
{
	struct gs_mm_result r;
	int ret = gs_mm_pause_ex(mm, tag, &r);

	if (!ret || ret == -EALREADY)
		*bytes = r.bytes;
	return ret;
}

int gs_mm_resume(struct gs_mm *mm, uint32_t tag, uint64_t *bytes)
{
	struct gs_mm_result r;
	int ret = gs_mm_resume_ex(mm, tag, &r);

	if (!ret || ret == -EALREADY)
		*bytes = r.bytes;
	return ret;
}

int gs_mm_resident(struct gs_mm *mm, uint64_t *bytes)
{
	int src = 0;

	*bytes = 0;
	pthread_mutex_lock(&mm->lock);
	if (mm->b->resident)
		src = mm->b->resident(mm->b, bytes);
	pthread_mutex_unlock(&mm->lock);
	if (src != GPUSLEEP_RESIDENT_PROCESS && src != GPUSLEEP_RESIDENT_DEVICE) {
		*bytes = 0;
		return 0;
	}
	return src;
}

/*
 * What t holds after its next resume. Awake: what its policy gives after
 * a release. Released: kept only if every chunk holding something is in
 * staging and good; a chunk lost (a rollback, a failed check) comes back
 * as zeros. The memory manager never leaves contents undefined: a
 * discarded chunk is mapped zeroed (docs/cuda-backend.md).
 */
static uint32_t tag_content(const struct tag *t)
{
	if (t->policy != GS_MM_BACKUP)
		return GS_MM_CONTENT_ZEROED;
	if (!t->paused)
		return GS_MM_CONTENT_KEPT;
	for (const struct chunk *c = t->chunks; c; c = c->next)
		if (c->nr_allocs && (c->bad || (!c->mapped && !c->saved)))
			return GS_MM_CONTENT_ZEROED;
	return GS_MM_CONTENT_KEPT;
}

int gs_mm_tag_info(struct gs_mm *mm, uint32_t tag, struct gs_mm_tag_info *info)
{
	int i = tag_index(tag);
	struct tag *t;

	if (i < 0)
		return -EINVAL;
	t = &mm->tags[i];
	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&mm->lock);
	info->policy = t->policy;
	info->paused = t->paused;
	for (struct chunk *c = t->chunks; c; c = c->next) {
		info->nr_chunks++;
		info->nr_allocs += c->nr_allocs;
		info->chunk_bytes += c->size;
		info->used_bytes += c->used;
		if (c->mapped)
			info->mapped_bytes += c->size;
		for (unsigned int k = 0; k < c->npieces; k++) {
			if (!c->pieces[k].host)
				continue;
			if (!info->staging)
				info->staging = c->pieces[k].host;
			info->staging_bytes += c->pieces[k].size;
		}
	}
	info->pauses = t->pauses;
	info->resumes = t->resumes;
	info->lost = t->lost;
	info->content = tag_content(t);
	info->verified = t->policy == GS_MM_BACKUP && mm->verify;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}
