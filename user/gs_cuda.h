/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * user/gs_cuda.h: the subset of the CUDA Driver API that gpusleep calls
 * (user/backend_cuda.c), that its stand-in driver implements
 * (tests/host/fake_libcuda.c) and that benchmark 6 uses
 * (bench/gpu/bench_cuda.c), declared here so that none of them needs the
 * CUDA toolkit's cuda.h to build: the driver is loaded at run time
 * (dlopen("libcuda.so.1")), so only the types, the values and the
 * entry points' prototypes are needed, and these are few.
 *
 * What is declared follows the ABI of CUDA 12.0 (the version the backend
 * asks cuGetProcAddress for) on 64-bit Linux, with cuda.h's names. Each
 * value, each structure layout and each prototype below is checked
 * against the toolkit's cuda.h, where one is installed, by
 * tests/host/test_cuda_decls.sh: the values and layouts from the lists
 * below, the prototypes by redeclaring them after cuda.h (the compiler
 * refuses an incompatible one), and the exported (versioned) name of each
 * entry point against what cuda.h maps its base name to.
 *
 * Written from NVIDIA's published CUDA Driver API reference (the values
 * are the ABI itself); no text of cuda.h is copied.
 *
 * GS_CUDA_PROTOS_ONLY (defined by the check, after including cuda.h):
 * only the lists and the prototypes, in terms of cuda.h's own types.
 */
#ifndef GPUSLEEP_USER_GS_CUDA_H
#define GPUSLEEP_USER_GS_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* ----------------------------------------------------------- the lists */
/* CUresult values: X(name, value) */
#define GS_CU_RESULTS(X)						\
	X(CUDA_SUCCESS, 0)						\
	X(CUDA_ERROR_INVALID_VALUE, 1)					\
	X(CUDA_ERROR_OUT_OF_MEMORY, 2)					\
	X(CUDA_ERROR_NOT_INITIALIZED, 3)				\
	X(CUDA_ERROR_DEINITIALIZED, 4)					\
	X(CUDA_ERROR_STUB_LIBRARY, 34)					\
	X(CUDA_ERROR_NO_DEVICE, 100)					\
	X(CUDA_ERROR_INVALID_DEVICE, 101)				\
	X(CUDA_ERROR_INVALID_CONTEXT, 201)				\
	X(CUDA_ERROR_ECC_UNCORRECTABLE, 214)				\
	X(CUDA_ERROR_INVALID_HANDLE, 400)				\
	X(CUDA_ERROR_NOT_FOUND, 500)					\
	X(CUDA_ERROR_NOT_READY, 600)					\
	X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)				\
	X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)				\
	X(CUDA_ERROR_ASSERT, 710)					\
	X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714)				\
	X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)				\
	X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)				\
	X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717)			\
	X(CUDA_ERROR_INVALID_PC, 718)					\
	X(CUDA_ERROR_LAUNCH_FAILED, 719)				\
	X(CUDA_ERROR_NOT_PERMITTED, 800)				\
	X(CUDA_ERROR_NOT_SUPPORTED, 801)				\
	X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)			\
	X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)			\
	X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906)			\
	X(CUDA_ERROR_UNKNOWN, 999)

/* the other enumerations' values: X(enum, name, value) */
#define GS_CU_VALUES(X)							\
	X(CUdevice_attribute,						\
	  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)	\
	X(CUdevice_attribute,						\
	  CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 103) \
	X(CUdevice_attribute,						\
	  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 110) \
	X(CUdevice_attribute, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 134)	\
	X(CUmemAllocationType, CU_MEM_ALLOCATION_TYPE_INVALID, 0)	\
	X(CUmemAllocationType, CU_MEM_ALLOCATION_TYPE_PINNED, 1)	\
	X(CUmemAllocationHandleType, CU_MEM_HANDLE_TYPE_NONE, 0)	\
	X(CUmemAllocationHandleType,					\
	  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1)			\
	X(CUmemLocationType, CU_MEM_LOCATION_TYPE_INVALID, 0)		\
	X(CUmemLocationType, CU_MEM_LOCATION_TYPE_DEVICE, 1)		\
	X(CUmemAccess_flags, CU_MEM_ACCESS_FLAGS_PROT_NONE, 0)		\
	X(CUmemAccess_flags, CU_MEM_ACCESS_FLAGS_PROT_READ, 1)		\
	X(CUmemAccess_flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 3)	\
	X(CUmemAllocationGranularity_flags,				\
	  CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0)				\
	X(CUmemAllocationGranularity_flags,				\
	  CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, 1)			\
	X(CUstreamCaptureStatus, CU_STREAM_CAPTURE_STATUS_NONE, 0)	\
	X(CUstreamCaptureStatus, CU_STREAM_CAPTURE_STATUS_ACTIVE, 1)	\
	X(CUstreamCaptureStatus, CU_STREAM_CAPTURE_STATUS_INVALIDATED, 2) \
	X(CUstream_flags, CU_STREAM_DEFAULT, 0)				\
	X(CUstream_flags, CU_STREAM_NON_BLOCKING, 1)			\
	X(CUevent_flags, CU_EVENT_DEFAULT, 0)				\
	X(CUevent_flags, CU_EVENT_DISABLE_TIMING, 2)			\
	X(CUdriverProcAddress_flags, CU_GET_PROC_ADDRESS_DEFAULT, 0)	\
	X(CUdriverProcAddressQueryResult, CU_GET_PROC_ADDRESS_SUCCESS, 0) \
	X(CUdriverProcAddressQueryResult,				\
	  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)			\
	X(CUdriverProcAddressQueryResult,				\
	  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)

