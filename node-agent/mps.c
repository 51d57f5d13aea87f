/*
 * mps.c — MPS control daemon supervision (contract in mps.h).
 *
 * Per GPU slot one struct dmn: a reference count of the space
 * allocations its daemon serves, the uid it serves, the daemon's pid and
 * pidfd, and at most one `quit` client in flight (its own pidfd, reaped
 * like the daemon).  One timerfd serves every deadline (restart delays,
 * quit timeouts); it is re-armed to the earliest after each event.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "gs_log.h"
#include "mps.h"

extern char **environ;

#define QUIT_WAIT_NS	(5ull * 1000000000ull)
#define QUICK_NS	(1ull * 1000000000ull)	/* died sooner: quick */
#define BACKOFF_MIN_NS	(100ull * 1000000ull)
#define BACKOFF_MAX_NS	(5ull * 1000000000ull)
#define QUICK_DEATHS	5u

struct dmn {
	uint32_t refs;		/* space allocations of `uid` here */
	uint32_t uid;
	pid_t pid;		/* daemon, 0: none */
	int pidfd;
	uint64_t started_ns;
	uint32_t quick;		/* quick deaths in a row */
	uint64_t restart_at;	/* 0: no restart pending */
	uint64_t backoff_ns;
	int sick;		/* we marked the GPU unhealthy */
	pid_t qpid;		/* quit client, 0: none */
	int qpidfd;
	uint64_t quit_deadline;	/* daemon must be gone by then, 0: n/a */
	uint64_t linger_until;	/* no allocation left: quit then unless
				 * one comes (0: not lingering) */
	int adopted;		/* left running by an earlier agent: not
				 * our child (no waitpid; pidfd only) */
	char base[200];		/* <state_dir>/mps/<index> */
	char pipe[256];		/* <base>/<uid>/pipe of the uid served */
	char log[256];		/* <base>/<uid>/log */
	char idfile[256];	/* "pid uid starttime" of the daemon */
};

struct gs_mps {
	struct gs_agent *ag;
	struct gs_loop *loop;
	int tfd;
	uint32_t n;
	char site_pipe[256];	/* mps_pipe_dir: the site's own MPS */
	char control[256];
	int time;		/* time_mps: time allocations are served */
	uint64_t linger_ns;	/* mps_linger */
	struct dmn d[GS_MAX_GPUS];
};

