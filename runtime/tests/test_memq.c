/*
 * test_memq.c — unit tests of the job-side device memory ledger: quota
 * arithmetic (exactly at the limit, one byte over, no limit, overflow),
 * failed allocations giving their reservation back, unknown and repeated
 * pointers, forced charges beyond the limit (a pool's growth), the table
 * against a reference model through many inserts and
 * deletes, the cuMemGetInfo view, the figures published in the control
 * page, and 8 threads allocating and freeing at once without ever
 * passing the limit together; the allocation's shared counter
 * (gs_mempage.h): 4 ledgers (processes) of 2 threads each on one counter
 * never holding more than the limit together, a full ledger refusing
 * another's allocation, and a dead process's page figure taken out of
 * the counter (as the agent does) giving its memory to the others.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gs_memq.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static struct gs_memq *mk(uint64_t limit, volatile struct gs_ctlpage *p)
{
	struct gs_memq *q = NULL;
	struct gs_error err;

	assert_int_equal(gs_memq_new(limit, p, &q, &err), 0);
	return q;
}

static void test_arith(void **state)
{
	struct gs_memq *q = mk(10 * GIB, NULL);

	(void)state;
	assert_int_equal(gs_memq_reserve(q, 6 * GIB), 0);
	assert_int_equal(gs_memq_track(q, 0x7f0000000000ull, 6 * GIB), 0);
	assert_int_equal(gs_memq_reserve(q, 4 * GIB + 1), -1);
	assert_int_equal(gs_memq_used(q), 6 * GIB);	/* nothing taken */
	assert_int_equal(gs_memq_reserve(q, 4 * GIB), 0);	/* exactly */
	assert_int_equal(gs_memq_reserve(q, 1), -1);
	assert_int_equal(gs_memq_reserve(q, 0), 0);
	/* the real allocation failed: its reservation comes back */
	gs_memq_unreserve(q, 4 * GIB);
	assert_int_equal(gs_memq_used(q), 6 * GIB);
	assert_int_equal(gs_memq_peak(q), 10 * GIB);
	assert_int_equal(gs_memq_untrack(q, 0x7f0000000000ull), 6 * GIB);
	assert_int_equal(gs_memq_used(q), 0);
	assert_int_equal(gs_memq_peak(q), 10 * GIB);
	/* a free of a pointer it never saw: passed through, no change */
	assert_int_equal(gs_memq_untrack(q, 0x1234), 0);
	assert_int_equal(gs_memq_untrack(q, 0), 0);
	assert_int_equal(gs_memq_used(q), 0);
	/* the same address twice, or 0: refused */
	assert_int_equal(gs_memq_track(q, 0x1000, 1), 0);
	assert_int_equal(gs_memq_track(q, 0x1000, 1), -1);
	assert_int_equal(gs_memq_track(q, 0, 1), -1);
	assert_int_equal(gs_memq_count(q), 1);
	/* an unreserve larger than what is held stops at zero */
	gs_memq_unreserve(q, 5 * GIB);
	assert_int_equal(gs_memq_used(q), 0);
	assert_int_equal(gs_memq_reserve(q, UINT64_MAX), -1);
	gs_memq_free(q);

	/* no limit: counts, never refuses, overflow excepted */
	q = mk(0, NULL);
	assert_int_equal(gs_memq_reserve(q, 1ull << 62), 0);
	assert_int_equal(gs_memq_reserve(q, 1ull << 62), 0);
	assert_int_equal(gs_memq_reserve(q, UINT64_MAX), -1);
	assert_int_equal(gs_memq_used(q), 1ull << 63);
	gs_memq_free(q);
	gs_memq_free(NULL);
}

/* gs_memq_force: memory the driver already holds (a pool's growth) is
 * taken whatever the limit, raises the peak and the page, and comes back
 * with gs_memq_unreserve; while used is above the limit nothing more is
 * reserved. */
