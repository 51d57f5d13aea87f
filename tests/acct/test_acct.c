/*
 * test_acct.c — the accounting tick: counter deltas, share time only while
 * busy, overrun charging, re-attach baselines, close, eviction histogram,
 * NVML estimates (fake sample source and a fake /proc), and the tick
 * batches written to a real store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "acct.h"

#define S 1000000000ull

static struct gs_ctlpage page, page2;

static void
meta(struct gs_acct_meta *m, uint64_t id, uint32_t shares)
{
	memset(m, 0, sizeof(*m));
	m->agent_id = id;
	snprintf(m->labels.job, sizeof(m->labels.job), "%llu",
		 (unsigned long long)id);
	snprintf(m->labels.user, sizeof(m->labels.user), "alice");
	m->uid = 1000;
	m->gpu = 0;
	m->shares = shares;
}

/* Run one tick and return the sample of store key `key` (zeroed if
 * none); keys are given out from 1 in open order. */
static struct gs_store_sample
tick(struct gs_acct *a, uint64_t mono, uint64_t key, unsigned *nallocs)
{
	struct gs_store_batch *b = NULL;
	struct gs_store_sample none;
	struct gs_error err;

	memset(&none, 0, sizeof(none));
	if (gs_acct_tick(a, mono, (int64_t)mono, &b, &err) != 0)
		fail_msg("tick: %s", err.msg);
	assert_non_null(b);
	if (nallocs)
		*nallocs = b->nallocs;
	for (uint32_t i = 0; i < b->nsamples; i++)
		if (b->samples[i].key == key)
			none = b->samples[i];
	gs_store_batch_free(b);
	return none;
}

/* Both pages cleared, allocation 1 (50 shares) open with page attached
 * at 0. */
static struct gs_acct *
acct_one(void)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_error err;

	memset(&page, 0, sizeof(page));
	memset(&page2, 0, sizeof(page2));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 1, 50);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 1, &page, 0), 0);
	return a;
}

static void
test_delta(void **state)
{
	struct gs_ctl_counters p = { 0 }, c = { 0 };
	struct gs_usage d;

	(void)state;
	p.gpu_ns = 100;
	p.suspensions = 2;
	c.gpu_ns = 250;
	c.held_ns = 300;
	c.suspensions = 3;
	c.evict_ns_sum = 40;
	c.evict_ns_max = 30;
	gs_acct_delta(&p, &c, &d);
	assert_int_equal(d.gpu_ns, 150);
	assert_int_equal(d.held_ns, 300);
	assert_int_equal(d.suspensions, 1);
	assert_int_equal(d.evict_ns_sum, 40);
	assert_int_equal(d.evict_ns_max, 30);
	/* backwards (new page): nothing, never a huge wrap */
	gs_acct_delta(&c, &p, &d);
	assert_int_equal(d.gpu_ns, 0);
	assert_int_equal(d.suspensions, 0);
	assert_int_equal(d.evict_ns_max, 0);
	/* space mode: kernel time x partition fraction (40 of 132 SMs) */
	p.space_gpu_ns = 100;
	c.space_gpu_ns = 100 + 150 * 40 / 132;
	gs_acct_delta(&p, &c, &d);
	gs_acct_space_delta(GS_MODE_TIME, &p, &c, &d);
	assert_int_equal(d.gpu_ns, 150);
	gs_acct_space_delta(GS_MODE_SPACE, &p, &c, &d);
	assert_int_equal(d.gpu_ns, 150 * 40 / 132);
	assert_int_equal(d.held_ns, 300);
	/* a runtime that does not count it: kernel time unscaled */
	p.space_gpu_ns = c.space_gpu_ns = 0;
	gs_acct_delta(&p, &c, &d);
	gs_acct_space_delta(GS_MODE_SPACE, &p, &c, &d);
	assert_int_equal(d.gpu_ns, 150);
}

