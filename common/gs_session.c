/*
 * gs_session.c — the job-side host loop (see gs_session.h).
 *
 * A session owns one agent connection (gs_client) attached to one
 * allocation and the control page mapped MAP_SHARED from the fd that came
 * with ATTACHED.  The page's fd is closed once mapped; the mapping stays
 * until gs_session_close.
 *
 * Page discipline: the agent writes the header and control words; this
 * file writes only the counters (and pid/state), each with an atomic
 * release store, and only ever makes counters grow, so the agent's
 * accounting tick can read them at any time without a lock.  Control
 * words are read with acquire loads.
 *
 * Grant time: the agent writes slice_deadline_ns = grant time + slice
 * before it sends TOKEN_GRANT, so the grant time on the agent's clock is
 * slice_deadline_ns - slice_ns; a suspend whose suspend_set_ns is older
 * than that belongs to an earlier grant and yields no eviction latency.
 *
 * Not thread-safe; never prints, never exits.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_proto.h"
#include "gs_session.h"

struct gs_session {
	struct gs_client *c;
	volatile struct gs_ctlpage *page;
	uint64_t alloc_id;
	int holding;		/* a grant is held */
	int wanting;		/* TOKEN_WANT outstanding, no grant yet */
	uint64_t gen;		/* generation of the current/last grant */
	uint64_t slice_ns;
	uint64_t grant_rx_ns;	/* our clock when the grant arrived */
	uint64_t pub_gpu_ns;	/* published by gs_session_progress in */
	uint64_t pub_tasks;	/* the current grant */
	uint64_t pub_held_ns;
};

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define PAGE_LOAD(f) __atomic_load_n(&s->page->f, __ATOMIC_ACQUIRE)
#define PAGE_STORE(f, v) \
	__atomic_store_n(&s->page->f, (v), __ATOMIC_RELEASE)
#define PAGE_ADD(f, v) PAGE_STORE(f, PAGE_LOAD(f) + (v))

int
gs_session_open(const char *sock, uint64_t alloc_id, int timeout_ms,
		struct gs_session **out, struct gs_error *err)
{
	struct gs_session *s = NULL;
	struct gs_client *c = NULL;
	struct stat st;
	void *map = MAP_FAILED;
	volatile struct gs_ctlpage *pg;
	int fd = -1, rv = -1;

	if (out == NULL || alloc_id == 0)
		return gs_error_set(err, GS_EINVAL, "session: %s",
				    out == NULL ? "no output" :
				    "allocation id 0");
	if (gs_client_connect(sock, timeout_ms, &c, err) < 0)
		goto out;
	if (gs_client_attach(c, alloc_id, &fd, NULL, err) < 0)
		goto out_client;
	if (fstat(fd, &st) < 0) {
		gs_error_errno(err, GS_EIO, "control page fstat");
		goto out_fd;
	}
	if (st.st_size < (off_t)GS_CTL_SIZE) {
		gs_error_set(err, GS_EPROTO, "control page of allocation %"
			     PRIu64 " is %jd bytes, want %u", alloc_id,
			     (intmax_t)st.st_size, GS_CTL_SIZE);
		goto out_fd;
	}
	map = mmap(NULL, GS_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED) {
		gs_error_errno(err, GS_EIO, "control page mmap");
		goto out_fd;
	}
	pg = map;
	if (__atomic_load_n(&pg->magic, __ATOMIC_ACQUIRE) != GS_CTL_MAGIC) {
		gs_error_set(err, GS_EPROTO, "control page: bad magic 0x%08x",
			     pg->magic);
		goto out_map;
	}
	if (pg->version != GS_CTL_VERSION) {
		gs_error_set(err, GS_EVERSION, "control page version %u, this "
			     "build speaks %u", pg->version, GS_CTL_VERSION);
		goto out_map;
	}
	if (pg->alloc_id != alloc_id || pg->page_size != GS_CTL_SIZE) {
		gs_error_set(err, GS_EPROTO, "control page is for allocation %"
			     PRIu64 " (size %u), attached %" PRIu64,
			     pg->alloc_id, pg->page_size, alloc_id);
		goto out_map;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		gs_error_set(err, GS_ENOMEM, "session: out of memory");
		goto out_map;
	}
	s->c = c;
	s->page = pg;
	s->alloc_id = alloc_id;
	PAGE_STORE(pid, (uint32_t)getpid());
	PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
	PAGE_STORE(heartbeat_ns, mono_ns());
	close(fd);
	*out = s;
	return 0;

out_map:
	munmap(map, GS_CTL_SIZE);
out_fd:
	close(fd);
out_client:
	gs_client_free(c);
out:
	return rv;
}

