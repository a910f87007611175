/*
 * shm_flat's tiny-message fast path (runtime/node/fast.c), ranks as threads on
 * one node: a long random sequence of blocking allreduces and reduces (random
 * roots, counts, datatypes with pair and complex types among them, in place or
 * not, a non-commutative op in between, which takes an ordered algorithm) that
 * exercises slot reuse across call kinds and row lengths (lined rows, and tails up to
 * the node's limit), checked against the independent reference; the calls must really
 * have taken the fast path. A rank that never comes makes the others time out naming
 * it. The limit's border: one element less takes the path, the limit itself a schedule.
 */
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "loopback_harness.h"
#include "stderr_capture.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCALLS 400

typedef struct fast_call {
    int          allreduce, root, inplace;
    size_t       count;
    fold_dtype_t dt;
    fold_op_t    op;
} fast_call_t;

typedef struct fast_run {
    fast_call_t calls[NCALLS];
    fold_op_t   affine;
} fast_run_t;

static const struct { fold_dtype_t dt; fold_op_t op; } combos[] = {
    {FOLD_FLOAT32, FOLD_OP_SUM}, {FOLD_INT64, FOLD_OP_PROD}, {FOLD_FLOAT64, FOLD_OP_MAX},
    {FOLD_UINT8, FOLD_OP_BXOR},  {FOLD_INT32, FOLD_OP_SUM},  {FOLD_FLOAT16, FOLD_OP_SUM},
    {FOLD_DOUBLE_INT, FOLD_OP_MAXLOC}, {FOLD_SHORT_INT, FOLD_OP_MINLOC},
    {FOLD_COMPLEX_FLOAT64, FOLD_OP_PROD},
};
#define NCOMBOS (int)(sizeof(combos) / sizeof(combos[0]))

static void make_calls(fast_run_t *run, int size)
{
    unsigned seed = 12345u + (unsigned)size;
    for (int k = 0; k < NCALLS; k++) {
        fast_call_t *c = &run->calls[k];
        c->allreduce = rand_r(&seed) % 3 != 0;
        c->root      = rand_r(&seed) % size;
        c->inplace   = rand_r(&seed) % 2;
        int pick     = rand_r(&seed) % (NCOMBOS + 1);
        if (pick == NCOMBOS) {
            c->dt = FOLD_UINT64;
            c->op = run->affine;
        } else {
            c->dt = combos[pick].dt;
            c->op = combos[pick].op;
        }
        /* Half the rows short (lined, or a short tail), half up to the limit. */
        size_t most = (k % 2 ? fold_node_fast_limit(size) - 1 : 2048) / fold_dtype_size(c->dt);
        c->count = 1 + (size_t)rand_r(&seed) % most;
    }
}

/* Call k's inputs are the reference's at elements shift .. shift + count, so that
 * every call posts different data (a stale slot would show). */
static int fast_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    fast_run_t *run = arg;
    fold_comm_h w = fold_comm_world(ctx);
    size_t cap = (FOLD_FAST_MAX_BYTES + 8 * NCALLS) * 16;   /* up to 16-byte elements */
    char *all_in = malloc(cap), *all_want = malloc(cap), out[FOLD_FAST_MAX_BYTES];
    int bad = 0;
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "REDUCE_ALG", "shm_flat");
    for (int k = 0; k < NCALLS && !bad; k++) {
        const fast_call_t *c = &run->calls[k];
        size_t es = fold_dtype_size(c->dt), shift = (size_t)k * 5;
        int has_out = c->allreduce || rank == c->root;
        ref_fill_input(c->dt, c->op, rank, shift + c->count, all_in);
        for (size_t i = shift; i < shift + c->count; i++) {
            ref_expected(c->dt, c->op, size, i, all_want);
        }
        const char *in = all_in + shift * es, *want = all_want + shift * es;
        const void *sbuf = in;
        if (c->inplace && has_out) {
            memcpy(out, in, c->count * es);
            sbuf = FOLD_IN_PLACE;
        }
        int st = c->allreduce ? fold_allreduce(sbuf, out, c->count, c->dt, c->op, w)
                              : fold_reduce(sbuf, has_out ? out : NULL, c->count, c->dt, c->op,
                                            c->root, w);
        int same = 1;
        for (size_t i = 0; i < c->count && has_out; i++) {
            same &= ref_same_element(c->dt, out, want, i);
        }
        if (st != FOLD_OK || !same) {
            fprintf(stderr, "rank %d call %d (%s root %d count %zu %s): %s\n", rank, k,
                    c->allreduce ? "allreduce" : "reduce", c->root, c->count,
                    fold_dtype_name(c->dt), st != FOLD_OK ? fold_status_string(st)
                                                        : "wrong result");
            bad = 1;
        }
    }
    /* shm_flat serves commutative ops (the others go to an ordered algorithm). */
    uint64_t commutative = 0;
    for (int k = 0; k < NCALLS; k++) {
        commutative += run->calls[k].op < FOLD_OP_USER_FIRST;
    }
    fold_comm_t *comm = fold_comm_world(ctx);
    if (!bad && (comm->node == NULL || comm->node->fast_calls != commutative)) {
        fprintf(stderr, "rank %d: %llu of %llu calls took the fast path\n", rank,
                comm->node ? (unsigned long long)comm->node->fast_calls : 0ull,
                (unsigned long long)commutative);
        bad = 1;
    }
    /* Long rows' data never lands where short rows' readers poll (a number there
     * would pass for a post). */
    if (!bad && !fold_node_fast_seqs_sane(comm->node)) {
        fprintf(stderr, "rank %d: data in a seq word of the tiny path's region\n", rank);
        bad = 1;
    }
    free(all_in);
    free(all_want);
    return bad;
}

