#include "perf_bench.h"
#include "perf_check.h"
#include "perf_mpi.h"
#include "perf_progress.h"
#include "perf_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Byte pattern written into an output before the checked call, so that a call that
 * leaves its output alone cannot pass on an earlier iteration's correct result. */
#define POISON_BYTE 0xA5

/* --buffers: two data sets, call i of K pairs taking set (i / K) % 2, so that every use of
 * a pair finds in it data other than its last use left. */
#define PERF_DATA_SETS 2

/* The calls of a size timed one by one before its warm-ups (first_us, worst2-10_us). */
#define PERF_FIRST_CALLS 10

typedef struct perf_buffers {
    size_t bytes;        /* capacity of each buffer */
    int    nrotate;
    int    nsets;        /* data sets in use: PERF_DATA_SETS with --buffers, else 1 */
    void  *input[PERF_DATA_SETS];    /* this rank's inputs as generated: every copy's source */
    void **send;         /* nrotate buffers; NULL in place */
    void **recv;         /* nrotate buffers */
    void  *expected[PERF_DATA_SETS]; /* each set's reduction over all ranks, for --check */
    int    fold_memory;  /* send and recv come from fold_mem_alloc */
} perf_buffers_t;

/* One (collective, algorithm, size) run: what it needs and what it measures. */
typedef struct perf_case {
    perf_coll_t coll;
    const char *requested;
    const char *codec;       /* FOLD_CODEC of this run, NULL: fold's setting */
    size_t      count;
    size_t      bytes;
    long        iterations;
    long        warmups;
    int         with_mpi;
    double     *times;       /* iterations fold times, then iterations MPI times, then the
                                mismatches, then first_us: gathered across ranks */
    size_t      mismatches;
    long        first_calls; /* untimed fold calls before anything is timed (--settle) */
    long        call0;       /* calls of this size so far: the next phase's first call */
    double      first_us[2 * PERF_FIRST_CALLS]; /* fold's first calls, then MPI's */
} perf_case_t;

static const char *alg_variable(perf_coll_t coll)
{
    return coll == PERF_COLL_ALLREDUCE ? "ALLREDUCE_ALG" : "REDUCE_ALG";
}

/* ---- algorithms ------------------------------------------------------------- */

int perf_bench_resolve_algorithms(perf_env_t *env)
{
    const perf_options_t *o = env->opts;
    int failed = 0;
    for (int a = 0; a < o->nalgorithms; a++) {
        int fits = 0;
        for (int c = 0; c < o->ncolls; c++) {
            const char *var = alg_variable(o->colls[c]);
            env->usable[c][a] = fold_config_set(env->ctx, var, o->algorithms[a]) == FOLD_OK;
            fits |= env->usable[c][a];
            fold_config_set(env->ctx, var, "auto");
        }
        if (env->rank != 0) {
            failed |= !fits;
            continue;
        }
        if (!fits) {
            fprintf(stderr, "fold_perf: unknown algorithm '%s' for the chosen collectives "
                    "(fold_info -a lists them)\n", o->algorithms[a]);
            failed = 1;
            continue;
        }
        for (int c = 0; c < o->ncolls; c++) {
            if (!env->usable[c][a]) {
                fprintf(stderr, "fold_perf: note: '%s' is not a%s %s algorithm; skipping it "
                        "for %s\n", o->algorithms[a], o->colls[c] == PERF_COLL_ALLREDUCE ?
                        "n" : "", perf_coll_name(o->colls[c]), perf_coll_name(o->colls[c]));
            }
        }
    }
    return failed ? -1 : 0;
}

/* ---- buffers ---------------------------------------------------------------- */

static void *alloc_buffer(size_t bytes)
{
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    return aligned_alloc(4096, rounded ? rounded : 4096);
}

/* A send or receive buffer: from fold_mem_alloc with --memory fold. */
static void *alloc_call_buffer(const perf_buffers_t *b, size_t bytes)
{
    void *p = NULL;
    if (!b->fold_memory) {
        return alloc_buffer(bytes);
    }
    return fold_mem_alloc(bytes ? bytes : 1, &p) == FOLD_OK ? p : NULL;
}

