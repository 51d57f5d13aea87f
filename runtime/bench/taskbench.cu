/*
 * taskbench.cu — narrow tasks (Pagoda) against kernel launches.
 *
 *   mm     32x32 matrix products, 256 threads, 8 KiB shared memory
 *   fir    32-tap FIR filter over 1024 samples, 128 threads
 *   conv   3x3 convolution of a 64x64 tile (halo in shared memory,
 *          16.5 KiB), 64 threads
 *   mixed  the three, interleaved
 * Each workload is TASKS tasks (default 20,000), run three ways: tasks
 * spawned into a pool (one host thread, wall time from the first spawn to
 * gs_task_wait_all), one kernel launch per task round-robin on 32 CUDA
 * streams, and one launch per task on one stream (wall time from the first
 * launch to cudaDeviceSynchronize).  The outputs of the three are compared
 * bit for bit.  Medians of REPS interleaved repetitions.
 *
 *   spawn  spawn rate of one host thread (200,000 empty 32-thread tasks),
 *          and the end-to-end rate of those tasks
 *   susp   (run with GSHARE_FORCE_SUSPEND_US) suspend latency of the
 *          MasterKernel: suspend written -> MasterKernel gone, for tasks
 *          of 2 us
 *
 * Usage: gs-taskbench [mm|fir|conv|mixed|spawn|susp ...] [--tasks N]
 *        [--reps R].  Prints "taskbench ..." lines.
 */
#include "../examples/ex_common.h"

struct mm_args { const float *a, *b; float *c; };
struct fir_args { const float *in, *taps; float *out; };
struct conv_args { const float *in; float *out; const float *w; };
struct spin_args { unsigned int ns; unsigned int *sink; };

struct XT {	/* inside a task */
	__device__ unsigned int tid() { return gs_task_tid(); }
	__device__ unsigned int n() { return gs_task_threads(); }
	__device__ float *sh() { return (float *)gs_task_shmem(); }
	__device__ void sync() { gs_task_sync(); }
};

extern __shared__ float plain_sh[];
struct XK {	/* inside a plain kernel of one block */
	__device__ unsigned int tid() { return threadIdx.x; }
	__device__ unsigned int n() { return blockDim.x; }
	__device__ float *sh() { return plain_sh; }
	__device__ void sync() { __syncthreads(); }
};

template <class X> static __device__ void mm_body(const mm_args &p, X x)
{
	float *sa = x.sh(), *sb = sa + 1024;
	unsigned int i;

	for (i = x.tid(); i < 1024; i += x.n()) {
		sa[i] = p.a[i];
		sb[i] = p.b[i];
	}
	x.sync();
	for (i = x.tid(); i < 1024; i += x.n()) {
		unsigned int r = i / 32, c = i % 32, k;
		float acc = 0;
		for (k = 0; k < 32; k++)
			acc += sa[r * 32 + k] * sb[k * 32 + c];
		p.c[i] = acc;
	}
}

template <class X> static __device__ void fir_body(const fir_args &p, X x)
{
	unsigned int i, k;

	for (i = x.tid(); i < 1024; i += x.n()) {
		float acc = 0;
		for (k = 0; k < 32; k++)
			acc += p.in[i + k] * __ldg(&p.taps[k]);
		p.out[i] = acc;
	}
}

template <class X> static __device__ void conv_body(const conv_args &p, X x)
{
	float *t = x.sh();	/* 66 x 66 */
	unsigned int i, c;

	for (i = x.tid(); i < 66 * 66; i += x.n())
		t[i] = p.in[i];
	x.sync();
	for (i = x.tid(); i < 64; i += x.n())	/* one row per thread */
		for (c = 0; c < 64; c++) {
			float acc = 0;
			for (int dy = 0; dy < 3; dy++)
				for (int dx = 0; dx < 3; dx++)
					acc += t[(i + dy) * 66 + c + dx] *
					       __ldg(&p.w[dy * 3 + dx]);
			p.out[i * 64 + c] = acc;
		}
}

GS_TASK(t_mm, struct mm_args, p) { mm_body(p, XT()); }
GS_TASK(t_fir, struct fir_args, p) { fir_body(p, XT()); }
GS_TASK(t_conv, struct conv_args, p) { conv_body(p, XT()); }
GS_TASK(t_spin, struct spin_args, p)
{
	unsigned long long t0, t1;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
	} while (t1 - t0 < p.ns);
	if (gs_task_tid() == 0 && p.sink != NULL)
		p.sink[0] = (unsigned int)t1;
}

static __global__ void k_mm(mm_args p) { mm_body(p, XK()); }
static __global__ void k_fir(fir_args p) { fir_body(p, XK()); }
static __global__ void k_conv(conv_args p) { conv_body(p, XK()); }

enum { W_MM, W_FIR, W_CONV };
static const size_t W_IN[] = { 1024, 1024 + 32, 66 * 66 };	/* floats */

static void fill_dev(float *d, size_t n, uint64_t *seed)
{
	std::vector<float> h(n);
	ex_fill(h, seed);
	CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
}

