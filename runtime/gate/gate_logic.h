/*
 * gate_logic.h — the launch gate's decisions, pure (no driver calls, no
 * clock reads, no locks): unit-tested without a GPU (tests/gate).
 *
 * Window.  Per stream the gate counts launches submitted and launches
 * known complete; completion is learnt from events the gate records
 * after a batch of launches (an event covers every launch before it on
 * its stream).  Every launch is submitted with an estimate of its GPU
 * time: its kernel's (CUfunction, or CUgraphExec for a graph) moving
 * average from gl_fntab, else the stream's average per launch.  A
 * stream's window is full when the estimated work in flight (the sum of
 * the estimates of the launches submitted and not known complete)
 * reaches `window_ns`, or `max_inflight` launches are in flight, or
 * GL_UNMEASURED launches without any estimate; the gate then waits for
 * the oldest event before it submits more.  So the window is exceeded
 * by at most the one launch submitted last, and a suspend leaves at
 * most the running kernel plus about window_ns of queued work on the
 * GPU, whatever the mix of big and small kernels.  A batch ends at half
 * a window of estimated work (so that completions are learnt before the
 * queue runs dry) or max_batch launches; a kernel never seen before, or
 * one of a quarter window or more, is measured alone (an event before
 * and after it), so big kernels' estimates are exact and small ones'
 * come from batches of small ones.
 *
 * Accounting.  GPU time is the sum of event-to-event spans: the span
 * from the stream's previous completed event (or a start marker the gate
 * records before the first launch on a stream it has known drained for
 * at least `gap_ns`) to the next event.  So idle gaps shorter than about
 * gap_ns (a launch-bound job's host time between kernels) count as the
 * job's, longer ones do not.  Spans of different streams add up
 * (overlap counts twice).
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
#define GL_LOG 256		/* launches remembered per stream (power of 2) */
#define GL_FN_SLOTS 4096	/* kernels / graphs with an estimate */
#define GL_FN_PROBE 16
/* the key of device-to-host copies: the host is about to wait for the
 * stream, so the batch ends there (an event right after the copy), and
 * the host's pause that follows can be left out of the accounting */
#define GL_KEY_DTOH 1

/* Per-kernel duration estimates, keyed by CUfunction or CUgraphExec
 * (key 0: none, e.g. a copy).  Open addressing, bounded (a kernel that
 * finds no free slot within GL_FN_PROBE falls back to its stream's
 * average); safe to read and update from any thread without a lock
 * (keys are claimed with compare-and-swap, estimates are single words:
 * a racing update may be lost, never torn). */
struct gl_fntab {
	uint64_t key[GL_FN_SLOTS];
	uint64_t est[GL_FN_SLOTS];
};

struct gl_params {
	uint64_t window_ns;	/* queued GPU work allowed in flight */
	uint32_t max_inflight;	/* launches allowed in flight */
	uint32_t max_batch;	/* launches per event at most */
	uint64_t gap_ns;	/* idle this long: next span needs a start */
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
	uint64_t submit_ns;	/* last submission (gl_mark_submit), 0: none */
	/* per launch in flight (index: launch number % GL_LOG) */
	uint64_t lkey[GL_LOG];	/* its kernel / graph, 0: none */
	uint64_t lest[GL_LOG];	/* its estimate when submitted, 0: none */
	uint64_t infl_ns;	/* sum of lest over launches in flight */
	uint32_t infl_unk;	/* launches in flight without an estimate */
	uint32_t unev_unk;	/* unevented launches without an estimate */
	uint64_t unev_ns;	/* sum of lest over unevented launches */
};

void gl_params_default(struct gl_params *p);
void gl_stream_init(struct gl_stream *st);

/* Launches per event for this stream now. */
uint32_t gl_batch(const struct gl_stream *st, const struct gl_params *p);
/* Before a launch at now_ns: 1 if the gate should record a start marker
 * first: the stream is known drained and nothing was submitted to it for
 * gap_ns or longer (since its drain was noticed, when no submission was
 * marked), so the GPU idled at least since the previous event; or it has
 * no completed event to start a span.  The caller polls the stream's
 * events first when nothing was submitted for gap_ns. */
int gl_need_start(const struct gl_stream *st, const struct gl_params *p,
		  uint64_t now_ns);
/* After a launch that the driver accepted: 1 if an event should follow.
 * gl_launched is gl_launched_fn for a launch with no key, estimated at
 * the stream's average. */
int gl_launched(struct gl_stream *st, const struct gl_params *p);

/* Per-kernel estimates.  gl_fn_est: key's estimate, 0 when unknown
 * (*known: 1 when key has a slot with a measurement).  gl_fn_sample
 * folds one measured duration into key's moving average. */
void gl_fntab_init(struct gl_fntab *t);
uint64_t gl_fn_est(const struct gl_fntab *t, uint64_t key, int *known);
void gl_fn_sample(struct gl_fntab *t, uint64_t key, uint64_t ns);
/* The estimate to submit a launch of key with: the kernel's own, else
 * the stream's average per launch (0: nothing known). */
uint64_t gl_estimate(const struct gl_stream *st, const struct gl_fntab *t,
		     uint64_t key, int *known);
/* Before a launch estimated at est (known: the kernel's own): 1 when the
 * unevented launches before it should be covered by an event first, so
 * that the launch is measured alone (a kernel never seen, or one of a
 * quarter window or more). */
int gl_isolate(const struct gl_stream *st, const struct gl_params *p,
	       uint64_t key, uint64_t est, int known);
/* After a launch of key estimated at est that the driver accepted: 1 if
 * an event should follow (the launch is isolated, the batch holds
 * max_batch launches or half a window of estimated work, or 4 launches
 * without an estimate). */
int gl_launched_fn(struct gl_stream *st, const struct gl_params *p,
		   uint64_t key, uint64_t est, int known);
/* A submission to st at now_ns (for gl_need_start). */
void gl_mark_submit(struct gl_stream *st, uint64_t now_ns);
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
/* gl_pop that also shares the span among the kernels it covers, in
 * proportion to their estimates (equally when none has one), and folds
 * each share into the kernel's estimate in t (t NULL: none). */
uint64_t gl_pop_fn(struct gl_stream *st, uint64_t span_ns, uint64_t now_ns,
		   struct gl_fntab *t);
/* 1 when the stream's window is full (wait before submitting). */
int gl_window_full(const struct gl_stream *st, const struct gl_params *p);
/* 1 when every launch is known complete. */
int gl_drained(const struct gl_stream *st);

/* 1 when a holder should give the token back as idle: every stream is
 * drained (all_drained), nothing was submitted for grace_ns. */
int gl_idle_due(int all_drained, uint64_t last_submit_ns, uint64_t now_ns,
		uint64_t grace_ns);

#endif /* GATE_LOGIC_H */
