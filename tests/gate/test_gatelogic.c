/*
 * test_gatelogic.c — unit tests of the launch gate's pure logic
 * (runtime/gate/gate_logic.c): batch size, window bound by time and by
 * count, start markers, span accounting, the event ring, idle release.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gate_logic.h"

#define T0 1000000000ull	/* a host clock reading */

static struct gl_params par(void)
{
	struct gl_params p;

	gl_params_default(&p);
	return p;
}

/* Launch n on st, pushing events as the logic asks; returns the number
 * of events pushed. */
static int launch_n(struct gl_stream *st, const struct gl_params *p, int n)
{
	int ev = 0;

	for (int i = 0; i < n; i++) {
		if (gl_need_start(st, p, 0, T0)) {
			assert_true(gl_push(st, 1) >= 0);
			ev++;
		}
		if (gl_launched(st, p)) {
			assert_true(gl_push(st, 0) >= 0);
			ev++;
		}
	}
	return ev;
}

static void test_batch(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;

	(void)state;
	gl_stream_init(&st);
	assert_int_equal(gl_batch(&st, &p), 4);		/* nothing measured */
	st.est_ns = 2000000;				/* 2 ms kernels */
	assert_int_equal(gl_batch(&st, &p), 1);
	st.est_ns = 1000;				/* 1 us kernels */
	assert_int_equal(gl_batch(&st, &p), 32);	/* capped */
	st.est_ns = 50000;			/* 1 ms / (2 * 50 us) */
	assert_int_equal(gl_batch(&st, &p), 10);
}

static void test_start_marker_and_spans(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;
	int ev;

	(void)state;
	gl_stream_init(&st);
	assert_true(gl_need_start(&st, &p, 0, T0));
	ev = launch_n(&st, &p, 4);	/* start marker + one batch event */
	assert_int_equal(ev, 2);
	assert_int_equal(st.n, 2);
	assert_int_equal(gl_unevented(&st), 0);
	assert_false(gl_need_start(&st, &p, 0, T0));	/* work in flight */
	/* the start marker completes: no span, nothing accounted */
	assert_int_equal(gl_span_start(&st), -1);
	assert_int_equal(gl_pop(&st, 12345, T0), 0);
	/* the batch: its span starts at the marker */
	assert_true(gl_span_start(&st) >= 0);
	assert_int_equal(gl_pop(&st, 400000, T0 + 500000), 400000);
	assert_int_equal(st.gpu_ns, 400000);
	assert_int_equal(st.est_ns, 100000);	/* 400 us over 4 launches */
	assert_true(gl_drained(&st));
	/* another stream busy, this one drained for less than gap_ns: the
	 * next span starts at the last event */
	assert_false(gl_need_start(&st, &p, 1, T0 + 500000 + p.gap_ns - 1));
	/* drained longer: a new start marker, the gap is the other
	 * stream's to cover */
	assert_true(gl_need_start(&st, &p, 1, T0 + 500000 + p.gap_ns));
	/* no other stream busy: the job held the GPU through a pause
	 * shorter than the idle grace, so the pause counts as its own */
	assert_true(p.gap_solo_ns > p.gap_ns);
	assert_false(gl_need_start(&st, &p, 0, T0 + 500000 + p.gap_ns));
	assert_false(gl_need_start(&st, &p, 0,
				   T0 + 500000 + p.gap_solo_ns - 1));
	assert_true(gl_need_start(&st, &p, 0, T0 + 500000 + p.gap_solo_ns));
}

static void test_back_to_back_spans(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;

	(void)state;
	gl_stream_init(&st);
	st.est_ns = 500000;		/* 0.5 ms: batch of 1 */
	/* launch_n does not look at the window */
	launch_n(&st, &p, 3);		/* marker + 3 events */
	assert_int_equal(st.n, 4);
	gl_pop(&st, 0, T0);			/* marker */
	assert_int_equal(gl_pop(&st, 500000, T0), 500000);
	/* the next event's span starts at the previous event */
	assert_true(gl_span_start(&st) >= 0);
	assert_int_equal(gl_pop(&st, 600000, T0), 600000);
	assert_int_equal(gl_pop(&st, 700000, T0), 700000);
	assert_int_equal(st.gpu_ns, 1800000);
	assert_true(st.est_ns > 500000 && st.est_ns < 700000);
}

