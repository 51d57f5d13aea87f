/*
 * test_acct_oom.c — allocation failures in the accounting tick and the
 * store batches: every malloc/calloc/realloc is made to fail in turn
 * (linker --wrap); each failure must come back as -1 with GS_ENOMEM (or,
 * for the read-side snapshot, as an empty view), never as a crash, and
 * the accounting state must keep working once memory is back.  Run under
 * `make sanitize` it also proves nothing leaks on those paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "acct.h"

#define S 1000000000ull

static int fail_at = -1;	/* the Nth allocation fails; -1: none */
static int nalloc;

void *__real_malloc(size_t n);
void *__real_calloc(size_t m, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t m, size_t n);
void *__wrap_realloc(void *p, size_t n);

static int
fail_now(void)
{
	return fail_at >= 0 && nalloc++ == fail_at;
}

void *
__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t m, size_t n)
{
	return fail_now() ? NULL : __real_calloc(m, n);
}

void *
__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

static struct gs_ctlpage pages[3];

/* new, open 3 allocations, attach, one tick, close one, another tick.
 * Returns 0, or -1 at the first failure (which must be ENOMEM). */
static int
scenario(void)
{
	struct gs_acct *a = NULL;
	struct gs_store_batch *b = NULL;
	struct gs_acct_meta m;
	struct gs_error err;
	int rv = -1;

	if (gs_acct_new(NULL, &a, &err) < 0)
		goto out_check;
	for (uint64_t i = 1; i <= 3; i++) {
		memset(&m, 0, sizeof(m));
		m.agent_id = i;
		m.gpu = (int32_t)(i % 2);
		m.shares = 10;
		if (gs_acct_open(a, &m, 0, 0, &err) < 0)
			goto out_check;
		gs_acct_attach(a, i, &pages[i - 1], 0);
		pages[i - 1].gpu_ns += S / 2;
		pages[i - 1].suspensions++;
		pages[i - 1].evict_ns_sum += 1000;
	}
	if (gs_acct_tick(a, S, 1, &b, &err) < 0)
		goto out_check;
	if (b->nsamples != 3 || b->nallocs != 3)
		fail_msg("tick wrote %u samples, %u rows", b->nsamples,
			 b->nallocs);
	gs_store_batch_free(b);
	b = NULL;
	gs_acct_close(a, 2, GS_SST_COMPLETED, 2, S + S / 2);
	if (gs_acct_tick(a, 2 * S, 2, &b, &err) < 0)
		goto out_check;
	gs_store_batch_free(b);
	b = NULL;
	rv = 0;
	goto out_free;
out_check:
	assert_int_equal(err.code, GS_ENOMEM);
out_free:
	gs_store_batch_free(b);
	gs_acct_free(a);
	return rv;
}

static void
test_every_allocation_fails(void **state)
{
	int n, failures = 0;

	(void)state;
	for (n = 0; n < 200; n++) {
		memset(pages, 0, sizeof(pages));
		fail_at = n;
		nalloc = 0;
		if (scenario() == 0 && nalloc <= n)
			break;	/* the Nth allocation was never reached */
		failures++;
	}
	fail_at = -1;
	assert_true(n < 200);
	assert_true(failures > 5);	/* there were failures to survive */
	memset(pages, 0, sizeof(pages));
	assert_int_equal(scenario(), 0);
	print_message("%d allocation points failed in turn\n", failures);
}

/* A tick that fails for memory, at any of its allocations, keeps every
 * allocation's deltas for the next one: each is written exactly once. */
static void
test_tick_retries(void **state)
{
	(void)state;
	for (int k = 0; k < 12; k++) {
		struct gs_acct *a;
		struct gs_store_batch *b = NULL;
		struct gs_acct_meta m;
		struct gs_error err;
		uint64_t sum[3] = { 0 };
		int r;

		memset(pages, 0, sizeof(pages));
		assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
		for (uint64_t i = 1; i <= 3; i++) {
			memset(&m, 0, sizeof(m));
			m.agent_id = i;
			m.shares = 10;
			assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
			assert_int_equal(gs_acct_attach(a, i, &pages[i - 1], 0),
					 0);
			pages[i - 1].gpu_ns = i * S;
		}
		fail_at = k;
		nalloc = 0;
		r = gs_acct_tick(a, S, 1, &b, &err);
		fail_at = -1;
		for (int round = 0; round < 2; round++) {
			if (r == 0) {
				for (uint32_t x = 0; x < b->nsamples; x++)
					sum[b->samples[x].key - 1] +=
						b->samples[x].d.gpu_ns;
				gs_store_batch_free(b);
				b = NULL;
			} else {
				assert_int_equal(err.code, GS_ENOMEM);
				assert_null(b);
			}
			r = gs_acct_tick(a, (uint64_t)(2 + round) * S, 2, &b,
					 &err);
			assert_int_equal(r, 0);
		}
		gs_store_batch_free(b);
		for (int i = 0; i < 3; i++)
			assert_int_equal(sum[i], (uint64_t)(i + 1) * S);
		gs_acct_free(a);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_allocation_fails),
		cmocka_unit_test(test_tick_retries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
