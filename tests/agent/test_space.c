/*
 * test_space.c — unit test of space mode's planner (node-agent/space.c),
 * driven by traces: arrivals, departures, idle and busy periods, class
 * changes.  After every event the plan is rendered as one line,
 *   id:first+count/group[c] ...   (c: co-runs; count 0: no SMs)
 * and compared with the trace's expectation; the partitions that changed
 * since the previous plan (the resize decisions the agent would write
 * into control pages) are compared too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "space.h"

#define MAXN 64

struct world {
	struct gs_space_params p;
	struct gs_space_in in[MAXN];
	struct gs_space_out out[MAXN], prev[MAXN];
	uint32_t n, nprev;
	int ngroups;
	uint64_t apart[16][2];	/* pairs measured slower side by side */
	uint32_t napart;
	uint8_t m[MAXN * MAXN];
};

static int find(const struct world *w, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < w->n; i++)
		if (w->in[i].id == id)
			return (int)i;
	return -1;
}

static uint32_t cls_of(const char *s)
{
	static const char *names[] = { "?", "LC", "MC", "HC", "MM", "HM" };
	uint32_t i;

	for (i = 0; i < 6; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	fail_msg("bad class %s", s);
	return 0;
}

/* Apply one event line: "+ id uid shares class" (arrive busy),
 * "- id" (leave), "idle id", "busy id", "cls id class", "gate id" (its
 * job keeps no partition), "lib id" (libgshare: it keeps one), "rot n"
 * (the tie-breaks' rotation step). */
static void apply(struct world *w, const char *ev)
{
	char op[8], c[8];
	unsigned long long id;
	unsigned uid, shares;
	int i;

	assert_true(sscanf(ev, "%7s %llu", op, &id) == 2);
	if (strcmp(op, "rot") == 0) {	/* the agent's rotation step */
		w->p.rotate = (uint32_t)id;
		return;
	}
	i = find(w, id);
	if (strcmp(op, "+") == 0) {
		assert_int_equal(sscanf(ev, "+ %llu %u %u %7s", &id, &uid,
					&shares, c), 4);
		assert_int_equal(i, -1);
		w->in[w->n].id = id;
		w->in[w->n].uid = uid;
		w->in[w->n].shares = shares;
		w->in[w->n].busy = 1;
		w->in[w->n].cls = cls_of(c);
		w->n++;
		return;
	}
	assert_true(i >= 0);
	if (strcmp(op, "-") == 0) {
		memmove(&w->in[i], &w->in[i + 1],
			(w->n - (uint32_t)i - 1) * sizeof(w->in[0]));
		w->n--;
	} else if (strcmp(op, "idle") == 0) {
		w->in[i].busy = 0;
	} else if (strcmp(op, "busy") == 0) {
		w->in[i].busy = 1;
	} else if (strcmp(op, "probe") == 0) {
		w->in[i].probe = 1;
	} else if (strcmp(op, "probed") == 0) {
		w->in[i].probe = 0;
	} else if (strcmp(op, "gate") == 0) {
		w->in[i].fixed = 1;
	} else if (strcmp(op, "lib") == 0) {
		w->in[i].fixed = 0;
	} else if (strcmp(op, "bias") == 0) {
		int b;

		assert_int_equal(sscanf(ev, "bias %llu %d", &id, &b), 2);
		w->in[i].bias = b;
	} else if (strcmp(op, "apart") == 0) {
		unsigned long long o;

		assert_int_equal(sscanf(ev, "apart %llu %llu", &id, &o), 2);
		assert_true(w->napart < 16);
		w->apart[w->napart][0] = id;
		w->apart[w->napart][1] = o;
		w->napart++;
	} else if (strcmp(op, "cls") == 0) {
		assert_int_equal(sscanf(ev, "cls %llu %7s", &id, c), 2);
		w->in[i].cls = cls_of(c);
	} else {
		fail_msg("bad event %s", ev);
	}
}

static void render(const struct world *w, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < w->n; i++) {
		const struct gs_space_out *o = &w->out[i];

		off += (size_t)snprintf(buf + off, len - off,
					"%s%llu:%u+%u/%u%s", i ? " " : "",
					(unsigned long long)o->id, o->sm_first,
					o->sm_count, o->group,
					o->corun ? "c" : "");
	}
}

