/*
 * agent.c — gshared's core: connections, requests, permissions,
 * admission, the token protocol and control pages (see agent.h).
 *
 * Connections.  Each client is one non-blocking socket with a read buffer
 * (grown up to one maximal frame) and a write buffer.  Peers are
 * identified once, at accept, with SO_PEERCRED.  A frame that cannot be
 * decoded (bad magic, foreign major, bad length, malformed payload) gets
 * an ERROR and the connection is closed once the ERROR is written; an
 * unknown type gets an ERROR and the connection goes on.  A client that
 * lets more than OUT_MAX bytes of replies pile up is dropped.
 *
 * Permissions (DESIGN §2): root creates/closes/labels allocations,
 * changes weights and priorities and drains GPUs; a job attaches only to
 * an allocation of its own uid (root to any), or to one root created with
 * GS_ALLOC_ANY_UID; STATUS shows non-root callers only their own
 * allocations.
 *
 * GPU health: a GPU is unhealthy while the NVML health worker (health.c,
 * through gs_agent_gpu_health: its checks, or a critical XID until root
 * clears it) or an injected fault (GPU_FAULT, simulated GPUs only) says
 * so; it then takes no new allocations (GS_EUNHEALTHY),
 * existing ones keep running.
 *
 * Token protocol.  Each attached connection of an allocation is one of
 * its job's processes (up to GS_ALLOC_MAX_ATTACH), with its own control
 * page (attachment slot); the allocation holds the token.  TOKEN_WANT →
 * gs_sched_want (or, while a grant runs, a TOKEN_GRANT of that grant at
 * once); the scheduler's actions become page writes into every page of
 * the allocation and TOKEN_GRANT events to every process that wants:
 * GRANT writes grant_gen and slice_deadline_ns, clears suspend and sends
 * the event; SUSPEND stores suspend_set_ns, then suspend = 1 (release
 * order, so a job that sees the flag sees the time); ESCALATE holds the
 * allocation back or SIGKILLs the attached pids.  The allocation's token
 * goes back to the scheduler once every granted process released or is
 * gone, billed per grant (gs_acct_bill_gpu).  When a process's connection
 * closes, what it held is released (charged for the time held) and the
 * others go on; with none left the allocation is idle with no process;
 * it stays until root closes it, and a new process of the owner may
 * attach again and gets a free slot's page (counters keep growing).
 *
 * Restarts: the allocation table is saved to <state_dir>/allocs after
 * every create, close, weight/priority and label change, and restored at
 * start-up with the same ids (state_restore; docs/agent.md, Restarts).
 * Those requests are "durable requests": the table they would leave is
 * written by the writer thread (durable.c) before anything changes, and a
 * failed write refuses the request with nothing changed; the loop does
 * not wait for the disk (see the section of that name below).
 *
 * Paging: STATUS_REPLY must fit one frame (64 KiB: ~200 allocations with
 * short labels, ~85 with every label at its longest); the reply lists
 * the allocations after the request's after_id that fit, ascending, and
 * sets `more` when some did not (gs_client_status asks again).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "acct.h"
#include "agent.h"
#include "connlimit.h"
#include "durable.h"
#include "gs_log.h"
#include "memquota.h"
#include "mps.h"
#include "space_agent.h"
#include "state.h"

#define RBUF_INIT	4096u
#define OUT_MAX		(1u << 20)	/* unsent reply bytes per client */
#define OUT_KEEP	(64u * 1024u)	/* buffer kept once drained */
#define READ_BUDGET	(256u * 1024u)
#define MAX_ACTS	16
#define WEIGHT_MAX	1000000u

struct gs_conn {
	struct gs_agent *ag;
	int fd;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	uint8_t *rbuf;
	size_t rlen, rcap;
	struct gs_wbuf out;	/* replies; out.data[out_off..len) unsent */
	size_t out_off;
	int pass_fd;		/* fd to send with the byte at pass_off */
	int pass_mem;		/* sent before it, same message, -1: none */
	size_t pass_off;	/* index into out.data */
	int dropped;		/* over OUT_MAX: nothing more is queued */
	int pollout;		/* EPOLLOUT registered */
	int closing;		/* close once out is written */
	struct gs_alloc *alloc;	/* attached allocation */
	unsigned slot;		/* its attachment slot (alloc->att[slot]) */
	struct gs_conn *prev, *next;
};

struct gs_agent {
	struct gs_agent_config cfg;
	char *cfg_path;
	struct gs_loop *loop;
	int lfd;
	int sfd;
	int sock_made;		/* we created the socket file */
	struct gs_gpu gpus[GS_MAX_GPUS];
	uint32_t ngpus;
	struct gs_alloc_table *allocs;
	struct gs_conn *conns;
	unsigned nconns;
	struct gs_connlimit *climit;	/* per-uid counts, accept rule */
	int spare_fd;		/* given up to accept-and-refuse at EMFILE */
	int stopping;
	uint64_t refused_logged;
	uint64_t dropped_logged;	/* clients dropped at OUT_MAX */
	char state_path[512];	/* the allocation table file */
	uint64_t state_seq;	/* generation of its last load or save */
	int state_old_file;	/* an older agent's file still to remove */
	uint64_t state_failed;	/* saves that failed in a row */
	struct gs_durable *dur;	/* the table's writer thread */
	struct dop *dq_head, *dq_tail;	/* durable requests, in order; the
					 * head's table is being written */
	struct dop *uwait;	/* CLOSEs waiting for their usage row */
	uint64_t usage_queued;	/* tick carrying the last final row */
	uint64_t usage_committed;	/* last tick the store committed */
	int usage_stalled;	/* a close gave up waiting for a commit */
	struct gs_conn sink;	/* replies for requesters that left */
	char warning[GS_WARNING_MAX];	/* STATUS: gs_agent_set_warning */
	/* gs_agent_close_totals: the usage row of the allocation closing */
	uint64_t fin_id, fin_gpu_ns, fin_held_ns;
	uint64_t *loaded_ids;	/* every id of the table loaded at start */
	unsigned nloaded;
	uint64_t loaded_next_id;	/* its id counter; 0: none loaded */
	struct gs_mps *mps;	/* space mode's MPS daemons (mps.c) */
	struct gs_space_agent *space;	/* its planner (space_agent.c) */
};

static void conn_close(struct gs_conn *c);
static void conn_flush(struct gs_conn *c);
static void gpu_step(struct gs_agent *ag, struct gs_gpu *g, uint64_t now);

struct gs_loop *gs_agent_loop(struct gs_agent *ag)
{
	return ag->loop;
}

struct gs_alloc_table *gs_agent_allocs(struct gs_agent *ag)
{
	return ag->allocs;
}

struct gs_mps *gs_agent_mps(struct gs_agent *ag)
{
	return ag->mps;
}

const struct gs_agent_config *gs_agent_config(const struct gs_agent *ag)
{
	return &ag->cfg;
}

uint32_t gs_agent_ngpus(const struct gs_agent *ag)
{
	return ag->ngpus;
}

unsigned gs_agent_nclients(const struct gs_agent *ag)
{
	return ag->nconns;
}

struct gs_gpu *gs_agent_gpu(struct gs_agent *ag, uint32_t i)
{
	return i < ag->ngpus ? &ag->gpus[i] : NULL;
}

const char *gs_agent_gpu_why(const struct gs_gpu *g)
{
	if (g->sim_fault)
		return "fault injected into a simulated GPU";
	if (g->nvml_bad)
		return g->nvml_why;
	if (g->xid_bad)
		return g->xid_why;
	if (g->mps_bad)
		return "MPS control daemon keeps dying";
	return "";
}

void gs_agent_gpu_health(struct gs_agent *ag, uint32_t i,
			 enum gs_health_source src, int ok, const char *why)
{
	struct gs_gpu *g;
	int was;

	if (i >= ag->ngpus)
		return;
	g = &ag->gpus[i];
	was = g->healthy;
	if (src == GS_HEALTH_FAULT) {
		g->sim_fault = !ok;
	} else if (src == GS_HEALTH_XID) {
		g->xid_bad = !ok;
		snprintf(g->xid_why, sizeof(g->xid_why), "%s",
			 ok || why == NULL ? "" : why);
	} else if (src == GS_HEALTH_MPS) {
		g->mps_bad = !ok;
	} else {
		g->nvml_bad = !ok;
		snprintf(g->nvml_why, sizeof(g->nvml_why), "%s",
			 ok || why == NULL ? "" : why);
	}
	g->healthy = !g->sim_fault && !g->nvml_bad && !g->xid_bad &&
		     !g->mps_bad;
	if (was && !g->healthy)
		log_warnx("gpu %d %s: unhealthy (%s); no new allocations",
			  g->d.index, g->d.uuid, gs_agent_gpu_why(g));
	else if (!was && g->healthy)
		log_info("gpu %d %s: healthy again", g->d.index, g->d.uuid);
}

static uint64_t unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *policy_name(uint32_t p)
{
	switch (p) {
	case GS_POLICY_PRIORITY: return "priority";
	case GS_POLICY_DYNPRIO: return "dynamic-priority";
	default: return "wfq";
	}
}

static void sched_params_of(const struct gs_agent_config *c,
			    struct gs_sched_params *p)
{
	gs_sched_params_default(p);
	p->policy = c->policy;
	p->slice_ns = c->slice_ns;
	p->grace_ns = c->grace_ns;
	p->escalation = c->escalation;
	p->aging_ns = c->aging_ns ? c->aging_ns : c->slice_ns;
	p->idle_grace_ns = c->idle_grace_ns;
	p->shares_total = c->shares_per_gpu;
}

static struct gs_gpu *gpu_of(struct gs_agent *ag, const struct gs_alloc *a)
{
	uint32_t i;

	for (i = 0; i < ag->ngpus; i++)
		if (ag->gpus[i].d.index == a->gpu)
			return &ag->gpus[i];
	return NULL;
}

static struct gs_gpu *gpu_by_index(struct gs_agent *ag, int32_t index)
{
	uint32_t i;

	for (i = 0; i < ag->ngpus; i++)
		if (ag->gpus[i].d.index == index)
			return &ag->gpus[i];
	return NULL;
}

/* ---- the allocation table file (state.h) ---- */

/* The table file's record of allocation a. */
static void state_entry(struct gs_agent *ag, const struct gs_alloc *a,
			struct gs_state_alloc *sa)
{
	struct gs_gpu *g = gpu_by_index(ag, a->gpu);

	memset(sa, 0, sizeof(*sa));
	sa->id = a->id;
	sa->gpu = a->gpu;
	if (g != NULL)
		snprintf(sa->gpu_uuid, sizeof(sa->gpu_uuid), "%s", g->d.uuid);
	sa->shares = a->shares;
	sa->weight = a->weight;
	sa->priority = a->priority;
	sa->mode = a->mode;
	sa->uid = a->uid;
	sa->flags = a->flags;
	sa->created_unix_ns = a->created_unix_ns;
	sa->labels = a->labels;
	sa->mem_req = a->mem_req;
}

/* Write the table now, on the loop thread: only at start-up, before the
 * loop runs and before any request (state_restore, gs_agent_forget); the
 * requests that change the table go through the writer thread (durable
 * requests below).  A failure is logged; the next write tries again. */
static void state_save(struct gs_agent *ag)
{
	struct gs_state st;
	struct gs_state_alloc sa;
	struct gs_alloc *a;
	struct gs_error err;

	memset(&st, 0, sizeof(st));
	st.seq = ag->state_seq + 1;
	st.old_file = ag->state_old_file;
	st.next_id = gs_alloc_next_id(ag->allocs);
	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		state_entry(ag, a, &sa);
		if (gs_state_add(&st, &sa, &err) < 0)
			goto fail;
	}
	if (gs_state_save(ag->state_path, &st, &err) < 0)
		goto fail;
	ag->state_seq = st.seq;
	ag->state_old_file = 0;
	if (ag->state_failed > 0)
		log_info("state file %s written again", ag->state_path);
	ag->state_failed = 0;
	gs_state_clear(&st);
	return;
fail:
	if (ag->state_failed++ == 0)
		log_warnx("state file: %s; allocations changed since the last "
			  "good write would not survive an agent restart",
			  err.msg);
	gs_state_clear(&st);
}

unsigned gs_agent_table_loaded(const struct gs_agent *ag,
			       const uint64_t **ids, uint64_t *next_id)
{
	*ids = ag->loaded_ids;
	*next_id = ag->loaded_next_id;
	return ag->nloaded;
}

void gs_agent_forget(struct gs_agent *ag, uint64_t id)
{
	struct gs_alloc *a = gs_alloc_get(ag->allocs, id);
	struct gs_gpu *g;

	if (a == NULL || !a->restored || a->conn != NULL)
		return;
	g = gpu_of(ag, a);
	if (g != NULL) {
		gs_sched_remove(g->sched, a->id, gs_now_ns());
		g->shares_used -= a->shares;
		g->mem_limits -= a->mem_limit;
		g->nallocs--;
	}
	log_info("allocation %llu: closed before the restart (its usage row "
		 "is final); not restored", (unsigned long long)id);
	gs_alloc_remove(ag->allocs, id);
	state_save(ag);
}

/* Can record r of the previous run be put back?  NULL if so, else why
 * not. */
