/*
 * loopab.cu — where a persistent loop's time goes for short memory-bound
 * block-tasks.  One body (vadd or the 5-point stencil tile), run as:
 *
 *   plain     one hardware block per logical block
 *   stride    persistent, static: block b runs b, b + P, b + 2P, ...
 *   chunk     persistent, static: contiguous runs of 16 (chunk b, b + P..)
 *   claim     persistent, dynamic: thread 0 claims 16 contiguous with one
 *             atomic (the next claim issued one task ahead), broadcast
 *             through shared memory, one barrier per task
 *   sclaim    as claim, but a claim of 16 is strided: slot j of a round
 *             of P claims takes j, j + P, ..., j + 15P of that round
 *   gshare    the same body as a GS_KERNEL through gs_launch (1D grid)
 *   nobar     (vadd) stride without the barrier between tasks
 *   lad0..15  the ladder (k_lad below): claim plus the gshare loop's
 *             per-task features one by one; lad3s, lad3h: two cheaper
 *             ways to fetch the flag
 *   gshare2   (stencil) the GS_KERNEL on a 2D grid, as the example
 *
 * P = blocks per SM (occupancy) x SMs.  Times are medians of CUDA-event
 * timings, the variants interleaved in every repetition.
 *
 * Usage: gs-loopab [vadd|stencil|clock|both] [REPS]
 * (clock: clock64() ticks per %globaltimer nanosecond on one SM)
 */
#include "../examples/ex_common.h"

#define TS 16
#define CH 16u

struct lab_args {
	const float *a, *b;
	float *c;
	unsigned int n;		/* vadd: elements; stencil: width */
	unsigned int h;		/* stencil: height */
	unsigned int gx;	/* logical grid width (stencil) */
};

static __device__ __forceinline__ void vadd_task(const lab_args &p,
						 unsigned int t)
{
	unsigned int i = t * blockDim.x + threadIdx.x;
	if (i < p.n)
		p.c[i] = p.a[i] + p.b[i];
}

/* the stencil tile at tile coordinates (bx, by) */
static __device__ __forceinline__ void sten_xy(const lab_args &p,
					       unsigned int bx, unsigned int by)
{
	__shared__ float s[TS + 2][TS + 2];
	int w = (int)p.n, h = (int)p.h;
	int x = (int)(bx * TS + threadIdx.x), y = (int)(by * TS + threadIdx.y);
	int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
	auto at = [&](int xx, int yy) {
		xx = min(max(xx, 0), w - 1);
		yy = min(max(yy, 0), h - 1);
		return p.a[(size_t)yy * w + xx];
	};
	s[ly][lx] = at(x, y);
	if (threadIdx.x == 0)
		s[ly][0] = at(x - 1, y);
	if (threadIdx.x == TS - 1)
		s[ly][TS + 1] = at(x + 1, y);
	if (threadIdx.y == 0)
		s[0][lx] = at(x, y - 1);
	if (threadIdx.y == TS - 1)
		s[TS + 1][lx] = at(x, y + 1);
	__syncthreads();
	if (x < w && y < h)
		p.c[(size_t)y * w + x] = 0.2f * (s[ly][lx] + s[ly][lx - 1] +
						 s[ly][lx + 1] +
						 s[ly - 1][lx] +
						 s[ly + 1][lx]);
}

static __device__ __forceinline__ void sten_task(const lab_args &p,
						 unsigned int t)
{
	sten_xy(p, t % p.gx, t / p.gx);
}

template <int K> static __device__ __forceinline__ void task(const lab_args &p,
							     unsigned int t)
{
	if (K == 0)
		vadd_task(p, t);
	else
		sten_task(p, t);
}

static __device__ __forceinline__ unsigned int lin_block(void)
{
	return blockIdx.x + gridDim.x * blockIdx.y;
}

template <int K> __global__ void k_plain(lab_args p)
{
	task<K>(p, lin_block());
}

template <int K> __global__ void k_stride(lab_args p, unsigned int total)
{
	for (unsigned int t = blockIdx.x; t < total; t += gridDim.x) {
		task<K>(p, t);
		__syncthreads();
	}
}

/* vadd only: no barrier between tasks (warps run ahead) */
__global__ void k_nobar(lab_args p, unsigned int total)
{
	for (unsigned int t = blockIdx.x; t < total; t += gridDim.x)
		vadd_task(p, t);
}

template <int K> __global__ void k_chunk(lab_args p, unsigned int total)
{
	for (unsigned int c = blockIdx.x; c * CH < total; c += gridDim.x) {
		unsigned int e = min(c * CH + CH, total);
		for (unsigned int t = c * CH; t < e; t++) {
			task<K>(p, t);
			__syncthreads();
		}
	}
}

