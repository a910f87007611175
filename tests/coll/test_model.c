/*
 * The cost model (model.h): hand-made schedules whose times are worked out below
 * with round parameters (messages, eager and rendezvous, the CPU timeline, cache
 * and memory rates, link contention, shm flags), mismatched schedules, every
 * algorithm on one and several nodes, large shapes, determinism, the link bound of
 * a bandwidth-bound allreduce, and the parameter parser.
 */
#include <criterion/criterion.h>

#include "coll/exec_plan.h"
#include "coll/model.h"
#include "node/topo.h"
#include "test_reduced.h"

#include <fold/fold_status.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EPS 1e-9

/* Round numbers, so the expected times below are easy to follow:
 *   every step 1 us of its rank's CPU, flags seen 2 us after their post;
 *   within a node 3 us + 1000 B/us, between nodes 5 us + 500 B/us;
 *   copies 2000 B/us in cache, 1000 B/us out; reductions 4000 / 500 B/us. */
static fold_model_params_t round_params(void)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    p.step_us        = 1;
    p.flag_us        = 2;
    p.intra_lat_us   = 3;
    p.intra_gbs      = 1;
    p.inter_lat_us   = 5;
    p.inter_gbs      = 0.5;
    p.nics           = 1;
    p.eager_bytes    = 1000;
    p.copy_gbs       = 2;
    p.copy_mem_gbs   = 1;
    p.reduce_gbs     = 4;
    p.reduce_mem_gbs = 0.5;
    p.node_mem_gbs   = 100;
    p.cache_bytes    = 1e6;
    p.move_us        = 0;   /* its own test: a_copy_or_reduction_pays_its_start */
    return p;
}

static fold_topo_t *topo_from_keys(int size, const int *key)
{
    int *pkg = calloc((size_t)size, sizeof(int));
    fold_topo_t *t = NULL;
    cr_assert_not_null(pkg);
    cr_assert_eq(fold_topo_build(size, key, pkg, &t), FOLD_OK);
    free(pkg);
    return t;
}

/* Ranks in blocks of ppn per node (the last node may hold fewer). */
static fold_topo_t *topo_blocks(int size, int ppn)
{
    int *key = malloc((size_t)size * sizeof(int));
    cr_assert_not_null(key);
    for (int r = 0; r < size; r++) {
        key[r] = r / ppn;
    }
    fold_topo_t *t = topo_from_keys(size, key);
    free(key);
    return t;
}

/* ---- hand-made schedules ------------------------------------------------------- */

#define HAND_MAX 8

typedef struct hand {
    int           size;
    fold_topo_t  *topo;
    fold_sched_t  s[HAND_MAX];
    fold_sched_t *ps[HAND_MAX];
} hand_t;

static void hand_init_coll(hand_t *h, int size, const int *node_key, fold_coll_t coll,
                           int root)
{
    cr_assert_leq(size, HAND_MAX);
    h->size = size;
    h->topo = topo_from_keys(size, node_key);
    for (int r = 0; r < size; r++) {
        fold_coll_args_t a = {.coll = coll, .rank = r, .size = size, .root = root,
                              .count = 1, .seg_count = 1, .depth = 1, .commutative = 1};
        fold_sched_init(&h->s[r], &a);
        h->ps[r] = &h->s[r];
    }
}

static void hand_init(hand_t *h, int size, const int *node_key)
{
    hand_init_coll(h, size, node_key, FOLD_COLL_ALLREDUCE, 0);
}

static int hand_replay(hand_t *h, const fold_model_params_t *p, fold_model_result_t *res)
{
    for (int r = 0; r < h->size; r++) {
        cr_assert_eq(fold_sched_finalize(&h->s[r]), FOLD_OK);
    }
    return fold_model_replay(p, h->topo, h->ps, 4, res);   /* 4-byte elements */
}

static void hand_free(hand_t *h)
{
    for (int r = 0; r < h->size; r++) {
        fold_sched_cleanup(&h->s[r]);
    }
    fold_topo_free(h->topo);
}

/* Replays h under p, frees it, and returns the predicted time. */
static double hand_time(hand_t *h, const fold_model_params_t *p)
{
    fold_model_result_t res;
    cr_assert_eq(hand_replay(h, p, &res), FOLD_OK);
    hand_free(h);
    return res.time_us;
}

/* One message of `count` floats from rank 0 to rank 1; the time it predicts. */
static double one_message(const int *keys, size_t count)
{
    fold_model_params_t p = round_params();
    hand_t h;
    fold_model_result_t res;
    hand_init(&h, 2, keys);
    fold_sched_send(&h.s[0], 1, fold_ref_in(0), count);
    fold_sched_recv(&h.s[1], 0, fold_ref_out(0), count);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_eq(res.steps, 2);
    cr_expect_float_eq(res.root_us, res.time_us, EPS);
    hand_free(&h);
    return res.time_us;
}

Test(model_hand, one_message_within_and_between_nodes)
{
    /* 400 bytes (eager): posted after 1 us of CPU, then 3 + 400/1000 within a node
     * and 5 + 400/500 between nodes. */
    int one_node[2] = {0, 0}, two_nodes[2] = {0, 1};
    cr_expect_float_eq(one_message(one_node, 100), 1 + 3 + 0.4, EPS);
    cr_expect_float_eq(one_message(two_nodes, 100), 1 + 5 + 0.8, EPS);
    /* A signal is a message of no bytes. */
    fold_model_params_t p = round_params();
    hand_t h;
    fold_model_result_t res;
    hand_init(&h, 2, two_nodes);
    fold_sched_signal(&h.s[0], 1);
    fold_sched_wait_signal(&h.s[1], 0);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.time_us, 1 + 5, EPS);
    hand_free(&h);
}

/* Rank 1 copies 40000 bytes (1 + 20 us) into the buffer it then receives 8000
 * bytes into, so its receive is posted at 22. */
static double late_receiver(double eager_bytes)
{
    fold_model_params_t p = round_params();
    p.eager_bytes = eager_bytes;
    int keys[2] = {0, 0};
    hand_t h;
    hand_init(&h, 2, keys);
    fold_sched_send(&h.s[0], 1, fold_ref_in(0), 2000);
    fold_sched_copy(&h.s[1], fold_ref_in(0), fold_ref_tmp(0), 10000);
    fold_sched_recv(&h.s[1], 0, fold_ref_tmp(0), 2000);
    return hand_time(&h, &p);
}

Test(model_hand, eager_moves_at_once_rendezvous_waits_for_the_receive)
{
    /* Rendezvous: the data moves from 22, arrives at 22 + 3 + 8 = 33. */
    cr_expect_float_eq(late_receiver(1000), 33, EPS);
    /* Eager: it is ready to move from 1, but rank 1's core, which copies it in, is
     * busy with its own copy until 21: [21, 29], arriving at 29 + 3 = 32; the receive,
     * posted after that core is free (29 + 1), completes at the arrival. */
    cr_expect_float_eq(late_receiver(1e6), 32, EPS);
}

