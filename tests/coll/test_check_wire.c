/*
 * Without FOLD_CHECK, algorithms over the transport compare the call's fingerprint
 * on the first message between two ranks (runtime/coll/exec_fp.c): for every flat
 * algorithm of the registry, each mistake -- a count (both sides of the inline
 * border, and a large one), a datatype, an op, a root, the collective -- on 2, 3
 * and 5 ranks, one per virtual node:
 *
 *   - no rank that gets a result returns success (a reduce's other ranks may);
 *   - a rank that receives from the culprit fails with FOLD_ERR_MISMATCH naming the
 *     field (a larger count it cannot take: FOLD_ERR_TRUNCATED); the others fail
 *     with FOLD_ERR_TIMEOUT or FOLD_ERR_PEER_FAILED, as the ranks they wait for
 *     stopped;
 *   - the communicator then serves a correct call.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include "coll/alg.h"
#include "loopback_harness.h"
#include "stderr_capture.h"
#include "test_reduced.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum mistake {
    COUNT_SMALL,    /* 64 against 32 elements: both inline */
    COUNT_BORDER,   /* 2048 against 512: one inline, one beside */
    COUNT_LARGE,    /* 100000 against 50000: both beside */
    DTYPE, OP, ROOT, COLL, NMISTAKES
} mistake_t;

static const char *const mistake_names[NMISTAKES] = {
    "count", "count across the inline border", "large count", "datatype", "op", "root",
    "collective"};

typedef struct wire_case {
    const fold_alg_t *alg;
    mistake_t         mistake;
    int               culprit;
    const char       *timeout;   /* FOLD_TIMEOUT for the mistaken call (NULL: setup's) */
    int               caught;    /* ranks that returned FOLD_ERR_MISMATCH */
    int               shared;    /* ranks share nodes of several: a mismatch on a node
                                    segment leaves it out of step (a resync is for a
                                    communicator on one node, node/resync.c), so the
                                    communicator's later node-aware calls fail
                                    (FOLD_ERR_PEER_FAILED) */
} wire_case_t;

static size_t count_of(mistake_t m, int culprit)
{
    switch (m) {
    case COUNT_SMALL:  return culprit ? 32 : 64;
    case COUNT_BORDER: return culprit ? 512 : 2048;
    case COUNT_LARGE:  return culprit ? 50000 : 100000;
    default:           return 2048;
    }
}

static int reduce_case(mistake_t m)
{
    return m == ROOT || m == COLL;
}

static int wire_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    wire_case_t *c = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", c->alg->name);
    fold_config_set(ctx, "REDUCE_ALG", c->alg->name);
    if (c->timeout != NULL) {
        fold_config_set(ctx, "TIMEOUT", c->timeout);
    }
    enum { MAX = 100000 };
    float *in = malloc(MAX * sizeof(float)), *out = malloc(MAX * sizeof(float));
    if (in == NULL || out == NULL) {
        return 1;
    }
    for (int i = 0; i < MAX; i++) {
        in[i] = (float)(rank + 1);
    }
    int me = rank == c->culprit, st;
    size_t count = count_of(c->mistake, me);
    fold_dtype_t dt = me && c->mistake == DTYPE ? FOLD_INT32 : FOLD_FLOAT32;
    fold_op_t op = me && c->mistake == OP ? FOLD_OP_MAX : FOLD_OP_SUM;
    int root = me && c->mistake == ROOT ? c->culprit : 0, result;
    lh_barrier(ctx);   /* the timeout starts when every rank is in the call */
    if (c->mistake == ROOT || (c->mistake == COLL && !me)) {
        st = fold_reduce(in, rank == root ? out : NULL, count, dt, op, root, w);
        result = rank == root;
    } else {
        st = fold_allreduce(in, out, count, dt, op, w);
        result = 1;
    }
    if (st == FOLD_ERR_MISMATCH) {
        __atomic_fetch_add(&c->caught, 1, __ATOMIC_RELAXED);
    }
    int ok = st == FOLD_ERR_MISMATCH || st == FOLD_ERR_TRUNCATED || st == FOLD_ERR_TIMEOUT ||
             st == FOLD_ERR_PEER_FAILED || (st == FOLD_OK && !result);
    if (!ok) {
        fprintf(stderr, "rank %d: %s, mistake '%s' by rank %d on %d ranks returned %s\n", rank,
                c->alg->name, mistake_names[c->mistake], c->culprit, size,
                fold_status_string(st));
    }
    /* The communicator still serves a correct call (or, after a mismatch on a node
     * segment, refuses it: never a wrong result). */
    fold_config_set(ctx, "TIMEOUT", "60");   /* 0.25 s was for the ranks left waiting */
    lh_barrier(ctx);
    int again = fold_allreduce(in, out, 1000, FOLD_FLOAT32, FOLD_OP_SUM, w);
    int refused = c->shared && again == FOLD_ERR_PEER_FAILED;
    if (!refused && (again != FOLD_OK || out[999] != (float)(size * (size + 1) / 2))) {
        fprintf(stderr, "rank %d: %s, the correct call after mistake '%s' returned %s (%g)\n",
                rank, c->alg->name, mistake_names[c->mistake], fold_status_string(again),
                (double)out[999]);
        ok = 0;
    }
    free(in);
    free(out);
    return ok ? 0 : 1;
}

