/*
 * gs_proto.h — gshare wire protocol (agent ⇄ plugins, CLIs, runtime).
 *
 * Transport: Unix stream socket.  Every message is one frame:
 *
 *   offset size field
 *   0      4    magic   GS_PROTO_MAGIC, little-endian
 *   4      1    major   GS_PROTO_MAJOR; a foreign major is refused
 *   5      1    minor   newer minors only append payload fields
 *   6      2    type    enum gs_msg_type, little-endian
 *   8      4    length  payload bytes, <= GS_FRAME_MAX_PAYLOAD
 *   12     4    seq     request id; a reply repeats it; 0 for events
 *   16     ...  payload
 *
 * Payload fields are little-endian integers and strings encoded as u16
 * length + bytes (no NUL); every field is bounds-checked before use and
 * decoders ignore trailing bytes (forward compatible minors).  The exact
 * per-message layout is in docs/protocol.md.
 *
 * Requests and replies (R = root only, O = owner or root, A = anyone):
 *   PING            A  → OK
 *   ALLOC_CREATE    R  gs_alloc_req               → ALLOC_INFO | ERROR
 *   ALLOC_CLOSE     R  {id, end_state (1.3)}      → ALLOC_INFO (final usage)
 *   ALLOC_LABEL     R  {id, gs_labels}            → ALLOC_INFO (labels
 *                                                    replaced; the device
 *                                                    plugin learns a pod's
 *                                                    name only after its
 *                                                    allocation exists)
 *   ALLOC_SET_MEM   R  {id, mem_limit}            → ALLOC_INFO (the memory
 *                                                    limit settled anew;
 *                                                    only while no process
 *                                                    is attached)
 *   ATTACH          O  {id}                       → ATTACHED + fd (SCM_RIGHTS)
 *   TOKEN_WANT      O  {}  (attached conn only)   → no reply; GRANT event later
 *   TOKEN_RELEASE   O  gs_release                 → no reply
 *   TOKEN_UNWANT    O  {}  (1.7, attached conn)   → OK: the process no
 *                                                    longer waits (it gave
 *                                                    the token back before
 *                                                    its work had left the
 *                                                    GPU and then found
 *                                                    none left); a grant
 *                                                    sent before the OK is
 *                                                    taken back unused
 *   STATUS          A  {after_id}                 → STATUS_REPLY (non-root: own
 *                                                    allocations only)
 *   SET_WEIGHT      R  {id, weight}               → OK
 *   SET_PRIORITY    R  {id, priority}             → OK
 *   DRAIN           R  {gpu, on}                  → OK
 *   GPU_FAULT       R  {gpu, on}                  → OK (simulated GPUs only:
 *                                                    inject / clear a fault,
 *                                                    for tests)
 * Events (agent → attached job, seq 0): TOKEN_GRANT {gen, slice_ns};
 * TOKEN_SOON {spin_ns} (1.6): the holder was just asked to suspend and
 * this job is next in line, so a grant is likely within spin_ns; a job
 * waiting for it may poll instead of sleeping until then.  A hint only:
 * nothing is granted, and jobs before 1.6 skip it as an unknown event.
 * Any request may be answered with ERROR {code, message}; an unknown type
 * gets ERROR GS_EUNSUPP; a malformed frame gets ERROR GS_EPROTO and the
 * connection is closed.  TOKEN_WANT/RELEASE errors come back as ERROR with
 * the request's seq.
 */
#ifndef GS_PROTO_H
#define GS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "gs_error.h"

#define GS_PROTO_MAGIC		0x52485347u	/* "GSHR" */
#define GS_PROTO_MAJOR		1
#define GS_PROTO_MINOR		7
#define GS_FRAME_HDR_SIZE	16
#define GS_FRAME_MAX_PAYLOAD	(64u * 1024u)

#define GS_DEFAULT_SOCKET	"/run/gshare/gshared.sock"
#define GS_SHARES_PER_GPU	100

/* Environment contract between plugins and the runtime. */
#define GS_ENV_SOCKET		"GSHARE_SOCKET"
#define GS_ENV_ALLOC		"GSHARE_ALLOC"
/* space mode: set by the plugins from the CREATE reply (1.3) */
#define GS_ENV_MPS_PIPE		"CUDA_MPS_PIPE_DIRECTORY"
#define GS_ENV_MPS_PCT		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"

