/*
 * gshare.c — libgshare host side: launch queues, the run/wait loop, the
 * watcher, RPC service and the two drivers (standalone, attached).
 *
 * One struct gs__rt per process.  A gs_launch makes a launch record
 * (struct gs__launch) and appends it to its stream's queue.  A *run* is
 * one token hold: launch the watcher warp (attached or forced mode), then
 * every queued record in queue order, wait until all of them have left the
 * GPU (each kernel's last block writes its seq into a host-mapped status),
 * then drop the records that finished.  A record that did not finish stays
 * where it is and is relaunched by the next run, which first runs the
 * logical blocks left in its redo ring; its successors on the same stream
 * do nothing until it finishes (pred_finished), so stream order holds
 * across suspensions.
 *
 * Standalone without forced suspensions a launch starts at once on its
 * stream (gen never signalled) and gs_synchronize only waits.
 *
 * The host waits by spinning, then sleeping with exponential backoff
 * (gs__wait_step), and spins again as soon as a suspend is pending so that
 * the exit is seen at once.  Not thread-safe: one thread drives it.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "gs_ctlpage.h"
#include "gs_error.h"
#include "gs_proto.h"
#include "gs_rtint.h"
#include "gs_rtlogic.h"
#include "gs_session.h"
#include "gs_smmap.h"
#include "gs_green.h"
#include "gs_watch.h"
#include "gshare.h"
#include "gshare_device.cuh"

#define GS_API __attribute__((visibility("default")))

#define GS__SLOTS	4096u
#define GS__QUERY_NS	1000000u	/* the wait's stream queries */

/* struct gs__kstate: the fields older kernels use keep their offsets; the
 * counters of the exit path start lines of their own (slots are 640
 * bytes apart from a 256-byte aligned cudaMalloc) */
_Static_assert(offsetof(struct gs__kstate, finished) == 52 &&
	       offsetof(struct gs__kstate, redo_added) == 128 &&
	       offsetof(struct gs__kstate, neg_tmin) == 512 &&
	       sizeof(struct gs__kstate) == 640, "struct gs__kstate layout");
_Static_assert(GS__REDO_TAKE == GS__RL_MAX,
	       "the redo ring's room for takers in flight");
_Static_assert(sizeof(struct gs__flagw) == 16 &&
	       GS__CTL_SUSPEND == GS_CTL_SUSPEND &&
	       offsetof(struct gs_ctlpage, suspend) % 16 == 0,
	       "the sentinels' look at the page");
#define GS__STAGE	(1u << 20)
#define GS__EVS		16384u
#define GS__RZS		64u	/* resize latencies kept */
#define GS__SPACE_CHUNK_NS 1000000u	/* space mode: longest direct
					 * blocks (a resize waits them out) */
#define GS__ISTAGE_MAX	(64u << 20)	/* inline staging per kernel */
#define GS__HCACHE	8		/* I/O buffers kept for reuse */
#define GS__SMIDS	1024u	/* rank table: smids kept at most */
#define GS__DEPTH	3u	/* kernels in flight per stream (queued) */
#define GS__DEPTH_CONT	2u	/* the same in contended rounds: a
				 * suspend waits for direct ones */
#define GS__IMM_GEN	0xffffffffu	/* never signalled */
#define GS__EINTERNAL	17	/* runtime-only code: GSHARE_EINTERNAL */
#define GS__EVPOOL	96u	/* direct launch events kept for reuse */

struct gs__launch {
	struct gs__qnode node;		/* first: queue link */
	const struct gs_kernel *k;
	struct gs_dim3 grid, block;
	size_t shmem;
	void *args;
	cudaStream_t stream;
	cudaStream_t run_stream;	/* where its kernel runs now: stream,
					 * or a green stream (space mode) */
	cudaEvent_t ev;			/* orders a green stream after
					 * stream; lazily */
	unsigned int total, nphys, batch, redo_cap;
	unsigned int redo_head, redo_tail;	/* ring, as last reported */
	unsigned int slot, seq, gen;
	unsigned int sti;		/* its report: rt->st[sti], the slot or
					 * the slot + GS__SLOTS (a chained
					 * launch reports in the other) */
	/* a relaunch queued behind the running one (chain_launch): its
	 * seq, generation and report slot, taken over at the reap */
	int chained;
	unsigned int chain_seq, chain_gen, chain_sti;
	int chain_noop;			/* the launch taken over follows one
					 * that finished the kernel: it does
					 * nothing, and nothing is chained to
					 * it */
	int launched;
	int finished;			/* the kernel completed */
	struct gs__launch *pred;	/* previous record when launched */
	unsigned int pred_seq;
	unsigned int *d_redo;
	size_t redo_bytes;
	unsigned int *d_runs;
	size_t runs_bytes;
	/* I/O kernels */
	struct gs__rpc *rpc, *d_rpc;
	unsigned char *istage, *d_istage;	/* inline staging, or NULL */
	void *iobuf;			/* host-mapped: rpc, ring, istage */
	size_t iobuf_bytes;
	unsigned int *ring, *d_ring;
	unsigned int ring_head;
	unsigned int *ready, nready;
	unsigned int io_out;
	int fresh_left;			/* blocks never started remain (as
					 * the last round left it) */
	/* direct launches (plain grids, gs__direct): fresh blocks launched
	 * so far, this round's blocks and chunks, chunks seen done; event
	 * dev[i % 2] after chunk i (at most two in flight) */
	unsigned int slots;		/* block slots: bps * sms */
	unsigned int dnext;
	unsigned int dround, dchunks, dseen;
	int direct;			/* launched direct this round */
	int pers;			/* launched persistent once: stays */
	int pieces;			/* the ring may hold yielded blocks,
					 * to go on from where they left */
	cudaEvent_t dev[2];
	/* chunked: odd chunks run on rt->dstream beside the even
	 * ones on the record's stream (no tail between two chunks), after
	 * dpre (recorded before the round's first chunk); daux: one ran
	 * there this round, the stream must wait for it (direct_join) */
	cudaEvent_t dpre;
	int daux;
};

struct gs__pending_read {
	struct gs__launch *l;
	unsigned int lb;
};

struct gs__devbuf {
	void *p;
	size_t bytes;
};

struct gs__occ {
	const struct gs_kernel *k;
	struct gs_dim3 block;
	size_t shmem;
	int bps;
	uint64_t task_d, task_p;	/* a logical block's time on one slot
					 * (gs__task_est) launched direct and
					 * persistent, 0: unknown */
	unsigned int tries;		/* gs__direct_pick's retries */
};

struct gs__rt {
	struct gs__config cfg;
	int attached;
	int device, sms;
	struct gs_session *sess;
	/* a token kept between synchronizes (GSHARE_KEEP_US): the keeper
	 * thread gives it back on a suspend, a contender or the deadline;
	 * kmu guards the session between it and the caller's thread */
	pthread_mutex_t kmu;
	pthread_cond_t kcv;
	pthread_t kth;
	int kth_up, kquit;
	pid_t kth_pid;		/* the process that started it (a child of
				 * fork has no keeper) */
	uint64_t keep_until;
	volatile struct gs_ctlpage *page;	/* session page or fake */
	struct gs_ctlpage *fake;		/* forced mode */
	volatile struct gs_ctlpage *d_page;	/* device view */
	int page_registered;
	uint64_t page_epoch;	/* gs_session_page_epoch of page */
	cudaStream_t wstream, iostream;
	cudaStream_t dstream;	/* odd direct chunks (made when needed) */
	unsigned int *d_flag;
	volatile unsigned int *quit, *d_quit;
	volatile unsigned long long *wtime, *d_wtime;	/* watcher's flag
							 * time */
	unsigned int *hflag;		/* pinned: the gen the host copies into
					 * the flag (no watcher this round) */
	/* cuStreamWriteValue32, when the driver has it: the host's write
	 * of the flag without a copy engine */
	int (*wv32)(void *stream, unsigned long long addr, unsigned int v,
		    unsigned int flags);
	/* cuStreamWaitValue32: a chained relaunch waits on the gate */
	int (*ww32)(void *stream, unsigned long long addr, unsigned int v,
		    unsigned int flags);
	/* the record whose relaunch is queued behind its running kernel
	 * (chain_launch), or NULL; gated: behind a wait on the gate word
	 * (pinned, host-mapped), which the next hold's first round raises
	 * to chain_gen */
	struct gs__launch *chain;
	int chain_gated;
	volatile unsigned int *gate;
	unsigned long long d_gate;
	int host_watch;			/* this round: the host raises the
					 * flag when it sees the suspend */
	int host_raised;		/* ... and did */
	/* GSHARE_RELEASE=early: the token went back when the flag was
	 * raised, before the blocks left (this hold) */
	int released;
	uint64_t round_launch_ns;	/* this round's first launch */
	uint64_t early_gpu_ns;		/* GPU time the early release
					 * reported for this hold */
	uint64_t early_tasks;		/* ... and block-tasks */
	int64_t carry_gpu_ns;		/* earlier holds' tails after an
					 * early release, reported with the
					 * next release; negative when the
					 * release counted more than the
					 * blocks then used (its round had
					 * waited for SMs) */
	uint64_t carry_tasks;
	uint64_t evict_est_ns;		/* this job's evictions, smoothed
					 * (gs__evict_smooth) */
	uint64_t seen_ns;		/* last wait: all exits seen */
	uint64_t last_tmax;		/* last reap: latest block exit */
	int round_cont;			/* another allocation held or wanted
					 * the GPU during this round: its
					 * spans may include the other's
					 * blocks (MPS) or time slices */
	uint64_t hold_gpu_ns, hold_tasks;	/* current hold so far */
	unsigned int sm_range;		/* partition of this round (space
					 * mode), first << 16 | count of SM
					 * ranks; 0: all */
	unsigned int acct_range;	/* sm_range as run: what the round's
					 * GPU time is scaled by */
	struct gs__green *green;	/* GSHARE_SM_MAP=green, lazily */
	uint64_t round_part_gen;	/* the page's part_gen this round */
	uint64_t applied_part_gen;	/* ... the last round launched */
	unsigned int applied_range;	/* ... and its partition */
	int resize_sent;		/* this round stopped for a resize */
	uint64_t nrz;			/* resize latencies: agent's write
					 * -> relaunch on the new partition
					 * (gs_resize_samples) */
	uint64_t rz[GS__RZS];		/* the last ones (ring) */
	uint64_t rz_seen[GS__RZS];	/* ... write -> stop raised (0: the
					 * round was not stopped) */
	uint64_t rz_out[GS__RZS];	/* ... write -> old round gone */
	uint64_t rz_stop_ns, rz_exit_ns;	/* the last stopped round */
	int unspun;		/* the last round ended at its exit
				 * reports, the streams not queried */
	int green_off;			/* unavailable: blocks instead */
	uint16_t smid[GS__SMIDS];	/* present %smid values, ascending */
	unsigned int smid_n;		/* 0: no rank table (raw smids) */
	uint64_t next_progress_ns;	/* next gs_session_progress */
	struct gs__status *st, *d_st;
	struct gs__kstate *d_ks;
	unsigned int *free_slots, nfree;
	/* a slot whose fresh-block counter side-by-side direct chunks may
	 * have left stale (one bit per slot) */
	unsigned char ks_dirty[GS__SLOTS / 8u];
	struct gs__queues q;
	unsigned int gen, seq;
	unsigned int cur_gen;		/* generation of the current run, 0
					 * for immediate launches */
	uint64_t rng;
	struct gs__devbuf *cache;
	size_t ncache, capcache;
	/* host-mapped I/O buffers of finished I/O records, kept for the
	 * next (cudaHostAlloc and cudaFreeHost cost milliseconds) */
	struct gs__devbuf hcache[GS__HCACHE];
	size_t nhcache;
	struct gs__occ occ[32];
	unsigned int nocc;
	void *stage;
	struct gs__pending_read *pend;
	size_t npend, cappend;
	int io_kernels;			/* GS_KF_IO records queued */
	struct gs_stats stats;
	uint64_t evs[GS__EVS];		/* eviction latencies (ring) */
	uint64_t nevs;
	struct gs__launch **tmp;	/* scratch: launched records */
	size_t ntmp, captmp;
	struct gs__span *spans;
	uint64_t round_tmin;		/* last reap: earliest block start */
	/* GSHARE_TRACE: one line per token hold (attached), for where a
	 * hand-over's time goes (tests/gpu/holds.py) */
	FILE *trace;
	struct {
		uint64_t exec, wlaunch, launch, tmin, tmax, seen, exit, gpu;
		uint64_t sset, wraise;	/* suspend written (host), the
					 * watcher raised the flag (dev) */
		uint64_t hraise;	/* the host copied it (host) */
		uint64_t chq, chc;	/* the chained relaunch's call
					 * returned (host), and took (ns) */
		unsigned int rounds;
		unsigned int chained;	/* the hold began with a chained
					 * launch */
	} th;				/* tmin, tmax: %globaltimer */
	uint64_t trace_n;		/* holds written */
	uint64_t sync_ns;		/* the gs_synchronize under way began
					 * (host; the trace's last column) */
	cudaEvent_t evpool[GS__EVPOOL];	/* direct launches' events of freed
					 * records, for the next ones */
	unsigned int nevpool;
};

static struct gs__rt *rt;
static __thread struct gs_error last_err;

static int launch_queued(unsigned int gen, int first);
static int trace_open(void);
static int trace_offset(int n);
static int unlaunched(void);

