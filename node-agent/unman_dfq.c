/*
 * unman_dfq.c — the pure parts of unman.c: which allocation a GPU process
 * belongs to, whether it may be held back, and the disengaged fair
 * queuing step (see unman.h).  No I/O, no agent state: unit-tested with
 * traces (tests/agent/test_unman.c).
 */
#include <stdint.h>

#include "alloc.h"
#include "unman.h"

enum gs_unman_class gs_unman_classify(const struct gs_unman_proc *p,
				      const struct gs_unman_owner *o)
{
	unsigned k;

	if (o == NULL || p->alloc == 0 || o->id != p->alloc ||
	    o->gpu < 0 || (uint32_t)o->gpu != p->gpu)
		return GS_UNMAN_NO_OWNER;
	if (!o->any_uid && p->uid != o->uid && p->uid != 0)
		return GS_UNMAN_NO_OWNER;	/* another user's allocation */
	for (k = 0; k < o->natt; k++)
		if (o->att[k].conn != NULL &&
		    (uint32_t)o->att[k].pid == p->pid)
			return GS_UNMAN_MANAGED;
	return GS_UNMAN_UNMANAGED;
}

int gs_unman_holdable(const struct gs_unman_proc *p)
{
	return p->uid != 0 && p->uid != (uint32_t)-1;
}

uint64_t gs_unman_dfq_step(struct gs_dfq_ent *e, unsigned n,
			   uint64_t period_ns, uint64_t ahead_ns)
{
	uint64_t wsum = 0, tsys = UINT64_MAX, tmin = UINT64_MAX;
	unsigned i, nact = 0;

	(void)period_ns;
	for (i = 0; i < n; i++) {
		if (e[i].weight == 0)
			e[i].weight = 1;
		if (!e[i].fresh && e[i].vt < tmin)
			tmin = e[i].vt;
		if (e[i].used_ns || e[i].wants || e[i].stopped) {
			wsum += e[i].weight;
			nact++;
		}
	}
	if (tmin == UINT64_MAX)
		tmin = 0;
	/* newcomers start level with the least-served known one */
	for (i = 0; i < n; i++)
		if (e[i].fresh) {
			e[i].vt = tmin;
			e[i].fresh = 0;
		}
	/* virtual time: GPU time × (total active weight ÷ own weight), so
	 * an allocation getting exactly its weighted part advances at the
	 * rate of real time */
	for (i = 0; i < n; i++)
		if (e[i].used_ns)
			e[i].vt += e[i].used_ns * (wsum ? wsum : e[i].weight) /
				   e[i].weight;
	for (i = 0; i < n; i++)
		if ((e[i].used_ns || e[i].wants || e[i].stopped) &&
		    e[i].vt < tsys)
			tsys = e[i].vt;
	if (tsys == UINT64_MAX)
		tsys = tmin;
	/* no saving up: idle ones that fell behind catch up */
	for (i = 0; i < n; i++)
		if (!(e[i].used_ns || e[i].wants || e[i].stopped) &&
		    e[i].vt < tsys)
			e[i].vt = tsys;
	for (i = 0; i < n; i++) {
		uint64_t lead = e[i].vt - tsys;

		if (!e[i].holdable || nact < 2)
			e[i].stopped = 0;
		else if (e[i].stopped)
			e[i].stopped = lead > ahead_ns / 2;
		else
			e[i].stopped = lead > ahead_ns;
	}
	return tsys;
}

