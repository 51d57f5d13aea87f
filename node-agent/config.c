/*
 * config.c — load and print gshared's YAML configuration.
 *
 * Scalars go through the key table; `gpus` through gpus_entry(); checks
 * that span several keys run once at the end (validate()).  Nothing here
 * touches the system: discovery happens later, in gpu.c.
 */
#include <string.h>

#include "config.h"
#include "gs_log.h"
#include "metrics.h"
#include "sched.h"

static const char *const policy_names[] = { "wfq", "priority",
					    "dynamic-priority", NULL };
static const char *const escalation_names[] = { "hold", "kill", NULL };
static const char *const log_names[] = { "stderr", "syslog", "file", NULL };
static const char *const memory_names[] = { "proportional", "unlimited",
					    NULL };
static const char *const space_unmod_names[] = { "turns", "cap", NULL };

#define C struct gs_agent_config
const struct gs_cfg_key gs_agent_keys[] = {
	GS_CFG_KEY_STRING("socket", C, socket, 1, GS_DEFAULT_SOCKET,
			  "Unix socket clients connect to"),
	GS_CFG_KEY_STRING("state_dir", C, state_dir, 1, "/var/lib/gshare",
			  "directory for the agent's durable state"),
	GS_CFG_KEY_UINT("shares_per_gpu", C, shares_per_gpu, 1, 10000, "100",
			"guaranteed shares one GPU is divided into"),
	GS_CFG_KEY_ENUM("policy", C, policy, policy_names, "wfq",
			"scheduling policy"),
	GS_CFG_KEY_DURATION("slice", C, slice_ns, 100 * GS_NS_PER_US,
			    10 * GS_NS_PER_S, "4ms",
			    "token slice length"),
	GS_CFG_KEY_DURATION("grace", C, grace_ns, GS_NS_PER_MS,
			    60 * GS_NS_PER_S, "100ms",
			    "time a holder has to release after a suspend"),
	GS_CFG_KEY_ENUM("escalation", C, escalation, escalation_names, "hold",
			"what happens to a holder that overruns the grace"),
	GS_CFG_KEY_DURATION("aging", C, aging_ns, 0, 3600 * GS_NS_PER_S, "0",
			    "dynamic-priority: wait per class boost "
			    "(0: one slice)"),
	GS_CFG_KEY_DURATION("idle_grace", C, idle_grace_ns, 0, GS_NS_PER_S,
			    "2ms", "idle gap that keeps a job's place "
			    "(0: off)"),
	GS_CFG_KEY_DURATION("handoff_spin", C, handoff_spin_ns, 0,
			    10 * GS_NS_PER_MS, "1ms", "the next job polls "
			    "for its grant during a hand-over (0: off)"),
	GS_CFG_KEY_BOOL("handoff_poll", C, handoff_poll, "false",
			"the agent polls for the release during a "
			"hand-over"),
	GS_CFG_KEY_ENUM("log", C, log, log_names, "syslog",
			"log target (-d logs to stderr)"),
	GS_CFG_KEY_STRING("log_file", C, log_file, 0, NULL,
			  "log file when log: file"),
	GS_CFG_KEY_BOOL("verbose", C, verbose, "false", "debug logging"),
	GS_CFG_KEY_UINT("max_clients", C, max_clients, 1, 100000, "4096",
			"simultaneous client connections"),
	GS_CFG_KEY_UINT("max_clients_per_uid", C, max_clients_per_uid, 1,
			100000, "256",
			"connections one non-root user may hold"),
	GS_CFG_KEY_UINT("root_reserved_clients", C, root_reserved_clients, 0,
			100000, "64",
			"connections of max_clients that only root may use"),
	GS_CFG_KEY_DURATION("accounting_tick", C, acct_tick_ns,
			    10 * GS_NS_PER_MS, 3600 * GS_NS_PER_S, "1s",
			    "period of the accounting tick"),
	GS_CFG_KEY_STRING("usage_db", C, usage_db, 0, NULL,
			  "usage store (empty: <state_dir>/usage.db)"),
	GS_CFG_KEY_STRING("store_group", C, store_group, 0, "gshare",
			  "group that may read the usage store (gsacct's "
			  "setgid group; empty: world-readable)"),
	GS_CFG_KEY_UINT("usage_retention_days", C, retention_days, 0, 36500,
			"90", "days of per-tick samples kept (0: forever)"),
	GS_CFG_KEY_STRING("metrics_listen", C, metrics_listen, 0,
			  "127.0.0.1:9464",
			  "Prometheus endpoint host:port (empty: off)"),
	GS_CFG_KEY_STRING("watch_spool", C, watch_spool, 0, "",
			  "directory of records waiting for another system "
			  "(the Slurm plugin's spool_dir): count and oldest "
			  "age as metrics (empty: off)"),
	GS_CFG_KEY_STRING("mps_control", C, mps_control, 1,
			  "nvidia-cuda-mps-control",
			  "MPS control binary the agent runs per GPU with "
			  "space-mode allocations"),
	GS_CFG_KEY_STRING("mps_pipe_dir", C, mps_pipe_dir, 0, NULL,
			  "a site's own MPS pipe directory (empty: the "
			  "agent runs its own daemons)"),
	GS_CFG_KEY_DURATION("mps_linger", C, mps_linger_ns, 0,
			    600 * GS_NS_PER_S, "2s",
			    "an MPS daemon with no allocation left quits after "
			    "this (a job that comes sooner reuses it)"),
	GS_CFG_KEY_BOOL("time_mps", C, time_mps, "false",
			"time-mode allocations run as clients of the GPU's "
			"MPS daemon too (same user; no context switch at a "
			"hand-over)"),
	GS_CFG_KEY_UINT("sm_count", C, sm_count, 1, 4096, "132",
			"SMs per GPU that space-mode partitions divide"),
	GS_CFG_KEY_UINT("sm_granule", C, sm_granule, 1, 4096, "8",
			"SMs per partition step (space mode)"),
	GS_CFG_KEY_BOOL("space_partitions", C, space_partitions, "true",
			"write planned SM partitions into control pages "
			"(false: co-granted members share all SMs)"),
	GS_CFG_KEY_BOOL("space_check", C, space_check, "true",
			"measure co-running space jobs against their rates "
			"alone: move granules, or let them take turns"),
	GS_CFG_KEY_DURATION("space_rotate", C, space_rotate_ns, 0,
			    3600 * GS_NS_PER_S, "1s",
			    "co-running space jobs whose shares cannot be "
			    "split exactly into SM granules take the odd SMs "
			    "in turns, one step this often (0: never)"),
	GS_CFG_KEY_ENUM("space_unmodified", C, space_unmodified,
			space_unmod_names, "turns",
			"space-mode jobs without libgshare (the launch "
			"gate): take turns on the whole GPU (turns), or "
			"co-run under MPS's thread cap sized by share, "
			"fixed at their start (cap)"),
	GS_CFG_KEY_BOOL("unmanaged_hold", C, unmanaged_hold, "false",
			"hold back (SIGSTOP/SIGCONT) GPU processes of an "
			"allocation that bypass the gate while ahead"),
	GS_CFG_KEY_DURATION("unmanaged_ahead", C, unmanaged_ahead_ns,
			    10 * GS_NS_PER_MS, 3600 * GS_NS_PER_S, "1s",
			    "lead over the fair share that holds back "
			    "unmanaged processes"),
	GS_CFG_KEY_ENUM("memory", C, memory, memory_names, "proportional",
			"default device memory limit of an allocation: its "
			"shares of the GPU's memory less the reserve, or none"),
	GS_CFG_KEY_SIZE("memory_reserve", C, memory_reserve, 0, 0, "1G",
			"device memory per GPU kept out of every limit (the "
			"driver's contexts and workspaces)"),
	GS_CFG_KEY_SIZE("memory_context_reserve", C, memory_context_reserve,
			0, 0, "512M", "device memory per allocation kept out "
			"of its limit for its CUDA context (outside any "
			"allocation call)"),
	GS_CFG_KEY_BOOL("memory_oversubscribe", C, memory_oversubscribe,
			"false", "admit memory limits that add up to more "
			"than a GPU has"),
	GS_CFG_KEY_END,
};

