/*
 * acct_agent.c — glue between gshared and the accounting modules.
 *
 * The allocation observer turns what the agent does into accounting
 * events.  It keeps a small shadow per allocation (attached?, granted?,
 * escalations seen, GPU time reported at the grant) because observers
 * only see the record after a change: a grant is the `granted` flag going
 * 0 → 1, a release 1 → 0 (the difference of a->reported_gpu_ns is what
 * the RELEASE messages reported), an escalation a->escalations growing.
 *
 * The tick never touches the disk: it builds a batch and queues it for the
 * store's writer thread; completions come back on the store's eventfd.
 * Restart: allocations already in the table when accounting starts are
 * the ones the agent restored from its state file.  Recovery keeps their
 * open rows open (gs_store_recover_keep) and each continues its own row,
 * matched by allocation id; a row left open of an allocation whose close
 * reached the table file (its id below the file's counter, not in it)
 * becomes COMPLETED (gs_store_finish_closed); every other row left open
 * closes as NODE_FAIL (re-adopted by labels if its job comes back with a
 * new allocation).
 * Who may read the store: its files (the database, -wal, -shm) are mode
 * 0640, group store_group, so that only root and gsacct (installed setgid
 * to that group) read them; 0600 when the group does not exist; 0644
 * (world-readable, as before) with store_group "".  See store_protect().
 * Limits: a SIGHUP reload changes the tick and the retention (seen at the
 * next tick), not the store path, its group or the metrics address; a
 * clean stop leaves open allocations open in the store, for the next
 * start to continue.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acct.h"
#include "acct_agent.h"
#include "gs_log.h"
#include "metrics.h"
#include "store.h"
#include "unman.h"

#define PURGE_BATCH	2000
/* a job whose allocation was cut by an agent crash may come back this
 * long after its last sample and continue its old row */
#define ADOPT_WINDOW_NS	(3600LL * 1000000000)

struct shadow {
	uint64_t id;
	int attached, granted;
	int mem_warned;		/* NVML saw more than the limit: logged */
	int sum_warned;		/* its pages added up beyond the limit */
	unsigned npages;		/* pages handed to accounting */
	uint64_t gpu_at_grant;
	uint64_t escalations;
	uint32_t shares, weight, priority;
	struct gs_labels labels;
};

struct gs_accounting {
	struct gs_agent *ag;
	struct gs_store *store;
	struct gs_acct *acct;
	struct gs_metrics *metrics;
	struct gs_agent_stats st;
	uint64_t period, due;
	uint32_t retention_days;
	char path[512];			/* store path in use */
	char group[33];			/* store_group in use */
	char metrics_addr[64];		/* metrics_listen in use */
	/* what the config said at the last reload: a change from these is
	 * warned about once */
	char cfg_path[512], cfg_group[33], cfg_metrics[64];
	uint64_t warned_busy;
	uint64_t behind_logged;		/* when "behind" was last logged */
	char last_error[GS_ERRMSG_MAX];	/* the store's last failed try */
	/* the agent's STATUS warning is made of these two (set_warning) */
	char store_warn[GS_WARNING_MAX];	/* usage store behind */
	char spool_warn[GS_WARNING_MAX];	/* watch_spool behind */
	struct gs_gpu_util *util;	/* NVML estimates, NULL: none */
	struct gs_unman *unman;		/* unmanaged processes, NULL: none */
	struct gs_unman_row *unman_rows;	/* copied at each tick, for
						 * the metrics (st.unman) */
	unsigned unman_cap;
	struct shadow *sh;
	unsigned nsh, cap;
};

static int do_tick(struct gs_accounting *ac, uint64_t now);

static int64_t
real_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct shadow *
shadow_find(struct gs_accounting *ac, uint64_t id)
{
	for (unsigned i = 0; i < ac->nsh; i++)
		if (ac->sh[i].id == id)
			return &ac->sh[i];
	return NULL;
}

static void
on_created(struct gs_accounting *ac, const struct gs_alloc *a)
{
	struct gs_acct_meta m;
	struct gs_error err;
	struct gs_gpu *g = NULL;
	struct shadow *s;

	if (a->gpu >= 0 && (uint32_t)a->gpu < gs_agent_ngpus(ac->ag))
		g = gs_agent_gpu(ac->ag, (uint32_t)a->gpu);
	memset(&m, 0, sizeof(m));
	m.agent_id = a->id;
	m.labels = a->labels;
	m.uid = a->uid;
	m.gpu = g ? g->d.index : a->gpu;
	if (g != NULL)
		snprintf(m.gpu_uuid, sizeof(m.gpu_uuid), "%s", g->d.uuid);
	m.shares = a->shares;
	m.weight = a->weight;
	m.priority = a->priority;
	m.mode = a->mode;
	m.restored = (uint32_t)a->restored;
	m.mem_limit = a->mem_limit;
	m.now_real = real_now();
	if (gs_acct_open(ac->acct, &m, (int64_t)a->created_unix_ns,
			 gs_now_ns(), &err) < 0) {
		log_warnx("accounting: allocation %" PRIu64 ": %s", a->id,
			  err.msg);
		return;
	}
	if (ac->nsh == ac->cap) {
		unsigned nc = ac->cap ? ac->cap * 2 : 16;
		struct shadow *ns = realloc(ac->sh, nc * sizeof(*ns));

		if (ns == NULL) {
			log_warnx("accounting: out of memory");
			return;
		}
		ac->sh = ns;
		ac->cap = nc;
	}
	s = &ac->sh[ac->nsh++];
	memset(s, 0, sizeof(*s));
	s->id = a->id;
	s->shares = a->shares;
	s->weight = a->weight;
	s->priority = a->priority;
	s->labels = a->labels;
}

