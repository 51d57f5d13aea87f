/*
 * spank_spool.c — job totals on their way to slurmdbd, off the job's
 * critical path.
 *
 * The job epilog used to write each job's AdminComment itself: one sacct
 * and one sacctmgr run, ~0.4 s of epilog time per job, mostly waiting on
 * slurmdbd (slurmd starts no new job on the node meanwhile), and totals
 * were lost when slurmdbd was down.  Now the epilog only puts the node's
 * segment into spool_dir — one small file per job and node, written,
 * fsync'ed and renamed into place, so a crash leaves either the whole
 * record or none — and starts the writer.
 *
 * The writer is a detached process (forked twice, its own session, fds
 * on /dev/null, so slurmd neither waits for it nor kills it with the
 * epilog).  At most one runs per spool_dir (flock on .writer); it takes
 * each record, merges its segment into the job's AdminComment
 * (gs__update_comment: sacct + sacctmgr, each run bounded), and removes
 * the record once slurmdbd took it.  Records slurmdbd does not take yet
 * (down, or the job's record not there yet: sacctmgr "Nothing modified")
 * stay, and the writer retries with a backoff from 0.5 s up to 10 s until
 * every record is written.  A record still refused after SPOOL_MAX_AGE_S
 * is set aside as .expired.<name> (logged), so that nothing retries
 * forever.  The writer leaves .status (pending records, age of the
 * oldest, last error) for admins and monitoring, and logs to syslog: the
 * forked process must not call libslurm (its locks may be held by
 * threads that did not survive the fork).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "gs_spank.h"

#define SPOOL_BACKOFF_MIN_MS 500
#define SPOOL_BACKOFF_MAX_MS 10000
#define SPOOL_MAX_AGE_S (7 * 24 * 3600)

/* mkdir -p, each missing level 0700 (root only). */
static int mkdir_p(const char *path, struct gs_error *err)
{
	char buf[GS_SPANK_PATH_MAX];
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return gs_error_set(err, GS_EINVAL, "bad directory '%s'", path);
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0700) < 0 && errno != EEXIST)
			return gs_error_errno(err, GS_EIO, "mkdir %s", buf);
		buf[i] = path[i];
	}
	return 0;
}

