/*
 * simjob.c — gshare-simjob: a job that attaches like a real GPU job and
 * runs block-tasks on a simulated GPU.
 *
 * The host loop is common/gs_session.c, the very code the GPU runtime
 * uses; only the executor differs.  The simulated executor runs
 * "block-tasks" of a fixed length: it sleeps to the end of each task with
 * clock_nanosleep(TIMER_ABSTIME) and counts the task length as device
 * time, checks the control page's suspend word at every task boundary
 * (the scheduling point) and leaves as soon as it is set, reporting the
 * device time used.  Device time is therefore exact even when the host
 * is loaded; a late wakeup only delays the next task, as a slow host
 * delays the next kernel launch.
 *
 * The job measures its own share: device time / wall time over its run
 * (from --at, a CLOCK_MONOTONIC instant shared by several jobs, so they
 * measure the same window), and prints one key=value (or JSON) line at
 * the end, plus one per --interval while running (from a reporter thread
 * that only reads atomics).
 *
 * For tests and the demo, --create SHARES[:WEIGHT] makes the job create
 * its own allocation (root only) and close it when it ends.  Without
 * --socket/--alloc it reads GSHARE_SOCKET/GSHARE_ALLOC; with neither it
 * runs standalone (the whole simulated GPU is its own).
 *
 * --tasks N runs narrow tasks instead (tasksim.c): N tasks of mixed
 * sizes spawned into a task pool on a simulated MasterKernel of 4 SMs,
 * with waits for single tasks, groups and everything as libgshare's
 * queued mode does them: each wait drives token holds through the same
 * session loop, one MasterKernel launch per hold, left at the agent's
 * suspend once the running tasks are done.  The simulated device ticks
 * once a microsecond; the host catches up on the ticks its sleep let
 * pass, as sim_run does with block-tasks.  At the end every task must
 * have run exactly once and the pool's books must agree (exit 1 if not).
 *
 * Limits: one simulated GPU per job; block-tasks shorter than ~50 us
 * measure the host's timer slack more than the scheduler.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_proto.h"
#include "gs_session.h"
#include "tasksim.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
/* progress on the page this often: the co-run check reads it over 300 ms
 * windows (at 50 ms a window read up to a sixth too much or too little) */
#define PROGRESS_NS (5 * NS_PER_MS)
#define TICK_NS 1000ull		/* --tasks: one device tick */
#define TPOLL_NS 100000ull	/* --tasks: the host looks this often */
#define TSMS 4u			/* --tasks: simulated SMs */
#define TGROUPS 8u		/* --tasks: task i is in group i % 8 */
#define SIM_SMS 132u		/* block-tasks: the simulated GPU's SMs */
#define SIM_MEM_SMS 44u		/* --scaling memory: saturates here */

enum { SCALE_NONE, SCALE_LINEAR, SCALE_MEMORY };

struct sim {
	/* options */
	const char *name;
	uint64_t task_ns;
	uint64_t work_ns;	/* 0: no work bound */
	uint64_t end_ns;	/* absolute; UINT64_MAX: none */
	uint64_t busy_ns;	/* duty cycle: GPU time per busy period */
	uint64_t idle_ns;	/* ... then idle this long (0: no cycle) */
	uint64_t overrun_ns;	/* >0: ignore SUSPEND this long */
	int report_zero;	/* lie: report 0 ns of GPU time */
	uint64_t report_more_ns;	/* lie: report this much more GPU
					 * time with every release */
	int scribble;		/* lie: counters of nearly 2^64 on its
				 * page and in its releases */
	uint64_t mem;		/* --mem-mib: device memory it reports */
	uint32_t sm_pct;	/* --profile: SM activity it declares */
	uint32_t mem_pct;	/* ... and DRAM activity (0 0: none) */
	int scaling;		/* --scaling: SCALE_* */
	uint32_t corun_slow;	/* --corun-slow: percent longer tasks on a
				 * partition narrower than the GPU */
	uint32_t alone_slow;	/* --alone-slow: percent longer tasks on
				 * the whole GPU (its rate alone reads low,
				 * as a kernel's in short turns can) */
	uint64_t task_base;	/* --task-us; task_ns: this run's length */
	int json;
	uint64_t ntasks;	/* --tasks: 0: block-tasks */
	/* state */
	struct gs_session *sess;
	uint64_t start_ns;
	uint64_t gpu_ns;	/* atomic: device time so far */
	uint64_t tasks;		/* atomic */
	uint64_t grants;	/* atomic */
	uint64_t busy_left;
	int stop;		/* atomic: reporter shutdown */
	struct gs_tsim *ts;	/* --tasks: the pool */
	uint64_t twaits;	/* --tasks: waits that drove holds */
};

static volatile sig_atomic_t g_stop;

static void
on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Sleep until abs (CLOCK_MONOTONIC ns); returns early only on a stop
 * signal. */
static void
sleep_until(uint64_t abs)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(abs / NS_PER_S);
	ts.tv_nsec = (long)(abs % NS_PER_S);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		if (g_stop)
			return;
}

/* Tasks needed to cover ns (ceiling). */
static uint64_t
tasks_for(const struct sim *m, uint64_t ns)
{
	return (ns + m->task_ns - 1) / m->task_ns;
}

/* The simulated device's counters for ns more of task time run on
 * `sms` of its SIM_SMS SMs: space mode's GPU time (task time x the
 * partition's fraction, as libgshare counts it) and the activity
 * counters of --profile. */
