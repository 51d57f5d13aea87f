/*
 * spank_slurmd.c — job epilog (job_script context, as root on each node
 * of the job, after every step of the job has ended there).
 *
 * Jobs that had an allocation on this node have work here (the step
 * that created one also created the job's state directory); any job's
 * epilog does step 4.
 * 1. Close what the job still holds in the agent on this node: a step
 *    whose slurmstepd died (or whose exit hook could not reach the agent)
 *    leaves its allocation open; the agent's status lists it with the
 *    job's labels.
 * 2. Sum the job's usage on this node: the records the steps' exit hooks
 *    left in state_dir plus what step 1 closed.
 * 3. Write the totals into the job's AdminComment, where `sacct -o
 *    AdminComment` shows them.  slurmctld refuses updates of a finished
 *    job ("Job has already finished"), and the epilog runs after the job
 *    finished, so the comment goes to the accounting database with
 *    `sacctmgr modify job`.  Each node owns one segment
 *    (gs_spank_comment_merge); nodes of one job write concurrently, so a
 *    node of a multi-node job reads the comment back and merges again
 *    until its segment is there (bounded attempts).
 * 4. Late epilogs: a job that ended (late_epilog ago at least) and whose
 *    own epilog left it open on this node (its directory is still here:
 *    the epilog ran without the plugin, or could not reach the agent and
 *    left its records for this) gets steps 1-3 now, under its job lock,
 *    in the epilog of any later job on the node, gshare or not.
 * Every external step is bounded: agent calls by `timeout`, each sacct or
 * sacctmgr run by a deadline after which it is killed.  Failures are
 * logged to slurmd's log and never fail the epilog (that would drain the
 * node for an accounting problem).
 */
#include <slurm/spank.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_config.h"
#include "gs_spank.h"

