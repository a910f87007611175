/*
 * Virtual world rectangles (Kumar et al., sec. 4): the context's ranks laid out as
 * the 2-, 3- and 4-D grids MPI_Dims_create would give for the job, dimension 0
 * varying fastest (the paper's Fig. 2: 80 ranks are 5 x 4 x 4, ranks 0..4 a row).
 * A communicator whose members form a sub-rectangle of one of them, walked in any
 * order of its dimensions, is stored as its corner and extents.
 */
#ifndef FOLD_GROUP_WORLD_RECT_H
#define FOLD_GROUP_WORLD_RECT_H

#include "rank_piece.h"

#define FOLD_WORLD_MAX_DIMS 4

typedef struct fold_world_rect {
    int ndims;
    int dims[FOLD_WORLD_MAX_DIMS];     /* non-increasing, as MPI_Dims_create */
    int stride[FOLD_WORLD_MAX_DIMS];   /* context-rank step along each dimension */
} fold_world_rect_t;

typedef struct fold_world_rects {
    int               size;            /* the ranks they tile; 0: not built yet */
    int               count;
    fold_world_rect_t rect[FOLD_WORLD_MAX_DIMS - 1];   /* 2-D, 3-D, 4-D: those with no
                                                          dimension of 1 */
} fold_world_rects_t;

/* MPI_Dims_create(size, ndims) with every dimension free: the most balanced
 * factorisation, largest first (each prime, largest first, goes to the smallest
 * dimension so far). */
void fold_dims_create(int size, int ndims, int *dims);

void fold_world_rects_init(fold_world_rects_t *w, int size);

/* Whether ranks[0 .. n) (context ranks below the world's size) are a sub-rectangle
 * of w walked dimension by dimension from its lower-left corner; if so fills p
 * (first = 0). The paper's steps 1-8: bounding box, size check, traversal order
 * from the neighbours of the corner, then every member checked. O(n * dims). */
int  fold_world_rect_match(const fold_world_rect_t *w, const int *ranks, int n,
                           fold_rank_piece_t *p);

#endif
