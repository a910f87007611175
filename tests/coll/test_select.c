/*
 * Selection: the rule language with topology terms, the tuning file, communicator
 * shapes, and the decisions the cost model makes for shapes this machine cannot
 * run (virtual nodes: selection needs only the launcher's locality).
 */
#include <criterion/criterion.h>

#include "comm.h"
#include "coll/model.h"
#include "virtual_shape.h"
#include "test_reduced.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

Test(select_rules, parse_sizes_ranks_and_reject_bad_rules)
{
    fold_tune_t t = {NULL, 0};
    cr_assert_eq(fold_tune_parse("allreduce:0-4k:recursive_doubling#reduce:64k-inf:p3-inf:ring",
                                 &t), FOLD_OK);
    cr_assert_eq(t.nrules, 2);
    cr_expect_eq(t.rules[0].coll, FOLD_COLL_ALLREDUCE);
    cr_expect_eq(t.rules[0].max_bytes, 4096);
    cr_expect_eq(t.rules[1].min_bytes, 65536);
    cr_expect_eq(t.rules[1].max_bytes, SIZE_MAX);
    cr_expect_eq(t.rules[1].ranks.lo, 3);
    cr_expect_eq(t.rules[1].ranks.hi, LONG_MAX);
    cr_expect_eq(t.rules[1].nalgs, 1);
    cr_expect_str_eq(t.rules[1].algs[0]->name, "ring");
    cr_expect_eq(fold_tune_parse("allreduce:0-4k:nope", &t), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(fold_tune_parse("bcast:0-4k:ring", &t), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_tune_parse("allreduce:4k-0:ring", &t), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_tune_parse("allreduce:0-4k:x3-4:ring", &t), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_tune_parse("allreduce:0-4k:ppn3:ring", &t), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_tune_parse("allreduce:0-4k:n4-2:ring", &t), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_tune_parse("reduce:0-4k:recursive_doubling", &t), FOLD_ERR_INVALID_ARG,
                 "recursive_doubling is no reduce algorithm");
    cr_expect_eq(fold_tune_parse("allreduce:0-4k:ring,", &t), FOLD_OK, "a trailing comma is harmless");
    cr_expect_eq(t.nrules, 1);
    fold_tune_release(&t);
}

Test(select_rules, topology_terms_and_candidate_lists)
{
    fold_tune_t t = {NULL, 0};
    cr_assert_eq(fold_tune_parse("allreduce:64k-inf:n1-1:ppn2-inf:dpml#"
                                 "reduce:0-1M:ppn2-8:n2-inf:p4-64:shm_flat,dpml,dpml_pipelined",
                                 &t), FOLD_OK);
    cr_assert_eq(t.nrules, 2);
    cr_expect_eq(t.rules[0].nodes.lo, 1);
    cr_expect_eq(t.rules[0].nodes.hi, 1);
    cr_expect_eq(t.rules[0].ppn.lo, 2);
    cr_expect_eq(t.rules[0].ppn.hi, LONG_MAX);
    cr_expect_eq(t.rules[0].ranks.lo, 1, "an absent term matches any count");
    cr_expect_eq(t.rules[1].ppn.hi, 8);
    cr_expect_eq(t.rules[1].nodes.lo, 2);
    cr_expect_eq(t.rules[1].ranks.hi, 64);
    cr_assert_eq(t.rules[1].nalgs, 3);
    cr_expect_str_eq(t.rules[1].algs[2]->name, "dpml_pipelined");

    fold_shape_t one_node = {4, 1, 4, 4}, two_by_two = {4, 2, 2, 2}, flat = {4, 4, 1, 1};
    cr_expect_eq(fold_tune_match(&t, FOLD_COLL_ALLREDUCE, 65536, &one_node, 0), &t.rules[0]);
    cr_expect_null(fold_tune_match(&t, FOLD_COLL_ALLREDUCE, 65535, &one_node, 0));
    cr_expect_null(fold_tune_match(&t, FOLD_COLL_ALLREDUCE, 1 << 20, &two_by_two, 0));
    cr_expect_eq(fold_tune_match(&t, FOLD_COLL_REDUCE, 1000, &two_by_two, 0), &t.rules[1]);
    cr_expect_null(fold_tune_match(&t, FOLD_COLL_REDUCE, 1000, &flat, 0));
    cr_expect_null(fold_tune_match(&t, FOLD_COLL_REDUCE, 1 << 20, &two_by_two, 0),
                   "sizes are [lo, hi)");
    cr_expect_null(fold_tune_match(&t, FOLD_COLL_REDUCE, 1000, &two_by_two, FOLD_ALG_NODE_AWARE),
                   "a rule of only skipped algorithms does not match");
    fold_tune_release(&t);
}

Test(select_rules, format_round_trips)
{
    const char *rules[] = {"allreduce:0-4k:recursive_doubling",
                           "allreduce:64k-inf:n1-1:ppn2-inf:dpml",
                           "reduce:1000-3M:p3-inf:n2-16:ppn2-2:shm_flat,dpml,dpml_pipelined"};
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        fold_tune_t t = {NULL, 0};
        char out[256];
        cr_assert_eq(fold_tune_parse(rules[i], &t), FOLD_OK, "%s", rules[i]);
        fold_tune_rule_format(&t.rules[0], out, sizeof(out));
        cr_expect_str_eq(out, rules[i]);
        fold_tune_release(&t);
    }
}

