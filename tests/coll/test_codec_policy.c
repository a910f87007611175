/*
 * When sends go encoded (exec_wire.c), two ranks exchanging whole vectors
 * (recursive doubling allreduce) on the loopback transport, read off the context's
 * codec counters call by call:
 *   - within a node, a rank whose peer sends it dense data stops encoding for it
 *     from the next call of that schedule (encoding would move work onto itself);
 *   - it starts again once the peer's data turns sparse: two ranks never talk each
 *     other into dense messages for good;
 *   - within a node, a collective of 1 MiB or more is encoded only when very
 *     sparse (1% non-zero), and one of 8 MiB or more only when sparser still
 *     (0.1%); across nodes the same data goes encoded when it saves bytes;
 *   - across nodes, answers never wait for this rank's own sends when the peer's
 *     messages arrive dense (coll/exec_plan.h: the wait is dropped).
 * Every call's result is checked against the sum computed here.
 */
#include <criterion/criterion.h>

#include "loopback_harness.h"

#include <stdlib.h>
#include <string.h>

typedef struct phase {
    size_t count;
    int    permille[2];   /* non-zero elements per thousand, per rank */
} phase_t;

typedef struct script {
    const char    *alg;                /* NULL: recursive_doubling */
    uint64_t       held[2];            /* answers held behind own sends, per rank */
    const phase_t *phases;
    int            nphases;
    int            calls;              /* per phase */
    uint64_t       encoded[8][4][2];   /* [phase][call][rank] sends encoded */
    uint64_t       considered[8][4][2];
    int            wrong;
} script_t;

static float value(int rank, size_t i, int permille)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(rank * 40503u);
    h ^= h >> 13;
    return (h % 1000 < (uint32_t)permille) ? (float)(1 + (i + (size_t)rank) % 5) : 0.0f;
}

static int run_script(fold_context_t *ctx, int rank, int size, void *arg)
{
    script_t *sc = arg;
    (void)size;
    uint64_t held_before = ctx->wire.held;
    if (fold_config_set(ctx, "ALLREDUCE_ALG", sc->alg ? sc->alg : "recursive_doubling") !=
            FOLD_OK ||
        fold_config_set(ctx, "CODEC", "auto") != FOLD_OK) {
        return 1;
    }
    for (int p = 0; p < sc->nphases; p++) {
        const phase_t *ph = &sc->phases[p];
        float *in = malloc(ph->count * sizeof(float)), *out = malloc(ph->count * sizeof(float));
        for (size_t i = 0; i < ph->count; i++) {
            in[i] = value(rank, i, ph->permille[rank]);
        }
        for (int c = 0; c < sc->calls; c++) {
            fold_wire_counters_t before = ctx->wire;
            if (fold_allreduce(in, out, ph->count, FOLD_FLOAT32, FOLD_OP_SUM,
                               fold_comm_world(ctx)) != FOLD_OK) {
                sc->wrong = 1;
            }
            for (size_t i = 0; i < ph->count; i++) {
                if (out[i] != value(0, i, ph->permille[0]) + value(1, i, ph->permille[1])) {
                    sc->wrong = 1;
                    break;
                }
            }
            uint64_t dense = ctx->wire.msgs[0] - before.msgs[0];
            uint64_t enc = 0;
            for (int k = 1; k < 4; k++) {
                enc += ctx->wire.msgs[k] - before.msgs[k];
            }
            sc->encoded[p][c][rank]    = enc;
            sc->considered[p][c][rank] = enc + dense;
        }
        free(in);
        free(out);
    }
    sc->held[rank] = ctx->wire.held - held_before;
    return 0;
}