/* Is a an allocation the GPU's MPS serves (its mode)? */
static int served_mode(const struct gs_mps *m, uint32_t mode)
{
	return mode == GS_MODE_SPACE || (m->time && mode == GS_MODE_TIME);
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void arm(struct gs_mps *m)
{
	struct itimerspec its;
	uint64_t at = UINT64_MAX;
	uint32_t i;

	for (i = 0; i < m->n; i++) {
		if (m->d[i].restart_at && m->d[i].restart_at < at)
			at = m->d[i].restart_at;
		if (m->d[i].quit_deadline && m->d[i].quit_deadline < at)
			at = m->d[i].quit_deadline;
		if (m->d[i].linger_until && m->d[i].linger_until < at)
			at = m->d[i].linger_until;
		if (m->d[i].sick && m->d[i].pid != 0 &&
		    m->d[i].started_ns + QUICK_NS < at)
			at = m->d[i].started_ns + QUICK_NS;
	}
	memset(&its, 0, sizeof(its));
	if (at != UINT64_MAX) {
		if (at == 0)
			at = 1;
		its.it_value.tv_sec = (time_t)(at / 1000000000ull);
		its.it_value.tv_nsec = (long)(at % 1000000000ull);
	}
	timerfd_settime(m->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int slot_of(const struct gs_mps *m, int32_t index)
{
	uint32_t i;

	for (i = 0; i < m->n; i++)
		if (gs_agent_gpu(m->ag, i)->d.index == index)
			return (int)i;
	return -1;
}

static int mkdir_owned(const char *path, uint32_t uid)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	/* the served user reaches the control socket; nobody else does */
	if (chown(path, (uid_t)uid, (gid_t)-1) < 0 || chmod(path, 0700) < 0)
		return -1;
	return 0;
}

/* Pipe and log directories of the uid served: every user has its own,
 * so nothing one user's daemon left is in another's way. */
static void set_paths(struct dmn *d)
{
	snprintf(d->pipe, sizeof(d->pipe), "%s/%u/pipe", d->base, d->uid);
	snprintf(d->log, sizeof(d->log), "%s/%u/log", d->base, d->uid);
}

/* mkdir <state_dir>/mps/<index>/<uid>/{pipe,log}; root owns everything
 * down to <uid>, so the user cannot swap the leaves, which the user owns
 * (mode 0700) */
static int make_dirs(struct gs_mps *m, uint32_t i)
{
	const struct gs_agent_config *cfg = gs_agent_config(m->ag);
	struct dmn *d = &m->d[i];
	char p[300];

	snprintf(p, sizeof(p), "%s/mps", cfg->state_dir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		goto fail;
	snprintf(p, sizeof(p), "%s", d->base);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		goto fail;
	snprintf(p, sizeof(p), "%s/%u", d->base, d->uid);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		goto fail;
	if (mkdir_owned(d->pipe, d->uid) < 0) {
		snprintf(p, sizeof(p), "%s", d->pipe);
		goto fail;
	}
	if (mkdir_owned(d->log, d->uid) < 0) {
		snprintf(p, sizeof(p), "%s", d->log);
		goto fail;
	}
	return 0;
fail:
	log_warn("mps: %s", p);
	return -1;
}

/* The control binary's path: as configured when it holds a '/', else
 * the first executable of that name along PATH.  0, or -1 (ENOENT). */
static int resolve(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH"), *p, *e;

	if (strchr(name, '/') != NULL) {
		snprintf(out, len, "%s", name);
		return 0;
	}
	if (path == NULL)
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
		       "/sbin:/bin";
	for (p = path; *p != '\0'; p = *e ? e + 1 : e) {
		e = strchr(p, ':');
		if (e == NULL)
			e = p + strlen(p);
		if (snprintf(out, len, "%.*s/%s", (int)(e - p), p, name) <
			(int)len &&
		    access(out, X_OK) == 0)
			return 0;
	}
	errno = ENOENT;
	return -1;
}

/*
 * Run `control [arg]` for GPU slot i with the GPU's environment, in its
 * own session, stdin from in_fd (-1: /dev/null), as the uid the daemon
 * serves (when the agent is root): the control daemon then creates
 * everything in the user's own pipe and log directories with the user's
 * rights, and the server it starts runs as that user anyway.  Returns
 * the pid, 0 on failure (logged).  Waits only until the child has
 * exec'd (a close-on-exec pipe reports a failure), like posix_spawn.
 */
static pid_t spawn(struct gs_mps *m, uint32_t i, const char *arg, int in_fd)
{
	const struct gs_gpu *g = gs_agent_gpu(m->ag, i);
	struct dmn *d = &m->d[i];
	char e_dev[GS_UUID_MAX + 32], e_pipe[300], e_log[300], bin[512];
	char *argv[3], **envp = NULL, pwbuf[1024];
	struct passwd pw, *pwp = NULL;
	size_t ne = 0, k = 0, j;
	gid_t gid = 65534;
	int rep[2] = { -1, -1 }, cerr = 0, drop = geteuid() == 0;
	pid_t pid = 0;
	ssize_t n;

	if (resolve(m->control, bin, sizeof(bin)) < 0) {
		log_warn("mps: gpu %d: cannot run %s", g->d.index, m->control);
		return 0;
	}
	if (drop && getpwuid_r((uid_t)d->uid, &pw, pwbuf, sizeof(pwbuf),
			       &pwp) == 0 && pwp != NULL)
		gid = pw.pw_gid;
	if (g->d.uuid[0] != '\0' && !g->d.simulated)
		snprintf(e_dev, sizeof(e_dev), "CUDA_VISIBLE_DEVICES=%s",
			 g->d.uuid);
	else
		snprintf(e_dev, sizeof(e_dev), "CUDA_VISIBLE_DEVICES=%d",
			 g->d.index);
	snprintf(e_pipe, sizeof(e_pipe), "CUDA_MPS_PIPE_DIRECTORY=%s",
		 d->pipe);
	snprintf(e_log, sizeof(e_log), "CUDA_MPS_LOG_DIRECTORY=%s", d->log);
	while (environ != NULL && environ[ne] != NULL)
		ne++;
	envp = calloc(ne + 4, sizeof(*envp));
	if (envp == NULL) {
		log_warnx("mps: out of memory");
		return 0;
	}
	for (j = 0; j < ne; j++)
		if (strncmp(environ[j], "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
		    strncmp(environ[j], "CUDA_MPS_", 9) != 0)
			envp[k++] = environ[j];
	envp[k++] = e_dev;
	envp[k++] = e_pipe;
	envp[k++] = e_log;
	argv[0] = bin;
	argv[1] = (char *)arg;
	argv[2] = NULL;
	if (pipe2(rep, O_CLOEXEC) < 0) {
		log_warn("mps: pipe");
		goto out_env;
	}
	pid = fork();
	if (pid < 0) {
		log_warn("mps: fork");
		pid = 0;
		goto out_pipe;
	}
	if (pid == 0) {
		/* child: async-signal-safe calls only */
		int fd = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);

		if (fd < 0 || dup2(fd, 0) < 0)
			goto child_fail;
		/* nothing of the agent's (sockets, other users' control
		 * pages) may reach the daemon, even an fd opened without
		 * O_CLOEXEC: CLOSE_RANGE_CLOEXEC (4) on all but stdio */
		syscall(SYS_close_range, 3u, ~0u, 4u);
		setsid();
		if (drop && (setgroups(0, NULL) < 0 || setgid(gid) < 0 ||
			     setuid((uid_t)d->uid) < 0))
			goto child_fail;
		execve(bin, argv, envp);
child_fail:
		cerr = errno;
		if (write(rep[1], &cerr, sizeof(cerr)) < 0)
			_exit(126);
		_exit(127);
	}
	close(rep[1]);
	rep[1] = -1;
	do
		n = read(rep[0], &cerr, sizeof(cerr));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(cerr)) {
		waitpid(pid, NULL, 0);	/* it exits at once */
		errno = cerr;
		log_warn("mps: gpu %d: cannot run %s as uid %u", g->d.index,
			 bin, d->uid);
		pid = 0;
	}
out_pipe:
	if (rep[1] >= 0)
		close(rep[1]);
	close(rep[0]);
out_env:
	free(envp);
	return pid;
}

static void on_child(struct gs_loop *l, int fd, uint32_t events, void *arg);

/* Start time of pid in clock ticks since boot (/proc/PID/stat field 22),
 * 0 when it is gone: tells a live daemon from a reused pid. */
static unsigned long long proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the name may hold spaces */
	if (p == NULL)
		return 0;
	/* after ")": field 3 (state) ... field 22 (starttime) */
	for (i = 3; i <= 22 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p != NULL)
		st = strtoull(p + 1, NULL, 10);
	return st;
}

/* Record the running daemon, so that an agent started after this one
 * was killed finds it (adopt()).  Written whole (rename). */
static void idfile_write(const struct dmn *d)
{
	char tmp[300];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", d->idfile);
	f = fopen(tmp, "we");
	if (f == NULL) {
		log_warn("mps: %s", tmp);
		return;
	}
	fprintf(f, "%d %u %llu\n", (int)d->pid, d->uid,
		proc_start(d->pid));
	if (fclose(f) != 0 || rename(tmp, d->idfile) < 0)
		log_warn("mps: %s", d->idfile);
}

static int watch(struct gs_mps *m, pid_t pid, int *pidfd)
{
	struct gs_error err;

	*pidfd = pidfd_of(pid);
	if (*pidfd < 0) {
		log_warn("mps: pidfd_open %d", (int)pid);
		return -1;
	}
	if (gs_loop_add_fd(m->loop, *pidfd, EPOLLIN, on_child, m, &err) < 0) {
		log_warnx("mps: %s", err.msg);
		close(*pidfd);
		*pidfd = -1;
		return -1;
	}
	return 0;
}

static void unwatch(struct gs_mps *m, int *pidfd)
{
	if (*pidfd < 0)
		return;
	gs_loop_del_fd(m->loop, *pidfd);
	close(*pidfd);
	*pidfd = -1;
}

static void start(struct gs_mps *m, uint32_t i)
{
	struct dmn *d = &m->d[i];
	int idx = gs_agent_gpu(m->ag, i)->d.index;

	d->restart_at = 0;
	set_paths(d);
	if (make_dirs(m, i) < 0)
		goto retry;
	d->pid = spawn(m, i, "-f", -1);
	if (d->pid == 0) {
		/* cannot run at all (missing binary): not a dying daemon,
		 * the GPU stays healthy; its jobs run outside MPS */
		d->restart_at = gs_now_ns() + BACKOFF_MAX_NS;
		return;
	}
	if (watch(m, d->pid, &d->pidfd) < 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);	/* just killed: no wait */
		d->pid = 0;
		goto retry;
	}
	d->started_ns = gs_now_ns();
	d->adopted = 0;
	idfile_write(d);
	log_info("mps: gpu %d: control daemon %d for uid %u (pipe %s)", idx,
		 (int)d->pid, d->uid, d->pipe);
	return;
retry:
	d->quick++;
	d->backoff_ns = d->backoff_ns ? d->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (d->backoff_ns > BACKOFF_MAX_NS)
		d->backoff_ns = BACKOFF_MAX_NS;
	d->restart_at = gs_now_ns() + d->backoff_ns;
}

