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
		  uint64_t mem_total, uint64_t placed, uint32_t nplaced,
		  uint32_t shares, uint64_t asked, uint64_t *limit,
		  struct gs_error *err)
{
	uint64_t usable = gs_mem_usable(c, mem_total), want, left, taken;
	uint64_t ctx = c->memory_context_reserve;
	char a[32], b[32], d[32], e[32], f[32];

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
		if (asked > usable || usable - asked < ctx)
			return gs_error_set(err, GS_EINVAL,
					    "GPU %d: memory limit %s exceeds "
					    "the %s the GPU offers to one (%s "
					    "less the memory_reserve of %s and "
					    "the memory_context_reserve of %s)",
					    gpu, gs_mem_str(asked, a,
							    sizeof(a)),
					    gs_mem_str(usable > ctx ?
						       usable - ctx : 0, b,
						       sizeof(b)),
					    gs_mem_str(mem_total, d,
						       sizeof(d)),
					    gs_mem_str(c->memory_reserve, e,
						       sizeof(e)),
					    gs_mem_str(ctx, f, sizeof(f)));
		want = asked;
	} else if (c->memory == GS_MEM_UNLIMITED) {
		*limit = 0;
		return 0;
	} else {
		/* shares/shares_per_gpu of what the GPU offers, in whole
		 * MiB, less the allocation's context reserve: so that the
		 * proportional limits of a full GPU and their contexts add
		 * up to no more than it offers */
		want = (uint64_t)((unsigned __int128)usable * shares /
				  c->shares_per_gpu);
		want -= want % MIB;
		if (want < ctx + MIB)
			return gs_error_set(err, GS_EBUSY,
					    "GPU %d: %u shares of %s usable "
					    "memory leave less than 1M beside "
					    "the memory_context_reserve of %s",
					    gpu, shares,
					    gs_mem_str(usable, a, sizeof(a)),
					    gs_mem_str(ctx, b, sizeof(b)));
		want -= ctx;
	}
	/* what the allocations already here took: their limits and one
	 * context reserve each */
	taken = placed + (uint64_t)nplaced * ctx;
	if (taken < placed)
		taken = UINT64_MAX;
	left = taken < usable ? usable - taken : 0;
	if (!c->memory_oversubscribe && (want > left || left - want < ctx))
		return gs_error_set(err, GS_EBUSY,
				    "GPU %d: memory limit %s does not fit: %s "
				    "of %s left beside the limits already "
				    "placed and their memory_context_reserve "
				    "(%s each, this allocation's included; "
				    "memory_oversubscribe is off)",
				    gpu, gs_mem_str(want, a, sizeof(a)),
				    gs_mem_str(left, b, sizeof(b)),
				    gs_mem_str(usable, d, sizeof(d)),
				    gs_mem_str(ctx, e, sizeof(e)));
	*limit = want;
	return 0;
}
