/*
 * Local reduction kernels (with user ops) and half-precision conversions; the user-op
 * registry and the datatype/op names are tests/api/test_dtype_op.c's, the pair and
 * complex types test_kernels_types.c's. Every kernel
 * result is checked against a scalar reference written here from the rules in fold.h
 * (it shares no code with the kernels: even float16/bfloat16 are decoded and rounded
 * with frexp/ldexp/rint).
 */
#include "test_rng.h"
#include <criterion/criterion.h>

#include "codec/reduce_kernel.h"
#include "log.h"
#include "test_reduced.h"

#include <fold/fold.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- Test data --------------------------------------------------------------- */

static const size_t counts[] = {0, 1, 7, 29, 1024, 1000003};
/* FOLD_TEST_REDUCED: the largest count a tenth of it, still many L1 blocks and
 * streamed stores (the release stage ran the full one) */
#define REDUCED_LARGEST ((size_t)100003)

typedef enum { DST_DISTINCT, DST_IS_LEFT, DST_IS_RIGHT } aliasing_t;
static const char *const aliasing_names[] = {"distinct", "dst==left", "dst==right"};

static int is_float_dtype(fold_dtype_t dt)
{
    return dt == FOLD_FLOAT16 || dt == FOLD_BFLOAT16 || dt == FOLD_FLOAT32 ||
           dt == FOLD_FLOAT64;
}

static int is_signed_int(fold_dtype_t dt)
{
    return dt == FOLD_INT8 || dt == FOLD_INT16 || dt == FOLD_INT32 || dt == FOLD_INT64;
}

static int is_bitwise(fold_op_t op)
{
    return op == FOLD_OP_BAND || op == FOLD_OP_BOR || op == FOLD_OP_BXOR;
}

/* maxloc/minloc take the pair types only (test_kernels_types.c). */
static int is_loc(fold_op_t op)
{
    return op == FOLD_OP_MAXLOC || op == FOLD_OP_MINLOC;
}

/* Raw element access by width: every datatype is 1, 2, 4 or 8 bytes of bits. */
static uint64_t load_bits(const void *buf, size_t i, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)buf + i * size, size);   /* little-endian host */
    return v;
}

static void store_bits(void *buf, size_t i, size_t size, uint64_t v)
{
    memcpy((char *)buf + i * size, &v, size);
}

/* A random element, biased towards the cases that matter: zeros (logical ops),
 * values equal to the other operand or its negated zero (min/max ties), small
 * "nice" numbers, and raw bit patterns (overflow, NaN, inf, subnormals). */
static uint64_t random_element(uint64_t *rng, fold_dtype_t dt, uint64_t other)
{
    size_t size = fold_dtype_size(dt);
    uint64_t r = rng_next(rng);
    uint64_t bits = rng_next(rng);
    uint64_t sign = 1ULL << (size * 8 - 1);

    switch (r % 8) {
    case 0:
        return 0;
    case 1:
        return other;
    case 2:
        return is_float_dtype(dt) ? sign : (uint64_t)-1;   /* -0 or all ones */
    case 3:
        if (dt == FOLD_FLOAT32) {
            float f = (float)((int)(bits % 200) - 100) / 4;
            uint32_t u;
            memcpy(&u, &f, 4);
            return u;
        }
        if (dt == FOLD_FLOAT64) {
            double f = (double)((int)(bits % 200) - 100) / 4;
            uint64_t u;
            memcpy(&u, &f, 8);
            return u;
        }
        return bits % 7;
    default:
        return bits;
    }
}

static void fill(void *buf, const void *other, size_t count, fold_dtype_t dt, uint64_t seed)
{
    size_t size = fold_dtype_size(dt);
    uint64_t rng = seed | 1;
    for (size_t i = 0; i < count; i++) {
        uint64_t o = other ? load_bits(other, i, size) : 0;
        store_bits(buf, i, size, random_element(&rng, dt, o));
    }
}

/* ---- Reference: integers ----------------------------------------------------- */

static uint64_t ref_int(fold_op_t op, fold_dtype_t dt, uint64_t a, uint64_t b)
{
    unsigned width = (unsigned)fold_dtype_size(dt) * 8;
    uint64_t mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
    /* Sign-extend to compare signed values. */
    int64_t sa = (int64_t)(a << (64 - width)) >> (64 - width);
    int64_t sb = (int64_t)(b << (64 - width)) >> (64 - width);
    int a_less = is_signed_int(dt) ? sa < sb : a < b;
    int ta = a != 0, tb = b != 0;

    switch (op) {
    case FOLD_OP_SUM:  return (a + b) & mask;
    case FOLD_OP_PROD: return (a * b) & mask;
    case FOLD_OP_MIN:  return a_less ? a : b;
    case FOLD_OP_MAX:  return a_less ? b : a;
    case FOLD_OP_BAND: return a & b;
    case FOLD_OP_BOR:  return a | b;
    case FOLD_OP_BXOR: return a ^ b;
    case FOLD_OP_LAND: return ta && tb;
    case FOLD_OP_LOR:  return ta || tb;
    case FOLD_OP_LXOR: return ta != tb;
    default:           cr_assert_fail("no reference for op %d", (int)op);
    }
    return 0;
}

/* ---- Reference: floats, in their own type so NaN bits pass through unchanged -- */

#define DEFINE_REF_FLOAT(name, T)                                                \
    static T name(fold_op_t op, T a, T b)                                        \
    {                                                                            \
        switch (op) {                                                            \
        case FOLD_OP_SUM:  return a + b;                                         \
        case FOLD_OP_PROD: return a * b;                                         \
        case FOLD_OP_MIN:                                                        \
        case FOLD_OP_MAX:                                                        \
            if (isnan(a)) return a;                                              \
            if (isnan(b)) return b;                                              \
            if (a != b) return ((a < b) == (op == FOLD_OP_MIN)) ? a : b;         \
            if (a != 0) return a;                                                \
            if (op == FOLD_OP_MIN) return (signbit(a) || signbit(b)) ? -(T)0 : (T)0; \
            return (signbit(a) && signbit(b)) ? -(T)0 : (T)0;                    \
        case FOLD_OP_LAND: return (a != 0 && b != 0) ? 1 : 0;                   \
        case FOLD_OP_LOR:  return (a != 0 || b != 0) ? 1 : 0;                    \
        case FOLD_OP_LXOR: return ((a != 0) != (b != 0)) ? 1 : 0;                \
        default:           cr_assert_fail("no reference for op %d", (int)op);   \
        }                                                                        \
        return 0;                                                                \
    }

DEFINE_REF_FLOAT(ref_float32, float)
DEFINE_REF_FLOAT(ref_float64, double)

/* ---- Reference: float16 / bfloat16 decode and encode from first principles ---- */

typedef struct {
    int exp_bits;    /* 5 or 8 */
    int mant_bits;   /* 10 or 7 */
} small_float_t;

static const small_float_t binary16 = {5, 10};
static const small_float_t bfloat16 = {8, 7};

static double ref_decode(small_float_t fmt, uint16_t v)
{
    int bias = (1 << (fmt.exp_bits - 1)) - 1;
    int e = (v >> fmt.mant_bits) & ((1 << fmt.exp_bits) - 1);
    int m = v & ((1 << fmt.mant_bits) - 1);
    double mag;
    if (e == (1 << fmt.exp_bits) - 1) {
        mag = m ? NAN : INFINITY;
    } else if (e == 0) {
        mag = ldexp(m, 1 - bias - fmt.mant_bits);
    } else {
        mag = ldexp(m + (1 << fmt.mant_bits), e - bias - fmt.mant_bits);
    }
    return (v >> 15) ? -mag : mag;
}

