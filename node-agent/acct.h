/*
 * acct.h — the agent's accounting tick: control-page counters → usage.
 *
 * The agent tells this module about allocations (open, attach, token
 * grants and releases, close); every tick (default 1 s) gs_acct_tick reads
 * each attached allocation's counters from its mapped control page — plain
 * loads, no syscall into the job, no disturbance of its GPU work — and
 * turns them into per-tick deltas and running totals:
 *   GPU time      the runtime's own kernel-span measurement (gpu_ns)
 *   held time     token time held (held_ns)
 *   share time    shares/100 x wall time, only while the allocation is busy
 *                 (waiting or running): an idle allocation saves nothing up
 *                 (LoGA §3.4)
 *   block-tasks, suspensions, eviction latency (sum, max, histogram).
 * A job that re-attaches to a re-adopted allocation after an agent crash
 * and marks its page `resumed` continues its old counters: the baseline is
 * then what the store already holds, so usage it had while the agent was
 * down is charged once, not lost and not doubled.
 * A holder that overran its slice past the grace period (the agent calls
 * gs_acct_escalate) is charged the whole time it held the token, not only
 * what it reported.  Allocations that never attach can be charged from
 * NVML per-process samples supplied by the agent's GPU module; such rows
 * and samples carry the estimate flag.
 * The result of a tick is one gs_store_batch for the store's writer
 * thread, and the in-memory totals that the metrics page exposes.
 * Threading: loop thread only.  No clocks are read here: callers pass
 * CLOCK_MONOTONIC (`mono`) and CLOCK_REALTIME (`real`) nanoseconds.
 */
#ifndef GS_ACCT_H
#define GS_ACCT_H

#include <stdint.h>

#include "gs_ctlpage.h"
#include "gs_error.h"
#include "gs_proto.h"
#include "store.h"

/* A job's GPU time report may lower its bill below the token time the
 * agent saw it hold by at most 1/GS_ACCT_REPORT_SLACK_DIV of that time
 * (docs/accounting.md); held time is billed at least as the agent saw
 * it. */
#define GS_ACCT_REPORT_SLACK_DIV	8u

/* What a job reports as GPU time is bounded, only so that no figure can
 * wrap a total or go negative in the store: a process's time counters
 * may run up to GS_ACCT_STREAMS_MAX times the wall time (the launch
 * gate adds up the spans of concurrent streams, docs/runtime.md), plus
 * a slack.  Pages (acct.c, bound_delta): over the row's age times its
 * processes, plus GS_ACCT_PAGE_SLACK_NS; block-tasks up to
 * GS_ACCT_TASKS_PER_NS a nanosecond of that, suspensions one a
 * microsecond.  A RELEASE: over its process's part of the hold, plus
 * GS_ACCT_RELEASE_SLACK_NS (gs_acct_report_cap). */
#define GS_ACCT_STREAMS_MAX	16u
#define GS_ACCT_PAGE_SLACK_NS	2000000000ull
#define GS_ACCT_RELEASE_SLACK_NS	2000000ull
#define GS_ACCT_TASKS_PER_NS	16u

static inline uint64_t
gs_acct_report_cap(uint64_t held_ns)
{
	uint64_t up = held_ns > UINT64_MAX / GS_ACCT_STREAMS_MAX ?
		      UINT64_MAX : held_ns * GS_ACCT_STREAMS_MAX;

	return up > UINT64_MAX - GS_ACCT_RELEASE_SLACK_NS ? UINT64_MAX :
	       up + GS_ACCT_RELEASE_SLACK_NS;
}

/* GPU time billed for a hold the agent saw last held_ns, whose processes
 * reported reported_ns: what they reported, but at least the held time
 * less 1/GS_ACCT_REPORT_SLACK_DIV (the job's own wake-up after the grant
 * and its release's way back, which a loaded node stretches).  Several
 * processes under one grant may report more than held_ns together.
 * Nondecreasing in held_ns. */
static inline uint64_t
gs_acct_bill_gpu(uint64_t held_ns, uint64_t reported_ns)
{
	uint64_t lo = held_ns - held_ns / GS_ACCT_REPORT_SLACK_DIV;

	return reported_ns > lo ? reported_ns : lo;
}

/* Upper bounds (seconds) of the eviction latency histogram buckets. */
#define GS_ACCT_EVICT_BUCKETS	12
extern const double gs_acct_evict_bounds[GS_ACCT_EVICT_BUCKETS];