Test(codec_policy, within_a_node_a_dense_peer_gets_dense_data_until_it_turns_sparse)
{
    static const phase_t phases[] = {
        {16384, {1000, 10}},   /* 64 KiB, rank 0 dense, rank 1 1% non-zero */
        {16384, {10, 10}},     /* both sparse */
    };
    script_t sc = {NULL, {0, 0}, phases, 2, 3, {{{0}}}, {{{0}}}, 0};
    cr_assert_eq(lh_run(2, run_script, &sc), 0);
    cr_expect_eq(sc.wrong, 0, "a wrong result");
    /* Imbalanced: the first call knows nothing of the peer; later ones send dense. */
    cr_expect_gt(sc.encoded[0][0][1], 0);
    for (int c = 1; c < 3; c++) {
        cr_expect_gt(sc.considered[0][c][1], 0);
        cr_expect_eq(sc.encoded[0][c][1], 0, "call %d: rank 1 still encodes for a dense peer", c);
        cr_expect_eq(sc.encoded[0][c][0], 0, "call %d: rank 0's data is dense", c);
    }
    /* Both sparse: by the second call both encode again. */
    for (int c = 1; c < 3; c++) {
        cr_expect_gt(sc.encoded[1][c][0], 0, "call %d: rank 0 does not encode", c);
        cr_expect_gt(sc.encoded[1][c][1], 0, "call %d: rank 1 does not encode", c);
    }
}

/* Two ranks on nnodes nodes (0: one): data the path must send dense, then data it
 * must send encoded, two calls each; the second call of each is read. */
static void sizes(int nnodes, size_t count, int permille_dense, int permille_sparse)
{
    const phase_t phases[] = {
        {count, {permille_dense, permille_dense}},     /* must go dense */
        {count, {permille_sparse, permille_sparse}},   /* must go encoded */
    };
    script_t sc = {NULL, {0, 0}, phases, 2, 2, {{{0}}}, {{{0}}}, 0};
    cr_assert_eq(lh_run_nodes(2, nnodes, run_script, &sc), 0);
    cr_expect_eq(sc.wrong, 0, "a wrong result");
    for (int r = 0; r < 2; r++) {
        cr_expect_gt(sc.considered[0][1][r], 0);
        cr_expect_eq(sc.encoded[0][1][r], 0, "rank %d: %d/1000 non-zero encoded", r,
                     permille_dense);
        cr_expect_gt(sc.encoded[1][1][r], 0, "rank %d: %d/1000 non-zero not encoded", r,
                     permille_sparse);
    }
}

Test(codec_policy, within_a_node_larger_collectives_are_encoded_only_when_sparser)
{
    sizes(0, 16384, 600, 300);          /* 64 KiB: half the bytes is enough */
    sizes(0, 512 * 1024, 300, 10);      /* 2 MiB: 1/16 of the bytes */
    sizes(0, 2048 * 1024, 10, 1);       /* 8 MiB: 1/64 of the bytes */
}

Test(codec_policy, across_nodes_large_messages_are_encoded_when_it_saves_bytes)
{
    sizes(2, 2048 * 1024, 1000, 300);
}

Test(codec_policy, across_nodes_answers_to_dense_peers_never_wait)
{
    /* Rabenseifner between two nodes: its allgather sends answer the peer. Dense data
     * must drop every wait; imbalanced data must still come out right. */
    static const phase_t dense[] = {{256 * 1024, {1000, 1000}}};
    static const phase_t imbalanced[] = {{256 * 1024, {1000, 10}}};
    setenv("FOLD_SEGMENT_SIZE", "64K", 1);   /* several segments per message */
    script_t sc = {"rabenseifner", {0, 0}, dense, 1, 3, {{{0}}}, {{{0}}}, 0};
    cr_assert_eq(lh_run_nodes(2, 2, run_script, &sc), 0);
    cr_expect_eq(sc.wrong, 0, "a wrong result");
    cr_expect_eq(sc.held[0] + sc.held[1], 0, "answers to a dense peer waited");
    script_t im = {"rabenseifner", {0, 0}, imbalanced, 1, 3, {{{0}}}, {{{0}}}, 0};
    cr_assert_eq(lh_run_nodes(2, 2, run_script, &im), 0);
    cr_expect_eq(im.wrong, 0, "a wrong result");
    unsetenv("FOLD_SEGMENT_SIZE");
}
