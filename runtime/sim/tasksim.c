/*
 * tasksim.c — a task pool on a simulated GPU; see tasksim.h.  Function
 * names follow gshare_device.cuh (tsched, tclaim, ttail, tread, tstart,
 * treap, tpush, tfinish) and gs_task.c (launch, reap, hold) so that the
 * two read side by side.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_tasktable.h"
#include "gshare.h"
#include "gshare_device.cuh"
#include "tasksim.h"

#define TSIM_FN 0x7a5c0deull	/* the one "device function" */

/* The argument block of a simulated task (in the entry's args). */
struct tsim_args {
	uint64_t id;
	uint32_t ticks, threads, shmem;
};

struct tsim_rec {			/* gs__trec: a task running */
	uint32_t slot, seq;
	uint32_t warps, bar, shfirst, shgran, wmask;
	uint32_t fin;
	uint64_t id, end;
};

struct tsim_blk {
	/* gs__tsched's registers */
	uint32_t freew, bars, live;
	uint32_t hh, hn, hr;
	uint32_t done, susp, stop, idle_n;
	int left;
	/* gs__mblk */
	struct tsim_rec r[GS__TWARPS];
	struct gs__tentry held[GS__THELD];
	uint32_t held_tk[GS__THELD];
	uint32_t shbm[GS__TGRANS / 32];
	/* checks: task id + 1 owning each warp, barrier, granule */
	uint64_t own_w[GS__TWARPS], own_b[16], own_g[GS__TGRANS];
};

struct gs_tsim {
	struct gs__ttab tt;
	struct gs__tentry *tab;
	uint32_t *done;
	struct gs__tqhost h;
	struct gs__tqdev d;
	uint32_t *redo[2];
	uint32_t redo_cap, redo_n, redo_cur;
	/* the launch (gs__mctx) */
	const uint32_t *redo_in;
	uint32_t *redo_out;
	uint32_t redo_in_n, seq, nblocks, grans;
	int running;
	uint64_t now, t_launch, head_seen;
	struct tsim_blk *blk;
	uint64_t max_tasks;
	unsigned char *runs;
	uint64_t rng;
	struct gs_tsim_stats st;
};

static void
tsim_bad(struct gs_tsim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
tsim_bad(struct gs_tsim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->st.errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(s->st.first_error, sizeof(s->st.first_error), fmt,
			  ap);
		va_end(ap);
	}
}

