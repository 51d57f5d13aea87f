/*
 * gs_rtlogic.h — the pure host-side logic of libgshare: no CUDA, no I/O,
 * no clocks, so it is unit-tested on machines without a GPU.
 *
 *  - persistent grid sizing and batch size (Slate's task grouping),
 *  - space mode's SM partition and the GPU time it is charged,
 *  - the redo-buffer capacity that bounds what a suspend can leave behind,
 *  - union of kernel spans (GPU time of one token hold),
 *  - the host wait policy (spin, then back off; spin again once a suspend
 *    is pending),
 *  - GSHARE_* environment parsing,
 *  - per-stream FIFO queues of launch records that keep their order across
 *    any number of suspensions (EffiSha §6.1).
 */
#ifndef GS_RTLOGIC_H
#define GS_RTLOGIC_H

#include <stddef.h>
#include <stdint.h>

#include "gs_error.h"
#include "gshare.h"

#define GS__MAX_BATCH	64u
#define GS__MAX_TOTAL	0x7fffffffu	/* logical blocks per launch */

/* Physical blocks: blocks_per_sm * sms, never more than the logical
 * blocks, at least 1.  Returns 0 when occupancy says nothing fits. */
unsigned int gs__nphys(unsigned int blocks_per_sm, unsigned int sms,
		       uint64_t total);

/* Space mode: pack the control page's partition (part_gen 0: never
 * set) for gs_kctx.sm_range, first << 16 | count, clamped to the GPU's
 * sms; 0 (the whole GPU) when unset, empty, out of range or whole. */
unsigned int gs__partition(uint64_t part_gen, unsigned int first,
			   unsigned int count, unsigned int sms);
/* Space mode: a partition of SM *ranks* (first << 16 | count, as from
 * gs__partition) as the %smid range the kernels test.  smid[r] is the
 * r-th smallest %smid present on the GPU (n of them, from the runtime's
 * probe kernel): %smid numbering may have gaps and run past the SM
 * count, so a raw smid range [f, f+c) can hold fewer than c SMs; ranks
 * [f, f+c) map to [smid[f], smid[f+c-1]] which holds exactly c present
 * SMs.  n == 0 (no table, or GSHARE_SM_MAP=raw): the range unchanged. */
unsigned int gs__rank_range(unsigned int range, const uint16_t *smid,
			    unsigned int n);
/* GSHARE_SM_MAP=blocks: the physical blocks a launch of nphys gets on
 * a partition (range as from gs__partition; 0: all of them): nphys x
 * the range's share of sms, rounded up, at least 1. */
unsigned int gs__part_blocks(unsigned int nphys, unsigned int range,
			     unsigned int sms);
/* GSHARE_SM_MAP=green (gs_green.h): the groups [*g0, *g0 + *ng) of
 * `ngroups` groups of `gsize` SMs (SMs i*gsize.., in the driver's split
 * order), followed by `left` SMs the split could not group, that make
 * the SM range first..first+count of sms: a group is in when its middle
 * SM is, and so are the leftover SMs (*with_left).  0, or -1 when the
 * range holds none of them. */
int gs__green_groups(unsigned int first, unsigned int count,
		     unsigned int sms, unsigned int ngroups,
		     unsigned int gsize, unsigned int left, unsigned int *g0,
		     unsigned int *ng, int *with_left);
/* gpu_ns scaled by the range's share of sms (range 0: unscaled). */
uint64_t gs__space_scaled(uint64_t gpu_ns, unsigned int range,
			  unsigned int sms);

/* Logical blocks per claim: `fixed` if nonzero (clamped to
 * 1..GS__MAX_BATCH), else about total / (nphys * 16) so that each physical
 * block claims ~16 times, clamped to 1..16. */
unsigned int gs__batch(uint64_t total, unsigned int nphys,
		       unsigned int fixed);

/* Next batch size from the average block-task time (per block slot) of
 * the last launch (0: unknown): gs__batch's size, but no more tasks than
 * fit in GS__BATCH_SPAN_NS, so that the kernel's last claims end about
 * that close together (at least 1).  `fixed` wins.  A smaller batch
 * costs the loop a claim more often: on the H200 the old rule (1 over 8
 * us, 4 over 2 us) ran relaunched loops 0.4-3.3 % slower within their
 * rounds (docs/benchmarks.md, runs 210-211). */
