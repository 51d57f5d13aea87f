/*
 * standin_cuda.c — a stand-in libcuda.so.1 for testing the launch gate
 * without a GPU (STYLE rule 21).  Built as libcuda.so.1 in its own
 * directory and found through LD_LIBRARY_PATH.
 *
 * One simulated GPU per process, one engine: work runs in submission
 * order across streams.  A kernel's duration in microseconds is its
 * CUfunction handle's value (a graph's: its CUgraphExec's value); a copy
 * or memset takes 1 us + 1 ns per 10 bytes.  Events complete when the
 * work before them on their stream has; cuEventElapsedTime gives the
 * simulated span.  Devices: 2 (contexts 0 and 1).  Stream capture: work
 * on a capturing stream is recorded, not run; an event recorded on a
 * capturing stream, or an event query or synchronize from a thread whose
 * capture mode is not relaxed while a global-mode capture runs,
 * invalidates the capture (cuStreamEndCapture then fails), as the real
 * driver does.
 *
 * Device memory: 80 GiB; allocations get fresh addresses (never reused)
 * and cuMemGetInfo reports what is left; a free of an address it never
 * gave out fails (CUDA_ERROR_INVALID_VALUE).
 *
 * Stream-ordered pools, as the driver keeps them: the device's default
 * pool (also its current one) and pools from cuMemPoolCreate.  A pool
 * reserves device memory in 2 MiB chunks and serves its allocations from
 * what it reserved (no fragmentation); cuMemFreeAsync gives an
 * allocation back to the pool but it stays in use until a synchronize
 * (cuCtxSynchronize, cuStreamSynchronize) observes the free; at a
 * synchronize a pool keeps what it reserved up to its release threshold
 * (default 0) and gives the rest back to the device; cuMemPoolTrimTo
 * gives back everything not in use beyond minBytesToKeep.  Attributes:
 * RELEASE_THRESHOLD (set and get), RESERVED_MEM_CURRENT, USED_MEM_CURRENT.
 * CUDA arrays take width x height x depth x channels x 4 bytes (every
 * format as 32-bit: the tests use CU_AD_FORMAT_FLOAT), mipmapped ones
 * the sum of their halved levels; the handle is the "address".
 *
 * cuGetProcAddress(_v2) maps a base name to the versioned symbol (the
 * _v2 copies from CUDA 3.2 on, the _ptsz twin with the
 * per-thread-default-stream flag).  gs_standin_stats() tells the test
 * program what happened (the gate's events included).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gate_cuda.h"
#include "standin_stats.h"

#define EXPORT __attribute__((visibility("default")))

struct sctx {
	int dev;
};

struct sstream {
	uint64_t busy;		/* simulated time its last work ends */
	struct sctx *ctx;
	int capturing;
	int cap_mode;
	int cap_invalid;
};

struct sevent {
	uint64_t ts;
	int recorded;
};

static struct sctx ctxs[2] = { { 0 }, { 1 } };
static struct sstream legacy[2] = { { .ctx = &ctxs[0] }, { .ctx = &ctxs[1] } };
static __thread struct sstream per_thread[2];
static __thread int per_thread_init;
static __thread struct sctx *cur_ctx;
static __thread int tls_cap_mode;	/* 0 global, 1 thread-local, 2 relaxed */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t engine_busy;
static struct gs_standin_stats stats;
static int global_captures;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct sstream *resolve(CUstream s, int ptsz)
{
	struct sctx *c = cur_ctx != NULL ? cur_ctx : &ctxs[0];

	if ((s == NULL && ptsz) || s == CU_STREAM_PER_THREAD) {
		if (!per_thread_init) {
			per_thread[0].ctx = &ctxs[0];
			per_thread[1].ctx = &ctxs[1];
			per_thread_init = 1;
		}
		return &per_thread[c->dev];
	}
	if (s == NULL || s == CU_STREAM_LEGACY)
		return &legacy[c->dev];
	return (struct sstream *)s;
}

