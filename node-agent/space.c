/*
 * space.c — space mode's planner (contract in space.h).
 *
 * Everything is O(n^3) in the allocations of one GPU at worst (a handful;
 * tens at most) and uses no memory beyond the caller's arrays: the id
 * order is walked by repeated minimum search instead of sorting a copy.
 */
#include <stdio.h>
#include <string.h>

#include "space.h"

uint32_t gs_space_classify(const struct gs_space_counters *c)
{
	if (c == NULL || c->samples < GS_SPACE_MIN_SAMPLES)
		return GS_SC_UNKNOWN;
	if (c->mem_pct >= 60)
		return GS_SC_HM;
	if (c->mem_pct >= 30)
		return GS_SC_MM;
	if (c->sm_pct >= 60)
		return GS_SC_HC;
	if (c->sm_pct >= 30)
		return GS_SC_MC;
	return GS_SC_LC;
}

const char *gs_space_class_name(uint32_t cls)
{
	switch (cls) {
	case GS_SC_LC:
		return "light";
	case GS_SC_MC:
		return "compute";
	case GS_SC_HC:
		return "compute-heavy";
	case GS_SC_MM:
		return "memory";
	case GS_SC_HM:
		return "memory-heavy";
	default:
		return "unknown";
	}
}

/* Symmetric pairing table, indexed by class (UNKNOWN planned as LC). */
static const uint8_t corun_tab[6][6] = {
	/*        ?  LC MC HC MM HM */
	/* ? */ { 1, 1, 1, 0, 1, 1 },
	/* LC */ { 1, 1, 1, 0, 1, 1 },
	/* MC */ { 1, 1, 1, 0, 0, 1 },
	/* HC */ { 0, 0, 0, 0, 0, 1 },
	/* MM */ { 1, 1, 0, 0, 0, 0 },
	/* HM */ { 1, 1, 1, 1, 0, 0 },
};

int gs_space_corun(uint32_t a, uint32_t b)
{
	if (a > GS_SC_HM)
		a = GS_SC_UNKNOWN;
	if (b > GS_SC_HM)
		b = GS_SC_UNKNOWN;
	return corun_tab[a][b];
}

/* Index of the entry with the smallest id above `after` (first call:
 * after_set 0), or n. */
static uint32_t next_in_order(const struct gs_space_in *in, uint32_t n,
			      int after_set, uint64_t after)
{
	uint32_t i, best = n;

	for (i = 0; i < n; i++) {
		if (after_set && in[i].id <= after)
			continue;
		if (best == n || in[i].id < in[best].id)
			best = i;
	}
	return best;
}

#define FOR_ID_ORDER(i, in, n)                                             \
	for (uint32_t i = next_in_order(in, n, 0, 0); i < (n);                 \
	     i = next_in_order(in, n, 1, (in)[i].id))

/* Of the k entries of v[] equal to the largest, the one `rotate` picks:
 * at rotate 0 the first of them (first_wins) or the last, then the next
 * one along at each step of rotate (ties take turns as the agent moves
 * rotate on). */
static uint32_t pick_top(const int64_t *v, uint32_t k, uint32_t rotate,
			 int first_wins)
{
	uint32_t j, nt = 0, want, seen = 0;
	int64_t top = v[0];

	for (j = 1; j < k; j++)
		if (v[j] > top)
			top = v[j];
	for (j = 0; j < k; j++)
		nt += v[j] == top;
	want = first_wins ? rotate % nt : nt - 1u - rotate % nt;
	for (j = 0; j < k; j++)
		if (v[j] == top && seen++ == want)
			return j;
	return k - 1u;	/* not reached */
}

/* Split the GPU among the busy MPS members of group g (see space.h). */
static void split_group(const struct gs_space_params *p,
			const struct gs_space_in *in, uint32_t n,
			struct gs_space_out *out, uint32_t g)
{
	uint32_t G = p->sm_total / p->granule;
	uint32_t cnt[256];	/* granules per busy member, id order */
	uint32_t rem[256];
	uint32_t idx[256];
	int64_t v[256];		/* what a tie-break compares */
	uint64_t S = 0;
	uint32_t k = 0, j, sum = 0, first = 0, members = 0, last, left;

