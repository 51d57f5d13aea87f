/*
 * space.h — space mode's partition planner and complementary selection
 * (DESIGN §3 "Space mode", docs/space.md): a pure module, no I/O, no
 * clocks, no allocation.
 *
 * Inputs, per GPU: the space-mode allocations placed there (id, uid,
 * shares, whether they are busy now, and their class), the GPU's SM
 * count, the partition granule and the uid the GPU's MPS server serves.
 * Output, per allocation: the co-run group it belongs to (groups take
 * turns on the GPU, like allocations in time mode; the members of one
 * group run at the same time on disjoint SM ranges), its SM range while
 * its group runs, and the reason in words (shown by `gsharectl status`).
 *
 * Classification (Slate §III-B): an allocation's class comes from two
 * numbers measured while it ran alone on the GPU (its own slices in time
 * mode, or its first slices before it co-runs): the achieved SM activity
 * and the achieved DRAM bandwidth, each in percent of the GPU's peak over
 * the sampling window.  Memory intensity is looked at first: >= 60 % is
 * heavy memory (HM), >= 30 % moderate memory (MM); otherwise >= 60 % SM
 * activity is heavy compute (HC), >= 30 % moderate compute (MC), below
 * that light (LC).  With fewer than GS_SPACE_MIN_SAMPLES samples the
 * class is UNKNOWN, planned like LC (it co-runs with anything but heavy
 * compute, until measured).
 *
 * Pairing (gs_space_corun, symmetric): two allocations co-run when their
 * classes are complementary: a memory-bound one beside a compute-bound
 * one, or a light one beside anything but heavy compute.  Two heavy
 * compute, two memory-bound, heavy compute with moderate memory and
 * moderate compute with moderate memory take turns instead.
 *
 * Grouping (gs_space_plan): an allocation whose job cannot keep a
 * partition (`fixed`: the launch gate, whose kernels the driver places
 * on any SM) is a group of its own ("takes turns: ..."): beside a
 * partner it would take the partner's SMs too.  Allocations of a uid
 * other than the MPS server's cannot be clients of that server (MPS
 * runs one server per user per GPU): each is a group of its own that
 * takes turns with the others ("time-shared: uid ...").  The server's
 * allocations are taken in
 * id order (arrival order) and each joins the first group whose every
 * member it co-runs with and that still has a free granule, else opens a
 * new group.  Within a group, the busy members split the GPU's granules
 * in proportion to their shares (largest remainder, earlier id on equal
 * remainders, at least one granule each; the SMs beyond the last whole
 * granule go with the range that reaches the GPU's end, to the member
 * furthest below its share's SMs, the later id on ties; members are laid
 * out in id order with that one last; `rotate` turns the ties over), so
 * an idle member's SMs go to the others (work-conserving)
 * and a lone busy member gets the whole GPU.  Idle members get no SMs
 * until they are busy again.
 *
 * The co-run check (gs_space_check, docs/space.md "The co-run check"):
 * classes say what usually pairs well; what a pair actually does is
 * measured.  A job that reports progress (libgshare's block-tasks) is
 * first measured alone (its own slices: `probe`, a group of its own),
 * then co-runs; its progress per second co-running over its progress
 * per second of held time alone is its normalized rate n, and n over
 * its share of the group's shares is d (1.0: exactly its share).  A
 * member below its share takes a granule from the member furthest above
 * (`bias`, granules added to its share's count), one per check, until
 * the order flips (the better of the last two is kept) or nobody is
 * above; a group that still leaves a member well below its share, or
 * does less than one job's worth in all, is split: the pair takes turns
 * (`apart`) until the check is tried again.
 *
 * Limits: the grouping is greedy in arrival order, not an optimal
 * matching; classes are per allocation, not per kernel.
 */
#ifndef GS_AGENT_SPACE_H
#define GS_AGENT_SPACE_H

#include <stdint.h>

#define GS_SPACE_MIN_SAMPLES	4u
#define GS_SPACE_WHY_MAX	64u
#define GS_SPACE_NOUID		UINT32_MAX

enum gs_space_class {
	GS_SC_UNKNOWN = 0,
	GS_SC_LC = 1,		/* light: low compute, low memory */
	GS_SC_MC = 2,		/* moderate compute */
	GS_SC_HC = 3,		/* heavy compute */
	GS_SC_MM = 4,		/* moderate memory bandwidth */
	GS_SC_HM = 5,		/* heavy memory bandwidth */
};

/* What an allocation achieved while it ran alone, averaged over its
 * samples (percent of the GPU's peak). */
struct gs_space_counters {
	uint32_t sm_pct;	/* SM activity, 0..100 */
	uint32_t mem_pct;	/* DRAM bandwidth, 0..100 */
	uint32_t samples;	/* windows averaged */
};

uint32_t gs_space_classify(const struct gs_space_counters *c);
/* "light", "compute", "compute-heavy", "memory", "memory-heavy",
 * "unknown". */
