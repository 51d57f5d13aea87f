/*
 * space_sample.c — the counters space mode classifies by (contract in
 * space_sample.h).
 *
 * Per GPU slot: the allocation that is the token's only holder now and
 * since when, and the window's start; per allocation seen on a GPU: the
 * time it held the token alone in the current window and the last sums
 * of its pages' simulated activity counters.  A tick every
 * GS_SPACE_SAMPLE_MS closes the windows that are due.  Records live in
 * one flat array (a GPU carries tens of allocations at most).
 */
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "gpu.h"
#include "gs_log.h"
#include "space_sample.h"

#define NS_PER_MS 1000000ull

struct srec {
	uint64_t id;
	int32_t gpu;
	uint64_t solo_ns;	/* held the token alone, this window */
	uint64_t sim_sm, sim_mem;	/* its pages' counters at the last look */
	int seen;		/* sim_* valid */
	/* progress rates (the co-run check) */
	int rstate;		/* RS_* since `since` */
	uint64_t since, tasks0;	/* its pages' block-tasks then */
	uint64_t gpu0;		/* ... and GPU time */
	struct gs_space_rates rt;
};

enum { RS_NONE, RS_SOLO, RS_CORUN };

struct sgpu {
	uint64_t solo_id;	/* only holder now, 0: none or several */
	uint64_t solo_since;
	uint64_t win_start;
	uint64_t win_ns;	/* window length */
	int nvml;		/* a real GPU with NVML's utilization */
};

struct gs_space_sample {
	struct gs_agent *ag;
	gs_space_sample_fn fn;
	void *ctx;
	struct gs_gpu_util *nv;	/* NULL: no NVML */
	struct sgpu g[GS_MAX_GPUS];
	struct srec *r;
	uint32_t n, cap;
};

static struct srec *rec_get(struct gs_space_sample *ss, uint64_t id,
			    int32_t gpu)
{
	uint32_t i;

	for (i = 0; i < ss->n; i++)
		if (ss->r[i].id == id)
			return &ss->r[i];
	if (ss->n == ss->cap) {
		uint32_t nc = ss->cap ? ss->cap * 2 : 16;
		struct srec *nr = realloc(ss->r, nc * sizeof(*nr));

		if (nr == NULL)
			return NULL;
		ss->r = nr;
		ss->cap = nc;
	}
	memset(&ss->r[ss->n], 0, sizeof(ss->r[0]));
	ss->r[ss->n].id = id;
	ss->r[ss->n].gpu = gpu;
	return &ss->r[ss->n++];
}

static void rec_drop(struct gs_space_sample *ss, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < ss->n; i++)
		if (ss->r[i].id == id) {
			ss->r[i] = ss->r[--ss->n];
			return;
		}
}

static int slot_of(struct gs_space_sample *ss, int32_t gpu)
{
	uint32_t i;

	for (i = 0; i < gs_agent_ngpus(ss->ag) && i < GS_MAX_GPUS; i++)
		if (gs_agent_gpu(ss->ag, i)->d.index == gpu)
			return (int)i;
	return -1;
}

/* The solo segment of slot i up to now goes to its holder's window. */
static void solo_close(struct gs_space_sample *ss, uint32_t i, uint64_t now)
{
	struct sgpu *g = &ss->g[i];
	struct srec *r;

	if (g->solo_id != 0 && now > g->solo_since) {
		r = rec_get(ss, g->solo_id, gs_agent_gpu(ss->ag, i)->d.index);
		if (r != NULL)
			r->solo_ns += now - g->solo_since;
	}
	g->solo_since = now;
}

/* The block-tasks an allocation's pages counted (each page's counter
 * only grows; a page that left takes its part with it). */
static uint64_t tasks_of(const struct gs_alloc *a, uint64_t *gpu)
{
	uint64_t t = 0;
	unsigned k;

	*gpu = 0;
	for (k = 0; k < a->natt; k++)
		if (a->att[k].page != NULL) {
			t += __atomic_load_n(&a->att[k].page->block_tasks,
					     __ATOMIC_ACQUIRE);
			*gpu += __atomic_load_n(&a->att[k].page->gpu_ns,
						__ATOMIC_ACQUIRE);
		}
	return t;
}

/* The progress of slot i's space allocations since the last look goes
 * to what each was doing since: holding alone, co-running or neither;
 * then each one's state now. */
