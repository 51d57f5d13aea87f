/*
 * space_agent.c — glue between gshared and space mode's planner
 * (space.h): after every allocation event on a GPU that carries
 * space-mode allocations, plan that GPU again, write changed partitions
 * into the control pages (sm_first, sm_count, then part_gen: the runtime
 * applies them at its next relaunch) and keep each allocation's decision
 * for STATUS.
 *
 * Inputs the planner gets here: shares, uid, busy (the allocation wants
 * the GPU: waiting, running, suspending or held back; one whose job never
 * attached counts as busy, since a job without libgshare says nothing),
 * the uid served by the GPU's MPS daemon (mps.c), and the class, from
 * the allocation's counters (space.h): the running mean of the samples
 * space_sample.c attributes to it (the last GS_SPACE_MEAN_MAX weigh
 * alike; UNKNOWN before GS_SPACE_MIN_SAMPLES).  A sample that changes
 * the class plans the GPU again.
 *
 * Jobs that keep no partition (the launch gate says so in its page's
 * job_kind) are planned alone with `space_unmodified: turns` (fixed_of);
 * the tick plans again when a job says it after its attach.  Ties in the
 * split take turns: the planner's rotation step is the time over
 * `space_rotate`, and the tick plans again at each new step.
 *
 * The co-run check (space.h, docs/space.md): with `space_check` on, an
 * attached job is measured alone first (probe: a group of its own until
 * it held the token alone GS_SPACE_PROBE_MS), then co-runs; every
 * GS_SPACE_CHECK_MS of co-running the tick compares each member's
 * progress per second with its rate alone (space_sample.c counts both)
 * and applies gs_space_check's verdict: a granule moved (bias), or the
 * pair split for GS_SPACE_RETRY_S (apart).  A job that counts no
 * progress (the launch gate, a job without libgshare) is left to its
 * class.  A member whose partners change starts over (bias 0).
 *
 * Co-granting: every plan tells the GPU's token scheduler each space
 * allocation's co-grant set (gs_sched_set_group: the planner's group + 1
 * for clients of the GPU's MPS server, 0 — alone, like time mode — for
 * the others), so the members of a group are granted together, each on
 * its partition.  Partitions reach the control pages unless
 * `space_partitions: false` (then every member runs on the whole GPU:
 * MPS shares the SMs as the driver likes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "gs_log.h"
#include "loop.h"
#include "mps.h"
#include "space.h"
#include "space_agent.h"
#include "space_sample.h"

#define MAXPLAN 256
#define GS_SPACE_MEAN_MAX 16u	/* samples the running mean weighs */
#define NS_PER_MS 1000000ull
#define GS_SPACE_PROBE_MS 100u	/* held alone before the first co-run */
#define GS_SPACE_CHECK_MS 300u	/* co-running per check */
#define GS_SPACE_RETRY_S 30u	/* a split pair tries again after */
#define GS_SPACE_CHECK_EVERY_MS 50u	/* probes, splits, checks */
#define NAPART 8u

struct rec {
	uint64_t id;
	struct gs_space_out out;
	struct gs_space_counters cnt;	/* classification inputs */
	/* the co-run check */
	int32_t bias;			/* granules beyond its share */
	uint32_t probe;			/* planned alone to be measured */
	uint32_t fixed;			/* planned alone: keeps no partition */
	uint64_t partners;		/* hash of its busy partners' ids */
	uint64_t apart_id[NAPART];	/* measured slower beside it ... */
	uint64_t apart_until[NAPART];	/* ... until then (ns) */
	uint64_t last_from, last_to;	/* the group's move on trial (ids) */
	/* at the check that made that move: the lowest n / share, and its
	 * own co-run rate and SMs (what the move is judged against) */
	uint32_t last_min_d;
	uint64_t last_corun;
	uint32_t last_sms;
	int settled;
	int split_votes;		/* split verdicts in a row */
	char note[32];			/* the last check, for STATUS */
	uint64_t busy_until;		/* planned busy until (idle grace) */
	int was_busy;			/* busy at the last plan */
	int in_grace;			/* planned busy while idle */
};

