/*
 * fold_perf options: one table (name, short name, argument, help, handler) drives the
 * parser, the usage shown on errors and --help. A handler only converts and stores its
 * value; checks that involve several options run once after the whole line is read.
 */
#include "perf_options.h"
#include "cli_options.h"
#include "util/size.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef int (*perf_option_handler_t)(perf_options_t *opts, const char *arg, char *why,
                                     size_t whylen);

typedef struct perf_option {
    cli_option_t           cli;   /* first: the engine sees only this */
    perf_option_handler_t handler;
} perf_option_t;

/* ---- value converters ------------------------------------------------------- */

/* A benchmark cannot run "inf" bytes: util's syntax, finite sizes only. */
int perf_parse_size(const char *text, size_t *bytes)
{
    size_t v;
    if (fold_util_parse_size(text, &v) != 0 || v == SIZE_MAX) {
        return -1;
    }
    *bytes = v;
    return 0;
}

static int parse_long(const char *text, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Splits a comma-separated list; calls add() for each item (none may be empty). */
static int for_each_item(const char *list, perf_options_t *opts, char *why, size_t whylen,
                         int (*add)(perf_options_t *, const char *, char *, size_t))
{
    char item[PERF_NAME_LEN];
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(item)) {
            snprintf(why, whylen, "expected a comma-separated list without empty or over-long "
                     "items");
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (add(opts, item, why, whylen) != 0) {
            return -1;
        }
        p += len;
        if (*p == '\0') {
            return 0;
        }
        p++;
    }
}

/* ---- handlers --------------------------------------------------------------- */

#define SIZE_HINT "expected bytes with an optional k, M or G suffix (binary), e.g. 8, 4k, 64M"

/* The collectives list of -c, as fold_perf and fold_tune take it. */
static int add_collective(perf_options_t *o, const char *item, char *why, size_t whylen)
{
    perf_coll_t coll;
    if (strcmp(item, "allreduce") == 0) {
        coll = PERF_COLL_ALLREDUCE;
    } else if (strcmp(item, "reduce") == 0) {
        coll = PERF_COLL_REDUCE;
    } else {
        snprintf(why, whylen, "expected allreduce, reduce or allreduce,reduce");
        return -1;
    }
    for (int i = 0; i < o->ncolls; i++) {
        if (o->colls[i] == coll) {
            snprintf(why, whylen, "'%s' is listed twice", item);
            return -1;
        }
    }
    o->colls[o->ncolls++] = coll;
    return 0;
}

int perf_parse_collectives(const char *arg, perf_coll_t colls[PERF_COLL_COUNT], int *ncolls,
                           char *why, size_t whylen)
{
    perf_options_t o;
    o.ncolls = 0;
    if (for_each_item(arg, &o, why, whylen, add_collective) != 0) {
        return -1;
    }
    memcpy(colls, o.colls, sizeof(o.colls));
    *ncolls = o.ncolls;
    return 0;
}

int perf_parse_size_arg(const char *arg, size_t *bytes, char *why, size_t whylen)
{
    if (perf_parse_size(arg, bytes) != 0) {
        snprintf(why, whylen, SIZE_HINT);
        return -1;
    }
    return 0;
}

static int opt_collective(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    return perf_parse_collectives(arg, o->colls, &o->ncolls, why, whylen);
}

static int opt_begin(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    return perf_parse_size_arg(arg, &o->begin_bytes, why, whylen);
}

static int opt_end(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    return perf_parse_size_arg(arg, &o->end_bytes, why, whylen);
}

static int opt_factor(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    long v;
    if (parse_long(arg, 2, 1 << 20, &v) != 0) {
        snprintf(why, whylen, "expected an integer of at least 2");
        return -1;
    }
    o->factor = (size_t)v;
    return 0;
}

static int opt_iters(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (parse_long(arg, 1, 100000000L, &o->iters) != 0) {
        snprintf(why, whylen, "expected a positive integer");
        return -1;
    }
    return 0;
}

static int opt_warmup(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (parse_long(arg, 0, 100000000L, &o->warmup) != 0) {
        snprintf(why, whylen, "expected an integer of at least 0");
        return -1;
    }
    return 0;
}

