/*
 * test_metrics.c — Prometheus exposition text and the non-blocking
 * HTTP/1.0 server (real loopback sockets, driven by gs_metrics_dispatch).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "metrics.h"

#define S 1000000000ull

static struct gs_ctlpage page;

static struct gs_acct *
make_acct(void)
{
	struct gs_acct *a;
	struct gs_acct_meta m;
	struct gs_store_batch *b;
	struct gs_error err;

	assert_int_equal(gs_acct_new(NULL, &a, &err), 0);
	memset(&m, 0, sizeof(m));
	m.agent_id = 9;
	strcpy(m.labels.job, "42");
	strcpy(m.labels.step, "0");
	strcpy(m.labels.user, "bob\"q\\");
	m.gpu = 1;
	m.shares = 30;
	m.weight = 60;
	m.mem_limit = 20ull << 30;
	assert_int_equal(gs_acct_open(a, &m, 0, 0, &err), 0);
	memset(&page, 0, sizeof(page));
	assert_int_equal(gs_acct_attach(a, 9, &page, 0), 0);
	page.gpu_ns = 1500000000;
	page.state = GS_CTL_RUNNING;
	page.suspensions = 3;
	page.evict_ns_sum = 60000;
	page.last_evict_ns = 20000;
	page.mem_used = 3ull << 30;
	page.mem_peak = 5ull << 30;
	assert_int_equal(gs_acct_tick(a, S, 1, &b, &err), 0);
	gs_store_batch_free(b);
	return a;
}

/* watch_spool: regular files not named .* are records; gauges follow */
static void
test_spool(void **state)
{
	struct gs_agent_stats st = { 0 };
	struct gs_mbuf b = { 0 };
	struct gs_error err;
	char dir[] = "/tmp/gs-spoolm.XXXXXX", path[64];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	gs_metrics_spool_scan("", &st);
	assert_int_equal(st.spool_watched, 0);
	assert_int_equal(gs_metrics_render(NULL, &st, &b, &err), 0);
	assert_null(strstr(b.p, "gshare_spool_pending_records"));
	gs_mbuf_free(&b);
	gs_metrics_spool_scan(dir, &st);
	assert_int_equal(st.spool_watched, 1);
	assert_int_equal(st.spool_pending, 0);
	for (int i = 0; i < 4; i++) {
		static const char *const names[] = { "42.n1", "43_1.n1",
						     ".status", ".tmp.44.n1" };

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "w");
		assert_non_null(f);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/n1", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	gs_metrics_spool_scan(dir, &st);
	assert_int_equal(st.spool_pending, 2);
	assert_int_equal(gs_metrics_render(NULL, &st, &b, &err), 0);
	assert_non_null(strstr(b.p, "gshare_spool_pending_records 2\n"));
	assert_non_null(strstr(b.p, "# TYPE gshare_spool_oldest_seconds gauge\n"));
	gs_mbuf_free(&b);
	rmdir(path);
	for (int i = 0; i < 4; i++) {
		static const char *const names[] = { "42.n1", "43_1.n1",
						     ".status", ".tmp.44.n1" };

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	assert_int_equal(rmdir(dir), 0);
}

static void
test_render(void **state)
{
	static const struct gs_unman_row un[] = {
		{ .gpu = 1, .alloc = 9, .procs = 2, .held = 1,
		  .est_ns = 250000000 },
		{ .gpu = 1, .alloc = 0, .procs = 3, .est_ns = 0 },
	};
	struct gs_agent_stats st = { .loop_lag_ns = 2000, .clients = 4,
				     .store_writes = 10, .unman = un,
				     .nunman = 2 };
	struct gs_acct *a = make_acct();
	struct gs_mbuf b = { 0 };
	struct gs_error err;
	const char *f1, *f2;

	(void)state;
	assert_int_equal(gs_metrics_render(a, &st, &b, &err), 0);
	/* unmanaged processes: each family's samples follow its TYPE line */
	f1 = strstr(b.p, "# TYPE gshare_unmanaged_processes gauge\n");
	f2 = strstr(b.p, "# HELP gshare_unmanaged_held_processes");
	assert_non_null(f1);
	assert_non_null(f2);
	{
		const char *x = strstr(f1, "gshare_unmanaged_processes{gpu=\"1\",alloc=\"9\"} 2\n");
		const char *y = strstr(f1, "gshare_unmanaged_processes{gpu=\"1\",alloc=\"\"} 3\n");

		assert_true(x != NULL && x < f2);
		assert_true(y != NULL && y < f2);
	}
	assert_non_null(strstr(f2, "gshare_unmanaged_held_processes{gpu=\"1\",alloc=\"9\"} 1\n"));
	assert_non_null(strstr(b.p, "# TYPE gshare_unmanaged_gpu_seconds_total counter\n"));
	assert_non_null(strstr(b.p, "gshare_unmanaged_gpu_seconds_total{gpu=\"1\",alloc=\"9\"} 0.25\n"));
	assert_non_null(strstr(b.p, "gshare_unmanaged_gpu_seconds_total{gpu=\"1\",alloc=\"\"} 0\n"));
	assert_non_null(b.p);
	assert_non_null(strstr(b.p, "# TYPE gshare_gpu_seconds_total counter\n"));
	assert_non_null(strstr(b.p,
		"gshare_gpu_seconds_total{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 1.5\n"));
	assert_non_null(strstr(b.p,
		"gshare_share_seconds_total{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 0.3\n"));
	assert_non_null(strstr(b.p, "gshare_suspensions_total{alloc=\"9\""));
	assert_non_null(strstr(b.p, "gshare_weight{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 60\n"));
	assert_non_null(strstr(b.p, "gshare_active_allocations{gpu=\"1\"} 1\n"));
	/* memory gauges in whole bytes, not rounded to 9 digits */
	assert_non_null(strstr(b.p, "# TYPE gshare_memory_used_bytes gauge\n"));
	assert_non_null(strstr(b.p, "gshare_memory_used_bytes{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 3221225472\n"));
	assert_non_null(strstr(b.p, "gshare_memory_max_bytes{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 5368709120\n"));
	assert_non_null(strstr(b.p, "gshare_memory_limit_bytes{alloc=\"9\",job=\"42.0\",user=\"bob\\\"q\\\\\",gpu=\"1\"} 21474836480\n"));
	assert_non_null(strstr(b.p,
		"gshare_eviction_latency_seconds_bucket{gpu=\"1\",le=\"2e-05\"} 3\n"));
	assert_non_null(strstr(b.p,
		"gshare_eviction_latency_seconds_bucket{gpu=\"1\",le=\"+Inf\"} 3\n"));
	assert_non_null(strstr(b.p, "gshare_eviction_latency_seconds_count{gpu=\"1\"} 3\n"));
	assert_non_null(strstr(b.p, "gshare_agent_clients 4\n"));
	assert_non_null(strstr(b.p, "gshare_agent_loop_lag_seconds 2e-06\n"));
	assert_non_null(strstr(b.p, "gshare_store_writes_total 10\n"));
	/* every line is a comment or "name{...} value" / "name value" */
	for (char *l = b.p; *l; l = strchr(l, '\n') + 1)
		assert_true(*l == '#' || strncmp(l, "gshare_", 7) == 0);
	gs_mbuf_free(&b);
	/* no accounting state: families only, still valid */
	assert_int_equal(gs_metrics_render(NULL, NULL, &b, &err), 0);
	assert_non_null(strstr(b.p, "# HELP gshare_gpu_seconds_total"));
	gs_mbuf_free(&b);
	gs_acct_free(a);
}

static void
test_addr(void **state)
{
	struct gs_error err;
	char host[64];
	uint16_t port;

	(void)state;
	assert_int_equal(gs_metrics_parse_addr("127.0.0.1:9464", host,
					       sizeof(host), &port, &err), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 9464);
	assert_int_equal(gs_metrics_parse_addr(":0", host, sizeof(host),
					       &port, &err), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(gs_metrics_parse_addr("[::1]:80", host, sizeof(host),
					       &port, &err), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(gs_metrics_parse_addr("localhost", host, sizeof(host),
					       &port, &err), -1);
	assert_int_equal(gs_metrics_parse_addr("1.2.3.4:99999", host,
					       sizeof(host), &port, &err), -1);
	assert_int_equal(gs_metrics_parse_addr("1.2.3.4:", host, sizeof(host),
					       &port, &err), -1);
	assert_int_equal(gs_metrics_parse_addr("[::1:80", host, sizeof(host),
					       &port, &err), -1);
	struct gs_metrics *m;
	assert_int_equal(gs_metrics_new("localhost:80", NULL, NULL, &m, &err),
			 -1);
	assert_non_null(strstr(err.msg, "not an IP address"));
}

static int
connect_to(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Send req, serve until the server closes, return what came back. */
static char *
exchange(struct gs_metrics *m, const char *req, size_t reqlen)
{
	int fd = connect_to(gs_metrics_port(m));
	char *out = calloc(1, 1 << 20);
	size_t len = 0;

	assert_int_equal(send(fd, req, reqlen, 0), (ssize_t)reqlen);
	for (int i = 0; i < 2000; i++) {
		struct pollfd p[2] = { { gs_metrics_fd(m), POLLIN, 0 },
				       { fd, POLLIN, 0 } };
		ssize_t n;

		poll(p, 2, 10);
		if (p[0].revents)
			gs_metrics_dispatch(m, 0);
		if (p[1].revents) {
			n = read(fd, out + len, (1 << 20) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
	}
	close(fd);
	return out;
}

static void
test_server(void **state)
{
	static const char get[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	struct gs_agent_stats st = { .clients = 2 };
	struct gs_acct *a = make_acct();
	struct gs_metrics *m;
	struct gs_error err;
	char *r, big[5000];

	(void)state;
	assert_int_equal(gs_metrics_new("127.0.0.1:0", a, &st, &m, &err), 0);
	assert_true(gs_metrics_port(m) > 0);
	r = exchange(m, get, strlen(get));
	assert_true(strncmp(r, "HTTP/1.0 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(r, "gshare_agent_clients 2\n"));
	assert_non_null(strstr(r, "gshare_gpu_seconds_total{alloc=\"9\""));
	free(r);
	r = exchange(m, "GET /other HTTP/1.0\r\n\r\n", 23);
	assert_true(strncmp(r, "HTTP/1.0 404", 12) == 0);
	free(r);
	r = exchange(m, "POST /metrics HTTP/1.0\r\n\r\n", 26);
	assert_true(strncmp(r, "HTTP/1.0 405", 12) == 0);
	free(r);
	r = exchange(m, "garbage\r\n\r\n", 11);
	assert_true(strncmp(r, "HTTP/1.0 400", 12) == 0);
	free(r);
	memset(big, 'a', sizeof(big));
	r = exchange(m, big, sizeof(big));
	assert_true(strncmp(r, "HTTP/1.0 431", 12) == 0);
	free(r);
	r = exchange(m, "HEAD /metrics HTTP/1.0\r\n\r\n", 26);
	assert_true(strncmp(r, "HTTP/1.0 200", 12) == 0);
	assert_null(strstr(r, "gshare_"));
	free(r);
	assert_int_equal(gs_metrics_requests(m), 6);

	/* a silent client is dropped after the idle limit; the server keeps
	 * answering others meanwhile */
	int idle = connect_to(gs_metrics_port(m));
	struct pollfd p = { gs_metrics_fd(m), POLLIN, 0 };
	assert_int_equal(poll(&p, 1, 1000), 1);
	gs_metrics_dispatch(m, 1000);
	r = exchange(m, get, strlen(get));
	assert_true(strncmp(r, "HTTP/1.0 200", 12) == 0);
	free(r);
	gs_metrics_expire(m, 1000 + GS_METRICS_IDLE_MS + 1);
	char c;
	assert_int_equal(read(idle, &c, 1), 0);	/* closed by the server */
	close(idle);

	/* more clients than slots: the extra ones are refused, not queued */
	int fds[GS_METRICS_MAX_CONN + 4];
	for (int i = 0; i < GS_METRICS_MAX_CONN + 4; i++)
		fds[i] = connect_to(gs_metrics_port(m));
	for (int i = 0; i < 5; i++) {
		assert_true(poll(&p, 1, 200) >= 0);
		gs_metrics_dispatch(m, 2000);
	}
	r = exchange(m, get, strlen(get));	/* slots full: refused */
	assert_int_equal(r[0], '\0');
	free(r);
	for (int i = 0; i < GS_METRICS_MAX_CONN + 4; i++)
		close(fds[i]);
	gs_metrics_expire(m, 2000 + GS_METRICS_IDLE_MS + 1);
	r = exchange(m, get, strlen(get));
	assert_true(strncmp(r, "HTTP/1.0 200", 12) == 0);
	free(r);
	gs_metrics_free(m);
	gs_acct_free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render),
		cmocka_unit_test(test_spool),
		cmocka_unit_test(test_addr),
		cmocka_unit_test(test_server),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
