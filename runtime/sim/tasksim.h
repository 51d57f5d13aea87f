/*
 * tasksim.h — a task pool (narrow tasks) on a simulated GPU: the host
 * TaskTable of libgshare (gs_tasktable.c) in front of a CPU model of the
 * MasterKernel, for gshare-simjob --tasks and the unit tests.
 *
 * The model makes the scheduling decisions of gs__tsched in
 * gshare_device.cuh, with the same code where the header has it in plain
 * C (gs__tres_take: warps, named barrier and shared-memory granules of a
 * task; gs__tpublished; gs__tredo_carry; the granule allocator) and the
 * same steps around it: each block of a launch claims up to GS__THELD
 * tickets, redo list first, then from the head counter against a copy of
 * the tail refreshed at most once a tick; reads published entries; starts
 * them in ticket order while resources allow; after a suspend starts
 * nothing, puts its held tickets in the redo list and leaves once its
 * running tasks are done; when idle and told to quit, it leaves with its
 * held tickets in the redo list.  The last block out carries the untaken
 * redo entries over.  The host side follows gs_task.c's queued mode: one
 * launch per token hold, quit once every task is retired.
 *
 * Time is counted in ticks: in one tick every block in the launch runs
 * one scheduler round, and a task runs the ticks it was spawned with.
 * Blocks run in turn on the calling thread, so the device's atomics are
 * plain updates; the race in which a block claims past the tail (its read
 * of the head is older than another block's claim) is played on purpose,
 * now and then, from a seeded generator.
 *
 * Every task is checked when it starts: its entry is its own, it never
 * ran before, and its warps, barrier and granules belong to no task still
 * running in the block.  Violations are counted with the first message.
 * Queued mode only (no standalone idle vote).  Not thread-safe.
 */
#ifndef GS_TASKSIM_H
#define GS_TASKSIM_H

#include <stdint.h>

#include "gs_error.h"

struct gs_tsim;

struct gs_tsim_cfg {
	unsigned int blocks;	/* simulated SMs (one block each) */
	unsigned int cap;	/* TaskTable entries (gs__tt_init) */
	unsigned int pool_bytes;	/* shared memory for tasks per SM */
	uint64_t max_tasks;	/* tasks spawned at most (checks) */
	uint64_t seed;		/* the claim race; 0: never race */
};

struct gs_tsim_stats {
	uint64_t spawned, completed;
	uint64_t launches, suspensions;
	uint64_t requeued;	/* tickets in the redo list at a launch */
	uint64_t ticks;		/* device ticks of all launches */
	uint64_t races;		/* claims made with a stale head */
	uint64_t errors;	/* broken rules seen (0 expected) */
	char first_error[160];
};

int gs_tsim_new(const struct gs_tsim_cfg *cfg, struct gs_tsim **out,
		struct gs_error *err);
void gs_tsim_free(struct gs_tsim *s);

/* Queue a task of `threads` threads and `shmem` bytes that runs `ticks`
 * ticks (>= 1), in `group`.  0 with *id; 1 when the table is full (run
 * holds until the oldest task is retired, then again); -1 with err on
 * bad arguments (the checks of gs_task_spawn). */
int gs_tsim_spawn(struct gs_tsim *s, unsigned int threads,
		  unsigned int shmem, unsigned int ticks, unsigned int group,
		  uint64_t *id, struct gs_error *err);

/* One token hold, in steps (gs_task.c's hold()):
 *   begin  retires; returns 1 when nothing is pending (no launch), else
 *          launches the MasterKernel and returns 0;
 *   step   the host's turn (retire unless suspended, quit once nothing
 *          is pending) and then, unless the launch has left, one device
 *          tick with the suspend flag `flag`; returns 1 once the launch
 *          has left (no tick was run), else 0;
 *   end    reaps the launch (its redo list becomes the next one's) and
 *          retires; *done: nothing pending; *tasks: tasks the launch
 *          completed; returns the launch's ticks. */
int gs_tsim_hold_begin(struct gs_tsim *s);
int gs_tsim_hold_step(struct gs_tsim *s, int flag);
uint64_t gs_tsim_hold_end(struct gs_tsim *s, int *done, uint64_t *tasks);

/* What waits test (after retiring). */
int gs_tsim_is_done(struct gs_tsim *s, uint64_t id);
uint64_t gs_tsim_pending(struct gs_tsim *s);
uint64_t gs_tsim_group_pending(struct gs_tsim *s, unsigned int group);
/* Oldest task not retired (what a spawn into a full table waits for). */
uint64_t gs_tsim_oldest(const struct gs_tsim *s);

/* How often task `id` ran (the test's exactly-once check). */
unsigned int gs_tsim_runs(const struct gs_tsim *s, uint64_t id);
/* Check the pool's books against the runs: every retired task ran once,
 * no task ran twice, a task whose done word is set ran, and each group's
 * pending count is its tasks not retired.  0, or -1 with err. */
int gs_tsim_audit(struct gs_tsim *s, struct gs_error *err);

const struct gs_tsim_stats *gs_tsim_stats(const struct gs_tsim *s);

#endif /* GS_TASKSIM_H */