static const char *
envget(const char *name)
{
	return getenv(name);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Record a failure for gs_errmsg; returns the negated code. */
static int
fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int
fail(int code, const char *fmt, ...)
{
	va_list ap;

	last_err.code = code;
	va_start(ap, fmt);
	vsnprintf(last_err.msg, sizeof(last_err.msg), fmt, ap);
	va_end(ap);
	return -code;
}

static int
fail_err(const struct gs_error *e)
{
	last_err = *e;
	return -(e->code ? e->code : GS_EIO);
}

static int
cufail(cudaError_t e, const char *what)
{
	return fail(GS_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
		    cudaGetErrorName(e));
}

#define CU_OK(e) ((e) == cudaSuccess)

/* ---- device buffer cache: kernels relaunched with the same sizes reuse
 * their redo/run buffers without cudaMalloc ---- */

/* Take the smallest kept buffer of at least `bytes` out of c[0..*n-1]:
 * 1 with it in *out, 0 when none is large enough. */
static int
cache_take(struct gs__devbuf *c, size_t *n, size_t bytes, void **out)
{
	size_t i, best = SIZE_MAX;

	for (i = 0; i < *n; i++)
		if (c[i].bytes >= bytes &&
		    (best == SIZE_MAX || c[i].bytes < c[best].bytes))
			best = i;
	if (best == SIZE_MAX)
		return 0;
	*out = c[best].p;
	c[best] = c[--*n];
	return 1;
}

static int
devbuf_get(size_t bytes, cudaStream_t stream, void **out)
{
	cudaError_t e;

	if (cache_take(rt->cache, &rt->ncache, bytes, out))
		return 0;
	/* stream-ordered: no device-wide synchronization */
	e = cudaMallocAsync(out, bytes, stream);
	if (!CU_OK(e))
		return cufail(e, "cudaMallocAsync");
	return 0;
}

static void
devbuf_put(void *p, size_t bytes)
{
	if (p == NULL)
		return;
	if (rt->ncache == rt->capcache) {
		size_t nc = rt->capcache ? rt->capcache * 2 : 16;
		struct gs__devbuf *n = realloc(rt->cache, nc * sizeof(*n));

		if (n == NULL) {
			cudaFree(p);
			return;
		}
		rt->cache = n;
		rt->capcache = nc;
	}
	rt->cache[rt->ncache].p = p;
	rt->cache[rt->ncache].bytes = bytes;
	rt->ncache++;
}

/* Host-mapped memory for an I/O record: a kept buffer large enough, or a
 * new one. */
static int
hostbuf_get(size_t bytes, void **out)
{
	cudaError_t e;

	if (cache_take(rt->hcache, &rt->nhcache, bytes, out))
		return 0;
	e = cudaHostAlloc(out, bytes, cudaHostAllocMapped |
			  cudaHostAllocPortable);
	if (!CU_OK(e))
		return cufail(e, "cudaHostAlloc(I/O slots)");
	return 0;
}

/* Keep it for the next I/O record; with the cache full, free the
 * smallest of it and the kept ones. */
static void
hostbuf_put(void *p, size_t bytes)
{
	size_t i, small = 0;

	if (p == NULL)
		return;
	if (rt->nhcache < GS__HCACHE) {
		rt->hcache[rt->nhcache].p = p;
		rt->hcache[rt->nhcache].bytes = bytes;
		rt->nhcache++;
		return;
	}
	for (i = 1; i < rt->nhcache; i++)
		if (rt->hcache[i].bytes < rt->hcache[small].bytes)
			small = i;
	if (rt->hcache[small].bytes < bytes) {
		cudaFreeHost(rt->hcache[small].p);
		rt->hcache[small].p = p;
		rt->hcache[small].bytes = bytes;
	} else {
		cudaFreeHost(p);
	}
}

/* ---- launch records ---- */

static void
launch_free(struct gs__launch *l)
{
	int i;

	if (l == NULL)
		return;
	devbuf_put(l->d_redo, l->redo_bytes);
	devbuf_put(l->d_runs, l->runs_bytes);
	hostbuf_put(l->iobuf, l->iobuf_bytes);
	free(l->ready);
	free(l->args);
	if (l->ev != NULL)
		cudaEventDestroy(l->ev);
	for (i = 0; i < 3; i++) {
		cudaEvent_t ev = i < 2 ? l->dev[i] : l->dpre;

		if (ev == NULL)
			continue;
		if (rt->nevpool < GS__EVPOOL)
			rt->evpool[rt->nevpool++] = ev;
		else
			cudaEventDestroy(ev);
	}
	if (l->slot != UINT32_MAX) {
		/* a kernel left unfinished (error, finalize) leaves its
		 * device state dirty (a direct launch moved `next`); a
		 * finished one reset it itself */
		if (!l->finished && (l->pers || l->dnext != 0))
			cudaMemset(rt->d_ks + l->slot, 0,
				   sizeof(struct gs__kstate));
		rt->free_slots[rt->nfree++] = l->slot;
	}
	if (l->k != NULL && (l->k->flags & GS_KF_IO))
		rt->io_kernels--;
	free(l);
}

static struct gs__occ *
occ_find(const struct gs_kernel *k, struct gs_dim3 block, size_t shmem)
{
	unsigned int i;

	for (i = 0; i < rt->nocc; i++) {
		struct gs__occ *o = &rt->occ[i];
		if (o->k == k && o->shmem == shmem && o->block.x == block.x &&
		    o->block.y == block.y && o->block.z == block.z)
			return o;
	}
	return NULL;
}

static int
occupancy(const struct gs_kernel *k, struct gs_dim3 block, size_t shmem,
	  int *bps)
{
	struct gs__occ *o = occ_find(k, block, shmem);
	unsigned int i;
	int e;

	if (o != NULL) {
		*bps = o->bps;
		return 0;
	}
	e = k->occupancy(bps, block, shmem);
	if (e != 0)
		return cufail((cudaError_t)e,
			      "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
	i = rt->nocc < 32 ? rt->nocc++ : (unsigned int)(rt->seq % 32u);
	rt->occ[i].k = k;
	rt->occ[i].block = block;
	rt->occ[i].shmem = shmem;
	rt->occ[i].bps = *bps;
	rt->occ[i].task_d = rt->occ[i].task_p = 0;
	rt->occ[i].tries = 0;
	return 0;
}

/*
 * GSHARE_SM_MAP=green: l's kernel runs this round on a stream of the
 * green context of rt->sm_range (l->run_stream), after what the
 * application put on l->stream before it.  A driver without green
 * contexts, or a partition they cannot make, leaves l->run_stream at
 * l->stream (the caller keeps the partition as a share of the blocks),
 * said once.  Returns a CUDA error only for a failed ordering.
 */
/*
 * Green contexts unavailable: partitions are kept as a share of the
 * blocks from now on (gs_stats cannot say it without an ABI change; the
 * reason goes to stderr only when partitions were asked for by
 * GSHARE_PARTITION, as the runtime's other notes do).
 */
static void
green_fallback(const char *why)
{
	rt->green_off = 1;
	if (rt->cfg.part_count != 0 || rt->cfg.part_random)
		fprintf(stderr, "gshare: space partitions as green contexts: "
			"%s; as a share of the blocks instead\n", why);
}

static cudaError_t
green_stream(struct gs__launch *l)
{
	char why[160];
	unsigned int nsm = 0;
	cudaStream_t gs;
	cudaError_t e;

	if (rt->green_off)
		return cudaSuccess;
	if (rt->green == NULL &&
	    (rt->green = gs__green_init(rt->device, why, sizeof(why))) ==
	    NULL) {
		green_fallback(why);
		return cudaSuccess;
	}
	gs = gs__green_stream(rt->green, rt->sm_range, (unsigned int)rt->sms,
			      l->stream, rt->gen, &nsm, why, sizeof(why));
	if (gs == NULL) {
		green_fallback(why);
		return cudaSuccess;
	}
	if (l->ev == NULL &&
	    (e = cudaEventCreateWithFlags(&l->ev, cudaEventDisableTiming)) !=
	    cudaSuccess)
		return e;
	if ((e = cudaEventRecord(l->ev, l->stream)) != cudaSuccess ||
	    (e = cudaStreamWaitEvent(gs, l->ev, 0)) != cudaSuccess)
		return e;
	l->run_stream = gs;
	rt->acct_range = (rt->sm_range & 0xffff0000u) | (nsm & 0xffffu);
	return cudaSuccess;
}

/* Make the green streams of this round's partition for every queue
 * (a failure is left for green_stream to say). */
static void
green_prepare(void)
{
	char why[160];
	unsigned int nsm;
	size_t i;

	if (rt->sm_range == 0 || rt->cfg.sm_map != GS__MAP_GREEN ||
	    rt->green_off)
		return;
	if (rt->green == NULL &&
	    (rt->green = gs__green_init(rt->device, why, sizeof(why))) ==
	    NULL)
		return;	/* green_stream tries again and says why */
	for (i = 0; i < rt->q.n; i++)
		if (rt->q.q[i].head != NULL)
			(void)gs__green_stream(rt->green, rt->sm_range,
					       (unsigned int)rt->sms,
					       rt->q.q[i].stream, rt->gen,
					       &nsm, why, sizeof(why));
}

/* ---- direct launches ---- */

static int contended(volatile struct gs_ctlpage *page);

/* Kernels built with GSHARE_KABI 1 have no direct entry. */
static int
has_direct(const struct gs_kernel *k)
{
	return k->kabi >= 2 && k->launch_direct != NULL;
}

/* Launched direct over its whole range: done once its stream gets past
 * it, never suspended, so what follows on the stream needs no check. */
static int
direct_complete(const struct gs__launch *l)
{
	return !l->pers && l->dnext == l->total;
}

/* Attached: the next chunk of l, about GSHARE_DIRECT_US of work, or 0
 * (the loop, which a suspend stops at its next block) with no
 * estimate.  While another allocation holds or wants the GPU a suspend
 * may come at any time: chunks of about half GSHARE_DIRECT_US, of
 * blocks no longer than that (a suspend waits for the chunks in
 * flight, GS__DEPTH_CONT records a stream), or none with
 * GSHARE_DIRECT=alone.  Where the agent says the next holder can run
 * beside our last chunks (one MPS server: GS_CTL_CONTEND_OVERLAP), also
 * blocks up to GSHARE_DIRECT_LONG_US (a quarter of the slice, at least
 * 1 ms), in chunks of whole waves of up to that (gs__direct_bounds): a
 * suspend waits for at most about two such chunks (on our clock: the
 * early release comes about GSHARE_RELEASE_LEAD_US before the eviction
 * is expected to end). */
static unsigned int
direct_next(const struct gs__launch *l)
{
	const struct gs__occ *o = occ_find(l->k, l->block, l->shmem);
	uint64_t target, long_ns;
	int busy = contended(rt->page), margin = 1;

	if (busy && rt->cfg.direct == GS__DIRECT_ALONE)
		return 0;
	gs__direct_bounds(&rt->cfg, rt->sess != NULL ?
			  gs_session_slice_ns(rt->sess) : 0, busy,
			  busy && gs_ctl_overlap(rt->page), &target,
			  &long_ns);
	/* space mode (the agent has written a partition): a resize
	 * waits for the chunks on the GPU, so no chunk of blocks longer
	 * than GS__SPACE_CHUNK_NS, with no margin over it */
	if (__atomic_load_n(&rt->page->part_gen, __ATOMIC_RELAXED) != 0 &&
	    long_ns > GS__SPACE_CHUNK_NS) {
		long_ns = GS__SPACE_CHUNK_NS;
		margin = 0;
	}
	/* blocks up to half a slice long: one wave a chunk */
	return gs__direct_rows(&l->grid, l->dnext,
	    gs__direct_chunk(l->slots, o == NULL ? 0 :
			     gs__chunk_task(o->task_d, o->task_p,
					    margin ? long_ns : 0),
			     target, long_ns, l->total - l->dnext));
}

/*
 * Blocks for l's next direct launch in generation gen, 0 for a
 * persistent one.  Standalone without forced suspensions (gen never
 * signalled) the whole rest at once: nothing can suspend it.  Attached,
 * while no other allocation holds or wants the GPU, a chunk that a
 * suspend can wait out (gs__direct_chunk), for a kernel whose block
 * time is known from an earlier run; everything before it on the
 * stream must be done by the time the stream reaches it.  Never for
 * I/O kernels (a block waits for the host), space partitions, forced
 * suspensions, or a record that ran persistent (its redo ring).
 */
static unsigned int
direct_blocks(const struct gs__launch *l, unsigned int gen,
	      const struct gs__launch *pred)
{
	struct gs__occ *o;

	if (rt->cfg.direct == GS__DIRECT_OFF || !has_direct(l->k) ||
	    (l->k->flags & GS_KF_IO) || l->pers || l->dnext >= l->total ||
	    rt->sm_range != 0)
		return 0;
	/* the faster of the two for this kernel, once both were tried
	 * (one block per hardware block is not always: tiny blocks start
	 * faster in the loop) */
	o = occ_find(l->k, l->block, l->shmem);
	if (o != NULL && !gs__direct_pick(o->task_d, o->task_p, &o->tries))
		return 0;
	if (gen == GS__IMM_GEN)
		return l->total - l->dnext;
	if (!rt->attached || rt->page == NULL || rt->page == rt->fake ||
	    (pred != NULL && !direct_complete(pred)))
		return 0;
	return direct_next(l);
}

static int
ev_get(cudaEvent_t *ev)
{
	cudaError_t e;

	if (*ev != NULL)
		return 0;
	if (rt->nevpool > 0)
		*ev = rt->evpool[--rt->nevpool];
	else if (!CU_OK(e = cudaEventCreateWithFlags(ev,
				cudaEventDisableTiming)))
		return cufail(e, "cudaEventCreate");
	return 0;
}

/* What follows l on its stream waits for its chunks on rt->dstream too
 * (the latest of which recorded dev[1]). */
static int
direct_join(struct gs__launch *l)
{
	cudaError_t e;

	if (!l->daux)
		return 0;
	l->daux = 0;
	e = cudaStreamWaitEvent(l->stream, l->dev[1], 0);
	return CU_OK(e) ? 0 : cufail(e, "cudaStreamWaitEvent");
}

/* Launch blocks dnext .. dnext + n - 1 of l as a plain grid on its
 * stream (odd chunks of a chunked kernel: beside it), between the
 * round's events. */
static int
launch_direct(struct gs__launch *l, unsigned int n)
{
	struct gs__dctx c;
	struct gs_dim3 g;
	cudaStream_t cs = l->stream;
	cudaError_t e;
	int i, rc, side;

	for (i = 0; i < 2; i++)
		if (ev_get(&l->dev[i]) < 0)
			return -1;
	/* a chunked kernel: its odd chunks on the side stream,
	 * after whatever came before the round's first chunk */
	side = l->dchunks > 0 || l->dnext + n < l->total;
	if (side && l->dchunks == 0) {
		if (ev_get(&l->dpre) < 0)
			return -1;
		e = cudaEventRecord(l->dpre, l->stream);
		if (!CU_OK(e))
			return cufail(e, "cudaEventRecord");
	}
	if (side && (l->dchunks & 1u)) {
		/* block 0 of each chunk moves the fresh-block counter, and
		 * side by side their writes may land in any order: the host
		 * sets it before the slot's next persistent launch */
		rt->ks_dirty[l->slot >> 3] |=
		    (unsigned char)(1u << (l->slot & 7u));
		if (rt->dstream == NULL &&
		    !CU_OK(e = cudaStreamCreateWithFlags(&rt->dstream,
						cudaStreamNonBlocking)))
			return cufail(e, "cudaStreamCreate");
		e = cudaStreamWaitEvent(rt->dstream, l->dpre, 0);
		if (!CU_OK(e))
			return cufail(e, "cudaStreamWaitEvent");
		cs = rt->dstream;
		l->daux = 1;
	}
	memset(&c, 0, sizeof(c));
	c.ks = rt->d_ks + l->slot;
	c.st = rt->d_st + l->sti;
	c.runs = l->d_runs;
	c.first = l->dnext;
	c.gx = l->grid.x;
	c.gy = l->grid.y;
	c.gz = l->grid.z;
	c.next_after = l->dnext + n == l->total ? 0u : l->dnext + n;
	c.last_lb = l->dnext + n - 1u;
	c.stamp = l->dchunks == 0;
	/* gs_rtlogic.c writes the GS__DGRID_* values as numbers */
	_Static_assert(GS__DGRID_DIV == 0u && GS__DGRID_ROWS == 1u &&
		       GS__DGRID_1D == 2u, "gs__direct_grid's modes");
	gs__direct_grid(&l->grid, l->dnext, n, &g, &c.rows, &c.y0);
	if (c.stamp)
		rt->st[l->sti]._rsv[0] = rt->st[l->sti]._rsv[1] = 0;
	rc = l->k->launch_direct(g, l->block, l->shmem, cs, &c, l->args);
	if (rc != 0)
		return fail(GS_ECUDA, "launch of kernel %s: %s", l->k->name,
			    cudaGetErrorString((cudaError_t)rc));
	e = cudaEventRecord(l->dev[l->dchunks % 2], cs);
	if (!CU_OK(e))
		return cufail(e, "cudaEventRecord");
	/* the last chunk: later work on the stream comes after all */
	if (l->dnext + n == l->total && direct_join(l) < 0)
		return -1;
	l->dnext += n;
	l->dround += n;
	l->dchunks++;
	rt->stats.kernel_runs++;
	return 0;
}

/* The span of l's direct chunks this round (all done): the first
 * chunk's block 0 started, the last chunk's last block ended
 * (%globaltimer, as the loop's spans). */
static void
direct_span(const struct gs__launch *l, uint64_t *start, uint64_t *end)
{
	const volatile struct gs__status *st = &rt->st[l->sti];

	*start = st->_rsv[0];
	*end = st->_rsv[1];
	if (*end < *start)
		*end = *start;
}

/*
 * A direct record in the wait: count the chunks done; while `more` (no
 * suspend pending) keep two in flight; once the last is done and no more
 * will come, write the record's status as a persistent kernel's last
 * block does (span: block 0's start stamp plus the events' time).
 */
static int
direct_poll(struct gs__launch *l, int more)
{
	struct gs__status *st = &rt->st[l->sti];
	uint64_t t0, t1;
	cudaError_t e;
	unsigned int n;

	if (*(volatile unsigned int *)&st->seq == l->seq)
		return 0;
	while (l->dseen < l->dchunks) {
		e = cudaEventQuery(l->dev[l->dseen % 2]);
		if (e == cudaErrorNotReady)
			break;
		if (!CU_OK(e))
			return cufail(e, "kernel failed");
		l->dseen++;
	}
	if (more && l->dnext < l->total && l->dchunks - l->dseen < 2) {
		if ((n = direct_next(l)) != 0)
			return launch_direct(l, n);
		/* no chunk (a contender came and the blocks are too long
		 * for a contended chunk, or GSHARE_DIRECT=alone, or no
		 * estimate): the round ends with those on the GPU and the
		 * next one runs the rest in the loop */
		more = 0;
	}
	if (!more && l->dnext < l->total && direct_join(l) < 0)
		return -1;
	if (l->dseen < l->dchunks || (l->dnext < l->total && more))
		return 0;
	direct_span(l, &t0, &t1);
	st->tmin = t0;
	st->tmax = t1;
	st->done = l->dround;
	st->finished = l->dnext == l->total;
	st->fresh_left = l->dnext < l->total;
	st->redo_head = l->redo_head;
	st->redo_tail = l->redo_tail;
	st->overflow = 0;
	st->parked = 0;
	st->yields = 0;
	__atomic_store_n(&st->seq, l->seq, __ATOMIC_RELEASE);
	return 0;
}

/* The rest of a kernel that ran direct so far goes persistent (or a
 * kernel starts persistent in a slot whose counter side-by-side chunks
 * may have left stale): its fresh-block counter moves to the first
 * block not run direct, in stream order, after the chunks (block 0 of
 * each chunk wrote it too, but chunks side by side may have written it
 * in any order). */
static int
ks_next_set(struct gs__launch *l)
{
	unsigned long long a = (unsigned long long)(uintptr_t)
			       &(rt->d_ks + l->slot)->next;
	cudaError_t e;

	if (rt->wv32 != NULL && rt->wv32(l->stream, a, l->dnext, 0) == 0)
		return 0;
	/* pageable source: copied out before the call returns */
	e = cudaMemcpyAsync((void *)(uintptr_t)a, &l->dnext,
			    sizeof(l->dnext), cudaMemcpyHostToDevice,
			    l->stream);
	return CU_OK(e) ? 0 : cufail(e, "fresh-block counter copy");
}

/* The next launch's seq (0 is never one: a status not yet written). */
static unsigned int
next_seq(void)
{
	if (++rt->seq == 0)
		++rt->seq;
	return rt->seq;
}

/* A persistent launch's context as the record stands, its report in
 * rt->st[sti]; the caller sets the rest (partition, generation, seq,
 * predecessor, chain). */
static void
kctx_fill(const struct gs__launch *l, unsigned int sti, struct gs_kctx *c)
{
	memset(c, 0, sizeof(*c));
	c->ks = rt->d_ks + l->slot;
	c->redo = l->d_redo;
	c->flag = rt->d_flag;
	c->st = rt->d_st + sti;
	c->runs = l->d_runs;
	c->rpc = l->d_rpc;
	c->ring = l->d_ring;
	c->io_stage = l->d_istage;
	c->total = l->total;
	c->gx = l->grid.x;
	c->gy = l->grid.y;
	c->gz = l->grid.z;
	c->redo_cap = l->redo_cap;
	c->redo_begin = l->redo_head;
	c->redo_end = l->redo_tail;
	c->batch = l->batch;
	c->nphys = l->nphys;
	c->io_out = l->io_out;
}

/* Put one record on the GPU for generation gen. */
static int
launch_one(struct gs__launch *l, unsigned int gen, struct gs__launch *pred)
{
	struct gs_kctx c;
	cudaError_t e;
	unsigned int dn;
	int rc;

	rt->acct_range = rt->sm_range;
	if ((dn = direct_blocks(l, gen, pred)) != 0) {
		l->run_stream = l->stream;
		if (launch_direct(l, dn) < 0)
			return -1;
		l->seq = next_seq();
		l->gen = gen;
		l->pred = NULL;
		l->launched = 1;
		l->direct = 1;
		return 0;
	}
	if (!l->pers && (l->dnext > 0 ||
	    (rt->ks_dirty[l->slot >> 3] & (1u << (l->slot & 7u))))) {
		if (ks_next_set(l) < 0)
			return -1;
		rt->ks_dirty[l->slot >> 3] &=
		    (unsigned char)~(1u << (l->slot & 7u));
	}
	l->pers = 1;
	if (pred != NULL && direct_complete(pred))
		pred = NULL;	/* the stream orders it */

	if (l->nready > 0) {
		/* completed I/O: append to the ring, in up to two pieces */
		unsigned int pos = l->redo_tail % l->redo_cap;
		unsigned int n1 = l->redo_cap - pos;

		if (n1 > l->nready)
			n1 = l->nready;
		e = cudaMemcpyAsync(l->d_redo + pos, l->ready,
				    n1 * sizeof(unsigned int),
				    cudaMemcpyHostToDevice, l->stream);
		if (CU_OK(e) && n1 < l->nready)
			e = cudaMemcpyAsync(l->d_redo, l->ready + n1,
					    (l->nready - n1) *
					    sizeof(unsigned int),
					    cudaMemcpyHostToDevice, l->stream);
		if (!CU_OK(e))
			return cufail(e, "cudaMemcpyAsync(ready)");
		l->redo_tail += l->nready;
		l->nready = 0;
	}
	kctx_fill(l, l->sti, &c);
	c.pred_finished = pred != NULL ? &(rt->d_ks + pred->slot)->finished :
					 NULL;
	l->run_stream = l->stream;
	if (rt->sm_range != 0 && rt->cfg.sm_map == GS__MAP_GREEN &&
	    (e = green_stream(l)) != cudaSuccess)
		return cufail(e, "space partition (green stream)");
	if (l->run_stream != l->stream && (rt->acct_range & 0xffffu) != 0)
		/* green: the partition's resident blocks only */
		c.nphys = gs__nphys(l->slots / (unsigned int)rt->sms,
				    rt->acct_range & 0xffffu, l->total);
	if (rt->sm_range != 0 && l->run_stream == l->stream) {
		if (rt->cfg.sm_map == GS__MAP_RAW ||
		    rt->cfg.sm_map == GS__MAP_RANK)
			c.sm_range = gs__rank_range(rt->sm_range, rt->smid,
						    rt->smid_n);
		else	/* blocks, or green unavailable: a share of the
			 * block slots (docs/space.md) */
			c.nphys = gs__part_blocks(l->nphys, rt->sm_range,
						  (unsigned int)rt->sms);
	}
	if (!l->fresh_left) {
		/* only the ring's blocks are left (continuations, the rest
		 * of a stopped round): one hardware block each at most, not
		 * a grid of idle ones that start, find nothing and leave */
		unsigned int q = l->redo_tail - l->redo_head;

		if (q == 0)
			q = 1;
		if (q < c.nphys)
			c.nphys = q;
	}
	c.gen = gen;
	c.seq = next_seq();
	c.pred_seq = pred != NULL ? pred->seq : 0;
	l->seq = c.seq;
	l->gen = gen;
	l->pred = pred;
	rc = l->k->launch(c.nphys, l->block, l->shmem, l->run_stream, &c,
			  l->args);
	if (rc != 0)
		return fail(GS_ECUDA, "launch of kernel %s: %s", l->k->name,
			    cudaGetErrorString((cudaError_t)rc));
	l->launched = 1;
	rt->stats.kernel_runs++;
	return 0;
}

/* ---- RPC service ---- */

static int
push_ready(struct gs__launch *l, unsigned int lb)
{
	l->ready[l->nready++] = lb;
	l->io_out--;
	return 0;
}

static int
copy_to_device(unsigned long long dst, const void *src, size_t n)
{
	cudaError_t e;

	e = cudaMemcpyAsync((void *)(uintptr_t)dst, src, n,
			    cudaMemcpyHostToDevice, rt->iostream);
	if (CU_OK(e))
		e = cudaStreamSynchronize(rt->iostream);
	if (!CU_OK(e))
		return cufail(e, "cudaMemcpy(io)");
	return 0;
}

/* File read at an offset: done at once, in staging-buffer chunks. */
static int
serve_pread(struct gs__launch *l, unsigned int lb)
{
	volatile struct gs__rpc *s = &l->rpc[lb];
	long long off = s->off, got = 0;
	unsigned long long len = s->len, dst = s->dst;
	int fd = s->fd;

	if (l->istage != NULL && len <= GS__INLINE) {
		ssize_t n;

		do {
			n = pread(fd, l->istage + (size_t)lb * GS__INLINE,
				  (size_t)len, (off_t)off);
		} while (n < 0 && errno == EINTR);
		s->result = n < 0 ? -errno : n;
		s->staged = 1;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		s->op = GS__RPC_DONE;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return push_ready(l, lb);
	}
	s->staged = 0;
	while ((unsigned long long)got < len) {
		size_t want = len - (unsigned long long)got;
		ssize_t n;

		if (want > GS__STAGE)
			want = GS__STAGE;
		n = pread(fd, rt->stage, want, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			got = -errno;
			break;
		}
		if (n == 0)
			break;
		if (copy_to_device(dst + (unsigned long long)got, rt->stage,
				   (size_t)n) < 0)
			return -1;
		got += n;
	}
	s->result = got;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	s->op = GS__RPC_DONE;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return push_ready(l, lb);
}

/*
 * Stream reads on fd, which poll says is readable: the waiters on fd
 * (oldest first) that ask for the same length share one read(2), each
 * taking its length of the bytes in order (what consecutive reads would
 * have returned); the last may get a short read.  Returns how many
 * waiters were served, or -1; *full: the read took all it asked for
 * (more may be there).
 */
static int
serve_fd(int fd, int *full)
{
	size_t idx[256], k = 0, j, q;
	unsigned long long len = 0;
	ssize_t n;
	int served = 0, ndma = 0;
	cudaError_t e = cudaSuccess;

	for (j = 0; j < rt->npend && k < 256; j++) {
		volatile struct gs__rpc *s =
		    &rt->pend[j].l->rpc[rt->pend[j].lb];
		unsigned long long l1 = s->len > GS__STAGE ? GS__STAGE : s->len;

		if (s->fd != fd)
			continue;
		if (k == 0)
			len = l1;
		else if (l1 != len || (k + 1) * len > GS__STAGE)
			break;
		idx[k++] = j;
	}
	if (k == 0)
		return 0;
	do {
		n = read(fd, rt->stage, (size_t)(k * len));
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	*full = n > 0 && (unsigned long long)n == k * len;
	for (q = 0; q < k; q++) {
		struct gs__pending_read *p = &rt->pend[idx[q]];
		volatile struct gs__rpc *s = &p->l->rpc[p->lb];
		long long res;

		if (n < 0) {
			res = -errno;
		} else if ((unsigned long long)n > q * len) {
			unsigned long long left =
			    (unsigned long long)n - q * len;

			res = (long long)(left > len ? len : left);
		} else if (q == 0) {
			res = 0;	/* end of file */
		} else {
			break;		/* no bytes left for this one */
		}
		s->staged = 0;
		if (res > 0 && p->l->istage != NULL && len <= GS__INLINE) {
			memcpy(p->l->istage + (size_t)p->lb * GS__INLINE,
			       (char *)rt->stage + q * len, (size_t)res);
			s->staged = 1;
		} else if (res > 0) {
			e = cudaMemcpyAsync((void *)(uintptr_t)s->dst,
					    (char *)rt->stage + q * len,
					    (size_t)res, cudaMemcpyHostToDevice,
					    rt->iostream);
			ndma++;
		}
		if (!CU_OK(e))
			return cufail(e, "cudaMemcpyAsync(io)");
		s->result = res;
		served++;
	}
	if (ndma)
		e = cudaStreamSynchronize(rt->iostream);
	if (!CU_OK(e))
		return cufail(e, "cudaStreamSynchronize(io)");
	for (q = 0; q < (size_t)served; q++) {
		struct gs__pending_read *p = &rt->pend[idx[q]];

		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		p->l->rpc[p->lb].op = GS__RPC_DONE;
		push_ready(p->l, p->lb);
		p->l = NULL;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* drop the served ones, keeping the order of the rest */
	for (j = 0, q = 0; j < rt->npend; j++)
		if (rt->pend[j].l != NULL)
			rt->pend[q++] = rt->pend[j];
	rt->npend = q;
	return served;
}

/* Serve pending stream reads: wait up to timeout_ms (as poll(2)) for the
 * first, then take what is readable now: one read per stream, again only
 * where a read took all it asked for (more waiters than one read serves).
 * Bytes that arrive meanwhile wait for the next call: a writer that keeps
 * writing would otherwise hold the continuations back until every waiter
 * had its bytes.  Returns how many were served, or -1. */
static int
poll_streams(int timeout_ms)
{
	struct pollfd pf[64];
	int served = 0;

	while (rt->npend > 0) {
		nfds_t n = 0, i;
		size_t j;
		int r, progress = 0;

		for (j = 0; j < rt->npend && n < 64; j++) {
			int fd = rt->pend[j].l->rpc[rt->pend[j].lb].fd;

			for (i = 0; i < n; i++)
				if (pf[i].fd == fd)
					break;
			if (i < n)
				continue;
			pf[n].fd = fd;
			pf[n].events = POLLIN;
			pf[n].revents = 0;
			n++;
		}
		r = poll(pf, n, served ? 0 : timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fail(GS_EIO, "poll: %s", strerror(errno));
		if (r == 0)
			return served;
		for (i = 0; i < n; i++) {
			int full = 0;

			if (pf[i].revents == 0)
				continue;
			r = serve_fd(pf[i].fd, &full);
			if (r < 0)
				return -1;
			if (r > 0)
				served += r;
			if (r > 0 && full)
				progress = 1;
		}
		if (!progress)
			return served;
	}
	return served;
}

/* New requests from the ring of one I/O record. */
static int
scan_ring(struct gs__launch *l)
{
	for (;;) {
		volatile unsigned int *e = &l->ring[l->ring_head % l->total];
		unsigned int v = *e, lb;

		if (v == 0)
			return 0;
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*e = 0;
		l->ring_head = gs__ring_next(l->ring_head, l->total);
		lb = v - 1u;
		if (lb >= l->total || l->rpc[lb].op != GS__RPC_READ)
			return fail(GS__EINTERNAL, "kernel %s: bad RPC ring "
				    "entry %u", l->k->name, v);
		l->io_out++;
		rt->stats.io_requests++;
		if (l->rpc[lb].off >= 0) {
			if (serve_pread(l, lb) < 0)
				return -1;
			continue;
		}
		if (rt->npend == rt->cappend) {
			size_t nc = rt->cappend ? rt->cappend * 2 : 64;
			struct gs__pending_read *n;

			n = realloc(rt->pend, nc * sizeof(*n));
			if (n == NULL)
				return fail(GS_ENOMEM, "out of memory");
			rt->pend = n;
			rt->cappend = nc;
		}
		rt->pend[rt->npend].l = l;
		rt->pend[rt->npend].lb = lb;
		rt->npend++;
	}
}

static int
service_io(int poll_now)
{
	size_t i;

	if (rt->io_kernels == 0)
		return 0;
	for (i = 0; i < rt->ntmp; i++)
		if (rt->tmp[i]->rpc != NULL && scan_ring(rt->tmp[i]) < 0)
			return -1;
	if (poll_now && poll_streams(0) < 0)
		return -1;
	return 0;
}

/* ---- the wait ---- */

static int
tmp_add(struct gs__launch *l)
{
	if (rt->ntmp == rt->captmp) {
		size_t nc = rt->captmp ? rt->captmp * 2 : 64;
		struct gs__launch **n = realloc(rt->tmp, nc * sizeof(*n));
		struct gs__span *s = realloc(rt->spans, nc * sizeof(*s));

		if (n != NULL)
			rt->tmp = n;
		if (s != NULL)
			rt->spans = s;
		if (n == NULL || s == NULL)
			return fail(GS_ENOMEM, "out of memory");
		rt->captmp = nc;
	}
	rt->tmp[rt->ntmp++] = l;
	return 0;
}

/*
 * Wait until every record in rt->tmp has left the GPU, serving RPCs and
 * (forced mode) writing the suspend as an agent would.  *exit_ns: when
 * the last one was seen gone; *susp: a suspend was pending at exit.
 */
static unsigned int page_partition(volatile struct gs_ctlpage *page);

/* The host raises the device suspend flag to gen on stream st (a resize,
 * or a round without the watcher warp): a stream memory write (the GPU's
 * front end, no copy engine) where the driver offers one, else a 4-byte
 * copy.  Not on the watcher's stream while a watcher runs there: the
 * write would wait for it. */
static int
flag_raise(unsigned int gen, cudaStream_t st)
{
	cudaError_t e;

	if (rt->wv32 != NULL) {
		if (rt->wv32(st,
			     (unsigned long long)(uintptr_t)rt->d_flag, gen,
			     0) == 0)
			return 0;
		rt->wv32 = NULL;	/* not here: copy from now on */
	}
	*rt->hflag = gen;
	e = cudaMemcpyAsync(rt->d_flag, rt->hflag, sizeof(*rt->hflag),
			    cudaMemcpyHostToDevice, st);
	if (!CU_OK(e))
		return cufail(e, "suspend flag copy");
	return 0;
}

/*
 * A chained relaunch.  The record's next launch is queued on its stream
 * behind the running kernel, so that it starts as soon as the GPU
 * retires that one (about 3 us on the H200) rather than when the host
 * has seen the report, turned round and launched (about 20 us with no
 * block of the job on the GPU; docs/benchmarks.md, run 227).
 * GSHARE_CHAIN=2 (the default) queues it while the round runs, where a
 * suspend may come (forced, or others contend): the launch call, 6-10
 * us behind a running kernel, then lies in no eviction's path; 1 queues
 * it when the suspend comes.  The queued kernel takes the ring's span
 * from the state its predecessor's last block left (gs_kctx.chain) and
 * does nothing if that one finished the kernel (nothing is chained to
 * that launch: chain_noop).  Attached, the job may not run again until
 * the agent says so: the launch waits behind cuStreamWaitValue32 on the
 * gate word, which the next round raises to its generation
 * (chain_release).  Forced suspensions (no agent, the runtime writes
 * the suspend) resume at once: no gate; the suspend names the round it
 * stops (the page's susp_gen), so that the chained round's sentinels,
 * which may start before the page says run again, let it be.
 * One record at most, alone in its round, persistent, without I/O, on
 * its own stream and the whole GPU.
 */
static int
chain_ok(volatile struct gs_ctlpage *page)
{
	const struct gs__launch *l;

	if (!rt->cfg.chain || rt->chain != NULL || page == NULL ||
	    rt->ntmp != 1 || rt->cfg.evict_idle || rt->resize_sent ||
	    rt->sm_range != 0)
		return 0;
	/* a round with the watcher warp launches it first, to have its
	 * slot: a chained kernel would hold every slot before it */
	if (rt->cfg.watcher == GS__WATCH_ALWAYS ||
	    (rt->cfg.watcher == GS__WATCH_AUTO && page != rt->fake))
		return 0;
	l = rt->tmp[0];
	if (l->direct || !l->pers || l->chain_noop || l->k->kabi < 3u ||
	    l->pred != NULL ||
	    (l->k->flags & GS_KF_IO) || l->run_stream != l->stream ||
	    rt->st[l->sti].seq == l->seq)
		return 0;
	if (rt->gen + 1u == GS__IMM_GEN || rt->gen + 1u == 0u)
		return 0;
	if (page == rt->fake)	/* the suspend came from here */
		return 1;
	return rt->ww32 != NULL;
}

static int
chain_launch(volatile struct gs_ctlpage *page)
{
	struct gs__launch *l = rt->tmp[0];
	unsigned int gen = rt->gen + 1u, seq;
	unsigned int sti = l->sti == l->slot ? l->slot + GS__SLOTS : l->slot;
	int gated = page != rt->fake, rc;
	struct gs_kctx c;
	uint64_t t0;

	if (gated && rt->ww32(l->stream, rt->d_gate, gen, 0) != 0) {
		/* CU_STREAM_WAIT_VALUE_GEQ (0), cyclic: not here, and
		 * nothing queued; relaunches wait for the report from now
		 * on */
		rt->ww32 = NULL;
		return 0;
	}
	seq = next_seq();
	/* the ring's span comes from the device state (c.chain) */
	kctx_fill(l, sti, &c);
	c.gen = gen;
	c.seq = seq;
	c.chain = l->seq;
	t0 = rt->trace != NULL ? now_ns() : 0;
	rc = l->k->launch(c.nphys, l->block, l->shmem, l->stream, &c,
			  l->args);
	if (rt->trace != NULL) {
		rt->th.chq = now_ns();
		rt->th.chc = rt->th.chq - t0;
	}
	if (rc != 0) {
		if (gated)	/* the wait queued alone: let it pass */
			*rt->gate = gen;
		return fail(GS_ECUDA, "launch of kernel %s: %s", l->k->name,
			    cudaGetErrorString((cudaError_t)rc));
	}
	/* the generation is this launch's: the next round takes it */
	rt->gen = gen;
	l->chained = 1;
	l->chain_seq = seq;
	l->chain_gen = gen;
	l->chain_sti = sti;
	rt->chain = l;
	rt->chain_gated = gated;
	rt->stats.kernel_runs++;
	return 0;
}

/* The next hold's first round: the chained launch may start (gated:
 * raise the gate to its generation). */
static void
chain_release(void)
{
	if (rt->chain_gated)
		__atomic_store_n(rt->gate, rt->chain->chain_gen,
				 __ATOMIC_RELEASE);
	rt->chain = NULL;
}

/* The chained launch must not run (a new partition, a new control page,
 * gs_finalize): the flag goes to its generation first, so that its
 * blocks leave at once, and the gate opens for it.  Its report comes
 * as any other launch's (nothing done); the record is relaunched after
 * it. */
static int
chain_cancel(void)
{
	cudaError_t e;

	if (rt->chain == NULL)
		return 0;
	/* rt->gen: the chain's, or a later hold's */
	if (flag_raise(rt->gen, rt->iostream) < 0)
		return -1;
	e = cudaStreamSynchronize(rt->iostream);
	if (!CU_OK(e))
		return cufail(e, "suspend flag write");
	chain_release();
	return 0;
}

/*
 * Space mode: the agent changed this job's partition.  The round's
 * kernels leave as on a suspension (the generation written into the
 * device flag that the watcher raises), and run_hold relaunches them at
 * once on the new partition: a resize costs one eviction, not a wait for
 * the next suspension.
 */
static int
resize_stop(void)
{
	unsigned int gen = rt->cur_gen;

	rt->resize_sent = 1;
	rt->rz_stop_ns = now_ns();
	/* a relaunch queued at the round's start (GSHARE_CHAIN=2) leaves
	 * at once too: the flag to its generation, its gate open */
	if (rt->chain != NULL) {
		gen = rt->gen;
		chain_release();
	}
	/* the round's watcher may run on wstream */
	return flag_raise(gen, rt->iostream);
}

/* Another allocation on the GPU holds or wants the token (or the agent
 * does not say). */
static int
contended(volatile struct gs_ctlpage *page)
{
	return !gs_ctl_alone(page);
}

/* An attached round with others on the GPU. */
static int
round_contended(void)
{
	return rt->attached && rt->page != NULL && rt->page != rt->fake &&
	       contended(rt->page);
}

/*
 * GSHARE_RELEASE=early: the flag is raised, the blocks are leaving and
 * are expected to be gone within GSHARE_RELEASE_LEAD_US (gs__early_due);
 * give the token back now, so that the next holder's launch overlaps
 * this eviction's tail (under one MPS server its blocks take the SMs ours
 * leave).  The GPU time reported is the hold's so far, the current round
 * counted up to now; what the tail adds goes with the next release.
 */
static int
release_early(volatile struct gs_ctlpage *page, uint64_t now)
{
	struct gs_run_result r;
	struct gs_error err;

	if (rt->sess == NULL || page == rt->fake ||
	    !gs_session_holding(rt->sess))
		return 0;
	memset(&r, 0, sizeof(r));
	r.reason = GS_REL_SUSPENDED;
	r.released = 1;		/* the blocks are still leaving */
	rt->early_gpu_ns = rt->hold_gpu_ns +
			   (now > rt->round_launch_ns ? now - rt->round_launch_ns
						      : 0);
	rt->early_tasks = rt->hold_tasks;
	r.gpu_ns = gs__carry_add(&rt->carry_gpu_ns, rt->early_gpu_ns);
	r.block_tasks = rt->early_tasks + rt->carry_tasks;
	r.exit_ns = now;
	rt->released = 1;
	rt->carry_tasks = 0;
	if (gs_session_release(rt->sess, &r, &err) < 0)
		return fail_err(&err);
	return 0;
}

/* Does the wait query tmp[i]'s stream?  Not for a direct record whose
 * every chunk's event was seen (done: the event follows the kernel), nor
 * for a stream queried for an earlier record (each query takes the
 * driver about a microsecond). */
static int
stream_to_query(size_t i)
{
	const struct gs__launch *l = rt->tmp[i];
	size_t j;

	if (l->direct && l->dseen == l->dchunks)
		return 0;
	for (j = 0; j < i; j++)
		if (rt->tmp[j]->run_stream == l->run_stream &&
		    !(rt->tmp[j]->direct &&
		      rt->tmp[j]->dseen == rt->tmp[j]->dchunks))
			return 0;
	return 1;
}

/* A kernel failed on one of the records' streams?  spin: also wait
 * until each stream is idle (the last blocks have left). */
static int
streams_check(int spin)
{
	size_t i;
	cudaError_t e;

	for (i = 0; i < rt->ntmp; i++) {
		if (!stream_to_query(i))
			continue;
		while ((e = cudaStreamQuery(rt->tmp[i]->run_stream)) ==
		       cudaErrorNotReady && spin)
			;
		if (e != cudaSuccess && e != cudaErrorNotReady)
			return cufail(e, "kernel failed");
	}
	return 0;
}

/* Only direct chunks are on the GPU: the event after the oldest one not
 * seen done yet (NULL when a persistent record still runs: its end comes
 * through its status, not an event). */
static cudaEvent_t
direct_wait_event(void)
{
	cudaEvent_t ev = NULL;
	size_t i;

	for (i = 0; i < rt->ntmp; i++) {
		const struct gs__launch *l = rt->tmp[i];

		if (!l->direct) {
			if (rt->st[l->sti].seq != l->seq)
				return NULL;
			continue;
		}
		if (ev == NULL && l->dseen < l->dchunks)
			ev = l->dev[l->dseen % 2];
	}
	return ev;
}

static int
wait_launched(volatile struct gs_ctlpage *page, uint64_t *exit_ns,
	      int *susp)
{
	/* no spin while an I/O kernel is queued (gs__wait_spin_ns); a
	 * suspend still turns the spin on */
	struct gs__waitpol pol = {
		gs__wait_spin_ns(&rt->cfg, rt->io_kernels > 0), 2000, 20000 };
	uint64_t t0 = now_ns(), cur = 0, deadline = 0, iter = 0;
	uint64_t next_query = t0 + GS__QUERY_NS;
	int pend_seen = 0;
	size_t i;

	if (page != NULL && rt->fake != NULL && rt->cfg.force_max_ns)
		deadline = t0 + gs__rand_range(&rt->rng, rt->cfg.force_min_ns,
					       rt->cfg.force_max_ns);
	for (;;) {
		int all = 1, pending, watch, more;
		uint64_t now, sl;

		pending = rt->released || (page != NULL &&
			  __atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
			  GS_CTL_SUSPEND);
		more = rt->cur_gen != 0 && !pending && !rt->resize_sent;
		for (i = 0; i < rt->ntmp; i++)
			if (rt->tmp[i]->direct &&
			    direct_poll(rt->tmp[i], more) < 0)
				return -1;
		for (i = 0; i < rt->ntmp; i++) {
			const volatile struct gs__status *st =
			    &rt->st[rt->tmp[i]->sti];
			if (st->seq != rt->tmp[i]->seq) {
				all = 0;
				break;
			}
		}
		/* top the streams up while no suspend (or resize) is
		 * pending */
		if (rt->cur_gen != 0 && !pending && !rt->resize_sent &&
		    rt->chain == NULL && unlaunched()) {
			if (launch_queued(rt->cur_gen, 0) < 0)
				return -1;
			all = 0;
		}
		if (all)
			break;
		iter++;
		if (service_io((iter & 31u) == 0) < 0)
			return -1;
		now = now_ns();
		if (!rt->resize_sent && (rt->chain == NULL || !pending) &&
		    rt->cur_gen != 0 && page != NULL &&
		    page != rt->fake &&
		    __atomic_load_n(&page->part_gen, __ATOMIC_ACQUIRE) !=
		    rt->round_part_gen && page_partition(page) !=
		    rt->sm_range && resize_stop() < 0)
			return -1;
		if (deadline && now >= deadline && page->suspend == 0) {
			page->susp_gen = rt->cur_gen;
			page->suspend_set_ns = now;
			__atomic_store_n(&page->suspend, GS_CTL_SUSPEND,
					 __ATOMIC_RELEASE);
			deadline = 0;
		}
		/* attached: publish progress about every ms (the agent's
		 * accounting sees long holds; the session ends standalone
		 * slices and watches its link there) */
		if (rt->sess != NULL && page != NULL &&
		    now >= rt->next_progress_ns) {
			struct gs_error perr;

			rt->next_progress_ns = now + 1000000u;
			(void)gs_session_progress(rt->sess, rt->hold_gpu_ns,
						  rt->hold_tasks, &perr);
		}
		/* a kernel that failed writes no report: query the streams
		 * about every ms.  Each query is a driver call of a
		 * microsecond or more (now and then ten), so none in the
		 * first ms of a suspend's wait, where it would delay seeing
		 * the last block's report */
		if (pending && !pend_seen) {
			pend_seen = 1;
			if (next_query < now + GS__QUERY_NS)
				next_query = now + GS__QUERY_NS;
		}
		if (now >= next_query) {
			next_query = now + GS__QUERY_NS;
			if (streams_check(0) < 0)
				return -1;
		}
		pending = rt->released || (page != NULL &&
			  __atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
			  GS_CTL_SUSPEND);
		/* no watcher warp this round: the flag comes from here
		 * (flag_raise: no SM involved) */
		if (pending && rt->host_watch && !rt->host_raised) {
			if (flag_raise(rt->cur_gen, rt->wstream) < 0)
				return -1;
			rt->host_raised = 1;
			if (rt->trace != NULL)
				rt->th.hraise = now;
		}
		/* early: once the eviction is expected to end within the
		 * hand-over's lead (the suspend was written at
		 * suspend_set_ns; est is from there too) */
		if (pending && !rt->released && page != NULL &&
		    gs__early_due(&rt->cfg, rt->evict_est_ns,
				  now > page->suspend_set_ns ?
				  now - page->suspend_set_ns : 0) &&
		    (rt->host_raised || !rt->host_watch) &&
		    release_early(page, now) < 0)
			return -1;
		/* the relaunch queued now, behind the leaving kernel (after
		 * the raise and the early release: the driver's launch takes
		 * microseconds) */
		if (pending && chain_ok(page) && chain_launch(page) < 0)
			return -1;
		/* GSHARE_CHAIN=2: queued while the round runs, where a
		 * suspend may come (forced, or others contend), so that no
		 * launch call lies in an eviction's path */
		if (!pending && rt->cfg.chain == 2 && rt->cur_gen != 0 &&
		    chain_ok(page) &&
		    (page == rt->fake || contended(page)) &&
		    chain_launch(page) < 0)
			return -1;
		/* others wait and the slice ends soon: a suspend may come,
		 * stay awake for it (a sleep's wake-up would leave the GPU
		 * idle after the exit) */
		/* the host is the watcher (GSHARE_WATCHER=host): while
		 * others contend, a suspend may come at any time */
		watch = !pending && page != NULL && rt->host_watch &&
			rt->cfg.watcher == GS__WATCH_HOST && contended(page);
		/* only direct chunks running, no suspend to watch for (no
		 * contender: while others contend, a suspend seen late is
		 * a late release, and more chunks queued meanwhile), no I/O
		 * to serve: wait as the
		 * driver does, on the oldest chunk's event, which sees it end
		 * at once (a sleep sees it up to 20 us late, a spin burns a
		 * core); then top up and look again */
		if (!pending && !watch && rt->npend == 0 &&
		    !rt->resize_sent) {
			cudaEvent_t ev = direct_wait_event();

			if (ev != NULL) {
				cudaError_t e = cudaEventSynchronize(ev);

				if (!CU_OK(e))
					return cufail(e, "kernel failed");
				continue;
			}
		}
		sl = gs__wait_step(&pol, now - t0, pending || watch, &cur);
		/* a forced suspend is due at a known time: awake for it */
		if (sl && deadline)
			sl = deadline <= now ? 0 :
			     deadline - now < sl ? deadline - now : sl;
		if (sl && rt->cur_gen != 0 && unlaunched())
			sl = 0;	/* kernels to top up: stay close */
		if (sl) {
			struct timespec ts = { 0, (long)sl };
			nanosleep(&ts, NULL);
		} else if (watch) {
			/* a long watch: on a node short of cores, a
			 * runnable thread (another job's) goes first */
			sched_yield();
		}
	}
	rt->seen_ns = now_ns();
	*susp = rt->released || (page != NULL &&
		__atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
		GS_CTL_SUSPEND);
	/* Every persistent kernel's last block wrote its report as its
	 * last act, and every direct chunk's end event was seen: no block
	 * of ours is on an SM.  The round ends here: whatever comes next (the
	 * next round, the next holder, a wait for I/O) queues behind the
	 * kernels' retirement on the GPU, and a kernel that failed wrote no
	 * report and is caught by the periodic query above.  Only a round
	 * that finishes the work (run_hold), a resize, and the wait for
	 * immediate launches spin until the streams say the kernels are
	 * done, as the caller's synchronize promises (a blocking
	 * synchronize would add a wake-up). */
	rt->unspun = page != NULL && !rt->cfg.evict_idle && !rt->resize_sent;
	if (rt->unspun) {
		*exit_ns = rt->seen_ns;
	} else {
		if (streams_check(1) < 0)
			return -1;
		*exit_ns = now_ns();
	}
	/* requests posted just before the exit, and the streams' bytes
	 * for them that are there now: the next round runs every
	 * continuation that can run (polled only every 32nd look above) */
	return service_io(1);
}

/* Check the run counters of a finished record (GSHARE_CHECK_ONCE). */
static int
check_once(struct gs__launch *l)
{
	unsigned int *h;
	unsigned int i, bad = 0, first = 0;
	cudaError_t e;

	h = malloc(l->total * sizeof(*h));
	if (h == NULL)
		return fail(GS_ENOMEM, "out of memory");
	e = cudaMemcpy(h, l->d_runs, l->total * sizeof(*h),
		       cudaMemcpyDeviceToHost);
	if (!CU_OK(e)) {
		free(h);
		return cufail(e, "cudaMemcpy(runs)");
	}
	for (i = 0; i < l->total; i++)
		if (h[i] != 1u && bad++ == 0)
			first = i;
	if (bad) {
		unsigned int v = h[first];
		free(h);
		return fail(GS__EINTERNAL, "kernel %s: %u logical blocks did "
			    "not run exactly once (block %u ran %u times)",
			    l->k->name, bad, first, v);
	}
	rt->stats.once_checked += l->total;
	free(h);
	return 0;
}

/* GSHARE_TRACE: one line per block-time sample, "est KERNEL d|p SPAN DONE
 * CONC CONTENDED BEFORE AFTER" (ns): what picks direct chunks or the loop */
static void
trace_est(const struct gs__launch *l, const struct gs__status *st, int cont,
	  uint64_t was, uint64_t now)
{
	fprintf(rt->trace, "est %s %c %llu %llu %u %d %llu %llu\n",
		l->k->name, l->direct ? 'd' : 'p',
		(unsigned long long)(st->tmax - st->tmin),
		(unsigned long long)st->done,
		l->direct ? l->slots : l->nphys, cont,
		(unsigned long long)was, (unsigned long long)now);
}

/*
 * After a wait: account every launched record, drop the finished ones.
 * *runnable: some unfinished record has work it can do now.
 */
static int
reap(uint64_t *gpu_ns, uint64_t *tasks, int *runnable)
{
	size_t i, ns = 0;
	int cont = rt->round_cont || round_contended();

	rt->last_tmax = 0;
	rt->round_tmin = 0;
	*gpu_ns = 0;
	*tasks = 0;
	*runnable = 0;
	for (i = 0; i < rt->ntmp; i++) {
		struct gs__launch *l = rt->tmp[i];
		const struct gs__status *st = &rt->st[l->sti];
		/* this run went on with blocks an earlier one yielded, or
		 * yielded some: `done` counts pieces of blocks */
		int partial = st->yields != 0 || l->pieces;

		if (st->overflow)
			return fail(GS__EINTERNAL, "kernel %s: redo buffer "
				    "overflow", l->k->name);
		rt->spans[ns].start = st->tmin;
		rt->spans[ns].end = st->tmax;
		if (st->tmax > rt->last_tmax)
			rt->last_tmax = st->tmax;
		if (st->tmin != 0 && (rt->round_tmin == 0 ||
				      st->tmin < rt->round_tmin))
			rt->round_tmin = st->tmin;
		ns++;
		if (st->done > 0 && st->tmax > st->tmin) {
			struct gs__occ *o = occ_find(l->k, l->block, l->shmem);
			uint64_t *est = o == NULL ? NULL :
					l->direct ? &o->task_d : &o->task_p;

			/* a contended round's spans may hold another job's
			 * blocks or time slices: one such sample made the
			 * direct copy look slower than the loop, and the
			 * pick then never tried it again */
			if (est != NULL) {
				uint64_t was = *est;

				*est = gs__task_est(*est, st->tmax - st->tmin,
				    st->done, l->direct ? l->slots : l->nphys,
				    cont, partial);
				if (rt->trace != NULL)
					trace_est(l, st, cont, was, *est);
			}
		}
		*tasks += st->done;
		rt->stats.yields += st->yields;
		l->launched = 0;
		l->direct = 0;
		l->dround = l->dchunks = l->dseen = 0;
		l->daux = 0;
		if (l->chained) {
			/* its relaunch is queued: that launch is the
			 * record's now (a finished kernel's does nothing and
			 * reports finished; the record goes then) */
			l->chained = 0;
			l->launched = 1;
			l->seq = l->chain_seq;
			l->gen = l->chain_gen;
			l->sti = l->chain_sti;
			l->pred = NULL;
			*runnable = 1;
			if (st->finished) {
				l->chain_noop = 1;
				continue;
			}
		} else if (st->finished && l->io_out == 0 &&
			   l->nready == 0) {
			l->finished = 1;
			if (rt->cfg.check_once && check_once(l) < 0)
				return -1;
			gs__queues_remove(&rt->q, l->stream, &l->node);
			launch_free(l);
			continue;
		}
		l->redo_head = st->redo_head;
		l->redo_tail = st->redo_tail;
		l->pieces = l->redo_tail != l->redo_head &&
			    (l->pieces || st->yields != 0);
		l->fresh_left = st->fresh_left != 0;
		if (st->done > 0 && st->tmax > st->tmin && !partial)
			l->batch = gs__batch_adapt(l->batch,
			    (st->tmax - st->tmin) * l->nphys / st->done,
			    l->total, l->nphys, rt->cfg.batch);
		if (st->fresh_left || l->redo_tail != l->redo_head ||
		    l->nready)
			*runnable = 1;
	}
	rt->ntmp = 0;
	*gpu_ns = gs__span_union(rt->spans, ns);
	rt->stats.gpu_ns += *gpu_ns;
	rt->stats.block_tasks += *tasks;
	return 0;
}

/* Space mode: the SM range the agent set in the control page, read
 * once per round (each relaunch). */
static unsigned int
page_partition(volatile struct gs_ctlpage *page)
{
	if (page == NULL)
		return 0;
	return gs__partition(
	    __atomic_load_n(&page->part_gen, __ATOMIC_ACQUIRE),
	    __atomic_load_n(&page->sm_first, __ATOMIC_RELAXED),
	    __atomic_load_n(&page->sm_count, __ATOMIC_RELAXED),
	    (unsigned int)rt->sms);
}

/*
 * Space mode: the rank table (gs_smmap.h).  Partitions are ranges of SM
 * ranks; the kernels test %smid, whose numbering may have gaps.  A probe
 * that cannot see every SM (other processes' blocks hold some the whole
 * time) leaves the table empty: raw smid ranges, said once on stderr
 * when a partition is asked for by GSHARE_PARTITION.
 */
static int
sm_table(void)
{
	unsigned int nsmid = 0, want = (unsigned int)rt->sms;
	int tell = rt->cfg.part_count != 0 || rt->cfg.part_random;
	int e;

	e = gs__smid_probe(rt->iostream, want, 8, rt->smid, GS__SMIDS,
			   &rt->smid_n, &nsmid);
	if (e != 0)
		return cufail((cudaError_t)e, "SM probe");
	if (rt->smid_n != want) {
		if (tell)
			fprintf(stderr, "gshare: SM probe saw %u of %u SMs: "
				"partitions are raw smid ranges\n",
				rt->smid_n, want);
		rt->smid_n = 0;
	} else if (tell) {
		fprintf(stderr, "gshare: %u SMs, smids %u..%u, nsmid %u\n",
			want, rt->smid[0], rt->smid[want - 1], nsmid);
	}
	return 0;
}

/* Without an agent: GSHARE_PARTITION's range (tests and benchmarks);
 * `random` draws a new range of 8-SM granules for every round. */
static unsigned int
own_partition(void)
{
	unsigned int sms = (unsigned int)rt->sms, g = sms / 8u, n, f;

	if (rt->cfg.part_random && g > 0) {
		n = (unsigned int)gs__rand_range(&rt->rng, 1, g);
		f = (unsigned int)gs__rand_range(&rt->rng, 0, g - n);
		return gs__partition(1, f * 8u, n * 8u, sms);
	}
	return gs__partition(rt->cfg.part_count != 0, rt->cfg.part_first,
			     rt->cfg.part_count, sms);
}

/*
 * Put queued records on the GPU, at most GS__DEPTH per stream that have
 * not reported back yet: a suspend then leaves few kernels behind that
 * would only start, see the flag and leave, and the wait tops the streams
 * up as kernels finish.  first: a new run (rt->tmp starts empty).
 */
static int
launch_queued(unsigned int gen, int first)
{
	size_t i;

	if (first) {
		rt->ntmp = 0;
		rt->round_cont = round_contended();
	} else if (!rt->round_cont) {
		rt->round_cont = round_contended();
	}
	for (i = 0; i < rt->q.n; i++) {
		struct gs__qnode *n;
		struct gs__launch *prev = NULL;
		unsigned int inflight = 0;

		for (n = rt->q.q[i].head; n != NULL; n = n->next) {
			struct gs__launch *l = (struct gs__launch *)n;

			if (l->launched) {
				if (first && tmp_add(l) < 0)
					return -1;
				if (rt->st[l->sti].seq != l->seq)
					inflight++;
			} else {
				if (inflight >= (rt->round_cont ?
						 GS__DEPTH_CONT : GS__DEPTH))
					break;
				if (launch_one(l, gen, prev) < 0)
					return -1;
				if (tmp_add(l) < 0)
					return -1;
				inflight++;
			}
			/* the rest of it comes in chunks (direct_poll):
			 * what follows it waits */
			if (l->direct && l->dnext < l->total)
				break;
			prev = l;
		}
	}
	return 0;
}

/* Any queued record not launched yet? */
static int
unlaunched(void)
{
	size_t i;

	for (i = 0; i < rt->q.n; i++) {
		struct gs__qnode *n;

		for (n = rt->q.q[i].head; n != NULL; n = n->next)
			if (!((struct gs__launch *)n)->launched)
				return 1;
	}
	return 0;
}

enum { RUN_DONE, RUN_SUSPENDED, RUN_IOWAIT };

/*
 * One token hold.  Relaunches while there is runnable work and no suspend;
 * fills res (gpu_ns, block_tasks, exit_ns) and returns RUN_* or -1.
 */
static void
trace_round(uint64_t gpu, uint64_t exit_ns)
{
	uint64_t t0 = rt->round_tmin, t1 = rt->last_tmax;

	if (t0 != 0 && (rt->th.tmin == 0 || t0 < rt->th.tmin))
		rt->th.tmin = t0;
	if (t1 > rt->th.tmax)
		rt->th.tmax = t1;
	rt->th.seen = rt->seen_ns;
	rt->th.exit = exit_ns;
	rt->th.gpu += gpu;
	rt->th.rounds++;
}

/* One line per hold: executor start (grant received), first launch
 * (host CLOCK_MONOTONIC ns), first block start, last block exit
 * (%globaltimer ns), exits seen, stream drained, executor end (host), GPU
 * time (union of the kernels' spans), rounds, how it ended, (host) when
 * the watcher's launch began, when the suspend was written (0: none),
 * (%globaltimer) when the watcher raised the flag, (host) when the host
 * copied it, the hold's block-tasks, (host) when the gs_synchronize that
 * made the hold began, whether the hold began with a chained launch, and
 * (host) when this hold's chained relaunch call returned and how long it
 * took (0: none); every 128 holds the clocks' offset again (the two
 * clocks drift apart). */
static void
trace_hold(int rc)
{
	static const char *why[] = { "done", "susp", "iowait" };

	/* not while a chained launch holds every block slot (one at its
	 * gate holds none): the probe's kernel would wait for its end, and
	 * the host with it */
	if (++rt->trace_n % 128 == 0 &&
	    (rt->chain == NULL || rt->chain_gated))
		trace_offset(4);

	fprintf(rt->trace, "hold %llu %llu %llu %llu %llu %llu %llu %llu %u "
		"%s %llu %llu %llu %llu %llu %llu %u %llu %llu\n",
		(unsigned long long)rt->th.exec,
		(unsigned long long)rt->th.launch,
		(unsigned long long)rt->th.tmin,
		(unsigned long long)rt->th.tmax,
		(unsigned long long)rt->th.seen,
		(unsigned long long)rt->th.exit,
		(unsigned long long)now_ns(),
		(unsigned long long)rt->th.gpu, rt->th.rounds,
		rc >= 0 && rc <= 2 ? why[rc] : "?",
		(unsigned long long)rt->th.wlaunch,
		(unsigned long long)rt->th.sset,
		(unsigned long long)rt->th.wraise,
		(unsigned long long)rt->th.hraise,
		(unsigned long long)rt->hold_tasks,
		(unsigned long long)rt->sync_ns, rt->th.chained,
		(unsigned long long)rt->th.chq,
		(unsigned long long)rt->th.chc);
}

/* The offset of the two clocks, host ns - %globaltimer ns: the least of
 * n probes (a thread writes the device clock into host-mapped memory,
 * the host reads its own when it sees it), which is the offset plus the
 * write's way over PCIe (about a microsecond).  Written to the trace as
 * "offset HOST_NS OFFSET"; 0, or -1 when a probe failed. */
static int
trace_offset(int n)
{
	volatile unsigned long long *probe = rt->wtime + 1;
	volatile unsigned long long *d_probe = rt->d_wtime + 1;
	int64_t best = INT64_MAX;
	uint64_t t1 = 0;
	int i;

	for (i = 0; i < n; i++) {
		uint64_t give_up = now_ns() + 1000000000ull;
		int rc;

		*probe = 0;
		rc = gs__gtimer_probe(rt->wstream, d_probe);
		if (rc != 0)
			return cufail((cudaError_t)rc, "clock probe");
		while (*probe == 0 && now_ns() < give_up)
			;
		t1 = now_ns();
		if (*probe == 0)
			return fail(GS_EIO, "GSHARE_TRACE: the clock probe "
				    "did not answer in 1 s");
		if ((int64_t)(t1 - *probe) < best)
			best = (int64_t)(t1 - *probe);
	}
	fprintf(rt->trace, "offset %llu %lld\n", (unsigned long long)t1,
		(long long)best);
	return 0;
}

/*
 * Does this round need the watcher warp?  It takes one block slot of an
 * SM for the whole round, and a grid that fills every slot then runs a
 * second, nearly empty wave (H100: an eater of exactly blocks-per-SM x
 * SMs logical blocks, 10 % slower), and its launch is on every
 * hand-over's path.  In attached rounds the host loop is there while the
 * kernels run (they run only inside gs_synchronize), so by default
 * (GSHARE_WATCHER=host) it is the watcher: it spins while others contend
 * and raises the flag (flag_raise) when it sees the suspend.  =auto keeps
 * the warp in contended rounds, =always in every round.  Forced
 * suspensions (no agent, the page is the runtime's own) follow the same
 * choice, the host by default: its loop sets the suspend, so it raises
 * the flag too (=auto: the host, nobody contends).
 */
static int
need_watcher(volatile struct gs_ctlpage *page)
{
	if (rt->cfg.watcher == GS__WATCH_ALWAYS)
		return 1;
	if (rt->cfg.watcher == GS__WATCH_HOST || page == rt->fake)
		return 0;
	return contended(page);
}

static int
run_hold(volatile struct gs_ctlpage *page, struct gs_run_result *res)
{
	uint64_t gpu, tasks, exit_ns = 0, hold_t0;
	int susp = 0, runnable, rc, queued;

	memset(res, 0, sizeof(*res));
	rt->hold_gpu_ns = 0;
	rt->hold_tasks = 0;
	rt->next_progress_ns = 0;
	rt->resize_sent = 0;
	rt->released = 0;
	rt->early_gpu_ns = 0;
	hold_t0 = now_ns();
	for (;;) {
		unsigned int gen;

		if (page != NULL && page != rt->fake)
			rt->round_part_gen = __atomic_load_n(&page->part_gen,
							     __ATOMIC_ACQUIRE);
		rt->sm_range = page != NULL && page != rt->fake ?
			       page_partition(page) : own_partition();
		/* a chained launch runs in this round, on the whole GPU
		 * (or, a partition now, leaves at once: chain_cancel) */
		if (rt->chain != NULL && (rt->sm_range != 0 || page == NULL) &&
		    chain_cancel() < 0)
			return -1;
		if (rt->chain != NULL) {
			gen = rt->chain->chain_gen;
			chain_release();
			if (rt->trace != NULL)
				rt->th.chained = 1;
		} else {
			gen = ++rt->gen;
			if (gen == GS__IMM_GEN)
				gen = rt->gen = 1;
		}
		/* green contexts are made while nothing of ours runs:
		 * their creation waits for the watcher otherwise */
		green_prepare();
		if (rt->trace != NULL && rt->th.wlaunch == 0)
			rt->th.wlaunch = now_ns();
		rt->host_watch = page != NULL && !need_watcher(page);
		rt->host_raised = 0;
		*rt->wtime = 0;
		if (page != NULL && !rt->host_watch) {
			/* quit only grows: an older watcher still leaving
			 * must keep seeing quit >= its gen */
			rc = gs__watch_launch(rt->wstream,
					      &rt->d_page->suspend,
					      rt->d_quit, rt->d_flag, gen,
					      rt->cfg.watch_ns, rt->d_wtime);
			if (rc != 0)
				return cufail((cudaError_t)rc,
					      "watcher launch");
		}
		rt->cur_gen = gen;
		rt->round_launch_ns = now_ns();
		if (rt->trace != NULL && rt->th.launch == 0)
			rt->th.launch = rt->round_launch_ns;
		if (launch_queued(gen, 1) < 0)
			return -1;
		if (page != NULL && page != rt->fake &&
		    rt->round_part_gen != rt->applied_part_gen) {
			/* a new partition in effect: changed during this
			 * hold (a resize, not a grant), its latency (once:
			 * the range may have been read newer than its
			 * generation) */
			uint64_t set = __atomic_load_n(&page->part_set_ns,
						       __ATOMIC_RELAXED);
			uint64_t t = now_ns(), d = t - set;

			if (set != 0 && set >= hold_t0 && set <= t &&
			    rt->sm_range != rt->applied_range) {
				uint64_t k = rt->nrz++ % GS__RZS;
				int st = rt->rz_stop_ns >= set;

				rt->rz[k] = d;
				rt->rz_seen[k] = st ? rt->rz_stop_ns - set : 0;
				rt->rz_out[k] = st && rt->rz_exit_ns > set ?
						rt->rz_exit_ns - set : 0;
			}
			rt->applied_part_gen = rt->round_part_gen;
			rt->applied_range = rt->sm_range;
		}
		rt->resize_sent = 0;
		rc = wait_launched(page, &exit_ns, &susp);
		if (rt->resize_sent)
			rt->rz_exit_ns = now_ns();
		if (page != NULL)
			*rt->quit = gen;
		if (rc < 0)
			return -1;
		/* records this round never reached: a resize stops the
		 * top-ups, and what the round launched may all have
		 * finished (reap clears launched) */
		queued = unlaunched();
		if (reap(&gpu, &tasks, &runnable) < 0)
			return -1;
		runnable |= queued;
		if (rt->trace != NULL) {
			trace_round(gpu, exit_ns);
			/* one line per round: its first launch, first block,
			 * last block, exits seen, streams done, reaped */
			fprintf(rt->trace, "round %llu %llu %llu %llu %llu "
				"%llu %llu\n",
				(unsigned long long)rt->round_launch_ns,
				(unsigned long long)rt->round_tmin,
				(unsigned long long)rt->last_tmax,
				(unsigned long long)rt->seen_ns,
				(unsigned long long)exit_ns,
				(unsigned long long)now_ns(),
				(unsigned long long)tasks);
		}
		res->gpu_ns += gpu;
		res->block_tasks += tasks;
		if (page != NULL && page != rt->fake)
			__atomic_fetch_add(&page->space_gpu_ns,
					   gs__space_scaled(gpu, rt->acct_range,
						(unsigned int)rt->sms),
					   __ATOMIC_RELEASE);
		rt->hold_gpu_ns = res->gpu_ns;
		rt->hold_tasks = res->block_tasks;
		res->exit_ns = exit_ns;
		if (gs__queues_total(&rt->q) == 0) {
			/* the work is done: the synchronize promises
			 * kernels that are done */
			if (rt->unspun && streams_check(1) < 0)
				return -1;
			res->done = 1;
			return RUN_DONE;
		}
		if (susp) {
			uint64_t ev = exit_ns - page->suspend_set_ns;

			if (rt->trace != NULL) {
				rt->th.sset = page->suspend_set_ns;
				rt->th.wraise = *rt->wtime;
			}
			rt->stats.suspensions++;
			rt->stats.evict_ns_last = ev;
			rt->stats.evict_ns_sum += ev;
			rt->evict_est_ns = gs__evict_smooth(rt->evict_est_ns, ev);
			rt->evs[rt->nevs++ % GS__EVS] = ev;
			rt->stats.evict_seen_ns_sum += rt->seen_ns -
						       page->suspend_set_ns;
			if (*rt->wtime && rt->last_tmax > *rt->wtime)
				rt->stats.evict_dev_ns_sum += rt->last_tmax -
							      *rt->wtime;
			if (ev > rt->stats.evict_ns_max)
				rt->stats.evict_ns_max = ev;
			res->reason = GS_REL_SUSPENDED;
			return RUN_SUSPENDED;
		}
		if (!runnable && rt->npend > 0) {
			res->reason = GS_REL_IOWAIT;
			return RUN_IOWAIT;
		}
		if (!runnable)
			return fail(GS__EINTERNAL, "work left but nothing "
				    "runnable and no I/O pending");
	}
}

/* Block until at least one stream read completes. */
static int
wait_io(void)
{
	while (rt->npend > 0) {
		int r = poll_streams(100);

		if (r < 0)
			return -1;
		if (r > 0)
			return 0;
	}
	return 0;
}

/* ---- drivers ---- */

static int
drive_standalone(void)
{
	struct gs_run_result res;
	volatile struct gs_ctlpage *page = rt->fake;
	int rc;

	while (gs__queues_total(&rt->q) > 0) {
		if (page != NULL)
			__atomic_store_n(&page->suspend, GS_CTL_RUN,
					 __ATOMIC_RELEASE);
		if (rt->trace != NULL) {
			/* standalone holds are few and long: the clocks'
			 * offset at each, for the round lines; forced
			 * suspensions make them many and short, and four
			 * probes (a launch and a wait each) would sit
			 * between every two (trace_hold takes one every
			 * 128 holds) */
			if (page == NULL)
				trace_offset(4);
			memset(&rt->th, 0, sizeof(rt->th));
			rt->th.exec = now_ns();
		}
		rc = run_hold(page, &res);
		if (rc < 0)
			return -1;
		if (rt->trace != NULL)
			trace_hold(rc);
		if (rc == RUN_IOWAIT) {
			rt->stats.iowaits++;
			if (wait_io() < 0)
				return -1;
		}
	}
	return 0;
}

static int map_page(void);

/* The sentinels' words beside the device flag (struct gs__flagw): the
 * control page's suspend word as the GPU sees it, or none.  Written while
 * no persistent kernel of ours runs (gs_init, follow_page). */
static int
sentinels_set(void)
{
	struct gs__flagw fw;
	cudaError_t e;

	memset(&fw, 0, sizeof(fw));
	if (rt->d_page != NULL && rt->cfg.sentinels) {
		fw.nsent = rt->cfg.sentinels;
		fw.hsusp = (unsigned long long)(uintptr_t)&rt->d_page->suspend;
	}
	e = cudaMemcpy((char *)rt->d_flag + offsetof(struct gs__flagw, nsent),
		       &fw.nsent, sizeof(fw) - offsetof(struct gs__flagw, nsent),
		       cudaMemcpyHostToDevice);
	if (!CU_OK(e))
		return cufail(e, "sentinel words");
	return 0;
}

/* The session re-attached to a restarted agent and has a new control page
 * (gs_session_page_epoch): the device watcher and the sentinels must read
 * that one.  The last hold's watcher is told to quit, and its persistent
 * kernels may still be leaving (an early release): wait for both before
 * the old page is unregistered. */
static int
follow_page(void)
{
	uint64_t ep = gs_session_page_epoch(rt->sess);
	cudaError_t e;
	size_t i;

	if (ep == rt->page_epoch)
		return 0;
	/* a chained launch would read the old page's word: it leaves at
	 * once, and the streams are waited for below */
	if (chain_cancel() < 0)
		return -1;
	e = cudaStreamSynchronize(rt->wstream);
	if (!CU_OK(e))
		return cufail(e, "watcher stream");
	for (i = 0; i < rt->q.n; i++) {
		struct gs__qnode *n;

		for (n = rt->q.q[i].head; n != NULL; n = n->next) {
			struct gs__launch *l = (struct gs__launch *)n;

			if (!l->launched)
				continue;
			e = cudaStreamSynchronize(l->run_stream);
			if (!CU_OK(e))
				return cufail(e, "kernel failed");
		}
	}
	/* no kernel looks at the old page from here on */
	rt->d_page = NULL;
	if (sentinels_set() < 0)
		return -1;
	if (rt->page_registered) {
		cudaHostUnregister((void *)(uintptr_t)rt->page);
		rt->page_registered = 0;
	}
	rt->page = gs_session_page(rt->sess);
	/* the epoch is taken only once the new page is in use: a failure
	 * here is tried again at the next hold */
	if (map_page() < 0 || sentinels_set() < 0)
		return -1;
	rt->page_epoch = ep;
	return 0;
}

/* Executor for gs_session_run: one token hold. */
static int
exec_run(void *ctx, volatile struct gs_ctlpage *page,
	 struct gs_run_result *res, struct gs_error *err)
{
	int rc;

	(void)ctx;
	if (rt->trace != NULL) {
		memset(&rt->th, 0, sizeof(rt->th));
		rt->th.exec = now_ns();
	}
	if (follow_page() < 0) {
		*err = last_err;
		return -1;
	}
	rc = run_hold(page, res);
	if (rt->released) {
		/* the token went back early: what the tail added goes
		 * with the next release */
		res->released = 1;
		if (rc >= 0)
			gs_session_evicted(rt->sess, res->exit_ns);
		rt->carry_gpu_ns += (int64_t)res->gpu_ns -
				    (int64_t)rt->early_gpu_ns;
		if (res->block_tasks > rt->early_tasks)
			rt->carry_tasks += res->block_tasks - rt->early_tasks;
	} else {
		res->gpu_ns = gs__carry_add(&rt->carry_gpu_ns, res->gpu_ns);
		res->block_tasks += rt->carry_tasks;
		rt->carry_tasks = 0;
	}
	if (rc < 0) {
		*err = last_err;
		return -1;
	}
	if (rt->trace != NULL)
		trace_hold(rc);
	if (rc == RUN_IOWAIT)
		rt->stats.iowaits++;
	return 0;
}

/* Executor wait: the GPU was given back because every block waits on I/O;
 * block until some I/O completes. */
static int
exec_wait(void *ctx, struct gs_error *err)
{
	(void)ctx;
	if (wait_io() < 0) {
		*err = last_err;
		return -1;
	}
	return 0;
}

/* ---- holds for the task pools (gs_rtint.h) ---- */

struct foreign {
	gs__hold_fn fn;
	void *ctx;
};

/* One foreign hold, with the watcher and the suspension accounting of
 * run_hold. */
static int
foreign_hold(struct foreign *f, volatile struct gs_ctlpage *page,
	     struct gs_run_result *res)
{
	struct gs__hold h;
	unsigned int gen = ++rt->gen;
	int rc;

	if (gen == GS__IMM_GEN)
		gen = rt->gen = 1;
	memset(res, 0, sizeof(*res));
	memset(&h, 0, sizeof(h));
	if (page != NULL) {
		*rt->wtime = 0;
		rc = gs__watch_launch(rt->wstream, &rt->d_page->suspend,
				      rt->d_quit, rt->d_flag, gen,
				      rt->cfg.watch_ns, rt->d_wtime);
		if (rc != 0)
			return cufail((cudaError_t)rc, "watcher launch");
		if (rt->fake != NULL && rt->cfg.force_max_ns)
			h.force_at_ns = now_ns() +
			    gs__rand_range(&rt->rng, rt->cfg.force_min_ns,
					   rt->cfg.force_max_ns);
	}
	h.gen = gen;
	h.d_flag = rt->d_flag;
	h.page = page;
	h.wtime = rt->wtime;
	rc = f->fn(f->ctx, &h, res);
	if (page != NULL)
		*rt->quit = gen;
	if (rc < 0)
		return -1;
	rt->stats.gpu_ns += res->gpu_ns;
	if (!res->done && gs__hold_suspended(&h)) {
		uint64_t ev = res->exit_ns - page->suspend_set_ns;

		rt->stats.suspensions++;
		rt->stats.evict_ns_last = ev;
		rt->stats.evict_ns_sum += ev;
		rt->evs[rt->nevs++ % GS__EVS] = ev;
		if (ev > rt->stats.evict_ns_max)
			rt->stats.evict_ns_max = ev;
		res->reason = GS_REL_SUSPENDED;
	}
	return 0;
}

static int
exec_foreign(void *ctx, volatile struct gs_ctlpage *page,
	     struct gs_run_result *res, struct gs_error *err)
{
	if (follow_page() < 0 || foreign_hold(ctx, page, res) < 0) {
		*err = last_err;
		return -1;
	}
	return 0;
}

int
gs__rt_drive(gs__hold_fn fn, void *ctx)
{
	struct foreign f = { fn, ctx };
	struct gs_run_result res;

	if (rt->sess != NULL) {
		struct gs_executor ex;
		struct gs_error err;

		int rc = 0;

		memset(&ex, 0, sizeof(ex));
		ex.run = exec_foreign;
		gs_error_clear(&err);
		pthread_mutex_lock(&rt->kmu);
		if (gs_session_run(rt->sess, &ex, &f, &err) < 0)
			rc = fail_err(&err);
		pthread_mutex_unlock(&rt->kmu);
		return rc;
	}
	do {
		if (rt->fake != NULL)
			__atomic_store_n(&rt->fake->suspend, GS_CTL_RUN,
					 __ATOMIC_RELEASE);
		if (foreign_hold(&f, rt->fake, &res) < 0)
			return -1;
	} while (!res.done);
	return 0;
}

void
gs__hold_force(const struct gs__hold *h, uint64_t now)
{
	if (h->force_at_ns && now >= h->force_at_ns &&
	    h->page->suspend == 0) {
		h->page->susp_gen = h->gen;
		h->page->suspend_set_ns = now;
		__atomic_store_n(&h->page->suspend, GS_CTL_SUSPEND,
				 __ATOMIC_RELEASE);
	}
}

int
gs__hold_suspended(const struct gs__hold *h)
{
	return h->page != NULL &&
	       __atomic_load_n(&h->page->suspend, __ATOMIC_ACQUIRE) ==
	       GS_CTL_SUSPEND;
}

int
gs__fail(int code, const char *fmt, ...)
{
	va_list ap;

	last_err.code = code;
	va_start(ap, fmt);
	vsnprintf(last_err.msg, sizeof(last_err.msg), fmt, ap);
	va_end(ap);
	return -code;
}

int
gs__last_rc(void)
{
	return -(last_err.code ? last_err.code : GS_EIO);
}

int
gs__cufail(int e, const char *what)
{
	return cufail((cudaError_t)e, what);
}

int
gs__rt_ready(void)
{
	return rt == NULL ? fail(GS_ESTATE, "gs_init has not been called")
			  : 0;
}

int
gs__rt_queued(void)
{
	return rt->sess != NULL || rt->fake != NULL;
}

int
gs__rt_sms(void)
{
	return rt->sms;
}

uint64_t
gs__now_ns(void)
{
	return now_ns();
}

/*
 * The keeper: while the session keeps the token between synchronizes,
 * sleep on the control page (the agent wakes it when it writes the page)
 * and give the token back as soon as the agent suspends it, another
 * allocation holds or wants the GPU, or the keep's deadline passes.  The
 * caller's thread holds kmu while it drives the session, so the two
 * never use it at once.
 */
static void *
keep_main(void *arg)
{
	struct gs__rt *r = arg;

	pthread_mutex_lock(&r->kmu);
	while (!r->kquit) {
		volatile struct gs_ctlpage *page;
		uint64_t now, wait;

		if (!gs_session_kept(r->sess)) {
			pthread_cond_wait(&r->kcv, &r->kmu);
			continue;
		}
		page = gs_session_page(r->sess);
		now = now_ns();
		if (__atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
		    GS_CTL_SUSPEND || !gs_ctl_alone(page) ||
		    now >= r->keep_until) {
			struct gs_error err;

			/* a failure to send: the link is gone, and with it
			 * the hold (the session knows) */
			(void)gs_session_give_back(r->sess, &err);
			continue;
		}
		/* a wake-up missed, or an agent that sends none: look
		 * again within 500 us */
		wait = r->keep_until - now;
		if (wait > 500000u)
			wait = 500000u;
		pthread_mutex_unlock(&r->kmu);
		gs_ctl_wait(page, wait);
		pthread_mutex_lock(&r->kmu);
	}
	pthread_mutex_unlock(&r->kmu);
	return NULL;
}

/* Executor: keep the token after this synchronize?  While nobody else
 * holds or wants the GPU, so that the next synchronize needs no round
 * trip through the agent (whose wake-up from idle costs 60-100 us and
 * more).  kmu is held. */
static int
exec_keep(void *ctx, volatile struct gs_ctlpage *page)
{
	(void)ctx;
	if (rt->cfg.keep_ns == 0 || !gs_ctl_alone(page) ||
	    __atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
	    GS_CTL_SUSPEND)
		return 0;
	if (rt->kth_up && rt->kth_pid != getpid())
		return 0;	/* a child of fork: its parent's keeper */
	if (!rt->kth_up) {
		pthread_attr_t a;
		sigset_t all, old;
		int rc;

		/* the keeper never takes the application's signals */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 64 * 1024);
		rc = pthread_create(&rt->kth, &a, keep_main, rt);
		pthread_attr_destroy(&a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			rt->cfg.keep_ns = 0;	/* release at once now */
			return 0;
		}
		rt->kth_up = 1;
		rt->kth_pid = getpid();
	}
	rt->keep_until = now_ns() + rt->cfg.keep_ns;
	pthread_cond_signal(&rt->kcv);
	return 1;
}

/* Give a kept token back and stop the keeper (gs_finalize). */
static void
keep_stop(void)
{
	struct gs_error err;

	if (rt->sess == NULL)
		return;
	pthread_mutex_lock(&rt->kmu);
	(void)gs_session_give_back(rt->sess, &err);
	rt->kquit = 1;
	pthread_cond_signal(&rt->kcv);
	pthread_mutex_unlock(&rt->kmu);
	if (rt->kth_up && rt->kth_pid == getpid())
		pthread_join(rt->kth, NULL);
	rt->kth_up = 0;
}

static int
drive_attached(void)
{
	struct gs_executor ex;
	struct gs_error err;
	int rc = 0;

	memset(&ex, 0, sizeof(ex));
	ex.run = exec_run;
	ex.wait = exec_wait;
	ex.keep = exec_keep;
	gs_error_clear(&err);
	if (gs__queues_total(&rt->q) == 0)
		return 0;
	pthread_mutex_lock(&rt->kmu);
	if (gs_session_run(rt->sess, &ex, NULL, &err) < 0)
		rc = fail_err(&err);
	pthread_mutex_unlock(&rt->kmu);
	return rc;
}

/* ---- public API ---- */

GS_API const char *
gs_version(void)
{
	return "1.2";
}

GS_API const char *
gs_errmsg(void)
{
	return last_err.msg;
}

GS_API const char *
gs_strerror(int rc)
{
	switch (rc) {
	case GSHARE_OK: return "success";
	case GSHARE_EINVAL: return "invalid argument";
	case GSHARE_ENOMEM: return "out of memory";
	case GSHARE_EIO: return "system call failed";
	case GSHARE_EPROTO: return "protocol error talking to the agent";
	case GSHARE_EVERSION: return "version mismatch";
	case GSHARE_EPERM: return "not permitted by the agent";
	case GSHARE_ENOENT: return "no such allocation";
	case GSHARE_ETIMEDOUT: return "agent timed out";
	case GSHARE_ECONNREFUSED: return "agent not running";
	case GSHARE_ECONFIG: return "bad GSHARE_* environment setting";
	case GSHARE_ECUDA: return "CUDA call failed";
	case GSHARE_ESTATE: return "runtime not in the right state";
	case GSHARE_ECLOSED: return "agent closed the connection";
	case GSHARE_EINTERNAL: return "runtime invariant broken";
	default: return "unknown error";
	}
}

GS_API int
gs_attached(void)
{
	return rt == NULL ? -1 : rt->attached;
}

static void
rt_free(struct gs__rt *r)
{
	size_t i;

	if (r == NULL)
		return;
	if (r->sess != NULL)
		gs_session_close(r->sess);
	if (r->page_registered)
		cudaHostUnregister((void *)(uintptr_t)r->page);
	free(r->fake);
	for (i = 0; i < r->ncache; i++)
		cudaFree(r->cache[i].p);
	for (i = 0; i < r->nhcache; i++)
		cudaFreeHost(r->hcache[i].p);
	free(r->cache);
	if (r->d_flag != NULL)
		cudaFree(r->d_flag);
	if (r->d_ks != NULL)
		cudaFree(r->d_ks);
	if (r->st != NULL)
		cudaFreeHost(r->st);
	if (r->quit != NULL)
		cudaFreeHost((void *)(uintptr_t)r->quit);
	if (r->stage != NULL)
		cudaFreeHost(r->stage);
	if (r->wstream != NULL)
		cudaStreamDestroy(r->wstream);
	if (r->iostream != NULL)
		cudaStreamDestroy(r->iostream);
	if (r->dstream != NULL)
		cudaStreamDestroy(r->dstream);
	gs__green_free(r->green);
	while (r->nevpool > 0)
		cudaEventDestroy(r->evpool[--r->nevpool]);
	if (r->trace != NULL)
		fclose(r->trace);
	free(r->free_slots);
	free(r->pend);
	free(r->tmp);
	free(r->spans);
	gs__queues_free(&r->q);
	pthread_cond_destroy(&r->kcv);
	pthread_mutex_destroy(&r->kmu);
	free(r);
}

static int
map_page(void)
{
	void *d = NULL;
	cudaError_t e;

	e = cudaHostRegister((void *)(uintptr_t)rt->page, GS_CTL_SIZE,
			     cudaHostRegisterMapped |
			     cudaHostRegisterPortable);
	if (!CU_OK(e))
		return cufail(e, "cudaHostRegister(control page)");
	rt->page_registered = 1;
	e = cudaHostGetDevicePointer(&d, (void *)(uintptr_t)rt->page, 0);
	if (!CU_OK(e))
		return cufail(e, "cudaHostGetDevicePointer(control page)");
	rt->d_page = d;
	return 0;
}

/* The device this process uses must be its allocation's GPU (by UUID):
 * a job started with another CUDA_VISIBLE_DEVICES would run outside that
 * GPU's scheduler, beside the jobs holding shares there, and be charged
 * to the wrong GPU. */
static int
check_gpu(void)
{
	struct cudaDeviceProp prop;
	struct gs_error err;
	char have[48];
	cudaError_t e;

	e = cudaGetDeviceProperties(&prop, rt->device);
	if (!CU_OK(e))
		return cufail(e, "cudaGetDeviceProperties");
	if (gs__uuid_format((const unsigned char *)prop.uuid.bytes, have,
			    sizeof(have)) < 0)
		have[0] = '\0';
	if (gs__gpu_check(gs_session_alloc_id(rt->sess),
			  gs_session_gpu_uuid(rt->sess), have, rt->device,
			  &err) < 0)
		return fail_err(&err);
	return 0;
}

GS_API int
gs_init(unsigned int flags)
{
	struct gs_error err;
	cudaError_t e;
	void *d = NULL;
	int lo, hi, rc = GSHARE_ENOMEM;
	unsigned int i;

	gs_error_clear(&err);
	if (rt != NULL)
		return fail(GS_ESTATE, "gs_init: already initialized");
	if ((flags & ~GS_INIT_STANDALONE) != 0)
		return fail(GS_EINVAL, "gs_init: unknown flags 0x%x", flags);
	rt = calloc(1, sizeof(*rt));
	if (rt == NULL)
		return fail(GS_ENOMEM, "out of memory");
	pthread_mutex_init(&rt->kmu, NULL);
	pthread_cond_init(&rt->kcv, NULL);
	gs__queues_init(&rt->q);
	if (gs__config_parse(&rt->cfg, envget, &err) < 0) {
		rc = fail_err(&err);
		goto out_free;
	}
	rt->rng = rt->cfg.seed ? rt->cfg.seed : now_ns() ^ (uint64_t)getpid();
	/* space mode: the agent's partition governs this process, not the
	 * static thread cap the plugins set for jobs without libgshare
	 * (effective only if CUDA is not initialized yet) */
	if (!(flags & GS_INIT_STANDALONE) && getenv(GS_ENV_ALLOC) != NULL)
		unsetenv(GS_ENV_MPS_PCT);
	e = cudaGetDevice(&rt->device);
	if (CU_OK(e))
		e = cudaDeviceGetAttribute(&rt->sms,
					   cudaDevAttrMultiProcessorCount,
					   rt->device);
	if (!CU_OK(e)) {
		rc = cufail(e, "cudaGetDevice");
		goto out_free;
	}
	if (!(flags & GS_INIT_STANDALONE)) {
		if (gs_session_open_env(5000, &rt->sess, &err) < 0) {
			rc = fail_err(&err);
			goto out_free;
		}
	}
	rt->attached = rt->sess != NULL;
	if (rt->attached && (rc = check_gpu()) < 0)
		goto out_free;
	if (rt->attached) {
		/* keeps to the partition the agent writes (space mode) */
		gs_session_set_kind(rt->sess, GS_CTL_JOB_LIBGSHARE);
		rt->page = gs_session_page(rt->sess);
	} else if (rt->cfg.force_max_ns) {
		rt->fake = aligned_alloc(GS_CTL_SIZE, GS_CTL_SIZE);
		if (rt->fake == NULL)
			goto out_free;
		memset(rt->fake, 0, GS_CTL_SIZE);
		rt->fake->magic = GS_CTL_MAGIC;
		rt->fake->version = GS_CTL_VERSION;
		rt->fake->page_size = GS_CTL_SIZE;
		rt->page = rt->fake;
	}
	if (rt->page != NULL && (rc = map_page()) < 0)
		goto out_free;
	rt->sm_range = own_partition();	/* immediate launches */
	e = cudaDeviceGetStreamPriorityRange(&lo, &hi);
	if (CU_OK(e))
		e = cudaStreamCreateWithPriority(&rt->wstream,
						 cudaStreamNonBlocking, hi);
	if (CU_OK(e))
		e = cudaStreamCreateWithFlags(&rt->iostream,
					      cudaStreamNonBlocking);
	if (!CU_OK(e)) {
		rc = cufail(e, "cudaStreamCreate");
		goto out_free;
	}
	if (rt->cfg.sm_map == GS__MAP_RANK && (rc = sm_table()) < 0)
		goto out_free;
	/* 16 bytes: blocks fetch the flag with a 16-byte cp.async, and
	 * with it the sentinels' words (struct gs__flagw) */
	e = cudaMalloc(&d, sizeof(struct gs__flagw));
	if (CU_OK(e)) {
		rt->d_flag = d;
		e = cudaMemset(rt->d_flag, 0, sizeof(struct gs__flagw));
	}
	if (CU_OK(e))
		e = cudaMalloc(&d, GS__SLOTS * sizeof(struct gs__kstate));
	if (CU_OK(e)) {
		rt->d_ks = d;
		e = cudaMemset(rt->d_ks, 0,
			       GS__SLOTS * sizeof(struct gs__kstate));
	}
	if (CU_OK(e))
		e = cudaHostAlloc(&d, 2u * GS__SLOTS *
				  sizeof(struct gs__status),
				  cudaHostAllocMapped |
				  cudaHostAllocPortable);
	if (CU_OK(e)) {
		rt->st = d;
		memset(rt->st, 0, 2u * GS__SLOTS * sizeof(struct gs__status));
		e = cudaHostGetDevicePointer(&d, rt->st, 0);
		rt->d_st = d;
	}
	if (CU_OK(e))
		e = cudaHostAlloc(&d, 64, cudaHostAllocMapped |
					  cudaHostAllocPortable);
	if (CU_OK(e)) {
		rt->quit = d;
		rt->wtime = (volatile unsigned long long *)((char *)d + 8);
		/* + 16: the trace's clock probe */
		rt->hflag = (unsigned int *)((char *)d + 24);
		rt->gate = (volatile unsigned int *)((char *)d + 32);
		*rt->quit = 0;
		*rt->wtime = 0;
		*rt->gate = 0;
		e = cudaHostGetDevicePointer(&d, d, 0);
		rt->d_quit = d;
		rt->d_gate = (unsigned long long)(uintptr_t)d + 32u;
		rt->d_wtime = (volatile unsigned long long *)((char *)d + 8);
	}
	if (CU_OK(e))
		e = cudaHostAlloc(&rt->stage, GS__STAGE, cudaHostAllocDefault);
	if (!CU_OK(e)) {
		rc = cufail(e, "runtime buffers");
		goto out_free;
	}
	if ((rc = sentinels_set()) != GSHARE_OK)
		goto out_free;
	rt->free_slots = malloc(GS__SLOTS * sizeof(unsigned int));
	if (rt->free_slots == NULL)
		goto out_free;
	for (i = 0; i < GS__SLOTS; i++)
		rt->free_slots[i] = GS__SLOTS - 1u - i;
	rt->nfree = GS__SLOTS;
	{
		enum cudaDriverEntryPointQueryResult q;
		void *fn = NULL;

		/* stream memory operations (on by default in Linux drivers
		 * of CUDA 12 and later); flag_raise copies where a write
		 * fails */
		if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32",
		    &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
		    q == cudaDriverEntryPointSuccess)
			rt->wv32 = (int (*)(void *, unsigned long long,
					    unsigned int, unsigned int))fn;
		fn = NULL;
		if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32",
		    &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
		    q == cudaDriverEntryPointSuccess)
			rt->ww32 = (int (*)(void *, unsigned long long,
					    unsigned int, unsigned int))fn;
		(void)cudaGetLastError();
	}
	if ((rc = trace_open()) != GSHARE_OK)
		goto out_free;
	return GSHARE_OK;

out_free:
	if (rc == GSHARE_ENOMEM)
		fail(GS_ENOMEM, "out of memory");
	rt_free(rt);
	rt = NULL;
	return rc;
}

/* GSHARE_TRACE=PREFIX: hold records go to PREFIX.PID (trace_hold). */
static int
trace_open(void)
{
	const char *pfx = envget("GSHARE_TRACE");
	char path[4096];

	if (pfx == NULL || *pfx == '\0')
		return GSHARE_OK;
	snprintf(path, sizeof(path), "%s.%d", pfx, (int)getpid());
	/* appended: a process that calls gs_init again keeps its earlier
	 * records */
	rt->trace = fopen(path, "ae");
	if (rt->trace == NULL)
		return fail(GS_ECONFIG, "GSHARE_TRACE: cannot write %s: %s",
			    path, strerror(errno));
	fprintf(rt->trace, "# gshare hold trace pid %d prog %s\n",
		(int)getpid(), program_invocation_short_name);
	return trace_offset(16) < 0 ? -GS_EIO : GSHARE_OK;
}

static int
setup_io(struct gs__launch *l)
{
	/* one host-mapped buffer: the RPC slots, the ring, and inline
	 * staging for small reads when that stays small */
	size_t rpc_b = (size_t)l->total * sizeof(struct gs__rpc);
	size_t ring_off = (rpc_b + 255u) & ~(size_t)255u;
	size_t ring_b = (size_t)l->total * sizeof(unsigned int);
	size_t st_off = (ring_off + ring_b + 4095u) & ~(size_t)4095u;
	size_t st_b = (size_t)l->total * GS__INLINE;
	int inl = st_b <= GS__ISTAGE_MAX;
	size_t bytes = inl ? st_off + st_b : ring_off + ring_b;
	unsigned char *h, *d;
	void *hv = NULL, *dv = NULL;
	cudaError_t e;

	if (hostbuf_get(bytes, &hv) < 0)
		return -1;
	l->iobuf = hv;
	l->iobuf_bytes = bytes;
	e = cudaHostGetDevicePointer(&dv, hv, 0);
	if (!CU_OK(e))
		return cufail(e, "cudaHostGetDevicePointer(I/O slots)");
	h = hv;
	d = dv;
	memset(h, 0, ring_off + ring_b);
	l->rpc = (struct gs__rpc *)h;
	l->d_rpc = (struct gs__rpc *)d;
	l->ring = (unsigned int *)(h + ring_off);
	l->d_ring = (unsigned int *)(d + ring_off);
	if (inl) {
		l->istage = h + st_off;
		l->d_istage = d + st_off;
	}
	l->ready = malloc((size_t)l->total * sizeof(unsigned int));
	if (l->ready == NULL)
		return fail(GS_ENOMEM, "out of memory");
	return 0;
}

/* Wait for what is on the GPU now (immediate launches) and reap it. */
static int
wait_immediate(void)
{
	struct gs__launch *l;
	uint64_t gpu, tasks, exit_ns;
	size_t i;
	int susp, runnable;

	rt->ntmp = 0;
	for (i = 0; i < rt->q.n; i++) {
		struct gs__qnode *n;

		for (n = rt->q.q[i].head; n != NULL; n = n->next) {
			l = (struct gs__launch *)n;
			if (l->launched && tmp_add(l) < 0)
				return -1;
		}
	}
	if (rt->ntmp == 0)
		return 0;
	if (wait_launched(NULL, &exit_ns, &susp) < 0)
		return -1;
	return reap(&gpu, &tasks, &runnable);
}

GS_API int
gs_launch(const struct gs_kernel *k, struct gs_dim3 grid, struct gs_dim3 block,
	  size_t shmem, const void *args, size_t args_size, void *stream)
{
	struct gs__launch *l = NULL;
	uint64_t total;
	int bps = 0, rc;
	cudaError_t e;
	void *d = NULL;

	if (rt == NULL)
		return fail(GS_ESTATE, "gs_launch before gs_init");
	if (k == NULL || (args_size > 0 && args == NULL))
		return fail(GS_EINVAL, "gs_launch: NULL kernel or args");
	if (k->kabi < 1u || k->kabi > GSHARE_KABI)
		return fail(GS_EVERSION, "kernel %s built for kernel ABI %u, "
			    "library has %u", k->name, k->kabi, GSHARE_KABI);
	if (args_size != k->args_size)
		return fail(GS_EINVAL, "kernel %s: args_size %zu, kernel "
			    "takes %u", k->name, args_size, k->args_size);
	total = (uint64_t)grid.x * grid.y * grid.z;
	if (total == 0 || total > GS__MAX_TOTAL)
		return fail(GS_EINVAL, "kernel %s: grid %ux%ux%u: need 1..%u "
			    "logical blocks", k->name, grid.x, grid.y, grid.z,
			    GS__MAX_TOTAL);
	if (block.x == 0 || block.y == 0 || block.z == 0 ||
	    (uint64_t)block.x * block.y * block.z > 1024u)
		return fail(GS_EINVAL, "kernel %s: bad block %ux%ux%u",
			    k->name, block.x, block.y, block.z);
	if ((rc = occupancy(k, block, shmem, &bps)) < 0)
		return rc;
	if (bps <= 0)
		return fail(GS_EINVAL, "kernel %s: block %ux%ux%u with %zu "
			    "bytes of shared memory does not fit on an SM",
			    k->name, block.x, block.y, block.z, shmem);
	if (rt->nfree == 0 && (rc = gs_synchronize()) < 0)
		return rc;
	l = calloc(1, sizeof(*l));
	if (l == NULL)
		return fail(GS_ENOMEM, "out of memory");
	l->slot = UINT32_MAX;
	l->k = k;
	if (k->flags & GS_KF_IO)
		rt->io_kernels++;
	l->grid = grid;
	l->block = block;
	l->shmem = shmem;
	l->stream = (cudaStream_t)stream;
	l->run_stream = l->stream;
	l->total = (unsigned int)total;
	l->fresh_left = 1;
	l->nphys = gs__nphys((unsigned int)bps, (unsigned int)rt->sms, total);
	l->slots = (unsigned int)bps * (unsigned int)rt->sms;
	l->batch = gs__batch(total, l->nphys, rt->cfg.batch);
	l->redo_cap = gs__redo_cap(l->nphys,
				   rt->cfg.batch > 16 ? rt->cfg.batch : 16,
				   total, (k->flags & GS_KF_IO) != 0);
	l->args = malloc(args_size ? args_size : 1);
	if (l->args == NULL) {
		rc = fail(GS_ENOMEM, "out of memory");
		goto out_free;
	}
	memcpy(l->args, args, args_size);
	l->redo_bytes = (size_t)l->redo_cap * sizeof(unsigned int);
	if ((rc = devbuf_get(l->redo_bytes, l->stream, &d)) < 0)
		goto out_free;
	l->d_redo = d;
	if (rt->cfg.check_once) {
		l->runs_bytes = (size_t)l->total * sizeof(unsigned int);
		if ((rc = devbuf_get(l->runs_bytes, l->stream, &d)) < 0)
			goto out_free;
		l->d_runs = d;
		e = cudaMemsetAsync(l->d_runs, 0, l->runs_bytes, l->stream);
		if (!CU_OK(e)) {
			rc = cufail(e, "cudaMemsetAsync(runs)");
			goto out_free;
		}
	}
	if ((k->flags & GS_KF_IO) && (rc = setup_io(l)) < 0)
		goto out_free;
	l->slot = rt->free_slots[--rt->nfree];
	l->sti = l->slot;
	if (gs__queues_push(&rt->q, stream, &l->node) < 0) {
		rc = fail(GS_ENOMEM, "out of memory");
		goto out_free;
	}
	rt->stats.launches++;
	/* standalone, no forced suspensions: start now, never signalled */
	if (!rt->attached && rt->fake == NULL) {
		struct gs__launch *prev = NULL;
		struct gs__qnode *n;
		size_t i;

		for (i = 0; i < rt->q.n; i++)
			if (rt->q.q[i].stream == stream)
				break;
		for (n = rt->q.q[i].head; n != &l->node; n = n->next)
			prev = (struct gs__launch *)n;
		if (launch_one(l, GS__IMM_GEN, prev) < 0) {
			gs__queues_remove(&rt->q, stream, &l->node);
			rc = -last_err.code;
			goto out_free;
		}
	}
	return GSHARE_OK;

out_free:
	launch_free(l);
	return rc;
}

GS_API int
gs_synchronize(void)
{
	long old = -1;
	int rc = GSHARE_OK;

	if (rt == NULL)
		return fail(GS_ESTATE, "gs_synchronize before gs_init");
	if (rt->trace != NULL)
		rt->sync_ns = now_ns();
	/* the wait's short sleeps: without this each one lasts the
	 * thread's timer slack (50 us by default), and the end of the work
	 * is seen that much later */
	if (rt->cfg.slack_ns != 0 &&
	    (old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0)) >
	    (long)rt->cfg.slack_ns &&
	    prctl(PR_SET_TIMERSLACK, (unsigned long)rt->cfg.slack_ns, 0, 0,
		  0) != 0)
		old = -1;
	if (wait_immediate() < 0 ||
	    (rt->attached ? drive_attached() < 0 : drive_standalone() < 0))
		rc = -last_err.code;
	if (old > (long)rt->cfg.slack_ns)
		(void)prctl(PR_SET_TIMERSLACK, (unsigned long)old, 0, 0, 0);
	return rc;
}

GS_API int
gs_stats(struct gs_stats *out)
{
	if (rt == NULL)
		return fail(GS_ESTATE, "gs_stats before gs_init");
	if (out == NULL)
		return fail(GS_EINVAL, "gs_stats: NULL");
	*out = rt->stats;
	return GSHARE_OK;
}

/* Copy up to max of the newest of count samples kept in ring[cap],
 * oldest first. */
static size_t
ring_copy(const uint64_t *ring, uint64_t cap, uint64_t count, uint64_t *out,
	  size_t max)
{
	uint64_t i = gs__ring_recent(count, cap, max);
	size_t n = 0;

	for (; i < count && n < max; i++)
		out[n++] = ring[i % cap];
	return n;
}

GS_API size_t
gs_eviction_samples(uint64_t *out, size_t max)
{
	if (rt == NULL || out == NULL)
		return 0;
	return ring_copy(rt->evs, GS__EVS, rt->nevs, out, max);
}

GS_API size_t
gs_resize_samples(uint64_t *out, size_t max)
{
	if (rt == NULL || out == NULL)
		return 0;
	return ring_copy(rt->rz, GS__RZS, rt->nrz, out, max);
}

GS_API int
gs_finalize(void)
{
	int rc = GSHARE_OK;
	size_t i;

	if (rt == NULL)
		return fail(GS_ESTATE, "gs_finalize before gs_init");
	if (gs__queues_total(&rt->q) > 0)
		rc = gs_synchronize();
	/* after a failure a chained launch may still wait at its gate */
	(void)chain_cancel();
	keep_stop();
	if (rt->cfg.resize_log) {	/* GSHARE_RESIZE_LOG=1 */
		uint64_t r = rt->nrz > GS__RZS ? rt->nrz - GS__RZS : 0;

		for (; r < rt->nrz; r++)
			fprintf(stderr, "gshare: resize %llu: stop raised "
				"+%.1f us, old round gone +%.1f us, "
				"relaunched +%.1f us\n",
				(unsigned long long)r,
				(double)rt->rz_seen[r % GS__RZS] / 1e3,
				(double)rt->rz_out[r % GS__RZS] / 1e3,
				(double)rt->rz[r % GS__RZS] / 1e3);
	}
	for (i = 0; i < rt->q.n; i++) {
		while (rt->q.q[i].head != NULL) {
			struct gs__launch *l =
			    (struct gs__launch *)rt->q.q[i].head;
			/* after a failure a kernel may still be running:
			 * its buffers go only once its stream is idle */
			if (l->launched)
				(void)cudaStreamSynchronize(l->run_stream);
			gs__queues_remove(&rt->q, l->stream, &l->node);
			launch_free(l);
		}
	}
	rt_free(rt);
	rt = NULL;
	return rc;
}
