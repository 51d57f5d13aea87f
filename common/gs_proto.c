/*
 * gs_proto.c — wire protocol codec: frame header, per-message payloads,
 * enum names.
 *
 * Decoding goes through a cursor (struct rd) whose getters never read past
 * the end: the first overrun marks the cursor bad, later getters return
 * zeros, and the decoder checks `bad` once at the end.  Arrays in
 * STATUS_REPLY are bounded by the bytes left before anything is
 * allocated, and every array record carries its own u16 length so that
 * newer minors can append fields to records too.  Encoding appends to a
 * growable buffer and checks the payload bound before writing the header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_proto.h"

/* ---- names ---- */

static const char *const prio_names[] = { "low", "normal", "high" };
static const char *const mode_names[] = { "time", "space" };
static const char *const astate_names[] = { "created", "idle", "waiting",
					    "running", "suspending", "held",
					    "closed" };

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *gs_priority_name(uint32_t p)
{
	return p < NELEM(prio_names) ? prio_names[p] : "?";
}

/* Index of s in names[0..n), the enum value it names; -1 if absent. */
static int name_index(const char *const *names, size_t n, const char *s,
		      uint32_t *out)
{
	uint32_t i;

	for (i = 0; s != NULL && i < n; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -1;
}

int gs_priority_parse(const char *s, uint32_t *out)
{
	return name_index(prio_names, NELEM(prio_names), s, out);
}

const char *gs_mode_name(uint32_t m)
{
	return m < NELEM(mode_names) ? mode_names[m] : "?";
}

int gs_mode_parse(const char *s, uint32_t *out)
{
	return name_index(mode_names, NELEM(mode_names), s, out);
}

const char *gs_alloc_state_name(uint32_t s)
{
	return s < NELEM(astate_names) ? astate_names[s] : "?";
}

const char *gs_msg_type_name(uint32_t t)
{
	switch (t) {
	case GS_MSG_ERROR: return "ERROR";
	case GS_MSG_OK: return "OK";
	case GS_MSG_PING: return "PING";
	case GS_MSG_ALLOC_CREATE: return "ALLOC_CREATE";
	case GS_MSG_ALLOC_CLOSE: return "ALLOC_CLOSE";
	case GS_MSG_ALLOC_INFO: return "ALLOC_INFO";
	case GS_MSG_ATTACH: return "ATTACH";
	case GS_MSG_ATTACHED: return "ATTACHED";
	case GS_MSG_ALLOC_LABEL: return "ALLOC_LABEL";
	case GS_MSG_ALLOC_SET_MEM: return "ALLOC_SET_MEM";
	case GS_MSG_TOKEN_WANT: return "TOKEN_WANT";
	case GS_MSG_TOKEN_GRANT: return "TOKEN_GRANT";
	case GS_MSG_TOKEN_SOON: return "TOKEN_SOON";
	case GS_MSG_TOKEN_UNWANT: return "TOKEN_UNWANT";
	case GS_MSG_TOKEN_RELEASE: return "TOKEN_RELEASE";
	case GS_MSG_STATUS: return "STATUS";
	case GS_MSG_STATUS_REPLY: return "STATUS_REPLY";
	case GS_MSG_SET_WEIGHT: return "SET_WEIGHT";
	case GS_MSG_SET_PRIORITY: return "SET_PRIORITY";
	case GS_MSG_DRAIN: return "DRAIN";
	case GS_MSG_GPU_FAULT: return "GPU_FAULT";
	default: return "UNKNOWN";
	}
}

/* ---- little-endian helpers ---- */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | ((uint32_t)get16(p + 2) << 16);
}

/* ---- frame header ---- */

void gs_frame_hdr_encode(const struct gs_frame_hdr *h,
			 uint8_t out[GS_FRAME_HDR_SIZE])
{
	put32(out, h->magic);
	out[4] = h->major;
	out[5] = h->minor;
	put16(out + 6, h->type);
	put32(out + 8, h->length);
	put32(out + 12, h->seq);
}

int gs_frame_hdr_decode(const uint8_t *buf, size_t len,
			struct gs_frame_hdr *h, struct gs_error *err)
{
	struct gs_frame_hdr t;

