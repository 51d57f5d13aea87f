/*
 * unman.h — GPU processes that bypass the launch gate ("unmanaged").
 *
 * A worker thread lists, every GS_UNMAN_PERIOD_MS, the compute processes
 * NVML sees on each (non-simulated) GPU with their latest SM utilization,
 * and reads for each its owner (the uid owning /proc/PID), its start time
 * and GSHARE_ALLOC from /proc/PID/environ.  The loop thread classifies
 * them against the allocation table:
 *   managed     the pid is attached to an allocation (SO_PEERCRED),
 *               whatever its environment says;
 *   unmanaged   GSHARE_ALLOC names an open allocation on that GPU whose
 *               uid owns the process (or which any uid may attach), and
 *               the pid never attached: the allocation's process that
 *               bypassed the gate;
 *   no owner    anything else (no GSHARE_ALLOC, an unknown or closed
 *               allocation, another user's allocation, another GPU).
 * The agent's own MPS servers (children of the control daemon it runs
 * for that GPU, mps.c) serve its allocations' jobs: they count nowhere.
 * Counts go to the allocation (a->unmanaged, shown by STATUS) and the GPU
 * (g->unmanaged: processes of no allocation); estimated GPU time (SM
 * utilization × period) goes to the metrics and, for allocations with
 * attached processes, to accounting as an estimate.
 *
 * Level 0 hold-back (config unmanaged_hold, default off): disengaged fair
 * queuing (NEON, LoGA §3.4) per GPU.  Every period each allocation's
 * virtual time advances by its GPU time (estimated for unmanaged
 * processes, reported for attached ones) scaled by total weight ÷ its
 * weight; the system time is the least virtual time of the allocations
 * that want the GPU; an allocation with unmanaged processes that is more
 * than unmanaged_ahead ahead of it while another allocation wants the GPU
 * gets its unmanaged processes stopped (SIGSTOP), and continued (SIGCONT)
 * once it is no more than half that ahead or nobody else wants the GPU.
 * Never root's processes, never processes of no allocation.  Every stop
 * and continue is logged.  Processes still stopped are continued when
 * the allocation closes, the policy is turned off, and the agent stops.
 *
 * Trust: the mapping trusts GSHARE_ALLOC only as far as the uid check
 * goes: a job can remove it (then its processes show as "no owner" and
 * are never held back) or name another allocation of the same user (then
 * that one is charged), never another user's.
 */
#ifndef GS_AGENT_UNMAN_H
#define GS_AGENT_UNMAN_H

#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "metrics.h"
#include "gs_error.h"

#define GS_UNMAN_PERIOD_MS 500

/* One compute process as the worker saw it. */
struct gs_unman_proc {
	uint32_t pid;
	uint32_t gpu;		/* index into the agent's GPU table */
	uint32_t sm_util;	/* percent, latest sample (0: none) */
	uint32_t uid;		/* owner of /proc/PID; (uint32_t)-1: gone */
	uint64_t alloc;		/* GSHARE_ALLOC, 0: none */
	uint64_t start;		/* start time, /proc/PID/stat field 22 */
	uint64_t mem;		/* device memory NVML lists for it
				 * (GS_GPU_MEM_UNKNOWN: no figure) */
	char state;		/* /proc/PID/stat field 3 ('T': stopped) */
	uint32_t ppid;		/* /proc/PID/stat field 4 */
};

/* What the classification needs of an allocation. */
struct gs_unman_owner {
	uint64_t id;
	int32_t gpu;		/* index into the agent's GPU table */
	uint32_t uid;
	int any_uid;
	const struct gs_attach *att;	/* attachments */
	unsigned natt;
};

enum gs_unman_class {
	GS_UNMAN_MANAGED = 0,
	GS_UNMAN_UNMANAGED = 1,	/* of the owner given */
	GS_UNMAN_NO_OWNER = 2,
};

/* Pure: the class of p given the allocation its GSHARE_ALLOC names (o,
 * NULL when there is no such open allocation). */
enum gs_unman_class gs_unman_classify(const struct gs_unman_proc *p,
				      const struct gs_unman_owner *o);
/* Pure: may p (class UNMANAGED) be held back?  Not root's. */
int gs_unman_holdable(const struct gs_unman_proc *p);

/* One allocation of a GPU in the fair-queuing step. */
struct gs_dfq_ent {
	uint64_t id;
	uint32_t weight;	/* >= 1 */
	uint64_t used_ns;	/* GPU time in the last period */
	int wants;		/* asks for the GPU (waiting, running, held) */
	int holdable;		/* has unmanaged processes it may stop */
	int fresh;		/* new: starts at the system time */
	uint64_t vt;		/* virtual time (kept across steps) */
	int stopped;		/* in: held now; out: held next period */
};

/* Pure: one period of disengaged fair queuing over e[0..n-1] of one GPU
 * (see the top of this file).  Updates vt and stopped; returns the
 * system time. */
uint64_t gs_unman_dfq_step(struct gs_dfq_ent *e, unsigned n,
			   uint64_t period_ns, uint64_t ahead_ns);

struct gs_unman;

/* Start the worker when the agent has GPUs that NVML knows; *out NULL
 * (and 0) otherwise (logged when NVML is there but unusable). */
int gs_unman_new(struct gs_agent *ag, struct gs_unman **out,
		 struct gs_error *err);
/* Continue every process still stopped, stop the worker, free. */
void gs_unman_free(struct gs_unman *u);

/* Estimated GPU time of allocation id's unmanaged processes since the
 * last call (accounting takes it at its tick); 0 when none. */
uint64_t gs_unman_take_estimate(struct gs_unman *u, uint64_t id);

/* Device memory NVML listed for pid on the agent's GPU table index gi in
 * the last period the loop took, into *bytes: 0, or -1 when the pid was
 * not listed there or NVML had no figure (also with u NULL).  The worker
 * lists every GPU's compute processes once a period for the unmanaged
 * check; accounting's memory cross-check reads the same list instead of
 * asking NVML again on the loop. */
int gs_unman_proc_mem(const struct gs_unman *u, uint32_t gi, uint32_t pid,
		      uint64_t *bytes);

/* Per GPU and allocation (struct gs_unman_row, metrics.h), for the
 * metrics.  Borrowed, valid until the next period's results are applied
 * (on the loop): copy them to keep them. */
unsigned gs_unman_rows(const struct gs_unman *u,
		       const struct gs_unman_row **out);

#endif /* GS_AGENT_UNMAN_H */
