/*
 * mem_app.c — device memory through the launch gate, for
 * tests/gate/mem_gate.sh: reaches the driver's allocation entry points
 * the way the CUDA runtime does (dlsym on a libcuda.so.1 handle) and
 * checks what the gate makes of them.
 *
 *   mem_app limit LIMIT    the allocation's limit is LIMIT bytes: the
 *                          cuMemGetInfo view, allocations up to the limit
 *                          and one byte over it (CUDA_ERROR_OUT_OF_MEMORY,
 *                          the driver not reached), frees giving back,
 *                          pitched, managed and stream-ordered allocations
 *   mem_app threads LIMIT  8 threads allocating and freeing 1-8 MiB at
 *                          once: what they hold together never passes
 *                          LIMIT, some are refused, all is given back
 *   mem_app pool LIMIT     stream-ordered pools (the stand-in's model):
 *                          memory a pool keeps after frees stays charged,
 *                          allocations past the limit trim the pools
 *                          before they are refused, created pools count,
 *                          destroying one gives back; the device never
 *                          holds more than LIMIT
 *   mem_app nvml LIMIT     NVML's memory queries (libnvidia-ml.so.1
 *                          dlopen'ed, the agent's stand-in): GPU-fake-0,
 *                          the allocation's, reports the limit and what
 *                          is left of it (v1 and v2); GPU-fake-1 its own
 *   mem_app arrays LIMIT   CUDA arrays (1D/2D, 3D, mipmapped) count at
 *                          their descriptor's size; destroying gives back
 *   mem_app graphs LIMIT   graph memory nodes (the stand-in's model):
 *                          what the graphs' allocator holds counts, is
 *                          trimmed for an allocation that needs it and
 *                          after a launch that leaves the ledger over
 *   mem_app hold MIB SECS  hold MIB MiB for SECS seconds, print "held"
 *   mem_app fill SECS [MIB]  allocate 1 MiB at a time until refused (or
 *                          MIB MiB, the first time), print "filled BYTES
 *                          rc RC" (all it holds, the last call's code),
 *                          then hold it for SECS seconds,
 *                          filling again at every SIGUSR1 (several
 *                          processes of one allocation share its limit)
 *
 * Prints "ok ..." per check and "FAIL ..." on a failed one; exit 0 only
 * when every check passed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUstream;

static CUresult (*p_alloc)(CUdeviceptr *, size_t);
static CUresult (*p_free)(CUdeviceptr);
static CUresult (*p_info)(size_t *, size_t *);
static CUresult (*p_pitch)(CUdeviceptr *, size_t *, size_t, size_t,
			   unsigned);
static CUresult (*p_managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*p_aalloc)(CUdeviceptr *, size_t, CUstream);
static CUresult (*p_afree)(CUdeviceptr, CUstream);
static CUresult (*p_pool)(CUdeviceptr *, size_t, void *, CUstream);
static CUresult (*p_create)(uint64_t *, size_t, const void *,
			    unsigned long long);
static CUresult (*p_release)(uint64_t);
static CUresult (*p_getpool)(void **, int);
static CUresult (*p_sync)(void);
static CUresult (*p_pcreate)(void **, const void *);
static CUresult (*p_pdestroy)(void *);
static CUresult (*p_pset)(void *, int, void *);
static uint64_t (*p_devused)(void);
static void *defpool;

static int failed;

/* cond is evaluated once (it may allocate or free) */
#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		int ok_ = (cond);                                            \
		printf("%s ", ok_ ? "ok  " : "FAIL");                        \
		printf(__VA_ARGS__);                                         \
		printf("\n");                                                \
		if (!ok_)                                                    \
			failed = 1;                                          \
	} while (0)

