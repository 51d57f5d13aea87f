/*
 * spank_remote.c — slurmstepd side: one agent allocation per job per
 * node, shared by the job's steps.
 *
 * A job's gshare count on a node is one budget: Slurm counts it once,
 * and its steps (the batch step, `srun`, `srun --overlap`) run inside it.
 * So slurm_spank_init_post_opt (as root, before the tasks exist) asks
 * slurmctld whether the step uses the job's gres at all (`--gres=none`
 * does not), then, under the job's lock on this node, finds the job's
 * allocation in the agent or creates it: the job's count, on the GPU
 * Slurm bound the gres to (gres.conf with File=, e.g. Slurm's shard),
 * labelled with cluster, job, node, user and account (no step).  It
 * exports GSHARE_SOCKET, GSHARE_ALLOC and CUDA_VISIBLE_DEVICES to the
 * tasks, overwriting what the job inherited.  A step without gshare gets
 * GSHARE_* removed, so a `srun --gres=none` inside a gshare job cannot
 * reach the job's allocation.  The allocation outlives the steps; the
 * job epilog (spank_slurmd.c) closes it and writes the job's totals.
 *
 * Every agent call is bounded by the plugstack `timeout`.  When the agent
 * cannot be reached, on_agent_down=fail fails the step with one line;
 * on_agent_down=unmanaged warns and runs it without a share.  The
 * connection is closed right after each use: no fd reaches the tasks.
 *
 * Messages for the user: slurmstepd logs only to slurmd's log, and a
 * failing init_post_opt shows up in srun as a bare "Plugin initialization
 * failed".  So init_post_opt logs the problem, remembers one line, and
 * slurm_spank_task_init — running in each task, whose stderr is the
 * user's — writes that line there (the one place this plugin prints) and
 * fails the task, or, for a warning, lets local task 0 go on.
 */
#include <slurm/spank.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_spank.h"

static void job_env(spank_t sp, const char *name, char *buf, size_t len)
{
	buf[0] = '\0';
	if (spank_getenv(sp, name, buf, (int)len) != ESPANK_SUCCESS)
		buf[0] = '\0';
}

/* This node's Slurm name: several slurmd may share one host, so the host
 * name will not do. */
static void node_name(spank_t sp, uint32_t nodeid, char *buf, size_t len)
{
	const char *e;

	job_env(sp, "SLURMD_NODENAME", buf, len);
	if (buf[0] != '\0')
		return;
	e = getenv("SLURMD_NODENAME");
	if (e != NULL && *e != '\0' && strlen(e) < len) {
		snprintf(buf, len, "%s", e);
		return;
	}
	snprintf(buf, len, "node%" PRIu32, nodeid);
}

static int get_u32(spank_t sp, spank_item_t item, uint32_t *out)
{
	return spank_get_item(sp, item, out) == ESPANK_SUCCESS ? 0 : -1;
}

static void fill_labels(spank_t sp, uid_t uid, struct gs_labels *l)
{
	struct passwd pw, *res = NULL;
	char buf[1024];

	memset(l, 0, sizeof(*l));
	job_env(sp, "SLURM_CLUSTER_NAME", l->cluster, sizeof(l->cluster));
	job_env(sp, "SLURM_JOB_ACCOUNT", l->account, sizeof(l->account));
	snprintf(l->job, sizeof(l->job), "%" PRIu32, gs__st.job);
	/* no step: the allocation is the job's, for all its steps */
	snprintf(l->node, sizeof(l->node), "%s", gs__st.node);
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
		snprintf(l->user, sizeof(l->user), "%s", pw.pw_name);
	else
		snprintf(l->user, sizeof(l->user), "%u", (unsigned)uid);
}

static void clear_env(spank_t sp)
{
	spank_unsetenv(sp, GS_ENV_SOCKET);
	spank_unsetenv(sp, GS_ENV_ALLOC);
}

static int is_unreachable(const struct gs_error *err)
{
	return err->code == GS_ECONNREFUSED || err->code == GS_ETIMEDOUT ||
	       err->code == GS_ECLOSED || err->code == GS_EIO;
}

/* Log a line and keep it for the user (see the top of the file). */
__attribute__((format(printf, 2, 3))) static void user_msg(int fail,
							   const char *fmt,
							   ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(gs__st.user_msg, sizeof(gs__st.user_msg), fmt, ap);
	va_end(ap);
	gs__st.fail = fail;
	slurm_error("%s", gs__st.user_msg);
}

