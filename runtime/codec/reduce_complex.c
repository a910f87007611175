/*
 * Complex products: (a+bi)(c+di) = (ac-bd) + (ad+bc)i, the textbook formula that
 * C's own multiplication computes for finite results (without its recovery of
 * infinities from a NaN result, which would put a branch and a library call in the
 * loop). Each IEEE operation is commutative, so left * right and right * left give
 * the same bits. Complex sums need no loop of their own (reduce_kernel.c runs the
 * float one over twice the count).
 */
#include "reduce_impl.h"

#include <stddef.h>

typedef struct { float re, im; } complex32_t;
typedef struct { double re, im; } complex64_t;

/* Static loops behind plain exported functions, as in reduce_loc.c (clang 14 would not
 * export a multi-versioned function under its own name). */
#define COMPLEX_PROD(tag, C)                                                            \
    VECTOR_CLONES                                                                       \
    static void loop_##tag##_prod(const void *left, const void *right, void *dst,      \
                                  size_t count)                                         \
    {                                                                                   \
        const C *l = left;                                                              \
        const C *r = right;                                                             \
        C *d = dst;                                                                     \
        for (size_t k = 0; k < count; k++) {                                            \
            C a = l[k], b = r[k];                                                       \
            d[k] = (C){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};           \
        }                                                                               \
    }                                                                                   \
    void fold_kernel_##tag##_prod(const void *left, const void *right, void *dst,      \
                                  size_t count)                                         \
    {                                                                                   \
        loop_##tag##_prod(left, right, dst, count);                                     \
    }

COMPLEX_PROD(complex_float32, complex32_t)
COMPLEX_PROD(complex_float64, complex64_t)