static void free_call_buffer(const perf_buffers_t *b, void *p)
{
    if (b->fold_memory) {
        fold_mem_free(p);
    } else {
        free(p);
    }
}

/* Which pair call i runs on, and which data set its input holds (--buffers). */
static int pair_of_call(const perf_buffers_t *b, long call)
{
    return (int)(call % b->nrotate);
}

static int set_of_call(const perf_buffers_t *b, long call)
{
    return (int)(call / b->nrotate % b->nsets);
}

/* Where pair k's input lives: its receive buffer in place, else its send buffer. */
static void *input_of_pair(const perf_options_t *o, const perf_buffers_t *b, int k)
{
    return o->inplace ? b->recv[k] : b->send[k];
}

static void buffers_release(perf_buffers_t *b)
{
    for (int k = 0; k < b->nrotate; k++) {
        if (b->send != NULL) {
            free_call_buffer(b, b->send[k]);
        }
        if (b->recv != NULL) {
            free_call_buffer(b, b->recv[k]);
        }
    }
    free(b->send);
    free(b->recv);
    for (int set = 0; set < PERF_DATA_SETS; set++) {
        free(b->input[set]);
        free(b->expected[set]);
    }
    memset(b, 0, sizeof(*b));
}

/* Data set s is the data of seed --seed + s: this rank's input and, for --check, the
 * reference. */
