/*
 * gs_rtlogic.c — pure host-side logic of libgshare (see gs_rtlogic.h).
 */
#include <errno.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "gs_rtlogic.h"

unsigned int
gs__nphys(unsigned int blocks_per_sm, unsigned int sms, uint64_t total)
{
	uint64_t n = (uint64_t)blocks_per_sm * sms;

	if (n == 0 || total == 0)
		return 0;
	if (n > total)
		n = total;
	return (unsigned int)n;
}

unsigned int
gs__batch(uint64_t total, unsigned int nphys, unsigned int fixed)
{
	uint64_t b;

	if (fixed != 0)
		return fixed > GS__MAX_BATCH ? GS__MAX_BATCH : fixed;
	if (nphys == 0)
		return 1;
	b = total / ((uint64_t)nphys * 16u);
	if (b < 1)
		b = 1;
	if (b > 16)
		b = 16;
	return (unsigned int)b;
}

unsigned int
gs__batch_adapt(unsigned int cur, uint64_t avg_task_ns, uint64_t total,
		unsigned int nphys, unsigned int fixed)
{
	unsigned int b;
	uint64_t span;

	if (fixed != 0)
		return gs__batch(total, nphys, fixed);
	if (avg_task_ns == 0)
		return cur;
	b = gs__batch(total, nphys, 0);
	span = GS__BATCH_SPAN_NS / avg_task_ns;
	if (span < 1)
		span = 1;
	if (b > span)
		b = (unsigned int)span;
	return b;
}

unsigned int
gs__redo_cap(unsigned int nphys, unsigned int maxbatch, uint64_t total, int io)
{
	uint64_t pend = (uint64_t)nphys * 2u * maxbatch;

	if (io || pend > total)
		pend = total;
	return (unsigned int)(pend + (GS__REDO_TAKE + 1u) * (uint64_t)nphys +
			      64u);
}

static int
span_cmp(const void *a, const void *b)
{
	const struct gs__span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

uint64_t
gs__span_union(struct gs__span *v, size_t n)
{
	uint64_t sum = 0, cs = 0, ce = 0;
	int open = 0;
	size_t i;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), span_cmp);
	for (i = 0; i < n; i++) {
		if (v[i].end <= v[i].start)
			continue;
		if (open && v[i].start <= ce) {
			if (v[i].end > ce)
				ce = v[i].end;
			continue;
		}
		if (open)
			sum += ce - cs;
		cs = v[i].start;
		ce = v[i].end;
		open = 1;
	}
	if (open)
		sum += ce - cs;
	return sum;
}

uint64_t
gs__wait_step(const struct gs__waitpol *p, uint64_t waited_ns,
	      int suspend_pending, uint64_t *cur)
{
	if (suspend_pending || waited_ns < p->spin_ns) {
		*cur = 0;
		return 0;
	}
	if (*cur == 0)
		*cur = p->min_sleep_ns;
	else if (*cur * 2 <= p->max_sleep_ns)
		*cur *= 2;
	else
		*cur = p->max_sleep_ns;
	return *cur;
}

/* A loop that sees each of an I/O kernel's rounds end at once relaunches
 * for every few requests, and its reads of the streams between rounds
 * slow their writers (gs-server: ~230 rounds a run and +18..21 % over its
 * plain twin with the spin, 98..140 and -0.2..+4.7 % without,
 * docs/benchmarks.md runs 136-137).  Forced suspensions (the tests) keep
 * the spin, or the I/O rounds end before their suspend is due. */
uint64_t
gs__wait_spin_ns(const struct gs__config *c, int io_queued)
{
	if (io_queued && c->force_max_ns == 0)
		return 0;
	return c->spin_ns;
}

static int
parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0' || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int
gs__parse_range_us(const char *s, uint64_t *min_ns, uint64_t *max_ns,
		   struct gs_error *err)
{
	char buf[64];
	char *colon;
	uint64_t lo, hi;

