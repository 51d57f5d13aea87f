/*
 * memquota.h — device memory limits of allocations: the default limit a
 * site's `memory` policy gives, and memory admission (does a limit fit
 * beside the limits already placed on a GPU).  Pure arithmetic on the
 * config and a GPU's figures, so that the agent's hub only calls it and
 * the unit tests can reach every case.  Enforcement is the job side's
 * (the launch gate and libgshare read the limit in the control page);
 * the agent only decides the limit and reports usage.
 */
#ifndef GS_AGENT_MEMQUOTA_H
#define GS_AGENT_MEMQUOTA_H

#include <stdint.h>

#include "config.h"
#include "gs_error.h"

/* What one GPU offers to limits: its memory less the site's reserve
 * (0 when the memory is unknown or the reserve takes it all). */
uint64_t gs_mem_usable(const struct gs_agent_config *c, uint64_t mem_total);

/*
 * Settle the limit of a new allocation of `shares` on a GPU with
 * mem_total bytes (0: unknown) where nplaced allocations already hold
 * limits adding up to `placed`.  Every allocation also takes the
 * config's memory_context_reserve beside its limit (its CUDA context,
 * which no allocation call counts).  asked: the limit the job asked for,
 * 0: the site's default (proportional: shares/shares_per_gpu of the
 * usable memory, rounded down to a MiB, less the context reserve;
 * unlimited: no limit).  *limit = 0 means no limit.  Fails with
 *   GS_EINVAL  a limit asked for that, with its context reserve, exceeds
 *              the usable memory of the GPU (it could never be
 *              honoured), or one under 1 MiB;
 *   GS_EBUSY   a limit and its context reserve that do not fit beside
 *              `placed` and the placed allocations' reserves when
 *              memory_oversubscribe is off; shares too few to leave a
 *              MiB beside the context reserve.
 * A GPU whose memory is unknown takes any limit asked for unchecked and
 * gives no default.  Messages name the GPU `gpu` and the figures.
 */
int gs_mem_settle(const struct gs_agent_config *c, int32_t gpu,
		  uint64_t mem_total, uint64_t placed, uint32_t nplaced,
		  uint32_t shares, uint64_t asked, uint64_t *limit,
		  struct gs_error *err);

/* A byte count for messages, as the config writes sizes ("20G",
 * "1536M"; bytes when no unit divides it); returns buf. */
const char *gs_mem_str(uint64_t bytes, char *buf, unsigned len);

#endif /* GS_AGENT_MEMQUOTA_H */
