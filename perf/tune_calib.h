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

/* The node's last-level cache in bytes, from hwloc: the sum over the instances of the
 * highest cache level. NAN when hwloc cannot tell. */
double tune_llc_bytes(void);

/* Per-buffer size of the out-of-cache figures: max(64 MiB, the cache), at most 1 GiB
 * (a copy streams two such buffers, a reduction three). */
size_t tune_out_of_cache_bytes(double cache_bytes);

#endif
