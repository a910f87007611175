/*
 * fold_tune: measures the machine it runs on and writes a tuning file fold loads
 * (FOLD_TUNE_FILE; select.h describes the format).
 *
 *   1. calibrate: one core's copy and reduction rates in and out of cache, the node's
 *      cache (hwloc) and streaming bandwidth, and the transport between two ranks of
 *      a node (and of two nodes) on sub-communicators, before and after the sweep;
 *   2. sweep: every case (algorithm, leader count, auto) of allreduce and reduce at
 *      every size, with the MPI library beside each (perf_bench_run);
 *   3. fit (every rank alike, rank 0's broadcast): step_us and flag_us so that the
 *      cost model reproduces the small-message times, the latencies re-solved for
 *      every candidate; the bandwidths from the pairs; cache_bytes and eager_bytes
 *      where another value fits all the times clearly better;
 *   4. write (rank 0): parameters, per-size-range rules keyed to this shape, and the
 *      serve lines where fold beat MPI; read the file back and check it; print a table.
 *
 * Exit status: 0 success, 2 bad usage, 3 a runtime error.
 */
#include "perf_job.h"
#include "perf_mpi.h"
#include "perf_probe.h"
#include "perf_stats.h"
#include "tune.h"
#include "tune_calib.h"
#include "tune_fit.h"
#include "tune_options.h"
#include "tune_sweep.h"

#include "comm.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_USAGE = 2, EXIT_RUNTIME = 3 };

/* Sizes up to this are where the executor's and the flags' overheads show. */
#define FIT_SMALL_MAX ((size_t)4 << 10)
/* A log rms error above this (a typical miss by 2x) makes the fit worth a warning. */
#define POOR_FIT 0.7
/* eager_bytes is tried on sizes above FIT_SMALL_MAX up to this. */
#define FIT_MID_MAX   ((size_t)1 << 20)

static void check_or_fail(int status, int rank, const char *what)
{
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_tune: rank %d: %s failed: %s\n", rank, what,
                fold_status_string(status));
        perf_fail_job(EXIT_RUNTIME);
    }
}

/* Rank 0 finds out whether it can write the output, before the sweep. */
static int output_writable(const char *path, fold_comm_h world, int rank)
{
    int32_t ok = 1;
    if (rank == 0) {
        size_t len = strlen(path) + 8;
        char *tmp = malloc(len);
        FILE *f = NULL;
        if (tmp != NULL) {
            snprintf(tmp, len, "%s.tmp", path);
            f = fopen(tmp, "w");
        }
        if (f == NULL) {
            fprintf(stderr, "fold_tune: cannot write '%s': %s\n", tmp ? tmp : path,
                    strerror(errno));
            ok = 0;
        } else {
            fclose(f);
            remove(tmp);
        }
        free(tmp);
    }
    if (fold_bcast(&ok, 1, FOLD_INT32, 0, world) != FOLD_OK) {
        perf_fail_job(EXIT_RUNTIME);
    }
    return ok ? 0 : -1;
}

static double start_us;

/* A plain line on stderr (rank 0), with the seconds since the start. */
static void say(const tune_run_t *run, const char *what)
{
    if (run->rank == 0) {
        fprintf(stderr, "fold_tune: [%5.1f s] %s\n", (perf_now_us() - start_us) * 1e-6, what);
        fflush(stderr);
    }
}

/* ---- 1. calibration ---------------------------------------------------------- */

typedef struct tune_measured {
    double copy_gbs, copy_mem_gbs, reduce_gbs, reduce_mem_gbs, cache_bytes, cma_mem_gbs;
    double hwloc_cache_bytes; /* what hwloc said, before the ladder bounded it */
    double probe_gbs;        /* the slowest node's streaming traffic, GB/s */
    size_t mem_bytes;        /* rank 0's out-of-cache buffer */
    size_t probe_bytes;      /* streamed by each rank in the probe */
    int    intra_a, intra_b; /* the pairs timed; -1: none */
    int    inter_a, inter_b;
    tune_point_t intra[4], inter[4];
    size_t nintra, ninter;
} tune_measured_t;

/* The first rank of every node measures one core's rates while the others wait;
 * every rank gets the lowest over nodes. */
