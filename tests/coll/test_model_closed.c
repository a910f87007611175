/*
 * The cost model's closed forms (model_closed.c) against its replay, on shapes both
 * can run: every algorithm with a form, both collectives, sizes from latency- to
 * bandwidth-bound, dpml with each leader count and algorithm between the leaders.
 * With the generic parameters pinned, a form must land within CLOSE of the replay,
 * since selection takes the form above the replay's reach and a choice must not
 * turn on which of the two priced it. Far beyond the replay's reach a form stays
 * finite and its cost bounded.
 */
#include <criterion/criterion.h>

#include "coll/model.h"
#include "coll/model_closed.h"
#include "node/topo.h"
#include "test_reduced.h"
#include "test_topo.h"

#include <fold/fold_status.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* How far a form may stray from the replay, a factor either way: at worst, and in
 * the median of an algorithm's questions. */
#define WORST  2.2
#define MEDIAN 1.15

/* How the ranks lie on the nodes. */
enum { BLOCKS, ROUND_ROBIN, RAGGED, PLACEMENTS };
static const char *const placement_name[] = {"blocks", "round robin", "ragged"};

/* nnodes nodes of ppn ranks: in blocks, dealt round robin, or in blocks with every other
 * node holding half as many. */
static fold_topo_t *placed_topo(int nnodes, int ppn, int placement)
{
    int size = 0, *key = malloc((size_t)nnodes * (size_t)ppn * sizeof(int));
    cr_assert(key != NULL);
    for (int n = 0; n < nnodes; n++) {
        int here = placement == RAGGED && n % 2 == 1 && ppn > 1 ? ppn / 2 : ppn;
        for (int l = 0; l < here; l++, size++) {
            key[size] = placement == ROUND_ROBIN ? size % nnodes : n;
        }
    }
    fold_topo_t *t = test_topo_keys(size, key);
    free(key);
    return t;
}

static fold_model_query_t query_of(const fold_topo_t *t, const fold_alg_t *alg,
                                   fold_coll_t coll, size_t bytes, size_t seg_bytes,
                                   int leaders, const fold_alg_t *inter)
{
    const int aware = (alg->flags & FOLD_ALG_NODE_AWARE) != 0;
    size_t count = bytes / 4, seg = seg_bytes / 4;
    size_t floor = (count + 1023) / 1024;   /* select.c: at most 1024 segments */
    seg = seg > floor ? seg : floor;
    return (fold_model_query_t){
        .alg   = alg,
        .esize = 4,
        .proto = {.coll = coll, .size = t->size, .root = 0, .count = count,
                  .seg_count = seg < count ? seg : count, .depth = 4, .commutative = 1,
                  .leaders = aware ? leaders : 0, .shm_count = aware ? (size_t)8 << 18 : 0,
                  .inter = aware ? inter : NULL},
    };
}

#define MAX_QUESTIONS 1024

typedef struct tally {
    int    n;
    double ratio[MAX_QUESTIONS];   /* closed / replay */
    double worst;                  /* the largest factor either way */
    char   what[160];
} tally_t;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void expect_close(tally_t *tl)
{
    cr_assert(tl->n > 0);
    qsort(tl->ratio, (size_t)tl->n, sizeof(double), by_value);
    double median = tl->ratio[tl->n / 2];
    if (getenv("CLOSED_SUMMARY") != NULL) {
        printf("%d questions: median %.2f, worst %.2fx: %s\n", tl->n, median, tl->worst, tl->what);
    }
    cr_expect(tl->worst <= WORST, "%d questions, worst %.2fx: %s", tl->n, tl->worst, tl->what);
    cr_expect(median <= MEDIAN && median >= 1 / MEDIAN, "%d questions, median %.2f", tl->n,
              median);
}

