#include "perf_data.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Hash streams: one for values, one for the positions of zeros. */
enum { STREAM_VALUE = 1, STREAM_ZERO = 2 };

static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* rank -1 stands for "the same on every rank". */
static inline uint64_t stream_key(uint64_t seed, int stream, int rank)
{
    return mix64(mix64(seed ^ ((uint64_t)stream << 56)) ^ (uint64_t)(int64_t)rank);
}

static inline uint64_t element_hash(uint64_t key, size_t index)
{
    return mix64(key ^ ((uint64_t)index * 0xd6e8feb86659fd93ULL));
}

/* Largest integer the datatype holds exactly, and from which each partial sum must stay. */
static int64_t exact_limit(fold_dtype_t dtype)
{
    switch (dtype) {
    case FOLD_INT8:     return 127;
    case FOLD_UINT8:    return 255;
    case FOLD_INT16:    return 32767;
    case FOLD_UINT16:   return 65535;
    case FOLD_FLOAT16:  return 2048;
    case FOLD_BFLOAT16: return 256;
    default:            return INT64_C(1) << 24;
    }
}

static int dtype_is_unsigned(fold_dtype_t dtype)
{
    return dtype == FOLD_UINT8 || dtype == FOLD_UINT16 || dtype == FOLD_UINT32 ||
           dtype == FOLD_UINT64;
}

static uint64_t dtype_bit_mask(fold_dtype_t dtype)
{
    size_t bits = 8 * fold_dtype_size(dtype);
    return bits >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << bits) - 1;
}

void perf_data_spec_init(perf_data_spec_t *spec, const perf_options_t *opts, int ranks)
{
    spec->dtype        = opts->dtype;
    spec->op           = opts->op;
    spec->ranks        = ranks < 1 ? 1 : ranks;
    spec->sparsity     = opts->sparsity;
    spec->distribution = opts->distribution;
    spec->seed         = opts->seed;
    int dense = opts->dense_ranks > 0 ? opts->dense_ranks : spec->ranks / 8;
    dense = dense < 1 ? 1 : dense;
    spec->dense_ranks = dense > spec->ranks ? spec->ranks : dense;
}

int perf_data_rank_is_dense(const perf_data_spec_t *spec, int rank)
{
    if (spec->sparsity <= 0.0) {
        return 1;
    }
    if (spec->distribution != PERF_DIST_IMBALANCED) {
        return 0;
    }
    /* The dense ranks are spread evenly: 0, stride, 2 * stride, ... */
    int stride = spec->ranks / spec->dense_ranks;
    return rank % stride == 0 && rank / stride < spec->dense_ranks;
}

/* A nonzero value in the op's exact domain. */
static int64_t dense_value(const perf_data_spec_t *spec, int rank, uint64_t h)
{
    switch (spec->op) {
    case FOLD_OP_SUM: {
        int64_t vmax = exact_limit(spec->dtype) / spec->ranks;
        vmax = vmax < 1 ? 1 : vmax > 100 ? 100 : vmax;
        return 1 + (int64_t)(h % (uint64_t)vmax);
    }
    case FOLD_OP_PROD:
        /* Factors of 2 on the first 8 ranks only: a product stays at most 2^8. */
        return (rank < 8 && (h & 3) == 0) ? 2 : 1;
    case FOLD_OP_MIN:
    case FOLD_OP_MAX:
    case FOLD_OP_MAXLOC:
    case FOLD_OP_MINLOC: {
        int64_t v = (int64_t)(h % 201);
        return dtype_is_unsigned(spec->dtype) ? v : v - 100;
    }
    case FOLD_OP_BAND:
    case FOLD_OP_BOR:
    case FOLD_OP_BXOR:
        return (int64_t)(h & dtype_bit_mask(spec->dtype));
    case FOLD_OP_LAND:
    case FOLD_OP_LOR:
    case FOLD_OP_LXOR:
        /* Mostly true, with different nonzero values, and some false. */
        return (h & 7) == 0 ? 0 : 1 + (int64_t)((h >> 8) % 3);
    default:
        return 1;
    }
}

static int is_planted_zero(const perf_data_spec_t *spec, uint64_t zero_key, size_t index)
{
    uint64_t h = element_hash(zero_key, index);
    return (double)(h >> 11) * 0x1.0p-53 < spec->sparsity;
}

static uint64_t zero_key_of(const perf_data_spec_t *spec, int rank)
{
    return stream_key(spec->seed, STREAM_ZERO,
                      spec->distribution == PERF_DIST_IDENTICAL ? -1 : rank);
}