/* Ids whose partition changed since the previous plan (new ones too). */
static void resized(const struct world *w, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t i, j;

	buf[0] = '\0';
	for (i = 0; i < w->n; i++) {
		for (j = 0; j < w->nprev; j++)
			if (w->prev[j].id == w->out[i].id)
				break;
		if (j < w->nprev && !gs_space_changed(&w->prev[j], &w->out[i]))
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s%llu",
					off ? " " : "",
					(unsigned long long)w->out[i].id);
	}
}

struct step {
	const char *ev;
	const char *plan;
	const char *resize;	/* NULL: not checked */
};

static void run_trace(const struct step *s, uint32_t sm, uint32_t gran)
{
	struct world *w = calloc(1, sizeof(*w));
	char got[1024], rs[256];

	assert_non_null(w);
	w->p.sm_total = sm;
	w->p.granule = gran;
	w->p.mps_uid = GS_SPACE_NOUID;
	for (; s->ev != NULL; s++) {
		memcpy(w->prev, w->out, sizeof(w->out));
		w->nprev = w->n;
		apply(w, s->ev);
		memset(w->m, 0, sizeof(w->m));
		for (uint32_t k = 0; k < w->napart; k++) {
			int a = find(w, w->apart[k][0]);
			int b = find(w, w->apart[k][1]);

			if (a >= 0 && b >= 0) {
				w->m[(size_t)a * w->n + (size_t)b] = 1;
				w->m[(size_t)b * w->n + (size_t)a] = 1;
			}
		}
		w->p.apart = w->napart ? w->m : NULL;
		w->ngroups = gs_space_plan(&w->p, w->in, w->n, w->out);
		assert_true(w->ngroups >= 0);
		render(w, got, sizeof(got));
		if (strcmp(got, s->plan) != 0)
			fail_msg("after \"%s\": plan\n  %s\nwanted\n  %s",
				 s->ev, got, s->plan);
		if (s->resize != NULL) {
			resized(w, rs, sizeof(rs));
			if (strcmp(rs, s->resize) != 0)
				fail_msg("after \"%s\": resized \"%s\", "
					 "wanted \"%s\"", s->ev, rs, s->resize);
		}
	}
	free(w);
}

