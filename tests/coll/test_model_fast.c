/*
 * The cost model's fast paths against their references, bit for bit:
 *   - a replay with a cutoff (fold_model_predict_within, with and without a working
 *     memory reused between replays) gives fold_model_predict's time whenever that
 *     is below the cutoff, and never stops unless the time reaches it;
 *   - a prediction, which finalizes each shape of schedule once, gives the replay of
 *     schedules finalized one by one (fold_model_replay);
 *   - selection (memo, candidates cut at the best so far, shared working memory)
 *     makes the decisions and predictions of selection without them
 *     (fold_select_reference: every candidate replayed to the end);
 *   - the greedy plan kept whole gives each rank's own simulation.
 * Shapes are small, so the references stay cheap.
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "coll/model.h"
#include "coll/tree_math.h"
#include "node/topo.h"
#include "test_reduced.h"

#include <fold/fold_status.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static fold_topo_t *topo_of(const int *per_node, int nnodes, int *size)
{
    int key[64], n = 0;
    for (int i = 0; i < nnodes; i++) {
        for (int k = 0; k < per_node[i]; k++) {
            key[n++] = i;
        }
    }
    int pkg[64] = {0};
    fold_topo_t *t = NULL;
    cr_assert_eq(fold_topo_build(n, key, pkg, &t), FOLD_OK);
    *size = n;
    return t;
}

static fold_model_query_t query(const fold_topo_t *topo, const fold_alg_t *alg,
                                fold_coll_t coll, size_t count, int leaders)
{
    int aware = (alg->flags & FOLD_ALG_NODE_AWARE) != 0;
    size_t seg = 4096, floor = (count + 1023) / 1024;
    fold_model_query_t q = {
        .alg   = alg,
        .esize = 4,
        .proto = {.coll = coll, .size = topo->size, .root = 0, .count = count,
                  .seg_count = seg > floor ? seg : floor, .depth = 4, .commutative = 1,
                  .leaders = aware ? leaders : 0, .shm_count = aware ? (size_t)1 << 18 : 0,
                  .inter = !aware || topo->nnodes == 1 ? NULL
                           : coll == FOLD_COLL_REDUCE ? &fold_alg_binomial
                                                      : &fold_alg_recursive_doubling},
    };
    return q;
}

/* A copy of s's operands (reduce rows, waits over ranges), for a copy of s that
 * frees its own. */
static fold_ref_t *dup_ops(const fold_sched_t *s)
{
    fold_ref_t *ops = malloc((s->nops ? s->nops : 1) * sizeof(*ops));
    cr_assert_not_null(ops);
    if (s->nops > 0) {
        memcpy(ops, s->ops, s->nops * sizeof(*ops));
    }
    return ops;
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Uneven nodes too: the shape dedup must not merge ranks that differ. */
static const int shapes[][4] = {{4, 4, 0, 0}, {3, 2, 1, 0}, {8, 0, 0, 0}, {1, 1, 1, 1},
                                {2, 2, 2, 2}};
static const int shape_nodes[] = {2, 3, 1, 4, 4};
#define NSHAPES (sizeof(shape_nodes) / sizeof(shape_nodes[0]))

/* A question of every algorithm and collective on every shape, at each of these
 * counts (2 leaders where a node has them), handed to fn with its shape's index. */
typedef void (*question_fn)(const fold_topo_t *topo, const fold_model_query_t *q,
                            size_t shape, void *arg);

static void each_question(question_fn fn, void *arg)
{
    static const size_t counts[] = {1, 300, 20000, 300000};
    for (size_t si = 0; si < NSHAPES; si++) {
        int size;
        fold_topo_t *topo = topo_of(shapes[si], shape_nodes[si], &size);
        for (int a = 0; fold_alg_all[a] != NULL; a++) {
            for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
                if (fold_alg_builder(fold_alg_all[a], (fold_coll_t)coll) == NULL) {
                    continue;
                }
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    fold_model_query_t q = query(topo, fold_alg_all[a], (fold_coll_t)coll,
                                                 counts[ci], topo->min_ppn >= 2 ? 2 : 1);
                    fn(topo, &q, si, arg);
                }
            }
        }
        fold_topo_free(topo);
    }
}

typedef struct cutoff_count {
    fold_model_params_t p;
    fold_model_space_t *space;
    int                 checked, cut;
} cutoff_count_t;

