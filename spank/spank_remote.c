/*
 * spank_remote.c — slurmstepd side: one agent allocation per step per
 * node.
 *
 * slurm_spank_init_post_opt (as root, before the tasks exist) learns the
 * step's gshare count from slurmctld, creates the allocation (uid, job,
 * step, node, shares, weight, priority, mode) and exports GSHARE_SOCKET,
 * GSHARE_ALLOC and CUDA_VISIBLE_DEVICES to the tasks, overwriting what
 * the job inherited.  A step without gshare gets GSHARE_* removed, so a
 * `srun --gres=none` inside a gshare batch job cannot reach the batch
 * step's allocation.  slurm_spank_exit closes the allocation and leaves
 * its final usage in state_dir for the job epilog (spank_slurmd.c).
 *
 * When the agent has no room, a step first closes its job's idle batch
 * step allocation (release_idle_batch) and then retries until `timeout`
 * (create_alloc): the agent would otherwise count a batch job's shares
 * twice.
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
	gs_spank_step_name(gs__st.step, l->step, sizeof(l->step));
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
	return 0;
}

/* Create "<state_dir>/<job>.<node>" (the epilog's sign that this job
 * had allocations here) and put its path in dir. */
static int job_dir(char *dir, size_t len, struct gs_error *err)
{
	if (gs_spank_job_dir(gs__st.conf.state_dir, gs__st.job, gs__st.node,
			     dir, len, err) < 0)
		return -1;
	if (mkdir(gs__st.conf.state_dir, 0700) < 0 && errno != EEXIST)
		return gs_error_errno(err, GS_EIO, "mkdir %s",
				      gs__st.conf.state_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return gs_error_errno(err, GS_EIO, "mkdir %s", dir);
	return 0;
}

/* Leave the allocation's final usage for the epilog:
 * <job dir>/<step>.<alloc id>, written atomically. */
static int save_record(const struct gs_alloc_info *fin, const char *step,
		       struct gs_error *err)
{
	struct gs_spank_record r;
	char dir[GS_SPANK_PATH_MAX + 96], path[sizeof(dir) + 64],
		tmp[sizeof(path) + 8], line[256];
	int fd = -1, n;

	r.id = fin->id;
	r.shares = fin->shares;
	r.gpu_ns = fin->gpu_ns;
	r.held_ns = fin->held_ns;
	r.mem_max = fin->mem_peak;
	n = gs_spank_record_format(&r, line, sizeof(line), err);
	if (n < 0)
		return -1;
	if (job_dir(dir, sizeof(dir), err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s.%" PRIu64, dir, step, fin->id);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "open %s", tmp);
	if (write(fd, line, (size_t)n) != n) {
		gs_error_errno(err, GS_EIO, "write %s", tmp);
		goto out_unlink;
	}
	if (close(fd) < 0) {
		fd = -1;
		gs_error_errno(err, GS_EIO, "close %s", tmp);
		goto out_unlink;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		gs_error_errno(err, GS_EIO, "rename %s", tmp);
		goto out_unlink;
	}
	return 0;
out_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/*
 * The agent refused a step for lack of room.  In a batch job the batch
 * step holds the job's whole count on its node while its steps ask for
 * theirs again, which Slurm allows (steps overlap the batch step) but the
 * agent's admission counts twice.  When no process is attached to the
 * batch step's allocation — the script only launches steps — close it,
 * keep its usage for the epilog, and let the caller retry: the job's
 * steps then use the job's shares.  A batch script that uses the GPU
 * itself keeps its allocation.  Returns 1 when it closed one, 0 when
 * there was none to close, -1 on error.
 */
static int release_idle_batch(struct gs_client *c, struct gs_error *err)
{
	struct gs_status *st = NULL;
	struct gs_alloc_info fin;
	struct gs_error serr;
	char job[32];
	uint64_t id = 0;
	uint32_t i;

	if (gs__st.step == GS_SLURM_STEP_BATCH)
		return 0;
	snprintf(job, sizeof(job), "%" PRIu32, gs__st.job);
	if (gs_client_status(c, &st, err) < 0)
		return -1;
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		if (strcmp(a->labels.job, job) == 0 &&
		    strcmp(a->labels.node, gs__st.node) == 0 &&
		    strcmp(a->labels.step, "batch") == 0 && a->pid == 0 &&
		    a->state != GS_ASTATE_CLOSED) {
			id = a->id;
			break;
		}
	}
	gs_status_free(st);
	if (id == 0)
		return 0;
	if (gs_client_alloc_close(c, id, &fin, err) < 0)
		return err->code == GS_ENOENT ? 1 : -1;	/* raced: gone */
	if (save_record(&fin, "batch", &serr) < 0)
		slurm_error("gshare: job %" PRIu32 ": usage of allocation "
			    "%" PRIu64 " not saved: %s",
			    gs__st.job, id, serr.msg);
	slurm_info("gshare: job %" PRIu32 ": closed the idle batch step "
		   "allocation %" PRIu64 " to make room for step %" PRIu32,
		   gs__st.job, id, gs__st.step);
	return 1;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * ALLOC_CREATE, retried while the agent has no room, until the plugstack
 * timeout.  Slurm counts the job's shares once, but the agent can briefly
 * hold more: srun returns to a batch script before the finished step's
 * slurmstepd has closed its allocation, so the script's next step may
 * find the previous one still open (and the batch step's own allocation,
 * see release_idle_batch).  Those go away within milliseconds.
 */
static int create_alloc(struct gs_client *c, const struct gs_alloc_req *req,
			struct gs_alloc_info *info, struct gs_error *err)
{
	uint64_t deadline = mono_ms() + (uint64_t)gs__timeout_ms();
	struct gs_error rerr;
	int released = 0;

	for (;;) {
		if (gs_client_alloc_create(c, req, info, err) == 0)
			return 0;
		if (err->code != GS_EBUSY)
			return -1;
		if (!released) {
			released = 1;
			if (release_idle_batch(c, &rerr) == 1)
				continue;
		}
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
	struct gs_error err, cerr;
	uint32_t nodeid = 0;
	uid_t uid;
	uint64_t count = 0;
	char *tres = NULL;
	char step[32], dir[GS_SPANK_PATH_MAX + 96];
	int found, rc, rv = -1;

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
	node_name(sp, nodeid, gs__st.node, sizeof(gs__st.node));
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
	if (job_dir(dir, sizeof(dir), &err) < 0)
		slurm_error("gshare: job %" PRIu32 ": %s", gs__st.job,
			    err.msg);

	memset(&req, 0, sizeof(req));
	req.gpu = -1;
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
		goto out_free_tres;
	}
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
		user_msg(1, "gshare: step %" PRIu32 ".%s not started: "
			 "cannot set the job environment",
			 gs__st.job, step);
		rv = 0;
		if (gs_client_alloc_close(c, info.id, NULL, &cerr) < 0)
			slurm_error("gshare: closing allocation %" PRIu64
				    ": %s",
				    info.id, cerr.msg);
		goto out_close;
	}
	gs__st.alloc_id = info.id;
	gs__st.shares = info.shares;
	if (req.mem_limit != 0 && info.mem_limit != req.mem_limit)
		/* an agent older than protocol 1.3 ignores the field */
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
out_free_tres:
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

int gs__remote_end(spank_t sp)
{
	struct gs_alloc_info fin;
	struct gs_client *c = NULL;
	struct gs_error err;
	uint64_t id = gs__st.alloc_id;
	char step[32];

	(void)sp;
	if (id == 0)
		return 0;
	gs__st.alloc_id = 0;
	if (gs_client_connect(gs__st.agent, gs__timeout_ms(), &c, &err) <
		    0 ||
	    gs_client_alloc_close(c, id, &fin, &err) < 0) {
		gs_client_free(c);
		/* an idle batch allocation a step closed: its usage is saved */
		if (err.code == GS_ENOENT &&
		    gs__st.step == GS_SLURM_STEP_BATCH)
			return 0;
		/* the job epilog closes it if the agent comes back */
		slurm_error("gshare: job %" PRIu32 ": closing allocation "
			    "%" PRIu64 ": %s",
			    gs__st.job, id, err.msg);
		return 0;
	}
	gs_client_free(c);
	gs_spank_step_name(gs__st.step, step, sizeof(step));
	if (save_record(&fin, step, &err) < 0)
		slurm_error("gshare: job %" PRIu32 ": usage of allocation "
			    "%" PRIu64 " not saved: %s",
			    gs__st.job, id, err.msg);
	return 0;
}
