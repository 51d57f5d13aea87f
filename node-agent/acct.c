/*
 * acct.c — per-tick accounting from control-page counters.
 *
 * Each open allocation keeps the counters it saw at the previous tick
 * (`base`); a tick reads the page again and the difference is the usage of
 * that tick.  Counters only grow (gs_ctlpage.h), so no lock is needed and
 * a torn read across fields only moves a few ns between two ticks.  When a
 * job re-attaches it gets a fresh page whose counters start again at zero:
 * the new page's values become the baseline, so nothing is counted twice.
 *
 * Overrun: the job writes gpu_ns itself, so a holder that ignores a
 * suspend could under-report.  Once the agent escalates it, the hold is
 * charged max(reported, wall time since the grant): the missing part is
 * added as "extra" GPU time, provisionally at every tick while the hold
 * lasts and settled when the token comes back.  Emitted totals never go
 * down.
 *
 * Limits: the NVML estimate maps processes to allocations through
 * GSHARE_ALLOC in /proc/PID/environ (set by the plugins), so it needs to
 * run as root, and it inherits NVML's coarseness (one process per sample).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acct.h"
#include "gs_log.h"

const double gs_acct_evict_bounds[GS_ACCT_EVICT_BUCKETS] = {
	5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6,
	1e-3, 5e-3, 20e-3, 100e-3, 1.0,
};

#define PIDCACHE	256
#define UTIL_MAX	512

/* A further page of the same allocation (several processes attached,
 * each with its own page and counters). */
struct xpage {
	const volatile struct gs_ctlpage *page;
	struct gs_ctl_counters base;
};

struct ent {
	struct gs_acct_view v;
	const volatile struct gs_ctlpage *page;	/* the first page */
	struct gs_ctl_counters base;	/* counters at the last read */
	struct xpage *xp;		/* the others */
	unsigned nxp;
	struct gs_usage pend;		/* read but not yet emitted */
	uint64_t last_mono;		/* end of the last tick */
	int holding, escalated;
	uint64_t grant_mono, gpu_at_grant, prov_ns;
	uint64_t extra_ns;		/* overrun charge to emit */
	/* what the agent proves was held (holds that ended), and what was
	 * emitted, since open: emitted = max(reported, proven) */
	uint64_t floor_gpu, floor_held;	/* gs_sched_charge of each hold */
	uint32_t part_ppm;		/* space mode: SM fraction of the
					 * current hold, 0: whole GPU */
	uint64_t raw_gpu, raw_held;	/* reported (pages, extra, est) */
	uint64_t out_gpu, out_held;	/* emitted */
	uint64_t st_raw_gpu, st_raw_held, st_out_gpu, st_out_held;
	uint64_t est_ns;		/* NVML estimate to emit */
	int closing, dirty;
	int adopted;			/* row continued from a crash */
	int base_pending;		/* baseline not settled yet */
	int base_resumed;		/* baseline from the store; some
					 * counter not yet past it */
	/* what the pages' counters may add up to (bound_delta): the row's
	 * start on the monotonic clock, the most processes seen at once,
	 * the page deltas taken so far, reports cut */
	uint64_t start_mono;
	unsigned max_pages;
	struct gs_usage acc;
	uint64_t cuts;
	/* staged by tick_one, applied by tick_commit */
	int st_busy, st_sample;
	uint64_t st_mem_used;
	uint64_t mem_peak_seen;		/* largest page peak at the last
					 * tick (a peak rising counts) */
	struct gs_store_alloc st_row;
};

struct pidmap {
	uint32_t pid;
	uint64_t id;		/* 0: not a gshare process */
	uint64_t seen;		/* tick number when last used */
};

struct gpu_util {
	int32_t gpu;
	uint64_t last_us;
};

struct gs_acct {
	struct gs_store *store;
	uint64_t next_key;
	uint64_t tick;
	uint64_t last_mono;

	struct ent *ents;
	unsigned nents, cap;
	struct gs_acct_view *views;	/* snapshot for gs_acct_allocs */

	struct gs_acct_hist *hists;
	unsigned nhists;

	gs_acct_util_fn util_fn;
	void *util_arg;
	char proc_root[128];
	struct pidmap pids[PIDCACHE];
	struct gpu_util *gutil;
	unsigned ngutil;
	/* the last allocation whose final row a tick built (gs_acct_final) */
	uint64_t final_id;
	struct gs_usage final_tot;
};

/* ---- pure helpers ---- */