/* H100: 132 SMs, 8-SM granules (16 granules, 4 SMs left over). */
static void test_arrive_leave_idle(void **state)
{
	static const struct step t[] = {
		/* alone: the whole GPU */
		{ "+ 1 1000 30 LC", "1:0+132/0", "1" },
		/* a memory-bound partner: 30/70 of 16 granules = 5/11 */
		{ "+ 2 1000 70 HM", "1:0+40/0c 2:40+92/0c", "1 2" },
		/* 2 idles: 1 grows back to the whole GPU at its relaunch */
		{ "idle 2", "1:0+132/0 2:0+0/0", "1 2" },
		{ "busy 2", "1:0+40/0c 2:40+92/0c", "1 2" },
		/* a compute job joins the group: 30:70:20 of 16 */
		{ "+ 3 1000 20 MC", "1:0+32/0c 2:56+76/0c 3:32+24/0c",
		  "1 2 3" },
		/* 1 leaves: 70:20 → 12.4:3.6 → 12/4 */
		{ "- 1", "2:32+100/0c 3:0+32/0c", "2 3" },
		{ "- 2", "3:0+132/0", "3" },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
}

static void test_not_complementary(void **state)
{
	static const struct step t[] = {
		{ "+ 1 1000 50 HC", "1:0+132/0", NULL },
		/* two compute-heavy: take turns, each the whole GPU */
		{ "+ 2 1000 50 HC", "1:0+132/0 2:0+132/1", "2" },
		/* a memory-heavy one pairs with the first group */
		{ "+ 3 1000 50 HM", "1:0+64/0c 2:0+132/1 3:64+68/0c", "1 3" },
		/* another memory-heavy: not with 3 (same kind), joins 2 */
		{ "+ 4 1000 50 HM",
		  "1:0+64/0c 2:0+64/1c 3:64+68/0c 4:64+68/1c", "2 4" },
		/* 1 measured again as memory-bound: the plan regroups in
		 * arrival order (1 alone; 2 with 3; 4 alone) */
		{ "cls 1 MM", "1:0+132/0 2:0+64/1c 3:64+68/1c 4:0+132/2",
		  "1 4" },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
}

static void test_other_uid(void **state)
{
	static const struct step t[] = {
		{ "+ 1 1000 40 HC", "1:0+132/0", NULL },
		/* another user: cannot join uid 1000's MPS server */
		{ "+ 2 1001 60 HM", "1:0+132/0 2:0+132/1", NULL },
		/* 40:60 of 16 granules: 6.4/9.6 → 6/10 */
		{ "+ 3 1000 60 HM", "1:80+52/0c 2:0+132/1 3:0+80/0c", NULL },
		{ "idle 2", "1:80+52/0c 2:0+0/1 3:0+80/0c", "2" },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
}

static void test_small_shares_and_granules(void **state)
{
	static const struct step t[] = {
		/* 1 share beside 99: at least one granule */
		{ "+ 1 1000 99 LC", "1:0+132/0", NULL },
		{ "+ 2 1000 1 LC", "1:8+124/0c 2:0+8/0c", NULL },
		{ NULL, NULL, NULL },
	};
	/* A100-like: 108 SMs, 2-SM granules: 54 granules */
	static const struct step a100[] = {
		{ "+ 1 1000 30 MC", "1:0+108/0", NULL },
		{ "+ 2 1000 70 HM", "1:0+32/0c 2:32+76/0c", NULL },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
	run_trace(a100, 108, 2);
}

/* The co-run check's inputs: a probe runs alone, a pair measured slower
 * takes turns, a bias moves granules between co-running members. */
static void test_check_inputs(void **state)
{
	static const struct step t[] = {
		{ "+ 1 1000 50 ?", "1:0+132/0", NULL },
		{ "+ 2 1000 50 ?", "1:0+64/0c 2:64+68/0c", "1 2" },
		/* measured alone first: a group of its own */
		{ "probe 2", "1:0+132/0 2:0+132/1", "1 2" },
		/* nobody joins a probe's group either */
		{ "+ 3 1000 50 ?", "1:0+64/0c 2:0+132/1 3:64+68/0c", "1 3" },
		/* measured: it joins the first group */
		{ "probed 2", "1:0+48/0c 2:48+40/0c 3:88+44/0c",
		  "1 2 3" },
		{ "- 1", "2:0+64/0c 3:64+68/0c", "2 3" },
		/* 3 gets two granules more, 2 gives them */
		{ "bias 3 2", "2:80+52/0c 3:0+80/0c", "2 3" },
		{ "bias 2 -2", "2:0+48/0c 3:48+84/0c", "2 3" },
		/* measured slower side by side: turns */
		{ "apart 2 3", "2:0+132/0 3:0+132/1", "2 3" },
		{ NULL, NULL, NULL },
	};
	/* a bias never takes a member below one granule */
	static const struct step b[] = {
		{ "+ 1 1000 10 ?", "1:0+132/0", NULL },
		{ "+ 2 1000 90 ?", "1:0+16/0c 2:16+116/0c", NULL },
		{ "bias 2 9", "1:0+8/0c 2:8+124/0c", NULL },
		{ "bias 1 20", "1:0+120/0c 2:120+12/0c", NULL },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
	run_trace(b, 132, 8);
}

/* A stand-in pair for the check: rate of a member on g of G granules,
 * alone = 1000; "compute" scales linearly, "memory" saturates at 5
 * granules (a bandwidth-bound kernel) and loses 20 % beside a partner. */
static uint64_t model(int mem, uint32_t g, uint32_t G)
{
	if (!mem)
		return 1000u * g / G;
	return (g >= 5 ? 800u : 800u * g / 5);
}

/*
 * The donor rule: a member whose reference rate is too low looks above
 * its share, and a granule taken from it must come back when its rate
 * fell with its SMs (a kernel that scales with the SMs is not the
 * bandwidth-bound half of a pair), but stay when it lost little (one
 * that is).  As on the H100: sgemm beside the stencil (the stencil's
 * reference in 4 ms turns 0.8 of its solo rate) and sgemm beside the
 * triad (docs/benchmarks.md, runs 89 and 102).
 */
/* gs_space_check of a 2-member plan on trial (member 1 gave member 0
 * a granule), lowest d min_d before the move: asserts who gives the
 * next granule (from) and whether the plan settles */
static struct gs_space_verdict donor_check(const struct gs_space_fb *m,
					   uint32_t min_d, uint32_t from,
					   uint32_t settle)
{
	struct gs_space_verdict v;

	assert_int_equal(gs_space_check(m, 2, 1, 0, min_d, 0, &v), 0);
	assert_int_equal(v.from, from);
	assert_int_equal(v.settle, settle);
	return v;
}

static void test_check_donor(void **state)
{
	struct gs_space_fb m[2];
	struct gs_space_verdict v;

	(void)state;
	memset(m, 0, sizeof(m));
	m[0].shares = m[1].shares = 50;
	m[0].alone = m[1].alone = 1000;
	m[0].granules = m[1].granules = 8;
	m[0].corun = 460;	/* d 920: 8 % below */
	m[1].corun = 590;	/* d 1180: looks well above */
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.from, 1);
	assert_int_equal(v.to, 0);
	/* 9/7: the receiver rose, the donor lost 11 % of its rate for the
	 * 12.5 % of its SMs it gave (more than half of that): back */
	m[0].granules = 9;
	m[1].granules = 7;
	m[0].before = 460;
	m[1].before = 590;
	m[0].before_sms = m[1].before_sms = 64;
	m[0].sms = 72;
	m[1].sms = 56;
	m[0].corun = 513;
	m[1].corun = 525;
	v = donor_check(m, v.min_d, 0, 1);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.to, 1);
	/* the same move where the donor lost 4 % (bandwidth-bound): kept,
	 * and the receiver, still below, takes the next */
	m[0].corun = 470;
	m[1].corun = 566;
	v = donor_check(m, 920, 1, 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.to, 0);
	/* within the noise: a lowest 20 per mille lower is not the move's */
	v = donor_check(m, 960, 1, 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	v = donor_check(m, 971, 0, 1);
	/* exactly 3/4 of the fraction given (9.375 % of 12.5 %) is kept;
	 * a rate that rose is kept */
	m[1].before = 800;
	m[1].corun = 725;
	v = donor_check(m, 920, 1, 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	m[1].corun = 724;
	v = donor_check(m, 920, 0, 1);
	m[1].corun = 900;
	v = donor_check(m, 920, 1, 0);
	/* by SMs, not granules: the odd SMs rotate, so a donor measured
	 * on 68 before and on 60 after gave 8 of 68 (11.8 %): a loss of
	 * 9.2 % is more than 3/4 of that (8.8 %); one measured on the
	 * same SMs before and after (64, then 64 once the odd SMs came
	 * back) cannot be judged: kept */
	m[1].before = 1000;
	m[1].corun = 908;
	m[1].before_sms = 68;
	m[1].sms = 60;
	v = donor_check(m, 920, 0, 1);
	m[1].corun = 913;	/* 8.7 %: kept */
	v = donor_check(m, 920, 1, 0);
	m[1].before_sms = 64;
	m[1].sms = 64;
	m[1].corun = 900;
	v = donor_check(m, 920, 1, 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	/* the largest rates the agent passes (1e15 a second, what a job
	 * that writes huge counters gets) on the most SMs a GPU may have
	 * do not overflow the rule: a 10 % loss for 512 of 4096 SMs is
	 * still a take-back, a 1 % one is not */
	m[1].alone = 1000000000000000ull;
	m[1].before = 1000000000000000ull;
	m[1].corun = 900000000000000ull;
	m[1].before_sms = 4096;
	m[1].sms = 3584;
	v = donor_check(m, 920, 0, 1);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	m[1].corun = 990000000000000ull;
	v = donor_check(m, 920, 1, 0);

	/* jobs that lie in their counters: a take-back only ever returns
	 * the moved granule to its giver, so a giver that fakes a drop
	 * keeps its own SMs (no more), and a receiver that fakes one gives
	 * back what it got; neither takes a granule from the other */
	memset(m, 0, sizeof(m));
	m[0].shares = m[1].shares = 50;
	m[0].alone = m[1].alone = 1000;
	m[0].granules = 9;			/* received one from 1 */
	m[1].granules = 7;
	m[0].sms = 72;
	m[1].sms = 60;
	m[0].before_sms = 64;
	m[1].before_sms = 68;
	m[0].before = 460;
	m[1].before = 600;
	m[0].corun = 520;
	m[1].corun = 1;			/* the giver "stopped" */
	v = donor_check(m, 920, 0, 1);	/* back to the giver */
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.to, 1);
	m[1].corun = 580;
	m[0].corun = 1;			/* the receiver "stopped" */
	v = donor_check(m, 920, 0, 1);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.to, 1);
}

static void test_check_steps(void **state)
{
	struct gs_space_fb m[2];
	struct gs_space_verdict v;
	uint32_t lf = UINT32_MAX, lt = UINT32_MAX, lm = 0, steps = 0;
	int settled = 0;

	(void)state;
	memset(m, 0, sizeof(m));
	/* compute (0) beside memory (1), 50/50 of 16 granules: the
	 * compute job is below its share (0.5 of alone at 8 granules is
	 * exactly 1.0 of share; make it 0.41: as sgemm beside the
	 * stencil) */
	m[0].shares = m[1].shares = 50;
	m[0].granules = 8;
	m[1].granules = 8;
	m[0].alone = m[1].alone = 1000;
	for (;;) {
		/* what the agent passes: each rate at the check before */
		m[0].before = m[0].corun;
		m[1].before = m[1].corun;
		m[0].before_sms = m[0].sms;
		m[1].before_sms = m[1].sms;
		m[0].sms = m[0].granules * 8;
		m[1].sms = m[1].granules * 8;
		m[0].corun = model(0, m[0].granules, 16) * 83 / 100;
		m[1].corun = model(1, m[1].granules, 16);
		assert_int_equal(gs_space_check(m, 2, lf, lt, lm, settled,
						&v), 0);
		if (v.act != GS_SPACE_MOVE)
			break;
		assert_true(++steps < 16);
		assert_true(m[v.from].granules > 1);
		m[v.from].granules--;
		m[v.to].granules++;
		lf = v.settle ? UINT32_MAX : v.from;
		lt = v.settle ? UINT32_MAX : v.to;
		lm = v.min_d;
		settled = (int)v.settle;
	}
	/* the compute job took granules until it reached its share:
	 * 10/6 → compute 0.518 of alone (d 1.037), memory 0.8 */
	assert_int_equal(v.act, GS_SPACE_KEEP);
	assert_int_equal(m[0].granules, 10);
	assert_int_equal(m[1].granules, 6);
	assert_int_equal(steps, 2);
	assert_true(v.min_d >= 1000 - GS_SPACE_TOL_PM);

	/* two that slow each other: both below their share, nobody to
	 * give: split */
	m[0].before = m[1].before = 0;
	m[0].granules = m[1].granules = 8;
	m[0].corun = 400;
	m[1].corun = 420;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_SPLIT);
	assert_int_equal(v.sum_n, 820);
	assert_int_equal(v.min_d, 800);
	assert_int_equal(v.low, 0);

	/* a move that made the lowest lower is taken back, and settles */
	m[0].corun = 450;	/* d 900 */
	m[1].corun = 420;	/* d 840: lower than before the move by
				 * more than the noise */
	assert_int_equal(gs_space_check(m, 2, 1, 0, 880, 0, &v), 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.from, 0);
	assert_int_equal(v.to, 1);
	assert_int_equal(v.settle, 1);
	/* settled: keep while each is near its share and the sum is
	 * above one job; split under 90 % */
	m[0].corun = 480;	/* 960 */
	m[1].corun = 700;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 1,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_KEEP);
	m[0].corun = 440;	/* 880 */
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 1,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_SPLIT);
	/* a member that reports almost no progress (a liar, or a job
	 * that stalls) takes no granule from a partner that would fall
	 * below 95 % of its share by a linear prediction (1.06 x 7/8):
	 * they take turns instead */
	m[0].granules = m[1].granules = 8;
	m[0].corun = 50;
	m[1].corun = 530;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_SPLIT);
	/* with room above (1.2 x 7/8 = 1.05) it gives one */
	m[1].corun = 600;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_MOVE);
	assert_int_equal(v.from, 1);
	/* 30/70 shares: n 0.3/0.7 is exactly the shares */
	m[0].shares = 30;
	m[1].shares = 70;
	m[0].corun = 300;
	m[1].corun = 700;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), 0);
	assert_int_equal(v.act, GS_SPACE_KEEP);
	assert_int_equal(v.min_d, 1000);
	/* bad input */
	assert_int_equal(gs_space_check(m, 1, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), -1);
	m[1].alone = 0;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), -1);
	m[1].alone = 1000;
	m[0].shares = 0;
	assert_int_equal(gs_space_check(m, 2, UINT32_MAX, UINT32_MAX, 0, 0,
					&v), -1);
	assert_int_equal(gs_space_check(NULL, 2, UINT32_MAX, UINT32_MAX, 0,
					0, &v), -1);
}