/* Rounds to nearest, ties to even (rint in the default rounding mode). */
static uint16_t ref_encode(small_float_t fmt, double x)
{
    int bias = (1 << (fmt.exp_bits - 1)) - 1;
    int max_exp = (1 << fmt.exp_bits) - 1;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);

    if (isnan(x)) {
        return (uint16_t)(sign | (max_exp << fmt.mant_bits) | (1 << (fmt.mant_bits - 1)));
    }
    if (a < ldexp(1, 1 - bias)) {   /* subnormal range: units of the smallest step */
        return (uint16_t)(sign | (uint16_t)rint(ldexp(a, bias - 1 + fmt.mant_bits)));
    }
    if (isinf(a)) {
        return (uint16_t)(sign | (max_exp << fmt.mant_bits));
    }
    int e;
    double m = frexp(a, &e);                       /* a = m * 2^e, m in [0.5, 1) */
    double q = rint(ldexp(m, fmt.mant_bits + 1));  /* significand with hidden bit */
    if (q == ldexp(1, fmt.mant_bits + 1)) {
        q /= 2;
        e++;
    }
    int biased = e - 1 + bias;
    if (biased >= max_exp) {
        return (uint16_t)(sign | (max_exp << fmt.mant_bits));
    }
    return (uint16_t)(sign | (biased << fmt.mant_bits) |
                      ((uint16_t)q & ((1 << fmt.mant_bits) - 1)));
}

static uint64_t ref_element(fold_op_t op, fold_dtype_t dt, uint64_t a, uint64_t b)
{
    switch (dt) {
    case FOLD_FLOAT32: {
        float fa, fb;
        uint32_t ua = (uint32_t)a, ub = (uint32_t)b, ur;
        memcpy(&fa, &ua, 4);
        memcpy(&fb, &ub, 4);
        float r = ref_float32(op, fa, fb);
        memcpy(&ur, &r, 4);
        return ur;
    }
    case FOLD_FLOAT64: {
        double fa, fb, r;
        uint64_t ur;
        memcpy(&fa, &a, 8);
        memcpy(&fb, &b, 8);
        r = ref_float64(op, fa, fb);
        memcpy(&ur, &r, 8);
        return ur;
    }
    case FOLD_FLOAT16:
    case FOLD_BFLOAT16: {
        small_float_t fmt = dt == FOLD_FLOAT16 ? binary16 : bfloat16;
        float fa = (float)ref_decode(fmt, (uint16_t)a);
        float fb = (float)ref_decode(fmt, (uint16_t)b);
        return ref_encode(fmt, ref_float32(op, fa, fb));
    }
    default:
        return ref_int(op, dt, a, b);
    }
}

static int bits_are_nan(fold_dtype_t dt, uint64_t v)
{
    switch (dt) {
    case FOLD_FLOAT16:  return (v & 0x7fff) > 0x7c00;
    case FOLD_BFLOAT16: return (v & 0x7fff) > 0x7f80;
    case FOLD_FLOAT32:  return (v & 0x7fffffff) > 0x7f800000;
    case FOLD_FLOAT64:  return (v & 0x7fffffffffffffffULL) > 0x7ff0000000000000ULL;
    default:            return 0;
    }
}

/* Bitwise equality, except that sum/prod may return either NaN operand's payload
 * (the hardware picks) and float16/bfloat16 NaN payloads are not specified. */
static int same_result(fold_op_t op, fold_dtype_t dt, uint64_t got, uint64_t want)
{
    if (got == want) {
        return 1;
    }
    int nan_payload_free = op == FOLD_OP_SUM || op == FOLD_OP_PROD ||
                           dt == FOLD_FLOAT16 || dt == FOLD_BFLOAT16;
    return nan_payload_free && bits_are_nan(dt, got) && bits_are_nan(dt, want);
}

/* ---- Running one case -------------------------------------------------------- */

static void *alloc_bytes(size_t n)
{
    void *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    return p;
}

/* Operands for one (datatype, count), shared by every op and aliasing. */
typedef struct {
    fold_dtype_t dt;
    size_t       count;
    size_t       bytes;
    char        *left;
    char        *right;
    char        *dst;
} operands_t;

/* stream: through fold_reduce_local_stream (non-temporal stores where the pair has
 * such a kernel, the ordinary one otherwise): the same bits either way. */
static void check_against_reference(fold_op_t op, const operands_t *in, aliasing_t aliasing,
                                    int stream)
{
    fold_dtype_t dt = in->dt;
    size_t size = fold_dtype_size(dt), count = in->count;
    const char *l = in->left, *r = in->right;

    if (aliasing == DST_IS_LEFT) {
        memcpy(in->dst, in->left, in->bytes);
        l = in->dst;
    } else if (aliasing == DST_IS_RIGHT) {
        memcpy(in->dst, in->right, in->bytes);
        r = in->dst;
    }
    int rc = stream ? fold_reduce_local_stream(op, dt, l, r, in->dst, count)
                    : fold_reduce_local(op, dt, l, r, in->dst, count, 1, 0);
    cr_assert_eq(rc, FOLD_OK, "%s %s count %zu %s%s: rc %d", fold_op_name(op),
                 fold_dtype_name(dt), count, aliasing_names[aliasing],
                 stream ? " streamed" : "", rc);

    /* The operands are intact (only dst was written), so they are the reference's
     * inputs too. */
    for (size_t i = 0; i < count; i++) {
        uint64_t a = load_bits(in->left, i, size), b = load_bits(in->right, i, size);
        uint64_t want = ref_element(op, dt, a, b);
        uint64_t got = load_bits(in->dst, i, size);
        if (!same_result(op, dt, got, want)) {
            cr_assert_fail("%s %s count %zu %s%s: element %zu: %#llx op %#llx gave %#llx, "
                           "want %#llx", fold_op_name(op), fold_dtype_name(dt), count,
                           aliasing_names[aliasing], stream ? " streamed" : "", i,
                           (unsigned long long)a,
                           (unsigned long long)b, (unsigned long long)got,
                           (unsigned long long)want);
        }
    }
}

static void check_dtype(fold_dtype_t dt)
{
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        int largest = c + 1 == sizeof(counts) / sizeof(counts[0]);
        operands_t in = {.dt = dt,
                         .count = largest && fold_test_reduced() ? REDUCED_LARGEST : counts[c]};
        in.bytes = in.count * fold_dtype_size(dt);
        in.left = alloc_bytes(in.bytes);
        in.right = alloc_bytes(in.bytes);
        /* Room to shift dst through a cache line: the kernels run the elements
         * before dst's first line boundary on their own (run_aligned) and the
         * streaming ones align their stores to 32 bytes first; every shift must
         * come out right. */
        char *dst_base = alloc_bytes(in.bytes + 64);
        in.dst = dst_base;
        fill(in.left, NULL, in.count, dt, 0x1234 + in.count);
        fill(in.right, in.left, in.count, dt, 0xbeef + in.count * 3 + (uint64_t)dt * 104729);
        char *left_copy = alloc_bytes(in.bytes), *right_copy = alloc_bytes(in.bytes);
        memcpy(left_copy, in.left, in.bytes);
        memcpy(right_copy, in.right, in.bytes);

        for (int op = 0; op < FOLD_OP_PREDEFINED_COUNT; op++) {
            if ((is_bitwise((fold_op_t)op) && is_float_dtype(dt)) || is_loc((fold_op_t)op)) {
                continue;
            }
            for (int a = DST_DISTINCT; a <= DST_IS_RIGHT; a++) {
                check_against_reference((fold_op_t)op, &in, (aliasing_t)a, 0);
            }
            /* The largest count once: the small ones reach every head and tail. */
            check_against_reference((fold_op_t)op, &in, DST_DISTINCT, 1);
            const size_t shifts = 64 / fold_dtype_size(dt);
            for (size_t shift = 0; shift < shifts && in.count <= 1024; shift++) {
                in.dst = dst_base + shift * fold_dtype_size(dt);
                for (int stream = 0; stream <= 1; stream++) {
                    check_against_reference((fold_op_t)op, &in, DST_IS_LEFT, stream);
                    check_against_reference((fold_op_t)op, &in, DST_DISTINCT, stream);
                }
            }
            in.dst = dst_base;
        }
        cr_assert(memcmp(in.left, left_copy, in.bytes) == 0, "left operand was modified");
        cr_assert(memcmp(in.right, right_copy, in.bytes) == 0, "right operand was modified");
        free(in.left);
        free(in.right);
        free(dst_base);
        free(left_copy);
        free(right_copy);
    }
}

#define DTYPE_TEST(tag, dt) \
    Test(reference, tag, .timeout = 300) { check_dtype(dt); }