static int calibrate_core(tune_run_t *run, tune_measured_t *m)
{
    int first_of_node = 1;
    for (int r = 0; r < run->rank; r++) {
        first_of_node &= run->layout->node_of[r] != run->layout->node_of[run->rank];
    }
    enum { NV = 6 };
    double v[NV];
    for (int i = 0; i < NV; i++) {
        v[i] = DBL_MAX;
    }
    int status = fold_barrier(run->world);
    if (status == FOLD_OK && first_of_node) {
        int instances = 1;
        double cache = tune_llc_bytes(&instances);
        tune_ladder_t ladder;
        tune_measure_ladder(tune_out_of_cache_bytes(cache), &ladder);
        m->mem_bytes = ladder.n > 0 ? ladder.bytes[ladder.n - 1] : TUNE_LADDER_MIN;
        m->hwloc_cache_bytes = cache;
        v[0] = tune_measure_copy(TUNE_IN_CACHE_BYTES);
        v[1] = ladder.n > 0 ? ladder.gbs[ladder.n - 1] : NAN;
        v[2] = tune_measure_reduce(TUNE_IN_CACHE_BYTES);
        v[3] = tune_measure_reduce(m->mem_bytes);
        /* hwloc's cache, at most what the ladder saw cached in each instance */
        v[4] = fmin(cache, instances * tune_ladder_cache_bytes(&ladder));
        v[5] = tune_measure_kernel(m->mem_bytes);
        for (int i = 0; i < NV; i++) {
            v[i] = isfinite(v[i]) && v[i] > 0 ? v[i] : DBL_MAX;
        }
    }
    if (status == FOLD_OK) {
        status = fold_allreduce(FOLD_IN_PLACE, v, NV, FOLD_FLOAT64, FOLD_OP_MIN, run->world);
    }
    double *out[NV] = {&m->copy_gbs, &m->copy_mem_gbs, &m->reduce_gbs, &m->reduce_mem_gbs,
                       &m->cache_bytes, &m->cma_mem_gbs};
    for (int i = 0; i < NV; i++) {
        *out[i] = v[i] < DBL_MAX ? v[i] : NAN;
    }
    return status;
}

static void find_pairs(const tune_run_t *run, tune_measured_t *m)
{
    const int *node_of = run->layout->node_of;
    m->intra_a = m->intra_b = m->inter_a = m->inter_b = -1;
    for (int r = 0; r < run->ranks && m->intra_a < 0; r++) {
        for (int q = r + 1; q < run->ranks; q++) {
            if (node_of[q] == node_of[r]) {
                m->intra_a = r;
                m->intra_b = q;
                break;
            }
        }
    }
    for (int r = 1; r < run->ranks; r++) {
        if (node_of[r] != node_of[0]) {
            m->inter_a = 0;
            m->inter_b = r;
            break;
        }
    }
}

static int calibrate(tune_run_t *run, tune_measured_t *m)
{
    memset(m, 0, sizeof(*m));
    say(run, "calibrating: copy and reduction rates, node bandwidth");
    int status = calibrate_core(run, m);
    /* The probe streams out of cache: every node's ranks together over twice its cache. */
    size_t probe = run->topts->probe_bytes, cap = (size_t)1 << 30;
    if (isfinite(m->cache_bytes)) {
        double want = 2 * m->cache_bytes / (run->shape.min_ppn > 0 ? run->shape.min_ppn : 1);
        probe = want > (double)cap ? cap : want > (double)probe ? (size_t)want : probe;
    }
    m->probe_bytes = probe;
    if (status == FOLD_OK) {
        status = perf_probe_bandwidth(run->layout, run->world, probe);
    }
    m->probe_gbs = perf_probe_slowest_node(run->layout);
    find_pairs(run, m);
    return status;
}

/* Keeps the lower of two medians per size: a burst of load elsewhere on the machine
 * during one of the passes then does not decide a parameter. */
static void merge_pair(tune_point_t *kept, size_t *nkept, const tune_point_t *pts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < *nkept && kept[k].bytes != pts[i].bytes) {
            k++;
        }
        if (k == *nkept && *nkept < 4) {
            kept[(*nkept)++] = pts[i];
        } else if (k < *nkept && pts[i].us < kept[k].us) {
            kept[k].us = pts[i].us;
        }
    }
}

/* The transport between two ranks of a node, and of two nodes (one pass). */
static int measure_pairs(tune_run_t *run, tune_measured_t *m, int pass)
{
    tune_point_t pts[4];
    size_t n = 0;
    int status = FOLD_OK;
    if (m->intra_a >= 0) {
        say(run, pass == 0 ? "calibrating: the transport within a node"
                           : "calibrating: the transport within a node, again");
        status = tune_measure_pair(run, m->intra_a, m->intra_b, pts, &n);
        merge_pair(m->intra, &m->nintra, pts, n);
    }
    if (status == FOLD_OK && m->inter_a >= 0) {
        say(run, pass == 0 ? "calibrating: the transport between nodes"
                           : "calibrating: the transport between nodes, again");
        status = tune_measure_pair(run, m->inter_a, m->inter_b, pts, &n);
        merge_pair(m->inter, &m->ninter, pts, n);
    }
    return status;
}

