/*
 * test_limits.c — what one local user can do to a live gshared's other
 * clients (issue 14, items 1 and 2).
 *
 * Connection counts: with max_clients 40, max_clients_per_uid 10 and
 * root_reserved_clients 8, `nobody` opens its whole quota and the next
 * one is refused with a reason; other uids still connect until only
 * root's reserve is left, and the next non-root connection is refused
 * with that reason; root then opens its reserve and still pings and
 * creates allocations.
 *
 * Unread replies: `nobody` keeps 10 connections that send STATUS
 * without ever reading; the agent must drop them at its output cap, its
 * RSS (VmRSS) must stay bounded and root's PING must keep answering.
 * The figures (RSS, ping latency, drops) are printed.
 *
 * Children run as other uids (setuid); every wait polls against a
 * deadline; the agent and every child are killed and the directory
 * removed on any exit.  Usage: test_limits [path/to/gshared]
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"

#define NOBODY		65534
#define MAX_CLIENTS	40
#define PER_UID		10
#define RESERVE		8
#define MAX_KIDS	8
#define FLOOD_MS	3000
#define RSS_BOUND_KB	(64 * 1024)	/* growth allowed under the flood */
#define RSS_ABORT_KB	(1536 * 1024)	/* stop a runaway agent early */

static char dir[64], sock[100], cfgpath[128], logpath[128];
static const char *gshared = "build/node-agent/gshared";
static pid_t agent_pid = -1;
static pid_t kids[MAX_KIDS];
static int nkids, failures, checks;

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

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void cleanup(void)
{
	char cmd[256];
	int i;

	for (i = 0; i < nkids; i++) {
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			kids[i] = 0;
		}
	}
	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
		agent_pid = -1;
	}
	if (dir[0] != '\0') {
		if (failures) {
			snprintf(cmd, sizeof(cmd), "grep -v dropping %s | tail -n 40 >&2",
				 logpath);
			if (system(cmd) < 0)
				perror("system");
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) < 0)
			perror("system");
		dir[0] = '\0';
	}
}

static void on_fatal_signal(int sig)
{
	(void)sig;
	cleanup();
	_exit(1);
}