static const char *restore_refusal(struct gs_agent *ag,
				   const struct gs_state_alloc *r)
{
	struct gs_gpu *g = gpu_by_index(ag, r->gpu);

	if (g == NULL)
		return "its GPU is gone";
	if (strcmp(g->d.uuid, r->gpu_uuid) != 0)
		return "its GPU was replaced (other UUID)";
	if (r->shares < 1 || r->shares > g->shares_total - g->shares_used)
		return "its shares no longer fit the GPU";
	if (r->weight < 1 || r->weight > WEIGHT_MAX ||
	    r->priority > GS_SCHED_PRIO_MAX || r->mode > GS_MODE_SPACE ||
	    (r->flags & ~GS_ALLOC_FLAGS_KNOWN))
		return "its weight, priority, mode or flags are invalid";
	return NULL;
}

/* The memory limit of a restored allocation, settled again with today's
 * config (the file keeps only a limit asked for).  It was admitted
 * before: a limit that no longer fits (the config changed) is kept and
 * logged rather than dropping a running job. */
static uint64_t restore_mem(struct gs_agent *ag, const struct gs_gpu *g,
			    const struct gs_state_alloc *sa)
{
	struct gs_agent_config c = ag->cfg;
	struct gs_error err;
	uint64_t limit = 0;

	if (gs_mem_settle(&c, g->d.index, g->d.mem_total, g->mem_limits,
			  g->nallocs, sa->shares, sa->mem_req, &limit,
			  &err) == 0)
		return limit;
	log_warnx("allocation %llu: %s; restored with it anyway",
		  (unsigned long long)sa->id, err.msg);
	c.memory_oversubscribe = 1;
	if (gs_mem_settle(&c, g->d.index, g->d.mem_total, g->mem_limits,
			  g->nallocs, sa->shares, sa->mem_req, &limit,
			  &err) == 0)
		return limit;
	return 0;	/* larger than the GPU now: no limit at all */
}

/* Put back the allocations of the previous run (state file), with their
 * ids.  Those that cannot be restored are dropped: the usage store then
 * closes their rows as NODE_FAIL.  When no copy of the table is valid
 * (damaged, or of another format version) the files are kept aside as
 * <file>.bad and the agent starts empty. */
static void state_restore(struct gs_agent *ag)
{
	struct gs_state st;
	struct gs_error err;
	struct gs_alloc_req req;
	struct gs_alloc *a;
	struct gs_gpu *g;
	const char *why;
	unsigned i, nok = 0, skipped = 0;
	int r;

	r = gs_state_load(ag->state_path, &st, &skipped, &err);
	if (r == 0)
		return;
	if (r < 0) {
		log_warnx("cannot restore allocations: %s; starting with "
			  "none (their usage rows close as NODE_FAIL); the "
			  "files are kept aside as %s*.bad", err.msg,
			  ag->state_path);
		gs_state_set_aside(ag->state_path);
		return;
	}
	if (skipped > 0)
		log_info("state file: %u damaged copy skipped (a save cut "
			 "short); generation %llu used", skipped,
			 (unsigned long long)st.seq);
	ag->state_seq = st.seq;
	ag->state_old_file = st.old_file;
	gs_alloc_set_next_id(ag->allocs, st.next_id);
	ag->loaded_ids = calloc(st.n ? st.n : 1, sizeof(*ag->loaded_ids));
	if (ag->loaded_ids != NULL) {
		for (i = 0; i < st.n; i++)
			ag->loaded_ids[i] = st.v[i].id;
		ag->nloaded = st.n;
		ag->loaded_next_id = st.next_id;
	}
	for (i = 0; i < st.n; i++) {
		const struct gs_state_alloc *sa = &st.v[i];

		why = restore_refusal(ag, sa);
		if (why != NULL) {
			log_warnx("allocation %llu (gpu %d, job '%s' pod '%s') "
				  "not restored: %s; closed as NODE_FAIL",
				  (unsigned long long)sa->id, sa->gpu,
				  sa->labels.job, sa->labels.pod, why);
			continue;
		}
		g = gpu_by_index(ag, sa->gpu);
		memset(&req, 0, sizeof(req));
		req.gpu = sa->gpu;
		req.shares = sa->shares;
		req.weight = sa->weight;
		req.priority = sa->priority;
		req.mode = sa->mode;
		req.uid = sa->uid;
		req.flags = sa->flags;
		req.labels = sa->labels;
		req.mem_limit = restore_mem(ag, g, sa);
		a = gs_alloc_restore(ag->allocs, sa->id, &req,
				     sa->created_unix_ns);
		if (a == NULL || gs_sched_add_shares(g->sched, a->id,
				a->shares, a->weight, a->priority,
				gs_now_ns()) < 0) {
			log_warnx("allocation %llu not restored: out of "
				  "memory", (unsigned long long)sa->id);
			if (a != NULL)
				gs_alloc_remove(ag->allocs, a->id);
			continue;
		}
		g->shares_used += a->shares;
		g->mem_limits += a->mem_limit;
		g->nallocs++;
		a->mem_req = sa->mem_req;
		nok++;
		log_info("allocation %llu restored: gpu %d, %u shares, weight "
			 "%u, priority %u, uid %u, job '%s' pod '%s'",
			 (unsigned long long)a->id, a->gpu, a->shares,
			 a->weight, a->priority, a->uid, a->labels.job,
			 a->labels.pod);
	}
	log_info("restored %u of %u allocation(s) from %s; next id %llu", nok,
		 st.n, ag->state_path,
		 (unsigned long long)gs_alloc_next_id(ag->allocs));
	gs_state_clear(&st);
	if (nok != st.n)
		state_save(ag);
}

/* ---- output ---- */

/* Every reply and event reaches a client's buffer through here: the
 * one place that enforces OUT_MAX.  A client that leaves more than
 * OUT_MAX bytes unread is dropped: its buffer (and a control page fd
 * not yet sent) is freed, nothing more is queued, and the connection is
 * closed at the end of its current event (at its next one when the drop
 * comes from the scheduler, a TOKEN_GRANT).  Returns 0 (also when the
 * client was dropped: the message is dealt with), or -1 with err filled
 * when m cannot be encoded (nothing appended). */
static int conn_encode(struct gs_conn *c, const struct gs_msg *m,
		       struct gs_error *err)
{
	size_t unsent;

	if (c->dropped)
		return 0;
	if (gs_msg_encode(m, &c->out, err) < 0)
		return -1;
	unsent = c->out.len - c->out_off;
	if (unsent > OUT_MAX) {
		if (c->ag->dropped_logged++ % 1000 == 0)
			log_warnx("client pid %d uid %u: %zu bytes of replies "
				  "unread, dropping it (%llu so far)",
				  (int)c->pid, (unsigned)c->uid, unsent,
				  (unsigned long long)c->ag->dropped_logged);
		c->dropped = 1;
		c->closing = 1;
		gs_wbuf_free(&c->out);
		c->out_off = 0;
		if (c->pass_fd >= 0) {
			close(c->pass_fd);
			c->pass_fd = -1;
		}
		if (c->pass_mem >= 0) {
			close(c->pass_mem);
			c->pass_mem = -1;
		}
	}
	return 0;
}

static int conn_queue(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_error err;

	if (c == &c->ag->sink || (c->closing && c->fd < 0))
		return -1;	/* the sink: a requester that left */
	if (conn_encode(c, m, &err) < 0) {
		log_warnx("client pid %d: cannot encode %s: %s", (int)c->pid,
			  gs_msg_type_name(m->type), err.msg);
		return -1;
	}
	return 0;
}

static void reply_err(struct gs_conn *c, uint32_t seq, int code,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void reply_err(struct gs_conn *c, uint32_t seq, int code,
		      const char *fmt, ...)
{
	struct gs_msg m;
	va_list ap;

	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_ERROR;
	m.seq = seq;
	m.u.error.code = code;
	va_start(ap, fmt);
	vsnprintf(m.u.error.msg, sizeof(m.u.error.msg), fmt, ap);
	va_end(ap);
	conn_queue(c, &m);
}

static void reply_ok(struct gs_conn *c, uint32_t seq)
{
	struct gs_msg m;

	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_OK;
	m.seq = seq;
	conn_queue(c, &m);
}

static void set_pollout(struct gs_conn *c, int on)
{
	struct gs_error err;

	if (c->pollout == on)
		return;
	if (gs_loop_mod_fd(c->ag->loop, c->fd,
			   EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0u),
			   &err) == 0)
		c->pollout = on;
}

/* Sent bytes are dropped in bulk, never with a shift per send (a slow
 * reader would make every send move the whole buffer): all of it once
 * everything is sent (a large buffer is freed then), else the sent head
 * once it is at least OUT_KEEP and no smaller than what is left, so
 * every byte is moved at most about once. */
static void out_compact(struct gs_conn *c)
{
	size_t k = c->out_off, left = c->out.len - c->out_off;

	if (left == 0) {
		c->out.len = c->out_off = 0;
		if (c->out.cap > OUT_KEEP)
			gs_wbuf_free(&c->out);
		return;
	}
	if (k < OUT_KEEP || k < left)
		return;
	memmove(c->out.data, c->out.data + k, left);
	c->out.len = left;
	c->out_off = 0;
	if (c->pass_fd >= 0)
		c->pass_off -= k;
}

/* Write what we can; the fds for ATTACHED go with its frame's first
 * byte: the memory page's, then the control page's (a client before 1.5
 * keeps the last one).  Marks the connection closing on a write error. */
static void conn_flush(struct gs_conn *c)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 2)];
	} cm;
	struct msghdr mh;
	struct iovec iov;
	ssize_t n;
	size_t len;

	while (c->out_off < c->out.len) {
		len = c->out.len - c->out_off;
		if (c->pass_fd >= 0 && c->pass_off > c->out_off &&
		    c->pass_off - c->out_off < len)
			len = c->pass_off - c->out_off;
		memset(&mh, 0, sizeof(mh));
		iov.iov_base = c->out.data + c->out_off;
		iov.iov_len = len;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (c->pass_fd >= 0 && c->pass_off == c->out_off) {
			struct cmsghdr *ch;
			int fds[2], nfd = 0;

			if (c->pass_mem >= 0)
				fds[nfd++] = c->pass_mem;
			fds[nfd++] = c->pass_fd;
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
			ch = CMSG_FIRSTHDR(&mh);
			ch->cmsg_level = SOL_SOCKET;
			ch->cmsg_type = SCM_RIGHTS;
			ch->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
			memcpy(CMSG_DATA(ch), fds, sizeof(int) * nfd);
		}
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				set_pollout(c, 1);
				return;
			}
			c->closing = 1;
			c->out.len = c->out_off = 0;
			return;
		}
		if (c->pass_fd >= 0 && c->pass_off == c->out_off) {
			close(c->pass_fd);
			c->pass_fd = -1;
			if (c->pass_mem >= 0)
				close(c->pass_mem);
			c->pass_mem = -1;
		}
		c->out_off += (size_t)n;
		out_compact(c);
	}
	set_pollout(c, 0);
}

/* ---- scheduler plumbing ---- */

static void update_wakeup(struct gs_agent *ag);
static void handoff_begin(struct gs_agent *ag, struct gs_gpu *g,
			  uint64_t now);

static void on_wakeup(struct gs_loop *l, uint64_t now, void *arg)
{
	struct gs_agent *ag = arg;
	uint32_t i;

	(void)l;
	for (i = 0; i < ag->ngpus; i++) {
		struct gs_gpu *g = &ag->gpus[i];

		if (g->next_ns <= now)
			gpu_step(ag, g, now);
		if (g->handoff_at != 0 && g->handoff_at <= now)
			handoff_begin(ag, g, now);
	}
	update_wakeup(ag);
}

static void update_wakeup(struct gs_agent *ag)
{
	uint64_t at = UINT64_MAX, spin = 0;
	uint32_t i;

	for (i = 0; i < ag->ngpus; i++) {
		if (ag->gpus[i].next_ns < at)
			at = ag->gpus[i].next_ns;
		if (ag->gpus[i].handoff_at != 0 &&
		    ag->gpus[i].handoff_at < at)
			at = ag->gpus[i].handoff_at;
		if (ag->gpus[i].spin_until > spin)
			spin = ag->gpus[i].spin_until;
	}
	gs_loop_set_wakeup(ag->loop, at, on_wakeup, ag);
	gs_loop_set_spin(ag->loop, ag->cfg.handoff_poll ? spin : 0);
}

void gs_agent_gpu_kick(struct gs_agent *ag, int32_t gpu)
{
	uint32_t i;

	for (i = 0; i < ag->ngpus; i++)
		if (ag->gpus[i].d.index == gpu)
			ag->gpus[i].next_ns = gs_now_ns();
	update_wakeup(ag);
}

static void set_state(struct gs_agent *ag, struct gs_alloc *a, uint32_t st)
{
	if (a->state == st)
		return;
	a->state = st;
	gs_alloc_notify(ag->allocs, GS_AEV_STATE, a);
}

/* Write the allocation's control fields into slot i's page (release
 * order: a job that sees `suspend` sees the fields written before it). */
static void ctl_write(struct gs_alloc *a, unsigned i)
{
	struct gs_ctlpage *p = a->att[i].page;

	__atomic_store_n(&p->slice_deadline_ns, a->ctl_deadline_ns,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->grant_gen, a->grant_gen, __ATOMIC_RELAXED);
	__atomic_store_n(&p->suspend_set_ns, a->ctl_suspend_set_ns,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&p->suspend, a->ctl_suspend, __ATOMIC_RELEASE);
	gs_ctl_wake(p);		/* a job keeping the token idle waits */
}

static void ctl_write_all(struct gs_alloc *a)
{
	unsigned i;

	for (i = 0; i < a->natt; i++)
		ctl_write(a, i);
}

/* Does an attached process of a hold the grant (granted) or want the
 * GPU (!granted)? */