	if (s == NULL || strlen(s) >= sizeof(buf))
		return gs_error_set(err, GS_ECONFIG,
				    "range must be MIN:MAX microseconds");
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (colon == NULL) {
		if (parse_u64(buf, &lo) < 0)
			return gs_error_set(err, GS_ECONFIG,
			    "bad range '%s': want MIN:MAX microseconds", s);
		hi = lo;
	} else {
		*colon = '\0';
		if (parse_u64(buf, &lo) < 0 || parse_u64(colon + 1, &hi) < 0)
			return gs_error_set(err, GS_ECONFIG,
			    "bad range '%s': want MIN:MAX microseconds", s);
	}
	if (lo == 0 || hi < lo || hi > 60000000u)
		return gs_error_set(err, GS_ECONFIG,
		    "bad range '%s': need 0 < MIN <= MAX <= 60000000", s);
	*min_ns = lo * 1000u;
	*max_ns = hi * 1000u;
	return 0;
}

/* Environment variable name as one of names[] (NULL-terminated): *out
 * gets its index; unset or empty leaves *out alone.  want: the message's
 * list of choices. */
static int
env_choice(const char *(*get)(const char *), const char *name,
	   const char *const *names, const char *want, int *out,
	   struct gs_error *err)
{
	const char *s = get(name);
	int i;

	if (s == NULL || *s == '\0')
		return 0;
	for (i = 0; names[i] != NULL; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
	return gs_error_set(err, GS_ECONFIG, "%s='%s': want %s", name, s,
			    want);
}

static int
env_u64(const char *(*get)(const char *), const char *name, uint64_t lo,
	uint64_t hi, uint64_t *out, struct gs_error *err)
{
	const char *s = get(name);
	uint64_t v;

	if (s == NULL || *s == '\0')
		return 0;
	if (parse_u64(s, &v) < 0 || v < lo || v > hi)
		return gs_error_set(err, GS_ECONFIG,
		    "%s='%s': want an integer in %llu..%llu", name, s,
		    (unsigned long long)lo, (unsigned long long)hi);
	*out = v;
	return 0;
}

/* GSHARE_PARTITION: "random" or FIRST:COUNT (both < 65536, COUNT > 0). */
static int
parse_partition(const char *s, struct gs__config *c)
{
	const char *colon = strchr(s, ':');
	char head[24];
	uint64_t f, n;
	size_t hl;

	if (strcmp(s, "random") == 0) {
		c->part_random = 1;
		return 0;
	}
	if (colon == NULL)
		return -1;
	hl = (size_t)(colon - s);
	if (hl >= sizeof(head))
		return -1;
	memcpy(head, s, hl);
	head[hl] = '\0';
	if (parse_u64(head, &f) < 0 || parse_u64(colon + 1, &n) < 0 ||
	    n == 0 || f > 0xffff || n > 0xffff)
		return -1;
	c->part_first = (unsigned int)f;
	c->part_count = (unsigned int)n;
	return 0;
}

/* in the order of GS__WATCH_* and GS__MAP_* */
static const char *const watch_names[] = { "host", "auto", "always", NULL };
static const char *const release_names[] = { "early", "drained", NULL };
static const char *const evict_end_names[] = { "report", "idle", NULL };
static const char *const direct_names[] = { "auto", "off", "alone",
					    NULL };
static const char *const map_names[] = { "green", "blocks", "raw", "rank",
					 NULL };

int
gs__config_parse(struct gs__config *c, const char *(*get)(const char *),
		 struct gs_error *err)
{
	uint64_t batch = 0, watch = 0, check = 0, spin = 200, seed = 0;
	uint64_t emax = 3000, dus = 500, slack = 1000, keep = 10000;
	uint64_t lead = GS__LEAD_US_DEFAULT, dlong = 0;
	uint64_t rzlog = 0, sent = GS__SENTINELS_DEFAULT, chain = 2;
	const char *s;
	int rel, dir;

