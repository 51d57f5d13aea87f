/*
 * bench_agent.c — control-plane throughput of gshared.
 *
 * Starts build/node-agent/gshared -d on a temporary socket (one simulated
 * GPU, 8 allocations so STATUS carries data), then runs N client threads
 * (default 64), each on its own connection doing blocking request/reply
 * round trips through the client library for a fixed time: first PING,
 * then STATUS.  Prints requests per second, per-request latency
 * percentiles and the agent's CPU time per request (from /proc).
 * Then one client creates and closes 300 one-share allocations in turn
 * (what a plugin does per job step or container): the round-trip
 * percentiles of each, which include the allocation table write (create,
 * close) and the wait for the usage row's commit (close).
 * Then one job alone wants, waits for and releases the token 4000
 * times: the want -> grant latency of an uncontended synchronize,
 * sleeping in poll() for the grant, then polling for it
 * (BENCH_ALONE_GAP_US=N: N us between a release and the next want, as an
 * application's host work between two synchronizes leaves the agent
 * idle for; 0 by default).
 * A last phase attaches 8 busy jobs (weights 1..8) that spin on their
 * control page while holding the token and release on SUSPEND, and
 * prints the agent's CPU use (% of one core), token hand-overs per
 * second and each job's share of the holding time against its weight.
 * The agent is stopped with SIGTERM at the end (and killed on any exit).
 *
 * Usage: bench_agent [seconds-per-phase (3)] [clients (64)] [gshared]
 * Environment: BENCH_JOBS_ONLY=1 runs the last phase only;
 * BENCH_EVICT_US=N makes each job keep the token N us after SUSPEND (an
 * eviction, during which the agent polls: handoff_spin);
 * BENCH_HANDOFF=DURATION sets the agent's handoff_spin, BENCH_POLL=true
 * its handoff_poll.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>

#include "gs_client.h"
#include "gs_ctlpage.h"

#define MAX_CLIENTS 1024
#define LAT_SAMPLES 4096

static char dir[64], sock[100], cfgpath[128];
static const char *gshared = "build/node-agent/gshared";
static pid_t agent_pid = -1;
static volatile int go, stop_flag;
static int phase_status;

struct worker {
	pthread_t th;
	struct gs_client *c;
	uint64_t n, errors;
	uint32_t lat_us[LAT_SAMPLES];
	uint32_t nlat;
	unsigned seed;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cleanup(void)
{
	char cmd[128];

	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
	}
	if (dir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) < 0)
			perror("system");
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct gs_status *st;
	struct gs_error err;
	uint64_t t0;
	int rv;

	while (!go)
		sched_yield();
	while (!stop_flag) {
		t0 = now_ns();
		if (phase_status) {
			rv = gs_client_status(w->c, &st, &err);
			if (rv == 0)
				gs_status_free(st);
		} else {
			rv = gs_client_ping(w->c, &err);
		}
		if (rv < 0) {
			w->errors++;
			continue;
		}
		w->n++;
		/* reservoir sample of latencies */
		{
			uint32_t us = (uint32_t)((now_ns() - t0) / 1000);

			if (w->nlat < LAT_SAMPLES) {
				w->lat_us[w->nlat++] = us;
			} else {
				uint64_t j = (uint64_t)rand_r(&w->seed) %
					     w->n;

				if (j < LAT_SAMPLES)
					w->lat_us[j] = us;
			}
		}
	}
	return NULL;
}

#define NJOBS 8

static double agent_cpu_s(void);

static uint64_t evict_ns;	/* BENCH_EVICT_US */
/* hand-over latency: the last release sent -> the next grant received */
static uint64_t last_release_ns;
static uint64_t ho[65536];
static unsigned int nho;

struct job {
	pthread_t th;
	struct gs_client *c;
	volatile struct gs_ctlpage *page;
	uint64_t held_ns, grants, errors;
};

/* A job that always has work: hold the token until SUSPEND, release,
 * wait for the next grant. */
