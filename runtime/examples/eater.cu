/*
 * eater.cu — a long-running "GPU eater" (GLoop's throttle): each logical
 * block iterates an integer recurrence `iters` times and calls
 * a yield point every 16 iterations (CHUNK); on a yield it saves its loop state
 * (recurrence value per thread, iteration per block) and returns, and
 * resumes from it when the block runs again.  The result is exact, so the
 * CPU reference (jump-ahead) catches a lost or repeated iteration.
 *
 *   --check [R]   exactness under forced suspensions
 *   --bench [N]   plain vs gshare with and without the yield points:
 *                 the cost of one gs_should_yield()
 *   --run S       eat the GPU for S seconds, printing one line per 1 s
 *                 window (work done and GPU time) — the sharing benchmark
 *
 * Built with -DEAT_PROBE, --bench also prints where a one-wave kernel's
 * time goes (each block's start and end, plain and gshare: "probe").
 */
#ifdef EAT_PROBE
#define GS_LOOPPROBE	/* the loop's own stamps too (gshare_device.cuh) */
#endif
#include "ex_common.h"

#define ET 256
#define STEPS 8		/* recurrence steps per iteration */
#define LA 1664525u
#define LC 1013904223u

struct eat_args {
	unsigned int *x;	/* per thread */
	unsigned int *it;	/* per logical block */
	unsigned int iters;
	int yield;		/* 1: a yield point every CHUNK iterations */
#ifdef EAT_PROBE
	unsigned int slot;	/* the stamps' buffer (launch parity) */
#endif
};

#ifdef EAT_PROBE
/* -DEAT_PROBE: thread 0 of each block stamps the global timer when its
 * block's work starts and ends, in one of two buffers a launch (--bench
 * then prints where a one-wave kernel's time goes, plain and gshare) */
#define EAT_PN 4096u
__device__ unsigned long long eat_t[2][2][EAT_PN];
static __device__ __forceinline__ void eat_stamp(unsigned int slot,
						 unsigned int w,
						 unsigned int b)
{
	unsigned long long t = gs__gtimer();	/* the loop's own stamps' clock */

	if (threadIdx.x == 0 && b < EAT_PN)
		eat_t[slot][w][b] = t;
}
#define EAT_STAMP(slot, w, b) eat_stamp((slot), (w), (b))
#else
#define EAT_STAMP(slot, w, b) do { } while (0)
#endif

/* a non-linear step, so that the compiler cannot fold iterations */
static __host__ __device__ __forceinline__ unsigned int step8(unsigned int x)
{
	for (int s = 0; s < STEPS; s++) {
		x = x * LA + LC;
		x ^= x >> 15;
	}
	return x;
}

#define CHUNK 16
/* --run's iterations per one-wave kernel (the sharing benchmark's job;
 * --bench times the same shape) */
#define RUN_ITERS 3008u

__global__ void eat_plain(unsigned int *xs, unsigned int iters,
			  unsigned int slot = 0)
{
	size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned int x = xs[idx];
	EAT_STAMP(slot, 0, blockIdx.x);
	for (unsigned int i = 0; i < iters; i += CHUNK) {
#pragma unroll
		for (int j = 0; j < CHUNK; j++)
			x = step8(x);
	}
	xs[idx] = x;
	EAT_STAMP(slot, 1, blockIdx.x);
}

/* a logical block's loop state, saved where the block stops (a yield or
 * the end) */
static __device__ __forceinline__ void eat_save(unsigned int *xs,
						unsigned int *its, size_t idx,
						unsigned int lb, unsigned int x,
						unsigned int i)
{
	xs[idx] = x;
	__syncthreads();
	if (threadIdx.x == 0)
		its[lb] = i;
}

/* One logical block's run from its saved state: with `on`, a yield
 * point every CHUNK iterations (iters is a multiple of it), yield(i)
 * asked there; on true the state is saved and the block returns.  For
 * the helper kernel below: a body calls gs_should_yield() in the `if`
 * itself (eat), as docs/runtime.md shows — wrapped in a function or a
 * lambda that returns its value, each call between looks costs a few
 * instructions more. */
template <typename Y>
static __device__ __forceinline__ void eat_block(unsigned int *xs,
						 unsigned int *its,
						 unsigned int iters,
						 unsigned int lb, int on,
						 Y yield)
{
	size_t idx = (size_t)lb * blockDim.x + threadIdx.x;
	unsigned int x = xs[idx];
	unsigned int i = its[lb];

	while (i < iters) {
#pragma unroll
		for (int j = 0; j < CHUNK; j++)
			x = step8(x);
		i += CHUNK;
		if (on && i < iters && yield(i))
			break;
	}
	eat_save(xs, its, idx, lb, x, i);
}

