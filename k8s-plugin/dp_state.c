/*
 * dp_state.c — tracked allocations and PodResources reconciliation (see
 * dp_state.h).
 *
 * Lookups are linear: the kubelet hands out at most 100 device IDs per
 * GPU, so a node holds at most a few hundred allocations and IDs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_state.h"

void
gs_dp_state_init(struct gs_dp_state *st)
{
	memset(st, 0, sizeof(*st));
}

void
gs_dp_state_clear(struct gs_dp_state *st)
{
	size_t i;

	for (i = 0; i < st->n; i++)
		free(st->a[i].ids);
	free(st->a);
	memset(st, 0, sizeof(*st));
}

/* Labels longer than the agent's fields are cut, the same way each time,
 * so comparing a stored label with a fresh one stays stable. */
static void
cut_label(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src);
}

int
gs_dp_state_set_labels(struct gs_dp_alloc *a, const char *ns,
		       const char *pod, const char *container, int pending)
{
	cut_label(a->ns, sizeof(a->ns), ns);
	cut_label(a->pod, sizeof(a->pod), pod);
	cut_label(a->container, sizeof(a->container), container);
	a->labeled = 1;
	a->label_pending = pending;
	return 0;
}

int
gs_dp_state_add(struct gs_dp_state *st, uint64_t id, const char *uuid,
		uint32_t shares, const char *const *ids, size_t nids,
		uint64_t now_ms, struct gs_error *err)
{
	struct gs_dp_alloc *a;
	size_t i;

	if (strlen(uuid) >= GS_UUID_MAX)
		return gs_error_set(err, GS_EINVAL, "GPU UUID too long");
	if (gs_dp_state_find(st, id) != NULL)
		return gs_error_set(err, GS_EINVAL,
		    "allocation %llu tracked twice", (unsigned long long)id);
	if (st->n == st->cap) {
		size_t ncap = st->cap ? st->cap * 2 : 16;
		struct gs_dp_alloc *na;

		na = realloc(st->a, ncap * sizeof(*na));
		if (na == NULL)
			return gs_error_set(err, GS_ENOMEM,
			    "allocation table: out of memory");
		st->a = na;
		st->cap = ncap;
	}
	a = &st->a[st->n];
	memset(a, 0, sizeof(*a));
	if (nids > 0) {
		a->ids = calloc(nids, sizeof(*a->ids));
		if (a->ids == NULL)
			return gs_error_set(err, GS_ENOMEM,
			    "allocation table: out of memory");
		for (i = 0; i < nids; i++) {
			if (strlen(ids[i]) >= GS_DP_ID_MAX) {
				free(a->ids);
				a->ids = NULL;
				return gs_error_set(err, GS_EINVAL,
				    "device ID too long");
			}
			strcpy(a->ids[i], ids[i]);
		}
	}
	a->nids = nids;
	a->id = id;
	strcpy(a->uuid, uuid);
	a->shares = shares;
	a->seen_ms = now_ms;
	a->handed = nids > 0;		/* adopted: no */
	a->handed_ms = now_ms;
	st->n++;
	return 0;
}

struct gs_dp_alloc *
gs_dp_state_find(struct gs_dp_state *st, uint64_t id)
{
	size_t i;

	for (i = 0; i < st->n; i++)
		if (st->a[i].id == id)
			return &st->a[i];
	return NULL;
}

void
gs_dp_state_remove(struct gs_dp_state *st, uint64_t id)
{
	struct gs_dp_alloc *a = gs_dp_state_find(st, id);
	size_t i;

	if (a == NULL)
		return;
	i = (size_t)(a - st->a);
	free(a->ids);
	memmove(&st->a[i], &st->a[i + 1], (st->n - i - 1) * sizeof(*a));
	st->n--;
}

static int
alloc_has_id(const struct gs_dp_alloc *a, const char *id)
{
	size_t i;

	for (i = 0; i < a->nids; i++)
		if (strcmp(a->ids[i], id) == 0)
			return 1;
	return 0;
}

static int
in_list(const char *const *list, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], id) == 0)
			return 1;
	return 0;
}

size_t
gs_dp_state_overlap(const struct gs_dp_state *st, const char *const *ids,
		    size_t nids, const char *const *freed, size_t nfreed,
		    uint64_t now_ms, uint64_t window_ms, uint64_t *stale,
		    uint64_t *same)
{
	size_t i, j, k = 0, hits;
	int offered;

	*same = 0;
	for (i = 0; i < st->n; i++) {
		const struct gs_dp_alloc *a = &st->a[i];

		offered = 0;
		for (j = 0, hits = 0; j < nids; j++) {
			if (!alloc_has_id(a, ids[j]))
				continue;
			hits++;
			if (in_list(freed, nfreed, ids[j]))
				offered = 1;
		}
		if (hits == 0)
			continue;
		if (offered || !a->handed ||
		    now_ms - a->handed_ms >= window_ms) {
			stale[k++] = a->id;
			continue;
		}
		if (*same == 0 && !a->seen && hits == nids && a->nids == nids)
			*same = a->id;
	}
	return k;
}

size_t
gs_dp_state_seen_holders(const struct gs_dp_state *st,
			 const char *const *ids, size_t nids, uint64_t *out)
{
	size_t i, j, k = 0;

	for (i = 0; i < st->n; i++) {
		if (!st->a[i].seen)
			continue;
		for (j = 0; j < nids; j++)
			if (alloc_has_id(&st->a[i], ids[j]))
				break;
		if (j < nids)
			out[k++] = st->a[i].id;
	}
	return k;
}