static void
sim_activity(const struct sim *m, volatile struct gs_ctlpage *page,
	     uint64_t ns, uint32_t sms)
{
	if (page == NULL)
		return;
	__atomic_add_fetch(&page->space_gpu_ns, ns * sms / SIM_SMS,
			   __ATOMIC_RELEASE);
	if (m->sm_pct == 0 && m->mem_pct == 0)
		return;
	__atomic_add_fetch(&page->sim_sm_ns, ns * m->sm_pct / 100,
			   __ATOMIC_RELEASE);
	__atomic_add_fetch(&page->sim_mem_ns, ns * m->mem_pct / 100,
			   __ATOMIC_RELEASE);
}

/* The simulated executor.  The device runs block-tasks back to back from
 * the grant (t0): task k ends at t0 + k * task_ns, whatever the host
 * does.  The device stops at the first boundary at or after the suspend
 * (suspend_set_ns, plus --overrun-ms), the end of the busy period, the
 * work or the duration; the host thread sleeps from boundary to boundary
 * and works out where the device stopped, so a late wakeup on a loaded
 * machine neither loses nor invents device time. */
static int
sim_run1(struct sim *m, volatile struct gs_ctlpage *page,
	 struct gs_run_result *res, const struct gs_run_result *before,
	 int *resized)
{
	uint64_t t0 = mono_ns(), now, kmax = UINT64_MAX, k = 0, kn, ks;
	uint64_t last_pub = t0, done_gpu, gen = 0;
	uint32_t why = GS_REL_IDLE;	/* reason if kmax is reached */
	uint32_t sms = SIM_SMS;	/* its partition, read at each launch */
	int done_at_kmax = 1;
	/* a job whose speed follows its partition relaunches on a new
	 * one, as libgshare does */
	int follow = m->scaling != SCALE_NONE || m->corun_slow != 0 ||
		     m->alone_slow != 0;

	*resized = 0;
	if (page != NULL)
		gen = __atomic_load_n(&page->part_gen, __ATOMIC_ACQUIRE);
	if (page != NULL && gen != 0) {
		uint32_t c = page->sm_count;

		if (c != 0 && c < SIM_SMS)
			sms = c;
	}
	if (m->mem != 0 && page != NULL) {
		/* the memory it holds, as a runtime that counts its
		 * allocations reports it: peak first (a page of a new
		 * attachment starts at 0) */
		__atomic_store_n(&page->mem_peak, m->mem, __ATOMIC_RELEASE);
		__atomic_store_n(&page->mem_used, m->mem, __ATOMIC_RELEASE);
	}
	/* --scaling, --corun-slow: this run's task length on its SMs */
	m->task_ns = m->task_base;
	if (m->scaling == SCALE_LINEAR)
		m->task_ns = m->task_base * SIM_SMS / sms;
	else if (m->scaling == SCALE_MEMORY && sms < SIM_MEM_SMS)
		m->task_ns = m->task_base * SIM_MEM_SMS / sms;
	if (sms < SIM_SMS)
		m->task_ns += m->task_ns * m->corun_slow / 100;
	else
		m->task_ns += m->task_ns * m->alone_slow / 100;
	done_gpu = __atomic_load_n(&m->gpu_ns, __ATOMIC_RELAXED);
	if (m->end_ns != UINT64_MAX)
		kmax = m->end_ns > t0 ? tasks_for(m, m->end_ns - t0) : 0;
	if (m->work_ns != 0) {
		kn = m->work_ns > done_gpu ? tasks_for(m, m->work_ns -
						       done_gpu) : 0;
		if (kn < kmax)
			kmax = kn;
	}
	if (m->idle_ns != 0 && tasks_for(m, m->busy_left) < kmax) {
		kmax = tasks_for(m, m->busy_left);
		why = GS_REL_IOWAIT;
		done_at_kmax = 0;
	}
	for (;;) {
		now = mono_ns();
		/* boundaries passed while the host slept */
		kn = (now - t0) / m->task_ns;
		if (kn > kmax)
			kn = kmax;
		if (page != NULL && __atomic_load_n(&page->suspend,
						    __ATOMIC_ACQUIRE) ==
				    GS_CTL_SUSPEND) {
			uint64_t at = __atomic_load_n(&page->suspend_set_ns,
						      __ATOMIC_ACQUIRE) +
				      m->overrun_ns;

			/* it was clear at the last look, so at > t0 + k */
			ks = at > t0 ? tasks_for(m, at - t0) : 0;
			if (ks < k)
				ks = k;
			if (ks <= kmax) {
				if (ks > kn)	/* task in flight ends */
					sleep_until(t0 + ks * m->task_ns);
				k = ks;
				res->reason = GS_REL_SUSPENDED;
				break;
			}
		}
		if (g_stop) {
			k = kn;
			res->done = 1;
			break;
		}
		if (kn > k) {
			sim_activity(m, page, (kn - k) * m->task_ns, sms);
			__atomic_add_fetch(&m->gpu_ns, (kn - k) * m->task_ns,
					   __ATOMIC_RELAXED);
			__atomic_add_fetch(&m->tasks, kn - k,
					   __ATOMIC_RELAXED);
			k = kn;
		}
		if (k == kmax) {
			res->done = done_at_kmax;
			res->reason = why;
			break;
		}
		if (follow && __atomic_load_n(&page->part_gen,
					      __ATOMIC_ACQUIRE) != gen) {
			*resized = 1;	/* the task in flight is lost */
			break;
		}
		if (m->sess != NULL && !m->report_zero &&
		    now - last_pub >= PROGRESS_NS) {
			/* cumulative over the grant's runs */
			(void)gs_session_progress(m->sess, before->gpu_ns +
						  k * m->task_ns,
						  before->block_tasks + k,
						  NULL);
			last_pub = now;
		}
		sleep_until(t0 + (k + 1) * m->task_ns);
	}
	/* count what the loop above has not counted yet */
	kn = __atomic_load_n(&m->gpu_ns, __ATOMIC_RELAXED) - done_gpu;
	if (k * m->task_ns > kn) {
		sim_activity(m, page, k * m->task_ns - kn, sms);
		__atomic_add_fetch(&m->gpu_ns, k * m->task_ns - kn,
				   __ATOMIC_RELAXED);
		__atomic_add_fetch(&m->tasks, k - kn / m->task_ns,
				   __ATOMIC_RELAXED);
	}
	if (m->idle_ns != 0)
		m->busy_left = m->busy_left > k * m->task_ns
				       ? m->busy_left - k * m->task_ns : 0;
	res->gpu_ns = m->report_zero ? 0 : k * m->task_ns + m->report_more_ns;
	if (m->scribble && page != NULL) {
		/* what a job that means harm writes: figures that, added
		 * up, wrap a 64-bit total (or go negative in a store's
		 * signed 64 bits) */
		__atomic_store_n(&page->gpu_ns, UINT64_MAX - 1000,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&page->held_ns, UINT64_MAX - 1000,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&page->block_tasks, UINT64_MAX,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&page->suspensions, UINT64_MAX,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&page->evict_ns_sum, UINT64_MAX,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&page->evict_ns_max, UINT64_MAX,
				 __ATOMIC_RELEASE);
		res->gpu_ns = UINT64_MAX - 1000;
	}
	res->block_tasks = k;
	res->exit_ns = t0 + k * m->task_ns;
	return 0;
}

