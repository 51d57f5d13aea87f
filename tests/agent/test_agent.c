/*
 * test_agent.c — integration test of a live gshared.
 *
 * Starts build/node-agent/gshared -d on a temporary socket with one
 * simulated GPU and drives it with the real client library and raw
 * sockets: admission and placement, STATUS paged over several frames
 * (100 allocations with labels at their longest), permissions for a non-root peer
 * (the checks run in a child that switched to uid/gid 65534, `nobody`),
 * allocations any uid may attach to (GS_ALLOC_ANY_UID), GPU health
 * through injected faults (status, refused allocations, one log line per
 * transition, root only), control pages (magic, version, seals), the
 * token protocol (grant,
 * suspend at slice end, release, hand-over when a job's connection
 * closes, escalation hold and kill), a battery of malformed frames while
 * another client keeps being served, SIGHUP reload keeping allocations
 * and a clean SIGTERM.  Every wait polls against a deadline.  The agent
 * and every child are killed and the directory removed on any exit.
 *
 * Usage: test_agent [path/to/gshared]
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_ctlpage.h"
#include "gs_mempage.h"

#define NOBODY 65534

static char dir[64], sock[100], cfgpath[128], logpath[128];
static const char *gshared = "build/node-agent/gshared";
static pid_t agent_pid = -1;
static int failures, checks;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		checks++;                                                    \
		if (!(cond)) {                                               \
			failures++;                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__,        \
				__LINE__, #cond);                            \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
		}                                                            \
	} while (0)

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void cleanup(void)
{
	char cmd[256];

	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
		agent_pid = -1;
	}
	if (dir[0] != '\0') {
		if (failures) {
			snprintf(cmd, sizeof(cmd), "cat %s >&2", logpath);
			if (system(cmd) < 0)
				perror("system");
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) < 0)
			perror("system");
	}
}

static void on_fatal_signal(int sig)
{
	(void)sig;
	cleanup();
	_exit(1);
}

static void write_config(const char *slice, const char *extra)
{
	FILE *f = fopen(cfgpath, "w");

	if (f == NULL) {
		perror(cfgpath);
		exit(1);
	}
	fprintf(f, "socket: %s\nstate_dir: %s/state\nslice: %s\n"
		"grace: 60ms\nmetrics_listen: \"\"\nwatch_spool: %s/spool\n"
		"gpus:\n  simulated: 1\n%s", sock, dir, slice, dir, extra);
	fclose(f);
}

static void start_agent(void)
{
	struct gs_client *c;
	struct gs_error err;
	int64_t deadline = now_ms() + 15000;
	int fd;

	agent_pid = fork();
	if (agent_pid < 0) {
		perror("fork");
		exit(1);
	}
	if (agent_pid == 0) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
		}
		execl(gshared, "gshared", "-d", "-v", "-f", cfgpath,
		      (char *)NULL);
		perror("exec gshared");
		_exit(127);
	}
	while (now_ms() < deadline) {
		if (gs_client_connect(sock, 1000, &c, &err) == 0) {
			gs_client_free(c);
			return;
		}
		if (waitpid(agent_pid, NULL, WNOHANG) == agent_pid) {
			agent_pid = -1;
			fprintf(stderr, "gshared exited during start-up\n");
			failures++;
			exit(1);
		}
		nap_ms(20);
	}
	fprintf(stderr, "gshared did not come up within 15 s\n");
	failures++;
	exit(1);
}

static struct gs_client *conn(void)
{
	struct gs_client *c = NULL;
	struct gs_error err;

	if (gs_client_connect(sock, 5000, &c, &err) < 0) {
		fprintf(stderr, "connect: %s\n", err.msg);
		failures++;
		exit(1);
	}
	return c;
}

static uint64_t create(struct gs_client *c, int32_t gpu, uint32_t shares,
		       uint32_t weight, uint32_t uid)
{
	struct gs_alloc_req r;
	struct gs_alloc_info info;
	struct gs_error err;

	memset(&r, 0, sizeof(r));
	r.gpu = gpu;
	r.shares = shares;
	r.weight = weight;
	r.priority = GS_PRIO_NORMAL;
	r.uid = uid;
	snprintf(r.labels.job, sizeof(r.labels.job), "t%u", shares);
	if (gs_client_alloc_create(c, &r, &info, &err) < 0) {
		CHECK(0, "create %u shares: %s", shares, err.msg);
		return 0;
	}
	return info.id;
}

static int create_err(struct gs_client *c, int32_t gpu, uint32_t shares,
		      struct gs_error *err)
{
	struct gs_alloc_req r;

	memset(&r, 0, sizeof(r));
	r.gpu = gpu;
	r.shares = shares;
	return gs_client_alloc_create(c, &r, NULL, err);
}

static struct gs_alloc_info *find_alloc(struct gs_status *st, uint64_t id)
{
	uint32_t i;

	for (i = 0; i < st->nallocs; i++)
		if (st->allocs[i].id == id)
			return &st->allocs[i];
	return NULL;
}

/* State of allocation id per STATUS, -1 if absent. */
static int alloc_state(struct gs_client *c, uint64_t id)
{
	struct gs_status *st = NULL;
	struct gs_alloc_info *a;
	struct gs_error err;
	int s = -1;

	if (gs_client_status(c, &st, &err) < 0)
		return -2;
	a = find_alloc(st, id);
	if (a != NULL)
		s = (int)a->state;
	gs_status_free(st);
	return s;
}

static int wait_state(struct gs_client *c, uint64_t id, int state, int ms)
{
	int64_t deadline = now_ms() + ms;

	while (now_ms() < deadline) {
		if (alloc_state(c, id) == state)
			return 1;
		nap_ms(5);
	}
	return 0;
}

/* ---- admission, placement, drain ---- */

static void test_admission(struct gs_client *c)
{
	struct gs_error err;
	uint64_t a, b;

	CHECK(create_err(c, -1, 0, &err) < 0 && err.code == GS_EINVAL,
	      "0 shares: %s", err.msg);
	CHECK(create_err(c, -1, 101, &err) < 0 && err.code == GS_EINVAL,
	      "101 shares: %s", err.msg);
	CHECK(create_err(c, 3, 10, &err) < 0 && err.code == GS_ENOENT,
	      "GPU 3: %s", err.msg);
	a = create(c, -1, 60, 0, 0);
	b = create(c, 0, 40, 0, 0);
	CHECK(a && b && a != b, "two allocations");
	CHECK(create_err(c, -1, 1, &err) < 0 && err.code == GS_EBUSY &&
	      strstr(err.msg, "0 of 100") != NULL,
	      "over 100 shares refused: %s", err.msg);
	CHECK(create_err(c, 0, 1, &err) < 0 && err.code == GS_EBUSY,
	      "named GPU full: %s", err.msg);
	CHECK(gs_client_alloc_close(c, b, NULL, &err) == 0, "%s", err.msg);
	CHECK(gs_client_alloc_close(c, b, NULL, &err) < 0 &&
	      err.code == GS_ENOENT, "double close: %s", err.msg);
	CHECK(gs_client_drain(c, 0, 1, &err) == 0, "drain: %s", err.msg);
	CHECK(create_err(c, -1, 10, &err) < 0 && err.code == GS_EDRAINED,
	      "drained: %s", err.msg);
	CHECK(gs_client_drain(c, 7, 1, &err) < 0 && err.code == GS_ENOENT,
	      "drain GPU 7: %s", err.msg);
	CHECK(gs_client_drain(c, 0, 0, &err) == 0, "undrain: %s", err.msg);
	b = create(c, -1, 40, 0, 0);
	CHECK(b != 0, "after undrain");
	CHECK(gs_client_set_weight(c, a, 0, &err) < 0 &&
	      err.code == GS_EINVAL, "weight 0: %s", err.msg);
	CHECK(gs_client_set_weight(c, 999, 5, &err) < 0 &&
	      err.code == GS_ENOENT, "weight of 999: %s", err.msg);
	CHECK(gs_client_set_priority(c, a, 99, &err) < 0 &&
	      err.code == GS_EINVAL, "priority 99: %s", err.msg);
	CHECK(gs_client_alloc_close_as(c, a, GS_END_MAX, NULL, &err) < 0 &&
	      err.code == GS_EINVAL && strstr(err.msg, "end state") != NULL,
	      "unknown end state: %s", err.msg);
	CHECK(gs_client_alloc_close_as(c, a, GS_END_TIMEOUT, NULL, &err) == 0,
	      "close with an end state: %s", err.msg);
	gs_client_alloc_close(c, b, NULL, &err);
}

/* ---- device memory limits ---- */

#define GIB (1ull << 30)
#define MIB (1ull << 20)

static int create_mem(struct gs_client *c, uint32_t shares, uint64_t mem,
		      struct gs_alloc_info *info, struct gs_error *err)
{
	struct gs_alloc_req r;

	memset(&r, 0, sizeof(r));
	r.gpu = -1;
	r.shares = shares;
	r.mem_limit = mem;
	return gs_client_alloc_create(c, &r, info, err);
}

/* STATUS figures of allocation id (and of GPU 0); 0 on success. */
static int mem_status(struct gs_client *c, uint64_t id,
		      struct gs_alloc_info *out, struct gs_gpu_info *gpu)
{
	struct gs_status *st = NULL;
	struct gs_alloc_info *a;
	struct gs_error err;
	int rv = -1;

	if (gs_client_status(c, &st, &err) < 0)
		return -1;
	a = find_alloc(st, id);
	if (a != NULL && st->ngpus > 0) {
		*out = *a;
		*gpu = st->gpus[0];
		rv = 0;
	}
	gs_status_free(st);
	return rv;
}

static int log_lines(const char *needle);

/* Two processes on one 50G allocation: each page carries the limit, the
 * allocation's figure is their sum, and a sum beyond the limit (each
 * process enforces it on its own) is logged once. */
static void test_memory_procs(struct gs_client *c, uint64_t id)
{
	struct gs_client *p[2];
	struct gs_ctlpage *pg[2];
	struct gs_alloc_info x;
	struct gs_gpu_info g;
	struct gs_error err;
	const char *line = "report 55G of device memory together, beyond "
			   "its limit of 50G";
	int64_t deadline;
	int fd, i, ok = 0;

	for (i = 0; i < 2; i++) {
		pg[i] = MAP_FAILED;
		p[i] = conn();
		fd = -1;
		CHECK(gs_client_attach(p[i], id, &fd, NULL, &err) == 0,
		      "attach %d: %s", i, err.msg);
		if (fd >= 0) {
			pg[i] = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE,
				     MAP_SHARED, fd, 0);
			close(fd);
		}
	}
	if (pg[0] == MAP_FAILED || pg[1] == MAP_FAILED || pg[0] == pg[1]) {
		CHECK(0, "two pages");
		goto out;
	}
	CHECK(pg[0]->mem_limit == 50 * GIB && pg[1]->mem_limit == 50 * GIB,
	      "both pages carry the limit");
	__atomic_store_n(&pg[0]->mem_used, 30 * GIB, __ATOMIC_RELEASE);
	__atomic_store_n(&pg[1]->mem_used, 25 * GIB, __ATOMIC_RELEASE);
	CHECK(mem_status(c, id, &x, &g) == 0 && x.mem_used == 55 * GIB &&
	      x.mem_peak >= 55 * GIB, "sum of two pages: used %llu peak %llu",
	      (unsigned long long)x.mem_used,
	      (unsigned long long)x.mem_peak);
	deadline = now_ms() + 5000;
	while (!(ok = log_lines(line) == 1) && now_ms() < deadline)
		nap_ms(20);
	CHECK(ok, "one log line for the sum beyond the limit (%d)",
	      log_lines(line));
out:
	for (i = 0; i < 2; i++) {
		if (pg[i] != MAP_FAILED)
			munmap(pg[i], GS_CTL_SIZE);
		gs_client_free(p[i]);
	}
}

