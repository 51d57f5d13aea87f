/*
 * gs_session.h — the job side of the token protocol: the host loop shared
 * by the GPU runtime (libgshare) and the simulated job (gshare-simjob).
 *
 * A session is an attached connection plus the mapped control page.
 * gs_session_run drives an executor: acquire the token (TOKEN_WANT, wait
 * for TOKEN_GRANT), let the executor run until it finishes or leaves the
 * GPU because the agent set SUSPEND, report TOKEN_RELEASE with the GPU
 * time used and the eviction latency, update the page's counters, and
 * repeat until the executor has no more work.  Only the executor differs
 * between the GPU and the simulation.
 *
 * The session outlives its agent: if the connection drops, acquire grants
 * the GPU locally ("standalone") and the job keeps running; the session
 * re-attaches to the same allocation at later scheduling points (see
 * gs_session_link) and carries its counters over to the new control page
 * (marked `resumed`), so usage is charged exactly once.
 * Not thread-safe; never prints.
 */
#ifndef GS_SESSION_H
#define GS_SESSION_H

#include <stdint.h>

#include "gs_ctlpage.h"
#include "gs_error.h"
#include "gs_mempage.h"

struct gs_session;

/* What one executor run did while holding the token. */
struct gs_run_result {
	int done;		/* 1: no work left; 0: left on suspend/iowait */
	uint32_t reason;	/* enum gs_release_reason when done == 0 */
	uint64_t gpu_ns;	/* GPU time used in this run */
	uint64_t block_tasks;	/* logical blocks completed in this run */
	uint64_t exit_ns;	/* CLOCK_MONOTONIC when the work had left the
				 * GPU (eviction latency = exit_ns -
				 * page->suspend_set_ns) */
	int released;		/* 1: the executor gave the token back
				 * itself (gs_session_release) before it
				 * returned: gs_session_run sends none.
				 * Given to gs_session_release: an early
				 * release, before the work left the GPU
				 * (its eviction latency comes with
				 * gs_session_evicted) */
};

struct gs_executor {
	/* Run while holding the token.  The executor must stop at its next
	 * scheduling point once page->suspend == GS_CTL_SUSPEND. */
	int (*run)(void *ctx, volatile struct gs_ctlpage *page,
		   struct gs_run_result *res, struct gs_error *err);
	/* Optional (may be NULL): called by gs_session_run after a run that
	 * left with reason GS_REL_IOWAIT, once the token is given back, to
	 * block until the executor has work again; then the loop asks for
	 * the token anew.  Returns 0, or -1 to end the loop with err. */
	int (*wait)(void *ctx, struct gs_error *err);
	/* Optional (may be NULL): after a run that finished its work while
	 * attached, return 1 to keep the token instead of releasing it
	 * (gs_session_run returns 0 holding it, "kept": the next
	 * gs_session_run runs at once, with no TOKEN_WANT).  Whoever keeps
	 * must give it back (gs_session_give_back) when the agent sets
	 * SUSPEND or another allocation contends, and on its own idle
	 * deadline. */
	int (*keep)(void *ctx, volatile struct gs_ctlpage *page);
};

/* Connect to `sock`, attach to allocation `alloc_id`, map the page. */
int gs_session_open(const char *sock, uint64_t alloc_id, int timeout_ms,
		    struct gs_session **out, struct gs_error *err);
/* Same, from GSHARE_SOCKET / GSHARE_ALLOC.  Returns 0 with *out = NULL
 * when neither is set (standalone mode); -1 when they are set but bad. */
int gs_session_open_env(int timeout_ms, struct gs_session **out,
			struct gs_error *err);
/* While the agent is away (RECONNECTING), close first makes one last try
 * to re-attach (at most ~250 ms), so a restarted agent is handed the
 * counters of the outage. */
void gs_session_close(struct gs_session *s);

/* Say what runs the job (enum gs_ctl_job_kind: libgshare, which keeps
 * to a partition, or the launch gate, which cannot): written into the
 * control page now and into every page of a later re-attach.  Space mode
 * plans a gated job alone (docs/space.md).  Call it right after open,
 * before the first acquire. */
void gs_session_set_kind(struct gs_session *s, uint32_t kind);

/* Borrowed; valid until gs_session_close.  After a re-attach (the agent
 * restarted) this is a new page; the earlier one stays mapped, but only
 * the new one is read by the agent: a caller that keeps the pointer (or
 * registered it with the GPU) must fetch it again when
 * gs_session_page_epoch changes. */
volatile struct gs_ctlpage *gs_session_page(struct gs_session *s);
/* The allocation's memory page (gs_mempage.h), mapped until
 * gs_session_close; NULL when the agent sent none (before protocol 1.9).
 * It stays the first attach's across re-attaches: a ledger that
 * reserves against it keeps counting there. */
volatile struct gs_mempage *gs_session_mempage(struct gs_session *s);
/* +1 every time the page changes (0 until the first re-attach). */
uint64_t gs_session_page_epoch(const struct gs_session *s);
uint64_t gs_session_alloc_id(const struct gs_session *s);
/* The UUID of the allocation's GPU as the agent reported it at ATTACH
 * ("GPU-…" or "MIG-…" from NVML, "SIM-…" for a simulated GPU, "" from an
 * agent that sent none).  Borrowed, valid until gs_session_close.  A job
 * must run on this GPU: the runtime compares it with the UUID of the
 * device it uses (gs__gpu_check in runtime/src/gs_rtlogic.h). */