enum gs_msg_type {
	GS_MSG_ERROR = 1,
	GS_MSG_OK = 2,
	GS_MSG_PING = 3,
	GS_MSG_ALLOC_CREATE = 10,
	GS_MSG_ALLOC_CLOSE = 11,
	GS_MSG_ALLOC_INFO = 12,
	GS_MSG_ATTACH = 13,
	GS_MSG_ATTACHED = 14,
	GS_MSG_ALLOC_LABEL = 15,
	GS_MSG_ALLOC_SET_MEM = 16,	/* 1.5 */
	GS_MSG_TOKEN_WANT = 20,
	GS_MSG_TOKEN_GRANT = 21,
	GS_MSG_TOKEN_RELEASE = 22,
	GS_MSG_TOKEN_SOON = 23,		/* 1.6: event, agent → job */
	GS_MSG_TOKEN_UNWANT = 24,	/* 1.7 */
	GS_MSG_STATUS = 30,
	GS_MSG_STATUS_REPLY = 31,
	GS_MSG_SET_WEIGHT = 32,
	GS_MSG_SET_PRIORITY = 33,
	GS_MSG_DRAIN = 34,
	GS_MSG_GPU_FAULT = 35,	/* 1.1: simulated GPUs only */
};

struct gs_frame_hdr {
	uint32_t magic;
	uint8_t major;
	uint8_t minor;
	uint16_t type;
	uint32_t length;
	uint32_t seq;
};

enum gs_priority { GS_PRIO_LOW = 0, GS_PRIO_NORMAL = 1, GS_PRIO_HIGH = 2 };
enum gs_mode { GS_MODE_TIME = 0, GS_MODE_SPACE = 1 };

enum gs_alloc_state {
	GS_ASTATE_CREATED = 0,	/* no job attached yet */
	GS_ASTATE_IDLE = 1,	/* attached, not asking for the GPU */
	GS_ASTATE_WAITING = 2,	/* wants the token */
	GS_ASTATE_RUNNING = 3,	/* holds the token */
	GS_ASTATE_SUSPENDING = 4,	/* told to suspend, not yet released */
	GS_ASTATE_HELD = 5,	/* held back after overrunning */
	GS_ASTATE_CLOSED = 6,
};

enum gs_release_reason {
	GS_REL_SUSPENDED = 0,	/* evicted by a suspend */
	GS_REL_IDLE = 1,	/* ran out of work */
	GS_REL_IOWAIT = 2,	/* every block waits on host I/O */
	GS_REL_EXIT = 3,	/* job finishing */
};

#define GS_LABEL_MAX	64
#define GS_UUID_MAX	64
#define GS_WARNING_MAX	256	/* status warning */
#define GS_PATH_MAX	256

/* Who an allocation belongs to; empty strings when unknown. */
struct gs_labels {
	char cluster[GS_LABEL_MAX];
	char job[GS_LABEL_MAX];		/* Slurm job id */
	char step[GS_LABEL_MAX];	/* Slurm step id ("batch", "0", ...) */
	char node[GS_LABEL_MAX];	/* node name / index */
	char ns[GS_LABEL_MAX];		/* Kubernetes namespace */
	char pod[GS_LABEL_MAX * 2];
	char container[GS_LABEL_MAX];
	char user[GS_LABEL_MAX];
	char account[GS_LABEL_MAX];
};

/* Allocation flags (alloc_req and alloc_info, appended in 1.1). */
#define GS_ALLOC_ANY_UID	0x1u	/* any uid may attach, not just uid */
#define GS_ALLOC_FLAGS_KNOWN	GS_ALLOC_ANY_UID

struct gs_alloc_req {
	int32_t gpu;		/* GPU index, -1: agent places it */
	uint32_t shares;	/* 1..100 guaranteed shares */
	uint32_t weight;	/* 0: same as shares */
	uint32_t priority;	/* enum gs_priority */
	uint32_t mode;		/* enum gs_mode */
	uint32_t uid;		/* owner: only this uid (or root) attaches */
	struct gs_labels labels;
	uint32_t flags;		/* GS_ALLOC_*; 1.1, absent: 0 */
	uint64_t mem_limit;	/* device memory limit, bytes; 1.4, absent
				 * or 0: the site's default for the shares */
};

