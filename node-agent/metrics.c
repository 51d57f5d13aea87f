/*
 * metrics.c — Prometheus exposition and the HTTP/1.0 server serving it.
 *
 * The server keeps a fixed table of connections.  A connection reads
 * until the end of the request header (or 4 KiB: 431), renders the page
 * once, then writes as the socket accepts and closes.  Each socket is in
 * our own epoll set (edge-free, level-triggered); the agent polls only
 * that set's fd.  Limits: no keep-alive, no TLS, no authentication — bind
 * it to loopback (the default), a trusted network, or a Unix socket
 * ("unix:/path"): created mode 0600 (umask around bind), then opened up
 * by the caller with gs_metrics_grant (store_group's rule), removed when
 * the server is freed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

#define REQ_MAX	4096

/* ---- buffer ---- */

void
gs_mbuf_printf(struct gs_mbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t nc = b->cap ? b->cap * 2 : 4096;
		while (nc - b->len <= (size_t)n)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (np == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
}

void
gs_mbuf_free(struct gs_mbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- exposition ---- */

/* Label value escaping per the text format: \\, \" and \n. */
static void
esc(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < n; s++) {
		if (*s == '\\' || *s == '"') {
			dst[o++] = '\\';
			dst[o++] = *s;
		} else if (*s == '\n') {
			dst[o++] = '\\';
			dst[o++] = 'n';
		} else {
			dst[o++] = *s;
		}
	}
	dst[o] = '\0';
}

/* The job label: "42", "42.0" or "ns/pod/container". */
static void
job_label(const struct gs_labels *l, char *dst, size_t n)
{
	char raw[GS_LABEL_MAX * 5];

	if (l->job[0] && l->step[0])
		snprintf(raw, sizeof(raw), "%s.%s", l->job, l->step);
	else if (l->job[0])
		snprintf(raw, sizeof(raw), "%s", l->job);
	else if (l->pod[0])
		snprintf(raw, sizeof(raw), "%s/%s/%s", l->ns, l->pod,
			 l->container);
	else
		raw[0] = '\0';
	esc(dst, n, raw);
}

static void
family(struct gs_mbuf *b, const char *name, const char *type,
       const char *help)
{
	gs_mbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
		       type);
}

static double
sec(uint64_t ns)
{
	return (double)ns / 1e9;
}

struct per_alloc {
	const char *name, *type, *help;
	int kind;	/* 0 gpu, 1 share, 2 held, 3 susp, 4 shares, 5 weight,
			 * 6.. device memory (whole bytes) */
};

/* GPU processes that bypass the gate, per GPU and allocation ("" for
 * processes of no allocation). */
static void
unman_families(struct gs_mbuf *b, const struct gs_agent_stats *st)
{
	static const struct {
		const char *name, *type, *help;
	} f[] = {
		{ "gshare_unmanaged_processes", "gauge",
		  "GPU processes that bypass the launch gate (alloc \"\": processes of no allocation)." },
		{ "gshare_unmanaged_held_processes", "gauge",
		  "Unmanaged processes held back (stopped) by the level-0 policy." },
		{ "gshare_unmanaged_gpu_seconds_total", "counter",
		  "Estimated GPU time of unmanaged processes (NVML SM utilization times the sampling period)." },
	};
	char id[24];

	for (unsigned k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
		family(b, f[k].name, f[k].type, f[k].help);
		for (unsigned i = 0; i < st->nunman; i++) {
			const struct gs_unman_row *r = &st->unman[i];

			if (r->alloc)
				snprintf(id, sizeof(id), "%" PRIu64, r->alloc);
			else
				id[0] = '\0';
			if (k < 2)
				gs_mbuf_printf(b, "%s{gpu=\"%d\",alloc=\"%s\"} %u\n",
					       f[k].name, r->gpu, id,
					       k == 0 ? r->procs : r->held);
			else
				gs_mbuf_printf(b, "%s{gpu=\"%d\",alloc=\"%s\"} %.9g\n",
					       f[k].name, r->gpu, id,
					       sec(r->est_ns));
		}
	}
}

