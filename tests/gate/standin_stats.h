/* standin_stats.h — what the stand-in libcuda.so.1 saw (tests only). */
#ifndef STANDIN_STATS_H
#define STANDIN_STATS_H

#include <stdint.h>

struct gs_standin_stats {
	uint64_t kernels, copies, graphs;	/* work run */
	uint64_t kernel_ns;			/* simulated kernel time */
	uint64_t event_records;			/* anyone's (the gate's too) */
	uint64_t captured;			/* work recorded into captures */
	uint64_t capture_broken;		/* captures the gate would break */
	uint64_t max_queued_ns;			/* longest wait of submitted
						 * work before it started */
	uint64_t proc_lookups;			/* cuGetProcAddress calls */
	uint64_t dev1_work;			/* work on device 1 */
};

typedef void (*gs_standin_stats_fn)(struct gs_standin_stats *);

#endif /* STANDIN_STATS_H */
