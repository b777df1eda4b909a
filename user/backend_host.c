// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Host memory backend: the gs_backend contract on anonymous memory, so the
 * whole system runs (and its memory is measured) without a GPU.
 *
 *   reserve   mmap PROT_NONE, MAP_NORESERVE: address space only
 *   map       mprotect READ|WRITE and populate: fresh zero pages, resident
 *             (as device memory is once created)
 *   unmap     madvise(MADV_DONTNEED) then mprotect PROT_NONE: the pages go
 *             back to the kernel (RSS falls), the addresses stay reserved
 *   backup    memcpy to a staging buffer (mmap'd and populated, resident
 *             as pinned memory is; freeing it returns it)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "libgpusleep.h"

static size_t host_granularity(struct gs_backend *b)
{
	long pg = sysconf(_SC_PAGESIZE);

	(void)b;
	return pg > 0 ? (size_t)pg : 4096;
}

static int host_reserve(struct gs_backend *b, size_t size, void **va)
{
	void *p;

	(void)b;
	p = mmap(NULL, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	*va = p;
	return 0;
}

static void host_unreserve(struct gs_backend *b, void *va, size_t size)
{
	(void)b;
	munmap(va, size);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

/*
 * Mapped memory is resident, as device memory is once cuMemCreate'd: so a
 * release returns all it unmaps and the verified free (RSS) can see it.
 */
static int host_map(struct gs_backend *b, void *va, size_t size, void **handle)
{
	long pg = sysconf(_SC_PAGESIZE);

	(void)b;
	if (mprotect(va, size, PROT_READ | PROT_WRITE))
		return -errno;
	if (madvise(va, size, MADV_POPULATE_WRITE)) {
		int err = errno;

		if (err != EINVAL) {	/* ENOMEM... */
			mprotect(va, size, PROT_NONE);
			return -err;
		}
		/* before 5.14: touch every page (fresh pages read as zeros) */
		for (size_t off = 0; off < size; off += (size_t)(pg > 0 ? pg : 4096))
			((volatile char *)va)[off] = 0;
	}
	*handle = va;
	return 0;
}

static int host_unmap(struct gs_backend *b, void *va, size_t size, void *handle)
{
	(void)b;
	(void)handle;
	if (madvise(va, size, MADV_DONTNEED))
		return -errno;
	/* the pages are gone; still accessible (as zeros) */
	if (mprotect(va, size, PROT_NONE))
		return -(errno | GS_UNMAP_LOST);
	return 0;
}

static int host_host_alloc(struct gs_backend *b, size_t size, void **host)
{
	void *p;

	(void)b;
	/* resident from now on, as pinned memory is (MAP_POPULATE) */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	*host = p;
	return 0;
}

static void host_host_free(struct gs_backend *b, void *host, size_t size)
{
	(void)b;
	munmap(host, size);
}

static int host_backup(struct gs_backend *b, void *host, const void *va,
		       size_t size)
{
	(void)b;
	memcpy(host, va, size);
	return 0;
}

static int host_restore(struct gs_backend *b, void *va, const void *host,
			size_t size)
{
	(void)b;
	memcpy(va, host, size);
	return 0;
}

static int host_sync(struct gs_backend *b)
{
	(void)b;
	return 0;
}

/*
 * What mem_info reads, opened once: it is asked twice per pause, on the
 * control path, where an open + read + close of a /proc file per call
 * cost more than the rest of the agent's step. The fd is /proc/self of
 * the process that opened it: reopened in a forked child.
 */
struct host_ctx {
	int statm;		/* /proc/self/statm, or -1 */
	pid_t pid;		/* whose statm it is */
	uint64_t total;		/* physical memory, bytes */
	/*
	 * The node's stand-in GPU id, read once at creation (so threads only
	 * read it): the agent reports it with
	 * every step, and reading the machine id each time (a file, over 9p
	 * in the VM) made a cycle 4x slower (benchmark 2a).
	 */
	uint8_t uuid[16];
	bool have_uuid;
};

/*
 * "Device" memory here is this process's resident memory: free = physical
 * memory minus our RSS, so a release shows as memory that came free.
 */
static int host_mem_info(struct gs_backend *b, uint64_t *free_b,
			 uint64_t *total)
{
	struct host_ctx *h = b->ctx;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned long size, res;
	char buf[128];
	ssize_t n;

	if (pg <= 0 || !h->total)
		return -EOPNOTSUPP;
	if (h->statm >= 0 && h->pid != getpid()) {
		close(h->statm);
		h->statm = -1;
	}
	if (h->statm < 0) {
		h->statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
		if (h->statm < 0)
			return -errno;
		h->pid = getpid();
	}
	n = pread(h->statm, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	if (sscanf(buf, "%lu %lu", &size, &res) != 2)
		return -EIO;
	*total = h->total;
	*free_b = *total - (uint64_t)res * (uint64_t)pg;
	return 0;
}

static void host_destroy(struct gs_backend *b)
{
	struct host_ctx *h = b->ctx;

	if (h->statm >= 0)
		close(h->statm);
	free(h);
	free(b);
}

/* No device: the node's stand-in id, the same for every process. */
static int host_uuid(struct gs_backend *b, uint8_t out[16])
{
	struct host_ctx *h = b->ctx;

	if (!h->have_uuid)	/* no machine id at creation: say why again */
		return gs_host_gpu_uuid(0, out);
	memcpy(out, h->uuid, sizeof(h->uuid));
	return 0;
}

struct gs_backend *gs_backend_host_new(void)
{
	struct gs_backend *b = calloc(1, sizeof(*b));
	struct host_ctx *h = calloc(1, sizeof(*h));
	long pg = sysconf(_SC_PAGESIZE), phys = sysconf(_SC_PHYS_PAGES);

	if (!b || !h) {
		free(b);
		free(h);
		return NULL;
	}
	h->statm = -1;
	h->have_uuid = !gs_host_gpu_uuid(0, h->uuid);
	if (pg > 0 && phys > 0)
		h->total = (uint64_t)phys * (uint64_t)pg;
	b->ctx = h;
	b->name = "host";
	b->granularity = host_granularity;
	b->reserve = host_reserve;
	b->unreserve = host_unreserve;
	b->map = host_map;
	b->unmap = host_unmap;
	b->host_alloc = host_host_alloc;
	b->host_free = host_host_free;
	b->backup = host_backup;
	b->restore = host_restore;
	b->sync = host_sync;
	b->mem_info = host_mem_info;
	/* No device, so no resident device memory to report: unknown. */
	b->resident = NULL;
	b->uuid = host_uuid;
	b->destroy = host_destroy;
	return b;
}

#ifndef HAVE_CUDA
int gs_cuda_device_uuid(int device, const char *libpath, uint8_t uuid[16])
{
	(void)device;
	(void)libpath;
	(void)uuid;
	return -ENOSYS;
}

/* Built without CUDA headers: user/backend_cuda.c is not compiled in. */
struct gs_backend *gs_backend_cuda_new(int device, const char *libpath, int *err)
{
	(void)device;
	(void)libpath;
	if (err)
		*err = -ENOSYS;
	errno = ENOSYS;
	return NULL;
}
#endif
