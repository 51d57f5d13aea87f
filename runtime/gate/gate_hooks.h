/*
 * gate_hooks.h — every driver entry point the launch gate interposes,
 * declared once (STYLE rule 15).  One line per exported driver symbol:
 *
 *   X(kind, symbol, ptsz, params, args, stream)
 *
 *   kind    SUBMIT (puts work on a stream: gated), GRAPH (a graph
 *           launch: gated as SUBMIT, then the graphs' memory is charged
 *           to the allocation's limit), CAPBEGIN / CAPEND
 *           (stream capture starts / ends: counted, never gated), MEM
 *           (device memory: held to the allocation's limit; these
 *           wrappers are written by hand in gate.c, not generated)
 *   symbol  the name libcuda exports, with its _vN suffix: the versioned
 *           variant the CUDA 12/13 headers map the API name to
 *   ptsz    1 for the per-thread-default-stream twin (_ptsz), 0 otherwise
 *   params  the parameter list, args the same names as an argument list
 *   stream  the expression that names the stream the call submits to
 *
 * The list expands into the exported wrappers, the table of real
 * pointers, the dlsym map and the cuGetProcAddress map (gate.c).  The
 * base name cuGetProcAddress asks for is the symbol without _vN/_ptsz;
 * the gate never needs it, because it compares the pointer the real
 * cuGetProcAddress returns with the real pointers of this list.
 * tests/gpu/gate_symbols.sh checks that the driver exports every symbol.
 */
#ifndef GATE_HOOKS_H
#define GATE_HOOKS_H

#include "gate_cuda.h"

#define GATE_P_LAUNCH (CUfunction f, unsigned gx, unsigned gy, unsigned gz, \
		       unsigned bx, unsigned by, unsigned bz, unsigned shm, \
		       CUstream s, void **kp, void **extra)
#define GATE_A_LAUNCH (f, gx, gy, gz, bx, by, bz, shm, s, kp, extra)
#define GATE_P_COOP (CUfunction f, unsigned gx, unsigned gy, unsigned gz, \
		     unsigned bx, unsigned by, unsigned bz, unsigned shm, \
		     CUstream s, void **kp)
#define GATE_A_COOP (f, gx, gy, gz, bx, by, bz, shm, s, kp)
#define GATE_P_EX (const CUlaunchConfig *cfg, CUfunction f, void **kp, \
		   void **extra)
#define GATE_A_EX (cfg, f, kp, extra)
#define GATE_S_EX (cfg != NULL ? cfg->hStream : NULL)
#define GATE_P_GRAPH (CUgraphExec ge, CUstream s)
#define GATE_A_GRAPH (ge, s)
#define GATE_P_CPY (CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
#define GATE_A_CPY (d, src, n, s)
#define GATE_P_HTOD (CUdeviceptr d, const void *src, size_t n, CUstream s)
#define GATE_A_HTOD (d, src, n, s)
#define GATE_P_DTOH (void *d, CUdeviceptr src, size_t n, CUstream s)
#define GATE_A_DTOH (d, src, n, s)
#define GATE_P_SET8 (CUdeviceptr d, unsigned char v, size_t n, CUstream s)
#define GATE_A_SET8 (d, v, n, s)
#define GATE_P_SET32 (CUdeviceptr d, unsigned v, size_t n, CUstream s)
#define GATE_A_SET32 (d, v, n, s)
#define GATE_P_CAP2 (CUstream s, CUstreamCaptureMode mode)
#define GATE_A_CAP2 (s, mode)
#define GATE_P_CAP1 (CUstream s)
#define GATE_A_CAP1 (s)
#define GATE_P_CAPG (CUstream s, CUgraph gr, const void *deps, \
		     const void *edata, size_t ndeps, CUstreamCaptureMode mode)
#define GATE_A_CAPG (s, gr, deps, edata, ndeps, mode)
#define GATE_P_END (CUstream s, CUgraph *gp)
#define GATE_A_END (s, gp)
#define GATE_P_MALLOC (CUdeviceptr *dp, size_t n)
#define GATE_A_MALLOC (dp, n)
#define GATE_P_MMANAGED (CUdeviceptr *dp, size_t n, unsigned flags)
#define GATE_A_MMANAGED (dp, n, flags)
#define GATE_P_MPITCH (CUdeviceptr *dp, size_t *pitch, size_t w, size_t h, \
		       unsigned elem)
