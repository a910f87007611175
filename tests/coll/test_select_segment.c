/*
 * Segment sizes in selection: alg@SIZE in rules and forced names, the cost model's
 * pick among fold_select_seg_tries for node-aware algorithms, FOLD_SEGMENT_SIZE
 * fixing it, and the plan cutting the message into the chosen segments.
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "virtual_shape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static fold_choice_t choose(fold_context_t *ctx, fold_coll_t coll, size_t bytes)
{
    fold_choice_t c;
    cr_assert_eq(fold_select(ctx->world, coll, bytes / 4, FOLD_FLOAT32, FOLD_OP_SUM, &c),
                 FOLD_OK);
    cr_assert_not_null(c.alg);
    return c;
}

/* The rates of a 2-core AMD EPYC probed with its cores apart. */
static void pin_model(void)
{
    setenv("FOLD_MODEL", "generic,copy_gbs=80,copy_mem_gbs=22,reduce_gbs=48,reduce_mem_gbs=15,"
                         "shm_gbs=32,shm_reduce_gbs=14,shm_write_gbs=46,shm_fold_gbs=21,"
                         "shm_fold_far_gbs=36,cma_gbs=7,cma_us=0.9,l2_bytes=0",
           1);
}

static void unpin(void)
{
    unsetenv("FOLD_MODEL");
    unsetenv("FOLD_SEGMENT_SIZE");
    unsetenv("FOLD_TUNE");
    unsetenv("FOLD_REDUCE_ALG");
    unsetenv("FOLD_ALLREDUCE_ALG");
}

TestSuite(select_segment, .init = pin_model, .fini = unpin);

