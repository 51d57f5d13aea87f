/*
 * ex_common.h — shared scaffolding of the libgshare examples: argument
 * parsing, checked CUDA/gshare calls, random inputs, poison, timing.
 *
 * Every example is one program with two versions of its kernels, the
 * gshare one and the plain-CUDA twin, and three modes:
 *   --check [ROUNDS]  fresh random inputs, poisoned outputs, both versions
 *                     compared with a CPU reference (exit 1 on mismatch);
 *   --bench [REPS]    median GPU time of each version (CUDA events),
 *                     interleaved, printed as one "bench" line;
 *   (some examples add their own, e.g. --run SECONDS for the eaters).
 * Examples are programs: they print and exit on errors (the library never
 * does).
 */
#ifndef EX_COMMON_H
#define EX_COMMON_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cuda_runtime.h>

#include "gshare.h"
#include "gshare_device.cuh"

#define CK(call)							\
	do {								\
		cudaError_t e_ = (call);				\
		if (e_ != cudaSuccess) {				\
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__,	\
				__LINE__, #call, cudaGetErrorString(e_)); \
			exit(2);					\
		}							\
	} while (0)

#define GK(call)							\
	do {								\
		int r_ = (call);					\
		if (r_ != GSHARE_OK) {					\
			fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, \
				__LINE__, #call, gs_strerror(r_),	\
				gs_errmsg());				\
			exit(2);					\
		}							\
	} while (0)

static inline gs_dim3 gs3(unsigned x, unsigned y = 1, unsigned z = 1)
{
	gs_dim3 d = { x, y, z };
	return d;
}

struct ex_opts {
	int check, bench;
	int rounds, reps;
	double run_s;
	unsigned long long seed;
	int waves;	/* --waves: gs-eater --run's grid, in full waves */
};

static inline ex_opts ex_parse(int argc, char **argv)
{
	ex_opts o;
	memset(&o, 0, sizeof(o));
	o.rounds = 5;
	o.reps = 30;
	o.waves = 1;
	o.seed = (unsigned long long)time(NULL);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--check")) {
			o.check = 1;
			if (i + 1 < argc && argv[i + 1][0] != '-')
				o.rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--bench")) {
			o.bench = 1;
			if (i + 1 < argc && argv[i + 1][0] != '-')
				o.reps = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--run") && i + 1 < argc) {
			o.run_s = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--waves") && i + 1 < argc) {
			o.waves = atoi(argv[++i]);
			if (o.waves < 1 || o.waves > 64) {
				fprintf(stderr, "--waves: 1..64\n");
				exit(2);
			}
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			o.seed = strtoull(argv[++i], NULL, 10);
		}
	}
	if (!o.check && !o.bench && o.run_s <= 0)
		o.check = 1;
	return o;
}

/* splitmix64 */
static inline uint64_t ex_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void ex_fill(std::vector<float> &v, uint64_t *s)
{
	for (auto &x : v)
		x = (float)((ex_rand(s) >> 40) * (1.0 / 16777216.0)) * 2.0f -
		    1.0f;
}

/* NaN poison: any element the kernel did not write fails the compare. */
static inline void ex_poison(void *d, size_t bytes)
{
	CK(cudaMemset(d, 0xff, bytes));
}

static inline int ex_compare(const char *what, const float *got,
			     const float *ref, size_t n, double tol)
{
	double num = 0, den = 0;
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - ref[i];
		if (!std::isfinite(got[i])) {
			if (bad++ == 0)
				first = i;
			continue;
		}
		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	double rel = den > 0 ? sqrt(num / den) : sqrt(num);
	if (bad || rel > tol) {
		fprintf(stderr, "%s: MISMATCH rel=%.3g (tol %.1g), %zu "
			"non-finite (first at %zu)\n", what, rel, tol, bad,
			first);
		return 1;
	}
	return 0;
}

static inline double ex_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double ex_median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

/* The p-quantile (0..1) of v, the nearest rank; 0 when v is empty. */
static inline double ex_pct(std::vector<double> v, double p)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[(size_t)(p * (v.size() - 1) + 0.5)];
}

/* GPU time of fn() on stream s, milliseconds, via events. */
template <typename F> static inline double ex_time(cudaStream_t s, F fn)
{
	cudaEvent_t a, b;
	float ms;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a, s));
	fn();
	CK(cudaEventRecord(b, s));
	CK(cudaEventSynchronize(b));
	CK(cudaEventElapsedTime(&ms, a, b));
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return ms;
}

/* Space mode: the partition changes that reached this job while it held
 * the GPU, and how long each took (gs_resize_samples). */
static inline void ex_print_resizes(const char *name)
{
	uint64_t v[64];
	size_t n = gs_resize_samples(v, 64);
	double sum = 0, max = 0;

	if (n == 0)
		return;
	/* in the order they came (the first sight of a range costs most) */
	printf("resize_us %s", name);
	for (size_t i = 0; i < n; i++)
		printf(" %.0f", (double)v[i] / 1e3);
	printf("\n");
	for (size_t i = 0; i < n; i++) {
		sum += (double)v[i];
		max = (double)v[i] > max ? (double)v[i] : max;
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			uint64_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	}
	printf("resizes %s n=%zu median_us=%.1f mean_us=%.1f max_us=%.1f\n",
	       name, n, (double)v[n / 2] / 1e3, sum / 1e3 / (double)n,
	       max / 1e3);
}

