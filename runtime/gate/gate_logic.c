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
	p->gap_ns = 100000;		/* 100 us */
	p->gap_solo_ns = 2000000;	/* the token's idle grace, 2 ms */
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
		  int others_busy, uint64_t now_ns)
{
	uint64_t gap = others_busy ? p->gap_ns : p->gap_solo_ns;

	/* drained, nothing recorded since, and idle long enough (or never
	 * measured): the next span needs a start */
	if (st->n != 0 || st->launched != st->done ||
	    st->evented != st->launched)
		return 0;
	return st->prev_slot < 0 || now_ns < st->drained_ns ||
	       now_ns - st->drained_ns >= gap;
}

int gl_launched(struct gl_stream *st, const struct gl_params *p)
{
	st->launched++;
	return st->launched - st->evented >= gl_batch(st, p);
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
	if (!start)
		st->evented = st->launched;
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

uint64_t gl_pop(struct gl_stream *st, uint64_t span_ns, uint64_t now_ns)
{
	struct gl_ev *e;
	uint64_t acc = 0, nl;

	if (st->n == 0)
		return 0;
	e = &st->ring[st->head];
	if (!e->start && st->prev_slot >= 0) {
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
	/* nothing measured yet: a few launches, until the first span */
	if (st->est_ns == 0)
		return inflight >= GL_UNMEASURED;
	return inflight * st->est_ns > p->window_ns;
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