#define MIB (1ull << 20)

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);

	if (h == NULL) {
		fprintf(stderr, "mem_app: %s\n", dlerror());
		exit(2);
	}
	*(void **)&p_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&p_free = dlsym(h, "cuMemFree_v2");
	*(void **)&p_info = dlsym(h, "cuMemGetInfo_v2");
	*(void **)&p_pitch = dlsym(h, "cuMemAllocPitch_v2");
	*(void **)&p_managed = dlsym(h, "cuMemAllocManaged");
	*(void **)&p_aalloc = dlsym(h, "cuMemAllocAsync");
	*(void **)&p_afree = dlsym(h, "cuMemFreeAsync");
	*(void **)&p_pool = dlsym(h, "cuMemAllocFromPoolAsync");
	*(void **)&p_create = dlsym(h, "cuMemCreate");
	*(void **)&p_release = dlsym(h, "cuMemRelease");
	*(void **)&p_getpool = dlsym(h, "cuDeviceGetMemPool");
	*(void **)&p_sync = dlsym(h, "cuCtxSynchronize");
	*(void **)&p_pcreate = dlsym(h, "cuMemPoolCreate");
	*(void **)&p_pdestroy = dlsym(h, "cuMemPoolDestroy");
	*(void **)&p_pset = dlsym(h, "cuMemPoolSetAttribute");
	*(void **)&p_devused = dlsym(h, "gs_standin_mem_used");
	if (!p_alloc || !p_free || !p_info || !p_pitch || !p_managed ||
	    !p_aalloc || !p_afree || !p_pool || !p_create || !p_release ||
	    !p_getpool || !p_sync || !p_pcreate || !p_pdestroy || !p_pset ||
	    !p_devused) {
		fprintf(stderr, "mem_app: a memory entry point is missing\n");
		exit(2);
	}
	{
		/* a context, as the runtime makes one: stream-ordered
		 * allocation needs one */
		CUresult (*retain)(void **, int);
		CUresult (*setcur)(void *);
		void *ctx = NULL;

		*(void **)&retain = dlsym(h, "cuDevicePrimaryCtxRetain");
		*(void **)&setcur = dlsym(h, "cuCtxSetCurrent");
		if (!retain || !setcur || retain(&ctx, 0) != 0 ||
		    setcur(ctx) != 0 || p_getpool(&defpool, 0) != 0) {
			fprintf(stderr, "mem_app: no context\n");
			exit(2);
		}
	}
}

static void run_limit(uint64_t limit)
{
	CUdeviceptr a = 0, b = 0, c = 0, d = 0;
	size_t f = 0, t = 0, pitch = 0;
	CUresult rc;

	CHECK(p_info(&f, &t) == 0 && t == limit && f == limit,
	      "cuMemGetInfo: free %zu total %zu (limit %llu)", f, t,
	      (unsigned long long)limit);
	rc = p_alloc(&a, limit - MIB);
	CHECK(rc == 0, "all but 1 MiB: rc %d", rc);
	CHECK(p_info(&f, &t) == 0 && f == MIB && t == limit,
	      "free after it: %zu", f);
	rc = p_alloc(&b, MIB + 1);
	CHECK(rc == 2, "1 MiB + 1 byte more: rc %d (out of memory)", rc);
	rc = p_alloc(&b, MIB);
	CHECK(rc == 0, "exactly the last MiB: rc %d", rc);
	rc = p_alloc(&c, 1);
	CHECK(rc == 2, "one byte over the limit: rc %d", rc);
	rc = p_managed(&c, 1, 1);
	CHECK(rc == 2, "managed memory counts too: rc %d", rc);
	rc = p_aalloc(&c, 1, NULL);
	CHECK(rc == 2, "stream-ordered allocation counts too: rc %d", rc);
	CHECK(p_free(a) == 0, "free the big one");
	CHECK(p_info(&f, &t) == 0 && f == limit - MIB,
	      "free gives back: %zu", f);
	rc = p_pitch(&c, &pitch, 1000, 1024, 4);
	CHECK(rc == 0 && pitch >= 1000, "pitched 1000 x 1024: rc %d pitch %zu",
	      rc, pitch);
	CHECK(p_info(&f, &t) == 0 && f == limit - MIB - pitch * 1024,
	      "the pitch counts (padding included): free %zu", f);
	rc = p_aalloc(&d, 4 * MIB, NULL);
	CHECK(rc == 0, "stream-ordered 4 MiB: rc %d", rc);
	CHECK(p_afree(d, NULL) == 0 && p_sync() == 0,
	      "stream-ordered free, synchronized (the pool keeps nothing)");
	{
		/* expandable_segments' way: physical handles */
		uint64_t h1 = 0, h2 = 0;
		size_t left;

		CHECK(p_info(&f, &t) == 0, "info");
		left = f;
		rc = p_create(&h1, left - MIB, NULL, 0);
		CHECK(rc == 0, "cuMemCreate of all but 1 MiB: rc %d", rc);
		rc = p_create(&h2, 2 * MIB, NULL, 0);
		CHECK(rc == 2, "cuMemCreate over the limit: rc %d", rc);
		rc = p_pool(&d, 2 * MIB, defpool, NULL);
		CHECK(rc == 2, "pool allocation over the limit: rc %d", rc);
		CHECK(p_release(h1) == 0, "cuMemRelease");
		CHECK(p_info(&f, &t) == 0 && f == left,
		      "release gives back: free %zu", f);
		rc = p_pool(&d, 2 * MIB, defpool, NULL);
		CHECK(rc == 0 && p_afree(d, NULL) == 0 && p_sync() == 0,
		      "pool allocation and free: rc %d", rc);
	}
	CHECK(p_free(c) == 0 && p_free(b) == 0, "free the rest");
	CHECK(p_info(&f, &t) == 0 && f == limit, "all back: free %zu", f);
	CHECK(p_free(0x1234) != 0, "a free of an unknown pointer is the "
	      "driver's error");
	CHECK(p_info(&f, &t) == 0 && f == limit, "and changes nothing: %zu",
	      f);
}