static void compare(const fold_model_params_t *p, const fold_topo_t *t,
                    const fold_model_query_t *q, tally_t *tl)
{
    fold_model_result_t closed, replay;
    cr_assert(fold_model_closed_covers(t, q), "%s", q->alg->name);
    int status = fold_model_closed(p, t, q, &closed);
    if (status == FOLD_ERR_INVALID_ARG) {
        return;   /* dpml's rows do not fit the segment: neither runs it */
    }
    cr_assert_eq(status, FOLD_OK);
    cr_assert_eq(fold_model_predict(p, t, q, &replay), FOLD_OK);
    double f = closed.time_us / replay.time_us;
    double off = f > 1 ? f : 1 / f;
    cr_assert(isfinite(closed.time_us) && closed.time_us > 0);
    if (getenv("CLOSED_VERBOSE") != NULL) {
        printf("%-15s %-9s %-18s L%-2d %3dx%-3d %9zu B: closed %10.2f replay %10.2f  %.2f\n",
               q->alg->name, fold_coll_name(q->proto.coll),
               q->proto.inter ? q->proto.inter->name : "-", q->proto.leaders, t->nnodes,
               t->min_ppn, q->proto.count * 4, closed.time_us, replay.time_us, f);
    }
    cr_assert(tl->n < MAX_QUESTIONS);
    tl->ratio[tl->n++] = f;
    if (off > tl->worst) {
        tl->worst = off;
        snprintf(tl->what, sizeof(tl->what), "%s %s between %s, %d leaders, %dx%d, %zu B: "
                 "closed %.2f us, replay %.2f us", q->alg->name, fold_coll_name(q->proto.coll),
                 q->proto.inter ? q->proto.inter->name : "-", q->proto.leaders, t->nnodes,
                 t->min_ppn, q->proto.count * 4, closed.time_us, replay.time_us);
    }
}

static const int shapes[][2] = {{4, 16}, {8, 8}, {16, 4}, {32, 2}, {64, 1}, {2, 32}};

/* Under the sanitizers (fold_test_reduced) every other shape of a list: the forms'
 * agreement is the release stage's to check, their memory use shows on any shape. */
static int shape_kept(size_t s)
{
    return !fold_test_reduced() || s % 2 == 0;
}

static const size_t sizes[] = {64, 4096, 65536, 1 << 20, 8 << 20};

static void flat_case_within(fold_coll_t coll, const fold_alg_t *alg, int max_ppn)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    static tally_t tl;
    tl = (tally_t){0};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        if (shapes[s][1] > max_ppn || !shape_kept(s)) {
            continue;
        }
        fold_topo_t *t = test_topo_blocks(shapes[s][0], shapes[s][1]);
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            fold_model_query_t q = query_of(t, alg, coll, sizes[z], 128 * 1024, 0, NULL);
            compare(&p, t, &q, &tl);
        }
        fold_topo_free(t);
    }
    expect_close(&tl);
}

static void flat_case(fold_coll_t coll, const fold_alg_t *alg)
{
    flat_case_within(coll, alg, 64);
}

Test(model_closed, recursive_doubling)
{
    flat_case(FOLD_COLL_ALLREDUCE, &fold_alg_recursive_doubling);
}

/* With 8 ranks a node and more, the replay's Rabenseifner allgather stalls: all its
 * receives are posted at once, each transfer claims its receiver's core from when
 * its channels free up, and the replay fills no gap behind such a claim (model.c,
 * sim_xfer), up to 3.7x the form's CPU and wire bounds at 2x32. */
Test(model_closed, rabenseifner_allreduce)
{
    flat_case_within(FOLD_COLL_ALLREDUCE, &fold_alg_rabenseifner, 4);
}
Test(model_closed, ring_allreduce) { flat_case(FOLD_COLL_ALLREDUCE, &fold_alg_ring); }
Test(model_closed, binomial) { flat_case(FOLD_COLL_REDUCE, &fold_alg_binomial); }
Test(model_closed, rabenseifner_reduce) { flat_case(FOLD_COLL_REDUCE, &fold_alg_rabenseifner); }
Test(model_closed, ring_reduce) { flat_case(FOLD_COLL_REDUCE, &fold_alg_ring); }
Test(model_closed, bintree) { flat_case(FOLD_COLL_REDUCE, &fold_alg_bintree); }
Test(model_closed, chain) { flat_case(FOLD_COLL_REDUCE, &fold_alg_chain); }
Test(model_closed, greedy) { flat_case(FOLD_COLL_REDUCE, &fold_alg_greedy); }