static int data_sets_init(perf_buffers_t *b, const perf_env_t *env, size_t count)
{
    for (int set = 0; set < b->nsets; set++) {
        perf_data_spec_t spec = env->spec;
        spec.seed += (uint64_t)set;
        b->input[set] = alloc_buffer(b->bytes);
        if (b->input[set] == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        perf_data_fill(&spec, env->rank, b->input[set], count);
        if (env->opts->check) {
            b->expected[set] = alloc_buffer(b->bytes);
            if (b->expected[set] == NULL) {
                return FOLD_ERR_NO_MEMORY;
            }
            perf_reference_reduce(&spec, b->expected[set], count);
        }
    }
    return FOLD_OK;
}

static int buffers_init(perf_buffers_t *b, const perf_env_t *env, size_t count)
{
    const perf_options_t *o = env->opts;
    size_t bytes = count * fold_dtype_size(o->dtype);
    memset(b, 0, sizeof(*b));
    b->bytes   = bytes;
    b->nrotate = o->rotate;
    b->nsets   = o->buffers > 0 ? PERF_DATA_SETS : 1;
    b->fold_memory = o->fold_memory;
    b->recv    = calloc((size_t)o->rotate, sizeof(void *));
    b->send    = o->inplace ? NULL : calloc((size_t)o->rotate, sizeof(void *));
    if (b->recv == NULL || (!o->inplace && b->send == NULL) ||
        data_sets_init(b, env, count) != FOLD_OK) {
        buffers_release(b);
        return FOLD_ERR_NO_MEMORY;
    }
    for (int k = 0; k < o->rotate; k++) {
        b->recv[k] = alloc_call_buffer(b, bytes);
        if (b->recv[k] == NULL) {
            buffers_release(b);
            return FOLD_ERR_NO_MEMORY;
        }
        /* In place the input lives in recv; otherwise recv starts poisoned. */
        if (o->inplace) {
            memcpy(b->recv[k], b->input[0], bytes);
        } else {
            memset(b->recv[k], POISON_BYTE, bytes);
            b->send[k] = alloc_call_buffer(b, bytes);
            if (b->send[k] == NULL) {
                buffers_release(b);
                return FOLD_ERR_NO_MEMORY;
            }
            memcpy(b->send[k], b->input[0], bytes);
        }
    }
    return FOLD_OK;
}

/* ---- one call --------------------------------------------------------------- */

static int fold_call(const perf_env_t *env, perf_coll_t coll, const void *send, void *recv,
                     size_t count)
{
    const perf_options_t *o = env->opts;
    const void *in = o->inplace ? FOLD_IN_PLACE : send;
    if (coll == PERF_COLL_ALLREDUCE) {
        return fold_allreduce(in, recv, count, o->dtype, o->op, env->comm);
    }
    return fold_reduce(in, recv, count, o->dtype, o->op, o->root, env->comm);
}

static int report_failure(const perf_env_t *env, const perf_case_t *pc, const char *who,
                          const char *reason)
{
    fprintf(stderr, "fold_perf: rank %d: %s %s (%s, %zu bytes) failed: %s\n", env->rank, who,
            perf_coll_name(pc->coll), pc->requested, pc->bytes, reason);
    return FOLD_ERR_TRANSPORT;
}

/* Which library a call runs. */
enum { RUN_FOLD, RUN_MPI };

/* The input of a call, written before it: --fresh the same data over the whole buffer,
 * --buffers the call's data set over the call's bytes; otherwise it stays as it is. */
static void write_call_input(const perf_options_t *o, const perf_buffers_t *b,
                             const perf_case_t *pc, long call)
{
    void *input = input_of_pair(o, b, pair_of_call(b, call));
    if (o->fresh) {
        memcpy(input, b->input[0], b->bytes);
    } else if (b->nsets > 1) {
        memcpy(input, b->input[set_of_call(b, call)], pc->bytes);
    }
}

/* Runs one library's call it of the current phase (the case's call call0 + it) on its
 * buffer pair; with US, timed into *us, its input written first, untimed. */
static int iteration_of(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                        long it, int which, double *us)
{
    const perf_options_t *o = env->opts;
    const long call = pc->call0 + it;
    int k = pair_of_call(b, call);
    const void *send = b->send ? b->send[k] : NULL;
    void *recv = b->recv[k];
    if (which == RUN_MPI && !pc->with_mpi) {
        return FOLD_OK;
    }
    write_call_input(o, b, pc, call);
    if (us != NULL && o->barrier) {
        int failed = which == RUN_MPI ? perf_mpi_barrier() != 0 : fold_barrier(env->comm) != 0;
        if (failed) {
            return report_failure(env, pc, which == RUN_MPI ? "MPI" : "fold",
                                  "the barrier before the call failed");
        }
    }
    double start = us != NULL ? perf_now_us() : 0;
    int status = which == RUN_MPI ? perf_mpi_collective(pc->coll, send, recv, pc->count,
                                                        o->dtype, o->op, o->root, o->inplace)
                                  : fold_call(env, pc->coll, send, recv, pc->count);
    double elapsed = us != NULL ? perf_now_us() - start : 0;
    if (status != 0) {
        return which == RUN_MPI
                   ? report_failure(env, pc, "MPI", "the MPI library returned an error")
                   : report_failure(env, pc, "fold", fold_status_string(status));
    }
    if (us != NULL) {
        *us = elapsed;
    }
    return FOLD_OK;
}

/* Iterations [start, end) of one library: each call timed on its own, or BATCHED the run
 * back to back between two clock reads, each call given the run's mean. */
static int run_of(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                  long start, long end, int which, int batched, double *us)
{
    int status = FOLD_OK;
    if (!batched || (which == RUN_MPI && !pc->with_mpi)) {
        for (long it = start; status == FOLD_OK && it < end; it++) {
            status = iteration_of(env, b, pc, it, which, &us[it]);
        }
        return status;
    }
    double begin = perf_now_us();
    for (long it = start; status == FOLD_OK && it < end; it++) {
        status = iteration_of(env, b, pc, it, which, NULL);
    }
    const double mean = (perf_now_us() - begin) / (double)(end - start);
    for (long it = start; it < end; it++) {
        us[it] = mean;
    }
    return status;
}

/* --compare mpi: fold and MPI take turns in runs of PERF_TURN_CALLS calls (which
 * one starts alternates), so that drift affects both alike while each library's
 * calls find the caches as its own calls left them. Turns of one call each made
 * every library pay for the other's footprint on the shared buffers, slowing both.
 * Iterations [0, n). */
#define PERF_TURN_CALLS 8
/* --batch: runs of this many calls, long enough that a run's first calls (the other
 * library's lines to take back, the peers' skew) weigh little in its mean. */
#define PERF_BATCH_CALLS 100

static long run_calls(int batched)
{
    return batched ? PERF_BATCH_CALLS : PERF_TURN_CALLS;
}

static int timed_turns(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                       long n, int batched, double *fold_us, double *mpi_us)
{
    int status = FOLD_OK;
    const long turn = run_calls(batched);
    for (long start = 0; status == FOLD_OK && start < n; start += turn) {
        long end = start + turn < n ? start + turn : n;
        int mpi_first = pc->with_mpi && ((start / turn) & 1);
        for (int turn = 0; turn < 2; turn++) {
            int which = (turn == 0) == mpi_first ? RUN_MPI : RUN_FOLD;
            if (status == FOLD_OK) {
                status = run_of(env, b, pc, start, end, which, batched,
                                which == RUN_MPI ? mpi_us : fold_us);
            }
        }
    }
    return status;
}

/* --compare mpi-apart: fold's iterations [0, n), then MPI's, each block after an
 * MPI_Barrier, so that neither waits behind bytes the other left in a link. */
static int timed_apart(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                       long n, int batched, double *fold_us, double *mpi_us)
{
    int status = FOLD_OK;
    for (int block = RUN_FOLD; block <= RUN_MPI && status == FOLD_OK; block++) {
        if (perf_mpi_barrier() != 0) {
            return report_failure(env, pc, "MPI", "MPI_Barrier failed");
        }
        const long turn = run_calls(batched);
        for (long start = 0; status == FOLD_OK && start < n; start += turn) {
            long end = start + turn < n ? start + turn : n;
            status = run_of(env, b, pc, start, end, block, batched,
                            block == RUN_MPI ? mpi_us : fold_us);
        }
    }
    return status;
}

/* The next n calls of each library, timed as --compare asks (mpi-apart: fold's block,
 * then MPI's); the case's call count moves past them. */
static int timed_phase(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                       long n, int batched, double *fold_us, double *mpi_us)
{
    const int apart = pc->with_mpi && env->opts->compare_apart;
    int status = apart ? timed_apart(env, b, pc, n, batched, fold_us, mpi_us)
                       : timed_turns(env, b, pc, n, batched, fold_us, mpi_us);
    pc->call0 += n;
    return status;
}

/* ---- the check -------------------------------------------------------------- */

/* The case's next fold call, on its pair, into a poisoned output (in place, or with
 * --buffers, its input written first), compared with the reference of its data set:
 * the root's (or, for allreduce, every rank's) result, and at the other ranks of reduce
 * the input, which must come back untouched. */
static int check_case(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                      const char *algorithm)
{
    const perf_options_t *o = env->opts;
    size_t esize = fold_dtype_size(o->dtype);
    size_t len = pc->count * esize;
    const int k = pair_of_call(b, pc->call0), set = set_of_call(b, pc->call0);
    void *recv = b->recv[k];
    void *in = input_of_pair(o, b, k);
    if (o->inplace || b->nsets > 1) {
        memcpy(in, b->input[set], len);
    }
    if (!o->inplace) {
        memset(recv, POISON_BYTE, len);
    }
    int status = fold_call(env, pc->coll, b->send ? b->send[k] : NULL, recv, pc->count);
    if (status != FOLD_OK) {
        return report_failure(env, pc, "fold", fold_status_string(status));
    }
    int has_result = pc->coll == PERF_COLL_ALLREDUCE || env->rank == o->root;
    unsigned char *checked = has_result ? recv : in;
    if (o->inject_rank == env->rank) {
        size_t index = o->inject_index < pc->count ? o->inject_index : pc->count - 1;
        checked[index * esize] ^= 0x01;   /* a wrong result that --check must catch */
    }
    char context[192];
    snprintf(context, sizeof(context), "on rank %d, %s %s, %zu bytes (count %zu)%s",
             env->rank, perf_coll_name(pc->coll), algorithm, pc->bytes, pc->count,
             has_result ? "" : ", input of a non-root rank");
    pc->mismatches = perf_check_compare(o->dtype, has_result ? b->expected[set]
                                                             : b->input[set],
                                        checked, pc->count, context, stderr);
    return FOLD_OK;
}

/* ---- statistics across ranks ------------------------------------------------ */

/* The largest value of every element across ranks, with one fold_allreduce(MAX) in
 * place. It runs with fold's own algorithm choice, so that an algorithm under test
 * does not also carry its own measurements. */
static int max_across_ranks(const perf_env_t *env, const perf_case_t *pc, double *values,
                            size_t n)
{
    const char *forced = NULL;
    if (pc->coll == PERF_COLL_ALLREDUCE && strcmp(pc->requested, "auto") != 0) {
        forced = pc->requested;
        fold_config_set(env->ctx, "ALLREDUCE_ALG", "auto");
    }
    int status = fold_allreduce(FOLD_IN_PLACE, values, n, FOLD_FLOAT64, FOLD_OP_MAX,
                                env->comm);
    if (forced != NULL) {
        fold_config_set(env->ctx, "ALLREDUCE_ALG", forced);
    }
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_perf: rank %d: gathering the times failed: %s\n", env->rank,
                fold_status_string(status));
    }
    return status;
}