/* Every busy MPS member of a group gets >= one granule, the ranges are
 * disjoint and cover the GPU, whatever the mix (randomized). */
static void test_invariants(void **state)
{
	struct gs_space_params p = { 132, 8, GS_SPACE_NOUID, NULL, 0 };
	struct gs_space_in in[40];
	struct gs_space_out out[40];
	unsigned seed = 12345;
	int round;

	(void)state;
	for (round = 0; round < 2000; round++) {
		uint32_t n = 1 + (uint32_t)(rand_r(&seed) % 40), i, g;
		int ng;

		memset(in, 0, sizeof(in));
		p.rotate = (uint32_t)rand_r(&seed);
		for (i = 0; i < n; i++) {
			in[i].id = 1 + (uint64_t)i * 3;
			in[i].uid = 1000 + (uint32_t)(rand_r(&seed) % 2);
			in[i].shares = 1 + (uint32_t)(rand_r(&seed) % 100);
			in[i].busy = (uint32_t)(rand_r(&seed) % 4 != 0);
			in[i].cls = (uint32_t)(rand_r(&seed) % 6);
			in[i].fixed = (uint32_t)(rand_r(&seed) % 6 == 0);
		}
		ng = gs_space_plan(&p, in, n, out);
		assert_true(ng >= 1);
		for (g = 0; g < (uint32_t)ng; g++) {
			uint32_t sum = 0, busy = 0;
			uint8_t used[132];

			memset(used, 0, sizeof(used));
			for (i = 0; i < n; i++) {
				uint32_t s;

				assert_true(out[i].why[0] != '\0');
				if (out[i].group != g)
					continue;
				if (!in[i].busy) {
					assert_int_equal(out[i].sm_count, 0);
					continue;
				}
				busy++;
				assert_true(out[i].sm_count >= 8);
				for (s = out[i].sm_first;
				     s < out[i].sm_first + out[i].sm_count;
				     s++) {
					assert_true(s < 132);
					assert_int_equal(used[s], 0);
					used[s] = 1;
				}
				sum += out[i].sm_count;
				for (uint32_t j = 0; j < n; j++)
					if (j != i && out[j].group == g &&
					    in[j].busy) {
						assert_true(gs_space_corun(
						    in[i].cls, in[j].cls));
						/* a gated job runs alone */
						assert_false(in[i].fixed ||
							     in[j].fixed);
					}
			}
			assert_true(busy == 0 || sum == 132);
		}
	}
}