#define GS__BATCH_SPAN_NS	256000u
unsigned int gs__batch_adapt(unsigned int cur, uint64_t avg_task_ns,
			     uint64_t total, unsigned int nphys,
			     unsigned int fixed);

/* Redo entries a physical block takes with one atomic, at most (the
 * device's GS__RL_MAX; gshare.c checks that they agree). */
#define GS__REDO_TAKE	8u

/* Size of the redo ring.  A suspend leaves at most two batches per
 * physical block behind (the current one and one claimed ahead), never
 * more than every logical block (io: every block may wait on I/O); the
 * ring keeps (GS__REDO_TAKE + 1) * nphys + 64 spare entries for takers
 * in flight (each may still be reading what it took). */
unsigned int gs__redo_cap(unsigned int nphys, unsigned int maxbatch,
			  uint64_t total, int io);

/* Length of the union of n intervals [start, end) (end < start counts as
 * empty).  Sorts the array in place. */
struct gs__span {
	uint64_t start, end;
};
uint64_t gs__span_union(struct gs__span *v, size_t n);

/* GPU time an early release reports: v plus *carry (what earlier holds'
 * tails added, negative when an early release counted more than its
 * blocks then used), never below 0; a debt left stays in *carry. */
uint64_t gs__carry_add(int64_t *carry, uint64_t v);


/* Wait policy.  Spin for spin_ns after the wait started, then sleep,
 * doubling from min_sleep_ns to max_sleep_ns; when a suspend is pending,
 * spin (0).  Returns the nanoseconds to sleep now and updates *cur. */
struct gs__waitpol {
	uint64_t spin_ns, min_sleep_ns, max_sleep_ns;
};
uint64_t gs__wait_step(const struct gs__waitpol *p, uint64_t waited_ns,
		       int suspend_pending, uint64_t *cur);

/* Persistent blocks (the first GSHARE_SENTINELS of a loop launch) that
 * read the control page's suspend word themselves, over the bus, and
 * raise the device flag for the others (docs/runtime.md, Sentinel
 * blocks). */
#define GS__SENTINELS_DEFAULT 8u
#define GS__SENTINELS_MAX 64u
/* GSHARE_RELEASE_LEAD_US's default: a release to the next holder's first
 * block took a median 85-110 us on the H200 (hand-over ~50-90, launch to
 * first block ~31-43; docs/benchmarks.md, runs 193-194) */
#define GS__LEAD_US_DEFAULT 150u

/* Runtime configuration from the environment. */
struct gs__config {
	unsigned int batch;		/* GSHARE_BATCH, 0: adaptive */
	uint64_t force_min_ns;		/* GSHARE_FORCE_SUSPEND_US */
	uint64_t force_max_ns;		/* 0: off */
	unsigned int watch_ns;		/* GSHARE_WATCH_NS (0) */
	int check_once;			/* GSHARE_CHECK_ONCE=1 */
	int resize_log;			/* GSHARE_RESIZE_LOG=1: each resize's
					 * steps to stderr at gs_finalize */
	uint64_t spin_ns;		/* GSHARE_SPIN_US, default 200 */
	int watcher;			/* GSHARE_WATCHER: GS__WATCH_* */
	unsigned int sentinels;		/* GSHARE_SENTINELS: persistent
					 * blocks that look at the control
					 * page themselves (0: none) */
	uint64_t seed;			/* GSHARE_SEED, 0: time */
	/* GSHARE_PARTITION (tests, benchmarks): FIRST:COUNT, a fixed SM
	 * range for runs without an agent; `random`: a new range of 8-SM
	 * granules at every forced-suspension round */
	unsigned int part_first, part_count;
	int part_random;
	int sm_map;			/* GSHARE_SM_MAP: GS__MAP_* */
	int release_early;		/* GSHARE_RELEASE: early (default)
					 * gives the token back while the
					 * blocks leave (gs__early_due),
					 * drained once they have left */
	uint64_t early_max_ns;		/* GSHARE_EARLY_MAX_US (3000): early
					 * only while the job's evictions
					 * take no longer */
	uint64_t lead_ns;		/* GSHARE_RELEASE_LEAD_US: early
					 * once the eviction is expected
					 * to end within this */
	int direct;			/* GSHARE_DIRECT: GS__DIRECT_* */
	uint64_t direct_ns;		/* GSHARE_DIRECT_US (500): GPU time
					 * of one direct chunk (attached) */
	uint64_t direct_long_ns;	/* GSHARE_DIRECT_LONG_US (0: a
					 * quarter of the slice, at least
					 * 1 ms): the longest blocks run
					 * direct while the next holder
					 * may run beside */
	uint64_t slack_ns;		/* GSHARE_TIMER_SLACK_NS (1000): the
					 * calling thread's timer slack while
					 * gs_synchronize waits (Linux adds
					 * up to 50 us to every sleep by
					 * default); 0: leave it */
	int evict_idle;			/* GSHARE_EVICT_END: report (0,
					 * default) ends a round at the last
					 * block's exit report (the one that
					 * finishes the work waits for the
					 * streams anyway); idle (1) always
					 * waits until the streams say the
					 * kernels are done */
	int chain;			/* GSHARE_CHAIN (2): 1, at a suspend
					 * queue the relaunch behind the
					 * running kernel (chain_launch); 2,
					 * queue it while the round runs,
					 * where a suspend may come; 0,
					 * launch it after the report */
	uint64_t keep_ns;		/* GSHARE_KEEP_US (10000): attached
					 * and alone on the GPU, keep the
					 * token this long after a
					 * gs_synchronize; 0: release it at
					 * once */
};

