/*
 * state.c — the allocation table file (see state.h).
 *
 * Why a file of its own rather than the usage store's open rows: the
 * store is written by a background thread once per accounting tick, so an
 * allocation created or closed just before a crash may not be there yet,
 * and it does not hold everything an allocation is (flags, the id
 * counter); it may also live elsewhere or be replaced by an operator.
 * This file is written (by the agent's writer thread, durable.c) before
 * the plugin gets its reply, and a request whose write fails is refused
 * with nothing changed, so whatever a plugin was told exists survives a
 * kill -9 of the agent.  The
 * usage rows are matched to it by allocation id when the agent restarts.
 *
 * Format (text, one record per line, every line ends with '\n'):
 *   gshare-allocs 2
 *   seq 41                                  (version 2 only)
 *   next_id 8
 *   alloc id=3 gpu=0 uuid=GPU-x shares=10 weight=1 priority=1 mode=0
 *         uid=0 flags=0 created=NS cluster= job=42 step=0 node= ns= pod=
 *         container= user= account= [mem=BYTES]   (one line)
 *   end allocs=1 crc32=1a2b3c4d
 * mem= (the device memory limit the job asked for) is written only when
 * one was asked for, so that files without explicit limits stay as an
 * agent before memory limits reads them.
 * Keys appear in exactly this order.  Values are printable ASCII; a byte
 * outside '!'..'~', or '%', '=' is written %XX.  crc32 (IEEE) covers every
 * byte before the "end" line.  Numbers are decimal without sign (gpu may
 * not be negative either).  Nothing may follow the end line.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"

#define MAGIC "gshare-allocs"

void gs_state_clear(struct gs_state *st)
{
	free(st->v);
	memset(st, 0, sizeof(*st));
}

int gs_state_add(struct gs_state *st, const struct gs_state_alloc *a,
		 struct gs_error *err)
{
	struct gs_state_alloc *nv;

	nv = realloc(st->v, (st->n + 1) * sizeof(*nv));
	if (nv == NULL)
		return gs_error_set(err, GS_ENOMEM, "state: out of memory");
	st->v = nv;
	st->v[st->n++] = *a;
	return 0;
}

static uint32_t crc32_ieee(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = 0xffffffffu;
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		c ^= b[i];
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

/* ---- encode ---- */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *np;

		while (b->len + n + 1 > cap)
			cap *= 2;
		np = realloc(b->p, cap);
		if (np == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_printf(struct sbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->oom = 1;	/* cannot happen with our formats */
		return;
	}
	sb_put(b, tmp, (size_t)n);
}

static void sb_str(struct sbuf *b, const char *key, const char *v)
{
	char esc[4];

	sb_printf(b, " %s=", key);
	for (; *v != '\0'; v++) {
		unsigned char ch = (unsigned char)*v;

		if (ch < '!' || ch > '~' || ch == '%' || ch == '=') {
			snprintf(esc, sizeof(esc), "%%%02X", ch);
			sb_put(b, esc, 3);
		} else {
			sb_put(b, v, 1);
		}
	}
}

int gs_state_encode(const struct gs_state *st, char **out, size_t *len,
		    struct gs_error *err)
{
	struct sbuf b = { NULL, 0, 0, 0 };
	unsigned i;

