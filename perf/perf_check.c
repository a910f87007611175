#include "perf_check.h"

#include <string.h>

enum { MAX_REPORTED_MISMATCHES = 5 };

int64_t perf_reference_combine(fold_op_t op, int64_t a, int64_t b)
{
    /* Unsigned arithmetic: wrap-around is defined, and truncation to the datatype
     * on store gives the same bits as a reduction in that datatype. */
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case FOLD_OP_SUM:  return (int64_t)(ua + ub);
    case FOLD_OP_PROD: return (int64_t)(ua * ub);
    case FOLD_OP_MIN:  return a < b ? a : b;
    case FOLD_OP_MAX:  return a > b ? a : b;
    case FOLD_OP_BAND: return (int64_t)(ua & ub);
    case FOLD_OP_BOR:  return (int64_t)(ua | ub);
    case FOLD_OP_BXOR: return (int64_t)(ua ^ ub);
    case FOLD_OP_LAND: return (a != 0) && (b != 0);
    case FOLD_OP_LOR:  return (a != 0) || (b != 0);
    case FOLD_OP_LXOR: return (a != 0) != (b != 0);
    default:           return 0;
    }
}

/* maxloc/minloc: the better value, the lowest rank (each rank's index) on a tie;
 * complex: both parts summed, or the real parts multiplied (perf_data_second). */
static void reference_two_part(const perf_data_spec_t *spec, void *expected, size_t count)
{
    int loc = spec->op == FOLD_OP_MAXLOC || spec->op == FOLD_OP_MINLOC;
    for (size_t i = 0; i < count; i++) {
        int64_t a = perf_data_value(spec, 0, i), b = perf_data_second(spec, 0, i);
        for (int r = 1; r < spec->ranks; r++) {
            int64_t v = perf_data_value(spec, r, i), w = perf_data_second(spec, r, i);
            if (loc) {
                int better = spec->op == FOLD_OP_MAXLOC ? v > a : v < a;
                a = better ? v : a;
                b = better ? w : b;
            } else {
                a = perf_reference_combine(spec->op, a, v);
                b = spec->op == FOLD_OP_PROD ? 0 : b + w;
            }
        }
        perf_element_store2(spec->dtype, a, b, expected, i);
    }
}

void perf_reference_reduce(const perf_data_spec_t *spec, void *expected, size_t count)
{
    if ((spec->dtype >= FOLD_FLOAT_INT && spec->dtype <= FOLD_SHORT_INT) ||
        spec->dtype == FOLD_COMPLEX_FLOAT32 || spec->dtype == FOLD_COMPLEX_FLOAT64) {
        reference_two_part(spec, expected, count);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        int64_t acc = perf_data_value(spec, 0, i);
        for (int r = 1; r < spec->ranks; r++) {
            acc = perf_reference_combine(spec->op, acc, perf_data_value(spec, r, i));
        }
        /* With one rank no op is applied: a logical op returns the input as it is. */
        perf_element_store(spec->dtype, acc, expected, i);
    }
}

size_t perf_check_compare(fold_dtype_t dtype, const void *expected, const void *actual,
                          size_t count, const char *context, FILE *log)
{
    size_t esize = fold_dtype_size(dtype);
    const unsigned char *e = expected, *a = actual;
    size_t mismatches = 0;
    if (memcmp(e, a, count * esize) == 0) {
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        if (memcmp(e + i * esize, a + i * esize, esize) == 0) {
            continue;
        }
        if (mismatches < MAX_REPORTED_MISMATCHES && log != NULL) {
            char want[64], got[64];
            perf_element_format(dtype, expected, i, want, sizeof(want));
            perf_element_format(dtype, actual, i, got, sizeof(got));
            fprintf(log, "fold_perf: CHECK FAILED %s: index %zu: expected %s, got %s\n",
                     context, i, want, got);
        }
        mismatches++;
    }
    if (mismatches > MAX_REPORTED_MISMATCHES && log != NULL) {
        fprintf(log, "fold_perf: CHECK FAILED %s: %zu of %zu elements differ\n", context,
                mismatches, count);
    }
    return mismatches;
}