static void
test_mem(void **state)
{
	struct gs_ctl_counters p = { 0 }, c = { 0 };
	struct gs_usage d;

	(void)state;
	memset(&d, 0, sizeof(d));
	c.mem_used = 3ull << 30;
	c.mem_peak = 5ull << 30;
	gs_acct_mem(&p, &c, S / 2, &d);	/* peak rose since: it counts */
	assert_int_equal(d.mem_max, 5ull << 30);
	assert_int_equal(d.mem_byte_s, 3ull << 29);	/* 3G x 0.5 s */
	assert_int_equal(d.mem_ns, S / 2);
	p = c;
	c.mem_used = 1ull << 30;
	gs_acct_mem(&p, &c, S, &d);	/* old peak: only what is held */
	assert_int_equal(d.mem_max, 1ull << 30);
	assert_int_equal(d.mem_byte_s, 1ull << 30);
	c.mem_used = 0;
	gs_acct_mem(&p, &c, S, &d);	/* nothing held: no time counted */
	assert_int_equal(d.mem_max, 0);
	assert_int_equal(d.mem_byte_s, 0);
	assert_int_equal(d.mem_ns, 0);
	/* the largest gauge for a year: no overflow of the store's int64 */
	c.mem_used = UINT64_MAX;
	gs_acct_mem(&p, &c, 365ull * 86400 * S, &d);
	assert_int_equal(d.mem_byte_s, INT64_MAX);
}

/* A job holding memory while idle: samples carry it (AveMem counts the
 * whole time it held memory), the row keeps the limit and the maximum. */
static void
test_tick_mem(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;
	const struct gs_acct_view *v;

	(void)state;
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 1, 30);
	m.mem_limit = 24ull << 30;
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 1, &page, 0), 0);
	x = tick(a, S, 1, NULL);
	assert_int_equal(x.key, 0);	/* nothing held, nothing to say */
	page.mem_used = 2ull << 30;
	page.mem_peak = 4ull << 30;
	page.state = GS_CTL_IDLE;
	x = tick(a, 2 * S, 1, NULL);
	assert_int_equal(x.key, 1);
	assert_int_equal(x.d.mem_max, 4ull << 30);
	assert_int_equal(x.d.mem_byte_s, 2ull << 30);
	assert_int_equal(x.d.mem_ns, S);
	assert_int_equal(x.d.wall_ns, 0);	/* idle: not busy */
	x = tick(a, 4 * S, 1, NULL);
	assert_int_equal(x.d.mem_max, 2ull << 30);
	assert_int_equal(x.d.mem_byte_s, 4ull << 30);
	assert_int_equal(gs_acct_allocs(a, &v), 1);
	assert_int_equal(v[0].row.mem_limit, 24ull << 30);
	assert_int_equal(v[0].row.tot.mem_max, 4ull << 30);
	assert_int_equal(v[0].row.tot.mem_byte_s, 6ull << 30);
	assert_int_equal(v[0].row.tot.mem_ns, 3 * S);
	/* a job that claims all the memory there is, for two ticks: the
	 * total stays at the store's largest integer, no wrap */
	page.mem_used = UINT64_MAX;
	tick(a, 5000 * S, 1, NULL);
	tick(a, 10000 * S, 1, NULL);
	assert_int_equal(gs_acct_allocs(a, &v), 1);
	assert_int_equal(v[0].row.tot.mem_byte_s, INT64_MAX);
	assert_int_equal(v[0].row.tot.mem_max, UINT64_MAX);
	gs_acct_free(a);
}

static void
test_hist(void **state)
{
	struct gs_acct_hist h;

	(void)state;
	memset(&h, 0, sizeof(h));
	gs_acct_hist_add(&h, 1, 8000, 8000);		/* 8 us: <= 10 us */
	assert_int_equal(h.count[1], 1);
	gs_acct_hist_add(&h, 3, 3000 + 3000 + 400000, 400000);
	assert_int_equal(h.count[6], 1);		/* 400 us: <= 500 us */
	assert_int_equal(h.count[0], 2);		/* 3 us each */
	gs_acct_hist_add(&h, 1, 5 * S, 5 * S);		/* +Inf */
	assert_int_equal(h.count[GS_ACCT_EVICT_BUCKETS], 1);
	assert_int_equal(h.n, 5);
	assert_int_equal(h.sum_ns, 8000 + 406000 + 5 * S);
	gs_acct_hist_add(&h, 0, 10, 10);
	assert_int_equal(h.n, 5);
}