static int opt_iter_bytes(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (perf_parse_size(arg, &o->iter_bytes) != 0) {
        snprintf(why, whylen, SIZE_HINT);
        return -1;
    }
    return 0;
}

static int opt_time_per_size(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno != 0 || !(v >= 0.0 && v <= 3600.0)) {
        snprintf(why, whylen, "expected seconds from 0 (no limit) to 3600, e.g. 0.5");
        return -1;
    }
    o->time_per_size = v;
    return 0;
}

static int opt_dtype(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (fold_dtype_from_name(arg, &o->dtype) != FOLD_OK) {
        snprintf(why, whylen, "expected int8, int16, int32, int64, uint8, uint16, uint32, "
                 "uint64, float16, bfloat16, float32, float64, float_int, double_int, long_int, "
                 "2int, short_int, complex_float32 or complex_float64");
        return -1;
    }
    return 0;
}

static int opt_op(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (fold_op_from_name(arg, &o->op) != FOLD_OK) {
        snprintf(why, whylen, "expected sum, prod, min, max, band, bor, bxor, land, lor, lxor, "
                 "maxloc or minloc");
        return -1;
    }
    return 0;
}

static int opt_root(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    long v;
    if (parse_long(arg, 0, 1L << 30, &v) != 0) {
        snprintf(why, whylen, "expected a rank number of at least 0");
        return -1;
    }
    o->root = (int)v;
    return 0;
}

static int add_codec(perf_options_t *o, const char *item, char *why, size_t whylen)
{
    static const char *const known[] = {"auto", "none", "bits", "idx", "rle"};
    int ok = 0;
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
        ok |= strcmp(item, known[k]) == 0;
    }
    for (int i = 0; ok && i < o->ncodecs; i++) {
        ok = strcmp(o->codecs[i], item) != 0;
    }
    if (!ok || o->ncodecs == PERF_MAX_CODECS) {
        snprintf(why, whylen, "'%s': expected distinct codecs among auto, none, bits, idx, rle",
                 item);
        return -1;
    }
    snprintf(o->codecs[o->ncodecs++], PERF_NAME_LEN, "%s", item);
    return 0;
}

static int opt_codecs(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    o->ncodecs = 0;
    return for_each_item(arg, o, why, whylen, add_codec);
}

static int opt_inplace(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->inplace = 1;
    return 0;
}

/* "ring", or "shm_flat@32k" with its segment size (fold checks both later). */
static int add_algorithm(perf_options_t *o, const char *item, char *why, size_t whylen)
{
    const char *at = strchr(item, '@');
    for (const char *c = item; *c != '\0' && c != at; c++) {
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_') {
            snprintf(why, whylen, "'%s' is not an algorithm name (fold_info -a lists them)",
                     item);
            return -1;
        }
    }
    if (o->nalgorithms == PERF_MAX_ALGORITHMS) {
        snprintf(why, whylen, "at most %d algorithms", PERF_MAX_ALGORITHMS);
        return -1;
    }
    for (int i = 0; i < o->nalgorithms; i++) {
        if (strcmp(o->algorithms[i], item) == 0) {
            snprintf(why, whylen, "'%s' is listed twice", item);
            return -1;
        }
    }
    snprintf(o->algorithms[o->nalgorithms++], PERF_NAME_LEN, "%s", item);
    return 0;
}

static int opt_algorithms(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    o->nalgorithms = 0;
    return for_each_item(arg, o, why, whylen, add_algorithm);
}

static int opt_segment_size(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    size_t bytes;
    if (strcmp(arg, "auto") == 0) {
        snprintf(o->segment_size, sizeof(o->segment_size), "auto");
        return 0;
    }
    if (perf_parse_size(arg, &bytes) != 0 || bytes == 0) {
        snprintf(why, whylen, "expected auto or a positive size, e.g. 64k");
        return -1;
    }
    snprintf(o->segment_size, sizeof(o->segment_size), "%zu", bytes);
    return 0;
}

static int opt_threads(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (parse_long(arg, 0, 4096, &o->threads) != 0) {
        snprintf(why, whylen, "expected an integer from 0 (fold's default) to 4096");
        return -1;
    }
    return 0;
}