/* Space mode: the SM fraction a hold of a runs on, from the partition
 * its pages carry (docs/accounting.md); 0 (all) elsewhere. */
static uint32_t
part_of(struct gs_accounting *ac, const struct gs_alloc *a)
{
	const struct gs_agent_config *cfg = gs_agent_config(ac->ag);
	unsigned k;

	if (a->mode != GS_MODE_SPACE || cfg->sm_count == 0)
		return 0;
	for (k = 0; k < a->natt; k++) {
		const struct gs_ctlpage *p = a->att[k].page;
		uint32_t c;

		if (p == NULL || a->att[k].conn == NULL ||
		    __atomic_load_n(&p->part_gen, __ATOMIC_ACQUIRE) == 0)
			continue;
		c = __atomic_load_n(&p->sm_count, __ATOMIC_RELAXED);
		if (c == 0 || c >= cfg->sm_count)
			return 0;
		return (uint32_t)((uint64_t)c * GS_ACCT_PART_ONE /
				  cfg->sm_count);
	}
	return 0;
}

static void
on_state(struct gs_accounting *ac, const struct gs_alloc *a)
{
	struct shadow *s = shadow_find(ac, a->id);
	uint64_t now = gs_now_ns();

	if (s == NULL)
		return;
	/* one page per attached process; a slot keeps its page for the
	 * allocation's life, so pages only ever get added */
	while (s->npages < a->natt) {
		gs_acct_attach(ac->acct, a->id, a->att[s->npages].page, now);
		s->npages++;
		s->attached = 1;
	}
	if (memcmp(&s->labels, &a->labels, sizeof(s->labels)) != 0) {
		s->labels = a->labels;
		gs_acct_set_labels(ac->acct, a->id, &a->labels);
	}
	if (s->shares != a->shares || s->weight != a->weight ||
	    s->priority != a->priority) {
		s->shares = a->shares;
		s->weight = a->weight;
		s->priority = a->priority;
		gs_acct_set_params(ac->acct, a->id, a->shares, a->weight,
				   a->priority);
	}
	if (a->granted && !s->granted) {
		gs_acct_set_part(ac->acct, a->id, part_of(ac, a));
		gs_acct_hold(ac->acct, a->id, a->grant_at);
		s->gpu_at_grant = a->reported_gpu_ns;
	} else if (!a->granted && s->granted) {
		gs_acct_unhold(ac->acct, a->id, now,
			       a->reported_gpu_ns - s->gpu_at_grant);
	}
	s->granted = a->granted;
	if (a->escalations > s->escalations) {
		s->escalations = a->escalations;
		gs_acct_escalate(ac->acct, a->id, now);
	}
}

/* ALLOC_CLOSE's end state is the usage row's state, value for value */
_Static_assert((int)GS_END_COMPLETED == (int)GS_SST_COMPLETED &&
		       (int)GS_END_FAILED == (int)GS_SST_FAILED &&
		       (int)GS_END_CANCELLED == (int)GS_SST_CANCELLED &&
		       (int)GS_END_NODE_FAIL == (int)GS_SST_NODE_FAIL &&
		       (int)GS_END_TIMEOUT == (int)GS_SST_TIMEOUT &&
		       (int)GS_END_MAX == (int)GS_SST_MAX,
	       "gs_end_state and the store states differ");

static void
on_closed(struct gs_accounting *ac, const struct gs_alloc *a)
{
	struct shadow *s;
	struct gs_usage tot;
	uint32_t st = GS_SST_COMPLETED;

	on_state(ac, a);	/* pick up a last grant/release/escalation */
	s = shadow_find(ac, a->id);
	if (s == NULL)
		return;
	if (a->escalations > 0 &&
	    gs_agent_config(ac->ag)->escalation == GS_ESC_KILL)
		st = GS_SST_CANCELLED;
	if (a->end_state != GS_END_DEFAULT)	/* the closer knows better */
		st = a->end_state;
	gs_acct_close(ac->acct, a->id, st, real_now(), gs_now_ns());
	*s = ac->sh[--ac->nsh];
	/* the final row goes to the store now; the CLOSE's reply waits for
	 * its commit (without holding the loop) and carries its totals */
	if (do_tick(ac, gs_now_ns()) == 0)
		gs_agent_usage_queued(ac->ag, gs_acct_ticks(ac->acct));
	if (gs_acct_final(ac->acct, a->id, &tot) == 0)
		gs_agent_close_totals(ac->ag, a->id, tot.gpu_ns, tot.held_ns);
}

/* A CLOSE is about to write the table without allocation a: its usage so
 * far goes to the store first, and the table write waits for that commit
 * (gs_agent_usage_queued), so that a crash before the final row is
 * committed loses nothing already measured: the next start closes the row
 * with what is committed (gs_store_finish_closed), and the job, whose
 * allocation is gone, cannot report it again. */
