/*
 * dp_logic.h — the device plugin's decisions, as plain C with no I/O.
 *
 * Devices: every GPU the agent manages is advertised as 100 kubelet
 * devices "<GPU-UUID>::<n>", n = 0..99; a container that gets k of them
 * gets k shares of that GPU.  This module builds the device list, picks
 * preferred allocations (all of a request on one GPU, best fit), checks
 * Allocate requests (ID → GPU, spanning GPUs refused unless allowed), and
 * builds the container's environment and mount.  dp_grpc.c turns its
 * results into protobuf messages; dp_state.c tracks what was allocated.
 * Nothing here allocates hidden state: results live in caller memory or in
 * arrays the caller frees.
 */
#ifndef GS_DP_LOGIC_H
#define GS_DP_LOGIC_H

#include <stddef.h>
#include <stdint.h>

#include "gs_error.h"
#include "gs_proto.h"

#define GS_DP_API_VERSION	"v1beta1"
#define GS_DP_RESOURCE		"gshare.io/gpu-share"
#define GS_DP_ID_MAX		64	/* kubelet: IDs <= 63 chars */
#define GS_DP_HEALTHY		"Healthy"
#define GS_DP_UNHEALTHY		"Unhealthy"
#define GS_DP_PATH_MAX		256

/* One GPU as the agent reported it. */
struct gs_dp_gpu {
	int32_t index;
	char uuid[GS_UUID_MAX];
	int healthy;
};

/* One advertised device; gpu is a position in the caller's GPU array. */
struct gs_dp_device {
	char id[GS_DP_ID_MAX];
	int healthy;
	size_t gpu;
};

/* Check a kubelet extended resource name: "domain/name", the domain a
 * lowercase DNS subdomain (<= 253), the name a DNS label-like
 * [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? of <= 63 chars, and not in
 * the kubernetes.io namespaces. */
int gs_dp_resource_check(const char *name, struct gs_error *err);

/* "<uuid>::<n>" into buf; GS_EINVAL when it would exceed 63 chars. */
int gs_dp_device_id(char *buf, size_t len, const char *uuid, unsigned n,
		    struct gs_error *err);
/* Split a device ID; uuid receives the GPU part, *n the share number. */
int gs_dp_device_id_parse(const char *id, char uuid[GS_UUID_MAX],
			  unsigned *n, struct gs_error *err);

/* The full device list: GS_SHARES_PER_GPU devices per GPU, in GPU order.
 * A device is healthy when agent_up and its GPU is healthy.  *out is
 * allocated (free()); an empty GPU list gives *out = NULL, *n = 0. */
int gs_dp_devices_build(const struct gs_dp_gpu *gpus, size_t ngpus,
			int agent_up, struct gs_dp_device **out, size_t *n,
			struct gs_error *err);

/* Preferred allocation: choose size IDs among avail that include every
 * ID of must.  All on one GPU when any GPU can hold the request: the GPU
 * of the must IDs when they name one, else the GPU with the fewest
 * available IDs that still fits (best fit keeps large holes for large
 * requests); IDs in ascending share number.  When no single GPU fits,
 * the request is filled from the GPUs with the most available IDs first
 * (Allocate then decides whether spanning is allowed).  out (caller
 * array of size entries) receives pointers borrowed from avail/must. */
int gs_dp_preferred(const char *const *avail, size_t navail,
		    const char *const *must, size_t nmust, size_t size,
		    const char **out, struct gs_error *err);

/* One GPU's part of an Allocate request. */
struct gs_dp_group {
	size_t gpu;		/* position in the GPU array */
	uint32_t count;		/* device IDs on it = shares */
};

/* Check a container's Allocate request against the GPU list: at least one
 * ID, each well formed, known and named once, all on one GPU unless
 * allow_span.  groups (caller array of ngpus entries) receives one entry
 * per GPU used, largest first; returns the number of groups or -1. */
int gs_dp_allocate_check(const struct gs_dp_gpu *gpus, size_t ngpus,
			 const char *const *ids, size_t nids, int allow_span,
			 struct gs_dp_group *groups, struct gs_error *err);

/* What a container gets besides its devices. */
#define GS_DP_ENV_MAX	8
struct gs_dp_env {
	char key[40];
	char value[GS_DP_PATH_MAX];
};
struct gs_dp_container {
	size_t nenv;
	struct gs_dp_env env[GS_DP_ENV_MAX];
	char mount_host[GS_DP_PATH_MAX];	/* agent socket directory */
	char mount_container[GS_DP_PATH_MAX];
	int mount_read_only;
	/* space mode: the allocation's MPS pipe directory, mounted
	 * read-write at the same path ("": none) */
	char mps_mount[GS_DP_PATH_MAX];
};

/* Build the environment and mount: GSHARE_SOCKET (the agent socket as
 * the container sees it), GSHARE_ALLOC (the first allocation), with more
 * than one allocation GSHARE_ALLOCS (all, comma-separated),
 * NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES (GPU UUIDs,
 * comma-separated), and a read-only mount of the agent socket's directory
 * at container_dir (NULL: the same path as on the host). */
int gs_dp_container_build(const char *agent_socket, const char *container_dir,
			  const uint64_t *alloc_ids, const char *const *uuids,
			  size_t n, struct gs_dp_container *out,
			  struct gs_error *err);

/* Preload the launch gate: LD_PRELOAD=<mount_container>/<file>, the
 * gate being installed as `file` in the agent socket directory on the
 * host (it reaches the container through the same mount as the socket).
 * `file` is a plain file name (no '/'); GS_EINVAL otherwise or when the
 * environment is full. */
int gs_dp_container_preload(struct gs_dp_container *c, const char *file,
			    struct gs_error *err);

/* Space mode: the container is a client of the MPS server the agent
 * runs for its allocation: CUDA_MPS_PIPE_DIRECTORY=pipe and, pct > 0,
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=pct (the static cap of jobs without
 * libgshare), and a read-write mount of the pipe directory at the same
 * path (clients connect to the server's sockets there).  pipe must be an
 * absolute path without "." or ".." components; GS_EINVAL otherwise or
 * when the environment is full. */
int gs_dp_container_mps(struct gs_dp_container *c, const char *pipe,
			uint32_t pct, struct gs_error *err);

#endif /* GS_DP_LOGIC_H */