Test(model_hand, reduce_reports_the_root)
{
    /* Rank 1 sends 400 bytes to the root ([0,1], arriving at 4.4), then copies
     * 40000 bytes ([1,22]): the root is done at 4.4, the collective at 22. */
    int keys[2] = {0, 0};
    fold_model_params_t p = round_params();
    hand_t h;
    fold_model_result_t res;
    hand_init_coll(&h, 2, keys, FOLD_COLL_REDUCE, 0);
    fold_sched_recv(&h.s[0], 1, fold_ref_out(0), 100);
    fold_sched_send(&h.s[1], 0, fold_ref_in(0), 100);
    fold_sched_copy(&h.s[1], fold_ref_in(0), fold_ref_tmp(0), 10000);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.root_us, 4.4, EPS);
    cr_expect_float_eq(res.time_us, 22, EPS);
    hand_free(&h);
}

Test(model_hand, soft_waits_are_dropped_for_dense_data)
{
    /* Rank 0 sends 20000 bytes to rank 1 on another node (rendezvous: it moves at
     * 2, once rank 1 posts, holds the link until 42 and arrives at 47), receives
     * 40 bytes from rank 1 (arriving at 6.08) and answers with 40 bytes derived from
     * them. The executor's plan makes the answer wait softly for the big send; with
     * dense data the executor drops that wait, so the answer is posted at 8.1, queues
     * for the link until 42 and arrives at 47.08 (waiting would have made it 53.08). */
    int keys[2] = {0, 1};
    fold_model_params_t p = round_params();
    hand_t h;
    fold_model_result_t res;
    hand_init(&h, 2, keys);
    fold_sched_send(&h.s[0], 1, fold_ref_in(0), 5000);
    fold_sched_recv(&h.s[0], 1, fold_ref_tmp(0), 10);
    fold_sched_copy(&h.s[0], fold_ref_tmp(0), fold_ref_out(0), 10);
    fold_sched_send(&h.s[0], 1, fold_ref_out(0), 10);
    fold_sched_send(&h.s[1], 0, fold_ref_in(0), 10);
    fold_sched_recv(&h.s[1], 0, fold_ref_tmp(0), 5000);
    fold_sched_recv(&h.s[1], 0, fold_ref_tmp(5000), 10);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    fold_remote_nodes_t remote;
    fold_wire_plan_t plan;
    cr_assert_eq(fold_wire_plan_build(&plan, &h.s[0], fold_remote_nodes(&remote, keys, 0)),
                 FOLD_OK);
    cr_assert_eq(plan.nsoft, 1, "the executor's answer waits softly");
    cr_assert_eq(plan.steps[3].soft, 0);
    fold_wire_plan_free(&plan);
    cr_expect_float_eq(res.time_us, 47.08, EPS);
    hand_free(&h);
}

Test(model_hand, local_steps_share_the_cpu_in_ready_order)
{
    /* Three dependent copies of 4000 bytes (1 + 2 us each) and an independent one:
     * 0 runs [0,3], 3 (also ready at 0) [3,6], 1 (ready at 3) [6,9], 2 [9,12]. */
    int keys[1] = {0};
    fold_model_params_t p = round_params();
    hand_t h;
    fold_model_result_t res;
    hand_init(&h, 1, keys);
    fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), 1000);
    fold_sched_copy(&h.s[0], fold_ref_tmp(0), fold_ref_tmp(1000), 1000);
    fold_sched_copy(&h.s[0], fold_ref_tmp(1000), fold_ref_out(0), 1000);
    fold_sched_copy(&h.s[0], fold_ref_in(1000), fold_ref_tmp(5000), 1000);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.time_us, 12, EPS);
    cr_expect_eq(res.steps, 4);
    hand_free(&h);
}

Test(model_hand, a_copy_or_reduction_pays_its_start)
{
    /* A copy of 8000 bytes (1 + 4 us) then a reduction of 8000 (1 + 2 us), each
     * also move_us; a flag post beside them pays none. */
    int keys[1] = {0};
    double t[2];
    for (int i = 0; i < 2; i++) {
        fold_model_params_t p = round_params();
        p.move_us = i * 0.5;
        hand_t h;
        hand_init(&h, 1, keys);
        fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), 2000);
        fold_sched_reduce(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 2000);
        fold_sched_shm_post(&h.s[0], FOLD_FLAG_DONE, 1, fold_ref_shm(0), 1);
        t[i] = hand_time(&h, &p);
    }
    cr_expect_float_eq(t[0], 8, EPS);
    cr_expect_float_eq(t[1], 9, EPS);
}

/* Below 4 KiB a step pays move_us in proportion to its bytes: the prefetchers have
 * no stream to ramp over a few lines. A copy of 1024 bytes: 1 + 0.512 + 0.5 / 4. */
Test(model_hand, a_small_step_pays_part_of_its_start)
{
    int keys[1] = {0};
    fold_model_params_t p = round_params();
    p.move_us = 0.5;
    hand_t h;
    hand_init(&h, 1, keys);
    fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), 256);
    double t = hand_time(&h, &p);
    cr_expect_float_eq(t, 1 + 0.512 + 0.125, EPS);
}

/* A fold of 5 rows of 8000 bytes each is the work of 4 reductions (4 x 2 us) in one
 * step: one step_us and one move_us, where the 4 chained reductions pay 4 of each. */
Test(model_hand, a_fold_of_many_rows_pays_one_start)
{
    int keys[1] = {0};
    double t[2];
    for (int chained = 0; chained < 2; chained++) {
        fold_model_params_t p = round_params();
        p.move_us = 0.5;
        hand_t h;
        hand_init(&h, 1, keys);
        fold_ref_t rows[5];
        for (int r = 0; r < 5; r++) {
            rows[r] = fold_ref_tmp((size_t)r * 2000);
        }
        if (chained) {
            fold_sched_reduce(&h.s[0], rows[0], rows[1], fold_ref_out(0), 2000);
            for (int r = 2; r < 5; r++) {
                fold_sched_reduce(&h.s[0], fold_ref_out(0), rows[r], fold_ref_out(0), 2000);
            }
        } else {
            fold_sched_reduce_rows(&h.s[0], rows, 5, fold_ref_out(0), 2000);
        }
        t[chained] = hand_time(&h, &p);
    }
    cr_expect_float_eq(t[0], 1 + 0.5 + 8, EPS);
    cr_expect_float_eq(t[1], 4 * (1 + 0.5 + 2), EPS);
}

/* Out of the cache the fold streams its 5 rows in and its result out, 6 streams of
 * 8000 bytes at half a copy each (1000 B/us): 24 us; chained, 4 reductions of 8000
 * bytes from memory (500 B/us) would take 64. */
Test(model_hand, a_fold_of_many_rows_from_memory_streams_each_row_once)
{
    int keys[1] = {0};
    fold_model_params_t p = round_params();
    p.move_us     = 0.5;
    p.cache_bytes = 1000;   /* everything misses */
    hand_t h;
    hand_init(&h, 1, keys);
    fold_ref_t rows[5];
    for (int r = 0; r < 5; r++) {
        rows[r] = fold_ref_tmp((size_t)r * 2000);
    }
    fold_sched_reduce_rows(&h.s[0], rows, 5, fold_ref_out(0), 2000);
    double t = hand_time(&h, &p);
    cr_expect_float_eq(t, 1 + 0.5 + 24, EPS);
}

/* One wait over the rows of three other ranks is met flag_us after the last of
 * their posts; the fold after it starts then. */
