/*
 * gate.c — libgshare-gate.so, the launch gate for unmodified CUDA
 * applications (DESIGN §4, level 1).  Preloaded into a job, it interposes
 * the driver entry points that put work on the GPU (gate_hooks.h) and
 * makes them obey the allocation's token:
 *
 *   - a submission waits until the process holds the token (TOKEN_WANT /
 *     GRANT through common/gs_session), then until its stream's window of
 *     work in flight has room (gate_logic.h), and is then made inline on
 *     the caller's thread, so the driver's status reaches the caller;
 *   - an event recorded after every few submissions tells the gate what
 *     completed, and how much GPU time the spans took (accounting);
 *   - a monitor thread (started at the first grant, never in init) sees
 *     SUSPEND in the control page, stops new submissions, waits for what
 *     is in flight, and releases the token with the GPU time used; it
 *     also gives the token back when the job has been idle for a grace
 *     period, and then asks for it again only when work comes.
 *
 * Interposition (STYLE rules 15-21): the exported wrappers catch direct
 * calls; dlsym is overridden (both glibc symbol versions) so that lookups
 * on a dlopen'ed libcuda.so.1 return the wrappers; cuGetProcAddress and
 * cuGetProcAddress_v2 call the real one first, then swap the pointer it
 * returned when it is the real pointer of a hooked symbol (so the _vN
 * variant and the per-thread-default-stream flag are the driver's
 * choice).  Look-ups by libcuda itself pass through untouched.
 *
 * No CUDA headers, no -lcuda, no threads or driver calls in the one-time
 * init.  When the job has no allocation (GSHARE_ALLOC unset), GSHARE_GATE
 * is 0, or the agent refuses the attach, every call passes straight
 * through.  When the job links libgshare (level 2), libgshare drives the
 * token and its own launches: the gate's launch gating stays off (never a
 * token request of its own), while its device memory hooks stay on, on a
 * session of their own that never asks for the token.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "gate_cuda.h"
#include "gate_hooks.h"
#include "gate_logic.h"
#include "gs_error.h"
#include "gs_memq.h"
#include "gs_proto.h"
#include "gs_rtlogic.h"
#include "gs_session.h"

#define GATE_EXPORT __attribute__((visibility("default")))
#define GATE_MAX_STREAMS 1024
#define GATE_MAX_DEVS 64

/* ---- real symbols --------------------------------------------------- */

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
			    CUdriverProcAddressQueryResult *);

static dlsym_fn real_dlsym_new, real_dlsym_old;

enum {
#define X(kind, sym, ptsz, P, A, S) H_##sym,
	GATE_HOOKS(X)
#undef X
	H_COUNT
};

static const char *const hook_names[H_COUNT] = {
#define X(kind, sym, ptsz, P, A, S) #sym,
	GATE_HOOKS(X)
#undef X
};

/* the exported wrappers (defined below, from the same list) */
#define X(kind, sym, ptsz, P, A, S) \
	__attribute__((visibility("default"))) CUresult sym P;
GATE_HOOKS(X)
#undef X

static void *hook_real[H_COUNT];	/* libcuda's own pointers */
static void *hook_wrap[H_COUNT];	/* ours, filled at init */

#define X(name, P) static CUresult (*d_##name) P;
GATE_DRIVER(X)
#undef X

static gpa1_fn real_gpa1;
static gpa2_fn real_gpa2;
static void *cuda_handle;
static void *cuda_base;			/* load address of libcuda */

/* ---- state ---------------------------------------------------------- */

/* One hold, for GSHARE_GATE_TRACE (CLOCK_MONOTONIC ns, 0: did not happen) */
struct hold_rec {
	uint64_t grant;		/* the grant arrived */
	uint64_t first;		/* first submission of the hold */
	uint64_t susp_set;	/* the agent wrote the suspend */
	uint64_t susp_seen;	/* the monitor saw it */
	uint64_t release;	/* the release went to the agent */
	uint64_t gpu;		/* GPU time accounted in the hold */
	uint64_t subs;		/* submissions so far, at the release */
	int idle;		/* released as idle */
};
#define GATE_TRACE_MAX 65536

enum gate_state {
	GT_NOTHELD = 0,		/* no token; the next submission asks */
	GT_ACQUIRING = 1,	/* a thread waits in gs_session_acquire */
	GT_HELD = 2,		/* token held: submissions go */
	GT_DRAINING = 3,	/* suspend seen: waiting for work in flight */
};

struct gstream {
	uint64_t key;
	CUstream rec;		/* handle to record events on */
	CUcontext ctx;
	int gated;
	int per_thread;		/* per-thread default stream: the monitor
				 * cannot record on it (one event per launch) */
	int refuse;		/* on a device that is not the allocation's */
	struct gl_stream w;
	CUevent ev[GL_RING];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int enabled;		/* 0: pass everything through */
	int launch_off;		/* level 2: launches pass through, memory
				 * is still held to the limit */
	int sess_tried;
	struct gs_session *sess;
	enum gate_state state;
	int monitor_up;
	pthread_t monitor;
	struct gl_params par;		/* while others want the GPU */
	struct gl_params par_alone;	/* while nobody else does */
	uint64_t idle_ns, poll_ns;
	uint64_t alone_after_ns;	/* quiet this long: par_alone */
	int gate_dev;
	unsigned char dev_role[GATE_MAX_DEVS];	/* DEV_*, 0: not looked at */
	int debug;
	uint64_t last_submit_ns, grant_ns, hold_gpu_ns, next_progress_ns;
	struct gstream *streams[GATE_MAX_STREAMS];
	unsigned nstreams;
	uint64_t n_reclaimed;
	/* statistics (GSHARE_GATE_DEBUG) */
	uint64_t n_submit, n_events, n_grants, n_suspend, n_idle, n_waits;
	uint64_t gpu_total_ns;
	/* GSHARE_GATE_TRACE: one record per hold, written at exit */
	const char *trace_path;
	struct hold_rec *trace;
	unsigned trace_n;
	int hold_submitted;		/* a submission went in this hold */
	unsigned token_waiters;		/* threads waiting to submit */
} g = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.cv = PTHREAD_COND_INITIALIZER,
};

static int capture_count;		/* stream captures in progress */
static struct gs_memq *memq;		/* device memory ledger, NULL: none
					 * (yet); see "device memory" */
static int memq_tried;
/* the stream-ordered pools charged to the ledger (see "device memory") */
#define GATE_MAX_POOLS 64

static struct {
	pthread_mutex_t mu;
	CUmemoryPool pool[GATE_MAX_POOLS];
	uint64_t charged[GATE_MAX_POOLS];
	unsigned n;
} pools = { .mu = PTHREAD_MUTEX_INITIALIZER };
/* what the graphs' allocator (graph memory nodes) holds on this process's
 * device, as charged to the ledger (see "device memory") */
static struct {
	pthread_mutex_t mu;
	uint64_t charged;
	CUdevice dev;
	int have_dev;
} graphmem = { .mu = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread int tls_in_gate;
/* this thread runs gate_init: libcuda's constructors (run by its dlopen)
 * must not re-enter the once-routine through dlsym */
static __thread int tls_initing;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void gate_warn(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void gate_warn(const char *fmt, ...)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "gshare-gate[%d]: ", (int)getpid());
	va_list ap;

	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf) - 1)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(2, buf, (size_t)n);
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t lo,
			uint64_t hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (v == NULL || *v == '\0')
		return def;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < lo || x > hi) {
		gate_warn("%s=%s is not a number in %llu..%llu: using %llu",
			  name, v, (unsigned long long)lo,
			  (unsigned long long)hi, (unsigned long long)def);
		return def;
	}
	return x;
}

/* ---- symbol resolution ---------------------------------------------- */

static void resolve_dlsym(void)
{
	if (real_dlsym_new != NULL)
		return;
	real_dlsym_old = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	real_dlsym_new = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (real_dlsym_new == NULL)
		real_dlsym_new = real_dlsym_old;
	if (real_dlsym_old == NULL)
		real_dlsym_old = real_dlsym_new;
}

static void gate_atfork_prepare(void);
static void gate_atfork_parent(void);
static void gate_atfork_child(void);

/* The one-time init: symbols and settings only (no threads, no driver
 * calls, no agent). */
static void gate_init(void)
{
	const char *e;
	Dl_info info;

	tls_initing = 1;
	resolve_dlsym();
#define X(kind, sym, ptsz, P, A, S) hook_wrap[H_##sym] = (void *)sym;
	GATE_HOOKS(X)
#undef X
	cuda_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda_handle != NULL && real_dlsym_new != NULL) {
		for (int i = 0; i < H_COUNT; i++)
			hook_real[i] = real_dlsym_new(cuda_handle,
						      hook_names[i]);
#define X(name, P) *(void **)&d_##name = real_dlsym_new(cuda_handle, #name);
		GATE_DRIVER(X)
#undef X
		real_gpa1 = (gpa1_fn)real_dlsym_new(cuda_handle,
						    "cuGetProcAddress");
		real_gpa2 = (gpa2_fn)real_dlsym_new(cuda_handle,
						    "cuGetProcAddress_v2");
		if (d_cuEventCreate != NULL &&
		    dladdr((void *)d_cuEventCreate, &info) != 0)
			cuda_base = info.dli_fbase;
	}
	gl_params_default(&g.par);
	g.par.window_ns = env_u64("GSHARE_GATE_WINDOW_US", 1000, 10,
				  1000000) * 1000;
	g.par.max_inflight = (uint32_t)env_u64("GSHARE_GATE_MAX_INFLIGHT",
					       256, 1, 1u << 20);
	g.par_alone = g.par;
	g.par_alone.window_ns = env_u64("GSHARE_GATE_ALONE_WINDOW_US", 8000,
					0, 1000000) * 1000;
	if (g.par_alone.window_ns < g.par.window_ns)
		g.par_alone = g.par;	/* 0 (or less): one window always */
	else
		g.par_alone.max_inflight = g.par.max_inflight * 4;
	g.alone_after_ns = env_u64("GSHARE_GATE_ALONE_AFTER_US", 200000, 0,
				   60000000) * 1000;
	g.idle_ns = env_u64("GSHARE_GATE_IDLE_US", 2000, 0, 10000000) * 1000;
	/* a pause the job holds the token through is the job's */
	g.par.gap_solo_ns = g.par_alone.gap_solo_ns =
		g.idle_ns > g.par.gap_ns ? g.idle_ns : g.par.gap_ns;
	g.trace_path = getenv("GSHARE_GATE_TRACE");
	if (g.trace_path != NULL && g.trace_path[0] == '\0')
		g.trace_path = NULL;
	g.poll_ns = env_u64("GSHARE_GATE_POLL_US", 100, 5, 100000) * 1000;
	g.gate_dev = (int)env_u64("GSHARE_GATE_DEVICE", 0, 0, 1023);
	g.debug = (int)env_u64("GSHARE_GATE_DEBUG", 0, 0, 2);
	e = getenv("GSHARE_GATE");
	g.enabled = !(e != NULL && strcmp(e, "0") == 0) &&
		    getenv("GSHARE_ALLOC") != NULL && d_cuEventCreate != NULL &&
		    d_cuEventRecord != NULL && d_cuEventQuery != NULL &&
		    d_cuEventSynchronize != NULL &&
		    d_cuEventElapsedTime != NULL && d_cuCtxGetCurrent != NULL &&
		    d_cuCtxSetCurrent != NULL && d_cuCtxGetDevice != NULL &&
		    d_cuStreamGetCtx != NULL;
	pthread_atfork(gate_atfork_prepare, gate_atfork_parent,
		       gate_atfork_child);
	tls_initing = 0;
}