	if (len < GS_FRAME_HDR_SIZE)
		return gs_error_set(err, GS_EPROTO,
				    "short frame header (%zu bytes)", len);
	t.magic = get32(buf);
	t.major = buf[4];
	t.minor = buf[5];
	t.type = get16(buf + 6);
	t.length = get32(buf + 8);
	t.seq = get32(buf + 12);
	if (t.magic != GS_PROTO_MAGIC)
		return gs_error_set(err, GS_EPROTO,
				    "bad frame magic 0x%08x", t.magic);
	if (t.major != GS_PROTO_MAJOR)
		return gs_error_set(err, GS_EVERSION,
				    "protocol major %u not supported (this "
				    "side speaks %u)", t.major,
				    GS_PROTO_MAJOR);
	if (t.length > GS_FRAME_MAX_PAYLOAD)
		return gs_error_set(err, GS_EPROTO,
				    "frame payload of %u bytes exceeds %u",
				    t.length, GS_FRAME_MAX_PAYLOAD);
	*h = t;
	return 0;
}

/* ---- write buffer ---- */

void gs_wbuf_init(struct gs_wbuf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
}

void gs_wbuf_free(struct gs_wbuf *b)
{
	free(b->data);
	gs_wbuf_init(b);
}

void gs_wbuf_consume(struct gs_wbuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

/* Encoder: appends to a wbuf; the first failure sticks. */
struct wr {
	struct gs_wbuf *b;
	int oom;
};

static uint8_t *wr_room(struct wr *w, size_t n)
{
	struct gs_wbuf *b = w->b;
	uint8_t *p;

	if (w->oom)
		return NULL;
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap - b->len < n)
			cap *= 2;
		p = realloc(b->data, cap);
		if (p == NULL) {
			w->oom = 1;
			return NULL;
		}
		b->data = p;
		b->cap = cap;
	}
	p = b->data + b->len;
	b->len += n;
	return p;
}

static void w16(struct wr *w, uint16_t v)
{
	uint8_t *p = wr_room(w, 2);

	if (p)
		put16(p, v);
}

static void w32(struct wr *w, uint32_t v)
{
	uint8_t *p = wr_room(w, 4);

	if (p)
		put32(p, v);
}

static void w64(struct wr *w, uint64_t v)
{
	w32(w, (uint32_t)v);
	w32(w, (uint32_t)(v >> 32));
}

/* Strings are bounded by their fixed arrays (< 64 KiB), so u16 fits. */
static void wstr(struct wr *w, const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	uint8_t *p;

	w16(w, (uint16_t)n);
	p = wr_room(w, n);
	if (p)
		memcpy(p, s, n);
}

#define WSTR(w, arr) wstr(w, arr, sizeof(arr))

static void wlabels(struct wr *w, const struct gs_labels *l)
{
	WSTR(w, l->cluster);
	WSTR(w, l->job);
	WSTR(w, l->step);
	WSTR(w, l->node);
	WSTR(w, l->ns);
	WSTR(w, l->pod);
	WSTR(w, l->container);
	WSTR(w, l->user);
	WSTR(w, l->account);
}

static void winfo(struct wr *w, const struct gs_alloc_info *a)
{
	w64(w, a->id);
	w32(w, (uint32_t)a->gpu);
	WSTR(w, a->gpu_uuid);
	w32(w, a->shares);
	w32(w, a->weight);
	w32(w, a->priority);
	w32(w, a->mode);
	w32(w, a->uid);
	w32(w, a->state);
	w32(w, a->pid);
	wlabels(w, &a->labels);
	w64(w, a->created_unix_ns);
	w64(w, a->gpu_ns);
	w64(w, a->held_ns);
	w64(w, a->suspensions);
	w64(w, a->block_tasks);
	w64(w, a->vtime_ns);
	w32(w, a->flags);
	w32(w, a->nattached);
	w32(w, a->sm_first);	/* 1.3 */
	w32(w, a->sm_count);
	w32(w, a->mps_pct);
	WSTR(w, a->mps_pipe);
	WSTR(w, a->space_why);
	w32(w, a->unmanaged);		/* 1.4 */
	w32(w, a->unmanaged_held);
	w64(w, a->mem_limit);
	w64(w, a->mem_used);
	w64(w, a->mem_peak);
}

static void wgpu(struct wr *w, const struct gs_gpu_info *g)
{
	w32(w, (uint32_t)g->index);
	WSTR(w, g->uuid);
	WSTR(w, g->name);
	w32(w, g->shares_total);
	w32(w, g->shares_used);
	w32(w, g->healthy);
	w32(w, g->drained);
	w32(w, g->simulated);
	w64(w, g->holder);
	WSTR(w, g->health);
	w32(w, g->unmanaged);		/* 1.4 */
	w64(w, g->mem_total);
	w64(w, g->mem_limits);
}

