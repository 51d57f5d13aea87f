/*
 * sgemm.cu — tiled single-precision matrix product C = A B (row-major,
 * 64x64 tiles of C per block, 4x4 outputs per thread, 16-deep K slices in
 * shared memory), and its plain twin.
 */
#include "ex_common.h"

#define BM 64
#define BN 64
#define BK 16

struct mm_args {
	const float *a, *b;
	float *c;
	unsigned int m, n, k;
};

/* 256 threads (16x16); each computes a 4x4 patch of the 64x64 tile. */
static __device__ __forceinline__ void
sgemm_tile(const float *A, const float *B, float *C, unsigned int M,
	   unsigned int N, unsigned int K, unsigned int bx, unsigned int by)
{
	__shared__ float As[BK][BM + 4];
	__shared__ float Bs[BK][BN + 4];
	unsigned int tx = threadIdx.x, ty = threadIdx.y;
	unsigned int tid = ty * 16 + tx;
	unsigned int row0 = by * BM, col0 = bx * BN;
	float acc[4][4] = {};

	for (unsigned int k0 = 0; k0 < K; k0 += BK) {
		/* A tile: 64 rows x 16 k; B tile: 16 k x 64 cols */
		for (unsigned int i = tid; i < BM * BK; i += 256) {
			unsigned int r = i / BK, kk = i % BK;
			unsigned int gr = row0 + r, gk = k0 + kk;
			As[kk][r] = (gr < M && gk < K) ?
					A[(size_t)gr * K + gk] : 0.0f;
		}
		for (unsigned int i = tid; i < BK * BN; i += 256) {
			unsigned int kk = i / BN, c = i % BN;
			unsigned int gk = k0 + kk, gc = col0 + c;
			Bs[kk][c] = (gk < K && gc < N) ?
					B[(size_t)gk * N + gc] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (unsigned int kk = 0; kk < BK; kk++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As[kk][ty * 4 + i];
				b[i] = Bs[kk][tx * 4 + i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			unsigned int r = row0 + ty * 4 + i;
			unsigned int c = col0 + tx * 4 + j;
			if (r < M && c < N)
				C[(size_t)r * N + c] = acc[i][j];
		}
}

__global__ void sgemm_plain(const float *a, const float *b, float *c,
			    unsigned int m, unsigned int n, unsigned int k)
{
	sgemm_tile(a, b, c, m, n, k, blockIdx.x, blockIdx.y);
}

GS_KERNEL(sgemm, struct mm_args, p)
{
	dim3 t = gs_block_idx();
	sgemm_tile(p.a, p.b, p.c, p.m, p.n, p.k, t.x, t.y);
}

static void cpu_ref(const std::vector<float> &a, const std::vector<float> &b,
		    std::vector<float> &c, unsigned m, unsigned n, unsigned k)
{
	std::vector<double> row(n);
	for (unsigned i = 0; i < m; i++) {
		std::fill(row.begin(), row.end(), 0.0);
		for (unsigned kk = 0; kk < k; kk++) {
			double av = a[(size_t)i * k + kk];
			const float *br = &b[(size_t)kk * n];
			for (unsigned j = 0; j < n; j++)
				row[j] += av * br[j];
		}
		for (unsigned j = 0; j < n; j++)
			c[(size_t)i * n + j] = (float)row[j];
	}
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;
	dim3 blk(16, 16);

	GK(gs_init(0));
	if (o.check) {
		for (int r = 0; r < o.rounds; r++) {
			unsigned m = 1000 + (unsigned)(ex_rand(&seed) % 100);
			unsigned n = 1100 + (unsigned)(ex_rand(&seed) % 100);
			unsigned k = 1500 + (unsigned)(ex_rand(&seed) % 100);
			std::vector<float> a((size_t)m * k), b((size_t)k * n),
			    c((size_t)m * n), ref((size_t)m * n);
			ex_fill(a, &seed);
			ex_fill(b, &seed);
			cpu_ref(a, b, ref, m, n, k);
			float *da, *db, *dc;
			CK(cudaMalloc(&da, a.size() * 4));
			CK(cudaMalloc(&db, b.size() * 4));
			CK(cudaMalloc(&dc, c.size() * 4));
			CK(cudaMemcpy(da, a.data(), a.size() * 4,
				      cudaMemcpyHostToDevice));
			CK(cudaMemcpy(db, b.data(), b.size() * 4,
				      cudaMemcpyHostToDevice));
			gs_dim3 g = gs3((n + BN - 1) / BN, (m + BM - 1) / BM);
			/* four products queued per synchronize */
			float *dq[4];
			for (int q = 0; q < 4; q++) {
				CK(cudaMalloc(&dq[q], c.size() * 4));
				ex_poison(dq[q], c.size() * 4);
				mm_args p = { da, db, dq[q], m, n, k };
				GK(gs_launch(&sgemm, g, gs3(16, 16), 0, &p,
					     sizeof p, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < 4; q++) {
				CK(cudaMemcpy(c.data(), dq[q], c.size() * 4,
					      cudaMemcpyDeviceToHost));
				fails += ex_compare("sgemm gs", c.data(),
						    ref.data(), c.size(), 1e-5);
				CK(cudaFree(dq[q]));
			}
			ex_poison(dc, c.size() * 4);
			sgemm_plain<<<dim3(g.x, g.y), blk>>>(da, db, dc, m, n,
							     k);
			CK(cudaGetLastError());
			CK(cudaMemcpy(c.data(), dc, c.size() * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("sgemm plain", c.data(), ref.data(),
					    c.size(), 1e-5);
			CK(cudaFree(da));
			CK(cudaFree(db));
			CK(cudaFree(dc));
		}
		ex_print_stats("sgemm", fails);
	}
	if (o.bench) {
		ex_occ("sgemm", (const void *)sgemm_plain,
		       (const void *)sgemm__k, 256, 0);
		unsigned m = 4096, n = 4096, k = 4096;
		std::vector<float> a((size_t)m * k);
		float *da, *db, *dc;
		ex_fill(a, &seed);
		CK(cudaMalloc(&da, a.size() * 4));
		CK(cudaMalloc(&db, a.size() * 4));
		CK(cudaMalloc(&dc, a.size() * 4));
		CK(cudaMemcpy(da, a.data(), a.size() * 4,
			      cudaMemcpyHostToDevice));
		CK(cudaMemcpy(db, a.data(), a.size() * 4,
			      cudaMemcpyHostToDevice));
		gs_dim3 g = gs3(n / BN, m / BM);
		mm_args p = { da, db, dc, m, n, k };
		ex_bench("sgemm", o.reps, 0,
			 [&] { sgemm_plain<<<dim3(g.x, g.y), blk>>>(
				   da, db, dc, m, n, k); },
			 [&] { GK(gs_launch(&sgemm, g, gs3(16, 16), 0, &p,
					    sizeof p, NULL)); });
		GK(gs_synchronize());
	}
	if (o.run_s > 0) {
		/* 2048^3 products, 32 per synchronize */
		unsigned m = 2048, n = 2048, k = 2048;
		std::vector<float> a((size_t)m * k);
		float *da, *db, *dc;
		ex_fill(a, &seed);
		CK(cudaMalloc(&da, a.size() * 4));
		CK(cudaMalloc(&db, a.size() * 4));
		CK(cudaMalloc(&dc, a.size() * 4));
		CK(cudaMemcpy(da, a.data(), a.size() * 4,
			      cudaMemcpyHostToDevice));
		CK(cudaMemcpy(db, a.data(), a.size() * 4,
			      cudaMemcpyHostToDevice));
		mm_args p = { da, db, dc, m, n, k };
		ex_run("sgemm", o.run_s, 32, [&] {
			for (int q = 0; q < 32; q++)
				GK(gs_launch(&sgemm, gs3(n / BN, m / BM),
					     gs3(16, 16), 0, &p, sizeof p,
					     NULL));
			GK(gs_synchronize());
		});
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
