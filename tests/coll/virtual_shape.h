/*
 * Tests: a virtual context of nnodes x ppn ranks (rank r on node r / ppn), which
 * selection and the cost model see as a real one without any process behind it.
 */
#ifndef FOLD_TESTS_VIRTUAL_SHAPE_H
#define FOLD_TESTS_VIRTUAL_SHAPE_H

#include <criterion/criterion.h>

#include "context.h"

#include <stdlib.h>

static inline fold_context_t *virtual_ctx(int nnodes, int ppn)
{
    int size = nnodes * ppn;
    int *node_of = malloc((size_t)size * sizeof(int));
    cr_assert_not_null(node_of);
    for (int r = 0; r < size; r++) {
        node_of[r] = r / ppn;
    }
    fold_context_t *ctx;
    cr_assert_eq(fold_context_create_virtual(size, node_of, &ctx), FOLD_OK);
    free(node_of);
    return ctx;
}

#endif