void
gs_acct_read_page(const volatile struct gs_ctlpage *p,
		  struct gs_ctl_counters *c)
{
	c->gpu_ns = __atomic_load_n(&p->gpu_ns, __ATOMIC_ACQUIRE);
	c->held_ns = __atomic_load_n(&p->held_ns, __ATOMIC_ACQUIRE);
	c->block_tasks = __atomic_load_n(&p->block_tasks, __ATOMIC_ACQUIRE);
	c->suspensions = __atomic_load_n(&p->suspensions, __ATOMIC_ACQUIRE);
	c->last_evict_ns = __atomic_load_n(&p->last_evict_ns,
					   __ATOMIC_ACQUIRE);
	c->evict_ns_sum = __atomic_load_n(&p->evict_ns_sum, __ATOMIC_ACQUIRE);
	c->evict_ns_max = __atomic_load_n(&p->evict_ns_max, __ATOMIC_ACQUIRE);
	c->heartbeat_ns = __atomic_load_n(&p->heartbeat_ns, __ATOMIC_ACQUIRE);
	c->mem_used = __atomic_load_n(&p->mem_used, __ATOMIC_ACQUIRE);
	c->mem_peak = __atomic_load_n(&p->mem_peak, __ATOMIC_ACQUIRE);
	c->state = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
	c->resumed = __atomic_load_n(&p->resumed, __ATOMIC_ACQUIRE);
	c->space_gpu_ns = __atomic_load_n(&p->space_gpu_ns, __ATOMIC_ACQUIRE);
}

static uint64_t
sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void
gs_acct_delta(const struct gs_ctl_counters *prev,
	      const struct gs_ctl_counters *cur, struct gs_usage *d)
{
	memset(d, 0, sizeof(*d));
	d->gpu_ns = sub0(cur->gpu_ns, prev->gpu_ns);
	d->held_ns = sub0(cur->held_ns, prev->held_ns);
	d->block_tasks = sub0(cur->block_tasks, prev->block_tasks);
	d->suspensions = sub0(cur->suspensions, prev->suspensions);
	d->evict_ns_sum = sub0(cur->evict_ns_sum, prev->evict_ns_sum);
	d->evict_ns_max = d->suspensions ? cur->evict_ns_max : 0;
}

void
gs_acct_space_delta(uint32_t mode, const struct gs_ctl_counters *prev,
		    const struct gs_ctl_counters *cur, struct gs_usage *d)
{
	if (mode != GS_MODE_SPACE || cur->space_gpu_ns == 0)
		return;
	d->gpu_ns = sub0(cur->space_gpu_ns, prev->space_gpu_ns);
}

void
gs_acct_mem(const struct gs_ctl_counters *prev,
	    const struct gs_ctl_counters *cur, uint64_t dt_ns,
	    struct gs_usage *d)
{
	unsigned __int128 bs;

	d->mem_max = cur->mem_used;
	if (cur->mem_peak > prev->mem_peak && cur->mem_peak > d->mem_max)
		d->mem_max = cur->mem_peak;
	if (cur->mem_used == 0) {
		/* nothing held: no time to average over either, so that
		 * jobs without a memory figure (no runtime that reports
		 * one) write no samples for it */
		d->mem_byte_s = 0;
		d->mem_ns = 0;
		return;
	}
	bs = (unsigned __int128)cur->mem_used * dt_ns / 1000000000u;
	d->mem_byte_s = bs > INT64_MAX ? INT64_MAX : (uint64_t)bs;
	d->mem_ns = dt_ns;
}

static unsigned
bucket_of(uint64_t ns)
{
	double s = (double)ns / 1e9;
	unsigned i;

	for (i = 0; i < GS_ACCT_EVICT_BUCKETS; i++)
		if (s <= gs_acct_evict_bounds[i])
			break;
	return i;
}

/*
 * The page holds the exact latency of the latest eviction and the sum of
 * all; when a tick saw several, the latest goes in its own bucket and the
 * others at their mean.  Sum and count stay exact.
 */
void
gs_acct_hist_add(struct gs_acct_hist *h, uint64_t n, uint64_t sum,
		 uint64_t last)
{
	if (n == 0)
		return;
	if (last > sum)
		last = sum;
	h->count[bucket_of(last)]++;
	if (n > 1)
		h->count[bucket_of((sum - last) / (n - 1))] += n - 1;
	h->n += n;
	h->sum_ns += sum;
}

/*
 * A job writes its control page's counters itself (gs_ctlpage.h), so what
 * they add up to is bounded by what its processes could have used: time
 * (GPU, held, eviction latency) by the row's age times the most processes
 * seen at once times GS_ACCT_STREAMS_MAX (the gate adds up concurrent
 * streams' spans), plus GS_ACCT_PAGE_SLACK_NS; suspensions by one per
 * microsecond of that; block-tasks by GS_ACCT_TASKS_PER_NS a nanosecond.
 * An honest page stays far below.  A delta past the bound is cut, so a
 * job that writes 2^64 cannot wrap its row's totals back down, store
 * them negative, or overflow the node's eviction histogram.
 */
