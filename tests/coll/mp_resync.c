/*
 * Mismatched calls on the node's schedules between real processes (node/resync.c),
 * no FOLD_CHECK: for each node algorithm forced (shm_flat, dpml, dpml_pipelined)
 * and each mistake the last rank makes (a count, a datatype, an op, a root), every
 * rank that gets a result fails with FOLD_ERR_MISMATCH (FOLD_ERR_TRUNCATED), none
 * after FOLD_TIMEOUT; then correct calls on every path (tiny-message, schedules,
 * nonblocking, allreduce and reduce) give the right result. The same for calls that
 * take different paths: a tiny blocking call against a larger or a nonblocking one.
 * Exits 0 when every case did.
 */
#include <fold/fold.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TINY 16     /* 64 B: the tiny-message path under shm_flat */
#define MID  16384  /* 64 KiB: a node schedule (above the tiny path's 32 KiB) */

static int rank, size, failures;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* in[i] = rank + 1 + i % 7: every sum is exact in float. */
static float want(size_t i)
{
    return (float)(size * (size + 1) / 2 + size * (int)(i % 7));
}

static void expect_result(const char *what, const char *after, int st, const float *out,
                          size_t n, int has_out)
{
    size_t bad = n;
    for (size_t i = 0; st == FOLD_OK && has_out && i < n && bad == n; i++) {
        bad = out[i] != want(i) ? i : n;
    }
    if (st != FOLD_OK || bad != n) {
        fprintf(stderr, "rank %d: %s after %s: %s", rank, what, after,
                fold_status_string(st));
        if (st == FOLD_OK) {
            fprintf(stderr, ", element %zu is %g, want %g", bad, (double)out[bad],
                    (double)want(bad));
        }
        fprintf(stderr, "\n");
        failures++;
    }
}

/* Correct calls on every path, twice over. */
static void correct_calls(fold_comm_h w, const char *after, float *in, float *out)
{
    for (size_t i = 0; i < MID; i++) {
        in[i] = (float)(rank + 1) + (float)(i % 7);
    }
    const int last = size - 1;
    for (int rep = 0; rep < 2; rep++) {
        memset(out, 0, MID * sizeof(float));
        expect_result("allreduce of 16", after,
                      fold_allreduce(in, out, TINY, FOLD_FLOAT32, FOLD_OP_SUM, w), out, TINY, 1);
        memset(out, 0, MID * sizeof(float));
        expect_result("allreduce of 4096", after,
                      fold_allreduce(in, out, MID, FOLD_FLOAT32, FOLD_OP_SUM, w), out, MID, 1);
        memset(out, 0, MID * sizeof(float));
        expect_result("reduce of 4096", after,
                      fold_reduce(in, rank == last ? out : NULL, MID, FOLD_FLOAT32, FOLD_OP_SUM,
                                  last, w), out, MID, rank == last);
        memset(out, 0, MID * sizeof(float));
        expect_result("reduce of 16", after,
                      fold_reduce(in, rank == 0 ? out : NULL, TINY, FOLD_FLOAT32, FOLD_OP_SUM,
                                  0, w), out, TINY, rank == 0);
        memset(out, 0, MID * sizeof(float));
        fold_request_h req;
        int st = fold_iallreduce(in, out, TINY, FOLD_FLOAT32, FOLD_OP_SUM, w, &req);
        if (st == FOLD_OK) {
            st = fold_wait(req);
            fold_request_free(req);
        }
        expect_result("iallreduce of 16", after, st, out, TINY, 1);
    }
}

/* The mismatched call: fails on every rank that gets a result, within a second. */
static void expect_mismatch(const char *what, int st, int has_out, double took)
{
    int ok = st == FOLD_ERR_MISMATCH || st == FOLD_ERR_TRUNCATED || (st == FOLD_OK && !has_out);
    if (!ok || took > 2) {
        fprintf(stderr, "rank %d: %s returned %s after %.2f s\n", rank, what,
                fold_status_string(st), took);
        failures++;
    }
}

static void mistake(fold_comm_h w, const char *alg, const char *m, float *in, float *out)
{
    char what[96];
    snprintf(what, sizeof(what), "%s, mistake '%s'", alg, m);
    int me = rank == size - 1;
    size_t n = me && strcmp(m, "count") == 0 ? MID / 2 : MID;
    fold_dtype_t dt = me && strcmp(m, "datatype") == 0 ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && strcmp(m, "op") == 0 ? FOLD_OP_MAX : FOLD_OP_SUM;
    for (size_t i = 0; i < MID; i++) {
        in[i] = (float)(rank + 1);
    }
    double t0 = now();
    int st, has_out = 1;
    if (strcmp(m, "root") == 0) {
        int root = me ? size - 1 : 0;
        has_out = rank == root;
        st = fold_reduce(in, has_out ? out : NULL, n, dt, op, root, w);
    } else {
        st = fold_allreduce(in, out, n, dt, op, w);
    }
    expect_mismatch(what, st, has_out, now() - t0);
    correct_calls(w, what, in, out);
}

/* Rank `odd` calls with `odd_count` (or nonblocking), the others with `count`. */
static void paths(fold_comm_h w, const char *what, int odd, size_t count, size_t odd_count,
                  int nonblocking, float *in, float *out)
{
    for (size_t i = 0; i < MID; i++) {
        in[i] = (float)(rank + 1);
    }
    double t0 = now();
    int st;
    if (rank == odd && nonblocking) {
        fold_request_h req;
        st = fold_iallreduce(in, out, count, FOLD_FLOAT32, FOLD_OP_SUM, w, &req);
        if (st == FOLD_OK) {
            st = fold_wait(req);
            fold_request_free(req);
        }
    } else {
        st = fold_allreduce(in, out, rank == odd ? odd_count : count, FOLD_FLOAT32,
                            FOLD_OP_SUM, w);
    }
    expect_mismatch(what, st, 1, now() - t0);
    correct_calls(w, what, in, out);
}

int main(void)
{
    fold_context_h ctx;
    if (fold_init(NULL, &ctx) != FOLD_OK) {
        fprintf(stderr, "mp_resync: fold_init failed\n");
        return 1;
    }
    fold_comm_h w = fold_comm_world(ctx);
    fold_comm_rank(w, &rank);
    fold_comm_size(w, &size);
    float *in = malloc(MID * sizeof(float)), *out = malloc(MID * sizeof(float));
    if (in == NULL || out == NULL) {
        return 1;
    }
    static const char *const algs[] = {"shm_flat", "dpml", "dpml_pipelined"};
    static const char *const mistakes[] = {"count", "datatype", "op", "root"};
    for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
        fold_config_set(ctx, "ALLREDUCE_ALG", algs[a]);
        fold_config_set(ctx, "REDUCE_ALG", algs[a]);
        for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
            mistake(w, algs[a], mistakes[m], in, out);
        }
    }
    fold_config_set(ctx, "ALLREDUCE_ALG", "shm_flat");
    fold_config_set(ctx, "REDUCE_ALG", "shm_flat");
    paths(w, "the last rank tiny, the others a node schedule", size - 1, MID, TINY, 0, in, out);
    paths(w, "the last rank on a node schedule, the others tiny", size - 1, TINY, MID, 0, in, out);
    paths(w, "rank 0 nonblocking, the others blocking", 0, TINY, TINY, 1, in, out);
    free(in);
    free(out);
    fold_finalize(ctx);
    if (failures == 0 && rank == 0) {
        printf("mp_resync: every mistake failed, and every call after it was right\n");
    }
    return failures != 0;
}