/* ---- 3. the fit --------------------------------------------------------------- */

typedef struct tune_fitted {
    fold_model_params_t p;
    tune_fit_report_t   overheads, cache, eager, shm;
    int                 cache_changed, eager_changed, shm_changed;
    size_t              nsmall, nmid, nall;
    double              rms_all_before, rms_all_after;
    double              seconds;
} tune_fitted_t;

static int to_obs(const tune_point_t *pt, tune_model_t *model, tune_obs_t *o)
{
    const fold_alg_t *alg;
    size_t seg;
    if (fold_select_parse_alg(pt->alg, &alg, &seg) != FOLD_OK || !isfinite(pt->us) ||
        pt->us <= 0) {
        return 0;   /* auto among them */
    }
    *o = (tune_obs_t){.model = model, .coll = pt->coll, .alg = alg, .seg_bytes = seg,
                      .leaders = pt->leaders, .bytes = pt->bytes, .us = pt->us};
    return 1;
}

/* The model's time for a point: what its case names (auto: what fold ran). */
static double predict_point(tune_model_t *model, const fold_model_params_t *p,
                            const tune_point_t *pt)
{
    const fold_alg_t *alg;
    size_t seg;
    if (fold_select_parse_alg(strcmp(pt->alg, "auto") == 0 ? pt->ran : pt->alg, &alg, &seg) !=
        FOLD_OK) {
        return NAN;
    }
    return tune_model_predict(model, p, pt->coll, alg, seg, pt->leaders, pt->bytes);
}

/* The pair's 8 B time anchors a latency; its 1-4 MiB times give a bandwidth. */
static void pair_obs(const tune_point_t *pts, size_t n, tune_model_t *model, size_t lat_offset,
                     tune_anchor_t *anchors, size_t *nanchors, tune_obs_t *large,
                     size_t *nlarge)
{
    *nlarge = 0;
    for (size_t i = 0; i < n; i++) {
        tune_obs_t o;
        if (!to_obs(&pts[i], model, &o)) {
            continue;
        }
        if (o.bytes <= FIT_SMALL_MAX) {
            anchors[(*nanchors)++] = (tune_anchor_t){.obs = o, .offset = lat_offset};
        } else {
            large[(*nlarge)++] = o;
        }
    }
}

static void apply_measured(fold_model_params_t *p, const tune_measured_t *m)
{
    double *fields[] = {&p->copy_gbs, &p->copy_mem_gbs, &p->reduce_gbs, &p->reduce_mem_gbs,
                        &p->cache_bytes, &p->cma_mem_gbs};
    double values[] = {m->copy_gbs, m->copy_mem_gbs, m->reduce_gbs, m->reduce_mem_gbs,
                       m->cache_bytes, m->cma_mem_gbs};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        if (isfinite(values[i]) && values[i] > 0) {
            *fields[i] = values[i];
        }
    }
    p->cache_bytes = floor(p->cache_bytes);
    /* The probe counts 12 bytes of traffic per float32 result of c += a; the model
     * compares node_mem_gbs with rates in bytes of result. */
    if (isfinite(m->probe_gbs) && m->probe_gbs > 0) {
        p->node_mem_gbs = m->probe_gbs / 3.0;
    }
}

