// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * user/nvml.c: the device memory one process uses, per NVML.
 *
 * libnvidia-ml.so.1 is loaded at run time like libcuda (no header, no
 * link): the few entry points used here have had the same ABI since NVML
 * 11. The device is found by the UUID CUDA gives (a MIG instance is an
 * NVML device of its own: "MIG-...", a whole GPU "GPU-..."), else by its
 * PCI bus id. $GPUSLEEP_NVML_LIB names another library (the tests' stand-in), or
 * "off" for none. nvmlDeviceGetComputeRunningProcesses is taken in its
 * newest version present (_v3, _v2; the first: 16-byte records). The
 * _v3 record is 24 bytes on most driver branches and 32 on others (a
 * usedGpuCcProtectedMemory field at its end), so the array is sized for
 * the largest, filled with a pattern, and the record size read from where
 * NVML wrote: 32 when it wrote past count 24-byte records, else 24; past
 * count 32-byte records, the layout is unknown and no figure is given.
 * Where NVML is missing, cannot see the device, does not list the process
 * (no permission) or gives no figure, the caller falls back to the
 * device-wide view (cuMemGetInfo). Where NVML lists a pid that no process
 * of this pid namespace has (a container whose NVML sees host pids), its
 * pids are not ours: -ESRCH, and the caller reports the figure unknown
 * rather than what a host process with our pid number holds.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define NVML_LIB_DEFAULT	"libnvidia-ml.so.1"
#define NVML_SUCCESS		0
#define NVML_ERROR_INSUFFICIENT_SIZE	7
#define NVML_VALUE_NOT_AVAILABLE	(~0ULL)
#define NVML_MAX_PROCS		4096	/* on one device, at most */
#define NVML_MAX_RECORD		64	/* room per record, any branch */
#define NVML_FILL		0xa5	/* what NVML did not write */

typedef int nvml_ret;
typedef void *nvml_device;

struct nvml_proc_v1 {
	unsigned int pid;
	unsigned long long used;
};

struct nvml_proc_v2 {		/* nvmlProcessInfo_t of _v2 and _v3 */
	unsigned int pid;
	unsigned long long used;
	unsigned int gpu_instance;
	unsigned int compute_instance;
};

typedef nvml_ret (*procs_fn)(nvml_device dev, unsigned int *count,
			     void *infos);

struct gs_nvml {
	void *lib;
	nvml_ret (*shutdown)(void);
	procs_fn procs;
	size_t stride;		/* of the records procs writes (v1: 16) */
	nvml_device dev;
};

/*
 * The device by the UUID CUDA gives (16 bytes): a MIG instance is an NVML
 * device of its own, "MIG-" then the GPU format; a whole GPU is "GPU-...".
 */
static bool by_uuid(void *lib, const unsigned char *uuid, nvml_device *dev)
{
	nvml_ret (*fn)(const char *id, nvml_device *dev);
	static const char *const kinds[] = { "MIG", "GPU" };
	char s[64];

	if (!uuid)
		return false;
	fn = (nvml_ret (*)(const char *, nvml_device *))
	     dlsym(lib, "nvmlDeviceGetHandleByUUID");
	if (!fn)
		return false;
	for (unsigned int k = 0; k < 2; k++) {
		int len = snprintf(s, sizeof(s), "%s-", kinds[k]);

		for (int i = 0; i < 16; i++) {
			len += snprintf(s + len, sizeof(s) - len, "%02x", uuid[i]);
			if (i == 3 || i == 5 || i == 7 || i == 9)
				s[len++] = '-';
		}
		s[len] = 0;
		if (fn(s, dev) == NVML_SUCCESS)
			return true;
	}
	return false;
}

struct gs_nvml *gs_nvml_open(const char *pci_bus_id, const unsigned char *uuid)
{
	const char *path = getenv("GPUSLEEP_NVML_LIB");
	nvml_ret (*init)(void);
	nvml_ret (*by_bus)(const char *id, nvml_device *dev);
	struct gs_nvml *n;

	if (path && !strcmp(path, "off"))
		return NULL;
	if ((!pci_bus_id || !*pci_bus_id) && !uuid)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->lib = dlopen(path && *path ? path : NVML_LIB_DEFAULT,
			RTLD_NOW | RTLD_LOCAL);
	if (!n->lib)
		goto err_free;
	init = (nvml_ret (*)(void))dlsym(n->lib, "nvmlInit_v2");
	n->shutdown = (nvml_ret (*)(void))dlsym(n->lib, "nvmlShutdown");
	by_bus = (nvml_ret (*)(const char *, nvml_device *))
		 dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
	n->stride = sizeof(struct nvml_proc_v2);
	n->procs = (procs_fn)dlsym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	if (!n->procs)
		n->procs = (procs_fn)dlsym(n->lib,
					 "nvmlDeviceGetComputeRunningProcesses_v2");
	if (!n->procs) {
		n->stride = sizeof(struct nvml_proc_v1);
		n->procs = (procs_fn)dlsym(n->lib,
					 "nvmlDeviceGetComputeRunningProcesses");
	}
	if (!init || !n->shutdown || !by_bus || !n->procs)
		goto err_close;
	if (init() != NVML_SUCCESS)
		goto err_close;
	if (!by_uuid(n->lib, uuid, &n->dev) &&
	    (!pci_bus_id || !*pci_bus_id ||
	     by_bus(pci_bus_id, &n->dev) != NVML_SUCCESS))
		goto err_shutdown;
	return n;

err_shutdown:
	n->shutdown();
err_close:
	dlclose(n->lib);
err_free:
	free(n);
	return NULL;
}

void gs_nvml_close(struct gs_nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->lib);
	free(n);
}