/* The simulated GPU has 80G and the default reserve is 1G: 79G (80896M)
 * for limits.  Default limits are the shares' part of it in whole MiB;
 * a limit asked for must fit beside those already placed; the page
 * carries the limit; the job's figures come back in STATUS; a process
 * that goes away leaves no memory in use. */
static void test_memory(struct gs_client *c)
{
	struct gs_alloc_info a30, a50, x, info;
	struct gs_gpu_info g;
	struct gs_error err;
	struct gs_client *job;
	struct gs_ctlpage *page;
	const uint64_t usable = 80896 * MIB;
	int fd = -1;

	memset(&a30, 0, sizeof(a30));
	memset(&a50, 0, sizeof(a50));
	CHECK(create_mem(c, 30, 0, &a30, &err) == 0, "30 shares: %s",
	      err.msg);
	/* 30 % of 79G in whole MiB, less the 512M context reserve */
	CHECK(a30.mem_limit == 23756 * MIB, "default limit of 30 shares %llu",
	      (unsigned long long)a30.mem_limit);
	CHECK(create_mem(c, 10, 100 * GIB, NULL, &err) < 0 &&
	      err.code == GS_EINVAL && strstr(err.msg, "100G") != NULL &&
	      strstr(err.msg, "80384M") != NULL,
	      "a limit above the GPU: %s", err.msg);
	CHECK(create_mem(c, 10, 1000, NULL, &err) < 0 &&
	      err.code == GS_EINVAL, "a limit under 1M: %s", err.msg);
	CHECK(create_mem(c, 10, 60 * GIB, NULL, &err) < 0 &&
	      err.code == GS_EBUSY && strstr(err.msg, "60G") != NULL &&
	      strstr(err.msg, "56628M") != NULL,
	      "60G beside 23756M and a context reserve: %s", err.msg);
	CHECK(create_mem(c, 20, 50 * GIB, &a50, &err) == 0, "50G: %s",
	      err.msg);
	CHECK(a50.mem_limit == 50 * GIB, "asked limit %llu",
	      (unsigned long long)a50.mem_limit);
	/* 50 shares are free but their default (39936M) is not: 79G -
	 * (23756M + 512M) - (50G + 512M) = 4916M, and the new one's
	 * context reserve comes out of that too */
	CHECK(create_mem(c, 50, 0, NULL, &err) < 0 &&
	      err.code == GS_EBUSY && strstr(err.msg, "4916M") != NULL,
	      "default beside the others: %s", err.msg);
	CHECK(create_mem(c, 5, 4404 * MIB + 1, NULL, &err) < 0 &&
	      err.code == GS_EBUSY, "a byte more than is left: %s", err.msg);
	CHECK(create_mem(c, 5, 4404 * MIB, &info, &err) == 0,
	      "exactly what is left: %s", err.msg);
	CHECK(create_mem(c, 1, MIB, NULL, &err) < 0 && err.code == GS_EBUSY,
	      "nothing left: %s", err.msg);
	CHECK(mem_status(c, a50.id, &x, &g) == 0, "status");
	CHECK(g.mem_total == 80 * GIB &&
	      g.mem_limits == usable - 3 * 512 * MIB,
	      "gpu memory %llu, limits %llu",
	      (unsigned long long)g.mem_total,
	      (unsigned long long)g.mem_limits);
	gs_client_alloc_close(c, info.id, NULL, &err);

	/* the job's page: the limit, and its figures in STATUS */
	job = conn();
	CHECK(gs_client_attach(job, a50.id, &fd, NULL, &err) == 0,
	      "attach: %s", err.msg);
	page = fd >= 0 ? mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE,
			      MAP_SHARED, fd, 0) : MAP_FAILED;
	CHECK(page != MAP_FAILED, "mmap");
	if (page != MAP_FAILED) {
		CHECK(page->mem_limit == 50 * GIB, "page limit %llu",
		      (unsigned long long)page->mem_limit);
		__atomic_store_n(&page->mem_used, 5 * GIB, __ATOMIC_RELEASE);
		__atomic_store_n(&page->mem_peak, 7 * GIB, __ATOMIC_RELEASE);
		CHECK(mem_status(c, a50.id, &x, &g) == 0 &&
		      x.mem_used == 5 * GIB && x.mem_peak == 7 * GIB &&
		      x.mem_limit == 50 * GIB, "status used %llu peak %llu",
		      (unsigned long long)x.mem_used,
		      (unsigned long long)x.mem_peak);
		/* a peak below the use is not believed */
		__atomic_store_n(&page->mem_used, 9 * GIB, __ATOMIC_RELEASE);
		CHECK(mem_status(c, a50.id, &x, &g) == 0 &&
		      x.mem_peak == 9 * GIB, "peak %llu",
		      (unsigned long long)x.mem_peak);
		__atomic_store_n(&page->mem_used, 2 * GIB, __ATOMIC_RELEASE);
	}
	/* the process goes: nothing in use, the peak stays */
	gs_client_free(job);
	{
		int64_t deadline = now_ms() + 5000;
		int ok = 0;

		while (!ok && now_ms() < deadline) {
			ok = mem_status(c, a50.id, &x, &g) == 0 &&
			     x.pid == 0 && x.mem_used == 0 &&
			     x.mem_peak == 9 * GIB;
			if (!ok)
				nap_ms(5);
		}
		CHECK(ok, "after the job left: used %llu peak %llu",
		      (unsigned long long)x.mem_used,
		      (unsigned long long)x.mem_peak);
	}
	if (page != MAP_FAILED) {
		CHECK(page->mem_used == 0, "page gauge %llu",
		      (unsigned long long)page->mem_used);
		munmap(page, GS_CTL_SIZE);
	}
	if (fd >= 0)
		close(fd);
	test_memory_procs(c, a50.id);
	gs_client_alloc_close(c, a50.id, NULL, &err);
	gs_client_alloc_close(c, a30.id, NULL, &err);
	CHECK(create_mem(c, 1, 0, &info, &err) == 0, "after closing: %s",
	      err.msg);
	CHECK(mem_status(c, info.id, &x, &g) == 0 &&
	      g.mem_limits == info.mem_limit && info.mem_limit == 296 * MIB,
	      "limits given back: %llu, 1 share %llu",
	      (unsigned long long)g.mem_limits,
	      (unsigned long long)info.mem_limit);
	gs_client_alloc_close(c, info.id, NULL, &err);
}

/* SET_MEM: an allocation's limit settled anew before any process
 * attaches (the device plugin learns a container's gshare.io/gpu-mem
 * after its shares' allocation exists). */
static void test_set_mem(struct gs_client *c)
{
	struct gs_alloc_info a30, a50, x, info;
	struct gs_gpu_info g;
	struct gs_error err;
	struct gs_client *job;
	int fd = -1;

	CHECK(create_mem(c, 30, 0, &a30, &err) == 0, "30 shares: %s",
	      err.msg);
	memset(&info, 0, sizeof(info));
	CHECK(gs_client_alloc_set_mem(c, a30.id, 10 * GIB, &info, &err) == 0 &&
	      info.mem_limit == 10 * GIB, "10G: %s, limit %llu", err.msg,
	      (unsigned long long)info.mem_limit);
	CHECK(mem_status(c, a30.id, &x, &g) == 0 && x.mem_limit == 10 * GIB &&
	      g.mem_limits == 10 * GIB, "status %llu, gpu limits %llu",
	      (unsigned long long)x.mem_limit,
	      (unsigned long long)g.mem_limits);
	CHECK(gs_client_alloc_set_mem(c, a30.id, 0, &info, &err) == 0 &&
	      info.mem_limit == 23756 * MIB, "back to the default: %s, %llu",
	      err.msg, (unsigned long long)info.mem_limit);
	CHECK(gs_client_alloc_set_mem(c, a30.id, 100 * GIB, NULL, &err) < 0 &&
	      err.code == GS_EINVAL && strstr(err.msg, "100G") != NULL,
	      "above the GPU: %s", err.msg);
	CHECK(gs_client_alloc_set_mem(c, a30.id, 1000, NULL, &err) < 0 &&
	      err.code == GS_EINVAL, "under 1M: %s", err.msg);
	CHECK(create_mem(c, 50, 50 * GIB, &a50, &err) == 0, "50G: %s",
	      err.msg);
	/* 79G - (50G + 512M) - 512M = 28G for it */
	CHECK(gs_client_alloc_set_mem(c, a30.id, 30 * GIB, NULL, &err) < 0 &&
	      err.code == GS_EBUSY && strstr(err.msg, "30G") != NULL,
	      "30G beside 50G: %s", err.msg);
	CHECK(gs_client_alloc_set_mem(c, a30.id, 28 * GIB, &info, &err) == 0 &&
	      info.mem_limit == 28 * GIB, "exactly what is left: %s",
	      err.msg);
	CHECK(mem_status(c, a30.id, &x, &g) == 0 && x.mem_limit == 28 * GIB &&
	      g.mem_limits == 78 * GIB, "refusals changed nothing: %llu, "
	      "gpu limits %llu", (unsigned long long)x.mem_limit,
	      (unsigned long long)g.mem_limits);
	CHECK(gs_client_alloc_set_mem(c, 987654, GIB, NULL, &err) < 0 &&
	      err.code == GS_ENOENT, "no such allocation: %s", err.msg);
	/* a job attached: its page has the limit already, so no change */
	job = conn();
	CHECK(gs_client_attach(job, a30.id, &fd, NULL, &err) == 0,
	      "attach: %s", err.msg);
	CHECK(gs_client_alloc_set_mem(c, a30.id, GIB, NULL, &err) < 0 &&
	      err.code == GS_ESTATE && strstr(err.msg, "attached") != NULL,
	      "while attached: %s", err.msg);
	if (fd >= 0)
		close(fd);
	gs_client_free(job);
	gs_client_alloc_close(c, a50.id, NULL, &err);
	gs_client_alloc_close(c, a30.id, NULL, &err);
}

/* ---- permissions (child runs as nobody) ---- */

