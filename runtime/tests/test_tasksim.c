/*
 * test_tasksim.c — narrow tasks on the simulated MasterKernel
 * (runtime/sim/tasksim.c) under forced suspensions: tasks of 32-512
 * threads and 0-24 KiB of shared memory, spawned into a table that fills
 * and wraps, run through token holds that a suspend ends at a random tick
 * (or at once); every task runs exactly once, waits for one task, a group
 * and everything return only when those tasks ran, and the pool's books
 * (retirement, group counts) agree with what ran after every hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gs_error.h"
#include "tasksim.h"

#define MAX_HOLDS 200000	/* a wait that takes more is stuck */
#define MAX_TICKS 1000000	/* a launch that takes more is stuck */

struct run {
	struct gs_tsim *s;
	uint64_t rng;
	uint64_t susp_min, susp_max;	/* forced suspend tick range */
	unsigned int zero_every;	/* every n-th hold: suspend at 0 */
	uint64_t holds;
};

static uint64_t
rnd(struct run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

static void
audit(struct gs_tsim *s)
{
	struct gs_error err;

	gs_error_clear(&err);
	if (gs_tsim_audit(s, &err) < 0)
		fail_msg("audit: %s", err.msg);
}

/* One token hold with the suspend flag raised from tick `at` on
 * (UINT64_MAX: never); returns the launch's ticks (0: none). */
static uint64_t
hold_at(struct gs_tsim *s, uint64_t at, int *done)
{
	uint64_t k = 0;

	*done = 1;
	if (gs_tsim_hold_begin(s))
		return 0;
	/* a launch that never leaves would hang the GPU */
	while (!gs_tsim_hold_step(s, k >= at))
		assert_true(++k < MAX_TICKS);
	return gs_tsim_hold_end(s, done, NULL);
}

/* One token hold ended by a forced suspension, then the books. */
static void
hold(struct run *r)
{
	uint64_t at;
	int done;

	r->holds++;
	if (r->zero_every && r->holds % r->zero_every == 0)
		at = 0;
	else if (r->susp_max == 0)
		at = UINT64_MAX;
	else
		at = r->susp_min + rnd(r) % (r->susp_max - r->susp_min + 1);
	hold_at(r->s, at, &done);
	audit(r->s);
}

/* gs_task.c's wait_for in queued mode: holds until the pool is empty,
 * then the condition must hold. */
enum { W_ONE, W_GROUP, W_ALL };
static void
wait_for(struct run *r, int kind, uint64_t arg)
{
	uint64_t n = 0;

	while (gs_tsim_pending(r->s) > 0) {
		assert_true(++n < MAX_HOLDS);
		hold(r);
	}
	if (kind == W_ONE)
		assert_true(gs_tsim_is_done(r->s, arg));
	else if (kind == W_GROUP)
		assert_int_equal(gs_tsim_group_pending(r->s,
						       (unsigned int)arg), 0);
}

static void
spawn(struct run *r, unsigned int threads, unsigned int shmem,
      unsigned int ticks, unsigned int group, uint64_t *id)
{
	struct gs_error err;
	uint64_t n = 0;
	int rc;

	gs_error_clear(&err);
	while ((rc = gs_tsim_spawn(r->s, threads, shmem, ticks, group, id,
				   &err)) == 1) {
		/* table full: wait for the oldest task */
		assert_true(++n < 4);
		wait_for(r, W_ONE, gs_tsim_oldest(r->s));
	}
	if (rc != 0)
		fail_msg("spawn: %s", err.msg);
}

/* Mixed sizes: mostly narrow (1-4 warps), some up to 16 warps; a third
 * ask for up to 24 KiB of shared memory. */
static void
mixed(struct run *r, unsigned int *threads, unsigned int *shmem,
      unsigned int *ticks)
{
	uint64_t x = rnd(r);

	*threads = 32u * (x % 4 == 0 ? 1u + (unsigned int)(x >> 8) % 16u :
			  1u + (unsigned int)(x >> 8) % 4u);
	*shmem = (x >> 16) % 3 == 0 ? (unsigned int)(x >> 20) % 24577u : 0;
	*ticks = 1u + (unsigned int)(x >> 40) % 40u;
}

static void
run_pool(struct run *r, uint64_t ntasks, unsigned int batch,
	 unsigned int groups)
{
	uint64_t *ids, i, j;
	unsigned int *grp;

	ids = calloc(ntasks, sizeof(*ids));
	grp = calloc(ntasks, sizeof(*grp));
	assert_non_null(ids);
	assert_non_null(grp);
	for (i = 0; i < ntasks; i++) {
		unsigned int th, sh, tk;

		mixed(r, &th, &sh, &tk);
		grp[i] = (unsigned int)(i % groups) * 97u;
		spawn(r, th, sh, tk, grp[i], &ids[i]);
		assert_int_equal(ids[i], i);
		if ((i + 1) % batch != 0)
			continue;
		/* every other batch: wait for one task, else a group */
		if ((i / batch) % 2 == 0) {
			uint64_t one = i - rnd(r) % batch;

			wait_for(r, W_ONE, one);
			assert_int_equal(gs_tsim_runs(r->s, one), 1);
		} else {
			unsigned int g = grp[i - rnd(r) % batch];

			wait_for(r, W_GROUP, g);
			for (j = 0; j <= i; j++)
				if (grp[j] == g)
					assert_int_equal(
					    gs_tsim_runs(r->s, j), 1);
		}
	}
	wait_for(r, W_ALL, 0);
	assert_int_equal(gs_tsim_pending(r->s), 0);
	for (i = 0; i < ntasks; i++)
		assert_int_equal(gs_tsim_runs(r->s, i), 1);
	for (i = 0; i < groups; i++)
		assert_int_equal(gs_tsim_group_pending(r->s,
				 (unsigned int)i * 97u), 0);
	audit(r->s);
	free(ids);
	free(grp);
}

static struct gs_tsim *
pool(unsigned int blocks, unsigned int cap, unsigned int pool_bytes,
     uint64_t max, uint64_t seed)
{
	struct gs_tsim_cfg cfg = { blocks, cap, pool_bytes, max, seed };
	struct gs_tsim *s = NULL;
	struct gs_error err;

	gs_error_clear(&err);
	if (gs_tsim_new(&cfg, &s, &err) < 0)
		fail_msg("gs_tsim_new: %s", err.msg);
	return s;
}

/* 30,000 mixed tasks through a 1024-entry table (it fills and wraps),
 * each hold suspended after 1-200 ticks, every 7th at once. */
static void
test_forced_suspensions(void **state)
{
	struct run r = { 0 };
	const struct gs_tsim_stats *st;

	(void)state;
	r.s = pool(4, 1024, 96u << 10, 30000, 0x9e3779b97f4a7c15ull);
	r.rng = 88172645463325252ull;
	r.susp_min = 1;
	r.susp_max = 200;
	r.zero_every = 7;
	run_pool(&r, 30000, 1500, 5);
	st = gs_tsim_stats(r.s);
	print_message("spawned %llu completed %llu launches %llu "
		      "suspensions %llu requeued %llu races %llu ticks %llu\n",
		      (unsigned long long)st->spawned,
		      (unsigned long long)st->completed,
		      (unsigned long long)st->launches,
		      (unsigned long long)st->suspensions,
		      (unsigned long long)st->requeued,
		      (unsigned long long)st->races,
		      (unsigned long long)st->ticks);
	assert_int_equal(st->spawned, 30000);
	assert_int_equal(st->completed, 30000);
	assert_int_equal(st->errors, 0);
	/* the paths this test is for were taken */
	assert_true(st->suspensions > 100);
	assert_true(st->requeued > 100);
	assert_true(st->races > 0);
	gs_tsim_free(r.s);
}

/* Without suspensions one hold drains the pool; with a stale head never
 * played the race counter stays 0. */
static void
test_no_suspensions(void **state)
{
	struct run r = { 0 };
	const struct gs_tsim_stats *st;

	(void)state;
	r.s = pool(2, 8192, 48u << 10, 5000, 0);
	r.rng = 1234567;
	run_pool(&r, 5000, 5000, 3);
	st = gs_tsim_stats(r.s);
	assert_int_equal(st->launches, 1);
	assert_int_equal(st->suspensions, 0);
	assert_int_equal(st->races, 0);
	gs_tsim_free(r.s);
}

/* Short holds (1-3 ticks) on one block: tasks of 512 threads with the
 * whole pool's shared memory run one at a time and outlive many holds;
 * a suspend makes the launch wait for them. */
static void
test_wide_tasks_short_holds(void **state)
{
	struct run r = { 0 };
	uint64_t id, i;

	(void)state;
	r.s = pool(1, 1024, 8192, 300, 42);
	r.rng = 99;
	r.susp_min = 1;
	r.susp_max = 3;
	for (i = 0; i < 100; i++) {
		spawn(&r, 512, 8192, 5, 1, &id);
		spawn(&r, 32, 0, 1, 2, &id);
		spawn(&r, 256, 4096, 2, 3, &id);
	}
	wait_for(&r, W_GROUP, 2);
	wait_for(&r, W_ALL, 0);
	for (i = 0; i < 300; i++)
		assert_int_equal(gs_tsim_runs(r.s, i), 1);
	assert_true(gs_tsim_stats(r.s)->suspensions > 10);
	assert_int_equal(gs_tsim_stats(r.s)->errors, 0);
	gs_tsim_free(r.s);
}

/* A suspend before the first round: nothing starts, nothing is lost. */
static void
test_suspend_at_once(void **state)
{
	struct gs_tsim *s = pool(3, 1024, 96u << 10, 100, 7);
	struct gs_error err;
	uint64_t id, i, k;
	int done;

	(void)state;
	gs_error_clear(&err);
	for (i = 0; i < 100; i++)
		assert_int_equal(gs_tsim_spawn(s, 64, 512, 3, 0, &id, &err),
				 0);
	for (k = 0; k < 5; k++) {
		(void)hold_at(s, 0, &done);
		assert_false(done);
		audit(s);
	}
	for (i = 0; i < 100; i++)
		assert_int_equal(gs_tsim_runs(s, i), 0);
	for (k = 0; k < 5 && !done; k++)
		(void)hold_at(s, 20, &done);
	while (!done)
		(void)hold_at(s, UINT64_MAX, &done);
	for (i = 0; i < 100; i++)
		assert_int_equal(gs_tsim_runs(s, i), 1);
	audit(s);
	/* an empty pool launches nothing */
	k = gs_tsim_stats(s)->launches;
	assert_int_equal(hold_at(s, UINT64_MAX, &done), 0);
	assert_true(done);
	assert_int_equal(gs_tsim_stats(s)->launches, k);
	gs_tsim_free(s);
}

/* Spawns are refused as gs_task_spawn refuses them. */
static void
test_bad_spawns(void **state)
{
	struct gs_tsim *s = pool(1, 1024, 4096, 2, 0);
	struct gs_error err;
	struct gs_tsim_cfg bad = { 0, 1024, 4096, 10, 0 };
	struct gs_tsim *t = NULL;
	uint64_t id;

	(void)state;
	gs_error_clear(&err);
	assert_int_equal(gs_tsim_spawn(s, 48, 0, 1, 0, &id, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_int_equal(gs_tsim_spawn(s, 32, 4097, 1, 0, &id, &err), -1);
	assert_int_equal(gs_tsim_spawn(s, 32, 0, 0, 0, &id, &err), -1);
	assert_int_equal(gs_tsim_spawn(s, 32, 0, 1, 4096, &id, &err), -1);
	assert_int_equal(gs_tsim_spawn(s, 32, 0, 1, 0, &id, &err), 0);
	assert_int_equal(gs_tsim_spawn(s, 32, 0, 1, 0, &id, &err), 0);
	assert_int_equal(gs_tsim_spawn(s, 32, 0, 1, 0, &id, &err), -1);
	assert_int_equal(gs_tsim_new(&bad, &t, &err), -1);
	bad.blocks = 1;
	bad.pool_bytes = 100;
	assert_int_equal(gs_tsim_new(&bad, &t, &err), -1);
	assert_null(t);
	gs_tsim_free(s);
	gs_tsim_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forced_suspensions),
		cmocka_unit_test(test_no_suspensions),
		cmocka_unit_test(test_wide_tasks_short_holds),
		cmocka_unit_test(test_suspend_at_once),
		cmocka_unit_test(test_bad_spawns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
