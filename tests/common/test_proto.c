/*
 * test_proto.c — unit tests of the wire codec (common/gs_proto.c): every
 * message round-trips through encode → gs_frame_parse, and every
 * rejection path (short header, wrong magic, foreign major, oversized
 * length, unknown type, truncated payloads of every type, over-long and
 * NUL-carrying strings, absurd array counts, oversized encodes) fails
 * with the documented code.  Trailing bytes are ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gs_proto.h"

/* Allocation failure injection: the test binary is linked with
 * --wrap=calloc,--wrap=realloc, so the codec's allocations come here.
 * fail_countdown > 0: that many succeed, then every one fails. */
static int fail_countdown = -1;

void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t sz);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t sz);

static int inject(void)
{
	if (fail_countdown < 0)
		return 0;
	if (fail_countdown == 0)
		return 1;
	fail_countdown--;
	return 0;
}

void *__wrap_calloc(size_t n, size_t sz)
{
	return inject() ? NULL : __real_calloc(n, sz);
}

void *__wrap_realloc(void *p, size_t sz)
{
	return inject() ? NULL : __real_realloc(p, sz);
}

static void fill_labels(struct gs_labels *l)
{
	snprintf(l->cluster, sizeof(l->cluster), "c1");
	snprintf(l->job, sizeof(l->job), "4242");
	snprintf(l->step, sizeof(l->step), "batch");
	snprintf(l->node, sizeof(l->node), "node-7");
	snprintf(l->ns, sizeof(l->ns), "default");
	memset(l->pod, 'p', sizeof(l->pod) - 1); /* full-length string */
	snprintf(l->container, sizeof(l->container), "main");
	snprintf(l->user, sizeof(l->user), "alice");
	l->account[0] = '\0';
}

/* the space fields appended in 1.3: three u32 and two strings */
#define SPACE_PIPE	"/var/lib/gshare/mps/0/1000/pipe"
#define SPACE_WHY	"co-runs with 2: compute-heavy + memory-heavy"
#define SPACE_TAIL	(12u + 2u + sizeof(SPACE_PIPE) - 1u + 2u + \
			 sizeof(SPACE_WHY) - 1u)

static void fill_info(struct gs_alloc_info *a, uint64_t id)
{
	memset(a, 0, sizeof(*a));
	a->id = id;
	a->gpu = -1;
	snprintf(a->gpu_uuid, sizeof(a->gpu_uuid), "GPU-%llu",
		 (unsigned long long)id);
	a->shares = 30;
	a->weight = 60;
	a->priority = GS_PRIO_HIGH;
	a->mode = GS_MODE_SPACE;
	a->uid = 1000;
	a->flags = GS_ALLOC_ANY_UID;
	a->nattached = 3;
	a->sm_first = 40;
	a->sm_count = 92;
	a->mps_pct = 30;
	snprintf(a->mps_pipe, sizeof(a->mps_pipe), "%s", SPACE_PIPE);
	snprintf(a->space_why, sizeof(a->space_why), "%s", SPACE_WHY);
	a->unmanaged = 2;
	a->unmanaged_held = 1;
	a->state = GS_ASTATE_RUNNING;
	a->pid = 4321;
	fill_labels(&a->labels);
	a->created_unix_ns = 0x1122334455667788ull;
	a->gpu_ns = UINT64_MAX;
	a->held_ns = 5;
	a->suspensions = 6;
	a->block_tasks = 7;
	a->vtime_ns = 8;
	a->mem_limit = 20ull << 30;
	a->mem_used = 0x0102030405060708ull;
	a->mem_peak = UINT64_MAX - 1;
}