static void run_sequence(int size)
{
    fast_run_t run;
    cr_assert_eq(fold_op_create(ref_affine_fn, NULL, 0, &run.affine), FOLD_OK);
    make_calls(&run, size);
    cr_expect_eq(lh_run(size, fast_rank, &run), 0);
    fold_op_free(run.affine);
}

Test(shm_fast, sequence_2) { run_sequence(2); }
Test(shm_fast, sequence_3) { run_sequence(3); }
Test(shm_fast, sequence_5) { run_sequence(5); }

/* Rank 1 skips the second call: rank 0 times out naming it, and the node state is
 * given up, so its next call fails at once instead of waiting again. */
static int absent_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "TIMEOUT", "1");
    int v = rank + 1, sum = 0, ok = 1;
    ok &= fold_allreduce(&v, &sum, 1, FOLD_INT32, FOLD_OP_SUM, w) == FOLD_OK && sum == 3;
    if (rank == 0) {
        ok &= fold_allreduce(&v, &sum, 1, FOLD_INT32, FOLD_OP_SUM, w) == FOLD_ERR_TIMEOUT;
        ok &= fold_allreduce(&v, &sum, 1, FOLD_INT32, FOLD_OP_SUM, w) != FOLD_OK;
    }
    return !ok;
}

Test(shm_fast, absent_rank_times_out)
{
    int result;
    char *log = lh_run_logged(2, absent_rank, NULL, &result);
    cr_expect_eq(result, 0, "%s", log);
    EXPECT_LOG_HAS(log, "rank 0 of 2: no progress for 1.0 s (FOLD_TIMEOUT=1) waiting for "
                        "rank 1's input of call 2");
    EXPECT_LOG_HAS(log, "its flags are out of step, so this communicator cannot use it again");
    free(log);
}

/* The node's limit: 64 KiB for 2 ranks, halved as ranks are added down to 4 KiB
 * (their tails share one budget), a power of two, none past FOLD_FAST_MAX_RANKS;
 * the region holds every rank's slots with tails of the limit. */
Test(shm_fast, limit_by_ranks)
{
    cr_expect_eq(fold_node_fast_limit(1), 65536);
    cr_expect_eq(fold_node_fast_limit(2), 65536);
    cr_expect_eq(fold_node_fast_limit(3), 32768);
    cr_expect_eq(fold_node_fast_limit(4), 32768);
    cr_expect_eq(fold_node_fast_limit(8), 16384);
    cr_expect_eq(fold_node_fast_limit(9), 8192);
    cr_expect_eq(fold_node_fast_limit(32), 4096);
    cr_expect_eq(fold_node_fast_limit(64), 4096);
    cr_expect_eq(fold_node_fast_limit(FOLD_FAST_MAX_RANKS), 4096);
    cr_expect_eq(fold_node_fast_limit(FOLD_FAST_MAX_RANKS + 1), 0);
    cr_expect_eq(fold_node_fast_limit(0), 0);
    for (int n = 1; n <= 256; n++) {
        size_t limit = fold_node_fast_limit(n);
        cr_expect(limit >= 4096 && limit <= FOLD_FAST_MAX_BYTES && (limit & (limit - 1)) == 0,
                  "%d ranks: %zu", n, limit);
        cr_expect_geq(fold_node_fast_region_bytes(n), (size_t)n * FOLD_FAST_SLOTS * limit);
        cr_expect(n == 1 || fold_node_fast_limit(n) <= fold_node_fast_limit(n - 1));
    }
}

/* Rows at the border, every rank's input different: the limit itself takes the path
 * (and reads right: the tail holds exactly the limit's bytes), one element more runs
 * the schedule. */