static int
sim_run(void *ctx, volatile struct gs_ctlpage *page,
	struct gs_run_result *res, struct gs_error *err)
{
	struct sim *m = ctx;
	struct gs_run_result r;
	int resized;

	(void)err;
	memset(res, 0, sizeof(*res));
	__atomic_add_fetch(&m->grants, 1, __ATOMIC_RELAXED);
	do {
		memset(&r, 0, sizeof(r));
		(void)sim_run1(m, page, &r, res, &resized);
		res->gpu_ns += r.gpu_ns;
		res->block_tasks += r.block_tasks;
		res->exit_ns = r.exit_ns;
		res->done = r.done;
		res->reason = r.reason;
	} while (resized && !g_stop);
	return 0;
}

/* The executor of --tasks: one token hold of the simulated task pool
 * (gs_task.c's hold()).  The device runs tick after tick from the grant
 * (t0); at the suspend (its tick, seen by the first round after it) no
 * task starts, the running ones finish and the launch leaves, at a tick
 * the host sleeps to.  A stop signal ends the hold the same way and
 * fails the run. */
static int
tasks_run(void *ctx, volatile struct gs_ctlpage *page,
	  struct gs_run_result *res, struct gs_error *err)
{
	struct sim *m = ctx;
	const struct gs_tsim_stats *st = gs_tsim_stats(m->ts);
	uint64_t t0 = mono_ns(), now, k = 0, kn, ks, ticks, tasks = 0;
	uint64_t c0 = st->completed, last_pub = t0, exit_ns;
	int flag = 0, left = 0, done = 0;

	__atomic_add_fetch(&m->grants, 1, __ATOMIC_RELAXED);
	if (gs_tsim_hold_begin(m->ts)) {
		res->done = 1;
		res->exit_ns = t0;
		return 0;
	}
	for (;;) {
		now = mono_ns();
		kn = (now - t0) / TICK_NS;
		if (!flag && page != NULL &&
		    __atomic_load_n(&page->suspend, __ATOMIC_ACQUIRE) ==
		    GS_CTL_SUSPEND) {
			uint64_t at = __atomic_load_n(&page->suspend_set_ns,
						      __ATOMIC_ACQUIRE);

			/* clear at the last look, so at > t0 + k ticks */
			ks = at > t0 ? (at - t0 + TICK_NS - 1) / TICK_NS : 0;
			while (k < ks && !(left = gs_tsim_hold_step(m->ts,
								      0)))
				k++;
			flag = 1;
		}
		if (g_stop)
			flag = 1;
		if (flag)
			while (!left && !(left = gs_tsim_hold_step(m->ts, 1)))
				k++;
		while (!left && k < kn && !(left = gs_tsim_hold_step(m->ts,
								       0)))
			k++;
		if (left)
			break;
		if (m->sess != NULL && now - last_pub >= PROGRESS_NS) {
			(void)gs_session_progress(m->sess, k * TICK_NS,
						  st->completed - c0, NULL);
			last_pub = now;
		}
		sleep_until(now + TPOLL_NS);
	}
	ticks = gs_tsim_hold_end(m->ts, &done, &tasks);
	exit_ns = t0 + ticks * TICK_NS;
	sleep_until(exit_ns);
	__atomic_add_fetch(&m->gpu_ns, ticks * TICK_NS, __ATOMIC_RELAXED);
	__atomic_add_fetch(&m->tasks, tasks, __ATOMIC_RELAXED);
	res->gpu_ns = ticks * TICK_NS;
	res->block_tasks = tasks;
	res->exit_ns = exit_ns;
	res->done = done;
	res->reason = done ? GS_REL_IDLE : GS_REL_SUSPENDED;
	if (g_stop) {
		gs_error_set(err, GS_EINVAL, "stopped by a signal with %llu "
			     "tasks not finished", (unsigned long long)
			     gs_tsim_pending(m->ts));
		return -1;
	}
	return 0;
}