/* Put `dur_ns` of work on stream s (simulated). */
static CUresult submit(CUstream s, int ptsz, uint64_t dur_ns, int kernel)
{
	struct sstream *st;
	uint64_t now = now_ns(), start;

	pthread_mutex_lock(&mu);
	st = resolve(s, ptsz);
	if (st->capturing) {
		stats.captured++;
		pthread_mutex_unlock(&mu);
		return CUDA_SUCCESS;
	}
	start = now;
	if (st->busy > start)
		start = st->busy;
	if (engine_busy > start)
		start = engine_busy;
	if (start - now > stats.max_queued_ns)
		stats.max_queued_ns = start - now;
	st->busy = engine_busy = start + dur_ns;
	if (kernel) {
		stats.kernels++;
		stats.kernel_ns += dur_ns;
	} else {
		stats.copies++;
	}
	if (st->ctx->dev == 1)
		stats.dev1_work++;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static void capture_guard(void)
{
	/* a query or sync while a global capture runs (caller's lock) */
	if (global_captures > 0 && tls_cap_mode != 2)
		stats.capture_broken++;
}

/* ---- init, devices, contexts ---------------------------------------- */

EXPORT CUresult cuInit(unsigned flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
	if (ordinal < 0 || ordinal > 1)
		return 101;	/* CUDA_ERROR_INVALID_DEVICE */
	*d = ordinal;
	return CUDA_SUCCESS;
}

/* Device 0's UUID: GATE_STANDIN_UUID (32 hex digits), else
 * GPU-5354414e-4449-4e00-0000-000000000000; device 1 differs in its last
 * byte. */
static void standin_uuid(char out[16], CUdevice d)
{
	const char *e = getenv("GATE_STANDIN_UUID");
	static const char def[16] = "STANDIN";

	memcpy(out, def, 16);
	if (e != NULL) {
		for (int i = 0; i < 16 && e[2 * i] && e[2 * i + 1]; i++) {
			char h[3] = { e[2 * i], e[2 * i + 1], 0 };

			out[i] = (char)strtoul(h, NULL, 16);
		}
	}
	out[15] = (char)(out[15] + d);
}

EXPORT CUresult cuDeviceGetUuid(char *u, CUdevice d)
{
	if (d < 0 || d > 1)
		return 101;
	standin_uuid(u, d);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(char *u, CUdevice d)
{
	return cuDeviceGetUuid(u, d);
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	*c = (CUcontext)&ctxs[d & 1];
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c)
{
	cur_ctx = (struct sctx *)c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c)
{
	*c = (CUcontext)cur_ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *d)
{
	if (cur_ctx == NULL)
		return 201;	/* CUDA_ERROR_INVALID_CONTEXT */
	*d = cur_ctx->dev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
	struct sstream *st = calloc(1, sizeof(*st));

	(void)flags;
	if (st == NULL)
		return 2;	/* CUDA_ERROR_OUT_OF_MEMORY */
	st->ctx = cur_ctx != NULL ? cur_ctx : &ctxs[0];
	*s = (CUstream)st;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
	/* kept allocated: the simulation may still order work behind it,
	 * and a later stream must not reuse the address in this test */
	(void)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *c)
{
	*c = (CUcontext)resolve(s, 0)->ctx;
	return CUDA_SUCCESS;
}

static void wait_until(uint64_t t)
{
	while (now_ns() < t) {
		struct timespec ts = { 0, 20000 };

		nanosleep(&ts, NULL);
	}
}

static void spool_sync(void);

EXPORT CUresult cuStreamSynchronize(CUstream s)
{
	uint64_t t;

	pthread_mutex_lock(&mu);
	t = resolve(s, 0)->busy;
	pthread_mutex_unlock(&mu);
	wait_until(t);
	spool_sync();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
	uint64_t t;

	pthread_mutex_lock(&mu);
	t = resolve(s, 1)->busy;
	pthread_mutex_unlock(&mu);
	wait_until(t);
	spool_sync();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	uint64_t t;

	pthread_mutex_lock(&mu);
	t = engine_busy;
	pthread_mutex_unlock(&mu);
	wait_until(t);
	spool_sync();
	return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------ */

EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags)
{
	struct sevent *ev = calloc(1, sizeof(*ev));

	(void)flags;
	if (ev == NULL)
		return 2;
	*e = (CUevent)ev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	free(e);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream s, int ptsz)
{
	struct sevent *ev = (struct sevent *)e;
	struct sstream *st;
	uint64_t now = now_ns();

	pthread_mutex_lock(&mu);
	st = resolve(s, ptsz);
	stats.event_records++;
	if (st->capturing) {
		/* an event record inside a capture becomes a graph node:
		 * the application's graph is no longer what it captured */
		st->cap_invalid = 1;
		stats.capture_broken++;
		pthread_mutex_unlock(&mu);
		return CUDA_SUCCESS;
	}
	ev->ts = st->busy > now ? st->busy : now;
	ev->recorded = 1;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s)
{
	return event_record(e, s, 0);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s)
{
	return event_record(e, s, 1);
}

EXPORT CUresult cuEventQuery(CUevent e)
{
	struct sevent *ev = (struct sevent *)e;

	pthread_mutex_lock(&mu);
	capture_guard();
	pthread_mutex_unlock(&mu);
	return now_ns() >= ev->ts ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
	pthread_mutex_lock(&mu);
	capture_guard();
	pthread_mutex_unlock(&mu);
	wait_until(((struct sevent *)e)->ts);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	struct sevent *x = (struct sevent *)a, *y = (struct sevent *)b;

	if (!x->recorded || !y->recorded)
		return 400;	/* CUDA_ERROR_INVALID_HANDLE */
	*ms = (float)(((double)y->ts - (double)x->ts) / 1e6);
	return CUDA_SUCCESS;
}

/* ---- work ---------------------------------------------------------------- */

#define K_PARAMS CUfunction f, unsigned gx, unsigned gy, unsigned gz, \
	unsigned bx, unsigned by, unsigned bz, unsigned shm, CUstream s, \
	void **kp, void **extra
#define K_UNUSED (void)gx; (void)gy; (void)gz; (void)bx; (void)by; \
	(void)bz; (void)shm; (void)kp; (void)extra

EXPORT CUresult cuLaunchKernel(K_PARAMS)
{
	K_UNUSED;
	return submit(s, 0, (uint64_t)(uintptr_t)f * 1000, 1);
}

EXPORT CUresult cuLaunchKernel_ptsz(K_PARAMS)
{
	K_UNUSED;
	return submit(s, 1, (uint64_t)(uintptr_t)f * 1000, 1);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f,
				 void **kp, void **extra)
{
	(void)kp; (void)extra;
	return submit(c->hStream, 0, (uint64_t)(uintptr_t)f * 1000, 1);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f,
				      void **kp, void **extra)
{
	(void)kp; (void)extra;
	return submit(c->hStream, 1, (uint64_t)(uintptr_t)f * 1000, 1);
}

static CUresult sgraph_launch(void);

EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	CUresult rc = sgraph_launch();

	if (rc != CUDA_SUCCESS)
		return rc;
	stats.graphs++;
	return submit(s, 0, (uint64_t)(uintptr_t)g * 1000, 1);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
	CUresult rc = sgraph_launch();

	if (rc != CUDA_SUCCESS)
		return rc;
	stats.graphs++;
	return submit(s, 1, (uint64_t)(uintptr_t)g * 1000, 1);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src,
				     size_t n, CUstream s)
{
	(void)d; (void)src;
	return submit(s, 0, 1000 + n / 10, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *src,
					  size_t n, CUstream s)
{
	(void)d; (void)src;
	return submit(s, 1, 1000 + n / 10, 0);
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n,
				 CUstream s)
{
	(void)d; (void)v;
	return submit(s, 0, 1000 + n / 10, 0);
}

EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned v, size_t n,
				      CUstream s)
{
	(void)d; (void)v;
	return submit(s, 1, 1000 + n / 10, 0);
}

/* ---- capture ----------------------------------------------------------- */

static CUresult begin_capture(CUstream s, int ptsz, int mode)
{
	struct sstream *st;

	pthread_mutex_lock(&mu);
	st = resolve(s, ptsz);
	st->capturing = 1;
	st->cap_mode = mode;
	st->cap_invalid = 0;
	if (mode == 0)
		global_captures++;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static CUresult end_capture(CUstream s, int ptsz, CUgraph *g)
{
	struct sstream *st;
	int bad;

	pthread_mutex_lock(&mu);
	st = resolve(s, ptsz);
	bad = st->cap_invalid;
	if (st->capturing && st->cap_mode == 0)
		global_captures--;
	st->capturing = 0;
	pthread_mutex_unlock(&mu);
	*g = (CUgraph)(uintptr_t)1;
	return bad ? 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */ :
		CUDA_SUCCESS;
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m)
{
	return begin_capture(s, 0, m);
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s,
					     CUstreamCaptureMode m)
{
	return begin_capture(s, 1, m);
}

EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
	return end_capture(s, 0, g);
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g)
{
	return end_capture(s, 1, g);
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *m)
{
	int old = tls_cap_mode;

	tls_cap_mode = *m;
	*m = old;
	return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress ---------------------------------------------------- */

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver,
				 cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
				    cuuint64_t flags,
				    CUdriverProcAddressQueryResult *status);

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n);
EXPORT CUresult cuMemFree_v2(CUdeviceptr d);
EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b);

