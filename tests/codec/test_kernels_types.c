/*
 * The pair types with maxloc/minloc and the complex types with sum/prod: every kernel
 * against a scalar reference written here from fold.h's rules (field by field through
 * the public structs for pairs, C99's own complex arithmetic for complex), with dst
 * distinct from, or the same as, either operand, on the threaded path too; the
 * properties every algorithm relies on (commutative and associative bit for bit, pair
 * padding written as zeros); NaN inputs reduce without crashing; and every
 * (datatype, op) pair outside the rules is refused.
 */
#include "test_rng.h"
#include <criterion/criterion.h>

#include "codec/reduce_kernel.h"
#include "log.h"

#include <fold/fold.h>

#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const size_t counts[] = {0, 1, 7, 33, 1024, 20011};

static const fold_dtype_t pair_types[] = {FOLD_FLOAT_INT, FOLD_DOUBLE_INT, FOLD_LONG_INT,
                                          FOLD_2INT, FOLD_SHORT_INT};
static const fold_dtype_t complex_types[] = {FOLD_COMPLEX_FLOAT32, FOLD_COMPLEX_FLOAT64};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int is_pair(fold_dtype_t dt)
{
    return dt >= FOLD_FLOAT_INT && dt <= FOLD_SHORT_INT;
}

static int is_complex(fold_dtype_t dt)
{
    return dt == FOLD_COMPLEX_FLOAT32 || dt == FOLD_COMPLEX_FLOAT64;
}

static void *alloc_bytes(size_t n)
{
    void *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    return p;
}

/* ---- Pairs: values and indices as numbers ------------------------------------ */

/* One pair element, its value widened to double (exact for every type here:
 * long values are kept within 2^53) and its sign bit for the zeros. */
typedef struct pair {
    double v;
    int    i;
} pair_t;

static pair_t pair_load(fold_dtype_t dt, const void *buf, size_t k)
{
    const char *p = (const char *)buf + k * fold_dtype_size(dt);
    switch (dt) {
    case FOLD_FLOAT_INT:  { fold_float_int_t e;  memcpy(&e, p, sizeof(e)); return (pair_t){e.v, e.i}; }
    case FOLD_DOUBLE_INT: { fold_double_int_t e; memcpy(&e, p, sizeof(e)); return (pair_t){e.v, e.i}; }
    case FOLD_LONG_INT:   { fold_long_int_t e;   memcpy(&e, p, sizeof(e)); return (pair_t){(double)e.v, e.i}; }
    case FOLD_2INT:       { fold_2int_t e;       memcpy(&e, p, sizeof(e)); return (pair_t){e.v, e.i}; }
    default:              { fold_short_int_t e;  memcpy(&e, p, sizeof(e)); return (pair_t){e.v, e.i}; }
    }
}

/* Stores a pair with its padding zeroed (the inputs' padding is then known). */
static void pair_store(fold_dtype_t dt, void *buf, size_t k, pair_t x)
{
    char *p = (char *)buf + k * fold_dtype_size(dt);
    memset(p, 0, fold_dtype_size(dt));
    switch (dt) {
    case FOLD_FLOAT_INT:  { float v = (float)x.v;   memcpy(p, &v, sizeof(v)); memcpy(p + offsetof(fold_float_int_t, i), &x.i, 4); break; }
    case FOLD_DOUBLE_INT: { double v = x.v;         memcpy(p, &v, sizeof(v)); memcpy(p + offsetof(fold_double_int_t, i), &x.i, 4); break; }
    case FOLD_LONG_INT:   { long v = (long)x.v;     memcpy(p, &v, sizeof(v)); memcpy(p + offsetof(fold_long_int_t, i), &x.i, 4); break; }
    case FOLD_2INT:       { int v = (int)x.v;       memcpy(p, &v, sizeof(v)); memcpy(p + offsetof(fold_2int_t, i), &x.i, 4); break; }
    default:              { short v = (short)x.v;   memcpy(p, &v, sizeof(v)); memcpy(p + offsetof(fold_short_int_t, i), &x.i, 4); break; }
    }
}

static int pair_is_float(fold_dtype_t dt)
{
    return dt == FOLD_FLOAT_INT || dt == FOLD_DOUBLE_INT;
}