GS_KERNEL(eat, struct eat_args, p)
{
	unsigned int lb = gs_block_linear();
	size_t idx = (size_t)lb * blockDim.x + threadIdx.x;
	unsigned int x = p.x[idx];
	unsigned int i = p.it[lb];

	EAT_STAMP(p.slot, 0, lb);
	while (i < p.iters) {
#pragma unroll
		for (int j = 0; j < CHUNK; j++)
			x = step8(x);
		i += CHUNK;
		if (p.yield && i < p.iters && gs_should_yield())
			break;
	}
	eat_save(p.x, p.it, idx, lb, x, i);
	EAT_STAMP(p.slot, 1, lb);
}

/* The same over a 3D logical grid, with the block index and the yield
 * point (gs_yield_every) in helper functions: outside the body,
 * accessors take the helpers' own path, in the loop and in direct
 * launches alike (check mode only).  A wrong index leaves its block's
 * counter short. */
struct eath_args {
	unsigned int *x, *it;
	unsigned int iters, nblk;
};

static __device__ __forceinline__ unsigned int eath_block(unsigned int nblk)
{
	dim3 b = gs_block_idx(), g = gs_grid_dim();
	unsigned int lb = (b.z * g.y + b.y) * g.x + b.x;

	return lb == gs_block_linear() ? lb : nblk;
}

/* gs_yield_every in a helper: a look at every other chunk */
static __device__ __forceinline__ bool eath_yield(unsigned int i)
{
	return gs_yield_every(i / CHUNK, 1);
}

GS_KERNEL(eath, struct eath_args, p)
{
	unsigned int lb = eath_block(p.nblk);

	if (lb >= p.nblk)	/* the grid's padding, or a wrong index */
		return;
	eat_block(p.x, p.it, p.iters, lb, 1,
		  [](unsigned int i) { return eath_yield(i); });
}

#ifdef EAT_PROBE
/* The stamps of the last two of a row of one-wave launches (buffers 0
 * then 1), µs: where the first one's time went, and the gap to the next */
static void eat_probe_print(const char *what, unsigned int n, double ms)
{
	static unsigned long long t[2][2][EAT_PN], lp[2][2][GS__LP_N];
	std::vector<double> body, pro;
	unsigned long long e0 = ~0ull, e1 = 0, x0 = ~0ull, x1 = 0,
			   n0 = ~0ull, l0 = ~0ull, l1 = 0;
	int q = -1;

	CK(cudaMemcpyFromSymbol(t, eat_t, sizeof t));
	for (unsigned int b = 0; b < n && b < EAT_PN; b++) {
		e0 = std::min(e0, t[0][0][b]);
		e1 = std::max(e1, t[0][0][b]);
		x0 = std::min(x0, t[0][1][b]);
		x1 = std::max(x1, t[0][1][b]);
		n0 = std::min(n0, t[1][0][b]);
		body.push_back((double)(t[0][1][b] - t[0][0][b]) / 1e3);
	}
	printf("probe %s kernel_us=%.1f span_us=%.1f entry_spread_us=%.2f "
	       "body_p50_us=%.1f body_max_us=%.1f exit_spread_us=%.2f "
	       "gap_to_next_us=%.2f\n", what, ms * 1e3, (x1 - e0) / 1e3,
	       (e1 - e0) / 1e3, ex_pct(body, 0.5), ex_pct(body, 1.0),
	       (x1 - x0) / 1e3, ((double)n0 - (double)x1) / 1e3);
	if (strcmp(what, "plain") == 0)
		return;
	/* the loop's stamps of the same launch: the buffer whose first
	 * entry is the last one before its first body */
	CK(cudaMemcpyFromSymbol(lp, gs__lp_buf, sizeof lp));
	for (int s = 0; s < 2; s++) {
		unsigned long long m = ~0ull;
		for (unsigned int b = 0; b < n && b < GS__LP_N; b++)
			m = std::min(m, lp[s][0][b]);
		if (m <= e0 && (q < 0 || m > l0)) {
			q = s;
			l0 = m;
		}
	}
	if (q < 0)
		return;
	for (unsigned int b = 0; b < n && b < GS__LP_N; b++) {
		l1 = std::max(l1, lp[q][0][b]);
		if (lp[q][1][b] != 0)
			pro.push_back((double)(lp[q][1][b] - lp[q][0][b]) /
				      1e3);
	}
	printf("probe %s loop_entry_spread_us=%.2f loop_to_first_body_us=%.2f "
	       "prologue_p50_us=%.2f prologue_p90_us=%.2f "
	       "prologue_max_us=%.2f blocks_working=%zu\n", what,
	       (l1 - l0) / 1e3, (e0 - l0) / 1e3, ex_pct(pro, 0.5),
	       ex_pct(pro, 0.9), ex_pct(pro, 1.0), pro.size());
}
#endif