DTYPE_TEST(int8, FOLD_INT8)
DTYPE_TEST(int16, FOLD_INT16)
DTYPE_TEST(int32, FOLD_INT32)
DTYPE_TEST(int64, FOLD_INT64)
DTYPE_TEST(uint8, FOLD_UINT8)
DTYPE_TEST(uint16, FOLD_UINT16)
DTYPE_TEST(uint32, FOLD_UINT32)
DTYPE_TEST(uint64, FOLD_UINT64)
DTYPE_TEST(float16, FOLD_FLOAT16)
DTYPE_TEST(bfloat16, FOLD_BFLOAT16)
DTYPE_TEST(float32, FOLD_FLOAT32)
DTYPE_TEST(float64, FOLD_FLOAT64)

/* ---- Special float values ---------------------------------------------------- */

/* One operation on a single pair, run over a vector-sized array so both the
 * vector body and the scalar tail of the kernel see it. */
static uint64_t reduce_pair(fold_op_t op, fold_dtype_t dt, uint64_t a, uint64_t b)
{
    enum { N = 37 };
    size_t size = fold_dtype_size(dt);
    char left[N * 8], right[N * 8], dst[N * 8];
    for (size_t i = 0; i < N; i++) {
        store_bits(left, i, size, a);
        store_bits(right, i, size, b);
    }
    cr_assert_eq(fold_reduce_local(op, dt, left, right, dst, N, 1, 0), FOLD_OK);
    uint64_t first = load_bits(dst, 0, size);
    for (size_t i = 1; i < N; i++) {
        cr_assert_eq(load_bits(dst, i, size), first, "%s %s: element %zu differs",
                     fold_op_name(op), fold_dtype_name(dt), i);
    }
    return first;
}

static uint64_t f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

Test(specials, zero_signs_and_nan_payloads)
{
    uint64_t pz = f32(0.0f), nz = f32(-0.0f);
    uint64_t nan1 = 0x7fc00001, nan2 = 0xffc00002;

    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT32, pz, nz), nz);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT32, nz, pz), nz);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT32, pz, nz), pz);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT32, nz, pz), pz);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT32, nan1, f32(1)), nan1);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT32, f32(1), nan1), nan1);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT32, nan1, nan2), nan1);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT32, nan2, nan1), nan2);

    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT64, f64(0.0), f64(-0.0)), f64(-0.0));
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT64, f64(-0.0), f64(0.0)), f64(0.0));
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT64, 0x7ff8000000000003ULL, f64(-INFINITY)),
                 0x7ff8000000000003ULL);

    /* float16/bfloat16: +-0 and the left NaN (quiet) survive the float32 round trip. */
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT16, 0x0000, 0x8000), 0x8000);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_FLOAT16, 0x8000, 0x0000), 0x0000);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT16, 0x7e01, 0x7e02), 0x7e01);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_FLOAT16, 0x3c00, 0xfe02), 0xfe02);
    cr_assert_eq(reduce_pair(FOLD_OP_MIN, FOLD_BFLOAT16, 0x0000, 0x8000), 0x8000);
    cr_assert_eq(reduce_pair(FOLD_OP_MAX, FOLD_BFLOAT16, 0x7fc1, 0x7fc2), 0x7fc1);

    /* Logical ops: NaN is true, -0 is false; results are encoded 1.0 / 0.0. */
    cr_assert_eq(reduce_pair(FOLD_OP_LAND, FOLD_FLOAT32, nan1, f32(2)), f32(1));
    cr_assert_eq(reduce_pair(FOLD_OP_LOR, FOLD_FLOAT32, nz, nz), f32(0));
    cr_assert_eq(reduce_pair(FOLD_OP_LXOR, FOLD_FLOAT64, f64(-0.0), f64(INFINITY)), f64(1));
    cr_assert_eq(reduce_pair(FOLD_OP_LAND, FOLD_FLOAT16, 0x3800, 0x7e00), 0x3c00);
    cr_assert_eq(reduce_pair(FOLD_OP_LOR, FOLD_BFLOAT16, 0x8000, 0x0000), 0x0000);
    cr_assert_eq(reduce_pair(FOLD_OP_LOR, FOLD_BFLOAT16, 0x8000, 0x0001), 0x3f80);

    /* Arithmetic with infinities. */
    cr_assert(bits_are_nan(FOLD_FLOAT32,
                           reduce_pair(FOLD_OP_SUM, FOLD_FLOAT32, f32(INFINITY), f32(-INFINITY))));
    cr_assert_eq(reduce_pair(FOLD_OP_PROD, FOLD_FLOAT32, f32(-INFINITY), f32(2)),
                 f32(-INFINITY));
    cr_assert_eq(reduce_pair(FOLD_OP_SUM, FOLD_FLOAT16, 0x7bff, 0x7bff), 0x7c00);
}

/* Every pair of special values: min/max give the same bits in either order (the
 * left NaN when both are NaN), and match the reference. */
static void check_special_pairs(fold_dtype_t dt, const uint64_t *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            for (int op = 0; op < FOLD_OP_PREDEFINED_COUNT; op++) {
                if (is_bitwise((fold_op_t)op) || is_loc((fold_op_t)op)) {
                    continue;
                }
                uint64_t ab = reduce_pair((fold_op_t)op, dt, values[i], values[j]);
                uint64_t want = ref_element((fold_op_t)op, dt, values[i], values[j]);
                cr_assert(same_result((fold_op_t)op, dt, ab, want),
                          "%s %s %#llx, %#llx gave %#llx want %#llx", fold_op_name(op),
                          fold_dtype_name(dt), (unsigned long long)values[i],
                          (unsigned long long)values[j], (unsigned long long)ab,
                          (unsigned long long)want);
                if ((op == FOLD_OP_MIN || op == FOLD_OP_MAX) &&
                    !(bits_are_nan(dt, values[i]) && bits_are_nan(dt, values[j]))) {
                    uint64_t ba = reduce_pair((fold_op_t)op, dt, values[j], values[i]);
                    cr_assert_eq(ab, ba, "%s %s not symmetric for %#llx, %#llx",
                                 fold_op_name(op), fold_dtype_name(dt),
                                 (unsigned long long)values[i],
                                 (unsigned long long)values[j]);
                }
            }
        }
    }
}

Test(specials, pairs_float32)
{
    const uint64_t v[] = {f32(0.0f), f32(-0.0f), f32(1), f32(-1), f32(INFINITY),
                          f32(-INFINITY), 0x7fc00001, 0xffc00002, 0x7f800005 /* sNaN */,
                          f32(1e-40f), f32(-1e-40f), f32(FLT_MAX), f32(-FLT_MAX)};
    check_special_pairs(FOLD_FLOAT32, v, sizeof(v) / sizeof(v[0]));
}

Test(specials, pairs_float64)
{
    const uint64_t v[] = {f64(0.0), f64(-0.0), f64(1), f64(-1), f64(INFINITY), f64(-INFINITY),
                          0x7ff8000000000001ULL, 0xfff8000000000002ULL, f64(4.9e-324),
                          f64(-DBL_MAX), f64(DBL_MAX)};
    check_special_pairs(FOLD_FLOAT64, v, sizeof(v) / sizeof(v[0]));
}

Test(specials, pairs_float16_bfloat16)
{
    const uint64_t h[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7e01, 0xfe00,
                          0x0001, 0x8001, 0x7bff, 0xfbff};
    check_special_pairs(FOLD_FLOAT16, h, sizeof(h) / sizeof(h[0]));
    const uint64_t b[] = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc1, 0xffc0,
                          0x0001, 0x8001, 0x7f7f, 0xff7f};
    check_special_pairs(FOLD_BFLOAT16, b, sizeof(b) / sizeof(b[0]));
}

/* ---- Integer overflow edges -------------------------------------------------- */

static void check_pair(fold_op_t op, fold_dtype_t dt, uint64_t a, uint64_t b, uint64_t want)
{
    uint64_t got = reduce_pair(op, dt, a, b);
    cr_assert_eq(got, want, "%s %s %#llx, %#llx: got %#llx want %#llx", fold_op_name(op),
                 fold_dtype_name(dt), (unsigned long long)a, (unsigned long long)b,
                 (unsigned long long)got, (unsigned long long)want);
}

