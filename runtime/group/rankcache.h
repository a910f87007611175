/*
 * Translation caches in front of a rank map's mapping function (Kumar et al.,
 * sec. 4.2): comm rank -> context rank of recent lookups.
 *
 * linear  the last FOLD_RANKCACHE_LINEAR translations, searched in full, replaced
 *         round-robin (the paper's "16-way" cache: ten neighbours fit).
 * assoc   the paper's 2-D set-associative cache: FOLD_RANKCACHE_SETS sets of
 *         FOLD_RANKCACHE_WAYS, set (r ^ (r >> 7)) & 127, round-robin within a set.
 *
 * Hits and misses are counted for the debug log.
 */
#ifndef FOLD_GROUP_RANKCACHE_H
#define FOLD_GROUP_RANKCACHE_H

#include <stddef.h>
#include <stdint.h>

#define FOLD_RANKCACHE_LINEAR    16
#define FOLD_RANKCACHE_SET_BITS  7
#define FOLD_RANKCACHE_SETS      (1 << FOLD_RANKCACHE_SET_BITS)
#define FOLD_RANKCACHE_WAYS      8

/* FOLD_RANK_CACHE, in the order of its names (fold_rankcache_names). */
typedef enum fold_rankcache_kind {
    FOLD_RANKCACHE_AUTO, FOLD_RANKCACHE_NONE, FOLD_RANKCACHE_LINEAR_KIND,
    FOLD_RANKCACHE_ASSOC
} fold_rankcache_kind_t;

extern const char *const fold_rankcache_names[];   /* "auto", "none", "linear", "assoc" */

typedef struct fold_rankcache_set {
    int32_t key[FOLD_RANKCACHE_WAYS];   /* comm rank, -1: empty */
    int32_t value[FOLD_RANKCACHE_WAYS];
} fold_rankcache_set_t;

/* A linear cache is allocated without the assoc part of the union. */
typedef struct fold_rankcache {
    int      kind;                      /* LINEAR_KIND or ASSOC */
    size_t   bytes;                     /* allocated */
    uint64_t hits;
    uint64_t misses;
    union {
        struct {
            int32_t  key[FOLD_RANKCACHE_LINEAR];
            int32_t  value[FOLD_RANKCACHE_LINEAR];
            unsigned next;              /* the entry replaced next */
        } linear;
        struct {
            fold_rankcache_set_t set[FOLD_RANKCACHE_SETS];
            uint8_t              next[FOLD_RANKCACHE_SETS];
        } assoc;
    } u;
} fold_rankcache_t;

/* A cache of the kind (LINEAR_KIND or ASSOC), empty; NULL when out of memory. */
fold_rankcache_t *fold_rankcache_create(int kind);
void              fold_rankcache_free(fold_rankcache_t *c);
/* Bytes the cache takes. */
size_t            fold_rankcache_bytes(const fold_rankcache_t *c);

static inline unsigned fold_rankcache_set_of(int rank)
{
    return ((unsigned)rank ^ ((unsigned)rank >> FOLD_RANKCACHE_SET_BITS)) &
           (FOLD_RANKCACHE_SETS - 1);
}

/* 1 and *value on a hit, 0 on a miss (counted either way). */
static inline int fold_rankcache_find(fold_rankcache_t *c, int rank, int *value)
{
    const int32_t *key, *val;
    int n;
    if (c->kind == FOLD_RANKCACHE_ASSOC) {
        const fold_rankcache_set_t *s = &c->u.assoc.set[fold_rankcache_set_of(rank)];
        key = s->key;
        val = s->value;
        n   = FOLD_RANKCACHE_WAYS;
    } else {
        key = c->u.linear.key;
        val = c->u.linear.value;
        n   = FOLD_RANKCACHE_LINEAR;
    }
    for (int i = 0; i < n; i++) {
        if (key[i] == rank) {
            *value = val[i];
            c->hits++;
            return 1;
        }
    }
    c->misses++;
    return 0;
}

/* Remembers rank -> value, replacing round-robin. */
void fold_rankcache_put(fold_rankcache_t *c, int rank, int value);

#endif
