/*
 * connlimit.h — who may open one more connection to the agent.
 *
 * max_clients bounds all connections; the last root_reserved_clients of
 * them are root's (the plugins, gsharectl as root), so that no other
 * user can lock root out; and each other uid holds at most
 * max_clients_per_uid, so that no user locks out another.  The counts
 * live in a table of uid -> open connections (sorted array, binary
 * search: lookups at every accept and close, one entry per uid that has
 * a connection open).  Single-threaded, no I/O.
 */
#ifndef GS_AGENT_CONNLIMIT_H
#define GS_AGENT_CONNLIMIT_H

#include <stddef.h>
#include <sys/types.h>

struct gs_connlimit;

struct gs_connlimit *gs_connlimit_new(void);
void gs_connlimit_free(struct gs_connlimit *cl);

/* Decide about one more connection of uid under the given limits.
 * Returns 0 (counted: call gs_connlimit_del when it closes), or -1 with
 * why (a sentence for the refused peer and the log) filled: a limit, or
 * out of memory. */
int gs_connlimit_add(struct gs_connlimit *cl, uid_t uid,
		     unsigned max_clients, unsigned root_reserved,
		     unsigned per_uid, char *why, size_t whylen);
void gs_connlimit_del(struct gs_connlimit *cl, uid_t uid);
/* Open connections: of uid, and in all. */
unsigned gs_connlimit_count(const struct gs_connlimit *cl, uid_t uid);
unsigned gs_connlimit_total(const struct gs_connlimit *cl);

#endif /* GS_AGENT_CONNLIMIT_H */
