/*
 * acct_fill — build a usage store from a small text description, through
 * the store module (the same code path the agent writes with).  Used by
 * the gsacct golden tests and the benchmarks.
 *
 *   acct_fill DB < SPEC
 * SPEC lines ('#' comments; '-' stands for an empty string):
 *   alloc KEY JOB STEP NS POD CONTAINER USER UID ACCOUNT GPU SHARES WEIGHT
 *         PRIO MODE START END STATE EST
 *       START/END: seconds since the epoch (END 0: still open);
 *       STATE: RUNNING COMPLETED ... ; EST: 0/1
 *   run KEY FROM SECONDS GPU_FRAC SUSP_PER_S EVICT_US [MEM_MIB]
 *       one 1-second sample per second from FROM, each with GPU_FRAC s
 *       of GPU time, held = GPU, busy when GPU_FRAC > 0; holding
 *       MEM_MIB of device memory (default 0: none)
 *   memlimit KEY MIB  the allocation's device memory limit
 *   commit            write what was described so far (one transaction)
 *   bench N NALLOC    append N samples over NALLOC allocations, one
 *                     transaction per NALLOC samples (a tick), and print
 *                     the insert rate
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"

#define MAXA 4096

static struct gs_store_alloc allocs[MAXA];
static unsigned nallocs;
static uint64_t tickno;

static void
field(char *dst, size_t n, const char *s)
{
	snprintf(dst, n, "%s", strcmp(s, "-") == 0 ? "" : s);
}

static struct gs_store_alloc *
find(uint64_t key)
{
	for (unsigned i = 0; i < nallocs; i++)
		if (allocs[i].key == key)
			return &allocs[i];
	return NULL;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	struct gs_store_batch *b = NULL;
	struct gs_store *st;
	struct gs_error err;
	char line[1024];
	int lineno = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: acct_fill DB < SPEC\n");
		return 2;
	}
	if (gs_store_open(argv[1], 0, &st, &err) < 0) {
		fprintf(stderr, "acct_fill: %s\n", err.msg);
		return 1;
	}
	if (gs_store_last_tick(st, &tickno, &err) < 0) {
		fprintf(stderr, "acct_fill: %s\n", err.msg);
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		char w[20][128];
		int n;

		lineno++;
		n = sscanf(line, "%127s %127s %127s %127s %127s %127s %127s "
			   "%127s %127s %127s %127s %127s %127s %127s %127s "
			   "%127s %127s %127s %127s %127s",
			   w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8],
			   w[9], w[10], w[11], w[12], w[13], w[14], w[15],
			   w[16], w[17], w[18], w[19]);
		if (n <= 0 || w[0][0] == '#')
			continue;
		if (b == NULL)
			b = gs_store_batch_new(++tickno, 0);
		if (strcmp(w[0], "alloc") == 0 && n == 19) {
			struct gs_store_alloc *a = &allocs[nallocs++];

			memset(a, 0, sizeof(*a));
			a->key = strtoull(w[1], NULL, 10);
			a->agent_id = a->key;
			field(a->labels.job, sizeof(a->labels.job), w[2]);
			field(a->labels.step, sizeof(a->labels.step), w[3]);
			field(a->labels.ns, sizeof(a->labels.ns), w[4]);
			field(a->labels.pod, sizeof(a->labels.pod), w[5]);
			field(a->labels.container, sizeof(a->labels.container),
			      w[6]);
			field(a->labels.user, sizeof(a->labels.user), w[7]);
			a->uid = (uint32_t)strtoul(w[8], NULL, 10);
			field(a->labels.account, sizeof(a->labels.account),
			      w[9]);
			snprintf(a->labels.cluster, sizeof(a->labels.cluster),
				 "c1");
			snprintf(a->labels.node, sizeof(a->labels.node), "n1");
			a->gpu = atoi(w[10]);
			snprintf(a->gpu_uuid, sizeof(a->gpu_uuid),
				 "GPU-0000000%d", a->gpu);
			a->shares = (uint32_t)atoi(w[11]);
			a->weight = (uint32_t)atoi(w[12]);
			a->priority = (uint32_t)atoi(w[13]);
			a->mode = (uint32_t)atoi(w[14]);
			a->start_ns = strtoll(w[15], NULL, 10) * 1000000000;
			a->end_ns = strtoll(w[16], NULL, 10) * 1000000000;
			if (gs_store_state_parse(w[17], &a->state) < 0)
				goto bad;
			a->estimate = (uint32_t)atoi(w[18]);
			continue;
		}
		if (strcmp(w[0], "memlimit") == 0 && n == 3) {
			struct gs_store_alloc *a = find(strtoull(w[1], NULL,
								 10));

			if (a == NULL)
				goto bad;
			a->mem_limit = strtoull(w[2], NULL, 10) << 20;
			continue;
		}
		if (strcmp(w[0], "run") == 0 && (n == 7 || n == 8)) {
			struct gs_store_alloc *a = find(strtoull(w[1], NULL,
								 10));
			int64_t from = strtoll(w[2], NULL, 10);
			int secs = atoi(w[3]);
			double frac = atof(w[4]);
			uint64_t susp = strtoull(w[5], NULL, 10);
			uint64_t ev = strtoull(w[6], NULL, 10) * 1000;
			uint64_t mem = n == 8 ? strtoull(w[7], NULL, 10) << 20
					      : 0;

			if (a == NULL)
				goto bad;
			for (int i = 1; i <= secs; i++) {
				struct gs_store_sample x;

				memset(&x, 0, sizeof(x));
				x.key = a->key;
				x.t_ns = (from + i) * 1000000000;
				x.dt_ns = 1000000000;
				x.estimate = a->estimate;
				x.d.gpu_ns = (uint64_t)(frac * 1e9);
				x.d.held_ns = x.d.gpu_ns;
				if (frac > 0) {
					x.d.wall_ns = 1000000000;
					x.d.share_ns = 10000000ull * a->shares;
				}
				x.d.suspensions = susp;
				x.d.evict_ns_sum = susp * ev;
				x.d.evict_ns_max = susp ? ev : 0;
				x.d.block_tasks = x.d.gpu_ns / 1000000;
				if (mem) {
					x.d.mem_max = mem;
					x.d.mem_byte_s = mem;
					x.d.mem_ns = 1000000000;
				}
				if (gs_store_batch_add_sample(b, &x, &err) < 0)
					goto bad;
				a->tot.gpu_ns += x.d.gpu_ns;
				a->tot.held_ns += x.d.held_ns;
				a->tot.wall_ns += x.d.wall_ns;
				a->tot.share_ns += x.d.share_ns;
				a->tot.suspensions += x.d.suspensions;
				a->tot.evict_ns_sum += x.d.evict_ns_sum;
				a->tot.block_tasks += x.d.block_tasks;
				if (x.d.evict_ns_max > a->tot.evict_ns_max)
					a->tot.evict_ns_max = x.d.evict_ns_max;
				if (x.d.mem_max > a->tot.mem_max)
					a->tot.mem_max = x.d.mem_max;
				a->tot.mem_byte_s += x.d.mem_byte_s;
				a->tot.mem_ns += x.d.mem_ns;
				a->last_ns = x.t_ns;
			}
			continue;
		}
		if (strcmp(w[0], "commit") == 0) {
			for (unsigned i = 0; i < nallocs; i++)
				if (gs_store_batch_add_alloc(b, &allocs[i],
							     &err) < 0)
					goto bad;
			if (gs_store_write(st, b, &err) < 0)
				goto fail;
			b = NULL;
			continue;
		}
		if (strcmp(w[0], "bench") == 0 && n == 3) {
			uint64_t total = strtoull(w[1], NULL, 10), done = 0;
			unsigned na = (unsigned)atoi(w[2]);
			double t0 = now_s(), dt;
			int64_t t = 1700000000LL * 1000000000;

			gs_store_batch_free(b);
			b = NULL;
			for (unsigned i = 0; i < na && nallocs < MAXA; i++) {
				struct gs_store_alloc *a = &allocs[nallocs++];

				memset(a, 0, sizeof(*a));
				a->key = 100000 + nallocs;
				snprintf(a->labels.job, sizeof(a->labels.job),
					 "%u", 900000 + nallocs);
				a->shares = a->weight = 10;
				a->start_ns = t;
				a->uid = 1000;
			}
			while (done < total) {
				b = gs_store_batch_new(++tickno, t);
				t += 1000000000;
				for (unsigned i = 0; i < na && done < total;
				     i++, done++) {
					struct gs_store_alloc *a =
						&allocs[nallocs - na + i];
					struct gs_store_sample x;

					memset(&x, 0, sizeof(x));
					x.key = a->key;
					x.t_ns = t;
					x.dt_ns = 1000000000;
					x.d.gpu_ns = 100000000;
					a->tot.gpu_ns += x.d.gpu_ns;
					a->last_ns = t;
					gs_store_batch_add_sample(b, &x, &err);
					gs_store_batch_add_alloc(b, a, &err);
				}
				if (gs_store_write(st, b, &err) < 0)
					goto fail;
				b = NULL;
			}
			dt = now_s() - t0;
			printf("insert: %" PRIu64 " samples in %.3f s = %.0f "
			       "samples/s (%u allocations per tick)\n", total,
			       dt, (double)total / dt, na);
			continue;
		}
bad:
		fprintf(stderr, "acct_fill: line %d: bad line: %s", lineno,
			line);
		return 1;
	}
	if (b != NULL) {
		for (unsigned i = 0; i < nallocs; i++)
			gs_store_batch_add_alloc(b, &allocs[i], &err);
		if (b->nallocs && gs_store_write(st, b, &err) < 0)
			goto fail;
		if (!b->nallocs)
			gs_store_batch_free(b);
	}
	gs_store_close(st);
	return 0;
fail:
	fprintf(stderr, "acct_fill: %s\n", err.msg);
	return 1;
}
