/*
 * Single-copy reduce and allreduce on one node: the ranks read and write each
 * other's buffers (through a mapping of fold memory, or the kernel's cross-memory
 * attach: runtime/node/peer.c) instead of copying into the node segment and out
 * again.
 *
 * k owners (args->leaders, chosen by the cost model: one owner pays one kernel
 * call per chunk, several share the copying) split the message into k nearly equal
 * blocks. Owner j reads every other rank's part of block j straight from their IN,
 * chunk by chunk into two TMP slots, and folds the rows in rank order into its
 * result: its own OUT (allreduce, or the root of a reduce), or a TMP slot it then
 * writes into the root's OUT. An allreduce's owner then writes each folded chunk
 * into every other rank's OUT. Owners are ranks 0..k-1 (allreduce), or the root and
 * then the other ranks in order (reduce). A reduce's root writes nothing into
 * another rank, so the cost model may give it a larger block (root_weight).
 *
 * Results go to the ranks that want them (push), not fetched from the owner
 * (pull): a rank that read an owner's OUT kept its lines in its cache, and the
 * owner's next fold into them had to take each line back first. With the cores
 * apart (no shared L3), pull ran a 2-rank allreduce of 64 KiB-4 MiB 1.6-2.4x slower,
 * and it needed one more flag hop (the owner's "published").
 *
 *   step                         owner j                       others
 *   1 publish                    post WRITTEN: IN, OUT reachable (same)
 *   2 fold block j, chunk c      wait WRITTEN of r; read IN_r[c]
 *                                -> TMP; fold into OUT[c] (reduce,
 *                                not root: TMP -> OUT_root[c]);
 *                                allreduce: OUT[c] -> OUT_r[c]
 *   3 finish                     post DONE; wait DONE of every rank (no rank may
 *                                return while another still reads or writes its
 *                                buffers; a rank's OUT is whole once all are done)
 *
 * Every block is folded once, in rank order, so all ranks get the same bits, for
 * any op (commutative or not). In place, owner j writes OUT_r[c] (= IN_r[c]) only
 * after reading it, and only owner j reads block j of any IN. Across nodes it
 * builds dpml, as shm_flat does (selection reports dpml there).
 */
#include "alg.h"
#include "alg_dpml.h"
#include "node/topo.h"

#include <fold/fold_status.h>

static int owner_count(const fold_coll_args_t *a)
{
    return a->leaders < 1 ? 1 : a->leaders > a->size ? a->size : a->leaders;
}

/* Block b of the n elements: [*lo, *lo + *len). The k owners get nearly equal
 * blocks, except that the root of a reduce, block 0, gets root_weight percent of
 * another owner's (it writes nothing back into another rank). */
static void block_of(const fold_coll_args_t *a, int b, size_t *lo, size_t *len)
{
    const size_t n = a->count, k = (size_t)owner_count(a);
    size_t first = 0;
    if (a->coll == FOLD_COLL_REDUCE && a->root_weight > 0 && k > 1) {
        double w = a->root_weight / 100.0;
        first = (size_t)((double)n * w / (w + (double)(k - 1)));
    }
    if (first == 0) {
        size_t base = n / k, rem = n % k, ub = (size_t)b;
        *lo  = ub * base + (ub < rem ? ub : rem);
        *len = base + (ub < rem ? 1 : 0);
        return;
    }
    if (b == 0) {
        *lo  = 0;
        *len = first;
        return;
    }
    size_t rest = n - first, base = rest / (k - 1), rem = rest % (k - 1), ub = (size_t)b - 1;
    *lo  = first + ub * base + (ub < rem ? ub : rem);
    *len = base + (ub < rem ? 1 : 0);
}

/* The block `rank` owns, or -1. */
static int owned_block(const fold_coll_args_t *a, int rank)
{
    int j = a->coll == FOLD_COLL_ALLREDUCE ? rank
          : rank == a->root                ? 0
                                           : (rank < a->root ? rank : rank - 1) + 1;
    return j < owner_count(a) ? j : -1;
}

/* A chunk's two TMP slots of seg_count elements, TMP_A and TMP_B. The schedule is
 * serial (cma_build), so every chunk reuses them: more slots only let the executor
 * read the next chunks before folding this one, and the fold then found its TMP gone
 * from the cache (with 4 slots 2-rank 4 MiB reduce took 1.25x the time). */

