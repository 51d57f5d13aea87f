/*
 * test_store.c — usage store: migrations, batch writes, queries, crash
 * recovery and adoption, retention purge, the writer thread.
 * Each test works in its own temporary directory.
 */
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"

struct fx {
	char dir[64];
	char path[128];
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/gs-test-store.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/usage.db", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static struct gs_store *
open_rw(struct fx *f)
{
	struct gs_store *s = NULL;
	struct gs_error err;

	if (gs_store_open(f->path, 0, &s, &err) != 0)
		fail_msg("open: %s", err.msg);
	return s;
}

static void
mk_alloc(struct gs_store_alloc *a, uint64_t key, const char *job,
	 const char *step, uint32_t uid, int64_t start)
{
	memset(a, 0, sizeof(*a));
	a->key = key;
	a->agent_id = key + 100;
	snprintf(a->labels.job, sizeof(a->labels.job), "%s", job);
	snprintf(a->labels.step, sizeof(a->labels.step), "%s", step);
	snprintf(a->labels.user, sizeof(a->labels.user), "u%u", uid);
	snprintf(a->labels.account, sizeof(a->labels.account), "acct%u",
		 uid % 2);
	a->uid = uid;
	a->gpu = 0;
	a->shares = 30;
	a->weight = 30;
	a->start_ns = start;
	a->state = GS_SST_RUNNING;
}

static void
write_tick(struct gs_store *s, uint64_t tick, int64_t t,
	   struct gs_store_alloc *a, unsigned n, uint64_t gpu_each)
{
	struct gs_store_batch *b = gs_store_batch_new(tick, t);
	struct gs_store_sample x;
	struct gs_error err;