static void gate_init_once(void)
{
	pthread_once(&init_once, gate_init);
}

static int from_libcuda(const void *caller)
{
	Dl_info info;

	return cuda_base != NULL && caller != NULL &&
	       dladdr(caller, &info) != 0 && info.dli_fbase == cuda_base;
}

/* The wrapper for a real pointer the driver handed out, or p itself. */
static void *swap_pointer(void *p)
{
	if (p == NULL)
		return p;
	for (int i = 0; i < H_COUNT; i++)
		if (hook_real[i] == p)
			return hook_wrap[i];
	return p;
}

/* ---- fork ------------------------------------------------------------ */

static void gate_atfork_prepare(void)
{
	pthread_mutex_lock(&g.mu);
}

static void gate_atfork_parent(void)
{
	pthread_mutex_unlock(&g.mu);
}

/* The child has no monitor thread and must not speak for the parent's
 * session: it forgets both (the parent's connection stays the parent's)
 * and would open a session of its own if it used the GPU. */
static void gate_atfork_child(void)
{
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	g.sess = NULL;
	g.sess_tried = 0;
	g.monitor_up = 0;
	/* the parent's ledger stays the parent's (its locks may be held by
	 * a thread that does not exist here) */
	memq = NULL;
	memq_tried = 0;
	pthread_mutex_init(&pools.mu, NULL);
	pools.n = 0;
	pthread_mutex_init(&graphmem.mu, NULL);
	graphmem.charged = 0;
	graphmem.have_dev = 0;
	g.state = GT_NOTHELD;
	for (unsigned i = 0; i < g.nstreams; i++)
		gl_stream_init(&g.streams[i]->w);
	g.hold_gpu_ns = 0;
}

/* ---- session (g.mu held) --------------------------------------------- */

static void session_open_locked(void)
{
	struct gs_error err;
	const char *alloc = getenv("GSHARE_ALLOC");

	g.sess_tried = 1;
	/* a job that links libgshare (level 2) drives the token itself:
	 * the gate's session is for device memory only */
	if (real_dlsym_new != NULL &&
	    real_dlsym_new(RTLD_DEFAULT, "gs_init") != NULL) {
		__atomic_store_n(&g.launch_off, 1, __ATOMIC_RELEASE);
		if (g.debug)
			gate_warn("libgshare is linked: launches are its own, "
				  "the gate keeps device memory limits");
	}
	gs_error_clear(&err);
	if (gs_session_open_env(5000, &g.sess, &err) < 0 || g.sess == NULL) {
		gate_warn("cannot attach to allocation %s (%s): running "
			  "ungated", alloc != NULL ? alloc : "?",
			  err.msg[0] ? err.msg : "no session");
		g.sess = NULL;
		g.enabled = 0;
		return;
	}
	/* kernels the driver places on any SM: space mode plans this job
	 * alone (libgshare's own session says it keeps a partition) */
	if (!__atomic_load_n(&g.launch_off, __ATOMIC_ACQUIRE))
		gs_session_set_kind(g.sess, GS_CTL_JOB_GATE);
	if (g.debug)
		gate_warn("attached to allocation %s", alloc);
}

static volatile struct gs_ctlpage *page(void)
{
	return gs_session_page(g.sess);
}

/* The window in force: the wide one while the agent says nobody else on
 * this GPU holds or wants the token (nothing to be preempted for), the
 * tight one otherwise, and whenever the agent does not say (an older
 * agent).  When a contender arrives, what was queued under the wide
 * window drains at the first suspend: that one eviction may take up to
 * the wide window; later ones are bounded by the tight one. */
static const struct gl_params *cur_par(void)
{
	volatile struct gs_ctlpage *p;
	uint64_t seen, t;

	if (g.sess == NULL)
		return &g.par;
	p = page();
	if (!gs_ctl_alone(p))
		return &g.par;
	/* a contender that pauses for a moment (between its release and
	 * its next request, or in a short host phase) is still one: widen
	 * only after a quiet spell */
	seen = __atomic_load_n(&p->contend_seen_ns, __ATOMIC_RELAXED);
	t = now_ns();
	if (seen != 0 && t - seen < g.alone_after_ns)
		return &g.par;
	return &g.par_alone;
}

static int suspend_pending(void)
{
	return __atomic_load_n(&page()->suspend, __ATOMIC_ACQUIRE) ==
	       GS_CTL_SUSPEND;
}

static void *monitor_main(void *arg);

static void monitor_start_locked(void)
{
	pthread_attr_t a;
	sigset_t all, old;

	if (g.monitor_up)
		return;
	/* the monitor never takes the application's signals */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&g.monitor, &a, monitor_main, NULL) == 0)
		g.monitor_up = 1;
	else
		gate_warn("cannot start the monitor thread: running ungated");
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!g.monitor_up)
		g.enabled = 0;
}

/* GSHARE_GATE_TRACE: the hold now open, NULL when not tracing or full */
static struct hold_rec *trace_cur_locked(void)
{
	if (g.trace == NULL || g.trace_n == 0)
		return NULL;
	return &g.trace[g.trace_n - 1];
}

static void trace_grant_locked(uint64_t t)
{
	if (g.trace_path == NULL)
		return;
	if (g.trace == NULL &&
	    (g.trace = calloc(GATE_TRACE_MAX, sizeof(*g.trace))) == NULL) {
		g.trace_path = NULL;
		return;
	}
	if (g.trace_n < GATE_TRACE_MAX)
		g.trace[g.trace_n++].grant = t;
}

/* Stamp now into the field at off of the open hold, once. */
static void trace_mark_locked(size_t off)
{
	struct hold_rec *h = trace_cur_locked();
	uint64_t *f;

	if (h == NULL || h->release != 0)
		return;
	f = (uint64_t *)((char *)h + off);
	if (*f == 0)
		*f = now_ns();
}

/* Ask for the token and wait for it (g.mu dropped while waiting). */
static int acquire_locked(void)
{
	struct gs_error err;
	int rc;

	g.state = GT_ACQUIRING;
	pthread_mutex_unlock(&g.mu);
	rc = gs_session_acquire(g.sess, &err);
	pthread_mutex_lock(&g.mu);
	if (rc < 0) {
		gate_warn("token request refused (%s): running ungated",
			  err.msg);
		g.enabled = 0;
		g.state = GT_NOTHELD;
		pthread_cond_broadcast(&g.cv);
		return -1;
	}
	g.state = GT_HELD;
	g.grant_ns = now_ns();
	g.hold_submitted = 0;
	trace_grant_locked(g.grant_ns);
	g.last_submit_ns = g.grant_ns;
	g.hold_gpu_ns = 0;
	g.next_progress_ns = g.grant_ns + 10000000;
	g.n_grants++;
	monitor_start_locked();
	pthread_cond_broadcast(&g.cv);
	return 0;
}

/* Until this process holds the token with no suspend pending.
 * Returns -1 when the gate gave up (run ungated). */
static int token_wait_locked(void)
{
	for (;;) {
		if (!g.enabled)
			return -1;
		if (g.state == GT_HELD && !suspend_pending())
			return 0;
		if (g.state == GT_NOTHELD) {
			if (acquire_locked() < 0)
				return -1;
			continue;
		}
		/* ACQUIRING, DRAINING, or HELD with a suspend the monitor
		 * is about to act on */
		g.n_waits++;
		g.token_waiters++;
		pthread_cond_wait(&g.cv, &g.mu);
		g.token_waiters--;
	}
}

/* ---- streams and events (g.mu held) ----------------------------------- */

static CUcontext cur_ctx_locked(void)
{
	CUcontext c = NULL;

	return d_cuCtxGetCurrent(&c) == CUDA_SUCCESS ? c : NULL;
}

/* The table is full (a program that creates and destroys streams all
 * the time): take over an entry whose stream has nothing in flight; its
 * events are destroyed (they may belong to another context).  NULL when
 * every stream has work in flight. */
static int record_locked(struct gstream *st, int start);

static struct gstream *reclaim_locked(void)
{
	CUcontext cur = NULL;
	unsigned covered = 0;

