/*
 * The public API on loopback ranks: bad input gets a clear error and no crash,
 * handles after finalize are refused, split/bcast/barrier/non-blocking calls work,
 * a collective that never completes times out naming the peer, mismatched counts
 * are caught naming the other rank (both checked in what fold logs), and a rank
 * whose transport fails to open fails every rank's context creation instead of
 * leaving the others waiting.
 */
#include <criterion/criterion.h>

#include "loopback_harness.h"
#include "stderr_capture.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_STATUS(call, want) \
    do { int st_ = (call); if (st_ != (want)) { \
        fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call, \
                fold_status_string(st_), fold_status_string(want)); return 1; } } while (0)

static int bad_input(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)rank;
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    int buf[4] = {1, 2, 3, 4}, out[4];

    EXPECT_STATUS(fold_allreduce(NULL, out, 4, FOLD_INT32, FOLD_OP_SUM, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, NULL, 4, FOLD_INT32, FOLD_OP_SUM, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 4, (fold_dtype_t)99, FOLD_OP_SUM, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 4, FOLD_INT32, (fold_op_t)40, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 4, FOLD_FLOAT32, FOLD_OP_BXOR, w),
                  FOLD_ERR_INVALID_ARG);
    /* maxloc/minloc take the pair types only, which take nothing else; complex types
     * take sum and prod. */
    EXPECT_STATUS(fold_allreduce(buf, out, 2, FOLD_INT32, FOLD_OP_MAXLOC, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_reduce(buf, out, 2, FOLD_FLOAT32, FOLD_OP_MINLOC, 0, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 2, FOLD_2INT, FOLD_OP_SUM, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 1, FOLD_DOUBLE_INT, FOLD_OP_MAX, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 1, FOLD_COMPLEX_FLOAT64, FOLD_OP_MAX, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 2, FOLD_COMPLEX_FLOAT32, FOLD_OP_MAXLOC, w),
                  FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_reduce(buf, out, 4, FOLD_INT32, FOLD_OP_SUM, size, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_reduce(buf, out, 4, FOLD_INT32, FOLD_OP_SUM, -1, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_bcast(NULL, 4, FOLD_INT32, 0, w), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_allreduce(buf, out, 4, FOLD_INT32, FOLD_OP_SUM, NULL), FOLD_ERR_NOT_INITIALIZED);
    EXPECT_STATUS(fold_iallreduce(buf, out, 4, FOLD_INT32, FOLD_OP_SUM, w, NULL), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_test(NULL), FOLD_ERR_INVALID_ARG);
    /* A count of 0 works with NULL buffers. */
    EXPECT_STATUS(fold_allreduce(NULL, NULL, 0, FOLD_INT32, FOLD_OP_SUM, w), FOLD_OK);
    EXPECT_STATUS(fold_config_set(ctx, "ALLREDUCE_ALG", "no_such_alg"), FOLD_ERR_NOT_FOUND);
    EXPECT_STATUS(fold_config_set(ctx, "REDUCE_ALG", "recursive_doubling"), FOLD_ERR_NOT_FOUND);
    EXPECT_STATUS(fold_config_set(ctx, "NO_SUCH_VARIABLE", "1"), FOLD_ERR_NOT_FOUND);
    EXPECT_STATUS(fold_config_set(ctx, "TIMEOUT", "-3"), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_config_set(ctx, "SEGMENT_SIZE", "12q"), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_config_set(ctx, "TUNE", "allreduce:0-4k"), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_config_set(ctx, "TUNE", "allreduce:0-4k:chain"), FOLD_ERR_INVALID_ARG);
    EXPECT_STATUS(fold_config_set(ctx, "TUNE", "allreduce:0-4k:ring#reduce:4k-inf:p2-8:chain"),
                  FOLD_OK);
    /* Everyone still agrees after the refused calls: a real collective works. */
    EXPECT_STATUS(fold_allreduce(buf, out, 4, FOLD_INT32, FOLD_OP_SUM, w), FOLD_OK);
    return out[0] != size;
}

Test(api, bad_input_gets_clear_errors)
{
    cr_assert_eq(lh_run(3, bad_input, NULL), 0);
}

static int after_finalize(void)
{
    void *fabric = fold_loopback_fabric_create(1), *group = fold_bootstrap_mem_group_create(1);
    fold_bootstrap_t bs;
    fold_context_t *ctx;
    cr_assert_eq(fold_bootstrap_mem_init(&bs, group, 0), FOLD_OK);
    cr_assert_eq(fold_context_create(&bs, "loopback", fabric, &ctx), FOLD_OK);
    fold_comm_h w = fold_comm_world(ctx);
    cr_assert_eq(fold_finalize(ctx), FOLD_OK);
    int v = 1;
    int st1 = fold_allreduce(&v, &v, 1, FOLD_INT32, FOLD_OP_SUM, w);
    int st2 = fold_finalize(ctx);
    int st3 = fold_barrier(w);
    fold_comm_h again = fold_comm_world(ctx);
    fold_loopback_fabric_destroy(fabric);
    fold_bootstrap_mem_group_destroy(group);
    cr_expect_eq(st1, FOLD_ERR_NOT_INITIALIZED);
    cr_expect_eq(st2, FOLD_ERR_NOT_INITIALIZED);
    cr_expect_eq(st3, FOLD_ERR_NOT_INITIALIZED);
    cr_expect_null(again);
    return 0;
}

Test(api, calls_after_finalize_are_refused)
{
    after_finalize();
}

static int split_bcast_barrier(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx), half, none;
    /* Reverse order inside each color through the key. */
    EXPECT_STATUS(fold_comm_split(w, rank % 2, -rank, &half), FOLD_OK);
    EXPECT_STATUS(fold_comm_split(w, rank == 0 ? 0 : FOLD_UNDEFINED, 0, &none), FOLD_OK);
    if ((rank == 0) != (none != NULL)) {
        return 1;
    }
    int hrank, hsize;
    EXPECT_STATUS(fold_comm_rank(half, &hrank), FOLD_OK);
    EXPECT_STATUS(fold_comm_size(half, &hsize), FOLD_OK);
    int expect_size = (size + 1 - rank % 2) / 2;
    if (hsize != expect_size || hrank != expect_size - 1 - rank / 2) {
        fprintf(stderr, "rank %d: split gave %d of %d\n", rank, hrank, hsize);
        return 1;
    }
    /* A reduction on the sub-communicator sums only its members' world ranks. */
    int64_t mine = rank, sum = -1, expect = 0;
    for (int r = rank % 2; r < size; r += 2) {
        expect += r;
    }
    EXPECT_STATUS(fold_allreduce(&mine, &sum, 1, FOLD_INT64, FOLD_OP_SUM, half), FOLD_OK);
    if (sum != expect) {
        return 1;
    }
    /* Broadcast from the last rank, large enough to be segmented. */
    size_t n = 300000;
    int32_t *data = malloc(n * sizeof(*data));
    for (size_t i = 0; i < n; i++) {
        data[i] = rank == size - 1 ? (int32_t)(i * 3) : -1;
    }
    EXPECT_STATUS(fold_bcast(data, n, FOLD_INT32, size - 1, w), FOLD_OK);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= data[i] != (int32_t)(i * 3);
    }
    free(data);
    EXPECT_STATUS(fold_barrier(w), FOLD_OK);
    EXPECT_STATUS(fold_barrier(half), FOLD_OK);
    EXPECT_STATUS(fold_comm_free(&half), FOLD_OK);
    if (half != NULL || fold_comm_free(&half) != FOLD_ERR_NOT_INITIALIZED) {
        return 1;
    }
    if (none != NULL) {
        EXPECT_STATUS(fold_comm_free(&none), FOLD_OK);
    }
    fold_comm_h wcopy = w;
    EXPECT_STATUS(fold_comm_free(&wcopy), FOLD_ERR_INVALID_ARG);
    return bad;
}

