/*
 * Test data and an independent scalar reference for reductions: rank r's value at
 * element i, and the rank-ordered fold of every rank's value, for each datatype and
 * op. Values are small integers, so floating-point results are exact whatever order
 * an algorithm combines them in. Written apart from the library's kernels.
 */
#ifndef FOLD_COLL_REFERENCE_H
#define FOLD_COLL_REFERENCE_H

#include <fold/fold.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The non-commutative test op: affine maps x -> m*x + c (mod 2^32) packed in a
 * uint64 as (m << 32 | c); left o right = (m1*m2, m1*c2 + c1). Associative, and
 * composing in the wrong order gives a different value. */
static inline uint64_t ref_affine_compose(uint64_t left, uint64_t right)
{
    uint32_t m1 = (uint32_t)(left >> 32), c1 = (uint32_t)left;
    uint32_t m2 = (uint32_t)(right >> 32), c2 = (uint32_t)right;
    return ((uint64_t)(uint32_t)(m1 * m2) << 32) | (uint32_t)(m1 * c2 + c1);
}

static inline void ref_affine_fn(const void *in, void *inout, size_t count, fold_dtype_t dt,
                                 void *arg)
{
    (void)dt;
    (void)arg;
    const uint64_t *a = in;
    uint64_t *b = inout;
    for (size_t i = 0; i < count; i++) {
        b[i] = ref_affine_compose(a[i], b[i]);
    }
}

static inline uint64_t ref_affine_value(int rank, size_t i)
{
    return ((uint64_t)(2u * (uint32_t)rank + 3u) << 32) | (uint32_t)(rank * 31 + i * 7 + 1);
}

/* Small integer input of rank r at element i, suited to op. */
static inline int64_t ref_value(int rank, size_t i, fold_op_t op)
{
    switch (op) {
    case FOLD_OP_PROD:
        return ((i + (size_t)rank) % 7 == 0) ? 2 : (((i * 3 + (size_t)rank) % 5 == 0) ? -1 : 1);
    case FOLD_OP_LAND: case FOLD_OP_LOR: case FOLD_OP_LXOR:
        return ((i * 5 + (size_t)rank * 3) % 4) != 0;
    case FOLD_OP_BAND: case FOLD_OP_BOR: case FOLD_OP_BXOR:
        return (int64_t)((i * 37 + (size_t)rank * 101) % 128);
    default:
        return (int64_t)((i * 13 + (size_t)rank * 7) % 11) - 5;
    }
}

static inline int ref_is_float(fold_dtype_t dt)
{
    return dt == FOLD_FLOAT16 || dt == FOLD_BFLOAT16 || dt == FOLD_FLOAT32 || dt == FOLD_FLOAT64;
}

static inline int ref_is_unsigned(fold_dtype_t dt)
{
    return dt >= FOLD_UINT8 && dt <= FOLD_UINT64;
}

/* Combines in 64-bit (integers wrap on store) or double (floats, exact here). */
static inline int64_t ref_op_int(fold_op_t op, int64_t a, int64_t b)
{
    switch (op) {
    case FOLD_OP_SUM:  return (int64_t)((uint64_t)a + (uint64_t)b);
    case FOLD_OP_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case FOLD_OP_MIN:  return a < b ? a : b;
    case FOLD_OP_MAX:  return a > b ? a : b;
    case FOLD_OP_BAND: return a & b;
    case FOLD_OP_BOR:  return a | b;
    case FOLD_OP_BXOR: return a ^ b;
    case FOLD_OP_LAND: return (a != 0) && (b != 0);
    case FOLD_OP_LOR:  return (a != 0) || (b != 0);
    case FOLD_OP_LXOR: return (a != 0) != (b != 0);
    default:           return 0;
    }
}