/* Every rank computes the same fit from the same numbers. */
static int fit(tune_run_t *run, const tune_measured_t *m, tune_fitted_t *out)
{
    fold_context_t *c = (fold_context_t *)run->ctx;
    double start = perf_now_us();
    memset(out, 0, sizeof(*out));
    out->p = c->model;   /* the defaults, fold_init's calibration, FOLD_MODEL's values */
    apply_measured(&out->p, m);

    static const int same_node[2] = {0, 0}, two_nodes[2] = {0, 1};
    tune_model_t world = {NULL}, intra = {NULL}, inter = {NULL};
    int status = tune_model_open(&world, run->ranks, run->layout->node_of);
    if (status == FOLD_OK && m->nintra > 0) {
        status = tune_model_open(&intra, 2, same_node);
    }
    if (status == FOLD_OK && m->ninter > 0) {
        status = tune_model_open(&inter, 2, two_nodes);
    }
    size_t n = run->npoints;
    tune_obs_t *small = malloc((n + 1) * sizeof(*small));
    tune_obs_t *mid = malloc((n + 1) * sizeof(*mid));
    tune_obs_t *all = malloc((n + 1) * sizeof(*all));
    if (status == FOLD_OK && (small == NULL || mid == NULL || all == NULL)) {
        status = FOLD_ERR_NO_MEMORY;
    }
    if (status != FOLD_OK) {
        goto out;
    }
    /* One rank communicates with no one: its times say nothing about the model. */
    for (size_t i = 0; i < n && run->ranks > 1; i++) {
        tune_obs_t o;
        if (!to_obs(&run->points[i], &world, &o)) {
            continue;
        }
        all[out->nall++] = o;
        if (o.bytes <= FIT_SMALL_MAX) {
            small[out->nsmall++] = o;
        } else if (o.bytes <= FIT_MID_MAX) {
            mid[out->nmid++] = o;
        }
    }
    tune_anchor_t anchors[8];
    size_t nanchors = 0, nintra_large = 0, ninter_large = 0;
    tune_obs_t intra_large[4], inter_large[4];
    pair_obs(m->intra, m->nintra, &intra, offsetof(fold_model_params_t, intra_lat_us), anchors,
             &nanchors, intra_large, &nintra_large);
    pair_obs(m->inter, m->ninter, &inter, offsetof(fold_model_params_t, inter_lat_us), anchors,
             &nanchors, inter_large, &ninter_large);

    tune_rate_t rates[2];
    size_t nrates = 0;
    if (nintra_large > 0) {
        rates[nrates++] = (tune_rate_t){intra_large, nintra_large,
                                        offsetof(fold_model_params_t, intra_gbs), 0.05, 2000};
    }
    if (ninter_large > 0) {
        rates[nrates++] = (tune_rate_t){inter_large, ninter_large,
                                        offsetof(fold_model_params_t, inter_gbs), 0.01, 2000};
    }
    fold_model_params_t *p = &out->p;
    out->rms_all_before = tune_log_rms(p, all, out->nall, anchors, nanchors);
    /* The latencies and overheads from the small messages; the bandwidths from the
     * pairs' large ones (where the overheads hardly count); then what the model's
     * cache and rendezvous thresholds should be for the rest to fit, bandwidths
     * re-solved with them. */
    tune_fit_overheads(p, small, out->nsmall, anchors, nanchors, &out->overheads);
    tune_solve_rates(p, rates, nrates, anchors, nanchors);
    out->cache_changed = tune_fit_cache(p, all, out->nall, anchors, nanchors, rates, nrates,
                                        0.05, &out->cache);
    out->eager_changed = tune_fit_eager(p, mid, out->nmid, anchors, nanchors, 0.05, &out->eager);
    out->shm_changed   = tune_fit_shm(p, mid, out->nmid, anchors, nanchors, 0.05, &out->shm);
    tune_solve_rates(p, rates, nrates, anchors, nanchors);
    tune_solve_anchors(p, anchors, nanchors);
    out->rms_all_after = tune_log_rms(p, all, out->nall, NULL, 0);
out:
    free(small);
    free(mid);
    free(all);
    tune_model_close(&world);
    tune_model_close(&intra);
    tune_model_close(&inter);
    out->seconds = (perf_now_us() - start) * 1e-6;
    return status;
}

/* ---- 4. the file and the table ------------------------------------------------ */

#define NOTE_LEN 200

typedef struct tune_notes {
    char              text[16][NOTE_LEN];
    tune_param_note_t notes[16];
    size_t            n;
} tune_notes_t;

static void note(tune_notes_t *t, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(tune_notes_t *t, const char *name, const char *fmt, ...)
{
    if (t->n == 16) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->text[t->n], NOTE_LEN, fmt, ap);
    va_end(ap);
    t->notes[t->n] = (tune_param_note_t){name, t->text[t->n]};
    t->n++;
}

static double pair_time(const tune_point_t *pts, size_t n, size_t bytes)
{
    for (size_t i = 0; i < n; i++) {
        if (pts[i].bytes == bytes) {
            return pts[i].us;
        }
    }
    return NAN;
}

