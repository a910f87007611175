/*
 * Single copy through fold memory (node/xmap.c, node/peer.c): with a call's buffers
 * from fold_mem_alloc, the cma algorithm folds straight from the other ranks' inputs
 * and writes into their outputs through mappings of their allocations instead of
 * the kernel's cross-memory attach;
 * results match the reference on 2 and 3 ranks, allreduce and reduce (a root first
 * and last), in place or not, commutative or not, with every rank's buffers in fold
 * memory or only some (the others still go through the kernel); a freed allocation
 * does not stay mapped. Ranks are threads on the loopback fabric: each maps the
 * others' allocations through /proc/self/fd, which is the same path as another
 * process's.
 */
#include <criterion/criterion.h>

#include "coll_reference.h"
#include "loopback_harness.h"
#include "mem_buffer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 70001   /* several 128 KiB segments of float32, and an odd tail */

typedef struct map_case {
    int       fold_ranks;   /* ranks whose buffers are fold memory: 0 .. fold_ranks-1 */
    fold_op_t affine;       /* the non-commutative op */
    int       stream;       /* every call streams its results (FOLD_STREAM_MIN=1) */
} map_case_t;

typedef struct call_kind {
    int          allreduce, root_last, inplace;
    fold_dtype_t dt;
    int          affine;
} call_kind_t;

/* One call of `kind` on buffers placed as the case says; 0 when its result is right. */
static int one_call(fold_comm_h w, int rank, int size, const map_case_t *mc,
                    const call_kind_t *k)
{
    const fold_op_t op = k->affine ? mc->affine : FOLD_OP_SUM;
    const size_t es = fold_dtype_size(k->dt), bytes = COUNT * es;
    const int root = k->root_last ? size - 1 : 0, fold = rank < mc->fold_ranks;
    const int has_out = k->allreduce || rank == root;
    char *in = mem_buffer(fold, bytes), *out = mem_buffer(fold, bytes), *want = malloc(bytes);
    if (in == NULL || out == NULL || want == NULL) {
        return 1;
    }
    ref_fill_input(k->dt, op, rank, COUNT, in);
    for (size_t i = 0; i < COUNT; i++) {
        ref_expected(k->dt, op, size, i, want);
    }
    const void *sbuf = in;
    if (k->inplace && has_out) {
        memcpy(out, in, bytes);
        sbuf = FOLD_IN_PLACE;
    }
    int st = k->allreduce ? fold_allreduce(sbuf, out, COUNT, k->dt, op, w)
                          : fold_reduce(sbuf, out, COUNT, k->dt, op, root, w);
    int bad = st != FOLD_OK;
    for (size_t i = 0; i < COUNT && !bad && has_out; i++) {
        if (!ref_same_element(k->dt, out, want, i)) {
            fprintf(stderr, "rank %d: element %zu wrong\n", rank, i);
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr, "rank %d of %d, %d in fold memory: %s%s root %d %s %s: %s\n", rank,
                size, mc->fold_ranks, k->allreduce ? "allreduce" : "reduce",
                k->inplace ? " in place" : "", root, fold_dtype_name(k->dt),
                k->affine ? "affine" : "sum", fold_status_string(st));
    }
    mem_release(fold, in);
    mem_release(fold, out);
    free(want);
    return bad;
}

