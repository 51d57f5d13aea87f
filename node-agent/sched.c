/*
 * sched.c — per-GPU token scheduler (contract and policy in sched.h).
 *
 * Entries live in one flat array, searched linearly: a GPU carries a
 * handful of allocations (tens at most), so a scan is cheaper than any
 * tree and every decision stays O(n) with no allocation.  The array only
 * grows in gs_sched_add; removal swaps the last entry into the hole.
 *
 * Time handling: the module never reads a clock; every call gets `now`
 * (CLOCK_MONOTONIC ns from the agent) and all deadlines are absolute.
 * The holder's vtime is charged only at release (with the GPU time the
 * job reports); while it holds the token, comparisons use its vtime
 * projected with the wall time held so far, so a long solo run is not
 * forgotten when a competitor shows up.
 *
 * Virtual-time floors (the activation reset) are kept per priority class
 * (one class under WFQ) and only ever move forward.
 *
 * Limits: a holder's reported gpu_ns is trusted for cooperating holders
 * (the agent authenticates the job; a job that under-reports only within
 * its grace period gains at most that much); priorities above
 * GS_SCHED_PRIO_MAX share the top class.
 */
#include <stdlib.h>
#include <string.h>

#include "sched.h"

#define NCLASS (GS_SCHED_PRIO_MAX + 1u)
#define DEF_SLICE_NS 4000000ull
#define DEF_GRACE_NS 100000000ull
#define DEF_IDLE_GRACE_NS 2000000ull
#define DEF_SHARES_TOTAL 100u
#define EFF_ONE (1ull << 30)	/* effective weight of the whole GPU */
#define OWED_CAP_MIN 50000000ull	/* 50 ms */
#define PART_ONE 1000000u	/* part of the GPU: the whole (ppm) */

struct ent {
	uint64_t id;
	uint32_t weight;
	uint32_t shares;	/* guaranteed part, of shares_total */
	uint64_t ew;		/* effective weight (reweigh), >= 1 */
	uint64_t owed;		/* guaranteed time not yet received */
	uint32_t prio;		/* static, clamped to GS_SCHED_PRIO_MAX */
	uint32_t eff;		/* effective priority, last decision */
	uint8_t active;		/* wants the token */
	uint8_t holding;	/* holds the token (incl. while suspending) */
	uint8_t suspending;	/* SUSPEND sent, no release yet */
	uint8_t revoked;	/* escalated, token taken, no release yet */
	uint8_t held_back;	/* serving its overrun penalty */
	uint8_t can_return;	/* went idle as holder: may come back */
	uint8_t back;		/* came back within the idle grace */
	uint64_t vtime;
	uint64_t gpu_ns;	/* total charged GPU time */
	uint64_t wait_since;	/* DYNPRIO aging origin */
	uint64_t grant_at;
	uint64_t suspend_at;
	uint64_t revoked_at;
	uint64_t hold_until;	/* held_back: penalty end */
	uint64_t skip_ns;	/* not charged at release (charged already
				 * at an older weight, or a policy change) */
	uint64_t charged_to;	/* holder: vtime covers the grant to here */
	uint64_t idle_at;	/* can_return: time of the idle release */
	uint64_t lag;		/* can_return: vtime below the others then */
	uint64_t group;		/* co-grant set key, 0: alone (time mode) */
	uint32_t part;		/* holder: its part of the GPU (ppm) */
};

struct gs_sched {
	struct gs_sched_params p;
	struct ent *e;
	unsigned n, cap;
	unsigned nhold;		/* holders (one grant set), 0: token free */
	uint64_t slice_end;	/* the grant set's slice end */
	uint64_t floor[NCLASS];	/* per-class vtime floor, monotonic */
	uint64_t last_now;	/* latest time any call was given */
	uint64_t acc_at;	/* owed accrued up to here */
};

void
gs_sched_params_default(struct gs_sched_params *p)
{
	memset(p, 0, sizeof(*p));
	p->policy = GS_POLICY_WFQ;
	p->slice_ns = DEF_SLICE_NS;
	p->grace_ns = DEF_GRACE_NS;
	p->escalation = GS_ESC_HOLD;
	p->aging_ns = DEF_SLICE_NS;
	p->idle_grace_ns = DEF_IDLE_GRACE_NS;
	p->shares_total = DEF_SHARES_TOTAL;
}

static void
params_fix(struct gs_sched_params *dst, const struct gs_sched_params *src)
{
	*dst = *src;
	if (dst->policy > GS_POLICY_DYNPRIO)
		dst->policy = GS_POLICY_WFQ;
	if (dst->slice_ns == 0)
		dst->slice_ns = DEF_SLICE_NS;
	if (dst->aging_ns == 0)
		dst->aging_ns = dst->slice_ns;
	if (dst->shares_total == 0)
		dst->shares_total = DEF_SHARES_TOTAL;
}

