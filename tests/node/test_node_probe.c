/*
 * What the world's node setup measures of two cores (node/probe.c) and how it
 * reaches the model (fold_context_set_cores): measured by a real pair of ranks on
 * one node, plausible, the same on every rank, under the tuning file and FOLD_MODEL,
 * and skipped where the segment has no room. No speed is asserted.
 */
#include "loopback_harness.h"

#include "context.h"

#include <criterion/criterion.h>
#include <fold/fold.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RANKS 3

typedef struct seen {
    fold_model_params_t model[RANKS];
    int                 probed[RANKS];
    double              calib_flag_us[RANKS];
    double              calib_xcma_gbs[RANKS];
    int                 single_copy[RANKS];
    char                measured[RANKS][512];
} seen_t;

static int one_call(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)size;
    seen_t *s = arg;
    int in[4096], out[4096];
    for (int i = 0; i < 4096; i++) {
        in[i] = rank;
    }
    int bad = fold_config_set(ctx, "ALLREDUCE_ALG", "dpml") != FOLD_OK;
    bad |= fold_allreduce(in, out, 4096, FOLD_INT32, FOLD_OP_SUM, fold_comm_world(ctx)) !=
           FOLD_OK;
    bad |= out[4095] != 0 + 1 + 2;
    s->model[rank]  = ctx->model;
    s->probed[rank] = ctx->cores_probed;
    s->calib_flag_us[rank] = ctx->calib.flag_us;
    s->calib_xcma_gbs[rank] = ctx->calib.xcma_gbs;
    s->single_copy[rank]    = ctx->calib.single_copy;
    snprintf(s->measured[rank], sizeof(s->measured[rank]), "%s", ctx->measured);
    return bad;
}

static int plausible(double gbs)
{
    return isfinite(gbs) && gbs > 0.1 && gbs < 1e4;
}

Test(node_probe, two_cores_measured_once_and_alike_on_every_rank)
{
    seen_t s = {0};
    setenv("FOLD_SHM_SIZE", "4M", 1);   /* (the world's node setup runs in fold_init) */
    /* The probe gives up after 50 ms, as it should where 3 ranks share 2 cores and
     * the scheduler decides (CI under ASan did once): a few tries must measure. */
    for (int attempt = 0; attempt < 5; attempt++) {
        memset(&s, 0, sizeof(s));
        cr_assert_eq(lh_run(RANKS, one_call, &s), 0);
        for (int r = 0; r < RANKS; r++) {
            cr_expect_eq(s.probed[r], 1);
            cr_expect_str_eq(s.measured[r], s.measured[0], "rank %d", r);
            cr_expect_eq(memcmp(&s.model[r], &s.model[0], sizeof(s.model[0])), 0, "rank %d",
                         r);
        }
        if (s.calib_flag_us[0] > 0 && (s.calib_xcma_gbs[0] > 0 || !s.single_copy[0])) {
            break;
        }
    }
    cr_expect(s.calib_flag_us[0] > 0 && s.calib_flag_us[0] < 1e4, "flag %g us",
              s.calib_flag_us[0]);
    cr_expect(plausible(s.model[0].shm_gbs), "%g", s.model[0].shm_gbs);
    cr_expect(plausible(s.model[0].shm_reduce_gbs), "%g", s.model[0].shm_reduce_gbs);
    cr_expect(plausible(s.model[0].shm_write_gbs), "%g", s.model[0].shm_write_gbs);
    cr_expect(plausible(s.model[0].shm_fold_gbs), "%g", s.model[0].shm_fold_gbs);
    cr_expect(plausible(s.model[0].shm_fold_far_gbs), "%g", s.model[0].shm_fold_far_gbs);
    /* The kernel's copy across the cores, where this process may use it; then the
     * model's single-copy rate is that one. */
    if (s.single_copy[0]) {
        cr_expect(plausible(s.calib_xcma_gbs[0]), "%g", s.calib_xcma_gbs[0]);
        cr_expect_float_eq(s.model[0].cma_gbs, s.calib_xcma_gbs[0],
                           1e-3 * s.calib_xcma_gbs[0], "cma_gbs %g, probed %g",
                           s.model[0].cma_gbs, s.calib_xcma_gbs[0]);
    }
}


/* 16 KiB of segment cannot hold the probe's 64 KiB: the calibration's rates stay. */
Test(node_probe, no_room_in_the_segment_keeps_the_fallbacks)
{
    seen_t s = {0};
    setenv("FOLD_SHM_SIZE", "16k", 1);
    cr_assert_eq(lh_run(RANKS, one_call, &s), 0);
    for (int r = 0; r < RANKS; r++) {
        cr_expect_eq(s.probed[r], 1);
        cr_expect_eq(s.calib_flag_us[r], 0);
        cr_expect_float_eq(s.model[r].shm_gbs, s.model[r].copy_gbs, 1e-9, "copies stand in");
        cr_expect_float_eq(s.model[r].shm_reduce_gbs, s.model[r].reduce_gbs, 1e-9);
        cr_expect_float_eq(s.model[r].shm_write_gbs, s.model[r].copy_gbs, 1e-9);
        cr_expect_float_eq(s.model[r].shm_fold_gbs, s.model[r].reduce_gbs, 1e-9);
        cr_expect_float_eq(s.model[r].shm_fold_far_gbs, s.model[r].reduce_gbs, 1e-9);
    }
}