Test(select_rules, defaults_parse_and_name_no_rank_count)
{
    const fold_tune_t *d = fold_default_rules();
    cr_assert_gt(d->nrules, 0);
    for (int i = 0; i < d->nrules; i++) {
        const fold_tune_rule_t *r = &d->rules[i];
        cr_expect(r->ranks.lo == 1 && r->ranks.hi == LONG_MAX,
                  "default rule %d depends on a rank count", i);
        cr_expect(r->nalgs >= 1);
    }
    /* Every shape finds a rule; node-aware wherever a node holds two ranks, and across
     * such nodes the flat algorithms beside them. */
    fold_shape_t shapes[] = {{2, 1, 2, 2}, {3, 1, 3, 3}, {512, 8, 64, 64}, {1000, 1000, 1, 1},
                             {4, 3, 1, 2}, {64, 1, 64, 64}, {2, 2, 1, 1}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            for (size_t bytes = 1; bytes <= ((size_t)1 << 30); bytes *= 8) {
                const fold_tune_rule_t *r = fold_tune_match(d, coll, bytes, &shapes[i], 0);
                cr_assert_not_null(r);
                int nodes_share = shapes[i].max_ppn > 1, across = shapes[i].nnodes > 1;
                cr_expect_eq((r->algs[0]->flags & FOLD_ALG_NODE_AWARE) != 0, nodes_share,
                             "shape %zu, %s", i, r->algs[0]->name);
                for (int a = 0; a < r->nalgs; a++) {
                    int aware = (r->algs[a]->flags & FOLD_ALG_NODE_AWARE) != 0;
                    cr_expect(aware == nodes_share || (nodes_share && across),
                              "shape %zu, %s", i, r->algs[a]->name);
                    cr_expect(!(shapes[i].nnodes > 1 && r->algs[a] == &fold_alg_shm_flat),
                              "shm_flat across nodes");
                }
            }
        }
    }
}

Test(select_rules, shape_of_node_placement)
{
    int placement[] = {0, 0, 1, 2, 2, 2};
    fold_shape_t s;
    fold_shape_of(6, placement, 3, &s);
    cr_expect_eq(s.size, 6);
    cr_expect_eq(s.nnodes, 3);
    cr_expect_eq(s.min_ppn, 1);
    cr_expect_eq(s.max_ppn, 3);
    int sparse[] = {5, 5};   /* node ids need not be dense */
    fold_shape_of(2, sparse, 7, &s);
    cr_expect_eq(s.nnodes, 1);
    cr_expect_eq(s.min_ppn, 2);
}

static char *write_temp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/fold-tune-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

