/*
 * Node layouts: block and cyclic placements are recognised and kept without a
 * per-rank array; anything else keeps a table; every rank's node is right.
 */
#include <criterion/criterion.h>

#include "group/nodemap.h"
#include "loopback_harness.h"

#include <fold/fold_status.h>
#include <stdlib.h>

static void check(const int *node_of, int size, int kind)
{
    fold_nodemap_t m;
    cr_assert_eq(fold_nodemap_init(&m, size, node_of), FOLD_OK);
    cr_expect_eq(m.kind, kind, "layout kept as %s", fold_nodemap_kind_name(&m));
    for (int r = 0; r < size; r++) {
        cr_expect_eq(fold_nodemap_node(&m, r), node_of[r], "rank %d", r);
    }
    if (kind != FOLD_NODEMAP_TABLE) {
        cr_expect_eq(fold_nodemap_bytes(&m), sizeof(m));
    }
    fold_nodemap_free(&m);
}

Test(nodemap, layouts)
{
    int n[64];
    for (int r = 0; r < 64; r++) {
        n[r] = r / 8;                    /* 8 nodes of 8 */
    }
    check(n, 64, FOLD_NODEMAP_BLOCK);
    check(n, 61, FOLD_NODEMAP_BLOCK);    /* the last node holds 5 */
    for (int r = 0; r < 64; r++) {
        n[r] = r % 5;
    }
    check(n, 64, FOLD_NODEMAP_CYCLIC);
    for (int r = 0; r < 64; r++) {
        n[r] = 0;
    }
    check(n, 64, FOLD_NODEMAP_BLOCK);    /* one node */
    check(n, 1, FOLD_NODEMAP_BLOCK);
    static const int uneven[4] = {0, 0, 1, 2}, mixed[8] = {0, 1, 0, 1, 0, 1, 0, 2};
    check(uneven, 4, FOLD_NODEMAP_TABLE);
    check(mixed, 8, FOLD_NODEMAP_TABLE);
}

/* The loopback harness puts rank r on node r mod nodes: the context keeps that as
 * a formula, and a communicator's remote peers follow from it. */
static int cyclic_context(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    int bad = ctx->nodes.kind != FOLD_NODEMAP_CYCLIC || ctx->nnodes != 2;
    fold_comm_t *w = fold_comm_world(ctx);
    for (int r = 0; r < size; r++) {
        bad |= fold_comm_peer_remote(w, r) != (r % 2 != rank % 2);
    }
    return bad;
}

Test(nodemap, context_keeps_the_launcher_layout)
{
    cr_expect_eq(lh_run_nodes(6, 2, cyclic_context, NULL), 0);
}