int
gs_metrics_render(const struct gs_acct *acct, const struct gs_agent_stats *st,
		  struct gs_mbuf *b, struct gs_error *err)
{
	static const struct per_alloc pa[] = {
		{ "gshare_gpu_seconds_total", "counter",
		  "GPU time used by the allocation (runtime-measured, overruns charged in full).",
		  0 },
		{ "gshare_share_seconds_total", "counter",
		  "Guaranteed share times busy wall time (GPU-seconds the allocation was entitled to).",
		  1 },
		{ "gshare_held_seconds_total", "counter",
		  "Time the allocation held the GPU token.", 2 },
		{ "gshare_suspensions_total", "counter",
		  "Times the allocation was evicted by a suspend.", 3 },
		{ "gshare_shares", "gauge",
		  "Guaranteed shares of the allocation (of 100 per GPU).", 4 },
		{ "gshare_weight", "gauge",
		  "Scheduling weight of the allocation.", 5 },
		{ "gshare_memory_used_bytes", "gauge",
		  "Device memory the allocation's job held at the last tick (job-reported).",
		  6 },
		{ "gshare_memory_max_bytes", "gauge",
		  "Most device memory the allocation's job held at once.", 7 },
		{ "gshare_memory_limit_bytes", "gauge",
		  "Device memory limit of the allocation (0: none).", 8 },
		{ "gshare_memory_nvml_bytes", "gauge",
		  "Device memory NVML sees the allocation's attached process hold (real GPUs; 0: none or not known).",
		  9 },
	};
	const struct gs_acct_view *v = NULL;
	const struct gs_acct_hist *h = NULL;
	unsigned nv = 0, nh = 0;
	char job[GS_LABEL_MAX * 10], user[GS_LABEL_MAX * 2 + 1];