static void cutoff_agrees(const fold_topo_t *topo, const fold_model_query_t *q, size_t si,
                          void *arg)
{
    cutoff_count_t *c = arg;
    const char *alg = q->alg->name, *coll = fold_coll_name(q->proto.coll);
    fold_model_result_t full, r;
    if (fold_model_predict(&c->p, topo, q, &full) != FOLD_OK) {
        return;   /* an algorithm not for this shape (cma on several nodes) */
    }
    double cutoffs[] = {INFINITY, full.time_us * 2, nextafter(full.time_us, INFINITY),
                        full.time_us, full.time_us * 0.7, full.time_us * 0.2, 0};
    for (size_t k = 0; k < sizeof(cutoffs) / sizeof(cutoffs[0]); k++) {
        for (int with_space = 0; with_space < 2; with_space++) {
            cr_assert_eq(fold_model_predict_within(&c->p, topo, q, cutoffs[k],
                                                   with_space ? c->space : NULL, &r),
                         FOLD_OK);
            if (full.time_us < cutoffs[k]) {
                cr_expect(!r.cut && same_bits(r.time_us, full.time_us) &&
                              same_bits(r.root_us, full.root_us),
                          "%s %s on %zu, count %zu, cutoff %.17g: %.17g, full %.17g", alg,
                          coll, si, q->proto.count, cutoffs[k], r.time_us, full.time_us);
            } else if (r.cut) {
                cr_expect(r.time_us >= cutoffs[k] && r.time_us <= full.time_us,
                          "%s: stopped at %.17g, cutoff %.17g, full %.17g", alg, r.time_us,
                          cutoffs[k], full.time_us);
                c->cut++;
            } else {
                cr_expect(same_bits(r.time_us, full.time_us));
            }
            c->checked++;
        }
    }
}

Test(model_fast, cutoff_replays_agree_with_full_replays)
{
    cutoff_count_t c = {.space = fold_model_space_new()};
    fold_model_defaults(&c.p);
    cr_assert_not_null(c.space);
    each_question(cutoff_agrees, &c);
    fold_model_space_free(c.space);
    cr_expect_gt(c.cut, 0);
    cr_log_info("%d replays, %d of them cut", c.checked, c.cut);
}

typedef struct mapped_count {
    fold_model_params_t p, mapped;
    int                 alike, priced;
} mapped_count_t;

static void mapped_agrees(const fold_topo_t *topo, const fold_model_query_t *q, size_t si,
                          void *arg)
{
    mapped_count_t *c = arg;
    fold_model_result_t plain, in_fold;
    if (fold_model_predict(&c->p, topo, q, &plain) != FOLD_OK) {
        return;
    }
    cr_assert_eq(fold_model_predict(&c->mapped, topo, q, &in_fold), FOLD_OK);
    cr_expect_eq(plain.kernel_free, in_fold.kernel_free);
    if (plain.kernel_free) {
        cr_expect(same_bits(plain.time_us, in_fold.time_us) &&
                      same_bits(plain.root_us, in_fold.root_us),
                  "%s %s on shape %zu, count %zu: %.17g, mapped %.17g", q->alg->name,
                  fold_coll_name(q->proto.coll), si, q->proto.count, plain.time_us,
                  in_fold.time_us);
        c->alike++;
    } else {
        c->priced += !same_bits(plain.time_us, in_fold.time_us);
    }
}

/* A replay with no step the kernel's or a mapping's copies price (kernel_free) takes
 * the same time under fold_model_mapped's parameters, so selection asks it once for
 * buffers in fold memory and out of it; one with such steps is told apart. */
Test(model_fast, kernel_free_replays_cost_the_same_mapped)
{
    mapped_count_t c = {0};
    fold_model_defaults(&c.p);
    fold_model_mapped(&c.p, &c.mapped);
    each_question(mapped_agrees, &c);
    cr_expect_gt(c.alike, 0);
    cr_expect_gt(c.priced, 0);   /* single copy and messages within a node do differ */
}

Test(model_fast, shared_finalisation_agrees_with_one_by_one)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    static const fold_alg_t *const algs[] = {&fold_alg_dpml, &fold_alg_dpml_pipelined,
                                             &fold_alg_recursive_doubling, &fold_alg_ring,
                                             &fold_alg_binomial, &fold_alg_rabenseifner};
    for (size_t si = 0; si < NSHAPES; si++) {
        int size;
        fold_topo_t *topo = topo_of(shapes[si], shape_nodes[si], &size);
        for (size_t a = 0; a < sizeof(algs) / sizeof(algs[0]); a++) {
            fold_coll_t coll = fold_alg_builder(algs[a], FOLD_COLL_ALLREDUCE) != NULL
                                   ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
            fold_model_query_t q = query(topo, algs[a], coll, 5000, 2);
            fold_model_result_t pred, replay;
            cr_assert_eq(fold_model_predict(&p, topo, &q, &pred), FOLD_OK);
            fold_sched_t *s = calloc((size_t)size, sizeof(*s));
            fold_sched_t **ptr = calloc((size_t)size, sizeof(*ptr));
            cr_assert(s != NULL && ptr != NULL);
            for (int r = 0; r < size; r++) {
                fold_coll_args_t args = q.proto;
                args.rank = r;
                args.topo = (algs[a]->flags & FOLD_ALG_NODE_AWARE) ? topo : NULL;
                fold_sched_init(&s[r], &args);
                cr_assert_eq(fold_alg_builder(algs[a], coll)(&args, &s[r]), FOLD_OK);
                cr_assert_eq(fold_sched_finalize(&s[r]), FOLD_OK);
                ptr[r] = &s[r];
            }
            cr_assert_eq(fold_model_replay(&p, topo, ptr, 4, &replay), FOLD_OK);
            cr_expect(same_bits(pred.time_us, replay.time_us) &&
                          same_bits(pred.root_us, replay.root_us),
                      "%s on shape %zu: predicted %.17g, replayed %.17g", algs[a]->name, si,
                      pred.time_us, replay.time_us);
            for (int r = 0; r < size; r++) {
                fold_sched_cleanup(&s[r]);
            }
            free(s);
            free(ptr);
        }
        fold_topo_free(topo);
    }
}

