/*
 * gshare_device.cuh — writing kernels for libgshare (CUDA C++).
 *
 * A gshare kernel is a block body run once per *logical* block:
 *
 *	struct vadd_args { const float *a, *b; float *c; unsigned int n; };
 *	GS_KERNEL(vadd, struct vadd_args, p)
 *	{
 *		unsigned int i = gs_block_idx().x * blockDim.x + threadIdx.x;
 *		if (i < p.n)
 *			p.c[i] = p.a[i] + p.b[i];
 *	}
 *
 * and launched from C or C++ with gs_launch(&vadd, grid, block, shmem,
 * &args, sizeof args, stream).  GS_KERNEL wraps the body in a persistent
 * loop: the runtime launches as many physical blocks as the occupancy API
 * says fit, and each pulls logical block indices from a device counter in
 * small batches.  Between two logical blocks (a block-task boundary) one
 * thread reads the device suspend flag and __syncthreads_or shares it;
 * when it is set the block leaves, and the runtime later relaunches the
 * kernel, which resumes from the counter.
 *
 * Rules for the body (docs/runtime.md has the porting guide):
 *  - use gs_block_idx()/gs_grid_dim() instead of blockIdx/gridDim;
 *    blockDim, threadIdx and shared memory are as usual; shared memory
 *    does not survive from one logical block to the next;
 *  - every thread of the block must reach gs_should_yield() and
 *    gs_io_read() together (they contain __syncthreads), and must return
 *    right after gs_should_yield() returned true or gs_io_read();
 *  - on a yield the body saves its own loop state (in global memory,
 *    indexed by logical block); the same logical block runs again later
 *    and continues from it;
 *  - a body must not wait for another logical block (no grid-wide
 *    barriers, no spin-waits on other blocks' results).
 *
 * The structures below are the layout contract (GSHARE_KABI) between
 * this header, compiled into the job, and libgshare.
 */
#ifndef GSHARE_DEVICE_CUH
#define GSHARE_DEVICE_CUH

#include <stdint.h>

#include "gshare.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A counter alone on a 128-byte line. */
struct gs__kline {
	unsigned long long v;
	unsigned long long _pad[15];
};

/* Per-launch device state (device memory).  The redo ring holds logical
 * blocks to run again (yielded, or claimed and not started when a suspend
 * came): [redo_head, redo_end + redo_added) modulo redo_cap.
 *
 * The counters that every physical block adds to at a launch's start
 * (tmin) and as it leaves (redo, done, exited) sit on lines of their
 * own: all blocks leave within a few microseconds of a suspend, and the
 * atomics on one line are done one at a time (about one per nanosecond on
 * the H200), so on one shared line the last block's exit waited behind
 * every other block's three (docs/benchmarks.md, run 122).  The first
 * line's *0 fields are where kernels built before the lines kept those
 * counters (their offsets stay); the library reads only next and
 * finished. */
struct gs__kstate {
	unsigned int next;		/* next fresh logical block */
	unsigned int redo_head;		/* ring: next entry to take */
	unsigned int redo_added0;	/* (older kernels) */
	unsigned int exited0;		/* (older kernels) */
	unsigned long long done0;	/* (older kernels) */
	unsigned long long neg_tmin0;	/* (older kernels) */
	unsigned long long _rsv0;
	unsigned int parked;		/* blocks parked on I/O */
	unsigned int overflow;		/* redo ring overflow (bug) */
	unsigned int io_posted;		/* RPC ring position */
	unsigned int finished;		/* seq of the launch that finished
					 * the kernel, else 0 */
	unsigned int yields;		/* logical blocks yielded */
	unsigned int _pad;
	/* the ring as the last launch left it, [c_head, c_tail): where a
	 * chained launch (gs_kctx.chain) starts */
	unsigned int c_head, c_tail;
	unsigned long long _rsv1[7];
	struct gs__kline redo_added;	/* ring: entries pushed this launch */
	struct gs__kline exited;	/* physical blocks that left */
	struct gs__kline done;		/* logical blocks completed */
	struct gs__kline neg_tmin;	/* max of ~start (globaltimer) */
};

/* Per-launch report (host-mapped), written by the last block to leave;
 * seq is written last. */
struct gs__status {
	unsigned int seq;
	unsigned int finished;
	unsigned int redo_head;
	unsigned int redo_tail;
	unsigned int fresh_left;
	unsigned int overflow;
	unsigned int parked;
	unsigned int yields;
	unsigned long long tmin, tmax, done;
	unsigned long long _rsv[3];
};

/* One RPC slot per logical block of an I/O kernel (host-mapped).  The
 * device writes the arguments, fences, then the opcode; the host answers
 * with the result, then op = GS__RPC_DONE. */
#define GS__RPC_FREE	0u
#define GS__RPC_READ	1u
#define GS__RPC_DONE	2u
struct gs__rpc {
	unsigned int op;
	int fd;
	long long off;			/* < 0: from a stream (pipe) */
	unsigned long long len;
	unsigned long long dst;		/* device pointer */
	long long result;		/* bytes read, or -errno */
	unsigned int cont;		/* continuation tag (nonzero) */
	unsigned int staged;		/* 1: the bytes wait in the block's
					 * inline staging area (small reads),
					 * copied to dst by the block */
};

/* Reads up to this size go through host-mapped inline staging (one
 * area per logical block) instead of a DMA per request. */
#define GS__INLINE 4096u

/* Kernel parameter (by value). */
struct gs_kctx {
	struct gs__kstate *ks;
	unsigned int *redo;		/* ring of redo_cap entries */
	const unsigned int *flag;	/* device suspend flag */
	const unsigned int *pred_finished;	/* previous kernel of the
						 * stream, or NULL */
	struct gs__status *st;		/* device view of host status */
	unsigned int *runs;		/* completions per block, or NULL */
	struct gs__rpc *rpc;		/* device view, or NULL */
	unsigned int *ring;		/* device view of the RPC ring */
	const unsigned char *io_stage;	/* device view of inline staging,
					 * or NULL */
	unsigned int total;		/* logical blocks */
	unsigned int gx, gy, gz;	/* logical grid */
	unsigned int redo_cap;
	unsigned int redo_begin, redo_end;	/* ring at launch start */
	unsigned int batch;
	unsigned int nphys, gen, seq, io_out;
	unsigned int pred_seq;		/* seq that marks pred finished */
	unsigned int sm_range;		/* space mode: first SM << 16 | SM
					 * count; blocks on other SMs leave
					 * at once.  0: the whole GPU (kernels
					 * built before it see 0 as padding) */
	unsigned int chain;		/* GSHARE_KABI >= 3: nonzero, the seq
					 * of this kernel's launch queued
					 * just before this one on its stream
					 * (a relaunch queued before that
					 * one's report): the ring's span is
					 * the one it left in the state
					 * (c_head, c_tail), not redo_begin
					 * and redo_end; and if it finished
					 * the kernel, this launch does
					 * nothing */
};

#define GS_KF_IO 0x1u	/* kernel uses gs_io_read */

/* The device suspend flag's 16 bytes, which every block fetches at once.
 * The host writes nsent and hsusp at gs_init and after an agent restart
 * (a new page), while no persistent kernel runs; flag is raised to the
 * round's generation (the watcher, flag_raise, sentinels).  Sentinels
 * are the first nsent physical blocks of a persistent launch: they also
 * read the control page's suspend word (host memory, at hsusp; 0: no
 * page) and raise flag themselves when it says GS__CTL_SUSPEND
 * (common/gs_ctlpage.h's GS_CTL_SUSPEND). */
struct gs__flagw {
	unsigned int flag;
	unsigned int nsent;
	unsigned long long hsusp;
};
#define GS__CTL_SUSPEND 1u

/* Parameter of a direct launch (by value): logical blocks first ..
 * first + gridDim.x - 1, one hardware block each, no loop.  The runtime
 * launches a kernel this way when no suspend can come before it is done
 * (standalone), or in chunks short enough to wait out while no other
 * allocation contends (attached); see docs/runtime.md. */
/* gs__dctx.rows: how a direct launch's blockIdx maps to logical blocks */
#define GS__DGRID_DIV	0u	/* lb = first + blockIdx.x, divided */
#define GS__DGRID_ROWS	1u	/* (x, y + y0, z): whole rows */
#define GS__DGRID_1D	2u	/* a 1D logical grid: first + blockIdx */

struct gs__dctx {
	struct gs__kstate *ks;		/* next := next_after (block 0) */
	struct gs__status *st;		/* _rsv[0] := start (block 0, when
					 * stamp), _rsv[1] := end (the last
					 * block) */
	unsigned int *runs;		/* completions per block, or NULL */
	unsigned int first;		/* 1D launch: blockIdx.x + first */
	unsigned int gx, gy, gz;	/* logical grid */
	unsigned int next_after;	/* fresh blocks start here after
					 * this launch (0: it ends the
					 * kernel, the slot is clean) */
	unsigned int stamp;		/* 1: block 0 writes st->tmin */
	unsigned int rows;		/* how blockIdx maps (GS__DGRID_*):
					 * 2: a 1D grid, first + blockIdx.x;
					 * 1: whole rows (x, y + y0, z), no
					 * division; 0: 1D over first.. of
					 * any grid (a division) */
	unsigned int y0;
	unsigned int last_lb;		/* logical block of the grid's last
					 * block: it stamps the end */
	unsigned int _pad;
};

/* Descriptor made by GS_KERNEL; functions run in the job's CUDA module. */
struct gs_kernel {
	uint32_t kabi;
	uint32_t flags;
	uint32_t args_size;
	const char *name;
	int (*occupancy)(int *blocks_per_sm, struct gs_dim3 block,
			 size_t shmem);
	int (*launch)(unsigned int nphys, struct gs_dim3 block, size_t shmem,
		      void *stream, const struct gs_kctx *ctx,
		      const void *args);
	/* GSHARE_KABI >= 2: the same body as a plain grid */
	int (*launch_direct)(struct gs_dim3 grid, struct gs_dim3 block,
			     size_t shmem, void *stream,
			     const struct gs__dctx *ctx, const void *args);
};

/* ---- narrow tasks (Pagoda): layout shared with libgshare ---- */

/* Layout version of the TaskTable, the MasterKernel's context and struct
 * gs_task; gs_task_spawn refuses others. */
#define GS__TABI	1u
#define GS__TWARPS	32u	/* warps of a MasterKernel block: warp 0
				 * schedules, 1..31 run tasks */
#define GS__THELD	4u	/* tasks a scheduler claims ahead */
#define GS__TGRAN	256u	/* shared-memory allocator granule */
#define GS__TGRANS	1024u	/* granules at most (256 KiB) */

