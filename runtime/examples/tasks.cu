/*
 * tasks.cu — narrow tasks (Pagoda) on libgshare, checked.
 *
 * --check [ROUNDS]: each round spawns 40,000 tasks of random sizes (32 to
 * 512 threads), shared memory (none to 24 KiB) and lengths (2 to 40 us)
 * in random groups, waits for one task, two groups and then all, and
 * checks that
 *  - every task ran exactly once (a run counter per task),
 *  - each saw its own thread count and thread indices, and a shared
 *    memory of its own that no other task wrote (filled with its number,
 *    read back after a sub-block barrier and again after its work),
 *  - the sub-block barrier orders its warps (each thread reads what a
 *    thread of another warp wrote before the barrier).
 * Run standalone, under GSHARE_FORCE_SUSPEND_US or attached to an agent:
 * the "check" line counts the MasterKernel's suspensions.
 *
 * Tasks are not stream work: standalone, the MasterKernel of one round is
 * still on the GPU when the next round spawns, and a task starts as soon
 * as it is spawned.  The counters are therefore reset on a stream of
 * their own and that stream is synchronized before the first spawn; a
 * lag kernel queued ahead of the resets makes a missing synchronization
 * fail every round (the resets would land on counters that tasks already
 * bumped) instead of once in a while.
 */
#include "ex_common.h"

struct tk_args {
	unsigned int *runs;	/* per task: completions */
	unsigned int *bad;	/* per task: failed checks */
	unsigned int id;
	unsigned int threads;	/* expected */
	unsigned int shwords;	/* shared memory, 32-bit words */
	unsigned int spin_ns;
};

/* Occupies the reset stream for ns nanoseconds. */
static __global__ void tk_lag(unsigned int ns)
{
	unsigned long long t0, t1;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
	} while (t1 - t0 < ns);
}

GS_TASK(tk_check, struct tk_args, a)
{
	unsigned int t = gs_task_tid(), n = gs_task_threads(), bad = 0;
	unsigned int *sh = (unsigned int *)gs_task_shmem();
	unsigned int i;

	if (n != a.threads || t >= n)
		bad |= 1u;
	for (i = t; i < a.shwords; i += n)
		sh[i] = a.id ^ i;
	gs_task_sync();
	/* a thread of another warp wrote these before the barrier */
	for (i = (t + 32u) % n; i < a.shwords; i += n)
		if (sh[i] != (a.id ^ i))
			bad |= 2u;
	if (a.spin_ns) {
		unsigned long long t0, t1;
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
		do {
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
		} while (t1 - t0 < a.spin_ns);
	}
	gs_task_sync();
	for (i = t; i < a.shwords; i += n)
		if (sh[i] != (a.id ^ i))
			bad |= 4u;
	if (bad)
		atomicOr(&a.bad[a.id], bad);
	gs_task_sync();
	if (t == 0)
		atomicAdd(&a.runs[a.id], 1u);
}

int main(int argc, char **argv)
{
	ex_opts o = ex_parse(argc, argv);
	uint64_t seed = o.seed;
	const unsigned int N = 40000;
	int fails = 0;
	unsigned int *d_runs, *d_bad;
	struct gs_taskpool *pool;
	struct gs_taskpool_stats ps;
	cudaStream_t rs;

	GK(gs_init(0));
	CK(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
	GK(gs_taskpool_new(0, 0, &pool));
	CK(cudaMalloc(&d_runs, N * 4));
	CK(cudaMalloc(&d_bad, N * 4));
	std::vector<unsigned int> runs(N), bad(N);
	for (int r = 0; r < o.rounds; r++) {
		uint64_t one = 0;
		/* reset, and wait for it: cudaMemset only queues the reset,
		 * and the tasks below may start at once */
		tk_lag<<<1, 32, 0, rs>>>(300000u);
		CK(cudaGetLastError());
		CK(cudaMemsetAsync(d_runs, 0, N * 4, rs));
		CK(cudaMemsetAsync(d_bad, 0, N * 4, rs));
		CK(cudaStreamSynchronize(rs));
		for (unsigned int i = 0; i < N; i++) {
			uint64_t x = ex_rand(&seed);
			tk_args a;
			unsigned int sh = (x >> 8) % 4 == 0
			    ? 0u : (unsigned int)((x >> 12) % 24577u);
			a.runs = d_runs;
			a.bad = d_bad;
			a.id = i;
			a.threads = 32u * (1u + (unsigned int)(x % 16u));
			a.shwords = sh / 4u;
			a.spin_ns = 2000u + (unsigned int)((x >> 32) %
							   38000u);
			uint64_t id;
			GK(gs_task_spawn(pool, &tk_check, a.threads, sh, &a,
					 sizeof a, (unsigned int)(x >> 40) % 8u,
					 &id));
			if (i == N / 2)
				one = id;
		}
		GK(gs_task_wait(pool, one));
		GK(gs_task_wait_group(pool, 3));
		GK(gs_task_wait_group(pool, 5));
		GK(gs_task_wait_all(pool));
		CK(cudaMemcpy(runs.data(), d_runs, N * 4,
			      cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(bad.data(), d_bad, N * 4,
			      cudaMemcpyDeviceToHost));
		unsigned int nbad = 0, nruns = 0, first = ~0u, n0 = 0;
		for (unsigned int i = 0; i < N; i++) {
			if (runs[i] != 1u && nruns++ == 0)
				first = i;
			if (runs[i] == 0u)
				n0++;
			if (bad[i] != 0u)
				nbad++;
		}
		if (nruns) {
			fprintf(stderr, "round %d: %u tasks did not run "
				"exactly once (%u ran 0 times, %u more than "
				"once; task %u ran %u times)\n", r, nruns, n0,
				nruns - n0, first, runs[first]);
			fails++;
		}
		if (nbad) {
			fprintf(stderr, "round %d: %u tasks failed their "
				"checks\n", r, nbad);
			fails++;
		}
	}
	GK(gs_taskpool_stats(pool, &ps));
	struct gs_stats st;
	GK(gs_stats(&st));
	printf("check tasks %s spawned=%llu completed=%llu kernel_runs=%llu "
	       "suspensions=%llu requeued=%llu evict_avg_us=%.1f "
	       "evict_max_us=%.1f gpu_ms=%.1f\n", fails ? "FAIL" : "ok",
	       (unsigned long long)ps.spawned,
	       (unsigned long long)ps.completed,
	       (unsigned long long)ps.kernel_runs,
	       (unsigned long long)ps.suspensions,
	       (unsigned long long)ps.requeued,
	       st.suspensions ? st.evict_ns_sum / 1e3 / st.suspensions : 0.0,
	       st.evict_ns_max / 1e3, ps.gpu_ns / 1e6);
	if (ps.completed != ps.spawned)
		fails++;
	GK(gs_taskpool_free(pool));
	CK(cudaFree(d_runs));
	CK(cudaFree(d_bad));
	CK(cudaStreamDestroy(rs));
	GK(gs_finalize());
	return fails ? 1 : 0;
}