	FOR_ID_ORDER(i, in, n) {
		if (!out[i].mps || out[i].group != g)
			continue;
		members++;
		if (!in[i].busy || k >= 256)
			continue;
		idx[k++] = i;
		S += in[i].shares;
	}
	if (k == 0)
		return;
	for (j = 0; j < k; j++) {
		uint64_t num = (uint64_t)G * in[idx[j]].shares;

		cnt[j] = (uint32_t)(num / S);
		rem[j] = (uint32_t)(num % S * 1000u / S);
		if (cnt[j] == 0) {
			cnt[j] = 1;
			rem[j] = 0;
		}
		sum += cnt[j];
	}
	/* minimum grants may overshoot: take back from the largest */
	while (sum > G) {
		uint32_t big = 0;

		for (j = 1; j < k; j++)
			if (cnt[j] > cnt[big])
				big = j;
		if (cnt[big] <= 1)
			break;
		cnt[big]--;
		sum--;
	}
	/* leftover granules by largest remainder; among equal remainders
	 * the earlier id, or another as p->rotate moves on */
	while (sum < G) {
		uint32_t best;

		for (j = 0; j < k; j++)
			v[j] = rem[j];
		best = pick_top(v, k, p->rotate, 1);
		cnt[best]++;
		rem[best] = 0;
		sum++;
	}
	/* the co-run check's corrections: the others give or take */
	for (j = 0; j < k && k > 1; j++) {
		int64_t c = (int64_t)cnt[j] + in[idx[j]].bias;

		if (c < 1)
			c = 1;
		if (c > (int64_t)(G - (k - 1)))
			c = (int64_t)(G - (k - 1));
		sum = sum - cnt[j] + (uint32_t)c;
		cnt[j] = (uint32_t)c;
	}
	while (sum > G) {	/* from the largest that was not raised */
		uint32_t big = k;

		for (j = 0; j < k; j++)
			if (cnt[j] > 1 && (big == k ||
			    in[idx[j]].bias < in[idx[big]].bias ||
			    (in[idx[j]].bias == in[idx[big]].bias &&
			     cnt[j] > cnt[big])))
				big = j;
		if (big == k)
			break;
		cnt[big]--;
		sum--;
	}
	while (sum < G) {	/* to the most raised */
		uint32_t best = 0;

		for (j = 1; j < k; j++)
			if (in[idx[j]].bias > in[idx[best]].bias)
				best = j;
		cnt[best]++;
		sum++;
	}
	/* the SMs beyond the last whole granule go with the range that
	 * reaches the GPU's end (a green context's leftover SMs do too):
	 * place last the member furthest below its share's SMs (plus the
	 * co-run check's granules; the later id on ties, or another as
	 * p->rotate moves on) */
	left = p->sm_total - G * p->granule;
	last = k - 1u;
	if (left > 0 && k > 1) {
		for (j = 0; j < k; j++)
			v[j] = (int64_t)((uint64_t)p->sm_total *
					 in[idx[j]].shares * 1000u / S) +
			       ((int64_t)in[idx[j]].bias - (int64_t)cnt[j]) *
			       (int64_t)p->granule * 1000;
		last = pick_top(v, k, p->rotate, 0);
	}
	for (uint32_t r = 0; r < k; r++) {
		struct gs_space_out *o;

		/* id order, with `last` moved to the end */
		j = r == k - 1u ? last : r >= last ? r + 1u : r;
		o = &out[idx[j]];
		o->sm_first = first;
		o->sm_count = cnt[j] * p->granule;
		if (r == k - 1u)
			o->sm_count = p->sm_total - first;
		first += o->sm_count;
		o->corun = k > 1;
	}
	(void)members;
}

static void why_pair(struct gs_space_out *o, const char *verb, uint64_t id,
		     uint32_t a, uint32_t b)
{
	snprintf(o->why, sizeof(o->why), "%s %llu: %s + %s", verb,
		 (unsigned long long)id, gs_space_class_name(a),
		 gs_space_class_name(b));
}

int gs_space_plan(const struct gs_space_params *p,
		  const struct gs_space_in *in, uint32_t n,
		  struct gs_space_out *out)
{
	uint32_t G, ngroups = 0, mps_uid, i;
	uint32_t gsize[256];