static int run_as_nobody(void (*fn)(void *), void *arg)
{
	pid_t p = fork();
	int st;

	if (p == 0) {
		failures = 0;
		if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 ||
		    setuid(NOBODY) < 0) {
			perror("drop privileges");
			_exit(2);
		}
		fn(arg);
		_exit(failures ? 1 : 0);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct perm_ids {
	uint64_t root_alloc, own_alloc;
};

static void nobody_checks(void *arg)
{
	struct perm_ids *ids = arg;
	struct gs_client *c = conn(), *c2;
	struct gs_status *st = NULL;
	struct gs_labels lab;
	struct gs_error err;
	struct gs_ctlpage *page;
	struct stat sb, msb;
	int mfd;
	int fd = -1;

	CHECK(gs_client_ping(c, &err) == 0, "ping: %s", err.msg);
	CHECK(create_err(c, -1, 10, &err) < 0 && err.code == GS_EPERM,
	      "nobody creates: %s", err.msg);
	CHECK(gs_client_set_weight(c, ids->own_alloc, 5, &err) < 0 &&
	      err.code == GS_EPERM, "nobody reweights own: %s", err.msg);
	CHECK(gs_client_set_weight(c, ids->root_alloc, 5, &err) < 0 &&
	      err.code == GS_EPERM, "nobody reweights root's: %s", err.msg);
	CHECK(gs_client_set_priority(c, ids->root_alloc, 2, &err) < 0 &&
	      err.code == GS_EPERM, "nobody set-priority: %s", err.msg);
	CHECK(gs_client_drain(c, 0, 1, &err) < 0 && err.code == GS_EPERM,
	      "nobody drains: %s", err.msg);
	CHECK(gs_client_alloc_close(c, ids->own_alloc, NULL, &err) < 0 &&
	      err.code == GS_EPERM, "nobody closes: %s", err.msg);
	CHECK(gs_client_alloc_set_mem(c, ids->own_alloc, 1ull << 30, NULL,
				      &err) < 0 && err.code == GS_EPERM,
	      "nobody sets its memory limit: %s", err.msg);
	memset(&lab, 0, sizeof(lab));
	CHECK(gs_client_alloc_label(c, ids->own_alloc, &lab, NULL, &err) < 0 &&
	      err.code == GS_EPERM, "nobody labels: %s", err.msg);
	/* another user's allocation is answered as if it did not exist,
	 * like one that does not: no owner leaks */
	CHECK(gs_client_attach(c, ids->root_alloc, &fd, NULL, &err) < 0 &&
	      err.code == GS_ENOENT && strstr(err.msg, "uid") == NULL,
	      "nobody attaches root's: %s", err.msg);
	CHECK(gs_client_attach(c, 999999, &fd, NULL, &err) < 0 &&
	      err.code == GS_ENOENT, "nobody attaches a missing one: %s",
	      err.msg);
	/* status: only its own allocation */
	CHECK(gs_client_status(c, &st, &err) == 0, "status: %s", err.msg);
	if (st != NULL) {
		CHECK(st->nallocs == 1 && st->allocs[0].id == ids->own_alloc,
		      "nobody sees %u allocations", st->nallocs);
		gs_status_free(st);
	}
	/* attach its own: a sealed, initialized page */
	CHECK(gs_client_attach(c, ids->own_alloc, &fd, NULL, &err) == 0,
	      "attach own: %s", err.msg);
	if (fd >= 0) {
		CHECK(fstat(fd, &sb) == 0 && sb.st_size == GS_CTL_SIZE,
		      "page size %lld", (long long)sb.st_size);
		CHECK(ftruncate(fd, 2 * GS_CTL_SIZE) < 0 && errno == EPERM,
		      "page can grow");
		CHECK(ftruncate(fd, 0) < 0 && errno == EPERM,
		      "page can shrink");
		CHECK((fcntl(fd, F_GET_SEALS) & F_SEAL_SEAL) != 0,
		      "seals not sealed");
		page = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0);
		CHECK(page != MAP_FAILED, "mmap page");
		if (page != MAP_FAILED) {
			CHECK(page->magic == GS_CTL_MAGIC, "magic %x",
			      page->magic);
			CHECK(page->version == GS_CTL_VERSION, "version");
			CHECK(page->alloc_id == ids->own_alloc, "alloc id");
			CHECK(page->page_size == GS_CTL_SIZE, "page_size");
			CHECK(page->suspend == GS_CTL_SUSPEND,
			      "no token yet, suspend must be set");
			munmap(page, GS_CTL_SIZE);
		}
		close(fd);
	}
	/* the allocation's memory page came before it: sealed, its own */
	mfd = gs_client_take_mem_fd(c);
	CHECK(mfd >= 0, "no memory page with ATTACHED");
	if (mfd >= 0) {
		volatile struct gs_mempage *mp;

		CHECK(fstat(mfd, &msb) == 0 && msb.st_size == GS_MEM_SIZE,
		      "memory page size %lld", (long long)msb.st_size);
		CHECK(ftruncate(mfd, 0) < 0 && errno == EPERM,
		      "memory page can shrink");
		mp = mmap(NULL, GS_MEM_SIZE, PROT_READ, MAP_SHARED, mfd, 0);
		CHECK(mp != MAP_FAILED, "mmap memory page");
		if (mp != MAP_FAILED) {
			CHECK(mp->magic == GS_MEM_MAGIC &&
			      mp->version == GS_MEM_VERSION &&
			      mp->alloc_id == ids->own_alloc && mp->used == 0,
			      "memory page header: magic %x alloc %llu",
			      mp->magic, (unsigned long long)mp->alloc_id);
			munmap((void *)mp, GS_MEM_SIZE);
		}
	}
	CHECK(gs_client_take_mem_fd(c) == -1, "memory page fd taken twice");
	/* a second process of the job attaches too, with its own page
	 * (before issue 15.4: EBUSY "already attached by pid") and the
	 * same memory page */
	c2 = conn();
	CHECK(gs_client_attach(c2, ids->own_alloc, &fd, NULL, &err) == 0,
	      "second attach: %s", err.msg);
	{
		int m2 = gs_client_take_mem_fd(c2);
		struct stat sb2;

		CHECK(m2 >= 0 && mfd >= 0 && fstat(m2, &sb2) == 0 &&
		      sb2.st_ino == msb.st_ino && sb2.st_dev == msb.st_dev,
		      "second process: not the same memory page");
		if (m2 >= 0)
			close(m2);
		if (mfd >= 0)
			close(mfd);
	}
	if (fd >= 0) {
		volatile struct gs_ctlpage *p2 = mmap(NULL, GS_CTL_SIZE,
			PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		CHECK(p2 != MAP_FAILED, "mmap second page");
		if (p2 != MAP_FAILED) {
			CHECK(p2->alloc_id == ids->own_alloc &&
			      p2->suspend == GS_CTL_SUSPEND,
			      "second page: its allocation, suspended");
			/* a lying job scribbles what it shares: the agent's
			 * fields and a huge memory figure, then leaves */
			p2->mem_used = UINT64_MAX;
			p2->contenders = 0xffffffffu;
			p2->contend_flags = 0xffffffffu;
			p2->contend_seen_ns = UINT64_MAX;
			munmap((void *)p2, GS_CTL_SIZE);
		}
		close(fd);
	}
	gs_client_free(c2);
	/* the agent took the liar's figure out of the shared counter
	 * without wrapping, and still answers */
	{
		struct gs_alloc_info in;
		int m3;

		c2 = conn();
		CHECK(gs_client_attach(c2, ids->own_alloc, &fd, &in, &err) ==
			      0, "attach after the liar: %s", err.msg);
		m3 = gs_client_take_mem_fd(c2);
		if (m3 >= 0) {
			volatile struct gs_mempage *mp = mmap(NULL,
				GS_MEM_SIZE, PROT_READ, MAP_SHARED, m3, 0);

			if (mp != MAP_FAILED) {
				CHECK(mp->used == 0, "shared counter after "
				      "the liar left: %llu",
				      (unsigned long long)mp->used);
				munmap((void *)mp, GS_MEM_SIZE);
			}
			close(m3);
		}
		if (fd >= 0)
			close(fd);
		gs_client_free(c2);
	}
	gs_client_free(c);
}

/* Up to GS_ALLOC_MAX_ATTACH (64) processes attach to one allocation; one
 * more gets a clear EBUSY; one leaving makes room again. */
static void test_multi_attach(struct gs_client *root)
{
	struct gs_client *cs[65];
	struct gs_error err;
	uint64_t id = create(root, -1, 10, 0, 0);
	int fd, i, n = 0;

	for (i = 0; i < 64; i++) {
		cs[i] = conn();
		if (gs_client_attach(cs[i], id, &fd, NULL, &err) == 0) {
			n++;
			close(fd);
		}
	}
	CHECK(n == 64, "64 processes attach: %d did", n);
	cs[64] = conn();
	CHECK(gs_client_attach(cs[64], id, &fd, NULL, &err) < 0 &&
	      err.code == GS_EBUSY && strstr(err.msg, "64 attached") != NULL,
	      "65th attach: %d %s", err.code, err.msg);
	gs_client_free(cs[3]);
	cs[3] = NULL;
	fd = -1;
	for (i = 0; i < 50; i++) {
		gs_client_free(cs[64]);
		cs[64] = conn();
		if (gs_client_attach(cs[64], id, &fd, NULL, &err) == 0)
			break;
		usleep(20000);
	}
	CHECK(fd >= 0, "attach after one left: %s", err.msg);
	if (fd >= 0)
		close(fd);
	for (i = 0; i < 65; i++)
		gs_client_free(cs[i]);
	gs_client_alloc_close(root, id, NULL, &err);
}

static void test_permissions(struct gs_client *root)
{
	struct perm_ids ids;
	struct gs_error err;
	int rc;

	ids.root_alloc = create(root, -1, 20, 0, 0);
	ids.own_alloc = create(root, -1, 20, 0, NOBODY);
	rc = run_as_nobody(nobody_checks, &ids);
	CHECK(rc == 0, "checks as nobody failed (rc %d)", rc);
	/* nobody's connection is gone: the allocation stays, idle */
	CHECK(wait_state(root, ids.own_alloc, GS_ASTATE_IDLE, 5000),
	      "own allocation idle after its job left");
	gs_client_alloc_close(root, ids.root_alloc, NULL, &err);
	gs_client_alloc_close(root, ids.own_alloc, NULL, &err);
}

/* ---- allocations any uid may attach to ---- */

static uint64_t create_flags(struct gs_client *c, uint32_t shares,
			     uint32_t flags, struct gs_error *err)
{
	struct gs_alloc_req r;
	struct gs_alloc_info info;

	memset(&r, 0, sizeof(r));
	r.gpu = -1;
	r.shares = shares;
	r.flags = flags;
	if (gs_client_alloc_create(c, &r, &info, err) < 0)
		return 0;
	return info.id;
}

static void nobody_any_uid(void *arg)
{
	struct perm_ids *ids = arg;	/* root_alloc: any uid; own: plain */
	struct gs_client *c = conn(), *c2 = conn();
	struct gs_alloc_info info;
	struct gs_error err;
	int fd = -1;

	CHECK(gs_client_attach(c, ids->own_alloc, &fd, NULL, &err) < 0 &&
	      err.code == GS_ENOENT, "nobody attaches root's plain "
	      "allocation: %s", err.msg);
	memset(&info, 0, sizeof(info));
	CHECK(gs_client_attach(c2, ids->root_alloc, &fd, &info, &err) == 0,
	      "nobody attaches an any-uid allocation: %s", err.msg);
	CHECK(info.flags & GS_ALLOC_ANY_UID, "ATTACHED flags %#x", info.flags);
	if (fd >= 0)
		close(fd);
	CHECK(create_flags(c, 5, GS_ALLOC_ANY_UID, &err) == 0 &&
	      err.code == GS_EPERM, "nobody creates an any-uid allocation: "
	      "%s", err.msg);
	gs_client_free(c2);
	gs_client_free(c);
}

static void test_any_uid(struct gs_client *root)
{
	struct perm_ids ids;
	struct gs_status *st = NULL;
	struct gs_alloc_info *a;
	struct gs_error err;
	int rc;

	ids.root_alloc = create_flags(root, 10, GS_ALLOC_ANY_UID, &err);
	CHECK(ids.root_alloc != 0, "create any-uid: %s", err.msg);
	ids.own_alloc = create(root, -1, 10, 0, 0);
	CHECK(create_flags(root, 5, 0x80, &err) == 0 &&
	      err.code == GS_EINVAL && strstr(err.msg, "flags") != NULL,
	      "unknown flag: %s", err.msg);
	CHECK(gs_client_status(root, &st, &err) == 0, "status: %s", err.msg);
	if (st != NULL) {
		a = find_alloc(st, ids.root_alloc);
		CHECK(a != NULL && (a->flags & GS_ALLOC_ANY_UID),
		      "STATUS shows the any-uid flag");
		a = find_alloc(st, ids.own_alloc);
		CHECK(a != NULL && a->flags == 0, "plain allocation flags");
		gs_status_free(st);
	}
	rc = run_as_nobody(nobody_any_uid, &ids);
	CHECK(rc == 0, "any-uid checks as nobody failed (rc %d)", rc);
	gs_client_alloc_close(root, ids.root_alloc, NULL, &err);
	gs_client_alloc_close(root, ids.own_alloc, NULL, &err);
}

/* ---- token protocol ---- */

struct job {
	struct gs_client *c;
	uint64_t id;
	int fd;
	volatile struct gs_ctlpage *page;
};

static void job_attach(struct job *j, uint64_t id)
{
	struct gs_error err;

	j->c = conn();
	j->id = id;
	j->fd = -1;
	j->page = NULL;
	if (gs_client_attach(j->c, id, &j->fd, NULL, &err) < 0) {
		CHECK(0, "attach %llu: %s", (unsigned long long)id, err.msg);
		return;
	}
	j->page = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       j->fd, 0);
	if (j->page == MAP_FAILED) {
		CHECK(0, "mmap: %s", strerror(errno));
		j->page = NULL;
	}
}

