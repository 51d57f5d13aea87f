/*
 * gpu.h — GPU discovery for gshared: NVML (loaded at run time), an
 * explicit list from the config, or simulated GPUs.  The only file that
 * knows NVML.
 */
#ifndef GS_AGENT_GPU_H
#define GS_AGENT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gs_error.h"
#include "gs_proto.h"

struct gs_gpu_desc {
	int32_t index;
	char uuid[GS_UUID_MAX];
	char name[GS_LABEL_MAX];
	int simulated;
	uint64_t mem_total;	/* device memory, bytes; 0: unknown (NVML
				 * without the query, a listed GPU without
				 * `memory`) */
};

/* Fill out[0..*n-1] (at most GS_MAX_GPUS) per c->gpu_source.  NVML
 * errors (library missing, init failed, no GPUs) are GS_EIO with NVML's
 * message; `auto` falls back to one simulated GPU and says so in *note
 * (may be NULL; a static string or NULL). */
int gs_gpu_discover(const struct gs_agent_config *c, struct gs_gpu_desc *out,
		    uint32_t *n, const char **note, struct gs_error *err);

/* Per-process SM utilization from NVML, for the accounting estimates of
 * allocations whose jobs never attach.  open fails (GS_EUNSUPP) on
 * simulated GPUs and when NVML is missing. */
struct gs_gpu_util;
struct gs_gpu_proc_sample {
	uint32_t pid;
	uint32_t sm_util;	/* percent over the sample's period */
	uint64_t ts_us;		/* CPU timestamp, us */
};
int gs_gpu_util_open(const struct gs_gpu_desc *gpus, uint32_t n,
		     struct gs_gpu_util **out, struct gs_error *err);
void gs_gpu_util_close(struct gs_gpu_util *u);
/* Samples of GPU `index` newer than since_us (at most max); returns how
 * many, or -1. */
int gs_gpu_proc_util(struct gs_gpu_util *u, int32_t index, uint64_t since_us,
		     struct gs_gpu_proc_sample *out, unsigned max,
		     struct gs_error *err);
/* GPU `index`'s utilization over NVML's last sample period (1/6 s to
 * 1 s by product; nvmlDeviceGetUtilizationRates): *gpu_pct, the percent
 * of the period a kernel ran, *mem_pct, the percent device memory was
 * read or written.  0, or -1 (GS_EUNSUPP when the driver lacks it).
 * A quick query, but it may block inside the driver like the others. */
int gs_gpu_dev_util(struct gs_gpu_util *u, int32_t index, uint32_t *gpu_pct,
		    uint32_t *mem_pct, struct gs_error *err);
/* A compute process NVML lists on a GPU, and its device memory. */
struct gs_gpu_proc_mem {
	uint32_t pid;
	uint64_t bytes;		/* GS_GPU_MEM_UNKNOWN: NVML has no figure */
};
#define GS_GPU_MEM_UNKNOWN UINT64_MAX
/* The compute processes NVML lists on GPU `index`
 * (nvmlDeviceGetComputeRunningProcesses_v3, else _v2), at most max, with
 * their device memory; returns how many, or -1 (GS_EIO with more than
 * 256; GS_EUNSUPP when the driver has neither entry point).  Blocks in
 * the driver: the unmanaged-process watcher (unman.c) calls it from its
 * worker, the memory cross-check (acct_agent.c) once per GPU with an
 * attached allocation per accounting tick, like gs_gpu_proc_util. */
int gs_gpu_compute_procs(struct gs_gpu_util *u, int32_t index,
			 struct gs_gpu_proc_mem *out, unsigned max,
			 struct gs_error *err);

/*
 * GPU health from NVML, for the agent's health worker (health.c).  Every
 * call may block inside the driver: call them from the worker thread,
 * never from the event loop.  open takes the non-simulated GPUs of gpus
 * (GS_EUNSUPP when there are none; GS_EIO when NVML is missing).
 * check answers 1 healthy, 0 unhealthy (why: NVML's reason), for the
 * i-th GPU given to open; a GPU is unhealthy when NVML no longer finds
 * its UUID or a cheap query (power usage) says the GPU is lost, needs a
 * reset or failed in an unknown way.  Not supported / no permission
 * answers count as healthy.
 */
struct gs_gpu_health;
int gs_gpu_health_open(const struct gs_gpu_desc *gpus, uint32_t n,
		       struct gs_gpu_health **out, struct gs_error *err);
void gs_gpu_health_close(struct gs_gpu_health *h);
uint32_t gs_gpu_health_count(const struct gs_gpu_health *h);
/* Agent GPU index of the i-th monitored GPU. */
int32_t gs_gpu_health_index(const struct gs_gpu_health *h, uint32_t i);
int gs_gpu_health_check(struct gs_gpu_health *h, uint32_t i, char *why,
			size_t len);
/* Critical XID events (nvmlEventTypeXidCriticalError), when the driver
 * lets open register them for every monitored GPU (xids: 1).  xid_wait
 * blocks up to timeout_ms: 1 with *i (monitored GPU) and *xid set, 0 on
 * timeout, -1 when XIDs are not watched or the wait failed.
 * xid_critical: 0 for the XIDs that report an application's error (13,
 * 31, 43, 45, 68, 109), 1 for the others. */
int gs_gpu_health_xids(const struct gs_gpu_health *h);
int gs_gpu_health_xid_wait(struct gs_gpu_health *h, unsigned int timeout_ms,
			   uint32_t *i, uint64_t *xid);
int gs_gpu_health_xid_critical(uint64_t xid);

#endif /* GS_AGENT_GPU_H */
