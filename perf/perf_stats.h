/*
 * Timing and statistics: the clock, latency summaries over per-iteration times,
 * and the bandwidth conventions (nccl-tests).
 */
#ifndef FOLD_PERF_STATS_H
#define FOLD_PERF_STATS_H

#include "perf_options.h"

#include <stddef.h>

typedef struct perf_latency {
    double avg_us;
    double min_us;
    double max_us;
    double median_us;
    double p99_us;
} perf_latency_t;

/* fold_util_time_now in microseconds. */
double perf_now_us(void);

/* Summarises n > 0 samples; sorts them in place. p99 is the nearest-rank percentile. */
void perf_latency_summarize(double *samples_us, size_t n, perf_latency_t *out);

/* Algorithm bandwidth in GB/s (1e9 bytes/s) for `bytes` in `us` microseconds. */
double perf_algbw_gbs(size_t bytes, double us);

/* nccl-tests bus bandwidth factor: 2(n-1)/n for allreduce, 1 for reduce. */
double perf_busbw_factor(perf_coll_t coll, int ranks);

/* Iterations and warm-ups for one size (see --iter-bytes). */
long perf_iterations_for(const perf_options_t *opts, size_t bytes);
long perf_warmups_for(const perf_options_t *opts, long iterations);

#endif