	assert_non_null(b);
	for (unsigned i = 0; i < n; i++) {
		memset(&x, 0, sizeof(x));
		x.key = a[i].key;
		x.t_ns = t;
		x.dt_ns = 1000000000;
		x.d.gpu_ns = gpu_each;
		x.d.wall_ns = 1000000000;
		a[i].tot.gpu_ns += gpu_each;
		a[i].last_ns = t;
		assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
		assert_int_equal(gs_store_batch_add_alloc(b, &a[i], &err), 0);
	}
	if (gs_store_write(s, b, &err) != 0)
		fail_msg("write: %s", err.msg);
}

struct got1 {
	unsigned n;
	struct gs_store_alloc a;
};

static int
got1_cb(void *arg, const struct gs_store_alloc *a)
{
	struct got1 *g = arg;

	g->n++;
	g->a = *a;
	return 0;
}

static void
test_migrations(void **state)
{
	struct fx *f = *state;
	struct gs_store *s;
	struct gs_error err;
	sqlite3 *db;
	int v;

	/* a fresh file is created at the latest version */
	s = open_rw(f);
	assert_int_equal(gs_store_version(s, &v, &err), 0);
	assert_int_equal(v, GS_STORE_SCHEMA_VERSION);
	gs_store_close(s);
	unlink(f->path);

	/* a version-1 file with data migrates to the latest, data kept */
	assert_int_equal(gs_store_open(f->path, GS_STORE_NOMIGRATE, &s, &err),
			 0);
	assert_int_equal(gs_store_version(s, &v, &err), 0);
	assert_int_equal(v, 0);
	assert_int_equal(gs_store_migrate(s, 1, &err), 0);
	assert_int_equal(gs_store_version(s, &v, &err), 0);
	assert_int_equal(v, 1);
	/* not open for writing until migrated */
	assert_int_equal(gs_store_write(s, gs_store_batch_new(1, 1), &err), -1);
	gs_store_close(s);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"INSERT INTO allocs (key, agent_id, job, uid, gpu, shares,"
		" weight, priority, mode, start_ns, state, gpu_ns)"
		" VALUES (5, 9, '77', 1000, 0, 20, 20, 1, 0, 1, 1, 42);",
		NULL, NULL, NULL), SQLITE_OK);
	/* version 1 has no tick log */
	assert_int_not_equal(sqlite3_exec(db, "SELECT * FROM ticks", NULL,
					  NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	/* read-only refuses an old schema with advice */
	assert_int_equal(gs_store_open(f->path, GS_STORE_RDONLY, &s, &err), -1);
	assert_int_equal(err.code, GS_EVERSION);
	assert_non_null(strstr(err.msg, "start gshared once to migrate"));
	s = open_rw(f);
	assert_int_equal(gs_store_version(s, &v, &err), 0);
	assert_int_equal(v, 3);
	{
		uint64_t k, t;
		struct gs_store_filter flt;
		struct got1 g;

		assert_int_equal(gs_store_next_key(s, &k, &err), 0);
		assert_int_equal(k, 6);
		assert_int_equal(gs_store_last_tick(s, &t, &err), 0);
		assert_int_equal(t, 0);
		/* 3: the row of version 1 reads with no memory figures */
		memset(&flt, 0, sizeof(flt));
		memset(&g, 0, sizeof(g));
		assert_int_equal(gs_store_query(s, &flt, got1_cb, &g, &err),
				 0);
		assert_int_equal(g.n, 1);
		assert_int_equal(g.a.tot.gpu_ns, 42);
		assert_int_equal(g.a.tot.mem_max, 0);
		assert_int_equal(g.a.tot.mem_byte_s, 0);
		assert_int_equal(g.a.mem_limit, 0);
	}
	assert_int_equal(gs_store_migrate(s, GS_STORE_SCHEMA_VERSION + 1,
					  &err), -1);
	gs_store_close(s);

	/* a newer schema is refused, read-write and read-only */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL,
				      NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(gs_store_open(f->path, 0, &s, &err), -1);
	assert_int_equal(err.code, GS_EVERSION);
	assert_non_null(strstr(err.msg, "newer"));
	assert_int_equal(gs_store_open(f->path, GS_STORE_RDONLY, &s, &err), -1);
	assert_int_equal(err.code, GS_EVERSION);
}

/* Memory figures go in and come back: row totals and limit, samples,
 * window sums (max of the maxima, sums of byte-seconds and time). */
static int
mem_sample_cb(void *arg, const struct gs_store_sample *x)
{
	uint64_t *sum = arg;

	*sum += x->d.mem_max;
	return 0;
}

static void
test_memory(void **state)
{
	struct fx *f = *state;
	struct gs_store *s = open_rw(f);
	struct gs_store_batch *b;
	struct gs_store_sample x;
	struct gs_store_alloc a;
	struct gs_store_filter flt;
	struct gs_usage u;
	struct gs_error err;
	struct got1 g;
	uint64_t maxsum = 0;
	int i;

	mk_alloc(&a, 1, "7", "0", 1000, 1000000000);
	a.mem_limit = 20ull << 30;
	for (i = 1; i <= 3; i++) {
		b = gs_store_batch_new((uint64_t)i, i * 1000000000ll);
		memset(&x, 0, sizeof(x));
		x.key = 1;
		x.t_ns = (1 + i) * 1000000000ll;
		x.dt_ns = 1000000000;
		x.d.mem_max = (uint64_t)i << 30;
		x.d.mem_byte_s = (uint64_t)i << 30;
		x.d.mem_ns = 1000000000;
		if (x.d.mem_max > a.tot.mem_max)
			a.tot.mem_max = x.d.mem_max;
		a.tot.mem_byte_s += x.d.mem_byte_s;
		a.tot.mem_ns += x.d.mem_ns;
		assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
		assert_int_equal(gs_store_batch_add_alloc(b, &a, &err), 0);
		assert_int_equal(gs_store_write(s, b, &err), 0);
	}
	memset(&flt, 0, sizeof(flt));
	memset(&g, 0, sizeof(g));
	assert_int_equal(gs_store_query(s, &flt, got1_cb, &g, &err), 0);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.a.mem_limit, 20ull << 30);
	assert_int_equal(g.a.tot.mem_max, 3ull << 30);
	assert_int_equal(g.a.tot.mem_byte_s, 6ull << 30);
	assert_int_equal(g.a.tot.mem_ns, 3000000000ull);
	assert_int_equal(gs_store_samples(s, 1, 0, 0, mem_sample_cb, &maxsum,
					  &err), 0);
	assert_int_equal(maxsum, 6ull << 30);
	/* the first two ticks only */
	assert_int_equal(gs_store_sum(s, 1, 0, 3000000000ll, &u, &err), 0);
	assert_int_equal(u.mem_max, 2ull << 30);
	assert_int_equal(u.mem_byte_s, 3ull << 30);
	assert_int_equal(u.mem_ns, 2000000000ull);
	gs_store_close(s);
}