struct gs_acct_meta {
	uint64_t agent_id;
	struct gs_labels labels;
	uint32_t uid;
	int32_t gpu;
	char gpu_uuid[GS_UUID_MAX];
	uint32_t shares, weight, priority, mode;
	uint32_t restored;	/* 1: the agent restored it from its state
				 * file after a restart: continue the row
				 * recovery kept open for this agent_id */
	uint64_t mem_limit;	/* device memory limit, bytes, 0: none */
	int64_t now_real;	/* CLOCK_REALTIME at the open (0: the real
				 * time gs_acct_open is given): with the
				 * row's start, the age its pages' counters
				 * may cover (a restored row's is older) */
};

/* One NVML per-process utilization sample (nvmlProcessUtilizationSample_t
 * reduced to what accounting uses). */
struct gs_proc_util {
	uint32_t pid;
	uint32_t sm_util;	/* percent */
	uint64_t ts_us;		/* CPU timestamp of the sample, us */
};

/* Fetch the samples of GPU `gpu` newer than since_us into out (at most
 * max); return their number or -1.  Provided by the GPU module. */
typedef int (*gs_acct_util_fn)(void *arg, int32_t gpu, uint64_t since_us,
			       struct gs_proc_util *out, unsigned max,
			       struct gs_error *err);

/* Per-GPU eviction latency histogram (cumulative buckets built at render
 * time from per-bucket counts). */
struct gs_acct_hist {
	int32_t gpu;
	uint64_t count[GS_ACCT_EVICT_BUCKETS + 1];	/* last: +Inf */
	uint64_t n;
	uint64_t sum_ns;
};

struct gs_acct;

/* store may be NULL (no persistence: tests, `-n`).  Keys and tick numbers
 * continue from what the store holds. */
int gs_acct_new(struct gs_store *store, struct gs_acct **out,
		struct gs_error *err);
void gs_acct_free(struct gs_acct *a);

/* A new allocation (ALLOC_CREATE).  When the store holds a row left open
 * by a crash for the same job/step/pod, uid and GPU it is re-adopted: its
 * totals continue.  A restored allocation (m->restored) continues the row
 * of its own id (gs_store_recover_keep). */
int gs_acct_open(struct gs_acct *a, const struct gs_acct_meta *m, int64_t real,
		 uint64_t mono, struct gs_error *err);
/* The job attached: counters are read from page from now on (the current
 * values are the baseline).  page stays mapped until gs_acct_detach or
 * gs_acct_close. */
int gs_acct_attach(struct gs_acct *a, uint64_t id,
		   const volatile struct gs_ctlpage *page, uint64_t mono);
/* Read the page a last time and stop reading it (job gone). */
void gs_acct_detach(struct gs_acct *a, uint64_t id, uint64_t mono);
/* The allocation is closed: final usage goes out with the next tick.
 * state: enum gs_store_state. */
int gs_acct_close(struct gs_acct *a, uint64_t id, uint32_t state,
		  int64_t real, uint64_t mono);
int gs_acct_set_params(struct gs_acct *a, uint64_t id, uint32_t shares,
		       uint32_t weight, uint32_t priority);
/* NVML's device memory figure for the allocation's attached process
 * (the agent's cross-check of the job-reported figures). */
void gs_acct_set_mem_nvml(struct gs_acct *a, uint64_t id, uint64_t bytes);
/* The allocation's labels changed (ALLOC_LABEL). */
int gs_acct_set_labels(struct gs_acct *a, uint64_t id,
		       const struct gs_labels *l);

/* Token events from the scheduler path. */
void gs_acct_hold(struct gs_acct *a, uint64_t id, uint64_t grant_mono);
/* Space mode: the fraction of the GPU's SMs (x GS_ACCT_PART_ONE) the
 * allocation's holds run on from now on (0 or GS_ACCT_PART_ONE: all);
 * the floor of what a hold is billed (the held time, less the report
 * slack) is scaled by it, as the job's space_gpu_ns is. */
#define GS_ACCT_PART_ONE 1000000u
void gs_acct_set_part(struct gs_acct *a, uint64_t id, uint32_t part_ppm);
/* reported_gpu_ns: GPU time the RELEASE reported for this hold. */
void gs_acct_unhold(struct gs_acct *a, uint64_t id, uint64_t mono,
		    uint64_t reported_gpu_ns);
