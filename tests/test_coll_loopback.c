/*
 * Every algorithm, on the loopback transport, against the independent reference:
 * rank counts {1,2,3,4,5,7,8,13,16,33}, counts {0,1,7,1024,2^20+3}, every root (for
 * the large count: first, middle and last), in place and not, a rotation of
 * datatype x op pairs, and a non-commutative user op.
 */
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "loopback_harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_COUNT ((size_t)(1u << 20) + 3)

typedef struct dt_op { fold_dtype_t dt; fold_op_t op; } dt_op_t;

static const dt_op_t combos[] = {
    {FOLD_INT32, FOLD_OP_SUM},     {FOLD_FLOAT32, FOLD_OP_SUM},  {FOLD_FLOAT64, FOLD_OP_MAX},
    {FOLD_INT64, FOLD_OP_PROD},    {FOLD_UINT8, FOLD_OP_BXOR},   {FOLD_FLOAT16, FOLD_OP_SUM},
    {FOLD_BFLOAT16, FOLD_OP_MIN},  {FOLD_INT16, FOLD_OP_BOR},    {FOLD_UINT32, FOLD_OP_LAND},
    {FOLD_INT8, FOLD_OP_SUM},      {FOLD_UINT64, FOLD_OP_MIN},   {FOLD_FLOAT32, FOLD_OP_LXOR},
};
#define NCOMBOS (sizeof(combos) / sizeof(combos[0]))

typedef struct coll_case {
    const fold_alg_t *alg;
    fold_coll_t       coll;
    size_t            count;
    int               root;
    int               inplace;
    fold_dtype_t      dt;
    fold_op_t         op;
} coll_case_t;

typedef struct matrix {
    coll_case_t    *cases;
    size_t          ncases;
    fold_op_t       user_op;
    void           *expected;       /* shared, filled cooperatively per case */
    pthread_mutex_t lock;
    int             failures;
    char            first_failure[512];
} matrix_t;

static void record_failure(matrix_t *m, const char *fmt, const coll_case_t *c, int rank,
                           int size, const char *detail)
{
    pthread_mutex_lock(&m->lock);
    if (m->failures++ == 0) {
        snprintf(m->first_failure, sizeof(m->first_failure),
                 "%s %s p=%d rank=%d count=%zu root=%d inplace=%d %s/%s: %s",
                 fold_coll_name(c->coll), c->alg->name, size, rank, c->count, c->root,
                 c->inplace, fold_dtype_name(c->dt),
                 c->op >= FOLD_OP_USER_FIRST ? "affine(non-commutative)" : fold_op_name(c->op),
                 detail);
    }
    pthread_mutex_unlock(&m->lock);
    (void)fmt;
}

static void add_case(coll_case_t **cases, size_t *n, size_t *cap, coll_case_t c)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        *cases = realloc(*cases, *cap * sizeof(**cases));
    }
    (*cases)[(*n)++] = c;
}

/* FOLD_TEST_REDUCED=1 (the sanitizer stage of scripts/test.sh): the release stage ran
 * the full matrix, so the large case keeps to a few rank counts and is 2^16 + 3
 * elements cut into 2 KiB segments, as many segments as the full size's take with
 * the default segment, at a sixteenth of the bytes the sanitizer checks. */
static int reduced(void)
{
    const char *r = getenv("FOLD_TEST_REDUCED");
    return r != NULL && strcmp(r, "1") == 0;
}

static int large_count_wanted(int size)
{
    return !reduced() || size <= 5;
}

