/*
 * state.h — the agent's allocation table on disk, so that a restarted
 * gshared gets its allocations back with the same ids.
 *
 * The agent writes the whole table after every change that a restart
 * must see (create, close, weight/priority, labels) into one of two slot
 * files, <state_dir>/allocs.0 and allocs.1, in turn: in place, then
 * fdatasync.  Each write carries a generation number (seq); the slot it
 * does not write keeps the previous generation, so a crash in the middle
 * of a write leaves one whole table, and a load takes the valid slot of
 * the highest generation.  (A replace by rename costs about 1 ms on ext4,
 * 20 times this: the old inode is freed in the journal.)  Token state, attachments and
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

#define GS_STATE_VERSION	2	/* writes 2, reads 1 and 2 */
#define GS_STATE_FILE		"allocs"
#define GS_STATE_MAX_BYTES	(16u << 20)	/* refuse larger files */

struct gs_state_alloc {
	uint64_t id;
	int32_t gpu;			/* GPU index */
	char gpu_uuid[GS_UUID_MAX];	/* the GPU it was placed on */
	uint32_t shares, weight, priority, mode, uid, flags;
	uint64_t created_unix_ns;
	struct gs_labels labels;
	uint64_t mem_req;		/* memory limit asked for, 0: default */
};

struct gs_state {
	uint64_t seq;		/* generation (version 1 files: 0) */
	int old_file;		/* load: an older agent's file is there;
				 * save: remove it (not in the file) */
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

/* Write st into slot path.<st->seq % 2> (created, with the directory
 * synced, the first time).  The caller gives each save the generation
 * after the last one loaded or saved (the same again after a failed
 * save).  With st->old_file, the version 1 file at path itself (written
 * by older agents) is removed once a slot holds the table. */
int gs_state_save(const char *path, const struct gs_state *st,
		  struct gs_error *err);
/* Read both slots, and path itself when it exists (a version 1 file of an
 * older agent, which then wins: only an agent of this version removes
 * it; st->seq is then the highest generation of the slots, so that the
 * next save goes above them); keep the valid table of the highest
 * generation; st->old_file says whether path itself is there (then pass
 * it on to the next save).  1: loaded (with *skipped, if not NULL, the number of files that were there but
 * invalid: a slot torn by a crash during a save); 0: no file (st empty);
 * -1: files there, none valid (err says why the first one is not). */
int gs_state_load(const char *path, struct gs_state *st, unsigned *skipped,
		  struct gs_error *err);
/* Move every file gs_state_load reads to <name>.bad; the number moved. */
int gs_state_set_aside(const char *path);

#endif /* GS_AGENT_STATE_H */
