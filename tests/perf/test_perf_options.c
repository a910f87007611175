/* fold_perf option parsing: every option through the table, both spellings, and the
 * messages for bad input. */
#include "perf_options.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

/* Parses a NULL-terminated list of words after the program name. */
static int parse_words(perf_options_t *o, const char *const *words)
{
    char *argv[64] = {"fold_perf"};
    int argc = 1;
    for (; words[argc - 1] != NULL; argc++) {
        argv[argc] = (char *)words[argc - 1];
    }
    perf_options_defaults(o);
    err[0] = '\0';
    return perf_options_parse(o, argc, argv, err, sizeof(err));
}

#define PARSE(o, ...) parse_words((o), (const char *const[]){__VA_ARGS__, NULL})

static void expect_error(const char *fragment, const char *const *words)
{
    perf_options_t o;
    cr_expect_eq(parse_words(&o, words), -1, "expected a parse error containing '%s'",
                 fragment);
    cr_expect(strstr(err, fragment) != NULL, "error '%s' lacks '%s'", err, fragment);
}

#define EXPECT_ERROR(fragment, ...) \
    expect_error((fragment), (const char *const[]){__VA_ARGS__, NULL})

Test(perf_options, sizes_take_binary_suffixes)
{
    size_t v;
    cr_expect_eq(perf_parse_size("8", &v), 0);
    cr_expect_eq(v, 8);
    cr_expect_eq(perf_parse_size("4k", &v), 0);
    cr_expect_eq(v, 4096);
    cr_expect_eq(perf_parse_size("64M", &v), 0);
    cr_expect_eq(v, (size_t)64 << 20);
    cr_expect_eq(perf_parse_size("1G", &v), 0);
    cr_expect_eq(v, (size_t)1 << 30);
    cr_expect_eq(perf_parse_size("2KiB", &v), 0);
    cr_expect_eq(v, 2048);
    cr_expect_eq(perf_parse_size("3kb", &v), 0);
    cr_expect_eq(v, 3072);
    cr_expect_eq(perf_parse_size("0", &v), 0);
    cr_expect_eq(v, 0);
    const char *bad[] = {"", "k", "-1", "12q", "1.5k", "8 ", "+8", "4kk",
                         "99999999999999999999", "17179869184G"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(perf_parse_size(bad[i], &v), -1, "'%s' should be rejected", bad[i]);
    }
}

Test(perf_options, defaults)
{
    perf_options_t o;
    cr_assert_eq(PARSE(&o, "--check"), 0, "%s", err);
    cr_expect_eq(o.ncolls, 1);
    cr_expect_eq(o.colls[0], PERF_COLL_ALLREDUCE);
    cr_expect_eq(o.begin_bytes, 8);
    cr_expect_eq(o.end_bytes, 1 << 20);
    cr_expect_eq(o.factor, 2);
    cr_expect_eq(o.dtype, FOLD_FLOAT32);
    cr_expect_eq(o.op, FOLD_OP_SUM);
    cr_expect_eq(o.nalgorithms, 1);
    cr_expect_str_eq(o.algorithms[0], "auto");
    cr_expect_eq(o.rotate, 1);
    cr_expect_eq(o.buffers, 0);
    cr_expect_eq(o.fresh, 0);
    cr_expect_eq(o.settle, 0);
    cr_expect_eq(o.batch, 0);
    cr_expect_eq(o.threads, -1);
    cr_expect_eq(o.inject_rank, -1);
    cr_expect_eq(o.check, 1);
    cr_expect_eq(o.compare_mpi, 0);
}

