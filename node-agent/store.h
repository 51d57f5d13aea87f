/*
 * store.h — the durable usage store (SQLite, WAL) behind accounting.
 *
 * One database file holds a row per allocation (who, where, how much was
 * granted, totals so far, state) and a row per allocation per accounting
 * tick (usage deltas) so that reports can slice by time.  The schema
 * carries a version (PRAGMA user_version) and is brought up to date by a
 * table of migrations when the agent opens it; a file from a newer gshare
 * is refused.
 *
 * Two ways in:
 *  - the agent opens it read-write and starts the writer thread: every tick
 *    the loop hands over one batch (gs_store_submit never blocks on disk),
 *    the thread writes it in one transaction and reports completion through
 *    an eventfd that the loop polls (gs_store_event_fd, gs_store_reap);
 *  - gsacct opens it read-only and queries it; it works with the agent
 *    down.
 * Startup recovery (gs_store_recover) closes allocations left open by a
 * crash as NODE_FAIL and remembers them so a job that re-attaches gets its
 * old row back (gs_store_adopt).
 * Threading: a struct gs_store is used by one thread plus, when started,
 * its own writer thread; the batch queue is the only shared state.
 */
#ifndef GS_STORE_H
#define GS_STORE_H

#include <stdint.h>

#include "gs_error.h"
#include "gs_proto.h"

#define GS_STORE_SCHEMA_VERSION	3

/* Allocation states as stored (sacct's vocabulary). */
enum gs_store_state {
	GS_SST_RUNNING = 0,
	GS_SST_COMPLETED = 1,
	GS_SST_FAILED = 2,	/* job side died (crash of the job) */
	GS_SST_CANCELLED = 3,	/* closed by the agent (kill escalation) */
	GS_SST_NODE_FAIL = 4,	/* agent died while the allocation was open */
	GS_SST_TIMEOUT = 5,	/* the closer says: the job hit its time limit */
	GS_SST_MAX
};

/* Usage, all cumulative or all deltas depending on context. */
struct gs_usage {
	uint64_t gpu_ns;	/* GPU time used (charged) */
	uint64_t held_ns;	/* token time held */
	uint64_t share_ns;	/* guaranteed share x busy wall time */
	uint64_t wall_ns;	/* busy wall time (the share_ns base) */
	uint64_t block_tasks;
	uint64_t suspensions;
	uint64_t evict_ns_sum;
	uint64_t evict_ns_max;	/* a max, never a delta */
	uint64_t mem_max;	/* device memory, most held: a max too */
	uint64_t mem_byte_s;	/* device memory held x time, bytes x s
				 * (an 80 GiB card for a year fits) */
	uint64_t mem_ns;	/* the time mem_byte_s covers (attached) */
};

struct gs_store_alloc {
	uint64_t key;		/* store row id (the loop assigns it) */
	uint64_t agent_id;	/* allocation id inside the agent */
	struct gs_labels labels;
	uint32_t uid;
	int32_t gpu;
	char gpu_uuid[GS_UUID_MAX];
	uint32_t shares, weight, priority, mode;
	int64_t start_ns;	/* CLOCK_REALTIME ns */
	int64_t end_ns;		/* 0 while open */
	int64_t last_ns;	/* time of the last committed sample */
	uint32_t state;		/* enum gs_store_state */
	uint32_t estimate;	/* 1: usage estimated from NVML samples */
	struct gs_usage tot;
	uint64_t mem_limit;	/* device memory limit, bytes, 0: none */
};

struct gs_store_sample {
	uint64_t key;
	int64_t t_ns;		/* end of the tick, CLOCK_REALTIME */
	uint64_t dt_ns;		/* tick length */
	uint32_t estimate;
	struct gs_usage d;	/* deltas over the tick (evict_ns_max: max) */
};

/* One tick's writes, applied in one transaction.  Owned by the caller
 * until submitted; gs_store_submit takes it over. */
struct gs_store_batch {
	uint64_t tick;		/* tick sequence number, > 0 */
	int64_t t_ns;
	uint32_t nallocs, cap_allocs;
	struct gs_store_alloc *allocs;	/* rows to upsert (new/changed) */
	uint32_t nsamples, cap_samples;
	struct gs_store_sample *samples;
	/* the store's queue (set by gs_store_submit): no allocation there,
	 * so a batch the store is handed is never lost to memory */
	struct gs_store_batch *q_next;
	uint64_t q_since;	/* CLOCK_MONOTONIC ns it was queued */
};