/* gs_task.c's wait_for in queued mode: holds until the pool is empty. */
static int
tasks_drive(struct sim *m, const struct gs_executor *ex,
	    struct gs_error *err)
{
	struct gs_run_result res;

	m->twaits++;
	if (m->sess != NULL)
		return gs_session_run(m->sess, ex, m, err);
	do {
		memset(&res, 0, sizeof(res));
		if (tasks_run(m, NULL, &res, err) < 0)
			return -1;
	} while (!res.done);
	return 0;
}

static uint64_t
tasks_rand(uint64_t *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

/* --tasks: spawn, wait for single tasks and groups every 1500 spawns
 * (alternately), wait for everything, check each task ran once. */
static int
tasks_main(struct sim *m, struct gs_error *err)
{
	struct gs_executor ex = { .run = tasks_run, .wait = NULL };
	struct gs_tsim_cfg cfg = { TSMS, 1024, 96u << 10, m->ntasks,
				   0x9e3779b97f4a7c15ull };
	const struct gs_tsim_stats *st;
	uint64_t r = 88172645463325252ull, i, j, id, w, maxt;
	int rc;

	maxt = m->task_ns / TICK_NS;
	if (gs_tsim_new(&cfg, &m->ts, err) < 0)
		return -1;
	for (i = 0; i < m->ntasks; i++) {
		uint64_t x = tasks_rand(&r);
		/* mostly 1-4 warps, a quarter up to 16; a third with up
		 * to 24 KiB of shared memory; 1 .. --task-us ticks */
		unsigned int th = 32u * (x % 4 == 0 ?
					 1u + (unsigned int)(x >> 8) % 16u :
					 1u + (unsigned int)(x >> 8) % 4u);
		unsigned int sh = (x >> 16) % 3 == 0 ?
				  (unsigned int)(x >> 20) % 24577u : 0;
		unsigned int tk = 1u + (unsigned int)((x >> 40) % maxt);

		while ((rc = gs_tsim_spawn(m->ts, th, sh, tk,
					   (unsigned int)(i % TGROUPS), &id,
					   err)) == 1) {
			/* table full: wait for the oldest task */
			if (tasks_drive(m, &ex, err) < 0)
				return -1;
		}
		if (rc < 0)
			return -1;
		if (id != i) {
			gs_error_set(err, GS_EINVAL, "task %llu got id %llu",
				     (unsigned long long)i,
				     (unsigned long long)id);
			return -1;
		}
		if ((i + 1) % 1500 != 0)
			continue;
		w = i - tasks_rand(&r) % 1500;
		if ((i / 1500) % 2 == 0) {
			if (!gs_tsim_is_done(m->ts, w) &&
			    tasks_drive(m, &ex, err) < 0)
				return -1;
			if (!gs_tsim_is_done(m->ts, w) ||
			    gs_tsim_runs(m->ts, w) != 1) {
				gs_error_set(err, GS_EINVAL, "wait for task "
					     "%llu returned, it ran %u times",
					     (unsigned long long)w,
					     gs_tsim_runs(m->ts, w));
				return -1;
			}
			continue;
		}
		if (gs_tsim_group_pending(m->ts, (unsigned int)(w %
		    TGROUPS)) != 0 && tasks_drive(m, &ex, err) < 0)
			return -1;
		for (j = w % TGROUPS; j <= i; j += TGROUPS)
			if (gs_tsim_runs(m->ts, j) != 1) {
				gs_error_set(err, GS_EINVAL, "wait for group "
					     "%llu returned, its task %llu ran "
					     "%u times",
					     (unsigned long long)(w % TGROUPS),
					     (unsigned long long)j,
					     gs_tsim_runs(m->ts, j));
				return -1;
			}
	}
	if (gs_tsim_pending(m->ts) != 0 && tasks_drive(m, &ex, err) < 0)
		return -1;
	if (gs_tsim_pending(m->ts) != 0) {
		gs_error_set(err, GS_EINVAL, "the pool drained with %llu "
			     "tasks pending", (unsigned long long)
			     gs_tsim_pending(m->ts));
		return -1;
	}
	if (gs_tsim_audit(m->ts, err) < 0)
		return -1;
	for (i = 0; i < m->ntasks; i++)
		if (gs_tsim_runs(m->ts, i) != 1) {
			gs_error_set(err, GS_EINVAL, "task %llu ran %u times",
				     (unsigned long long)i,
				     gs_tsim_runs(m->ts, i));
			return -1;
		}
	st = gs_tsim_stats(m->ts);
	if (m->json)
		printf("{\"event\":\"tasks\",\"job\":\"%s\",\"tasks\":%"
		       PRIu64 ",\"ran_once\":%" PRIu64 ",\"waits\":%" PRIu64
		       ",\"launches\":%" PRIu64 ",\"suspensions\":%" PRIu64
		       ",\"requeued\":%" PRIu64 ",\"races\":%" PRIu64
		       ",\"ticks\":%" PRIu64 "}\n", m->name, m->ntasks, i,
		       m->twaits, st->launches, st->suspensions,
		       st->requeued, st->races, st->ticks);
	else
		printf("event=tasks job=%s tasks=%" PRIu64 " ran_once=%"
		       PRIu64 " waits=%" PRIu64 " launches=%" PRIu64
		       " suspensions=%" PRIu64 " requeued=%" PRIu64
		       " races=%" PRIu64 " ticks=%" PRIu64 "\n", m->name,
		       m->ntasks, i, m->twaits, st->launches,
		       st->suspensions, st->requeued, st->races, st->ticks);
	fflush(stdout);
	return 0;
}

/* Idle gap of the duty cycle: nothing to run for idle_ns. */
static int
sim_wait(void *ctx, struct gs_error *err)
{
	struct sim *m = ctx;
	uint64_t until = mono_ns() + m->idle_ns;

	(void)err;
	if (until > m->end_ns)
		until = m->end_ns;
	sleep_until(until);
	m->busy_left = m->busy_ns;
	return 0;
}

static void
report(struct sim *m, const char *kind, uint64_t now, double ishare)
{
	volatile struct gs_ctlpage *pg =
		m->sess ? gs_session_page(m->sess) : NULL;
	uint64_t susp = 0, esum = 0, emax = 0, alloc = 0, tasks, grants;
	double wall, gpu, share, eavg;

	if (now > m->end_ns)
		now = m->end_ns;	/* the window it was asked to measure */
	wall = (double)(now - m->start_ns) / 1e9;
	gpu = (double)__atomic_load_n(&m->gpu_ns, __ATOMIC_RELAXED) / 1e9;
	share = wall > 0 ? gpu / wall : 0;
	if (pg != NULL) {
		susp = __atomic_load_n(&pg->suspensions, __ATOMIC_RELAXED);
		esum = __atomic_load_n(&pg->evict_ns_sum, __ATOMIC_RELAXED);
		emax = __atomic_load_n(&pg->evict_ns_max, __ATOMIC_RELAXED);
		alloc = gs_session_alloc_id(m->sess);
	}
	tasks = __atomic_load_n(&m->tasks, __ATOMIC_RELAXED);
	grants = __atomic_load_n(&m->grants, __ATOMIC_RELAXED);
	eavg = susp ? (double)esum / (double)susp / 1e3 : 0;

	if (m->json)
		printf("{\"event\":\"%s\",\"job\":\"%s\",\"alloc\":%" PRIu64
		       ",\"wall_s\":%.3f,\"gpu_s\":%.4f,\"share\":%.4f,"
		       "\"interval_share\":%.4f,\"tasks\":%" PRIu64
		       ",\"grants\":%" PRIu64 ",\"suspensions\":%" PRIu64
		       ",\"evict_avg_us\":%.1f,\"evict_max_us\":%.1f}\n",
		       kind, m->name, alloc, wall, gpu, share, ishare, tasks,
		       grants, susp, eavg, (double)emax / 1e3);
	else
		printf("event=%s job=%s alloc=%" PRIu64 " wall_s=%.3f "
		       "gpu_s=%.4f share=%.4f interval_share=%.4f tasks=%"
		       PRIu64 " grants=%" PRIu64 " suspensions=%" PRIu64
		       " evict_avg_us=%.1f evict_max_us=%.1f\n", kind,
		       m->name, alloc, wall, gpu, share, ishare, tasks,
		       grants, susp, eavg, (double)emax / 1e3);
	fflush(stdout);
}

struct reporter {
	struct sim *m;
	uint64_t interval_ns;
};

static void *
reporter_main(void *arg)
{
	struct reporter *r = arg;
	struct sim *m = r->m;
	uint64_t next = m->start_ns + r->interval_ns, g0 = 0, g, t0;

	t0 = m->start_ns;
	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		uint64_t now = mono_ns();

		if (now < next) {
			uint64_t d = next - now;
			struct timespec ts;

			if (d > 20 * NS_PER_MS)
				d = 20 * NS_PER_MS;
			ts.tv_sec = 0;
			ts.tv_nsec = (long)d;
			nanosleep(&ts, NULL);
			continue;
		}
		g = __atomic_load_n(&m->gpu_ns, __ATOMIC_RELAXED);
		report(m, "progress", now,
		       (double)(g - g0) / (double)(now - t0));
		g0 = g;
		t0 = now;
		next += r->interval_ns;
	}
	return NULL;
}