static void
on_closing(struct gs_accounting *ac, const struct gs_alloc *a)
{
	on_state(ac, a);	/* pick up a last grant/release/escalation */
	if (do_tick(ac, gs_now_ns()) == 0)
		gs_agent_usage_queued(ac->ag, gs_acct_ticks(ac->acct));
}

static void
observer(void *ctx, int event, const struct gs_alloc *a)
{
	struct gs_accounting *ac = ctx;

	switch (event) {
	case GS_AEV_CREATED: on_created(ac, a); break;
	case GS_AEV_STATE: on_state(ac, a); break;
	case GS_AEV_CLOSED: on_closed(ac, a); break;
	case GS_AEV_CLOSING: on_closing(ac, a); break;
	}
}

/* Unmanaged processes of allocations with attached ones: their
 * estimated GPU time (acct.c estimates allocations that never attached);
 * the metrics rows. */
static void
unman_tick(struct gs_accounting *ac)
{
	struct gs_alloc_table *t = gs_agent_allocs(ac->ag);
	struct gs_alloc *a;
	uint64_t ns;

	const struct gs_unman_row *r;
	unsigned n;

	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a))
		if ((ns = gs_unman_take_estimate(ac->unman, a->id)) > 0)
			gs_acct_add_estimate(ac->acct, a->id, ns);
	/* a copy: the watcher's rows change with each of its periods */
	n = gs_unman_rows(ac->unman, &r);
	if (n > ac->unman_cap) {
		struct gs_unman_row *nr = realloc(ac->unman_rows,
						  n * sizeof(*nr));

		if (nr == NULL)
			return;	/* the metrics keep the last copy */
		ac->unman_rows = nr;
		ac->unman_cap = n;
	}
	if (n > 0)
		memcpy(ac->unman_rows, r, n * sizeof(*r));
	ac->st.unman = ac->unman_rows;
	ac->st.nunman = n;
}

void
gs_accounting_set_unman(struct gs_accounting *ac, struct gs_unman *u)
{
	if (ac == NULL)
		return;
	ac->unman = u;
	if (u == NULL) {
		ac->st.unman = NULL;
		ac->st.nunman = 0;
	}
}

/*
 * The processes of an allocation reserve against its one memory page
 * (gs_mempage.h), but some may count on their own (a runtime before
 * protocol 1.5; processes from before an agent restart, which keep the
 * earlier agent's page) and a pool's growth may pass the limit for a
 * while: logged once per episode, when the figures their pages report
 * add up beyond the limit.
 */
static void
mem_sum_check(struct gs_accounting *ac)
{
	struct gs_alloc_table *t = gs_agent_allocs(ac->ag);
	struct gs_alloc *a;
	struct shadow *s;
	uint64_t used;
	char b1[32], b2[32];

	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		s = shadow_find(ac, a->id);
		if (s == NULL || a->mem_limit == 0)
			continue;
		used = gs_alloc_mem_used(a);
		if (used <= a->mem_limit) {
			s->sum_warned = 0;
			continue;
		}
		if (s->sum_warned)
			continue;
		s->sum_warned = 1;
		gs_cfg_format_size(used - used % 1024, b1, sizeof(b1));
		gs_cfg_format_size(a->mem_limit, b2, sizeof(b2));
		log_warnx("allocation %" PRIu64 ": its %u attached process(es) "
			  "report %s of device memory together, beyond its "
			  "limit of %s (processes that do not share its "
			  "memory page: an older runtime, or started before "
			  "an agent restart)", a->id, a->nattached, b1, b2);
	}
}

/*
 * Cross-check the job-reported device memory with NVML's per-process
 * figures (real GPUs only): the figure goes to the metrics
 * (gshare_memory_nvml_bytes), and a process holding more than its
 * allocation's limit plus memory_reserve (its CUDA context and library
 * workspaces are outside the limit) is logged once per attachment: memory
 * taken around the runtime (an application the gate does not see).  The
 * figures come from the unmanaged-process watcher's last listing (its
 * thread lists every GPU's compute processes once a period): no NVML
 * call here, on the loop.
 */