static int any_att(const struct gs_alloc *a, int granted)
{
	unsigned i;

	for (i = 0; i < a->natt; i++)
		if (a->att[i].conn != NULL &&
		    (granted ? a->att[i].granted : a->att[i].wants))
			return 1;
	return 0;
}

/* Slot i runs under the allocation's current grant: TOKEN_GRANT with
 * the grant's generation and what is left of its slice. */
static void send_grant(struct gs_alloc *a, unsigned i, uint64_t now)
{
	struct gs_attach *t = &a->att[i];
	struct gs_msg m;

	t->granted = 1;
	t->grant_at = now;
	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_TOKEN_GRANT;
	m.seq = 0;
	m.u.grant.gen = a->grant_gen;
	m.u.grant.slice_ns = a->ctl_deadline_ns > now ?
			     a->ctl_deadline_ns - now : 1;
	conn_queue(t->conn, &m);
	conn_flush(t->conn);
}

/*
 * The token's hand-over.  A suspended holder's release and the next grant
 * would each wait for a thread wake-up (the agent's in epoll, the next
 * job's in poll), tens of microseconds of idle GPU each on a loaded node.
 * So the job that is next in line is told to poll for its grant
 * (TOKEN_SOON): its wake-up then overlaps the holder's eviction.  With
 * handoff_poll the agent's loop polls for the release too (a few
 * microseconds more per hand-over, several % of a core: off by default,
 * bench_agent's BENCH_EVICT_US).  Both poll from the
 * hand-over's start until the release is expected (the holder's smoothed
 * suspend -> release time) plus handoff_spin.  A holder that takes long
 * to drain (the launch gate's queued kernels: about 1 ms) is not polled
 * for all along: the start waits until HANDOFF_LEAD before half its
 * expected drain, which leaves a timer wake-up room to be late.  The
 * expected drain counts up to HANDOFF_EST_MAX_NS: a holder that drags its
 * releases out cannot keep the agent polling for longer than that plus
 * handoff_spin per hand-over.  Only a hint: if the scheduler picks
 * another job at the release, that one is granted as always and the
 * hinted job's polling runs out.
 */
#define HANDOFF_LEAD_NS 200000ull
#define HANDOFF_EST_MAX_NS 2000000ull

static void handoff_begin(struct gs_agent *ag, struct gs_gpu *g,
			  uint64_t now)
{
	struct gs_alloc *b;
	struct gs_msg m;
	uint64_t id;
	unsigned i;

	g->handoff_at = 0;
	g->spin_until = g->handoff_end > now ? g->handoff_end : 0;
	if (g->spin_until == 0)
		return;
	id = gs_sched_next(g->sched, now);
	if (id == 0 || id == g->soon_id)
		return;
	b = gs_alloc_get(ag->allocs, id);
	if (b == NULL)
		return;
	g->soon_id = id;
	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_TOKEN_SOON;
	m.seq = 0;
	m.u.soon_ns = g->spin_until - now;
	for (i = 0; i < b->natt; i++) {
		if (b->att[i].conn == NULL || !b->att[i].wants ||
		    b->att[i].granted)
			continue;
		conn_queue(b->att[i].conn, &m);
		conn_flush(b->att[i].conn);
	}
}

/* A holder of g was just asked to suspend. */
static void handoff_start(struct gs_agent *ag, struct gs_gpu *g,
			  uint64_t now)
{
	uint64_t spin = ag->cfg.handoff_spin_ns, est = 0, half;
	struct gs_alloc *h;

	if (spin == 0)
		return;
	h = gs_alloc_get(ag->allocs, gs_sched_holder(g->sched));
	if (h != NULL)
		est = h->evict_est_ns;
	if (est > HANDOFF_EST_MAX_NS)
		est = HANDOFF_EST_MAX_NS;
	half = est / 2;
	g->handoff_end = now + est + spin;
	if (half > HANDOFF_LEAD_NS) {
		g->handoff_at = now + half - HANDOFF_LEAD_NS;
		g->spin_until = 0;
		return;
	}
	handoff_begin(ag, g, now);
}

static void handoff_done(struct gs_gpu *g)
{
	g->spin_until = 0;
	g->soon_id = 0;
	g->handoff_at = 0;
	g->handoff_end = 0;
}

static void do_grant(struct gs_agent *ag, struct gs_gpu *g,
		     struct gs_alloc *a, uint64_t slice_ns, uint64_t now)
{
	unsigned i;

	handoff_done(g);	/* if one was under way */

	if (!any_att(a, 0)) {
		/* no process to run it: give the token straight back */
		gs_sched_release(g->sched, a->id, 0, 1, now);
		return;
	}
	a->grant_gen++;
	a->granted = 1;
	a->grant_at = now;
	a->suspending = 0;
	a->grant_gpu_ns = 0;
	a->grant_gpu_max_ns = 0;
	a->grant_suspended = 0;
	a->grant_escalated = 0;
	a->ctl_deadline_ns = now + slice_ns;
	a->ctl_suspend = GS_CTL_RUN;
	ctl_write_all(a);
	set_state(ag, a, GS_ASTATE_RUNNING);
	for (i = 0; i < a->natt; i++)
		if (a->att[i].conn != NULL && a->att[i].wants)
			send_grant(a, i, now);
	log_debug("gpu %d: grant %llu to allocation %llu", g->d.index,
		  (unsigned long long)a->grant_gen,
		  (unsigned long long)a->id);
}

static void do_suspend(struct gs_agent *ag, struct gs_alloc *a, uint64_t now)
{
	a->suspending = 1;
	a->ctl_suspend_set_ns = now;
	a->ctl_suspend = GS_CTL_SUSPEND;
	ctl_write_all(a);
	set_state(ag, a, GS_ASTATE_SUSPENDING);
}

static void do_escalate(struct gs_agent *ag, struct gs_alloc *a)
{
	unsigned i;

	a->escalations++;
	a->grant_escalated = 1;
	set_state(ag, a, GS_ASTATE_HELD);
	if (ag->cfg.escalation == GS_ESC_KILL && a->nattached > 0) {
		for (i = 0; i < a->natt; i++) {
			pid_t pid = a->att[i].pid;

			if (a->att[i].conn == NULL || pid <= 0)
				continue;
			log_warnx("allocation %llu: pid %d ignored a suspend "
				  "for longer than the grace period; killing "
				  "it", (unsigned long long)a->id, (int)pid);
			if (kill(pid, SIGKILL) < 0)
				log_warn("kill %d", (int)pid);
		}
		return;
	}
	log_warnx("allocation %llu: pid %d ignored a suspend for longer "
		  "than the grace period; holding it back",
		  (unsigned long long)a->id, (int)a->pid);
}

/* Tell every job on g how many other allocations there hold or want the
 * token (the page's `contenders`): the launch gate keeps little work in
 * flight only while someone could be waiting for the GPU.  With
 * GS_CTL_CONTEND_OVERLAP when every busy allocation there and the page's
 * own are clients of one MPS server (the next holder's kernels run
 * beside a releasing holder's last ones: libgshare then lets a suspend
 * wait for longer direct chunks).  A page is written only when its
 * value changes. */
/* Is a a client of the MPS server at *pipe run for uid?  With *pipe
 * NULL (none seen yet): of any, which it then names. */
static int same_server(const struct gs_agent *ag, const struct gs_alloc *a,
		       const char **pipe, uint32_t *uid)
{
	const char *ap = gs_mps_pipe(ag->mps, a->gpu, a->mode, a->uid);

	if (ap == NULL)
		return 0;
	if (*pipe == NULL) {
		*pipe = ap;
		*uid = a->uid;
		return 1;
	}
	return strcmp(ap, *pipe) == 0 && a->uid == *uid;
}

static void publish_contention(struct gs_agent *ag, struct gs_gpu *g,
			       uint64_t now)
{
	int32_t gi = g->d.index;
	uint32_t busy = 0, others, flags, uid = 0;
	int overlap = 1;
	const char *pipe = NULL;
	struct gs_alloc *a;
	unsigned i;

	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (a->gpu != gi || !(a->granted || any_att(a, 0)))
			continue;
		busy++;
		/* one server: the same pipe and the same user */
		if (!same_server(ag, a, &pipe, &uid))
			overlap = 0;
	}
	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (a->gpu != gi)
			continue;
		others = busy - ((a->granted || any_att(a, 0)) ? 1u : 0u);
		flags = GS_CTL_CONTEND_VALID;
		if (overlap && same_server(ag, a, &pipe, &uid))
			flags |= GS_CTL_CONTEND_OVERLAP;
		for (i = 0; i < a->natt; i++) {
			struct gs_ctlpage *p = a->att[i].page;

			if (p == NULL)
				continue;
			/* contention seen now, or just ended: the gate
			 * widens its window only after a quiet spell */
			if (others > 0 ||
			    __atomic_load_n(&p->contenders,
					    __ATOMIC_RELAXED) > 0)
				__atomic_store_n(&p->contend_seen_ns, now,
						 __ATOMIC_RELAXED);
			if ((__atomic_load_n(&p->contenders,
					     __ATOMIC_RELAXED) == others &&
			     __atomic_load_n(&p->contend_flags,
					     __ATOMIC_RELAXED) == flags))
				continue;
			__atomic_store_n(&p->contenders, others,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&p->contend_flags, flags,
					 __ATOMIC_RELEASE);
			gs_ctl_wake(p);
		}
	}
}

/* A slice extended silently (nobody should run before the holder) moves
 * its end: the holders' pages say so (slice_deadline_ns is when the next
 * decision comes, docs/protocol.md). */
static void publish_slice_end(struct gs_agent *ag, struct gs_gpu *g)
{
	uint64_t end = gs_sched_slice_end(g->sched);
	struct gs_alloc *a;
	unsigned i;

	if (end == 0)
		return;
	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (a->gpu != g->d.index || !a->granted || a->suspending ||
		    a->ctl_deadline_ns == end)
			continue;
		a->ctl_deadline_ns = end;
		for (i = 0; i < a->natt; i++)
			if (a->att[i].page != NULL)
				__atomic_store_n(&a->att[i].page->
						 slice_deadline_ns, end,
						 __ATOMIC_RELAXED);
	}
}

static void gpu_step(struct gs_agent *ag, struct gs_gpu *g, uint64_t now)
{
	struct gs_sched_action acts[MAX_ACTS];
	struct gs_alloc *a;
	uint64_t next = UINT64_MAX;
	int n, i, rounds = 0, suspended = 0;

	do {
		n = gs_sched_step(g->sched, now, acts, MAX_ACTS, &next);
		for (i = 0; i < n; i++) {
			a = gs_alloc_get(ag->allocs, acts[i].id);
			if (a == NULL) {
				log_warnx("gpu %d: scheduler names unknown "
					  "allocation %llu", g->d.index,
					  (unsigned long long)acts[i].id);
				gs_sched_remove(g->sched, acts[i].id, now);
				continue;
			}
			switch (acts[i].kind) {
			case GS_ACT_GRANT:
				do_grant(ag, g, a, acts[i].slice_ns, now);
				break;
			case GS_ACT_SUSPEND:
				do_suspend(ag, a, now);
				suspended = 1;
				break;
			case GS_ACT_ESCALATE:
				do_escalate(ag, a);
				break;
			}
		}
	} while (n == MAX_ACTS && ++rounds < 8);
	publish_slice_end(ag, g);
	if (suspended && gs_sched_holders(g->sched) > 0)
		handoff_start(ag, g, now);
	else if (gs_sched_holders(g->sched) == 0 && g->handoff_at != 0)
		handoff_done(g);	/* released before it began */
	else if (g->spin_until != 0 && g->spin_until <= now)
		g->spin_until = 0;
	g->next_ns = next;
	publish_contention(ag, g, now);
}

/* Every process that ran under the allocation's grant has released it
 * (or is gone): the allocation gives the token back, idle unless one of
 * its processes still wants the GPU. */
static void alloc_released(struct gs_agent *ag, struct gs_gpu *g,
			   struct gs_alloc *a, uint64_t now)
{
	int idle = !any_att(a, 0);

	if (a->suspending && a->ctl_suspend_set_ns != 0 &&
	    now > a->ctl_suspend_set_ns) {
		uint64_t d = now - a->ctl_suspend_set_ns;

		a->evict_est_ns = a->evict_est_ns == 0 ? d :
				  (3 * a->evict_est_ns + d) / 4;
	}
	gs_sched_release(g->sched, a->id, a->grant_gpu_max_ns, idle, now);
	/* billed: what its processes reported, at least 7/8 of the hold;
	 * an escalated hold all of it */
	a->gpu_ns += a->grant_escalated && a->grant_gpu_ns < now - a->grant_at
			     ? now - a->grant_at
			     : gs_acct_bill_gpu(now - a->grant_at,
						a->grant_gpu_ns);
	a->granted = 0;
	a->suspending = 0;
	a->held_ns += now - a->grant_at;
	if (a->grant_suspended)
		a->suspensions++;
	set_state(ag, a, idle ? GS_ASTATE_IDLE : GS_ASTATE_WAITING);
}

/* Process slot k of a is gone or detached: what it held of the grant is
 * released (charged the time it held), it wants nothing more; the
 * allocation stays, its other processes go on. */