/* Records inside arrays: u16 length, then the record. */
static size_t wrec_begin(struct wr *w)
{
	w16(w, 0);
	return w->b->len;
}

static void wrec_end(struct wr *w, size_t start)
{
	size_t n;

	if (w->oom)
		return;
	n = w->b->len - start;
	if (n > UINT16_MAX) {
		w->oom = 1; /* cannot happen: records are a few hundred bytes */
		return;
	}
	put16(w->b->data + start - 2, (uint16_t)n);
}

static int wpayload(struct wr *w, const struct gs_msg *m)
{
	const struct gs_status *st;
	uint32_t i;
	size_t r;

	switch (m->type) {
	case GS_MSG_ERROR:
		w32(w, (uint32_t)m->u.error.code);
		WSTR(w, m->u.error.msg);
		break;
	case GS_MSG_OK:
	case GS_MSG_PING:
	case GS_MSG_TOKEN_WANT:
	case GS_MSG_TOKEN_UNWANT:
		break;
	case GS_MSG_STATUS:
		w64(w, m->u.after_id);
		break;
	case GS_MSG_ALLOC_CREATE:
		w32(w, (uint32_t)m->u.req.gpu);
		w32(w, m->u.req.shares);
		w32(w, m->u.req.weight);
		w32(w, m->u.req.priority);
		w32(w, m->u.req.mode);
		w32(w, m->u.req.uid);
		wlabels(w, &m->u.req.labels);
		w32(w, m->u.req.flags);
		w64(w, m->u.req.mem_limit);
		break;
	case GS_MSG_ALLOC_INFO:
	case GS_MSG_ATTACHED:
		winfo(w, &m->u.info);
		break;
	case GS_MSG_ALLOC_CLOSE:
		w64(w, m->u.close.id);
		w32(w, m->u.close.end_state);	/* 1.3 */
		break;
	case GS_MSG_ATTACH:
		w64(w, m->u.id);
		break;
	case GS_MSG_ALLOC_LABEL:
		w64(w, m->u.label.id);
		wlabels(w, &m->u.label.labels);
		break;
	case GS_MSG_ALLOC_SET_MEM:
		w64(w, m->u.setmem.id);
		w64(w, m->u.setmem.mem_limit);
		break;
	case GS_MSG_TOKEN_GRANT:
		w64(w, m->u.grant.gen);
		w64(w, m->u.grant.slice_ns);
		break;
	case GS_MSG_TOKEN_SOON:
		w64(w, m->u.soon_ns);
		break;
	case GS_MSG_TOKEN_RELEASE:
		w64(w, m->u.release.gen);
		w64(w, m->u.release.gpu_ns);
		w64(w, m->u.release.evict_ns);
		w32(w, m->u.release.reason);
		break;
	case GS_MSG_STATUS_REPLY:
		st = &m->u.status;
		WSTR(w, st->policy);
		w64(w, st->slice_ns);
		w32(w, st->ngpus);
		for (i = 0; i < st->ngpus; i++) {
			r = wrec_begin(w);
			wgpu(w, &st->gpus[i]);
			wrec_end(w, r);
		}
		w32(w, st->nallocs);
		for (i = 0; i < st->nallocs; i++) {
			r = wrec_begin(w);
			winfo(w, &st->allocs[i]);
			wrec_end(w, r);
		}
		w32(w, st->nallocs_total > st->nallocs ? st->nallocs_total
						       : st->nallocs);
		w32(w, st->more ? 1u : 0u);
		WSTR(w, st->warning);	/* 1.3 */
		break;
	case GS_MSG_SET_WEIGHT:
	case GS_MSG_SET_PRIORITY:
		w64(w, m->u.set.id);
		w32(w, m->u.set.value);
		break;
	case GS_MSG_DRAIN:
	case GS_MSG_GPU_FAULT:
		w32(w, (uint32_t)m->u.drain.gpu);
		w32(w, m->u.drain.on);
		break;
	default:
		return -1;
	}
	return 0;
}

int gs_msg_encode(const struct gs_msg *m, struct gs_wbuf *out,
		  struct gs_error *err)
{
	struct gs_frame_hdr h;
	struct wr w = { out, 0 };
	size_t start = out->len, plen;
	uint8_t *hp;

