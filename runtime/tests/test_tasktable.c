/*
 * test_tasktable.c — the host half of the TaskTable (gs_tasktable.c) and
 * the MasterKernel's shared-memory allocator, warp picking and start
 * decisions (a task's resources, published tickets, redo carry-over), which
 * gshare_device.cuh writes in plain C so that they are tested here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gs_tasktable.h"
#include "gshare.h"
#include "gshare_device.cuh"

static void
test_init_caps(void **state)
{
	struct gs__ttab t;
	struct gs_error err;

	(void)state;
	assert_int_equal(gs__tt_init(&t, 0, 4, &err), 0);
	assert_int_equal(t.cap, 65536);
	gs__tt_fini(&t);
	assert_int_equal(gs__tt_init(&t, 5, 4, &err), 0);
	assert_int_equal(t.cap, 1024);
	gs__tt_fini(&t);
	assert_int_equal(gs__tt_init(&t, 1025, 4, &err), 0);
	assert_int_equal(t.cap, 2048);
	assert_int_equal(t.mask, 2047);
	gs__tt_fini(&t);
	assert_int_equal(gs__tt_init(&t, (1u << 22) + 1, 4, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
}

/* Tickets fill the table, a full table refuses, retiring in order frees
 * slots; an out-of-order completion is not retired before its elders
 * but is reported done. */
static void
test_reserve_retire(void **state)
{
	struct gs__ttab t;
	struct gs_error err;
	uint32_t *done;
	uint64_t tk, i;

	(void)state;
	assert_int_equal(gs__tt_init(&t, 1024, 8, &err), 0);
	done = calloc(t.cap, sizeof(*done));
	assert_non_null(done);
	for (i = 0; i < 1024; i++) {
		assert_int_equal(gs__tt_reserve(&t, (uint32_t)(i % 3), &tk),
				 0);
		assert_int_equal(tk, i);
	}
	assert_int_equal(gs__tt_reserve(&t, 0, &tk), -1);
	assert_int_equal(gs__tt_pending(&t), 1024);
	assert_int_equal(gs__tt_retire(&t, done), 0);
	/* ticket 1 finishes first */
	done[1] = gs__tt_seq(1);
	assert_int_equal(gs__tt_retire(&t, done), 0);
	assert_true(gs__tt_is_done(&t, done, 1));
	assert_false(gs__tt_is_done(&t, done, 0));
	done[0] = gs__tt_seq(0);
	assert_int_equal(gs__tt_retire(&t, done), 2);
	assert_true(gs__tt_is_done(&t, done, 0));
	assert_int_equal(gs__tt_pending(&t), 1022);
	/* two slots free again: their next tickets are 1024 and 1025 */
	assert_int_equal(gs__tt_reserve(&t, 5, &tk), 0);
	assert_int_equal(tk, 1024);
	assert_int_equal(tk & t.mask, 0);
	/* slot 0 still holds ticket 0's done word: not ticket 1024's */
	assert_false(gs__tt_is_done(&t, done, 1024));
	assert_false(gs__tt_is_done(&t, done, 5000));	/* never spawned */
	assert_int_equal(gs__tt_reserve(&t, 5, &tk), 0);
	assert_int_equal(gs__tt_reserve(&t, 5, &tk), -1);
	assert_int_equal(gs__tt_reserve(&t, 8, &tk), -1);	/* bad group */
	gs__tt_fini(&t);
	free(done);
}

/* Group counters follow spawns and in-order retirement, across many
 * wraps of the ring. */