#define CMD_TIMEOUT_MS 10000
#define COMMENT_ATTEMPTS 6

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reap pid, waiting at most until deadline (ms); kill it past that. */
static int reap(pid_t pid, int64_t deadline, int *status)
{
	pid_t r;

	for (;;) {
		r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (now_ms() >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		usleep(10000);
	}
}

/* Run argv (absolute path), stdout into out, stderr dropped, killed after
 * timeout_ms.  Returns the exit status or -1 (err filled). */
static int run_cmd(char *const argv[], int timeout_ms, char *out, size_t len,
		   struct gs_error *err)
{
	int pfd[2] = { -1, -1 }, devnull = -1, status = 0, rv = -1;
	int64_t deadline = now_ms() + timeout_ms;
	size_t used = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return gs_error_errno(err, GS_EIO, "pipe");
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		gs_error_errno(err, GS_EIO, "open /dev/null");
		goto out_close;
	}
	pid = fork();
	if (pid < 0) {
		gs_error_errno(err, GS_EIO, "fork");
		goto out_close;
	}
	if (pid == 0) {
		if (dup2(devnull, 0) < 0 || dup2(pfd[1], 1) < 0 ||
		    dup2(devnull, 2) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	pfd[1] = -1;
	for (;;) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		char sink[256];
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (used + 1 < len)
			n = read(pfd[0], out + used, len - 1 - used);
		else
			n = read(pfd[0], sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (used + 1 < len)
			used += (size_t)n;
	}
	if (len > 0)
		out[used] = '\0';
	if (reap(pid, deadline, &status) < 0) {
		gs_error_set(err, GS_ETIMEDOUT, "%s: no answer within %d ms",
			     argv[0], timeout_ms);
		goto out_close;
	}
	if (!WIFEXITED(status)) {
		gs_error_set(err, GS_EIO, "%s: killed by signal %d", argv[0],
			     WTERMSIG(status));
		goto out_close;
	}
	rv = WEXITSTATUS(status);
out_close:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (devnull >= 0)
		close(devnull);
	return rv;
}

/* Close the job's allocations still open on this node, adding their usage
 * to t.  Returns the number closed, -1 when the agent is unreachable. */
static int sweep_agent(const char *job, const char *node, uint32_t end_state,
		       struct gs_spank_totals *t, struct gs_error *err)
{
	struct gs_client *c = NULL;
	struct gs_status *st = NULL;
	struct gs_alloc_info fin;
	struct gs_spank_record r;
	struct gs_error cerr;
	uint32_t i;
	int closed = 0;

	if (gs_client_connect(gs__st.agent, gs__timeout_ms(), &c, err) <
	    0)
		return -1;
	if (gs_client_status(c, &st, err) < 0) {
		gs_client_free(c);
		return -1;
	}
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		if (strcmp(a->labels.job, job) != 0 ||
		    strcmp(a->labels.node, node) != 0 ||
		    a->state == GS_ASTATE_CLOSED)
			continue;
		if (gs_client_alloc_close_as(c, a->id, end_state, &fin,
					     &cerr) < 0) {
			slurm_error("gshare: job %s: closing leftover "
				    "allocation %" PRIu64 ": %s",
				    job, a->id, cerr.msg);
			continue;
		}
		slurm_info("gshare: job %s: closed allocation %" PRIu64,
			   job, a->id);
		r.id = fin.id;
		r.shares = fin.shares;
		r.gpu_ns = fin.gpu_ns;
		r.held_ns = fin.held_ns;
		r.mem_max = fin.mem_peak;
		gs_spank_totals_add(t, &r);
		closed++;
	}
	gs_status_free(st);
	gs_client_free(c);
	return closed;
}

/* Add and remove the records the job's steps left on this node. */
static void collect_records(const char *dir, struct gs_spank_totals *t)
{
	struct gs_spank_record r;
	struct gs_error err;
	struct dirent *de;
	char path[512], line[256];
	DIR *d;

	d = opendir(dir);
	if (d == NULL) {
		if (errno != ENOENT)
			slurm_error("gshare: opendir %s: %m", dir);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			slurm_error("gshare: open %s: %m", path);
			continue;
		}
		n = read(fd, line, sizeof(line) - 1);
		close(fd);
		line[n > 0 ? n : 0] = '\0';
		if (gs_spank_record_parse(line, &r, &err) < 0)
			slurm_error("gshare: %s: %s", path, err.msg);
		else
			gs_spank_totals_add(t, &r);
		unlink(path);
	}
	closedir(d);
	snprintf(path, sizeof(path), "%s/.lock", dir);
	if (unlink(path) < 0 && errno != ENOENT)
		slurm_error("gshare: unlink %s: %m", path);
	snprintf(path, sizeof(path), "%s/.array", dir);
	if (unlink(path) < 0 && errno != ENOENT)
		slurm_error("gshare: unlink %s: %m", path);
	if (rmdir(dir) < 0)
		slurm_error("gshare: rmdir %s: %m", dir);
}

/* The job's AdminComment in the accounting database ("" when none). */
static int read_comment(const char *job, char *buf, size_t len,
			struct gs_error *err)
{
	char jarg[64];
	char *argv[] = { gs__st.conf.sacct, "-n", "-X", "-P",
			 "-o", "AdminComment", "-j", jarg, NULL };
	size_t n;
	int rc;

	snprintf(jarg, sizeof(jarg), "%s", job);
	rc = run_cmd(argv, CMD_TIMEOUT_MS, buf, len, err);
	if (rc < 0)
		return -1;
	if (rc != 0)
		return gs_error_set(err, GS_EIO, "%s exited with %d",
				    gs__st.conf.sacct, rc);
	n = strcspn(buf, "\n");
	buf[n] = '\0';
	return 0;
}

static int write_comment(const char *job, const char *text,
			 struct gs_error *err)
{
	char jarg[80], *carg = NULL;
	char out[512];
	int rc;

	snprintf(jarg, sizeof(jarg), "jobid=%s", job);
	if (asprintf(&carg, "AdminComment=%s", text) < 0)
		return gs_error_set(err, GS_ENOMEM, "out of memory");
	{
		char *argv[] = { gs__st.conf.sacctmgr, "-i", "modify", "job",
				 "where", jarg, "set", carg, NULL };

		rc = run_cmd(argv, CMD_TIMEOUT_MS, out, sizeof(out), err);
	}
	free(carg);
	if (rc < 0)
		return -1;
	if (rc != 0)
		return gs_error_set(err, GS_EIO, "%s exited with %d",
				    gs__st.conf.sacctmgr, rc);
	return 0;
}