struct gs_store_batch *gs_store_batch_new(uint64_t tick, int64_t t_ns);
void gs_store_batch_free(struct gs_store_batch *b);
/* Append copies; -1 with GS_ENOMEM. */
int gs_store_batch_add_alloc(struct gs_store_batch *b,
			     const struct gs_store_alloc *a,
			     struct gs_error *err);
int gs_store_batch_add_sample(struct gs_store_batch *b,
			      const struct gs_store_sample *s,
			      struct gs_error *err);

struct gs_store;

#define GS_STORE_RDONLY		1
#define GS_STORE_NOMIGRATE	2	/* writable, schema left as found
					 * (tests build old schemas) */

/* Open (and when writable create + migrate) the store at path. */
int gs_store_open(const char *path, int flags, struct gs_store **out,
		  struct gs_error *err);
void gs_store_close(struct gs_store *s);
int gs_store_version(struct gs_store *s, int *version, struct gs_error *err);

/* Migrate an open writable store up to `target` (tests use it to build
 * old schemas); gs_store_open migrates to GS_STORE_SCHEMA_VERSION. */
int gs_store_migrate(struct gs_store *s, int target, struct gs_error *err);

/* Next free allocation key (max(key)+1), read once at startup. */
int gs_store_next_key(struct gs_store *s, uint64_t *out,
		      struct gs_error *err);
/* Above every allocation id (agent_id) the store has seen. */
int gs_store_next_agent_id(struct gs_store *s, uint64_t *out,
			   struct gs_error *err);
/* Highest committed tick number (0 when none). */
int gs_store_last_tick(struct gs_store *s, uint64_t *out,
		       struct gs_error *err);

/* Close rows left open (end_ns = 0) as NODE_FAIL, end = their last
 * sample (or start), and keep them as adoption candidates, together with
 * rows an earlier recovery closed as NODE_FAIL that were active after
 * since_ns (a job that came back only after a second crash).  Returns the
 * number of rows closed now, or -1. */
int gs_store_recover(struct gs_store *s, int64_t since_ns,
		     struct gs_error *err);
/* Same, except that open rows whose agent_id is in keep[0..nkeep-1] (the
 * allocations the agent restored from its state file) stay open and wait
 * for gs_store_adopt_id; of several open rows with one id only the newest
 * is kept. */
int gs_store_recover_keep(struct gs_store *s, int64_t since_ns,
			  const uint64_t *keep, unsigned nkeep,
			  struct gs_error *err);
/* Before recovery: rows left open of allocations that were closed, their
 * close written to the agent's table file, when the agent died before
 * the final row committed.  Every open row whose agent_id is below
 * `below` (the loaded table's id counter; 0: no valid table, nothing
 * done) and not in known[] (every id the table holds) becomes COMPLETED,
 * ending at its last sample, with the totals committed so far.  Returns
 * the number of rows finished, or -1. */
int gs_store_finish_closed(struct gs_store *s, const uint64_t *known,
			   unsigned nknown, uint64_t below,
			   struct gs_error *err);
/* A restored allocation: when recovery kept an open row with this
 * agent_id, uid and GPU, fill *row with it (totals kept), forget it and
 * return 1; else 0. */
int gs_store_adopt_id(struct gs_store *s, uint64_t agent_id, uint32_t uid,
		      int32_t gpu, struct gs_store_alloc *row);
/* After gs_store_recover_keep: 1 when no open row of this agent_id was
 * kept but a final one exists (the allocation was closed and its row
 * committed before the agent died, the table file not yet rewritten). */
int gs_store_closed_id(struct gs_store *s, uint64_t agent_id);
/* A new allocation with these identity fields appeared: when it matches a
 * recovered row (same cluster, job, step, namespace, pod, container, uid
 * and GPU), fill *row with that row (state RUNNING, end 0, totals kept),
 * forget the candidate and return 1; else 0.  An allocation with neither
 * a job nor a pod label is never adopted (nothing identifies it).  The
 * caller writes the row back in its next batch. */
int gs_store_adopt(struct gs_store *s, const struct gs_labels *l,
		   uint32_t uid, int32_t gpu, struct gs_store_alloc *row);
unsigned gs_store_orphans(const struct gs_store *s);

/* Synchronous write of one batch on the caller's thread (tests, bench,
 * tools).  Takes ownership of b. */
