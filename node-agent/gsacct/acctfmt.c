/*
 * acctfmt.c — sacct-compatible time specs, fields and output for gsacct.
 *
 * Output follows sacct: a column is padded to its width (right-aligned
 * unless the field or the %-N width says left) and a value wider than the
 * column is cut and ends in '+'.  -p ends every field with '|', -P
 * separates them with '|'.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "acctfmt.h"

/* ---- time ---- */

static int
terr(struct gs_error *err, const char *s, const char *p)
{
	return gs_error_set(err, GS_EINVAL,
			    "Invalid time specification (pos=%d): %s",
			    (int)(p - s), s);
}

/* Exactly min..max digits at *p. */
static int
num(const char **p, int min, int max, int *v)
{
	int n = 0, x = 0;

	while (isdigit((unsigned char)(*p)[n]) && n < max) {
		x = x * 10 + ((*p)[n] - '0');
		n++;
	}
	if (n < min || isdigit((unsigned char)(*p)[n]))
		return -1;
	*p += n;
	*v = x;
	return 0;
}

/* HH:MM[:SS][AM|PM] */
static int
hms(const char **pp, struct tm *tm)
{
	const char *p = *pp;
	int h, m, sec = 0;

	if (num(&p, 1, 2, &h) < 0 || *p != ':')
		return -1;
	p++;
	if (num(&p, 2, 2, &m) < 0)
		return -1;
	if (*p == ':') {
		p++;
		if (num(&p, 2, 2, &sec) < 0)
			return -1;
	}
	if (strncasecmp(p, "am", 2) == 0 || strncasecmp(p, "pm", 2) == 0) {
		if (h < 1 || h > 12)
			return -1;
		if (h == 12)
			h = 0;
		if (tolower((unsigned char)*p) == 'p')
			h += 12;
		p += 2;
	}
	if (h > 23 || m > 59 || sec > 59)
		return -1;
	tm->tm_hour = h;
	tm->tm_min = m;
	tm->tm_sec = sec;
	*pp = p;
	return 0;
}

static int
rel_unit(const char *u, long *mult)
{
	static const struct {
		const char *name;
		size_t minlen;
		long m;
	} us[] = {
		{ "seconds", 1, 1 }, { "minutes", 1, 60 }, { "hours", 1, 3600 },
		{ "days", 1, 86400 }, { "weeks", 1, 604800 },
	};
	size_t n = strlen(u);

	if (n == 0) {
		*mult = 1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(us) / sizeof(us[0]); i++) {
		size_t ln = strlen(us[i].name);

		/* a prefix ("min", "h") or the singular ("hour") */
		if (n >= us[i].minlen && n <= ln &&
		    strncasecmp(u, us[i].name, n) == 0) {
			*mult = us[i].m;
			return 0;
		}
	}
	return -1;
}

static int time_parse(const char *s, time_t now, time_t *out,
		      struct gs_error *err);

/* Well formed, but not a time the store can hold. */
static int
range_err(struct gs_error *err, const char *s)
{
	return gs_error_set(err, GS_EINVAL, "Invalid time specification "
			    "(pos=0): %s: out of range (1970-01-01 to "
			    "2262-04-11 UTC)", s);
}

int
gs_time_parse(const char *s, time_t now, time_t *out, struct gs_error *err)
{
	time_t t = 0;

	if (time_parse(s, now, &t, err) < 0)
		return -1;
	/* The store keeps nanoseconds since the epoch in 64 bits. */
	if (t < 0 || t > GS_TIME_MAX)
		return range_err(err, s);
	*out = t;
	return 0;
}