Test(api, split_bcast_barrier)
{
    cr_assert_eq(lh_run(5, split_bcast_barrier, NULL), 0);
}

/* Starts n calls of `count` floats, one after the other in in/out: fold_ireduce to
 * root k % size for even k, fold_iallreduce for odd; rank r's element i is r + i % 5. */
static int start_mixed(fold_comm_h w, int rank, int size, float *in, float *out, int n,
                       size_t count, fold_request_h *reqs)
{
    for (size_t i = 0; i < count * (size_t)n; i++) {
        in[i] = (float)(rank + (int)(i % 5));
    }
    for (int k = 0; k < n; k++) {
        if (k % 2) {
            EXPECT_STATUS(fold_iallreduce(in + k * count, out + k * count, count, FOLD_FLOAT32,
                                          FOLD_OP_SUM, w, &reqs[k]), FOLD_OK);
        } else {
            EXPECT_STATUS(fold_ireduce(in + k * count, out + k * count, count, FOLD_FLOAT32,
                                       FOLD_OP_SUM, k % size, w, &reqs[k]), FOLD_OK);
        }
    }
    return 0;
}

/* Whether a result this rank gets from start_mixed's calls is wrong. */
static int mixed_results_bad(const float *out, int n, size_t count, int rank, int size)
{
    int bad = 0;
    float ranks = (float)(size * (size - 1) / 2);
    for (int k = 0; k < n; k++) {
        if (k % 2 == 0 && rank != k % size) {
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            bad |= out[k * count + i] != ranks + (float)(size * (int)((k * count + i) % 5));
        }
    }
    return bad;
}

