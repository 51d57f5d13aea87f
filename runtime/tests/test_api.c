/*
 * test_api.c — libgshare's C API on any machine, GPU or not: calls before
 * gs_init, bad GSHARE_* settings, codes and messages, a refused second
 * init, and a clean gs_finalize.  Without a GPU gs_init must fail with
 * GSHARE_ECUDA and a message instead of crashing; with one it succeeds and
 * bad launches are refused.  Links the shared library, so it also checks
 * that exactly the public API is exported.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gshare.h"
#include "gshare_device.cuh"

static void
test_before_init(void **state)
{
	struct gs_stats st;
	struct gs_dim3 one = { 1, 1, 1 };

	(void)state;
	assert_int_equal(gs_attached(), -1);
	assert_int_equal(gs_synchronize(), GSHARE_ESTATE);
	assert_non_null(strstr(gs_errmsg(), "before gs_init"));
	assert_int_equal(gs_launch(NULL, one, one, 0, NULL, 0, NULL),
			 GSHARE_ESTATE);
	assert_int_equal(gs_stats(&st), GSHARE_ESTATE);
	assert_int_equal(gs_finalize(), GSHARE_ESTATE);
	assert_int_equal(gs_eviction_samples(NULL, 0), 0);
	assert_int_equal(gs_resize_samples(NULL, 0), 0);
	{
		struct gs_taskpool *p = NULL;
		struct gs_taskpool_stats ps;

		assert_int_equal(gs_taskpool_new(0, 0, &p), GSHARE_ESTATE);
		assert_null(p);
		assert_int_equal(gs_taskpool_free(NULL), GSHARE_OK);
		assert_int_equal(gs_task_wait_all(NULL), GSHARE_ESTATE);
		assert_int_equal(gs_taskpool_stats(NULL, &ps), GSHARE_EINVAL);
	}
}

static void
test_strings(void **state)
{
	int rc;

	(void)state;
	assert_string_equal(gs_version(), "1.2");
	for (rc = 0; rc >= -20; rc--)
		assert_non_null(gs_strerror(rc));
	assert_string_equal(gs_strerror(GSHARE_ECONFIG),
			    "bad GSHARE_* environment setting");
	assert_string_equal(gs_strerror(12345), "unknown error");
}

static void
test_bad_env(void **state)
{
	(void)state;
	setenv("GSHARE_FORCE_SUSPEND_US", "5000:100", 1);
	assert_int_equal(gs_init(0), GSHARE_ECONFIG);
	assert_non_null(strstr(gs_errmsg(), "GSHARE_FORCE_SUSPEND_US"));
	unsetenv("GSHARE_FORCE_SUSPEND_US");
	setenv("GSHARE_BATCH", "lots", 1);
	assert_int_equal(gs_init(0), GSHARE_ECONFIG);
	assert_non_null(strstr(gs_errmsg(), "GSHARE_BATCH"));
	unsetenv("GSHARE_BATCH");
	assert_int_equal(gs_init(0x80), GSHARE_EINVAL);
	/* nothing stayed initialized */
	assert_int_equal(gs_attached(), -1);
}

static void
test_init(void **state)
{
	struct gs_dim3 one = { 1, 1, 1 }, zero = { 0, 1, 1 };
	struct gs_kernel k;
	struct gs_stats st;
	int rc, arg = 0;

	(void)state;
	unsetenv("GSHARE_SOCKET");
	unsetenv("GSHARE_ALLOC");
	rc = gs_init(0);
	if (rc != GSHARE_OK) {
		/* no GPU here: a CUDA error with its name, nothing else */
		assert_int_equal(rc, GSHARE_ECUDA);
		assert_true(strlen(gs_errmsg()) > 0);
		assert_int_equal(gs_attached(), -1);
		return;
	}
	assert_int_equal(gs_attached(), 0);
	assert_int_equal(gs_init(0), GSHARE_ESTATE);
	memset(&k, 0, sizeof(k));
	k.kabi = GSHARE_KABI + 1;
	k.name = "fake";
	k.args_size = sizeof(arg);
	assert_int_equal(gs_launch(&k, one, one, 0, &arg, sizeof(arg), NULL),
			 GSHARE_EVERSION);
	k.kabi = 0;
	assert_int_equal(gs_launch(&k, one, one, 0, &arg, sizeof(arg), NULL),
			 GSHARE_EVERSION);
	k.kabi = GSHARE_KABI;
	assert_int_equal(gs_launch(&k, one, one, 0, &arg, 2, NULL),
			 GSHARE_EINVAL);
	assert_int_equal(gs_launch(&k, zero, one, 0, &arg, sizeof(arg), NULL),
			 GSHARE_EINVAL);
	assert_int_equal(gs_launch(&k, one, zero, 0, &arg, sizeof(arg), NULL),
			 GSHARE_EINVAL);
	assert_int_equal(gs_launch(NULL, one, one, 0, &arg, sizeof(arg), NULL),
			 GSHARE_EINVAL);
	assert_int_equal(gs_synchronize(), GSHARE_OK);
	assert_int_equal(gs_stats(&st), GSHARE_OK);
	assert_true(st.launches == 0);
	{
		/* task pools: bad pools and spawns are refused, an empty
		 * pool waits and frees */
		struct gs_taskpool *p = NULL;
		struct gs_task t;

		assert_int_equal(gs_taskpool_new(0, 100, &p), GSHARE_EINVAL);
		assert_int_equal(gs_taskpool_new(1u << 23, 0, &p),
				 GSHARE_EINVAL);
		assert_int_equal(gs_taskpool_new(0, 0, &p), GSHARE_OK);
		memset(&t, 0, sizeof(t));
		t.tabi = GS__TABI + 1;
		t.name = "fake";
		t.args_size = sizeof(arg);
		assert_int_equal(gs_task_spawn(p, &t, 48, 0, &arg,
					       sizeof(arg), 0, NULL),
				 GSHARE_EINVAL);
		assert_non_null(strstr(gs_errmsg(), "multiple of 32"));
		assert_int_equal(gs_task_spawn(p, &t, 32, 1u << 20, &arg,
					       sizeof(arg), 0, NULL),
				 GSHARE_EINVAL);
		assert_int_equal(gs_task_spawn(p, &t, 32, 0, &arg, 2, 0,
					       NULL), GSHARE_EINVAL);
		assert_int_equal(gs_task_spawn(p, &t, 32, 0, &arg,
					       sizeof(arg), GS_TASK_GROUPS,
					       NULL), GSHARE_EINVAL);
		assert_int_equal(gs_task_spawn(p, &t, 32, 0, &arg,
					       sizeof(arg), 0, NULL),
				 GSHARE_EVERSION);
		assert_int_equal(gs_task_wait(p, 0), GSHARE_EINVAL);
		assert_int_equal(gs_task_wait_group(p, 7), GSHARE_OK);
		assert_int_equal(gs_task_wait_all(p), GSHARE_OK);
		assert_int_equal(gs_taskpool_free(p), GSHARE_OK);
	}
	assert_int_equal(gs_finalize(), GSHARE_OK);
	assert_int_equal(gs_attached(), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_before_init),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_bad_env),
		cmocka_unit_test(test_init),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