static void job_free(struct job *j)
{
	if (j->page != NULL)
		munmap((void *)j->page, GS_CTL_SIZE);
	if (j->fd >= 0)
		close(j->fd);
	gs_client_free(j->c);
	j->c = NULL;
}

static int wait_suspend(struct job *j, int ms)
{
	int64_t deadline = now_ms() + ms;

	while (now_ms() < deadline) {
		if (__atomic_load_n(&j->page->suspend, __ATOMIC_ACQUIRE) ==
		    GS_CTL_SUSPEND)
			return 1;
		nap_ms(1);
	}
	return 0;
}

/* Several processes on one allocation share its token: a grant goes to
 * every process that wants, one that wants during the grant joins it at
 * once with the same generation, SUSPEND goes into every page, the token
 * comes back only when both released, and a process that disconnects
 * leaves the other attached (issue 15.4). */
static void test_tokens_shared(struct gs_client *root)
{
	struct job a1, a2, b;
	struct gs_error err;
	uint64_t id = create(root, -1, 30, 0, 0), gen1 = 0, gen2 = 0;
	uint64_t slice = 0, g = 0;
	struct gs_status *st = NULL;
	int r;

	job_attach(&a1, id);
	job_attach(&a2, id);
	job_attach(&b, create(root, -1, 30, 0, 0));
	if (a1.page == NULL || a2.page == NULL || b.page == NULL)
		goto out;
	CHECK(a1.page != a2.page && a1.page->alloc_id == id &&
	      a2.page->alloc_id == id, "two pages of one allocation");
	CHECK(gs_client_token_want(a1.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a1.c, 5000, &gen1, &slice, &err);
	CHECK(r == 1, "grant to a1 (%d): %s", r, err.msg);
	/* a2 wants while the grant runs: granted at once, same generation */
	CHECK(gs_client_token_want(a2.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a2.c, 5000, &gen2, &slice, &err);
	CHECK(r == 1 && gen2 == gen1, "a2 joins grant %llu (%d, gen %llu): "
	      "%s", (unsigned long long)gen1, r, (unsigned long long)gen2,
	      err.msg);
	CHECK(a2.page->grant_gen == gen1 && a2.page->suspend == GS_CTL_RUN,
	      "a2's page shows the grant");
	/* b competes: SUSPEND lands in both pages */
	CHECK(gs_client_token_want(b.c, &err) == 0, "%s", err.msg);
	CHECK(wait_suspend(&a1, 2000) && wait_suspend(&a2, 2000),
	      "suspend in both pages");
	/* a1 releases: the token stays with the allocation until a2 does
	 * (within the 60 ms grace) */
	CHECK(gs_client_token_release(a1.c, gen1, 1000, 0, GS_REL_SUSPENDED,
				      &err) == 0, "%s", err.msg);
	CHECK(gs_client_ping(a1.c, &err) == 0, "ping: %s", err.msg);
	CHECK(gs_client_status(root, &st, &err) == 0, "status: %s", err.msg);
	if (st != NULL) {
		CHECK(st->ngpus > 0 && st->gpus[0].holder == id,
		      "holder after one of two released: %llu",
		      st->ngpus ? (unsigned long long)st->gpus[0].holder : 0);
		gs_status_free(st);
		st = NULL;
	}
	CHECK(gs_client_token_release(a2.c, gen1, 1000, 0, GS_REL_IDLE,
				      &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(b.c, 5000, &g, &slice, &err);
	CHECK(r == 1, "b granted after both released (%d): %s", r, err.msg);
	/* a1 disconnects (kill -9): a2 stays attached */
	job_free(&a1);
	{
		int64_t deadline = now_ms() + 3000;
		uint32_t i, n = 0;

		do {
			if (gs_client_status(root, &st, &err) < 0)
				break;
			for (i = 0, n = 0; i < st->nallocs; i++)
				if (st->allocs[i].id == id)
					n = st->allocs[i].nattached;
			gs_status_free(st);
			if (n == 1)
				break;
			nap_ms(10);
		} while (now_ms() < deadline);
		CHECK(n == 1, "a2 still attached after a1 left (%u)", n);
	}
	job_free(&a2);
	job_free(&b);
	gs_client_alloc_close(root, id, NULL, &err);
	return;
out:
	job_free(&a1);
	job_free(&a2);
	job_free(&b);
}

/* A closed allocation's GPU and held time: the CLOSE's reply (what the
 * SPANK epilog writes to a Slurm job's AdminComment) and the usage store
 * (gsacct) give the same nanoseconds, although the job's own count on its
 * page (its clock: grant received → release sent) is a little less than
 * what the agent saw (docs/accounting.md, Held time). */
static void test_close_totals(struct gs_client *root)
{
	struct job j;
	struct gs_alloc_info fin;
	struct gs_error err;
	uint64_t id = create(root, -1, 20, 0, 0), gen = 0, slice = 0;
	uint64_t t0, own_held = 0, own_gpu = 0, db_gpu = 0, db_held = 0;
	char cmd[512];
	FILE *p;
	int r, k, n = 0;

	job_attach(&j, id);
	if (j.page == NULL) {
		job_free(&j);
		return;
	}
	for (k = 0; k < 3; k++) {
		CHECK(gs_client_token_want(j.c, &err) == 0, "%s", err.msg);
		r = gs_client_wait_grant(j.c, 5000, &gen, &slice, &err);
		CHECK(r == 1, "grant %d (%d): %s", k, r, err.msg);
		if (r != 1)
			break;
		t0 = now_ns();
		nap_ms(15);
		/* the job's own measurement, taken after the grant arrived
		 * and before the release leaves: shorter than the agent's */
		own_held += now_ns() - t0;
		own_gpu += (now_ns() - t0) * 9 / 10;
		__atomic_store_n(&j.page->held_ns, own_held, __ATOMIC_RELEASE);
		__atomic_store_n(&j.page->gpu_ns, own_gpu, __ATOMIC_RELEASE);
		CHECK(gs_client_token_release(j.c, gen, (now_ns() - t0) * 9 /
					      10, 0, GS_REL_IDLE, &err) == 0,
		      "release %d: %s", k, err.msg);
		CHECK(gs_client_ping(j.c, &err) == 0, "ping: %s", err.msg);
	}
	memset(&fin, 0, sizeof(fin));
	CHECK(gs_client_alloc_close(root, id, &fin, &err) == 0,
	      "close: %s", err.msg);
	job_free(&j);
	snprintf(cmd, sizeof(cmd), "sqlite3 -readonly -cmd '.timeout 5000' "
		 "%s/state/usage.db 'SELECT gpu_ns, held_ns FROM allocs "
		 "WHERE agent_id = %llu AND end_ns > 0'", dir,
		 (unsigned long long)id);
	p = popen(cmd, "r");
	if (p != NULL) {
		n = fscanf(p, "%" SCNu64 "|%" SCNu64, &db_gpu, &db_held);
		pclose(p);
	}
	CHECK(n == 2, "no closed usage row for allocation %llu",
	      (unsigned long long)id);
	CHECK(fin.held_ns >= own_held && fin.held_ns >= 45000000,
	      "close reply's held %llu ns, the job held %llu ns",
	      (unsigned long long)fin.held_ns, (unsigned long long)own_held);
	CHECK(fin.held_ns == db_held && fin.gpu_ns == db_gpu,
	      "close reply gpu %llu / held %llu ns, usage store gpu %llu / "
	      "held %llu ns", (unsigned long long)fin.gpu_ns,
	      (unsigned long long)fin.held_ns, (unsigned long long)db_gpu,
	      (unsigned long long)db_held);
}

static int log_lines(const char *needle);

/* STATUS's warning (what the agent tells gsharectl status) */
static int status_warning(struct gs_client *c, char *w, size_t n)
{
	struct gs_status *st = NULL;
	struct gs_error err;

	if (gs_client_status(c, &st, &err) < 0)
		return -1;
	snprintf(w, n, "%s", st->warning);
	gs_status_free(st);
	return 0;
}

/* watch_spool: a record waiting longer than the threshold (10 s, or two
 * accounting ticks) is a STATUS warning; an empty spool clears it. */
static void test_spool_warning(struct gs_client *root)
{
	char spool[128], rec[192], w[GS_WARNING_MAX] = "";
	struct timespec old[2];
	int64_t deadline;
	int fd, seen = 0;

	snprintf(spool, sizeof(spool), "%s/spool", dir);
	snprintf(rec, sizeof(rec), "%s/job-1", spool);
	CHECK(status_warning(root, w, sizeof(w)) == 0 && w[0] == '\0',
	      "a warning before anything waits: '%s'", w);
	/* a fresh record is not behind */
	if (mkdir(spool, 0700) < 0 ||
	    (fd = open(rec, O_WRONLY | O_CREAT, 0600)) < 0) {
		CHECK(0, "spool record: %s", strerror(errno));
		return;
	}
	close(fd);
	nap_ms(2500);	/* two ticks */
	CHECK(status_warning(root, w, sizeof(w)) == 0 && w[0] == '\0',
	      "a warning for a record 2 s old: '%s'", w);
	/* one a minute old is */
	clock_gettime(CLOCK_REALTIME, &old[0]);
	old[0].tv_sec -= 60;
	old[1] = old[0];
	CHECK(utimensat(AT_FDCWD, rec, old, 0) == 0, "utimensat: %s",
	      strerror(errno));
	deadline = now_ms() + 5000;
	while (!seen && now_ms() < deadline) {
		if (status_warning(root, w, sizeof(w)) == 0 &&
		    strstr(w, "1 Slurm totals waiting in ") != NULL &&
		    strstr(w, spool) != NULL && strstr(w, "oldest 6") != NULL)
			seen = 1;
		else
			nap_ms(50);
	}
	CHECK(seen, "no spool warning in STATUS: '%s'", w);
	unlink(rec);
	deadline = now_ms() + 5000;
	seen = 0;
	while (!seen && now_ms() < deadline) {
		if (status_warning(root, w, sizeof(w)) == 0 && w[0] == '\0')
			seen = 1;
		else
			nap_ms(50);
	}
	CHECK(seen, "the warning stays after the spool emptied: '%s'", w);
	CHECK(log_lines("every waiting record taken") == 1,
	      "no log line for the spool catching up");
	rmdir(spool);
}

static void test_tokens(struct gs_client *root)
{
	struct job a, b;
	struct gs_error err;
	uint64_t gen = 0, slice = 0, gen_b = 0, t_grant, used = 0;
	uint64_t a_gpu0 = 0, a_held0 = 0;
	int r;

	/* token requests on a connection that is not attached */
	{
		struct gs_client *x = conn();

		CHECK(gs_client_token_want(x, &err) == 0, "%s", err.msg);
		r = gs_client_wait_grant(x, 3000, &gen, &slice, &err);
		CHECK(r == -1 && err.code == GS_ESTATE,
		      "WANT unattached (%d): %s", r, err.msg);
		CHECK(gs_client_token_release(x, 1, 0, 0, GS_REL_IDLE,
					      &err) == 0, "%s", err.msg);
		r = gs_client_wait_grant(x, 3000, &gen, &slice, &err);
		CHECK(r == -1 && err.code == GS_ESTATE,
		      "RELEASE unattached (%d): %s", r, err.msg);
		gs_client_free(x);
	}
	job_attach(&a, create(root, -1, 30, 0, 0));
	job_attach(&b, create(root, -1, 30, 0, 0));
	if (a.page == NULL || b.page == NULL)
		goto out;
	/* release before any grant */
	CHECK(gs_client_token_release(a.c, 1, 0, 0, GS_REL_IDLE, &err) == 0,
	      "%s", err.msg);
	r = gs_client_wait_grant(a.c, 3000, &gen, &slice, &err);
	CHECK(r == -1 && err.code == GS_ESTATE, "RELEASE before grant (%d): "
	      "%s", r, err.msg);
	/* a lone job gets the token and keeps it (work-conserving) */
	CHECK(gs_client_token_want(a.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a.c, 5000, &gen, &slice, &err);
	t_grant = now_ns();
	CHECK(r == 1, "grant to a (%d): %s", r, err.msg);
	CHECK(slice == 4000000, "slice %llu", (unsigned long long)slice);
	CHECK(a.page->grant_gen == gen, "page grant_gen");
	CHECK(a.page->suspend == GS_CTL_RUN, "suspend cleared on grant");
	CHECK(a.page->slice_deadline_ns != 0, "slice deadline");
	CHECK(!wait_suspend(&a, 30), "lone holder was suspended");
	CHECK(alloc_state(root, a.id) == GS_ASTATE_RUNNING, "a running");
	/* a competitor: a is asked to suspend at slice end */
	CHECK(gs_client_token_want(b.c, &err) == 0, "%s", err.msg);
	CHECK(wait_state(root, b.id, GS_ASTATE_WAITING, 2000), "b waiting");
	CHECK(wait_suspend(&a, 2000), "a not suspended");
	CHECK(a.page->suspend_set_ns != 0, "suspend_set_ns");
	/* b, next in line, was told to poll for its grant (TOKEN_SOON,
	 * handoff_spin's 1 ms from the hint on) */
	{
		int64_t dl = now_ms() + 2000;

		while (gs_client_soon_until(b.c) == 0 && now_ms() < dl)
			CHECK(gs_client_wait_grant(b.c, 20, &gen_b, &slice,
						   &err) == 0,
			      "b granted before a released: %s", err.msg);
		CHECK(gs_client_soon_until(b.c) != 0, "no TOKEN_SOON to b");
	}
	/* stale generation: refused, reported on a's connection */
	CHECK(gs_client_token_release(a.c, gen + 5, 1000, 0, GS_REL_SUSPENDED,
				      &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a.c, 2000, &gen_b, &slice, &err);
	CHECK(r == -1 && err.code == GS_ESTATE, "stale release (%d): %s", r,
	      err.msg);
	/* proper release: b gets the token */
	/* report what it held, plus a margin: the job saw the grant later
	 * than the agent sent it, and on a loaded machine that gap could
	 * let WFQ hand the token straight back to a */
	used = now_ns() - t_grant + 100000000ull;
	CHECK(gs_client_token_release(a.c, gen, used, 15000,
				      GS_REL_SUSPENDED, &err) == 0, "%s",
	      err.msg);
	r = gs_client_wait_grant(b.c, 5000, &gen_b, &slice, &err);
	CHECK(r == 1, "grant to b (%d): %s", r, err.msg);
	CHECK(b.page->suspend == GS_CTL_RUN, "b runs");
	/* b's process goes away while holding: a (still wanting) gets it */
	job_free(&b);
	r = gs_client_wait_grant(a.c, 5000, &gen, &slice, &err);
	CHECK(r == 1 && gen == 2, "grant back to a after b left (%d, gen "
	      "%llu): %s", r, (unsigned long long)gen, err.msg);
	CHECK(wait_state(root, b.id, GS_ASTATE_IDLE, 2000), "b idle");
	{
		struct gs_status *st = NULL;
		struct gs_alloc_info *ai;

		if (gs_client_status(root, &st, &err) == 0) {
			ai = find_alloc(st, a.id);
			/* billed what it reported, up to 16 times the
			 * hold and 2 ms (gs_acct_report_cap) */
			CHECK(ai && ai->suspensions == 1 &&
			      ai->gpu_ns == (used < 16 * ai->held_ns + 2000000
					     ? used
					     : 16 * ai->held_ns + 2000000),
			      "a usage: susp %llu gpu %llu held %llu",
			      ai ? (unsigned long long)ai->suspensions : 0,
			      ai ? (unsigned long long)ai->gpu_ns : 0,
			      ai ? (unsigned long long)ai->held_ns : 0);
			if (ai != NULL) {
				a_gpu0 = ai->gpu_ns;
				a_held0 = ai->held_ns;
			}
			ai = find_alloc(st, b.id);
			CHECK(ai && ai->pid == 0, "b has no process");
			CHECK(st->gpus[0].holder == a.id, "holder %llu",
			      (unsigned long long)st->gpus[0].holder);
			gs_status_free(st);
		}
	}
	/* idle release with a lie: GPU time that, summed up, would wrap the
	 * allocation's usage back down.  Counted as the cap; one log line
	 * per process (its first cut report) */
	CHECK(gs_client_token_release(a.c, gen, UINT64_MAX - 1000, 0,
				      GS_REL_IDLE, &err) == 0, "%s", err.msg);
	CHECK(wait_state(root, a.id, GS_ASTATE_IDLE, 2000), "a idle");
	{
		struct gs_status *st = NULL;
		struct gs_alloc_info *ai;

		if (gs_client_status(root, &st, &err) == 0) {
			ai = find_alloc(st, a.id);
			CHECK(ai && ai->gpu_ns > a_gpu0 &&
			      ai->gpu_ns - a_gpu0 ==
			      16 * (ai->held_ns - a_held0) + 2000000,
			      "a lying release: gpu %llu -> %llu, held %llu "
			      "-> %llu", (unsigned long long)a_gpu0,
			      ai ? (unsigned long long)ai->gpu_ns : 0,
			      (unsigned long long)a_held0,
			      ai ? (unsigned long long)ai->held_ns : 0);
			gs_status_free(st);
		}
	}
	CHECK(log_lines("TOKEN_RELEASE reports") == 1,
	      "one log line for the lying release");
	/* closing an attached allocation drops its job's connection */
	gs_client_alloc_close(root, a.id, NULL, &err);
	r = gs_client_wait_grant(a.c, 3000, &gen, &slice, &err);
	CHECK(r == -1 && err.code == GS_ECLOSED, "closed job conn (%d): %s",
	      r, err.msg);
	gs_client_alloc_close(root, b.id, NULL, &err);
out:
	if (a.c != NULL)
		job_free(&a);
	if (b.c != NULL)
		job_free(&b);
}

/* GPU time billed to allocation id so far (0: not found). */
static uint64_t alloc_gpu_ns(struct gs_client *c, uint64_t id)
{
	struct gs_status *st = NULL;
	struct gs_alloc_info *a;
	struct gs_error err;
	uint64_t v = 0;

	if (gs_client_status(c, &st, &err) < 0)
		return 0;
	a = find_alloc(st, id);
	if (a != NULL)
		v = a->gpu_ns;
	gs_status_free(st);
	return v;
}

/* n asks for the token while h holds it (grant gen since t0): h is
 * suspended at its slice end and releases, reporting what it held plus a
 * margin (the job saw its grant later than the agent sent it). */
static void handover(struct job *h, uint64_t gen, uint64_t t0, struct job *n)
{
	struct gs_error err;

	CHECK(gs_client_token_want(n->c, &err) == 0, "%s", err.msg);
	CHECK(wait_suspend(h, 2000), "holder not suspended");
	CHECK(gs_client_token_release(h->c, gen, now_ns() - t0 + 100000000ull,
				      0, GS_REL_SUSPENDED, &err) == 0, "%s",
	      err.msg);
}

/* TOKEN_UNWANT (1.7): a job that gave the token back early (before its
 * blocks had left) and then had nothing left stops waiting; a grant that
 * crossed its UNWANT is taken back unused and goes to the next job. */
static void test_unwant(struct gs_client *root)
{
	struct job a, b;
	struct gs_error err;
	uint64_t gen = 0, slice = 0, gen_b = 0, a_gpu;
	int r;

	{
		struct gs_client *x = conn();

		r = gs_client_token_unwant(x, &err);
		CHECK(r == -1 && err.code == GS_ESTATE,
		      "UNWANT unattached (%d): %s", r, err.msg);
		gs_client_free(x);
	}
	job_attach(&a, create(root, -1, 30, 0, 0));
	job_attach(&b, create(root, -1, 30, 0, 0));
	if (a.page == NULL || b.page == NULL)
		goto out;
	CHECK(gs_client_token_unwant(a.c, &err) == 0,
	      "UNWANT with nothing asked: %s", err.msg);
	CHECK(alloc_state(root, a.id) == GS_ASTATE_IDLE, "a idle");
	/* a holds, b arrives, a is suspended and releases: a waits */
	CHECK(gs_client_token_want(a.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a.c, 5000, &gen, &slice, &err);
	CHECK(r == 1, "grant to a (%d): %s", r, err.msg);
	handover(&a, gen, now_ns(), &b);
	r = gs_client_wait_grant(b.c, 5000, &gen_b, &slice, &err);
	CHECK(r == 1, "grant to b (%d): %s", r, err.msg);
	CHECK(alloc_state(root, a.id) == GS_ASTATE_WAITING, "a waiting");
	/* a finds nothing left: it stops waiting, and b's idle release
	 * leaves the GPU to nobody */
	CHECK(gs_client_token_unwant(a.c, &err) == 0, "%s", err.msg);
	CHECK(alloc_state(root, a.id) == GS_ASTATE_IDLE, "a idle after "
	      "UNWANT (%d)", alloc_state(root, a.id));
	/* b holds alone now: no suspend at its slice end (4 ms) */
	CHECK(!wait_suspend(&b, 30), "b suspended for a job that no longer "
	      "waits");
	CHECK(gs_client_token_release(b.c, gen_b, 1000, 0, GS_REL_IDLE,
				      &err) == 0, "%s", err.msg);
	CHECK(wait_state(root, b.id, GS_ASTATE_IDLE, 2000), "b idle");
	r = gs_client_wait_grant(a.c, 100, &gen, &slice, &err);
	CHECK(r == 0, "a granted after UNWANT (%d): %s", r, err.msg);
	{
		struct gs_status *st = NULL;

		CHECK(gs_client_status(root, &st, &err) == 0, "status: %s",
		      err.msg);
		if (st != NULL) {
			CHECK(st->ngpus > 0 && st->gpus[0].holder == 0,
			      "after UNWANT and an idle release: holder "
			      "%llu", st->ngpus ? (unsigned long long)
					       st->gpus[0].holder : 0);
			gs_status_free(st);
		}
	}
	/* the grant crosses the UNWANT: b holds, a waits, b releases
	 * suspended, a is granted but does not read it and says UNWANT:
	 * that grant is dropped and b gets the token */
	CHECK(gs_client_token_want(b.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(b.c, 5000, &gen_b, &slice, &err);
	CHECK(r == 1, "grant to b (%d): %s", r, err.msg);
	handover(&b, gen_b, now_ns(), &a);
	CHECK(wait_state(root, a.id, GS_ASTATE_RUNNING, 2000), "a running");
	a_gpu = alloc_gpu_ns(root, a.id);
	nap_ms(20);	/* a holds its (unread) grant a while */
	CHECK(gs_client_token_unwant(a.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(a.c, 100, &gen, &slice, &err);
	CHECK(r == 0, "the crossed grant reached a (%d)", r);
	r = gs_client_wait_grant(b.c, 5000, &gen_b, &slice, &err);
	CHECK(r == 1, "grant to b after a's UNWANT (%d): %s", r, err.msg);
	/* an UNWANT is no way to hold the GPU unbilled: the hold it ended
	 * is charged, at least 7/8 of its 20 ms */
	CHECK(alloc_gpu_ns(root, a.id) >= a_gpu + 17500000ull,
	      "a's hold ended by UNWANT billed %llu ns",
	      (unsigned long long)(alloc_gpu_ns(root, a.id) - a_gpu));
	CHECK(alloc_state(root, a.id) == GS_ASTATE_IDLE, "a idle (%d)",
	      alloc_state(root, a.id));
	CHECK(gs_client_token_release(b.c, gen_b, 1000, 0, GS_REL_IDLE,
				      &err) == 0, "%s", err.msg);
	CHECK(wait_state(root, b.id, GS_ASTATE_IDLE, 2000), "b idle");
	gs_client_alloc_close(root, a.id, NULL, &err);
	gs_client_alloc_close(root, b.id, NULL, &err);
out:
	if (a.c != NULL)
		job_free(&a);
	if (b.c != NULL)
		job_free(&b);
}

/* A slice extended because the waiter should not run yet moves the
 * holder's slice_deadline_ns on, with no new grant and no suspend (the
 * runtime stays awake only near the time a suspend can come). */
static void test_slice_extension(struct gs_client *root)
{
	struct job a, b;
	struct gs_error err;
	uint64_t gen = 0, slice = 0, gen_b = 0, d1, t;
	int64_t dl;
	int r, moved = 0;

	job_attach(&a, create(root, -1, 60, 0, 0));
	job_attach(&b, create(root, -1, 20, 0, 0));
	if (a.page == NULL || b.page == NULL)
		goto out;
	CHECK(gs_client_token_want(b.c, &err) == 0, "%s", err.msg);
	r = gs_client_wait_grant(b.c, 5000, &gen_b, &slice, &err);
	CHECK(r == 1, "grant to b (%d): %s", r, err.msg);
	t = now_ns();
	/* a arrives; b is suspended at its slice end and reports what it
	 * held: a, three times b's weight, is then due three slices */
	CHECK(gs_client_token_want(a.c, &err) == 0, "%s", err.msg);
	CHECK(wait_suspend(&b, 2000), "b not suspended");
	CHECK(gs_client_token_release(b.c, gen_b, now_ns() - t, 0,
				      GS_REL_SUSPENDED, &err) == 0, "%s",
	      err.msg);
	r = gs_client_wait_grant(a.c, 5000, &gen, &slice, &err);
	CHECK(r == 1, "grant to a (%d): %s", r, err.msg);
	d1 = a.page->slice_deadline_ns;
	CHECK(d1 != 0, "no slice deadline");
	dl = now_ms() + 2000;
	while (!moved && now_ms() < dl) {
		moved = __atomic_load_n(&a.page->slice_deadline_ns,
					__ATOMIC_RELAXED) > d1;
		if (!moved)
			nap_ms(1);
	}
	CHECK(moved, "slice deadline did not move on (still %llu)",
	      (unsigned long long)d1);
	CHECK(a.page->grant_gen == gen && a.page->suspend == GS_CTL_RUN,
	      "an extension is no new grant and no suspend");
	gs_client_token_release(a.c, gen, 1000, 0, GS_REL_IDLE, &err);
	gs_client_alloc_close(root, a.id, NULL, &err);
	gs_client_alloc_close(root, b.id, NULL, &err);
out:
	if (a.c != NULL)
		job_free(&a);
	if (b.c != NULL)
		job_free(&b);
}

/* A holder that ignores SUSPEND: held back (hold) — the other job gets
 * the GPU after the grace period. */
static void test_escalation_hold(struct gs_client *root)
{
	struct job a, b;
	struct gs_error err;
	uint64_t gen, slice;
	int r;

	job_attach(&a, create(root, -1, 30, 0, 0));
	job_attach(&b, create(root, -1, 30, 0, 0));
	if (a.page == NULL || b.page == NULL)
		goto out;
	gs_client_token_want(a.c, &err);
	r = gs_client_wait_grant(a.c, 5000, &gen, &slice, &err);
	CHECK(r == 1, "grant a: %s", err.msg);
	gs_client_token_want(b.c, &err);
	CHECK(wait_suspend(&a, 2000), "a suspended");
	/* a ignores it; after the 60 ms grace b gets the token */
	r = gs_client_wait_grant(b.c, 5000, &gen, &slice, &err);
	CHECK(r == 1, "b granted after a overran (%d): %s", r, err.msg);
	CHECK(alloc_state(root, a.id) == GS_ASTATE_HELD, "a held");
out:
	gs_client_alloc_close(root, a.id, NULL, &err);
	gs_client_alloc_close(root, b.id, NULL, &err);
	job_free(&a);
	job_free(&b);
}

/* With escalation: kill, the overrunning process is SIGKILLed. */
static void test_escalation_kill(struct gs_client *root)
{
	struct job b;
	struct gs_error err;
	uint64_t id_a, gen, slice;
	int pfd[2], st = 0, r;
	pid_t p;
	char ch;

	id_a = create(root, -1, 30, 0, 0);
	job_attach(&b, create(root, -1, 30, 0, 0));
	if (pipe(pfd) < 0 || b.page == NULL)
		goto out;
	p = fork();
	if (p == 0) {
		struct job a;

		close(pfd[0]);
		job_attach(&a, id_a);
		gs_client_token_want(a.c, &err);
		if (gs_client_wait_grant(a.c, 5000, &gen, &slice, &err) == 1)
			r = (int)write(pfd[1], "g", 1);
		for (;;) /* hold the GPU, never release */
			pause();
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &ch, 1) == 1, "child got the token");
	close(pfd[0]);
	gs_client_token_want(b.c, &err);
	r = gs_client_wait_grant(b.c, 5000, &gen, &slice, &err);
	CHECK(r == 1, "b granted after the kill (%d): %s", r, err.msg);
	{
		int64_t deadline = now_ms() + 5000;
		pid_t w = 0;

		while (now_ms() < deadline &&
		       (w = waitpid(p, &st, WNOHANG)) == 0)
			nap_ms(5);
		if (w == 0) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			CHECK(0, "overrunning process was not killed");
		} else {
			CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			      "child status %#x", st);
		}
	}
out:
	gs_client_alloc_close(root, id_a, NULL, &err);
	gs_client_alloc_close(root, b.id, NULL, &err);
	job_free(&b);
}

/* ---- malformed frames ---- */

static int raw_connect(void)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		CHECK(0, "raw connect: %s", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Read until EOF or 3 s; return the code of the first ERROR frame seen
 * (0: none), *eof whether the agent closed. */
static int read_reply(int fd, int *eof, int wait_eof)
{
	uint8_t buf[70000];
	size_t have = 0;
	int64_t deadline = now_ms() + 3000;
	struct gs_msg m;
	struct gs_error err;
	size_t used;
	int code = 0;
	ssize_t n;

	*eof = 0;
	while (now_ms() < deadline) {
		struct pollfd p = { fd, POLLIN, 0 };

		if (poll(&p, 1, 50) <= 0)
			continue;
		n = read(fd, buf + have, sizeof(buf) - have);
		if (n <= 0) {
			*eof = 1;
			break;
		}
		have += (size_t)n;
		if (code == 0 &&
		    gs_frame_parse(buf, have, &m, &used, &err) == 1) {
			if (m.type == GS_MSG_ERROR)
				code = m.u.error.code;
			else
				code = -(int)m.type;
			gs_msg_clear(&m);
			if (!wait_eof)
				break;
		}
	}
	return code;
}

static void hdr(uint8_t *b, uint32_t magic, uint8_t major, uint16_t type,
		uint32_t len)
{
	struct gs_frame_hdr h = { magic, major, 0, type, len, 7 };

	gs_frame_hdr_encode(&h, b);
}

/* ---- STATUS over several frames ---- */

#define NPAGED 100

/* One STATUS frame on a fresh connection, as a 1.1 client sends it (no
 * after_id): the first page.  0, or -1 with a failed check. */
static int raw_status(struct gs_msg *rep)
{
	static uint8_t buf[GS_FRAME_HDR_SIZE + GS_FRAME_MAX_PAYLOAD];
	struct gs_frame_hdr h;
	struct gs_error err;
	int64_t deadline = now_ms() + 3000;
	size_t have = 0, want = GS_FRAME_HDR_SIZE;
	int fd = raw_connect(), rv = -1;
	ssize_t n;

	if (fd < 0)
		return -1;
	hdr(buf, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_STATUS, 0);
	if (write(fd, buf, GS_FRAME_HDR_SIZE) != GS_FRAME_HDR_SIZE)
		goto out;
	while (have < want && now_ms() < deadline) {
		struct pollfd p = { fd, POLLIN, 0 };

		if (poll(&p, 1, 50) <= 0)
			continue;
		n = read(fd, buf + have, want - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have == GS_FRAME_HDR_SIZE && want == GS_FRAME_HDR_SIZE) {
			if (gs_frame_hdr_decode(buf, have, &h, &err) < 0)
				break;
			want += h.length;
		}
	}
	CHECK(have == want && want > GS_FRAME_HDR_SIZE,
	      "raw STATUS: %zu of %zu bytes", have, want);
	if (have == want && want > GS_FRAME_HDR_SIZE &&
	    gs_msg_decode(&h, buf + GS_FRAME_HDR_SIZE, rep, &err) == 0 &&
	    rep->type == GS_MSG_STATUS_REPLY)
		rv = 0;
out:
	close(fd);
	return rv;
}

/* Label every field at its longest, so NPAGED records overflow a frame. */
static void long_labels(struct gs_labels *l, unsigned k)
{
	memset(l, 0, sizeof(*l));
	memset(l->cluster, 'c', sizeof(l->cluster) - 1);
	memset(l->step, 's', sizeof(l->step) - 1);
	memset(l->node, 'n', sizeof(l->node) - 1);
	memset(l->ns, 'N', sizeof(l->ns) - 1);
	memset(l->pod, 'p', sizeof(l->pod) - 1);
	memset(l->container, 'k', sizeof(l->container) - 1);
	memset(l->user, 'u', sizeof(l->user) - 1);
	memset(l->account, 'a', sizeof(l->account) - 1);
	snprintf(l->job, sizeof(l->job), "paged-%u", k);
}

static void nobody_pages(void *arg)
{
	const uint64_t *ids = arg;
	struct gs_client *c = conn();
	struct gs_status *st = NULL;
	struct gs_error err;
	uint32_t i;

	if (gs_client_status(c, &st, &err) < 0) {
		CHECK(0, "status as nobody: %s", err.msg);
		gs_client_free(c);
		return;
	}
	CHECK(st->nallocs == NPAGED / 2 && st->nallocs_total == NPAGED / 2,
	      "nobody sees %u (total %u), want %u", st->nallocs,
	      st->nallocs_total, NPAGED / 2);
	for (i = 0; i < st->nallocs && i < NPAGED / 2; i++)
		CHECK(st->allocs[i].id == ids[2 * i + 1] &&
		      st->allocs[i].uid == NOBODY,
		      "nobody's record %u: id %llu uid %u", i,
		      (unsigned long long)st->allocs[i].id,
		      st->allocs[i].uid);
	gs_status_free(st);
	gs_client_free(c);
}

static void test_status_pages(struct gs_client *root)
{
	uint64_t ids[NPAGED];
	struct gs_alloc_req r;
	struct gs_alloc_info info;
	struct gs_status *st = NULL;
	struct gs_labels want;
	struct gs_msg page;
	struct gs_error err;
	unsigned k;
	int rc;

	/* 100 one-share allocations with long labels (every other one
	 * nobody's): ~77 KiB of records, more than one frame holds */
	memset(ids, 0, sizeof(ids));
	for (k = 0; k < NPAGED; k++) {
		memset(&r, 0, sizeof(r));
		r.gpu = -1;
		r.shares = 1;
		r.uid = k % 2 ? NOBODY : 0;
		long_labels(&r.labels, k);
		if (gs_client_alloc_create(root, &r, &info, &err) < 0) {
			CHECK(0, "create %u: %s", k, err.msg);
			goto out;
		}
		ids[k] = info.id;
	}
	memset(&page, 0, sizeof(page));
	if (raw_status(&page) == 0) {
		CHECK(page.u.status.more == 1 && page.u.status.nallocs > 0 &&
		      page.u.status.nallocs < NPAGED &&
		      page.u.status.nallocs_total == NPAGED,
		      "first page: %u listed, total %u, more %u",
		      page.u.status.nallocs, page.u.status.nallocs_total,
		      page.u.status.more);
		gs_msg_clear(&page);
	} else {
		CHECK(0, "raw STATUS failed");
	}
	if (gs_client_status(root, &st, &err) < 0) {
		CHECK(0, "status: %s", err.msg);
		goto out;
	}
	CHECK(st->nallocs == NPAGED && st->nallocs_total == NPAGED &&
	      st->more == 0, "status lists %u of %u (more %u)", st->nallocs,
	      st->nallocs_total, st->more);
	for (k = 0; k < st->nallocs && k < NPAGED; k++) {
		long_labels(&want, k);
		CHECK(st->allocs[k].id == ids[k] &&
		      memcmp(&st->allocs[k].labels, &want, sizeof(want)) == 0,
		      "record %u: id %llu, want %llu, job '%s'", k,
		      (unsigned long long)st->allocs[k].id,
		      (unsigned long long)ids[k], st->allocs[k].labels.job);
	}
	gs_status_free(st);
	rc = run_as_nobody(nobody_pages, ids);
	CHECK(rc == 0, "nobody's paged status (rc %d)", rc);
out:
	for (k = 0; k < NPAGED; k++)
		if (ids[k] != 0 &&
		    gs_client_alloc_close(root, ids[k], NULL, &err) < 0)
			CHECK(0, "close %llu: %s", (unsigned long long)ids[k],
			      err.msg);
}

static void test_malformed(struct gs_client *bystander)
{
	uint8_t b[4096];
	struct gs_error err;
	int fd, eof, code, i;
	unsigned seed = 12345;

	/* wrong magic */
	fd = raw_connect();
	hdr(b, 0xdeadbeef, GS_PROTO_MAJOR, GS_MSG_PING, 0);
	CHECK(write(fd, b, 16) == 16, "write");
	code = read_reply(fd, &eof, 1);
	CHECK(code == GS_EPROTO && eof, "bad magic: code %d eof %d", code,
	      eof);
	close(fd);
	/* foreign major */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR + 1, GS_MSG_PING, 0);
	CHECK(write(fd, b, 16) == 16, "write");
	code = read_reply(fd, &eof, 1);
	CHECK(code == GS_EVERSION && eof, "major: code %d eof %d", code, eof);
	close(fd);
	/* oversized length */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_PING, 0x7fffffff);
	CHECK(write(fd, b, 16) == 16, "write");
	code = read_reply(fd, &eof, 1);
	CHECK(code == GS_EPROTO && eof, "oversized: code %d eof %d", code,
	      eof);
	close(fd);
	/* unknown type: ERROR, and the connection keeps working */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, 777, 4);
	memset(b + 16, 0, 4);
	CHECK(write(fd, b, 20) == 20, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP && !eof, "unknown type: code %d", code);
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_PING, 0);
	CHECK(write(fd, b, 16) == 16, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == -GS_MSG_OK, "ping after unknown type: %d", code);
	close(fd);
	/* a reply type sent as a request */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_TOKEN_GRANT, 16);
	memset(b + 16, 0, 16);
	CHECK(write(fd, b, 32) == 32, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP, "agent-only type: %d", code);
	close(fd);
	/* agent-only types are not decoded: a malformed one (a TOKEN_GRANT
	 * one byte short, a STATUS_REPLY of garbage) gets EUNSUPP too, and
	 * the connection goes on (docs/protocol.md) */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_TOKEN_GRANT, 15);
	memset(b + 16, 0, 15);
	CHECK(write(fd, b, 31) == 31, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP && !eof, "short TOKEN_GRANT: %d eof %d",
	      code, eof);
	/* TOKEN_SOON (1.6) is the agent's to send: from a client, whole
	 * or short, refused the same way */
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_TOKEN_SOON, 8);
	memset(b + 16, 0xff, 8);
	CHECK(write(fd, b, 24) == 24, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP && !eof, "TOKEN_SOON from a client: %d "
	      "eof %d", code, eof);
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_TOKEN_SOON, 3);
	memset(b + 16, 0xff, 3);
	CHECK(write(fd, b, 19) == 19, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP && !eof, "short TOKEN_SOON: %d eof %d",
	      code, eof);
	/* TOKEN_UNWANT (1.7) carries nothing: trailing bytes are ignored
	 * (newer minors), and on a connection that is not attached it is
	 * refused; the connection goes on */
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_TOKEN_UNWANT, 7);
	memset(b + 16, 0xff, 7);
	CHECK(write(fd, b, 23) == 23, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_ESTATE && !eof, "TOKEN_UNWANT with garbage, not "
	      "attached: %d eof %d", code, eof);
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_STATUS_REPLY, 5);
	memset(b + 16, 0xff, 5);
	CHECK(write(fd, b, 21) == 21, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == GS_EUNSUPP && !eof, "garbage STATUS_REPLY: %d eof %d",
	      code, eof);
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_PING, 0);
	CHECK(write(fd, b, 16) == 16, "write");
	code = read_reply(fd, &eof, 0);
	CHECK(code == -GS_MSG_OK, "ping after agent-only types: %d", code);
	close(fd);
	/* a STATUS one byte short of its after_id (1.2): truncated, not a
	 * 1.1 frame */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_STATUS, 7);
	memset(b + 16, 0, 7);
	CHECK(write(fd, b, 23) == 23, "write");
	code = read_reply(fd, &eof, 1);
	CHECK(code == GS_EPROTO && eof, "STATUS of 7 bytes: %d eof %d", code,
	      eof);
	close(fd);
	/* truncated payload inside a complete frame */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_ATTACH, 3);
	CHECK(write(fd, b, 19) == 19, "write");
	code = read_reply(fd, &eof, 1);
	CHECK(code == GS_EPROTO && eof, "short ATTACH: %d eof %d", code, eof);
	close(fd);
	/* string length beyond the payload */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_ALLOC_LABEL, 12);
	memset(b + 16, 0, 12);
	b[16 + 8] = 0xff;
	b[16 + 9] = 0xff;
	CHECK(write(fd, b, 28) == 28, "write");
	code = read_reply(fd, &eof, 1);
	CHECK((code == GS_EPROTO || code == GS_EPERM) && eof,
	      "bad string: %d eof %d", code, eof);
	close(fd);
	/* truncated frame, then the client goes away */
	fd = raw_connect();
	hdr(b, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_STATUS, 100);
	CHECK(write(fd, b, 10) == 10, "write");
	close(fd);
	fd = raw_connect();
	CHECK(write(fd, b, 16 + 50) == 66, "write");
	close(fd);
	/* garbage */
	for (i = 0; i < 20; i++) {
		size_t k;

		for (k = 0; k < sizeof(b); k++)
			b[k] = (uint8_t)(rand_r(&seed) >> 7);
		fd = raw_connect();
		CHECK(write(fd, b, sizeof(b)) >= 0 || errno == EPIPE ||
		      errno == ECONNRESET, "write garbage");
		code = read_reply(fd, &eof, 1);
		CHECK(eof && code != 0, "garbage %d: code %d eof %d", i, code,
		      eof);
		close(fd);
	}
	/* half a frame and silence: the agent must still serve others */
	fd = raw_connect();
	CHECK(write(fd, b, 7) == 7, "write");
	CHECK(gs_client_ping(bystander, &err) == 0,
	      "bystander served during the battery: %s", err.msg);
	close(fd);
	CHECK(gs_client_ping(bystander, &err) == 0, "bystander: %s", err.msg);
}