static void detach_att(struct gs_agent *ag, struct gs_alloc *a, unsigned k,
		       uint64_t now)
{
	struct gs_attach *t = &a->att[k];
	struct gs_gpu *g = gpu_of(ag, a);
	struct gs_sched_entry_info si;
	unsigned i;

	if (t->granted) {
		uint64_t d = now - t->grant_at;

		a->grant_gpu_ns += d;
		if (d > a->grant_gpu_max_ns)
			a->grant_gpu_max_ns = d;
		t->granted = 0;
	}
	t->wants = 0;
	t->conn = NULL;
	t->pid = 0;
	a->nattached--;
	__atomic_store_n(&t->page->suspend, GS_CTL_SUSPEND, __ATOMIC_RELEASE);
	a->conn = NULL;
	a->pid = 0;
	for (i = 0; i < a->natt; i++)
		if (a->att[i].conn != NULL) {
			a->conn = a->att[i].conn;
			a->pid = a->att[i].pid;
			break;
		}
	if (g == NULL)
		return;
	if (a->granted && !any_att(a, 1)) {
		alloc_released(ag, g, a, now);
	} else if (!a->granted && !any_att(a, 0) &&
		   gs_sched_info(g->sched, a->id, &si) == 0 && si.active) {
		/* waiting, never granted: re-enter inactive (in its
		 * co-grant set) */
		gs_sched_remove(g->sched, a->id, now);
		gs_sched_add_shares(g->sched, a->id, a->shares, a->weight,
				    a->priority, now);
		gs_sched_set_group(g->sched, a->id, si.group);
	}
	/* the driver gave back what the process held: keep the peak, take
	 * its figure out of the allocation's memory counter and zero the
	 * gauge of its page for the next process to attach there */
	gs_alloc_mem_peak(a);
	gs_alloc_mem_gone(a, k);
	if (a->nattached == 0)
		set_state(ag, a, GS_ASTATE_IDLE);
	if (ag->stopping)
		return;
	gpu_step(ag, g, now);
	update_wakeup(ag);
}

/* ---- requests ---- */

static int need_root(struct gs_conn *c, const struct gs_msg *m)
{
	if (c->uid == 0)
		return 0;
	reply_err(c, m->seq, GS_EPERM, "%s: only root may do this (you are "
		  "uid %u)", gs_msg_type_name(m->type), (unsigned)c->uid);
	return -1;
}

static struct gs_alloc *need_alloc(struct gs_conn *c, const struct gs_msg *m,
				   uint64_t id)
{
	struct gs_alloc *a = gs_alloc_get(c->ag->allocs, id);

	if (a == NULL)
		reply_err(c, m->seq, GS_ENOENT, "no allocation %llu",
			  (unsigned long long)id);
	return a;
}

/* Is CREATE m admissible?  The GPU it goes to, with *out the request
 * with its defaults; NULL when refused (the error is queued). */
static struct gs_gpu *create_check(struct gs_conn *c, const struct gs_msg *m,
				   struct gs_alloc_req *out)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc_req req = m->u.req;
	struct gs_gpu *g = NULL, *best = NULL, *fit = NULL;
	struct gs_error merr;
	uint64_t asked = req.mem_limit, limit = 0, lim;
	uint32_t i, freeb = 0, freefit = 0, nsick = 0, nmem = 0;

	if (need_root(c, m) < 0)
		return NULL;
	if (req.shares < 1 || req.shares > ag->cfg.shares_per_gpu) {
		reply_err(c, m->seq, GS_EINVAL, "shares must be 1..%u, not %u",
			  ag->cfg.shares_per_gpu, req.shares);
		return NULL;
	}
	if (req.weight == 0)
		req.weight = req.shares;
	if (req.weight > WEIGHT_MAX) {
		reply_err(c, m->seq, GS_EINVAL, "weight must be 1..%u, not %u",
			  WEIGHT_MAX, req.weight);
		return NULL;
	}
	if (req.priority > GS_SCHED_PRIO_MAX) {
		reply_err(c, m->seq, GS_EINVAL,
			  "priority must be 0..%u, not %u", GS_SCHED_PRIO_MAX,
			  req.priority);
		return NULL;
	}
	if (req.mode > GS_MODE_SPACE) {
		reply_err(c, m->seq, GS_EINVAL, "unknown mode %u", req.mode);
		return NULL;
	}
	if (req.flags & ~GS_ALLOC_FLAGS_KNOWN) {
		reply_err(c, m->seq, GS_EINVAL, "unknown allocation flags %#x",
			  req.flags & ~GS_ALLOC_FLAGS_KNOWN);
		return NULL;
	}
	if (req.gpu >= 0) {
		g = gpu_by_index(ag, req.gpu);
		if (g == NULL) {
			reply_err(c, m->seq, GS_ENOENT, "no GPU %d on this "
				  "node (%u GPUs)", req.gpu, ag->ngpus);
			return NULL;
		}
		if (g->drained) {
			reply_err(c, m->seq, GS_EDRAINED,
				  "GPU %d is drained", req.gpu);
			return NULL;
		}
		if (!g->healthy) {
			reply_err(c, m->seq, GS_EUNHEALTHY,
				  "GPU %d is unhealthy (%s): no new "
				  "allocations", req.gpu, gs_agent_gpu_why(g));
			return NULL;
		}
		if (g->shares_total - g->shares_used < req.shares) {
			reply_err(c, m->seq, GS_EBUSY,
				  "GPU %d: %u shares requested, only %u of "
				  "%u free", req.gpu, req.shares,
				  g->shares_total - g->shares_used,
				  g->shares_total);
			return NULL;
		}
		if (gs_mem_settle(&ag->cfg, g->d.index, g->d.mem_total,
				  g->mem_limits, g->nallocs, req.shares, asked,
				  &limit, &merr) < 0) {
			reply_err(c, m->seq, merr.code, "%s", merr.msg);
			return NULL;
		}
	} else {
		/* the GPU with the most free shares among those where both
		 * the shares and the memory limit fit */
		for (i = 0; i < ag->ngpus; i++) {
			struct gs_gpu *x = &ag->gpus[i];
			uint32_t f = x->shares_total - x->shares_used;

			if (x->drained || !x->healthy) {
				nsick += !x->healthy;
				continue;
			}
			if (best == NULL || f > freeb) {
				best = x;
				freeb = f;
			}
			if (f < req.shares)
				continue;
			if (gs_mem_settle(&ag->cfg, x->d.index,
					  x->d.mem_total, x->mem_limits,
					  x->nallocs, req.shares, asked, &lim,
					  &merr) < 0) {
				nmem++;
				continue;
			}
			if (fit == NULL || f > freefit) {
				fit = x;
				freefit = f;
				limit = lim;
			}
		}
		if (best == NULL) {
			if (nsick == ag->ngpus)
				reply_err(c, m->seq, GS_EUNHEALTHY,
					  "no GPU accepts allocations (all "
					  "unhealthy)");
			else
				reply_err(c, m->seq, GS_EDRAINED,
					  "no GPU accepts allocations (%u "
					  "drained, %u unhealthy)",
					  ag->ngpus - nsick, nsick);
			return NULL;
		}
		if (fit == NULL && nmem > 0) {
			reply_err(c, m->seq, merr.code, "no GPU with %u free "
				  "shares has room for the memory limit (%s)",
				  req.shares, merr.msg);
			return NULL;
		}
		if (fit == NULL) {
			reply_err(c, m->seq, GS_EBUSY,
				  "no GPU has %u free shares (most free: GPU "
				  "%d with %u of %u)", req.shares,
				  best->d.index, freeb, best->shares_total);
			return NULL;
		}
		g = fit;
		req.gpu = g->d.index;
	}
	req.mem_limit = limit;
	*out = req;
	return g;
}

/* CREATE, once the table with the new allocation is on disk: the same id
 * (nothing else changed the table meanwhile: durable requests run one at
 * a time) and creation time as the file holds. */
static void create_apply(struct gs_conn *c, const struct gs_msg *m,
			 const struct gs_alloc_req *r, uint64_t created)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc_req req = *r;
	struct gs_alloc_info info;
	struct gs_msg rep;
	struct gs_alloc *a;
	struct gs_gpu *g = gpu_by_index(ag, req.gpu);
	char mb[32];

	a = gs_alloc_add(ag->allocs, &req, created);
	if (a == NULL) {
		reply_err(c, m->seq, GS_ENOMEM, "out of memory");
		return;
	}
	if (gs_sched_add_shares(g->sched, a->id, a->shares, a->weight,
				a->priority, gs_now_ns()) < 0) {
		gs_alloc_remove(ag->allocs, a->id);
		reply_err(c, m->seq, GS_ENOMEM, "scheduler: out of memory");
		return;
	}
	g->shares_used += a->shares;
	g->mem_limits += a->mem_limit;
	g->nallocs++;
	a->mem_req = m->u.req.mem_limit;	/* what was asked for */
	log_info("allocation %llu: gpu %d, %u shares, weight %u, priority "
		 "%u, uid %u%s, memory limit %s%s, job '%s' pod '%s'",
		 (unsigned long long)a->id, a->gpu, a->shares, a->weight,
		 a->priority, a->uid,
		 (a->flags & GS_ALLOC_ANY_UID) ? " (any uid may attach)" : "",
		 a->mem_limit ? gs_mem_str(a->mem_limit, mb, sizeof(mb)) :
		 "none", a->mem_req ? " (asked)" : "", a->labels.job,
		 a->labels.pod);
	gs_alloc_to_info(a, &info);
	snprintf(info.gpu_uuid, sizeof(info.gpu_uuid), "%s", g->d.uuid);
	gs_mps_info(ag->mps, a->gpu, a->mode, a->uid, &info);
	gs_space_agent_info(ag->space, a, g->shares_total, &info);
	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_ALLOC_INFO;
	rep.seq = m->seq;
	rep.u.info = info;
	conn_queue(c, &rep);
}

static void fill_info(struct gs_agent *ag, struct gs_alloc *a,
		      struct gs_alloc_info *info)
{
	struct gs_gpu *g = gpu_of(ag, a);
	struct gs_sched_entry_info si;

	gs_alloc_mem_peak(a);	/* every look at the page counts */
	gs_alloc_to_info(a, info);
	if (g != NULL) {
		snprintf(info->gpu_uuid, sizeof(info->gpu_uuid), "%s",
			 g->d.uuid);
		if (gs_sched_info(g->sched, a->id, &si) == 0)
			info->vtime_ns = si.vtime_ns;
	}
	gs_mps_info(ag->mps, a->gpu, a->mode, a->uid, info);
	if (g != NULL)
		gs_space_agent_info(ag->space, a, g->shares_total, info);
}

/* CLOSE, once the table without the allocation is on disk; *rep gets the
 * reply (sent by the caller once the final usage row is stored). */
static void close_apply(struct gs_conn *c, const struct gs_msg *m,
			struct gs_msg *out)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a;
	struct gs_gpu *g;
	struct gs_conn *job;
	struct gs_msg rep;
	uint64_t now = gs_now_ns();
	unsigned k;

	a = need_alloc(c, m, m->u.id);
	if (a == NULL)
		return;
	a->end_state = m->u.close.end_state;	/* checked before the write */
	g = gpu_of(ag, a);
	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_ALLOC_INFO;
	rep.seq = m->seq;
	for (k = 0; k < a->natt; k++) {
		job = a->att[k].conn;
		if (job == NULL)
			continue;
		detach_att(ag, a, k, now);
		job->alloc = NULL;
		/* the job's connection is useless now; the requester may
		 * itself be an attached connection: keep that one open */
		if (job != c)
			conn_close(job);
	}
	if (g != NULL) {
		gs_sched_remove(g->sched, a->id, now);
		g->shares_used -= a->shares;
		g->mem_limits -= a->mem_limit;
		g->nallocs--;
		gpu_step(ag, g, now);
		update_wakeup(ag);
	}
	fill_info(ag, a, &rep.u.info);
	rep.u.info.state = GS_ASTATE_CLOSED;
	rep.u.info.pid = 0;
	/* the table file no longer has it; the accounting observer queues
	 * the final usage row, which the reply waits for (durable_done),
	 * and gives its totals (gs_agent_close_totals): one count for the
	 * reply and the store (docs/accounting.md, Held time) */
	ag->fin_id = 0;
	gs_alloc_remove(ag->allocs, rep.u.info.id);
	if (ag->fin_id == rep.u.info.id) {
		rep.u.info.gpu_ns = ag->fin_gpu_ns;
		rep.u.info.held_ns = ag->fin_held_ns;
	}
	log_info("allocation %llu closed: gpu time %.3f s, held %.3f s, %llu "
		 "suspensions", (unsigned long long)rep.u.info.id,
		 (double)rep.u.info.gpu_ns / 1e9,
		 (double)rep.u.info.held_ns / 1e9,
		 (unsigned long long)rep.u.info.suspensions);
	*out = rep;
}

/* LABEL, once the table with the new labels is on disk. */
static void label_apply(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_alloc *a;
	struct gs_msg rep;

	a = need_alloc(c, m, m->u.label.id);
	if (a == NULL)
		return;
	a->labels = m->u.label.labels;
	gs_alloc_notify(c->ag->allocs, GS_AEV_STATE, a);
	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_ALLOC_INFO;
	rep.seq = m->seq;
	fill_info(c->ag, a, &rep.u.info);
	conn_queue(c, &rep);
}

/* SET_MEM, once the table with the new asked limit is on disk: limit is
 * what durable_plan settled (no durable request ran in between). */