static void
test_missing_ro(void **state)
{
	struct fx *f = *state;
	struct gs_store *s;
	struct gs_error err;

	assert_int_equal(gs_store_open(f->path, GS_STORE_RDONLY, &s, &err), -1);
	assert_int_equal(err.code, GS_ENOENT);
	assert_non_null(strstr(err.msg, f->path));
}

struct seen {
	unsigned n;
	uint64_t keys[64];
	uint64_t gpu[64];
	uint32_t state[64];
};

static int
seen_cb(void *arg, const struct gs_store_alloc *a)
{
	struct seen *s = arg;

	s->keys[s->n] = a->key;
	s->state[s->n] = a->state;
	s->gpu[s->n++] = a->tot.gpu_ns;
	return 0;
}

static unsigned
query(struct gs_store *s, const struct gs_store_filter *f, struct seen *out)
{
	struct gs_error err;

	memset(out, 0, sizeof(*out));
	if (gs_store_query(s, f, seen_cb, out, &err) != 0)
		fail_msg("query: %s", err.msg);
	return out->n;
}

static void
test_write_query(void **state)
{
	struct fx *f = *state;
	struct gs_store_alloc a[4];
	struct gs_store_filter flt;
	struct gs_store *s = open_rw(f), *ro;
	struct gs_error err;
	struct seen sn;
	uint64_t t;

	mk_alloc(&a[0], 1, "42", "0", 1000, 1000);
	mk_alloc(&a[1], 2, "42", "1", 1000, 2000);
	mk_alloc(&a[2], 3, "43", "", 1001, 3000);
	mk_alloc(&a[3], 4, "", "", 1002, 4000);
	strcpy(a[3].labels.ns, "ns1");
	strcpy(a[3].labels.pod, "pod1");
	strcpy(a[3].labels.container, "c1");
	for (uint64_t k = 1; k <= 3; k++)
		write_tick(s, k, (int64_t)k * 1000000000, a, 4, 100);
	a[2].end_ns = 5000000000;
	a[2].state = GS_SST_COMPLETED;
	write_tick(s, 4, 4000000000, &a[2], 1, 1);
	assert_int_equal(gs_store_last_tick(s, &t, &err), 0);
	assert_int_equal(t, 4);

	/* readers see committed data while the writer is open */
	assert_int_equal(gs_store_open(f->path, GS_STORE_RDONLY, &ro, &err), 0);
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(query(ro, &flt, &sn), 4);
	assert_int_equal(sn.keys[0], 1);
	assert_int_equal(sn.gpu[0], 300);
	assert_int_equal(sn.gpu[2], 301);

	const char *j42[] = { "42" }, *j420[] = { "42.1" },
		   *pod[] = { "ns1/pod1" }, *podc[] = { "ns1/pod1/c1" },
		   *podx[] = { "ns1/pod1/c2" }, *two[] = { "43", "42.0" };
	flt.jobs = j42;
	flt.njobs = 1;
	assert_int_equal(query(ro, &flt, &sn), 2);
	flt.jobs = j420;
	assert_int_equal(query(ro, &flt, &sn), 1);
	assert_int_equal(sn.keys[0], 2);
	flt.jobs = pod;
	assert_int_equal(query(ro, &flt, &sn), 1);
	assert_int_equal(sn.keys[0], 4);
	flt.jobs = podc;
	assert_int_equal(query(ro, &flt, &sn), 1);
	flt.jobs = podx;
	assert_int_equal(query(ro, &flt, &sn), 0);
	flt.jobs = two;
	flt.njobs = 2;
	assert_int_equal(query(ro, &flt, &sn), 2);

	memset(&flt, 0, sizeof(flt));
	uint32_t uids[] = { 1001, 1002 };
	flt.uids = uids;
	flt.nuids = 2;
	assert_int_equal(query(ro, &flt, &sn), 2);
	memset(&flt, 0, sizeof(flt));
	const char *acc[] = { "acct1" };
	flt.accounts = acc;
	flt.naccounts = 1;
	assert_int_equal(query(ro, &flt, &sn), 1);	/* uid 1001 */
	memset(&flt, 0, sizeof(flt));
	uint32_t st[] = { GS_SST_COMPLETED };
	flt.states = st;
	flt.nstates = 1;
	assert_int_equal(query(ro, &flt, &sn), 1);
	assert_int_equal(sn.keys[0], 3);
	/* window: 43 ended at 5 s */
	memset(&flt, 0, sizeof(flt));
	flt.start_ns = 6000000000;
	assert_int_equal(query(ro, &flt, &sn), 3);
	flt.start_ns = 0;
	flt.end_ns = 2500;
	assert_int_equal(query(ro, &flt, &sn), 2);

	struct gs_usage u;
	assert_int_equal(gs_store_sum(ro, 1, 1000000000, 0, &u, &err), 0);
	assert_int_equal(u.gpu_ns, 200);	/* the samples ending at 2, 3 s */
	assert_int_equal(u.wall_ns, 2000000000);
	assert_int_equal(gs_store_sum(ro, 1, 1000000000, 2000000000, &u,
				      &err), 0);
	assert_int_equal(u.gpu_ns, 100);
	assert_int_equal(gs_store_sum(ro, 99, 0, 0, &u, &err), 0);
	assert_int_equal(u.gpu_ns, 0);

	/* the read-only handle cannot write */
	struct gs_store_batch *b = gs_store_batch_new(9, 1);
	assert_int_equal(gs_store_write(ro, b, &err), -1);
	gs_store_close(ro);
	gs_store_close(s);
}

