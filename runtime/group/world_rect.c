/*
 * Virtual world rectangles: MPI_Dims_create's factorisation and the sub-rectangle
 * test of Kumar et al.
 */
#include "world_rect.h"

#include <limits.h>
#include <string.h>

void fold_dims_create(int size, int ndims, int *dims)
{
    int primes[32], nprimes = 0;
    for (int f = 2, rest = size; rest > 1;) {
        if ((long)f * f > rest) {
            primes[nprimes++] = rest;
            break;
        }
        if (rest % f == 0) {
            primes[nprimes++] = f;
            rest /= f;
        } else {
            f++;
        }
    }
    for (int d = 0; d < ndims; d++) {
        dims[d] = 1;
    }
    for (int i = nprimes - 1; i >= 0; i--) {   /* found in increasing order */
        int smallest = 0;
        for (int d = 1; d < ndims; d++) {
            smallest = dims[d] < dims[smallest] ? d : smallest;
        }
        dims[smallest] *= primes[i];
    }
    for (int d = 1; d < ndims; d++) {           /* largest first */
        for (int k = d; k > 0 && dims[k - 1] < dims[k]; k--) {
            int t = dims[k];
            dims[k] = dims[k - 1];
            dims[k - 1] = t;
        }
    }
}

void fold_world_rects_init(fold_world_rects_t *w, int size)
{
    memset(w, 0, sizeof(*w));
    w->size = size;
    for (int nd = 2; nd <= FOLD_WORLD_MAX_DIMS; nd++) {
        fold_world_rect_t *r = &w->rect[w->count];
        r->ndims = nd;
        fold_dims_create(size, nd, r->dims);
        int ok = 1, step = 1;
        for (int d = 0; d < nd; d++) {
            ok &= r->dims[d] > 1;
            r->stride[d] = step;
            step *= r->dims[d];
        }
        w->count += ok;
    }
}

static int coord(const fold_world_rect_t *w, int rank, int d)
{
    return rank / w->stride[d] % w->dims[d];
}

int fold_world_rect_match(const fold_world_rect_t *w, const int *ranks, int n,
                          fold_rank_piece_t *p)
{
    int lo[FOLD_WORLD_MAX_DIMS], hi[FOLD_WORLD_MAX_DIMS];
    for (int d = 0; d < w->ndims; d++) {
        lo[d] = INT_MAX;
        hi[d] = -1;
    }
    for (int i = 0; i < n; i++) {             /* 1-2: the bounding box */
        for (int d = 0; d < w->ndims; d++) {
            int c = coord(w, ranks[i], d);
            lo[d] = c < lo[d] ? c : lo[d];
            hi[d] = c > hi[d] ? c : hi[d];
        }
    }
    long volume = 1;
    for (int d = 0; d < w->ndims; d++) {
        volume *= hi[d] - lo[d] + 1;
    }
    if (volume != n) {                        /* 3-4: holes or duplicates */
        return 0;
    }
    for (int d = 0; d < w->ndims; d++) {
        if (coord(w, ranks[0], d) != lo[d]) {
            return 0;                         /* not walked from the corner */
        }
    }
    p->first   = 0;
    p->size    = n;
    p->base    = ranks[0];
    p->nlevels = 0;
    int used = 0;
    long block = 1;
    while (block < n) {                       /* 5: order from the corner's neighbours */
        int next = ranks[block], dim = -1;
        for (int d = 0; d < w->ndims; d++) {
            int c = coord(w, next, d);
            if (c != lo[d]) {
                if (dim >= 0 || c != lo[d] + 1 || (used >> d & 1)) {
                    return 0;
                }
                dim = d;
            }
        }
        if (dim < 0) {
            return 0;
        }
        used |= 1 << dim;
        p->extent[p->nlevels] = hi[dim] - lo[dim] + 1;
        p->stride[p->nlevels] = w->stride[dim];
        p->nlevels++;
        block *= hi[dim] - lo[dim] + 1;
    }
    if (p->nlevels == 0) {                    /* one member */
        p->extent[0] = 1;
        p->stride[0] = 1;
        p->nlevels   = 1;
    }
    for (int i = 0; i < n; i++) {             /* 6-8: no shuffle */
        if (fold_piece_at(p, i) != ranks[i]) {
            return 0;
        }
    }
    return 1;
}