Test(tune_file, rules_params_and_serve_ranges)
{
    char *path = write_temp("# fold_tune, test\n"
                            "rule allreduce:0-8k:n1-1:ppn2-inf:shm_flat   # measured\n"
                            "\n"
                            "param flag_us 0.25\n"
                            "param cache_bytes 64M\n"
                            "serve allreduce:0-1k:mpi\n"
                            "serve allreduce:1k-inf:ppn2-inf:fold\n");
    fold_tune_file_t f;
    cr_assert_eq(fold_tune_file_load(path, &f), FOLD_OK);
    unlink(path);
    cr_expect_eq(f.rules.nrules, 1);
    cr_expect_eq(f.rules.rules[0].algs[0], &fold_alg_shm_flat);
    cr_expect_eq(f.nserve, 2);
    fold_shape_t shape = {2, 1, 2, 2}, flat = {2, 2, 1, 1};
    const fold_serve_rule_t *s = fold_tune_file_serve(&f, FOLD_COLL_ALLREDUCE, 100, &shape);
    cr_assert_not_null(s);
    cr_expect_eq(s->fold, 0);
    s = fold_tune_file_serve(&f, FOLD_COLL_ALLREDUCE, 4096, &shape);
    cr_assert_not_null(s);
    cr_expect_eq(s->fold, 1);
    cr_expect_null(fold_tune_file_serve(&f, FOLD_COLL_ALLREDUCE, 4096, &flat));
    cr_expect_null(fold_tune_file_serve(&f, FOLD_COLL_REDUCE, 4096, &shape));

    fold_model_params_t m;
    cr_assert_eq(fold_model_configure(NULL, f.params, "step_us=0.5", &m), FOLD_OK);
    cr_expect_float_eq(m.flag_us, 0.25, 1e-12);
    cr_expect_float_eq(m.cache_bytes, 64.0 * 1024 * 1024, 1e-3);
    cr_expect_float_eq(m.step_us, 0.5, 1e-12, "FOLD_MODEL comes after the file");
    cr_expect_eq(fold_model_configure(NULL, f.params, "no_such=1", &m), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(fold_model_configure(NULL, NULL, "flag_us=fast", &m), FOLD_ERR_INVALID_ARG);

    /* "generic": the defaults alone beneath FOLD_MODEL, whatever was measured or filed. */
    fold_model_params_t generic;
    fold_model_defaults(&generic);
    generic.step_us = 0.5;
    cr_assert_eq(fold_model_configure("copy_gbs=1,l2_bytes=1M", f.params, " generic ,step_us=0.5",
                                      &m), FOLD_OK);
    cr_expect(fold_model_equal(&m, &generic), "neither the measurement nor the file reach it");
    cr_assert_eq(fold_model_configure("copy_gbs=1", f.params, "generic", &m), FOLD_OK);
    fold_model_defaults(&generic);
    cr_expect(fold_model_equal(&m, &generic), "generic alone: the defaults");
    cr_assert_eq(fold_model_configure("copy_gbs=1", NULL, "step_us=0.5,generic", &m),
                 FOLD_ERR_INVALID_ARG, "generic only comes first");
    cr_expect_eq(fold_model_configure(NULL, NULL, "generics=1", &m), FOLD_ERR_NOT_FOUND);
    fold_tune_file_release(&f);
}

Test(tune_file, bad_lines_are_refused_and_none_reads_nothing)
{
    const char *bad[] = {"rule allreduce:0-8k:nope\n", "param flag_us\n",
                         "param bogus 1\n", "serve allreduce:0-1k:maybe\n", "frobnicate\n",
                         "serve allreduce:8k-1k:fold\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *path = write_temp(bad[i]);
        fold_tune_file_t f;
        cr_expect_neq(fold_tune_file_load(path, &f), FOLD_OK, "%s", bad[i]);
        unlink(path);
    }
    fold_tune_file_t f;
    cr_expect_eq(fold_tune_file_load("none", &f), FOLD_OK);
    cr_expect_null(f.path);
    cr_expect_eq(f.rules.nrules, 0);
    cr_expect_eq(fold_tune_file_load("", &f), FOLD_OK);
    cr_expect_eq(fold_tune_file_load("/nonexistent/fold/tune", &f), FOLD_ERR_NOT_FOUND);
}

Test(tune_file, text_parses_without_a_file)
{
    /* No terminator: the parser must stop at len (the last line has no newline). */
    const char text[] = "rule allreduce:0-8k:ring\r\nparam nics 2\nserve reduce:0-inf:fold";
    char *exact = malloc(sizeof(text) - 1);
    memcpy(exact, text, sizeof(text) - 1);
    fold_tune_file_t f;
    cr_assert_eq(fold_tune_file_parse(exact, sizeof(text) - 1, "test", &f), FOLD_OK);
    cr_expect_eq(f.rules.nrules, 1);
    cr_expect_eq(f.nserve, 1);
    cr_expect_eq(f.serve[0].fold, 1);
    cr_expect_str_eq(f.params, "nics=2");
    cr_expect_null(f.path);
    fold_tune_file_release(&f);

    /* A line past 1023 bytes is one line (the file reader once split it in two). */
    char longline[2048];
    int n = snprintf(longline, sizeof(longline), "rule allreduce:0-8k:ring%*s# %s\n", 1000, "",
                     "comment");
    cr_expect_eq(fold_tune_file_parse(longline, (size_t)n, "test", &f), FOLD_OK);
    cr_expect_eq(f.rules.nrules, 1);
    fold_tune_file_release(&f);

    /* A refusal leaves the output alone; a NUL ends its line's text. */
    memset(&f, 0x5a, sizeof(f));
    cr_expect_eq(fold_tune_file_parse("rule allreduce:0-8k:ring\nbogus\n", 31, "test", &f),
                 FOLD_ERR_INVALID_ARG);
    cr_expect_eq(f.nserve, 0x5a5a5a5a);
    cr_expect_eq(fold_tune_file_parse("param nics 2\0junk\n", 18, "test", &f), FOLD_OK);
    cr_expect_str_eq(f.params, "nics=2");
    fold_tune_file_release(&f);
    cr_expect_eq(fold_tune_file_parse("", 0, "test", &f), FOLD_OK);
    cr_expect_eq(f.rules.nrules, 0);
    free(exact);
}

/* ---- decisions on virtual shapes ------------------------------------------------ */

static fold_choice_t choose(fold_context_t *ctx, fold_coll_t coll, size_t bytes, fold_op_t op)
{
    fold_choice_t c;
    cr_assert_eq(fold_select(ctx->world, coll, bytes / 4 ? bytes / 4 : 1, FOLD_FLOAT32, op, &c),
                 FOLD_OK);
    cr_assert_not_null(c.alg);
    return c;
}

/* The choice is the candidate with the lowest prediction, among the default family. */
static void expect_model_minimum(fold_context_t *ctx, fold_coll_t coll, size_t bytes)
{
    fold_comm_t *w = ctx->world;
    fold_choice_t c = choose(ctx, coll, bytes, FOLD_OP_SUM), other;
    double chosen = fold_select_evaluate(w, coll, c.alg, bytes, &other);
    const fold_tune_rule_t *r = fold_tune_match(fold_default_rules(), coll, bytes, &w->shape, 0);
    cr_assert_not_null(r);
    for (int a = 0; a < r->nalgs; a++) {
        double us = fold_select_evaluate(w, coll, r->algs[a], bytes, &other);
        cr_expect_leq(chosen, us, "%s %zu B: chose %s (%.2f us) over %s (%.2f us)",
                      fold_coll_name(coll), bytes, c.alg->name, chosen, r->algs[a]->name, us);
    }
}

/* Node-aware on one node of several ranks; across nodes node-aware or flat, whichever
 * the model predicts faster. */
Test(select_shapes, the_model_minimum_wherever_a_node_holds_two_ranks)
{
    int shapes[][2] = {{1, 2}, {1, 3}, {2, 2}, {4, 8}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        fold_context_t *ctx = virtual_ctx(shapes[i][0], shapes[i][1]);
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            for (size_t bytes = 8; bytes <= ((size_t)16 << 20); bytes *= 16) {
                fold_choice_t c = choose(ctx, coll, bytes, FOLD_OP_SUM);
                int aware = (c.alg->flags & FOLD_ALG_NODE_AWARE) != 0;
                cr_expect(aware || shapes[i][0] > 1, "%dx%d %s %zu B: %s", shapes[i][0],
                          shapes[i][1], fold_coll_name(coll), bytes, c.alg->name);
                if (aware) {
                    cr_expect(c.leaders >= 1 && c.leaders <= shapes[i][1]);
                    cr_expect_eq(c.inter == NULL, shapes[i][0] == 1,
                                 "an exchange between nodes exactly when there are several");
                }
                expect_model_minimum(ctx, coll, bytes);
            }
        }
        fold_context_free_virtual(ctx);
    }
}

