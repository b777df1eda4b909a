/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * user/backend.h: one memory backend (host mmap, or CUDA VMM).
 *
 * A backend hands out virtual ranges that stay reserved while their backing
 * memory is dropped and created again, so pointers into them stay valid
 * across sleep. Internal to libgpusleep (not installed).
 */
#ifndef GPUSLEEP_USER_BACKEND_H
#define GPUSLEEP_USER_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <linux/gpusleep.h>	/* GPUSLEEP_RESIDENT_* */

struct gs_backend {
	const char *name;
	void *ctx;
	/* allocation granularity in bytes (power of two) */
	size_t (*granularity)(struct gs_backend *b);
	/*
	 * Optional (NULL: granularity): the granularity the device
	 * recommends (a power of two, a multiple of the above), which large
	 * ranges (the memory manager's chunks) are best sized and aligned
	 * to; reserve() aligns a range whose size is a multiple of it to it.
	 */
	size_t (*chunk_granularity)(struct gs_backend *b);
	/* reserve/unreserve a virtual range that stays valid across unmap */
	int (*reserve)(struct gs_backend *b, size_t size, void **va);
	void (*unreserve)(struct gs_backend *b, void *va, size_t size);
	/* back [va, va+size) with fresh memory, accessible: create+map+access */
	int (*map)(struct gs_backend *b, void *va, size_t size, void **handle);
	/*
	 * Optional: the same without clearing the memory (its contents are
	 * undefined), for memory about to be overwritten (a restore) or whose
	 * contents nobody was promised (a new chunk, like cudaMalloc): no
	 * memset and no stream synchronisation, which are also not allowed
	 * while a CUDA graph is being captured.
	 */
	int (*map_nozero)(struct gs_backend *b, void *va, size_t size,
			  void **handle);
	/*
	 * Drop the backing memory of [va, va+size); the range stays reserved.
	 * A failure says what it left with GS_UNMAP_* bits in the -errno
	 * (gs_unmap_errno(), gs_unmap_left()): none, nothing changed (still
	 * mapped, contents intact); GS_UNMAP_LOST, still mapped but its
	 * contents are gone; GS_UNMAP_GONE, no longer mapped (the range's
	 * contents are gone) and the handle kept: unmap again with it only
	 * finishes the release, and the range may be mapped anew meanwhile.
	 */
	int (*unmap)(struct gs_backend *b, void *va, size_t size, void *handle);
	/* staging memory for backup (pinned on CUDA), allocated once, reused */
	int (*host_alloc)(struct gs_backend *b, size_t size, void **host);
	void (*host_free)(struct gs_backend *b, void *host, size_t size);
	/* copy device range -> host, host -> device (may be async + sync) */
	int (*backup)(struct gs_backend *b, void *host, const void *va, size_t size);
	int (*restore)(struct gs_backend *b, void *va, const void *host, size_t size);
	/* wait for the backend's own copies (backup/restore) */
	int (*sync)(struct gs_backend *b);
	/*
	 * Optional (NULL: nothing to wait for / cannot tell). fence: wait for
	 * every piece of GPU work of the context, the engine's included
	 * (cuCtxSynchronize), before memory is copied out or unmapped.
	 * mem_info: device memory free and total as the driver sees it
	 * (cuMemGetInfo; host: memory not held by this process).
	 */
	int (*fence)(struct gs_backend *b);
	/*
	 * Optional: wait only for the work queued so far on the given streams
	 * (CUstream on CUDA: an event recorded on each, then waited for), for
	 * engines that declare their streams instead of the whole context.
	 */
	int (*fence_streams)(struct gs_backend *b, void *const *streams,
			     unsigned int n);
	int (*mem_info)(struct gs_backend *b, uint64_t *free_b, uint64_t *total);
	/*
	 * Optional (NULL: never): 1 if work queued now on stream (CUstream;
	 * NULL: the legacy default stream, captured in effect while a
	 * blocking stream is) is being captured into a CUDA graph, or if
	 * that cannot be told: then nothing may wait for that stream. Says
	 * nothing of the context's other streams (the driver cannot tell):
	 * a context-wide fence is never safe during someone's capture.
	 */
	int (*capturing)(struct gs_backend *b, void *stream);
	/*
	 * Optional (NULL: not known): the device memory this process still
	 * holds as the driver sees it. Returns GPUSLEEP_RESIDENT_PROCESS (the
	 * process's own figure), GPUSLEEP_RESIDENT_DEVICE (the whole device's
	 * used memory), or 0 / -errno (not known).
	 */
	int (*resident)(struct gs_backend *b, uint64_t *bytes);
	/*
	 * Optional (NULL: only the owner ever has access). peers: the
	 * other devices (bit n: device n, n < 64) with read-write
	 * (*rw) or read-only (*ro) access to the mapped range at va, as
	 * the driver says (cuMemGetAccess), whoever granted it. grant: give
	 * those devices that access to the mapped [va, va+size) (the
	 * owner's stays). 0 or -errno.
	 */
	int (*peers)(struct gs_backend *b, void *va, uint64_t *rw,
		     uint64_t *ro);
	int (*grant)(struct gs_backend *b, void *va, size_t size, uint64_t rw,
		     uint64_t ro);
	/*
	 * Optional (NULL: none): the device's 16-byte UUID, as the tenants'
	 * reports name it (cuDeviceGetUuid; the host backend: its stand-in,
	 * gs_host_gpu_uuid(0)). 0 or -errno.
	 */
	int (*uuid)(struct gs_backend *b, uint8_t out[16]);
	void (*destroy)(struct gs_backend *b);
};