Test(integers, signed_wraparound_every_width)
{
    const fold_dtype_t types[] = {FOLD_INT8, FOLD_INT16, FOLD_INT32, FOLD_INT64};
    for (size_t t = 0; t < 4; t++) {
        fold_dtype_t dt = types[t];
        unsigned width = (unsigned)fold_dtype_size(dt) * 8;
        uint64_t mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
        uint64_t max = mask >> 1, min = max + 1, minus1 = mask;

        check_pair(FOLD_OP_SUM, dt, max, 1, min);          /* INT_MAX + 1 = INT_MIN */
        check_pair(FOLD_OP_SUM, dt, min, minus1, max);     /* INT_MIN - 1 = INT_MAX */
        check_pair(FOLD_OP_PROD, dt, min, minus1, min);    /* INT_MIN * -1 = INT_MIN */
        check_pair(FOLD_OP_PROD, dt, max, max, 1);         /* (2^(w-1)-1)^2 mod 2^w */
        check_pair(FOLD_OP_PROD, dt, max, 2, mask - 1);    /* wraps to -2 */
        check_pair(FOLD_OP_MIN, dt, min, max, min);
        check_pair(FOLD_OP_MAX, dt, min, max, max);
        check_pair(FOLD_OP_MIN, dt, minus1, 0, minus1);
        check_pair(FOLD_OP_MAX, dt, minus1, 0, 0);
        check_pair(FOLD_OP_LAND, dt, min, minus1, 1);
        check_pair(FOLD_OP_LXOR, dt, min, 0, 1);
        check_pair(FOLD_OP_BXOR, dt, min, minus1, max);
    }
}

Test(integers, unsigned_wraparound_every_width)
{
    const fold_dtype_t types[] = {FOLD_UINT8, FOLD_UINT16, FOLD_UINT32, FOLD_UINT64};
    for (size_t t = 0; t < 4; t++) {
        fold_dtype_t dt = types[t];
        unsigned width = (unsigned)fold_dtype_size(dt) * 8;
        uint64_t umax = width == 64 ? ~0ULL : (1ULL << width) - 1;
        uint64_t top = 1ULL << (width - 1);

        check_pair(FOLD_OP_SUM, dt, umax, 1, 0);
        check_pair(FOLD_OP_SUM, dt, umax, umax, umax - 1);
        check_pair(FOLD_OP_PROD, dt, umax, umax, 1);
        check_pair(FOLD_OP_PROD, dt, top, 2, 0);
        check_pair(FOLD_OP_MIN, dt, umax, 0, 0);
        check_pair(FOLD_OP_MAX, dt, umax, top, umax);
        check_pair(FOLD_OP_MIN, dt, top, top - 1, top - 1);   /* not a signed compare */
        check_pair(FOLD_OP_LOR, dt, top, 0, 1);
        check_pair(FOLD_OP_LAND, dt, top, 0, 0);
        check_pair(FOLD_OP_BAND, dt, umax, top, top);
    }
}

/* ---- float16 / bfloat16 conversions ------------------------------------------ */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

Test(conversions, half_all_65536_values)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = fold_half_to_float((uint16_t)h);
        double want = ref_decode(binary16, (uint16_t)h);
        uint16_t back = fold_float_to_half(f);
        if (isnan(want)) {
            uint32_t u = float_bits(f);
            cr_assert(isnan(f), "half %#x decoded to a non-NaN", h);
            cr_assert(u & 0x00400000u, "half NaN %#x not quiet in float32", h);
            cr_assert_eq(u >> 31, h >> 15, "half NaN %#x lost its sign", h);
            cr_assert_eq((u >> 13) & 0x3ff, (h & 0x3ff) | 0x200, "half NaN %#x payload", h);
            cr_assert_eq(back, h | 0x200, "half NaN %#x round trip gave %#x", h, back);
        } else {
            cr_assert_eq(float_bits(f), float_bits((float)want), "half %#x decoded wrong", h);
            cr_assert_eq(back, h, "half %#x round trip gave %#x", h, back);
        }
    }
}

Test(conversions, bfloat16_all_65536_values)
{
    for (uint32_t b = 0; b < 0x10000; b++) {
        float f = fold_bf16_to_float((uint16_t)b);
        double want = ref_decode(bfloat16, (uint16_t)b);
        uint16_t back = fold_float_to_bf16(f);
        if (isnan(want)) {
            cr_assert(isnan(f) && (float_bits(f) & 0x00400000u), "bf16 NaN %#x", b);
            cr_assert_eq(back, b | 0x40, "bf16 NaN %#x round trip gave %#x", b, back);
        } else {
            cr_assert_eq(float_bits(f), float_bits((float)want), "bf16 %#x decoded wrong", b);
            cr_assert_eq(back, b, "bf16 %#x round trip gave %#x", b, back);
        }
    }
}

