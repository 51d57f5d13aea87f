/*
 * softmax.cu — row-wise softmax over a large matrix (one logical block per
 * row: memory-bound, short block-tasks), and its plain twin.
 *
 * Each row is read twice and written once: a first pass keeps a running
 * maximum and a running sum of exponentials per thread (online softmax),
 * the block combines them, and a second pass writes exp(x - max) / sum.
 */
#include "ex_common.h"

#define SMT 256		/* threads */

struct sm_args {
	const float *in;
	float *out;
	unsigned int rows, cols;
};

/* (m, s) of two parts: the sum of exponentials relative to the larger
 * maximum.  A part with no element has m = -inf, s = 0. */
static __device__ __forceinline__ void sm_merge(float &m, float &s, float m2,
						float s2)
{
	float mx = fmaxf(m, m2);
	if (mx == -INFINITY)
		return;
	s = (m == -INFINITY ? 0.0f : s * expf(m - mx)) +
	    (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mx));
	m = mx;
}

static __device__ __forceinline__ void softmax_row(const float *in,
						   float *out,
						   unsigned int cols,
						   unsigned int row)
{
	__shared__ float sm_m[SMT / 32], sm_s[SMT / 32];
	const float *x = in + (size_t)row * cols;
	float *y = out + (size_t)row * cols;
	float m = -INFINITY, s = 0.0f;

	for (unsigned int i = threadIdx.x; i < cols; i += SMT) {
		float v = x[i];
		if (v > m) {
			s = s * expf(m - v) + 1.0f;
			m = v;
		} else {
			s += expf(v - m);
		}
	}
	for (int o = 16; o > 0; o >>= 1) {
		float m2 = __shfl_xor_sync(0xffffffffu, m, o);
		float s2 = __shfl_xor_sync(0xffffffffu, s, o);
		sm_merge(m, s, m2, s2);
	}
	if ((threadIdx.x & 31) == 0) {
		sm_m[threadIdx.x / 32] = m;
		sm_s[threadIdx.x / 32] = s;
	}
	__syncthreads();
	m = sm_m[0];
	s = sm_s[0];
	for (int w = 1; w < SMT / 32; w++)
		sm_merge(m, s, sm_m[w], sm_s[w]);
	float inv = 1.0f / s;
	for (unsigned int i = threadIdx.x; i < cols; i += SMT)
		y[i] = expf(x[i] - m) * inv;
}

__global__ void softmax_plain(const float *in, float *out, unsigned int cols)
{
	softmax_row(in, out, cols, blockIdx.x);
}

GS_KERNEL(softmax, struct sm_args, p)
{
	softmax_row(p.in, p.out, p.cols, gs_block_idx().x);
}

static void cpu_ref(const std::vector<float> &in, std::vector<float> &out,
		    unsigned int rows, unsigned int cols)
{
	for (unsigned int r = 0; r < rows; r++) {
		const float *x = &in[(size_t)r * cols];
		float *y = &out[(size_t)r * cols];
		double m = -INFINITY, s = 0;
		for (unsigned int i = 0; i < cols; i++)
			m = std::max(m, (double)x[i]);
		for (unsigned int i = 0; i < cols; i++)
			s += exp((double)x[i] - m);
		for (unsigned int i = 0; i < cols; i++)
			y[i] = (float)(exp((double)x[i] - m) / s);
	}
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;

	GK(gs_init(0));
	if (o.check) {
		/* several launches per synchronize so that forced
		 * suspensions land inside the queue */
		const int Q = 6;
		for (int r = 0; r < o.rounds; r++) {
			/* cols not a multiple of the block: ragged rows */
			unsigned int rows = 16384 +
					    (unsigned)(ex_rand(&seed) % 1000);
			unsigned int cols = 1000 +
					    (unsigned)(ex_rand(&seed) % 100);
			size_t n = (size_t)rows * cols;
			std::vector<float> in(n), out(n), ref(n);
			ex_fill(in, &seed);
			/* a wide range, so that the maximum matters */
			for (auto &v : in)
				v *= 20.0f;
			cpu_ref(in, ref, rows, cols);
			float *din, *dout[Q];
			CK(cudaMalloc(&din, n * 4));
			CK(cudaMemcpy(din, in.data(), n * 4,
				      cudaMemcpyHostToDevice));
			for (int q = 0; q < Q; q++) {
				CK(cudaMalloc(&dout[q], n * 4));
				ex_poison(dout[q], n * 4);
				sm_args a = { din, dout[q], rows, cols };
				GK(gs_launch(&softmax, gs3(rows), gs3(SMT), 0,
					     &a, sizeof a, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < Q; q++) {
				CK(cudaMemcpy(out.data(), dout[q], n * 4,
					      cudaMemcpyDeviceToHost));
				fails += ex_compare("softmax gs", out.data(),
						    ref.data(), n, 1e-5);
			}
			ex_poison(dout[0], n * 4);
			softmax_plain<<<rows, SMT>>>(din, dout[0], cols);
			CK(cudaGetLastError());
			CK(cudaMemcpy(out.data(), dout[0], n * 4,
				      cudaMemcpyDeviceToHost));
			fails += ex_compare("softmax plain", out.data(),
					    ref.data(), n, 1e-5);
			for (int q = 0; q < Q; q++)
				CK(cudaFree(dout[q]));
			CK(cudaFree(din));
		}
		ex_print_stats("softmax", fails);
	}
	if (o.bench || o.run_s > 0) {
		/* 64 Ki rows of 1024: 256 MiB in, 256 MiB out */
		unsigned int rows = 1u << 16, cols = 1024;
		size_t n = (size_t)rows * cols;
		std::vector<float> in(n);
		ex_fill(in, &seed);
		float *din, *dout;
		CK(cudaMalloc(&din, n * 4));
		CK(cudaMalloc(&dout, n * 4));
		CK(cudaMemcpy(din, in.data(), n * 4, cudaMemcpyHostToDevice));
		sm_args a = { din, dout, rows, cols };
		if (o.bench) {
			ex_occ("softmax", (const void *)softmax_plain,
			       (const void *)softmax__k, SMT, 0);
			ex_bench("softmax", o.reps, 0,
				 [&] { softmax_plain<<<rows, SMT>>>(din, dout,
								   cols); },
				 [&] { GK(gs_launch(&softmax, gs3(rows),
						    gs3(SMT), 0, &a, sizeof a,
						    NULL)); });
			GK(gs_synchronize());
		}
		if (o.run_s > 0)	/* 32 launches per synchronize */
			ex_run("softmax", o.run_s, 32, [&] {
				for (int q = 0; q < 32; q++)
					GK(gs_launch(&softmax, gs3(rows),
						     gs3(SMT), 0, &a, sizeof a,
						     NULL));
				GK(gs_synchronize());
			});
		CK(cudaFree(din));
		CK(cudaFree(dout));
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
