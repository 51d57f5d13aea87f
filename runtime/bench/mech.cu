/*
 * mech.cu — measurements of the preemption mechanism (standalone, forced
 * suspensions play the agent; the agent-attached numbers come from
 * tests/gpu/bench):
 *
 *   evict    eviction latency (suspend written -> the host sees the last
 *            block's exit report, or the streams idle with
 *            GSHARE_EVICT_END=idle; both CLOCK_MONOTONIC) for 1.7, 16 and
 *            160 us block-tasks
 *   evictj   the same with task lengths spread over 0.75..1.25 x
 *   cycle    suspend+resume cycle cost and overhead at 1, 4, 10 ms slices
 *            (16 us block-tasks; cycle=US: tasks of US, 0.5..1000)
 *   acct     GPU time the runtime reports vs CUDA events around solo runs
 *   spin     the spin tasks' own lengths in plain grids (both spins), and
 *            under libgshare: direct, and the persistent loop's blocks
 *
 * GS_MECH_SPIN=sleep: the tasks sleep 64 ns between their reads of the
 * timer instead of reading it back to back (hot, the default).
 * GS_MECH_SPIN=work: each task is a fixed amount of arithmetic (a chain
 * of FMAs per thread), calibrated at start so that a plain grid's block
 * at full occupancy takes the task length: a task that starts late, or
 * runs beside fewer others, ends sooner, as real work does (a timer
 * spin lasts its length from its own start, whatever it shares the SM
 * with).
 * Usage: gs-mech [evict|evictj|cycle|acct|spin ...] [--raw DIR]
 * Prints "mech ..." lines; with --raw, eviction samples go to
 * DIR/evict_<us>.txt (one latency in ns per line).  The gs-mech-probe
 * build (GS_EVPROBE) also writes DIR/evp_<us>.txt: per suspended round,
 * when its blocks saw the flag, when the last one entered gs__finish and
 * when it stored its report's seq (%globaltimer); with GSHARE_TRACE
 * beside it, the host's side of each eviction (tests/gpu/evict_split.py
 * joins the two).
 */
#include "../examples/ex_common.h"

struct spin_args {
	long long ns;		/* task length */
	unsigned int *sink;
	int jitter;		/* 1: each task 0.75..1.25 x ns */
	int mode;		/* 0 hot, 1 sleep: 64 ns between the timer's
				 * reads, 2 work: `iters` FMAs a thread */
	long long iters;
	unsigned long long *len;	/* != NULL: [0] += each task's own
					 * length (ns), [16] += 1; in the
					 * loop (pb != NULL) also the start
					 * delay: [1] += cycles from thread
					 * 0's claim to the body's start,
					 * [2] max, [3 + min(us, 12)] += 1 */
	unsigned long long *pb;		/* != NULL: per physical block b,
					 * [3b] its first task's start, [3b+1]
					 * its last task's end, [3b+2] tasks */
};