static void rates_update(struct gs_space_sample *ss, uint32_t i, uint64_t now)
{
	struct gs_sched *s = gs_agent_gpu(ss->ag, i)->sched;
	struct gs_alloc_table *t = gs_agent_allocs(ss->ag);
	int32_t gpu = gs_agent_gpu(ss->ag, i)->d.index;
	unsigned nh = gs_sched_holders(s);
	uint64_t h = nh == 1 ? gs_sched_holder(s) : 0;
	struct gs_alloc *a;

	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		struct srec *r;
		uint64_t tk, gk;
		uint32_t part;
		int whole;

		if (a->gpu != gpu || a->mode != GS_MODE_SPACE ||
		    a->state == GS_ASTATE_CLOSED)
			continue;
		if ((r = rec_get(ss, a->id, gpu)) == NULL)
			continue;
		tk = tasks_of(a, &gk);
		if (r->rstate != RS_NONE && now > r->since) {
			uint64_t dt = tk >= r->tasks0 ? tk - r->tasks0 : 0;

			if (r->rstate == RS_SOLO) {
				r->rt.solo_ns += now - r->since;
				r->rt.solo_tasks += dt;
				r->rt.solo_gpu_ns += gk >= r->gpu0 ?
						     gk - r->gpu0 : 0;
			} else {
				r->rt.corun_ns += now - r->since;
				r->rt.corun_tasks += dt;
			}
		}
		/* a hold ends at its release, which brings the last
		 * progress (a suspend does not end it) */
		/* alone only on the whole GPU: a member holding on its
		 * partition while its partners pause is co-running */
		part = a->natt > 0 && a->att[0].page != NULL ?
		       __atomic_load_n(&a->att[0].page->sm_count,
				       __ATOMIC_RELAXED) : 0;
		whole = part == 0 || part >= gs_agent_config(ss->ag)->sm_count;
		r->rstate = a->state != GS_ASTATE_RUNNING &&
			    a->state != GS_ASTATE_SUSPENDING ? RS_NONE :
			    h == a->id && whole ? RS_SOLO :
			    nh >= 2 || !whole ? RS_CORUN : RS_NONE;
		r->since = now;
		r->tasks0 = tk;
		r->gpu0 = gk;
	}
}

/* Look at slot i's holders again. */
static void solo_update(struct gs_space_sample *ss, uint32_t i, uint64_t now)
{
	struct gs_sched *s = gs_agent_gpu(ss->ag, i)->sched;
	uint64_t h = gs_sched_holders(s) == 1 ? gs_sched_holder(s) : 0;

	rates_update(ss, i, now);
	if (h == ss->g[i].solo_id)
		return;
	solo_close(ss, i, now);
	ss->g[i].solo_id = h;
}

int gs_space_sample_rates(struct gs_space_sample *ss, uint64_t id,
			  struct gs_space_rates *out)
{
	uint32_t i;

	memset(out, 0, sizeof(*out));
	if (ss == NULL)
		return -1;
	for (i = 0; i < ss->n; i++)
		if (ss->r[i].id == id) {
			*out = ss->r[i].rt;
			return 0;
		}
	return -1;
}

void gs_space_sample_corun_reset(struct gs_space_sample *ss, uint64_t id)
{
	uint32_t i;

	if (ss == NULL)
		return;
	for (i = 0; i < ss->n; i++)
		if (ss->r[i].id == id) {
			/* the segment under way counts from now */
			if (ss->r[i].rstate == RS_CORUN) {
				struct gs_alloc *a = gs_alloc_get(
				    gs_agent_allocs(ss->ag), id);

				ss->r[i].since = gs_now_ns();
				if (a != NULL)
					ss->r[i].tasks0 = tasks_of(a,
							&ss->r[i].gpu0);
			}
			ss->r[i].rt.corun_ns = 0;
			ss->r[i].rt.corun_tasks = 0;
			return;
		}
}

void gs_space_sample_event(struct gs_space_sample *ss, int event,
			   const struct gs_alloc *a)
{
	uint64_t now = gs_now_ns();
	int i;

	if (ss == NULL)
		return;
	i = slot_of(ss, a->gpu);
	if (i < 0)
		return;
	if (event == GS_AEV_CLOSED) {
		if (ss->g[i].solo_id == a->id) {
			ss->g[i].solo_id = 0;
			ss->g[i].solo_since = now;
		}
		rec_drop(ss, a->id);
		return;
	}
	solo_update(ss, (uint32_t)i, now);
}

/* The simulated GPU of slot i over the window: the activity its jobs'
 * pages counted, in percent of the window.  0 when nothing moved. */
static int sim_reading(struct gs_space_sample *ss, uint32_t i, uint64_t win,
		       uint32_t *sm_pct, uint32_t *mem_pct)
{
	struct gs_alloc_table *t = gs_agent_allocs(ss->ag);
	int32_t gpu = gs_agent_gpu(ss->ag, i)->d.index;
	uint64_t dsm = 0, dmem = 0;
	struct gs_alloc *a;

	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		uint64_t sm = 0, mem = 0;
		struct srec *r;
		unsigned k;

		if (a->gpu != gpu)
			continue;
		for (k = 0; k < a->natt; k++) {
			const struct gs_ctlpage *p = a->att[k].page;

			if (p == NULL)
				continue;
			sm += __atomic_load_n(&p->sim_sm_ns, __ATOMIC_ACQUIRE);
			mem += __atomic_load_n(&p->sim_mem_ns,
					       __ATOMIC_ACQUIRE);
		}
		r = rec_get(ss, a->id, gpu);
		if (r == NULL)
			continue;
		/* a page's counters only grow; a sum that fell lost a
		 * page: count from the new sum */
		if (r->seen && sm >= r->sim_sm)
			dsm += sm - r->sim_sm;
		if (r->seen && mem >= r->sim_mem)
			dmem += mem - r->sim_mem;
		r->sim_sm = sm;
		r->sim_mem = mem;
		r->seen = 1;
	}
	if ((dsm == 0 && dmem == 0) || win == 0)
		return 0;
	*sm_pct = (uint32_t)(dsm * 100 / win > 100 ? 100 : dsm * 100 / win);
	*mem_pct = (uint32_t)(dmem * 100 / win > 100 ? 100 :
			      dmem * 100 / win);
	return 1;
}