static int
time_parse(const char *s, time_t now, time_t *out, struct gs_error *err)
{
	static const struct { const char *kw; int h, days; } kws[] = {
		{ "today", 0, 0 }, { "midnight", 0, 0 }, { "noon", 12, 0 },
		{ "elevenses", 11, 0 }, { "fika", 15, 0 }, { "teatime", 16, 0 },
		{ "tomorrow", 0, 1 },
	};
	const char *p = s;
	struct tm tm;
	time_t t;
	int mon = 0, day = 0, year = -1, iso = 0;
	size_t nd = 0;

	localtime_r(&now, &tm);
	tm.tm_isdst = -1;
	if (*s == '\0')
		return terr(err, s, p);
	if (strncasecmp(s, "now", 3) == 0) {
		long mult, n;
		char *end;
		int sign;

		p = s + 3;
		if (*p == '\0') {
			*out = now;
			return 0;
		}
		if (*p != '+' && *p != '-')
			return terr(err, s, p);
		sign = *p == '-' ? -1 : 1;
		p++;
		if (!isdigit((unsigned char)*p))
			return terr(err, s, p);
		n = strtol(p, &end, 10);
		if (n > 100000000L)
			return terr(err, s, p);
		p = end;
		if (rel_unit(p, &mult) < 0)
			return terr(err, s, p);
		*out = now + sign * n * mult;
		return 0;
	}
	for (size_t i = 0; i < sizeof(kws) / sizeof(kws[0]); i++)
		if (strcasecmp(s, kws[i].kw) == 0) {
			tm.tm_hour = kws[i].h;
			tm.tm_min = tm.tm_sec = 0;
			tm.tm_mday += kws[i].days;
			*out = mktime(&tm);
			return 0;
		}
	while (isdigit((unsigned char)s[nd]))
		nd++;
	if (nd >= 9 && s[nd] == '\0') {		/* seconds since the epoch */
		long long v;

		errno = 0;
		v = strtoll(s, NULL, 10);
		if (errno == ERANGE || v > GS_TIME_MAX)
			return range_err(err, s);
		*out = (time_t)v;
		return 0;
	}
	if (nd == 0)
		return terr(err, s, p);
	if (nd == 4 && s[4] == '-' && strlen(s) >= 8 && s[7] == '-') {
		/* YYYY-MM-DD[THH:MM[:SS]] */
		iso = 1;
		if (num(&p, 4, 4, &year) < 0)
			return terr(err, s, p);
		p++;
		if (num(&p, 2, 2, &mon) < 0)
			return terr(err, s, p);
		if (*p++ != '-')
			return terr(err, s, p - 1);
		if (num(&p, 2, 2, &day) < 0)
			return terr(err, s, p);
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
		if (*p == 'T') {
			p++;
			if (hms(&p, &tm) < 0)
				return terr(err, s, p);
		}
	} else if (nd <= 2 && s[nd] == ':') {	/* HH:MM[:SS] today */
		if (hms(&p, &tm) < 0)
			return terr(err, s, p);
		if (*p != '\0')
			return terr(err, s, p);
		*out = mktime(&tm);
		return 0;
	} else if (nd == 4 || nd == 6) {	/* MMDD[YY] */
		mon = (s[0] - '0') * 10 + (s[1] - '0');
		day = (s[2] - '0') * 10 + (s[3] - '0');
		if (nd == 6)
			year = 2000 + (s[4] - '0') * 10 + (s[5] - '0');
		p = s + nd;
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	} else if (nd <= 2 && (s[nd] == '/' || s[nd] == '.')) {
		char sep = s[nd];

		num(&p, 1, 2, &mon);
		p++;
		if (num(&p, 1, 2, &day) < 0)
			return terr(err, s, p);
		if (*p == sep) {
			p++;
			if (num(&p, 2, 2, &year) < 0)
				return terr(err, s, p);
			year += 2000;
		}
		tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	} else {
		return terr(err, s, p + nd);
	}
	/* optional -HH:MM[:SS] after the MMDD forms */
	if (*p == '-' && !iso) {
		p++;
		if (hms(&p, &tm) < 0)
			return terr(err, s, p);
	}
	if (*p != '\0')
		return terr(err, s, p);
	if (mon < 1 || mon > 12 || day < 1 || day > 31)
		return terr(err, s, s);
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	if (year >= 0)
		tm.tm_year = year - 1900;
	t = mktime(&tm);
	if (t == (time_t)-1 || tm.tm_mday != day)
		return terr(err, s, s);
	*out = t;
	return 0;
}

