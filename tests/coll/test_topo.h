/*
 * Tests: topologies built straight from where each rank lies, sockets unknown, for
 * the cost model and the schedule builders to work on without any context.
 */
#ifndef FOLD_TESTS_TEST_TOPO_H
#define FOLD_TESTS_TEST_TOPO_H

#include <criterion/criterion.h>

#include "node/topo.h"

#include <fold/fold_status.h>
#include <stdlib.h>

/* size ranks, rank r on node key[r]. */
static inline fold_topo_t *test_topo_keys(int size, const int *key)
{
    int *pkg = malloc((size_t)size * sizeof(int));
    cr_assert_not_null(pkg);
    for (int r = 0; r < size; r++) {
        pkg[r] = -1;
    }
    fold_topo_t *t = NULL;
    cr_assert_eq(fold_topo_build(size, key, pkg, &t), FOLD_OK);
    free(pkg);
    return t;
}

/* nnodes nodes of ppn ranks each, rank r on node r / ppn. */
static inline fold_topo_t *test_topo_blocks(int nnodes, int ppn)
{
    int size = nnodes * ppn, *key = malloc((size_t)size * sizeof(int));
    cr_assert_not_null(key);
    for (int r = 0; r < size; r++) {
        key[r] = r / ppn;
    }
    fold_topo_t *t = test_topo_keys(size, key);
    free(key);
    return t;
}

#endif