static void setmem_apply(struct gs_conn *c, const struct gs_msg *m,
			 uint64_t limit)
{
	struct gs_alloc *a;
	struct gs_gpu *g;
	struct gs_msg rep;
	char mb[32];

	a = need_alloc(c, m, m->u.setmem.id);
	if (a == NULL)
		return;
	g = gpu_of(c->ag, a);
	if (g != NULL)
		g->mem_limits = g->mem_limits - a->mem_limit + limit;
	a->mem_limit = limit;
	a->mem_req = m->u.setmem.mem_limit;
	gs_alloc_notify(c->ag->allocs, GS_AEV_STATE, a);
	log_info("allocation %llu: memory limit %s%s",
		 (unsigned long long)a->id,
		 limit ? gs_mem_str(limit, mb, sizeof(mb)) : "none",
		 a->mem_req ? " (asked)" : "");
	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_ALLOC_INFO;
	rep.seq = m->seq;
	fill_info(c->ag, a, &rep.u.info);
	conn_queue(c, &rep);
}

/* 1 while a SET_MEM of allocation id waits in the durable queue: an
 * attach then would put the old limit in the job's page. */
static int setmem_pending(struct gs_agent *ag, uint64_t id);

static void req_attach(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a;
	struct gs_gpu *g;
	struct gs_error err;
	struct gs_msg rep;
	struct gs_attach *t;
	int fd, mfd, k;

	if (c->alloc != NULL) {
		reply_err(c, m->seq, GS_ESTATE, "this connection is already "
			  "attached to allocation %llu",
			  (unsigned long long)c->alloc->id);
		return;
	}
	a = need_alloc(c, m, m->u.id);
	if (a == NULL)
		return;
	if (c->uid != 0 && c->uid != a->uid &&
	    !(a->flags & GS_ALLOC_ANY_UID)) {
		/* as if it did not exist, like STATUS: no owner leaks */
		reply_err(c, m->seq, GS_ENOENT, "no allocation %llu",
			  (unsigned long long)a->id);
		return;
	}
	if (setmem_pending(ag, a->id)) {
		reply_err(c, m->seq, GS_ESTATE, "allocation %llu: its memory "
			  "limit is being changed; attach again",
			  (unsigned long long)a->id);
		return;
	}
	/* every process of the job attaches (srun -n, a launcher and its
	 * workers), each with its own page, up to GS_ALLOC_MAX_ATTACH */
	g = gpu_of(ag, a);
	k = gs_alloc_attach_slot(a, g ? (uint32_t)g->d.index : 0, gs_now_ns(),
				 &err);
	if (k < 0) {
		if (err.code != GS_EBUSY)
			log_warnx("allocation %llu: %s",
				  (unsigned long long)a->id, err.msg);
		reply_err(c, m->seq, err.code, "%s%s",
			  err.code == GS_EBUSY ? "" : "control page: ",
			  err.msg);
		return;
	}
	t = &a->att[k];
	fd = fcntl(t->ctl_fd, F_DUPFD_CLOEXEC, 0);
	mfd = fd < 0 ? -1 : fcntl(a->mem_fd, F_DUPFD_CLOEXEC, 0);
	if (mfd < 0) {
		reply_err(c, m->seq, GS_EIO, "dup: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	t->conn = c;
	t->pid = c->pid;
	t->capped = 0;
	t->wants = 0;
	t->granted = 0;
	a->nattached++;
	if (a->conn == NULL) {
		a->conn = c;
		a->pid = c->pid;
	}
	c->alloc = a;
	c->slot = (unsigned)k;
	/* the page shows the allocation's control fields: SUSPEND unless
	 * a grant runs, which this process joins once it wants the GPU */
	if (!a->granted)
		a->ctl_suspend = GS_CTL_SUSPEND;
	ctl_write(a, (unsigned)k);
	if (a->nattached == 1)
		set_state(ag, a, GS_ASTATE_IDLE);
	gs_alloc_notify(ag->allocs, GS_AEV_STATE, a);	/* a new page */
	log_info("allocation %llu: attached by pid %d uid %u (%u attached)",
		 (unsigned long long)a->id, (int)c->pid, (unsigned)c->uid,
		 a->nattached);
	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_ATTACHED;
	rep.seq = m->seq;
	fill_info(ag, a, &rep.u.info);
	if (c->pass_fd >= 0)
		close(c->pass_fd);
	if (c->pass_mem >= 0)
		close(c->pass_mem);
	c->pass_fd = fd;
	c->pass_mem = mfd;
	c->pass_off = c->out.len;
	if (conn_queue(c, &rep) < 0) {
		close(c->pass_fd);
		c->pass_fd = -1;
		close(c->pass_mem);
		c->pass_mem = -1;
	}
}

static void req_want(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a = c->alloc;
	struct gs_gpu *g;
	uint64_t now = gs_now_ns();

	if (a == NULL) {
		reply_err(c, m->seq, GS_ESTATE,
			  "TOKEN_WANT: connection is not attached");
		return;
	}
	g = gpu_of(ag, a);
	if (g == NULL)
		return;
	a->att[c->slot].wants = 1;
	if (a->granted && !a->suspending) {
		/* a grant runs: this process joins it at once */
		if (!a->att[c->slot].granted)
			send_grant(a, c->slot, now);
		return;
	}
	if (gs_sched_want(g->sched, a->id, now) < 0) {
		reply_err(c, m->seq, GS_ESTATE, "TOKEN_WANT refused");
		return;
	}
	if (!a->granted)
		set_state(ag, a, GS_ASTATE_WAITING);
	gpu_step(ag, g, now);
	update_wakeup(ag);
}

static void req_release(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a = c->alloc;
	const struct gs_release *r = &m->u.release;
	struct gs_attach *t;
	struct gs_gpu *g;
	uint64_t now = gs_now_ns(), gpu, cap;
	int idle;

	if (a == NULL) {
		reply_err(c, m->seq, GS_ESTATE,
			  "TOKEN_RELEASE: connection is not attached");
		return;
	}
	t = &a->att[c->slot];
	if (!t->granted || !a->granted || r->gen != a->grant_gen) {
		reply_err(c, m->seq, GS_ESTATE, "TOKEN_RELEASE: generation "
			  "%llu is not held (current %llu%s)",
			  (unsigned long long)r->gen,
			  (unsigned long long)a->grant_gen,
			  t->granted ? "" : ", none held");
		return;
	}
	g = gpu_of(ag, a);
	if (g == NULL)
		return;
	idle = r->reason != GS_REL_SUSPENDED;
	t->granted = 0;
	t->wants = !idle;
	/* a process reports at most what its part of the hold allows
	 * (gs_acct_report_cap): a larger figure is a lie or a bug, and
	 * summed up it could wrap the allocation's usage back down */
	gpu = r->gpu_ns;
	cap = gs_acct_report_cap(now > t->grant_at ? now - t->grant_at : 0);
	if (gpu > cap) {
		if (t->capped++ == 0)
			log_warnx("allocation %llu pid %d: TOKEN_RELEASE "
				  "reports %llu ns of GPU time for a hold "
				  "of %llu ns; counted as %llu (further "
				  "ones not logged)",
				  (unsigned long long)a->id, (int)t->pid,
				  (unsigned long long)gpu,
				  (unsigned long long)(now - t->grant_at),
				  (unsigned long long)cap);
		gpu = cap;
	}
	a->grant_gpu_ns += gpu;
	if (gpu > a->grant_gpu_max_ns)
		a->grant_gpu_max_ns = gpu;
	a->reported_gpu_ns += gpu;
	if (r->reason == GS_REL_SUSPENDED) {
		a->grant_suspended = 1;
		a->last_evict_ns = r->evict_ns;
	}
	/* the allocation's token comes back once every process that ran
	 * under the grant has released it */
	if (any_att(a, 1))
		return;
	alloc_released(ag, g, a, now);
	gpu_step(ag, g, now);
	update_wakeup(ag);
}

/* TOKEN_UNWANT (1.7): the process gave the token back early (before its
 * last blocks had left) and then had nothing left to run.  It no longer
 * waits; a grant it was sent meanwhile comes back unused (charged like
 * any hold, from the grant to now).  The OK follows any such grant on the
 * connection, so the job knows which grants to drop. */
static void req_unwant(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a = c->alloc;
	struct gs_attach *t;
	struct gs_gpu *g;
	uint64_t now = gs_now_ns();

	if (a == NULL) {
		reply_err(c, m->seq, GS_ESTATE,
			  "TOKEN_UNWANT: connection is not attached");
		return;
	}
	g = gpu_of(ag, a);
	if (g == NULL)
		return;
	t = &a->att[c->slot];
	t->wants = 0;
	if (t->granted) {
		t->granted = 0;
		if (!any_att(a, 1))
			alloc_released(ag, g, a, now);
	} else if (!a->granted && !any_att(a, 0)) {
		(void)gs_sched_unwant(g->sched, a->id, now);
		set_state(ag, a, GS_ASTATE_IDLE);
	}
	reply_ok(c, m->seq);
	gpu_step(ag, g, now);
	update_wakeup(ag);
}

static void req_status(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_msg rep;
	struct gs_status *st = &rep.u.status;
	struct gs_alloc *a;
	struct gs_error err;
	uint32_t i, n = 0, total = 0;

	memset(&rep, 0, sizeof(rep));
	rep.type = GS_MSG_STATUS_REPLY;
	rep.seq = m->seq;
	snprintf(st->policy, sizeof(st->policy), "%s",
		 policy_name(ag->cfg.policy));
	st->slice_ns = ag->cfg.slice_ns;
	snprintf(st->warning, sizeof(st->warning), "%s", ag->warning);
	st->gpus = calloc(ag->ngpus ? ag->ngpus : 1, sizeof(*st->gpus));
	st->allocs = calloc(gs_alloc_count(ag->allocs) + 1,
			    sizeof(*st->allocs));
	if (st->gpus == NULL || st->allocs == NULL) {
		free(st->gpus);
		free(st->allocs);
		reply_err(c, m->seq, GS_ENOMEM, "out of memory");
		return;
	}
	st->ngpus = ag->ngpus;
	for (i = 0; i < ag->ngpus; i++) {
		struct gs_gpu *g = &ag->gpus[i];
		struct gs_gpu_info *gi = &st->gpus[i];

		gi->index = g->d.index;
		snprintf(gi->uuid, sizeof(gi->uuid), "%s", g->d.uuid);
		snprintf(gi->name, sizeof(gi->name), "%s", g->d.name);
		gi->shares_total = g->shares_total;
		gi->shares_used = g->shares_used;
		gi->mem_total = g->d.mem_total;
		gi->mem_limits = g->mem_limits;
		gi->healthy = (uint32_t)g->healthy;
		snprintf(gi->health, sizeof(gi->health), "%s",
			 gs_agent_gpu_why(g));
		gi->drained = (uint32_t)g->drained;
		gi->simulated = (uint32_t)g->d.simulated;
		gi->holder = gs_sched_holder(g->sched);
		gi->unmanaged = g->unmanaged;
	}
	/* nallocs_total counts every allocation the caller may see; the
	 * page lists those after after_id, ascending */
	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (c->uid == 0 || a->uid == c->uid)
			total++;
	}
	for (a = gs_alloc_after(ag->allocs, m->u.after_id); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (c->uid != 0 && a->uid != c->uid)
			continue;
		fill_info(ag, a, &st->allocs[n++]);
	}
	st->nallocs = n;
	st->nallocs_total = total;
	/* too many to fit one frame: list fewer, the client asks again
	 * after the last id listed */
	for (;;) {
		if (conn_encode(c, &rep, &err) == 0)
			break;
		if (err.code != GS_EPROTO || st->nallocs == 0) {
			reply_err(c, m->seq, err.code, "%s", err.msg);
			break;
		}
		st->nallocs = st->nallocs * 9 / 10;
		st->more = 1;
	}
	gs_msg_clear(&rep);
}

/* SET_WEIGHT / SET_PRIORITY: the allocation, or NULL when refused (the
 * error is queued). */
static struct gs_alloc *set_check(struct gs_conn *c, const struct gs_msg *m)
{
	uint32_t v = m->u.set.value;

	if (need_root(c, m) < 0)
		return NULL;
	if (m->type == GS_MSG_SET_WEIGHT && (v < 1 || v > WEIGHT_MAX)) {
		reply_err(c, m->seq, GS_EINVAL, "weight must be 1..%u, not %u",
			  WEIGHT_MAX, v);
		return NULL;
	}
	if (m->type == GS_MSG_SET_PRIORITY && v > GS_SCHED_PRIO_MAX) {
		reply_err(c, m->seq, GS_EINVAL,
			  "priority must be 0..%u, not %u", GS_SCHED_PRIO_MAX,
			  v);
		return NULL;
	}
	return need_alloc(c, m, m->u.set.id);
}

/* SET_WEIGHT / SET_PRIORITY, once the table with the value is on disk. */
static void set_apply(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a;
	struct gs_gpu *g;
	uint32_t v = m->u.set.value;

	a = need_alloc(c, m, m->u.set.id);
	if (a == NULL)
		return;
	g = gpu_of(ag, a);
	if (m->type == GS_MSG_SET_WEIGHT) {
		a->weight = v;
		if (g != NULL)
			gs_sched_set_weight(g->sched, a->id, v);
	} else {
		a->priority = v;
		if (g != NULL)
			gs_sched_set_priority(g->sched, a->id, v);
	}
	gs_alloc_notify(ag->allocs, GS_AEV_STATE, a);
	log_info("allocation %llu: %s %u", (unsigned long long)a->id,
		 m->type == GS_MSG_SET_WEIGHT ? "weight" : "priority", v);
	if (g != NULL) {
		gpu_step(ag, g, gs_now_ns());
		update_wakeup(ag);
	}
	reply_ok(c, m->seq);
}

/* ---- durable requests ----
 *
 * CREATE, CLOSE, LABEL, SET_MEM, SET_WEIGHT and SET_PRIORITY change the
 * allocation table, and what the agent answers must be what a restart finds.  Such a
 * request is checked, then the table as it will be after it is handed to
 * the writer thread (durable.c); only once that table is on disk does the
 * change happen in memory and the reply go out.  A write that fails
 * changes nothing: the request is refused with GS_EIO, naming the file
 * and the error.  These requests run one at a time, in arrival order
 * (dq_head): each is checked against the table the previous one left, so
 * the table written is exactly the table applied.  Meanwhile the loop
 * goes on: schedulers, token grants, attach, PING and STATUS do not wait
 * for the disk, and a reply to a durable request may come after replies
 * to the same connection's later requests (clients match by seq).
 * A CLOSE, once checked, first has accounting queue the allocation's usage
 * so far (GS_AEV_CLOSING) and its table waits, at most FLUSH_WAIT_NS, for
 * that tick's commit: a crash between the table write and the final row
 * then loses nothing the job had reported before it asked to close (the
 * next start closes the row COMPLETED with what is committed).  Once such
 * a wait ran out, closes do not wait until the store commits again (a
 * full or frozen store delays one close, not each in turn).
 * A CLOSE's reply also waits, at most USAGE_WAIT_NS, for the commit of the
 * tick that carries the allocation's final usage row
 * (gs_agent_usage_queued/_committed); past that the reply goes out and
 * the row stays queued in the usage store, which retries until it lands.
 * A requester that disconnects (or gives up waiting) before its request
 * is checked has it dropped.  After that, a CLOSE, LABEL or SET completes
 * without a reply (its reply goes to `sink`); a CREATE is not carried
 * out, since nobody would know the allocation (it would hold its shares
 * until someone found and closed it): the table on disk, which has it, is
 * written again without it first (a `sync` request, ahead of the rest).
 */

#define USAGE_WAIT_NS	(2000000000ull)
#define FLUSH_WAIT_NS	(1000000000ull)
#define DURABLE_TICK_NS	(100000000ull)

struct dop {
	struct dop *next;
	int sync;		/* no request: write the table as it is */
	struct gs_conn *c;	/* requester; &ag->sink once it is gone */
	struct gs_msg m;	/* the request */
	struct gs_alloc_req req;	/* CREATE: with its defaults */
	uint64_t created;	/* CREATE: the creation time written */
	struct gs_msg rep;	/* CLOSE: the reply, held for the usage */
	int flushed;		/* CLOSE: checked, its usage so far queued */
	uint64_t tick;		/* CLOSE: the usage tick waited for */
	uint64_t deadline;	/* CLOSE: reply anyway then (monotonic) */
};

static void durable_next(struct gs_agent *ag, struct gs_conn *from);

static int setmem_pending(struct gs_agent *ag, uint64_t id)
{
	struct dop *op;

	for (op = ag->dq_head; op != NULL; op = op->next)
		if (!op->sync && op->m.type == GS_MSG_ALLOC_SET_MEM &&
		    op->m.u.setmem.id == id)
			return 1;
	return 0;
}

/* SET_MEM: the allocation with no process attached and the limit that
 * fits beside the others on its GPU (in *limit), or NULL when refused
 * (the error is queued). */
static struct gs_alloc *setmem_check(struct gs_conn *c, const struct gs_msg *m,
				     uint64_t *limit)
{
	struct gs_agent *ag = c->ag;
	struct gs_alloc *a;
	struct gs_gpu *g;
	struct gs_error merr;

	if (need_root(c, m) < 0 ||
	    (a = need_alloc(c, m, m->u.setmem.id)) == NULL)
		return NULL;
	if (a->nattached > 0) {
		reply_err(c, m->seq, GS_ESTATE, "allocation %llu has %u "
			  "process(es) attached: its memory limit changes "
			  "only while none is", (unsigned long long)a->id,
			  a->nattached);
		return NULL;
	}
	g = gpu_of(ag, a);
	if (g == NULL) {
		reply_err(c, m->seq, GS_ESTATE, "allocation %llu is on no GPU "
			  "of this node", (unsigned long long)a->id);
		return NULL;
	}
	/* settled as if it were created anew: the others' limits only */
	if (gs_mem_settle(&ag->cfg, g->d.index, g->d.mem_total,
			  g->mem_limits - a->mem_limit, g->nallocs - 1,
			  a->shares, m->u.setmem.mem_limit, limit,
			  &merr) < 0) {
		reply_err(c, m->seq, merr.code, "allocation %llu: %s",
			  (unsigned long long)a->id, merr.msg);
		return NULL;
	}
	return a;
}

/* Write out what was queued for c outside its own event callback. */
static void durable_flush(struct gs_agent *ag, struct gs_conn *c,
			  struct gs_conn *from)
{
	if (c == &ag->sink || c == from)
		return;
	conn_flush(c);
	if (c->closing)
		conn_close(c);
}

/* c is closing: its requests complete without it. */
static void durable_conn_gone(struct gs_agent *ag, struct gs_conn *c)
{
	struct dop *op;

	for (op = ag->dq_head; op != NULL; op = op->next)
		if (op->c == c)
			op->c = &ag->sink;
	for (op = ag->uwait; op != NULL; op = op->next)
		if (op->c == c)
			op->c = &ag->sink;
}

/* The table as it will be after the change: without allocation `drop`
 * (0: none), with *put in place of the entry of its id or, for a new id,
 * after the others (NULL: none), and the id counter at next_id. */
static int state_build(struct gs_agent *ag, uint64_t drop,
		       const struct gs_state_alloc *put, uint64_t next_id,
		       struct gs_state *st, struct gs_error *err)
{
	struct gs_state_alloc sa;
	struct gs_alloc *a;
	int placed = 0;

	memset(st, 0, sizeof(*st));
	st->seq = ag->state_seq + 1;
	st->old_file = ag->state_old_file;
	st->next_id = next_id;
	for (a = gs_alloc_first(ag->allocs); a != NULL;
	     a = gs_alloc_next(ag->allocs, a)) {
		if (a->id == drop)
			continue;
		if (put != NULL && put->id == a->id) {
			sa = *put;
			placed = 1;
		} else {
			state_entry(ag, a, &sa);
		}
		if (gs_state_add(st, &sa, err) < 0)
			goto fail;
	}
	if (put != NULL && !placed && gs_state_add(st, put, err) < 0)
		goto fail;
	return 0;
fail:
	gs_state_clear(st);
	return -1;
}

static void durable_done(void *arg, const struct gs_error *err);

/* Test hook: with GSHARED_TEST_CRASH naming `point` in its environment the
 * agent kills itself there (SIGKILL, as a crash would), so that the tests
 * can stop it in a window that a random kill rarely hits.  Only whoever
 * starts the agent sets its environment. */
static void crash_point(const char *point)
{
	const char *v = getenv("GSHARED_TEST_CRASH");

	if (v != NULL && strcmp(v, point) == 0)
		raise(SIGKILL);
}

/* CLOSE op, just checked: accounting queues allocation a's usage so far;
 * op->tick is the tick its table write waits for (0: none). */
static void close_flush(struct gs_agent *ag, struct dop *op,
			const struct gs_alloc *a)
{
	uint64_t mark = ag->usage_queued;

	op->flushed = 1;
	op->tick = 0;
	gs_alloc_notify(ag->allocs, GS_AEV_CLOSING, a);
	if (ag->usage_queued != mark && !ag->usage_stalled &&
	    ag->usage_committed < ag->usage_queued) {
		op->tick = ag->usage_queued;
		op->deadline = gs_now_ns() + FLUSH_WAIT_NS;
	}
}

/* Does CLOSE op still wait for its usage so far to be committed?  Past
 * its deadline it goes on: the row stays queued in the store. */
static int close_waits(struct gs_agent *ag, struct dop *op)
{
	if (op->tick == 0 || op->tick <= ag->usage_committed) {
		op->tick = 0;
		return 0;
	}
	if (gs_now_ns() < op->deadline)
		return 1;
	log_warnx("allocation %llu: closing; its usage so far is not on "
		  "disk yet (the usage store is behind): kept in memory and "
		  "retried", (unsigned long long)op->m.u.id);
	op->tick = 0;
	ag->usage_stalled = 1;
	return 0;
}

/* Check the request at the head and hand its table to the writer: 0, or
 * -1 when it was refused (the error is queued). */
static int durable_plan(struct gs_agent *ag, struct dop *op)
{
	struct gs_conn *c = op->c;
	const struct gs_msg *m = &op->m;
	struct gs_state_alloc sa, *put = NULL;
	struct gs_state st;
	struct gs_error err;
	struct gs_alloc *a = NULL;
	struct gs_gpu *g;
	uint64_t drop = 0, next_id = gs_alloc_next_id(ag->allocs);

	switch (op->sync ? 0 : m->type) {
	case 0:
		break;
	case GS_MSG_ALLOC_CREATE:
		g = create_check(c, m, &op->req);
		if (g == NULL)
			return -1;
		op->created = unix_ns();
		memset(&sa, 0, sizeof(sa));
		sa.id = next_id;
		sa.gpu = op->req.gpu;
		snprintf(sa.gpu_uuid, sizeof(sa.gpu_uuid), "%s", g->d.uuid);
		sa.shares = op->req.shares;
		sa.weight = op->req.weight;
		sa.priority = op->req.priority;
		sa.mode = op->req.mode;
		sa.uid = op->req.uid;
		sa.flags = op->req.flags;
		sa.created_unix_ns = op->created;
		sa.labels = op->req.labels;
		sa.mem_req = m->u.req.mem_limit;	/* asked for, 0: default */
		put = &sa;
		next_id++;
		break;
	case GS_MSG_ALLOC_CLOSE:
		if (!op->flushed) {	/* not checked yet */
			if (need_root(c, m) < 0 ||
			    (a = need_alloc(c, m, m->u.id)) == NULL)
				return -1;
			if (m->u.close.end_state >= GS_END_MAX) {
				reply_err(c, m->seq, GS_EINVAL,
					  "unknown end state %u",
					  m->u.close.end_state);
				return -1;
			}
			close_flush(ag, op, a);
		}
		/* resumed by gs_agent_usage_committed or on_durable_tick */
		if (close_waits(ag, op))
			return 0;
		crash_point("close-usage");
		drop = m->u.id;
		break;
	case GS_MSG_ALLOC_LABEL:
		if (need_root(c, m) < 0 ||
		    (a = need_alloc(c, m, m->u.label.id)) == NULL)
			return -1;
		state_entry(ag, a, &sa);
		sa.labels = m->u.label.labels;
		put = &sa;
		break;
	case GS_MSG_ALLOC_SET_MEM:
		a = setmem_check(c, m, &op->req.mem_limit);
		if (a == NULL)
			return -1;
		state_entry(ag, a, &sa);
		sa.mem_req = m->u.setmem.mem_limit;
		put = &sa;
		break;
	default:	/* SET_WEIGHT, SET_PRIORITY */
		a = set_check(c, m);
		if (a == NULL)
			return -1;
		state_entry(ag, a, &sa);
		if (m->type == GS_MSG_SET_WEIGHT)
			sa.weight = m->u.set.value;
		else
			sa.priority = m->u.set.value;
		put = &sa;
		break;
	}
	if (state_build(ag, drop, put, next_id, &st, &err) < 0)
		goto fail;
	if (gs_durable_save(ag->dur, ag->state_path, &st, durable_done, ag,
			    &err) < 0) {
		gs_state_clear(&st);
		goto fail;
	}
	return 0;
fail:
	reply_err(c, m->seq, err.code, "%s refused, nothing changed: %s",
		  gs_msg_type_name(m->type), err.msg);
	return -1;
}

/* Start the next request that needs a write, unless one is in flight.
 * from: the connection whose event is being handled (its output is
 * written when that returns), NULL from the writer's completion. */
static void durable_next(struct gs_agent *ag, struct gs_conn *from)
{
	struct dop *op;

	while ((op = ag->dq_head) != NULL && !gs_durable_busy(ag->dur)) {
		if ((op->sync || op->flushed || op->c != &ag->sink) &&
		    durable_plan(ag, op) == 0)
			return;
		ag->dq_head = op->next;
		if (ag->dq_head == NULL)
			ag->dq_tail = NULL;
		durable_flush(ag, op->c, from);
		free(op);
	}
}

static void durable_request(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_agent *ag = c->ag;
	struct dop *op = calloc(1, sizeof(*op));

	if (op == NULL) {
		reply_err(c, m->seq, GS_ENOMEM, "out of memory");
		return;
	}
	op->c = c;
	op->m = *m;
	if (ag->dq_tail != NULL)
		ag->dq_tail->next = op;
	else
		ag->dq_head = op;
	ag->dq_tail = op;
	durable_next(ag, c);
}

/* Send the reply of a CLOSE that waited for its usage row. */
static void usage_reply(struct gs_agent *ag, struct dop *op)
{
	conn_queue(op->c, &op->rep);
	durable_flush(ag, op->c, NULL);
	free(op);
}

/* A CREATE whose requester left while its table was being written: not
 * carried out; the table is written again without it, before anything
 * else. */
static void create_undo(struct gs_agent *ag)
{
	struct dop *sync = calloc(1, sizeof(*sync));
	uint64_t id = gs_alloc_next_id(ag->allocs);

	log_warnx("allocation %llu not created: its requester left before "
		  "the allocation table was written", (unsigned long long)id);
	/* the id was on disk: never give it to another allocation */
	gs_alloc_set_next_id(ag->allocs, id + 1);
	if (sync == NULL) {
		log_warnx("out of memory: the table file names an allocation "
			  "%llu that does not exist until the next write",
			  (unsigned long long)id);
		return;
	}
	sync->sync = 1;
	sync->c = &ag->sink;
	sync->next = ag->dq_head;
	ag->dq_head = sync;
	if (ag->dq_tail == NULL)
		ag->dq_tail = sync;
}

/* The writer is done with the table of the request at the head. */
static void durable_done(void *arg, const struct gs_error *err)
{
	struct gs_agent *ag = arg;
	struct dop *op = ag->dq_head;
	struct gs_conn *c;
	uint64_t mark;

	if (op == NULL)
		return;
	ag->dq_head = op->next;
	if (ag->dq_head == NULL)
		ag->dq_tail = NULL;
	c = op->c;
	if (err != NULL && op->sync) {
		ag->state_failed++;
		log_warnx("state file: %s; it still names an allocation that "
			  "was not created, until the next write", err->msg);
	} else if (err != NULL) {
		if (ag->state_failed++ % 100 == 0)
			log_warnx("state file: %s; %s refused, nothing changed "
				  "(%llu refused in a row)", err->msg,
				  gs_msg_type_name(op->m.type),
				  (unsigned long long)ag->state_failed);
		reply_err(c, op->m.seq, GS_EIO, "%s refused, nothing "
			  "changed: the allocation table could not be "
			  "written: %s", gs_msg_type_name(op->m.type),
			  err->msg);
		goto out;
	}
	ag->state_seq++;
	ag->state_old_file = 0;
	if (ag->state_failed > 0)
		log_info("state file %s written again (%llu requests were "
			 "refused)", ag->state_path,
			 (unsigned long long)ag->state_failed);
	ag->state_failed = 0;
	switch (op->sync ? 0 : op->m.type) {
	case 0:
		break;
	case GS_MSG_ALLOC_CREATE:
		if (c == &ag->sink) {
			create_undo(ag);
			break;
		}
		create_apply(c, &op->m, &op->req, op->created);
		break;
	case GS_MSG_ALLOC_CLOSE:
		crash_point("close-table");
		mark = ag->usage_queued;
		close_apply(c, &op->m, &op->rep);
		if (op->rep.type != GS_MSG_ALLOC_INFO)
			break;
		if (ag->usage_queued != mark &&
		    ag->usage_committed < ag->usage_queued) {
			op->tick = ag->usage_queued;
			op->deadline = gs_now_ns() + USAGE_WAIT_NS;
			op->next = ag->uwait;
			ag->uwait = op;
			op = NULL;
			break;
		}
		conn_queue(c, &op->rep);
		break;
	case GS_MSG_ALLOC_LABEL:
		label_apply(c, &op->m);
		break;
	case GS_MSG_ALLOC_SET_MEM:
		setmem_apply(c, &op->m, op->req.mem_limit);
		break;
	default:
		set_apply(c, &op->m);
		break;
	}
out:
	if (op != NULL) {
		durable_flush(ag, c, NULL);
		free(op);
	}
	durable_next(ag, NULL);
}

void gs_agent_set_warning(struct gs_agent *ag, const char *msg)
{
	snprintf(ag->warning, sizeof(ag->warning), "%s", msg);
}

void gs_agent_close_totals(struct gs_agent *ag, uint64_t id, uint64_t gpu_ns,
			   uint64_t held_ns)
{
	ag->fin_id = id;
	ag->fin_gpu_ns = gpu_ns;
	ag->fin_held_ns = held_ns;
}

void gs_agent_usage_queued(struct gs_agent *ag, uint64_t tick)
{
	if (tick > ag->usage_queued)
		ag->usage_queued = tick;
}

void gs_agent_usage_committed(struct gs_agent *ag, uint64_t tick)
{
	struct dop **pp = &ag->uwait, *op;

	if (tick <= ag->usage_committed)
		return;
	ag->usage_committed = tick;
	ag->usage_stalled = 0;
	while ((op = *pp) != NULL) {
		if (op->tick > tick) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		usage_reply(ag, op);
	}
	/* a CLOSE whose table waits for its usage so far */
	if (ag->dq_head != NULL && !gs_durable_busy(ag->dur))
		durable_next(ag, NULL);
}

/* CLOSE replies whose usage row is late: answer, the row follows. */
static void on_durable_tick(struct gs_loop *l, uint64_t now, void *arg)
{
	struct gs_agent *ag = arg;
	struct dop **pp = &ag->uwait, *op;

	(void)l;
	now = gs_now_ns();
	while ((op = *pp) != NULL) {
		if (op->deadline > now) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		log_warnx("allocation %llu closed; its final usage row is not "
			  "on disk yet (the usage store is behind): kept in "
			  "memory and retried", (unsigned long long)op->m.u.id);
		usage_reply(ag, op);
	}
	/* a CLOSE whose table waited too long for its usage so far */
	if (ag->dq_head != NULL && !gs_durable_busy(ag->dur))
		durable_next(ag, NULL);
}

/* DRAIN and GPU_FAULT: root only, naming one of this node's GPUs (both
 * carry it in the drain payload).  Replies with the error and returns NULL
 * when the request cannot go on. */
static struct gs_gpu *root_gpu_request(struct gs_conn *c,
				       const struct gs_msg *m)
{
	struct gs_gpu *g;

	if (need_root(c, m) < 0)
		return NULL;
	g = gpu_by_index(c->ag, m->u.drain.gpu);
	if (g == NULL)
		reply_err(c, m->seq, GS_ENOENT, "no GPU %d on this node",
			  m->u.drain.gpu);
	return g;
}

static void req_drain(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_gpu *g;

	g = root_gpu_request(c, m);
	if (g == NULL)
		return;
	g->drained = m->u.drain.on ? 1 : 0;
	log_info("gpu %d %s", g->d.index,
		 g->drained ? "drained" : "accepts allocations again");
	reply_ok(c, m->seq);
}

/* Inject or clear a fault on a simulated GPU: the test path for health
 * handling (the device plugin's Unhealthy devices, refused allocations).
 * On a real GPU only clearing is allowed: it forgets a critical XID. */
static void req_gpu_fault(struct gs_conn *c, const struct gs_msg *m)
{
	struct gs_gpu *g;

	g = root_gpu_request(c, m);
	if (g == NULL)
		return;
	if (!g->d.simulated && m->u.drain.on) {
		reply_err(c, m->seq, GS_EINVAL, "GPU %d is not simulated: "
			  "faults can only be injected into simulated GPUs",
			  m->u.drain.gpu);
		return;
	}
	if (!g->d.simulated) {
		if (g->xid_bad)
			log_info("gpu %d: %s cleared by uid %u", g->d.index,
				 g->xid_why, (unsigned)c->uid);
		gs_agent_gpu_health(c->ag, (uint32_t)(g - c->ag->gpus),
				    GS_HEALTH_XID, 1, NULL);
	} else {
		gs_agent_gpu_health(c->ag, (uint32_t)(g - c->ag->gpus),
				    GS_HEALTH_FAULT, !m->u.drain.on, NULL);
	}
	reply_ok(c, m->seq);
}

static void dispatch(struct gs_conn *c, const struct gs_msg *m)
{
	switch (m->type) {
	case GS_MSG_PING:
		reply_ok(c, m->seq);
		break;
	case GS_MSG_ALLOC_CREATE:
	case GS_MSG_ALLOC_CLOSE:
	case GS_MSG_ALLOC_LABEL:
	case GS_MSG_ALLOC_SET_MEM:
	case GS_MSG_SET_WEIGHT:
	case GS_MSG_SET_PRIORITY:
		durable_request(c, m);
		break;
	case GS_MSG_ATTACH:
		req_attach(c, m);
		break;
	case GS_MSG_TOKEN_WANT:
		req_want(c, m);
		break;
	case GS_MSG_TOKEN_RELEASE:
		req_release(c, m);
		break;
	case GS_MSG_TOKEN_UNWANT:
		req_unwant(c, m);
		break;
	case GS_MSG_STATUS:
		req_status(c, m);
		break;
	case GS_MSG_DRAIN:
		req_drain(c, m);
		break;
	case GS_MSG_GPU_FAULT:
		req_gpu_fault(c, m);
		break;
	default:
		/* a known type that only the agent sends */
		reply_err(c, m->seq, GS_EUNSUPP,
			  "%s is not a request the agent accepts",
			  gs_msg_type_name(m->type));
		break;
	}
}

/* ---- connections ---- */

static void conn_close(struct gs_conn *c)
{
	struct gs_agent *ag = c->ag;

	durable_conn_gone(ag, c);

	if (c->alloc != NULL) {
		struct gs_alloc *a = c->alloc;

		c->alloc = NULL;
		detach_att(ag, a, c->slot, gs_now_ns());
		log_info("allocation %llu: job process %d detached (%u still "
			 "attached)", (unsigned long long)a->id, (int)c->pid,
			 a->nattached);
	}
	gs_loop_del_fd(ag->loop, c->fd);
	close(c->fd);
	if (c->pass_fd >= 0)
		close(c->pass_fd);
	if (c->pass_mem >= 0)
		close(c->pass_mem);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		ag->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	ag->nconns--;
	gs_connlimit_del(ag->climit, c->uid);
	gs_wbuf_free(&c->out);
	free(c->rbuf);
	free(c);
}

/* A type only the agent sends (replies and events). */
static int agent_only(uint16_t type)
{
	switch (type) {
	case GS_MSG_ERROR:
	case GS_MSG_OK:
	case GS_MSG_ALLOC_INFO:
	case GS_MSG_ATTACHED:
	case GS_MSG_TOKEN_GRANT:
	case GS_MSG_TOKEN_SOON:
	case GS_MSG_STATUS_REPLY:
		return 1;
	default:
		return 0;
	}
}

/* Handle every whole frame in rbuf.  Returns -1 when the connection must
 * be closed after its output is written. */
static int conn_process(struct gs_conn *c)
{
	struct gs_frame_hdr h;
	struct gs_error err;
	struct gs_msg m;
	size_t off = 0, used;
	int rv = 0, r;

	while (c->rlen - off >= GS_FRAME_HDR_SIZE) {
		if (gs_frame_hdr_decode(c->rbuf + off, c->rlen - off, &h,
					&err) < 0) {
			reply_err(c, 0, err.code, "%s", err.msg);
			rv = -1;
			break;
		}
		if (c->rlen - off - GS_FRAME_HDR_SIZE < h.length) {
			size_t need = GS_FRAME_HDR_SIZE + h.length;

			if (need > c->rcap) {
				/* make room for the whole frame */
				uint8_t *nb;

				if (off > 0) {
					memmove(c->rbuf, c->rbuf + off,
						c->rlen - off);
					c->rlen -= off;
					off = 0;
				}
				nb = realloc(c->rbuf, need);
				if (nb == NULL) {
					reply_err(c, h.seq, GS_ENOMEM,
						  "out of memory");
					rv = -1;
					break;
				}
				c->rbuf = nb;
				c->rcap = need;
			}
			break;
		}
		if (agent_only(h.type)) {
			/* not decoded: malformed or not, the answer is the
			 * same and the connection goes on */
			reply_err(c, h.seq, GS_EUNSUPP, "%s is not a request "
				  "the agent accepts",
				  gs_msg_type_name(h.type));
			off += GS_FRAME_HDR_SIZE + h.length;
			continue;
		}
		r = gs_frame_parse(c->rbuf + off, c->rlen - off, &m, &used,
				   &err);
		if (r < 0) {
			reply_err(c, h.seq, err.code, "%s", err.msg);
			if (err.code != GS_EUNSUPP) {
				rv = -1;
				break;
			}
			off += GS_FRAME_HDR_SIZE + h.length;
			continue;
		}
		off += used;
		dispatch(c, &m);
		gs_msg_clear(&m);
		if (c->closing)
			break;
	}
	if (off > 0) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	return rv;
}

static void on_conn(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_conn *c = arg;
	size_t budget = READ_BUDGET;
	ssize_t n;

	(void)l;
	(void)fd;
	if (events & EPOLLOUT)
		conn_flush(c);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
		while (!c->closing && budget > 0) {
			if (c->rlen == c->rcap) {
				/* conn_process grows rbuf for big frames;
				 * a full buffer here holds whole frames */
				if (conn_process(c) < 0)
					c->closing = 1;
				if (c->rlen == c->rcap)
					break;
				continue;
			}
			n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n <= 0) {
				/* EOF or error: the peer is gone */
				conn_close(c);
				return;
			}
			c->rlen += (size_t)n;
			budget -= (size_t)n < budget ? (size_t)n : budget;
			if (conn_process(c) < 0)
				c->closing = 1;
		}
	}
	conn_flush(c);
	/* a closing connection gets one chance to take its ERROR: waiting
	 * longer would let a peer that never reads pin the connection */
	if (c->closing)
		conn_close(c);
}