static inline uint64_t ref_op_uint(fold_op_t op, uint64_t a, uint64_t b)
{
    switch (op) {
    case FOLD_OP_MIN: return a < b ? a : b;
    case FOLD_OP_MAX: return a > b ? a : b;
    default:          return (uint64_t)ref_op_int(op, (int64_t)a, (int64_t)b);
    }
}

/* Stores an integer-valued number as dtype (integers wrap modulo 2^bits). */
static inline void ref_store(fold_dtype_t dt, void *p, size_t i, int64_t v)
{
    switch (dt) {
    case FOLD_INT8:   ((int8_t *)p)[i]   = (int8_t)(uint8_t)v;   break;
    case FOLD_INT16:  ((int16_t *)p)[i]  = (int16_t)(uint16_t)v; break;
    case FOLD_INT32:  ((int32_t *)p)[i]  = (int32_t)(uint32_t)v; break;
    case FOLD_INT64:  ((int64_t *)p)[i]  = v;                    break;
    case FOLD_UINT8:  ((uint8_t *)p)[i]  = (uint8_t)v;           break;
    case FOLD_UINT16: ((uint16_t *)p)[i] = (uint16_t)v;          break;
    case FOLD_UINT32: ((uint32_t *)p)[i] = (uint32_t)v;          break;
    case FOLD_UINT64: ((uint64_t *)p)[i] = (uint64_t)v;          break;
    case FOLD_FLOAT32: ((float *)p)[i]  = (float)v;              break;
    case FOLD_FLOAT64: ((double *)p)[i] = (double)v;             break;
    case FOLD_FLOAT16: { _Float16 h = (_Float16)v; memcpy((char *)p + 2 * i, &h, 2); break; }
    case FOLD_BFLOAT16: {
        float f = (float)v;            /* small integers: bf16 is the top half, exactly */
        uint32_t bits;
        memcpy(&bits, &f, 4);
        uint16_t b = (uint16_t)(bits >> 16);
        memcpy((char *)p + 2 * i, &b, 2);
        break;
    }
    default: break;
    }
}

/* The dtype's own wrap applied to a value computed in 64 bits, as int64. */
static inline int64_t ref_wrap(fold_dtype_t dt, int64_t v)
{
    switch (dt) {
    case FOLD_INT8:   return (int8_t)(uint8_t)v;
    case FOLD_INT16:  return (int16_t)(uint16_t)v;
    case FOLD_INT32:  return (int32_t)(uint32_t)v;
    case FOLD_UINT8:  return (uint8_t)v;
    case FOLD_UINT16: return (uint16_t)v;
    case FOLD_UINT32: return (uint32_t)v;
    default:          return v;
    }
}

/* ---- Pair types (maxloc/minloc) and complex types (sum/prod) ----------------- */

static inline int ref_is_pair(fold_dtype_t dt)
{
    return dt >= FOLD_FLOAT_INT && dt <= FOLD_SHORT_INT;
}

static inline int ref_is_complex(fold_dtype_t dt)
{
    return dt == FOLD_COMPLEX_FLOAT32 || dt == FOLD_COMPLEX_FLOAT64;
}

/* A pair as numbers; neg_zero marks a float -0 value. */
typedef struct ref_pair {
    int64_t v;
    int     neg_zero;
    int     i;
} ref_pair_t;

/* Rank r's pair at element i: values from a small range, so ties between ranks are
 * common (-0 beside +0 too, on the float pairs), and indices not in rank order, so
 * the lower index is not simply the lower rank. */
static inline ref_pair_t ref_pair_value(fold_dtype_t dt, int rank, size_t i)
{
    size_t r = (size_t)rank;
    ref_pair_t p = {(int64_t)((i * 13 + r * 7) % 5) - 2, 0, (int)((r * 37 + i * 11) % 23) - 11};
    p.neg_zero = p.v == 0 && (dt == FOLD_FLOAT_INT || dt == FOLD_DOUBLE_INT) && (i + r) % 3 == 0;
    return p;
}

