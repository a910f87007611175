/*
 * Binomial-tree reduce (Shan et al. section III-B; Tanaka section 3): vrank v
 * receives from v + 1, v + 2, v + 4, ... below its lowest set bit, reduces each
 * into its accumulator, then sends to v with that bit cleared.
 *
 * No superfluous copy: the first reduction reads IN and writes the accumulator
 * (OUT at the root, TMP elsewhere) and a leaf sends IN itself. Messages are cut
 * into segments so that each child's data passes through `depth` TMP slots.
 *
 * Non-commutative ops: the tree is built over real ranks rooted at rank 0, where
 * every subtree is a contiguous rank range and each child's range lies right of
 * the accumulated one (acc op child); rank 0 then forwards the result to the root.
 */
#include "alg.h"
#include "tree_math.h"

static int binomial_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const int    size  = args->size;
    const int    rank  = args->rank;
    const int    root  = args->root;
    const size_t count = args->count;
    const size_t seg   = args->seg_count;
    const int    tree_root = args->commutative ? root : 0;
    const int    v = fold_vrank(rank, tree_root, size);

    /* At the root the result is built straight in OUT; in place that is IN too,
     * which is fine because each reduction reads IN[i] before writing OUT[i]. */
    const int        at_root  = rank == root;
    const fold_ref_t acc      = at_root ? fold_ref_out(0) : fold_ref_tmp(0);
    const size_t     tmp_base = at_root ? 0 : count;

    int children[FOLD_BINOMIAL_MAX_CHILDREN];
    int nchildren = fold_binomial_children(v, size, children);
    fold_ref_t mine = fold_ref_in(0);
    for (int i = 0; i < nchildren; i++) {
        int child = fold_rank_of_vrank(children[i], tree_root, size);
        fold_sched_recv_reduce_segs(s, child, mine, acc, count, seg, args->depth, tmp_base, 0);
        mine = acc;
    }

    int parent = fold_binomial_parent(v, size);
    if (parent >= 0) {
        fold_sched_send_segs(s, fold_rank_of_vrank(parent, tree_root, size), mine, count, seg);
    } else if (rank != root) {
        fold_sched_send_segs(s, root, mine, count, seg);    /* ordered: rank 0 forwards */
    } else if (nchildren == 0) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), count);   /* size 1 */
    }
    if (at_root && rank != tree_root) {
        fold_sched_recv_segs(s, tree_root, fold_ref_out(0), count, seg);
    }
    return s->status;
}

const fold_alg_t fold_alg_binomial = {
    .name        = "binomial",
    .description = "binomial tree, segmented; rank-ordered via a rank-0 tree for non-commutative ops",
    .allreduce   = NULL,
    .reduce      = binomial_reduce,
    .flags       = FOLD_ALG_ORDERED,
};