/* One TaskTable entry (host-mapped, written by the host, read by the
 * MasterKernel); 128 bytes. */
struct gs__tentry {
	unsigned long long fn;		/* device address of the task */
	unsigned int seq;		/* ticket's sequence number */
	unsigned int warps;		/* threads / 32 */
	unsigned int shmem;		/* bytes */
	unsigned int _rsv[3];
	unsigned char args[96];		/* GS_TASK_ARGS */
};

/* Host-mapped control words of a pool.  The host writes tail and quit;
 * the last block to leave writes the report, seq last. */
struct gs__tqhost {
	volatile unsigned int tail;	/* tickets published (low 32 bits) */
	volatile unsigned int quit;	/* launches with seq <= quit leave
					 * once idle */
	unsigned int _rsv0[14];
	volatile unsigned int seq;	/* launch that has fully left */
	volatile unsigned int redo_n;	/* claimed, not started: in redo */
	volatile unsigned int suspended;	/* left on a suspend */
	unsigned int _rsv1;
	volatile unsigned long long tmin, tmax, done;
	volatile unsigned long long tsusp;	/* first block saw the
						 * suspend (globaltimer) */
	volatile unsigned long long tsusp_last;	/* the last block did */
};

/* Device-memory state of a pool, kept across launches (head) or reset
 * by the last block out (the rest). */
struct gs__tqdev {
	unsigned int head;		/* next ticket to claim */
	unsigned int tail_cache;	/* last tail read from the host */
	unsigned int redo_take;		/* redo_in entries taken */
	unsigned int redo_out;		/* entries pushed to redo_out */
	unsigned int exited;		/* blocks that left */
	unsigned int suspended;
	unsigned long long done;	/* tasks completed this launch */
	unsigned long long neg_tmin;
	unsigned long long tail_t;	/* globaltimer of the last read of
					 * the host's tail */
	unsigned long long neg_tsusp;	/* max of ~(suspend seen) */
	unsigned long long tsusp_last;	/* max of (suspend seen) */
	unsigned int idle_votes;	/* blocks idle for idle_ns */
	unsigned int leaving;		/* 1: the vote was unanimous */
};

/* MasterKernel parameter (by value). */
struct gs__mctx {
	const struct gs__tentry *tab;	/* device view of the table */
	unsigned int *done;		/* device view: seq when done */
	struct gs__tqhost *h;		/* device view */
	struct gs__tqdev *d;
	const unsigned int *flag;	/* device suspend flag */
	const unsigned int *redo_in;
	unsigned int *redo_out;
	unsigned int gen;		/* suspended when *flag >= gen */
	unsigned int redo_n;		/* entries in redo_in */
	unsigned int mask;		/* table capacity - 1 */
	unsigned int seq;		/* this launch */
	unsigned int nblocks;
	unsigned int grans;		/* shared-memory pool, granules */
	unsigned int idle_ns;		/* leave after so long idle (0:
					 * only on quit or suspend) */
	unsigned int _pad;
};

/* Descriptor made by GS_TASK; functions run in the job's CUDA module
 * (the MasterKernel is compiled there, next to the task functions). */
struct gs_task {
	uint32_t tabi;
	uint32_t args_size;
	const char *name;
	int (*fnaddr)(unsigned long long *out);
	int (*occupancy)(int *blocks_per_sm, size_t shmem);
	int (*launch)(unsigned int nblocks, size_t shmem, void *stream,
		      const struct gs__mctx *c);
};

#ifdef __CUDACC__
#define GS__HD __host__ __device__
#else
#define GS__HD
#endif

/* The RPC ring's positions (the device's io_posted, the host's head)
 * wrap at the largest multiple of its capacity that fits in 32 bits, so
 * that the slot of a position (pos % cap) follows on across the wrap: at
 * 2^32 it would jump back to 0 from (2^32 - 1) % cap, onto a slot whose
 * entry the host may not have read yet. */
static GS__HD inline unsigned int gs__ring_wrap(unsigned int cap)
{
	return cap == 0u ? 0u : 0xffffffffu / cap * cap;
}

static GS__HD inline unsigned int gs__ring_next(unsigned int pos,
						unsigned int cap)
{
	return pos + 1u >= gs__ring_wrap(cap) ? 0u : pos + 1u;
}

/* The shared-memory allocator of a MasterKernel block (Pagoda §5): a
 * bitmap of GS__TGRAN-byte granules, first fit.  Plain C so that the
 * unit tests run the very code the GPU runs.  Returns the first granule
 * of `need` free contiguous ones and marks them used, or -1. */
static GS__HD inline int gs__shm_alloc(unsigned int *bm, unsigned int ngran,
				       unsigned int need)
{
	unsigned int i = 0, run = 0, start = 0, j;

	if (need == 0 || need > ngran)
		return -1;
	while (i < ngran) {
		unsigned int w = bm[i >> 5];

		if ((i & 31u) == 0 && w == 0xffffffffu) {
			i += 32;
			run = 0;
			start = i;
			continue;
		}
		if ((i & 31u) == 0 && w == 0u && i + 32u <= ngran &&
		    run + 32u < need) {
			run += 32;
			i += 32;
			continue;
		}
		if (w & (1u << (i & 31u))) {
			run = 0;
			start = i + 1;
		} else if (++run == need) {
			for (j = start; j < start + need; j++)
				bm[j >> 5] |= 1u << (j & 31u);
			return (int)start;
		}
		i++;
	}
	return -1;
}

static GS__HD inline void gs__shm_free(unsigned int *bm, unsigned int first,
				       unsigned int n)
{
	unsigned int j;

	for (j = first; j < first + n; j++)
		bm[j >> 5] &= ~(1u << (j & 31u));
}

/* Bitmap of a pool of ngran granules: granules past the end are used. */
static GS__HD inline void gs__shm_init(unsigned int *bm, unsigned int ngran)
{
	unsigned int i;

	for (i = 0; i < GS__TGRANS / 32u; i++)
		bm[i] = 0;
	for (i = ngran; i < GS__TGRANS; i++)
		bm[i >> 5] |= 1u << (i & 31u);
}

/* Pick `n` of the free warps in *mask (lowest first), clear them there
 * and return them; 0 when fewer than n are free. */
static GS__HD inline unsigned int gs__warps_take(unsigned int *mask,
						 unsigned int n)
{
	unsigned int m = *mask, got = 0, k;

	for (k = 0; k < n; k++) {
		if (m == 0)
			return 0;
		got |= m & (~m + 1u);
		m &= m - 1u;
	}
	*mask = m;
	return got;
}

/* The MasterKernel's scheduling decisions, plain C like the allocator
 * above: the scheduler warp (gs__tsched) and the simulated MasterKernel
 * of gshare-simjob (runtime/sim/tasksim.c) both call them. */
static GS__HD inline unsigned int gs__popc(unsigned int x)
{
#ifdef __CUDA_ARCH__
	return (unsigned int)__popc(x);
#else
	return (unsigned int)__builtin_popcount(x);
#endif
}

/* Index of the lowest set bit; x != 0. */
static GS__HD inline unsigned int gs__low(unsigned int x)
{
#ifdef __CUDA_ARCH__
	return (unsigned int)__ffs((int)x) - 1u;
#else
	return (unsigned int)__builtin_ffs((int)x) - 1u;
#endif
}

/* Shared-memory granules of a task asking for `shmem` bytes. */
static GS__HD inline unsigned int gs__tgrans(unsigned int shmem)
{
	return (shmem + GS__TGRAN - 1u) / GS__TGRAN;
}

/* Can a task of nw warps and g granules start now?  Needs nw free warps,
 * a free named barrier when nw > 1 and g contiguous granules.  If so the
 * three are taken out of *freew, *bars and bm: *ws gets its warps, *bar
 * its barrier (0 for one warp), *sh its first granule (0 for none), and
 * 1 is returned; else nothing changes and 0 is returned. */
static GS__HD inline int gs__tres_take(unsigned int *freew,
				       unsigned int *bars, unsigned int *bm,
				       unsigned int nw, unsigned int g,
				       unsigned int *ws, unsigned int *bar,
				       int *sh)
{
	unsigned int b = 0;
	int s = 0;

	if (gs__popc(*freew) < nw)
		return 0;
	if (nw > 1u) {
		if (*bars == 0u)
			return 0;
		b = gs__low(*bars);
	}
	if (g) {
		s = gs__shm_alloc(bm, GS__TGRANS, g);
		if (s < 0)
			return 0;
	}
	if (nw > 1u)
		*bars &= ~(1u << b);
	*ws = gs__warps_take(freew, nw);
	*bar = b;
	*sh = s;
	return 1;
}

/* Give back what gs__tres_take took for a finished task (gs__treap does
 * the same inline, reading the record's fields only as needed). */
static GS__HD inline void gs__tres_free(unsigned int *freew,
					unsigned int *bars, unsigned int *bm,
					unsigned int nw, unsigned int bar,
					unsigned int first, unsigned int g,
					unsigned int ws)
{
	if (nw > 1u)
		*bars |= 1u << bar;
	if (g)
		gs__shm_free(bm, first, g);
	*freew |= ws;
}

/* Of the held tickets not read yet (ring positions hh + hr .. hh + hn),
 * how many in a row from the first are published by tail t. */
static GS__HD inline unsigned int gs__tpublished(const unsigned int *held_tk,
						 unsigned int hh,
						 unsigned int hr,
						 unsigned int hn,
						 unsigned int t)
{
	unsigned int m = 0;

	while (hr + m < hn &&
	       (int)(t - held_tk[(hh + hr + m) % GS__THELD]) > 0)
		m++;
	return m;
}

/* The last block out: the redo entries of this launch not taken (from
 * `take` to n) follow the ones pushed (o of them) in redo_out.  Returns
 * the new length of redo_out. */
static GS__HD inline unsigned int gs__tredo_carry(const unsigned int *redo_in,
						  unsigned int take,
						  unsigned int n,
						  unsigned int *redo_out,
						  unsigned int o)
{
	for (; take < n; take++)
		redo_out[o++] = redo_in[take];
	return o;
}

/* Redo entries a block takes at once, at most (gs__claim); the host's
 * gs__redo_cap (GS__REDO_TAKE) leaves room for them. */
#define GS__RL_MAX 8u

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__

#include <cuda_runtime.h>

/* Cycles between two reads of the suspend flag in gs_should_yield. */
#ifndef GS_YIELD_POLL_CYCLES
#define GS_YIELD_POLL_CYCLES 2048
#endif
/* gs_should_yield in a GS_KERNEL body looks only at every k-th call,
 * k (1..GS__YIELD_K_MAX) such that looks come between half and twice
 * this many cycles apart (0: a look at every call) */
