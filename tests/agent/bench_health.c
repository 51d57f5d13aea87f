/*
 * bench_health.c — cost of one NVML health check (gpu.c: the device
 * looked up by UUID, then a power query), per GPU, on the machine's real
 * GPUs.  This is what the agent's health worker does every 500 ms.
 *
 *   bench_health [N]     N checks per GPU (default 1000)
 *
 * Prints whether critical XID events could be registered, then one line
 * per GPU: healthy or not, mean / p50 / p99 / max us.
 * Without NVML or GPUs it says so and exits 0 (nothing to measure).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char *argv[])
{
	struct gs_agent_config cfg;
	struct gs_gpu_desc d[GS_MAX_GPUS];
	struct gs_gpu_health *h = NULL;
	struct gs_error err;
	uint64_t *t;
	uint32_t n = 0, g;
	long iters = argc > 1 ? atol(argv[1]) : 1000;
	char why[64];
	long i;
	int ok = 1;

	if (iters < 1)
		iters = 1;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gpu_source = GS_GPUS_NVML;
	if (gs_gpu_discover(&cfg, d, &n, NULL, &err) < 0 ||
	    gs_gpu_health_open(d, n, &h, &err) < 0) {
		printf("bench_health: skipped: %s\n", err.msg);
		return 0;
	}
	printf("critical XID events: %s\n", gs_gpu_health_xids(h) ?
	       "registered" : "not available");
	t = calloc((size_t)iters, sizeof(*t));
	if (t == NULL) {
		gs_gpu_health_close(h);
		return 1;
	}
	for (g = 0; g < gs_gpu_health_count(h); g++) {
		uint64_t sum = 0, t0;

		for (i = 0; i < iters; i++) {
			t0 = now_ns();
			ok = gs_gpu_health_check(h, g, why, sizeof(why));
			t[i] = now_ns() - t0;
			sum += t[i];
		}
		qsort(t, (size_t)iters, sizeof(*t), cmp_u64);
		printf("gpu %d %s: %s; %ld checks: mean %.1f us, p50 %.1f us, "
		       "p99 %.1f us, max %.1f us\n", gs_gpu_health_index(h, g),
		       d[g].uuid, ok ? "healthy" : why, iters,
		       (double)sum / (double)iters / 1e3,
		       (double)t[iters / 2] / 1e3,
		       (double)t[(iters * 99) / 100] / 1e3,
		       (double)t[iters - 1] / 1e3);
	}
	free(t);
	gs_gpu_health_close(h);
	return 0;
}
