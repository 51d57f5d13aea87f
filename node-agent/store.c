/*
 * store.c — SQLite usage store: schema and migrations, the tick writer
 * thread, crash recovery, retention purge and the queries gsacct runs.
 *
 * Durability: WAL with synchronous=NORMAL.  A committed transaction
 * survives the death of the process (kill -9) — the WAL is in the kernel's
 * page cache — but the last transactions before a power loss may be lost
 * (SQLite's documented trade-off for NORMAL in WAL mode); the database
 * itself stays consistent in both cases.
 *
 * Write failures lose nothing (disk full, I/O error, a stalled disk): a
 * batch whose transaction fails stays at the head of the queue and is
 * tried again (after 0.25 s, doubling up to 4 s) until it commits; the
 * batches behind it wait in order.  Each failed try is reported as a
 * completion (ok = 0), so the loop can say loudly that the store is
 * behind.  Memory stays bounded: beyond QUEUE_MAX waiting batches a new
 * batch is merged into the last one (merge_batch): an allocation row
 * replaces the older row of the same key (rows carry cumulative totals
 * and the state, so the newest is the whole truth; a closed row is never
 * dropped), and samples of one key add up into one sample spanning the
 * merged ticks (exact totals, coarser time slices).  So what waits grows
 * with the number of allocations, not with the length of the outage.
 * A merged batch records only its newest tick in the tick log.  Only a
 * stop (SIGTERM) gives up, after STOP_TRIES tries, and says so.
 *
 * Threading: the owner thread submits batches to a queue under `mu`; the
 * writer thread is the only one touching the connection while it runs
 * (the owner only reads the connection before gs_store_start and after
 * gs_store_stop).  Completions travel back in `done`, signalled on the
 * eventfd.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store.h"

#define QUEUE_MAX	8	/* batches waiting before new ones merge */
#define DONE_MAX	64
/* a failed write is retried after RETRY_MIN_MS, doubling up to
 * RETRY_MAX_MS; while stopping, at most STOP_TRIES times in all */
#define RETRY_MIN_MS	250
#define RETRY_MAX_MS	4000
#define STOP_TRIES	3


struct gs_store {
	sqlite3 *db;
	int rdonly;
	sqlite3_stmt *st_alloc, *st_sample, *st_tick;

	/* adoption candidates from gs_store_recover */
	struct gs_store_alloc *orph;
	unsigned norph;
	/* rows of allocations the agent restored (gs_store_recover_keep) */
	struct gs_store_alloc *kept;
	unsigned nkept;

	/* writer thread */
	int started;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t idle_cv;	/* the writer finished a batch */
	int writing;		/* a batch is being written */
	uint64_t writing_since;	/* that batch's q_since */
	struct gs_store_batch *qhead, *qtail;	/* linked by q_next */
	unsigned qlen;
	int stopping;
	unsigned fails;		/* failed tries of the head batch */
	uint64_t retry_at;	/* CLOCK_MONOTONIC ns of its next try */
	struct gs_store_done done[DONE_MAX];
	unsigned ndone;
	int efd;
	int64_t retention_ns;
	unsigned purge_limit;
};

static const char *const state_names[GS_SST_MAX] = {
	"RUNNING", "COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT",
};

const char *
gs_store_state_name(uint32_t st)
{
	return st < GS_SST_MAX ? state_names[st] : "UNKNOWN";
}

int
gs_store_state_parse(const char *s, uint32_t *out)
{
	static const struct { const char *abbr; uint32_t st; } ab[] = {
		{ "R", GS_SST_RUNNING }, { "CD", GS_SST_COMPLETED },
		{ "F", GS_SST_FAILED }, { "CA", GS_SST_CANCELLED },
		{ "NF", GS_SST_NODE_FAIL }, { "TO", GS_SST_TIMEOUT },
	};
	for (uint32_t i = 0; i < GS_SST_MAX; i++)
		if (strcasecmp(s, state_names[i]) == 0) {
			*out = i;
			return 0;
		}
	for (size_t i = 0; i < sizeof(ab) / sizeof(ab[0]); i++)
		if (strcasecmp(s, ab[i].abbr) == 0) {
			*out = ab[i].st;
			return 0;
		}
	return -1;
}

/* ---- batches ---- */

struct gs_store_batch *
gs_store_batch_new(uint64_t tick, int64_t t_ns)
{
	struct gs_store_batch *b = calloc(1, sizeof(*b));

	if (b != NULL) {
		b->tick = tick;
		b->t_ns = t_ns;
	}
	return b;
}

void
gs_store_batch_free(struct gs_store_batch *b)
{
	if (b == NULL)
		return;
	free(b->allocs);
	free(b->samples);
	free(b);
}

