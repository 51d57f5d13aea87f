/*
 * gs_smmap.cu — the present %smid values of the GPU (contract in
 * gs_smmap.h).
 */
#include "gs_smmap.h"

#define GS__SMID_MAX 1024u	/* smids counted; larger ones are ignored */

static __global__ void gs__smid_k(unsigned int *seen, unsigned int *ns)
{
	unsigned long long t0, t;
	unsigned int s, n;

	if (threadIdx.x != 0)
		return;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
	asm volatile("mov.u32 %0, %%nsmid;" : "=r"(n));
	if (s < GS__SMID_MAX)
		atomicOr(&seen[s >> 5], 1u << (s & 31u));
	atomicMax(ns, n);
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < 20000ull);
}

extern "C" int gs__smid_probe(cudaStream_t s, unsigned int want,
			      unsigned int tries, uint16_t *smid,
			      unsigned int max, unsigned int *n,
			      unsigned int *nsmid)
{
	unsigned int h[GS__SMID_MAX / 32 + 1], *d = NULL, seen = 0, k, i;
	cudaError_t e;

	*n = 0;
	*nsmid = 0;
	e = cudaMalloc((void **)&d, sizeof(h));
	if (e == cudaSuccess)
		e = cudaMemsetAsync(d, 0, sizeof(h), s);
	for (k = 0; e == cudaSuccess && k < tries; k++) {
		gs__smid_k<<<want * 8u, 32, 0, s>>>(d, d + GS__SMID_MAX / 32);
		e = cudaGetLastError();
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(h, d, sizeof(h),
					    cudaMemcpyDeviceToHost, s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
		if (e != cudaSuccess)
			break;
		for (i = 0, seen = 0; i < GS__SMID_MAX / 32; i++)
			seen += (unsigned int)__builtin_popcount(h[i]);
		if (seen >= want)
			break;
	}
	if (d != NULL)
		cudaFree(d);
	if (e != cudaSuccess)
		return (int)e;
	*nsmid = h[GS__SMID_MAX / 32];
	for (i = 0; i < GS__SMID_MAX && *n < max; i++)
		if (h[i >> 5] & (1u << (i & 31u)))
			smid[(*n)++] = (uint16_t)i;
	return 0;
}