/* One mistake on RANKS ranks over NODES nodes. A rank that stalls past the short
 * timeout (a loaded machine) lets its partners give up before the culprit's message
 * reaches them, and then no rank can name the mismatch: where none did, the case runs
 * again with a timeout no stall reaches, and a mismatch still unnamed fails. */
static void run_case(wire_case_t *c, int ranks, int nodes)
{
    cr_expect_eq(lh_run_nodes(ranks, nodes, wire_rank, c), 0, "%s, mistake '%s', %d ranks on "
                 "%d nodes", c->alg->name, mistake_names[c->mistake], ranks, nodes);
    if (c->caught == 0) {
        c->timeout = "20";
        cr_expect_eq(lh_run_nodes(ranks, nodes, wire_rank, c), 0, "%s, mistake '%s', %d ranks "
                     "on %d nodes, %s s timeout", c->alg->name, mistake_names[c->mistake], ranks,
                     nodes, c->timeout);
    }
    cr_expect(c->caught > 0, "%s, mistake '%s', %d ranks on %d nodes: no rank said mismatch",
              c->alg->name, mistake_names[c->mistake], ranks, nodes);
}

/* Every flat algorithm that builds the collective the mistake needs. */
static void run_all(mistake_t m, const int *sizes, int nsizes)
{
    nsizes = fold_test_reduced() && nsizes > 2 ? 2 : nsizes;
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        const fold_alg_t *alg = fold_alg_all[a];
        if ((alg->flags & FOLD_ALG_NODE_AWARE) ||
            fold_alg_builder(alg, FOLD_COLL_ALLREDUCE) == NULL ||
            (reduce_case(m) && fold_alg_builder(alg, FOLD_COLL_REDUCE) == NULL)) {
            continue;
        }
        for (int s = 0; s < nsizes; s++) {
            wire_case_t c = {alg, m, sizes[s] - 1, NULL, 0, 0};
            run_case(&c, sizes[s], sizes[s]);
        }
    }
}

static void expect_logged(const char *words)
{
    char *text = stderr_redirected();
    cr_expect(strstr(text, words) != NULL, "no \"%s\" in the log:\n%.4000s", words, text);
    free(text);
}

static void setup(void)
{
    cr_redirect_stderr();
    /* Ranks that never meet the culprit wait this long: the others see its first
     * message within milliseconds, under the sanitizers too. */
    setenv("FOLD_TIMEOUT", "0.25", 1);
}

TestSuite(check_wire, .init = setup);

static const int sizes[] = {2, 3, 5};

/* Each mistake on every flat algorithm; the log must say what the culprit passed. */
#define MISTAKE_TEST(name, mistake, words) \
    Test(check_wire, name)                 \
    {                                      \
        run_all(mistake, sizes, 3);        \
        expect_logged(words);              \
    }

MISTAKE_TEST(count_small, COUNT_SMALL, "passed count 32")
MISTAKE_TEST(count_border, COUNT_BORDER, "passed count 512")
MISTAKE_TEST(count_large, COUNT_LARGE, "passed count 50000")
MISTAKE_TEST(datatype, DTYPE, "passed datatype int32")
MISTAKE_TEST(op, OP, "passed op max")
MISTAKE_TEST(root, ROOT, "passed root")
MISTAKE_TEST(collective, COLL, "passed collective")

/* Matching calls on every flat algorithm carry fingerprints and pass, inline and
 * beside, over many calls (the arena is reused). */
static int agree_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const fold_alg_t *alg = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", alg->name);
    static const size_t counts[] = {1, 100, 1024, 1025, 5000, 70000};
    float *in = malloc(70000 * sizeof(float)), *out = malloc(70000 * sizeof(float));
    int bad = in == NULL || out == NULL;
    for (int rep = 0; rep < 3 && !bad; rep++) {
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !bad; k++) {
            for (size_t i = 0; i < counts[k]; i++) {
                in[i] = (float)rank;
            }
            bad |= fold_allreduce(in, out, counts[k], FOLD_FLOAT32, FOLD_OP_SUM, w) != FOLD_OK;
            bad |= out[counts[k] - 1] != (float)(size * (size - 1) / 2);
        }
    }
    free(in);
    free(out);
    return bad;
}

Test(check_wire, matching_calls_pass)
{
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        const fold_alg_t *alg = fold_alg_all[a];
        if ((alg->flags & FOLD_ALG_NODE_AWARE) ||
            fold_alg_builder(alg, FOLD_COLL_ALLREDUCE) == NULL) {
            continue;
        }
        cr_expect_eq(lh_run_nodes(3, 3, agree_rank, (void *)alg), 0, "%s", alg->name);
    }
}

/* dpml between nodes: its leaders' exchange is transport messages like any flat
 * algorithm's, so a culprit on another node is caught there (2 nodes of 1 and of 2
 * ranks; on a node the segment's checks catch it as before). */
Test(check_wire, dpml_between_nodes)
{
    static const char *const algs[] = {"dpml", "dpml_pipelined"};
    static const mistake_t mistakes[] = {DTYPE, OP, COUNT_LARGE};
    for (size_t a = 0; a < 2; a++) {
        for (size_t m = 0; m < sizeof(mistakes) / sizeof(mistakes[0]); m++) {
            for (int ranks = 2; ranks <= 4; ranks += 2) {
                wire_case_t c = {fold_alg_find(algs[a]), mistakes[m], ranks - 1, NULL, 0,
                                 ranks > 2};
                cr_assert_not_null(c.alg);
                run_case(&c, ranks, 2);
            }
        }
    }
    expect_logged("passed datatype int32");
}
