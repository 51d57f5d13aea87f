/*
 * dp_agentq.c — test helper: print the agent's status in a fixed line
 * format for the device plugin tests (tests/k8s/test_plugin.py).
 *
 *   gpu <index> <uuid> <healthy>
 *   alloc <id> <gpu> <uuid> <shares> <state> <cluster> <node> <ns> <pod>
 *         <container>          (one line)
 *
 * Empty labels print as "-".  Exit 1 (message on stderr) when the agent
 * cannot be asked.
 */
#include <stdio.h>

#include "gs_client.h"

static const char *
lab(const char *s)
{
	return s[0] ? s : "-";
}

int
main(int argc, char **argv)
{
	struct gs_client *c = NULL;
	struct gs_status *st = NULL;
	struct gs_error err;
	uint32_t i;

	if (argc != 2) {
		fprintf(stderr, "usage: dp_agentq SOCKET\n");
		return 2;
	}
	if (gs_client_connect(argv[1], 2000, &c, &err) == -1 ||
	    gs_client_status(c, &st, &err) == -1) {
		fprintf(stderr, "dp_agentq: %s\n", err.msg);
		gs_client_free(c);
		return 1;
	}
	for (i = 0; i < st->ngpus; i++)
		printf("gpu %d %s %u\n", st->gpus[i].index, st->gpus[i].uuid,
		    st->gpus[i].healthy);
	for (i = 0; i < st->nallocs; i++) {
		const struct gs_alloc_info *a = &st->allocs[i];

		printf("alloc %llu %d %s %u %s %s %s %s %s %s %llu\n",
		    (unsigned long long)a->id, a->gpu, a->gpu_uuid, a->shares,
		    gs_alloc_state_name(a->state), lab(a->labels.cluster),
		    lab(a->labels.node), lab(a->labels.ns), lab(a->labels.pod),
		    lab(a->labels.container),
		    (unsigned long long)a->mem_limit);
	}
	gs_status_free(st);
	gs_client_free(c);
	return 0;
}