static int opt_transport(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (arg[0] == '\0' || strlen(arg) >= sizeof(o->transport)) {
        snprintf(why, whylen, "expected a transport name, e.g. ucp");
        return -1;
    }
    snprintf(o->transport, sizeof(o->transport), "%s", arg);
    return 0;
}

static int opt_bootstrap(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (strcmp(arg, "pmix") == 0) {
        o->bootstrap = PERF_BOOTSTRAP_PMIX;
    } else if (strcmp(arg, "oob") == 0) {
        o->bootstrap = PERF_BOOTSTRAP_OOB;
    } else {
        snprintf(why, whylen, "expected pmix or oob");
        return -1;
    }
    return 0;
}

static int opt_sparsity(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno != 0 || !(v >= 0.0 && v < 1.0)) {
        snprintf(why, whylen, "expected a fraction of zeros F with 0 <= F < 1, e.g. 0.9");
        return -1;
    }
    o->sparsity = v;
    return 0;
}

static int opt_distribution(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (strcmp(arg, "uniform") == 0) {
        o->distribution = PERF_DIST_UNIFORM;
    } else if (strcmp(arg, "identical") == 0) {
        o->distribution = PERF_DIST_IDENTICAL;
    } else if (strcmp(arg, "imbalanced") == 0) {
        o->distribution = PERF_DIST_IMBALANCED;
    } else {
        snprintf(why, whylen, "expected uniform, identical or imbalanced");
        return -1;
    }
    return 0;
}

static int opt_dense_ranks(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    long v;
    if (parse_long(arg, 1, 1L << 30, &v) != 0) {
        snprintf(why, whylen, "expected a positive number of ranks");
        return -1;
    }
    o->dense_ranks = (int)v;
    return 0;
}

static int opt_seed(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 0);
    if (end == arg || *end != '\0' || errno != 0 || arg[0] == '-') {
        snprintf(why, whylen, "expected a non-negative integer");
        return -1;
    }
    o->seed = (uint64_t)v;
    return 0;
}

static int opt_memory(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (strcmp(arg, "host") != 0 && strcmp(arg, "fold") != 0) {
        snprintf(why, whylen, "expected host or fold");
        return -1;
    }
    o->fold_memory = strcmp(arg, "fold") == 0;
    return 0;
}

static int opt_rotate(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    long v;
    if (parse_long(arg, 1, 1024, &v) != 0) {
        snprintf(why, whylen, "expected a number of buffers from 1 to 1024");
        return -1;
    }
    o->rotate = (int)v;
    return 0;
}

static int opt_buffers(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    long v;
    if (parse_long(arg, 1, 1024, &v) != 0) {
        snprintf(why, whylen, "expected a number of buffer pairs from 1 to 1024");
        return -1;
    }
    o->buffers = (int)v;
    return 0;
}

static int opt_settle(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->settle = 1;
    return 0;
}

static int opt_fresh(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->fresh = 1;
    return 0;
}

static int opt_barrier(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->barrier = 1;
    return 0;
}

static int opt_batch(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->batch = 1;
    return 0;
}

static int opt_check(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->check = 1;
    return 0;
}

static int opt_compare(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    if (strcmp(arg, "mpi") == 0 || strcmp(arg, "mpi-apart") == 0) {
#ifdef FOLD_PERF_HAVE_MPI
        o->compare_mpi   = 1;
        o->compare_apart = strcmp(arg, "mpi-apart") == 0;
#else
        snprintf(why, whylen, "this fold_perf was built without MPI (no MPI found when "
                 "configuring)");
        return -1;
#endif
    } else if (strcmp(arg, "none") == 0) {
        o->compare_mpi = 0;
    } else {
        snprintf(why, whylen, "expected mpi, mpi-apart or none");
        return -1;
    }
    return 0;
}

static int opt_csv(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)why;
    (void)whylen;
    o->csv_path = arg;
    return 0;
}

static int opt_json(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)why;
    (void)whylen;
    o->json_path = arg;
    return 0;
}

static int opt_plot(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)why;
    (void)whylen;
    o->plot_path = arg;
    return 0;
}

static int opt_probe_size(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    o->probe_each = strcmp(arg, "each") == 0;
    if (o->probe_each) {
        return 0;
    }
    if (perf_parse_size(arg, &o->probe_bytes) != 0) {
        snprintf(why, whylen, SIZE_HINT);
        return -1;
    }
    return 0;
}