static int nonblocking(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    enum { N = 4, COUNT = 100000 };
    fold_request_h reqs[N];
    float *in = malloc(sizeof(float) * COUNT * N), *out = malloc(sizeof(float) * COUNT * N);
    /* Several collectives in flight at once, completed out of order. */
    if (start_mixed(w, rank, size, in, out, N, COUNT, reqs) != 0) {
        return 1;
    }
    for (int k = N - 1; k >= 0; k--) {
        int st;
        while ((st = fold_test(reqs[k])) == FOLD_INPROGRESS) {
            for (int j = 0; j < N; j++) {
                fold_test(reqs[j]);   /* progress the others too */
            }
        }
        EXPECT_STATUS(st, FOLD_OK);
    }
    int bad = mixed_results_bad(out, N, COUNT, rank, size);
    for (int k = 0; k < N; k++) {
        EXPECT_STATUS(fold_wait(reqs[k]), FOLD_OK);
        EXPECT_STATUS(fold_request_free(reqs[k]), FOLD_OK);
    }
    /* Count 0 and a completed-at-once request still behave as requests. */
    fold_request_h r;
    EXPECT_STATUS(fold_iallreduce(NULL, NULL, 0, FOLD_INT8, FOLD_OP_SUM, w, &r), FOLD_OK);
    EXPECT_STATUS(fold_wait(r), FOLD_OK);
    EXPECT_STATUS(fold_request_free(r), FOLD_OK);
    free(in);
    free(out);
    return bad;
}

Test(api, nonblocking_in_flight_together)
{
    cr_assert_eq(lh_run(3, nonblocking, NULL), 0);
}

/* More calls in flight than the communicator keeps scratch buffers for (4), started
 * before any is waited for, as torch's async batches do: each past the pool gets a
 * buffer of its own (the pool once failed the fifth with FOLD_ERR_BUSY). */
static int many_in_flight(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    enum { N = 10, COUNT = 20000 };
    fold_request_h reqs[N];
    float *in = malloc(sizeof(float) * COUNT * N), *out = malloc(sizeof(float) * COUNT * N);
    if (in == NULL || out == NULL || fold_config_set(ctx, "ALLREDUCE_ALG", "ring") != FOLD_OK ||
        fold_config_set(ctx, "REDUCE_ALG", "rabenseifner") != FOLD_OK ||
        start_mixed(w, rank, size, in, out, N, COUNT, reqs) != 0) {
        return 1;
    }
    for (int k = N - 1; k >= 0; k--) {
        EXPECT_STATUS(fold_wait(reqs[k]), FOLD_OK);
        EXPECT_STATUS(fold_request_free(reqs[k]), FOLD_OK);
    }
    int bad = mixed_results_bad(out, N, COUNT, rank, size);
    free(in);
    free(out);
    return bad;
}