Test(conversions, known_values)
{
    cr_assert_eq(fold_float_to_half(1.0f), 0x3c00);
    cr_assert_eq(fold_float_to_half(-2.0f), 0xc000);
    cr_assert_eq(fold_float_to_half(65504.0f), 0x7bff);
    cr_assert_eq(fold_float_to_half(65519.996f), 0x7bff);
    cr_assert_eq(fold_float_to_half(65520.0f), 0x7c00);       /* tie goes to even: inf */
    cr_assert_eq(fold_float_to_half(1e10f), 0x7c00);
    cr_assert_eq(fold_float_to_half(-INFINITY), 0xfc00);
    cr_assert_eq(fold_float_to_half(0x1p-24f), 0x0001);       /* smallest subnormal */
    cr_assert_eq(fold_float_to_half(0x1p-25f), 0x0000);       /* tie to even: 0 */
    cr_assert_eq(fold_float_to_half(0x1.8p-24f), 0x0002);     /* tie to even: 2 */
    cr_assert_eq(fold_float_to_half(0x1.000002p-25f), 0x0001);
    cr_assert_eq(fold_float_to_half(0x1p-14f), 0x0400);       /* smallest normal */
    cr_assert_eq(fold_float_to_half(0x1.ff8p-15f), 0x03ff);   /* largest subnormal */
    cr_assert_eq(fold_float_to_half(0x1.ffcp-15f), 0x0400);   /* tie, up to the normal */
    cr_assert_eq(fold_float_to_half(0x1.ffbp-15f), 0x03ff);
    cr_assert_eq(fold_float_to_half(1.0f + 0x1p-11f), 0x3c00); /* tie to even */
    cr_assert_eq(fold_float_to_half(1.0f + 0x1.8p-10f), 0x3c02);
    cr_assert_eq(fold_float_to_half(0.1f), 0x2e66);
    cr_assert_eq(fold_float_to_half(1.0f / 3), 0x3555);
    cr_assert_eq(fold_float_to_half(-0.0f), 0x8000);
    cr_assert_eq(fold_float_to_half(1e-30f), 0x0000);
    cr_assert_eq(fold_float_to_half(-1e-45f), 0x8000);
    cr_assert_eq(float_bits(fold_half_to_float(0x7bff)), float_bits(65504.0f));
    cr_assert_eq(float_bits(fold_half_to_float(0x0001)), float_bits(0x1p-24f));
    cr_assert_eq(float_bits(fold_half_to_float(0x8000)), float_bits(-0.0f));
    cr_assert(isnan(fold_half_to_float(0x7c01)));               /* signalling NaN ... */
    cr_assert(float_bits(fold_half_to_float(0x7c01)) & 0x00400000u); /* ... comes out quiet */

    cr_assert_eq(fold_float_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(fold_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie to even */
    cr_assert_eq(fold_float_to_bf16(1.0f + 0x1.8p-7f), 0x3f82);
    cr_assert_eq(fold_float_to_bf16(FLT_MAX), 0x7f80);          /* rounds to inf */
    cr_assert_eq(fold_float_to_bf16(-FLT_MAX), 0xff80);
    cr_assert_eq(fold_float_to_bf16(0x1p-133f), 0x0001);        /* subnormal */
    cr_assert_eq(fold_float_to_bf16(bits_float(0x7f800001)), 0x7fc0); /* sNaN -> qNaN */
    cr_assert_eq(fold_float_to_bf16(bits_float(0xffc12345)), 0xffc1);
    cr_assert_eq(float_bits(fold_bf16_to_float(0x7f81)), 0x7fc10000u);
}

/* Midpoints between neighbouring values round to the even one; a hair either
 * side rounds to the nearer one. Covers subnormal->normal and max->inf edges. */
static void check_ties(small_float_t fmt, uint16_t (*narrow)(float), uint16_t last)
{
    for (uint16_t v = 0; v < last; v++) {
        float lo = (float)ref_decode(fmt, v), hi = (float)ref_decode(fmt, (uint16_t)(v + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);   /* exact in float32 */
        uint16_t even = (v & 1) ? (uint16_t)(v + 1) : v;
        cr_assert_eq(narrow(mid), even, "tie above %#x", v);
        cr_assert_eq(narrow(nextafterf(mid, 0)), v, "just below the tie above %#x", v);
        cr_assert_eq(narrow(nextafterf(mid, INFINITY)), v + 1, "just above the tie %#x", v);
        cr_assert_eq(narrow(-mid), even | 0x8000, "negative tie above %#x", v);
    }
}

Test(conversions, ties_to_even)
{
    check_ties(binary16, fold_float_to_half, 0x7bff);
    check_ties(bfloat16, fold_float_to_bf16, 0x7f7f);
}

/* A sweep over float32 bit patterns against the reference rounding. */
Test(conversions, float32_sweep)
{
    for (uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
        float f = bits_float((uint32_t)u);
        uint16_t h = fold_float_to_half(f), b = fold_float_to_bf16(f);
        uint16_t want_h = ref_encode(binary16, f), want_b = ref_encode(bfloat16, f);
        if (isnan(f)) {
            cr_assert((h & 0x7fff) > 0x7c00 && (b & 0x7fff) > 0x7f80, "NaN %#llx",
                      (unsigned long long)u);
        } else {
            cr_assert_eq(h, want_h, "float %#llx to half: %#x want %#x", (unsigned long long)u,
                         h, want_h);
            cr_assert_eq(b, want_b, "float %#llx to bf16: %#x want %#x", (unsigned long long)u,
                         b, want_b);
        }
    }
}

/* ---- Threaded path ----------------------------------------------------------- */

static void check_threaded(fold_op_t op, fold_dtype_t dt, size_t count, size_t dst_offset,
                           int nthreads, size_t threshold)
{
    size_t size = fold_dtype_size(dt);
    size_t bytes = count * size;
    char *left = alloc_bytes(bytes), *right = alloc_bytes(bytes);
    char *serial = alloc_bytes(bytes), *threaded_buf = alloc_bytes(bytes + 64);
    char *threaded = threaded_buf + dst_offset * size;

    fill(left, NULL, count, dt, 11 + count);
    fill(right, left, count, dt, 12 + count);
    cr_assert_eq(fold_reduce_local(op, dt, left, right, serial, count, 1, 0), FOLD_OK);
    cr_assert_eq(fold_reduce_local(op, dt, left, right, threaded, count, nthreads, threshold),
                 FOLD_OK);
    for (size_t i = 0; i < count; i++) {
        uint64_t s = load_bits(serial, i, size), t = load_bits(threaded, i, size);
        cr_assert(same_result(op, dt, t, s), "%s %s count %zu threads %d offset %zu: "
                  "element %zu differs", fold_op_name(op), fold_dtype_name(dt), count,
                  nthreads, dst_offset, i);
    }
    /* In place, dst == left, as a collective's receive-and-reduce step uses it. */
    memcpy(threaded, left, bytes);
    cr_assert_eq(fold_reduce_local(op, dt, threaded, right, threaded, count, nthreads,
                                   threshold), FOLD_OK);
    for (size_t i = 0; i < count; i++) {
        uint64_t s = load_bits(serial, i, size), t = load_bits(threaded, i, size);
        cr_assert(same_result(op, dt, t, s), "in place: element %zu differs", i);
    }
    free(left);
    free(right);
    free(serial);
    free(threaded_buf);
}

Test(threads, equals_serial, .timeout = 300)
{
    const fold_dtype_t types[] = {FOLD_INT8, FOLD_UINT16, FOLD_INT64, FOLD_FLOAT16,
                                  FOLD_FLOAT32, FOLD_FLOAT64};
    const fold_op_t ops[] = {FOLD_OP_SUM, FOLD_OP_MIN, FOLD_OP_LXOR};
    const size_t thread_counts[] = {0, 1, 2, 3, 7, 64, 1000, 100003};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            for (size_t c = 0; c < sizeof(thread_counts) / sizeof(thread_counts[0]); c++) {
                check_threaded(ops[o], types[t], thread_counts[c], 0, 2, 16);
                check_threaded(ops[o], types[t], thread_counts[c], 1, 2, 16);
            }
        }
    }
    /* More threads than cores, and a threshold the buffer does not reach. */
    check_threaded(FOLD_OP_SUM, FOLD_FLOAT32, 100003, 3, 4, 0);
    check_threaded(FOLD_OP_PROD, FOLD_INT32, 100003, 0, 3, 64);
    check_threaded(FOLD_OP_MAX, FOLD_FLOAT64, 1000, 0, 2, 1 << 20);
}

/* ---- Invalid arguments ------------------------------------------------------- */

static void quiet_logs(void)
{
    fold_log_level = FOLD_LOG_ERROR - 1;   /* these tests provoke errors on purpose */
}

TestSuite(invalid, .init = quiet_logs);

static void check_rejected(fold_op_t op, fold_dtype_t dt, const void *l, const void *r,
                           void *d, size_t count)
{
    char before[64];
    if (d) {
        memcpy(before, d, sizeof(before));
    }
    cr_assert_eq(fold_reduce_local(op, dt, l, r, d, count, 1, 0), FOLD_ERR_INVALID_ARG,
                 "op %d dtype %d count %zu accepted", (int)op, (int)dt, count);
    if (d) {
        cr_assert(memcmp(before, d, sizeof(before)) == 0, "dst written on error");
    }
}

Test(invalid, combinations)
{
    double l[8] = {1, 2, 3, 4, 5, 6, 7, 8}, r[8] = {1, 2, 3, 4, 5, 6, 7, 8}, d[8] = {0};
    const fold_dtype_t floats[] = {FOLD_FLOAT16, FOLD_BFLOAT16, FOLD_FLOAT32, FOLD_FLOAT64};
    const fold_op_t bitwise[] = {FOLD_OP_BAND, FOLD_OP_BOR, FOLD_OP_BXOR};

    for (size_t t = 0; t < 4; t++) {
        for (size_t o = 0; o < 3; o++) {
            cr_assert_not(fold_op_dtype_valid(bitwise[o], floats[t]));
            check_rejected(bitwise[o], floats[t], l, r, d, 8);
        }
    }
    cr_assert(fold_op_dtype_valid(FOLD_OP_BXOR, FOLD_UINT64));
    cr_assert(fold_op_dtype_valid(FOLD_OP_LXOR, FOLD_FLOAT16));

    cr_assert_not(fold_op_dtype_valid(FOLD_OP_SUM, (fold_dtype_t)99));
    cr_assert_not(fold_op_dtype_valid(FOLD_OP_SUM, (fold_dtype_t)-1));
    check_rejected(FOLD_OP_SUM, (fold_dtype_t)99, l, r, d, 8);
    check_rejected(FOLD_OP_SUM, (fold_dtype_t)-1, l, r, d, 8);
    check_rejected(FOLD_OP_SUM, FOLD_DTYPE_COUNT, l, r, d, 0);

    const int bad_ops[] = {-1, FOLD_OP_PREDEFINED_COUNT, 63, FOLD_OP_USER_FIRST, 100000};
    for (size_t o = 0; o < sizeof(bad_ops) / sizeof(bad_ops[0]); o++) {
        cr_assert_not(fold_op_dtype_valid((fold_op_t)bad_ops[o], FOLD_INT32));
        check_rejected((fold_op_t)bad_ops[o], FOLD_INT32, l, r, d, 8);
    }

    check_rejected(FOLD_OP_SUM, FOLD_FLOAT64, NULL, r, d, 8);
    check_rejected(FOLD_OP_SUM, FOLD_FLOAT64, l, NULL, d, 8);
    check_rejected(FOLD_OP_SUM, FOLD_FLOAT64, l, r, NULL, 8);
}

Test(invalid, zero_count_is_a_no_op)
{
    double l[2] = {1, 2}, r[2] = {3, 4}, d[2] = {5, 6};
    cr_assert_eq(fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT64, NULL, NULL, NULL, 0, 1, 0), FOLD_OK);
    cr_assert_eq(fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT64, l, r, d, 0, 2, 0), FOLD_OK);
    cr_assert(d[0] == 5 && d[1] == 6);
}

