/*
 * metrics.h — Prometheus text exposition served by the agent.
 *
 * A tiny HTTP/1.0 server: GET /metrics answers the exposition (text
 * format 0.0.4), anything else a short error; one request per connection.
 * Every socket is non-blocking and lives in the module's own epoll set;
 * the agent's loop watches that set's single fd (gs_metrics_fd, EPOLLIN)
 * and calls gs_metrics_dispatch when it is readable, so a slow or stuck
 * scraper never blocks the loop.  Connections idle longer than
 * GS_METRICS_IDLE_MS are dropped at the next dispatch or expire call.
 * The page is rendered at request time from the accounting state and the
 * agent's self-statistics.
 * Threading: loop thread only.
 */
#ifndef GS_METRICS_H
#define GS_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "acct.h"
#include "gs_error.h"

#define GS_METRICS_DEFAULT_ADDR	"127.0.0.1:9464"
#define GS_METRICS_MAX_CONN	32
#define GS_METRICS_IDLE_MS	5000

/* What the agent knows about itself. */
struct gs_agent_stats {
	uint64_t loop_lag_ns;		/* lateness of the last tick */
	uint64_t loop_lag_max_ns;	/* worst since start */
	uint32_t clients;		/* connected clients */
	uint64_t store_writes;		/* committed tick batches */
	uint64_t store_errors;		/* failed or dropped batches */
	uint64_t store_write_ns_sum;
	uint64_t store_write_ns_last;
	uint64_t store_purged;		/* samples removed by retention */
	uint64_t store_behind_ns;	/* age of the oldest usage not yet
					 * committed (0: all written) */
	/* watch_spool (gs_metrics_spool_scan): 0 when not watched */
	int spool_watched;
	uint32_t spool_pending;		/* regular files not named .* */
	uint64_t spool_oldest_s;	/* age of the oldest, seconds */
};

/* Count the records in dir (regular files whose name does not start with
 * '.') and the age of the oldest into st; dir "" unwatches.  A missing
 * directory counts as empty. */
void gs_metrics_spool_scan(const char *dir, struct gs_agent_stats *st);

/* Growable text buffer. */
struct gs_mbuf {
	char *p;
	size_t len, cap;
	int oom;
};
void gs_mbuf_printf(struct gs_mbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void gs_mbuf_free(struct gs_mbuf *b);

/* Render the whole exposition into b (appends).  acct may be NULL. */
int gs_metrics_render(const struct gs_acct *acct,
		      const struct gs_agent_stats *st, struct gs_mbuf *b,
		      struct gs_error *err);

/* Parse "host:port" / "[v6]:port" / ":port" (loopback then), or
 * "unix:/abs/path" (host gets the path, port 0).  */
int gs_metrics_parse_addr(const char *addr, char *host, size_t hostlen,
			  uint16_t *port, struct gs_error *err);

struct gs_metrics;

/* Listen on addr; acct and st are borrowed for the server's lifetime. */
int gs_metrics_new(const char *addr, const struct gs_acct *acct,
		   const struct gs_agent_stats *st, struct gs_metrics **out,
		   struct gs_error *err);
void gs_metrics_free(struct gs_metrics *m);
/* The path of a "unix:/path" address (borrowed), else NULL. */
const char *gs_metrics_unix_path(const char *addr);
/* A Unix socket listener starts mode 0600 (root only): give it mode and
 * group (gid -1: keep).  No-op for TCP. */
int gs_metrics_grant(struct gs_metrics *m, mode_t mode, gid_t gid,
		     struct gs_error *err);
/* The fd to watch for EPOLLIN. */
int gs_metrics_fd(const struct gs_metrics *m);
/* The bound port (useful with port 0). */
uint16_t gs_metrics_port(const struct gs_metrics *m);
/* Serve whatever is ready; never blocks.  mono_ms: CLOCK_MONOTONIC ms. */
void gs_metrics_dispatch(struct gs_metrics *m, uint64_t mono_ms);
/* Drop idle connections. */
void gs_metrics_expire(struct gs_metrics *m, uint64_t mono_ms);
/* Requests answered so far (200 or not). */
uint64_t gs_metrics_requests(const struct gs_metrics *m);

#endif /* GS_METRICS_H */
