/*
 * alloc.h — gshared's allocation table.
 *
 * One record per allocation from ALLOC_CREATE to ALLOC_CLOSE, kept in id
 * order.  Ids are never reused: the agent restores records of its
 * previous run with their ids (gs_alloc_restore, from state.c's file) and
 * the counter continues above every id given before.  The table only
 * stores; the agent (agent.c) enforces admission and permissions and the
 * scheduler keeps the policy state.  Observers are told about creation,
 * state changes and closing (the accounting store hooks in here).
 * Iterate with gs_alloc_first/gs_alloc_next; do not add or remove
 * allocations while iterating.
 */
#ifndef GS_AGENT_ALLOC_H
#define GS_AGENT_ALLOC_H

#include <stdint.h>
#include <sys/types.h>

#include "gs_ctlpage.h"
#include "gs_error.h"
#include "gs_mempage.h"
#include "gs_proto.h"

struct gs_conn;

/* Processes of one job attached to one allocation at once (srun -n,
 * launcher and workers): ATTACH beyond this is refused (GS_EBUSY). */
#define GS_ALLOC_MAX_ATTACH 64u

/* One attached process.  Slots keep their control page for the
 * allocation's life: a process that attaches later takes the lowest free
 * slot and its page (like a re-attach, whose counters continue). */
struct gs_attach {
	struct gs_conn *conn;	/* NULL: slot free */
	pid_t pid;
	int ctl_fd;		/* memfd of this slot's page, -1: none */
	struct gs_ctlpage *page;	/* agent's own mapping */
	int wants;		/* sent TOKEN_WANT, not released idle */
	uint32_t kind;		/* the page's job_kind as the process first
				 * said it (0: not yet); later writes are
				 * not read, so a job that flips it cannot
				 * make its partners' partitions flap */
	int granted;		/* holds the current grant, no release yet */
	uint64_t grant_at;	/* when it got it */
	uint64_t capped;	/* its RELEASE reports cut to what the
				 * hold allows (gs_acct_report_cap) */
};

struct gs_alloc {
	uint64_t id;
	int32_t gpu;		/* index into the agent's GPU table */
	uint32_t shares, weight, priority, mode, uid;
	uint32_t flags;		/* GS_ALLOC_* (GS_ALLOC_ANY_UID) */
	struct gs_labels labels;
	uint64_t created_unix_ns;
	uint32_t state;		/* enum gs_alloc_state */
	int restored;		/* taken over from the previous agent run
				 * (state file), not created in this one */
	uint64_t mem_limit;	/* device memory limit, bytes, 0: none
				 * (req->mem_limit as the agent settled it) */
	uint64_t mem_req;	/* the limit the job asked for, 0: default */
	uint64_t mem_peak;	/* most device memory seen held (control
				 * pages), kept across re-attaches */

	/* attachments: the job's processes (att[0..natt-1], slots with a
	 * page; nattached of them have a connection) */
	struct gs_attach *att;
	unsigned natt, nattached;
	struct gs_conn *conn;	/* one attached connection, NULL: none */
	pid_t pid;		/* its pid (SO_PEERCRED), 0: none */
	int ctl_fd;		/* slot 0's page (att[0]), -1: none yet */
	struct gs_ctlpage *page;	/* slot 0's page, NULL: none yet */
	/* the memory page: the device memory all its processes hold
	 * together (gs_mempage.h), made with the first slot */
	int mem_fd;		/* -1: none yet */
	struct gs_mempage *mem;	/* agent's own mapping, NULL: none yet */

	/* token bookkeeping (the allocation holds the token; every
	 * attachment that wants it runs under the same grant) */
	uint64_t grant_gen;	/* last generation granted */
	int granted;		/* a grant is outstanding (no release yet) */
	uint64_t grant_at;	/* CLOCK_MONOTONIC of the last grant */
	int suspending;		/* SUSPEND written for this grant */
	uint64_t grant_gpu_ns;	/* GPU time the releases of this grant
				 * reported so far */
	uint64_t grant_gpu_max_ns;	/* the largest of them: what the
					 * scheduler charges against (several
					 * processes run side by side in one
					 * hold, their sum exceeds it) */
	int grant_suspended;	/* one of them left on a suspend */
	int grant_escalated;	/* this grant was escalated */
	/* control fields, mirrored into every slot's page */
	uint32_t ctl_suspend;
	uint64_t ctl_deadline_ns, ctl_suspend_set_ns;
	uint64_t evict_est_ns;	/* suspend -> release as the agent saw it,
				 * smoothed (3/4 old, 1/4 new); 0: none
				 * yet (the hand-over's timing) */

	/* usage, as the agent saw it */
	uint64_t gpu_ns;	/* billed: per grant, the RELEASE reports,
				 * at least 7/8 of the hold (gs_acct_bill_gpu) */
	uint64_t reported_gpu_ns;	/* sum of RELEASE gpu_ns */
	uint64_t held_ns;	/* grant → release */
	uint32_t end_state;	/* enum gs_end_state, from ALLOC_CLOSE */
	uint64_t suspensions;	/* releases after a suspend */
	uint64_t escalations;
	uint64_t last_evict_ns;