static int
cut_to(uint64_t *d, uint64_t *acc, uint64_t lim)
{
	uint64_t room = sub0(lim, *acc);
	int c = *d > room;

	if (c)
		*d = room;
	*acc += *d;
	return c;
}

static uint64_t
sat_mul(uint64_t a, uint64_t b)
{
	return b != 0 && a > (uint64_t)INT64_MAX / b ? (uint64_t)INT64_MAX :
	       a * b;
}

static void
bound_delta(struct ent *e, struct gs_usage *d, uint64_t mono)
{
	uint64_t t = sat_mul(sat_mul(sub0(mono, e->start_mono),
				     e->max_pages ? e->max_pages : 1),
			     GS_ACCT_STREAMS_MAX);
	int c = 0;

	t = t > (uint64_t)INT64_MAX / 64 ? (uint64_t)INT64_MAX / 64 :
	    t + GS_ACCT_PAGE_SLACK_NS;
	c |= cut_to(&d->gpu_ns, &e->acc.gpu_ns, t);
	c |= cut_to(&d->held_ns, &e->acc.held_ns, t);
	c |= cut_to(&d->evict_ns_sum, &e->acc.evict_ns_sum, t);
	c |= cut_to(&d->suspensions, &e->acc.suspensions, t / 1000);
	c |= cut_to(&d->block_tasks, &e->acc.block_tasks,
		    sat_mul(t, GS_ACCT_TASKS_PER_NS));
	if (d->evict_ns_max > t) {
		d->evict_ns_max = t;
		c = 1;
	}
	if (d->mem_max > (uint64_t)INT64_MAX) {
		d->mem_max = (uint64_t)INT64_MAX;
		c = 1;
	}
	if (c && e->cuts++ == 0)
		log_warnx("accounting: allocation %llu: its control page "
			  "reports more than its processes could have used; "
			  "counted up to that (further cuts not logged)",
			  (unsigned long long)e->v.row.agent_id);
}

static void
usage_add(struct gs_usage *t, const struct gs_usage *d)
{
	t->gpu_ns += d->gpu_ns;
	t->held_ns += d->held_ns;
	t->share_ns += d->share_ns;
	t->wall_ns += d->wall_ns;
	t->block_tasks += d->block_tasks;
	t->suspensions += d->suspensions;
	t->evict_ns_sum += d->evict_ns_sum;
	if (d->evict_ns_max > t->evict_ns_max)
		t->evict_ns_max = d->evict_ns_max;
	if (d->mem_max > t->mem_max)
		t->mem_max = d->mem_max;
	/* job-reported: saturate at what the store's int64 holds */
	t->mem_byte_s = d->mem_byte_s > INT64_MAX - t->mem_byte_s ?
			INT64_MAX : t->mem_byte_s + d->mem_byte_s;
	t->mem_ns += d->mem_ns;
}

static void settle_base(struct ent *e, const struct gs_ctl_counters *cur);

/* ---- life cycle ---- */

int
gs_acct_new(struct gs_store *store, struct gs_acct **out,
	    struct gs_error *err)
{
	struct gs_acct *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
	a->store = store;
	a->next_key = 1;
	snprintf(a->proc_root, sizeof(a->proc_root), "/proc");
	if (store != NULL && (gs_store_next_key(store, &a->next_key, err) < 0 ||
			      gs_store_last_tick(store, &a->tick, err) < 0)) {
		free(a);
		return -1;
	}
	*out = a;
	return 0;
}

void
gs_acct_free(struct gs_acct *a)
{
	if (a == NULL)
		return;
	for (unsigned i = 0; i < a->nents; i++)
		free(a->ents[i].xp);
	free(a->ents);
	free(a->views);
	free(a->hists);
	free(a->gutil);
	free(a);
}

static struct ent *
find(struct gs_acct *a, uint64_t id)
{
	for (unsigned i = 0; i < a->nents; i++)
		if (a->ents[i].v.row.agent_id == id && !a->ents[i].closing)
			return &a->ents[i];
	return NULL;
}

static struct gs_acct_hist *
hist_for(struct gs_acct *a, int32_t gpu)
{
	struct gs_acct_hist *nh;

	for (unsigned i = 0; i < a->nhists; i++)
		if (a->hists[i].gpu == gpu)
			return &a->hists[i];
	nh = realloc(a->hists, (a->nhists + 1) * sizeof(*nh));
	if (nh == NULL)
		return NULL;
	a->hists = nh;
	memset(&nh[a->nhists], 0, sizeof(*nh));
	nh[a->nhists].gpu = gpu;
	return &nh[a->nhists++];
}

