// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * PyTorch pluggable allocator on top of gs_mm, so that tensors live on
 * tagged, sleepable memory. Used as the allocator of one torch.cuda.MemPool
 * per tag, entered with torch.cuda.use_mem_pool (see docs/pytorch.md and
 * gpusleep.torch_memory_saver): PyTorch's caching allocator stays on top,
 * everything outside the pools stays with PyTorch's own allocator, and it
 * works after CUDA is initialised.
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       lib, "gpusleep_malloc_weights", "gpusleep_free")
 *   pool = torch.cuda.MemPool(alloc.allocator())
 *   with torch.cuda.use_mem_pool(pool):
 *       model = load_model()
 *
 * gpusleep_malloc_tag0 .. gpusleep_malloc_tag7 allocate in the tag of that
 * bit whatever thread calls them (gpusleep_malloc_weights and
 * gpusleep_malloc_kv_cache are tag0 and tag1, the default declaration's);
 * gpusleep_malloc allocates in the calling thread's tag (gpusleep_set_tag,
 * per thread, tag 0 until set). Tag names are those of the declaration the
 * engine makes its domain with, told to the allocator by
 * gpusleep_declare_tags("weights,kv_cache,cuda_graph") before the first
 * allocation (default: weights,kv_cache).
 * A NULL return is an out-of-memory for PyTorch's caching allocator, which
 * frees its cached blocks, retries and raises torch.OutOfMemoryError.
 *
 * One memory manager per process, made at the first allocation for that
 * allocation's device. Environment:
 *   GPUSLEEP_BACKEND      "cuda" (default) or "host" (tests, no GPU)
 *   GPUSLEEP_BACKUP_TAGS  tags backed up to host memory on release
 *                         (default the first tag, "weights"; "" =
 *                         discard everything)
 *   GPUSLEEP_CUDA_LIB     the libcuda to dlopen (default "libcuda.so.1")
 *   GPUSLEEP_STAGING      when the backed-up tags' pinned host staging is
 *                         prepared and how long it is kept: "eager" (at
 *                         allocation, kept across cycles: the default;
 *                         the first release is as fast as the later ones),
 *                         "lazy" (at the first release, kept), "per-cycle"
 *                         (at each release, given back after the resume,
 *                         as torch_memory_saver does)
 *   GPUSLEEP_PIN_LIMIT    the host memory that staging may pin, all tags
 *                         (bytes, K/M/G/T suffixes; default: no limit):
 *                         past it a release is refused, nothing released
 *                         (gs_mm_set_pin_limit)
 * Allocations made before any gpusleep_set_tag() go to the first tag
 * ("weights"), so they are kept (backed up) across sleep, never silently
 * discarded.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "libgpusleep.h"

static pthread_mutex_t torch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gs_mm *torch_mm;
static int torch_device = -1;
static struct gs_agent *torch_agent;
static unsigned int torch_agent_id;
/* gpusleep_set_outside: what only PyTorch knows, for the agent's reports */
static uint64_t outside_torch, outside_graph;
/* the calling thread's tag for gpusleep_malloc; 0 = the first tag */
static _Thread_local uint32_t thread_tag;
/* the names the engine declares its tags with (gpusleep_declare_tags) */
static struct gpusleep_tags torch_decl = {
	.nr_tags = GPUSLEEP_NR_TAGS,
	.tags = { { .name = "weights" }, { .name = "kv_cache" } },
};
/* torch_decl was declared (not the default); no name may be added */
static bool decl_explicit, decl_frozen;
/* policies asked for by bit (gpusleep_set_backup): set, and backup */
static uint32_t policy_set, backup_want;
/* gpusleep_set_margin, gpusleep_set_staging_all: applied at mm_init too */
static uint64_t torch_margin;
static unsigned int staging_all;
static bool staging_all_set;

static uint32_t cur_tag(void)
{
	return thread_tag ? thread_tag : 1U;
}

/*
 * The tags' names, in the order of the engine's declaration ("a,b,c"),
 * before the first allocation. -EINVAL: a bad list; -EBUSY: too late.
 */
