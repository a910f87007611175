/*
 * Node layouts: block and cyclic recognised in one pass each, else a table.
 */
#include "nodemap.h"

#include <fold/fold_status.h>
#include <stdlib.h>
#include <string.h>

static int matches(const fold_nodemap_t *m, const int *node_of)
{
    for (int r = 0; r < m->size; r++) {
        if (fold_nodemap_node(m, r) != node_of[r]) {
            return 0;
        }
    }
    return 1;
}

int fold_nodemap_init(fold_nodemap_t *m, int size, const int *node_of)
{
    memset(m, 0, sizeof(*m));
    m->size = size;
    for (int r = 0; r < size; r++) {
        m->nnodes = node_of[r] >= m->nnodes ? node_of[r] + 1 : m->nnodes;
    }
    int ppn = 1;
    while (ppn < size && node_of[ppn] == node_of[0]) {
        ppn++;
    }
    m->kind = FOLD_NODEMAP_BLOCK;
    m->ppn  = ppn;
    if (matches(m, node_of)) {
        return FOLD_OK;
    }
    m->kind = FOLD_NODEMAP_CYCLIC;
    if (matches(m, node_of)) {
        return FOLD_OK;
    }
    m->kind  = FOLD_NODEMAP_TABLE;
    m->table = malloc((size_t)size * sizeof(int));
    if (m->table == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    memcpy(m->table, node_of, (size_t)size * sizeof(int));
    return FOLD_OK;
}

void fold_nodemap_free(fold_nodemap_t *m)
{
    free(m->table);
    memset(m, 0, sizeof(*m));
}

size_t fold_nodemap_bytes(const fold_nodemap_t *m)
{
    return sizeof(*m) + (m->table != NULL ? (size_t)m->size * sizeof(int) : 0);
}

const char *fold_nodemap_kind_name(const fold_nodemap_t *m)
{
    static const char *const names[] = {"block", "cyclic", "table"};
    return names[m->kind];
}