#ifndef GS_YIELD_LOOK_CYCLES
#define GS_YIELD_LOOK_CYCLES 65536
#endif
#define GS__YIELD_K_MAX 64u
/* A flag value read at the start of a block-task is trusted at its end
 * if the task took fewer cycles than this (~2 us); else it is re-read. */
#ifndef GS_FLAG_GATE_CYCLES
#define GS_FLAG_GATE_CYCLES 4000
#endif
/* Tasks longer than this on average are claimed one at a time. */
#ifndef GS_LONG_TASK_CYCLES
#define GS_LONG_TASK_CYCLES 8000
#endif

struct gs__blk {
	/* the suspend flag, fetched asynchronously (cp.async, 16 bytes,
	 * L2) while a block-task runs */
	unsigned int flagbuf[4];
	/* thread 0's colder loop state (the hot part is in registers) */
	long long bstart;		/* clock at the batch's start */
	unsigned int pre;		/* ~0: predecessor unfinished;
					 * GS__PRE_SENT: a sentinel */
	unsigned int pf, pf_len;	/* fresh range claimed ahead */
	unsigned int bsz, redo_done, first;
	unsigned int yields, parked_n;
	/* the tasks: [k & 1] is the one the body runs while thread 0 fills
	 * [(k + 1) & 1] for the next; a warp's parity says which it runs */
	struct {
		unsigned int lb, x, y, z;
	} tk[2];
	unsigned int cont[2];
	long long io_res[2];
	const unsigned char *stage_src[2];	/* inline bytes to copy */
	unsigned char *stage_dst[2];
	unsigned int stage_len[2];
	unsigned int wpar[32];		/* per warp: parity of its task */
	unsigned int gx, gy, gz;
	unsigned int gen;
	int from_redo;
	unsigned int event;		/* GS__EV_*, set by thread 0 */
	long long last_poll;
	/* gs_should_yield's k: thread 0's own (ykcur), and the value it
	 * hands to the block at a look, in two slots used in turns */
	unsigned int ykcur, yk[2];
	const unsigned int *flag;
	struct gs__kstate *ks;
	struct gs__rpc *rpc;
	unsigned int *ring;
	unsigned int ring_cap;
	/* sentinels only: the page's word, and the last look at it
	 * (fetched like the flag; hbuf[0] is zeroed at every start all the
	 * same); at the end, so that the fields above
	 * keep the offsets the loop was tuned with (softmax's loop ran 3 %
	 * slower with these first) */
	const unsigned int *hsusp;
	__align__(16) unsigned int hbuf[4];
	/* redo entries taken with one atomic, not started yet: rl[rl_i..
	 * rl_n) (gs__claim) */
	unsigned int rl_i, rl_n;
	unsigned int rl[GS__RL_MAX];
	/* the ring's span for this launch: redo_begin and redo_end, or
	 * what the launch before left (gs_kctx.chain); noop: that launch
	 * finished the kernel */
	unsigned int rb, re, noop;
};
#define GS__PRE_SENT 1u

#define GS__EV_YIELD 1u
#define GS__EV_PARK 2u

/* Runtime state of the physical block (one per module). */
static __shared__ __align__(16) struct gs__blk gs__b;

/* Thread 0: start fetching the flag into gs__b.flagbuf; no register
 * waits for it.  .cg reads L2, where the watcher's atomicMax lands. */
static __device__ __forceinline__ void gs__flag_fetch(const unsigned int *f)
{
	unsigned int dst =
	    (unsigned int)__cvta_generic_to_shared(gs__b.flagbuf);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
		     "cp.async.commit_group;\n" :: "r"(dst), "l"(f) : "memory");
}

static __device__ __forceinline__ unsigned int gs__flag_fetched(void)
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
	return *(volatile unsigned int *)&gs__b.flagbuf[0];
}

/* Thread 0 of a sentinel: start fetching the control page's suspend word
 * (host memory, one bus round trip, about a microsecond) into
 * gs__b.hbuf.  .cg: the L2 keeps no copy of host memory, a later fetch
 * sees the host's write (gs-hostpoll: no stale read in 2 x 20000 round
 * trips, 1.75 us each against 1.70 for volatile loads). */
static __device__ __forceinline__ void gs__host_fetch(const unsigned int *w)
{
	unsigned int dst =
	    (unsigned int)__cvta_generic_to_shared(gs__b.hbuf);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
		     "cp.async.commit_group;\n" :: "r"(dst), "l"(w) : "memory");
}

/* Thread 0, once the first fetch of the flag's 16 bytes has landed: is
 * this block a sentinel (struct gs__flagw)?  Then gs__b.hsusp is the
 * page's word. */
static __device__ __forceinline__ bool gs__sentinel_init(void)
{
	const volatile struct gs__flagw *w =
	    (const volatile struct gs__flagw *)gs__b.flagbuf;

	if (blockIdx.x >= w->nsent || w->hsusp == 0ull)
		return false;
	gs__b.hsusp = (const unsigned int *)(uintptr_t)w->hsusp;
	return true;
}

/* Thread 0, after gs__flag_fetched (which waited for every fetch, a
 * sentinel's look at the page among them): did a sentinel's look find
 * the suspend?  Then it raises the device flag for the other blocks, as
 * the watcher warp would.  Always false in blocks that are not sentinels
 * (hbuf[0] stays 0). */
static __device__ __forceinline__ bool gs__host_says(const unsigned int *flag,
						     unsigned int gen)
{
	/* hbuf[1]: the page's susp_gen (common/gs_ctlpage.h) */
	unsigned int sg = *(volatile unsigned int *)&gs__b.hbuf[1];

	if (*(volatile unsigned int *)&gs__b.hbuf[0] != GS__CTL_SUSPEND ||
	    (sg != 0u && (int)(gen - sg) > 0))
		return false;
	atomicMax((unsigned int *)flag, gen);
	return true;
}

/* Thread 0 of a sentinel at a task boundary (gs__flag_fetched has
 * waited): did the page say suspend?  Its last look was fetched at the
 * previous boundary; after a long task (more than GS_FLAG_GATE_CYCLES
 * since pre_t) that is a task old, and the sentinel looks again, waiting
 * for the bus (about a microsecond), so that the first sentinel to end a
 * task sees a suspend, not the first to end two.  Then the next look
 * goes out, to land before the next boundary. */
static __device__ __forceinline__ bool
gs__sentinel_look(const struct gs_kctx &c, unsigned int pre_t)
{
	if (gs__host_says(c.flag, c.gen))
		return true;
	if ((unsigned int)clock() - pre_t > GS_FLAG_GATE_CYCLES) {
		gs__host_fetch(gs__b.hsusp);
		asm volatile("cp.async.wait_all;\n" ::: "memory");
		if (gs__host_says(c.flag, c.gen))
			return true;
	}
	gs__host_fetch(gs__b.hsusp);
	return false;
}

static __device__ __forceinline__ unsigned long long gs__gtimer(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

#ifdef GS_EVPROBE
/* Diagnostic builds only (gs-mech-probe): per round generation, when the
 * blocks saw the suspend flag (first and last; the last is also when
 * the last task ended) and when the last block entered gs__finish and
 * stored its report's seq.  The two maxima are on lines of their own
 * (see struct gs__kstate). */
struct gs__evp {
	unsigned long long neg_seen_min, _p0[15];
	unsigned long long seen_max, _p1[15];
	unsigned long long fin_in, fin_seq;
	unsigned int gen, _p2[27];
};
__device__ struct gs__evp gs__evp_buf[4096];
#endif

#ifdef GS_LOOPPROBE
/* Diagnostic builds only (gs-eater -DEAT_PROBE): per hardware block, the
 * global timer when thread 0 enters the persistent loop and when it has
 * passed the loop's first barrier (0: it stopped there), in buffer
 * seq & 1 of the launch. */
#define GS__LP_N 4096u
__device__ unsigned long long gs__lp_buf[2][2][GS__LP_N];
#endif

/* Space mode (Slate §III-C): is this block on an SM outside the
 * allocation's partition?  range: first << 16 | count, 0: no partition. */
static __device__ __forceinline__ bool gs__off_partition(unsigned int range)
{
	unsigned int smid;

	if (range == 0)
		return false;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
	return smid - (range >> 16) >= (range & 0xffffu);
}

static __device__ __forceinline__ bool gs__thread0(void)
{
	return (threadIdx.x | threadIdx.y | threadIdx.z) == 0;
}

static __device__ __forceinline__ unsigned int gs__tid(void)
{
	return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y *
					   threadIdx.z);
}

/*
 * Logical block index and grid size (1D, 2D or 3D).  Where they are read
 * decides how:
 *  - in a GS_KERNEL body, gs__x is the body's second parameter: in its
 *    loop copy an empty gs__lx (the task buffers in gs__b), in its direct
 *    copy a gs__dx holding them in registers (no shared memory: each
 *    instruction before a short block's first load costs a memory-bound
 *    kernel, and shared stores contend with its loads in the L1 pipe);
 *  - in a helper function, gs__x is the int below: a direct launch has
 *    left its mapping in gs__dh (two stores a warp) and the loop cleared
 *    gs__dh.mode, so one shared read tells which.
 */
struct gs__lx {
	/* gs_should_yield's calls left to the next look (bits 2 and up),
	 * the slot of that look's k (bit 1) and whether it is the
	 * block-task's first (bit 0): the same in every thread, as every
	 * thread makes every call */
	mutable unsigned int yw = (1u << 2) | 1u;
};
struct gs__dx {
	unsigned int lb, x, y, z, gx, gy, gz;
};
static constexpr int gs__x = 0;

/* A direct launch's mapping, for helpers (every thread writes the same
 * words before its body runs: a warp reads its own writes). */
struct gs__dhelp {
	unsigned int mode;		/* 0: the loop; else 1 + GS__DGRID_* */
	unsigned int first, y0, _pad;
	unsigned int gx, gy, gz, _pad2;
};
static __shared__ __align__(16) struct gs__dhelp gs__dh;

static __device__ __forceinline__ unsigned int gs__par(void)
{
	return gs__b.wpar[gs__tid() >> 5];
}

/* The logical block of hardware block blockIdx in a direct launch. */
static __device__ __forceinline__ void
gs__dmap(unsigned int rows, unsigned int first, unsigned int y0,
	 unsigned int gx, unsigned int gy, struct gs__dx *d)
{
	if (rows == GS__DGRID_1D) {
		d->lb = first + blockIdx.x;
		d->x = d->lb;
		d->y = d->z = 0;
	} else if (rows == GS__DGRID_ROWS) {
		d->x = blockIdx.x;
		d->y = blockIdx.y + y0;
		d->z = blockIdx.z;
		d->lb = d->x + gx * (d->y + gy * d->z);
	} else {
		unsigned int q;

		d->lb = first + blockIdx.x;
		q = d->lb / gx;
		d->x = d->lb - q * gx;
		d->y = q % gy;
		d->z = q / gy;
	}
}