/* A value from a small set, so that ties are common: -0 and +0 for floats, the
 * type's extremes, and (nan_too) NaN. Indices from a small range with negatives,
 * not ordered like the values. */
static pair_t random_pair(uint64_t *rng, fold_dtype_t dt, int nan_too)
{
    uint64_t r = rng_next(rng);
    pair_t x = {(double)((int)(r % 7) - 3), (int)((r >> 8) % 9) - 4};
    switch ((r >> 16) % 16) {
    case 0:  x.v = pair_is_float(dt) ? -0.0 : 0; break;
    case 1:  x.v = dt == FOLD_SHORT_INT ? -32768 : dt == FOLD_FLOAT_INT ? -3.4e38 : -2147483648.0; break;
    case 2:  x.v = dt == FOLD_SHORT_INT ? 32767 : dt == FOLD_FLOAT_INT ? 3.4e38 : 2147483647.0; break;
    case 3:  x.i = (r >> 24) % 2 ? 2147483647 : -2147483647 - 1; break;
    case 4:  x.v = pair_is_float(dt) && nan_too ? NAN : x.v; break;
    case 5:  x.v = dt == FOLD_LONG_INT ? (double)(INT64_C(1) << 40) : x.v; break;
    default: break;
    }
    return x;
}

/* fold.h's rule, from the numbers: the better value with its index; equal values
 * keep the lower index, and +0 beside -0 gives +0 (maxloc) or -0 (minloc). */
static pair_t ref_loc(fold_op_t op, pair_t a, pair_t b)
{
    int maxloc = op == FOLD_OP_MAXLOC;
    if (a.v != b.v) {
        return (maxloc ? a.v > b.v : a.v < b.v) ? a : b;
    }
    pair_t r = {a.v, a.i < b.i ? a.i : b.i};
    if (a.v == 0 && signbit(a.v) != signbit(b.v)) {
        r.v = maxloc ? 0.0 : -0.0;
    }
    return r;
}

static int same_pair(pair_t x, pair_t y)
{
    return x.i == y.i && x.v == y.v && signbit(x.v) == signbit(y.v);
}

/* Whether byte b of a pair element is padding (neither value nor index). */
static int is_padding(fold_dtype_t dt, size_t b)
{
    size_t vsize = dt == FOLD_FLOAT_INT ? 4 : dt == FOLD_DOUBLE_INT ? 8
                 : dt == FOLD_LONG_INT ? sizeof(long) : dt == FOLD_2INT ? 4 : 2;
    size_t ioff = dt == FOLD_DOUBLE_INT ? offsetof(fold_double_int_t, i)
                : dt == FOLD_LONG_INT ? offsetof(fold_long_int_t, i)
                : dt == FOLD_SHORT_INT ? offsetof(fold_short_int_t, i) : 4;
    return !(b < vsize || (b >= ioff && b < ioff + 4));
}

/* Padding must be zero in every result, whatever the inputs' padding held. */
static int padding_is_zero(fold_dtype_t dt, const void *buf, size_t k)
{
    const unsigned char *p = (const unsigned char *)buf + k * fold_dtype_size(dt);
    for (size_t b = 0; b < fold_dtype_size(dt); b++) {
        if (is_padding(dt, b) && p[b] != 0) {
            return 0;
        }
    }
    return 1;
}

/* Random pairs; the padding of every other element holds junk, as an application's
 * uninitialised structs may. */
static void fill_pairs(fold_dtype_t dt, void *buf, size_t n, uint64_t seed, int nan_too)
{
    uint64_t rng = seed | 1;
    for (size_t k = 0; k < n; k++) {
        pair_store(dt, buf, k, random_pair(&rng, dt, nan_too));
        unsigned char *p = (unsigned char *)buf + k * fold_dtype_size(dt);
        for (size_t b = 0; b < fold_dtype_size(dt) && k % 2; b++) {
            p[b] = is_padding(dt, b) ? (unsigned char)(0xa7 + b) : p[b];
        }
    }
}

typedef enum { DST_DISTINCT, DST_IS_LEFT, DST_IS_RIGHT } aliasing_t;

/* dst = left op right as fold_reduce_local computes it, with dst where `alias` says;
 * returns dst (malloc'd). */
