/*
 * Selection on communicators of thousands of ranks (virtual nodes): every prediction
 * is a finite time, however long the schedules are to replay, and the choice is never
 * predicted slower than a flat algorithm, which fold has too. The model is pinned to
 * the generic defaults, so the decisions are the same on any machine.
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "coll/model.h"
#include "virtual_shape.h"
#include "test_reduced.h"

#include <math.h>
#include <stdlib.h>

static fold_context_t *generic_ctx(int nnodes, int ppn)
{
    setenv("FOLD_MODEL", "generic", 1);
    fold_context_t *ctx = virtual_ctx(nnodes, ppn);
    unsetenv("FOLD_MODEL");
    return ctx;
}

static void skip_when_reduced(void)
{
    if (fold_test_reduced()) {
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
}

/* The flat algorithms an MPI library would run for the call (fold_select_flat_us's). */
static const fold_tune_rule_t *flat_rule(const fold_comm_t *w, fold_coll_t coll, size_t bytes)
{
    fold_shape_t flat = {w->size, w->size, 1, 1};
    return fold_tune_match(fold_default_rules(), coll, bytes, &flat, FOLD_ALG_NODE_AWARE);
}

Test(select_scale, every_prediction_on_65536_ranks_is_finite, .timeout = 1200)
{
    skip_when_reduced();
    fold_context_t *ctx = generic_ctx(1024, 64);
    fold_comm_t *w = ctx->world;
    cr_assert_eq(fold_select_topos(w), FOLD_OK);
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        static const size_t sizes[] = {8, (size_t)256 << 10, (size_t)16 << 20};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            const size_t bytes = sizes[i];
            const fold_tune_rule_t *r = fold_tune_match(fold_default_rules(), coll, bytes,
                                                        &w->shape, 0);
            cr_assert_not_null(r);
            for (int a = 0; a < r->nalgs; a++) {
                fold_choice_t c;
                double us = fold_select_evaluate(w, coll, r->algs[a], bytes, &c);
                cr_expect(isfinite(us) && us > 0, "%s %zu B, %s: %g us", fold_coll_name(coll),
                          bytes, r->algs[a]->name, us);
            }
            fold_choice_t chosen;
            cr_assert_eq(fold_select(w, coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM, &chosen),
                         FOLD_OK);
            double us = fold_select_predict(w, w->select.topo, coll, &chosen, bytes);
            cr_expect(isfinite(us), "%s %zu B: the choice, %s, %g us", fold_coll_name(coll),
                      bytes, chosen.alg->name, us);
            double flat_us = fold_select_flat_us(w, coll, bytes);
            cr_expect(isfinite(flat_us), "%s %zu B: the best flat algorithm %g us",
                      fold_coll_name(coll), bytes, flat_us);
        }
    }
    fold_context_free_virtual(ctx);
}

/* At 64 KiB, 1 MiB and 16 MiB: the choice's prediction is at most every flat
 * candidate's. */
static void expect_no_flat_faster(int nnodes, int ppn)
{
    fold_context_t *ctx = generic_ctx(nnodes, ppn);
    fold_comm_t *w = ctx->world;
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        static const size_t sizes[] = {(size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20};
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            const size_t bytes = sizes[i];
            fold_choice_t chosen, c;
            cr_assert_eq(fold_select(w, coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM, &chosen),
                         FOLD_OK);
            double us = fold_select_predict(w, w->select.topo, coll, &chosen, bytes);
            cr_expect(isfinite(us));
            const fold_tune_rule_t *r = flat_rule(w, coll, bytes);
            cr_assert_not_null(r);
            for (int a = 0; a < r->nalgs; a++) {
                double flat = fold_select_evaluate(w, coll, r->algs[a], bytes, &c);
                cr_expect_leq(us, flat, "%dx%d %s %zu B: chose %s (leaders %d, %.2f us) over "
                              "%s (%.2f us)", nnodes, ppn, fold_coll_name(coll), bytes,
                              chosen.alg->name, chosen.leaders, us, r->algs[a]->name, flat);
            }
            cr_expect_leq(us, fold_select_flat_us(w, coll, bytes),
                          "the shim's advice compares the same numbers");
        }
    }
    fold_context_free_virtual(ctx);
}

Test(select_scale, no_flat_algorithm_beats_the_choice_on_8x64, .timeout = 1200)
{
    skip_when_reduced();
    expect_no_flat_faster(8, 64);
}

Test(select_scale, no_flat_algorithm_beats_the_choice_on_1024x64, .timeout = 1200)
{
    skip_when_reduced();
    expect_no_flat_faster(1024, 64);
}