struct gpu_item {
	uint32_t index;
	char uuid[GS_UUID_MAX];
	char name[GS_LABEL_MAX];
	uint64_t memory;
};

static const struct gs_cfg_key gpu_keys[] = {
	GS_CFG_KEY_UINT("index", struct gpu_item, index, 0, GS_MAX_GPUS - 1,
			NULL, "GPU index"),
	GS_CFG_KEY_STRING("uuid", struct gpu_item, uuid, 1, NULL, "GPU UUID"),
	GS_CFG_KEY_STRING("name", struct gpu_item, name, 0, NULL,
			  "GPU model name"),
	GS_CFG_KEY_SIZE("memory", struct gpu_item, memory, 0, 0, "0",
			"device memory (0: unknown, no memory limits)"),
	GS_CFG_KEY_END,
};

struct sim_item {
	uint32_t simulated;
	uint64_t memory;
};

static const struct gs_cfg_key sim_keys[] = {
	GS_CFG_KEY_UINT("simulated", struct sim_item, simulated, 1,
			GS_MAX_GPUS, "1", "number of simulated GPUs"),
	GS_CFG_KEY_SIZE("memory", struct sim_item, memory, 0, 0, "80G",
			"device memory of each simulated GPU"),
	GS_CFG_KEY_END,
};
#undef C

