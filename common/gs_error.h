/*
 * gs_error.h — the error record every gshare function fills.
 *
 * Functions return 0 (or a non-negative value) on success and -1 on
 * failure, after filling the caller's struct gs_error.  The code is one of
 * enum gs_errcode; it also crosses the wire in ERROR frames, so its values
 * are part of the protocol and never change.  Libraries never print.
 */
#ifndef GS_ERROR_H
#define GS_ERROR_H

#include <stddef.h>

enum gs_errcode {
	GS_OK = 0,
	GS_EINVAL = 1,		/* bad argument or malformed input */
	GS_ENOMEM = 2,		/* out of memory */
	GS_EIO = 3,		/* system call failed (errno in message) */
	GS_EPROTO = 4,		/* malformed or unexpected frame */
	GS_EVERSION = 5,	/* foreign protocol major / page version */
	GS_EPERM = 6,		/* peer not allowed to do this */
	GS_ENOENT = 7,		/* no such allocation / GPU */
	GS_EBUSY = 8,		/* admission refused: not enough shares */
	GS_ETIMEDOUT = 9,	/* connect or request timed out */
	GS_ECONNREFUSED = 10,	/* agent not running */
	GS_EUNSUPP = 11,	/* unknown message type / feature */
	GS_ECONFIG = 12,	/* configuration error (file:line in msg) */
	GS_ECUDA = 13,		/* CUDA call failed (runtime only) */
	GS_ESTATE = 14,		/* call not valid in this state */
	GS_EDRAINED = 15,	/* GPU drained: no new allocations */
	GS_ECLOSED = 16,	/* peer closed the connection */
	/* 17 is taken by libgshare (GSHARE_EINTERNAL, runtime only) */
	GS_EUNHEALTHY = 18,	/* GPU unhealthy: no new allocations */
	GS_ERRCODE_MAX
};

#define GS_ERRMSG_MAX 256

struct gs_error {
	int code;			/* enum gs_errcode */
	char msg[GS_ERRMSG_MAX];
};

/* Fill err (if not NULL) with code and a printf-style message. Returns -1
 * so callers can write `return gs_error_set(err, GS_EINVAL, "...")`. */
int gs_error_set(struct gs_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like gs_error_set, appending ": strerror(errno)". */
int gs_error_errno(struct gs_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Clear err to GS_OK / empty message. */
void gs_error_clear(struct gs_error *err);

/* Short constant name of a code, e.g. "EBUSY"; never NULL. */
const char *gs_errcode_name(int code);

#endif /* GS_ERROR_H */
