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
 * An extended slice moves the deadline on (and so this bound), but the
 * suspend that ends the grant comes after the last extension.
 *
 * Agent restarts.  When the connection drops (EOF or a send/receive
 * error) the session does not fail: the job keeps running on its own
 * ("standalone": it holds the GPU as if nothing were shared) and the link
 * state becomes GS_SESSION_RECONNECTING.  At each scheduling point
 * (gs_session_acquire, and gs_session_progress for a long hold) it tries
 * to re-attach, at most once per backoff interval (10 ms doubling to 1 s;
 * one try is a connect and an ATTACH with a 250 ms limit, so the job's
 * work is never held up for long).  A standalone hold lasts one
 * SOLO_SLICE: gs_session_progress then sets the page's suspend word itself
 * so the executor comes back to the loop, which tries again.  On success
 * the new control page is marked `resumed` before anything else, then
 * gets the counters of the old one, so the agent's accounting charges the
 * outage once (node-agent/acct.c); the token protocol starts afresh.  If
 * the agent answers that the allocation does not exist (or is not ours)
 * the session stays standalone for good (GS_SESSION_UNMANAGED).
 * Old pages stay mapped until gs_session_close (a runtime may have
 * registered the address with the GPU); gs_session_page_epoch tells a
 * runtime that the page changed.
 *
 * Not thread-safe; never prints, never exits.
 */
#include <poll.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_proto.h"
#include "gs_session.h"

#define BACKOFF_MIN_NS	(10ull * 1000000)
#define BACKOFF_MAX_NS	(1000ull * 1000000)
#define RETRY_TIMEOUT_MS 250
#define SOLO_SLICE_NS	(50ull * 1000000)
#define CHECK_NS	(20ull * 1000000)	/* liveness check period */
#define RETIRED_MAX	8

struct gs_session {
	struct gs_client *c;	/* NULL while the agent is away */
	volatile struct gs_ctlpage *page;
	uint64_t alloc_id;
	int holding;		/* a grant is held */
	int wanting;		/* TOKEN_WANT outstanding, no grant yet */
	uint64_t pend_set;	/* an early release's suspend_set_ns: its
				 * eviction latency comes with
				 * gs_session_evicted (0: none) */
	uint64_t gen;		/* generation of the current/last grant */
	uint64_t slice_ns;
	uint64_t grant_rx_ns;	/* our clock when the grant arrived */
	uint64_t pub_gpu_ns;	/* published by gs_session_progress in */
	uint64_t pub_tasks;	/* the current grant */
	uint64_t pub_held_ns;
	int kept;		/* holding between runs (ex->keep) */
	uint64_t kept_gpu_ns;	/* the kept hold's earlier runs: GPU */
	uint64_t kept_tasks;	/* time and block-tasks */

	char *sock;		/* as given to open (NULL: default) */
	int timeout_ms;
	int link;		/* enum gs_session_link */
	int solo;		/* the current hold is standalone */
	int lost_in_hold;	/* the link dropped during this hold */
	uint64_t solo_deadline_ns;
	uint64_t backoff_ns, next_try_ns, last_check_ns;
	uint64_t epoch, reattaches;
	void *retired[RETIRED_MAX];	/* earlier pages, still mapped */
	unsigned nretired;
	char gpu_uuid[GS_UUID_MAX];	/* the allocation's GPU (ATTACHED) */
	volatile struct gs_mempage *mem;	/* the allocation's memory
						 * page, NULL: none sent */
	uint32_t kind;		/* enum gs_ctl_job_kind, on every page */
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

/* Map and check the control page fd for allocation alloc_id; the fd is
 * closed in every case. */
static int
map_page(int fd, uint64_t alloc_id, volatile struct gs_ctlpage **out,
	 struct gs_error *err)
{
	struct stat st;
	void *map;
	volatile struct gs_ctlpage *pg;

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
	close(fd);
	*out = pg;
	return 0;

out_map:
	munmap(map, GS_CTL_SIZE);
out_fd:
	close(fd);
	return -1;
}

/* Map and check the memory page fd of allocation alloc_id (the fd is
 * closed in every case). */
static int
map_mem(int fd, uint64_t alloc_id, volatile struct gs_mempage **out,
	struct gs_error *err)
{
	struct stat st;
	void *map;
	volatile struct gs_mempage *m;