/* Tell a refused peer why (one ERROR frame, seq 0), then close.  What
 * it already sent is read first: closing a unix socket with unread
 * input resets the peer, which would lose the ERROR. */
static void refuse_conn(int fd, const char *why)
{
	struct gs_msg m;
	struct gs_wbuf b;
	struct gs_error err;
	char junk[512];
	int i;

	for (i = 0; i < 8 && recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0;
	     i++)
		;
	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_ERROR;
	m.u.error.code = GS_EBUSY;
	snprintf(m.u.error.msg, sizeof(m.u.error.msg), "connection refused: "
		 "%s", why);
	gs_wbuf_init(&b);
	if (gs_msg_encode(&m, &b, &err) == 0 &&
	    send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		log_debug("refused client: %s", strerror(errno));
	gs_wbuf_free(&b);
	close(fd);
}

/* Out of file descriptors: the pending connection would make the
 * listening socket ready forever.  Give up the spare fd to accept it
 * and refuse it, then take the spare back. */
static void refuse_emfile(struct gs_agent *ag, int lfd)
{
	int cfd;

	if (ag->refused_logged++ % 1000 == 0)
		log_warnx("refusing clients: out of file descriptors (%s)",
			  strerror(errno));
	if (ag->spare_fd >= 0) {
		close(ag->spare_fd);
		ag->spare_fd = -1;
	}
	cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (cfd >= 0)
		refuse_conn(cfd, "the agent is out of file descriptors");
	ag->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void on_listen(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_agent *ag = arg;
	struct gs_error err;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct gs_conn *c;
	char why[160];
	int cfd;

	(void)l;
	(void)events;
	for (;;) {
		cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				refuse_emfile(ag, fd);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("accept");
			return;
		}
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
			log_warn("SO_PEERCRED");
			close(cfd);
			continue;
		}
		if (gs_connlimit_add(ag->climit, cr.uid, ag->cfg.max_clients,
				     ag->cfg.root_reserved_clients,
				     ag->cfg.max_clients_per_uid, why,
				     sizeof(why)) < 0) {
			if (ag->refused_logged++ % 1000 == 0)
				log_warnx("refusing client pid %d uid %u: %s",
					  (int)cr.pid, (unsigned)cr.uid, why);
			refuse_conn(cfd, why);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c != NULL)
			c->rbuf = malloc(RBUF_INIT);
		if (c == NULL || c->rbuf == NULL) {
			log_warnx("out of memory accepting a client");
			if (c != NULL)
				free(c);
			gs_connlimit_del(ag->climit, cr.uid);
			close(cfd);
			continue;
		}
		c->ag = ag;
		c->fd = cfd;
		c->uid = cr.uid;
		c->gid = cr.gid;
		c->pid = cr.pid;
		c->rcap = RBUF_INIT;
		c->pass_fd = -1;
		c->pass_mem = -1;
		gs_wbuf_init(&c->out);
		if (gs_loop_add_fd(ag->loop, cfd, EPOLLIN | EPOLLRDHUP,
				   on_conn, c, &err) < 0) {
			log_warnx("%s", err.msg);
			free(c->rbuf);
			free(c);
			gs_connlimit_del(ag->climit, cr.uid);
			close(cfd);
			continue;
		}
		c->next = ag->conns;
		if (ag->conns != NULL)
			ag->conns->prev = c;
		ag->conns = c;
		ag->nconns++;
		log_debug("client pid %d uid %u connected", (int)cr.pid,
			  (unsigned)cr.uid);
	}
}