static unsigned int cpu_run(unsigned int x, unsigned int iters)
{
	for (unsigned int i = 0; i < iters; i++)
		x = step8(x);
	return x;
}

struct eater {
	unsigned int nblk, iters;
	unsigned int *dx, *dit;
	std::vector<unsigned int> x0;
};

static void eater_setup(eater &e, unsigned int nblk, unsigned int iters,
			uint64_t *seed)
{
	e.nblk = nblk;
	e.iters = iters;
	e.x0.resize((size_t)nblk * ET);
	for (auto &v : e.x0)
		v = (unsigned int)ex_rand(seed);
	CK(cudaMalloc(&e.dx, e.x0.size() * 4));
	CK(cudaMalloc(&e.dit, nblk * 4));
}

static void eater_reset(eater &e)
{
	CK(cudaMemcpy(e.dx, e.x0.data(), e.x0.size() * 4,
		      cudaMemcpyHostToDevice));
	CK(cudaMemset(e.dit, 0, e.nblk * 4));
}

/* Every block's iteration counter (gshare version) and two sampled
 * threads of every block against the CPU. */
static int eater_verify(eater &e, const char *what, int counters)
{
	std::vector<unsigned int> got(e.x0.size()), it(e.nblk);
	CK(cudaMemcpy(got.data(), e.dx, got.size() * 4,
		      cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(it.data(), e.dit, e.nblk * 4, cudaMemcpyDeviceToHost));
	size_t bad = 0;
	for (unsigned int b = 0; b < e.nblk; b++) {
		size_t i1 = (size_t)b * ET + (b * 37u) % ET;
		size_t i2 = (size_t)b * ET + ET - 1;
		if (got[i1] != cpu_run(e.x0[i1], e.iters))
			bad++;
		if (got[i2] != cpu_run(e.x0[i2], e.iters))
			bad++;
		if (counters && it[b] != e.iters)
			bad++;
	}
	if (bad)
		fprintf(stderr, "%s: MISMATCH in %zu values\n", what, bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;

	GK(gs_init(0));
	if (o.check) {
		for (int r = 0; r < o.rounds; r++) {
			eater e;
			unsigned nblk = 2000 + (unsigned)(ex_rand(&seed) % 500);
			eater_setup(e, nblk, 8000, &seed);
			eater_reset(e);
			eat_args p = { e.dx, e.dit, e.iters, 1 };
			GK(gs_launch(&eat, gs3(nblk), gs3(ET), 0, &p, sizeof p,
				     NULL));
			GK(gs_synchronize());
			fails += eater_verify(e, "eater gs", 1);
			/* helpers, over a 3D grid with padding */
			eater_reset(e);
			eath_args ph = { e.dx, e.dit, e.iters, nblk };
			unsigned int hx = 7, hy = 5;
			unsigned int hz = (nblk + hx * hy - 1) / (hx * hy);
			GK(gs_launch(&eath, gs3(hx, hy, hz), gs3(ET), 0, &ph,
				     sizeof ph, NULL));
			GK(gs_synchronize());
			fails += eater_verify(e, "eater helpers gs", 1);
			eater_reset(e);
			eat_plain<<<nblk, ET>>>(e.dx, e.iters);
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
			fails += eater_verify(e, "eater plain", 0);
			CK(cudaFree(e.dx));
			CK(cudaFree(e.dit));
		}
		ex_print_stats("eater", fails);
	}
	if (o.bench) {
		eater e;
		unsigned int nblk = 132 * 8 * 4, iters = 4000;
		eater_setup(e, nblk, iters, &seed);
		eater_reset(e);
		/* variants: no yield point, one per CHUNK iterations */
		const int yv[2] = { 0, 1 };
		std::vector<double> tp, tg[2];
		for (int r = 0; r < o.reps + 3; r++) {
			double a = ex_time(0, [&] { eat_plain<<<nblk, ET>>>(
							e.dx, iters); });
			if (r >= 3)
				tp.push_back(a);
			for (int v = 0; v < 2; v++) {
				eat_args p = { e.dx, e.dit, iters, yv[v] };
				CK(cudaMemset(e.dit, 0, nblk * 4));
				double b = ex_time_k(0, 1, true, [&] {
					GK(gs_launch(&eat, gs3(nblk), gs3(ET), 0,
						     &p, sizeof p, NULL));
				});
				if (r >= 3)
					tg[v].push_back(b);
			}
		}
		int bps = 0;
		CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		    &bps, eat__k, ET, 0));
		int sms = 0;
		CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
					  0));
		double waves = (double)nblk / (bps * sms);
		double mp = ex_median(tp), m0 = ex_median(tg[0]),
		       m1 = ex_median(tg[1]);
		double calls = iters / CHUNK * waves;
		printf("bench eater plain_ms=%.4f gs_ms=%.4f overhead_pct=%.2f "
		       "attached=%d\n", mp, m1, (m1 / mp - 1) * 100,
		       gs_attached() == 1);
		printf("bench yieldpoint noyield_ms=%.4f yield_ms=%.4f "
		       "calls_per_block=%.0f cost_ns_per_call=%.2f "
		       "chunk_ns=%.2f\n", m0, m1, calls,
		       (m1 - m0) * 1e6 / calls, m0 * 1e6 / calls);
		/* the shape of --run (the sharing benchmark's job): sixteen
		 * one-wave kernels of RUN_ITERS iterations in a row, plain and
		 * gshare without and with the yield points (ms per kernel) */
		eater e1;
		unsigned int n1 = (unsigned int)(bps * sms), it1 = RUN_ITERS;
		unsigned int *its1;
		eater_setup(e1, n1, it1, &seed);
		eater_reset(e1);
		CK(cudaMalloc(&its1, 16 * n1 * 4));
		std::vector<double> sp, sg[2];
		for (int r = 0; r < o.reps + 2; r++) {
			double a = ex_time_k(0, 16, false, [&] {
				eat_plain<<<n1, ET>>>(e1.dx, it1);
			});
			if (r >= 2)
				sp.push_back(a);
			for (int v = 0; v < 2; v++) {
				int q = 0;
				CK(cudaMemset(its1, 0, 16 * n1 * 4));
				double b = ex_time_k(0, 16, true, [&] {
					eat_args p1 = { e1.dx, its1 + q++ * n1,
							it1, yv[v] };
					GK(gs_launch(&eat, gs3(n1), gs3(ET), 0,
						     &p1, sizeof p1, NULL));
				});
				if (r >= 2)
					sg[v].push_back(b);
			}
		}
		double sp_ = ex_median(sp), s0 = ex_median(sg[0]),
		       s1 = ex_median(sg[1]);
		printf("shape eater_one_wave blocks=%u plain_ms=%.4f "
		       "noyield_ms=%.4f yield_ms=%.4f noyield_pct=%.2f "
		       "yield_pct=%.2f\n", n1, sp_, s0, s1,
		       (s0 / sp_ - 1) * 100, (s1 / sp_ - 1) * 100);