/* ---- User ops ---------------------------------------------------------------- */

typedef struct {
    int calls;
    int saw_alias;          /* the fn got in == inout or overlapping buffers */
    fold_dtype_t dtype;
} op_probe_t;

static int ranges_overlap(const void *a, const void *b, size_t bytes)
{
    const char *x = a, *y = b;
    return x < y + bytes && y < x + bytes;
}

/* Non-commutative: inout = in * 10 + inout. */
static void times_ten_plus(const void *in, void *inout, size_t count, fold_dtype_t dtype,
                           void *arg)
{
    op_probe_t *probe = arg;
    const int32_t *a = in;
    int32_t *b = inout;
    probe->calls++;
    probe->dtype = dtype;
    probe->saw_alias |= ranges_overlap(in, inout, count * sizeof(int32_t));
    for (size_t i = 0; i < count; i++) {
        b[i] = (int32_t)((uint32_t)a[i] * 10u + (uint32_t)b[i]);
    }
}

static void check_times_ten(fold_op_t op, size_t count, aliasing_t aliasing, int same_lr)
{
    op_probe_t *probe;
    fold_user_op_fn fn;
    int commutative;
    cr_assert_eq(fold_user_op_lookup(op, &fn, (void **)&probe, &commutative), FOLD_OK);
    *probe = (op_probe_t){0};

    int32_t *left = alloc_bytes(count * 4), *right = alloc_bytes(count * 4);
    int32_t *dst = alloc_bytes(count * 4), *want = alloc_bytes(count * 4);
    for (size_t i = 0; i < count; i++) {
        left[i] = (int32_t)(i % 100) + 1;
        right[i] = same_lr ? left[i] : (int32_t)(i % 7) + 1000;
        want[i] = left[i] * 10 + right[i];
    }
    const int32_t *l = left, *r = same_lr ? left : right;
    if (same_lr) {
        memcpy(dst, left, count * 4);
        l = r = dst;
    } else if (aliasing == DST_IS_LEFT) {
        memcpy(dst, left, count * 4);
        l = dst;
    } else if (aliasing == DST_IS_RIGHT) {
        memcpy(dst, right, count * 4);
        r = dst;
    }
    cr_assert_eq(fold_reduce_local(op, FOLD_INT32, l, r, dst, count, 2, 0), FOLD_OK);
    for (size_t i = 0; i < count; i++) {
        cr_assert_eq(dst[i], want[i], "count %zu %s%s: element %zu is %d want %d", count,
                     aliasing_names[aliasing], same_lr ? " (left==right)" : "", i, dst[i],
                     want[i]);
    }
    cr_assert_not(probe->saw_alias, "user fn saw aliased in/inout");
    cr_assert(count == 0 || probe->calls >= 1);
    cr_assert(count == 0 || probe->dtype == FOLD_INT32);
    free(left);
    free(right);
    free(dst);
    free(want);
}

Test(user_ops, non_commutative_order)
{
    op_probe_t probe;
    fold_op_t op;
    cr_assert_eq(fold_op_create(times_ten_plus, &probe, 0, &op), FOLD_OK);
    cr_assert_geq(op, FOLD_OP_USER_FIRST);
    cr_assert_not(fold_op_is_commutative(op));
    cr_assert(fold_op_dtype_valid(op, FOLD_INT32) && fold_op_dtype_valid(op, FOLD_FLOAT16));
    cr_assert_str_eq(fold_op_name(op), "user");

    const size_t sizes[] = {0, 1, 7, 4096, 4097, 10000};   /* 4096 int32 = 16 KiB */
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int a = DST_DISTINCT; a <= DST_IS_RIGHT; a++) {
            check_times_ten(op, sizes[s], (aliasing_t)a, 0);
        }
        check_times_ten(op, sizes[s], DST_IS_LEFT, 1);
    }
    cr_assert_eq(fold_op_free(op), FOLD_OK);
    cr_assert_not(fold_op_dtype_valid(op, FOLD_INT32));
}

Test(user_ops, commutative_in_place)
{
    op_probe_t probe;
    fold_op_t op;
    cr_assert_eq(fold_op_create(times_ten_plus, &probe, 1, &op), FOLD_OK);
    cr_assert(fold_op_is_commutative(op));

    /* Registered as commutative, dst == left may run fn(right, dst): right*10+left. */
    int32_t left[5] = {1, 2, 3, 4, 5}, right[5] = {7, 7, 7, 7, 7};
    cr_assert_eq(fold_reduce_local(op, FOLD_INT32, left, right, left, 5, 1, 0), FOLD_OK);
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(left[i], 70 + i + 1);
    }
    /* Other aliasings still give left op right exactly. */
    check_times_ten(op, 5000, DST_IS_RIGHT, 0);
    check_times_ten(op, 5000, DST_DISTINCT, 0);
    check_times_ten(op, 5000, DST_IS_LEFT, 1);
    cr_assert_eq(fold_op_free(op), FOLD_OK);
}

/* 2x2 float matrices packed as 4 elements: inout = in x inout (non-commutative). */
static void matmul2(const void *in, void *inout, size_t count, fold_dtype_t dtype, void *arg)
{
    (void)dtype;
    (void)arg;
    const float *a = in;
    float *b = inout;
    cr_assert_eq(count % 4, 0, "a chunk split a matrix");
    for (size_t k = 0; k < count; k += 4) {
        float r0 = a[k] * b[k] + a[k + 1] * b[k + 2];
        float r1 = a[k] * b[k + 1] + a[k + 1] * b[k + 3];
        float r2 = a[k + 2] * b[k] + a[k + 3] * b[k + 2];
        float r3 = a[k + 2] * b[k + 1] + a[k + 3] * b[k + 3];
        b[k] = r0;
        b[k + 1] = r1;
        b[k + 2] = r2;
        b[k + 3] = r3;
    }
}

Test(user_ops, matrix_product_keeps_order)
{
    enum { MATRICES = 5000, N = MATRICES * 4 };
    fold_op_t op;
    cr_assert_eq(fold_op_create(matmul2, NULL, 0, &op), FOLD_OK);
    float *left = alloc_bytes(N * 4), *right = alloc_bytes(N * 4), *dst = alloc_bytes(N * 4);
    float *want = alloc_bytes(N * 4);
    for (size_t k = 0; k < N; k += 4) {
        float l[4] = {1, (float)(k % 3), 0, 1}, r[4] = {1, 0, (float)(k % 5), 1};
        memcpy(left + k, l, sizeof(l));
        memcpy(right + k, r, sizeof(r));
        want[k] = 1 + l[1] * r[2];
        want[k + 1] = l[1];
        want[k + 2] = r[2];
        want[k + 3] = 1;
    }
    memcpy(dst, left, N * 4);
    cr_assert_eq(fold_reduce_local(op, FOLD_FLOAT32, dst, right, dst, N, 1, 0), FOLD_OK);
    cr_assert(memcmp(dst, want, N * 4) == 0, "dst == left gave right x left");
    memcpy(dst, right, N * 4);
    cr_assert_eq(fold_reduce_local(op, FOLD_FLOAT32, left, dst, dst, N, 1, 0), FOLD_OK);
    cr_assert(memcmp(dst, want, N * 4) == 0, "dst == right gave right x left");
    cr_assert_eq(fold_op_free(op), FOLD_OK);
    free(left);
    free(right);
    free(dst);
    free(want);
}