#define GATE_A_MPITCH (dp, pitch, w, h, elem)
#define GATE_P_MASYNC (CUdeviceptr *dp, size_t n, CUstream s)
#define GATE_A_MASYNC (dp, n, s)
#define GATE_P_MFREE (CUdeviceptr d)
#define GATE_A_MFREE (d)
#define GATE_P_MFREEA (CUdeviceptr d, CUstream s)
#define GATE_A_MFREEA (d, s)
#define GATE_P_MINFO (size_t *free_b, size_t *total_b)
#define GATE_A_MINFO (free_b, total_b)
#define GATE_P_MPOOL (CUdeviceptr *dp, size_t n, void *pool, CUstream s)
#define GATE_A_MPOOL (dp, n, pool, s)
#define GATE_P_MCREATE (uint64_t *hp, size_t n, const void *prop, \
			unsigned long long flags)
#define GATE_A_MCREATE (hp, n, prop, flags)
#define GATE_P_MRELEASE (uint64_t h)
#define GATE_A_MRELEASE (h)
#define GATE_P_MPDESTROY (CUmemoryPool p)
#define GATE_A_MPDESTROY (p)
#define GATE_P_ARR (CUarray *ap, const CUDA_ARRAY_DESCRIPTOR *d)
#define GATE_A_ARR (ap, d)
#define GATE_P_ARR3 (CUarray *ap, const CUDA_ARRAY3D_DESCRIPTOR *d)
#define GATE_A_ARR3 (ap, d)
#define GATE_P_MIPMAP (CUmipmappedArray *mp, \
		       const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
#define GATE_A_MIPMAP (mp, d, levels)
#define GATE_P_ARRDESTROY (CUarray a)
#define GATE_A_ARRDESTROY (a)
#define GATE_P_MIPDESTROY (CUmipmappedArray m)
#define GATE_A_MIPDESTROY (m)

#define GATE_HOOKS(X) \
	X(SUBMIT, cuLaunchKernel, 0, GATE_P_LAUNCH, GATE_A_LAUNCH, s) \
	X(SUBMIT, cuLaunchKernel_ptsz, 1, GATE_P_LAUNCH, GATE_A_LAUNCH, s) \
	X(SUBMIT, cuLaunchKernelEx, 0, GATE_P_EX, GATE_A_EX, GATE_S_EX) \
	X(SUBMIT, cuLaunchKernelEx_ptsz, 1, GATE_P_EX, GATE_A_EX, GATE_S_EX) \
	X(SUBMIT, cuLaunchCooperativeKernel, 0, GATE_P_COOP, GATE_A_COOP, s) \
	X(SUBMIT, cuLaunchCooperativeKernel_ptsz, 1, GATE_P_COOP, GATE_A_COOP, s) \
	X(GRAPH, cuGraphLaunch, 0, GATE_P_GRAPH, GATE_A_GRAPH, s) \
	X(GRAPH, cuGraphLaunch_ptsz, 1, GATE_P_GRAPH, GATE_A_GRAPH, s) \
	X(SUBMIT, cuMemcpyAsync, 0, GATE_P_CPY, GATE_A_CPY, s) \
	X(SUBMIT, cuMemcpyAsync_ptsz, 1, GATE_P_CPY, GATE_A_CPY, s) \
	X(SUBMIT, cuMemcpyDtoDAsync_v2, 0, GATE_P_CPY, GATE_A_CPY, s) \
	X(SUBMIT, cuMemcpyDtoDAsync_v2_ptsz, 1, GATE_P_CPY, GATE_A_CPY, s) \
	X(SUBMIT, cuMemcpyHtoDAsync_v2, 0, GATE_P_HTOD, GATE_A_HTOD, s) \
	X(SUBMIT, cuMemcpyHtoDAsync_v2_ptsz, 1, GATE_P_HTOD, GATE_A_HTOD, s) \
	X(SUBMIT, cuMemcpyDtoHAsync_v2, 0, GATE_P_DTOH, GATE_A_DTOH, s) \
	X(SUBMIT, cuMemcpyDtoHAsync_v2_ptsz, 1, GATE_P_DTOH, GATE_A_DTOH, s) \
	X(SUBMIT, cuMemsetD8Async, 0, GATE_P_SET8, GATE_A_SET8, s) \
	X(SUBMIT, cuMemsetD8Async_ptsz, 1, GATE_P_SET8, GATE_A_SET8, s) \
	X(SUBMIT, cuMemsetD32Async, 0, GATE_P_SET32, GATE_A_SET32, s) \
	X(SUBMIT, cuMemsetD32Async_ptsz, 1, GATE_P_SET32, GATE_A_SET32, s) \
	X(CAPBEGIN, cuStreamBeginCapture, 0, GATE_P_CAP1, GATE_A_CAP1, s) \
	X(CAPBEGIN, cuStreamBeginCapture_ptsz, 1, GATE_P_CAP1, GATE_A_CAP1, s) \
	X(CAPBEGIN, cuStreamBeginCapture_v2, 0, GATE_P_CAP2, GATE_A_CAP2, s) \
	X(CAPBEGIN, cuStreamBeginCapture_v2_ptsz, 1, GATE_P_CAP2, GATE_A_CAP2, s) \
	X(CAPBEGIN, cuStreamBeginCaptureToGraph, 0, GATE_P_CAPG, GATE_A_CAPG, s) \
	X(CAPBEGIN, cuStreamBeginCaptureToGraph_ptsz, 1, GATE_P_CAPG, GATE_A_CAPG, s) \
	X(CAPEND, cuStreamEndCapture, 0, GATE_P_END, GATE_A_END, s) \
	X(CAPEND, cuStreamEndCapture_ptsz, 1, GATE_P_END, GATE_A_END, s) \
	X(MEM, cuMemAlloc_v2, 0, GATE_P_MALLOC, GATE_A_MALLOC, NULL) \
	X(MEM, cuMemAllocManaged, 0, GATE_P_MMANAGED, GATE_A_MMANAGED, NULL) \
	X(MEM, cuMemAllocPitch_v2, 0, GATE_P_MPITCH, GATE_A_MPITCH, NULL) \
	X(MEM, cuMemAllocAsync, 0, GATE_P_MASYNC, GATE_A_MASYNC, s) \
	X(MEM, cuMemAllocAsync_ptsz, 1, GATE_P_MASYNC, GATE_A_MASYNC, s) \
	X(MEM, cuMemFree_v2, 0, GATE_P_MFREE, GATE_A_MFREE, NULL) \
	X(MEM, cuMemFreeAsync, 0, GATE_P_MFREEA, GATE_A_MFREEA, s) \
	X(MEM, cuMemFreeAsync_ptsz, 1, GATE_P_MFREEA, GATE_A_MFREEA, s) \
	X(MEM, cuMemGetInfo_v2, 0, GATE_P_MINFO, GATE_A_MINFO, NULL) \
	X(MEM, cuMemAllocFromPoolAsync, 0, GATE_P_MPOOL, GATE_A_MPOOL, s) \
	X(MEM, cuMemAllocFromPoolAsync_ptsz, 1, GATE_P_MPOOL, GATE_A_MPOOL, s) \
	X(MEM, cuMemCreate, 0, GATE_P_MCREATE, GATE_A_MCREATE, NULL) \
	X(MEM, cuMemRelease, 0, GATE_P_MRELEASE, GATE_A_MRELEASE, NULL) \
	X(MEM, cuMemPoolDestroy, 0, GATE_P_MPDESTROY, GATE_A_MPDESTROY, NULL) \
	X(MEM, cuArrayCreate_v2, 0, GATE_P_ARR, GATE_A_ARR, NULL) \
	X(MEM, cuArray3DCreate_v2, 0, GATE_P_ARR3, GATE_A_ARR3, NULL) \
	X(MEM, cuMipmappedArrayCreate, 0, GATE_P_MIPMAP, GATE_A_MIPMAP, NULL) \
	X(MEM, cuArrayDestroy, 0, GATE_P_ARRDESTROY, GATE_A_ARRDESTROY, NULL) \
	X(MEM, cuMipmappedArrayDestroy, 0, GATE_P_MIPDESTROY, \
	  GATE_A_MIPDESTROY, NULL)