/* ---- reload and stop ---- */

static int log_lines(const char *needle);

/* Poll the log until needle occurs more than `before` times (5 s). */
static int wait_log(const char *needle, int before)
{
	int64_t deadline = now_ms() + 5000;

	while (now_ms() < deadline) {
		if (log_lines(needle) > before)
			return 1;
		nap_ms(10);
	}
	return 0;
}

static void test_reload(struct gs_client *root)
{
	struct gs_status *st = NULL;
	struct gs_error err;
	struct job j;
	uint64_t gen = 0, slice;
	int64_t deadline;
	uint64_t a, b;
	int ok = 0;

	a = create(root, -1, 25, 0, 0);
	b = create(root, -1, 25, 0, NOBODY);
	/* a job holds the token across the reload */
	job_attach(&j, a);
	if (j.page != NULL) {
		gs_client_token_want(j.c, &err);
		CHECK(gs_client_wait_grant(j.c, 5000, &gen, &slice, &err) == 1,
		      "grant before reload: %s", err.msg);
	}
	write_config("8ms", "policy: priority\n");
	kill(agent_pid, SIGHUP);
	deadline = now_ms() + 5000;
	while (!ok && now_ms() < deadline) {
		if (gs_client_status(root, &st, &err) == 0) {
			ok = strcmp(st->policy, "priority") == 0 &&
			     st->slice_ns == 8000000;
			if (ok)
				CHECK(find_alloc(st, a) && find_alloc(st, b),
				      "allocations survive SIGHUP");
			gs_status_free(st);
		}
		if (!ok)
			nap_ms(10);
	}
	CHECK(ok, "SIGHUP did not apply policy/slice");
	CHECK(alloc_state(root, a) == GS_ASTATE_RUNNING,
	      "holder kept its token over the reload");
	CHECK(j.page != NULL && j.page->suspend == GS_CTL_RUN &&
	      j.page->grant_gen == gen, "control page kept over the reload");
	/* a bad config is refused and the running one kept */
	write_config("8ms", "policy: fastest\n");
	kill(agent_pid, SIGHUP);
	nap_ms(200);
	CHECK(gs_client_status(root, &st, &err) == 0, "%s", err.msg);
	if (st != NULL) {
		CHECK(strcmp(st->policy, "priority") == 0,
		      "bad reload changed policy to %s", st->policy);
		gs_status_free(st);
	}
	/* an empty file, or one with only comments, is refused too (it
	 * would reset every setting to its default) */
	{
		static const char *const texts[] = { "", "# emptied\n\n" };
		const char *no = "no settings (the file is empty";
		unsigned k;
		FILE *f;
		int n;

		for (k = 0; k < 2; k++) {
			n = log_lines(no);
			f = fopen(cfgpath, "w");
			CHECK(f != NULL, "%s: %s", cfgpath, strerror(errno));
			if (f == NULL)
				break;
			fputs(texts[k], f);
			fclose(f);
			kill(agent_pid, SIGHUP);
			CHECK(wait_log(no, n), "empty config %u: no refusal "
			      "logged", k);
			st = NULL;
			CHECK(gs_client_status(root, &st, &err) == 0, "%s",
			      err.msg);
			if (st != NULL) {
				CHECK(strcmp(st->policy, "priority") == 0 &&
				      st->slice_ns == 8000000,
				      "empty config %u applied: policy %s", k,
				      st->policy);
				gs_status_free(st);
				st = NULL;
			}
		}
	}
	gs_client_alloc_close(root, a, NULL, &err);
	gs_client_alloc_close(root, b, NULL, &err);
	job_free(&j);
}

