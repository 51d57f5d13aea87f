/*
 * gs_green.h — space mode's SM partitions as green contexts.
 *
 * A green context is made of a subset of the GPU's SMs (the driver's
 * SM resource split into groups; 8 SMs per group on sm_90) and shares
 * the primary context's memory; work put on one of its streams runs on
 * those SMs only, also beside other processes under one MPS daemon.
 * libgshare launches a round of a space job's persistent kernels on a
 * stream of the green context that covers its partition (an SM range
 * from the agent), so a partition is resized at the next relaunch.
 *
 * The driver's entry points are looked up through the runtime
 * (cudaGetDriverEntryPointByVersion): no link against libcuda, and a
 * driver without green contexts (before CUDA 12.4) only makes
 * gs__green_init fail, so that the caller keeps partitions another way.
 */
#ifndef GS_GREEN_H
#define GS_GREEN_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

struct gs__green;

/* For `device` (a runtime ordinal, its primary context current): split
 * its SMs into groups.  Returns NULL (and a message in err, size n) when
 * the driver cannot. */
struct gs__green *gs__green_init(int device, char *err, size_t n);

/* A stream that runs on the SMs of partition `range` (first << 16 |
 * count of SMs, 0: all; as from gs__partition) out of `sms`, for work
 * of the application's stream `user` (one green stream per partition and
 * user stream, so that streams keep their concurrency).  Created on
 * first use and kept; when too many partitions were seen, the least
 * recently used that `round` (the caller's relaunch count: its kernels
 * may still run) does not use goes.  *nsm: the SMs it really holds
 * (groups are whole).  NULL on failure (message in err). */
cudaStream_t gs__green_stream(struct gs__green *g, unsigned int range,
			      unsigned int sms, cudaStream_t user,
			      uint64_t round, unsigned int *nsm, char *err,
			      size_t n);

/* Which of the driver's SM groups make a partition: gs__green_groups in
 * gs_rtlogic.h (pure, tested without a GPU). */

void gs__green_free(struct gs__green *g);

#endif /* GS_GREEN_H */
