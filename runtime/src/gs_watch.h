/*
 * gs_watch.h — the watcher warp (gs_watch.cu), callable from C.
 *
 * One warp on its own high-priority stream reads the host-mapped suspend
 * word of the control page every `ns` nanoseconds and, when it reads
 * GS_CTL_SUSPEND, raises the device flag to `gen` (atomicMax, so a late
 * watcher of an older generation can never lower it) and writes its
 * %globaltimer into *wtime (host-mapped, for the latency breakdown).  It
 * leaves when
 * *quit >= gen.  gs__gtimer_probe reads the same clock once, so that
 * GSHARE_TRACE can put device times on the host's clock.  Only this warp touches host memory in the polling path;
 * the persistent blocks read the device flag.
 */
#ifndef GS_WATCH_H
#define GS_WATCH_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns a cudaError_t (0: launched). */
int gs__watch_launch(cudaStream_t s, const volatile unsigned int *suspend,
		     const volatile unsigned int *quit, unsigned int *flag,
		     unsigned int gen, unsigned int ns,
		     volatile unsigned long long *wtime);

/* Launch one thread that writes %globaltimer into host-mapped *out (the
 * device view of it).  Returns a cudaError_t. */
int gs__gtimer_probe(cudaStream_t s, volatile unsigned long long *out);

#ifdef __cplusplus
}
#endif

#endif /* GS_WATCH_H */