	for (unsigned i = 0; i < g.nstreams; i++) {
		struct gstream *st = g.streams[i];

		if (st->w.n == 0 && !gl_drained(&st->w) && covered < 8 &&
		    !st->per_thread && st->ctx == cur_ctx_locked()) {
			/* launches never covered by an event (the program
			 * synchronized them itself): cover them now, so the
			 * entry can be taken once they are done; a stream
			 * already destroyed refuses the record: take it */
			covered++;
			if (record_locked(st, 0) == 0)
				continue;
			st->w.done = st->w.launched;
		}
		if (!gl_drained(&st->w) || st->w.n != 0)
			continue;
		if (d_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != st->ctx &&
		    d_cuCtxSetCurrent(st->ctx) == CUDA_SUCCESS) {
			for (int k = 0; k < GL_RING; k++)
				if (st->ev[k] != NULL && d_cuEventDestroy_v2)
					(void)d_cuEventDestroy_v2(st->ev[k]);
			(void)d_cuCtxSetCurrent(cur);
		} else {
			for (int k = 0; k < GL_RING; k++)
				if (st->ev[k] != NULL && d_cuEventDestroy_v2)
					(void)d_cuEventDestroy_v2(st->ev[k]);
		}
		memset(st->ev, 0, sizeof(st->ev));
		g.n_reclaimed++;
		return st;
	}
	return NULL;
}

enum { DEV_PASS = 1, DEV_GATE = 2, DEV_REFUSE = 3 };

/* What the gate does with work on device dev.  The agent sent the
 * allocation's GPU UUID: the device with that UUID is gated; the device
 * the job was meant to use (GSHARE_GATE_DEVICE, ordinal 0: the plugins
 * put the allocation's GPU first in CUDA_VISIBLE_DEVICES) with another
 * UUID is refused, with the reason on stderr once (it would run outside
 * its GPU's scheduler, charged to the wrong GPU); other devices pass
 * through.  No UUID (an older agent): the ordinal GSHARE_GATE_DEVICE is
 * gated. */
static int device_role_locked(CUdevice dev)
{
	const char *want = gs_session_gpu_uuid(g.sess);
	struct gs_error err;
	CUuuid u;
	char have[48];
	int role;

	if (dev < 0)
		return DEV_PASS;
	if (dev < GATE_MAX_DEVS && g.dev_role[dev] != 0)
		return g.dev_role[dev];
	if (want == NULL || *want == '\0') {
		role = dev == g.gate_dev ? DEV_GATE : DEV_PASS;
	} else {
		have[0] = '\0';
		if ((d_cuDeviceGetUuid_v2 != NULL &&
		     d_cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) ||
		    (d_cuDeviceGetUuid != NULL &&
		     d_cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS))
			(void)gs__uuid_format((const unsigned char *)u.bytes,
					      have, sizeof(have));
		gs_error_clear(&err);
		if (gs__gpu_check(gs_session_alloc_id(g.sess), want,
				  have[0] != '\0' ? have : NULL, (int)dev,
				  &err) == 0)
			role = DEV_GATE;
		else if (dev != g.gate_dev)
			role = DEV_PASS;
		else {
			role = DEV_REFUSE;
			gate_warn("%s; its launches fail with "
				  "CUDA_ERROR_INVALID_DEVICE", err.msg);
		}
	}
	if (dev < GATE_MAX_DEVS)
		g.dev_role[dev] = (unsigned char)role;
	return role;
}

static struct gstream *stream_get_locked(CUstream s, int ptsz)
{
	uint64_t key;
	struct gstream *st;
	CUcontext ctx = NULL, cur = NULL;
	CUdevice dev = -1;
	int role;
	int per_thread = (ptsz && s == NULL) || s == CU_STREAM_PER_THREAD;
	static __thread char tls_key;

