/*
 * Single-copy reduce and allreduce on one node: the ranks read each other's
 * buffers through the kernel (cross-memory attach, runtime/node/peer.c) instead
 * of copying into the node segment and out again.
 *
 * Rank b owns block b of the message (p nearly equal blocks). It reads every other
 * rank's part of block b straight from their IN, chunk by chunk into two TMP slots,
 * and folds the rows in rank order into its result: its own OUT (allreduce, or the
 * root of a reduce), or a TMP slot it then writes into the root's OUT. An
 * allreduce then reads every other block straight from its owner's OUT.
 *
 *   step                         rank b (owner of block b)
 *   1 publish                    post WRITTEN: IN and OUT are readable
 *   2 fold block b, chunk c      wait WRITTEN of r; read IN_r[c] -> TMP; fold
 *                                (reduce, not root: write TMP -> OUT_root[c])
 *   3 results                    post PUBLISHED; for each owner o: wait its
 *     (allreduce)                PUBLISHED, read OUT_o[block o] -> OUT[block o]
 *   4 finish                     post DONE; wait DONE of every rank (no rank may
 *                                return while another still reads its buffers)
 *
 * Every rank folds the rows in the same rank order, and every block is folded
 * once, so all ranks get the same bits, for any op (commutative or not). Across
 * nodes it builds dpml, as shm_flat does (selection reports dpml there).
 */
#include "alg.h"
#include "alg_dpml.h"
#include "node/topo.h"

#include <fold/fold_status.h>

/* Block b of n elements over p ranks: [*lo, *lo + *len). */
static void block_of(size_t n, int p, int b, size_t *lo, size_t *len)
{
    size_t base = n / (size_t)p, rem = n % (size_t)p, ub = (size_t)b;
    *lo  = ub * base + (ub < rem ? ub : rem);
    *len = base + (ub < rem ? 1 : 0);
}

/* Folds block b chunk by chunk into `final` (OUT, or TMP written to the root). */
static void fold_block(fold_sched_t *s, const fold_coll_args_t *a, size_t lo, size_t len)
{
    const fold_topo_t *t = a->topo;
    const int p = a->size, me = a->rank;
    const int to_root = a->coll == FOLD_COLL_REDUCE && me != a->root;
    const size_t seg = a->seg_count;
    const int depth = a->depth > 1 ? a->depth : 2;
    for (size_t c = 0, k = 0; c < len; c += seg, k++) {
        size_t off = lo + c, m = len - c < seg ? len - c : seg;
        size_t slot = (k % (size_t)depth) * 2 * seg;
        fold_ref_t tmp_a = fold_ref_tmp(slot), tmp_b = fold_ref_tmp(slot + seg);
        fold_ref_t acc = fold_ref_in(off);
        if (me != 0) {
            fold_sched_peer_read(s, 0, t->local_of[0], FOLD_BUF_IN, off, tmp_a, m);
            acc = tmp_a;
        }
        for (int r = 1; r < p; r++) {
            fold_ref_t row = fold_ref_in(off);
            if (r != me) {
                fold_sched_peer_read(s, r, t->local_of[r], FOLD_BUF_IN, off, tmp_b, m);
                row = tmp_b;
            }
            fold_ref_t dst = (r < p - 1 || to_root) ? tmp_a : fold_ref_out(off);
            fold_sched_reduce(s, acc, row, dst, m);
            acc = tmp_a;
        }
        if (to_root) {
            fold_sched_peer_write(s, tmp_a, a->root, t->local_of[a->root], off, m);
        }
    }
}

static int cma_build(const fold_coll_args_t *a, fold_sched_t *s)
{
    const fold_topo_t *t = a->topo;
    const int p = a->size, me = a->rank;
    const size_t n = a->count;
    const int allreduce = a->coll == FOLD_COLL_ALLREDUCE;
    const int has_out = allreduce || me == a->root;

    if (t == NULL || t->size != p || a->root < 0 || a->root >= p) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (t->nnodes > 1) {
        return fold_dpml_build(a, s, 0);
    }
    if (n == 0) {
        return s->status;
    }
    if (p == 1) {
        if (!a->inplace) {
            fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), n);
        }
        return s->status;
    }
    /* 1. IN and OUT are published (the executor did it when the call took its turn). */
    fold_sched_peer_publish(s, FOLD_FLAG_WRITTEN, n);

    /* 2. This rank's block, from every rank's IN. */
    size_t lo, len;
    block_of(n, p, me, &lo, &len);
    for (int r = 0; r < p && len > 0; r++) {
        if (r != me) {
            fold_sched_shm_wait(s, r, t->local_of[r], FOLD_FLAG_WRITTEN, 1, fold_ref_peer(lo),
                                len);
        }
    }
    fold_block(s, a, lo, len);
    /* What the owner's posts must follow: its result, wherever it went. A rank
     * with an empty block guards a TMP element nothing else touches. */
    const size_t spare = (size_t)(a->depth > 1 ? a->depth : 2) * 2 * a->seg_count;
    fold_ref_t mine = len == 0 ? fold_ref_tmp(spare)
                    : has_out ? fold_ref_out(lo) : fold_ref_peer(lo);
    size_t mine_len = len == 0 ? 1 : len;

    /* 3. Allreduce: every other block from its owner's OUT. */
    if (allreduce) {
        fold_sched_shm_post(s, FOLD_FLAG_PUBLISHED, 1, mine, mine_len);
        for (int o = 0; o < p; o++) {
            size_t olo, olen;
            block_of(n, p, o, &olo, &olen);
            if (o == me || olen == 0) {
                continue;
            }
            fold_sched_shm_wait(s, o, t->local_of[o], FOLD_FLAG_PUBLISHED, 1,
                                fold_ref_peer(olo), olen);
            for (size_t c = 0; c < olen; c += a->seg_count) {
                size_t m = olen - c < a->seg_count ? olen - c : a->seg_count;
                fold_sched_peer_read(s, o, t->local_of[o], FOLD_BUF_OUT, olo + c,
                                     fold_ref_out(olo + c), m);
            }
        }
        mine = fold_ref_out(0);
        mine_len = n;
    }
    /* 4. Nobody returns while another rank may still read or write its buffers. */
    fold_sched_shm_post(s, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, mine, mine_len);
    fold_sched_shm_wait(s, -1, -1, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, mine, mine_len);
    return s->status;
}

const fold_alg_t fold_alg_cma = {
    .name        = "cma",
    .description = "single copy on one node: each rank folds its block straight from "
                   "the others' buffers (cross-memory attach) and, in an allreduce, "
                   "reads the other blocks from their owners (dpml across nodes)",
    .allreduce   = cma_build,
    .reduce      = cma_build,
    .flags       = FOLD_ALG_NODE_AWARE | FOLD_ALG_ORDERED | FOLD_ALG_SINGLE_COPY,
};