struct gs_space_agent {
	struct gs_agent *ag;
	struct gs_mps *mps;
	struct rec *recs;	/* decisions, any order */
	uint32_t nrecs, cap;
	struct gs_space_sample *smp;	/* the counters' source */
	int busy;		/* re-entrancy guard (notify from plan) */
	uint32_t rot;		/* rotation step of the last plans */
	uint64_t next_check;	/* next probe/split/check pass */
};

/* The planner's rotation step now (space.h: ties take turns). */
static uint32_t rot_of(const struct gs_agent_config *cfg, uint64_t now)
{
	return cfg->space_rotate_ns ? (uint32_t)(now / cfg->space_rotate_ns)
				    : 0u;
}

static struct rec *rec_find(struct gs_space_agent *sa, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < sa->nrecs; i++)
		if (sa->recs[i].id == id)
			return &sa->recs[i];
	return NULL;
}

static struct rec *rec_get(struct gs_space_agent *sa, uint64_t id)
{
	struct rec *r = rec_find(sa, id);

	if (r != NULL)
		return r;
	if (sa->nrecs == sa->cap) {
		uint32_t nc = sa->cap ? sa->cap * 2 : 16;
		struct rec *n = realloc(sa->recs, nc * sizeof(*n));

		if (n == NULL)
			return NULL;
		sa->recs = n;
		sa->cap = nc;
	}
	r = &sa->recs[sa->nrecs++];
	memset(r, 0, sizeof(*r));
	r->id = id;
	return r;
}

static void rec_drop(struct gs_space_agent *sa, uint64_t id)
{
	struct rec *r = rec_find(sa, id);

	if (r != NULL)
		*r = sa->recs[--sa->nrecs];
}

static int busy_of(const struct gs_alloc *a)
{
	switch (a->state) {
	case GS_ASTATE_WAITING:
	case GS_ASTATE_RUNNING:
	case GS_ASTATE_SUSPENDING:
	case GS_ASTATE_HELD:
		return 1;
	case GS_ASTATE_CREATED:
		return a->conn == NULL;	/* never attached: assume busy */
	default:
		return 0;
	}
}

static void write_one(struct gs_ctlpage *p, const struct gs_space_out *o)
{
	uint64_t gen;

	if (p == NULL)
		return;
	if (__atomic_load_n(&p->sm_first, __ATOMIC_RELAXED) == o->sm_first &&
	    __atomic_load_n(&p->sm_count, __ATOMIC_RELAXED) == o->sm_count)
		return;
	__atomic_store_n(&p->sm_first, o->sm_first, __ATOMIC_RELAXED);
	__atomic_store_n(&p->sm_count, o->sm_count, __ATOMIC_RELAXED);
	__atomic_store_n(&p->part_set_ns, gs_now_ns(), __ATOMIC_RELAXED);
	gen = __atomic_load_n(&p->part_gen, __ATOMIC_RELAXED);
	__atomic_store_n(&p->part_gen, gen + 1, __ATOMIC_RELEASE);
}

/* Every attached process of the allocation has its own page (several
 * processes per allocation): each gets the partition. */
static void write_page(struct gs_alloc *a, const struct gs_space_out *o)
{
	unsigned k;

	for (k = 0; k < a->natt; k++)
		write_one(a->att[k].page, o);
}

static struct gs_sched *sched_of(struct gs_space_agent *sa, int32_t gpu)
{
	uint32_t i;

	for (i = 0; i < gs_agent_ngpus(sa->ag); i++)
		if (gs_agent_gpu(sa->ag, i)->d.index == gpu)
			return gs_agent_gpu(sa->ag, i)->sched;
	return NULL;
}

/* Is a measured alone first (the co-run check's probe)? */
static uint32_t probe_of(struct gs_space_agent *sa, const struct gs_alloc *a)
{
	struct gs_space_rates r;

	if (!gs_agent_config(sa->ag)->space_check || a->natt == 0)
		return 0;
	(void)gs_space_sample_rates(sa->smp, a->id, &r);
	return r.solo_ns < GS_SPACE_PROBE_MS * NS_PER_MS;
}

/* Does a run alone, because its job cannot keep a partition?  A job
 * under the launch gate says so in its page (job_kind); with
 * `space_unmodified: cap` it co-runs under its thread cap instead.  The
 * word is the job's to write: claiming the gate only makes its own
 * allocation take turns, and a gated job that claims libgshare co-runs
 * on SMs it does not keep to, as a job that bypasses the gate would.
 * The first word each attached process says is kept (gs_attach.kind):
 * one plan per attach, however often the job rewrites it. */
