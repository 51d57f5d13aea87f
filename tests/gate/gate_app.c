/*
 * gate_app.c — a test program that reaches the driver the way the CUDA
 * runtime and the libraries on top of it do: dlopen("libcuda.so.1"),
 * cuGetProcAddress_v2 looked up with dlsym on that handle, every other
 * entry point through it (per CUDA version, optionally with the
 * per-thread-default-stream flag), or straight from dlsym (--dlsym).
 * Run against the stand-in driver (standin_cuda.c), with or without the
 * gate preloaded, it launches simulated kernels and reports what the
 * driver saw, so that the integration tests can check the gate.
 *
 * Prints one line: event=done key=value ...; exits 1 when a check asked
 * for (--expect-gated, --expect-ungated, --max-queue-us) fails or a call
 * fails, 2 on bad usage.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gate_cuda.h"
#include "standin_stats.h"

typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t,
			   CUdriverProcAddressQueryResult *);
typedef CUresult (*init_t)(unsigned);
typedef CUresult (*devget_t)(CUdevice *, int);
typedef CUresult (*retain_t)(CUcontext *, CUdevice);
typedef CUresult (*setcur_t)(CUcontext);
typedef CUresult (*screate_t)(CUstream *, unsigned);
typedef CUresult (*ssync_t)(CUstream);
typedef CUresult (*sdestroy_t)(CUstream);
typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned,
			     unsigned, unsigned, unsigned, unsigned, CUstream,
			     void **, void **);
typedef CUresult (*glaunch_t)(CUgraphExec, CUstream);
typedef CUresult (*h2d_t)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*capb_t)(CUstream, CUstreamCaptureMode);
typedef CUresult (*cape_t)(CUstream, CUgraph *);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, CUresult rc)
{
	fprintf(stderr, "gate_app: %s failed (%d)\n", what, rc);
	exit(1);
}

static void sleep_until(uint64_t t)
{
	uint64_t n;

	while ((n = now_ns()) < t) {
		struct timespec ts = { .tv_sec = (time_t)((t - n) / 1000000000ull),
				       .tv_nsec = (long)((t - n) % 1000000000ull) };

		nanosleep(&ts, NULL);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kernel-us", 1, NULL, 'k' }, { "seconds", 1, NULL, 'd' },
		{ "ptds", 0, NULL, 'p' }, { "dlsym", 0, NULL, 'D' },
		{ "graph", 0, NULL, 'g' }, { "streams", 1, NULL, 's' },
		{ "capture", 0, NULL, 'c' }, { "fork", 0, NULL, 'f' },
		{ "busy-ms", 1, NULL, 'b' }, { "idle-ms", 1, NULL, 'i' },
		{ "at", 1, NULL, 'a' }, { "win", 1, NULL, 'w' },
		{ "expect-gated", 0, NULL, 'G' },
		{ "expect-ungated", 0, NULL, 'U' },
		{ "max-queue-us", 1, NULL, 'q' }, { "dev1", 0, NULL, '1' },
		{ "self-gpa", 0, NULL, 'S' }, { "copies", 0, NULL, 'C' },
		{ "sync-every", 1, NULL, 'Y' },
		{ "stream-churn", 0, NULL, 'R' },
		{ NULL, 0, NULL, 0 }
	};
	unsigned kus = 100, nstreams = 1, sync_every = 200;
	double secs = 1.0, busy_ms = 0, idle_ms = 0, win_a = 0, win_b = 0;
	int ptds = 0, use_dlsym = 0, graph = 0, capture = 0, do_fork = 0;
	int expect = -1, dev1 = 0, self_gpa = 0, copies = 0, o, bad = 0;
	int churn = 0;
	uint64_t at = 0, max_q_ns = 0;
	/* --idle-ms pauses: short ones (a holder keeps the token), long */
	uint64_t paused_ns = 0, long_pauses = 0, long_ns = 0;
	void *h;
	gpa2_t gpa;
	init_t p_init;
	devget_t p_devget;
	retain_t p_retain;
	setcur_t p_setcur;
	screate_t p_screate;
	ssync_t p_ssync;
	sdestroy_t p_sdestroy;
	launch_t p_launch;
	glaunch_t p_glaunch;
	h2d_t p_h2d;
	capb_t p_capb;
	cape_t p_cape;
	gs_standin_stats_fn p_stats;
	struct gs_standin_stats st;
	CUresult rc;
	CUdevice dev;
	CUcontext ctx, ctx1;
	CUstream streams[16], cs;
	CUgraph gr;
	CUdriverProcAddressQueryResult qs;
	cuuint64_t flags;
	uint64_t t0, tend, launches = 0, in_win = 0, t, cycle_end;
	pid_t child = -1;
	char buf[64];

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'k': kus = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': secs = strtod(optarg, NULL); break;
		case 'p': ptds = 1; break;
		case 'D': use_dlsym = 1; break;
		case 'g': graph = 1; break;
		case 's': nstreams = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'c': capture = 1; break;
		case 'f': do_fork = 1; break;
		case 'b': busy_ms = strtod(optarg, NULL); break;
		case 'i': idle_ms = strtod(optarg, NULL); break;
		case 'a': at = strtoull(optarg, NULL, 10); break;
		case 'w':
			if (sscanf(optarg, "%lf:%lf", &win_a, &win_b) != 2) {
				fprintf(stderr, "--win A:B (seconds)\n");
				return 2;
			}
			break;
		case 'G': expect = 1; break;
		case 'U': expect = 0; break;
		case 'q': max_q_ns = strtoull(optarg, NULL, 10) * 1000; break;
		case '1': dev1 = 1; break;
		case 'S': self_gpa = 1; break;
		case 'C': copies = 1; break;
		case 'R': churn = 1; break;
		case 'Y':
			sync_every = (unsigned)strtoul(optarg, NULL, 10);
			break;
		default: return 2;
		}
	}
	if (nstreams < 1 || nstreams > 16 || kus == 0) {
		fprintf(stderr, "gate_app: bad --streams or --kernel-us\n");
		return 2;
	}

	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "gate_app: %s\n", dlerror());
		return 1;
	}
	gpa = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
	p_stats = (gs_standin_stats_fn)dlsym(h, "gs_standin_stats");
	if (gpa == NULL || p_stats == NULL) {
		fprintf(stderr, "gate_app: not the stand-in driver\n");
		return 1;
	}
	flags = ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
	if (self_gpa) {
		/* the application asks for cuGetProcAddress itself */
		void *p = NULL;

		rc = gpa("cuGetProcAddress", &p, 13000, 0, &qs);
		if (rc != CUDA_SUCCESS || p == NULL)
			die("cuGetProcAddress(cuGetProcAddress)", rc);
		gpa = (gpa2_t)p;
	}
