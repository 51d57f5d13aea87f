/*
 * unman_probe.c — on a machine with an NVIDIA GPU (tests/agent/gpu/
 * unman_probe.sh, not part of `make test`): checks, through the agent's
 * GPU module (node-agent/gpu.c), the NVML facts the unmanaged-process
 * watcher (node-agent/unman.c) relies on, for one running job PID:
 *   1. nvmlDeviceGetComputeRunningProcesses lists PID (the struct layout
 *      read back gives the right pid);
 *   2. nvmlDeviceGetProcessUtilization gives PID an SM utilization > 0
 *      while it runs;
 *   3. once PID is stopped (SIGSTOP, as level-0 hold-back does) it stays
 *      listed and its utilization falls to 0 (the GPU is freed), and it
 *      comes back after SIGCONT.
 * Prints one line per phase with what NVML said and the time it took.
 *   unman_probe UUID PID
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int listed(struct gs_gpu_util *u, uint32_t pid, double *cost_us)
{
	struct gs_gpu_proc_mem procs[256];
	struct gs_error err;
	double t0 = now_s();
	int n = gs_gpu_compute_procs(u, 0, procs, 256, &err);

	*cost_us = (now_s() - t0) * 1e6;
	if (n < 0) {
		fprintf(stderr, "compute procs: %s\n", err.msg);
		exit(1);
	}
	for (int i = 0; i < n; i++)
		if (procs[i].pid == pid)
			return 1;
	return 0;
}

/* Max SM utilization NVML reports for pid over `secs` (sampling every
 * 250 ms, as new samples arrive); -1 when no sample named it. */
static int util_over(struct gs_gpu_util *u, uint32_t pid, double secs,
		     uint64_t *since)
{
	struct gs_gpu_proc_sample s[256];
	struct gs_error err;
	double end = now_s() + secs;
	int best = -1;

	while (now_s() < end) {
		int n = gs_gpu_proc_util(u, 0, *since, s, 256, &err);

		if (n < 0) {
			fprintf(stderr, "proc util: %s\n", err.msg);
			exit(1);
		}
		for (int i = 0; i < n; i++) {
			if (s[i].ts_us > *since)
				*since = s[i].ts_us;
			if (s[i].pid == pid && (int)s[i].sm_util > best)
				best = (int)s[i].sm_util;
		}
		usleep(250000);
	}
	return best;
}

int main(int argc, char **argv)
{
	struct gs_gpu_desc d;
	struct gs_gpu_util *u;
	struct gs_error err;
	uint64_t since = 0;
	uint32_t pid;
	double cost;
	int fail = 0, l, sm;

	if (argc != 3) {
		fprintf(stderr, "usage: unman_probe UUID PID\n");
		return 2;
	}
	pid = (uint32_t)strtoul(argv[2], NULL, 10);
	memset(&d, 0, sizeof(d));
	snprintf(d.uuid, sizeof(d.uuid), "%s", argv[1]);
	if (gs_gpu_util_open(&d, 1, &u, &err) < 0) {
		fprintf(stderr, "open: %s\n", err.msg);
		return 1;
	}
	sleep(2);	/* the job creates its context */
	l = listed(u, pid, &cost);
	printf("running: listed=%d (compute procs call %.0f us)\n", l, cost);
	fail |= !l;
	sm = util_over(u, pid, 2.0, &since);
	printf("running: max SM util %d%%\n", sm);
	fail |= sm <= 0;
	kill((pid_t)pid, SIGSTOP);
	util_over(u, pid, 1.0, &since);		/* in-flight kernels drain */
	sm = util_over(u, pid, 2.0, &since);
	l = listed(u, pid, &cost);
	printf("stopped: listed=%d, max SM util %d%% (-1: no sample)\n", l,
	       sm);
	fail |= !l || sm > 0;
	kill((pid_t)pid, SIGCONT);
	sm = util_over(u, pid, 2.0, &since);
	printf("continued: max SM util %d%%\n", sm);
	fail |= sm <= 0;
	gs_gpu_util_close(u);
	printf("%s\n", fail ? "FAIL" : "ok");
	return fail;
}