/* ---- Streaming stores -------------------------------------------------------- */

/* Which pairs stream: sum and product, bitwise ops on integers, complex sum; and
 * only on a CPU with AVX2 (the others run the ordinary kernel, checked above). */
Test(stream, which_pairs_stream)
{
#if defined(__x86_64__)
    int avx2 = __builtin_cpu_supports("avx2") != 0;
#else
    int avx2 = 0;
#endif
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_SUM, FOLD_FLOAT32), avx2);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_PROD, FOLD_FLOAT64), avx2);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_BXOR, FOLD_INT8), avx2);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_SUM, FOLD_COMPLEX_FLOAT64), avx2);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_MIN, FOLD_FLOAT32), 0);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_LAND, FOLD_INT32), 0);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_SUM, FOLD_FLOAT16), 0);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_PROD, FOLD_COMPLEX_FLOAT32), 0);
    cr_assert_eq(fold_reduce_stream_available(FOLD_OP_USER_FIRST, FOLD_FLOAT32), 0);
}

/* A complex sum streams as the float sum of both parts: the same bits as the
 * ordinary kernel, for every shift of dst. */
Test(stream, complex_sum_matches)
{
    const size_t n = 1001;
    double *l = malloc(2 * n * sizeof(double)), *r = malloc(2 * n * sizeof(double));
    double *want = malloc(2 * n * sizeof(double)), *got = malloc(2 * n * sizeof(double) + 64);
    cr_assert(l && r && want && got);
    uint64_t rng = 42;
    for (size_t i = 0; i < 2 * n; i++) {
        l[i] = (double)(rng_next(&rng) % 100000) / 7.0 - 5000;
        r[i] = (double)(rng_next(&rng) % 100000) / 3.0 - 9000;
    }
    cr_assert_eq(fold_reduce_local(FOLD_OP_SUM, FOLD_COMPLEX_FLOAT64, l, r, want, n, 1, 0),
                 FOLD_OK);
    for (size_t shift = 0; shift < 4; shift++) {
        double *dst = (double *)((char *)got + shift * 2 * sizeof(double));
        cr_assert_eq(fold_reduce_local_stream(FOLD_OP_SUM, FOLD_COMPLEX_FLOAT64, l, r, dst, n),
                     FOLD_OK);
        cr_assert(memcmp(dst, want, 2 * n * sizeof(double)) == 0, "shift %zu differs", shift);
    }
    free(l);
    free(r);
    free(want);
    free(got);
}

/* A result streamed into several destinations at once (a result written along):
 * each gets the ordinary kernel's bits and nothing around its range changes, with
 * the destinations alike modulo 32 bytes (the streaming kernel), apart (through an L1
 * block), for a pair without a streaming kernel (float max), and for counts that end
 * before, inside and after the first aligned vector. */
Test(stream, several_destinations)
{
    const size_t n = 5008, pad = 64;   /* n floats a multiple of 64 bytes (aligned_alloc) */
    const fold_op_t ops[] = {FOLD_OP_SUM, FOLD_OP_MAX};
    float *l = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float));
    float *want = malloc(n * sizeof(float));
    char *area[3];
    cr_assert(l && r && want);
    for (int k = 0; k < 3; k++) {
        cr_assert((area[k] = aligned_alloc(64, n * sizeof(float) + 2 * pad)) != NULL);
    }
    uint64_t rng = 7;
    for (size_t i = 0; i < n; i++) {
        l[i] = (float)(rng_next(&rng) % 100000) / 7.0f - 5000;
        r[i] = (float)(rng_next(&rng) % 100000) / 3.0f - 9000;
    }
    const size_t counts[] = {0, 3, 9, 16, 17, 4093, n};
    const size_t shifts[][3] = {{0, 0, 0}, {4, 4, 36}, {0, 8, 4}, {12, 0, 32}};
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        cr_assert_eq(fold_reduce_local(ops[o], FOLD_FLOAT32, l, r, want, n, 1, 0), FOLD_OK);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (size_t sh = 0; sh < sizeof(shifts) / sizeof(shifts[0]); sh++) {
                for (int ndst = 1; ndst <= 3; ndst++) {
                    void *dsts[3];
                    for (int k = 0; k < 3; k++) {
                        memset(area[k], 0x5a, n * sizeof(float) + 2 * pad);
                        dsts[k] = area[k] + pad + shifts[sh][k];
                    }
                    cr_assert_eq(fold_reduce_local_stream_to(ops[o], FOLD_FLOAT32, l, r, dsts,
                                                             ndst, counts[c]),
                                 FOLD_OK);
                    for (int k = 0; k < 3; k++) {
                        const char *d = dsts[k];
                        const size_t bytes = k < ndst ? counts[c] * sizeof(float) : 0;
                        cr_assert(memcmp(d, want, bytes) == 0,
                                  "op %d count %zu shifts %zu: destination %d of %d differs",
                                  (int)ops[o], counts[c], sh, k, ndst);
                        for (const char *b = area[k]; b < area[k] + n * sizeof(float) + 2 * pad;
                             b++) {
                            cr_assert((b >= d && b < d + bytes) || *(const unsigned char *)b == 0x5a,
                                      "byte %td of area %d written", b - area[k], k);
                        }
                    }
                }
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        free(area[k]);
    }
    free(l);
    free(r);
    free(want);
}

/* A destination that is an operand itself (in place: the owner's own OUT is its IN),
 * first or last among one to four destinations: every destination gets the result of
 * the operands as they were. */
Test(stream, a_destination_may_be_an_operand)
{
    const size_t n = 3001, room = 3008;   /* room: a multiple of 64 bytes (aligned_alloc) */
    float *l = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    float *r = aligned_alloc(64, room * sizeof(float));
    float *other[3];
    cr_assert(l && want && r);
    for (int k = 0; k < 3; k++) {
        cr_assert((other[k] = aligned_alloc(64, room * sizeof(float))) != NULL);
    }
    for (int ndst = 1; ndst <= 4; ndst++) {
        for (int last = 0; last <= 1; last++) {
            uint64_t rng = 11;
            for (size_t i = 0; i < n; i++) {
                l[i] = (float)(rng_next(&rng) % 1000) - 500;
                r[i] = (float)(rng_next(&rng) % 1000) / 4.0f;
                want[i] = l[i] + r[i];
            }
            void *dsts[4];
            for (int k = 0, o = 0; k < ndst; k++) {
                dsts[k] = k == (last ? ndst - 1 : 0) ? (void *)r : (void *)other[o++];
            }
            cr_assert_eq(fold_reduce_local_stream_to(FOLD_OP_SUM, FOLD_FLOAT32, l, r, dsts,
                                                     ndst, n),
                         FOLD_OK);
            for (int k = 0; k < ndst; k++) {
                cr_assert(memcmp(dsts[k], want, n * sizeof(float)) == 0,
                          "%d destinations, the operand %s: destination %d differs", ndst,
                          last ? "last" : "first", k);
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        free(other[k]);
    }
    free(l);
    free(r);
    free(want);
}

/* The streaming copy moves exactly the bytes asked, whatever the alignment of
 * either side and the length (heads and tails shorter than a vector included). */
Test(stream, copy_every_alignment_and_length)
{
    enum { MAX = 4096 + 200 };
    unsigned char *src = malloc(MAX + 64), *dst = malloc(MAX + 64 + 2);
    cr_assert(src && dst);
    uint64_t rng = 7;
    for (size_t i = 0; i < MAX + 64; i++) {
        src[i] = (unsigned char)rng_next(&rng);
    }
    static const size_t lengths[] = {0, 1, 31, 32, 63, 64, 65, 127, 1000, 4096 + 77};
    for (size_t so = 0; so < 40; so += 13) {
        for (size_t doff = 0; doff < 40; doff += 7) {
            for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
                size_t n = lengths[k];
                memset(dst, 0xa5, MAX + 66);
                fold_copy_stream(dst + doff, src + so, n);
                cr_assert(memcmp(dst + doff, src + so, n) == 0,
                          "src +%zu dst +%zu length %zu", so, doff, n);
                for (size_t i = 0; i < MAX + 66; i++) {
                    if (i < doff || i >= doff + n) {
                        cr_assert_eq(dst[i], 0xa5, "byte %zu outside the copy was written "
                                     "(src +%zu dst +%zu length %zu)", i, so, doff, n);
                    }
                }
            }
        }
    }
    free(src);
    free(dst);
}

/* The copy into shared memory goes in pieces: every byte arrives, across pieces. */
Test(stream, shared_copy_across_pieces)
{
    const size_t lengths[] = {0, 1, (size_t)256 << 10, ((size_t)256 << 10) + 1,
                              ((size_t)1 << 20) + 77};
    size_t max = ((size_t)1 << 20) + 77;
    unsigned char *src = malloc(max), *dst = malloc(max + 1);
    cr_assert(src && dst);
    uint64_t rng = 3;
    for (size_t i = 0; i < max; i++) {
        src[i] = (unsigned char)rng_next(&rng);
    }
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        memset(dst, 0x5a, max + 1);
        fold_copy_shared(dst, src, lengths[k]);
        cr_assert(memcmp(dst, src, lengths[k]) == 0, "length %zu", lengths[k]);
        cr_assert_eq(dst[lengths[k]], 0x5a, "a byte past length %zu was written", lengths[k]);
    }
    free(src);
    free(dst);
}