	if (p == NULL || p->sm_total == 0 || p->granule == 0 ||
	    p->granule > p->sm_total || (n > 0 && (in == NULL || out == NULL)))
		return -1;
	for (i = 0; i < n; i++)
		if (in[i].shares == 0)
			return -1;
	if (n > 256)
		return -1;
	G = p->sm_total / p->granule;
	mps_uid = p->mps_uid;
	if (mps_uid == GS_SPACE_NOUID && n > 0)
		mps_uid = in[next_in_order(in, n, 0, 0)].uid;
	if (n == 0)
		return 0;
	memset(out, 0, n * sizeof(*out));

	FOR_ID_ORDER(i2, in, n) {
		struct gs_space_out *o = &out[i2];
		uint32_t g, conflict = n;

		o->id = in[i2].id;
		if (in[i2].uid != mps_uid) {
			o->group = ngroups;
			gsize[ngroups++] = 1;
			if (in[i2].busy)
				o->sm_count = p->sm_total;
			snprintf(o->why, sizeof(o->why),
				 "time-shared: uid %u, MPS serves uid %u",
				 in[i2].uid, mps_uid);
			continue;
		}
		o->mps = 1;
		/* a probe is measured alone, a job that keeps no
		 * partition runs alone: a group of its own */
		for (g = in[i2].probe || in[i2].fixed ? ngroups : 0;
		     g < ngroups; g++) {
			uint32_t bad = n;

			if (gsize[g] >= G)
				continue;
			for (uint32_t j = 0; j < n; j++) {
				if (j == i2 || !out[j].mps ||
				    out[j].group != g || in[j].id > in[i2].id)
					continue;
				if (!gs_space_corun(in[j].cls, in[i2].cls) ||
				    in[j].probe || in[j].fixed ||
				    (p->apart != NULL &&
				     p->apart[(size_t)j * n + i2])) {
					bad = j;
					break;
				}
			}
			/* a group of other uids is never joined */
			for (uint32_t j = 0; j < n && bad == n; j++)
				if (!out[j].mps && out[j].group == g &&
				    in[j].id < in[i2].id)
					bad = j;
			if (bad == n)
				break;
			if (conflict == n && out[bad].mps)
				conflict = bad;
		}
		o->group = g;
		if (g == ngroups)
			gsize[ngroups++] = 0;
		gsize[g]++;
		if (in[i2].fixed)
			snprintf(o->why, sizeof(o->why),
				 "takes turns: no libgshare, no partition");
		else if (in[i2].probe)
			snprintf(o->why, sizeof(o->why),
				 "measured alone first (co-run check)");
		else if (conflict != n && p->apart != NULL &&
			 p->apart[(size_t)conflict * n + i2])
			snprintf(o->why, sizeof(o->why),
				 "takes turns with %llu: slower side by side",
				 (unsigned long long)in[conflict].id);
		else if (conflict != n && in[conflict].fixed)
			snprintf(o->why, sizeof(o->why),
				 "takes turns with %llu: it keeps no partition",
				 (unsigned long long)in[conflict].id);
		else if (conflict != n && in[conflict].probe)
			snprintf(o->why, sizeof(o->why),
				 "takes turns with %llu: measured alone first",
				 (unsigned long long)in[conflict].id);
		else if (conflict != n)
			why_pair(o, "takes turns with", in[conflict].id,
				 in[i2].cls, in[conflict].cls);
	}
	for (uint32_t g = 0; g < ngroups; g++)
		split_group(p, in, n, out, g);
	/* reasons of the MPS members that did not get one above */
	for (i = 0; i < n; i++) {
		struct gs_space_out *o = &out[i];

		if (!o->mps)
			continue;
		if (!in[i].busy) {
			snprintf(o->why, sizeof(o->why),
				 "idle: its SMs go to the others");
			continue;
		}
		if (o->corun) {
			uint32_t j;

			for (j = 0; j < n; j++)
				if (j != i && out[j].mps &&
				    out[j].group == o->group && in[j].busy)
					break;
			why_pair(o, "co-runs with", in[j].id, in[i].cls,
				 in[j].cls);
			continue;
		}
		if (o->why[0] != '\0')
			continue;
		snprintf(o->why, sizeof(o->why), gsize[o->group] > 1 ?
			 "whole GPU: its partners are idle" :
			 "whole GPU: no complementary partner");
	}
	return (int)ngroups;
}

