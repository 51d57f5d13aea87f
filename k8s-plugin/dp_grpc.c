/*
 * dp_grpc.c — gRPC core and protobuf-c for the device plugin (see
 * dp_grpc.h).  The only file of the plugin that includes <grpc/...>.
 *
 * Everything goes through one completion queue, polled by gs_dp_grpc_run
 * with the tick as timeout.  Tags are small structs embedded in the call
 * objects; a call object counts its batches in flight and is freed when
 * the last one completes.  Every server call also has a
 * RECV_CLOSE_ON_SERVER batch, which completes when the peer goes away or
 * the call ends, so a ListAndWatch stream leaves the stream list as soon
 * as the kubelet drops it.
 *
 * Invariants the gRPC core imposes, kept here:
 *  - a stream has at most one SEND_MESSAGE in flight; device changes
 *    while it is busy bump a generation and the stream gets one full
 *    snapshot of the newest list when the send completes;
 *  - every deadline uses GPR_CLOCK_MONOTONIC (mixing clocks aborts);
 *  - grpc_server_cancel_all_calls runs right after shutdown_and_notify,
 *    or an open ListAndWatch holds the shutdown forever;
 *  - the server removes its socket path when destroyed, so every server
 *    start binds a new, unique socket name (a restarted kubelet may have
 *    deleted the old one; a name is never reused while a server that
 *    could unlink it still exists);
 *  - our Register call is asynchronous: the kubelet calls
 *    GetDevicePluginOptions and ListAndWatch on us before it answers.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "dp_grpc.h"
#include "gs_log.h"
#include "kubelet.pb-c.h"

#define M_PREFIX	"/v1beta1.DevicePlugin/"
#define M_REGISTER	"/v1beta1.Registration/Register"
#define M_PODLIST	"/v1.PodResourcesLister/List"

enum tag_kind {
	TAG_NEW = 1,		/* server: request_call completed */
	TAG_RECV,		/* server: request message received */
	TAG_REPLY,		/* server: reply + status sent */
	TAG_SEND,		/* server: one stream message sent */
	TAG_CLOSE,		/* server: call over (RECV_CLOSE_ON_SERVER) */
	TAG_CLIENT,		/* client: whole unary call done */
	TAG_SHUTDOWN,		/* server shutdown complete */
};

enum method {
	M_UNKNOWN = 0,
	M_OPTIONS,
	M_LISTWATCH,
	M_PREFERRED,
	M_ALLOCATE,
	M_PRESTART,
};

static const struct {
	const char *name;
	int method;
} methods[] = {
	{ M_PREFIX "GetDevicePluginOptions", M_OPTIONS },
	{ M_PREFIX "ListAndWatch", M_LISTWATCH },
	{ M_PREFIX "GetPreferredAllocation", M_PREFERRED },
	{ M_PREFIX "Allocate", M_ALLOCATE },
	{ M_PREFIX "PreStartContainer", M_PRESTART },
};

struct tag {
	int kind;
	void *obj;
};

struct scall {
	struct gs_dp_grpc *g;
	grpc_server *server;		/* the server it came from */
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *recv;
	grpc_byte_buffer *send;
	grpc_slice status_msg;
	int has_status_msg;
	int method;
	int pending;			/* batches in flight */
	int cancelled;			/* from RECV_CLOSE_ON_SERVER */
	int closed;
	int in_streams;
	int send_busy;
	uint64_t sent_gen;
	struct scall *next;		/* stream list */
	struct tag t_new, t_recv, t_reply, t_send, t_close;
};

enum ccall_kind { CC_REGISTER = 1, CC_PODLIST = 2 };

struct ccall {
	int kind;
	grpc_channel *ch;
	grpc_call *call;
	grpc_metadata_array init_md, trail_md;
	grpc_byte_buffer *send, *recv;
	grpc_status_code status;
	grpc_slice details;
	struct tag t;
};

struct gs_dp_grpc {
	char plugin_dir[PATH_MAX];
	char kubelet_socket[PATH_MAX];
	char podres_socket[PATH_MAX];
	char resource[256];
	char prefix[64];
	unsigned tick_ms, call_timeout_ms, retry_ms;
	int prestart_required, no_preferred;
	uint64_t next_tick;
	struct gs_dp_handlers h;

	grpc_completion_queue *cq;
	grpc_server *server;
	int server_stopping;
	int shutdown_done;
	struct tag t_shutdown;
	char sock_path[PATH_MAX];
	char endpoint[128];
	unsigned sock_gen;
	size_t live_calls;		/* struct scall not yet freed */
	struct scall *streams;

	struct gs_dp_device *dev;
	size_t ndev;
	uint64_t dev_gen;
	uint8_t *snap;			/* packed ListAndWatchResponse */
	size_t snap_len;
	uint64_t snap_gen;

	struct ccall *reg;
	int registered;
	uint64_t next_reg_ms;
	int reg_fail_logged;
	struct ccall *podl;
};