static __device__ __forceinline__ long long gtimer(void)
{
	long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* one task: `ns` nanoseconds of %globaltimer (the length does not depend
 * on the SM clock); returns its start.  Hot (the default), every warp
 * reads the timer back to back: 64 such warps an SM keep its issue slots
 * busy, and the persistent loop's thread 0 waits for them between tasks
 * (`gs-mech spin`: tasks per physical block 3x apart).  With sleep
 * (GS_MECH_SPIN=sleep) the warps leave the slots to others: the same
 * length, a task that does not compete with the loop's bookkeeping. */
static __device__ __forceinline__ long long spin_for(const struct spin_args &p,
						     unsigned int lb)
{
	long long t0 = gtimer(), n = p.ns, it = p.iters;
	if (p.jitter) {
		unsigned int h = lb * 2654435761u;
		h ^= h >> 16;
		n = n * (768 + (long long)(h & 511)) / 1024;
		it = it * (768 + (long long)(h & 511)) / 1024;
	}
	if (p.mode == 2) {
		float x = (float)(lb & 255u) * 1e-3f, y = 1.0f;

		for (long long i = 0; i < it; i++) {
			x = fmaf(x, 0.999999f, 1e-7f);
			y = fmaf(y, 0.999998f, 2e-7f);
		}
		if (x + y == 12345.0f)	/* never: keeps the chain */
			p.sink[1023] = 1u;
	} else if (p.mode == 1) {
		while (gtimer() - t0 < n)
			__nanosleep(64);
	} else {
		while (gtimer() - t0 < n)
			;
	}
	return t0;
}

/* one logical block = one spin */
GS_KERNEL(spin, struct spin_args, p)
{
	if (p.pb != NULL && threadIdx.x == 0) {
		/* the loop's claim of this task (gs__claim's clock, one
		 * task a claim for tasks this long) to the body's start:
		 * the boundary's barrier and the wait for issue slots */
		unsigned long long d =
		    (unsigned long long)(clock64() - gs__b.bstart);
		atomicAdd(&p.len[1], d);
		atomicMax(&p.len[2], d);
		atomicAdd(&p.len[3 + min(d / 1980ull, 12ull)], 1ull);
	}
	long long t0 = spin_for(p, gs_block_linear());
	if (p.len != NULL) {
		__syncthreads();
		if (threadIdx.x == 0) {
			long long t1 = gtimer();
			atomicAdd(&p.len[0], (unsigned long long)(t1 - t0));
			atomicAdd(&p.len[16], 1ull);
			if (p.pb != NULL) {
				unsigned long long *b = p.pb + 3 * blockIdx.x;
				atomicMin(&b[0], (unsigned long long)t0);
				atomicMax(&b[1], (unsigned long long)t1);
				b[2]++;
			}
		}
	}
	if (threadIdx.x == 0)
		p.sink[gs_block_linear() & 1023u] = (unsigned)t0;
}

/* the same spin as a plain grid, each block's own length (%globaltimer,
 * its first warp's start to its last warp's end) into len[blockIdx.x] */
static __global__ void spin_plain(struct spin_args p, unsigned long long *len)
{
	__shared__ unsigned long long s0;
	long long t0 = spin_for(p, blockIdx.x);
	if (threadIdx.x == 0)
		s0 = (unsigned long long)t0;
	__syncthreads();
	long long t1 = gtimer();
	__syncthreads();
	if (threadIdx.x == 0) {
		len[blockIdx.x] = (unsigned long long)(t1 - (long long)s0);
		p.sink[blockIdx.x & 1023u] = (unsigned)t0;
	}
}

static unsigned int nphys_of(const void *k, int threads)
{
	int bps = 0, sms = 0;
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, threads, 0));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	return (unsigned)(bps * sms);
}

#ifdef GS_EVPROBE
/* the probe's records of one run into DIR/evp_<task>.txt, then cleared:
 * gen first_seen last_seen fin_in fin_seq (%globaltimer ns) */
static void evp_dump(const char *raw, double t)
{
	static struct gs__evp d[4096];
	char path[512];

	CK(cudaMemcpyFromSymbol(d, gs__evp_buf, sizeof d));
	snprintf(path, sizeof path, "%s/evp_%g.txt", raw ? raw : ".", t);
	FILE *f = fopen(path, "w");
	for (int i = 0; f && i < 4096; i++)
		if (d[i].seen_max)
			fprintf(f, "%u %llu %llu %llu %llu\n", d[i].gen,
				~d[i].neg_seen_min, d[i].seen_max,
				d[i].fin_in, d[i].fin_seq);
	if (f)
		fclose(f);
	memset(d, 0, sizeof d);
	CK(cudaMemcpyToSymbol(gs__evp_buf, d, sizeof d));
}

/* the smallest step of %globaltimer one thread sees */
static __global__ void gtres_k(unsigned long long *out)
{
	unsigned long long a = gtimer(), best = ~0ull;
	for (int i = 0; i < 100000; i++) {
		unsigned long long b = gtimer();
		if (b != a && b - a < best)
			best = b - a;
		a = b;
	}
	*out = best;
}
#endif

static void set_force(const char *v)
{
	if (v)
		setenv("GSHARE_FORCE_SUSPEND_US", v, 1);
	else
		unsetenv("GSHARE_FORCE_SUSPEND_US");
}

/* GS_MECH_SPIN: hot (the default), sleep or work; anything else is an
 * error */
static int spin_mode(void)
{
	const char *m = getenv("GS_MECH_SPIN");

	if (m == NULL || strcmp(m, "hot") == 0)
		return 0;
	if (strcmp(m, "sleep") == 0)
		return 1;
	if (strcmp(m, "work") == 0)
		return 2;
	fprintf(stderr, "gs-mech: GS_MECH_SPIN=%s: want hot, sleep or "
		"work\n", m);
	exit(2);
}

