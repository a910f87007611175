/*
 * fold_tune's measurements through fold_perf's machinery (perf_bench_run): the sweep of
 * every case over every size, and the link between two ranks on a sub-communicator.
 */
#ifndef FOLD_TUNE_SWEEP_H
#define FOLD_TUNE_SWEEP_H

#include "perf_bench.h"
#include "perf_progress.h"
#include "tune.h"
#include "tune_options.h"

#include <fold/fold.h>

typedef struct tune_run {
    const tune_options_t *topts;
    fold_context_h        ctx;
    fold_comm_h           world;
    int                   rank;
    int                   ranks;
    int                   with_mpi;
    fold_shape_t          shape;
    perf_node_layout_t   *layout;
    perf_progress_t       progress;   /* rank 0, when stderr reaches a terminal */
    int                   plain;      /* rank 0, stderr elsewhere: a line per collective */
    size_t                done;
    size_t                total;
    int                   leaders_now;   /* of the call running, for the progress line */
    int                   sweeping;      /* the progress line counts rows only then */
    tune_point_t         *points;     /* every rank holds them all (identical) */
    size_t                npoints;
    size_t                cap;
} tune_run_t;

/* The sizes of the sweep (bytes, multiples of 4, no repeats). Returns how many. */
size_t tune_sweep_sizes(const tune_options_t *o, size_t *sizes, size_t cap);

/* Collective over the world: every case of every collective at every size, all cases
 * of a size one after the other. Adds the points to run. Returns a fold status. */
int tune_sweep(tune_run_t *run);

/* Collective over the world: ranks a and b (a != b) time recursive_doubling
 * allreduce at 8 B and at 1, 2 and 4 MiB on a sub-communicator of their own, the
 * others wait; every rank gets the points (4 at most) in out. Returns a fold status. */
int tune_measure_pair(tune_run_t *run, int a, int b, tune_point_t *out, size_t *nout);

#endif
