/*
 * acct_agent.h — accounting inside gshared: wires acct.c, store.c and
 * metrics.c to the agent's loop and allocation table.
 *
 * gs_accounting_new opens (creates, migrates, recovers) the usage store,
 * starts its writer thread, observes allocations (create, attach, token
 * grants and releases, escalations, close), registers the accounting tick
 * (accounting_tick, default 1 s), the store's completion eventfd and the
 * metrics listener on the agent's loop.  gs_accounting_free runs a last
 * tick, waits for the store to write everything queued and closes it; call
 * it after gs_agent_run returned and before gs_agent_free.
 * Loop thread only (plus the store's own writer thread).
 */
#ifndef GS_ACCT_AGENT_H
#define GS_ACCT_AGENT_H

#include "agent.h"
#include "gs_error.h"

struct gs_accounting;

int gs_accounting_new(struct gs_agent *ag, struct gs_accounting **out,
		      struct gs_error *err);
void gs_accounting_free(struct gs_accounting *ac);
/* Take unmanaged processes' estimates and metrics rows from u at every
 * tick (NULL: none). */
struct gs_unman;
void gs_accounting_set_unman(struct gs_accounting *ac, struct gs_unman *u);

#endif /* GS_ACCT_AGENT_H */