	if (fstat(fd, &st) < 0 || st.st_size != (off_t)GS_MEM_SIZE) {
		gs_error_set(err, GS_EPROTO, "memory page of allocation %"
			     PRIu64 " is not %u bytes", alloc_id,
			     GS_MEM_SIZE);
		goto out_fd;
	}
	map = mmap(NULL, GS_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (map == MAP_FAILED) {
		gs_error_errno(err, GS_EIO, "memory page mmap");
		goto out_fd;
	}
	m = map;
	if (__atomic_load_n(&m->magic, __ATOMIC_ACQUIRE) != GS_MEM_MAGIC ||
	    m->version != GS_MEM_VERSION || m->alloc_id != alloc_id) {
		gs_error_set(err, GS_EPROTO, "memory page: not allocation %"
			     PRIu64 "'s (magic 0x%08x version %u)", alloc_id,
			     m->magic, m->version);
		munmap(map, GS_MEM_SIZE);
		goto out_fd;
	}
	close(fd);
	*out = m;
	return 0;

out_fd:
	close(fd);
	return -1;
}

/* Keep the GPU UUID of the ATTACHED reply (cut to its field, "" when
 * the agent sent none). */
static void
session_set_gpu(struct gs_session *s, const struct gs_alloc_info *info)
{
	snprintf(s->gpu_uuid, sizeof(s->gpu_uuid), "%s", info->gpu_uuid);
}

int
gs_session_open(const char *sock, uint64_t alloc_id, int timeout_ms,
		struct gs_session **out, struct gs_error *err)
{
	struct gs_session *s = NULL;
	struct gs_client *c = NULL;
	volatile struct gs_ctlpage *pg = NULL;
	struct gs_alloc_info info;
	int fd = -1;

