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
 * Locking: one mutex per mm, held across a whole pause/resume/alloc/free.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "libgpusleep.h"
#include "backend.h"

#define GS_MM_CHUNK_DEFAULT	(16UL << 20)
#define GS_MM_CHUNK_MAX		(1UL << 30)

struct block {
	struct block *prev, *next;	/* address order */
	size_t off, size;
	bool used;
};

struct chunk {
	struct chunk *next;
	char *va;
	size_t size;
	void *handle;
	size_t staging_off;
	bool mapped;
	bool saved;
	bool fresh;		/* mapped by the resume in progress */
	size_t used;
	unsigned int nr_allocs;
	struct block *blocks;
};

struct tag {
	enum gs_mm_policy policy;
	size_t first_chunk;
	size_t next_chunk;
	struct chunk *chunks;		/* in creation order */
	bool paused;
	bool lost;
	void *staging;
	size_t staging_size;
	uint64_t pauses, resumes;
};

struct gs_mm {
	struct gs_backend *b;
	size_t gran;
	pthread_mutex_t lock;
	struct tag tags[GPUSLEEP_NR_TAGS];
};

static int tag_index(uint32_t tag)
{
	for (int i = 0; i < GPUSLEEP_NR_TAGS; i++)
		if (tag == (1U << i))
			return i;
	return -1;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
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
	pthread_mutex_init(&mm->lock, NULL);
	for (int i = 0; i < GPUSLEEP_NR_TAGS; i++) {
		mm->tags[i].policy = GS_MM_DISCARD;
		mm->tags[i].first_chunk = GS_MM_CHUNK_DEFAULT;
		mm->tags[i].next_chunk = GS_MM_CHUNK_DEFAULT;
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

/* Give a chunk back to the backend (its blocks are all free or abandoned). */
static void chunk_destroy(struct gs_mm *mm, struct chunk *c)
{
	if (c->mapped)
		mm->b->unmap(mm->b, c->va, c->size, c->handle);
	mm->b->unreserve(mm->b, c->va, c->size);
	chunk_free_blocks(c);
	free(c);
}

void gs_mm_destroy(struct gs_mm *mm)
{
	if (!mm)
		return;
	for (int i = 0; i < GPUSLEEP_NR_TAGS; i++) {
		struct tag *t = &mm->tags[i];
		struct chunk *c, *n;

		for (c = t->chunks; c; c = n) {
			n = c->next;
			chunk_destroy(mm, c);
		}
		if (t->staging)
			mm->b->host_free(mm->b, t->staging, t->staging_size);
	}
	mm->b->destroy(mm->b);
	pthread_mutex_destroy(&mm->lock);
	free(mm);
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
	if (mm->tags[i].paused) {
		ret = -EBUSY;
	} else {
		size_t cs = chunk_size ? chunk_size : GS_MM_CHUNK_DEFAULT;

		cs = round_up(cs, mm->gran);
		mm->tags[i].policy = p;
		mm->tags[i].first_chunk = cs;
		mm->tags[i].next_chunk = cs;
	}
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

static int chunk_new(struct gs_mm *mm, struct tag *t, size_t need,
		     struct chunk **out)
{
	struct gs_backend *b = mm->b;
	struct chunk *c;
	size_t size = t->next_chunk > need ? t->next_chunk : need;
	int ret;

	size = round_up(size, mm->gran);
	if (size < need)
		return -ENOMEM;	/* overflow */
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->blocks = calloc(1, sizeof(*c->blocks));
	if (!c->blocks) {
		free(c);
		return -ENOMEM;
	}
	c->size = size;
	c->blocks->size = size;
	ret = b->reserve(b, size, (void **)&c->va);
	if (ret)
		goto err_free;
	ret = b->map(b, c->va, size, &c->handle);
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
	return 0;

err_unreserve:
	b->unreserve(b, c->va, size);
err_free:
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

void *gs_mm_alloc(struct gs_mm *mm, uint32_t tag, size_t size)
{
	int i = tag_index(tag);
	struct tag *t;
	struct chunk *c;
	void *p = NULL;
	int err = 0;

	if (i < 0 || size > GS_MM_CHUNK_MAX * 64) {
		errno = EINVAL;
		return NULL;
	}
	size = round_up(size ? size : 1, GS_MM_ALIGN);
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	if (t->paused) {
		err = -EBUSY;
		goto out;
	}
	for (c = t->chunks; c && !p && !err; c = c->next)
		if (c->size - c->used >= size)
			p = chunk_carve(c, size, &err);
	if (p || err)
		goto out;
	err = chunk_new(mm, t, size, &c);
	if (err)
		goto out;
	p = chunk_carve(c, size, &err);
	if (!p) {
		/* only -ENOMEM for the split block can get here */
		struct chunk **pp = &t->chunks;

		while (*pp != c)
			pp = &(*pp)->next;
		*pp = NULL;
		chunk_destroy(mm, c);
	}
out:
	pthread_mutex_unlock(&mm->lock);
	if (!p)
		errno = err ? -err : ENOMEM;
	return p;
}

static struct chunk *find_chunk(struct gs_mm *mm, const void *ptr,
				int *tag_idx, struct chunk ***link)
{
	const char *p = ptr;

	for (int i = 0; i < GPUSLEEP_NR_TAGS; i++) {
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
	struct chunk *c, **link;
	struct block *bl;
	int ti, ret = -EINVAL;

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
	 * An empty chunk goes back to the backend, awake or paused; one that
	 * will not unmap stays, empty and mapped, for later allocations.
	 */
	if (!c->nr_allocs &&
	    (!c->mapped || !mm->b->unmap(mm->b, c->va, c->size, c->handle))) {
		c->mapped = false;
		*link = c->next;
		chunk_destroy(mm, c);
		tag_update_paused(&mm->tags[ti]);
	}
out:
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

/* Map c again and bring its contents back if they are in staging. */
static int chunk_bring_back(struct gs_mm *mm, struct tag *t, struct chunk *c)
{
	struct gs_backend *b = mm->b;
	int ret;

	if (!c->mapped) {
		ret = b->map(b, c->va, c->size, &c->handle);
		if (ret)
			return ret;
		c->mapped = true;
	}
	if (c->saved) {
		ret = b->restore(b, c->va, (char *)t->staging + c->staging_off,
				 c->size);
		if (!ret)
			ret = b->sync(b);
		if (ret)
			return ret;
		c->saved = false;
	}
	return 0;
}

int gs_mm_pause(struct gs_mm *mm, uint32_t tag, uint64_t *bytes)
{
	struct gs_backend *b = mm->b;
	int i = tag_index(tag);
	struct tag *t;
	struct chunk *c, *failed = NULL;
	uint64_t total, done = 0;
	int ret = 0;

	if (i < 0)
		return -EINVAL;
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	total = tag_chunk_bytes(t);
	if (t->paused) {
		*bytes = total;
		ret = -EALREADY;
		goto out;
	}
	if (t->policy == GS_MM_BACKUP && total) {
		size_t off = 0;

		if (t->staging_size < total) {
			void *host;

			/* grow: the new buffer first, so a failure keeps the old */
			ret = b->host_alloc(b, total, &host);
			if (ret)
				goto out;
			if (t->staging)
				b->host_free(b, t->staging, t->staging_size);
			t->staging = host;
			t->staging_size = total;
		}
		for (c = t->chunks; c; c = c->next) {
			c->staging_off = off;
			ret = b->backup(b, (char *)t->staging + off, c->va, c->size);
			if (ret)
				goto out;
			off += c->size;
		}
		ret = b->sync(b);
		if (ret)
			goto out;
	}
	for (c = t->chunks; c; c = c->next) {
		ret = b->unmap(b, c->va, c->size, c->handle);
		if (ret) {
			failed = c;
			break;
		}
		c->mapped = false;
		c->handle = NULL;
		c->saved = t->policy == GS_MM_BACKUP;
		done += c->size;
	}
	if (failed) {
		/*
		 * Undo: map the chunks unmapped here again and restore them.
		 * The failed chunk may have lost its pages (host: madvise done,
		 * mprotect failed): restore it too when there is a backup.
		 */
		if (t->policy == GS_MM_BACKUP)
			failed->saved = true;
		for (c = t->chunks; c; c = c->next) {
			if (c != failed && c->mapped)
				continue;
			/* on failure the chunk stays unmapped or saved */
			chunk_bring_back(mm, t, c);
			if (c == failed)
				break;
		}
		if (t->policy == GS_MM_DISCARD)
			t->lost = true;
		tag_update_paused(t);
		goto out;
	}
	t->paused = total != 0;
	t->pauses++;
	*bytes = done;
out:
	pthread_mutex_unlock(&mm->lock);
	return ret;
}

int gs_mm_resume(struct gs_mm *mm, uint32_t tag, uint64_t *bytes)
{
	struct gs_backend *b = mm->b;
	int i = tag_index(tag);
	struct tag *t;
	struct chunk *c;
	uint64_t done = 0;
	int ret = 0;

	if (i < 0)
		return -EINVAL;
	t = &mm->tags[i];
	pthread_mutex_lock(&mm->lock);
	if (!t->paused) {
		*bytes = tag_chunk_bytes(t);
		ret = -EALREADY;
		goto out;
	}
	for (c = t->chunks; c; c = c->next) {
		if (c->mapped)
			continue;
		ret = b->map(b, c->va, c->size, &c->handle);
		if (ret)
			goto undo;
		c->mapped = true;
		c->fresh = true;
		done += c->size;
	}
	for (c = t->chunks; c; c = c->next) {
		if (!c->saved)
			continue;
		ret = b->restore(b, c->va, (char *)t->staging + c->staging_off,
				 c->size);
		if (ret)
			goto undo;
	}
	ret = b->sync(b);
	if (ret)
		goto undo;
	for (c = t->chunks; c; c = c->next) {
		c->saved = false;
		c->fresh = false;
	}
	t->paused = false;
	t->resumes++;
	*bytes = done;
	goto out;

undo:
	/*
	 * Back to paused: unmap what this call mapped (its contents, if any,
	 * are still in staging: saved stays set). A chunk that will not
	 * unmap stays mapped and saved, and is restored next time.
	 */
	for (c = t->chunks; c; c = c->next) {
		if (!c->fresh)
			continue;
		c->fresh = false;
		if (!b->unmap(b, c->va, c->size, c->handle)) {
			c->mapped = false;
			c->handle = NULL;
		}
	}
	tag_update_paused(t);
out:
	pthread_mutex_unlock(&mm->lock);
	return ret;
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
	}
	info->staging = t->staging;
	info->staging_bytes = t->staging_size;
	info->pauses = t->pauses;
	info->resumes = t->resumes;
	info->lost = t->lost;
	pthread_mutex_unlock(&mm->lock);
	return 0;
}