static void
test_recover_adopt(void **state)
{
	struct fx *f = *state;
	struct gs_store_alloc a[3], row;
	struct gs_store *s = open_rw(f);
	struct gs_error err;
	struct seen sn;
	struct gs_store_filter flt;

	mk_alloc(&a[0], 1, "50", "0", 1000, 1000);
	mk_alloc(&a[1], 2, "51", "0", 1000, 1000);
	mk_alloc(&a[2], 3, "", "", 1000, 1000);	/* not labelled (yet) */
	write_tick(s, 1, 7000000000, a, 3, 10);
	a[1].end_ns = 7000000000;
	a[1].state = GS_SST_COMPLETED;
	write_tick(s, 2, 8000000000, &a[1], 1, 0);
	gs_store_close(s);	/* "crash": 50.0 and the unlabelled one open */

	s = open_rw(f);
	assert_int_equal(gs_store_recover(s, 0, &err), 2);
	assert_int_equal(gs_store_orphans(s), 2);
	memset(&flt, 0, sizeof(flt));
	uint32_t nf[] = { GS_SST_NODE_FAIL };
	flt.states = nf;
	flt.nstates = 1;
	assert_int_equal(query(s, &flt, &sn), 2);
	assert_int_equal(sn.keys[0], 1);

	/* unlabelled allocations are never adopted, even by one another */
	struct gs_labels none;
	memset(&none, 0, sizeof(none));
	assert_int_equal(gs_store_adopt(s, &none, 1000, 0, &row), 0);
	/* a different uid or step does not match */
	assert_int_equal(gs_store_adopt(s, &a[0].labels, 1001, 0, &row), 0);
	struct gs_labels l = a[0].labels;
	strcpy(l.step, "1");
	assert_int_equal(gs_store_adopt(s, &l, 1000, 0, &row), 0);
	assert_int_equal(gs_store_adopt(s, &a[0].labels, 1000, 1, &row), 0);
	/* the same job re-attaches: its row comes back open */
	assert_int_equal(gs_store_adopt(s, &a[0].labels, 1000, 0, &row), 1);
	assert_int_equal(row.key, 1);
	assert_int_equal(row.state, GS_SST_RUNNING);
	assert_int_equal(row.end_ns, 0);
	assert_int_equal(row.tot.gpu_ns, 10);
	assert_int_equal(gs_store_orphans(s), 1);	/* the unlabelled one */
	assert_int_equal(gs_store_adopt(s, &a[0].labels, 1000, 0, &row), 0);
	gs_store_close(s);

	/* nothing open: recovery closes nothing, but the NODE_FAIL row of a
	 * job that has not come back yet is still a candidate if it was
	 * active after `since` */
	s = open_rw(f);
	assert_int_equal(gs_store_recover(s, 0, &err), 0);
	assert_int_equal(gs_store_orphans(s), 2);
	gs_store_close(s);
	s = open_rw(f);
	assert_int_equal(gs_store_recover(s, 7000000001, &err), 0);
	assert_int_equal(gs_store_orphans(s), 0);
	gs_store_close(s);
}