/* Merge this node's segment into the AdminComment; with other nodes
 * writing too, until it sticks.  A one-node job has no concurrent writer
 * and skips the read-back.  sacctmgr stores the comment lower-cased, so
 * the read-back looks for the segment without case.  Runs in the spool
 * writer (spank_spool.c), off the job's epilog. */
int gs__update_comment(const char *job, const char *node, int one_node,
		       const char *seg, struct gs_error *err)
{
	char cur[4096];
	char *merged = NULL;
	int i;

	if (one_node) {
		if (read_comment(job, cur, sizeof(cur), err) < 0 ||
		    gs_spank_comment_merge(cur, node, seg, &merged, err) < 0)
			return -1;
		i = write_comment(job, merged, err);
		free(merged);
		return i;
	}
	for (i = 0; i < COMMENT_ATTEMPTS; i++) {
		if (i > 0)	/* let a concurrent writer finish */
			usleep((useconds_t)(100000 * i + (getpid() % 7) *
							     30000));
		if (read_comment(job, cur, sizeof(cur), err) < 0)
			return -1;
		if (i > 0 && strcasestr(cur, seg) != NULL)
			return 0;
		if (gs_spank_comment_merge(cur, node, seg, &merged, err) < 0)
			return -1;
		if (write_comment(job, merged, err) < 0) {
			free(merged);
			return -1;
		}
		free(merged);
		merged = NULL;
	}
	if (read_comment(job, cur, sizeof(cur), err) < 0)
		return -1;
	if (strcasestr(cur, seg) != NULL)
		return 0;
	return gs_error_set(err, GS_EBUSY,
			    "AdminComment kept changing under us");
}

/*
 * The job's own record for sacct and sacctmgr: "<ArrayJobId>_<TaskId>"
 * for a task of a job array, the job id otherwise.  A bare id that is an
 * array's ArrayJobId matches every task of the array in sacct (`-j 32`
 * lists 32_0 ... 32_6) and in `sacctmgr modify job where jobid=32`, so
 * one task's totals would overwrite all the others'.  The epilog's
 * environment has no SLURM_ARRAY_*: the step that created the job's
 * allocation left "<job dir>/.array" (spank_remote.c).
 */
