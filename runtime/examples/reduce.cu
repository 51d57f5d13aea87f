/*
 * reduce.cu — sum of n floats in two kernels on one stream: per-block
 * partial sums, then a second kernel that atomically adds groups of
 * partials into the result.  The second kernel depends on every block of
 * the first (stream order) and is not idempotent (a block that ran twice
 * would count twice), so it checks both ordering and exactly-once.
 */
#include "ex_common.h"

#define RT 256		/* threads */
#define RPT 16		/* elements per thread */
#define RCHUNK (RT * RPT)
#define GROUP 1024	/* partials per block of the second kernel */

struct red1_args {
	const float *in;
	float *partial;
	unsigned int n;
};
struct red2_args {
	const float *partial;
	float *out;
	unsigned int np;
};

static __device__ __forceinline__ float block_sum(float v)
{
	__shared__ float s[RT / 32];
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	if ((threadIdx.x & 31) == 0)
		s[threadIdx.x / 32] = v;
	__syncthreads();
	v = threadIdx.x < RT / 32 ? s[threadIdx.x] : 0.0f;
	if (threadIdx.x < 32)
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ void
red1_body(const float *in, float *partial, unsigned int n, unsigned int b)
{
	size_t base = (size_t)b * RCHUNK;
	float v = 0;
#pragma unroll
	for (int i = 0; i < RPT; i++) {
		size_t j = base + (size_t)i * RT + threadIdx.x;
		if (j < n)
			v += in[j];
	}
	v = block_sum(v);
	if (threadIdx.x == 0)
		partial[b] = v;
}

static __device__ __forceinline__ void
red2_body(const float *partial, float *out, unsigned int np, unsigned int b)
{
	float v = 0;
	for (unsigned int i = b * GROUP + threadIdx.x;
	     i < min(np, (b + 1) * GROUP); i += RT)
		v += partial[i];
	v = block_sum(v);
	if (threadIdx.x == 0)
		atomicAdd(out, v);
}

__global__ void red1_plain(const float *in, float *partial, unsigned int n)
{
	red1_body(in, partial, n, blockIdx.x);
}
__global__ void red2_plain(const float *partial, float *out, unsigned int np)
{
	red2_body(partial, out, np, blockIdx.x);
}

GS_KERNEL_BOUNDS(red1, struct red1_args, p, 0u, RT, 8)
{
	red1_body(p.in, p.partial, p.n, gs_block_idx().x);
}
GS_KERNEL(red2, struct red2_args, p)
{
	red2_body(p.partial, p.out, p.np, gs_block_idx().x);
}

/* 2^28 floats (1 GiB) on the device, for --bench and --run */
struct red_big {
	red1_args a;
	red2_args b;
};

static red_big red_big_setup(uint64_t *seed)
{
	unsigned int n = 1u << 28, np = n / RCHUNK;
	std::vector<float> in(n);
	float *din, *dpart, *dout;

	ex_fill(in, seed);
	CK(cudaMalloc(&din, (size_t)n * 4));
	CK(cudaMalloc(&dpart, np * 4));
	CK(cudaMalloc(&dout, 4));
	CK(cudaMemcpy(din, in.data(), (size_t)n * 4,
		      cudaMemcpyHostToDevice));
	red_big r = { { din, dpart, n }, { dpart, dout, np } };
	return r;
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;

	GK(gs_init(0));
	if (o.check) {
		const int Q = 8;
		for (int r = 0; r < o.rounds; r++) {
			unsigned int n = (1u << 26) +
					 (unsigned)(ex_rand(&seed) % 100000);
			unsigned int np = (n + RCHUNK - 1) / RCHUNK;
			std::vector<float> in(n);
			for (auto &x : in)
				x = (float)((ex_rand(&seed) >> 40) *
					    (1.0 / 16777216.0));
			double ref = 0;
			for (float x : in)
				ref += x;
			float *din, *dpart[Q], *dout;
			CK(cudaMalloc(&din, (size_t)n * 4));
			CK(cudaMalloc(&dout, Q * 4));
			CK(cudaMemcpy(din, in.data(), (size_t)n * 4,
				      cudaMemcpyHostToDevice));
			CK(cudaMemset(dout, 0, Q * 4));
			for (int q = 0; q < Q; q++) {
				CK(cudaMalloc(&dpart[q], np * 4));
				ex_poison(dpart[q], np * 4);
				red1_args a = { din, dpart[q], n };
				red2_args b = { dpart[q], dout + q, np };
				GK(gs_launch(&red1, gs3(np), gs3(RT), 0, &a,
					     sizeof a, NULL));
				GK(gs_launch(&red2, gs3((np + GROUP - 1) / GROUP),
					     gs3(RT), 0, &b, sizeof b, NULL));
			}
			GK(gs_synchronize());
			float got[Q];
			CK(cudaMemcpy(got, dout, sizeof got,
				      cudaMemcpyDeviceToHost));
			for (int q = 0; q < Q; q++) {
				float rf = (float)ref;
				fails += ex_compare("reduce gs", &got[q], &rf, 1,
						    1e-5);
			}
			CK(cudaMemset(dout, 0, 4));
			ex_poison(dpart[0], np * 4);
			red1_plain<<<np, RT>>>(din, dpart[0], n);
			red2_plain<<<(np + GROUP - 1) / GROUP, RT>>>(dpart[0],
								     dout, np);
			CK(cudaGetLastError());
			CK(cudaMemcpy(got, dout, 4, cudaMemcpyDeviceToHost));
			float rf = (float)ref;
			fails += ex_compare("reduce plain", got, &rf, 1, 1e-5);
			for (int q = 0; q < Q; q++)
				CK(cudaFree(dpart[q]));
			CK(cudaFree(din));
			CK(cudaFree(dout));
		}
		ex_print_stats("reduce", fails);
	}
	if (o.bench) {
		ex_occ("reduce", (const void *)red1_plain,
		       (const void *)red1__k, RT, 0);
		red_big r = red_big_setup(&seed);
		unsigned int n = r.a.n, np = r.b.np;
		const float *din = r.a.in;
		float *dpart = r.a.partial, *dout = r.b.out;
		red1_args a = r.a;
		red2_args b = r.b;
		ex_bench("reduce", o.reps, 0,
			 [&] {
				 red1_plain<<<np, RT>>>(din, dpart, n);
				 red2_plain<<<np / GROUP, RT>>>(dpart, dout,
								np);
			 },
			 [&] {
				 GK(gs_launch(&red1, gs3(np), gs3(RT), 0, &a,
					      sizeof a, NULL));
				 GK(gs_launch(&red2, gs3(np / GROUP), gs3(RT),
					      0, &b, sizeof b, NULL));
			 });
		GK(gs_synchronize());
	}
	if (o.run_s > 0) {
		/* sums of 2^28 floats (1 GiB, memory-bound), 16 per
		 * synchronize; a unit is one sum */
		red_big r = red_big_setup(&seed);
		unsigned int np = r.b.np;
		red1_args a = r.a;
		red2_args b = r.b;
		ex_run("reduce", o.run_s, 16, [&] {
			for (int q = 0; q < 16; q++) {
				GK(gs_launch(&red1, gs3(np), gs3(RT), 0, &a,
					     sizeof a, NULL));
				GK(gs_launch(&red2, gs3(np / GROUP), gs3(RT),
					     0, &b, sizeof b, NULL));
			}
			GK(gs_synchronize());
		});
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