Test(select_shapes, sixty_four_ranks_per_node_on_eight_nodes)
{
    if (fold_test_reduced()) {   /* 34 s under ASan; test_model's model_large runs this shape there */
        cr_skip_test("FOLD_TEST_REDUCED: the release stage runs it");
    }
    fold_context_t *ctx = virtual_ctx(8, 64);
    cr_expect_eq(ctx->world->shape.nnodes, 8);
    cr_expect_eq(ctx->world->shape.max_ppn, 64);
    fold_choice_t big = choose(ctx, FOLD_COLL_ALLREDUCE, 16 << 20, FOLD_OP_SUM);
    cr_expect(big.alg == &fold_alg_dpml || big.alg == &fold_alg_dpml_pipelined, "%s",
              big.alg->name);
    cr_expect_gt(big.leaders, 1, "a 16 MiB allreduce on 64 ranks per node spreads the work "
                 "over several leaders (DPML paper, sec. 6.2)");
    cr_assert_not_null(big.inter);
    cr_expect_eq(big.inter->flags & FOLD_ALG_NODE_AWARE, 0);
    fold_choice_t small = choose(ctx, FOLD_COLL_ALLREDUCE, 64, FOLD_OP_SUM);
    cr_expect(small.alg->flags & FOLD_ALG_NODE_AWARE);
    cr_expect_leq(small.leaders, big.leaders, "fewer leaders for 64 B than for 16 MiB");
    expect_model_minimum(ctx, FOLD_COLL_REDUCE, 1 << 20);
    fold_context_free_virtual(ctx);
}

Test(select_shapes, one_rank_per_node_on_a_thousand_nodes)
{
    fold_context_t *ctx = virtual_ctx(1000, 1);
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        for (size_t bytes = 8; bytes <= ((size_t)2 << 20); bytes *= 512) {
            fold_choice_t c = choose(ctx, coll, bytes, FOLD_OP_SUM);
            cr_expect_eq(c.alg->flags & FOLD_ALG_NODE_AWARE, 0, "%s %zu B: %s",
                         fold_coll_name(coll), bytes, c.alg->name);
            expect_model_minimum(ctx, coll, bytes);
        }
    }
    /* Latency-bound small messages: a logarithmic algorithm, not a 999-step ring. */
    cr_expect_neq(choose(ctx, FOLD_COLL_ALLREDUCE, 8, FOLD_OP_SUM).alg, &fold_alg_ring);
    fold_context_free_virtual(ctx);
}

static void first_wins(const void *in, void *inout, size_t count, fold_dtype_t dtype, void *arg)
{
    (void)arg;
    memcpy(inout, in, count * fold_dtype_size(dtype));
}

Test(select_shapes, same_answer_every_time_and_ordered_for_non_commutative_ops)
{
    fold_context_t *a = virtual_ctx(3, 4), *b = virtual_ctx(3, 4);
    for (size_t bytes = 4; bytes <= ((size_t)4 << 20); bytes *= 4) {
        fold_choice_t x = choose(a, FOLD_COLL_REDUCE, bytes, FOLD_OP_SUM);
        fold_choice_t y = choose(b, FOLD_COLL_REDUCE, bytes, FOLD_OP_SUM);
        cr_expect(x.alg == y.alg && x.leaders == y.leaders && x.inter == y.inter);
    }
    fold_op_t user;
    cr_assert_eq(fold_op_create(first_wins, NULL, 0, &user), FOLD_OK);
    for (size_t bytes = 4; bytes <= ((size_t)4 << 20); bytes *= 16) {
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            fold_choice_t c = choose(a, coll, bytes, user);
            cr_expect(c.alg->flags & FOLD_ALG_ORDERED, "%s %zu B: %s does not keep the order",
                      fold_coll_name(coll), bytes, c.alg->name);
        }
    }
    fold_op_free(user);
    fold_context_free_virtual(a);
    fold_context_free_virtual(b);
}

Test(select_shapes, rules_come_before_the_model)
{
    setenv("FOLD_TUNE", "allreduce:0-inf:n1-1:ppn2-inf:dpml#reduce:1M-inf:ring", 1);
    fold_context_t *ctx = virtual_ctx(1, 4);
    unsetenv("FOLD_TUNE");
    fold_choice_t c = choose(ctx, FOLD_COLL_ALLREDUCE, 100, FOLD_OP_SUM);
    cr_expect_eq(c.alg, &fold_alg_dpml);
    cr_expect_geq(c.leaders, 1, "the model still picks the leaders");
    cr_expect_eq(choose(ctx, FOLD_COLL_REDUCE, 2 << 20, FOLD_OP_SUM).alg, &fold_alg_ring);
    cr_expect(choose(ctx, FOLD_COLL_REDUCE, 1000, FOLD_OP_SUM).alg->flags & FOLD_ALG_NODE_AWARE,
              "below the rule's range the defaults apply");
    fold_context_free_virtual(ctx);
}