/* A helper's view: the direct launch's mapping from gs__dh, or the
 * loop's task buffer. */
static __device__ __forceinline__ struct gs__dx gs__helper_dx(void)
{
	struct gs__dx d;
	unsigned int m = gs__dh.mode;

	if (m != 0u) {
		gs__dmap(m - 1u, gs__dh.first, gs__dh.y0, gs__dh.gx,
			 gs__dh.gy, &d);
		d.gx = gs__dh.gx;
		d.gy = gs__dh.gy;
		d.gz = gs__dh.gz;
	} else {
		unsigned int p = gs__par();

		d.lb = gs__b.tk[p].lb;
		d.x = gs__b.tk[p].x;
		d.y = gs__b.tk[p].y;
		d.z = gs__b.tk[p].z;
		d.gx = gs__b.gx;
		d.gy = gs__b.gy;
		d.gz = gs__b.gz;
	}
	return d;
}

static __device__ __forceinline__ dim3 gs__block_idx(const struct gs__lx &)
{
	unsigned int p = gs__par();
	return dim3(gs__b.tk[p].x, gs__b.tk[p].y, gs__b.tk[p].z);
}
static __device__ __forceinline__ dim3 gs__block_idx(const struct gs__dx &d)
{
	return dim3(d.x, d.y, d.z);
}
static __device__ __forceinline__ dim3 gs__block_idx(int)
{
	struct gs__dx d = gs__helper_dx();
	return dim3(d.x, d.y, d.z);
}

static __device__ __forceinline__ dim3 gs__grid_dim(const struct gs__lx &)
{
	return dim3(gs__b.gx, gs__b.gy, gs__b.gz);
}
static __device__ __forceinline__ dim3 gs__grid_dim(const struct gs__dx &d)
{
	return dim3(d.gx, d.gy, d.gz);
}
static __device__ __forceinline__ dim3 gs__grid_dim(int)
{
	struct gs__dx d = gs__helper_dx();
	return dim3(d.gx, d.gy, d.gz);
}

static __device__ __forceinline__ unsigned int
gs__block_linear(const struct gs__lx &)
{
	return gs__b.tk[gs__par()].lb;
}
static __device__ __forceinline__ unsigned int
gs__block_linear(const struct gs__dx &d)
{
	return d.lb;
}
static __device__ __forceinline__ unsigned int gs__block_linear(int)
{
	return gs__helper_dx().lb;
}

#define gs_block_idx() gs__block_idx(gs__x)
#define gs_grid_dim() gs__grid_dim(gs__x)
/* Linear logical block index: x + gx * (y + gy * z). */
#define gs_block_linear() gs__block_linear(gs__x)

/*
 * Scheduling point for long loops (GLoop's postTaskIfNecessary): true
 * only when a suspend is pending.  Called by all threads of the block
 * together.  At a look thread 0 reads the flag value fetched by the
 * previous look (or at the task's start: the cp.async into
 * gs__b.flagbuf has long landed) and starts the next fetch, so no thread
 * waits for the L2 round trip; __syncthreads_or shares the answer.  In a
 * body the first call of a block-task looks, then every k-th, k adapted
 * so that looks come about GS_YIELD_LOOK_CYCLES apart (a helper function
 * looks at every call, at most every GS_YIELD_POLL_CYCLES).  A suspend is
 * seen within about two looks' gap.  After true, save the loop state and
 * return from the body.
 */
/* Inside a GS_KERNEL body GS__D is the body's template parameter: true
 * in its direct copy.  Elsewhere (a helper function) it is this one. */
static constexpr bool GS__D = false;

/* thread 0 looks at the flag (at most every GS_YIELD_POLL_CYCLES) and,
 * with slot < 2, sets the next k there (adapted to the time since the
 * last look unless this is a block-task's first: that time belongs to
 * another task); the block shares the answer */
static __device__ __forceinline__ bool gs__yield_look(unsigned int slot,
						      bool first)
{
	int y = 0;

	if (gs__thread0()) {
		long long t = clock64(), dt = t - gs__b.last_poll;

#if GS_YIELD_LOOK_CYCLES > 0
		if (slot < 2u) {
			/* k doubles while looks come less than half
			 * GS_YIELD_LOOK_CYCLES apart, halves past twice it */
			unsigned int k = gs__b.ykcur;

			if (!first) {
				if (dt < GS_YIELD_LOOK_CYCLES / 2 &&
				    k < GS__YIELD_K_MAX)
					k <<= 1;
				else if (dt > 2ll * GS_YIELD_LOOK_CYCLES &&
					 k > 1u)
					k >>= 1;
			}
			gs__b.ykcur = k;
			gs__b.yk[slot] = k;
		}
#endif
		if (dt > GS_YIELD_POLL_CYCLES) {
			const bool sent = gs__b.pre == GS__PRE_SENT;

			gs__b.last_poll = t;
			y = gs__flag_fetched() >= gs__b.gen ||
			    (sent && gs__host_says(gs__b.flag, gs__b.gen));
			if (y) {
				gs__b.event |= GS__EV_YIELD;
			} else {
				gs__flag_fetch(gs__b.flag);
				if (sent)
					gs__host_fetch(gs__b.hsusp);
			}
		}
	}
	return __syncthreads_or(y) != 0;
}

/* the loop's scheduling point: a look at every k-th call only.  Every
 * thread counts down in a register (no shared access, no branch that
 * differs between warps), so the calls between looks cost a decrement
 * and a test (gs__yield_due); each look (gs__yield_now) pays thread 0's
 * work and the barrier, which every warp waits for.  After a look each
 * thread reads the k that thread 0 wrote before the barrier, from the
 * slot of that look: the slot is written again two looks later, after a
 * barrier that every reader passed after reading it. */
static __device__ __forceinline__ bool gs__yield_due(const struct gs__lx &x)
{
#if GS_YIELD_LOOK_CYCLES > 0
	unsigned int w = x.yw - 4u;

	x.yw = w;
	return w < 4u;
#else
	return true;
#endif
}
static __device__ __forceinline__ bool gs__yield_now(const struct gs__lx &x)
{
#if GS_YIELD_LOOK_CYCLES > 0
	unsigned int slot = (x.yw >> 1) & 1u;
	bool y = gs__yield_look(slot, (x.yw & 1u) != 0u);

	x.yw = (gs__b.yk[slot] << 2) | ((slot ^ 1u) << 1);
	return y;
#else
	return gs__yield_look(2u, false);
#endif
}
/* a direct launch: no suspend comes before it is done, and a
 * scheduling point costs nothing */
static __device__ __forceinline__ bool gs__yield_due(const struct gs__dx &)
{
	return false;
}
static __device__ __forceinline__ bool gs__yield_now(const struct gs__dx &)
{
	return false;
}
/* a helper: gs__dh says which (block-uniform, so no barrier is skipped
 * by some threads only) */
static __device__ __forceinline__ bool gs__yield_due(int)
{
	return gs__dh.mode == 0u;
}
static __device__ __forceinline__ bool gs__yield_now(int)
{
	return gs__yield_look(2u, false);
}
/* an expression, not a call: in `if (... && gs_should_yield())` the
 * calls between looks branch straight past the body's exit (a function
 * returning false from one path and the look's answer from the other
 * made the compiler merge the two into a value and test it again: twelve
 * instructions from the count to the loop's next round, against six) */
#define gs_should_yield() (gs__yield_due(gs__x) && gs__yield_now(gs__x))

/* gs_should_yield() on every 2^log2_every-th value of i, a loop counter
 * that is the same in every thread of the block: the barrier is paid only
 * there.  Typical: if (gs_yield_every(i, 4)) { save; return; } */
#define gs_yield_every(i, log2_every)					\
	(((i) & ((1u << (log2_every)) - 1u)) == 0u && gs_should_yield())

/*
 * Ask the host to read len bytes from fd at off (off < 0: the next bytes
 * of a pipe or socket, like read(2)) into device memory at dst.  Called by
 * all threads together; the body must return right after.  When the data
 * is there the same logical block runs again with gs_continuation() ==
 * cont (nonzero) and gs_io_result() == bytes read or -errno.  While every
 * logical block waits on I/O the job gives the GPU back.
 */
static __device__ __forceinline__ void gs_io_read(int fd, long long off,
						  unsigned long long len,
						  void *dst, unsigned int cont)
{
	if (gs__thread0()) {
		unsigned int lb = gs__b.tk[gs__par()].lb;
		struct gs__rpc *s = &gs__b.rpc[lb];
		unsigned int pos;

		/* the slot with its op, a fence, the ring entry: the host
		 * reads the slot only after it saw the entry (a fence here
		 * waits for the writes to reach host memory); the last
		 * fence makes the entry visible before this block's exit
		 * is (the host serves what was posted when it sees the
		 * round end) */
		s->fd = fd;
		s->off = off;
		s->len = len;
		s->dst = (unsigned long long)(uintptr_t)dst;
		s->cont = cont;
		s->result = 0;
		*(volatile unsigned int *)&s->op = GS__RPC_READ;
		__threadfence_system();
		/* atomicInc: old >= limit ? 0 : old + 1, as gs__ring_next */
		pos = atomicInc(&gs__b.ks->io_posted,
				gs__ring_wrap(gs__b.ring_cap) - 1u);
		*(volatile unsigned int *)&gs__b.ring[pos % gs__b.ring_cap] =
		    lb + 1u;
		__threadfence_system();
		gs__b.event |= GS__EV_PARK;
	}
	__syncthreads();
}

/* 0 on a logical block's first run (and after a yield); the cont of the
 * gs_io_read that completed otherwise. */
static __device__ __forceinline__ unsigned int gs_continuation(void)
{
	return gs__b.cont[gs__par()];
}

static __device__ __forceinline__ long long gs_io_result(void)
{
	return gs__b.io_res[gs__par()];
}

/* Thread 0: append n1 + n2 + n3 logical blocks (lo..lo+n1-1, then
 * pf..pf+n2-1, then the n3 taken redo entries not started,
 * gs__b.rl[gs__b.rl_i..]) to the redo ring with one atomic. */