	memset(c, 0, sizeof(*c));
	if (env_u64(get, "GSHARE_BATCH", 0, GS__MAX_BATCH, &batch, err) < 0 ||
	    env_u64(get, "GSHARE_WATCH_NS", 0, 100000, &watch, err) < 0 ||
	    env_u64(get, "GSHARE_CHECK_ONCE", 0, 1, &check, err) < 0 ||
	    env_u64(get, "GSHARE_SPIN_US", 0, 1000000, &spin, err) < 0 ||
	    env_u64(get, "GSHARE_EARLY_MAX_US", 1, 100000, &emax, err) < 0 ||
	    env_u64(get, "GSHARE_RELEASE_LEAD_US", 0, 100000, &lead,
		    err) < 0 ||
	    env_u64(get, "GSHARE_DIRECT_US", 20, 100000, &dus, err) < 0 ||
	    env_u64(get, "GSHARE_DIRECT_LONG_US", 0, 100000, &dlong,
		    err) < 0 ||
	    env_u64(get, "GSHARE_TIMER_SLACK_NS", 0, 1000000, &slack,
		    err) < 0 ||
	    env_u64(get, "GSHARE_KEEP_US", 0, 1000000, &keep, err) < 0 ||
	    env_u64(get, "GSHARE_RESIZE_LOG", 0, 1, &rzlog, err) < 0 ||
	    env_u64(get, "GSHARE_CHAIN", 0, 2, &chain, err) < 0 ||
	    env_u64(get, "GSHARE_SENTINELS", 0, GS__SENTINELS_MAX, &sent,
		    err) < 0 ||
	    env_u64(get, "GSHARE_SEED", 0, UINT64_MAX, &seed, err) < 0)
		return -1;
	s = get("GSHARE_FORCE_SUSPEND_US");
	if (s != NULL && *s != '\0' &&
	    gs__parse_range_us(s, &c->force_min_ns, &c->force_max_ns,
			       err) < 0)
		return gs_error_set(err, GS_ECONFIG,
		    "GSHARE_FORCE_SUSPEND_US='%s': want MIN:MAX microseconds, "
		    "0 < MIN <= MAX", s);
	s = get("GSHARE_PARTITION");
	if (s != NULL && *s != '\0' && parse_partition(s, c) < 0)
		return gs_error_set(err, GS_ECONFIG,
		    "GSHARE_PARTITION='%s': want FIRST:COUNT (SMs, COUNT > 0) "
		    "or random", s);
	c->watcher = GS__WATCH_HOST;
	if (env_choice(get, "GSHARE_WATCHER", watch_names,
		       "host, auto or always", &c->watcher, err) < 0)
		return -1;
	c->sm_map = GS__MAP_GREEN;
	if (env_choice(get, "GSHARE_SM_MAP", map_names,
		       "green, blocks, raw or rank", &c->sm_map, err) < 0)
		return -1;
	rel = 0;
	if (env_choice(get, "GSHARE_RELEASE", release_names,
		       "early or drained", &rel, err) < 0)
		return -1;
	c->release_early = rel == 0;
	c->evict_idle = 0;
	if (env_choice(get, "GSHARE_EVICT_END", evict_end_names,
		       "report or idle", &c->evict_idle, err) < 0)
		return -1;
	dir = 0;
	if (env_choice(get, "GSHARE_DIRECT", direct_names,
		       "auto, off or alone", &dir, err) < 0)
		return -1;
	c->direct = dir == 1 ? GS__DIRECT_OFF : dir == 2 ? GS__DIRECT_ALONE :
		    GS__DIRECT_AUTO;
	c->direct_ns = dus * 1000u;
	c->direct_long_ns = dlong * 1000u;
	c->slack_ns = slack;
	c->keep_ns = keep * 1000u;
	c->early_max_ns = emax * 1000u;
	c->lead_ns = lead * 1000u;
	c->batch = (unsigned int)batch;
	c->watch_ns = (unsigned int)watch;
	c->sentinels = (unsigned int)sent;
	c->check_once = (int)check;
	c->resize_log = (int)rzlog;
	c->chain = (int)chain;
	c->spin_ns = spin * 1000u;
	c->seed = seed;
	return 0;
}

unsigned int
gs__direct_chunk(unsigned int slots, uint64_t task_ns, uint64_t target_ns,
		 uint64_t long_ns, unsigned int left)
{
	uint64_t waves, n;

	if (slots == 0 || left == 0 || task_ns == 0 ||
	    (task_ns > target_ns / 4u && task_ns > long_ns))
		return 0;
	/* long blocks: whole waves of up to long_ns (one at least) — a
	 * one-wave chunk left its last blocks' SMs idle until the next
	 * (sgemm attached alone +1.9..2.6 % over its plain twin at 500 us
	 * chunks, -0.5 % at 2 ms: docs/benchmarks.md, run 101); the bound
	 * on a suspend's wait stays two chunks of at most long_ns */
	waves = (task_ns > target_ns / 4u && long_ns > target_ns ? long_ns :
		 target_ns) / task_ns;
	if (waves == 0)
		waves = 1;
	n = waves * slots;
	if (n >= left || left - n < slots / 2u)
		return left;
	return (unsigned int)n;
}

void
gs__direct_bounds(const struct gs__config *c, uint64_t slice_ns,
		  int contended, int overlap, uint64_t *target_ns,
		  uint64_t *long_ns)
{
	*target_ns = c->direct_ns;
	*long_ns = slice_ns / 2u;
	if (!contended)
		return;
	*target_ns /= 2u;
	if (!overlap)
		*long_ns = *target_ns;
	else if (c->direct_long_ns != 0)
		*long_ns = c->direct_long_ns;
	else if (slice_ns / 4u > GS__DIRECT_LONG_FLOOR_NS)
		*long_ns = slice_ns / 4u;
	else
		*long_ns = GS__DIRECT_LONG_FLOOR_NS;
}

uint64_t
gs__chunk_task(uint64_t task_d, uint64_t task_p, uint64_t long_ns)
{
	uint64_t t = task_d != 0 ? task_d : task_p;
	/* the block's own time is at most the lower of the two */
	uint64_t b = task_p != 0 && task_p < t ? task_p : t;

	if (t > long_ns && b <= long_ns + long_ns / 2u)
		return long_ns;
	return t;
}

unsigned int
gs__direct_rows(const struct gs_dim3 *grid, unsigned int first,
		unsigned int n)
{
	uint64_t total = (uint64_t)grid->x * grid->y * grid->z;

	if (grid->y == 1u || grid->z != 1u || first % grid->x != 0 ||
	    n < grid->x || first + (uint64_t)n >= total)
		return n;
	return n / grid->x * grid->x;
}

void
gs__direct_grid(const struct gs_dim3 *grid, unsigned int first,
		unsigned int n, struct gs_dim3 *out, unsigned int *rows,
		unsigned int *y0)
{
	uint64_t total = (uint64_t)grid->x * grid->y * grid->z;

	*y0 = 0;
	if (grid->y == 1u && grid->z == 1u) {
		out->x = n;
		out->y = out->z = 1;
		*rows = 2;
		return;
	}
	if (first == 0 && n == total) {
		*out = *grid;
		*rows = 1;
		return;
	}
	if (grid->z == 1u && first % grid->x == 0 && n % grid->x == 0) {
		out->x = grid->x;
		out->y = n / grid->x;
		out->z = 1;
		*rows = 1;
		*y0 = first / grid->x;
		return;
	}
	out->x = n;
	out->y = out->z = 1;
	*rows = 0;
}

int
gs__direct_pick(uint64_t task_d, uint64_t task_p, unsigned int *tries)
{
	if (task_d == 0)
		return 1;
	if (task_p == 0)
		return 0;
	if (task_d / 105u <= task_p / 100u || task_p >= GS__PICK_LONG_NS)
		return 1;
	return ++*tries % GS__PICK_RETRY == 0;
}

uint64_t
gs__task_est(uint64_t est, uint64_t span_ns, uint64_t done, unsigned int conc,
	     int contended, int partial)
{
	uint64_t t;

	if (done == 0 || span_ns == 0 || conc == 0 || partial)
		return est;
	if (conc > done)
		conc = (unsigned int)done;
	t = span_ns / done * conc + span_ns % done * conc / done;
	if (t == 0)
		t = 1;
	if (contended && est != 0 && t >= est)
		return est;
	return est == 0 ? t : (est + t) / 2u;
}

uint64_t
gs__evict_smooth(uint64_t est, uint64_t ev)
{
	return est == 0 ? ev : (3 * est + ev) / 4;
}

int
gs__early_ok(const struct gs__config *c, uint64_t est)
{
	return c->release_early && est != 0 && est <= c->early_max_ns;
}

int
gs__early_due(const struct gs__config *c, uint64_t est, uint64_t elapsed)
{
	return gs__early_ok(c, est) && elapsed + c->lead_ns >= est;
}

uint64_t
gs__carry_add(int64_t *carry, uint64_t v)
{
	int64_t s = (int64_t)v + *carry;

	*carry = s < 0 ? s : 0;
	return s < 0 ? 0 : (uint64_t)s;
}

uint64_t
gs__rand(uint64_t *state)
{
	uint64_t x = *state;

	if (x == 0)
		x = 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint64_t
gs__ring_recent(uint64_t count, uint64_t cap, uint64_t max)
{
	uint64_t first = count > cap ? count - cap : 0;

	if (count - first > max)
		first = count - max;
	return first;
}

uint64_t
gs__rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + gs__rand(state) % (hi - lo + 1);
}

void
gs__queues_init(struct gs__queues *qs)
{
	memset(qs, 0, sizeof(*qs));
}

void
gs__queues_free(struct gs__queues *qs)
{
	free(qs->q);
	memset(qs, 0, sizeof(*qs));
}

static struct gs__squeue *
find_q(const struct gs__queues *qs, void *stream)
{
	size_t i;

	for (i = 0; i < qs->n; i++)
		if (qs->q[i].stream == stream)
			return &qs->q[i];
	return NULL;
}

int
gs__queues_push(struct gs__queues *qs, void *stream, struct gs__qnode *node)
{
	struct gs__squeue *q = find_q(qs, stream);

	if (q == NULL) {
		if (qs->n == qs->cap) {
			size_t nc = qs->cap ? qs->cap * 2 : 4;
			struct gs__squeue *nq;

			nq = realloc(qs->q, nc * sizeof(*nq));
			if (nq == NULL)
				return -1;
			qs->q = nq;
			qs->cap = nc;
		}
		q = &qs->q[qs->n++];
		memset(q, 0, sizeof(*q));
		q->stream = stream;
	}
	node->next = NULL;
	if (q->tail != NULL)
		q->tail->next = node;
	else
		q->head = node;
	q->tail = node;
	q->len++;
	return 0;
}

int
gs__queues_remove(struct gs__queues *qs, void *stream, struct gs__qnode *node)
{
	struct gs__squeue *q = find_q(qs, stream);
	struct gs__qnode *prev = NULL, *it;

	if (q == NULL)
		return -1;
	for (it = q->head; it != NULL; prev = it, it = it->next) {
		if (it != node)
			continue;
		if (prev != NULL)
			prev->next = it->next;
		else
			q->head = it->next;
		if (q->tail == it)
			q->tail = prev;
		q->len--;
		it->next = NULL;
		return 0;
	}
	return -1;
}

size_t
gs__queues_total(const struct gs__queues *qs)
{
	size_t i, t = 0;

	for (i = 0; i < qs->n; i++)
		t += qs->q[i].len;
	return t;
}

int
gs__uuid_format(const unsigned char bytes[16], char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, k = 0;

	if (len < 41)
		return -1;
	memcpy(out, "GPU-", 4);
	k = 4;
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[k++] = '-';
		out[k++] = hex[bytes[i] >> 4];
		out[k++] = hex[bytes[i] & 15];
	}
	out[k] = '\0';
	return 0;
}

