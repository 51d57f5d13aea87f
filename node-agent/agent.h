/*
 * agent.h — the gshared node agent: listening socket, client connections,
 * per-GPU schedulers, control pages, signals, all on one gs_loop.
 *
 * Other agent modules (accounting, metrics) integrate through:
 *   gs_agent_loop()   register fds (gs_loop_add_fd) and periodic ticks
 *                     (gs_loop_add_tick) on the agent's loop;
 *   gs_agent_allocs() iterate allocations, observe create/state/close
 *                     (gs_alloc_observe);
 *   gs_agent_gpu()    per-GPU state, including the scheduler.
 * Everything runs on the loop's thread.
 */
#ifndef GS_AGENT_H
#define GS_AGENT_H

#include <stdint.h>

#include "alloc.h"
#include "config.h"
#include "gpu.h"
#include "gs_error.h"
#include "loop.h"
#include "sched.h"

struct gs_gpu {
	struct gs_gpu_desc d;
	uint32_t shares_total;
	uint32_t shares_used;	/* sum of guaranteed shares placed here */
	uint64_t mem_limits;	/* sum of the memory limits placed here */
	uint32_t nallocs;	/* allocations placed here (memory admission:
				 * one context reserve each) */
	int drained;		/* no new allocations */
	int healthy;		/* no health source says otherwise */
	int nvml_bad;		/* the health worker's last NVML check */
	int sim_fault;		/* injected fault (GPU_FAULT, simulated) */
	int xid_bad;		/* a critical XID was seen; sticky until
				 * root clears it (gsharectl gpu-ok) */
	int mps_bad;		/* its MPS control daemon keeps dying */
	char nvml_why[GS_LABEL_MAX];	/* why nvml_bad */
	char xid_why[GS_LABEL_MAX];	/* which XID */
	struct gs_sched *sched;
	uint64_t next_ns;	/* when the scheduler wants a step */
	uint64_t spin_until;	/* a hand-over is under way: the loop polls
				 * without sleeping until then (0: none) */
	uint64_t soon_id;	/* allocation sent TOKEN_SOON for it */
	uint64_t handoff_at;	/* begin the hand-over's polling then
				 * (a slow holder's drain; 0: none) */
	uint64_t handoff_end;	/* ... and poll until then */
	uint32_t unmanaged;	/* GPU processes of no allocation (unman.c) */
};

struct gs_agent;
struct gs_mps;

/* Set up everything (GPUs, schedulers, socket, signals) from cfg.
 * cfg_path is re-read on SIGHUP (NULL: reload keeps the config). */
struct gs_agent *gs_agent_new(const struct gs_agent_config *cfg,
			      const char *cfg_path, struct gs_error *err);
/* Run until SIGTERM/SIGINT.  Returns 0 on a clean stop. */
int gs_agent_run(struct gs_agent *ag, struct gs_error *err);
/* Close clients, remove the socket, free. */
void gs_agent_free(struct gs_agent *ag);

struct gs_loop *gs_agent_loop(struct gs_agent *ag);
/* The MPS daemons' supervisor (mps.c); NULL before it exists. */
struct gs_mps *gs_agent_mps(struct gs_agent *ag);
struct gs_alloc_table *gs_agent_allocs(struct gs_agent *ag);
const struct gs_agent_config *gs_agent_config(const struct gs_agent *ag);
uint32_t gs_agent_ngpus(const struct gs_agent *ag);
/* Connected clients (metrics). */
unsigned gs_agent_nclients(const struct gs_agent *ag);
struct gs_gpu *gs_agent_gpu(struct gs_agent *ag, uint32_t i);

/* Report the health of GPU slot i (0..ngpus-1) from one source: the
 * NVML health worker's checks or critical XIDs (health.c), or an injected
 * fault (GPU_FAULT, for simulated GPUs).  A GPU is healthy when no source
 * says otherwise; an unhealthy GPU takes no new allocations.  Transitions
 * are logged once.
 * why: reason when !ok (copied). */
enum gs_health_source { GS_HEALTH_NVML = 1, GS_HEALTH_FAULT = 2,
			GS_HEALTH_XID = 3, GS_HEALTH_MPS = 4 };
void gs_agent_gpu_health(struct gs_agent *ag, uint32_t i,
			 enum gs_health_source src, int ok, const char *why);
/* Drop allocation id, restored from the state file, that was in fact
 * closed before the restart (accounting found its usage row final): a
 * kill between the row's commit and the file's rewrite.  Only before any
 * job attached; observers are told CLOSED. */
void gs_agent_forget(struct gs_agent *ag, uint64_t id);
/* What STATUS tells operators now (gsharectl status prints it), "" for
 * nothing; copied, cut at GS_WARNING_MAX - 1 bytes. */
void gs_agent_set_warning(struct gs_agent *ag, const char *msg);
/* Run GPU index gpu's scheduler step from the loop soon (its co-grant
 * sets changed outside an allocation event: space mode's ticks). */
void gs_agent_gpu_kick(struct gs_agent *ag, int32_t gpu);
/* Accounting: the final usage row of an allocation closed just now goes
 * to the usage store with tick `tick`; the CLOSE's reply waits (a short
 * while) until gs_agent_usage_committed reports that tick or a later one
 * committed (ticks commit in order). */
void gs_agent_usage_queued(struct gs_agent *ag, uint64_t tick);
void gs_agent_usage_committed(struct gs_agent *ag, uint64_t tick);
/* Accounting: the final totals of allocation id's usage row, told while
 * the allocation is being closed; the CLOSE's reply carries them in
 * place of the agent's own count, so that the reply (a Slurm job's
 * AdminComment) and the usage store (gsacct) say the same. */
void gs_agent_close_totals(struct gs_agent *ag, uint64_t id, uint64_t gpu_ns,
			   uint64_t held_ns);
/* The allocation table loaded at start-up: every id it held (restored or
 * not; borrowed) and its id counter (*next_id 0: no valid table).  An
 * open usage row of an id below that counter and not in the table was
 * closed (the close reached the table file) just before the agent died. */
unsigned gs_agent_table_loaded(const struct gs_agent *ag,
			       const uint64_t **ids, uint64_t *next_id);
/* Reason a GPU is unhealthy ("" when healthy); borrowed. */
const char *gs_agent_gpu_why(const struct gs_gpu *g);

#endif /* GS_AGENT_H */
