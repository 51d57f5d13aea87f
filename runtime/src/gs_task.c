/*
 * gs_task.c — task pools (narrow tasks, Pagoda): the host side of the
 * TaskTable and the MasterKernel's launches.
 *
 * A pool owns a host-mapped table of 128-byte entries, one done word per
 * entry (written by the GPU), the control words (struct gs__tqhost) and,
 * in device memory, the claim state and two redo lists (the one the
 * running launch reads, the one it fills).  Spawning writes an entry and
 * then the tail: no launch, no copy, no system call.
 *
 * Two ways to run:
 *  - immediate (standalone, no forced suspensions): a spawn or a wait
 *    launches the MasterKernel when it is not on the GPU; it leaves by
 *    itself after GS__IDLE_NS without work;
 *  - queued (attached, or GSHARE_FORCE_SUSPEND_US): tasks run only inside
 *    waits, one token hold at a time (gs__rt_drive); each hold launches
 *    the MasterKernel with the hold's generation, tells it to leave once
 *    every task has finished, or lets it leave on a suspend with what it
 *    had claimed in the redo list for the next hold.
 * Not thread-safe: the thread that drives libgshare drives its pools.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "gs_error.h"
#include "gs_rtint.h"
#include "gs_tasktable.h"
#include "gshare.h"
#include "gshare_device.cuh"

#define GS_API __attribute__((visibility("default")))

#define GS__IDLE_NS	1000000u	/* immediate: leave after idle */
#define GS__POOL_DEF	(96u << 10)
#define GS__FNCACHE	16u
#define GS__EINTERNAL	17	/* GSHARE_EINTERNAL */

struct gs_taskpool {
	struct gs__ttab tt;
	struct gs__tentry *tab, *d_tab;
	uint32_t *done, *d_done;
	struct gs__tqhost *h, *d_h;
	struct gs__tqdev *d;
	unsigned int *d_noflag;		/* immediate: never raised */
	unsigned int *d_redo[2];
	unsigned int redo_cap, redo_n, redo_cur;
	cudaStream_t stream;
	const struct gs_task *master;	/* the module's MasterKernel */
	struct {
		const struct gs_task *t;
		unsigned long long fn;
	} fns[GS__FNCACHE];
	unsigned int nfns;
	unsigned int seq;		/* last launch */
	int running;			/* a launch is on the GPU */
	int queued;
	unsigned int nblocks;
	size_t pool_bytes;
	struct gs_taskpool_stats stats;
};