static int opt_inject_error(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    char *end;
    errno = 0;
    long rank = strtol(arg, &end, 10);
    int ok = isdigit((unsigned char)arg[0]) && errno == 0 && rank <= (1L << 30);
    unsigned long long index = 0;
    if (ok && *end == ':') {
        const char *digits = end + 1;
        ok = isdigit((unsigned char)digits[0]);
        index = strtoull(digits, &end, 10);
    }
    if (!ok || *end != '\0' || errno != 0) {
        snprintf(why, whylen, "expected RANK or RANK:INDEX, e.g. 1 or 0:17");
        return -1;
    }
    o->inject_rank  = (int)rank;
    o->inject_index = (size_t)index;
    return 0;
}

static int opt_version(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->version = 1;
    return 0;
}

static int opt_help(perf_options_t *o, const char *arg, char *why, size_t whylen)
{
    (void)arg;
    (void)why;
    (void)whylen;
    o->help = 1;
    return 0;
}

/* ---- the table -------------------------------------------------------------- */

static const perf_option_t perf_option_table[] = {
    {{"collective", 'c', "LIST", "collectives, comma-separated: allreduce, reduce "
     "(default allreduce)"}, opt_collective},
    {{"begin", 'b', "SIZE", "smallest message in bytes (default 8)"}, opt_begin},
    {{"end", 'e', "SIZE", "largest message in bytes (default 1M)"}, opt_end},
    {{"factor", 'f', "N", "size multiplier from one row to the next (default 2)"}, opt_factor},
    {{"iters", 'n', "N", "timed iterations per size, at most (default 1000); with "
     "--iter-bytes 0 --time-per-size 0 exactly N everywhere"}, opt_iters},
    {{"warmup", 'w', "N", "warm-up iterations per size, at most (default 10), after the "
     "size's first 10 calls (timed: first_us, worst2-10_us) and before its timed iterations"},
     opt_warmup},
    {{"settle", 0, NULL, "untimed calls until fold's online trials settle, before anything is "
     "timed: fold alone runs the size's first call and any in which it still tries rivals "
     "(FOLD_ONLINE), so that every timed call, the first ones too, sees its settled choice "
     "(the rows count them: first_calls) (default: the trials are timed like any other call)"},
     opt_settle},
    {{"iter-bytes", 0, "SIZE", "fewer iterations for large sizes: a size of B bytes runs "
     "clamp(SIZE / B, min(10, N), N) iterations and min(W, max(1, iterations / 5)) warm-ups; "
     "0 always runs N and W (default 256M)"}, opt_iter_bytes},
    {{"time-per-size", 0, "SEC", "fewer iterations where they would take longer: a size's timed "
     "iterations (fold and MPI together) are cut to about SEC seconds, estimated from the "
     "slowest rank's warm-ups, but not below min(10, N); 0: no limit (default 0.2)"},
     opt_time_per_size},
    {{"dtype", 'd', "NAME", "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
     "bfloat16, float32, float64; the pairs float_int, double_int, long_int, 2int, short_int "
     "(maxloc and minloc only); complex_float32, complex_float64 (sum and prod only) (default "
     "float32)"}, opt_dtype},
    {{"op", 'o', "NAME", "sum, prod, min, max, band, bor, bxor, land, lor, lxor, maxloc, minloc "
     "(default sum)"}, opt_op},
    {{"root", 'r', "R", "root rank of reduce (default 0)"}, opt_root},
    {{"inplace", 'i', NULL, "reduce in place (FOLD_IN_PLACE, and MPI_IN_PLACE for MPI)"},
     opt_inplace},
    {{"algorithms", 'A', "LIST", "algorithms to compare, comma-separated names from "
     "fold_info -a, or auto for fold's own choice (each row shows the algorithm it chose, "
     "and @SIZE, the segment it cut the message into, where there were several); NAME@SIZE "
     "fixes the segment (shm_flat@32k); an algorithm that does not implement a collective "
     "is skipped for it (default auto)"},
     opt_algorithms},
    {{"codec", 0, "LIST", "sparse codecs to compare, comma-separated FOLD_CODEC values: auto, "
     "none, bits, idx, rle; each algorithm runs once per codec and its rows show "
     "ALGORITHM+CODEC (default: fold's setting, one run)"}, opt_codecs},
    {{"segment-size", 's', "SIZE", "pipeline segment size in bytes, or auto "
     "(FOLD_SEGMENT_SIZE; default: fold's setting)"}, opt_segment_size},
    {{"threads", 'T', "N", "reduction threads per rank, 0 = cores of the node / ranks on it "
     "(FOLD_NUM_THREADS; default: fold's setting)"}, opt_threads},
    {{"transport", 't', "NAME", "fold transport backend (FOLD_TRANSPORT; default: fold's "
     "setting, ucp)"}, opt_transport},
    {{"bootstrap", 0, "KIND", "pmix: fold_init through PMIx; oob: fold_init with an "
     "out-of-band allgather on MPI_Allgather (default oob when built with MPI, else pmix)"},
     opt_bootstrap},
    {{"sparsity", 0, "F", "fraction of zero elements in each input, 0 <= F < 1 (default 0: "
     "dense)"}, opt_sparsity},
    {{"distribution", 0, "KIND", "where the zeros are: uniform (random positions per rank), "
     "identical (same positions on every rank), imbalanced (a few dense ranks, the rest "
     "uniform sparse) (default uniform)"}, opt_distribution},
    {{"dense-ranks", 0, "K", "imbalanced: how many ranks are dense, spread evenly (default "
     "max(1, ranks / 8))"}, opt_dense_ranks},
    {{"seed", 0, "N", "seed of the input data (default 1)"}, opt_seed},
    {{"rotate", 0, "N", "cycle through N send/receive buffer pairs, so that results are not "
     "cache-hot illusions (default 1)"}, opt_rotate},
    {{"buffers", 0, "K", "K send/receive buffer pairs used in turn, call i on pair i mod K, "
     "as a solver's or a training loop's buckets: each rank writes the input of every call "
     "(fold's and MPI's) before it, untimed, with data other than that pair held at its "
     "last use; --check checks one call on the pair it used (default: one pair, inputs "
     "written once)"}, opt_buffers},
    {{"fresh", 0, NULL, "each rank rewrites its input (same values) before every call, "
     "untimed, as an application that has just computed it: a peer's input is then in its "
     "owner's cache, not still in the reader's from the call before (default: inputs are "
     "written once, as OSU's are)"}, opt_fresh},
    {{"barrier", 0, NULL, "every timed call after a barrier of its own library "
     "(fold_barrier or MPI_Barrier), untimed: a call's latency from a common start, as a "
     "single call sees it (default: calls back to back, where a reduce's non-roots run "
     "ahead into the next call and a pipeline is timed by its period)"}, opt_barrier},
    {{"batch", 0, NULL, "time each library's calls in runs of 100 back-to-back calls (the "
     "libraries take turns run by run), two clock reads a run, and give every call of a run "
     "the run's mean: the rate of a loop of blocking calls, without the clock's ~0.04 us a "
     "call (default: each call timed on its own, in turns of 8)"}, opt_batch},
    {{"memory", 'm', "KIND", "where the send and receive buffers live: host (the heap) or "
     "fold (fold_mem_alloc: the node's other ranks map them, so single copy runs at "
     "memcpy's speed) (default host)"}, opt_memory},
    {{"check", 0, NULL, "check every result against an independently computed reference; a "
     "mismatch fails the run"}, opt_check},
    {{"compare", 0, "KIND", "mpi: time the MPI library's MPI_Allreduce / MPI_Reduce on the same "
     "buffers, in turns of 8 calls with fold; mpi-apart: the same, but per size all of fold's "
     "timed iterations, then all of MPI's, each block after an MPI_Barrier (across "
     "nodes, where one library's bytes still queued in a link would delay the other's "
     "next call); none (default)"}, opt_compare},
    {{"csv", 0, "FILE", "also write the results as CSV"}, opt_csv},
    {{"json", 0, "FILE", "also write the results as JSON"}, opt_json},
    {{"plot", 0, "FILE", "draw latency and bus bandwidth against size per algorithm into a PNG "
     "(needs gnuplot: the program FOLD_PERF_GNUPLOT names, else gnuplot on PATH)"}, opt_plot},
    {{"probe-size", 0, "SIZE", "bytes streamed by the start-up bandwidth probe behind bound_us "
     "(default 64M; 0: no probe and no bound); each: every size from 4 KiB probed before "
     "its calls over its own footprint, so that bound_us holds in the caches too"},
     opt_probe_size},
    {{"inject-error", 0, "R[:I]", "testing: rank R corrupts element I (default 0) of every "
     "result it checks, so that --check must fail"}, opt_inject_error},
    {{"version", 'V', NULL, "print fold's version and exit"}, opt_version},
    {{"help", 'h', NULL, "print this help and exit"}, opt_help},
};