	if (out == NULL || alloc_id == 0)
		return gs_error_set(err, GS_EINVAL, "session: %s",
				    out == NULL ? "no output" :
				    "allocation id 0");
	s = calloc(1, sizeof(*s));
	if (s == NULL || (sock != NULL && (s->sock = strdup(sock)) == NULL)) {
		gs_error_set(err, GS_ENOMEM, "session: out of memory");
		goto out;
	}
	if (gs_client_connect(sock, timeout_ms, &c, err) < 0)
		goto out;
	if (gs_client_attach(c, alloc_id, &fd, &info, err) < 0)
		goto out;
	if (map_page(fd, alloc_id, &pg, err) < 0)
		goto out;
	fd = gs_client_take_mem_fd(c);
	if (fd >= 0 && map_mem(fd, alloc_id, &s->mem, err) < 0) {
		munmap((void *)pg, GS_CTL_SIZE);
		goto out;
	}
	session_set_gpu(s, &info);
	s->c = c;
	s->page = pg;
	s->alloc_id = alloc_id;
	s->timeout_ms = timeout_ms;
	s->link = GS_SESSION_ATTACHED;
	PAGE_STORE(pid, (uint32_t)getpid());
	PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
	PAGE_STORE(heartbeat_ns, mono_ns());
	*out = s;
	return 0;

out:
	gs_client_free(c);
	if (s != NULL)
		free(s->sock);
	free(s);
	return -1;
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
	/* The job ends while the agent is away: one last try (backoff or
	 * not), so that a restarted agent gets the counters of the outage
	 * on a resumed page; the agent reads them at its next tick. */
	if (s->link == GS_SESSION_RECONNECTING && !s->holding) {
		s->next_try_ns = 0;
		(void)gs_session_poll_link(s);
	}
	if (s->page != NULL) {
		PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
		munmap((void *)s->page, GS_CTL_SIZE);
	}
	for (unsigned i = 0; i < s->nretired; i++)
		munmap(s->retired[i], GS_CTL_SIZE);
	if (s->mem != NULL)
		munmap((void *)s->mem, GS_MEM_SIZE);
	/* Closing the connection gives back a token still held. */
	gs_client_free(s->c);
	free(s->sock);
	free(s);
}

void
gs_session_set_kind(struct gs_session *s, uint32_t kind)
{
	s->kind = kind;
	PAGE_STORE(job_kind, kind);
}

volatile struct gs_mempage *
gs_session_mempage(struct gs_session *s)
{
	return s->mem;
}

int
gs_session_link(const struct gs_session *s)
{
	return s->link;
}

uint64_t
gs_session_reattaches(const struct gs_session *s)
{
	return s->reattaches;
}

uint64_t
gs_session_page_epoch(const struct gs_session *s)
{
	return s->epoch;
}

/* An error that means the agent is gone (not a refusal by it). */
static int
link_error(const struct gs_error *e)
{
	return e->code == GS_ECLOSED || e->code == GS_EIO ||
		e->code == GS_ETIMEDOUT;
}

static void
link_lost(struct gs_session *s)
{
	gs_client_free(s->c);
	s->c = NULL;
	s->wanting = 0;
	s->link = GS_SESSION_RECONNECTING;
	s->backoff_ns = BACKOFF_MIN_NS;
	s->next_try_ns = mono_ns();	/* first try at the next point */
}

static void
backoff(struct gs_session *s, uint64_t now)
{
	s->next_try_ns = now + s->backoff_ns;
	s->backoff_ns *= 2;
	if (s->backoff_ns > BACKOFF_MAX_NS)
		s->backoff_ns = BACKOFF_MAX_NS;
}

/* Take over the new page: `resumed` first, then the old counters (only
 * ever growing from the new page's zeros), then switch. */
static void
adopt_page(struct gs_session *s, volatile struct gs_ctlpage *np)
{
	volatile struct gs_ctlpage *op = s->page;

#define CARRY(f) __atomic_store_n(&np->f, \
		__atomic_load_n(&op->f, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE)
	__atomic_store_n(&np->resumed, 1u, __ATOMIC_RELEASE);
	CARRY(gpu_ns);
	CARRY(held_ns);
	CARRY(block_tasks);
	CARRY(suspensions);
	CARRY(last_evict_ns);
	CARRY(evict_ns_sum);
	CARRY(evict_ns_max);
	CARRY(releases);
#undef CARRY
	__atomic_store_n(&np->pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
	__atomic_store_n(&np->job_kind, s->kind, __ATOMIC_RELEASE);
	__atomic_store_n(&np->state, (uint32_t)GS_CTL_IDLE, __ATOMIC_RELEASE);
	__atomic_store_n(&np->heartbeat_ns, mono_ns(), __ATOMIC_RELEASE);
	if (s->nretired == RETIRED_MAX) {
		munmap(s->retired[0], GS_CTL_SIZE);
		memmove(&s->retired[0], &s->retired[1],
			(RETIRED_MAX - 1) * sizeof(s->retired[0]));
		s->nretired--;
	}
	s->retired[s->nretired++] = (void *)op;
	s->page = np;
	s->epoch++;
}

int
gs_session_poll_link(struct gs_session *s)
{
	struct gs_client *c = NULL;
	volatile struct gs_ctlpage *np;
	struct gs_error e;
	uint64_t now = mono_ns();
	int fd = -1, tmo;

	if (s->link != GS_SESSION_RECONNECTING || s->holding ||
	    now < s->next_try_ns)
		return s->link;
	tmo = s->timeout_ms > 0 && s->timeout_ms < RETRY_TIMEOUT_MS ?
		s->timeout_ms : RETRY_TIMEOUT_MS;
	if (gs_client_connect(s->sock, tmo, &c, &e) < 0)
		goto retry;
	if (gs_client_attach(c, s->alloc_id, &fd, NULL, &e) < 0) {
		if (e.code == GS_ENOENT || e.code == GS_EPERM) {
			/* the agent is back without our allocation */
			gs_client_free(c);
			s->link = GS_SESSION_UNMANAGED;
			return s->link;
		}
		goto retry;
	}
	if (map_page(fd, s->alloc_id, &np, &e) < 0)
		goto retry;
	/* the memory page of the first attach stays the one this process
	 * counts in (a ledger keeps it); a restarted agent's is not used */
	fd = gs_client_take_mem_fd(c);
	if (fd >= 0 && s->mem == NULL)
		(void)map_mem(fd, s->alloc_id, &s->mem, &e);
	else if (fd >= 0)
		close(fd);
	gs_client_set_timeout(c, s->timeout_ms);
	adopt_page(s, np);
	s->c = c;
	s->link = GS_SESSION_ATTACHED;
	s->wanting = 0;
	s->reattaches++;
	s->backoff_ns = BACKOFF_MIN_NS;
	return s->link;

retry:
	gs_client_free(c);
	backoff(s, mono_ns());
	return s->link;
}

/* Hold the GPU without an agent: the executor runs on the current page
 * (ours alone now), for one SOLO_SLICE while re-attaching is possible. */
static void
solo_grant(struct gs_session *s)
{
	uint64_t now = mono_ns();

	s->holding = 1;
	s->solo = 1;
	s->lost_in_hold = 0;
	s->wanting = 0;
	s->slice_ns = s->link == GS_SESSION_RECONNECTING ? SOLO_SLICE_NS : 0;
	s->solo_deadline_ns = s->slice_ns ? now + s->slice_ns : UINT64_MAX;
	s->grant_rx_ns = now;
	s->pub_gpu_ns = 0;
	s->pub_tasks = 0;
	s->pub_held_ns = 0;
	PAGE_STORE(slice_deadline_ns, s->slice_ns ? s->solo_deadline_ns : 0);
	PAGE_STORE(suspend, (uint32_t)GS_CTL_RUN);
	PAGE_STORE(state, (uint32_t)GS_CTL_RUNNING);
	PAGE_STORE(heartbeat_ns, now);
}

/* Make the executor leave at its next scheduling point (no agent to do
 * it). */
static void
solo_suspend(struct gs_session *s, uint64_t now)
{
	if (PAGE_LOAD(suspend) == GS_CTL_SUSPEND)
		return;
	PAGE_STORE(suspend_set_ns, now);
	PAGE_STORE(suspend, (uint32_t)GS_CTL_SUSPEND);
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

const char *
gs_session_gpu_uuid(const struct gs_session *s)
{
	return s->gpu_uuid;
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

/* How long acquire polls for a grant it expects at once. */
#define ALONE_SPIN_NS 200000ull

int
gs_session_acquire(struct gs_session *s, struct gs_error *err)
{
	uint64_t gen = 0, slice = 0;
	struct gs_error e;
	int r;

	if (s->holding)
		return gs_error_set(err, GS_ESTATE, "acquire: the token of "
				    "allocation %" PRIu64 " is already held",
				    s->alloc_id);
	if (s->link == GS_SESSION_RECONNECTING)
		(void)gs_session_poll_link(s);
	if (s->link != GS_SESSION_ATTACHED) {
		solo_grant(s);
		return 0;
	}
	if (!s->wanting) {
		if (gs_client_token_want(s->c, &e) < 0) {
			if (!link_error(&e)) {
				*err = e;
				return -1;
			}
			link_lost(s);
			solo_grant(s);
			return 0;
		}
		s->wanting = 1;
		/* nobody else holds or wants the GPU: the grant comes at
		 * once; look for it without sleeping (a wake-up on an idle
		 * node costs tens of us) */
		if (s->page != NULL && gs_ctl_alone(s->page))
			gs_client_expect_grant(s->c, ALONE_SPIN_NS);
	}
	PAGE_STORE(state, (uint32_t)GS_CTL_WAITING);
	PAGE_STORE(heartbeat_ns, mono_ns());
	do {
		r = gs_client_wait_grant(s->c, -1, &gen, &slice, &e);
		if (r < 0) {
			if (!link_error(&e)) {
				*err = e;
				return -1;
			}
			link_lost(s);
			solo_grant(s);
			return 0;
		}
	} while (r == 0);
	s->wanting = 0;
	s->holding = 1;
	s->solo = 0;
	s->lost_in_hold = 0;
	s->gen = gen;
	s->slice_ns = slice;
	s->grant_rx_ns = mono_ns();
	s->last_check_ns = s->grant_rx_ns;
	s->pub_gpu_ns = 0;
	s->pub_tasks = 0;
	s->pub_held_ns = 0;
	PAGE_STORE(state, (uint32_t)GS_CTL_RUNNING);
	PAGE_STORE(heartbeat_ns, s->grant_rx_ns);
	return 0;
}

/* While holding a grant of the agent: is the connection still there?
 * A cheap poll, at most every CHECK_NS. */
static void
check_link(struct gs_session *s, uint64_t now)
{
	struct pollfd pfd;

	if (s->c == NULL || now - s->last_check_ns < CHECK_NS)
		return;
	s->last_check_ns = now;
	pfd.fd = gs_client_fd(s->c);
	pfd.events = POLLRDHUP;
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) > 0 &&
	    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
		link_lost(s);
		s->lost_in_hold = 1;
		solo_suspend(s, now);
	}
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
	/* the runs before this one in a kept hold */
	gpu_ns += s->kept_gpu_ns;
	block_tasks += s->kept_tasks;
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
	if (s->solo) {
		if (now >= s->solo_deadline_ns)
			solo_suspend(s, now);
	} else {
		check_link(s, now);
	}
	return 0;
}

/* When the suspend of this grant was written (0: none, or not this
 * grant's, or later than t). */
static uint64_t
suspend_set(struct gs_session *s, uint64_t t)
{
	uint64_t set, deadline, grant_at;

	set = PAGE_LOAD(suspend_set_ns);
	deadline = PAGE_LOAD(slice_deadline_ns);
	grant_at = deadline > s->slice_ns ? deadline - s->slice_ns : 0;
	if (set == 0 || set < grant_at || t < set)
		return 0;
	return set;
}

/* One eviction latency into the page's counters. */
static void
count_evict(struct gs_session *s, uint64_t ev)
{
	PAGE_STORE(last_evict_ns, ev);
	PAGE_ADD(evict_ns_sum, ev);
	if (ev > PAGE_LOAD(evict_ns_max))
		PAGE_STORE(evict_ns_max, ev);
}

void
gs_session_evicted(struct gs_session *s, uint64_t exit_ns)
{
	if (s->pend_set != 0 && exit_ns > s->pend_set)
		count_evict(s, exit_ns - s->pend_set);
	s->pend_set = 0;
}

int
gs_session_release(struct gs_session *s, const struct gs_run_result *r,
		   struct gs_error *err)
{
	uint32_t reason = r->done ? (uint32_t)GS_REL_IDLE : r->reason;
	uint64_t now = mono_ns(), ev = 0, held;
	/* with the earlier runs of a kept hold */
	uint64_t gpu = r->gpu_ns + s->kept_gpu_ns;
	uint64_t tasks = r->block_tasks + s->kept_tasks;
	struct gs_error e;
	uint32_t st;
	int rv = 0, local, counted;

	if (!s->holding)
		return gs_error_set(err, GS_ESTATE, "release: allocation %"
				    PRIu64 " holds no token", s->alloc_id);
	if (reason > GS_REL_EXIT)
		return gs_error_set(err, GS_EINVAL, "release: reason %u",
				    reason);
	/* a suspend that the session set itself (standalone, or the agent
	 * just vanished) is no eviction */
	local = s->solo || s->lost_in_hold;
	counted = reason == GS_REL_SUSPENDED && !local;
	s->pend_set = 0;
	if (counted) {
		uint64_t set = suspend_set(s, r->exit_ns);

		/* released before the work left (early): the latency is
		 * known only then (gs_session_evicted) */
		if (r->released)
			s->pend_set = set;
		else if (set != 0)
			ev = r->exit_ns - set;
	}
	s->holding = 0;
	if (s->c != NULL && !s->solo) {
		if (gs_client_token_release(s->c, s->gen, gpu, ev, reason,
					    &e) < 0) {
			if (link_error(&e)) {
				link_lost(s);
			} else {
				*err = e;
				rv = -1;
			}
		}
	}
	/* The work was done either way: count it. */
	held = now > s->grant_rx_ns ? now - s->grant_rx_ns : 0;
	if (gpu > s->pub_gpu_ns)
		PAGE_ADD(gpu_ns, gpu - s->pub_gpu_ns);
	if (held > s->pub_held_ns)
		PAGE_ADD(held_ns, held - s->pub_held_ns);
	if (tasks > s->pub_tasks)
		PAGE_ADD(block_tasks, tasks - s->pub_tasks);
	if (counted) {
		PAGE_ADD(suspensions, 1);
		if (ev != 0)
			count_evict(s, ev);
	}
	PAGE_ADD(releases, 1);
	switch (reason) {
	case GS_REL_SUSPENDED:
		st = GS_CTL_WAITING;	/* the agent keeps us waiting */
		s->wanting = s->c != NULL && !local;
		break;
	case GS_REL_IOWAIT:
		st = GS_CTL_IOWAIT;
		break;
	default:
		st = GS_CTL_IDLE;
		break;
	}
	s->solo = 0;
	s->lost_in_hold = 0;
	s->kept = 0;
	s->kept_gpu_ns = 0;
	s->kept_tasks = 0;
	PAGE_STORE(state, st);
	PAGE_STORE(heartbeat_ns, now);
	return rv;
}

int
gs_session_kept(const struct gs_session *s)
{
	return s->kept;
}

int
gs_session_give_back(struct gs_session *s, struct gs_error *err)
{
	struct gs_run_result r;

	if (!s->kept)
		return 0;
	memset(&r, 0, sizeof(r));
	r.done = 1;		/* the runs' totals are added by release */
	r.exit_ns = mono_ns();
	return gs_session_release(s, &r, err);
}

/* May the token stay with us between runs?  Only while attached to a
 * live agent (a standalone hold has nobody to give it back to). */
static int
keepable(const struct gs_session *s)
{
	return s->holding && s->c != NULL && !s->solo && !s->lost_in_hold &&
	       s->link == GS_SESSION_ATTACHED;
}

int
gs_session_unwant(struct gs_session *s, struct gs_error *err)
{
	struct gs_run_result r;
	struct gs_error e;

	if (s->holding)
		return gs_error_set(err, GS_ESTATE, "unwant: allocation %"
				    PRIu64 " holds the token", s->alloc_id);
	if (!s->wanting || s->c == NULL ||
	    s->link != GS_SESSION_ATTACHED) {
		s->wanting = 0;
		return 0;
	}
	if (gs_client_token_unwant(s->c, &e) == 0) {
		s->wanting = 0;
		PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
		return 0;
	}
	if (link_error(&e)) {
		link_lost(s);
		s->wanting = 0;
		return 0;
	}
	if (e.code != GS_EUNSUPP) {
		*err = e;
		return -1;
	}
	/* an agent before 1.7: take the grant when it comes and give it
	 * straight back, idle */
	if (gs_session_acquire(s, err) < 0)
		return -1;
	memset(&r, 0, sizeof(r));
	r.done = 1;
	r.exit_ns = mono_ns();
	return gs_session_release(s, &r, err);
}

int
gs_session_run(struct gs_session *s, const struct gs_executor *ex,
	       void *ctx, struct gs_error *err)
{
	struct gs_run_result res;
	struct gs_error rerr;

	if (ex == NULL || ex->run == NULL)
		return gs_error_set(err, GS_EINVAL, "session: no executor");
	/* a kept token the agent wants back meanwhile, or another
	 * allocation came: give it back and ask anew, in line */
	if (s->kept && (PAGE_LOAD(suspend) == GS_CTL_SUSPEND ||
			!gs_ctl_alone(s->page) || !keepable(s)) &&
	    gs_session_give_back(s, err) < 0)
		return -1;
	for (;;) {
		if (!s->holding && gs_session_acquire(s, err) < 0)
			return -1;
		if (s->kept) {
			s->kept = 0;
			PAGE_STORE(state, (uint32_t)GS_CTL_RUNNING);
		}
		memset(&res, 0, sizeof(res));
		if (ex->run(ctx, s->page, &res, err) < 0) {
			res.done = 0;
			res.reason = GS_REL_EXIT;
			if (res.exit_ns == 0)
				res.exit_ns = mono_ns();
			if (s->holding)
				(void)gs_session_release(s, &res, &rerr);
			else
				(void)gs_session_unwant(s, &rerr);
			return -1;
		}
		if (res.exit_ns == 0)
			res.exit_ns = mono_ns();
		if (res.done && !res.released && keepable(s) &&
		    ex->keep != NULL && ex->keep(ctx, s->page)) {
			/* the release reports the hold's total */
			s->kept = 1;
			s->kept_gpu_ns += res.gpu_ns;
			s->kept_tasks += res.block_tasks;
			PAGE_STORE(state, (uint32_t)GS_CTL_IDLE);
			PAGE_STORE(heartbeat_ns, mono_ns());
			return 0;
		}
		if (res.released && !s->holding) {
			/* the executor gave the token back itself, before
			 * its work had left the GPU, and found none left */
			if (res.done && gs_session_unwant(s, err) < 0)
				return -1;
		} else if (gs_session_release(s, &res, err) < 0) {
			return -1;
		}
		if (res.done)
			return 0;
		if (res.reason == GS_REL_IOWAIT && ex->wait != NULL &&
		    ex->wait(ctx, err) < 0)
			return -1;
	}
}