/* fold.h's maxloc/minloc: the better value with its index; on equal values the lower
 * index, and +0 beside -0 gives +0 (maxloc) or -0 (minloc). */
static inline ref_pair_t ref_pair_op(fold_op_t op, ref_pair_t a, ref_pair_t b)
{
    int maxloc = op == FOLD_OP_MAXLOC;
    if (a.v != b.v) {
        return (maxloc ? a.v > b.v : a.v < b.v) ? a : b;
    }
    ref_pair_t p = {a.v, maxloc ? a.neg_zero && b.neg_zero : a.neg_zero || b.neg_zero,
                    a.i < b.i ? a.i : b.i};
    return p;
}

/* Stores the pair through fold.h's struct, padding zeroed (what fold writes). */
static inline void ref_pair_store(fold_dtype_t dt, void *buf, size_t i, ref_pair_t p)
{
    char *e = (char *)buf + i * fold_dtype_size(dt);
    memset(e, 0, fold_dtype_size(dt));
    switch (dt) {
    case FOLD_FLOAT_INT: {
        fold_float_int_t x = {p.neg_zero ? -0.0f : (float)p.v, p.i};
        memcpy(e, &x.v, sizeof(x.v));
        memcpy(e + offsetof(fold_float_int_t, i), &x.i, sizeof(x.i));
        break;
    }
    case FOLD_DOUBLE_INT: {
        fold_double_int_t x = {p.neg_zero ? -0.0 : (double)p.v, p.i};
        memcpy(e, &x.v, sizeof(x.v));
        memcpy(e + offsetof(fold_double_int_t, i), &x.i, sizeof(x.i));
        break;
    }
    case FOLD_LONG_INT: {
        fold_long_int_t x = {(long)p.v, p.i};
        memcpy(e, &x.v, sizeof(x.v));
        memcpy(e + offsetof(fold_long_int_t, i), &x.i, sizeof(x.i));
        break;
    }
    case FOLD_2INT: {
        fold_2int_t x = {(int)p.v, p.i};
        memcpy(e, &x, sizeof(x));
        break;
    }
    default: {
        fold_short_int_t x = {(short)p.v, p.i};
        memcpy(e, &x.v, sizeof(x.v));
        memcpy(e + offsetof(fold_short_int_t, i), &x.i, sizeof(x.i));
        break;
    }
    }
}

/* Rank r's complex number at element i, as integers: small for a sum; for a product
 * mostly units (1, -1, i, -i) and now and then 1+i, so that any product over the
 * ranks stays exact in float32. */
static inline void ref_complex_value(fold_op_t op, int rank, size_t i, int64_t *re, int64_t *im)
{
    size_t r = (size_t)rank;
    if (op == FOLD_OP_PROD) {
        static const int64_t unit_re[4] = {1, 0, -1, 0}, unit_im[4] = {0, 1, 0, -1};
        size_t u = (i * 3 + r * 5) % 4;
        *re = unit_re[u];
        *im = unit_im[u];
        if ((i + r) % 7 == 0) {   /* times (1+i) */
            int64_t a = *re, b = *im;
            *re = a - b;
            *im = a + b;
        }
        return;
    }
    *re = (int64_t)((i * 13 + r * 7) % 11) - 5;
    *im = (int64_t)((i * 7 + r * 3) % 9) - 4;
}

static inline void ref_complex_store(fold_dtype_t dt, void *buf, size_t i, int64_t re,
                                     int64_t im)
{
    if (dt == FOLD_COMPLEX_FLOAT32) {
        float x[2] = {(float)re, (float)im};
        memcpy((char *)buf + i * sizeof(x), x, sizeof(x));
    } else {
        double x[2] = {(double)re, (double)im};
        memcpy((char *)buf + i * sizeof(x), x, sizeof(x));
    }
}