static void
usage(FILE *f)
{
	fprintf(f,
"usage: gshare-simjob [options]\n"
"  -s, --socket PATH     agent socket (default: $GSHARE_SOCKET)\n"
"  -a, --alloc ID        allocation to attach (default: $GSHARE_ALLOC)\n"
"  -c, --create S[:W]    create an allocation of S shares (weight W) and\n"
"                        close it at exit (root; for tests and demos)\n"
"  -g, --gpu N           GPU for --create (default: agent's choice)\n"
"  -n, --name NAME       name in the output (default: simjob)\n"
"  -t, --task-us N       block-task length in us (default 500)\n"
"  -d, --duration SEC    run this long (default 10; 0: until --work)\n"
"  -w, --work SEC        stop after this much simulated GPU time\n"
"      --at NS           start at this CLOCK_MONOTONIC time (shared window)\n"
"      --busy-ms N       duty cycle: N ms of GPU work, then\n"
"      --idle-ms N       N ms idle (released as IOWAIT; fractions: 0.02)\n"
"      --overrun-ms N    ignore SUSPEND for N ms (misbehaving job)\n"
"      --report-zero     report 0 ns of GPU time to the agent (lying job)\n"
"      --report-more-ms N  report N ms more GPU time with every release\n"
"                        than it ran (a job that over-reports)\n"
"      --scribble        write counters of nearly 2^64 into its control\n"
"                        page and its releases (a job that means harm)\n"
"      --mem-mib N       report holding N MiB of device memory\n"
"      --profile P       declare what its kernels stress, as the\n"
"                        simulated GPU's counters report it: compute\n"
"                        (SM 95 %%, DRAM 15 %%), memory (60 %%, 85 %%) or\n"
"                        light (15 %%, 10 %%)\n"
"      --scaling S       how its task length follows its partition:\n"
"                        none (default), linear (132/SMs times longer)\n"
"                        or memory (longer only below 44 SMs)\n"
"      --corun-slow PCT  tasks PCT %% longer on a partition (beside\n"
"                        others: their interference)\n"
"      --alone-slow PCT  tasks PCT %% longer on the whole GPU (a rate\n"
"                        alone that reads low)\n"
"      --kind K          what it tells the agent it runs: libgshare\n"
"                        (default; keeps a partition) or gate (the\n"
"                        launch gate: space mode plans it alone)\n"
"      --tasks N         run N narrow tasks (1..--task-us us each) on a\n"
"                        simulated task pool; check each ran once\n"
"  -i, --interval-ms N   print a progress line every N ms\n"
"  -j, --json            JSON lines instead of key=value\n"
"      --now             print CLOCK_MONOTONIC ns and exit\n"
"Prints one line per interval and a final line: event=done job= alloc=\n"
"wall_s= gpu_s= share= interval_share= tasks= grants= suspensions=\n"
"evict_avg_us= evict_max_us=; with --tasks first event=tasks tasks=\n"
"ran_once= waits= launches= suspensions= requeued= races= ticks=.\n"
"Exit 0 ok, 1 error (or a task not run exactly once), 2 usage.\n");
}

