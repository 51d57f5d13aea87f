/*
 * gs_tasktable.h — the host half of a task pool's TaskTable (Pagoda §4.2),
 * pure logic: no CUDA, no clocks, unit-tested everywhere.
 *
 * Tasks get tickets 0, 1, 2, ... in spawn order; ticket t lives in slot
 * t & (cap - 1) of the mirrored table and carries the sequence number
 * gs__tt_seq(t), which the GPU writes into the slot's done word when the
 * task has finished.  The host retires tickets in order (a slot is reused
 * only once its ticket is retired) and keeps per-group counts of tasks
 * not retired, so waits for a group or for everything are counter checks.
 * Not thread-safe: the pool's one driving thread owns it.
 */
#ifndef GS_TASKTABLE_H
#define GS_TASKTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "gs_error.h"

struct gs__ttab {
	uint32_t cap, mask;
	uint64_t next;		/* next ticket */
	uint64_t retired;	/* tickets below are done, slots free */
	uint32_t ngroups;
	uint32_t *group;	/* per slot: the group of its ticket */
	uint64_t *gpend;	/* per group: spawned, not retired */
};

/* cap: rounded up to a power of two in [1024, 1 << 22]; 0: 65536. */
int gs__tt_init(struct gs__ttab *t, uint32_t cap, uint32_t ngroups,
		struct gs_error *err);
void gs__tt_fini(struct gs__ttab *t);

/* Sequence number of a ticket as the GPU sees it (32 bits). */
static inline uint32_t gs__tt_seq(uint64_t ticket)
{
	return (uint32_t)ticket + 1u;
}

/* Take the next ticket for a task of `group`: 0, or -1 when the table is
 * full (retire first).  The caller fills slot ticket & mask, then
 * publishes. */
int gs__tt_reserve(struct gs__ttab *t, uint32_t group, uint64_t *ticket);

/* Retire finished tickets in order, reading done[] (one word per slot,
 * written by the GPU).  Returns how many were retired. */
uint64_t gs__tt_retire(struct gs__ttab *t, const volatile uint32_t *done);

/* 1 when ticket has finished (retired, or its done word says so). */
int gs__tt_is_done(const struct gs__ttab *t, const volatile uint32_t *done,
		   uint64_t ticket);

static inline uint64_t gs__tt_pending(const struct gs__ttab *t)
{
	return t->next - t->retired;
}

static inline uint64_t gs__tt_group_pending(const struct gs__ttab *t,
					    uint32_t g)
{
	return g < t->ngroups ? t->gpend[g] : 0;
}

/* Check the arguments of a spawn against the task rules and the pool:
 * threads a multiple of 32 in 32..max_threads, shmem <= pool_bytes,
 * args_size <= max_args and == the task's own argument size, group <
 * ngroups.  0, or -1 with err (GS_EINVAL). */
int gs__tt_check_spawn(unsigned int threads, size_t shmem,
		       size_t args_size, uint32_t task_args,
		       unsigned int group, unsigned int max_threads,
		       size_t pool_bytes, size_t max_args, uint32_t ngroups,
		       struct gs_error *err);

#endif /* GS_TASKTABLE_H */