Test(model_hand, a_wait_over_ranges_waits_for_every_other_rank)
{
    int keys[4] = {0, 0, 0, 0};
    fold_model_params_t p = round_params();
    hand_t h;
    hand_init(&h, 4, keys);
    fold_ref_t rows[4];
    for (int r = 0; r < 4; r++) {
        rows[r] = fold_ref_shm((size_t)r * 1000);
    }
    for (int r = 1; r < 4; r++) {
        /* rank r copies r times 4000 bytes (r x (1 + 2) us), then posts (1 us) */
        for (int c = 0; c < r; c++) {
            fold_sched_copy(&h.s[r], fold_ref_in(0), rows[r], 1000);
        }
        fold_sched_shm_post(&h.s[r], FOLD_FLAG_WRITTEN, 1, rows[r], 1000);
    }
    fold_sched_shm_wait_all(&h.s[0], FOLD_FLAG_WRITTEN, 1, rows + 1, 3, 1000);
    fold_sched_reduce_rows(&h.s[0], rows + 1, 3, fold_ref_out(0), 1000);
    /* rank 3 posts at 9 + 1 = 10, seen at 12; the fold: 1 + 2 x 1 us */
    double t = hand_time(&h, &p);
    cr_expect_float_eq(t, 12 + 3, EPS);
}

/* Rank 0 copies 4000 bytes into the segment at element 0 and again at `far`; rank 1
 * does nothing. The time it predicts. */
static double segment_slots(size_t far)
{
    int keys[2] = {0, 0};
    fold_model_params_t p = round_params();
    p.shm_write_gbs = 100;   /* not the bound: the copy rate is */
    hand_t h;
    hand_init(&h, 2, keys);
    fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_shm(0), 1000);
    fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_shm(far), 1000);
    return hand_time(&h, &p);
}

Test(model_hand, the_segment_counts_its_slots_not_its_extent_toward_the_cache)
{
    /* 8000 bytes in two slots: in cache (1e6 B) wherever the second one lies, 2 x
     * (1 + 2) us; costing the extent (4 MB) would take the memory rate, 2 x (1 + 4). */
    cr_expect_float_eq(segment_slots(1000), 6, EPS);
    cr_expect_float_eq(segment_slots(1000000), 6, EPS);
}

/* Every rank reduces 4000 bytes (IN + TMP -> OUT: 12000 bytes touched). */
static double reductions(int size, const int *keys, double cache_bytes, double node_mem_gbs)
{
    fold_model_params_t p = round_params();
    p.cache_bytes  = cache_bytes;
    p.node_mem_gbs = node_mem_gbs;
    hand_t h;
    hand_init(&h, size, keys);
    for (int r = 0; r < size; r++) {
        fold_sched_reduce(&h.s[r], fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 1000);
    }
    return hand_time(&h, &p);
}

Test(model_hand, reductions_in_cache_out_of_cache_and_sharing_memory)
{
    int one[1] = {0}, same[2] = {0, 0}, apart[2] = {0, 1};
    cr_expect_float_eq(reductions(1, one, 1e6, 100), 1 + 4000 / 4000.0, EPS);
    cr_expect_float_eq(reductions(1, one, 1000, 100), 1 + 4000 / 500.0, EPS);
    /* Two ranks of a node out of cache with 0.5 GB/s between them: 250 B/us each. */
    cr_expect_float_eq(reductions(2, same, 1000, 0.5), 1 + 4000 / 250.0, EPS);
    cr_expect_float_eq(reductions(2, apart, 1000, 0.5), 1 + 4000 / 500.0, EPS);
    /* In cache the node's memory is not the limit. */
    cr_expect_float_eq(reductions(2, same, 1e6, 0.5), 1 + 4000 / 4000.0, EPS);
}

/* One rank's single copy or reduction of 1000 floats, from and to the given
 * buffers, with the cores probe's rates: shm_gbs 1 (1000 B/us), shm_write_gbs 1.6,
 * shm_reduce_gbs 0.5, shm_fold_gbs 0.8 (no other rank touches anything). */
static double segment_step(int reduce, fold_ref_t src, fold_ref_t dst)
{
    fold_model_params_t p = round_params();
    p.shm_gbs        = 1;
    p.shm_reduce_gbs = 0.5;
    p.shm_write_gbs  = 1.6;
    p.shm_fold_gbs   = 0.8;
    p.shm_fold_far_gbs = 0.1;
    int one[1] = {0};
    hand_t h;
    hand_init(&h, 1, one);
    if (reduce) {
        fold_sched_reduce(&h.s[0], fold_ref_in(0), src, dst, 1000);
    } else {
        fold_sched_copy(&h.s[0], src, dst, 1000);
    }
    return hand_time(&h, &p);
}

/* A step that crosses the node segment moves at the cores probe's rates: a copy out
 * of it at shm_gbs, into it at shm_write_gbs, within it at the slower of the two, a
 * reduction reading it into the rank's own buffer at shm_fold_gbs, one into it at
 * shm_reduce_gbs; steps that do not touch it at the core's own (copies 2000 B/us,
 * reductions 4000 B/us in cache). */
Test(model_hand, segment_steps_move_at_the_cores_rates)
{
    cr_expect_float_eq(segment_step(0, fold_ref_in(0), fold_ref_out(0)), 1 + 4000 / 2000.0, EPS);
    cr_expect_float_eq(segment_step(0, fold_ref_in(0), fold_ref_shm(0)), 1 + 4000 / 1600.0, EPS);
    cr_expect_float_eq(segment_step(0, fold_ref_shm(0), fold_ref_out(0)), 1 + 4000 / 1000.0, EPS);
    cr_expect_float_eq(segment_step(0, fold_ref_shm(0), fold_ref_shm(4000)), 1 + 4000 / 1000.0,
                       EPS);
    cr_expect_float_eq(segment_step(1, fold_ref_tmp(0), fold_ref_out(0)), 1 + 4000 / 4000.0, EPS);
    cr_expect_float_eq(segment_step(1, fold_ref_shm(0), fold_ref_out(0)), 1 + 4000 / 800.0, EPS);
    cr_expect_float_eq(segment_step(1, fold_ref_shm(0), fold_ref_shm(4000)), 1 + 4000 / 500.0,
                       EPS);
}

/* Rank 0 folds 1000 floats from the segment into OUT, with shm_fold_gbs 1 and
 * shm_fold_far_gbs 0.25, in cache, while rank 1 of its node copies `theirs` floats
 * from its IN to its OUT (8 bytes of its own per float) about 1000x faster. */
static double fold_beside(size_t theirs)
{
    fold_model_params_t p = round_params();
    p.cache_bytes      = 1e12;
    p.reduce_gbs       = 100;
    p.copy_gbs         = 1e4;
    p.shm_fold_gbs     = 1;
    p.shm_fold_far_gbs = 0.25;
    int same[2] = {0, 0};
    hand_t h;
    hand_init(&h, 2, same);
    fold_sched_reduce(&h.s[0], fold_ref_in(0), fold_ref_shm(0), fold_ref_out(0), 1000);
    fold_sched_copy(&h.s[1], fold_ref_in(0), fold_ref_out(0), theirs);
    return hand_time(&h, &p);
}