static void *job_main(void *arg)
{
	struct job *j = arg;
	struct gs_error err;
	uint64_t gen, slice, t0, t1;
	int r;

	while (!go)
		sched_yield();
	if (gs_client_token_want(j->c, &err) < 0) {
		j->errors++;
		return NULL;
	}
	while (!stop_flag) {
		r = gs_client_wait_grant(j->c, 100, &gen, &slice, &err);
		if (r == 0)
			continue;
		if (r < 0) {
			j->errors++;
			break;
		}
		t0 = now_ns();
		{
			uint64_t rel = __atomic_exchange_n(&last_release_ns, 0,
							   __ATOMIC_ACQ_REL);
			unsigned int k;

			if (rel != 0 && t0 > rel) {
				k = __atomic_fetch_add(&nho, 1,
						       __ATOMIC_RELAXED);
				if (k < sizeof(ho) / sizeof(ho[0]))
					ho[k] = t0 - rel;
			}
		}
		while (!stop_flag &&
		       __atomic_load_n(&j->page->suspend, __ATOMIC_ACQUIRE) !=
			       GS_CTL_SUSPEND)
			__builtin_ia32_pause();
		if (evict_ns != 0) {	/* the GPU's blocks leaving */
			struct timespec ts = { 0, (long)evict_ns };

			nanosleep(&ts, NULL);
		}
		t1 = now_ns();
		j->held_ns += t1 - t0;
		j->grants++;
		__atomic_store_n(&last_release_ns, now_ns(),
				 __ATOMIC_RELEASE);
		if (gs_client_token_release(j->c, gen, t1 - t0, 0,
					    stop_flag ? GS_REL_EXIT :
							GS_REL_SUSPENDED,
					    &err) < 0) {
			j->errors++;
			break;
		}
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b);

/*
 * One job alone on the GPU, as an attached job's gs_synchronize does with
 * nobody else there: want, wait for the grant, release (done).  The
 * want -> grant time is what every synchronize of an uncontended job
 * pays before its first kernel.
 */
static int run_alone(struct gs_client *root, int n, int spin)
{
	static uint64_t lat[LAT_SAMPLES];
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_client *c;
	struct gs_error err;
	uint64_t gen, slice, t0;
	int i, m = 0, fd, r;
	const char *gs = getenv("BENCH_ALONE_GAP_US");
	long gap_us = gs != NULL ? atol(gs) : 0;

	memset(&req, 0, sizeof(req));
	req.gpu = 0;
	req.shares = 10;
	req.weight = 1;
	if (gs_client_alloc_create(root, &req, &info, &err) < 0 ||
	    gs_client_connect(sock, 5000, &c, &err) < 0) {
		fprintf(stderr, "alone: %s\n", err.msg);
		return -1;
	}
	if (gs_client_attach(c, info.id, &fd, NULL, &err) < 0) {
		fprintf(stderr, "alone: %s\n", err.msg);
		gs_client_free(c);
		return -1;
	}
	close(fd);
	for (i = 0; i < n; i++) {
		if (gap_us > 0) {
			struct timespec ts = { gap_us / 1000000,
					       gap_us % 1000000 * 1000 };

			nanosleep(&ts, NULL);
		}
		t0 = now_ns();
		if (gs_client_token_want(c, &err) < 0)
			break;
		if (spin)	/* as gs_session does when nobody contends */
			gs_client_expect_grant(c, 200000);
		while ((r = gs_client_wait_grant(c, 1000, &gen, &slice,
						 &err)) == 0)
			;
		if (r < 0)
			break;
		if (m < LAT_SAMPLES)
			lat[m++] = now_ns() - t0;
		if (gs_client_token_release(c, gen, 1000, 0, GS_REL_IDLE,
					    &err) < 0)
			break;
	}
	if (i < n) {
		fprintf(stderr, "alone: %s\n", err.msg);
		gs_client_free(c);
		return -1;
	}
	qsort(lat, (size_t)m, sizeof(lat[0]), cmp_u64);
	printf("ALONE   one job alone, %d want -> grant%s, %s: p50 %.1f us, "
	       "p90 %.1f us, p99 %.1f us\n", n,
	       gap_us > 0 ? " after idle gaps" : "",
	       spin ? "polling for it" : "sleeping in poll()",
	       (double)lat[m / 2] / 1e3,
	       (double)lat[m * 9 / 10] / 1e3, (double)lat[m * 99 / 100] / 1e3);
	gs_client_free(c);
	return 0;
}

static int run_jobs(struct gs_client *root, double secs)
{
	static struct job jobs[NJOBS];
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_error err;
	uint64_t t0, t1, total = 0, grants = 0, errors = 0;
	double cpu0, cpu1, el, worst = 0;
	int i, fd;

	memset(&req, 0, sizeof(req));
	req.gpu = 0;
	req.shares = 5;
	for (i = 0; i < NJOBS; i++) {
		req.weight = (uint32_t)i + 1;
		if (gs_client_alloc_create(root, &req, &info, &err) < 0 ||
		    gs_client_connect(sock, 5000, &jobs[i].c, &err) < 0 ||
		    gs_client_attach(jobs[i].c, info.id, &fd, NULL,
				     &err) < 0) {
			fprintf(stderr, "job %d: %s\n", i, err.msg);
			return -1;
		}
		jobs[i].page = mmap(NULL, GS_CTL_SIZE, PROT_READ,
				    MAP_SHARED, fd, 0);
		close(fd);
		if (jobs[i].page == MAP_FAILED) {
			perror("mmap");
			return -1;
		}
	}
	stop_flag = 0;
	go = 0;
	for (i = 0; i < NJOBS; i++)
		pthread_create(&jobs[i].th, NULL, job_main, &jobs[i]);
	cpu0 = agent_cpu_s();
	t0 = now_ns();
	go = 1;
	while (now_ns() - t0 < (uint64_t)(secs * 1e9)) {
		struct timespec ts = { 0, 50000000 };

		nanosleep(&ts, NULL);
	}
	stop_flag = 1;
	cpu1 = agent_cpu_s();
	t1 = now_ns();
	for (i = 0; i < NJOBS; i++)
		pthread_join(jobs[i].th, NULL);
	el = (double)(t1 - t0) / 1e9;
	for (i = 0; i < NJOBS; i++) {
		total += jobs[i].held_ns;
		grants += jobs[i].grants;
		errors += jobs[i].errors;
	}
	printf("JOBS    %d busy jobs, weights 1..%d, slice 4ms, %.1f s: agent "
	       "cpu %.2f%% of a core, %.0f grants/s, errors %llu\n", NJOBS,
	       NJOBS, el, (cpu1 - cpu0) * 100.0 / el, (double)grants / el,
	       (unsigned long long)errors);
	printf("        share of holding time vs 5 %% guaranteed + weight "
	       "x %d/%d:", 100 - 5 * NJOBS, NJOBS * (NJOBS + 1) / 2);
	for (i = 0; i < NJOBS; i++) {
		double got = total ? 100.0 * (double)jobs[i].held_ns /
					     (double)total : 0;
		/* guarantee first: 5 shares each, the rest by weight */
		double want = 5.0 + (100.0 - 5.0 * NJOBS) * (i + 1) /
			      (NJOBS * (NJOBS + 1) / 2);

		printf(" %.1f/%.1f", got, want);
		if (got - want > worst || want - got > worst)
			worst = got > want ? got - want : want - got;
	}
	printf("  (max error %.2f points)\n", worst);
	if (nho > 0) {
		unsigned int m = nho < sizeof(ho) / sizeof(ho[0]) ?
				 nho : (unsigned int)(sizeof(ho) / sizeof(ho[0]));

		qsort(ho, m, sizeof(ho[0]), cmp_u64);
		printf("        hand-over (release sent -> next grant "
		       "received): p50 %.1f us, p90 %.1f us, n=%u\n",
		       (double)ho[m / 2] / 1e3, (double)ho[m * 9 / 10] / 1e3,
		       m);
	}
	for (i = 0; i < NJOBS; i++) {
		munmap((void *)jobs[i].page, GS_CTL_SIZE);
		gs_client_free(jobs[i].c);
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double agent_cpu_s(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, stime = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)agent_pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')');
	if (p == NULL ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
		   "%lu", &ut, &stime) != 2)
		return 0;
	return (double)(ut + stime) / (double)sysconf(_SC_CLK_TCK);
}

