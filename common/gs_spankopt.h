/*
 * gs_spankopt.h — the SPANK plugin's logic that needs no Slurm: user option
 * validation, plugstack.conf arguments, gres strings, step names, the
 * per-step usage records and the AdminComment text.
 *
 * Everything here is pure (no I/O except the record file helpers, which
 * take a path) and never prints, so tests/slurm/test_spankopt.c checks it
 * without a cluster.  The plugin under spank/ is the only user.
 */
#ifndef GS_SPANKOPT_H
#define GS_SPANKOPT_H

#include <stddef.h>
#include <stdint.h>

#include "gs_config.h"
#include "gs_error.h"

#define GS_SPANK_WEIGHT_MAX 10000u
#define GS_SPANK_PATH_MAX 108	/* sun_path */

/* What to do with a step when the agent cannot be reached. */
enum gs_spank_down {
	GS_SPANK_DOWN_FAIL = 0,		/* fail the step, one clear message */
	GS_SPANK_DOWN_UNMANAGED = 1,	/* warn, run without an allocation */
};

/* plugstack.conf arguments (`key=value` after the plugin path). */
struct gs_spank_conf {
	char agent[GS_SPANK_PATH_MAX];	/* agent socket */
	char gres[32];			/* gres name that means "a share" */
	uint64_t timeout_ns;		/* bound on connect and each request */
	uint32_t on_agent_down;		/* enum gs_spank_down */
	char state_dir[GS_SPANK_PATH_MAX];	/* per-job usage records */
	char spool_dir[GS_SPANK_PATH_MAX];	/* totals waiting for slurmdbd */
	int admin_comment;		/* write job totals to AdminComment */
	char sacct[GS_SPANK_PATH_MAX];	/* reads AdminComment back */
	char sacctmgr[GS_SPANK_PATH_MAX];	/* writes it */
	uint32_t max_user_weight;	/* largest --gshare-weight a user may
					 * ask for; 0: the job's shares */
	char preload[GS_SPANK_PATH_MAX];	/* launch gate put in every
						 * step's LD_PRELOAD; "no": off
						 * for the site */
	uint64_t late_epilog_ns;	/* a job ended this long ago whose
					 * epilog left it open on the node
					 * is closed by a later job's
					 * epilog; 0: never */
};

/* The table behind struct gs_spank_conf (defaults, help, printing). */
extern const struct gs_cfg_key gs_spank_conf_keys[];

/* Defaults, then argv[0..argc-1] as key=value.  GS_ECONFIG with
 * "argument N: key: message" on a bad or unknown key. */
int gs_spank_conf_parse(struct gs_spank_conf *conf, int argc,
			char *const argv[], struct gs_error *err);

/* Expand the agent path template for one node: "%n" becomes the node's
 * Slurm name (several slurmd on one host each reach their own agent),
 * "%%" a '%'; any other '%' is an error, as is a result that does not
 * fit in len.  gs_spank_conf_parse checks the template with a dummy
 * node, so a bad one fails at plugin load. */
int gs_spank_expand_path(const char *tmpl, const char *node, char *out,
			 size_t len, struct gs_error *err);

/* What the user asked for with --gshare-*; zeros mean "not given". */
struct gs_spank_opts {
	uint32_t weight;	/* 0: same as the shares */
	uint32_t priority;	/* enum gs_priority */
	uint32_t mode;		/* enum gs_mode */
	uint64_t mem;		/* device memory limit, bytes; 0: the
				 * site's default */
	uint32_t no_preload;	/* 1: --gshare-preload=no */
};

void gs_spank_opts_init(struct gs_spank_opts *o);

/* Validate one option value and store it.  On a bad value GS_EINVAL with
 * a one-line message naming the option, the value and what is allowed,
 * e.g. "--gshare-weight=abc: expected a whole number from 1 to 10000". */
int gs_spank_opt_weight(const char *val, struct gs_spank_opts *o,
			struct gs_error *err);
int gs_spank_opt_priority(const char *val, struct gs_spank_opts *o,
			  struct gs_error *err);
int gs_spank_opt_mode(const char *val, struct gs_spank_opts *o,
		      struct gs_error *err);
/* --gshare-mem=SIZE: 1M..16T, units K M G T (powers of 1024). */
int gs_spank_opt_mem(const char *val, struct gs_spank_opts *o,
		     struct gs_error *err);

/* --gshare-preload=yes|no: the launch gate in the step's environment. */
int gs_spank_opt_preload(const char *val, struct gs_spank_opts *o,
			 struct gs_error *err);

/*
 * The step's LD_PRELOAD with the launch gate `lib` first: `old` (NULL or
 * "" when unset; entries separated by spaces or colons, as ld.so takes
 * them) is kept after it, and not changed at all when it already names
 * `lib`.  GS_EINVAL when the result does not fit in len.
 */
int gs_preload_join(const char *old, const char *lib, char *out, size_t len,
		    struct gs_error *err);

/* Site policy on the weight, once the shares are known: a user may lower
 * the weight below the default (the shares) but not raise it beyond
 * max(shares, max_user_weight); raising it further is for root
 * (`gsharectl set-weight`).  GS_EPERM with a one-line message; weight 0
 * (not given) always passes.  A weight never breaks another job's
 * guarantee (docs/scheduler.md), it only divides the unguaranteed
 * time. */