/* Every message type with non-trivial contents. */
static int sample(uint16_t type, struct gs_msg *m)
{
	uint32_t i;

	memset(m, 0, sizeof(*m));
	m->type = type;
	m->seq = 77;
	switch (type) {
	case GS_MSG_ERROR:
		m->u.error.code = GS_EBUSY;
		snprintf(m->u.error.msg, sizeof(m->u.error.msg),
			 "GPU 0: only 10 shares free");
		break;
	case GS_MSG_OK:
	case GS_MSG_PING:
	case GS_MSG_TOKEN_WANT:
	case GS_MSG_TOKEN_UNWANT:
		break;
	case GS_MSG_STATUS:
		m->u.after_id = 0x1234567890ull;
		break;
	case GS_MSG_ALLOC_CREATE:
		m->u.req.gpu = -1;
		m->u.req.shares = 30;
		m->u.req.weight = 0;
		m->u.req.priority = 2;
		m->u.req.mode = 1;
		m->u.req.uid = 65534;
		fill_labels(&m->u.req.labels);
		m->u.req.mem_limit = (10ull << 30) + 7;
		break;
	case GS_MSG_ALLOC_INFO:
	case GS_MSG_ATTACHED:
		fill_info(&m->u.info, 12);
		break;
	case GS_MSG_ALLOC_CLOSE:
		m->u.close.id = 0xdeadbeefcafeull;
		m->u.close.end_state = GS_END_TIMEOUT;
		break;
	case GS_MSG_ATTACH:
		m->u.id = 0xdeadbeefcafeull;
		break;
	case GS_MSG_ALLOC_LABEL:
		m->u.label.id = 31;
		fill_labels(&m->u.label.labels);
		break;
	case GS_MSG_ALLOC_SET_MEM:
		m->u.setmem.id = 0xdeadbeefcafeull;
		m->u.setmem.mem_limit = (10ull << 30) + 0x0102030405ull;
		break;
	case GS_MSG_TOKEN_GRANT:
		m->seq = 0;
		m->u.grant.gen = 99;
		m->u.grant.slice_ns = 4000000;
		break;
	case GS_MSG_TOKEN_SOON:
		m->seq = 0;
		m->u.soon_ns = 1000000;
		break;
	case GS_MSG_TOKEN_RELEASE:
		m->u.release.gen = 99;
		m->u.release.gpu_ns = 3999999;
		m->u.release.evict_ns = 12000;
		m->u.release.reason = GS_REL_SUSPENDED;
		break;
	case GS_MSG_STATUS_REPLY:
		snprintf(m->u.status.policy, sizeof(m->u.status.policy), "wfq");
		m->u.status.slice_ns = 4000000;
		m->u.status.ngpus = 2;
		m->u.status.gpus = calloc(2, sizeof(struct gs_gpu_info));
		for (i = 0; i < 2; i++) {
			struct gs_gpu_info *g = &m->u.status.gpus[i];

			g->index = (int32_t)i;
			snprintf(g->uuid, sizeof(g->uuid), "GPU-%u", i);
			snprintf(g->name, sizeof(g->name), "sim");
			g->shares_total = 100;
			g->shares_used = 50 + i;
			g->healthy = 1;
			g->drained = i;
			g->simulated = 1;
			g->holder = 3 + i;
			g->unmanaged = 7 + i;
			g->mem_total = (80ull << 30) + i;
			g->mem_limits = 0xa0b0c0d0e0f00102ull;
			if (i == 1)
				snprintf(g->health, sizeof(g->health),
					 "NVML: GPU is lost");
		}
		m->u.status.nallocs = 3;
		m->u.status.nallocs_total = 3;
		m->u.status.more = 1;
		m->u.status.allocs = calloc(3, sizeof(struct gs_alloc_info));
		for (i = 0; i < 3; i++)
			fill_info(&m->u.status.allocs[i], i + 1);
		break;
	case GS_MSG_SET_WEIGHT:
	case GS_MSG_SET_PRIORITY:
		m->u.set.id = 5;
		m->u.set.value = 300;
		break;
	case GS_MSG_DRAIN:
	case GS_MSG_GPU_FAULT:
		m->u.drain.gpu = 3;
		m->u.drain.on = 1;
		break;
	default:
		return -1;
	}
	return 0;
}

static const uint16_t all_types[] = {
	GS_MSG_ERROR,	      GS_MSG_OK,	  GS_MSG_PING,
	GS_MSG_ALLOC_CREATE,  GS_MSG_ALLOC_CLOSE, GS_MSG_ALLOC_INFO,
	GS_MSG_ATTACH,	      GS_MSG_ATTACHED,	  GS_MSG_ALLOC_LABEL,
	GS_MSG_ALLOC_SET_MEM, GS_MSG_TOKEN_WANT,
	GS_MSG_TOKEN_GRANT,   GS_MSG_TOKEN_RELEASE, GS_MSG_TOKEN_SOON,
	GS_MSG_TOKEN_UNWANT,
	GS_MSG_STATUS,
	GS_MSG_STATUS_REPLY,  GS_MSG_SET_WEIGHT,  GS_MSG_SET_PRIORITY,
	GS_MSG_DRAIN,	      GS_MSG_GPU_FAULT,
};
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))