const char *gs_space_class_name(uint32_t cls);
/* 1 when allocations of classes a and b should run side by side. */
int gs_space_corun(uint32_t a, uint32_t b);

struct gs_space_in {
	uint64_t id;
	uint32_t uid;
	uint32_t shares;	/* 1..100 */
	uint32_t busy;		/* has work now */
	uint32_t cls;		/* enum gs_space_class */
	int32_t bias;		/* granules beyond its share's count (the
				 * co-run check); the others give or take */
	uint32_t probe;		/* 1: measured alone first, joins no group */
	uint32_t fixed;		/* 1: its job keeps no partition (the
				 * launch gate): a group of its own, it
				 * takes turns with everyone */
};

struct gs_space_out {
	uint64_t id;
	uint32_t group;		/* 0..ngroups-1; groups take turns */
	uint32_t sm_first;	/* SM range while its group runs */
	uint32_t sm_count;	/* 0: idle, no SMs */
	uint32_t corun;		/* 1: other members run beside it */
	uint32_t mps;		/* 1: a client of the GPU's MPS server */
	char why[GS_SPACE_WHY_MAX];
};

struct gs_space_params {
	uint32_t sm_total;	/* SMs of the GPU (H100 SXM: 132) */
	uint32_t granule;	/* partition step (8 on H100) */
	uint32_t mps_uid;	/* uid the MPS server serves; NOUID: the
				 * first allocation's uid */
	const uint8_t *apart;	/* NULL, or n x n: apart[i * n + j] 1 when
				 * in[i] and in[j] were measured to do
				 * worse side by side (they take turns) */
	uint32_t rotate;	/* tie-breaks: 0 as documented; each step
				 * hands a tied granule, or the SMs beyond
				 * the last whole granule, to the next tied
				 * member (the agent moves it on every
				 * `space_rotate`, so that what cannot be
				 * split exactly is shared over time) */
};

/* Plan n allocations (in[] in any order; out[i] answers in[i]).
 * Returns the number of groups, or -1 on bad parameters (sm_total 0,
 * granule 0 or above sm_total, shares 0). */
int gs_space_plan(const struct gs_space_params *p,
		  const struct gs_space_in *in, uint32_t n,
		  struct gs_space_out *out);

/* Does the partition of one allocation differ between two plans (the
 * agent writes the new one into its control page; the runtime applies
 * it at its next relaunch)? */
int gs_space_changed(const struct gs_space_out *old,
		     const struct gs_space_out *cur);

/* One busy member of a co-running group, for gs_space_check. */
struct gs_space_fb {
	uint32_t shares;	/* 1..100 */
	uint32_t granules;	/* its partition now */
	uint64_t alone;		/* progress per second alone (held time) */
	uint64_t corun;		/* progress per second co-running (wall) */
	uint64_t before;	/* corun at the check before the last move
				 * (0: not known) */
	uint32_t sms, before_sms;	/* its SMs now and then (the odd
					 * SMs rotate: granules say less) */
};

enum gs_space_act {
	GS_SPACE_KEEP = 0,	/* stay as they are */
	GS_SPACE_MOVE = 1,	/* one granule from m[from] to m[to] */
	GS_SPACE_SPLIT = 2,	/* take turns instead */
};

struct gs_space_verdict {
	uint32_t act;		/* enum gs_space_act */
	uint32_t from, to;	/* MOVE: indices into m[] */
	uint32_t settle;	/* 1: balanced as well as it gets; move no
				 * more until the members change */
	uint32_t min_d;		/* the lowest n / share, per mille */
	uint32_t sum_n;		/* the members' n summed, per mille */
	uint32_t low;		/* index of the lowest */
};

#define GS_SPACE_TOL_PM		50u	/* within 5 % of its share: fine */
#define GS_SPACE_DONOR_PM	750u	/* a donor may lose at most 3/4 of the
					 * fraction of SMs it gave */
#define GS_SPACE_NOISE_PM	30u	/* a lowest that fell less than this
					 * after a move: noise, not the move */
#define GS_SPACE_SPLIT_D_PM	900u	/* below 90 % of its share, or ... */
#define GS_SPACE_SPLIT_SUM_PM	1000u	/* ... under one job's worth: turns */

/*
 * One step of the co-run check over the k busy members of a group.
 * last_from/last_to: the indices of the previous step's move (the
 * donor, the taker), UINT32_MAX when the last step moved nothing;
 * last_min_d: the lowest d before that move.  settled: moves are over
 * (only KEEP or SPLIT).  Returns 0, or -1 on bad input (k < 2, a rate
 * or share of 0).
 */
int gs_space_check(const struct gs_space_fb *m, uint32_t k,
		   uint32_t last_from, uint32_t last_to, uint32_t last_min_d,
		   int settled, struct gs_space_verdict *v);

#endif /* GS_AGENT_SPACE_H */
