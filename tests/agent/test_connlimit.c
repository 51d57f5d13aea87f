/*
 * test_connlimit.c — unit test of the accept rule (node-agent/connlimit.c):
 * per-uid quota, root's reserve, the total, counts going back down, and
 * many uids (the sorted table's inserts and removals).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "connlimit.h"

static int add(struct gs_connlimit *cl, uid_t uid, char *why, size_t n)
{
	/* max_clients 20, root's reserve 4, 5 per uid */
	return gs_connlimit_add(cl, uid, 20, 4, 5, why, n);
}

static void test_rule(void **state)
{
	struct gs_connlimit *cl = gs_connlimit_new();
	char why[160];
	int i;

	(void)state;
	assert_non_null(cl);
	for (i = 0; i < 5; i++)
		assert_int_equal(add(cl, 1000, why, sizeof(why)), 0);
	assert_int_equal(add(cl, 1000, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "uid 1000 has 5 connections open "
				    "(max_clients_per_uid)"));
	/* others still get in, up to root's reserve: 16 non-root */
	for (i = 0; i < 5; i++)
		assert_int_equal(add(cl, 1001, why, sizeof(why)), 0);
	for (i = 0; i < 5; i++)
		assert_int_equal(add(cl, 999, why, sizeof(why)), 0);
	assert_int_equal(add(cl, 7, why, sizeof(why)), 0);
	assert_int_equal(gs_connlimit_total(cl), 16);
	assert_int_equal(add(cl, 8, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "root_reserved_clients"));
	/* root takes the reserve, then the total stops it too */
	for (i = 0; i < 4; i++)
		assert_int_equal(add(cl, 0, why, sizeof(why)), 0);
	assert_int_equal(add(cl, 0, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "(max_clients)"));
	assert_int_equal(gs_connlimit_count(cl, 0), 4);
	/* a close frees a slot of that uid */
	gs_connlimit_del(cl, 1000);
	gs_connlimit_del(cl, 0);
	assert_int_equal(gs_connlimit_count(cl, 1000), 4);
	assert_int_equal(add(cl, 1000, why, sizeof(why)), -1); /* reserve */
	assert_int_equal(add(cl, 0, why, sizeof(why)), 0);
	/* root leaves: its reserve is free again, so 1000 (one below its
	 * quota) gets back in */
	for (i = 0; i < 4; i++)
		gs_connlimit_del(cl, 0);
	gs_connlimit_del(cl, 7);
	assert_int_equal(gs_connlimit_count(cl, 7), 0);
	assert_int_equal(gs_connlimit_count(cl, 0), 0);
	assert_int_equal(gs_connlimit_total(cl), 14);
	assert_int_equal(add(cl, 1000, why, sizeof(why)), 0);
	gs_connlimit_del(cl, 12345);	/* unknown uid: no change */
	assert_int_equal(gs_connlimit_total(cl), 15);
	gs_connlimit_free(cl);
	gs_connlimit_free(NULL);
}

static void test_many_uids(void **state)
{
	struct gs_connlimit *cl = gs_connlimit_new();
	char why[160];
	unsigned u;

	(void)state;
	/* inserted out of order, removed out of order */
	for (u = 0; u < 1000; u++)
		assert_int_equal(gs_connlimit_add(cl, (uid_t)((u * 7919) % 1000
							       + 1),
						  5000, 0, 2, why, sizeof(why)),
				 0);
	for (u = 1; u <= 1000; u++)
		assert_int_equal(gs_connlimit_count(cl, (uid_t)u), 1);
	for (u = 1; u <= 1000; u += 2)
		gs_connlimit_del(cl, (uid_t)u);
	for (u = 1; u <= 1000; u++)
		assert_int_equal(gs_connlimit_count(cl, (uid_t)u), u % 2 == 0);
	assert_int_equal(gs_connlimit_total(cl), 500);
	gs_connlimit_free(cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule),
		cmocka_unit_test(test_many_uids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