/* Ask the daemon to quit: `echo quit | control`, deadline for SIGKILL. */
static void stop(struct gs_mps *m, uint32_t i)
{
	struct dmn *d = &m->d[i];
	int pfd[2];

	d->restart_at = 0;
	d->linger_until = 0;
	if (d->pid == 0 || d->quit_deadline)
		return;
	d->quit_deadline = gs_now_ns() + QUIT_WAIT_NS;
	if (d->qpid != 0 || pipe2(pfd, O_CLOEXEC) < 0)
		return;
	/* 5 bytes into an empty pipe: never blocks */
	if (write(pfd[1], "quit\n", 5) != 5)
		log_warn("mps: quit pipe");
	close(pfd[1]);
	d->qpid = spawn(m, i, NULL, pfd[0]);
	close(pfd[0]);
	if (d->qpid != 0 && watch(m, d->qpid, &d->qpidfd) < 0) {
		kill(d->qpid, SIGKILL);
		waitpid(d->qpid, NULL, 0);
		d->qpid = 0;
	}
}

static void set_sick(struct gs_mps *m, uint32_t i, int sick)
{
	struct dmn *d = &m->d[i];

	if (d->sick == sick)
		return;
	d->sick = sick;
	gs_agent_gpu_health(m->ag, i, GS_HEALTH_MPS, !sick,
			    "MPS control daemon keeps dying");
}