static const char *const spin_names[] = { "hot", "sleep", "work" };

static const char *spin_name(void)
{
	return spin_names[spin_mode()];
}

/* work tasks: FMA iterations a microsecond of a plain grid's block at
 * full occupancy (4 waves of the plain spin, once) */
static double work_iters_per_us(unsigned int *sink)
{
	static double ipu;

	if (ipu == 0) {
		const long long i0 = 20000;
		unsigned int n = 4 * nphys_of((const void *)spin_plain, 128);
		unsigned long long *dlen;
		spin_args a = { 0, sink, 0, 2, i0, NULL, NULL };

		CK(cudaMalloc(&dlen, n * sizeof *dlen));
		spin_plain<<<n, 128>>>(a, dlen);	/* warm */
		double ms = ex_time(0, [&] {
			spin_plain<<<n, 128>>>(a, dlen);
		});
		CK(cudaFree(dlen));
		ipu = (double)i0 / (ms * 1e3 / 4);
		printf("mech work_calib iters=%lld wave_us=%.2f "
		       "iters_per_us=%.2f\n", i0, ms * 1e3 / 4, ipu);
	}
	return ipu;
}

/* tasks of task_us in mode (spin_mode's numbers) */
static spin_args spin_in(double task_us, unsigned int *sink, int jitter,
			 int mode)
{
	spin_args a = { (long long)(task_us * 1000.0), sink, jitter, mode, 0,
			NULL, NULL };

	if (mode == 2)
		a.iters = (long long)(task_us * work_iters_per_us(sink) + 0.5);
	return a;
}

static spin_args spin_of(double task_us, unsigned int *sink, int jitter)
{
	return spin_in(task_us, sink, jitter, spin_mode());
}

/* Run `total` spin tasks of task_us; returns wall seconds. */
static double run_spin(double task_us, unsigned long long total,
		       unsigned int *sink, int jitter = 0)
{
	spin_args a = spin_of(task_us, sink, jitter);
	double t0 = ex_now();
	/* split into launches of at most 2^31 logical blocks */
	while (total) {
		unsigned int n = total > 0x7fffffffull ? 0x7fffffffu :
							  (unsigned)total;
		GK(gs_launch(&spin, gs3(n), gs3(128), 0, &a, sizeof a, NULL));
		total -= n;
	}
	GK(gs_synchronize());
	return ex_now() - t0;
}

static void do_evict(const char *raw, int jitter)
{
	const double tasks[] = { 1.7, 16, 160 };
	unsigned int *sink;
	CK(cudaMalloc(&sink, 4096));
	unsigned int np = nphys_of((const void *)spin__k, 128);
	for (double t : tasks) {
		set_force("300:3000");
		GK(gs_init(GS_INIT_STANDALONE));
		double secs = 1.0;
		unsigned long long total =
		    (unsigned long long)(secs * 1e6 / t * np);
		double wall = run_spin(t, total, sink, jitter);
		std::vector<uint64_t> ev(16384);
		size_t n = gs_eviction_samples(ev.data(), ev.size());
		std::vector<double> us;
		for (size_t i = 0; i < n; i++)
			us.push_back(ev[i] / 1e3);
		struct gs_stats st;
		GK(gs_stats(&st));
		double ns_ = st.suspensions ? (double)st.suspensions : 1;
		/* measured task length: GPU time x blocks / tasks */
		double meas = st.block_tasks ?
		    st.gpu_ns / 1e3 * np / (double)st.block_tasks : 0;
		printf("mech evict%s spin=%s task_us=%.1f samples=%zu p50_us=%.1f "
		       "p90_us=%.1f p99_us=%.1f max_us=%.1f wall_s=%.3f "
		       "avg_seen_us=%.1f avg_dev_us=%.1f task_meas_us=%.2f\n",
		       jitter ? "_jitter" : "", spin_name(), t,
		       n, ex_pct(us, 0.5), ex_pct(us, 0.9), ex_pct(us, 0.99),
		       ex_pct(us, 1.0), wall, st.evict_seen_ns_sum / 1e3 / ns_,
		       st.evict_dev_ns_sum / 1e3 / ns_, meas);
		if (raw) {
			char path[512];
			snprintf(path, sizeof path, "%s/evict%s_%g.txt", raw,
				 jitter ? "j" : "", t);
			FILE *f = fopen(path, "w");
			if (f) {
				for (size_t i = 0; i < n; i++)
					fprintf(f, "%llu\n",
						(unsigned long long)ev[i]);
				fclose(f);
			}
		}
#ifdef GS_EVPROBE
		evp_dump(raw, t);
#endif
		GK(gs_finalize());
	}
	set_force(NULL);
	CK(cudaFree(sink));
}