static void
mem_cross_check(struct gs_accounting *ac)
{
	struct gs_alloc_table *t = gs_agent_allocs(ac->ag);
	const struct gs_agent_config *cfg = gs_agent_config(ac->ag);
	struct gs_alloc *a;
	struct shadow *s;
	uint32_t g, ng = gs_agent_ngpus(ac->ag);
	uint64_t pb;
	int any;
	char b1[32], b2[32];

	if (ac->unman == NULL)
		return;
	/* no process attached: nothing to see, and the next one may be
	 * warned about again */
	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a)) {
		if (a->pid != 0)
			continue;
		gs_acct_set_mem_nvml(ac->acct, a->id, 0);
		s = shadow_find(ac, a->id);
		if (s != NULL)
			s->mem_warned = 0;
	}
	for (g = 0; g < ng; g++) {
		int32_t idx = gs_agent_gpu(ac->ag, g)->d.index;

		any = 0;
		for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a))
			any |= a->gpu == idx && a->pid != 0;
		if (!any)
			continue;
		for (a = gs_alloc_first(t); a != NULL;
		     a = gs_alloc_next(t, a)) {
			uint64_t bytes = 0;

			if (a->gpu != idx || a->pid == 0)
				continue;
			/* every attached process of the job */
			for (unsigned k = 0; k < a->natt; k++) {
				if (a->att[k].conn == NULL)
					continue;
				if (gs_unman_proc_mem(ac->unman, g,
						      (uint32_t)a->att[k].pid,
						      &pb) == 0)
					bytes += pb;
			}
			gs_acct_set_mem_nvml(ac->acct, a->id, bytes);
			s = shadow_find(ac, a->id);
			if (s == NULL || s->mem_warned || a->mem_limit == 0 ||
			    bytes <= a->mem_limit + cfg->memory_reserve)
				continue;
			s->mem_warned = 1;
			gs_cfg_format_size(bytes - bytes % (1 << 20), b1,
					   sizeof(b1));
			gs_cfg_format_size(a->mem_limit, b2, sizeof(b2));
			log_warnx("allocation %" PRIu64 ": NVML sees its "
				  "%u process(es) (pid %d...) holding %s of "
				  "device memory, beyond its limit of %s and "
				  "the memory_reserve: memory allocated around "
				  "gshare's runtime", a->id, a->nattached,
				  (int)a->pid, b1, b2);
		}
	}
}

/* 0: the tick's batch is the store's (it commits it, retrying) */
static int
do_tick(struct gs_accounting *ac, uint64_t now)
{
	struct gs_store_batch *b = NULL;
	struct gs_error err;

	if (ac->unman != NULL)
		unman_tick(ac);
	mem_sum_check(ac);
	mem_cross_check(ac);
	if (gs_acct_tick(ac->acct, now, real_now(), &b, &err) < 0) {
		log_warnx("accounting: %s", err.msg);
		return -1;
	}
	if (gs_store_submit(ac->store, b, &err) < 0) {
		ac->st.store_errors++;
		gs_acct_mark_dirty(ac->acct);
		if (ac->warned_busy++ % 60 == 0)
			log_warnx("accounting: tick %" PRIu64 " not stored: %s",
				  gs_acct_ticks(ac->acct), err.msg);
		return -1;
	}
	return 0;
}

/*
 * Is the usage store behind?  Its oldest batch not yet committed was
 * queued more than BEHIND_NS ago (a failing or stalled disk).  Say so
 * when it starts, every BEHIND_LOG_NS while it lasts (with the last
 * error), and when it ends; keep the metric and the agent's STATUS
 * warning up to date.
 */
#define BEHIND_NS	(3000000000ull)
#define BEHIND_LOG_NS	(60000000000ull)
/* watch_spool is behind when its oldest record waits longer than this
 * (and than two accounting ticks): the Slurm plugin's writer takes a
 * record within a second while slurmdbd answers */
#define SPOOL_BEHIND_S	10u

/* The agent's STATUS warning: whichever of the two conditions hold,
 * the spool's first (it is short), joined by "; ". */
static void
set_warning(struct gs_accounting *ac)
{
	char w[2 * GS_WARNING_MAX + 2];	/* gs_agent_set_warning cuts */

	snprintf(w, sizeof(w), "%s%s%s", ac->spool_warn,
		 ac->spool_warn[0] && ac->store_warn[0] ? "; " : "",
		 ac->store_warn);
	gs_agent_set_warning(ac->ag, w);
}

static void
check_behind(struct gs_accounting *ac, uint64_t now)
{
	uint64_t oldest = gs_store_oldest(ac->store);
	uint64_t age = oldest && now > oldest ? now - oldest : 0;

	ac->st.store_behind_ns = age;
	if (age > BEHIND_NS) {
		if (ac->behind_logged == 0 ||
		    now - ac->behind_logged >= BEHIND_LOG_NS) {
			log_warnx("usage store %s: behind by %.0f s (%u "
				  "batches waiting): %s; usage is kept in "
				  "memory and written once the disk takes it",
				  ac->path, (double)age / 1e9,
				  gs_store_queued(ac->store),
				  ac->last_error[0] ? ac->last_error :
				  "a write has not finished (stalled disk?)");
			ac->behind_logged = now;
		}
		snprintf(ac->store_warn, sizeof(ac->store_warn),
			 "usage store behind by %.0f s: %.150s",
			 (double)age / 1e9, ac->last_error[0] ?
			 ac->last_error : "a write has not finished");
		set_warning(ac);
	} else if (age == 0 && ac->behind_logged != 0) {
		log_info("usage store %s: caught up, nothing lost", ac->path);
		ac->behind_logged = 0;
		ac->last_error[0] = '\0';
		ac->store_warn[0] = '\0';
		set_warning(ac);
	}
}

/*
 * watch_spool: records waiting longer than SPOOL_BEHIND_S (the Slurm
 * plugin's totals while slurmdbd is down or refuses them) put a line in
 * the STATUS warning, kept up to date while records wait and gone once
 * the directory is empty again.
 * Logged when it starts and when it ends.
 */