static void
test_groups_wrap(void **state)
{
	struct gs__ttab t;
	struct gs_error err;
	uint32_t *done;
	uint64_t tk, i, spawned[3] = { 0, 0, 0 };

	(void)state;
	assert_int_equal(gs__tt_init(&t, 1024, 3, &err), 0);
	done = calloc(t.cap, sizeof(*done));
	assert_non_null(done);
	for (i = 0; i < 10000; i++) {
		uint32_t g = (uint32_t)(i * 7 % 3);

		if (gs__tt_reserve(&t, g, &tk) < 0) {
			/* finish the oldest half */
			uint64_t k;
			for (k = t.retired; k < t.retired + 512; k++)
				done[k & t.mask] = gs__tt_seq(k);
			assert_int_equal(gs__tt_retire(&t, done), 512);
			assert_int_equal(gs__tt_reserve(&t, g, &tk), 0);
		}
		spawned[g]++;
		assert_int_equal(tk, i);
	}
	assert_int_equal(gs__tt_group_pending(&t, 0) +
			 gs__tt_group_pending(&t, 1) +
			 gs__tt_group_pending(&t, 2), gs__tt_pending(&t));
	for (tk = t.retired; tk < t.next; tk++)
		done[tk & t.mask] = gs__tt_seq(tk);
	gs__tt_retire(&t, done);
	assert_int_equal(gs__tt_pending(&t), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(gs__tt_group_pending(&t, (uint32_t)i), 0);
	assert_int_equal(gs__tt_group_pending(&t, 99), 0);
	gs__tt_fini(&t);
	free(done);
}

static void
test_check_spawn(void **state)
{
	struct gs_error err;

	(void)state;
#define CHK(th, sh, as, ta, g) \
	gs__tt_check_spawn(th, sh, as, ta, g, 512, 98304, 96, 4096, &err)
	assert_int_equal(CHK(32, 0, 16, 16, 0), 0);
	assert_int_equal(CHK(512, 98304, 96, 96, 4095), 0);
	assert_int_equal(CHK(0, 0, 16, 16, 0), -1);
	assert_int_equal(err.code, GS_EINVAL);
	assert_int_equal(CHK(48, 0, 16, 16, 0), -1);
	assert_non_null(strstr(err.msg, "multiple of 32"));
	assert_int_equal(CHK(544, 0, 16, 16, 0), -1);
	assert_int_equal(CHK(64, 98305, 16, 16, 0), -1);
	assert_non_null(strstr(err.msg, "shared memory"));
	assert_int_equal(CHK(64, 0, 97, 97, 0), -1);
	assert_int_equal(CHK(64, 0, 8, 16, 0), -1);
	assert_int_equal(CHK(64, 0, 16, 16, 4096), -1);
	assert_non_null(strstr(err.msg, "group"));
#undef CHK
}

static int
used(const unsigned int *bm, unsigned int i)
{
	return (bm[i >> 5] >> (i & 31u)) & 1u;
}

static void
test_shm_alloc(void **state)
{
	unsigned int bm[GS__TGRANS / 32];
	int a, b, c, d;
	unsigned int i;

	(void)state;
	gs__shm_init(bm, 384);		/* 96 KiB */
	assert_true(used(bm, 384));
	assert_false(used(bm, 383));
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 0), -1);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 385), -1);
	a = gs__shm_alloc(bm, GS__TGRANS, 3);
	b = gs__shm_alloc(bm, GS__TGRANS, 40);	/* crosses a word */
	c = gs__shm_alloc(bm, GS__TGRANS, 1);
	assert_int_equal(a, 0);
	assert_int_equal(b, 3);
	assert_int_equal(c, 43);
	for (i = 0; i < 44; i++)
		assert_true(used(bm, i));
	assert_false(used(bm, 44));
	/* a hole of 40 after freeing b: first fit puts 33 there */
	gs__shm_free(bm, (unsigned int)b, 40);
	d = gs__shm_alloc(bm, GS__TGRANS, 33);
	assert_int_equal(d, 3);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 8), 44);
	/* the rest of the pool, exactly, then nothing */
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 384 - 52), 52);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 1), 36);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 7), -1);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 6), 37);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 1), -1);
	/* whole pool free again: one request of all of it */
	gs__shm_init(bm, 384);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 384), 0);
	gs__shm_init(bm, GS__TGRANS);
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, GS__TGRANS), 0);
}

/* Random alloc/free against a byte-per-granule model. */
static void
test_shm_random(void **state)
{
	unsigned int bm[GS__TGRANS / 32];
	unsigned char model[384];
	struct { int at; unsigned int n; } live[64];
	unsigned int nl = 0, i, k;
	uint64_t r = 88172645463325252ull;

	(void)state;
	gs__shm_init(bm, 384);
	memset(model, 0, sizeof(model));
	for (i = 0; i < 20000; i++) {
		r ^= r << 13;
		r ^= r >> 7;
		r ^= r << 17;
		if (nl == 64 || (nl > 0 && (r & 1u))) {
			k = (unsigned int)(r >> 8) % nl;
			gs__shm_free(bm, (unsigned int)live[k].at, live[k].n);
			memset(model + live[k].at, 0, live[k].n);
			live[k] = live[--nl];
		} else {
			unsigned int n = 1u + (unsigned int)(r >> 16) % 48u;
			int at = gs__shm_alloc(bm, GS__TGRANS, n);
			/* the model's first fit */
			int want = -1;
			unsigned int s, run = 0;
			for (s = 0; s < 384; s++) {
				run = model[s] ? 0 : run + 1;
				if (run == n) {
					want = (int)(s + 1 - n);
					break;
				}
			}
			assert_int_equal(at, want);
			if (at >= 0) {
				memset(model + at, 1, n);
				live[nl].at = at;
				live[nl].n = n;
				nl++;
			}
		}
		for (k = 0; k < 384; k++)
			assert_int_equal(used(bm, k), model[k]);
	}
}

