/*
 * Where fold_tune's calibration finds memory (perf/tune_calib.c): the ladder of copies
 * stops once a doubling no longer slows the copy, never below 64 MiB, and bounds the
 * cache hwloc reports by what the copies show. The rates below are the shapes seen:
 * an EPYC VM with 32 MB of L3 per core that hwloc reported as 508 MB, and a cache
 * larger than 64 MiB.
 */
#define _GNU_SOURCE   /* process_vm_readv */
#include <criterion/criterion.h>

#include "tune_calib.h"

#include <math.h>
#include <sys/uio.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static tune_ladder_t ladder(const double *gbs, int n)
{
    tune_ladder_t l = {.n = n};
    for (int i = 0; i < n; i++) {
        l.bytes[i] = (4 * MiB) << i;
        l.gbs[i]   = gbs[i];
    }
    return l;
}

Test(tune_calib, the_vm_reaches_memory_at_64_mib_and_caches_at_most_32_mib_per_l3)
{
    const double gbs[] = {39, 33, 25, 16, 15};
    for (int n = 1; n < 5; n++) {
        tune_ladder_t l = ladder(gbs, n);
        cr_expect_not(tune_ladder_done(&l, 1024 * MiB), "stopped after %d rungs", n);
    }
    tune_ladder_t l = ladder(gbs, 5);
    cr_expect(tune_ladder_done(&l, 1024 * MiB));
    /* 16 MiB still ran at 25 GB/s (>= 1.25 x 15): 32 MiB's two buffers did not fit */
    cr_expect_float_eq(tune_ladder_cache_bytes(&l), 64.0 * MiB, 1e-9);
}

/* 4 MiB .. 128 MiB all alike: a cache that holds them all, or memory as fast as the
 * cache; either way not a drop to memory, so on to the limit. */
Test(tune_calib, a_plateau_without_a_drop_is_not_memory)
{
    const double gbs[] = {40, 40, 40, 40, 40, 40};
    tune_ladder_t l = ladder(gbs, 6);
    cr_expect_not(tune_ladder_done(&l, 1024 * MiB));
    cr_expect(tune_ladder_done(&l, 128 * MiB));
}

Test(tune_calib, a_cache_past_64_mib_climbs_on)
{
    const double gbs[] = {40, 40, 40, 40, 38, 20, 15, 15};
    for (int n = 5; n < 8; n++) {
        tune_ladder_t l = ladder(gbs, n);
        cr_expect_not(tune_ladder_done(&l, 1024 * MiB), "stopped after %d rungs", n);
    }
    tune_ladder_t l = ladder(gbs, 8);   /* 512 MiB no slower than 256 */
    cr_expect(tune_ladder_done(&l, 1024 * MiB));
    cr_expect_float_eq(tune_ladder_cache_bytes(&l), 512.0 * MiB, 1e-9);
}

Test(tune_calib, the_limit_stops_the_ladder)
{
    const double gbs[] = {40, 30, 20};
    tune_ladder_t l = ladder(gbs, 3);
    cr_expect(tune_ladder_done(&l, 16 * MiB));
    cr_expect_not(tune_ladder_done(&l, 32 * MiB));
}

Test(tune_calib, slow_from_the_first_rung_bounds_the_cache_by_it)
{
    const double gbs[] = {15, 15, 15, 15, 15};
    tune_ladder_t l = ladder(gbs, 5);
    cr_expect(tune_ladder_done(&l, 64 * MiB));
    cr_expect_float_eq(tune_ladder_cache_bytes(&l), 8.0 * MiB, 1e-9);
}

/* The measuring loop itself, cut short by a small limit: rungs double up to it. */
Test(tune_calib, the_measured_ladder_doubles_up_to_the_limit)
{
    tune_ladder_t l;
    tune_measure_ladder(10 * MiB, &l);
    cr_assert_eq(l.n, 3);
    cr_expect_eq(l.bytes[0], 4 * MiB);
    cr_expect_eq(l.bytes[1], 8 * MiB);
    cr_expect_eq(l.bytes[2], 10 * MiB);
    for (int i = 0; i < l.n; i++) {
        cr_expect(isfinite(l.gbs[i]) && l.gbs[i] > 0, "rung %d: %g GB/s", i, l.gbs[i]);
    }
}

/* Whether this process may read itself through the kernel (a container may forbid it). */
static int kernel_reads_allowed(void)
{
    char src[64] = "x", dst[64];
    struct iovec local = {dst, sizeof(dst)}, remote = {src, sizeof(src)};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof(src);
}

Test(tune_calib, the_kernel_rate_is_measured_where_single_copy_works)
{
    double gbs = tune_measure_kernel(3 * MiB + 4096);   /* a last call shorter than 1 MiB */
    if (kernel_reads_allowed()) {
        cr_expect(isfinite(gbs) && gbs > 0.01 && gbs < 1000, "%g GB/s", gbs);
    } else {
        cr_expect(isnan(gbs), "refused, yet %g GB/s", gbs);
    }
    cr_expect(isnan(tune_measure_kernel(0)));
}
