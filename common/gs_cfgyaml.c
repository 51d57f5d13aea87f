/*
 * gs_cfgyaml.c — the YAML half of gs_config.h: load a document with
 * libyaml's event parser into a small tree that keeps line numbers, and
 * apply mappings through a key table.
 *
 * Only what configuration needs: one document of mappings, sequences and
 * scalars.  Anchors, aliases and explicit tags are refused, so the tree
 * is always a tree and its size is bounded by the input size.  Nesting is
 * limited to GS_YAML_MAX_DEPTH levels.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "gs_config.h"

#define GS_YAML_MAX_DEPTH 32

void gs_ynode_free(struct gs_ynode *n)
{
	while (n != NULL) {
		struct gs_ynode *next = n->next;

		gs_ynode_free(n->child);
		free(n->value);
		free(n->key);
		free(n);
		n = next;
	}
}

const struct gs_ynode *gs_ynode_get(const struct gs_ynode *map,
				    const char *key)
{
	const struct gs_ynode *c;

	if (map == NULL || map->kind != GS_YNODE_MAP)
		return NULL;
	for (c = map->child; c != NULL; c = c->next)
		if (c->key != NULL && strcmp(c->key, key) == 0)
			return c;
	return NULL;
}

struct yparse {
	yaml_parser_t parser;
	const char *name;
	struct gs_error *err;
};

static int ynext(struct yparse *y, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&y->parser, ev)) {
		const char *what = y->parser.problem ? y->parser.problem
						     : "syntax error";

		return gs_error_set(y->err, GS_ECONFIG, "%s:%zu: %s", y->name,
				    y->parser.problem_mark.line + 1, what);
	}
	return 0;
}

static struct gs_ynode *ynode_new(int kind, const yaml_event_t *ev)
{
	struct gs_ynode *n = calloc(1, sizeof(*n));

	if (n == NULL)
		return NULL;
	n->kind = kind;
	n->line = (int)ev->start_mark.line + 1;
	return n;
}

/* Anchors and explicit tags, on any node or key: refused.  -1 with err
 * filled when ev carries one. */
static int yrefuse_props(struct yparse *y, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	default:
		return 0;
	}
	if (anchor != NULL)
		return gs_error_set(y->err, GS_ECONFIG,
				    "%s:%zu: anchors are not supported",
				    y->name, ev->start_mark.line + 1);
	if (tag != NULL)
		return gs_error_set(y->err, GS_ECONFIG,
				    "%s:%zu: tags are not supported (%s)",
				    y->name, ev->start_mark.line + 1,
				    (const char *)tag);
	return 0;
}

/* Parse the node whose first event is *ev (consumed by the caller's
 * yaml_event_delete).  Returns the new node or NULL with err filled. */
static struct gs_ynode *yparse_node(struct yparse *y, yaml_event_t *ev,
				    int depth)
{
	struct gs_ynode *n = NULL, **tail;
	yaml_event_t cev;
	int end, kind;

	if (depth > GS_YAML_MAX_DEPTH) {
		gs_error_set(y->err, GS_ECONFIG, "%s:%zu: nested too deeply",
			     y->name, ev->start_mark.line + 1);
		return NULL;
	}
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		gs_error_set(y->err, GS_ECONFIG,
			     "%s:%zu: aliases are not supported", y->name,
			     ev->start_mark.line + 1);
		return NULL;
	case YAML_SCALAR_EVENT:
		if (yrefuse_props(y, ev) < 0)
			return NULL;
		n = ynode_new(GS_YNODE_SCALAR, ev);
		if (n == NULL)
			goto out_nomem;
		n->value = strndup((const char *)ev->data.scalar.value,
				   ev->data.scalar.length);
		if (n->value == NULL)
			goto out_nomem;
		if (strlen(n->value) != ev->data.scalar.length) {
			gs_error_set(y->err, GS_ECONFIG,
				     "%s:%d: NUL byte in a value", y->name,
				     n->line);
			goto out_free;
		}
		return n;
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		if (yrefuse_props(y, ev) < 0)
			return NULL;
		break;
	default:
		gs_error_set(y->err, GS_ECONFIG, "%s:%zu: unexpected YAML "
			     "event", y->name, ev->start_mark.line + 1);
		return NULL;
	}

	kind = ev->type == YAML_MAPPING_START_EVENT ? GS_YNODE_MAP
						    : GS_YNODE_SEQ;
	end = kind == GS_YNODE_MAP ? YAML_MAPPING_END_EVENT
				   : YAML_SEQUENCE_END_EVENT;
	n = ynode_new(kind, ev);
	if (n == NULL)
		goto out_nomem;
	tail = &n->child;
	for (;;) {
		struct gs_ynode *c;
		char *key = NULL;
		int key_line = 0;

		if (ynext(y, &cev) < 0)
			goto out_free;
		if ((int)cev.type == end) {
			yaml_event_delete(&cev);
			break;
		}
		if (kind == GS_YNODE_MAP) {
			const struct gs_ynode *dup;

			if (cev.type != YAML_SCALAR_EVENT) {
				gs_error_set(y->err, GS_ECONFIG,
					     "%s:%zu: mapping keys must be "
					     "plain scalars", y->name,
					     cev.start_mark.line + 1);
				yaml_event_delete(&cev);
				goto out_free;
			}
			if (yrefuse_props(y, &cev) < 0) {
				yaml_event_delete(&cev);
				goto out_free;
			}
			key = strndup((const char *)cev.data.scalar.value,
				      cev.data.scalar.length);
			key_line = (int)cev.start_mark.line + 1;
			yaml_event_delete(&cev);
			if (key == NULL)
				goto out_nomem;
			dup = gs_ynode_get(n, key);
			if (dup != NULL) {
				gs_error_set(y->err, GS_ECONFIG,
					     "%s:%d: %s: duplicate key (first "
					     "at line %d)", y->name, key_line,
					     key, dup->key_line);
				free(key);
				goto out_free;
			}
			if (ynext(y, &cev) < 0) {
				free(key);
				goto out_free;
			}
		}
		c = yparse_node(y, &cev, depth + 1);
		yaml_event_delete(&cev);
		if (c == NULL) {
			free(key);
			goto out_free;
		}
		c->key = key;
		c->key_line = key_line;
		*tail = c;
		tail = &c->next;
	}
	return n;