static __device__ void gs__push_redo(const struct gs_kctx &c, unsigned int lo,
				     unsigned int n1, unsigned int pf,
				     unsigned int n2, unsigned int n3)
{
	struct gs__kstate *ks = c.ks;
	unsigned int j, head, used, q, n = n1 + n2 + n3;

	if (n == 0)
		return;
	/* the takers' position read before the add, so that both are in
	 * flight at once: an older head only makes the check below
	 * stricter */
	head = *(volatile unsigned int *)&ks->redo_head;
	j = gs__b.re + (unsigned int)atomicAdd(&ks->redo_added.v,
						 (unsigned long long)n);
	if (head - gs__b.rb > gs__b.re - gs__b.rb)
		head = gs__b.re;	/* overshoot of takers */
	used = j + n - head;
	/* keep GS__RL_MAX entries a block free: a taker may still be
	 * reading the entries it took (gs__redo_cap leaves that room) */
	if (used > c.redo_cap - GS__RL_MAX * c.nphys) {
		atomicOr(&ks->overflow, 1u);
		return;
	}
	for (q = 0; q < n; q++)
		c.redo[(j + q) % c.redo_cap] = q < n1 ? lo + q :
		    q < n1 + n2 ? pf + (q - n1) :
		    gs__b.rl[gs__b.rl_i + (q - n1 - n2)];
}

/* Thread 0: claim the next fresh batch ahead, for gs__claim to take (or
 * the exit to push back to the redo ring). */
static __device__ __forceinline__ void gs__claim_ahead(const struct gs_kctx &c)
{
	gs__b.pf_len = gs__b.bsz;
	gs__b.pf = atomicAdd(&c.ks->next, gs__b.bsz);
}

/* Thread 0: claim the next batch into [*cur, *end): redo ring first,
 * then fresh blocks.  0 when there is none. */
static __device__ __forceinline__ int gs__claim(const struct gs_kctx &c,
					     unsigned int *cur,
					     unsigned int *end)
{
	struct gs__kstate *ks = c.ks;
	long long now = clock64();

	/* adaptive batch: long tasks gain nothing from batching and would
	 * only leave more behind at a suspend */
	if (gs__b.bstart != 0 && !gs__b.from_redo) {
		unsigned int n = *end - gs__b.first;
		if (n && (now - gs__b.bstart) / n > GS_LONG_TASK_CYCLES)
			gs__b.bsz = 1;
	}
	gs__b.bstart = now;
	if (!gs__b.redo_done) {
		unsigned int rb = gs__b.rb, span = gs__b.re - rb, i, k = 1u;
		unsigned int q;

		if (gs__b.rl_i < gs__b.rl_n) {
			*cur = gs__b.rl[gs__b.rl_i++];
			*end = *cur + 1u;
			gs__b.first = *cur;
			gs__b.from_redo = 1;
			return 1;
		}
		/* a share of what is left, up to GS__RL_MAX, with one
		 * atomic: after a suspend the ring holds what every block
		 * had claimed and not started (up to two batches each), and
		 * one atomic and one dependent load for each entry slowed
		 * every relaunch's first tasks; I/O continuations, fewer
		 * than the blocks, still go one a block */
		i = *(volatile unsigned int *)&ks->redo_head;
		if (i - rb < span) {
			k = (span - (i - rb)) / c.nphys;
			k = k < 1u ? 1u : k > GS__RL_MAX ? GS__RL_MAX : k;
			i = atomicAdd(&ks->redo_head, k);
		}
		if (i - rb < span) {
			unsigned int n = min(k, span - (i - rb));
			unsigned int pos = i % c.redo_cap;

			/* straight into shared memory, all in flight at
			 * once and no register held (written before this
			 * launch: by the host, or by blocks of an earlier
			 * one) */
			for (q = 0; q < n; q++) {
				unsigned int dst = (unsigned int)
				    __cvta_generic_to_shared(&gs__b.rl[q]);

				asm volatile("cp.async.ca.shared.global "
					     "[%0], [%1], 4;\n" ::
					     "r"(dst), "l"(c.redo + pos) :
					     "memory");
				if (++pos == c.redo_cap)
					pos = 0;
			}
			asm volatile("cp.async.commit_group;\n"
				     "cp.async.wait_all;\n" ::: "memory");
			gs__b.rl_n = n;
			gs__b.rl_i = 1u;
			*cur = *(volatile unsigned int *)&gs__b.rl[0];
			*end = *cur + 1u;
			gs__b.first = *cur;
			gs__b.from_redo = 1;
			return 1;
		}
		gs__b.redo_done = 1;
	}
	unsigned int f, len;
	if (gs__b.pf != ~0u) {
		f = gs__b.pf;
		len = gs__b.pf_len;
		gs__b.pf = ~0u;
	} else {
		f = c.total;
		len = gs__b.bsz;
		if (*(volatile unsigned int *)&ks->next < c.total)
			f = atomicAdd(&ks->next, len);
	}
	if (f >= c.total)
		return 0;
	*cur = f;
	*end = min(f + len, c.total);
	gs__b.first = f;
	gs__b.from_redo = 0;
	return 1;
}

/* Thread 0: publish logical block lb as task buffer p. */
static __device__ __forceinline__ void gs__set_task(const struct gs_kctx &c,
						    unsigned int lb,
						    int from_redo,
						    unsigned int p)
{
	gs__b.tk[p].lb = lb;
	if (c.gy == 1u && c.gz == 1u) {
		gs__b.tk[p].x = lb;
	} else {
		unsigned int q = lb / c.gx;
		gs__b.tk[p].x = lb - q * c.gx;
		gs__b.tk[p].y = q % c.gy;
		gs__b.tk[p].z = q / c.gy;
	}
	if (c.rpc == NULL)
		return;
	gs__b.cont[p] = 0;
	gs__b.io_res[p] = 0;
	gs__b.stage_len[p] = 0;
	if (from_redo) {
		/* host-mapped: every field in one go (independent loads,
		 * one round trip over the bus, not one per field).  A slot
		 * is DONE only from before this launch (the host marks it,
		 * then queues the launch that runs it), so no field can be
		 * older than the op read beside it. */
		volatile struct gs__rpc *s = &c.rpc[lb];
		unsigned int op = s->op, cont = s->cont, staged = s->staged;
		long long res = s->result;
		unsigned long long dst = s->dst;
		if (op == GS__RPC_DONE) {
			gs__b.cont[p] = cont;
			gs__b.io_res[p] = res;
			if (staged && res > 0 && c.io_stage != NULL) {
				gs__b.stage_src[p] = c.io_stage +
						     (size_t)lb * GS__INLINE;
				gs__b.stage_dst[p] =
				    (unsigned char *)(uintptr_t)dst;
				gs__b.stage_len[p] = (unsigned int)res;
			}
			s->op = GS__RPC_FREE;
		}
	}
}

/* All threads: a small read's bytes from inline staging (host-mapped) to
 * their device buffer, before the continuation runs. */
static __device__ __forceinline__ void gs__copy_in(unsigned int p)
{
	const volatile unsigned char *src = gs__b.stage_src[p];
	unsigned char *dst = gs__b.stage_dst[p];
	unsigned int n = gs__b.stage_len[p], i;
	unsigned int nt = blockDim.x * blockDim.y * blockDim.z;

	if ((((uintptr_t)dst | n) & 3u) == 0) {
		const volatile unsigned int *s4 =
		    (const volatile unsigned int *)src;
		unsigned int *d4 = (unsigned int *)dst;
		for (i = gs__tid(); i < n / 4; i += nt)
			d4[i] = s4[i];
	} else {
		for (i = gs__tid(); i < n; i += nt)
			dst[i] = src[i];
	}
}

/* The last block to leave (thread 0) reports to the host and resets the
 * state for the next launch of this kernel.  Every other block has left,
 * so nothing else touches the state.  Every field is loaded before any
 * is stored: the volatile accesses keep their order, and a load followed
 * by the store that uses it made each load a round trip of its own to
 * the L2 (nine of them, ~1.5 us of every round's end, run 166); loaded
 * together they take one. */
static __device__ void gs__finish(const struct gs_kctx &c)
{
	volatile struct gs__kstate *vks = c.ks;
	volatile struct gs__status *st = c.st;
	unsigned int head, tail, fresh_left, fin, added, next, parked;
	unsigned int overflow, yields;
	unsigned long long neg_tmin, done;

#ifdef GS_EVPROBE
	gs__evp_buf[c.gen & 4095u].fin_in = gs__gtimer();
#endif
	__threadfence();
	if (gs__b.noop) {
		/* a chained launch after the one that finished the kernel:
		 * the slot is clean for its next user and stays so; the
		 * report says finished, with nothing done */
		vks->exited.v = 0;
		vks->finished = c.seq;	/* for a launch chained to this */
		st->finished = 1u;
		st->redo_head = st->redo_tail = 0u;
		st->fresh_left = 0u;
		st->overflow = st->parked = st->yields = 0u;
		st->tmin = st->tmax = 0ull;
		st->done = 0ull;
		asm volatile("st.release.sys.u32 [%0], %1;" ::
			     "l"(&st->seq), "r"(c.seq) : "memory");
		return;
	}
	head = vks->redo_head;
	added = (unsigned int)vks->redo_added.v;
	next = vks->next;
	parked = vks->parked;
	overflow = vks->overflow;
	yields = vks->yields;
	neg_tmin = vks->neg_tmin.v;
	done = vks->done.v;
	if (head - gs__b.rb > gs__b.re - gs__b.rb)
		head = gs__b.re;
	tail = gs__b.re + added;
	fresh_left = next < c.total;
	fin = !fresh_left && head == tail && parked == 0u && c.io_out == 0u;
	vks->redo_head = head;
	vks->c_head = head;
	vks->c_tail = tail;
	/* a claim sent beside the flag read after a long task (gs__next)
	 * does not look first: next may have passed total; back to it, so
	 * that no number of launches wraps it round onto fresh blocks */
	if (next > c.total)
		vks->next = c.total;
	vks->finished = fin ? c.seq : 0u;
	st->finished = fin;
	st->redo_head = head;
	st->redo_tail = tail;
	st->fresh_left = fresh_left;
	st->overflow = overflow;
	st->parked = parked;
	st->yields = yields;
	st->tmin = ~neg_tmin;
	st->tmax = gs__gtimer();
	st->done = done;
	vks->redo_added.v = 0;
	vks->exited.v = 0;
	vks->done.v = 0;
	vks->neg_tmin.v = 0;
	vks->parked = 0;
	vks->yields = 0;
	if (fin) {	/* clean for the slot's next user */
		vks->next = 0;
		vks->redo_head = 0;
		vks->io_posted = 0;
		vks->overflow = 0;
	}
#ifdef GS_EVPROBE
	gs__evp_buf[c.gen & 4095u].fin_seq = gs__gtimer();
#endif
	/* the report's fields before its seq (a release store: one fence
	 * of the store's own, not a full one); nothing after it: the
	 * block's exit is the kernel's, and the kernel's end makes every
	 * write visible */
	asm volatile("st.release.sys.u32 [%0], %1;" ::
		     "l"(&st->seq), "r"(c.seq) : "memory");
}

