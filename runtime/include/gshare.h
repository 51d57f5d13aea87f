/*
 * gshare.h — libgshare, the job-side runtime of gshare (C API).
 *
 * A job links libgshare and launches its kernels through gs_launch.  The
 * kernels are written in persistent form (gshare_device.cuh): a few
 * physical blocks, as many as fit on the GPU at once, pull *logical*
 * blocks from a device counter, so the agent can take the GPU away at any
 * block-task boundary and the runtime resumes the kernel later from the
 * counter, with nothing to save.
 *
 * Modes, chosen by gs_init from the environment:
 *  - attached: GSHARE_SOCKET and GSHARE_ALLOC are set (the Slurm and
 *    Kubernetes plugins set them).  Launches are queued per stream;
 *    gs_synchronize acquires the GPU token from the agent, runs the queues,
 *    leaves the GPU within microseconds when the agent says so, and
 *    resumes when it grants the token again.
 *  - standalone: neither is set.  Same API, same kernels, no agent: each
 *    launch starts at once on its stream, at full speed.
 *    GSHARE_FORCE_SUSPEND_US=MIN:MAX (testing) instead queues launches and
 *    suspends the running kernels every MIN..MAX microseconds, as an agent
 *    would.
 *
 * Errors: every function returns GSHARE_OK (0) or a negative code; the
 * calling thread's last error message is available from gs_errmsg().  The
 * library never prints and never exits.
 *
 * Threading: one thread drives the runtime (gs_launch, gs_synchronize);
 * gs_strerror, gs_errmsg and gs_version may be called from any thread.
 */
#ifndef GSHARE_H
#define GSHARE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GSHARE_VERSION_MAJOR 1
#define GSHARE_VERSION_MINOR 2
/* Layout version of the kernel descriptor and the per-launch context that
 * gshare_device.cuh compiles into the job.  gs_launch takes this one, 2
 * (kernels built before chained relaunches: theirs wait for the report)
 * and 1 (kernels built before direct launches: they always run
 * persistent), and refuses others. */
#define GSHARE_KABI 3

/* Return codes: the negated gshare error codes. */
enum gshare_status {
	GSHARE_OK = 0,
	GSHARE_EINVAL = -1,	/* bad argument */
	GSHARE_ENOMEM = -2,	/* out of host memory */
	GSHARE_EIO = -3,	/* system call failed */
	GSHARE_EPROTO = -4,	/* agent sent something unexpected */
	GSHARE_EVERSION = -5,	/* kernel built for another GSHARE_KABI,
				 * or foreign control page */
	GSHARE_EPERM = -6,	/* agent refused (not our allocation) */
	GSHARE_ENOENT = -7,	/* no such allocation */
	GSHARE_ETIMEDOUT = -9,	/* agent did not answer */
	GSHARE_ECONNREFUSED = -10,	/* agent not running */
	GSHARE_ECONFIG = -12,	/* bad GSHARE_* environment variable */
	GSHARE_ECUDA = -13,	/* a CUDA call failed (name in gs_errmsg) */
	GSHARE_ESTATE = -14,	/* not initialized / already initialized */
	GSHARE_ECLOSED = -16,	/* agent closed the connection */
	GSHARE_EINTERNAL = -17,	/* runtime invariant broken (a logical
				 * block ran twice or never) */
};

/* Grid and block sizes (same meaning as CUDA's dim3). */
struct gs_dim3 {
	unsigned int x, y, z;
};

/* A persistent kernel, defined in CUDA code by GS_KERNEL (see
 * gshare_device.cuh); C code declares it with GS_KERNEL_DECLARE(name). */
struct gs_kernel;

#define GS_KERNEL_DECLARE(name) extern const struct gs_kernel name

/* Counters since gs_init, for tools and benchmarks. */
struct gs_stats {
	uint64_t launches;	/* gs_launch calls */
	uint64_t kernel_runs;	/* kernel launches on the GPU (relaunches
				 * included) */
	uint64_t block_tasks;	/* logical blocks completed */
	uint64_t gpu_ns;	/* GPU time: %globaltimer kernel spans */
	uint64_t suspensions;	/* runs that left the GPU on a suspend */
	uint64_t evict_ns_last;	/* suspend written → kernels exited */
	uint64_t evict_ns_sum;
	uint64_t evict_ns_max;
	uint64_t evict_seen_ns_sum;	/* suspend written -> last block's
					 * report seen by the host */
	uint64_t evict_dev_ns_sum;	/* watcher raised the flag -> last
					 * block left (GPU clock) */
	uint64_t yields;	/* logical blocks that yielded */
	uint64_t io_requests;	/* RPC requests served */
	uint64_t iowaits;	/* times the GPU was released for I/O */
	uint64_t once_checked;	/* logical blocks verified to have run
				 * exactly once (GSHARE_CHECK_ONCE=1) */
};

/* gs_init flags */
#define GS_INIT_STANDALONE 0x1u	/* ignore GSHARE_SOCKET/GSHARE_ALLOC */

/* Start the runtime on the current CUDA device (cudaSetDevice before it). */
int gs_init(unsigned int flags);

