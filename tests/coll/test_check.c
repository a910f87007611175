/*
 * FOLD_CHECK=1 (runtime/coll/check.c): each mistake a program makes with a
 * collective -- a different count, datatype, op, root, collective, in-place mode,
 * or count 0 on one rank -- fails every rank with FOLD_ERR_MISMATCH and a line
 * naming a rank that differs and the field, on 2, 3 and 5 ranks (threads on the
 * loopback fabric); the communicator then serves a correct call.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "loopback_harness.h"
#include "stderr_capture.h"
#include "fingerprint.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 1000

typedef enum mistake {
    WRONG_COUNT, WRONG_DTYPE, WRONG_OP, WRONG_ROOT, WRONG_COLL, ZERO_COUNT, WRONG_INPLACE,
    NMISTAKES
} mistake_t;

/* What the log line must say. */
static const char *const expected_words[NMISTAKES] = {
    [WRONG_COUNT] = "passed count", [WRONG_DTYPE] = "passed datatype",
    [WRONG_OP] = "passed op", [WRONG_ROOT] = "passed root",
    [WRONG_COLL] = "passed collective", [ZERO_COUNT] = "passed count 0",
    [WRONG_INPLACE] = "passed in place"};

/* The field each mistake changes (fold_mismatch_fields). */
static const unsigned mistake_fields[] = {
    [WRONG_COUNT] = FOLD_MISMATCH_COUNT, [WRONG_DTYPE] = FOLD_MISMATCH_DATATYPE,
    [WRONG_OP] = FOLD_MISMATCH_OP, [WRONG_ROOT] = FOLD_MISMATCH_ROOT,
    [WRONG_COLL] = FOLD_MISMATCH_COLLECTIVE, [ZERO_COUNT] = FOLD_MISMATCH_COUNT,
    [WRONG_INPLACE] = FOLD_MISMATCH_IN_PLACE};

typedef struct check_case {
    mistake_t mistake;
    int       culprit;   /* the rank that makes it */
} check_case_t;

static int check_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const check_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    if (fold_config_set(ctx, "CHECK", "1") != FOLD_OK) {
        return 1;
    }
    float in[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++) {
        in[i] = (float)(rank + i);
    }
    int me = rank == c->culprit;
    size_t count = me && c->mistake == WRONG_COUNT ? COUNT / 2
                 : me && c->mistake == ZERO_COUNT  ? 0 : COUNT;
    fold_dtype_t dt = me && c->mistake == WRONG_DTYPE ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && c->mistake == WRONG_OP ? FOLD_OP_MAX : FOLD_OP_SUM;
    int st;
    if (c->mistake == WRONG_ROOT) {
        int root = me ? 1 : 0;
        st = fold_reduce(in, rank == root ? out : NULL, count, dt, op, root, w);
    } else if (c->mistake == WRONG_COLL && me) {
        st = fold_reduce(in, rank == 0 ? out : NULL, count, dt, op, 0, w);
    } else if (c->mistake == WRONG_INPLACE && me) {
        memcpy(out, in, sizeof(in));
        st = fold_allreduce(FOLD_IN_PLACE, out, count, dt, op, w);
    } else {
        st = fold_allreduce(in, out, count, dt, op, w);
    }
    if (st != FOLD_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: mistake %d returned %s, not a mismatch\n", rank, c->mistake,
                fold_status_string(st));
        return 1;
    }
    /* Every rank compared every rank's arguments: it can say which differed, once. */
    unsigned fields = fold_mismatch_fields(), again = fold_mismatch_fields();
    if (!(fields & mistake_fields[c->mistake]) || again != 0) {
        fprintf(stderr, "rank %d: mistake %d: fold_mismatch_fields() gave 0x%x then 0x%x\n",
                rank, c->mistake, fields, again);
        return 1;
    }
    /* The communicator still works for a correct call. */
    if (fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK) {
        return 1;
    }
    for (int i = 0; i < COUNT; i++) {
        float want = (float)(size * i + size * (size - 1) / 2);
        if (out[i] != want) {
            fprintf(stderr, "rank %d: element %d is %g after the mismatch, want %g\n", rank, i,
                    (double)out[i], (double)want);
            return 1;
        }
    }
    return 0;
}

