/*
 * The split's membership rule.
 */
#include "split.h"

#include <stdlib.h>

static int by_key_then_rank(const void *a, const void *b)
{
    const fold_split_entry_t *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->rank < y->rank ? -1 : (x->rank > y->rank);
}

int fold_split_members(fold_split_entry_t *all, int n, int color, int me,
                       fold_rankmap_t *parent, int *ctx_ranks, int *myrank)
{
    int count = 0, sorted = 1;
    for (int r = 0; r < n; r++) {
        if (all[r].color == color) {
            all[count] = all[r];
            sorted &= count == 0 || by_key_then_rank(&all[count - 1], &all[count]) < 0;
            count++;
        }
    }
    if (!sorted) {
        qsort(all, (size_t)count, sizeof(*all), by_key_then_rank);
    }
    *myrank = -1;
    for (int i = 0; i < count; i++) {
        ctx_ranks[i] = fold_rankmap_ctx(parent, all[i].rank);
        if (all[i].rank == me) {
            *myrank = i;
        }
    }
    return count;
}