static int
grow(void **p, uint32_t *cap, uint32_t n, size_t sz)
{
	uint32_t nc;
	void *np;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	np = realloc(*p, (size_t)nc * sz);
	if (np == NULL)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

int
gs_store_batch_add_alloc(struct gs_store_batch *b,
			 const struct gs_store_alloc *a, struct gs_error *err)
{
	if (grow((void **)&b->allocs, &b->cap_allocs, b->nallocs,
		 sizeof(*a)) < 0)
		return gs_error_set(err, GS_ENOMEM, "store batch: out of memory");
	b->allocs[b->nallocs++] = *a;
	return 0;
}

int
gs_store_batch_add_sample(struct gs_store_batch *b,
			  const struct gs_store_sample *s, struct gs_error *err)
{
	if (grow((void **)&b->samples, &b->cap_samples, b->nsamples,
		 sizeof(*s)) < 0)
		return gs_error_set(err, GS_ENOMEM, "store batch: out of memory");
	b->samples[b->nsamples++] = *s;
	return 0;
}

/* Room for n more elements of size sz in *p (capacity *cap, n in use). */
static int
reserve(void **p, uint32_t *cap, uint32_t used, uint32_t more, size_t sz)
{
	void *np;

	if (used + more <= *cap)
		return 0;
	np = realloc(*p, (size_t)(used + more) * sz);
	if (np == NULL)
		return -1;
	*p = np;
	*cap = used + more;
	return 0;
}

/* Add b's writes to t (both queued, not with the writer): rows by key,
 * the newer replacing the older; samples of one key summed into one.
 * All or nothing: -1 with t unchanged when memory runs out. */
static int
merge_batch(struct gs_store_batch *t, const struct gs_store_batch *b)
{
	uint32_t i, j;

	if (reserve((void **)&t->allocs, &t->cap_allocs, t->nallocs,
		    b->nallocs, sizeof(*t->allocs)) < 0 ||
	    reserve((void **)&t->samples, &t->cap_samples, t->nsamples,
		    b->nsamples, sizeof(*t->samples)) < 0)
		return -1;
	for (i = 0; i < b->nallocs; i++) {
		for (j = 0; j < t->nallocs; j++)
			if (t->allocs[j].key == b->allocs[i].key)
				break;
		if (j < t->nallocs)
			t->allocs[j] = b->allocs[i];
		else
			t->allocs[t->nallocs++] = b->allocs[i];
	}
	for (i = 0; i < b->nsamples; i++) {
		const struct gs_store_sample *x = &b->samples[i];
		struct gs_store_sample *y;

		for (j = 0; j < t->nsamples; j++)
			if (t->samples[j].key == x->key)
				break;
		if (j == t->nsamples) {
			t->samples[t->nsamples++] = *x;
			continue;
		}
		y = &t->samples[j];
		y->t_ns = x->t_ns;
		y->dt_ns += x->dt_ns;
		y->estimate |= x->estimate;
		y->d.gpu_ns += x->d.gpu_ns;
		y->d.held_ns += x->d.held_ns;
		y->d.share_ns += x->d.share_ns;
		y->d.wall_ns += x->d.wall_ns;
		y->d.block_tasks += x->d.block_tasks;
		y->d.suspensions += x->d.suspensions;
		y->d.evict_ns_sum += x->d.evict_ns_sum;
		if (x->d.evict_ns_max > y->d.evict_ns_max)
			y->d.evict_ns_max = x->d.evict_ns_max;
	}
	t->tick = b->tick;
	t->t_ns = b->t_ns;
	return 0;
}

/* ---- schema ---- */

/*
 * Migrations: entry i brings user_version i to i+1.  Never edit a shipped
 * entry; append a new one and bump GS_STORE_SCHEMA_VERSION.
 *  1: allocations and per-tick samples.
 *  2: the committed-tick log and a time index on samples (retention purge
 *     and time-window reports).
 *  3: device memory: the limit on allocations; the most held, the
 *     byte-seconds held and the time they cover, on allocations and
 *     samples (MaxMem, AveMem).
 */
static const char *const migrations[GS_STORE_SCHEMA_VERSION] = {
	"CREATE TABLE allocs ("
	" key INTEGER PRIMARY KEY,"
	" agent_id INTEGER NOT NULL,"
	" cluster TEXT NOT NULL DEFAULT '', job TEXT NOT NULL DEFAULT '',"
	" step TEXT NOT NULL DEFAULT '', node TEXT NOT NULL DEFAULT '',"
	" ns TEXT NOT NULL DEFAULT '', pod TEXT NOT NULL DEFAULT '',"
	" container TEXT NOT NULL DEFAULT '', user TEXT NOT NULL DEFAULT '',"
	" account TEXT NOT NULL DEFAULT '',"
	" uid INTEGER NOT NULL, gpu INTEGER NOT NULL,"
	" gpu_uuid TEXT NOT NULL DEFAULT '',"
	" shares INTEGER NOT NULL, weight INTEGER NOT NULL,"
	" priority INTEGER NOT NULL, mode INTEGER NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL DEFAULT 0,"
	" last_ns INTEGER NOT NULL DEFAULT 0,"
	" state INTEGER NOT NULL, estimate INTEGER NOT NULL DEFAULT 0,"
	" gpu_ns INTEGER NOT NULL DEFAULT 0, held_ns INTEGER NOT NULL DEFAULT 0,"
	" share_ns INTEGER NOT NULL DEFAULT 0,"
	" wall_ns INTEGER NOT NULL DEFAULT 0,"
	" block_tasks INTEGER NOT NULL DEFAULT 0,"
	" suspensions INTEGER NOT NULL DEFAULT 0,"
	" evict_ns_sum INTEGER NOT NULL DEFAULT 0,"
	" evict_ns_max INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX allocs_job ON allocs(job, step);"
	"CREATE INDEX allocs_uid ON allocs(uid);"
	"CREATE INDEX allocs_end ON allocs(end_ns);"
	"CREATE TABLE samples ("
	" key INTEGER NOT NULL, t_ns INTEGER NOT NULL,"
	" dt_ns INTEGER NOT NULL, estimate INTEGER NOT NULL,"
	" gpu_ns INTEGER NOT NULL, held_ns INTEGER NOT NULL,"
	" share_ns INTEGER NOT NULL, wall_ns INTEGER NOT NULL,"
	" block_tasks INTEGER NOT NULL, suspensions INTEGER NOT NULL,"
	" evict_ns_sum INTEGER NOT NULL, evict_ns_max INTEGER NOT NULL,"
	" PRIMARY KEY (key, t_ns)) WITHOUT ROWID;",

	"CREATE TABLE ticks (tick INTEGER PRIMARY KEY,"
	" t_ns INTEGER NOT NULL, nsamples INTEGER NOT NULL);"
	"CREATE INDEX samples_t ON samples(t_ns);",

	"ALTER TABLE allocs ADD COLUMN mem_max INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE allocs ADD COLUMN mem_byte_s INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE allocs ADD COLUMN mem_ns INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE allocs ADD COLUMN mem_limit INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE samples ADD COLUMN mem_max INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE samples ADD COLUMN mem_byte_s INTEGER NOT NULL"
	" DEFAULT 0;"
	"ALTER TABLE samples ADD COLUMN mem_ns INTEGER NOT NULL DEFAULT 0;",
};

static int
sqlerr(struct gs_store *s, struct gs_error *err, const char *what)
{
	return gs_error_set(err, GS_EIO, "usage store: %s: %s", what,
			    s->db ? sqlite3_errmsg(s->db) : "no database");
}

static int
exec(struct gs_store *s, const char *sql, struct gs_error *err)
{
	char *msg = NULL;

	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		gs_error_set(err, GS_EIO, "usage store: %s",
			     msg ? msg : "exec failed");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

int
gs_store_version(struct gs_store *s, int *version, struct gs_error *err)
{
	sqlite3_stmt *st = NULL;
	int rv = -1;

	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st,
			       NULL) != SQLITE_OK)
		return sqlerr(s, err, "read schema version");
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlerr(s, err, "read schema version");
		goto out_finalize;
	}
	*version = sqlite3_column_int(st, 0);
	rv = 0;
out_finalize:
	sqlite3_finalize(st);
	return rv;
}

int
gs_store_migrate(struct gs_store *s, int target, struct gs_error *err)
{
	char sql[64];
	int v;

	if (s->rdonly)
		return gs_error_set(err, GS_EINVAL,
				    "usage store: read-only, cannot migrate");
	if (target > GS_STORE_SCHEMA_VERSION)
		return gs_error_set(err, GS_EINVAL,
				    "usage store: no schema version %d", target);
	if (gs_store_version(s, &v, err) < 0)
		return -1;
	if (v > GS_STORE_SCHEMA_VERSION)
		return gs_error_set(err, GS_EVERSION,
				    "usage store: schema version %d is newer than this gshare (%d)",
				    v, GS_STORE_SCHEMA_VERSION);
	for (; v < target; v++) {
		if (exec(s, "BEGIN IMMEDIATE", err) < 0)
			return -1;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if (exec(s, migrations[v], err) < 0 || exec(s, sql, err) < 0) {
			exec(s, "ROLLBACK", NULL);
			return -1;
		}
		if (exec(s, "COMMIT", err) < 0)
			return -1;
	}
	return 0;
}

