/*
 * gate_logic.c — the launch gate's window, accounting and idle decisions
 * (see gate_logic.h).  Pure: the caller owns events, clocks and locks.
 */
#include <string.h>

#include "gate_logic.h"

void gl_params_default(struct gl_params *p)
{
	p->window_ns = 1000000;		/* 1 ms */
	p->max_inflight = 256;
	p->max_batch = 32;
	p->gap_ns = 20000;		/* 20 us */
}

void gl_stream_init(struct gl_stream *st)
{
	memset(st, 0, sizeof(*st));
	st->prev_slot = -1;
}

uint32_t gl_batch(const struct gl_stream *st, const struct gl_params *p)
{
	uint64_t b;

	if (st->est_ns == 0)
		return p->max_batch < 4 ? p->max_batch : 4;
	b = p->window_ns / (2 * st->est_ns);
	if (b < 1)
		b = 1;
	if (b > p->max_batch)
		b = p->max_batch;
	return (uint32_t)b;
}

int gl_need_start(const struct gl_stream *st, const struct gl_params *p,
		  uint64_t now_ns)
{
	uint64_t ref = st->submit_ns != 0 ? st->submit_ns : st->drained_ns;

	/* drained, nothing recorded since, and idle long enough (or never
	 * measured): the next span needs a start */
	if (st->n != 0 || st->launched != st->done ||
	    st->evented != st->launched)
		return 0;
	return st->prev_slot < 0 || now_ns < ref || now_ns - ref >= p->gap_ns;
}

void gl_mark_submit(struct gl_stream *st, uint64_t now_ns)
{
	st->submit_ns = now_ns;
}

static uint32_t fn_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 52) &
	       (GL_FN_SLOTS - 1);
}

/* key's slot (claimed when claim and free), or -1 */
static int fn_slot(const struct gl_fntab *t, uint64_t key, int claim)
{
	uint32_t h = fn_hash(key);

	for (uint32_t i = 0; i < GL_FN_PROBE; i++) {
		uint32_t k = (h + i) & (GL_FN_SLOTS - 1);
		uint64_t cur = __atomic_load_n(&t->key[k], __ATOMIC_ACQUIRE);

		if (cur == key)
			return (int)k;
		if (cur != 0)
			continue;
		if (!claim)
			return -1;
		if (__atomic_compare_exchange_n((uint64_t *)&t->key[k], &cur,
						key, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE) ||
		    cur == key)
			return (int)k;
	}
	return -1;
}

void gl_fntab_init(struct gl_fntab *t)
{
	memset(t, 0, sizeof(*t));
}

uint64_t gl_fn_est(const struct gl_fntab *t, uint64_t key, int *known)
{
	int k;
	uint64_t e = 0;

	if (t != NULL && key != 0 && (k = fn_slot(t, key, 0)) >= 0)
		e = __atomic_load_n(&t->est[k], __ATOMIC_RELAXED);
	if (known != NULL)
		*known = e != 0;
	return e;
}

void gl_fn_sample(struct gl_fntab *t, uint64_t key, uint64_t ns)
{
	int k;
	uint64_t old, e;

	if (t == NULL || key == 0 || (k = fn_slot(t, key, 1)) < 0)
		return;
	if (ns == 0)
		ns = 1;
	old = __atomic_load_n(&t->est[k], __ATOMIC_RELAXED);
	/* moving average, 1/4 weight to the new sample */
	e = old == 0 ? ns : (3 * old + ns) / 4;
	__atomic_store_n(&t->est[k], e != 0 ? e : 1, __ATOMIC_RELAXED);
}

uint64_t gl_estimate(const struct gl_stream *st, const struct gl_fntab *t,
		     uint64_t key, int *known)
{
	uint64_t e = gl_fn_est(t, key, known);

	return e != 0 ? e : st->est_ns;
}

/* a launch measured alone: a kernel never measured, or a big one */
static int solo(const struct gl_params *p, uint64_t key, uint64_t est,
		int known)
{
	return known ? est >= p->window_ns / 4 : key != 0;
}

int gl_isolate(const struct gl_stream *st, const struct gl_params *p,
	       uint64_t key, uint64_t est, int known)
{
	return st->launched != st->evented && solo(p, key, est, known);
}

int gl_launched_fn(struct gl_stream *st, const struct gl_params *p,
		   uint64_t key, uint64_t est, int known)
{
	uint32_t i = (uint32_t)(st->launched % GL_LOG);

	st->lkey[i] = key;
	st->lest[i] = est;
	st->launched++;
	st->infl_ns += est;
	st->unev_ns += est;
	if (est == 0) {
		st->infl_unk++;
		st->unev_unk++;
	}
	return solo(p, key, est, known) || key == GL_KEY_DTOH ||
	       (!known && est >= p->window_ns / 4) ||
	       st->launched - st->evented >= p->max_batch ||
	       st->unev_unk >= 4 || 2 * st->unev_ns >= p->window_ns;
}

int gl_launched(struct gl_stream *st, const struct gl_params *p)
{
	return gl_launched_fn(st, p, 0, st->est_ns, 0);
}

uint64_t gl_unevented(const struct gl_stream *st)
{
	return st->launched - st->evented;
}