static void
test_tick_usage(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;
	const struct gs_acct_view *v;

	(void)state;
	memset(&page, 0, sizeof(page));
	page.gpu_ns = 7 * S;	/* used before attach: not ours */
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 1, 30);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), -1);	/* dup */
	assert_int_equal(gs_acct_attach(a, 1, &page, 0), 0);
	assert_int_equal(gs_acct_attach(a, 99, &page, 0), -1);

	/* busy second: 0.6 s GPU, share time = 0.3 x 1 s */
	page.state = GS_CTL_RUNNING;
	page.gpu_ns += 600000000;
	page.held_ns += 650000000;
	page.block_tasks += 1000;
	page.suspensions = 2;
	page.evict_ns_sum = 30000;
	page.evict_ns_max = 20000;
	page.last_evict_ns = 20000;
	x = tick(a, S, 1, NULL);
	assert_int_equal(x.key, 1);
	assert_int_equal(x.d.gpu_ns, 600000000);
	assert_int_equal(x.d.held_ns, 650000000);
	assert_int_equal(x.d.share_ns, 300000000);
	assert_int_equal(x.d.wall_ns, S);
	assert_int_equal(x.d.block_tasks, 1000);
	assert_int_equal(x.d.suspensions, 2);
	assert_int_equal(x.d.evict_ns_sum, 30000);
	assert_int_equal(x.dt_ns, S);

	/* idle for 10 s: nothing used, nothing saved up */
	page.state = GS_CTL_IDLE;
	for (int i = 2; i <= 11; i++) {
		x = tick(a, (uint64_t)i * S, 1, NULL);
		assert_int_equal(x.key, 0);	/* no sample at all */
	}
	assert_int_equal(gs_acct_allocs(a, &v), 1);
	assert_int_equal(v[0].row.tot.share_ns, 300000000);
	assert_int_equal(v[0].active, 0);

	/* waiting without GPU time still accrues share time */
	page.state = GS_CTL_WAITING;
	x = tick(a, 13 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	assert_int_equal(x.d.share_ns, 600000000);	/* 2 s x 0.3 */
	assert_int_equal(x.dt_ns, 2 * S);

	/* re-attach with a fresh page: its counters start at 0, the old
	 * page's last values were read at detach */
	page.gpu_ns += 100;
	memset(&page2, 0, sizeof(page2));
	page2.gpu_ns = 0;
	assert_int_equal(gs_acct_attach(a, 1, &page2, 13 * S), 0);
	page2.gpu_ns = 50;
	page2.state = GS_CTL_RUNNING;
	x = tick(a, 14 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 150);

	assert_int_equal(gs_acct_set_params(a, 1, 40, 80, 2), 0);
	assert_int_equal(gs_acct_allocs(a, &v), 1);
	assert_int_equal(v[0].row.weight, 80);
	assert_int_equal(v[0].row.tot.gpu_ns, 600000000 + 150);
	gs_acct_free(a);
}

/* A job that writes 2^64-ish figures into its page: each counter is cut
 * to what its processes could have used in the row's age (plus the slack),
 * nothing wraps, the store gets nothing negative; an honest page beside
 * it (a second process) is counted in full. */
