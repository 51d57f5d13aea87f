/*
 * gate_cuda.h — the few CUDA driver types the launch gate needs, pinned
 * here so that the gate builds without CUDA headers (STYLE rule 16).
 * Layouts follow the driver ABI (cuda.h of CUDA 12 and 13); only what the
 * gate reads is spelled out.
 */
#ifndef GATE_CUDA_H
#define GATE_CUDA_H

#include <stdint.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraph_st *CUgraph;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;

/* CUDA arrays: what the gate reads of their descriptors (cuda.h) */
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
	size_t Width, Height;
	int Format;			/* CUarray_format */
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
	size_t Width, Height, Depth;
	int Format;			/* CUarray_format */
	unsigned int NumChannels;
	unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef uint64_t CUdeviceptr;
typedef uint64_t cuuint64_t;
typedef int CUstreamCaptureMode;
typedef int CUdriverProcAddressQueryResult;
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;

#define CUDA_SUCCESS			0
#define CUDA_ERROR_OUT_OF_MEMORY	2
#define CUDA_ERROR_NOT_READY		600
#define CUDA_ERROR_NOT_FOUND		500
#define CUDA_ERROR_INVALID_DEVICE	101

/* CUmemPool_attribute values (cuuint64_t) */
#define CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT	5
/* CUgraphMem_attribute: memory the graphs' allocator holds (cuuint64_t) */
#define CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT	2
#define CU_MEMPOOL_ATTR_USED_MEM_CURRENT	7

#define CU_STREAM_LEGACY		((CUstream)0x1)
#define CU_STREAM_PER_THREAD		((CUstream)0x2)
#define CU_EVENT_DEFAULT		0x0
#define CU_STREAM_CAPTURE_MODE_RELAXED	2
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM	(1 << 1)

/* cuLaunchKernelEx's configuration: the stream is all the gate reads. */
typedef struct CUlaunchConfig_st {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	void *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

#endif /* GATE_CUDA_H */
