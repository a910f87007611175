/*
 * Opaque elements (fold_dtype_opaque) through every algorithm of the registry on the
 * loopback transport: allreduce and reduce of records whose sizes are no power of
 * two (13, 40 and 1000 bytes, and the largest, 4096) with a non-commutative user op,
 * on 1-7 ranks and on 4 ranks over two nodes, counts 0, 1, 7 and 300, first and last
 * root, in place and not, in 2 KiB segments that no element size divides. The op
 * composes each record's first 8 bytes as an affine map (order matters) and sums its
 * other bytes: an algorithm that split a record, reduced it twice or out of rank order
 * gives another result than the reference, which folds the ranks' records left to
 * right here.
 */
#include <criterion/criterion.h>

#include "coll/alg.h"
#include "coll_call.h"
#include "loopback_harness.h"
#include "test_reduced.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t counts[] = {0, 1, 7, 300};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define MOST    300

/* Calls of the op that saw another datatype than the call's, or a size not its own. */
static atomic_int wrong_calls;

/* x = in op x on one record: the affine maps (a, b) compose as in(x(.)), the rest
 * adds bytewise. */
static void record_op(const unsigned char *in, unsigned char *x, size_t size)
{
    uint32_t a1, b1, a2, b2;
    memcpy(&a1, in, 4);
    memcpy(&b1, in + 4, 4);
    memcpy(&a2, x, 4);
    memcpy(&b2, x + 4, 4);
    uint32_t a = a1 * a2, b = a1 * b2 + b1;
    memcpy(x, &a, 4);
    memcpy(x + 4, &b, 4);
    for (size_t j = 8; j < size; j++) {
        x[j] = (unsigned char)(x[j] + in[j]);
    }
}

typedef struct opaque_case {
    const fold_alg_t *alg;
    fold_coll_t       coll;
    size_t            size;   /* bytes per record */
    size_t            count;
    int               root;
    int               inplace;
} opaque_case_t;

typedef struct run {
    fold_op_t        op;
    opaque_case_t   *cases;
    size_t           ncases;
    _Atomic int      failures;
    char             first[256];
    atomic_flag      first_taken;
} run_t;

static void user_fn(const void *in, void *inout, size_t count, fold_dtype_t dtype, void *arg)
{
    const size_t *size = arg;
    if (fold_dtype_size(dtype) != *size || strcmp(fold_dtype_name(dtype), "opaque") != 0) {
        atomic_fetch_add(&wrong_calls, 1);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        record_op((const unsigned char *)in + i * *size, (unsigned char *)inout + i * *size,
                  *size);
    }
}

static void fill(unsigned char *rec, size_t size, int rank, size_t i)
{
    uint32_t a = 2u * (uint32_t)(rank + (int)(i % 5)) + 1u, b = (uint32_t)(rank * 31 + i * 7 + 1);
    memcpy(rec, &a, 4);
    memcpy(rec + 4, &b, 4);
    for (size_t j = 8; j < size; j++) {
        rec[j] = (unsigned char)(rank * 13 + i * 3 + j);
    }
}

/* Every rank's records folded left to right, the reference the calls must match. */
static void expected(unsigned char *want, size_t size, size_t count, int ranks)
{
    unsigned char *rec = malloc(size);
    for (size_t i = 0; i < count; i++) {
        fill(want + i * size, size, 0, i);
        for (int r = 1; r < ranks; r++) {
            fill(rec, size, r, i);
            /* acc op x_r: x_r is inout, acc the lower ranks' in */
            record_op(want + i * size, rec, size);
            memcpy(want + i * size, rec, size);
        }
    }
    free(rec);
}

static void note_failure(run_t *run, const opaque_case_t *c, int rank, const char *detail)
{
    atomic_fetch_add(&run->failures, 1);
    if (!atomic_flag_test_and_set(&run->first_taken)) {
        snprintf(run->first, sizeof(run->first), "%s %s size=%zu count=%zu root=%d inplace=%d "
                 "rank=%d: %s", c->coll == FOLD_COLL_ALLREDUCE ? "allreduce" : "reduce",
                 c->alg->name, c->size, c->count, c->root, c->inplace, rank, detail);
    }
}

static int rank_main(fold_context_t *ctx, int rank, int size, void *arg)
{
    run_t *run = arg;
    fold_comm_h world = fold_comm_world(ctx);
    int failed = 0;
    for (size_t k = 0; k < run->ncases; k++) {
        const opaque_case_t *c = &run->cases[k];
        size_t bytes = c->count * c->size;
        unsigned char *input = malloc(bytes + 1), *pristine = malloc(bytes + 1);
        unsigned char *recv = malloc(bytes + 1), *want = malloc(bytes + 1);
        for (size_t i = 0; i < c->count; i++) {
            fill(input + i * c->size, c->size, rank, i);
        }
        memcpy(pristine, input, bytes);
        memset(recv, 0x5a, bytes);
        expected(want, c->size, c->count, size);
        fold_dtype_t dt;
        int status = fold_dtype_opaque(c->size, &dt);
        const char *name = c->coll == FOLD_COLL_ALLREDUCE ? "ALLREDUCE_ALG" : "REDUCE_ALG";
        if (status == FOLD_OK) {
            status = fold_config_set(ctx, name, c->alg->name);
        }
        coll_call_t call = {.coll = c->coll, .dt = dt, .op = run->op, .root = c->root,
                            .inplace = c->inplace, .count = c->count, .input = (char *)input,
                            .pristine = (const char *)pristine, .recv = (char *)recv};
        lh_barrier(ctx);
        if (status == FOLD_OK) {
            status = coll_call_run(&call, rank, world);
        }
        char detail[160];
        coll_call_check(&call, rank, status, want, detail, sizeof(detail));
        if (detail[0] != '\0') {
            note_failure(run, c, rank, detail);
            failed = 1;
        }
        free(input);
        free(pristine);
        free(recv);
        free(want);
        lh_barrier(ctx);   /* every rank is done with the case before the next starts */
    }
    return failed;
}

