/*
 * FOLD_WORLD_SETUP=init (coll/select_warm.c, comm.c): fold_init leaves the world with
 * its node state and every decision of the size classes up to 64 MiB, each rank
 * having made a share of them, and those decisions are the ones each rank makes by
 * itself at its first call (FOLD_WORLD_SETUP=lazy). On 2 and 3 ranks of one node and
 * on 4 ranks over 2 virtual nodes (dpml's leaders and the flat algorithm between
 * nodes travel too).
 */
#include "loopback_harness.h"

#include <criterion/criterion.h>
#include <fold/fold.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 4

typedef struct seen {
    int                 node_at_init[MAX_RANKS];
    fold_select_entry_t entry[MAX_RANKS][2][FOLD_SELECT_WARM_CLASSES];
    int8_t              advice[MAX_RANKS][2][FOLD_SELECT_WARM_CLASSES];
    int                 adopt_known[MAX_RANKS];   /* classes priced for adoption at init */
    int                 mapped_known[MAX_RANKS];  /* ... whose choice in fold memory is
                                                     known at init */
    int                 adopt_at_init[MAX_RANKS][2][FOLD_SELECT_WARM_CLASSES];
    int                 adopt_again[MAX_RANKS][2][FOLD_SELECT_WARM_CLASSES];   /* asked anew */
    int                 adopting[MAX_RANKS];      /* the node may adopt buffers */
} seen_t;

static const fold_coll_t colls[2] = {FOLD_COLL_ALLREDUCE, FOLD_COLL_REDUCE};

/* What the world's caches hold after fold_init, then after every class was asked
 * (the lazy run asks here; the warmed one must already know). */
static int record(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    seen_t *s = arg;
    fold_comm_t *w = ctx->world;
    s->node_at_init[rank] = w->node != NULL;
    for (int c = 0; c < 2; c++) {
        for (int k = 12; k < FOLD_SELECT_WARM_CLASSES; k++) {
            s->adopt_known[rank] += w->select.entry[colls[c]][k].adopt_passes != 0;
            s->mapped_known[rank] += w->select.mapped_entry != NULL &&
                                     w->select.mapped_entry[colls[c]][k].valid;
        }
    }
    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < FOLD_SELECT_WARM_CLASSES; k++) {
            fold_choice_t choice;
            if (fold_select(w, colls[c], (size_t)1 << k, FOLD_UINT8, FOLD_OP_SUM, &choice) !=
                FOLD_OK) {
                return 1;
            }
            int serve;
            if (fold_serve_advice(w, c == 0 ? "allreduce" : "reduce", (size_t)1 << k, &serve,
                                  NULL) != FOLD_OK) {
                return 1;
            }
            /* What fold_init priced, and what the model says when asked anew. */
            fold_select_entry_t *e = &w->select.entry[colls[c]][k];
            s->adopt_at_init[rank][c][k] = e->adopt_passes;
            e->adopt_passes = 0;
            const int again = fold_select_adopt_passes(w, colls[c], (size_t)1 << k, FOLD_UINT8,
                                                       FOLD_OP_SUM);
            s->adopt_again[rank][c][k] = k < 12 || w->node == NULL ? s->adopt_at_init[rank][c][k]
                                         : again > 0                ? again
                                                                    : -1;
            s->entry[rank][c][k]  = w->select.entry[colls[c]][k];
            s->advice[rank][c][k] = w->select.advice[colls[c]][k];
        }
    }
    s->adopting[rank] = w->node != NULL && w->node->adopt && w->node->single_copy &&
                        w->node->xmap != NULL;
    return 0;
}

/* Counts the classes whose decision was already in the cache right after fold_init. */
static int known_at_init(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    int *known = arg;
    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < FOLD_SELECT_WARM_CLASSES; k++) {
            known[rank] += ctx->world->select.entry[colls[c]][k].valid &&
                           ctx->world->select.advice[colls[c]][k] >= 0;
        }
    }
    return 0;
}

static void run(int ranks, int nodes, const char *setup, seen_t *s)
{
    setenv("FOLD_WORLD_SETUP", setup, 1);
    memset(s, 0, sizeof(*s));
    cr_assert_eq(nodes == 1 ? lh_run(ranks, record, s) : lh_run_nodes(ranks, nodes, record, s),
                 0, "%d ranks, FOLD_WORLD_SETUP=%s", ranks, setup);
}