static void test_window_by_time(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;

	(void)state;
	p.window_ns = 1000000;		/* 1 ms */
	gl_stream_init(&st);
	st.est_ns = 300000;		/* 0.3 ms per launch */
	assert_false(gl_window_full(&st, &p));	/* nothing in flight */
	launch_n(&st, &p, 3);		/* 0.9 ms in flight */
	assert_false(gl_window_full(&st, &p));
	launch_n(&st, &p, 1);		/* 1.2 ms */
	assert_true(gl_window_full(&st, &p));
	/* one completes: room again */
	gl_pop(&st, 0, T0);			/* marker */
	gl_pop(&st, 300000, T0);
	assert_false(gl_window_full(&st, &p));

	/* a kernel longer than the window: one in flight at a time */
	gl_stream_init(&st);
	st.est_ns = 2000000;
	launch_n(&st, &p, 1);
	assert_true(gl_window_full(&st, &p));
}

static void test_window_by_count(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;

	(void)state;
	p.max_inflight = 10;
	gl_stream_init(&st);		/* nothing measured yet */
	launch_n(&st, &p, GL_UNMEASURED - 1);
	assert_false(gl_window_full(&st, &p));
	launch_n(&st, &p, 1);
	assert_true(gl_window_full(&st, &p));
	/* measured, tiny launches: the count cap */
	gl_stream_init(&st);
	st.est_ns = 1;
	launch_n(&st, &p, 9);
	assert_false(gl_window_full(&st, &p));
	launch_n(&st, &p, 1);
	assert_true(gl_window_full(&st, &p));
}

static void test_ring(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;
	int pushed = 0;

	(void)state;
	gl_stream_init(&st);
	st.est_ns = 1;
	p.max_batch = 1;
	p.max_inflight = 1000;
	p.window_ns = ~0ull;
	while (gl_push(&st, 0) >= 0) {
		st.launched++;
		pushed++;
		assert_true(pushed <= GL_RING);
	}
	assert_int_equal(pushed, GL_RING);
	/* a full ring is a full window: the gate waits for the oldest */
	assert_true(gl_window_full(&st, &p));
	/* every completion frees exactly one slot (the previous event) */
	gl_pop(&st, 0, T0);
	assert_int_equal(gl_push(&st, 0), -1);	/* prev still in use */
	gl_pop(&st, 0, T0);
	assert_true(gl_push(&st, 0) >= 0);
}

static void test_unpush(void **state)
{
	struct gl_params p = par();
	struct gl_stream st;

	(void)state;
	gl_stream_init(&st);
	launch_n(&st, &p, 4);
	st.launched += 2;
	assert_int_equal(gl_unevented(&st), 2);
	assert_true(gl_push(&st, 0) >= 0);
	assert_int_equal(gl_unevented(&st), 0);
	gl_unpush(&st);			/* the record failed */
	assert_int_equal(gl_unevented(&st), 2);
	assert_int_equal(st.n, 2);
}

static void test_idle(void **state)
{
	(void)state;
	assert_false(gl_idle_due(0, 0, 10000000, 2000000));  /* in flight */
	assert_false(gl_idle_due(1, 9000000, 10000000, 2000000));
	assert_true(gl_idle_due(1, 8000000, 10000000, 2000000));
	assert_true(gl_idle_due(1, 10000000, 10000000, 0));
	assert_false(gl_idle_due(1, 11000000, 10000000, 0));  /* clock */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_start_marker_and_spans),
		cmocka_unit_test(test_back_to_back_spans),
		cmocka_unit_test(test_window_by_time),
		cmocka_unit_test(test_window_by_count),
		cmocka_unit_test(test_ring),
		cmocka_unit_test(test_unpush),
		cmocka_unit_test(test_idle),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