	hp = wr_room(&w, GS_FRAME_HDR_SIZE);
	if (hp == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	if (wpayload(&w, m) < 0) {
		out->len = start;
		return gs_error_set(err, GS_EINVAL,
				    "cannot encode message type %u", m->type);
	}
	if (w.oom) {
		out->len = start;
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	}
	plen = out->len - start - GS_FRAME_HDR_SIZE;
	if (plen > GS_FRAME_MAX_PAYLOAD) {
		out->len = start;
		return gs_error_set(err, GS_EPROTO,
				    "%s payload of %zu bytes exceeds %u",
				    gs_msg_type_name(m->type), plen,
				    GS_FRAME_MAX_PAYLOAD);
	}
	h.magic = GS_PROTO_MAGIC;
	h.major = GS_PROTO_MAJOR;
	h.minor = GS_PROTO_MINOR;
	h.type = m->type;
	h.length = (uint32_t)plen;
	h.seq = m->seq;
	gs_frame_hdr_encode(&h, out->data + start);
	return 0;
}

/* ---- decoding ---- */

struct rd {
	const uint8_t *p;
	size_t len, off;
	int bad;		/* overrun */
	int badstr;		/* string too long for its field or has NUL */
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || r->len - r->off < n) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

static uint16_t r16(struct rd *r)
{
	const uint8_t *p = rd_take(r, 2);

	return p ? get16(p) : 0;
}

static uint32_t r32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);

	return p ? get32(p) : 0;
}

static uint64_t r64(struct rd *r)
{
	uint64_t lo = r32(r);

	return lo | ((uint64_t)r32(r) << 32);
}

static void rstr(struct rd *r, char *dst, size_t size)
{
	uint16_t n = r16(r);
	const uint8_t *p = rd_take(r, n);

	dst[0] = '\0';
	if (p == NULL)
		return;
	if ((size_t)n >= size || memchr(p, '\0', n) != NULL) {
		r->badstr = 1;
		return;
	}
	memcpy(dst, p, n);
	dst[n] = '\0';
}

#define RSTR(r, arr) rstr(r, arr, sizeof(arr))

static void rlabels(struct rd *r, struct gs_labels *l)
{
	RSTR(r, l->cluster);
	RSTR(r, l->job);
	RSTR(r, l->step);
	RSTR(r, l->node);
	RSTR(r, l->ns);
	RSTR(r, l->pod);
	RSTR(r, l->container);
	RSTR(r, l->user);
	RSTR(r, l->account);
}

/* Is a field of at least n bytes, appended in a newer minor, present?
 * 0 when the payload ends exactly before it (an older peer's frame); a
 * payload that ends inside it (1..n-1 bytes left) is truncated, not an
 * older frame: the cursor goes bad. */
static int rd_opt(struct rd *r, size_t n)
{
	size_t left = r->len - r->off;

	if (r->bad || left == 0)
		return 0;
	if (left < n) {
		r->bad = 1;
		return 0;
	}
	return 1;
}

/* A u32 appended in a newer minor: 0 when the frame ends before it. */
static uint32_t r32_opt(struct rd *r)
{
	return rd_opt(r, 4) ? r32(r) : 0;
}

/* A u64 appended in a newer minor: 0 when the frame ends before it. */
static uint64_t r64_opt(struct rd *r)
{
	return rd_opt(r, 8) ? r64(r) : 0;
}

static void rinfo(struct rd *r, struct gs_alloc_info *a)
{
	a->id = r64(r);
	a->gpu = (int32_t)r32(r);
	RSTR(r, a->gpu_uuid);
	a->shares = r32(r);
	a->weight = r32(r);
	a->priority = r32(r);
	a->mode = r32(r);
	a->uid = r32(r);
	a->state = r32(r);
	a->pid = r32(r);
	rlabels(r, &a->labels);
	a->created_unix_ns = r64(r);
	a->gpu_ns = r64(r);
	a->held_ns = r64(r);
	a->suspensions = r64(r);
	a->block_tasks = r64(r);
	a->vtime_ns = r64(r);
	a->flags = r32_opt(r);
	a->nattached = r32_opt(r);
	if (rd_opt(r, 4)) {	/* 1.3 */
		a->sm_first = r32(r);
		a->sm_count = r32(r);
		a->mps_pct = r32(r);
		RSTR(r, a->mps_pipe);
		RSTR(r, a->space_why);
	}
	a->unmanaged = r32_opt(r);
	a->unmanaged_held = r32_opt(r);
	a->mem_limit = r64_opt(r);	/* 1.4 */
	a->mem_used = r64_opt(r);
	a->mem_peak = r64_opt(r);
}