static uint32_t fixed_of(struct gs_space_agent *sa, struct gs_alloc *a)
{
	unsigned k;
	uint32_t fixed = 0;

	for (k = 0; k < a->natt; k++) {
		struct gs_attach *t = &a->att[k];

		if (t->conn == NULL || t->page == NULL)
			continue;
		if (t->kind == GS_CTL_JOB_UNKNOWN)
			t->kind = __atomic_load_n(&t->page->job_kind,
						  __ATOMIC_RELAXED);
		fixed |= t->kind == GS_CTL_JOB_GATE;
	}
	return gs_agent_config(sa->ag)->space_unmodified ==
		       GS_SPACE_UNMOD_TURNS && fixed;
}

static int apart_of(const struct rec *r, uint64_t other, uint64_t now)
{
	uint32_t k;

	for (k = 0; k < NAPART; k++)
		if (r->apart_id[k] == other && r->apart_until[k] > now)
			return 1;
	return 0;
}

static void apart_set(struct rec *r, uint64_t other, uint64_t until)
{
	uint32_t k, v = 0;

	for (k = 0; k < NAPART; k++) {
		if (r->apart_id[k] == other) {
			v = k;
			break;
		}
		if (r->apart_until[k] < r->apart_until[v])
			v = k;	/* the oldest goes */
	}
	r->apart_id[v] = other;
	r->apart_until[v] = until;
}

/* A member's check state starts over (new partners). */
static void check_reset(struct gs_space_agent *sa, struct rec *r)
{
	r->bias = 0;
	r->last_from = r->last_to = 0;
	r->last_min_d = 0;
	r->last_corun = 0;
	r->last_sms = 0;
	r->settled = 0;
	r->split_votes = 0;
	r->note[0] = '\0';
	gs_space_sample_corun_reset(sa->smp, r->id);
}

static void plan_once(struct gs_space_agent *sa, int32_t gpu, uint64_t gone,
		      int *again);

/* Plan GPU index gpu again, without allocation `gone` (closing). */
static void plan_gpu(struct gs_space_agent *sa, int32_t gpu, uint64_t gone)
{
	int again = 0;

	plan_once(sa, gpu, gone, &again);
	if (again)	/* a bias dropped with its partners */
		plan_once(sa, gpu, gone, &again);
}