/* Thread 0, between two tasks: decide whether the block goes on and, if
 * so, publish the next task in buffer p.  Returns 0 (go on), 1 (suspend)
 * or 2 (no work left). */
static __device__ __forceinline__ int gs__next(const struct gs_kctx &c,
					       unsigned int *cur,
					       unsigned int *end,
					       unsigned int pre_t,
					       unsigned int p)
{
	/* the flag fetched at the start of the task is fresh enough after
	 * a short one; after a long one, read it again */
	const unsigned int pre = gs__b.pre;

	if (pre == ~0u || gs__flag_fetched() >= c.gen)
		return 1;
	if (pre == GS__PRE_SENT && gs__sentinel_look(c, pre_t))
		return 1;
	if ((unsigned int)clock() - pre_t > GS_FLAG_GATE_CYCLES) {
		/* a long task: the flag read again, and the next fresh
		 * batch's claim (when one is due) sent beside it, not after
		 * it: one round trip to the L2 instead of three (the read,
		 * gs__claim's look at next, its atomic).  A batch claimed
		 * here when the flag says stop goes back at the exit. */
		unsigned int fl = __ldcv(c.flag);

		if (*cur == *end && gs__b.redo_done && gs__b.pf == ~0u)
			gs__claim_ahead(c);
		if (fl >= c.gen)
			return 1;
	}
	if (*cur == *end && !gs__claim(c, cur, end))
		return 2;
	gs__set_task(c, *cur, gs__b.from_redo, p);
	return 0;
}

/*
 * The persistent loop.  One barrier per task: thread 0 decides the next
 * task while (after its own part of) the current one runs, into the other
 * task buffer, and __syncthreads_or both shares the decision and keeps
 * the next task's body (and its shared memory) away from the current one.
 */
template <typename F>
static __device__ __forceinline__ void gs__loop(const struct gs_kctx &c,
						F body)
{
	const bool t0 = gs__thread0();
	/* thread 0's hot state, in registers: the current batch, tasks
	 * done, the clock when the flag fetch was issued */
	unsigned int cur = 0, end = 0, done = 0, pre_t = 0, k = 0;
	int stop = 0;

#ifdef GS_LOOPPROBE
	if (t0 && blockIdx.x < GS__LP_N) {
		gs__lp_buf[c.seq & 1u][0][blockIdx.x] = gs__gtimer();
		gs__lp_buf[c.seq & 1u][1][blockIdx.x] = 0;
	}
#endif
	if (t0) {
		gs__b.yields = 0;
		gs__b.parked_n = 0;
		gs__b.pf = ~0u;
		gs__b.pf_len = 0;
		gs__b.bsz = c.batch;
		gs__b.redo_done = 0;
		gs__b.rl_i = gs__b.rl_n = 0;
		gs__b.bstart = 0;
		gs__b.from_redo = 0;
		gs__b.event = 0;
		gs__b.tk[0].y = gs__b.tk[0].z = 0;
		gs__b.tk[1].y = gs__b.tk[1].z = 0;
		gs__b.stage_len[0] = gs__b.stage_len[1] = 0;
		gs__b.gx = c.gx;
		gs__b.gy = c.gy;
		gs__b.gz = c.gz;
		gs__b.gen = c.gen;
		gs__dh.mode = 0;	/* helpers: the task buffers */
		gs__b.flag = c.flag;
		gs__b.hbuf[0] = 0;
		gs__b.ks = c.ks;
		gs__b.rpc = c.rpc;
		gs__b.ring = c.ring;
		gs__b.ring_cap = c.total;
		gs__b.last_poll = clock64();
		gs__b.ykcur = 1u;
		gs__b.noop = 0u;
		gs__b.rb = c.redo_begin;
		gs__b.re = c.redo_end;
		if (c.chain != 0u) {
			/* queued before the last launch's report: the ring
			 * is where that launch left it (loaded together) */
			const volatile struct gs__kstate *v = c.ks;
			unsigned int fin = v->finished, h = v->c_head;
			unsigned int t = v->c_tail;

			gs__b.rb = h;
			gs__b.re = t;
			gs__b.noop = fin == c.chain;
		}
		if (!gs__b.noop)
			atomicMax(&c.ks->neg_tmin.v, ~gs__gtimer());
		gs__b.pre = 0;
		gs__flag_fetch(c.flag);
		if (c.pred_finished != NULL &&
		    *(const volatile unsigned int *)c.pred_finished !=
		    c.pred_seq)
			gs__b.pre = ~0u;	/* predecessor unfinished */
		pre_t = (unsigned int)clock() - GS_FLAG_GATE_CYCLES - 1u;
		/* outside the partition: claim nothing, leave (counted in
		 * `exited` like every block) */
		stop = gs__b.noop || gs__off_partition(c.sm_range) ? 1 :
			gs__next(c, &cur, &end, pre_t, 0);
		/* going on: gs__next waited for the fetch, and the flag's
		 * other words say whether this block is a sentinel (kept in
		 * gs__b.pre, which every boundary reads anyway) */
		if (stop == 0 && gs__sentinel_init()) {
			gs__b.pre = GS__PRE_SENT;
			gs__host_fetch(gs__b.hsusp);
		}
	}
	while (!__syncthreads_or(stop)) {
		const unsigned int p = k & 1u;

#ifdef GS_LOOPPROBE
		if (t0 && k == 0u && blockIdx.x < GS__LP_N)
			gs__lp_buf[c.seq & 1u][1][blockIdx.x] = gs__gtimer();
#endif

		/* every lane writes the same value */
		gs__b.wpar[gs__tid() >> 5] = p;
		if (c.io_stage != NULL && gs__b.stage_len[p] != 0) {
			gs__copy_in(p);
			__syncthreads();
		}
		if (t0) {
			/* in flight while the body runs */
			gs__flag_fetch(c.flag);
			pre_t = (unsigned int)clock();
			if (cur + 1u == end && gs__b.bsz > 1u &&
			    gs__b.redo_done && gs__b.pf == ~0u &&
			    !gs__b.from_redo)
				gs__claim_ahead(c);
		}
		body();
		if (t0) {
			/* thread 0 saw the yield or the I/O request itself:
			 * both end in a barrier it took part in */
			unsigned int ev = gs__b.event;

			if (ev == 0) {
				done++;
				if (c.runs != NULL)
					atomicAdd(&c.runs[cur], 1u);
			} else {
				if (ev & GS__EV_YIELD) {
					gs__push_redo(c, cur, 1, 0, 0, 0);
					gs__b.yields++;
				} else {
					gs__b.parked_n++;
				}
				gs__b.event = 0;
			}
			cur++;
			stop = gs__next(c, &cur, &end, pre_t, p ^ 1u);
		}
		k++;
	}
#ifdef GS_EVPROBE
	if (t0 && stop == 1) {
		struct gs__evp *e = &gs__evp_buf[c.gen & 4095u];
		unsigned long long t = gs__gtimer();

		atomicMax(&e->neg_seen_min, ~t);
		atomicMax(&e->seen_max, t);
		e->gen = c.gen;
	}
#endif
	if (t0) {
		/* claimed but not started: back for the next launch */
		unsigned int n1 = end - cur, n2 = 0;
		if (gs__b.pf != ~0u && gs__b.pf < c.total)
			n2 = min(gs__b.pf + gs__b.pf_len, c.total) - gs__b.pf;
		gs__push_redo(c, cur, n1, gs__b.pf, n2,
			      gs__b.rl_n - gs__b.rl_i);
		if (done)
			atomicAdd(&c.ks->done.v, (unsigned long long)done);
		if (gs__b.yields)
			atomicAdd(&c.ks->yields, gs__b.yields);
		if (gs__b.parked_n)
			atomicAdd(&c.ks->parked, gs__b.parked_n);
		__threadfence();
		if (atomicAdd(&c.ks->exited.v, 1ull) == c.nphys - 1u)
			gs__finish(c);
	}
}

/*
 * A direct launch: hardware block b runs logical block c.first + b once,
 * as the plain kernel would.  The body gets its indices in registers;
 * for helper functions every thread writes the same mapping into gs__dh
 * (two 16-byte stores) before the body runs (a warp reads only its own
 * writes or identical ones), so no barrier is needed.  Block 0 moves the
 * kernel's fresh-block counter past this launch, for a persistent launch
 * that may follow on the stream, and stamps the start; the last block
 * stamps the end (the GPU time is the span between, as for the loop).
 */
template <unsigned int M, typename F>
static __device__ __forceinline__ void gs__direct(const struct gs__dctx &c,
						  F body)
{
	struct gs__dx d;

	/* every instruction here is paid by every warp of every block, and
	 * short blocks of memory-bound kernels feel each one (and each
	 * latency before the body's first load): the mapping is the
	 * kernel's (M: one copy per GS__DGRID_*, picked by the host), none
	 * of blockIdx.y or .z for 1D grids, no read of threadIdx.y or .z
	 * but for the run counters */
	gs__dmap(M, c.first, c.y0, c.gx, c.gy, &d);
	d.gx = c.gx;
	d.gy = c.gy;
	d.gz = c.gz;
	/* lb == first only in the launch's block (0, 0, 0), in every
	 * mapping; the threads of its column x == 0 write the same word
	 * and about the same time */
	if (d.lb == c.first && threadIdx.x == 0) {
		if (c.stamp)	/* not tmin: a persistent launch of the
				 * rest may follow in the same round */
			*(volatile unsigned long long *)&c.st->_rsv[0] =
			    gs__gtimer();
		c.ks->next = c.next_after;
	}
	*(uint4 *)&gs__dh.mode = make_uint4(M + 1u, c.first, c.y0, 0u);
	*(uint4 *)&gs__dh.gx = make_uint4(c.gx, c.gy, c.gz, 0u);
	body(d);
	if (c.runs != NULL && gs__thread0())
		atomicAdd(&c.runs[d.lb], 1u);
	if (threadIdx.x == 0) {
		/* the last block dispatched: about the last to end (one
		 * task's spread at most).  Compared here, not before the
		 * body: a flag kept from the start holds a predicate
		 * register through it (reduce's 16 bounds checks then
		 * spill theirs, +3 points) */
		unsigned int b = d.lb;
		struct gs__status *st = c.st;

		/* the status pointer taken afresh: kept from the start
		 * stamp, it holds two registers through the body */
		asm volatile("" : "+r"(b), "+l"(st));
		if (b == c.last_lb)
			*(volatile unsigned long long *)&st->_rsv[1] =
			    gs__gtimer();
	}
}

