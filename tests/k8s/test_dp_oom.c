/*
 * test_dp_oom.c — allocation-failure injection for the device plugin's
 * pure modules.  Linked with -Wl,--wrap for malloc/calloc/realloc: the
 * Nth allocation fails, for N = 0, 1, 2, ... until the call succeeds.
 * Every failure must come back as -1 with GS_ENOMEM and leave the state
 * usable; `make sanitize` (ASan) turns any leak on these paths into a
 * failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dp_logic.h"
#include "dp_state.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t s);
void *__wrap_realloc(void *p, size_t n);

static long fail_at = -1;	/* allocation number that fails, -1 none */
static long nalloc;

static int
should_fail(void)
{
	return fail_at >= 0 && nalloc++ == fail_at;
}

void *
__wrap_malloc(size_t n)
{
	return should_fail() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t s)
{
	return should_fail() ? NULL : __real_calloc(n, s);
}

void *
__wrap_realloc(void *p, size_t n)
{
	return should_fail() ? NULL : __real_realloc(p, n);
}

static void
arm(long n)
{
	fail_at = n;
	nalloc = 0;
}

#define U0 "GPU-0"
#define U1 "GPU-1"

static void
test_devices_build_oom(void **state)
{
	struct gs_dp_gpu g[2] = { { 0, U0, 1 }, { 1, U1, 1 } };
	struct gs_dp_device *d = NULL;
	struct gs_error err;
	size_t n = 0;
	long k;

	(void)state;
	for (k = 0;; k++) {
		arm(k);
		if (gs_dp_devices_build(g, 2, 1, &d, &n, &err) == 0)
			break;
		assert_int_equal(err.code, GS_ENOMEM);
	}
	arm(-1);
	assert_true(k >= 1);
	assert_int_equal(n, 200);
	free(d);
}

static void
test_preferred_oom(void **state)
{
	const char *avail[4] = { U0 "::1", U0 "::2", U1 "::1", U1 "::2" };
	const char *out[4];
	struct gs_error err;
	long k;

	(void)state;
	for (k = 0;; k++) {
		arm(k);
		if (gs_dp_preferred(avail, 4, NULL, 0, 2, out, &err) == 0)
			break;
		assert_int_equal(err.code, GS_ENOMEM);
	}
	arm(-1);
	assert_true(k >= 2);
}

static void
test_state_oom(void **state)
{
	const char *ids[2] = { U0 "::1", U0 "::2" };
	const char *c1[2] = { U1 "::5", U1 "::6" };
	struct gs_dp_podctr pc[1] = { { "ns", "pod", "c", c1, 2, NULL } };
	struct gs_dp_action acts[4];
	struct gs_dp_state st;
	struct gs_error err;
	long k;
	int n;

	(void)state;
	gs_dp_state_init(&st);
	for (k = 0;; k++) {
		arm(k);
		if (gs_dp_state_add(&st, 1, U0, 2, ids, 2, 0, &err) == 0)
			break;
		assert_int_equal(err.code, GS_ENOMEM);
		assert_int_equal(st.n, 0);
	}
	arm(-1);
	assert_int_equal(gs_dp_state_add(&st, 2, U1, 2, NULL, 0, 0, &err), 0);
	/* Reconcile adopts 2 (takes the container's IDs): every allocation
	 * on the way may fail, and a later run still works. */
	for (k = 0;; k++) {
		arm(k);
		n = gs_dp_reconcile(&st, pc, 1, 10, 1000, acts, &err);
		if (n >= 0)
			break;
		assert_int_equal(err.code, GS_ENOMEM);
	}
	arm(-1);
	assert_int_equal(n, 1);
	assert_int_equal(acts[0].kind, GS_DP_ACT_LABEL);
	assert_int_equal(gs_dp_state_find(&st, 2)->nids, 2);
	gs_dp_state_clear(&st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_devices_build_oom),
		cmocka_unit_test(test_preferred_oom),
		cmocka_unit_test(test_state_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
