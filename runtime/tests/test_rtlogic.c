/*
 * test_rtlogic.c — unit tests of libgshare's pure host logic: grid and
 * batch sizing, redo-ring capacity, span union (GPU-time accounting), the
 * spin-then-backoff wait, GSHARE_* parsing and the per-stream queues that
 * keep kernel order across suspensions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gs_rtlogic.h"

static void
test_nphys(void **state)
{
	(void)state;
	assert_int_equal(gs__nphys(8, 132, 1000000), 1056);
	assert_int_equal(gs__nphys(8, 132, 100), 100);
	assert_int_equal(gs__nphys(0, 132, 100), 0);
	assert_int_equal(gs__nphys(8, 132, 0), 0);
}

static void
test_batch(void **state)
{
	(void)state;
	assert_int_equal(gs__batch(100, 1056, 0), 1);
	assert_int_equal(gs__batch(262144, 1056, 0), 15);
	assert_int_equal(gs__batch(1u << 30, 1056, 0), 16);
	assert_int_equal(gs__batch(1u << 30, 1056, 5), 5);
	assert_int_equal(gs__batch(1u << 30, 1056, 1000), GS__MAX_BATCH);
	assert_int_equal(gs__batch(10, 0, 0), 1);
	/* adaptation from measured task time */
	/* up to GS__BATCH_SPAN_NS (256 us) of tasks a batch */
	assert_int_equal(gs__batch_adapt(1, 500, 1u << 30, 1056, 0), 16);
	assert_int_equal(gs__batch_adapt(4, 4000, 1u << 30, 1056, 0), 16);
	assert_int_equal(gs__batch_adapt(1, 16000, 1u << 30, 1056, 0), 16);
	assert_int_equal(gs__batch_adapt(16, 20000, 1u << 30, 1056, 0), 12);
	assert_int_equal(gs__batch_adapt(16, 100000, 1u << 30, 1056, 0), 2);
	assert_int_equal(gs__batch_adapt(16, 160000, 1u << 30, 1056, 0), 1);
	assert_int_equal(gs__batch_adapt(16, 5000000, 1u << 30, 1056, 0), 1);
	/* never more than gs__batch's size (a few claims a block) */
	assert_int_equal(gs__batch_adapt(16, 500, 1056 * 64, 1056, 0), 4);
	assert_int_equal(gs__batch_adapt(16, 500, 100, 1056, 0), 1);
	assert_int_equal(gs__batch_adapt(7, 0, 1u << 30, 1056, 0), 7);
	assert_int_equal(gs__batch_adapt(7, 20000, 1u << 30, 1056, 3), 3);
}

static void
test_redo_cap(void **state)
{
	(void)state;
	/* two batches per block plus room for takers in flight (up to
	 * GS__REDO_TAKE entries each, and one) */
	assert_int_equal(GS__REDO_TAKE, 8);
	assert_int_equal(gs__redo_cap(1056, 16, 1u << 30, 0),
			 1056 * 32 + 9 * 1056 + 64);
	/* never more pending than logical blocks */
	assert_int_equal(gs__redo_cap(1056, 16, 500, 0), 500 + 9 * 1056 + 64);
	/* I/O: every logical block may be waiting */
	assert_int_equal(gs__redo_cap(64, 16, 100000, 1),
			 100000 + 9 * 64 + 64);
}

static void
test_span_union(void **state)
{
	struct gs__span v[5] = {
		{ 100, 200 }, { 150, 300 }, { 400, 500 }, { 50, 60 },
		{ 700, 650 },	/* empty */
	};
	struct gs__span one[1] = { { 10, 20 } };

	(void)state;
	assert_int_equal(gs__span_union(v, 5), 10 + 200 + 100);
	assert_int_equal(gs__span_union(one, 1), 10);
	assert_int_equal(gs__span_union(NULL, 0), 0);
}

static void
test_wait_policy(void **state)
{
	struct gs__waitpol p = { 1000, 100, 800 };
	uint64_t cur = 0;

	(void)state;
	assert_int_equal(gs__wait_step(&p, 10, 0, &cur), 0);	/* spin */
	assert_int_equal(gs__wait_step(&p, 2000, 0, &cur), 100);
	assert_int_equal(gs__wait_step(&p, 2100, 0, &cur), 200);
	assert_int_equal(gs__wait_step(&p, 2300, 0, &cur), 400);
	assert_int_equal(gs__wait_step(&p, 2700, 0, &cur), 800);
	assert_int_equal(gs__wait_step(&p, 3500, 0, &cur), 800);
	/* a pending suspend: spin at once, start over afterwards */
	assert_int_equal(gs__wait_step(&p, 4300, 1, &cur), 0);
	assert_int_equal(gs__wait_step(&p, 4400, 0, &cur), 100);
}

static const char *env_tab[16];

static const char *
fake_get(const char *name)
{
	int i;

	for (i = 0; env_tab[i] != NULL; i += 2)
		if (strcmp(env_tab[i], name) == 0)
			return env_tab[i + 1];
	return NULL;
}

static void
set_env(const char *k1, const char *v1, const char *k2, const char *v2)
{
	memset(env_tab, 0, sizeof(env_tab));
	env_tab[0] = k1;
	env_tab[1] = v1;
	env_tab[2] = k2;
	env_tab[3] = v2;
}

