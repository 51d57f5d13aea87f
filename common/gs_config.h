/*
 * gs_config.h — table-driven configuration shared by every component.
 *
 * A component describes its settings once, as a table of struct gs_cfg_key
 * (name, type, where the value lives in the component's own struct,
 * bounds, default, one line of help).  The same table then serves:
 *   - defaults        gs_cfg_defaults   (the only place defaults live)
 *   - one value       gs_cfg_set        ("where: key: message" errors)
 *   - key=value args  gs_cfg_parse_args (SPANK plugstack.conf options,
 *                                        device plugin flags)
 *   - YAML mappings   gs_cfg_apply_yaml (the agent's gshare.yaml)
 *   - printing        gs_cfg_print      (normalized config, `-n`)
 * Printed output parses back to the same struct (print→parse round trip).
 *
 * Value types and how they are stored in the object:
 *   GS_CFG_STRING    char[size]; min = minimum length (1: non-empty);
 *                    longer than size-1 is an error
 *   GS_CFG_UINT      uint32_t (size 4) or uint64_t (size 8), decimal,
 *                    min..max inclusive (max 0: the type's maximum)
 *   GS_CFG_BOOL      int, 0/1; accepts true/false yes/no on/off 1/0
 *   GS_CFG_DURATION  uint64_t nanoseconds; a number and a unit
 *                    (ns us ms s m h), e.g. "4ms", "1.5s"; "0" is 0;
 *                    min..max in ns (max 0: no bound); printed in the
 *                    largest unit that divides it exactly
 *   GS_CFG_ENUM      uint32_t index into the key's NULL-terminated names
 *   GS_CFG_SIZE      uint64_t bytes; a whole number with an optional
 *                    binary unit K M G T (powers of 1024, "B" after it
 *                    optional: "20G", "512MiB", "1048576"); min..max in
 *                    bytes (max 0: no bound); printed in the largest unit
 *                    that divides it exactly
 * Unknown keys are always errors.  The functions never print (except
 * gs_cfg_print to the FILE given) and never exit; they are reentrant.
 *
 * The YAML half (gs_yaml_*, gs_cfg_apply_yaml) lives in its own object
 * and is the only code that needs libyaml (-lyaml); the rest is plain libc.
 */
#ifndef GS_CONFIG_H
#define GS_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gs_error.h"

enum gs_cfg_type {
	GS_CFG_STRING = 1,
	GS_CFG_UINT = 2,
	GS_CFG_BOOL = 3,
	GS_CFG_DURATION = 4,
	GS_CFG_ENUM = 5,
	GS_CFG_SIZE = 6,
};

struct gs_cfg_key {
	const char *name;	/* NULL ends the table */
	int type;		/* enum gs_cfg_type */
	size_t offset;		/* offsetof(struct, field) */
	size_t size;		/* sizeof the field */
	uint64_t min, max;	/* see the type list above */
	const char *const *names;	/* GS_CFG_ENUM: NULL-terminated */
	const char *def;	/* default in text form; NULL: zero / "" */
	const char *help;	/* one line, for docs and --help */
};

/* Table entry constructors: T is the struct type, F the field. */
#define GS_CFG_SIZEOF(T, F) sizeof(((T *)0)->F)
#define GS_CFG_KEY_STRING(N, T, F, MINLEN, DEF, HELP)                        \
	{ N, GS_CFG_STRING, offsetof(T, F), GS_CFG_SIZEOF(T, F), MINLEN, 0,  \
	  NULL, DEF, HELP }
#define GS_CFG_KEY_UINT(N, T, F, MIN, MAX, DEF, HELP)                        \
	{ N, GS_CFG_UINT, offsetof(T, F), GS_CFG_SIZEOF(T, F), MIN, MAX,     \
	  NULL, DEF, HELP }
#define GS_CFG_KEY_BOOL(N, T, F, DEF, HELP)                                  \
	{ N, GS_CFG_BOOL, offsetof(T, F), GS_CFG_SIZEOF(T, F), 0, 1, NULL,   \
	  DEF, HELP }
#define GS_CFG_KEY_DURATION(N, T, F, MIN, MAX, DEF, HELP)                    \
	{ N, GS_CFG_DURATION, offsetof(T, F), GS_CFG_SIZEOF(T, F), MIN, MAX, \
	  NULL, DEF, HELP }
#define GS_CFG_KEY_ENUM(N, T, F, NAMES, DEF, HELP)                           \
	{ N, GS_CFG_ENUM, offsetof(T, F), GS_CFG_SIZEOF(T, F), 0, 0, NAMES,  \
	  DEF, HELP }
#define GS_CFG_KEY_SIZE(N, T, F, MIN, MAX, DEF, HELP)                        \
	{ N, GS_CFG_SIZE, offsetof(T, F), GS_CFG_SIZEOF(T, F), MIN, MAX,     \
	  NULL, DEF, HELP }
#define GS_CFG_KEY_END { NULL, 0, 0, 0, 0, 0, NULL, NULL, NULL }

#define GS_NS_PER_US 1000ull
#define GS_NS_PER_MS 1000000ull
#define GS_NS_PER_S  1000000000ull