#define GS__KERNEL(name, argtype, argname, kflags, bounds)		\
	template <bool GS__D, typename GS__X>				\
	static __device__ __forceinline__ void name##__body(		\
	    const argtype &argname, const GS__X &gs__x);		\
	__global__ void bounds name##__k(const struct gs_kctx gs__c,	\
					 const argtype gs__a)		\
	{								\
		gs__loop(gs__c, [&] {					\
			name##__body<false>(gs__a, gs__lx());		\
		});							\
	}								\
	template <unsigned int GS__M>					\
	__global__ void bounds name##__d(const struct gs__dctx gs__c,	\
					 const argtype gs__a)		\
	{								\
		gs__direct<GS__M>(gs__c,				\
				  [&](const struct gs__dx &gs__d) {	\
			name##__body<true>(gs__a, gs__d);		\
		});							\
	}								\
	static int name##__occ(int *n, struct gs_dim3 b, size_t sh)	\
	{								\
		return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor( \
		    n, name##__k, (int)(b.x * b.y * b.z), sh);		\
	}								\
	static int name##__launch(unsigned int nphys, struct gs_dim3 b,	\
				  size_t sh, void *st,			\
				  const struct gs_kctx *c, const void *a) \
	{								\
		name##__k<<<nphys, dim3(b.x, b.y, b.z), sh,		\
			    (cudaStream_t)st>>>(*c,			\
						*(const argtype *)a);	\
		return (int)cudaGetLastError();				\
	}								\
	static int name##__dlaunch(struct gs_dim3 g, struct gs_dim3 b,	\
				   size_t sh, void *st,			\
				   const struct gs__dctx *c,		\
				   const void *a)			\
	{								\
		dim3 gg(g.x, g.y, g.z), bb(b.x, b.y, b.z);		\
		cudaStream_t ss = (cudaStream_t)st;			\
		const argtype &aa = *(const argtype *)a;		\
									\
		if (c->rows == GS__DGRID_1D)				\
			name##__d<GS__DGRID_1D><<<gg, bb, sh, ss>>>(*c, aa); \
		else if (c->rows == GS__DGRID_ROWS)			\
			name##__d<GS__DGRID_ROWS><<<gg, bb, sh, ss>>>(*c, aa); \
		else							\
			name##__d<GS__DGRID_DIV><<<gg, bb, sh, ss>>>(*c, aa); \
		return (int)cudaGetLastError();				\
	}								\
	extern "C" const struct gs_kernel name = {			\
		GSHARE_KABI, (kflags), (uint32_t)sizeof(argtype), #name, \
		name##__occ, name##__launch, name##__dlaunch };		\
	template <bool GS__D, typename GS__X>				\
	static __device__ __forceinline__ void name##__body(		\
	    const argtype &argname, [[maybe_unused]] const GS__X &gs__x)

/* GS_KERNEL(name, argtype, argname) { body }: a persistent kernel `name`
 * (a const struct gs_kernel for gs_launch) whose body sees its arguments
 * as `const argtype &argname`.  _EX adds flags (GS_KF_IO for kernels that
 * call gs_io_read); _BOUNDS adds __launch_bounds__(threads, minblocks),
 * e.g. to keep the plain kernel's occupancy when the loop's few extra
 * registers would lower it. */
#define GS_KERNEL(name, argtype, argname) \
	GS__KERNEL(name, argtype, argname, 0u, )
#define GS_KERNEL_EX(name, argtype, argname, kflags) \
	GS__KERNEL(name, argtype, argname, kflags, )
#define GS_KERNEL_BOUNDS(name, argtype, argname, kflags, threads, minblocks) \
	GS__KERNEL(name, argtype, argname, kflags,			\
		   __launch_bounds__(threads, minblocks))


/* ---- narrow tasks (Pagoda §4–5): the MasterKernel ----
 *
 * One block of 1024 threads per SM.  Warp 0 schedules: it claims tickets
 * from the host-mapped TaskTable (a device head counter, the host's tail),
 * reads their entries, and starts each task on as many free warps as it
 * has threads / 32, with a named barrier (1..15) when it has more than one
 * warp and granules of the block's shared-memory pool when it asks for
 * some.  Warps 1..31 wait on their mailbox, run the task function and
 * report; the last warp of a task writes its sequence number into the
 * host-mapped done word.  After a suspend no task starts: the tasks a
 * scheduler claimed but did not start go to the redo list, which the next
 * launch runs first; running tasks finish, then the block leaves.
 */

typedef void (*gs__tfn)(const void *args);

struct gs__trec {			/* a task running in the block */
	unsigned long long fn;
	unsigned int seq, slot;
	unsigned int warps, bar;
	unsigned int shoff, shgran;
	unsigned int left;		/* warps still running */
	volatile unsigned int fin;	/* set by the last warp */
	unsigned int wmask;		/* its warps */
	unsigned int _pad;
	uint4 args[6];			/* GS_TASK_ARGS bytes */
};

struct gs__mblk {
	volatile unsigned int cmd[GS__TWARPS];	/* 0 idle, 1 run, 2 go */
	unsigned int rec[GS__TWARPS];	/* record of the warp's task */
	unsigned int rank[GS__TWARPS];	/* warp's rank in its task */
	struct gs__trec r[GS__TWARPS];
	struct gs__tentry held[GS__THELD];	/* claimed, not started */
	unsigned int held_tk[GS__THELD];
	unsigned int shbm[GS__TGRANS / 32];
};

static __shared__ __align__(16) struct gs__mblk gs__m;
extern __shared__ __align__(16) unsigned char gs__tpool[];

static __device__ __forceinline__ const struct gs__trec &gs__trec_cur(void)
{
	return gs__m.r[gs__m.rec[threadIdx.x >> 5]];
}

/* Inside a task: thread index in 0..gs_task_threads()-1. */
static __device__ __forceinline__ unsigned int gs_task_tid(void)
{
	return gs__m.rank[threadIdx.x >> 5] * 32u + (threadIdx.x & 31u);
}

static __device__ __forceinline__ unsigned int gs_task_threads(void)
{
	return gs__trec_cur().warps * 32u;
}

/* The task's shared memory (the shmem bytes it was spawned with). */
static __device__ __forceinline__ void *gs_task_shmem(void)
{
	return gs__tpool + gs__trec_cur().shoff;
}

/* Barrier of the task's own warps (Pagoda's sub-block barrier): every
 * thread of the task must reach it, as __syncthreads in a kernel. */
static __device__ __forceinline__ void gs_task_sync(void)
{
	const struct gs__trec &r = gs__trec_cur();

	if (r.warps == 1u)
		__syncwarp();
	else
		asm volatile("bar.sync %0, %1;" :: "r"(r.bar),
			     "r"(r.warps * 32u) : "memory");
}

/* Warps 1..31: run what the scheduler puts in the mailbox. */
static __device__ void gs__texec(const struct gs__mctx &c)
{
	const unsigned int w = threadIdx.x >> 5, lane = threadIdx.x & 31u;

	for (;;) {
		unsigned int cmd = 0;

		if (lane == 0) {
			unsigned int ns = 32;
			while ((cmd = gs__m.cmd[w]) == 0u) {
				__nanosleep(ns);
				if (ns < 256u)
					ns *= 2u;
			}
		}
		cmd = __shfl_sync(0xffffffffu, cmd, 0);
		if (cmd != 1u)
			return;
		__threadfence_block();
		struct gs__trec *r = &gs__m.r[gs__m.rec[w]];
		((gs__tfn)r->fn)((const void *)r->args);
		__syncwarp();
		if (lane == 0) {
			__threadfence();
			gs__m.cmd[w] = 0;
			if (atomicSub(&r->left, 1u) == 1u) {
				__threadfence_system();
				*(volatile unsigned int *)&c.done[r->slot &
								 c.mask] =
				    r->seq;
				__threadfence_block();
				r->fin = 1;
			}
		}
		__syncwarp();
	}
}

/* Scheduler (warp 0), all lanes: read the entries of n claimed tickets
 * into held[at..at+n) (8 lanes per 128-byte entry), and check them. */
static __device__ void gs__tread(const struct gs__mctx &c, unsigned int at,
				 unsigned int n)
{
	const unsigned int lane = threadIdx.x & 31u;
	unsigned int i = lane >> 3, part = lane & 7u;

	__syncwarp();
	if (i < n) {
		unsigned int h = (at + i) % GS__THELD;
		unsigned int tk = gs__m.held_tk[h];
		const uint4 *src = (const uint4 *)&c.tab[tk & c.mask];
		uint4 *dst = (uint4 *)&gs__m.held[h];

		for (;;) {
			uint4 v = __ldcv(src + part);
			unsigned int ok;

			dst[part] = v;
			/* part 0 holds seq: an entry seen before it was
			 * complete is read again (never expected) */
			ok = __shfl_sync(__activemask(), part != 0u ||
					 v.z == tk + 1u, lane & ~7u);
			if (ok)
				break;
		}
	}
	__syncwarp();
}

/* Scheduler lane 0: start held task h on free warps if they, a barrier
 * and its shared memory are available.  1 when started. */
static __device__ int gs__tstart(unsigned int h, unsigned int *freew,
				 unsigned int *bars, unsigned int *live)
{
	const struct gs__tentry *e = &gs__m.held[h];
	unsigned int nw = e->warps, g = gs__tgrans(e->shmem);
	unsigned int ws, bar = 0, lead, k, m;
	int sh = 0;

	if (!gs__tres_take(freew, bars, gs__m.shbm, nw, g, &ws, &bar, &sh))
		return 0;
	lead = (unsigned int)__ffs((int)ws) - 1u;
	struct gs__trec *r = &gs__m.r[lead];
	r->fn = e->fn;
	r->seq = e->seq;
	r->slot = gs__m.held_tk[h];
	r->warps = nw;
	r->bar = bar;
	r->shoff = (unsigned int)sh * GS__TGRAN;
	r->shgran = g;
	r->left = nw;
	r->fin = 0;
	r->wmask = ws;
	for (k = 0; k < 6; k++)
		r->args[k] = ((const uint4 *)e->args)[k];
	*live |= 1u << lead;
	__threadfence_block();
	for (m = ws, k = 0; m; m &= m - 1u, k++) {
		unsigned int w = (unsigned int)__ffs((int)m) - 1u;
		gs__m.rec[w] = lead;
		gs__m.rank[w] = k;
	}
	__threadfence_block();
	for (m = ws; m; m &= m - 1u)
		gs__m.cmd[__ffs((int)m) - 1] = 1u;
	return 1;
}

