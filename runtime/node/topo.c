/*
 * Communicator topology (pure construction from gathered per-rank facts) and the
 * hwloc query of where the calling thread runs. See topo.h.
 */
#include "node/topo.h"

#include <fold/fold_status.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void fold_topo_free(fold_topo_t *topo)
{
    if (topo == NULL) {
        return;
    }
    free(topo->node_of);
    free(topo->local_of);
    free(topo->node_first);
    free(topo->ranks);
    free(topo->leader_order);
    free(topo);
}

/* One rank per package in turn: packages in increasing id, ranks of a package in
 * local order. `pkg` holds the package of each of the node's n ranks. */
static void leader_order(const int *pkg, int n, int *order)
{
    int taken = 0, round = 0;
    while (taken < n) {
        /* Visit packages in increasing id: find the next distinct id each pass. */
        int prev = -2;
        for (;;) {
            int next = -2;
            for (int i = 0; i < n; i++) {
                if (pkg[i] > prev && (next == -2 || pkg[i] < next)) {
                    next = pkg[i];
                }
            }
            if (next == -2) {
                break;
            }
            /* the round-th rank of package `next`, if it has that many */
            for (int i = 0, seen = 0; i < n; i++) {
                if (pkg[i] == next && seen++ == round) {
                    order[taken++] = i;
                    break;
                }
            }
            prev = next;
        }
        round++;
    }
}

typedef struct keyed_rank {
    int key, rank;
} keyed_rank_t;

static int compare_keyed_rank(const void *a, const void *b)
{
    const keyed_rank_t *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* t->node_of and t->nnodes: nodes numbered in order of their lowest rank. Sorted by
 * key, so that tens of thousands of ranks take milliseconds. */
static int number_nodes(int size, const int *node_key, fold_topo_t *t)
{
    keyed_rank_t *by_key = malloc((size_t)size * sizeof(*by_key) + 1);
    if (by_key == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size; r++) {
        by_key[r] = (keyed_rank_t){node_key[r], r};
    }
    qsort(by_key, (size_t)size, sizeof(*by_key), compare_keyed_rank);
    /* node_of[r] first holds the lowest rank of r's node; a rank that is its node's
     * lowest opens the next node number, in rank order. */
    for (int i = 0; i < size; i++) {
        int lowest = i > 0 && by_key[i].key == by_key[i - 1].key
                   ? t->node_of[by_key[i - 1].rank] : by_key[i].rank;
        t->node_of[by_key[i].rank] = lowest;
    }
    free(by_key);
    t->nnodes = 0;
    for (int r = 0; r < size; r++) {
        int lowest = t->node_of[r];
        t->node_of[r] = lowest == r ? t->nnodes++ : t->node_of[lowest];
    }
    return FOLD_OK;
}

int fold_topo_build(int size, const int *node_key, const int *package, fold_topo_t **topo_p)
{
    fold_topo_t *t = calloc(1, sizeof(*t));
    int *pkg = malloc((size_t)size * sizeof(int));
    if (t == NULL || pkg == NULL) {
        free(t);
        free(pkg);
        return FOLD_ERR_NO_MEMORY;
    }
    t->size         = size;
    t->node_of      = malloc((size_t)size * sizeof(int));
    t->local_of     = malloc((size_t)size * sizeof(int));
    t->node_first   = calloc((size_t)size + 1, sizeof(int));
    t->ranks        = malloc((size_t)size * sizeof(int));
    t->leader_order = malloc((size_t)size * sizeof(int));
    if (!t->node_of || !t->local_of || !t->node_first || !t->ranks || !t->leader_order) {
        free(pkg);
        fold_topo_free(t);
        return FOLD_ERR_NO_MEMORY;
    }

    int *fill = NULL;
    if (number_nodes(size, node_key, t) != FOLD_OK ||
        (fill = calloc((size_t)t->nnodes, sizeof(int))) == NULL) {
        free(pkg);
        fold_topo_free(t);
        return FOLD_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size; r++) {
        t->node_first[t->node_of[r] + 1]++;
    }
    for (int n = 0; n < t->nnodes; n++) {
        t->node_first[n + 1] += t->node_first[n];
    }
    for (int r = 0; r < size; r++) {
        int n = t->node_of[r];
        t->local_of[r] = fill[n];
        t->ranks[t->node_first[n] + fill[n]++] = r;
    }
    t->min_ppn = size;
    for (int n = 0; n < t->nnodes; n++) {
        int first = t->node_first[n], ppn = fold_topo_ppn(t, n);
        for (int i = 0; i < ppn; i++) {
            pkg[i] = package[t->ranks[first + i]] < 0 ? -1 : package[t->ranks[first + i]];
        }
        leader_order(pkg, ppn, t->leader_order + first);
        t->min_ppn = ppn < t->min_ppn ? ppn : t->min_ppn;
        t->max_ppn = ppn > t->max_ppn ? ppn : t->max_ppn;
    }
    for (int r = 0; r < size; r++) {
        t->ring_cuts += t->node_of[r] != t->node_of[(r + 1) % size];
    }
    free(fill);
    free(pkg);
    *topo_p = t;
    return FOLD_OK;
}

int fold_topo_leader_index(const fold_topo_t *t, int rank, int leaders)
{
    int node = t->node_of[rank];
    for (int j = 0; j < leaders && j < fold_topo_ppn(t, node); j++) {
        if (fold_topo_leader_local(t, node, j) == t->local_of[rank]) {
            return j;
        }
    }
    return -1;
}

/* ---- hwloc ------------------------------------------------------------------ */

static hwloc_topology_t hw_topology;
static int              hw_ready;
static pthread_once_t   hw_once = PTHREAD_ONCE_INIT;

static void hw_load(void)
{
    if (hwloc_topology_init(&hw_topology) != 0) {
        return;
    }
    if (hwloc_topology_load(hw_topology) != 0) {
        hwloc_topology_destroy(hw_topology);
        return;
    }
    hw_ready = 1;
}

/* Logical index of the first object of `type` that contains all of `set`, or -1. */
static int covering_index(hwloc_const_cpuset_t set, hwloc_obj_type_t type)
{
    hwloc_obj_t obj = NULL;
    while ((obj = hwloc_get_next_obj_by_type(hw_topology, type, obj)) != NULL) {
        if (obj->cpuset != NULL && hwloc_bitmap_isincluded(set, obj->cpuset)) {
            return (int)obj->logical_index;
        }
    }
    return -1;
}

void fold_topo_locate(int *package, int *numa)
{
    *package = *numa = -1;
    pthread_once(&hw_once, hw_load);
    if (!hw_ready) {
        return;
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL) {
        return;
    }
    int bound = hwloc_get_cpubind(hw_topology, set, HWLOC_CPUBIND_THREAD) == 0 &&
                !hwloc_bitmap_iszero(set);
    if (!bound || covering_index(set, HWLOC_OBJ_PACKAGE) < 0) {
        /* Unbound or spread over packages: where it runs now is the best guess. */
        if (hwloc_get_last_cpu_location(hw_topology, set, HWLOC_CPUBIND_THREAD) != 0) {
            hwloc_bitmap_free(set);
            return;
        }
    }
    *package = covering_index(set, HWLOC_OBJ_PACKAGE);
    *numa    = covering_index(set, HWLOC_OBJ_NUMANODE);
    hwloc_bitmap_free(set);
}