#define GET(var, name)							\
	do {								\
		void *p_ = NULL;					\
		rc = gpa(name, &p_, 13000, flags, &qs);			\
		if (rc != CUDA_SUCCESS || p_ == NULL)			\
			die("cuGetProcAddress(" name ")", rc);		\
		*(void **)&var = p_;					\
	} while (0)
	GET(p_init, "cuInit");
	GET(p_devget, "cuDeviceGet");
	GET(p_retain, "cuDevicePrimaryCtxRetain");
	GET(p_setcur, "cuCtxSetCurrent");
	GET(p_screate, "cuStreamCreate");
	GET(p_ssync, "cuStreamSynchronize");
	GET(p_sdestroy, "cuStreamDestroy");
	GET(p_launch, "cuLaunchKernel");
	GET(p_glaunch, "cuGraphLaunch");
	GET(p_h2d, "cuMemcpyHtoDAsync");
	GET(p_capb, "cuStreamBeginCapture");
	GET(p_cape, "cuStreamEndCapture");
	if (use_dlsym) {
		p_launch = (launch_t)dlsym(h, ptds ? "cuLaunchKernel_ptsz" :
					   "cuLaunchKernel");
		if (p_launch == NULL)
			die("dlsym(cuLaunchKernel)", 0);
	}
	/* an unknown name is the driver's answer, unchanged */
	{
		void *p = (void *)1;

		rc = gpa("cuNoSuchFunction", &p, 13000, 0, &qs);
		if (rc == CUDA_SUCCESS || p != NULL || qs != 1)
			die("cuGetProcAddress(unknown) passthrough", rc);
	}

	if ((rc = p_init(0)) != CUDA_SUCCESS)
		die("cuInit", rc);
	if ((rc = p_devget(&dev, 0)) != CUDA_SUCCESS ||
	    (rc = p_retain(&ctx, dev)) != CUDA_SUCCESS ||
	    (rc = p_setcur(ctx)) != CUDA_SUCCESS)
		die("context", rc);
	streams[0] = NULL;	/* the default stream */
	for (unsigned i = 1; i < nstreams; i++)
		if ((rc = p_screate(&streams[i], 0)) != CUDA_SUCCESS)
			die("cuStreamCreate", rc);

	if (do_fork) {
		/* like a DataLoader worker: never touches CUDA */
		child = fork();
		if (child == 0) {
			usleep(50000);
			_exit(0);
		}
		if (child < 0)
			die("fork", 0);
	}

	if (at != 0)
		sleep_until(at);
	t0 = now_ns();
	tend = t0 + (uint64_t)(secs * 1e9);
	cycle_end = busy_ms > 0 ? t0 + (uint64_t)(busy_ms * 1e6) : 0;
	for (t = t0; t < tend; t = now_ns()) {
		CUstream s = streams[launches % nstreams];

		if (graph && launches % 2 == 1)
			rc = p_glaunch((CUgraphExec)(uintptr_t)kus, s);
		else if (copies && launches % 4 == 3)
			rc = p_h2d(0, buf, sizeof(buf), s);
		else
			rc = p_launch((CUfunction)(uintptr_t)kus, 1, 1, 1, 1,
				      1, 1, 0, s, NULL, NULL);
		if (rc != CUDA_SUCCESS)
			die("launch", rc);
		launches++;
		if (churn) {
			/* a new stream for every few launches (2000 and more
			 * over a run: more than the gate's stream table) */
			CUstream ns;

			if ((rc = p_screate(&ns, 0)) != CUDA_SUCCESS ||
			    (rc = p_launch((CUfunction)(uintptr_t)kus, 1, 1,
					   1, 1, 1, 1, 0, ns, NULL, NULL)) !=
				    CUDA_SUCCESS ||
			    (rc = p_ssync(ns)) != CUDA_SUCCESS ||
			    (rc = p_sdestroy(ns)) != CUDA_SUCCESS)
				die("stream churn", rc);
		}
		if (win_b > win_a && t >= t0 + (uint64_t)(win_a * 1e9) &&
		    t < t0 + (uint64_t)(win_b * 1e9))
			in_win++;
		if (dev1 && launches % 16 == 0) {
			/* a second visible device: never gated */
			if ((rc = p_devget(&dev, 1)) != CUDA_SUCCESS ||
			    (rc = p_retain(&ctx1, dev)) != CUDA_SUCCESS ||
			    (rc = p_setcur(ctx1)) != CUDA_SUCCESS ||
			    (rc = p_launch((CUfunction)(uintptr_t)kus, 1, 1,
					   1, 1, 1, 1, 0, NULL, NULL, NULL)) !=
				    CUDA_SUCCESS ||
			    (rc = p_setcur(ctx)) != CUDA_SUCCESS)
				die("device 1", rc);
		}
		if (capture && launches % 64 == 0) {
			/* a global-mode capture between launches */
			if ((rc = p_screate(&cs, 0)) != CUDA_SUCCESS ||
			    (rc = p_capb(cs, 0)) != CUDA_SUCCESS)
				die("begin capture", rc);
			for (int i = 0; i < 8; i++)
				if ((rc = p_launch((CUfunction)(uintptr_t)kus,
						   1, 1, 1, 1, 1, 1, 0, cs,
						   NULL, NULL)) != CUDA_SUCCESS)
					die("captured launch", rc);
			if ((rc = p_cape(cs, &gr)) != CUDA_SUCCESS)
				die("end capture (invalidated)", rc);
		}
		if (sync_every != 0 && launches % sync_every == 0)
			for (unsigned i = 0; i < nstreams; i++)
				if ((rc = p_ssync(streams[i])) != CUDA_SUCCESS)
					die("cuStreamSynchronize", rc);
		if (cycle_end != 0 && t >= cycle_end) {
			uint64_t p0, pn;

			for (unsigned i = 0; i < nstreams; i++)
				(void)p_ssync(streams[i]);
			p0 = now_ns();
			usleep((useconds_t)(idle_ms * 1000));
			cycle_end = now_ns() + (uint64_t)(busy_ms * 1e6);
			/* the GPU idles from the sync to the next launch;
			 * pauses under 1.5 ms are the ones a holder keeps
			 * the token through (the gate's idle grace: 2 ms) */
			pn = now_ns() - p0;
			if (pn < 1500000)
				paused_ns += pn;
			else {
				long_pauses++;
				long_ns += pn;
			}
		}
	}
	for (unsigned i = 0; i < nstreams; i++)
		if ((rc = p_ssync(streams[i])) != CUDA_SUCCESS)
			die("cuStreamSynchronize", rc);
	if (child > 0) {
		int ws;

		if (waitpid(child, &ws, 0) != child || !WIFEXITED(ws) ||
		    WEXITSTATUS(ws) != 0) {
			fprintf(stderr, "gate_app: forked child failed\n");
			bad = 1;
		}
	}
	p_stats(&st);
	printf("event=done launches=%" PRIu64 " in_window=%" PRIu64
	       " kernels=%" PRIu64 " graphs=%" PRIu64 " copies=%" PRIu64
	       " event_records=%" PRIu64 " captured=%" PRIu64
	       " capture_broken=%" PRIu64 " max_queued_us=%.1f"
	       " kernel_s=%.4f elapsed_s=%.3f proc_lookups=%" PRIu64
	       " dev1=%" PRIu64 " paused_s=%.4f long_pauses=%" PRIu64
	       " long_paused_s=%.4f\n",
	       launches, in_win, st.kernels, st.graphs, st.copies,
	       st.event_records, st.captured, st.capture_broken,
	       (double)st.max_queued_ns / 1e3, (double)st.kernel_ns / 1e9,
	       (double)(now_ns() - t0) / 1e9, st.proc_lookups, st.dev1_work,
	       (double)paused_ns / 1e9, long_pauses, (double)long_ns / 1e9);
	fflush(stdout);
	if (expect == 1 && st.event_records == 0) {
		fprintf(stderr, "gate_app: expected the gate: no events\n");
		bad = 1;
	}
	if (expect == 0 && st.event_records != 0) {
		fprintf(stderr, "gate_app: expected no gate: %" PRIu64
			" events\n", st.event_records);
		bad = 1;
	}
	if (st.capture_broken != 0) {
		fprintf(stderr, "gate_app: a capture was broken\n");
		bad = 1;
	}
	if (max_q_ns != 0 && st.max_queued_ns > max_q_ns) {
		fprintf(stderr, "gate_app: work queued %.0f us > %.0f us\n",
			(double)st.max_queued_ns / 1e3, (double)max_q_ns / 1e3);
		bad = 1;
	}
	return bad;
}
