/*
 * dp_state.h — the allocations this device plugin made (or adopted), and
 * their reconciliation with the kubelet's PodResources list.
 *
 * An allocation is created in the agent by Allocate, before the kubelet
 * says which pod it is for; the kubelet's PodResources List later shows
 * which pod container holds its device IDs.  Reconciling labels the
 * allocation with namespace/pod/container and closes allocations whose
 * pod is gone: at once when the allocation had been seen in a pod, after
 * a grace period when it never was (a fresh allocation the kubelet has
 * not recorded yet, or one adopted after a restart).  After a
 * restart of the plugin, allocations are adopted from the agent's status
 * without their device IDs; reconciling finds them again by labels, or
 * by GPU and share count.  Pure: no I/O, the caller carries out the
 * actions.  Not thread-safe.
 */
#ifndef GS_DP_STATE_H
#define GS_DP_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "dp_logic.h"
#include "gs_error.h"
#include "gs_proto.h"

struct gs_dp_alloc {
	uint64_t id;
	char uuid[GS_UUID_MAX];
	uint32_t shares;
	char (*ids)[GS_DP_ID_MAX];	/* device IDs; NULL when adopted */
	size_t nids;
	char ns[GS_LABEL_MAX];
	char pod[GS_LABEL_MAX * 2];
	char container[GS_LABEL_MAX];
	int labeled;		/* ns/pod/container known */
	int label_pending;	/* known here, not yet stored by the agent */
	int seen;		/* has been seen in a pod */
	uint64_t seen_ms;	/* created, adopted or last seen in a pod */
	int handed;		/* made by Allocate here (not adopted) */
	uint64_t handed_ms;	/* last handed to a container by Allocate */
	/* space mode: the agent's MPS server for it ("": none), as its
	 * CREATE reply or STATUS said */
	char mps_pipe[GS_PATH_MAX];
	uint32_t mps_pct;
};

struct gs_dp_state {
	struct gs_dp_alloc *a;
	size_t n, cap;
};

/* One container of the PodResources list, with its IDs of our resource. */
struct gs_dp_podctr {
	const char *ns, *pod, *container;
	const char *const *ids;
	size_t nids;
	const char *resource;	/* gs_dp_grpc_pods_now only (last, so
				 * positional initializers stay valid) */
};

enum gs_dp_act_kind { GS_DP_ACT_LABEL = 1, GS_DP_ACT_CLOSE = 2 };

struct gs_dp_action {
	int kind;
	uint64_t id;
};

void gs_dp_state_init(struct gs_dp_state *st);
void gs_dp_state_clear(struct gs_dp_state *st);

/* Track allocation id (ids may be NULL with nids 0: adopted). */
int gs_dp_state_add(struct gs_dp_state *st, uint64_t id, const char *uuid,
		    uint32_t shares, const char *const *ids, size_t nids,
		    uint64_t now_ms, struct gs_error *err);
/* Borrowed pointer or NULL. */
struct gs_dp_alloc *gs_dp_state_find(struct gs_dp_state *st, uint64_t id);
void gs_dp_state_remove(struct gs_dp_state *st, uint64_t id);
/* Set an allocation's labels, cut to the agent's field sizes; pending:
 * the agent does not have them yet.  Always returns 0. */
int gs_dp_state_set_labels(struct gs_dp_alloc *a, const char *ns,
			   const char *pod, const char *container,
			   int pending);

/* Allocations holding any of ids (one GPU's part of an Allocate).  The
 * kubelet hands a device ID out again in two cases: its holder is gone
 * (the allocation is stale: close it), or, within one pod's admission, a
 * later container reuses an init container's devices (the init container
 * has not even started: keep its allocation).  The kubelet takes reused
 * devices from the pod's own pool, never from the free devices it offers
 * GetPreferredAllocation; and a pod's containers are admitted in one
 * burst.  So an allocation is stale when one of its IDs in this request
 * was offered as free (freed: the last GetPreferredAllocation's available
 * IDs that were not must-include, NULL/0 when none preceded), or when it
 * was handed out window_ms ago or more (or adopted); otherwise it is the
 * same pod's.  stale (caller array, st->n entries) receives the stale
 * ids; *same the id of a kept allocation, never seen in a pod, whose
 * device IDs are exactly ids, which the new container shares (0: none).
 * Returns the number of stale ids. */
size_t gs_dp_state_overlap(const struct gs_dp_state *st,
			   const char *const *ids, size_t nids,
			   const char *const *freed, size_t nfreed,
			   uint64_t now_ms, uint64_t window_ms,
			   uint64_t *stale, uint64_t *same);

/* Allocations holding any of ids that have been seen in a pod: kept by
 * gs_dp_state_overlap as the same pod's, but a pod seen running cannot be
 * the one being admitted unless a PodResources poll fell inside its
 * admission, so when the agent has no room for the new container these
 * are the ones whose pod is gone (deleted since the last poll).  out
 * (caller array, st->n entries) receives their ids; returns the count. */
size_t gs_dp_state_seen_holders(const struct gs_dp_state *st,
				const char *const *ids, size_t nids,
				uint64_t *out);

/* Reconcile with the kubelet's list.  acts (caller array of st->n
 * entries) receives LABEL for allocations whose labels the agent should
 * store (clear label_pending once it did) and CLOSE for allocations
 * whose pod went away (also when its device IDs now show up only in
 * another pod), or that no pod has held within grace_ms of their
 * creation (remove them once closed).  Returns the
 * number of actions, or -1. */
int gs_dp_reconcile(struct gs_dp_state *st, const struct gs_dp_podctr *pcs,
		    size_t npcs, uint64_t now_ms, uint64_t grace_ms,
		    struct gs_dp_action *acts, struct gs_error *err);

#endif /* GS_DP_STATE_H */