static void run_mistake(mistake_t mistake, int size)
{
    check_case_t c = {mistake, size - 1};
    if (mistake == WRONG_ROOT) {
        c.culprit = size > 2 ? 2 : 1;
    }
    cr_expect_eq(lh_run(size, check_rank, &c), 0, "mistake %d on %d ranks", mistake, size);
}

TestSuite(check, .init = cr_redirect_stderr);

#define MISTAKE_TEST(name, m)                                                  \
    Test(check, name)                                                          \
    {                                                                          \
        int sizes[] = {2, 3, 5};                                               \
        for (int s = 0; s < 3; s++) {                                          \
            run_mistake(m, sizes[s]);                                          \
        }                                                                      \
        char *text = stderr_redirected();                                      \
        cr_expect(strstr(text, expected_words[m]) != NULL,                     \
                  "no \"%s\" in the log:\n%s", expected_words[m], text);       \
        cr_expect(strstr(text, "rank 0 passed") != NULL, "log:\n%s", text);    \
        free(text);                                                            \
    }

MISTAKE_TEST(count, WRONG_COUNT)
MISTAKE_TEST(datatype, WRONG_DTYPE)
MISTAKE_TEST(op, WRONG_OP)
MISTAKE_TEST(root, WRONG_ROOT)
MISTAKE_TEST(collective, WRONG_COLL)
MISTAKE_TEST(zero_count, ZERO_COUNT)
MISTAKE_TEST(in_place, WRONG_INPLACE)

/* Without FOLD_CHECK, the node's tiny-message path compares what it meets anyway:
 * each rank's slot says what it was asked to do. Every rank that folds (all of an
 * allreduce, the root of a reduce) fails with FOLD_ERR_MISMATCH; a reduce's other
 * ranks, which get no result, return success. */
static int fast_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const check_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "REDUCE_ALG", "shm_flat");
    float in[64], out[64];
    for (int i = 0; i < 64; i++) {
        in[i] = (float)(rank + i);
    }
    int me = rank == c->culprit;
    size_t count = me && c->mistake == WRONG_COUNT ? 32 : 64;
    fold_dtype_t dt = me && c->mistake == WRONG_DTYPE ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && c->mistake == WRONG_OP ? FOLD_OP_MAX : FOLD_OP_SUM;
    int reduce = c->mistake == WRONG_ROOT || (c->mistake == WRONG_COLL && me);
    int root = c->mistake == WRONG_ROOT && me ? 1 : 0;
    int st = reduce ? fold_reduce(in, rank == root ? out : NULL, count, dt, op, root, w)
                    : fold_allreduce(in, out, count, dt, op, w);
    int folds = !reduce || rank == root;
    int want = folds ? FOLD_ERR_MISMATCH : FOLD_OK;
    if (st != want) {
        fprintf(stderr, "rank %d: mistake %d on the fast path returned %s, want %s\n", rank,
                c->mistake, fold_status_string(st), fold_status_string(want));
        return 1;
    }
    if (fold_allreduce(in, out, 64, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK ||
        out[63] != (float)(size * 63 + size * (size - 1) / 2)) {
        fprintf(stderr, "rank %d: the correct call after mistake %d failed\n", rank, c->mistake);
        return 1;
    }
    return 0;
}

Test(check, fast_path_catches_what_it_meets)
{
    static const mistake_t mistakes[] = {WRONG_COUNT, WRONG_DTYPE, WRONG_OP, WRONG_ROOT,
                                         WRONG_COLL};
    int sizes[] = {2, 3};
    for (int s = 0; s < 2; s++) {
        for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
            /* The culprit is rank 1 (for the root mistake it names itself root). */
            check_case_t c = {mistakes[m], 1};
            cr_expect_eq(lh_run(sizes[s], fast_rank, &c), 0, "mistake %d on %d ranks",
                         mistakes[m], sizes[s]);
        }
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "rank 1 passed count 32, rank 0 passed 64") != NULL ||
              strstr(text, "rank 0 passed count 64, rank 1 passed 32") != NULL, "log:\n%s", text);
    cr_expect(strstr(text, "passed datatype") != NULL, "log:\n%s", text);
    free(text);
}

/* Counts whose rows the fast path lays out differently (a seq in every line up to
 * 768 bytes, one seq ahead of contiguous data beyond): the rank polling lines the
 * other never posts must still meet its fingerprint, not wait until the timeout. */
