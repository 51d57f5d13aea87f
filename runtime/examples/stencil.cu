/*
 * stencil.cu — 2D 5-point Jacobi step with a shared-memory tile and halo
 * (2D logical grid), and its plain twin.
 */
#include "ex_common.h"

#define TS 16

struct st_args {
	const float *in;
	float *out;
	unsigned int w, h;
};

static __device__ __forceinline__ void
stencil_tile(const float *in, float *out, unsigned int w, unsigned int h,
	     unsigned int bx, unsigned int by)
{
	__shared__ float t[TS + 2][TS + 2];
	int x = (int)(bx * TS + threadIdx.x), y = (int)(by * TS + threadIdx.y);
	int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
	auto at = [&](int xx, int yy) {
		xx = min(max(xx, 0), (int)w - 1);
		yy = min(max(yy, 0), (int)h - 1);
		return in[(size_t)yy * w + xx];
	};
	t[ly][lx] = at(x, y);
	if (threadIdx.x == 0)
		t[ly][0] = at(x - 1, y);
	if (threadIdx.x == TS - 1)
		t[ly][TS + 1] = at(x + 1, y);
	if (threadIdx.y == 0)
		t[0][lx] = at(x, y - 1);
	if (threadIdx.y == TS - 1)
		t[TS + 1][lx] = at(x, y + 1);
	__syncthreads();
	if (x < (int)w && y < (int)h)
		out[(size_t)y * w + x] = 0.2f * (t[ly][lx] + t[ly][lx - 1] +
						 t[ly][lx + 1] + t[ly - 1][lx] +
						 t[ly + 1][lx]);
}

__global__ void stencil_plain(const float *in, float *out, unsigned int w,
			      unsigned int h)
{
	stencil_tile(in, out, w, h, blockIdx.x, blockIdx.y);
}

/* __launch_bounds__(256, 8): the register count is 32 either way, but on
 * the H100 the bounded build ran 26 % over the plain twin against 36 %
 * unbounded (docs/benchmarks.md, "Where the loop's cost is") */
GS_KERNEL_BOUNDS(stencil, struct st_args, p, 0u, TS * TS, 8)
{
	dim3 b = gs_block_idx();
	stencil_tile(p.in, p.out, p.w, p.h, b.x, b.y);
}

static void cpu_ref(const std::vector<float> &in, std::vector<float> &out,
		    unsigned int w, unsigned int h)
{
	auto at = [&](long x, long y) {
		x = std::min(std::max(x, 0L), (long)w - 1);
		y = std::min(std::max(y, 0L), (long)h - 1);
		return in[(size_t)y * w + x];
	};
	for (long y = 0; y < (long)h; y++)
		for (long x = 0; x < (long)w; x++)
			out[(size_t)y * w + x] =
			    0.2f * (at(x, y) + at(x - 1, y) + at(x + 1, y) +
				    at(x, y - 1) + at(x, y + 1));
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;
	dim3 blk(TS, TS);

	GK(gs_init(0));
	if (o.check) {
		const int Q = 8;
		for (int r = 0; r < o.rounds; r++) {
			unsigned int w = 4000 + (unsigned)(ex_rand(&seed) % 200);
			unsigned int h = 3000 + (unsigned)(ex_rand(&seed) % 200);
			size_t n = (size_t)w * h;
			std::vector<float> in(n), out(n), ref(n);
			ex_fill(in, &seed);
			cpu_ref(in, ref, w, h);
			float *din, *dout[Q];
			CK(cudaMalloc(&din, n * 4));
			CK(cudaMemcpy(din, in.data(), n * 4,
				      cudaMemcpyHostToDevice));
			gs_dim3 g = gs3((w + TS - 1) / TS, (h + TS - 1) / TS);
			for (int q = 0; q < Q; q++) {
				CK(cudaMalloc(&dout[q], n * 4));
				ex_poison(dout[q], n * 4);
				st_args p = { din, dout[q], w, h };
				GK(gs_launch(&stencil, g, gs3(TS, TS), 0, &p,
					     sizeof p, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < Q; q++) {
				CK(cudaMemcpy(out.data(), dout[q], n * 4,
					      cudaMemcpyDeviceToHost));
				fails += ex_compare("stencil gs", out.data(),
						    ref.data(), n, 1e-6);
			}
			ex_poison(dout[0], n * 4);
			stencil_plain<<<dim3(g.x, g.y), blk>>>(din, dout[0], w,
							       h);
			CK(cudaGetLastError());
			CK(cudaMemcpy(out.data(), dout[0], n * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("stencil plain", out.data(),
					    ref.data(), n, 1e-6);
			for (int q = 0; q < Q; q++)
				CK(cudaFree(dout[q]));
			CK(cudaFree(din));
		}
		ex_print_stats("stencil", fails);
	}
	if (o.bench) {
		ex_occ("stencil", (const void *)stencil_plain,
		       (const void *)stencil__k, TS * TS, 0);
		unsigned int w = 8192, h = 8192;
		size_t n = (size_t)w * h;
		std::vector<float> in(n);
		float *din, *dout;
		ex_fill(in, &seed);
		CK(cudaMalloc(&din, n * 4));
		CK(cudaMalloc(&dout, n * 4));
		CK(cudaMemcpy(din, in.data(), n * 4, cudaMemcpyHostToDevice));
		gs_dim3 g = gs3(w / TS, h / TS);
		st_args p = { din, dout, w, h };
		ex_bench("stencil", o.reps, 0,
			 [&] { stencil_plain<<<dim3(g.x, g.y), blk>>>(
				   din, dout, w, h); },
			 [&] { GK(gs_launch(&stencil, g, gs3(TS, TS), 0, &p,
					    sizeof p, NULL)); });
		GK(gs_synchronize());
	}
	if (o.run_s > 0) {
		/* Jacobi sweeps on 8192^2, ping-pong, 64 per synchronize */
		unsigned int w = 8192, h = 8192;
		size_t n = (size_t)w * h;
		std::vector<float> in(n);
		float *d0, *d1;
		ex_fill(in, &seed);
		CK(cudaMalloc(&d0, n * 4));
		CK(cudaMalloc(&d1, n * 4));
		CK(cudaMemcpy(d0, in.data(), n * 4, cudaMemcpyHostToDevice));
		ex_run("stencil", o.run_s, 64, [&] {
			for (int q = 0; q < 64; q++) {
				st_args p = { q % 2 ? d1 : d0, q % 2 ? d0 : d1,
					      w, h };
				GK(gs_launch(&stencil, gs3(w / TS, h / TS),
					     gs3(TS, TS), 0, &p, sizeof p,
					     NULL));
			}
			GK(gs_synchronize());
		});
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
