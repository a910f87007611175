/* fold_perf's data and reference check: the inputs are what the help promises, the
 * reference is exact, and a wrong element is caught and named. */
#include "perf_check.h"
#include "perf_data.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static perf_data_spec_t make_spec(fold_dtype_t dtype, fold_op_t op, int ranks)
{
    perf_options_t o;
    perf_options_defaults(&o);
    o.dtype = dtype;
    o.op    = op;
    perf_data_spec_t spec;
    perf_data_spec_init(&spec, &o, ranks);
    return spec;
}

static double element_as_double(fold_dtype_t dtype, const void *buf, size_t i)
{
    char text[64];
    perf_element_format(dtype, buf, i, text, sizeof(text));
    return strtod(text, NULL);
}

Test(perf_check, reference_is_the_sum_of_every_rank_input)
{
    perf_data_spec_t spec = make_spec(FOLD_FLOAT32, FOLD_OP_SUM, 3);
    float expected[1000];
    perf_reference_reduce(&spec, expected, 1000);
    for (size_t i = 0; i < 1000; i++) {
        int64_t sum = 0;
        for (int r = 0; r < 3; r++) {
            sum += perf_data_value(&spec, r, i);
        }
        cr_assert_eq(expected[i], (float)sum, "index %zu", i);
    }
}

Test(perf_check, fill_matches_value_and_is_deterministic)
{
    perf_data_spec_t spec = make_spec(FOLD_INT32, FOLD_OP_MAX, 4);
    int32_t a[512], b[512];
    perf_data_fill(&spec, 2, a, 512);
    perf_data_fill(&spec, 2, b, 512);
    cr_expect_eq(memcmp(a, b, sizeof(a)), 0);
    for (size_t i = 0; i < 512; i++) {
        cr_assert_eq(a[i], (int32_t)perf_data_value(&spec, 2, i));
    }
    spec.seed = 99;
    perf_data_fill(&spec, 2, b, 512);
    cr_expect_neq(memcmp(a, b, sizeof(a)), 0, "a new seed gives new data");
}

/* The deliberately wrong result: one flipped element is caught and named. */
Test(perf_check, one_wrong_element_is_caught)
{
    perf_data_spec_t spec = make_spec(FOLD_FLOAT32, FOLD_OP_SUM, 2);
    float expected[256], actual[256];
    perf_reference_reduce(&spec, expected, 256);
    memcpy(actual, expected, sizeof(actual));
    cr_expect_eq(perf_check_compare(FOLD_FLOAT32, expected, actual, 256, "ctx", NULL), 0);

    actual[17] += 1.0f;
    char *log = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&log, &len);
    size_t bad = perf_check_compare(FOLD_FLOAT32, expected, actual, 256,
                                    "on rank 1, allreduce ring", out);
    fclose(out);
    cr_expect_eq(bad, 1);
    char want[96];
    snprintf(want, sizeof(want), "on rank 1, allreduce ring: index 17: expected %.9g, got %.9g",
             (double)expected[17], (double)actual[17]);
    cr_expect(strstr(log, want) != NULL, "log '%s' lacks '%s'", log, want);
    free(log);
}

Test(perf_check, many_mismatches_are_counted_and_summarised)
{
    perf_data_spec_t spec = make_spec(FOLD_INT16, FOLD_OP_SUM, 5);
    int16_t expected[100], actual[100];
    perf_reference_reduce(&spec, expected, 100);
    memset(actual, 0xA5, sizeof(actual));
    char *log = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&log, &len);
    cr_expect_eq(perf_check_compare(FOLD_INT16, expected, actual, 100, "ctx", out), 100);
    fclose(out);
    cr_expect(strstr(log, "100 of 100 elements differ") != NULL, "%s", log);
    free(log);
}

/* A float one ulp off, or a -0 for a +0, is a mismatch: the comparison is bitwise. */
Test(perf_check, comparison_is_bit_exact)
{
    double expected[2] = {3.0, 0.0}, actual[2] = {3.0000000000000004, -0.0};
    cr_expect_eq(perf_check_compare(FOLD_FLOAT64, expected, actual, 2, "ctx", NULL), 2);
}

/* Every partial result must be exact in the datatype whatever the order of the
 * reduction: for sums the total over all ranks stays within the exact range. */