/* strided: claim number q (0, 1, ...) covers, in round r = q / P, slot
 * j = q % P: tasks r*CH*P + j + i*P, i < CH */
static __device__ __forceinline__ unsigned int sc_task(unsigned int q,
						       unsigned int i,
						       unsigned int P)
{
	unsigned int r = q / P, j = q - r * P;
	return r * CH * P + j + i * P;
}

template <int K, int STRIDED>
__global__ void k_claim(lab_args p, unsigned int total, unsigned int *ctr)
{
	__shared__ unsigned int cur_s[2];
	const bool t0 = threadIdx.x == 0 && threadIdx.y == 0;
	const unsigned int P = gridDim.x;
	unsigned int q = 0, i = 0, nq = 0, k = 0;
	int stop = 0;

	if (t0) {
		q = atomicAdd(ctr, 1u);
		nq = atomicAdd(ctr, 1u);
		unsigned int t = STRIDED ? sc_task(q, 0, P) : q * CH;
		stop = t >= total;
		cur_s[0] = t;
	}
	while (!__syncthreads_or(stop)) {
		unsigned int par = k & 1u;
		task<K>(p, cur_s[par]);
		if (t0) {
			unsigned int t;
			if (++i == CH) {
				i = 0;
				q = nq;
				nq = atomicAdd(ctr, 1u);
			}
			t = STRIDED ? sc_task(q, i, P) : q * CH + i;
			if (t >= total && i != 0) {	/* ragged last claim */
				i = 0;
				q = nq;
				nq = atomicAdd(ctr, 1u);
				t = STRIDED ? sc_task(q, 0, P) : q * CH;
			}
			stop = t >= total;
			cur_s[par ^ 1u] = t;
		}
		k++;
	}
}

/*
 * The ladder: k_claim<K, 0> plus, cumulatively, what the gshare loop adds
 * per task.  F bits: 1 the task read through a per-warp parity word
 * (gs_block_idx), 2 thread 0 fetches a flag with cp.async before the
 * body and waits for it after, 4 thread 0 turns the index into (x, y)
 * with divisions (stencil; vadd stores x = index), 8 thread 0's other
 * bookkeeping (an event word, a counter, a clock check); 16 the flag
 * read from one of 32 copies 128 bytes apart (blockIdx % 32), 32 the
 * flag fetched on every other task only.
 */
struct lad_blk {
	unsigned int flagbuf[4];
	struct {
		unsigned int lb, x, y, z;
	} tk[2];
	unsigned int wpar[32];
	unsigned int event;
};

template <int K, int F>
__global__ void k_lad(lab_args p, unsigned int total, unsigned int *ctr,
		      const unsigned int *flag, unsigned int gen,
		      unsigned int *runs)
{
	__shared__ __align__(16) lad_blk b;
	const bool t0 = threadIdx.x == 0 && threadIdx.y == 0;
	const unsigned int wid = (threadIdx.x + blockDim.x * threadIdx.y) >> 5;
	unsigned int q = 0, i = 0, nq = 0, k = 0, done = 0, pre_t = 0;
	int stop = 0;

	if (t0) {
		q = atomicAdd(ctr, 1u);
		nq = atomicAdd(ctr, 1u);
		unsigned int t = q * CH;
		stop = t >= total;
		b.tk[0].lb = t;
		b.tk[0].x = (F & 4) ? t % p.gx : t;
		b.tk[0].y = (F & 4) ? t / p.gx : 0;
		b.event = 0;
	}
	while (!__syncthreads_or(stop)) {
		const unsigned int par = k & 1u;
		unsigned int t, bx, by;

		if (F & 1) {
			b.wpar[wid] = par;
			unsigned int pp = *(volatile unsigned int *)&b.wpar[wid];
			t = b.tk[pp].lb;
			bx = b.tk[pp].x;
			by = b.tk[pp].y;
		} else {
			t = b.tk[par].lb;
			bx = b.tk[par].x;
			by = b.tk[par].y;
		}
		if ((F & 2) && t0 && (!(F & 32) || (k & 1u))) {
			const unsigned int *fa = (F & 16) ?
				flag + (blockIdx.x & 31u) * 32u : flag;
			unsigned int dst = (unsigned int)__cvta_generic_to_shared(
			    b.flagbuf);
			asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
				     "cp.async.commit_group;\n" :: "r"(dst),
				     "l"(fa) : "memory");
			pre_t = (unsigned int)clock();
		}
		if (K == 0)
			vadd_task(p, t);
		else if (F & 4)
			sten_xy(p, bx, by);
		else
			sten_task(p, t);
		if (t0) {
			if (F & 8) {
				if (*(volatile unsigned int *)&b.event == 0)
					done++;
				if (runs != NULL)
					atomicAdd(&runs[t], 1u);
			}
			if ((F & 2) && (!(F & 32) || (k & 1u))) {
				asm volatile("cp.async.wait_all;\n" ::: "memory");
				if (*(volatile unsigned int *)&b.flagbuf[0] >=
				    gen)
					stop = 1;
			}
			if ((F & 8) && (unsigned int)clock() - pre_t > 40000u &&
			    __ldcv(flag) >= gen)
				stop = 1;
			if (++i == CH) {
				i = 0;
				q = nq;
				nq = atomicAdd(ctr, 1u);
			}
			t = q * CH + i;
			if (t >= total && i != 0) {
				i = 0;
				q = nq;
				nq = atomicAdd(ctr, 1u);
				t = q * CH;
			}
			stop |= t >= total;
			b.tk[par ^ 1u].lb = t;
			if (F & 4) {
				unsigned int qq = t / p.gx;
				b.tk[par ^ 1u].x = t - qq * p.gx;
				b.tk[par ^ 1u].y = qq % p.h;
				b.tk[par ^ 1u].z = qq / p.h;
			} else {
				b.tk[par ^ 1u].x = t;
			}
		}
		k++;
	}
	if (t0 && (F & 8))
		atomicAdd(ctr + 1, done);
}