static void
test_purge(void **state)
{
	struct fx *f = *state;
	struct gs_store_alloc a[2];
	struct gs_store *s = open_rw(f);
	struct gs_error err;
	struct gs_store_filter flt;
	struct seen sn;
	unsigned del;

	mk_alloc(&a[0], 1, "60", "", 1000, 1);
	mk_alloc(&a[1], 2, "61", "", 1000, 1);
	for (int t = 1; t <= 50; t++)
		write_tick(s, (uint64_t)t, (int64_t)t, a, 2, 1);
	a[0].end_ns = 50;
	a[0].state = GS_SST_COMPLETED;
	write_tick(s, 51, 51, a, 1, 1);
	/* 30 samples of each older than 31: 60 rows, 25 per call */
	assert_int_equal(gs_store_purge(s, 31, 25, &del, &err), 0);
	assert_int_equal(del, 25);
	assert_int_equal(gs_store_purge(s, 31, 25, &del, &err), 0);
	assert_int_equal(del, 25);
	assert_int_equal(gs_store_purge(s, 31, 25, &del, &err), 0);
	assert_int_equal(del, 10);
	assert_int_equal(gs_store_purge(s, 31, 25, &del, &err), 0);
	assert_int_equal(del, 0);
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(query(s, &flt, &sn), 2);	/* both still sampled */
	/* everything old: the closed allocation goes, the open one stays */
	while (gs_store_purge(s, 1000, 1000, &del, &err) == 0 && del)
		;
	assert_int_equal(query(s, &flt, &sn), 1);
	assert_int_equal(sn.keys[0], 2);
	gs_store_close(s);
}

static void
test_writer_thread(void **state)
{
	struct fx *f = *state;
	struct gs_store *s = open_rw(f);
	struct gs_store_done d[16];
	struct gs_store_alloc a;
	struct gs_error err;
	unsigned got = 0;
	uint64_t t;

	/* submit before start is refused (and frees the batch) */
	assert_int_equal(gs_store_submit(s, gs_store_batch_new(1, 1), &err), -1);
	assert_int_equal(err.code, GS_ESTATE);
	assert_int_equal(gs_store_start(s, 0, 0, &err), 0);
	mk_alloc(&a, 1, "70", "", 1000, 1);
	for (uint64_t k = 1; k <= 5; k++) {
		struct gs_store_batch *b = gs_store_batch_new(k, (int64_t)k);
		struct gs_store_sample x = { .key = 1, .t_ns = (int64_t)k,
					     .dt_ns = 1 };

		x.d.gpu_ns = 5;
		a.tot.gpu_ns += 5;
		assert_int_equal(gs_store_batch_add_alloc(b, &a, &err), 0);
		assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
		if (gs_store_submit(s, b, &err) != 0)
			fail_msg("submit: %s", err.msg);
	}
	while (got < 5) {
		struct pollfd p = { .fd = gs_store_event_fd(s),
				    .events = POLLIN };

		assert_int_equal(poll(&p, 1, 10000), 1);
		int n = gs_store_reap(s, d, 16);

		for (int i = 0; i < n; i++) {
			assert_int_equal(d[i].ok, 1);
			assert_int_equal(d[i].tick, got + 1);
			got++;
		}
	}
	gs_store_stop(s);
	assert_int_equal(gs_store_last_tick(s, &t, &err), 0);
	assert_int_equal(t, 5);
	gs_store_close(s);
}