/* A fold's rate moves from the near to the far one as the bytes the other ranks of
 * the node touch (the writers of the rows it reads) go from 128 KiB to 2 MiB,
 * linearly in their logarithm: 512 KiB is half way. What the folding rank touches
 * itself does not count. */
Test(model_hand, folds_from_the_segment_slow_down_with_the_writers_working_sets)
{
    cr_expect_float_eq(fold_beside(1000), 1 + 4000 / 1000.0, EPS);
    cr_expect_float_eq(fold_beside(16384), 1 + 4000 / 1000.0, EPS);
    cr_expect_float_eq(fold_beside(65536), 1 + 4000 * (0.5 / 1000 + 0.5 / 250), EPS);
    cr_expect_float_eq(fold_beside(262144), 1 + 4000 / 250.0, EPS);
    cr_expect_float_eq(fold_beside(1 << 22), 1 + 4000 / 250.0, EPS);
}

/* Between half the cache and twice it, the time per byte moves linearly from the
 * in-cache rate to the memory rate: 12000 bytes touched in an 8000-byte cache (1.5
 * times it) are two thirds from memory, in a 16000-byte cache a sixth. */
Test(model_hand, working_sets_near_the_cache_size_partly_miss)
{
    int one[1] = {0};
    cr_expect_float_eq(reductions(1, one, 24000, 100), 1 + 4000 / 4000.0, EPS);
    cr_expect_float_eq(reductions(1, one, 16000, 100),
                       1 + 4000 * (5.0 / 6 / 4000 + 1.0 / 6 / 500), EPS);
    cr_expect_float_eq(reductions(1, one, 8000, 100),
                       1 + 4000 * (1.0 / 3 / 4000 + 2.0 / 3 / 500), EPS);
    cr_expect_float_eq(reductions(1, one, 6000, 100), 1 + 4000 / 500.0, EPS);
}

/* One rank's reduction (1000 floats: IN + TMP -> OUT, a working set of 12000 B) or
 * copy (IN -> OUT, 8000 B) with a level below the last-level cache of l2_bytes:
 * reductions 8000 B/us and copies 5000 B/us within it, 4000 and 2000 past it. */
static double near_step(int reduce, double l2_bytes, double cache_bytes)
{
    fold_model_params_t p = round_params();
    p.l2_bytes      = l2_bytes;
    p.reduce_l2_gbs = 8;
    p.copy_l2_gbs   = 5;
    p.cache_bytes   = cache_bytes;
    int one[1] = {0};
    hand_t h;
    hand_init(&h, 1, one);
    if (reduce) {
        fold_sched_reduce(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 1000);
    } else {
        fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_out(0), 1000);
    }
    return hand_time(&h, &p);
}

/* A working set within half the core's own cache runs at its rates, one past twice
 * it at the last level's, linearly between; memory misses still come on top, and
 * without the level (l2_bytes 0) nothing changes. */
Test(model_hand, small_working_sets_run_at_the_core_caches_rates)
{
    cr_expect_float_eq(near_step(1, 24000, 1e6), 1 + 4000 / 8000.0, EPS);
    cr_expect_float_eq(near_step(1, 12000, 1e6),
                       1 + 4000 * (2.0 / 3 / 8000 + 1.0 / 3 / 4000), EPS);
    cr_expect_float_eq(near_step(1, 6000, 1e6), 1 + 4000 / 4000.0, EPS);
    cr_expect_float_eq(near_step(1, 0, 1e6), 1 + 4000 / 4000.0, EPS);
    cr_expect_float_eq(near_step(1, 24000, 6000), 1 + 4000 / 500.0, EPS);
    cr_expect_float_eq(near_step(0, 16000, 1e6), 1 + 4000 / 5000.0, EPS);
    cr_expect_float_eq(near_step(0, 4000, 1e6), 1 + 4000 / 2000.0, EPS);
}

/* Rank 0 reads 1000 bytes of rank 1's IN through the kernel: cma_us per call, then
 * cma_gbs in cache and cma_mem_gbs out of it. */
static double kernel_read(double cache_bytes, double cma_mem_gbs, double node_mem_gbs)
{
    int same[2] = {0, 0};
    fold_model_params_t p = round_params();
    p.cache_bytes  = cache_bytes;
    p.cma_gbs      = 0.25;   /* 250 B/us */
    p.cma_mem_gbs  = cma_mem_gbs;
    p.cma_us       = 3;
    p.node_mem_gbs = node_mem_gbs;
    hand_t h;
    hand_init(&h, 2, same);
    fold_sched_peer_read(&h.s[0], 1, 1, FOLD_BUF_IN, 0, fold_ref_out(0), 250);
    return hand_time(&h, &p);
}

Test(model_hand, single_copy_runs_at_its_memory_rate_out_of_cache)
{
    /* In cache: 1 + 3 + 1000 / 250; out of it 1000 / 125. */
    cr_expect_float_eq(kernel_read(1e6, 0.125, 100), 1 + 3 + 4, EPS);
    cr_expect_float_eq(kernel_read(100, 0.125, 100), 1 + 3 + 8, EPS);
    /* never faster than in cache */
    cr_expect_float_eq(kernel_read(100, 1, 100), 1 + 3 + 4, EPS);
    /* the node's memory shared by its 2 ranks (0.5 GB/s each, below one core's copy
     * at 1): the copy's slowdown, 1000 * (1/500 - 1/1000), on top */
    cr_expect_float_eq(kernel_read(100, 0.125, 1), 1 + 3 + 8 + 1, EPS);
}

/* 2000 bytes (rendezvous) from rank 0 to rank 1 of one node, whose working set (4000
 * bytes) is in the cache (cache_bytes 1e6) or not (100), the kernel's single copy
 * running at 4 GB/s in cache and cma_mem_gbs out of it. */
static double node_message(double cache_bytes, double cma_mem_gbs)
{
    int same[2] = {0, 0};
    fold_model_params_t p = round_params();
    p.cache_bytes = cache_bytes;
    p.cma_gbs     = 4;
    p.cma_mem_gbs = cma_mem_gbs;
    hand_t h;
    hand_init(&h, 2, same);
    fold_sched_send(&h.s[0], 1, fold_ref_in(0), 500);
    fold_sched_recv(&h.s[1], 0, fold_ref_out(0), 500);
    return hand_time(&h, &p);
}

/* A message between ranks of a node is a copy through memory: out of cache it moves
 * no faster than the kernel's single copy or two copies (copy_mem_gbs 1), whichever
 * is cheaper, however fast the transport's own rate (intra_gbs 1: 2 us). */
Test(model_hand, messages_on_a_node_move_at_memory_rates_out_of_cache)
{
    cr_expect_float_eq(node_message(1e6, 0.8), 1 + 3 + 2, EPS);
    cr_expect_float_eq(node_message(100, 0.8), 1 + 3 + 2000 / 800.0, EPS);
    cr_expect_float_eq(node_message(100, 0.25), 1 + 3 + 2 * 2000 / 1000.0, EPS);
}

/* Through a mapping of fold memory the same read is a copy over lines another core
 * wrote: the slower of the segment's copy rates (shm_gbs 0.5, shm_write_gbs 1), and
 * a copy's start (move_us) instead of the kernel's call. */
static fold_model_params_t single_copy_params(void)
{
    fold_model_params_t p = round_params();
    p.cma_gbs       = 0.25;
    p.cma_us        = 3;
    p.shm_gbs       = 0.5;
    p.shm_write_gbs = 1;
    p.move_us       = 0.5;
    return p;
}

