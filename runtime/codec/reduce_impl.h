/*
 * Internal to the reduce kernels (reduce_kernel.c dispatches; reduce_loc.c and
 * reduce_complex.c hold the pair and complex loops): the loop signature and the
 * build attribute every loop shares.
 */
#ifndef FOLD_REDUCE_IMPL_H
#define FOLD_REDUCE_IMPL_H

#include <stddef.h>

/* Each loop is also built for AVX2 and the loader picks the build the CPU can
 * run (an ifunc). Baseline x86-64 is SSE2 only; on cache-resident blocks, the
 * size pipelined collectives reduce, AVX2 measured 1.3-2x faster (float32 min,
 * float64 max and bfloat16 about 2x). Same IEEE operations, so the same bits. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

/* dst = left op right over count elements; dst may be left or right. */
typedef void (*fold_kernel_fn)(const void *left, const void *right, void *dst, size_t count);

/* MAXLOC / MINLOC on the pair types (reduce_loc.c). */
void fold_kernel_float_int_maxloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_float_int_minloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_double_int_maxloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_double_int_minloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_long_int_maxloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_long_int_minloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_2int_maxloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_2int_minloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_short_int_maxloc(const void *l, const void *r, void *d, size_t n);
void fold_kernel_short_int_minloc(const void *l, const void *r, void *d, size_t n);

/* Complex products (reduce_complex.c); complex sums are the float loops over
 * twice the count. */
void fold_kernel_complex_float32_prod(const void *l, const void *r, void *d, size_t n);
void fold_kernel_complex_float64_prod(const void *l, const void *r, void *d, size_t n);

#endif