int64_t perf_data_value(const perf_data_spec_t *spec, int rank, size_t index)
{
    if (!perf_data_rank_is_dense(spec, rank) &&
        is_planted_zero(spec, zero_key_of(spec, rank), index)) {
        return 0;
    }
    uint64_t h = element_hash(stream_key(spec->seed, STREAM_VALUE, rank), index);
    return dense_value(spec, rank, h);
}

static int dtype_is_pair(fold_dtype_t dtype)
{
    return dtype >= FOLD_FLOAT_INT && dtype <= FOLD_SHORT_INT;
}

static int dtype_is_complex(fold_dtype_t dtype)
{
    return dtype == FOLD_COMPLEX_FLOAT32 || dtype == FOLD_COMPLEX_FLOAT64;
}

int64_t perf_data_second(const perf_data_spec_t *spec, int rank, size_t index)
{
    if (dtype_is_pair(spec->dtype)) {
        return rank;
    }
    if (dtype_is_complex(spec->dtype) && spec->op != FOLD_OP_PROD) {
        return perf_data_value(spec, rank, index + 1);
    }
    return 0;
}

void perf_data_fill(const perf_data_spec_t *spec, int rank, void *buf, size_t count)
{
    if (dtype_is_pair(spec->dtype) || dtype_is_complex(spec->dtype)) {
        for (size_t i = 0; i < count; i++) {
            perf_element_store2(spec->dtype, perf_data_value(spec, rank, i),
                                perf_data_second(spec, rank, i), buf, i);
        }
        return;
    }
    int dense = perf_data_rank_is_dense(spec, rank);
    uint64_t value_key = stream_key(spec->seed, STREAM_VALUE, rank);
    uint64_t zero_key = zero_key_of(spec, rank);
    for (size_t i = 0; i < count; i++) {
        int64_t v = (!dense && is_planted_zero(spec, zero_key, i))
                        ? 0 : dense_value(spec, rank, element_hash(value_key, i));
        perf_element_store(spec->dtype, v, buf, i);
    }
}

/* ---- element representation -------------------------------------------------- */

