/*
 * health.h — periodic GPU health checks for gshared.
 *
 * gs_health_new starts one worker thread when the agent has GPUs that
 * NVML knows (none for simulated GPUs: their health changes only through
 * injected faults, GPU_FAULT).  Every GS_HEALTH_PERIOD_MS the worker asks
 * NVML about each GPU (gpu.c: the device is still found by UUID and a
 * cheap query does not say "lost"), stores the answers under a mutex and
 * signals an eventfd registered on the agent's loop; the loop thread then
 * applies them with gs_agent_gpu_health.  NVML calls that block stall
 * only the worker: the loop keeps serving and the GPU keeps its last
 * known state.  When NVML cannot be opened the agent runs without health
 * checks (logged once); *out is then NULL and 0 is returned.
 */
#ifndef GS_AGENT_HEALTH_H
#define GS_AGENT_HEALTH_H

#include "agent.h"
#include "gs_error.h"

#define GS_HEALTH_PERIOD_MS 500

struct gs_health;

int gs_health_new(struct gs_agent *ag, struct gs_health **out,
		  struct gs_error *err);
/* Stop the worker (waits up to 2 s for an NVML call in progress, then
 * leaves the thread behind), unregister, free.  NULL is a no-op. */
void gs_health_free(struct gs_health *h);

#endif /* GS_AGENT_HEALTH_H */