/* the H100 case of backend:cudaMallocAsync: a pool that keeps what is
 * freed into it (release threshold at the maximum, as PyTorch sets it) */
static void run_pool(uint64_t limit)
{
	uint64_t keep = UINT64_MAX, base = p_devused();
	CUdeviceptr a = 0, b = 0, c = 0;
	void *mine = NULL;
	size_t f = 0, t = 0;
	CUresult rc;

#define HELD() (p_devused() - base)
	CHECK(p_pset(defpool, 4, &keep) == 0, "release threshold: maximum");
	rc = p_aalloc(&a, 40 * MIB, NULL);
	CHECK(rc == 0, "stream-ordered 40 MiB: rc %d", rc);
	CHECK(p_afree(a, NULL) == 0 && p_sync() == 0, "freed, synchronized");
	CHECK(HELD() == 40 * MIB, "the pool keeps it: device holds %llu",
	      (unsigned long long)HELD());
	CHECK(p_info(&f, &t) == 0 && f == limit - 40 * MIB,
	      "what the pool keeps stays charged: free %zu of %zu", f, t);
	rc = p_aalloc(&a, 30 * MIB, NULL);
	CHECK(rc == 0 && HELD() <= limit,
	      "30 MiB more: the pool trimmed first: rc %d, device holds %llu",
	      rc, (unsigned long long)HELD());
	CHECK(p_afree(a, NULL) == 0, "freed again (not synchronized)");
	rc = p_alloc(&b, 40 * MIB);
	CHECK(rc == 0, "40 MiB with cuMemAlloc: the pool is trimmed for it "
	      "(after a synchronize): rc %d", rc);
	CHECK(HELD() <= limit, "device holds %llu, limit %llu",
	      (unsigned long long)HELD(), (unsigned long long)limit);
	CHECK(p_pcreate(&mine, NULL) == 0 && p_pset(mine, 4, &keep) == 0,
	      "a pool of its own");
	rc = p_pool(&c, 20 * MIB, mine, NULL);
	CHECK(rc == 0, "20 MiB from it: rc %d", rc);
	CHECK(p_afree(c, NULL) == 0 && p_sync() == 0 &&
	      p_info(&f, &t) == 0 && f == limit - 60 * MIB,
	      "it keeps them, charged: free %zu", f);
	rc = p_aalloc(&a, 30 * MIB, NULL);
	CHECK(rc == 2, "30 MiB more: refused even after trimming: rc %d", rc);
	CHECK(HELD() <= limit && p_info(&f, &t) == 0 &&
	      f == limit - 40 * MIB, "the pools were trimmed trying: free "
	      "%zu, device holds %llu", f, (unsigned long long)HELD());
	CHECK(p_free(b) == 0, "free the 40 MiB");
	rc = p_aalloc(&a, 30 * MIB, NULL);
	CHECK(rc == 0 && HELD() <= limit, "now 30 MiB fit: rc %d", rc);
	rc = p_pool(&c, 30 * MIB, mine, NULL);
	CHECK(rc == 0 && HELD() <= limit, "and 30 MiB from its pool: rc %d, "
	      "device holds %llu", rc, (unsigned long long)HELD());
	rc = p_pool(&b, 8 * MIB, mine, NULL);
	CHECK(rc == 2 && HELD() <= limit, "8 MiB more: refused: rc %d", rc);
	CHECK(p_pdestroy(mine) == 0 && p_info(&f, &t) == 0 &&
	      f == limit - 30 * MIB, "destroying its pool gives back: free "
	      "%zu", f);
	CHECK(p_afree(a, NULL) == 0 && p_sync() == 0, "free");
	keep = 0;
	CHECK(p_pset(defpool, 4, &keep) == 0 && p_sync() == 0 &&
	      p_info(&f, &t) == 0 && f == limit && HELD() == 0,
	      "threshold 0, synchronized: all back: free %zu", f);
#undef HELD
}