static void dpml_case(fold_coll_t coll, const fold_alg_t *alg)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    static const fold_alg_t *const inter_ar[] = {&fold_alg_recursive_doubling,
                                                 &fold_alg_rabenseifner, &fold_alg_ring};
    static const fold_alg_t *const inter_red[] = {&fold_alg_binomial, &fold_alg_rabenseifner,
                                                  &fold_alg_ring};
    const fold_alg_t *const *inters = coll == FOLD_COLL_ALLREDUCE ? inter_ar : inter_red;
    static const size_t segs[] = {32 * 1024, 128 * 1024};
    static tally_t tl;
    tl = (tally_t){0};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        if (shapes[s][1] == 1 || !shape_kept(s)) {
            continue;
        }
        fold_topo_t *t = test_topo_blocks(shapes[s][0], shapes[s][1]);
        for (int l = 1; l <= shapes[s][1]; l *= 4) {
            for (int i = 0; i < 3; i++) {
                for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                    for (int g = 0; g < 2; g++) {
                        fold_model_query_t q = query_of(t, alg, coll, sizes[z], segs[g], l,
                                                        inters[i]);
                        compare(&p, t, &q, &tl);
                    }
                }
            }
        }
        fold_topo_free(t);
    }
    expect_close(&tl);
}

Test(model_closed, dpml_allreduce) { dpml_case(FOLD_COLL_ALLREDUCE, &fold_alg_dpml); }
Test(model_closed, dpml_reduce) { dpml_case(FOLD_COLL_REDUCE, &fold_alg_dpml); }
Test(model_closed, dpml_pipelined_allreduce)
{
    dpml_case(FOLD_COLL_ALLREDUCE, &fold_alg_dpml_pipelined);
}
Test(model_closed, dpml_pipelined_reduce) { dpml_case(FOLD_COLL_REDUCE, &fold_alg_dpml_pipelined); }

/* Ranks dealt round robin over the nodes (a launcher's --map-by node), and nodes of
 * two sizes: the fullest node's ranks stand for every node's, their partners' nodes
 * telling which messages cross. */
static void placement_case(fold_coll_t coll, const fold_alg_t *alg, const fold_alg_t *inter)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    static const int placed[][2] = {{4, 16}, {8, 8}, {16, 4}};
    for (int pl = ROUND_ROBIN; pl < PLACEMENTS; pl++) {
        static tally_t tl;
        tl = (tally_t){0};
        for (size_t s = 0; s < sizeof(placed) / sizeof(placed[0]); s++) {
            if (!shape_kept(s)) {
                continue;
            }
            fold_topo_t *t = placed_topo(placed[s][0], placed[s][1], pl);
            for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                fold_model_query_t q = query_of(t, alg, coll, sizes[z], 128 * 1024,
                                                t->min_ppn, inter);
                compare(&p, t, &q, &tl);
            }
            fold_topo_free(t);
        }
        cr_log_info("%s: %s", alg->name, placement_name[pl]);
        expect_close(&tl);
    }
}

Test(model_closed, placed_recursive_doubling)
{
    placement_case(FOLD_COLL_ALLREDUCE, &fold_alg_recursive_doubling, NULL);
}
Test(model_closed, placed_ring) { placement_case(FOLD_COLL_ALLREDUCE, &fold_alg_ring, NULL); }
Test(model_closed, placed_binomial) { placement_case(FOLD_COLL_REDUCE, &fold_alg_binomial, NULL); }
Test(model_closed, placed_chain) { placement_case(FOLD_COLL_REDUCE, &fold_alg_chain, NULL); }
Test(model_closed, placed_dpml)
{
    placement_case(FOLD_COLL_ALLREDUCE, &fold_alg_dpml, &fold_alg_recursive_doubling);
    placement_case(FOLD_COLL_REDUCE, &fold_alg_dpml_pipelined, &fold_alg_binomial);
}