Test(model_hand, a_mapped_read_is_a_copy_at_the_segments_rate)
{
    fold_model_params_t p = single_copy_params(), m;
    fold_model_mapped(&p, &m);
    cr_expect_float_eq(m.cma_gbs, 0.5, EPS);
    cr_expect_float_eq(m.cma_us, 0.5, EPS, "a copy's start, not a flag hop or a kernel call");
    /* out of cache: a copy's extra time per byte out of cache on top, 1/1 - 1/2 */
    cr_expect_float_eq(m.cma_mem_gbs, 1 / (1 / 0.5 + (1 / 1.0 - 1 / 2.0)), EPS);
    cr_expect_float_eq(m.shm_gbs, p.shm_gbs, EPS, "everything else as it was");
    cr_expect_float_eq(m.flag_us, p.flag_us, EPS);
}

/* Rank 0 of a node reads 1000 bytes of rank 1's IN and folds them into its OUT; the
 * read's range is used again afterwards (a copy of it) where `used_again`. */
static double read_then_fold(const fold_model_params_t *p, int used_again)
{
    int one_node[2] = {0, 0};
    hand_t h;
    hand_init(&h, 2, one_node);
    fold_sched_serial(&h.s[0]);
    fold_sched_peer_read(&h.s[0], 1, 1, FOLD_BUF_IN, 0, fold_ref_tmp(0), 250);
    fold_sched_reduce(&h.s[0], fold_ref_in(0), fold_ref_tmp(0), fold_ref_out(0), 250);
    if (used_again) {
        fold_sched_copy(&h.s[0], fold_ref_tmp(0), fold_ref_out(250), 250);
    }
    return hand_time(&h, p);
}

/* A read a reduction takes over (exec_plan.h) costs nothing through a mapping, where
 * the reduction reads the bytes; through the kernel it is the read it was. */
Test(model_hand, a_read_folded_where_it_lies_costs_nothing_through_a_mapping)
{
    fold_model_params_t p = single_copy_params(), m;
    fold_model_mapped(&p, &m);
    cr_expect_float_eq(m.peer_views, 1, EPS);
    cr_expect_float_eq(p.peer_views, 0, EPS, "the kernel's copy stays a copy");
    /* mapped, taken over: only the fold; not taken over (its range copied afterwards,
     * or the prices of a read that copies), the read too: a copy's start and 1000
     * bytes at 0.5 GB/s, 0.5 + 2 us */
    double folded = read_then_fold(&m, 0);
    cr_expect_gt(read_then_fold(&m, 1) - folded, 2.5, "its range used again");
    fold_model_params_t copies = m;
    copies.peer_views = 0;
    cr_expect_float_eq(read_then_fold(&copies, 0) - folded, 2.5, EPS);
    /* through the kernel: its call and 1000 bytes at 0.25 GB/s, 3 + 4 us */
    cr_expect_float_eq(read_then_fold(&p, 0) - folded, 7, EPS);
}

/* Ranks 0 and 1 each send 1000 bytes to rank 2, rank 3 (if any) 1000 bytes to
 * rank 4. Between nodes a message holds a link for 2 us (its bytes) and arrives
 * 5 + 2 us after it starts; within a node a channel for 1 us, arriving 3 + 1 later. */
static double two_to_one(int size, const int *keys, int nics)
{
    fold_model_params_t p = round_params();
    p.nics = nics;
    hand_t h;
    hand_init(&h, size, keys);
    fold_sched_send(&h.s[0], 2, fold_ref_in(0), 250);
    fold_sched_send(&h.s[1], 2, fold_ref_in(0), 250);
    fold_sched_recv(&h.s[2], 0, fold_ref_out(0), 250);
    fold_sched_recv(&h.s[2], 1, fold_ref_out(250), 250);
    if (size == 5) {
        fold_sched_send(&h.s[3], 4, fold_ref_in(0), 250);
        fold_sched_recv(&h.s[4], 3, fold_ref_out(0), 250);
    }
    return hand_time(&h, &p);
}

Test(model_hand, links_carry_one_message_at_a_time)
{
    int out_shared[3] = {0, 0, 1}, in_shared[3] = {0, 1, 2};
    /* One link: the second message moves once the first one's bytes are through,
     * [1,3] then [3,5], and arrives at 3 + 5 + 2. */
    cr_expect_float_eq(two_to_one(3, out_shared, 1), 10, EPS);
    cr_expect_float_eq(two_to_one(3, in_shared, 1), 10, EPS);
    /* Two links per node: both move at once and arrive at 1 + 5 + 2. */
    cr_expect_float_eq(two_to_one(3, out_shared, 2), 8, EPS);
    cr_expect_float_eq(two_to_one(3, in_shared, 2), 8, EPS);
    /* Within a node the receiver's core copies one message at a time, once its two
     * receives are posted ([0,1], [1,2]): [2,3] then [3,4], the second arriving at
     * 4 + 3; another pair of the node does not wait. */
    int one_node[5] = {0, 0, 0, 0, 0};
    cr_expect_float_eq(two_to_one(3, one_node, 1), 7, EPS);
    cr_expect_float_eq(two_to_one(5, one_node, 1), 7, EPS);
    /* A pair on other nodes does not share the links either. */
    int split[5] = {0, 0, 1, 2, 3};
    cr_expect_float_eq(two_to_one(5, split, 1), 10, EPS);
}

Test(model_hand, shm_waits_see_posts_flag_us_later)
{
    fold_model_params_t p = round_params();
    fold_model_result_t res;
    hand_t h;

    /* Post at 1, wait posted at 1, flag seen at 1 + 2. */
    int two[2] = {0, 0};
    hand_init(&h, 2, two);
    fold_sched_shm_post(&h.s[0], FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1);
    fold_sched_shm_wait(&h.s[1], 0, 0, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.time_us, 3, EPS);
    hand_free(&h);

    /* Every other local rank: rank 0 posts at 1, rank 1 at 4 (after a 3 us copy);
     * rank 2's wait for the previous call (value 0) is met at once, [0,1], its wait
     * for both posts is posted at 2 and completes at max(1, 4) + 2. */
    int three[3] = {0, 0, 0};
    hand_init(&h, 3, three);
    fold_sched_shm_post(&h.s[0], FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1000);
    fold_sched_copy(&h.s[1], fold_ref_in(0), fold_ref_shm(1000), 1000);
    fold_sched_shm_post(&h.s[1], FOLD_FLAG_WRITTEN, 1, fold_ref_shm(1000), 1000);
    fold_sched_shm_wait(&h.s[2], -1, -1, FOLD_FLAG_DONE, 0, fold_ref_shm(5000), 1);
    fold_sched_shm_wait(&h.s[2], -1, -1, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 2000);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.time_us, 6, EPS);
    hand_free(&h);
}