static void plan_once(struct gs_space_agent *sa, int32_t gpu, uint64_t gone,
		      int *again)
{
	const struct gs_agent_config *cfg = gs_agent_config(sa->ag);
	struct gs_alloc_table *t = gs_agent_allocs(sa->ag);
	struct gs_space_in *in = NULL;
	struct gs_space_out *out = NULL;
	struct gs_sched *sched = sched_of(sa, gpu);
	struct gs_space_params p;
	struct gs_alloc *a;
	uint8_t *apart = NULL;
	uint64_t now = gs_now_ns();
	uint32_t n = 0, i, j;

	*again = 0;
	in = calloc(MAXPLAN, sizeof(*in));
	out = calloc(MAXPLAN, sizeof(*out));
	if (in == NULL || out == NULL)
		goto out_free;
	for (a = gs_alloc_first(t); a != NULL && n < MAXPLAN;
	     a = gs_alloc_next(t, a)) {
		if (a->gpu != gpu || a->mode != GS_MODE_SPACE ||
		    a->id == gone || a->state == GS_ASTATE_CLOSED)
			continue;
		in[n].id = a->id;
		in[n].uid = a->uid;
		in[n].shares = a->shares ? a->shares : 1;
		in[n].busy = (uint32_t)busy_of(a);
		in[n].cls = GS_SC_UNKNOWN;
		in[n].fixed = fixed_of(sa, a);
		if (rec_find(sa, a->id) != NULL) {
			struct rec *r = rec_find(sa, a->id);

			/* an attached job between two synchronizes keeps
			 * its SMs for idle_grace: a pause of a few us
			 * must not resize every partition twice */
			r->in_grace = 0;
			if (in[n].busy) {
				r->was_busy = 1;
			} else if (a->conn != NULL) {
				if (r->was_busy)	/* it just went idle */
					r->busy_until = now +
							cfg->idle_grace_ns;
				r->was_busy = 0;
				if (now < r->busy_until)
					in[n].busy = r->in_grace = 1;
			}

			in[n].cls = gs_space_classify(&r->cnt);
			in[n].bias = cfg->space_check ? r->bias : 0;
			r->probe = in[n].probe = probe_of(sa, a);
		}
		n++;
	}
	if (n == 0)
		goto out_free;
	p.sm_total = cfg->sm_count;
	p.granule = cfg->sm_granule;
	p.mps_uid = gs_mps_uid(sa->mps, gpu);
	p.apart = NULL;
	p.rotate = rot_of(cfg, now);
	if (cfg->space_check && n > 1 &&
	    (apart = calloc((size_t)n * n, 1)) != NULL) {
		for (i = 0; i < n; i++) {
			const struct rec *r = rec_find(sa, in[i].id);

			for (j = 0; r != NULL && j < n; j++)
				if (j != i && apart_of(r, in[j].id, now)) {
					apart[(size_t)i * n + j] = 1;
					apart[(size_t)j * n + i] = 1;
				}
		}
		p.apart = apart;
	}
	if (gs_space_plan(&p, in, n, out) < 0)
		goto out_free;
	for (i = 0; i < n; i++) {
		struct rec *r = rec_get(sa, in[i].id);
		uint64_t sig = 0;

		a = gs_alloc_get(t, in[i].id);
		if (r == NULL || a == NULL)
			continue;
		/* its busy partners: new ones start the check over */
		for (j = 0; j < n && out[i].corun; j++)
			if (j != i && out[j].corun &&
			    out[j].group == out[i].group)
				sig += in[j].id * 0x9e3779b97f4a7c15ull;
		if (sig != r->partners) {
			r->partners = sig;
			if (r->bias != 0)
				*again = 1;
			check_reset(sa, r);
		} else if (gs_space_changed(&r->out, &out[i])) {
			gs_space_sample_corun_reset(sa->smp, r->id);
		}
		if (gs_space_changed(&r->out, &out[i]) ||
		    strcmp(r->out.why, out[i].why) != 0)
			log_debug("space: gpu %d: allocation %llu: SMs %u+%u "
				  "(%s)", gpu, (unsigned long long)a->id,
				  out[i].sm_first, out[i].sm_count,
				  out[i].why);
		r->out = out[i];
		r->fixed = in[i].fixed;
		/* the scheduler grants a group's members together (a
		 * just-created allocation enters the scheduler after this
		 * plan: it gets its set at the next one, its attach) */
		if (sched != NULL)
			(void)gs_sched_set_group(sched, a->id, out[i].mps ?
					(uint64_t)out[i].group + 1 : 0);
		if (cfg->space_partitions)
			write_page(a, &out[i]);
	}
out_free:
	free(apart);
	free(in);
	free(out);
}

static uint64_t rate_of(uint64_t tasks, uint64_t ns)
{
	double r = (double)tasks * 1e9 / (double)ns;

	return r >= 1e15 ? 1000000000000000ull : (uint64_t)r;
}

/* The rates of one member, per second; 0 when not measured enough. */
static int member_rates(struct gs_space_agent *sa, uint64_t id,
			uint64_t *alone, uint64_t *corun)
{
	struct gs_space_rates r;

	if (gs_space_sample_rates(sa->smp, id, &r) < 0 ||
	    r.solo_ns < GS_SPACE_PROBE_MS * NS_PER_MS || r.solo_tasks == 0)
		return -1;	/* never measured alone, or no counter */
	/* per second of its kernels' time alone (held time for a job
	 * that counts none); in floating point and clamped: the counters
	 * are the job's to write */
	*alone = rate_of(r.solo_tasks, r.solo_gpu_ns > 0 &&
			 r.solo_gpu_ns < r.solo_ns ? r.solo_gpu_ns :
			 r.solo_ns);
	if (r.corun_ns < GS_SPACE_CHECK_MS * NS_PER_MS)
		return 0;
	*corun = rate_of(r.corun_tasks, r.corun_ns);
	return *alone > 0 ? 1 : -1;
}