static void
test_liar_page(void **state)
{
	struct gs_acct *a;
	struct gs_store_sample x;
	const struct gs_acct_view *v;
	uint64_t lim = GS_ACCT_STREAMS_MAX * 10 * S + GS_ACCT_PAGE_SLACK_NS;

	(void)state;
	a = acct_one();
	page.state = GS_CTL_RUNNING;
	page.gpu_ns = UINT64_MAX - 5;
	page.held_ns = UINT64_MAX;
	page.block_tasks = UINT64_MAX;
	page.suspensions = UINT64_MAX;
	page.evict_ns_sum = UINT64_MAX;
	page.evict_ns_max = UINT64_MAX;
	page.last_evict_ns = UINT64_MAX;
	x = tick(a, 10 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, lim);
	assert_int_equal(x.d.held_ns, lim);
	assert_int_equal(x.d.suspensions, lim / 1000);
	assert_int_equal(x.d.block_tasks, lim * GS_ACCT_TASKS_PER_NS);
	assert_int_equal(x.d.evict_ns_sum, lim);
	assert_true(x.d.evict_ns_max <= lim);
	/* nothing left to take in the same age; a page going back down is
	 * not a negative delta */
	page.gpu_ns = 5;
	x = tick(a, 10 * S + 1, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	/* the budget grows with time only: another 10 s, another 10 s of
	 * GS_ACCT_STREAMS_MAX streams */
	page.gpu_ns = UINT64_MAX;
	x = tick(a, 20 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, GS_ACCT_STREAMS_MAX * 10 * S);
	/* a second process: the bound is twice the age from now on; an
	 * honest 3 s of it is counted, as the liar already took its own */
	assert_int_equal(gs_acct_attach(a, 1, &page2, 20 * S), 0);
	page2.state = GS_CTL_RUNNING;
	page2.gpu_ns = 3 * S;
	x = tick(a, 21 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 3 * S);
	assert_int_equal(gs_acct_allocs(a, &v), 1);
	assert_true(v[0].row.tot.gpu_ns <= (uint64_t)INT64_MAX);
	assert_true(v[0].row.tot.suspensions <= (uint64_t)INT64_MAX);
	assert_true(v[0].row.tot.block_tasks <= (uint64_t)INT64_MAX);
	assert_int_equal(v[0].row.tot.gpu_ns,
			 lim + GS_ACCT_STREAMS_MAX * 10 * S + 3 * S);
	gs_acct_free(a);
}

static void
test_overrun(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;

	(void)state;
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 2, 50);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 2, &page, 0), 0);

	/* a cooperative hold: charged what it reported (within 1/8 of the
	 * 5 ms the agent saw it hold) */
	gs_acct_hold(a, 2, 100);
	page.gpu_ns = 4950000;
	gs_acct_unhold(a, 2, 5000100, 4950000);
	x = tick(a, S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 4950000);

	/* granted at 1.0 s, ignores the suspend, escalated at 1.5 s,
	 * reports only 0.1 s of GPU time so far */
	gs_acct_hold(a, 2, S);
	page.gpu_ns += 100000000;
	gs_acct_escalate(a, 2, S + S / 2);
	x = tick(a, 2 * S, 1, NULL);
	/* charged the whole hold so far: 1 s (0.1 reported + 0.9 extra) */
	assert_int_equal(x.d.gpu_ns, S);
	/* still holding at 3 s: another full second */
	x = tick(a, 3 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S);
	/* releases at 3.5 s reporting 0.2 s in total for this hold */
	page.gpu_ns += 100000000;
	gs_acct_unhold(a, 2, 3 * S + S / 2, 200000000);
	x = tick(a, 4 * S, 1, NULL);
	/* the hold lasted 2.5 s: 2 s charged already, 0.5 s more */
	assert_int_equal(x.d.gpu_ns, S / 2);
	x = tick(a, 5 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	gs_acct_escalate(a, 2, 6 * S);		/* not holding: no effect */
	x = tick(a, 7 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	gs_acct_free(a);
}

/* Space mode: a hold co-run on part of the SMs is billed its kernel time
 * x that part (space_gpu_ns), and the floor of what the agent saw held
 * is scaled alike — it used to bill the whole held time, undoing the
 * scaling for every co-running job. */
static void
test_space_part(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;

	(void)state;
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 3, 30);
	m.mode = GS_MODE_SPACE;
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 3, &page, 0), 0);
	/* 1 s held on 64 of 128 SMs, 1 s of kernels: 0.5 s */
	gs_acct_set_part(a, 3, GS_ACCT_PART_ONE / 2);
	gs_acct_hold(a, 3, 100);
	page.gpu_ns = S;
	page.space_gpu_ns = S / 2;
	gs_acct_unhold(a, 3, S + 100, S);
	x = tick(a, 2 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S / 2);
	/* still holding for 1 s at a quarter, nothing reported yet: the
	 * floor is 7/8 of a quarter second */
	gs_acct_set_part(a, 3, GS_ACCT_PART_ONE / 4);
	gs_acct_hold(a, 3, 2 * S);
	x = tick(a, 3 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S / 4 - S / 32);
	/* alone again (0: the whole GPU) */
	gs_acct_unhold(a, 3, 3 * S, 0);
	gs_acct_set_part(a, 3, 0);
	gs_acct_hold(a, 3, 3 * S);
	gs_acct_unhold(a, 3, 4 * S, 0);
	x = tick(a, 4 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S - S / 8);
	gs_acct_free(a);
}

