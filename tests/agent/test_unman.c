/*
 * test_unman.c — unit test of the pure parts of the unmanaged-process
 * watcher (node-agent/unman_dfq.c): classification of a GPU process
 * against the allocation its GSHARE_ALLOC names, who may be held back,
 * and traces of the disengaged fair-queuing step: an allocation ahead of
 * a contender is stopped and continued once the contender stops wanting
 * the GPU; with a hold-back that lets stopped ones fall behind,
 * time-sliced busy allocations converge to their weights; nobody is held
 * back alone on a GPU; newcomers and idle ones cannot save up time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "alloc.h"
#include "unman.h"

#define MS 1000000ull

static struct gs_unman_proc proc(uint32_t pid, uint32_t gpu, uint32_t uid,
				 uint64_t alloc)
{
	struct gs_unman_proc p;

	memset(&p, 0, sizeof(p));
	p.pid = pid;
	p.gpu = gpu;
	p.uid = uid;
	p.alloc = alloc;
	p.start = 77;
	return p;
}

static void test_classify(void **state)
{
	struct gs_conn *conn = (struct gs_conn *)(uintptr_t)0x1;
	struct gs_attach att[2];
	struct gs_unman_owner o;
	struct gs_unman_proc p;

	(void)state;
	memset(att, 0, sizeof(att));
	att[0].conn = conn;
	att[0].pid = 100;
	att[1].conn = NULL;	/* a slot whose process detached */
	att[1].pid = 101;
	memset(&o, 0, sizeof(o));
	o.id = 7;
	o.gpu = 1;
	o.uid = 1000;
	o.att = att;
	o.natt = 2;

	p = proc(100, 1, 1000, 7);	/* attached */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_MANAGED);
	p = proc(101, 1, 1000, 7);	/* its slot has no connection */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_UNMANAGED);
	p = proc(102, 1, 1000, 7);	/* never attached */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_UNMANAGED);
	assert_int_equal(gs_unman_holdable(&p), 1);
	p = proc(102, 1, 0, 7);		/* root's (setuid): counted, kept */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_UNMANAGED);
	assert_int_equal(gs_unman_holdable(&p), 0);
	p = proc(102, 1, 2000, 7);	/* another user names it */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_NO_OWNER);
	o.any_uid = 1;			/* unless any uid may attach */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_UNMANAGED);
	o.any_uid = 0;
	p = proc(102, 0, 1000, 7);	/* on another GPU than its share */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_NO_OWNER);
	p = proc(102, 1, 1000, 0);	/* no GSHARE_ALLOC */
	assert_int_equal(gs_unman_classify(&p, NULL), GS_UNMAN_NO_OWNER);
	p = proc(102, 1, 1000, 8);	/* an allocation that is not open */
	assert_int_equal(gs_unman_classify(&p, NULL), GS_UNMAN_NO_OWNER);
	o.id = 9;			/* a mismatched owner record */
	assert_int_equal(gs_unman_classify(&p, &o), GS_UNMAN_NO_OWNER);
	p.uid = (uint32_t)-1;
	assert_int_equal(gs_unman_holdable(&p), 0);
}

/* Alone on a GPU, or without processes it may stop: never held. */
static void test_alone(void **state)
{
	struct gs_dfq_ent e[2];
	int k;

	(void)state;
	memset(e, 0, sizeof(e));
	e[0].id = 1;
	e[0].weight = 1;
	e[0].holdable = 1;
	e[0].fresh = 1;
	e[1].id = 2;
	e[1].weight = 1;
	e[1].fresh = 1;		/* open, idle */
	for (k = 0; k < 20; k++) {
		e[0].used_ns = 500 * MS;
		gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
		assert_int_equal(e[0].stopped, 0);
		/* the idle one is kept level: no saved-up time */
		assert_true(e[1].vt == e[0].vt);
	}
	/* a busy contender that cannot be held (managed) is never held */
	e[0].holdable = 0;
	for (k = 0; k < 20; k++) {
		e[0].used_ns = 500 * MS;
		e[1].wants = 1;
		e[1].used_ns = 0;
		gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
		assert_int_equal(e[0].stopped, 0);
		assert_int_equal(e[1].stopped, 0);
	}
}

