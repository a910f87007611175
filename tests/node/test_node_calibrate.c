/*
 * What fold_init measures of the node (node/calibrate.c) and how it reaches the cost
 * model (fold_context_set_measured): every rate present and plausible, single copy
 * exactly where the kernel allows it, and the measured string read back as model
 * parameters; a process measures once, whichever of its threads asks first. No speed
 * is asserted: the machine is shared.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "context.h"
#include "node/node.h"
#include "codec/reduce_kernel.h"

#include <fold/fold_status.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static int kernel_allows_single_copy(void)
{
    char src[64] = {1}, dst[64];
    struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(dst);
}

/* A rate a real machine could have: more than 0.1 GB/s, less than 10 TB/s. */
static int plausible(double gbs)
{
    return isfinite(gbs) && gbs > 0.1 && gbs < 1e4;
}

Test(node_calibrate, measures_every_rate_and_single_copy_where_allowed)
{
    fold_node_calib_t c;
    fold_node_calibrate(&c);
    cr_expect(plausible(c.copy_gbs), "copy %g GB/s", c.copy_gbs);
    cr_expect(plausible(c.reduce_gbs), "reduce %g GB/s", c.reduce_gbs);
#if defined(__x86_64__) || defined(__aarch64__)
    cr_expect(plausible(c.copy_mem_gbs), "copy from memory %g GB/s", c.copy_mem_gbs);
    cr_expect(plausible(c.reduce_mem_gbs), "reduce from memory %g GB/s", c.reduce_mem_gbs);
#endif
    /* The core's own cache: as the system reports it, where that is plausible, with
     * its rates measured within it; nothing where it is not. */
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 >= 128 * 1024 && l2 <= 4 * 1024 * 1024) {
        cr_expect_float_eq(c.l2_bytes, (double)l2, 1e-9);
        cr_expect(plausible(c.copy_l2_gbs), "copy within the L2 %g GB/s", c.copy_l2_gbs);
        cr_expect(plausible(c.reduce_l2_gbs), "reduce within the L2 %g GB/s",
                  c.reduce_l2_gbs);
    } else {
        cr_expect_eq(c.l2_bytes, 0);
        cr_expect_eq(c.copy_l2_gbs, 0);
        cr_expect_eq(c.reduce_l2_gbs, 0);
    }
    /* The loops of in-cache reductions, ordinary and streamed, where the CPU streams,
     * over the three 1 MiB buffers. */
    if (fold_reduce_stream_available(FOLD_OP_SUM, FOLD_FLOAT32)) {
        cr_expect(plausible(c.reduce_loop_gbs), "loop %g GB/s", c.reduce_loop_gbs);
        cr_expect(plausible(c.reduce_loop_stream_gbs), "loop streamed %g GB/s",
                  c.reduce_loop_stream_gbs);
        cr_expect_float_eq(c.rounds_bytes, 3 * 1048576.0, 1e-9);
    }
    cr_expect_eq(c.single_copy, kernel_allows_single_copy());
    if (c.single_copy) {
        cr_expect(plausible(c.cma_gbs), "single copy %g GB/s", c.cma_gbs);
        cr_expect(c.cma_us > 0 && c.cma_us < 1e4, "single copy %g us per call", c.cma_us);
#if defined(__x86_64__) || defined(__aarch64__)
        /* out of cache: slowed as memcpy slows */
        if (c.copy_gbs > c.copy_mem_gbs) {
            cr_expect_float_eq(c.cma_mem_gbs, c.cma_gbs * c.copy_mem_gbs / c.copy_gbs, 1e-9);
        }
#endif
    }
}

/* Whether this kernel backs a region with a huge page when asked (node/huge.c). */
static int kernel_collapses(void)
{
    const size_t page = fold_node_huge_page_bytes();
    if (page < ((size_t)1 << 20) || page > ((size_t)4 << 20)) {
        return 0;
    }
    char *raw = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    cr_assert_neq(raw, MAP_FAILED);
    char *huge = (char *)(((uintptr_t)raw + page - 1) & ~(uintptr_t)(page - 1));
    memset(huge, 1, page);
    int ok = fold_node_huge_collapse(huge, page) == 0;
    munmap(raw, 2 * page);
    return ok;
}

