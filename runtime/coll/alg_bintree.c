/*
 * Pipelined binary-tree reduce (Tanaka section 3). The tree is in-order over
 * positions (tree_math.h): a node's left subtree holds the positions below it and
 * its right subtree those above, so per segment a node computes L op x op R:
 * receive the left child's partial and fold x onto it, receive the right child's
 * and fold it on, send the result to the parent. Partials pass through two TMP
 * slots per segment in flight (depth of them).
 *
 * p = 7, positions 0..6: tree root 3, inner nodes 1 and 5, leaves 0, 2, 4, 6.
 * Cell = hop carrying the segment; a rank may send and receive in one step:
 *
 *            t0        t1        t2        t3        t4        t5
 *   seg 0   0>1 4>5   2>1 6>5   1>3       5>3
 *   seg 1                       0>1 4>5   2>1 6>5   1>3       5>3
 *   seg 2                                           0>1 4>5   2>1 6>5
 *
 * Commutative ops: positions are ranks rotated so the root sits at the tree root.
 * Non-commutative ops: positions are ranks, so the tree root computes the ordered
 * result and forwards each segment to the root when it is not the root itself.
 */
#include "alg.h"
#include "tree_math.h"

typedef struct bintree_map {
    int size;
    int shift;   /* rank = (position + shift) mod size */
} bintree_map_t;

static int bintree_rank(const bintree_map_t *m, int pos)
{
    return pos < 0 ? -1 : fold_rank_of_vrank(pos, m->shift, m->size);
}

static int bintree_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const int    size  = args->size;
    const int    rank  = args->rank;
    const int    root  = args->root;
    const size_t count = args->count;
    const size_t seg   = args->seg_count;
    const size_t depth = args->depth > 0 ? (size_t)args->depth : 1;
    const size_t nsegs = fold_seg_num(count, seg);
    const size_t slot_len = nsegs > 1 ? seg : count;
    const int    top = fold_bintree_root(size);
    /* Commutative: position top is the root. Ordered: position == rank. */
    const bintree_map_t map = {size, args->commutative ? fold_vrank(root, top, size) : 0};
    const fold_bintree_node_t node = fold_bintree_node(fold_vrank(rank, map.shift, size), size);
    const int    left   = bintree_rank(&map, node.left);
    const int    right  = bintree_rank(&map, node.right);
    const int    parent = bintree_rank(&map, node.parent);
    const int    top_rank = bintree_rank(&map, top);
    const int    final = rank == root && rank == top_rank;   /* result straight into OUT */

    for (size_t k = 0; k < nsegs; k++) {
        size_t     off   = k * seg;
        size_t     len   = fold_seg_len(count, seg, k);
        fold_ref_t slot_l = fold_ref_tmp(2 * (k % depth) * slot_len);
        fold_ref_t slot_r = fold_ref_add(slot_l, slot_len);
        fold_ref_t part  = fold_ref_in(off);
        if (left >= 0) {
            fold_ref_t dst = final ? fold_ref_out(off) : slot_l;
            fold_sched_recv(s, left, slot_l, len);
            fold_sched_reduce(s, slot_l, part, dst, len);
            part = dst;
        }
        if (right >= 0) {
            fold_ref_t dst = final ? fold_ref_out(off) : (left >= 0 ? slot_l : slot_r);
            fold_sched_recv(s, right, slot_r, len);
            fold_sched_reduce(s, part, slot_r, dst, len);
            part = dst;
        }
        fold_sched_ordered_forward(s, rank, root, parent, top_rank, part, off, len);
    }
    return s->status;
}

const fold_alg_t fold_alg_bintree = {
    .name        = "bintree",
    .description = "pipelined in-order binary tree (L op x op R); rank-ordered for any op",
    .allreduce   = NULL,
    .reduce      = bintree_reduce,
    .flags       = FOLD_ALG_ORDERED,
};