/* Fewer timed iterations when the warm-ups (fold and MPI together) show that the size
 * would exceed its time budget; every rank takes the slowest rank's estimate. */
static int fit_time_budget(const perf_env_t *env, perf_case_t *pc, double *warmup_us)
{
    double budget_us = env->opts->time_per_size * 1e6;
    if (budget_us <= 0 || pc->warmups == 0) {
        return FOLD_OK;
    }
    /* The median warm-up: the first calls pay for connections and page faults. */
    perf_latency_t warm;
    perf_latency_summarize(warmup_us, (size_t)pc->warmups, &warm);
    double per_iteration = warm.median_us;
    int status = max_across_ranks(env, pc, &per_iteration, 1);
    if (status == FOLD_OK && per_iteration > 0) {
        double fits = budget_us / per_iteration;
        long floor_iters = pc->iterations < 10 ? pc->iterations : 10;
        if (fits < (double)pc->iterations) {
            pc->iterations = fits < (double)floor_iters ? floor_iters : (long)fits;
        }
    }
    return status;
}

/* Where the first calls sit in the gathered times: after the mismatch count. */
static double *gathered_first_us(const perf_case_t *pc)
{
    return pc->times + 2 * (size_t)pc->iterations + 1;
}

/* The first of PERF_FIRST_CALLS calls' times, and the worst of the others. */
static void first_calls_summary(const double *us, double *first, double *worst_later)
{
    *first = us[0];
    *worst_later = us[1];
    for (int i = 2; i < PERF_FIRST_CALLS; i++) {
        *worst_later = us[i] > *worst_later ? us[i] : *worst_later;
    }
}