/* preprocessor constants: X(name, value) */
#define GS_CU_DEFINES(X)						\
	X(CU_MEMHOSTALLOC_PORTABLE, 0x01)

/* the sizes of the types and structures, and each member used: */
#define GS_CU_SIZES(X)							\
	X(CUresult, 4)							\
	X(CUdevice, 4)							\
	X(CUdeviceptr, 8)						\
	X(cuuint64_t, 8)						\
	X(CUmemGenericAllocationHandle, 8)				\
	X(CUstreamCaptureStatus, 4)					\
	X(CUmemAllocationGranularity_flags, 4)				\
	X(CUdevice_attribute, 4)					\
	X(CUdriverProcAddressQueryResult, 4)				\
	X(CUuuid, 16)							\
	X(CUmemLocation, 8)						\
	X(CUmemAccessDesc, 12)						\
	X(CUmemAllocationProp, 32)
/* X(struct type, member, offset) */
#define GS_CU_MEMBERS(X)						\
	X(CUuuid, bytes, 0)						\
	X(CUmemLocation, type, 0)					\
	X(CUmemLocation, id, 4)						\
	X(CUmemAccessDesc, location, 0)					\
	X(CUmemAccessDesc, flags, 8)					\
	X(CUmemAllocationProp, type, 0)					\
	X(CUmemAllocationProp, requestedHandleTypes, 4)			\
	X(CUmemAllocationProp, location, 8)				\
	X(CUmemAllocationProp, win32HandleMetaData, 16)			\
	X(CUmemAllocationProp, allocFlags, 24)				\
	X(CUmemAllocationProp, allocFlags.compressionType, 24)		\
	X(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable, 25)	\
	X(CUmemAllocationProp, allocFlags.usage, 26)			\
	X(CUmemAllocationProp, allocFlags.reserved, 28)

/*
 * The entry points: X(base name, exported name). The backend asks
 * cuGetProcAddress for the base name with cudaVersion 12000 and falls
 * back on dlsym of the exported name, the one whose ABI the prototype
 * below describes (cuda.h maps the base name to it).
 */
#define GS_CU_ENTRY_POINTS(X)						\
	X(cuGetErrorName, cuGetErrorName)				\
	X(cuInit, cuInit)						\
	X(cuDeviceGet, cuDeviceGet)					\
	X(cuDeviceGetCount, cuDeviceGetCount)				\
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)		\
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)	\
	X(cuCtxSetCurrent, cuCtxSetCurrent)				\
	X(cuCtxGetCurrent, cuCtxGetCurrent)				\
	X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity)	\
	X(cuMemAddressReserve, cuMemAddressReserve)			\
	X(cuMemAddressFree, cuMemAddressFree)				\
	X(cuMemCreate, cuMemCreate)					\
	X(cuMemRelease, cuMemRelease)					\
	X(cuMemMap, cuMemMap)						\
	X(cuMemSetAccess, cuMemSetAccess)				\
	X(cuMemGetAccess, cuMemGetAccess)				\
	X(cuMemUnmap, cuMemUnmap)					\
	X(cuMemHostAlloc, cuMemHostAlloc)				\
	X(cuMemFreeHost, cuMemFreeHost)					\
	X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)			\
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)			\
	X(cuMemsetD32Async, cuMemsetD32Async)				\
	X(cuStreamCreate, cuStreamCreate)				\
	X(cuStreamSynchronize, cuStreamSynchronize)			\
	X(cuStreamDestroy, cuStreamDestroy_v2)				\
	X(cuStreamWaitEvent, cuStreamWaitEvent)				\
	X(cuStreamIsCapturing, cuStreamIsCapturing)			\
	X(cuCtxSynchronize, cuCtxSynchronize)				\
	X(cuMemGetInfo, cuMemGetInfo_v2)				\
	X(cuDeviceGetAttribute, cuDeviceGetAttribute)			\
	X(cuEventCreate, cuEventCreate)					\
	X(cuEventRecord, cuEventRecord)					\
	X(cuEventSynchronize, cuEventSynchronize)			\
	X(cuEventQuery, cuEventQuery)					\
	X(cuEventDestroy, cuEventDestroy_v2)				\
	X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId)			\
	X(cuDeviceGetUuid, cuDeviceGetUuid_v2)				\
	X(cuGetProcAddress, cuGetProcAddress_v2)

/* ----------------------------------------------------------- the types */
#ifndef GS_CUDA_PROTOS_ONLY
_Static_assert(sizeof(void *) == 8, "gs_cuda.h describes 64-bit Linux");

