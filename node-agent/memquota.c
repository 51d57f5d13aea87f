/*
 * memquota.c — default device memory limits and memory admission (see
 * memquota.h).
 */
#include <stdio.h>

#include "memquota.h"

#define MIB (1ull << 20)

uint64_t gs_mem_usable(const struct gs_agent_config *c, uint64_t mem_total)
{
	if (mem_total <= c->memory_reserve)
		return 0;
	return mem_total - c->memory_reserve;
}

const char *gs_mem_str(uint64_t bytes, char *buf, unsigned len)
{
	gs_cfg_format_size(bytes, buf, len);
	return buf;
}

int gs_mem_settle(const struct gs_agent_config *c, int32_t gpu,
		  uint64_t mem_total, uint64_t placed, uint32_t shares,
		  uint64_t asked, uint64_t *limit, struct gs_error *err)
{
	uint64_t usable = gs_mem_usable(c, mem_total), want, left;
	char a[32], b[32], d[32], e[32];

	if (asked != 0 && asked < MIB)
		return gs_error_set(err, GS_EINVAL, "memory limit %s is "
				    "below 1M", gs_mem_str(asked, a,
							   sizeof(a)));
	if (mem_total == 0) {
		/* nothing to check against: the job's own word, or none */
		*limit = asked;
		return 0;
	}
	if (asked != 0) {
		if (asked > usable)
			return gs_error_set(err, GS_EINVAL,
					    "GPU %d: memory limit %s exceeds "
					    "the %s the GPU offers (%s less "
					    "the memory_reserve of %s)", gpu,
					    gs_mem_str(asked, a, sizeof(a)),
					    gs_mem_str(usable, b, sizeof(b)),
					    gs_mem_str(mem_total, d,
						       sizeof(d)),
					    gs_mem_str(c->memory_reserve, e,
						       sizeof(e)));
		want = asked;
	} else if (c->memory == GS_MEM_UNLIMITED) {
		*limit = 0;
		return 0;
	} else {
		/* shares/shares_per_gpu of what the GPU offers, in whole
		 * MiB so that the proportional limits of a full GPU add up
		 * to no more than it offers */
		want = (uint64_t)((unsigned __int128)usable * shares /
				  c->shares_per_gpu);
		want -= want % MIB;
		if (want == 0)
			return gs_error_set(err, GS_EBUSY,
					    "GPU %d: %u shares of %s usable "
					    "memory is less than 1M", gpu,
					    shares, gs_mem_str(usable, a,
							       sizeof(a)));
	}
	left = placed < usable ? usable - placed : 0;
	if (!c->memory_oversubscribe && want > left)
		return gs_error_set(err, GS_EBUSY,
				    "GPU %d: memory limit %s does not fit: %s "
				    "of %s left beside the limits already "
				    "placed (memory_oversubscribe is off)",
				    gpu, gs_mem_str(want, a, sizeof(a)),
				    gs_mem_str(left, b, sizeof(b)),
				    gs_mem_str(usable, d, sizeof(d)));
	*limit = want;
	return 0;
}