struct nvmem1 {
	unsigned long long total, free, used;
};

struct nvmem2 {
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

static void run_nvml(uint64_t limit)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	int (*init)(void), (*byidx)(unsigned, void **);
	int (*mem1)(void *, struct nvmem1 *), (*mem2)(void *, struct nvmem2 *);
	void *d0 = NULL, *d1 = NULL;
	struct nvmem1 a;
	struct nvmem2 b;
	CUdeviceptr p = 0;

	if (h == NULL) {
		CHECK(0, "dlopen libnvidia-ml.so.1: %s", dlerror());
		return;
	}
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&byidx = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&mem1 = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&mem2 = dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
	if (!init || !byidx || !mem1 || !mem2 || init() != 0 ||
	    byidx(0, &d0) != 0 || byidx(1, &d1) != 0) {
		CHECK(0, "NVML entry points");
		return;
	}
	CHECK(p_alloc(&p, 10 * MIB) == 0, "10 MiB");
	memset(&a, 0, sizeof(a));
	CHECK(mem1(d0, &a) == 0 && a.total == limit &&
	      a.free == limit - 10 * MIB && a.used == 10 * MIB,
	      "the allocation's GPU (v1): total %llu free %llu used %llu",
	      a.total, a.free, a.used);
	memset(&b, 0, sizeof(b));
	b.version = 2;
	CHECK(mem2(d0, &b) == 0 && b.total == limit &&
	      b.free == limit - 10 * MIB && b.used == 10 * MIB &&
	      b.reserved <= b.used && b.version == 2,
	      "the allocation's GPU (v2): total %llu free %llu used %llu "
	      "reserved %llu", b.total, b.free, b.used, b.reserved);
	CHECK(mem1(d1, &a) == 0 && a.total == 80ull << 30 &&
	      a.free == 80ull << 30, "another GPU: its own figures (total "
	      "%llu free %llu)", a.total, a.free);
	CHECK(mem2(d1, &b) == 0 && b.total == 80ull << 30 &&
	      b.reserved == MIB, "another GPU (v2): its own figures");
	CHECK(p_free(p) == 0 && mem1(d0, &a) == 0 && a.free == limit,
	      "freed: free %llu", a.free);
}

struct arr2 {			/* CUDA_ARRAY_DESCRIPTOR */
	size_t w, h;
	int format;
	unsigned ch;
};

struct arr3 {			/* CUDA_ARRAY3D_DESCRIPTOR */
	size_t w, h, d;
	int format;
	unsigned ch, flags;
};