/* kind of task i of workload `name` */
static int kind_of(int mixed, int kind, unsigned int i)
{
	return mixed ? (int)(i % 3u) : kind;
}

struct job {
	float *in[3], *in2, *w, *out;
	size_t out_stride;	/* floats per task (max of the kinds) */
};

static void run_tasks(struct gs_taskpool *pool, const job &j, int mixed,
		      int kind, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		int k = kind_of(mixed, kind, i);
		float *out = j.out + (size_t)i * j.out_stride;
		const float *in = j.in[k] + (size_t)(i % 4096u) * W_IN[k];
		if (k == W_MM) {
			mm_args a = { in, j.in2 + (size_t)(i % 97u) * 1024,
				      out };
			GK(gs_task_spawn(pool, &t_mm, 256, 8192, &a, sizeof a,
					 0, NULL));
		} else if (k == W_FIR) {
			fir_args a = { in, j.w, out };
			GK(gs_task_spawn(pool, &t_fir, 128, 0, &a, sizeof a,
					 0, NULL));
		} else {
			conv_args a = { in, out, j.w };
			GK(gs_task_spawn(pool, &t_conv, 64, 66 * 66 * 4, &a,
					 sizeof a, 0, NULL));
		}
	}
	GK(gs_task_wait_all(pool));
}

static void run_launches(const job &j, int mixed, int kind, unsigned int n,
			 cudaStream_t *st, int nst)
{
	for (unsigned int i = 0; i < n; i++) {
		int k = kind_of(mixed, kind, i);
		cudaStream_t s = st[i % (unsigned int)nst];
		float *out = j.out + (size_t)i * j.out_stride;
		const float *in = j.in[k] + (size_t)(i % 4096u) * W_IN[k];
		if (k == W_MM) {
			mm_args a = { in, j.in2 + (size_t)(i % 97u) * 1024,
				      out };
			k_mm<<<1, 256, 8192, s>>>(a);
		} else if (k == W_FIR) {
			fir_args a = { in, j.w, out };
			k_fir<<<1, 128, 0, s>>>(a);
		} else {
			conv_args a = { in, out, j.w };
			k_conv<<<1, 64, 66 * 66 * 4, s>>>(a);
		}
	}
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
}

/* Poison the outputs and wait for it: cudaMemset only queues the work,
 * and neither the tasks (the MasterKernel may already be on the GPU) nor
 * the launches on the non-blocking streams would wait for it. */
static void poison(const job &j, size_t bytes)
{
	CK(cudaMemset(j.out, 0xff, bytes));
	CK(cudaStreamSynchronize(0));
}

static void workload(const char *name, int mixed, int kind, unsigned int n,
		     int reps, struct gs_taskpool *pool, const job &j,
		     cudaStream_t *st)
{
	std::vector<double> tt, t32, t1;
	size_t bytes = (size_t)n * j.out_stride * 4;
	std::vector<float> ref(bytes / 4), got(bytes / 4);
	int same = 1;

	for (int r = 0; r <= reps; r++) {	/* r = 0: warm-up */
		double t0;

		poison(j, bytes);
		t0 = ex_now();
		run_tasks(pool, j, mixed, kind, n);
		if (r)
			tt.push_back(ex_now() - t0);
		CK(cudaMemcpy(ref.data(), j.out, bytes,
			      cudaMemcpyDeviceToHost));
		poison(j, bytes);
		t0 = ex_now();
		run_launches(j, mixed, kind, n, st, 32);
		if (r)
			t32.push_back(ex_now() - t0);
		CK(cudaMemcpy(got.data(), j.out, bytes,
			      cudaMemcpyDeviceToHost));
		same &= memcmp(ref.data(), got.data(), bytes) == 0;
		poison(j, bytes);
		t0 = ex_now();
		run_launches(j, mixed, kind, n, st, 1);
		if (r)
			t1.push_back(ex_now() - t0);
		CK(cudaMemcpy(got.data(), j.out, bytes,
			      cudaMemcpyDeviceToHost));
		same &= memcmp(ref.data(), got.data(), bytes) == 0;
	}
	double a = ex_median(tt), b = ex_median(t32), c = ex_median(t1);
	printf("taskbench %-6s tasks=%u tasks_ms=%.2f streams32_ms=%.2f "
	       "stream1_ms=%.2f speedup_vs32=%.2f speedup_vs1=%.2f "
	       "mtasks_per_s=%.2f outputs=%s\n", name, n, a * 1e3, b * 1e3,
	       c * 1e3, b / a, c / a, n / a / 1e6,
	       same ? "identical" : "DIFFER");
	fflush(stdout);
	if (!same)
		exit(1);
}

