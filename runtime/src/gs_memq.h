/*
 * gs_memq.h — the job side of device memory limits: a per-process ledger
 * of the device memory an allocation's process holds, checked against the
 * limit the agent wrote in the control page, and published back into the
 * page (mem_used, mem_peak) for the agent's accounting.  Pure host code:
 * no CUDA, no I/O, so it is unit-tested without a GPU; the launch gate
 * (and libgshare) call it around the driver's allocation entry points:
 *
 *   if (gs_memq_reserve(q, size) < 0)
 *           return CUDA_ERROR_OUT_OF_MEMORY;      (the driver not called)
 *   rc = real_cuMemAlloc(&ptr, size);
 *   if (rc != CUDA_SUCCESS)
 *           gs_memq_unreserve(q, size);
 *   else if (gs_memq_track(q, ptr, size) < 0)    (no room to remember it)
 *           { real_cuMemFree(ptr); gs_memq_unreserve(q, size);
 *             return CUDA_ERROR_OUT_OF_MEMORY; }
 *   ...
 *   gs_memq_untrack(q, ptr);                     (before the real free)
 *
 * Reservation first, so that threads allocating at once can never
 * together pass the limit (a compare-and-swap on the used counter); a
 * failed allocation gives its reservation back.  Frees look the pointer up
 * (cuMemFree gets no size); a pointer the ledger does not know (allocated
 * before the ledger existed, or by a path it does not count) is passed
 * through and changes nothing.
 *
 * Threading: every call is safe from any thread.  The counter is one
 * atomic; the pointer table is split into stripes, each under its own
 * mutex (never held across a driver call, never taken in a signal
 * handler), so frees of different pointers rarely contend.
 *
 * Scope: the allocation.  With the allocation's memory page
 * (gs_mempage.h, gs_memq_share) every process's ledger also reserves
 * against the one counter all its processes share, so that together
 * they never hold more than the limit; the process's own counter and
 * page figure go up before the shared counter and come down after it,
 * so the agent can take a dead process's share out of the counter.
 * Without it (an agent that sends no memory page) each process is held
 * to the limit on its own.
 */
#ifndef GS_MEMQ_H
#define GS_MEMQ_H

#include <stdint.h>

#include "gs_ctlpage.h"
#include "gs_error.h"
#include "gs_mempage.h"

struct gs_memq;

/* A ledger for limit bytes (0: no limit, counting only).  page, when not
 * NULL, receives mem_used and mem_peak after every change (the caller
 * keeps it mapped while the ledger lives).  GS_ENOMEM. */
int gs_memq_new(uint64_t limit, volatile struct gs_ctlpage *page,
		struct gs_memq **out, struct gs_error *err);
/* Reserve against the allocation's shared counter m too (mapped while
 * the ledger lives), from now on: call it before the first reservation.
 * The ledger's limit bounds the counter. */
void gs_memq_share(struct gs_memq *q, volatile struct gs_mempage *m);
/* Frees the table; the page is not touched.  NULL: no-op. */
void gs_memq_free(struct gs_memq *q);

/* Take bytes from the limit: 0, or -1 when used + bytes would exceed it
 * (nothing taken).  bytes 0 always succeeds. */
int gs_memq_reserve(struct gs_memq *q, uint64_t bytes);
/* Take bytes whatever the limit (memory the driver already holds for
 * the process, such as a stream-ordered pool's growth): used may then
 * pass the limit, and the caller gives back or frees to return under it. */
void gs_memq_force(struct gs_memq *q, uint64_t bytes);
/* Give back a reservation whose allocation failed. */
void gs_memq_unreserve(struct gs_memq *q, uint64_t bytes);
/* Remember that ptr holds bytes (already reserved).  -1 when the table
 * cannot grow (out of host memory) or ptr is already known (a driver that
 * handed out the same address twice: the caller treats it as a failed
 * allocation). */
int gs_memq_track(struct gs_memq *q, uint64_t ptr, uint64_t bytes);
/* Forget ptr and give its bytes back; returns them (0: not known). */
uint64_t gs_memq_untrack(struct gs_memq *q, uint64_t ptr);

/* What this process holds. */
uint64_t gs_memq_used(const struct gs_memq *q);
/* What the allocation holds: the shared counter, or gs_memq_used
 * without one. */
uint64_t gs_memq_alloc_used(const struct gs_memq *q);
/* 1 when the allocation holds more than the limit (gs_memq_force). */
int gs_memq_over(const struct gs_memq *q);
uint64_t gs_memq_peak(const struct gs_memq *q);
uint64_t gs_memq_limit(const struct gs_memq *q);
/* Number of pointers tracked. */
uint64_t gs_memq_count(struct gs_memq *q);

/* The allocation's view of device memory (cuMemGetInfo, NVML's memory
 * queries) from the device's own figures: total = the limit (the device's
 * total when there is none or it is larger), free = what is left of the
 * limit, never more than the device has free. */
void gs_memq_view(const struct gs_memq *q, uint64_t dev_free,
		  uint64_t dev_total, uint64_t *free_out,
		  uint64_t *total_out);

#endif /* GS_MEMQ_H */
