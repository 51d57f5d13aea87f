/*
 * spank_local.c — the --gshare-* options (srun, sbatch, salloc, and
 * slurmstepd, where Slurm replays them).
 *
 * Slurm calls an option's callback while it parses the command line, so a
 * bad value stops srun/sbatch before anything is queued.  The message is
 * one line from gs_spank_opt_* (what was given, what is allowed).  In
 * local context slurm_error prints "srun: error: ..." on the user's
 * terminal; elsewhere it goes to the daemon's log.  In slurmstepd the
 * values come from the job's environment, which the user can set
 * directly (_SLURM_SPANK_OPTION_gshare_gshare_weight=abc): a bad one
 * there fails the step with the same message (spank_remote.c).
 */
#include <slurm/spank.h>

#include "gs_spank.h"

enum { OPT_WEIGHT = 1, OPT_PRIORITY, OPT_MODE, OPT_MEM, OPT_PRELOAD };

static int opt_cb(int val, const char *optarg, int remote)
{
	struct gs_error err;
	int rv = -1;

	switch (val) {
	case OPT_WEIGHT:
		rv = gs_spank_opt_weight(optarg, &gs__st.opts, &err);
		break;
	case OPT_PRIORITY:
		rv = gs_spank_opt_priority(optarg, &gs__st.opts, &err);
		break;
	case OPT_MODE:
		rv = gs_spank_opt_mode(optarg, &gs__st.opts, &err);
		break;
	case OPT_MEM:
		rv = gs_spank_opt_mem(optarg, &gs__st.opts, &err);
		break;
	case OPT_PRELOAD:
		rv = gs_spank_opt_preload(optarg, &gs__st.opts, &err);
		break;
	default:
		gs_error_set(&err, GS_EINVAL, "unknown option %d", val);
		break;
	}
	if (rv < 0) {
		slurm_error("gshare: %s", err.msg);
		/* slurmstepd replays options from the job's environment
		 * (_SLURM_SPANK_OPTION_gshare_*), and a failing callback
		 * there is only logged: the step would run with the default.
		 * Keep the first message; init_post_opt fails the step. */
		if (remote && gs__st.bad_opt[0] == '\0')
			snprintf(gs__st.bad_opt, sizeof(gs__st.bad_opt), "%s",
				 err.msg);
	}
	return rv;
}

static struct spank_option options[] = {
	{ "gshare-weight", "N",
	  "gshare: scheduling weight of this job's share, 1-10000 "
	  "(default: the share count)",
	  1, OPT_WEIGHT, opt_cb },
	{ "gshare-priority", "low|normal|high",
	  "gshare: priority class of this job's share (default normal)", 1,
	  OPT_PRIORITY, opt_cb },
	{ "gshare-mode", "time|space",
	  "gshare: share the GPU by time slices or by SM partitions "
	  "(default time)",
	  1, OPT_MODE, opt_cb },
	{ "gshare-mem", "SIZE",
	  "gshare: GPU memory limit of this job's share, e.g. 20G "
	  "(default: the share's part of the GPU's memory)",
	  1, OPT_MEM, opt_cb },
	{ "gshare-preload", "yes|no",
	  "gshare: load the launch gate into the job so that unmodified "
	  "CUDA programs get their share (default yes)",
	  1, OPT_PRELOAD, opt_cb },
	SPANK_OPTIONS_TABLE_END
};

int gs__local_init(spank_t sp)
{
	struct spank_option *o;
	spank_err_t rc;

	for (o = options; o->name != NULL; o++) {
		rc = spank_option_register(sp, o);
		if (rc != ESPANK_SUCCESS) {
			slurm_error("gshare: cannot register --%s: %s", o->name,
				    spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}
