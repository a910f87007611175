/*
 * After a mismatched call on the node (node/resync.c): every rank that gets a result
 * fails with FOLD_ERR_MISMATCH (or FOLD_ERR_TRUNCATED), none with a timeout, and the
 * communicator then serves correct calls on every path -- the tiny-message path, the
 * node schedules, nonblocking -- with the right results, several rounds in a row.
 * Ranks are threads on the loopback fabric, all on one node, so every call meets
 * the node segment:
 *
 *   - the same path: shm_flat (above the tiny path), dpml, dpml_pipelined, cma,
 *     each mistake (count, datatype, op, root) on 2, 3 and 5 ranks;
 *   - different paths: a tiny blocking call against a larger or a nonblocking one,
 *     either rank the culprit, allreduce and reduce;
 *   - ranks that do not see it: a late rank (it fails the call at its start), a
 *     culprit that is a reduce's non-root and runs on into the next call;
 *   - the case that cannot be settled (a non-root ran a node call in a numbering the
 *     others do not share): every rank refuses node calls, none returns a wrong
 *     result or waits for ever.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "loopback_harness.h"
#include "stderr_capture.h"
#include "util/clock.h"
#include "test_reduced.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TINY 16     /* 64 B: the tiny-message path where shm_flat is chosen */
#define MID  65536  /* 256 KiB: a node schedule, half of it too (tiny ends at 64 KiB) */
#define MAX_RANKS 5

typedef enum mistake { COUNT, DTYPE, OP, ROOT } mistake_t;

/* What one rank passes in the mismatched call. */
typedef struct bad_call {
    int          reduce;      /* else allreduce */
    size_t       count;
    fold_dtype_t dtype;
    fold_op_t    op;
    int          root;
    int          nonblocking;
    int          sleep_ms;    /* before it: a late rank */
} bad_call_t;

typedef struct resync_case {
    const char *alg;          /* forced for allreduce and reduce */
    bad_call_t  bad[MAX_RANKS];   /* per rank */
    int         rounds;
    int         runahead;     /* rank 1 makes these extra calls right after (see below) */
    int         unsettled;    /* the agreement cannot be reached: node calls refused */
    int         mid_first;    /* the calls after it start with a node schedule's */
} resync_case_t;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int run_bad(fold_comm_h w, int rank, const bad_call_t *b, float *in, float *out)
{
    sleep_ms(b->sleep_ms);
    if (b->nonblocking) {
        fold_request_h req;
        int st = b->reduce ? fold_ireduce(in, rank == b->root ? out : NULL, b->count, b->dtype,
                                          b->op, b->root, w, &req)
                           : fold_iallreduce(in, out, b->count, b->dtype, b->op, w, &req);
        if (st == FOLD_OK) {
            st = fold_wait(req);
            fold_request_free(req);
        }
        return st;
    }
    return b->reduce ? fold_reduce(in, rank == b->root ? out : NULL, b->count, b->dtype, b->op,
                                   b->root, w)
                     : fold_allreduce(in, out, b->count, b->dtype, b->op, w);
}

/* in[i] = rank + 1 + i % 7: sums are exact in float. */
static float want_sum(int size, size_t i)
{
    return (float)(size * (size + 1) / 2 + size * (int)(i % 7));
}

static int check(const char *what, int rank, int st, const float *out, size_t n, int size,
                 int has_out)
{
    if (st != FOLD_OK) {
        fprintf(stderr, "rank %d: correct call '%s' returned %s\n", rank, what,
                fold_status_string(st));
        return 1;
    }
    for (size_t i = 0; has_out && i < n; i++) {
        if (out[i] != want_sum(size, i)) {
            fprintf(stderr, "rank %d: correct call '%s': element %zu is %g, want %g\n", rank,
                    what, i, (double)out[i], (double)want_sum(size, i));
            return 1;
        }
    }
    return 0;
}

/* Correct calls on every path; with `refused`, each must fail instead (never succeed
 * with a wrong result, never wait out FOLD_TIMEOUT). */