struct gs_sched *
gs_sched_new(const struct gs_sched_params *p)
{
	struct gs_sched *s;
	struct gs_sched_params def;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	if (p == NULL) {
		gs_sched_params_default(&def);
		p = &def;
	}
	params_fix(&s->p, p);
	return s;
}

void
gs_sched_free(struct gs_sched *s)
{
	if (s == NULL)
		return;
	free(s->e);
	free(s);
}

static void reweigh(struct gs_sched *s, uint64_t now);

void
gs_sched_set_params(struct gs_sched *s, const struct gs_sched_params *p)
{
	uint32_t old = s->p.policy;
	uint64_t m = 0;
	unsigned i, c;

	params_fix(&s->p, p);
	reweigh(s, s->last_now);
	if (s->p.policy == old)
		return;
	/* A new policy starts a new fairness epoch: virtual times built
	 * under the old classes (a low class starved by a static priority)
	 * must not turn into a burst under the new ones. */
	for (i = 0; i < s->n; i++)
		if (s->e[i].vtime > m)
			m = s->e[i].vtime;
	for (c = 0; c < NCLASS; c++)
		if (s->floor[c] > m)
			m = s->floor[c];
	for (i = 0; i < s->n; i++) {
		s->e[i].vtime = m;
		s->e[i].can_return = 0;	/* lags of the old epoch */
		s->e[i].back = 0;
		s->e[i].owed = 0;
	}
	for (c = 0; c < NCLASS; c++)
		s->floor[c] = m;
	/* The holders' grant so far belongs to the old epoch too. */
	for (i = 0; i < s->n; i++) {
		struct ent *h = &s->e[i];

		if (h->holding && s->last_now > h->charged_to) {
			h->skip_ns += s->last_now - h->charged_to;
			h->charged_to = s->last_now;
		}
	}
}

static void
saw(struct gs_sched *s, uint64_t now)
{
	if (now > s->last_now)
		s->last_now = now;
}

static int
find(const struct gs_sched *s, uint64_t id)
{
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (s->e[i].id == id)
			return (int)i;
	return -1;
}

static uint32_t
clamp_prio(uint32_t prio)
{
	return prio > GS_SCHED_PRIO_MAX ? GS_SCHED_PRIO_MAX : prio;
}