int
gs_acct_open(struct gs_acct *a, const struct gs_acct_meta *m, int64_t real,
	     uint64_t mono, struct gs_error *err)
{
	struct ent *e, *ne;

	if (find(a, m->agent_id) != NULL)
		return gs_error_set(err, GS_EINVAL,
				    "accounting: allocation %" PRIu64 " already open",
				    m->agent_id);
	if (hist_for(a, m->gpu) == NULL)
		return gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
	if (a->nents == a->cap) {
		unsigned nc = a->cap ? a->cap * 2 : 16;

		ne = realloc(a->ents, nc * sizeof(*ne));
		if (ne == NULL)
			return gs_error_set(err, GS_ENOMEM,
					    "accounting: out of memory");
		a->ents = ne;
		a->cap = nc;
	}
	e = &a->ents[a->nents];
	memset(e, 0, sizeof(*e));
	if (a->store != NULL && m->restored &&
	    gs_store_adopt_id(a->store, m->agent_id, m->uid, m->gpu,
			      &e->v.row)) {
		e->adopted = 1;
		e->v.row.labels = m->labels;
	} else if (a->store == NULL ||
	    !gs_store_adopt(a->store, &m->labels, m->uid, m->gpu, &e->v.row)) {
		e->v.row.key = a->next_key++;
		e->v.row.labels = m->labels;
		e->v.row.start_ns = real;
		e->v.row.state = GS_SST_RUNNING;
	} else {
		e->adopted = 1;
	}
	{
		/* the row's age (an adopted row started before) */
		int64_t now = m->now_real ? m->now_real : real;
		uint64_t age = now > e->v.row.start_ns ?
			       (uint64_t)(now - e->v.row.start_ns) : 0;

		e->start_mono = mono > age ? mono - age : 0;
		e->max_pages = 1;
	}
	e->v.row.agent_id = m->agent_id;
	e->v.row.uid = m->uid;
	e->v.row.gpu = m->gpu;
	snprintf(e->v.row.gpu_uuid, sizeof(e->v.row.gpu_uuid), "%s",
		 m->gpu_uuid);
	e->v.row.shares = m->shares;
	e->v.row.weight = m->weight ? m->weight : m->shares;
	e->v.row.priority = m->priority;
	e->v.row.mode = m->mode;
	e->v.row.mem_limit = m->mem_limit;
	e->last_mono = mono;
	e->dirty = 1;
	a->nents++;
	return 0;
}

void
gs_acct_set_mem_nvml(struct gs_acct *a, uint64_t id, uint64_t bytes)
{
	struct ent *e = find(a, id);

	if (e != NULL)
		e->v.mem_nvml = bytes;
}

int
gs_acct_attach(struct gs_acct *a, uint64_t id,
	       const volatile struct gs_ctlpage *page, uint64_t mono)
{
	struct ent *e = find(a, id);
	struct xpage *nx;

	(void)mono;
	if (e == NULL)
		return -1;
	if (e->page != NULL && e->page != page) {
		/* one more process of the allocation: its own counters */
		for (unsigned i = 0; i < e->nxp; i++)
			if (e->xp[i].page == page)
				return 0;
		nx = realloc(e->xp, (e->nxp + 1) * sizeof(*nx));
		if (nx == NULL)
			return -1;
		e->xp = nx;
		nx[e->nxp].page = page;
		gs_acct_read_page(page, &nx[e->nxp].base);
		e->nxp++;
		if (e->nxp + 1 > e->max_pages)
			e->max_pages = e->nxp + 1;
		return 0;
	}
	if (e->page == page)
		return 0;
	e->page = page;
	gs_acct_read_page(page, &e->base);
	e->v.attached = 1;
	e->base_pending = e->adopted;
	/* an attached job reports its own usage: estimates stop */
	return 0;
}

void
gs_acct_detach(struct gs_acct *a, uint64_t id, uint64_t mono)
{
	struct ent *e = find(a, id);
	struct gs_ctl_counters cur;
	struct gs_usage d;

	if (e == NULL || e->page == NULL)
		return;
	gs_acct_read_page(e->page, &cur);
	settle_base(e, &cur);
	gs_acct_delta(&e->base, &cur, &d);
	gs_acct_space_delta(e->v.row.mode, &e->base, &cur, &d);
	bound_delta(e, &d, mono);
	usage_add(&e->pend, &d);
	if (d.suspensions) {
		struct gs_acct_hist *h = hist_for(a, e->v.row.gpu);

		if (h != NULL)
			gs_acct_hist_add(h, d.suspensions, d.evict_ns_sum,
					 cur.last_evict_ns);
	}
	for (unsigned i = 0; i < e->nxp; i++) {
		gs_acct_read_page(e->xp[i].page, &cur);
		gs_acct_delta(&e->xp[i].base, &cur, &d);
		bound_delta(e, &d, mono);
		usage_add(&e->pend, &d);
	}
	free(e->xp);
	e->xp = NULL;
	e->nxp = 0;
	e->page = NULL;
	e->v.attached = 0;
	e->v.mem_nvml = 0;
}