/* The UUID's body: after "GPU-"/"MIG-" (letters, then '-'), or all. */
static const char *
uuid_body(const char *u)
{
	const char *p = u;

	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
		p++;
	return (p > u && *p == '-') ? p + 1 : u;
}

int
gs__gpu_check(uint64_t alloc_id, const char *want, const char *have,
	      int device, struct gs_error *err)
{
	const char *a, *b;

	if (want == NULL || *want == '\0')
		return 0;
	if (strncmp(want, "SIM-", 4) != 0 && have != NULL) {
		a = uuid_body(want);
		b = uuid_body(have);
		while (*a != '\0' && *b != '\0' &&
		       tolower((unsigned char)*a) ==
		       tolower((unsigned char)*b)) {
			a++;
			b++;
		}
		if (*a == '\0' && *b == '\0')
			return 0;
	}
	return gs_error_set(err, GS_EPERM, "allocation %llu is on GPU %s, "
			    "but this process's CUDA device %d is %s: a job "
			    "must run on its allocation's GPU (check "
			    "CUDA_VISIBLE_DEVICES and the device the program "
			    "selects)", (unsigned long long)alloc_id, want,
			    device, have != NULL && *have ? have : "unknown");
}

unsigned int
gs__partition(uint64_t part_gen, unsigned int first, unsigned int count,
	      unsigned int sms)
{
	if (part_gen == 0 || count == 0 || first >= sms || sms > 0xffffu)
		return 0;
	if (count > sms - first)
		count = sms - first;
	if (first == 0 && count == sms)
		return 0;
	return first << 16 | count;
}