void
gs_time_format(time_t t, char *buf, size_t n)
{
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
}

void
gs_elapsed_format(uint64_t secs, char *buf, size_t n)
{
	uint64_t d = secs / 86400, h = secs / 3600 % 24, m = secs / 60 % 60,
		 s = secs % 60;

	if (d)
		snprintf(buf, n, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64
			 ":%02" PRIu64, d, h, m, s);
	else
		snprintf(buf, n, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64,
			 h, m, s);
}

/* ---- rows ---- */

void
gs_row_from_alloc(struct gs_row *r, const struct gs_store_alloc *a,
		  int64_t now_ns)
{
	const struct gs_labels *l = &a->labels;

	memset(r, 0, sizeof(*r));
	r->a = *a;
	r->now_ns = now_ns;
	if (l->job[0] && l->step[0]) {
		snprintf(r->jobid, sizeof(r->jobid), "%s.%s", l->job, l->step);
		snprintf(r->jobname, sizeof(r->jobname), "%s", l->step);
		r->is_step = 1;
	} else if (l->job[0]) {
		snprintf(r->jobid, sizeof(r->jobid), "%s", l->job);
	} else if (l->pod[0]) {
		snprintf(r->jobid, sizeof(r->jobid), "%s/%s/%s", l->ns, l->pod,
			 l->container);
		snprintf(r->jobname, sizeof(r->jobname), "%s", l->pod);
	} else {
		snprintf(r->jobid, sizeof(r->jobid), "alloc%" PRIu64, a->key);
	}
}

void
gs_row_job_init(struct gs_row *j, const struct gs_store_alloc *a,
		int64_t now_ns)
{
	memset(j, 0, sizeof(*j));
	j->now_ns = now_ns;
	j->a = *a;
	j->a.labels.step[0] = '\0';
	snprintf(j->jobid, sizeof(j->jobid), "%s", a->labels.job);
}

/* Which state a job row shows: running wins, then the worst ending. */
static int
state_rank(uint32_t st)
{
	switch (st) {
	case GS_SST_RUNNING: return 5;
	case GS_SST_NODE_FAIL: return 4;
	case GS_SST_TIMEOUT: return 3;
	case GS_SST_FAILED: return 3;
	case GS_SST_CANCELLED: return 2;
	default: return 1;
	}
}

/* a + b, at most UINT64_MAX: rows a store kept from before the agent
 * bounded what jobs report can hold anything */
static void
sat_add(uint64_t *t, uint64_t v)
{
	*t = v > UINT64_MAX - *t ? UINT64_MAX : *t + v;
}

void
gs_row_job_add(struct gs_row *j, const struct gs_store_alloc *a)
{
	struct gs_usage *t = &j->a.tot;
	const struct gs_usage *u = &a->tot;

	if (j->a.key == a->key)		/* the row j started from */
		return;
	sat_add(&t->gpu_ns, u->gpu_ns);
	sat_add(&t->held_ns, u->held_ns);
	sat_add(&t->share_ns, u->share_ns);
	sat_add(&t->wall_ns, u->wall_ns);
	sat_add(&t->block_tasks, u->block_tasks);
	sat_add(&t->suspensions, u->suspensions);
	sat_add(&t->evict_ns_sum, u->evict_ns_sum);
	if (u->evict_ns_max > t->evict_ns_max)
		t->evict_ns_max = u->evict_ns_max;
	/* memory: the most any step held; the average over the time the
	 * steps held memory (each step weighs by its own time) */
	if (u->mem_max > t->mem_max)
		t->mem_max = u->mem_max;
	sat_add(&t->mem_byte_s, u->mem_byte_s);
	sat_add(&t->mem_ns, u->mem_ns);
	if (a->mem_limit > j->a.mem_limit)
		j->a.mem_limit = a->mem_limit;
	if (a->start_ns < j->a.start_ns)
		j->a.start_ns = a->start_ns;
	if (j->a.end_ns != 0 && (a->end_ns == 0 || a->end_ns > j->a.end_ns))
		j->a.end_ns = a->end_ns;
	if (a->gpu != j->a.gpu)
		j->gpus_mixed = 1;
	if (a->shares > j->a.shares)
		j->a.shares = a->shares;
	if (a->weight > j->a.weight)
		j->a.weight = a->weight;
	if (state_rank(a->state) > state_rank(j->a.state))
		j->a.state = a->state;
	j->a.estimate |= a->estimate;
}