static int wait_slice(struct gs_client *c, uint64_t slice_ns)
{
	int64_t deadline = now_ms() + 5000;
	struct gs_status *st = NULL;
	struct gs_error err;
	int ok = 0;

	while (!ok && now_ms() < deadline) {
		if (gs_client_status(c, &st, &err) == 0) {
			ok = st->slice_ns == slice_ns;
			gs_status_free(st);
		}
		if (!ok)
			nap_ms(10);
	}
	return ok;
}

/* ---- GPU health (faults injected into the simulated GPU) ---- */

static int log_lines(const char *needle)
{
	char line[1024];
	FILE *f = fopen(logpath, "r");
	int n = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	return n;
}

/* GPU 0's healthy flag per STATUS (-1: no answer); why gets the reason. */
static int gpu0_health(struct gs_client *c, char *why, size_t len)
{
	struct gs_status *st = NULL;
	struct gs_error err;
	int h = -1;

	if (gs_client_status(c, &st, &err) < 0)
		return -1;
	if (st->ngpus > 0) {
		h = (int)st->gpus[0].healthy;
		snprintf(why, len, "%s", st->gpus[0].health);
	}
	gs_status_free(st);
	return h;
}

static void nobody_fault(void *arg)
{
	struct gs_client *c = conn();
	struct gs_error err;

	(void)arg;
	CHECK(gs_client_gpu_fault(c, 0, 1, &err) < 0 && err.code == GS_EPERM,
	      "nobody injects a fault: %s", err.msg);
	CHECK(gs_client_gpu_fault(c, 0, 0, &err) < 0 && err.code == GS_EPERM,
	      "nobody clears a fault: %s", err.msg);
	gs_client_free(c);
}