static void daemon_died(struct gs_mps *m, uint32_t i, int status)
{
	struct dmn *d = &m->d[i];
	uint64_t now = gs_now_ns();
	int idx = gs_agent_gpu(m->ag, i)->d.index;
	int quick = now - d->started_ns < QUICK_NS;
	int adopted = d->adopted;

	unwatch(m, &d->pidfd);
	d->pid = 0;
	d->adopted = 0;
	unlink(d->idfile);
	if (d->quit_deadline) {
		d->quit_deadline = 0;
		log_info("mps: gpu %d: control daemon stopped", idx);
		if (d->refs == 0)
			return;
		/* an allocation came while it was quitting (its job runs
		 * outside MPS): a new daemon for the next ones; no death */
		d->quick = 0;
		d->backoff_ns = 0;
		start(m, i);
		return;
	} else if (d->refs == 0) {
		return;
	} else {
		if (adopted)
			log_warnx("mps: gpu %d: control daemon died; "
				  "restarting", idx);
		else
			log_warnx("mps: gpu %d: control daemon died (%s %d); "
				  "restarting", idx,
				  WIFSIGNALED(status) ? "signal" : "exit",
				  WIFSIGNALED(status) ? WTERMSIG(status) :
							WEXITSTATUS(status));
	}
	if (!quick) {
		d->quick = 0;
		d->backoff_ns = 0;
		set_sick(m, i, 0);
		start(m, i);
		return;
	}
	/* only a daemon that exits by itself counts towards the GPU's
	 * health: the user it runs as may kill it (that user's jobs lose
	 * MPS for a while, nobody else's GPU turns unhealthy) */
	if (adopted || WIFSIGNALED(status)) {
		d->restart_at = now + BACKOFF_MIN_NS;
		return;
	}
	d->quick++;
	d->backoff_ns = d->backoff_ns ? d->backoff_ns * 2 : BACKOFF_MIN_NS;
	if (d->backoff_ns > BACKOFF_MAX_NS)
		d->backoff_ns = BACKOFF_MAX_NS;
	if (d->quick >= QUICK_DEATHS)
		set_sick(m, i, 1);
	d->restart_at = now + d->backoff_ns;
}