/* The early release's GPU time: tails carried to the next release, an
 * over-count taken off it, never a negative report, nothing lost. */
static void
test_carry(void **state)
{
	int64_t c = 0;
	uint64_t sum = 0, used = 0;

	(void)state;
	assert_int_equal(gs__carry_add(&c, 1000), 1000);
	assert_int_equal(c, 0);
	/* hold 1: released at 1000 ns, its blocks then used 1040 */
	sum += gs__carry_add(&c, 1000);
	used += 1040;
	c += 1040 - 1000;
	/* hold 2: released at 500, the round had waited: used 380 */
	sum += gs__carry_add(&c, 500);
	used += 380;
	c += 380 - 500;
	assert_int_equal(c, -120);
	/* hold 3 smaller than the debt: reports 0, the rest stays owed */
	assert_int_equal(gs__carry_add(&c, 100), 0);
	used += 100;
	assert_int_equal(c, -20);
	/* hold 4, drained: reports its time less what is still owed */
	sum += gs__carry_add(&c, 2000);
	used += 2000;
	assert_int_equal(c, 0);
	assert_int_equal(sum, used);
}

/* Direct chunks: whole waves of about the target's work, the rest when
 * under half a wave would stay, none for unknown or long tasks. */
static void
test_direct_chunk(void **state)
{
	uint64_t est;
	unsigned int tries, i, n;

	(void)state;
	/* 1 us blocks on 1056 slots, 500 us: 500 waves, more than left */
	assert_int_equal(gs__direct_chunk(1056, 1000, 500000, 0, 262144),
			 262144);
	/* 10 us blocks: 50 waves of 1056 */
	assert_int_equal(gs__direct_chunk(1056, 10000, 500000, 0, 262144),
			 52800);
	/* under half a wave would stay behind: take it all */
	assert_int_equal(gs__direct_chunk(1056, 10000, 500000, 0, 52800 + 500),
			 53300);
	assert_int_equal(gs__direct_chunk(1056, 10000, 500000, 0, 52800 + 600),
			 52800);
	/* the limit: a quarter of the target per block */
	assert_int_equal(gs__direct_chunk(100, 125000, 500000, 0, 1000), 400);
	assert_int_equal(gs__direct_chunk(100, 125001, 500000, 0, 1000), 0);
	/* longer blocks up to long_ns (half the slice): whole waves of up
	 * to long_ns, one at least */
	assert_int_equal(gs__direct_chunk(528, 700000, 500000, 2000000, 4096),
			 1056);
	assert_int_equal(gs__direct_chunk(528, 1000001, 500000, 2000000,
					  4096), 528);
	assert_int_equal(gs__direct_chunk(528, 700000, 500000, 2000000, 700),
			 700);
	assert_int_equal(gs__direct_chunk(528, 2000000, 500000, 2000000, 4096),
			 528);
	assert_int_equal(gs__direct_chunk(528, 2000001, 500000, 2000000, 4096),
			 0);
	assert_int_equal(gs__direct_chunk(100, 300000, 500000, 2000000, 1000),
			 600);
	/* contended at 4 ms slices (250 us, a quarter of the slice): the
	 * H200 eater's 867 us one-wave blocks, one wave a chunk; blocks
	 * over a quarter of the slice stay in the loop */
	assert_int_equal(gs__direct_chunk(1056, 867000, 250000, 1000000,
					  16896), 1056);
	assert_int_equal(gs__direct_chunk(1056, 1000001, 250000, 1000000,
					  16896), 0);
	/* space mode caps long_ns at 1 ms */
	assert_int_equal(gs__direct_chunk(100, 300000, 500000, 1000000, 1000),
			 300);
	/* unknown task time, nothing left, no slots */
	assert_int_equal(gs__direct_chunk(100, 0, 500000, 0, 1000), 0);
	assert_int_equal(gs__direct_chunk(100, 1000, 500000, 0, 0), 0);
	assert_int_equal(gs__direct_chunk(0, 1000, 500000, 0, 1000), 0);
	/* fewer blocks than a wave */
	assert_int_equal(gs__direct_chunk(1056, 1000, 500000, 0, 7), 7);

	/* launch grids: the whole grid, whole rows, else 1D */
	{
		struct gs_dim3 g2 = { 512, 512, 1 }, g3 = { 8, 8, 4 };
		struct gs_dim3 g1 = { 262144, 1, 1 }, o;
		unsigned int rows = 9, y0 = 9;

		gs__direct_grid(&g2, 0, 262144, &o, &rows, &y0);
		assert_true(o.x == 512 && o.y == 512 && o.z == 1 && rows == 1 &&
			    y0 == 0);
		gs__direct_grid(&g2, 1024, 2048, &o, &rows, &y0);
		assert_true(o.x == 512 && o.y == 4 && rows == 1 && y0 == 2);
		gs__direct_grid(&g2, 1000, 2048, &o, &rows, &y0);
		assert_true(o.x == 2048 && o.y == 1 && rows == 0);
		gs__direct_grid(&g3, 0, 256, &o, &rows, &y0);
		assert_true(o.x == 8 && o.y == 8 && o.z == 4 && rows == 1);
		gs__direct_grid(&g3, 64, 64, &o, &rows, &y0);
		assert_true(o.x == 64 && o.y == 1 && o.z == 1 && rows == 0);
		gs__direct_grid(&g1, 5000, 100, &o, &rows, &y0);
		assert_true(o.x == 100 && o.y == 1 && rows == 2);
		gs__direct_grid(&g1, 0, 262144, &o, &rows, &y0);
		assert_true(o.x == 262144 && o.y == 1 && o.z == 1 &&
			    rows == 2 && y0 == 0);
		/* chunks of whole rows where that is possible */
		assert_int_equal(gs__direct_rows(&g2, 0, 52800), 52736);
		assert_int_equal(gs__direct_rows(&g2, 1024, 300), 300);
		assert_int_equal(gs__direct_rows(&g2, 1000, 52800), 52800);
		assert_int_equal(gs__direct_rows(&g2, 261632, 512), 512);
		assert_int_equal(gs__direct_rows(&g3, 0, 100), 100);
		assert_int_equal(gs__direct_rows(&g1, 0, 100), 100);
	}

	/* direct or persistent: try direct, then the loop once, then the
	 * faster, direct within 5 % */
	tries = 0;
	assert_true(gs__direct_pick(0, 0, &tries));
	assert_true(gs__direct_pick(0, 5000, &tries));
	assert_false(gs__direct_pick(5000, 0, &tries));
	assert_true(gs__direct_pick(5000, 6000, &tries));
	assert_true(gs__direct_pick(5200, 5000, &tries));
	assert_int_equal(tries, 0);
	assert_false(gs__direct_pick(6000, 5000, &tries));
	assert_false(gs__direct_pick(7300, 4700, &tries));
	/* the loop picked: every GS__PICK_RETRY-th launch tries direct */
	tries = 0;
	for (i = 1, n = 0; i <= 4 * GS__PICK_RETRY; i++)
		n += gs__direct_pick(7300, 4700, &tries);
	assert_int_equal(n, 4);
	assert_true(gs__direct_pick(7300, 4700, &tries) == 0);
	/* long blocks: direct, however high their direct figure */
	assert_true(gs__direct_pick(1113120, 867488, &tries));
	assert_true(gs__direct_pick(5 * GS__PICK_LONG_NS, GS__PICK_LONG_NS,
				    &tries));
	assert_false(gs__direct_pick(150000, GS__PICK_LONG_NS - 1000u,
				     &tries));

	/* a block's time on one slot: 1000 blocks in 1 ms on 100 slots */
	est = gs__task_est(0, 1000000, 1000, 100, 0, 0);
	assert_true(est == 100000);
	/* smoothed: half the old, half the new */
	assert_true(gs__task_est(est, 500000, 1000, 100, 0, 0) == 75000);
	assert_true(gs__task_est(est, 3000000, 1000, 100, 0, 0) == 200000);
	/* contended: a first estimate, or a lower one; never a higher */
	assert_true(gs__task_est(0, 3000000, 1000, 100, 1, 0) == 300000);
	assert_true(gs__task_est(est, 3000000, 1000, 100, 1, 0) == est);
	assert_true(gs__task_est(est, 500000, 1000, 100, 1, 0) == 75000);
	/* fewer blocks than slots: they all ran at once */
	assert_true(gs__task_est(0, 3000, 10, 1056, 0, 0) == 3000);
	/* nothing measured: the old estimate stays */
	assert_true(gs__task_est(est, 0, 1000, 100, 0, 0) == est);
	assert_true(gs__task_est(est, 1000, 0, 100, 0, 0) == est);
	/* a run whose blocks went on from an earlier run or yielded: the
	 * pieces are not blocks (the eater's 867 us blocks read 19 us), the
	 * estimate stays, contended or not, and none is made from it */
	assert_true(gs__task_est(est, 20000, 1000, 100, 0, 1) == est);
	assert_true(gs__task_est(est, 20000, 1000, 100, 1, 1) == est);
	assert_true(gs__task_est(0, 20000, 1000, 100, 0, 1) == 0);
	/* no overflow with long spans and many slots */
	assert_true(gs__task_est(0, UINT64_MAX / 2, 3, 2, 0, 0) ==
		    UINT64_MAX / 2 / 3 * 2 + UINT64_MAX / 2 % 3 * 2 / 3);
}

