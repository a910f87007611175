/*
 * Sparse codecs inside the collectives, on the loopback transport: every algorithm
 * with each FOLD_CODEC choice, on sparse, dense and imbalanced inputs, against an
 * independent reference, bit for bit. Values are small integers, -0.0 and (at every
 * 13th element, on every rank) multiples of the smallest denormal, so float sums
 * are exact in any order (and -0.0 survives exactly when every rank holds -0.0). The context's codec
 * counters prove the encoded paths ran: sparse inputs must have been sent encoded
 * with the codec asked for, FOLD_CODEC=none must encode nothing, and reductions
 * must have decoded messages while reducing and written results encoded for sends.
 */
#include <criterion/criterion.h>

#include "codec/codec.h"
#include "coll_call.h"
#include "loopback_harness.h"
#include "test_reduced.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum dist {
    DIST_ZERO,         /* every element zero */
    DIST_SPARSE,       /* ~1% non-zero, random positions per rank */
    DIST_MEDIUM,       /* ~30% non-zero */
    DIST_DENSE,        /* no zeros */
    DIST_IMBALANCED,   /* rank 0 dense, the others ~0.5% */
    DIST_RUNS,         /* identical positions on every rank: blocks of 40 in 1000 */
    NDISTS
} dist_t;
static const char *const dist_names[] = {"zero", "sparse", "medium", "dense", "imbalanced",
                                         "runs"};

typedef struct dt_op { fold_dtype_t dt; fold_op_t op; } dt_op_t;
static const dt_op_t combos[] = {
    {FOLD_FLOAT32, FOLD_OP_SUM}, {FOLD_FLOAT64, FOLD_OP_SUM}, {FOLD_INT32, FOLD_OP_SUM},
    {FOLD_UINT64, FOLD_OP_BOR},  {FOLD_UINT32, FOLD_OP_BXOR}, {FOLD_INT64, FOLD_OP_LOR},
    {FOLD_FLOAT32, FOLD_OP_MAX},   /* not compressible: must stay dense */
};
#define NCOMBOS (sizeof(combos) / sizeof(combos[0]))
static const char *const codecs[] = {"auto", "bits", "idx", "rle", "none"};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

typedef struct codec_case {
    const fold_alg_t *alg;
    fold_coll_t       coll;
    size_t            count;
    int               root, inplace;
    dist_t            dist;
    dt_op_t           d;
    const char       *codec;
} codec_case_t;

typedef struct matrix {
    codec_case_t   *cases;
    size_t          ncases;
    void           *expected;
    pthread_mutex_t lock;
    int             failures;
    char            first[512];
    uint64_t        fused, direct;   /* over the whole run */
    uint64_t        case_sent[5], case_considered;   /* per case, summed over ranks */
} matrix_t;

/* ---- the inputs ------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static int nonzero_at(dist_t dist, int rank, size_t i)
{
    uint64_t h = mix(((uint64_t)rank << 40) ^ i ^ 0x9e3779b97f4a7c15ull) % 1000;
    switch (dist) {
    case DIST_ZERO:       return 0;
    case DIST_SPARSE:     return h < 10;
    case DIST_MEDIUM:     return h < 300;
    case DIST_DENSE:      return 1;
    case DIST_IMBALANCED: return rank == 0 || h < 5;
    case DIST_RUNS:       return i % 1000 < 40;
    default:              return 0;
    }
}

/* Rank r's element i, written to dst as the datatype. */
static void input_value(const codec_case_t *c, int rank, size_t i, void *dst)
{
    uint64_t h = mix((uint64_t)rank * 7919 + i * 104729 + 17);
    int nz = nonzero_at(c->dist, rank, i);
    int64_t small = (int64_t)(h % 9) - 4;   /* -4..4, 0 allowed */
    switch (c->d.dt) {
    case FOLD_FLOAT32: {
        float f = 0.0f;
        if (nz) {
            f = (h % 17 == 0) ? -0.0f : (i % 13 == 0) ? (float)(h % 5 + 1) * FLT_TRUE_MIN
                                                      : (float)(small ? small : 1);
        }
        memcpy(dst, &f, 4);
        break;
    }
    case FOLD_FLOAT64: {
        double f = 0.0;
        if (nz) {
            f = (h % 17 == 0) ? -0.0 : (i % 13 == 0) ? (double)(h % 5 + 1) * DBL_TRUE_MIN
                                                     : (double)(small ? small : 1);
        }
        memcpy(dst, &f, 8);
        break;
    }
    case FOLD_INT32: { int32_t v = nz ? (int32_t)(small ? small : 3) : 0; memcpy(dst, &v, 4); break; }
    case FOLD_UINT32: { uint32_t v = nz ? (uint32_t)(h >> 7) | 1u : 0; memcpy(dst, &v, 4); break; }
    case FOLD_UINT64: { uint64_t v = nz ? (h >> 3) | 1u : 0; memcpy(dst, &v, 8); break; }
    case FOLD_INT64: { int64_t v = nz ? (int64_t)(h % 5) : 0; memcpy(dst, &v, 8); break; }
    default: break;
    }
}