static void job_spec(const char *dir, uint32_t jobid, char *buf, size_t len)
{
	char path[GS_SPANK_PATH_MAX + 128], line[32];
	ssize_t n = -1;
	int fd;

	snprintf(buf, len, "%" PRIu32, jobid);
	snprintf(path, sizeof(path), "%s/.array", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	line[n > 0 ? n : 0] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (gs_spank_array_spec_ok(line))
		snprintf(buf, len, "%s", line);
	else
		slurm_error("gshare: %s: not an array task '%s'", path, line);
}

/* What an epilog does for a job on this node: close what it still holds
 * in the agent, add up the records its steps left in dir (and remove
 * them), spool the totals for its AdminComment. */
static void finish_job(uint32_t jobid, const char *node, const char *dir,
		       uint32_t end_state, int one_node, int spool)
{
	struct gs_spank_totals t;
	struct gs_error err;
	struct gs_spank_spool sp_rec;
	char job[32], spec[32];
	int closed;

	snprintf(job, sizeof(job), "%" PRIu32, jobid);
	memset(&t, 0, sizeof(t));
	if (gs_spank_expand_path(gs__st.conf.agent, node, gs__st.agent,
				 sizeof(gs__st.agent), &err) < 0)
		closed = -1;
	else
		closed = sweep_agent(job, node, end_state, &t, &err);
	if (closed < 0 && gs__st.conf.late_epilog_ns != 0 &&
	    access(dir, F_OK) == 0) {
		/* what the agent still holds is part of the totals: the
		 * records wait for a later epilog (late_epilogs) that
		 * reaches the agent and writes them together */
		slurm_error("gshare: epilog of job %s: agent: %s; its records "
			    "wait in %s for a later job's epilog", job,
			    err.msg, dir);
		return;
	}
	if (closed < 0)
		slurm_error("gshare: epilog of job %s: agent: %s", job,
			    err.msg);
	job_spec(dir, jobid, spec, sizeof(spec));
	collect_records(dir, &t);
	if (t.allocs == 0 || !gs__st.conf.admin_comment)
		return;
	if (!spool) {
		/* the job's own epilog wrote this node's segment already:
		 * a new one would replace it */
		slurm_info("gshare: job %s on %s: %u allocation(s) closed "
			   "late, %" PRIu64 " GPU ns, in gsacct only",
			   job, node, t.allocs, t.gpu_ns);
		return;
	}
	/* the totals go to a durable spool; a detached writer pushes them
	 * to slurmdbd (spank_spool.c): the job's epilog does not wait on
	 * slurmdbd, and an outage delays the totals without losing them */
	memset(&sp_rec, 0, sizeof(sp_rec));
	snprintf(sp_rec.job, sizeof(sp_rec.job), "%s", spec);
	snprintf(sp_rec.node, sizeof(sp_rec.node), "%s", node);
	sp_rec.nodes = one_node ? 1 : 2;
	if (gs_spank_comment_segment(node, &t, sp_rec.seg, sizeof(sp_rec.seg),
				     &err) < 0 ||
	    gs__spool_put(&sp_rec, &err) < 0) {
		slurm_error("gshare: epilog of job %s (%s): totals not "
			    "spooled: %s; writing them now",
			    job, spec, err.msg);
		if (gs__update_comment(spec, node, sp_rec.nodes == 1,
				       sp_rec.seg, &err) < 0)
			slurm_error("gshare: epilog of job %s (%s): "
				    "AdminComment not written: %s",
				    job, spec, err.msg);
		return;
	}
	slurm_verbose("gshare: job %s on %s: %u allocation(s), %" PRIu64
		      " GPU ns, spooled for slurmdbd",
		      job, node, t.allocs, t.gpu_ns);
	gs__spool_kick();
}

/* s[0..n) as a job id: the decimal "%u" that names its directory (no
 * leading zero), 1..UINT32_MAX. */
static int job_id_of(const char *s, size_t n, uint32_t *out)
{
	char b[12];
	uint64_t v;

	if (n == 0 || n >= sizeof(b) || s[0] == '0')
		return -1;
	memcpy(b, s, n);
	b[n] = '\0';
	if (gs_cfg_parse_uint(b, &v) < 0 || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

#define LATE_MAX 16

static void late_add(uint32_t *v, unsigned *n, uint32_t id)
{
	unsigned i;

	for (i = 0; i < *n; i++)
		if (v[i] == id)
			return;
	if (*n < LATE_MAX)
		v[(*n)++] = id;
}

/*
 * Jobs whose own epilog left them open on this node: their job directory
 * is still in state_dir (the epilog ran without the plugin: slurmd not
 * restarted after plugstack.conf changed, or a half-written one), or the
 * agent still lists their allocation (it was down when their epilog ran).
 * Each one slurmctld says is over, for late_epilog at least (so its own
 * epilog is done), gets that epilog now, under its job lock: closed, its
 * records added up and its totals spooled.  An epilog that could not
 * reach the agent leaves the directory for this; without one, the job's
 * own epilog wrote this node's AdminComment segment, which a new one
 * would replace, so the late close is in gsacct only.  At most LATE_MAX
 * a run.  The epilog of a job that had no share here (own_share 0) asks
 * the agent only when a directory is left: such jobs' epilogs must not
 * wait on an agent that hangs.
 */
static void late_epilogs(uint32_t own, const char *node, int own_share)
{
	uint32_t cand[LATE_MAX], es;
	unsigned n = 0, i;
	time_t old;
	struct gs_client *c = NULL;
	struct gs_status *st = NULL;
	struct gs_error err;
	struct dirent *de;
	DIR *d;

	if (gs__st.conf.late_epilog_ns == 0)
		return;
	/* a job younger than late_epilog cannot have ended that long ago:
	 * only older directories and allocations ask slurmctld */
	old = time(NULL) - (time_t)(gs__st.conf.late_epilog_ns /
				    1000000000ull);
	d = opendir(gs__st.conf.state_dir);
	while (d != NULL && (de = readdir(d)) != NULL) {
		const char *dot = strchr(de->d_name, '.');
		struct stat sb;
		uint32_t id;

		if (dot == NULL || strcmp(dot + 1, node) != 0 ||
		    job_id_of(de->d_name, (size_t)(dot - de->d_name),
			      &id) < 0 || id == own ||
		    fstatat(dirfd(d), de->d_name, &sb,
			    AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(sb.st_mode) || sb.st_mtime > old)
			continue;
		late_add(cand, &n, id);
	}
	if (d != NULL)
		closedir(d);
	if (!own_share && n == 0)
		return;
	if (gs_spank_expand_path(gs__st.conf.agent, node, gs__st.agent,
				 sizeof(gs__st.agent), &err) == 0 &&
	    gs_client_connect(gs__st.agent, gs__timeout_ms(), &c, &err) == 0 &&
	    gs_client_status(c, &st, &err) == 0) {
		for (i = 0; i < st->nallocs; i++) {
			const struct gs_alloc_info *a = &st->allocs[i];
			uint32_t id;

			if (a->state == GS_ASTATE_CLOSED ||
			    a->created_unix_ns / 1000000000ull >
			    (uint64_t)old ||
			    strcmp(a->labels.node, node) != 0 ||
			    job_id_of(a->labels.job, strlen(a->labels.job),
				      &id) < 0 || id == own)
				continue;
			late_add(cand, &n, id);
		}
	}
	gs_status_free(st);
	gs_client_free(c);
	for (i = 0; i < n; i++) {
		char dir[GS_SPANK_PATH_MAX + 96], lock[GS_SPANK_PATH_MAX + 128];
		int one, r, fd = -1;

		r = gs__slurm_job_over(cand[i], gs__st.conf.late_epilog_ns /
				       1000000000ull, &es, &one, &err);
		if (r < 0)
			slurm_error("gshare: late epilog of job %" PRIu32
				    ": %s", cand[i], err.msg);
		if (r != 1 || gs_spank_job_dir(gs__st.conf.state_dir,
					       cand[i], node, dir,
					       sizeof(dir), &err) < 0)
			continue;
		/* another epilog of this node may be at it: one at a time */
		snprintf(lock, sizeof(lock), "%s/.lock", dir);
		if (access(dir, F_OK) == 0) {
			fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC |
				  O_NOFOLLOW, 0600);
			if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
				if (fd >= 0)
					close(fd);
				continue;
			}
		}
		slurm_info("gshare: job %" PRIu32 " on %s ended and its epilog "
			   "left it open: closing it in job %" PRIu32 "'s",
			   cand[i], node, own);
		/* with its directory gone its own epilog ran (the agent was
		 * down then) and wrote its totals */
		finish_job(cand[i], node, dir, es, one, fd >= 0);
		if (fd >= 0)
			close(fd);
	}
}

int gs__slurmd_epilog(spank_t sp)
{
	struct gs_error err;
	uint32_t jobid;
	char job[32], node[GS_LABEL_MAX];
	char dir[GS_SPANK_PATH_MAX + 96];
	const char *e;

	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS) {
		slurm_error("gshare: epilog: no job id");
		return 0;
	}
	snprintf(job, sizeof(job), "%" PRIu32, jobid);
	e = getenv("SLURMD_NODENAME");
	if (e == NULL || *e == '\0' || strlen(e) >= sizeof(node)) {
		slurm_error("gshare: epilog of job %s: SLURMD_NODENAME not set",
			    job);
		return 0;
	}
	snprintf(node, sizeof(node), "%s", e);
	if (gs_spank_job_dir(gs__st.conf.state_dir, jobid, node, dir,
			     sizeof(dir), &err) < 0) {
		slurm_error("gshare: epilog of job %s: %s", job, err.msg);
		return 0;
	}
	if (access(dir, F_OK) < 0) {
		/* no step of this job had a share here; any job's end is a
		 * turn to close the ones whose epilog left them open */
		late_epilogs(jobid, node, 0);
		return 0;
	}
	e = getenv("SLURM_JOB_NUM_NODES");
	finish_job(jobid, node, dir, gs__slurm_job_end_state(jobid),
		   e != NULL && strcmp(e, "1") == 0, 1);
	late_epilogs(jobid, node, 1);
	return 0;
}
