/*
 * The single-copy algorithm's split of the message among its owners, checked on
 * the schedules themselves: over every rank's schedule, each element of the
 * result is folded exactly once and lands exactly once in the OUT of the root
 * (its own folds into OUT, the other owners' writes into it) or of every rank of
 * an allreduce, for any number of owners and any weight of the root's block, with the
 * chunks forward or backward (every other call, coll/exec.c). Running the schedules is
 * the loopback and mp_coll matrices' job; this covers the weights the model may pick.
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

/* Adds 1 to times[i] for each element a peer write of this step puts into dest's OUT. */
static void count_writes(const fold_step_t *st, int dest, size_t *times)
{
    for (size_t i = 0; st->kind == FOLD_STEP_PEER_WRITE && st->peer == dest && i < st->count;
         i++) {
        times[st->dst.off + i]++;
    }
}

/* Over every rank's schedule, each element lands once in the OUT of every rank
 * that has one (the root of a reduce, every rank of an allreduce), and the owners
 * fold their shares. */
static void check_split_dir(fold_coll_t coll, int size, int owners, int weight, int root,
                            size_t n, int backward)
{
    fold_topo_t *t = one_node(size);
    size_t *times = calloc((size_t)size * n, sizeof(*times));
    size_t owned[16] = {0};
    for (int rank = 0; rank < size; rank++) {
        fold_coll_args_t a = {.coll = coll, .rank = rank, .size = size,
                              .root = root, .count = n, .seg_count = 300, .depth = 2,
                              .commutative = 1, .topo = t, .leaders = owners,
                              .root_weight = weight, .backward = backward};
        fold_sched_t s;
        fold_sched_init(&s, &a);
        cr_assert_eq(fold_alg_builder(&fold_alg_cma, coll)(&a, &s), FOLD_OK);
        /* The elements this rank folds into its own OUT (a sum kept there takes
         * several reductions per element: the element lands once). */
        unsigned char *folded = calloc(n, 1);
        for (size_t g = 0; g < s.nsteps; g++) {
            const fold_step_t *st = &s.steps[g];
            for (int dest = 0; dest < size; dest++) {
                count_writes(st, dest, times + (size_t)dest * n);
            }
            if (st->kind == FOLD_STEP_PEER_WRITE && coll == FOLD_COLL_REDUCE) {
                owned[rank] += st->count;   /* a block folded, written to the root */
            }
            for (size_t i = 0; st->kind == FOLD_STEP_REDUCE && st->dst.buf == FOLD_BUF_OUT &&
                               i < st->count; i++) {
                folded[st->dst.off + i] = 1;
            }
        }
        for (size_t i = 0; i < n; i++) {
            times[(size_t)rank * n + i] += folded[i];
            owned[rank] += folded[i];
        }
        free(folded);
        fold_sched_cleanup(&s);
    }
    for (int dest = 0; dest < size; dest++) {
        int has_out = coll == FOLD_COLL_ALLREDUCE || dest == root;
        for (size_t i = 0; i < n; i++) {
            size_t got = times[(size_t)dest * n + i];
            cr_assert_eq(got, (size_t)has_out, "%s p=%d owners=%d weight=%d root=%d n=%zu "
                         "backward=%d: element %zu reaches rank %d's OUT %zu times",
                         coll == FOLD_COLL_REDUCE ? "reduce" : "allreduce", size, owners,
                         weight, root, n, backward, i, dest, got);
        }
    }
    /* The root's share follows its weight: w / (w + owners - 1) of the message. */
    if (coll == FOLD_COLL_REDUCE && owners > 1 && weight > 0 && n >= 1000) {
        double w = weight / 100.0, want = (double)n * w / (w + owners - 1);
        cr_expect_leq(abs((int)owned[root] - (int)want), 1, "p=%d owners=%d weight=%d: root "
                      "folds %zu of %zu, expected %.0f", size, owners, weight, owned[root], n,
                      want);
    }
    free(times);
    fold_topo_free(t);
}

static void check_split_of(fold_coll_t coll, int size, int owners, int weight, int root,
                           size_t n)
{
    check_split_dir(coll, size, owners, weight, root, n, 0);
    check_split_dir(coll, size, owners, weight, root, n, 1);
}