static void assert_msg_equal(const struct gs_msg *a, const struct gs_msg *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->seq, b->seq);
	if (a->type == GS_MSG_STATUS_REPLY) {
		const struct gs_status *x = &a->u.status, *y = &b->u.status;

		assert_string_equal(x->policy, y->policy);
		assert_int_equal(x->slice_ns, y->slice_ns);
		assert_int_equal(x->ngpus, y->ngpus);
		assert_int_equal(x->nallocs, y->nallocs);
		assert_int_equal(x->nallocs_total, y->nallocs_total);
		assert_int_equal(x->more, y->more);
		assert_memory_equal(x->gpus, y->gpus,
				    x->ngpus * sizeof(*x->gpus));
		assert_memory_equal(x->allocs, y->allocs,
				    x->nallocs * sizeof(*x->allocs));
		return;
	}
	assert_memory_equal(&a->u, &b->u, sizeof(a->u));
}

static void test_round_trip(void **state)
{
	struct gs_msg in, out;
	struct gs_wbuf b;
	struct gs_error err;
	size_t i, used;

	(void)state;
	for (i = 0; i < NTYPES; i++) {
		assert_int_equal(sample(all_types[i], &in), 0);
		gs_wbuf_init(&b);
		assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		/* a partial frame asks for more, whatever the cut */
		for (used = 0; used < b.len; used++)
			assert_int_equal(gs_frame_parse(b.data, used, &out,
							&used, &err), 0);
		assert_int_equal(gs_frame_parse(b.data, b.len, &out, &used,
						&err), 1);
		assert_int_equal(used, b.len);
		/* memcmp of unions needs the zeroed tails of strings */
		assert_msg_equal(&in, &out);
		gs_msg_clear(&out);
		gs_msg_clear(&in);
		gs_wbuf_free(&b);
	}
}

static void test_trailing_ignored(void **state)
{
	struct gs_msg in, out;
	struct gs_frame_hdr h;
	struct gs_wbuf b;
	struct gs_error err;
	uint8_t *buf;
	size_t i;

	(void)state;
	for (i = 0; i < NTYPES; i++) {
		sample(all_types[i], &in);
		gs_wbuf_init(&b);
		assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		assert_int_equal(gs_frame_hdr_decode(b.data, b.len, &h, &err),
				 0);
		buf = calloc(1, h.length + 40);
		memcpy(buf, b.data + GS_FRAME_HDR_SIZE, h.length);
		memset(buf + h.length, 0xee, 40);
		h.length += 40; /* a newer minor appended fields */
		assert_int_equal(gs_msg_decode(&h, buf, &out, &err), 0);
		assert_msg_equal(&in, &out);
		gs_msg_clear(&out);
		gs_msg_clear(&in);
		gs_wbuf_free(&b);
		free(buf);
	}
}

/* Every proper prefix of every payload is refused as truncated, except
 * the ones that end exactly before an optional trailing field (what an
 * older minor sends); a prefix that ends inside such a field (one byte
 * short of it, say) is refused too.  Types with an empty payload have
 * no prefix. */
static void test_truncated(void **state)
{
	struct gs_msg in, out;
	struct gs_frame_hdr h;
	struct gs_wbuf b;
	struct gs_error err;
	uint32_t n, full, ok[10];
	unsigned k, nok;
	size_t i;
	int rv;

	(void)state;
	for (i = 0; i < NTYPES; i++) {
		sample(all_types[i], &in);
		gs_wbuf_init(&b);
		assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		gs_frame_hdr_decode(b.data, b.len, &h, &err);
		full = h.length;
		/* STATUS_REPLY ends with three optional fields (nallocs_total,
		 * more: 1.2, warning, here empty: 1.3), STATUS is one
		 * (after_id: 1.2), ALLOC_CREATE ends with flags (1.1) and
		 * mem_limit (1.4), ALLOC_CLOSE with end_state (1.3),
		 * ALLOC_INFO / ATTACHED with flags (1.1), then nattached and
		 * the space fields (1.3), then unmanaged and unmanaged_held
		 * (u32 each) and three u64 of memory (1.4, in that order) */
		nok = 0;
		if (all_types[i] == GS_MSG_STATUS_REPLY) {
			ok[nok++] = full - 10;
			ok[nok++] = full - 6;
			ok[nok++] = full - 2;
		} else if (all_types[i] == GS_MSG_ALLOC_INFO ||
			   all_types[i] == GS_MSG_ATTACHED) {
			ok[nok++] = full - 32 - (uint32_t)SPACE_TAIL - 8;
			ok[nok++] = full - 32 - (uint32_t)SPACE_TAIL - 4;
			ok[nok++] = full - 32 - (uint32_t)SPACE_TAIL;
			ok[nok++] = full - 32;	/* 1.3 */
			ok[nok++] = full - 28;	/* unmanaged */
			ok[nok++] = full - 24;	/* unmanaged_held */
			ok[nok++] = full - 16;	/* mem_limit */
			ok[nok++] = full - 8;	/* mem_used */
		} else if (all_types[i] == GS_MSG_STATUS) {
			ok[nok++] = full - 8;
		} else if (all_types[i] == GS_MSG_ALLOC_CREATE) {
			ok[nok++] = full - 12;	/* flags 1.1, mem_limit 1.4 */
			ok[nok++] = full - 8;
		} else if (all_types[i] == GS_MSG_ALLOC_CLOSE) {
			ok[nok++] = full - 4;	/* end_state 1.3 */
		}
		for (n = 0; n < full; n++) {
			h.length = n;
			err.code = 0;
			rv = gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					   &out, &err);
			for (k = 0; k < nok && ok[k] != n; k++)
				;
			if (k < nok) {
				assert_int_equal(rv, 0);
				gs_msg_clear(&out);
				continue;
			}
			if (rv == 0)
				fail_msg("%s: a %u-byte prefix of %u decoded",
					 gs_msg_type_name(all_types[i]), n,
					 full);
			assert_int_equal(err.code, GS_EPROTO);
		}
		gs_msg_clear(&in);
		gs_wbuf_free(&b);
	}
}