static int correct_calls(fold_comm_h w, int rank, int size, float *in, float *out, int refused,
                         int mid_first)
{
    for (size_t i = 0; i < MID; i++) {
        in[i] = (float)(rank + 1) + (float)(i % 7);
    }
    int bad = 0, st;
    const int root = size - 1;
    for (int k = 0; k < 2; k++) {
        size_t n = (k == 0) == (mid_first != 0) ? MID : TINY;
        memset(out, 0, MID * sizeof(float));
        st = fold_allreduce(in, out, n, FOLD_FLOAT32, FOLD_OP_SUM, w);
        bad |= refused ? st == FOLD_OK
                       : check(n == MID ? "allreduce mid" : "allreduce tiny", rank, st, out, n,
                               size, 1);
    }
    memset(out, 0, MID * sizeof(float));
    st = fold_reduce(in, rank == root ? out : NULL, MID, FOLD_FLOAT32, FOLD_OP_SUM, root, w);
    bad |= refused ? (st == FOLD_OK && rank == root)
                   : check("reduce mid", rank, st, out, MID, size, rank == root);
    memset(out, 0, MID * sizeof(float));
    st = fold_reduce(in, rank == 0 ? out : NULL, TINY, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
    bad |= refused ? (st == FOLD_OK && rank == 0)
                   : check("reduce tiny", rank, st, out, TINY, size, rank == 0);
    memset(out, 0, MID * sizeof(float));
    fold_request_h req;
    st = fold_iallreduce(in, out, TINY, FOLD_FLOAT32, FOLD_OP_SUM, w, &req);
    if (st == FOLD_OK) {
        st = fold_wait(req);
        fold_request_free(req);
    }
    bad |= refused ? st == FOLD_OK : check("iallreduce tiny", rank, st, out, TINY, size, 1);
    return bad;
}

static int has_late_rank(const resync_case_t *c, int size)
{
    for (int r = 0; r < size; r++) {
        if (c->bad[r].sleep_ms > 0) {
            return 1;
        }
    }
    return 0;
}

static int resync_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const resync_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", c->alg);
    fold_config_set(ctx, "REDUCE_ALG", c->alg);
    float *in = malloc(MID * sizeof(float)), *out = malloc(MID * sizeof(float));
    if (in == NULL || out == NULL) {
        return 1;
    }
    int bad = 0;
    if (has_late_rank(c, size)) {
        /* The node is set up at a communicator's first call here (the harness's
         * FOLD_WORLD_SETUP=lazy), together: a late rank's sleep must come after,
         * or the others wait it out in the setup and get no head start. */
        for (size_t i = 0; i < TINY; i++) {
            in[i] = (float)(rank + 1) + (float)(i % 7);
        }
        bad = check("warm-up", rank, fold_allreduce(in, out, TINY, FOLD_FLOAT32, FOLD_OP_SUM, w),
                    out, TINY, size, 1);
    }
    for (int round = 0; round < c->rounds && !bad; round++) {
        for (size_t i = 0; i < MID; i++) {
            in[i] = (float)(rank + 1);
        }
        const bad_call_t *b = &c->bad[rank];
        double t0 = fold_util_time_now();
        int st = run_bad(w, rank, b, in, out);
        double took = fold_util_time_now() - t0 - b->sleep_ms / 1e3;
        int has_out = !b->reduce || rank == b->root;
        int ok = st == FOLD_ERR_MISMATCH || st == FOLD_ERR_TRUNCATED ||
                 (st == FOLD_OK && !has_out);
        if (!ok || took > 5) {
            fprintf(stderr, "rank %d: %s, round %d: the mismatched call returned %s after "
                    "%.2f s\n", rank, c->alg, round, fold_status_string(st), took);
            bad = 1;
            break;
        }
        /* Rank 1, a reduce's non-root, goes straight on into its next calls (the
         * case's own: a tiny and then a node one). */
        if (rank == 1 && c->runahead) {
            st = fold_reduce(in, NULL, TINY, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
            st |= fold_reduce(in, NULL, MID, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
            (void)st;   /* non-roots: whatever they say, they return no result */
        } else if (c->runahead) {
            fold_reduce(in, rank == 0 ? out : NULL, TINY, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
            fold_reduce(in, rank == 0 ? out : NULL, MID, FOLD_FLOAT32, FOLD_OP_SUM, 0, w);
        }
        double t1 = fold_util_time_now();
        bad |= correct_calls(w, rank, size, in, out, c->unsettled, c->mid_first);
        if (fold_util_time_now() - t1 > 5) {
            fprintf(stderr, "rank %d: %s, round %d: the calls after it took %.2f s\n", rank,
                    c->alg, round, fold_util_time_now() - t1);
            bad = 1;
        }
    }
    free(in);
    free(out);
    return bad;
}

static void no_segment_left(void)
{
    DIR *d = opendir("/dev/shm");
    if (d == NULL) {
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        cr_expect(strstr(e->d_name, "-lh-node-") == NULL, "left in /dev/shm: %s", e->d_name);
    }
    closedir(d);
}

static void setup(void)
{
    cr_redirect_stderr();
    setenv("FOLD_TIMEOUT", "30", 1);   /* a wait out of step would show as a long call */
}

TestSuite(resync, .init = setup, .fini = no_segment_left);

/* Every rank calls `good`, but `culprit` makes the mistake. */
static resync_case_t mistake_case(const char *alg, mistake_t m, int size, int culprit)
{
    resync_case_t c = {.alg = alg, .rounds = 2};
    for (int r = 0; r < size && r < MAX_RANKS; r++) {
        int me = r == culprit;
        c.bad[r] = (bad_call_t){
            .reduce = m == ROOT, .count = me && m == COUNT ? MID / 2 : MID,
            .dtype = me && m == DTYPE ? FOLD_INT32 : FOLD_FLOAT32,
            .op = me && m == OP ? FOLD_OP_MAX : FOLD_OP_SUM,
            .root = me && m == ROOT ? culprit : 0};
    }
    return c;
}

/* Under FOLD_TEST_REDUCED: 2 and 3 ranks only, the release stage ran 5 too. */

Test(resync, same_path_node_schedules)
{
    static const char *const algs[] = {"shm_flat", "dpml", "dpml_pipelined", "cma"};
    static const mistake_t mistakes[] = {COUNT, DTYPE, OP, ROOT};
    for (size_t a = 0; a < 4; a++) {
        for (size_t m = 0; m < 4; m++) {
            static const int sizes[] = {2, 3, 5};
            for (int k = 0; k < (fold_test_reduced() ? 2 : 3); k++) {
                int size = sizes[k];
                resync_case_t c = mistake_case(algs[a], mistakes[m], size, size - 1);
                cr_expect_eq(lh_run(size, resync_rank, &c), 0, "%s, mistake %zu, %d ranks",
                             algs[a], m, size);
            }
        }
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "passed count 32768") != NULL, "log:\n%.4000s", text);
    free(text);
}

/* One rank on the tiny-message path, the others on the node's schedules, or the
 * other way round; a reduce whose root alone runs a schedule (its non-roots return
 * at once and wait in their next call, an allreduce); blocking against nonblocking. */
Test(resync, different_paths)
{
    for (int size = 2; size <= 3; size++) {
        for (int culprit_tiny = 0; culprit_tiny <= 2; culprit_tiny++) {
            int reduce = culprit_tiny == 2;
            resync_case_t c = {.alg = "shm_flat", .rounds = 2};
            for (int r = 0; r < size; r++) {
                int tiny = reduce ? r != 0 : (r == size - 1) == culprit_tiny;
                c.bad[r] = (bad_call_t){.reduce = reduce, .count = tiny ? TINY : MID,
                                        .dtype = FOLD_FLOAT32, .op = FOLD_OP_SUM};
            }
            cr_expect_eq(lh_run(size, resync_rank, &c), 0, "%d ranks, %s", size,
                         reduce ? "reduce, the root on a schedule"
                         : culprit_tiny ? "culprit on the tiny path" : "culprit on a schedule");
        }
        resync_case_t c = {.alg = "shm_flat", .rounds = 2};
        for (int r = 0; r < size; r++) {
            c.bad[r] = (bad_call_t){.count = TINY, .dtype = FOLD_FLOAT32, .op = FOLD_OP_SUM,
                                    .nonblocking = r == 1};
        }
        cr_expect_eq(lh_run(size, resync_rank, &c), 0, "%d ranks, one nonblocking", size);
    }
    char *text = stderr_redirected();
    cr_expect(strstr(text, "tiny-message path") != NULL, "log:\n%.4000s", text);
    free(text);
}

/* Ranks that never meet the culprit in the call: one that arrives late (the others
 * have given the call up: it fails it at once), and a culprit that is a reduce's
 * non-root and runs on into the next call before the root arrives (the root must
 * compare with the call the culprit made before, not fold it). */
Test(resync, ranks_that_do_not_see_it)
{
    static const char *const algs[] = {"shm_flat", "dpml"};
    for (size_t a = 0; a < 2; a++) {
        resync_case_t late = mistake_case(algs[a], COUNT, 3, 2);
        late.bad[1].sleep_ms = 200;
        cr_expect_eq(lh_run(3, resync_rank, &late), 0, "%s, a late rank", algs[a]);

        resync_case_t ahead = mistake_case(algs[a], COUNT, 3, 2);
        for (int r = 0; r < 3; r++) {
            ahead.bad[r].reduce = 1;
            ahead.bad[r].root = 0;
        }
        ahead.bad[0].sleep_ms = 200;
        ahead.mid_first = 1;   /* the culprit's next call publishes over its bad one */
        cr_expect_eq(lh_run(3, resync_rank, &ahead), 0, "%s, a culprit that runs ahead",
                     algs[a]);
    }
}

/* Rank 1 is a reduce's non-root on the tiny path while rank 0, late, runs the call
 * on a node schedule; rank 1 goes on into a tiny and a node call before rank 0 has
 * failed. Its node call used the epoch rank 0's given-up call had: the node's calls
 * cannot be renumbered, so every rank refuses them from then on -- rank 0 catches
 * rank 1's later call where it waits (not folding it), and nobody waits for ever. */
Test(resync, unsettled_case_refuses)
{
    resync_case_t c = {.alg = "shm_flat", .rounds = 1, .runahead = 1, .unsettled = 1};
    c.bad[0] = (bad_call_t){.reduce = 1, .count = MID, .dtype = FOLD_FLOAT32,
                            .op = FOLD_OP_SUM, .root = 0, .sleep_ms = 200};
    c.bad[1] = (bad_call_t){.reduce = 1, .count = TINY, .dtype = FOLD_FLOAT32,
                            .op = FOLD_OP_SUM, .root = 0};
    cr_expect_eq(lh_run(2, resync_rank, &c), 0);
    char *text = stderr_redirected();
    cr_expect(strstr(text, "cannot be brought back into step") != NULL, "log:\n%.4000s",
              text);
    free(text);
}

/* More node-aware calls in flight than the node remembers positions of (each call
 * publishes its own): matching calls never look mismatched, here with rank 0 starting
 * all of them before it waits and rank 1 waiting for each in turn. */
static int in_flight_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    enum { CALLS = 12, N = 1024 };
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "dpml");
    float *in = malloc(CALLS * N * sizeof(float)), *out = malloc(CALLS * N * sizeof(float));
    fold_request_h req[CALLS];
    int bad = in == NULL || out == NULL;
    for (int c = 0; c < CALLS && !bad; c++) {
        for (int i = 0; i < N; i++) {
            in[c * N + i] = (float)(rank + 1) + (float)(i % 7);
        }
        bad |= fold_iallreduce(in + c * N, out + c * N, N, FOLD_FLOAT32, FOLD_OP_SUM, w,
                               &req[c]) != FOLD_OK;
        if (rank == 1 && !bad) {
            bad |= fold_wait(req[c]) != FOLD_OK;
        }
    }
    for (int c = 0; c < CALLS && !bad; c++) {
        bad |= fold_wait(req[c]) != FOLD_OK || fold_request_free(req[c]) != FOLD_OK;
        for (int i = 0; i < N && !bad; i++) {
            bad |= out[c * N + i] != want_sum(size, (size_t)i);
        }
    }
    free(in);
    free(out);
    return bad;
}

Test(resync, many_calls_in_flight)
{
    cr_expect_eq(lh_run(2, in_flight_rank, NULL), 0);
}
