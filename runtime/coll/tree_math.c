/*
 * Peer maths for binomial, chain, in-order binary tree and greedy pipelined
 * reductions. See tree_math.h.
 */
#include "tree_math.h"

#include <fold/fold_status.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * Every rank runs the same simulation and keeps its own transfers, so building the
 * schedules of all p ranks costs p simulations of O(p) per step: the cost model's
 * replay on thousands of ranks spent most of its time there. The last simulation
 * is kept whole instead, each rank's transfers in the order the simulation meets
 * them (what a rank's own run collects), when it is small enough.
 */
#define GREEDY_CACHE_MAX_XFERS (256u * 1024)

typedef struct greedy_all {
    int                 size, root;
    size_t              nsegs, nsteps;
    size_t             *first;   /* vrank -> its transfers in x[]; size + 1 */
    fold_greedy_xfer_t *x;
} greedy_all_t;

static greedy_all_t    greedy_cache;
static pthread_mutex_t greedy_lock = PTHREAD_MUTEX_INITIALIZER;

static void greedy_all_free(greedy_all_t *a)
{
    free(a->first);
    free(a->x);
    memset(a, 0, sizeof(*a));
}

__attribute__((destructor)) static void greedy_cache_free(void)
{
    greedy_all_free(&greedy_cache);
}

/* The whole simulation: every transfer, filed under both its ranks. */
static int greedy_plan_all(int size, int root, size_t nsegs, greedy_all_t *a)
{
    greedy_sim_t g;
    int status = greedy_sim_init(&g, size, nsegs);
    if (status != FOLD_OK) {
        return status;
    }
    size_t n = (size_t)(size - 1) * nsegs, k = 0;
    size_t (*rec)[4] = malloc((n ? n : 1) * sizeof(*rec));   /* seg, step, from, to */
    memset(a, 0, sizeof(*a));
    a->first = calloc((size_t)size + 1, sizeof(*a->first));
    a->x     = malloc((n ? 2 * n : 1) * sizeof(*a->x));
    if (rec == NULL || a->first == NULL || a->x == NULL) {
        free(rec);
        greedy_all_free(a);
        greedy_sim_free(&g);
        return FOLD_ERR_NO_MEMORY;
    }
    size_t step = 0;
    greedy_advance_root(&g, nsegs);
    while (g.sent[0] < nsegs && status == FOLD_OK) {
        /* greedy_step, recording every pair */
        for (int v = 0; v < size; v++) {
            size_t sg = g.sent[v];
            if (sg >= nsegs) {
                continue;
            }
            if (g.stamp[sg] != step + 1) {
                g.stamp[sg]   = step + 1;
                g.waiting[sg] = v;
                continue;
            }
            int receiver = g.waiting[sg];
            g.stamp[sg]  = 0;
            g.sent[v]++;
            g.holders[sg]--;
            if (k == n) {
                status = FOLD_ERR_INVALID_ARG;   /* more transfers than segments to send */
                break;
            }
            rec[k][0] = sg;
            rec[k][1] = step;
            rec[k][2] = (size_t)v;
            rec[k][3] = (size_t)receiver;
            k++;
            a->first[v + 1]++;
            a->first[receiver + 1]++;
        }
        greedy_advance_root(&g, nsegs);
        step++;
    }
    greedy_sim_free(&g);
    if (status != FOLD_OK) {
        free(rec);
        greedy_all_free(a);
        return status;
    }
    for (int v = 0; v < size; v++) {
        a->first[v + 1] += a->first[v];
    }
    size_t *fill = calloc((size_t)size, sizeof(*fill));
    if (fill == NULL) {
        free(rec);
        greedy_all_free(a);
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < k; i++) {
        int from = (int)rec[i][2], to = (int)rec[i][3];
        fold_greedy_xfer_t sx = {rec[i][0], rec[i][1], fold_rank_of_vrank(to, root, size), 1};
        fold_greedy_xfer_t rx = {rec[i][0], rec[i][1], fold_rank_of_vrank(from, root, size), 0};
        a->x[a->first[from] + fill[from]++] = sx;
        a->x[a->first[to] + fill[to]++]     = rx;
    }
    free(fill);
    free(rec);
    a->size   = size;
    a->root   = root;
    a->nsegs  = nsegs;
    a->nsteps = step;
    return FOLD_OK;
}

/* rank's plan from the kept simulation: 1 found, 0 not kept, or an error. */
static int greedy_plan_cached(int rank, int size, int root, size_t nsegs,
                              fold_greedy_xfer_t **xfers, size_t *nxfers, size_t *nsteps)
{
    if (size < 2 || nsegs == 0 || (size_t)(size - 1) > GREEDY_CACHE_MAX_XFERS / nsegs) {
        return 0;
    }
    pthread_mutex_lock(&greedy_lock);
    greedy_all_t *a = &greedy_cache;
    if (a->x == NULL || a->size != size || a->root != root || a->nsegs != nsegs) {
        greedy_all_t fresh;
        int status = greedy_plan_all(size, root, nsegs, &fresh);
        if (status != FOLD_OK) {
            pthread_mutex_unlock(&greedy_lock);
            return status;
        }
        greedy_all_free(a);
        *a = fresh;
    }
    int v = fold_vrank(rank, root, size);
    size_t n = a->first[v + 1] - a->first[v];
    fold_greedy_xfer_t *mine = n > 0 ? malloc(n * sizeof(*mine)) : NULL;   /* NULL: none */
    if (n > 0 && mine == NULL) {
        pthread_mutex_unlock(&greedy_lock);
        return FOLD_ERR_NO_MEMORY;
    }
    if (n > 0) {
        memcpy(mine, a->x + a->first[v], n * sizeof(*mine));
    }
    if (nsteps != NULL) {
        *nsteps = a->nsteps;
    }
    pthread_mutex_unlock(&greedy_lock);
    *xfers  = mine;
    *nxfers = n;
    return 1;
}

int fold_greedy_plan(int rank, int size, int root, size_t nsegs,
                     fold_greedy_xfer_t **xfers, size_t *nxfers, size_t *nsteps)
{
    if (size < 1 || rank < 0 || rank >= size || root < 0 || root >= size) {
        return FOLD_ERR_INVALID_ARG;
    }
    int cached = greedy_plan_cached(rank, size, root, nsegs, xfers, nxfers, nsteps);
    if (cached != 0) {
        return cached == 1 ? FOLD_OK : cached;
    }
    return fold_greedy_plan_alone(rank, size, root, nsegs, xfers, nxfers, nsteps);
}

int fold_greedy_plan_alone(int rank, int size, int root, size_t nsegs,
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
