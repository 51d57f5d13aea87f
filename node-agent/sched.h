/*
 * sched.h — per-GPU token scheduler: a pure module, no I/O, no clocks.
 *
 * The agent owns one struct gs_sched per GPU and feeds it events with the
 * current CLOCK_MONOTONIC time; gs_sched_step returns what the agent must
 * do (grant the token, ask the holder to suspend, escalate a holder that
 * ignores a suspend) and when it wants to be called again.
 *
 * Guarantee first, weight second (DESIGN §3): an entry added with shares
 * is guaranteed shares/shares_total of the GPU's wall time while it wants
 * the GPU; weight only divides the rest (what no competing entry
 * guarantees, or idle entries leave).  Its effective weight, recomputed
 * whenever the competing set changes (O(n)), is that fraction:
 *   ew = shares/total + (total - sum of competing shares)/total *
 *        weight / (sum of competing weights)
 * and virtual time is GPU time divided by it (normalized: an entry that
 * receives exactly its due advances one ns per ns).  WFQ over these
 * weights gives every competing entry at least its guarantee.  Under the
 * priority policies each competing entry is also *owed* its guarantee:
 * owed += dt * shares/total, the holder pays the wall time it holds,
 * clamped to [0, max(50 ms, 4 slices)]; idle, escalation and a policy
 * change reset it.  A waiter owed a slice or more ("due") runs before
 * any entry that is not, whatever its priority; a holder with owed time
 * left ("protected") is not preempted by a higher priority or a
 * returner (below) until it is used up.  Priority orders only the rest.
 * Entries added with gs_sched_add (no shares) have no guarantee: with
 * none anywhere, this is plain WFQ by weight.
 *
 * Charging: the scheduler charges what it observed, the wall time from
 * grant to release; the job's reported gpu_ns may lower that by at most
 * min(held/GS_SCHED_REPORT_SLACK_DIV, GS_SCHED_REPORT_SLACK_NS) per
 * grant (the signalling between grant, kernels and release), and raise
 * it by at most held + GS_SCHED_REPORT_UP_NS (the tail of an earlier
 * early release, which a libgshare job reports with its next release:
 * its blocks ran after the token went back; an over-report costs only
 * the job that makes it), never more (gs_sched_charge).
 *
 * Policies (DESIGN §3):
 *  - WFQ: virtual time per allocation; the active allocation with the least
 *    vtime runs next; a release charges the used time / effective weight; an
 *    allocation that becomes active starts at max(own vtime, min vtime of
 *    the active set) so idling saves nothing up (GLoop §5.3, LoGA §3.4),
 *    except after an idle gap shorter than idle_grace_ns (below).
 *    Work-conserving: a lone active allocation keeps the token with no
 *    suspends at all.
 *  - PRIORITY: the highest priority class that is active runs, WFQ within
 *    the class; an arriving higher class preempts the holder at once.
 *  - DYNAMIC_PRIORITY: like PRIORITY, but a waiting allocation's effective
 *    priority rises by one class per `aging_ns` waited (EffiSha §7), so
 *    nothing starves.
 *  - Non-cooperation: a holder that has not released `grace_ns` after a
 *    suspend was asked is charged for the whole time it held the token and
 *    escalated (GS_ACT_ESCALATE); with HOLD it is then held back (not
 *    granted) for its overrun while others want the GPU (below); KILL
 *    leaves the kill to the agent.
 *
 * Refinements (sched.c implements exactly this):
 *  - Slices: a grant lasts slice_ns.  At slice end the holder is asked to
 *    suspend only if a waiter should run before it (higher effective
 *    priority, or same priority and vtime <= the holder's vtime projected
 *    with the time held so far); otherwise the slice is silently extended
 *    (no action, no new grant generation).  With no waiter at all the
 *    holder is never suspended (work-conserving).
 *  - Virtual time is kept per priority class (WFQ: one class); the
 *    activation reset uses the class's floor, the least (projected) vtime
 *    of its active entries, never going backwards; when a class empties
 *    the floor keeps the last leaver's vtime.  Weight changes affect only
 *    future charges.
 *  - Idle grace: a holder that releases as idle and wants again less than
 *    idle_grace_ns later (a job that synchronizes: its kernels finished,
 *    the next ones follow microseconds later) keeps its own vtime instead
 *    of the activation reset, bounded: it starts no further below the
 *    floor than max(its lag when it went idle — how far below the least
 *    vtime of the others in its class it was, earned while active — and
 *    idle_grace_ns of its own GPU time), so it banks at most the grace's
 *    worth beyond its lag and many short gaps save nothing up.  Until its
 *    next grant it preempts at once a holder of its class whose projected
 *    vtime is >= its own (the allocation that filled the gap) instead of
 *    waiting for that holder's slice end.  Gaps of idle_grace_ns or more,
 *    idle releases of escalated holders, a class change, a policy change
 *    and idle_grace_ns = 0 get the plain activation reset.
 *  - PRIORITY / DYNPRIO preempt at once only when a waiter's static
 *    priority beats the holder's; DYNPRIO ages waiters by one class per
 *    aging_ns waited (aging_ns 0: slice_ns), capped at GS_SCHED_BOOST_MAX,
 *    and compares aged priorities at slice end; a grant resets the aging.
 *    Priorities above GS_SCHED_PRIO_MAX are clamped.
 *  - Escalation revokes the token: the scheduler no longer counts the
 *    overrunner as holder and may grant another allocation in the same
 *    step (the agent enforces: KILL kills the process, HOLD relies on the
 *    job's kernels draining).  Its late RELEASE charges the rest of the
 *    held time (the reported gpu_ns is ignored); it is then held back —
 *    not granted while any other allocation is eligible — for as long as
 *    it overran (suspend request to release); when the hold-back ends
 *    its vtime is raised to the least vtime of the others in its class
 *    (as after an idle period), so the time they got meanwhile is not
 *    owed back to it.  A hold-back never idles the GPU: with nobody else
 *    eligible it may run.
 *  - gs_sched_set_params with another policy starts a new fairness epoch:
 *    every entry's vtime is set to the largest one (and the holder's
 *    grant so far is not charged again), so vtimes built under the old
 *    policy's classes cause no burst under the new one.
 *  - Co-grant sets (space mode, docs/space.md): entries given the same
 *    nonzero key with gs_sched_set_group are one schedulable unit.  The
 *    token goes to the best waiter as above; every other waiter of its
 *    set (competing, not serving a hold-back) is granted at once with
 *    it (one GRANT each, same slice end), and a member that starts
 *    wanting while its set holds the token, not suspending, joins it
 *    for the rest of the slice.  The set holds the token until its last
 *    member releases; it is compared with waiters through its member
 *    most behind (the order of `better`: the lead, gs_sched_holder),
 *    suspended as one (a SUSPEND for every holder) and extended as one.
 *    Each holder runs with part = its effective weight / the sum of the
 *    holders' (1 alone) and is charged wall time x part / its effective
 *    weight, so every holder's vtime advances by wall time / the set's
 *    summed weight, and the set as a unit gets that sum of the GPU's
 *    time: each member gets at least its guarantee (its weight's part of
 *    the set's time), whatever the partition sizes.  Under the priority
 *    policies a holder pays owed at wall time x part; the set is
 *    protected while any holder is.  Time mode: sets of one.
 *  - Call gs_sched_step after every event and whenever *next_ns passes.
 *    All calls are O(n) in the number of entries and allocate nothing
 *    except gs_sched_new and gs_sched_add (array growth).
 */