Test(select_shapes, shim_advice_serves_node_aware_shapes)
{
    fold_context_t *ctx = virtual_ctx(2, 8);
    int serve = -1;
    const char *source = NULL;
    cr_assert_eq(fold_serve_advice(ctx->world, "allreduce", 1 << 20, &serve, &source), FOLD_OK);
    cr_expect_eq(serve, 1, "DPML on 8 ranks per node beats a flat algorithm at 1 MiB");
    cr_expect_str_eq(source, "cost model");
    cr_expect_eq(fold_serve_advice(ctx->world, "bcast", 8, &serve, &source),
                 FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_serve_advice(NULL, "reduce", 8, &serve, &source), FOLD_ERR_INVALID_ARG);
    fold_context_free_virtual(ctx);
}

/* A node leader folds its node's rows in one step after one wait (sched.h), and a
 * rank copies the leaders' results out in one piece (alg_dpml.h): with a step and
 * a wait per row and per leader, the model put a flat algorithm ahead on 64 ranks
 * per node from 2 to 128 KiB (allreduce 2 KiB 11.7 us against 7.0), so the shim
 * left those calls to MPI. */
Test(select_shapes, wide_nodes_are_served_by_node_aware_folds)
{
    const int shapes[][2] = {{1, 64}, {4, 16}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        fold_context_t *ctx = virtual_ctx(shapes[i][0], shapes[i][1]);
        for (size_t bytes = 512; bytes <= 131072; bytes *= 4) {
            fold_choice_t c = choose(ctx, FOLD_COLL_ALLREDUCE, bytes, FOLD_OP_SUM);
            cr_expect(c.alg->flags & FOLD_ALG_NODE_AWARE, "%dx%d %zu B: %s", shapes[i][0],
                      shapes[i][1], bytes, c.alg->name);
            int serve = -1;
            const char *source = NULL;
            cr_assert_eq(fold_serve_advice(ctx->world, "allreduce", bytes, &serve, &source),
                         FOLD_OK);
            cr_expect_eq(serve, 1, "%dx%d allreduce %zu B: fold serves", shapes[i][0],
                         shapes[i][1], bytes);
        }
        fold_context_free_virtual(ctx);
    }
}

/* The leader's schedule itself: per chunk one wait and one fold of all 64 rows. */
Test(select_shapes, a_wide_node_leader_folds_its_rows_in_one_step)
{
    fold_context_t *ctx = virtual_ctx(1, 64);
    cr_assert_eq(fold_select_topos(ctx->world), FOLD_OK);
    fold_coll_args_t a = {.coll = FOLD_COLL_ALLREDUCE, .rank = 0, .size = 64, .count = 2048,
                          .seg_count = 2048, .depth = 1, .commutative = 1,
                          .topo = ctx->world->select.topo, .leaders = 8,
                          .shm_count = (size_t)1 << 24};
    fold_sched_t s;
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_builder(&fold_alg_dpml, FOLD_COLL_ALLREDUCE)(&a, &s), FOLD_OK);
    int rows = 0, reduces = 0, row_waits = 0, result_waits = 0, copies_out = 0;
    for (size_t k = 0; k < s.nsteps; k++) {
        const fold_step_t *st = &s.steps[k];
        rows += st->kind == FOLD_STEP_REDUCE_ROWS;
        reduces += st->kind == FOLD_STEP_REDUCE;
        row_waits += st->kind == FOLD_STEP_SHM_WAIT && st->flag == FOLD_FLAG_WRITTEN;
        result_waits += st->kind == FOLD_STEP_SHM_WAIT && st->flag == FOLD_FLAG_PUBLISHED;
        copies_out += st->kind == FOLD_STEP_COPY && st->dst.buf == FOLD_BUF_OUT;
        if (st->kind == FOLD_STEP_REDUCE_ROWS) {
            cr_expect_eq(st->nops, 64);
        }
    }
    cr_expect_eq(rows, 1);
    cr_expect_eq(reduces, 0);
    cr_expect_eq(row_waits, 1);
    /* The 8 leaders' results side by side: its own block, one wait, the rest in at
     * most two pieces (alg_dpml.h), not a wait and a copy per leader. */
    cr_expect_eq(result_waits, 1);
    cr_expect_leq(copies_out, 3);
    fold_sched_cleanup(&s);
    /* A rank that leads nothing says so at once, for that one wait. */
    a.rank = 63;
    cr_assert_lt(fold_topo_leader_index(a.topo, 63, 8), 0);
    fold_sched_init(&s, &a);
    cr_assert_eq(fold_alg_builder(&fold_alg_dpml, FOLD_COLL_ALLREDUCE)(&a, &s), FOLD_OK);
    int posts = 0;
    copies_out = 0;
    for (size_t k = 0; k < s.nsteps; k++) {
        posts += s.steps[k].kind == FOLD_STEP_SHM_POST && s.steps[k].flag == FOLD_FLAG_PUBLISHED;
        copies_out += s.steps[k].kind == FOLD_STEP_COPY && s.steps[k].dst.buf == FOLD_BUF_OUT;
    }
    cr_expect_eq(posts, 1);
    cr_expect_eq(copies_out, 1);
    fold_sched_cleanup(&s);
    fold_context_free_virtual(ctx);
}