/* The holder ignored a suspend past the grace period: from now on it is
 * charged the full wall time of this hold. */
void gs_acct_escalate(struct gs_acct *a, uint64_t id, uint64_t mono);

/* NVML estimates for allocations that never attach.  proc_root is where
 * /proc lives (tests point it elsewhere); a process belongs to allocation
 * N when its environment holds GSHARE_ALLOC=N. */
void gs_acct_set_util_source(struct gs_acct *a, gs_acct_util_fn fn,
			     void *arg, const char *proc_root);

/* Estimated GPU time (ns) of processes of allocation id that bypass
 * its attached runtime (unman.c): added to its usage at the next tick,
 * the row flagged as an estimate. */
void gs_acct_add_estimate(struct gs_acct *a, uint64_t id, uint64_t ns);

/* One tick: compute deltas since the last tick and return the batch to
 * store (*out NULL when there is nothing to write).  The caller submits
 * it to the store. */
int gs_acct_tick(struct gs_acct *a, uint64_t mono, int64_t real,
		 struct gs_store_batch **out, struct gs_error *err);
/* A batch could not be handed to the store (out of memory, writer not
 * started): rewrite every open allocation's row with the next tick so
 * totals stay durable.  (A batch the store took is never lost: it
 * retries until it commits.) */
void gs_acct_mark_dirty(struct gs_acct *a);

/* --- read side, for metrics and status --- */

struct gs_acct_view {
	struct gs_store_alloc row;	/* identity + totals */
	uint32_t active;		/* busy during the last tick */
	uint32_t attached;
	uint64_t mem_used;		/* device memory held at the last
					 * tick (0: not attached) */
	uint64_t mem_nvml;		/* NVML's figure for the attached
					 * process (0: none or not known) */
};

/* Borrowed arrays, valid until the next call into a. */
unsigned gs_acct_allocs(const struct gs_acct *a,
			const struct gs_acct_view **out);
unsigned gs_acct_hists(const struct gs_acct *a,
		       const struct gs_acct_hist **out);
uint64_t gs_acct_ticks(const struct gs_acct *a);
/* The final totals of allocation id, whose closing row the last tick
 * built (the row the store gets): 0, or -1 when that was another. */
int gs_acct_final(const struct gs_acct *a, uint64_t id, struct gs_usage *tot);

/* Pure helpers, exposed for the unit tests. */
struct gs_ctl_counters {
	uint64_t gpu_ns, held_ns, block_tasks, suspensions, last_evict_ns,
		evict_ns_sum, evict_ns_max, heartbeat_ns;
	uint64_t mem_used, mem_peak;	/* a gauge and its maximum */
	uint32_t state, resumed;
	uint64_t space_gpu_ns;	/* kernel time x partition fraction */
};
void gs_acct_read_page(const volatile struct gs_ctlpage *p,
		       struct gs_ctl_counters *c);
/* Deltas cur - prev, clamped at 0 (a counter that went backwards — a new
 * page after a re-attach — contributes nothing). */
void gs_acct_delta(const struct gs_ctl_counters *prev,
		   const struct gs_ctl_counters *cur, struct gs_usage *d);
/* Space mode (docs/accounting.md): a job's GPU time is its kernels' time
 * scaled by its partition's share of the SMs, which the runtime counts
 * in space_gpu_ns.  For mode space, replace d->gpu_ns with that
 * counter's delta, unless the job's runtime does not count it (both 0:
 * a runtime before space mode, whose kernels run on the whole GPU). */
void gs_acct_space_delta(uint32_t mode, const struct gs_ctl_counters *prev,
			 const struct gs_ctl_counters *cur,
			 struct gs_usage *d);
/* Device memory over a tick of dt_ns ending at cur: the most held (the
 * gauge now, or the page's peak when it rose since prev), byte-seconds
 * (the gauge held over the tick) and the time covered, into d. */
void gs_acct_mem(const struct gs_ctl_counters *prev,
		 const struct gs_ctl_counters *cur, uint64_t dt_ns,
		 struct gs_usage *d);
/* Distribute n evictions with latency sum `sum` and latest `last` into a
 * histogram. */
void gs_acct_hist_add(struct gs_acct_hist *h, uint64_t n, uint64_t sum,
		      uint64_t last);

#endif /* GS_ACCT_H */