/* Issue 14.3: a job that reports 0 ns (RELEASE and page) is billed the
 * time the agent saw it hold, less 1/8 at most; an honest job whose
 * page catches up after its RELEASE is not billed twice; held time is
 * never below the agent's. */
static void
test_proven_hold(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;

	(void)state;
	a = acct_one();
	meta(&m, 2, 50);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 2, &page2, 0), 0);

	/* the liar holds 10 ms twice, reports nothing anywhere */
	gs_acct_hold(a, 1, 100 * 1000000ull);
	gs_acct_unhold(a, 1, 110 * 1000000ull, 0);
	gs_acct_hold(a, 1, 200 * 1000000ull);
	gs_acct_unhold(a, 1, 210 * 1000000ull, 0);
	/* the honest one holds 10 ms, reports 9.95 ms; its page shows it
	 * only after the tick (counters follow the RELEASE) */
	gs_acct_hold(a, 2, 300 * 1000000ull);
	gs_acct_unhold(a, 2, 310 * 1000000ull, 9950000);
	x = tick(a, S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 2 * (10000000 - 10000000 / 8));
	assert_int_equal(x.d.held_ns, 20000000);
	page2.gpu_ns = 9950000;
	page2.held_ns = 9990000;
	x = tick(a, 2 * S, 2, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	{
		/* 9.95 ms billed in all (the proven part first, then the
		 * page's report): not 9.95 + 9.95; held: the agent's 10 ms */
		const struct gs_acct_view *v;
		unsigned n = gs_acct_allocs(a, &v), i, seen = 0;

		for (i = 0; i < n; i++) {
			if (v[i].row.agent_id != 2)
				continue;
			assert_int_equal(v[i].row.tot.gpu_ns, 9950000);
			assert_int_equal(v[i].row.tot.held_ns, 10000000);
			seen = 1;
		}
		assert_true(seen);
	}
	/* a hold still running is billed as it goes */
	gs_acct_hold(a, 1, 2 * S);
	x = tick(a, 3 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S - S / 8);
	assert_int_equal(x.d.held_ns, S);
	gs_acct_unhold(a, 1, 3 * S + S / 2, 0);
	x = tick(a, 4 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, (S + S / 2) * 7 / 8 - (S - S / 8));
	assert_int_equal(x.d.held_ns, S / 2);
	gs_acct_free(a);
}