static void test_classify_and_table(void **state)
{
	struct gs_space_counters c = { 90, 10, 3 };
	uint32_t a, b;

	(void)state;
	assert_int_equal(gs_space_classify(&c), GS_SC_UNKNOWN);
	c.samples = 4;
	assert_int_equal(gs_space_classify(&c), GS_SC_HC);
	c.sm_pct = 40;
	assert_int_equal(gs_space_classify(&c), GS_SC_MC);
	c.sm_pct = 10;
	assert_int_equal(gs_space_classify(&c), GS_SC_LC);
	c.mem_pct = 30;
	assert_int_equal(gs_space_classify(&c), GS_SC_MM);
	c.sm_pct = 95;
	c.mem_pct = 75;	/* memory first, as in Slate */
	assert_int_equal(gs_space_classify(&c), GS_SC_HM);
	assert_int_equal(gs_space_classify(NULL), GS_SC_UNKNOWN);
	for (a = 0; a < 7; a++)
		for (b = 0; b < 7; b++)
			assert_int_equal(gs_space_corun(a, b),
					 gs_space_corun(b, a));
	assert_true(gs_space_corun(GS_SC_HC, GS_SC_HM));
	assert_false(gs_space_corun(GS_SC_HC, GS_SC_HC));
	assert_false(gs_space_corun(GS_SC_HM, GS_SC_MM));
	assert_true(gs_space_corun(GS_SC_LC, GS_SC_HM));
	assert_string_equal(gs_space_class_name(GS_SC_HM), "memory-heavy");
}