	if (acct != NULL) {
		nv = gs_acct_allocs(acct, &v);
		nh = gs_acct_hists(acct, &h);
	}
	for (size_t k = 0; k < sizeof(pa) / sizeof(pa[0]); k++) {
		family(b, pa[k].name, pa[k].type, pa[k].help);
		for (unsigned i = 0; i < nv; i++) {
			const struct gs_store_alloc *r = &v[i].row;
			double val = 0;
			uint64_t bytes = 0;

			job_label(&r->labels, job, sizeof(job));
			esc(user, sizeof(user), r->labels.user);
			if (pa[k].kind >= 6) {
				bytes = pa[k].kind == 6 ? v[i].mem_used :
					pa[k].kind == 7 ? r->tot.mem_max :
					pa[k].kind == 8 ? r->mem_limit :
					v[i].mem_nvml;
				gs_mbuf_printf(b,
					       "%s{alloc=\"%" PRIu64 "\",job=\"%s\",user=\"%s\",gpu=\"%d\"} %" PRIu64 "\n",
					       pa[k].name, r->agent_id, job,
					       user, r->gpu, bytes);
				continue;
			}
			switch (pa[k].kind) {
			case 0: val = sec(r->tot.gpu_ns); break;
			case 1: val = sec(r->tot.share_ns); break;
			case 2: val = sec(r->tot.held_ns); break;
			case 3: val = (double)r->tot.suspensions; break;
			case 4: val = r->shares; break;
			default: val = r->weight; break;
			}
			gs_mbuf_printf(b,
				       "%s{alloc=\"%" PRIu64 "\",job=\"%s\",user=\"%s\",gpu=\"%d\"} %.9g\n",
				       pa[k].name, r->agent_id, job, user,
				       r->gpu, val);
		}
	}
	family(b, "gshare_active_allocations", "gauge",
	       "Allocations busy (waiting or running) during the last tick, per GPU.");
	family(b, "gshare_allocations", "gauge",
	       "Open allocations per GPU.");
	for (unsigned g = 0; g < nh; g++) {
		unsigned act = 0, open = 0;

		for (unsigned i = 0; i < nv; i++)
			if (v[i].row.gpu == h[g].gpu) {
				open++;
				act += v[i].active;
			}
		gs_mbuf_printf(b, "gshare_active_allocations{gpu=\"%d\"} %u\n",
			       h[g].gpu, act);
		gs_mbuf_printf(b, "gshare_allocations{gpu=\"%d\"} %u\n",
			       h[g].gpu, open);
	}
	family(b, "gshare_eviction_latency_seconds", "histogram",
	       "Time from a suspend request to the job's kernels leaving the GPU.");
	for (unsigned g = 0; g < nh; g++) {
		uint64_t cum = 0;

		for (unsigned i = 0; i < GS_ACCT_EVICT_BUCKETS; i++) {
			cum += h[g].count[i];
			gs_mbuf_printf(b,
				       "gshare_eviction_latency_seconds_bucket{gpu=\"%d\",le=\"%g\"} %" PRIu64 "\n",
				       h[g].gpu, gs_acct_evict_bounds[i], cum);
		}
		cum += h[g].count[GS_ACCT_EVICT_BUCKETS];
		gs_mbuf_printf(b,
			       "gshare_eviction_latency_seconds_bucket{gpu=\"%d\",le=\"+Inf\"} %" PRIu64 "\n"
			       "gshare_eviction_latency_seconds_sum{gpu=\"%d\"} %.9g\n"
			       "gshare_eviction_latency_seconds_count{gpu=\"%d\"} %" PRIu64 "\n",
			       h[g].gpu, cum, h[g].gpu, sec(h[g].sum_ns),
			       h[g].gpu, h[g].n);
	}
	if (st != NULL) {
		family(b, "gshare_agent_loop_lag_seconds", "gauge",
		       "How late the agent's last accounting tick ran.");
		gs_mbuf_printf(b, "gshare_agent_loop_lag_seconds %.9g\n",
			       sec(st->loop_lag_ns));
		family(b, "gshare_agent_loop_lag_max_seconds", "gauge",
		       "Worst accounting tick lateness since the agent started.");
		gs_mbuf_printf(b, "gshare_agent_loop_lag_max_seconds %.9g\n",
			       sec(st->loop_lag_max_ns));
		family(b, "gshare_agent_clients", "gauge",
		       "Clients connected to the agent socket.");
		gs_mbuf_printf(b, "gshare_agent_clients %u\n", st->clients);
		family(b, "gshare_store_writes_total", "counter",
		       "Tick batches committed to the usage store.");
		gs_mbuf_printf(b, "gshare_store_writes_total %" PRIu64 "\n",
			       st->store_writes);
		family(b, "gshare_store_errors_total", "counter",
		       "Failed tries to commit a tick batch to the usage store (each is tried again until it commits).");
		gs_mbuf_printf(b, "gshare_store_errors_total %" PRIu64 "\n",
			       st->store_errors);
		family(b, "gshare_store_behind_seconds", "gauge",
		       "Age of the oldest usage not yet committed to the usage store (0: all written; grows while the disk fails or stalls).");
		gs_mbuf_printf(b, "gshare_store_behind_seconds %.9g\n",
			       sec(st->store_behind_ns));
		family(b, "gshare_store_write_seconds_total", "counter",
		       "Time spent in usage store transactions.");
		gs_mbuf_printf(b, "gshare_store_write_seconds_total %.9g\n",
			       sec(st->store_write_ns_sum));
		family(b, "gshare_store_write_last_seconds", "gauge",
		       "Duration of the last usage store transaction.");
		gs_mbuf_printf(b, "gshare_store_write_last_seconds %.9g\n",
			       sec(st->store_write_ns_last));
		family(b, "gshare_store_purged_samples_total", "counter",
		       "Samples removed by the retention purge.");
		gs_mbuf_printf(b, "gshare_store_purged_samples_total %" PRIu64 "\n",
			       st->store_purged);
		unman_families(b, st);
	}
	if (st != NULL && st->spool_watched) {
		family(b, "gshare_spool_pending_records", "gauge",
		       "Records in watch_spool not yet taken (Slurm job "
		       "totals waiting for slurmdbd).");
		gs_mbuf_printf(b, "gshare_spool_pending_records %u\n",
			       st->spool_pending);
		family(b, "gshare_spool_oldest_seconds", "gauge",
		       "Age of the oldest record in watch_spool (0: none).");
		gs_mbuf_printf(b, "gshare_spool_oldest_seconds %" PRIu64 "\n",
			       st->spool_oldest_s);
	}
	if (b->oom)
		return gs_error_set(err, GS_ENOMEM, "metrics: out of memory");
	return 0;
}