static void test_health(struct gs_client *root)
{
	struct gs_error err;
	struct job j;
	char why[GS_LABEL_MAX];
	uint64_t a, b;
	int bad0 = log_lines(": unhealthy ("), ok0 = log_lines("healthy again");

	a = create(root, 0, 10, 0, 0);
	CHECK(gpu0_health(root, why, sizeof(why)) == 1 && why[0] == '\0',
	      "GPU 0 healthy at start (%s)", why);
	CHECK(gs_client_gpu_fault(root, 0, 1, &err) == 0, "gpu-fail: %s",
	      err.msg);
	CHECK(gs_client_gpu_fault(root, 0, 1, &err) == 0, "gpu-fail again: %s",
	      err.msg);
	CHECK(gpu0_health(root, why, sizeof(why)) == 0 &&
	      strstr(why, "fault injected") != NULL,
	      "STATUS: GPU 0 unhealthy with a reason ('%s')", why);
	CHECK(create_err(root, 0, 5, &err) < 0 && err.code == GS_EUNHEALTHY &&
	      strstr(err.msg, "GPU 0 is unhealthy") != NULL,
	      "create on the unhealthy GPU: %s", err.msg);
	CHECK(create_err(root, -1, 5, &err) < 0 &&
	      err.code == GS_EUNHEALTHY && strstr(err.msg, "unhealthy"),
	      "placement with every GPU unhealthy: %s", err.msg);
	/* existing allocations stay and may still attach */
	CHECK(alloc_state(root, a) == GS_ASTATE_CREATED,
	      "allocation on the unhealthy GPU kept");
	job_attach(&j, a);
	CHECK(j.page != NULL, "attach on the unhealthy GPU");
	job_free(&j);
	CHECK(gs_client_gpu_fault(root, 7, 1, &err) < 0 &&
	      err.code == GS_ENOENT, "fault on GPU 7: %s", err.msg);
	CHECK(run_as_nobody(nobody_fault, NULL) == 0,
	      "fault checks as nobody failed");
	CHECK(log_lines(": unhealthy (") == bad0 + 1,
	      "one log line for the transition to unhealthy (%d)",
	      log_lines(": unhealthy (") - bad0);
	CHECK(gs_client_gpu_fault(root, 0, 0, &err) == 0, "gpu-ok: %s",
	      err.msg);
	CHECK(gs_client_gpu_fault(root, 0, 0, &err) == 0, "gpu-ok again: %s",
	      err.msg);
	CHECK(gpu0_health(root, why, sizeof(why)) == 1 && why[0] == '\0',
	      "GPU 0 healthy again (%s)", why);
	CHECK(log_lines("healthy again") == ok0 + 1,
	      "one log line for the recovery (%d)",
	      log_lines("healthy again") - ok0);
	b = create(root, 0, 5, 0, 0);
	CHECK(b != 0, "create after recovery");
	gs_client_alloc_close(root, a, NULL, &err);
	gs_client_alloc_close(root, b, NULL, &err);
}

