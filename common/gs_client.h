/*
 * gs_client.h — agent client used by the SPANK plugin, the device plugin,
 * the runtime's host loop and the CLIs.
 *
 * One struct gs_client is one connection.  Calls are blocking with the
 * connection's timeout (default 5000 ms) and never print.  A connection
 * that attached to an allocation also receives TOKEN_GRANT events, which
 * gs_client_wait_grant returns; replies and events may interleave and the
 * client keeps events that arrive while it waits for a reply.
 * Not thread-safe: one thread per client.
 */
#ifndef GS_CLIENT_H
#define GS_CLIENT_H

#include <stdint.h>

#include "gs_error.h"
#include "gs_proto.h"

struct gs_client;

/* Connect to the agent socket (NULL: GS_DEFAULT_SOCKET).  GS_ECONNREFUSED
 * with a message naming the path when the agent is not running. */
int gs_client_connect(const char *path, int timeout_ms,
		      struct gs_client **out, struct gs_error *err);
void gs_client_free(struct gs_client *c);

int gs_client_fd(const struct gs_client *c);
void gs_client_set_timeout(struct gs_client *c, int timeout_ms);

int gs_client_ping(struct gs_client *c, struct gs_error *err);

int gs_client_alloc_create(struct gs_client *c, const struct gs_alloc_req *req,
			   struct gs_alloc_info *out, struct gs_error *err);
/* final (may be NULL) receives the allocation's last usage. */
int gs_client_alloc_close(struct gs_client *c, uint64_t id,
			  struct gs_alloc_info *final, struct gs_error *err);
/* The same, telling the agent how the job ended (enum gs_end_state: the
 * usage row's State); an agent before 1.3 ignores it. */
int gs_client_alloc_close_as(struct gs_client *c, uint64_t id,
			     uint32_t end_state, struct gs_alloc_info *final,
			     struct gs_error *err);

/* Replace the labels of allocation id (root only); out (may be NULL)
 * receives the allocation as stored. */
int gs_client_alloc_label(struct gs_client *c, uint64_t id,
			  const struct gs_labels *labels,
			  struct gs_alloc_info *out, struct gs_error *err);

/* Attach this connection to allocation id.  *ctl_fd receives the control
 * page fd (caller closes it); info (may be NULL) the allocation. */
int gs_client_attach(struct gs_client *c, uint64_t id, int *ctl_fd,
		     struct gs_alloc_info *info, struct gs_error *err);
/* After gs_client_attach: the allocation's memory page fd (gs_mempage.h;
 * the caller closes it), or -1 from an agent that sent none. */
int gs_client_take_mem_fd(struct gs_client *c);

/* Every allocation the caller may see, in ascending id order: asks page
 * after page when they do not fit one reply (agents since 1.2; an older
 * agent's single page may be short of nallocs_total).  *out is
 * allocated; free with gs_status_free. */
int gs_client_status(struct gs_client *c, struct gs_status **out,
		     struct gs_error *err);

/* Settle the device memory limit of an allocation no process is attached
 * to anew (root only): mem_limit bytes, 0 the site's default for its
 * shares; refused (GS_EBUSY) when it does not fit beside the others or
 * while a process is attached.  *out (may be NULL): its ALLOC_INFO. */
int gs_client_alloc_set_mem(struct gs_client *c, uint64_t id,
			    uint64_t mem_limit, struct gs_alloc_info *out,
			    struct gs_error *err);

int gs_client_set_weight(struct gs_client *c, uint64_t id, uint32_t weight,
			 struct gs_error *err);
int gs_client_set_priority(struct gs_client *c, uint64_t id, uint32_t prio,
			   struct gs_error *err);
int gs_client_drain(struct gs_client *c, int32_t gpu, int on,
		    struct gs_error *err);
/* Inject (fail 1) or clear (fail 0) a fault on a simulated GPU (root
 * only; for tests of the health path).  GS_EINVAL on a real GPU. */
int gs_client_gpu_fault(struct gs_client *c, int32_t gpu, int fail,
			struct gs_error *err);

/* Token protocol (attached connections only). */
#define GS_CLIENT_SPIN_MAX_NS	10000000ull	/* TOKEN_SOON's cap: 10 ms */
int gs_client_token_want(struct gs_client *c, struct gs_error *err);
int gs_client_token_release(struct gs_client *c, uint64_t gen,
			    uint64_t gpu_ns, uint64_t evict_ns,
			    uint32_t reason, struct gs_error *err);
/* TOKEN_UNWANT (1.7): the process no longer waits for the token it asked
 * for.  Waits for the agent's OK; a grant (and a hint) that came before
 * it was taken back by the agent and is dropped here.  GS_EUNSUPP from
 * an agent before 1.7. */
int gs_client_token_unwant(struct gs_client *c, struct gs_error *err);
/* Wait up to timeout_ms (-1: forever) for a TOKEN_GRANT.  Returns 1 with
 * *gen and *slice_ns set, 0 on timeout, -1 on error (ERROR frame from the
 * agent, closed connection).  After a TOKEN_SOON hint it polls the socket
 * without sleeping for the hint's spin time (at most GS_CLIENT_SPIN_MAX_NS)
 * or until the grant comes, so that the grant does not wait for a thread
 * wake-up; then it sleeps in poll() again. */
int gs_client_wait_grant(struct gs_client *c, int timeout_ms, uint64_t *gen,
			 uint64_t *slice_ns, struct gs_error *err);
/* When the polling that the last TOKEN_SOON asked for ends (CLOCK_MONOTONIC
 * ns; 0: no hint since the last grant). */
uint64_t gs_client_soon_until(const struct gs_client *c);
/* The caller expects a grant within ns (it wanted the token while no
 * other allocation held or wanted it): gs_client_wait_grant polls for it
 * as after a TOKEN_SOON of that length (at most GS_CLIENT_SPIN_MAX_NS),
 * instead of sleeping until a wake-up delivers it. */
void gs_client_expect_grant(struct gs_client *c, uint64_t ns);

#endif /* GS_CLIENT_H */