#ifndef GS_SCHED_H
#define GS_SCHED_H

#include <stdint.h>

enum gs_policy { GS_POLICY_WFQ = 0, GS_POLICY_PRIORITY = 1,
		 GS_POLICY_DYNPRIO = 2 };
enum gs_escalation { GS_ESC_HOLD = 0, GS_ESC_KILL = 1 };

#define GS_SCHED_WEIGHT_SCALE	100u	/* vtime += gpu_ns * 100 / w */
#define GS_SCHED_PRIO_MAX	31u	/* larger priorities are clamped */
#define GS_SCHED_BOOST_MAX	32u	/* DYNPRIO aging cap (classes) */
/* a release's reported GPU time may lower the charge below the held wall
 * time by held/16, at most 250 us, and raise it by held + 2 ms
 * (gs_sched_charge) */
#define GS_SCHED_REPORT_SLACK_DIV	16u
#define GS_SCHED_REPORT_SLACK_NS	250000ull
#define GS_SCHED_REPORT_UP_NS		2000000ull

struct gs_sched_params {
	uint32_t policy;	/* enum gs_policy */
	uint64_t slice_ns;	/* default 4 ms */
	uint64_t grace_ns;	/* suspend → escalate */
	uint32_t escalation;	/* enum gs_escalation */
	uint64_t aging_ns;	/* dynamic priority: wait per class boost */
	uint64_t idle_grace_ns;	/* short idle gaps keep the vtime (0: off) */
	uint32_t shares_total;	/* shares of the whole GPU (0: 100) */
};

enum gs_sched_act_kind {
	GS_ACT_GRANT = 1,	/* give id the token for slice_ns */
	GS_ACT_SUSPEND = 2,	/* write SUSPEND into id's control page */
	GS_ACT_ESCALATE = 3,	/* id ignored a suspend past the grace */
};

struct gs_sched_action {
	uint32_t kind;		/* enum gs_sched_act_kind */
	uint64_t id;
	uint64_t slice_ns;	/* GRANT: slice length */
};

struct gs_sched_entry_info {
	uint64_t vtime_ns;
	uint64_t gpu_ns;	/* charged GPU time */
	uint32_t active;	/* wants the GPU */
	uint32_t holding;	/* holds the token */
	uint32_t suspending;	/* told to suspend, not released yet */
	uint32_t held_back;	/* escalated, waiting out its overrun */
	uint32_t eff_priority;
	uint64_t owed_ns;	/* guaranteed time owed (priority policies) */
	uint32_t rate_ppm;	/* effective weight: GPU fraction x 1e6 */
	uint64_t group;		/* co-grant set key (0: alone) */
	uint32_t part_ppm;	/* holding: its part of the GPU x 1e6 */
};