static void on_child(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_mps *m = arg;
	uint32_t i;
	int status = 0;

	(void)l;
	(void)events;
	for (i = 0; i < m->n; i++) {
		struct dmn *d = &m->d[i];

		if (fd == d->pidfd) {
			/* an adopted daemon is not our child: its pidfd is
			 * readable only once it exited (status unknown) */
			if (!d->adopted &&
			    waitpid(d->pid, &status, WNOHANG) == 0)
				return;	/* spurious */
			daemon_died(m, i, status);
			break;
		}
		if (fd == d->qpidfd) {
			waitpid(d->qpid, &status, WNOHANG);
			unwatch(m, &d->qpidfd);
			d->qpid = 0;
			break;
		}
	}
	arm(m);
}

static void on_timer(struct gs_loop *l, int fd, uint32_t events, void *arg)
{
	struct gs_mps *m = arg;
	uint64_t now = gs_now_ns(), x;
	uint32_t i;

	(void)l;
	(void)events;
	if (read(fd, &x, sizeof(x)) < 0 && errno != EAGAIN)
		log_warn("mps: timerfd");
	for (i = 0; i < m->n; i++) {
		struct dmn *d = &m->d[i];

		if (d->quit_deadline && now >= d->quit_deadline &&
		    d->pid != 0) {
			log_warnx("mps: gpu %d: control daemon %d ignored "
				  "quit; killing it",
				  gs_agent_gpu(m->ag, i)->d.index, (int)d->pid);
			kill(d->pid, SIGKILL);
			if (d->qpid != 0)
				kill(d->qpid, SIGKILL);
			d->quit_deadline = now + QUIT_WAIT_NS;
		}
		if (d->linger_until && now >= d->linger_until) {
			d->linger_until = 0;
			if (d->refs == 0)
				stop(m, i);
		}
		if (d->sick && d->pid != 0 && !d->quit_deadline &&
		    now >= d->started_ns + QUICK_NS) {
			/* up for a second: recovered */
			d->quick = 0;
			d->backoff_ns = 0;
			set_sick(m, i, 0);
		}
		if (d->restart_at && now >= d->restart_at && d->pid == 0) {
			if (d->refs > 0)
				start(m, i);
			else
				d->restart_at = 0;
		}
	}
	arm(m);
}

static void ref(struct gs_mps *m, const struct gs_alloc *a)
{
	int s = slot_of(m, a->gpu);
	struct dmn *d;

	if (s < 0 || m->site_pipe[0] != '\0')
		return;
	d = &m->d[s];
	if (d->refs > 0 && d->uid != a->uid)
		return;		/* another user: outside MPS */
	if (d->refs++ > 0)
		return;
	if (d->pid != 0 && d->uid != a->uid) {
		/* running (lingering or quitting) for another user: quit
		 * it, start again when it is gone (daemon_died sees
		 * refs > 0) */
		stop(m, (uint32_t)s);
		d->uid = a->uid;
		return;
	}
	d->uid = a->uid;
	if (d->pid != 0) {
		/* lingering for this user: it serves on; quitting (a quit
		 * cannot be taken back): the next one starts when it is
		 * gone, and gs_mps_info hands out no pipe meanwhile */
		d->linger_until = 0;
		return;
	}
	d->quick = 0;
	d->backoff_ns = 0;
	start(m, (uint32_t)s);
}

static void unref(struct gs_mps *m, const struct gs_alloc *a)
{
	int s = slot_of(m, a->gpu);
	struct dmn *d;

	if (s < 0 || m->site_pipe[0] != '\0')
		return;
	d = &m->d[s];
	if (d->refs == 0 || d->uid != a->uid)
		return;
	if (--d->refs > 0)
		return;
	set_sick(m, (uint32_t)s, 0);
	if (m->linger_ns == 0 || d->pid == 0) {
		stop(m, (uint32_t)s);
		return;
	}
	/* the next job of the node often comes at once: keep the daemon
	 * (and its server) a while */
	d->linger_until = gs_now_ns() + m->linger_ns;
}

static void observer(void *ctx, int event, const struct gs_alloc *a)
{
	struct gs_mps *m = ctx;

	if (!served_mode(m, a->mode))
		return;
	if (event == GS_AEV_CREATED)
		ref(m, a);
	else if (event == GS_AEV_CLOSED)
		unref(m, a);
	else
		return;
	arm(m);
}