/* ---- fields ---- */

static uint64_t
elapsed_s(const struct gs_row *r)
{
	int64_t end = r->a.end_ns ? r->a.end_ns : r->now_ns;

	return end > r->a.start_ns ? (uint64_t)(end - r->a.start_ns) /
		1000000000u : 0;
}

static double
elapsed_exact(const struct gs_row *r)
{
	int64_t end = r->a.end_ns ? r->a.end_ns : r->now_ns;

	return end > r->a.start_ns ? (double)(end - r->a.start_ns) / 1e9 : 0;
}

#define F(fname) \
	static void fname(const struct gs_row *r, char *b, size_t n, int *num)

F(f_jobid) { (void)num; snprintf(b, n, "%s", r->jobid); }
F(f_jobname) { (void)num; snprintf(b, n, "%s", r->jobname); }
F(f_allocid) { *num = 1; snprintf(b, n, "%" PRIu64, r->a.key); }
F(f_cluster) { (void)num; snprintf(b, n, "%s", r->a.labels.cluster); }
F(f_node) { (void)num; snprintf(b, n, "%s", r->a.labels.node); }
F(f_user)
{
	(void)num;
	if (r->a.labels.user[0])
		snprintf(b, n, "%s", r->a.labels.user);
	else
		snprintf(b, n, "%u", r->a.uid);
}
F(f_uid) { *num = 1; snprintf(b, n, "%u", r->a.uid); }
F(f_account) { (void)num; snprintf(b, n, "%s", r->a.labels.account); }
F(f_gpu)
{
	if (r->gpus_mixed) {
		snprintf(b, n, "mixed");
		return;
	}
	*num = 1;
	snprintf(b, n, "%d", r->a.gpu);
}
F(f_gpuuuid)
{
	(void)num;
	snprintf(b, n, "%s", r->gpus_mixed ? "mixed" : r->a.gpu_uuid);
}
F(f_share) { *num = 1; snprintf(b, n, "%u", r->a.shares); }
F(f_weight) { *num = 1; snprintf(b, n, "%u", r->a.weight); }
F(f_priority)
{
	static const char *const names[] = { "low", "normal", "high" };

	(void)num;
	snprintf(b, n, "%s", r->a.priority < 3 ? names[r->a.priority] : "?");
}
F(f_mode)
{
	(void)num;
	snprintf(b, n, "%s", r->a.mode == 1 ? "space" : "time");
}
F(f_start)
{
	(void)num;
	gs_time_format((time_t)(r->a.start_ns / 1000000000), b, n);
}
F(f_end)
{
	(void)num;
	if (r->a.end_ns == 0)
		snprintf(b, n, "Unknown");
	else
		gs_time_format((time_t)(r->a.end_ns / 1000000000), b, n);
}
F(f_elapsed) { (void)num; gs_elapsed_format(elapsed_s(r), b, n); }
F(f_elapsedraw) { *num = 1; snprintf(b, n, "%" PRIu64, elapsed_s(r)); }
F(f_gpusec)
{
	*num = 1;
	snprintf(b, n, "%.2f", (double)r->a.tot.gpu_ns / 1e9);
}
F(f_heldsec)
{
	*num = 1;
	snprintf(b, n, "%.2f", (double)r->a.tot.held_ns / 1e9);
}
F(f_sharesec)
{
	*num = 1;
	snprintf(b, n, "%.2f", (double)r->a.tot.share_ns / 1e9);
}
F(f_busysec)
{
	*num = 1;
	snprintf(b, n, "%.2f", (double)r->a.tot.wall_ns / 1e9);
}
F(f_avgshare)
{
	double e = elapsed_exact(r);

	*num = 1;
	snprintf(b, n, "%.1f", e > 0 ? (double)r->a.tot.gpu_ns / 1e9 / e *
		 100.0 : 0.0);
}
F(f_busyshare)
{
	*num = 1;
	snprintf(b, n, "%.1f", r->a.tot.wall_ns ? (double)r->a.tot.gpu_ns /
		 (double)r->a.tot.wall_ns * 100.0 : 0.0);
}
F(f_efficiency)
{
	*num = 1;
	snprintf(b, n, "%.1f", r->a.tot.share_ns ? (double)r->a.tot.gpu_ns /
		 (double)r->a.tot.share_ns * 100.0 : 0.0);
}
F(f_suspends)
{
	*num = 1;
	snprintf(b, n, "%" PRIu64, r->a.tot.suspensions);
}
F(f_blocktasks)
{
	*num = 1;
	snprintf(b, n, "%" PRIu64, r->a.tot.block_tasks);
}
F(f_evictavg)
{
	*num = 1;
	snprintf(b, n, "%.1f", r->a.tot.suspensions ?
		 (double)r->a.tot.evict_ns_sum / 1e3 /
		 (double)r->a.tot.suspensions : 0.0);
}
F(f_evictmax)
{
	*num = 1;
	snprintf(b, n, "%.1f", (double)r->a.tot.evict_ns_max / 1e3);
}
/* Memory as sacct writes MaxRSS: K below a MiB, else two decimals in
 * the largest binary unit M, G, T. */
