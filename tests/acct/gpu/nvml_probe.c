/*
 * nvml_probe — checks the accounting NVML estimate on a real GPU, without
 * the rest of the agent (the device machine has no SQLite/YAML headers):
 * the GPU module's gs_gpu_util_open/gs_gpu_proc_util feed the accounting
 * module (acct.c, no store) exactly as gshared wires them, for an
 * allocation that never attaches; a process with GSHARE_ALLOC=1 in its
 * environment runs on the GPU meanwhile.
 *   nvml_probe GPU_UUID SECONDS
 * Prints the estimated GPU seconds and how many NVML samples were seen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acct.h"
#include "gpu.h"

/* acct.c calls the store only when given one; this probe gives none. */
int gs_store_next_key(struct gs_store *s, uint64_t *out, struct gs_error *e)
{
	(void)s; (void)e; *out = 1; return 0;
}
int gs_store_last_tick(struct gs_store *s, uint64_t *out, struct gs_error *e)
{
	(void)s; (void)e; *out = 0; return 0;
}
int gs_store_adopt(struct gs_store *s, const struct gs_labels *l, uint32_t uid,
		   int32_t gpu, struct gs_store_alloc *row)
{
	(void)s; (void)l; (void)uid; (void)gpu; (void)row; return 0;
}
struct gs_store_batch *gs_store_batch_new(uint64_t tick, int64_t t_ns)
{
	struct gs_store_batch *b = calloc(1, sizeof(*b));

	if (b) { b->tick = tick; b->t_ns = t_ns; }
	return b;
}
void gs_store_batch_free(struct gs_store_batch *b)
{
	if (b) { free(b->allocs); free(b->samples); free(b); }
}
int gs_store_batch_add_alloc(struct gs_store_batch *b,
			     const struct gs_store_alloc *a, struct gs_error *e)
{
	(void)b; (void)a; (void)e; return 0;
}
int gs_store_batch_add_sample(struct gs_store_batch *b,
			      const struct gs_store_sample *x,
			      struct gs_error *e)
{
	(void)b; (void)x; (void)e; return 0;
}

static struct gs_gpu_util *util;
static unsigned nsamples;

static int
source(void *arg, int32_t gpu, uint64_t since_us, struct gs_proc_util *out,
       unsigned max, struct gs_error *err)
{
	struct gs_gpu_proc_sample s[256];
	int n;

	(void)arg;
	n = gs_gpu_proc_util(util, gpu, since_us, s, max < 256 ? max : 256,
			     err);
	for (int i = 0; i < n; i++) {
		if (getenv("PROBE_VERBOSE"))
			fprintf(stderr, "sample pid %u sm %u%% ts %llu\n",
				s[i].pid, s[i].sm_util,
				(unsigned long long)s[i].ts_us);
		out[i].pid = s[i].pid;
		out[i].sm_util = s[i].sm_util;
		out[i].ts_us = s[i].ts_us;
	}
	if (n > 0)
		nsamples += (unsigned)n;
	else if (n < 0)
		fprintf(stderr, "nvml_probe: %s\n", err->msg);
	return n;
}

static uint64_t
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
main(int argc, char **argv)
{
	struct gs_gpu_desc d;
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	const struct gs_acct_view *v;
	struct gs_acct *a;
	struct gs_error err;
	double secs;
	uint64_t t0;

	if (argc != 3) {
		fprintf(stderr, "usage: nvml_probe GPU_UUID SECONDS\n");
		return 2;
	}
	secs = atof(argv[2]);
	memset(&d, 0, sizeof(d));
	snprintf(d.uuid, sizeof(d.uuid), "%s", argv[1]);
	if (gs_gpu_util_open(&d, 1, &util, &err) < 0 ||
	    gs_acct_new(NULL, &a, &err) < 0) {
		fprintf(stderr, "nvml_probe: %s\n", err.msg);
		return 1;
	}
	gs_acct_set_util_source(a, source, NULL, "/proc");
	memset(&m, 0, sizeof(m));
	m.agent_id = 1;	/* the job runs with GSHARE_ALLOC=1 */
	m.shares = 50;
	if (gs_acct_open(a, &m, 0, mono(), &err) < 0)
		return 1;
	t0 = mono();
	while (mono() - t0 < (uint64_t)(secs * 1e9)) {
		usleep(500000);
		if (gs_acct_tick(a, mono(), 0, &b, &err) < 0)
			return 1;
		gs_store_batch_free(b);
	}
	gs_acct_allocs(a, &v);
	printf("estimate_gpu_s=%.3f estimate=%u nvml_samples=%u\n",
	       (double)v[0].row.tot.gpu_ns / 1e9, v[0].row.estimate,
	       nsamples);
	gs_acct_free(a);
	gs_gpu_util_close(util);
	return 0;
}