/* The reference: fold every rank's value in rank order with plain C. */
static void expected_value(const codec_case_t *c, int size, size_t i, void *dst)
{
    size_t es = fold_dtype_size(c->d.dt);
    char acc[8], v[8];
    input_value(c, 0, i, acc);
    for (int r = 1; r < size; r++) {
        input_value(c, r, i, v);
        switch (c->d.dt) {
        case FOLD_FLOAT32: {
            float a, b;
            memcpy(&a, acc, 4); memcpy(&b, v, 4);
            a = c->d.op == FOLD_OP_MAX ? (isnan(a) || a > b || (a == b && !signbit(a)) ? a : b)
                                       : a + b;
            memcpy(acc, &a, 4);
            break;
        }
        case FOLD_FLOAT64: {
            double a, b;
            memcpy(&a, acc, 8); memcpy(&b, v, 8);
            a += b;
            memcpy(acc, &a, 8);
            break;
        }
        case FOLD_INT32: {
            int32_t a, b;
            memcpy(&a, acc, 4); memcpy(&b, v, 4);
            a += b;
            memcpy(acc, &a, 4);
            break;
        }
        case FOLD_UINT32: {
            uint32_t a, b;
            memcpy(&a, acc, 4); memcpy(&b, v, 4);
            a ^= b;
            memcpy(acc, &a, 4);
            break;
        }
        case FOLD_UINT64: {
            uint64_t a, b;
            memcpy(&a, acc, 8); memcpy(&b, v, 8);
            a |= b;
            memcpy(acc, &a, 8);
            break;
        }
        case FOLD_INT64: {
            int64_t a, b;
            memcpy(&a, acc, 8); memcpy(&b, v, 8);
            a = (a != 0) || (b != 0);
            memcpy(acc, &a, 8);
            break;
        }
        default: break;
        }
    }
    memcpy(dst, acc, es);
}

/* ---- the cases -------------------------------------------------------------- */

static void add_case(matrix_t *m, size_t *cap, codec_case_t c)
{
    if (m->ncases == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        m->cases = realloc(m->cases, *cap * sizeof(*m->cases));
    }
    m->cases[m->ncases++] = c;
}

static void build_cases(matrix_t *m, int size)
{
    static const size_t counts[] = {257, 100003};
    size_t cap = 0, rot = 0;
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            if (fold_alg_builder(fold_alg_all[a], (fold_coll_t)coll) == NULL) {
                continue;
            }
            for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                for (int dist = 0; dist < NDISTS; dist++, rot++) {
                    codec_case_t c = {
                        .alg = fold_alg_all[a], .coll = (fold_coll_t)coll,
                        .count = counts[k], .root = (int)(rot % (size_t)size),
                        .inplace = (int)(rot / 3 % 2), .dist = (dist_t)dist,
                        .d = combos[rot % NCOMBOS], .codec = codecs[rot / NCOMBOS % NCODECS],
                    };
                    add_case(m, &cap, c);
                }
            }
        }
    }
}

static void record_failure(matrix_t *m, const codec_case_t *c, int rank, int size,
                           const char *detail)
{
    pthread_mutex_lock(&m->lock);
    if (m->failures++ == 0) {
        snprintf(m->first, sizeof(m->first),
                 "%s %s p=%d rank=%d count=%zu root=%d inplace=%d %s/%s %s codec=%s: %s",
                 fold_coll_name(c->coll), c->alg->name, size, rank, c->count, c->root,
                 c->inplace, fold_dtype_name(c->d.dt), fold_op_name(c->d.op),
                 dist_names[c->dist], c->codec, detail);
    }
    pthread_mutex_unlock(&m->lock);
}

/* What the counters must show for a case, summed over its ranks. */
static void check_counters(matrix_t *m, const codec_case_t *c, int size)
{
    uint64_t encoded = m->case_sent[1] + m->case_sent[2] + m->case_sent[3];
    int valid = fold_codec_supported(c->d.op, c->d.dt);
    char detail[160] = "";
    if (!valid || strcmp(c->codec, "none") == 0) {
        if (encoded != 0) {
            snprintf(detail, sizeof(detail), "%llu sends encoded where none may be",
                     (unsigned long long)encoded);
        }
    } else if ((c->dist == DIST_ZERO || c->dist == DIST_SPARSE || c->dist == DIST_RUNS) &&
               m->case_considered > 0) {
        int id = strcmp(c->codec, "bits") == 0 ? 1 : strcmp(c->codec, "idx") == 0 ? 2
                 : strcmp(c->codec, "rle") == 0 ? 3 : 0;
        int rle_invalid = id == 3 && !(fold_codec_valid_mask(c->d.dt) & (1 << 3));
        if (id == 0 ? encoded == 0 : (!rle_invalid && m->case_sent[id] == 0)) {
            snprintf(detail, sizeof(detail), "sparse data but nothing sent encoded with %s "
                     "(%llu sends considered)", c->codec,
                     (unsigned long long)m->case_considered);
        } else if (id != 0 && encoded != m->case_sent[id]) {
            snprintf(detail, sizeof(detail), "codecs other than %s used", c->codec);
        }
    }
    if (detail[0] != '\0') {
        record_failure(m, c, -1, size, detail);
    }
}

