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

size_t
gs_dp_state_overlap(const struct gs_dp_state *st, const char *const *ids,
		    size_t nids, uint64_t *out)
{
	size_t i, j, k = 0;

	for (i = 0; i < st->n; i++) {
		for (j = 0; j < nids; j++) {
			if (alloc_has_id(&st->a[i], ids[j])) {
				out[k++] = st->a[i].id;
				break;
			}
		}
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

int
gs_dp_reconcile(struct gs_dp_state *st, const struct gs_dp_podctr *pcs,
		size_t npcs, uint64_t now_ms, uint64_t grace_ms,
		struct gs_dp_action *acts, struct gs_error *err)
{
	unsigned char *claimed = NULL;
	size_t *match = NULL;
	size_t i, j, nacts = 0;
	int pass, rv = -1;

	claimed = calloc(npcs + 1, 1);
	match = calloc(st->n + 1, sizeof(*match));
	if (claimed == NULL || match == NULL) {
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
				size_t k;

				if (pass == 0) {
					for (k = 0; k < pc->nids; k++)
						if (alloc_has_id(a, pc->ids[k]))
							break;
					if (k < pc->nids)
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
			match[i] = j;
			claimed[j] = 1;
			if (a->nids == 0 && take_ids(a, &pcs[j], err) == -1)
				goto out;
		}
	}
	for (i = 0; i < st->n; i++) {
		struct gs_dp_alloc *a = &st->a[i];

		if (match[i] == npcs) {
			if (a->seen || now_ms - a->seen_ms >= grace_ms) {
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
	free(claimed);
	free(match);
	return rv;
}
