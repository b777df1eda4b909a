// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/fake_cudart_client.c: a library that calls the CUDA runtime
 * as PyTorch's libc10_cuda.so does: linked against libcudart.so.12 and
 * calling cudaMalloc / cudaFree through its PLT, so that a preloaded
 * cudaMalloc (torch_memory_saver's hook, user/tms/hook.c) is the one it
 * reaches even when it is loaded with RTLD_LOCAL (Python's ctypes, as
 * Python loads PyTorch).
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cudaError_t;
cudaError_t cudaMalloc(void **devPtr, size_t size);
cudaError_t cudaFree(void *devPtr);
cudaError_t cudaSetDevice(int device);

EXPORT void *client_malloc(size_t size)
{
	void *p = NULL;

	return cudaMalloc(&p, size) ? NULL : p;
}

EXPORT int client_free(void *p)
{
	return cudaFree(p);
}

EXPORT int client_set_device(int device)
{
	return cudaSetDevice(device);
}
