/*
 * The single-copy algorithm's split of the message among its owners, checked on
 * the schedules themselves: over every rank's schedule, each element of the
 * result is folded exactly once and lands in the root's OUT exactly once (the
 * root's own folds into OUT, the other owners' writes into it), for any number of
 * owners and any weight of the root's block. Running the schedules is the loopback
 * and mp_coll matrices' job; this covers the weights the model may pick.
 */
#include "coll/alg.h"
#include "coll/exec_plan.h"
#include "coll/sched.h"
#include "node/topo.h"

#include <criterion/criterion.h>
#include <fold/fold_status.h>
#include <stdlib.h>

static fold_topo_t *one_node(int size)
{
    int key[16] = {0}, pkg[16] = {0};
    fold_topo_t *t;
    cr_assert_eq(fold_topo_build(size, key, pkg, &t), FOLD_OK);
    return t;
}

/* Adds 1 to times[i] for each element the step puts into the root's OUT. */
static void count_root_writes(const fold_step_t *st, int rank, int root, size_t *times)
{
    int into_out = (st->kind == FOLD_STEP_REDUCE && rank == root && st->dst.buf == FOLD_BUF_OUT) ||
                   (st->kind == FOLD_STEP_PEER_WRITE && st->peer == root);
    for (size_t i = 0; into_out && i < st->count; i++) {
        times[st->dst.off + i]++;
    }
}

static void check_split(int size, int owners, int weight, int root, size_t n)
{
    fold_topo_t *t = one_node(size);
    size_t *times = calloc(n, sizeof(*times));
    size_t owned[16] = {0};
    for (int rank = 0; rank < size; rank++) {
        fold_coll_args_t a = {.coll = FOLD_COLL_REDUCE, .rank = rank, .size = size,
                              .root = root, .count = n, .seg_count = 300, .depth = 2,
                              .commutative = 1, .topo = t, .leaders = owners,
                              .root_weight = weight};
        fold_sched_t s;
        fold_sched_init(&s, &a);
        cr_assert_eq(fold_alg_builder(&fold_alg_cma, FOLD_COLL_REDUCE)(&a, &s), FOLD_OK);
        for (size_t g = 0; g < s.nsteps; g++) {
            count_root_writes(&s.steps[g], rank, root, times);
            /* A reduce that folds the last row: one element of a block done. */
            if (s.steps[g].kind == FOLD_STEP_PEER_WRITE ||
                (s.steps[g].kind == FOLD_STEP_REDUCE && s.steps[g].dst.buf == FOLD_BUF_OUT)) {
                owned[rank] += s.steps[g].count;
            }
        }
        fold_sched_cleanup(&s);
    }
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(times[i], 1, "p=%d owners=%d weight=%d root=%d n=%zu: element %zu "
                     "reaches the root's OUT %zu times", size, owners, weight, root, n, i,
                     times[i]);
    }
    /* The root's share follows its weight: w / (w + owners - 1) of the message. */
    if (owners > 1 && weight > 0 && n >= 1000) {
        double w = weight / 100.0, want = (double)n * w / (w + owners - 1);
        cr_expect_leq(abs((int)owned[root] - (int)want), 1, "p=%d owners=%d weight=%d: root "
                      "folds %zu of %zu, expected %.0f", size, owners, weight, owned[root], n,
                      want);
    }
    free(times);
    fold_topo_free(t);
}

Test(alg_cma, every_element_reaches_the_root_once_whatever_the_weight)
{
    static const size_t counts[] = {1, 2, 7, 1000, 65537};
    static const int weights[] = {0, 100, 125, 150, 300, 1000};
    for (int size = 2; size <= 5; size++) {
        for (int owners = 1; owners <= size; owners++) {
            for (size_t w = 0; w < sizeof(weights) / sizeof(weights[0]); w++) {
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                    check_split(size, owners, weights[w], 0, counts[c]);
                    check_split(size, owners, weights[w], size - 1, counts[c]);
                }
            }
        }
    }
}

Test(alg_cma, a_heavier_root_folds_more)
{
    /* Equal blocks without a weight; with 150, the root folds 3/5 of 2 owners' work. */
    check_split(2, 2, 0, 0, 100000);
    check_split(2, 2, 150, 0, 100000);
    check_split(3, 3, 200, 1, 100000);
}

/* Streaming stores (exec.c) send a large call's results past the cache: right for a
 * result nothing reads again, wrong for an allreduce owner's block, which every other
 * rank then reads from its OUT. The plan marks no result of such a schedule final;
 * a reduce's root, whose OUT nobody else reads, keeps its final folds. */
static size_t final_results(fold_coll_t coll, int rank, int size, int owners)
{
    fold_topo_t *t = one_node(size);
    fold_coll_args_t a = {.coll = coll, .rank = rank, .size = size, .root = 0, .count = 3000,
                          .seg_count = 300, .depth = 2, .commutative = 1, .topo = t,
                          .leaders = owners};
    fold_sched_t s;
    fold_wire_plan_t p;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_builder(&fold_alg_cma, coll)(&a, &s), FOLD_OK);
    cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
    cr_assert_eq(fold_wire_plan_build(&p, &s, NULL), FOLD_OK);
    size_t n = 0;
    for (size_t i = 0; i < s.nsteps; i++) {
        n += p.steps[i].final_out;
    }
    fold_wire_plan_free(&p);
    fold_sched_cleanup(&s);
    fold_topo_free(t);
    return n;
}

Test(alg_cma, results_other_ranks_read_are_not_streamed)
{
    for (int owners = 1; owners <= 3; owners++) {
        for (int rank = 0; rank < 3; rank++) {
            cr_expect_eq(final_results(FOLD_COLL_ALLREDUCE, rank, 3, owners), 0,
                         "allreduce, rank %d of 3, %d owners", rank, owners);
        }
        cr_expect_gt(final_results(FOLD_COLL_REDUCE, 0, 3, owners), 0,
                     "reduce, the root, %d owners", owners);
    }
}