Test(model_hand, flag_posts_do_not_queue_for_the_cpu)
{
    /* Rank 0 copies 4000 B into the segment ([0,3]) and 4000 B elsewhere (ready at 0
     * too: [3,6]); its post of the first is ready at 3 and ends at 4, between them,
     * as the executor runs it. Rank 1 sees it at 6 and copies 4000 B: [6,9]. Queued
     * behind the second copy, the post would end at 7 and rank 1 at 12. */
    fold_model_params_t p = round_params();
    fold_model_result_t res;
    hand_t h;
    int two[2] = {0, 0};
    hand_init(&h, 2, two);
    fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_shm(0), 1000);
    fold_sched_copy(&h.s[0], fold_ref_in(1000), fold_ref_tmp(0), 1000);
    fold_sched_shm_post(&h.s[0], FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1000);
    fold_sched_shm_wait(&h.s[1], 0, 0, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1000);
    fold_sched_copy(&h.s[1], fold_ref_shm(0), fold_ref_out(0), 1000);
    cr_assert_eq(hand_replay(&h, &p, &res), FOLD_OK);
    cr_expect_float_eq(res.time_us, 9, EPS);
    hand_free(&h);
}

/* ---- schedules that do not fit each other ------------------------------------- */

typedef enum { BAD_COUNT, BAD_SIZE, BAD_FLAG, BAD_CYCLE, BAD_PEER } bad_kind_t;

static int mismatched(bad_kind_t kind)
{
    fold_model_params_t p = round_params();
    int keys[2] = {0, 0};
    hand_t h;
    hand_init(&h, 2, keys);
    switch (kind) {
    case BAD_COUNT:   /* two sends, one receive */
        fold_sched_send(&h.s[0], 1, fold_ref_in(0), 10);
        fold_sched_send(&h.s[0], 1, fold_ref_in(10), 10);
        fold_sched_recv(&h.s[1], 0, fold_ref_out(0), 10);
        break;
    case BAD_SIZE:
        fold_sched_send(&h.s[0], 1, fold_ref_in(0), 10);
        fold_sched_recv(&h.s[1], 0, fold_ref_out(0), 20);
        break;
    case BAD_FLAG:    /* a flag nobody posts */
        fold_sched_copy(&h.s[0], fold_ref_in(0), fold_ref_out(0), 10);
        fold_sched_shm_wait(&h.s[1], 0, 0, FOLD_FLAG_WRITTEN, 1, fold_ref_shm(0), 1);
        break;
    case BAD_CYCLE:   /* each forwards what it receives before sending: deadlock */
        for (int r = 0; r < 2; r++) {
            fold_sched_recv(&h.s[r], 1 - r, fold_ref_tmp(0), 10);
            fold_sched_send(&h.s[r], 1 - r, fold_ref_tmp(0), 10);
        }
        break;
    case BAD_PEER:
        fold_sched_send(&h.s[0], 5, fold_ref_in(0), 10);
        break;
    }
    fold_model_result_t res = {.time_us = -1, .root_us = -1, .steps = 12345};
    int status = hand_replay(&h, &p, &res);
    cr_expect_eq(res.steps, 12345, "no output on failure");
    hand_free(&h);
    return status;
}

Test(model_hand, mismatched_schedules_fail)
{
    cr_expect_eq(mismatched(BAD_COUNT), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(mismatched(BAD_SIZE), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(mismatched(BAD_FLAG), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(mismatched(BAD_CYCLE), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(mismatched(BAD_PEER), FOLD_ERR_INVALID_ARG);
}

/* ---- every algorithm ------------------------------------------------------------ */

/* The segment fold uses by default: 128 KiB, at most 1024 segments. */
static size_t seg_count(size_t count)
{
    size_t seg = 128 * 1024 / 4, floor = (count + 1023) / 1024;
    return seg > floor ? seg : floor;
}

static int predict(const fold_model_params_t *p, const fold_topo_t *topo, const fold_alg_t *alg,
                   fold_coll_t coll, size_t count, int leaders, int root, int inplace,
                   fold_model_result_t *res)
{
    int aware = (alg->flags & FOLD_ALG_NODE_AWARE) != 0;
    fold_model_query_t q = {
        .alg   = alg,
        .esize = 4,
        .proto = {.coll = coll, .size = topo->size, .root = root, .count = count,
                  .seg_count = seg_count(count), .depth = 4, .inplace = inplace,
                  .commutative = 1, .leaders = aware ? leaders : 0,
                  .shm_count = aware ? (size_t)1 << 20 : 0,
                  .inter = aware && topo->nnodes > 1 ? &fold_alg_rabenseifner : NULL},
    };
    return fold_model_predict(p, topo, &q, res);
}

/* One rank's step end times are those of the whole prediction: ring allreduce of 1000
 * elements on 3 ranks, each rank's schedule as its builder makes it. */
Test(model_predict, one_ranks_steps_end_within_the_prediction)
{
    fold_model_params_t p = round_params();
    fold_topo_t *topo = topo_blocks(3, 3);
    fold_model_query_t q = {.alg = &fold_alg_ring, .esize = 4,
                            .proto = {.coll = FOLD_COLL_ALLREDUCE, .size = 3, .count = 1000,
                                      .seg_count = 1000, .depth = 1, .commutative = 1}};
    fold_model_result_t whole, res;
    cr_assert_eq(fold_model_predict(&p, topo, &q, &whole), FOLD_OK);
    for (int r = 0; r < 3; r++) {
        fold_coll_args_t a = q.proto;
        a.rank = r;
        fold_sched_t s;
        fold_sched_init(&s, &a);
        cr_assert_eq(fold_alg_builder(&fold_alg_ring, FOLD_COLL_ALLREDUCE)(&a, &s), FOLD_OK);
        cr_assert_eq(fold_sched_finalize(&s), FOLD_OK);
        double done[64];
        size_t n = 0;
        cr_assert_eq(fold_model_predict_steps(&p, topo, &q, r, done, 64, &n, &res), FOLD_OK);
        cr_expect_eq(n, s.nsteps, "rank %d: %zu steps predicted, %zu built", r, n, s.nsteps);
        cr_expect_float_eq(res.time_us, whole.time_us, EPS);
        double last = 0;
        for (size_t i = 0; i < n && i < 64; i++) {
            cr_expect(done[i] > 0 && done[i] <= whole.time_us + EPS, "step %zu ends at %g",
                      i, done[i]);
            last = done[i] > last ? done[i] : last;
            /* a step ends after every step it depends on */
            const uint32_t *succ = &s.succ[s.steps[i].succ_off];
            for (uint32_t k = 0; k < s.steps[i].nsucc; k++) {
                cr_expect_geq(done[succ[k]], done[i], "step %u before its predecessor %zu",
                              succ[k], i);
            }
        }
        cr_expect_gt(last, 0);
        fold_sched_cleanup(&s);
    }
    double one[1];
    size_t n = 0;
    cr_expect_eq(fold_model_predict_steps(&p, topo, &q, 0, NULL, 0, &n, &res),
                 FOLD_ERR_INVALID_ARG);
    /* a rank beyond the topology gets no steps, the prediction still stands */
    cr_expect_eq(fold_model_predict_steps(&p, topo, &q, 7, one, 1, &n, &res), FOLD_OK);
    cr_expect_eq(n, 0);
    fold_topo_free(topo);
}

typedef struct shape {
    const char *name;
    int         kind;   /* 0 one node, 1 two per node, 2 one per node, 3 round robin of 3 */
} shape_t;

static fold_topo_t *topo_shape(int size, int kind)
{
    int key[16];
    cr_assert_leq(size, 16);
    for (int r = 0; r < size; r++) {
        key[r] = kind == 0 ? 0 : kind == 1 ? r / 2 : kind == 2 ? r : r % 3;
    }
    return topo_from_keys(size, key);
}

Test(model_algs, every_algorithm_predicts_on_every_shape)
{
    static const int sizes[] = {2, 3, 5, 8, 13};
    static const size_t counts[] = {1, 1000, (size_t)1 << 20};
    static const char *const shapes[] = {"one node", "two per node", "one per node",
                                         "round robin over 3 nodes"};
    fold_model_params_t p;
    fold_model_defaults(&p);
    int predictions = 0;
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (int kind = 0; kind < 4; kind++) {
            int size = sizes[si];
            fold_topo_t *topo = topo_shape(size, kind);
            for (int a = 0; fold_alg_all[a] != NULL; a++) {
                const fold_alg_t *alg = fold_alg_all[a];
                for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
                    if (fold_alg_builder(alg, (fold_coll_t)coll) == NULL) {
                        continue;
                    }
                    int max_leaders = (alg->flags & FOLD_ALG_NODE_AWARE) && topo->min_ppn >= 2
                                          ? 2 : 1;
                    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                        for (int leaders = 1; leaders <= max_leaders; leaders++) {
                            int root = coll == FOLD_COLL_REDUCE ? size - 1 : 0;
                            fold_model_result_t res;
                            int status = predict(&p, topo, alg, (fold_coll_t)coll, counts[ci],
                                                 leaders, root, ci == 1, &res);
                            cr_assert_eq(status, FOLD_OK, "%s %s, %d ranks, %s, count %zu, "
                                         "%d leaders", alg->name,
                                         fold_coll_name((fold_coll_t)coll), size,
                                         shapes[kind], counts[ci], leaders);
                            cr_expect(isfinite(res.time_us) && res.time_us > 0,
                                      "%s %s %d ranks %s count %zu: %g us", alg->name,
                                      fold_coll_name((fold_coll_t)coll), size, shapes[kind],
                                      counts[ci], res.time_us);
                            cr_expect(res.root_us > 0 && res.root_us <= res.time_us);
                            cr_expect_gt(res.steps, 0);
                            predictions++;
                        }
                    }
                }
            }
            fold_topo_free(topo);
        }
    }
    cr_log_info("%d predictions", predictions);
}

Test(model_algs, large_counts_take_longer)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    fold_topo_t *topo = topo_blocks(8, 4);
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        const fold_alg_t *alg = fold_alg_all[a];
        for (int coll = FOLD_COLL_ALLREDUCE; coll <= FOLD_COLL_REDUCE; coll++) {
            if (fold_alg_builder(alg, (fold_coll_t)coll) == NULL) {
                continue;
            }
            double prev = 0;
            for (size_t count = (size_t)1 << 16; count <= (size_t)1 << 22; count <<= 2) {
                fold_model_result_t res;
                cr_assert_eq(predict(&p, topo, alg, (fold_coll_t)coll, count, 2, 3, 0, &res),
                             FOLD_OK);
                cr_expect_gt(res.time_us, prev, "%s %s: %zu elements take %g us, fewer "
                             "took %g", alg->name, fold_coll_name((fold_coll_t)coll), count,
                             res.time_us, prev);
                prev = res.time_us;
            }
        }
    }
    fold_topo_free(topo);
}