static void param_notes(const tune_measured_t *m, const tune_fitted_t *f, tune_notes_t *t)
{
    char mem[32], in[32];
    tune_format_bytes(m->mem_bytes, mem, sizeof(mem));
    tune_format_bytes(TUNE_IN_CACHE_BYTES, in, sizeof(in));
    memset(t, 0, sizeof(*t));
    if (f->overheads.nobs > 0) {
        note(t, "step_us", "fitted: %zu times <= 4 KiB, log rms error %.3f -> %.3f (a typical "
             "miss x%.2f)%s", f->overheads.nobs, f->overheads.rms_before, f->overheads.rms_after,
             exp(f->overheads.rms_after), f->overheads.rms_after > POOR_FIT ? "; POOR FIT" : "");
        note(t, "flag_us", "fitted with step_us");
    } else {
        note(t, "step_us", "kept: nothing to fit (a job of one rank)");
        note(t, "flag_us", "kept: nothing to fit (a job of one rank)");
    }
    if (m->nintra > 0) {
        note(t, "intra_lat_us", "solved: ranks %d and %d, recursive_doubling 8 B in %.2f us "
             "(the lower of two passes)",
             m->intra_a, m->intra_b, pair_time(m->intra, m->nintra, 8));
        note(t, "intra_gbs", "solved: the same pair at 1, 2, 4 MiB (4 MiB in %.0f us)",
             pair_time(m->intra, m->nintra, (size_t)4 << 20));
    } else {
        note(t, "intra_lat_us", "kept: no node holds two ranks of this job");
        note(t, "intra_gbs", "kept: no node holds two ranks of this job");
    }
    if (m->ninter > 0) {
        note(t, "inter_lat_us", "solved: ranks %d and %d on two nodes, recursive_doubling "
             "8 B in %.2f us", m->inter_a, m->inter_b, pair_time(m->inter, m->ninter, 8));
        note(t, "inter_gbs", "solved: the same pair at 1, 2, 4 MiB (4 MiB in %.0f us)",
             pair_time(m->inter, m->ninter, (size_t)4 << 20));
    } else {
        note(t, "inter_lat_us", "kept: the job runs on one node");
        note(t, "inter_gbs", "kept: the job runs on one node");
    }
    note(t, "nics", "kept: not measured");
    note(t, "eager_bytes", "%s: %zu times in 4 KiB..1 MiB, log rms error %.3f -> %.3f",
         f->eager_changed ? "fitted" : "kept (no fit lowered the error by 5%)", f->eager.nobs,
         f->eager.rms_before, f->eager.rms_after);
    note(t, "shm_gbs", "%s: %zu times in 4 KiB..1 MiB, log rms error %.3f -> %.3f",
         f->shm_changed ? "fitted" : "kept (no fit lowered the error by 5%)", f->shm.nobs,
         f->shm.rms_before, f->shm.rms_after);
    note(t, "copy_gbs", "measured: memcpy of %s, one core", in);
    note(t, "copy_mem_gbs", "measured: memcpy of %s, one core (4 MiB doubled until a "
         "doubling no longer slowed it by 10%%)", mem);
    note(t, "reduce_gbs", "measured: float32 c = a + b over %s, one core", in);
    note(t, "reduce_mem_gbs", "measured: float32 c = a + b over %s, one core", mem);
    if (isfinite(m->cma_mem_gbs)) {
        note(t, "cma_mem_gbs", "measured: process_vm_readv of this process's memory, 1 MiB "
             "per call streaming over %s, one core", mem);
    } else {
        note(t, "cma_mem_gbs", "kept: the kernel refused single copy");
    }
    if (isfinite(m->probe_gbs)) {
        char probe[32];
        tune_format_bytes(m->probe_bytes, probe, sizeof(probe));
        note(t, "node_mem_gbs", "measured: the ranks of a node streaming c += a over %s "
             "each, %.1f GB/s of traffic = %.1f GB/s of result", probe, m->probe_gbs,
             m->probe_gbs / 3);
    } else {
        note(t, "node_mem_gbs", "kept: not probed");
    }
    char llc[32] = "unknown", hw[32] = "unknown";
    if (isfinite(m->cache_bytes)) {
        tune_format_bytes((size_t)m->cache_bytes, llc, sizeof(llc));
    }
    if (isfinite(m->hwloc_cache_bytes)) {
        tune_format_bytes((size_t)m->hwloc_cache_bytes, hw, sizeof(hw));
    }
    if (f->cache_changed) {
        note(t, "cache_bytes", "fitted: %zu times, log rms error %.3f -> %.3f (measured: %s; "
             "hwloc's last-level cache: %s)", f->cache.nobs, f->cache.rms_before,
             f->cache.rms_after, llc, hw);
    } else if (isfinite(m->cache_bytes)) {
        note(t, "cache_bytes", "hwloc's last-level cache of the node (%s), at most the "
             "footprint of the first copy of 4 MiB, 8 MiB, ... that ran near memory speed, "
             "per instance; no other size lowered the error by 5%%", hw);
    } else {
        note(t, "cache_bytes", "kept (no other size lowered the error by 5%%)");
    }
}

