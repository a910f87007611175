/*
 * The full correctness matrix (tests/coll_matrix.h), once, on the loopback transport:
 * every algorithm of the registry against the independent reference, rank counts
 * {1,2,3,4,5,7,8,13,16,33} and 2 and 4 ranks on two nodes, counts {0,1,7,1024,
 * 2^16+3}, every root (for the large count: first, middle and last), in place and
 * not, a rotation of datatype x op pairs, and a non-commutative user op. The large
 * count runs in 2 KiB segments, so it crosses as many segment boundaries as 2^20+3
 * elements in the default 128 KiB ones; large_default_segments adds that size in the
 * default segments, for what depends on bytes (threaded reductions, rendezvous,
 * node segment chunks). FOLD_TEST_MATRIX=slice runs one case per algorithm,
 * collective and count instead (the rank-map variants in tests/CMakeLists.txt).
 */
#include <criterion/criterion.h>

#include "coll_call.h"
#include "coll_matrix.h"
#include "coll_reference.h"
#include "loopback_harness.h"
#include "test_reduced.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_COUNT   ((size_t)(1u << 16) + 3)
#define LARGEST_COUNT ((size_t)(1u << 20) + 3)

typedef struct matrix {
    coll_case_t    *cases;
    size_t          ncases;
    void           *expected;       /* shared, filled cooperatively per case */
    pthread_mutex_t lock;
    int             failures;
    char            first_failure[512];
} matrix_t;

static void record_failure(matrix_t *m, const coll_case_t *c, int rank, int size,
                           const char *detail)
{
    pthread_mutex_lock(&m->lock);
    if (m->failures++ == 0) {
        char name[200];
        coll_case_name(c, size, name, sizeof(name));
        snprintf(m->first_failure, sizeof(m->first_failure), "%s rank=%d: %s", name, rank,
                 detail);
    }
    pthread_mutex_unlock(&m->lock);
}

static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v != NULL && strcmp(v, value) == 0;
}

/* FOLD_TEST_REDUCED (test_reduced.h): the release stage ran the whole matrix, so the
 * large count keeps to a few rank counts. */

static int run_case(fold_context_t *ctx, int rank, int size, matrix_t *m, const coll_case_t *c)
{
    size_t es = fold_dtype_size(c->dt);
    size_t n = c->count;
    fold_comm_h world = fold_comm_world(ctx);

    /* Everyone computes its share of the expected result. */
    size_t lo = n * (size_t)rank / (size_t)size, hi = n * (size_t)(rank + 1) / (size_t)size;
    for (size_t i = lo; i < hi; i++) {
        ref_expected(c->dt, c->op, size, i, m->expected);
    }

    char *input = malloc(n * es + 1), *pristine = malloc(n * es + 1);
    char *recv = malloc(n * es + 1);
    ref_fill_input(c->dt, c->op, rank, n, input);
    memcpy(pristine, input, n * es);
    memset(recv, 0x5a, n * es);

    const char *name = c->coll == FOLD_COLL_ALLREDUCE ? "ALLREDUCE_ALG" : "REDUCE_ALG";
    int status = fold_config_set(ctx, name, c->alg->name);
    lh_barrier(ctx);   /* expected[] is complete */

    coll_call_t call = {.coll = c->coll, .dt = c->dt, .op = c->op, .root = c->root,
                        .inplace = c->inplace, .count = n, .input = input,
                        .pristine = pristine, .recv = recv};
    if (status == FOLD_OK) {
        status = coll_call_run(&call, rank, world);
    }
    char detail[160];
    coll_call_check(&call, rank, status, m->expected, detail, sizeof(detail));
    if (detail[0] != '\0') {
        record_failure(m, c, rank, size, detail);
    }
    free(input);
    free(pristine);
    free(recv);
    lh_barrier(ctx);   /* nobody refills expected[] while others still check */
    return detail[0] != '\0';
}

static int rank_main(fold_context_t *ctx, int rank, int size, void *arg)
{
    matrix_t *m = arg;
    int failed = 0;
    for (size_t k = 0; k < m->ncases; k++) {
        failed |= run_case(ctx, rank, size, m, &m->cases[k]);
    }
    return failed;
}

