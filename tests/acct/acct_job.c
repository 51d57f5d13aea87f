/*
 * acct_job — a simulated GPU job for the accounting integration tests.
 *
 * Plays the plugin (creates its own allocation, as root) and the job: it
 * attaches, maps the control page and speaks the token protocol with the
 * real agent (TOKEN_WANT, wait for TOKEN_GRANT, run, TOKEN_RELEASE).
 * "Kernels" are sleeps of --task-us; between two of them the job checks
 * the suspend word, as the GPU runtime does at block-task boundaries.  It
 * measures its own GPU time (the sum of its task spans, CLOCK_MONOTONIC)
 * and writes the counters into the control page exactly as the control
 * page contract says (gpu_ns, held_ns, block_tasks, suspensions, eviction
 * latency, heartbeat, state, pid).  At the end it prints its own
 * measurement:  "JOB gpu_ns=N held_ns=N tasks=N suspensions=N attaches=N".
 *
 * --reconnect: when the agent goes away, wait for it to come back (up to
 * 30 s) and attach to the same allocation again (the agent restores its
 * allocations, as the runtime's session expects); only if the agent no
 * longer knows it, create it again with the same labels and GPU — what a
 * re-registering plugin does.
 * The new page's counters continue the old ones and the page says so
 * (`resumed`); --fresh-counters starts them again at zero instead.
 *
 * --hog-ms N --hogs K: a misbehaving job instead.  K times it takes the
 * token, keeps it N ms whatever the agent says, reports no GPU time and
 * writes no counters; it prints the wall time it held the token
 * ("hold_ns=").  The agent must charge it for those holds.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_ctlpage.h"

#define PROGRESS_NS 50000000ull	/* counters published during a hold */

struct job {
	const char *sock;
	struct gs_alloc_req req;
	uint64_t work_ns, task_ns;
	int reconnect, close_at_end, fresh;
	int attach_only;	/* setup: never create (closing) */
	uint64_t hog_ns;	/* --hog-ms: misbehaving job */
	unsigned hogs;
	uint64_t mem;		/* --mem-mib: device memory it reports */
	struct gs_client *c;
	volatile struct gs_ctlpage *page;
	uint64_t id;
	/* the job's own totals (all attaches) */
	uint64_t gpu_ns, held_ns, tasks, susp, attaches;
	/* this page's counters */
	struct { uint64_t gpu, held, tasks, susp, esum, emax; } pc;
};

static uint64_t
mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void
sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void
drop(struct job *j)
{
	if (j->page != NULL)
		munmap((void *)j->page, GS_CTL_SIZE);
	j->page = NULL;
	gs_client_free(j->c);
	j->c = NULL;
}

/* Connect, attach (the allocation j->id when there is one and the agent
 * still has it, else a new one), map.  Retries for up to `wait_ms`.
 * *gone (may be NULL) is set when the agent no longer had j->id. */