static char *reduce_aliased(fold_op_t op, fold_dtype_t dt, const char *left, const char *right,
                            size_t n, aliasing_t alias, int nthreads)
{
    size_t bytes = n * fold_dtype_size(dt);
    char *l = alloc_bytes(bytes), *r = alloc_bytes(bytes), *d = alloc_bytes(bytes);
    memcpy(l, left, bytes);
    memcpy(r, right, bytes);
    memset(d, 0xa5, bytes);   /* stale padding a kernel must overwrite */
    char *out = alias == DST_IS_LEFT ? l : alias == DST_IS_RIGHT ? r : d;
    cr_assert_eq(fold_reduce_local(op, dt, l, r, out, n, nthreads, 0), FOLD_OK);
    memcpy(d, out, bytes);
    if (alias != DST_IS_LEFT) {
        cr_assert(memcmp(l, left, bytes) == 0, "left operand modified");
    }
    if (alias != DST_IS_RIGHT) {
        cr_assert(memcmp(r, right, bytes) == 0, "right operand modified");
    }
    free(l);
    free(r);
    return d;
}

static void check_pairs(fold_dtype_t dt, fold_op_t op)
{
    for (size_t c = 0; c < NELEMS(counts); c++) {
        size_t n = counts[c], bytes = n * fold_dtype_size(dt);
        char *left = alloc_bytes(bytes), *right = alloc_bytes(bytes);
        fill_pairs(dt, left, n, 0x1234 + n, 0);
        fill_pairs(dt, right, n, 0xbeef + 3 * n + (uint64_t)dt, 0);
        for (int a = DST_DISTINCT; a <= DST_IS_RIGHT; a++) {
            for (int threads = 1; threads <= 2; threads++) {
                char *d = reduce_aliased(op, dt, left, right, n, (aliasing_t)a, threads);
                for (size_t k = 0; k < n; k++) {
                    pair_t want = ref_loc(op, pair_load(dt, left, k), pair_load(dt, right, k));
                    pair_t got = pair_load(dt, d, k);
                    cr_assert(same_pair(got, want),
                              "%s %s count %zu alias %d threads %d element %zu: (%g, %d) op "
                              "(%g, %d) gave (%g, %d), want (%g, %d)",
                              fold_op_name(op), fold_dtype_name(dt), n, a, threads, k,
                              pair_load(dt, left, k).v, pair_load(dt, left, k).i,
                              pair_load(dt, right, k).v, pair_load(dt, right, k).i, got.v,
                              got.i, want.v, want.i);
                    cr_assert(padding_is_zero(dt, d, k), "%s %s element %zu: padding not zero",
                              fold_op_name(op), fold_dtype_name(dt), k);
                }
                free(d);
            }
        }
        free(left);
        free(right);
    }
}

Test(pairs, against_reference, .timeout = 120)
{
    for (size_t t = 0; t < NELEMS(pair_types); t++) {
        check_pairs(pair_types[t], FOLD_OP_MAXLOC);
        check_pairs(pair_types[t], FOLD_OP_MINLOC);
    }
}

/* Ties by construction: equal values everywhere, so every index comes from the
 * lower one, whichever side holds it. */
Test(pairs, ties_take_the_lower_index)
{
    enum { N = 37 };
    for (size_t t = 0; t < NELEMS(pair_types); t++) {
        fold_dtype_t dt = pair_types[t];
        char l[N * 16], r[N * 16], d[N * 16];
        for (size_t k = 0; k < N; k++) {
            int lo = (int)k - 18, hi = lo + 1 + (int)(k % 3);
            pair_store(dt, l, k, (pair_t){5, k % 2 ? lo : hi});
            pair_store(dt, r, k, (pair_t){5, k % 2 ? hi : lo});
        }
        for (int o = 0; o < 2; o++) {
            fold_op_t op = o ? FOLD_OP_MINLOC : FOLD_OP_MAXLOC;
            cr_assert_eq(fold_reduce_local(op, dt, l, r, d, N, 1, 0), FOLD_OK);
            for (size_t k = 0; k < N; k++) {
                cr_assert_eq(pair_load(dt, d, k).i, (int)k - 18, "%s %s element %zu",
                             fold_op_name(op), fold_dtype_name(dt), k);
                cr_assert_eq(pair_load(dt, d, k).v, 5);
            }
        }
    }
    /* +0 and -0 are equal values: the lower index, and the sign by the op. */
    char l[16], r[16], d[16];
    pair_store(FOLD_DOUBLE_INT, l, 0, (pair_t){-0.0, 3});
    pair_store(FOLD_DOUBLE_INT, r, 0, (pair_t){0.0, 7});
    cr_assert_eq(fold_reduce_local(FOLD_OP_MAXLOC, FOLD_DOUBLE_INT, l, r, d, 1, 1, 0), FOLD_OK);
    cr_assert(same_pair(pair_load(FOLD_DOUBLE_INT, d, 0), (pair_t){0.0, 3}));
    cr_assert_eq(fold_reduce_local(FOLD_OP_MINLOC, FOLD_DOUBLE_INT, r, l, d, 1, 1, 0), FOLD_OK);
    cr_assert(same_pair(pair_load(FOLD_DOUBLE_INT, d, 0), (pair_t){-0.0, 3}));
}