static void
sleep_ns(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

static int
cuerr(cudaError_t e, const char *what)
{
	return gs__cufail((int)e, what);
}

GS_API int
gs_taskpool_new(unsigned int capacity, size_t shmem_pool,
		struct gs_taskpool **out)
{
	struct gs_taskpool *p;
	struct gs_error err;
	cudaError_t e;
	void *v = NULL;
	int rc;

	if ((rc = gs__rt_ready()) < 0)
		return rc;
	if (out == NULL)
		return gs__fail(GS_EINVAL, "gs_taskpool_new: out is NULL");
	if (shmem_pool == 0)
		shmem_pool = GS__POOL_DEF;
	if (shmem_pool > (size_t)GS__TGRANS * GS__TGRAN ||
	    shmem_pool % GS__TGRAN != 0)
		return gs__fail(GS_EINVAL, "task shared-memory pool of %zu "
				"bytes: must be a multiple of %u up to %u",
				shmem_pool, GS__TGRAN, GS__TGRANS * GS__TGRAN);
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return gs__fail(GS_ENOMEM, "out of memory");
	gs_error_clear(&err);
	if (gs__tt_init(&p->tt, capacity, GS_TASK_GROUPS, &err) < 0) {
		free(p);
		return gs__fail(err.code, "%s", err.msg);
	}
	p->pool_bytes = shmem_pool;
	p->queued = gs__rt_queued();
	e = cudaHostAlloc(&v, (size_t)p->tt.cap * sizeof(*p->tab),
			  cudaHostAllocMapped);
	if (e != cudaSuccess)
		goto out_cuda;
	p->tab = v;
	e = cudaHostAlloc(&v, (size_t)p->tt.cap * sizeof(*p->done),
			  cudaHostAllocMapped);
	if (e != cudaSuccess)
		goto out_cuda;
	p->done = v;
	memset(p->done, 0, (size_t)p->tt.cap * sizeof(*p->done));
	e = cudaHostAlloc(&v, sizeof(*p->h), cudaHostAllocMapped);
	if (e != cudaSuccess)
		goto out_cuda;
	p->h = v;
	memset(p->h, 0, sizeof(*p->h));
	if ((e = cudaHostGetDevicePointer(&v, p->tab, 0)) != cudaSuccess)
		goto out_cuda;
	p->d_tab = v;
	if ((e = cudaHostGetDevicePointer(&v, p->done, 0)) != cudaSuccess)
		goto out_cuda;
	p->d_done = v;
	if ((e = cudaHostGetDevicePointer(&v, p->h, 0)) != cudaSuccess)
		goto out_cuda;
	p->d_h = v;
	if ((e = cudaMalloc(&v, sizeof(*p->d))) != cudaSuccess)
		goto out_cuda;
	p->d = v;
	if ((e = cudaMemset(p->d, 0, sizeof(*p->d))) != cudaSuccess)
		goto out_cuda;
	if ((e = cudaMalloc(&v, 16)) != cudaSuccess)
		goto out_cuda;
	p->d_noflag = v;
	if ((e = cudaMemset(p->d_noflag, 0, 16)) != cudaSuccess)
		goto out_cuda;
	if ((e = cudaStreamCreateWithFlags(&p->stream,
					   cudaStreamNonBlocking)) !=
	    cudaSuccess)
		goto out_cuda;
	*out = p;
	return 0;
out_cuda:
	rc = cuerr(e, "gs_taskpool_new");
	p->master = NULL;
	p->running = 0;
	(void)gs_taskpool_free(p);
	return rc;
}

/* The module's MasterKernel: blocks per SM and the redo lists, once. */
static int
bind_master(struct gs_taskpool *p, const struct gs_task *t)
{
	int bps = 0, rc, i;
	void *v;
	cudaError_t e;

	rc = t->occupancy(&bps, p->pool_bytes);
	if (rc != 0)
		return cuerr((cudaError_t)rc, "MasterKernel occupancy");
	if (bps < 1)
		return gs__fail(GS_EINVAL, "MasterKernel of %s does not fit "
				"on an SM with %zu bytes of task shared memory",
				t->name, p->pool_bytes);
	p->nblocks = (unsigned int)bps * (unsigned int)gs__rt_sms();
	p->redo_cap = p->nblocks * GS__THELD;
	for (i = 0; i < 2; i++) {
		e = cudaMalloc(&v, p->redo_cap * sizeof(unsigned int));
		if (e != cudaSuccess)
			return cuerr(e, "cudaMalloc(redo)");
		p->d_redo[i] = v;
	}
	p->master = t;
	return 0;
}

static int
fn_addr(struct gs_taskpool *p, const struct gs_task *t,
	unsigned long long *out)
{
	unsigned int i;
	int rc;

	for (i = 0; i < p->nfns; i++)
		if (p->fns[i].t == t) {
			*out = p->fns[i].fn;
			return 0;
		}
	if (t->tabi != GS__TABI)
		return gs__fail(GS_EVERSION, "task %s built for task ABI %u, "
				"this libgshare has %u", t->name, t->tabi,
				GS__TABI);
	if (p->master == NULL && bind_master(p, t) < 0)
		return -1;
	if (t->launch != p->master->launch)
		return gs__fail(GS_EINVAL, "task %s is from another source "
				"file than %s: the tasks of one pool must "
				"share one MasterKernel", t->name,
				p->master->name);
	rc = t->fnaddr(out);
	if (rc != 0)
		return cuerr((cudaError_t)rc, "task function address");
	if (p->nfns < GS__FNCACHE) {
		p->fns[p->nfns].t = t;
		p->fns[p->nfns].fn = *out;
		p->nfns++;
	}
	return 0;
}

/* Put the MasterKernel on the GPU for generation gen. */
static int
launch_master(struct gs_taskpool *p, unsigned int gen,
	      const unsigned int *flag, unsigned int idle_ns)
{
	struct gs__mctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.tab = p->d_tab;
	c.done = p->d_done;
	c.h = p->d_h;
	c.d = p->d;
	c.flag = flag;
	c.gen = gen;
	c.redo_in = p->d_redo[p->redo_cur];
	c.redo_out = p->d_redo[p->redo_cur ^ 1u];
	c.redo_n = p->redo_n;
	c.mask = p->tt.mask;
	c.seq = ++p->seq;
	c.nblocks = p->nblocks;
	c.grans = (unsigned int)(p->pool_bytes / GS__TGRAN);
	c.idle_ns = idle_ns;
	rc = p->master->launch(p->nblocks, p->pool_bytes, p->stream, &c);
	if (rc != 0)
		return cuerr((cudaError_t)rc, "MasterKernel launch");
	p->running = 1;
	p->stats.kernel_runs++;
	return 0;
}

/* The launch has fully left (its last block reported): take over its
 * redo list and account.  *gpu_ns (may be NULL): its GPU span. */
static int
reap_master(struct gs_taskpool *p, uint64_t *gpu_ns, uint64_t *tasks)
{
	cudaError_t e;

	while ((e = cudaStreamQuery(p->stream)) == cudaErrorNotReady)
		;
	if (e != cudaSuccess)
		return cuerr(e, "MasterKernel failed");
	p->running = 0;
	p->redo_n = p->h->redo_n;
	p->redo_cur ^= 1u;
	p->stats.requeued += p->redo_n;
	if (p->h->suspended)
		p->stats.suspensions++;
	if (p->h->tmax > p->h->tmin) {
		p->stats.gpu_ns += p->h->tmax - p->h->tmin;
		if (gpu_ns != NULL)
			*gpu_ns += p->h->tmax - p->h->tmin;
	}
	if (tasks != NULL)
		*tasks += p->h->done;
	return 0;
}

static int
left(const struct gs_taskpool *p)
{
	return p->running && p->h->seq == p->seq;
}

static void
retire(struct gs_taskpool *p)
{
	p->stats.completed += gs__tt_retire(&p->tt, p->done);
}

/* Immediate mode: keep the MasterKernel on the GPU while tasks wait. */
static int
keep_running(struct gs_taskpool *p)
{
	if (left(p) && reap_master(p, NULL, NULL) < 0)
		return -1;
	if (!p->running && gs__tt_pending(&p->tt) > 0 &&
	    launch_master(p, 0xffffffffu, p->d_noflag, GS__IDLE_NS) < 0)
		return -1;
	return 0;
}

/* Queued mode: one hold (gs__rt_drive): run until every task has
 * finished or a suspend made the MasterKernel leave. */
static int
hold(void *ctx, const struct gs__hold *h, struct gs_run_result *res)
{
	struct gs_taskpool *p = ctx;
	uint64_t t0 = gs__now_ns(), iter = 0, gpu = 0, tasks = 0;
	cudaError_t e;

	retire(p);
	if (gs__tt_pending(&p->tt) == 0) {
		res->done = 1;
		res->exit_ns = gs__now_ns();
		return 0;
	}
	if (launch_master(p, h->gen, h->d_flag, 0) < 0)
		return -1;
	for (;;) {
		uint64_t now;

		/* once suspended, only watch for the exit */
		if (!gs__hold_suspended(h))
			retire(p);
		if (gs__tt_pending(&p->tt) == 0 && p->h->quit != p->seq)
			__atomic_store_n(&p->h->quit, p->seq,
					 __ATOMIC_RELEASE);
		if (left(p))
			break;
		now = gs__now_ns();
		gs__hold_force(h, now);
		if ((++iter & 255u) == 0) {
			e = cudaStreamQuery(p->stream);
			if (e != cudaSuccess && e != cudaErrorNotReady)
				return cuerr(e, "MasterKernel failed");
		}
		if (now - t0 > 200000u && !gs__hold_suspended(h))
			sleep_ns(2000);
	}
	if (reap_master(p, &gpu, &tasks) < 0)
		return -1;
	res->exit_ns = gs__now_ns();
	if (p->h->suspended && h->wtime != NULL && *h->wtime &&
	    p->h->tsusp >= *h->wtime && p->h->tsusp_last >= p->h->tsusp &&
	    p->h->tmax >= p->h->tsusp_last) {
		p->stats.evict_flag_ns_sum += p->h->tsusp - *h->wtime;
		p->stats.evict_spread_ns_sum += p->h->tsusp_last -
						p->h->tsusp;
		p->stats.evict_drain_ns_sum += p->h->tmax -
					       p->h->tsusp_last;
	}
	retire(p);
	res->gpu_ns = gpu;
	res->block_tasks = tasks;
	res->done = gs__tt_pending(&p->tt) == 0;
	return 0;
}

/* Until cond holds: immediate mode polls (keeping the MasterKernel on
 * the GPU), queued mode runs holds until the pool is empty. */
static int
wait_for(struct gs_taskpool *p, int (*cond)(struct gs_taskpool *, uint64_t),
	 uint64_t arg)
{
	uint64_t t0 = gs__now_ns(), iter = 0;
	cudaError_t e;

	if (gs__rt_ready() < 0)
		return -GS_ESTATE;
	retire(p);
	if (cond(p, arg))
		return 0;
	if (p->queued) {
		if (gs__rt_drive(hold, p) < 0)
			return -1;
		retire(p);
		if (!cond(p, arg))
			return gs__fail(GS__EINTERNAL, "task pool drained but "
					"a waited task has not finished");
		return 0;
	}
	for (;;) {
		retire(p);
		if (cond(p, arg))
			return 0;
		if (keep_running(p) < 0)
			return -1;
		if ((++iter & 255u) == 0 && p->running) {
			e = cudaStreamQuery(p->stream);
			if (e != cudaSuccess && e != cudaErrorNotReady)
				return cuerr(e, "MasterKernel failed");
		}
		if (gs__now_ns() - t0 > 200000u)
			sleep_ns(2000);
	}
}

static int
cond_one(struct gs_taskpool *p, uint64_t id)
{
	return gs__tt_is_done(&p->tt, p->done, id);
}

static int
cond_group(struct gs_taskpool *p, uint64_t g)
{
	return gs__tt_group_pending(&p->tt, (uint32_t)g) == 0;
}

static int
cond_all(struct gs_taskpool *p, uint64_t unused)
{
	(void)unused;
	return gs__tt_pending(&p->tt) == 0;
}

GS_API int
gs_task_spawn(struct gs_taskpool *p, const struct gs_task *t,
	      unsigned int threads, size_t shmem, const void *args,
	      size_t args_size, unsigned int group, uint64_t *id)
{
	struct gs__tentry *e;
	struct gs_error err;
	unsigned long long fn;
	uint64_t tk;

	if (gs__rt_ready() < 0)
		return -GS_ESTATE;
	if (p == NULL || t == NULL || (args == NULL && args_size != 0))
		return gs__fail(GS_EINVAL, "gs_task_spawn: NULL argument");
	gs_error_clear(&err);
	if (gs__tt_check_spawn(threads, shmem, args_size, t->args_size,
			       group, GS_TASK_MAX_THREADS, p->pool_bytes,
			       GS_TASK_ARGS, GS_TASK_GROUPS, &err) < 0)
		return gs__fail(err.code, "task %s: %s", t->name, err.msg);
	if (fn_addr(p, t, &fn) < 0)
		return gs__last_rc();
	if (gs__tt_reserve(&p->tt, group, &tk) < 0) {
		retire(p);
		if (gs__tt_reserve(&p->tt, group, &tk) < 0) {
			p->stats.spawn_waits++;
			/* table full: let the oldest task finish */
			if (wait_for(p, cond_one, p->tt.retired) < 0)
				return gs__last_rc();
			retire(p);
			if (gs__tt_reserve(&p->tt, group, &tk) < 0)
				return gs__fail(GS__EINTERNAL, "task table "
						"still full after a wait");
		}
	}
	e = &p->tab[tk & p->tt.mask];
	e->fn = fn;
	e->seq = gs__tt_seq(tk);
	e->warps = threads / 32u;
	e->shmem = (unsigned int)shmem;
	if (args_size)
		memcpy(e->args, args, args_size);
	__atomic_store_n(&p->h->tail, (unsigned int)(tk + 1u),
			 __ATOMIC_RELEASE);
	p->stats.spawned++;
	if (!p->queued && keep_running(p) < 0)
		return gs__last_rc();
	if (id != NULL)
		*id = tk;
	return 0;
}

GS_API int
gs_task_wait(struct gs_taskpool *p, uint64_t id)
{
	if (p == NULL || id >= p->tt.next)
		return gs__fail(GS_EINVAL, "gs_task_wait: no such task");
	return wait_for(p, cond_one, id) < 0 ? gs__last_rc() : 0;
}

GS_API int
gs_task_wait_group(struct gs_taskpool *p, unsigned int group)
{
	if (p == NULL || group >= GS_TASK_GROUPS)
		return gs__fail(GS_EINVAL, "gs_task_wait_group: bad group");
	return wait_for(p, cond_group, group) < 0 ? gs__last_rc() : 0;
}

GS_API int
gs_task_wait_all(struct gs_taskpool *p)
{
	if (gs__rt_ready() < 0)
		return -GS_ESTATE;
	if (p == NULL)
		return gs__fail(GS_EINVAL, "gs_task_wait_all: NULL pool");
	return wait_for(p, cond_all, 0) < 0 ? gs__last_rc() : 0;
}

GS_API int
gs_taskpool_stats(const struct gs_taskpool *p, struct gs_taskpool_stats *out)
{
	if (p == NULL || out == NULL)
		return gs__fail(GS_EINVAL, "gs_taskpool_stats: NULL argument");
	*out = p->stats;
	return 0;
}

GS_API int
gs_taskpool_free(struct gs_taskpool *p)
{
	int rc = 0, i;

	if (p == NULL)
		return 0;
	if (p->master != NULL)
		rc = gs_task_wait_all(p);
	if (p->running) {
		__atomic_store_n(&p->h->quit, p->seq, __ATOMIC_RELEASE);
		while (!left(p)) {
			cudaError_t e = cudaStreamQuery(p->stream);

			if (e != cudaSuccess && e != cudaErrorNotReady)
				break;
			sleep_ns(2000);
		}
		(void)cudaStreamSynchronize(p->stream);
		p->running = 0;
	}
	for (i = 0; i < 2; i++)
		if (p->d_redo[i] != NULL)
			cudaFree(p->d_redo[i]);
	if (p->d_noflag != NULL)
		cudaFree(p->d_noflag);
	if (p->d != NULL)
		cudaFree(p->d);
	if (p->stream != NULL)
		cudaStreamDestroy(p->stream);
	if (p->h != NULL)
		cudaFreeHost(p->h);
	if (p->done != NULL)
		cudaFreeHost(p->done);
	if (p->tab != NULL)
		cudaFreeHost(p->tab);
	gs__tt_fini(&p->tt);
	free(p);
	return rc;
}
