/*
 * gs_log.h — daemon logging, in the manner of OpenBSD ntpd.
 *
 * Only daemon and CLI main code logs; libraries return struct gs_error.
 * log_warn appends strerror(errno); log_warnx does not.  fatal/fatalx log
 * and exit(1).  Target: stderr (default), syslog, or a file.
 */
#ifndef GS_LOG_H
#define GS_LOG_H

#include <stdarg.h>

enum gs_log_target { GS_LOG_STDERR, GS_LOG_SYSLOG, GS_LOG_FILE };

/* Open the log. path is used for GS_LOG_FILE only. verbose>0 enables
 * log_debug. Returns 0 or -1 (errno set) when the file cannot be opened. */
int log_init(const char *progname, enum gs_log_target target,
	     const char *path, int verbose);
void log_setverbose(int verbose);
void log_close(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#endif /* GS_LOG_H */
