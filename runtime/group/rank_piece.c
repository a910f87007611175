/*
 * Pieces of compressed rank maps: membership by greedy division, and detection of
 * the strided pattern at the start of a rank list.
 */
#include "rank_piece.h"

#include <stdlib.h>

static int magnitude(int v)
{
    return v < 0 ? -v : v;
}

int fold_piece_index(const fold_rank_piece_t *p, int x)
{
    /* Levels by decreasing step: on a grid each step exceeds everything the
     * smaller ones can add, so dividing greedily recovers the coordinates. */
    int order[FOLD_PIECE_LEVELS];
    for (int l = 0; l < p->nlevels; l++) {
        int k = l;
        while (k > 0 && magnitude(p->stride[order[k - 1]]) < magnitude(p->stride[l])) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = l;
    }
    long d = (long)x - p->base;
    int coord[FOLD_PIECE_LEVELS];
    for (int k = 0; k < p->nlevels; k++) {
        int l = order[k];
        long c = p->stride[l] != 0 ? d / p->stride[l] : 0;
        if (c < 0 || c >= p->extent[l]) {
            return -1;
        }
        coord[l] = (int)c;
        d -= c * p->stride[l];
    }
    if (d != 0) {
        return -1;
    }
    int i = 0;
    for (int l = p->nlevels - 1; l >= 0; l--) {
        i = i * p->extent[l] + coord[l];
    }
    return fold_piece_at(p, i) == x ? i : -1;
}

/* Whether ranks[t * len + j] == ranks[j] + t * step for every j < len. */
static int block_repeats(const int *ranks, int len, int t, long step)
{
    const int *block = ranks + (size_t)t * (size_t)len;
    for (int j = 0; j < len; j++) {
        if ((long)block[j] != (long)ranks[j] + t * step) {
            return 0;
        }
    }
    return 1;
}

int fold_piece_grow(const int *ranks, int n, fold_rank_piece_t *p)
{
    p->first     = 0;
    p->base      = ranks[0];
    p->nlevels   = 1;
    p->extent[0] = 1;
    p->stride[0] = 1;
    if (n == 1 || ranks[1] == ranks[0]) {
        p->size = 1;
        return 1;
    }
    int step = ranks[1] - ranks[0], run = 2;
    while (run < n && ranks[run] - ranks[run - 1] == step) {
        run++;
    }
    p->extent[0] = run;
    p->stride[0] = step;
    int len = run;
    while (p->nlevels < FOLD_PIECE_LEVELS && 2 * (long)len <= n) {
        long next = (long)ranks[len] - ranks[0];
        int t = 1;
        while (next != 0 && (long)(t + 1) * len <= n && block_repeats(ranks, len, t, next)) {
            t++;
        }
        if (t == 1) {
            break;
        }
        p->extent[p->nlevels] = t;
        p->stride[p->nlevels] = (int)next;
        p->nlevels++;
        len *= t;
    }
    p->size = len;
    return len;
}

int fold_piece_reversible(const fold_rank_piece_t *p)
{
    for (int i = 0; i < p->size; i++) {
        if (fold_piece_index(p, fold_piece_at(p, i)) != i) {
            return 0;
        }
    }
    return 1;
}