	sb_printf(&b, MAGIC " %d\nseq %" PRIu64 "\nnext_id %" PRIu64 "\n",
		  GS_STATE_VERSION, st->seq, st->next_id);
	for (i = 0; i < st->n; i++) {
		const struct gs_state_alloc *a = &st->v[i];
		const struct gs_labels *l = &a->labels;

		sb_printf(&b, "alloc id=%" PRIu64 " gpu=%" PRId32, a->id,
			  a->gpu);
		sb_str(&b, "uuid", a->gpu_uuid);
		sb_printf(&b, " shares=%u weight=%u priority=%u mode=%u "
			  "uid=%u flags=%u created=%" PRIu64, a->shares,
			  a->weight, a->priority, a->mode, a->uid, a->flags,
			  a->created_unix_ns);
		sb_str(&b, "cluster", l->cluster);
		sb_str(&b, "job", l->job);
		sb_str(&b, "step", l->step);
		sb_str(&b, "node", l->node);
		sb_str(&b, "ns", l->ns);
		sb_str(&b, "pod", l->pod);
		sb_str(&b, "container", l->container);
		sb_str(&b, "user", l->user);
		sb_str(&b, "account", l->account);
		if (a->mem_req != 0)
			sb_printf(&b, " mem=%" PRIu64, a->mem_req);
		sb_put(&b, "\n", 1);
	}
	if (!b.oom)
		sb_printf(&b, "end allocs=%u crc32=%08x\n", st->n,
			  crc32_ieee(b.p, b.len));
	if (b.oom) {
		free(b.p);
		return gs_error_set(err, GS_ENOMEM, "state: out of memory");
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

/* ---- decode ---- */

struct rd {
	const char *p, *end;	/* current line: [p, end) without '\n' */
	unsigned line;
	struct gs_error *err;
};

static int bad(struct rd *r, const char *why, const char *key)
{
	return gs_error_set(r->err, GS_EPROTO, "state file line %u: %s%s%s",
			    r->line, why, key ? " " : "", key ? key : "");
}

/* Expect the literal s at r->p. */
static int lit(struct rd *r, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0)
		return bad(r, "expected", s);
	r->p += n;
	return 0;
}

static int num(struct rd *r, const char *key, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = r->p;

	if (s == r->end || *s < '0' || *s > '9')
		return bad(r, "not a number:", key);
	if (*s == '0' && s + 1 < r->end && s[1] >= '0' && s[1] <= '9')
		return bad(r, "leading zero:", key);
	for (; s < r->end && *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (max - d) / 10)
			return bad(r, "number out of range:", key);
		v = v * 10 + d;
	}
	r->p = s;
	*out = v;
	return 0;
}

/* " key=NUMBER" */
static int kv_num(struct rd *r, const char *key, uint64_t max,
		  uint64_t *out)
{
	if (lit(r, " ") < 0 || lit(r, key) < 0 || lit(r, "=") < 0)
		return -1;
	return num(r, key, max, out);
}

