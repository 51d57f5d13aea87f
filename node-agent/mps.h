/*
 * mps.h — supervision of one MPS control daemon per GPU that has
 * space-mode allocations, or time-mode ones with time_mps (docs/space.md).
 *
 * The agent runs `<mps_control> -f` (foreground, so the agent is its
 * parent and sees its death at once through a pidfd on the loop) as the
 * uid it serves, in its own session, with CUDA_VISIBLE_DEVICES set to the
 * GPU and that user's own pipe and log directories,
 * <state_dir>/mps/<index>/<uid>/{pipe,log}, owned by the user, mode 0700
 * (root owns everything above them).  MPS runs one server per user per
 * GPU, so the first space allocation's uid owns the GPU's daemon while it
 * runs; no other user can reach its control socket, and since the daemon
 * is not root, nothing it creates in a directory the user controls can be
 * turned against root.  Allocations of other uids get no pipe directory
 * (they run outside MPS and take turns, see space.h).
 *
 * Life cycle per GPU: started when the first space allocation of the GPU
 * is created (before its job starts, so the job's first CUDA call finds
 * the daemon; also for allocations restored at start-up), stopped with
 * `echo quit | <mps_control>` mps_linger after the last one closed (one
 * of its user created sooner reuses it; one created while the quit runs
 * gets no pipe, and the next daemon starts when that one is gone;
 * SIGKILL if it has not exited 5 s after the quit), restarted when it
 * dies while wanted: at once, then with a doubling delay (0.1 s .. 5 s)
 * while it keeps exiting by itself within a second of its start (a
 * daemon killed by a signal — its user may kill it — is restarted after
 * 0.1 s and never counts);
 * after 5 such quick exits in a row the GPU is marked unhealthy (no new
 * allocations; existing ones and their usage stay) and the agent keeps
 * retrying every 5 s; a daemon that then stays up a second marks it
 * healthy again.  The agent's own shutdown leaves a
 * daemon that serves open allocations running (they outlive the agent in
 * its state file, and so do their jobs) and finishes only quits in
 * progress (bounded wait, then SIGKILL).  A daemon left running by an
 * agent that stopped or was killed is adopted by the next one (its record
 * <state_dir>/mps/<index>/daemon: pid, uid, process start time), watched
 * through a pidfd (it is not our child), and quit when no restored space
 * allocation of its user remains.
 *
 * With mps_pipe_dir set, a site's own MPS is used instead: the agent
 * starts nothing and hands that directory to every space allocation.
 *
 * Nothing here blocks the loop: a spawn waits only until the child has
 * exec'd, waits are pidfds and one timerfd; only gs_mps_free waits (at
 * most ~5 s, for a quit in progress).
 */
#ifndef GS_AGENT_MPS_H
#define GS_AGENT_MPS_H

#include <stdint.h>

#include "gs_error.h"
#include "gs_proto.h"

struct gs_agent;
struct gs_mps;

/* Observe the agent's allocation table and start daemons for the space
 * allocations already in it (restored ones). */
struct gs_mps *gs_mps_new(struct gs_agent *ag, struct gs_error *err);
/* Stop observing; leave daemons serving open allocations running for
 * the next agent, finish quits in progress (bounded); NULL: no-op. */
void gs_mps_free(struct gs_mps *m);

/* Fill info->mps_pipe for an allocation on GPU index gpu of uid: the
 * pipe directory when the allocation is a client of the GPU's MPS (mode
 * space, uid served, a daemon running), else "".  A job may start before
 * a just-spawned daemon made its socket; CUDA then runs it outside MPS
 * (docs/space.md, Limits). */
void gs_mps_info(struct gs_mps *m, int32_t gpu, uint32_t mode,
		 uint32_t uid, struct gs_alloc_info *info);
/* The same pipe directory, or NULL when the allocation runs outside MPS. */
const char *gs_mps_pipe(const struct gs_mps *m, int32_t gpu, uint32_t mode,
			uint32_t uid);

/* uid whose allocations are clients of GPU index gpu's MPS (the
 * space.h planner's mps_uid); GS_SPACE_NOUID-like UINT32_MAX: none
 * (no daemon wanted, or a site's own MPS). */
uint32_t gs_mps_uid(const struct gs_mps *m, int32_t gpu);

/* pid of GPU slot gpu's control daemon (0: none running); tests, status */
int gs_mps_pid(const struct gs_mps *m, uint32_t gpu);

#endif /* GS_AGENT_MPS_H */