/* The agent could not be reached: fail or run unmanaged, per config. */
static int agent_down(spank_t sp, const char *step,
		      const struct gs_error *err)
{
	if (gs__st.conf.on_agent_down == GS_SPANK_DOWN_UNMANAGED) {
		user_msg(0, "gshare: warning: step %" PRIu32 ".%s runs without "
			 "a GPU share: agent unreachable: %s",
			 gs__st.job, step, err->msg);
		clear_env(sp);
		return 0;
	}
	user_msg(1, "gshare: step %" PRIu32 ".%s not started: agent "
		 "unreachable: %s",
		 gs__st.job, step, err->msg);
	clear_env(sp);
	return 0;
}

/* The launch gate first in the step's LD_PRELOAD, unless the site
 * (preload=no) or the job (--gshare-preload=no) opted out. */
static int set_preload(spank_t sp)
{
	char old[4096], val[4096 + GS_SPANK_PATH_MAX + 2];
	struct gs_error err;

	if (gs__st.opts.no_preload || strcmp(gs__st.conf.preload, "no") == 0)
		return 0;
	/* not installed on this node: ld.so would complain in every
	 * process of the step; the job runs unmanaged by the gate */
	if (access(gs__st.conf.preload, R_OK) != 0) {
		slurm_info("gshare: launch gate %s not readable: not preloaded",
			   gs__st.conf.preload);
		return 0;
	}
	if (spank_getenv(sp, "LD_PRELOAD", old, sizeof(old)) !=
	    ESPANK_SUCCESS)
		old[0] = '\0';
	if (gs_preload_join(old, gs__st.conf.preload, val, sizeof(val),
			    &err) < 0) {
		slurm_error("gshare: %s", err.msg);
		return -1;
	}
	return spank_setenv(sp, "LD_PRELOAD", val, 1) == ESPANK_SUCCESS ?
		0 : -1;
}

static int set_env(spank_t sp, const struct gs_alloc_info *info)
{
	char id[32], gpu[16];

	snprintf(id, sizeof(id), "%" PRIu64, info->id);
	snprintf(gpu, sizeof(gpu), "%" PRId32, info->gpu);
	if (spank_setenv(sp, GS_ENV_SOCKET, gs__st.agent, 1) !=
		    ESPANK_SUCCESS ||
	    spank_setenv(sp, GS_ENV_ALLOC, id, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "CUDA_VISIBLE_DEVICES", gpu, 1) !=
		    ESPANK_SUCCESS)
		return -1;
	/* space mode (agent 1.3), or time mode with the agent's time_mps:
	 * a client of the GPU's MPS server; the thread percentage (space
	 * mode only) caps jobs without libgshare (libgshare drops it and
	 * keeps to the partition the agent sets) */
	if (info->mps_pipe[0] != '\0') {
		char pct[16];

		snprintf(pct, sizeof(pct), "%" PRIu32, info->mps_pct);
		if (spank_setenv(sp, GS_ENV_MPS_PIPE, info->mps_pipe, 1) !=
			    ESPANK_SUCCESS ||
		    (info->mps_pct > 0 &&
		     spank_setenv(sp, GS_ENV_MPS_PCT, pct, 1) !=
			     ESPANK_SUCCESS))
			return -1;
	}
	return set_preload(sp);
}

/* Create "<state_dir>/<job>.<node>" (the epilog's sign that this job
 * had allocations here) and put its path in dir. */
static int job_dir(char *dir, size_t len, struct gs_error *err)
{
	if (gs_spank_job_dir(gs__st.conf.state_dir, gs__st.job, gs__st.node,
			     dir, len, err) < 0)
		return -1;
	/* with its parents: /run/gshare is gone after a reboot until
	 * the agent starts, and a missing parent would lose the usage */
	if (gs__mkdir_p(gs__st.conf.state_dir, err) < 0)
		return -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return gs_error_errno(err, GS_EIO, "mkdir %s", dir);
	return 0;
}

/*
 * Take the job's lock on this node (<job dir>/.lock), waiting at most
 * until deadline_ms.  Steps of one job start concurrently (srun &, srun
 * --overlap); the lock makes "find the job's allocation, else create it"
 * one step at a time.  Returns the fd, -1 (err filled).
 */
static int lock_job(const char *dir, uint64_t deadline_ms,
		    struct gs_error *err);

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int lock_job(const char *dir, uint64_t deadline_ms,
		    struct gs_error *err)
{
	char path[GS_SPANK_PATH_MAX + 128];
	int fd;

	snprintf(path, sizeof(path), "%s/.lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "open %s", path);
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			gs_error_errno(err, GS_EIO, "flock %s", path);
			close(fd);
			return -1;
		}
		if (mono_ms() >= deadline_ms) {
			close(fd);
			return gs_error_set(err, GS_ETIMEDOUT,
					    "another step of the job holds "
					    "%s", path);
		}
		usleep(10000);
	}
	return fd;
}

