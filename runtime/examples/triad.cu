/*
 * triad.cu — the STREAM triad a = b + s * c with 16-byte loads, and its
 * plain twin: the memory-bound kernel as tuned libraries write it (every
 * elementwise kernel of a framework loads vectors).  Each thread keeps
 * TV float4 loads of b and of c in flight before it computes, so a few
 * dozen SMs are enough to keep HBM busy: on partitions of the SMs it is
 * the bandwidth-bound half of a complementary pair (docs/space.md).
 */
#include "ex_common.h"

#define TT 256		/* threads */
#define TV 4		/* float4 per thread and array */
#define TB (TT * TV)	/* float4 per block */

struct tr_args {
	float4 *a;
	const float4 *b, *c;
	float s;
	unsigned int n4;	/* float4 in each array */
};

static __device__ __forceinline__ void triad_block(float4 *a,
						   const float4 *b,
						   const float4 *c, float s,
						   unsigned int n4,
						   unsigned int blk)
{
	unsigned int i0 = blk * TB + threadIdx.x;
	float4 vb[TV], vc[TV];

#pragma unroll
	for (int v = 0; v < TV; v++) {
		unsigned int i = i0 + v * TT;
		if (i < n4) {
			vb[v] = __ldcs(b + i);
			vc[v] = __ldcs(c + i);
		}
	}
#pragma unroll
	for (int v = 0; v < TV; v++) {
		unsigned int i = i0 + v * TT;
		if (i < n4)
			__stcs(a + i, make_float4(vb[v].x + s * vc[v].x,
						  vb[v].y + s * vc[v].y,
						  vb[v].z + s * vc[v].z,
						  vb[v].w + s * vc[v].w));
	}
}

__global__ void triad_plain(float4 *a, const float4 *b, const float4 *c,
			    float s, unsigned int n4)
{
	triad_block(a, b, c, s, n4, blockIdx.x);
}

GS_KERNEL(triad, struct tr_args, p)
{
	triad_block(p.a, p.b, p.c, p.s, p.n4, gs_block_idx().x);
}

static unsigned int blocks_of(unsigned int n4)
{
	return (n4 + TB - 1) / TB;
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
			/* a length that leaves the last block partly empty */
			unsigned int n4 = (1u << 22) +
					  (unsigned int)(ex_rand(&seed) % 9999);
			size_t n = (size_t)n4 * 4;
			float s = 0.5f + (float)(ex_rand(&seed) % 100) / 64.0f;
			std::vector<float> b(n), c(n), a(n), ref(n);
			ex_fill(b, &seed);
			ex_fill(c, &seed);
			for (size_t i = 0; i < n; i++)
				ref[i] = b[i] + s * c[i];
			float4 *db, *dc, *da[Q];
			CK(cudaMalloc(&db, n * 4));
			CK(cudaMalloc(&dc, n * 4));
			CK(cudaMemcpy(db, b.data(), n * 4,
				      cudaMemcpyHostToDevice));
			CK(cudaMemcpy(dc, c.data(), n * 4,
				      cudaMemcpyHostToDevice));
			for (int q = 0; q < Q; q++) {
				CK(cudaMalloc(&da[q], n * 4));
				ex_poison(da[q], n * 4);
				tr_args p = { da[q], db, dc, s, n4 };
				GK(gs_launch(&triad, gs3(blocks_of(n4)),
					     gs3(TT), 0, &p, sizeof p, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < Q; q++) {
				CK(cudaMemcpy(a.data(), da[q], n * 4,
					      cudaMemcpyDeviceToHost));
				fails += ex_compare("triad gs", a.data(),
						    ref.data(), n, 1e-6);
			}
			ex_poison(da[0], n * 4);
			triad_plain<<<blocks_of(n4), TT>>>(da[0], db, dc, s, n4);
			CK(cudaGetLastError());
			CK(cudaMemcpy(a.data(), da[0], n * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("triad plain", a.data(), ref.data(),
					    n, 1e-6);
			for (int q = 0; q < Q; q++)
				CK(cudaFree(da[q]));
			CK(cudaFree(db));
			CK(cudaFree(dc));
		}
		ex_print_stats("triad", fails);
	}
	if (o.bench || o.run_s > 0) {
		/* 2^26 floats a array (256 MiB; 768 MiB moved a launch) */
		unsigned int n4 = 1u << 24;
		size_t n = (size_t)n4 * 4;
		std::vector<float> h(n);
		float4 *da, *db, *dc;
		ex_fill(h, &seed);
		CK(cudaMalloc(&da, n * 4));
		CK(cudaMalloc(&db, n * 4));
		CK(cudaMalloc(&dc, n * 4));
		CK(cudaMemcpy(db, h.data(), n * 4, cudaMemcpyHostToDevice));
		CK(cudaMemcpy(dc, h.data(), n * 4, cudaMemcpyHostToDevice));
		tr_args p = { da, db, dc, 3.0f, n4 };
		if (o.bench) {
			ex_occ("triad", (const void *)triad_plain,
			       (const void *)triad__k, TT, 0);
			ex_bench("triad", o.reps, 0,
				 [&] { triad_plain<<<blocks_of(n4), TT>>>(
					   da, db, dc, 3.0f, n4); },
				 [&] { GK(gs_launch(&triad,
						    gs3(blocks_of(n4)),
						    gs3(TT), 0, &p, sizeof p,
						    NULL)); });
			GK(gs_synchronize());
		}
		if (o.run_s > 0)
			ex_run("triad", o.run_s, 16, [&] {
				for (int q = 0; q < 16; q++)
					GK(gs_launch(&triad,
						     gs3(blocks_of(n4)),
						     gs3(TT), 0, &p, sizeof p,
						     NULL));
				GK(gs_synchronize());
			});
		CK(cudaFree(da));
		CK(cudaFree(db));
		CK(cudaFree(dc));
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
