/*
 * Translation caches: allocation and round-robin replacement (no reference
 * counts or LRU lists, as in the paper, so a hit costs only the search).
 */
#include "rankcache.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *const fold_rankcache_names[] = {"auto", "none", "linear", "assoc", NULL};

fold_rankcache_t *fold_rankcache_create(int kind)
{
    size_t bytes = kind == FOLD_RANKCACHE_ASSOC
                       ? sizeof(fold_rankcache_t)
                       : offsetof(fold_rankcache_t, u) + sizeof(((fold_rankcache_t *)0)->u.linear);
    fold_rankcache_t *c = malloc(bytes);
    if (c == NULL) {
        return NULL;
    }
    memset(c, 0, bytes);
    c->kind  = kind;
    c->bytes = bytes;
    if (kind == FOLD_RANKCACHE_ASSOC) {
        for (int s = 0; s < FOLD_RANKCACHE_SETS; s++) {
            memset(c->u.assoc.set[s].key, 0xff, sizeof(c->u.assoc.set[s].key));
        }
    } else {
        memset(c->u.linear.key, 0xff, sizeof(c->u.linear.key));
    }
    return c;
}

void fold_rankcache_free(fold_rankcache_t *c)
{
    free(c);
}

size_t fold_rankcache_bytes(const fold_rankcache_t *c)
{
    return c != NULL ? c->bytes : 0;
}

void fold_rankcache_put(fold_rankcache_t *c, int rank, int value)
{
    if (c->kind == FOLD_RANKCACHE_ASSOC) {
        unsigned s = fold_rankcache_set_of(rank);
        unsigned w = c->u.assoc.next[s];
        c->u.assoc.set[s].key[w]   = rank;
        c->u.assoc.set[s].value[w] = value;
        c->u.assoc.next[s] = (uint8_t)((w + 1) % FOLD_RANKCACHE_WAYS);
    } else {
        unsigned w = c->u.linear.next;
        c->u.linear.key[w]   = rank;
        c->u.linear.value[w] = value;
        c->u.linear.next = (w + 1) % FOLD_RANKCACHE_LINEAR;
    }
}
