/*
 * connlimit.c — per-uid connection counts and the accept rule (see
 * connlimit.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connlimit.h"

struct ucount {
	uid_t uid;
	unsigned n;
};

struct gs_connlimit {
	struct ucount *v;	/* sorted by uid, every n > 0 */
	size_t len, cap;
	unsigned total;
};

struct gs_connlimit *gs_connlimit_new(void)
{
	return calloc(1, sizeof(struct gs_connlimit));
}

void gs_connlimit_free(struct gs_connlimit *cl)
{
	if (cl == NULL)
		return;
	free(cl->v);
	free(cl);
}

/* Index of uid, or where it would go (*found 0). */
static size_t find(const struct gs_connlimit *cl, uid_t uid, int *found)
{
	size_t lo = 0, hi = cl->len, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (cl->v[mid].uid < uid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < cl->len && cl->v[lo].uid == uid;
	return lo;
}

unsigned gs_connlimit_count(const struct gs_connlimit *cl, uid_t uid)
{
	int found;
	size_t i = find(cl, uid, &found);

	return found ? cl->v[i].n : 0;
}

unsigned gs_connlimit_total(const struct gs_connlimit *cl)
{
	return cl->total;
}

int gs_connlimit_add(struct gs_connlimit *cl, uid_t uid,
		     unsigned max_clients, unsigned root_reserved,
		     unsigned per_uid, char *why, size_t whylen)
{
	int found;
	size_t i = find(cl, uid, &found);
	unsigned mine = found ? cl->v[i].n : 0;

	if (cl->total >= max_clients) {
		snprintf(why, whylen, "the agent has %u connections "
			 "(max_clients)", cl->total);
		return -1;
	}
	if (uid != 0 && root_reserved >= max_clients - cl->total) {
		snprintf(why, whylen, "the agent has %u connections; the "
			 "last %u are kept for root (root_reserved_clients)",
			 cl->total, root_reserved);
		return -1;
	}
	if (uid != 0 && mine >= per_uid) {
		snprintf(why, whylen, "uid %u has %u connections open "
			 "(max_clients_per_uid)", (unsigned)uid, mine);
		return -1;
	}
	if (!found) {
		if (cl->len == cl->cap) {
			size_t cap = cl->cap ? cl->cap * 2 : 16;
			struct ucount *v = realloc(cl->v, cap * sizeof(*v));

			if (v == NULL) {
				snprintf(why, whylen, "out of memory");
				return -1;
			}
			cl->v = v;
			cl->cap = cap;
		}
		memmove(cl->v + i + 1, cl->v + i,
			(cl->len - i) * sizeof(*cl->v));
		cl->v[i].uid = uid;
		cl->v[i].n = 0;
		cl->len++;
	}
	cl->v[i].n++;
	cl->total++;
	return 0;
}

void gs_connlimit_del(struct gs_connlimit *cl, uid_t uid)
{
	int found;
	size_t i = find(cl, uid, &found);

	if (!found)
		return;
	cl->total--;
	if (--cl->v[i].n == 0) {
		memmove(cl->v + i, cl->v + i + 1,
			(cl->len - i - 1) * sizeof(*cl->v));
		cl->len--;
	}
}