/* The driver entry points the gate itself calls (never interposed). */
#define GATE_DRIVER(X) \
	X(cuEventCreate, (CUevent *e, unsigned flags)) \
	X(cuEventDestroy_v2, (CUevent e)) \
	X(cuEventRecord, (CUevent e, CUstream s)) \
	X(cuEventQuery, (CUevent e)) \
	X(cuEventSynchronize, (CUevent e)) \
	X(cuEventElapsedTime, (float *ms, CUevent a, CUevent b)) \
	X(cuCtxGetCurrent, (CUcontext *c)) \
	X(cuCtxSetCurrent, (CUcontext c)) \
	X(cuCtxGetDevice, (CUdevice *d)) \
	X(cuDeviceGetUuid, (CUuuid *u, CUdevice d)) \
	X(cuDeviceGetUuid_v2, (CUuuid *u, CUdevice d)) \
	X(cuStreamGetCtx, (CUstream s, CUcontext *c)) \
	X(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode *m)) \
	X(cuCtxSynchronize, (void)) \
	X(cuDeviceGetMemPool, (CUmemoryPool *p, CUdevice d)) \
	X(cuMemPoolGetAttribute, (CUmemoryPool p, int attr, void *v)) \
	X(cuMemPoolTrimTo, (CUmemoryPool p, size_t keep)) \
	X(cuDeviceGetGraphMemAttribute, (CUdevice d, int attr, void *v)) \
	X(cuDeviceGraphMemTrim, (CUdevice d))

#endif /* GATE_HOOKS_H */
