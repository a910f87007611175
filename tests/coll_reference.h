/*
 * Test data and an independent scalar reference for reductions: rank r's value at
 * element i, and the rank-ordered fold of every rank's value, for each datatype and
 * op. Values are small integers, so floating-point results are exact whatever order
 * an algorithm combines them in. Written apart from the library's kernels.
 */
#ifndef FOLD_COLL_REFERENCE_H
#define FOLD_COLL_REFERENCE_H

#include <fold/fold.h>
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

/* Expected element i of the reduction over ranks 0..size-1, stored into out[i]. */
static inline void ref_expected(fold_dtype_t dt, fold_op_t op, int size, size_t i, void *out)
{
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

static inline void ref_fill_input(fold_dtype_t dt, fold_op_t op, int rank, size_t count,
                                  void *buf)
{
    for (size_t i = 0; i < count; i++) {
        if (op >= FOLD_OP_USER_FIRST) {
            ((uint64_t *)buf)[i] = ref_affine_value(rank, i);
        } else {
            ref_store(dt, buf, i, ref_value(rank, i, op));
        }
    }
}

#endif
