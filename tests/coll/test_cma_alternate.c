/*
 * Every other call of a shape runs its chunks backward (FOLD_ALG_ALTERNATES,
 * coll/exec.c): on 2 and 3 ranks of the loopback fabric, repeated single-copy
 * allreduces and reduces (a non-commutative op, out of place and in place) give the
 * reference result every time, the communicator's schedule cache then holds the shape
 * in both directions with the last call's backward, and a call whose owners have one
 * chunk each keeps to one schedule.
 */
#include <criterion/criterion.h>

#include "coll/exec.h"
#include "comm.h"
#include "coll_reference.h"
#include "loopback_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEGMENT "4k"   /* 512 float64: several chunks per owner at COUNT */
#define COUNT   5001
#define CALLS   4

/* One call; 0 when this rank's result matches the reference. */
static int one_call(fold_comm_h w, int rank, int size, fold_op_t op, int allreduce,
                    int inplace, size_t count)
{
    const size_t bytes = count * sizeof(double);
    const int root = size - 1, has_out = allreduce || rank == root;
    double *in = malloc(bytes), *out = malloc(bytes), *want = malloc(bytes);
    ref_fill_input(FOLD_FLOAT64, op, rank, count, in);
    for (size_t i = 0; i < count; i++) {
        ref_expected(FOLD_FLOAT64, op, size, i, want);
    }
    memset(out, 0x5a, bytes);
    const void *sbuf = in;
    if (inplace && has_out) {
        memcpy(out, in, bytes);
        sbuf = FOLD_IN_PLACE;
    }
    int st = allreduce ? fold_allreduce(sbuf, out, count, FOLD_FLOAT64, op, w)
                       : fold_reduce(sbuf, out, count, FOLD_FLOAT64, op, root, w);
    int bad = st != FOLD_OK;
    for (size_t i = 0; i < count && !bad && has_out; i++) {
        if (!ref_same_element(FOLD_FLOAT64, out, want, i)) {
            fprintf(stderr, "rank %d of %d, %s%s: element %zu wrong\n", rank, size,
                    allreduce ? "allreduce" : "reduce", inplace ? " in place" : "", i);
            bad = 1;
        }
    }
    free(in);
    free(out);
    free(want);
    return bad;
}

/* The cached schedules of cma for `count` elements: how many run forward, how many
 * backward, and whether the one used last runs backward. */
static void cached(const fold_comm_t *comm, size_t count, int *fwd, int *bwd, int *last_bwd)
{
    const fold_sched_entry_t *last = NULL;
    *fwd = *bwd = 0;
    for (int i = 0; i < FOLD_SCHED_CACHE_SIZE; i++) {
        const fold_sched_entry_t *e = &comm->cache[i];
        if (e->last_use != 0 && e->alg == &fold_alg_cma && e->args.count == count) {
            *(e->args.backward ? bwd : fwd) += 1;
            last = last == NULL || e->last_use > last->last_use ? e : last;
        }
    }
    *last_bwd = last != NULL && last->args.backward;
}

static int alternate_rank(fold_context_t *ctx, int rank, int size, void *arg)
{
    const fold_op_t *affine = arg;
    fold_comm_h w = fold_comm_world(ctx);
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma@" SEGMENT);
    fold_config_set(ctx, "REDUCE_ALG", "cma@" SEGMENT);
    int bad = 0;
    for (int kind = 0; kind < 4 && !bad; kind++) {
        const int allreduce = kind < 2, inplace = kind % 2;
        for (int k = 0; k < CALLS && !bad; k++) {
            bad = one_call(w, rank, size, *affine, allreduce, inplace, COUNT);
        }
    }
    /* Each shape ran a multiple of 2 calls, forward first: both directions cached,
     * the last call backward. Shapes: allreduce out of place and in place, and a
     * reduce's the same on the root; the others' reduce is one shape (no OUT). */
    int fwd, bwd, last_bwd;
    const int shapes = rank == size - 1 ? 4 : 3;
    cached(w, COUNT, &fwd, &bwd, &last_bwd);
    if (!bad && (fwd != shapes || bwd != shapes || !last_bwd)) {
        fprintf(stderr, "rank %d of %d: %d schedules forward, %d backward, the last %s\n",
                rank, size, fwd, bwd, last_bwd ? "backward" : "forward");
        bad = 1;
    }
    /* One chunk per owner: the same schedule either way, so only one. */
    fold_config_set(ctx, "ALLREDUCE_ALG", "cma@128k");
    const size_t one_chunk = 9000;   /* past the tiny-message path, under 2 segments */
    for (int k = 0; k < CALLS && !bad; k++) {
        bad = one_call(w, rank, size, *affine, 1, 0, one_chunk);
    }
    cached(w, one_chunk, &fwd, &bwd, &last_bwd);
    if (!bad && (fwd != 1 || bwd != 0)) {
        fprintf(stderr, "rank %d of %d, one chunk each: %d schedules forward, %d backward\n",
                rank, size, fwd, bwd);
        bad = 1;
    }
    return bad;
}

Test(cma_alternate, calls_of_a_shape_alternate_and_stay_right)
{
    fold_op_t affine;
    cr_assert_eq(fold_op_create(ref_affine_fn, NULL, 0, &affine), FOLD_OK);
    cr_expect_eq(lh_run(2, alternate_rank, &affine), 0, "2 ranks");
    cr_expect_eq(lh_run(3, alternate_rank, &affine), 0, "3 ranks");
    fold_op_free(affine);
}