/* Where a replay would take too many steps, selection extrapolates from two smaller
 * calls (select.c, predict_below), at the large call's own rates: dpml's 512 KiB
 * allreduce on 8 nodes of 64 ranks, extrapolated from calls whose working sets fit
 * the cache, came out at 0.37x its replay (369 against 1002 us), and so beat
 * schedules that were replayed whole. */
Test(select_shapes, extrapolation_runs_at_the_large_calls_rates)
{
    fold_context_t *ctx = virtual_ctx(8, 64);
    fold_comm_t *w = ctx->world;
    cr_assert_eq(fold_select_topos(w), FOLD_OK);
    const size_t bytes = 512 << 10;
    fold_choice_t c = {.alg = &fold_alg_dpml, .leaders = 64, .seg_bytes = 131072,
                       .inter = &fold_alg_recursive_doubling};
    double extrapolated = fold_select_predict(w, w->select.topo, FOLD_COLL_ALLREDUCE, &c, bytes);
    fold_model_query_t q = {
        .alg = &fold_alg_dpml, .esize = 4,
        .proto = {.coll = FOLD_COLL_ALLREDUCE, .size = 512, .count = bytes / 4,
                  .seg_count = fold_select_seg_count(ctx, 131072, bytes, 4), .leaders = 64,
                  .inter = &fold_alg_recursive_doubling,
                  .shm_count = ctx->config.shm_size / 4,
                  .depth = (int)ctx->config.pipeline_depth, .commutative = 1}};
    fold_model_result_t res;
    cr_assert_eq(fold_model_predict(&ctx->model, w->select.topo, &q, &res), FOLD_OK);
    cr_expect(extrapolated > 0.8 * res.time_us && extrapolated < 1.25 * res.time_us,
              "dpml 512 KiB on 8x64: extrapolated %.1f us, replayed %.1f", extrapolated,
              res.time_us);
    fold_context_free_virtual(ctx);
}

Test(select_shapes, config_set_forgets_earlier_decisions)
{
    fold_context_t *ctx = virtual_ctx(1, 4);
    fold_choice_t c = choose(ctx, FOLD_COLL_ALLREDUCE, 1 << 20, FOLD_OP_SUM);
    cr_assert(c.alg->flags & FOLD_ALG_NODE_AWARE);
    cr_assert_eq(fold_config_set(ctx, "DPML_LEADERS", "3"), FOLD_OK);
    c = choose(ctx, FOLD_COLL_ALLREDUCE, 1 << 20, FOLD_OP_SUM);
    cr_expect_eq(c.leaders, 3, "a forced leader count applies to the next call");
    cr_assert_eq(fold_config_set(ctx, "ALLREDUCE_ALG", "ring"), FOLD_OK);
    cr_expect_eq(choose(ctx, FOLD_COLL_ALLREDUCE, 1 << 20, FOLD_OP_SUM).alg, &fold_alg_ring);
    cr_assert_eq(fold_config_set(ctx, "ALLREDUCE_ALG", "auto"), FOLD_OK);
    cr_assert_eq(fold_config_set(ctx, "MODEL", "shm_gbs=0.001"), FOLD_OK);
    c = choose(ctx, FOLD_COLL_ALLREDUCE, 1 << 20, FOLD_OP_SUM);
    cr_expect(c.alg->flags & FOLD_ALG_NODE_AWARE, "still the node-aware family");
    cr_expect_neq(fold_config_set(ctx, "MODEL", "shm_gbs=fast"), FOLD_OK);
    cr_expect_str_eq(ctx->config.model, "shm_gbs=0.001",
                     "a refused value leaves the old one");
    fold_context_free_virtual(ctx);
}

Test(select_shapes, shm_flat_is_reported_as_dpml_where_it_would_run_dpml)
{
    setenv("FOLD_ALLREDUCE_ALG", "shm_flat", 1);
    setenv("FOLD_SHM_SIZE", "64k", 1);
    fold_context_t *two_nodes = virtual_ctx(2, 2), *one_node = virtual_ctx(1, 4);
    unsetenv("FOLD_ALLREDUCE_ALG");
    unsetenv("FOLD_SHM_SIZE");
    cr_expect_eq(choose(one_node, FOLD_COLL_ALLREDUCE, 1024, FOLD_OP_SUM).alg,
                 &fold_alg_shm_flat, "one node, four rows of 1 KiB fit 64 KiB");
    cr_expect_eq(choose(one_node, FOLD_COLL_ALLREDUCE, 16384, FOLD_OP_SUM).alg,
                 &fold_alg_shm_flat, "four rows of 16 KiB fill 64 KiB exactly");
    fold_choice_t c = choose(one_node, FOLD_COLL_ALLREDUCE, 16388, FOLD_OP_SUM);
    cr_expect_eq(c.alg, &fold_alg_dpml, "four rows of 16 KiB + 4 B do not fit: %s",
                 c.alg->name);
    cr_expect_geq(c.leaders, 1, "the model picks dpml's leaders");
    cr_expect_eq(choose(two_nodes, FOLD_COLL_ALLREDUCE, 64, FOLD_OP_SUM).alg, &fold_alg_dpml,
                 "shm_flat spans one node only");
    cr_expect_str_eq(fold_selected_algorithm(two_nodes->world, "allreduce", 16, FOLD_FLOAT32),
                     "dpml");
    fold_context_free_virtual(two_nodes);
    fold_context_free_virtual(one_node);
}

