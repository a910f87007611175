/*
 * Local reduction kernels: dst = left op right, elementwise, for every datatype x op.
 * `left` is the contribution of lower ranks (it matters for non-commutative user
 * ops). dst may be the same pointer as left or right (never a partial overlap).
 * Pure functions over buffers with explicit lengths.
 */
#ifndef FOLD_REDUCE_KERNEL_H
#define FOLD_REDUCE_KERNEL_H

#include <fold/fold.h>
#include <stddef.h>

/* Returns FOLD_OK, or FOLD_ERR_INVALID_ARG for an unknown datatype/op or an op the
 * datatype does not take (fold.h: bitwise ops on floats, maxloc/minloc off the pair
 * types, anything else on them, complex beyond sum and prod). nthreads > 1 splits the work across OpenMP threads when
 * count * elem_size >= thread_threshold bytes. */
int fold_reduce_local(fold_op_t op, fold_dtype_t dtype, const void *left,
                      const void *right, void *dst, size_t count,
                      int nthreads, size_t thread_threshold);

/* reduce_stream.c: the same, single-threaded, into memory another core read last
 * and reads next (the node segment): through a block in L1 copied out by memcpy,
 * whose string stores take whole lines without fetching them from that core. */
int fold_reduce_local_shared(fold_op_t op, fold_dtype_t dtype, const void *left,
                             const void *right, void *dst, size_t count);
/* The same, the result also copied into `also` (NULL: not) from the L1 block: one
 * pass for a result wanted in two places. `also` may be left or right exactly
 * (each element is read before it is written), not overlap them otherwise. */
int fold_reduce_local_shared_also(fold_op_t op, fold_dtype_t dtype, const void *left,
                                  const void *right, void *dst, void *also, size_t count);
/* dst = rows[0] op rows[1] op ... op rows[nrows-1] (nrows >= 2), left to right, the
 * bits of nrows-1 chained fold_reduce_local calls, single-threaded: block by block
 * through an L1 block, each block of dst written once (by memcpy's string stores, or
 * streamed for FOLD_ROWS_STREAM), never read, and copied into `also` too (NULL:
 * not). A private dst of one block (FOLD_ROWS_PRIVATE) is itself the block. dst and
 * also may each be rows[0] exactly, not overlap a row otherwise. A node leader's
 * fold of its node's rows. */
enum { FOLD_ROWS_PRIVATE, FOLD_ROWS_SHARED, FOLD_ROWS_STREAM };
int fold_reduce_local_rows(fold_op_t op, fold_dtype_t dtype, const void *const *rows, int nrows,
                           void *dst, void *also, size_t count, int how);
/* memcpy into such memory, in pieces small enough for the string stores. */
void fold_copy_shared(void *dst, const void *src, size_t bytes);
/* The same, single-threaded, with the result written by
 * non-temporal stores (whole cache lines, not read first, not kept in the caches),
 * for results larger than the cache that the call does not read again. Pairs
 * without a streaming kernel (fold_reduce_stream_available 0: float min/max, the
 * logical ops, half types, pairs, user ops, or a CPU without AVX2) take the
 * ordinary kernel, with the same bits either way. */
int fold_reduce_local_stream(fold_op_t op, fold_dtype_t dtype, const void *left,
                             const void *right, void *dst, size_t count);
/* The same result streamed into each of ndst destinations at once (a result that
 * goes to several buffers: one pass over the operands; a destination may be an
 * operand exactly, as in place). One or two destinations alike modulo 32 bytes take
 * the streaming kernel; others, more, or several without one, go through an L1 block
 * copied out to each. */
int fold_reduce_local_stream_to(fold_op_t op, fold_dtype_t dtype, const void *left,
                                const void *right, void *const *dsts, int ndst, size_t count);
int fold_reduce_stream_available(fold_op_t op, fold_dtype_t dtype);
/* memcpy, streaming where the CPU has AVX2 (the buffers must not overlap). */
void fold_copy_stream(void *dst, const void *src, size_t bytes);

/* Whether (op, dtype) is a valid pair; user ops are valid for every datatype. */
int fold_op_dtype_valid(fold_op_t op, fold_dtype_t dtype);
/* 1 for predefined ops and commutative user ops. */
int fold_op_is_commutative(fold_op_t op);

/* User-op registry (runtime/op.c): returns 0 and fills fn/arg/commutative. */
int fold_user_op_lookup(fold_op_t op, fold_user_op_fn *fn, void **arg, int *commutative);

/* float16 / bfloat16 <-> float32 (round to nearest even, NaN preserved). */
float    fold_half_to_float(uint16_t h);
uint16_t fold_float_to_half(float f);
float    fold_bf16_to_float(uint16_t b);
uint16_t fold_float_to_bf16(float f);

#endif