struct entry {
	const char *name;
	int v2_from;		/* CUDA version of the _v2 copy, 0: none */
	void *plain, *ptsz, *v2, *v2_ptsz;
};

static const struct entry table[] = {
	{ "cuInit", 0, (void *)cuInit, NULL, NULL, NULL },
	{ "cuDriverGetVersion", 0, (void *)cuDriverGetVersion, NULL, NULL,
	  NULL },
	{ "cuDeviceGet", 0, (void *)cuDeviceGet, NULL, NULL, NULL },
	{ "cuDevicePrimaryCtxRetain", 0, (void *)cuDevicePrimaryCtxRetain,
	  NULL, NULL, NULL },
	{ "cuCtxSetCurrent", 0, (void *)cuCtxSetCurrent, NULL, NULL, NULL },
	{ "cuCtxGetCurrent", 0, (void *)cuCtxGetCurrent, NULL, NULL, NULL },
	{ "cuStreamCreate", 0, (void *)cuStreamCreate, NULL, NULL, NULL },
	{ "cuStreamDestroy", 4000, NULL, NULL, (void *)cuStreamDestroy_v2,
	  NULL },
	{ "cuStreamSynchronize", 0, (void *)cuStreamSynchronize,
	  (void *)cuStreamSynchronize_ptsz, NULL, NULL },
	{ "cuCtxSynchronize", 0, (void *)cuCtxSynchronize, NULL, NULL, NULL },
	{ "cuEventCreate", 0, (void *)cuEventCreate, NULL, NULL, NULL },
	{ "cuEventRecord", 0, (void *)cuEventRecord,
	  (void *)cuEventRecord_ptsz, NULL, NULL },
	{ "cuEventQuery", 0, (void *)cuEventQuery, NULL, NULL, NULL },
	{ "cuEventSynchronize", 0, (void *)cuEventSynchronize, NULL, NULL,
	  NULL },
	{ "cuEventElapsedTime", 0, (void *)cuEventElapsedTime, NULL, NULL,
	  NULL },
	{ "cuLaunchKernel", 0, (void *)cuLaunchKernel,
	  (void *)cuLaunchKernel_ptsz, NULL, NULL },
	{ "cuLaunchKernelEx", 0, (void *)cuLaunchKernelEx,
	  (void *)cuLaunchKernelEx_ptsz, NULL, NULL },
	{ "cuGraphLaunch", 0, (void *)cuGraphLaunch,
	  (void *)cuGraphLaunch_ptsz, NULL, NULL },
	{ "cuMemcpyHtoDAsync", 3020, NULL, NULL,
	  (void *)cuMemcpyHtoDAsync_v2, (void *)cuMemcpyHtoDAsync_v2_ptsz },
	{ "cuMemsetD32Async", 0, (void *)cuMemsetD32Async,
	  (void *)cuMemsetD32Async_ptsz, NULL, NULL },
	{ "cuStreamBeginCapture", 10010, NULL, NULL,
	  (void *)cuStreamBeginCapture_v2,
	  (void *)cuStreamBeginCapture_v2_ptsz },
	{ "cuStreamEndCapture", 0, (void *)cuStreamEndCapture,
	  (void *)cuStreamEndCapture_ptsz, NULL, NULL },
	{ "cuThreadExchangeStreamCaptureMode", 0,
	  (void *)cuThreadExchangeStreamCaptureMode, NULL, NULL, NULL },
	{ "cuGetProcAddress", 12000, (void *)cuGetProcAddress, NULL,
	  (void *)cuGetProcAddress_v2, NULL },
	{ "cuMemAlloc", 3020, NULL, NULL, (void *)cuMemAlloc_v2, NULL },
	{ "cuMemFree", 3020, NULL, NULL, (void *)cuMemFree_v2, NULL },
	{ "cuMemGetInfo", 3020, NULL, NULL, (void *)cuMemGetInfo_v2, NULL },
};