uint64_t
gs_dp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static gpr_timespec
deadline_in(unsigned ms)
{
	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
	    gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static grpc_status_code
status_of(int code)
{
	switch (code) {
	case GS_EINVAL:
	case GS_ENOENT:
	case GS_EPROTO:
		return GRPC_STATUS_INVALID_ARGUMENT;
	case GS_EBUSY:
	case GS_EDRAINED:
	case GS_EUNHEALTHY:
		return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case GS_ECONNREFUSED:
	case GS_ETIMEDOUT:
	case GS_ECLOSED:
	case GS_EIO:
		return GRPC_STATUS_UNAVAILABLE;
	case GS_EPERM:
		return GRPC_STATUS_PERMISSION_DENIED;
	case GS_EUNSUPP:
		return GRPC_STATUS_UNIMPLEMENTED;
	default:
		return GRPC_STATUS_INTERNAL;
	}
}

/* ---- protobuf <-> byte buffers ---- */

static grpc_byte_buffer *
pack(const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	grpc_byte_buffer *bb;
	grpc_slice s;

	s = grpc_slice_malloc(len);
	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

/* Unpack bb (NULL: an empty message) with desc; NULL on failure. */
static ProtobufCMessage *
unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader r;
	ProtobufCMessage *m;
	grpc_slice s;

	if (bb == NULL)
		return protobuf_c_message_unpack(desc, NULL, 0,
		    (const uint8_t *)"");
	if (!grpc_byte_buffer_reader_init(&r, bb))
		return NULL;
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	m = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s),
	    GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	return m;
}

/* ---- server calls ---- */

static void request_next_call(struct gs_dp_grpc *g);

static void
scall_put(struct scall *c)
{
	struct gs_dp_grpc *g = c->g;
	struct scall **pp;

	if (c->pending > 0)
		return;
	if (c->in_streams) {
		for (pp = &g->streams; *pp != NULL; pp = &(*pp)->next) {
			if (*pp == c) {
				*pp = c->next;
				break;
			}
		}
		c->in_streams = 0;
	}
	if (c->call != NULL)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv != NULL)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send != NULL)
		grpc_byte_buffer_destroy(c->send);
	if (c->has_status_msg)
		grpc_slice_unref(c->status_msg);
	g->live_calls--;
	free(c);
}

static void
request_next_call(struct gs_dp_grpc *g)
{
	struct scall *c;
	grpc_call_error e;

	if (g->server == NULL || g->server_stopping)
		return;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		log_warnx("out of memory: not accepting calls");
		return;
	}
	c->g = g;
	c->server = g->server;
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	c->t_new = (struct tag){ TAG_NEW, c };
	c->t_recv = (struct tag){ TAG_RECV, c };
	c->t_reply = (struct tag){ TAG_REPLY, c };
	c->t_send = (struct tag){ TAG_SEND, c };
	c->t_close = (struct tag){ TAG_CLOSE, c };
	g->live_calls++;
	c->pending = 1;
	e = grpc_server_request_call(g->server, &c->call, &c->details, &c->md,
	    g->cq, g->cq, &c->t_new);
	if (e != GRPC_CALL_OK) {
		log_warnx("grpc_server_request_call: error %d", (int)e);
		c->pending = 0;
		scall_put(c);
	}
}

static int
start_batch(grpc_call *call, const grpc_op *ops, size_t n, struct tag *t,
	    int *pending)
{
	grpc_call_error e;

	e = grpc_call_start_batch(call, ops, n, t, NULL);
	if (e != GRPC_CALL_OK) {
		log_warnx("grpc_call_start_batch: error %d", (int)e);
		return -1;
	}
	(*pending)++;
	return 0;
}