/* The wait's spin (struct gs__waitpol's spin_ns): GSHARE_SPIN_US, but
 * none while an I/O kernel is queued (io_queued), unless suspensions are
 * forced (docs/runtime.md, *Host wait*). */
uint64_t gs__wait_spin_ns(const struct gs__config *c, int io_queued);

/* Direct launches (GSHARE_DIRECT; docs/runtime.md). */
enum {
	GS__DIRECT_OFF,		/* off: always the persistent loop */
	GS__DIRECT_AUTO,	/* auto (default): standalone, and attached
				 * in chunks, contended holds included */
	GS__DIRECT_ALONE,	/* alone: attached chunks only while no
				 * other allocation contends (the loop in
				 * contended holds) */
};
/* Who raises the suspend flag in attached rounds (GSHARE_WATCHER). */
enum {
	GS__WATCH_HOST,		/* the host in every round (a copy); it
				 * spins while others contend (default) */
	GS__WATCH_AUTO,		/* the watcher warp in contended rounds, the
				 * host in the others */
	GS__WATCH_ALWAYS,	/* the watcher warp in every round */
};
/* How a space partition is kept (GSHARE_SM_MAP, docs/space.md). */
enum {
	GS__MAP_GREEN,	/* green: launches on a green context of the
			 * partition's SMs (the default; gs_green.h) */
	GS__MAP_BLOCKS,	/* blocks: the grid scaled to the partition's share
			 * of the SMs, no SM test */
	GS__MAP_RAW,	/* raw: blocks off the %smid range leave */
	GS__MAP_RANK,	/* rank: the same over the present smids' ranks */
};
/* getenv is passed in so that tests can feed their own. */
int gs__config_parse(struct gs__config *c,
		     const char *(*get)(const char *name),
		     struct gs_error *err);

/*
 * Direct launches (docs/runtime.md, "Direct launches").  An attached job
 * that nobody contends with runs a kernel as plain grids of `chunk`
 * logical blocks, two in flight, so that a suspend waits for at most
 * about two chunks.  task_ns: one logical block's time on one block slot
 * (gs__task_est; 0: unknown).  Returns the next chunk's size for `left`
 * blocks not launched yet on `slots` block slots: about target_ns of
 * work, whole waves, at least one; the rest when less than half a wave
 * would stay behind.  0 (run it persistent) when the task time is
 * unknown, or over target_ns / 4 and over long_ns: blocks up to long_ns
 * (the attached job's slice / 2) run in chunks of whole waves of up to
 * long_ns of work (one wave at least), so that the two in flight hold a
 * suspend for at most about a slice.
 */
unsigned int gs__direct_chunk(unsigned int slots, uint64_t task_ns,
			      uint64_t target_ns, uint64_t long_ns,
			      unsigned int left);
