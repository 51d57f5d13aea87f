/*
 * vadd.cu — vector add, the smallest gshare kernel, and its plain twin.
 */
#include "ex_common.h"

struct vadd_args {
	const float *a, *b;
	float *c;
	unsigned int n;
};

/* plain CUDA */
__global__ void vadd_plain(const float *a, const float *b, float *c,
			   unsigned int n)
{
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

/* gshare: blockIdx -> gs_block_idx(), arguments in a struct */
GS_KERNEL(vadd, struct vadd_args, p)
{
	unsigned int i = gs_block_idx().x * blockDim.x + threadIdx.x;
	if (i < p.n)
		p.c[i] = p.a[i] + p.b[i];
}

/* the same over a 3D logical grid: covers gs_block_idx/gs_grid_dim in
 * three dimensions (check mode only) */
GS_KERNEL(vadd3, struct vadd_args, p)
{
	dim3 b = gs_block_idx(), g = gs_grid_dim();
	unsigned int blk = (b.z * g.y + b.y) * g.x + b.x;
	unsigned int i = blk * blockDim.x + threadIdx.x;
	if (i < p.n)
		p.c[i] = p.a[i] + p.b[i];
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	const unsigned int T = 256;
	int fails = 0;

	GK(gs_init(0));
	if (o.check) {
		/* several launches per synchronize so that forced
		 * suspensions land inside the queue */
		const int Q = 8;
		for (int r = 0; r < o.rounds; r++) {
			unsigned int n = (1u << 24) +
					 (unsigned int)(ex_rand(&seed) % 100000);
			std::vector<float> a(n), b(n), c(n), ref(n);
			float *da, *db, *dc[Q], *dp;
			ex_fill(a, &seed);
			ex_fill(b, &seed);
			for (unsigned int i = 0; i < n; i++)
				ref[i] = a[i] + b[i];
			CK(cudaMalloc(&da, n * 4));
			CK(cudaMalloc(&db, n * 4));
			CK(cudaMalloc(&dp, n * 4));
			CK(cudaMemcpy(da, a.data(), n * 4,
				      cudaMemcpyHostToDevice));
			CK(cudaMemcpy(db, b.data(), n * 4,
				      cudaMemcpyHostToDevice));
			for (int q = 0; q < Q; q++) {
				CK(cudaMalloc(&dc[q], n * 4));
				ex_poison(dc[q], n * 4);
				vadd_args p = { da, db, dc[q], n };
				GK(gs_launch(&vadd, gs3((n + T - 1) / T),
					     gs3(T), 0, &p, sizeof p, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < Q; q++) {
				CK(cudaMemcpy(c.data(), dc[q], n * 4,
					      cudaMemcpyDeviceToHost));
				fails += ex_compare("vadd gs", c.data(),
						    ref.data(), n, 1e-6);
				CK(cudaFree(dc[q]));
			}
			/* 3D grid covering n: gx * gy * gz >= n / T */
			unsigned int nb = (n + T - 1) / T;
			unsigned int gx = 37, gy = 11;
			unsigned int gz = (nb + gx * gy - 1) / (gx * gy);
			ex_poison(dp, n * 4);
			vadd_args p3 = { da, db, dp, n };
			GK(gs_launch(&vadd3, gs3(gx, gy, gz), gs3(T), 0, &p3,
				     sizeof p3, NULL));
			GK(gs_synchronize());
			CK(cudaMemcpy(c.data(), dp, n * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("vadd 3D gs", c.data(), ref.data(),
					    n, 1e-6);
			ex_poison(dp, n * 4);
			vadd_plain<<<(n + T - 1) / T, T>>>(da, db, dp, n);
			CK(cudaGetLastError());
			CK(cudaMemcpy(c.data(), dp, n * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("vadd plain", c.data(), ref.data(),
					    n, 1e-6);
			CK(cudaFree(da));
			CK(cudaFree(db));
			CK(cudaFree(dp));
		}
		ex_print_stats("vadd", fails);
	}
	if (o.bench) {
		ex_occ("vadd", (const void *)vadd_plain,
		       (const void *)vadd__k, T, 0);
		unsigned int n = 1u << 26;
		float *da, *db, *dc;
		std::vector<float> a(n);
		CK(cudaMalloc(&da, n * 4));
		CK(cudaMalloc(&db, n * 4));
		CK(cudaMalloc(&dc, n * 4));
		ex_fill(a, &seed);
		CK(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice));
		CK(cudaMemcpy(db, a.data(), n * 4, cudaMemcpyHostToDevice));
		vadd_args p = { da, db, dc, n };
		ex_bench("vadd", o.reps, 0,
			 [&] { vadd_plain<<<(n + T - 1) / T, T>>>(da, db, dc,
								 n); },
			 [&] { GK(gs_launch(&vadd, gs3((n + T - 1) / T),
					    gs3(T), 0, &p, sizeof p, NULL)); });
		GK(gs_synchronize());
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