struct gs_sched;

/* Defaults: WFQ, 4 ms slices, 100 ms grace, HOLD, aging = slice, 2 ms
 * idle grace. */
void gs_sched_params_default(struct gs_sched_params *p);

/* NULL on out of memory. */
struct gs_sched *gs_sched_new(const struct gs_sched_params *p);
void gs_sched_free(struct gs_sched *s);
/* Change parameters (SIGHUP reload) keeping every entry. */
void gs_sched_set_params(struct gs_sched *s, const struct gs_sched_params *p);

/* Entries: id unique per scheduler.  add returns -1 on duplicate id or
 * out of memory. weight >= 1.  add_shares: guaranteed shares (of
 * shares_total); add: none (weight only). */
int gs_sched_add_shares(struct gs_sched *s, uint64_t id, uint32_t shares,
			uint32_t weight, uint32_t priority, uint64_t now);
int gs_sched_add(struct gs_sched *s, uint64_t id, uint32_t weight,
		 uint32_t priority, uint64_t now);
int gs_sched_set_shares(struct gs_sched *s, uint64_t id, uint32_t shares);
void gs_sched_remove(struct gs_sched *s, uint64_t id, uint64_t now);
int gs_sched_set_weight(struct gs_sched *s, uint64_t id, uint32_t weight);
int gs_sched_set_priority(struct gs_sched *s, uint64_t id, uint32_t prio);

/* id has work and wants the token. */
int gs_sched_want(struct gs_sched *s, uint64_t id, uint64_t now);
/* id, waiting, has no work after all (a job that gave the token back
 * early, before its last blocks left, and then found nothing left): it
 * becomes inactive as if it had released idle.  -1 while it holds. */
int gs_sched_unwant(struct gs_sched *s, uint64_t id, uint64_t now);
/* The holder gave the token back: gpu_ns used during the grant, as the
 * job reports it (charged through gs_sched_charge); idle means it has no
 * more work (becomes inactive). */
int gs_sched_release(struct gs_sched *s, uint64_t id, uint64_t gpu_ns,
		     int idle, uint64_t now);

/* Decide.  Writes up to max actions, returns their number; *next_ns is the
 * absolute time the scheduler wants to be stepped again (UINT64_MAX: only
 * on the next event). */
int gs_sched_step(struct gs_sched *s, uint64_t now,
		  struct gs_sched_action *acts, int max, uint64_t *next_ns);

/* What a grant held for held_ns and reported as reported_ns is charged:
 * held_ns, moved down to reported_ns by at most
 * min(held_ns / GS_SCHED_REPORT_SLACK_DIV, GS_SCHED_REPORT_SLACK_NS),
 * up by at most held_ns + GS_SCHED_REPORT_UP_NS (a direct chunk's tail
 * after an early release runs up to ~1.3 ms: docs/benchmarks.md, run
 * 110).  Nondecreasing in held_ns. */
static inline uint64_t
gs_sched_charge(uint64_t held_ns, uint64_t reported_ns)
{
	uint64_t slack = held_ns / GS_SCHED_REPORT_SLACK_DIV, up;

	if (slack > GS_SCHED_REPORT_SLACK_NS)
		slack = GS_SCHED_REPORT_SLACK_NS;
	if (reported_ns < held_ns - slack)
		return held_ns - slack;
	up = held_ns + held_ns;		/* saturating: nondecreasing */
	if (up < held_ns)
		up = UINT64_MAX;
	up = up + GS_SCHED_REPORT_UP_NS < up ? UINT64_MAX :
	     up + GS_SCHED_REPORT_UP_NS;
	return reported_ns > up ? up : reported_ns;
}

int gs_sched_info(const struct gs_sched *s, uint64_t id,
		  struct gs_sched_entry_info *out);
/* Co-grant set of id (0: none, the default; space mode's planner group
 * + 1, space_agent.c).  Takes effect at the next grant or join; holders
 * left in more than one set by it are suspended at the next step. */
int gs_sched_set_group(struct gs_sched *s, uint64_t id, uint64_t group);

/* Allocation holding the token (0: none; an escalated overrunner no
 * longer holds it); of a grant set, the member most behind. */
uint64_t gs_sched_holder(const struct gs_sched *s);
/* The waiter that would get the token if it were free now (0: none):
 * the one a suspend hands over to, for the agent's TOKEN_SOON hint.  A
 * guess: events before the release can change it. */
uint64_t gs_sched_next(const struct gs_sched *s, uint64_t now);
/* End of the holders' current slice (moves on when a slice is silently
 * extended); 0: nobody holds the token. */
uint64_t gs_sched_slice_end(const struct gs_sched *s);
/* Number of holders (co-granted members hold together). */
unsigned gs_sched_holders(const struct gs_sched *s);
/* Number of entries. */
unsigned gs_sched_count(const struct gs_sched *s);

#endif /* GS_SCHED_H */