/* 1 MiB of segment holds the 64 KiB rows but not the 1 MiB ones: the far fold
 * takes the near one's rate. */
Test(node_probe, no_room_for_the_far_rows_keeps_the_near_rate)
{
    seen_t s = {0};
    setenv("FOLD_SHM_SIZE", "1M", 1);
    cr_assert_eq(lh_run(RANKS, one_call, &s), 0);
    for (int r = 0; r < RANKS; r++) {
        cr_expect(plausible(s.model[r].shm_fold_gbs), "%g", s.model[r].shm_fold_gbs);
        cr_expect_float_eq(s.model[r].shm_fold_far_gbs, s.model[r].shm_fold_gbs, 1e-9);
    }
}

static double defaults_flag_us(void)
{
    fold_model_params_t d;
    fold_model_defaults(&d);
    return d.flag_us;
}

static fold_context_t *virtual_context(void)
{
    int node_of[4] = {0, 0, 1, 1};
    fold_context_t *ctx;
    cr_assert_eq(fold_context_create_virtual(4, node_of, &ctx), FOLD_OK);
    return ctx;
}

/* The medians of what was measured (zeros are ranks that did not), FOLD_MODEL on top. */
Test(node_probe, medians_of_the_measuring_ranks_under_fold_model)
{
    fold_context_t *ctx = virtual_context();
    fold_node_calib_t base = {.copy_gbs = 80, .reduce_gbs = 45};
    fold_context_set_measured(ctx, &base);
    ctx->calib = base;
    fold_node_calib_t all[4] = {
        {.copy_gbs = 0},
        {.xcopy_gbs = 40, .xreduce_gbs = 30, .xwrite_gbs = 50, .xfold_gbs = 44, .xfold_far_gbs = 28,
         .flag_us = 0.2},
        {.copy_gbs = 0},
        {.xcopy_gbs = 60, .xreduce_gbs = 34, .xwrite_gbs = 70, .xfold_gbs = 48, .xfold_far_gbs = 32,
         .flag_us = 0.05}};
    cr_assert_eq(fold_context_set_cores(ctx, all, 4), FOLD_OK);
    cr_expect_float_eq(ctx->model.shm_gbs, 50, 1e-9);
    cr_expect_float_eq(ctx->model.shm_reduce_gbs, 32, 1e-9);
    cr_expect_float_eq(ctx->model.shm_write_gbs, 60, 1e-9);
    cr_expect_float_eq(ctx->model.shm_fold_gbs, 46, 1e-9);
    cr_expect_float_eq(ctx->model.shm_fold_far_gbs, 30, 1e-9);
    cr_expect_float_eq(ctx->calib.flag_us, 0.125, 1e-9);
    cr_expect_float_eq(ctx->model.flag_us, defaults_flag_us(), 1e-9, "logged, not costed");
    cr_expect_float_eq(ctx->model.copy_gbs, 80, 1e-9);
    cr_expect_str_eq(ctx->measured, "copy_gbs=80,shm_gbs=50,reduce_gbs=45,shm_reduce_gbs=32,"
                                    "shm_write_gbs=60,shm_fold_gbs=46,shm_fold_far_gbs=30");
    fold_context_free_virtual(ctx);

    setenv("FOLD_MODEL", "shm_gbs=7", 1);
    ctx = virtual_context();
    unsetenv("FOLD_MODEL");
    cr_assert_eq(fold_context_set_cores(ctx, all, 4), FOLD_OK);
    cr_expect_float_eq(ctx->model.shm_gbs, 7, 1e-9, "FOLD_MODEL has the last word");
    cr_expect_float_eq(ctx->model.shm_reduce_gbs, 32, 1e-9);
    fold_context_free_virtual(ctx);
}

/* Single copy's rate in the model: the probe's kernel copy across the cores where it
 * measured one, else the calibration's own-memory rate slowed as memcpy slowed across
 * the cores; without single copy, none. */
Test(node_probe, single_copy_takes_the_probed_kernel_rate)
{
    fold_node_calib_t base = {.copy_gbs = 24, .reduce_gbs = 12, .single_copy = 1,
                              .cma_gbs = 13, .cma_us = 0.6};
    fold_node_calib_t probed[4] = {{.copy_gbs = 0},
                                   {.xcopy_gbs = 12, .xcma_gbs = 11},
                                   {.copy_gbs = 0},
                                   {.xcopy_gbs = 12, .xcma_gbs = 13}};
    fold_context_t *ctx = virtual_context();
    ctx->calib = base;
    cr_assert_eq(fold_context_set_cores(ctx, probed, 4), FOLD_OK);
    cr_expect_float_eq(ctx->model.cma_gbs, 12, 1e-9, "the median of 11 and 13");
    fold_context_free_virtual(ctx);

    for (int r = 0; r < 4; r++) {
        probed[r].xcma_gbs = 0;   /* the kernel refused, or an older probe */
    }
    ctx = virtual_context();
    ctx->calib = base;
    cr_assert_eq(fold_context_set_cores(ctx, probed, 4), FOLD_OK);
    cr_expect_float_eq(ctx->model.cma_gbs, 13.0 * 12 / 24, 1e-9, "scaled as memcpy");
    fold_context_free_virtual(ctx);
}