static void test_force(void **state)
{
	struct gs_ctlpage page;
	struct gs_memq *q;

	(void)state;
	memset(&page, 0, sizeof(page));
	q = mk(10 * GIB, &page);
	assert_int_equal(gs_memq_reserve(q, 8 * GIB), 0);
	gs_memq_force(q, 4 * GIB);
	assert_int_equal(gs_memq_used(q), 12 * GIB);
	assert_int_equal(gs_memq_peak(q), 12 * GIB);
	assert_int_equal(page.mem_used, 12 * GIB);
	assert_int_equal(page.mem_peak, 12 * GIB);
	assert_int_equal(gs_memq_reserve(q, 1), -1);
	gs_memq_unreserve(q, 4 * GIB);
	assert_int_equal(gs_memq_used(q), 8 * GIB);
	assert_int_equal(gs_memq_reserve(q, 2 * GIB), 0);
	/* saturates rather than wrapping */
	gs_memq_force(q, UINT64_MAX);
	assert_int_equal(gs_memq_used(q), UINT64_MAX);
	gs_memq_free(q);
}

static void test_view(void **state)
{
	struct gs_memq *q = mk(10 * GIB, NULL);
	uint64_t f, t;

	(void)state;
	gs_memq_view(q, 70 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(t, 10 * GIB);
	assert_int_equal(f, 10 * GIB);
	assert_int_equal(gs_memq_reserve(q, 3 * GIB), 0);
	gs_memq_view(q, 70 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(f, 7 * GIB);
	/* others hold the card: never more free than the device has */
	gs_memq_view(q, 2 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(f, 2 * GIB);
	assert_int_equal(t, 10 * GIB);
	gs_memq_free(q);
	/* a limit above the device, or none: the device's own figures */
	q = mk(100 * GIB, NULL);
	gs_memq_view(q, 70 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(f, 70 * GIB);
	assert_int_equal(t, 80 * GIB);
	gs_memq_free(q);
	q = mk(0, NULL);
	gs_memq_view(q, 70 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(t, 80 * GIB);
	gs_memq_free(q);
}

static void test_page(void **state)
{
	static struct gs_ctlpage page;
	struct gs_memq *q;

	(void)state;
	memset(&page, 0, sizeof(page));
	q = mk(GIB, &page);
	assert_int_equal(gs_memq_reserve(q, 300 * MIB), 0);
	assert_int_equal(gs_memq_track(q, 0xa000, 300 * MIB), 0);
	assert_int_equal(page.mem_used, 300 * MIB);
	assert_int_equal(page.mem_peak, 300 * MIB);
	assert_int_equal(gs_memq_untrack(q, 0xa000), 300 * MIB);
	assert_int_equal(page.mem_used, 0);
	assert_int_equal(page.mem_peak, 300 * MIB);
	assert_int_equal(gs_memq_reserve(q, GIB + 1), -1);
	assert_int_equal(page.mem_peak, 300 * MIB);
	gs_memq_free(q);
}

/* Many pointers in and out in a shuffled order against a plain array. */
static void test_table(void **state)
{
	enum { N = 20000 };
	static uint64_t ptrs[N];
	static int live[N];
	struct gs_memq *q = mk(0, NULL);
	uint64_t sum = 0, x = 88172645463325252ull;
	unsigned i, k;

	(void)state;
	for (i = 0; i < N; i++) {
		/* aligned, clustered like device addresses */
		ptrs[i] = 0x7f0000000000ull + (uint64_t)i * 512;
		live[i] = 0;
	}
	for (k = 0; k < 8 * N; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		i = (unsigned)(x % N);
		if (!live[i]) {
			assert_int_equal(gs_memq_reserve(q, i + 1), 0);
			assert_int_equal(gs_memq_track(q, ptrs[i], i + 1), 0);
			sum += i + 1;
		} else {
			assert_int_equal(gs_memq_untrack(q, ptrs[i]), i + 1);
			sum -= i + 1;
		}
		live[i] = !live[i];
	}
	assert_int_equal(gs_memq_used(q), sum);
	for (i = 0, k = 0; i < N; i++)
		k += (unsigned)live[i];
	assert_int_equal(gs_memq_count(q), k);
	for (i = 0; i < N; i++)
		assert_int_equal(gs_memq_untrack(q, ptrs[i]),
				 live[i] ? i + 1 : 0);
	assert_int_equal(gs_memq_used(q), 0);
	assert_int_equal(gs_memq_count(q), 0);
	gs_memq_free(q);
}

/* 8 threads, each allocating sizes of 1..64 MiB up to its own 64 live
 * blocks and freeing them in turn, against a 1 GiB limit they together
 * want about 8 x 64 x 32 MiB = 16 GiB of: many refusals, the sum never
 * above the limit (the peak proves it), everything given back. */
#define NT 8
#define ROUNDS 20000

struct worker {
	struct gs_memq *q;
	unsigned id;
	uint64_t refused, ok;
	volatile struct gs_mempage *shared;	/* sampled, NULL: none */
	uint64_t seen_max;	/* most the shared counter held */
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t live[64], size[64], x = 0x9e3779b97f4a7c15ull * (w->id + 1);
	unsigned n = 0, r;

	for (r = 0; r < ROUNDS; r++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (n < 64 && (x & 1)) {
			uint64_t sz = ((x >> 8) % 64 + 1) * MIB;
			uint64_t p = ((uint64_t)w->id << 40) |
				     ((uint64_t)r << 12);

			if (gs_memq_reserve(w->q, sz) < 0) {
				w->refused++;
				continue;
			}
			if (w->shared != NULL) {
				uint64_t u = __atomic_load_n(&w->shared->used,
							     __ATOMIC_ACQUIRE);

				if (u > w->seen_max)
					w->seen_max = u;
			}
			if (gs_memq_track(w->q, p, sz) < 0)
				abort();
			live[n] = p;
			size[n] = sz;
			n++;
			w->ok++;
		} else if (n > 0) {
			n--;
			if (gs_memq_untrack(w->q, live[n]) != size[n])
				abort();
		}
	}
	while (n > 0) {
		n--;
		if (gs_memq_untrack(w->q, live[n]) != size[n])
			abort();
	}
	return NULL;
}

static void start_worker(pthread_t *t, struct worker *w, unsigned id,
			 struct gs_memq *q, volatile struct gs_mempage *shared)
{
	w->q = q;
	w->id = id;
	w->refused = w->ok = 0;
	w->shared = shared;
	w->seen_max = 0;
	assert_int_equal(pthread_create(t, NULL, work, w), 0);
}

static void test_threads(void **state)
{
	static struct gs_ctlpage page;
	struct worker w[NT];
	pthread_t t[NT];
	struct gs_memq *q;
	uint64_t refused = 0, ok = 0;
	unsigned i;

	(void)state;
	memset(&page, 0, sizeof(page));
	q = mk(GIB, &page);
	for (i = 0; i < NT; i++)
		start_worker(&t[i], &w[i], i + 1, q, NULL);
	for (i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		refused += w[i].refused;
		ok += w[i].ok;
	}
	assert_true(refused > 0);
	assert_true(ok > 1000);
	assert_true(gs_memq_peak(q) <= GIB);
	assert_true(gs_memq_peak(q) > GIB / 2);
	assert_int_equal(gs_memq_used(q), 0);
	assert_int_equal(gs_memq_count(q), 0);
	assert_int_equal(page.mem_used, 0);
	assert_true(page.mem_peak <= GIB);
	gs_memq_free(q);
}

/* Several processes of one allocation: each its own ledger and page,
 * one shared counter. */
static void test_shared(void **state)
{
	static struct gs_mempage mp;
	static struct gs_ctlpage pg[2];
	struct gs_memq *a, *b;
	uint64_t f, t;

	(void)state;
	memset(&mp, 0, sizeof(mp));
	memset(pg, 0, sizeof(pg));
	a = mk(GIB, &pg[0]);
	b = mk(GIB, &pg[1]);
	gs_memq_share(a, &mp);
	gs_memq_share(b, &mp);
	assert_int_equal(gs_memq_reserve(a, 700 * MIB), 0);
	assert_int_equal(gs_memq_track(a, 0xa000, 700 * MIB), 0);
	/* b alone would fit 400 MiB; the allocation has 324 MiB left */
	assert_int_equal(gs_memq_reserve(b, 400 * MIB), -1);
	assert_int_equal(gs_memq_used(b), 0);
	assert_int_equal(pg[1].mem_used, 0);	/* the refusal took nothing */
	assert_int_equal(gs_memq_reserve(b, 324 * MIB), 0);
	assert_int_equal(gs_memq_track(b, 0xb000, 324 * MIB), 0);
	assert_int_equal(mp.used, GIB);
	assert_int_equal(gs_memq_alloc_used(a), GIB);
	assert_int_equal(gs_memq_used(a), 700 * MIB);
	assert_int_equal(pg[0].mem_used, 700 * MIB);
	assert_int_equal(pg[1].mem_used, 324 * MIB);
	assert_int_equal(gs_memq_reserve(a, 1), -1);
	assert_false(gs_memq_over(a));
	/* the view is the allocation's */
	gs_memq_view(b, 80 * GIB, 80 * GIB, &f, &t);
	assert_int_equal(t, GIB);
	assert_int_equal(f, 0);
	/* a pool's growth passes the limit: over, for every process */
	gs_memq_force(b, MIB);
	assert_true(gs_memq_over(a));
	gs_memq_unreserve(b, MIB);
	assert_false(gs_memq_over(a));
	/* a give-back of more than b holds takes nothing of a's share */
	gs_memq_unreserve(b, 900 * MIB);
	assert_int_equal(mp.used, 700 * MIB);
	assert_int_equal(pg[1].mem_used, 0);
	/* a dies: the agent takes its page figure out of the counter and
	 * zeroes the page; b may now take the whole limit */
	{
		uint64_t u = __atomic_load_n(&pg[0].mem_used,
					     __ATOMIC_ACQUIRE);

		__atomic_fetch_sub(&mp.used, u, __ATOMIC_ACQ_REL);
		pg[0].mem_used = 0;
	}
	assert_int_equal(mp.used, 0);
	assert_int_equal(gs_memq_reserve(b, GIB), 0);
	assert_int_equal(gs_memq_reserve(b, 1), -1);
	gs_memq_unreserve(b, GIB);
	assert_int_equal(mp.used, 0);
	gs_memq_free(a);
	gs_memq_free(b);
}

/* 4 processes x 2 threads on one counter: never above the limit
 * together, though each alone could take all of it. */
static void test_shared_threads(void **state)
{
	enum { NQ = 4 };
	static struct gs_mempage mp;
	static struct gs_ctlpage pg[NQ];
	struct gs_memq *q[NQ];
	struct worker w[NT];
	pthread_t t[NT];
	uint64_t refused = 0, ok = 0, seen = 0, peaks = 0;
	unsigned i;

	(void)state;
	memset(&mp, 0, sizeof(mp));
	memset(pg, 0, sizeof(pg));
	for (i = 0; i < NQ; i++) {
		q[i] = mk(GIB, &pg[i]);
		gs_memq_share(q[i], &mp);
	}
	for (i = 0; i < NT; i++)
		start_worker(&t[i], &w[i], i + 1, q[i % NQ], &mp);
	for (i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		refused += w[i].refused;
		ok += w[i].ok;
		if (w[i].seen_max > seen)
			seen = w[i].seen_max;
	}
	assert_true(refused > 0);
	assert_true(ok > 1000);
	assert_true(seen <= GIB);
	assert_true(seen > GIB / 2);
	for (i = 0; i < NQ; i++) {
		/* each process's own peak fits; together they were held to
		 * the one limit, so their peaks stay below NQ x the limit */
		assert_true(gs_memq_peak(q[i]) <= GIB);
		peaks += gs_memq_peak(q[i]);
		assert_int_equal(gs_memq_used(q[i]), 0);
		assert_int_equal(pg[i].mem_used, 0);
		gs_memq_free(q[i]);
	}
	assert_true(peaks > 0);
	assert_int_equal(mp.used, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arith),
		cmocka_unit_test(test_force),
		cmocka_unit_test(test_view),
		cmocka_unit_test(test_page),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_shared),
		cmocka_unit_test(test_shared_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
