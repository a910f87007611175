/*
 * A test buffer in fold memory (fold_mem_alloc) or on the heap, for the tests of
 * single copy through mappings and of selection by placement.
 */
#ifndef FOLD_TEST_MEM_BUFFER_H
#define FOLD_TEST_MEM_BUFFER_H

#include <fold/fold.h>
#include <stdlib.h>

/* bytes of fold memory (fold != 0) or of the heap; NULL if none was had. */
static inline void *mem_buffer(int fold, size_t bytes)
{
    void *p = NULL;
    if (fold) {
        return fold_mem_alloc(bytes, &p) == FOLD_OK ? p : NULL;
    }
    return malloc(bytes);
}

static inline void mem_release(int fold, void *p)
{
    if (fold) {
        fold_mem_free(p);
    } else {
        free(p);
    }
}

#endif