/* Send the reply (msg may be NULL) and the status; msg is packed here. */
static void
reply(struct scall *c, const ProtobufCMessage *msg, grpc_status_code st,
      const char *text)
{
	grpc_op ops[2];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	if (msg != NULL && st == GRPC_STATUS_OK) {
		c->send = pack(msg);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->send;
		n++;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = st;
	if (text != NULL) {
		c->status_msg = grpc_slice_from_copied_string(text);
		c->has_status_msg = 1;
		ops[n].data.send_status_from_server.status_details =
		    &c->status_msg;
	}
	n++;
	start_batch(c->call, ops, n, &c->t_reply, &c->pending);
}

static void
reply_error(struct scall *c, const struct gs_error *err)
{
	log_warnx("%s", err->msg);
	reply(c, NULL, status_of(err->code), err->msg);
}

static void
fill_options(const struct gs_dp_grpc *g, Gsk8s__DevicePluginOptions *o)
{
	o->pre_start_required = g->prestart_required ? 1 : 0;
	o->get_preferred_allocation_available = g->no_preferred ? 0 : 1;
}

static void
do_options(struct scall *c)
{
	Gsk8s__DevicePluginOptions o = GSK8S__DEVICE_PLUGIN_OPTIONS__INIT;

	fill_options(c->g, &o);
	reply(c, &o.base, GRPC_STATUS_OK, NULL);
}

static void
do_prestart(struct scall *c)
{
	struct gs_dp_grpc *g = c->g;
	Gsk8s__Empty e = GSK8S__EMPTY__INIT;
	Gsk8s__PreStartContainerRequest *rq;
	struct gs_error err;

	if (g->h.prestart == NULL) {
		reply(c, &e.base, GRPC_STATUS_OK, NULL);
		return;
	}
	rq = (Gsk8s__PreStartContainerRequest *)unpack(
	    &gsk8s__pre_start_container_request__descriptor, c->recv);
	if (rq == NULL) {
		gs_error_set(&err, GS_EINVAL, "PreStartContainer: cannot "
		    "decode the request");
		reply_error(c, &err);
		return;
	}
	if (g->h.prestart(g->h.ctx, (const char *const *)rq->devices_ids,
	    rq->n_devices_ids, &err) == -1)
		reply_error(c, &err);
	else
		reply(c, &e.base, GRPC_STATUS_OK, NULL);
	protobuf_c_message_free_unpacked(&rq->base, NULL);
}

static void
do_preferred(struct scall *c)
{
	struct gs_dp_grpc *g = c->g;
	Gsk8s__PreferredAllocationRequest *rq;
	Gsk8s__PreferredAllocationResponse rs =
	    GSK8S__PREFERRED_ALLOCATION_RESPONSE__INIT;
	Gsk8s__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
	const char **ids = NULL;
	struct gs_error err;
	size_t i, total = 0;

	rq = (Gsk8s__PreferredAllocationRequest *)unpack(
	    &gsk8s__preferred_allocation_request__descriptor, c->recv);
	if (rq == NULL) {
		gs_error_set(&err, GS_EINVAL, "GetPreferredAllocation: "
		    "cannot decode the request");
		reply_error(c, &err);
		return;
	}
	if (rq->n_container_requests == 0) {
		gs_error_set(&err, GS_EINVAL, "GetPreferredAllocation: no "
		    "container requests");
		goto fail;
	}
	for (i = 0; i < rq->n_container_requests; i++) {
		int32_t sz = rq->container_requests[i]->allocation_size;

		if (sz <= 0 || (size_t)sz > rq->container_requests[i]
		    ->n_available_deviceids + rq->container_requests[i]
		    ->n_must_include_deviceids) {
			gs_error_set(&err, GS_EINVAL, "GetPreferredAllocation: "
			    "allocation_size %d with %zu available IDs", sz,
			    rq->container_requests[i]->n_available_deviceids);
			goto fail;
		}
		total += (size_t)sz;
	}
	cr = calloc(rq->n_container_requests, sizeof(*cr));
	crp = calloc(rq->n_container_requests, sizeof(*crp));
	ids = calloc(total, sizeof(*ids));
	if (cr == NULL || crp == NULL || ids == NULL) {
		gs_error_set(&err, GS_ENOMEM, "out of memory");
		goto fail;
	}
	total = 0;
	for (i = 0; i < rq->n_container_requests; i++) {
		Gsk8s__ContainerPreferredAllocationRequest *q =
		    rq->container_requests[i];
		size_t sz = (size_t)q->allocation_size;

		if (g->h.preferred(g->h.ctx,
		    (const char *const *)q->available_deviceids,
		    q->n_available_deviceids,
		    (const char *const *)q->must_include_deviceids,
		    q->n_must_include_deviceids, sz, ids + total, &err) == -1)
			goto fail;
		gsk8s__container_preferred_allocation_response__init(&cr[i]);
		cr[i].n_deviceids = sz;
		cr[i].deviceids = (char **)(ids + total);
		crp[i] = &cr[i];
		total += sz;
	}
	rs.n_container_responses = rq->n_container_requests;
	rs.container_responses = crp;
	reply(c, &rs.base, GRPC_STATUS_OK, NULL);
	goto out;

fail:
	reply_error(c, &err);
out:
	free(ids);
	free(crp);
	free(cr);
	protobuf_c_message_free_unpacked(&rq->base, NULL);
}

/* One container's response, pointing into ct (which must outlive it). */
struct alloc_out {
	Gsk8s__ContainerAllocateResponse r;
	Gsk8s__StringEntry env[GS_DP_ENV_MAX];
	Gsk8s__StringEntry *envp[GS_DP_ENV_MAX];
	Gsk8s__Mount mount[2];
	Gsk8s__Mount *mountp[2];
	struct gs_dp_container ct;
};

static void
alloc_out_fill(struct alloc_out *o)
{
	size_t i;

	gsk8s__container_allocate_response__init(&o->r);
	for (i = 0; i < o->ct.nenv; i++) {
		gsk8s__string_entry__init(&o->env[i]);
		o->env[i].key = o->ct.env[i].key;
		o->env[i].value = o->ct.env[i].value;
		o->envp[i] = &o->env[i];
	}
	o->r.n_envs = o->ct.nenv;
	o->r.envs = o->envp;
	gsk8s__mount__init(&o->mount[0]);
	o->mount[0].container_path = o->ct.mount_container;
	o->mount[0].host_path = o->ct.mount_host;
	o->mount[0].read_only = o->ct.mount_read_only;
	o->mountp[0] = &o->mount[0];
	/* no mount: an answer that only sets variables (gpu-mem) */
	o->r.n_mounts = o->ct.mount_host[0] != '\0' ? 1 : 0;
	if (o->ct.mps_mount[0] != '\0') {
		/* space mode: the MPS pipe directory, read-write */
		gsk8s__mount__init(&o->mount[1]);
		o->mount[1].container_path = o->ct.mps_mount;
		o->mount[1].host_path = o->ct.mps_mount;
		o->mount[1].read_only = 0;
		o->mountp[1] = &o->mount[1];
		o->r.n_mounts = 2;
	}
	o->r.mounts = o->mountp;
}

static void
do_allocate(struct scall *c)
{
	struct gs_dp_grpc *g = c->g;
	Gsk8s__AllocateRequest *rq;
	Gsk8s__AllocateResponse rs = GSK8S__ALLOCATE_RESPONSE__INIT;
	Gsk8s__ContainerAllocateResponse **rp = NULL;
	struct alloc_out *o = NULL;
	struct gs_error err;
	struct timespec t0, t1;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rq = (Gsk8s__AllocateRequest *)unpack(
	    &gsk8s__allocate_request__descriptor, c->recv);
	if (rq == NULL) {
		gs_error_set(&err, GS_EINVAL, "Allocate: cannot decode the "
		    "request");
		reply_error(c, &err);
		return;
	}
	if (rq->n_container_requests == 0) {
		gs_error_set(&err, GS_EINVAL, "Allocate: no container "
		    "requests");
		goto fail;
	}
	o = calloc(rq->n_container_requests, sizeof(*o));
	rp = calloc(rq->n_container_requests, sizeof(*rp));
	if (o == NULL || rp == NULL) {
		gs_error_set(&err, GS_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < rq->n_container_requests; i++) {
		Gsk8s__ContainerAllocateRequest *q = rq->container_requests[i];

		if (g->h.allocate(g->h.ctx,
		    (const char *const *)q->devices_ids, q->n_devices_ids,
		    &o[i].ct, &err) == -1)
			goto fail;
		alloc_out_fill(&o[i]);
		rp[i] = &o[i].r;
	}
	rs.n_container_responses = rq->n_container_requests;
	rs.container_responses = rp;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	reply(c, &rs.base, GRPC_STATUS_OK, NULL);
	log_debug("Allocate: %zu container(s) answered in %lld us",
	    rq->n_container_requests,
	    (long long)((t1.tv_sec - t0.tv_sec) * 1000000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000));
	goto out;

fail:
	reply_error(c, &err);
out:
	free(rp);
	free(o);
	protobuf_c_message_free_unpacked(&rq->base, NULL);
}

/* Pack the device list once per generation. */
static int
snapshot(struct gs_dp_grpc *g)
{
	Gsk8s__ListAndWatchResponse rs = GSK8S__LIST_AND_WATCH_RESPONSE__INIT;
	Gsk8s__Device *d = NULL, **dp = NULL;
	size_t i, len;
	uint8_t *buf;

	if (g->snap != NULL && g->snap_gen == g->dev_gen)
		return 0;
	if (g->ndev > 0) {
		d = calloc(g->ndev, sizeof(*d));
		dp = calloc(g->ndev, sizeof(*dp));
		if (d == NULL || dp == NULL)
			goto out_nomem;
	}
	for (i = 0; i < g->ndev; i++) {
		gsk8s__device__init(&d[i]);
		d[i].id = g->dev[i].id;
		d[i].health = g->dev[i].healthy ? (char *)GS_DP_HEALTHY :
		    (char *)GS_DP_UNHEALTHY;
		dp[i] = &d[i];
	}
	rs.n_devices = g->ndev;
	rs.devices = dp;
	len = gsk8s__list_and_watch_response__get_packed_size(&rs);
	buf = malloc(len + 1);
	if (buf == NULL)
		goto out_nomem;
	gsk8s__list_and_watch_response__pack(&rs, buf);
	free(g->snap);
	g->snap = buf;
	g->snap_len = len;
	g->snap_gen = g->dev_gen;
	free(dp);
	free(d);
	return 0;

out_nomem:
	free(dp);
	free(d);
	log_warnx("device snapshot: out of memory");
	return -1;
}

/* Give every idle stream the newest snapshot it has not seen. */
static void
feed_streams(struct gs_dp_grpc *g)
{
	struct scall *c;
	grpc_op op;
	grpc_slice s;

	for (c = g->streams; c != NULL; c = c->next) {
		if (c->send_busy || c->closed || c->sent_gen == g->dev_gen)
			continue;
		if (snapshot(g) == -1)
			return;
		if (c->send != NULL) {
			grpc_byte_buffer_destroy(c->send);
			c->send = NULL;
		}
		s = grpc_slice_from_copied_buffer((const char *)g->snap,
		    g->snap_len);
		c->send = grpc_raw_byte_buffer_create(&s, 1);
		grpc_slice_unref(s);
		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_SEND_MESSAGE;
		op.data.send_message.send_message = c->send;
		if (start_batch(c->call, &op, 1, &c->t_send,
		    &c->pending) == 0) {
			c->send_busy = 1;
			c->sent_gen = g->dev_gen;
		}
	}
}

static void
on_recv(struct scall *c, int ok)
{
	if (!ok || c->closed)
		return;
	switch (c->method) {
	case M_OPTIONS:
		do_options(c);
		break;
	case M_PRESTART:
		do_prestart(c);
		break;
	case M_PREFERRED:
		do_preferred(c);
		break;
	case M_ALLOCATE:
		do_allocate(c);
		break;
	case M_LISTWATCH:
		log_debug("ListAndWatch stream opened");
		c->next = c->g->streams;
		c->g->streams = c;
		c->in_streams = 1;
		break;
	default:
		break;
	}
}

static void
on_new(struct scall *c, int ok)
{
	struct gs_dp_grpc *g = c->g;
	grpc_op ops[2];
	size_t i;

	if (!ok)		/* server shutting down */
		return;
	if (c->server == g->server)
		request_next_call(g);
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (grpc_slice_str_cmp(c->details.method, methods[i].name) == 0)
			c->method = methods[i].method;
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[0].data.recv_close_on_server.cancelled = &c->cancelled;
	if (start_batch(c->call, ops, 1, &c->t_close, &c->pending) == -1)
		return;
	if (c->method == M_UNKNOWN) {
		char *m = grpc_slice_to_c_string(c->details.method);
		char text[300];

		snprintf(text, sizeof(text), "method %s is not implemented "
		    "by gshare-device-plugin", m);
		log_warnx("%s", text);
		gpr_free(m);
		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
		if (start_batch(c->call, ops, 1, &c->t_recv, &c->pending) == 0)
			reply(c, NULL, GRPC_STATUS_UNIMPLEMENTED, text);
		return;
	}
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_MESSAGE;
	ops[1].data.recv_message.recv_message = &c->recv;
	start_batch(c->call, ops, 2, &c->t_recv, &c->pending);
}

/* ---- client calls (Register, PodResources List) ---- */

static void
ccall_free(struct ccall *cc)
{
	if (cc == NULL)
		return;
	if (cc->call != NULL)
		grpc_call_unref(cc->call);
	if (cc->ch != NULL)
		grpc_channel_destroy(cc->ch);
	grpc_metadata_array_destroy(&cc->init_md);
	grpc_metadata_array_destroy(&cc->trail_md);
	if (cc->send != NULL)
		grpc_byte_buffer_destroy(cc->send);
	if (cc->recv != NULL)
		grpc_byte_buffer_destroy(cc->recv);
	grpc_slice_unref(cc->details);
	free(cc);
}

static struct ccall *
ccall_start(struct gs_dp_grpc *g, int kind, const char *sock,
	    const char *method, const ProtobufCMessage *msg)
{
	grpc_channel_credentials *creds;
	struct ccall *cc;
	char target[PATH_MAX + 8];
	grpc_slice m;
	grpc_op ops[6];

	cc = calloc(1, sizeof(*cc));
	if (cc == NULL)
		return NULL;
	cc->kind = kind;
	cc->t = (struct tag){ TAG_CLIENT, cc };
	cc->details = grpc_empty_slice();
	grpc_metadata_array_init(&cc->init_md);
	grpc_metadata_array_init(&cc->trail_md);
	snprintf(target, sizeof(target), "unix:%s", sock);
	creds = grpc_insecure_credentials_create();
	cc->ch = grpc_channel_create(target, creds, NULL);
	grpc_channel_credentials_release(creds);
	if (cc->ch == NULL)
		goto out_free;
	m = grpc_slice_from_static_string(method);
	cc->call = grpc_channel_create_call(cc->ch, NULL,
	    GRPC_PROPAGATE_DEFAULTS, g->cq, m, NULL,
	    deadline_in(g->call_timeout_ms), NULL);
	if (cc->call == NULL)
		goto out_free;
	cc->send = pack(msg);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = cc->send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata =
	    &cc->init_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &cc->recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &cc->trail_md;
	ops[5].data.recv_status_on_client.status = &cc->status;
	ops[5].data.recv_status_on_client.status_details = &cc->details;
	if (grpc_call_start_batch(cc->call, ops, 6, &cc->t, NULL) !=
	    GRPC_CALL_OK)
		goto out_free;
	return cc;

out_free:
	ccall_free(cc);
	return NULL;
}

static void
start_register(struct gs_dp_grpc *g)
{
	Gsk8s__RegisterRequest rq = GSK8S__REGISTER_REQUEST__INIT;
	Gsk8s__DevicePluginOptions o = GSK8S__DEVICE_PLUGIN_OPTIONS__INIT;

	fill_options(g, &o);
	rq.version = (char *)GS_DP_API_VERSION;
	rq.endpoint = g->endpoint;
	rq.resource_name = g->resource;
	rq.options = &o;
	g->reg = ccall_start(g, CC_REGISTER, g->kubelet_socket, M_REGISTER,
	    &rq.base);
	if (g->reg == NULL) {
		log_warnx("cannot start Register call to %s",
		    g->kubelet_socket);
		g->next_reg_ms = gs_dp_now_ms() + g->retry_ms;
	}
}

static void
on_register_done(struct gs_dp_grpc *g, struct ccall *cc)
{
	g->reg = NULL;
	if (cc->status == GRPC_STATUS_OK) {
		g->registered = 1;
		g->reg_fail_logged = 0;
		log_info("registered %s with the kubelet at %s (endpoint %s)",
		    g->resource, g->kubelet_socket, g->endpoint);
		if (g->h.registered != NULL)
			g->h.registered(g->h.ctx, g->endpoint);
	} else {
		char *d = grpc_slice_to_c_string(cc->details);

		if (!g->reg_fail_logged)
			log_warnx("Register with the kubelet at %s failed "
			    "(status %d: %s); retrying every %u ms",
			    g->kubelet_socket, (int)cc->status, d,
			    g->retry_ms);
		g->reg_fail_logged = 1;
		gpr_free(d);
		g->next_reg_ms = gs_dp_now_ms() + g->retry_ms;
	}
	ccall_free(cc);
}

void
gs_dp_grpc_list_pods(struct gs_dp_grpc *g)
{
	Gsk8s__Empty e = GSK8S__EMPTY__INIT;

	if (g->podl != NULL || g->podres_socket[0] == '\0')
		return;
	g->podl = ccall_start(g, CC_PODLIST, g->podres_socket, M_PODLIST,
	    &e.base);
	if (g->podl == NULL)
		g->h.pods(g->h.ctx, 0, NULL, 0, gs_dp_now_ms());
}

/*
 * A List reply flattened to one entry per (container, device resource),
 * only `resource`'s when it is not NULL; the strings are the reply's.
 * *n: how many.  NULL: out of memory.
 */
static struct gs_dp_podctr *
podctrs(const Gsk8s__ListPodResourcesResponse *rs, const char *resource,
	size_t *n)
{
	struct gs_dp_podctr *pcs;
	size_t i, j, k, m = 0;

	for (i = 0; i < rs->n_pod_resources; i++)
		for (j = 0; j < rs->pod_resources[i]->n_containers; j++)
			m += rs->pod_resources[i]->containers[j]->n_devices;
	pcs = calloc(m + 1, sizeof(*pcs));
	if (pcs == NULL)
		return NULL;
	m = 0;
	for (i = 0; i < rs->n_pod_resources; i++) {
		Gsk8s__PodResources *p = rs->pod_resources[i];

		for (j = 0; j < p->n_containers; j++) {
			Gsk8s__ContainerResources *cr = p->containers[j];

			for (k = 0; k < cr->n_devices; k++) {
				Gsk8s__ContainerDevices *d = cr->devices[k];

				if (resource != NULL &&
				    strcmp(d->resource_name, resource) != 0)
					continue;
				pcs[m].ns = p->namespace_;
				pcs[m].pod = p->name;
				pcs[m].container = cr->name;
				pcs[m].resource = d->resource_name;
				pcs[m].ids = (const char *const *)d->device_ids;
				pcs[m].nids = d->n_device_ids;
				m++;
			}
		}
	}
	*n = m;
	return pcs;
}

static void
on_podlist_done(struct gs_dp_grpc *g, struct ccall *cc)
{
	Gsk8s__ListPodResourcesResponse *rs = NULL;
	struct gs_dp_podctr *pcs = NULL;
	size_t n = 0;
	int ok = 0;

	g->podl = NULL;
	if (cc->status != GRPC_STATUS_OK) {
		char *d = grpc_slice_to_c_string(cc->details);

		log_debug("PodResources List: status %d: %s",
		    (int)cc->status, d);
		gpr_free(d);
		goto out;
	}
	rs = (Gsk8s__ListPodResourcesResponse *)unpack(
	    &gsk8s__list_pod_resources_response__descriptor, cc->recv);
	if (rs == NULL) {
		log_warnx("PodResources List: cannot decode the reply");
		goto out;
	}
	if ((pcs = podctrs(rs, g->resource, &n)) == NULL)
		goto out;
	ok = 1;
out:
	g->h.pods(g->h.ctx, ok, pcs, n, gs_dp_now_ms());
	free(pcs);
	if (rs != NULL)
		protobuf_c_message_free_unpacked(&rs->base, NULL);
	ccall_free(cc);
}

int
gs_dp_grpc_pods_now(struct gs_dp_grpc *g,
		    void (*fn)(void *arg, const struct gs_dp_podctr *pcs,
			       size_t n),
		    void *arg, struct gs_error *err)
{
	Gsk8s__Empty e = GSK8S__EMPTY__INIT;
	Gsk8s__ListPodResourcesResponse *rs = NULL;
	struct gs_dp_podctr *pcs = NULL;
	grpc_completion_queue *cq;
	struct gs_dp_grpc tmp;
	struct ccall *cc;
	grpc_event ev;
	size_t n = 0;
	int rv = -1;

	if (g->podres_socket[0] == '\0')
		return gs_error_set(err, GS_EINVAL, "no PodResources socket "
		    "configured");
	/* its own queue: the call is waited for here, not in the loop */
	cq = grpc_completion_queue_create_for_pluck(NULL);
	tmp = (struct gs_dp_grpc){ .cq = cq,
	    .call_timeout_ms = g->call_timeout_ms };
	cc = ccall_start(&tmp, CC_PODLIST, g->podres_socket, M_PODLIST,
	    &e.base);
	if (cc == NULL) {
		gs_error_set(err, GS_EIO, "cannot start a PodResources List "
		    "call to %s", g->podres_socket);
		goto out_cq;
	}
	ev = grpc_completion_queue_pluck(cq, &cc->t,
	    deadline_in(g->call_timeout_ms + 1000), NULL);
	if (ev.type != GRPC_OP_COMPLETE) {
		grpc_call_cancel(cc->call, NULL);
		grpc_completion_queue_pluck(cq, &cc->t,
		    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		gs_error_set(err, GS_ETIMEDOUT, "PodResources List at %s "
		    "timed out", g->podres_socket);
		goto out;
	}
	if (cc->status != GRPC_STATUS_OK) {
		char *d = grpc_slice_to_c_string(cc->details);

		gs_error_set(err, GS_EIO, "PodResources List at %s: status "
		    "%d: %s", g->podres_socket, (int)cc->status, d);
		gpr_free(d);
		goto out;
	}
	rs = (Gsk8s__ListPodResourcesResponse *)unpack(
	    &gsk8s__list_pod_resources_response__descriptor, cc->recv);
	if (rs == NULL) {
		gs_error_set(err, GS_EPROTO, "PodResources List: cannot "
		    "decode the reply");
		goto out;
	}
	if ((pcs = podctrs(rs, NULL, &n)) == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		goto out;
	}
	fn(arg, pcs, n);
	rv = 0;
out:
	free(pcs);
	if (rs != NULL)
		protobuf_c_message_free_unpacked(&rs->base, NULL);
	ccall_free(cc);
out_cq:
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_destroy(cq);
	return rv;
}

/* ---- dispatch ---- */

static void
dispatch(struct gs_dp_grpc *g, struct tag *t, int ok)
{
	struct scall *c;

	switch (t->kind) {
	case TAG_SHUTDOWN:
		g->shutdown_done = 1;
		return;
	case TAG_CLIENT: {
		struct ccall *cc = t->obj;

		if (cc->kind == CC_REGISTER)
			on_register_done(g, cc);
		else
			on_podlist_done(g, cc);
		return;
	}
	default:
		break;
	}
	c = t->obj;
	c->pending--;
	switch (t->kind) {
	case TAG_NEW:
		on_new(c, ok);
		break;
	case TAG_RECV:
		on_recv(c, ok);
		break;
	case TAG_REPLY:
		break;
	case TAG_SEND:
		c->send_busy = 0;
		if (!ok)
			c->closed = 1;
		break;
	case TAG_CLOSE:
		c->closed = 1;
		if (c->method == M_LISTWATCH)
			log_debug("ListAndWatch stream closed%s",
			    c->cancelled ? " (cancelled)" : "");
		break;
	default:
		break;
	}
	scall_put(c);
}

/* Wait up to ms for one event and handle it; 1 when one was handled. */
static int
pump(struct gs_dp_grpc *g, unsigned ms)
{
	grpc_event ev;

	ev = grpc_completion_queue_next(g->cq, deadline_in(ms), NULL);
	if (ev.type != GRPC_OP_COMPLETE)
		return 0;
	dispatch(g, ev.tag, ev.success);
	return 1;
}

/* ---- server lifecycle ---- */

static void
server_stop(struct gs_dp_grpc *g)
{
	uint64_t until;

	if (g->server == NULL)
		return;
	g->server_stopping = 1;
	g->shutdown_done = 0;
	grpc_server_shutdown_and_notify(g->server, g->cq, &g->t_shutdown);
	grpc_server_cancel_all_calls(g->server);
	until = gs_dp_now_ms() + 10000;
	while (!g->shutdown_done && gs_dp_now_ms() < until)
		pump(g, 100);
	if (!g->shutdown_done)
		log_warnx("gRPC server shutdown did not complete in 10 s");
	grpc_server_destroy(g->server);
	g->server = NULL;
	g->server_stopping = 0;
	g->registered = 0;
}

static int
server_start(struct gs_dp_grpc *g, struct gs_error *err)
{
	grpc_server_credentials *creds;
	char addr[PATH_MAX + 8];
	int n, port;

	g->sock_gen++;
	n = snprintf(g->endpoint, sizeof(g->endpoint), "%s-%ld-%u.sock",
	    g->prefix, (long)getpid(), g->sock_gen);
	if (n < 0 || (size_t)n >= sizeof(g->endpoint))
		return gs_error_set(err, GS_EINVAL, "endpoint name too long");
	n = snprintf(g->sock_path, sizeof(g->sock_path), "%s/%s",
	    g->plugin_dir, g->endpoint);
	if (n < 0 || (size_t)n >= sizeof(g->sock_path))
		return gs_error_set(err, GS_EINVAL, "socket path too long");
	snprintf(addr, sizeof(addr), "unix:%s", g->sock_path);
	g->server = grpc_server_create(NULL, NULL);
	grpc_server_register_completion_queue(g->server, g->cq, NULL);
	creds = grpc_insecure_server_credentials_create();
	port = grpc_server_add_http2_port(g->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (port == 0) {
		grpc_server_destroy(g->server);
		g->server = NULL;
		return gs_error_set(err, GS_EIO, "cannot listen on %s "
		    "(does %s exist and is it writable?)", g->sock_path,
		    g->plugin_dir);
	}
	grpc_server_start(g->server);
	request_next_call(g);
	g->registered = 0;
	g->next_reg_ms = 0;
	log_info("serving %s on %s", GS_DP_API_VERSION, g->sock_path);
	return 0;
}

/* ---- public ---- */

static int
copy_opt(char *dst, size_t len, const char *src, const char *what,
	 struct gs_error *err)
{
	if (src == NULL)
		src = "";
	if (strlen(src) >= len)
		return gs_error_set(err, GS_EINVAL, "%s too long", what);
	strcpy(dst, src);
	return 0;
}

int
gs_dp_grpc_new(const struct gs_dp_grpc_opts *o,
	       const struct gs_dp_handlers *h, struct gs_dp_grpc **out,
	       struct gs_error *err)
{
	struct gs_dp_grpc *g;

	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	if (copy_opt(g->plugin_dir, sizeof(g->plugin_dir), o->plugin_dir,
	    "plugin directory", err) == -1 ||
	    copy_opt(g->kubelet_socket, sizeof(g->kubelet_socket),
	    o->kubelet_socket, "kubelet socket", err) == -1 ||
	    copy_opt(g->podres_socket, sizeof(g->podres_socket),
	    o->podres_socket, "pod-resources socket", err) == -1 ||
	    copy_opt(g->resource, sizeof(g->resource), o->resource,
	    "resource name", err) == -1 ||
	    copy_opt(g->prefix, sizeof(g->prefix), o->endpoint_prefix,
	    "endpoint prefix", err) == -1) {
		free(g);
		return -1;
	}
	g->tick_ms = o->tick_ms ? o->tick_ms : 100;
	g->call_timeout_ms = o->call_timeout_ms ? o->call_timeout_ms : 5000;
	g->retry_ms = o->retry_ms ? o->retry_ms : 500;
	g->prestart_required = o->prestart_required;
	g->no_preferred = o->no_preferred;
	g->h = *h;
	g->t_shutdown = (struct tag){ TAG_SHUTDOWN, NULL };
	g->dev_gen = 1;
	grpc_init();
	g->cq = grpc_completion_queue_create_for_next(NULL);
	if (server_start(g, err) == -1) {
		grpc_completion_queue_shutdown(g->cq);
		while (grpc_completion_queue_next(g->cq,
		    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
		    GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(g->cq);
		grpc_shutdown_blocking();
		free(g);
		return -1;
	}
	*out = g;
	return 0;
}

void
gs_dp_grpc_free(struct gs_dp_grpc *g)
{
	uint64_t until;
	grpc_event ev;

	if (g == NULL)
		return;
	server_stop(g);
	if (g->reg != NULL)
		grpc_call_cancel(g->reg->call, NULL);
	if (g->podl != NULL)
		grpc_call_cancel(g->podl->call, NULL);
	until = gs_dp_now_ms() + 5000;
	while ((g->reg != NULL || g->podl != NULL || g->live_calls > 0) &&
	    gs_dp_now_ms() < until)
		pump(g, 100);
	grpc_completion_queue_shutdown(g->cq);
	do {
		ev = grpc_completion_queue_next(g->cq,
		    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		if (ev.type == GRPC_OP_COMPLETE)
			dispatch(g, ev.tag, ev.success);
	} while (ev.type != GRPC_QUEUE_SHUTDOWN);
	grpc_completion_queue_destroy(g->cq);
	grpc_shutdown_blocking();
	free(g->dev);
	free(g->snap);
	free(g);
}

int
gs_dp_grpc_set_devices(struct gs_dp_grpc *g, const struct gs_dp_device *d,
		       size_t n, struct gs_error *err)
{
	struct gs_dp_device *nd = NULL;

	if (n == g->ndev && (n == 0 || memcmp(d, g->dev, n * sizeof(*d)) == 0))
		return 0;
	if (n > 0) {
		nd = malloc(n * sizeof(*nd));
		if (nd == NULL)
			return gs_error_set(err, GS_ENOMEM, "out of memory");
		memcpy(nd, d, n * sizeof(*nd));
	}
	free(g->dev);
	g->dev = nd;
	g->ndev = n;
	g->dev_gen++;
	feed_streams(g);
	return 0;
}

int
gs_dp_grpc_step(struct gs_dp_grpc *g, unsigned wait_ms, struct gs_error *err)
{
	uint64_t now;
	struct stat sb;

	now = gs_dp_now_ms();
	if (now >= g->next_tick) {
		/* The kubelet deletes every socket in its directory
		 * when it starts: serve anew and register again. */
		if (g->server != NULL && !g->server_stopping &&
		    lstat(g->sock_path, &sb) == -1 && errno == ENOENT) {
			log_info("socket %s was removed (kubelet "
			    "restart?): serving on a new socket and "
			    "registering again", g->sock_path);
			server_stop(g);
		}
		if (g->server == NULL && server_start(g, err) == -1)
			return -1;
		if (!g->registered && g->reg == NULL &&
		    now >= g->next_reg_ms)
			start_register(g);
		if (g->h.tick != NULL)
			g->h.tick(g->h.ctx, now);
		g->next_tick = now + g->tick_ms;
	}
	feed_streams(g);
	now = gs_dp_now_ms();
	if (g->next_tick > now && g->next_tick - now < wait_ms)
		wait_ms = (unsigned)(g->next_tick - now);
	pump(g, wait_ms);
	while (pump(g, 0))
		;
	return 0;
}

int
gs_dp_grpc_run(struct gs_dp_grpc *g, volatile sig_atomic_t *stop,
	       struct gs_error *err)
{
	while (!*stop)
		if (gs_dp_grpc_step(g, g->tick_ms, err) == -1)
			return -1;
	return 0;
}