/* float32 -> IEEE binary16, rounding to nearest even. */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t  exp  = (int32_t)((x >> 23) & 0xffu);
    uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff) {
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    }
    exp = exp - 127 + 15;
    if (exp >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (exp <= 0) {
        if (exp < -10) {
            return (uint16_t)sign;
        }
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = mant >> shift;
        uint32_t rest = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        half += rest > mid || (rest == mid && (half & 1));
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    h += rest > 0x1000u || (rest == 0x1000u && (h & 1));   /* a carry moves the exponent */
    return (uint16_t)h;
}

static float half_to_float(uint16_t h)
{
    int sign = (h & 0x8000u) ? -1 : 1;
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    if (exp == 0) {
        return (float)sign * ldexpf((float)mant, -24);
    }
    if (exp == 31) {
        return mant ? NAN : (float)sign * INFINITY;
    }
    return (float)sign * ldexpf((float)(1024 + mant), exp - 25);
}

static uint16_t float_to_bfloat16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bfloat16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* A pair element: the value, then the int index at the struct's offset. */
#define STORE_PAIR(T, buf, index, value, second)                                        \
    do {                                                                                \
        T e_;                                                                           \
        memset(&e_, 0, sizeof(e_));                                                     \
        e_.v = (value);                                                                 \
        e_.i = (int)(second);                                                           \
        memcpy((char *)(buf) + (index) * sizeof(T), &e_, sizeof(T));                    \
    } while (0)

void perf_element_store2(fold_dtype_t dtype, int64_t value, int64_t second, void *buf,
                         size_t index)
{
    switch (dtype) {
    case FOLD_FLOAT_INT:  STORE_PAIR(fold_float_int_t, buf, index, (float)value, second); break;
    case FOLD_DOUBLE_INT: STORE_PAIR(fold_double_int_t, buf, index, (double)value, second); break;
    case FOLD_LONG_INT:   STORE_PAIR(fold_long_int_t, buf, index, (long)value, second); break;
    case FOLD_2INT:       STORE_PAIR(fold_2int_t, buf, index, (int)value, second); break;
    case FOLD_SHORT_INT:  STORE_PAIR(fold_short_int_t, buf, index, (short)value, second); break;
    case FOLD_COMPLEX_FLOAT32:
        ((float *)buf)[2 * index] = (float)value;
        ((float *)buf)[2 * index + 1] = (float)second;
        break;
    case FOLD_COMPLEX_FLOAT64:
        ((double *)buf)[2 * index] = (double)value;
        ((double *)buf)[2 * index + 1] = (double)second;
        break;
    default:
        perf_element_store(dtype, value, buf, index);
        break;
    }
}

void perf_element_store(fold_dtype_t dtype, int64_t value, void *buf, size_t index)
{
    if (dtype_is_pair(dtype) || dtype_is_complex(dtype)) {
        perf_element_store2(dtype, value, 0, buf, index);
        return;
    }
    switch (dtype) {
    case FOLD_INT8:
    case FOLD_UINT8:    ((uint8_t *)buf)[index]  = (uint8_t)value; break;
    case FOLD_INT16:
    case FOLD_UINT16:   ((uint16_t *)buf)[index] = (uint16_t)value; break;
    case FOLD_INT32:
    case FOLD_UINT32:   ((uint32_t *)buf)[index] = (uint32_t)value; break;
    case FOLD_INT64:
    case FOLD_UINT64:   ((uint64_t *)buf)[index] = (uint64_t)value; break;
    case FOLD_FLOAT16:  ((uint16_t *)buf)[index] = float_to_half((float)value); break;
    case FOLD_BFLOAT16: ((uint16_t *)buf)[index] = float_to_bfloat16((float)value); break;
    case FOLD_FLOAT32:  ((float *)buf)[index]    = (float)value; break;
    case FOLD_FLOAT64:  ((double *)buf)[index]   = (double)value; break;
    default: break;
    }
}

void perf_element_format(fold_dtype_t dtype, const void *buf, size_t index, char *out,
                         size_t len)
{
    switch (dtype) {
    case FOLD_INT8:     snprintf(out, len, "%d", ((const int8_t *)buf)[index]); break;
    case FOLD_UINT8:    snprintf(out, len, "%u", ((const uint8_t *)buf)[index]); break;
    case FOLD_INT16:    snprintf(out, len, "%d", ((const int16_t *)buf)[index]); break;
    case FOLD_UINT16:   snprintf(out, len, "%u", ((const uint16_t *)buf)[index]); break;
    case FOLD_INT32:    snprintf(out, len, "%d", ((const int32_t *)buf)[index]); break;
    case FOLD_UINT32:   snprintf(out, len, "%u", ((const uint32_t *)buf)[index]); break;
    case FOLD_INT64:
        snprintf(out, len, "%lld", (long long)((const int64_t *)buf)[index]);
        break;
    case FOLD_UINT64:
        snprintf(out, len, "%llu", (unsigned long long)((const uint64_t *)buf)[index]);
        break;
    case FOLD_FLOAT16:
        snprintf(out, len, "%.9g", (double)half_to_float(((const uint16_t *)buf)[index]));
        break;
    case FOLD_BFLOAT16:
        snprintf(out, len, "%.9g", (double)bfloat16_to_float(((const uint16_t *)buf)[index]));
        break;
    case FOLD_FLOAT32:  snprintf(out, len, "%.9g", (double)((const float *)buf)[index]); break;
    case FOLD_FLOAT64:  snprintf(out, len, "%.17g", ((const double *)buf)[index]); break;
    case FOLD_FLOAT_INT: {
        fold_float_int_t e;
        memcpy(&e, (const char *)buf + index * sizeof(e), sizeof(e));
        snprintf(out, len, "(%.9g, %d)", (double)e.v, e.i);
        break;
    }
    case FOLD_DOUBLE_INT: {
        fold_double_int_t e;
        memcpy(&e, (const char *)buf + index * sizeof(e), sizeof(e));
        snprintf(out, len, "(%.17g, %d)", e.v, e.i);
        break;
    }
    case FOLD_LONG_INT: {
        fold_long_int_t e;
        memcpy(&e, (const char *)buf + index * sizeof(e), sizeof(e));
        snprintf(out, len, "(%ld, %d)", e.v, e.i);
        break;
    }
    case FOLD_2INT: {
        fold_2int_t e;
        memcpy(&e, (const char *)buf + index * sizeof(e), sizeof(e));
        snprintf(out, len, "(%d, %d)", e.v, e.i);
        break;
    }
    case FOLD_SHORT_INT: {
        fold_short_int_t e;
        memcpy(&e, (const char *)buf + index * sizeof(e), sizeof(e));
        snprintf(out, len, "(%d, %d)", e.v, e.i);
        break;
    }
    case FOLD_COMPLEX_FLOAT32: {
        const float *c = (const float *)buf + 2 * index;
        snprintf(out, len, "(%.9g, %.9g)", (double)c[0], (double)c[1]);
        break;
    }
    case FOLD_COMPLEX_FLOAT64: {
        const double *c = (const double *)buf + 2 * index;
        snprintf(out, len, "(%.17g, %.17g)", c[0], c[1]);
        break;
    }
    default:            snprintf(out, len, "?"); break;
    }
}