static void
check_spool(struct gs_accounting *ac)
{
	const char *dir = gs_agent_config(ac->ag)->watch_spool;
	uint64_t after = ac->period * 2 / 1000000000u;

	if (after < SPOOL_BEHIND_S)
		after = SPOOL_BEHIND_S;
	if (ac->st.spool_watched && ac->st.spool_pending > 0 &&
	    (ac->st.spool_oldest_s >= after || ac->spool_warn[0])) {
		if (!ac->spool_warn[0])
			log_warnx("%s: %u records waiting, the oldest for %"
				  PRIu64 " s", dir, ac->st.spool_pending,
				  ac->st.spool_oldest_s);
		snprintf(ac->spool_warn, sizeof(ac->spool_warn),
			 "%u Slurm totals waiting in %.60s for slurmdbd, "
			 "oldest %" PRIu64 " s", ac->st.spool_pending, dir,
			 ac->st.spool_oldest_s);
		set_warning(ac);
	} else if (ac->spool_warn[0] &&
		   (!ac->st.spool_watched || ac->st.spool_pending == 0)) {
		log_info("%s: every waiting record taken", dir);
		ac->spool_warn[0] = '\0';
		set_warning(ac);
	}
}

static void
store_path(const struct gs_agent_config *cfg, char *buf, size_t n)
{
	if (cfg->usage_db[0])
		snprintf(buf, n, "%s", cfg->usage_db);
	else
		snprintf(buf, n, "%s/usage.db", cfg->state_dir);
}

/*
 * Give one of the store's files `mode`, the agent's own user as owner
 * (root) and, when gid is not (gid_t)-1, that group.  The main file is
 * created when missing (an empty file is a new SQLite database); a
 * missing -wal/-shm is fine.  Symbolic links and anything but a regular
 * file are refused: root changes these files.  *changed (may be NULL) is
 * set when the mode or group was different.
 *
 * The files are never opened here: SQLite holds POSIX record locks on
 * them, and closing any descriptor of a file drops every lock the process
 * has on it; a reader then finds the WAL index unowned, rebuilds it and
 * the writer's mapping of it faults (SIGBUS).  Only the creation of a
 * missing database file, before SQLite opens it, uses a descriptor.
 */
static int
protect_file(const char *path, int create, mode_t mode, gid_t gid,
	     int *changed, struct gs_error *err)
{
	struct stat st;
	int fd;

	if (lstat(path, &st) < 0) {
		if (errno != ENOENT)
			return gs_error_errno(err, GS_EIO, "usage store %s",
					      path);
		if (!create)
			return 0;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CREAT | O_CLOEXEC,
			  mode);
		if (fd < 0)
			return gs_error_errno(err, GS_EIO, "usage store %s",
					      path);
		close(fd);
		if (lstat(path, &st) < 0)
			return gs_error_errno(err, GS_EIO, "usage store %s",
					      path);
	}
	if (!S_ISREG(st.st_mode))
		return gs_error_set(err, GS_EIO, "usage store %s: not a "
				    "regular file", path);
	/* owner and group first, then the mode: group read is granted only
	 * once the file has the right group */
	if (st.st_uid != geteuid() || (gid != (gid_t)-1 && st.st_gid != gid)) {
		if (lchown(path, geteuid(), gid) < 0)
			return gs_error_errno(err, GS_EIO, "usage store %s: "
					      "cannot give it to uid %u group "
					      "%d (gshared runs as root?)",
					      path, (unsigned)geteuid(),
					      (int)gid);
		if (changed != NULL)
			*changed = 1;
	}
	if ((st.st_mode & 07777) != mode) {
		/* a regular file per lstat just above, in root's directory */
		if (chmod(path, mode) < 0)
			return gs_error_errno(err, GS_EIO, "usage store %s: "
					      "chmod %04o", path,
					      (unsigned)mode);
		if (changed != NULL)
			*changed = 1;
	}
	return 0;
}

/*
 * The store's database file and its -wal/-shm companions: 0640 and group
 * store_group; 0600 (root only) when that group does not exist; 0644 with
 * store_group "".  Before SQLite opens it (create = 1), so that what
 * SQLite creates inherits it: SQLite gives a new -wal/-shm the database
 * file's mode and, when it runs as root, its owner and group.  Companions
 * an earlier run left (a crash, an older gshare) are fixed here too, and
 * once more after the open (create = 0), which would catch a SQLite that
 * did otherwise.  *mode and *gid (may be NULL) get what was applied.
 */
static int
store_protect(const struct gs_agent_config *cfg, const char *path,
	      int create, mode_t *mode_out, gid_t *gid_out, int *changed,
	      struct gs_error *err)
{
	static const char *const sfx[] = { "", "-wal", "-shm" };
	mode_t mode = 0644;
	gid_t gid = (gid_t)-1;
	char f[sizeof(((struct gs_accounting *)0)->path) + 8];

	if (cfg->store_group[0] != '\0') {
		const struct group *gr = getgrnam(cfg->store_group);

		mode = 0600;
		if (gr != NULL) {
			mode = 0640;
			gid = gr->gr_gid;
		}
	}
	for (unsigned i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(f, sizeof(f), "%s%s", path, sfx[i]);
		if (protect_file(f, create && i == 0, mode, gid, changed,
				 err) < 0)
			return -1;
	}
	if (mode_out != NULL)
		*mode_out = mode;
	if (gid_out != NULL)
		*gid_out = gid;
	return 0;
}

/*
 * Who may scrape a Unix-socket metrics endpoint: the store's readers
 * (store_group's rule, as store_protect): mode 0660 and that group; 0600
 * (root only) when the group does not exist; 0666 with store_group "".
 * On failure the socket stays 0600.
 */