/* A finalized schedule's dependencies copied to a schedule of its shape are the ones
 * its own finalisation derives. */
Test(model_fast, finalize_like_derives_the_same_dependencies)
{
    int size;
    fold_topo_t *topo = topo_of(shapes[0], shape_nodes[0], &size);
    fold_model_query_t q = query(topo, &fold_alg_dpml, FOLD_COLL_ALLREDUCE, 7000, 2);
    fold_sched_t s[8], like;
    int pairs = 0;
    for (int r = 0; r < size; r++) {
        fold_coll_args_t args = q.proto;
        args.rank = r;
        args.topo = topo;
        fold_sched_init(&s[r], &args);
        cr_assert_eq(fold_alg_builder(&fold_alg_dpml, FOLD_COLL_ALLREDUCE)(&args, &s[r]), FOLD_OK);
    }
    for (int a = 0; a < size; a++) {
        for (int b = 0; b < size; b++) {
            if (a == b || !fold_sched_same_shape(&s[a], &s[b])) {
                continue;
            }
            cr_expect_eq(fold_sched_shape_hash(&s[a]), fold_sched_shape_hash(&s[b]));
            fold_coll_args_t args = q.proto;
            args.rank = b;
            args.topo = topo;
            fold_sched_init(&like, &args);
            cr_assert_eq(fold_alg_builder(&fold_alg_dpml, FOLD_COLL_ALLREDUCE)(&args, &like), FOLD_OK);
            fold_sched_t own = like;   /* the same built steps, finalized on their own */
            own.steps = malloc(like.nsteps * sizeof(*own.steps));
            cr_assert_not_null(own.steps);
            memcpy(own.steps, like.steps, like.nsteps * sizeof(*own.steps));
            own.cap = like.nsteps;
            own.ops = dup_ops(&like);
            cr_assert_eq(fold_sched_finalize(&own), FOLD_OK);
            fold_sched_t ref = s[a];
            ref.steps = malloc(s[a].nsteps * sizeof(*ref.steps));
            cr_assert_not_null(ref.steps);
            memcpy(ref.steps, s[a].steps, s[a].nsteps * sizeof(*ref.steps));
            ref.succ = NULL;
            ref.succ_cap = 0;
            ref.ops = dup_ops(&s[a]);
            cr_assert_eq(fold_sched_finalize(&ref), FOLD_OK);
            cr_assert_eq(fold_sched_finalize_like(&like, &ref), FOLD_OK);
            cr_assert_eq(like.nsucc, own.nsucc);
            for (size_t i = 0; i < like.nsteps; i++) {
                cr_expect_eq(like.steps[i].npred, own.steps[i].npred);
                cr_expect_eq(like.steps[i].nsucc, own.steps[i].nsucc);
                cr_expect_eq(like.steps[i].succ_off, own.steps[i].succ_off);
                cr_expect_eq(like.steps[i].seq, own.steps[i].seq);
            }
            cr_expect_eq(memcmp(like.succ, own.succ, like.nsucc * sizeof(*like.succ)), 0);
            fold_sched_cleanup(&like);
            fold_sched_cleanup(&own);
            fold_sched_cleanup(&ref);
            pairs++;
        }
    }
    cr_expect_gt(pairs, 0, "some ranks of two nodes share a shape");
    for (int r = 0; r < size; r++) {
        fold_sched_cleanup(&s[r]);
    }
    fold_topo_free(topo);
}

/* ---- selection ---------------------------------------------------------------- */

typedef struct decision {
    fold_choice_t choice;
    double        us, flat_us, alg_us[FOLD_RULE_MAX_ALGS];
} decision_t;

#define SIZES 9