static void
mem_text(char *b, size_t n, uint64_t bytes)
{
	static const char units[] = "MGT";
	double v = (double)bytes / 1048576.0;
	unsigned i = 0;

	if (bytes < 1048576) {
		snprintf(b, n, "%" PRIu64 "K", (bytes + 1023) / 1024);
		return;
	}
	while (v >= 1024.0 && i + 1 < sizeof(units) - 1) {
		v /= 1024.0;
		i++;
	}
	snprintf(b, n, "%.2f%c", v, units[i]);
}
/* The memory fields carry a unit: strings in JSON, like sacct's. */
F(f_maxmem)
{
	(void)num;
	mem_text(b, n, r->a.tot.mem_max);
}
F(f_avemem)
{
	(void)num;
	mem_text(b, n, r->a.tot.mem_ns ? (uint64_t)((double)r->a.tot.mem_byte_s
		 / ((double)r->a.tot.mem_ns / 1e9)) : 0);
}
F(f_memlimit)
{
	(void)num;
	if (r->a.mem_limit == 0)
		snprintf(b, n, "none");
	else
		mem_text(b, n, r->a.mem_limit);
}
F(f_state) { (void)num; snprintf(b, n, "%s", gs_store_state_name(r->a.state)); }
F(f_estimate) { (void)num; snprintf(b, n, "%s", r->a.estimate ? "yes" : "no"); }

