/*
 * hist.cu — histogram of skewed keys with atomics (irregular: the cost of
 * a block-task depends on how its keys collide), and its plain twin.
 *
 * A logical block counts HCHUNK keys into a shared-memory histogram, then
 * adds its nonzero bins to the global one with atomicAdd.  That is not
 * idempotent: a block that ran twice, or not at all, changes the counts,
 * which the check compares exactly with the CPU's.
 */
#include "ex_common.h"

#define HT 256			/* threads */
#define HPT 16			/* keys per thread */
#define HCHUNK (HT * HPT)	/* keys per logical block */
#define NBINS 1024

struct hist_args {
	const unsigned int *keys;
	unsigned int *bins;
	unsigned int n;
};

static __device__ __forceinline__ void hist_chunk(const unsigned int *keys,
						  unsigned int *bins,
						  unsigned int n,
						  unsigned int b)
{
	__shared__ unsigned int h[NBINS];
	size_t base = (size_t)b * HCHUNK;

	for (unsigned int i = threadIdx.x; i < NBINS; i += HT)
		h[i] = 0;
	__syncthreads();
#pragma unroll
	for (int i = 0; i < HPT; i++) {
		size_t j = base + (size_t)i * HT + threadIdx.x;
		if (j < n)
			atomicAdd(&h[keys[j] % NBINS], 1u);
	}
	__syncthreads();
	for (unsigned int i = threadIdx.x; i < NBINS; i += HT)
		if (h[i] != 0)
			atomicAdd(&bins[i], h[i]);
}

__global__ void hist_plain(const unsigned int *keys, unsigned int *bins,
			   unsigned int n)
{
	hist_chunk(keys, bins, n, blockIdx.x);
}

/* the loop pushes the body past 32 registers (6 blocks per SM instead
 * of 8): keep the plain kernel's occupancy (docs/runtime.md, Occupancy) */
GS_KERNEL_BOUNDS(hist, struct hist_args, p, 0u, HT, 8)
{
	hist_chunk(p.keys, p.bins, p.n, gs_block_idx().x);
}

/* Skewed keys: the product of three uniform draws piles up near 0, and a
 * quarter of the keys fall in one hot bin (heavy shared-memory collisions
 * in some warps, none in others). */
static void fill_keys(std::vector<unsigned int> &k, uint64_t *s)
{
	for (auto &x : k) {
		uint64_t r = ex_rand(s);
		if ((r & 3u) == 0) {
			x = 7u;
		} else {
			double a = (double)((r >> 11) & 0xfffff) / 1048576.0;
			double b = (double)((r >> 31) & 0xfffff) / 1048576.0;
			x = (unsigned int)(a * b * b * NBINS) +
			    (unsigned int)(r >> 60) * NBINS;
		}
	}
}

static int compare_bins(const char *what, const unsigned int *got,
			const std::vector<unsigned int> &ref)
{
	for (unsigned int i = 0; i < NBINS; i++)
		if (got[i] != ref[i]) {
			fprintf(stderr, "%s: MISMATCH bin %u: %u, want %u\n",
				what, i, got[i], ref[i]);
			return 1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	int fails = 0;

	GK(gs_init(0));
	if (o.check) {
		const int Q = 6;
		for (int r = 0; r < o.rounds; r++) {
			unsigned int n = (1u << 25) +
					 (unsigned)(ex_rand(&seed) % 100000);
			unsigned int nb = (n + HCHUNK - 1) / HCHUNK;
			std::vector<unsigned int> keys(n), ref(NBINS, 0),
			    got(NBINS);
			fill_keys(keys, &seed);
			for (unsigned int k : keys)
				ref[k % NBINS]++;
			unsigned int *dkeys, *dbins;
			CK(cudaMalloc(&dkeys, (size_t)n * 4));
			CK(cudaMalloc(&dbins, (size_t)Q * NBINS * 4));
			CK(cudaMemcpy(dkeys, keys.data(), (size_t)n * 4,
				      cudaMemcpyHostToDevice));
			CK(cudaMemset(dbins, 0, (size_t)Q * NBINS * 4));
			for (int q = 0; q < Q; q++) {
				hist_args a = { dkeys, dbins + q * NBINS, n };
				GK(gs_launch(&hist, gs3(nb), gs3(HT), 0, &a,
					     sizeof a, NULL));
			}
			GK(gs_synchronize());
			for (int q = 0; q < Q; q++) {
				CK(cudaMemcpy(got.data(), dbins + q * NBINS,
					      NBINS * 4,
					      cudaMemcpyDeviceToHost));
				fails += compare_bins("hist gs", got.data(),
						      ref);
			}
			CK(cudaMemset(dbins, 0, NBINS * 4));
			hist_plain<<<nb, HT>>>(dkeys, dbins, n);
			CK(cudaGetLastError());
			CK(cudaMemcpy(got.data(), dbins, NBINS * 4,
				      cudaMemcpyDeviceToHost));
			fails += compare_bins("hist plain", got.data(), ref);
			CK(cudaFree(dkeys));
			CK(cudaFree(dbins));
		}
		ex_print_stats("hist", fails);
	}
	if (o.bench) {
		ex_occ("hist", (const void *)hist_plain, (const void *)hist__k,
		       HT, 0);
		unsigned int n = 1u << 27, nb = n / HCHUNK;
		std::vector<unsigned int> keys(n);
		fill_keys(keys, &seed);
		unsigned int *dkeys, *dbins;
		CK(cudaMalloc(&dkeys, (size_t)n * 4));
		CK(cudaMalloc(&dbins, NBINS * 4));
		CK(cudaMemcpy(dkeys, keys.data(), (size_t)n * 4,
			      cudaMemcpyHostToDevice));
		CK(cudaMemset(dbins, 0, NBINS * 4));
		hist_args a = { dkeys, dbins, n };
		ex_bench("hist", o.reps, 0,
			 [&] { hist_plain<<<nb, HT>>>(dkeys, dbins, n); },
			 [&] { GK(gs_launch(&hist, gs3(nb), gs3(HT), 0, &a,
					    sizeof a, NULL)); });
		GK(gs_synchronize());
	}
	GK(gs_finalize());
	return fails ? 1 : 0;
}
