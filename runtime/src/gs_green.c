/*
 * gs_green.c — space mode's partitions as green contexts (gs_green.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gs_green.h"
#include "gs_rtlogic.h"

#define GS__GREEN_MAXG	64	/* SM groups */
#define GS__GREEN_NCTX	16	/* green contexts kept (one per partition;
				 * least recently used go first) */
#define GS__GREEN_NSTR	64	/* green streams kept */

typedef CUresult (*get_res_fn)(CUdevice, CUdevResource *, CUdevResourceType);
typedef CUresult (*split_fn)(CUdevResource *, unsigned int *,
			     const CUdevResource *, CUdevResource *,
			     unsigned int, unsigned int);
typedef CUresult (*gendesc_fn)(CUdevResourceDesc *, CUdevResource *,
			       unsigned int);
typedef CUresult (*gcreate_fn)(CUgreenCtx *, CUdevResourceDesc, CUdevice,
			       unsigned int);
typedef CUresult (*gdestroy_fn)(CUgreenCtx);
typedef CUresult (*gstream_fn)(CUstream *, CUgreenCtx, unsigned int, int);
typedef CUresult (*sdestroy_fn)(CUstream);
typedef CUresult (*devget_fn)(CUdevice *, int);

struct gs__green {
	CUdevice dev;
	get_res_fn get_res;
	split_fn split;
	gendesc_fn gendesc;
	gcreate_fn gcreate;
	gdestroy_fn gdestroy;
	gstream_fn gstream;
	sdestroy_fn sdestroy;
	CUdevResource grp[GS__GREEN_MAXG + 1], left;
	unsigned int ngroups, gsize, nleft;
	struct {
		unsigned int key;	/* g0 << 16 | ng << 1 | with_left */
		unsigned int nsm;
		uint64_t round;		/* last used in */
		CUgreenCtx ctx;
	} ctx[GS__GREEN_NCTX];
	unsigned int nctx;
	struct {
		unsigned int key;
		cudaStream_t user;
		uint64_t round;
		CUstream s;
	} str[GS__GREEN_NSTR];
	unsigned int nstr;
};

/* Drop stream entry i (its work finished with the round it ran in). */
static void
str_drop(struct gs__green *g, unsigned int i)
{
	(void)g->sdestroy(g->str[i].s);
	g->str[i] = g->str[--g->nstr];
}

/* The least recently used entry of ctx (want_ctx) or str not used in
 * this round; -1 if every one is. */
static int
lru(struct gs__green *g, int want_ctx, uint64_t round)
{
	unsigned int i, n = want_ctx ? g->nctx : g->nstr;
	int best = -1;
	uint64_t r, br = 0;

	for (i = 0; i < n; i++) {
		r = want_ctx ? g->ctx[i].round : g->str[i].round;
		if (r != round && (best < 0 || r < br)) {
			best = (int)i;
			br = r;
		}
	}
	return best;
}

