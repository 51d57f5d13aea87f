/*
 * smprobe.cu — what space mode's SM partitions really get (issue 12).
 *
 *   gs-smprobe smids
 *       %nsmid, the multiprocessor count and every %smid seen by a wide
 *       grid of short blocks (repeated until all SMs were seen or 20
 *       tries): are the smids 0..SMs-1, or do they have gaps?
 *   gs-smprobe run MAP FIRST COUNT SECONDS GRID
 *       a persistent eater (no libgshare) whose blocks keep to a
 *       partition of COUNT SMs from FIRST: MAP raw = %smid in
 *       [FIRST, FIRST+COUNT) (the runtime's mapping today), rank = the
 *       rank of %smid among the present smids (from the probe above) in
 *       that range, none = no check.  GRID all = blocks per SM x every
 *       SM (the runtime today), part = blocks per SM x COUNT, adapt =
 *       part plus the blocks that left unused in the previous launch
 *       (at most all SMs' worth).  Blocks
 *       outside the partition leave at once.  MAP green = no check: the
 *       launches go to a stream of a green context made of the 8-SM
 *       groups that cover [FIRST, FIRST+COUNT) (cuDevSmResourceSplit-
 *       ByCount; FIRST and COUNT multiples of 8).  Prints its rate (tasks/s,
 *       first second left out), the launches, the distinct SMs where a
 *       block did work, and how many blocks left unused.
 *
 * Self-contained on purpose: it isolates the placement question from the
 * runtime (suspension, redo rings).  tests/gpu/space_probe.sh runs the
 * A/B under one MPS daemon.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXSM 1024
#define THREADS 256
#define ITERS 2048	/* FMAs per thread per task (~10 us per task) */

#define CK(x)								\
	do {								\
		cudaError_t e_ = (x);					\
		if (e_ != cudaSuccess) {				\
			fprintf(stderr, "smprobe: %s: %s\n", #x,	\
				cudaGetErrorString(e_));		\
			exit(1);					\
		}							\
	} while (0)

static __device__ __forceinline__ unsigned int smid(void)
{
	unsigned int s;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
	return s;
}

static __device__ __forceinline__ unsigned int nsmid(void)
{
	unsigned int s;
	asm volatile("mov.u32 %0, %%nsmid;" : "=r"(s));
	return s;
}