Test(perf_options, every_option)
{
    perf_options_t o;
    int rc = PARSE(&o, "-c", "allreduce,reduce", "-b", "16", "-e", "64M", "-f", "4", "-n", "50",
                   "-w", "3", "--iter-bytes", "1M", "--time-per-size", "0.5", "-d", "int32",
                   "-o", "max", "-r", "1", "-i", "-A", "ring,rabenseifner,auto", "-s", "64k",
                   "-T", "2", "-t", "ucp", "--bootstrap", "pmix", "--sparsity", "0.9",
                   "--distribution", "imbalanced", "--dense-ranks", "2", "--seed", "7",
                   "--rotate", "4", "--fresh", "--check", "--compare", "none", "--csv", "a.csv",
                   "--json", "b.json", "--plot", "c.png", "--probe-size", "0",
                   "--inject-error", "1:17");
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(o.ncolls, 2);
    cr_expect_eq(o.colls[0], PERF_COLL_ALLREDUCE);
    cr_expect_eq(o.colls[1], PERF_COLL_REDUCE);
    cr_expect_eq(o.begin_bytes, 16);
    cr_expect_eq(o.end_bytes, (size_t)64 << 20);
    cr_expect_eq(o.factor, 4);
    cr_expect_eq(o.iters, 50);
    cr_expect_eq(o.warmup, 3);
    cr_expect_eq(o.iter_bytes, 1 << 20);
    cr_expect_float_eq(o.time_per_size, 0.5, 1e-12);
    cr_expect_eq(o.dtype, FOLD_INT32);
    cr_expect_eq(o.op, FOLD_OP_MAX);
    cr_expect_eq(o.root, 1);
    cr_expect_eq(o.inplace, 1);
    cr_expect_eq(o.nalgorithms, 3);
    cr_expect_str_eq(o.algorithms[0], "ring");
    cr_expect_str_eq(o.algorithms[1], "rabenseifner");
    cr_expect_str_eq(o.algorithms[2], "auto");
    cr_expect_str_eq(o.segment_size, "65536");
    cr_expect_eq(o.threads, 2);
    cr_expect_str_eq(o.transport, "ucp");
    cr_expect_eq(o.bootstrap, PERF_BOOTSTRAP_PMIX);
    cr_expect_float_eq(o.sparsity, 0.9, 1e-12);
    cr_expect_eq(o.distribution, PERF_DIST_IMBALANCED);
    cr_expect_eq(o.dense_ranks, 2);
    cr_expect_eq(o.seed, 7);
    cr_expect_eq(o.rotate, 4);
    cr_expect_eq(o.fresh, 1);
    cr_expect_eq(o.check, 1);
    cr_expect_eq(o.compare_mpi, 0);
    cr_expect_str_eq(o.csv_path, "a.csv");
    cr_expect_str_eq(o.json_path, "b.json");
    cr_expect_str_eq(o.plot_path, "c.png");
    cr_expect_eq(o.probe_bytes, 0);
    cr_expect_eq(o.inject_rank, 1);
    cr_expect_eq(o.inject_index, 17);
}

/* --probe-size each: every size probed at its own footprint; a size still sets the
 * start-up probe and leaves the per-size one off. */
Test(perf_options, probe_size_each)
{
    perf_options_t o;
    cr_assert_eq(PARSE(&o, "--probe-size", "each"), 0, "%s", err);
    cr_expect_eq(o.probe_each, 1);
    cr_assert_eq(PARSE(&o, "--probe-size", "16M"), 0, "%s", err);
    cr_expect_eq(o.probe_each, 0);
    cr_expect_eq(o.probe_bytes, (size_t)16 << 20);
    cr_expect_neq(PARSE(&o, "--probe-size", "eachx"), 0);
}

/* --buffers K: K pairs in turn with every call's input written; --settle: the online
 * trials untimed first. */
Test(perf_options, buffers_and_settle)
{
    perf_options_t o;
    cr_assert_eq(PARSE(&o, "--buffers", "4", "--settle", "--check"), 0, "%s", err);
    cr_expect_eq(o.buffers, 4);
    cr_expect_eq(o.rotate, 4);
    cr_expect_eq(o.settle, 1);
    cr_assert_eq(PARSE(&o, "--buffers=1"), 0, "%s", err);
    cr_expect_eq(o.buffers, 1);
    cr_expect_eq(o.rotate, 1);
    cr_expect_eq(o.settle, 0);
    EXPECT_ERROR("bad value '0' for --buffers: expected a number of buffer pairs from 1 to "
                 "1024", "--buffers", "0");
    EXPECT_ERROR("bad value 'x' for --buffers", "--buffers", "x");
    EXPECT_ERROR("bad value '1025' for --buffers", "--buffers", "1025");
    EXPECT_ERROR("option --buffers needs a value (K)", "--buffers");
    EXPECT_ERROR("option --settle takes no value", "--settle=yes");
    EXPECT_ERROR("--buffers and --rotate both give the number of buffer pairs", "--rotate",
                 "2", "--buffers", "4");
    EXPECT_ERROR("it takes neither --batch", "--buffers", "2", "--batch");
    EXPECT_ERROR("nor --fresh", "--buffers", "2", "--fresh");
}