/* One check of co-run group g of gpu: 1 when the plan must change. */
static int check_group(struct gs_space_agent *sa, int32_t gpu, uint32_t g,
		       uint64_t now)
{
	const struct gs_agent_config *cfg = gs_agent_config(sa->ag);
	struct gs_alloc_table *t = gs_agent_allocs(sa->ag);
	struct rec *mr[16];
	struct gs_space_fb m[16];
	struct gs_space_verdict v;
	uint32_t k = 0, i, j, lf = UINT32_MAX, lt = UINT32_MAX;
	char buf[160];
	size_t off = 0;

	for (i = 0; i < sa->nrecs && k < 16; i++) {
		struct rec *r = &sa->recs[i];
		struct gs_alloc *a = gs_alloc_get(t, r->id);

		if (a == NULL || a->gpu != gpu || !r->out.mps ||
		    !r->out.corun || r->out.group != g)
			continue;
		/* id order, so that every member names the group alike */
		for (j = k; j > 0 && mr[j - 1]->id > r->id; j--)
			mr[j] = mr[j - 1];
		mr[j] = r;
		k++;
	}
	if (k < 2)
		return 0;
	for (i = 0; i < k; i++) {
		int rc = member_rates(sa, mr[i]->id, &m[i].alone,
				     &m[i].corun);

		if (rc <= 0)
			return 0;	/* not yet, or not measurable */
		m[i].shares = gs_alloc_get(t, mr[i]->id)->shares;
		if (m[i].shares == 0)
			m[i].shares = 1;
		m[i].granules = mr[i]->out.sm_count / cfg->sm_granule;
		m[i].before = mr[i]->last_corun;
		m[i].sms = mr[i]->out.sm_count;
		m[i].before_sms = mr[i]->last_sms;
		if (mr[i]->id == mr[0]->last_from)
			lf = i;
		if (mr[i]->id == mr[0]->last_to)
			lt = i;
	}
	if (gs_space_check(m, k, lf, lt, mr[0]->last_min_d, mr[0]->settled,
			   &v) < 0)
		return 0;
	for (i = 0; i < k; i++) {
		uint64_t n = m[i].corun * 1000u / m[i].alone;

		snprintf(mr[i]->note, sizeof(mr[i]->note),
			 "%llu.%02llu of alone", (unsigned long long)(n / 1000),
			 (unsigned long long)(n % 1000 / 10));
		off += (size_t)snprintf(buf + off, sizeof(buf) - off > 0 ?
					sizeof(buf) - off : 0,
					"%s%llu %s", i ? ", " : "",
					(unsigned long long)mr[i]->id,
					mr[i]->note);
		if (off >= sizeof(buf))
			off = sizeof(buf) - 1;
		gs_space_sample_corun_reset(sa->smp, mr[i]->id);
	}
	/* the latest move stays on trial (each check may take it back,
	 * against the rates before it) until the next move, a take-back,
	 * a settled pair or a split: one window that read well is not
	 * enough to keep it */
	for (i = 0; i < k; i++) {
		mr[i]->settled = (int)v.settle;
		if (v.settle || v.act == GS_SPACE_SPLIT)
			mr[i]->last_from = mr[i]->last_to = 0;
		if (v.act == GS_SPACE_MOVE && !v.settle) {
			mr[i]->last_min_d = v.min_d;
			mr[i]->last_corun = m[i].corun;
			mr[i]->last_sms = m[i].sms;
		}
	}
	/* a split lasts GS_SPACE_RETRY_S: only on two verdicts in a row
	 * (one window can be noise: a loaded host, a job's slow phase) */
	for (i = 0; i < k; i++)
		mr[i]->split_votes = v.act == GS_SPACE_SPLIT ?
				     mr[i]->split_votes + 1 : 0;
	if (v.act == GS_SPACE_SPLIT && mr[0]->split_votes < 2) {
		log_debug("space: gpu %d: co-run check: %s: split if the "
			  "next check says so too", gpu, buf);
		return 0;
	}
	if (v.act == GS_SPACE_KEEP) {
		log_debug("space: gpu %d: co-run check: %s (lowest %u.%03u of "
			  "its share): they stay%s", gpu, buf, v.min_d / 1000,
			  v.min_d % 1000, v.settle ? " (settled)" : "");
		return 0;
	}
	if (v.act == GS_SPACE_MOVE) {
		log_info("space: gpu %d: co-run check: %s (lowest %u.%03u of "
			 "its share): a granule from %llu to %llu", gpu, buf,
			 v.min_d / 1000, v.min_d % 1000,
			 (unsigned long long)mr[v.from]->id,
			 (unsigned long long)mr[v.to]->id);
		mr[v.from]->bias--;
		mr[v.to]->bias++;
		for (i = 0; i < k && !v.settle; i++) {
			mr[i]->last_from = mr[v.from]->id;
			mr[i]->last_to = mr[v.to]->id;
		}
		return 1;
	}
	log_info("space: gpu %d: co-run check: %s (lowest %u.%03u of its "
		 "share, %u.%03u in all): they take turns for %u s", gpu, buf,
		 v.min_d / 1000, v.min_d % 1000, v.sum_n / 1000,
		 v.sum_n % 1000, GS_SPACE_RETRY_S);
	for (i = 0; i < k; i++) {
		mr[i]->split_votes = 0;
		for (j = 0; j < k; j++)
			if (i != j)
				apart_set(mr[i], mr[j]->id, now +
					  GS_SPACE_RETRY_S * 1000ull *
					  NS_PER_MS);
	}
	return 1;
}