static __device__ __forceinline__ unsigned long long gtimer(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* every block: count its smid, stay ~20 us so the grid spreads */
__global__ void probe_k(unsigned int *seen, unsigned int *ns)
{
	if (threadIdx.x == 0) {
		unsigned long long t0 = gtimer();
		unsigned int s = smid();
		if (s < MAXSM)
			atomicAdd(&seen[s], 1u);
		atomicMax(ns, nsmid());
		while (gtimer() - t0 < 20000ull)
			;
	}
}

struct ctr {
	unsigned int next;
	unsigned int off;	/* blocks that left unused */
	unsigned int worked[MAXSM];	/* tasks per smid */
};

__global__ void __launch_bounds__(THREADS)
eat_k(struct ctr *c, const unsigned char *rank, unsigned int map,
      unsigned int first, unsigned int count, unsigned int total, float *out)
{
	__shared__ unsigned int task;
	__shared__ unsigned int leave;
	unsigned int s = smid();
	float a = threadIdx.x * 1e-3f, b = 1.0001f;

	if (threadIdx.x == 0) {
		unsigned int r = map == 1 ? s : (s < MAXSM ? rank[s] : 255u);
		leave = map != 0 && r - first >= count;
		if (leave)
			atomicAdd(&c->off, 1u);
	}
	__syncthreads();
	if (leave)
		return;
	for (;;) {
		if (threadIdx.x == 0)
			task = atomicAdd(&c->next, 1u);
		__syncthreads();
		if (task >= total)
			break;
		for (int i = 0; i < ITERS; i++)
			a = fmaf(a, b, 1e-7f);
		if (threadIdx.x == 0)
			atomicAdd(&c->worked[s < MAXSM ? s : 0], 1u);
		__syncthreads();
	}
	if (a == 12345.0f)
		out[threadIdx.x] = a;
}

#define CKD(x)								\
	do {								\
		CUresult r_ = (x);					\
		if (r_ != CUDA_SUCCESS) {				\
			const char *m_ = "?";				\
			cuGetErrorString(r_, &m_);			\
			fprintf(stderr, "smprobe: %s: %s\n", #x, m_);	\
			exit(1);					\
		}							\
	} while (0)

/* a stream of a green context on the 8-SM groups [first/8, (first+count)/8) */
static cudaStream_t green_stream(unsigned int first, unsigned int count)
{
	CUdevice d;
	CUdevResource all, grp[65], rem;
	CUdevResourceDesc desc;
	CUgreenCtx gc;
	CUstream st;
	unsigned int n = 64, g0 = first / 8, ng = count / 8, nr;
	int dev;

	CK(cudaGetDevice(&dev));
	CK(cudaFree(0));
	CKD(cuDeviceGet(&d, dev));
	CKD(cuDeviceGetDevResource(d, &all, CU_DEV_RESOURCE_TYPE_SM));
	CKD(cuDevSmResourceSplitByCount(grp, &n, &all, &rem, 0, 8));
	printf("green: %u SMs, min partition %u, alignment %u; %u groups of "
	       "%u, %u left; using groups %u..%u\n", all.sm.smCount,
	       all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment, n,
	       n ? grp[0].sm.smCount : 0, rem.sm.smCount, g0, g0 + ng - 1);
	/* the last partition: every group from g0 on, and the SMs the split
	 * left over */
	if (first + count >= all.sm.smCount && g0 < n)
		ng = n - g0;
	if (ng == 0 || g0 + ng > n) {
		fprintf(stderr, "smprobe: green partition out of range\n");
		exit(2);
	}
	nr = ng;
	/* the last partition also takes the SMs left over by the split */
	if (first + count >= all.sm.smCount && rem.sm.smCount > 0) {
		memmove(&grp[g0 + 1], &grp[g0], ng * sizeof(grp[0]));
		grp[g0] = rem;
		nr++;
	}
	CKD(cuDevResourceGenerateDesc(&desc, &grp[g0], nr));
	CKD(cuGreenCtxCreate(&gc, desc, d, CU_GREEN_CTX_DEFAULT_STREAM));
	CKD(cuGreenCtxStreamCreate(&st, gc, CU_STREAM_NON_BLOCKING, 0));
	return (cudaStream_t)st;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* rank[smid] among the smids seen; 255: not seen.  Returns how many. */
static unsigned int probe(unsigned char *rank, unsigned int *nsm_out,
			  int verbose)
{
	unsigned int *seen, *ns, h[MAXSM], hn = 0, n = 0, sms;
	int dev, try_;
	cudaDeviceProp p;

	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&p, dev));
	sms = (unsigned int)p.multiProcessorCount;
	CK(cudaMalloc(&seen, sizeof(h)));
	CK(cudaMalloc(&ns, sizeof(unsigned int)));
	CK(cudaMemset(seen, 0, sizeof(h)));
	CK(cudaMemset(ns, 0, sizeof(unsigned int)));
	for (try_ = 0; try_ < 20; try_++) {
		probe_k<<<sms * 16, 32>>>(seen, ns);
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpy(h, seen, sizeof(h), cudaMemcpyDeviceToHost));
		n = 0;
		for (unsigned int i = 0; i < MAXSM; i++)
			n += h[i] != 0;
		if (n >= sms)
			break;
	}
	CK(cudaMemcpy(&hn, ns, sizeof(hn), cudaMemcpyDeviceToHost));
	memset(rank, 255, MAXSM);
	n = 0;
	for (unsigned int i = 0; i < MAXSM; i++)
		if (h[i] != 0)
			rank[i] = (unsigned char)(n < 254 ? n : 254), n++;
	if (verbose) {
		unsigned int lo = MAXSM, hi = 0;
		printf("sms %u nsmid %u seen %u tries %d\nsmids:", sms, hn, n,
		       try_ + 1);
		for (unsigned int i = 0; i < MAXSM; i++)
			if (h[i] != 0) {
				printf(" %u", i);
				lo = i < lo ? i : lo;
				hi = i;
			}
		printf("\nsmid range %u..%u, gaps below %u: ", lo, hi, hi);
		for (unsigned int i = lo; i < hi; i++)
			if (h[i] == 0)
				printf(" %u", i);
		printf("\nrank->smid at 40, 64, 92, 131:");
		for (unsigned int i = 0, r = 0; i < MAXSM; i++)
			if (h[i] != 0) {
				if (r == 40 || r == 64 || r == 92 || r == 131)
					printf(" %u->%u", r, i);
				r++;
			}
		printf("\n");
	}
	cudaFree(seen);
	cudaFree(ns);
	*nsm_out = sms;
	return n;
}