/* A write that fails half-way leaves nothing of its batch behind. */
static void
test_write_error_atomic(void **state)
{
	struct fx *f = *state;
	struct gs_store_alloc a[2];
	struct gs_store *s = open_rw(f);
	struct gs_store_batch *b;
	struct gs_store_sample x;
	struct gs_error err;
	sqlite3 *db;
	uint64_t t;

	mk_alloc(&a[0], 1, "80", "", 1000, 1);
	mk_alloc(&a[1], 2, "81", "", 1000, 1);
	write_tick(s, 1, 1, a, 2, 10);
	/* inject: the second sample of the next batch fails */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"CREATE TRIGGER boom BEFORE INSERT ON samples"
		" WHEN NEW.key = 2 BEGIN SELECT RAISE(ABORT, 'disk on fire');"
		" END", NULL, NULL, NULL), SQLITE_OK);
	b = gs_store_batch_new(2, 2);
	for (int i = 0; i < 2; i++) {
		memset(&x, 0, sizeof(x));
		x.key = a[i].key;
		x.t_ns = 2;
		x.d.gpu_ns = 5;
		a[i].tot.gpu_ns += 5;
		assert_int_equal(gs_store_batch_add_alloc(b, &a[i], &err), 0);
		assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
	}
	assert_int_equal(gs_store_write(s, b, &err), -1);
	assert_int_equal(err.code, GS_EIO);
	assert_non_null(strstr(err.msg, "disk on fire"));
	/* nothing of tick 2: no tick, no sample, totals unchanged */
	assert_int_equal(gs_store_last_tick(s, &t, &err), 0);
	assert_int_equal(t, 1);
	struct gs_usage u;
	assert_int_equal(gs_store_sum(s, 1, 0, 0, &u, &err), 0);
	assert_int_equal(u.gpu_ns, 10);
	struct seen sn;
	struct gs_store_filter flt;
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(query(s, &flt, &sn), 2);
	assert_int_equal(sn.gpu[0], 10);
	/* the writer thread reports the same failure as a completion */
	assert_int_equal(gs_store_start(s, 0, 0, &err), 0);
	b = gs_store_batch_new(3, 3);
	assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
	assert_int_equal(gs_store_submit(s, b, &err), 0);
	struct pollfd p = { .fd = gs_store_event_fd(s), .events = POLLIN };
	assert_int_equal(poll(&p, 1, 10000), 1);
	struct gs_store_done d;
	assert_int_equal(gs_store_reap(s, &d, 1), 1);
	assert_int_equal(d.ok, 0);
	assert_int_equal(d.tick, 3);
	assert_non_null(strstr(d.msg, "disk on fire"));
	gs_store_stop(s);
	sqlite3_close(db);
	gs_store_close(s);
}

/* While the disk (here: another writer's lock) stalls, submit never
 * waits and never refuses: beyond the queue's bound new batches merge
 * into the last waiting one; once the stall ends every sample's usage is
 * there (fewer, longer samples), and the tick log ends at the last tick. */
static void
test_writer_stall(void **state)
{
	struct fx *f = *state;
	struct gs_store *s = open_rw(f);
	struct gs_store_done d[16];
	struct gs_store_alloc a;
	struct gs_error err;
	struct gs_usage u;
	sqlite3 *db;
	uint64_t t;

	assert_int_equal(gs_store_start(s, 0, 0, &err), 0);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
			 SQLITE_OK);
	mk_alloc(&a, 1, "90", "", 1000, 1);
	for (uint64_t k = 1; k <= 40; k++) {
		struct gs_store_batch *b = gs_store_batch_new(k, (int64_t)k);
		struct gs_store_sample x = { .key = 1, .t_ns = (int64_t)k,
					     .dt_ns = 1 };

		x.d.gpu_ns = 7;
		a.tot.gpu_ns += 7;
		a.last_ns = (int64_t)k;
		assert_int_equal(gs_store_batch_add_sample(b, &x, &err), 0);
		assert_int_equal(gs_store_batch_add_alloc(b, &a, &err), 0);
		if (gs_store_submit(s, b, &err) != 0)
			fail_msg("submit %" PRIu64 ": %s", k, err.msg);
	}
	/* bounded: one batch may be with the writer, at most 8 wait */
	assert_true(gs_store_queued(s) <= 8);
	assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL),
			 SQLITE_OK);
	for (int i = 0; i < 400 && (gs_store_queued(s) > 0 ||
				    gs_store_flush(s, 50) < 0); i++)
		(void)gs_store_reap(s, d, 16);
	assert_int_equal(gs_store_flush(s, 20000), 0);
	assert_int_equal(gs_store_queued(s), 0);
	gs_store_stop(s);
	assert_int_equal(gs_store_sum(s, 1, 0, 0, &u, &err), 0);
	assert_int_equal(u.gpu_ns, 40 * 7);
	assert_int_equal(gs_store_last_tick(s, &t, &err), 0);
	assert_int_equal(t, 40);
	sqlite3_close(db);
	gs_store_close(s);
}

/* A batch whose commit fails is kept and tried again until it lands:
 * with every write failing (a trigger standing in for a full disk), a
 * running row's ticks and a closing row are submitted; the completions
 * say the store is behind; once writes work again every sample and the
 * final row are there. */