static CUresult lookup(const char *sym, void **pfn, int ver,
		       cuuint64_t flags, int *status)
{
	int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;

	pthread_mutex_lock(&mu);
	stats.proc_lookups++;
	pthread_mutex_unlock(&mu);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct entry *e = &table[i];
		void *p;

		if (strcmp(sym, e->name) != 0)
			continue;
		if (e->v2_from != 0 && ver >= e->v2_from)
			p = ptds && e->v2_ptsz ? e->v2_ptsz : e->v2;
		else
			p = ptds && e->ptsz ? e->ptsz : e->plain;
		if (p == NULL) {
			*pfn = NULL;
			*status = 2;	/* VERSION_NOT_SUFFICIENT */
			return CUDA_ERROR_NOT_FOUND;
		}
		*pfn = p;
		*status = 0;
		return CUDA_SUCCESS;
	}
	*pfn = NULL;
	*status = 1;		/* SYMBOL_NOT_FOUND */
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver,
			  cuuint64_t flags)
{
	int st;

	return lookup(sym, pfn, ver, flags, &st);
}

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	int st;
	CUresult rc = lookup(sym, pfn, ver, flags, &st);

	if (status != NULL)
		*status = st;
	return rc;
}

/* ---- device memory ---- */

#define SMEM_TOTAL	(80ull << 30)
#define SMEM_MAX	65536

