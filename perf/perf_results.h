/*
 * The results of a run: what was run (run info) and one row per collective,
 * algorithm and size. The output formats only read these.
 */
#ifndef FOLD_PERF_RESULTS_H
#define FOLD_PERF_RESULTS_H

#include "perf_options.h"
#include "perf_stats.h"

#include <stddef.h>

typedef struct perf_run_info {
    int          ranks;
    int          nodes;
    int          max_local_ranks;
    fold_dtype_t dtype;
    fold_op_t    op;
    int          root;
    int          inplace;
    int          rotate;
    int          buffers;        /* --buffers: every call's input written, new data */
    int          fresh;          /* --fresh: inputs rewritten before every call */
    int          barrier;        /* --barrier: every timed call after a barrier */
    int          settle;         /* --settle: fold's online trials run untimed first */
    int          batch;          /* --batch: calls timed in runs */
    int          fold_memory;    /* buffers from fold_mem_alloc (--memory fold) */
    double       sparsity;
    perf_distribution_t distribution;
    const char  *bootstrap;       /* "pmix" or "oob" */
    const char  *transport;
    const char  *segment_size;
    const char  *threads;
    const char  *fold_version;
    const char  *mpi_library;     /* "" unless --compare mpi */
    double       node_bw_gbs;     /* slowest node's streaming bandwidth; NAN: no probe */
    int          probe_each;      /* --probe-size each: a probe per size (row probe_gbs) */
    int          compare_mpi;
    int          compare_apart;   /* MPI's iterations in a block of their own */
    int          checked;
} perf_run_info_t;

typedef struct perf_row {
    perf_coll_t    coll;
    char           requested[PERF_NAME_LEN]; /* as given to -A: "auto" or a name */
    char           algorithm[PERF_NAME_LEN]; /* what fold ran */
    size_t         segment_bytes;            /* its pipeline segment; 0: not known */
    size_t         bytes;
    size_t         count;
    long           iterations;
    long           first_calls;              /* untimed calls before anything is timed
                                                (--settle: the first, and those that
                                                tried rivals); 0 without --settle */
    perf_latency_t latency;
    double         first_us;                 /* the size's first timed call */
    double         worst2_10_us;             /* the slowest of its timed calls 2 to 10 */
    double         algbw_gbs;
    double         busbw_gbs;
    double         bound_us;                 /* NAN without the probe */
    double         probe_gbs;                /* --probe-size each: the slowest node's
                                                bandwidth at this size's footprint */
    int            checked;
    int            check_ok;
    int            has_mpi;
    double         mpi_median_us;
    double         mpi_first_us;             /* first_us and worst2_10_us of MPI's calls */
    double         mpi_worst2_10_us;
    double         speedup;                  /* mpi_median_us / median_us */
} perf_row_t;

typedef struct perf_results {
    perf_run_info_t info;
    perf_row_t     *rows;
    size_t          nrows;
    size_t          capacity;
} perf_results_t;

int  perf_results_add(perf_results_t *results, const perf_row_t *row);
void perf_results_release(perf_results_t *results);
size_t perf_results_failed_checks(const perf_results_t *results);

/* "ok", "FAIL" or "-" when not checked. */
const char *perf_row_check_text(const perf_row_t *row);
/* "auto:ring" for fold's own choice, else the algorithm's name; "@32k" after it where
 * the message is cut into several segments of that size. */
void perf_row_algorithm_label(const perf_row_t *row, char *out, size_t len);

#endif