int gs_store_write(struct gs_store *s, struct gs_store_batch *b,
		   struct gs_error *err);

/* Delete samples older than cutoff_ns, at most `limit` rows, and closed
 * allocations that ended before it and have no samples left.  *deleted
 * (may be NULL) gets the number of sample rows removed. */
int gs_store_purge(struct gs_store *s, int64_t cutoff_ns, unsigned limit,
		   unsigned *deleted, struct gs_error *err);

/* --- writer thread --- */

struct gs_store_done {
	uint64_t tick;		/* batch's tick */
	int ok;			/* 1 committed, 0 failed */
	uint64_t write_ns;	/* time spent in the transaction */
	unsigned purged;	/* sample rows purged after it */
	unsigned tries;		/* !ok: failed tries of this batch so far */
	int lost;		/* !ok: given up (only at a stop) */
	char msg[GS_ERRMSG_MAX];	/* error when !ok */
};

/* Start the writer thread.  retention_ns > 0 enables purging (one small
 * batch of at most purge_limit rows after each tick). */
int gs_store_start(struct gs_store *s, int64_t retention_ns,
		   unsigned purge_limit, struct gs_error *err);
/* Change the retention of a running writer (SIGHUP reload). */
void gs_store_set_retention(struct gs_store *s, int64_t retention_ns);
/* Readable (EPOLLIN) when completions wait; the loop then calls reap. */
int gs_store_event_fd(const struct gs_store *s);
/* Queue a batch; never waits for the disk.  Takes ownership of b (freed
 * even on error).  A batch whose write fails is kept and tried again
 * until it commits (each failed try is a completion with ok = 0); when
 * the disk is behind, new batches merge into the last waiting one, so
 * memory grows with the rows, not with the outage (store.c).  Fails only
 * before gs_store_start (GS_ESTATE). */
int gs_store_submit(struct gs_store *s, struct gs_store_batch *b,
		    struct gs_error *err);
/* Wait until every queued batch is written (at most timeout_ms; -1 on
 * timeout).  The agent uses it to make a close's final row durable
 * before it forgets the allocation. */
int gs_store_flush(struct gs_store *s, int timeout_ms);
/* When (CLOCK_MONOTONIC ns) the oldest batch not yet committed was
 * queued; 0 when everything is written.  How far the store is behind. */
uint64_t gs_store_oldest(struct gs_store *s);
/* Batches queued and not yet written. */
unsigned gs_store_queued(struct gs_store *s);
/* Collect up to max completions; returns how many. */
int gs_store_reap(struct gs_store *s, struct gs_store_done *out, int max);
/* Write what is queued, then stop the thread (SIGTERM path); a batch
 * that still fails after a few tries is given up (a completion with
 * lost = 1). */
void gs_store_stop(struct gs_store *s);

/* --- queries (gsacct) --- */

struct gs_store_filter {
	const char *const *jobs;	/* job ids ("42", "42.0", ns/pod...) */
	unsigned njobs;
	const uint32_t *uids;
	unsigned nuids;
	const char *const *accounts;
	unsigned naccounts;
	const uint32_t *states;
	unsigned nstates;
	int64_t start_ns;	/* rows running at or after (0: any) */
	int64_t end_ns;		/* rows started before (0: any) */
};

typedef int (*gs_store_alloc_cb)(void *arg, const struct gs_store_alloc *a);
typedef int (*gs_store_sample_cb)(void *arg, const struct gs_store_sample *s);

/* Rows matching f in (job, step, start) order; cb returning -1 stops. */
int gs_store_query(struct gs_store *s, const struct gs_store_filter *f,
		   gs_store_alloc_cb cb, void *arg, struct gs_error *err);
/* Samples of one allocation with t in [t0, t1] (0: unbounded), in time
 * order. */
int gs_store_samples(struct gs_store *s, uint64_t key, int64_t t0,
		     int64_t t1, gs_store_sample_cb cb, void *arg,
		     struct gs_error *err);
/* Sum of the samples of one allocation that end in (t0, t1] (a sample
 * covers the tick before its time; 0: unbounded). */
int gs_store_sum(struct gs_store *s, uint64_t key, int64_t t0, int64_t t1,
		 struct gs_usage *out, struct gs_error *err);

const char *gs_store_state_name(uint32_t st);
int gs_store_state_parse(const char *s, uint32_t *out);

#endif /* GS_STORE_H */