int
gs_acct_close(struct gs_acct *a, uint64_t id, uint32_t state, int64_t real,
	      uint64_t mono)
{
	struct ent *e = find(a, id);

	if (e == NULL)
		return -1;
	if (e->holding)
		gs_acct_unhold(a, id, mono, 0);
	gs_acct_detach(a, id, mono);
	e->closing = 1;
	e->v.row.end_ns = real;
	e->v.row.state = state;
	return 0;
}

int
gs_acct_set_params(struct gs_acct *a, uint64_t id, uint32_t shares,
		   uint32_t weight, uint32_t priority)
{
	struct ent *e = find(a, id);

	if (e == NULL)
		return -1;
	e->v.row.shares = shares;
	e->v.row.weight = weight;
	e->v.row.priority = priority;
	e->dirty = 1;
	return 0;
}

int
gs_acct_set_labels(struct gs_acct *a, uint64_t id, const struct gs_labels *l)
{
	struct ent *e = find(a, id);

	if (e == NULL)
		return -1;
	e->v.row.labels = *l;
	e->dirty = 1;
	return 0;
}

/* ---- token events ---- */

static uint64_t
page_gpu(const struct ent *e)
{
	uint64_t v = e->page ? __atomic_load_n(&e->page->gpu_ns,
					       __ATOMIC_ACQUIRE) :
		e->base.gpu_ns;

	for (unsigned i = 0; i < e->nxp; i++)
		v += __atomic_load_n(&e->xp[i].page->gpu_ns, __ATOMIC_ACQUIRE);
	return v;
}

/* GPU time of a hold's ns on part_ppm of the SMs (0: all). */
static uint64_t
part_scaled(uint64_t ns, uint32_t part_ppm)
{
	if (part_ppm == 0 || part_ppm >= GS_ACCT_PART_ONE)
		return ns;
	return (uint64_t)((unsigned __int128)ns * part_ppm /
			  GS_ACCT_PART_ONE);
}

void
gs_acct_set_part(struct gs_acct *a, uint64_t id, uint32_t part_ppm)
{
	struct ent *e = find(a, id);

	if (e != NULL)
		e->part_ppm = part_ppm;
}

void
gs_acct_hold(struct gs_acct *a, uint64_t id, uint64_t grant_mono)
{
	struct ent *e = find(a, id);

	if (e == NULL)
		return;
	e->holding = 1;
	e->escalated = 0;
	e->prov_ns = 0;
	e->grant_mono = grant_mono;
	e->gpu_at_grant = page_gpu(e);
}

/* Raise the overrun charge of the current hold to what `reported` GPU
 * time leaves uncovered of the wall time since the grant. */
static void
charge_overrun(struct ent *e, uint64_t mono, uint64_t reported)
{
	uint64_t want = sub0(sub0(mono, e->grant_mono), reported);

	if (want > e->prov_ns) {
		e->extra_ns += want - e->prov_ns;
		e->prov_ns = want;
	}
}

void
gs_acct_unhold(struct gs_acct *a, uint64_t id, uint64_t mono,
	       uint64_t reported_gpu_ns)
{
	struct ent *e = find(a, id);

	if (e == NULL || !e->holding)
		return;
	if (e->escalated)
		charge_overrun(e, mono, reported_gpu_ns);
	e->floor_held += sub0(mono, e->grant_mono);
	/* space mode: the hold ran on part of the SMs (the report is
	 * kernel time, unscaled) */
	e->floor_gpu += part_scaled(gs_acct_bill_gpu(sub0(mono,
							  e->grant_mono),
						     reported_gpu_ns),
				    e->part_ppm);
	e->holding = 0;
	e->escalated = 0;
	e->prov_ns = 0;
}

void
gs_acct_escalate(struct gs_acct *a, uint64_t id, uint64_t mono)
{
	struct ent *e = find(a, id);

	if (e == NULL || !e->holding)
		return;
	e->escalated = 1;
	charge_overrun(e, mono, sub0(page_gpu(e), e->gpu_at_grant));
}

/* ---- NVML estimates ---- */

void
gs_acct_set_util_source(struct gs_acct *a, gs_acct_util_fn fn, void *arg,
			const char *proc_root)
{
	a->util_fn = fn;
	a->util_arg = arg;
	snprintf(a->proc_root, sizeof(a->proc_root), "%s",
		 proc_root ? proc_root : "/proc");
}

/* GSHARE_ALLOC of process pid, 0 when it has none or is gone. */
static uint64_t
environ_alloc(const char *root, uint32_t pid)
{
	static const char key[] = GS_ENV_ALLOC "=";
	char path[192], buf[16384];
	uint64_t id = 0;
	ssize_t n;
	size_t off = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/environ", root, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	while (off < (size_t)n) {
		const char *v = buf + off;
		size_t len = strlen(v);

		if (strncmp(v, key, sizeof(key) - 1) == 0) {
			id = strtoull(v + sizeof(key) - 1, NULL, 10);
			break;
		}
		off += len + 1;
	}
	return id;
}