static void rgpu(struct rd *r, struct gs_gpu_info *g)
{
	g->index = (int32_t)r32(r);
	RSTR(r, g->uuid);
	RSTR(r, g->name);
	g->shares_total = r32(r);
	g->shares_used = r32(r);
	g->healthy = r32(r);
	g->drained = r32(r);
	g->simulated = r32(r);
	g->holder = r64(r);
	if (rd_opt(r, 2))	/* 1.1 */
		RSTR(r, g->health);
	g->unmanaged = r32_opt(r);
	g->mem_total = r64_opt(r);	/* 1.4 */
	g->mem_limits = r64_opt(r);
}

/* Open the next u16-length record as a sub-cursor. */
static int rrec(struct rd *r, struct rd *sub)
{
	uint16_t n = r16(r);
	const uint8_t *p = rd_take(r, n);

	if (p == NULL)
		return -1;
	sub->p = p;
	sub->len = n;
	sub->off = 0;
	sub->bad = sub->badstr = 0;
	return 0;
}

/* Smallest encodings of a record (with its u16 length): bounds counts. */
#define GPU_REC_MIN	(2 + 4 + 2 + 2 + 5 * 4 + 8)
#define INFO_REC_MIN	(2 + 8 + 4 + 2 + 7 * 4 + 9 * 2 + 6 * 8)