/* One node: shm_flat (and the dpml it builds for messages the segment cannot hold),
 * dpml, dpml_pipelined, and cma with 1, 4 and every rank an owner, its buffers on the
 * heap (the kernel's copies) and in fold memory (mappings). */
static void node_case(fold_coll_t coll, const fold_alg_t *alg, int mapped)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    if (mapped) {
        fold_model_params_t heap = p;
        fold_model_mapped(&heap, &p);
    }
    static const int ppns[] = {4, 8, 16, 32};
    static tally_t tl;
    tl = (tally_t){0};
    for (size_t s = 0; s < sizeof(ppns) / sizeof(ppns[0]); s++) {
        fold_topo_t *t = placed_topo(1, ppns[s], BLOCKS);
        for (int l = 1; l <= ppns[s]; l *= 4) {
            for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                fold_model_query_t q = query_of(t, alg, coll, sizes[z], 128 * 1024,
                                                l < ppns[s] && l * 4 > ppns[s] ? ppns[s] : l,
                                                NULL);
                compare(&p, t, &q, &tl);
            }
        }
        fold_topo_free(t);
    }
    expect_close(&tl);
}

static void node_both(const fold_alg_t *alg, int mapped)
{
    node_case(FOLD_COLL_ALLREDUCE, alg, mapped);
    node_case(FOLD_COLL_REDUCE, alg, mapped);
}

Test(model_closed, node_shm_flat) { node_both(&fold_alg_shm_flat, 0); }
Test(model_closed, node_dpml) { node_both(&fold_alg_dpml, 0); }
Test(model_closed, node_dpml_pipelined) { node_both(&fold_alg_dpml_pipelined, 0); }
Test(model_closed, node_cma) { node_both(&fold_alg_cma, 0); }
Test(model_closed, node_cma_mapped) { node_both(&fold_alg_cma, 1); }

/* Far beyond the replay's reach (65,536 and 262,144 ranks): every form is a finite
 * time that grows with the message. */
Test(model_closed, finite_and_growing_at_any_scale)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    static const int big[][2] = {{1024, 64}, {16384, 16}};
    static const fold_alg_t *const flat[] = {&fold_alg_recursive_doubling, &fold_alg_rabenseifner,
                                             &fold_alg_ring, &fold_alg_binomial, &fold_alg_bintree,
                                             &fold_alg_chain, &fold_alg_greedy};
    for (size_t s = 0; s < sizeof(big) / sizeof(big[0]); s++) {
        fold_topo_t *t = test_topo_blocks(big[s][0], big[s][1]);
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            for (size_t a = 0; a < sizeof(flat) / sizeof(flat[0]) + 2; a++) {
                const fold_alg_t *alg = a < 7 ? flat[a] : a == 7 ? &fold_alg_dpml
                                                                 : &fold_alg_dpml_pipelined;
                const fold_alg_t *inter = coll == FOLD_COLL_ALLREDUCE ? &fold_alg_rabenseifner
                                                                      : &fold_alg_binomial;
                double last = 0;
                for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 8) {
                    fold_model_query_t q = query_of(t, alg, coll, bytes, 128 * 1024,
                                                    big[s][1], inter);
                    if (!fold_model_closed_covers(t, &q)) {
                        break;
                    }
                    fold_model_result_t res;
                    cr_assert_eq(fold_model_closed(&p, t, &q, &res), FOLD_OK, "%s", alg->name);
                    cr_expect(isfinite(res.time_us) && res.time_us > 0 && res.time_us >= last,
                              "%s %s of %zu B on %dx%d: %g us after %g", alg->name,
                              fold_coll_name(coll), bytes, big[s][0], big[s][1], res.time_us,
                              last);
                    last = res.time_us;
                }
            }
        }
        fold_topo_free(t);
    }
}