static void check_split(int size, int owners, int weight, int root, size_t n)
{
    check_split_of(FOLD_COLL_REDUCE, size, owners, weight, root, n);
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

/* An allreduce's owners write each folded chunk into every other rank's OUT. */
Test(alg_cma, every_element_reaches_every_rank_once)
{
    static const size_t counts[] = {1, 2, 7, 1000, 65537};
    for (int size = 2; size <= 5; size++) {
        for (int owners = 1; owners <= size; owners++) {
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                check_split_of(FOLD_COLL_ALLREDUCE, size, owners, 0, 0, counts[c]);
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

/* The offsets of the peer reads in rank `rank`'s schedule, in the order built (the
 * serial schedule's order of running). */
static size_t read_offsets(fold_coll_t coll, int rank, int size, int backward, size_t *offs,
                           size_t cap)
{
    fold_topo_t *t = one_node(size);
    fold_coll_args_t a = {.coll = coll, .rank = rank, .size = size, .root = 0, .count = 3000,
                          .seg_count = 300, .depth = 2, .commutative = 1, .topo = t,
                          .leaders = size, .backward = backward};
    fold_sched_t s;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_builder(&fold_alg_cma, coll)(&a, &s), FOLD_OK);
    size_t n = 0;
    for (size_t i = 0; i < s.nsteps; i++) {
        if (s.steps[i].kind == FOLD_STEP_PEER_READ) {
            cr_assert_lt(n, cap);
            offs[n++] = s.steps[i].src.off;
        }
    }
    fold_sched_cleanup(&s);
    fold_topo_free(t);
    return n;
}

/* Backward, an owner reads its block's chunks last first: the same reads as forward,
 * in the opposite order of chunks (each chunk's reads, one per peer, stay together). */
Test(alg_cma, a_backward_call_reads_its_chunks_last_first)
{
    for (int size = 2; size <= 3; size++) {
        for (int rank = 0; rank < size; rank++) {
            for (int c = 0; c < 2; c++) {
                fold_coll_t coll = c ? FOLD_COLL_REDUCE : FOLD_COLL_ALLREDUCE;
                size_t fwd[64], bwd[64];
                size_t n = read_offsets(coll, rank, size, 0, fwd, 64);
                cr_assert_eq(read_offsets(coll, rank, size, 1, bwd, 64), n);
                const size_t per_chunk = (size_t)size - 1, chunks = n / per_chunk;
                cr_assert_gt(chunks, 1, "p=%d rank %d: several chunks", size, rank);
                for (size_t k = 0; k < chunks; k++) {
                    for (size_t r = 0; r < per_chunk; r++) {
                        cr_expect_eq(bwd[k * per_chunk + r],
                                     fwd[(chunks - 1 - k) * per_chunk + r],
                                     "p=%d rank %d %s: read %zu of chunk %zu", size, rank,
                                     c ? "reduce" : "allreduce", r, k);
                    }
                    if (k > 0) {
                        cr_expect_lt(bwd[k * per_chunk], bwd[(k - 1) * per_chunk]);
                    }
                }
            }
        }
    }
}

/* Streaming stores (exec.c) send a large call's results past the cache: right for a
 * result nothing reads again, wrong for an allreduce owner's block, which it then
 * writes into every other rank's OUT, and for a sum kept in OUT (out of place, the
 * first row is read straight into OUT: its lines are in the cache, dirty). The plan
 * marks none of those folds final; in place a reduce's root sums in TMP, and its
 * final folds into OUT, which nothing reads again, stream. */
static size_t final_results(fold_coll_t coll, int rank, int size, int owners, int inplace)
{
    fold_topo_t *t = one_node(size);
    fold_coll_args_t a = {.coll = coll, .rank = rank, .size = size, .root = 0, .count = 3000,
                          .seg_count = 300, .depth = 2, .commutative = 1, .topo = t,
                          .leaders = owners, .inplace = inplace};
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

Test(alg_cma, results_written_to_other_ranks_are_not_streamed)
{
    for (int owners = 1; owners <= 3; owners++) {
        for (int rank = 0; rank < 3; rank++) {
            for (int inplace = 0; inplace <= 1; inplace++) {
                cr_expect_eq(final_results(FOLD_COLL_ALLREDUCE, rank, 3, owners, inplace), 0,
                             "allreduce, rank %d of 3, %d owners, in place %d", rank, owners,
                             inplace);
            }
        }
        cr_expect_eq(final_results(FOLD_COLL_REDUCE, 0, 3, owners, 0), 0,
                     "reduce, the root, %d owners: a sum kept in OUT", owners);
        cr_expect_gt(final_results(FOLD_COLL_REDUCE, 0, 3, owners, 1), 0,
                     "reduce in place, the root, %d owners", owners);
    }
}