/* Where the next holder runs beside our last chunks, blocks up to a
 * quarter of the slice run direct, and at least blocks up to this: at
 * 1 ms slices the H200 eater's 0.87 ms blocks ran persistent, suspended
 * every slice, at 79-88 % of their solo work per GPU-second, and sharing
 * at 2 / 4 / 8 jobs fell to 93.9 / 90.2 / 88.0 % of the solo sum; run
 * direct, 98.8 / 99.3 / 97.0 % (docs/benchmarks.md, run 201). */
#define GS__DIRECT_LONG_FLOOR_NS 1000000u

/* The two bounds gs__direct_chunk takes, for an attached job whose agent
 * slices at slice_ns: *target_ns the chunk's work (GSHARE_DIRECT_US),
 * *long_ns the longest block run as a chunk (half the slice).  While
 * another allocation holds or wants the GPU (contended) a suspend may
 * come at any time: half the chunk, and blocks no longer than that;
 * where the next holder can run beside our last chunks (overlap: one
 * MPS server) blocks up to GSHARE_DIRECT_LONG_US, by default a quarter
 * of the slice but at least GS__DIRECT_LONG_FLOOR_NS. */
void gs__direct_bounds(const struct gs__config *c, uint64_t slice_ns,
		       int contended, int overlap, uint64_t *target_ns,
		       uint64_t *long_ns);
/* The block time gs__direct_chunk sizes a kernel's chunks with: as
 * measured direct (task_d), else as measured in the loop (task_p; 0:
 * unknown), but long_ns where that is over long_ns while the lower of
 * the two is at most half again over it (long_ns 0: no such margin).
 * Both figures run high: contended rounds' spans hold the holders that
 * run beside ours at each end of a hold (one MPS server), the loop's its
 * own cost, and only a lower sample moves a figure down; a kernel whose
 * figure once came out just over the bound would stay in the loop for
 * good.  (H200, 1 and 4 ms slices: eaters of 0.87 ms blocks did so in
 * about one job of four, at 78-84 % of their solo work per GPU-second;
 * docs/benchmarks.md, runs 202-203.) */
uint64_t gs__chunk_task(uint64_t task_d, uint64_t task_p, uint64_t long_ns);
/* A chunk of n blocks from `first` of a 2D grid (gz 1), cut down to
 * whole rows when it holds at least one and is not the rest: a launch
 * of whole rows needs no division per thread (gs__direct_grid).  Other
 * grids: n. */
unsigned int gs__direct_rows(const struct gs_dim3 *grid, unsigned int first,
			     unsigned int n);
/* The launch grid of a direct chunk: 1D over n blocks for a 1D logical
 * grid (*rows = 2); the logical grid itself for the whole of it; whole
 * rows (gx, n / gx) from row first / gx of a 2D grid (*rows = 1, *y0);
 * else 1D over n blocks, divided (*rows = 0).  The values are
 * GS__DGRID_* of gshare_device.cuh. */
void gs__direct_grid(const struct gs_dim3 *grid, unsigned int first,
		     unsigned int n, struct gs_dim3 *out, unsigned int *rows,
		     unsigned int *y0);
/* Launch a kernel direct, from its block times measured direct (task_d)
 * and persistent (task_p), 0: not yet: direct first, then persistent
 * once, then direct unless the loop was more than 5 % faster; while the
 * loop is picked, every GS__PICK_RETRY-th launch (counted in *tries)
 * goes direct anyway, so that a direct estimate taken under contention
 * (too high) gets its chance to come down; blocks of GS__PICK_LONG_NS or
 * more in the loop always go direct. */
#define GS__PICK_RETRY 16u
/* Blocks that take this long in the loop go direct whatever the two
 * figures say: a launch's per-block cost is lost in them, and their
 * direct figure from contended rounds holds the holders that ran beside
 * (H200, 1 ms slices: an eater's 0.87 ms blocks measured 1.11 ms direct
 * in a contended round, and the pick kept that job in the loop for good,
 * at 78-80 % of its solo work per GPU-second; docs/benchmarks.md, run
 * 205). */