static int
prepare_writes(struct gs_store *s, struct gs_error *err)
{
	static const char alloc_sql[] =
		"INSERT INTO allocs (key, agent_id, cluster, job, step, node,"
		" ns, pod, container, user, account, uid, gpu, gpu_uuid,"
		" shares, weight, priority, mode, start_ns, end_ns, last_ns,"
		" state, estimate, gpu_ns, held_ns, share_ns, wall_ns,"
		" block_tasks, suspensions, evict_ns_sum, evict_ns_max,"
		" mem_max, mem_byte_s, mem_ns, mem_limit)"
		" VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,"
		"?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26,?27,?28,?29,?30,"
		"?31,?32,?33,?34,?35) ON CONFLICT(key) DO UPDATE SET agent_id=?2, cluster=?3,"
		" job=?4, step=?5, node=?6, ns=?7, pod=?8, container=?9,"
		" user=?10, account=?11, uid=?12,"
		" gpu=?13, gpu_uuid=?14, shares=?15, weight=?16, priority=?17,"
		" mode=?18, end_ns=?20, last_ns=?21, state=?22, estimate=?23,"
		" gpu_ns=?24, held_ns=?25, share_ns=?26, wall_ns=?27,"
		" block_tasks=?28, suspensions=?29, evict_ns_sum=?30,"
		" evict_ns_max=?31, mem_max=?32, mem_byte_s=?33, mem_ns=?34,"
		" mem_limit=?35";
	static const char sample_sql[] =
		"INSERT OR REPLACE INTO samples (key, t_ns, dt_ns, estimate,"
		" gpu_ns, held_ns, share_ns, wall_ns, block_tasks,"
		" suspensions, evict_ns_sum, evict_ns_max, mem_max,"
		" mem_byte_s, mem_ns)"
		" VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
	static const char tick_sql[] =
		"INSERT OR REPLACE INTO ticks (tick, t_ns, nsamples)"
		" VALUES (?,?,?)";

	if (sqlite3_prepare_v2(s->db, alloc_sql, -1, &s->st_alloc, NULL) ||
	    sqlite3_prepare_v2(s->db, sample_sql, -1, &s->st_sample, NULL) ||
	    sqlite3_prepare_v2(s->db, tick_sql, -1, &s->st_tick, NULL))
		return sqlerr(s, err, "prepare");
	return 0;
}

/*
 * A reader without write access to the directory cannot create the WAL
 * index (-shm) of a database that no writer holds open.  When no -wal file
 * exists the database is fully checkpointed and nobody is writing it, so
 * it is opened as immutable instead.  (A writer starting between the check
 * and the read is not seen; the reader gets the state at the check.)
 */
static int
reopen_immutable(struct gs_store *s, const char *path, struct gs_error *err)
{
	char wal[4096], uri[4096 * 3 + 64];
	size_t o = 0;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (access(wal, F_OK) == 0)
		return -1;
	o += (size_t)snprintf(uri, sizeof(uri), "file:");
	for (const char *p = path; *p && o + 4 < sizeof(uri) - 32; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '%' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f)
			o += (size_t)snprintf(uri + o, sizeof(uri) - o, "%%%02X",
					      c);
		else
			uri[o++] = (char)c;
	}
	snprintf(uri + o, sizeof(uri) - o, "?mode=ro&immutable=1");
	sqlite3_close(s->db);
	s->db = NULL;
	if (sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY |
			    SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK)
		return gs_error_set(err, GS_EIO, "usage store %s: %s", path,
				    s->db ? sqlite3_errmsg(s->db) :
				    "cannot open");
	sqlite3_busy_timeout(s->db, 5000);
	return 0;
}

int
gs_store_open(const char *path, int flags, struct gs_store **out,
	      struct gs_error *err)
{
	struct gs_store *s;
	int oflags, v;

	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return gs_error_set(err, GS_ENOMEM, "usage store: out of memory");
	s->efd = -1;
	s->rdonly = (flags & GS_STORE_RDONLY) != 0;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_cond_init(&s->idle_cv, NULL);
	oflags = s->rdonly ? SQLITE_OPEN_READONLY :
		SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	if (sqlite3_open_v2(path, &s->db, oflags | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		gs_error_set(err, s->rdonly ? GS_ENOENT : GS_EIO,
			     "usage store %s: %s", path,
			     s->db ? sqlite3_errmsg(s->db) : "cannot open");
		goto out_close;
	}
	sqlite3_busy_timeout(s->db, 5000);
	if (s->rdonly) {
		if (gs_store_version(s, &v, err) < 0 &&
		    reopen_immutable(s, path, err) < 0)
			goto out_close;
		if (gs_store_version(s, &v, err) < 0)
			goto out_close;
		if (v != GS_STORE_SCHEMA_VERSION) {
			gs_error_set(err, GS_EVERSION,
				     "usage store %s: schema version %d, this gshare reads %d%s",
				     path, v, GS_STORE_SCHEMA_VERSION,
				     v < GS_STORE_SCHEMA_VERSION ?
				     " (start gshared once to migrate it)" : "");
			goto out_close;
		}
	} else {
		if (exec(s, "PRAGMA journal_mode=WAL", err) < 0 ||
		    exec(s, "PRAGMA synchronous=NORMAL", err) < 0)
			goto out_close;
		if (!(flags & GS_STORE_NOMIGRATE) &&
		    (gs_store_migrate(s, GS_STORE_SCHEMA_VERSION, err) < 0 ||
		     prepare_writes(s, err) < 0))
			goto out_close;
	}
	*out = s;
	return 0;
out_close:
	gs_store_close(s);
	return -1;
}

void
gs_store_close(struct gs_store *s)
{
	if (s == NULL)
		return;
	gs_store_stop(s);
	sqlite3_finalize(s->st_alloc);
	sqlite3_finalize(s->st_sample);
	sqlite3_finalize(s->st_tick);
	sqlite3_close(s->db);
	if (s->efd >= 0)
		close(s->efd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->idle_cv);
	free(s->orph);
	free(s->kept);
	free(s);
}

static int
one_u64(struct gs_store *s, const char *sql, uint64_t *out,
	struct gs_error *err)
{
	sqlite3_stmt *st = NULL;
	int rv = -1;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return sqlerr(s, err, "query");
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlerr(s, err, "query");
		goto out_finalize;
	}
	*out = (uint64_t)sqlite3_column_int64(st, 0);
	rv = 0;
out_finalize:
	sqlite3_finalize(st);
	return rv;
}

int
gs_store_next_key(struct gs_store *s, uint64_t *out, struct gs_error *err)
{
	return one_u64(s, "SELECT COALESCE(MAX(key), 0) + 1 FROM allocs", out,
		       err);
}

int
gs_store_next_agent_id(struct gs_store *s, uint64_t *out,
		       struct gs_error *err)
{
	return one_u64(s, "SELECT COALESCE(MAX(agent_id), 0) + 1 FROM allocs",
		       out, err);
}