static void
test_retry_until_committed(void **state)
{
	struct fx *f = *state;
	struct gs_store *s = open_rw(f);
	struct gs_store_done d[16];
	struct gs_store_alloc a[2];
	struct gs_error err;
	struct gs_usage u;
	struct seen sn;
	struct gs_store_filter flt;
	sqlite3 *db;
	unsigned failed = 0;

	mk_alloc(&a[0], 1, "91", "", 1000, 1);
	mk_alloc(&a[1], 2, "92", "", 1000, 1);
	write_tick(s, 1, 1, a, 2, 10);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"CREATE TRIGGER full BEFORE INSERT ON ticks"
		" BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
		NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(gs_store_start(s, 0, 0, &err), 0);
	for (uint64_t k = 2; k <= 20; k++) {
		struct gs_store_batch *b = gs_store_batch_new(k, (int64_t)k);

		for (int i = 0; i < 2; i++) {
			struct gs_store_sample x = { .key = a[i].key,
						     .t_ns = (int64_t)k,
						     .dt_ns = 1 };

			if (i == 1 && a[1].state != GS_SST_RUNNING)
				continue;	/* closed at tick 5 */
			x.d.gpu_ns = 3;
			a[i].tot.gpu_ns += 3;
			if (i == 1 && k == 5) {
				a[1].state = GS_SST_COMPLETED;
				a[1].end_ns = 5;
			}
			assert_int_equal(gs_store_batch_add_sample(b, &x,
								   &err), 0);
			assert_int_equal(gs_store_batch_add_alloc(b, &a[i],
								  &err), 0);
		}
		assert_int_equal(gs_store_submit(s, b, &err), 0);
	}
	/* the store reports failed tries, and keeps the batches */
	while (failed < 2) {
		struct pollfd p = { .fd = gs_store_event_fd(s),
				    .events = POLLIN };

		assert_int_equal(poll(&p, 1, 10000), 1);
		int n = gs_store_reap(s, d, 16);

		for (int i = 0; i < n; i++) {
			assert_int_equal(d[i].ok, 0);
			assert_int_equal(d[i].lost, 0);
			assert_non_null(strstr(d[i].msg, "disk is full"));
			failed++;
		}
	}
	assert_true(gs_store_queued(s) >= 1);
	assert_int_equal(sqlite3_exec(db, "DROP TRIGGER full", NULL, NULL,
				      NULL), SQLITE_OK);
	assert_int_equal(gs_store_flush(s, 20000), 0);
	gs_store_stop(s);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(gs_store_sum(s, a[i].key, 0, 0, &u, &err), 0);
		assert_int_equal(u.gpu_ns, a[i].tot.gpu_ns);
	}
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(query(s, &flt, &sn), 2);
	assert_int_equal(sn.gpu[0], a[0].tot.gpu_ns);
	assert_int_equal(sn.gpu[1], 10 + 4 * 3);
	assert_int_equal(sn.state[1], GS_SST_COMPLETED);
	sqlite3_close(db);
	gs_store_close(s);
}

/* Rows of allocations whose close reached the agent's table file but not
 * the store: below the table's counter and not in it -> COMPLETED; in
 * the table, or above its counter -> left for recovery. */
static void
test_finish_closed(void **state)
{
	struct fx *f = *state;
	struct gs_store *s = open_rw(f);
	struct gs_store_alloc a[4];
	struct gs_error err;
	struct seen sn;
	struct gs_store_filter flt;
	const uint64_t known[] = { 102 };

	/* agent ids 101..104 (mk_alloc: key + 100) */
	for (int i = 0; i < 4; i++)
		mk_alloc(&a[i], (uint64_t)i + 1, "95", "", 1000, 1);
	for (int i = 0; i < 4; i++)
		snprintf(a[i].labels.step, sizeof(a[i].labels.step), "%d", i);
	write_tick(s, 1, 5, a, 4, 10);
	assert_int_equal(gs_store_finish_closed(s, known, 1, 0, &err), 0);
	/* table: id 102 open, counter 104: 101 and 103 were closed */
	assert_int_equal(gs_store_finish_closed(s, known, 1, 104, &err), 2);
	memset(&flt, 0, sizeof(flt));
	assert_int_equal(query(s, &flt, &sn), 4);
	assert_int_equal(sn.state[0], GS_SST_COMPLETED);
	assert_int_equal(sn.state[1], GS_SST_RUNNING);
	assert_int_equal(sn.state[2], GS_SST_COMPLETED);
	assert_int_equal(sn.state[3], GS_SST_RUNNING);
	assert_int_equal(sn.gpu[0], 10);
	gs_store_close(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_migrations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_ro, setup, teardown),
		cmocka_unit_test_setup_teardown(test_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_query, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recover_adopt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_purge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_write_error_atomic, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_writer_stall, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_retry_until_committed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish_closed, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