GS_KERNEL(lab_vadd, struct lab_args, p)
{
	vadd_task(p, gs_block_linear());
}

GS_KERNEL(lab_sten, struct lab_args, p)
{
	sten_task(p, gs_block_linear());
}

/* the stencil as the example writes it: a 2D logical grid */
GS_KERNEL_BOUNDS(lab_sten2, struct lab_args, p, 0u, 256, 8)
{
	dim3 b = gs_block_idx();
	sten_xy(p, b.x, b.y);
}

/* clock64() ticks over a %globaltimer interval of ns nanoseconds */
__global__ void k_clockrate(long long ns, long long *out)
{
	long long g0, g, c0 = clock64(), c;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
	} while (g - g0 < ns);
	c = clock64();
	out[0] = c - c0;
	out[1] = g - g0;
}

static void clockrate(void)
{
	long long *d, h[2];
	CK(cudaMalloc(&d, sizeof h));
	for (int i = 0; i < 3; i++) {
		k_clockrate<<<1, 1>>>(200000, d);
		CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
		printf("loopab clock64 %.3f ticks per ns (%lld ticks in %lld "
		       "ns)\n", (double)h[0] / (double)h[1], h[0], h[1]);
	}
	CK(cudaFree(d));
}

static void lad(int kind, int step, unsigned int P, dim3 blk, lab_args p,
		unsigned int total, unsigned int *ctr)
{
	/* ctr[0] claims, ctr[1] done, ctr[4] the flag (0, 16-byte
	 * aligned for cp.async), gen 1 */
	const unsigned int *fl = ctr + 4;
#define LAD(K, F) k_lad<K, F><<<P, blk>>>(p, total, ctr, fl, 1u, NULL)
	switch (kind * 8 + step) {
	case 0: LAD(0, 0); break;
	case 1: LAD(0, 1); break;
	case 2: LAD(0, 3); break;
	case 3: LAD(0, 7); break;
	case 4: LAD(0, 15); break;
	case 5: LAD(0, 19); break;
	case 6: LAD(0, 35); break;
	case 8: LAD(1, 0); break;
	case 9: LAD(1, 1); break;
	case 10: LAD(1, 3); break;
	case 11: LAD(1, 7); break;
	case 12: LAD(1, 15); break;
	case 13: LAD(1, 19); break;
	case 14: LAD(1, 35); break;
	}
#undef LAD
}