static void fill_row(const perf_env_t *env, const perf_case_t *pc, const char *algorithm,
                     size_t segment_bytes, perf_row_t *row)
{
    const perf_options_t *o = env->opts;
    size_t n = (size_t)pc->iterations;
    const double *first_us = gathered_first_us(pc);
    memset(row, 0, sizeof(*row));
    row->coll = pc->coll;
    snprintf(row->requested, sizeof(row->requested), "%s", pc->requested);
    snprintf(row->algorithm, sizeof(row->algorithm), "%s", algorithm);
    row->segment_bytes = segment_bytes;
    row->bytes      = pc->bytes;
    row->count      = pc->count;
    row->iterations = pc->iterations;
    row->first_calls = pc->first_calls;
    perf_latency_summarize(pc->times, n, &row->latency);
    first_calls_summary(first_us, &row->first_us, &row->worst2_10_us);
    row->algbw_gbs = perf_algbw_gbs(pc->bytes, row->latency.median_us);
    row->busbw_gbs = row->algbw_gbs * perf_busbw_factor(pc->coll, env->ranks);
    row->bound_us  = perf_bound_us(&env->layout, pc->coll, pc->bytes, o->root);
    row->probe_gbs = perf_probe_slowest_node(&env->layout);
    row->checked   = o->check;
    row->check_ok  = pc->times[2 * n] == 0;
    if (pc->with_mpi) {
        perf_latency_t mpi;
        perf_latency_summarize(pc->times + n, n, &mpi);
        row->has_mpi       = 1;
        row->mpi_median_us = mpi.median_us;
        row->speedup = row->latency.median_us > 0 ? mpi.median_us / row->latency.median_us
                                                  : NAN;
        first_calls_summary(first_us + PERF_FIRST_CALLS, &row->mpi_first_us,
                            &row->mpi_worst2_10_us);
    }
}