/* Frames of protocol 1.0 (no flags, no GPU health reason) still decode:
 * flags 0, health "". */
static void test_minor0_frames(void **state)
{
	static const uint16_t types[] = { GS_MSG_ALLOC_CREATE,
					  GS_MSG_ALLOC_INFO, GS_MSG_ATTACHED };
	struct gs_msg in, out;
	struct gs_frame_hdr h;
	struct gs_wbuf b;
	struct gs_error err;
	struct gs_status st;
	struct gs_gpu_info g;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		sample(types[i], &in);
		if (types[i] == GS_MSG_ALLOC_CREATE)
			in.u.req.flags = GS_ALLOC_ANY_UID;
		gs_wbuf_init(&b);
		assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		gs_frame_hdr_decode(b.data, b.len, &h, &err);
		/* the 1.0 payload: no flags, nattached, space fields (1.3)
		 * nor unmanaged, unmanaged_held and the memory (1.4) */
		h.length -= types[i] == GS_MSG_ALLOC_CREATE ? 12 :
			    16 + (uint32_t)SPACE_TAIL + 24;
		assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					       &out, &err), 0);
		if (types[i] == GS_MSG_ALLOC_CREATE) {
			assert_int_equal(out.u.req.flags, 0);
			assert_int_equal(out.u.req.uid, in.u.req.uid);
		} else {
			assert_int_equal(out.u.info.flags, 0);
			assert_int_equal(out.u.info.nattached, 0);
			assert_int_equal(out.u.info.sm_count, 0);
			assert_string_equal(out.u.info.mps_pipe, "");
			assert_int_equal(out.u.info.vtime_ns,
					 in.u.info.vtime_ns);
			/* 1.2: flags, no nattached */
			gs_msg_clear(&out);
			h.length += 4;
			assert_int_equal(gs_msg_decode(&h, b.data +
						       GS_FRAME_HDR_SIZE,
						       &out, &err), 0);
			assert_int_equal(out.u.info.flags, in.u.info.flags);
			assert_int_equal(out.u.info.nattached, 0);
			/* 1.3: nattached and the space fields, no unmanaged
			 * counts */
			gs_msg_clear(&out);
			h.length += 4 + (uint32_t)SPACE_TAIL;
			assert_int_equal(gs_msg_decode(&h, b.data +
						       GS_FRAME_HDR_SIZE,
						       &out, &err), 0);
			assert_int_equal(out.u.info.nattached, 3);
			assert_int_equal(out.u.info.sm_count, 92);
			assert_string_equal(out.u.info.mps_pipe, SPACE_PIPE);
			assert_int_equal(out.u.info.unmanaged, 0);
			assert_int_equal(out.u.info.unmanaged_held, 0);
			assert_int_equal(out.u.info.mem_limit, 0);
			/* 1.4: the unmanaged counts, no memory */
			gs_msg_clear(&out);
			h.length += 8;
			assert_int_equal(gs_msg_decode(&h, b.data +
						       GS_FRAME_HDR_SIZE,
						       &out, &err), 0);
			assert_int_equal(out.u.info.unmanaged, 2);
			assert_int_equal(out.u.info.unmanaged_held, 1);
			assert_int_equal(out.u.info.mem_limit, 0);
			assert_int_equal(out.u.info.mem_peak, 0);
			/* 1.4: all */
			gs_msg_clear(&out);
			h.length += 24;
			assert_int_equal(gs_msg_decode(&h, b.data +
						       GS_FRAME_HDR_SIZE,
						       &out, &err), 0);
			assert_int_equal(out.u.info.unmanaged, 2);
			assert_int_equal(out.u.info.unmanaged_held, 1);
			assert_int_equal(out.u.info.mem_limit, 20ull << 30);
			assert_int_equal(out.u.info.mem_peak, UINT64_MAX - 1);
		}
		gs_msg_clear(&out);
		gs_msg_clear(&in);
		gs_wbuf_free(&b);
	}
	/* a STATUS_REPLY whose GPU record has no health string */
	memset(&in, 0, sizeof(in));
	memset(&g, 0, sizeof(g));
	memset(&st, 0, sizeof(st));
	g.index = 0;
	g.healthy = 0;
	g.unmanaged = 5;
	g.mem_total = 80ull << 30;
	g.mem_limits = 30ull << 30;
	snprintf(g.health, sizeof(g.health), "x");
	st.ngpus = 1;
	st.gpus = &g;
	in.type = GS_MSG_STATUS_REPLY;
	in.u.status = st;
	gs_wbuf_init(&b);
	assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
	/* payload: str policy(2) u64 slice(8) u32 ngpus(4) u16 reclen, then
	 * the record ending with health (u16 1, "x"), unmanaged (u32, 1.4)
	 * and mem_total, mem_limits (u64 each, 1.4), u32 nallocs, u32
	 * total.  Cut d bytes off the record's end: it decodes when d ends
	 * exactly before an optional field (0: 1.4, 8: no mem_limits, 16:
	 * no memory, 20: 1.3, 23: 1.0, no health) and is refused when the
	 * record ends inside one.  The last cut (the 1.0 record) stays. */
	for (int d = 0; d <= 23; d++) {
		uint8_t *p;
		uint16_t rl;
		size_t tail;
		int ok = d == 0 || d == 8 || d == 16 || d == 20 || d == 23;

		if (d > 0) {
			gs_wbuf_free(&b);
			gs_wbuf_init(&b);
			assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		}
		p = b.data + GS_FRAME_HDR_SIZE + 2 + 8 + 4;
		rl = (uint16_t)(p[0] | p[1] << 8);
		tail = b.len - (size_t)(p + 2 + rl - b.data);
		rl = (uint16_t)(rl - d);
		p[0] = (uint8_t)rl;
		p[1] = (uint8_t)(rl >> 8);
		memmove(p + 2 + rl, p + 2 + rl + d, tail);
		b.len -= (size_t)d;
		gs_frame_hdr_decode(b.data, b.len, &h, &err);
		h.length -= (uint32_t)d;
		if (d == 23)
			break;
		err.code = 0;
		if (!ok) {
			if (gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					  &out, &err) == 0)
				fail_msg("a GPU record cut by %d decoded", d);
			assert_int_equal(err.code, GS_EPROTO);
			continue;
		}
		assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					       &out, &err), 0);
		assert_string_equal(out.u.status.gpus[0].health, "x");
		assert_int_equal(out.u.status.gpus[0].unmanaged,
				 d <= 16 ? 5 : 0);
		assert_int_equal(out.u.status.gpus[0].mem_total,
				 d <= 8 ? (80ull << 30) : 0);
		assert_int_equal(out.u.status.gpus[0].mem_limits,
				 d == 0 ? (30ull << 30) : 0);
		gs_msg_clear(&out);
	}
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.status.ngpus, 1);
	assert_string_equal(out.u.status.gpus[0].health, "");
	assert_int_equal(out.u.status.gpus[0].mem_total, 0);
	gs_msg_clear(&out);
	/* one byte of the health string's length left in the record: a
	 * truncated record, not a 1.0 one */
	{
		uint8_t *p = b.data + GS_FRAME_HDR_SIZE + 2 + 8 + 4;
		uint16_t rl = (uint16_t)(p[0] | p[1] << 8);
		size_t tail = b.len - (size_t)(p + 2 + rl - b.data);
		uint8_t *q;

		q = realloc(b.data, b.len + 1);
		assert_non_null(q);
		b.data = q;
		p = b.data + GS_FRAME_HDR_SIZE + 2 + 8 + 4;
		memmove(p + 2 + rl + 1, p + 2 + rl, tail);
		p[2 + rl] = 0;
		rl = (uint16_t)(rl + 1);
		p[0] = (uint8_t)rl;
		p[1] = (uint8_t)(rl >> 8);
		h.length += 1;
	}
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	gs_wbuf_free(&b);
}

