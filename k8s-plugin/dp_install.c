/*
 * dp_install.c — atomic copy of the launch gate into the agent socket
 * directory (see dp_install.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dp_install.h"

#define COPY_BUF 65536

static int
read_full(int fd, char *buf, size_t len, off_t off, size_t *got)
{
	ssize_t r;

	*got = 0;
	while (*got < len) {
		r = pread(fd, buf + *got, len - *got, off + (off_t)*got);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		if (r == 0)
			break;
		*got += (size_t)r;
	}
	return 0;
}

static int
write_full(int fd, const char *buf, size_t len)
{
	ssize_t w;

	while (len > 0) {
		w = write(fd, buf, len);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* dir/name a regular file of mode 0644 with the bytes of sfd (size
 * bytes)?  1 yes, 0 no, -1 cannot tell (err set). */
static int
same_file(int sfd, off_t size, int dfd, const char *dir, const char *name,
	  const struct stat *dst, struct gs_error *err)
{
	char a[COPY_BUF], b[COPY_BUF];
	size_t na, nb;
	off_t off = 0;
	int fd, rv = 1;

	if (dst->st_size != size || (dst->st_mode & 07777) != 0644 ||
	    dst->st_uid != geteuid())
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
	    O_NONBLOCK);
	if (fd == -1)
		return gs_error_errno(err, GS_EIO, "%s/%s", dir, name);
	while (off < size) {
		if (read_full(sfd, a, sizeof(a), off, &na) == -1 ||
		    read_full(fd, b, sizeof(b), off, &nb) == -1) {
			rv = gs_error_errno(err, GS_EIO, "reading %s/%s", dir,
			    name);
			break;
		}
		if (na != nb || memcmp(a, b, na) != 0) {
			rv = 0;
			break;
		}
		if (na == 0)
			break;
		off += (off_t)na;
	}
	close(fd);
	return rv;
}

/* The temporary file, new: .<name>.tmp.<pid>.  One left by a run that
 * died (the plugin is often pid 1 in its container) is removed first. */
static int
open_temp(int dfd, const char *dir, const char *name, char *tmp, size_t sz,
	  struct gs_error *err)
{
	int fd, tries;
	int w = snprintf(tmp, sz, ".%s.tmp.%ld", name, (long)getpid());

	if (w < 0 || (size_t)w >= sz)
		return gs_error_set(err, GS_EINVAL, "%s: name too long", name);
	for (tries = 0; tries < 2; tries++) {
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0600);
		if (fd != -1)
			return fd;
		if (errno != EEXIST || unlinkat(dfd, tmp, 0) == -1)
			break;
	}
	return gs_error_errno(err, GS_EIO, "creating %s/%s", dir, tmp);
}

int
gs_dp_install_file(const char *src, const char *dir, const char *name,
		   struct gs_error *err)
{
	char buf[COPY_BUF], tmp[320];
	struct stat sst, dst;
	int sfd = -1, dfd = -1, tfd = -1, rv = -1, have_tmp = 0;
	size_t n;
	off_t off = 0;

	if (name == NULL || *name == '\0' || strchr(name, '/') != NULL ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return gs_error_set(err, GS_EINVAL, "\"%s\": expected a file "
		    "name", name ? name : "");
	sfd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (sfd == -1) {
		gs_error_errno(err, GS_EIO, "%s", src);
		goto out;
	}
	if (fstat(sfd, &sst) == -1) {
		gs_error_errno(err, GS_EIO, "%s", src);
		goto out;
	}
	if (!S_ISREG(sst.st_mode)) {
		gs_error_set(err, GS_EINVAL, "%s: not a regular file", src);
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd == -1) {
		gs_error_errno(err, GS_EIO, "%s", dir);
		goto out;
	}
	if (fstatat(dfd, name, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISLNK(dst.st_mode)) {
			gs_error_set(err, GS_EINVAL, "%s/%s is a symbolic "
			    "link: not followed, not replaced", dir, name);
			goto out;
		}
		if (!S_ISREG(dst.st_mode)) {
			gs_error_set(err, GS_EINVAL, "%s/%s: not a regular "
			    "file: not replaced", dir, name);
			goto out;
		}
		switch (same_file(sfd, sst.st_size, dfd, dir, name, &dst,
		    err)) {
		case 1:
			rv = 0;		/* the same: nothing to do */
			goto out;
		case -1:
			goto out;
		}
	} else if (errno != ENOENT) {
		gs_error_errno(err, GS_EIO, "%s/%s", dir, name);
		goto out;
	}

	tfd = open_temp(dfd, dir, name, tmp, sizeof(tmp), err);
	if (tfd == -1)
		goto out;
	have_tmp = 1;
	for (;;) {
		if (read_full(sfd, buf, sizeof(buf), off, &n) == -1) {
			gs_error_errno(err, GS_EIO, "reading %s", src);
			goto out;
		}
		if (n == 0)
			break;
		if (write_full(tfd, buf, n) == -1) {
			gs_error_errno(err, GS_EIO, "writing %s/%s", dir, tmp);
			goto out;
		}
		off += (off_t)n;
	}
	/* root:root when we are root (a setgid directory could give it
	 * another group); no chown needed, none done (no CAP_CHOWN in the
	 * DaemonSet) when it already is */
	if (geteuid() == 0 && (fstat(tfd, &dst) == -1 ||
	    ((dst.st_uid != 0 || dst.st_gid != 0) &&
	    fchown(tfd, 0, 0) == -1))) {
		gs_error_errno(err, GS_EIO, "chown %s/%s", dir, tmp);
		goto out;
	}
	if (fchmod(tfd, 0644) == -1 || fsync(tfd) == -1) {
		gs_error_errno(err, GS_EIO, "%s/%s", dir, tmp);
		goto out;
	}
	if (close(tfd) == -1) {
		tfd = -1;
		gs_error_errno(err, GS_EIO, "%s/%s", dir, tmp);
		goto out;
	}
	tfd = -1;
	/* rename replaces the entry itself: a symbolic link put there since
	 * the check above is replaced, never followed */
	if (renameat(dfd, tmp, dfd, name) == -1) {
		gs_error_errno(err, GS_EIO, "renaming %s/%s to %s", dir, tmp,
		    name);
		goto out;
	}
	have_tmp = 0;
	if (fsync(dfd) == -1) {
		gs_error_errno(err, GS_EIO, "sync %s", dir);
		goto out;
	}
	rv = 1;
out:
	if (tfd != -1)
		close(tfd);
	if (have_tmp)
		unlinkat(dfd, tmp, 0);
	if (dfd != -1)
		close(dfd);
	if (sfd != -1)
		close(sfd);
	return rv;
}
