/*
 * state.h — the agent's allocation table on disk (<state_dir>/allocs),
 * so that a restarted gshared gets its allocations back with the same ids.
 *
 * The agent rewrites the whole file (write to a temporary, fsync, rename,
 * fsync the directory) after every change that a restart must see:
 * create, close, weight/priority, labels.  Token state, attachments and
 * usage are not in it: jobs re-attach, usage lives in the usage store.
 * The encoding is text, versioned and checksummed (see state.c); decode
 * rejects anything it did not write itself.  Pure functions apart from
 * gs_state_save/gs_state_load; never prints.
 */
#ifndef GS_AGENT_STATE_H
#define GS_AGENT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "gs_error.h"
#include "gs_proto.h"

#define GS_STATE_VERSION	1
#define GS_STATE_FILE		"allocs"
#define GS_STATE_MAX_BYTES	(16u << 20)	/* refuse larger files */

struct gs_state_alloc {
	uint64_t id;
	int32_t gpu;			/* GPU index */
	char gpu_uuid[GS_UUID_MAX];	/* the GPU it was placed on */
	uint32_t shares, weight, priority, mode, uid, flags;
	uint64_t created_unix_ns;
	struct gs_labels labels;
};

struct gs_state {
	uint64_t next_id;	/* the id counter: > every id ever given */
	unsigned n;
	struct gs_state_alloc *v;	/* ids strictly increasing */
};

void gs_state_clear(struct gs_state *st);
/* Append a copy; -1 with GS_ENOMEM. */
int gs_state_add(struct gs_state *st, const struct gs_state_alloc *a,
		 struct gs_error *err);

/* *out is malloc'ed (caller frees), *len its length. */
int gs_state_encode(const struct gs_state *st, char **out, size_t *len,
		    struct gs_error *err);
/* Parse buf into st (cleared first).  GS_EVERSION for a file of another
 * format version, GS_EPROTO for anything malformed (the message says
 * which line and why).  On error st is left empty. */
int gs_state_decode(const char *buf, size_t len, struct gs_state *st,
		    struct gs_error *err);

/* Atomic replace of path. */
int gs_state_save(const char *path, const struct gs_state *st,
		  struct gs_error *err);
/* 1: loaded; 0: no file (st empty); -1: unreadable or invalid. */
int gs_state_load(const char *path, struct gs_state *st,
		  struct gs_error *err);

#endif /* GS_AGENT_STATE_H */
