/*
 * hostpoll.cu — how a kernel sees a word of host memory (mapped, pinned)
 * that the host changes: the ways a persistent block could look at the
 * control page's suspend word without a watcher warp.
 *
 *   rtt      ping-pong: the host writes n, one device thread polls the
 *            word until it reads n and writes n back into a second mapped
 *            word, the host spins for it.  Round trip per method:
 *              volatile  ld.volatile.global, back to back
 *              relaxed   ld.relaxed.sys.global
 *              cpasync   cp.async.cg 16 bytes into shared, wait, read
 *            A method that can return a stale line (one the L2 kept)
 *            shows up as rounds that time out (10 ms) or long tails.
 *   cost     what one look costs the thread that makes it: back-to-back
 *            blocking volatile reads (ns each), and a volatile read issued
 *            into a register before 2 us of work and used after it (the
 *            work's length with and without the read).
 *   relaunch (only when asked: gs-hostpoll relaunch [ROUNDS]) how soon a
 *            grid's successor starts once the grid's last block has
 *            reported to the host (the relaunch after a suspension):
 *            a full grid of 20 us timer spins, its last block stores a
 *            host-mapped seq (st.release.sys, as gs__finish does), the
 *            host spins for it and starts the next grid.  Gap = the
 *            next grid's first block - this grid's last report, both on
 *            %globaltimer, per way:
 *              same      cudaLaunchKernel on the same stream
 *              other     on the other of two streams (no wait for the
 *                        grid before to retire)
 *              queued    launched ahead on the same stream behind a
 *                        cuStreamWaitValue32 on a host-mapped word that
 *                        the host writes when it sees the report
 *              queued2   the same, alternating two streams
 *              b2b       back to back on one stream, no host in
 *                        between (the floor)
 *   jitter   (only when asked: gs-hostpoll jitter [SECONDS]) the host
 *            side alone: one thread reads CLOCK_MONOTONIC back to back
 *            for SECONDS (2) and counts the gaps of 2 us or more, the
 *            time a polling host loop is away (interrupts, the
 *            scheduler) and sees a report late by.
 * Prints "hostpoll ..." lines.  No libgshare involved.
 */
#include "../examples/ex_common.h"

#include <cuda.h>

#include <atomic>
#include <thread>

static __device__ __forceinline__ unsigned long long gt(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

static __device__ __forceinline__ unsigned int rd(int m,
						  const unsigned int *w)
{
	__shared__ __align__(16) unsigned int buf[4];
	unsigned int v;

	if (m == 0) {
		v = *(const volatile unsigned int *)w;
	} else if (m == 1) {
		asm volatile("ld.relaxed.sys.global.u32 %0, [%1];"
			     : "=r"(v) : "l"(w) : "memory");
	} else {
		unsigned int dst =
		    (unsigned int)__cvta_generic_to_shared(buf);
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
			     "cp.async.commit_group;\n"
			     "cp.async.wait_all;\n"
			     :: "r"(dst), "l"(w) : "memory");
		v = *(volatile unsigned int *)&buf[0];
	}
	return v;
}

/* thread 0: for n = 1..rounds, wait for *w == n (at most 10 ms), then
 * *ack = n; a timeout writes n | 0x80000000 and goes on */
static __global__ void pong(int m, const unsigned int *w,
			    volatile unsigned int *ack, unsigned int rounds)
{
	if (threadIdx.x != 0)
		return;
	for (unsigned int n = 1; n <= rounds; n++) {
		unsigned long long t0 = gt();
		unsigned int to = 0;
		while (rd(m, w) != n) {
			if (gt() - t0 > 10000000ull) {
				to = 0x80000000u;
				break;
			}
		}
		*ack = n | to;
		__threadfence_system();
	}
}

/* cost: reads back to back (res[0] = ns per read); then `reps` times:
 * 2 us of timer spin, with (res[1]) and without (res[2]) a volatile
 * read issued before it and used after (mean ns per repetition) */
static __global__ void cost(const unsigned int *w, unsigned long long *res,
			    unsigned int reps, unsigned int *sink)
{
	if (threadIdx.x != 0)
		return;
	unsigned int acc = 0;
	unsigned long long t0 = gt();
	for (unsigned int i = 0; i < reps; i++)
		acc += *(const volatile unsigned int *)w;
	res[0] = (gt() - t0) / reps;
	for (int with = 1; with >= 0; with--) {
		t0 = gt();
		for (unsigned int i = 0; i < reps; i++) {
			unsigned int v = 0;
			if (with)
				asm volatile("ld.volatile.global.u32 %0, [%1];"
					     : "=r"(v) : "l"(w));
			unsigned long long s = gt();
			while (gt() - s < 2000)
				;
			acc += v;
		}
		res[with ? 1 : 2] = (gt() - t0) / reps;
	}
	*sink = acc;
}

/* relaunch: one round of 20 us per block, tmin[r] its first block's
 * start, tmax[r] its last block's report (then *hseq = r + 1) */
