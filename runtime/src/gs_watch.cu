/*
 * gs_watch.cu — the watcher warp: copies the control page's suspend word
 * (host memory, read over PCIe) into a device flag that the persistent
 * blocks read at every block-task boundary.  See gs_watch.h.
 */
#include "gs_watch.h"

#define GS_CTL_SUSPEND_WORD 1u

static __global__ void
gs__watch_k(const volatile unsigned int *suspend,
	    const volatile unsigned int *quit, unsigned int *flag,
	    unsigned int gen, unsigned int ns,
	    volatile unsigned long long *wtime)
{
	if (threadIdx.x != 0)
		return;
	for (;;) {
		if (*suspend == GS_CTL_SUSPEND_WORD) {
			unsigned long long t;

			atomicMax(flag, gen);
			__threadfence();
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
			*wtime = t;
			__threadfence_system();
			return;
		}
		if (*quit >= gen)
			return;
		if (ns)
			__nanosleep(ns);
	}
}

/* One thread: %globaltimer into host-mapped *out (the trace's clock
 * offset, gshare.c). */
static __global__ void
gs__gtimer_k(volatile unsigned long long *out)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	*out = t;
	__threadfence_system();
}

extern "C" __attribute__((visibility("hidden"))) int
gs__gtimer_probe(cudaStream_t s, volatile unsigned long long *out)
{
	gs__gtimer_k<<<1, 1, 0, s>>>(out);
	return (int)cudaGetLastError();
}

extern "C" __attribute__((visibility("hidden"))) int
gs__watch_launch(cudaStream_t s, const volatile unsigned int *suspend,
		 const volatile unsigned int *quit, unsigned int *flag,
		 unsigned int gen, unsigned int ns,
		 volatile unsigned long long *wtime)
{
	gs__watch_k<<<1, 32, 0, s>>>(suspend, quit, flag, gen, ns, wtime);
	return (int)cudaGetLastError();
}