static int
setup(struct job *j, int wait_ms, int *gone, struct gs_error *err)
{
	struct gs_alloc_info info;
	uint64_t deadline = mono() + (uint64_t)wait_ms * 1000000u;
	int fd = -1, r;
	void *p;

	if (gone != NULL)
		*gone = 0;
	for (;;) {
		r = gs_client_connect(j->sock, 5000, &j->c, err);
		if (r == 0 && j->id != 0) {
			r = gs_client_attach(j->c, j->id, &fd, NULL, err);
			if (r == 0)
				break;
			if (err->code == GS_ENOENT) {
				if (gone != NULL)
					*gone = 1;
				if (j->attach_only) {
					gs_client_free(j->c);
					j->c = NULL;
					return 0;
				}
				j->id = 0;
				r = 0;
			}
		}
		if (r == 0 && j->id == 0 &&
		    gs_client_alloc_create(j->c, &j->req, &info, err) == 0) {
			j->id = info.id;
			/* a re-registration names the same GPU */
			j->req.gpu = info.gpu;
			if (gs_client_attach(j->c, j->id, &fd, NULL, err) < 0)
				return -1;
			break;
		}
		gs_client_free(j->c);
		j->c = NULL;
		if (mono() > deadline)
			return -1;
		sleep_ns(20000000);
	}
	p = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return gs_error_errno(err, GS_EIO, "mmap");
	j->page = p;
	/* after an agent restart the counters continue (the page contract's
	 * `resumed`, set before any counter), unless --fresh-counters asks
	 * for the other behaviour */
	if (j->attaches > 0 && !j->fresh)
		__atomic_store_n(&j->page->resumed, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&j->page->pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
	if (j->mem) {
		/* as a runtime that counts its allocations would: the peak
		 * first, so a reader never sees a peak below the use */
		__atomic_store_n(&j->page->mem_peak, j->mem,
				 __ATOMIC_RELEASE);
		__atomic_store_n(&j->page->mem_used, j->mem,
				 __ATOMIC_RELEASE);
	}
	if (j->fresh)
		memset(&j->pc, 0, sizeof(j->pc));
	j->attaches++;
	return 0;
}

static void
publish(struct job *j, uint32_t state)
{
	volatile struct gs_ctlpage *p = j->page;

	__atomic_store_n(&p->gpu_ns, j->pc.gpu, __ATOMIC_RELEASE);
	__atomic_store_n(&p->held_ns, j->pc.held, __ATOMIC_RELEASE);
	__atomic_store_n(&p->block_tasks, j->pc.tasks, __ATOMIC_RELEASE);
	__atomic_store_n(&p->suspensions, j->pc.susp, __ATOMIC_RELEASE);
	__atomic_store_n(&p->evict_ns_sum, j->pc.esum, __ATOMIC_RELEASE);
	__atomic_store_n(&p->evict_ns_max, j->pc.emax, __ATOMIC_RELEASE);
	__atomic_store_n(&p->heartbeat_ns, mono(), __ATOMIC_RELEASE);
	__atomic_store_n(&p->state, state, __ATOMIC_RELEASE);
}

/* One misbehaving grant: hold, ignore SUSPEND, report nothing. */
static int
hog_once(struct job *j, struct gs_error *err)
{
	uint64_t gen, slice, t0;
	int r;

	if (gs_client_token_want(j->c, err) < 0)
		return -1;
	do {
		r = gs_client_wait_grant(j->c, 10000, &gen, &slice, err);
	} while (r == 0);
	if (r < 0)
		return -1;
	t0 = mono();
	sleep_ns(j->hog_ns);
	j->held_ns += mono() - t0;
	return gs_client_token_release(j->c, gen, 0, 0, GS_REL_IDLE, err);
}

/* One grant: run tasks until suspended or out of work. */
static int
run_once(struct job *j, struct gs_error *err)
{
	uint64_t gen, slice, t0, run_gpu = 0, evict = 0, exit_ns, last_pub;
	uint32_t reason;
	int r;

	publish(j, GS_CTL_WAITING);
	if (gs_client_token_want(j->c, err) < 0)
		return -1;
	do {
		r = gs_client_wait_grant(j->c, 10000, &gen, &slice, err);
	} while (r == 0);
	if (r < 0)
		return -1;
	t0 = mono();
	publish(j, GS_CTL_RUNNING);
	last_pub = t0;
	while (j->gpu_ns + run_gpu < j->work_ns &&
	       __atomic_load_n(&j->page->suspend, __ATOMIC_ACQUIRE) ==
	       GS_CTL_RUN) {
		uint64_t a = mono(), left = j->work_ns - j->gpu_ns - run_gpu;

		sleep_ns(left < j->task_ns ? left : j->task_ns);
		run_gpu += mono() - a;
		j->pc.tasks++;
		j->tasks++;
		if (mono() - last_pub >= PROGRESS_NS) {
			/* a long hold shows up in the counters as it goes,
			 * as the runtime's progress updates do */
			__atomic_store_n(&j->page->gpu_ns, j->pc.gpu + run_gpu,
					 __ATOMIC_RELEASE);
			__atomic_store_n(&j->page->held_ns,
					 j->pc.held + (mono() - t0),
					 __ATOMIC_RELEASE);
			__atomic_store_n(&j->page->block_tasks, j->pc.tasks,
					 __ATOMIC_RELEASE);
			last_pub = mono();
		}
	}
	exit_ns = mono();
	j->gpu_ns += run_gpu;
	j->pc.gpu += run_gpu;
	j->held_ns += exit_ns - t0;
	j->pc.held += exit_ns - t0;
	if (j->gpu_ns < j->work_ns) {
		uint64_t set = __atomic_load_n(&j->page->suspend_set_ns,
					       __ATOMIC_ACQUIRE);

		reason = GS_REL_SUSPENDED;
		evict = exit_ns > set ? exit_ns - set : 0;
		j->pc.susp++;
		j->susp++;
		j->pc.esum += evict;
		if (evict > j->pc.emax)
			j->pc.emax = evict;
	} else {
		reason = GS_REL_EXIT;
	}
	publish(j, reason == GS_REL_EXIT ? GS_CTL_IDLE : GS_CTL_WAITING);
	return gs_client_token_release(j->c, gen, run_gpu, evict, reason, err);
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "shares", required_argument, NULL, 'n' },
		{ "weight", required_argument, NULL, 'w' },
		{ "job", required_argument, NULL, 'j' },
		{ "step", required_argument, NULL, 'p' },
		{ "user", required_argument, NULL, 'u' },
		{ "work", required_argument, NULL, 'W' },
		{ "task-us", required_argument, NULL, 't' },
		{ "reconnect", no_argument, NULL, 'r' },
		{ "close", no_argument, NULL, 'c' },
		{ "fresh-counters", no_argument, NULL, 'f' },
		{ "hog-ms", required_argument, NULL, 'H' },
		{ "hogs", required_argument, NULL, 'K' },
		{ "mem-mib", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	struct job j;
	struct gs_error err;
	int gone = 0;
	int ch;

	memset(&j, 0, sizeof(j));
	j.req.gpu = -1;
	j.req.shares = 10;
	j.req.uid = (uint32_t)getuid();
	j.task_ns = 1000000;
	j.work_ns = 1000000000;
	snprintf(j.req.labels.user, sizeof(j.req.labels.user), "root");
	snprintf(j.req.labels.cluster, sizeof(j.req.labels.cluster), "test");
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's': j.sock = optarg; break;
		case 'n': j.req.shares = (uint32_t)atoi(optarg); break;
		case 'w': j.req.weight = (uint32_t)atoi(optarg); break;
		case 'j':
			snprintf(j.req.labels.job, sizeof(j.req.labels.job),
				 "%s", optarg);
			break;
		case 'p':
			snprintf(j.req.labels.step, sizeof(j.req.labels.step),
				 "%s", optarg);
			break;
		case 'u':
			snprintf(j.req.labels.user, sizeof(j.req.labels.user),
				 "%s", optarg);
			break;
		case 'W': j.work_ns = (uint64_t)(atof(optarg) * 1e9); break;
		case 't': j.task_ns = strtoull(optarg, NULL, 10) * 1000; break;
		case 'r': j.reconnect = 1; break;
		case 'c': j.close_at_end = 1; break;
		case 'f': j.fresh = 1; break;
		case 'H': j.hog_ns = strtoull(optarg, NULL, 10) * 1000000; break;
		case 'K': j.hogs = (unsigned)atoi(optarg); break;
		case 'M': j.mem = strtoull(optarg, NULL, 10) << 20; break;
		default:
			fprintf(stderr, "acct_job: bad option\n");
			return 2;
		}
	}
	if (setup(&j, 5000, NULL, &err) < 0) {
		fprintf(stderr, "acct_job %s: %s\n", j.req.labels.job, err.msg);
		return 1;
	}
	if (j.hog_ns) {
		for (unsigned k = 0; k < j.hogs; k++)
			if (hog_once(&j, &err) < 0) {
				fprintf(stderr, "acct_job %s: %s\n",
					j.req.labels.job, err.msg);
				return 1;
			}
		if (j.close_at_end &&
		    gs_client_alloc_close(j.c, j.id, NULL, &err) < 0) {
			fprintf(stderr, "acct_job %s: close: %s\n",
				j.req.labels.job, err.msg);
			return 1;
		}
		printf("%s hold_ns=%" PRIu64 "\n", j.req.labels.job,
		       j.held_ns);
		drop(&j);
		return 0;
	}
	while (j.gpu_ns < j.work_ns) {
		if (run_once(&j, &err) == 0)
			continue;
		if (!j.reconnect) {
			fprintf(stderr, "acct_job %s: %s\n", j.req.labels.job,
				err.msg);
			return 1;
		}
		drop(&j);
		if (setup(&j, 30000, NULL, &err) < 0) {
			fprintf(stderr, "acct_job %s: agent did not come back: %s\n",
				j.req.labels.job, err.msg);
			return 1;
		}
	}
	publish(&j, GS_CTL_IDLE);
	if (j.close_at_end) {
		while (gs_client_alloc_close(j.c, j.id, NULL, &err) < 0) {
			if (!j.reconnect) {
				fprintf(stderr, "acct_job %s: close: %s\n",
					j.req.labels.job, err.msg);
				return 1;
			}
			/* agent restarted between the last run and the
			 * close: come back and close (nothing more to run) */
			drop(&j);
			j.attach_only = 1;
			if (setup(&j, 30000, &gone, &err) < 0)
				return 1;
			if (gone)	/* the close was done before the
					 * restart: the agent did not keep it */
				break;
			publish(&j, GS_CTL_IDLE);
		}
	}
	printf("%s%s%s gpu_ns=%" PRIu64 " held_ns=%" PRIu64 " tasks=%" PRIu64
	       " suspensions=%" PRIu64 " attaches=%" PRIu64 "\n",
	       j.req.labels.job, j.req.labels.step[0] ? "." : "",
	       j.req.labels.step, j.gpu_ns, j.held_ns, j.tasks, j.susp, j.attaches);
	drop(&j);
	return 0;
}
