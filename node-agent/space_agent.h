/*
 * space_agent.h — space mode's planner on the agent's allocations
 * (space_agent.c): plans a GPU again after every allocation event there,
 * writes partitions into control pages, answers STATUS's space fields.
 * Loop thread only.
 */
#ifndef GS_AGENT_SPACE_AGENT_H
#define GS_AGENT_SPACE_AGENT_H

#include <stdint.h>

#include "alloc.h"
#include "gs_error.h"
#include "gs_proto.h"

struct gs_agent;
struct gs_mps;
struct gs_space_agent;

/* Observe the allocation table (after mps.c's observer, so a new
 * allocation's MPS uid is known when it is planned). */
struct gs_space_agent *gs_space_agent_new(struct gs_agent *ag,
					  struct gs_mps *mps,
					  struct gs_error *err);
void gs_space_agent_free(struct gs_space_agent *sa);

/* Fill info's sm_first, sm_count, space_why and mps_pct (after
 * gs_mps_info filled mps_pipe); nothing for time mode. */
void gs_space_agent_info(struct gs_space_agent *sa, const struct gs_alloc *a,
			 uint32_t shares_total, struct gs_alloc_info *info);

#endif /* GS_AGENT_SPACE_AGENT_H */
