/*
 * The reference check: what a collective must produce, computed on one rank from
 * every rank's input (perf_data) without communicating, and an exact comparison.
 */
#ifndef FOLD_PERF_CHECK_H
#define FOLD_PERF_CHECK_H

#include "perf_data.h"

#include <stdio.h>

/* a op b for the integer values perf_data produces, with MPI's semantics for
 * predefined ops (logical ops give 0 or 1, integer sums and products wrap). */
int64_t perf_reference_combine(fold_op_t op, int64_t a, int64_t b);

/* Writes into expected (count elements of spec->dtype) the reduction over all ranks. */
void perf_reference_reduce(const perf_data_spec_t *spec, void *expected, size_t count);

/* Compares actual with expected element by element, bit for bit. Reports the first
 * few mismatches to log, each prefixed with `context`; returns how many there were. */
size_t perf_check_compare(fold_dtype_t dtype, const void *expected, const void *actual,
                          size_t count, const char *context, FILE *log);

#endif