Test(perf_options, batch)
{
    perf_options_t o;
    int rc = PARSE(&o, "--batch", "--compare", "mpi-apart");
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(o.batch, 1);
    cr_expect_eq(o.compare_apart, 1);
}

Test(perf_options, long_equals_and_attached_short_values)
{
    perf_options_t o;
    cr_assert_eq(PARSE(&o, "--begin=1k", "-e2M", "--dtype=float64", "-Aring", "-s", "auto"), 0,
                 "%s", err);
    cr_expect_eq(o.begin_bytes, 1024);
    cr_expect_eq(o.end_bytes, 2 << 20);
    cr_expect_eq(o.dtype, FOLD_FLOAT64);
    cr_expect_str_eq(o.algorithms[0], "ring");
    cr_expect_str_eq(o.segment_size, "auto");
}

Test(perf_options, compare_mpi_follows_the_build)
{
    perf_options_t o;
    int rc = PARSE(&o, "--compare", "mpi");
#ifdef FOLD_PERF_HAVE_MPI
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(o.compare_mpi, 1);
    cr_expect_eq(o.compare_apart, 0);
    rc = PARSE(&o, "--compare", "mpi-apart");
    cr_expect_eq(rc, 0, "%s", err);
    cr_expect_eq(o.compare_mpi, 1);
    cr_expect_eq(o.compare_apart, 1);
#else
    cr_expect_eq(rc, -1);
    cr_expect(strstr(err, "without MPI") != NULL, "%s", err);
#endif
}

Test(perf_options, help_and_version_skip_validation)
{
    perf_options_t o;
    cr_expect_eq(PARSE(&o, "-b", "1M", "-e", "8", "--help"), 0);
    cr_expect_eq(o.help, 1);
    cr_expect_eq(PARSE(&o, "-V"), 0);
    cr_expect_eq(o.version, 1);
}

Test(perf_options, bad_input_is_named)
{
    EXPECT_ERROR("unknown option '--nope'", "--nope");
    EXPECT_ERROR("unknown option '--nope'", "--nope=3");
    EXPECT_ERROR("unknown option '-Z'", "-Z");
    EXPECT_ERROR("unexpected argument 'stray'", "stray");
    EXPECT_ERROR("option -b/--begin needs a value (SIZE)", "-b");
    EXPECT_ERROR("bad value '12q' for -e/--end", "-e", "12q");
    EXPECT_ERROR("k, M or G suffix", "--begin", "x");
    EXPECT_ERROR("bad value '1' for -f/--factor", "-f", "1");
    EXPECT_ERROR("bad value '0' for -n/--iters", "-n", "0");
    EXPECT_ERROR("bad value '-1' for -w/--warmup", "-w", "-1");
    EXPECT_ERROR("bad value 'float128' for -d/--dtype", "-d", "float128");
    EXPECT_ERROR("bad value 'avg' for -o/--op", "-o", "avg");
    EXPECT_ERROR("bad value '-2' for -r/--root", "-r", "-2");
    EXPECT_ERROR("bad value 'bcast' for -c/--collective", "-c", "bcast");
    EXPECT_ERROR("listed twice", "-c", "reduce,reduce");
    EXPECT_ERROR("empty", "-c", "allreduce,");
    EXPECT_ERROR("not an algorithm name", "-A", "Ring!");
    EXPECT_ERROR("listed twice", "-A", "ring,ring");
    EXPECT_ERROR("bad value '0' for -s/--segment-size", "-s", "0");
    EXPECT_ERROR("bad value 'many' for -T/--threads", "-T", "many");
    EXPECT_ERROR("bad value 'mpi' for --bootstrap", "--bootstrap", "mpi");
    EXPECT_ERROR("bad value '1' for --sparsity", "--sparsity", "1");
    EXPECT_ERROR("bad value '-0.1' for --sparsity", "--sparsity", "-0.1");
    EXPECT_ERROR("bad value 'skewed' for --distribution", "--distribution", "skewed");
    EXPECT_ERROR("bad value '0' for --rotate", "--rotate", "0");
    EXPECT_ERROR("bad value 'nccl' for --compare", "--compare", "nccl");
    EXPECT_ERROR("bad value 'x:1' for --inject-error", "--check", "--inject-error", "x:1");
    EXPECT_ERROR("bad value '1:' for --inject-error", "--check", "--inject-error", "1:");
    EXPECT_ERROR("bad value '-1' for --time-per-size", "--time-per-size", "-1");
    EXPECT_ERROR("option --check takes no value", "--check=yes");
    EXPECT_ERROR("option -i takes no value", "-ix");
}