/* Room for max_clients connections and the agent's own files: raise the
 * soft RLIMIT_NOFILE (at most to the hard limit), or say how many
 * clients fit.  Beyond the limit, accept fails and refuse_emfile steps
 * in. */
#define NOFILE_OWN	256u
static void fit_nofile(struct gs_agent *ag)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)ag->cfg.max_clients + NOFILE_OWN;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want
			      ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("setrlimit(RLIMIT_NOFILE, %llu)",
			 (unsigned long long)rl.rlim_cur);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want)
		log_warnx("max_clients %u: the open file limit is %llu, room "
			  "for about %llu clients", ag->cfg.max_clients,
			  (unsigned long long)rl.rlim_cur,
			  rl.rlim_cur > NOFILE_OWN
				  ? (unsigned long long)(rl.rlim_cur -
							 NOFILE_OWN)
				  : 0ull);
}

/* ---- config reload, signals ---- */

static void apply_params(struct gs_agent *ag)
{
	struct gs_sched_params p;
	uint32_t i;
	uint64_t now = gs_now_ns();

	sched_params_of(&ag->cfg, &p);
	for (i = 0; i < ag->ngpus; i++) {
		gs_sched_set_params(ag->gpus[i].sched, &p);
		gpu_step(ag, &ag->gpus[i], now);
	}
	update_wakeup(ag);
}