static struct {
	uint64_t ptr, bytes;
	int pool;		/* -1: not from a pool */
	int pending;		/* freed to the pool, not yet observed */
} smem[SMEM_MAX];
static uint64_t smem_used, smem_next = 0x7f0000000000ull;

#define SPOOL_MAX	8
#define SPOOL_CHUNK	(2ull << 20)
#define SPOOL_BASE	0x5000ul	/* handles: SPOOL_BASE + index */
static struct {
	int live;
	uint64_t reserved, used, threshold;
} spool[SPOOL_MAX] = { { 1, 0, 0, 0 } };	/* 0: the default pool */

static CUresult smem_alloc(CUdeviceptr *dp, size_t n)
{
	CUresult rc = 2;	/* CUDA_ERROR_OUT_OF_MEMORY */

	if (dp == NULL || n == 0)
		return 1;	/* CUDA_ERROR_INVALID_VALUE */
	pthread_mutex_lock(&mu);
	if (n <= SMEM_TOTAL - smem_used) {
		for (size_t i = 0; i < SMEM_MAX; i++) {
			if (smem[i].ptr != 0)
				continue;
			smem[i].ptr = smem_next;
			smem[i].bytes = n;
			smem[i].pool = -1;
			smem_next += (n + 0xfffff) & ~0xfffffull;
			smem_used += n;
			*dp = smem[i].ptr;
			rc = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static CUresult smem_free(CUdeviceptr d)
{
	CUresult rc = 1;	/* CUDA_ERROR_INVALID_VALUE */

	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < SMEM_MAX && d != 0; i++) {
		if (smem[i].ptr != d || smem[i].pending)
			continue;
		if (smem[i].pool >= 0) {
			/* a synchronous free of a pool allocation: at once */
			spool[smem[i].pool].used -= smem[i].bytes;
			smem[i].ptr = 0;
			rc = CUDA_SUCCESS;
			break;
		}
		smem_used -= smem[i].bytes;
		smem[i].ptr = 0;
		rc = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n)
{
	return smem_alloc(dp, n);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t n, unsigned f)
{
	(void)f;
	return smem_alloc(dp, n);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dp, size_t *pitch,
				   size_t w, size_t h, unsigned elem)
{
	size_t p = (w + 511) & ~(size_t)511;	/* rows padded to 512 B */
	CUresult rc;

	(void)elem;
	if (pitch == NULL || h == 0)
		return 1;
	rc = smem_alloc(dp, p * h);
	if (rc == CUDA_SUCCESS)
		*pitch = p;
	return rc;
}


/* pool handle -> index, -1: not a live pool */
static int spool_index(void *p)
{
	uintptr_t v = (uintptr_t)p;

	if (v < SPOOL_BASE || v >= SPOOL_BASE + SPOOL_MAX ||
	    !spool[v - SPOOL_BASE].live)
		return -1;
	return (int)(v - SPOOL_BASE);
}

/* Give back what pool k reserved beyond max(in use, keep), in whole
 * chunks (mu held). */
static void spool_trim_locked(int k, uint64_t keep)
{
	uint64_t floor = spool[k].used > keep ? spool[k].used : keep, give;

	if (floor > UINT64_MAX - SPOOL_CHUNK)
		return;		/* keeps everything */
	floor = (floor + SPOOL_CHUNK - 1) & ~(SPOOL_CHUNK - 1);
	if (spool[k].reserved <= floor)
		return;
	give = spool[k].reserved - floor;
	spool[k].reserved -= give;
	smem_used -= give;
}

/* A synchronize: the frees it observes complete; each pool keeps up to
 * its release threshold. */
static void spool_sync(void)
{
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < SMEM_MAX; i++) {
		if (smem[i].ptr == 0 || !smem[i].pending)
			continue;
		spool[smem[i].pool].used -= smem[i].bytes;
		smem[i].ptr = 0;
		smem[i].pending = 0;
	}
	for (int k = 0; k < SPOOL_MAX; k++)
		if (spool[k].live)
			spool_trim_locked(k, spool[k].threshold);
	pthread_mutex_unlock(&mu);
}

static CUresult spool_alloc(CUdeviceptr *dp, size_t n, int k)
{
	CUresult rc = 2;	/* CUDA_ERROR_OUT_OF_MEMORY */
	uint64_t grow = 0;

	if (dp == NULL || n == 0 || k < 0)
		return 1;	/* CUDA_ERROR_INVALID_VALUE */
	pthread_mutex_lock(&mu);
	if (spool[k].used + n > spool[k].reserved)
		grow = (spool[k].used + n - spool[k].reserved + SPOOL_CHUNK -
			1) & ~(SPOOL_CHUNK - 1);
	if (grow <= SMEM_TOTAL - smem_used) {
		for (size_t i = 0; i < SMEM_MAX; i++) {
			if (smem[i].ptr != 0)
				continue;
			smem[i].ptr = smem_next;
			smem[i].bytes = n;
			smem[i].pool = k;
			smem[i].pending = 0;
			smem_next += (n + 0xfffff) & ~0xfffffull;
			smem_used += grow;
			spool[k].reserved += grow;
			spool[k].used += n;
			*dp = smem[i].ptr;
			rc = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dp, size_t n, CUstream s)
{
	(void)s;
	return spool_alloc(dp, n, 0);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dp, size_t n, CUstream s)
{
	(void)s;
	return spool_alloc(dp, n, 0);
}

static CUresult spool_free_async(CUdeviceptr d)
{
	CUresult rc = 1;	/* CUDA_ERROR_INVALID_VALUE */

	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < SMEM_MAX && d != 0; i++) {
		if (smem[i].ptr != d || smem[i].pending)
			continue;
		if (smem[i].pool < 0) {
			smem_used -= smem[i].bytes;	/* not a pool's */
			smem[i].ptr = 0;
		} else {
			smem[i].pending = 1;
		}
		rc = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuDeviceGetMemPool(void **pool, CUdevice dev)
{
	(void)dev;
	if (pool == NULL)
		return 1;
	*pool = (void *)SPOOL_BASE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(void **pool, CUdevice dev)
{
	return cuDeviceGetMemPool(pool, dev);
}

EXPORT CUresult cuMemPoolCreate(void **pool, const void *props)
{
	CUresult rc = 2;

	(void)props;
	if (pool == NULL)
		return 1;
	pthread_mutex_lock(&mu);
	for (int k = 1; k < SPOOL_MAX; k++) {
		if (spool[k].live)
			continue;
		memset(&spool[k], 0, sizeof(spool[k]));
		spool[k].live = 1;
		*pool = (void *)(SPOOL_BASE + (uintptr_t)k);
		rc = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

/* Destroying a pool frees what it reserved (outstanding allocations
 * included, as a program that destroys a pool in use gets). */
EXPORT CUresult cuMemPoolDestroy(void *pool)
{
	int k;

	pthread_mutex_lock(&mu);
	k = spool_index(pool);
	if (k <= 0) {
		pthread_mutex_unlock(&mu);
		return 1;
	}
	for (size_t i = 0; i < SMEM_MAX; i++)
		if (smem[i].ptr != 0 && smem[i].pool == k)
			memset(&smem[i], 0, sizeof(smem[i]));
	smem_used -= spool[k].reserved;
	memset(&spool[k], 0, sizeof(spool[k]));
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(void *pool, size_t keep)
{
	int k;

	pthread_mutex_lock(&mu);
	k = spool_index(pool);
	if (k >= 0)
		spool_trim_locked(k, keep);
	pthread_mutex_unlock(&mu);
	return k >= 0 ? CUDA_SUCCESS : 1;
}

/* attributes 4 RELEASE_THRESHOLD, 5 RESERVED_MEM_CURRENT,
 * 7 USED_MEM_CURRENT (cuuint64_t) */
EXPORT CUresult cuMemPoolGetAttribute(void *pool, int attr, void *value)
{
	int k;
	CUresult rc = CUDA_SUCCESS;
	uint64_t v = 0;

	pthread_mutex_lock(&mu);
	k = spool_index(pool);
	if (k < 0 || value == NULL)
		rc = 1;
	else if (attr == 4)
		v = spool[k].threshold;
	else if (attr == 5)
		v = spool[k].reserved;
	else if (attr == 7)
		v = spool[k].used;
	else
		rc = 1;
	pthread_mutex_unlock(&mu);
	if (rc == CUDA_SUCCESS)
		memcpy(value, &v, sizeof(v));
	return rc;
}

EXPORT CUresult cuMemPoolSetAttribute(void *pool, int attr, void *value)
{
	int k;
	CUresult rc = CUDA_SUCCESS;

	pthread_mutex_lock(&mu);
	k = spool_index(pool);
	if (k < 0 || value == NULL || attr != 4)
		rc = 1;
	else
		memcpy(&spool[k].threshold, value, sizeof(uint64_t));
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr d)
{
	return smem_free(d);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
	(void)s;
	return spool_free_async(d);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s)
{
	(void)s;
	return spool_free_async(d);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dp, size_t n, void *p,
				       CUstream s)
{
	int k;

	(void)s;
	pthread_mutex_lock(&mu);
	k = spool_index(p);
	pthread_mutex_unlock(&mu);
	return spool_alloc(dp, n, k);
}

/* physical memory handles: the "address" is the handle */
EXPORT CUresult cuMemCreate(uint64_t *hp, size_t n, const void *prop,
			    unsigned long long flags)
{
	CUdeviceptr d;
	CUresult rc;

	(void)prop;
	(void)flags;
	rc = smem_alloc(&d, n);
	if (rc == CUDA_SUCCESS)
		*hp = d;
	return rc;
}

EXPORT CUresult cuMemRelease(uint64_t h)
{
	return smem_free(h);
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	pthread_mutex_lock(&mu);
	*free_b = SMEM_TOTAL - smem_used;
	*total_b = SMEM_TOTAL;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

/* ---- CUDA arrays ---- */

static size_t sarr_bytes(const size_t *whd, unsigned ch, unsigned levels)
{
	size_t w = whd[0] ? whd[0] : 1, h = whd[1] ? whd[1] : 1,
	       d = whd[2] ? whd[2] : 1, sum = 0;

	for (unsigned l = 0; l < (levels ? levels : 1); l++) {
		sum += w * h * d * (ch ? ch : 1) * 4;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : 1;
		d = d > 1 ? d / 2 : 1;
	}
	return sum;
}

EXPORT CUresult cuArrayCreate_v2(void **ap, const size_t *desc)
{
	/* Width, Height, then Format (int) and NumChannels (unsigned) */
	size_t whd[3] = { desc[0], desc[1], 1 };
	unsigned ch;
	CUdeviceptr d;
	CUresult rc;

	memcpy(&ch, (const char *)desc + 2 * sizeof(size_t) + sizeof(int),
	       sizeof(ch));
	rc = smem_alloc(&d, sarr_bytes(whd, ch, 1));
	if (rc == CUDA_SUCCESS)
		*ap = (void *)(uintptr_t)d;
	return rc;
}

static CUresult sarr3(void **ap, const size_t *desc, unsigned levels)
{
	size_t whd[3] = { desc[0], desc[1], desc[2] };
	unsigned ch;
	CUdeviceptr d;
	CUresult rc;

	memcpy(&ch, (const char *)desc + 3 * sizeof(size_t) + sizeof(int),
	       sizeof(ch));
	rc = smem_alloc(&d, sarr_bytes(whd, ch, levels));
	if (rc == CUDA_SUCCESS)
		*ap = (void *)(uintptr_t)d;
	return rc;
}

EXPORT CUresult cuArray3DCreate_v2(void **ap, const size_t *desc)
{
	return sarr3(ap, desc, 1);
}

EXPORT CUresult cuMipmappedArrayCreate(void **mp, const size_t *desc,
				       unsigned levels)
{
	return sarr3(mp, desc, levels);
}

EXPORT CUresult cuArrayDestroy(void *a)
{
	return smem_free((CUdeviceptr)(uintptr_t)a);
}

EXPORT CUresult cuMipmappedArrayDestroy(void *m)
{
	return smem_free((CUdeviceptr)(uintptr_t)m);
}

/* What the simulated device really holds (pools' reserves included). */
/* ---- graph memory nodes: a graph launched while GATE_STANDIN_GRAPH_MEM
 * is set needs that many bytes from the graphs' allocator, which
 * reserves them from the device and keeps them for later launches until
 * cuDeviceGraphMemTrim (the model: no graph is running then) ---- */

static uint64_t sgraph_reserved;

static CUresult sgraph_launch(void)
{
	const char *e = getenv("GATE_STANDIN_GRAPH_MEM");
	uint64_t need = e != NULL ? strtoull(e, NULL, 10) : 0;
	CUresult rc = CUDA_SUCCESS;

	pthread_mutex_lock(&mu);
	if (need > sgraph_reserved) {
		if (need - sgraph_reserved > SMEM_TOTAL - smem_used) {
			rc = 2;		/* CUDA_ERROR_OUT_OF_MEMORY */
		} else {
			smem_used += need - sgraph_reserved;
			sgraph_reserved = need;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

/* attributes 0 USED_MEM_CURRENT, 2 RESERVED_MEM_CURRENT (cuuint64_t) */
EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice d, int attr, void *v)
{
	uint64_t x;

	if (d != 0 || v == NULL || (attr != 0 && attr != 2))
		return 1;
	pthread_mutex_lock(&mu);
	x = sgraph_reserved;
	pthread_mutex_unlock(&mu);
	memcpy(v, &x, sizeof(x));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGraphMemTrim(CUdevice d)
{
	if (d != 0)
		return 1;
	pthread_mutex_lock(&mu);
	smem_used -= sgraph_reserved;
	sgraph_reserved = 0;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

EXPORT uint64_t gs_standin_mem_used(void)
{
	uint64_t u;

	pthread_mutex_lock(&mu);
	u = smem_used;
	pthread_mutex_unlock(&mu);
	return u;
}

EXPORT void gs_standin_stats(struct gs_standin_stats *out)
{
	pthread_mutex_lock(&mu);
	*out = stats;
	pthread_mutex_unlock(&mu);
}