static int border_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_t *w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "REDUCE_ALG", "shm_flat");
    const size_t limit = fold_node_fast_limit(size), n = limit + 1;   /* uint8 elements */
    uint8_t *in = malloc(n), *out = malloc(n);
    int bad = in == NULL || out == NULL;
    for (int pass = 0; pass < 4 && !bad; pass++) {
        const size_t count = pass % 2 == 0 ? limit : n;   /* at the limit, then above */
        const int reduce = pass >= 2;
        for (size_t i = 0; i < count; i++) {
            in[i] = (uint8_t)(i * 7 + (size_t)rank * 13 + (size_t)pass);
        }
        uint64_t before = w->node != NULL ? w->node->fast_calls : 0;
        memset(out, 0xee, n);
        int st = reduce ? fold_reduce(in, out, count, FOLD_UINT8, FOLD_OP_SUM, size - 1, w)
                        : fold_allreduce(in, out, count, FOLD_UINT8, FOLD_OP_SUM, w);
        bad |= st != FOLD_OK;
        for (size_t i = 0; i < count && !bad && (!reduce || rank == size - 1); i++) {
            unsigned want = 0;
            for (int r = 0; r < size; r++) {
                want += (unsigned)(uint8_t)(i * 7 + (size_t)r * 13 + (size_t)pass);
            }
            bad |= out[i] != (uint8_t)want;
        }
        uint64_t fast = w->node != NULL ? w->node->fast_calls - before : 0;
        if (fast != (count <= limit ? 1u : 0u)) {
            fprintf(stderr, "rank %d: %zu bytes took the fast path %llu times\n", rank, count,
                    (unsigned long long)fast);
            bad = 1;
        }
    }
    free(in);
    free(out);
    return bad;
}

Test(shm_fast, limit_border_2) { cr_expect_eq(lh_run(2, border_rank, NULL), 0); }
Test(shm_fast, limit_border_9) { cr_expect_eq(lh_run(9, border_rank, NULL), 0); }

/* A loop of calls that ask the same (count, datatype, op) goes straight to the path
 * after the first (coll_api.c): roots, in place or not and the inputs still come from
 * each call, and a forced algorithm set in the middle of the loop takes the next call
 * off the path, and back when unset. */
#define REPEATS 60

static int repeated_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_t *w = fold_comm_world(ctx);
    int32_t in[5], out[5];
    int bad = 0;
    for (int k = 0; k < REPEATS && !bad; k++) {
        const int reduce = k % 2, root = (k / 2) % size, inplace = k % 3 == 0;
        const int has_out = !reduce || rank == root;
        const int off_path = k >= REPEATS / 3 && k < 2 * REPEATS / 3;   /* forced ring */
        if (k == REPEATS / 3 || k == 2 * REPEATS / 3) {
            fold_config_set(ctx, "ALLREDUCE_ALG", off_path ? "ring" : "auto");
            fold_config_set(ctx, "REDUCE_ALG", off_path ? "binomial" : "auto");
        }
        for (int i = 0; i < 5; i++) {
            in[i] = (k + 1) * 1000 + rank * 10 + i;
        }
        memset(out, 0x5a, sizeof(out));
        const void *sbuf = in;
        if (inplace && has_out) {
            memcpy(out, in, sizeof(in));
            sbuf = FOLD_IN_PLACE;
        }
        uint64_t before = w->node != NULL ? w->node->fast_calls : 0;
        int st = reduce ? fold_reduce(sbuf, has_out ? out : NULL, 5, FOLD_INT32, FOLD_OP_SUM,
                                      root, w)
                        : fold_allreduce(sbuf, out, 5, FOLD_INT32, FOLD_OP_SUM, w);
        bad |= st != FOLD_OK;
        for (int i = 0; i < 5 && has_out && !bad; i++) {
            int32_t want = 0;
            for (int r = 0; r < size; r++) {
                want += (k + 1) * 1000 + r * 10 + i;
            }
            bad |= out[i] != want;
        }
        uint64_t fast = w->node != NULL ? w->node->fast_calls - before : 0;
        if (bad || fast != (off_path ? 0u : 1u)) {
            fprintf(stderr, "rank %d call %d (%s, root %d%s): %s, %llu on the path\n", rank, k,
                    reduce ? "reduce" : "allreduce", root, inplace ? ", in place" : "",
                    st != FOLD_OK ? fold_status_string(st) : bad ? "wrong result" : "right",
                    (unsigned long long)fast);
            bad = 1;
        }
    }
    return bad;
}

Test(shm_fast, repeated_calls_2) { cr_expect_eq(lh_run(2, repeated_rank, NULL), 0); }
Test(shm_fast, repeated_calls_3) { cr_expect_eq(lh_run(3, repeated_rank, NULL), 0); }
