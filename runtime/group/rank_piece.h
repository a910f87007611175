/*
 * One piece of a compressed rank map (Kumar et al., sec. 4): comm ranks
 * first .. first + size - 1 are the context ranks
 *
 *     base + c_0 * stride_0 + c_1 * stride_1 + ...,   0 <= c_l < extent_l,
 *
 * walked with c_0 fastest. A row or a rank range is one level; a strided pattern
 * is one level with a larger stride; a sub-rectangle of an n-D grid is n levels
 * whose strides are the grid's (the paper's Fig. 1 with the lower-left corner's
 * rank folded into base). Pure functions, no allocation.
 */
#ifndef FOLD_GROUP_RANK_PIECE_H
#define FOLD_GROUP_RANK_PIECE_H

/* 6: the paper's ABCDET split test runs on a 6-D world. */
#define FOLD_PIECE_LEVELS 6

typedef struct fold_rank_piece {
    int first;                          /* comm rank of its first member */
    int size;                           /* members: the product of the extents */
    int base;                           /* context rank of its first member */
    int nlevels;                        /* 1 .. FOLD_PIECE_LEVELS */
    int extent[FOLD_PIECE_LEVELS];      /* members along each level, fastest first */
    int stride[FOLD_PIECE_LEVELS];      /* context-rank step along each level */
} fold_rank_piece_t;

/* Context rank of the piece's member number i (0 <= i < size). */
static inline int fold_piece_at(const fold_rank_piece_t *p, int i)
{
    int x = p->base;
    for (int l = 0; l < p->nlevels - 1; l++) {
        int q = i / p->extent[l];
        x += (i - q * p->extent[l]) * p->stride[l];
        i  = q;
    }
    return x + i * p->stride[p->nlevels - 1];
}

/* Member number of context rank x in the piece, or -1 when x is not in it. */
int fold_piece_index(const fold_rank_piece_t *p, int x);

/* The strided pattern at the start of ranks[0 .. n): the longest prefix that one
 * piece describes, found level by level (a run of equal steps, then repeats of
 * that block at a fixed step, ...). Fills p (first = 0) and returns its size, at
 * least 1. O(size * levels). */
int fold_piece_grow(const int *ranks, int n, fold_rank_piece_t *p);

/* Whether fold_piece_index finds every member of p (it divides greedily, which
 * every grid's sub-rectangle allows but not every set of strides). O(size). */
int fold_piece_reversible(const fold_rank_piece_t *p);

#endif
