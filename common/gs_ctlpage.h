/*
 * gs_ctlpage.h — the per-allocation control page shared by agent and job.
 *
 * The agent creates one page per attached allocation (memfd, 4096 bytes,
 * sealed against shrinking and growing) and passes the fd with SCM_RIGHTS
 * in the ATTACHED reply.  Both sides mmap it MAP_SHARED.  The runtime
 * also registers it with cudaHostRegister(Mapped|Portable) so that one
 * watcher warp on the GPU can read `suspend`.
 *
 * Ownership of fields (single writer each):
 *   header     agent, once, before the fd is passed
 *   control    agent; read by the job (host loop and GPU watcher)
 *   counters   job (runtime / simulated executor); read by the agent's
 *              accounting tick, never written by it
 * All 32/64-bit fields are naturally aligned and accessed with
 * __atomic_load_n/__atomic_store_n (acquire/release) on the host; the GPU
 * reads `suspend` with volatile loads.  Counters only ever grow, so a
 * reader needs no lock: deltas between two reads are usage.  The memory
 * gauge (mem_used) is the exception: it goes up and down; mem_peak only
 * grows.
 * Compatibility: new fields take reserved bytes, which every page starts
 * with zeroed, and zero must mean "not used / unknown" (mem_limit 0: no
 * limit), so GS_CTL_VERSION stays 1 while an older job or agent simply
 * ignores them; a change of meaning or layout of an existing field bumps
 * it.
 * Times are CLOCK_MONOTONIC nanoseconds unless a field says otherwise.
 */
#ifndef GS_CTLPAGE_H
#define GS_CTLPAGE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <linux/futex.h>
#include <sys/syscall.h>

#define GS_CTL_MAGIC	0x4c544347u	/* "GCTL" in little-endian bytes */
#define GS_CTL_VERSION	1u
#define GS_CTL_SIZE	4096u

/* suspend word */
#define GS_CTL_RUN	0u
#define GS_CTL_SUSPEND	1u

/* contend_flags */
#define GS_CTL_CONTEND_VALID	1u
/* every allocation that holds or wants this GPU is a client of one MPS
 * server (time_mps): the next holder's kernels can run beside a
 * releasing holder's last ones */
#define GS_CTL_CONTEND_OVERLAP	2u

/* job_kind: what kind of runtime the job runs, as the job reports it */
enum gs_ctl_job_kind {
	GS_CTL_JOB_UNKNOWN = 0,	/* said nothing (an older runtime) */
	GS_CTL_JOB_LIBGSHARE = 1, /* libgshare: keeps to sm_first/sm_count,
				   * resized live */
	GS_CTL_JOB_GATE = 2,	/* the launch gate: kernel boundaries only,
				 * no live partition */
};

/* job state, as the job reports it */
enum gs_ctl_state {
	GS_CTL_IDLE = 0,	/* nothing to run */
	GS_CTL_WAITING = 1,	/* has work, waiting for a grant */
	GS_CTL_RUNNING = 2,	/* holds the token, kernels on the GPU */
	GS_CTL_IOWAIT = 3,	/* all blocks wait on host I/O */
};

struct gs_ctlpage {
	/* --- header (64 bytes), agent writes once --- */
	uint32_t magic;			/* GS_CTL_MAGIC */
	uint32_t version;		/* GS_CTL_VERSION */
	uint64_t alloc_id;		/* allocation this page belongs to */
	uint32_t page_size;		/* sizeof(struct gs_ctlpage) */
	uint32_t gpu_index;		/* GPU the allocation is placed on */
	uint64_t created_ns;		/* CLOCK_MONOTONIC at creation */
	uint8_t _rsv0[32];

	/* --- control (64 bytes), agent writes --- */
	uint32_t suspend;		/* GS_CTL_SUSPEND: leave the GPU at the
					 * next scheduling point */
	uint32_t susp_gen;		/* the agent leaves it 0; the runtime's
					 * own page (forced suspensions):
					 * nonzero, the suspend is for the
					 * rounds up to this generation, and
					 * a later round's sentinel blocks
					 * let it be (a relaunch chained
					 * behind the round it stops) */
	uint64_t grant_gen;		/* +1 at every grant */
	uint64_t slice_deadline_ns;	/* end of current slice, 0: none */
	uint64_t suspend_set_ns;	/* when `suspend` was last set */
	/* space mode (zero from agents before it: no partition) */
	uint32_t sm_first;		/* SM range the persistent blocks */
	uint32_t sm_count;		/* keep to; 0: the whole GPU */
	uint64_t part_gen;		/* +1 after every change of sm_*:
					 * the agent stores sm_first and
					 * sm_count, then part_gen (release);
					 * the runtime reads part_gen
					 * (acquire), then the range, at each
					 * (re)launch */
	uint64_t mem_limit;		/* device memory the job may hold,
					 * bytes, 0: no limit; written before
					 * the fd is passed */
	uint32_t contenders;		/* other allocations on this GPU that
					 * hold or want the token now */
	uint32_t contend_flags;		/* GS_CTL_CONTEND_VALID: the agent
					 * keeps `contenders` up to date (0
					 * from older agents: unknown);
					 * GS_CTL_CONTEND_OVERLAP */

