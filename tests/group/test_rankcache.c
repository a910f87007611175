/*
 * Translation caches (Kumar et al., sec. 4.2): the set-associative cache evicts
 * round-robin within a set, the linear one over its entries; through a rank map,
 * both stay right under heavy eviction and count every lookup as a hit or a miss.
 */
#include <criterion/criterion.h>

#include "group/rankmap.h"

#include <fold/fold_status.h>

#include <stdlib.h>

Test(rankcache, assoc_evicts_round_robin_within_a_set)
{
    fold_rankcache_t *c = fold_rankcache_create(FOLD_RANKCACHE_ASSOC);
    cr_assert_not_null(c);
    /* i * 2^14 + 5 lands in set 5 for every i: the hash reads only the low 14 bits. */
    int keys[FOLD_RANKCACHE_WAYS + 3];
    for (int i = 0; i < FOLD_RANKCACHE_WAYS + 3; i++) {
        keys[i] = (i << 14) | 5;
        cr_assert_eq(fold_rankcache_set_of(keys[i]), fold_rankcache_set_of(keys[0]));
        fold_rankcache_put(c, keys[i], 1000 + i);
    }
    int v;
    for (int i = 0; i < 3; i++) {                /* the three oldest went */
        cr_expect_not(fold_rankcache_find(c, keys[i], &v), "key %d still cached", i);
    }
    for (int i = 3; i < FOLD_RANKCACHE_WAYS + 3; i++) {
        cr_expect(fold_rankcache_find(c, keys[i], &v) && v == 1000 + i);
    }
    cr_expect(!fold_rankcache_find(c, 6, &v));   /* other sets untouched, empty */
    cr_expect_eq(c->hits, FOLD_RANKCACHE_WAYS);
    cr_expect_eq(c->misses, 4);
    fold_rankcache_free(c);
}

Test(rankcache, linear_keeps_the_last_entries)
{
    fold_rankcache_t *c = fold_rankcache_create(FOLD_RANKCACHE_LINEAR_KIND);
    cr_assert_not_null(c);
    cr_expect_lt(fold_rankcache_bytes(c), 256);
    int v;
    for (int r = 0; r < FOLD_RANKCACHE_LINEAR + 4; r++) {
        fold_rankcache_put(c, r, -r);
    }
    for (int r = 0; r < FOLD_RANKCACHE_LINEAR + 4; r++) {
        int hit = fold_rankcache_find(c, r, &v);
        cr_expect_eq(hit, r >= 4, "rank %d", r);
        cr_expect(!hit || v == -r);
    }
    fold_rankcache_free(c);
}

/* A 3-level sub-rectangle of 4096 ranks looked up at random (far more ranks
 * than either cache holds), and the neighbour pattern that fits. */
static void check_cache(int kind)
{
    const int world = 64 * 64 * 64;
    fold_world_rects_t w;
    fold_world_rects_init(&w, world);
    int n = 16 * 16 * 16, *ranks = malloc((size_t)n * sizeof(int));
    cr_assert_not_null(ranks);
    for (int i = 0; i < n; i++) {
        int x = 5 + i % 16, y = 9 + i / 16 % 16, z = 30 + i / 256;
        ranks[i] = x + 64 * y + 64 * 64 * z;
    }
    fold_rankmap_params_t p = {FOLD_RANKMAP_COMPRESSED, kind, &w};
    fold_rankmap_t m;
    cr_assert_eq(fold_rankmap_init(&m, n, ranks, &p), FOLD_OK);
    cr_assert_eq(m.kind, FOLD_RANKMAP_PIECES);
    cr_assert_eq(m.cache_kind, kind);
    unsigned seed = 11;
    const int lookups = 200000;
    for (int i = 0; i < lookups; i++) {
        int r = (int)(rand_r(&seed) % (unsigned)n);
        cr_assert_eq(fold_rankmap_ctx(&m, r), ranks[r], "lookup %d of comm rank %d", i, r);
    }
    for (int i = 0; i < lookups; i++) {          /* ten neighbours, over and over */
        int r = (i % 10) * 37;
        cr_assert_eq(fold_rankmap_ctx(&m, r), ranks[r]);
    }
    cr_assert_not_null(m.cache);
    cr_expect_eq(m.cache->hits + m.cache->misses, 2 * (uint64_t)lookups);
    cr_expect_gt(m.cache->misses, lookups / 2, "random lookups mostly miss");
    cr_expect_gt(m.cache->hits, lookups - 100, "the neighbours hit once cached");
    fold_rankmap_free(&m);
    free(ranks);
}

Test(rankcache, linear_right_under_eviction) { check_cache(FOLD_RANKCACHE_LINEAR_KIND); }
Test(rankcache, assoc_right_under_eviction)  { check_cache(FOLD_RANKCACHE_ASSOC); }
