/*
 * dp_grpc.h — the device plugin's gRPC side: the only gRPC core (and
 * protobuf) user of the plugin.
 *
 * One completion queue, driven by gs_dp_grpc_run from the calling thread
 * with a timeout as the tick.  It serves the v1beta1 DevicePlugin methods on a
 * unix socket in the device-plugin directory, registers with the kubelet
 * (asynchronously: the kubelet calls back into the plugin before it
 * answers Register), keeps every ListAndWatch stream fed with full
 * snapshots (one send in flight per stream; later changes coalesce into
 * the next snapshot), re-registers on a fresh socket when the kubelet
 * deletes ours (kubelet restart), and calls the kubelet's PodResources
 * List on request.  Decisions are made by the handlers, in plain C types.
 * Not thread-safe: everything runs on the thread in gs_dp_grpc_run.
 */
#ifndef GS_DP_GRPC_H
#define GS_DP_GRPC_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "dp_logic.h"
#include "dp_state.h"
#include "gs_error.h"

struct gs_dp_grpc_opts {
	const char *plugin_dir;		/* kubelet device-plugin dir */
	const char *kubelet_socket;	/* path of kubelet.sock */
	const char *podres_socket;	/* PodResources socket, "" none */
	const char *resource;		/* gshare.io/gpu-share */
	const char *endpoint_prefix;	/* socket file name prefix */
	unsigned tick_ms;		/* loop tick */
	unsigned call_timeout_ms;	/* Register / List deadline */
	unsigned retry_ms;		/* Register retry delay */
	int prestart_required;		/* PreStartContainer wanted */
	int no_preferred;		/* no GetPreferredAllocation */
};

/* What the plugin decides; each returns 0 or -1 with err filled (its
 * code chooses the gRPC status, its message is sent to the kubelet). */
struct gs_dp_handlers {
	void *ctx;
	int (*preferred)(void *ctx, const char *const *avail, size_t navail,
			 const char *const *must, size_t nmust, size_t size,
			 const char **out, struct gs_error *err);
	int (*allocate)(void *ctx, const char *const *ids, size_t nids,
			struct gs_dp_container *out, struct gs_error *err);
	/* Once per tick. */
	void (*tick)(void *ctx, uint64_t now_ms);
	/* Result of gs_dp_grpc_list_pods: ok 0 when the List failed. The
	 * strings are borrowed for the duration of the call. */
	void (*pods)(void *ctx, int ok, const struct gs_dp_podctr *pcs,
		     size_t n, uint64_t now_ms);
	/* Registered with the kubelet (at start and after each restart). */
	void (*registered)(void *ctx, const char *endpoint);
	/* PreStartContainer (opts.prestart_required; NULL: accept). */
	int (*prestart)(void *ctx, const char *const *ids, size_t nids,
			struct gs_error *err);
};

struct gs_dp_grpc;

int gs_dp_grpc_new(const struct gs_dp_grpc_opts *o,
		   const struct gs_dp_handlers *h, struct gs_dp_grpc **out,
		   struct gs_error *err);
/* Cancels every call, shuts the server down, removes its socket. */
void gs_dp_grpc_free(struct gs_dp_grpc *g);

/* Replace the advertised devices (copied).  Streams get the new list as
 * their next full snapshot; unchanged lists are not resent. */
int gs_dp_grpc_set_devices(struct gs_dp_grpc *g,
			   const struct gs_dp_device *d, size_t n,
			   struct gs_error *err);

/* Start a PodResources List unless one is in flight; the result comes
 * to handlers.pods. */
void gs_dp_grpc_list_pods(struct gs_dp_grpc *g);

/* PodResources List now, waiting for it (at most the call timeout):
 * every container's devices of every resource (podctr.resource set) go
 * to fn, borrowed for the call.  0, or -1 with err. */
int gs_dp_grpc_pods_now(struct gs_dp_grpc *g,
			void (*fn)(void *arg, const struct gs_dp_podctr *pcs,
				   size_t n),
			void *arg, struct gs_error *err);

/* One round of gs_dp_grpc_run: the tick when due, then events for at
 * most wait_ms.  For a process that serves several resources. */
int gs_dp_grpc_step(struct gs_dp_grpc *g, unsigned wait_ms,
		    struct gs_error *err);

/* Serve until *stop becomes non-zero; returns 0, or -1 when the server
 * cannot be (re)started. */
int gs_dp_grpc_run(struct gs_dp_grpc *g, volatile sig_atomic_t *stop,
		   struct gs_error *err);

/* Monotonic milliseconds, the clock every deadline here uses. */
uint64_t gs_dp_now_ms(void);

#endif /* GS_DP_GRPC_H */