/* What lets every algorithm give every rank the same bits: a op b == b op a and
 * (a op b) op c == a op (b op c), compared as bytes (padding included). */
Test(pairs, commutative_and_associative_bits)
{
    enum { N = 4099 };
    for (size_t t = 0; t < NELEMS(pair_types); t++) {
        fold_dtype_t dt = pair_types[t];
        size_t bytes = N * fold_dtype_size(dt);
        char *a = alloc_bytes(bytes), *b = alloc_bytes(bytes), *c = alloc_bytes(bytes);
        char *x = alloc_bytes(bytes), *y = alloc_bytes(bytes);
        fill_pairs(dt, a, N, 1, 0);
        fill_pairs(dt, b, N, 2, 0);
        fill_pairs(dt, c, N, 3, 0);
        for (int o = 0; o < 2; o++) {
            fold_op_t op = o ? FOLD_OP_MINLOC : FOLD_OP_MAXLOC;
            fold_reduce_local(op, dt, a, b, x, N, 1, 0);
            fold_reduce_local(op, dt, b, a, y, N, 1, 0);
            cr_assert(memcmp(x, y, bytes) == 0, "%s %s not commutative", fold_op_name(op),
                      fold_dtype_name(dt));
            fold_reduce_local(op, dt, x, c, x, N, 1, 0);   /* (a op b) op c */
            fold_reduce_local(op, dt, b, c, y, N, 1, 0);
            fold_reduce_local(op, dt, a, y, y, N, 1, 0);   /* a op (b op c) */
            cr_assert(memcmp(x, y, bytes) == 0, "%s %s not associative", fold_op_name(op),
                      fold_dtype_name(dt));
        }
        free(a);
        free(b);
        free(c);
        free(x);
        free(y);
    }
}

/* NaN values follow no rule, but reduce without trouble, and elements without a
 * NaN still follow the reference. */
Test(pairs, nan_values_reduce)
{
    enum { N = 1000 };
    const fold_dtype_t floats[] = {FOLD_FLOAT_INT, FOLD_DOUBLE_INT};
    for (size_t t = 0; t < NELEMS(floats); t++) {
        fold_dtype_t dt = floats[t];
        char *l = alloc_bytes(N * 16), *r = alloc_bytes(N * 16), *d = alloc_bytes(N * 16);
        fill_pairs(dt, l, N, 5, 1);
        fill_pairs(dt, r, N, 6, 1);
        for (int o = 0; o < 2; o++) {
            fold_op_t op = o ? FOLD_OP_MINLOC : FOLD_OP_MAXLOC;
            cr_assert_eq(fold_reduce_local(op, dt, l, r, d, N, 2, 0), FOLD_OK);
            size_t nans = 0;
            for (size_t k = 0; k < N; k++) {
                pair_t a = pair_load(dt, l, k), b = pair_load(dt, r, k);
                if (isnan(a.v) || isnan(b.v)) {
                    nans++;
                    continue;
                }
                cr_assert(same_pair(pair_load(dt, d, k), ref_loc(op, a, b)), "element %zu", k);
            }
            cr_assert_gt(nans, 0, "the data had no NaN");
        }
        free(l);
        free(r);
        free(d);
    }
}

/* ---- Complex ----------------------------------------------------------------- */

