/*
 * gs_mempage.h — the per-allocation memory page: one counter of the
 * device memory all processes attached to an allocation hold together.
 *
 * The agent creates one per allocation (memfd, GS_MEM_SIZE bytes, sealed
 * against resizing) at its first ATTACH and passes it with every ATTACHED
 * reply, in the same SCM_RIGHTS message as the control page, before it
 * (docs/protocol.md).  Every attached process maps it MAP_SHARED; the
 * device memory ledger (runtime/src/gs_memq.c) reserves against `used`
 * with a compare-and-swap bounded by the limit, so that the processes
 * together never hold more than the allocation's limit.
 *
 * Ownership of fields:
 *   header   agent, once, before the fd is passed
 *   used     every attached process (compare-and-swap add / subtract);
 *            the agent subtracts a process's own figure (its control
 *            page's mem_used) once that process has gone
 * A process adds to its page's mem_used *before* adding to `used`, and
 * subtracts from `used` *before* its page's mem_used, so that its page
 * never shows less than it put in `used`: what the agent takes out for a
 * dead process is then never too little (at most the allocations its
 * threads had in flight at the kill too much; `used` never goes below 0).
 */
#ifndef GS_MEMPAGE_H
#define GS_MEMPAGE_H

#include <stddef.h>
#include <stdint.h>

#define GS_MEM_MAGIC	0x4d454d47u	/* "GMEM" in little-endian bytes */
#define GS_MEM_VERSION	1u
#define GS_MEM_SIZE	4096u

struct gs_mempage {
	uint32_t magic;			/* GS_MEM_MAGIC */
	uint32_t version;		/* GS_MEM_VERSION */
	uint64_t alloc_id;		/* allocation this page belongs to */
	uint64_t limit;			/* the allocation's limit, bytes (as
					 * the control pages' mem_limit), 0:
					 * no limit */
	uint64_t used;			/* held by all its processes, bytes */
	uint8_t _rsv[GS_MEM_SIZE - 32];
};

_Static_assert(sizeof(struct gs_mempage) == GS_MEM_SIZE,
	       "memory page must be exactly one page");
_Static_assert(offsetof(struct gs_mempage, used) == 24, "used moved");

#endif /* GS_MEMPAGE_H */