static void run_arrays(uint64_t limit, void *h)
{
	CUresult (*mk2)(void **, const struct arr2 *);
	CUresult (*mk3)(void **, const struct arr3 *);
	CUresult (*mkmip)(void **, const struct arr3 *, unsigned);
	CUresult (*rm)(void *), (*rmmip)(void *);
	struct arr2 a2 = { 1024, 1024, 0x20, 4 };	/* float4: 16 MiB */
	struct arr3 a3 = { 256, 256, 64, 0x20, 1, 0 };	/* 16 MiB */
	struct arr3 am = { 1024, 1024, 0, 0x01, 4, 0 };	/* uchar4 */
	void *x = NULL, *y = NULL, *z = NULL;
	size_t f = 0, t = 0;
	CUresult rc;

	*(void **)&mk2 = dlsym(h, "cuArrayCreate_v2");
	*(void **)&mk3 = dlsym(h, "cuArray3DCreate_v2");
	*(void **)&mkmip = dlsym(h, "cuMipmappedArrayCreate");
	*(void **)&rm = dlsym(h, "cuArrayDestroy");
	*(void **)&rmmip = dlsym(h, "cuMipmappedArrayDestroy");
	if (!mk2 || !mk3 || !mkmip || !rm || !rmmip) {
		CHECK(0, "array entry points");
		return;
	}
	rc = mk2(&x, &a2);
	CHECK(rc == 0 && p_info(&f, &t) == 0 && f == limit - 16 * MIB,
	      "2D float4 1024 x 1024: rc %d, free %zu", rc, f);
	rc = mk3(&y, &a3);
	CHECK(rc == 0 && p_info(&f, &t) == 0 && f == limit - 32 * MIB,
	      "3D float 256 x 256 x 64: rc %d, free %zu", rc, f);
	/* uchar4 1024 x 1024, 2 levels: 4 MiB + 1 MiB (the stand-in takes
	 * 4 bytes a channel, but the gate counts what the format says) */
	rc = mkmip(&z, &am, 2);
	CHECK(rc == 0 && p_info(&f, &t) == 0 && f == limit - 37 * MIB,
	      "mipmapped uchar4, 2 levels: rc %d, free %zu", rc, f);
	a3.d = 128;	/* 32 MiB: over what is left */
	rc = mk3(&x, &a3);
	CHECK(rc == 2, "a 3D array over the limit: rc %d", rc);
	CHECK(rm(y) == 0 && rmmip(z) == 0 && p_info(&f, &t) == 0 &&
	      f == limit - 16 * MIB, "destroyed: free %zu", f);
	rc = mk3(&y, &a3);
	CHECK(rc == 0 && rm(y) == 0, "now it fits: rc %d", rc);
	CHECK(rm(x) == 0 && p_info(&f, &t) == 0 && f == limit,
	      "all back: free %zu", f);
}

/* Graph memory nodes (the stand-in's model: GATE_STANDIN_GRAPH_MEM bytes
 * reserved by the graphs' allocator at a launch, kept until trimmed):
 * charged to the limit, shown in the cuMemGetInfo view, trimmed when an
 * allocation needs the room or a launch leaves the ledger over. */
static void run_graphs(uint64_t limit, void *h)
{
	CUresult (*launch)(void *, CUstream);
	CUresult (*gattr)(int, int, void *);
	uint64_t res = 0;
	CUdeviceptr a = 0;
	size_t f = 0, t = 0;
	CUresult rc;

	*(void **)&launch = dlsym(h, "cuGraphLaunch");
	*(void **)&gattr = dlsym(h, "cuDeviceGetGraphMemAttribute");
	if (!launch || !gattr) {
		CHECK(0, "graph entry points");
		return;
	}
	setenv("GATE_STANDIN_GRAPH_MEM", "16777216", 1);	/* 16 MiB */
	rc = launch((void *)1, NULL);
	CHECK(rc == 0 && p_sync() == 0 && p_info(&f, &t) == 0 &&
	      f == limit - 16 * MIB,
	      "a graph holding 16 MiB: rc %d, free %zu of %zu", rc, f, t);
	rc = p_alloc(&a, limit - 16 * MIB);
	CHECK(rc == 0, "the rest of the limit beside it: rc %d", rc);
	CHECK(p_free(a) == 0, "freed");
	/* an allocation that needs the graphs' memory: it is trimmed */
	rc = p_alloc(&a, limit - 8 * MIB);
	CHECK(rc == 0 && gattr(0, 2, &res) == 0 && res == 0,
	      "limit - 8 MiB: the graphs' memory trimmed for it: rc %d, "
	      "graphs hold %llu", rc, (unsigned long long)res);
	/* a launch that leaves the ledger over: trimmed again after it */
	rc = launch((void *)1, NULL);
	CHECK(rc == 0 && gattr(0, 2, &res) == 0 && res == 0 &&
	      p_info(&f, &t) == 0 && f == 8 * MIB,
	      "a launch past the limit: trimmed after it: rc %d, graphs "
	      "hold %llu, free %zu", rc, (unsigned long long)res, f);
	CHECK(p_free(a) == 0 && p_info(&f, &t) == 0 && f == limit,
	      "all back: free %zu", f);
	unsetenv("GATE_STANDIN_GRAPH_MEM");
}

static uint64_t g_limit, g_held, g_refused, g_over;