static void format_us(double us, char *buf, size_t len)
{
    if (isfinite(us)) {
        snprintf(buf, len, "%.2f", us);
    } else {
        snprintf(buf, len, "-");
    }
}

static void print_table(const tune_run_t *run, const tune_size_t *sizes, size_t nsizes,
                        const fold_model_params_t *p)
{
    tune_model_t model = {NULL};
    int have_model = tune_model_open(&model, run->ranks, run->layout->node_of) == FOLD_OK;
    printf("#\n# times: median over iterations of the slowest rank, us; model: the cost model "
           "with\n# the parameters below, for the fastest case; rule: what the file names\n#\n");
    printf("# %-10s %10s  %-22s %10s  %-22s %10s %10s %10s  %-20s %s\n", "collective", "bytes",
           "fastest", "time", "auto", "auto_time", "mpi_time", "model", "rule", "serve");
    for (size_t i = 0; i < nsizes; i++) {
        const tune_size_t *v = &sizes[i];
        const tune_point_t *best = &run->points[v->best];
        char label[2 * TUNE_NAME_LEN], auto_label[2 * TUNE_NAME_LEN] = "-";
        char t_best[32], t_auto[32], t_mpi[32], t_model[32];
        tune_case_label(best->alg, best->ran, best->leaders, label, sizeof(label));
        double auto_us = NAN;
        if (v->auto_case >= 0) {
            const tune_point_t *a = &run->points[v->auto_case];
            tune_case_label(a->alg, a->ran, 0, auto_label, sizeof(auto_label));
            auto_us = a->us;
        }
        double predicted = NAN;
        if (have_model) {
            predicted = predict_point(&model, p, best);
        }
        format_us(best->us, t_best, sizeof(t_best));
        format_us(auto_us, t_auto, sizeof(t_auto));
        format_us(v->mpi_us, t_mpi, sizeof(t_mpi));
        format_us(predicted, t_model, sizeof(t_model));
        printf("  %-10s %10zu  %-22s %10s  %-22s %10s %10s %10s  %-20s %s\n",
               fold_coll_name(v->coll), v->bytes, label, t_best, auto_label, t_auto, t_mpi,
               t_model, run->points[v->chosen].alg,
               v->fold_serves < 0 ? "-" : v->fold_serves ? "fold" : "mpi");
    }
    tune_model_close(&model);
}

/* Rank 0: every measured time beside the model's prediction with the fitted
 * parameters. Returns 0, or -1 after printing why. */
static int write_csv(const tune_run_t *run, const tune_measured_t *m, const fold_model_params_t *p)
{
    static const int same_node[2] = {0, 0}, two_nodes[2] = {0, 1};
    FILE *out = fopen(run->topts->csv_path, "w");
    if (out == NULL) {
        fprintf(stderr, "fold_tune: cannot write '%s': %s\n", run->topts->csv_path,
                strerror(errno));
        return -1;
    }
    struct {
        const char         *source;
        const tune_point_t *pts;
        size_t              n;
        int                 size;
        const int          *node_of;
    } sets[] = {
        {"sweep", run->points, run->npoints, run->ranks, run->layout->node_of},
        {"intra_pair", m->intra, m->nintra, 2, same_node},
        {"inter_pair", m->inter, m->ninter, 2, two_nodes},
    };
    fprintf(out, "source,collective,case,algorithm,leaders,bytes,median_us,mpi_median_us,"
                 "model_us\n");
    for (size_t s = 0; s < sizeof(sets) / sizeof(sets[0]); s++) {
        tune_model_t model = {NULL};
        if (sets[s].n == 0 || tune_model_open(&model, sets[s].size, sets[s].node_of) != FOLD_OK) {
            continue;
        }
        for (size_t i = 0; i < sets[s].n; i++) {
            const tune_point_t *pt = &sets[s].pts[i];
            double predicted = predict_point(&model, p, pt);
            fprintf(out, "%s,%s,%s,%s,%d,%zu,%.4f,%.4f,%.4f\n", sets[s].source,
                    fold_coll_name(pt->coll), pt->alg, pt->ran, pt->leaders, pt->bytes, pt->us,
                    pt->mpi_us, predicted);
        }
        tune_model_close(&model);
    }
    int failed = ferror(out);
    if (fclose(out) != 0 || failed) {
        fprintf(stderr, "fold_tune: writing '%s' failed\n", run->topts->csv_path);
        return -1;
    }
    return 0;
}