/* Every ms: idle graces that ran out; every GS_SPACE_CHECK_EVERY_MS
 * probes measured, splits expired, co-run groups checked.  A GPU whose
 * plan must change is planned again. */
static void on_tick(struct gs_loop *l, uint64_t now, void *arg)
{
	struct gs_space_agent *sa = arg;
	struct gs_alloc_table *t = gs_agent_allocs(sa->ag);
	uint32_t gi, i, k, rot = rot_of(gs_agent_config(sa->ag), now);
	int check = 0, turn = rot != sa->rot;

	(void)l;
	sa->rot = rot;
	if (gs_agent_config(sa->ag)->space_check && now >= sa->next_check) {
		check = 1;
		sa->next_check = now + GS_SPACE_CHECK_EVERY_MS * NS_PER_MS;
	}
	for (gi = 0; gi < gs_agent_ngpus(sa->ag); gi++) {
		int32_t gpu = gs_agent_gpu(sa->ag, gi)->d.index;
		int replan = 0;
		uint32_t seen = 0;

		for (i = 0; i < sa->nrecs; i++) {
			struct rec *r = &sa->recs[i];
			struct gs_alloc *a = gs_alloc_get(t, r->id);

			if (a == NULL || a->gpu != gpu)
				continue;
			seen++;
			if (r->in_grace && now >= r->busy_until)
				replan = 1;
			/* a job said what it runs (after its attach), or
			 * the configuration changed */
			if (r->fixed != fixed_of(sa, a))
				replan = 2;
			if (!check)
				continue;
			if (r->probe != probe_of(sa, a))
				replan = 1;
			for (k = 0; k < NAPART; k++)
				if (r->apart_until[k] != 0 &&
				    r->apart_until[k] <= now) {
					r->apart_until[k] = 0;
					r->apart_id[k] = 0;
					replan = 1;
				}
		}
		if (seen < 2 && replan != 2)
			continue;
		if (turn)	/* the odd SMs change hands (if any tie) */
			replan = 1;
		for (i = 0; i < MAXPLAN && check && !replan; i++)
			replan = check_group(sa, gpu, i, now);
		if (replan) {
			sa->busy = 1;
			plan_gpu(sa, gpu, 0);
			sa->busy = 0;
			gs_agent_gpu_kick(sa->ag, gpu);
		}
	}
}

static void observer(void *ctx, int event, const struct gs_alloc *a)
{
	struct gs_space_agent *sa = ctx;

	if (event == GS_AEV_CLOSING)	/* accounting's; CLOSED follows */
		return;
	gs_space_sample_event(sa->smp, event, a);
	if (sa->busy)
		return;
	if (event == GS_AEV_CLOSED) {
		if (a->mode != GS_MODE_SPACE)
			return;
		rec_drop(sa, a->id);
		/* the record is still in the table: plan without it */
		sa->busy = 1;
		plan_gpu(sa, a->gpu, a->id);
		sa->busy = 0;
		return;
	}
	if (a->mode != GS_MODE_SPACE && rec_find(sa, a->id) == NULL)
		return;
	sa->busy = 1;
	plan_gpu(sa, a->gpu, 0);
	sa->busy = 0;
}