static void expect_same_decisions(int ranks, int nodes)
{
    static seen_t warm, lazy;
    run(ranks, nodes, "init", &warm);
    run(ranks, nodes, "lazy", &lazy);
    for (int r = 0; r < ranks; r++) {
        cr_expect_eq(warm.node_at_init[r], 1, "rank %d: no node state after fold_init", r);
        if (warm.adopting[r]) {   /* every class from 4 KiB priced before the first call */
            cr_expect_eq(warm.adopt_known[r], 2 * (FOLD_SELECT_WARM_CLASSES - 12),
                         "rank %d: %d classes priced for adoption at init", r,
                         warm.adopt_known[r]);
            /* The first call of a class agrees on placement: it needs that choice. */
            cr_expect_eq(warm.mapped_known[r], 2 * (FOLD_SELECT_WARM_CLASSES - 12),
                         "rank %d: %d classes' choice in fold memory known at init", r,
                         warm.mapped_known[r]);
        }
        cr_expect_eq(lazy.node_at_init[r], 0, "rank %d: lazy, node state before a call", r);
        for (int c = 0; c < 2; c++) {
            for (int k = 0; k < FOLD_SELECT_WARM_CLASSES; k++) {
                const fold_select_entry_t *a = &warm.entry[r][c][k], *b = &lazy.entry[r][c][k];
                cr_expect_eq(a->valid, b->valid, "rank %d coll %d class %d", r, c, k);
                if (!a->valid || !b->valid) {
                    continue;
                }
                cr_expect_eq(a->choice.alg, b->choice.alg, "rank %d coll %d class %d: %s vs %s",
                             r, c, k, a->choice.alg->name, b->choice.alg->name);
                cr_expect_eq(a->choice.leaders, b->choice.leaders, "rank %d coll %d class %d",
                             r, c, k);
                cr_expect_eq(a->choice.inter, b->choice.inter, "rank %d coll %d class %d", r, c,
                             k);
                cr_expect_eq(a->choice.root_weight, b->choice.root_weight, "class %d", k);
                cr_expect_eq(a->choice.seg_bytes, b->choice.seg_bytes, "class %d", k);
                cr_expect_eq(memcmp(a->segs, b->segs, sizeof(a->segs)), 0, "class %d", k);
                cr_expect_float_eq(a->us, b->us, 1e-9 * (1 + b->us), "class %d", k);
                cr_expect_eq(a->nalgs, b->nalgs, "class %d", k);
                cr_expect_eq(memcmp(a->algs, b->algs, sizeof(a->algs)), 0, "class %d", k);
                cr_expect_eq(warm.advice[r][c][k], lazy.advice[r][c][k], "class %d", k);
                cr_expect_eq(warm.adopt_at_init[r][c][k], warm.adopt_again[r][c][k],
                             "class %d: adoption priced at pass %d at init, %d asked again",
                             k, warm.adopt_at_init[r][c][k], warm.adopt_again[r][c][k]);
            }
        }
    }
}

/* The model is deterministic but the rates it starts from are measured per run:
 * comparing two runs needs them pinned. */
static void pin_model(void)
{
    setenv("FOLD_MODEL", "generic,copy_gbs=50,copy_mem_gbs=20,reduce_gbs=30,reduce_mem_gbs=12,"
                         "shm_gbs=40,shm_reduce_gbs=25,shm_write_gbs=45,shm_fold_gbs=35,"
                         "shm_fold_far_gbs=28,"
                         "cma_gbs=10,cma_us=1,flag_us=0.2,l2_bytes=1M,copy_l2_gbs=70,"
                         "reduce_l2_gbs=45",
           1);
}

TestSuite(select_warm, .init = pin_model);

Test(select_warm, two_ranks_on_one_node)
{
    expect_same_decisions(2, 1);
}

Test(select_warm, three_ranks_on_one_node)
{
    expect_same_decisions(3, 1);
}

Test(select_warm, four_ranks_on_two_nodes)
{
    expect_same_decisions(4, 2);
}

/* Right after fold_init every class up to 64 MiB is known on every rank, not only
 * the ones it decided. */
Test(select_warm, every_class_known_after_init)
{
    setenv("FOLD_WORLD_SETUP", "init", 1);
    int known[3] = {0};
    cr_assert_eq(lh_run(3, known_at_init, known), 0);
    for (int r = 0; r < 3; r++) {
        cr_expect_eq(known[r], 2 * FOLD_SELECT_WARM_CLASSES, "rank %d knew %d", r, known[r]);
    }
}