/* A task of a job array: leave "<ArrayJobId>_<TaskId>" in the job dir,
 * for the epilog (whose environment has no SLURM_ARRAY_*) to write the
 * task's own record.  Best effort: without it the epilog uses the job id. */
static void save_array(spank_t sp, const char *dir)
{
	char path[GS_SPANK_PATH_MAX + 128], line[32];
	uint32_t aid = 0, tid = 0;
	int fd, n;

	if (get_u32(sp, S_JOB_ARRAY_ID, &aid) < 0 || aid == 0 ||
	    get_u32(sp, S_JOB_ARRAY_TASK_ID, &tid) < 0)
		return;
	snprintf(path, sizeof(path), "%s/.array", dir);
	n = snprintf(line, sizeof(line), "%" PRIu32 "_%" PRIu32 "\n", aid,
		     tid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n)
		slurm_error("gshare: job %" PRIu32 ": %s: %m", gs__st.job,
			    path);
	if (fd >= 0)
		close(fd);
}

/* The job's open allocation on this node, if a step created it: 1 and
 * *info filled, 0 when there is none, -1 on error. */
static int find_job_alloc(struct gs_client *c, struct gs_alloc_info *info,
			  struct gs_error *err)
{
	struct gs_status *st = NULL;
	char job[32];
	uint32_t i;
	int found = 0;

	snprintf(job, sizeof(job), "%" PRIu32, gs__st.job);
	if (gs_client_status(c, &st, err) < 0)
		return -1;
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		if (strcmp(a->labels.job, job) == 0 &&
		    strcmp(a->labels.node, gs__st.node) == 0 &&
		    a->state != GS_ASTATE_CLOSED) {
			*info = *a;
			found = 1;
			break;
		}
	}
	gs_status_free(st);
	return found;
}

/*
 * ALLOC_CREATE, retried while the agent has no room, until the plugstack
 * timeout: Slurm may start a job on a node whose previous job's epilog
 * is still closing that job's allocation.
 */
static int create_alloc(struct gs_client *c, const struct gs_alloc_req *req,
			struct gs_alloc_info *info, struct gs_error *err)
{
	uint64_t deadline = mono_ms() + (uint64_t)gs__timeout_ms();

	for (;;) {
		if (gs_client_alloc_create(c, req, info, err) == 0)
			return 0;
		if (err->code != GS_EBUSY)
			return -1;
		if (mono_ms() >= deadline)
			return -1;
		usleep(50000);
	}
}