Test(model_algs, predictions_are_deterministic)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    int key[11] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0};
    fold_topo_t *topo = topo_from_keys(11, key);
    for (int a = 0; fold_alg_all[a] != NULL; a++) {
        const fold_alg_t *alg = fold_alg_all[a];
        fold_coll_t coll = alg->allreduce ? FOLD_COLL_ALLREDUCE : FOLD_COLL_REDUCE;
        fold_model_result_t r1, r2;
        cr_assert_eq(predict(&p, topo, alg, coll, 300001, 2, 4, 0, &r1), FOLD_OK);
        cr_assert_eq(predict(&p, topo, alg, coll, 300001, 2, 4, 0, &r2), FOLD_OK);
        cr_expect(memcmp(&r1.time_us, &r2.time_us, sizeof(double)) == 0, "%s", alg->name);
        cr_expect(memcmp(&r1.root_us, &r2.root_us, sizeof(double)) == 0, "%s", alg->name);
        cr_expect_eq(r1.steps, r2.steps);
    }
    fold_topo_free(topo);
}

Test(model_algs, bandwidth_bound_allreduce_meets_the_link_bound)
{
    /* 2 nodes x 1 rank on a slow link: every byte crosses it once each way, so an
     * allreduce of B bytes takes at least 2 (p - 1) / p * B / bandwidth. */
    fold_model_params_t p;
    fold_model_defaults(&p);
    p.inter_gbs = 1;
    fold_topo_t *topo = topo_blocks(2, 1);
    const size_t count = (size_t)16 << 20;   /* 64 MiB of floats */
    const double bound = 2.0 * 1 / 2 * (double)(count * 4) / (p.inter_gbs * 1e3);
    const fold_alg_t *algs[] = {&fold_alg_ring, &fold_alg_rabenseifner};
    for (int a = 0; a < 2; a++) {
        fold_model_result_t res;
        cr_assert_eq(predict(&p, topo, algs[a], FOLD_COLL_ALLREDUCE, count, 0, 0, 0, &res),
                     FOLD_OK);
        cr_expect(res.time_us >= bound && res.time_us <= 1.3 * bound,
                  "%s: %.0f us against the link bound %.0f us", algs[a]->name, res.time_us,
                  bound);
    }
    fold_topo_free(topo);
}

static double wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void large_shape(const char *what, int nnodes, int ppn, const fold_alg_t *alg,
                        int leaders)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    fold_topo_t *topo = topo_blocks(nnodes * ppn, ppn);
    fold_model_result_t res;
    double t0 = wall_seconds();
    int status = predict(&p, topo, alg, FOLD_COLL_ALLREDUCE, (size_t)1 << 20, leaders, 0, 0,
                         &res);
    double wall = wall_seconds() - t0;
    cr_assert_eq(status, FOLD_OK, "%s", what);
    cr_expect(isfinite(res.time_us) && res.time_us > 0);
    fprintf(stderr, "model: %s, 4 MiB allreduce: %zu steps predicted %.1f us in %.3f s\n",
            what, res.steps, res.time_us, wall);
    fold_topo_free(topo);
}

/* Under FOLD_TEST_REDUCED the shapes the others already cover are skipped. */

Test(model_large, dpml_64_ranks_per_node_on_8_nodes)
{
    large_shape("dpml 8 nodes x 64 ranks, 4 leaders", 8, 64, &fold_alg_dpml, 4);
    if (!fold_test_reduced()) {
        large_shape("dpml_pipelined 8 nodes x 64 ranks, 4 leaders", 8, 64,
                    &fold_alg_dpml_pipelined, 4);
    }
}

Test(model_large, flat_algorithms_on_1000_nodes)
{
    large_shape("rabenseifner 1000 nodes x 1 rank", 1000, 1, &fold_alg_rabenseifner, 0);
    if (!fold_test_reduced()) {   /* under the sanitizers one replay of 1000 ranks */
        large_shape("ring 1000 nodes x 1 rank", 1000, 1, &fold_alg_ring, 0);
    }
}