static void
test_close(void **state)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	struct gs_error err;
	const struct gs_acct_view *v;

	(void)state;
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	meta(&m, 3, 20);
	assert_int_equal(gs_acct_open(a, &m, 5, 0, &err), 0);
	assert_int_equal(gs_acct_attach(a, 3, &page, 0), 0);
	page.gpu_ns = 123;
	/* closed between ticks: the last counters still count */
	assert_int_equal(gs_acct_close(a, 3, GS_SST_COMPLETED, 77, S / 2), 0);
	assert_int_equal(gs_acct_close(a, 3, GS_SST_COMPLETED, 77, S / 2), -1);
	assert_int_equal(gs_acct_tick(a, S, (int64_t)S, &b, &err), 0);
	assert_int_equal(b->nsamples, 1);
	assert_int_equal(b->samples[0].d.gpu_ns, 123);
	assert_int_equal(b->nallocs, 1);
	assert_int_equal(b->allocs[0].end_ns, 77);
	assert_int_equal(b->allocs[0].start_ns, 5);
	assert_int_equal(b->allocs[0].state, GS_SST_COMPLETED);
	assert_int_equal(b->allocs[0].tot.gpu_ns, 123);
	assert_int_equal(b->tick, 1);
	gs_store_batch_free(b);
	assert_int_equal(gs_acct_allocs(a, &v), 0);
	/* the same agent id may be reused afterwards */
	assert_int_equal(gs_acct_open(a, &m, 6, S, &err), 0);
	assert_int_equal(gs_acct_ticks(a), 1);
	gs_acct_free(a);
}

/* ---- NVML estimate ---- */

struct fake_src {
	struct gs_proc_util s[8];
	int n;
	uint64_t asked_since;
};

static int
fake_util(void *arg, int32_t gpu, uint64_t since_us,
	  struct gs_proc_util *out, unsigned max, struct gs_error *err)
{
	struct fake_src *f = arg;
	int n = 0;

	(void)gpu;
	(void)err;
	f->asked_since = since_us;
	for (int i = 0; i < f->n && (unsigned)n < max; i++)
		if (f->s[i].ts_us > since_us)
			out[n++] = f->s[i];
	return n;
}

static void
write_environ(const char *root, unsigned pid, const char *env, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%u/environ", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fwrite(env, 1, len, f);
	fclose(f);
}

static void
test_estimate(void **state)
{
	static const char env1[] = "PATH=/bin\0GSHARE_ALLOC=4\0HOME=/x";
	static const char env2[] = "PATH=/bin\0HOME=/y";
	char root[] = "/tmp/gs-test-proc.XXXXXX";
	struct fake_src src = { .n = 4 };
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	struct gs_error err;
	char cmd[128];

	(void)state;
	assert_non_null(mkdtemp(root));
	write_environ(root, 111, env1, sizeof(env1));
	write_environ(root, 222, env2, sizeof(env2));
	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	gs_acct_set_util_source(a, fake_util, &src, root);
	meta(&m, 4, 50);
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	/* samples every 200 ms: pid 111 at 50% and 100%, pid 222 (not a
	 * gshare process), pid 333 (gone) */
	src.s[0] = (struct gs_proc_util){ 111, 50, 1000000 };
	src.s[1] = (struct gs_proc_util){ 222, 90, 1200000 };
	src.s[2] = (struct gs_proc_util){ 111, 100, 1400000 };
	src.s[3] = (struct gs_proc_util){ 333, 100, 1600000 };
	assert_int_equal(gs_acct_tick(a, S, (int64_t)S, &b, &err), 0);
	/* first sample's period is one tick (1 s) x 50%, then 200 ms x 100% */
	assert_int_equal(b->nsamples, 1);
	assert_int_equal(b->samples[0].estimate, 1);
	assert_int_equal(b->samples[0].d.gpu_ns, S / 2 + S / 5);
	assert_int_equal(b->allocs[0].estimate, 1);
	gs_store_batch_free(b);
	/* next tick asks only for newer samples and gets none */
	assert_int_equal(gs_acct_tick(a, 2 * S, (int64_t)2 * S, &b, &err), 0);
	assert_int_equal(src.asked_since, 1600000);
	assert_int_equal(b->nsamples, 0);
	gs_store_batch_free(b);
	/* once attached the job reports itself: no more estimates */
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_attach(a, 4, &page, 2 * S), 0);
	src.s[0] = (struct gs_proc_util){ 111, 100, 2000000 };
	src.n = 1;
	assert_int_equal(gs_acct_tick(a, 3 * S, (int64_t)3 * S, &b, &err), 0);
	assert_int_equal(b->nsamples, 0);
	gs_store_batch_free(b);
	/* an unmanaged process of the attached allocation (unman.c): its
	 * estimate is added and the row flagged */
	src.n = 0;
	gs_acct_add_estimate(a, 4, S / 4);
	gs_acct_add_estimate(a, 99, S);		/* no such allocation */
	assert_int_equal(gs_acct_tick(a, 4 * S, (int64_t)4 * S, &b, &err), 0);
	assert_int_equal(b->nsamples, 1);
	assert_int_equal(b->samples[0].estimate, 1);
	assert_int_equal(b->samples[0].d.gpu_ns, S / 4);
	assert_int_equal(b->allocs[0].estimate, 1);
	gs_store_batch_free(b);
	gs_acct_free(a);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

