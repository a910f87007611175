/*
 * fold_tune's options (perf/tune_options.c): defaults, --quick and what overrides it,
 * the sizes of a sweep, and the errors a bad line gets.
 */
#include <criterion/criterion.h>

#include "tune_options.h"
#include "tune_sweep.h"

#include <string.h>

static int parse(tune_options_t *o, char *err, size_t errlen, int argc, char **argv)
{
    tune_options_defaults(o);
    return tune_options_parse(o, argc, argv, err, errlen);
}

#define PARSE(o, err, ...)                                                                 \
    ({                                                                                     \
        char *argv_[] = {"fold_tune", __VA_ARGS__};                                        \
        parse(o, err, sizeof(err), (int)(sizeof(argv_) / sizeof(argv_[0])), argv_);        \
    })

Test(tune_options, defaults)
{
    tune_options_t o;
    char err[256] = "";
    char *argv[] = {"fold_tune"};
    cr_assert_eq(parse(&o, err, sizeof(err), 1, argv), 0, "%s", err);
    cr_assert_eq(o.ncolls, 2);
    cr_assert_eq(o.colls[0], PERF_COLL_ALLREDUCE);
    cr_assert_eq(o.colls[1], PERF_COLL_REDUCE);
    cr_assert_eq(o.begin_bytes, 8);
    cr_assert_eq(o.end_bytes, (size_t)64 << 20);
    cr_assert_eq(o.factor, 2);
    cr_assert_float_eq(o.time_per_size, 0.1, 1e-12);
    cr_assert_str_eq(o.output, "fold-tune.conf");
    cr_assert_eq(o.no_mpi, 0);
    cr_assert_eq(o.stale, 0);
    cr_assert_null(o.csv_path);
    size_t sizes[64];
    cr_assert_eq(tune_sweep_sizes(&o, sizes, 64), 24, "8 B .. 64 MiB by 2");
    cr_assert_eq(sizes[23], (size_t)64 << 20);
}

Test(tune_options, quick_and_what_overrides_it)
{
    tune_options_t o;
    char err[256] = "";
    cr_assert_eq(PARSE(&o, err, "--quick"), 0, "%s", err);
    cr_assert_eq(o.begin_bytes, 8);
    cr_assert_eq(o.end_bytes, (size_t)1 << 20);
    cr_assert_eq(o.factor, 8);
    cr_assert_float_eq(o.time_per_size, 0.01, 1e-12);
    cr_assert_eq(o.iters, 100);
    size_t sizes[64];
    cr_assert_eq(tune_sweep_sizes(&o, sizes, 64), 6, "8 B .. 256 KiB by 8");
    /* given options win, before or after --quick */
    cr_assert_eq(PARSE(&o, err, "-e", "4k", "--quick", "--time-per-size=0.5", "-f4"), 0, "%s",
                 err);
    cr_assert_eq(o.end_bytes, 4096);
    cr_assert_eq(o.factor, 4);
    cr_assert_float_eq(o.time_per_size, 0.5, 1e-12);
    cr_assert_eq(o.begin_bytes, 8);
}

Test(tune_options, values)
{
    tune_options_t o;
    char err[256] = "";
    cr_assert_eq(PARSE(&o, err, "-c", "reduce", "-b", "1k", "-e", "1M", "-o", "x.conf",
                       "--no-mpi", "--stale", "--csv", "p.csv"), 0, "%s", err);
    cr_assert_eq(o.ncolls, 1);
    cr_assert_eq(o.colls[0], PERF_COLL_REDUCE);
    cr_assert_eq(o.begin_bytes, 1024);
    cr_assert_str_eq(o.output, "x.conf");
    cr_assert_str_eq(o.csv_path, "p.csv");
    cr_assert_eq(o.no_mpi, 1);
    cr_assert_eq(o.stale, 1);
    /* sizes are whole float32 elements, without repeats */
    cr_assert_eq(PARSE(&o, err, "-b", "6", "-e", "13", "-f", "2"), 0, "%s", err);
    size_t sizes[8];
    cr_assert_eq(tune_sweep_sizes(&o, sizes, 8), 2);
    cr_assert_eq(sizes[0], 4);
    cr_assert_eq(sizes[1], 12);
}

Test(tune_options, errors)
{
    tune_options_t o;
    char err[256];
    cr_assert_neq(PARSE(&o, err, "--nope"), 0);
    cr_assert_str_eq(err, "unknown option '--nope'");
    cr_assert_neq(PARSE(&o, err, "-c", "allreduce,bcast"), 0);
    cr_assert(strstr(err, "expected allreduce, reduce") != NULL, "%s", err);
    cr_assert_neq(PARSE(&o, err, "-b", "2"), 0);
    cr_assert(strstr(err, "at least 4 bytes") != NULL, "%s", err);
    cr_assert_neq(PARSE(&o, err, "-b", "64k", "-e", "4k"), 0);
    cr_assert(strstr(err, "is larger than --end") != NULL, "%s", err);
    cr_assert_neq(PARSE(&o, err, "-f", "1"), 0);
    cr_assert_neq(PARSE(&o, err, "--time-per-size", "-1"), 0);
    cr_assert_neq(PARSE(&o, err, "-o", ""), 0);
    cr_assert_neq(PARSE(&o, err, "--csv"), 0);
    cr_assert(strstr(err, "needs a value") != NULL, "%s", err);
    cr_assert_neq(PARSE(&o, err, "--no-mpi=1"), 0);
    cr_assert_neq(PARSE(&o, err, "extra"), 0);
    /* --help and --version stop before the checks */
    cr_assert_eq(PARSE(&o, err, "-b", "64k", "-e", "4k", "-h"), 0);
    cr_assert_eq(o.help, 1);
    cr_assert_eq(PARSE(&o, err, "-V"), 0);
    cr_assert_eq(o.version, 1);
}