unsigned int
gs__rank_range(unsigned int range, const uint16_t *smid, unsigned int n)
{
	unsigned int first = range >> 16, count = range & 0xffffu, lo, hi;

	if (range == 0 || n == 0 || smid == NULL || first >= n)
		return range;
	if (count > n - first)
		count = n - first;
	lo = smid[first];
	hi = smid[first + count - 1];
	if (hi < lo)		/* the table is ascending; never */
		return range;
	return lo << 16 | (hi - lo + 1u);
}

unsigned int
gs__part_blocks(unsigned int nphys, unsigned int range, unsigned int sms)
{
	uint64_t n;

	if (range == 0 || sms == 0 || nphys == 0)
		return nphys;
	n = ((uint64_t)nphys * (range & 0xffffu) + sms - 1u) / sms;
	if (n == 0)
		n = 1;
	return n < nphys ? (unsigned int)n : nphys;
}

int
gs__green_groups(unsigned int first, unsigned int count, unsigned int sms,
		 unsigned int ngroups, unsigned int gsize, unsigned int left,
		 unsigned int *g0, unsigned int *ng, int *with_left)
{
	uint64_t lo = first, hi = (uint64_t)first + count, mid;
	unsigned int i, a = 0, n = 0;

	for (i = 0; i < ngroups; i++) {
		mid = (uint64_t)i * gsize + gsize / 2u;
		if (mid >= lo && mid < hi) {
			if (n == 0)
				a = i;
			n++;
		}
	}
	/* the leftover SMs: with the range that holds their middle or
	 * their start, or reaches the GPU's end (the agent's last 8-SM
	 * granule may be shorter) */
	{
		uint64_t l0 = (uint64_t)ngroups * gsize, l1 = l0 + left;

		mid = l0 + left / 2u;
		*with_left = left > 0 && lo < l1 && hi > l0 &&
			     ((mid >= lo && mid < hi) || lo <= l0 ||
			      hi >= sms);
	}
	*g0 = n > 0 ? a : ngroups;
	*ng = n;
	return n > 0 || *with_left ? 0 : -1;
}

uint64_t
gs__space_scaled(uint64_t gpu_ns, unsigned int range, unsigned int sms)
{
	if (range == 0 || sms == 0)
		return gpu_ns;
	return gpu_ns * (range & 0xffffu) / sms;
}