void gs_metrics_spool_scan(const char *dir, struct gs_agent_stats *st)
{
	struct dirent *de;
	struct stat sb;
	time_t now = time(NULL);
	DIR *d;

	st->spool_watched = dir[0] != '\0';
	st->spool_pending = 0;
	st->spool_oldest_s = 0;
	if (!st->spool_watched || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) <
			    0 ||
		    !S_ISREG(sb.st_mode))
			continue;
		st->spool_pending++;
		if (now > sb.st_mtime &&
		    (uint64_t)(now - sb.st_mtime) > st->spool_oldest_s)
			st->spool_oldest_s = (uint64_t)(now - sb.st_mtime);
	}
	closedir(d);
}

/* ---- server ---- */

struct conn {
	int fd;			/* -1: free slot */
	uint64_t since_ms;
	char req[REQ_MAX];
	size_t rlen;
	struct gs_mbuf out;
	size_t off;		/* bytes of out already sent */
	int writing;
};

struct gs_metrics {
	int ep, lfd;
	uint16_t port;
	char path[108];		/* Unix socket ("": TCP) */
	const struct gs_acct *acct;
	const struct gs_agent_stats *st;
	struct conn conns[GS_METRICS_MAX_CONN];
	uint64_t requests;
};

const char *
gs_metrics_unix_path(const char *addr)
{
	return strncmp(addr, "unix:", 5) == 0 ? addr + 5 : NULL;
}

int
gs_metrics_parse_addr(const char *addr, char *host, size_t hostlen,
		      uint16_t *port, struct gs_error *err)
{
	const char *colon, *h = addr, *path = gs_metrics_unix_path(addr);
	size_t hl;
	char *end;
	unsigned long p;

	if (path != NULL) {
		if (path[0] != '/')
			return gs_error_set(err, GS_EINVAL,
					    "metrics address '%s': the socket "
					    "path must be absolute", addr);
		if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)
		    || strlen(path) >= hostlen)
			return gs_error_set(err, GS_EINVAL,
					    "metrics address '%s': path too "
					    "long", addr);
		memcpy(host, path, strlen(path) + 1);
		*port = 0;
		return 0;
	}
	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');

		if (rb == NULL || rb[1] != ':')
			return gs_error_set(err, GS_EINVAL,
					    "metrics address '%s': expected [addr]:port",
					    addr);
		h = addr + 1;
		hl = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (colon == NULL)
			return gs_error_set(err, GS_EINVAL,
					    "metrics address '%s': expected host:port",
					    addr);
		hl = (size_t)(colon - addr);
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno || p > 65535)
		return gs_error_set(err, GS_EINVAL,
				    "metrics address '%s': bad port", addr);
	if (hl == 0) {
		h = "127.0.0.1";
		hl = strlen(h);
	}
	if (hl >= hostlen)
		return gs_error_set(err, GS_EINVAL,
				    "metrics address '%s': host too long", addr);
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static int
listen_on(const char *host, uint16_t port, uint16_t *bound,
	  struct gs_error *err)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, host,
		      &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		sl = sizeof(*s4);
	} else if (inet_pton(AF_INET6, host,
			     &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		sl = sizeof(*s6);
	} else {
		return gs_error_set(err, GS_EINVAL,
				    "metrics address: '%s' is not an IP address",
				    host);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "metrics: socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		gs_error_errno(err, GS_EIO, "metrics: bind %s:%u", host, port);
		goto out_close;
	}
	if (listen(fd, 64) < 0) {
		gs_error_errno(err, GS_EIO, "metrics: listen");
		goto out_close;
	}
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		gs_error_errno(err, GS_EIO, "metrics: getsockname");
		goto out_close;
	}
	*bound = ntohs(ss.ss_family == AF_INET ?
		       ((struct sockaddr_in *)&ss)->sin_port :
		       ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
out_close:
	close(fd);
	return -1;
}

