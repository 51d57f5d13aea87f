/*
 * gpu.h — GPU discovery for gshared: NVML (loaded at run time), an
 * explicit list from the config, or simulated GPUs.  The only file that
 * knows NVML.
 */
#ifndef GS_AGENT_GPU_H
#define GS_AGENT_GPU_H

#include <stdint.h>

#include "config.h"
#include "gs_error.h"
#include "gs_proto.h"

struct gs_gpu_desc {
	int32_t index;
	char uuid[GS_UUID_MAX];
	char name[GS_LABEL_MAX];
	int simulated;
};

/* Fill out[0..*n-1] (at most GS_MAX_GPUS) per c->gpu_source.  NVML
 * errors (library missing, init failed, no GPUs) are GS_EIO with NVML's
 * message; `auto` falls back to one simulated GPU and says so in *note
 * (may be NULL; a static string or NULL). */
int gs_gpu_discover(const struct gs_agent_config *c, struct gs_gpu_desc *out,
		    uint32_t *n, const char **note, struct gs_error *err);

#endif /* GS_AGENT_GPU_H */
