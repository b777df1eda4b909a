// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/fake_libnvml.c: a stand-in libnvidia-ml.so.1, the few entry
 * points libgpusleep uses (user/nvml.c), with the real ABI: nvmlInit_v2,
 * nvmlShutdown, nvmlDeviceGetHandleByPciBusId_v2 (devices on PCI buses 1
 * to 8, as the stand-in libcuda reports them) and
 * nvmlDeviceGetComputeRunningProcesses_v3 (24-byte records; answers
 * NVML_ERROR_INSUFFICIENT_SIZE with the count needed when the caller's
 * array is short).
 *
 * Control, reached with dlsym on the loaded library (RTLD_NOLOAD):
 *   fakenvml_add_process(pid, used)  list a process (used may be
 *                                    NVML_VALUE_NOT_AVAILABLE, ~0ULL)
 *   fakenvml_fail(fn, code)          entry point fn (its exported name)
 *                                    returns code from now on (0: not)
 *   fakenvml_inits()                 nvmlInit_v2 calls not shut down
 *   fakenvml_calls(fn)               calls of fn
 *   fakenvml_add_mig(uuid)           a MIG instance, found only by its
 *                                    UUID ("MIG-..."), nvmlDeviceGetHandleByUUID
 *   fakenvml_add_process_on(uuid, pid, used)  list a process on it
 *   fakenvml_record_size(n)          _v3 writes records of n bytes (24,
 *                                    or 32 as driver branches whose
 *                                    record has usedGpuCcProtectedMemory)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#define NVML_SUCCESS			0
#define NVML_ERROR_UNINITIALIZED	1
#define NVML_ERROR_INVALID_ARGUMENT	2
#define NVML_ERROR_NOT_FOUND		6
#define NVML_ERROR_INSUFFICIENT_SIZE	7
#define MAX_PROCS	256
#define NR_BUSES	8

struct proc_info {		/* nvmlProcessInfo_t (_v2, _v3) */
	unsigned int pid;
	unsigned long long used;
	unsigned int gpu_instance;
	unsigned int compute_instance;
};

enum { F_INIT, F_SHUTDOWN, F_HANDLE, F_PROCS, F_COUNT };
static const char *const names[F_COUNT] = {
	"nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetHandleByPciBusId_v2",
	"nvmlDeviceGetComputeRunningProcesses_v3",
};
static int fail_code[F_COUNT];
static long calls[F_COUNT];
static struct proc_info procs[MAX_PROCS];
static unsigned int nprocs;
static int inits;
static char devices[NR_BUSES];	/* a handle: the address of one */
static size_t record_size = sizeof(struct proc_info);
/* one MIG instance, found by its UUID only, with its own processes */
static char mig_uuid[96];
static char mig_device;
static struct proc_info mig_procs[MAX_PROCS];
static unsigned int nmig_procs;

static int lookup(const char *fn)
{
	for (int i = 0; i < F_COUNT; i++)
		if (fn && !strcmp(fn, names[i]))
			return i;
	return -1;
}

/* Count the call; the armed failure, or uninitialised, or 0. */
static int enter(int f, int need_init)
{
	calls[f]++;
	if (fail_code[f])
		return fail_code[f];
	return need_init && !inits ? NVML_ERROR_UNINITIALIZED : NVML_SUCCESS;
}

EXPORT int nvmlInit_v2(void)
{
	int rc = enter(F_INIT, 0);

	if (!rc)
		inits++;
	return rc;
}

EXPORT int nvmlShutdown(void)
{
	int rc = enter(F_SHUTDOWN, 1);

	if (!rc)
		inits--;
	return rc;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **dev)
{
	unsigned int dom, bus, slot, fn;
	int rc = enter(F_HANDLE, 1);

	if (rc)
		return rc;
	if (!id || !dev)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 ||
	    dom || !bus || bus > NR_BUSES || slot || fn)
		return NVML_ERROR_NOT_FOUND;
	*dev = &devices[bus - 1];
	return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev,
						   unsigned int *count,
						   struct proc_info *infos)
{
	int rc = enter(F_PROCS, 1);

	if (rc)
		return rc;
	if (!count || (dev != &mig_device && ((char *)dev < devices ||
	    (char *)dev >= devices + NR_BUSES)))
		return NVML_ERROR_INVALID_ARGUMENT;
	{
		const struct proc_info *list = procs;
		unsigned int n = nprocs;

		if (dev == &mig_device) {
			list = mig_procs;
			n = nmig_procs;
		}
		if (*count < n) {
			*count = n;
			return NVML_ERROR_INSUFFICIENT_SIZE;
		}
		if (n && !infos)
			return NVML_ERROR_INVALID_ARGUMENT;
		for (unsigned int i = 0; i < n; i++) {
			char *r = (char *)infos + i * record_size;

			memset(r, 0, record_size);
			memcpy(r, &list[i], sizeof(list[i]));
		}
		*count = n;
	}
	return NVML_SUCCESS;
}

EXPORT int fakenvml_add_process(unsigned int pid, unsigned long long used)
{
	if (nprocs == MAX_PROCS)
		return -1;
	procs[nprocs++] = (struct proc_info){ .pid = pid, .used = used };
	return 0;
}

EXPORT int fakenvml_fail(const char *fn, int code)
{
	int f = lookup(fn);

	if (f < 0)
		return -1;
	fail_code[f] = code;
	return 0;
}

EXPORT int fakenvml_inits(void)
{
	return inits;
}

EXPORT long fakenvml_calls(const char *fn)
{
	int f = lookup(fn);

	return f < 0 ? -1 : calls[f];
}

EXPORT int fakenvml_record_size(unsigned int n)
{
	if (n < sizeof(struct proc_info) || n > 64)
		return -1;
	record_size = n;
	return 0;
}

/* Only the MIG instance added is found by UUID (GPUs: by bus id here). */
EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev)
{
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	if (!uuid || !dev)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!mig_uuid[0] || strcmp(uuid, mig_uuid))
		return NVML_ERROR_NOT_FOUND;
	*dev = &mig_device;
	return NVML_SUCCESS;
}

EXPORT int fakenvml_add_mig(const char *uuid)
{
	if (!uuid || strlen(uuid) >= sizeof(mig_uuid))
		return -1;
	strcpy(mig_uuid, uuid);
	return 0;
}

EXPORT int fakenvml_add_process_on(const char *uuid, unsigned int pid,
				   unsigned long long used)
{
	if (!uuid || strcmp(uuid, mig_uuid) || nmig_procs == MAX_PROCS)
		return -1;
	mig_procs[nmig_procs++] = (struct proc_info){ .pid = pid, .used = used };
	return 0;
}