/* Frames of protocol 1.3 (flags and nattached, no unmanaged counts nor
 * memory fields) decode with those 0 (the agent's default limit) and
 * everything else intact. */
static void test_minor3_frames(void **state)
{
	static const uint16_t types[] = { GS_MSG_ALLOC_CREATE,
					  GS_MSG_ALLOC_INFO, GS_MSG_ATTACHED };
	struct gs_msg in, out;
	struct gs_frame_hdr h;
	struct gs_wbuf b;
	struct gs_error err;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		sample(types[i], &in);
		if (types[i] == GS_MSG_ALLOC_CREATE)
			in.u.req.flags = GS_ALLOC_ANY_UID;
		gs_wbuf_init(&b);
		assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
		gs_frame_hdr_decode(b.data, b.len, &h, &err);
		h.length -= types[i] == GS_MSG_ALLOC_CREATE ? 8 : 32;
		assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					       &out, &err), 0);
		if (types[i] == GS_MSG_ALLOC_CREATE) {
			assert_int_equal(out.u.req.flags, GS_ALLOC_ANY_UID);
			assert_int_equal(out.u.req.mem_limit, 0);
		} else {
			assert_int_equal(out.u.info.flags, GS_ALLOC_ANY_UID);
			assert_int_equal(out.u.info.unmanaged, 0);
			assert_int_equal(out.u.info.unmanaged_held, 0);
			assert_int_equal(out.u.info.mem_limit, 0);
			assert_int_equal(out.u.info.mem_used, 0);
			assert_int_equal(out.u.info.mem_peak, 0);
		}
		gs_msg_clear(&out);
		/* the whole frame carries them */
		h.length += types[i] == GS_MSG_ALLOC_CREATE ? 8 : 32;
		assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE,
					       &out, &err), 0);
		if (types[i] == GS_MSG_ALLOC_CREATE) {
			assert_int_equal(out.u.req.mem_limit, (10ull << 30) + 7);
		} else {
			assert_int_equal(out.u.info.unmanaged, 2);
			assert_int_equal(out.u.info.unmanaged_held, 1);
			assert_int_equal(out.u.info.mem_limit, 20ull << 30);
			assert_int_equal(out.u.info.mem_used,
					 0x0102030405060708ull);
			assert_int_equal(out.u.info.mem_peak, UINT64_MAX - 1);
		}
		gs_msg_clear(&out);
		gs_msg_clear(&in);
		gs_wbuf_free(&b);
	}
}