static __global__ void rl_k(unsigned int r, unsigned long long *tmin,
			    unsigned long long *tmax, unsigned int *cnt,
			    unsigned int *hseq, unsigned int spin_ns)
{
	if (threadIdx.x != 0)
		return;
	unsigned long long t0 = gt();
	atomicMin(&tmin[r], t0);
	while (gt() - t0 < spin_ns)
		;
	__threadfence();
	if (atomicAdd(cnt, 1u) == gridDim.x - 1) {
		*cnt = 0;
		tmax[r] = gt();
		asm volatile("st.release.sys.u32 [%0], %1;" ::
			     "l"(hseq), "r"(r + 1) : "memory");
	}
}

typedef int (*wait32_fn)(cudaStream_t, unsigned long long, unsigned int,
			 unsigned int);

static void do_relaunch(unsigned int rounds)
{
	const char *name[] = { "same", "other", "queued", "queued2", "b2b" };
	unsigned int *hseq, *dseq, *hgo, *dgo, *cnt;
	unsigned long long *tmin, *tmax;
	cudaStream_t s[2];
	enum cudaDriverEntryPointQueryResult q;
	void *fn = NULL;
	int bps = 0, sms = 0;

	CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn,
					    CUDA_VERSION, cudaEnableDefault,
					    &q));
	if (q != cudaDriverEntryPointSuccess || fn == NULL) {
		fprintf(stderr, "gs-hostpoll: no cuStreamWaitValue32\n");
		exit(1);
	}
	wait32_fn wait32 = (wait32_fn)fn;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, rl_k, 128, 0));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	unsigned int grid = (unsigned int)(bps * sms);
	CK(cudaHostAlloc((void **)&hseq, 4096, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&hgo, 4096, cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&dseq, hseq, 0));
	CK(cudaHostGetDevicePointer((void **)&dgo, hgo, 0));
	CK(cudaMalloc(&tmin, rounds * sizeof(*tmin)));
	CK(cudaMalloc(&tmax, rounds * sizeof(*tmax)));
	CK(cudaMalloc(&cnt, 64));
	CK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
	std::vector<unsigned long long> a(rounds), b(rounds);

	for (int m = 0; m < 5; m++) {
		CK(cudaMemset(tmin, 0xff, rounds * sizeof(*tmin)));
		CK(cudaMemset(tmax, 0, rounds * sizeof(*tmax)));
		CK(cudaMemset(cnt, 0, 64));
		*(volatile unsigned int *)hseq = 0;
		*(volatile unsigned int *)hgo = 0;
		for (unsigned int r = 0; r < rounds; r++) {
			cudaStream_t st = s[(m == 1 || m == 3) ? (r & 1u) : 0];
			if (m == 2 || m == 3) {
				/* round 0 starts at once; round r > 0 was
				 * queued while round r - 1 ran */
				if (r == 0) {
					*(volatile unsigned int *)hgo = 1;
					rl_k<<<grid, 128, 0, st>>>(r, tmin,
					    tmax, cnt, dseq, 20000);
				}
				if (r + 1 < rounds) {
					cudaStream_t nx =
					    s[m == 3 ? ((r + 1) & 1u) : 0];
					if (wait32(nx,
					    (unsigned long long)(uintptr_t)dgo,
					    r + 2, 0) != 0) {
						fprintf(stderr, "gs-hostpoll: "
							"cuStreamWaitValue32 "
							"failed\n");
						exit(1);
					}
					rl_k<<<grid, 128, 0, nx>>>(r + 1,
					    tmin, tmax, cnt, dseq, 20000);
				}
			} else {
				rl_k<<<grid, 128, 0, st>>>(r, tmin, tmax,
							   cnt, dseq, 20000);
			}
			CK(cudaGetLastError());
			if (m == 4)
				continue;
			while (*(volatile unsigned int *)hseq != r + 1)
				;
			if (m == 2 || m == 3) {
				std::atomic_thread_fence(
				    std::memory_order_seq_cst);
				*(volatile unsigned int *)hgo = r + 2;
			}
		}
		CK(cudaDeviceSynchronize());
		CK(cudaMemcpy(a.data(), tmin, rounds * sizeof(*tmin),
			      cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(b.data(), tmax, rounds * sizeof(*tmax),
			      cudaMemcpyDeviceToHost));
		std::vector<double> gap, run;
		for (unsigned int r = 1; r < rounds; r++) {
			gap.push_back(((double)a[r] - (double)b[r - 1]) / 1e3);
			run.push_back(((double)b[r] - (double)a[r]) / 1e3);
		}
		printf("hostpoll relaunch way=%s grid=%u rounds=%u "
		       "gap_p10_us=%.2f gap_p50_us=%.2f gap_p90_us=%.2f "
		       "gap_p99_us=%.2f run_p50_us=%.2f\n", name[m], grid,
		       rounds, ex_pct(gap, 0.1), ex_pct(gap, 0.5),
		       ex_pct(gap, 0.9), ex_pct(gap, 0.99), ex_pct(run, 0.5));
	}
	CK(cudaStreamDestroy(s[0]));
	CK(cudaStreamDestroy(s[1]));
	CK(cudaFreeHost(hseq));
	CK(cudaFreeHost(hgo));
	CK(cudaFree(tmin));
	CK(cudaFree(tmax));
	CK(cudaFree(cnt));
}

