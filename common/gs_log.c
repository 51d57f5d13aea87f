/*
 * gs_log.c — daemon logging to stderr, syslog or a file (ntpd style).
 *
 * Process-wide state, set once by log_init from main; not thread-safe
 * beyond what stdio and syslog give.  Each message is written with one
 * fprintf so lines from concurrent processes do not interleave mid-line.
 * File lines carry an ISO-8601 UTC timestamp; stderr lines the program
 * name; syslog adds its own.  Messages carry text from users (job names,
 * labels): every byte outside printable ASCII, and the backslash, is
 * written as \xNN (\\ for the backslash), so a message is always one
 * line and cannot carry terminal escapes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "gs_log.h"

static enum gs_log_target log_target = GS_LOG_STDERR;
static FILE *log_file;
static int log_verbose;
static const char *log_prog = "gshare";

int log_init(const char *progname, enum gs_log_target target,
	     const char *path, int verbose)
{
	FILE *f = NULL;

	if (target == GS_LOG_FILE) {
		if (path == NULL) {
			errno = EINVAL;
			return -1;
		}
		f = fopen(path, "ae");
		if (f == NULL)
			return -1;
		setvbuf(f, NULL, _IOLBF, 0);
	}
	log_close();
	if (progname != NULL)
		log_prog = progname;
	log_target = target;
	log_file = f;
	log_verbose = verbose;
	if (target == GS_LOG_SYSLOG)
		openlog(log_prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	return 0;
}

void log_setverbose(int verbose)
{
	log_verbose = verbose;
}

void log_close(void)
{
	if (log_target == GS_LOG_SYSLOG)
		closelog();
	if (log_file != NULL)
		fclose(log_file);
	log_file = NULL;
	log_target = GS_LOG_STDERR;
}

/* in (NUL-terminated) into out, escaped as the file comment says. */
static void log_escape(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p;
	size_t o = 0;

	for (p = (const unsigned char *)in; *p != '\0' && o + 5 <= outlen;
	     p++) {
		if (*p == '\\') {
			out[o++] = '\\';
			out[o++] = '\\';
		} else if (*p < 0x20 || *p >= 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		} else {
			out[o++] = (char)*p;
		}
	}
	out[o] = '\0';
}

static void log_vwrite(int pri, const char *fmt, va_list ap, const char *sfx)
{
	char raw[1024];
	char msg[4 * sizeof(raw) + 1];
	char ts[32];
	struct timespec now;
	struct tm tm;

	vsnprintf(raw, sizeof(raw), fmt, ap);
	log_escape(raw, msg, sizeof(msg));
	switch (log_target) {
	case GS_LOG_SYSLOG:
		if (sfx != NULL)
			syslog(pri, "%s: %s", msg, sfx);
		else
			syslog(pri, "%s", msg);
		break;
	case GS_LOG_FILE:
		clock_gettime(CLOCK_REALTIME, &now);
		gmtime_r(&now.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(log_file, "%s.%03ldZ %s[%d]: %s%s%s\n", ts,
			now.tv_nsec / 1000000, log_prog, (int)getpid(),
			msg, sfx ? ": " : "", sfx ? sfx : "");
		break;
	default:
		fprintf(stderr, "%s: %s%s%s\n", log_prog, msg,
			sfx ? ": " : "", sfx ? sfx : "");
		break;
	}
}

#define LOG_BODY(pri, sfx)                                                   \
	do {                                                                 \
		va_list ap_;                                                 \
		va_start(ap_, fmt);                                          \
		log_vwrite(pri, fmt, ap_, sfx);                              \
		va_end(ap_);                                                 \
	} while (0)

void log_warn(const char *fmt, ...)
{
	const char *e = strerror(errno);

	LOG_BODY(LOG_WARNING, e);
}

void log_warnx(const char *fmt, ...)
{
	LOG_BODY(LOG_WARNING, NULL);
}

void log_info(const char *fmt, ...)
{
	LOG_BODY(LOG_INFO, NULL);
}

void log_debug(const char *fmt, ...)
{
	if (log_verbose <= 0)
		return;
	LOG_BODY(LOG_DEBUG, NULL);
}

void fatal(const char *fmt, ...)
{
	const char *e = strerror(errno);

	LOG_BODY(LOG_CRIT, e);
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_CRIT, NULL);
	exit(1);
}