int gs_spank_weight_allowed(const struct gs_spank_opts *o, uint32_t shares,
			    uint32_t max_user_weight, struct gs_error *err);

/*
 * The count of gres `name` in a Slurm TRES-per-node string such as
 * "gres:gshare:30", "gres:gpu:a100:1,gres:gshare:30", "gres/gshare=30"
 * or the older "gshare:30" (entries separated by ',' or ';'; an optional
 * type between name and count; a count may end in k/m/g, powers of 1024;
 * no count means 1).  Returns 1 and sets *count when present, 0 when the
 * string (NULL and "" included) names no such gres, -1 (GS_EINVAL) when
 * an entry for `name` is malformed.
 */
int gs_gres_count(const char *tres, const char *name, uint64_t *count,
		  struct gs_error *err);

/*
 * The GPU index Slurm gave gres `name` on one node, from that node's
 * entry of a job's gres detail (scontrol show job -d: "shard:60(IDX:1)",
 * "gpu:a100:1(IDX:0),shard:30(IDX:0)").  A shard count on one node comes
 * from one GPU, so the first index of the list is the GPU.  Returns 1 and
 * sets *gpu, 0 when the entry names no such gres or no index (a gres
 * without File=), -1 (GS_EINVAL) on a malformed index.
 */
int gs_gres_detail_gpu(const char *detail, const char *name, int *gpu,
		       struct gs_error *err);

/* 1 when s is "<digits>_<digits>" (a job array task as sacct and
 * sacctmgr take it, at most 10 digits each), else 0. */
int gs_spank_array_spec_ok(const char *s);

/* Slurm's special step ids (slurm.h), repeated so common/ needs no Slurm
 * header; a test checks them against slurm.h. */
#define GS_SLURM_STEP_PENDING	 0xfffffffdu
#define GS_SLURM_STEP_EXTERN	 0xfffffffcu
#define GS_SLURM_STEP_BATCH	 0xfffffffbu
#define GS_SLURM_STEP_INTERACTIVE 0xfffffffau

/* "batch", "extern", "interactive", "pending" or the decimal id. */
void gs_spank_step_name(uint32_t step, char *buf, size_t len);

/*
 * Usage of one closed allocation, as the step's exit hook stores it for
 * the job epilog (one line of text per file):
 *   "gshare-record 1 id=N shares=N gpu_ns=N held_ns=N[ mem_max=N]\n"
 * (mem_max, the most device memory held, is written when not 0, so that
 * records without it read the same everywhere).
 */
struct gs_spank_record {
	uint64_t id;
	uint32_t shares;
	uint64_t gpu_ns;
	uint64_t held_ns;
	uint64_t mem_max;	/* bytes, 0: none reported */
};

int gs_spank_record_format(const struct gs_spank_record *r, char *buf,
			   size_t len, struct gs_error *err);
int gs_spank_record_parse(const char *text, struct gs_spank_record *r,
			  struct gs_error *err);

/* "<state_dir>/<job>.<node>": where a job's steps on one node leave their
 * records.  The step that creates the job's first allocation on the node
 * creates it, so the epilog has work only where it exists. */
int gs_spank_job_dir(const char *state_dir, uint32_t job, const char *node,
		     char *buf, size_t len, struct gs_error *err);

/* Job totals on one node, summed over its allocations. */
struct gs_spank_totals {
	uint32_t allocs;
	uint32_t max_shares;	/* largest share any step of the job had */
	uint64_t gpu_ns;
	uint64_t held_ns;
	uint64_t mem_max;	/* most device memory any step held */
};

void gs_spank_totals_add(struct gs_spank_totals *t,
			 const struct gs_spank_record *r);

/*
 * AdminComment text.  Each node writes one segment
 *   "gshare[NODE]:gpu_s=S.SSS,held_s=S.SSS,share=N,allocs=N[,mem_max=N]"
 * (mem_max in bytes, only when a step reported device memory)
 * and segments are joined with ';'.  gs_spank_comment_merge returns in
 * *out (malloc'ed) `old` with the segment for `node` replaced, or added
 * at the end; text of `old` that is not a gshare segment is kept as is.
 */
int gs_spank_comment_segment(const char *node,
			     const struct gs_spank_totals *t, char *buf,
			     size_t len, struct gs_error *err);
int gs_spank_comment_merge(const char *old, const char *node,
			   const char *segment, char **out,
			   struct gs_error *err);

/*
 * One job's totals on one node waiting for slurmdbd (the epilog spools
 * them; a background writer pushes them with sacctmgr):
 *   "gshare-spool 1 job=SPEC node=NODE nodes=N seg=SEGMENT\n"
 * SPEC is a job id or "<ArrayJobId>_<TaskId>", NODE a Slurm node name,
 * N the job's node count (1: no concurrent writer, no read-back),
 * SEGMENT what gs_spank_comment_segment made.  Format returns the length
 * written (GS_EINVAL when a field is bad or it does not fit), parse
 * 0 or -1 (GS_EINVAL, err names the problem).
 */
struct gs_spank_spool {
	char job[32];
	char node[64];		/* GS_LABEL_MAX */
	uint32_t nodes;
	char seg[256];
};

int gs_spank_spool_format(const struct gs_spank_spool *r, char *buf,
			  size_t len, struct gs_error *err);
int gs_spank_spool_parse(const char *line, struct gs_spank_spool *r,
			 struct gs_error *err);

#endif /* GS_SPANKOPT_H */