static int fast_layout_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const size_t *counts = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "TIMEOUT", "20");
    float in[512], out[512];
    for (int i = 0; i < 512; i++) {
        in[i] = (float)(rank + i);
    }
    int st = fold_allreduce(in, out, counts[rank == 1], FOLD_FLOAT32, FOLD_OP_SUM, w);
    if (st != FOLD_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: counts %zu/%zu returned %s\n", rank, counts[0], counts[1],
                fold_status_string(st));
        return 1;
    }
    if (fold_allreduce(in, out, 512, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK ||
        out[511] != (float)(size * 511 + size * (size - 1) / 2)) {
        fprintf(stderr, "rank %d: the correct call after counts %zu/%zu failed\n", rank,
                counts[0], counts[1]);
        return 1;
    }
    return 0;
}

Test(check, fast_path_catches_counts_across_layouts)
{
    static const size_t pairs[][2] = {{64, 400}, {400, 64}, {192, 193}, {12, 512}};
    for (int s = 2; s <= 3; s++) {
        for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
            cr_expect_eq(lh_run(s, fast_layout_rank, (void *)pairs[p]), 0,
                         "counts %zu/%zu on %d ranks", pairs[p][0], pairs[p][1], s);
        }
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "passed count 400") != NULL || strstr(text, "passed 400") != NULL,
              "log:\n%s", text);
    free(text);
}

/* Single copy compares the fingerprint each rank publishes with its buffers before it
 * reads or writes them: on 2 ranks both owners meet the other's and fail at once.
 * (The node segment is then brought back into step: test_resync.) */
static int cma_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    const mistake_t *m = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma");
    fold_config_set(ctx, "REDUCE_ALG", "cma");
    enum { BIG = 100000 };
    float *in = calloc(BIG, sizeof(float)), *out = calloc(BIG, sizeof(float));
    size_t count = rank == 1 && *m == WRONG_COUNT ? BIG / 2 : BIG;
    fold_op_t op = rank == 1 && *m == WRONG_OP ? FOLD_OP_MAX : FOLD_OP_SUM;
    int st = *m == WRONG_ROOT ? fold_reduce(in, out, count, FOLD_FLOAT32, op, rank, w)
                              : fold_allreduce(in, out, count, FOLD_FLOAT32, op, w);
    free(in);
    free(out);
    if (st != FOLD_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: cma mistake %d returned %s\n", rank, *m,
                fold_status_string(st));
        return 1;
    }
    return 0;
}

Test(check, single_copy_catches_what_it_meets)
{
    static const mistake_t mistakes[] = {WRONG_COUNT, WRONG_OP, WRONG_ROOT};
    for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
        cr_expect_eq(lh_run(2, cma_rank, (void *)&mistakes[m]), 0, "mistake %d", mistakes[m]);
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "rank 1 passed count 50000, rank 0 passed 100000") != NULL ||
              strstr(text, "rank 0 passed count 100000, rank 1 passed 50000") != NULL,
              "log:\n%s", text);
    cr_expect(strstr(text, "passed root") != NULL, "log:\n%s", text);
    free(text);
}

/* The node schedules (shm_flat above the tiny path, dpml): every node-aware call
 * publishes its fingerprint at its turn, and a rank waiting on another's flag
 * compares it, so the ranks that wait on the culprit fail at once: with shm_flat
 * every rank waits on every other; with dpml on 2 ranks both do. */
typedef struct sched_case {
    const char *alg;
    mistake_t   mistake;
} sched_case_t;

static int sched_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const sched_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", c->alg);
    enum { MID = 16384 };   /* 64 KiB, half of it 32 KiB: past the tiny-message path */
    float in[MID], out[MID];
    for (int i = 0; i < MID; i++) {
        in[i] = (float)rank;
    }
    int me = rank == size - 1;
    size_t count = me && c->mistake == WRONG_COUNT ? MID / 2 : MID;
    fold_dtype_t dt = me && c->mistake == WRONG_DTYPE ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && c->mistake == WRONG_OP ? FOLD_OP_MAX : FOLD_OP_SUM;
    int st = fold_allreduce(in, out, count, dt, op, w);
    if (st != FOLD_ERR_MISMATCH) {
        fprintf(stderr, "rank %d: %s mistake %d returned %s\n", rank, c->alg, c->mistake,
                fold_status_string(st));
        return 1;
    }
    return 0;
}