static int
parse_u64(const char *opt, const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;

	errno = 0;
	if (v[0] < '0' || v[0] > '9')
		goto bad;
	x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0')
		goto bad;
	*out = x;
	return 0;
bad:
	fprintf(stderr, "gshare-simjob: %s: '%s' is not a number\n", opt, v);
	return -1;
}

/* A percentage of 0..1000 (--corun-slow, --alone-slow). */
static int
parse_pct(const char *opt, const char *v, uint32_t *out)
{
	uint64_t pct;

	if (parse_u64(opt, v, &pct) < 0)
		return -1;
	if (pct > 1000) {
		fprintf(stderr, "gshare-simjob: %s: 0..1000 (percent), not %s\n",
			opt, v);
		return -1;
	}
	*out = (uint32_t)pct;
	return 0;
}

static int
parse_sec(const char *opt, const char *v, uint64_t *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno != 0 || *end != '\0' || end == v || !(x >= 0) ||
	    x > 1e7) {
		fprintf(stderr, "gshare-simjob: %s: '%s' is not a number of "
			"seconds\n", opt, v);
		return -1;
	}
	*out = (uint64_t)(x * 1e9);
	return 0;
}

/* Milliseconds, fractions allowed (0.02: 20 us). */
static int
parse_ms(const char *opt, const char *v, uint64_t *out)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno != 0 || *end != '\0' || end == v || !(x >= 0) ||
	    x > 1e9) {
		fprintf(stderr, "gshare-simjob: %s: '%s' is not a number of "
			"milliseconds\n", opt, v);
		return -1;
	}
	*out = (uint64_t)(x * 1e6 + 0.5);
	return 0;
}

/* SHARES[:WEIGHT], shares 1..100, weight >= 1 (0: as shares). */
static int
parse_create(const char *v, uint32_t *shares, uint32_t *weight)
{
	char *end;
	unsigned long s1, w1 = 0;

	errno = 0;
	if (v[0] < '0' || v[0] > '9')
		goto bad;
	s1 = strtoul(v, &end, 10);
	if (errno != 0 || s1 < 1 || s1 > GS_SHARES_PER_GPU)
		goto bad;
	if (*end == ':') {
		v = end + 1;
		if (v[0] < '0' || v[0] > '9')
			goto bad;
		w1 = strtoul(v, &end, 10);
		if (errno != 0 || w1 < 1 || w1 > 1000000)
			goto bad;
	}
	if (*end != '\0')
		goto bad;
	*shares = (uint32_t)s1;
	*weight = (uint32_t)w1;
	return 0;
bad:
	fprintf(stderr, "gshare-simjob: --create: want SHARES[:WEIGHT] with "
		"shares 1..%d and weight 1..1000000, got '%s'\n",
		GS_SHARES_PER_GPU, v);
	return -1;
}

enum { OPT_AT = 256, OPT_BUSY, OPT_IDLE, OPT_OVERRUN, OPT_NOW,
       OPT_ZERO, OPT_MEM, OPT_TASKS, OPT_PROFILE, OPT_SCALING,
       OPT_SLOW, OPT_KIND, OPT_ASLOW, OPT_MORE, OPT_SCRIBBLE };