#define GS_CU_ENUM_VALUE(name, value) name = value,
typedef enum cudaError_enum { GS_CU_RESULTS(GS_CU_ENUM_VALUE) } CUresult;
#undef GS_CU_ENUM_VALUE

typedef uint64_t cuuint64_t;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;

typedef enum CUdevice_attribute_enum {
	CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
	CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
	CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134,
} CUdevice_attribute;
typedef enum CUmemAllocationType_enum {
	CU_MEM_ALLOCATION_TYPE_INVALID = 0,
	CU_MEM_ALLOCATION_TYPE_PINNED = 1,
} CUmemAllocationType;
typedef enum CUmemAllocationHandleType_enum {
	CU_MEM_HANDLE_TYPE_NONE = 0,
	CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
} CUmemAllocationHandleType;
typedef enum CUmemLocationType_enum {
	CU_MEM_LOCATION_TYPE_INVALID = 0,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
} CUmemLocationType;
typedef enum CUmemAccess_flags_enum {
	CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
	CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
	CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
} CUmemAccess_flags;
typedef enum CUmemAllocationGranularity_flags_enum {
	CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
	CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
} CUmemAllocationGranularity_flags;
typedef enum CUstreamCaptureStatus_enum {
	CU_STREAM_CAPTURE_STATUS_NONE = 0,
	CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
	CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;
typedef enum CUstream_flags_enum {
	CU_STREAM_DEFAULT = 0,
	CU_STREAM_NON_BLOCKING = 1,
} CUstream_flags;
typedef enum CUevent_flags_enum {
	CU_EVENT_DEFAULT = 0,
	CU_EVENT_DISABLE_TIMING = 2,
} CUevent_flags;
typedef enum CUdriverProcAddress_flags_enum {
	CU_GET_PROC_ADDRESS_DEFAULT = 0,
} CUdriverProcAddress_flags;
typedef enum CUdriverProcAddressQueryResult_enum {
	CU_GET_PROC_ADDRESS_SUCCESS = 0,
	CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
	CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

#define CU_MEMHOSTALLOC_PORTABLE 0x01

typedef struct CUmemLocation_st {
	CUmemLocationType type;
	int id;
} CUmemLocation;
typedef struct CUmemAccessDesc_st {
	CUmemLocation location;
	CUmemAccess_flags flags;
} CUmemAccessDesc;
typedef struct CUmemAllocationProp_st {
	CUmemAllocationType type;
	CUmemAllocationHandleType requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;	/* Windows only; 0 here */
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

/* the lists describe these very declarations */
#define GS_CU_CHECK_VALUE(e, name, value) \
	_Static_assert((long long)(name) == (value), #name);
GS_CU_VALUES(GS_CU_CHECK_VALUE)
#undef GS_CU_CHECK_VALUE
#define GS_CU_CHECK_SIZE(t, size) \
	_Static_assert(sizeof(t) == (size), "sizeof(" #t ")");
GS_CU_SIZES(GS_CU_CHECK_SIZE)
#undef GS_CU_CHECK_SIZE
#define GS_CU_CHECK_MEMBER(t, m, off) \
	_Static_assert(offsetof(t, m) == (off), "offsetof(" #t ", " #m ")");
GS_CU_MEMBERS(GS_CU_CHECK_MEMBER)
#undef GS_CU_CHECK_MEMBER
#endif /* !GS_CUDA_PROTOS_ONLY */

/* ------------------------------------------------------ the prototypes */
/* each under the exported name that has the CUDA 12.0 ABI */
CUresult cuGetErrorName(CUresult error, const char **name);
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *dev, int ordinal);
CUresult cuDeviceGetCount(int *count);
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *ctx);
CUresult cuMemGetAllocationGranularity(size_t *gran,
		const CUmemAllocationProp *prop,
		CUmemAllocationGranularity_flags which);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
			     CUdeviceptr addr, unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		  CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
			const CUmemAccessDesc *access, size_t count);
CUresult cuMemGetAccess(unsigned long long *flags,
			const CUmemLocation *location, CUdeviceptr ptr);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemHostAlloc(void **host, size_t size, unsigned int flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src,
			      size_t size, CUstream stream);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
			      size_t size, CUstream stream);
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
			  CUstream stream);
CUresult cuStreamCreate(CUstream *stream, unsigned int flags);
CUresult cuStreamSynchronize(CUstream stream);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuStreamWaitEvent(CUstream stream, CUevent event,
			   unsigned int flags);
CUresult cuStreamIsCapturing(CUstream stream,
			     CUstreamCaptureStatus *status);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr,
			      CUdevice dev);
CUresult cuEventCreate(CUevent *event, unsigned int flags);
CUresult cuEventRecord(CUevent event, CUstream stream);
CUresult cuEventSynchronize(CUevent event);
CUresult cuEventQuery(CUevent event);
CUresult cuEventDestroy_v2(CUevent event);
CUresult cuDeviceGetPCIBusId(char *bus_id, int len, CUdevice dev);
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
CUresult cuGetProcAddress_v2(const char *symbol, void **fn, int version,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status);

#endif /* GPUSLEEP_USER_GS_CUDA_H */
