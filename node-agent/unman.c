/*
 * unman.c — GPU processes that bypass the launch gate (see unman.h).
 *
 * Threading: the worker owns its NVML handle (struct gs_gpu_util, its own
 * nvmlInit reference) and the /proc reads of the processes NVML lists; it
 * writes only res[]/nres/err under mu and signals ready_fd.  The loop
 * thread takes the results, classifies them against the allocation
 * table, runs the fair-queuing step and sends the signals.  A signal goes
 * through a pidfd; once it is open (the process can no longer be
 * replaced under it) the pid must still have the start time the worker
 * saw and a non-root owner, so a pid reused by another process, or a
 * process that exec'd a setuid program, is never signalled.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "gpu.h"
#include "gs_log.h"
#include "gs_proto.h"
#include "mps.h"
#include "unman.h"

#define MAXP 1024		/* processes per period, all GPUs */
#define PER_GPU 256

/* The pure parts (classification, fair queuing) are in unman_dfq.c. */

/* ---- /proc ---- */

/* GSHARE_ALLOC of pid, 0 when none (or unreadable). */
static uint64_t proc_alloc(uint32_t pid)
{
	static const char key[] = GS_ENV_ALLOC "=";
	char path[64], *buf;
	size_t len = 0, cap = 1 << 16, off;
	uint64_t id = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	buf = malloc(cap + 1);
	if (buf == NULL) {
		close(fd);
		return 0;
	}
	while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	for (off = 0; off < len; off += strlen(buf + off) + 1)
		if (strncmp(buf + off, key, sizeof(key) - 1) == 0) {
			char *end;

			id = strtoull(buf + off + sizeof(key) - 1, &end, 10);
			if (*end != '\0')
				id = 0;
			break;
		}
	free(buf);
	return id;
}

/* Start time (field 22 of /proc/PID/stat), owner, state and parent of
 * pid (state, ppid may be NULL); -1 when it is gone. */