Test(api, more_calls_in_flight_than_the_scratch_pool)
{
    cr_assert_eq(lh_run(3, many_in_flight, NULL), 0);
}

/* Rank 1 never joins: the others must fail with a timeout, not hang. */
static int timeout_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    int v = 1, out = 0;
    EXPECT_STATUS(fold_config_set(ctx, "TIMEOUT", "0.5"), FOLD_OK);
    EXPECT_STATUS(fold_config_set(ctx, "ALLREDUCE_ALG", "ring"), FOLD_OK);
    if (rank != 1) {
        double t0 = fold_util_time_now();
        EXPECT_STATUS(fold_allreduce(&v, &out, 1, FOLD_INT32, FOLD_OP_SUM, fold_comm_world(ctx)),
                      FOLD_ERR_TIMEOUT);
        double dt = fold_util_time_now() - t0;
        if (dt < 0.4 || dt > 30) {
            fprintf(stderr, "timeout after %.2f s\n", dt);
            return 1;
        }
    }
    return 0;
}

Test(api, stuck_collective_times_out)
{
    int result;
    char *log = lh_run_logged(3, timeout_rank, NULL, &result);
    cr_expect_eq(result, 0, "%s", log);
    /* Both waiting ranks say how long, the setting, and the step they were on: rank 2
     * names rank 1, whose message never came. */
    cr_expect_eq(stderr_count(log, "no progress for"), 2, "%s", log);
    cr_expect_eq(stderr_count(log, "(FOLD_TIMEOUT=0.5)"), 2, "%s", log);
    EXPECT_LOG_HAS(log, "allreduce (ring) on comm 0, rank 2 of 3");
    EXPECT_LOG_HAS(log, "while on recv from rank 1 (message 0");
    free(log);
}

/* On a split communicator the ranks are renumbered: a timeout's message names the
 * waiting rank and the peer by their context ranks too (the harness in tests/fault
 * found a message that named the survivor's own context rank as the peer). */
static int split_timeout_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    int v = 1, out = 0, bad = 0;
    fold_comm_h sub = NULL;
    EXPECT_STATUS(fold_config_set(ctx, "TIMEOUT", "0.5"), FOLD_OK);
    EXPECT_STATUS(fold_config_set(ctx, "ALLREDUCE_ALG", "ring"), FOLD_OK);
    EXPECT_STATUS(fold_comm_split(fold_comm_world(ctx), 0, size - rank, &sub), FOLD_OK);
    if (rank != 1) {
        bad |= fold_allreduce(&v, &out, 1, FOLD_INT32, FOLD_OP_SUM, sub) != FOLD_ERR_TIMEOUT;
    }
    bad |= fold_comm_free(&sub) != FOLD_OK;
    return bad;
}

Test(api, timeout_on_split_comm_names_context_ranks)
{
    stderr_capture_begin();
    int bad = lh_run(3, split_timeout_rank, NULL);
    char *log = stderr_capture_end();
    cr_assert_eq(bad, 0, "%s", log);
    /* Context rank 0 is rank 2 of the reversed communicator, waiting for rank 1. */
    cr_expect(strstr(log, "rank 2 of 3 (context rank 0)") != NULL, "%s", log);
    cr_expect(strstr(log, "from rank 1 (context rank 1)") != NULL, "%s", log);
    free(log);
}