/* What cannot be split exactly: the SMs beyond the last whole granule
 * go to the member furthest below its share (whoever arrived first), and
 * ties take turns as the agent steps the rotation on, so that each member
 * gets its share over time. */
static void test_remainder_turns(void **state)
{
	static const struct step t[] = {
		/* 70 arrives first: it still gets the 4 SMs (92.4 wanted) */
		{ "+ 1 1000 70 HM", "1:0+132/0", "1" },
		{ "+ 2 1000 30 LC", "1:40+92/0c 2:0+40/0c", "1 2" },
		{ "- 2", "1:0+132/0", "1" },
		/* 50/50: 64 + 68, the 68 taking turns */
		{ "+ 3 1000 70 LC", "1:0+64/0c 3:64+68/0c", "1 3" },
		{ "rot 1", "1:64+68/0c 3:0+64/0c", "1 3" },
		{ "rot 2", "1:0+64/0c 3:64+68/0c", "1 3" },
		{ NULL, NULL, NULL },
	};
	/* three equal shares of 16.5 granules: 48 / 40 / 44 SMs, each
	 * member 44 on average over six steps (rot 4 and 5: 40/48/44 and
	 * 44/40/48) */
	static const struct step e[] = {
		{ "+ 1 1000 30 LC", "1:0+132/0", "1" },
		{ "+ 2 1000 30 LC", "1:0+64/0c 2:64+68/0c", "1 2" },
		{ "+ 3 1000 30 LC", "1:0+48/0c 2:48+40/0c 3:88+44/0c",
		  "1 2 3" },
		{ "rot 1", "1:88+44/0c 2:0+48/0c 3:48+40/0c", "1 2 3" },
		{ "rot 2", "1:0+40/0c 2:88+44/0c 3:40+48/0c", "1 2 3" },
		{ "rot 3", "1:0+48/0c 2:88+44/0c 3:48+40/0c", "1 3" },
		{ "rot 6", "1:0+48/0c 2:48+40/0c 3:88+44/0c", "2 3" },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
	run_trace(e, 132, 8);
}

/* Jobs under the launch gate keep no partition: each is planned alone
 * and takes turns, whatever its class; the libgshare jobs beside them
 * still pair among themselves. */
static void test_gated_jobs(void **state)
{
	static const struct step t[] = {
		{ "+ 1 1000 50 HC", "1:0+132/0", "1" },
		/* complementary by class, but gated: turns */
		{ "+ 2 1000 50 HM", "1:0+64/0c 2:64+68/0c", "1 2" },
		{ "gate 2", "1:0+132/0 2:0+132/1", "1 2" },
		/* a libgshare partner pairs with 1, not with 2 */
		{ "+ 3 1000 50 HM", "1:0+64/0c 2:0+132/1 3:64+68/0c", "1 3" },
		/* the gated job stays alone while the others come and go */
		{ "- 1", "2:0+132/0 3:0+132/1", "3" },
		{ "+ 4 1000 50 LC", "2:0+132/0 3:0+64/1c 4:64+68/1c", "3 4" },
		/* two gated jobs: two groups */
		{ "gate 4", "2:0+132/0 3:0+132/1 4:0+132/2", "3 4" },
		{ "idle 2", "2:0+0/0 3:0+132/1 4:0+132/2", "2" },
		/* a job that turns out to be libgshare pairs again */
		{ "lib 4", "2:0+0/0 3:0+64/1c 4:64+68/1c", "3 4" },
		{ NULL, NULL, NULL },
	};

	(void)state;
	run_trace(t, 132, 8);
}

static void test_reasons_and_errors(void **state)
{
	struct gs_space_params p = { 132, 8, 1000, NULL, 0 };
	struct gs_space_in in[3] = {
		{ 5, 1000, 50, 1, GS_SC_HC, 0, 0, 0 },
		{ 6, 1000, 50, 1, GS_SC_HC, 0, 0, 0 },
		{ 7, 1001, 50, 1, GS_SC_HM, 0, 0, 0 },
	};
	struct gs_space_out out[3];

	(void)state;
	assert_int_equal(gs_space_plan(&p, in, 3, out), 3);
	assert_string_equal(out[0].why, "whole GPU: no complementary partner");
	assert_string_equal(out[1].why,
			    "takes turns with 5: compute-heavy + "
			    "compute-heavy");
	assert_string_equal(out[2].why,
			    "time-shared: uid 1001, MPS serves uid 1000");
	assert_int_equal(out[2].mps, 0);
	in[2].uid = 1000;
	assert_int_equal(gs_space_plan(&p, in, 3, out), 2);
	assert_string_equal(out[0].why,
			    "co-runs with 7: compute-heavy + memory-heavy");
	in[2].busy = 0;
	assert_int_equal(gs_space_plan(&p, in, 3, out), 2);
	assert_string_equal(out[0].why, "whole GPU: its partners are idle");
	assert_string_equal(out[2].why, "idle: its SMs go to the others");
	/* a gated job beside a complementary partner: turns, both ways */
	in[2].busy = 1;
	in[0].fixed = 1;
	assert_int_equal(gs_space_plan(&p, in, 3, out), 2);
	assert_string_equal(out[0].why,
			    "takes turns: no libgshare, no partition");
	assert_int_equal(out[0].sm_count, 132);
	assert_int_equal(out[0].corun, 0);
	assert_int_equal(out[0].mps, 1);
	assert_string_equal(out[1].why,
			    "co-runs with 7: compute-heavy + memory-heavy");
	in[2].fixed = 1;
	assert_int_equal(gs_space_plan(&p, in, 3, out), 3);
	assert_string_equal(out[1].why, "takes turns with 5: it keeps no "
			    "partition");
	assert_string_equal(out[2].why,
			    "takes turns: no libgshare, no partition");
	assert_int_equal(out[2].sm_count, 132);
	in[0].fixed = in[2].fixed = 0;
	p.granule = 0;
	assert_int_equal(gs_space_plan(&p, in, 3, out), -1);
	p.granule = 8;
	in[1].shares = 0;
	assert_int_equal(gs_space_plan(&p, in, 3, out), -1);
	assert_int_equal(gs_space_plan(&p, NULL, 0, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arrive_leave_idle),
		cmocka_unit_test(test_not_complementary),
		cmocka_unit_test(test_other_uid),
		cmocka_unit_test(test_small_shares_and_granules),
		cmocka_unit_test(test_invariants),
		cmocka_unit_test(test_check_inputs),
		cmocka_unit_test(test_check_steps),
		cmocka_unit_test(test_check_donor),
		cmocka_unit_test(test_classify_and_table),
		cmocka_unit_test(test_remainder_turns),
		cmocka_unit_test(test_gated_jobs),
		cmocka_unit_test(test_reasons_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
