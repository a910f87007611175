/*
 * A growing array's room: the capacity doubles, so n appends cost O(n) copies.
 */
#ifndef FOLD_UTIL_GROW_H
#define FOLD_UTIL_GROW_H

#include <fold/fold_status.h>

#include <stddef.h>

/* fold_util_grow past its capacity: reallocates *buf to the first capacity, or *cap
 * doubled, doubled again until it holds `need` elements of `elem` bytes. */
int fold_util_grow_past(void **buf, size_t *cap, size_t need, size_t elem, size_t first);

/* Room for `need` elements in *buf, whose capacity is *cap: FOLD_OK, or
 * FOLD_ERR_NO_MEMORY with *buf and *cap as they were. Inline where it fits, since
 * appends on hot paths (the cost model's event queue) call it every time. */
static inline int fold_util_grow(void **buf, size_t *cap, size_t need, size_t elem,
                                 size_t first)
{
    return need <= *cap ? FOLD_OK : fold_util_grow_past(buf, cap, need, elem, first);
}

#endif