/* An unmanaged allocation ahead of a managed contender: trace. */
static void test_trace_stop_continue(void **state)
{
	struct gs_dfq_ent e[2];
	int k, stopped_at = -1;

	(void)state;
	memset(e, 0, sizeof(e));
	e[0].id = 1;
	e[0].weight = 1;
	e[0].holdable = 1;
	e[0].fresh = 1;
	e[1].id = 2;
	e[1].weight = 1;
	e[1].fresh = 1;
	/* period 0: A busy 100 %, B wants the GPU and got 10 % */
	for (k = 0; k < 10; k++) {
		e[0].used_ns = e[0].stopped ? 0 : 450 * MS;
		e[1].used_ns = e[0].stopped ? 500 * MS : 50 * MS;
		e[1].wants = 1;
		gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
		if (e[0].stopped && stopped_at < 0)
			stopped_at = k;
		/* the least served is never the one held */
		assert_false(e[1].stopped);
	}
	/* lead after one period: (450 - 50) ms × 2 > 300 ms */
	assert_int_equal(stopped_at, 0);
	/* while held, B catches up: A goes on once no more than half the
	 * threshold ahead, and is held again when ahead again */
	{
		int conts = 0, was = 1;

		for (k = 0; k < 40; k++) {
			e[0].used_ns = e[0].stopped ? 0 : 450 * MS;
			e[1].used_ns = e[0].stopped ? 500 * MS : 50 * MS;
			e[1].wants = 1;
			gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
			if (was && !e[0].stopped)
				conts++;
			was = e[0].stopped;
		}
		assert_true(conts >= 5);
	}
	/* B stops wanting the GPU: A goes on at once and stays on */
	e[0].stopped = 1;
	for (k = 0; k < 5; k++) {
		e[0].used_ns = e[0].stopped ? 0 : 500 * MS;
		e[1].used_ns = 0;
		e[1].wants = 0;
		gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
		assert_false(e[0].stopped);
	}
}

/*
 * Busy unmanaged allocations at weights 1:3 (and 1:2:5), time-sliced
 * evenly among those running (what the GPU does without the gate), with
 * a short period: over a long run each gets its weight's part of the GPU
 * within 5 points.
 */
static void run_weights(const uint32_t *w, unsigned n)
{
	struct gs_dfq_ent e[4];
	uint64_t got[4] = { 0 }, tot = 0, wsum = 0;
	unsigned i, k, run;

	memset(e, 0, sizeof(e));
	for (i = 0; i < n; i++) {
		e[i].id = i + 1;
		e[i].weight = w[i];
		e[i].holdable = 1;
		e[i].fresh = 1;
		wsum += w[i];
	}
	for (k = 0; k < 4000; k++) {
		for (run = 0, i = 0; i < n; i++)
			run += !e[i].stopped;
		for (i = 0; i < n; i++) {
			e[i].used_ns = e[i].stopped ? 0 : 100 * MS / run;
			e[i].wants = 1;
			if (k >= 200)
				got[i] += e[i].used_ns;
		}
		gs_unman_dfq_step(e, n, 100 * MS, 200 * MS);
		for (run = 0, i = 0; i < n; i++)
			run += !e[i].stopped;
		assert_true(run >= 1);	/* never all held */
	}
	for (i = 0; i < n; i++)
		tot += got[i];
	for (i = 0; i < n; i++) {
		double share = (double)got[i] / (double)tot;
		double want = (double)w[i] / (double)wsum;

		print_message("weight %u: %.3f of the GPU (fair %.3f)\n", w[i],
			      share, want);
		assert_true(share > want - 0.05 && share < want + 0.05);
	}
}

static void test_weights(void **state)
{
	static const uint32_t w2[] = { 1, 3 }, w3[] = { 1, 2, 5 };

	(void)state;
	run_weights(w2, 2);
	run_weights(w3, 3);
}

/* A newcomer starts level with the least-served known allocation. */
static void test_fresh(void **state)
{
	struct gs_dfq_ent e[2];

	(void)state;
	memset(e, 0, sizeof(e));
	e[0].id = 1;
	e[0].weight = 1;
	e[0].vt = 5000 * MS;
	e[1].id = 2;
	e[1].weight = 1;
	e[1].fresh = 1;
	e[1].holdable = 1;
	e[1].wants = 1;
	gs_unman_dfq_step(e, 2, 500 * MS, 300 * MS);
	assert_int_equal(e[1].fresh, 0);
	assert_true(e[1].vt == 5000 * MS);
	assert_false(e[1].stopped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_alone),
		cmocka_unit_test(test_trace_stop_continue),
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_fresh),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