/* ---- with a store: keys continue, re-adoption after a crash ---- */

/*
 * The first life of a job (agent id 1, 30 shares) that ran 5 s of GPU
 * (held_ns as given) before the agent went down, in a fresh store under
 * dir; then the restart: the store reopened and recovered (the open row
 * closed as NODE_FAIL) and a new accounting over it in *st, *a.
 */
static void
first_life(char *dir, char *path, size_t pathlen, struct gs_ctlpage *pg,
	   uint64_t held_ns, struct gs_store **st, struct gs_acct **a)
{
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	struct gs_error err;

	assert_non_null(mkdtemp(dir));
	snprintf(path, pathlen, "%s/usage.db", dir);
	assert_int_equal(gs_store_open(path, 0, st, &err), 0);
	assert_int_equal(gs_acct_new(*st, a, &err), 0);
	memset(pg, 0, sizeof(*pg));
	meta(&m, 1, 30);
	assert_int_equal(gs_acct_open(*a, &m, 10, 0, &err), 0);
	assert_int_equal(gs_acct_attach(*a, 1, pg, 0), 0);
	pg->gpu_ns = 5 * S;
	pg->held_ns = held_ns;
	pg->state = GS_CTL_RUNNING;
	/* 6 s after the open: a page's counters add up to no more than its
	 * process's age (bound_delta) */
	assert_int_equal(gs_acct_tick(*a, 6 * S, 1000, &b, &err), 0);
	assert_int_equal(gs_store_write(*st, b, &err), 0);
	gs_acct_free(*a);
	gs_store_close(*st);

	assert_int_equal(gs_store_open(path, 0, st, &err), 0);
	assert_int_equal(gs_store_recover(*st, 0, &err), 1);
	assert_int_equal(gs_acct_new(*st, a, &err), 0);
}