int gpusleep_declare_tags(const char *names)
{
	struct gpusleep_tags d;
	const char *p = names;
	int ret = 0;

	memset(&d, 0, sizeof(d));
	for (; p; p++) {
		size_t n = strcspn(p, ",");

		if (!n || n >= GPUSLEEP_TAG_NAME_LEN ||
		    d.nr_tags == GPUSLEEP_MAX_TAGS) {
			fprintf(stderr, "gpusleep: declare_tags(\"%s\"): want 1 to %d names of at most %d characters, joined by ','\n",
				names, GPUSLEEP_MAX_TAGS,
				GPUSLEEP_TAG_NAME_LEN - 1);
			return -EINVAL;
		}
		memcpy(d.tags[d.nr_tags++].name, p, n);
		p += n;
		if (!*p)
			break;
	}
	if (!names)
		return -EINVAL;
	pthread_mutex_lock(&torch_lock);
	if (torch_mm || decl_frozen) {
		ret = -EBUSY;
	} else {
		torch_decl = d;
		decl_explicit = true;
	}
	pthread_mutex_unlock(&torch_lock);
	if (ret)
		fprintf(stderr, "gpusleep: declare_tags(\"%s\"): memory is allocated already\n",
			names);
	return ret;
}

/* "24M", "1G", "4096": bytes; -EINVAL for anything else */
static int parse_bytes(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'T': case 't': shift += 10; /* fall through */
	case 'G': case 'g': shift += 10; /* fall through */
	case 'M': case 'm': shift += 10; /* fall through */
	case 'K': case 'k': shift += 10; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (~0ULL >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* GPUSLEEP_STAGING: GS_MM_STAGING_* flags, or -EINVAL */
static int staging_flags(const char *s)
{
	if (!s || !strcmp(s, "eager"))
		return 0;
	if (!strcmp(s, "lazy"))
		return GS_MM_STAGING_LAZY;
	if (!strcmp(s, "per-cycle"))
		return GS_MM_STAGING_LAZY | GS_MM_STAGING_FREE_AFTER_RESUME;
	return -EINVAL;
}

static int mm_init(int device)
{
	const char *kind = getenv("GPUSLEEP_BACKEND");
	const char *backup = getenv("GPUSLEEP_BACKUP_TAGS");
	const char *staging = getenv("GPUSLEEP_STAGING");
	const char *limit = getenv("GPUSLEEP_PIN_LIMIT");
	int sflags = staging_flags(staging);
	struct gs_backend *b;
	uint32_t keep = 1U;	/* the first tag */
	uint64_t pin_limit = 0;
	int ret = 0;

	if (backup && gs_tags_parse_in(&torch_decl, backup, &keep)) {
		fprintf(stderr, "gpusleep: GPUSLEEP_BACKUP_TAGS=\"%s\": unknown tag\n",
			backup);
		return -EINVAL;
	}
	if (sflags < 0) {
		fprintf(stderr, "gpusleep: GPUSLEEP_STAGING=\"%s\": want eager (at allocation, kept), lazy (at the first release, kept) or per-cycle (at each release, given back after the resume)\n",
			staging);
		return -EINVAL;
	}
	if (limit && *limit && parse_bytes(limit, &pin_limit)) {
		fprintf(stderr, "gpusleep: GPUSLEEP_PIN_LIMIT=\"%s\": want bytes, with an optional K, M, G or T suffix (24G)\n",
			limit);
		return -EINVAL;
	}
	if (kind && !strcmp(kind, "host")) {
		b = gs_backend_host_new();
		if (!b)
			ret = -errno;
	} else if (!kind || !strcmp(kind, "cuda")) {
		b = gs_backend_cuda_new(device, getenv("GPUSLEEP_CUDA_LIB"), &ret);
	} else {
		fprintf(stderr, "gpusleep: GPUSLEEP_BACKEND=\"%s\": want cuda or host\n",
			kind);
		return -EINVAL;
	}
	if (!b) {
		fprintf(stderr, "gpusleep: %s backend for device %d: %s\n",
			kind ? kind : "cuda", device, strerror(-ret));
		return ret;
	}
	ret = gs_mm_new(b, &torch_mm);
	if (ret) {
		fprintf(stderr, "gpusleep: memory manager: %s\n", strerror(-ret));
		return ret;
	}
	gs_mm_set_pin_limit(torch_mm, pin_limit);
	for (unsigned int i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		uint32_t t = 1U << i;

		if (policy_set & t)	/* asked for: gpusleep_set_backup */
			keep = (keep & ~t) | (backup_want & t);
		else if (i >= torch_decl.nr_tags)
			keep &= ~t;
		/* GPUSLEEP_STAGING, unless gpusleep_set_staging_all said */
		gs_mm_set_staging(torch_mm, t, staging_all_set ? staging_all :
				  (unsigned int)sflags);
		gs_mm_set_policy(torch_mm, t, keep & t ? GS_MM_BACKUP : GS_MM_DISCARD, 0);
	}
	if (torch_margin)
		gs_mm_set_margin(torch_mm, torch_margin);
	torch_device = device;
	return 0;
}

/* stream: the allocating stream (out of memory: reclaim unless captured) */
static void *torch_malloc(uint32_t tag, ssize_t size, int device, void *stream)
{
	void *p;
	int ret = 0;

	if (size < 0)
		return NULL;
	pthread_mutex_lock(&torch_lock);
	if (!torch_mm)
		ret = mm_init(device);
	else if (device != torch_device)
		ret = -EXDEV;
	pthread_mutex_unlock(&torch_lock);
	if (ret == -EXDEV)
		fprintf(stderr, "gpusleep: allocation on device %d, but this process's memory manager serves device %d\n",
			device, torch_device);
	if (ret)
		return NULL;
	p = gs_mm_alloc_on(torch_mm, tag, (size_t)size, stream);
	if (!p) {
		char name[GPUSLEEP_TAG_NAME_LEN + 8];

		gs_tags_format_in(&torch_decl, tag, name, sizeof(name));
		fprintf(stderr, "gpusleep: allocating %zd bytes (tag %s): %s\n",
			size, name, strerror(errno));
	}
	return p;
}

void *gpusleep_malloc(ssize_t size, int device, void *stream)
{
	return torch_malloc(cur_tag(), size, device, stream);
}

void *gpusleep_malloc_weights(ssize_t size, int device, void *stream)
{
	return torch_malloc(GPUSLEEP_TAG_WEIGHTS, size, device, stream);
}

void *gpusleep_malloc_kv_cache(ssize_t size, int device, void *stream)
{
	return torch_malloc(GPUSLEEP_TAG_KV_CACHE, size, device, stream);
}

/* One entry point per tag bit: a MemPool's allocator names one. */
#define GS_MALLOC_TAG(i)						\
void *gpusleep_malloc_tag##i(ssize_t size, int device, void *stream)	\
{									\
	return torch_malloc(1U << (i), size, device, stream);		\
}
GS_MALLOC_TAG(0)
GS_MALLOC_TAG(1)
GS_MALLOC_TAG(2)
GS_MALLOC_TAG(3)
GS_MALLOC_TAG(4)
GS_MALLOC_TAG(5)
GS_MALLOC_TAG(6)
GS_MALLOC_TAG(7)

void gpusleep_free(void *ptr, ssize_t size, int device, void *stream)
{
	int ret;

	(void)stream;	/* the allocation's, remembered by the mm */
	(void)device;
	if (!ptr || !torch_mm)
		return;
	/*
	 * PyTorch frees a segment to a pool's allocator only to give the
	 * memory back (empty_cache or its out-of-memory path, for a pool
	 * whose use count fell to 0), as it would cudaFree it: the memory
	 * must come free on the device, not stay in our cache.
	 */
	ret = gs_mm_free_ex(torch_mm, ptr, GS_MM_FREE_GIVE_BACK);
	if (ret)
		fprintf(stderr, "gpusleep: freeing %p (%zd bytes): %s\n", ptr, size,
			strerror(-ret));
}

void *gpusleep_malloc_bit(unsigned int bit, ssize_t size, int device,
			 void *stream)
{
	if (bit >= GPUSLEEP_MAX_TAGS)
		return NULL;
	return torch_malloc(1U << bit, size, device, stream);
}

/* The kernel's rule for a tag's name: [a-z][a-z0-9_]*, 15 at most. */
static bool tag_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= GPUSLEEP_TAG_NAME_LEN || name[0] < 'a' || name[0] > 'z')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	return true;
}