#ifdef EAT_PROBE
		for (int r = 0; r < 3; r++) {
			unsigned int q = 0;
			double a = ex_time_k(0, 16, false, [&] {
				eat_plain<<<n1, ET>>>(e1.dx, it1, q++ & 1u);
			});
			eat_probe_print("plain", n1, a);
			for (int v = 0; v < 2; v++) {
				q = 0;
				CK(cudaMemset(its1, 0, 16 * n1 * 4));
				double b = ex_time_k(0, 16, true, [&] {
					eat_args p1 = { e1.dx, its1 + q * n1,
							it1, yv[v], q & 1u };
					q++;
					GK(gs_launch(&eat, gs3(n1), gs3(ET), 0,
						     &p1, sizeof p1, NULL));
				});
				eat_probe_print(v ? "gs_yield" : "gs_noyield",
						n1, b);
			}
		}
#endif
		CK(cudaFree(its1));
		CK(cudaFree(e1.dx));
		CK(cudaFree(e1.dit));
	}
	if (o.run_s > 0) {
		/* eat for run_s seconds: sixteen ~1 ms kernels per
		 * synchronize (a job that synchronizes often goes idle
		 * often, and an allocation that goes idle gives up its
		 * lead under WFQ), each with its own iteration counters;
		 * a grid of --waves full waves of an H100 (one: a partition
		 * of 70 % of the SMs runs it in 1.4 waves) */
		eater e;
		unsigned int nblk = 132 * 8 * (unsigned int)o.waves;
		unsigned int iters = RUN_ITERS / (unsigned int)o.waves;
		unsigned int *its;
		eater_setup(e, nblk, iters, &seed);
		CK(cudaMalloc(&its, 16 * nblk * 4));
		ex_run("eater", o.run_s, 16.0 * nblk, [&] {
			CK(cudaMemsetAsync(its, 0, 16 * nblk * 4, 0));
			for (int q = 0; q < 16; q++) {
				eat_args p = { e.dx, its + q * nblk, iters, 1 };
				GK(gs_launch(&eat, gs3(nblk), gs3(ET), 0, &p,
					     sizeof p, NULL));
			}
			GK(gs_synchronize());
		});
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
