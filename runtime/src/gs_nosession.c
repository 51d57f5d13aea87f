/*
 * gs_nosession.c — used only while common/gs_session.c is not in the
 * tree: standalone mode works, attaching to an agent is refused with a
 * clear error.  module.mk drops this file as soon as the session module
 * exists.
 */
#include <stdlib.h>

#include "gs_proto.h"
#include "gs_session.h"

int
gs_session_open_env(int timeout_ms, struct gs_session **out,
		    struct gs_error *err)
{
	(void)timeout_ms;
	*out = NULL;
	if (getenv(GS_ENV_SOCKET) == NULL && getenv(GS_ENV_ALLOC) == NULL)
		return 0;
	return gs_error_set(err, GS_EUNSUPP, "libgshare was built without "
			    "the agent session module; unset %s and %s",
			    GS_ENV_SOCKET, GS_ENV_ALLOC);
}

void
gs_session_close(struct gs_session *s)
{
	(void)s;
}

volatile struct gs_ctlpage *
gs_session_page(struct gs_session *s)
{
	(void)s;
	return NULL;
}

int
gs_session_holding(const struct gs_session *s)
{
	(void)s;
	return 0;
}

int
gs_session_acquire(struct gs_session *s, struct gs_error *err)
{
	(void)s;
	return gs_error_set(err, GS_EUNSUPP, "no session module");
}

int
gs_session_release(struct gs_session *s, const struct gs_run_result *r,
		   struct gs_error *err)
{
	(void)s;
	(void)r;
	return gs_error_set(err, GS_EUNSUPP, "no session module");
}
