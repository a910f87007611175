/*
 * Peer and offset maths for the tree- and pipeline-shaped reductions. Pure
 * functions of (rank, size, root, ...): no schedule, no transport, unit tested in
 * tests/coll/test_tree_math.c.
 *
 * A virtual rank (vrank) renumbers the ranks so that a chosen rank is 0; every
 * shape below is described over vranks (or, for the binary tree, positions) and
 * the algorithms translate back.
 */
#ifndef FOLD_TREE_MATH_H
#define FOLD_TREE_MATH_H

#include <stddef.h>

static inline int fold_vrank(int rank, int root, int size)
{
    return (int)(((long)rank - root + size) % size);
}

static inline int fold_rank_of_vrank(int vrank, int root, int size)
{
    return (int)(((long)vrank + root) % size);
}

/* ---- segments ------------------------------------------------------------ */

/* `count` elements cut into segments of `seg` (the last one may be short). */
static inline size_t fold_seg_num(size_t count, size_t seg)
{
    return seg ? (count + seg - 1) / seg : (count ? 1 : 0);
}

static inline size_t fold_seg_len(size_t count, size_t seg, size_t k)
{
    size_t off = seg ? k * seg : 0;
    size_t len = seg ? seg : count;
    return count - off < len ? count - off : len;
}

/* ---- binomial tree over vranks, rooted at vrank 0 -------------------------- */

/* Enough for any int size. */
#define FOLD_BINOMIAL_MAX_CHILDREN 32

/* vrank with its lowest set bit cleared; -1 for vrank 0. */
int fold_binomial_parent(int vrank, int size);

/* Fills children in the order the parent combines them: vrank + 1, + 2, + 4, ...
 * The subtree of vrank v covers the vranks [v, v + lowbit(v)) below size, so
 * with this order the accumulated range stays contiguous and each child's range
 * lies to its right. Returns the number of children. */
int fold_binomial_children(int vrank, int size, int children[FOLD_BINOMIAL_MAX_CHILDREN]);

/* ---- chain over vranks: size-1 -> size-2 -> ... -> 0 -------------------- */

/* The rank that sends to vrank (vrank + 1), or -1 at the tail. */
int fold_chain_upstream(int vrank, int size);
/* The rank vrank sends to (vrank - 1), or -1 at the end of the chain (vrank 0). */
int fold_chain_downstream(int vrank, int size);

/* ---- in-order binary tree over positions 0..size-1 ----------------------- */

/*
 * Each subtree covers a contiguous range [lo, hi) of positions, its root is the
 * middle position lo + (hi - lo) / 2, the left subtree is the part below it and
 * the right subtree the part above it. So L op x_mid op R is the range's ordered
 * result, and the depth is floor(log2(size)).
 */
typedef struct fold_bintree_node {
    int parent;   /* -1 at the tree root */
    int left;     /* -1: none */
    int right;    /* -1: none */
} fold_bintree_node_t;

int fold_bintree_root(int size);
fold_bintree_node_t fold_bintree_node(int pos, int size);

/* ---- greedy pipelined reduction (Lowery-Langou) --------------------------- */

typedef struct fold_greedy_xfer {
    size_t seg;    /* segment index */
    size_t step;   /* time step in the unidirectional model, from 0 */
    int    peer;   /* communicator rank */
    int    send;   /* 1: send seg to peer; 0: receive seg from peer and reduce it */
} fold_greedy_xfer_t;

/*
 * The transfers of `rank`, in the order it performs them, for a reduction of
 * nsegs segments to `root`. Every rank computes the same global plan: a process
 * sends segments strictly in order and keeps c = the number it has sent; the
 * root's c is the first segment still held by more than one process. At each
 * step, for each segment s, the processes with c == s (vrank order, root first)
 * pair up and the odd ones receive s from the even ones that follow them. With one
 * segment that is the binomial tree.
 *
 * On success returns 0 with *xfers malloc'd (NULL when empty; the caller frees),
 * *nxfers its length and, when nsteps is not NULL, *nsteps the plan's total number
 * of steps. Returns FOLD_ERR_NO_MEMORY or FOLD_ERR_INVALID_ARG otherwise, leaving
 * the outputs untouched.
 */
int fold_greedy_plan(int rank, int size, int root, size_t nsegs,
                     fold_greedy_xfer_t **xfers, size_t *nxfers, size_t *nsteps);
/* The same from rank's own run of the simulation, never the kept one (the
 * reference for tests). */
int fold_greedy_plan_alone(int rank, int size, int root, size_t nsegs,
                           fold_greedy_xfer_t **xfers, size_t *nxfers, size_t *nsteps);

#endif
