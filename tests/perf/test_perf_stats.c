/* fold_perf statistics, bandwidth conventions and iteration scaling. */
#include "perf_stats.h"

#include <criterion/criterion.h>

Test(perf_stats, summary_of_known_samples)
{
    double s[] = {5, 1, 4, 2, 3};
    perf_latency_t l;
    perf_latency_summarize(s, 5, &l);
    cr_expect_float_eq(l.avg_us, 3.0, 1e-12);
    cr_expect_float_eq(l.min_us, 1.0, 1e-12);
    cr_expect_float_eq(l.max_us, 5.0, 1e-12);
    cr_expect_float_eq(l.median_us, 3.0, 1e-12);
    cr_expect_float_eq(l.p99_us, 5.0, 1e-12);

    double even[] = {4, 1, 3, 2};
    perf_latency_summarize(even, 4, &l);
    cr_expect_float_eq(l.median_us, 2.5, 1e-12, "even count: mean of the middle two");

    /* p99 is the nearest rank: of 1..200 it is the 198th. */
    double many[200];
    for (int i = 0; i < 200; i++) {
        many[i] = 200 - i;
    }
    perf_latency_summarize(many, 200, &l);
    cr_expect_float_eq(l.p99_us, 198.0, 1e-12);

    double one[] = {7};
    perf_latency_summarize(one, 1, &l);
    cr_expect_float_eq(l.p99_us, 7.0, 1e-12);
    cr_expect_float_eq(l.median_us, 7.0, 1e-12);
}

Test(perf_stats, bandwidth_follows_nccl_tests)
{
    cr_expect_float_eq(perf_algbw_gbs(1000000, 1000.0), 1.0, 1e-12, "1 MB in 1 ms is 1 GB/s");
    cr_expect_float_eq(perf_busbw_factor(PERF_COLL_ALLREDUCE, 2), 1.0, 1e-12);
    cr_expect_float_eq(perf_busbw_factor(PERF_COLL_ALLREDUCE, 4), 1.5, 1e-12);
    cr_expect_float_eq(perf_busbw_factor(PERF_COLL_ALLREDUCE, 1), 0.0, 1e-12);
    cr_expect_float_eq(perf_busbw_factor(PERF_COLL_REDUCE, 8), 1.0, 1e-12);
}

Test(perf_stats, fewer_iterations_for_large_sizes)
{
    perf_options_t o;
    perf_options_defaults(&o);   /* 1000 iterations, 10 warm-ups, 256M per size */
    cr_expect_eq(perf_iterations_for(&o, 8), 1000);
    cr_expect_eq(perf_iterations_for(&o, 1 << 20), 256);
    cr_expect_eq(perf_iterations_for(&o, (size_t)64 << 20), 10);
    cr_expect_eq(perf_warmups_for(&o, 1000), 10);
    cr_expect_eq(perf_warmups_for(&o, 10), 2);
    o.iters = 5;
    cr_expect_eq(perf_iterations_for(&o, (size_t)64 << 20), 5, "never more than -n");
    o.iter_bytes = 0;
    o.iters = 300;
    cr_expect_eq(perf_iterations_for(&o, (size_t)64 << 20), 300, "0 turns the scaling off");
    cr_expect_eq(perf_warmups_for(&o, 300), 10);
}