out_nomem:
	gs_error_set(y->err, GS_ENOMEM, "%s: out of memory", y->name);
out_free:
	gs_ynode_free(n);
	return NULL;
}

static int yparse_stream(struct yparse *y, struct gs_ynode **root)
{
	struct gs_ynode *doc = NULL;
	yaml_event_t ev;
	int rv = -1;

	/* STREAM-START */
	if (ynext(y, &ev) < 0)
		return -1;
	yaml_event_delete(&ev);
	if (ynext(y, &ev) < 0)
		return -1;
	if (ev.type == YAML_STREAM_END_EVENT) {
		/* empty file (or only comments): an empty mapping with line
		 * 0, so that callers can tell it from `{}` */
		doc = calloc(1, sizeof(*doc));
		yaml_event_delete(&ev);
		if (doc == NULL)
			return gs_error_set(y->err, GS_ENOMEM,
					    "out of memory");
		doc->kind = GS_YNODE_MAP;
		doc->line = 0;
		*root = doc;
		return 0;
	}
	yaml_event_delete(&ev); /* DOCUMENT-START */
	if (ynext(y, &ev) < 0)
		return -1;
	doc = yparse_node(y, &ev, 0);
	yaml_event_delete(&ev);
	if (doc == NULL)
		return -1;
	if (ynext(y, &ev) < 0) /* DOCUMENT-END */
		goto out_free;
	yaml_event_delete(&ev);
	if (ynext(y, &ev) < 0)
		goto out_free;
	if (ev.type != YAML_STREAM_END_EVENT) {
		gs_error_set(y->err, GS_ECONFIG,
			     "%s:%zu: only one YAML document is allowed",
			     y->name, ev.start_mark.line + 1);
		yaml_event_delete(&ev);
		goto out_free;
	}
	yaml_event_delete(&ev);
	*root = doc;
	return 0;

out_free:
	gs_ynode_free(doc);
	return rv;
}

int gs_yaml_load_string(const char *text, size_t len, const char *name,
			struct gs_ynode **root, struct gs_error *err)
{
	struct yparse y;
	int rv;

	memset(&y, 0, sizeof(y));
	y.name = name ? name : "(string)";
	y.err = err;
	if (!yaml_parser_initialize(&y.parser))
		return gs_error_set(err, GS_ENOMEM, "%s: out of memory",
				    y.name);
	yaml_parser_set_input_string(&y.parser, (const unsigned char *)text,
				     len);
	rv = yparse_stream(&y, root);
	yaml_parser_delete(&y.parser);
	return rv;
}

int gs_yaml_load_file(const char *path, struct gs_ynode **root,
		      struct gs_error *err)
{
	struct yparse y;
	FILE *f;
	int rv;

	f = fopen(path, "re");
	if (f == NULL)
		return gs_error_errno(err, GS_EIO, "%s", path);
	memset(&y, 0, sizeof(y));
	y.name = path;
	y.err = err;
	if (!yaml_parser_initialize(&y.parser)) {
		fclose(f);
		return gs_error_set(err, GS_ENOMEM, "%s: out of memory", path);
	}
	yaml_parser_set_input_file(&y.parser, f);
	rv = yparse_stream(&y, root);
	yaml_parser_delete(&y.parser);
	fclose(f);
	return rv;
}

int gs_cfg_apply_yaml(const struct gs_cfg_key *table, void *obj,
		      const struct gs_ynode *map, const char *file,
		      gs_cfg_other_fn other, void *ctx, struct gs_error *err)
{
	const struct gs_ynode *c;
	const struct gs_cfg_key *k;
	char where[512];

	if (file == NULL)
		file = "(config)";
	if (map == NULL || map->kind != GS_YNODE_MAP)
		return gs_error_set(err, GS_ECONFIG,
				    "%s:%d: expected a mapping", file,
				    map ? map->line : 1);
	for (c = map->child; c != NULL; c = c->next) {
		snprintf(where, sizeof(where), "%s:%d", file, c->key_line);
		k = gs_cfg_find(table, c->key);
		if (k == NULL) {
			if (other != NULL) {
				if (other(ctx, c, file, err) < 0)
					return -1;
				continue;
			}
			return gs_error_set(err, GS_ECONFIG,
					    "%s: %s: unknown key", where,
					    c->key);
		}
		if (c->kind != GS_YNODE_SCALAR)
			return gs_error_set(err, GS_ECONFIG,
					    "%s: %s: expected a single value",
					    where, c->key);
		if (gs_cfg_set_key(k, obj, c->value, where, err) < 0)
			return -1;
	}
	return 0;
}
