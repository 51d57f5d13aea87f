/*
 * test_loop_alloc.c — unit tests of two agent modules that need no
 * daemon: the event loop (node-agent/loop.c: fd callbacks, deleting fds
 * from inside callbacks, the one-shot wakeup, periodic ticks) and the
 * allocation table (node-agent/alloc.c: ids, lookup and iteration order,
 * observers, control page creation and its seals).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc.h"
#include "loop.h"

/* ---- loop ---- */

struct pair_ctx {
	int fds[2][2];		/* two pipes */
	int calls[2];
};

/* The first callback deletes and closes the other pipe's fd: the other
 * callback must not run even if its event is in the same batch. */
static void on_pipe(struct gs_loop *l, int fd, uint32_t ev, void *arg)
{
	struct pair_ctx *c = arg;
	int me = fd == c->fds[0][0] ? 0 : 1;
	char b;

	(void)ev;
	c->calls[me]++;
	if (read(fd, &b, 1) < 0)
		fail_msg("read: %s", strerror(errno));
	gs_loop_del_fd(l, c->fds[1 - me][0]);
	gs_loop_stop(l);
}

static void test_loop_delete_in_callback(void **state)
{
	struct pair_ctx c;
	struct gs_error err;
	struct gs_loop *l = gs_loop_new(&err);

	(void)state;
	assert_non_null(l);
	memset(&c, 0, sizeof(c));
	assert_int_equal(pipe(c.fds[0]), 0);
	assert_int_equal(pipe(c.fds[1]), 0);
	assert_int_equal(gs_loop_add_fd(l, c.fds[0][0], EPOLLIN, on_pipe, &c,
					&err), 0);
	assert_int_equal(gs_loop_add_fd(l, c.fds[1][0], EPOLLIN, on_pipe, &c,
					&err), 0);
	/* both readable before the loop runs: one batch */
	assert_int_equal(write(c.fds[0][1], "x", 1), 1);
	assert_int_equal(write(c.fds[1][1], "y", 1), 1);
	assert_int_equal(gs_loop_run(l, &err), 0);
	assert_int_equal(c.calls[0] + c.calls[1], 1);
	/* mod on a deleted fd fails cleanly */
	assert_int_equal(gs_loop_mod_fd(l, c.calls[0] ? c.fds[1][0] :
					c.fds[0][0], EPOLLIN, &err), -1);
	assert_int_equal(err.code, GS_ENOENT);
	gs_loop_free(l);
	close(c.fds[0][0]);
	close(c.fds[0][1]);
	close(c.fds[1][0]);
	close(c.fds[1][1]);
}

struct timer_ctx {
	uint64_t wake_at, woke, ticks;
	uint64_t first_tick, last_tick;
};

static void on_wake(struct gs_loop *l, uint64_t now, void *arg)
{
	struct timer_ctx *t = arg;

	(void)l;
	t->woke = now;
}

static void on_tick(struct gs_loop *l, uint64_t now, void *arg)
{
	struct timer_ctx *t = arg;

	if (t->ticks++ == 0)
		t->first_tick = now;
	t->last_tick = now;
	if (t->ticks == 5)
		gs_loop_stop(l);
}