/* The count-th record of a procs() answer. */
static void rec(size_t stride, const void *buf, unsigned int i,
		unsigned int *pid, unsigned long long *used)
{
	const char *p = (const char *)buf + (size_t)i * stride;

	if (stride == sizeof(struct nvml_proc_v1)) {
		const struct nvml_proc_v1 *r = (const void *)p;

		*pid = r->pid;
		*used = r->used;
	} else {
		const struct nvml_proc_v2 *r = (const void *)p;

		*pid = r->pid;
		*used = r->used;
	}
}

/* Whether NVML wrote a byte of buf in [from, to). */
static bool written(const void *buf, size_t from, size_t to)
{
	for (const unsigned char *p = (const unsigned char *)buf + from;
	     p < (const unsigned char *)buf + to; p++)
		if (*p != NVML_FILL)
			return true;
	return false;
}

/* The size of the records NVML wrote (count of them), 0 if unknown. */
static size_t record_size(const struct gs_nvml *n, const void *buf,
			  unsigned int count)
{
	if (n->stride == sizeof(struct nvml_proc_v1) || !count)
		return n->stride;
	if (written(buf, (size_t)count * 32, (size_t)count * 32 + 8))
		return 0;
	return written(buf, (size_t)count * 24, (size_t)count * 32) ? 32 : 24;
}

int gs_nvml_process_used(struct gs_nvml *n, unsigned int pid, uint64_t *bytes)
{
	unsigned int cap = 64, count, p, i;
	unsigned long long used;
	void *buf = NULL;
	size_t stride;
	nvml_ret rc;
	int ret = -ENOENT;

	if (!n)
		return -ENODEV;
	for (;;) {
		free(buf);
		/* room for cap records of any size, and the pattern after */
		buf = malloc((size_t)(cap + 1) * NVML_MAX_RECORD);
		if (!buf)
			return -ENOMEM;
		memset(buf, NVML_FILL, (size_t)(cap + 1) * NVML_MAX_RECORD);
		count = cap;
		rc = n->procs(n->dev, &count, buf);
		if (rc != NVML_ERROR_INSUFFICIENT_SIZE)
			break;
		/* more processes came meanwhile: room for them, and some */
		if (count < cap || cap >= NVML_MAX_PROCS) {
			free(buf);
			return -EIO;
		}
		cap = count + 16 > NVML_MAX_PROCS ? NVML_MAX_PROCS : count + 16;
	}
	stride = rc == NVML_SUCCESS && count <= cap ?
		 record_size(n, buf, count) : 0;
	if (!stride) {
		free(buf);
		return -EIO;
	}
	for (i = 0; i < count; i++) {
		rec(stride, buf, i, &p, &used);
		/* a pid no process here has: NVML sees another namespace */
		if (p != pid && p && kill((pid_t)p, 0) && errno == ESRCH) {
			ret = -ESRCH;
			break;
		}
		/* several entries (MIG instances) add up */
		if (p != pid || used == NVML_VALUE_NOT_AVAILABLE)
			continue;
		if (ret)
			*bytes = 0;
		*bytes += used;
		ret = 0;
	}
	free(buf);
	return ret;
}