struct gs_alloc_info {
	uint64_t id;
	int32_t gpu;
	char gpu_uuid[GS_UUID_MAX];
	uint32_t shares, weight, priority, mode, uid;
	uint32_t state;		/* enum gs_alloc_state */
	uint32_t pid;		/* attached job process, 0 if none */
	struct gs_labels labels;
	uint64_t created_unix_ns;
	uint64_t gpu_ns;	/* GPU time used (runtime-reported) */
	uint64_t held_ns;	/* token time held */
	uint64_t suspensions;
	uint64_t block_tasks;
	uint64_t vtime_ns;	/* scheduler virtual time */
	uint32_t flags;		/* GS_ALLOC_*; 1.1, absent: 0 */
	uint32_t nattached;	/* attached processes; 1.3, absent: 0 */
	/* space mode (1.3, absent: 0 / ""), docs/space.md */
	uint32_t sm_first;	/* SM partition while its group runs */
	uint32_t sm_count;	/* 0: none planned (time mode, idle) */
	uint32_t mps_pct;	/* CUDA_MPS_ACTIVE_THREAD_PERCENTAGE for
				 * jobs without libgshare, 0: none */
	char mps_pipe[GS_PATH_MAX];	/* CUDA_MPS_PIPE_DIRECTORY for the
					 * job, "": not an MPS client */
	char space_why[GS_LABEL_MAX];	/* the planner's decision */
	uint32_t unmanaged;	/* its GPU processes that bypass the gate;
				 * 1.4, absent: 0 */
	uint32_t unmanaged_held;	/* of those, held back; 1.4 */
	uint64_t mem_limit;	/* 1.4 (absent: 0): device memory limit,
				 * bytes; 0: none */
	uint64_t mem_used;	/* 1.4: device memory the job holds now
				 * (job-reported, all its processes), bytes */
	uint64_t mem_peak;	/* 1.4: the most it held at once */
};

struct gs_gpu_info {
	int32_t index;
	char uuid[GS_UUID_MAX];
	char name[GS_LABEL_MAX];
	uint32_t shares_total;	/* usually 100 */
	uint32_t shares_used;	/* guaranteed shares allocated */
	uint32_t healthy;	/* 0: lost / failing */
	uint32_t drained;	/* 1: no new allocations */
	uint32_t simulated;	/* 1: simulated backend */
	uint64_t holder;	/* allocation holding the token, 0 none */
	char health[GS_LABEL_MAX];	/* why unhealthy, "" when healthy;
					 * 1.1, absent: "" */
	uint32_t unmanaged;	/* GPU processes of no allocation; 1.4,
				 * absent: 0 */
	uint64_t mem_total;	/* 1.4 (absent: 0): device memory, bytes;
				 * 0: unknown */
	uint64_t mem_limits;	/* 1.4: sum of the memory limits of the
				 * allocations placed here */
};

struct gs_status {
	char policy[32];
	uint64_t slice_ns;
	uint32_t ngpus;
	struct gs_gpu_info *gpus;
	uint32_t nallocs;
	struct gs_alloc_info *allocs;
	uint32_t nallocs_total;	/* allocations the caller may see in all;
				 * more than nallocs when the listing
				 * takes several pages (a field appended
				 * after the arrays: decoders of frames
				 * without it set nallocs) */
	uint32_t more;		/* 1.2, absent: 0.  1: allocations with
				 * larger ids did not fit; ask again with
				 * after_id = the last id listed */
	char warning[GS_WARNING_MAX];	/* 1.3, absent: "".  What the agent
					 * wants an operator to know now
					 * (the usage store is behind) */
};

/* Frame header codec.  decode checks magic, major and length bound and
 * fills h; it returns 0, or -1 with GS_EPROTO / GS_EVERSION in err. */
void gs_frame_hdr_encode(const struct gs_frame_hdr *h,
			 uint8_t out[GS_FRAME_HDR_SIZE]);
int gs_frame_hdr_decode(const uint8_t *buf, size_t len,
			struct gs_frame_hdr *h, struct gs_error *err);

/* Names for enums ("low", "time", "running", ...); parse returns -1 on
 * unknown names. */
const char *gs_priority_name(uint32_t p);
int gs_priority_parse(const char *s, uint32_t *out);
const char *gs_mode_name(uint32_t m);
int gs_mode_parse(const char *s, uint32_t *out);
const char *gs_alloc_state_name(uint32_t s);
const char *gs_msg_type_name(uint32_t t);

/* Free a heap-allocated status and its arrays; NULL is a no-op. */
void gs_status_free(struct gs_status *st);

