/*
 * durable.h — the allocation table's writer thread.
 *
 * A write of the table (gs_state_save: write in place, fdatasync) can take
 * as long as the disk wants: seconds on a frozen or failing filesystem.
 * The loop must keep scheduling meanwhile, so the write happens on one
 * worker thread (STYLE rule 1) that reports back through an eventfd on
 * the agent's loop; the callback runs on the loop thread.  One write at a
 * time: the agent serializes the requests that need one (agent.c,
 * "durable requests").
 * Threading: gs_durable_* on the loop thread only; the worker touches
 * only the table it was handed and the file.
 */
#ifndef GS_AGENT_DURABLE_H
#define GS_AGENT_DURABLE_H

#include "gs_error.h"
#include "loop.h"
#include "state.h"

struct gs_durable;

/* Called on the loop thread when the write is over: err NULL when the
 * table is on disk, else why not (borrowed for the call). */
typedef void (*gs_durable_fn)(void *arg, const struct gs_error *err);

int gs_durable_new(struct gs_loop *l, struct gs_durable **out,
		   struct gs_error *err);
/* Waits for a write in flight (its callback is not called). */
void gs_durable_free(struct gs_durable *d);
/* Hand *st over to the worker (st is left empty) to be saved at path
 * (gs_state_save); fn(arg, ...) is called once it is done.  GS_EBUSY when
 * a write is in flight. */
int gs_durable_save(struct gs_durable *d, const char *path,
		    struct gs_state *st, gs_durable_fn fn, void *arg,
		    struct gs_error *err);
/* 1 while a write is in flight. */
int gs_durable_busy(const struct gs_durable *d);

#endif /* GS_AGENT_DURABLE_H */
