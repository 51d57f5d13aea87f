/*
 * gs_spank.h — internal interface of the SPANK plugin spank_gshare.so.
 *
 * spank_gshare.c holds the entry points Slurm calls and dispatches on
 * spank_context() to one file per context:
 *   spank_local.c   srun / sbatch / salloc: --gshare-* options, validated
 *                   before the job is queued
 *   spank_remote.c  slurmstepd: register the step's allocation with the
 *                   agent, export the environment, release at step exit
 *   spank_slurmd.c  job prolog/epilog (as root on the node): close what a
 *                   dead step left behind, write the job's totals
 *   spank_spool.c   the spool of job totals for slurmdbd and its writer
 *   slurm_query.c   the few libslurm calls (step gres, accounting)
 * Only spank_*.c include spank.h; only slurm_query.c includes slurm.h.
 * Only plugin_* and slurm_spank_* leave the .so (spank_gshare.lds); the
 * rest is gs__ (cross-file) or static.  SPANK calls every hook from one
 * thread of one process, so the state below is a plain global.
 */
#ifndef GS_SPANK_H
#define GS_SPANK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gs_error.h"
#include "gs_proto.h"
#include "gs_spankopt.h"

struct gs__state {
	int conf_ok;			/* plugstack arguments parsed */
	struct gs_spank_conf conf;
	struct gs_spank_opts opts;	/* --gshare-* (local and remote) */
	/* remote context */
	uint32_t job, step;
	uint64_t alloc_id;		/* 0: this step has no allocation */
	uint32_t shares;
	char node[GS_LABEL_MAX];
	char agent[GS_SPANK_PATH_MAX];	/* conf.agent with %n expanded */
	/* set by init_post_opt, printed by task_init on the task's stderr
	 * (the only channel to the user): fail != 0 fails every task */
	int fail;
	char user_msg[GS_ERRMSG_MAX + 128];
	/* a --gshare-* value slurmstepd replayed and the plugin refused */
	char bad_opt[GS_ERRMSG_MAX];
};

extern struct gs__state gs__st;

/* One hook per context; spank_t is struct spank_handle *. */
struct spank_handle;
int gs__local_init(struct spank_handle *sp);	/* spank_local.c */
int gs__remote_begin(struct spank_handle *sp);	/* spank_remote.c */
int gs__remote_end(struct spank_handle *sp);
int gs__remote_task(struct spank_handle *sp);
int gs__slurmd_epilog(struct spank_handle *sp);	/* spank_slurmd.c */

/* spank_slurmd.c: merge this node's segment into the job's AdminComment
 * with sacct and sacctmgr (bounded runs; read back for multi-node jobs).
 * Calls nothing of libslurm: the spool writer runs it in a forked
 * process. */
int gs__update_comment(const char *job, const char *node, int one_node,
		       const char *seg, struct gs_error *err);

/* spank_spool.c: put one job's totals on this node into spool_dir
 * durably (written, fsync'ed, renamed), and start the detached writer
 * that pushes the spool to slurmdbd unless one runs already. */
int gs__spool_put(const struct gs_spank_spool *r, struct gs_error *err);
void gs__spool_kick(void);
/* mkdir -p, missing levels 0700 */
int gs__mkdir_p(const char *path, struct gs_error *err);

/* slurm_query.c */
/* The step's TRES-per-node string (the job's for the batch step), for
 * gs_gres_count.  *out is malloc'ed ("" when the step has none). */
int gs__slurm_step_tres(uint32_t job, uint32_t step, char **out,
			struct gs_error *err);

/* The job's TRES-per-node string (*tres, malloc'ed, "" when none) and
 * the GPU index Slurm gave gres `gres` on `node` (*gpu, -1 when Slurm
 * did not bind it to a device: gres.conf without File=). */
int gs__slurm_job_gres(uint32_t job, const char *node, const char *gres,
		       char **tres, int *gpu, struct gs_error *err);

/* How the job ended (enum gs_end_state, from its state in slurmctld, which
 * keeps finished jobs for MinJobAge), GS_END_DEFAULT when unknown. */
uint32_t gs__slurm_job_end_state(uint32_t job);
/* Is job over on every node, and for older_s seconds at least (its own
 * epilogs done)?  1: yes, *end_state and *one_node (it ran on one node)
 * set; a job slurmctld no longer knows (purged after MinJobAge) is over,
 * GS_END_DEFAULT and not one node.  0: running, pending, completing or
 * ended recently; -1: slurmctld did not answer (err). */
int gs__slurm_job_over(uint32_t job, uint64_t older_s, uint32_t *end_state,
		       int *one_node, struct gs_error *err);

/* Milliseconds from the configured timeout, for gs_client. */
int gs__timeout_ms(void);

#endif /* GS_SPANK_H */