int
gs_store_last_tick(struct gs_store *s, uint64_t *out, struct gs_error *err)
{
	return one_u64(s, "SELECT COALESCE(MAX(tick), 0) FROM ticks", out, err);
}

/* ---- row codec ---- */

#define ALLOC_COLS \
	"key, agent_id, cluster, job, step, node, ns, pod, container, user," \
	" account, uid, gpu, gpu_uuid, shares, weight, priority, mode," \
	" start_ns, end_ns, last_ns, state, estimate, gpu_ns, held_ns," \
	" share_ns, wall_ns, block_tasks, suspensions, evict_ns_sum," \
	" evict_ns_max, mem_max, mem_byte_s, mem_ns, mem_limit"

static void
col_text(sqlite3_stmt *st, int i, char *dst, size_t n)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	snprintf(dst, n, "%s", t ? (const char *)t : "");
}

static void
read_alloc(sqlite3_stmt *st, struct gs_store_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->key = (uint64_t)sqlite3_column_int64(st, 0);
	a->agent_id = (uint64_t)sqlite3_column_int64(st, 1);
	col_text(st, 2, a->labels.cluster, sizeof(a->labels.cluster));
	col_text(st, 3, a->labels.job, sizeof(a->labels.job));
	col_text(st, 4, a->labels.step, sizeof(a->labels.step));
	col_text(st, 5, a->labels.node, sizeof(a->labels.node));
	col_text(st, 6, a->labels.ns, sizeof(a->labels.ns));
	col_text(st, 7, a->labels.pod, sizeof(a->labels.pod));
	col_text(st, 8, a->labels.container, sizeof(a->labels.container));
	col_text(st, 9, a->labels.user, sizeof(a->labels.user));
	col_text(st, 10, a->labels.account, sizeof(a->labels.account));
	a->uid = (uint32_t)sqlite3_column_int64(st, 11);
	a->gpu = sqlite3_column_int(st, 12);
	col_text(st, 13, a->gpu_uuid, sizeof(a->gpu_uuid));
	a->shares = (uint32_t)sqlite3_column_int64(st, 14);
	a->weight = (uint32_t)sqlite3_column_int64(st, 15);
	a->priority = (uint32_t)sqlite3_column_int64(st, 16);
	a->mode = (uint32_t)sqlite3_column_int64(st, 17);
	a->start_ns = sqlite3_column_int64(st, 18);
	a->end_ns = sqlite3_column_int64(st, 19);
	a->last_ns = sqlite3_column_int64(st, 20);
	a->state = (uint32_t)sqlite3_column_int64(st, 21);
	a->estimate = (uint32_t)sqlite3_column_int64(st, 22);
	a->tot.gpu_ns = (uint64_t)sqlite3_column_int64(st, 23);
	a->tot.held_ns = (uint64_t)sqlite3_column_int64(st, 24);
	a->tot.share_ns = (uint64_t)sqlite3_column_int64(st, 25);
	a->tot.wall_ns = (uint64_t)sqlite3_column_int64(st, 26);
	a->tot.block_tasks = (uint64_t)sqlite3_column_int64(st, 27);
	a->tot.suspensions = (uint64_t)sqlite3_column_int64(st, 28);
	a->tot.evict_ns_sum = (uint64_t)sqlite3_column_int64(st, 29);
	a->tot.evict_ns_max = (uint64_t)sqlite3_column_int64(st, 30);
	a->tot.mem_max = (uint64_t)sqlite3_column_int64(st, 31);
	a->tot.mem_byte_s = (uint64_t)sqlite3_column_int64(st, 32);
	a->tot.mem_ns = (uint64_t)sqlite3_column_int64(st, 33);
	a->mem_limit = (uint64_t)sqlite3_column_int64(st, 34);
}

static void
bind_text(sqlite3_stmt *st, int i, const char *t)
{
	sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
}

static void
bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* The eleven usage columns, in struct gs_usage order, from column i on:
 * allocation totals and per-tick samples store the same fields. */
static void
bind_usage(sqlite3_stmt *st, int i, const struct gs_usage *u)
{
	bind_u64(st, i, u->gpu_ns);
	bind_u64(st, i + 1, u->held_ns);
	bind_u64(st, i + 2, u->share_ns);
	bind_u64(st, i + 3, u->wall_ns);
	bind_u64(st, i + 4, u->block_tasks);
	bind_u64(st, i + 5, u->suspensions);
	bind_u64(st, i + 6, u->evict_ns_sum);
	bind_u64(st, i + 7, u->evict_ns_max);
	bind_u64(st, i + 8, u->mem_max);
	bind_u64(st, i + 9, u->mem_byte_s);
	bind_u64(st, i + 10, u->mem_ns);
}

static int
write_alloc(struct gs_store *s, const struct gs_store_alloc *a,
	    struct gs_error *err)
{
	sqlite3_stmt *st = s->st_alloc;
	int rc;

	sqlite3_reset(st);
	bind_u64(st, 1, a->key);
	bind_u64(st, 2, a->agent_id);
	bind_text(st, 3, a->labels.cluster);
	bind_text(st, 4, a->labels.job);
	bind_text(st, 5, a->labels.step);
	bind_text(st, 6, a->labels.node);
	bind_text(st, 7, a->labels.ns);
	bind_text(st, 8, a->labels.pod);
	bind_text(st, 9, a->labels.container);
	bind_text(st, 10, a->labels.user);
	bind_text(st, 11, a->labels.account);
	bind_u64(st, 12, a->uid);
	sqlite3_bind_int(st, 13, a->gpu);
	bind_text(st, 14, a->gpu_uuid);
	bind_u64(st, 15, a->shares);
	bind_u64(st, 16, a->weight);
	bind_u64(st, 17, a->priority);
	bind_u64(st, 18, a->mode);
	sqlite3_bind_int64(st, 19, a->start_ns);
	sqlite3_bind_int64(st, 20, a->end_ns);
	sqlite3_bind_int64(st, 21, a->last_ns);
	bind_u64(st, 22, a->state);
	bind_u64(st, 23, a->estimate);
	bind_usage(st, 24, &a->tot);
	bind_u64(st, 35, a->mem_limit);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return sqlerr(s, err, "write allocation");
	return 0;
}

static int
write_sample(struct gs_store *s, const struct gs_store_sample *x,
	     struct gs_error *err)
{
	sqlite3_stmt *st = s->st_sample;
	int rc;

	sqlite3_reset(st);
	bind_u64(st, 1, x->key);
	sqlite3_bind_int64(st, 2, x->t_ns);
	bind_u64(st, 3, x->dt_ns);
	bind_u64(st, 4, x->estimate);
	bind_usage(st, 5, &x->d);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return sqlerr(s, err, "write sample");
	return 0;
}

static int
write_batch(struct gs_store *s, const struct gs_store_batch *b,
	    struct gs_error *err)
{
	int rc;