static int gpus_list(struct gs_agent_config *c, const struct gs_ynode *seq,
		     const char *file, struct gs_error *err)
{
	const struct gs_ynode *it;
	struct gpu_item g;
	uint32_t i;

	c->gpu_source = GS_GPUS_LIST;
	c->ngpus = 0;
	for (it = seq->child; it != NULL; it = it->next) {
		if (c->ngpus == GS_MAX_GPUS)
			return gs_error_set(err, GS_ECONFIG,
					    "%s:%d: gpus: more than %d GPUs",
					    file, it->line, GS_MAX_GPUS);
		memset(&g, 0, sizeof(g));
		g.index = c->ngpus;
		if (gs_cfg_apply_yaml(gpu_keys, &g, it, file, NULL, NULL,
				      err) < 0)
			return -1;
		if (gs_ynode_get(it, "uuid") == NULL)
			return gs_error_set(err, GS_ECONFIG,
					    "%s:%d: gpus: uuid: missing",
					    file, it->line);
		for (i = 0; i < c->ngpus; i++) {
			if (c->gpus[i].index == g.index)
				return gs_error_set(err, GS_ECONFIG,
						    "%s:%d: gpus: index %u "
						    "listed twice", file,
						    it->line, g.index);
			if (strcmp(c->gpus[i].uuid, g.uuid) == 0)
				return gs_error_set(err, GS_ECONFIG,
						    "%s:%d: gpus: uuid %s "
						    "listed twice", file,
						    it->line, g.uuid);
		}
		c->gpus[c->ngpus].index = g.index;
		memcpy(c->gpus[c->ngpus].uuid, g.uuid, sizeof(g.uuid));
		memcpy(c->gpus[c->ngpus].name, g.name, sizeof(g.name));
		c->gpus[c->ngpus].memory = g.memory;
		c->ngpus++;
	}
	if (c->ngpus == 0)
		return gs_error_set(err, GS_ECONFIG,
				    "%s:%d: gpus: empty list", file,
				    seq->line);
	return 0;
}

/* The `gpus` key: scalar nvml/auto, {simulated: N}, or a list. */
static int gpus_entry(void *ctx, const struct gs_ynode *e, const char *file,
		      struct gs_error *err)
{
	struct gs_agent_config *c = ctx;
	struct sim_item s;