static void build_cases(matrix_t *m, int size)
{
    const size_t large = reduced() ? ((size_t)1 << 16) + 3 : LARGE_COUNT;
    const size_t counts[] = {0, 1, 7, 1024, large};
    size_t ncounts = sizeof(counts) / sizeof(counts[0]) - !large_count_wanted(size);
    size_t cap = 0, rot = 0;
    m->cases  = NULL;
    m->ncases = 0;
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            if (fold_alg_builder(fold_alg_all[a], (fold_coll_t)coll) == NULL) {
                continue;
            }
            for (size_t k = 0; k < ncounts; k++) {
                size_t count = counts[k];
                int is_large = count == large;
                int roots[64], nroots = 0;
                if (coll == FOLD_COLL_ALLREDUCE) {
                    roots[nroots++] = 0;
                } else if (is_large) {
                    roots[nroots++] = 0;
                    if (size > 2) roots[nroots++] = size / 2;
                    if (size > 1) roots[nroots++] = size - 1;
                } else {
                    for (int r = 0; r < size; r++) roots[nroots++] = r;
                }
                for (int ri = 0; ri < nroots; ri++) {
                    for (int inplace = 0; inplace <= 1; inplace++) {
                        const dt_op_t *d = &combos[rot++ % NCOMBOS];
                        coll_case_t c = {fold_alg_all[a], (fold_coll_t)coll, count, roots[ri],
                                         inplace, d->dt, d->op};
                        if (is_large && d->dt == FOLD_INT8) {
                            c.dt = FOLD_FLOAT32;   /* keep big cases on common types */
                        }
                        add_case(&m->cases, &m->ncases, &cap, c);
                    }
                    /* The non-commutative user op, not in place. */
                    coll_case_t u = {fold_alg_all[a], (fold_coll_t)coll, count, roots[ri], 0,
                                     FOLD_UINT64, m->user_op};
                    if (!is_large || ri == 0) {
                        add_case(&m->cases, &m->ncases, &cap, u);
                    }
                }
            }
        }
    }
}

static int run_case(fold_context_t *ctx, int rank, int size, matrix_t *m, const coll_case_t *c)
{
    size_t es = fold_dtype_size(c->dt);
    size_t n = c->count;
    int is_root = c->coll == FOLD_COLL_ALLREDUCE || rank == c->root;
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

    const void *sendbuf = input;
    void *recvbuf = is_root ? recv : NULL;
    if (c->inplace) {
        memcpy(recv, input, n * es);
        sendbuf = FOLD_IN_PLACE;
        recvbuf = recv;
    }
    if (status == FOLD_OK) {
        status = c->coll == FOLD_COLL_ALLREDUCE
                     ? fold_allreduce(sendbuf, recvbuf, n, c->dt, c->op, world)
                     : fold_reduce(sendbuf, recvbuf, n, c->dt, c->op, c->root, world);
    }

    char detail[160] = "";
    if (status != FOLD_OK) {
        snprintf(detail, sizeof(detail), "returned %s", fold_status_string(status));
    } else if (is_root) {
        for (size_t i = 0; i < n; i++) {
            if (memcmp(recv + i * es, (char *)m->expected + i * es, es) != 0) {
                snprintf(detail, sizeof(detail), "wrong result at element %zu of %zu", i, n);
                break;
            }
        }
    } else if (c->inplace && memcmp(recv, pristine, n * es) != 0) {
        snprintf(detail, sizeof(detail), "non-root in-place input was modified");
    }
    if (detail[0] == '\0' && !c->inplace && memcmp(input, pristine, n * es) != 0) {
        snprintf(detail, sizeof(detail), "the send buffer was modified");
    }
    if (detail[0] != '\0') {
        record_failure(m, "", c, rank, size, detail);
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

static void run_matrix_nodes(int size, int nnodes)
{
    matrix_t m;
    memset(&m, 0, sizeof(m));
    pthread_mutex_init(&m.lock, NULL);
    setenv("FOLD_TIMEOUT", "60", 0);
    if (reduced()) {
        setenv("FOLD_SEGMENT_SIZE", "2k", 0);   /* see large_count_wanted */
    }
    cr_assert_eq(fold_op_create(ref_affine_fn, NULL, 0, &m.user_op), FOLD_OK);
    build_cases(&m, size);
    m.expected = malloc(LARGE_COUNT * 8);

    int result = lh_run_nodes(size, nnodes, rank_main, &m);
    cr_expect_eq(m.failures, 0, "%d failures; first: %s", m.failures, m.first_failure);
    cr_expect_eq(result, m.failures ? -1 : 0);
    cr_log_info("p=%d: %zu cases", size, m.ncases);

    fold_op_free(m.user_op);
    free(m.expected);
    free(m.cases);
    pthread_mutex_destroy(&m.lock);
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
Test(coll_loopback, ranks_16) { run_matrix(16); }
Test(coll_loopback, ranks_33) { run_matrix(33); }
/* Two nodes: two-party schedules order their sends (sched.h), DPML exchanges. */
Test(coll_loopback, ranks_2_on_2_nodes) { run_matrix_nodes(2, 2); }
Test(coll_loopback, ranks_4_on_2_nodes) { run_matrix_nodes(4, 2); }
