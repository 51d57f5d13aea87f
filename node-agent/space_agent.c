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

struct rec {
	uint64_t id;
	struct gs_space_out out;
	struct gs_space_counters cnt;	/* classification inputs */
};

struct gs_space_agent {
	struct gs_agent *ag;
	struct gs_mps *mps;
	struct rec *recs;	/* decisions, any order */
	uint32_t nrecs, cap;
	struct gs_space_sample *smp;	/* the counters' source */
	int busy;		/* re-entrancy guard (notify from plan) */
};

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

/* Plan GPU index gpu again, without allocation `gone` (closing). */
static void plan_gpu(struct gs_space_agent *sa, int32_t gpu, uint64_t gone)
{
	const struct gs_agent_config *cfg = gs_agent_config(sa->ag);
	struct gs_alloc_table *t = gs_agent_allocs(sa->ag);
	struct gs_space_in *in = NULL;
	struct gs_space_out *out = NULL;
	struct gs_sched *sched = sched_of(sa, gpu);
	struct gs_space_params p;
	struct gs_alloc *a;
	uint32_t n = 0, i;

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
		if (rec_find(sa, a->id) != NULL)
			in[n].cls = gs_space_classify(
				&rec_find(sa, a->id)->cnt);
		n++;
	}
	if (n == 0)
		goto out_free;
	p.sm_total = cfg->sm_count;
	p.granule = cfg->sm_granule;
	p.mps_uid = gs_mps_uid(sa->mps, gpu);
	if (gs_space_plan(&p, in, n, out) < 0)
		goto out_free;
	for (i = 0; i < n; i++) {
		struct rec *r = rec_get(sa, in[i].id);

		a = gs_alloc_get(t, in[i].id);
		if (r == NULL || a == NULL)
			continue;
		if (gs_space_changed(&r->out, &out[i]) ||
		    strcmp(r->out.why, out[i].why) != 0)
			log_debug("space: gpu %d: allocation %llu: SMs %u+%u "
				  "(%s)", gpu, (unsigned long long)a->id,
				  out[i].sm_first, out[i].sm_count,
				  out[i].why);
		r->out = out[i];
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
	free(in);
	free(out);
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
	/* unmodified jobs: a static cap sized by share, at client start */
	if (info->mps_pipe[0] != '\0' && shares_total > 0) {
		uint32_t pct = (a->shares * 100u + shares_total / 2) /
			       shares_total;

		info->mps_pct = pct < 1 ? 1 : pct > 100 ? 100 : pct;
	}
	r = rec_find(sa, a->id);
	if (r == NULL)
		return;
	info->sm_first = r->out.sm_first;
	info->sm_count = r->out.sm_count;
	snprintf(info->space_why, sizeof(info->space_why), "%s", r->out.why);
}