Test(perf_check, sums_stay_exact_in_every_datatype)
{
    const struct { fold_dtype_t dtype; int64_t limit; } types[] = {
        {FOLD_INT8, 127}, {FOLD_UINT8, 255}, {FOLD_INT16, 32767}, {FOLD_FLOAT16, 2048},
        {FOLD_BFLOAT16, 256}, {FOLD_FLOAT32, 1 << 24}, {FOLD_INT64, INT64_MAX}};
    const int ranks[] = {1, 2, 3, 7, 33, 100};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (size_t r = 0; r < sizeof(ranks) / sizeof(ranks[0]); r++) {
            if (ranks[r] > types[t].limit) {
                continue;
            }
            perf_data_spec_t spec = make_spec(types[t].dtype, FOLD_OP_SUM, ranks[r]);
            for (size_t i = 0; i < 2000; i++) {
                int64_t sum = 0;
                for (int q = 0; q < ranks[r]; q++) {
                    int64_t v = perf_data_value(&spec, q, i);
                    cr_assert(v >= 0);
                    sum += v;
                }
                cr_assert(sum <= types[t].limit, "%s, %d ranks: index %zu sums to %lld",
                          fold_dtype_name(types[t].dtype), ranks[r], i, (long long)sum);
            }
        }
    }
}

Test(perf_check, products_and_extrema_stay_exact)
{
    perf_data_spec_t prod = make_spec(FOLD_FLOAT16, FOLD_OP_PROD, 40);
    perf_data_spec_t max = make_spec(FOLD_INT8, FOLD_OP_MAX, 40);
    perf_data_spec_t umin = make_spec(FOLD_UINT8, FOLD_OP_MIN, 40);
    for (size_t i = 0; i < 2000; i++) {
        int64_t product = 1;
        for (int q = 0; q < 40; q++) {
            product *= perf_data_value(&prod, q, i);
            int64_t m = perf_data_value(&max, q, i), u = perf_data_value(&umin, q, i);
            cr_assert(m >= -100 && m <= 100);
            cr_assert(u >= 0 && u <= 200);
        }
        cr_assert(product >= 1 && product <= 256, "index %zu: product %lld", i,
                  (long long)product);
    }
}

Test(perf_check, combine_follows_mpi_semantics)
{
    cr_expect_eq(perf_reference_combine(FOLD_OP_LAND, 3, 2), 1);
    cr_expect_eq(perf_reference_combine(FOLD_OP_LAND, 3, 0), 0);
    cr_expect_eq(perf_reference_combine(FOLD_OP_LOR, 0, 0), 0);
    cr_expect_eq(perf_reference_combine(FOLD_OP_LXOR, 5, 1), 0);
    cr_expect_eq(perf_reference_combine(FOLD_OP_LXOR, 5, 0), 1);
    cr_expect_eq(perf_reference_combine(FOLD_OP_BXOR, 0xf0, 0xff), 0x0f);
    cr_expect_eq(perf_reference_combine(FOLD_OP_MIN, -3, 2), -3);
    /* Integer products wrap: 128 * 2 in int8 is 0. */
    int8_t wrapped;
    perf_element_store(FOLD_INT8, perf_reference_combine(FOLD_OP_PROD, 128, 2), &wrapped, 0);
    cr_expect_eq(wrapped, 0);
}

Test(perf_check, half_precision_integers_round_trip)
{
    uint16_t h;
    for (int64_t v = -2048; v <= 2048; v++) {
        perf_element_store(FOLD_FLOAT16, v, &h, 0);
        cr_assert_eq(element_as_double(FOLD_FLOAT16, &h, 0), (double)v, "float16 %lld",
                     (long long)v);
    }
    for (int64_t v = -256; v <= 256; v++) {
        perf_element_store(FOLD_BFLOAT16, v, &h, 0);
        cr_assert_eq(element_as_double(FOLD_BFLOAT16, &h, 0), (double)v, "bfloat16 %lld",
                     (long long)v);
    }
    perf_element_store(FOLD_FLOAT16, 65536, &h, 0);
    cr_expect_eq(h, 0x7c00, "beyond float16's range is infinity");
}