/* Labels come from users (job names): the log shows them escaped, one
 * line, no terminal escapes. */
static void test_label_log(struct gs_client *root)
{
	struct gs_alloc_req r;
	struct gs_alloc_info info;
	struct gs_error err;
	char line[2048];
	FILE *f;
	int esc = 0;

	memset(&r, 0, sizeof(r));
	r.gpu = -1;
	r.shares = 1;
	snprintf(r.labels.job, sizeof(r.labels.job),
		 "lab\nfake line\x1b[31m\x7f\\x");
	snprintf(r.labels.pod, sizeof(r.labels.pod), "p\xc3\xa9\r");
	if (gs_client_alloc_create(root, &r, &info, &err) < 0) {
		CHECK(0, "create with odd labels: %s", err.msg);
		return;
	}
	CHECK(log_lines("job 'lab\\x0afake line\\x1b[31m\\x7f\\\\x' pod "
			"'p\\xc3\\xa9\\x0d'") == 1,
	      "labels not escaped in the log");
	f = fopen(logpath, "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "fake line", 9) == 0 ||
		    strchr(line, 0x1b) != NULL || strchr(line, '\r') != NULL)
			esc++;
	if (f != NULL)
		fclose(f);
	CHECK(esc == 0, "%d raw label bytes in the log", esc);
	gs_client_alloc_close(root, info.id, NULL, &err);
}

/* The page's contend_flags become `want` within ms (the jobs here never
 * release: the counts of contenders move as the agent holds them back,
 * the flags must not). */
static int wait_flags(struct job *j, uint32_t want, int ms)
{
	int64_t deadline = now_ms() + ms;

	while (now_ms() < deadline) {
		if (__atomic_load_n(&j->page->contend_flags,
				    __ATOMIC_ACQUIRE) == want)
			return 1;
		nap_ms(1);
	}
	return 0;
}

/* GS_CTL_CONTEND_OVERLAP: set in the pages while every allocation that
 * holds or wants the GPU is a client of one MPS server.  mps: the agent
 * serves time allocations (time_mps with the site's pipe), so two of
 * root's jobs share a server and a job of another user does not; without
 * it the bit is never set. */
static void test_overlap(struct gs_client *root, int mps)
{
	const uint32_t both = GS_CTL_CONTEND_VALID | GS_CTL_CONTEND_OVERLAP;
	struct job a, b, c;
	struct gs_error err;
	uint32_t f = mps ? both : GS_CTL_CONTEND_VALID;

	memset(&c, 0, sizeof(c));
	c.fd = -1;
	job_attach(&a, create(root, -1, 20, 0, 0));
	job_attach(&b, create(root, -1, 20, 0, 0));
	if (a.page == NULL || b.page == NULL)
		goto out;
	CHECK(gs_client_token_want(a.c, &err) == 0, "%s", err.msg);
	CHECK(gs_client_token_want(b.c, &err) == 0, "%s", err.msg);
	/* (not the contenders count: the agent holds back a holder that
	 * never releases, and the count moves with it) */
	CHECK(wait_flags(&a, f, 3000) && wait_flags(&b, f, 3000),
	      "two of root's jobs (time_mps %d): flags %#x/%#x", mps,
	      a.page->contend_flags, b.page->contend_flags);
	/* a job that writes the agent's word itself gets it put back: the
	 * flag only ever changes what that job does with its own chunks */
	__atomic_store_n(&a.page->contend_flags, mps ? GS_CTL_CONTEND_VALID :
			 both, __ATOMIC_RELEASE);
	CHECK(wait_flags(&a, f, 3000), "a job's own write of contend_flags "
	      "stayed: %#x (time_mps %d)", a.page->contend_flags, mps);
	if (!mps)
		goto out;
	/* another user's job would run in another server (or none) */
	job_attach(&c, create(root, -1, 20, 0, 65534));
	if (c.page == NULL)
		goto out;
	CHECK(gs_client_token_want(c.c, &err) == 0, "%s", err.msg);
	CHECK(wait_flags(&a, GS_CTL_CONTEND_VALID, 3000) &&
	      wait_flags(&b, GS_CTL_CONTEND_VALID, 3000) &&
	      wait_flags(&c, GS_CTL_CONTEND_VALID, 3000),
	      "another user's job beside them: flags %#x/%#x/%#x",
	      a.page->contend_flags, b.page->contend_flags,
	      c.page->contend_flags);
	/* it leaves: the two share a server again */
	gs_client_alloc_close(root, c.id, NULL, &err);
	job_free(&c);
	CHECK(wait_flags(&a, both, 3000) && wait_flags(&b, both, 3000),
	      "after the other user's job left: flags %#x/%#x",
	      a.page->contend_flags, b.page->contend_flags);
out:
	if (c.c != NULL) {
		gs_client_alloc_close(root, c.id, NULL, &err);
		job_free(&c);
	}
	gs_client_alloc_close(root, a.id, NULL, &err);
	gs_client_alloc_close(root, b.id, NULL, &err);
	job_free(&a);
	job_free(&b);
}

static void test_sigterm(void)
{
	int64_t deadline = now_ms() + 10000;
	pid_t w = 0;
	int st = 0;

	kill(agent_pid, SIGTERM);
	while (now_ms() < deadline &&
	       (w = waitpid(agent_pid, &st, WNOHANG)) == 0)
		nap_ms(10);
	CHECK(w == agent_pid, "gshared did not stop on SIGTERM");
	if (w == agent_pid) {
		agent_pid = -1;
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "exit status %#x", st);
		CHECK(access(sock, F_OK) < 0, "socket left behind");
	}
}

int main(int argc, char *argv[])
{
	struct gs_client *root, *bystander;

	if (argc > 1)
		gshared = argv[1];
	if (getuid() != 0) {
		fprintf(stderr, "test_agent: needs root (runs clients as "
			"nobody)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/gsagent.XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	chmod(dir, 0755); /* nobody must reach the socket */
	snprintf(sock, sizeof(sock), "%s/gshared.sock", dir);
	snprintf(cfgpath, sizeof(cfgpath), "%s/gshare.yaml", dir);
	snprintf(logpath, sizeof(logpath), "%s/gshared.log", dir);
	atexit(cleanup);
	signal(SIGINT, on_fatal_signal);
	signal(SIGTERM, on_fatal_signal);
	signal(SIGPIPE, SIG_IGN);
	write_config("4ms", "escalation: hold\n");
	start_agent();
	root = conn();
	bystander = conn();

	test_admission(root);
	test_memory(root);
	test_set_mem(root);
	test_label_log(root);
	test_status_pages(root);
	test_permissions(root);
	test_multi_attach(root);
	test_any_uid(root);
	test_tokens(root);
	test_overlap(root, 0);
	test_unwant(root);
	test_slice_extension(root);
	test_tokens_shared(root);
	test_close_totals(root);
	test_spool_warning(root);
	test_health(root);
	test_escalation_hold(root);
	test_malformed(bystander);
	test_reload(root);
	write_config("5ms", "escalation: kill\n");
	kill(agent_pid, SIGHUP);
	CHECK(wait_slice(root, 5000000), "reload to escalation: kill");
	test_escalation_kill(root);

	gs_client_free(bystander);
	gs_client_free(root);
	test_sigterm();
	/* an agent whose time allocations are MPS clients (the site's
	 * server: no daemon is started) */
	{
		char extra[512];

		snprintf(extra, sizeof(extra), "escalation: hold\n"
			 "time_mps: true\nmps_pipe_dir: %s/mps\n", dir);
		write_config("4ms", extra);
		start_agent();
		root = conn();
		test_overlap(root, 1);
		gs_client_free(root);
		test_sigterm();
	}
	printf("test_agent: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