static void run_cases(int size, int nnodes, const size_t *counts, size_t ncounts,
                      int slice)
{
    matrix_t m;
    memset(&m, 0, sizeof(m));
    pthread_mutex_init(&m.lock, NULL);
    setenv("FOLD_TIMEOUT", "60", 0);
    fold_op_t user_op;
    cr_assert_eq(fold_op_create(ref_affine_fn, NULL, 0, &user_op), FOLD_OK);
    /* The pair/complex sweep: everywhere, with its large cases up to 8 ranks (beyond,
     * they would double its time); under FOLD_TEST_REDUCED on 3 ranks and two nodes
     * only, at small counts (the release stage ran all of it). */
    int typed = !fold_test_reduced() ? (size <= 8 ? 2 : 1) : (size == 3 || nnodes > 1);
    coll_matrix_spec_t spec = {.size = size, .counts = counts, .ncounts = ncounts,
                               .large = LARGE_COUNT, .slice = slice, .user_op = user_op,
                               .typed = typed};
    m.cases = coll_matrix_build(&spec, &m.ncases);
    size_t most = 0;
    for (size_t k = 0; k < ncounts; k++) {
        most = counts[k] > most ? counts[k] : most;
    }
    m.expected = malloc(most * 16 + 16);   /* up to 16-byte elements */

    int result = lh_run_nodes(size, nnodes, rank_main, &m);
    cr_expect_eq(m.failures, 0, "%d failures; first: %s", m.failures, m.first_failure);
    cr_expect_eq(result, m.failures ? -1 : 0);
    cr_log_info("p=%d: %zu cases", size, m.ncases);

    fold_op_free(user_op);
    free(m.expected);
    free(m.cases);
    pthread_mutex_destroy(&m.lock);
}

static void run_matrix_nodes(int size, int nnodes)
{
    static const size_t counts[] = {0, 1, 7, 1024, LARGE_COUNT};
    size_t ncounts = sizeof(counts) / sizeof(counts[0]) - (fold_test_reduced() && size > 5);
    setenv("FOLD_SEGMENT_SIZE", "2k", 0);   /* many segments in the large count */
    run_cases(size, nnodes, counts, ncounts, env_is("FOLD_TEST_MATRIX", "slice"));
}

static void run_matrix(int size) { run_matrix_nodes(size, 0); }

Test(coll_loopback, ranks_1)  { run_matrix(1); }
Test(coll_loopback, ranks_2)  { run_matrix(2); }
Test(coll_loopback, ranks_3)  { run_matrix(3); }
Test(coll_loopback, ranks_4)  { run_matrix(4); }
Test(coll_loopback, ranks_5)  { run_matrix(5); }
Test(coll_loopback, ranks_7)  { run_matrix(7); }
Test(coll_loopback, ranks_8)  { run_matrix(8); }
Test(coll_loopback, ranks_13) { run_matrix(13); }
/* Many threads on a small machine under the sanitizers take most of the stage's time:
 * FOLD_TEST_REDUCED leaves 16 and 33 to the release stage (13 stays). */
Test(coll_loopback, ranks_16)
{
    if (fold_test_reduced()) {
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
    run_matrix(16);
}
Test(coll_loopback, ranks_33)
{
    if (fold_test_reduced()) {
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
    run_matrix(33);
}
/* Two nodes: answers to a remote peer wait softly (coll/exec_plan.h), DPML exchanges. */
Test(coll_loopback, ranks_2_on_2_nodes) { run_matrix_nodes(2, 2); }
Test(coll_loopback, ranks_4_on_2_nodes) { run_matrix_nodes(4, 2); }

/* 2^20+3 elements in the default segments, one case per algorithm and collective, on
 * 3 ranks and on 4 ranks over two nodes (the release stage only). */
Test(coll_loopback, large_default_segments)
{
    static const size_t counts[] = {LARGEST_COUNT};
    if (fold_test_reduced()) {
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
    run_cases(3, 0, counts, 1, 1);
    run_cases(4, 2, counts, 1, 1);
}