/* Parse a decimal allocation id: digits only, no sign, not 0. */
static int
parse_id(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (v[0] < '0' || v[0] > '9')
		return -1;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || x == 0)
		return -1;
	*out = x;
	return 0;
}

int
gs_session_open_env(int timeout_ms, struct gs_session **out,
		    struct gs_error *err)
{
	const char *sock = getenv(GS_ENV_SOCKET);
	const char *alloc = getenv(GS_ENV_ALLOC);
	uint64_t id;

	if (out == NULL)
		return gs_error_set(err, GS_EINVAL, "session: no output");
	if (sock != NULL && sock[0] == '\0')
		sock = NULL;
	if (alloc == NULL || alloc[0] == '\0') {
		if (sock != NULL)
			return gs_error_set(err, GS_EINVAL, "%s is set but %s "
					    "is not", GS_ENV_SOCKET,
					    GS_ENV_ALLOC);
		*out = NULL;	/* standalone */
		return 0;
	}
	if (parse_id(alloc, &id) < 0)
		return gs_error_set(err, GS_EINVAL, "%s='%.64s' is not an "
				    "allocation id", GS_ENV_ALLOC, alloc);
	/* socket unset: the agent's default path */
	return gs_session_open(sock, id, timeout_ms, out, err);
}

void
gs_session_close(struct gs_session *s)
{
	if (s == NULL)
		return;
	if (s->page != NULL) {
		PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
		munmap((void *)s->page, GS_CTL_SIZE);
	}
	/* Closing the connection gives back a token still held. */
	gs_client_free(s->c);
	free(s);
}

volatile struct gs_ctlpage *
gs_session_page(struct gs_session *s)
{
	return s->page;
}

uint64_t
gs_session_alloc_id(const struct gs_session *s)
{
	return s->alloc_id;
}

int
gs_session_holding(const struct gs_session *s)
{
	return s->holding;
}

uint64_t
gs_session_grant_gen(const struct gs_session *s)
{
	return s->gen;
}

uint64_t
gs_session_slice_ns(const struct gs_session *s)
{
	return s->slice_ns;
}

int
gs_session_acquire(struct gs_session *s, struct gs_error *err)
{
	uint64_t gen = 0, slice = 0;
	int r;

	if (s->holding)
		return gs_error_set(err, GS_ESTATE, "acquire: the token of "
				    "allocation %" PRIu64 " is already held",
				    s->alloc_id);
	if (!s->wanting) {
		if (gs_client_token_want(s->c, err) < 0)
			return -1;
		s->wanting = 1;
	}
	PAGE_STORE(state, (uint32_t)GS_CTL_WAITING);
	PAGE_STORE(heartbeat_ns, mono_ns());
	do {
		r = gs_client_wait_grant(s->c, -1, &gen, &slice, err);
		if (r < 0)
			return -1;
	} while (r == 0);
	s->wanting = 0;
	s->holding = 1;
	s->gen = gen;
	s->slice_ns = slice;
	s->grant_rx_ns = mono_ns();
	s->pub_gpu_ns = 0;
	s->pub_tasks = 0;
	s->pub_held_ns = 0;
	PAGE_STORE(state, (uint32_t)GS_CTL_RUNNING);
	PAGE_STORE(heartbeat_ns, s->grant_rx_ns);
	return 0;
}

int
gs_session_progress(struct gs_session *s, uint64_t gpu_ns,
		    uint64_t block_tasks, struct gs_error *err)
{
	uint64_t now = mono_ns(), held;

	if (!s->holding)
		return gs_error_set(err, GS_ESTATE, "progress: allocation %"
				    PRIu64 " holds no token", s->alloc_id);
	held = now > s->grant_rx_ns ? now - s->grant_rx_ns : 0;
	if (gpu_ns > s->pub_gpu_ns) {
		PAGE_ADD(gpu_ns, gpu_ns - s->pub_gpu_ns);
		s->pub_gpu_ns = gpu_ns;
	}
	if (block_tasks > s->pub_tasks) {
		PAGE_ADD(block_tasks, block_tasks - s->pub_tasks);
		s->pub_tasks = block_tasks;
	}
	if (held > s->pub_held_ns) {
		PAGE_ADD(held_ns, held - s->pub_held_ns);
		s->pub_held_ns = held;
	}
	PAGE_STORE(heartbeat_ns, now);
	return 0;
}