const char *gs_session_gpu_uuid(const struct gs_session *s);

/* Low-level steps, for executors that need them.
 * acquire: sends TOKEN_WANT unless one is outstanding (after a SUSPENDED
 *   release the agent keeps the allocation waiting, so none is sent),
 *   sets the page state WAITING and blocks until TOKEN_GRANT (no timeout:
 *   a busy GPU may make a job wait long); GS_ESTATE if already holding.
 *   When the agent is away it returns at once with a standalone hold
 *   (see gs_session_link).  On return the page's state is RUNNING.
 * release: sends TOKEN_RELEASE for the held generation with r->gpu_ns,
 *   the eviction latency (r->exit_ns - page->suspend_set_ns when the
 *   suspend belongs to this grant and r->reason is GS_REL_SUSPENDED, else
 *   0) and the reason (r->done: GS_REL_IDLE), then updates the page's
 *   counters (gpu_ns, held_ns, block_tasks, suspensions, eviction
 *   latencies, releases, heartbeat, state).  GS_ESTATE if not holding.
 *   The counters are updated even when sending fails (the work was done).
 */
int gs_session_acquire(struct gs_session *s, struct gs_error *err);
int gs_session_release(struct gs_session *s, const struct gs_run_result *r,
		       struct gs_error *err);
int gs_session_holding(const struct gs_session *s);
/* unwant: after a release that left the allocation waiting (reason
 *   GS_REL_SUSPENDED, sent early: before the executor's work had left the
 *   GPU), the executor found nothing left to run: stop waiting
 *   (TOKEN_UNWANT; a grant that crossed it is taken back).  With an agent
 *   before 1.7 it takes that grant and gives it back idle.  No-op when
 *   not waiting or not attached; GS_ESTATE while holding. */
int gs_session_unwant(struct gs_session *s, struct gs_error *err);
/* After an early release (r->released given to gs_session_release with
 * reason GS_REL_SUSPENDED): the work has left the GPU at exit_ns; the
 * eviction latency (exit_ns - the suspend's suspend_set_ns) goes into
 * the page's counters.  No-op when no early release is pending. */
void gs_session_evicted(struct gs_session *s, uint64_t exit_ns);
/* Optional, while holding: publish the current run's progress so far
 * (cumulative for this grant: GPU time, block-tasks) to the page's
 * counters, so the agent's accounting sees a long run before it ends.
 * release then adds only what was not published yet.  Cheap (a few
 * atomic stores); GS_ESTATE if not holding. */
int gs_session_progress(struct gs_session *s, uint64_t gpu_ns,
			uint64_t block_tasks, struct gs_error *err);
/* Grant generation and slice length of the current (or last) grant. */
uint64_t gs_session_grant_gen(const struct gs_session *s);
uint64_t gs_session_slice_ns(const struct gs_session *s);

/* Link to the agent.
 * ATTACHED      connected; the agent schedules the job.
 * RECONNECTING  the connection dropped (agent killed, restarting): the
 *               job runs standalone, holding the GPU in slices of 50 ms,
 *               and re-attaches at scheduling points (acquire; progress
 *               ends a standalone slice) with backoff 10 ms .. 1 s; one
 *               try costs a connect and an ATTACH of at most 250 ms.
 * UNMANAGED     the agent came back without the allocation (ENOENT) or
 *               refuses it (EPERM): standalone for good, no more tries.
 * acquire, release and progress never fail because the agent went away
 * (only refusals by a live agent are errors). */
enum gs_session_link {
	GS_SESSION_ATTACHED = 0,
	GS_SESSION_RECONNECTING = 1,
	GS_SESSION_UNMANAGED = 2,
};
int gs_session_link(const struct gs_session *s);
/* Re-attaches so far (agent restarts survived). */
uint64_t gs_session_reattaches(const struct gs_session *s);
/* While RECONNECTING and not holding: try to re-attach now unless the
 * backoff says wait.  Returns the link state (acquire calls this). */
int gs_session_poll_link(struct gs_session *s);

/* The whole loop: returns 0 when the executor reports done (token given
 * back as idle, or kept: ex->keep), -1 on error.  When ex->run fails,
 * the token is given back (reason GS_REL_EXIT, with the time it
 * reported) and run's error is returned.  A kept token that the agent
 * has suspended meanwhile is given back first.  The GPU time and
 * block-tasks of the runs of one kept hold add up: the release (and
 * gs_session_progress) report the hold's total. */
int gs_session_run(struct gs_session *s, const struct gs_executor *ex,
		   void *ctx, struct gs_error *err);

/* A token kept between runs (ex->keep): 1 while kept.  While kept the
 * page's state is IDLE (nothing runs) and the session is holding. */
int gs_session_kept(const struct gs_session *s);
/* Give a kept token back, idle, with the hold's GPU time and
 * block-tasks (TOKEN_RELEASE, reason idle).  No-op when nothing is
 * kept. */
int gs_session_give_back(struct gs_session *s, struct gs_error *err);

#endif /* GS_SESSION_H */