	if (s->rdonly || s->st_alloc == NULL)
		return gs_error_set(err, GS_EINVAL,
				    "usage store: not open for writing");
	if (exec(s, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	for (uint32_t i = 0; i < b->nallocs; i++)
		if (write_alloc(s, &b->allocs[i], err) < 0)
			goto out_rollback;
	for (uint32_t i = 0; i < b->nsamples; i++)
		if (write_sample(s, &b->samples[i], err) < 0)
			goto out_rollback;
	if (b->tick > 0) {
		sqlite3_reset(s->st_tick);
		bind_u64(s->st_tick, 1, b->tick);
		sqlite3_bind_int64(s->st_tick, 2, b->t_ns);
		bind_u64(s->st_tick, 3, b->nsamples);
		rc = sqlite3_step(s->st_tick);
		sqlite3_reset(s->st_tick);
		if (rc != SQLITE_DONE) {
			sqlerr(s, err, "write tick");
			goto out_rollback;
		}
	}
	if (exec(s, "COMMIT", err) < 0)
		goto out_rollback;
	return 0;
out_rollback:
	exec(s, "ROLLBACK", NULL);
	return -1;
}

int
gs_store_write(struct gs_store *s, struct gs_store_batch *b,
	       struct gs_error *err)
{
	int rv = write_batch(s, b, err);

	gs_store_batch_free(b);
	return rv;
}

/* ---- recovery ---- */

static int
kept_id(const uint64_t *ids, unsigned n, uint64_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

int
gs_store_recover(struct gs_store *s, int64_t since_ns, struct gs_error *err)
{
	return gs_store_recover_keep(s, since_ns, NULL, 0, err);
}

int
gs_store_recover_keep(struct gs_store *s, int64_t since_ns,
		      const uint64_t *keep, unsigned nkeep,
		      struct gs_error *err)
{
	static const char sel[] =
		"SELECT " ALLOC_COLS " FROM allocs WHERE end_ns = 0"
		" OR (state = ?1 AND end_ns >= ?2) ORDER BY key DESC";
	sqlite3_stmt *st = NULL, *up = NULL;
	struct gs_store_alloc a, *na;
	int rc, rv = -1, nclosed = 0;

	if (s->rdonly)
		return gs_error_set(err, GS_EINVAL, "usage store: read-only");
	if (exec(s, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	if (sqlite3_prepare_v2(s->db, sel, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "UPDATE allocs SET end_ns = ?, state = ? WHERE key = ?",
			       -1, &up, NULL) != SQLITE_OK) {
		sqlerr(s, err, "recover");
		goto out_rollback;
	}
	bind_u64(st, 1, GS_SST_NODE_FAIL);
	sqlite3_bind_int64(st, 2, since_ns);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		read_alloc(st, &a);
		if (a.end_ns == 0 && kept_id(keep, nkeep, a.agent_id)) {
			/* the newest open row of a restored allocation
			 * stays open; older ones with the same id (ids of
			 * agents before the state file) close below */
			int dup = 0;

			for (unsigned i = 0; i < s->nkept; i++)
				dup |= s->kept[i].agent_id == a.agent_id;
			if (!dup) {
				na = realloc(s->kept, (s->nkept + 1) *
					     sizeof(*na));
				if (na == NULL) {
					gs_error_set(err, GS_ENOMEM, "usage "
						     "store: out of memory");
					goto out_rollback;
				}
				s->kept = na;
				s->kept[s->nkept++] = a;
				continue;
			}
		}
		if (a.end_ns == 0) {
			a.end_ns = a.last_ns > a.start_ns ? a.last_ns :
				a.start_ns;
			a.state = GS_SST_NODE_FAIL;
			sqlite3_bind_int64(up, 1, a.end_ns);
			bind_u64(up, 2, a.state);
			bind_u64(up, 3, a.key);
			if (sqlite3_step(up) != SQLITE_DONE) {
				sqlerr(s, err, "recover");
				goto out_rollback;
			}
			sqlite3_reset(up);
			nclosed++;
		}
		na = realloc(s->orph, (s->norph + 1) * sizeof(*na));
		if (na == NULL) {
			gs_error_set(err, GS_ENOMEM, "usage store: out of memory");
			goto out_rollback;
		}
		s->orph = na;
		s->orph[s->norph++] = a;
	}
	if (rc != SQLITE_DONE) {
		sqlerr(s, err, "recover");
		goto out_rollback;
	}
	if (exec(s, "COMMIT", err) < 0)
		goto out_rollback;
	rv = nclosed;
	goto out_finalize;
out_rollback:
	exec(s, "ROLLBACK", NULL);
	s->norph = 0;
	s->nkept = 0;
out_finalize:
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	return rv;
}

int
gs_store_finish_closed(struct gs_store *s, const uint64_t *known,
		       unsigned nknown, uint64_t below, struct gs_error *err)
{
	sqlite3_stmt *st = NULL, *up = NULL;
	int rc, rv = -1, n = 0;

	if (s->rdonly)
		return gs_error_set(err, GS_EINVAL, "usage store: read-only");
	if (below == 0)
		return 0;
	if (exec(s, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	if (sqlite3_prepare_v2(s->db, "SELECT key, agent_id, start_ns, "
			       "last_ns FROM allocs WHERE end_ns = 0 AND "
			       "agent_id < ?", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "UPDATE allocs SET end_ns = ?, "
			       "state = ? WHERE key = ?", -1, &up,
			       NULL) != SQLITE_OK) {
		sqlerr(s, err, "finish closed");
		goto out_rollback;
	}
	sqlite3_bind_int64(st, 1, (sqlite3_int64)(below > INT64_MAX ?
						  INT64_MAX : below));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(st, 1);
		int64_t start = sqlite3_column_int64(st, 2);
		int64_t last = sqlite3_column_int64(st, 3);

		if (kept_id(known, nknown, id))
			continue;
		sqlite3_bind_int64(up, 1, last > start ? last : start);
		bind_u64(up, 2, GS_SST_COMPLETED);
		sqlite3_bind_int64(up, 3, sqlite3_column_int64(st, 0));
		if (sqlite3_step(up) != SQLITE_DONE) {
			sqlerr(s, err, "finish closed");
			goto out_rollback;
		}
		sqlite3_reset(up);
		n++;
	}
	if (rc != SQLITE_DONE) {
		sqlerr(s, err, "finish closed");
		goto out_rollback;
	}
	if (exec(s, "COMMIT", err) < 0)
		goto out_rollback;
	rv = n;
	goto out_finalize;
out_rollback:
	exec(s, "ROLLBACK", NULL);
out_finalize:
	sqlite3_finalize(st);
	sqlite3_finalize(up);
	return rv;
}

int
gs_store_adopt(struct gs_store *s, const struct gs_labels *l, uint32_t uid,
	       int32_t gpu, struct gs_store_alloc *row)
{
	/* without a job or a pod nothing says it is the same allocation */
	if (l->job[0] == '\0' && l->pod[0] == '\0')
		return 0;
	for (unsigned i = 0; i < s->norph; i++) {
		const struct gs_store_alloc *o = &s->orph[i];
		const struct gs_labels *ol = &o->labels;

		if (o->uid != uid || o->gpu != gpu ||
		    strcmp(ol->cluster, l->cluster) ||
		    strcmp(ol->job, l->job) ||
		    strcmp(ol->step, l->step) || strcmp(ol->ns, l->ns) ||
		    strcmp(ol->pod, l->pod) ||
		    strcmp(ol->container, l->container))
			continue;
		*row = *o;
		row->end_ns = 0;
		row->state = GS_SST_RUNNING;
		s->orph[i] = s->orph[--s->norph];
		return 1;
	}
	return 0;
}

int
gs_store_closed_id(struct gs_store *s, uint64_t agent_id)
{
	char sql[160];
	struct gs_error err;
	uint64_t n = 0;

	for (unsigned i = 0; i < s->nkept; i++)
		if (s->kept[i].agent_id == agent_id)
			return 0;
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM allocs WHERE "
		 "agent_id = %" PRIu64 " AND end_ns != 0", agent_id);
	if (one_u64(s, sql, &n, &err) < 0)
		return 0;
	return n > 0;
}

int
gs_store_adopt_id(struct gs_store *s, uint64_t agent_id, uint32_t uid,
		  int32_t gpu, struct gs_store_alloc *row)
{
	for (unsigned i = 0; i < s->nkept; i++) {
		const struct gs_store_alloc *o = &s->kept[i];

		if (o->agent_id != agent_id || o->uid != uid || o->gpu != gpu)
			continue;
		*row = *o;
		s->kept[i] = s->kept[--s->nkept];
		return 1;
	}
	return 0;
}

unsigned
gs_store_orphans(const struct gs_store *s)
{
	return s->norph;
}

/* ---- retention ---- */

int
gs_store_purge(struct gs_store *s, int64_t cutoff_ns, unsigned limit,
	       unsigned *deleted, struct gs_error *err)
{
	sqlite3_stmt *st = NULL;
	int n = 0, rv = -1;

	if (exec(s, "BEGIN IMMEDIATE", err) < 0)
		return -1;
	if (sqlite3_prepare_v2(s->db,
			       "DELETE FROM samples WHERE (key, t_ns) IN"
			       " (SELECT key, t_ns FROM samples WHERE t_ns < ?1"
			       " LIMIT ?2)", -1, &st, NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, cutoff_ns);
	sqlite3_bind_int64(st, 2, limit);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	n = sqlite3_changes(s->db);
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "DELETE FROM ticks WHERE tick IN (SELECT tick"
			       " FROM ticks WHERE t_ns < ?1 LIMIT ?2)", -1, &st,
			       NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, cutoff_ns);
	sqlite3_bind_int64(st, 2, limit);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_prepare_v2(s->db,
			       "DELETE FROM allocs WHERE key IN (SELECT key"
			       " FROM allocs a WHERE end_ns != 0 AND end_ns < ?1"
			       " AND NOT EXISTS (SELECT 1 FROM samples x"
			       " WHERE x.key = a.key) LIMIT ?2)", -1, &st,
			       NULL) != SQLITE_OK)
		goto out_err;
	sqlite3_bind_int64(st, 1, cutoff_ns);
	sqlite3_bind_int64(st, 2, limit);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out_err;
	sqlite3_finalize(st);
	st = NULL;
	if (exec(s, "COMMIT", err) < 0)
		goto out_rollback;
	if (deleted != NULL)
		*deleted = (unsigned)n;
	return 0;
out_err:
	sqlerr(s, err, "purge");
out_rollback:
	sqlite3_finalize(st);
	exec(s, "ROLLBACK", NULL);
	return rv;
}

/* ---- writer thread ---- */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int64_t
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
post_done(struct gs_store *s, const struct gs_store_done *d)
{
	uint64_t one = 1;

	pthread_mutex_lock(&s->mu);
	if (s->ndone < DONE_MAX)
		s->done[s->ndone++] = *d;
	else	/* the loop is not reaping: keep the newest */
		s->done[DONE_MAX - 1] = *d;
	pthread_mutex_unlock(&s->mu);
	if (write(s->efd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow at our rate; nothing to do */
	}
}

/* Sleep until the head batch may be tried again (or a stop). */
static void
wait_retry(struct gs_store *s)
{
	struct timespec dl;
	uint64_t now = mono_ns();

	if (s->retry_at <= now || s->stopping)
		return;
	clock_gettime(CLOCK_REALTIME, &dl);	/* the condvar's clock */
	dl.tv_sec += (time_t)((s->retry_at - now) / 1000000000u);
	dl.tv_nsec += (long)((s->retry_at - now) % 1000000000u);
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (!s->stopping && mono_ns() < s->retry_at)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) != 0)
			break;
}

static void *
writer_main(void *arg)
{
	struct gs_store *s = arg;
	struct gs_store_done d;
	struct gs_error err;
	struct gs_store_batch *n;
	int64_t retention;
	uint64_t t0, backoff;
	int drop;

	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (s->qhead == NULL && !s->stopping)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->fails > 0)
			wait_retry(s);
		n = s->qhead;
		if (n == NULL) {	/* stopping and drained */
			pthread_mutex_unlock(&s->mu);
			break;
		}
		s->qhead = n->q_next;
		if (s->qhead == NULL)
			s->qtail = NULL;
		s->qlen--;
		s->writing = 1;
		s->writing_since = n->q_since;
		retention = s->retention_ns;
		pthread_mutex_unlock(&s->mu);

		memset(&d, 0, sizeof(d));
		d.tick = n->tick;
		t0 = mono_ns();
		gs_error_clear(&err);
		d.ok = write_batch(s, n, &err) == 0;
		d.write_ns = mono_ns() - t0;
		drop = 0;
		pthread_mutex_lock(&s->mu);
		if (d.ok) {
			s->fails = 0;
		} else {
			s->fails++;
			drop = s->stopping && s->fails >= STOP_TRIES;
			d.tries = s->fails;
			d.lost = drop;
			snprintf(d.msg, sizeof(d.msg), "%s", err.msg);
			backoff = (uint64_t)RETRY_MIN_MS << (s->fails < 5 ?
							     s->fails - 1 : 4);
			if (backoff > RETRY_MAX_MS)
				backoff = RETRY_MAX_MS;
			s->retry_at = mono_ns() + backoff * 1000000u;
			if (drop) {
				s->fails = 0;
			} else {
				/* back at the head: tried again, in order */
				n->q_next = s->qhead;
				s->qhead = n;
				if (s->qtail == NULL)
					s->qtail = n;
				s->qlen++;
			}
		}
		pthread_mutex_unlock(&s->mu);
		if (d.ok && retention > 0 &&
		    gs_store_purge(s, real_ns() - retention, s->purge_limit,
				   &d.purged, &err) < 0)
			snprintf(d.msg, sizeof(d.msg), "%s", err.msg);
		if (d.ok || drop)
			gs_store_batch_free(n);
		post_done(s, &d);
		pthread_mutex_lock(&s->mu);
		s->writing = 0;
		pthread_cond_broadcast(&s->idle_cv);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

int
gs_store_flush(struct gs_store *s, int timeout_ms)
{
	struct timespec dl;
	int rv = 0;

	if (!s->started)
		return 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->mu);
	while ((s->qhead != NULL || s->writing) && rv == 0)
		if (pthread_cond_timedwait(&s->idle_cv, &s->mu, &dl) != 0)
			rv = -1;
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int
gs_store_start(struct gs_store *s, int64_t retention_ns, unsigned purge_limit,
	       struct gs_error *err)
{
	if (s->rdonly)
		return gs_error_set(err, GS_EINVAL, "usage store: read-only");
	if (s->started)
		return 0;
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0)
		return gs_error_errno(err, GS_EIO, "usage store: eventfd");
	s->retention_ns = retention_ns;
	s->purge_limit = purge_limit ? purge_limit : 1000;
	s->stopping = 0;
	if (pthread_create(&s->thr, NULL, writer_main, s) != 0) {
		close(s->efd);
		s->efd = -1;
		return gs_error_set(err, GS_EIO,
				    "usage store: cannot start writer thread");
	}
	s->started = 1;
	return 0;
}

void
gs_store_set_retention(struct gs_store *s, int64_t retention_ns)
{
	pthread_mutex_lock(&s->mu);
	s->retention_ns = retention_ns;
	pthread_mutex_unlock(&s->mu);
}

int
gs_store_event_fd(const struct gs_store *s)
{
	return s->efd;
}

int
gs_store_submit(struct gs_store *s, struct gs_store_batch *b,
		struct gs_error *err)
{
	if (!s->started) {
		gs_store_batch_free(b);
		return gs_error_set(err, GS_ESTATE,
				    "usage store: writer not started");
	}
	b->q_next = NULL;
	b->q_since = mono_ns();
	pthread_mutex_lock(&s->mu);
	/* the disk is behind: fold the new batch into the last waiting one,
	 * which the writer is not using; without memory for that, queue it
	 * anyway (nothing is dropped) */
	if (s->qlen >= QUEUE_MAX && s->qtail != NULL &&
	    merge_batch(s->qtail, b) == 0) {
		pthread_mutex_unlock(&s->mu);
		gs_store_batch_free(b);
		return 0;
	}
	if (s->qtail)
		s->qtail->q_next = b;
	else
		s->qhead = b;
	s->qtail = b;
	s->qlen++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

uint64_t
gs_store_oldest(struct gs_store *s)
{
	uint64_t t = 0;

	pthread_mutex_lock(&s->mu);
	if (s->writing)
		t = s->writing_since;
	if (s->qhead != NULL && (t == 0 || s->qhead->q_since < t))
		t = s->qhead->q_since;
	pthread_mutex_unlock(&s->mu);
	return t;
}

unsigned
gs_store_queued(struct gs_store *s)
{
	unsigned n;

	pthread_mutex_lock(&s->mu);
	n = s->qlen;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int
gs_store_reap(struct gs_store *s, struct gs_store_done *out, int max)
{
	uint64_t cnt;
	int n;

	if (s->efd >= 0 && read(s->efd, &cnt, sizeof(cnt)) < 0) {
		/* EAGAIN: nothing signalled; the list may still hold some */
	}
	pthread_mutex_lock(&s->mu);
	n = (int)s->ndone < max ? (int)s->ndone : max;
	memcpy(out, s->done, (size_t)n * sizeof(*out));
	memmove(s->done, s->done + n, (s->ndone - (unsigned)n) * sizeof(*out));
	s->ndone -= (unsigned)n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

void
gs_store_stop(struct gs_store *s)
{
	if (s == NULL || !s->started)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	s->started = 0;
}

/* ---- queries ---- */

struct sqlbuf {
	char buf[32768];	/* 256 job selectors of ~100 bytes */
	size_t len;
	int overflow;
};

static void
sb_add(struct sqlbuf *b, const char *t)
{
	size_t n = strlen(t);

	if (b->len + n + 1 > sizeof(b->buf)) {
		b->overflow = 1;
		return;
	}
	memcpy(b->buf + b->len, t, n + 1);
	b->len += n;
}

/* A job selector: "42" (all steps), "42.1" (one step), "ns/pod" or
 * "ns/pod/container". */
struct jobsel {
	char a[GS_LABEL_MAX * 2], b[GS_LABEL_MAX * 2], c[GS_LABEL_MAX];
	int kind;	/* 0 job, 1 job.step, 2 ns/pod, 3 ns/pod/container */
};

static void
parse_jobsel(const char *t, struct jobsel *j)
{
	const char *s1 = strchr(t, '/'), *s2, *dot;

	memset(j, 0, sizeof(*j));
	if (s1 != NULL) {
		snprintf(j->a, sizeof(j->a), "%.*s", (int)(s1 - t), t);
		s2 = strchr(s1 + 1, '/');
		if (s2 != NULL) {
			snprintf(j->b, sizeof(j->b), "%.*s",
				 (int)(s2 - s1 - 1), s1 + 1);
			snprintf(j->c, sizeof(j->c), "%s", s2 + 1);
			j->kind = 3;
		} else {
			snprintf(j->b, sizeof(j->b), "%s", s1 + 1);
			j->kind = 2;
		}
		return;
	}
	dot = strchr(t, '.');
	if (dot != NULL) {
		snprintf(j->a, sizeof(j->a), "%.*s", (int)(dot - t), t);
		snprintf(j->b, sizeof(j->b), "%s", dot + 1);
		j->kind = 1;
	} else {
		snprintf(j->a, sizeof(j->a), "%s", t);
	}
}

int
gs_store_query(struct gs_store *s, const struct gs_store_filter *f,
	       gs_store_alloc_cb cb, void *arg, struct gs_error *err)
{
	static const char *const jobsql[] = {
		"(job = ?)", "(job = ? AND step = ?)", "(ns = ? AND pod = ?)",
		"(ns = ? AND pod = ? AND container = ?)",
	};
	struct sqlbuf q = { .len = 0 };
	struct jobsel *js = NULL;
	struct gs_store_alloc a;
	sqlite3_stmt *st = NULL;
	int rc, p = 1, rv = -1;

	sb_add(&q, "SELECT " ALLOC_COLS " FROM allocs WHERE 1");
	if (f->njobs) {
		js = calloc(f->njobs, sizeof(*js));
		if (js == NULL)
			return gs_error_set(err, GS_ENOMEM, "out of memory");
		sb_add(&q, " AND (");
		for (unsigned i = 0; i < f->njobs; i++) {
			parse_jobsel(f->jobs[i], &js[i]);
			sb_add(&q, i ? " OR " : "");
			sb_add(&q, jobsql[js[i].kind]);
		}
		sb_add(&q, ")");
	}
	if (f->nuids) {
		sb_add(&q, " AND uid IN (");
		for (unsigned i = 0; i < f->nuids; i++)
			sb_add(&q, i ? ",?" : "?");
		sb_add(&q, ")");
	}
	if (f->naccounts) {
		sb_add(&q, " AND account IN (");
		for (unsigned i = 0; i < f->naccounts; i++)
			sb_add(&q, i ? ",?" : "?");
		sb_add(&q, ")");
	}
	if (f->nstates) {
		sb_add(&q, " AND state IN (");
		for (unsigned i = 0; i < f->nstates; i++)
			sb_add(&q, i ? ",?" : "?");
		sb_add(&q, ")");
	}
	if (f->start_ns)
		sb_add(&q, " AND (end_ns = 0 OR end_ns >= ?)");
	if (f->end_ns)
		sb_add(&q, " AND start_ns <= ?");
	sb_add(&q, " ORDER BY start_ns, key");
	if (q.overflow) {
		gs_error_set(err, GS_EINVAL, "too many selectors");
		goto out_free;
	}
	if (sqlite3_prepare_v2(s->db, q.buf, -1, &st, NULL) != SQLITE_OK) {
		sqlerr(s, err, "query");
		goto out_free;
	}
	for (unsigned i = 0; i < f->njobs; i++) {
		bind_text(st, p++, js[i].a);
		if (js[i].kind >= 1)
			bind_text(st, p++, js[i].b);
		if (js[i].kind == 3)
			bind_text(st, p++, js[i].c);
	}
	for (unsigned i = 0; i < f->nuids; i++)
		bind_u64(st, p++, f->uids[i]);
	for (unsigned i = 0; i < f->naccounts; i++)
		bind_text(st, p++, f->accounts[i]);
	for (unsigned i = 0; i < f->nstates; i++)
		bind_u64(st, p++, f->states[i]);
	if (f->start_ns)
		sqlite3_bind_int64(st, p++, f->start_ns);
	if (f->end_ns)
		sqlite3_bind_int64(st, p++, f->end_ns);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		read_alloc(st, &a);
		if (cb(arg, &a) < 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		sqlerr(s, err, "query");
		goto out_free;
	}
	rv = 0;
out_free:
	sqlite3_finalize(st);
	free(js);
	return rv;
}

static void
read_sample(sqlite3_stmt *st, struct gs_store_sample *x)
{
	memset(x, 0, sizeof(*x));
	x->key = (uint64_t)sqlite3_column_int64(st, 0);
	x->t_ns = sqlite3_column_int64(st, 1);
	x->dt_ns = (uint64_t)sqlite3_column_int64(st, 2);
	x->estimate = (uint32_t)sqlite3_column_int64(st, 3);
	x->d.gpu_ns = (uint64_t)sqlite3_column_int64(st, 4);
	x->d.held_ns = (uint64_t)sqlite3_column_int64(st, 5);
	x->d.share_ns = (uint64_t)sqlite3_column_int64(st, 6);
	x->d.wall_ns = (uint64_t)sqlite3_column_int64(st, 7);
	x->d.block_tasks = (uint64_t)sqlite3_column_int64(st, 8);
	x->d.suspensions = (uint64_t)sqlite3_column_int64(st, 9);
	x->d.evict_ns_sum = (uint64_t)sqlite3_column_int64(st, 10);
	x->d.evict_ns_max = (uint64_t)sqlite3_column_int64(st, 11);
	x->d.mem_max = (uint64_t)sqlite3_column_int64(st, 12);
	x->d.mem_byte_s = (uint64_t)sqlite3_column_int64(st, 13);
	x->d.mem_ns = (uint64_t)sqlite3_column_int64(st, 14);
}

int
gs_store_samples(struct gs_store *s, uint64_t key, int64_t t0, int64_t t1,
		 gs_store_sample_cb cb, void *arg, struct gs_error *err)
{
	struct gs_store_sample x;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db,
			       "SELECT key, t_ns, dt_ns, estimate, gpu_ns,"
			       " held_ns, share_ns, wall_ns, block_tasks,"
			       " suspensions, evict_ns_sum, evict_ns_max,"
			       " mem_max, mem_byte_s, mem_ns"
			       " FROM samples WHERE key = ?1 AND t_ns >= ?2"
			       " AND t_ns <= ?3 ORDER BY t_ns", -1, &st,
			       NULL) != SQLITE_OK)
		return sqlerr(s, err, "samples");
	bind_u64(st, 1, key);
	sqlite3_bind_int64(st, 2, t0);
	sqlite3_bind_int64(st, 3, t1 ? t1 : INT64_MAX);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		read_sample(st, &x);
		if (cb(arg, &x) < 0)
			break;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sqlerr(s, err, "samples");
	return 0;
}

int
gs_store_sum(struct gs_store *s, uint64_t key, int64_t t0, int64_t t1,
	     struct gs_usage *out, struct gs_error *err)
{
	sqlite3_stmt *st = NULL;
	int rv = -1;