static void do_rtt(unsigned int *hw, unsigned int *dw,
		   volatile unsigned int *hack, unsigned int *dack)
{
	const char *name[] = { "volatile", "relaxed", "cpasync" };
	const unsigned int rounds = 20000;

	for (int m = 0; m < 3; m++) {
		*(volatile unsigned int *)hw = 0;
		*hack = 0;
		pong<<<1, 32>>>(m, dw, (volatile unsigned int *)dack, rounds);
		CK(cudaGetLastError());
		std::vector<double> us;
		unsigned int tmo = 0;
		for (unsigned int n = 1; n <= rounds; n++) {
			double t0 = ex_now();
			std::atomic_thread_fence(std::memory_order_seq_cst);
			*(volatile unsigned int *)hw = n;
			unsigned int a;
			while (((a = *hack) & 0x7fffffffu) != n)
				;
			if (a & 0x80000000u)
				tmo++;
			us.push_back((ex_now() - t0) * 1e6);
		}
		CK(cudaDeviceSynchronize());
		printf("hostpoll rtt method=%s rounds=%u timeouts=%u "
		       "p50_us=%.2f p90_us=%.2f p99_us=%.2f max_us=%.2f\n",
		       name[m], rounds, tmo, ex_pct(us, 0.5), ex_pct(us, 0.9),
		       ex_pct(us, 0.99), ex_pct(us, 1.0));
	}
}

static void do_jitter(double secs)
{
	std::vector<double> gaps;
	double t0 = ex_now(), prev = t0, end = t0 + secs, now, lost = 0;
	unsigned long long reads = 0;

	while ((now = ex_now()) < end) {
		double g = now - prev;
		reads++;
		if (g >= 2e-6) {
			gaps.push_back(g * 1e6);
			lost += g;
		}
		prev = now;
	}
	double wall = now - t0;
	double rate = (double)gaps.size() / wall;
	/* a 12 us wait (an eviction) overlaps a gap with probability
	 * about rate * (12 us + the mean gap) */
	double mean = gaps.empty() ? 0 : lost * 1e6 / (double)gaps.size();
	printf("hostpoll jitter wall_s=%.3f reads=%llu gaps_2us=%zu "
	       "per_s=%.1f p50_us=%.2f p99_us=%.2f max_us=%.2f "
	       "lost_pct=%.4f p_in_12us=%.4f\n", wall, reads, gaps.size(),
	       rate, gaps.empty() ? 0 : ex_pct(gaps, 0.5),
	       gaps.empty() ? 0 : ex_pct(gaps, 0.99),
	       gaps.empty() ? 0 : ex_pct(gaps, 1.0), lost / wall * 100,
	       rate * (12e-6 + mean * 1e-6));
}

int main(int argc, char **argv)
{
	unsigned int *hw, *dw, *hack, *dack, *sink;
	unsigned long long *res;

	if (argc >= 2 && !strcmp(argv[1], "jitter")) {
		double secs = argc >= 3 ? atof(argv[2]) : 2.0;
		if (!(secs > 0 && secs <= 600)) {
			fprintf(stderr, "usage: gs-hostpoll [jitter [SECONDS "
				"(0..600)]]\n");
			return 2;
		}
		do_jitter(secs);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "relaunch") != 0) {
		fprintf(stderr, "usage: gs-hostpoll [jitter [SECONDS] | "
			"relaunch [ROUNDS]]\n");
		return 2;
	}
	CK(cudaSetDeviceFlags(cudaDeviceMapHost));
	if (argc >= 2) {
		long n = argc >= 3 ? atol(argv[2]) : 2000;
		if (n < 2 || n > 1000000) {
			fprintf(stderr, "gs-hostpoll: relaunch ROUNDS: "
				"2..1000000\n");
			return 2;
		}
		do_relaunch((unsigned int)n);
		return 0;
	}
	CK(cudaHostAlloc((void **)&hw, 4096, cudaHostAllocMapped));
	CK(cudaHostAlloc((void **)&hack, 4096, cudaHostAllocMapped));
	memset(hw, 0, 4096);
	memset(hack, 0, 4096);
	CK(cudaHostGetDevicePointer((void **)&dw, hw, 0));
	CK(cudaHostGetDevicePointer((void **)&dack, hack, 0));
	CK(cudaMalloc(&res, 64));
	CK(cudaMalloc(&sink, 64));

	do_rtt(hw, dw, hack, dack);

	unsigned long long h[3];
	cost<<<1, 32>>>(dw, res, 2000, sink);
	CK(cudaMemcpy(h, res, sizeof h, cudaMemcpyDeviceToHost));
	printf("hostpoll cost read_ns=%llu spin2us_with_read_ns=%llu "
	       "spin2us_ns=%llu\n", h[0], h[1], h[2]);
	CK(cudaFreeHost(hw));
	CK(cudaFreeHost(hack));
	CK(cudaFree(res));
	CK(cudaFree(sink));
	return 0;
}