static void
test_warps_take(void **state)
{
	unsigned int m = 0xfffffffeu, got;

	(void)state;
	got = gs__warps_take(&m, 3);
	assert_int_equal(got, 0xeu);
	assert_int_equal(m, 0xfffffff0u);
	m = 0x30u;
	assert_int_equal(gs__warps_take(&m, 3), 0);
	assert_int_equal(m, 0x30u);	/* unchanged when too few */
	assert_int_equal(gs__warps_take(&m, 2), 0x30u);
	assert_int_equal(m, 0);
}

/* A task's resources: all three or nothing; a refusal changes nothing. */
static void
test_tres(void **state)
{
	unsigned int bm[GS__TGRANS / 32], freew = 0xfffffffeu, bars = 0x6u;
	unsigned int ws = 0, bar = 0, i;
	int sh = -1;

	(void)state;
	gs__shm_init(bm, 8);
	assert_int_equal(gs__tgrans(0), 0);
	assert_int_equal(gs__tgrans(1), 1);
	assert_int_equal(gs__tgrans(256), 1);
	assert_int_equal(gs__tgrans(257), 2);
	/* 4 warps, barrier 1, granules 0..2 */
	assert_true(gs__tres_take(&freew, &bars, bm, 4, 3, &ws, &bar, &sh));
	assert_int_equal(ws, 0x1eu);
	assert_int_equal(bar, 1);
	assert_int_equal(sh, 0);
	assert_int_equal(bars, 0x4u);
	assert_int_equal(freew, 0xffffffe0u);
	/* too much shared memory: the barrier and warps stay free */
	assert_false(gs__tres_take(&freew, &bars, bm, 2, 6, &ws, &bar, &sh));
	assert_int_equal(bars, 0x4u);
	assert_int_equal(freew, 0xffffffe0u);
	/* one warp needs no barrier and gets 0 */
	assert_true(gs__tres_take(&freew, &bars, bm, 1, 0, &ws, &bar, &sh));
	assert_int_equal(ws, 0x20u);
	assert_int_equal(bar, 0);
	assert_int_equal(sh, 0);
	assert_true(gs__tres_take(&freew, &bars, bm, 2, 5, &ws, &bar, &sh));
	assert_int_equal(bar, 2);
	assert_int_equal(sh, 3);
	/* no barrier left: a 2-warp task waits, its granules stay free */
	gs__shm_free(bm, 3, 5);
	assert_false(gs__tres_take(&freew, &bars, bm, 2, 1, &ws, &bar, &sh));
	assert_int_equal(gs__shm_alloc(bm, GS__TGRANS, 5), 3);
	gs__shm_free(bm, 3, 5);
	/* too few warps */
	freew = 0x3u << 30;
	bars = 0x2u;
	assert_false(gs__tres_take(&freew, &bars, bm, 3, 0, &ws, &bar, &sh));
	assert_int_equal(freew, 0x3u << 30);
	/* give back what was taken */
	freew = 0xffffffe0u;
	bars = 0x4u;
	gs__tres_free(&freew, &bars, bm, 4, 1, 0, 3, 0x1eu);
	assert_int_equal(freew, 0xfffffffeu);
	assert_int_equal(bars, 0x6u);
	for (i = 0; i < 8; i++)
		assert_int_equal((bm[0] >> i) & 1u, 0);
}

/* Published tickets are counted in ring order from the first unread
 * one, up to the first not published; the redo carry-over appends. */