int gs_space_changed(const struct gs_space_out *old,
		     const struct gs_space_out *cur)
{
	return old->sm_first != cur->sm_first ||
	       old->sm_count != cur->sm_count;
}

/* The split rule: a member well below its share, or the group under one
 * job's worth with a member below its share. */
static uint32_t split_or_keep(const struct gs_space_verdict *v)
{
	if (v->min_d < GS_SPACE_SPLIT_D_PM ||
	    (v->sum_n < GS_SPACE_SPLIT_SUM_PM &&
	     v->min_d < 1000u - GS_SPACE_TOL_PM))
		return GS_SPACE_SPLIT;
	return GS_SPACE_KEEP;
}

int gs_space_check(const struct gs_space_fb *m, uint32_t k,
		   uint32_t last_from, uint32_t last_to, uint32_t last_min_d,
		   int settled, struct gs_space_verdict *v)
{
	uint64_t S = 0, d[256];
	uint32_t i, hi = 0;

	if (m == NULL || v == NULL || k < 2 || k > 256)
		return -1;
	memset(v, 0, sizeof(*v));
	for (i = 0; i < k; i++) {
		if (m[i].shares == 0 || m[i].alone == 0)
			return -1;
		S += m[i].shares;
	}
	v->min_d = UINT32_MAX;
	for (i = 0; i < k; i++) {
		uint64_t n = m[i].corun * 1000u / m[i].alone;

		if (n > 4000)
			n = 4000;
		v->sum_n += (uint32_t)n;
		/* n over shares / S, per mille */
		d[i] = n * S / m[i].shares;
		if (d[i] > 1000000u)
			d[i] = 1000000u;
		if (d[i] < v->min_d) {
			v->min_d = (uint32_t)d[i];
			v->low = i;
		}
		if (d[i] > d[hi])
			hi = i;
	}
	if (last_from < k && last_to < k && !settled) {
		const struct gs_space_fb *dn = &m[last_from];

		/* the last move made the lowest lower (beyond the noise of
		 * a 300 ms window), or the donor lost
		 * its rate with its SMs (more than GS_SPACE_DONOR_PM of the
		 * fraction it gave: it was not bound by the memory
		 * bandwidth, so the granule took from it as much as it
		 * gave, whatever the reference rates say): take it back */
		if (v->min_d + GS_SPACE_NOISE_PM < last_min_d ||
		    (dn->before > 0 && dn->corun < dn->before &&
		     dn->before_sms > dn->sms &&
		     /* in floating point: rates are the jobs' to report
		      * (up to 1e15 a second) and would overflow */
		     (double)(dn->before - dn->corun) * 1000.0 *
		     (double)dn->before_sms >
		     (double)GS_SPACE_DONOR_PM * (double)dn->before *
		     (double)(dn->before_sms - dn->sms))) {
			v->act = GS_SPACE_MOVE;
			v->from = last_to;
			v->to = last_from;
			v->settle = 1;
			return 0;
		}
		/* the donor is the lowest now: as balanced as it gets */
		if (v->low == last_from)
			settled = 1;
	}
	if (v->min_d >= 1000u - GS_SPACE_TOL_PM) {
		v->act = GS_SPACE_KEEP;
		v->settle = (uint32_t)settled;
		return 0;
	}
	/* the donor must stay at its share within the tolerance, as far
	 * as a linear prediction says (a member that under-reports its
	 * progress cannot push the other below that) */
	if (!settled && d[hi] > 1000u + GS_SPACE_TOL_PM &&
	    m[hi].granules > 1 && hi != v->low &&
	    d[hi] * (m[hi].granules - 1) / m[hi].granules >=
	    1000u - GS_SPACE_TOL_PM) {
		v->act = GS_SPACE_MOVE;
		v->from = hi;
		v->to = v->low;
		return 0;
	}
	v->settle = 1;
	v->act = split_or_keep(v);
	return 0;
}