static uint64_t
pid_alloc(struct gs_acct *a, uint32_t pid)
{
	struct pidmap *slot = &a->pids[0];

	for (unsigned i = 0; i < PIDCACHE; i++) {
		if (a->pids[i].pid == pid && a->pids[i].seen) {
			a->pids[i].seen = a->tick + 1;
			return a->pids[i].id;
		}
		if (a->pids[i].seen < slot->seen)
			slot = &a->pids[i];
	}
	slot->pid = pid;
	slot->id = environ_alloc(a->proc_root, pid);
	slot->seen = a->tick + 1;
	return slot->id;
}

static struct gpu_util *
gutil_for(struct gs_acct *a, int32_t gpu)
{
	struct gpu_util *ng;

	for (unsigned i = 0; i < a->ngutil; i++)
		if (a->gutil[i].gpu == gpu)
			return &a->gutil[i];
	ng = realloc(a->gutil, (a->ngutil + 1) * sizeof(*ng));
	if (ng == NULL)
		return NULL;
	a->gutil = ng;
	ng[a->ngutil].gpu = gpu;
	ng[a->ngutil].last_us = 0;
	return &ng[a->ngutil++];
}

/*
 * Charge sm_util% of each sample's period to the allocation owning the
 * sampled process.  A sample's period is the time since the previous
 * sample on that GPU, capped at max(one tick, 1 s) so that a process that
 * was idle for long is not charged its idle gap.
 */
static void
estimate_gpu(struct gs_acct *a, int32_t gpu, uint64_t tick_ns)
{
	struct gs_proc_util s[UTIL_MAX];
	struct gs_error err;
	struct gpu_util *g = gutil_for(a, gpu);
	/* a gap longer than this is idle time, not the sample's period */
	uint64_t cap = tick_ns > 1000000000u ? tick_ns : 1000000000u;
	uint64_t prev, period, id;
	int n;

	if (g == NULL)
		return;
	n = a->util_fn(a->util_arg, gpu, g->last_us, s, UTIL_MAX, &err);
	if (n <= 0)
		return;
	prev = g->last_us;
	for (int i = 0; i < n; i++) {
		if (s[i].ts_us <= g->last_us)
			continue;
		period = prev ? (s[i].ts_us - prev) * 1000u : tick_ns;
		if (period > cap)
			period = cap;
		prev = s[i].ts_us;
		id = pid_alloc(a, s[i].pid);
		if (id == 0)
			continue;
		struct ent *e = find(a, id);

		if (e == NULL || e->page != NULL || e->v.row.gpu != gpu)
			continue;
		e->est_ns += period * (s[i].sm_util > 100 ? 100 :
				       s[i].sm_util) / 100;
		e->v.row.estimate = 1;
	}
	if (prev > g->last_us)
		g->last_us = prev;
}

void
gs_acct_add_estimate(struct gs_acct *a, uint64_t id, uint64_t ns)
{
	struct ent *e = find(a, id);

	if (e == NULL || e->closing || ns == 0)
		return;
	e->est_ns += ns;
	e->v.row.estimate = 1;
}

static void
estimate_all(struct gs_acct *a, uint64_t tick_ns)
{
	for (unsigned i = 0; i < a->nents; i++) {
		const struct ent *e = &a->ents[i];
		int seen = 0;

		if (e->page != NULL || e->v.attached || e->closing)
			continue;
		for (unsigned j = 0; j < i; j++)
			if (a->ents[j].page == NULL && !a->ents[j].closing &&
			    a->ents[j].v.row.gpu == e->v.row.gpu)
				seen = 1;
		if (!seen)
			estimate_gpu(a, e->v.row.gpu, tick_ns);
	}
}

/* ---- the tick ---- */

static int
usage_zero(const struct gs_usage *u)
{
	return !(u->gpu_ns | u->held_ns | u->share_ns | u->wall_ns |
		 u->block_tasks | u->suspensions | u->evict_ns_sum |
		 u->mem_max | u->mem_ns);
}

/*
 * A re-adopted allocation's job says on its page whether its counters
 * start again at zero or continue its earlier totals (`resumed`).  The job
 * sets the flag before writing any counter, so the decision waits until
 * either is visible.  Resumed: the baseline is what the store holds.
 */
static void
settle_base(struct ent *e, const struct gs_ctl_counters *cur)
{
	const struct gs_usage *t = &e->v.row.tot;

	if (!e->base_pending)
		return;
	if (cur->resumed) {
		e->base.gpu_ns = t->gpu_ns;
		e->base.held_ns = t->held_ns;
		e->base.block_tasks = t->block_tasks;
		e->base.suspensions = t->suspensions;
		e->base.evict_ns_sum = t->evict_ns_sum;
		e->base_pending = 0;
		e->base_resumed = 1;
	} else if (cur->gpu_ns | cur->held_ns | cur->block_tasks |
		   cur->suspensions) {
		e->base_pending = 0;
	}
}