static uint64_t
tsim_rand(struct gs_tsim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

int
gs_tsim_new(const struct gs_tsim_cfg *cfg, struct gs_tsim **out,
	    struct gs_error *err)
{
	struct gs_tsim *s;

	if (cfg->blocks == 0 || cfg->blocks > 1024 || cfg->pool_bytes == 0 ||
	    cfg->pool_bytes > GS__TGRANS * GS__TGRAN ||
	    cfg->pool_bytes % GS__TGRAN != 0 || cfg->max_tasks == 0 ||
	    cfg->max_tasks > (1ull << 31)) {
		gs_error_set(err, GS_EINVAL, "simulated task pool: 1..1024 "
			     "blocks, a shared-memory pool of 256..%u bytes "
			     "in steps of 256 and 1..2^31 tasks",
			     GS__TGRANS * GS__TGRAN);
		return -1;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto out_nomem;
	if (gs__tt_init(&s->tt, cfg->cap, GS_TASK_GROUPS, err) < 0) {
		free(s);
		return -1;
	}
	s->nblocks = cfg->blocks;
	s->grans = cfg->pool_bytes / GS__TGRAN;
	s->redo_cap = cfg->blocks * GS__THELD;
	s->max_tasks = cfg->max_tasks;
	s->rng = cfg->seed;
	s->tab = calloc(s->tt.cap, sizeof(*s->tab));
	s->done = calloc(s->tt.cap, sizeof(*s->done));
	s->redo[0] = calloc(s->redo_cap, sizeof(uint32_t));
	s->redo[1] = calloc(s->redo_cap, sizeof(uint32_t));
	s->blk = calloc(cfg->blocks, sizeof(*s->blk));
	s->runs = calloc(cfg->max_tasks, 1);
	if (s->tab == NULL || s->done == NULL || s->redo[0] == NULL ||
	    s->redo[1] == NULL || s->blk == NULL || s->runs == NULL) {
		gs_tsim_free(s);
		goto out_nomem;
	}
	*out = s;
	return 0;
out_nomem:
	gs_error_set(err, GS_ENOMEM, "out of memory");
	return -1;
}

void
gs_tsim_free(struct gs_tsim *s)
{
	if (s == NULL)
		return;
	gs__tt_fini(&s->tt);
	free(s->tab);
	free(s->done);
	free(s->redo[0]);
	free(s->redo[1]);
	free(s->blk);
	free(s->runs);
	free(s);
}

int
gs_tsim_spawn(struct gs_tsim *s, unsigned int threads, unsigned int shmem,
	      unsigned int ticks, unsigned int group, uint64_t *id,
	      struct gs_error *err)
{
	struct gs__tentry *e;
	struct tsim_args a;
	uint64_t tk;

	if (gs__tt_check_spawn(threads, shmem, sizeof(a), sizeof(a), group,
			       GS_TASK_MAX_THREADS, s->grans * GS__TGRAN,
			       GS_TASK_ARGS, GS_TASK_GROUPS, err) < 0)
		return -1;
	if (ticks == 0 || s->tt.next >= s->max_tasks) {
		gs_error_set(err, GS_EINVAL, "simulated task: %u ticks, %llu "
			     "of %llu tasks spawned", ticks,
			     (unsigned long long)s->tt.next,
			     (unsigned long long)s->max_tasks);
		return -1;
	}
	if (gs__tt_reserve(&s->tt, group, &tk) < 0) {
		s->st.completed += gs__tt_retire(&s->tt, s->done);
		if (gs__tt_reserve(&s->tt, group, &tk) < 0)
			return 1;
	}
	/* gs_task_spawn: fill the entry, then publish the tail */
	memset(&a, 0, sizeof(a));
	a.id = tk;
	a.ticks = ticks;
	a.threads = threads;
	a.shmem = shmem;
	e = &s->tab[tk & s->tt.mask];
	e->fn = TSIM_FN;
	e->seq = gs__tt_seq(tk);
	e->warps = threads / 32u;
	e->shmem = shmem;
	memcpy(e->args, &a, sizeof(a));
	s->h.tail = (unsigned int)(tk + 1u);
	s->st.spawned++;
	*id = tk;
	return 0;
}

static void
tsim_retire(struct gs_tsim *s)
{
	s->st.completed += gs__tt_retire(&s->tt, s->done);
}

/* ---- the device ---- */

/* gs__ttail: the tail as the device copy has it, refreshed when it shows
 * `need` unpublished, at most once a tick over all blocks. */
static uint32_t
tsim_ttail(struct gs_tsim *s, uint32_t need)
{
	uint32_t t = s->d.tail_cache;

	if ((int)(t - need) <= 0 && s->now != s->d.tail_t) {
		s->d.tail_t = s->now;
		t = s->h.tail;
		s->d.tail_cache = t;
	}
	return t;
}

/* gs__tclaim: up to want tickets into held[at..), redo list first. */
static uint32_t
tsim_tclaim(struct gs_tsim *s, struct tsim_blk *b, uint32_t at,
	    uint32_t want)
{
	uint32_t n = 0, h, t, k, q;

	while (n < want && s->d.redo_take < s->redo_in_n) {
		uint32_t i = s->d.redo_take++;
		if (i >= s->redo_in_n)
			break;
		b->held_tk[(at + n++) % GS__THELD] = s->redo_in[i];
	}
	if (n == want)
		return n;
	h = s->d.head;
	/* now and then the head this block read is the one of the tick's
	 * start, before the claims of the blocks that ran before it */
	if (s->rng != 0 && h != s->head_seen && (tsim_rand(s) & 3u) == 0) {
		h = (uint32_t)s->head_seen;
		s->st.races++;
	}
	t = tsim_ttail(s, h);
	if ((int)(t - h) <= 0)
		return n;
	k = want - n < t - h ? want - n : t - h;
	h = s->d.head;			/* atomicAdd */
	s->d.head += k;
	for (q = 0; q < k; q++)
		b->held_tk[(at + n++) % GS__THELD] = h + q;
	return n;
}

/* gs__tread: copy the entries of m published tickets into held[]. */
static void
tsim_tread(struct gs_tsim *s, struct tsim_blk *b, uint32_t at, uint32_t m)
{
	uint32_t i;

	for (i = 0; i < m; i++) {
		uint32_t h = (at + i) % GS__THELD, tk = b->held_tk[h];

		b->held[h] = s->tab[tk & s->tt.mask];
		if (b->held[h].seq != tk + 1u)
			tsim_bad(s, "ticket %u read with sequence %u: the "
				 "host had not written it", tk,
				 b->held[h].seq);
	}
}

/* The task function, when the task starts: check it is the task of its
 * ticket, runs once, and owns its warps, barrier and granules. */
static void
tsim_task_start(struct gs_tsim *s, struct tsim_blk *b, struct tsim_rec *r,
		const struct gs__tentry *e)
{
	struct tsim_args a;
	uint32_t m, j;

	memcpy(&a, e->args, sizeof(a));
	r->id = a.id;
	r->end = s->now + a.ticks;
	if (e->fn != TSIM_FN || (uint32_t)a.id != r->slot ||
	    a.id >= s->max_tasks) {
		tsim_bad(s, "ticket %u started task %llu", r->slot,
			 (unsigned long long)a.id);
		r->id = UINT64_MAX;
		return;
	}
	if (b->susp)
		tsim_bad(s, "task %llu started after the suspend",
			 (unsigned long long)a.id);
	if (s->runs[a.id]++ != 0)
		tsim_bad(s, "task %llu ran %u times",
			 (unsigned long long)a.id, s->runs[a.id]);
	if (s->runs[a.id] == 0)
		s->runs[a.id] = 255;	/* saturate */
	if (r->warps * 32u != a.threads ||
	    (uint64_t)r->shgran * GS__TGRAN < a.shmem ||
	    r->shfirst + r->shgran > s->grans)
		tsim_bad(s, "task %llu of %u threads and %u bytes got %u "
			 "warps and granules %u+%u", (unsigned long long)a.id,
			 a.threads, a.shmem, r->warps, r->shfirst, r->shgran);
	if (gs__popc(r->wmask) != r->warps || (r->wmask & 1u))
		tsim_bad(s, "task %llu got warps %#x", (unsigned long long)a.id,
			 r->wmask);
	for (m = r->wmask; m; m &= m - 1u) {
		uint32_t w = gs__low(m);
		if (b->own_w[w])
			tsim_bad(s, "task %llu got warp %u of task %llu",
				 (unsigned long long)a.id, w,
				 (unsigned long long)b->own_w[w] - 1);
		b->own_w[w] = a.id + 1;
	}
	if (r->warps > 1u) {
		if (r->bar == 0 || r->bar > 15 || b->own_b[r->bar])
			tsim_bad(s, "task %llu got barrier %u",
				 (unsigned long long)a.id, r->bar);
		else
			b->own_b[r->bar] = a.id + 1;
	}
	for (j = r->shfirst; j < r->shfirst + r->shgran && j < GS__TGRANS;
	     j++) {
		if (b->own_g[j])
			tsim_bad(s, "task %llu got granule %u of task %llu",
				 (unsigned long long)a.id, j,
				 (unsigned long long)b->own_g[j] - 1);
		b->own_g[j] = a.id + 1;
	}
}

/* gs__tstart: start held task h if its resources are free. */
static int
tsim_tstart(struct gs_tsim *s, struct tsim_blk *b, uint32_t h)
{
	const struct gs__tentry *e = &b->held[h];
	uint32_t nw = e->warps, g = gs__tgrans(e->shmem), ws, bar = 0, lead;
	int sh = 0;
	struct tsim_rec *r;

	if (!gs__tres_take(&b->freew, &b->bars, b->shbm, nw, g, &ws, &bar,
			   &sh))
		return 0;
	lead = gs__low(ws);
	r = &b->r[lead];
	r->slot = b->held_tk[h];
	r->seq = e->seq;
	r->warps = nw;
	r->bar = bar;
	r->shfirst = (uint32_t)sh;
	r->shgran = g;
	r->wmask = ws;
	r->fin = 0;
	b->live |= 1u << lead;
	tsim_task_start(s, b, r, e);
	return 1;
}

/* gs__treap: take back the resources of finished tasks. */
static uint32_t
tsim_treap(struct tsim_blk *b)
{
	uint32_t m, n = 0, j;

	for (m = b->live; m; m &= m - 1u) {
		uint32_t i = gs__low(m);
		struct tsim_rec *r = &b->r[i];

		if (!r->fin)
			continue;
		r->fin = 0;
		b->live &= ~(1u << i);
		gs__tres_free(&b->freew, &b->bars, b->shbm, r->warps, r->bar,
			      r->shfirst, r->shgran, r->wmask);
		for (j = 0; j < GS__TWARPS; j++)
			if (r->wmask & (1u << j))
				b->own_w[j] = 0;
		if (r->warps > 1u && r->bar < 16)
			b->own_b[r->bar] = 0;
		for (j = r->shfirst; j < r->shfirst + r->shgran &&
		     j < GS__TGRANS; j++)
			b->own_g[j] = 0;
		n++;
	}
	return n;
}

/* gs__tpush: every held ticket to the redo list. */
static void
tsim_tpush(struct gs_tsim *s, struct tsim_blk *b)
{
	if (b->hn) {
		uint32_t o = s->d.redo_out;

		s->d.redo_out += b->hn;
		for (; b->hn; b->hn--, b->hh++) {
			if (o >= s->redo_cap) {
				tsim_bad(s, "redo list overflow");
				break;
			}
			s->redo_out[o++] = b->held_tk[b->hh % GS__THELD];
		}
	}
	b->hr = 0;
}

/* gs__tfinish: the last block out. */
static void
tsim_tfinish(struct gs_tsim *s)
{
	uint32_t t = s->d.redo_take, o = s->d.redo_out;

	if (o + (t < s->redo_in_n ? s->redo_in_n - t : 0) > s->redo_cap) {
		tsim_bad(s, "redo list overflow at the exit");
		o = 0;
	} else {
		o = gs__tredo_carry(s->redo_in, t, s->redo_in_n, s->redo_out,
				    o);
	}
	s->h.redo_n = o;
	s->h.suspended = s->d.suspended;
	s->h.done = s->d.done;
	s->h.tmin = s->t_launch;
	s->h.tmax = s->now;
	s->d.redo_take = 0;
	s->d.redo_out = 0;
	s->d.exited = 0;
	s->d.suspended = 0;
	s->d.done = 0;
	s->h.seq = s->seq;
}

/* One round of gs__tsched's loop (lane 0's part and the reads). */
static void
tsim_tsched(struct gs_tsim *s, struct tsim_blk *b, int flag)
{
	uint32_t m = 0, busy;

	busy = tsim_treap(b);
	b->done += busy;
	if (!b->susp && flag)
		b->susp = 1;
	if (!b->susp && b->hn < GS__THELD && b->freew != 0u)
		b->hn += tsim_tclaim(s, b, b->hh + b->hn, GS__THELD - b->hn);
	if (!b->susp && b->hr < b->hn) {
		uint32_t t = tsim_ttail(s,
		    b->held_tk[(b->hh + b->hr) % GS__THELD]);
		m = gs__tpublished(b->held_tk, b->hh, b->hr, b->hn, t);
	}
	if (m) {
		tsim_tread(s, b, b->hh + b->hr, m);
		b->hr += m;
		busy += m;
	}
	while (!b->susp && b->hr && tsim_tstart(s, b, b->hh % GS__THELD)) {
		b->hh++;
		b->hn--;
		b->hr--;
		busy++;
	}
	if (b->susp) {
		tsim_tpush(s, b);
		b->stop = b->live == 0u;
	} else if (busy || b->hr || b->live) {
		/* not idle */
	} else if ((++b->idle_n & 15u) == 0u &&
		   s->h.quit - s->seq < 0x80000000u) {
		tsim_tpush(s, b);
		b->stop = 1;
	}
	if (!b->stop)
		return;
	/* the block leaves */
	b->left = 1;
	s->d.done += b->done;
	if (b->susp)
		s->d.suspended |= 1u;
	if (++s->d.exited == s->nblocks)
		tsim_tfinish(s);
}

/* One tick: tasks due end (their last warp writes the done word), then
 * every block still in the launch runs a round, from a rotating first. */
static void
tsim_tick(struct gs_tsim *s, int flag)
{
	uint32_t i, k;

	s->now++;
	s->st.ticks++;
	for (i = 0; i < s->nblocks; i++) {
		struct tsim_blk *b = &s->blk[i];
		uint32_t m;

		for (m = b->live; m; m &= m - 1u) {
			struct tsim_rec *r = &b->r[gs__low(m)];

			if (!r->fin && r->end <= s->now) {
				s->done[r->slot & s->tt.mask] = r->seq;
				r->fin = 1;
			}
		}
	}
	s->head_seen = s->d.head;
	for (k = 0; k < s->nblocks; k++) {
		struct tsim_blk *b = &s->blk[(k + s->now) % s->nblocks];

		if (!b->left)
			tsim_tsched(s, b, flag);
	}
}

/* ---- the host (gs_task.c, queued mode) ---- */

/* launch_master */
static void
tsim_launch(struct gs_tsim *s)
{
	uint32_t i;

	s->redo_in = s->redo[s->redo_cur];
	s->redo_out = s->redo[s->redo_cur ^ 1u];
	s->redo_in_n = s->redo_n;
	s->seq++;
	s->t_launch = s->now;
	for (i = 0; i < s->nblocks; i++) {
		struct tsim_blk *b = &s->blk[i];

		memset(b, 0, sizeof(*b));
		b->freew = 0xfffffffeu;
		b->bars = 0xfffeu;
		gs__shm_init(b->shbm, s->grans);
	}
	s->running = 1;
	s->st.launches++;
}

static int
tsim_left(const struct gs_tsim *s)
{
	return s->running && s->h.seq == s->seq;
}

int
gs_tsim_hold_begin(struct gs_tsim *s)
{
	tsim_retire(s);
	if (gs__tt_pending(&s->tt) == 0)
		return 1;
	tsim_launch(s);
	return 0;
}

int
gs_tsim_hold_step(struct gs_tsim *s, int flag)
{
	if (!flag)
		tsim_retire(s);
	if (gs__tt_pending(&s->tt) == 0 && s->h.quit != s->seq)
		s->h.quit = s->seq;
	if (tsim_left(s))
		return 1;
	tsim_tick(s, flag);
	return 0;
}

uint64_t
gs_tsim_hold_end(struct gs_tsim *s, int *done, uint64_t *tasks)
{
	uint64_t ticks = s->h.tmax - s->h.tmin;

	/* reap_master */
	s->running = 0;
	s->redo_n = s->h.redo_n;
	s->redo_cur ^= 1u;
	s->st.requeued += s->redo_n;
	if (s->h.suspended)
		s->st.suspensions++;
	if (tasks != NULL)
		*tasks = s->h.done;
	tsim_retire(s);
	*done = gs__tt_pending(&s->tt) == 0;
	return ticks;
}

int
gs_tsim_is_done(struct gs_tsim *s, uint64_t id)
{
	tsim_retire(s);
	return gs__tt_is_done(&s->tt, s->done, id);
}

uint64_t
gs_tsim_pending(struct gs_tsim *s)
{
	tsim_retire(s);
	return gs__tt_pending(&s->tt);
}

uint64_t
gs_tsim_group_pending(struct gs_tsim *s, unsigned int group)
{
	tsim_retire(s);
	return gs__tt_group_pending(&s->tt, group);
}

uint64_t
gs_tsim_oldest(const struct gs_tsim *s)
{
	return s->tt.retired;
}

unsigned int
gs_tsim_runs(const struct gs_tsim *s, uint64_t id)
{
	return id < s->max_tasks ? s->runs[id] : 0;
}

int
gs_tsim_audit(struct gs_tsim *s, struct gs_error *err)
{
	uint64_t *gp, id;
	uint32_t g;
	int rv = -1;

	if (s->st.errors) {
		gs_error_set(err, GS_EINVAL, "%llu broken rules, the first: "
			     "%s", (unsigned long long)s->st.errors,
			     s->st.first_error);
		return -1;
	}
	gp = calloc(GS_TASK_GROUPS, sizeof(*gp));
	if (gp == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return -1;
	}
	for (id = 0; id < s->tt.next; id++) {
		unsigned int n = s->runs[id];

		if (n > 1 || (id < s->tt.retired && n != 1)) {
			gs_error_set(err, GS_EINVAL, "task %llu ran %u times "
				     "(retired: %s)", (unsigned long long)id,
				     n, id < s->tt.retired ? "yes" : "no");
			goto out;
		}
		if (gs__tt_is_done(&s->tt, s->done, id) && n != 1) {
			gs_error_set(err, GS_EINVAL, "task %llu is done but "
				     "never ran", (unsigned long long)id);
			goto out;
		}
		if (id >= s->tt.retired)
			gp[s->tt.group[id & s->tt.mask]]++;
	}
	for (g = 0; g < GS_TASK_GROUPS; g++)
		if (gp[g] != gs__tt_group_pending(&s->tt, g)) {
			gs_error_set(err, GS_EINVAL, "group %u: %llu tasks "
				     "pending, the table says %llu", g,
				     (unsigned long long)gp[g],
				     (unsigned long long)
				     gs__tt_group_pending(&s->tt, g));
			goto out;
		}
	rv = 0;
out:
	free(gp);
	return rv;
}

const struct gs_tsim_stats *
gs_tsim_stats(const struct gs_tsim *s)
{
	return &s->st;
}