static void fill_complex(fold_dtype_t dt, void *buf, size_t n, uint64_t seed, int specials)
{
    uint64_t rng = seed | 1;
    for (size_t k = 0; k < 2 * n; k++) {
        uint64_t r = rng_next(&rng);
        double v = ((double)(int64_t)(r >> 11) / (double)(INT64_C(1) << 50)) *
                   (double)(1 + (r & 7));   /* -8..8, with full mantissas */
        if (r % 5 == 0) {
            v = (double)((int)(r % 11) - 5);   /* small integers, zeros */
        }
        if (specials && r % 13 == 0) {
            v = (r & 16) ? INFINITY : NAN;
        }
        if (dt == FOLD_COMPLEX_FLOAT32) {
            ((float *)buf)[k] = (float)v;
        } else {
            ((double *)buf)[k] = v;
        }
    }
}

/* C99's complex arithmetic: the independent reference (finite results only; C's
 * product recovers infinities where fold's formula gives NaN). */
static void ref_complex(fold_op_t op, fold_dtype_t dt, const void *l, const void *r, size_t k,
                        double *re, double *im)
{
    if (dt == FOLD_COMPLEX_FLOAT32) {
        float complex a = ((const float complex *)l)[k], b = ((const float complex *)r)[k];
        float complex z = op == FOLD_OP_SUM ? a + b : a * b;
        *re = crealf(z);
        *im = cimagf(z);
    } else {
        double complex a = ((const double complex *)l)[k], b = ((const double complex *)r)[k];
        double complex z = op == FOLD_OP_SUM ? a + b : a * b;
        *re = creal(z);
        *im = cimag(z);
    }
}

static void complex_at(fold_dtype_t dt, const void *buf, size_t k, double *re, double *im)
{
    if (dt == FOLD_COMPLEX_FLOAT32) {
        *re = ((const float *)buf)[2 * k];
        *im = ((const float *)buf)[2 * k + 1];
    } else {
        *re = ((const double *)buf)[2 * k];
        *im = ((const double *)buf)[2 * k + 1];
    }
}

static void check_complex(fold_dtype_t dt, fold_op_t op)
{
    for (size_t c = 0; c < NELEMS(counts); c++) {
        size_t n = counts[c], bytes = n * fold_dtype_size(dt);
        char *left = alloc_bytes(bytes), *right = alloc_bytes(bytes);
        fill_complex(dt, left, n, 77 + n, 0);
        fill_complex(dt, right, n, 99 + 5 * n, 0);
        for (int a = DST_DISTINCT; a <= DST_IS_RIGHT; a++) {
            for (int threads = 1; threads <= 2; threads++) {
                char *d = reduce_aliased(op, dt, left, right, n, (aliasing_t)a, threads);
                for (size_t k = 0; k < n; k++) {
                    double re, im, want_re, want_im;
                    complex_at(dt, d, k, &re, &im);
                    ref_complex(op, dt, left, right, k, &want_re, &want_im);
                    /* Bit for bit: the same IEEE operations in the same order. */
                    cr_assert(re == want_re && im == want_im &&
                                  signbit(re) == signbit(want_re) &&
                                  signbit(im) == signbit(want_im),
                              "%s %s count %zu alias %d element %zu: (%a, %a) want (%a, %a)",
                              fold_op_name(op), fold_dtype_name(dt), n, a, k, re, im, want_re,
                              want_im);
                }
                free(d);
            }
        }
        free(left);
        free(right);
    }
}

Test(complex_types, against_c99, .timeout = 120)
{
    for (size_t t = 0; t < NELEMS(complex_types); t++) {
        check_complex(complex_types[t], FOLD_OP_SUM);
        check_complex(complex_types[t], FOLD_OP_PROD);
    }
}

