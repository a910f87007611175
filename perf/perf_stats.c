#include "perf_stats.h"
#include "util/clock.h"

#include <math.h>
#include <stdlib.h>

double perf_now_us(void)
{
    return fold_util_time_now() * 1e6;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void perf_latency_summarize(double *samples_us, size_t n, perf_latency_t *out)
{
    qsort(samples_us, n, sizeof(double), compare_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += samples_us[i];
    }
    out->avg_us    = sum / (double)n;
    out->min_us    = samples_us[0];
    out->max_us    = samples_us[n - 1];
    out->median_us = n % 2 ? samples_us[n / 2]
                           : 0.5 * (samples_us[n / 2 - 1] + samples_us[n / 2]);
    size_t rank99 = (size_t)ceil(0.99 * (double)n);
    out->p99_us = samples_us[(rank99 == 0 ? 1 : rank99) - 1];
}

double perf_algbw_gbs(size_t bytes, double us)
{
    return us > 0 ? (double)bytes / us * 1e-3 : 0.0;
}

double perf_busbw_factor(perf_coll_t coll, int ranks)
{
    if (coll == PERF_COLL_ALLREDUCE) {
        return ranks > 0 ? 2.0 * (double)(ranks - 1) / (double)ranks : 0.0;
    }
    return 1.0;
}

long perf_iterations_for(const perf_options_t *opts, size_t bytes)
{
    if (opts->iter_bytes == 0 || bytes == 0) {
        return opts->iters;
    }
    long floor_iters = opts->iters < 10 ? opts->iters : 10;
    size_t scaled = opts->iter_bytes / bytes;
    if (scaled < (size_t)floor_iters) {
        return floor_iters;
    }
    return scaled > (size_t)opts->iters ? opts->iters : (long)scaled;
}

long perf_warmups_for(const perf_options_t *opts, long iterations)
{
    if (opts->iter_bytes == 0) {
        return opts->warmup;
    }
    long scaled = iterations / 5 < 1 ? 1 : iterations / 5;
    return scaled < opts->warmup ? scaled : opts->warmup;
}