	if (strcmp(e->key, "gpus") != 0)
		return gs_error_set(err, GS_ECONFIG,
				    "%s:%d: %s: unknown key", file,
				    e->key_line, e->key);
	switch (e->kind) {
	case GS_YNODE_SCALAR:
		if (strcmp(e->value, "nvml") == 0) {
			c->gpu_source = GS_GPUS_NVML;
			return 0;
		}
		if (strcmp(e->value, "auto") == 0) {
			c->gpu_source = GS_GPUS_AUTO;
			return 0;
		}
		return gs_error_set(err, GS_ECONFIG,
				    "%s:%d: gpus: '%s' is not one of: nvml, "
				    "auto, {simulated: N}, a list of GPUs",
				    file, e->key_line, e->value);
	case GS_YNODE_MAP:
		if (gs_cfg_defaults(sim_keys, &s, err) < 0)
			return -1;
		if (gs_cfg_apply_yaml(sim_keys, &s, e, file, NULL, NULL,
				      err) < 0)
			return -1;
		if (gs_ynode_get(e, "simulated") == NULL)
			return gs_error_set(err, GS_ECONFIG,
					    "%s:%d: gpus: expected "
					    "simulated: N", file, e->line);
		c->gpu_source = GS_GPUS_SIM;
		c->nsim = s.simulated;
		c->sim_memory = s.memory;
		return 0;
	default:
		return gpus_list(c, e, file, err);
	}
}

void gs_agent_config_defaults(struct gs_agent_config *c)
{
	memset(c, 0, sizeof(*c));
	if (gs_cfg_defaults(gs_agent_keys, c, NULL) < 0)
		fatalx("built-in configuration defaults do not parse");
	c->gpu_source = GS_GPUS_NVML;
	c->nsim = 0;
	c->sim_memory = 80ull << 30;
}

static int validate(const struct gs_agent_config *c, const char *file,
		    struct gs_error *err)
{
	if (c->log == 2 && c->log_file[0] == '\0')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: log_file: required with log: file",
				    file);
	if (c->log != 2 && c->log_file[0] != '\0')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: log_file: only valid with log: file",
				    file);
	if (c->socket[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: socket: must be an absolute path",
				    file);
	if (c->state_dir[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: state_dir: must be an absolute path",
				    file);
	if (c->sm_granule > c->sm_count)
		return gs_error_set(err, GS_ECONFIG,
				    "%s: sm_granule: must not exceed sm_count "
				    "(%u)", file, c->sm_count);
	if (c->mps_pipe_dir[0] != '\0' && c->mps_pipe_dir[0] != '/')
		return gs_error_set(err, GS_ECONFIG,
				    "%s: mps_pipe_dir: must be an absolute "
				    "path", file);
	if (c->grace_ns < c->slice_ns / 4)
		return gs_error_set(err, GS_ECONFIG,
				    "%s: grace: must be at least a quarter "
				    "of the slice", file);
	/* each step resizes the members concerned (an eviction each) */
	if (c->space_rotate_ns != 0 && c->space_rotate_ns < 100 * GS_NS_PER_MS)
		return gs_error_set(err, GS_ECONFIG,
				    "%s: space_rotate: 0 (never) or at least "
				    "100ms", file);
	if (c->root_reserved_clients >= c->max_clients)
		return gs_error_set(err, GS_ECONFIG,
				    "%s: root_reserved_clients: must be less "
				    "than max_clients (%u), or no other user "
				    "could connect", file, c->max_clients);
	if (c->metrics_listen[0] != '\0') {
		char host[64];
		uint16_t port;
		struct gs_error e;

		if (gs_metrics_parse_addr(c->metrics_listen, host,
					  sizeof(host), &port, &e) < 0)
			return gs_error_set(err, GS_ECONFIG,
					    "%s: metrics_listen: %s", file,
					    e.msg);
	}
	return 0;
}

/* A group name as useradd/groupadd take it: [A-Za-z0-9_.-], not starting
 * with '-', at most 32 characters (the field's size enforces the length).
 * Empty is valid (no group: the store stays world-readable). */
static int check_group(const struct gs_agent_config *c,
		       const struct gs_ynode *root, const char *file,
		       struct gs_error *err)
{
	const struct gs_ynode *n = gs_ynode_get(root, "store_group");
	const char *p;

	for (p = c->store_group; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
		    (*p == '-' && p != c->store_group))
			continue;
		return gs_error_set(err, GS_ECONFIG,
				    "%s:%d: store_group: '%s' is not a group "
				    "name (letters, digits, '_', '.', '-'; "
				    "not starting with '-')", file,
				    n != NULL ? n->key_line : 0,
				    c->store_group);
	}
	return 0;
}

