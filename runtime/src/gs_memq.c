/*
 * gs_memq.c — the per-process device memory ledger (see gs_memq.h).
 *
 * The used counter is reserved with a compare-and-swap loop, so the limit
 * holds exactly under any interleaving of threads.  The peak only grows
 * (CAS max).  Pointers live in GS_MEMQ_STRIPES open-addressing tables
 * (linear probing, backward-shift deletion, grown at 1/2 load), the
 * stripe chosen by a hash of the pointer.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_memq.h"

#define GS_MEMQ_STRIPES	16u
#define GS_MEMQ_MIN	64u	/* initial slots per stripe, a power of 2 */

struct slot {
	uint64_t ptr;		/* 0: empty (the driver never returns 0) */
	uint64_t bytes;
};

struct stripe {
	pthread_mutex_t mu;
	struct slot *v;
	uint64_t cap, n;	/* cap a power of 2 */
};

struct gs_memq {
	uint64_t limit;
	uint64_t used;		/* atomic */
	uint64_t peak;		/* atomic */
	volatile struct gs_ctlpage *page;
	volatile struct gs_mempage *shared;	/* NULL: this process alone */
	struct stripe st[GS_MEMQ_STRIPES];
};

static uint64_t mix(uint64_t x)
{
	/* splitmix64 finalizer: device pointers share their high bits and
	 * are aligned, the low bits alone would crowd a few slots */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

int gs_memq_new(uint64_t limit, volatile struct gs_ctlpage *page,
		struct gs_memq **out, struct gs_error *err)
{
	struct gs_memq *q = calloc(1, sizeof(*q));
	unsigned i;

	if (q == NULL)
		return gs_error_set(err, GS_ENOMEM, "memory ledger: out of "
				    "memory");
	q->limit = limit;
	q->page = page;
	for (i = 0; i < GS_MEMQ_STRIPES; i++) {
		pthread_mutex_init(&q->st[i].mu, NULL);
		q->st[i].v = calloc(GS_MEMQ_MIN, sizeof(struct slot));
		if (q->st[i].v == NULL) {
			gs_memq_free(q);
			return gs_error_set(err, GS_ENOMEM, "memory ledger: "
					    "out of memory");
		}
		q->st[i].cap = GS_MEMQ_MIN;
	}
	*out = q;
	return 0;
}

void gs_memq_free(struct gs_memq *q)
{
	unsigned i;

	if (q == NULL)
		return;
	for (i = 0; i < GS_MEMQ_STRIPES; i++) {
		free(q->st[i].v);
		pthread_mutex_destroy(&q->st[i].mu);
	}
	free(q);
}

/* The page's mem_peak: the ledger's peak (a report; the next change
 * corrects a store that lost a race). */
static void publish_peak(struct gs_memq *q)
{
	if (q->page == NULL)
		return;
	__atomic_store_n(&q->page->mem_peak,
			 __atomic_load_n(&q->peak, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}

/* *v += bytes, saturating. */
static void add_sat(volatile uint64_t *v, uint64_t bytes)
{
	uint64_t u = __atomic_load_n(v, __ATOMIC_RELAXED), nu;

	do {
		nu = bytes > UINT64_MAX - u ? UINT64_MAX : u + bytes;
	} while (!__atomic_compare_exchange_n(v, &u, nu, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
}

/* *v -= bytes, never below zero (the agent may have zeroed or taken out
 * the figure already). */
static void sub_sat(volatile uint64_t *v, uint64_t bytes)
{
	uint64_t u = __atomic_load_n(v, __ATOMIC_RELAXED), nu;

	do {
		nu = bytes > u ? 0 : u - bytes;
	} while (!__atomic_compare_exchange_n(v, &u, nu, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
}

/* *v += bytes unless that passes limit (0: none): 0, or -1 (unchanged). */
static int add_bounded(volatile uint64_t *v, uint64_t bytes, uint64_t limit)
{
	uint64_t u = __atomic_load_n(v, __ATOMIC_RELAXED), nu;

	do {
		if (bytes > UINT64_MAX - u)
			return -1;
		nu = u + bytes;
		if (limit != 0 && nu > limit)
			return -1;
	} while (!__atomic_compare_exchange_n(v, &u, nu, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	return 0;
}

static void raise_peak(struct gs_memq *q, uint64_t used)
{
	uint64_t p = __atomic_load_n(&q->peak, __ATOMIC_RELAXED);

	while (used > p &&
	       !__atomic_compare_exchange_n(&q->peak, &p, used, 1,
					    __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

/*
 * The order of the three counters is what makes a dead process's share
 * recoverable (gs_mempage.h): the page's mem_used goes up before the
 * shared counter and comes down after it, so the page never shows less
 * than the process put in the shared counter.
 */
int gs_memq_reserve(struct gs_memq *q, uint64_t bytes)
{
	uint64_t nu;

	if (add_bounded(&q->used, bytes, q->limit) < 0)
		return -1;
	if (q->page != NULL)
		add_sat(&q->page->mem_used, bytes);
	if (q->shared != NULL &&
	    add_bounded(&q->shared->used, bytes, q->limit) < 0) {
		if (q->page != NULL)
			sub_sat(&q->page->mem_used, bytes);
		sub_sat(&q->used, bytes);
		return -1;
	}
	nu = __atomic_load_n(&q->used, __ATOMIC_ACQUIRE);
	raise_peak(q, nu);
	publish_peak(q);
	return 0;
}

void gs_memq_force(struct gs_memq *q, uint64_t bytes)
{
	add_sat(&q->used, bytes);
	if (q->page != NULL)
		add_sat(&q->page->mem_used, bytes);
	if (q->shared != NULL)
		add_sat(&q->shared->used, bytes);
	raise_peak(q, __atomic_load_n(&q->used, __ATOMIC_ACQUIRE));
	publish_peak(q);
}

void gs_memq_unreserve(struct gs_memq *q, uint64_t bytes)
{
	uint64_t u = __atomic_load_n(&q->used, __ATOMIC_RELAXED);

	/* never more than this process holds, so that a give-back of what
	 * it does not hold cannot take another process's share */
	if (bytes > u)
		bytes = u;
	if (q->shared != NULL)
		sub_sat(&q->shared->used, bytes);
	if (q->page != NULL)
		sub_sat(&q->page->mem_used, bytes);
	sub_sat(&q->used, bytes);
}

static struct stripe *stripe_of(struct gs_memq *q, uint64_t h)
{
	return &q->st[h % GS_MEMQ_STRIPES];
}

/* Slot index of ptr in s, or of the empty slot where it would go. */
static uint64_t probe(const struct stripe *s, uint64_t ptr, uint64_t h)
{
	uint64_t i = (h / GS_MEMQ_STRIPES) & (s->cap - 1);

	while (s->v[i].ptr != 0 && s->v[i].ptr != ptr)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static int grow(struct stripe *s)
{
	struct slot *old = s->v, *nv;
	uint64_t oc = s->cap, i, j;

	if (oc > UINT64_MAX / 2 / sizeof(struct slot))
		return -1;
	nv = calloc(oc * 2, sizeof(struct slot));
	if (nv == NULL)
		return -1;
	s->v = nv;
	s->cap = oc * 2;
	for (i = 0; i < oc; i++) {
		if (old[i].ptr == 0)
			continue;
		j = probe(s, old[i].ptr, mix(old[i].ptr));
		s->v[j] = old[i];
	}
	free(old);
	return 0;
}

int gs_memq_track(struct gs_memq *q, uint64_t ptr, uint64_t bytes)
{
	uint64_t h = mix(ptr), i;
	struct stripe *s = stripe_of(q, h);
	int rv = -1;

	if (ptr == 0)
		return -1;
	pthread_mutex_lock(&s->mu);
	if ((s->n + 1) * 2 > s->cap && grow(s) < 0)
		goto out_unlock;
	i = probe(s, ptr, h);
	if (s->v[i].ptr == ptr)
		goto out_unlock;
	s->v[i].ptr = ptr;
	s->v[i].bytes = bytes;
	s->n++;
	rv = 0;
out_unlock:
	pthread_mutex_unlock(&s->mu);
	return rv;
}

uint64_t gs_memq_untrack(struct gs_memq *q, uint64_t ptr)
{
	uint64_t h = mix(ptr), i, j, k, bytes;
	struct stripe *s = stripe_of(q, h);

	if (ptr == 0)
		return 0;
	pthread_mutex_lock(&s->mu);
	i = probe(s, ptr, h);
	if (s->v[i].ptr != ptr) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	bytes = s->v[i].bytes;
	/* backward-shift deletion: move later entries of the run up so no
	 * lookup stops early at the hole */
	j = i;
	for (;;) {
		j = (j + 1) & (s->cap - 1);
		if (s->v[j].ptr == 0)
			break;
		k = (mix(s->v[j].ptr) / GS_MEMQ_STRIPES) & (s->cap - 1);
		/* move j into i when its home k is not in (i, j] */
		if ((i <= j) ? (k <= i || k > j) : (k <= i && k > j)) {
			s->v[i] = s->v[j];
			i = j;
		}
	}
	s->v[i].ptr = 0;
	s->v[i].bytes = 0;
	s->n--;
	pthread_mutex_unlock(&s->mu);
	gs_memq_unreserve(q, bytes);
	return bytes;
}

uint64_t gs_memq_used(const struct gs_memq *q)
{
	return __atomic_load_n(&q->used, __ATOMIC_ACQUIRE);
}

uint64_t gs_memq_peak(const struct gs_memq *q)
{
	return __atomic_load_n(&q->peak, __ATOMIC_ACQUIRE);
}

uint64_t gs_memq_limit(const struct gs_memq *q)
{
	return q->limit;
}

void gs_memq_share(struct gs_memq *q, volatile struct gs_mempage *m)
{
	q->shared = m;
}

uint64_t gs_memq_alloc_used(const struct gs_memq *q)
{
	if (q->shared == NULL)
		return gs_memq_used(q);
	return __atomic_load_n(&q->shared->used, __ATOMIC_ACQUIRE);
}

int gs_memq_over(const struct gs_memq *q)
{
	return q->limit != 0 && gs_memq_alloc_used(q) > q->limit;
}

uint64_t gs_memq_count(struct gs_memq *q)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < GS_MEMQ_STRIPES; i++) {
		pthread_mutex_lock(&q->st[i].mu);
		n += q->st[i].n;
		pthread_mutex_unlock(&q->st[i].mu);
	}
	return n;
}

void gs_memq_view(const struct gs_memq *q, uint64_t dev_free,
		  uint64_t dev_total, uint64_t *free_out,
		  uint64_t *total_out)
{
	uint64_t used = gs_memq_alloc_used(q), left;

	if (q->limit == 0 || q->limit >= dev_total) {
		*free_out = dev_free;
		*total_out = dev_total;
		return;
	}
	left = used < q->limit ? q->limit - used : 0;
	*total_out = q->limit;
	*free_out = left < dev_free ? left : dev_free;
}