/* Eviction latency of this release, 0 when no suspend of this grant. */
static uint64_t
evict_latency(struct gs_session *s, const struct gs_run_result *r,
	      uint32_t reason)
{
	uint64_t set, deadline, grant_at;

	if (reason != GS_REL_SUSPENDED)
		return 0;
	set = PAGE_LOAD(suspend_set_ns);
	deadline = PAGE_LOAD(slice_deadline_ns);
	grant_at = deadline > s->slice_ns ? deadline - s->slice_ns : 0;
	if (set == 0 || set < grant_at || r->exit_ns < set)
		return 0;
	return r->exit_ns - set;
}

int
gs_session_release(struct gs_session *s, const struct gs_run_result *r,
		   struct gs_error *err)
{
	uint32_t reason = r->done ? (uint32_t)GS_REL_IDLE : r->reason;
	uint64_t now = mono_ns(), ev, held;
	uint32_t st;
	int rv;

	if (!s->holding)
		return gs_error_set(err, GS_ESTATE, "release: allocation %"
				    PRIu64 " holds no token", s->alloc_id);
	if (reason > GS_REL_EXIT)
		return gs_error_set(err, GS_EINVAL, "release: reason %u",
				    reason);
	ev = evict_latency(s, r, reason);
	s->holding = 0;
	rv = gs_client_token_release(s->c, s->gen, r->gpu_ns, ev, reason,
				     err);
	/* The work was done either way: count it. */
	held = now > s->grant_rx_ns ? now - s->grant_rx_ns : 0;
	if (r->gpu_ns > s->pub_gpu_ns)
		PAGE_ADD(gpu_ns, r->gpu_ns - s->pub_gpu_ns);
	if (held > s->pub_held_ns)
		PAGE_ADD(held_ns, held - s->pub_held_ns);
	if (r->block_tasks > s->pub_tasks)
		PAGE_ADD(block_tasks, r->block_tasks - s->pub_tasks);
	if (reason == GS_REL_SUSPENDED) {
		PAGE_ADD(suspensions, 1);
		if (ev != 0) {
			PAGE_STORE(last_evict_ns, ev);
			PAGE_ADD(evict_ns_sum, ev);
			if (ev > PAGE_LOAD(evict_ns_max))
				PAGE_STORE(evict_ns_max, ev);
		}
	}
	PAGE_ADD(releases, 1);
	switch (reason) {
	case GS_REL_SUSPENDED:
		st = GS_CTL_WAITING;	/* the agent keeps us waiting */
		s->wanting = 1;
		break;
	case GS_REL_IOWAIT:
		st = GS_CTL_IOWAIT;
		break;
	default:
		st = GS_CTL_IDLE;
		break;
	}
	PAGE_STORE(state, st);
	PAGE_STORE(heartbeat_ns, now);
	return rv;
}

int
gs_session_run(struct gs_session *s, const struct gs_executor *ex,
	       void *ctx, struct gs_error *err)
{
	struct gs_run_result res;
	struct gs_error rerr;

	if (ex == NULL || ex->run == NULL)
		return gs_error_set(err, GS_EINVAL, "session: no executor");
	for (;;) {
		if (!s->holding && gs_session_acquire(s, err) < 0)
			return -1;
		memset(&res, 0, sizeof(res));
		if (ex->run(ctx, s->page, &res, err) < 0) {
			res.done = 0;
			res.reason = GS_REL_EXIT;
			if (res.exit_ns == 0)
				res.exit_ns = mono_ns();
			(void)gs_session_release(s, &res, &rerr);
			return -1;
		}
		if (res.exit_ns == 0)
			res.exit_ns = mono_ns();
		if (gs_session_release(s, &res, err) < 0)
			return -1;
		if (res.done)
			return 0;
		if (res.reason == GS_REL_IOWAIT && ex->wait != NULL &&
		    ex->wait(ctx, err) < 0)
			return -1;
	}
}
