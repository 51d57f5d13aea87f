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
 * Grouping (gs_space_plan): allocations of a uid other than the MPS
 * server's cannot be clients of that server (MPS runs one server per
 * user per GPU): each is a group of its own that takes turns with the
 * others ("time-shared: uid ...").  The server's allocations are taken in
 * id order (arrival order) and each joins the first group whose every
 * member it co-runs with and that still has a free granule, else opens a
 * new group.  Within a group, the busy members split the GPU's granules
 * in proportion to their shares (largest remainder, at least one granule
 * each; the SMs beyond the last whole granule go to the last busy
 * member), so an idle member's SMs go to the others (work-conserving)
 * and a lone busy member gets the whole GPU.  Idle members get no SMs
 * until they are busy again.
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

#endif /* GS_AGENT_SPACE_H */