/* ---- the sweep -------------------------------------------------------------- */

/* --settle: calls of fold alone, untimed, before anything is timed, while fold tries
 * rivals for these arguments (FOLD_ONLINE: up to 4 candidates in blocks of calls), so
 * that every timed call sees the choice they settle on; a warmed-only figure. At least
 * one call; every rank sees the trials end at the same call. */
#define PERF_SETTLE_MAX 128
static int settle_choice(const perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc)
{
    const perf_options_t *o = env->opts;
    int status = FOLD_OK, trying = 0;
    pc->first_calls = 0;
    do {
        status = iteration_of(env, b, pc, pc->first_calls++, RUN_FOLD, NULL);
        if (status == FOLD_OK) {
            status = fold_selection_trying(env->comm, perf_coll_name(pc->coll), pc->count,
                                           o->dtype, o->op, o->root, &trying);
        }
    } while (status == FOLD_OK && trying && pc->first_calls < PERF_SETTLE_MAX);
    pc->call0 += pc->first_calls;
    return status;
}

/* --probe-size each: the streaming probe over this size's own footprint, before its
 * calls (it evicts their buffers, which the warm-ups bring back), so that bound_us
 * holds where the buffers stay in the caches too; below PERF_PROBE_EACH_MIN, where
 * the bound is a few nanoseconds, none. */
#define PERF_PROBE_EACH_MIN ((size_t)4096)
static int probe_size(perf_env_t *env, const perf_case_t *pc)
{
    const perf_options_t *o = env->opts;
    if (pc->bytes < PERF_PROBE_EACH_MIN) {
        for (int node = 0; node < env->layout.nnodes; node++) {
            env->layout.node_bw_gbs[node] = NAN;
        }
        return FOLD_OK;
    }
    size_t footprint = perf_probe_footprint(&env->layout, env->rank, pc->coll, pc->bytes,
                                            o->root);
    return perf_probe_bandwidth(&env->layout, env->comm, footprint);
}

/* The calls of a size as they happen: with --settle the untimed ones, then the first
 * PERF_FIRST_CALLS each timed on its own, the warm-ups (as the timed calls run, so that
 * they find the caches as those will) and the timed iterations, fewer where the warm-ups
 * show they would exceed the size's time budget. */