static void
metrics_grant(const struct gs_agent_config *cfg, struct gs_metrics *m)
{
	const char *path = gs_metrics_unix_path(cfg->metrics_listen);
	const struct group *gr = NULL;
	struct gs_error err;
	mode_t mode = 0666;

	if (cfg->store_group[0] != '\0') {
		gr = getgrnam(cfg->store_group);
		mode = gr != NULL ? 0660 : 0600;
	}
	if (gs_metrics_grant(m, mode, gr != NULL ? gr->gr_gid : (gid_t)-1,
			     &err) < 0) {
		log_warnx("%s; only root can scrape", err.msg);
		return;
	}
	log_info("metrics: unix socket %s, mode %04o%s%s", path,
		 (unsigned)mode, gr != NULL ? ", group " : "",
		 gr != NULL ? cfg->store_group : "");
}

static int64_t
retention_ns(uint32_t days)
{
	return days ? (int64_t)days * 86400 * 1000000000LL : 0;
}

static void on_tick(struct gs_loop *l, uint64_t now, void *arg);

/* A SIGHUP reload may have changed the tick or the retention; the store
 * path and the metrics address keep their start-up values. */
static void
reload(struct gs_accounting *ac, struct gs_loop *l)
{
	const struct gs_agent_config *cfg = gs_agent_config(ac->ag);
	char path[512];

	store_path(cfg, path, sizeof(path));
	/* the store and the metrics address keep their start-up values;
	 * say so once per change, naming what stays in use */
	if ((strcmp(path, ac->cfg_path) != 0 ||
	     strcmp(cfg->metrics_listen, ac->cfg_metrics) != 0) &&
	    (strcmp(path, ac->path) != 0 ||
	     strcmp(cfg->metrics_listen, ac->metrics_addr) != 0))
		log_warnx("reload: usage store or metrics address change "
			  "needs a restart; keeping %s and '%s'", ac->path,
			  ac->metrics_addr);
	if (strcmp(cfg->store_group, ac->cfg_group) != 0 &&
	    strcmp(cfg->store_group, ac->group) != 0)
		log_warnx("reload: store_group change needs a restart; "
			  "keeping '%s'", ac->group);
	snprintf(ac->cfg_path, sizeof(ac->cfg_path), "%s", path);
	snprintf(ac->cfg_metrics, sizeof(ac->cfg_metrics), "%s",
		 cfg->metrics_listen);
	snprintf(ac->cfg_group, sizeof(ac->cfg_group), "%s",
		 cfg->store_group);
	if (cfg->acct_tick_ns != ac->period) {
		log_info("accounting: tick %.3f s -> %.3f s",
			 (double)ac->period / 1e9,
			 (double)cfg->acct_tick_ns / 1e9);
		ac->period = cfg->acct_tick_ns;
		ac->due = 0;
		gs_loop_set_tick_period(l, on_tick, ac, ac->period);
	}
	if (cfg->retention_days != ac->retention_days) {
		log_info("accounting: retention %u -> %u days",
			 ac->retention_days, cfg->retention_days);
		ac->retention_days = cfg->retention_days;
		gs_store_set_retention(ac->store,
				       retention_ns(ac->retention_days));
	}
}

static void
on_tick(struct gs_loop *l, uint64_t now, void *arg)
{
	struct gs_accounting *ac = arg;

	now = gs_now_ns();	/* the loop passes the scheduled time */
	reload(ac, l);
	if (ac->due == 0 || now > ac->due + 10 * ac->period)
		ac->due = now;	/* first tick, or resync after a stall */
	ac->st.loop_lag_ns = now > ac->due ? now - ac->due : 0;
	if (ac->st.loop_lag_ns > ac->st.loop_lag_max_ns)
		ac->st.loop_lag_max_ns = ac->st.loop_lag_ns;
	ac->due += ac->period;
	ac->st.clients = gs_agent_nclients(ac->ag);
	gs_metrics_spool_scan(gs_agent_config(ac->ag)->watch_spool, &ac->st);
	do_tick(ac, now);
	check_behind(ac, now);
	check_spool(ac);
	if (ac->metrics != NULL)
		gs_metrics_expire(ac->metrics, now / 1000000);
}

static void
reap(struct gs_accounting *ac)
{
	struct gs_store_done d[16];
	int n;

	while ((n = gs_store_reap(ac->store, d, 16)) > 0)
		for (int i = 0; i < n; i++) {
			if (!d[i].ok) {
				/* the store keeps the batch and tries again:
				 * logged by check_behind, rate-limited */
				ac->st.store_errors++;
				snprintf(ac->last_error,
					 sizeof(ac->last_error), "%s",
					 d[i].msg);
				if (d[i].lost)
					log_warnx("usage store %s: tick %"
						  PRIu64 " given up at stop "
						  "after %u tries: %s",
						  ac->path, d[i].tick,
						  d[i].tries, d[i].msg);
				else if (d[i].tries == 1)
					log_debug("usage store %s: tick %"
						  PRIu64 " failed: %s",
						  ac->path, d[i].tick,
						  d[i].msg);
				continue;
			}
			gs_agent_usage_committed(ac->ag, d[i].tick);
			ac->st.store_writes++;
			ac->st.store_write_ns_sum += d[i].write_ns;
			ac->st.store_write_ns_last = d[i].write_ns;
			ac->st.store_purged += d[i].purged;
			if (d[i].msg[0])	/* purge failed, write ok */
				log_warnx("usage store: %s", d[i].msg);
			log_debug("usage store: tick %" PRIu64 " committed "
				  "in %.3f ms", d[i].tick,
				  (double)d[i].write_ns / 1e6);
		}
}