int gpusleep_tag_bit(const char *name, int declare)
{
	int ret = -ENOENT;

	if (!name)
		return -EINVAL;
	pthread_mutex_lock(&torch_lock);
	/* the default declaration gives way to the first name declared,
	 * while nothing is allocated in it */
	if (declare && !decl_explicit && !decl_frozen && !torch_mm &&
	    tag_name_ok(name)) {
		memset(&torch_decl, 0, sizeof(torch_decl));
		decl_explicit = true;
	}
	for (unsigned int i = 0; i < torch_decl.nr_tags; i++)
		if (!strncmp(torch_decl.tags[i].name, name,
			     GPUSLEEP_TAG_NAME_LEN)) {
			ret = (int)i;
			goto out;
		}
	if (!declare)
		goto out;
	if (!tag_name_ok(name)) {
		ret = -EINVAL;
		goto out;
	}
	if (decl_frozen) {
		ret = -EBUSY;
		goto out;
	}
	if (torch_decl.nr_tags == GPUSLEEP_MAX_TAGS) {
		ret = -ENOSPC;
		goto out;
	}
	strcpy(torch_decl.tags[torch_decl.nr_tags].name, name);
	ret = (int)torch_decl.nr_tags++;
	decl_explicit = true;
out:
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

int gpusleep_tag_names(char *buf, size_t len)
{
	size_t pos = 0;
	int n;

	if (!buf || !len)
		return -EINVAL;
	buf[0] = '\0';
	pthread_mutex_lock(&torch_lock);
	n = (int)torch_decl.nr_tags;
	for (int i = 0; i < n; i++) {
		int w = snprintf(buf + pos, len - pos, "%s%s", i ? "," : "",
				 torch_decl.tags[i].name);

		if (w < 0 || (size_t)w >= len - pos) {
			n = -ENOSPC;
			break;
		}
		pos += (size_t)w;
	}
	pthread_mutex_unlock(&torch_lock);
	return n;
}

int gpusleep_freeze_tags(void)
{
	pthread_mutex_lock(&torch_lock);
	decl_frozen = true;
	decl_explicit = true;
	pthread_mutex_unlock(&torch_lock);
	return 0;
}

int gpusleep_set_backup(unsigned int bit, int want)
{
	uint32_t t = 1U << bit;
	int ret = 0;

	if (bit >= GPUSLEEP_MAX_TAGS)
		return -EINVAL;
	pthread_mutex_lock(&torch_lock);
	policy_set |= t;
	if (want)
		backup_want |= t;
	if (torch_mm) {
		ret = gs_mm_set_policy(torch_mm, t, backup_want & t ?
				       GS_MM_BACKUP : GS_MM_DISCARD, 0);
		if (ret == -EBUSY)
			ret = 0;	/* released now: set at its resume */
	}
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

int gpusleep_set_margin(uint64_t bytes)
{
	pthread_mutex_lock(&torch_lock);
	torch_margin = bytes;
	if (torch_mm)
		gs_mm_set_margin(torch_mm, bytes);
	pthread_mutex_unlock(&torch_lock);
	return 0;
}

int gpusleep_set_staging_all(unsigned int flags)
{
	int ret = 0;

	if (flags & ~(GS_MM_STAGING_LAZY | GS_MM_STAGING_FREE_AFTER_RESUME))
		return -EINVAL;
	pthread_mutex_lock(&torch_lock);
	staging_all = flags;
	staging_all_set = true;
	for (unsigned int i = 0; torch_mm && i < GPUSLEEP_MAX_TAGS && !ret; i++)
		ret = gs_mm_set_staging(torch_mm, 1U << i, flags);
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

unsigned int gpusleep_agent_domain(void)
{
	unsigned int id = 0;

	pthread_mutex_lock(&torch_lock);
	if (torch_agent)
		id = torch_agent_id;
	pthread_mutex_unlock(&torch_lock);
	return id;
}

/* One declared tag's name: the tag of this thread's later
 * gpusleep_malloc() allocations. */
int gpusleep_set_tag(const char *tag)
{
	uint32_t t;

	if (!tag || gs_tags_parse_in(&torch_decl, tag, &t) || !t ||
	    (t & (t - 1))) {
		char all[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN];

		gs_tags_format_in(&torch_decl, (1U << torch_decl.nr_tags) - 1,
				  all, sizeof(all));
		fprintf(stderr, "gpusleep: set_tag(\"%s\"): want one of %s\n",
			tag ? tag : "(null)", all);
		return -EINVAL;
	}
	thread_tag = t;
	return 0;
}

/* The process's memory manager, NULL before the first allocation. */
struct gs_mm *gpusleep_mm(void)
{
	return torch_mm;
}

int gpusleep_device(void)
{
	int dev;

	pthread_mutex_lock(&torch_lock);
	dev = torch_mm ? torch_device : -1;
	pthread_mutex_unlock(&torch_lock);
	return dev;
}

/* Attach this process's memory manager as the agent of domain_id and serve
 * it on its own thread. */
int gpusleep_agent_start(unsigned int domain_id)
{
	int ret;

	pthread_mutex_lock(&torch_lock);
	if (!torch_mm) {
		ret = -ENOENT;
		fprintf(stderr, "gpusleep: agent for domain %u: nothing allocated yet\n",
			domain_id);
		goto out;
	}
	if (torch_agent) {
		ret = -EALREADY;
		goto out;
	}
	ret = gs_agent_attach(NULL, domain_id, torch_mm, &torch_agent);
	if (!ret) {
		gs_agent_set_outside(torch_agent, outside_torch, outside_graph);
		ret = gs_agent_start(torch_agent);
		if (ret) {
			gs_agent_destroy(torch_agent);
			torch_agent = NULL;
		} else {
			torch_agent_id = domain_id;
		}
	}
	if (ret)
		fprintf(stderr, "gpusleep: agent for domain %u: %s\n", domain_id,
			strerror(-ret));
out:
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

/*
 * What the process holds outside its tags that only PyTorch knows (the
 * torch_memory_saver drop-in computes it): reported by the process's
 * agent (gs_agent_set_outside), now or once it starts.
 */
int gpusleep_set_outside(uint64_t torch_reserved, uint64_t graph_pool)
{
	pthread_mutex_lock(&torch_lock);
	outside_torch = torch_reserved;
	outside_graph = graph_pool;
	if (torch_agent)
		gs_agent_set_outside(torch_agent, torch_reserved, graph_pool);
	pthread_mutex_unlock(&torch_lock);
	return 0;
}

/* A report from the process's agent now; -ENOENT without one. */
int gpusleep_agent_report(void)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&torch_lock);
	if (torch_agent)
		ret = gs_agent_report(torch_agent);
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

/* The last step the process's agent served for tag (its verified free,
 * what stays unmapped, what was lost); -ENOENT without agent or step. */
int gpusleep_agent_last_result(unsigned int tag, struct gs_agent_result *r)
{
	int ret = -ENOENT;

	pthread_mutex_lock(&torch_lock);
	if (torch_agent)
		ret = gs_agent_last_result(torch_agent, tag, r);
	pthread_mutex_unlock(&torch_lock);
	return ret;
}

int gpusleep_agent_stop(void)
{
	int ret = -EINVAL;

	pthread_mutex_lock(&torch_lock);
	if (torch_agent) {
		ret = gs_agent_stop(torch_agent);
		gs_agent_destroy(torch_agent);
		torch_agent = NULL;
	}
	pthread_mutex_unlock(&torch_lock);
	return ret;
}
