/*
 * space_sample.h — where space mode's classes come from (docs/space.md,
 * "Classification"): per GPU, what the GPU achieved over a window,
 * attributed to the space allocation that held the token alone for most
 * of it.  Loop thread only; owned by space_agent.c, which feeds it the
 * allocation events and turns the samples into classes.
 *
 * Sources, per GPU:
 *  - a real GPU: NVML's nvmlDeviceGetUtilizationRates (gpu.c): .gpu, the
 *    percent of the driver's sample period (1/6 s to 1 s) a kernel ran,
 *    stands for SM activity; .memory, the percent device memory was read
 *    or written, for DRAM bandwidth.  Windows of GS_SPACE_SAMPLE_NVML_MS,
 *    so that the driver's period lies inside one.  The query runs on the
 *    loop thread, like the accounting tick's NVML queries.
 *  - a simulated GPU: the simulated executors' activity counters
 *    (gs_ctlpage sim_sm_ns, sim_mem_ns: task time x the profile the job
 *    declares, gshare-simjob --profile) summed over every page of the
 *    GPU's allocations, per window of GS_SPACE_SAMPLE_MS; no reading
 *    when they did not move (no job there declares a profile).
 *
 * Attribution: the space allocation that was the scheduler's only holder
 * of the token (gs_sched_holders == 1: its time-mode slices, or a group
 * of one) for at least 3/4 of the window gets the window's reading as
 * one sample; windows where the GPU was contended, co-run or idle give
 * nobody anything.  The holder is looked at on every allocation event
 * (grants and releases change allocation states) and at every tick.
 *
 * Limits: device-wide counters cannot tell co-running clients apart, so
 * an allocation that never holds the GPU alone (always co-granted, or
 * always sharing slices with others under contention with windows of
 * 4 ms slices) stays unclassified; NVML's .gpu is kernel-running time,
 * not the SM occupancy DCGM's profiling metrics would give.
 */
#ifndef GS_AGENT_SPACE_SAMPLE_H
#define GS_AGENT_SPACE_SAMPLE_H

#include <stdint.h>

#include "alloc.h"
#include "gs_error.h"

#define GS_SPACE_SAMPLE_MS	250u	/* simulated GPUs' window */
#define GS_SPACE_SAMPLE_NVML_MS	1000u	/* real GPUs' window */

struct gs_agent;
struct gs_space_sample;

/* One sample of allocation id (percent, 0..100). */
typedef void (*gs_space_sample_fn)(void *ctx, uint64_t id, uint32_t sm_pct,
				   uint32_t mem_pct);

/* Registers a tick on the agent's loop; opens NVML for the agent's real
 * GPUs (without it they give no samples, logged once). */
struct gs_space_sample *gs_space_sample_new(struct gs_agent *ag,
					    gs_space_sample_fn fn, void *ctx,
					    struct gs_error *err);
void gs_space_sample_free(struct gs_space_sample *ss);
/* An allocation event (GS_AEV_*): the token's holders may have changed;
 * a closed allocation is forgotten. */
void gs_space_sample_event(struct gs_space_sample *ss, int event,
			   const struct gs_alloc *a);

/* An allocation's progress (the page's block-tasks, which libgshare
 * counts; jobs without it count none) while it held the token alone
 * and while it co-ran (holding beside others), with the time of each,
 * from its first event on the GPU (and, alone, the GPU time its pages
 * count: the rate alone is per second of its kernels' time, without
 * the hand-overs of taking turns); kept up to date at every allocation
 * event and tick.  The co-run part restarts at gs_space_sample_corun_reset
 * (its partition or partners changed). */
struct gs_space_rates {
	uint64_t solo_ns, solo_tasks;
	uint64_t solo_gpu_ns;	/* the GPU time it reported for them */
	uint64_t corun_ns, corun_tasks;
};

/* 0, or -1 when the allocation was never seen (out zeroed). */
int gs_space_sample_rates(struct gs_space_sample *ss, uint64_t id,
			  struct gs_space_rates *out);
void gs_space_sample_corun_reset(struct gs_space_sample *ss, uint64_t id);

#endif /* GS_AGENT_SPACE_SAMPLE_H */