static void
on_store(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	(void)l;
	(void)fd;
	(void)events;
	reap(arg);
}

/* gs_acct_util_fn over the GPU module's NVML samples. */
static int
util_source(void *arg, int32_t gpu, uint64_t since_us, struct gs_proc_util *out,
	    unsigned max, struct gs_error *err)
{
	struct gs_accounting *ac = arg;
	struct gs_gpu_proc_sample s[256];
	int n;

	if (max > 256)
		max = 256;
	n = gs_gpu_proc_util(ac->util, gpu, since_us, s, max, err);
	for (int i = 0; i < n; i++) {
		out[i].pid = s[i].pid;
		out[i].sm_util = s[i].sm_util;
		out[i].ts_us = s[i].ts_us;
	}
	return n;
}

static void
open_estimates(struct gs_accounting *ac)
{
	struct gs_gpu_desc d[GS_MAX_GPUS];
	uint32_t n = gs_agent_ngpus(ac->ag);
	struct gs_error err;

	for (uint32_t i = 0; i < n && i < GS_MAX_GPUS; i++)
		d[i] = gs_agent_gpu(ac->ag, i)->d;
	if (gs_gpu_util_open(d, n, &ac->util, &err) < 0) {
		log_debug("accounting: no NVML estimates: %s", err.msg);
		ac->util = NULL;
		return;
	}
	gs_acct_set_util_source(ac->acct, util_source, ac, "/proc");
	log_info("accounting: NVML per-process estimates for allocations "
		 "that never attach");
}

static void
on_metrics(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_accounting *ac = arg;

	(void)l;
	(void)fd;
	(void)events;
	gs_metrics_dispatch(ac->metrics, gs_now_ns() / 1000000);
}

/* A restored allocation continues its usage row, totals kept; its GPU
 * and held time in the agent (status, the close reply) start from those
 * totals too, so that they cover the allocation's whole life and not
 * only the time since this start. */
static void
seed_restored(struct gs_accounting *ac)
{
	const struct gs_acct_view *v;
	struct gs_alloc *a;
	unsigned i, n = gs_acct_allocs(ac->acct, &v);

	for (i = 0; i < n; i++) {
		a = gs_alloc_get(gs_agent_allocs(ac->ag), v[i].row.agent_id);
		if (a == NULL || !a->restored)
			continue;
		a->gpu_ns += v[i].row.tot.gpu_ns;
		a->held_ns += v[i].row.tot.held_ns;
	}
}

int
gs_accounting_new(struct gs_agent *ag, struct gs_accounting **out,
		  struct gs_error *err)
{
	const struct gs_agent_config *cfg = gs_agent_config(ag);
	struct gs_loop *l = gs_agent_loop(ag);
	struct gs_accounting *ac;
	const char *path;
	struct gs_alloc *a;
	uint64_t *keep, next_id, below;
	const uint64_t *known;
	unsigned nkeep = 0, nknown;
	int n, changed = 0;
	mode_t mode;
	gid_t gid;