Test(complex_types, product_is_commutative_and_known)
{
    /* (1+2i)(3-4i) = 11+2i; i*i = -1. */
    double l[4] = {1, 2, 0, 1}, r[4] = {3, -4, 0, 1}, d[4];
    cr_assert_eq(fold_reduce_local(FOLD_OP_PROD, FOLD_COMPLEX_FLOAT64, l, r, d, 2, 1, 0),
                 FOLD_OK);
    cr_assert(d[0] == 11 && d[1] == 2 && d[2] == -1 && d[3] == 0);
    enum { N = 4099 };
    for (size_t t = 0; t < NELEMS(complex_types); t++) {
        fold_dtype_t dt = complex_types[t];
        size_t bytes = N * fold_dtype_size(dt);
        char *a = alloc_bytes(bytes), *b = alloc_bytes(bytes);
        char *x = alloc_bytes(bytes), *y = alloc_bytes(bytes);
        fill_complex(dt, a, N, 8, 0);
        fill_complex(dt, b, N, 9, 0);
        for (int o = 0; o < 2; o++) {
            fold_op_t op = o ? FOLD_OP_PROD : FOLD_OP_SUM;
            fold_reduce_local(op, dt, a, b, x, N, 1, 0);
            fold_reduce_local(op, dt, b, a, y, N, 1, 0);
            cr_assert(memcmp(x, y, bytes) == 0, "%s %s not commutative", fold_op_name(op),
                      fold_dtype_name(dt));
        }
        free(a);
        free(b);
        free(x);
        free(y);
    }
}

Test(complex_types, infinities_and_nans_reduce)
{
    enum { N = 1000 };
    for (size_t t = 0; t < NELEMS(complex_types); t++) {
        fold_dtype_t dt = complex_types[t];
        char *l = alloc_bytes(N * 16), *r = alloc_bytes(N * 16), *d = alloc_bytes(N * 16);
        fill_complex(dt, l, N, 10, 1);
        fill_complex(dt, r, N, 11, 1);
        for (int o = 0; o < 2; o++) {
            fold_op_t op = o ? FOLD_OP_PROD : FOLD_OP_SUM;
            cr_assert_eq(fold_reduce_local(op, dt, l, r, d, N, 2, 0), FOLD_OK);
            for (size_t k = 0; k < N; k++) {
                double re, im, want_re, want_im;
                complex_at(dt, d, k, &re, &im);
                ref_complex(op, dt, l, r, k, &want_re, &want_im);
                if (isfinite(want_re) && isfinite(want_im)) {
                    cr_assert(re == want_re && im == want_im, "element %zu", k);
                }
            }
        }
        free(l);
        free(r);
        free(d);
    }
}

/* ---- What each type takes ----------------------------------------------------- */

static void quiet_logs(void)
{
    fold_log_level = FOLD_LOG_ERROR - 1;   /* these tests provoke errors on purpose */
}

/* Pair types take maxloc and minloc only, and only they do; complex types take sum and
 * prod only. Every refused pair leaves dst as it was. */
Test(rules, every_dtype_and_op, .init = quiet_logs)
{
    for (int d = 0; d < FOLD_DTYPE_COUNT; d++) {
        fold_dtype_t dt = (fold_dtype_t)d;
        for (int o = 0; o < FOLD_OP_PREDEFINED_COUNT; o++) {
            fold_op_t op = (fold_op_t)o;
            int loc = op == FOLD_OP_MAXLOC || op == FOLD_OP_MINLOC;
            int is_float = dt == FOLD_FLOAT16 || dt == FOLD_BFLOAT16 || dt == FOLD_FLOAT32 ||
                           dt == FOLD_FLOAT64;
            int bitwise = op == FOLD_OP_BAND || op == FOLD_OP_BOR || op == FOLD_OP_BXOR;
            int want = is_pair(dt)      ? loc
                     : is_complex(dt)   ? op == FOLD_OP_SUM || op == FOLD_OP_PROD
                     : loc              ? 0
                                        : !(bitwise && is_float);
            cr_assert_eq(fold_op_dtype_valid(op, dt), want, "%s on %s", fold_op_name(op),
                         fold_dtype_name(dt));
            if (!want) {
                unsigned char l[64] = {0}, r[64] = {0}, dst[64];
                memset(dst, 0x77, sizeof(dst));
                cr_assert_eq(fold_reduce_local(op, dt, l, r, dst, 2, 1, 0),
                             FOLD_ERR_INVALID_ARG, "%s on %s", fold_op_name(op),
                             fold_dtype_name(dt));
                for (size_t b = 0; b < sizeof(dst); b++) {
                    cr_assert_eq(dst[b], 0x77, "dst written on error");
                }
            }
        }
    }
}