/* *base = cur, or old when cur is below it: 1 then */
static int
keep_base(uint64_t *base, uint64_t cur, uint64_t old)
{
	*base = cur < old ? old : cur;
	return cur < old;
}

/*
 * The baseline becomes the counters just read.  After a resumed settle a
 * counter still below the store's total is one the job has not written
 * yet (it sets `resumed` first, then its counters, one by one): that
 * field keeps the store's total until the counter passes it, else the
 * next read would charge the job's whole total a second time.
 */
static void
advance_base(struct ent *e, const struct gs_ctl_counters *cur)
{
	struct gs_ctl_counters b = e->base;
	int below = 0;

	e->base = *cur;
	if (!e->base_resumed)
		return;
	below |= keep_base(&e->base.gpu_ns, cur->gpu_ns, b.gpu_ns);
	below |= keep_base(&e->base.held_ns, cur->held_ns, b.held_ns);
	below |= keep_base(&e->base.block_tasks, cur->block_tasks,
			   b.block_tasks);
	below |= keep_base(&e->base.suspensions, cur->suspensions,
			   b.suspensions);
	below |= keep_base(&e->base.evict_ns_sum, cur->evict_ns_sum,
			   b.evict_ns_sum);
	e->base_resumed = below;
}

static int
tick_one(struct gs_acct *a, struct ent *e, uint64_t mono, int64_t real,
	 struct gs_store_batch *b, struct gs_error *err)
{
	struct gs_store_sample smp;
	struct gs_ctl_counters cur, mc, mp;
	struct gs_usage d;
	uint64_t dt = sub0(mono, e->last_mono);
	int busy = 0;

	memset(&smp, 0, sizeof(smp));
	e->st_mem_used = 0;
	if (e->page != NULL) {
		gs_acct_read_page(e->page, &cur);
		settle_base(e, &cur);
		gs_acct_delta(&e->base, &cur, &d);
		gs_acct_space_delta(e->v.row.mode, &e->base, &cur, &d);
		bound_delta(e, &d, mono);
		if (d.suspensions) {
			struct gs_acct_hist *h = hist_for(a, e->v.row.gpu);

			if (h != NULL)
				gs_acct_hist_add(h, d.suspensions,
						 d.evict_ns_sum,
						 cur.last_evict_ns);
		}
		advance_base(e, &cur);
		usage_add(&e->pend, &d);
		busy = cur.state == GS_CTL_WAITING ||
			cur.state == GS_CTL_RUNNING;
		/* memory of the allocation: the gauges of all its pages
		 * added up, the largest page peak */
		memset(&mc, 0, sizeof(mc));
		mc.mem_used = cur.mem_used;
		mc.mem_peak = cur.mem_peak;
		for (unsigned k = 0; k < e->nxp; k++) {
			struct gs_ctl_counters xc;
			struct gs_usage xd;

			gs_acct_read_page(e->xp[k].page, &xc);
			gs_acct_delta(&e->xp[k].base, &xc, &xd);
			bound_delta(e, &xd, mono);
			e->xp[k].base = xc;
			usage_add(&e->pend, &xd);
			busy = busy || xc.state == GS_CTL_WAITING ||
			       xc.state == GS_CTL_RUNNING;
			mc.mem_used = xc.mem_used > UINT64_MAX - mc.mem_used ?
				      UINT64_MAX : mc.mem_used + xc.mem_used;
			if (xc.mem_peak > mc.mem_peak)
				mc.mem_peak = xc.mem_peak;
		}
		memset(&mp, 0, sizeof(mp));
		mp.mem_peak = e->mem_peak_seen;
		memset(&d, 0, sizeof(d));
		gs_acct_mem(&mp, &mc, dt, &d);
		usage_add(&e->pend, &d);
		e->mem_peak_seen = mc.mem_peak;
		e->st_mem_used = mc.mem_used;
		if (e->holding && e->escalated)
			charge_overrun(e, mono, sub0(cur.gpu_ns,
						     e->gpu_at_grant));
	}
	/* Prepare only: the entry changes in tick_commit, once the whole
	 * batch is built, so a failed tick loses nothing (the page's deltas
	 * stay in pend for the next one). */
	d = e->pend;
	d.gpu_ns += e->extra_ns + e->est_ns;
	if (e->est_ns)
		smp.estimate = 1;
	/* Never bill less than the agent saw held: the token time of every
	 * hold that ended (GPU time: gs_acct_bill_gpu of it and the
	 * RELEASE reports), and of the one running so far.  Emitted totals are the
	 * larger of that and what the job reported, so a report that comes
	 * after its RELEASE is not counted twice. */
	{
		uint64_t run = e->holding ? sub0(mono, e->grant_mono) : 0;
		uint64_t fg = e->floor_gpu +
			      part_scaled(gs_acct_bill_gpu(run, 0),
					  e->part_ppm);
		uint64_t fh = e->floor_held + run;

		e->st_raw_gpu = e->raw_gpu + d.gpu_ns;
		e->st_raw_held = e->raw_held + d.held_ns;
		e->st_out_gpu = e->st_raw_gpu > fg ? e->st_raw_gpu : fg;
		e->st_out_held = e->st_raw_held > fh ? e->st_raw_held : fh;
		if (e->st_out_gpu < e->out_gpu)
			e->st_out_gpu = e->out_gpu;
		if (e->st_out_held < e->out_held)
			e->st_out_held = e->out_held;
		d.gpu_ns = e->st_out_gpu - e->out_gpu;
		d.held_ns = e->st_out_held - e->out_held;
	}
	busy = busy || e->holding || d.gpu_ns || d.held_ns;
	if (busy) {
		d.wall_ns = dt;
		d.share_ns = dt * e->v.row.shares / GS_SHARES_PER_GPU;
	}
	e->st_busy = busy;
	e->st_row = e->v.row;
	e->st_sample = !usage_zero(&d);
	if (e->st_sample) {
		smp.key = e->v.row.key;
		smp.t_ns = real;
		smp.dt_ns = dt;
		smp.d = d;
		if (gs_store_batch_add_sample(b, &smp, err) < 0)
			return -1;
		usage_add(&e->st_row.tot, &d);
		e->st_row.last_ns = real;
	}
	if (e->st_sample || e->dirty || e->closing)
		if (gs_store_batch_add_alloc(b, &e->st_row, err) < 0)
			return -1;
	return 0;
}

