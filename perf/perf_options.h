/*
 * fold_perf command line: the options structure, its defaults, and the parser
 * driven by one table of options (which also generates --help).
 */
#ifndef FOLD_PERF_OPTIONS_H
#define FOLD_PERF_OPTIONS_H

#include <fold/fold.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum perf_coll {
    PERF_COLL_ALLREDUCE,
    PERF_COLL_REDUCE,
    PERF_COLL_COUNT
} perf_coll_t;

/* Where the zeros of a sparse input sit, rank by rank. */
typedef enum perf_distribution {
    PERF_DIST_UNIFORM,    /* independent random positions on every rank */
    PERF_DIST_IDENTICAL,  /* the same positions on every rank */
    PERF_DIST_IMBALANCED  /* a few ranks dense, the rest uniform sparse (Shan, Fig. 15) */
} perf_distribution_t;

typedef enum perf_bootstrap {
    PERF_BOOTSTRAP_DEFAULT, /* oob when built with MPI, else pmix */
    PERF_BOOTSTRAP_PMIX,
    PERF_BOOTSTRAP_OOB
} perf_bootstrap_t;

#define PERF_MAX_ALGORITHMS 16
#define PERF_NAME_LEN       64
#define PERF_MAX_CODECS     5

typedef struct perf_options {
    perf_coll_t colls[PERF_COLL_COUNT];
    int         ncolls;
    size_t      begin_bytes;
    size_t      end_bytes;
    size_t      factor;
    long        iters;          /* most timed iterations per size */
    long        warmup;         /* most warm-up iterations per size */
    size_t      iter_bytes;     /* scales iterations down for large sizes; 0: always iters */
    double      time_per_size;  /* seconds of timed iterations per size, at most; 0: no limit */
    fold_dtype_t dtype;
    fold_op_t   op;
    int         root;
    int         inplace;
    int         fold_memory;    /* --memory fold: buffers from fold_mem_alloc */
    char        algorithms[PERF_MAX_ALGORITHMS][PERF_NAME_LEN];
    int         nalgorithms;
    char        codecs[PERF_MAX_CODECS][PERF_NAME_LEN]; /* FOLD_CODEC values to compare */
    int         ncodecs;                     /* 0 keeps fold's setting */
    char        segment_size[PERF_NAME_LEN]; /* "" keeps fold's setting */
    long        threads;                     /* -1 keeps fold's setting */
    char        transport[PERF_NAME_LEN];    /* "" keeps fold's setting */
    perf_bootstrap_t bootstrap;
    double      sparsity;
    perf_distribution_t distribution;
    int         dense_ranks;    /* imbalanced: dense ranks; 0 = max(1, ranks / 8) */
    uint64_t    seed;
    int         rotate;         /* buffer pairs used in turn */
    int         buffers;        /* --buffers K: K pairs, each call's input rewritten with new
                                   data; 0 unless given */
    int         fresh;          /* rewrite the input before every call, untimed */
    int         barrier;        /* a barrier before every timed call, untimed */
    int         settle;         /* untimed calls until fold's online trials settle */
    int         batch;          /* time runs of calls together, not each call */
    int         check;
    int         compare_mpi;
    int         compare_apart;  /* mpi-apart: each library's iterations in a block */
    const char *csv_path;
    const char *json_path;
    const char *plot_path;
    size_t      probe_bytes;    /* 0 disables the bandwidth probe */
    int         probe_each;     /* --probe-size each: every size probed at its footprint */
    int         inject_rank;    /* -1: no injected error */
    size_t      inject_index;
    int         help;
    int         version;
} perf_options_t;

void perf_options_defaults(perf_options_t *opts);

/* Parses argv[1..argc). Returns 0, or -1 with a one-line reason in err. */
int perf_options_parse(perf_options_t *opts, int argc, char **argv, char *err, size_t errlen);

/* The option list (generated from the table); --help adds the notes after it. */
void perf_options_print_usage(FILE *out);
void perf_options_print_help(FILE *out);

/* "64M" -> 67108864: the size syntax of util/size.h, without "inf". */
int perf_parse_size(const char *text, size_t *bytes);
/* Option values shared by the tools, 0 or -1 with the reason in why: a size
 * (perf_parse_size), and -c's comma-separated list of distinct collectives. */
int perf_parse_size_arg(const char *arg, size_t *bytes, char *why, size_t whylen);
int perf_parse_collectives(const char *arg, perf_coll_t colls[PERF_COLL_COUNT], int *ncolls,
                           char *why, size_t whylen);

const char *perf_coll_name(perf_coll_t coll);
const char *perf_distribution_name(perf_distribution_t dist);

#endif