Test(perf_options, inconsistent_options_are_named)
{
    EXPECT_ERROR("--begin (2048 bytes) is larger than --end (1024 bytes)", "-b", "2k", "-e",
                 "1k");
    EXPECT_ERROR("--begin must be at least 1 byte", "-b", "0");
    EXPECT_ERROR("smaller than one float64 element", "-b", "1", "-e", "4", "-d", "float64");
    EXPECT_ERROR("--op bxor takes integer datatypes only", "-o", "bxor", "-d", "float32");
    EXPECT_ERROR("--op maxloc takes the pair datatypes only", "-o", "maxloc", "-d", "int32");
    EXPECT_ERROR("--op sum does not take the pair datatypes", "-d", "double_int");
    EXPECT_ERROR("--op min does not take complex datatypes", "-o", "min", "-d",
                 "complex_float64");
    EXPECT_ERROR("--op bor takes integer datatypes only", "-o", "bor", "-d", "2int");
    EXPECT_ERROR("--inject-error needs --check", "--inject-error", "1");
    EXPECT_ERROR("--batch times calls back to back", "--batch", "--fresh");
    EXPECT_ERROR("--dense-ranks needs --distribution imbalanced", "--dense-ranks", "2");
    EXPECT_ERROR("--csv needs a file name", "--csv", "");
}

/* The usage is generated from the table: every option appears, with its argument. */
Test(perf_options, usage_lists_every_option)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    perf_options_print_help(out);
    fclose(out);
    const char *expected[] = {
        "-c, --collective LIST", "-b, --begin SIZE", "-e, --end SIZE", "-f, --factor N",
        "-n, --iters N", "-w, --warmup N", "--iter-bytes SIZE", "--time-per-size SEC",
        "-d, --dtype NAME", "-o, --op NAME", "-r, --root R", "-i, --inplace",
        "-A, --algorithms LIST", "-s, --segment-size SIZE", "-T, --threads N",
        "-t, --transport NAME", "--bootstrap KIND", "--sparsity F", "--distribution KIND",
        "--dense-ranks K", "--seed N", "--rotate N", "--buffers K", "--fresh", "--settle",
        "--batch", "--check", "--compare KIND", "--csv FILE",
        "--json FILE", "--plot FILE", "--probe-size SIZE", "--inject-error R[:I]",
        "-V, --version", "-h, --help",
        /* the notes --help adds */
        "busbw = algbw * 2 * (n - 1) / n", "busbw = algbw  ", "2 * bytes * p_local",
        "slowest rank decides an iteration", "speedup = mpi_median_us / median_us",
        "First calls (first_us, worst2-10_us)", "mpi_first_us and mpi_worst2-10_us",
        "Exit status"};
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        cr_expect(strstr(text, expected[i]) != NULL, "help lacks '%s'", expected[i]);
    }
    free(text);
}