/* How many of the container's IDs are on GPU uuid. */
static size_t
ids_on_gpu(const struct gs_dp_podctr *pc, const char *uuid)
{
	size_t i, k = 0, ulen = strlen(uuid);

	for (i = 0; i < pc->nids; i++)
		if (strncmp(pc->ids[i], uuid, ulen) == 0 &&
		    strncmp(pc->ids[i] + ulen, "::", 2) == 0)
			k++;
	return k;
}

/* Give an adopted allocation the container's IDs on its GPU. */
static int
take_ids(struct gs_dp_alloc *a, const struct gs_dp_podctr *pc,
	 struct gs_error *err)
{
	size_t i, k = 0, n = ids_on_gpu(pc, a->uuid), ulen = strlen(a->uuid);

	if (n == 0)
		return 0;
	a->ids = calloc(n, sizeof(*a->ids));
	if (a->ids == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	for (i = 0; i < pc->nids; i++) {
		if (strncmp(pc->ids[i], a->uuid, ulen) != 0 ||
		    strncmp(pc->ids[i] + ulen, "::", 2) != 0)
			continue;
		if (strlen(pc->ids[i]) >= GS_DP_ID_MAX)
			continue;
		strcpy(a->ids[k++], pc->ids[i]);
	}
	a->nids = k;
	return 0;
}

static int
same_labels(const struct gs_dp_alloc *a, const struct gs_dp_podctr *pc)
{
	char ns[GS_LABEL_MAX], pod[GS_LABEL_MAX * 2], ctr[GS_LABEL_MAX];

	if (!a->labeled)
		return 0;
	cut_label(ns, sizeof(ns), pc->ns);
	cut_label(pod, sizeof(pod), pc->pod);
	cut_label(ctr, sizeof(ctr), pc->container);
	return strcmp(a->ns, ns) == 0 && strcmp(a->pod, pod) == 0 &&
	    strcmp(a->container, ctr) == 0;
}

/* The container holds one of the allocation's device IDs. */
static int
holds_any(const struct gs_dp_alloc *a, const struct gs_dp_podctr *pc)
{
	size_t k;

	for (k = 0; k < pc->nids; k++)
		if (alloc_has_id(a, pc->ids[k]))
			return 1;
	return 0;
}

/* The container is in the pod the allocation was seen in. */
static int
same_pod(const struct gs_dp_alloc *a, const struct gs_dp_podctr *pc)
{
	char ns[GS_LABEL_MAX], pod[GS_LABEL_MAX * 2];

	if (!a->labeled)
		return 1;
	cut_label(ns, sizeof(ns), pc->ns);
	cut_label(pod, sizeof(pod), pc->pod);
	return strcmp(a->ns, ns) == 0 && strcmp(a->pod, pod) == 0;
}

int
gs_dp_reconcile(struct gs_dp_state *st, const struct gs_dp_podctr *pcs,
		size_t npcs, uint64_t now_ms, uint64_t grace_ms,
		struct gs_dp_action *acts, struct gs_error *err)
{
	unsigned char *claimed = NULL, *moved = NULL;
	size_t *match = NULL;
	size_t i, j, nacts = 0;
	int pass, rv = -1;

	claimed = calloc(npcs + 1, 1);
	match = calloc(st->n + 1, sizeof(*match));
	moved = calloc(st->n + 1, 1);
	if (claimed == NULL || match == NULL || moved == NULL) {
		gs_error_set(err, GS_ENOMEM, "reconcile: out of memory");
		goto out;
	}
	for (i = 0; i < st->n; i++)
		match[i] = npcs;
	/* Pass 0: allocations that know their IDs.  Pass 1: adopted ones
	 * with labels.  Pass 2: adopted ones without, by GPU and count among
	 * containers nobody claimed. */
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < st->n; i++) {
			struct gs_dp_alloc *a = &st->a[i];

			if (match[i] != npcs || (pass == 0) != (a->nids > 0))
				continue;
			if (pass == 1 && !a->labeled)
				continue;
			for (j = 0; j < npcs; j++) {
				const struct gs_dp_podctr *pc = &pcs[j];

				if (pass == 0) {
					if (holds_any(a, pc))
						break;
				} else if (pass == 1) {
					if (same_labels(a, pc) &&
					    ids_on_gpu(pc, a->uuid) > 0)
						break;
				} else if (!claimed[j] &&
				    ids_on_gpu(pc, a->uuid) == a->shares) {
					break;
				}
			}
			if (j == npcs)
				continue;
			if (pass == 0 && a->seen && !same_pod(a, &pcs[j])) {
				/* Another pod holds its IDs: its own pod,
				 * if listed, holds some of them too. */
				for (; j < npcs; j++)
					if (same_pod(a, &pcs[j]) &&
					    holds_any(a, &pcs[j]))
						break;
				if (j == npcs) {
					moved[i] = 1;
					continue;
				}
			}
			match[i] = j;
			claimed[j] = 1;
			if (a->nids == 0 && take_ids(a, &pcs[j], err) == -1)
				goto out;
		}
	}
	for (i = 0; i < st->n; i++) {
		struct gs_dp_alloc *a = &st->a[i];

		if (match[i] == npcs) {
			if (a->seen || moved[i] ||
			    now_ms - a->seen_ms >= grace_ms) {
				acts[nacts].kind = GS_DP_ACT_CLOSE;
				acts[nacts++].id = a->id;
			}
			continue;
		}
		a->seen = 1;
		a->seen_ms = now_ms;
		if (!same_labels(a, &pcs[match[i]]))
			gs_dp_state_set_labels(a, pcs[match[i]].ns,
			    pcs[match[i]].pod, pcs[match[i]].container, 1);
		if (a->label_pending) {
			acts[nacts].kind = GS_DP_ACT_LABEL;
			acts[nacts++].id = a->id;
		}
	}
	rv = (int)nacts;

out:
	free(moved);
	free(claimed);
	free(match);
	return rv;
}