/* Rank 0: verdicts, ranges, the file (checked by reading it back), the table. */
static int write_results(const tune_run_t *run, const tune_measured_t *m,
                         const tune_fitted_t *f)
{
    enum { CAP = 512 };
    tune_size_t *sizes = calloc(CAP, sizeof(*sizes));
    tune_range_t *rules = calloc(CAP, sizeof(*rules)), *serve = calloc(CAP, sizeof(*serve));
    size_t nsizes = 0, nrules = 0, nserve = 0;
    int status = -1;
    if (sizes == NULL || rules == NULL || serve == NULL) {
        fprintf(stderr, "fold_tune: no memory for the results\n");
        goto out;
    }
    for (int c = 0; c < run->topts->ncolls; c++) {
        fold_coll_t coll = run->topts->colls[c] == PERF_COLL_ALLREDUCE ? FOLD_COLL_ALLREDUCE
                                                                        : FOLD_COLL_REDUCE;
        size_t k = tune_decide_sizes(run->points, run->npoints, coll, TUNE_MERGE_TOLERANCE,
                                     sizes + nsizes, CAP - nsizes);
        nrules += tune_rule_ranges(run->points, sizes + nsizes, k, rules + nrules, CAP - nrules);
        nserve += tune_serve_ranges(run->points, sizes + nsizes, k, serve + nserve,
                                    CAP - nserve);
        nsizes += k;
    }
    tune_notes_t notes;
    param_notes(m, f, &notes);
    char date[64] = "?", host[256] = "?", sweep[256], begin[32], end[32];
    time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm) != NULL) {
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", &tm);
    }
    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "?");
    }
    host[sizeof(host) - 1] = '\0';
    tune_format_bytes(run->topts->begin_bytes, begin, sizeof(begin));
    tune_format_bytes(run->topts->end_bytes, end, sizeof(end));
    snprintf(sweep, sizeof(sweep), "%s%s%s, float32 sum, out of place, root 0, %s..%s x%zu, "
             "at most %.3g s and %ld iterations per case and size, %s",
             perf_coll_name(run->topts->colls[0]), run->topts->ncolls > 1 ? "," : "",
             run->topts->ncolls > 1 ? perf_coll_name(run->topts->colls[1]) : "", begin, end,
             run->topts->factor, run->topts->time_per_size, run->topts->iters,
             run->topts->stale ? "inputs written once (--stale)"
                               : "inputs rewritten before every call");
    tune_header_t h = {
        .fold_version = fold_version_string(), .date = date, .host = host,
        .mpi_library = run->with_mpi ? perf_mpi_library_version() : "", .sweep = sweep,
        .shape = run->shape,
    };
    if (tune_write_path(run->topts->output, &h, &f->p, notes.notes, notes.n, rules, nrules,
                        serve, nserve) != 0) {
        goto out;
    }
    char why[512];
    if (tune_verify_file(run->topts->output, &run->shape, &f->p, run->points, sizes, nsizes,
                         nrules, nserve, why, sizeof(why)) != 0) {
        fprintf(stderr, "fold_tune: %s does not read back as written: %s\n",
                run->topts->output, why);
        goto out;
    }
    print_table(run, sizes, nsizes, &f->p);
    if (run->topts->csv_path != NULL && write_csv(run, m, &f->p) != 0) {
        goto out;
    }
    printf("#\n# cost model (fit: %zu times <= 4 KiB, log rms error %.3f -> %.3f; all %zu "
           "times %.3f -> %.3f; %.1f s)\n#\n", f->overheads.nobs, f->overheads.rms_before,
           f->overheads.rms_after, f->nall, f->rms_all_before, f->rms_all_after, f->seconds);
    fold_model_print(&f->p, "  ", stdout);
    char *abs = realpath(run->topts->output, NULL);
    printf("#\n# wrote %s: %zu parameters, %zu rules, %zu serve lines\n"
           "# use it with: export FOLD_TUNE_FILE=%s\n", run->topts->output, notes.n, nrules,
           nserve, abs != NULL ? abs : run->topts->output);
    free(abs);
    status = 0;
out:
    free(sizes);
    free(rules);
    free(serve);
    return status;
}