/* Folds block b chunk by chunk into `final` (OUT, or TMP written to the root). */
static void fold_block(fold_sched_t *s, const fold_coll_args_t *a, size_t lo, size_t len)
{
    const fold_topo_t *t = a->topo;
    const int p = a->size, me = a->rank;
    const int to_root = a->coll == FOLD_COLL_REDUCE && me != a->root;
    const size_t seg = a->seg_count;
    /* Out of place, an owner whose result stays in its OUT sums there from the start:
     * the first peer row is read straight into OUT, so the kernel's copy, not the
     * fold, brings OUT's lines into the cache, and the fold only reads and writes
     * lines it holds (with TMP, the fold fetched each OUT line before writing it). */
    const int into_out = !to_root && !a->inplace;
    const fold_ref_t tmp_a = fold_ref_tmp(0), tmp_b = fold_ref_tmp(seg);
    const size_t chunks = (len + seg - 1) / seg;
    for (size_t i = 0; i < chunks; i++) {
        size_t c = (a->backward ? chunks - 1 - i : i) * seg;
        size_t off = lo + c, m = len - c < seg ? len - c : seg;
        fold_ref_t sum = into_out ? fold_ref_out(off) : tmp_a;   /* the rows so far */
        fold_ref_t acc = fold_ref_in(off);
        int first_read = into_out;   /* the next peer row may go straight into sum */
        if (me != 0) {
            fold_sched_peer_read(s, 0, t->local_of[0], FOLD_BUF_IN, off, sum, m);
            acc = sum;
            first_read = 0;
        }
        for (int r = 1; r < p; r++) {
            fold_ref_t row = fold_ref_in(off);
            if (r != me) {
                row = first_read ? sum : tmp_b;
                fold_sched_peer_read(s, r, t->local_of[r], FOLD_BUF_IN, off, row, m);
                first_read = 0;
            }
            fold_ref_t dst = (r < p - 1 || to_root) ? sum : fold_ref_out(off);
            fold_sched_reduce(s, acc, row, dst, m);
            acc = sum;
        }
        if (to_root) {
            fold_sched_peer_write(s, tmp_a, a->root, t->local_of[a->root], off, m);
        }
        for (int r = 0; r < p && a->coll == FOLD_COLL_ALLREDUCE; r++) {
            if (r != me) {
                fold_sched_peer_write(s, fold_ref_out(off), r, t->local_of[r], off, m);
            }
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
    /* Every copy and fold of this rank runs on its core, so nothing overlaps: a chunk
     * is read, folded and written on before the next is read, while it is in the
     * cache. Run as they became ready, all the chunks' reads went first; in order,
     * 2-rank allreduce of 2-8 MiB took 0.77-0.86x the time, reduce 0.89-0.90x. */
    fold_sched_serial(s);
    /* 1. IN and OUT are published (the executor did it when the call took its turn). */
    fold_sched_peer_publish(s, FOLD_FLAG_WRITTEN, n);

    /* 2. This rank's block, if it owns one, from every rank's IN. */
    const int j = owned_block(a, me);
    size_t lo = 0, len = 0;
    if (j >= 0) {
        block_of(a, j, &lo, &len);
    }
    for (int r = 0; r < p && len > 0; r++) {
        if (r != me) {
            fold_sched_shm_wait(s, r, t->local_of[r], FOLD_FLAG_WRITTEN, 1, fold_ref_peer(lo),
                                len);
        }
    }
    fold_block(s, a, lo, len);
    /* What this rank's last post must follow: its result, wherever it went (the
     * peer writes into the others' OUT follow its folds). A rank without a block
     * guards a TMP element nothing else touches. */
    const size_t spare = 2 * a->seg_count;
    fold_ref_t mine = len == 0 ? fold_ref_tmp(spare)
                    : allreduce || !has_out ? fold_ref_peer(lo) : fold_ref_out(lo);
    size_t mine_len = len == 0 ? 1 : len;

    /* 3. Nobody returns while another rank may still read or write its buffers. */
    fold_sched_shm_post(s, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, mine, mine_len);
    fold_sched_shm_wait(s, -1, -1, FOLD_FLAG_DONE, FOLD_SHM_CALL_DONE, mine, mine_len);
    return s->status;
}

const fold_alg_t fold_alg_cma = {
    .name        = "cma",
    .description = "single copy on one node: each of `leaders` owners folds its block "
                   "straight from the others' buffers (fold memory or cross-memory "
                   "attach); an allreduce's owners write their blocks into the others' "
                   "OUT (dpml across nodes)",
    .allreduce   = cma_build,
    .reduce      = cma_build,
    .flags       = FOLD_ALG_NODE_AWARE | FOLD_ALG_ORDERED | FOLD_ALG_SINGLE_COPY |
                   FOLD_ALG_ALTERNATES,
};