static void mkhdr(uint8_t *buf, uint32_t magic, uint8_t major, uint16_t type,
		  uint32_t len)
{
	struct gs_frame_hdr h = { magic, major, 0, type, len, 1 };

	gs_frame_hdr_encode(&h, buf);
}

static void test_header_rejects(void **state)
{
	uint8_t buf[64] = { 0 };
	struct gs_frame_hdr h;
	struct gs_error err;
	struct gs_msg m;
	size_t used;

	(void)state;
	assert_int_equal(gs_frame_hdr_decode(buf, 15, &h, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);

	mkhdr(buf, 0x12345678, GS_PROTO_MAJOR, GS_MSG_PING, 0);
	assert_int_equal(gs_frame_parse(buf, 16, &m, &used, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	assert_string_equal(err.msg, "bad frame magic 0x12345678");

	mkhdr(buf, GS_PROTO_MAGIC, GS_PROTO_MAJOR + 1, GS_MSG_PING, 0);
	assert_int_equal(gs_frame_parse(buf, 16, &m, &used, &err), -1);
	assert_int_equal(err.code, GS_EVERSION);

	mkhdr(buf, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_PING,
	      GS_FRAME_MAX_PAYLOAD + 1);
	assert_int_equal(gs_frame_parse(buf, 16, &m, &used, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);

	/* the maximum itself is fine (needs more bytes) */
	mkhdr(buf, GS_PROTO_MAGIC, GS_PROTO_MAJOR, GS_MSG_PING,
	      GS_FRAME_MAX_PAYLOAD);
	assert_int_equal(gs_frame_parse(buf, 16, &m, &used, &err), 0);

	/* unknown type: EUNSUPP, and the frame can be skipped */
	mkhdr(buf, GS_PROTO_MAGIC, GS_PROTO_MAJOR, 999, 4);
	used = 0;
	assert_int_equal(gs_frame_parse(buf, 20, &m, &used, &err), -1);
	assert_int_equal(err.code, GS_EUNSUPP);
	assert_int_equal(used, 20);
	assert_int_equal(m.type, 999);
	assert_int_equal(m.seq, 1);
}

static void test_bad_strings(void **state)
{
	uint8_t buf[600];
	struct gs_frame_hdr h = { GS_PROTO_MAGIC, 1, 0, GS_MSG_ALLOC_CREATE,
				  0, 1 };
	struct gs_error err;
	struct gs_msg m;
	size_t off = 0;

	(void)state;
	memset(buf, 0, sizeof(buf));
	off = 24;		/* gpu..uid */
	buf[off] = 64;		/* cluster: 64 bytes does not fit char[64] */
	memset(buf + off + 2, 'x', 64);
	h.length = (uint32_t)(off + 2 + 64 + 8 * 2);
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	assert_non_null(strstr(err.msg, "string too long"));

	buf[off] = 3;		/* NUL inside a string */
	memcpy(buf + off + 2, "a\0b", 3);
	h.length = (uint32_t)(off + 2 + 3 + 8 * 2);
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);

	/* ERROR: an over-long message is replaced, not refused */
	memset(buf, 0, sizeof(buf));
	buf[0] = GS_EIO;
	buf[4] = (uint8_t)(300 & 0xff);
	buf[5] = (uint8_t)(300 >> 8);
	memset(buf + 6, 'e', 300);
	h.type = GS_MSG_ERROR;
	h.length = 306;
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), 0);
	assert_int_equal(m.u.error.code, GS_EIO);
}

static void test_status_counts(void **state)
{
	uint8_t buf[64];
	struct gs_frame_hdr h = { GS_PROTO_MAGIC, 1, 0, GS_MSG_STATUS_REPLY,
				  0, 1 };
	struct gs_error err;
	struct gs_msg m;

	(void)state;
	memset(buf, 0, sizeof(buf));
	/* policy "" (2), slice (8), ngpus = 0xffffffff */
	memset(buf + 10, 0xff, 4);
	h.length = 14 + 20;
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	assert_non_null(strstr(err.msg, "GPU count"));
	/* ngpus 0, nallocs huge */
	memset(buf + 10, 0, 4);
	memset(buf + 14, 0xff, 4);
	h.length = 18 + 20;
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), -1);
	assert_non_null(strstr(err.msg, "allocation count"));
	/* both zero: fine */
	memset(buf + 14, 0, 4);
	h.length = 18;
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), 0);
	assert_int_equal(m.u.status.ngpus, 0);
	gs_msg_clear(&m);
	/* a record that claims more than is there */
	buf[10] = 1;		/* ngpus = 1 */
	buf[14] = 200;		/* record length 200 */
	h.length = 60;
	assert_int_equal(gs_msg_decode(&h, buf, &m, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
}

/* nallocs_total: carried when larger, defaulted from frames without it */
static void test_status_total(void **state)
{
	struct gs_msg in, out;
	struct gs_frame_hdr h;
	struct gs_wbuf b;
	struct gs_error err;

	(void)state;
	sample(GS_MSG_STATUS_REPLY, &in);
	in.u.status.nallocs_total = 250;
	snprintf(in.u.status.warning, sizeof(in.u.status.warning),
		 "usage store behind");
	gs_wbuf_init(&b);
	assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
	gs_frame_hdr_decode(b.data, b.len, &h, &err);
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.status.nallocs_total, 250);
	assert_int_equal(out.u.status.more, 1);
	assert_string_equal(out.u.status.warning, "usage store behind");
	gs_msg_clear(&out);
	h.length -= 2 + 18; /* as a 1.2 agent sends it: no warning */
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.status.more, 1);
	assert_string_equal(out.u.status.warning, "");
	gs_msg_clear(&out);
	h.length -= 4; /* as a 1.1 agent sends it: no `more` */
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.status.nallocs_total, 250);
	assert_int_equal(out.u.status.more, 0);
	gs_msg_clear(&out);
	h.length -= 4; /* as a 1.0 agent sends it: no total either */
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.status.nallocs, 3);
	assert_int_equal(out.u.status.nallocs_total, 3);
	assert_int_equal(out.u.status.more, 0);
	gs_msg_clear(&out);
	gs_msg_clear(&in);
	gs_wbuf_free(&b);
	/* a STATUS from a 1.1 client (no after_id) asks from the start */
	sample(GS_MSG_STATUS, &in);
	gs_wbuf_init(&b);
	assert_int_equal(gs_msg_encode(&in, &b, &err), 0);
	gs_frame_hdr_decode(b.data, b.len, &h, &err);
	assert_int_equal(h.length, 8);
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.after_id, 0x1234567890ull);
	h.length = 0;
	assert_int_equal(gs_msg_decode(&h, b.data + GS_FRAME_HDR_SIZE, &out,
				       &err), 0);
	assert_int_equal(out.u.after_id, 0);
	gs_msg_clear(&in);
	gs_wbuf_free(&b);
}

