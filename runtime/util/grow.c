#include "grow.h"

#include <stdlib.h>

int fold_util_grow_past(void **buf, size_t *cap, size_t need, size_t elem, size_t first)
{
    size_t c = *cap ? *cap : first;
    while (c < need) {
        c *= 2;
    }
    void *n = realloc(*buf, c * elem);
    if (n == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    *buf = n;
    *cap = c;
    return FOLD_OK;
}
