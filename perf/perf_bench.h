/*
 * The sweep: for every collective, algorithm and size, warm up, time fold (and MPI,
 * interleaved) iteration by iteration, check one extra result, and reduce the
 * per-iteration times to the slowest rank's.
 */
#ifndef FOLD_PERF_BENCH_H
#define FOLD_PERF_BENCH_H

#include "perf_data.h"
#include "perf_options.h"
#include "perf_probe.h"
#include "perf_results.h"

#include <fold/fold.h>

typedef struct perf_env {
    const perf_options_t *opts;
    fold_context_h        ctx;
    fold_comm_h           comm;
    int                   rank;
    int                   ranks;
    perf_node_layout_t    layout;
    perf_data_spec_t      spec;
    /* usable[c][a]: algorithm a implements collective opts->colls[c] */
    int                   usable[PERF_COLL_COUNT][PERF_MAX_ALGORITHMS];
} perf_env_t;

/* Called on rank 0 for every finished row, e.g. to print it. */
typedef void (*perf_row_fn)(const perf_run_info_t *info, const perf_row_t *row, void *arg);

/* Collective: finds which requested algorithms implement which collective. Returns 0,
 * or -1 after printing (rank 0) why when an algorithm fits none of them. */
int perf_bench_resolve_algorithms(perf_env_t *env);

/* Collective: runs the sweep, adding every row to results on every rank. Returns a
 * fold status; a failed check is not an error here (see the rows' check_ok). */
int perf_bench_run(perf_env_t *env, perf_results_t *results, perf_row_fn on_row, void *arg);

#endif