#define PERF_OPTION_COUNT (sizeof(perf_option_table) / sizeof(perf_option_table[0]))

static const char perf_help_notes[] =
    "\n"
    "Sizes are bytes per rank (count * size of the datatype); k, M and G are 2^10, 2^20, 2^30.\n"
    "\n"
    "Latency statistics (avg/min/max/median/p99, microseconds)\n"
    "  Ranks run the iterations back to back, without barriers, and each rank times every\n"
    "  call it makes. After the loop one fold_allreduce(FOLD_OP_MAX) over the float64 vector\n"
    "  of per-iteration times keeps the slowest rank's time of each iteration:\n"
    "  the slowest rank decides an iteration. The statistics are over those maxima;\n"
    "  p99 is the nearest-rank 99th percentile.\n"
    "\n"
    "First calls (first_us, worst2-10_us)\n"
    "  A size's first 10 calls of each library run before its warm-ups, each timed on its\n"
    "  own (under --batch too), fold's before MPI's. first_us is the slowest rank's time of\n"
    "  the first call, worst2-10_us the largest of calls 2 to 10: what an application pays\n"
    "  for connections, page faults and fold's online trials (FOLD_ONLINE), which the\n"
    "  warmed median leaves out. --settle runs fold's trials untimed before them instead.\n"
    "\n"
    "Bandwidth (GB/s = 1e9 bytes/s, from the median; the nccl-tests convention)\n"
    "  algbw = bytes / median time\n"
    "  busbw = algbw * 2 * (n - 1) / n    for allreduce, n = ranks\n"
    "  busbw = algbw                      for reduce (nccl-tests' factor for reduce is 1)\n"
    "\n"
    "Memory-traffic bound (bound_us)\n"
    "  At start-up every rank streams c[i] += a[i] over float32 arrays of --probe-size bytes\n"
    "  in total, all ranks of a node at once, 5 times. A node's bandwidth is the bytes its\n"
    "  ranks moved (12 per element: two reads and one write) over the slowest rank's time,\n"
    "  best of the 5. Whatever the algorithm, the p_local ranks sharing a node must move\n"
    "    allreduce: 2 * bytes * p_local         (read every input, write every output once)\n"
    "    reduce:    bytes * p_local             (read every input)\n"
    "               + bytes on the root's node  (write the output once)\n"
    "  bound_us is that traffic over the node's bandwidth, the largest over nodes. It leaves\n"
    "  the network out, so it is a floor, not a prediction; sizes that stay in the caches\n"
    "  can beat it, since the probe streams from memory. --probe-size each probes every\n"
    "  size from 4 KiB before its calls instead, over its own footprint (that traffic per\n"
    "  rank, in passes of at least 1 MiB): the bound then holds in the caches too, and\n"
    "  where the footprint outgrows them it steps as any streaming loop does.\n"
    "\n"
    "MPI beside fold (--compare mpi; needs a build with MPI and an MPI launcher)\n"
    "  fold and MPI run on the same buffers, taking turns of 8 calls each (which one goes\n"
    "  first alternates), so that drift affects both alike while each library finds the\n"
    "  caches as its own calls left them. mpi_median_us is MPI's median over the same\n"
    "  per-iteration maxima; speedup = mpi_median_us / median_us (above 1: fold is faster).\n"
    "  mpi_first_us and mpi_worst2-10_us are MPI's first calls, timed as fold's are.\n"
    "  Across nodes use --compare mpi-apart: a library whose sends complete before the\n"
    "  bytes reach the receiver leaves them queued in the link, and the other's next call\n"
    "  waits behind them (2 nodes x 1 rank, 1 Gbit/s: fold's 2 MiB reduce measured 23-24\n"
    "  ms interleaved with Open MPI's, 17.6 ms on its own). mpi-apart times all of fold's\n"
    "  iterations of a size, then all of MPI's, each block after an MPI_Barrier.\n"
    "\n"
    "Data and --check\n"
    "  Input element i of rank r is an integer computed from (r, i, --seed) alone, small\n"
    "  enough that every partial result is exact in the datatype (sums stay below 2^8 for\n"
    "  bfloat16, 2^11 for float16, the type's range for integers). Every rank computes the\n"
    "  reference from all ranks' inputs without communicating, and compares bit for bit the\n"
    "  result of one extra call after the timed loop, into an output poisoned beforehand.\n"
    "  Allreduce: every rank checks its result. Reduce: the root checks its result, the\n"
    "  others that their input is intact. A mismatch prints rank, index, expected and\n"
    "  actual value, marks the row FAIL and makes the exit status 1.\n"
    "\n"
    "Exit status: 0 success, 1 a check failed, 2 bad usage, 3 a runtime error.\n"
    "Example: mpirun -n 2 fold_perf -c allreduce,reduce -b 8 -e 64M -A auto,ring --check "
    "--compare mpi\n";