Test(select_segment, rules_carry_a_segment_after_the_algorithm)
{
    fold_tune_t t = {NULL, 0};
    cr_assert_eq(fold_tune_parse("reduce:64k-256k:n1-1:ppn2-2:shm_flat@32k,dpml,"
                                 "dpml_pipelined@1M", &t), FOLD_OK);
    cr_assert_eq(t.rules[0].nalgs, 3);
    cr_expect_eq(t.rules[0].algs[0], &fold_alg_shm_flat);
    cr_expect_eq(t.rules[0].segs[0], 32768);
    cr_expect_eq(t.rules[0].segs[1], 0, "no @: the model's pick");
    cr_expect_eq(t.rules[0].segs[2], 1 << 20);
    char out[256];
    fold_tune_rule_format(&t.rules[0], out, sizeof(out));
    cr_expect_str_eq(out, "reduce:64k-256k:n1-1:ppn2-2:shm_flat@32k,dpml,dpml_pipelined@1M");
    const char *bad[] = {"reduce:0-inf:shm_flat@", "reduce:0-inf:shm_flat@8",
                         "reduce:0-inf:shm_flat@32q", "reduce:0-inf:shm_flat@-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(fold_tune_parse(bad[i], &t), FOLD_ERR_INVALID_ARG, "%s", bad[i]);
    }
    cr_expect_eq(fold_tune_parse("reduce:0-inf:nope@32k", &t), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(t.nrules, 1, "a refused text leaves the rules alone");
    fold_tune_release(&t);
}

Test(select_segment, a_forced_name_carries_its_segment)
{
    setenv("FOLD_REDUCE_ALG", "shm_flat@16k", 1);
    setenv("FOLD_ALLREDUCE_ALG", "ring@64k", 1);
    fold_context_t *ctx = virtual_ctx(1, 2);
    fold_choice_t r = choose(ctx, FOLD_COLL_REDUCE, 1 << 20);
    cr_expect_eq(r.alg, &fold_alg_shm_flat);
    cr_expect_eq(r.seg_bytes, 16384);
    fold_choice_t a = choose(ctx, FOLD_COLL_ALLREDUCE, 1 << 20);
    cr_expect_eq(a.alg, &fold_alg_ring);
    cr_expect_eq(a.seg_bytes, 65536);
    cr_expect_eq(fold_selected_segment_size(ctx->world, "reduce", 1 << 18, FOLD_FLOAT32), 16384);
    cr_expect_eq(fold_config_set(ctx, "REDUCE_ALG", "shm_flat@4"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_config_set(ctx, "REDUCE_ALG", "nope@4k"), FOLD_ERR_NOT_FOUND);
    fold_context_free_virtual(ctx);
}

/* Every try of alg's configuration c at other segments predicts no less. */
static void expect_best_segment(fold_comm_t *w, fold_coll_t coll, fold_choice_t c, size_t bytes)
{
    double chosen = fold_select_predict(w, w->select.topo, coll, &c, bytes);
    for (int g = 0; g < FOLD_SELECT_SEG_TRIES; g++) {
        fold_choice_t other = c;
        other.seg_bytes = fold_select_seg_tries[g];
        double us = fold_select_predict(w, w->select.topo, coll, &other, bytes);
        cr_expect_leq(chosen, us, "%s %s %zu B: segment %zu (%.2f us) over %zu (%.2f us)",
                      fold_coll_name(coll), c.alg->name, bytes, c.seg_bytes, chosen,
                      other.seg_bytes, us);
    }
}

Test(select_segment, the_model_takes_the_segment_it_predicts_fastest)
{
    int shapes[][2] = {{1, 2}, {4, 16}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        fold_context_t *ctx = virtual_ctx(shapes[i][0], shapes[i][1]);
        fold_comm_t *w = ctx->world;
        int other_than_default = 0;
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            for (size_t bytes = 32768; bytes <= ((size_t)16 << 20); bytes *= 4) {
                fold_choice_t c = choose(ctx, (fold_coll_t)coll, bytes);
                int tried = 0;
                for (int g = 0; g < FOLD_SELECT_SEG_TRIES; g++) {
                    tried |= c.seg_bytes == fold_select_seg_tries[g];
                }
                cr_expect(tried, "%s %zu B: segment %zu is none of the tries",
                          fold_coll_name((fold_coll_t)coll), bytes, c.seg_bytes);
                other_than_default += c.seg_bytes != fold_select_seg_tries[0];
                expect_best_segment(w, (fold_coll_t)coll, c, bytes);
            }
        }
        /* Where the tries never win the option is dead: the model's own tables
         * (fold_info -S) show 1.2-1.7x between them on both shapes. */
        cr_expect_gt(other_than_default, 0, "%dx%d: always the default segment",
                     shapes[i][0], shapes[i][1]);
        fold_context_free_virtual(ctx);
    }
}

Test(select_segment, a_set_segment_size_or_a_rule_fixes_it)
{
    setenv("FOLD_SEGMENT_SIZE", "64k", 1);
    fold_context_t *set = virtual_ctx(1, 2);
    unsetenv("FOLD_SEGMENT_SIZE");
    setenv("FOLD_TUNE", "reduce:0-inf:shm_flat@16k,dpml@16k", 1);
    fold_context_t *ruled = virtual_ctx(1, 2);
    for (size_t bytes = 32768; bytes <= (1u << 20); bytes *= 2) {
        cr_expect_eq(choose(set, FOLD_COLL_REDUCE, bytes).seg_bytes, 0, "%zu B", bytes);
        cr_expect_eq(fold_selected_segment_size(set->world, "reduce", bytes / 4, FOLD_FLOAT32),
                     65536, "%zu B", bytes);
        cr_expect_eq(choose(ruled, FOLD_COLL_REDUCE, bytes).seg_bytes, 16384, "%zu B", bytes);
    }
    fold_context_free_virtual(set);
    fold_context_free_virtual(ruled);
}

Test(select_segment, the_plan_cuts_the_message_into_the_chosen_segments)
{
    fold_context_t *ctx = virtual_ctx(4, 1);
    fold_call_t call = {.coll = FOLD_COLL_ALLREDUCE, .count = 1 << 20, .dtype = FOLD_FLOAT64,
                        .op = FOLD_OP_SUM};
    fold_choice_t choice = {.alg = &fold_alg_ring, .seg_bytes = 8192};
    fold_exec_args_t args;
    cr_assert_eq(fold_coll_plan(ctx->world, &call, &choice, &args), FOLD_OK);
    cr_expect_eq(args.cargs.seg_count, 1024, "8 KiB of float64");
    choice.seg_bytes = 0;
    cr_assert_eq(fold_coll_plan(ctx->world, &call, &choice, &args), FOLD_OK);
    cr_expect_eq(args.cargs.seg_count, 128 * 1024 / 8, "no choice: the default 128 KiB");
    /* Never more than FOLD_SELECT_MAX_SEGMENTS segments, however small the choice. */
    choice.seg_bytes = 16;
    cr_assert_eq(fold_coll_plan(ctx->world, &call, &choice, &args), FOLD_OK);
    cr_expect_eq(args.cargs.seg_count, (1u << 20) / FOLD_SELECT_MAX_SEGMENTS);
    fold_context_free_virtual(ctx);
}