/* The key named `name`, or NULL. */
const struct gs_cfg_key *gs_cfg_find(const struct gs_cfg_key *table,
				     const char *name);

/* Set every key of the table to its default.  Fails (GS_EINVAL) only when
 * a table's default does not parse, i.e. on a programming error. */
int gs_cfg_defaults(const struct gs_cfg_key *table, void *obj,
		    struct gs_error *err);

/* Parse `value` for `key` and store it in obj.  On error (GS_ECONFIG)
 * err->msg is "where: key: message" ("key: message" when where is NULL)
 * and obj is unchanged.  Unknown keys are errors. */
int gs_cfg_set(const struct gs_cfg_key *table, void *obj, const char *key,
	       const char *value, const char *where, struct gs_error *err);
/* Same, for a key already looked up. */
int gs_cfg_set_key(const struct gs_cfg_key *k, void *obj, const char *value,
		   const char *where, struct gs_error *err);

/* Apply argv[0..argc-1], each "key=value" (SPANK plugstack arguments).
 * Stops at the first bad argument: GS_ECONFIG, "argument N: key: message"
 * (N counts from 1), or "argument N: 'text': expected key=value".  Does
 * not apply defaults: call gs_cfg_defaults first. */
int gs_cfg_parse_args(const struct gs_cfg_key *table, void *obj, int argc,
		      char *const argv[], struct gs_error *err);

/* Text form of one key's current value (what gs_cfg_set accepts back).
 * Returns the length it needed (like snprintf) or -1 on a bad table. */
int gs_cfg_format(const struct gs_cfg_key *k, const void *obj, char *buf,
		  size_t len);

enum gs_cfg_style {
	GS_CFG_YAML = 0,	/* "key: value", strings quoted when needed */
	GS_CFG_ARGS = 1,	/* "key=value" */
};
/* Print every key of the table in table order, one per line, each line
 * prefixed with `indent` (may be NULL).  Returns 0 or -1 on write error. */
int gs_cfg_print(const struct gs_cfg_key *table, const void *obj, int style,
		 const char *indent, FILE *f);

/* Leaf parsers, also usable alone.  0 or -1 (nothing written on -1). */
int gs_cfg_parse_uint(const char *s, uint64_t *out);
int gs_cfg_parse_bool(const char *s, int *out);
int gs_cfg_parse_duration(const char *s, uint64_t *ns);
/* "4ms", "0", "1500us" ...; returns like snprintf. */
int gs_cfg_format_duration(uint64_t ns, char *buf, size_t len);
/* Byte sizes: "<digits>[K|M|G|T][i][B]" (units are powers of 1024, case
 * does not matter; "0" is 0).  Overflow is an error.  format writes the
 * largest unit that divides the value exactly ("20G", "1536M", "0"). */
int gs_cfg_parse_size(const char *s, uint64_t *bytes);
int gs_cfg_format_size(uint64_t bytes, char *buf, size_t len);

/*
 * YAML documents (libyaml).  A file loads into a small tree that keeps
 * line numbers, so that callers report "file:line: key: message".
 * Anchors, aliases, tags and multi-document streams are refused.
 */
enum gs_ynode_kind { GS_YNODE_SCALAR = 1, GS_YNODE_MAP = 2, GS_YNODE_SEQ = 3 };

struct gs_ynode {
	int kind;		/* enum gs_ynode_kind */
	int line;		/* 1-based line of the node */
	char *value;		/* GS_YNODE_SCALAR: the text */
	char *key;		/* mapping value: its key, else NULL */
	int key_line;		/* line of the key */
	struct gs_ynode *child;	/* first entry of a map / item of a seq */
	struct gs_ynode *next;	/* next sibling */
};

/* Load `path`; an empty file (nothing but blanks and comments) gives an
 * empty mapping whose line is 0 (an explicit `{}` has line 1 or more).  GS_ECONFIG with
 * "path:line: message" on syntax errors, GS_EIO when unreadable. */
int gs_yaml_load_file(const char *path, struct gs_ynode **root,
		      struct gs_error *err);
/* Same from memory; name is used in messages. */
int gs_yaml_load_string(const char *text, size_t len, const char *name,
			struct gs_ynode **root, struct gs_error *err);
void gs_ynode_free(struct gs_ynode *n);
/* Child of a mapping by key (borrowed), or NULL. */
const struct gs_ynode *gs_ynode_get(const struct gs_ynode *map,
				    const char *key);

/* Called for mapping entries whose key is not in the table; return 0 when
 * handled, -1 with err filled otherwise. */
typedef int (*gs_cfg_other_fn)(void *ctx, const struct gs_ynode *entry,
			       const char *file, struct gs_error *err);

/* Apply a mapping's scalar entries through the table ("file:line" as
 * where).  Entries not in the table go to `other`; with other == NULL
 * they are errors ("file:line: key: unknown key").  Non-scalar values
 * for table keys, duplicate keys and non-mapping input are errors. */
int gs_cfg_apply_yaml(const struct gs_cfg_key *table, void *obj,
		      const struct gs_ynode *map, const char *file,
		      gs_cfg_other_fn other, void *ctx, struct gs_error *err);

#endif /* GS_CONFIG_H */