static int proc_ident(uint32_t pid, uint64_t *start, uint32_t *uid,
		      char *state, uint32_t *ppid)
{
	char path[64], buf[1024], *p;
	struct stat st;
	ssize_t n;
	int fd, f;

	snprintf(path, sizeof(path), "/proc/%u", pid);
	if (stat(path, &st) < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	p++;
	if (state != NULL)
		*state = p[1];
	if (ppid != NULL)
		*ppid = (uint32_t)strtoul(p + 3, NULL, 10);
	/* after ")" come fields 3, 4, ...: skip to field 22 */
	for (f = 3; f < 22 && p != NULL; f++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	*start = strtoull(p + 1, NULL, 10);
	*uid = (uint32_t)st.st_uid;
	return 0;
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* Signal pid if it is still the process with that start time and is not
 * root's.  0, or -1 (gone, root's, refused). */
static int signal_proc(uint32_t pid, uint64_t start, int sig)
{
	uint64_t s2;
	uint32_t uid;
	int fd, rc;

	fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (fd < 0)
		return -1;
	rc = -1;
	/* checked after the pidfd pins the process: it is this one */
	if (proc_ident(pid, &s2, &uid, NULL, NULL) == 0 && s2 == start &&
	    uid != 0)
		rc = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
	close(fd);
	return rc < 0 ? -1 : 0;
}

/* ---- worker ---- */

struct stopped {
	uint32_t pid;
	uint64_t start, alloc;
};

struct astate {			/* per allocation seen with unmanaged procs */
	uint64_t id;
	uint64_t vt;
	int fresh, stopped;
	uint64_t est_total, est_pending;	/* since start; for accounting */
	uint64_t last_gpu_ns;	/* a->gpu_ns at the last period */
	int seen;		/* still open (this period) */
};

struct gs_unman {
	struct gs_agent *ag;
	struct gs_gpu_util *nv;
	uint32_t ngpu;
	uint32_t ti[GS_MAX_GPUS];	/* agent GPU table index */
	int32_t idx[GS_MAX_GPUS];	/* the GPU's index (NVML's) */
	uint64_t since_us[GS_MAX_GPUS];	/* worker only */
	pthread_t thr;
	int started, done;
	int ready_fd, stop_fd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gs_unman_proc scratch[MAXP];	/* worker only */
	struct gs_gpu_proc_sample smp[PER_GPU];	/* worker only */
	struct gs_unman_proc res[MAXP];	/* under mu */
	struct gs_unman_proc cur[MAXP];	/* loop only: res taken */
	unsigned ncur;			/* loop only: entries of cur */
	unsigned char cls[MAXP];	/* loop only: class of cur[i] */
	unsigned nres;
	int fresh;
	char err[GS_ERRMSG_MAX];	/* last NVML error, "" none (mu) */
	/* loop thread */
	char logged_err[GS_ERRMSG_MAX];
	uint64_t last_ns;
	struct astate *as;
	unsigned nas, cap;
	struct stopped *st;
	unsigned nst, stcap;
	uint64_t noown_est[GS_MAX_GPUS];
	struct gs_unman_row *rows;
	unsigned nrows, rowcap;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One period's scan of every GPU into r[] (at most MAXP). */
static unsigned scan(struct gs_unman *u, struct gs_unman_proc *r, char *err,
		     size_t errlen)
{
	struct gs_gpu_proc_sample *smp = u->smp;
	struct gs_gpu_proc_mem procs[PER_GPU];
	struct gs_error e;
	unsigned n = 0;
	int np, ns;

	err[0] = '\0';
	for (uint32_t g = 0; g < u->ngpu; g++) {
		np = gs_gpu_compute_procs(u->nv, u->idx[g], procs, PER_GPU,
					  &e);
		if (np < 0) {
			snprintf(err, errlen, "%s", e.msg);
			continue;
		}
		ns = gs_gpu_proc_util(u->nv, u->idx[g], u->since_us[g], smp,
				      PER_GPU, &e);
		if (ns < 0) {
			snprintf(err, errlen, "%s", e.msg);
			ns = 0;
		}
		for (int k = 0; k < ns; k++)
			if (smp[k].ts_us > u->since_us[g])
				u->since_us[g] = smp[k].ts_us;
		for (int i = 0; i < np && n < MAXP; i++) {
			struct gs_unman_proc *p = &r[n];
			uint64_t best = 0;

			if (procs[i].pid == 0)
				continue;
			memset(p, 0, sizeof(*p));
			p->pid = procs[i].pid;
			p->gpu = u->ti[g];
			p->mem = procs[i].bytes;
			for (int k = 0; k < ns; k++)
				if (smp[k].pid == p->pid &&
				    smp[k].ts_us >= best) {
					best = smp[k].ts_us;
					p->sm_util = smp[k].sm_util > 100 ?
						     100 : smp[k].sm_util;
				}
			if (proc_ident(p->pid, &p->start, &p->uid,
				       &p->state, &p->ppid) < 0)
				continue;	/* gone */
			p->alloc = proc_alloc(p->pid);
			n++;
		}
	}
	return n;
}

static void *worker(void *arg)
{
	struct gs_unman *u = arg;
	struct pollfd pf = { .fd = u->stop_fd, .events = POLLIN };
	struct gs_unman_proc *r = u->scratch;
	char err[GS_ERRMSG_MAX];
	uint64_t one = 1, end, now;
	unsigned n;
	int rc;

	for (;;) {
		end = mono_ms() + GS_UNMAN_PERIOD_MS;
		n = scan(u, r, err, sizeof(err));
		pthread_mutex_lock(&u->mu);
		memcpy(u->res, r, n * sizeof(r[0]));
		u->nres = n;
		snprintf(u->err, sizeof(u->err), "%s", err);
		u->fresh = 1;
		pthread_mutex_unlock(&u->mu);
		if (write(u->ready_fd, &one, sizeof(one)) < 0 &&
		    errno != EAGAIN)
			break;
		while ((now = mono_ms()) < end) {
			rc = poll(&pf, 1, (int)(end - now));
			if (rc > 0 || (rc < 0 && errno != EINTR))
				goto out;
		}
	}
out:
	pthread_mutex_lock(&u->mu);
	u->done = 1;
	pthread_cond_signal(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

/* ---- loop thread ---- */

static struct astate *astate_get(struct gs_unman *u, uint64_t id, int add)
{
	for (unsigned i = 0; i < u->nas; i++)
		if (u->as[i].id == id)
			return &u->as[i];
	if (!add)
		return NULL;
	if (u->nas == u->cap) {
		unsigned nc = u->cap ? u->cap * 2 : 16;
		struct astate *n = realloc(u->as, nc * sizeof(*n));

		if (n == NULL)
			return NULL;
		u->as = n;
		u->cap = nc;
	}
	memset(&u->as[u->nas], 0, sizeof(u->as[0]));
	u->as[u->nas].id = id;
	u->as[u->nas].fresh = 1;
	return &u->as[u->nas++];
}

static int is_stopped(const struct gs_unman *u, uint32_t pid, uint64_t start)
{
	for (unsigned i = 0; i < u->nst; i++)
		if (u->st[i].pid == pid && u->st[i].start == start)
			return 1;
	return 0;
}

static void stop_one(struct gs_unman *u, const struct gs_unman_proc *p)
{
	if (is_stopped(u, p->pid, p->start)) {
		/* continued by someone else (its owner may send SIGCONT):
		 * stopped again */
		if (p->state != 'T' &&
		    signal_proc(p->pid, p->start, SIGSTOP) == 0)
			log_info("allocation %" PRIu64 ": unmanaged process "
				 "%u was continued while held back; stopped "
				 "again", p->alloc, p->pid);
		return;
	}
	if (u->nst == u->stcap) {
		unsigned nc = u->stcap ? u->stcap * 2 : 16;
		struct stopped *n = realloc(u->st, nc * sizeof(*n));

		if (n == NULL)
			return;
		u->st = n;
		u->stcap = nc;
	}
	if (signal_proc(p->pid, p->start, SIGSTOP) < 0)
		return;
	u->st[u->nst].pid = p->pid;
	u->st[u->nst].start = p->start;
	u->st[u->nst].alloc = p->alloc;
	u->nst++;
	log_info("allocation %" PRIu64 ": unmanaged process %u (uid %u) "
		 "held back (SIGSTOP): ahead of its share", p->alloc, p->pid,
		 p->uid);
}

/* Continue the stopped processes of allocation id (0: all). */
static void cont_alloc(struct gs_unman *u, uint64_t id, const char *why)
{
	unsigned i = 0;

	while (i < u->nst) {
		if (id != 0 && u->st[i].alloc != id) {
			i++;
			continue;
		}
		if (signal_proc(u->st[i].pid, u->st[i].start, SIGCONT) == 0)
			log_info("allocation %" PRIu64 ": unmanaged process %u "
				 "continued (SIGCONT): %s", u->st[i].alloc,
				 u->st[i].pid, why);
		u->st[i] = u->st[--u->nst];
	}
}

static int wants(const struct gs_alloc *a)
{
	return a->state == GS_ASTATE_WAITING ||
	       a->state == GS_ASTATE_RUNNING ||
	       a->state == GS_ASTATE_SUSPENDING ||
	       a->state == GS_ASTATE_HELD;
}

static void add_row(struct gs_unman *u, int32_t gpu, uint64_t alloc,
		    uint32_t procs, uint32_t held, uint64_t est)
{
	struct gs_unman_row *n = u->rows;

	if (u->nrows == u->rowcap) {
		unsigned nc = u->rowcap ? u->rowcap * 2 : 16;

		n = realloc(u->rows, nc * sizeof(*n));
		if (n == NULL)
			return;
		u->rows = n;
		u->rowcap = nc;
	}
	n[u->nrows].gpu = gpu;
	n[u->nrows].alloc = alloc;
	n[u->nrows].procs = procs;
	n[u->nrows].held = held;
	n[u->nrows].est_ns = est;
	u->nrows++;
}

/* Is pid attached to any open allocation (whatever its GSHARE_ALLOC
 * says)?  Then the gate of that allocation manages it. */
static int attached_anywhere(struct gs_alloc_table *t, uint32_t pid)
{
	struct gs_alloc *a;

	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a))
		for (unsigned k = 0; k < a->natt; k++)
			if (a->att[k].conn != NULL &&
			    (uint32_t)a->att[k].pid == pid)
				return 1;
	return 0;
}

static void apply(struct gs_unman *u, const struct gs_unman_proc *r,
		  unsigned n, uint64_t period_ns)
{
	const struct gs_agent_config *cfg = gs_agent_config(u->ag);
	struct gs_alloc_table *t = gs_agent_allocs(u->ag);
	uint32_t ng = gs_agent_ngpus(u->ag);
	uint32_t noown[GS_MAX_GPUS];
	struct gs_alloc *a;
	struct astate *s;
	unsigned i, j;

	memset(noown, 0, sizeof(noown));
	for (i = 0; i < u->nas; i++)
		u->as[i].seen = 0;
	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		a->unmanaged = a->unmanaged_held = 0;
		s = astate_get(u, a->id, 0);
		if (s != NULL)
			s->seen = 1;
	}
	/* allocations gone: their held processes go on */
	for (i = 0; i < u->nas;) {
		if (u->as[i].seen) {
			i++;
			continue;
		}
		cont_alloc(u, u->as[i].id, "its allocation closed");
		u->as[i] = u->as[--u->nas];
	}
	/* classify */
	for (i = 0; i < n; i++) {
		const struct gs_unman_proc *p = &r[i];
		struct gs_unman_owner o, *op = NULL;
		uint64_t used = period_ns * p->sm_util / 100;

		a = p->alloc ? gs_alloc_get(t, p->alloc) : NULL;
		if (a != NULL) {
			o.id = a->id;
			o.gpu = a->gpu;
			o.uid = a->uid;
			o.any_uid = (a->flags & GS_ALLOC_ANY_UID) != 0;
			o.att = a->att;
			o.natt = a->natt;
			op = &o;
		}
		u->cls[i] = (unsigned char)gs_unman_classify(p, op);
		if (u->cls[i] != GS_UNMAN_MANAGED &&
		    (attached_anywhere(t, p->pid) ||
		     (p->gpu < ng && p->ppid > 1 &&
		      (int)p->ppid == gs_mps_pid(gs_agent_mps(u->ag), p->gpu))))
			/* attached, or the agent's own MPS server */
			u->cls[i] = GS_UNMAN_MANAGED;
		switch (u->cls[i]) {
		case GS_UNMAN_MANAGED:
			break;
		case GS_UNMAN_UNMANAGED:
			a->unmanaged++;
			s = astate_get(u, a->id, 1);
			if (s == NULL)
				break;
			s->seen = 1;
			s->est_total += used;
			/* accounting takes estimates from here only for
			 * allocations with attached processes (those that
			 * never attached are estimated by acct.c) */
			if (a->natt > 0)
				s->est_pending += used;
			break;
		default:
			if (p->gpu < GS_MAX_GPUS) {
				noown[p->gpu]++;
				u->noown_est[p->gpu] += used;
			}
			break;
		}
	}
	for (i = 0; i < ng && i < GS_MAX_GPUS; i++)
		gs_agent_gpu(u->ag, i)->unmanaged = noown[i];
	/* level 0: fair queuing per GPU */
	if (!cfg->unmanaged_hold) {
		if (u->nst)
			cont_alloc(u, 0, "unmanaged_hold is off");
		for (i = 0; i < u->nas; i++) {
			u->as[i].stopped = 0;
			u->as[i].fresh = 1;	/* level again when on */
		}
	} else {
		for (uint32_t g = 0; g < ng; g++) {
			struct gs_dfq_ent e[128];
			unsigned ne = 0;

			for (a = gs_alloc_first(t); a != NULL && ne < 128;
			     a = gs_alloc_next(t, a)) {
				if (a->gpu < 0 || (uint32_t)a->gpu != g)
					continue;
				s = astate_get(u, a->id, 1);
				if (s == NULL)
					continue;
				s->seen = 1;
				memset(&e[ne], 0, sizeof(e[ne]));
				e[ne].id = a->id;
				e[ne].weight = a->weight;
				e[ne].used_ns = a->gpu_ns - s->last_gpu_ns;
				if (s->fresh)
					e[ne].used_ns = 0;
				s->last_gpu_ns = a->gpu_ns;
				/* a held process uses nothing, unless its
				 * owner continued it: count what NVML saw */
				for (j = 0; j < n; j++)
					if (r[j].alloc == a->id &&
					    u->cls[j] == GS_UNMAN_UNMANAGED)
						e[ne].used_ns += period_ns *
							r[j].sm_util / 100;
				e[ne].wants = wants(a);
				e[ne].holdable = 0;
				for (j = 0; j < n; j++)
					if (r[j].alloc == a->id &&
					    u->cls[j] == GS_UNMAN_UNMANAGED &&
					    gs_unman_holdable(&r[j]))
						e[ne].holdable = 1;
				e[ne].fresh = s->fresh;
				e[ne].vt = s->vt;
				e[ne].stopped = s->stopped;
				ne++;
			}
			gs_unman_dfq_step(e, ne, period_ns,
					  cfg->unmanaged_ahead_ns);
			for (i = 0; i < ne; i++) {
				s = astate_get(u, e[i].id, 0);
				s->vt = e[i].vt;
				s->fresh = 0;
				if (!e[i].stopped && s->stopped)
					cont_alloc(u, e[i].id, "back within "
						   "its share");
				s->stopped = e[i].stopped;
				if (!e[i].stopped)
					continue;
				/* every holdable unmanaged process of it,
				 * newcomers included */
				for (j = 0; j < n; j++)
					if (r[j].alloc == e[i].id &&
					    u->cls[j] == GS_UNMAN_UNMANAGED &&
					    gs_unman_holdable(&r[j]))
						stop_one(u, &r[j]);
			}
		}
	}
	for (j = 0; j < n; j++) {
		a = r[j].alloc ? gs_alloc_get(t, r[j].alloc) : NULL;
		if (a != NULL && a->unmanaged &&
		    is_stopped(u, r[j].pid, r[j].start))
			a->unmanaged_held++;
	}
	/* metrics rows */
	u->nrows = 0;
	for (i = 0; i < ng && i < GS_MAX_GPUS; i++)
		if (noown[i] || u->noown_est[i])
			add_row(u, gs_agent_gpu(u->ag, i)->d.index, 0,
				noown[i], 0, u->noown_est[i]);
	for (i = 0; i < u->nas; i++) {
		a = gs_alloc_get(t, u->as[i].id);
		if (a == NULL || (a->unmanaged == 0 && u->as[i].est_total == 0))
			continue;
		add_row(u, a->gpu >= 0 && (uint32_t)a->gpu < ng ?
			gs_agent_gpu(u->ag, (uint32_t)a->gpu)->d.index : -1,
			a->id, a->unmanaged, a->unmanaged_held,
			u->as[i].est_total);
	}
	/* status shows the counts: tell observers nothing; the STATUS
	 * reply reads them */
}

static void on_ready(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_unman *u = arg;
	struct gs_unman_proc *r = u->cur;
	char err[GS_ERRMSG_MAX];
	uint64_t v, now = gs_now_ns(), period;
	unsigned n;
	int fresh;

	(void)l;
	(void)events;
	if (read(fd, &v, sizeof(v)) < 0)
		return;
	pthread_mutex_lock(&u->mu);
	fresh = u->fresh;
	n = u->nres;
	memcpy(r, u->res, n * sizeof(r[0]));
	snprintf(err, sizeof(err), "%s", u->err);
	u->fresh = 0;
	pthread_mutex_unlock(&u->mu);
	if (!fresh)
		return;
	u->ncur = n;
	if (strcmp(err, u->logged_err) != 0) {
		if (err[0])
			log_warnx("unmanaged GPU processes: %s", err);
		snprintf(u->logged_err, sizeof(u->logged_err), "%s", err);
	}
	period = u->last_ns ? now - u->last_ns :
		 (uint64_t)GS_UNMAN_PERIOD_MS * 1000000u;
	if (period > 2000000000u)	/* a stalled loop is not GPU time */
		period = 2000000000u;
	u->last_ns = now;
	apply(u, r, n, period);
}

int gs_unman_new(struct gs_agent *ag, struct gs_unman **out,
		 struct gs_error *err)
{
	struct gs_gpu_desc d[GS_MAX_GPUS];
	struct gs_unman *u;
	struct gs_error nerr;
	uint32_t i, n = gs_agent_ngpus(ag), nd = 0;
	int rc;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (u == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	u->ag = ag;
	u->ready_fd = u->stop_fd = -1;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	for (i = 0; i < n && i < GS_MAX_GPUS; i++) {
		const struct gs_gpu *g = gs_agent_gpu(ag, i);

		if (g->d.simulated)
			continue;
		d[nd] = g->d;
		u->ti[nd] = i;
		u->idx[nd] = g->d.index;
		nd++;
	}
	u->ngpu = nd;
	if (nd == 0) {
		gs_unman_free(u);
		return 0;
	}
	if (gs_gpu_util_open(d, nd, &u->nv, &nerr) < 0) {
		log_warnx("unmanaged GPU processes are not watched: %s",
			  nerr.msg);
		gs_unman_free(u);
		return 0;
	}
	u->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	u->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (u->ready_fd < 0 || u->stop_fd < 0) {
		gs_error_errno(err, GS_EIO, "eventfd");
		goto out_free;
	}
	if (gs_loop_add_fd(gs_agent_loop(ag), u->ready_fd, EPOLLIN, on_ready,
			   u, err) < 0)
		goto out_free;
	rc = pthread_create(&u->thr, NULL, worker, u);
	if (rc != 0) {
		gs_loop_del_fd(gs_agent_loop(ag), u->ready_fd);
		gs_error_set(err, GS_EIO, "unmanaged-process worker: %s",
			     strerror(rc));
		goto out_free;
	}
	u->started = 1;
	log_info("unmanaged GPU processes: watching %u GPUs through NVML "
		 "every %d ms; hold-back %s", nd, GS_UNMAN_PERIOD_MS,
		 gs_agent_config(ag)->unmanaged_hold ? "on" : "off");
	*out = u;
	return 0;
out_free:
	gs_unman_free(u);
	return -1;
}

void gs_unman_free(struct gs_unman *u)
{
	struct timespec until;
	uint64_t one = 1;
	int done = 1;

	if (u == NULL)
		return;
	if (u->nst)
		cont_alloc(u, 0, "the agent stops");
	if (u->started) {
		gs_loop_del_fd(gs_agent_loop(u->ag), u->ready_fd);
		if (write(u->stop_fd, &one, sizeof(one)) < 0)
			log_warn("unmanaged-process worker: stop");
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 2;
		pthread_mutex_lock(&u->mu);
		while (!u->done &&
		       pthread_cond_timedwait(&u->cv, &u->mu, &until) == 0)
			;
		done = u->done;
		pthread_mutex_unlock(&u->mu);
		if (!done) {
			log_warnx("unmanaged-process worker stuck in NVML; "
				  "not waiting");
			pthread_detach(u->thr);
			return;
		}
		pthread_join(u->thr, NULL);
	}
	gs_gpu_util_close(u->nv);
	if (u->ready_fd >= 0)
		close(u->ready_fd);
	if (u->stop_fd >= 0)
		close(u->stop_fd);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u->as);
	free(u->st);
	free(u->rows);
	free(u);
}

uint64_t gs_unman_take_estimate(struct gs_unman *u, uint64_t id)
{
	struct astate *s;
	uint64_t v;

	if (u == NULL || (s = astate_get(u, id, 0)) == NULL)
		return 0;
	v = s->est_pending;
	s->est_pending = 0;
	return v;
}

int gs_unman_proc_mem(const struct gs_unman *u, uint32_t gi, uint32_t pid,
		      uint64_t *bytes)
{
	unsigned i;

	if (u == NULL)
		return -1;
	for (i = 0; i < u->ncur; i++)
		if (u->cur[i].pid == pid && u->cur[i].gpu == gi) {
			if (u->cur[i].mem == GS_GPU_MEM_UNKNOWN)
				return -1;
			*bytes = u->cur[i].mem;
			return 0;
		}
	return -1;
}

unsigned gs_unman_rows(const struct gs_unman *u,
		       const struct gs_unman_row **out)
{
	if (u == NULL) {
		*out = NULL;
		return 0;
	}
	*out = u->rows;
	return u->nrows;
}
