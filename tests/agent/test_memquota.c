/*
 * test_memquota.c — unit tests of memquota.c: default limits per the
 * site's `memory` policy and reserve, memory admission with and without
 * oversubscription, GPUs of unknown memory, and the figures in messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "memquota.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

static void cfg(struct gs_agent_config *c)
{
	gs_agent_config_defaults(c);	/* proportional, 1G and 512M reserves */
}

static void test_usable(void **state)
{
	struct gs_agent_config c;

	(void)state;
	cfg(&c);
	assert_int_equal(gs_mem_usable(&c, 80 * GIB), 79 * GIB);
	assert_int_equal(gs_mem_usable(&c, GIB), 0);
	assert_int_equal(gs_mem_usable(&c, 0), 0);
	c.memory_reserve = 0;
	assert_int_equal(gs_mem_usable(&c, 80 * GIB), 80 * GIB);
}

static void test_proportional(void **state)
{
	struct gs_agent_config c;
	struct gs_error err;
	uint64_t l = 1, sum = 0;
	uint32_t s;

	(void)state;
	cfg(&c);
	/* 30 % of 80896M in whole MiB, less the 512M context reserve */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 30, 0, &l,
				       &err), 0);
	assert_int_equal(l, 24268 * MIB - 512 * MIB);
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 100, 0, &l,
				       &err), 0);
	assert_int_equal(l, 79 * GIB - 512 * MIB);
	/* a GPU cut in 100 one-share allocations: the defaults and their
	 * contexts all fit */
	for (s = 0; s < 100; s++) {
		assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, sum, s, 1, 0,
					       &l, &err), 0);
		sum += l;
	}
	assert_true(sum + 100 * 512 * MIB <= 79 * GIB);
	/* the H100 case: 30 % and 70 %, limits and two contexts within
	 * what the GPU offers, the second admitted beside the first */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 30, 0, &l,
				       &err), 0);
	sum = l;
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, sum, 1, 70, 0, &l,
				       &err), 0);
	assert_true(sum + l + 2 * 512 * MIB <= 79 * GIB);
	/* without the context reserve: the old figures */
	c.memory_context_reserve = 0;
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 30, 0, &l,
				       &err), 0);
	assert_int_equal(l, 24268 * MIB);
	c.memory_context_reserve = 512 * MIB;
	/* shares_per_gpu other than 100 */
	c.shares_per_gpu = 7;
	assert_int_equal(gs_mem_settle(&c, 0, 7 * GIB + GIB, 0, 0, 1, 0, &l,
				       &err), 0);
	assert_int_equal(l, GIB - 512 * MIB);
	/* a tiny GPU: one share of it is not even a MiB */
	c.shares_per_gpu = 100;
	assert_int_equal(gs_mem_settle(&c, 2, GIB + 50 * MIB, 0, 0, 1, 0, &l,
				       &err), -1);
	assert_int_equal(err.code, GS_EBUSY);
	assert_non_null(strstr(err.msg, "GPU 2"));
	/* shares whose part is the context reserve and no more */
	assert_int_equal(gs_mem_settle(&c, 3, 11 * GIB, 0, 0, 5, 0, &l,
				       &err), -1);
	assert_int_equal(err.code, GS_EBUSY);
	assert_non_null(strstr(err.msg, "memory_context_reserve of 512M"));
}

static void test_asked(void **state)
{
	struct gs_agent_config c;
	struct gs_error err;
	uint64_t l = 1;

	(void)state;
	cfg(&c);
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 10, 20 * GIB,
				       &l, &err), 0);
	assert_int_equal(l, 20 * GIB);
	/* the whole usable memory less the context reserve, and no more */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 10,
				       79 * GIB - 512 * MIB, &l, &err), 0);
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 10,
				       79 * GIB - 512 * MIB + 1, &l, &err),
			 -1);
	assert_int_equal(err.code, GS_EINVAL);
	/* above what the GPU offers: never, even oversubscribed */
	c.memory_oversubscribe = 1;
	assert_int_equal(gs_mem_settle(&c, 1, 80 * GIB, 0, 0, 10,
				       79 * GIB + 1, &l, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_non_null(strstr(err.msg, "GPU 1"));
	assert_non_null(strstr(err.msg, "80384M"));
	assert_non_null(strstr(err.msg, "80G"));
	assert_non_null(strstr(err.msg, "1G"));
	assert_non_null(strstr(err.msg, "512M"));
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 0, 0, 10, MIB - 1, &l,
				       &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	/* beside another allocation (70G and its 512M context): refused
	 * exactly past the last byte that leaves this one's context */
	c.memory_oversubscribe = 0;
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 70 * GIB, 1, 10,
				       8 * GIB, &l, &err), 0);
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 70 * GIB, 1, 10,
				       8 * GIB + 1, &l, &err), -1);
	assert_int_equal(err.code, GS_EBUSY);
	assert_non_null(strstr(err.msg, "8704M of 79G left"));
	/* placed beyond the GPU (oversubscribed earlier): nothing left */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 100 * GIB, 1, 10, MIB,
				       &l, &err), -1);
	assert_int_equal(err.code, GS_EBUSY);
	/* so many allocations that their reserves overflow: nothing left */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, UINT64_MAX - GIB,
				       UINT32_MAX, 10, MIB, &l, &err), -1);
	c.memory_oversubscribe = 1;
	l = 0;
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 100 * GIB, 1, 10,
				       9 * GIB, &l, &err), 0);
	assert_int_equal(l, 9 * GIB);
}

static void test_unlimited_unknown(void **state)
{
	struct gs_agent_config c;
	struct gs_error err;
	uint64_t l = 1;

	(void)state;
	cfg(&c);
	c.memory = GS_MEM_UNLIMITED;
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 79 * GIB, 1, 50, 0,
				       &l, &err), 0);
	assert_int_equal(l, 0);		/* no limit, nothing placed */
	/* a limit asked for is still one, and still admitted */
	assert_int_equal(gs_mem_settle(&c, 0, 80 * GIB, 79 * GIB, 1, 50, GIB,
				       &l, &err), -1);
	assert_int_equal(err.code, GS_EBUSY);
	/* unknown memory: no default, the job's word unchecked */
	c.memory = GS_MEM_PROPORTIONAL;
	l = 1;
	assert_int_equal(gs_mem_settle(&c, 0, 0, 0, 0, 50, 0, &l, &err), 0);
	assert_int_equal(l, 0);
	assert_int_equal(gs_mem_settle(&c, 0, 0, 0, 0, 50, 500 * GIB, &l,
				       &err), 0);
	assert_int_equal(l, 500 * GIB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usable),
		cmocka_unit_test(test_proportional),
		cmocka_unit_test(test_asked),
		cmocka_unit_test(test_unlimited_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