#define GS__PICK_LONG_NS 100000u
int gs__direct_pick(uint64_t task_d, uint64_t task_p, unsigned int *tries);
/* One logical block's time on one slot, from a run of `done` blocks over
 * span_ns on `conc` slots (min(slots, done) of them worked at once),
 * smoothed into est (0: none yet; half the old, half the new).
 * contended: the span may include another job's blocks or time slices
 * (too long, never too short): it only gives a first estimate or lowers
 * one.  partial: some blocks of the run went on from an earlier run or
 * yielded to go on in a later one, so `done` counts pieces of blocks
 * (the H200 eater's one-wave blocks, 867 us, measured 19-35 us from
 * such runs and were kept out of direct chunks for good): no sample. */
uint64_t gs__task_est(uint64_t est, uint64_t span_ns, uint64_t done,
		      unsigned int conc, int contended, int partial);

/* The job's eviction time, smoothed (3/4 the old, 1/4 the new; the first
 * taken as it is). */
uint64_t gs__evict_smooth(uint64_t est, uint64_t ev);
/* Release early after this suspend?  Only with GSHARE_RELEASE=early and
 * once the job's evictions are known to be short (est, from
 * gs__evict_smooth; 0: none measured yet): the blocks that run on after
 * the token went back are the next holder's wait without MPS, and the
 * agent charges a tail only as far as a report may move a hold. */
int gs__early_ok(const struct gs__config *c, uint64_t est);
/* Release early now, elapsed ns after the suspend was written?  As
 * gs__early_ok allows, once the eviction is expected to end within
 * GSHARE_RELEASE_LEAD_US (est - elapsed <= lead): about the time from a
 * release to the next holder's first block, so that its start meets the
 * end of our tail instead of running beside the whole of it (both would
 * be charged for the overlap, and our blocks run slower in it). */
int gs__early_due(const struct gs__config *c, uint64_t est, uint64_t elapsed);
int gs__parse_range_us(const char *s, uint64_t *min_ns, uint64_t *max_ns,
		       struct gs_error *err);

/* xorshift64*: deterministic random numbers for forced suspensions. */
uint64_t gs__rand(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t gs__rand_range(uint64_t *state, uint64_t lo, uint64_t hi);

/* A ring of cap samples that has seen count: the index (in count terms)
 * of the first of the most recent min(max, retained) samples. */
uint64_t gs__ring_recent(uint64_t count, uint64_t cap, uint64_t max);

/* Per-stream FIFO queues.  An item is any struct with a
 * `struct gs__qnode` member; the queue does not own items. */
struct gs__qnode {
	struct gs__qnode *next;
};
struct gs__squeue {
	void *stream;			/* key */
	struct gs__qnode *head, *tail;
	size_t len;
};
struct gs__queues {
	struct gs__squeue *q;
	size_t n, cap;
};
void gs__queues_init(struct gs__queues *qs);
void gs__queues_free(struct gs__queues *qs);
/* Append to stream's queue (created on first use).  -1 on ENOMEM. */
int gs__queues_push(struct gs__queues *qs, void *stream,
		    struct gs__qnode *node);
/* Remove node from stream's queue (it may sit anywhere). 0, or -1 if
 * not found. */
int gs__queues_remove(struct gs__queues *qs, void *stream,
		      struct gs__qnode *node);
size_t gs__queues_total(const struct gs__queues *qs);

/* A job must run on its allocation's GPU.  gs__uuid_format writes the
 * 16 UUID bytes CUDA reports for a device as NVML prints them,
 * "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase hex), into out
 * (at least 41 bytes).  gs__gpu_check compares the allocation's GPU UUID
 * (want, from the agent at ATTACH) with the device's (have): equal when
 * their hex digits match, ignoring case and an alphabetic prefix before
 * the first '-' (NVML's "GPU-"/"MIG-"); want "" (an agent that sent
 * none) passes.  A simulated GPU ("SIM-…") never matches a real device.
 * 0, or -1 with GS_EPERM and a message naming allocation, both UUIDs and
 * the CUDA device. */
int gs__uuid_format(const unsigned char bytes[16], char *out, size_t len);
int gs__gpu_check(uint64_t alloc_id, const char *want, const char *have,
		  int device, struct gs_error *err);

#endif /* GS_RTLOGIC_H */