/* A daemon an earlier agent started and left running (it was killed, not
 * stopped): take it over, so that the jobs using it keep running.  Only
 * a live process whose start time matches the record is taken. */
static void adopt(struct gs_mps *m, uint32_t i)
{
	struct dmn *d = &m->d[i];
	unsigned long long st = 0;
	unsigned uid = 0;
	int pid = 0, n;
	FILE *f;

	if (m->site_pipe[0] != '\0')
		return;
	f = fopen(d->idfile, "re");
	if (f == NULL)
		return;
	n = fscanf(f, "%d %u %llu", &pid, &uid, &st);
	fclose(f);
	if (n != 3 || pid <= 1 || st == 0 || proc_start(pid) != st) {
		unlink(d->idfile);
		return;
	}
	d->pid = pid;
	d->uid = uid;
	d->adopted = 1;
	set_paths(d);
	if (watch(m, d->pid, &d->pidfd) < 0) {
		d->pid = 0;
		d->adopted = 0;
		return;
	}
	d->started_ns = gs_now_ns();
	log_info("mps: gpu %d: adopted control daemon %d for uid %u (left "
		 "running by an earlier agent)",
		 gs_agent_gpu(m->ag, i)->d.index, pid, uid);
}

struct gs_mps *gs_mps_new(struct gs_agent *ag, struct gs_error *err)
{
	const struct gs_agent_config *cfg = gs_agent_config(ag);
	struct gs_alloc_table *t = gs_agent_allocs(ag);
	struct gs_mps *m;
	struct gs_alloc *a;
	uint32_t i;

	m = calloc(1, sizeof(*m));
	if (m == NULL) {
		gs_error_set(err, GS_ENOMEM, "out of memory");
		return NULL;
	}
	m->ag = ag;
	m->loop = gs_agent_loop(ag);
	m->n = gs_agent_ngpus(ag);
	snprintf(m->site_pipe, sizeof(m->site_pipe), "%s", cfg->mps_pipe_dir);
	snprintf(m->control, sizeof(m->control), "%s", cfg->mps_control);
	m->time = cfg->time_mps;
	m->linger_ns = cfg->mps_linger_ns;
	for (i = 0; i < m->n; i++) {
		int idx = gs_agent_gpu(ag, i)->d.index;

		m->d[i].pidfd = m->d[i].qpidfd = -1;
		/* the longest uid and leaf must fit the paths */
		if (snprintf(m->d[i].base, sizeof(m->d[i].base), "%s/mps/%d",
			     cfg->state_dir, idx) >=
			    (int)sizeof(m->d[i].base) - 16 ||
		    snprintf(m->d[i].idfile, sizeof(m->d[i].idfile),
			     "%s/mps/%d/daemon", cfg->state_dir, idx) >=
			    (int)sizeof(m->d[i].idfile)) {
			gs_error_set(err, GS_ECONFIG,
				     "state_dir too long for MPS: %s",
				     cfg->state_dir);
			free(m);
			return NULL;
		}
	}
	m->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (m->tfd < 0) {
		gs_error_errno(err, GS_EIO, "timerfd_create");
		free(m);
		return NULL;
	}
	if (gs_loop_add_fd(m->loop, m->tfd, EPOLLIN, on_timer, m, err) < 0)
		goto out_tfd;
	if (gs_alloc_observe(t, observer, m) < 0) {
		gs_error_set(err, GS_ENOMEM, "too many allocation observers");
		goto out_del;
	}
	for (i = 0; i < m->n; i++)
		adopt(m, i);
	for (a = gs_alloc_first(t); a != NULL; a = gs_alloc_next(t, a))
		if (served_mode(m, a->mode))
			ref(m, a);
	for (i = 0; i < m->n; i++)
		if (m->d[i].adopted && m->d[i].refs == 0)
			stop(m, i);	/* nobody left to serve */
	arm(m);
	return m;

out_del:
	gs_loop_del_fd(m->loop, m->tfd);
out_tfd:
	close(m->tfd);
	free(m);
	return NULL;
}

/* Has the daemon exited (reaped when it is our child)? */
static int gone(struct dmn *d)
{
	struct pollfd p = { d->pidfd, POLLIN, 0 };

	if (!d->adopted)
		return waitpid(d->pid, NULL, WNOHANG) != 0;
	return d->pidfd < 0 || poll(&p, 1, 0) > 0;
}

