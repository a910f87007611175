/*
 * Input data: element i of rank r is an integer computed from (r, i, seed) alone, so
 * any rank can recompute what any other contributed. Values are kept small enough
 * that every partial result is exact in the datatype, whatever the reduction order.
 */
#ifndef FOLD_PERF_DATA_H
#define FOLD_PERF_DATA_H

#include "perf_options.h"

#include <fold/fold.h>

#include <stddef.h>
#include <stdint.h>

typedef struct perf_data_spec {
    fold_dtype_t        dtype;
    fold_op_t           op;
    int                 ranks;
    double              sparsity;
    perf_distribution_t distribution;
    int                 dense_ranks;   /* resolved: 1 <= dense_ranks <= ranks */
    uint64_t            seed;
} perf_data_spec_t;

void perf_data_spec_init(perf_data_spec_t *spec, const perf_options_t *opts, int ranks);

/* Whether rank's input has no planted zeros (always, unless sparse). */
int perf_data_rank_is_dense(const perf_data_spec_t *spec, int rank);

/* The value rank contributes at index (0 at the sparse positions). */
int64_t perf_data_value(const perf_data_spec_t *spec, int rank, size_t index);

/* Writes elements [0, count) of rank's input into buf, in the spec's datatype. */
void perf_data_fill(const perf_data_spec_t *spec, int rank, void *buf, size_t count);

/* The second number of a pair or complex element of rank's input at index: a pair's
 * index is the rank (MPI's usual owner index); a complex number's imaginary part is the
 * value at index + 1, or 0 for a product (whose result then stays exact). 0 for the
 * other datatypes. */
int64_t perf_data_second(const perf_data_spec_t *spec, int rank, size_t index);

/* Stores an integer value as element `index` of a buffer of dtype (integers wrap; a
 * pair or complex element gets `second` as its index or imaginary part, padding 0). */
void perf_element_store(fold_dtype_t dtype, int64_t value, void *buf, size_t index);
void perf_element_store2(fold_dtype_t dtype, int64_t value, int64_t second, void *buf,
                         size_t index);

/* Prints element `index` of a buffer of dtype as a number. */
void perf_element_format(fold_dtype_t dtype, const void *buf, size_t index, char *out,
                         size_t len);

#endif