int gs__remote_begin(spank_t sp)
{
	struct gs_alloc_req req;
	struct gs_alloc_info info;
	struct gs_client *c = NULL;
	struct gs_error err;
	uint32_t nodeid = 0;
	uid_t uid;
	uint64_t count = 0, jcount = 0;
	char *tres = NULL, *jtres = NULL;
	char step[32], dir[GS_SPANK_PATH_MAX + 96];
	int found, rc, gpu = -1, lock = -1, rv = -1;

	if (get_u32(sp, S_JOB_ID, &gs__st.job) < 0 ||
	    get_u32(sp, S_JOB_STEPID, &gs__st.step) < 0 ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		slurm_error("gshare: cannot read the step's job id, step id "
			    "and uid");
		return -1;
	}
	get_u32(sp, S_JOB_NODEID, &nodeid);
	gs_spank_step_name(gs__st.step, step, sizeof(step));
	if (gs__st.step == GS_SLURM_STEP_EXTERN)
		return 0;	/* the extern step runs no job code */
	if (gs__st.bad_opt[0] != '\0') {
		/* refused like srun refuses it on the command line */
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s",
			 gs__st.job, step, gs__st.bad_opt);
		clear_env(sp);
		return 0;
	}

	/* does this step use the job's shares at all (--gres=none not) */
	if (gs__slurm_step_tres(gs__st.job, gs__st.step, &tres, &err) < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s",
			 gs__st.job, step, err.msg);
		clear_env(sp);
		return 0;
	}
	found = gs_gres_count(tres, gs__st.conf.gres, &count, &err);
	if (found < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: gres "
			 "'%s': %s",
			 gs__st.job, step, tres, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	if (found == 1 && count == 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s:0 "
			 "asks for no share of a GPU; ask for 1 to %u shares, "
			 "or leave the %s gres out",
			 gs__st.job, step, gs__st.conf.gres, GS_SHARES_PER_GPU,
			 gs__st.conf.gres);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	if (found == 0) {
		slurm_debug("gshare: step %" PRIu32 ".%s has no %s (tres '%s')",
			    gs__st.job, step, gs__st.conf.gres, tres);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	node_name(sp, nodeid, gs__st.node, sizeof(gs__st.node));

	/* the job's count on this node is the budget of all its steps, on
	 * the GPU Slurm bound it to (gres.conf with File=, e.g. shard) */
	if (gs__slurm_job_gres(gs__st.job, gs__st.node, gs__st.conf.gres,
			       &jtres, &gpu, &err) < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s",
			 gs__st.job, step, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	if (gs_gres_count(jtres, gs__st.conf.gres, &jcount, &err) == 1 &&
	    jcount > 0)
		count = jcount;
	if (count > GS_SHARES_PER_GPU) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s:%"
			 PRIu64 " on one node, but one allocation holds at "
			 "most %u shares (one GPU)",
			 gs__st.job, step, gs__st.conf.gres, count,
			 GS_SHARES_PER_GPU);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	if (gs_spank_weight_allowed(&gs__st.opts, (uint32_t)count,
				    gs__st.conf.max_user_weight, &err) < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s",
			 gs__st.job, step, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}
	if (gs_spank_expand_path(gs__st.conf.agent, gs__st.node, gs__st.agent,
				 sizeof(gs__st.agent), &err) < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: agent "
			 "path: %s",
			 gs__st.job, step, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}

	/* before the allocation exists: should this process die right
	 * after creating it, the epilog still looks for leftovers */
	if (job_dir(dir, sizeof(dir), &err) < 0 ||
	    (lock = lock_job(dir, mono_ms() + (uint64_t)gs__timeout_ms(),
			     &err)) < 0) {
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: %s",
			 gs__st.job, step, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_free_tres;
	}

	save_array(sp, dir);
	memset(&req, 0, sizeof(req));
	req.gpu = gpu;
	req.shares = (uint32_t)count;
	req.weight = gs__st.opts.weight;
	req.priority = gs__st.opts.priority;
	req.mode = gs__st.opts.mode;
	req.mem_limit = gs__st.opts.mem;
	req.uid = (uint32_t)uid;
	fill_labels(sp, uid, &req.labels);

	if (gs_client_connect(gs__st.agent, gs__timeout_ms(), &c, &err) <
	    0) {
		rv = agent_down(sp, step, &err);
		goto out_unlock;
	}
	/* one allocation per job and node, shared by all its steps */
	rc = find_job_alloc(c, &info, &err);
	if (rc == 0)
		rc = create_alloc(c, &req, &info, &err);
	if (rc < 0) {
		if (is_unreachable(&err)) {
			rv = agent_down(sp, step, &err);
			goto out_close;
		}
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: the "
			 "agent refused %s:%" PRIu64 ": %s",
			 gs__st.job, step, gs__st.conf.gres, count, err.msg);
		clear_env(sp);
		rv = 0;
		goto out_close;
	}
	if (set_env(sp, &info) < 0) {
		/* the job's allocation stays for its other steps; the job
		 * epilog closes it */
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: "
			 "cannot set the job environment",
			 gs__st.job, step);
		rv = 0;
		goto out_close;
	}
	gs__st.alloc_id = info.id;
	gs__st.shares = info.shares;
	if (req.mem_limit != 0 && info.mem_limit != req.mem_limit)
		/* an agent older than protocol 1.4 ignores the field */
		user_msg(0, "gshare: warning: step %" PRIu32 ".%s: --gshare-mem "
			 "ignored: the node's gshared has no memory limits",
			 gs__st.job, step);
	slurm_verbose("gshare: step %" PRIu32 ".%s on %s: allocation %" PRIu64
		      " (%u shares, gpu %d)",
		      gs__st.job, step, gs__st.node, info.id, info.shares,
		      (int)info.gpu);
	rv = 0;
out_close:
	gs_client_free(c);
out_unlock:
	close(lock);
out_free_tres:
	free(jtres);
	free(tres);
	return rv;
}

/* In each task, as the user, just before exec: hand the user the line
 * init_post_opt kept, and fail the task when the step must not run. */
int gs__remote_task(spank_t sp)
{
	int taskid = 0;
	size_t n;

	if (gs__st.user_msg[0] == '\0')
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &taskid) != ESPANK_SUCCESS)
		taskid = 0;
	if (gs__st.fail || taskid == 0) {
		n = strlen(gs__st.user_msg);
		gs__st.user_msg[n] = '\n';
		/* best effort: the task's stderr may be closed */
		if (write(STDERR_FILENO, gs__st.user_msg, n + 1) < 0)
			gs__st.user_msg[n] = '\0';
		gs__st.user_msg[n] = '\0';
	}
	return gs__st.fail ? -1 : 0;
}

/* The job's allocation outlives its steps: the job epilog closes it
 * (spank_slurmd.c), when no step of the job can use it any more. */
int gs__remote_end(spank_t sp)
{
	(void)sp;
	gs__st.alloc_id = 0;
	return 0;
}