/* Scheduler lane 0: free the resources of finished tasks. */
static __device__ unsigned int gs__treap(unsigned int *freew,
					 unsigned int *bars,
					 unsigned int *live)
{
	unsigned int m, n = 0;

	for (m = *live; m; m &= m - 1u) {
		unsigned int i = (unsigned int)__ffs((int)m) - 1u;
		struct gs__trec *r = &gs__m.r[i];

		if (!r->fin)
			continue;
		__threadfence_block();
		r->fin = 0;
		*live &= ~(1u << i);
		if (r->warps > 1u)
			*bars |= 1u << r->bar;
		if (r->shgran)
			gs__shm_free(gs__m.shbm, r->shoff / GS__TGRAN,
				     r->shgran);
		*freew |= r->wmask;
		n++;
	}
	return n;
}

/* The last block out: carry untaken redo entries over, report, reset. */
static __device__ void gs__tfinish(const struct gs__mctx &c)
{
	volatile struct gs__tqdev *d = c.d;
	unsigned int t, o;

	__threadfence();
	t = d->redo_take;
	o = d->redo_out;
	o = gs__tredo_carry(c.redo_in, t, c.redo_n, c.redo_out, o);
	c.h->redo_n = o;
	c.h->suspended = d->suspended;
	c.h->tmin = ~d->neg_tmin;
	c.h->tmax = gs__gtimer();
	c.h->done = d->done;
	c.h->tsusp = ~d->neg_tsusp;
	c.h->tsusp_last = d->tsusp_last;
	d->neg_tsusp = 0;
	d->tsusp_last = 0;
	d->idle_votes = 0;
	d->leaving = 0;
	d->redo_take = 0;
	d->redo_out = 0;
	d->exited = 0;
	d->suspended = 0;
	d->done = 0;
	d->neg_tmin = 0;
	__threadfence_system();
	c.h->seq = c.seq;
	__threadfence_system();
}

/* Scheduler lane 0: the host's tail as the device copy has it.  When the
 * copy shows ticket `need` unpublished it is refreshed over PCIe, by one
 * block at a time and about once a microsecond.  A stale copy is only
 * ever behind the host. */
static __device__ unsigned int gs__ttail(const struct gs__mctx &c,
					 unsigned int need)
{
	struct gs__tqdev *d = c.d;
	unsigned int t = *(volatile unsigned int *)&d->tail_cache;

	if ((int)(t - need) <= 0) {
		unsigned long long now = gs__gtimer();
		volatile unsigned long long *tt = &d->tail_t;

		if (now - *tt >= 1000u) {
			*tt = now;
			t = __ldcv((const unsigned int *)&c.h->tail);
			*(volatile unsigned int *)&d->tail_cache = t;
		}
	}
	return t;
}

/* Scheduler lane 0: claim up to want tickets into held[at..), redo list
 * first, then with one atomicAdd on the head while the tail shows
 * published tickets.  Racing blocks may take tickets the host has not
 * published yet: they wait in held until it does (or go to the redo list
 * when the launch ends).  Returns how many. */
static __device__ unsigned int gs__tclaim(const struct gs__mctx &c,
					  unsigned int at, unsigned int want)
{
	struct gs__tqdev *d = c.d;
	unsigned int n = 0, h, t, k, q;

	while (n < want &&
	       *(volatile unsigned int *)&d->redo_take < c.redo_n) {
		unsigned int i = atomicAdd(&d->redo_take, 1u);
		if (i >= c.redo_n)
			break;
		gs__m.held_tk[(at + n++) % GS__THELD] = c.redo_in[i];
	}
	if (n == want)
		return n;
	h = *(volatile unsigned int *)&d->head;
	t = gs__ttail(c, h);
	if ((int)(t - h) <= 0)
		return n;
	k = min(want - n, t - h);
	h = atomicAdd(&d->head, k);
	for (q = 0; q < k; q++)
		gs__m.held_tk[(at + n++) % GS__THELD] = h + q;
	return n;
}

/* Scheduler lane 0: put every held ticket in the redo list. */
static __device__ void gs__tpush(const struct gs__mctx &c, unsigned int *hh,
				 unsigned int *hn, unsigned int *hr)
{
	if (*hn) {
		unsigned int o = atomicAdd(&c.d->redo_out, *hn);
		for (; *hn; (*hn)--, (*hh)++)
			c.redo_out[o++] = gs__m.held_tk[*hh % GS__THELD];
	}
	*hr = 0;
}

/*
 * The scheduler warp.  held[] is a ring of claimed tickets: the first hr
 * have their entries read (published), the rest wait for the host.  A
 * suspend (or, standalone, every block idle for idle_ns: the blocks vote,
 * and the vote that makes it unanimous sets `leaving` for all) stops new
 * tasks; held tickets go to the redo list; the block leaves when its
 * running tasks are done.
 */
static __device__ void gs__tsched(const struct gs__mctx &c)
{
	const unsigned int lane = threadIdx.x & 31u;
	unsigned int freew = 0xfffffffeu, bars = 0xfffeu, live = 0;
	unsigned int hh = 0, hn = 0, hr = 0;	/* held: first, n, read */
	unsigned int done = 0, stop = 0, susp = 0, leave = 0, voted = 0;
	unsigned int idle_since = 0, idle_n = 0;
	unsigned long long idle_t = 0;

	if (lane == 0) {
		gs__shm_init(gs__m.shbm, c.grans);
		atomicMax(&c.d->neg_tmin, ~gs__gtimer());
	}
	for (;;) {
		unsigned int m = 0, busy = 0;

		if (lane == 0) {
			busy = gs__treap(&freew, &bars, &live);
			done += busy;
			if (!susp && __ldcv(c.flag) >= c.gen) {
				unsigned long long t = gs__gtimer();
				susp = 1;
				atomicMax(&c.d->neg_tsusp, ~t);
				atomicMax(&c.d->tsusp_last, t);
			}
			if (!leave && c.idle_ns &&
			    *(volatile unsigned int *)&c.d->leaving)
				leave = 1;
			if (!susp && !leave && hn < GS__THELD && freew != 0u)
				hn += gs__tclaim(c, hh + hn, GS__THELD - hn);
			if (!susp && !leave && hr < hn) {
				unsigned int t = gs__ttail(c,
				    gs__m.held_tk[(hh + hr) % GS__THELD]);
				m = gs__tpublished(gs__m.held_tk, hh, hr, hn,
						   t);
			}
		}
		m = __shfl_sync(0xffffffffu, m, 0);
		hh = __shfl_sync(0xffffffffu, hh, 0);
		hr = __shfl_sync(0xffffffffu, hr, 0);
		if (m) {
			gs__tread(c, hh + hr, m);
			hr += m;
			busy += m;
		}
		if (lane == 0) {
			while (!susp && !leave && hr &&
			       gs__tstart(hh % GS__THELD, &freew, &bars,
					  &live)) {
				hh++;
				hn--;
				hr--;
				busy++;
			}
			if (susp || leave) {
				gs__tpush(c, &hh, &hn, &hr);
				stop = live == 0u;
			} else if (busy || hr || live) {
				idle_since = 0;
				if (voted) {
					atomicSub(&c.d->idle_votes, 1u);
					voted = 0;
				}
			} else {
				unsigned long long now = gs__gtimer();
				if (!idle_since) {
					idle_since = 1;
					idle_t = now;
				}
				if ((++idle_n & 15u) == 0u &&
				    c.h->quit - c.seq < 0x80000000u) {
					gs__tpush(c, &hh, &hn, &hr);
					stop = 1;
				} else {
					if (c.idle_ns && !voted &&
					    now - idle_t > c.idle_ns) {
						voted = 1;
						if (atomicAdd(&c.d->idle_votes,
							      1u) ==
						    c.nblocks - 1u)
							atomicExch(
							    &c.d->leaving, 1u);
					}
					__nanosleep(200);
				}
			}
		}
		if (__shfl_sync(0xffffffffu, stop, 0))
			break;
	}
	if (lane == 0) {
		unsigned int q;

		for (q = 1; q < GS__TWARPS; q++)
			gs__m.cmd[q] = 2u;
		if (done)
			atomicAdd(&c.d->done, (unsigned long long)done);
		if (susp)
			atomicOr(&c.d->suspended, 1u);
		__threadfence();
		if (atomicAdd(&c.d->exited, 1u) == c.nblocks - 1u)
			gs__tfinish(c);
	}
}

template <int N>
static __global__ void __launch_bounds__(GS__TWARPS * 32, 1)
gs__master_k(const struct gs__mctx c)
{
	if ((threadIdx.x & 31u) == 0)
		gs__m.cmd[threadIdx.x >> 5] = 0;
	__syncthreads();
	if (threadIdx.x < 32u)
		gs__tsched(c);
	else
		gs__texec(c);
}

template <int N>
static int gs__master_occ(int *n, size_t sh)
{
	cudaError_t e = cudaFuncSetAttribute(
	    gs__master_k<N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
	    (int)sh);
	if (e != cudaSuccess)
		return (int)e;
	return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(
	    n, gs__master_k<N>, (int)(GS__TWARPS * 32), sh);
}

template <int N>
static int gs__master_launch(unsigned int nblocks, size_t sh, void *st,
			     const struct gs__mctx *c)
{
	gs__master_k<N><<<nblocks, GS__TWARPS * 32, sh, (cudaStream_t)st>>>(
	    *c);
	return (int)cudaGetLastError();
}

/*
 * GS_TASK(name, argtype, argname) { body }: a task function `name` (a
 * const struct gs_task for gs_task_spawn) whose body sees its arguments
 * (sizeof(argtype) <= GS_TASK_ARGS) as `const argtype &argname`.  Inside:
 * gs_task_tid(), gs_task_threads(), gs_task_shmem(), gs_task_sync();
 * threadIdx, blockIdx, blockDim, __syncthreads and static __shared__
 * belong to the MasterKernel and must not be used.  Tasks of one pool
 * must come from one source file (one CUDA module).
 */
#define GS_TASK(name, argtype, argname)					\
	static_assert(sizeof(argtype) <= 96, "task arguments too big");	\
	static __device__ void name##__tbody(const argtype &argname);	\
	static __device__ void name##__tfn(const void *a)		\
	{								\
		name##__tbody(*(const argtype *)a);			\
	}								\
	static __device__ gs__tfn name##__tdp = name##__tfn;		\
	static int name##__taddr(unsigned long long *out)		\
	{								\
		gs__tfn f = NULL;					\
		cudaError_t e = cudaMemcpyFromSymbol(&f, name##__tdp,	\
						     sizeof(f));	\
		*out = (unsigned long long)(uintptr_t)f;		\
		return (int)e;						\
	}								\
	extern "C" const struct gs_task name = {			\
		GS__TABI, (uint32_t)sizeof(argtype), #name,		\
		name##__taddr, gs__master_occ<0>,			\
		gs__master_launch<0> };					\
	static __device__ void name##__tbody(const argtype &argname)

#endif /* __CUDACC__ */

#endif /* GSHARE_DEVICE_CUH */