	/* GPU processes of this allocation that bypass the gate (unman.c,
	 * refreshed every period) */
	uint32_t unmanaged, unmanaged_held;
};

enum gs_alloc_event {
	GS_AEV_CREATED = 1,
	GS_AEV_STATE = 2,	/* state, attachment or weights changed */
	GS_AEV_CLOSED = 3,	/* called before the record is freed */
	/* a CLOSE was checked and its table is about to be written:
	 * accounting queues the usage so far (the table write waits, a
	 * short while, for its commit: see agent.c, durable requests) */
	GS_AEV_CLOSING = 4,
};

typedef void (*gs_alloc_observer_fn)(void *ctx, int event,
				     const struct gs_alloc *a);

struct gs_alloc_table;

struct gs_alloc_table *gs_alloc_table_new(void);
/* Frees every record (unmaps pages, closes fds); no observer calls. */
void gs_alloc_table_free(struct gs_alloc_table *t);

/* Up to 4 observers.  An observer freed before the table must
 * unobserve first: the agent's shutdown still changes states. */
int gs_alloc_observe(struct gs_alloc_table *t, gs_alloc_observer_fn fn,
		     void *ctx);
void gs_alloc_unobserve(struct gs_alloc_table *t, gs_alloc_observer_fn fn,
			void *ctx);
void gs_alloc_notify(struct gs_alloc_table *t, int event,
		     const struct gs_alloc *a);

/* New record with the next id, fields from req (weight and memory
 * limit already resolved by the caller); state CREATED.  NULL on out of memory. */
struct gs_alloc *gs_alloc_add(struct gs_alloc_table *t,
			      const struct gs_alloc_req *req,
			      uint64_t now_unix_ns);
/* Put back a record of the previous agent run with its own id (the
 * state file, at start-up): ids must come in increasing order, above
 * every record already present; the id counter moves past it.  No
 * observer is told (none is registered yet).  NULL on out of memory or
 * an id out of order. */
struct gs_alloc *gs_alloc_restore(struct gs_alloc_table *t, uint64_t id,
				  const struct gs_alloc_req *req,
				  uint64_t created_unix_ns);
/* The id the next gs_alloc_add gives; set_next_id only raises it. */
uint64_t gs_alloc_next_id(const struct gs_alloc_table *t);
void gs_alloc_set_next_id(struct gs_alloc_table *t, uint64_t id);
/* Borrowed, or NULL. */
struct gs_alloc *gs_alloc_get(struct gs_alloc_table *t, uint64_t id);
/* Notify CLOSED, unmap/close the page, free the record. */
void gs_alloc_remove(struct gs_alloc_table *t, uint64_t id);

struct gs_alloc *gs_alloc_first(struct gs_alloc_table *t);
/* The allocation with the smallest id greater than id, or NULL (ids
 * ascend along first/next). */
struct gs_alloc *gs_alloc_after(struct gs_alloc_table *t, uint64_t id);
struct gs_alloc *gs_alloc_next(struct gs_alloc_table *t,
			       const struct gs_alloc *a);
unsigned gs_alloc_count(const struct gs_alloc_table *t);

/* Create the control page for a (memfd, GS_CTL_SIZE, header written,
 * sealed against resizing), map it in a->page (slot 0). */
int gs_alloc_make_page(struct gs_alloc *a, uint32_t gpu_index,
		       uint64_t now_ns, struct gs_error *err);
/* A free attachment slot with its page: the lowest free one (its page
 * kept), or a new one with a new page.  Returns the slot index, or -1:
 * GS_EBUSY when GS_ALLOC_MAX_ATTACH are attached, GS_ENOMEM/GS_EIO. */
int gs_alloc_attach_slot(struct gs_alloc *a, uint32_t gpu_index,
			 uint64_t now_ns, struct gs_error *err);

/* Slot k's process has gone (or detached): take its page's mem_used out
 * of the memory page's counter (never below 0: a figure the process
 * wrote larger than what it added, or an allocation in flight at a kill,
 * takes no more than the counter holds) and zero the page's gauge for
 * the next process there.  Returns the bytes taken out. */
uint64_t gs_alloc_mem_gone(struct gs_alloc *a, unsigned k);

/* Device memory the job reports holding now (the sum over its slots'
 * pages), and the most it held as far as the agent can tell (see
 * alloc.c); job-written figures, 0 without a page.  mem_peak also
 * updates a->mem_peak. */
uint64_t gs_alloc_mem_used(const struct gs_alloc *a);
uint64_t gs_alloc_mem_peak(struct gs_alloc *a);

/* Fill the wire view of a. */
void gs_alloc_to_info(const struct gs_alloc *a, struct gs_alloc_info *out);

#endif /* GS_AGENT_ALLOC_H */