/* A daemon still serving open allocations, not being quit. */
static int wanted(const struct dmn *d)
{
	return d->pid != 0 && d->refs > 0 && d->quit_deadline == 0;
}

void gs_mps_free(struct gs_mps *m)
{
	uint64_t deadline;
	uint32_t i, left;

	if (m == NULL)
		return;
	gs_alloc_unobserve(gs_agent_allocs(m->ag), observer, m);
	/* a daemon lingering for no allocation: quit now */
	for (i = 0; i < m->n; i++)
		if (m->d[i].pid != 0 && m->d[i].refs == 0)
			stop(m, i);
	/* a daemon that serves open allocations stays, with its record,
	 * for the next agent to adopt: the allocations outlive this agent
	 * (state file), and so do their jobs */
	for (i = 0; i < m->n; i++)
		if (wanted(&m->d[i]))
			log_info("mps: gpu %d: control daemon %d left running "
				 "for the next agent",
				 gs_agent_gpu(m->ag, i)->d.index,
				 (int)m->d[i].pid);
	/* one being quit: wait for it here (shutdown only), bounded */
	deadline = gs_now_ns() + QUIT_WAIT_NS;
	do {
		struct timespec ts = { 0, 10 * 1000000L };

		left = 0;
		for (i = 0; i < m->n; i++) {
			struct dmn *d = &m->d[i];

			if (d->qpid != 0 &&
			    waitpid(d->qpid, NULL, WNOHANG) != 0)
				d->qpid = 0;
			if (d->pid != 0 && !wanted(d) && gone(d)) {
				log_info("mps: gpu %d: control daemon stopped",
					 gs_agent_gpu(m->ag, i)->d.index);
				d->pid = 0;
				unlink(d->idfile);
			}
			left += (d->pid != 0 && !wanted(d)) || d->qpid != 0;
		}
		if (left)
			nanosleep(&ts, NULL);
	} while (left && gs_now_ns() < deadline);
	for (i = 0; i < m->n; i++) {
		struct dmn *d = &m->d[i];

		if (d->pid != 0 && !wanted(d)) {
			log_warnx("mps: gpu %d: control daemon %d ignored "
				  "quit; killing it",
				  gs_agent_gpu(m->ag, i)->d.index, (int)d->pid);
			kill(d->pid, SIGKILL);
			if (!d->adopted)
				waitpid(d->pid, NULL, 0);
			unlink(d->idfile);
		}
		if (d->qpid != 0) {
			kill(d->qpid, SIGKILL);
			waitpid(d->qpid, NULL, 0);
		}
		unwatch(m, &d->pidfd);
		unwatch(m, &d->qpidfd);
	}
	gs_loop_del_fd(m->loop, m->tfd);
	close(m->tfd);
	free(m);
}

const char *gs_mps_pipe(const struct gs_mps *m, int32_t gpu, uint32_t mode,
			uint32_t uid)
{
	int s;

	if (m == NULL || !served_mode(m, mode))
		return NULL;
	if (m->site_pipe[0] != '\0')
		return m->site_pipe;
	s = slot_of(m, gpu);
	/* no daemon (its binary cannot run), or one quitting (the job
	 * would reach it while it goes): the job runs outside MPS */
	if (s < 0 || m->d[s].refs == 0 || m->d[s].uid != uid ||
	    m->d[s].pid == 0 || m->d[s].quit_deadline != 0)
		return NULL;
	return m->d[s].pipe;
}

void gs_mps_info(struct gs_mps *m, int32_t gpu, uint32_t mode,
		 uint32_t uid, struct gs_alloc_info *info)
{
	const char *p = gs_mps_pipe(m, gpu, mode, uid);

	snprintf(info->mps_pipe, sizeof(info->mps_pipe), "%s",
		 p != NULL ? p : "");
}

int gs_mps_pid(const struct gs_mps *m, uint32_t gpu)
{
	return m != NULL && gpu < m->n ? (int)m->d[gpu].pid : 0;
}

uint32_t gs_mps_uid(const struct gs_mps *m, int32_t gpu)
{
	int s;

	if (m == NULL || m->site_pipe[0] != '\0')
		return UINT32_MAX;
	s = slot_of(m, gpu);
	if (s < 0 || m->d[s].refs == 0)
		return UINT32_MAX;
	return m->d[s].uid;
}