/* Class of an entry for vtime floors: WFQ ignores priorities. */
static unsigned
cls(const struct gs_sched *s, const struct ent *e)
{
	return s->p.policy == GS_POLICY_WFQ ? 0u : e->prio;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Virtual time of ns of GPU time at effective weight eff: GPU time
 * divided by the fraction of the GPU the entry is due. */
static uint64_t
charge_of(uint64_t ns, uint64_t eff)
{
	unsigned __int128 v = (unsigned __int128)ns * EFF_ONE;

	v /= eff ? eff : 1;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* Virtual time of ns of wall time held with part (ppm) of the GPU. */
static uint64_t
charge_part(uint64_t ns, uint32_t part, uint64_t eff)
{
	unsigned __int128 v = (unsigned __int128)ns * part * EFF_ONE;

	v /= (unsigned __int128)PART_ONE * (eff ? eff : 1);
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* ns of wall time held with part (ppm) of the GPU, as GPU time. */
static uint64_t
part_of(uint64_t ns, uint32_t part)
{
	return (uint64_t)((unsigned __int128)ns * part / PART_ONE);
}

/* Does e compete for the GPU now (wants it, token not revoked)? */
static int
competing(const struct ent *e)
{
	return e->active && !e->revoked;
}

/* Effective weight (fraction of the GPU x EFF_ONE) of an entry with
 * `shares` and `weight` among competitors holding sum_sh shares and
 * sum_w weight (itself included): its guarantee, plus its weight's part
 * of what no competitor guarantees. */
static uint64_t
eff_of(const struct gs_sched *s, uint32_t shares, uint32_t weight,
       uint64_t sum_sh, uint64_t sum_w)
{
	uint64_t tot = s->p.shares_total;
	unsigned __int128 v;

	if (sum_sh >= tot) {
		/* oversubscribed (never by the agent's admission): the
		 * guarantees scale down together */
		v = (unsigned __int128)shares * EFF_ONE / sum_sh;
		if (sum_sh == 0)
			v = EFF_ONE;
	} else {
		v = (unsigned __int128)shares * EFF_ONE / tot;
		if (sum_w > 0)
			v += (unsigned __int128)(tot - sum_sh) * EFF_ONE *
			     weight / ((unsigned __int128)tot * sum_w);
	}
	return v == 0 ? 1 : (uint64_t)v;
}

/* Recompute every effective weight after the competing set, the
 * holders, a share or a weight changed.  A non-competing entry gets the
 * weight it would have if it joined.  Each holder's part of the GPU is
 * its effective weight over the sum of the holders' (1 alone): a grant
 * set runs at the sum of its members' weights, and every member's
 * virtual time advances alike, wall time / that sum.  O(n). */
static void
reweigh(struct gs_sched *s, uint64_t now)
{
	uint64_t sum_sh = 0, sum_w = 0, sum_hew = 0;
	unsigned i;

	/* The holders' time so far is charged at the weight and part they
	 * ran with (and not again at their release). */
	for (i = 0; i < s->n; i++) {
		struct ent *h = &s->e[i];
		uint64_t d;

		if (!h->holding || now <= h->charged_to)
			continue;
		d = now - h->charged_to;
		h->vtime = sat_add(h->vtime, charge_part(d, h->part, h->ew));
		h->skip_ns = sat_add(h->skip_ns, d);
		h->charged_to = now;
	}

	for (i = 0; i < s->n; i++)
		if (competing(&s->e[i])) {
			sum_sh += s->e[i].shares;
			sum_w += s->e[i].weight;
		}
	for (i = 0; i < s->n; i++) {
		struct ent *e = &s->e[i];

		if (competing(e))
			e->ew = eff_of(s, e->shares, e->weight, sum_sh, sum_w);
		else
			e->ew = eff_of(s, e->shares, e->weight,
					sum_sh + e->shares, sum_w + e->weight);
		if (e->holding)
			sum_hew += e->ew;
	}
	for (i = 0; i < s->n; i++) {
		struct ent *e = &s->e[i];

		e->part = PART_ONE;
		if (e->holding && s->nhold > 1 && sum_hew > 0)
			e->part = (uint32_t)((unsigned __int128)e->ew *
					     PART_ONE / sum_hew);
		if (e->part == 0)
			e->part = 1;
	}
}

static uint64_t
owed_cap(const struct gs_sched *s)
{
	uint64_t c = 4 * s->p.slice_ns;

	return c > OWED_CAP_MIN ? c : OWED_CAP_MIN;
}

/* The guarantee's bookkeeping: a competing entry (not serving a
 * hold-back) is owed shares/shares_total of the wall time; a holder
 * pays with the wall time it holds the token (what the agent observes,
 * not what it reports) times its part of the GPU.  Kept in [0, owed_cap]: time received beyond the
 * guarantee is not owed back, and a guarantee missed long ago (the cap)
 * is not paid in one burst. */
static void
accrue(struct gs_sched *s, uint64_t now)
{
	uint64_t dt, cap = owed_cap(s);
	unsigned i;

	if (now <= s->acc_at) {
		return;
	}
	dt = now - s->acc_at;
	s->acc_at = now;
	for (i = 0; i < s->n; i++) {
		struct ent *e = &s->e[i];
		uint64_t sh = e->shares < s->p.shares_total ? e->shares
							    : s->p.shares_total;
		uint64_t gain;

		if (!competing(e) || (e->held_back && now < e->hold_until)) {
			if (!competing(e))
				e->owed = 0;
			continue;
		}
		gain = (uint64_t)((unsigned __int128)dt * sh /
				  s->p.shares_total);
		e->owed = sat_add(e->owed, gain);
		if (e->holding) {
			uint64_t paid = part_of(dt, e->part);

			e->owed = e->owed > paid ? e->owed - paid : 0;
		}
		if (e->owed > cap)
			e->owed = cap;
	}
}

/* vtime used for comparisons: a holder's includes the time held so far. */
static uint64_t
proj_vt(const struct ent *e, uint64_t now)
{
	if (e->holding && now > e->charged_to)
		return sat_add(e->vtime, charge_part(now - e->charged_to,
						     e->part, e->ew));
	return e->vtime;
}

static uint32_t
eff_prio(const struct gs_sched *s, const struct ent *e, uint64_t now)
{
	uint64_t boost;

	if (s->p.policy == GS_POLICY_WFQ)
		return 0;
	if (s->p.policy == GS_POLICY_PRIORITY || e->holding ||
	    now <= e->wait_since)
		return e->prio;
	boost = (now - e->wait_since) / s->p.aging_ns;
	if (boost > GS_SCHED_BOOST_MAX)
		boost = GS_SCHED_BOOST_MAX;
	return e->prio + (uint32_t)boost;
}

/* Raise the class floors to the least projected vtime of each class's
 * active entries.  O(n). */
static void
update_floors(struct gs_sched *s, uint64_t now)
{
	uint64_t min[NCLASS];
	unsigned i, c;

	for (c = 0; c < NCLASS; c++)
		min[c] = UINT64_MAX;
	for (i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];
		uint64_t v;

		if (!e->active || e->revoked)
			continue;
		c = cls(s, e);
		v = proj_vt(e, now);
		if (v < min[c])
			min[c] = v;
	}
	for (c = 0; c < NCLASS; c++)
		if (min[c] != UINT64_MAX && min[c] > s->floor[c])
			s->floor[c] = min[c];
}

/* Does any active entry other than `skip` share e's class? */
static int
class_has_other(const struct gs_sched *s, const struct ent *e, unsigned skip)
{
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (i != skip && s->e[i].active && !s->e[i].revoked &&
		    cls(s, &s->e[i]) == cls(s, e))
			return 1;
	return 0;
}

/* Least projected vtime of the active entries of e's class other than
 * e (UINT64_MAX: none). */
static uint64_t
others_min(const struct gs_sched *s, const struct ent *e, uint64_t now)
{
	uint64_t m = UINT64_MAX;
	unsigned i;

	for (i = 0; i < s->n; i++) {
		const struct ent *o = &s->e[i];

		if (o == e || !o->active || o->revoked ||
		    cls(s, o) != cls(s, e))
			continue;
		if (proj_vt(o, now) < m)
			m = proj_vt(o, now);
	}
	return m;
}

/* The activation reset: an entry that starts wanting the GPU begins at
 * its class floor, so idling saves nothing up.  Within the idle grace
 * after an idle release as holder it keeps its own vtime, but no further
 * below the floor than the lag it had then, or the grace's worth of its
 * own GPU time if that is more. */
static void
activate(struct gs_sched *s, struct ent *e, uint64_t now)
{
	uint64_t f;

	update_floors(s, now);
	f = s->floor[cls(s, e)];
	e->back = e->can_return && s->p.idle_grace_ns != 0 &&
		  now >= e->idle_at && now - e->idle_at < s->p.idle_grace_ns;
	e->can_return = 0;
	if (e->back) {
		/* It keeps its own vtime, unless that lies further below
		 * the floor than its lag or the grace's worth of its own
		 * GPU time: no saving up over many short gaps. */
		uint64_t bank = charge_of(s->p.idle_grace_ns, e->ew);

		if (e->lag > bank)
			bank = e->lag;
		f = f > bank ? f - bank : 0;
	}
	if (e->vtime < f)
		e->vtime = f;
	e->active = 1;
	e->wait_since = now;
}

int
gs_sched_add(struct gs_sched *s, uint64_t id, uint32_t weight,
	     uint32_t priority, uint64_t now)
{
	return gs_sched_add_shares(s, id, 0, weight, priority, now);
}

int
gs_sched_add_shares(struct gs_sched *s, uint64_t id, uint32_t shares,
		    uint32_t weight, uint32_t priority, uint64_t now)
{
	struct ent *e;

	saw(s, now);
	if (weight == 0 || find(s, id) >= 0)
		return -1;
	accrue(s, now);
	if (s->n == s->cap) {
		unsigned ncap = s->cap ? s->cap * 2 : 8;
		struct ent *ne = realloc(s->e, ncap * sizeof(*ne));

		if (ne == NULL)
			return -1;
		s->e = ne;
		s->cap = ncap;
	}
	e = &s->e[s->n++];
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->weight = weight;
	e->shares = shares;
	e->prio = clamp_prio(priority);
	e->eff = e->prio;
	update_floors(s, now);
	e->vtime = s->floor[cls(s, e)];
	reweigh(s, now);
	return 0;
}

void
gs_sched_remove(struct gs_sched *s, uint64_t id, uint64_t now)
{
	int i = find(s, id);
	struct ent *e;

	saw(s, now);
	if (i < 0)
		return;
	accrue(s, now);
	e = &s->e[i];
	update_floors(s, now);
	/* Last active of its class: keep its vtime as the floor. */
	if (e->active && !e->revoked && !class_has_other(s, e, (unsigned)i) &&
	    e->vtime > s->floor[cls(s, e)])
		s->floor[cls(s, e)] = e->vtime;
	if (e->holding)
		s->nhold--;
	s->n--;
	if ((unsigned)i != s->n)
		s->e[i] = s->e[s->n];
	reweigh(s, now);
}

int
gs_sched_set_weight(struct gs_sched *s, uint64_t id, uint32_t weight)
{
	int i = find(s, id);

	if (i < 0 || weight == 0)
		return -1;
	/* The holder's time so far is charged at the weight it has
	 * when it releases; only the projection changes, which is fine for
	 * a one-slice window. */
	s->e[i].weight = weight;
	reweigh(s, s->last_now);
	return 0;
}

int
gs_sched_set_shares(struct gs_sched *s, uint64_t id, uint32_t shares)
{
	int i = find(s, id);

	if (i < 0)
		return -1;
	s->e[i].shares = shares;
	reweigh(s, s->last_now);
	return 0;
}

int
gs_sched_set_priority(struct gs_sched *s, uint64_t id, uint32_t prio)
{
	int i = find(s, id);
	struct ent *e;

	if (i < 0)
		return -1;
	e = &s->e[i];
	prio = clamp_prio(prio);
	if (prio == e->prio)
		return 0;
	e->prio = prio;
	e->eff = prio;
	e->can_return = 0;	/* its lag was against the old class */
	e->back = 0;
	/* Entering another class: no burst against its members. */
	if (s->p.policy != GS_POLICY_WFQ && e->active && !e->revoked) {
		update_floors(s, 0);	/* no clock here: no projection */
		if (e->vtime < s->floor[prio])
			e->vtime = s->floor[prio];
	}
	return 0;
}

int
gs_sched_want(struct gs_sched *s, uint64_t id, uint64_t now)
{
	int i = find(s, id);
	struct ent *e;

	saw(s, now);
	if (i < 0)
		return -1;
	e = &s->e[i];
	if (e->active)
		return 0;
	accrue(s, now);
	if (e->revoked) {
		/* Still owes a release; it becomes a waiter once it does. */
		e->active = 1;
		return 0;
	}
	activate(s, e, now);
	e->owed = 0;	/* idling saves no guarantee up either */
	reweigh(s, now);
	return 0;
}

/* An entry going idle: how far below the others it is, kept if it comes
 * back within the idle grace. */
static void
mark_return(struct gs_sched *s, struct ent *e, uint64_t now)
{
	uint64_t m = others_min(s, e, now);

	e->can_return = 1;
	e->idle_at = now;
	e->lag = m != UINT64_MAX && m > e->vtime ? m - e->vtime : 0;
}

/* ... and leaving the active set (after update_floors). */
static void
go_inactive(struct gs_sched *s, struct ent *e, unsigned i)
{
	if (e->active && !class_has_other(s, e, i) &&
	    e->vtime > s->floor[cls(s, e)])
		s->floor[cls(s, e)] = e->vtime;
	e->active = 0;
	e->owed = 0;
}

int
gs_sched_unwant(struct gs_sched *s, uint64_t id, uint64_t now)
{
	int i = find(s, id);
	struct ent *e;

	saw(s, now);
	if (i < 0)
		return -1;
	e = &s->e[i];
	if (e->holding || e->revoked)
		return -1;	/* a holder gives the token back instead */
	if (!e->active)
		return 0;
	accrue(s, now);
	mark_return(s, e, now);
	update_floors(s, now);
	go_inactive(s, e, (unsigned)i);
	reweigh(s, now);
	return 0;
}

int
gs_sched_release(struct gs_sched *s, uint64_t id, uint64_t gpu_ns, int idle,
		 uint64_t now)
{
	int i = find(s, id);
	struct ent *e;

	saw(s, now);
	if (i < 0)
		return -1;
	if (!s->e[i].holding && !s->e[i].revoked)
		return -1;	/* not holding the token */
	accrue(s, now);
	e = &s->e[i];
	if (e->revoked) {
		/* Late release of an escalated holder: charge the rest of the
		 * held time, then hold it back for as long as it overran. */
		uint64_t rest = now > e->revoked_at ? now - e->revoked_at : 0;
		uint64_t over = now > e->suspend_at ? now - e->suspend_at : 0;

		e->vtime = sat_add(e->vtime, charge_of(rest, e->ew));
		e->gpu_ns = sat_add(e->gpu_ns, rest);
		e->revoked = 0;
		e->suspending = 0;
		e->held_back = 1;
		e->hold_until = sat_add(now, over);
		e->can_return = 0;
		e->owed = 0;
	} else {
		uint64_t held = now > e->grant_at ? now - e->grant_at : 0;
		uint64_t used = gs_sched_charge(held, gpu_ns);
		uint64_t c = used > e->skip_ns ? used - e->skip_ns : 0;

		/* co-granted: the rest at its part of the GPU (what its
		 * partition gave it), the wall time before at the parts of
		 * then (reweigh) */
		e->vtime = sat_add(e->vtime, charge_part(c, e->part, e->ew));
		e->skip_ns = 0;
		e->gpu_ns = sat_add(e->gpu_ns, s->nhold > 1 ?
					part_of(used, e->part) : used);
		e->holding = 0;
		e->suspending = 0;
		s->nhold--;
		if (idle)
			mark_return(s, e, now);
	}
	update_floors(s, now);
	if (idle) {
		go_inactive(s, e, (unsigned)i);
	} else {
		e->active = 1;
		e->wait_since = now;
		if (e->vtime < s->floor[cls(s, e)])
			e->vtime = s->floor[cls(s, e)];
	}
	reweigh(s, now);
	return 0;
}

/* Priority policies: is e behind its guarantee by a slice or more?  Such
 * a waiter runs before any entry that is not, whatever the priorities
 * (WFQ gives every entry its guarantee through the effective weights). */
static int
due(const struct gs_sched *s, const struct ent *e)
{
	return s->p.policy != GS_POLICY_WFQ && e->shares > 0 &&
	       e->owed >= s->p.slice_ns;
}

/* Priority policies: is holder h still receiving guaranteed time (owed
 * left)?  Then no priority may take the GPU from it. */
static int
protected_holder(const struct gs_sched *s, const struct ent *h)
{
	return s->p.policy != GS_POLICY_WFQ && h->shares > 0 && h->owed > 0;
}

/* When a protected holder's owed runs out (it pays part - shares/total
 * per ns held); UINT64_MAX when it never does. */
static uint64_t
protection_end(const struct gs_sched *s, const struct ent *h, uint64_t now)
{
	uint64_t tot = s->p.shares_total;
	uint64_t sh = (uint64_t)(h->shares < tot ? h->shares : tot) *
		      PART_ONE / tot;
	unsigned __int128 t;

	if (h->part <= sh)
		return UINT64_MAX;
	t = (unsigned __int128)h->owed * PART_ONE / (h->part - sh) + 1;
	return t > UINT64_MAX - now ? UINT64_MAX : now + (uint64_t)t;
}

/* A grant set is protected while any of its holders is; it is until the
 * last one's protection ends. */
static int
protected_set(const struct gs_sched *s, uint64_t now, uint64_t *end)
{
	unsigned i;
	int any = 0;

	*end = 0;
	for (i = 0; i < s->n; i++) {
		const struct ent *h = &s->e[i];
		uint64_t t;

		if (!h->holding || !protected_holder(s, h))
			continue;
		any = 1;
		t = protection_end(s, h, now);
		if (t > *end)
			*end = t;
	}
	return any;
}

/* Earliest time a competing waiter not yet due becomes due (priority
 * policies; UINT64_MAX: none). */
static uint64_t
next_due(const struct gs_sched *s, uint64_t now)
{
	uint64_t t = UINT64_MAX, tot = s->p.shares_total;
	unsigned i;

	if (s->p.policy == GS_POLICY_WFQ)
		return UINT64_MAX;
	for (i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];
		unsigned __int128 d;

		if (e->holding || !competing(e) || e->shares == 0 ||
		    due(s, e) || (e->held_back && now < e->hold_until))
			continue;
		d = (unsigned __int128)(s->p.slice_ns - e->owed) * tot /
		    (e->shares < tot ? e->shares : tot) + 1;
		if (d < t - now)
			t = now + (uint64_t)d;
	}
	return t;
}

/* Is a better than b as the next holder?  Under the priority policies an
 * entry due its guarantee first; then higher effective priority, then
 * less vtime, then lower id (determinism). */
static int
better(const struct gs_sched *s, const struct ent *a, const struct ent *b,
       uint64_t now)
{
	uint32_t ea = eff_prio(s, a, now), eb = eff_prio(s, b, now);
	uint64_t va, vb;

	if (due(s, a) != due(s, b))
		return due(s, a);
	if (ea != eb)
		return ea > eb;
	va = proj_vt(a, now);
	vb = proj_vt(b, now);
	if (va != vb)
		return va < vb;
	return a->id < b->id;
}

static int
in_penalty(const struct ent *e, uint64_t now)
{
	return e->held_back && now < e->hold_until;
}

/* Best waiting entry (not a holder, not revoked).  Entries serving a
 * hold-back are considered only when nobody else waits; *pen_end gets
 * the earliest end of a penalty that was skipped. */
static int
pick(const struct gs_sched *s, uint64_t now, uint64_t *pen_end)
{
	int best = -1, best_pen = -1;
	unsigned i;

	for (i = 0; i < s->n; i++) {
		const struct ent *e = &s->e[i];

		if (!e->active || e->revoked || e->holding)
			continue;
		if (in_penalty(e, now)) {
			if (e->hold_until < *pen_end)
				*pen_end = e->hold_until;
			if (best_pen < 0 || better(s, e, &s->e[best_pen], now))
				best_pen = (int)i;
			continue;
		}
		if (best < 0 || better(s, e, &s->e[best], now))
			best = (int)i;
	}
	return best >= 0 ? best : best_pen;
}

static void
emit(struct gs_sched_action *acts, int *na, uint32_t kind, uint64_t id,
     uint64_t slice)
{
	acts[*na].kind = kind;
	acts[*na].id = id;
	acts[*na].slice_ns = slice;
	(*na)++;
}

static uint64_t
umin(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* A hold-back that has run out: the entry competes again, starting no
 * lower than the others of its class (as after an idle period), so the
 * time they got while it was held back is not owed back to it. */
static void
end_penalties(struct gs_sched *s, uint64_t now)
{
	unsigned i, k;

	for (i = 0; i < s->n; i++) {
		struct ent *e = &s->e[i];
		uint64_t m = UINT64_MAX;

		if (!e->held_back || e->revoked || now < e->hold_until)
			continue;
		e->held_back = 0;
		for (k = 0; k < s->n; k++) {
			const struct ent *o = &s->e[k];

			if (k == i || !o->active || o->revoked ||
			    o->held_back || cls(s, o) != cls(s, e))
				continue;
			if (proj_vt(o, now) < m)
				m = proj_vt(o, now);
		}
		if (m != UINT64_MAX && e->vtime < m)
			e->vtime = m;
	}
}

/* The holder that speaks for the grant set (-1: token free): the best
 * of them by the order of `better` (the member most behind). */
static int
lead(const struct gs_sched *s, uint64_t now)
{
	int best = -1;
	unsigned i;

	for (i = 0; i < s->n; i++)
		if (s->e[i].holding &&
		    (best < 0 || better(s, &s->e[i], &s->e[best], now)))
			best = (int)i;
	return best;
}

/* May waiter e join (or be granted with) a grant set of key g? */
static int
joins(const struct ent *e, uint64_t g, uint64_t now)
{
	return g != 0 && e->group == g && e->active && !e->revoked &&
	       !e->holding && !in_penalty(e, now);
}

static void
grant_one(struct gs_sched *s, struct ent *h, uint64_t now)
{
	/* The priority it won with protects it from at-once preemption
	 * for this grant (DYNPRIO: aged). */
	h->eff = eff_prio(s, h, now);
	h->holding = 1;
	h->suspending = 0;
	h->held_back = 0;
	h->back = 0;
	h->grant_at = now;
	h->charged_to = now;
	h->skip_ns = 0;
	s->nhold++;
}

/* Holders of more than one co-grant set (a set changed while it held:
 * space mode's co-run check split it)? */
static int
holders_mixed(const struct gs_sched *s)
{
	uint64_t g = 0;
	unsigned i, k = 0;

	if (s->nhold < 2)
		return 0;
	for (i = 0; i < s->n; i++) {
		if (!s->e[i].holding)
			continue;
		if (k++ == 0)
			g = s->e[i].group;
		else if (g == 0 || s->e[i].group != g)
			return 1;
	}
	return 0;
}

int
gs_sched_step(struct gs_sched *s, uint64_t now, struct gs_sched_action *acts,
	      int max, uint64_t *next_ns)
{
	uint64_t next = UINT64_MAX, pen_end = UINT64_MAX, gkey = 0;
	struct ent *h;
	unsigned i;
	int na = 0, w, li, susp = 0, granted = 0;

	saw(s, now);
	accrue(s, now);
	end_penalties(s, now);

	/* 1. Suspending holders past their grace: charge, revoke, escalate.
	 * A grant set suspends as one: a holder not yet told is told.
	 * Holders that are no longer one set suspend too (as at a slice
	 * end; the next grant picks the best set). */
	for (i = 0; i < s->n; i++)
		if (s->e[i].holding && s->e[i].suspending)
			susp = 1;
	if (!susp && holders_mixed(s))
		susp = 1;
	for (i = 0; susp && i < s->n; i++) {
		h = &s->e[i];
		if (!h->holding)
			continue;
		if (!h->suspending) {
			if (na >= max)
				goto out_again;
			h->suspending = 1;
			h->suspend_at = now;
			emit(acts, &na, GS_ACT_SUSPEND, h->id, 0);
		}
		if (now >= sat_add(h->suspend_at, s->p.grace_ns)) {
			uint64_t held;

			if (na >= max)
				goto out_again;
			held = now > h->grant_at ? now - h->grant_at : 0;
			h->vtime = sat_add(h->vtime, charge_part(
				now > h->charged_to ? now - h->charged_to : 0,
				h->part, h->ew));
			h->gpu_ns = sat_add(h->gpu_ns, part_of(held, h->part));
			h->holding = 0;
			s->nhold--;
			h->revoked = 1;
			h->revoked_at = now;
			h->owed = 0;
			emit(acts, &na, GS_ACT_ESCALATE, h->id, 0);
			update_floors(s, now);
			reweigh(s, now);
		} else {
			next = umin(next, sat_add(h->suspend_at,
						  s->p.grace_ns));
		}
	}
	if (s->nhold > 0 && susp)
		goto out;
	next = UINT64_MAX;

	/* 2. Token free: grant the best waiter and the waiters of its
	 * co-grant set; token held: waiters of the holders' set join them
	 * for the rest of the slice. */
	if (s->nhold == 0) {
		w = pick(s, now, &pen_end);
		if (w < 0)
			goto out;
		if (na >= max)
			goto out_again;
		h = &s->e[w];
		grant_one(s, h, now);
		granted = 1;
		s->slice_end = sat_add(now, s->p.slice_ns);
		emit(acts, &na, GS_ACT_GRANT, h->id, s->p.slice_ns);
		pen_end = UINT64_MAX;
	}
	li = lead(s, now);
	gkey = s->e[li].group;
	for (i = 0; gkey != 0 && i < s->n; i++) {
		h = &s->e[i];
		if (!joins(h, gkey, now))
			continue;
		if (na >= max) {
			reweigh(s, now);
			goto out_again;
		}
		grant_one(s, h, now);
		granted = 1;
		emit(acts, &na, GS_ACT_GRANT, h->id,
		     s->slice_end > now ? s->slice_end - now : 1);
	}
	/* the new holders' parts (and the old ones' time at their old
	 * parts) */
	if (granted)
		reweigh(s, now);

	/* 3. Running holders: preempt, suspend at slice end, or extend. */
	li = lead(s, now);
	h = &s->e[li];
	w = pick(s, now, &pen_end);
	next = pen_end;
	if (w < 0)
		goto out;	/* alone: keeps the GPU, no suspends */
	{
		struct ent *c = &s->e[w];
		uint64_t pend;
		int preempt = 0, hprot = protected_set(s, now, &pend);

		c->eff = eff_prio(s, c, now);
		if (in_penalty(c, now)) {
			/* Only a penalised entry waits: the holder goes on; the
			 * waiter competes normally once its penalty ends. */
			goto out;
		}
		if (due(s, c) && !hprot)
			/* guarantees first: a waiter due its guarantee takes
			 * the GPU from a holder past its own at once */
			preempt = 1;
		else if (due(s, c))
			/* both behind: at slice end, or when the holder's
			 * owed time runs out */
			next = umin(next, pend);
		else if (hprot &&
		    ((s->p.policy != GS_POLICY_WFQ && c->prio > h->eff) ||
		     c->back))
			/* a priority or a returner may not take time the
			 * holder is guaranteed: look again when its owed
			 * time runs out */
			next = umin(next, pend);
		else if (s->p.policy != GS_POLICY_WFQ && c->prio > h->eff)
			preempt = 1;
		else if (c->back && c->eff == eff_prio(s, h, now) &&
			 c->vtime <= proj_vt(h, now))
			/* Back from a short gap, owed the GPU: the holder
			 * only filled the gap. */
			preempt = 1;
		if (!preempt && now >= s->slice_end) {
			uint32_t ec = c->eff, eh = eff_prio(s, h, now);

			if (hprot && !due(s, c))
				preempt = 0;	/* within its guarantee */
			else if (ec != eh)
				preempt = ec > eh;
			else
				preempt = c->vtime <= proj_vt(h, now);
			if (!preempt)
				s->slice_end = sat_add(now, s->p.slice_ns);
		}
		if (preempt) {
			for (i = 0; i < s->n; i++) {
				h = &s->e[i];
				if (!h->holding || h->suspending)
					continue;
				if (na >= max)
					goto out_again;
				h->suspending = 1;
				h->suspend_at = now;
				emit(acts, &na, GS_ACT_SUSPEND, h->id, 0);
			}
			next = sat_add(now, s->p.grace_ns);
		} else {
			next = umin(next, s->slice_end);
			next = umin(next, next_due(s, now));
		}
	}
out:
	*next_ns = next;
	return na;
out_again:
	*next_ns = now;
	return na;
}

int
gs_sched_info(const struct gs_sched *s, uint64_t id,
	      struct gs_sched_entry_info *out)
{
	int i = find(s, id);
	const struct ent *e;

	if (i < 0)
		return -1;
	e = &s->e[i];
	memset(out, 0, sizeof(*out));
	out->vtime_ns = e->vtime;
	out->gpu_ns = e->gpu_ns;
	out->active = e->active;
	out->holding = e->holding;
	out->suspending = e->suspending || e->revoked;
	out->held_back = e->held_back || e->revoked;
	out->eff_priority = e->eff;
	out->owed_ns = e->owed;
	out->rate_ppm = (uint32_t)((unsigned __int128)e->ew * 1000000u /
				   EFF_ONE);
	out->group = e->group;
	out->part_ppm = e->holding ? e->part : 0;
	return 0;
}

uint64_t
gs_sched_holder(const struct gs_sched *s)
{
	int li = lead(s, s->last_now);

	return li >= 0 ? s->e[li].id : 0;
}

uint64_t
gs_sched_next(const struct gs_sched *s, uint64_t now)
{
	uint64_t pen_end = UINT64_MAX;
	int w = pick(s, now, &pen_end);

	return w < 0 ? 0 : s->e[w].id;
}

uint64_t
gs_sched_slice_end(const struct gs_sched *s)
{
	return s->nhold > 0 ? s->slice_end : 0;
}

unsigned
gs_sched_holders(const struct gs_sched *s)
{
	return s->nhold;
}

int
gs_sched_set_group(struct gs_sched *s, uint64_t id, uint64_t group)
{
	int i = find(s, id);

	if (i < 0)
		return -1;
	s->e[i].group = group;
	return 0;
}

unsigned
gs_sched_count(const struct gs_sched *s)
{
	return s->n;
}
