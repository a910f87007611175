/*
 * The one-node replay (model.c, node symmetry) against the replay of every rank: on
 * communicators of equal nodes, every algorithm, both collectives, several sizes,
 * leader counts and algorithms between the leaders give the same time, bit for bit,
 * whether the model replays node 0 alone (where the schedules treat every node
 * alike) or all of them (fold_model_full_replay). And the one-node replay is taken
 * where it should be: a ring and recursive doubling over nodes, dpml between
 * leaders by either, on any node count the symmetry holds for; never for a tree
 * whose root singles out node 0.
 */
#include <criterion/criterion.h>

#include "coll/model.h"
#include "node/topo.h"
#include "test_topo.h"
#include "test_reduced.h"

#include <fold/fold_status.h>
#include <stdlib.h>
#include <string.h>

static fold_model_query_t query_of(const fold_topo_t *t, const fold_alg_t *alg,
                                   fold_coll_t coll, size_t count, int leaders,
                                   const fold_alg_t *inter)
{
    const int aware = (alg->flags & FOLD_ALG_NODE_AWARE) != 0;
    return (fold_model_query_t){
        .alg   = alg,
        .esize = 4,
        .proto = {.coll = coll, .size = t->size, .root = 0, .count = count,
                  .seg_count = count > 4096 ? 4096 : count, .depth = 4, .commutative = 1,
                  .leaders = aware ? leaders : 0, .shm_count = aware ? (size_t)1 << 18 : 0,
                  .inter = aware ? inter : NULL},
    };
}

/* Both replays of q on t, which must agree; returns whether node 0 alone was. */
static int same_either_way(const fold_model_params_t *p, const fold_topo_t *t,
                           const fold_model_query_t *q)
{
    fold_model_result_t one, all;
    fold_model_full_replay = 0;
    int status = fold_model_predict(p, t, q, &one);
    fold_model_full_replay = 1;
    int full_status = fold_model_predict(p, t, q, &all);
    fold_model_full_replay = 0;
    cr_assert_eq(status, full_status, "%s %s of %zu on %dx%d", q->alg->name,
                 fold_coll_name(q->proto.coll), q->proto.count, t->nnodes, t->min_ppn);
    if (status != FOLD_OK) {
        return 0;
    }
    cr_assert_eq(all.one_node, 0);
    cr_expect(memcmp(&one.time_us, &all.time_us, sizeof(double)) == 0 &&
                  memcmp(&one.root_us, &all.root_us, sizeof(double)) == 0,
              "%s %s of %zu elements, leaders %d, between nodes %s on %dx%d: one node "
              "%.9g (root %.9g), every rank %.9g (root %.9g)",
              q->alg->name, fold_coll_name(q->proto.coll), q->proto.count, q->proto.leaders,
              q->proto.inter ? q->proto.inter->name : "-", t->nnodes, t->min_ppn,
              one.time_us, one.root_us, all.time_us, all.root_us);
    return one.one_node;
}

static const fold_alg_t *const inters[] = {&fold_alg_recursive_doubling, &fold_alg_ring,
                                           &fold_alg_binomial, &fold_alg_rabenseifner};

Test(model_symmetry, one_node_replays_every_rank_bit_for_bit, .timeout = 600)
{
    static const int shapes[][2] = {{2, 4}, {4, 4}, {8, 2}, {3, 4}, {5, 3}, {16, 2}, {4, 8}};
    static const size_t counts[] = {1, 7, 1000, 65539};
    const int nshapes = fold_test_reduced() ? 4 : (int)(sizeof(shapes) / sizeof(shapes[0]));
    fold_model_params_t p;
    fold_model_defaults(&p);
    int one_node = 0, cases = 0;
    for (int s = 0; s < nshapes; s++) {
        fold_topo_t *t = test_topo_blocks(shapes[s][0], shapes[s][1]);
        for (int a = 0; fold_alg_all[a] != NULL; a++) {
            const fold_alg_t *alg = fold_alg_all[a];
            const int aware = (alg->flags & FOLD_ALG_NODE_AWARE) != 0;
            if (alg == &fold_alg_shm_flat || (alg->flags & FOLD_ALG_SINGLE_COPY)) {
                continue;   /* one node only */
            }
            for (int c = FOLD_COLL_ALLREDUCE; c <= FOLD_COLL_REDUCE; c++) {
                if (fold_alg_builder(alg, (fold_coll_t)c) == NULL) {
                    continue;
                }
                for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
                    const int nl = aware ? 2 : 1, ni = aware ? 4 : 1;
                    for (int li = 0; li < nl; li++) {
                        for (int i = 0; i < ni; i++) {
                            int leaders = li == 0 ? 1 : shapes[s][1];
                            if (aware && fold_alg_builder(inters[i], (fold_coll_t)c) == NULL) {
                                continue;
                            }
                            fold_model_query_t q = query_of(t, alg, (fold_coll_t)c, counts[k],
                                                            leaders, inters[i]);
                            one_node += same_either_way(&p, t, &q);
                            cases++;
                        }
                    }
                }
            }
        }
        fold_topo_free(t);
    }
    cr_log_info("%d of %d questions replayed on one node", one_node, cases);
    cr_expect_gt(one_node, cases / 10);
}

/* Whether a question of `count` elements on nnodes nodes of 4 ranks takes the
 * one-node replay (2 leaders; segments of up to 4096 elements). */
static int on_one_node(const fold_alg_t *alg, fold_coll_t coll, const fold_alg_t *inter,
                       int nnodes, size_t count)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    fold_topo_t *t = test_topo_blocks(nnodes, 4);
    fold_model_query_t q = query_of(t, alg, coll, count, 2, inter);
    int one = same_either_way(&p, t, &q);
    fold_topo_free(t);
    return one;
}

Test(model_symmetry, taken_where_every_node_plays_the_same_part)
{
    const fold_coll_t ar = FOLD_COLL_ALLREDUCE, r = FOLD_COLL_REDUCE;
    cr_expect(on_one_node(&fold_alg_ring, ar, NULL, 8, 1 << 16));
    cr_expect(on_one_node(&fold_alg_ring, ar, NULL, 6, 2400));
    cr_expect(on_one_node(&fold_alg_recursive_doubling, ar, NULL, 8, 1 << 16));
    cr_expect(on_one_node(&fold_alg_dpml, ar, &fold_alg_recursive_doubling, 8, 1 << 16));
    cr_expect(on_one_node(&fold_alg_dpml_pipelined, ar, &fold_alg_ring, 5, 4000));
    /* The root's node is not like the others. */
    cr_expect(!on_one_node(&fold_alg_binomial, r, NULL, 8, 1 << 16));
    cr_expect(!on_one_node(&fold_alg_dpml, r, &fold_alg_binomial, 8, 1 << 16));
    /* Recursive doubling over 6 nodes folds two of them in first; a ring's chunks
     * of 65536 elements over 24 ranks differ in size by one. */
    cr_expect(!on_one_node(&fold_alg_recursive_doubling, ar, NULL, 6, 2400));
    cr_expect(!on_one_node(&fold_alg_ring, ar, NULL, 6, 1 << 16));
    /* Rabenseifner's dependencies follow which half each rank keeps: the ranks'
     * schedules differ in more than their peers, so they are replayed whole. */
    cr_expect(!on_one_node(&fold_alg_rabenseifner, ar, NULL, 8, 1 << 16));
}