	ac = calloc(1, sizeof(*ac));
	if (ac == NULL)
		return gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
	ac->ag = ag;
	ac->period = cfg->acct_tick_ns;
	store_path(cfg, ac->path, sizeof(ac->path));
	path = ac->path;
	snprintf(ac->metrics_addr, sizeof(ac->metrics_addr), "%s",
		 cfg->metrics_listen);
	snprintf(ac->group, sizeof(ac->group), "%s", cfg->store_group);
	memcpy(ac->cfg_path, ac->path, sizeof(ac->cfg_path));
	memcpy(ac->cfg_metrics, ac->metrics_addr, sizeof(ac->cfg_metrics));
	memcpy(ac->cfg_group, ac->group, sizeof(ac->cfg_group));
	if (store_protect(cfg, path, 1, &mode, &gid, NULL, err) < 0)
		goto out_free;
	if (gs_store_open(path, 0, &ac->store, err) < 0)
		goto out_free;
	if (store_protect(cfg, path, 0, NULL, NULL, &changed, err) < 0)
		goto out_free;
	if (changed)
		log_warnx("usage store %s: SQLite created its -wal/-shm with "
			  "another mode or group; fixed", path);
	if (cfg->store_group[0] == '\0')
		log_info("usage store %s: mode 0644, readable by every local "
			 "user (store_group is empty)", path);
	else if (gid == (gid_t)-1)
		log_warnx("usage store %s: group '%s' (store_group) does not "
			  "exist: mode 0600, only root can read usage (gsacct "
			  "fails for other users); create the group and "
			  "restart gshared", path, cfg->store_group);
	else
		log_info("usage store %s: mode %04o, group %s", path,
			 (unsigned)mode, cfg->store_group);
	/* closes that reached the table file but not the store */
	nknown = gs_agent_table_loaded(ag, &known, &below);
	n = gs_store_finish_closed(ac->store, known, nknown, below, err);
	if (n < 0)
		goto out_free;
	if (n > 0)
		log_warnx("usage store %s: %d allocation(s) closed just before "
			  "the previous run ended, their final row not yet "
			  "written: COMPLETED with the usage committed", path,
			  n);
	keep = calloc(gs_alloc_count(gs_agent_allocs(ag)) + 1, sizeof(*keep));
	if (keep == NULL) {
		gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
		goto out_free;
	}
	for (a = gs_alloc_first(gs_agent_allocs(ag)); a != NULL;
	     a = gs_alloc_next(gs_agent_allocs(ag), a))
		keep[nkeep++] = a->id;
	n = gs_store_recover_keep(ac->store, real_now() - ADOPT_WINDOW_NS,
				  keep, nkeep, err);
	free(keep);
	if (n < 0)
		goto out_free;
	if (n > 0)
		log_warnx("usage store %s: %d allocation(s) left open by the "
			  "previous run closed as NODE_FAIL (re-adopted if "
			  "their jobs come back)", path, n);
	/* ids are never reused, even when the allocation table file was
	 * lost or damaged: start above every id the store has seen */
	if (gs_store_next_agent_id(ac->store, &next_id, err) < 0)
		goto out_free;
	gs_alloc_set_next_id(gs_agent_allocs(ag), next_id);
	if (gs_acct_new(ac->store, &ac->acct, err) < 0)
		goto out_free;
	open_estimates(ac);
	ac->retention_days = cfg->retention_days;
	if (gs_store_start(ac->store, retention_ns(cfg->retention_days),
			   PURGE_BATCH, err) < 0)
		goto out_free;
	if (gs_loop_add_fd(l, gs_store_event_fd(ac->store), EPOLLIN, on_store,
			   ac, err) < 0)
		goto out_free;
	if (cfg->metrics_listen[0]) {
		struct gs_error merr;

		/* without metrics the agent still schedules and accounts */
		if (gs_metrics_new(cfg->metrics_listen, ac->acct, &ac->st,
				   &ac->metrics, &merr) < 0) {
			log_warnx("%s; running without metrics", merr.msg);
		} else if (gs_loop_add_fd(l, gs_metrics_fd(ac->metrics),
					  EPOLLIN, on_metrics, ac, &merr) < 0) {
			log_warnx("metrics: %s", merr.msg);
			gs_metrics_free(ac->metrics);
			ac->metrics = NULL;
		} else if (gs_metrics_unix_path(cfg->metrics_listen)) {
			metrics_grant(cfg, ac->metrics);
		} else {
			log_info("metrics: http://%s/metrics",
				 cfg->metrics_listen);
		}
	}
	if (gs_alloc_observe(gs_agent_allocs(ag), observer, ac) < 0) {
		gs_error_set(err, GS_ENOMEM, "accounting: too many observers");
		goto out_free;
	}
	/* the allocations restored from the state file: those whose usage
	 * row is already final were closed just before the agent died */
	keep = calloc(gs_alloc_count(gs_agent_allocs(ag)) + 1, sizeof(*keep));
	if (keep == NULL) {
		gs_error_set(err, GS_ENOMEM, "accounting: out of memory");
		goto out_free;
	}
	nkeep = 0;
	for (a = gs_alloc_first(gs_agent_allocs(ag)); a != NULL;
	     a = gs_alloc_next(gs_agent_allocs(ag), a))
		if (gs_store_closed_id(ac->store, a->id))
			keep[nkeep++] = a->id;
	for (unsigned i = 0; i < nkeep; i++)
		gs_agent_forget(ag, keep[i]);
	free(keep);
	for (a = gs_alloc_first(gs_agent_allocs(ag)); a != NULL;
	     a = gs_alloc_next(gs_agent_allocs(ag), a))
		on_created(ac, a);
	seed_restored(ac);
	if (gs_loop_add_tick(l, ac->period, on_tick, ac, err) < 0)
		goto out_free;
	log_info("accounting: usage store %s, tick %.3f s", path,
		 (double)ac->period / 1e9);
	*out = ac;
	return 0;
out_free:
	gs_accounting_free(ac);
	return -1;
}

void
gs_accounting_free(struct gs_accounting *ac)
{
	struct gs_loop *l;

	if (ac == NULL)
		return;
	l = gs_agent_loop(ac->ag);
	/* the agent outlives this: its shutdown detaches jobs */
	gs_alloc_unobserve(gs_agent_allocs(ac->ag), observer, ac);
	if (ac->acct != NULL && ac->store != NULL)
		do_tick(ac, gs_now_ns());	/* last usage */
	if (ac->store != NULL) {
		gs_store_stop(ac->store);	/* writes what is queued */
		if (gs_store_event_fd(ac->store) >= 0) {
			reap(ac);
			gs_loop_del_fd(l, gs_store_event_fd(ac->store));
		}
	}
	if (ac->metrics != NULL) {
		gs_loop_del_fd(l, gs_metrics_fd(ac->metrics));
		gs_metrics_free(ac->metrics);
	}
	gs_acct_free(ac->acct);
	gs_gpu_util_close(ac->util);
	gs_store_close(ac->store);
	free(ac->unman_rows);
	free(ac->sh);
	free(ac);
}