/* A Unix socket at path, mode 0600 until gs_metrics_grant.  A socket
 * file left there (an agent that was killed) is replaced; anything else
 * is refused. */
static int
listen_unix(const char *path, struct gs_error *err)
{
	struct sockaddr_un sa;
	struct stat st;
	mode_t old;
	int fd, rc;

	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return gs_error_set(err, GS_EIO, "metrics: %s exists "
					    "and is not a socket", path);
		if (unlink(path) < 0)
			return gs_error_errno(err, GS_EIO,
					      "metrics: unlink %s", path);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "metrics: socket");
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0) {
		gs_error_errno(err, GS_EIO, "metrics: bind %s", path);
		goto out_close;
	}
	if (listen(fd, 64) < 0) {
		gs_error_errno(err, GS_EIO, "metrics: listen");
		unlink(path);
		goto out_close;
	}
	return fd;
out_close:
	close(fd);
	return -1;
}

int
gs_metrics_grant(struct gs_metrics *m, mode_t mode, gid_t gid,
		 struct gs_error *err)
{
	if (m->path[0] == '\0')
		return 0;
	if (gid != (gid_t)-1 && chown(m->path, (uid_t)-1, gid) < 0)
		return gs_error_errno(err, GS_EIO, "metrics: chown %s",
				      m->path);
	if (chmod(m->path, mode) < 0)
		return gs_error_errno(err, GS_EIO, "metrics: chmod %s",
				      m->path);
	return 0;
}

int
gs_metrics_new(const char *addr, const struct gs_acct *acct,
	       const struct gs_agent_stats *st, struct gs_metrics **out,
	       struct gs_error *err)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct gs_metrics *m;
	char host[128];
	uint16_t port;

	if (gs_metrics_parse_addr(addr, host, sizeof(host), &port, err) < 0)
		return -1;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return gs_error_set(err, GS_ENOMEM, "metrics: out of memory");
	m->acct = acct;
	m->st = st;
	m->lfd = -1;
	for (int i = 0; i < GS_METRICS_MAX_CONN; i++)
		m->conns[i].fd = -1;
	m->ep = epoll_create1(EPOLL_CLOEXEC);
	if (m->ep < 0) {
		gs_error_errno(err, GS_EIO, "metrics: epoll_create1");
		goto out_free;
	}
	if (gs_metrics_unix_path(addr) != NULL) {
		m->lfd = listen_unix(host, err);
		if (m->lfd >= 0)
			memcpy(m->path, host, strlen(host) + 1);
	} else {
		m->lfd = listen_on(host, port, &m->port, err);
	}
	if (m->lfd < 0)
		goto out_free;
	ev.data.u64 = UINT64_MAX;
	if (epoll_ctl(m->ep, EPOLL_CTL_ADD, m->lfd, &ev) < 0) {
		gs_error_errno(err, GS_EIO, "metrics: epoll_ctl");
		goto out_free;
	}
	*out = m;
	return 0;
out_free:
	gs_metrics_free(m);
	return -1;
}

static void
conn_close(struct gs_metrics *m, struct conn *c)
{
	if (c->fd < 0)
		return;
	epoll_ctl(m->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	gs_mbuf_free(&c->out);
}

void
gs_metrics_free(struct gs_metrics *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < GS_METRICS_MAX_CONN; i++)
		conn_close(m, &m->conns[i]);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->path[0] != '\0')
		unlink(m->path);
	if (m->ep >= 0)
		close(m->ep);
	free(m);
}

int
gs_metrics_fd(const struct gs_metrics *m)
{
	return m->ep;
}

uint16_t
gs_metrics_port(const struct gs_metrics *m)
{
	return m->port;
}

uint64_t
gs_metrics_requests(const struct gs_metrics *m)
{
	return m->requests;
}