static void decide_all(const int *node_of, int size, int reference, decision_t *out)
{
    fold_context_t *ctx;
    cr_assert_eq(fold_context_create_virtual(size, node_of, &ctx), FOLD_OK);
    fold_comm_t *w = ctx->world;
    cr_assert_eq(fold_select_topos(w), FOLD_OK);
    fold_select_reference = reference;
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        for (int i = 0; i < SIZES; i++) {
            size_t bytes = (size_t)4 << (3 * i);   /* 4 B .. 64 MiB */
            decision_t *d = &out[coll * SIZES + i];
            memset(d, 0, sizeof(*d));
            cr_assert_eq(fold_select(w, (fold_coll_t)coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM,
                                     &d->choice), FOLD_OK);
            const fold_select_entry_t *e = &w->select.entry[coll][fold_select_class(bytes)];
            d->us      = e->valid ? e->us : -1;
            d->flat_us = fold_select_flat_us(w, (fold_coll_t)coll, bytes);
            for (int a = 0; e->valid && a < e->nalgs; a++) {
                fold_choice_t c;
                d->alg_us[a] = fold_select_evaluate(w, (fold_coll_t)coll, e->algs[a], bytes, &c);
            }
        }
    }
    fold_select_reference = 0;
    fold_context_free_virtual(ctx);
}

Test(model_fast, selection_agrees_with_the_reference)
{
    static const int per_node[][4] = {{4, 4, 0, 0}, {3, 3, 3, 0}, {6, 0, 0, 0},
                                      {1, 1, 1, 1}, {3, 2, 0, 0}};
    static const int nodes[] = {2, 3, 1, 4, 2};
    /* FOLD_TEST_REDUCED: the uneven shape of nodes of two sizes (3 + 2) */
    for (size_t si = fold_test_reduced() ? 4 : 0; si < sizeof(nodes) / sizeof(nodes[0]);
         si++) {
        int node_of[64], size = 0;
        for (int n = 0; n < nodes[si]; n++) {
            for (int k = 0; k < per_node[si][n]; k++) {
                node_of[size++] = n;
            }
        }
        decision_t fast[2 * SIZES], ref[2 * SIZES];
        decide_all(node_of, size, 0, fast);
        decide_all(node_of, size, 1, ref);
        for (int i = 0; i < 2 * SIZES; i++) {
            const decision_t *f = &fast[i], *r = &ref[i];
            cr_expect(f->choice.alg == r->choice.alg && f->choice.leaders == r->choice.leaders &&
                          f->choice.inter == r->choice.inter &&
                          f->choice.root_weight == r->choice.root_weight,
                      "shape %zu, case %d: %s/%d against %s/%d", si, i, f->choice.alg->name,
                      f->choice.leaders, r->choice.alg->name, r->choice.leaders);
            cr_expect(same_bits(f->us, r->us), "shape %zu, case %d: %.17g against %.17g", si, i,
                      f->us, r->us);
            cr_expect(same_bits(f->flat_us, r->flat_us), "shape %zu, case %d: flat %.17g "
                      "against %.17g", si, i, f->flat_us, r->flat_us);
            for (int a = 0; a < FOLD_RULE_MAX_ALGS; a++) {
                cr_expect(same_bits(f->alg_us[a], r->alg_us[a]), "shape %zu, case %d, "
                          "candidate %d: %.17g against %.17g", si, i, a, f->alg_us[a],
                          r->alg_us[a]);
            }
        }
    }
}

/* ---- the greedy plan ---------------------------------------------------------- */

Test(model_fast, greedy_plan_kept_whole_agrees_with_each_ranks_own)
{
    static const int sizes[] = {2, 3, 5, 8, 13, 33};
    static const size_t segs[] = {1, 2, 7, 40};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        int size = sizes[si];
        for (size_t gi = 0; gi < sizeof(segs) / sizeof(segs[0]); gi++) {
            for (int root = 0; root < size; root += size > 3 ? size / 3 : 1) {
                for (int rank = 0; rank < size; rank++) {
                    fold_greedy_xfer_t *a = NULL, *b = NULL;
                    size_t na = 0, nb = 0, sa = 0, sb = 0;
                    cr_assert_eq(fold_greedy_plan(rank, size, root, segs[gi], &a, &na, &sa),
                                 FOLD_OK);
                    cr_assert_eq(fold_greedy_plan_alone(rank, size, root, segs[gi], &b, &nb,
                                                        &sb), FOLD_OK);
                    cr_expect_eq(na, nb);
                    cr_expect_eq(sa, sb);
                    cr_expect((a == NULL) == (b == NULL));
                    for (size_t i = 0; i < na && i < nb; i++) {
                        cr_expect(a[i].seg == b[i].seg && a[i].step == b[i].step &&
                                      a[i].peer == b[i].peer && a[i].send == b[i].send,
                                  "%d ranks, root %d, rank %d, %zu segments: transfer %zu",
                                  size, root, rank, segs[gi], i);
                    }
                    free(a);
                    free(b);
                }
            }
        }
    }
}