/* Queue kernel k over `grid` logical blocks of `block` threads with
 * `shmem` bytes of dynamic shared memory.  args points to the kernel's
 * argument struct (args_size bytes, copied).  stream is a cudaStream_t
 * (NULL: the default stream).  Kernels on one stream run in order; kernels
 * on different streams may overlap. */
int gs_launch(const struct gs_kernel *k, struct gs_dim3 grid,
	      struct gs_dim3 block, size_t shmem, const void *args,
	      size_t args_size, void *stream);

/* Run every queued kernel to completion, across any number of
 * suspensions, and wait for it. */
int gs_synchronize(void);

/* Wait for everything, detach from the agent, free all. */
int gs_finalize(void);

int gs_stats(struct gs_stats *out);
/* Copy up to max of the most recent eviction latencies (ns, suspend
 * written -> kernels exited, oldest first; the last 16384 are kept).
 * Returns how many were copied. */
size_t gs_eviction_samples(uint64_t *out, size_t max);
/* Space mode (since 1.2): copy up to max of the most recent partition
 * changes' latencies (ns, the agent's write -> the first relaunch on the
 * new partition; only changes that reached the job while it held the
 * GPU; the last 64 are kept, oldest first).  Returns how many. */
size_t gs_resize_samples(uint64_t *out, size_t max);

/*
 * Narrow tasks (since 1.1; docs/runtime.md "Narrow tasks").  A task is a
 * device function run by 32..512 threads (a multiple of 32) with an
 * argument block of at most GS_TASK_ARGS bytes and optional shared memory,
 * defined by GS_TASK in CUDA code.  Tasks are spawned into a pool; one
 * resident MasterKernel per pool runs them on the SMs' free warps.  A
 * spawn writes one entry of a host-mapped TaskTable: no launch, no copy.
 * Standalone, the MasterKernel runs while there are tasks (it leaves
 * after a short idle time and a spawn or wait brings it back).  Attached
 * (or with GSHARE_FORCE_SUSPEND_US) tasks run inside the waits, under the
 * agent's token: a suspend stops new tasks, running ones finish, the
 * kernel leaves, and the next grant resumes the pending ones.
 * Tasks must not wait for other tasks.  Same thread as gs_launch.
 */
struct gs_task;
struct gs_taskpool;

#define GS_TASK_DECLARE(name) extern const struct gs_task name
#define GS_TASK_ARGS		96u	/* argument bytes per task */
#define GS_TASK_MAX_THREADS	512u
#define GS_TASK_GROUPS		4096u	/* groups 0..4095 */

struct gs_taskpool_stats {
	uint64_t spawned;	/* tasks spawned */
	uint64_t completed;	/* tasks seen completed by the host */
	uint64_t kernel_runs;	/* MasterKernel launches */
	uint64_t suspensions;	/* MasterKernel runs left on a suspend */
	uint64_t requeued;	/* tasks claimed but not started at a
				 * suspend, run by a later launch */
	uint64_t gpu_ns;	/* MasterKernel time (accounted per job) */
	uint64_t spawn_waits;	/* spawns that found the table full */
	/* suspensions, split on the GPU clock: the watcher raised the flag
	 * -> the first scheduler saw it -> the last scheduler saw it ->
	 * the last block left */
	uint64_t evict_flag_ns_sum;
	uint64_t evict_spread_ns_sum;
	uint64_t evict_drain_ns_sum;
};

/* capacity: TaskTable entries (tasks in flight), rounded up to a power of
 * two, 1024..1<<22 (0: 65536).  shmem_pool: shared memory per SM for
 * tasks, bytes (0: 96 KiB). */
int gs_taskpool_new(unsigned int capacity, size_t shmem_pool,
		    struct gs_taskpool **out);
/* Spawn task t over `threads` threads (multiple of 32, <=
 * GS_TASK_MAX_THREADS) with `shmem` bytes of shared memory (<= the pool)
 * and args (args_size <= GS_TASK_ARGS, copied) in group (<
 * GS_TASK_GROUPS).  *id (may be NULL) names it for gs_task_wait.  Blocks
 * only while the table is full.  The task may start at once: it does not
 * wait for work queued on CUDA streams (synchronize those first). */
int gs_task_spawn(struct gs_taskpool *p, const struct gs_task *t,
		  unsigned int threads, size_t shmem, const void *args,
		  size_t args_size, unsigned int group, uint64_t *id);
int gs_task_wait(struct gs_taskpool *p, uint64_t id);
int gs_task_wait_group(struct gs_taskpool *p, unsigned int group);
int gs_task_wait_all(struct gs_taskpool *p);
int gs_taskpool_stats(const struct gs_taskpool *p,
		      struct gs_taskpool_stats *out);
/* Waits for every task, then frees; NULL is a no-op. */
int gs_taskpool_free(struct gs_taskpool *p);

/* 1 when attached to an agent, 0 standalone, -1 before gs_init. */
int gs_attached(void);

/* Message for a return code; never NULL. */
const char *gs_strerror(int rc);
/* Detailed message of the calling thread's last failure ("" if none). */
const char *gs_errmsg(void);
/* "MAJOR.MINOR" */
const char *gs_version(void);

#ifdef __cplusplus
}
#endif

#endif /* GSHARE_H */