static void
accept_all(struct gs_metrics *m, uint64_t now)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct conn *c = NULL;
		int fd;

		fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		for (int i = 0; i < GS_METRICS_MAX_CONN; i++)
			if (m->conns[i].fd < 0) {
				c = &m->conns[i];
				ev.data.u64 = (uint64_t)i;
				break;
			}
		if (c == NULL) {	/* full: refuse rather than queue */
			close(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->since_ms = now;
		if (epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			c->fd = -1;
		}
	}
}

static void conn_write(struct gs_metrics *m, struct conn *c);

static void
respond(struct gs_metrics *m, struct conn *c, int code, const char *reason,
	const char *ctype, const char *body, size_t blen)
{
	struct epoll_event ev = { .events = EPOLLOUT };

	gs_mbuf_printf(&c->out,
		       "HTTP/1.0 %d %s\r\nContent-Type: %s\r\n"
		       "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		       code, reason, ctype, blen);
	if (!c->out.oom && blen)
		gs_mbuf_printf(&c->out, "%.*s", (int)blen, body);
	m->requests++;
	c->writing = 1;
	c->off = 0;
	ev.data.u64 = (uint64_t)(c - m->conns);
	epoll_ctl(m->ep, EPOLL_CTL_MOD, c->fd, &ev);
	conn_write(m, c);	/* usually all fits in the socket buffer */
}

static void
handle_request(struct gs_metrics *m, struct conn *c)
{
	static const char text[] = "text/plain; charset=utf-8";
	char method[16], path[256];
	struct gs_mbuf body = { 0 };
	struct gs_error err;

	if (sscanf(c->req, "%15s %255s", method, path) != 2) {
		respond(m, c, 400, "Bad Request", text, "bad request\n", 12);
		return;
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		respond(m, c, 405, "Method Not Allowed", text,
			"only GET\n", 9);
		return;
	}
	if (strcmp(path, "/metrics") != 0 &&
	    strncmp(path, "/metrics?", 9) != 0) {
		respond(m, c, 404, "Not Found", text,
			"try /metrics\n", 13);
		return;
	}
	if (gs_metrics_render(m->acct, m->st, &body, &err) < 0) {
		gs_mbuf_free(&body);
		respond(m, c, 500, "Internal Server Error", text,
			"out of memory\n", 14);
		return;
	}
	respond(m, c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8",
		strcmp(method, "HEAD") ? body.p : NULL,
		strcmp(method, "HEAD") ? body.len : 0);
	gs_mbuf_free(&body);
}

static void
conn_read(struct gs_metrics *m, struct conn *c)
{
	ssize_t n;

	n = read(c->fd, c->req + c->rlen, sizeof(c->req) - 1 - c->rlen);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(m, c);
		return;
	}
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n"))
		handle_request(m, c);
	else if (c->rlen == sizeof(c->req) - 1)
		respond(m, c, 431, "Request Header Fields Too Large",
			"text/plain", "", 0);
}

static void
conn_write(struct gs_metrics *m, struct conn *c)
{
	ssize_t n;

	while (c->off < c->out.len) {
		n = send(c->fd, c->out.p + c->off, c->out.len - c->off,
			 MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			break;
		c->off += (size_t)n;
	}
	conn_close(m, c);
}

void
gs_metrics_expire(struct gs_metrics *m, uint64_t mono_ms)
{
	for (int i = 0; i < GS_METRICS_MAX_CONN; i++)
		if (m->conns[i].fd >= 0 &&
		    mono_ms - m->conns[i].since_ms > GS_METRICS_IDLE_MS)
			conn_close(m, &m->conns[i]);
}

void
gs_metrics_dispatch(struct gs_metrics *m, uint64_t mono_ms)
{
	struct epoll_event evs[16];
	int n;

	n = epoll_wait(m->ep, evs, 16, 0);
	for (int i = 0; i < n; i++) {
		struct conn *c;

		if (evs[i].data.u64 == UINT64_MAX) {
			accept_all(m, mono_ms);
			continue;
		}
		c = &m->conns[evs[i].data.u64];
		if (c->fd < 0)
			continue;
		if (c->writing)
			conn_write(m, c);
		else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			conn_read(m, c);
	}
	gs_metrics_expire(m, mono_ms);
}