static void do_cycle(double task_us)
{
	/* task_us tasks (16 by default), ~0.6 s of work */
	const char *cfg[] = { NULL, "60000000", "1000", "4000", "10000" };
	const char *name[] = { "immediate", "queued", "1ms", "4ms", "10ms" };
	unsigned int *sink;
	CK(cudaMalloc(&sink, 4096));
	unsigned int np = nphys_of((const void *)spin__k, 128);
	unsigned long long total = (unsigned long long)(0.6e6 / task_us * np);
	double base = 0;
	for (int i = 0; i < 5; i++) {
		std::vector<double> w;
		struct gs_stats st;
		set_force(cfg[i]);
		GK(gs_init(GS_INIT_STANDALONE));
		struct gs_stats s0;
		run_spin(task_us, total / 20, sink);	/* warm */
		GK(gs_stats(&s0));
		for (int r = 0; r < 3; r++)
			w.push_back(run_spin(task_us, total, sink));
		GK(gs_stats(&st));
		st.suspensions -= s0.suspensions;
		double m = ex_median(w);
		if (i == 1)
			base = m;
		double cyc = 0;
		unsigned long long susp = st.suspensions;
		if (i >= 2 && susp)
			cyc = (m - base) / ((double)susp / 3.0) * 1e6;
		printf("mech cycle spin=%s task_us=%.1f mode=%s wall_s=%.4f "
		       "suspensions=%llu overhead_pct=%.2f cycle_us=%.1f\n",
		       spin_name(), task_us, name[i], m, susp,
		       i >= 1 && base > 0 ? (m / base - 1) * 100 : 0.0, cyc);
		GK(gs_finalize());
	}
	set_force(NULL);
	CK(cudaFree(sink));
}

/* the loop's physical blocks: when each started its first task after the
 * earliest, when it ended its last before the latest, its tasks */
static void pb_report(std::vector<unsigned long long> &h,
		      unsigned long long *d, unsigned int np)
{
	std::vector<double> late, early, cnt;
	unsigned long long t0 = ~0ull, t1 = 0;
	unsigned int idle = 0;

	CK(cudaMemcpy(h.data(), d, 24ull * np, cudaMemcpyDeviceToHost));
	for (unsigned int b = 0; b < np; b++)
		if (h[3 * b + 2]) {
			t0 = std::min(t0, h[3 * b]);
			t1 = std::max(t1, h[3 * b + 1]);
		} else {
			idle++;
		}
	for (unsigned int b = 0; b < np; b++)
		if (h[3 * b + 2]) {
			late.push_back((h[3 * b] - t0) / 1e3);
			early.push_back((t1 - h[3 * b + 1]) / 1e3);
			cnt.push_back((double)h[3 * b + 2]);
		}
	printf("mech spin_blocks span_us=%.1f no_task=%u start_after_us "
	       "p50=%.1f p90=%.1f max=%.1f end_before_us p50=%.1f "
	       "p90=%.1f max=%.1f tasks p10=%.0f p50=%.0f max=%.0f\n",
	       (t1 - t0) / 1e3, idle, ex_pct(late, 0.5), ex_pct(late, 0.9),
	       ex_pct(late, 1.0), ex_pct(early, 0.5), ex_pct(early, 0.9),
	       ex_pct(early, 1.0), ex_pct(cnt, 0.1), ex_pct(cnt, 0.5),
	       ex_pct(cnt, 1.0));
}

/* The spin's own length in plain grids of 4 waves (no gshare), every
 * block's from its first warp's start to its last warp's end: both
 * spins are exact there. */