int main(int argc, char **argv)
{
	unsigned char rank[MAXSM], *drank;
	unsigned int sms, present, map, first, count, total, nphys;
	int bps = 0, grid_part, grid_adapt;
	unsigned int off_prev = 0, nmax, nsum = 0;
	double secs, t0, t1 = 0, t;
	unsigned long long tasks = 0, launches = 0;
	struct ctr *c, *hc;
	float *out;
	cudaStream_t gstream;

	if (argc < 2) {
		fprintf(stderr, "usage: gs-smprobe smids | run MAP FIRST "
			"COUNT SECONDS GRID\n");
		return 2;
	}
	if (strcmp(argv[1], "smids") == 0) {
		probe(rank, &sms, 1);
		return 0;
	}
	if (strcmp(argv[1], "run") != 0 || argc != 7) {
		fprintf(stderr, "gs-smprobe: bad arguments\n");
		return 2;
	}
	map = strcmp(argv[2], "raw") == 0 ? 1 : strcmp(argv[2], "rank") == 0 ?
	      2 : 0;
	gstream = strcmp(argv[2], "green") == 0 ?
		  green_stream((unsigned int)atoi(argv[3]),
			       (unsigned int)atoi(argv[4])) : 0;
	first = (unsigned int)atoi(argv[3]);
	count = (unsigned int)atoi(argv[4]);
	secs = atof(argv[5]);
	grid_adapt = strcmp(argv[6], "adapt") == 0;
	grid_part = grid_adapt || strcmp(argv[6], "part") == 0;
	present = probe(rank, &sms, 0);
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, eat_k,
							 THREADS, 0));
	if (map == 0 && count == 0)
		count = sms;
	nphys = (unsigned int)bps * (grid_part ? count : sms);
	nmax = (unsigned int)bps * sms;
	total = (unsigned int)bps * sms * 64;	/* ~64 tasks per worker solo: launches long beside their gaps */
	CK(cudaMalloc(&drank, MAXSM));
	CK(cudaMemcpy(drank, rank, MAXSM, cudaMemcpyHostToDevice));
	CK(cudaMalloc(&c, sizeof(*c)));
	CK(cudaMemset(c, 0, sizeof(*c)));
	CK(cudaMalloc(&out, THREADS * sizeof(float)));
	CK(cudaMallocHost(&hc, sizeof(*hc)));
	printf("run map %s first %u count %u grid %u blocks (%d per SM) "
	       "present %u of %u\n", argv[2], first, count, nphys, bps,
	       present, sms);
	t0 = now();
	for (;;) {
		CK(cudaMemsetAsync(c, 0, 2 * sizeof(unsigned int), gstream));
		{
			unsigned int g = nphys;
			if (grid_adapt)
				g = nphys + off_prev > nmax ? nmax :
				    nphys + off_prev;
			nsum += g;
			eat_k<<<g, THREADS, 0, gstream>>>(c, drank, map,
					first, count, total, out);
			CK(cudaGetLastError());
		}
		CK(cudaStreamSynchronize(gstream));
		if (grid_adapt)
			CK(cudaMemcpy(&off_prev, &c->off, sizeof(off_prev),
				      cudaMemcpyDeviceToHost));
		t = now();
		launches++;
		if (t - t0 >= 1.0) {
			if (t1 == 0) {
				t1 = t;	/* first second left out */
				CK(cudaMemset(c->worked, 0,
					      sizeof(c->worked)));
				tasks = 0;
				launches = 0;
				nsum = 0;
				continue;
			}
			tasks += total;
		}
		if (t - t0 >= secs + 1.0)
			break;
	}
	CK(cudaMemcpy(hc, c, sizeof(*hc), cudaMemcpyDeviceToHost));
	{
		unsigned int w = 0, lo = MAXSM, hi = 0;
		for (unsigned int i = 0; i < MAXSM; i++)
			if (hc->worked[i] != 0) {
				w++;
				lo = i < lo ? i : lo;
				hi = i;
			}
		printf("result rate=%.1f launches=%llu ms_per_launch=%.3f "
		       "working_sms=%u smid_lo=%u smid_hi=%u "
		       "off_last_launch=%u avg_grid=%.0f\n",
		       tasks / (t - t1), launches,
		       launches ? (t - t1) * 1e3 / launches : 0.0, w, lo, hi,
		       hc->off, launches ? (double)nsum / launches : 0.0);
	}
	return 0;
}