const struct gs_field gs_fields[] = {
	{ "JobID", 12, GS_ALIGN_LEFT, "job id, JobID.Step, or namespace/pod/container", f_jobid },
	{ "JobName", 10, GS_ALIGN_RIGHT, "step name or pod name", f_jobname },
	{ "AllocID", 8, GS_ALIGN_RIGHT, "usage store row id", f_allocid },
	{ "Cluster", 10, GS_ALIGN_RIGHT, "cluster name", f_cluster },
	{ "NodeList", 12, GS_ALIGN_RIGHT, "node the allocation ran on", f_node },
	{ "User", 9, GS_ALIGN_RIGHT, "owner user name", f_user },
	{ "UID", 6, GS_ALIGN_RIGHT, "owner uid", f_uid },
	{ "Account", 10, GS_ALIGN_RIGHT, "account", f_account },
	{ "GPU", 4, GS_ALIGN_RIGHT, "GPU index", f_gpu },
	{ "GPUUUID", 40, GS_ALIGN_RIGHT, "GPU UUID", f_gpuuuid },
	{ "Share", 5, GS_ALIGN_RIGHT, "guaranteed shares (of 100)", f_share },
	{ "Weight", 6, GS_ALIGN_RIGHT, "scheduling weight", f_weight },
	{ "Priority", 8, GS_ALIGN_RIGHT, "priority class", f_priority },
	{ "Mode", 5, GS_ALIGN_RIGHT, "time or space sharing", f_mode },
	{ "Start", 19, GS_ALIGN_RIGHT, "allocation start", f_start },
	{ "End", 19, GS_ALIGN_RIGHT, "allocation end (Unknown: open)", f_end },
	{ "Elapsed", 10, GS_ALIGN_RIGHT, "End - Start", f_elapsed },
	{ "ElapsedRaw", 10, GS_ALIGN_RIGHT, "End - Start in seconds", f_elapsedraw },
	{ "GPUSec", 10, GS_ALIGN_RIGHT, "GPU seconds used", f_gpusec },
	{ "HeldSec", 10, GS_ALIGN_RIGHT, "seconds holding the GPU token", f_heldsec },
	{ "ShareSec", 10, GS_ALIGN_RIGHT, "shares/100 x busy seconds", f_sharesec },
	{ "BusySec", 10, GS_ALIGN_RIGHT, "seconds waiting or running", f_busysec },
	{ "AvgShare", 8, GS_ALIGN_RIGHT, "GPUSec / Elapsed, percent of one GPU", f_avgshare },
	{ "BusyShare", 9, GS_ALIGN_RIGHT, "GPUSec / BusySec, percent", f_busyshare },
	{ "Efficiency", 10, GS_ALIGN_RIGHT, "GPUSec / ShareSec, percent", f_efficiency },
	{ "Suspends", 8, GS_ALIGN_RIGHT, "evictions by a suspend", f_suspends },
	{ "BlockTasks", 12, GS_ALIGN_RIGHT, "logical blocks completed", f_blocktasks },
	{ "EvictAvg", 9, GS_ALIGN_RIGHT, "mean eviction latency, us", f_evictavg },
	{ "EvictMax", 9, GS_ALIGN_RIGHT, "worst eviction latency, us", f_evictmax },
	{ "MaxMem", 9, GS_ALIGN_RIGHT, "most device memory held at once", f_maxmem },
	{ "AveMem", 9, GS_ALIGN_RIGHT, "device memory held, averaged over the time any was held", f_avemem },
	{ "MemLimit", 9, GS_ALIGN_RIGHT, "device memory limit (none: no limit)", f_memlimit },
	{ "State", 10, GS_ALIGN_RIGHT, "RUNNING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL", f_state },
	{ "Estimate", 8, GS_ALIGN_RIGHT, "yes: usage estimated from NVML samples", f_estimate },
};
const unsigned gs_nfields = sizeof(gs_fields) / sizeof(gs_fields[0]);

const char gs_format_default[] =
	"JobID,JobName,User,GPU,Share,Weight,GPUSec,Elapsed,AvgShare,State";
const char gs_format_long[] =
	"JobID,JobName,Cluster,NodeList,User,Account,GPU,GPUUUID,Share,Weight,"
	"Priority,Mode,Start,End,Elapsed,GPUSec,HeldSec,ShareSec,AvgShare,"
	"Suspends,BlockTasks,EvictAvg,EvictMax,MaxMem,AveMem,MemLimit,State,"
	"Estimate";

int
gs_format_parse(const char *spec, struct gs_col *cols, unsigned *ncols,
		struct gs_error *err)
{
	char buf[1024], *save = NULL, *tok;

	if (strlen(spec) >= sizeof(buf))
		return gs_error_set(err, GS_EINVAL, "Format list too long");
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *pct = strchr(tok, '%');
		const struct gs_field *f = NULL;
		int width = 0, align = -1;