/* Rank 0 passes a larger count than the others: the error names the mismatch. */
static int mismatch(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    int v[8] = {0}, out[8];
    EXPECT_STATUS(fold_config_set(ctx, "TIMEOUT", "2"), FOLD_OK);
    EXPECT_STATUS(fold_config_set(ctx, "ALLREDUCE_ALG", "recursive_doubling"), FOLD_OK);
    int st = fold_allreduce(v, out, rank == 0 ? 8 : 4, FOLD_INT32, FOLD_OP_SUM,
                            fold_comm_world(ctx));
    return st == FOLD_OK;   /* any error is right; success would be wrong */
}

Test(api, mismatched_counts_fail)
{
    int result;
    char *log = lh_run_logged(2, mismatch, NULL, &result);
    cr_expect_eq(result, 0, "%s", log);
    /* Rank 1 gets more bytes than it expects (a truncation); rank 0 fewer, and the
     * fingerprint behind them says why: each names the other. */
    EXPECT_LOG_HAS(log, "rank 1 of 2: the transport reported 'message truncated "
                        "(mismatched calls)' while on recv from rank 0");
    EXPECT_LOG_HAS(log, "rank 0 of 2: rank 1 passed count 4, rank 0 passed 8");
    free(log);
}

static int user_ops(fold_context_t *ctx, int rank, int size, void *arg)
{
    fold_op_t *op = arg;
    uint64_t v = rank + 1, out = 0;
    EXPECT_STATUS(fold_allreduce(&v, &out, 1, FOLD_UINT64, *op, fold_comm_world(ctx)), FOLD_OK);
    return out != (uint64_t)(size * (size + 1) / 2);
}

static void add_u64(const void *in, void *inout, size_t n, fold_dtype_t dt, void *arg)
{
    (void)dt;
    (void)arg;
    for (size_t i = 0; i < n; i++) {
        ((uint64_t *)inout)[i] += ((const uint64_t *)in)[i];
    }
}

Test(api, commutative_user_op)
{
    fold_op_t op;
    cr_assert_eq(fold_op_create(add_u64, NULL, 1, &op), FOLD_OK);
    cr_expect_eq(lh_run(4, user_ops, &op), 0);
    cr_expect_eq(fold_op_free(op), FOLD_OK);
    cr_expect_eq(fold_op_free(op), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_op_free(FOLD_OP_SUM), FOLD_ERR_INVALID_ARG);
}

Test(api, status_strings_name_every_code)
{
    for (int s = FOLD_INPROGRESS; s > FOLD_ERR_LAST; s--) {
        cr_expect_str_neq(fold_status_string(s), "unknown status", "status %d", s);
    }
    cr_expect_str_eq(fold_status_string(12345), "unknown status");
}

typedef struct group_arg { fold_context_t *ctx; } group_arg_t;

/* An allgather over the group's members through the context bootstrap would need
 * every context rank; here the group is every other rank, so members exchange
 * through a shared table and a barrier of their own (the ranks are threads). */
#define GROUP_MAX_BYTES 4096
static unsigned char group_table[64][GROUP_MAX_BYTES];
static int group_members[64], group_nmembers;
static pthread_barrier_t group_barrier;

static int group_allgather(const void *in, void *out, size_t len, void *arg)
{
    group_arg_t *g = arg;
    int me = g->ctx->bs.rank;
    int idx = -1;
    for (int i = 0; i < group_nmembers; i++) {
        idx = group_members[i] == me ? i : idx;
    }
    if (idx < 0 || len > GROUP_MAX_BYTES) {
        return -1;
    }
    memcpy(group_table[idx], in, len);
    pthread_barrier_wait(&group_barrier);
    for (int i = 0; i < group_nmembers; i++) {
        memcpy((char *)out + (size_t)i * len, group_table[i], len);
    }
    pthread_barrier_wait(&group_barrier);
    return 0;
}