static int map_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const map_case_t *mc = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma");
    fold_config_set(ctx, "REDUCE_ALG", "cma");
    if (mc->stream) {
        fold_config_set(ctx, "STREAM", "on");
        fold_config_set(ctx, "STREAM_MIN", "1");
    }
    const call_kind_t kinds[] = {
        {1, 0, 0, FOLD_FLOAT32, 0}, {1, 0, 1, FOLD_FLOAT32, 0}, {0, 0, 0, FOLD_FLOAT32, 0},
        {0, 1, 1, FOLD_FLOAT32, 0}, {1, 0, 0, FOLD_UINT64, 1},  {0, 1, 0, FOLD_UINT64, 1},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]) && !bad; k++) {
        bad = one_call(w, rank, size, mc, &kinds[k]);
    }
    /* Every rank reads another's IN in an allreduce and writes into its OUT: a rank
     * with a peer in fold memory folded straight from a mapping (nothing copied on
     * the way) and copied into one, and one without did neither. */
    fold_comm_t *comm = w;
    int mapped;
    uint64_t copies, views;
    fold_node_xmap_stats(comm->node, &mapped, &copies, &views);
    int peers_in_fold = mc->fold_ranks - (rank < mc->fold_ranks);
    if (!bad && ((copies > 0) != (peers_in_fold > 0) || (views > 0) != (peers_in_fold > 0))) {
        fprintf(stderr, "rank %d: %llu copies and %llu folds through mappings with %d peers "
                "in fold memory\n", rank, (unsigned long long)copies,
                (unsigned long long)views, peers_in_fold);
        bad = 1;
    }
    /* Streaming, a reduction whose results go to mapped OUT streams them there itself
     * (exec_plan.h, results written along): on 2 ranks every allreduce owner, on any
     * number a reduce's non-root with the root in fold memory (a root first in two of
     * the float32 calls). Never where a rank it writes to is not in fold memory. */
    const uint64_t along = fold_node_xmap_along(comm->node);
    const int root_in_fold = mc->fold_ranks > 0;
    const int want = mc->stream && mc->fold_ranks == size && (size == 2 || rank != 0);
    if (!bad && (want ? along == 0 : along != 0 && !(mc->stream && root_in_fold))) {
        fprintf(stderr, "rank %d of %d, %d in fold memory%s: %llu results streamed along\n",
                rank, size, mc->fold_ranks, mc->stream ? ", streaming" : "",
                (unsigned long long)along);
        bad = 1;
    }
    return bad;
}

static void run_case(int size, int fold_ranks)
{
    map_case_t mc = {.fold_ranks = fold_ranks};
    cr_assert_eq(fold_op_create(ref_affine_fn, NULL, 0, &mc.affine), FOLD_OK);
    cr_expect_eq(lh_run(size, map_rank, &mc), 0, "%d ranks, %d in fold memory", size,
                 fold_ranks);
    mc.stream = 1;
    cr_expect_eq(lh_run(size, map_rank, &mc), 0, "%d ranks, %d in fold memory, streaming",
                 size, fold_ranks);
    fold_op_free(mc.affine);
}

/* Heap buffers stay on the heap here: this file tests fold_mem_alloc's memory, and a
 * heap buffer passed again would move into fold memory (test_mem_adopt). */
static void heap_stays(void)
{
    setenv("FOLD_ADOPT", "off", 1);
}

Test(mem_map, every_rank_in_fold_memory, .init = heap_stays)
{
    run_case(2, 2);
    run_case(3, 3);
}

Test(mem_map, some_ranks_in_fold_memory, .init = heap_stays)
{
    run_case(2, 1);
    run_case(3, 1);
    run_case(3, 0);
}

/* Two allreduces, each on new allocations (the first freed between): a rank keeps
 * only the second's mappings, each peer's IN and OUT. */
static int remap_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma");
    map_case_t mc = {.fold_ranks = size};
    const call_kind_t sum = {1, 0, 0, FOLD_FLOAT32, 0};
    int bad = 0, mapped[2];
    uint64_t copies, views;
    for (int k = 0; k < 2 && !bad; k++) {
        bad = one_call(w, rank, size, &mc, &sum);   /* allocates and frees its buffers */
        fold_node_xmap_stats(((fold_comm_t *)w)->node, &mapped[k], &copies, &views);
    }
    if (!bad && (mapped[0] != 2 * (size - 1) || mapped[1] != mapped[0])) {
        fprintf(stderr, "rank %d: %d then %d allocations mapped, want %d both times\n", rank,
                mapped[0], mapped[1], 2 * (size - 1));
        bad = 1;
    }
    return bad;
}

Test(mem_map, a_freed_allocation_does_not_stay_mapped, .init = heap_stays)
{
    cr_expect_eq(lh_run(2, remap_rank, NULL), 0);
    cr_expect_eq(lh_run(3, remap_rank, NULL), 0);
}