static int run_case(fold_context_t *ctx, int rank, int size, matrix_t *m, const codec_case_t *c)
{
    size_t es = fold_dtype_size(c->d.dt), n = c->count;
    fold_comm_h world = fold_comm_world(ctx);

    size_t lo = n * (size_t)rank / (size_t)size, hi = n * (size_t)(rank + 1) / (size_t)size;
    for (size_t i = lo; i < hi; i++) {
        expected_value(c, size, i, (char *)m->expected + i * es);
    }
    if (rank == 0) {
        memset(m->case_sent, 0, sizeof(m->case_sent));
        m->case_considered = 0;
    }
    char *input = malloc(n * es), *pristine = malloc(n * es), *recv = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        input_value(c, rank, i, input + i * es);
    }
    memcpy(pristine, input, n * es);
    memset(recv, 0x5a, n * es);

    const char *name = c->coll == FOLD_COLL_ALLREDUCE ? "ALLREDUCE_ALG" : "REDUCE_ALG";
    int status = fold_config_set(ctx, name, c->alg->name);
    if (status == FOLD_OK) {
        status = fold_config_set(ctx, "CODEC", c->codec);
    }
    fold_wire_counters_t before = ctx->wire;
    lh_barrier(ctx);   /* expected[] is complete, counters reset */

    coll_call_t call = {.coll = c->coll, .dt = c->d.dt, .op = c->d.op, .root = c->root,
                        .inplace = c->inplace, .count = n, .input = input,
                        .pristine = pristine, .recv = recv};

    /* Twice: a schedule learns from its previous call which peers on the node send
     * it dense data (exec_wire.c), so the counters are the second call's. */
    char detail[160] = "";
    for (int round = 0; round < 2 && detail[0] == '\0'; round++) {
        memset(recv, 0x5a, n * es);
        before = ctx->wire;
        if (status == FOLD_OK) {
            status = coll_call_run(&call, rank, world);
        }
        coll_call_check(&call, rank, status, m->expected, detail, sizeof(detail));
    }
    if (detail[0] != '\0') {
        record_failure(m, c, rank, size, detail);
    }

    pthread_mutex_lock(&m->lock);
    for (int k = 0; k < 4; k++) {
        m->case_sent[k] += ctx->wire.msgs[k] - before.msgs[k];
        m->case_considered += ctx->wire.msgs[k] - before.msgs[k];
    }
    m->fused += ctx->wire.fused - before.fused;
    m->direct += ctx->wire.direct - before.direct;
    pthread_mutex_unlock(&m->lock);
    free(input);
    free(pristine);
    free(recv);
    lh_barrier(ctx);   /* every rank's counters are in */
    if (rank == 0) {
        check_counters(m, c, size);
    }
    lh_barrier(ctx);   /* nobody refills expected[] or resets counters early */
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
    build_cases(&m, size);
    m.expected = malloc(100003 * 8);

    int result = lh_run_nodes(size, nnodes, rank_main, &m);
    cr_expect_eq(m.failures, 0, "%d failures; first: %s", m.failures, m.first);
    cr_expect_eq(result, m.failures ? -1 : 0);
    if (size > 1) {
        cr_expect_gt(m.fused, 0, "no reduction decoded a message while reducing");
        cr_expect_gt(m.direct, 0, "no reduction wrote its result encoded for a send");
    }
    cr_log_info("p=%d: %zu cases, %llu fused decodes, %llu results encoded by a reduction",
                size, m.ncases, (unsigned long long)m.fused, (unsigned long long)m.direct);
    free(m.expected);
    free(m.cases);
    pthread_mutex_destroy(&m.lock);
}

static void run_matrix(int size) { run_matrix_nodes(size, 0); }

Test(coll_codec, ranks_1) { run_matrix(1); }
Test(coll_codec, ranks_2) { run_matrix(2); }
Test(coll_codec, ranks_3) { run_matrix(3); }
Test(coll_codec, ranks_4) { run_matrix(4); }
Test(coll_codec, ranks_5) { run_matrix(5); }
/* 8 threads under the sanitizers: FOLD_TEST_REDUCED leaves it to the release stage
 * (5 stays). */
Test(coll_codec, ranks_8)
{
    if (fold_test_reduced()) {
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
    run_matrix(8);
}
/* Two nodes: the imbalanced case is where two-party sends must keep their order. */
Test(coll_codec, ranks_2_on_2_nodes) { run_matrix_nodes(2, 2); }
