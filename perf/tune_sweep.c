/*
 * fold_tune's measurements (tune_sweep.h). Every timing goes through perf_bench_run,
 * so a time means what it means in fold_perf: warm-ups, a per-size time budget, MPI
 * interleaved iteration by iteration, and the median over iterations of the slowest
 * rank's time. One call per (size, leader count) runs the cases of that size one
 * after the other; one more times the fastest case's segment sizes.
 */
#include "tune_sweep.h"

#include "perf_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fold_coll_t to_fold(perf_coll_t coll)
{
    return coll == PERF_COLL_ALLREDUCE ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
}

size_t tune_sweep_sizes(const tune_options_t *o, size_t *sizes, size_t cap)
{
    size_t n = 0, last = 0;
    for (size_t b = o->begin_bytes; b <= o->end_bytes && n < cap; b *= o->factor) {
        size_t bytes = b / sizeof(float) * sizeof(float);
        if (bytes > 0 && bytes != last) {
            sizes[n++] = last = bytes;
        }
        if (b > o->end_bytes / o->factor) {
            break;
        }
    }
    return n;
}

static int add_point(tune_run_t *run, const tune_point_t *p)
{
    if (run->npoints == run->cap) {
        size_t cap = run->cap ? 2 * run->cap : 256;
        tune_point_t *pts = realloc(run->points, cap * sizeof(*pts));
        if (pts == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        run->points = pts;
        run->cap    = cap;
    }
    run->points[run->npoints++] = *p;
    return FOLD_OK;
}

/* What one perf_bench_run call measures. */
typedef struct tune_bench {
    fold_comm_h        comm;
    perf_coll_t        coll;
    size_t             begin, end, factor;
    const tune_case_t *cases[PERF_MAX_ALGORITHMS];
    int                ncases;
    int                leaders;     /* FOLD_DPML_LEADERS for all of them; 0: auto */
    int                with_mpi;
    const perf_node_layout_t *layout;   /* NULL: none (no bound) */
    double             min_time;    /* a floor under the time budget per size */
    long               min_warmup;  /* a floor under the warm-ups */
} tune_bench_t;

static void on_row(const perf_run_info_t *info, const perf_row_t *row, void *arg)
{
    (void)info;
    tune_run_t *run = arg;
    if (!run->sweeping) {
        return;
    }
    run->done++;
    char label[2 * TUNE_NAME_LEN], what[3 * TUNE_NAME_LEN];
    tune_case_label(row->requested, row->algorithm, run->leaders_now, label, sizeof(label));
    snprintf(what, sizeof(what), "%s %s, %zu bytes", perf_coll_name(row->coll), label,
             row->bytes);
    perf_progress_update(&run->progress, run->done, what);
}

/* Runs one perf_bench_run; every member of b->comm gets the rows as points. */
static int bench(tune_run_t *run, const tune_bench_t *b, tune_point_t *out, size_t *nout,
                 size_t cap)
{
    perf_options_t po;
    perf_options_defaults(&po);
    po.colls[0]      = b->coll;
    po.ncolls        = 1;
    po.begin_bytes   = b->begin;
    po.end_bytes     = b->end;
    po.factor        = b->factor;
    po.iters         = run->topts->iters;
    po.warmup        = run->topts->warmup > b->min_warmup ? run->topts->warmup : b->min_warmup;
    po.time_per_size = run->topts->time_per_size;
    if (po.time_per_size > 0 && po.time_per_size < b->min_time) {
        po.time_per_size = b->min_time;
    }
    po.compare_mpi   = b->with_mpi;
    po.fresh         = !run->topts->stale;
    po.settle        = 1;   /* a tuning file wants the warmed times of each choice */
    po.probe_bytes   = 0;
    po.nalgorithms   = b->ncases;
    for (int c = 0; c < b->ncases; c++) {
        snprintf(po.algorithms[c], PERF_NAME_LEN, "%s", b->cases[c]->alg);
    }
    perf_env_t env;
    memset(&env, 0, sizeof(env));
    env.opts = &po;
    env.ctx  = run->ctx;
    env.comm = b->comm;
    fold_comm_rank(b->comm, &env.rank);
    fold_comm_size(b->comm, &env.ranks);
    if (b->layout != NULL) {
        env.layout = *b->layout;   /* borrowed: never released through env */
    }
    perf_data_spec_init(&env.spec, &po, env.ranks);
    for (int c = 0; c < b->ncases; c++) {
        env.usable[0][c] = 1;   /* tune_plan_cases only lists algorithms of the coll */
    }
    char leaders[16] = "auto";
    if (b->leaders > 0) {
        snprintf(leaders, sizeof(leaders), "%d", b->leaders);
    }
    int status = fold_config_set(run->ctx, "DPML_LEADERS", leaders);
    run->leaders_now = b->leaders;
    perf_results_t results;
    memset(&results, 0, sizeof(results));
    if (status == FOLD_OK) {
        status = perf_bench_run(&env, &results, env.rank == 0 ? on_row : NULL, run);
    }
    fold_config_set(run->ctx, "DPML_LEADERS", "auto");
    for (size_t i = 0; status == FOLD_OK && i < results.nrows; i++) {
        const perf_row_t *row = &results.rows[i];
        if (*nout == cap) {
            break;
        }
        tune_point_t *p = &out[(*nout)++];
        memset(p, 0, sizeof(*p));
        p->coll  = to_fold(row->coll);
        p->bytes = row->bytes;
        snprintf(p->alg, sizeof(p->alg), "%s", row->requested);
        snprintf(p->ran, sizeof(p->ran), "%s", row->algorithm);
        p->leaders = b->leaders;
        p->us      = row->latency.median_us;
        p->mpi_us  = row->has_mpi ? row->mpi_median_us : NAN;
    }
    perf_results_release(&results);
    return status;
}

/* The fastest case of a size (among the points from `from` on) again at each
 * segment size (tune_segment_variants), with its leaders. */
static int sweep_segments(tune_run_t *run, perf_coll_t coll, size_t bytes, size_t from)
{
    int best = tune_fastest(run->points + from, run->npoints - from, to_fold(coll), bytes, NULL);
    tune_case_t fastest, variants[FOLD_SELECT_SEG_TRIES];
    int n = 0;
    if (best >= 0) {
        const tune_point_t *p = &run->points[from + (size_t)best];
        memcpy(fastest.alg, p->alg, sizeof(fastest.alg));
        fastest.leaders = p->leaders;
        n = tune_segment_variants(&fastest, bytes, variants, FOLD_SELECT_SEG_TRIES);
    }
    if (n == 0) {
        return FOLD_OK;
    }
    tune_bench_t b = {.comm = run->world, .coll = coll, .begin = bytes, .end = bytes,
                      .factor = 2, .leaders = fastest.leaders, .with_mpi = run->with_mpi,
                      .layout = run->layout};
    for (int i = 0; i < n; i++) {
        b.cases[b.ncases++] = &variants[i];
    }
    tune_point_t pts[FOLD_SELECT_SEG_TRIES];
    size_t got = 0;
    int status = bench(run, &b, pts, &got, FOLD_SELECT_SEG_TRIES);
    for (size_t i = 0; i < got && status == FOLD_OK; i++) {
        status = add_point(run, &pts[i]);
    }
    return status;
}

/* Every case of one collective at one size: one call per leader count, then the
 * fastest one's segment sizes. */
static int sweep_size(tune_run_t *run, perf_coll_t coll, size_t bytes, const tune_case_t *cases,
                      int ncases)
{
    size_t from = run->npoints;
    int done[TUNE_MAX_CASES] = {0};
    int status = FOLD_OK;
    for (int first = 0; first < ncases && status == FOLD_OK; first++) {
        if (done[first]) {
            continue;
        }
        tune_bench_t b = {.comm = run->world, .coll = coll, .begin = bytes, .end = bytes,
                          .factor = 2, .leaders = cases[first].leaders,
                          .with_mpi = run->with_mpi, .layout = run->layout};
        for (int c = first; c < ncases && b.ncases < PERF_MAX_ALGORITHMS; c++) {
            if (!done[c] && cases[c].leaders == b.leaders) {
                b.cases[b.ncases++] = &cases[c];
                done[c] = 1;
            }
        }
        tune_point_t pts[PERF_MAX_ALGORITHMS];
        size_t n = 0;
        status = bench(run, &b, pts, &n, PERF_MAX_ALGORITHMS);
        for (size_t i = 0; i < n && status == FOLD_OK; i++) {
            status = add_point(run, &pts[i]);
        }
    }
    return status == FOLD_OK ? sweep_segments(run, coll, bytes, from) : status;
}

int tune_sweep(tune_run_t *run)
{
    size_t sizes[128];
    size_t nsizes = tune_sweep_sizes(run->topts, sizes, sizeof(sizes) / sizeof(sizes[0]));
    tune_case_t cases[PERF_COLL_COUNT][TUNE_MAX_CASES];
    int ncases[PERF_COLL_COUNT];
    run->total = 0;
    run->done  = 0;
    for (int c = 0; c < run->topts->ncolls; c++) {
        ncases[c] = tune_plan_cases(to_fold(run->topts->colls[c]), &run->shape, cases[c],
                                    TUNE_MAX_CASES);
        run->total += (size_t)ncases[c] * nsizes;
        for (size_t s = 0; s < nsizes; s++) {   /* the segment sizes of the fastest */
            run->total += (size_t)tune_segment_tries(sizes[s]);
        }
    }
    perf_progress_init(&run->progress, run->rank == 0, run->total);
    run->plain    = run->rank == 0 && !run->progress.enabled;
    run->sweeping = 1;
    int status = FOLD_OK;
    for (int c = 0; c < run->topts->ncolls && status == FOLD_OK; c++) {
        perf_coll_t coll = run->topts->colls[c];
        double start = perf_now_us();
        if (run->plain) {
            char list[1024] = "";
            for (int k = 0; k < ncases[c]; k++) {
                char label[2 * TUNE_NAME_LEN];
                size_t used = strlen(list);
                tune_case_label(cases[c][k].alg, "", cases[c][k].leaders, label, sizeof(label));
                if (strcmp(cases[c][k].alg, "auto") == 0) {
                    snprintf(label, sizeof(label), "auto");
                }
                snprintf(list + used, sizeof(list) - used, "%s%s", k ? " " : "", label);
            }
            fprintf(stderr, "fold_tune: %s: %d cases x %zu sizes%s: %s; then the fastest at "
                    "each segment size\n", perf_coll_name(coll),
                    ncases[c], nsizes, run->with_mpi ? ", MPI beside each" : "", list);
        }
        for (size_t s = 0; s < nsizes && status == FOLD_OK; s++) {
            status = sweep_size(run, coll, sizes[s], cases[c], ncases[c]);
        }
        if (run->plain && status == FOLD_OK) {
            fprintf(stderr, "fold_tune: %s: done in %.1f s\n", perf_coll_name(coll),
                    (perf_now_us() - start) * 1e-6);
        }
    }
    perf_progress_clear(&run->progress);
    run->sweeping = 0;
    return status;
}

/* ---- the link between two ranks --------------------------------------------- */

int tune_measure_pair(tune_run_t *run, int a, int b, tune_point_t *out, size_t *nout)
{
    enum { NPAIR = 4 };
    int member = run->rank == a || run->rank == b;
    fold_comm_h sub = NULL;
    *nout = 0;
    int status = fold_comm_split(run->world, member ? 0 : FOLD_UNDEFINED,
                                 run->rank == a ? 0 : 1, &sub);
    if (status != FOLD_OK) {
        return status;
    }
    /* bytes and microseconds of each size, sent by rank a to everyone */
    double values[2 * NPAIR];
    for (int i = 0; i < 2 * NPAIR; i++) {
        values[i] = NAN;
    }
    if (sub != NULL) {
        static const tune_case_t rd = {"recursive_doubling", 0};
        tune_point_t pts[NPAIR];
        size_t n = 0;
        /* A few more iterations than the sweep's: one pair decides a parameter. */
        tune_bench_t small = {.comm = sub, .coll = PERF_COLL_ALLREDUCE, .begin = 8, .end = 8,
                              .factor = 2, .cases = {&rd}, .ncases = 1, .min_time = 0.05,
                              .min_warmup = 10};
        tune_bench_t large = small;
        large.begin = (size_t)1 << 20;
        large.end   = (size_t)4 << 20;
        status = bench(run, &small, pts, &n, NPAIR);
        if (status == FOLD_OK) {
            status = bench(run, &large, pts, &n, NPAIR);
        }
        for (size_t i = 0; i < n; i++) {
            values[2 * i]     = (double)pts[i].bytes;
            values[2 * i + 1] = pts[i].us;
        }
    }
    if (status == FOLD_OK) {
        status = fold_bcast(values, 2 * NPAIR, FOLD_FLOAT64, a, run->world);
    }
    if (sub != NULL) {
        fold_comm_free(&sub);
    }
    for (int i = 0; status == FOLD_OK && i < NPAIR; i++) {
        if (isnan(values[2 * i])) {
            continue;
        }
        tune_point_t *p = &out[(*nout)++];
        memset(p, 0, sizeof(*p));
        p->coll  = FOLD_COLL_ALLREDUCE;
        p->bytes = (size_t)values[2 * i];
        snprintf(p->alg, sizeof(p->alg), "recursive_doubling");
        snprintf(p->ran, sizeof(p->ran), "recursive_doubling");
        p->us     = values[2 * i + 1];
        p->mpi_us = NAN;
    }
    return status;
}
