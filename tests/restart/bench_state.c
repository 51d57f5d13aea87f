/*
 * bench_state.c — cost of the allocation table file (node-agent/state.c):
 * gshared writes it (one of two slot files in turn, in place, then
 * fdatasync) after every create, close, weight or label change, and reads
 * it (both slots) once at start-up.  For tables of 1, 100 and 1000 allocations with realistic
 * labels, prints the median and 99th percentile of one save and one load,
 * and the file size.
 * Usage: bench_state [dir (build)] [rounds (200)] — dir should be on the
 * same kind of disk as the agent's state_dir (not tmpfs) for the fsync.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state.h"

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

int main(int argc, char **argv)
{
	static const unsigned sizes[] = { 1, 100, 1000 };
	const char *dir = argc > 1 ? argv[1] : "build";
	int rounds = argc > 2 ? atoi(argv[2]) : 200;
	char path[512], slot[520];
	struct gs_state st, back;
	struct gs_state_alloc a;
	struct gs_error err;
	struct stat sb;
	uint64_t *ts, t0;

	if (rounds < 1)
		rounds = 1;
	ts = calloc((size_t)rounds, sizeof(*ts));
	if (ts == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/bench_state.allocs", dir);
	snprintf(slot, sizeof(slot), "%s.0", path);
	printf("%-8s %-9s %-12s %-12s %-12s %-12s\n", "allocs", "bytes",
	       "save p50 us", "save p99 us", "load p50 us", "load p99 us");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		double sp50, sp99;

		memset(&st, 0, sizeof(st));
		st.next_id = sizes[k] + 1;
		for (unsigned i = 0; i < sizes[k]; i++) {
			memset(&a, 0, sizeof(a));
			a.id = i + 1;
			snprintf(a.gpu_uuid, sizeof(a.gpu_uuid),
				 "GPU-ea8d6e85-8966-c697-8e14-4ee11fc4c398");
			a.shares = 10;
			a.weight = 10;
			a.priority = 1;
			a.created_unix_ns = 1795292656000000000ull;
			snprintf(a.labels.cluster, sizeof(a.labels.cluster),
				 "cluster1");
			snprintf(a.labels.job, sizeof(a.labels.job), "%u",
				 100000 + i);
			snprintf(a.labels.step, sizeof(a.labels.step), "0");
			snprintf(a.labels.node, sizeof(a.labels.node),
				 "node017");
			snprintf(a.labels.user, sizeof(a.labels.user),
				 "user%u", i % 50);
			snprintf(a.labels.account, sizeof(a.labels.account),
				 "project-%u", i % 7);
			if (gs_state_add(&st, &a, &err) < 0)
				return 1;
		}
		for (int r = 0; r < rounds; r++) {
			st.seq++;	/* the two slots in turn, as the agent */
			t0 = now_ns();
			if (gs_state_save(path, &st, &err) < 0) {
				fprintf(stderr, "bench_state: %s\n", err.msg);
				return 1;
			}
			ts[r] = now_ns() - t0;
		}
		qsort(ts, (size_t)rounds, sizeof(*ts), cmp_u64);
		sp50 = (double)ts[rounds / 2] / 1e3;
		sp99 = (double)ts[rounds * 99 / 100] / 1e3;
		for (int r = 0; r < rounds; r++) {
			t0 = now_ns();
			if (gs_state_load(path, &back, NULL, &err) != 1) {
				fprintf(stderr, "bench_state: %s\n", err.msg);
				return 1;
			}
			ts[r] = now_ns() - t0;
			gs_state_clear(&back);
		}
		qsort(ts, (size_t)rounds, sizeof(*ts), cmp_u64);
		if (stat(slot, &sb) < 0)
			return 1;
		printf("%-8u %-9lld %-12.1f %-12.1f %-12.1f %-12.1f\n",
		       sizes[k], (long long)sb.st_size, sp50, sp99,
		       (double)ts[rounds / 2] / 1e3,
		       (double)ts[rounds * 99 / 100] / 1e3);
		gs_state_clear(&st);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(slot, sizeof(slot), "%s.%d", path, i);
		unlink(slot);
	}
	free(ts);
	return 0;
}