Test(node_calibrate, measures_the_kernels_copy_from_huge_pages_where_it_makes_them)
{
    fold_node_calib_t c;
    fold_node_calibrate(&c);
    int expected = c.single_copy && c.copy_mem_gbs > 0 && kernel_collapses();
    if (expected) {
        cr_expect(plausible(c.cma_huge_mem_gbs), "from huge pages %g GB/s",
                  c.cma_huge_mem_gbs);
    } else {
        cr_expect_eq(c.cma_huge_mem_gbs, 0);
    }
}

/* Measured twice, the figures would differ in their low bits. */
#define THREADS 6

static void *calibrate_thread(void *arg)
{
    fold_node_calibrate(arg);
    return NULL;
}

Test(node_calibrate, a_process_measures_once)
{
    fold_node_calib_t first, again, each[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(pthread_create(&t[i], NULL, calibrate_thread, &each[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    }
    fold_node_calibrate(&first);
    fold_node_calibrate(&again);
    cr_expect(plausible(first.copy_gbs), "copy %g GB/s", first.copy_gbs);
    cr_expect_eq(memcmp(&first, &again, sizeof(first)), 0, "a second call measured again");
    for (int i = 0; i < THREADS; i++) {
        cr_expect_eq(memcmp(&first, &each[i], sizeof(first)), 0,
                     "thread %d got figures of its own", i);
    }
}

static fold_context_t *virtual_context(void)
{
    int node_of[2] = {0, 0};
    fold_context_t *ctx;
    cr_assert_eq(fold_context_create_virtual(2, node_of, &ctx), FOLD_OK);
    return ctx;
}

Test(node_calibrate, measured_values_become_the_models_parameters)
{
    fold_context_t *ctx = virtual_context();
    fold_node_calib_t c = {.copy_gbs = 80, .reduce_gbs = 45, .copy_mem_gbs = 22,
                           .reduce_mem_gbs = 15, .single_copy = 1, .cma_gbs = 17,
                           .cma_mem_gbs = 4.675, .cma_us = 0.9, .l2_bytes = 2097152,
                           .copy_l2_gbs = 95.5, .reduce_l2_gbs = 60};
    fold_context_set_measured(ctx, &c);
    cr_expect_str_eq(ctx->measured,
                     "copy_gbs=80,l2_bytes=2097152,copy_l2_gbs=95.5,reduce_l2_gbs=60,"
                     "shm_gbs=80,reduce_gbs=45,shm_reduce_gbs=45,shm_write_gbs=80,"
                     "shm_fold_gbs=45,shm_fold_far_gbs=45,copy_mem_gbs=22,reduce_mem_gbs=15,"
                     "cma_gbs=17,cma_mem_gbs=4.675,cma_us=0.9");
    cr_assert_eq(fold_select_configure(ctx), FOLD_OK);
    cr_expect_float_eq(ctx->model.l2_bytes, 2097152, 1e-9);
    cr_expect_float_eq(ctx->model.copy_l2_gbs, 95.5, 1e-9);
    cr_expect_float_eq(ctx->model.reduce_l2_gbs, 60, 1e-9);
    cr_expect_float_eq(ctx->model.shm_gbs, 80, 1e-9);
    cr_expect_float_eq(ctx->model.copy_mem_gbs, 22, 1e-9);
    cr_expect_float_eq(ctx->model.cma_gbs, 17, 1e-9);
    cr_expect_float_eq(ctx->model.cma_mem_gbs, 4.675, 1e-9);
    fold_context_free_virtual(ctx);
}

/* With FOLD_HUGE_PAGES on, the kernel's out-of-cache rate is the one measured from
 * huge pages (the buffers it copies are backed so); off, the estimate. */
Test(node_calibrate, huge_pages_give_the_kernels_rate_from_memory)
{
    fold_context_t *ctx = virtual_context();
    fold_node_calib_t c = {.copy_gbs = 80, .single_copy = 1, .cma_gbs = 17,
                           .cma_mem_gbs = 3.5, .cma_huge_mem_gbs = 6.25, .cma_us = 0.9};
    ctx->config.huge_pages = 1;
    fold_context_set_measured(ctx, &c);
    cr_expect_str_eq(ctx->measured, "copy_gbs=80,shm_gbs=80,shm_write_gbs=80,cma_gbs=17,"
                                    "cma_mem_gbs=6.25,cma_us=0.9");
    ctx->config.huge_pages = 0;
    fold_context_set_measured(ctx, &c);
    cr_expect_str_eq(ctx->measured, "copy_gbs=80,shm_gbs=80,shm_write_gbs=80,cma_gbs=17,"
                                    "cma_mem_gbs=3.5,cma_us=0.9");
    c.cma_huge_mem_gbs = 0;   /* no huge page was had */
    ctx->config.huge_pages = 1;
    fold_context_set_measured(ctx, &c);
    cr_expect_str_eq(ctx->measured, "copy_gbs=80,shm_gbs=80,shm_write_gbs=80,cma_gbs=17,"
                                    "cma_mem_gbs=3.5,cma_us=0.9");
    fold_context_free_virtual(ctx);
}

Test(node_calibrate, no_single_copy_keeps_the_defaults_for_it)
{
    fold_context_t *ctx = virtual_context();
    fold_model_params_t defaults;
    fold_model_defaults(&defaults);
    fold_node_calib_t c = {.copy_gbs = 50, .cma_gbs = 99, .cma_mem_gbs = 99, .cma_us = 9};
    fold_context_set_measured(ctx, &c);
    cr_expect_str_eq(ctx->measured, "copy_gbs=50,shm_gbs=50,shm_write_gbs=50");
    cr_assert_eq(fold_select_configure(ctx), FOLD_OK);
    cr_expect_float_eq(ctx->model.cma_gbs, defaults.cma_gbs, 1e-9);
    cr_expect_float_eq(ctx->model.cma_mem_gbs, defaults.cma_mem_gbs, 1e-9);
    cr_expect_float_eq(ctx->model.reduce_gbs, defaults.reduce_gbs, 1e-9);
    fold_context_free_virtual(ctx);
}

/* Where large calls stream their results from (FOLD_STREAM=auto): from the L2's size
 * where a loop of reductions over more than the L2 ran faster streamed; else from the
 * last-level cache over the node's ranks where only the reduction from memory did;
 * never where neither did. FOLD_STREAM_MIN and FOLD_STREAM=on|off come first. */
Test(node_calibrate, results_stream_from_where_the_calibration_found_it_faster)
{
    fold_context_t *ctx = virtual_context();
    ctx->local_size = 2;
    ctx->model.cache_bytes = 32.0 * 1048576;
    fold_node_calib_t past_l2 = {.l2_bytes = 2097152, .rounds_bytes = 3 * 1048576.0,
                                 .reduce_loop_gbs = 8, .reduce_loop_stream_gbs = 11,
                                 .reduce_mem_gbs = 4, .reduce_stream_gbs = 5};
    ctx->calib = past_l2;
    cr_expect_eq(fold_context_stream_min(ctx), 2097152, "past the L2");
    ctx->calib.reduce_loop_stream_gbs = 8.2;   /* within STREAM_GAIN */
    cr_expect_eq(fold_context_stream_min(ctx), 16 * 1048576, "from memory only");
    ctx->calib = past_l2;
    ctx->calib.l2_bytes = 4194304;   /* the loops stayed in the L2: they tell nothing */
    cr_expect_eq(fold_context_stream_min(ctx), 16 * 1048576);
    ctx->calib.l2_bytes = 0;         /* unknown L2 */
    cr_expect_eq(fold_context_stream_min(ctx), 16 * 1048576);
    ctx->calib = past_l2;
    ctx->calib.reduce_stream_gbs = 4.1;
    cr_expect_eq(fold_context_stream_min(ctx), 2097152, "the loops alone decide");
    ctx->calib.reduce_loop_stream_gbs = 7;
    cr_expect_eq(fold_context_stream_min(ctx), SIZE_MAX, "faster nowhere: never");
    ctx->config.stream = FOLD_STREAM_ON;
    cr_expect_eq(fold_context_stream_min(ctx), 16 * 1048576, "on: from the cache's share");
    ctx->calib = past_l2;
    ctx->config.stream = FOLD_STREAM_OFF;
    cr_expect_eq(fold_context_stream_min(ctx), SIZE_MAX, "off");
    ctx->config.stream = FOLD_STREAM_AUTO;
    ctx->config.stream_min = 12345;
    cr_expect_eq(fold_context_stream_min(ctx), 12345, "FOLD_STREAM_MIN");
    fold_context_free_virtual(ctx);
}