static void start_agent(void)
{
	struct gs_client *c;
	struct gs_error err;
	int64_t deadline = now_ms() + 15000;
	FILE *f = fopen(cfgpath, "w");
	int fd;

	if (f == NULL) {
		perror(cfgpath);
		exit(1);
	}
	fprintf(f, "socket: %s\nstate_dir: %s/state\nmetrics_listen: \"\"\n"
		"gpus:\n  simulated: 1\nmax_clients: %d\n"
		"max_clients_per_uid: %d\nroot_reserved_clients: %d\n", sock,
		dir, MAX_CLIENTS, PER_UID, RESERVE);
	fclose(f);
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
		execl(gshared, "gshared", "-d", "-f", cfgpath, (char *)NULL);
		perror("exec gshared");
		_exit(127);
	}
	while (now_ms() < deadline) {
		if (gs_client_connect(sock, 1000, &c, &err) == 0 &&
		    gs_client_ping(c, &err) == 0) {
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

/* A connection that answered PING, or NULL with err filled. */
static struct gs_client *pinged(struct gs_error *err)
{
	struct gs_client *c = NULL;

	if (gs_client_connect(sock, 3000, &c, err) < 0)
		return NULL;
	if (gs_client_ping(c, err) < 0) {
		gs_client_free(c);
		return NULL;
	}
	return c;
}

static void become(uid_t uid)
{
	if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0) {
		perror("drop privileges");
		_exit(2);
	}
}

/* ---- connection counts ---- */

/* A child as uid that opens n connections (each must answer PING), then
 * one more that must be refused with `refused` in its message (NULL: no
 * extra try), reports on `ready` and holds everything until `hold`
 * closes.  Exit status: 0 when every check passed. */
static pid_t holder(uid_t uid, int n, const char *refused, int ready[2],
		    int hold[2])
{
	pid_t p;

	if (pipe(ready) < 0 || pipe(hold) < 0) {
		perror("pipe");
		exit(1);
	}
	p = fork();
	if (p < 0) {
		perror("fork");
		exit(1);
	}
	if (p == 0) {
		struct gs_client *c[PER_UID + 1];
		struct gs_error err;
		char b = 0;
		int i;

		close(ready[0]);
		close(hold[1]);
		failures = 0;
		become(uid);
		for (i = 0; i < n; i++) {
			c[i] = pinged(&err);
			CHECK(c[i] != NULL, "uid %u connection %d: %s",
			      (unsigned)uid, i + 1, err.msg);
		}
		if (refused != NULL) {
			c[n] = pinged(&err);
			CHECK(c[n] == NULL && err.code == GS_EBUSY &&
			      strstr(err.msg, refused) != NULL,
			      "uid %u connection %d: want refused (%s), "
			      "got: %s", (unsigned)uid, n + 1, refused,
			      c[n] == NULL ? err.msg : "connected");
		}
		b = failures ? 'F' : 'k';
		if (write(ready[1], &b, 1) != 1)
			_exit(3);
		while (read(hold[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(failures ? 1 : 0);
	}
	close(ready[1]);
	close(hold[0]);
	kids[nkids++] = p;
	return p;
}

static int wait_ready(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char b = 0;

	if (poll(&p, 1, 20000) != 1 || read(fd, &b, 1) != 1)
		return 0;
	return b == 'k';
}

static void test_conn_counts(void)
{
	static const struct {
		uid_t uid;
		int n;
		const char *refused;
	} who[] = {
		/* nobody takes its whole quota, the next is refused */
		{ NOBODY, PER_UID, "max_clients_per_uid" },
		/* other users still connect ... */
		{ NOBODY - 1, PER_UID, NULL },
		{ NOBODY - 2, PER_UID, NULL },
		/* ... until only root's reserve is left (the root client
		 * of main holds one connection: 31 + 1 = 40 - 8) */
		{ NOBODY - 3, 1, "root_reserved_clients" },
	};
	struct gs_client *root[RESERVE + 1];
	struct gs_alloc_req r;
	struct gs_alloc_info info;
	struct gs_error err;
	int ready[4][2], hold[4][2], st, i, k;

	for (i = 0; i < 4; i++) {
		holder(who[i].uid, who[i].n, who[i].refused, ready[i],
		       hold[i]);
		CHECK(wait_ready(ready[i][0]), "uid %u: its connections",
		      (unsigned)who[i].uid);
	}
	/* root: its reserve is there, every connection serves */
	for (k = 0; k < RESERVE; k++) {
		root[k] = pinged(&err);
		CHECK(root[k] != NULL, "root connection %d in the reserve: %s",
		      k + 1, err.msg);
	}
	if (root[0] != NULL) {
		memset(&r, 0, sizeof(r));
		r.gpu = -1;
		r.shares = 10;
		r.uid = NOBODY;
		CHECK(gs_client_alloc_create(root[0], &r, &info, &err) == 0,
		      "root creates with every slot taken: %s", err.msg);
		if (gs_client_alloc_close(root[0], info.id, NULL, &err) < 0)
			CHECK(0, "close: %s", err.msg);
	}
	/* every slot taken: root too is refused now, with the reason */
	root[RESERVE] = pinged(&err);
	CHECK(root[RESERVE] == NULL && err.code == GS_EBUSY &&
	      strstr(err.msg, "(max_clients)") != NULL,
	      "root beyond max_clients: %s",
	      root[RESERVE] ? "connected" : err.msg);
	for (k = 0; k <= RESERVE; k++)
		gs_client_free(root[k]);
	for (i = 0; i < 4; i++) {
		close(hold[i][1]);
		close(ready[i][0]);
	}
	for (i = 0; i < nkids; i++) {
		CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) &&
		      WEXITSTATUS(st) == 0, "holder %d failed", i);
		kids[i] = 0;
	}
	nkids = 0;
}

/* ---- replies nobody reads ---- */

static long agent_rss_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)agent_pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int flood_connect(void)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* As nobody: PER_UID connections write STATUS requests as fast as the
 * agent takes them and never read, reconnecting when dropped, for
 * FLOOD_MS. */
static void flood(void)
{
	static uint8_t req[256 * GS_FRAME_HDR_SIZE];
	struct gs_frame_hdr h = { GS_PROTO_MAGIC, GS_PROTO_MAJOR, 0,
				  GS_MSG_STATUS, 0, 1 };
	int fds[PER_UID], i, drops = 0;
	int64_t end = now_ms() + FLOOD_MS;
	size_t k;

	become(NOBODY);
	for (k = 0; k < sizeof(req); k += GS_FRAME_HDR_SIZE)
		gs_frame_hdr_encode(&h, req + k);
	for (i = 0; i < PER_UID; i++)
		fds[i] = flood_connect();
	while (now_ms() < end) {
		struct pollfd p[PER_UID];

		for (i = 0; i < PER_UID; i++) {
			ssize_t n;

			if (fds[i] < 0) {
				fds[i] = flood_connect();
				continue;
			}
			n = send(fds[i], req, sizeof(req),
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				close(fds[i]);
				fds[i] = -1;
				drops++;
			}
		}
		for (i = 0; i < PER_UID; i++) {
			p[i].fd = fds[i];
			p[i].events = POLLOUT;
		}
		poll(p, PER_UID, 5);
	}
	printf("flood: %d connections lost\n", drops);
	fflush(stdout);
	_exit(0);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_unread_replies(struct gs_client *root)
{
	static int64_t lat[4096];
	struct gs_alloc_req r;
	struct gs_alloc_info info;
	struct gs_error err;
	long base, rss, peak;
	uint64_t ids[3];
	int64_t t0, end;
	unsigned nlat = 0, i;
	int st = 0, done = 0, pings_failed = 0;
	pid_t p;

	/* nobody sees three allocations: each STATUS reply is ~1 KiB */
	memset(&r, 0, sizeof(r));
	r.gpu = -1;
	r.shares = 10;
	r.uid = NOBODY;
	for (i = 0; i < 3; i++) {
		snprintf(r.labels.job, sizeof(r.labels.job), "flood%u", i);
		ids[i] = 0;
		if (gs_client_alloc_create(root, &r, &info, &err) == 0)
			ids[i] = info.id;
		else
			CHECK(0, "create: %s", err.msg);
	}
	base = peak = agent_rss_kb();
	p = fork();
	if (p < 0) {
		perror("fork");
		exit(1);
	}
	if (p == 0)
		flood();
	kids[nkids++] = p;
	end = now_ms() + FLOOD_MS + 10000;
	while (!done && now_ms() < end) {
		rss = agent_rss_kb();
		if (rss > peak)
			peak = rss;
		if (rss - base > RSS_ABORT_KB) {
			CHECK(0, "agent RSS %ld MiB under the flood: stopped",
			      rss / 1024);
			break;
		}
		t0 = now_us();
		if (gs_client_ping(root, &err) == 0) {
			if (nlat < sizeof(lat) / sizeof(lat[0]))
				lat[nlat++] = now_us() - t0;
		} else {
			pings_failed++;
		}
		nap_ms(20);
		if (waitpid(p, &st, WNOHANG) == p) {
			kids[--nkids] = 0;
			done = 1;
		}
	}
	if (!done) {
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
		kids[--nkids] = 0;
		st = -1;
	}
	CHECK(done && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the flood did not end by itself");
	CHECK(log_lines("bytes of replies unread, dropping it") > 0,
	      "the agent dropped none of the clients that never read");
	CHECK(peak - base < RSS_BOUND_KB, "agent RSS grew by %ld MiB",
	      (peak - base) / 1024);
	CHECK(pings_failed == 0, "%d root pings failed", pings_failed);
	if (nlat > 0) {
		qsort(lat, nlat, sizeof(lat[0]), cmp_i64);
		CHECK(lat[nlat - 1] < 1000000, "root ping took %lld ms",
		      (long long)(lat[nlat - 1] / 1000));
		printf("unread replies: agent RSS %ld MiB before, peak %ld "
		       "MiB under the flood; root ping over %u: p50 %.2f "
		       "ms, max %.2f ms\n", base / 1024, peak / 1024, nlat,
		       (double)lat[nlat / 2] / 1000.0,
		       (double)lat[nlat - 1] / 1000.0);
	}
	CHECK(nlat > 10, "only %u root pings answered", nlat);
	for (i = 0; i < 3; i++)
		if (ids[i] != 0 &&
		    gs_client_alloc_close(root, ids[i], NULL, &err) < 0)
			CHECK(0, "close: %s", err.msg);
}

int main(int argc, char *argv[])
{
	struct gs_client *root;
	struct gs_error err;

	if (argc > 1)
		gshared = argv[1];
	if (getuid() != 0) {
		fprintf(stderr, "test_limits: needs root (runs clients as "
			"other uids)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "/tmp/gslimits.XXXXXX");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	chmod(dir, 0755); /* other uids must reach the socket */
	snprintf(sock, sizeof(sock), "%s/gshared.sock", dir);
	snprintf(cfgpath, sizeof(cfgpath), "%s/gshare.yaml", dir);
	snprintf(logpath, sizeof(logpath), "%s/gshared.log", dir);
	atexit(cleanup);
	signal(SIGINT, on_fatal_signal);
	signal(SIGTERM, on_fatal_signal);
	signal(SIGPIPE, SIG_IGN);
	start_agent();
	root = pinged(&err);
	if (root == NULL) {
		fprintf(stderr, "root connection: %s\n", err.msg);
		return 1;
	}
	test_conn_counts();
	test_unread_replies(root);
	CHECK(gs_client_ping(root, &err) == 0, "agent alive at the end: %s",
	      err.msg);
	gs_client_free(root);
	printf("test_limits: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
