/*
 * gate_logic.h — the launch gate's decisions, pure (no driver calls, no
 * clock reads, no locks): unit-tested without a GPU (tests/gate).
 *
 * Window.  Per stream the gate counts launches submitted and launches
 * known complete; completion is learnt from events the gate records
 * after every `batch` launches (an event covers every launch before it
 * on its stream).  A stream's window is full when the work in flight
 * would exceed `window_ns` of GPU time (launches in flight times the
 * stream's measured GPU time per launch) or `max_inflight` launches
 * (GL_UNMEASURED until the stream's first span is measured); the
 * gate then waits for the oldest event before it submits more.  So a
 * suspend leaves at most the running kernel plus about window_ns of
 * queued work on the GPU.  The batch shrinks as launches get longer
 * (one event per launch for kernels of window_ns/2 or more) so that the
 * window is enforced at a fine grain where it matters and events cost
 * nothing where kernels are tiny.
 *
 * Accounting.  GPU time is the sum of event-to-event spans: the span
 * from the stream's previous completed event (or a start marker the gate
 * records before the first launch on a stream it has known drained for
 * long enough) to the next event.  Long enough is `gap_solo_ns` (the
 * token's idle grace) when no other stream of the process has work in
 * flight: the job held the GPU through that pause and nobody else could
 * use it, so the pause is the job's; it is `gap_ns` when another stream
 * is busy, whose spans already cover the time.  Spans of different
 * streams add up (overlap counts twice).
 *
 * Token.  gl_idle_due says when a holder with nothing in flight has been
 * quiet long enough to give the token back.
 *
 * The ring holds slot numbers; the caller keeps the events themselves in
 * an array of GL_RING per stream, indexed by slot.
 */
#ifndef GATE_LOGIC_H
#define GATE_LOGIC_H

#include <stdint.h>

#define GL_RING 32
#define GL_UNMEASURED 8		/* launches in flight before a first span */

struct gl_params {
	uint64_t window_ns;	/* queued GPU work allowed in flight */
	uint32_t max_inflight;	/* launches allowed in flight */
	uint32_t max_batch;	/* launches per event at most */
	uint64_t gap_ns;	/* idle this long while another stream is
				 * busy: the next span needs a start */
	uint64_t gap_solo_ns;	/* the same while no other stream is */
};

struct gl_ev {
	uint64_t seq;		/* launches covered (stream's count) */
	uint32_t slot;
	uint32_t start;		/* 1: start marker, recorded before seq+1 */
};

struct gl_stream {
	uint64_t launched;	/* launches submitted */
	uint64_t evented;	/* launches covered by the newest event */
	uint64_t done;		/* launches known complete */
	uint64_t est_ns;	/* GPU ns per launch (moving average), 0: none */
	uint64_t gpu_ns;	/* accounted GPU time on this stream */
	struct gl_ev ring[GL_RING];	/* outstanding events, oldest first */
	uint32_t head, n;
	int32_t prev_slot;	/* last completed event, -1: none */
	uint64_t prev_seq;
	uint32_t used;		/* slot bitmap: outstanding or prev */
	uint64_t drained_ns;	/* when the last launch was seen complete */
};

void gl_params_default(struct gl_params *p);
void gl_stream_init(struct gl_stream *st);

/* Launches per event for this stream now. */
uint32_t gl_batch(const struct gl_stream *st, const struct gl_params *p);
/* Before a launch at now_ns: 1 if the gate should record a start marker
 * first (the stream has been known drained for gap_ns or longer -- for
 * gap_solo_ns when others_busy is 0 --, or has no completed event, so
 * the previous event cannot start a span). */
int gl_need_start(const struct gl_stream *st, const struct gl_params *p,
		  int others_busy, uint64_t now_ns);
/* After a launch that the driver accepted: 1 if an event should follow. */
int gl_launched(struct gl_stream *st, const struct gl_params *p);
/* Launches not yet covered by an event. */
uint64_t gl_unevented(const struct gl_stream *st);
/* Reserve a slot for an event about to be recorded (start: marker).
 * Returns the slot, or -1 when the ring is full (wait for the oldest).
 * gl_unpush gives the newest slot back if the record failed. */
int gl_push(struct gl_stream *st, int start);
void gl_unpush(struct gl_stream *st);
/* Oldest outstanding event: its slot, or -1 when none. */
int gl_front(const struct gl_stream *st);
/* Slot of the event the front's span starts at (the previous completed
 * event), -1 when none or when the front is a start marker. */
int gl_span_start(const struct gl_stream *st);
/* The front event completed (seen at now_ns); span_ns is the time from
 * gl_span_start's event to it (ignored when there was none).  Returns
 * the GPU ns accounted for it. */
uint64_t gl_pop(struct gl_stream *st, uint64_t span_ns, uint64_t now_ns);
/* 1 when the stream's window is full (wait before submitting). */
int gl_window_full(const struct gl_stream *st, const struct gl_params *p);
/* 1 when every launch is known complete. */
int gl_drained(const struct gl_stream *st);

/* 1 when a holder should give the token back as idle: every stream is
 * drained (all_drained), nothing was submitted for grace_ns. */
int gl_idle_due(int all_drained, uint64_t last_submit_ns, uint64_t now_ns,
		uint64_t grace_ns);

#endif /* GATE_LOGIC_H */