static void close_window(struct gs_space_sample *ss, uint32_t i, uint64_t now)
{
	struct sgpu *g = &ss->g[i];
	const struct gs_gpu *gg = gs_agent_gpu(ss->ag, i);
	uint64_t win = now - g->win_start, best = 0, best_id = 0;
	uint32_t sm = 0, mem = 0, k;
	struct gs_error err;
	struct gs_alloc *a;
	int have = 0;

	solo_close(ss, i, now);
	/* the simulated counters' sums move on every window */
	if (gg->d.simulated)
		have = sim_reading(ss, i, win, &sm, &mem);
	for (k = 0; k < ss->n; k++) {
		struct srec *r = &ss->r[k];

		if (r->gpu != gg->d.index)
			continue;
		if (r->solo_ns > best) {
			best = r->solo_ns;
			best_id = r->id;
		}
		r->solo_ns = 0;
	}
	g->win_start = now;
	if (best_id == 0 || best * 4 < win * 3)
		return;
	a = gs_alloc_get(gs_agent_allocs(ss->ag), best_id);
	if (a == NULL || a->mode != GS_MODE_SPACE)
		return;
	/* NVML only for a window that has someone to attribute it to */
	if (!gg->d.simulated && g->nvml) {
		if (gs_gpu_dev_util(ss->nv, gg->d.index, &sm, &mem,
				    &err) == 0) {
			have = 1;
		} else {
			log_warnx("gpu %d: space mode's classes get no "
				  "utilization from NVML: %s", gg->d.index,
				  err.msg);
			g->nvml = 0;
		}
	}
	if (have)
		ss->fn(ss->ctx, best_id, sm, mem);
}

static void on_tick(struct gs_loop *l, uint64_t now, void *arg)
{
	struct gs_space_sample *ss = arg;
	uint32_t i;

	(void)l;
	for (i = 0; i < gs_agent_ngpus(ss->ag) && i < GS_MAX_GPUS; i++) {
		solo_update(ss, i, now);
		if (now - ss->g[i].win_start >= ss->g[i].win_ns)
			close_window(ss, i, now);
	}
}

struct gs_space_sample *gs_space_sample_new(struct gs_agent *ag,
					    gs_space_sample_fn fn, void *ctx,
					    struct gs_error *err)
{
	struct gs_space_sample *ss = calloc(1, sizeof(*ss));
	struct gs_gpu_desc d[GS_MAX_GPUS];
	uint64_t now = gs_now_ns();
	uint32_t i, nd = 0;

	if (ss == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return NULL;
	}
	ss->ag = ag;
	ss->fn = fn;
	ss->ctx = ctx;
	for (i = 0; i < gs_agent_ngpus(ag) && i < GS_MAX_GPUS; i++) {
		const struct gs_gpu *g = gs_agent_gpu(ag, i);

		ss->g[i].win_start = now;
		ss->g[i].solo_since = now;
		ss->g[i].win_ns = GS_SPACE_SAMPLE_MS * NS_PER_MS;
		if (!g->d.simulated)
			d[nd++] = g->d;
	}
	if (nd > 0) {
		struct gs_error nerr;

		if (gs_gpu_util_open(d, nd, &ss->nv, &nerr) < 0) {
			log_info("space mode's classes: no NVML "
				  "utilization (%s); space allocations stay "
				  "unclassified", nerr.msg);
			ss->nv = NULL;
		}
		for (i = 0; ss->nv != NULL && i < gs_agent_ngpus(ag) &&
			    i < GS_MAX_GPUS; i++)
			if (!gs_agent_gpu(ag, i)->d.simulated) {
				ss->g[i].nvml = 1;
				ss->g[i].win_ns = GS_SPACE_SAMPLE_NVML_MS *
						  NS_PER_MS;
			}
	}
	if (gs_loop_add_tick(gs_agent_loop(ag), GS_SPACE_SAMPLE_MS * NS_PER_MS,
			     on_tick, ss, err) < 0) {
		gs_gpu_util_close(ss->nv);
		free(ss);
		return NULL;
	}
	return ss;
}

void gs_space_sample_free(struct gs_space_sample *ss)
{
	if (ss == NULL)
		return;
	gs_gpu_util_close(ss->nv);
	free(ss->r);
	free(ss);
}