/* ---- parser ----------------------------------------------------------------- */

void perf_options_defaults(perf_options_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->colls[0]      = PERF_COLL_ALLREDUCE;
    opts->ncolls        = 1;
    opts->begin_bytes   = 8;
    opts->end_bytes     = 1 << 20;
    opts->factor        = 2;
    opts->iters         = 1000;
    opts->warmup        = 10;
    opts->iter_bytes    = (size_t)256 << 20;
    opts->time_per_size = 0.2;
    opts->dtype         = FOLD_FLOAT32;
    opts->op            = FOLD_OP_SUM;
    snprintf(opts->algorithms[0], PERF_NAME_LEN, "auto");
    opts->nalgorithms   = 1;
    opts->threads       = -1;
    opts->bootstrap     = PERF_BOOTSTRAP_DEFAULT;
    opts->distribution  = PERF_DIST_UNIFORM;
    opts->seed          = 1;
    opts->rotate        = 1;
    opts->probe_bytes   = (size_t)64 << 20;
    opts->inject_rank   = -1;
}

/* Checks that involve more than one option. */
static int options_validate(const perf_options_t *o, char *err, size_t errlen)
{
    if (o->begin_bytes == 0) {
        snprintf(err, errlen, "--begin must be at least 1 byte");
        return -1;
    }
    if (o->begin_bytes > o->end_bytes) {
        snprintf(err, errlen, "--begin (%zu bytes) is larger than --end (%zu bytes)",
                 o->begin_bytes, o->end_bytes);
        return -1;
    }
    if (o->end_bytes < fold_dtype_size(o->dtype)) {
        snprintf(err, errlen, "--end (%zu bytes) is smaller than one %s element",
                 o->end_bytes, fold_dtype_name(o->dtype));
        return -1;
    }
    int is_pair = o->dtype >= FOLD_FLOAT_INT && o->dtype <= FOLD_SHORT_INT;
    int is_complex = o->dtype == FOLD_COMPLEX_FLOAT32 || o->dtype == FOLD_COMPLEX_FLOAT64;
    int is_integer = o->dtype != FOLD_FLOAT16 && o->dtype != FOLD_BFLOAT16 &&
                     o->dtype != FOLD_FLOAT32 && o->dtype != FOLD_FLOAT64 && !is_pair &&
                     !is_complex;
    int is_bitwise = o->op == FOLD_OP_BAND || o->op == FOLD_OP_BOR || o->op == FOLD_OP_BXOR;
    int is_loc = o->op == FOLD_OP_MAXLOC || o->op == FOLD_OP_MINLOC;
    if (is_bitwise && !is_integer) {
        snprintf(err, errlen, "--op %s takes integer datatypes only, not %s",
                 fold_op_name(o->op), fold_dtype_name(o->dtype));
        return -1;
    }
    if (is_loc != is_pair) {
        snprintf(err, errlen, "--op %s %s, not %s", fold_op_name(o->op),
                 is_loc ? "takes the pair datatypes only (float_int, double_int, long_int, "
                          "2int, short_int)"
                        : "does not take the pair datatypes (maxloc and minloc do)",
                 fold_dtype_name(o->dtype));
        return -1;
    }
    if (is_complex && o->op != FOLD_OP_SUM && o->op != FOLD_OP_PROD) {
        snprintf(err, errlen, "--op %s does not take complex datatypes (sum and prod do), "
                 "not %s", fold_op_name(o->op), fold_dtype_name(o->dtype));
        return -1;
    }
    if (o->batch && o->barrier) {
        snprintf(err, errlen, "--batch times calls back to back: it cannot put a barrier "
                 "between them (--barrier)");
        return -1;
    }
    if (o->batch && o->fresh) {
        snprintf(err, errlen, "--batch times calls back to back: it cannot rewrite the "
                 "inputs between them (--fresh)");
        return -1;
    }
    if (o->buffers > 0 && o->rotate != 1) {
        snprintf(err, errlen, "--buffers and --rotate both give the number of buffer pairs: "
                 "give one");
        return -1;
    }
    if (o->buffers > 0 && (o->batch || o->fresh)) {
        snprintf(err, errlen, "--buffers rewrites every call's input with new data: it takes "
                 "neither --batch (calls back to back) nor --fresh (the same data)");
        return -1;
    }
    if (o->inject_rank >= 0 && !o->check) {
        snprintf(err, errlen, "--inject-error needs --check");
        return -1;
    }
    if (o->dense_ranks > 0 && o->distribution != PERF_DIST_IMBALANCED) {
        snprintf(err, errlen, "--dense-ranks needs --distribution imbalanced");
        return -1;
    }
    if (o->csv_path != NULL && o->csv_path[0] == '\0') {
        snprintf(err, errlen, "--csv needs a file name");
        return -1;
    }
    if (o->json_path != NULL && o->json_path[0] == '\0') {
        snprintf(err, errlen, "--json needs a file name");
        return -1;
    }
    if (o->plot_path != NULL && o->plot_path[0] == '\0') {
        snprintf(err, errlen, "--plot needs a file name");
        return -1;
    }
    return 0;
}