static void *worker(void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	CUdeviceptr p[16];
	uint64_t sz[16], held;
	unsigned n = 0;

	for (int r = 0; r < 3000; r++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (n < 16 && (x & 1)) {
			sz[n] = ((x >> 8) % 8 + 1) * MIB;
			if (p_alloc(&p[n], sz[n]) != 0) {
				__atomic_add_fetch(&g_refused, 1,
						   __ATOMIC_RELAXED);
				continue;
			}
			held = __atomic_add_fetch(&g_held, sz[n],
						  __ATOMIC_ACQ_REL);
			if (held > g_limit)
				__atomic_add_fetch(&g_over, 1,
						   __ATOMIC_RELAXED);
			n++;
		} else if (n > 0) {
			n--;
			/* ours first, then the driver's: what we count is
			 * never more than the gate does */
			__atomic_sub_fetch(&g_held, sz[n], __ATOMIC_ACQ_REL);
			if (p_free(p[n]) != 0)
				__atomic_add_fetch(&g_over, 1,
						   __ATOMIC_RELAXED);
		}
	}
	while (n > 0) {
		n--;
		__atomic_sub_fetch(&g_held, sz[n], __ATOMIC_ACQ_REL);
		(void)p_free(p[n]);
	}
	return NULL;
}

static void run_threads(uint64_t limit)
{
	pthread_t t[8];
	size_t f = 0, tot = 0;

	g_limit = limit;
	for (uintptr_t i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(g_over == 0, "8 threads never held more than the limit "
	      "together (%llu times over)", (unsigned long long)g_over);
	CHECK(g_refused > 0, "some allocations refused: %llu",
	      (unsigned long long)g_refused);
	CHECK(p_info(&f, &tot) == 0 && f == limit && tot == limit,
	      "all given back: free %zu of %zu", f, tot);
}

static volatile sig_atomic_t refill;

static void on_usr1(int sig)
{
	(void)sig;
	refill = 1;
}

/* Allocate 1 MiB blocks until refused (4096 at most); print what is
 * held in all and the refusal's code. */
static void fill_up(uint64_t *held, unsigned most)
{
	CUdeviceptr d;
	CUresult rc = 0;
	unsigned i;

	for (i = 0; i < most; i++) {
		rc = p_alloc(&d, MIB);
		if (rc != 0)
			break;
		*held += MIB;
	}
	printf("filled %llu rc %d\n", (unsigned long long)*held, rc);
	fflush(stdout);
}

static void run_fill(unsigned secs, unsigned first)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	uint64_t held = 0;
	unsigned long n;

	signal(SIGUSR1, on_usr1);
	fill_up(&held, first);
	for (n = 0; n < (unsigned long)secs * 100; n++) {
		if (refill) {
			refill = 0;
			fill_up(&held, 4096);
		}
		nanosleep(&ts, NULL);
	}
}

int main(int argc, char *argv[])
{
	if (argc < 3) {
		fprintf(stderr, "usage: mem_app limit|threads BYTES | hold "
			"MIB SECS | fill SECS [MIB]\n");
		return 2;
	}
	load();
	if (strcmp(argv[1], "limit") == 0) {
		run_limit(strtoull(argv[2], NULL, 10));
	} else if (strcmp(argv[1], "arrays") == 0) {
		run_arrays(strtoull(argv[2], NULL, 10),
			   dlopen("libcuda.so.1", RTLD_NOW));
	} else if (strcmp(argv[1], "graphs") == 0) {
		run_graphs(strtoull(argv[2], NULL, 10),
			   dlopen("libcuda.so.1", RTLD_NOW));
	} else if (strcmp(argv[1], "nvml") == 0) {
		run_nvml(strtoull(argv[2], NULL, 10));
	} else if (strcmp(argv[1], "pool") == 0) {
		run_pool(strtoull(argv[2], NULL, 10));
	} else if (strcmp(argv[1], "threads") == 0) {
		run_threads(strtoull(argv[2], NULL, 10));
	} else if (strcmp(argv[1], "fill") == 0) {
		run_fill((unsigned)atoi(argv[2]),
			 argc > 3 ? (unsigned)atoi(argv[3]) : 4096);
	} else if (strcmp(argv[1], "hold") == 0 && argc == 4) {
		CUdeviceptr a;
		CUresult rc = p_alloc(&a, strtoull(argv[2], NULL, 10) * MIB);

		CHECK(rc == 0, "hold: rc %d", rc);
		printf("held\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[3]));
	} else {
		fprintf(stderr, "mem_app: unknown mode %s\n", argv[1]);
		return 2;
	}
	return failed;
}