static void run(const char *name, int kind, int reps)
{
	cudaDeviceProp prop;
	int dev, occ = 0, sms;
	unsigned int total, T;
	dim3 blk, grid;
	lab_args p;
	size_t n;
	unsigned int *ctr;
	float *a, *b, *c;

	CK(cudaGetDevice(&dev));
	CK(cudaGetDeviceProperties(&prop, dev));
	sms = prop.multiProcessorCount;
	if (kind == 0) {
		n = (size_t)1 << 26;
		T = 256;
		blk = dim3(T);
		total = (unsigned int)(n / T);
		grid = dim3(total);
		p.n = (unsigned int)n;
		p.h = 1;
		p.gx = total;
		CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    &occ, k_claim<0, 0>, T, 0));
	} else {
		unsigned int w = 8192, h = 8192;
		n = (size_t)w * h;
		T = TS * TS;
		blk = dim3(TS, TS);
		grid = dim3(w / TS, h / TS);
		total = grid.x * grid.y;
		p.n = w;
		p.h = h;
		p.gx = grid.x;
		CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    &occ, k_claim<1, 0>, T, 0));
	}
	unsigned int P = (unsigned int)(occ * sms);
	CK(cudaMalloc(&a, n * 4));
	CK(cudaMalloc(&b, n * 4));
	CK(cudaMalloc(&c, n * 4));
	CK(cudaMalloc(&ctr, 4096 + 32));
	CK(cudaMemset(ctr, 0, 4096 + 32));
	CK(cudaMemset(a, 0, n * 4));
	CK(cudaMemset(b, 0, n * 4));
	p.a = a;
	p.b = b;
	p.c = c;
	printf("loopab %s tasks=%u blocks_per_sm=%d P=%u\n", name, total, occ,
	       P);

	const char *vn[] = { "plain", "stride", "chunk", "claim", "sclaim",
			     "gshare", "nobar", "lad0", "lad1", "lad3",
			     "lad7", "lad15", "lad3s", "lad3h", "gshare2" };
	const int NV = 15;
	std::vector<double> ms[15];
	for (int r = 0; r < reps + 2; r++) {
		for (int v = 0; v < NV; v++) {
			double t = ex_time(0, [&] {
				switch (v) {
				case 0:
					if (kind == 0)
						k_plain<0><<<grid, blk>>>(p);
					else
						k_plain<1><<<grid, blk>>>(p);
					break;
				case 1:
					if (kind == 0)
						k_stride<0><<<P, blk>>>(p,
									total);
					else
						k_stride<1><<<P, blk>>>(p,
									total);
					break;
				case 2:
					if (kind == 0)
						k_chunk<0><<<P, blk>>>(p,
								       total);
					else
						k_chunk<1><<<P, blk>>>(p,
								       total);
					break;
				case 3:
				case 4:
					CK(cudaMemsetAsync(ctr, 0, 4));
					if (kind == 0 && v == 3)
						k_claim<0, 0><<<P, blk>>>(
						    p, total, ctr);
					else if (kind == 0)
						k_claim<0, 1><<<P, blk>>>(
						    p, total, ctr);
					else if (v == 3)
						k_claim<1, 0><<<P, blk>>>(
						    p, total, ctr);
					else
						k_claim<1, 1><<<P, blk>>>(
						    p, total, ctr);
					break;
				case 6:
					if (kind == 0)
						k_nobar<<<P, blk>>>(p, total);
					break;
				case 7: case 8: case 9: case 10: case 11:
				case 12: case 13:
					CK(cudaMemsetAsync(ctr, 0, 8));
					lad(kind, v - 7, P, blk, p, total, ctr);
					break;
				case 14:
					if (kind == 1)
						GK(gs_launch(&lab_sten2,
							     gs3(grid.x, grid.y),
							     gs3(blk.x, blk.y), 0,
							     &p, sizeof p, NULL));
					break;
				default: {
					gs_dim3 g = kind == 0 ?
						gs3(total) :
						gs3(grid.x, grid.y);
					GK(gs_launch(kind == 0 ? &lab_vadd :
							&lab_sten,
						     g, gs3(blk.x, blk.y), 0,
						     &p, sizeof p, NULL));
				}
				}
				CK(cudaGetLastError());
			});
			GK(gs_synchronize());	/* reaped untimed */
			if (r >= 2)
				ms[v].push_back(t);
		}
	}
	double base = ex_median(ms[0]);
	for (int v = 0; v < NV; v++) {
		double m = ex_median(ms[v]);
		if ((v == 6 && kind != 0) || (v == 14 && kind != 1))
			continue;	/* not run for this body */
		printf("loopab %s %-7s %.4f ms  %+7.2f %%\n", name, vn[v], m,
		       (m / base - 1) * 100);
	}
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c));
	CK(cudaFree(ctr));
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "both";
	int reps = argc > 2 ? atoi(argv[2]) : 30;

	GK(gs_init(0));
	if (!strcmp(what, "clock") || !strcmp(what, "both"))
		clockrate();
	if (!strcmp(what, "vadd") || !strcmp(what, "both"))
		run("vadd", 0, reps);
	if (!strcmp(what, "stencil") || !strcmp(what, "both"))
		run("stencil", 1, reps);
	return 0;
}