static int create_group(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    (void)arg;
    group_arg_t g = {ctx};
    fold_comm_h sub = NULL;
    int even = rank % 2 == 0;
    if (even) {
        int st = fold_comm_create_group(ctx, group_nmembers, group_members, rank / 2,
                                        group_allgather, &g, &sub);
        if (st != FOLD_OK) {
            return 1;
        }
        /* Members of one node: its node state is set up with the communicator, over
         * the group's allgather, before any call. */
        if (sub->node == NULL) {
            return 1;
        }
    }
    int bad = 0;
    if (even) {
        int r, s, cr;
        fold_comm_rank(sub, &r);
        fold_comm_size(sub, &s);
        fold_comm_context_rank(sub, s - 1, &cr);
        int64_t v = rank, sum = 0;
        bad |= r != rank / 2 || s != group_nmembers || cr != group_members[s - 1];
        bad |= fold_allreduce(&v, &sum, 1, FOLD_INT64, FOLD_OP_SUM, sub) != FOLD_OK;
        int64_t expect = 0;
        for (int i = 0; i < group_nmembers; i++) {
            expect += group_members[i];
        }
        bad |= sum != expect;
        bad |= fold_comm_free(&sub) != FOLD_OK;
    }
    int bogus[2] = {rank, 99};
    bad |= fold_comm_create_group(ctx, 2, bogus, 0, group_allgather, &g, &sub) !=
           FOLD_ERR_INVALID_ARG;
    return bad;
}

Test(api, create_group_from_member_ranks)
{
    int size = 5;
    group_nmembers = 0;
    for (int r = 0; r < size; r += 2) {
        group_members[group_nmembers++] = r;
    }
    pthread_barrier_init(&group_barrier, NULL, (unsigned)group_nmembers);
    cr_assert_eq(lh_run(size, create_group, NULL), 0);
    pthread_barrier_destroy(&group_barrier);
}

/* ---- a rank whose transport does not open -------------------------------------------- */

typedef struct broken_rank {
    void       *group, *fabric;
    int         rank, status;
    const char *transport;   /* rank 1's */
} broken_rank_t;

static void *create_context(void *arg)
{
    broken_rank_t *b = arg;
    fold_bootstrap_t bs;
    fold_context_t *ctx = NULL;
    b->status = fold_bootstrap_mem_init(&bs, b->group, b->rank);
    if (b->status == FOLD_OK) {
        /* Rank 1 gets no fabric, so its loopback transport refuses to open, or a
         * transport that does not exist. */
        b->status = fold_context_create(&bs, b->rank == 1 ? b->transport : "loopback",
                                        b->rank == 1 ? NULL : b->fabric, &ctx);
    }
    if (b->status == FOLD_OK) {
        fold_finalize(ctx);
    }
    return NULL;
}

static void one_rank_fails(const char *transport, int expected)
{
    enum { P = 3 };
    void *group = fold_bootstrap_mem_group_create(P), *fabric = fold_loopback_fabric_create(P);
    cr_assert(group != NULL && fabric != NULL);
    broken_rank_t ranks[P];
    pthread_t tid[P];
    for (int r = 0; r < P; r++) {
        ranks[r] = (broken_rank_t){group, fabric, r, -1, transport};
        cr_assert_eq(pthread_create(&tid[r], NULL, create_context, &ranks[r]), 0);
    }
    for (int r = 0; r < P; r++) {
        pthread_join(tid[r], NULL);
    }
    cr_expect_eq(ranks[1].status, expected, "rank 1: %s", fold_status_string(ranks[1].status));
    cr_expect_eq(ranks[0].status, FOLD_ERR_PEER_FAILED, "rank 0: %s",
                 fold_status_string(ranks[0].status));
    cr_expect_eq(ranks[2].status, FOLD_ERR_PEER_FAILED, "rank 2: %s",
                 fold_status_string(ranks[2].status));
    fold_loopback_fabric_destroy(fabric);
    fold_bootstrap_mem_group_destroy(group);
}

Test(api, one_rank_failing_to_open_its_transport_fails_them_all, .timeout = 60)
{
    one_rank_fails("loopback", FOLD_ERR_UNSUPPORTED);
    one_rank_fails("no_such_transport", FOLD_ERR_NOT_FOUND);
}