static void spin_plain_lengths(unsigned int np, unsigned int *sink)
{
	const double tasks[] = { 1.7, 16, 160 };
	unsigned int n = 4 * np;
	std::vector<unsigned long long> h(n);
	unsigned long long *dlen;

	CK(cudaMalloc(&dlen, n * sizeof *dlen));
	for (double t : tasks)
		for (int sl = 0; sl < 3; sl++) {
			spin_args a = spin_in(t, sink, 0, sl);

			spin_plain<<<n, 128>>>(a, dlen);	/* warm */
			double ms = ex_time(0, [&] {
				spin_plain<<<n, 128>>>(a, dlen);
			});
			CK(cudaMemcpy(h.data(), dlen, n * sizeof *dlen,
				      cudaMemcpyDeviceToHost));
			std::vector<double> us;
			double sum = 0;
			for (unsigned int i = 0; i < n; i++) {
				us.push_back(h[i] / 1e3);
				sum += h[i] / 1e3;
			}
			printf("mech spin task_us=%.1f spin=%s blocks=%u "
			       "mean_us=%.2f p50_us=%.2f p99_us=%.2f "
			       "max_us=%.2f wave_us=%.2f\n", t,
			       spin_names[sl], n, sum / n, ex_pct(us, 0.5),
			       ex_pct(us, 0.99), ex_pct(us, 1.0), ms * 1e3 / 4);
		}
	CK(cudaFree(dlen));
}

/* The spin (GS_MECH_SPIN) under libgshare, direct (no forced
 * suspension) and in the persistent loop (a suspend due in 60 s): each
 * task's own length against the time per task and physical block, and
 * the loop's blocks (pb_report). */
static void spin_gs(unsigned int np, unsigned int *sink)
{
	const double tasks[] = { 1.7, 16, 160 };
	const char *cfg[] = { NULL, "60000000" };
	unsigned long long *acc, hacc[17], *dpb;
	std::vector<unsigned long long> hpb(3ull * np);

	CK(cudaMalloc(&acc, sizeof hacc));
	CK(cudaMalloc(&dpb, 24ull * np));
	for (double t : tasks)
		for (int m = 0; m < 2; m++) {
			unsigned long long total =
			    (unsigned long long)(0.2e6 / t * np);
			spin_args a = spin_of(t, sink, 0);

			a.len = acc;
			a.pb = m ? dpb : NULL;
			set_force(cfg[m]);
			GK(gs_init(GS_INIT_STANDALONE));
			CK(cudaMemset(acc, 0, sizeof hacc));
			for (unsigned int b = 0; b < np; b++) {
				hpb[3 * b] = ~0ull;
				hpb[3 * b + 1] = hpb[3 * b + 2] = 0;
			}
			CK(cudaMemcpy(dpb, hpb.data(), 24ull * np,
				      cudaMemcpyHostToDevice));
			double w = ex_now();
			GK(gs_launch(&spin, gs3((unsigned)total), gs3(128), 0,
				     &a, sizeof a, NULL));
			GK(gs_synchronize());
			w = ex_now() - w;
			CK(cudaMemcpy(hacc, acc, sizeof hacc,
				      cudaMemcpyDeviceToHost));
			printf("mech spin_gs spin=%s task_us=%.1f mode=%s "
			       "tasks=%llu real_us=%.2f per_slot_us=%.2f\n",
			       spin_name(), t, m ? "queued" : "immediate",
			       hacc[16],
			       hacc[16] ? hacc[0] / 1e3 / hacc[16] : 0.0,
			       w * 1e6 * np / (double)total);
			if (m && hacc[16]) {
				/* cycles at ~1.98 GHz (the H200's clock
				 * under load; the buckets assume it) */
				printf("mech spin_start spin=%s task_us=%.1f "
				       "mean_cyc=%.0f max_cyc=%llu us_hist=",
				       spin_name(), t,
				       (double)hacc[1] / hacc[16], hacc[2]);
				for (int b = 3; b < 16; b++)
					printf("%s%llu", b > 3 ? "," : "",
					       hacc[b]);
				printf("\n");
			}
			if (m)
				pb_report(hpb, dpb, np);
			GK(gs_finalize());
		}
	set_force(NULL);
	CK(cudaFree(dpb));
	CK(cudaFree(acc));
}