static void
test_store_adopt(void **state)
{
	char dir[] = "/tmp/gs-test-acct.XXXXXX", path[128], cmd[128];
	struct gs_store *st;
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	struct gs_error err;
	const struct gs_acct_view *v;

	(void)state;
	/* restart: the open row is closed as NODE_FAIL, then adopted */
	first_life(dir, path, sizeof(path), &page, 0, &st, &a);
	assert_int_equal(gs_acct_ticks(a), 1);
	meta(&m, 7, 30);			/* new agent id, same job */
	strcpy(m.labels.job, "1");
	assert_int_equal(gs_acct_open(a, &m, 2000, 0, &err), 0);
	meta(&m, 8, 30);			/* a new job: a new key */
	assert_int_equal(gs_acct_open(a, &m, 2000, 0, &err), 0);
	assert_int_equal(gs_acct_allocs(a, &v), 2);
	assert_int_equal(v[0].row.key, 1);
	assert_int_equal(v[0].row.start_ns, 10);
	assert_int_equal(v[0].row.tot.gpu_ns, 5 * S);
	assert_int_equal(v[0].row.state, GS_SST_RUNNING);
	assert_int_equal(v[1].row.key, 2);
	assert_int_equal(gs_acct_tick(a, S, 3000, &b, &err), 0);
	assert_int_equal(b->tick, 2);
	assert_int_equal(gs_store_write(st, b, &err), 0);

	/* the adopted job re-attaches with a fresh page that continues its
	 * counters (resumed): it ran 2 s more while the agent was down */
	static struct gs_ctlpage p2;
	memset(&p2, 0, sizeof(p2));
	assert_int_equal(gs_acct_attach(a, 7, &p2, 2 * S), 0);
	struct gs_store_sample x = tick(a, 2 * S, 1, NULL);
	assert_int_equal(x.key, 0);		/* nothing written yet */
	p2.resumed = 1;
	p2.gpu_ns = 7 * S;
	p2.state = GS_CTL_RUNNING;
	x = tick(a, 3 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 2 * S);	/* not 7 s, not 0 */
	p2.gpu_ns += S;
	x = tick(a, 4 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S);
	/* the new job (not adopted) with counters from zero: all counted */
	static struct gs_ctlpage p3;
	memset(&p3, 0, sizeof(p3));
	assert_int_equal(gs_acct_attach(a, 8, &p3, 4 * S), 0);
	p3.resumed = 1;		/* ignored: nothing to continue */
	p3.gpu_ns = S / 2;
	x = tick(a, 5 * S, 2, NULL);
	assert_int_equal(x.d.gpu_ns, S / 2);
	gs_acct_free(a);
	gs_store_close(st);

	/* an adopted job that starts its counters again at zero */
	assert_int_equal(gs_store_open(path, 0, &st, &err), 0);
	assert_int_equal(gs_store_recover(st, 0, &err), 2);
	assert_int_equal(gs_acct_new(st, &a, &err), 0);
	meta(&m, 9, 30);
	strcpy(m.labels.job, "1");
	assert_int_equal(gs_acct_open(a, &m, 4000, 0, &err), 0);
	memset(&p2, 0, sizeof(p2));
	assert_int_equal(gs_acct_attach(a, 9, &p2, 0), 0);
	p2.gpu_ns = S / 4;
	x = tick(a, S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S / 4);
	gs_acct_free(a);
	gs_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* A resumed page whose first counters come after a tick: the job sets
 * `resumed` before any counter (the page contract), so a tick may see the
 * flag with the counters still at zero.  The baseline must stay what the
 * store holds until the counters show: the continued totals are charged
 * once (before, that tick took the zeros as the baseline and the next
 * charged the job's whole total again). */
static void
test_resumed_late_counters(void **state)
{
	char dir[] = "/tmp/gs-test-acct.XXXXXX", path[128], cmd[128];
	static struct gs_ctlpage p1, p2;
	struct gs_store *st;
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_sample x;
	struct gs_error err;

	(void)state;
	/* restart: the job re-attaches, continuing its counters */
	first_life(dir, path, sizeof(path), &p1, 5 * S, &st, &a);
	meta(&m, 7, 30);
	strcpy(m.labels.job, "1");
	assert_int_equal(gs_acct_open(a, &m, 2000, 0, &err), 0);
	memset(&p2, 0, sizeof(p2));
	assert_int_equal(gs_acct_attach(a, 7, &p2, S), 0);
	p2.resumed = 1;			/* flag first ... */
	x = tick(a, 2 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 0);
	p2.gpu_ns = 7 * S;		/* ... then the counters */
	p2.held_ns = 7 * S;
	p2.state = GS_CTL_RUNNING;
	x = tick(a, 3 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, 2 * S);	/* not 7 s */
	assert_int_equal(x.d.held_ns, 2 * S);
	p2.gpu_ns += S;
	x = tick(a, 4 * S, 1, NULL);
	assert_int_equal(x.d.gpu_ns, S);
	gs_acct_free(a);
	gs_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delta),
		cmocka_unit_test(test_hist),
		cmocka_unit_test(test_mem),
		cmocka_unit_test(test_tick_mem),
		cmocka_unit_test(test_tick_usage),
		cmocka_unit_test(test_liar_page),
		cmocka_unit_test(test_overrun),
		cmocka_unit_test(test_proven_hold),
		cmocka_unit_test(test_space_part),
		cmocka_unit_test(test_close),
		cmocka_unit_test(test_estimate),
		cmocka_unit_test(test_store_adopt),
		cmocka_unit_test(test_resumed_late_counters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
