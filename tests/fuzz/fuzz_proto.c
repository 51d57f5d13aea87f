/*
 * fuzz_proto.c — libFuzzer target for the wire decoder.
 *
 * The input is treated as a byte stream from a peer: frames are parsed
 * one after another with gs_frame_parse exactly as the agent and client
 * do, skipping unknown types.  Every message that decodes is encoded
 * again and decoded back, and must come out identical (a decoder that
 * accepts what its encoder cannot reproduce is a bug).  The first bytes
 * also drive gs_msg_decode directly with each known type, so payload
 * decoders are reached without a valid header.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gs_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const struct gs_msg *m)
{
	struct gs_wbuf b;
	struct gs_error err;
	struct gs_msg again;
	size_t used;

	gs_wbuf_init(&b);
	if (gs_msg_encode(m, &b, &err) < 0) {
		/* only an oversized STATUS_REPLY may fail to re-encode */
		if (err.code != GS_EPROTO)
			abort();
		gs_wbuf_free(&b);
		return;
	}
	if (gs_frame_parse(b.data, b.len, &again, &used, &err) != 1 ||
	    used != b.len || again.type != m->type || again.seq != m->seq)
		abort();
	if (m->type == GS_MSG_STATUS_REPLY) {
		const struct gs_status *x = &m->u.status, *y = &again.u.status;

		if (x->ngpus != y->ngpus || x->nallocs != y->nallocs ||
		    strcmp(x->policy, y->policy) != 0 ||
		    memcmp(x->gpus, y->gpus, x->ngpus * sizeof(*x->gpus)) ||
		    memcmp(x->allocs, y->allocs,
			   x->nallocs * sizeof(*x->allocs)))
			abort();
	} else if (memcmp(&m->u, &again.u, sizeof(m->u)) != 0) {
		abort();
	}
	gs_msg_clear(&again);
	gs_wbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t types[] = {
		GS_MSG_ERROR, GS_MSG_ALLOC_CREATE, GS_MSG_ALLOC_INFO,
		GS_MSG_ALLOC_LABEL, GS_MSG_TOKEN_RELEASE, GS_MSG_STATUS_REPLY,
		GS_MSG_DRAIN, GS_MSG_SET_WEIGHT, GS_MSG_ALLOC_SET_MEM,
		GS_MSG_ATTACH, GS_MSG_SET_PRIORITY, GS_MSG_GPU_FAULT,
	};
	struct gs_frame_hdr h;
	struct gs_error err;
	struct gs_msg m;
	size_t off = 0, used;
	int r;

	while (off < size) {
		r = gs_frame_parse(data + off, size - off, &m, &used, &err);
		if (r == 0)
			break;
		if (r < 0) {
			if (err.code != GS_EUNSUPP)
				break;
			off += used;
			continue;
		}
		check_round_trip(&m);
		gs_msg_clear(&m);
		off += used;
	}

	/* payload decoders on raw bytes */
	if (size > 0 && size <= GS_FRAME_MAX_PAYLOAD) {
		memset(&h, 0, sizeof(h));
		h.magic = GS_PROTO_MAGIC;
		h.major = GS_PROTO_MAJOR;
		h.type = types[data[0] % (sizeof(types) / sizeof(types[0]))];
		h.length = (uint32_t)(size - 1);
		h.seq = 1;
		if (gs_msg_decode(&h, data + 1, &m, &err) == 0) {
			check_round_trip(&m);
			gs_msg_clear(&m);
		}
	}
	return 0;
}