static void
tick_commit(struct ent *e, uint64_t mono)
{
	memset(&e->pend, 0, sizeof(e->pend));
	e->extra_ns = 0;
	e->est_ns = 0;
	e->v.active = (uint32_t)e->st_busy;
	e->v.mem_used = e->st_mem_used;
	e->raw_gpu = e->st_raw_gpu;
	e->raw_held = e->st_raw_held;
	e->out_gpu = e->st_out_gpu;
	e->out_held = e->st_out_held;
	e->last_mono = mono;
	e->v.row = e->st_row;
	e->dirty = 0;
}

int
gs_acct_tick(struct gs_acct *a, uint64_t mono, int64_t real,
	     struct gs_store_batch **out, struct gs_error *err)
{
	struct gs_store_batch *b;
	unsigned i, j;

	*out = NULL;
	b = gs_store_batch_new(a->tick + 1, real);
	if (b == NULL)
		return gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
	if (a->util_fn != NULL)
		estimate_all(a, a->last_mono ? sub0(mono, a->last_mono) :
			     1000000000u);
	for (i = 0; i < a->nents; i++)
		if (tick_one(a, &a->ents[i], mono, real, b, err) < 0) {
			gs_store_batch_free(b);
			return -1;
		}
	for (i = 0; i < a->nents; i++)
		tick_commit(&a->ents[i], mono);
	for (i = j = 0; i < a->nents; i++)
		if (!a->ents[i].closing) {
			a->ents[j++] = a->ents[i];
		} else {
			a->final_id = a->ents[i].v.row.agent_id;
			a->final_tot = a->ents[i].v.row.tot;
			free(a->ents[i].xp);
		}
	a->nents = j;
	a->tick++;
	a->last_mono = mono;
	*out = b;
	return 0;
}

void
gs_acct_mark_dirty(struct gs_acct *a)
{
	for (unsigned i = 0; i < a->nents; i++)
		a->ents[i].dirty = 1;
}

unsigned
gs_acct_allocs(const struct gs_acct *a, const struct gs_acct_view **out)
{
	struct gs_acct *m = (struct gs_acct *)a;
	struct gs_acct_view *nv;

	nv = realloc(m->views, (a->nents ? a->nents : 1) * sizeof(*nv));
	if (nv == NULL) {
		*out = NULL;
		return 0;
	}
	m->views = nv;
	for (unsigned i = 0; i < a->nents; i++)
		nv[i] = a->ents[i].v;
	*out = nv;
	return a->nents;
}

unsigned
gs_acct_hists(const struct gs_acct *a, const struct gs_acct_hist **out)
{
	*out = a->hists;
	return a->nhists;
}

int
gs_acct_final(const struct gs_acct *a, uint64_t id, struct gs_usage *tot)
{
	if (id == 0 || a->final_id != id)
		return -1;
	*tot = a->final_tot;
	return 0;
}

uint64_t
gs_acct_ticks(const struct gs_acct *a)
{
	return a->tick;
}
