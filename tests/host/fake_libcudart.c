// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/fake_libcudart.c: a stand-in for the CUDA runtime
 * (libcudart.so.12), for the torch_memory_saver hook libraries
 * (user/tms/hook.c): the few functions they and their callers reach, with
 * the runtime's documented signatures (cuda_runtime_api.h, CUDA 12;
 * tests/host/test_tms_hook.py parses the toolkit's header and compares).
 *
 * "Device" memory is host memory here (mmap), so that a test sees it:
 * cudaMalloc maps size bytes (resident once touched), cudaFree unmaps
 * them. It tells the memory the runtime itself handed out from the memory
 * gpusleep's hook kept for itself: fakecudart_live_bytes() is what the
 * runtime holds now, fakecudart_calls("cudaMalloc") how often it was
 * reached.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;	/* enum cudaError, driver_types.h */
#define cudaSuccess			0
#define cudaErrorInvalidValue		1
#define cudaErrorMemoryAllocation	2
#define cudaErrorInvalidDevice		101

#define MAX_LIVE 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { void *p; size_t size; } live[MAX_LIVE];
static size_t live_bytes;
static long nr_malloc, nr_free;
static _Thread_local int device;

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	void *p;
	int i;

	if (!devPtr)
		return cudaErrorInvalidValue;
	pthread_mutex_lock(&lock);
	nr_malloc++;
	pthread_mutex_unlock(&lock);
	*devPtr = NULL;
	if (!size)
		return cudaSuccess;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return cudaErrorMemoryAllocation;
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAX_LIVE && live[i].p; i++)
		;
	if (i < MAX_LIVE) {
		live[i].p = p;
		live[i].size = size;
		live_bytes += size;
	}
	pthread_mutex_unlock(&lock);
	if (i == MAX_LIVE) {
		munmap(p, size);
		return cudaErrorMemoryAllocation;
	}
	*devPtr = p;
	return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *devPtr)
{
	cudaError_t ret = cudaErrorInvalidValue;

	pthread_mutex_lock(&lock);
	nr_free++;
	if (!devPtr) {
		ret = cudaSuccess;	/* initialises the context */
	} else {
		for (int i = 0; i < MAX_LIVE; i++) {
			if (live[i].p != devPtr)
				continue;
			munmap(live[i].p, live[i].size);
			live_bytes -= live[i].size;
			live[i].p = NULL;
			ret = cudaSuccess;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

EXPORT cudaError_t cudaGetDevice(int *dev)
{
	if (!dev)
		return cudaErrorInvalidValue;
	*dev = device;
	return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int dev)
{
	if (dev < 0 || dev > 7)
		return cudaErrorInvalidDevice;
	device = dev;
	return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

EXPORT const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	}
	return "unrecognized error code";
}

/* the stand-in's own: what the runtime holds, how often it was called */
EXPORT size_t fakecudart_live_bytes(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = live_bytes;
	pthread_mutex_unlock(&lock);
	return n;
}

EXPORT long fakecudart_calls(const char *fn)
{
	long n = -1;

	pthread_mutex_lock(&lock);
	if (!strcmp(fn, "cudaMalloc"))
		n = nr_malloc;
	else if (!strcmp(fn, "cudaFree"))
		n = nr_free;
	pthread_mutex_unlock(&lock);
	return n;
}