/* The engine's call into this table's typed handlers. */
static int apply(void *opts, const cli_option_t *opt, const char *value, char *why,
                 size_t whylen)
{
    return ((const perf_option_t *)opt)->handler(opts, value, why, whylen);
}

static const cli_table_t perf_cli = {perf_option_table, PERF_OPTION_COUNT,
                                     sizeof(perf_option_table[0]), "fold_perf", apply};

int perf_options_parse(perf_options_t *opts, int argc, char **argv, char *err, size_t errlen)
{
    if (cli_parse(&perf_cli, opts, argc, argv, err, errlen) != 0) {
        return -1;
    }
    if (opts->help || opts->version) {
        return 0;
    }
    if (options_validate(opts, err, errlen) != 0) {
        return -1;
    }
    if (opts->buffers > 0) {
        opts->rotate = opts->buffers;
    }
    return 0;
}

/* ---- usage and help --------------------------------------------------------- */

void perf_options_print_usage(FILE *out)
{
    fprintf(out, "Usage: mpirun -n N fold_perf [options]\n\nOptions:\n");
    cli_print_options(&perf_cli, out, 30, 92);
}

void perf_options_print_help(FILE *out)
{
    fprintf(out, "fold_perf: latency and bandwidth of fold's allreduce and reduce, launched "
                 "by any PMIx launcher\n(mpirun -n N fold_perf ..., srun --mpi=pmix "
                 "fold_perf ...).\n\n");
    perf_options_print_usage(out);
    fputs(perf_help_notes, out);
}

const char *perf_coll_name(perf_coll_t coll)
{
    return coll == PERF_COLL_ALLREDUCE ? "allreduce" : coll == PERF_COLL_REDUCE ? "reduce"
                                                                                : "unknown";
}

const char *perf_distribution_name(perf_distribution_t dist)
{
    switch (dist) {
    case PERF_DIST_UNIFORM: return "uniform";
    case PERF_DIST_IDENTICAL: return "identical";
    case PERF_DIST_IMBALANCED: return "imbalanced";
    }
    return "unknown";
}