/* ---- main -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    tune_options_t opts;
    char err[512];
    int reporting = perf_launcher_rank() == 0;

    start_us = perf_now_us();
    tune_options_defaults(&opts);
    if (tune_options_parse(&opts, argc, argv, err, sizeof(err)) != 0) {
        if (reporting) {
            fprintf(stderr, "fold_tune: %s\n\n", err);
            tune_options_print_usage(stderr);
            fprintf(stderr, "\nfold_tune --help also explains what is measured and the "
                            "file it writes.\n");
        }
        return EXIT_USAGE;
    }
    if (opts.help) {
        if (reporting) {
            tune_options_print_help(stdout);
        }
        return 0;
    }
    if (opts.version) {
        if (reporting) {
            printf("fold_tune (fold %s), %s MPI\n", fold_version_string(),
                   perf_mpi_built() ? "with" : "without");
        }
        return 0;
    }
    /* Measure fold as built: no earlier tuning file steers 'auto' or the model. */
    setenv("FOLD_TUNE_FILE", "none", 1);

    fold_context_h ctx;
    int status = perf_init_fold(perf_mpi_built(), NULL, &ctx);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_tune: fold_init failed: %s%s\n", fold_status_string(status),
                perf_mpi_built() ? "" : " (start fold_tune with a PMIx launcher, e.g. "
                                        "mpirun -n 2 fold_tune)");
        perf_fail_job(EXIT_RUNTIME);
    }
    perf_node_layout_t layout;
    tune_run_t run;
    memset(&run, 0, sizeof(run));
    run.topts    = &opts;
    run.ctx      = ctx;
    run.world    = fold_comm_world(ctx);
    run.layout   = &layout;
    run.with_mpi = !opts.no_mpi && perf_mpi_built();
    run.shape    = ((const fold_comm_t *)run.world)->shape;
    fold_comm_rank(run.world, &run.rank);
    fold_comm_size(run.world, &run.ranks);
    if (output_writable(opts.output, run.world, run.rank) != 0) {
        fold_finalize(ctx);
        perf_mpi_finalize();
        return EXIT_USAGE;
    }
    check_or_fail(perf_node_layout_init(&layout, run.world), run.rank, "finding the nodes");
    if (run.rank == 0) {
        printf("# fold_tune (fold %s): %d rank%s on %d node%s (%d-%d per node); MPI: %s\n",
               fold_version_string(), run.ranks, run.ranks == 1 ? "" : "s", run.shape.nnodes,
               run.shape.nnodes == 1 ? "" : "s", run.shape.min_ppn, run.shape.max_ppn,
               run.with_mpi ? perf_mpi_library_version() : "not timed");
        fflush(stdout);
    }
    tune_measured_t measured;
    check_or_fail(calibrate(&run, &measured), run.rank, "the calibration");
    check_or_fail(measure_pairs(&run, &measured, 0), run.rank, "timing the transport");
    check_or_fail(tune_sweep(&run), run.rank, "the sweep");
    check_or_fail(measure_pairs(&run, &measured, 1), run.rank, "timing the transport");
    say(&run, "fitting the cost model");
    tune_fitted_t fitted;
    check_or_fail(fit(&run, &measured, &fitted), run.rank, "the fit");
    if (run.rank == 0 && fitted.overheads.rms_after > POOR_FIT) {
        fprintf(stderr, "fold_tune: warning: the cost model misses the small-message times by "
                "a factor of %.1f on average even with the fitted parameters (are ranks "
                "oversubscribed, or the machine busy?); the rules and serve lines rest on the "
                "measurements themselves, but the parameters are a poor guide for other "
                "shapes\n", exp(fitted.overheads.rms_after));
    }
    /* Every rank computed the same; rank 0's copy is the one written. */
    check_or_fail(fold_bcast(&fitted.p, sizeof(fitted.p), FOLD_UINT8, 0, run.world), run.rank,
                  "sharing the parameters");

    int32_t exit_code = 0;
    if (run.rank == 0) {
        exit_code = write_results(&run, &measured, &fitted) == 0 ? 0 : EXIT_RUNTIME;
        printf("# fold_tune took %.1f s\n", (perf_now_us() - start_us) * 1e-6);
        fflush(stdout);
    }
    check_or_fail(fold_bcast(&exit_code, 1, FOLD_INT32, 0, run.world), run.rank,
                  "sharing the outcome");
    free(run.points);
    perf_node_layout_release(&layout);
    status = fold_finalize(ctx);
    perf_mpi_finalize();
    if (status != FOLD_OK && exit_code == 0) {
        fprintf(stderr, "fold_tune: fold_finalize failed: %s\n", fold_status_string(status));
        exit_code = EXIT_RUNTIME;
    }
    return exit_code;
}
