/*
 * spank_gshare.c — entry points of spank_gshare.so and the dispatch on
 * spank_context() (see gs_spank.h for the file map).
 *
 * Slurm loads the plugin in srun/sbatch/salloc (local, allocator), in
 * slurmstepd (remote), in slurmd and in the job prolog/epilog
 * (job_script).  slurm_spank_init parses the plugstack.conf arguments in
 * every context — a bad argument fails there with one line naming it —
 * and registers the --gshare-* options where users can give them.
 */
#include <slurm/spank.h>

#include <string.h>

#include "gs_spank.h"

/* The objects build with -fvisibility=hidden; what Slurm looks up is
 * made visible here and the version script keeps the rest local. */
#pragma GCC visibility push(default)
SPANK_PLUGIN(gshare, 1)
spank_f slurm_spank_init, slurm_spank_init_post_opt, slurm_spank_task_init,
	slurm_spank_exit, slurm_spank_job_epilog;
#pragma GCC visibility pop

struct gs__state gs__st;

int gs__timeout_ms(void)
{
	return (int)(gs__st.conf.timeout_ns / 1000000u);
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	struct gs_error err;
	spank_context_t ctx = spank_context();

	memset(&gs__st, 0, sizeof(gs__st));
	gs_spank_opts_init(&gs__st.opts);
	if (gs_spank_conf_parse(&gs__st.conf, ac, av, &err) < 0) {
		slurm_error("gshare: plugstack.conf: %s", err.msg);
		/* a failing job prolog/epilog drains the node: only log */
		return ctx == S_CTX_JOB_SCRIPT ? 0 : -1;
	}
	gs__st.conf_ok = 1;
	switch (ctx) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
	case S_CTX_REMOTE:
		return gs__local_init(sp);
	default:
		return 0;
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!gs__st.conf_ok)
		return -1;
	if (spank_context() == S_CTX_REMOTE)
		return gs__remote_begin(sp);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (gs__st.conf_ok && spank_context() == S_CTX_REMOTE)
		return gs__remote_task(sp);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (gs__st.conf_ok && spank_context() == S_CTX_REMOTE)
		return gs__remote_end(sp);
	return 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	struct gs_error err;

	/* Slurm 22.05 runs the job epilog in a fresh process that reads
	 * plugstack.conf again and calls no slurm_spank_init first.  A bad
	 * argument is logged, and the epilog still succeeds: a failed
	 * epilog drains the node. */
	if (!gs__st.conf_ok) {
		if (gs_spank_conf_parse(&gs__st.conf, ac, av, &err) < 0) {
			slurm_error("gshare: plugstack.conf: %s; job epilog "
				    "skipped",
				    err.msg);
			return 0;
		}
		gs__st.conf_ok = 1;
	}
	return gs__slurmd_epilog(sp);
}