/* Expected element i of the reduction over ranks 0..size-1, stored into out[i]. */
static inline void ref_expected(fold_dtype_t dt, fold_op_t op, int size, size_t i, void *out)
{
    if (ref_is_pair(dt)) {
        ref_pair_t acc = ref_pair_value(dt, 0, i);
        for (int r = 1; r < size; r++) {
            acc = ref_pair_op(op, acc, ref_pair_value(dt, r, i));
        }
        ref_pair_store(dt, out, i, acc);
        return;
    }
    if (ref_is_complex(dt)) {
        int64_t re, im;
        ref_complex_value(op, 0, i, &re, &im);
        for (int r = 1; r < size; r++) {
            int64_t b_re, b_im;
            ref_complex_value(op, r, i, &b_re, &b_im);
            int64_t a_re = re, a_im = im;
            re = op == FOLD_OP_PROD ? a_re * b_re - a_im * b_im : a_re + b_re;
            im = op == FOLD_OP_PROD ? a_re * b_im + a_im * b_re : a_im + b_im;
        }
        ref_complex_store(dt, out, i, re, im);
        return;
    }
    if (op >= FOLD_OP_USER_FIRST) {
        uint64_t acc = ref_affine_value(0, i);
        for (int r = 1; r < size; r++) {
            acc = ref_affine_compose(acc, ref_affine_value(r, i));
        }
        ((uint64_t *)out)[i] = acc;
        return;
    }
    int64_t acc = ref_wrap(dt, ref_value(0, i, op));
    for (int r = 1; r < size; r++) {
        int64_t v = ref_wrap(dt, ref_value(r, i, op));
        if (ref_is_unsigned(dt)) {
            acc = ref_wrap(dt, (int64_t)ref_op_uint(op, (uint64_t)acc, (uint64_t)v));
        } else {
            acc = ref_wrap(dt, ref_op_int(op, acc, v));
        }
    }
    /* Floats: the same integer arithmetic is exact for these small values; only
     * the store rounds, and every result here is representable. */
    ref_store(dt, out, i, acc);
}

/* Whether element i of got equals want's: bit for bit, except complex numbers,
 * compared by value: a product's zero parts take their sign from the order the ranks'
 * factors were multiplied in ((0+1i)(-1+0i) has real part 0*-1 - 1*0 = -0), which
 * differs between algorithms. */
static inline int ref_same_element(fold_dtype_t dt, const void *got, const void *want, size_t i)
{
    const char *g = (const char *)got, *w = (const char *)want;
    if (dt == FOLD_COMPLEX_FLOAT32) {
        float a[2], b[2];
        memcpy(a, g + i * sizeof(a), sizeof(a));
        memcpy(b, w + i * sizeof(b), sizeof(b));
        return a[0] == b[0] && a[1] == b[1];
    }
    if (dt == FOLD_COMPLEX_FLOAT64) {
        double a[2], b[2];
        memcpy(a, g + i * sizeof(a), sizeof(a));
        memcpy(b, w + i * sizeof(b), sizeof(b));
        return a[0] == b[0] && a[1] == b[1];
    }
    size_t es = fold_dtype_size(dt);
    return memcmp(g + i * es, w + i * es, es) == 0;
}

static inline void ref_fill_input(fold_dtype_t dt, fold_op_t op, int rank, size_t count,
                                  void *buf)
{
    for (size_t i = 0; i < count; i++) {
        if (ref_is_pair(dt)) {
            ref_pair_store(dt, buf, i, ref_pair_value(dt, rank, i));
        } else if (ref_is_complex(dt)) {
            int64_t re, im;
            ref_complex_value(op, rank, i, &re, &im);
            ref_complex_store(dt, buf, i, re, im);
        } else if (op >= FOLD_OP_USER_FIRST) {
            ((uint64_t *)buf)[i] = ref_affine_value(rank, i);
        } else {
            ref_store(dt, buf, i, ref_value(rank, i, op));
        }
    }
}

#endif
