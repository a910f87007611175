/*
 * One core's copy and reduction rates, in and out of cache, and the node's last-level
 * cache: the cost-model parameters a rank can measure by itself.
 */
#ifndef FOLD_TUNE_CALIB_H
#define FOLD_TUNE_CALIB_H

#include <stddef.h>

/* The working set of the in-cache figures, per buffer. */
#define TUNE_IN_CACHE_BYTES ((size_t)256 << 10)

/* memcpy of `bytes`, best of several timings: bytes copied per ns (GB/s). NAN when
 * the buffers cannot be allocated. */
double tune_measure_copy(size_t bytes);

/* fold's float32 sum kernel c = a + b over `bytes` of c, one thread, best of several
 * timings: bytes of c per ns. NAN when the buffers cannot be allocated. */
double tune_measure_reduce(size_t bytes);

/* process_vm_readv of this process's own memory, 1 MiB per call, streaming over
 * `bytes` (out of cache: the kernel's page walks slow with the footprint as well as
 * the data), best of several passes after an untimed first: GB/s. NAN where the
 * kernel refuses or the buffers cannot be allocated. */
double tune_measure_kernel(size_t bytes);

/* The node's last-level cache in bytes, from hwloc: the sum over the instances of the
 * highest cache level, and how many there are (*instances, may be NULL). NAN when
 * hwloc cannot tell. */
double tune_llc_bytes(int *instances);

/* The largest per-buffer size the out-of-cache figures may use: max(64 MiB, the
 * cache), at most 1 GiB (a copy streams two such buffers, a reduction three). */
size_t tune_out_of_cache_bytes(double cache_bytes);

/* Where memory starts, measured rather than taken from hwloc (a VM may report any
 * cache: 508 MB of L3 per vCPU was seen, which made every out-of-cache buffer 1 GiB):
 * memcpy rates at 4 MiB, 8 MiB, ... per buffer, doubling until memory is reached. */
#define TUNE_LADDER_FIRST ((size_t)4 << 20)
#define TUNE_LADDER_MIN   ((size_t)64 << 20)   /* memory is never declared below it */
#define TUNE_LADDER_MAX   16

typedef struct tune_ladder {
    size_t bytes[TUNE_LADDER_MAX];
    double gbs[TUNE_LADDER_MAX];
    int    n;
} tune_ladder_t;

/* Whether the ladder has reached memory: its last size is the limit, or at least
 * TUNE_LADDER_MIN, copied no more than 10% slower than the size before and at least
 * 20% slower than the fastest rung (a flat top inside a large cache is not memory). */
int tune_ladder_done(const tune_ladder_t *l, size_t limit);

/* One cache instance at most, as the ladder shows it: the footprint (two buffers)
 * of the rung after the last one copied at 1.25x the memory rate (the last rung's)
 * or faster, which no longer fitted; the first rung's where none was fast. */
double tune_ladder_cache_bytes(const tune_ladder_t *l);

/* Measures the ladder up to `limit` per buffer (tune_out_of_cache_bytes). */
void tune_measure_ladder(size_t limit, tune_ladder_t *l);

#endif