int gs__mkdir_p(const char *path, struct gs_error *err)
{
	return mkdir_p(path, err);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int gs__spool_put(const struct gs_spank_spool *r, struct gs_error *err)
{
	const char *dir = gs__st.conf.spool_dir;
	char line[512], path[GS_SPANK_PATH_MAX + 128],
		tmp[GS_SPANK_PATH_MAX + 160];
	int fd, n;

	n = gs_spank_spool_format(r, line, sizeof(line), err);
	if (n < 0)
		return -1;
	if (mkdir_p(dir, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s.%s", dir, r->job, r->node);
	snprintf(tmp, sizeof(tmp), "%s/.tmp.%s.%s.%d", dir, r->job, r->node,
		 (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return gs_error_errno(err, GS_EIO, "open %s", tmp);
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		gs_error_errno(err, GS_EIO, "write %s", tmp);
		close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		gs_error_errno(err, GS_EIO, "rename %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (fsync_dir(dir) < 0)
		return gs_error_errno(err, GS_EIO, "fsync %s", dir);
	return 0;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Set a record aside under a dot name (skipped by the writer). */
static void set_aside(const char *dir, const char *name, const char *why)
{
	char from[GS_SPANK_PATH_MAX + 300], to[GS_SPANK_PATH_MAX + 320];

	snprintf(from, sizeof(from), "%s/%s", dir, name);
	snprintf(to, sizeof(to), "%s/.%s.%s", dir, why, name);
	if (rename(from, to) < 0)
		unlink(from);
	syslog(LOG_ERR, "%s: %s record set aside as %s", from, why, to);
}

struct pass {
	unsigned pending;	/* records slurmdbd did not take */
	unsigned written;
	int64_t oldest_s;	/* age of the oldest pending record */
	char last_error[GS_ERRMSG_MAX + 48];
};

/* One pass over the spool: write what slurmdbd takes. */
static void spool_pass(const char *dir, struct pass *p)
{
	struct gs_spank_spool r;
	struct gs_error err;
	struct dirent *de;
	struct stat st;
	char path[GS_SPANK_PATH_MAX + 300], line[512];
	time_t now = time(NULL);
	ssize_t n;
	DIR *d;
	int fd;

	memset(p, 0, sizeof(*p));
	d = opendir(dir);
	if (d == NULL) {
		snprintf(p->last_error, sizeof(p->last_error), "opendir %s: %s",
			 dir, strerror(errno));
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW |
				  O_NONBLOCK);
		if (fd < 0)
			continue;	/* raced with another writer */
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);	/* not ours: leave it alone */
			continue;
		}
		n = read(fd, line, sizeof(line) - 1);
		close(fd);
		line[n > 0 ? n : 0] = '\0';
		if (gs_spank_spool_parse(line, &r, &err) < 0) {
			set_aside(dir, de->d_name, "bad");
			continue;
		}
		if (gs__update_comment(r.job, r.node, r.nodes == 1, r.seg,
				       &err) == 0) {
			unlink(path);
			p->written++;
			continue;
		}
		if (now - st.st_mtime > SPOOL_MAX_AGE_S) {
			syslog(LOG_ERR, "job %s on %s: slurmdbd did not take "
			       "the totals for %d days: %s",
			       r.job, r.node, SPOOL_MAX_AGE_S / 86400,
			       err.msg);
			set_aside(dir, de->d_name, "expired");
			continue;
		}
		p->pending++;
		if (now - st.st_mtime > p->oldest_s)
			p->oldest_s = now - st.st_mtime;
		snprintf(p->last_error, sizeof(p->last_error), "job %s: %s",
			 r.job, err.msg);
	}
	closedir(d);
}

/* .status: what the writer saw last, for admins and monitoring. */
static void write_status(const char *dir, const struct pass *p, int running)
{
	char path[GS_SPANK_PATH_MAX + 32], tmp[GS_SPANK_PATH_MAX + 48],
		buf[GS_ERRMSG_MAX + 220];
	int fd, n;

	snprintf(path, sizeof(path), "%s/.status", dir);
	snprintf(tmp, sizeof(tmp), "%s/.status.tmp", dir);
	n = snprintf(buf, sizeof(buf),
		     "pending=%u oldest_s=%" PRId64 " written=%u writer=%s "
		     "time=%lld last_error=%s\n",
		     p->pending, p->oldest_s, p->written,
		     running ? "retrying" : "idle", (long long)time(NULL),
		     p->pending ? p->last_error : "");
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)strlen(buf);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return;
	if (write(fd, buf, (size_t)n) != n || close(fd) < 0) {
		unlink(tmp);
		return;
	}
	if (rename(tmp, path) < 0)
		unlink(tmp);
}

static int spool_has_records(const char *dir)
{
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);
	int found = 0;

	if (d == NULL)
		return 0;
	while (!found && (de = readdir(d)) != NULL)
		found = de->d_name[0] != '.' &&
			fstatat(dirfd(d), de->d_name, &st,
				AT_SYMLINK_NOFOLLOW) == 0 &&
			S_ISREG(st.st_mode);
	closedir(d);
	return found;
}

/* The detached writer: runs until the spool is empty. */
static void writer_main(void)
{
	const char *dir = gs__st.conf.spool_dir;
	char lock[GS_SPANK_PATH_MAX + 32];
	struct pass p;
	int64_t backoff;
	int lfd;

	snprintf(lock, sizeof(lock), "%s/.writer", dir);
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lfd < 0) {
		syslog(LOG_ERR, "open %s: %m", lock);
		return;
	}
	for (;;) {
		if (flock(lfd, LOCK_EX | LOCK_NB) < 0)
			break;	/* another writer has it */
		/* who writes, for admins (and tests) */
		if (ftruncate(lfd, 0) == 0)
			dprintf(lfd, "%d\n", (int)getpid());
		backoff = SPOOL_BACKOFF_MIN_MS;
		for (;;) {
			int64_t t0 = mono_ms();

			spool_pass(dir, &p);
			write_status(dir, &p, p.pending > 0);
			if (p.pending == 0)
				break;
			syslog(LOG_WARNING, "%u job totals wait for slurmdbd "
			       "(oldest %" PRId64 " s): %s",
			       p.pending, p.oldest_s, p.last_error);
			if (mono_ms() - t0 < backoff)
				sleep_ms(backoff - (mono_ms() - t0));
			backoff = backoff * 2 > SPOOL_BACKOFF_MAX_MS
					  ? SPOOL_BACKOFF_MAX_MS
					  : backoff * 2;
		}
		flock(lfd, LOCK_UN);
		/* an epilog that spooled after our last pass saw our lock
		 * and left its record to us */
		if (!spool_has_records(dir))
			break;
	}
	close(lfd);
}

/* Leave slurmd's world: own session, no inherited fds or signal state. */
static void detach(void)
{
	sigset_t all;
	int fd;

	setsid();
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_IGN);
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	closefrom(3);
	if (chdir("/") < 0)
		_exit(1);
	umask(077);
}

void gs__spool_kick(void)
{
	pid_t pid, w;
	int status;

	pid = fork();
	if (pid < 0) {
		slurm_error("gshare: spool writer: fork: %m");
		return;
	}
	if (pid == 0) {
		detach();
		if (fork() != 0)
			_exit(0);	/* the writer is re-parented to init */
		openlog("gshare-spank", LOG_PID, LOG_DAEMON);
		writer_main();
		_exit(0);
	}
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
}
