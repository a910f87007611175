/*
 * The node of every context rank, from the launcher's layout, without an int per
 * rank where the layout has a formula: block (ranks 0..ppn-1 on node 0, the next
 * ppn on node 1, ...; the last node may hold fewer) or cyclic (rank r on node
 * r mod nodes). Anything else keeps a table.
 */
#ifndef FOLD_GROUP_NODEMAP_H
#define FOLD_GROUP_NODEMAP_H

#include <stddef.h>

typedef enum fold_nodemap_kind {
    FOLD_NODEMAP_BLOCK, FOLD_NODEMAP_CYCLIC, FOLD_NODEMAP_TABLE
} fold_nodemap_kind_t;

typedef struct fold_nodemap {
    int  kind;
    int  size;
    int  nnodes;
    int  ppn;       /* block: ranks per node */
    int *table;     /* table: node of every rank */
} fold_nodemap_t;

/* From node_of[r] for every rank (nodes numbered 0 .. nnodes-1), which the caller
 * keeps. Returns a fold status. */
int    fold_nodemap_init(fold_nodemap_t *m, int size, const int *node_of);
void   fold_nodemap_free(fold_nodemap_t *m);
size_t fold_nodemap_bytes(const fold_nodemap_t *m);
const char *fold_nodemap_kind_name(const fold_nodemap_t *m);

static inline int fold_nodemap_node(const fold_nodemap_t *m, int rank)
{
    switch (m->kind) {
    case FOLD_NODEMAP_BLOCK:
        return rank / m->ppn;
    case FOLD_NODEMAP_CYCLIC:
        return rank % m->nnodes;
    default:
        return m->table[rank];
    }
}

#endif