/* ---- parameters ----------------------------------------------------------------- */

static int params_equal(const fold_model_params_t *a, const fold_model_params_t *b)
{
    return a->step_us == b->step_us && a->flag_us == b->flag_us &&
           a->intra_lat_us == b->intra_lat_us && a->intra_gbs == b->intra_gbs &&
           a->inter_lat_us == b->inter_lat_us && a->inter_gbs == b->inter_gbs &&
           a->nics == b->nics && a->eager_bytes == b->eager_bytes &&
           a->copy_gbs == b->copy_gbs && a->copy_mem_gbs == b->copy_mem_gbs &&
           a->reduce_gbs == b->reduce_gbs && a->reduce_mem_gbs == b->reduce_mem_gbs &&
           a->node_mem_gbs == b->node_mem_gbs && a->cache_bytes == b->cache_bytes &&
           a->shm_gbs == b->shm_gbs && a->shm_reduce_gbs == b->shm_reduce_gbs &&
           a->shm_write_gbs == b->shm_write_gbs && a->shm_fold_gbs == b->shm_fold_gbs && a->shm_fold_far_gbs == b->shm_fold_far_gbs &&
           a->cma_gbs == b->cma_gbs && a->cma_us == b->cma_us;
}

Test(model_params, set_accepts_good_values)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    cr_expect_eq(fold_model_set(&p, "inter_gbs", "25"), FOLD_OK);
    cr_expect_float_eq(p.inter_gbs, 25, EPS);
    cr_expect_eq(fold_model_set(&p, "flag_us", ".25"), FOLD_OK);
    cr_expect_float_eq(p.flag_us, 0.25, EPS);
    cr_expect_eq(fold_model_set(&p, "intra_lat_us", "1e-1"), FOLD_OK);
    cr_expect_float_eq(p.intra_lat_us, 0.1, EPS);
    cr_expect_eq(fold_model_set(&p, "step_us", "0"), FOLD_OK);
    cr_expect_eq(p.step_us, 0);
    cr_expect_eq(fold_model_set(&p, "nics", "2"), FOLD_OK);
    cr_expect_eq(p.nics, 2);
    cr_expect_eq(fold_model_set(&p, "eager_bytes", "64k"), FOLD_OK);
    cr_expect_eq(p.eager_bytes, 65536);
    cr_expect_eq(fold_model_set(&p, "cache_bytes", "256M"), FOLD_OK);
    cr_expect_eq(p.cache_bytes, 256.0 * 1024 * 1024);
}

Test(model_params, set_rejects_unknown_names_and_bad_values)
{
    fold_model_params_t p, d;
    fold_model_defaults(&p);
    fold_model_defaults(&d);
    cr_expect_eq(fold_model_set(&p, "no_such_param", "1"), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(fold_model_set(&p, NULL, "1"), FOLD_ERR_NOT_FOUND);
    cr_expect_eq(fold_model_set(&p, "STEP_US", "1"), FOLD_ERR_NOT_FOUND);
    static const char *const bad_time[] = {"", "abc", "1x", "-1", "+1", " 1", "1 ", "nan",
                                           "inf", "1e999", "0x"};
    for (size_t i = 0; i < sizeof(bad_time) / sizeof(bad_time[0]); i++) {
        cr_expect_eq(fold_model_set(&p, "step_us", bad_time[i]), FOLD_ERR_INVALID_ARG,
                     "'%s'", bad_time[i]);
    }
    cr_expect_eq(fold_model_set(&p, "step_us", NULL), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "inter_gbs", "0"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "copy_mem_gbs", "0.0"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "nics", "0"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "nics", "1.5"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "nics", "1025"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "eager_bytes", "12q"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "eager_bytes", "-5"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "cache_bytes", "1.5k"), FOLD_ERR_INVALID_ARG);
    cr_expect_eq(fold_model_set(&p, "cache_bytes", ""), FOLD_ERR_INVALID_ARG);
    cr_expect(params_equal(&p, &d), "a rejected value changes nothing");
}

Test(model_params, print_reads_back_exactly)
{
    fold_model_params_t p, q;
    fold_model_defaults(&p);
    p.inter_gbs   = 1.0 / 3;   /* needs all 17 digits */
    p.eager_bytes = (double)SIZE_MAX;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_not_null(out);
    fold_model_print(&p, "param ", out);
    fclose(out);
    cr_expect_not_null(strstr(text, "param step_us 0.05\n"), "%s", text);
    cr_expect_not_null(strstr(text, "param eager_bytes inf\n"), "%s", text);
    cr_expect_not_null(strstr(text, "param cache_bytes 33554432\n"), "%s", text);

    fold_model_defaults(&q);
    int lines = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), lines++) {
        char name[64], value[64];
        cr_assert_eq(sscanf(line, "param %63s %63s", name, value), 2, "%s", line);
        cr_expect_eq(fold_model_set(&q, name, value), FOLD_OK, "%s", line);
    }
    cr_expect_eq(lines, 27);
    cr_expect(params_equal(&p, &q));
    free(text);
}

Test(model_params, predict_refuses_bad_parameters_and_queries)
{
    fold_model_params_t p;
    fold_model_defaults(&p);
    fold_topo_t *topo = topo_blocks(4, 2);
    fold_model_result_t res;
    cr_expect_eq(predict(&p, topo, &fold_alg_ring, FOLD_COLL_ALLREDUCE, 100, 0, 0, 0, &res),
                 FOLD_OK);
    fold_model_params_t bad = p;
    bad.inter_gbs = 0;
    cr_expect_eq(predict(&bad, topo, &fold_alg_ring, FOLD_COLL_ALLREDUCE, 100, 0, 0, 0, &res),
                 FOLD_ERR_INVALID_ARG);
    bad = p;
    bad.nics = 0;
    cr_expect_eq(predict(&bad, topo, &fold_alg_ring, FOLD_COLL_ALLREDUCE, 100, 0, 0, 0, &res),
                 FOLD_ERR_INVALID_ARG);
    bad = p;
    bad.step_us = NAN;
    cr_expect_eq(predict(&bad, topo, &fold_alg_ring, FOLD_COLL_ALLREDUCE, 100, 0, 0, 0, &res),
                 FOLD_ERR_INVALID_ARG);
    /* binomial has no allreduce; the size must be the topology's */
    cr_expect_eq(predict(&p, topo, &fold_alg_binomial, FOLD_COLL_ALLREDUCE, 100, 0, 0, 0, &res),
                 FOLD_ERR_INVALID_ARG);
    fold_model_query_t q = {.alg = &fold_alg_ring, .esize = 4,
                            .proto = {.coll = FOLD_COLL_ALLREDUCE, .size = 5, .count = 100,
                                      .seg_count = 100, .depth = 1, .commutative = 1}};
    cr_expect_eq(fold_model_predict(&p, topo, &q, &res), FOLD_ERR_INVALID_ARG);
    q.proto.size = 0;   /* taken from the topology */
    cr_expect_eq(fold_model_predict(&p, topo, &q, &res), FOLD_OK);
    q.esize = 0;
    cr_expect_eq(fold_model_predict(&p, topo, &q, &res), FOLD_ERR_INVALID_ARG);
    fold_topo_free(topo);
}
