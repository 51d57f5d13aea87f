/*
 * gsacct — sacct for GPU shares: reports per-job GPU usage from the
 * agent's usage store.
 *
 * Reads the SQLite store directly and read-only, so it works while the
 * agent is down (and never blocks it: WAL readers do not lock writers).
 * A non-root caller sees only rows of its own uid.  Slurm allocations are
 * grouped by job: a job row sums its steps (shown as JobID.Step);
 * Kubernetes allocations appear as namespace/pod/container.
 * Errors are sacct-style ("gsacct: error: ...") with exit status 1.
 *
 * The store is readable by root and the group gshared's store_group names
 * only; gsacct is installed setgid to that group.  The group serves for
 * one thing: opening the default store (GSACCT_STORE, fixed at build
 * time) and reading it once, so that SQLite has the database, its -wal
 * and -shm open.  It is put aside (effective gid = real gid) as the
 * program starts, taken back around that open, then dropped for good
 * (real, effective and saved gid all the caller's) before any output,
 * any file created and any row parsed.  A store named by --store or
 * $GSHARE_STORE, when not the default path, is opened after the drop with
 * the caller's own rights, so neither can point the group at another
 * file.  The rows shown are filtered by the real uid either way.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acctfmt.h"
#include "config.h"
#include "plot.h"
#include "store.h"

/* The default store is the one gshared's config file names (usage_db,
 * else <state_dir>/usage.db), read from GSACCT_CONFIG, a root-owned path
 * fixed at build time; without that file, GSACCT_STORE.  It is the only
 * store opened with the setgid group.  `make SYSCONFDIR=... GSACCT_STORE=...`
 * change them. */
#ifndef GSACCT_STORE
#define GSACCT_STORE	"/var/lib/gshare/usage.db"
#endif
#ifndef GSACCT_CONFIG
#define GSACCT_CONFIG	"/etc/gshare/gshare.yaml"
#endif
static char default_store[512] = GSACCT_STORE;
#define DEFAULT_STORE	default_store
#define MAX_LIST	256
/* -j takes any number of ids; the store is asked for JOB_PAGE at a time
 * (one query's SQL and bound values stay small) */
#define JOB_PAGE	200
#define PLOT_BINS	300

struct opts {
	const char *store;
	const char **jobs;	/* -j, any number (grown by add_jobs) */
	unsigned njobs, capjobs;
	uint32_t uids[MAX_LIST];
	unsigned nuids;
	int user_given;
	const char *accounts[MAX_LIST];
	unsigned naccounts;
	uint32_t states[MAX_LIST];
	unsigned nstates;
	time_t start, end;
	int start_given, end_given;
	struct gs_col cols[GS_MAX_COLS];
	unsigned ncols;
	int style, noheader, allocs_only, json, allusers;
	const char *plot;
};

/* Group of allocations shown together: one Slurm job or one pod. */
struct job_group {
	struct gs_row job;		/* job (aggregate) row */
	struct gs_store_alloc *members;
	unsigned nmembers;
	int slurm;
};

struct collect {
	struct job_group *g;
	unsigned ng, cap;
	int64_t now_ns;
	int oom;
	/* -T: usage and times cut to [t0, t1] (0: open) */
	int truncate;
	int64_t t0, t1;
	struct gs_store *st;
	char err[GS_ERRMSG_MAX];
	/* -j over several pages: a row that matches selectors of two
	 * pages ("42" and "42.0") is taken once (open addressing) */
	int dedupe;
	uint64_t *seen;
	unsigned nseen, capseen;
};

/* 1 when key was seen already, else records it (0); -1: out of memory. */
static int
seen_key(struct collect *c, uint64_t key)
{
	unsigned i, mask;

	if (2 * (c->nseen + 1) > c->capseen) {
		unsigned nc = c->capseen ? c->capseen * 2 : 1024;
		uint64_t *ns = calloc(nc, sizeof(*ns)), *old = c->seen;

		if (ns == NULL)
			return -1;
		c->seen = ns;
		c->capseen = nc;
		c->nseen = 0;
		for (i = 0; old != NULL && i < nc / 2; i++)
			if (old[i] != 0)
				seen_key(c, old[i] - 1);
		free(old);
	}
	mask = c->capseen - 1;
	for (i = (unsigned)(key * 0x9E3779B97F4A7C15ull >> 32) & mask;
	     c->seen[i] != 0; i = (i + 1) & mask)
		if (c->seen[i] == key + 1)
			return 1;
	c->seen[i] = key + 1;	/* 0 marks an empty slot */
	c->nseen++;
	return 0;
}