static int rstatus(struct rd *r, struct gs_status *st, struct gs_error *err)
{
	struct rd sub;
	uint32_t i, n;

	RSTR(r, st->policy);
	st->slice_ns = r64(r);
	n = r32(r);
	if (r->bad || n > (r->len - r->off) / GPU_REC_MIN)
		return gs_error_set(err, GS_EPROTO,
				    "STATUS_REPLY: bad GPU count %u", n);
	st->gpus = calloc(n ? n : 1, sizeof(*st->gpus));
	if (st->gpus == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	st->ngpus = n;
	for (i = 0; i < n; i++) {
		if (rrec(r, &sub) < 0)
			break;
		rgpu(&sub, &st->gpus[i]);
		if (sub.bad || sub.badstr) {
			r->bad |= sub.bad;
			r->badstr |= sub.badstr;
			break;
		}
	}
	n = r32(r);
	if (r->bad || n > (r->len - r->off) / INFO_REC_MIN)
		return gs_error_set(err, GS_EPROTO,
				    "STATUS_REPLY: bad allocation count %u",
				    n);
	st->allocs = calloc(n ? n : 1, sizeof(*st->allocs));
	if (st->allocs == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	st->nallocs = n;
	for (i = 0; i < n; i++) {
		if (rrec(r, &sub) < 0)
			break;
		rinfo(&sub, &st->allocs[i]);
		if (sub.bad || sub.badstr) {
			r->bad |= sub.bad;
			r->badstr |= sub.badstr;
			break;
		}
	}
	/* appended field: absent in frames from older agents */
	st->nallocs_total = st->nallocs;
	if (rd_opt(r, 4)) {
		n = r32(r);
		if (n > st->nallocs)
			st->nallocs_total = n;
		st->more = r32_opt(r) != 0 ? 1u : 0u;	/* 1.2 */
		if (!r->bad && r->len - r->off > 0)	/* 1.3 */
			RSTR(r, st->warning);
	}
	return 0;
}

void gs_msg_clear(struct gs_msg *m)
{
	if (m->type == GS_MSG_STATUS_REPLY) {
		free(m->u.status.gpus);
		free(m->u.status.allocs);
		m->u.status.gpus = NULL;
		m->u.status.allocs = NULL;
		m->u.status.ngpus = m->u.status.nallocs = 0;
	}
}

void gs_status_free(struct gs_status *st)
{
	if (st == NULL)
		return;
	free(st->gpus);
	free(st->allocs);
	free(st);
}

int gs_msg_decode(const struct gs_frame_hdr *h, const uint8_t *payload,
		  struct gs_msg *m, struct gs_error *err)
{
	struct rd r = { payload, h->length, 0, 0, 0 };
	const char *tn = gs_msg_type_name(h->type);

	memset(m, 0, sizeof(*m));
	m->type = h->type;
	m->seq = h->seq;
	switch (h->type) {
	case GS_MSG_ERROR:
		m->u.error.code = (int)r32(&r);
		RSTR(&r, m->u.error.msg);
		/* an over-long message is truncated, not refused */
		if (r.badstr && !r.bad) {
			r.badstr = 0;
			snprintf(m->u.error.msg, sizeof(m->u.error.msg),
				 "(unreadable error message)");
		}
		break;
	case GS_MSG_OK:
	case GS_MSG_PING:
	case GS_MSG_TOKEN_WANT:
	case GS_MSG_TOKEN_UNWANT:
		break;
	case GS_MSG_STATUS:
		m->u.after_id = r64_opt(&r);	/* 1.2 */
		break;
	case GS_MSG_ALLOC_CREATE:
		m->u.req.gpu = (int32_t)r32(&r);
		m->u.req.shares = r32(&r);
		m->u.req.weight = r32(&r);
		m->u.req.priority = r32(&r);
		m->u.req.mode = r32(&r);
		m->u.req.uid = r32(&r);
		rlabels(&r, &m->u.req.labels);
		m->u.req.flags = r32_opt(&r);
		m->u.req.mem_limit = r64_opt(&r);	/* 1.4 */
		break;
	case GS_MSG_ALLOC_INFO:
	case GS_MSG_ATTACHED:
		rinfo(&r, &m->u.info);
		break;
	case GS_MSG_ALLOC_CLOSE:
		m->u.close.id = r64(&r);
		m->u.close.end_state = r32_opt(&r);	/* 1.3 */
		break;
	case GS_MSG_ATTACH:
		m->u.id = r64(&r);
		break;
	case GS_MSG_ALLOC_LABEL:
		m->u.label.id = r64(&r);
		rlabels(&r, &m->u.label.labels);
		break;
	case GS_MSG_ALLOC_SET_MEM:
		m->u.setmem.id = r64(&r);
		m->u.setmem.mem_limit = r64(&r);
		break;
	case GS_MSG_TOKEN_GRANT:
		m->u.grant.gen = r64(&r);
		m->u.grant.slice_ns = r64(&r);
		break;
	case GS_MSG_TOKEN_SOON:
		m->u.soon_ns = r64(&r);
		break;
	case GS_MSG_TOKEN_RELEASE:
		m->u.release.gen = r64(&r);
		m->u.release.gpu_ns = r64(&r);
		m->u.release.evict_ns = r64(&r);
		m->u.release.reason = r32(&r);
		break;
	case GS_MSG_STATUS_REPLY:
		if (rstatus(&r, &m->u.status, err) < 0) {
			gs_msg_clear(m);
			return -1;
		}
		break;
	case GS_MSG_SET_WEIGHT:
	case GS_MSG_SET_PRIORITY:
		m->u.set.id = r64(&r);
		m->u.set.value = r32(&r);
		break;
	case GS_MSG_DRAIN:
	case GS_MSG_GPU_FAULT:
		m->u.drain.gpu = (int32_t)r32(&r);
		m->u.drain.on = r32(&r);
		break;
	default:
		return gs_error_set(err, GS_EUNSUPP,
				    "unknown message type %u", h->type);
	}
	if (r.bad || r.badstr) {
		gs_msg_clear(m);
		if (r.bad)
			return gs_error_set(err, GS_EPROTO,
					    "%s: truncated payload (%u bytes)",
					    tn, h->length);
		return gs_error_set(err, GS_EPROTO,
				    "%s: string too long or with NUL byte",
				    tn);
	}
	return 0;
}

int gs_frame_parse(const uint8_t *buf, size_t len, struct gs_msg *m,
		   size_t *used, struct gs_error *err)
{
	struct gs_frame_hdr h;

	if (len < GS_FRAME_HDR_SIZE)
		return 0;
	if (gs_frame_hdr_decode(buf, len, &h, err) < 0)
		return -1;
	if (len - GS_FRAME_HDR_SIZE < h.length)
		return 0;
	*used = GS_FRAME_HDR_SIZE + h.length;
	if (gs_msg_decode(&h, buf + GS_FRAME_HDR_SIZE, m, err) < 0)
		return -1;
	return 1;
}