static int free_slot(const struct gl_stream *st)
{
	for (int i = 0; i < GL_RING; i++)
		if (!(st->used & (1u << i)))
			return i;
	return -1;
}

int gl_push(struct gl_stream *st, int start)
{
	int slot = free_slot(st);
	struct gl_ev *e;

	if (slot < 0 || st->n >= GL_RING)
		return -1;
	e = &st->ring[(st->head + st->n) % GL_RING];
	e->seq = st->launched;
	e->slot = (uint32_t)slot;
	e->start = start ? 1u : 0u;
	st->n++;
	st->used |= 1u << slot;
	if (!start) {
		st->evented = st->launched;
		st->unev_ns = 0;
		st->unev_unk = 0;
	}
	return slot;
}

void gl_unpush(struct gl_stream *st)
{
	struct gl_ev *e;

	if (st->n == 0)
		return;
	st->n--;
	e = &st->ring[(st->head + st->n) % GL_RING];
	st->used &= ~(1u << e->slot);
	/* the launches it was to cover stay unevented */
	st->evented = st->n > 0 ?
		st->ring[(st->head + st->n - 1) % GL_RING].seq : st->done;
	st->unev_ns = 0;
	st->unev_unk = 0;
	for (uint64_t q = st->evented; q < st->launched; q++) {
		uint64_t e2 = st->lest[q % GL_LOG];

		st->unev_ns += e2;
		st->unev_unk += e2 == 0;
	}
}

int gl_front(const struct gl_stream *st)
{
	return st->n > 0 ? (int)st->ring[st->head].slot : -1;
}

int gl_span_start(const struct gl_stream *st)
{
	if (st->n == 0 || st->ring[st->head].start)
		return -1;
	return st->prev_slot;
}

/* Launches (st->done, seq] completed: leave the window; with a span,
 * share it among their kernels in proportion to their estimates. */
static void retire(struct gl_stream *st, uint64_t seq, int measured,
		   uint64_t span_ns, struct gl_fntab *t)
{
	uint64_t q, w_sum = 0, n_est = 0, fill;

	if (seq > st->launched)
		seq = st->launched;
	for (q = st->done; q < seq; q++) {
		uint64_t e = st->lest[q % GL_LOG];

		st->infl_ns -= e <= st->infl_ns ? e : st->infl_ns;
		if (e == 0 && st->infl_unk > 0)
			st->infl_unk--;
		w_sum += e;
		n_est += e != 0;
	}
	if (!measured || t == NULL || seq <= st->done)
		return;
	/* launches without an estimate weigh the batch's mean (or 1) */
	fill = n_est > 0 ? w_sum / n_est : 1;
	if (fill == 0)
		fill = 1;
	w_sum += fill * ((seq - st->done) - n_est);
	for (q = st->done; q < seq; q++) {
		uint64_t w = st->lest[q % GL_LOG];

		if (w == 0)
			w = fill;
		gl_fn_sample(t, st->lkey[q % GL_LOG],
			     (uint64_t)((double)span_ns * (double)w /
					(double)w_sum));
	}
}

uint64_t gl_pop(struct gl_stream *st, uint64_t span_ns, uint64_t now_ns)
{
	return gl_pop_fn(st, span_ns, now_ns, NULL);
}

uint64_t gl_pop_fn(struct gl_stream *st, uint64_t span_ns, uint64_t now_ns,
		   struct gl_fntab *t)
{
	struct gl_ev *e;
	uint64_t acc = 0, nl;
	int measured;

	if (st->n == 0)
		return 0;
	e = &st->ring[st->head];
	measured = !e->start && st->prev_slot >= 0;
	retire(st, e->seq, measured, span_ns, t);
	if (measured) {
		acc = span_ns;
		nl = e->seq - st->prev_seq;
		if (nl > 0) {
			uint64_t per = span_ns / nl;

			/* moving average, 1/4 weight to the new sample */
			st->est_ns = st->est_ns == 0 ? per :
				(3 * st->est_ns + per) / 4;
			if (st->est_ns == 0)
				st->est_ns = 1;
		}
	}
	if (st->prev_slot >= 0)
		st->used &= ~(1u << st->prev_slot);
	st->prev_slot = (int32_t)e->slot;
	st->prev_seq = e->seq;
	if (e->seq > st->done)
		st->done = e->seq;
	if (st->done == st->launched)
		st->drained_ns = now_ns;
	st->head = (st->head + 1) % GL_RING;
	st->n--;
	st->gpu_ns += acc;
	return acc;
}

int gl_window_full(const struct gl_stream *st, const struct gl_params *p)
{
	uint64_t inflight = st->launched - st->done;

	if (inflight == 0)
		return 0;
	if (inflight >= p->max_inflight || st->n >= GL_RING - 2)
		return 1;
	if (inflight >= GL_LOG)
		return 1;
	/* launches with no estimate: a few, until they are measured */
	if (st->infl_unk >= GL_UNMEASURED)
		return 1;
	return st->infl_ns >= p->window_ns;
}

int gl_drained(const struct gl_stream *st)
{
	return st->launched == st->done;
}

int gl_idle_due(int all_drained, uint64_t last_submit_ns, uint64_t now_ns,
		uint64_t grace_ns)
{
	return all_drained && now_ns >= last_submit_ns &&
	       now_ns - last_submit_ns >= grace_ns;
}