/*
 * Message codec.  One struct gs_msg holds any message; `type` selects the
 * union member:
 *   ERROR                 error {code, message}
 *   OK, PING, TOKEN_WANT  (no payload)
 *   STATUS                after_id (1.2; absent: 0)
 *   ALLOC_CREATE          req
 *   ALLOC_INFO, ATTACHED  info
 *   ALLOC_CLOSE           close {id, end_state}: id is u.id too
 *   ATTACH                id
 *   TOKEN_GRANT           grant
 *   TOKEN_SOON            soon_ns
 *   TOKEN_RELEASE         release
 *   STATUS_REPLY          status (arrays owned by the message)
 *   ALLOC_LABEL           label {id, labels}
 *   ALLOC_SET_MEM         setmem {id, mem_limit}
 *   SET_WEIGHT, SET_PRIORITY  set {id, value}
 *   DRAIN, GPU_FAULT      drain {gpu, on}
 * Strings decode NUL-terminated into the fixed arrays; a wire string that
 * does not fit, or holds a NUL byte, is GS_EPROTO.
 */
/*
 * How the job that held an allocation ended, as the closer (the Slurm
 * epilog: the job's state) tells ALLOC_CLOSE; the usage store's State.
 * 0 (absent, before 1.3): the agent decides (COMPLETED, or CANCELLED
 * after a kill escalation).
 */
enum gs_end_state {
	GS_END_DEFAULT = 0,
	GS_END_COMPLETED = 1,
	GS_END_FAILED = 2,
	GS_END_CANCELLED = 3,
	GS_END_NODE_FAIL = 4,
	GS_END_TIMEOUT = 5,
	GS_END_MAX
};

struct gs_release {
	uint64_t gen;		/* grant generation being returned */
	uint64_t gpu_ns;	/* GPU time used during the grant */
	uint64_t evict_ns;	/* suspend_set_ns -> kernels exited, 0: n/a */
	uint32_t reason;	/* enum gs_release_reason */
};

struct gs_msg {
	uint16_t type;		/* enum gs_msg_type */
	uint32_t seq;
	union {
		struct gs_error error;
		struct gs_alloc_req req;
		struct gs_alloc_info info;
		uint64_t id;
		struct {
			uint64_t gen;
			uint64_t slice_ns;
		} grant;
		struct gs_release release;
		uint64_t soon_ns;	/* TOKEN_SOON: spin_ns */
		struct gs_status status;
		uint64_t after_id;	/* STATUS: list ids > after_id */
		struct {
			uint64_t id;	/* first: u.id reads it too */
			uint32_t end_state;	/* enum gs_end_state; 1.3 */
		} close;
		struct {
			uint64_t id;
			struct gs_labels labels;
		} label;
		struct {
			uint64_t id;
			uint32_t value;
		} set;
		struct {
			uint64_t id;
			uint64_t mem_limit;	/* bytes, 0: the default */
		} setmem;
		struct {
			int32_t gpu;
			uint32_t on;
		} drain;
	} u;
};

/* Growable byte buffer for encoding; zero-initialize or gs_wbuf_init. */
struct gs_wbuf {
	uint8_t *data;
	size_t len, cap;
};
void gs_wbuf_init(struct gs_wbuf *b);
void gs_wbuf_free(struct gs_wbuf *b);
/* Drop the first n bytes (consumed output). */
void gs_wbuf_consume(struct gs_wbuf *b, size_t n);

/* Append one whole frame (header + payload) for m to out.  GS_EINVAL for
 * an unknown type, GS_EPROTO when the payload would exceed
 * GS_FRAME_MAX_PAYLOAD, GS_ENOMEM.  out is unchanged on failure. */
int gs_msg_encode(const struct gs_msg *m, struct gs_wbuf *out,
		  struct gs_error *err);

/* Decode the payload of a frame whose header was already decoded.
 * GS_EUNSUPP for an unknown type (m->type and m->seq are still set),
 * GS_EPROTO for a short or malformed payload.  Trailing bytes are
 * ignored.  On success release with gs_msg_clear. */
int gs_msg_decode(const struct gs_frame_hdr *h, const uint8_t *payload,
		  struct gs_msg *m, struct gs_error *err);

/* Parse one frame from the start of a stream buffer.  Returns 1 with *m
 * and *used (bytes of the frame) set, 0 when buf holds only part of a
 * frame, -1 on a bad header or payload (err as above; for GS_EUNSUPP
 * *used is still set so the caller can skip the frame). */
int gs_frame_parse(const uint8_t *buf, size_t len, struct gs_msg *m,
		   size_t *used, struct gs_error *err);

/* Free what a decoded message owns (STATUS_REPLY arrays); idempotent. */
void gs_msg_clear(struct gs_msg *m);


#endif /* GS_PROTO_H */