Test(select_shapes, single_copy_only_where_the_node_allows_it)
{
    setenv("FOLD_REDUCE_ALG", "cma", 1);
    fold_context_t *one_node = virtual_ctx(1, 4), *two_nodes = virtual_ctx(2, 2);
    unsetenv("FOLD_REDUCE_ALG");
    cr_expect_eq(choose(one_node, FOLD_COLL_REDUCE, 1 << 20, FOLD_OP_SUM).alg, &fold_alg_cma,
                 "forced, on one node whose set-up has not run yet");
    cr_expect_eq(choose(two_nodes, FOLD_COLL_REDUCE, 1 << 20, FOLD_OP_SUM).alg, &fold_alg_dpml,
                 "single copy spans one node only");

    /* A node whose set-up found that the kernel refuses single copy. */
    fold_node_t *refused = calloc(1, sizeof(*refused));
    cr_assert_not_null(refused);
    one_node->world->node = refused;
    fold_select_cache_clear(one_node->world);
    fold_choice_t c = choose(one_node, FOLD_COLL_REDUCE, 1 << 20, FOLD_OP_SUM);
    cr_expect_eq(c.alg, &fold_alg_dpml, "chose %s where single copy is refused", c.alg->name);
    cr_expect_str_eq(fold_selected_algorithm(one_node->world, "reduce", 1 << 18, FOLD_FLOAT32),
                     "dpml");
    fold_context_free_virtual(one_node);
    fold_context_free_virtual(two_nodes);

    /* FOLD_SINGLE_COPY=off: never, even before the node's set-up. */
    setenv("FOLD_REDUCE_ALG", "cma", 1);
    setenv("FOLD_SINGLE_COPY", "off", 1);
    fold_context_t *off = virtual_ctx(1, 4);
    unsetenv("FOLD_REDUCE_ALG");
    unsetenv("FOLD_SINGLE_COPY");
    cr_expect_eq(choose(off, FOLD_COLL_REDUCE, 1 << 20, FOLD_OP_SUM).alg, &fold_alg_dpml);
    fold_context_free_virtual(off);
}

Test(select_shapes, single_copy_rate_decides_between_it_and_the_segment)
{
    /* The same one-node shape, once with single copy as fast as memory and once
     * crawling: the model must take it in the first case and never in the second. */
    setenv("FOLD_MODEL", "cma_gbs=200,cma_us=0.1", 1);
    fold_context_t *fast = virtual_ctx(1, 8);
    setenv("FOLD_MODEL", "cma_gbs=0.01,cma_us=50", 1);
    fold_context_t *slow = virtual_ctx(1, 8);
    unsetenv("FOLD_MODEL");
    cr_expect_eq(choose(fast, FOLD_COLL_REDUCE, 4 << 20, FOLD_OP_SUM).alg, &fold_alg_cma);
    cr_expect_eq(choose(fast, FOLD_COLL_ALLREDUCE, 4 << 20, FOLD_OP_SUM).alg, &fold_alg_cma);
    for (size_t bytes = 64; bytes <= (64u << 20); bytes *= 8) {
        cr_expect_neq(choose(slow, FOLD_COLL_REDUCE, bytes, FOLD_OP_SUM).alg, &fold_alg_cma,
                      "%zu B", bytes);
        cr_expect_neq(choose(slow, FOLD_COLL_ALLREDUCE, bytes, FOLD_OP_SUM).alg, &fold_alg_cma,
                      "%zu B", bytes);
    }
    fold_context_free_virtual(fast);
    fold_context_free_virtual(slow);
}

Test(select_shapes, single_copy_reduce_weighs_the_root_by_the_cost_of_writing_back)
{
    /* The owners of a single-copy reduce other than the root write their block into
     * the root's OUT through the kernel: where that costs as much as reading, the
     * model gives the root a larger block; an allreduce has no root to favour. */
    setenv("FOLD_MODEL", "cma_gbs=10,cma_us=0.5", 1);
    setenv("FOLD_REDUCE_ALG", "cma", 1);
    setenv("FOLD_ALLREDUCE_ALG", "cma", 1);
    fold_context_t *ctx = virtual_ctx(1, 2);
    unsetenv("FOLD_MODEL");
    unsetenv("FOLD_REDUCE_ALG");
    unsetenv("FOLD_ALLREDUCE_ALG");
    fold_choice_t r = choose(ctx, FOLD_COLL_REDUCE, 8 << 20, FOLD_OP_SUM);
    cr_expect_eq(r.alg, &fold_alg_cma);
    cr_expect_eq(r.leaders, 2);
    cr_expect_gt(r.root_weight, 100, "root weight %d", r.root_weight);
    fold_choice_t a = choose(ctx, FOLD_COLL_ALLREDUCE, 8 << 20, FOLD_OP_SUM);
    cr_expect_eq(a.root_weight, 0);
    fold_context_free_virtual(ctx);
}

/* Blocking shm_flat calls below the node's tiny limit run without the executor: the
 * model prices them so (fold_model_tiny), on one node only, and a choice says so. */