		if (pct != NULL) {
			char *end, *w = pct + 1;
			long x;

			*pct = '\0';
			if (*w == '-') {
				align = GS_ALIGN_LEFT;
				w++;
			}
			x = strtol(w, &end, 10);
			if (!isdigit((unsigned char)*w) || *end != '\0' ||
			    x < 1 || x > 1000) {
				*pct = '%';
				return gs_error_set(err, GS_EINVAL,
						    "Invalid field width specification: \"%s\"",
						    tok);
			}
			width = (int)x;
		}
		for (unsigned i = 0; i < gs_nfields; i++)
			if (strcasecmp(tok, gs_fields[i].name) == 0)
				f = &gs_fields[i];
		if (f == NULL)
			return gs_error_set(err, GS_EINVAL,
					    "Invalid field requested: \"%s\"",
					    tok);
		if (*ncols >= GS_MAX_COLS)
			return gs_error_set(err, GS_EINVAL,
					    "Too many fields (at most %d)",
					    GS_MAX_COLS);
		cols[*ncols].f = f;
		cols[*ncols].width = width ? width : f->width;
		cols[*ncols].align = align >= 0 ? align : f->align;
		(*ncols)++;
	}
	if (*ncols == 0)
		return gs_error_set(err, GS_EINVAL, "No fields requested");
	return 0;
}

/* One cell: padded, or cut with a trailing '+' when too long. */
static void
cell(FILE *f, const struct gs_col *c, const char *v, int style, int last)
{
	int len = (int)strlen(v);

	if (style == GS_OUT_PARSABLE) {
		fprintf(f, "%s|", v);
		return;
	}
	if (style == GS_OUT_PARSABLE2) {
		fprintf(f, "%s%s", v, last ? "" : "|");
		return;
	}
	if (len > c->width)
		fprintf(f, "%.*s+", c->width - 1, v);
	else if (c->align == GS_ALIGN_LEFT)
		fprintf(f, "%-*s", c->width, v);
	else
		fprintf(f, "%*s", c->width, v);
	if (!last)
		fputc(' ', f);
}

void
gs_print_header(FILE *f, const struct gs_col *cols, unsigned ncols,
		int style)
{
	for (unsigned i = 0; i < ncols; i++)
		cell(f, &cols[i], cols[i].f->name, style, i + 1 == ncols);
	fputc('\n', f);
	if (style != GS_OUT_TABLE)
		return;
	for (unsigned i = 0; i < ncols; i++) {
		for (int k = 0; k < cols[i].width; k++)
			fputc('-', f);
		if (i + 1 < ncols)
			fputc(' ', f);
	}
	fputc('\n', f);
}

void
gs_print_row(FILE *f, const struct gs_col *cols, unsigned ncols, int style,
	     const struct gs_row *r)
{
	char v[512];
	int num;

	for (unsigned i = 0; i < ncols; i++) {
		num = 0;
		cols[i].f->fmt(r, v, sizeof(v), &num);
		cell(f, &cols[i], v, style, i + 1 == ncols);
	}
	fputc('\n', f);
}

static void
json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void
gs_print_json_row(FILE *f, const struct gs_row *r, int first)
{
	char v[512];
	int num;

	fprintf(f, "%s    {", first ? "" : ",\n");
	for (unsigned i = 0; i < gs_nfields; i++) {
		num = 0;
		gs_fields[i].fmt(r, v, sizeof(v), &num);
		fprintf(f, "%s", i ? ", " : "");
		json_str(f, gs_fields[i].name);
		fputs(": ", f);
		if (num)
			fputs(v, f);
		else
			json_str(f, v);
	}
	fputc('}', f);
}

void
gs_print_helpformat(FILE *f)
{
	for (unsigned i = 0; i < gs_nfields; i++)
		fprintf(f, "%-14s%s", gs_fields[i].name,
			(i % 5 == 4 || i + 1 == gs_nfields) ? "\n" : "");
}
