/*
 * gs_smmap.h — the present %smid values of the GPU (gs_smmap.cu),
 * callable from C.
 *
 * %smid numbering is not guaranteed contiguous (PTX ISA): a GPU with
 * some SMs disabled may number its SMs with gaps and past the SM count.
 * Space mode's partitions are ranges of SM *ranks* (the r-th present
 * smid); this probe builds the rank table once per process.
 */
#ifndef GS_SMMAP_H
#define GS_SMMAP_H

#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launches short blocks on stream s (blocks × 32 threads, each stays
 * ~20 us so that the grid spreads over every SM) until `want` distinct
 * smids were seen or `tries` launches were made.  Fills smid[0..) with
 * the smids seen, ascending (at most max), *nsmid with %nsmid; *n with
 * how many were seen.  Returns a cudaError_t (0: ran). */
int gs__smid_probe(cudaStream_t s, unsigned int want, unsigned int tries,
		   uint16_t *smid, unsigned int max, unsigned int *n,
		   unsigned int *nsmid);

#ifdef __cplusplus
}
#endif

#endif /* GS_SMMAP_H */