/* A sample of allocation id (space_sample.c): into its running mean;
 * a new class plans its GPU again. */
static void on_sample(void *ctx, uint64_t id, uint32_t sm_pct,
		      uint32_t mem_pct)
{
	struct gs_space_agent *sa = ctx;
	struct rec *r = rec_find(sa, id);
	struct gs_space_counters *c;
	struct gs_alloc *a;
	uint32_t old, k;

	a = gs_alloc_get(gs_agent_allocs(sa->ag), id);
	if (r == NULL || a == NULL)
		return;
	c = &r->cnt;
	old = gs_space_classify(c);
	k = c->samples < GS_SPACE_MEAN_MAX ? c->samples : GS_SPACE_MEAN_MAX;
	c->sm_pct = (c->sm_pct * k + sm_pct + k / 2) / (k + 1);
	c->mem_pct = (c->mem_pct * k + mem_pct + k / 2) / (k + 1);
	if (c->samples < UINT32_MAX)
		c->samples++;
	if (gs_space_classify(c) == old)
		return;
	log_info("space: allocation %llu is %s (SM %u %%, memory %u %% "
		 "over %u samples alone)", (unsigned long long)id,
		 gs_space_class_name(gs_space_classify(c)), c->sm_pct,
		 c->mem_pct, c->samples);
	sa->busy = 1;
	plan_gpu(sa, a->gpu, 0);
	sa->busy = 0;
	gs_agent_gpu_kick(sa->ag, a->gpu);	/* sets may have split */
}

struct gs_space_agent *gs_space_agent_new(struct gs_agent *ag,
					  struct gs_mps *mps,
					  struct gs_error *err)
{
	struct gs_space_agent *sa = calloc(1, sizeof(*sa));
	struct gs_alloc_table *t = gs_agent_allocs(ag);
	uint32_t i;

	if (sa == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return NULL;
	}
	sa->ag = ag;
	sa->mps = mps;
	sa->smp = gs_space_sample_new(ag, on_sample, sa, err);
	if (sa->smp == NULL) {
		free(sa);
		return NULL;
	}
	if (gs_alloc_observe(t, observer, sa) < 0) {
		gs_space_sample_free(sa->smp);
		gs_error_set(err, GS_ENOMEM, "too many allocation observers");
		free(sa);
		return NULL;
	}
	if (gs_loop_add_tick(gs_agent_loop(ag), NS_PER_MS, on_tick, sa,
			     err) < 0) {
		gs_alloc_unobserve(t, observer, sa);
		gs_space_sample_free(sa->smp);
		free(sa);
		return NULL;
	}
	for (i = 0; i < gs_agent_ngpus(ag); i++)
		plan_gpu(sa, gs_agent_gpu(ag, i)->d.index, 0);
	return sa;
}

void gs_space_agent_free(struct gs_space_agent *sa)
{
	if (sa == NULL)
		return;
	gs_alloc_unobserve(gs_agent_allocs(sa->ag), observer, sa);
	gs_space_sample_free(sa->smp);
	free(sa->recs);
	free(sa);
}

void gs_space_agent_info(struct gs_space_agent *sa, const struct gs_alloc *a,
			 uint32_t shares_total, struct gs_alloc_info *info)
{
	const struct rec *r;

	if (sa == NULL || a->mode != GS_MODE_SPACE)
		return;
	/* unmodified jobs: a static cap sized by share, at client start,
	 * when they co-run (`space_unmodified: cap`); taking turns, they
	 * run uncapped */
	if (info->mps_pipe[0] != '\0' && shares_total > 0 &&
	    gs_agent_config(sa->ag)->space_unmodified ==
		    GS_SPACE_UNMOD_CAP) {
		uint32_t pct = (a->shares * 100u + shares_total / 2) /
			       shares_total;

		info->mps_pct = pct < 1 ? 1 : pct > 100 ? 100 : pct;
	}
	r = rec_find(sa, a->id);
	if (r == NULL)
		return;
	info->sm_first = r->out.sm_first;
	info->sm_count = r->out.sm_count;
	if (r->out.corun && r->note[0] != '\0')
		snprintf(info->space_why, sizeof(info->space_why), "%.40s; %.20s",
			 r->out.why, r->note);
	else
		snprintf(info->space_why, sizeof(info->space_why), "%s",
			 r->out.why);
}