static int kv_u32(struct rd *r, const char *key, uint32_t *out)
{
	uint64_t v;

	if (kv_num(r, key, UINT32_MAX, &v) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* " key=ESCAPED" into out[cap] (NUL-terminated, must fit). */
static int kv_str(struct rd *r, const char *key, char *out, size_t cap)
{
	size_t n = 0;

	if (lit(r, " ") < 0 || lit(r, key) < 0 || lit(r, "=") < 0)
		return -1;
	while (r->p < r->end && *r->p != ' ') {
		unsigned char ch = (unsigned char)*r->p;

		if (ch == '%') {
			int h, l;

			if (r->end - r->p < 3 ||
			    (h = hexval(r->p[1])) < 0 ||
			    (l = hexval(r->p[2])) < 0)
				return bad(r, "bad escape in", key);
			ch = (unsigned char)(h * 16 + l);
			if (ch == 0)
				return bad(r, "NUL byte in", key);
			r->p += 3;
		} else if (ch < '!' || ch > '~' || ch == '=') {
			return bad(r, "bad byte in", key);
		} else {
			r->p++;
		}
		if (n + 1 >= cap)
			return bad(r, "value too long:", key);
		out[n++] = (char)ch;
	}
	out[n] = '\0';
	return 0;
}

static int at_eol(struct rd *r)
{
	return r->p == r->end ? 0 : bad(r, "trailing bytes", NULL);
}

static int decode_alloc(struct rd *r, struct gs_state_alloc *a)
{
	struct gs_labels *l = &a->labels;
	uint64_t v;

	memset(a, 0, sizeof(*a));
	if (lit(r, "alloc") < 0 || kv_num(r, "id", UINT64_MAX, &a->id) < 0 ||
	    kv_num(r, "gpu", INT32_MAX, &v) < 0)
		return -1;
	a->gpu = (int32_t)v;
	if (kv_str(r, "uuid", a->gpu_uuid, sizeof(a->gpu_uuid)) < 0 ||
	    kv_u32(r, "shares", &a->shares) < 0 ||
	    kv_u32(r, "weight", &a->weight) < 0 ||
	    kv_u32(r, "priority", &a->priority) < 0 ||
	    kv_u32(r, "mode", &a->mode) < 0 ||
	    kv_u32(r, "uid", &a->uid) < 0 ||
	    kv_u32(r, "flags", &a->flags) < 0 ||
	    kv_num(r, "created", UINT64_MAX, &a->created_unix_ns) < 0 ||
	    kv_str(r, "cluster", l->cluster, sizeof(l->cluster)) < 0 ||
	    kv_str(r, "job", l->job, sizeof(l->job)) < 0 ||
	    kv_str(r, "step", l->step, sizeof(l->step)) < 0 ||
	    kv_str(r, "node", l->node, sizeof(l->node)) < 0 ||
	    kv_str(r, "ns", l->ns, sizeof(l->ns)) < 0 ||
	    kv_str(r, "pod", l->pod, sizeof(l->pod)) < 0 ||
	    kv_str(r, "container", l->container, sizeof(l->container)) < 0 ||
	    kv_str(r, "user", l->user, sizeof(l->user)) < 0 ||
	    kv_str(r, "account", l->account, sizeof(l->account)) < 0)
		return -1;
	if ((size_t)(r->end - r->p) >= 5 && memcmp(r->p, " mem=", 5) == 0 &&
	    kv_num(r, "mem", UINT64_MAX, &a->mem_req) < 0)
		return -1;
	if (a->id == 0)
		return bad(r, "allocation id 0", NULL);
	return at_eol(r);
}

/* Move r to the next line; -1 when none (no final '\n'). */
static int next_line(struct rd *r, const char **cur, const char *bufend)
{
	const char *nl;

	if (*cur >= bufend)
		return gs_error_set(r->err, GS_EPROTO, "state file: ends "
				    "after line %u without an end line",
				    r->line);
	nl = memchr(*cur, '\n', (size_t)(bufend - *cur));
	if (nl == NULL)
		return gs_error_set(r->err, GS_EPROTO, "state file: line %u "
				    "is cut short", r->line + 1);
	r->p = *cur;
	r->end = nl;
	r->line++;
	*cur = nl + 1;
	return 0;
}

int gs_state_decode(const char *buf, size_t len, struct gs_state *st,
		    struct gs_error *err)
{
	const char *cur = buf, *bufend = buf + len, *line0;
	struct gs_state_alloc a;
	struct rd r;
	uint64_t v, crc, last = 0;

	memset(st, 0, sizeof(*st));
	memset(&r, 0, sizeof(r));
	r.err = err;
	if (len > GS_STATE_MAX_BYTES)
		return gs_error_set(err, GS_EPROTO, "state file: %zu bytes, "
				    "more than %u", len, GS_STATE_MAX_BYTES);
	if (next_line(&r, &cur, bufend) < 0)
		return -1;
	if (lit(&r, MAGIC " ") < 0) {
		gs_error_set(err, GS_EPROTO, "state file: not a gshare "
			     "allocation table (bad first line)");
		return -1;
	}
	if (num(&r, "version", UINT32_MAX, &v) < 0 || at_eol(&r) < 0)
		return -1;
	if (v != 1 && v != GS_STATE_VERSION)
		return gs_error_set(err, GS_EVERSION, "state file: format "
				    "version %" PRIu64 ", this gshared reads "
				    "versions 1 and %d", v, GS_STATE_VERSION);
	if (v >= 2 && (next_line(&r, &cur, bufend) < 0 || lit(&r, "seq ") < 0 ||
		       num(&r, "seq", UINT64_MAX, &st->seq) < 0 ||
		       at_eol(&r) < 0))
		goto fail;
	if (next_line(&r, &cur, bufend) < 0 || lit(&r, "next_id ") < 0 ||
	    num(&r, "next_id", UINT64_MAX, &st->next_id) < 0 ||
	    at_eol(&r) < 0)
		goto fail;
	if (st->next_id == 0) {
		bad(&r, "next_id 0", NULL);
		goto fail;
	}
	for (;;) {
		line0 = cur;
		if (next_line(&r, &cur, bufend) < 0)
			goto fail;
		if (r.end - r.p >= 4 && memcmp(r.p, "end ", 4) == 0)
			break;
		if (decode_alloc(&r, &a) < 0)
			goto fail;
		if (a.id <= last) {
			bad(&r, "allocation ids not increasing", NULL);
			goto fail;
		}
		if (a.id >= st->next_id) {
			bad(&r, "allocation id not below next_id", NULL);
			goto fail;
		}
		last = a.id;
		if (gs_state_add(st, &a, err) < 0)
			goto fail;
	}
	if (lit(&r, "end") < 0 || kv_num(&r, "allocs", UINT32_MAX, &v) < 0)
		goto fail;
	if (v != st->n) {
		gs_error_set(err, GS_EPROTO, "state file: end line counts %"
			     PRIu64 " allocations, the file has %u", v, st->n);
		goto fail;
	}
	if (lit(&r, " crc32=") < 0)
		goto fail;
	crc = 0;
	for (int i = 0; i < 8; i++, r.p++) {
		char c = r.p < r.end ? *r.p : ' ';

		if (c >= '0' && c <= '9')
			crc = crc * 16 + (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			crc = crc * 16 + (uint64_t)(c - 'a' + 10);
		else {
			bad(&r, "bad crc32", NULL);
			goto fail;
		}
	}
	if (at_eol(&r) < 0)
		goto fail;
	if (cur != bufend) {
		gs_error_set(err, GS_EPROTO, "state file: bytes after the "
			     "end line");
		goto fail;
	}
	if (crc != crc32_ieee(buf, (size_t)(line0 - buf))) {
		gs_error_set(err, GS_EPROTO, "state file: checksum mismatch "
			     "(file damaged)");
		goto fail;
	}
	return 0;
fail:
	gs_state_clear(st);
	return -1;
}

/* ---- files ---- */

static int write_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = pwrite(fd, buf + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* fsync the directory of path (makes a create, unlink or rename in it
 * durable) */
static void sync_dir(const char *path)
{
	char dir[512], *slash;
	int dfd;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
}

/* The files of the table at path: 0, 1 the slots (path.0, path.1);
 * OLD_FILE an older agent's single file (path itself). */
#define OLD_FILE	2

static int file_name(char *out, size_t cap, const char *path, unsigned i,
		     struct gs_error *err)
{
	int n = i == OLD_FILE ? snprintf(out, cap, "%s", path) :
				snprintf(out, cap, "%s.%u", path, i);

	if (n < 0 || (size_t)n >= cap)
		return gs_error_set(err, GS_EINVAL, "state file path too "
				    "long: %s", path);
	return 0;
}

int gs_state_save(const char *path, const struct gs_state *st,
		  struct gs_error *err)
{
	char slot[512];
	char *buf = NULL;
	size_t len;
	int fd, created = 0, rv = -1;

	if (file_name(slot, sizeof(slot), path, (unsigned)(st->seq % 2),
		      err) < 0)
		return -1;
	if (gs_state_encode(st, &buf, &len, err) < 0)
		return -1;
	fd = open(slot, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(slot, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		created = 1;
	}
	if (fd < 0) {
		gs_error_errno(err, GS_EIO, "open %s", slot);
		goto out;
	}
	/* A crash anywhere from here to the end of fdatasync leaves this
	 * slot torn (its checksum fails) and the other one whole. */
	if (write_all(fd, buf, len) < 0) {
		gs_error_errno(err, GS_EIO, "write %s", slot);
		goto out_close;
	}
	if (ftruncate(fd, (off_t)len) < 0) {
		gs_error_errno(err, GS_EIO, "truncate %s", slot);
		goto out_close;
	}
	if ((created ? fsync(fd) : fdatasync(fd)) < 0) {
		gs_error_errno(err, GS_EIO, "fsync %s", slot);
		goto out_close;
	}
	if (close(fd) < 0) {
		fd = -1;
		gs_error_errno(err, GS_EIO, "close %s", slot);
		goto out;
	}
	fd = -1;
	/* an older agent's file would win over the slots at the next load:
	 * gone for good before this save counts as done */
	if (st->old_file && unlink(path) == 0)
		created = 1;
	if (created)
		sync_dir(path);
	rv = 0;
out_close:
	/* a failed write may still have left part or all of this table in
	 * the slot (a write cut short, an fdatasync that failed after the
	 * data reached the cache): the caller reports failure and keeps the
	 * previous table, so the slot must not be loadable; best effort,
	 * the checksum catches a torn slot anyway */
	if (rv < 0 && fd >= 0 && ftruncate(fd, 0) == 0)
		(void)fdatasync(fd);
	if (fd >= 0)
		close(fd);
out:
	free(buf);
	return rv;
}

/* Read and decode one file: 1 loaded, 0 absent, -1 invalid. */
static int load_one(const char *path, struct gs_state *st,
		    struct gs_error *err)
{
	struct stat sb;
	char *buf = NULL;
	size_t off = 0, len;
	ssize_t n;
	int fd, rv = -1;

	memset(st, 0, sizeof(*st));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return gs_error_errno(err, GS_EIO, "open %s", path);
	}
	if (fstat(fd, &sb) < 0) {
		gs_error_errno(err, GS_EIO, "fstat %s", path);
		goto out;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_size > (off_t)GS_STATE_MAX_BYTES) {
		gs_error_set(err, GS_EPROTO, "%s: not a regular file of at "
			     "most %u bytes", path, GS_STATE_MAX_BYTES);
		goto out;
	}
	len = (size_t)sb.st_size;
	buf = malloc(len + 1);
	if (buf == NULL) {
		gs_error_set(err, GS_ENOMEM, "state: out of memory");
		goto out;
	}
	while (off < len) {
		n = read(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			gs_error_errno(err, GS_EIO, "read %s", path);
			goto out;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (gs_state_decode(buf, off, st, err) < 0) {
		char msg[GS_ERRMSG_MAX];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		gs_error_set(err, err->code, "%s: %s", path, msg);
		goto out;
	}
	rv = 1;
out:
	free(buf);
	close(fd);
	return rv;
}

int gs_state_load(const char *path, struct gs_state *st, unsigned *skipped,
		  struct gs_error *err)
{
	struct gs_state cand;
	struct gs_error e1, first;
	char name[512];
	uint64_t maxseq = 0;
	unsigned i, nbad = 0;
	int r, found = 0, have = 0, old_file = 0;

	memset(st, 0, sizeof(*st));
	memset(&first, 0, sizeof(first));
	for (i = 0; i <= OLD_FILE; i++) {
		if (file_name(name, sizeof(name), path, i, err) < 0)
			return -1;
		memset(&e1, 0, sizeof(e1));
		r = load_one(name, &cand, &e1);
		if (r == 0)
			continue;
		found = 1;
		if (i == OLD_FILE)
			old_file = 1;
		if (r < 0) {
			if (nbad++ == 0)
				first = e1;
			continue;
		}
		if (i != OLD_FILE && cand.seq > maxseq)
			maxseq = cand.seq;
		if (!have || i == OLD_FILE || cand.seq > st->seq) {
			gs_state_clear(st);
			*st = cand;
			have = 1;
		} else {
			gs_state_clear(&cand);
		}
	}
	/* an older agent's table (generation 0) wins; the next save must
	 * still go above any slot a newer agent left before a downgrade */
	if (have && st->seq < maxseq)
		st->seq = maxseq;
	st->old_file = old_file;
	if (skipped != NULL)
		*skipped = nbad;
	if (have)
		return 1;
	if (!found)
		return 0;
	*err = first;
	return -1;
}

int gs_state_set_aside(const char *path)
{
	char name[512], bad[520];
	unsigned i;
	int n = 0;

	for (i = 0; i <= OLD_FILE; i++) {
		if (file_name(name, sizeof(name), path, i, NULL) < 0)
			continue;
		snprintf(bad, sizeof(bad), "%s.bad", name);
		if (rename(name, bad) == 0)
			n++;
	}
	if (n > 0)
		sync_dir(path);
	return n;
}