/* Defaults, then the parsed document root (freed here); c is written
 * only on success. */
static int load_root(struct gs_ynode *root, const char *path,
		     struct gs_agent_config *c, struct gs_error *err)
{
	struct gs_agent_config t;
	int rv = -1;

	gs_agent_config_defaults(&t);
	if (root->kind == GS_YNODE_MAP && root->child == NULL &&
	    root->line == 0) {
		/* a truncated or emptied file would silently reset every
		 * setting; every default is asked for with `{}` */
		gs_error_set(err, GS_ECONFIG, "%s: no settings (the file is "
			     "empty or only comments); write {} to run with "
			     "every default", path);
		goto out_free;
	}
	if (gs_cfg_apply_yaml(gs_agent_keys, &t, root, path, gpus_entry, &t,
			      err) < 0)
		goto out_free;
	if (check_group(&t, root, path, err) < 0 ||
	    validate(&t, path, err) < 0)
		goto out_free;
	*c = t;
	rv = 0;
out_free:
	gs_ynode_free(root);
	return rv;
}

int gs_agent_config_load(const char *path, struct gs_agent_config *c,
			 struct gs_error *err)
{
	struct gs_ynode *root = NULL;

	if (gs_yaml_load_file(path, &root, err) < 0)
		return -1;
	return load_root(root, path, c, err);
}

int gs_agent_config_load_string(const char *text, size_t len,
				const char *name, struct gs_agent_config *c,
				struct gs_error *err)
{
	struct gs_ynode *root = NULL;

	if (gs_yaml_load_string(text, len, name, &root, err) < 0)
		return -1;
	return load_root(root, name, c, err);
}

int gs_agent_config_print(const struct gs_agent_config *c, FILE *f)
{
	struct gpu_item g;
	uint32_t i;

	if (gs_cfg_print(gs_agent_keys, c, GS_CFG_YAML, NULL, f) < 0)
		return -1;
	switch (c->gpu_source) {
	case GS_GPUS_NVML:
		fprintf(f, "gpus: nvml\n");
		break;
	case GS_GPUS_AUTO:
		fprintf(f, "gpus: auto\n");
		break;
	case GS_GPUS_SIM:
		{
			char mem[32];

			gs_cfg_format_size(c->sim_memory, mem, sizeof(mem));
			fprintf(f, "gpus:\n  simulated: %u\n  memory: %s\n",
				c->nsim, mem);
		}
		break;
	default:
		fprintf(f, "gpus:\n");
		for (i = 0; i < c->ngpus; i++) {
			memset(&g, 0, sizeof(g));
			g.index = c->gpus[i].index;
			memcpy(g.uuid, c->gpus[i].uuid, sizeof(g.uuid));
			memcpy(g.name, c->gpus[i].name, sizeof(g.name));
			g.memory = c->gpus[i].memory;
			fprintf(f, "  -\n");
			if (gs_cfg_print(gpu_keys, &g, GS_CFG_YAML, "    ",
					 f) < 0)
				return -1;
		}
		break;
	}
	return ferror(f) ? -1 : 0;
}