Test(select_shapes, tiny_path_below_the_node_limit_priced_without_executor_steps)
{
    fold_context_t *two = virtual_ctx(1, 2), *sixteen = virtual_ctx(1, 16);
    fold_context_t *nodes = virtual_ctx(2, 2);
    cr_expect_eq(fold_select_tiny_limit(two->world), 65536);
    cr_expect_eq(fold_select_tiny_limit(sixteen->world), 8192);
    cr_expect_eq(fold_select_tiny_limit(nodes->world), 0, "none across nodes");
    fold_choice_t c;
    cr_assert_eq(fold_select_topos(two->world), FOLD_OK);
    cr_assert_eq(fold_select_topos(sixteen->world), FOLD_OK);
    cr_assert_eq(fold_select_topos(nodes->world), FOLD_OK);
    static const size_t sizes[] = {8, 512, 32768, 65536, 65536 + 8, 131072};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        const size_t bytes = sizes[i];
        double us = fold_select_evaluate(two->world, FOLD_COLL_ALLREDUCE, &fold_alg_shm_flat,
                                         bytes, &c);
        cr_expect_eq(c.fast, bytes <= 65536, "%zu B", bytes);
        fold_choice_t scheduled = c;
        scheduled.fast = 0;
        double sched_us = fold_select_predict(two->world, two->world->select.topo,
                                              FOLD_COLL_ALLREDUCE, &scheduled, bytes);
        cr_expect(c.fast ? us < sched_us : us == sched_us, "%zu B: %g us, scheduled %g",
                  bytes, us, sched_us);
    }
    /* The tiny path polls every row's lines at once: 64 rows of 8 B are no 64 stream
     * starts (move_us each), and a 64-rank node serves them itself rather than leave
     * them to a flat algorithm's six rounds. */
    fold_context_t *wide = virtual_ctx(1, 64);
    int serve = -1;
    const char *source = NULL;
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        fold_choice_t w = choose(wide, coll, 8, FOLD_OP_SUM);
        cr_expect(w.alg == &fold_alg_shm_flat && w.fast, "1x64 %s 8 B: %s (fast %d)",
                  fold_coll_name(coll), w.alg->name, w.fast);
        cr_assert_eq(fold_serve_advice(wide->world, fold_coll_name(coll), 8, &serve, &source),
                     FOLD_OK);
        cr_expect_eq(serve, 1, "1x64 %s 8 B: fold serves", fold_coll_name(coll));
    }
    fold_context_free_virtual(wide);
    fold_select_evaluate(sixteen->world, FOLD_COLL_REDUCE, &fold_alg_shm_flat, 8192, &c);
    cr_expect_eq(c.fast, 1, "16 ranks: 8 KiB is the limit, served");
    fold_select_evaluate(sixteen->world, FOLD_COLL_REDUCE, &fold_alg_shm_flat, 8192 + 8, &c);
    cr_expect_eq(c.fast, 0, "16 ranks: above the limit");
    fold_select_evaluate(nodes->world, FOLD_COLL_REDUCE, &fold_alg_shm_flat, 64, &c);
    cr_expect_eq(c.fast, 0);
    fold_context_free_virtual(two);
    fold_context_free_virtual(sixteen);
    fold_context_free_virtual(nodes);

    /* An executor that costs 5 us a step: up to the limit the tiny path wins whatever
     * the other algorithms' data costs; above it shm_flat pays its steps too. */
    setenv("FOLD_MODEL", "step_us=5", 1);
    fold_context_t *slow = virtual_ctx(1, 2);
    unsetenv("FOLD_MODEL");
    for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
        fold_choice_t tiny = choose(slow, coll, 16384, FOLD_OP_SUM);
        cr_expect(tiny.alg == &fold_alg_shm_flat && tiny.fast, "%s 16 KiB: %s (fast %d)",
                  fold_coll_name(coll), tiny.alg->name, tiny.fast);
        cr_expect_eq(choose(slow, coll, 65536 + 8, FOLD_OP_SUM).fast, 0);
    }
    fold_context_free_virtual(slow);
}

/* Adopting a buffer pays at the pass where the calls on the heap have lost its price
 * (ski rental): 90 us saved per call against 2.2 ms of copying and faulting pages in
 * (1 MiB allreduce here) waits for the 26th pass; a buffer used twice never pays. */
Test(select_adopt, break_even_pass_of_ski_rental)
{
    cr_expect_eq(fold_select_break_even_passes(90, 2200), 26);
    cr_expect_eq(fold_select_break_even_passes(90, 90), 2, "paid by the first call");
    cr_expect_eq(fold_select_break_even_passes(1000, 10), 2, "the second pass at the earliest");
    cr_expect_eq(fold_select_break_even_passes(0, 10), 0, "nothing gained: never");
    cr_expect_eq(fold_select_break_even_passes(-5, 10), 0);
    cr_expect_eq(fold_select_break_even_passes(1e-9, 1e9), 0, "not within a million passes");
    cr_expect_eq(fold_select_break_even_passes(10, INFINITY), 0);
    /* A buffer used twice: adopted only where one call's saving pays for it all. */
    cr_expect_gt(fold_select_break_even_passes(40, 2200), 2);
}

/* An adoption that costs many calls' time is spread over as many calls, none paying
 * more than its own predicted time for it. */
Test(select_adopt, adoption_steps_bound_what_a_call_pays)
{
    cr_expect_eq(fold_select_adopt_steps_for(3000, 37000), 13);
    cr_expect_eq(fold_select_adopt_steps_for(3000, 3000), 1, "one call's worth: all at once");
    cr_expect_eq(fold_select_adopt_steps_for(3000, 500), 1);
    cr_expect_eq(fold_select_adopt_steps_for(1, 1e9), FOLD_SELECT_ADOPT_MAX_STEPS);
    cr_expect_eq(fold_select_adopt_steps_for(0, 100), 1, "no prediction: all at once");
    cr_expect_eq(fold_select_adopt_steps_for(100, INFINITY), 1);
}