	key = per_thread ? (uint64_t)(uintptr_t)&tls_key | 1u :
		(s == NULL ? (uint64_t)(uintptr_t)CU_STREAM_LEGACY :
		 (uint64_t)(uintptr_t)s);
	if (d_cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		cur = NULL;
	for (unsigned i = 0; i < g.nstreams; i++) {
		st = g.streams[i];
		/* legacy and per-thread streams exist once per context */
		if (st->key == key &&
		    (s != NULL && s != CU_STREAM_LEGACY && !per_thread ?
		     1 : st->ctx == cur))
			return st;
	}
	if (s == NULL || s == CU_STREAM_LEGACY || per_thread)
		ctx = cur;
	else if (d_cuStreamGetCtx(s, &ctx) != CUDA_SUCCESS)
		return NULL;
	if (ctx == NULL)
		return NULL;
	if (ctx != cur && d_cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
		return NULL;
	if (d_cuCtxGetDevice(&dev) != CUDA_SUCCESS)
		dev = -1;
	if (ctx != cur)
		(void)d_cuCtxSetCurrent(cur);
	if (g.nstreams < GATE_MAX_STREAMS) {
		st = calloc(1, sizeof(*st));
		if (st == NULL)
			return NULL;
		g.streams[g.nstreams++] = st;
	} else if ((st = reclaim_locked()) == NULL) {
		return NULL;
	}
	st->key = key;
	st->ctx = ctx;
	st->per_thread = per_thread;
	st->rec = per_thread ? CU_STREAM_PER_THREAD :
		(s == NULL ? CU_STREAM_LEGACY : s);
	role = device_role_locked(dev);
	st->gated = role == DEV_GATE;
	st->refuse = role == DEV_REFUSE;
	gl_stream_init(&st->w);
	if (g.debug)
		gate_warn("stream %p: device %d, %s", (void *)s, (int)dev,
			  st->gated ? "gated" : "not gated");
	return st;
}

/* Record an event on st (a start marker or the end of a batch).  The
 * caller's thread has st's context current.  0, or -1 (nothing pushed). */
static int record_locked(struct gstream *st, int start)
{
	int slot = gl_push(&st->w, start);

	if (slot < 0)
		return -1;
	if (st->ev[slot] == NULL &&
	    d_cuEventCreate(&st->ev[slot], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		st->ev[slot] = NULL;
		gl_unpush(&st->w);
		return -1;
	}
	if (d_cuEventRecord(st->ev[slot], st->rec) != CUDA_SUCCESS) {
		gl_unpush(&st->w);
		return -1;
	}
	g.n_events++;
	return 0;
}

/* Pop st's completed events (queries only; never blocks). */
static void poll_stream_locked(struct gstream *st)
{
	int slot, from;
	float ms;
	uint64_t span, acc;

	while ((slot = gl_front(&st->w)) >= 0) {
		if (d_cuEventQuery(st->ev[slot]) != CUDA_SUCCESS)
			return;		/* NOT_READY, or an error: later */
		span = 0;
		from = gl_span_start(&st->w);
		if (from >= 0 && d_cuEventElapsedTime(&ms, st->ev[from],
						      st->ev[slot]) ==
				 CUDA_SUCCESS && ms > 0)
			span = (uint64_t)((double)ms * 1e6);
		acc = gl_pop(&st->w, span, now_ns());
		g.hold_gpu_ns += acc;
		g.gpu_total_ns += acc;
	}
}

/* Until st's window has room (g.mu dropped while blocking). */
static void window_wait_locked(struct gstream *st)
{
	int slot;
	CUevent ev;
	CUstreamCaptureMode mode;

	while (gl_window_full(&st->w, cur_par())) {
		poll_stream_locked(st);
		if (!gl_window_full(&st->w, cur_par()))
			return;
		slot = gl_front(&st->w);
		if (slot < 0) {
			/* only unevented launches: cover them */
			if (record_locked(st, 0) < 0)
				return;
			continue;
		}
		ev = st->ev[slot];
		pthread_mutex_unlock(&g.mu);
		/* relaxed: a capture another thread starts meanwhile must
		 * not be invalidated by the gate's own wait */
		mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		if (d_cuThreadExchangeStreamCaptureMode != NULL)
			(void)d_cuThreadExchangeStreamCaptureMode(&mode);
		(void)d_cuEventSynchronize(ev);
		if (d_cuThreadExchangeStreamCaptureMode != NULL)
			(void)d_cuThreadExchangeStreamCaptureMode(&mode);
		pthread_mutex_lock(&g.mu);
	}
}

/* ---- the monitor ------------------------------------------------------ */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int poll_all_locked(void)
{
	int drained = 1;

	for (unsigned i = 0; i < g.nstreams; i++) {
		struct gstream *st = g.streams[i];

		if (!st->gated || gl_drained(&st->w))
			continue;
		poll_stream_locked(st);
		if (!gl_drained(&st->w))
			drained = 0;
	}
	return drained;
}

/* Cover every stream's unevented launches with an event, from the
 * monitor's thread (its context made current as needed). */
static void cover_all_locked(CUcontext *cur)
{
	for (unsigned i = 0; i < g.nstreams; i++) {
		struct gstream *st = g.streams[i];

		if (!st->gated || st->per_thread ||
		    gl_unevented(&st->w) == 0)
			continue;
		if (*cur != st->ctx && d_cuCtxSetCurrent(st->ctx) ==
		    CUDA_SUCCESS)
			*cur = st->ctx;
		(void)record_locked(st, 0);
	}
}

/* GSHARE_GATE_DEBUG: eviction latencies for the exit summary */
#define GATE_LAT_MAX 65536
static uint64_t *lat_ns;
static unsigned lat_n;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void release_locked(int idle, uint64_t exit_ns)
{
	struct gs_run_result r = { 0 };
	struct gs_error err;
	uint64_t set = page()->suspend_set_ns;

	if (g.debug && !idle && set != 0 && exit_ns >= set &&
	    set >= g.grant_ns) {
		if (lat_ns == NULL)
			lat_ns = calloc(GATE_LAT_MAX, sizeof(*lat_ns));
		if (lat_ns != NULL && lat_n < GATE_LAT_MAX)
			lat_ns[lat_n++] = exit_ns - set;
	}

	{
		struct hold_rec *h = trace_cur_locked();

		if (h != NULL && h->release == 0) {
			h->release = exit_ns != 0 ? exit_ns : now_ns();
			h->gpu = g.hold_gpu_ns;
			h->idle = idle;
			h->susp_set = idle ? 0 : set;
			h->subs = g.n_submit;	/* running count: differences */
		}
	}
	r.done = idle;
	r.reason = idle ? GS_REL_IDLE : GS_REL_SUSPENDED;
	r.gpu_ns = g.hold_gpu_ns;
	r.exit_ns = exit_ns;
	(void)gs_session_release(g.sess, &r, &err);
	g.hold_gpu_ns = 0;
	g.state = GT_NOTHELD;
	if (idle)
		g.n_idle++;
	else
		g.n_suspend++;
}

/* The event a drain waits on: the oldest outstanding event of a gated
 * stream with work in flight; NULL when none has one. */
static CUevent front_event_locked(void)
{
	for (unsigned i = 0; i < g.nstreams; i++) {
		struct gstream *st = g.streams[i];
		int slot;

		if (!st->gated || gl_drained(&st->w))
			continue;
		if ((slot = gl_front(&st->w)) >= 0 && st->ev[slot] != NULL)
			return st->ev[slot];
	}
	return NULL;
}

/* After a suspended hold's release (monitor thread, g.mu held): leave
 * the wait for the next grant to a thread that waits to submit, or wait
 * here when none comes within 200 µs. */
static void handover_locked(void)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_nsec += 200000;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (g.state == GT_NOTHELD && g.token_waiters == 0 && g.enabled) {
		if (pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT)
			break;
	}
	if (g.state == GT_NOTHELD && g.token_waiters == 0 && g.enabled)
		(void)acquire_locked();
}

static void *monitor_main(void *arg)
{
	CUcontext cur = NULL;
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	uint64_t t;
	int drained;

	(void)arg;
	tls_in_gate = 1;
	/* the gate's own queries never invalidate an application's capture */
	if (d_cuThreadExchangeStreamCaptureMode != NULL)
		(void)d_cuThreadExchangeStreamCaptureMode(&mode);
	pthread_mutex_lock(&g.mu);
	for (;;) {
		if (g.state != GT_HELD || g.sess == NULL) {
			pthread_cond_wait(&g.cv, &g.mu);
			continue;
		}
		drained = poll_all_locked();
		t = now_ns();
		if (suspend_pending()) {
			/* stop submissions, let the window drain, release */
			g.state = GT_DRAINING;
			trace_mark_locked(offsetof(struct hold_rec,
						   susp_seen));
			cover_all_locked(&cur);
			while (!poll_all_locked()) {
				/* wait on the oldest event still out (as the
				 * driver waits: at once when it completes),
				 * not in sleeps, which cost tens of µs each
				 * on some hosts */
				CUevent ev = front_event_locked();

				pthread_mutex_unlock(&g.mu);
				if (ev != NULL)
					(void)d_cuEventSynchronize(ev);
				else
					sleep_ns(5000);
				pthread_mutex_lock(&g.mu);
				cover_all_locked(&cur);
			}
			release_locked(0, now_ns());
			/* a suspended holder stays in the queue: the agent
			 * grants it again later, and someone must take that
			 * grant even if no thread submits by then.  A thread
			 * waiting to submit takes it itself, so the grant
			 * wakes it directly instead of through this thread;
			 * one arriving within 200 µs after the release counts
			 * (it waited on the same last kernel); else this
			 * thread takes the grant. */
			pthread_cond_broadcast(&g.cv);
			handover_locked();
			continue;
		}
		if (gl_idle_due(drained, g.last_submit_ns, t, g.idle_ns)) {
			/* unevented launches: cover them and look again */
			cover_all_locked(&cur);
			if (poll_all_locked()) {
				release_locked(1, 0);
				pthread_cond_broadcast(&g.cv);
				continue;
			}
		} else if (!drained && t - g.last_submit_ns >= g.idle_ns) {
			cover_all_locked(&cur);
		}
		if (t >= g.next_progress_ns) {
			struct gs_error err;

			(void)gs_session_progress(g.sess, g.hold_gpu_ns, 0,
						  &err);
			g.next_progress_ns = t + 10000000;
		}
		pthread_mutex_unlock(&g.mu);
		sleep_ns(g.poll_ns);
		pthread_mutex_lock(&g.mu);
	}
	return NULL;
}

/* ---- the submission path ---------------------------------------------- */

/* Another gated stream of the process has work in flight (as far as the
 * gate knows). */
static int others_busy_locked(const struct gstream *st)
{
	for (unsigned i = 0; i < g.nstreams; i++) {
		const struct gstream *o = g.streams[i];

		if (o != st && o->gated && !gl_drained(&o->w))
			return 1;
	}
	return 0;
}

enum { GK_SUBMIT, GK_GRAPH, GK_CAPBEGIN, GK_CAPEND };
#define GATE_K_SUBMIT GK_SUBMIT
#define GATE_K_GRAPH GK_GRAPH
#define GATE_K_CAPBEGIN GK_CAPBEGIN
#define GATE_K_CAPEND GK_CAPEND

struct gate_ticket {
	struct gstream *st;	/* non-NULL: gated, g.mu held */
	int refuse;		/* fail the call: not the allocation's GPU */
};

static void gate_pre(int kind, CUstream s, int ptsz, struct gate_ticket *t)
{
	struct gstream *st;
	uint64_t t0;

	t->st = NULL;
	t->refuse = 0;
	if (tls_initing)
		return;
	gate_init_once();
	if ((kind != GK_SUBMIT && kind != GK_GRAPH) || !g.enabled ||
	    tls_in_gate ||
	    __atomic_load_n(&g.launch_off, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&capture_count, __ATOMIC_ACQUIRE) > 0)
		return;
	pthread_mutex_lock(&g.mu);
	if (!g.sess_tried)
		session_open_locked();
	if (!g.enabled || g.sess == NULL || g.launch_off)
		goto pass;
	st = stream_get_locked(s, ptsz);
	if (st != NULL && st->refuse)
		t->refuse = 1;
	if (st == NULL || !st->gated)
		goto pass;
	for (;;) {
		if (token_wait_locked() < 0)
			goto pass;
		if (!gl_window_full(&st->w, cur_par()))
			break;
		window_wait_locked(st);
		/* the lock was dropped: the token may have moved on */
	}
	/* a start marker: for the short gap first (cheap, and needed by
	 * both rules); the other streams are looked at only then */
	t0 = now_ns();
	if (gl_need_start(&st->w, &g.par, 1, t0) &&
	    (others_busy_locked(st) || gl_need_start(&st->w, &g.par, 0, t0)))
		(void)record_locked(st, 1);
	if (!g.hold_submitted) {
		g.hold_submitted = 1;
		trace_mark_locked(offsetof(struct hold_rec, first));
	}
	t->st = st;
	return;
pass:
	pthread_mutex_unlock(&g.mu);
}

static void gate_post(int kind, struct gate_ticket *t, CUresult rc)
{
	struct gstream *st = t->st;

	if (kind == GK_CAPBEGIN && rc == CUDA_SUCCESS) {
		__atomic_add_fetch(&capture_count, 1, __ATOMIC_ACQ_REL);
		return;
	}
	if (kind == GK_CAPEND) {
		int c = __atomic_load_n(&capture_count, __ATOMIC_ACQUIRE);

		while (c > 0 && !__atomic_compare_exchange_n(&capture_count,
				&c, c - 1, 0, __ATOMIC_ACQ_REL,
				__ATOMIC_ACQUIRE))
			;
		return;
	}
	if (st == NULL)
		return;
	if (rc == CUDA_SUCCESS) {
		g.n_submit++;
		g.last_submit_ns = now_ns();
		if (gl_launched(&st->w, cur_par()) || st->per_thread)
			(void)record_locked(st, 0);
	}
	pthread_mutex_unlock(&g.mu);
}

static void graph_launched(void);

#define GATE_WRAP(kind, sym, ptsz, P, A, S)				\
	CUresult sym P							\
	{								\
		struct gate_ticket t_;					\
		CUresult rc_;						\
		gate_pre(GATE_K_##kind, (S), ptsz, &t_);		\
		if (t_.refuse)						\
			return CUDA_ERROR_INVALID_DEVICE;		\
		if (hook_real[H_##sym] == NULL) {			\
			gate_post(GATE_K_##kind, &t_, CUDA_ERROR_NOT_FOUND); \
			return CUDA_ERROR_NOT_FOUND;			\
		}							\
		rc_ = ((CUresult (*) P)hook_real[H_##sym]) A;		\
		gate_post(GATE_K_##kind, &t_, rc_);			\
		if (GATE_K_##kind == GK_GRAPH && rc_ == CUDA_SUCCESS)	\
			graph_launched();				\
		return rc_;						\
	}
#define GATE_WRAP_SUBMIT(sym, ptsz, P, A, S) GATE_WRAP(SUBMIT, sym, ptsz, P, A, S)
#define GATE_WRAP_CAPBEGIN(sym, ptsz, P, A, S) \
	GATE_WRAP(CAPBEGIN, sym, ptsz, P, A, S)
#define GATE_WRAP_CAPEND(sym, ptsz, P, A, S) GATE_WRAP(CAPEND, sym, ptsz, P, A, S)
#define GATE_WRAP_GRAPH(sym, ptsz, P, A, S) GATE_WRAP(GRAPH, sym, ptsz, P, A, S)
#define GATE_WRAP_MEM(sym, ptsz, P, A, S)	/* below, by hand */
#define X(kind, sym, ptsz, P, A, S) GATE_WRAP_##kind(sym, ptsz, P, A, S)
GATE_HOOKS(X)
#undef X

/* ---- device memory (docs/runtime.md, "Device memory limits") ---------- */

/*
 * Every allocation entry point reserves its size in the ledger
 * (runtime/src/gs_memq.c) before it reaches the driver and fails like a
 * full card (CUDA_ERROR_OUT_OF_MEMORY) when the allocation's limit would
 * be passed; frees give the size back; cuMemGetInfo answers with the
 * allocation's view.  The ledger is made at the first memory call, from
 * the control page of the session that call opens (the limit the agent
 * wrote there).  Without a session (not under an allocation, GSHARE_GATE=0,
 * libgshare linked) every call passes through untouched.
 */
static struct gs_memq *memq_get(void)
{
	struct gs_memq *q;
	struct gs_error err;

	if (tls_initing)
		return NULL;
	gate_init_once();
	q = __atomic_load_n(&memq, __ATOMIC_ACQUIRE);
	if (q != NULL || !g.enabled)
		return q;
	pthread_mutex_lock(&g.mu);
	if (!memq_tried) {
		memq_tried = 1;
		if (!g.sess_tried)
			session_open_locked();
		if (g.enabled && g.sess != NULL) {
			if (gs_memq_new(page()->mem_limit, page(), &q,
					&err) == 0) {
				/* all the allocation's processes together
				 * (NULL from an agent that sends no page) */
				gs_memq_share(q, gs_session_mempage(g.sess));
				__atomic_store_n(&memq, q, __ATOMIC_RELEASE);
			}
			else
				gate_warn("device memory not limited: %s",
					  err.msg);
		}
	}
	q = memq;
	pthread_mutex_unlock(&g.mu);
	return q;
}

/* After the driver's answer to an allocation of n reserved bytes: keep
 * it (remembered by address) or give the reservation back. */
static CUresult mem_done(struct gs_memq *q, CUresult rc, CUdeviceptr *dp,
			 size_t n)
{
	if (q == NULL)
		return rc;
	if (rc != CUDA_SUCCESS) {
		gs_memq_unreserve(q, n);
		return rc;
	}
	if (gs_memq_track(q, *dp, n) < 0) {
		/* no room to remember it: undo, as a full card would */
		if (hook_real[H_cuMemFree_v2] != NULL)
			(void)((CUresult (*)GATE_P_MFREE)
			       hook_real[H_cuMemFree_v2])(*dp);
		gs_memq_unreserve(q, n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return rc;
}

/*
 * Stream-ordered pools (cuMemAllocAsync, cuMemAllocFromPoolAsync): what a
 * pool holds is what it has reserved from the device, not what is
 * allocated from it now.  A free gives an allocation back to its pool,
 * which keeps the memory (up to its release threshold: PyTorch's
 * cudaMallocAsync backend sets it to the maximum) for the next
 * allocation.  So the ledger charges each pool the process allocates
 * from its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, read again after every
 * stream-ordered allocation and free and before every cuMemGetInfo
 * answer (a synchronize may have released memory meanwhile).  An
 * allocation that would pass the limit first reclaims: a synchronize (so
 * that the frees in flight complete: the driver cannot release memory
 * behind an asynchronous free it has not observed) and cuMemPoolTrimTo(0)
 * of every pool, then the ledger is checked again.  A stream-ordered
 * allocation the pool can serve from memory it already holds goes
 * through even when the ledger is full (it holds nothing more); one
 * after which the pool holds more than the limit allows is freed again
 * and refused.  pools.mu serializes the stream-ordered path, so that the
 * charge read after a call is that call's.
 */

static int pool_attr(CUmemoryPool p, int attr, uint64_t *v)
{
	cuuint64_t x = 0;

	if (d_cuMemPoolGetAttribute == NULL ||
	    d_cuMemPoolGetAttribute(p, attr, &x) != CUDA_SUCCESS)
		return -1;
	*v = x;
	return 0;
}

/* Pool p's slot, added at first sight; -1 when the table is full or the
 * driver cannot tell what the pool holds (pools.mu held). */
static int pool_slot_locked(CUmemoryPool p)
{
	uint64_t r;

	for (unsigned i = 0; i < pools.n; i++)
		if (pools.pool[i] == p)
			return (int)i;
	if (pools.n == GATE_MAX_POOLS ||
	    pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) < 0)
		return -1;
	pools.pool[pools.n] = p;
	pools.charged[pools.n] = 0;
	__atomic_store_n(&pools.n, pools.n + 1, __ATOMIC_RELEASE);
	return (int)pools.n - 1;
}

/* A driver-side reserve (a pool, the graphs' allocator) holds `now`
 * bytes: bring what the ledger charges it, *charged, to that. */
static void charge_reserve(struct gs_memq *q, uint64_t *charged,
			   uint64_t now)
{
	if (now > *charged)
		gs_memq_force(q, now - *charged);
	else if (now < *charged)
		gs_memq_unreserve(q, *charged - now);
	*charged = now;
}

/* Charge slot i what its pool holds now (pools.mu held). */
static void pool_refresh_locked(struct gs_memq *q, unsigned i)
{
	uint64_t r;

	if (pool_attr(pools.pool[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
		      &r) == 0)
		charge_reserve(q, &pools.charged[i], r);
}

static void pools_refresh(struct gs_memq *q)
{
	if (__atomic_load_n(&pools.n, __ATOMIC_ACQUIRE) == 0)
		return;
	pthread_mutex_lock(&pools.mu);
	for (unsigned i = 0; i < pools.n; i++)
		pool_refresh_locked(q, i);
	pthread_mutex_unlock(&pools.mu);
}

/*
 * Graph memory nodes (cuGraphAddMemAllocNode, a captured cudaMallocAsync):
 * the driver reserves their memory from a per-device allocator of its own
 * when a graph is launched and keeps it for the next launches.  The
 * ledger charges what that allocator holds
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT of the current context's
 * device), read again after every graph launch and before every
 * cuMemGetInfo/NVML answer.  A launch has already happened when its
 * memory shows: one that leaves the ledger over the limit makes the
 * driver trim what no graph uses (cuDeviceGraphMemTrim), and whatever is
 * left over the limit refuses the process's next allocations until it
 * is given back.
 */
static void graphmem_refresh_locked(struct gs_memq *q)
{
	cuuint64_t r = 0;
	CUdevice d;

	if (d_cuDeviceGetGraphMemAttribute == NULL)
		return;
	if (!graphmem.have_dev) {
		if (d_cuCtxGetDevice == NULL ||
		    d_cuCtxGetDevice(&d) != CUDA_SUCCESS)
			return;
		graphmem.dev = d;
		graphmem.have_dev = 1;
	}
	if (d_cuDeviceGetGraphMemAttribute(graphmem.dev,
					   CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
					   &r) == CUDA_SUCCESS)
		charge_reserve(q, &graphmem.charged, r);
}

static void graphmem_refresh(struct gs_memq *q)
{
	pthread_mutex_lock(&graphmem.mu);
	graphmem_refresh_locked(q);
	pthread_mutex_unlock(&graphmem.mu);
}

/* Trim the graphs' allocator and charge what it still holds; 1 when it
 * held anything before. */
static int graphmem_trim(struct gs_memq *q)
{
	int had;

	pthread_mutex_lock(&graphmem.mu);
	graphmem_refresh_locked(q);
	had = graphmem.charged > 0;
	if (had && graphmem.have_dev && d_cuDeviceGraphMemTrim != NULL) {
		(void)d_cuDeviceGraphMemTrim(graphmem.dev);
		graphmem_refresh_locked(q);
	}
	pthread_mutex_unlock(&graphmem.mu);
	return had;
}

static void graph_launched(void)
{
	struct gs_memq *q = memq_get();

	if (q == NULL)
		return;
	graphmem_refresh(q);
	if (gs_memq_over(q))
		(void)graphmem_trim(q);
}

/* Make the pools give back what they hold beyond what is in use, before
 * refusing an allocation (pools.mu held).  No synchronize while a stream
 * capture runs: it would invalidate the capture. */
static void pools_reclaim_locked(struct gs_memq *q)
{
	if (pools.n == 0)
		return;
	if (d_cuCtxSynchronize != NULL &&
	    __atomic_load_n(&capture_count, __ATOMIC_ACQUIRE) == 0)
		(void)d_cuCtxSynchronize();
	for (unsigned i = 0; i < pools.n; i++) {
		if (d_cuMemPoolTrimTo != NULL)
			(void)d_cuMemPoolTrimTo(pools.pool[i], 0);
		pool_refresh_locked(q, i);
	}
}

/* Reserve n bytes, reclaiming pool memory once when the limit is in
 * the way.  0, or -1: refused. */
static int mem_reserve(struct gs_memq *q, uint64_t n)
{
	int again = 0;

	if (gs_memq_reserve(q, n) == 0)
		return 0;
	if (__atomic_load_n(&pools.n, __ATOMIC_ACQUIRE) != 0) {
		pthread_mutex_lock(&pools.mu);
		pools_reclaim_locked(q);
		pthread_mutex_unlock(&pools.mu);
		again = 1;
	}
	if (graphmem_trim(q))
		again = 1;
	return again ? gs_memq_reserve(q, n) : -1;
}

typedef CUresult (*pool_alloc_fn)(CUdeviceptr *, size_t, CUmemoryPool,
				  CUstream);

/* A stream-ordered allocation of n bytes from pool (NULL: the current
 * pool of the current context's device, through real_async).  Falls
 * back to counting the allocation itself when the driver cannot tell
 * what the pool holds. */
static CUresult mem_alloc_pooled(int h, CUdeviceptr *dp, size_t n,
				 CUmemoryPool pool, CUstream s)
{
	struct gs_memq *q = memq_get();
	CUdevice dev = -1;
	uint64_t tmp = n, res = 0, use = 0;
	CUresult rc;
	int i = -1;

	if (hook_real[h] == NULL)
		return CUDA_ERROR_NOT_FOUND;
#define POOL_CALL()							\
	(pool != NULL && (h == H_cuMemAllocFromPoolAsync ||		\
			  h == H_cuMemAllocFromPoolAsync_ptsz) ?	\
	 ((pool_alloc_fn)hook_real[h])(dp, n, pool, s) :		\
	 ((CUresult (*)GATE_P_MASYNC)hook_real[h])(dp, n, s))
	if (q == NULL)
		return POOL_CALL();
	if (pool == NULL && d_cuDeviceGetMemPool != NULL &&
	    d_cuCtxGetDevice != NULL && d_cuCtxGetDevice(&dev) == CUDA_SUCCESS)
		(void)d_cuDeviceGetMemPool(&pool, dev);
	pthread_mutex_lock(&pools.mu);
	if (pool != NULL)
		i = pool_slot_locked(pool);
	if (i < 0) {
		/* count the allocation itself (pre-pool accounting) */
		pthread_mutex_unlock(&pools.mu);
		if (mem_reserve(q, n) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
		rc = POOL_CALL();
		return mem_done(q, rc, dp, n);
	}
	pool_refresh_locked(q, (unsigned)i);
	if (gs_memq_reserve(q, n) < 0) {
		pools_reclaim_locked(q);
		if (gs_memq_reserve(q, n) < 0) {
			/* served from what the pool already holds, or not
			 * at all */
			if (pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
				      &res) < 0 ||
			    pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
				      &use) < 0 || use > res || n > res - use) {
				pthread_mutex_unlock(&pools.mu);
				return CUDA_ERROR_OUT_OF_MEMORY;
			}
			tmp = 0;
		}
	}
	rc = POOL_CALL();
	if (tmp != 0)
		gs_memq_unreserve(q, tmp);
	pool_refresh_locked(q, (unsigned)i);
	if (rc == CUDA_SUCCESS && gs_memq_over(q)) {
		/* the pool grew past the limit: undo, give it back */
		int hf = h == H_cuMemAllocAsync_ptsz ||
			 h == H_cuMemAllocFromPoolAsync_ptsz ?
			 H_cuMemFreeAsync_ptsz : H_cuMemFreeAsync;

		if (hook_real[hf] != NULL)
			(void)((CUresult (*)GATE_P_MFREEA)hook_real[hf])
				(*dp, s);
		pools_reclaim_locked(q);
		rc = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&pools.mu);
#undef POOL_CALL
	return rc;
}

/* An allocation of n bytes through real (its arguments after the size
 * check): the common path of cuMemAlloc and cuMemAllocManaged. */
#define MEM_ALLOC_BODY(h, n, call)					\
	do {								\
		struct gs_memq *q_ = memq_get();			\
		CUresult rc_;						\
		if (hook_real[h] == NULL)				\
			return CUDA_ERROR_NOT_FOUND;			\
		if (q_ != NULL && mem_reserve(q_, (n)) < 0)		\
			return CUDA_ERROR_OUT_OF_MEMORY;		\
		rc_ = (call);						\
		return mem_done(q_, rc_, dp, (n));			\
	} while (0)

CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n)
{
	MEM_ALLOC_BODY(H_cuMemAlloc_v2, n,
		       ((CUresult (*)GATE_P_MALLOC)
			hook_real[H_cuMemAlloc_v2])(dp, n));
}

/* Managed memory counts in full at allocation: the limit bounds what the
 * process may make resident on the device, wherever the pages are now. */
CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t n, unsigned flags)
{
	MEM_ALLOC_BODY(H_cuMemAllocManaged, n,
		       ((CUresult (*)GATE_P_MMANAGED)
			hook_real[H_cuMemAllocManaged])(dp, n, flags));
}

CUresult cuMemAllocAsync(CUdeviceptr *dp, size_t n, CUstream s)
{
	return mem_alloc_pooled(H_cuMemAllocAsync, dp, n, NULL, s);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dp, size_t n, CUstream s)
{
	return mem_alloc_pooled(H_cuMemAllocAsync_ptsz, dp, n, NULL, s);
}

/* The pitch is the driver's choice: reserve the unpadded size, then the
 * padding once the pitch is known (refused like a full card when that
 * no longer fits). */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dp, size_t *pitch, size_t w,
			    size_t h, unsigned elem)
{
	struct gs_memq *q = memq_get();
	size_t n = w * h, real_n;
	CUresult rc;

	if (hook_real[H_cuMemAllocPitch_v2] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	if (q != NULL && (h != 0 && n / h != w))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (q != NULL && mem_reserve(q, n) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = ((CUresult (*)GATE_P_MPITCH)hook_real[H_cuMemAllocPitch_v2])
		(dp, pitch, w, h, elem);
	if (q == NULL || rc != CUDA_SUCCESS || pitch == NULL)
		return mem_done(q, rc, dp, n);
	real_n = *pitch * h;
	if (real_n > n && gs_memq_reserve(q, real_n - n) < 0) {
		if (hook_real[H_cuMemFree_v2] != NULL)
			(void)((CUresult (*)GATE_P_MFREE)
			       hook_real[H_cuMemFree_v2])(*dp);
		gs_memq_unreserve(q, n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return mem_done(q, rc, dp, real_n > n ? real_n : n);
}

/* Frees forget the pointer before the driver may hand the address out
 * again; a free the driver refuses puts it back. */
static void mem_refused_free(struct gs_memq *q, CUdeviceptr d, uint64_t n)
{
	if (n == 0)
		return;
	/* it was held: it still is, whatever another process of the
	 * allocation took in the meantime */
	gs_memq_force(q, n);
	if (gs_memq_track(q, d, n) < 0)
		gs_memq_unreserve(q, n);
}

CUresult cuMemFree_v2(CUdeviceptr d)
{
	struct gs_memq *q = memq_get();
	uint64_t n = q != NULL ? gs_memq_untrack(q, d) : 0;
	CUresult rc;

	if (hook_real[H_cuMemFree_v2] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MFREE)hook_real[H_cuMemFree_v2])(d);
	if (rc != CUDA_SUCCESS && q != NULL)
		mem_refused_free(q, d, n);
	else if (q != NULL && n == 0)
		pools_refresh(q);	/* maybe a pool's: what it holds now */
	return rc;
}

/* Stream-ordered frees: an allocation the ledger counted itself gives
 * its size back; one from a pool goes back to the pool, which keeps the
 * memory: its charge is read again. */
static CUresult mem_free_async(int h, CUdeviceptr d, CUstream s)
{
	struct gs_memq *q = memq_get();
	uint64_t n = q != NULL ? gs_memq_untrack(q, d) : 0;
	CUresult rc;

	if (hook_real[h] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MFREEA)hook_real[h])(d, s);
	if (rc != CUDA_SUCCESS && q != NULL)
		mem_refused_free(q, d, n);
	else if (q != NULL && n == 0)
		pools_refresh(q);
	return rc;
}

CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s)
{
	return mem_free_async(H_cuMemFreeAsync, d, s);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s)
{
	return mem_free_async(H_cuMemFreeAsync_ptsz, d, s);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dp, size_t n, void *pool,
				 CUstream s)
{
	if (pool == NULL)	/* the driver's error, not the current pool */
		return hook_real[H_cuMemAllocFromPoolAsync] == NULL ?
			CUDA_ERROR_NOT_FOUND : ((CUresult (*)GATE_P_MPOOL)
			hook_real[H_cuMemAllocFromPoolAsync])(dp, n, pool, s);
	return mem_alloc_pooled(H_cuMemAllocFromPoolAsync, dp, n,
				(CUmemoryPool)pool, s);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dp, size_t n, void *pool,
				      CUstream s)
{
	if (pool == NULL)
		return hook_real[H_cuMemAllocFromPoolAsync_ptsz] == NULL ?
			CUDA_ERROR_NOT_FOUND : ((CUresult (*)GATE_P_MPOOL)
			hook_real[H_cuMemAllocFromPoolAsync_ptsz])
			(dp, n, pool, s);
	return mem_alloc_pooled(H_cuMemAllocFromPoolAsync_ptsz, dp, n,
				(CUmemoryPool)pool, s);
}

/* A destroyed pool gives back what it held. */
CUresult cuMemPoolDestroy(CUmemoryPool p)
{
	struct gs_memq *q = memq_get();
	CUresult rc;

	if (hook_real[H_cuMemPoolDestroy] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MPDESTROY)hook_real[H_cuMemPoolDestroy])(p);
	if (rc != CUDA_SUCCESS || q == NULL)
		return rc;
	pthread_mutex_lock(&pools.mu);
	for (unsigned i = 0; i < pools.n; i++) {
		if (pools.pool[i] != p)
			continue;
		gs_memq_unreserve(q, pools.charged[i]);
		pools.pool[i] = pools.pool[pools.n - 1];
		pools.charged[i] = pools.charged[pools.n - 1];
		__atomic_store_n(&pools.n, pools.n - 1, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&pools.mu);
	return rc;
}

/*
 * Virtual memory management (PyTorch's expandable_segments): physical
 * memory is allocated by cuMemCreate and freed by cuMemRelease of its
 * handle; cuMemMap/cuMemUnmap only place it and are not counted.  Handles
 * share the ledger with device addresses under a key with the top bit
 * set (device addresses and the driver's handles never have it).
 */
#define MEM_HANDLE_KEY(h) ((h) ^ (1ull << 63))

CUresult cuMemCreate(uint64_t *hp, size_t n, const void *prop,
		     unsigned long long flags)
{
	struct gs_memq *q = memq_get();
	CUresult rc;

	if (hook_real[H_cuMemCreate] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	if (q != NULL && gs_memq_reserve(q, n) < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	rc = ((CUresult (*)GATE_P_MCREATE)hook_real[H_cuMemCreate])
		(hp, n, prop, flags);
	if (q == NULL)
		return rc;
	if (rc != CUDA_SUCCESS) {
		gs_memq_unreserve(q, n);
		return rc;
	}
	if (gs_memq_track(q, MEM_HANDLE_KEY(*hp), n) < 0) {
		if (hook_real[H_cuMemRelease] != NULL)
			(void)((CUresult (*)GATE_P_MRELEASE)
			       hook_real[H_cuMemRelease])(*hp);
		gs_memq_unreserve(q, n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return rc;
}

CUresult cuMemRelease(uint64_t h)
{
	struct gs_memq *q = memq_get();
	uint64_t n = q != NULL ? gs_memq_untrack(q, MEM_HANDLE_KEY(h)) : 0;
	CUresult rc;

	if (hook_real[H_cuMemRelease] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MRELEASE)hook_real[H_cuMemRelease])(h);
	if (rc != CUDA_SUCCESS && q != NULL)
		mem_refused_free(q, MEM_HANDLE_KEY(h), n);
	return rc;
}

/*
 * CUDA arrays (textures, surfaces): counted at the size their descriptor
 * gives (width × height × depth × channels × the format's element size;
 * 4 bytes a channel for formats other than the 8- to 32-bit integer,
 * half and float ones), each mipmap level at its own halved size.  The
 * driver's layout may pad beyond it.  Array handles share the ledger
 * under a key with bit 62 set (device addresses, host pointers and the
 * cuMemCreate keys never have it alone).
 */
#define MEM_ARRAY_KEY(h) ((uint64_t)(uintptr_t)(h) ^ (1ull << 62))

static uint64_t arr_elem(int format)
{
	switch (format) {
	case 0x01: case 0x08:		/* (UN)SIGNED_INT8 */
		return 1;
	case 0x02: case 0x09: case 0x10:	/* (UN)SIGNED_INT16, HALF */
		return 2;
	default:			/* INT32, FLOAT, and the rest */
		return 4;
	}
}

/* w × h × d × channels × element, saturating; 0 never (counts 1). */
static uint64_t arr_bytes(uint64_t w, uint64_t h, uint64_t d, int format,
			  unsigned ch)
{
	uint64_t v = arr_elem(format) * (ch ? ch : 1);
	uint64_t dims[3] = { w ? w : 1, h ? h : 1, d ? d : 1 };

	for (int i = 0; i < 3; i++) {
		if (v > UINT64_MAX / dims[i])
			return UINT64_MAX;
		v *= dims[i];
	}
	return v;
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d,
			     unsigned levels)
{
	uint64_t w = d->Width, h = d->Height, z = d->Depth, sum = 0, b;

	for (unsigned l = 0; l < (levels ? levels : 1); l++) {
		b = arr_bytes(w, h, z, d->Format, d->NumChannels);
		sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : 1;
		z = z > 1 ? z / 2 : 1;
	}
	return sum;
}

/* The common tail of the array constructors: keep the reservation of n
 * under the handle's key, or give it back. */
static CUresult arr_done(struct gs_memq *q, CUresult rc, uint64_t key,
			 uint64_t n, int hdestroy, void *handle)
{
	if (q == NULL)
		return rc;
	if (rc != CUDA_SUCCESS) {
		gs_memq_unreserve(q, n);
		return rc;
	}
	if (gs_memq_track(q, key, n) < 0) {
		if (hook_real[hdestroy] != NULL)
			(void)((CUresult (*)(void *))hook_real[hdestroy])
				(handle);
		gs_memq_unreserve(q, n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return rc;
}

CUresult cuArrayCreate_v2(CUarray *ap, const CUDA_ARRAY_DESCRIPTOR *d)
{
	struct gs_memq *q = memq_get();
	uint64_t n = 0;
	CUresult rc;

	if (hook_real[H_cuArrayCreate_v2] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	if (q != NULL && d != NULL && ap != NULL) {
		n = arr_bytes(d->Width, d->Height, 1, d->Format,
			      d->NumChannels);
		if (mem_reserve(q, n) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		q = NULL;	/* the driver's error for NULLs */
	}
	rc = ((CUresult (*)GATE_P_ARR)hook_real[H_cuArrayCreate_v2])(ap, d);
	return arr_done(q, rc, q != NULL && rc == CUDA_SUCCESS ?
			MEM_ARRAY_KEY(*ap) : 0, n, H_cuArrayDestroy,
			q != NULL && rc == CUDA_SUCCESS ? (void *)*ap : NULL);
}

CUresult cuArray3DCreate_v2(CUarray *ap, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	struct gs_memq *q = memq_get();
	uint64_t n = 0;
	CUresult rc;

	if (hook_real[H_cuArray3DCreate_v2] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	if (q != NULL && d != NULL && ap != NULL) {
		n = arr_bytes(d->Width, d->Height, d->Depth, d->Format,
			      d->NumChannels);
		if (mem_reserve(q, n) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		q = NULL;
	}
	rc = ((CUresult (*)GATE_P_ARR3)hook_real[H_cuArray3DCreate_v2])(ap, d);
	return arr_done(q, rc, q != NULL && rc == CUDA_SUCCESS ?
			MEM_ARRAY_KEY(*ap) : 0, n, H_cuArrayDestroy,
			q != NULL && rc == CUDA_SUCCESS ? (void *)*ap : NULL);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *mp,
				const CUDA_ARRAY3D_DESCRIPTOR *d,
				unsigned levels)
{
	struct gs_memq *q = memq_get();
	uint64_t n = 0;
	CUresult rc;

	if (hook_real[H_cuMipmappedArrayCreate] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	if (q != NULL && d != NULL && mp != NULL) {
		n = mipmap_bytes(d, levels);
		if (mem_reserve(q, n) < 0)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		q = NULL;
	}
	rc = ((CUresult (*)GATE_P_MIPMAP)hook_real[H_cuMipmappedArrayCreate])
		(mp, d, levels);
	return arr_done(q, rc, q != NULL && rc == CUDA_SUCCESS ?
			MEM_ARRAY_KEY(*mp) : 0, n, H_cuMipmappedArrayDestroy,
			q != NULL && rc == CUDA_SUCCESS ? (void *)*mp : NULL);
}

CUresult cuArrayDestroy(CUarray a)
{
	struct gs_memq *q = memq_get();
	uint64_t n = q != NULL ? gs_memq_untrack(q, MEM_ARRAY_KEY(a)) : 0;
	CUresult rc;

	if (hook_real[H_cuArrayDestroy] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_ARRDESTROY)hook_real[H_cuArrayDestroy])(a);
	if (rc != CUDA_SUCCESS && q != NULL)
		mem_refused_free(q, MEM_ARRAY_KEY(a), n);
	return rc;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray m)
{
	struct gs_memq *q = memq_get();
	uint64_t n = q != NULL ? gs_memq_untrack(q, MEM_ARRAY_KEY(m)) : 0;
	CUresult rc;

	if (hook_real[H_cuMipmappedArrayDestroy] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MIPDESTROY)
	      hook_real[H_cuMipmappedArrayDestroy])(m);
	if (rc != CUDA_SUCCESS && q != NULL)
		mem_refused_free(q, MEM_ARRAY_KEY(m), n);
	return rc;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
	struct gs_memq *q = memq_get();
	uint64_t f, t;
	CUresult rc;

	if (hook_real[H_cuMemGetInfo_v2] == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = ((CUresult (*)GATE_P_MINFO)hook_real[H_cuMemGetInfo_v2])
		(free_b, total_b);
	if (rc != CUDA_SUCCESS || q == NULL || free_b == NULL ||
	    total_b == NULL)
		return rc;
	pools_refresh(q);
	graphmem_refresh(q);
	gs_memq_view(q, *free_b, *total_b, &f, &t);
	*free_b = (size_t)f;
	*total_b = (size_t)t;
	return rc;
}

/* ---- NVML memory queries (docs/runtime.md, "Device memory limits") ---- */

/*
 * nvmlDeviceGetMemoryInfo and _v2 answer for the allocation's GPU with
 * the allocation's view, as cuMemGetInfo does (total = the limit, free =
 * what is left of it, used = the rest); other GPUs' answers, and every
 * answer outside an allocation, are NVML's own.  Frameworks dlopen
 * libnvidia-ml.so.1, so the wrappers are handed out by the dlsym hook
 * (which also learns the real pointers from the handle asked); a program
 * linked against NVML reaches the exported wrappers, which find the real
 * ones after the gate (RTLD_NEXT).  The allocation's GPU is the one whose
 * UUID is the one the agent sent; without a UUID, nothing is changed.
 */
struct nvml_mem1 {		/* nvmlMemory_t */
	unsigned long long total, free, used;
};

struct nvml_mem2 {		/* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

typedef int (*nvml_mem_fn)(void *dev, void *mem);
typedef int (*nvml_uuid_fn)(void *dev, char *buf, unsigned int len);

#define NVML_ERROR_UNINITIALIZED 1
enum { NV_MEM1, NV_MEM2, NV_UUID, NV_COUNT };
static const char *const nvml_names[NV_COUNT] = {
	"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
	"nvmlDeviceGetUUID",
};
static void *nvml_real[NV_COUNT];

static void *nvml_get(int k)
{
	void *p = __atomic_load_n(&nvml_real[k], __ATOMIC_ACQUIRE);

	if (p == NULL && real_dlsym_new != NULL) {
		p = real_dlsym_new(RTLD_NEXT, nvml_names[k]);
		if (p != NULL)
			__atomic_store_n(&nvml_real[k], p, __ATOMIC_RELEASE);
	}
	return p;
}

/* The ledger, when dev is the allocation's GPU; NULL otherwise. */
static struct gs_memq *nvml_alloc_memq(void *dev)
{
	struct gs_memq *q = memq_get();
	nvml_uuid_fn uuid = (nvml_uuid_fn)nvml_get(NV_UUID);
	const char *want;
	char have[96];

	if (q == NULL || g.sess == NULL || uuid == NULL)
		return NULL;
	want = gs_session_gpu_uuid(g.sess);
	if (want == NULL || *want == '\0')
		return NULL;
	if (uuid(dev, have, sizeof(have)) != 0)
		return NULL;
	have[sizeof(have) - 1] = '\0';
	return strcasecmp(have, want) == 0 ? q : NULL;
}

/* The allocation's view of a device's total and free. */
static void nvml_view(struct gs_memq *q, unsigned long long *total,
		      unsigned long long *free_b, unsigned long long *used)
{
	uint64_t f, t;

	pools_refresh(q);
	graphmem_refresh(q);
	gs_memq_view(q, *free_b, *total, &f, &t);
	*total = t;
	*free_b = f;
	*used = t - f;
}

GATE_EXPORT int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_mem1 *m);
GATE_EXPORT int nvmlDeviceGetMemoryInfo_v2(void *dev, struct nvml_mem2 *m);

/* The real query, then the allocation's view over its answer (which:
 * NV_MEM1 or NV_MEM2).  1 when the view was applied. */
static int nvml_mem_query(int which, void *dev, void *m,
			  unsigned long long *total, unsigned long long *free_b,
			  unsigned long long *used, int *rc)
{
	nvml_mem_fn real;
	struct gs_memq *q;

	if (!tls_initing)
		gate_init_once();
	real = (nvml_mem_fn)nvml_get(which);
	if (real == NULL) {
		*rc = NVML_ERROR_UNINITIALIZED;
		return 0;
	}
	*rc = real(dev, m);
	if (*rc != 0 || m == NULL || tls_initing ||
	    (q = nvml_alloc_memq(dev)) == NULL)
		return 0;
	nvml_view(q, total, free_b, used);
	return 1;
}

int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_mem1 *m)
{
	int rc;

	if (m == NULL)		/* the driver's own answer to that */
		(void)nvml_mem_query(NV_MEM1, dev, NULL, NULL, NULL, NULL, &rc);
	else
		(void)nvml_mem_query(NV_MEM1, dev, m, &m->total, &m->free,
				     &m->used, &rc);
	return rc;
}

int nvmlDeviceGetMemoryInfo_v2(void *dev, struct nvml_mem2 *m)
{
	int rc;

	if (m == NULL)
		(void)nvml_mem_query(NV_MEM2, dev, NULL, NULL, NULL, NULL, &rc);
	else if (nvml_mem_query(NV_MEM2, dev, m, &m->total, &m->free,
				&m->used, &rc) &&
		 m->reserved > m->used)	/* used includes reserved */
		m->reserved = m->used;
	return rc;
}

/* dlsym's answer for an NVML name on handle h, or NULL: the real one
 * is remembered, ours handed out. */
static void *nvml_dlsym_hook(void *h, const char *name)
{
	void *p;

	for (int k = 0; k < NV_COUNT; k++) {
		if (strcmp(name, nvml_names[k]) != 0)
			continue;
		p = real_dlsym_new(h, name);
		if (p == NULL)
			return NULL;
		if (__atomic_load_n(&nvml_real[k], __ATOMIC_ACQUIRE) == NULL)
			__atomic_store_n(&nvml_real[k], p, __ATOMIC_RELEASE);
		if (__atomic_load_n(&nvml_real[NV_UUID],
				    __ATOMIC_ACQUIRE) == NULL) {
			void *u = real_dlsym_new(h, "nvmlDeviceGetUUID");

			if (u != NULL)
				__atomic_store_n(&nvml_real[NV_UUID], u,
						 __ATOMIC_RELEASE);
		}
		if (k == NV_MEM1)
			return (void *)nvmlDeviceGetMemoryInfo;
		if (k == NV_MEM2)
			return (void *)nvmlDeviceGetMemoryInfo_v2;
		return NULL;	/* the UUID query is the driver's own */
	}
	return NULL;
}

/* ---- cuGetProcAddress ------------------------------------------------- */

GATE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
				      int ver, cuuint64_t flags);
GATE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
					 int ver, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *st);

static void *swap_gpa(const char *symbol, void *p)
{
	if (p == NULL)
		return p;
	if (symbol != NULL && strcmp(symbol, "cuGetProcAddress") == 0) {
		if (p == (void *)real_gpa2)
			return (void *)cuGetProcAddress_v2;
		if (p == (void *)real_gpa1)
			return (void *)cuGetProcAddress;
		return p;
	}
	return swap_pointer(p);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver,
			  cuuint64_t flags)
{
	CUresult rc;

	if (tls_initing) {	/* libcuda's constructor: its own answer */
		gpa1_fn f = (gpa1_fn)real_dlsym_new(RTLD_NEXT,
						    "cuGetProcAddress");

		return f != NULL ? f(symbol, pfn, ver, flags) :
			CUDA_ERROR_NOT_FOUND;
	}
	gate_init_once();
	if (real_gpa1 == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = real_gpa1(symbol, pfn, ver, flags);
	if (rc == CUDA_SUCCESS && pfn != NULL &&
	    !from_libcuda(__builtin_return_address(0)))
		*pfn = swap_gpa(symbol, *pfn);
	return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver,
			     cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	CUresult rc;

	if (tls_initing) {	/* libcuda's constructor: its own answer */
		gpa2_fn f = (gpa2_fn)real_dlsym_new(RTLD_NEXT,
						    "cuGetProcAddress_v2");

		return f != NULL ? f(symbol, pfn, ver, flags, status) :
			CUDA_ERROR_NOT_FOUND;
	}
	gate_init_once();
	if (real_gpa2 == NULL)
		return CUDA_ERROR_NOT_FOUND;
	rc = real_gpa2(symbol, pfn, ver, flags, status);
	if (rc == CUDA_SUCCESS && pfn != NULL &&
	    !from_libcuda(__builtin_return_address(0)))
		*pfn = swap_gpa(symbol, *pfn);
	return rc;
}

/* ---- dlsym ------------------------------------------------------------ */

/* Our answer for a hooked name, or NULL: then the real dlsym answers,
 * called as a tail call so that it sees the application's return address
 * (RTLD_NEXT stays relative to the caller). */
static void *dlsym_hook(void *h, const char *name, const void *caller)
{
	void *p;

	if (name != NULL && strncmp(name, "nvml", 4) == 0 && !tls_initing) {
		gate_init_once();
		return real_dlsym_new != NULL && !from_libcuda(caller) ?
			nvml_dlsym_hook(h, name) : NULL;
	}
	if (name == NULL || name[0] != 'c' || name[1] != 'u' || tls_initing)
		return NULL;
	gate_init_once();
	if (from_libcuda(caller) || real_dlsym_new == NULL)
		return NULL;
	if (strcmp(name, "cuGetProcAddress") == 0 ||
	    strcmp(name, "cuGetProcAddress_v2") == 0) {
		p = real_dlsym_new(h, name);
		if (p == NULL)
			return NULL;
		return name[16] == '\0' ? (void *)cuGetProcAddress :
			(void *)cuGetProcAddress_v2;
	}
	for (int i = 0; i < H_COUNT; i++) {
		if (strcmp(name, hook_names[i]) != 0)
			continue;
		p = real_dlsym_new(h, name);
		return p == NULL ? NULL : hook_wrap[i];
	}
	return NULL;
}

GATE_EXPORT void *gate_dlsym_234(void *h, const char *name);
GATE_EXPORT void *gate_dlsym_225(void *h, const char *name);
__asm__(".symver gate_dlsym_234,dlsym@@GLIBC_2.34");
__asm__(".symver gate_dlsym_225,dlsym@GLIBC_2.2.5");

void *gate_dlsym_234(void *h, const char *name)
{
	void *p = dlsym_hook(h, name, __builtin_return_address(0));

	if (p != NULL)
		return p;
	resolve_dlsym();
	return real_dlsym_new(h, name);
}

void *gate_dlsym_225(void *h, const char *name)
{
	void *p = dlsym_hook(h, name, __builtin_return_address(0));

	if (p != NULL)
		return p;
	resolve_dlsym();
	return real_dlsym_old(h, name);
}

/* ---- statistics ------------------------------------------------------- */

/* GSHARE_GATE_TRACE=PREFIX: PREFIX.PID, one line per hold (ns,
 * CLOCK_MONOTONIC): grant first susp_set susp_seen release gpu subs idle */
static void trace_write(void)
{
	char path[4096];
	FILE *f;

	if (g.trace == NULL || g.trace_path == NULL ||
	    snprintf(path, sizeof(path), "%s.%d", g.trace_path,
		     (int)getpid()) >= (int)sizeof(path))
		return;
	if ((f = fopen(path, "we")) == NULL) {
		gate_warn("cannot write the trace %s: %s", path,
			  strerror(errno));
		return;
	}
	fprintf(f, "# grant first susp_set susp_seen release gpu subs idle\n");
	for (unsigned i = 0; i < g.trace_n; i++) {
		struct hold_rec *h = &g.trace[i];

		if (h->release == 0) {
			/* the hold open at exit: what it accounted so far */
			h->gpu = g.hold_gpu_ns;
			h->subs = g.n_submit;
		}

		fprintf(f, "%llu %llu %llu %llu %llu %llu %llu %d\n",
			(unsigned long long)h->grant,
			(unsigned long long)h->first,
			(unsigned long long)h->susp_set,
			(unsigned long long)h->susp_seen,
			(unsigned long long)h->release,
			(unsigned long long)h->gpu,
			(unsigned long long)h->subs, h->idle);
	}
	if (ferror(f) | fclose(f))	/* both: fclose must run */
		gate_warn("the trace %s is incomplete (a full disk?)", path);
}

__attribute__((destructor)) static void gate_fini(void)
{
	if (g.trace != NULL) {
		/* another thread may be inside the gate at exit: wait a
		 * little for it, then write what is there */
		int locked = 0;

		for (int i = 0; i < 1000 && !locked; i++) {
			locked = pthread_mutex_trylock(&g.mu) == 0;
			if (!locked)
				sleep_ns(100000);
		}
		trace_write();
		if (locked)
			pthread_mutex_unlock(&g.mu);
	}
	if (!g.debug || !g.sess_tried)
		return;
	if (lat_n > 0) {
		qsort(lat_ns, lat_n, sizeof(*lat_ns), cmp_u64);
		gate_warn("evictions %u p50_us %.1f p99_us %.1f max_us %.1f",
			  lat_n, (double)lat_ns[lat_n / 2] / 1e3,
			  (double)lat_ns[(lat_n * 99) / 100] / 1e3,
			  (double)lat_ns[lat_n - 1] / 1e3);
	}
	gate_warn("submissions %llu events %llu grants %llu suspends %llu "
		  "idle-releases %llu waits %llu gpu_ms %.3f streams %u "
		  "evict_max_us %.1f evict_avg_us %.1f reclaimed %llu",
		  (unsigned long long)g.n_submit,
		  (unsigned long long)g.n_events,
		  (unsigned long long)g.n_grants,
		  (unsigned long long)g.n_suspend,
		  (unsigned long long)g.n_idle,
		  (unsigned long long)g.n_waits, (double)g.gpu_total_ns / 1e6,
		  g.nstreams,
		  g.sess ? (double)page()->evict_ns_max / 1e3 : 0.0,
		  g.sess && page()->suspensions ?
		  (double)page()->evict_ns_sum / 1e3 /
		  (double)page()->suspensions : 0.0,
		  (unsigned long long)g.n_reclaimed);
}