static void test_encode_limits(void **state)
{
	struct gs_msg m;
	struct gs_wbuf b;
	struct gs_error err;
	uint32_t i;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.type = GS_MSG_STATUS_REPLY;
	m.u.status.nallocs = 400; /* 400 * ~290 bytes > 64 KiB */
	m.u.status.allocs = calloc(400, sizeof(struct gs_alloc_info));
	for (i = 0; i < 400; i++)
		fill_info(&m.u.status.allocs[i], i);
	gs_wbuf_init(&b);
	assert_int_equal(gs_msg_encode(&m, &b, &err), -1);
	assert_int_equal(err.code, GS_EPROTO);
	assert_int_equal(b.len, 0);
	gs_msg_clear(&m);

	m.type = 4242;
	assert_int_equal(gs_msg_encode(&m, &b, &err), -1);
	assert_int_equal(err.code, GS_EINVAL);
	gs_wbuf_free(&b);
}

/* Every allocation of encode and decode failing in turn: ENOMEM, no
 * partial output, nothing leaked (the sanitizer build checks leaks). */
static void test_alloc_failures(void **state)
{
	struct gs_msg in, out;
	struct gs_wbuf b, big;
	struct gs_error err;
	size_t used;
	int k, rv, failed = 0;

	(void)state;
	sample(GS_MSG_STATUS_REPLY, &in);
	gs_wbuf_init(&big);
	assert_int_equal(gs_msg_encode(&in, &big, &err), 0);
	for (k = 0; k < 20; k++) {
		gs_wbuf_init(&b);
		fail_countdown = k;
		rv = gs_msg_encode(&in, &b, &err);
		fail_countdown = -1;
		if (rv < 0) {
			assert_int_equal(err.code, GS_ENOMEM);
			assert_int_equal(b.len, 0);
			failed++;
		} else {
			assert_int_equal(b.len, big.len);
		}
		gs_wbuf_free(&b);
		fail_countdown = k;
		rv = gs_frame_parse(big.data, big.len, &out, &used, &err);
		fail_countdown = -1;
		if (rv < 0) {
			assert_int_equal(err.code, GS_ENOMEM);
			failed++;
		} else {
			assert_int_equal(rv, 1);
			assert_msg_equal(&in, &out);
			gs_msg_clear(&out);
		}
	}
	assert_true(failed >= 3); /* the injection did reach the codec */
	gs_wbuf_free(&big);
	gs_msg_clear(&in);
}