static void
test_tpublished_carry(void **state)
{
	unsigned int held[GS__THELD] = { 11, 12, 9, 10 };
	unsigned int in[6] = { 1, 2, 3, 4, 5, 6 }, out[8] = { 7, 8 };

	(void)state;
	/* ring from position 2: tickets 9, 10, 11, 12 */
	assert_int_equal(gs__tpublished(held, 2, 0, 4, 11), 2);
	assert_int_equal(gs__tpublished(held, 2, 0, 4, 13), 4);
	assert_int_equal(gs__tpublished(held, 2, 1, 4, 13), 3);
	assert_int_equal(gs__tpublished(held, 2, 0, 4, 9), 0);
	assert_int_equal(gs__tpublished(held, 2, 0, 3, 100), 3);
	/* tail wrapped past 2^32: still published */
	held[0] = 0xffffffffu;
	assert_int_equal(gs__tpublished(held, 0, 0, 1, 3), 1);
	assert_int_equal(gs__tredo_carry(in, 4, 6, out, 2), 4);
	assert_int_equal(out[2], 5);
	assert_int_equal(out[3], 6);
	/* taken past the end (racing claims): nothing to carry */
	assert_int_equal(gs__tredo_carry(in, 9, 6, out, 2), 2);
}

/* One I/O launch's RPC ring, device and host, from `start` for `steps`
 * steps: the device posts (entry = sequence + 1) while fewer than cap
 * are unread, as every logical block has at most one request out; the
 * host reads in turns, lagging up to cap.  wrap: positions as the ring
 * keeps them (gs__ring_next / atomicInc); else plain 32-bit counters.
 * Returns the number of entries written over an unread one or read out
 * of order. */
static unsigned int
ring_run(unsigned int cap, unsigned int start, unsigned int steps, int wrap,
	 unsigned int seed)
{
	unsigned int *ring = calloc(cap, sizeof(*ring));
	unsigned int posted = start, head = start, out = 0, bad = 0;
	unsigned int seq = 0, next_read = 0;

	assert_non_null(ring);
	for (unsigned int i = 0; i < steps; i++) {
		seed = seed * 1103515245u + 12345u;
		if (out < cap && ((seed >> 16) & 3u) != 0u) {
			unsigned int *e = &ring[posted % cap];

			if (*e != 0u)
				bad++;
			*e = ++seq;
			posted = wrap ? gs__ring_next(posted, cap) : posted + 1u;
			out++;
		} else if (out > 0u) {
			unsigned int *e = &ring[head % cap];

			if (*e != next_read + 1u)
				bad++;
			next_read++;
			*e = 0;
			head = wrap ? gs__ring_next(head, cap) : head + 1u;
			out--;
		}
	}
	free(ring);
	return bad;
}

static void
test_rpc_ring_wrap(void **state)
{
	static const unsigned int caps[] = { 1, 3, 7, 1000, 1056, 4096,
					     65535 };

	(void)state;
	assert_int_equal(gs__ring_wrap(3), 0xffffffffu);
	assert_int_equal(gs__ring_wrap(1000), 4294967000u);
	assert_int_equal(gs__ring_wrap(4096), 0xfffff000u);
	assert_int_equal(gs__ring_wrap(0), 0);
	assert_int_equal(gs__ring_next(4294966999u, 1000), 0);
	assert_int_equal(gs__ring_next(5, 1000), 6);
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		unsigned int c = caps[i], w = gs__ring_wrap(c);

		/* across the wrap, and far from it */
		assert_int_equal(ring_run(c, w - 2u * c, 8u * c + 64u, 1,
					  c), 0);
		assert_int_equal(ring_run(c, 0, 8u * c + 64u, 1, c + 1u), 0);
	}
	/* plain counters break where cap does not divide 2^32 (the slot
	 * jumps back at 2^32 onto unread entries), and not where it does */
	assert_true(ring_run(1000, 0u - 2000u, 8064, 0, 7) > 0u);
	assert_int_equal(ring_run(4096, 0u - 8192u, 32832, 0, 7), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_caps),
		cmocka_unit_test(test_reserve_retire),
		cmocka_unit_test(test_groups_wrap),
		cmocka_unit_test(test_check_spawn),
		cmocka_unit_test(test_shm_alloc),
		cmocka_unit_test(test_shm_random),
		cmocka_unit_test(test_warps_take),
		cmocka_unit_test(test_tres),
		cmocka_unit_test(test_tpublished_carry),
		cmocka_unit_test(test_rpc_ring_wrap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