static int
entry(const char *name, void **fn, char *err, size_t n)
{
	enum cudaDriverEntryPointQueryResult q;
	cudaError_t e;

	*fn = NULL;
	/* the version this was built against: the green stream call came
	 * after the first green-context ones */
	e = cudaGetDriverEntryPointByVersion(name, fn, CUDA_VERSION,
					     cudaEnableDefault, &q);
	if (e != cudaSuccess || q != cudaDriverEntryPointSuccess ||
	    *fn == NULL) {
		snprintf(err, n, "the driver has no %s at CUDA %d.%d (green "
			 "contexts need 12.5 or newer)", name,
			 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
		return -1;
	}
	return 0;
}

struct gs__green *
gs__green_init(int device, char *err, size_t n)
{
	struct gs__green *g = calloc(1, sizeof(*g));
	CUdevResource all;
	devget_fn devget;
	unsigned int ng = GS__GREEN_MAXG;
	CUresult r;

	if (g == NULL) {
		snprintf(err, n, "out of memory");
		return NULL;
	}
	if (entry("cuDeviceGet", (void **)&devget, err, n) < 0 ||
	    entry("cuDeviceGetDevResource", (void **)&g->get_res, err, n) < 0 ||
	    entry("cuDevSmResourceSplitByCount", (void **)&g->split, err,
		  n) < 0 ||
	    entry("cuDevResourceGenerateDesc", (void **)&g->gendesc, err,
		  n) < 0 ||
	    entry("cuGreenCtxCreate", (void **)&g->gcreate, err, n) < 0 ||
	    entry("cuGreenCtxDestroy", (void **)&g->gdestroy, err, n) < 0 ||
	    entry("cuGreenCtxStreamCreate", (void **)&g->gstream, err, n) < 0 ||
	    entry("cuStreamDestroy", (void **)&g->sdestroy, err, n) < 0)
		goto fail;
	if ((r = devget(&g->dev, device)) != CUDA_SUCCESS ||
	    (r = g->get_res(g->dev, &all, CU_DEV_RESOURCE_TYPE_SM)) !=
	    CUDA_SUCCESS) {
		snprintf(err, n, "cuDeviceGetDevResource: error %d", (int)r);
		goto fail;
	}
	/* the smallest groups the GPU allows (8 SMs on sm_90) */
	g->gsize = all.sm.minSmPartitionSize ? all.sm.minSmPartitionSize : 8;
	r = g->split(g->grp, &ng, &all, &g->left, 0, g->gsize);
	if (r != CUDA_SUCCESS || ng == 0) {
		snprintf(err, n, "cuDevSmResourceSplitByCount: error %d",
			 (int)r);
		goto fail;
	}
	g->ngroups = ng;
	g->gsize = g->grp[0].sm.smCount;
	g->nleft = g->left.sm.smCount;
	return g;
fail:
	free(g);
	return NULL;
}

static CUgreenCtx
green_ctx(struct gs__green *g, unsigned int g0, unsigned int ng, int wl,
	  uint64_t round, unsigned int *nsm, char *err, size_t n)
{
	unsigned int key = g0 << 16 | ng << 1 | (unsigned int)wl, i, k = 0;
	int v;
	CUdevResource res[GS__GREEN_MAXG + 1];
	CUdevResourceDesc desc;
	CUgreenCtx c;
	CUresult r;

	for (i = 0; i < g->nctx; i++)
		if (g->ctx[i].key == key) {
			g->ctx[i].round = round;
			*nsm = g->ctx[i].nsm;
			return g->ctx[i].ctx;
		}
	if (g->nctx == GS__GREEN_NCTX) {
		/* the least recently used partition goes, with its streams
		 * (not one of this round: their kernels may be running) */
		if ((v = lru(g, 1, round)) < 0) {
			snprintf(err, n, "%d partitions in one round",
				 GS__GREEN_NCTX);
			return NULL;
		}
		for (i = g->nstr; i-- > 0;)
			if (g->str[i].key == g->ctx[v].key)
				str_drop(g, i);
		(void)g->gdestroy(g->ctx[v].ctx);
		g->ctx[v] = g->ctx[--g->nctx];
	}
	*nsm = 0;
	for (i = 0; i < ng; i++) {
		res[k++] = g->grp[g0 + i];
		*nsm += g->grp[g0 + i].sm.smCount;
	}
	if (wl) {
		res[k++] = g->left;
		*nsm += g->nleft;
	}
	r = g->gendesc(&desc, res, k);
	if (r == CUDA_SUCCESS)
		r = g->gcreate(&c, desc, g->dev, CU_GREEN_CTX_DEFAULT_STREAM);
	if (r != CUDA_SUCCESS) {
		snprintf(err, n, "green context for SM groups %u..%u%s: error "
			 "%d", g0, g0 + ng, wl ? " and the rest" : "", (int)r);
		return NULL;
	}
	g->ctx[g->nctx].key = key;
	g->ctx[g->nctx].round = round;
	g->ctx[g->nctx].nsm = *nsm;
	g->ctx[g->nctx].ctx = c;
	g->nctx++;
	return c;
}

cudaStream_t
gs__green_stream(struct gs__green *g, unsigned int range, unsigned int sms,
		 cudaStream_t user, uint64_t round, unsigned int *nsm,
		 char *err, size_t n)
{
	unsigned int first = range >> 16, count = range & 0xffffu;
	unsigned int g0, ng, key, i;
	CUgreenCtx c;
	CUstream s;
	CUresult r;
	int wl, v;

	if (range == 0) {
		first = 0;
		count = sms;
	}
	if (gs__green_groups(first, count, sms, g->ngroups, g->gsize,
			     g->nleft, &g0, &ng, &wl) < 0) {
		snprintf(err, n, "SMs %u..%u hold no whole SM group of %u",
			 first, first + count, g->gsize);
		return NULL;
	}
	key = g0 << 16 | ng << 1 | (unsigned int)wl;
	if ((c = green_ctx(g, g0, ng, wl, round, nsm, err, n)) == NULL)
		return NULL;
	for (i = 0; i < g->nstr; i++)
		if (g->str[i].key == key && g->str[i].user == user) {
			g->str[i].round = round;
			return (cudaStream_t)g->str[i].s;
		}
	if (g->nstr == GS__GREEN_NSTR) {
		if ((v = lru(g, 0, round)) < 0) {
			snprintf(err, n, "%d streams in one round",
				 GS__GREEN_NSTR);
			return NULL;
		}
		str_drop(g, (unsigned int)v);
	}
	r = g->gstream(&s, c, CU_STREAM_NON_BLOCKING, 0);
	if (r != CUDA_SUCCESS) {
		snprintf(err, n, "green stream: error %d", (int)r);
		return NULL;
	}
	i = g->nstr++;
	g->str[i].key = key;
	g->str[i].user = user;
	g->str[i].round = round;
	g->str[i].s = s;
	return (cudaStream_t)s;
}

void
gs__green_free(struct gs__green *g)
{
	unsigned int i;

	if (g == NULL)
		return;
	for (i = 0; i < g->nstr; i++)
		(void)g->sdestroy(g->str[i].s);
	for (i = 0; i < g->nctx; i++)
		(void)g->gdestroy(g->ctx[i].ctx);
	free(g);
}