/* name=value alone is refused, and the message names `what` */
static void
expect_reject(const char *name, const char *value, const char *what)
{
	struct gs__config c;
	struct gs_error err;

	set_env(name, value, NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
	assert_non_null(strstr(err.msg, what));
}

/* gs__direct_bounds for a slice, contended and overlap: target and long */
static void
expect_bounds(const struct gs__config *c, uint64_t slice_ns, int contended,
	      int overlap, uint64_t target_ns, uint64_t long_ns)
{
	uint64_t t, l;

	gs__direct_bounds(c, slice_ns, contended, overlap, &t, &l);
	assert_true(t == target_ns);
	assert_true(l == long_ns);
}

static void
test_config(void **state)
{
	struct gs__config c;
	struct gs_error err;

	(void)state;
	set_env(NULL, NULL, NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.batch, 0);
	assert_int_equal(c.watch_ns, 0);
	assert_int_equal(c.spin_ns, 200000);
	assert_int_equal(c.watcher, GS__WATCH_HOST);
	assert_int_equal(c.sentinels, GS__SENTINELS_DEFAULT);
	assert_int_equal(c.release_early, 1);
	assert_true(c.early_max_ns == 3000000);
	/* early only once the job's evictions are known to be short */
	assert_false(gs__early_ok(&c, 0));
	assert_true(gs__early_ok(&c, 40000));
	assert_true(gs__early_ok(&c, 3000000));
	assert_false(gs__early_ok(&c, 3000001));
	/* and not before the eviction is expected to end within the
	 * lead: the next holder's start meets our tail's end */
	assert_true(c.lead_ns == GS__LEAD_US_DEFAULT * 1000u);
	assert_true(gs__early_due(&c, 100000, 0));
	assert_true(gs__early_due(&c, c.lead_ns, 0));
	assert_false(gs__early_due(&c, c.lead_ns + 1, 0));
	assert_false(gs__early_due(&c, 1000000, 0));
	assert_false(gs__early_due(&c, 1000000, 1000000 - c.lead_ns - 1));
	assert_true(gs__early_due(&c, 1000000, 1000000 - c.lead_ns));
	assert_true(gs__early_due(&c, 1000000, 5000000));
	assert_false(gs__early_due(&c, 0, 5000000));
	assert_false(gs__early_due(&c, 3000001, 5000000));
	assert_int_equal(gs__evict_smooth(0, 40000), 40000);
	assert_int_equal(gs__evict_smooth(40000, 440000), 140000);
	assert_true(c.force_max_ns == 0);
	assert_int_equal(c.direct, GS__DIRECT_AUTO);
	assert_true(c.direct_ns == 500000);
	assert_true(c.slack_ns == 1000);
	assert_true(c.keep_ns == 10000000);
	assert_int_equal(c.evict_idle, 0);
	set_env("GSHARE_EVICT_END", "idle", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.evict_idle, 1);
	set_env("GSHARE_EVICT_END", "report", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.evict_idle, 0);
	expect_reject("GSHARE_EVICT_END", "drained", "report or idle");
	set_env("GSHARE_KEEP_US", "0", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.keep_ns == 0);
	expect_reject("GSHARE_KEEP_US", "2000000", "GSHARE_KEEP_US");
	expect_reject("GSHARE_KEEP_US", "-1", "GSHARE_KEEP_US");
	expect_reject("GSHARE_RESIZE_LOG", "2", "GSHARE_RESIZE_LOG");
	/* chained relaunches: queued while the round runs unless
	 * GSHARE_CHAIN says 1 (at the suspend) or 0 (after the report) */
	{
		static const struct {
			const char *v;
			int want;
		} ch[] = { { NULL, 2 }, { "0", 0 }, { "1", 1 }, { "2", 2 } };

		for (size_t i = 0; i < sizeof(ch) / sizeof(ch[0]); i++) {
			set_env(ch[i].v ? "GSHARE_CHAIN" : NULL, ch[i].v,
				NULL, NULL);
			assert_int_equal(gs__config_parse(&c, fake_get, &err),
					 0);
			assert_int_equal(c.chain, ch[i].want);
		}
	}
	expect_reject("GSHARE_CHAIN", "3", "GSHARE_CHAIN");
	expect_reject("GSHARE_CHAIN", "yes", "GSHARE_CHAIN");
	/* the wait's spin: none while an I/O kernel is queued, unless
	 * suspensions are forced */
	set_env(NULL, NULL, NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(gs__wait_spin_ns(&c, 0) == 200000);
	assert_true(gs__wait_spin_ns(&c, 1) == 0);
	set_env("GSHARE_SPIN_US", "50", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(gs__wait_spin_ns(&c, 0) == 50000);
	assert_true(gs__wait_spin_ns(&c, 1) == 0);
	set_env("GSHARE_FORCE_SUSPEND_US", "100:300", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(gs__wait_spin_ns(&c, 1) == 200000);
	assert_true(gs__wait_spin_ns(&c, 0) == 200000);
	set_env("GSHARE_TIMER_SLACK_NS", "0", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.slack_ns == 0);
	expect_reject("GSHARE_TIMER_SLACK_NS", "2000000",
		      "GSHARE_TIMER_SLACK_NS");
	set_env("GSHARE_DIRECT", "off", "GSHARE_DIRECT_US", "2000");
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.direct, GS__DIRECT_OFF);
	assert_true(c.direct_ns == 2000000);
	set_env("GSHARE_DIRECT", "alone", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.direct, GS__DIRECT_ALONE);
	expect_reject("GSHARE_DIRECT", "contended", "auto, off or alone");
	expect_reject("GSHARE_DIRECT", "on", "GSHARE_DIRECT='on'");
	expect_reject("GSHARE_DIRECT_US", "5", "GSHARE_DIRECT_US");
	{
		/* 4 ms slices, GSHARE_DIRECT_US at its 500 */
		expect_bounds(&c, 4000000, 0, 0, 500000, 2000000);
		expect_bounds(&c, 4000000, 1, 0, 250000, 250000);
		expect_bounds(&c, 4000000, 1, 1, 250000, 1000000);
		/* at least 1 ms, and a quarter of longer slices */
		expect_bounds(&c, 1000000, 1, 1, 250000, 1000000);
		expect_bounds(&c, 20000000, 1, 1, 250000, 5000000);
		set_env("GSHARE_DIRECT_LONG_US", "1200", NULL, NULL);
		assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
		assert_true(c.direct_long_ns == 1200000);
		expect_bounds(&c, 1000000, 1, 1, 250000, 1200000);
		/* only where the next holder can run beside */
		expect_bounds(&c, 1000000, 1, 0, 250000, 250000);
		expect_bounds(&c, 1000000, 0, 0, 500000, 500000);
		/* either figure: up to half again over the bound counts
		 * as the bound; the direct one before the loop's */
		assert_true(gs__chunk_task(0, 0, 1000000) == 0);
		assert_true(gs__chunk_task(0, 900000, 1000000) == 900000);
		assert_true(gs__chunk_task(0, 1400000, 1000000) == 1000000);
		assert_true(gs__chunk_task(0, 1500000, 1000000) == 1000000);
		assert_true(gs__chunk_task(0, 1500001, 1000000) == 1500001);
		assert_true(gs__chunk_task(1200000, 900000, 1000000) ==
			    1000000);
		assert_true(gs__chunk_task(800000, 1400000, 1000000) ==
			    800000);
		assert_true(gs__chunk_task(1600000, 900000, 1000000) ==
			    1000000);
		assert_true(gs__chunk_task(1600000, 1600000, 1000000) ==
			    1600000);
		assert_true(gs__chunk_task(1600000, 0, 1000000) == 1600000);
		/* no margin (space mode's bound) */
		assert_true(gs__chunk_task(1200000, 900000, 0) == 1200000);
		assert_true(gs__chunk_task(0, 900000, 0) == 900000);
		assert_true(gs__chunk_task(900, 400, 1000000) == 900);
		assert_true(gs__chunk_task(1600000, 300000, 1000000) ==
			    1000000);
		assert_true(gs__direct_chunk(132, gs__chunk_task(0, 1300000,
					     1000000), 250000, 1000000,
					     1000) == 132);
		assert_true(gs__direct_chunk(132, gs__chunk_task(1600000,
					     1600000, 1000000), 250000,
					     1000000, 1000) == 0);
		expect_reject("GSHARE_DIRECT_LONG_US", "100001",
			      "GSHARE_DIRECT_LONG_US");
		expect_reject("GSHARE_DIRECT_LONG_US", "-5",
			      "GSHARE_DIRECT_LONG_US");
	}
	set_env("GSHARE_EARLY_MAX_US", "100", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.early_max_ns == 100000 && !gs__early_ok(&c, 140000));
	expect_reject("GSHARE_EARLY_MAX_US", "0", "GSHARE_EARLY_MAX_US");
	/* a lead of 0: only once the estimate has passed; a lead as long
	 * as the eviction: at once, as soon as the flag is raised */
	set_env("GSHARE_RELEASE_LEAD_US", "0", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.lead_ns == 0);
	assert_false(gs__early_due(&c, 40000, 39999));
	assert_true(gs__early_due(&c, 40000, 40000));
	set_env("GSHARE_RELEASE_LEAD_US", "1000", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(gs__early_due(&c, 1000000, 0));
	expect_reject("GSHARE_RELEASE_LEAD_US", "100001",
		      "GSHARE_RELEASE_LEAD_US");
	expect_reject("GSHARE_RELEASE_LEAD_US", "-1", "GSHARE_RELEASE_LEAD_US");
	expect_reject("GSHARE_RELEASE_LEAD_US", "1ms", "GSHARE_RELEASE_LEAD_US");
	set_env("GSHARE_RELEASE", "drained", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.release_early, 0);
	assert_false(gs__early_ok(&c, 40000));
	expect_reject("GSHARE_RELEASE", "late", "GSHARE_RELEASE='late'");
	set_env("GSHARE_WATCHER", "always", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.watcher, GS__WATCH_ALWAYS);
	set_env("GSHARE_WATCHER", "auto", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.watcher, GS__WATCH_AUTO);
	expect_reject("GSHARE_WATCHER", "sometimes", "GSHARE_WATCHER");
	set_env("GSHARE_SENTINELS", "0", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.sentinels, 0);
	set_env("GSHARE_SENTINELS", "64", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_int_equal(c.sentinels, 64);
	expect_reject("GSHARE_SENTINELS", "65", "GSHARE_SENTINELS");
	expect_reject("GSHARE_SENTINELS", "-1", "GSHARE_SENTINELS");
	expect_reject("GSHARE_SENTINELS", "8x", "GSHARE_SENTINELS");

	set_env("GSHARE_FORCE_SUSPEND_US", "100:5000", "GSHARE_BATCH", "8");
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.force_min_ns == 100000 && c.force_max_ns == 5000000);
	assert_int_equal(c.batch, 8);

	set_env("GSHARE_FORCE_SUSPEND_US", "250", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), 0);
	assert_true(c.force_min_ns == 250000 && c.force_max_ns == 250000);

	set_env("GSHARE_FORCE_SUSPEND_US", "5000:100", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
	assert_int_equal(err.code, GS_ECONFIG);
	assert_non_null(strstr(err.msg, "GSHARE_FORCE_SUSPEND_US"));

	set_env("GSHARE_FORCE_SUSPEND_US", "0:10", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
	set_env("GSHARE_FORCE_SUSPEND_US", "x", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
	expect_reject("GSHARE_BATCH", "65", "GSHARE_BATCH");
	set_env("GSHARE_CHECK_ONCE", "-1", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
	set_env("GSHARE_WATCH_NS", "12abc", NULL, NULL);
	assert_int_equal(gs__config_parse(&c, fake_get, &err), -1);
}

/* gs_eviction_samples copies the most recent samples, not the oldest */
static void
test_ring_recent(void **state)
{
	(void)state;
	assert_int_equal(gs__ring_recent(0, 16, 8), 0);
	assert_int_equal(gs__ring_recent(5, 16, 8), 0);	/* all of them */
	assert_int_equal(gs__ring_recent(12, 16, 8), 4);	/* last 8 */
	assert_int_equal(gs__ring_recent(20, 16, 100), 4);	/* retained */
	assert_int_equal(gs__ring_recent(20, 16, 3), 17);
	assert_int_equal(gs__ring_recent(20, 16, 0), 20);
}

static void
test_rand(void **state)
{
	uint64_t s = 42, t = 42;
	int i;

	(void)state;
	for (i = 0; i < 1000; i++) {
		uint64_t v = gs__rand_range(&s, 100, 5000);
		assert_true(v >= 100 && v <= 5000);
	}
	/* deterministic for a seed */
	s = 7;
	t = 7;
	assert_true(gs__rand(&s) == gs__rand(&t));
	assert_true(gs__rand_range(&s, 9, 9) == 9);
}

struct item {
	struct gs__qnode node;
	int id;
};

static void
test_queues(void **state)
{
	struct gs__queues qs;
	struct item it[6];
	void *s1 = (void *)0x10, *s2 = (void *)0x20;
	struct gs__qnode *n;
	int i, want[] = { 0, 2, 4 }, k = 0;

	(void)state;
	gs__queues_init(&qs);
	for (i = 0; i < 6; i++) {
		it[i].id = i;
		assert_int_equal(gs__queues_push(&qs, i % 2 ? s2 : s1,
						 &it[i].node), 0);
	}
	assert_int_equal(gs__queues_total(&qs), 6);
	assert_int_equal(qs.n, 2);
	/* order within a stream is launch order */
	for (n = qs.q[0].head; n != NULL; n = n->next)
		assert_int_equal(((struct item *)n)->id, want[k++]);
	/* a finished kernel leaves from the middle; order of the rest
	 * holds */
	assert_int_equal(gs__queues_remove(&qs, s1, &it[2].node), 0);
	assert_int_equal(gs__queues_remove(&qs, s1, &it[2].node), -1);
	assert_int_equal(((struct item *)qs.q[0].head)->id, 0);
	assert_int_equal(((struct item *)qs.q[0].head->next)->id, 4);
	assert_int_equal(gs__queues_remove(&qs, s1, &it[4].node), 0);
	assert_true(qs.q[0].tail == &it[0].node);
	assert_int_equal(gs__queues_push(&qs, s1, &it[4].node), 0);
	assert_true(qs.q[0].tail == &it[4].node);
	assert_int_equal(gs__queues_remove(&qs, (void *)0x30, &it[1].node),
			 -1);
	assert_int_equal(gs__queues_total(&qs), 5);
	gs__queues_free(&qs);
	assert_int_equal(gs__queues_total(&qs), 0);
}

/* The device a process uses must be its allocation's GPU. */
static void
test_gpu_check(void **state)
{
	static const unsigned char b[16] = {
		0x1d, 0x2e, 0x3f, 0x40, 0x51, 0x62, 0x73, 0x84,
		0x95, 0xa6, 0xb7, 0xc8, 0xd9, 0xea, 0xfb, 0x0c,
	};
	char u[48], small[40];
	struct gs_error err;

	(void)state;
	assert_int_equal(gs__uuid_format(b, u, sizeof(u)), 0);
	assert_string_equal(u, "GPU-1d2e3f40-5162-7384-95a6-b7c8d9eafb0c");
	assert_int_equal(gs__uuid_format(b, small, sizeof(small)), -1);
	/* the same GPU, whatever the case; a MIG prefix on both */
	assert_int_equal(gs__gpu_check(3, "GPU-1D2E3F40-5162-7384-95A6-"
				       "B7C8D9EAFB0C", u, 0, &err), 0);
	assert_int_equal(gs__gpu_check(3, "MIG-1d2e3f40-5162-7384-95a6-"
				       "b7c8d9eafb0c", "MIG-1d2e3f40-5162-"
				       "7384-95a6-b7c8d9eafb0c", 0, &err), 0);
	/* an agent that sent no UUID: nothing to compare */
	assert_int_equal(gs__gpu_check(3, "", u, 0, &err), 0);
	/* another GPU: refused, naming both */
	assert_int_equal(gs__gpu_check(7, "GPU-1d2e3f40-5162-7384-95a6-"
				       "b7c8d9eafb0d", u, 1, &err), -1);
	assert_int_equal(err.code, GS_EPERM);
	assert_non_null(strstr(err.msg, "allocation 7 is on GPU "
			       "GPU-1d2e3f40-5162-7384-95a6-b7c8d9eafb0d"));
	assert_non_null(strstr(err.msg, "CUDA device 1 is " "GPU-1d2e"));
	/* a prefix of the UUID is not the UUID */
	assert_int_equal(gs__gpu_check(7, "GPU-1d2e3f40", u, 0, &err), -1);
	assert_int_equal(gs__gpu_check(7, u, "GPU-1d2e3f40", 0, &err), -1);
	/* a simulated GPU is never a real device, even with equal digits */
	assert_int_equal(gs__gpu_check(9, "SIM-1d2e3f40-5162-7384-95a6-"
				       "b7c8d9eafb0c", u, 0, &err), -1);
	assert_non_null(strstr(err.msg, "SIM-"));
	assert_int_equal(gs__gpu_check(9, "GPU-x", NULL, 0, &err), -1);
	assert_non_null(strstr(err.msg, "is unknown"));
}

/* space mode: the control page's partition as the kernels get it */
static void
test_partition(void **state)
{
	(void)state;
	assert_int_equal(gs__partition(0, 8, 40, 132), 0);	/* never set */
	assert_int_equal(gs__partition(1, 8, 40, 132), 8u << 16 | 40u);
	assert_int_equal(gs__partition(1, 0, 132, 132), 0);	/* whole */
	assert_int_equal(gs__partition(1, 0, 0, 132), 0);	/* empty */
	assert_int_equal(gs__partition(1, 132, 8, 132), 0);	/* outside */
	/* an agent configured for more SMs than this GPU has: clamped */
	assert_int_equal(gs__partition(2, 104, 40, 108), 104u << 16 | 4u);
	assert_int_equal(gs__partition(2, 0, 200, 108), 0);
	assert_int_equal(gs__space_scaled(1320, 8u << 16 | 40u, 132), 400);
	assert_int_equal(gs__space_scaled(1320, 0, 132), 1320);
	assert_int_equal(gs__space_scaled(1320, 5, 0), 1320);
}

static const char *part_env;
static const char *map_env;
static const char *
part_get(const char *name)
{
	return strcmp(name, "GSHARE_PARTITION") == 0 ? part_env :
	       strcmp(name, "GSHARE_SM_MAP") == 0 ? map_env : NULL;
}

/* ranks to smids: a table with gaps (132 SMs among smids 0..143, one
 * missing smid every 12) maps rank ranges to smid ranges that hold
 * exactly the asked number of present SMs */
/* GSHARE_SM_MAP=blocks: a partition's share of the physical blocks */
static void
test_part_blocks(void **state)
{
	(void)state;
	assert_int_equal(gs__part_blocks(264, 0, 132), 264);	/* whole */
	assert_int_equal(gs__part_blocks(264, 0u << 16 | 40u, 132), 80);
	assert_int_equal(gs__part_blocks(264, 40u << 16 | 92u, 132), 184);
	/* the two halves of a split cover the grid, never more */
	assert_int_equal(gs__part_blocks(264, 0u << 16 | 64u, 132) +
			 gs__part_blocks(264, 64u << 16 | 68u, 132), 264);
	assert_int_equal(gs__part_blocks(1000, 0u << 16 | 1u, 132), 8);
	assert_int_equal(gs__part_blocks(3, 0u << 16 | 8u, 132), 1);
	assert_int_equal(gs__part_blocks(0, 0u << 16 | 8u, 132), 0);
	assert_int_equal(gs__part_blocks(264, 0u << 16 | 200u, 132), 264);
	assert_int_equal(gs__part_blocks(264, 0u << 16 | 8u, 0), 264);
}

/* GSHARE_SM_MAP=green, mostly on the H100's split (15 groups of 8 and
 * 12 left over); -1 in an expected field: not checked */
static void
test_green_groups(void **state)
{
	static const struct {
		unsigned int first, count, sms, ngroups, gsize, left;
		int rc, g0, ng, wl;
	} c[] = {
		{ 0, 40, 132, 15, 8, 12, 0, 0, 5, 0 },
		/* the rest of a 30/70 split: groups 5..14 and the leftover */
		{ 40, 92, 132, 15, 8, 12, 0, 5, 10, 1 },
		{ 64, 68, 132, 15, 8, 12, 0, 8, 7, 1 },
		/* a granule in the middle of the GPU */
		{ 48, 8, 132, 15, 8, 12, 0, 6, 1, 0 },
		/* the agent's last 8-SM granule (128..131): the leftover */
		{ 128, 4, 132, 15, 8, 12, 0, -1, 0, 1 },
		/* the whole GPU */
		{ 0, 132, 132, 15, 8, 12, 0, -1, 15, 1 },
		/* too narrow to hold a group's middle */
		{ 0, 3, 132, 15, 8, 12, -1, -1, -1, -1 },
		/* no leftover */
		{ 120, 8, 128, 16, 8, 0, 0, 15, 1, 0 },
		/* the granule 120..127 holds the leftover's middle */
		{ 120, 8, 132, 15, 8, 12, 0, -1, 0, 1 },
		/* neither the leftover's middle nor the end: its start */
		{ 120, 4, 132, 15, 8, 12, 0, -1, -1, 1 },
		{ 0, 3, 132, 15, 8, 0, -1, -1, -1, -1 },
	};
	unsigned int g0, ng, i;
	int left;

	(void)state;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		assert_int_equal(gs__green_groups(c[i].first, c[i].count,
						  c[i].sms, c[i].ngroups,
						  c[i].gsize, c[i].left, &g0,
						  &ng, &left), c[i].rc);
		if (c[i].g0 >= 0)
			assert_int_equal(g0, c[i].g0);
		if (c[i].ng >= 0)
			assert_int_equal(ng, c[i].ng);
		if (c[i].wl >= 0)
			assert_int_equal(left, c[i].wl);
	}
}

static void
test_rank_range(void **state)
{
	uint16_t smid[132], ident[132];
	unsigned int i, r, n, s, k;

	(void)state;
	for (i = 0, s = 0; i < 132; s++)
		if (s % 12 != 11)
			smid[i++] = (uint16_t)s;
	for (i = 0; i < 132; i++)
		ident[i] = (uint16_t)i;
	/* no table, raw map, or no partition: unchanged */
	assert_int_equal(gs__rank_range(64u << 16 | 68u, NULL, 0),
			 64u << 16 | 68u);
	assert_int_equal(gs__rank_range(0, smid, 132), 0);
	/* contiguous smids: identity */
	assert_int_equal(gs__rank_range(40u << 16 | 92u, ident, 132),
			 40u << 16 | 92u);
	/* the upper half: ranks 64..131 are smids 69..142 (74 smids) */
	r = gs__rank_range(64u << 16 | 68u, smid, 132);
	assert_int_equal(r >> 16, 69);
	assert_int_equal(r & 0xffffu, 74);
	/* every granule range holds exactly its count of present SMs, and
	 * neighbouring ranges do not overlap */
	for (i = 0; i + 8 <= 132; i += 8) {
		r = gs__rank_range(i << 16 | 8u, smid, 132);
		for (k = 0, n = 0; k < 132; k++)
			n += smid[k] - (r >> 16) < (r & 0xffffu);
		assert_int_equal(n, 8);
		if (i + 16 <= 132) {
			unsigned int r2 = gs__rank_range((i + 8) << 16 | 8u,
							 smid, 132);
			assert_true((r >> 16) + (r & 0xffffu) <= r2 >> 16);
		}
	}
	/* past the table: clamped to what is present */
	r = gs__rank_range(128u << 16 | 40u, smid, 132);
	assert_int_equal(r >> 16, smid[128]);
	assert_int_equal((r >> 16) + (r & 0xffffu) - 1u, smid[131]);
	assert_int_equal(gs__rank_range(140u << 16 | 8u, smid, 132),
			 140u << 16 | 8u);
}

/* GSHARE_PARTITION: FIRST:COUNT or random; anything else refused */
static void
test_partition_env(void **state)
{
	static const char *bad[] = { "8", "8:", ":8", "8:0", "x:8", "8:y",
				     "70000:8", "8:70000", "random2" };
	struct gs__config c;
	struct gs_error err;
	size_t i;

	(void)state;
	part_env = "8:40";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.part_first, 8);
	assert_int_equal(c.part_count, 40);
	assert_int_equal(c.part_random, 0);
	part_env = "random";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.part_random, 1);
	part_env = NULL;
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.part_count, 0);
	assert_int_equal(c.sm_map, GS__MAP_GREEN);	/* the default */
	map_env = "green";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.sm_map, GS__MAP_GREEN);
	map_env = "raw";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.sm_map, GS__MAP_RAW);
	map_env = "rank";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.sm_map, GS__MAP_RANK);
	map_env = "blocks";
	assert_int_equal(gs__config_parse(&c, part_get, &err), 0);
	assert_int_equal(c.sm_map, GS__MAP_BLOCKS);
	map_env = "smid";
	assert_int_equal(gs__config_parse(&c, part_get, &err), -1);
	assert_non_null(strstr(err.msg, "GSHARE_SM_MAP"));
	map_env = NULL;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		part_env = bad[i];
		assert_int_equal(gs__config_parse(&c, part_get, &err), -1);
		assert_non_null(strstr(err.msg, "GSHARE_PARTITION"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nphys),
		cmocka_unit_test(test_partition),
		cmocka_unit_test(test_partition_env),
		cmocka_unit_test(test_rank_range),
		cmocka_unit_test(test_part_blocks),
		cmocka_unit_test(test_green_groups),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_redo_cap),
		cmocka_unit_test(test_span_union),
		cmocka_unit_test(test_wait_policy),
		cmocka_unit_test(test_carry),
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_direct_chunk),
		cmocka_unit_test(test_rand),
		cmocka_unit_test(test_ring_recent),
		cmocka_unit_test(test_queues),
		cmocka_unit_test(test_gpu_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