static void run_phase(const char *name, struct worker *w, int n,
		      double secs)
{
	static uint32_t all[MAX_CLIENTS * 64];
	uint64_t total = 0, errors = 0, t0, t1;
	double cpu0, cpu1, el;
	size_t nall = 0;
	int i;
	uint32_t k;

	for (i = 0; i < n; i++) {
		w[i].n = w[i].errors = 0;
		w[i].nlat = 0;
		w[i].seed = (unsigned)i + 1;
	}
	stop_flag = 0;
	go = 0;
	for (i = 0; i < n; i++)
		pthread_create(&w[i].th, NULL, worker_main, &w[i]);
	cpu0 = agent_cpu_s();
	t0 = now_ns();
	go = 1;
	while (now_ns() - t0 < (uint64_t)(secs * 1e9)) {
		struct timespec ts = { 0, 50000000 };

		nanosleep(&ts, NULL);
	}
	stop_flag = 1;
	for (i = 0; i < n; i++)
		pthread_join(w[i].th, NULL);
	t1 = now_ns();
	cpu1 = agent_cpu_s();
	el = (double)(t1 - t0) / 1e9;
	for (i = 0; i < n; i++) {
		total += w[i].n;
		errors += w[i].errors;
		/* 64 samples per client into the pooled distribution */
		for (k = 0; k < w[i].nlat && k < 64; k++)
			all[nall++] = w[i].lat_us[k];
	}
	qsort(all, nall, sizeof(all[0]), cmp_u32);
	printf("%-7s %3d clients  %9.0f req/s  p50 %5u us  p99 %6u us  "
	       "agent cpu %.2f us/req  errors %llu\n", name, n,
	       (double)total / el, nall ? all[nall / 2] : 0,
	       nall ? all[nall * 99 / 100] : 0,
	       total ? (cpu1 - cpu0) * 1e6 / (double)total : 0.0,
	       (unsigned long long)errors);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One client, create then close, npairs times: round-trip percentiles. */
static int run_create_close(struct gs_client *c, int npairs)
{
	static uint64_t tc[1000], tx[1000];
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_error err;
	uint64_t t0;
	int i;

	if (npairs > 1000)
		npairs = 1000;
	memset(&req, 0, sizeof(req));
	req.gpu = 0;
	req.shares = 1;
	for (i = 0; i < npairs; i++) {
		snprintf(req.labels.job, sizeof(req.labels.job), "%d",
			 5000 + i);
		t0 = now_ns();
		if (gs_client_alloc_create(c, &req, &info, &err) < 0) {
			fprintf(stderr, "create: %s\n", err.msg);
			return -1;
		}
		tc[i] = now_ns() - t0;
		t0 = now_ns();
		if (gs_client_alloc_close(c, info.id, NULL, &err) < 0) {
			fprintf(stderr, "close: %s\n", err.msg);
			return -1;
		}
		tx[i] = now_ns() - t0;
	}
	qsort(tc, (size_t)npairs, sizeof(tc[0]), cmp_u64);
	qsort(tx, (size_t)npairs, sizeof(tx[0]), cmp_u64);
	printf("CREATE   1 client  %5d calls  p50 %5.0f us  p99 %6.0f us\n",
	       npairs, (double)tc[npairs / 2] / 1e3,
	       (double)tc[npairs * 99 / 100] / 1e3);
	printf("CLOSE    1 client  %5d calls  p50 %5.0f us  p99 %6.0f us\n",
	       npairs, (double)tx[npairs / 2] / 1e3,
	       (double)tx[npairs * 99 / 100] / 1e3);
	return 0;
}

int main(int argc, char *argv[])
{
	static struct worker w[MAX_CLIENTS];
	struct gs_client *root = NULL;
	struct gs_alloc_req req;
	struct gs_error err;
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	int n = argc > 2 ? atoi(argv[2]) : 64, i, fd;
	uint64_t t0;
	FILE *f;

	if (argc > 3)
		gshared = argv[3];
	if (n < 1 || n > MAX_CLIENTS || secs <= 0) {
		fprintf(stderr, "usage: bench_agent [seconds] [clients] "
			"[gshared]\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "/tmp/gsbench.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	atexit(cleanup);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(cfgpath, sizeof(cfgpath), "%s/c.yaml", dir);
	f = fopen(cfgpath, "w");
	if (f == NULL)
		return 1;
	fprintf(f, "socket: %s\nstate_dir: %s/state\nmetrics_listen: \"\"\n"
		"gpus:\n  simulated: 1\n",
		sock, dir);
	if (getenv("BENCH_HANDOFF") != NULL)
		fprintf(f, "handoff_spin: %s\n", getenv("BENCH_HANDOFF"));
	if (getenv("BENCH_POLL") != NULL)
		fprintf(f, "handoff_poll: %s\n", getenv("BENCH_POLL"));
	if (getenv("BENCH_EVICT_US") != NULL)
		evict_ns = strtoull(getenv("BENCH_EVICT_US"), NULL, 10) * 1000;
	fclose(f);
	agent_pid = fork();
	if (agent_pid == 0) {
		fd = open("/dev/null", O_WRONLY);
		dup2(fd, 2);
		execl(gshared, "gshared", "-d", "-f", cfgpath, (char *)NULL);
		_exit(127);
	}
	t0 = now_ns();
	while (gs_client_connect(sock, 1000, &root, &err) < 0) {
		if (now_ns() - t0 > 15000000000ull) {
			fprintf(stderr, "gshared did not start: %s\n",
				err.msg);
			return 1;
		}
		usleep(20000);
	}
	memset(&req, 0, sizeof(req));
	req.gpu = -1;
	req.shares = 5;
	for (i = 0; i < 8; i++) {
		snprintf(req.labels.job, sizeof(req.labels.job), "%d",
			 1000 + i);
		if (gs_client_alloc_create(root, &req, NULL, &err) < 0) {
			fprintf(stderr, "create: %s\n", err.msg);
			return 1;
		}
	}
	for (i = 0; i < n; i++) {
		if (gs_client_connect(sock, 10000, &w[i].c, &err) < 0) {
			fprintf(stderr, "client %d: %s\n", i, err.msg);
			return 1;
		}
	}
	printf("gshared control plane, %d concurrent clients, %.1f s per "
	       "phase, %ld CPUs online\n", n, secs,
	       sysconf(_SC_NPROCESSORS_ONLN));
	if (getenv("BENCH_JOBS_ONLY") != NULL &&
	    strcmp(getenv("BENCH_JOBS_ONLY"), "1") == 0)
		goto jobs;
	phase_status = 0;
	run_phase("PING", w, n, secs);
	phase_status = 1;
	run_phase("STATUS", w, n, secs);
	if (run_create_close(root, 300) < 0)
		return 1;
jobs:
	for (i = 0; i < n; i++)
		gs_client_free(w[i].c);
	printf("        agent handoff_spin %s, handoff_poll %s, jobs release "
	       "%llu us after SUSPEND\n",
	       getenv("BENCH_HANDOFF") ? getenv("BENCH_HANDOFF") : "(default)",
	       getenv("BENCH_POLL") ? getenv("BENCH_POLL") : "(default)",
	       (unsigned long long)(evict_ns / 1000));
	if (run_alone(root, 4000, 0) < 0 || run_alone(root, 4000, 1) < 0)
		return 1;
	if (run_jobs(root, secs < 5 ? 5 : secs) < 0)
		return 1;
	gs_client_free(root);
	kill(agent_pid, SIGTERM);
	waitpid(agent_pid, NULL, 0);
	agent_pid = -1;
	return 0;
}
