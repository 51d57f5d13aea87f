/*
 * gs_error.c — fill struct gs_error records.
 *
 * Every function accepts err == NULL (the caller does not care).  The
 * message is truncated to GS_ERRMSG_MAX - 1 bytes; errno is saved before
 * formatting so gs_error_errno reports the errno of the failed call.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gs_error.h"

int gs_error_set(struct gs_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return -1;
}

int gs_error_errno(struct gs_error *err, int code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	size_t n;

	if (err == NULL)
		return -1;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return -1;
}

void gs_error_clear(struct gs_error *err)
{
	if (err == NULL)
		return;
	err->code = GS_OK;
	err->msg[0] = '\0';
}

static const char *const gs_errnames[GS_ERRCODE_MAX] = {
	[GS_OK] = "OK",
	[GS_EINVAL] = "EINVAL",
	[GS_ENOMEM] = "ENOMEM",
	[GS_EIO] = "EIO",
	[GS_EPROTO] = "EPROTO",
	[GS_EVERSION] = "EVERSION",
	[GS_EPERM] = "EPERM",
	[GS_ENOENT] = "ENOENT",
	[GS_EBUSY] = "EBUSY",
	[GS_ETIMEDOUT] = "ETIMEDOUT",
	[GS_ECONNREFUSED] = "ECONNREFUSED",
	[GS_EUNSUPP] = "EUNSUPP",
	[GS_ECONFIG] = "ECONFIG",
	[GS_ECUDA] = "ECUDA",
	[GS_ESTATE] = "ESTATE",
	[GS_EDRAINED] = "EDRAINED",
	[GS_ECLOSED] = "ECLOSED",
	[GS_EUNHEALTHY] = "EUNHEALTHY",
};

const char *gs_errcode_name(int code)
{
	if (code < 0 || code >= GS_ERRCODE_MAX || gs_errnames[code] == NULL)
		return "EUNKNOWN";
	return gs_errnames[code];
}