static void reload(struct gs_agent *ag)
{
	struct gs_agent_config nc;
	struct gs_error err;

	if (ag->cfg_path == NULL) {
		log_info("SIGHUP: no configuration file to reload");
		return;
	}
	if (gs_agent_config_load(ag->cfg_path, &nc, &err) < 0) {
		log_warnx("reload failed, keeping the running configuration: "
			  "%s", err.msg);
		return;
	}
	if (strcmp(nc.socket, ag->cfg.socket) != 0)
		log_warnx("reload: socket change needs a restart; keeping %s",
			  ag->cfg.socket);
	if (nc.shares_per_gpu != ag->cfg.shares_per_gpu)
		log_warnx("reload: shares_per_gpu change needs a restart; "
			  "keeping %u", ag->cfg.shares_per_gpu);
	if (nc.gpu_source != ag->cfg.gpu_source || nc.nsim != ag->cfg.nsim ||
	    nc.ngpus != ag->cfg.ngpus)
		log_warnx("reload: GPU changes need a restart");
	if (nc.log != ag->cfg.log ||
	    strcmp(nc.log_file, ag->cfg.log_file) != 0)
		log_warnx("reload: log target change needs a restart");
	nc.log = ag->cfg.log;
	memcpy(nc.log_file, ag->cfg.log_file, sizeof(nc.log_file));
	snprintf(nc.socket, sizeof(nc.socket), "%s", ag->cfg.socket);
	nc.shares_per_gpu = ag->cfg.shares_per_gpu;
	nc.gpu_source = ag->cfg.gpu_source;
	nc.nsim = ag->cfg.nsim;
	nc.ngpus = ag->cfg.ngpus;
	memcpy(nc.gpus, ag->cfg.gpus, sizeof(nc.gpus));
	ag->cfg = nc;
	log_setverbose(nc.verbose);
	fit_nofile(ag);
	apply_params(ag);
	log_info("configuration reloaded: policy %s, slice %.3f ms, grace "
		 "%.3f ms, escalation %s", policy_name(nc.policy),
		 (double)nc.slice_ns / 1e6, (double)nc.grace_ns / 1e6,
		 nc.escalation == GS_ESC_KILL ? "kill" : "hold");
}

static void on_signal(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_agent *ag = arg;
	struct signalfd_siginfo si;

	(void)events;
	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGHUP:
			reload(ag);
			break;
		case SIGTERM:
		case SIGINT:
			log_info("signal %u: shutting down", si.ssi_signo);
			ag->stopping = 1;
			gs_loop_stop(l);
			break;
		default:
			break;
		}
	}
}

/* ---- setup ---- */

static int open_socket(struct gs_agent *ag, struct gs_error *err)
{
	struct sockaddr_un sa;
	const char *path = ag->cfg.socket;
	char dir[sizeof(sa.sun_path)];
	char *slash;
	int fd, probe;

	if (strlen(path) >= sizeof(sa.sun_path))
		return gs_error_set(err, GS_ECONFIG, "socket path too long: %s",
				    path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return gs_error_errno(err, GS_EIO, "mkdir %s", dir);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* a live agent answers on the socket; a stale file does not */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0) {
		if (connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			return gs_error_set(err, GS_EBUSY,
					    "another gshared is listening on "
					    "%s", path);
		}
		close(probe);
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return gs_error_errno(err, GS_EIO, "unlink %s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		gs_error_errno(err, GS_EIO, "bind %s", path);
		goto out_close;
	}
	ag->sock_made = 1;
	/* anyone may connect; SO_PEERCRED decides what they may do */
	if (chmod(path, 0666) < 0) {
		gs_error_errno(err, GS_EIO, "chmod %s", path);
		goto out_close;
	}
	if (listen(fd, SOMAXCONN) < 0) {
		gs_error_errno(err, GS_EIO, "listen %s", path);
		goto out_close;
	}
	ag->lfd = fd;
	return 0;

out_close:
	close(fd);
	return -1;
}

static int open_signals(struct gs_agent *ag, struct gs_error *err)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return gs_error_errno(err, GS_EIO, "sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	ag->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ag->sfd < 0)
		return gs_error_errno(err, GS_EIO, "signalfd");
	return 0;
}

struct gs_agent *gs_agent_new(const struct gs_agent_config *cfg,
			      const char *cfg_path, struct gs_error *err)
{
	struct gs_gpu_desc descs[GS_MAX_GPUS];
	struct gs_sched_params p;
	struct gs_agent *ag;
	const char *note = NULL;
	uint32_t i, n = 0;

	ag = calloc(1, sizeof(*ag));
	if (ag == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return NULL;
	}
	ag->cfg = *cfg;
	ag->lfd = ag->sfd = ag->spare_fd = -1;
	if (cfg_path != NULL) {
		ag->cfg_path = strdup(cfg_path);
		if (ag->cfg_path == NULL) {
			gs_error_set(err, GS_ENOMEM, "out of memory");
			goto out_free;
		}
	}
	/* before anything can start a thread (NVML's nvmlInit does): every
	 * thread inherits the blocked mask, so SIGHUP/SIGTERM reach only the
	 * signalfd and never kill the process by their default action */
	if (open_signals(ag, err) < 0)
		goto out_free;
	if (gs_gpu_discover(cfg, descs, &n, &note, err) < 0)
		goto out_free;
	if (note != NULL)
		log_warnx("%s (%s)", note, err->msg);
	ag->allocs = gs_alloc_table_new();
	ag->climit = gs_connlimit_new();
	ag->loop = gs_loop_new(err);
	if (ag->allocs == NULL || ag->climit == NULL || ag->loop == NULL) {
		if (ag->allocs == NULL || ag->climit == NULL)
			gs_error_set(err, GS_ENOMEM, "out of memory");
		goto out_free;
	}
	sched_params_of(cfg, &p);
	for (i = 0; i < n; i++) {
		struct gs_gpu *g = &ag->gpus[i];

		g->d = descs[i];
		g->shares_total = cfg->shares_per_gpu;
		g->healthy = 1;
		g->next_ns = UINT64_MAX;
		g->sched = gs_sched_new(&p);
		if (g->sched == NULL) {
			gs_error_set(err, GS_ENOMEM, "out of memory");
			goto out_free;
		}
		ag->ngpus++;
		log_info("gpu %d: %s %s%s", g->d.index, g->d.uuid, g->d.name,
			 g->d.simulated ? " (simulated)" : "");
	}
	ag->sink.ag = ag;
	ag->sink.fd = -1;
	ag->sink.pass_fd = -1;
	ag->sink.pass_mem = -1;
	ag->sink.closing = 1;
	gs_wbuf_init(&ag->sink.out);
	if (mkdir(cfg->state_dir, 0755) < 0 && errno != EEXIST)
		log_warn("state_dir %s", cfg->state_dir);
	/* after open_signals: the writer thread inherits the blocked mask */
	if (gs_durable_new(ag->loop, &ag->dur, err) < 0 ||
	    gs_loop_add_tick(ag->loop, DURABLE_TICK_NS, on_durable_tick, ag,
			     err) < 0)
		goto out_free;
	if (open_socket(ag, err) < 0)
		goto out_free;
	fit_nofile(ag);
	ag->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* only once the socket is ours: a second gshared must not touch the
	 * running one's file */
	if (snprintf(ag->state_path, sizeof(ag->state_path), "%s/%s",
		     cfg->state_dir, GS_STATE_FILE) >=
	    (int)sizeof(ag->state_path)) {
		gs_error_set(err, GS_ECONFIG, "state_dir too long: %s",
			     cfg->state_dir);
		goto out_free;
	}
	state_restore(ag);
	ag->mps = gs_mps_new(ag, err);
	if (ag->mps == NULL)
		goto out_free;
	ag->space = gs_space_agent_new(ag, ag->mps, err);
	if (ag->space == NULL)
		goto out_free;
	if (gs_loop_add_fd(ag->loop, ag->lfd, EPOLLIN, on_listen, ag,
			   err) < 0 ||
	    gs_loop_add_fd(ag->loop, ag->sfd, EPOLLIN, on_signal, ag,
			   err) < 0)
		goto out_free;
	log_info("listening on %s: %u GPUs, policy %s, slice %.3f ms",
		 cfg->socket, ag->ngpus, policy_name(cfg->policy),
		 (double)cfg->slice_ns / 1e6);
	return ag;

out_free:
	gs_agent_free(ag);
	return NULL;
}

int gs_agent_run(struct gs_agent *ag, struct gs_error *err)
{
	return gs_loop_run(ag->loop, err);
}

void gs_agent_free(struct gs_agent *ag)
{
	uint32_t i;

	if (ag == NULL)
		return;
	ag->stopping = 1;
	gs_space_agent_free(ag->space);
	gs_mps_free(ag->mps);
	while (ag->conns != NULL)
		conn_close(ag->conns);
	if (ag->lfd >= 0)
		close(ag->lfd);
	if (ag->sock_made)
		unlink(ag->cfg.socket);
	if (ag->sfd >= 0)
		close(ag->sfd);
	gs_durable_free(ag->dur);	/* a write in flight ends first */
	while (ag->dq_head != NULL) {
		struct dop *op = ag->dq_head;

		ag->dq_head = op->next;
		free(op);
	}
	while (ag->uwait != NULL) {
		struct dop *op = ag->uwait;

		ag->uwait = op->next;
		free(op);
	}
	for (i = 0; i < ag->ngpus; i++)
		gs_sched_free(ag->gpus[i].sched);
	gs_alloc_table_free(ag->allocs);
	gs_connlimit_free(ag->climit);
	if (ag->spare_fd >= 0)
		close(ag->spare_fd);
	free(ag->loaded_ids);
	gs_loop_free(ag->loop);
	free(ag->cfg_path);
	free(ag);
}