static void test_names(void **state)
{
	uint32_t v;

	(void)state;
	assert_string_equal(gs_priority_name(GS_PRIO_HIGH), "high");
	assert_int_equal(gs_priority_parse("low", &v), 0);
	assert_int_equal(v, GS_PRIO_LOW);
	assert_int_equal(gs_priority_parse("urgent", &v), -1);
	assert_string_equal(gs_mode_name(GS_MODE_SPACE), "space");
	assert_int_equal(gs_mode_parse("time", &v), 0);
	assert_int_equal(v, GS_MODE_TIME);
	assert_int_equal(gs_mode_parse("", &v), -1);
	assert_string_equal(gs_alloc_state_name(GS_ASTATE_HELD), "held");
	assert_string_equal(gs_alloc_state_name(99), "?");
	assert_string_equal(gs_msg_type_name(GS_MSG_TOKEN_GRANT),
			    "TOKEN_GRANT");
	assert_string_equal(gs_msg_type_name(0), "UNKNOWN");
	assert_string_equal(gs_errcode_name(GS_EBUSY), "EBUSY");
	assert_string_equal(gs_errcode_name(-3), "EUNKNOWN");
	gs_status_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_trailing_ignored),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_minor0_frames),
		cmocka_unit_test(test_minor3_frames),
		cmocka_unit_test(test_header_rejects),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_status_counts),
		cmocka_unit_test(test_status_total),
		cmocka_unit_test(test_encode_limits),
		cmocka_unit_test(test_alloc_failures),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
