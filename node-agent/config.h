/*
 * config.h — gshared's configuration (/etc/gshare/gshare.yaml).
 *
 * Parsed with the shared table code (common/gs_config.h): every scalar key
 * is one row of gs_agent_keys, defaults live only there, unknown keys and
 * bad values are errors with file:line.  `gpus` is the one structured key:
 *   gpus: nvml              discover with NVML (default)
 *   gpus: auto              NVML when it loads, else one simulated GPU
 *                           (not on a GPU node: gpu.c, host_has_gpus)
 *   gpus: {simulated: N, memory: 80G}    N simulated GPUs (1..64)
 *   gpus: [{index: 0, uuid: GPU-..., name: ..., memory: 80G}, ...]
 *                           explicit list
 * gs_agent_config_print writes a normalized file that loads back to the
 * same struct.
 */
#ifndef GS_AGENT_CONFIG_H
#define GS_AGENT_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gs_config.h"
#include "gs_error.h"
#include "gs_proto.h"

#define GS_MAX_GPUS 64

enum gs_gpu_source { GS_GPUS_NVML = 0, GS_GPUS_AUTO = 1, GS_GPUS_SIM = 2,
		     GS_GPUS_LIST = 3 };

enum gs_mem_policy { GS_MEM_PROPORTIONAL = 0, GS_MEM_UNLIMITED = 1 };
/* space mode's jobs without libgshare (docs/space.md) */
enum gs_space_unmod { GS_SPACE_UNMOD_TURNS = 0, GS_SPACE_UNMOD_CAP = 1 };

struct gs_gpu_conf {
	uint32_t index;
	char uuid[GS_UUID_MAX];
	char name[GS_LABEL_MAX];
	uint64_t memory;	/* bytes, 0: unknown */
};

struct gs_agent_config {
	char socket[108];
	char state_dir[256];
	uint32_t shares_per_gpu;
	uint32_t policy;	/* enum gs_policy */
	uint64_t slice_ns;
	uint64_t grace_ns;
	uint32_t escalation;	/* enum gs_escalation */
	uint64_t aging_ns;	/* 0: one slice */
	uint64_t idle_grace_ns;	/* short idle gaps keep the vtime (0: off) */
	uint64_t handoff_spin_ns;	/* hand-over: the next job polls for
					 * so long after a suspend (0: off) */
	int handoff_poll;		/* ... and the agent polls too */
	uint32_t log;		/* enum gs_log_target */
	char log_file[256];
	int verbose;
	uint32_t max_clients;
	uint32_t max_clients_per_uid;	/* connections of one non-root uid */
	uint32_t root_reserved_clients;	/* of max_clients, root's only */

	/* accounting (node-agent/acct_agent.c) */
	uint64_t acct_tick_ns;	/* accounting tick */
	char usage_db[256];	/* "": <state_dir>/usage.db */
	char store_group[33];	/* group of the store file ("": 0644) */
	uint32_t retention_days;	/* 0: keep usage forever */
	char metrics_listen[64];	/* "": no metrics endpoint */
	char watch_spool[256];	/* "": none; records waiting elsewhere */

	/* space mode (node-agent/mps.c) */
	char mps_control[256];	/* MPS control binary (PATH lookup) */
	char mps_pipe_dir[256];	/* "": run our own; else the site's */
	uint64_t mps_linger_ns;	/* daemon kept this long after its last
				 * allocation closed */
	int time_mps;		/* time-mode allocations are MPS clients
				 * too (one GPU context: no context
				 * switch at a hand-over) */
	uint32_t sm_count;	/* SMs per GPU for space partitions */
	uint32_t sm_granule;	/* partition step */
	int space_partitions;	/* write planned partitions into pages */
	int space_check;	/* the co-run check (space_agent.c) */
	uint32_t space_unmodified;	/* enum gs_space_unmod */
	uint64_t space_rotate_ns;	/* tie-breaks' rotation step, 0: off */
	/* GPU processes that bypass the gate (node-agent/unman.c) */
	uint32_t unmanaged_hold;	/* level 0: stop/continue them */
	uint64_t unmanaged_ahead_ns;	/* lead that stops them */
	/* GPU memory per allocation (admission in agent.c) */
	uint32_t memory;	/* enum gs_mem_policy: default limit */
	uint64_t memory_reserve;	/* per GPU, kept back for the driver */
	uint64_t memory_context_reserve;	/* per allocation: its context */
	int memory_oversubscribe;	/* limits may add up beyond the GPU */

	uint32_t gpu_source;	/* enum gs_gpu_source */
	uint32_t nsim;		/* GS_GPUS_SIM */
	uint64_t sim_memory;	/* GS_GPUS_SIM and auto's fallback */
	uint32_t ngpus;		/* GS_GPUS_LIST */
	struct gs_gpu_conf gpus[GS_MAX_GPUS];
};

extern const struct gs_cfg_key gs_agent_keys[];

/* Defaults only (no file). */
void gs_agent_config_defaults(struct gs_agent_config *c);
/* Defaults, then the file.  GS_ECONFIG "file:line: key: message". */
int gs_agent_config_load(const char *path, struct gs_agent_config *c,
			 struct gs_error *err);
/* The same from memory (the fuzzer's entry); name is used in messages. */
int gs_agent_config_load_string(const char *text, size_t len,
				const char *name, struct gs_agent_config *c,
				struct gs_error *err);
int gs_agent_config_print(const struct gs_agent_config *c, FILE *f);

#endif /* GS_AGENT_CONFIG_H */