static inline void ex_print_stats(const char *name, int fails)
{
	struct gs_stats st;
	GK(gs_stats(&st));
	printf("check %s %s launches=%llu kernel_runs=%llu block_tasks=%llu "
	       "suspensions=%llu yields=%llu io=%llu once_checked=%llu "
	       "evict_avg_us=%.1f evict_max_us=%.1f\n",
	       name, fails ? "FAIL" : "ok",
	       (unsigned long long)st.launches,
	       (unsigned long long)st.kernel_runs,
	       (unsigned long long)st.block_tasks,
	       (unsigned long long)st.suspensions,
	       (unsigned long long)st.yields,
	       (unsigned long long)st.io_requests,
	       (unsigned long long)st.once_checked,
	       st.suspensions ? st.evict_ns_sum / 1e3 / st.suspensions : 0.0,
	       st.evict_ns_max / 1e3);
	ex_print_resizes(name);
}

/*
 * Time of k calls of fn (ms per call).  Standalone the gshare launch runs
 * at once and is reaped (gs_synchronize) outside the timed region, as the
 * plain kernel is finished when its event is.  Attached, kernels run only
 * inside gs_synchronize, under the agent's token: it is timed too (token
 * request, launches, wait, release), once per k calls.
 */
template <typename F>
static inline double ex_time_k(cudaStream_t s, int k, bool gs, F fn)
{
	const bool att = gs && gs_attached() == 1;
	double ms = ex_time(s, [&] {
		for (int q = 0; q < k; q++)
			fn();
		if (att)
			GK(gs_synchronize());
	});
	if (gs)
		GK(gs_synchronize());
	return ms / k;
}

/* Interleaved medians of the plain and gshare versions; attached, ten
 * launches per gs_synchronize (and per plain timing).  EX_BENCH_K sets
 * the launches per timing (standalone 1: the first launch's host path is
 * timed with it, as nothing else is queued). */
template <typename P, typename G>
static inline void ex_bench(const char *name, int reps, cudaStream_t s,
			    P plain, G gsv)
{
	std::vector<double> tp, tg;
	const char *ks = getenv("EX_BENCH_K");
	const int att = gs_attached() == 1;
	int k = ks != NULL && atoi(ks) > 0 ? atoi(ks) : att ? 10 : 1;

	for (int w = 0; w < 3; w++) {
		ex_time_k(s, k, false, plain);
		ex_time_k(s, k, true, gsv);
	}
	for (int r = 0; r < reps; r++) {
		tp.push_back(ex_time_k(s, k, false, plain));
		tg.push_back(ex_time_k(s, k, true, gsv));
	}
	double mp = ex_median(tp), mg = ex_median(tg);
	printf("bench %s plain_ms=%.4f gs_ms=%.4f overhead_pct=%.2f "
	       "attached=%d k=%d\n", name, mp, mg, (mg / mp - 1.0) * 100.0,
	       att, k);
}

/*
 * --run mode: call step() (which queues work and synchronizes) for `secs`
 * seconds; every >= 1 s print one window line: work units done (units per
 * step), their rate, and the runtime's GPU time and suspensions in the
 * window.  The sharing benchmark compares rates with solo runs.
 */
template <typename S>
static inline void ex_run(const char *name, double secs, double units,
			  S step)
{
	struct gs_stats s0, s1;
	double t0 = ex_now(), ws = t0, work = 0;
	int w = 0;

	GK(gs_stats(&s0));
	printf("run %s start attached=%d\n", name, gs_attached());
	fflush(stdout);
	while (ex_now() - t0 < secs) {
		step();
		work += units;
		double now = ex_now();
		if (now - ws >= 1.0) {
			GK(gs_stats(&s1));
			printf("window %s %d t=%.3f units=%.0f rate=%.2f "
			       "gpu_ms=%.2f susp=%llu evict_avg_us=%.1f\n",
			       name, w++, now - t0, work, work / (now - ws),
			       (s1.gpu_ns - s0.gpu_ns) / 1e6,
			       (unsigned long long)(s1.suspensions -
						    s0.suspensions),
			       s1.suspensions > s0.suspensions ?
				   (s1.evict_ns_sum - s0.evict_ns_sum) / 1e3 /
				       (double)(s1.suspensions - s0.suspensions) :
				   0.0);
			fflush(stdout);
			s0 = s1;
			work = 0;
			ws = now;
		}
	}
	ex_print_resizes(name);
}

/* Blocks per SM of the plain kernel and of the gshare kernel. */
static inline void ex_occ(const char *name, const void *plain,
			  const void *gsk, int threads, size_t shmem)
{
	int a = 0, b = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, plain, threads,
							 shmem));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, gsk, threads,
							 shmem));
	printf("occ %s plain=%d gs=%d\n", name, a, b);
}

#endif /* EX_COMMON_H */