static int time_case(perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc)
{
    const long nw = pc->warmups;
    double *warmup_us = calloc(3 * (size_t)nw + 1, sizeof(double));
    if (warmup_us == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    int status = env->opts->probe_each ? probe_size(env, pc) : FOLD_OK;
    if (status == FOLD_OK) {
        status = fold_barrier(env->comm);
    }
    if (status == FOLD_OK && env->opts->settle) {
        status = settle_choice(env, b, pc);
    }
    if (status == FOLD_OK) {
        status = timed_phase(env, b, pc, PERF_FIRST_CALLS, 0, pc->first_us,
                             pc->first_us + PERF_FIRST_CALLS);
    }
    const int batched = env->opts->batch;
    double *fold_w = warmup_us + nw, *mpi_w = warmup_us + 2 * nw;
    if (status == FOLD_OK) {
        status = timed_phase(env, b, pc, nw, batched, fold_w, mpi_w);
    }
    for (long it = 0; it < nw; it++) {
        warmup_us[it] = fold_w[it] + mpi_w[it];
    }
    if (status == FOLD_OK) {
        status = fit_time_budget(env, pc, warmup_us);
    }
    free(warmup_us);
    double *fold_us = pc->times, *mpi_us = pc->times + pc->iterations;
    for (long it = 0; it < pc->iterations; it++) {
        mpi_us[it] = 0;
    }
    if (status == FOLD_OK) {
        status = timed_phase(env, b, pc, pc->iterations, batched, fold_us, mpi_us);
    }
    return status;
}

static int run_case(perf_env_t *env, const perf_buffers_t *b, perf_case_t *pc,
                    perf_row_t *row)
{
    int status = time_case(env, b, pc);
    /* What selection picked for these very buffers (fold memory may change it), asked
     * after the calls: their first ones may have tried rivals (FOLD_ONLINE). */
    const perf_options_t *o = env->opts;
    const int has_out = pc->coll == PERF_COLL_ALLREDUCE || env->rank == o->root;
    size_t segment = 0;
    const char *selected = fold_selected_for_buffers(
        env->comm, perf_coll_name(pc->coll), o->inplace ? FOLD_IN_PLACE : b->send[0],
        has_out ? b->recv[0] : NULL, pc->count, o->dtype, &segment);
    char algorithm[PERF_NAME_LEN];
    snprintf(algorithm, sizeof(algorithm), "%s%s%s", selected ? selected : pc->requested,
             pc->codec ? "+" : "", pc->codec ? pc->codec : "");
    pc->mismatches = 0;
    if (status == FOLD_OK && env->opts->check) {
        status = check_case(env, b, pc, algorithm);
    }
    if (status != FOLD_OK) {
        return status;
    }
    size_t n = (size_t)pc->iterations;
    pc->times[2 * n] = (double)pc->mismatches;
    memcpy(gathered_first_us(pc), pc->first_us, sizeof(pc->first_us));
    status = max_across_ranks(env, pc, pc->times, 2 * n + 1 + 2 * PERF_FIRST_CALLS);
    if (status == FOLD_OK) {
        fill_row(env, pc, algorithm, segment, row);
    }
    return status;
}

/* Element counts of the sweep, without repeats (small sizes may round to one count). */
static size_t sweep_counts(const perf_options_t *o, size_t *counts, size_t cap)
{
    size_t esize = fold_dtype_size(o->dtype), n = 0, last = 0;
    for (size_t bytes = o->begin_bytes; bytes <= o->end_bytes && n < cap; bytes *= o->factor) {
        size_t count = bytes / esize;
        if (count > 0 && count != last) {
            counts[n++] = last = count;
        }
        if (bytes > o->end_bytes / o->factor) {
            break;
        }
    }
    return n;
}

static int mpi_usable(const perf_env_t *env, size_t max_count)
{
    const char *why = "";
    if (!env->opts->compare_mpi) {
        return 0;
    }
    if (perf_mpi_supports(env->opts->dtype, env->opts->op, max_count, &why)) {
        return 1;
    }
    if (env->rank == 0) {
        fprintf(stderr, "fold_perf: note: --compare mpi skipped for %s %s: %s\n",
                fold_dtype_name(env->opts->dtype), fold_op_name(env->opts->op), why);
    }
    return 0;
}

/* What one sweep shares across its (collective, algorithm, codec) runs. */
typedef struct perf_sweep {
    perf_env_t           *env;
    perf_results_t       *results;
    perf_row_fn           on_row;
    void                 *arg;
    const perf_buffers_t *buffers;
    const size_t         *counts;
    size_t                ncounts;
    double               *times;
    int                   with_mpi;
    perf_progress_t       progress;
    size_t                step;
} perf_sweep_t;

/* Every size of one (collective, algorithm, codec). */
static int sweep_sizes(perf_sweep_t *sw, int c, int a, const char *codec)
{
    const perf_options_t *o = sw->env->opts;
    size_t esize = fold_dtype_size(o->dtype);
    int status = FOLD_OK;
    for (size_t s = 0; s < sw->ncounts && status == FOLD_OK; s++, sw->step++) {
        perf_case_t pc = {
            .coll = o->colls[c], .requested = o->algorithms[a], .codec = codec,
            .count = sw->counts[s], .bytes = sw->counts[s] * esize, .with_mpi = sw->with_mpi,
            .times = sw->times,
        };
        pc.iterations = perf_iterations_for(o, pc.bytes);
        pc.warmups    = perf_warmups_for(o, pc.iterations);
        char what[160];
        snprintf(what, sizeof(what), "%s %s%s%s, %zu bytes", perf_coll_name(pc.coll),
                 pc.requested, codec ? "+" : "", codec ? codec : "", pc.bytes);
        perf_progress_update(&sw->progress, sw->step, what);
        perf_row_t row;
        status = run_case(sw->env, sw->buffers, &pc, &row);
        if (status != FOLD_OK) {
            break;
        }
        if (perf_results_add(sw->results, &row) != 0) {
            return FOLD_ERR_NO_MEMORY;
        }
        if (sw->env->rank == 0 && sw->on_row != NULL) {
            perf_progress_clear(&sw->progress);
            sw->on_row(&sw->results->info, &row, sw->arg);
        }
    }
    return status;
}

int perf_bench_run(perf_env_t *env, perf_results_t *results, perf_row_fn on_row, void *arg)
{
    const perf_options_t *o = env->opts;
    size_t counts[128];
    size_t ncounts = sweep_counts(o, counts, sizeof(counts) / sizeof(counts[0]));
    size_t esize = fold_dtype_size(o->dtype);
    if (ncounts == 0) {
        return FOLD_OK;
    }
    perf_buffers_t buffers;
    int status = buffers_init(&buffers, env, counts[ncounts - 1]);
    if (status != FOLD_OK) {
        fprintf(stderr, "fold_perf: rank %d: no memory for %d buffer pair(s) of %zu bytes\n",
                env->rank, o->rotate, counts[ncounts - 1] * esize);
        return status;
    }
    double *times = malloc((2 * (size_t)o->iters + 1 + 2 * PERF_FIRST_CALLS) * sizeof(double));
    if (times == NULL) {
        buffers_release(&buffers);
        return FOLD_ERR_NO_MEMORY;
    }
    int nvariants = o->ncodecs > 0 ? o->ncodecs : 1;
    perf_sweep_t sw = {
        .env = env, .results = results, .on_row = on_row, .arg = arg, .buffers = &buffers,
        .counts = counts, .ncounts = ncounts, .times = times,
        .with_mpi = mpi_usable(env, counts[ncounts - 1]),
    };
    perf_progress_init(&sw.progress, env->rank == 0,
                       (size_t)o->ncolls * (size_t)o->nalgorithms * ncounts * (size_t)nvariants);

    for (int c = 0; c < o->ncolls && status == FOLD_OK; c++) {
        for (int a = 0; a < o->nalgorithms && status == FOLD_OK; a++) {
            if (!env->usable[c][a]) {
                sw.step += ncounts * (size_t)nvariants;
                continue;
            }
            status = fold_config_set(env->ctx, alg_variable(o->colls[c]), o->algorithms[a]);
            for (int k = 0; k < nvariants && status == FOLD_OK; k++) {
                const char *codec = o->ncodecs > 0 ? o->codecs[k] : NULL;
                if (codec != NULL) {
                    status = fold_config_set(env->ctx, "CODEC", codec);
                }
                if (status == FOLD_OK) {
                    status = sweep_sizes(&sw, c, a, codec);
                }
            }
            fold_config_set(env->ctx, alg_variable(o->colls[c]), "auto");
        }
    }
    perf_progress_clear(&sw.progress);
    free(times);
    buffers_release(&buffers);
    return status;
}