/* A reduction into shared memory that also copies its result: both destinations
 * get the plain kernel's bits, below and above the L1 block's size (8 KiB) and
 * across its edge, and `also` may be the left operand itself (in place). */
Test(stream, shared_reduction_also_copies_its_result)
{
    static const size_t counts[] = {0, 1, 2047, 2048, 2049, 5000, 70001};
    const size_t max = 70001;
    int32_t *l = malloc(max * sizeof(int32_t)), *r = malloc(max * sizeof(int32_t));
    int32_t *want = malloc(max * sizeof(int32_t)), *dst = malloc((max + 1) * sizeof(int32_t));
    int32_t *also = malloc((max + 1) * sizeof(int32_t)), *own = malloc(max * sizeof(int32_t));
    cr_assert(l && r && want && dst && also && own);
    uint64_t rng = 11;
    for (size_t i = 0; i < max; i++) {
        l[i] = (int32_t)(rng_next(&rng) >> 33);
        r[i] = (int32_t)(rng_next(&rng) >> 33);
        want[i] = (int32_t)((uint32_t)l[i] + (uint32_t)r[i]);
    }
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        size_t n = counts[k];
        memset(dst, 0x5a, (max + 1) * sizeof(int32_t));
        memset(also, 0x5a, (max + 1) * sizeof(int32_t));
        cr_assert_eq(fold_reduce_local_shared_also(FOLD_OP_SUM, FOLD_INT32, l, r, dst, also, n),
                     FOLD_OK);
        cr_assert(memcmp(dst, want, n * sizeof(int32_t)) == 0, "dst, count %zu", n);
        cr_assert(memcmp(also, want, n * sizeof(int32_t)) == 0, "also, count %zu", n);
        cr_assert_eq(also[n], 0x5a5a5a5a, "past the end of also, count %zu", n);
        memcpy(own, l, n * sizeof(int32_t));
        cr_assert_eq(fold_reduce_local_shared_also(FOLD_OP_SUM, FOLD_INT32, own, r, dst, own, n),
                     FOLD_OK);
        cr_assert(memcmp(own, want, n * sizeof(int32_t)) == 0, "in place, count %zu", n);
    }
    free(l);
    free(r);
    free(want);
    free(dst);
    free(also);
    free(own);
}

/* The bits of fold_reduce_local chained row by row, into dst (which may be rows[0]). */
static void chain_rows(fold_op_t op, fold_dtype_t dt, char *const *rows, int nrows, char *dst,
                       size_t count)
{
    cr_assert_eq(fold_reduce_local(op, dt, rows[0], rows[1], dst, count, 1, SIZE_MAX), FOLD_OK);
    for (int r = 2; r < nrows; r++) {
        cr_assert_eq(fold_reduce_local(op, dt, dst, rows[r], dst, count, 1, SIZE_MAX), FOLD_OK);
    }
}

/* A node leader's fold of many rows (fold_reduce_local_rows): the chain's bits for
 * floats, halves and a non-commutative user op, below, at and across the L1 block's
 * edge, into its own buffer, onto the first row, also copied, and streamed. */
Test(stream, rows_fold_is_the_chain_bit_for_bit)
{
    op_probe_t probe;
    fold_op_t user;
    cr_assert_eq(fold_op_create(times_ten_plus, &probe, 0, &user), FOLD_OK);
    const struct { fold_op_t op; fold_dtype_t dt; } pairs[] = {
        {FOLD_OP_SUM, FOLD_FLOAT32}, {FOLD_OP_SUM, FOLD_FLOAT16}, {FOLD_OP_MAX, FOLD_FLOAT64},
        {FOLD_OP_PROD, FOLD_INT64},  {user, FOLD_INT32},
    };
    static const size_t counts[] = {1, 7, 1024, 2048, 2049, 5000};
    static const int nrows_of[] = {3, 5, 64};
    const size_t max_bytes = 5000 * 8;
    char *rows[64], *first = malloc(max_bytes), *want = malloc(max_bytes);
    char *dst = malloc(max_bytes + 8), *also = malloc(max_bytes + 8);
    cr_assert(first && want && dst && also);
    uint64_t rng = 5;
    for (int r = 0; r < 64; r++) {
        rows[r] = malloc(max_bytes);
        cr_assert_not_null(rows[r]);
        for (size_t i = 0; i < max_bytes; i++) {
            rows[r][i] = (char)(rng_next(&rng) >> 40);
        }
    }
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        const size_t esize = fold_dtype_size(pairs[p].dt);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (size_t k = 0; k < sizeof(nrows_of) / sizeof(nrows_of[0]); k++) {
                const size_t n = counts[c], bytes = n * esize;
                const int nrows = nrows_of[k];
                chain_rows(pairs[p].op, pairs[p].dt, rows, nrows, want, n);
                for (int how = FOLD_ROWS_PRIVATE; how <= FOLD_ROWS_STREAM; how++) {
                    for (int with_also = 0; with_also < 2; with_also++) {
                        memset(dst, 0x5a, bytes + 8);
                        memset(also, 0x5a, bytes + 8);
                        cr_assert_eq(fold_reduce_local_rows(pairs[p].op, pairs[p].dt,
                                                            (const void *const *)rows, nrows,
                                                            dst, with_also ? also : NULL, n,
                                                            how),
                                     FOLD_OK);
                        cr_assert(memcmp(dst, want, bytes) == 0,
                                  "pair %zu, count %zu, %d rows, how %d", p, n, nrows, how);
                        cr_assert(!with_also || memcmp(also, want, bytes) == 0,
                                  "also: pair %zu, count %zu", p, n);
                        cr_assert_eq((unsigned char)dst[bytes], 0x5a, "past the end, count %zu",
                                     n);
                    }
                }
                /* onto the first row */
                char *onto[64];
                memcpy(onto, rows, sizeof(onto));
                onto[0] = first;
                for (int how = FOLD_ROWS_PRIVATE; how <= FOLD_ROWS_SHARED; how++) {
                    memcpy(first, rows[0], bytes);
                    cr_assert_eq(fold_reduce_local_rows(pairs[p].op, pairs[p].dt,
                                                        (const void *const *)onto, nrows,
                                                        first, NULL, n, how),
                                 FOLD_OK);
                    cr_assert(memcmp(first, want, bytes) == 0,
                              "in place: pair %zu, count %zu, how %d", p, n, how);
                }
            }
        }
    }
    cr_expect_eq(fold_reduce_local_rows(FOLD_OP_SUM, FOLD_FLOAT32, (const void *const *)rows, 1,
                                        dst, NULL, 4, 0),
                 FOLD_ERR_INVALID_ARG);
    for (int r = 0; r < 64; r++) {
        free(rows[r]);
    }
    free(first);
    free(want);
    free(dst);
    free(also);
    cr_assert_eq(fold_op_free(user), FOLD_OK);
}