static void do_spin(void)
{
	const void *fk[] = { (const void *)spin__k,
			     (const void *)spin__d<GS__DGRID_1D>,
			     (const void *)spin_plain };
	const char *fn[] = { "loop", "direct", "plain" };
	unsigned int np = nphys_of((const void *)spin__k, 128);
	unsigned int *sink;

	for (int i = 0; i < 3; i++) {
		cudaFuncAttributes fa;
		int bps = 0;
		CK(cudaFuncGetAttributes(&fa, fk[i]));
		CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, fk[i],
								 128, 0));
		printf("mech spin_kernel %s regs=%d shared=%zu "
		       "blocks_per_sm=%d\n", fn[i], fa.numRegs,
		       fa.sharedSizeBytes, bps);
	}
	CK(cudaMalloc(&sink, 4096));
	spin_plain_lengths(np, sink);
	spin_gs(np, sink);
	CK(cudaFree(sink));
}

static void do_acct(void)
{
	unsigned int *sink;
	CK(cudaMalloc(&sink, 4096));
	unsigned int np = nphys_of((const void *)spin__k, 128);
	const double dur_ms[] = { 5, 50, 200 };
	set_force(NULL);
	GK(gs_init(GS_INIT_STANDALONE));
	run_spin(16, np * 10, sink);
	for (double d : dur_ms) {
		spin_args a = spin_of(16, sink, 0);
		unsigned int n = (unsigned)(d * 1000 / 16 * np);
		std::vector<double> err;
		double ev_sum = 0, gs_sum = 0;
		for (int r = 0; r < 5; r++) {
			struct gs_stats s0, s1;
			GK(gs_stats(&s0));
			double ms = ex_time(0, [&] {
				GK(gs_launch(&spin, gs3(n), gs3(128), 0, &a,
					     sizeof a, NULL));
			});
			GK(gs_synchronize());
			GK(gs_stats(&s1));
			double g = (s1.gpu_ns - s0.gpu_ns) / 1e6;
			err.push_back((g / ms - 1) * 100);
			ev_sum += ms;
			gs_sum += g;
		}
		printf("mech acct kernel_ms=%.2f events_ms=%.3f runtime_ms=%.3f "
		       "err_pct=%.3f\n", d, ev_sum / 5, gs_sum / 5,
		       ex_median(err));
	}
	GK(gs_finalize());
	/* the same work split by forced 1 ms suspensions: the runtime's sum
	 * of spans vs the solo event time */
	set_force("1000");
	GK(gs_init(GS_INIT_STANDALONE));
	{
		unsigned int n = (unsigned)(200.0 * 1000 / 16 * np);
		spin_args a = spin_of(16, sink, 0);
		struct gs_stats s0, s1;
		GK(gs_stats(&s0));
		GK(gs_launch(&spin, gs3(n), gs3(128), 0, &a, sizeof a, NULL));
		GK(gs_synchronize());
		GK(gs_stats(&s1));
		printf("mech acct_suspended kernel_ms=200 runtime_ms=%.3f "
		       "suspensions=%llu\n", (s1.gpu_ns - s0.gpu_ns) / 1e6,
		       (unsigned long long)(s1.suspensions - s0.suspensions));
	}
	GK(gs_finalize());
	set_force(NULL);
	CK(cudaFree(sink));
}

int main(int argc, char **argv)
{
	const char *raw = NULL;
	double us;
	int any = 0;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--raw") && i + 1 < argc)
			raw = argv[++i];
	CK(cudaSetDevice(0));
#ifdef GS_EVPROBE
	{
		unsigned long long *d, h = 0;
		CK(cudaMalloc(&d, 8));
		gtres_k<<<1, 1>>>(d);
		CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
		CK(cudaFree(d));
		printf("mech globaltimer_step_ns=%llu\n", h);
	}
#endif
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--raw")) {
			i++;
			continue;
		}
		any = 1;
		if (!strcmp(argv[i], "evict"))
			do_evict(raw, 0);
		else if (!strcmp(argv[i], "evictj"))
			do_evict(raw, 1);
		else if (!strcmp(argv[i], "cycle"))
			do_cycle(16);
		else if (!strncmp(argv[i], "cycle=", 6) &&
			 (us = atof(argv[i] + 6)) >= 0.5 && us <= 1000)
			do_cycle(us);
		else if (!strcmp(argv[i], "acct"))
			do_acct();
		else if (!strcmp(argv[i], "spin"))
			do_spin();
		else {
			fprintf(stderr, "usage: gs-mech [evict|evictj|cycle|"
				"cycle=US|acct|spin]... [--raw DIR]\n");
			return 2;
		}
	}
	if (!any) {
		do_evict(raw, 0);
		do_evict(raw, 1);
		do_cycle(16);
		do_acct();
	}
	return 0;
}
