/*
 * fuzz_dp.c — libFuzzer target for the device plugin's parsers and
 * decisions on kubelet-supplied strings: resource names, device IDs,
 * preferred allocation, Allocate checks, and reconciliation with a
 * PodResources list.  The input is split at newlines into IDs; the first
 * byte picks sizes.  Any crash, sanitizer report or broken invariant
 * (a preferred answer of the wrong size) is a finding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dp_logic.h"
#include "dp_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXIDS 256

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct gs_dp_gpu gpus[2] = {
		{ 0, "GPU-a", 1 }, { 1, "GPU-b", 1 },
	};
	char *buf, *p, *save = NULL;
	const char *ids[MAXIDS], *out[MAXIDS];
	struct gs_dp_group groups[2];
	struct gs_dp_state st;
	struct gs_dp_podctr pc;
	struct gs_dp_action acts[MAXIDS];
	struct gs_error err;
	char uuid[GS_UUID_MAX];
	size_t n = 0, want, i;
	unsigned sh;

	if (size < 1)
		return 0;
	want = data[0] % 8;
	buf = malloc(size);
	if (buf == NULL)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	for (p = strtok_r(buf, "\n", &save); p != NULL && n < MAXIDS;
	    p = strtok_r(NULL, "\n", &save))
		ids[n++] = p;
	if (n > 0)
		gs_dp_resource_check(ids[0], &err);
	for (i = 0; i < n; i++)
		gs_dp_device_id_parse(ids[i], uuid, &sh, &err);
	if (gs_dp_preferred(ids, n, ids, n > 2 ? 1 : 0, want, out, &err) == 0)
		for (i = 0; i < want; i++)
			if (out[i] == NULL)
				abort();
	gs_dp_allocate_check(gpus, 2, ids, n, data[0] & 1, groups, &err);
	gs_dp_state_init(&st);
	if (n > 0 && gs_dp_state_add(&st, 1, "GPU-a", (unsigned)n, ids, n, 0,
	    &err) == 0) {
		gs_dp_state_add(&st, 2, "GPU-b", 3, NULL, 0, 0, &err);
		pc.ns = ids[0];
		pc.pod = ids[n - 1];
		pc.container = ids[n / 2];
		pc.ids = ids + n / 2;
		pc.nids = n - n / 2;
		gs_dp_reconcile(&st, &pc, 1, data[0], 100, acts, &err);
		uint64_t same;

		gs_dp_state_overlap(&st, ids, n, ids + n / 2, n - n / 2,
		    data[0], 50,
		    (uint64_t *)acts, &same);
	}
	gs_dp_state_clear(&st);
	free(buf);
	return 0;
}