int
main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "alloc", required_argument, NULL, 'a' },
		{ "create", required_argument, NULL, 'c' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "name", required_argument, NULL, 'n' },
		{ "task-us", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "work", required_argument, NULL, 'w' },
		{ "at", required_argument, NULL, OPT_AT },
		{ "busy-ms", required_argument, NULL, OPT_BUSY },
		{ "idle-ms", required_argument, NULL, OPT_IDLE },
		{ "overrun-ms", required_argument, NULL, OPT_OVERRUN },
		{ "report-zero", no_argument, NULL, OPT_ZERO },
		{ "report-more-ms", required_argument, NULL, OPT_MORE },
		{ "scribble", no_argument, NULL, OPT_SCRIBBLE },
		{ "mem-mib", required_argument, NULL, OPT_MEM },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "now", no_argument, NULL, OPT_NOW },
		{ "tasks", required_argument, NULL, OPT_TASKS },
		{ "profile", required_argument, NULL, OPT_PROFILE },
		{ "scaling", required_argument, NULL, OPT_SCALING },
		{ "corun-slow", required_argument, NULL, OPT_SLOW },
		{ "alone-slow", required_argument, NULL, OPT_ASLOW },
		{ "kind", required_argument, NULL, OPT_KIND },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sim m;
	struct gs_executor ex = { .run = sim_run, .wait = sim_wait };
	struct gs_error err;
	struct gs_client *ctl = NULL;
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct sigaction sa;
	struct reporter rep;
	pthread_t thr;
	const char *sock = NULL;
	uint64_t alloc = 0, dur = 10 * NS_PER_S, at = 0, v, interval = 0;
	uint64_t created = 0, gpu = UINT64_MAX;
	uint32_t shares = 0, weight = 0, kind = GS_CTL_JOB_LIBGSHARE;
	int c, rc = 1, have_thr = 0;

	memset(&m, 0, sizeof(m));
	m.name = "simjob";
	m.task_ns = 500000;
	while ((c = getopt_long(argc, argv, "s:a:c:g:n:t:d:w:i:jh", lopts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'a':
			if (parse_u64("--alloc", optarg, &alloc) < 0 ||
			    alloc == 0) {
				fprintf(stderr, "gshare-simjob: --alloc: bad "
					"allocation id\n");
				return 2;
			}
			break;
		case 'c':
			if (parse_create(optarg, &shares, &weight) < 0)
				return 2;
			break;
		case 'g':
			if (parse_u64("--gpu", optarg, &gpu) < 0 ||
			    gpu > 1024)
				return 2;
			break;
		case 'n':
			m.name = optarg;
			break;
		case 't':
			if (parse_u64("--task-us", optarg, &v) < 0)
				return 2;
			if (v < 1 || v > 10000000) {
				fprintf(stderr, "gshare-simjob: --task-us: "
					"1..10000000\n");
				return 2;
			}
			m.task_ns = v * 1000;
			break;
		case 'd':
			if (parse_sec("--duration", optarg, &dur) < 0)
				return 2;
			break;
		case 'w':
			if (parse_sec("--work", optarg, &m.work_ns) < 0)
				return 2;
			break;
		case OPT_AT:
			if (parse_u64("--at", optarg, &at) < 0)
				return 2;
			break;
		case OPT_BUSY:
			if (parse_ms("--busy-ms", optarg, &m.busy_ns) < 0)
				return 2;
			break;
		case OPT_IDLE:
			if (parse_ms("--idle-ms", optarg, &m.idle_ns) < 0)
				return 2;
			break;
		case OPT_ZERO:
			m.report_zero = 1;
			break;
		case OPT_MORE:
			if (parse_ms("--report-more-ms", optarg,
				     &m.report_more_ns) < 0)
				return 2;
			break;
		case OPT_SCRIBBLE:
			m.scribble = 1;
			break;
		case OPT_MEM:
			if (parse_u64("--mem-mib", optarg, &v) < 0)
				return 2;
			if (v > (1ull << 24)) {
				fprintf(stderr, "gshare-simjob: --mem-mib: "
					"%llu is more than 16 TiB\n",
					(unsigned long long)v);
				return 2;
			}
			m.mem = v << 20;
			break;
		case OPT_OVERRUN:
			if (parse_u64("--overrun-ms", optarg, &v) < 0)
				return 2;
			m.overrun_ns = v * NS_PER_MS;
			break;
		case OPT_KIND:
			if (strcmp(optarg, "libgshare") == 0) {
				kind = GS_CTL_JOB_LIBGSHARE;
			} else if (strcmp(optarg, "gate") == 0) {
				kind = GS_CTL_JOB_GATE;
			} else {
				fprintf(stderr, "gshare-simjob: --kind: "
					"libgshare or gate, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case OPT_PROFILE:
			/* what a kernel of that kind achieves alone */
			if (strcmp(optarg, "compute") == 0) {
				m.sm_pct = 95;
				m.mem_pct = 15;
			} else if (strcmp(optarg, "memory") == 0) {
				m.sm_pct = 60;
				m.mem_pct = 85;
			} else if (strcmp(optarg, "light") == 0) {
				m.sm_pct = 15;
				m.mem_pct = 10;
			} else {
				fprintf(stderr, "gshare-simjob: --profile: "
					"compute, memory or light, not "
					"'%s'\n", optarg);
				return 2;
			}
			break;
		case OPT_SCALING:
			if (strcmp(optarg, "none") == 0) {
				m.scaling = SCALE_NONE;
			} else if (strcmp(optarg, "linear") == 0) {
				m.scaling = SCALE_LINEAR;
			} else if (strcmp(optarg, "memory") == 0) {
				m.scaling = SCALE_MEMORY;
			} else {
				fprintf(stderr, "gshare-simjob: --scaling: "
					"none, linear or memory, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case OPT_SLOW:
			if (parse_pct("--corun-slow", optarg,
				      &m.corun_slow) < 0)
				return 2;
			break;
		case OPT_ASLOW:
			if (parse_pct("--alone-slow", optarg,
				      &m.alone_slow) < 0)
				return 2;
			break;
		case OPT_TASKS:
			if (parse_u64("--tasks", optarg, &m.ntasks) < 0)
				return 2;
			if (m.ntasks < 1 || m.ntasks > 10000000) {
				fprintf(stderr, "gshare-simjob: --tasks: "
					"1..10000000\n");
				return 2;
			}
			break;
		case 'i':
			if (parse_u64("--interval-ms", optarg, &v) < 0 ||
			    v == 0)
				return 2;
			interval = v * NS_PER_MS;
			break;
		case 'j':
			m.json = 1;
			break;
		case OPT_NOW:
			printf("%" PRIu64 "\n", mono_ns());
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	m.task_base = m.task_ns;
	if (optind != argc) {
		fprintf(stderr, "gshare-simjob: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	if (dur == 0 && m.work_ns == 0) {
		fprintf(stderr, "gshare-simjob: --duration 0 needs --work\n");
		return 2;
	}
	if ((m.busy_ns == 0) != (m.idle_ns == 0)) {
		fprintf(stderr, "gshare-simjob: --busy-ms and --idle-ms go "
			"together\n");
		return 2;
	}
	if (m.ntasks != 0 && (m.work_ns != 0 || m.busy_ns != 0 ||
			      m.overrun_ns != 0)) {
		fprintf(stderr, "gshare-simjob: --tasks excludes --work, "
			"--busy-ms/--idle-ms and --overrun-ms\n");
		return 2;
	}
	if (shares != 0 && alloc != 0) {
		fprintf(stderr, "gshare-simjob: --create and --alloc exclude "
			"each other\n");
		return 2;
	}
	m.busy_left = m.busy_ns;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (shares != 0) {
		if (sock == NULL)
			sock = getenv(GS_ENV_SOCKET);
		if (gs_client_connect(sock, 5000, &ctl, &err) < 0)
			goto out_err;
		memset(&req, 0, sizeof(req));
		req.gpu = gpu == UINT64_MAX ? -1 : (int32_t)gpu;
		req.shares = shares;
		req.weight = weight;
		req.priority = GS_PRIO_NORMAL;
		req.mode = GS_MODE_TIME;
		req.uid = (uint32_t)getuid();
		snprintf(req.labels.job, sizeof(req.labels.job), "%s",
			 m.name);
		if (gs_client_alloc_create(ctl, &req, &info, &err) < 0)
			goto out_err;
		created = alloc = info.id;
	}
	if (alloc != 0) {
		if (gs_session_open(sock, alloc, 5000, &m.sess, &err) < 0)
			goto out_err;
	} else if (sock != NULL) {
		fprintf(stderr, "gshare-simjob: --socket needs --alloc or "
			"--create\n");
		rc = 2;
		goto out;
	} else if (gs_session_open_env(5000, &m.sess, &err) < 0) {
		goto out_err;
	}

	if (m.sess != NULL)
		gs_session_set_kind(m.sess, kind);
	if (at != 0)
		sleep_until(at);
	m.start_ns = at != 0 && mono_ns() < at + NS_PER_S ? at : mono_ns();
	m.end_ns = dur ? m.start_ns + dur : UINT64_MAX;
	if (interval != 0) {
		rep.m = &m;
		rep.interval_ns = interval;
		if (pthread_create(&thr, NULL, reporter_main, &rep) == 0)
			have_thr = 1;
	}
	if (m.ntasks != 0) {
		/* the run ends when every task is done, not at --duration */
		m.end_ns = UINT64_MAX;
		if (tasks_main(&m, &err) < 0)
			goto out_err;
	} else if (m.sess != NULL) {
		if (gs_session_run(m.sess, &ex, &m, &err) < 0)
			goto out_err;
	} else {
		/* standalone: the whole simulated GPU, no agent */
		struct gs_run_result res;

		do {
			memset(&res, 0, sizeof(res));
			sim_run(&m, NULL, &res, &err);
			if (!res.done && res.reason == GS_REL_IOWAIT)
				sim_wait(&m, &err);
		} while (!res.done);
	}
	rc = 0;
	goto out;
out_err:
	fprintf(stderr, "gshare-simjob: %s: %s\n", gs_errcode_name(err.code),
		err.msg);
	rc = 1;
out:
	if (have_thr) {
		__atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
		pthread_join(thr, NULL);
	}
	if (rc == 0)
		report(&m, "done", mono_ns(), 0);
	gs_session_close(m.sess);
	gs_tsim_free(m.ts);
	if (created != 0 && ctl != NULL) {
		int r = gs_client_alloc_close(ctl, created, NULL, &err);

		if (r < 0 && (err.code == GS_ECLOSED || err.code == GS_EIO)) {
			/* the agent restarted meanwhile and kept the
			 * allocation: close it over a new connection */
			gs_client_free(ctl);
			ctl = NULL;
			r = gs_client_connect(sock, 5000, &ctl, &err);
			if (r == 0)
				r = gs_client_alloc_close(ctl, created, NULL,
							  &err);
		}
		if (r < 0) {
			fprintf(stderr, "gshare-simjob: closing allocation %"
				PRIu64 ": %s\n", created, err.msg);
			rc = 1;
		}
	}
	gs_client_free(ctl);
	return rc;
}
