/*
 * Peer maths for binomial, chain, in-order binary tree and greedy pipelined
 * reductions. See tree_math.h.
 */
#include "tree_math.h"

#include <fold/fold_status.h>
#include <stdlib.h>

int fold_binomial_parent(int vrank, int size)
{
    return vrank <= 0 || vrank >= size ? -1 : (vrank & (vrank - 1));
}

int fold_binomial_children(int vrank, int size, int children[FOLD_BINOMIAL_MAX_CHILDREN])
{
    if (vrank < 0 || vrank >= size) {
        return 0;
    }
    /* The children of v are v + 2^k below v's lowest set bit (any k for the root). */
    unsigned long limit = vrank ? ((unsigned long)vrank & -(unsigned long)vrank) : (unsigned long)size;
    int n = 0;
    for (unsigned long mask = 1; mask < limit && vrank + mask < (unsigned long)size; mask <<= 1) {
        children[n++] = (int)(vrank + mask);
    }
    return n;
}

int fold_chain_upstream(int vrank, int size)
{
    return vrank >= 0 && vrank + 1 < size ? vrank + 1 : -1;
}

int fold_chain_downstream(int vrank, int size)
{
    return vrank > 0 && vrank < size ? vrank - 1 : -1;
}

static int bintree_mid(int lo, int hi)
{
    return lo + (hi - lo) / 2;
}

int fold_bintree_root(int size)
{
    return size > 0 ? bintree_mid(0, size) : -1;
}

fold_bintree_node_t fold_bintree_node(int pos, int size)
{
    fold_bintree_node_t node = {-1, -1, -1};
    if (pos < 0 || pos >= size) {
        return node;
    }
    /* Walk down from the whole range to the subtree whose middle is pos. */
    int lo = 0, hi = size, parent = -1;
    for (int mid = bintree_mid(lo, hi); mid != pos; mid = bintree_mid(lo, hi)) {
        parent = mid;
        if (pos < mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    int mid = pos;
    node.parent = parent;
    node.left   = lo < mid ? bintree_mid(lo, mid) : -1;
    node.right  = mid + 1 < hi ? bintree_mid(mid + 1, hi) : -1;
    return node;
}

/* ---- greedy plan ----------------------------------------------------------- */

typedef struct greedy_sim {
    size_t *sent;      /* per vrank: segments sent so far (root: first segment not done) */
    size_t *holders;   /* per segment: processes still holding a partial of it */
    int    *waiting;   /* per segment: the unpaired pool member seen so far this step */
    size_t *stamp;     /* per segment: step + 1 when `waiting` is valid */
} greedy_sim_t;

static void greedy_sim_free(greedy_sim_t *g)
{
    free(g->sent);
    free(g->holders);
    free(g->waiting);
    free(g->stamp);
}

static int greedy_sim_init(greedy_sim_t *g, int size, size_t nsegs)
{
    size_t n = nsegs ? nsegs : 1;
    g->sent    = calloc((size_t)size, sizeof(*g->sent));
    g->holders = malloc(n * sizeof(*g->holders));
    g->waiting = malloc(n * sizeof(*g->waiting));
    g->stamp   = calloc(n, sizeof(*g->stamp));
    if (!g->sent || !g->holders || !g->waiting || !g->stamp) {
        greedy_sim_free(g);
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t s = 0; s < nsegs; s++) {
        g->holders[s] = (size_t)size;
    }
    return FOLD_OK;
}

/* The root never sends: its counter is the first segment others still hold. */
static void greedy_advance_root(greedy_sim_t *g, size_t nsegs)
{
    while (g->sent[0] < nsegs && g->holders[g->sent[0]] == 1) {
        g->sent[0]++;
    }
}

typedef struct xfer_list {
    fold_greedy_xfer_t *v;
    size_t              n, cap;
} xfer_list_t;

static int xfer_push(xfer_list_t *l, fold_greedy_xfer_t x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        fold_greedy_xfer_t *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        l->v   = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return FOLD_OK;
}

/*
 * One time step. Walking the vranks in increasing order visits each segment's
 * pool in sorted order, so pairing each member with the previous unpaired one
 * pairs pool[0] with pool[1], pool[2] with pool[3], ... Each process is in one
 * pool (the one of its counter at the start of the step), so it takes part in at
 * most one transfer; a sender's counter moves on only after it has been read.
 */
static int greedy_step(greedy_sim_t *g, int size, int root, size_t nsegs, size_t step,
                       int me, xfer_list_t *mine)
{
    for (int v = 0; v < size; v++) {
        size_t s = g->sent[v];
        if (s >= nsegs) {
            continue;
        }
        if (g->stamp[s] != step + 1) {
            g->stamp[s]   = step + 1;
            g->waiting[s] = v;
            continue;
        }
        int receiver = g->waiting[s];
        g->stamp[s]  = 0;
        g->sent[v]++;
        g->holders[s]--;
        if (receiver == me || v == me) {
            int other = receiver == me ? v : receiver;
            fold_greedy_xfer_t x = {s, step, fold_rank_of_vrank(other, root, size), v == me};
            if (xfer_push(mine, x) != FOLD_OK) {
                return FOLD_ERR_NO_MEMORY;
            }
        }
    }
    greedy_advance_root(g, nsegs);
    return FOLD_OK;
}

int fold_greedy_plan(int rank, int size, int root, size_t nsegs,
                     fold_greedy_xfer_t **xfers, size_t *nxfers, size_t *nsteps)
{
    if (size < 1 || rank < 0 || rank >= size || root < 0 || root >= size) {
        return FOLD_ERR_INVALID_ARG;
    }
    greedy_sim_t g;
    int status = greedy_sim_init(&g, size, nsegs);
    if (status != FOLD_OK) {
        return status;
    }
    xfer_list_t mine = {NULL, 0, 0};
    int me = fold_vrank(rank, root, size);
    size_t step = 0;
    greedy_advance_root(&g, nsegs);
    while (status == FOLD_OK && g.sent[0] < nsegs) {
        status = greedy_step(&g, size, root, nsegs, step++, me, &mine);
    }
    greedy_sim_free(&g);
    if (status != FOLD_OK) {
        free(mine.v);
        return status;
    }
    *xfers  = mine.v;
    *nxfers = mine.n;
    if (nsteps != NULL) {
        *nsteps = step;
    }
    return FOLD_OK;
}
