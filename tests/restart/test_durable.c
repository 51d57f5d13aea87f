/*
 * test_durable.c — unit tests of the allocation table's writer thread
 * (node-agent/durable.c) on a real loop: a table handed over is written
 * and reported on the loop thread; one write at a time (EBUSY); a write
 * that fails is reported with the file and the error, and the table
 * handed over is the writer's either way.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "loop.h"
#include "state.h"

struct fx {
	char dir[64];
	char path[128];
	struct gs_loop *loop;
	struct gs_durable *d;
	int calls, ok;
	struct gs_error err;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct gs_error err;

	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/gs-test-durable.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/allocs", f->dir);
	f->loop = gs_loop_new(&err);
	if (f->loop == NULL || gs_durable_new(f->loop, &f->d, &err) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	gs_durable_free(f->d);
	gs_loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void done(void *arg, const struct gs_error *err)
{
	struct fx *f = arg;

	f->calls++;
	f->ok = err == NULL;
	if (err != NULL)
		f->err = *err;
	gs_loop_stop(f->loop);
}

static void too_long(struct gs_loop *l, uint64_t now, void *arg)
{
	(void)now;
	(void)arg;
	gs_loop_stop(l);
}

/* Run the loop until the callback (or 10 s). */
static void run(struct fx *f)
{
	struct gs_error err;

	assert_int_equal(gs_loop_add_tick(f->loop, 10000000000ull, too_long,
					  f, &err), 0);
	assert_int_equal(gs_loop_run(f->loop, &err), 0);
}

static void table(struct gs_state *st, uint64_t seq, unsigned n)
{
	struct gs_state_alloc a;
	struct gs_error err;

	memset(st, 0, sizeof(*st));
	st->seq = seq;
	st->next_id = n + 1;
	for (unsigned i = 1; i <= n; i++) {
		memset(&a, 0, sizeof(a));
		a.id = i;
		a.shares = 10;
		a.weight = i;
		snprintf(a.labels.job, sizeof(a.labels.job), "%u", 100 + i);
		assert_int_equal(gs_state_add(st, &a, &err), 0);
	}
}

static void test_write_and_busy(void **state)
{
	struct fx *f = *state;
	struct gs_state st, st2, back;
	struct gs_error err;

	table(&st, 1, 3);
	assert_int_equal(gs_durable_save(f->d, f->path, &st, done, f, &err),
			 0);
	assert_null(st.v);	/* handed over */
	assert_int_equal(gs_durable_busy(f->d), 1);
	/* one write at a time, until its callback ran on the loop */
	table(&st2, 2, 1);
	assert_int_equal(gs_durable_save(f->d, f->path, &st2, done, f, &err),
			 -1);
	assert_int_equal(err.code, GS_EBUSY);
	assert_non_null(st2.v);	/* still the caller's */
	gs_state_clear(&st2);
	run(f);
	assert_int_equal(f->calls, 1);
	assert_int_equal(f->ok, 1);
	assert_int_equal(gs_durable_busy(f->d), 0);
	assert_int_equal(gs_state_load(f->path, &back, NULL, &err), 1);
	assert_int_equal(back.n, 3);
	assert_int_equal(back.seq, 1);
	assert_int_equal(back.v[2].weight, 3);
	gs_state_clear(&back);
}

static void test_write_fails(void **state)
{
	struct fx *f = *state;
	struct gs_state st;
	struct gs_error err;
	char bad[160];

	snprintf(bad, sizeof(bad), "%s/no/such/dir/allocs", f->dir);
	table(&st, 1, 2);
	assert_int_equal(gs_durable_save(f->d, bad, &st, done, f, &err), 0);
	run(f);
	assert_int_equal(f->calls, 1);
	assert_int_equal(f->ok, 0);
	assert_int_equal(f->err.code, GS_EIO);
	assert_non_null(strstr(f->err.msg, "no/such/dir/allocs.1"));
	assert_non_null(strstr(f->err.msg, "No such file"));
	/* and the writer takes the next one */
	table(&st, 1, 1);
	assert_int_equal(gs_durable_save(f->d, f->path, &st, done, f, &err),
			 0);
	run(f);
	assert_int_equal(f->calls, 2);
	assert_int_equal(f->ok, 1);
}

/* A write cut short (here by RLIMIT_FSIZE: EFBIG, as a full disk gives
 * ENOSPC) empties its slot, so the previous table, in the other slot, is
 * what a restart finds. */
static void test_failed_slot_emptied(void **state)
{
	struct fx *f = *state;
	struct gs_state st, back;
	struct gs_error err;
	struct rlimit old, lim;
	struct stat sb;
	char slot[160];

	table(&st, 1, 1);
	assert_int_equal(gs_state_save(f->path, &st, &err), 0);
	gs_state_clear(&st);
	table(&st, 2, 2);
	assert_int_equal(gs_state_save(f->path, &st, &err), 0);
	gs_state_clear(&st);
	snprintf(slot, sizeof(slot), "%s.1", f->path);
	assert_int_equal(stat(slot, &sb), 0);
	/* generation 3 (slot 1) is larger than the limit */
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)sb.st_size + 16;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	table(&st, 3, 40);
	assert_int_equal(gs_state_save(f->path, &st, &err), -1);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(err.code, GS_EIO);
	gs_state_clear(&st);
	assert_int_equal(stat(slot, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	assert_int_equal(gs_state_load(f->path, &back, NULL, &err), 1);
	assert_int_equal(back.seq, 2);
	assert_int_equal(back.n, 2);
	gs_state_clear(&back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_and_busy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_write_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_slot_emptied,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