static void add_cases(opaque_case_t *cases, size_t *n, const fold_alg_t *alg, fold_coll_t coll,
                      size_t size, int ranks)
{
    int reduce = coll == FOLD_COLL_REDUCE;
    for (size_t k = 0; k < NCOUNTS; k++) {
        int roots[2] = {0, ranks - 1};
        for (int ri = 0; ri < (reduce && ranks > 1 ? 2 : 1); ri++) {
            for (int inplace = 0; inplace <= 1; inplace++) {
                cases[(*n)++] = (opaque_case_t){alg, coll, size, counts[k], roots[ri], inplace};
            }
        }
    }
}

/* Every algorithm and collective with records of `size` bytes. */
static void run_size(int ranks, int nnodes, size_t size)
{
    setenv("FOLD_TIMEOUT", "60", 0);
    setenv("FOLD_SEGMENT_SIZE", "2k", 0);   /* no record size divides it */
    static size_t current;   /* the op's arg: the record size of this run */
    current = size;
    run_t run;
    memset(&run, 0, sizeof(run));
    atomic_flag_clear(&run.first_taken);
    cr_assert_eq(fold_op_create(user_fn, &current, 0, &run.op), FOLD_OK);
    size_t cap = 0;
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        cap += 2 * NCOUNTS * 4;
    }
    run.cases = malloc(cap * sizeof(*run.cases));
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            if (fold_alg_builder(fold_alg_all[a], (fold_coll_t)coll) != NULL) {
                add_cases(run.cases, &run.ncases, fold_alg_all[a], (fold_coll_t)coll, size,
                          ranks);
            }
        }
    }
    atomic_store(&wrong_calls, 0);
    int result = lh_run_nodes(ranks, nnodes, rank_main, &run);
    cr_expect_eq(run.failures, 0, "%d failures; first: %s", run.failures, run.first);
    cr_expect_eq(result, run.failures ? -1 : 0);
    cr_expect_eq(atomic_load(&wrong_calls), 0, "the op saw another datatype or size");
    cr_assert_eq(fold_op_free(run.op), FOLD_OK);
    free(run.cases);
}

/* Under the sanitizers (fold_test_reduced) the smallest and largest records, and
 * the smallest alone on 5 and 7 ranks. */
static void run_ranks(int ranks, int nnodes)
{
    static const size_t sizes[] = {13, FOLD_OPAQUE_MAX_SIZE, 40, 1000};
    const size_t all = sizeof(sizes) / sizeof(sizes[0]);
    const size_t n = !fold_test_reduced() ? all : ranks > 4 ? 1 : 2;
    for (size_t s = 0; s < n; s++) {
        run_size(ranks, nnodes, sizes[s]);
    }
}

Test(opaque, ranks_1) { run_ranks(1, 0); }
Test(opaque, ranks_2) { run_ranks(2, 0); }
Test(opaque, ranks_3) { run_ranks(3, 0); }
Test(opaque, ranks_4) { run_ranks(4, 0); }
Test(opaque, ranks_5) { run_ranks(5, 0); }
Test(opaque, ranks_7) { run_ranks(7, 0); }
Test(opaque, ranks_4_on_2_nodes) { run_ranks(4, 2); }

/* A predefined op on opaque records is refused on every rank, with nothing written. */
static int predefined_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)rank;
    (void)size;
    (void)arg;
    fold_dtype_t dt;
    unsigned char in[24 * 3] = {1}, out[24 * 3];
    memset(out, 0x77, sizeof(out));
    if (fold_dtype_opaque(24, &dt) != FOLD_OK) {
        return 1;
    }
    fold_comm_h world = fold_comm_world(ctx);
    int a = fold_allreduce(in, out, 3, dt, FOLD_OP_SUM, world);
    int r = fold_reduce(in, out, 3, dt, FOLD_OP_MAX, 0, world);
    for (size_t i = 0; i < sizeof(out); i++) {
        if (out[i] != 0x77) {
            return 1;
        }
    }
    return a == FOLD_ERR_INVALID_ARG && r == FOLD_ERR_INVALID_ARG ? 0 : 1;
}

Test(opaque, predefined_ops_refused)
{
    int result = -1;
    char *log = lh_run_logged(3, predefined_rank, NULL, &result);
    cr_expect_eq(result, 0);
    cr_expect(strstr(log, "not defined for opaque") != NULL, "log:\n%s", log);
    free(log);
}
