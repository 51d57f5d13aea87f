/*
 * gs_probe.c — a small agent client for the Slurm tests, with output the
 * test script can grep whatever the CLIs print.
 *
 *   gs_probe status SOCK        one line per allocation:
 *       alloc ID job=J step=S node=N user=U shares=N weight=N
 *       priority=P mode=M uid=N gpu=N state=S
 *   gs_probe attach [SOCK ID]   attach to ID (default: GSHARE_SOCKET and
 *       GSHARE_ALLOC); prints "attached ID uid=N" or "error CODE: msg"
 *
 * Exit status: 0 success, 1 agent error, 2 usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gs_client.h"
#include "gs_proto.h"

#define TIMEOUT_MS 3000

static int fail(const struct gs_error *err)
{
	printf("error %s: %s\n", gs_errcode_name(err->code), err->msg);
	return 1;
}

static int do_status(const char *sock)
{
	struct gs_client *c = NULL;
	struct gs_status *st = NULL;
	struct gs_error err;
	uint32_t i;

	if (gs_client_connect(sock, TIMEOUT_MS, &c, &err) < 0)
		return fail(&err);
	if (gs_client_status(c, &st, &err) < 0) {
		gs_client_free(c);
		return fail(&err);
	}
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		printf("alloc %" PRIu64 " job=%s step=%s node=%s user=%s "
		       "shares=%u weight=%u priority=%s mode=%s uid=%u gpu=%d "
		       "state=%s mem_limit=%" PRIu64 "\n",
		       a->id, a->labels.job, a->labels.step, a->labels.node,
		       a->labels.user, a->shares, a->weight,
		       gs_priority_name(a->priority), gs_mode_name(a->mode),
		       a->uid, (int)a->gpu, gs_alloc_state_name(a->state),
		       a->mem_limit);
	}
	gs_status_free(st);
	gs_client_free(c);
	return 0;
}

static int do_attach(const char *sock, const char *idstr)
{
	struct gs_client *c = NULL;
	struct gs_alloc_info info;
	struct gs_error err;
	char *end = NULL;
	uint64_t id;
	int fd = -1;

	if (sock == NULL || idstr == NULL) {
		printf("error ENV: GSHARE_SOCKET/GSHARE_ALLOC not set\n");
		return 1;
	}
	id = strtoull(idstr, &end, 10);
	if (end == idstr || *end != '\0') {
		fprintf(stderr, "gs_probe: bad allocation id '%s'\n", idstr);
		return 2;
	}
	if (gs_client_connect(sock, TIMEOUT_MS, &c, &err) < 0)
		return fail(&err);
	if (gs_client_attach(c, id, &fd, &info, &err) < 0) {
		gs_client_free(c);
		return fail(&err);
	}
	printf("attached %" PRIu64 " uid=%u shares=%u\n", info.id, info.uid,
	       info.shares);
	close(fd);
	gs_client_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "status") == 0)
		return do_status(argv[2]);
	if (argc == 2 && strcmp(argv[1], "attach") == 0)
		return do_attach(getenv(GS_ENV_SOCKET), getenv(GS_ENV_ALLOC));
	if (argc == 4 && strcmp(argv[1], "attach") == 0)
		return do_attach(argv[2], argv[3]);
	fprintf(stderr, "usage: gs_probe status SOCK | attach [SOCK ID]\n");
	return 2;
}