static void test_loop_timers(void **state)
{
	struct timer_ctx t;
	struct gs_error err;
	struct gs_loop *l = gs_loop_new(&err);
	uint64_t t0;

	(void)state;
	assert_non_null(l);
	memset(&t, 0, sizeof(t));
	t0 = gs_now_ns();
	t.wake_at = t0 + 3000000;	/* 3 ms */
	gs_loop_set_wakeup(l, t.wake_at, on_wake, &t);
	assert_int_equal(gs_loop_add_tick(l, 10000000, on_tick, &t, &err), 0);
	assert_int_equal(gs_loop_add_tick(l, 0, on_tick, &t, &err), -1);
	assert_int_equal(gs_loop_run(l, &err), 0);
	/* the wakeup fired once, not early */
	assert_true(t.woke >= t.wake_at);
	assert_true(t.woke < t.first_tick);
	/* five ticks, never early */
	assert_int_equal(t.ticks, 5);
	assert_true(t.first_tick >= t0 + 10000000);
	assert_true(t.last_tick >= t0 + 5 * 10000000ull);
	/* a disarmed wakeup never fires */
	t.woke = 0;
	t.ticks = 0;
	gs_loop_set_wakeup(l, UINT64_MAX, on_wake, &t);
	gs_loop_set_tick_period(l, on_tick, &t, 2000000);
	assert_int_equal(gs_loop_run(l, &err), 0);
	assert_int_equal(t.woke, 0);
	gs_loop_free(l);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_stop(struct gs_loop *l, uint64_t now, void *arg)
{
	(void)now;
	(void)arg;
	gs_loop_stop(l);
}

/* gs_loop_set_spin: until then the loop looks for events without
 * sleeping (it uses CPU time), timers still fire on time; after it, or
 * with 0, it sleeps in epoll_wait. */
static void test_loop_spin(void **state)
{
	struct gs_error err;
	struct gs_loop *l = gs_loop_new(&err);
	uint64_t t0, cpu;

	(void)state;
	assert_non_null(l);
	/* 40 ms of polling, stopped by a wakeup at 40 ms */
	t0 = gs_now_ns();
	gs_loop_set_spin(l, t0 + 40000000);
	gs_loop_set_wakeup(l, t0 + 40000000, on_stop, NULL);
	cpu = thread_cpu_ns();
	assert_int_equal(gs_loop_run(l, &err), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_true(gs_now_ns() >= t0 + 40000000);
	/* polls (a loaded machine may give part of it away: sched_yield) */
	assert_true(cpu >= 4000000);
	/* no polling: the same wait sleeps */
	t0 = gs_now_ns();
	gs_loop_set_spin(l, 0);
	gs_loop_set_wakeup(l, t0 + 40000000, on_stop, NULL);
	cpu = thread_cpu_ns();
	assert_int_equal(gs_loop_run(l, &err), 0);
	cpu = thread_cpu_ns() - cpu;
	assert_true(gs_now_ns() >= t0 + 40000000);
	assert_true(cpu < 4000000);
	gs_loop_free(l);
}

/* ---- allocation table ---- */

struct obs_ctx {
	int created, state, closed;
	uint64_t last_id;
};

static void observer(void *ctx, int ev, const struct gs_alloc *a)
{
	struct obs_ctx *o = ctx;

	o->last_id = a->id;
	if (ev == GS_AEV_CREATED)
		o->created++;
	else if (ev == GS_AEV_STATE)
		o->state++;
	else if (ev == GS_AEV_CLOSED)
		o->closed++;
}

static void test_alloc_table(void **state)
{
	struct gs_alloc_table *t = gs_alloc_table_new();
	struct gs_alloc_req req;
	struct gs_alloc *a;
	struct obs_ctx o;
	uint64_t ids[40], expect;
	unsigned i, n;

	(void)state;
	assert_non_null(t);
	memset(&o, 0, sizeof(o));
	assert_int_equal(gs_alloc_observe(t, observer, &o), 0);
	memset(&req, 0, sizeof(req));
	req.shares = 2;
	req.weight = 2;
	for (i = 0; i < 40; i++) {
		req.uid = i;
		a = gs_alloc_add(t, &req, 1000 + i);
		assert_non_null(a);
		ids[i] = a->id;
		assert_int_equal(a->state, GS_ASTATE_CREATED);
		assert_int_equal(a->ctl_fd, -1);
	}
	assert_int_equal(o.created, 40);
	assert_int_equal(gs_alloc_count(t), 40);
	/* remove every third; ids are never reused */
	for (i = 0; i < 40; i += 3)
		gs_alloc_remove(t, ids[i]);
	assert_int_equal(o.closed, 14);
	assert_null(gs_alloc_get(t, ids[0]));
	assert_non_null(gs_alloc_get(t, ids[1]));
	assert_int_equal(gs_alloc_get(t, ids[1])->uid, 1);
	a = gs_alloc_add(t, &req, 0);
	assert_true(a->id > ids[39]);
	/* iteration: ascending ids, every live record once */
	n = 0;
	expect = 0;
	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		assert_true(a->id > expect);
		expect = a->id;
		n++;
	}
	assert_int_equal(n, gs_alloc_count(t));
	assert_int_equal(n, 40 - 14 + 1);
	/* gs_alloc_after: the first id above any id, present or not */
	assert_int_equal(gs_alloc_after(t, 0)->id, ids[1]);
	assert_int_equal(gs_alloc_after(t, ids[0])->id, ids[1]);
	assert_int_equal(gs_alloc_after(t, ids[1])->id, ids[2]);
	assert_int_equal(gs_alloc_after(t, ids[2])->id, ids[4]);
	assert_true(gs_alloc_after(t, ids[39])->id > ids[39]);
	assert_null(gs_alloc_after(t, UINT64_MAX));
	gs_alloc_remove(t, 999999); /* unknown: no-op */
	assert_int_equal(o.closed, 14);
	/* an observer that unobserves hears nothing more; others still do */
	{
		struct obs_ctx o2;

		memset(&o2, 0, sizeof(o2));
		assert_int_equal(gs_alloc_observe(t, observer, &o2), 0);
		gs_alloc_unobserve(t, observer, &o);
		gs_alloc_unobserve(t, observer, &o); /* twice: no-op */
		gs_alloc_remove(t, ids[1]);
		assert_int_equal(o.closed, 14);
		assert_int_equal(o2.closed, 1);
		gs_alloc_unobserve(t, observer, &o2);
		gs_alloc_remove(t, ids[2]);
		assert_int_equal(o2.closed, 1);
	}
	gs_alloc_table_free(t);
	gs_alloc_table_free(NULL);
}

static void test_control_page(void **state)
{
	struct gs_alloc_table *t = gs_alloc_table_new();
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_alloc *a;
	struct gs_error err;
	struct gs_ctlpage *p;
	struct stat sb;
	int seals;

	(void)state;
	memset(&req, 0, sizeof(req));
	req.shares = 10;
	req.gpu = 3;
	a = gs_alloc_add(t, &req, 5);
	assert_int_equal(gs_alloc_make_page(a, 3, 777, &err), 0);
	assert_true(a->ctl_fd >= 0);
	p = a->page;
	assert_int_equal(p->magic, GS_CTL_MAGIC);
	assert_int_equal(p->version, GS_CTL_VERSION);
	assert_int_equal(p->alloc_id, a->id);
	assert_int_equal(p->gpu_index, 3);
	assert_int_equal(p->created_ns, 777);
	assert_int_equal(p->page_size, GS_CTL_SIZE);
	assert_int_equal(fstat(a->ctl_fd, &sb), 0);
	assert_int_equal(sb.st_size, GS_CTL_SIZE);
	seals = fcntl(a->ctl_fd, F_GET_SEALS);
	assert_true(seals & F_SEAL_SHRINK);
	assert_true(seals & F_SEAL_GROW);
	assert_true(seals & F_SEAL_SEAL);
	assert_int_equal(ftruncate(a->ctl_fd, 100), -1);
	assert_int_equal(fcntl(a->ctl_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	/* counters the job writes show up in the wire view */
	p->block_tasks = 42;
	gs_alloc_to_info(a, &info);
	assert_int_equal(info.block_tasks, 42);
	assert_int_equal(info.gpu, 3);
	assert_int_equal(info.shares, 10);
	gs_alloc_table_free(t); /* unmaps and closes */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop_delete_in_callback),
		cmocka_unit_test(test_loop_timers),
		cmocka_unit_test(test_loop_spin),
		cmocka_unit_test(test_alloc_table),
		cmocka_unit_test(test_control_page),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