Test(check, node_schedules_catch_what_they_meet)
{
    static const mistake_t mistakes[] = {WRONG_COUNT, WRONG_DTYPE, WRONG_OP};
    setenv("FOLD_TIMEOUT", "20", 1);
    for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
        sched_case_t flat = {"shm_flat", mistakes[m]}, dpml = {"dpml", mistakes[m]};
        cr_expect_eq(lh_run(2, sched_rank, &flat), 0, "shm_flat, 2 ranks, mistake %d",
                     mistakes[m]);
        cr_expect_eq(lh_run(3, sched_rank, &flat), 0, "shm_flat, 3 ranks, mistake %d",
                     mistakes[m]);
        cr_expect_eq(lh_run(2, sched_rank, &dpml), 0, "dpml, 2 ranks, mistake %d", mistakes[m]);
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "passed datatype int32") != NULL, "log:\n%s", text);
    free(text);
}

/* Matching calls pass the check, over many calls and every path. */
static int agree_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "CHECK", "1");
    static const size_t counts[] = {1, 100, 5000, 300000};
    float *in = malloc(300000 * sizeof(float)), *out = malloc(300000 * sizeof(float));
    int bad = 0;
    for (size_t k = 0; k < 4 && !bad; k++) {
        for (size_t i = 0; i < counts[k]; i++) {
            in[i] = (float)rank;
        }
        bad |= fold_allreduce(in, out, counts[k], FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK;
        bad |= out[counts[k] - 1] != (float)(size * (size - 1) / 2);
        bad |= fold_reduce(in, rank == size - 1 ? out : NULL, counts[k], FOLD_FLOAT32,
                           FOLD_OP_MAX, size - 1, w) != FOLD_OK;
        bad |= rank == size - 1 && out[0] != (float)(size - 1);
    }
    free(in);
    free(out);
    return bad;
}

Test(check, matching_calls_pass)
{
    cr_expect_eq(lh_run(3, agree_rank, NULL), 0);
}

/* Calls that take different paths on a node never meet in the same slots or flags:
 * one rank on the tiny-message path (a blocking call below 32 KiB), the other on
 * the node's schedules (a larger call, or a nonblocking one). Each looks for the
 * other on the other path while it waits, so both fail at once with
 * FOLD_ERR_MISMATCH, not after FOLD_TIMEOUT. */
typedef enum { PATH_COUNT, PATH_NONBLOCKING } path_mistake_t;

static int path_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    const path_mistake_t *m = arg;
    fold_comm_h w = fold_comm_world(ctx);
    enum { MID = 16384 };   /* 64 KiB: past the tiny-message path */
    float in[MID], out[MID];
    for (int i = 0; i < MID; i++) {
        in[i] = (float)rank;
    }
    double t0 = fold_util_time_now();
    int st;
    if (rank == 1 && *m == PATH_COUNT) {
        st = fold_allreduce(in, out, MID, FOLD_FLOAT32, FOLD_OP_SUM, w);   /* 64 KiB */
    } else if (rank == 1) {
        fold_request_h req;
        st = fold_iallreduce(in, out, 16, FOLD_FLOAT32, FOLD_OP_SUM, w, &req);
        if (st == FOLD_OK) {
            st = fold_wait(req);
            fold_request_free(req);
        }
    } else {
        st = fold_allreduce(in, out, 16, FOLD_FLOAT32, FOLD_OP_SUM, w);   /* 64 B */
    }
    double took = fold_util_time_now() - t0;
    if (st != FOLD_ERR_MISMATCH || took > 5) {
        fprintf(stderr, "rank %d: path mistake %d returned %s after %.1f s\n", rank, *m,
                fold_status_string(st), took);
        return 1;
    }
    return 0;
}

Test(check, different_paths_meet)
{
    setenv("FOLD_TIMEOUT", "20", 1);
    static const path_mistake_t mistakes[] = {PATH_COUNT, PATH_NONBLOCKING};
    for (size_t m = 0; m < 2; m++) {
        cr_expect_eq(lh_run(2, path_rank, (void *)&mistakes[m]), 0, "path mistake %zu", m);
    }
    char *text = stderr_redirected();
    /* Said by whichever rank notices first, each in its own words ("rank 1 passed
     * count 16384, rank 0 passed 16" or "rank 0 passed count 16, rank 1 passed 16384"). */
    cr_expect(strstr(text, "passed count 16384") != NULL || strstr(text, "passed 16384") != NULL,
              "log:\n%s", text);
    cr_expect(strstr(text, "nonblocking") != NULL, "log:\n%s", text);
    free(text);
}