	if (sqlite3_prepare_v2(s->db,
			       "SELECT COALESCE(SUM(gpu_ns), 0),"
			       " COALESCE(SUM(held_ns), 0),"
			       " COALESCE(SUM(share_ns), 0),"
			       " COALESCE(SUM(wall_ns), 0),"
			       " COALESCE(SUM(block_tasks), 0),"
			       " COALESCE(SUM(suspensions), 0),"
			       " COALESCE(SUM(evict_ns_sum), 0),"
			       " COALESCE(MAX(evict_ns_max), 0),"
			       " COALESCE(MAX(mem_max), 0),"
			       " COALESCE(SUM(mem_byte_s), 0),"
			       " COALESCE(SUM(mem_ns), 0)"
			       " FROM samples WHERE key = ?1 AND t_ns > ?2"
			       " AND t_ns <= ?3", -1, &st, NULL) != SQLITE_OK)
		return sqlerr(s, err, "sum");
	bind_u64(st, 1, key);
	sqlite3_bind_int64(st, 2, t0 ? t0 : INT64_MIN);
	sqlite3_bind_int64(st, 3, t1 ? t1 : INT64_MAX);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlerr(s, err, "sum");
		goto out_finalize;
	}
	out->gpu_ns = (uint64_t)sqlite3_column_int64(st, 0);
	out->held_ns = (uint64_t)sqlite3_column_int64(st, 1);
	out->share_ns = (uint64_t)sqlite3_column_int64(st, 2);
	out->wall_ns = (uint64_t)sqlite3_column_int64(st, 3);
	out->block_tasks = (uint64_t)sqlite3_column_int64(st, 4);
	out->suspensions = (uint64_t)sqlite3_column_int64(st, 5);
	out->evict_ns_sum = (uint64_t)sqlite3_column_int64(st, 6);
	out->evict_ns_max = (uint64_t)sqlite3_column_int64(st, 7);
	out->mem_max = (uint64_t)sqlite3_column_int64(st, 8);
	out->mem_byte_s = (uint64_t)sqlite3_column_int64(st, 9);
	out->mem_ns = (uint64_t)sqlite3_column_int64(st, 10);
	rv = 0;
out_finalize:
	sqlite3_finalize(st);
	return rv;
}