int main(int argc, char **argv)
{
	unsigned int n = 20000;
	int reps = 5;
	std::vector<const char *> what;
	uint64_t seed = 42;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tasks") && i + 1 < argc)
			n = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else
			what.push_back(argv[i]);
	}
	if (what.empty())
		what = { "mm", "fir", "conv", "mixed", "spawn" };
	GK(gs_init(0));
	struct gs_taskpool *pool;
	GK(gs_taskpool_new(1u << 20, 0, &pool));
	job j;
	for (int k = 0; k < 3; k++) {
		CK(cudaMalloc(&j.in[k], 4096 * W_IN[k] * 4));
		fill_dev(j.in[k], 4096 * W_IN[k], &seed);
	}
	CK(cudaMalloc(&j.in2, 97 * 1024 * 4));
	fill_dev(j.in2, 97 * 1024, &seed);
	CK(cudaMalloc(&j.w, 64 * 4));
	fill_dev(j.w, 64, &seed);
	j.out_stride = 64 * 64;
	CK(cudaMalloc(&j.out, (size_t)n * j.out_stride * 4));
	CK(cudaFuncSetAttribute(k_mm,
				cudaFuncAttributeMaxDynamicSharedMemorySize,
				8192));
	cudaStream_t st[32];
	for (int i = 0; i < 32; i++)
		CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));

	for (const char *w : what) {
		if (!strcmp(w, "mm"))
			workload("mm", 0, W_MM, n, reps, pool, j, st);
		else if (!strcmp(w, "fir"))
			workload("fir", 0, W_FIR, n, reps, pool, j, st);
		else if (!strcmp(w, "conv"))
			workload("conv", 0, W_CONV, n, reps, pool, j, st);
		else if (!strcmp(w, "mixed"))
			workload("mixed", 1, 0, n, reps, pool, j, st);
		else if (!strcmp(w, "spawn")) {
			const unsigned int m = 200000;
			std::vector<double> sr, er;
			for (int r = 0; r <= reps; r++) {
				spin_args a = { 0, NULL };
				double t0 = ex_now(), t1;
				for (unsigned int i = 0; i < m; i++)
					GK(gs_task_spawn(pool, &t_spin, 32, 0,
							 &a, sizeof a, 0,
							 NULL));
				t1 = ex_now();
				GK(gs_task_wait_all(pool));
				if (r) {
					sr.push_back(m / (t1 - t0));
					er.push_back(m / (ex_now() - t0));
				}
			}
			printf("taskbench spawn tasks=%u "
			       "spawn_mtasks_per_s=%.2f "
			       "end_to_end_mtasks_per_s=%.2f\n", m,
			       ex_median(sr) / 1e6, ex_median(er) / 1e6);
		} else if (!strcmp(w, "susp")) {
			unsigned int *sink;
			CK(cudaMalloc(&sink, 64));
			for (unsigned int ns : { 2000u, 10000u }) {
				struct gs_stats s0, s1;
				struct gs_taskpool_stats p0, p1;
				GK(gs_stats(&s0));
				GK(gs_taskpool_stats(pool, &p0));
				for (int r = 0; r < reps; r++) {
					spin_args a = { ns, sink };
					for (unsigned int i = 0; i < 100000;
					     i++)
						GK(gs_task_spawn(pool, &t_spin,
								 64, 0, &a,
								 sizeof a, 0,
								 NULL));
					GK(gs_task_wait_all(pool));
				}
				GK(gs_stats(&s1));
				GK(gs_taskpool_stats(pool, &p1));
				size_t k = s1.suspensions - s0.suspensions;
				double kd = k ? (double)k : 1.0;
				std::vector<uint64_t> ev(k ? k : 1);
				k = gs_eviction_samples(ev.data(), k);
				std::vector<double> v;
				for (size_t i = 0; i < k; i++)
					v.push_back(ev[i] / 1e3);
				printf("taskbench susp task_us=%.0f "
				       "suspensions=%zu p50_us=%.1f "
				       "p99_us=%.1f max_us=%.1f "
				       "avg_flag_seen_us=%.1f "
				       "avg_all_seen_us=%.1f "
				       "avg_drain_us=%.1f\n", ns / 1e3,
				       k, ex_pct(v, 0.5), ex_pct(v, 0.99),
				       ex_pct(v, 1.0),
				       (p1.evict_flag_ns_sum -
					p0.evict_flag_ns_sum) / kd / 1e3,
				       (p1.evict_spread_ns_sum -
					p0.evict_spread_ns_sum) / kd / 1e3,
				       (p1.evict_drain_ns_sum -
					p0.evict_drain_ns_sum) / kd / 1e3);
			}
			CK(cudaFree(sink));
		} else {
			fprintf(stderr, "unknown: %s\n", w);
			return 2;
		}
		fflush(stdout);
	}
	struct gs_taskpool_stats ps;
	GK(gs_taskpool_stats(pool, &ps));
	printf("taskbench pool spawned=%llu completed=%llu kernel_runs=%llu "
	       "suspensions=%llu requeued=%llu spawn_waits=%llu\n",
	       (unsigned long long)ps.spawned,
	       (unsigned long long)ps.completed,
	       (unsigned long long)ps.kernel_runs,
	       (unsigned long long)ps.suspensions,
	       (unsigned long long)ps.requeued,
	       (unsigned long long)ps.spawn_waits);
	GK(gs_taskpool_free(pool));
	GK(gs_finalize());
	return 0;
}