/* copies made by split(): the option lists point into them */
static char *split_bufs[16];
static unsigned nsplit;

/* Jobs in the order one query gives them: first start, then key. */
static int
group_cmp(const void *x, const void *y)
{
	const struct job_group *a = x, *b = y;

	if (a->job.a.start_ns != b->job.a.start_ns)
		return a->job.a.start_ns < b->job.a.start_ns ? -1 : 1;
	return a->job.a.key < b->job.a.key ? -1 : a->job.a.key > b->job.a.key;
}

static void
free_splits(void)
{
	while (nsplit > 0)
		free(split_bufs[--nsplit]);
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	fputs("gsacct: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	free_splits();
	exit(1);
}

/* ---- the setgid group ---- */

static int setgid_run;		/* started setgid (egid != gid) */
static int privileged;		/* the group not yet dropped for good */
static gid_t priv_gid;		/* that group */

/* At start: remember the setgid group and put it aside (it stays only as
 * the saved gid, for priv_raise). */
static void
priv_init(void)
{
	gid_t r, e, s;

	if (getresgid(&r, &e, &s) < 0)
		die("getresgid: %s", strerror(errno));
	if (e == r && s == r)
		return;
	setgid_run = privileged = 1;
	priv_gid = e;
	if (setresgid((gid_t)-1, r, (gid_t)-1) < 0)
		die("cannot set the effective group: %s", strerror(errno));
}

static void
priv_raise(void)
{
	if (setresgid((gid_t)-1, priv_gid, (gid_t)-1) < 0)
		die("cannot take group %u back: %s", (unsigned)priv_gid,
		    strerror(errno));
}

/* For good: real, effective and saved gid the caller's; checked. */
static void
priv_drop(void)
{
	gid_t g = getgid(), r, e, s;

	if (!privileged)
		return;
	if (setresgid(g, g, g) < 0)
		die("cannot drop group %u: %s", (unsigned)priv_gid,
		    strerror(errno));
	if (getresgid(&r, &e, &s) < 0 || r != g || e != g || s != g)
		die("cannot drop group %u", (unsigned)priv_gid);
	privileged = 0;
}

/* The store could not be opened: when the caller may not read it, say
 * why, rather than SQLite's "unable to open database file". */
static void __attribute__((noreturn))
die_store(const char *path, int used_group, const struct gs_error *err)
{
	struct stat st;
	const struct group *gr;
	char gname[64];

	if (stat(path, &st) < 0) {
		if (errno == EACCES)
			die("usage store %s: permission denied: a directory "
			    "above it is not searchable", path);
		die("%s", err->msg);
	}
	if (access(path, R_OK) == 0 || errno != EACCES)
		die("%s", err->msg);
	gr = getgrgid(st.st_gid);
	if (gr != NULL)
		snprintf(gname, sizeof(gname), "%s", gr->gr_name);
	else
		snprintf(gname, sizeof(gname), "%u", (unsigned)st.st_gid);
	if (!(st.st_mode & S_IRGRP))
		die("usage store %s: permission denied: readable by its owner "
		    "only (mode %04o); gshared makes it so when the group "
		    "named by its store_group does not exist (see gsacct(1))",
		    path, (unsigned)(st.st_mode & 07777));
	if (used_group && st.st_gid == priv_gid)
		die("%s", err->msg);
	if (used_group)
		die("usage store %s: permission denied: readable by group %s "
		    "(mode %04o), not by gsacct's group %u", path, gname,
		    (unsigned)(st.st_mode & 07777), (unsigned)priv_gid);
	if (setgid_run && st.st_gid == priv_gid)
		die("usage store %s: permission denied: gsacct reads with its "
		    "group only the default store %s", path, DEFAULT_STORE);
	die("usage store %s: permission denied: readable by root and group "
	    "%s only (mode %04o), and this gsacct is not installed setgid %s "
	    "(see gsacct(1))", path, gname, (unsigned)(st.st_mode & 07777),
	    gname);
}

/* default_store from gshared's config file when there is one; a file
 * that does not load is reported and the built-in path used. */
static void
resolve_default_store(void)
{
	struct gs_agent_config c;
	struct gs_error err;
	int n;

	if (access(GSACCT_CONFIG, F_OK) < 0)
		return;
	if (gs_agent_config_load(GSACCT_CONFIG, &c, &err) < 0) {
		fprintf(stderr, "gsacct: warning: %s; using %s\n", err.msg,
			default_store);
		return;
	}
	if (c.usage_db[0] != '\0')
		n = snprintf(default_store, sizeof(default_store), "%s",
			     c.usage_db);
	else
		n = snprintf(default_store, sizeof(default_store),
			     "%s/usage.db", c.state_dir);
	if (n < 0 || (size_t)n >= sizeof(default_store))
		die("%s: usage store path too long", GSACCT_CONFIG);
}

static void
usage(FILE *f)
{
	fputs("Usage: gsacct [OPTIONS]\n"
	      "  -j, --jobs=LIST        job ids (42, 42.0) or namespace/pod[/container]\n"
	      "  -u, --user=LIST        user names or uids\n"
	      "  -a, --allusers         every user (root only; the default for root)\n"
	      "  -A, --account=LIST     accounts\n"
	      "  -S, --starttime=TIME   rows running at or after TIME (default: midnight)\n"
	      "  -E, --endtime=TIME     rows started before TIME (default: now)\n"
	      "  -T, --truncate         usage and times only inside -S/-E\n"
	      "  -s, --state=LIST       RUNNING,COMPLETED,FAILED,CANCELLED,TIMEOUT,NODE_FAIL\n"
	      "  -o, --format=LIST      fields, each optionally Name%WIDTH\n"
	      "  -l, --long             many fields\n"
	      "  -X, --allocations      job rows only, no steps\n"
	      "  -p, --parsable         '|' after every field\n"
	      "  -P, --parsable2        '|' between fields\n"
	      "  -n, --noheader         no header\n"
	      "      --json             JSON, every field\n"
	      "  -e, --helpformat       list the fields\n"
	      "      --plot=FILE.svg    stacked timeline of each job's GPU share\n",
	      f);
	fprintf(f, "      --store=PATH       usage store (default $GSHARE_STORE "
		"or %s)\n", DEFAULT_STORE);
	fputs("TIME: HH:MM[:SS], MMDD[YY][-HH:MM[:SS]], MM/DD[/YY], YYYY-MM-DD[THH:MM[:SS]],\n"
	      "      now[-+]N[seconds|minutes|hours|days|weeks], today, midnight, noon\n",
	      f);
}

/* A private copy of a comma list for strtok_r, kept in split_bufs
 * (the items point into it) and freed at exit. */
static char *
list_copy(const char *list)
{
	char *copy;

	if (nsplit == sizeof(split_bufs) / sizeof(split_bufs[0]))
		die("too many list options");
	copy = strdup(list);
	if (copy == NULL)
		die("out of memory");
	split_bufs[nsplit++] = copy;
	return copy;
}

/* Split a comma list into `out` (pointers into a private copy). */
static unsigned
split(const char *list, const char **out, unsigned max, const char *what)
{
	char *save = NULL, *tok;
	unsigned n = 0;

	for (tok = strtok_r(list_copy(list), ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == max)
			die("too many %s (at most %u)", what, max);
		out[n++] = tok;
	}
	if (n == 0)
		die("empty %s list", what);
	return n;
}

/* -j LIST, as often as given: no limit on the number of ids. */
static void
add_jobs(struct opts *o, const char *list)
{
	char *save = NULL, *tok;
	unsigned n = 0;

	for (tok = strtok_r(list_copy(list), ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->njobs == o->capjobs) {
			unsigned nc = o->capjobs ? o->capjobs * 2 : 64;
			const char **nj = realloc(o->jobs, nc * sizeof(*nj));

			if (nj == NULL || nc < o->capjobs)
				die("out of memory");
			o->jobs = nj;
			o->capjobs = nc;
		}
		o->jobs[o->njobs++] = tok;
		n++;
	}
	if (n == 0)
		die("empty jobs list");
}

static void
parse_users(struct opts *o, const char *list)
{
	const char *names[MAX_LIST];
	unsigned n = split(list, names, MAX_LIST, "users");

	o->user_given = 1;
	for (unsigned i = 0; i < n; i++) {
		struct passwd *pw = getpwnam(names[i]);
		char *end;
		unsigned long v;

		if (pw != NULL) {
			o->uids[o->nuids++] = pw->pw_uid;
			continue;
		}
		errno = 0;
		v = strtoul(names[i], &end, 10);
		if (*names[i] == '\0' || *end != '\0' || errno ||
		    v > UINT32_MAX)
			die("Invalid user id: %s", names[i]);
		o->uids[o->nuids++] = (uint32_t)v;
	}
}

static void
parse_states(struct opts *o, const char *list)
{
	const char *names[MAX_LIST];
	unsigned n = split(list, names, MAX_LIST, "states");

	for (unsigned i = 0; i < n; i++) {
		uint32_t *st = &o->states[o->nstates++];

		if (gs_store_state_parse(names[i], st) < 0)
			die("Invalid state: %s", names[i]);
	}
}

static time_t
parse_time_opt(const char *s, time_t now, const char *which)
{
	struct gs_error err;
	time_t t;

	if (gs_time_parse(s, now, &t, &err) < 0) {
		fprintf(stderr, "gsacct: error: %s\n", err.msg);
		die("Invalid %s: %s", which, s);
	}
	return t;
}

/* ---- collecting rows ---- */

/* -T: the allocation as seen inside the window: its samples there, its
 * start and end clipped to it. */
static int
truncate_alloc(struct collect *c, struct gs_store_alloc *a)
{
	struct gs_error err;

	if (gs_store_sum(c->st, a->key, c->t0, c->t1, &a->tot, &err) < 0) {
		snprintf(c->err, sizeof(c->err), "%s", err.msg);
		return -1;
	}
	if (c->t0 && a->start_ns < c->t0)
		a->start_ns = c->t0;
	if (c->t1 && (a->end_ns == 0 || a->end_ns > c->t1) &&
	    c->t1 < c->now_ns)
		a->end_ns = c->t1;
	return 0;
}

/* The User column shows the owner's name, as sacct does: allocations
 * made without a user label (pods, gsharectl) get the name of their uid
 * from the password database, or keep the number when it has none. */
static void
name_user(struct gs_store_alloc *a)
{
	static uid_t last_uid = (uid_t)-1;
	static char last[GS_LABEL_MAX];
	struct passwd pw, *res = NULL;
	char buf[1024];

	if (a->labels.user[0] != '\0')
		return;
	if ((uid_t)a->uid != last_uid) {
		last[0] = '\0';
		if (getpwuid_r((uid_t)a->uid, &pw, buf, sizeof(buf),
			       &res) == 0 && res != NULL &&
		    strlen(res->pw_name) < sizeof(last))
			snprintf(last, sizeof(last), "%s", res->pw_name);
		last_uid = (uid_t)a->uid;
	}
	snprintf(a->labels.user, sizeof(a->labels.user), "%s", last);
}

static int
collect_cb(void *arg, const struct gs_store_alloc *in)
{
	struct collect *c = arg;
	struct job_group *g = NULL;
	struct gs_store_alloc ta = *in, *a = &ta;
	int slurm = a->labels.job[0] != '\0';

	if (c->dedupe) {
		int r = seen_key(c, a->key);

		if (r < 0) {
			c->oom = 1;
			return -1;
		}
		if (r > 0)
			return 0;
	}
	if (c->truncate && truncate_alloc(c, a) < 0)
		return -1;
	name_user(a);

	if (slurm)
		for (unsigned i = 0; i < c->ng; i++)
			if (c->g[i].slurm &&
			    !strcmp(c->g[i].job.a.labels.job, a->labels.job) &&
			    !strcmp(c->g[i].job.a.labels.cluster,
				    a->labels.cluster)) {
				g = &c->g[i];
				break;
			}
	if (g == NULL) {
		if (c->ng == c->cap) {
			unsigned nc = c->cap ? c->cap * 2 : 64;
			struct job_group *ng = realloc(c->g, nc * sizeof(*ng));

			if (ng == NULL) {
				c->oom = 1;
				return -1;
			}
			c->g = ng;
			c->cap = nc;
		}
		g = &c->g[c->ng++];
		memset(g, 0, sizeof(*g));
		g->slurm = slurm;
		if (slurm)
			gs_row_job_init(&g->job, a, c->now_ns);
		else
			gs_row_from_alloc(&g->job, a, c->now_ns);
	} else {
		gs_row_job_add(&g->job, a);
	}
	struct gs_store_alloc *nm = realloc(g->members, (g->nmembers + 1) *
					    sizeof(*nm));
	if (nm == NULL) {
		c->oom = 1;
		return -1;
	}
	g->members = nm;
	g->members[g->nmembers++] = *a;
	return 0;
}

/* Job row alone when the job is one step-less allocation. */
static int
single(const struct job_group *g)
{
	return !g->slurm || (g->nmembers == 1 && !g->members[0].labels.step[0]);
}

typedef void (*row_fn)(void *arg, const struct gs_row *r);

static void
each_row(const struct collect *c, int allocs_only, row_fn fn, void *arg)
{
	struct gs_row r;

	for (unsigned i = 0; i < c->ng; i++) {
		const struct job_group *g = &c->g[i];

		if (single(g)) {
			gs_row_from_alloc(&r, &g->members[0], c->now_ns);
			fn(arg, &r);
			continue;
		}
		fn(arg, &g->job);
		if (allocs_only)
			continue;
		for (unsigned k = 0; k < g->nmembers; k++) {
			gs_row_from_alloc(&r, &g->members[k], c->now_ns);
			fn(arg, &r);
		}
	}
}

struct printer {
	const struct opts *o;
	int first;
};

static void
print_table_row(void *arg, const struct gs_row *r)
{
	struct printer *p = arg;

	gs_print_row(stdout, p->o->cols, p->o->ncols, p->o->style, r);
}

static void
print_json_row(void *arg, const struct gs_row *r)
{
	struct printer *p = arg;

	gs_print_json_row(stdout, r, p->first);
	p->first = 0;
}

/* ---- plot ---- */

struct bin_ctx {
	double *v;
	int64_t t0, t1;
};

static int
bin_cb(void *arg, const struct gs_store_sample *s)
{
	struct bin_ctx *b = arg;

	gs_plot_bin_add(b->v, PLOT_BINS, b->t0, b->t1,
			s->t_ns - (int64_t)s->dt_ns, s->t_ns,
			(double)s->d.gpu_ns);
	return 0;
}

static void
plot(struct gs_store *st, const struct collect *c, const struct opts *o,
     int64_t now_ns)
{
	struct gs_plot_series *ser = NULL;
	unsigned nser = 0;
	int64_t t0 = INT64_MAX, t1 = 0;
	struct gs_error err;
	char title[256];
	FILE *f;

	for (unsigned i = 0; i < c->ng; i++)
		for (unsigned k = 0; k < c->g[i].nmembers; k++) {
			const struct gs_store_alloc *a = &c->g[i].members[k];
			int64_t e = a->end_ns ? a->end_ns : now_ns;

			if (a->start_ns < t0)
				t0 = a->start_ns;
			if (e > t1)
				t1 = e;
		}
	if (o->start_given && (int64_t)o->start * 1000000000 > t0)
		t0 = (int64_t)o->start * 1000000000;
	if (o->end_given && (int64_t)o->end * 1000000000 < t1)
		t1 = (int64_t)o->end * 1000000000;
	if (c->ng == 0 || t1 <= t0)
		die("--plot: no usage in the selected window");
	for (unsigned i = 0; i < c->ng; i++) {
		const struct job_group *g = &c->g[i];

		for (unsigned k = 0; k < g->nmembers; k++) {
			const struct gs_store_alloc *a = &g->members[k];
			struct gs_plot_series *s = NULL;
			struct bin_ctx b;

			for (unsigned j = 0; j < nser; j++)
				if (ser[j].gpu == a->gpu &&
				    strcmp(ser[j].label, g->job.jobid) == 0)
					s = &ser[j];
			if (s == NULL) {
				struct gs_plot_series *ns = realloc(ser,
					(nser + 1) * sizeof(*ns));

				if (ns == NULL)
					die("out of memory");
				ser = ns;
				s = &ser[nser++];
				memset(s, 0, sizeof(*s));
				if (single(g)) {
					struct gs_row r;

					gs_row_from_alloc(&r, a, now_ns);
					memcpy(s->label, r.jobid,
					       sizeof(s->label));
				} else {
					memcpy(s->label, g->job.jobid,
					       sizeof(s->label));
				}
				s->gpu = a->gpu;
				s->v = calloc(PLOT_BINS, sizeof(double));
				if (s->v == NULL)
					die("out of memory");
			}
			b.v = s->v;
			b.t0 = t0;
			b.t1 = t1;
			if (gs_store_samples(st, a->key, t0, 0, bin_cb, &b,
					     &err) < 0)
				die("%s", err.msg);
		}
	}
	f = fopen(o->plot, "w");
	if (f == NULL)
		die("--plot: cannot write %s: %s", o->plot, strerror(errno));
	snprintf(title, sizeof(title), "gshare: achieved GPU share per job");
	if (gs_plot_svg(f, title, t0, t1, PLOT_BINS, ser, nser, &err) < 0 ||
	    fclose(f) != 0)
		die("--plot: cannot write %s", o->plot);
	for (unsigned j = 0; j < nser; j++)
		free(ser[j].v);
	free(ser);
}

/* ---- main ---- */

int
main(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_PLOT, OPT_STORE };
	static const struct option lopts[] = {
		{ "jobs", required_argument, NULL, 'j' },
		{ "user", required_argument, NULL, 'u' },
		{ "uid", required_argument, NULL, 'u' },
		{ "allusers", no_argument, NULL, 'a' },
		{ "account", required_argument, NULL, 'A' },
		{ "accounts", required_argument, NULL, 'A' },
		{ "starttime", required_argument, NULL, 'S' },
		{ "endtime", required_argument, NULL, 'E' },
		{ "truncate", no_argument, NULL, 'T' },
		{ "state", required_argument, NULL, 's' },
		{ "format", required_argument, NULL, 'o' },
		{ "long", no_argument, NULL, 'l' },
		{ "allocations", no_argument, NULL, 'X' },
		{ "parsable", no_argument, NULL, 'p' },
		{ "parsable2", no_argument, NULL, 'P' },
		{ "noheader", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "helpformat", no_argument, NULL, 'e' },
		{ "plot", required_argument, NULL, OPT_PLOT },
		{ "store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct opts o;
	struct gs_store_filter f;
	struct collect c = { 0 };
	struct gs_store *st = NULL;
	struct gs_error err;
	const char *fmt = NULL, *tstart = NULL, *tend = NULL;
	time_t now = time(NULL);
	uint32_t me = getuid();
	int ch, is_long = 0, with_group, rc;

	priv_init();
	resolve_default_store();

	/* reproducible reports (and tests): a fixed "now" */
	if (getenv("GSACCT_NOW") != NULL && *getenv("GSACCT_NOW") != '\0') {
		struct gs_error terr;

		if (gs_time_parse(getenv("GSACCT_NOW"), now, &now, &terr) < 0)
			die("GSACCT_NOW: %s", terr.msg);
	}
	o.store = getenv("GSHARE_STORE");
	if (o.store == NULL || *o.store == '\0')
		o.store = DEFAULT_STORE;
	opterr = 0;	/* our own messages, without argv[0] */
	while ((ch = getopt_long(argc, argv, ":j:u:aA:S:E:Ts:o:lXpPneh", lopts,
				 NULL)) != -1) {
		switch (ch) {
		case 'j':
			add_jobs(&o, optarg);
			break;
		case 'u':
			parse_users(&o, optarg);
			break;
		case 'a':
			o.allusers = 1;
			break;
		case 'A':
			o.naccounts += split(optarg, o.accounts + o.naccounts,
					     MAX_LIST - o.naccounts,
					     "accounts");
			break;
		case 'S': tstart = optarg; break;
		case 'E': tend = optarg; break;
		case 'T': c.truncate = 1; break;
		case 's':
			parse_states(&o, optarg);
			break;
		case 'o': fmt = optarg; break;
		case 'l': is_long = 1; break;
		case 'X': o.allocs_only = 1; break;
		case 'p': o.style = GS_OUT_PARSABLE; break;
		case 'P': o.style = GS_OUT_PARSABLE2; break;
		case 'n': o.noheader = 1; break;
		case OPT_JSON: o.json = 1; break;
		case 'e':
			priv_drop();
			gs_print_helpformat(stdout);
			return 0;
		case OPT_PLOT: o.plot = optarg; break;
		case OPT_STORE: o.store = optarg; break;
		case 'h':
			priv_drop();
			usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "gsacct: error: option %s requires an "
				"argument\n", argv[optind - 1]);
			fputs("Try \"gsacct --help\" for more information\n",
			      stderr);
			return 1;
		default:
			fprintf(stderr, "gsacct: error: unrecognized option "
				"'%s'\n", argv[optind - 1]);
			fputs("Try \"gsacct --help\" for more information\n",
			      stderr);
			return 1;
		}
	}
	if (optind < argc)
		die("Unknown argument: %s", argv[optind]);
	if (tstart) {
		o.start = parse_time_opt(tstart, now, "starttime");
		o.start_given = 1;
	}
	if (tend) {
		o.end = parse_time_opt(tend, now, "endtime");
		o.end_given = 1;
	}
	if (o.start_given && o.end_given && o.end < o.start)
		die("Start time (%s) requested is after end time (%s).",
		    tstart, tend);
	if (!o.start_given && o.njobs == 0) {	/* sacct: since midnight */
		struct tm tm;

		localtime_r(&now, &tm);
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		tm.tm_isdst = -1;
		o.start = mktime(&tm);
		o.start_given = 1;
	}
	if (gs_format_parse(fmt ? fmt : is_long ? gs_format_long :
			    gs_format_default, o.cols, &o.ncols, &err) < 0)
		die("%s", err.msg);

	/* non-root: own rows only, whatever -u asked for */
	if (me != 0) {
		int asked_me = !o.user_given;

		for (unsigned i = 0; i < o.nuids; i++)
			if (o.uids[i] == me)
				asked_me = 1;
		o.uids[0] = asked_me ? me : UINT32_MAX;	/* UINT32_MAX: none */
		o.nuids = 1;
	}

	/* the group for the default store only; its first read (the schema
	 * version) is done inside gs_store_open, with -wal/-shm opened */
	with_group = privileged && strcmp(o.store, DEFAULT_STORE) == 0;
	if (with_group)
		priv_raise();
	else
		priv_drop();
	rc = gs_store_open(o.store, GS_STORE_RDONLY, &st, &err);
	priv_drop();
	if (rc < 0)
		die_store(o.store, with_group, &err);
	memset(&f, 0, sizeof(f));
	f.uids = o.uids;
	f.nuids = o.nuids;
	f.accounts = o.accounts;
	f.naccounts = o.naccounts;
	f.states = o.states;
	f.nstates = o.nstates;
	f.start_ns = o.start_given ? (int64_t)o.start * 1000000000 : 0;
	f.end_ns = o.end_given ? (int64_t)o.end * 1000000000 : 0;
	c.now_ns = (int64_t)now * 1000000000;
	c.st = st;
	c.t0 = f.start_ns;
	c.t1 = f.end_ns;
	/* JOB_PAGE ids per query; with more than one page, rows are
	 * de-duplicated and the jobs put back in start order */
	if (o.njobs > JOB_PAGE)
		c.dedupe = 1;
	for (unsigned off = 0; off == 0 || off < o.njobs; off += JOB_PAGE) {
		f.jobs = o.jobs + off;
		f.njobs = o.njobs - off < JOB_PAGE ? o.njobs - off : JOB_PAGE;
		if (gs_store_query(st, &f, collect_cb, &c, &err) < 0)
			die("%s", err.msg);
		if (c.oom || c.err[0])
			break;
	}
	if (o.njobs > JOB_PAGE && c.ng > 1)
		qsort(c.g, c.ng, sizeof(*c.g), group_cmp);
	free(c.seen);
	c.seen = NULL;
	if (c.oom)
		die("out of memory");
	if (c.err[0])
		die("%s", c.err);

	if (o.json) {
		struct printer p = { &o, 1 };

		printf("{\n  \"meta\": {\"tool\": \"gsacct\", \"schema\": %d},\n"
		       "  \"jobs\": [\n", GS_STORE_SCHEMA_VERSION);
		each_row(&c, o.allocs_only, print_json_row, &p);
		printf("%s  ]\n}\n", p.first ? "" : "\n");
	} else {
		struct printer p = { &o, 1 };

		if (!o.noheader)
			gs_print_header(stdout, o.cols, o.ncols, o.style);
		each_row(&c, o.allocs_only, print_table_row, &p);
	}
	if (o.plot)
		plot(st, &c, &o, c.now_ns);
	for (unsigned i = 0; i < c.ng; i++)
		free(c.g[i].members);
	free(c.g);
	gs_store_close(st);
	free_splits();
	if (fflush(stdout) != 0)
		return 1;
	return 0;
}