#define GS_UNMAP_LOST	(1 << 16)	/* failed: mapped, contents gone */
#define GS_UNMAP_GONE	(1 << 17)	/* failed: unmapped, handle kept */

/* the errno of an unmap's result (its GS_UNMAP_* bits removed) */
static inline int gs_unmap_errno(int ret)
{
	return ret < 0 ? -((-ret) & 0xffff) : ret;
}

/* the GS_UNMAP_* bits of an unmap's result */
static inline int gs_unmap_left(int ret)
{
	return ret < 0 ? (-ret) & (GS_UNMAP_LOST | GS_UNMAP_GONE) : 0;
}

/* every int-returning op returns 0 or -errno */
struct gs_backend *gs_backend_host_new(void);
/*
 * CUDA Driver API backend (user/backend_cuda.c), loaded with dlopen at run
 * time; libpath NULL = "libcuda.so.1". Returns NULL and sets *err (-errno);
 * -ENOSYS when libgpusleep was built without CUDA headers.
 */
struct gs_backend *gs_backend_cuda_new(int device, const char *libpath, int *err);

/*
 * user/nvml.c: NVML (libnvidia-ml.so.1, or $GPUSLEEP_NVML_LIB; "off" for
 * none), loaded at run time. gs_nvml_open: the device of uuid (the 16
 * bytes of cuDeviceGetUuid; a MIG instance is a device of its own; NULL:
 * not known), else the one at pci_bus_id ("0000:41:00.0"), or NULL when
 * NVML or the device is not there.
 * gs_nvml_process_used: the device memory process pid uses on it: 0,
 * -ENOENT (not listed, or no figure), -ESRCH (NVML lists pids of another
 * pid namespace: no figure can be trusted), -ENODEV (n NULL), -EIO (NVML
 * failed, or its records' layout is unknown), -ENOMEM.
 */
struct gs_nvml;
struct gs_nvml *gs_nvml_open(const char *pci_bus_id, const unsigned char *uuid);
int gs_nvml_process_used(struct gs_nvml *n, unsigned int pid, uint64_t *bytes);
void gs_nvml_close(struct gs_nvml *n);

#endif /* GPUSLEEP_USER_BACKEND_H */