Test(perf_check, sparsity_and_distributions)
{
    perf_options_t o;
    perf_options_defaults(&o);
    o.sparsity = 0.9;
    perf_data_spec_t uniform;
    perf_data_spec_init(&uniform, &o, 4);
    enum { N = 100000 };
    size_t zeros = 0, same = 0;
    for (size_t i = 0; i < N; i++) {
        int z0 = perf_data_value(&uniform, 0, i) == 0, z1 = perf_data_value(&uniform, 1, i) == 0;
        zeros += z0;
        same += z0 && z1;
    }
    cr_expect(zeros > 0.88 * N && zeros < 0.92 * N, "uniform: %zu zeros", zeros);
    cr_expect(same < 0.85 * N, "uniform positions differ between ranks (%zu shared)", same);

    o.distribution = PERF_DIST_IDENTICAL;
    perf_data_spec_t identical;
    perf_data_spec_init(&identical, &o, 4);
    for (size_t i = 0; i < 10000; i++) {
        cr_assert_eq(perf_data_value(&identical, 0, i) == 0,
                     perf_data_value(&identical, 3, i) == 0, "index %zu", i);
    }

    o.distribution = PERF_DIST_IMBALANCED;
    perf_data_spec_t imbalanced;
    perf_data_spec_init(&imbalanced, &o, 16);
    int dense = 0;
    for (int r = 0; r < 16; r++) {
        dense += perf_data_rank_is_dense(&imbalanced, r);
    }
    cr_expect_eq(dense, 2, "16 ranks: max(1, 16 / 8) dense ranks");
    cr_expect(perf_data_rank_is_dense(&imbalanced, 0));
    cr_expect(perf_data_rank_is_dense(&imbalanced, 8));
    for (size_t i = 0; i < 10000; i++) {
        cr_assert_neq(perf_data_value(&imbalanced, 8, i), 0, "a dense rank has no zeros");
    }
    o.dense_ranks = 3;
    perf_data_spec_init(&imbalanced, &o, 2);
    cr_expect_eq(imbalanced.dense_ranks, 2, "no more dense ranks than ranks");
}

/* maxloc/minloc: each rank's index is its rank, and the reference keeps the better
 * value with the lowest rank holding it; complex sums add both parts, products the
 * real parts (the imaginary parts are 0). Checked from perf_data_value itself. */
Test(perf_check, pairs_and_complex)
{
    enum { N = 300, P = 5 };
    for (int o = 0; o < 2; o++) {
        fold_op_t op = o ? FOLD_OP_MINLOC : FOLD_OP_MAXLOC;
        perf_data_spec_t spec = make_spec(FOLD_DOUBLE_INT, op, P);
        fold_double_int_t expected[N], in[N];
        perf_reference_reduce(&spec, expected, N);
        perf_data_fill(&spec, 3, in, N);
        int ties = 0;
        for (size_t i = 0; i < N; i++) {
            cr_assert(in[i].v == (double)perf_data_value(&spec, 3, i) && in[i].i == 3);
            int at = 0;
            for (int r = 1; r < P; r++) {
                int64_t v = perf_data_value(&spec, r, i), best = perf_data_value(&spec, at, i);
                at = (o ? v < best : v > best) ? r : at;
                ties += v == best;
            }
            cr_assert(expected[i].v == (double)perf_data_value(&spec, at, i) &&
                          expected[i].i == at, "%s index %zu", fold_op_name(op), i);
        }
        cr_assert_gt(ties, 0, "no tie to decide");
    }
    perf_data_spec_t spec = make_spec(FOLD_COMPLEX_FLOAT32, FOLD_OP_SUM, P);
    float sum[2 * N];
    perf_reference_reduce(&spec, sum, N);
    for (size_t i = 0; i < N; i++) {
        int64_t re = 0, im = 0;
        for (int r = 0; r < P; r++) {
            re += perf_data_value(&spec, r, i);
            im += perf_data_value(&spec, r, i + 1);
        }
        cr_assert(sum[2 * i] == (float)re && sum[2 * i + 1] == (float)im, "index %zu", i);
    }
    spec = make_spec(FOLD_COMPLEX_FLOAT64, FOLD_OP_PROD, P);
    double prod[2 * N];
    perf_reference_reduce(&spec, prod, N);
    for (size_t i = 0; i < N; i++) {
        int64_t re = 1;
        for (int r = 0; r < P; r++) {
            re *= perf_data_value(&spec, r, i);
        }
        cr_assert(prod[2 * i] == (double)re && prod[2 * i + 1] == 0, "index %zu", i);
    }
    char text[64];
    fold_short_int_t pair = {-7, 4};
    perf_element_format(FOLD_SHORT_INT, &pair, 0, text, sizeof(text));
    cr_assert_str_eq(text, "(-7, 4)");
}