	/* --- counters (128 bytes), job writes, only ever grow --- */
	uint64_t gpu_ns;		/* GPU time used (kernel spans while
					 * holding the token) */
	uint64_t held_ns;		/* token time held (grant → release) */
	uint64_t block_tasks;		/* logical blocks completed */
	uint64_t suspensions;		/* times evicted by a suspend */
	uint64_t last_evict_ns;		/* latency of the last eviction:
					 * suspend_set_ns → kernels exited */
	uint64_t evict_ns_sum;		/* sum over all evictions */
	uint64_t evict_ns_max;		/* worst eviction */
	uint64_t releases;		/* RELEASE messages sent */
	uint64_t heartbeat_ns;		/* last counter update */
	uint32_t state;			/* enum gs_ctl_state */
	uint32_t pid;			/* job process that attached */
	uint32_t resumed;		/* 1: the counters continue the job's
					 * totals from an earlier page (it
					 * re-attached after an agent restart);
					 * set before any counter is written */
	uint32_t _pad2;
	uint64_t space_gpu_ns;		/* space mode: kernel spans, each
					 * times the fraction of the GPU's
					 * SMs its partition had (docs/
					 * accounting.md); 0 elsewhere */
	uint64_t mem_used;		/* device memory held now, bytes
					 * (a gauge: up and down) */
	uint64_t mem_peak;		/* the most held at once */
	/* simulated GPU only (gshare-simjob --profile): the device's
	 * activity counters, task time x the SM / DRAM activity the job
	 * declares; the agent reads their sum over a GPU's pages as that
	 * GPU's utilization (space mode's classes, space_sample.c) */
	uint64_t sim_sm_ns;
	uint64_t sim_mem_ns;

	/* --- more control, agent writes --- */
	uint64_t contend_seen_ns;	/* last time the agent saw another
					 * allocation on this GPU hold or
					 * want the token (0: never) */
	uint64_t part_set_ns;		/* when sm_* last changed (written
					 * before part_gen; 0: never): the
					 * runtime's resize latency */

	/* --- job writes, once after its attach (the agent zeroes it
	 * when it gives the page to a new process) --- */
	uint32_t job_kind;		/* enum gs_ctl_job_kind: whether the
					 * job can keep a partition (space
					 * mode plans a gated job alone) */
	uint32_t _pad3;
	uint8_t _rsv3[GS_CTL_SIZE - 280];
};

_Static_assert(sizeof(struct gs_ctlpage) == GS_CTL_SIZE,
	       "control page must be exactly one page");
/* the layout is a wire format (docs/protocol.md, Control page) */
_Static_assert(offsetof(struct gs_ctlpage, mem_limit) == 112,
	       "mem_limit moved");
_Static_assert(offsetof(struct gs_ctlpage, contenders) == 120,
	       "contenders moved");
_Static_assert(offsetof(struct gs_ctlpage, part_set_ns) == 264,
	       "control page layout changed");
_Static_assert(offsetof(struct gs_ctlpage, job_kind) == 272,
	       "job_kind moved");
_Static_assert(offsetof(struct gs_ctlpage, contend_seen_ns) == 256,
	       "contend_seen_ns moved");
_Static_assert(offsetof(struct gs_ctlpage, mem_used) == 224,
	       "mem_used moved");
_Static_assert(offsetof(struct gs_ctlpage, mem_peak) == 232,
	       "mem_peak moved");
_Static_assert(offsetof(struct gs_ctlpage, sim_mem_ns) == 248,
	       "sim_mem_ns moved");

/* The agent says no other allocation on this page's GPU holds or wants
 * the token now (0 also when it does not say: an agent before
 * contenders). */
static inline int
gs_ctl_alone(const volatile struct gs_ctlpage *p)
{
	return (__atomic_load_n(&p->contend_flags, __ATOMIC_ACQUIRE) &
		GS_CTL_CONTEND_VALID) &&
	       __atomic_load_n(&p->contenders, __ATOMIC_RELAXED) == 0;
}

/* The agent says the next holder's kernels can run beside this job's
 * last ones (GS_CTL_CONTEND_OVERLAP). */
static inline int
gs_ctl_overlap(const volatile struct gs_ctlpage *p)
{
	return (__atomic_load_n(&p->contend_flags, __ATOMIC_ACQUIRE) &
		(GS_CTL_CONTEND_VALID | GS_CTL_CONTEND_OVERLAP)) ==
	       (GS_CTL_CONTEND_VALID | GS_CTL_CONTEND_OVERLAP);
}

/*
 * A job's thread may sleep until the agent changes the page: the agent
 * wakes futex waiters on the `suspend` word after it writes the control
 * fields (a grant, a suspend) or a new `contenders` count.  A waiter
 * sleeps only while `suspend` is still RUN, and for at most timeout_ns
 * (an agent without the wake-ups, a wake-up missed between its look and
 * its sleep: the waiter looks again then).  The page is a shared
 * mapping, so the futex is the shared kind.
 */
static inline void
gs_ctl_wake(volatile struct gs_ctlpage *p)
{
	(void)syscall(SYS_futex, (uint32_t *)&p->suspend, FUTEX_WAKE,
		      INT_MAX, NULL, NULL, 0);
}

static inline void
gs_ctl_wait(volatile struct gs_ctlpage *p, uint64_t timeout_ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
	ts.tv_nsec = (long)(timeout_ns % 1000000000u);
	(void)syscall(SYS_futex, (uint32_t *)&p->suspend, FUTEX_WAIT,
		      GS_CTL_RUN, &ts, NULL, 0);
}

#endif /* GS_CTLPAGE_H */