/* Matching calls that alternate between the paths (tiny blocking, larger, tiny
 * nonblocking, reduces to every root) never look mismatched, however far one rank
 * runs ahead of another. */
static int mixed_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    enum { MID = 16384 };   /* 64 KiB: past the tiny-message path */
    float in[MID], out[MID];
    for (int i = 0; i < MID; i++) {
        in[i] = (float)(rank + 1);
    }
    const float sum = (float)(size * (size + 1) / 2);
    int bad = 0;
    for (int it = 0; it < 300 && !bad; it++) {
        size_t n = it % 3 == 1 ? MID : 16;
        bad |= fold_allreduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK ||
               out[n - 1] != sum;
        fold_request_h req;
        bad |= fold_iallreduce(in, out, 16, FOLD_FLOAT32, FOLD_OP_SUM, w, &req) != FOLD_OK;
        bad |= !bad && (fold_wait(req) != FOLD_OK || fold_request_free(req) != FOLD_OK ||
                        out[15] != sum);
        int root = it % size;
        bad |= fold_reduce(in, rank == root ? out : NULL, n, FOLD_FLOAT32, FOLD_OP_SUM, root,
                           w) != FOLD_OK || (rank == root && out[0] != sum);
    }
    if (bad) {
        fprintf(stderr, "rank %d: matching calls on mixed paths failed\n", rank);
    }
    return bad;
}

Test(check, mixed_paths_pass)
{
    setenv("FOLD_TIMEOUT", "20", 1);
    cr_expect_eq(lh_run(2, mixed_rank, NULL), 0);
    cr_expect_eq(lh_run(3, mixed_rank, NULL), 0);
}

/* A pair type with maxloc against float32 with sum, the same bytes on every rank:
 * FOLD_CHECK=1 names the datatype and op, and the fingerprint every path carries
 * keeps every datatype and op apart (6 and 16 bits packed). */
static int pair_mistake_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    if (fold_config_set(ctx, "CHECK", "1") != FOLD_OK) {
        return 1;
    }
    float in[COUNT] = {0}, out[COUNT];
    int st = rank == 1 ? fold_allreduce(in, out, COUNT / 2, FOLD_FLOAT_INT, FOLD_OP_MAXLOC, w)
                       : fold_allreduce(in, out, COUNT, FOLD_FLOAT32, FOLD_OP_SUM, w);
    return st != FOLD_ERR_MISMATCH;
}

Test(check, pair_type_against_float)
{
    cr_expect_eq(lh_run(3, pair_mistake_rank, NULL), 0);
    char *text = stderr_redirected();
    cr_expect(strstr(text, "passed datatype float32, rank 1 passed float_int") != NULL ||
                  strstr(text, "rank 1 passed datatype float_int") != NULL,
              "log:\n%s", text);
    cr_expect(strstr(text, "maxloc") != NULL, "log:\n%s", text);
    free(text);
    for (int d = 0; d < FOLD_DTYPE_COUNT; d++) {
        for (int o = 0; o < FOLD_OP_PREDEFINED_COUNT; o++) {
            fold_fingerprint_t f = {.allreduce = 1, .count = 7, .dtype = d, .op = o};
            fold_fingerprint_t g = fold_fingerprint_unpack(fold_fingerprint_pack(&f));
            cr_assert(g.dtype == d && g.op == o, "%s %s", fold_dtype_name((fold_dtype_t)d),
                      fold_op_name((fold_op_t)o));
        }
    }
    /* The widest values: the last opaque datatype with the last user op. */
    fold_dtype_t last;
    cr_assert_eq(fold_dtype_opaque(FOLD_OPAQUE_MAX_SIZE, &last), FOLD_OK);
    fold_fingerprint_t f = {.allreduce = 1, .inplace = 1, .count = 0xfffff, .dtype = last,
                            .op = FOLD_OP_USER_FIRST + 255, .root = 0xfffff};
    fold_fingerprint_t g = fold_fingerprint_unpack(fold_fingerprint_pack(&f));
    cr_assert(g.allreduce == 1 && g.inplace == 1 && g.count == f.count && g.dtype == f.dtype &&
              g.op == f.op && g.root == f.root);
}
