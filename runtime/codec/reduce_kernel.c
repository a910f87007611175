/*
 * Local reduction: dst = left op right, elementwise. This is the hot loop of every
 * collective, so each (datatype, op) pair gets its own plain indexed loop that
 * GCC -O3 vectorises. The loops carry no `restrict`: dst may be left or right,
 * and GCC's runtime alias check still takes the vector path when dst is exactly
 * one of them (only a partial overlap, which the contract forbids, would not).
 * Large buffers are split into contiguous, cache-line-aligned chunks, one per
 * OpenMP thread, each running the same serial loop (Shan et al., sec. III).
 */
#include "reduce_kernel.h"
#include "log.h"

#include <stdint.h>
#include <string.h>

typedef void (*kernel_fn)(const void *left, const void *right, void *dst, size_t count);

/* ---- Elementwise operators that need more than one C operator ---------------- */

/* min/max on floats: NaN wins (the left one if both are NaN), and -0 orders below
 * +0, so the result has the same bits whichever operand comes first. Equal
 * non-NaN operands have equal bits except for +-0, where OR of the bits gives -0
 * (min) and AND gives +0 (max).
 *
 * float32 builds the answer from bit masks, which GCC turns into ~14 SSE2 ops per
 * four elements. Baseline x86-64 has no compare-to-64-bit-mask, so float64 is a
 * chain of selects instead (still vectorised, about twice the ops). */
static inline uint32_t float32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

static inline float float32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

static inline uint32_t mask32(int condition)
{
    return 0u - (uint32_t)condition;
}

static inline float float32_min(float a, float b)
{
    uint32_t ua = float32_bits(a), ub = float32_bits(b);
    uint32_t less = mask32(a < b), nan_left = mask32(a != a);
    uint32_t m = (ua & less) | (ub & ~less);   /* b also when b is NaN */
    m |= ua & mask32(a == b);
    return float32_from_bits((ua & nan_left) | (m & ~nan_left));
}

static inline float float32_max(float a, float b)
{
    uint32_t ua = float32_bits(a), ub = float32_bits(b);
    uint32_t more = mask32(a > b), nan_left = mask32(a != a);
    uint32_t m = (ua & more) | (ub & ~more);
    m &= ua | ~mask32(a == b);
    return float32_from_bits((ua & nan_left) | (m & ~nan_left));
}

static inline double float64_or_and_bits(double a, double b, int use_or)
{
    uint64_t ua, ub;
    memcpy(&ua, &a, sizeof(ua));
    memcpy(&ub, &b, sizeof(ub));
    uint64_t u = use_or ? (ua | ub) : (ua & ub);
    memcpy(&a, &u, sizeof(a));
    return a;
}

static inline double float64_min(double a, double b)
{
    double equal = float64_or_and_bits(a, b, 1);
    double m = a < b ? a : b;
    m = a == b ? equal : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

static inline double float64_max(double a, double b)
{
    double equal = float64_or_and_bits(a, b, 0);
    double m = a > b ? a : b;
    m = a == b ? equal : m;
    m = b != b ? b : m;
    return a != a ? a : m;
}

/* ---- Kernel generator -------------------------------------------------------- */

/* One loop: load each operand into the compute type C, combine with `expr` (over
 * a and b), store back as T. Native types load and store as-is; float16 and
 * bfloat16 widen to float32 and round back, as fold.h specifies. */
#define AS_IS(x) (x)

#define KERNEL(tag, T, C, load, store, name, expr)                               \
    static void kernel_##tag##_##name(const void *left, const void *right,      \
                                      void *dst, size_t count)                  \
    {                                                                            \
        const T *l = left;                                                       \
        const T *r = right;                                                      \
        T *d = dst;                                                              \
        for (size_t i = 0; i < count; i++) {                                     \
            C a = load(l[i]);                                                    \
            C b = load(r[i]);                                                    \
            d[i] = store(expr);                                                  \
        }                                                                        \
    }

/* Logical ops: nonzero is true and the result is 1 or 0. For integers, bit
 * (width - 1) of x | -x is set exactly when x != 0; taking the truth value from it
 * instead of from `x != 0` lets 64-bit types vectorise on baseline x86-64, which
 * has no 64-bit vector compare. */
#define TRUTH(U, x) ((((U)(x)) | (0u - (U)(x))) >> (sizeof(U) * 8 - 1))

#define INTEGER_LOGICAL_KERNELS(tag, T, U)                                       \
    KERNEL(tag, T, T, AS_IS, AS_IS, land, (T)(TRUTH(U, a) & TRUTH(U, b)))        \
    KERNEL(tag, T, T, AS_IS, AS_IS, lor,  (T)(TRUTH(U, a) | TRUTH(U, b)))        \
    KERNEL(tag, T, T, AS_IS, AS_IS, lxor, (T)(TRUTH(U, a) ^ TRUTH(U, b)))

/* Floats: a NaN is true, -0 is false; the result is 1.0 or 0.0. */
#define FLOAT_LOGICAL_KERNELS(tag, T, C, load, store)                            \
    KERNEL(tag, T, C, load, store, land, (a != 0) & (b != 0) ? (C)1 : (C)0)      \
    KERNEL(tag, T, C, load, store, lor,  (a != 0) | (b != 0) ? (C)1 : (C)0)      \
    KERNEL(tag, T, C, load, store, lxor, (a != 0) ^ (b != 0) ? (C)1 : (C)0)

/* Integers: sum and prod go through the unsigned type U (at least unsigned int,
 * so narrow types never promote to a signed int that could overflow) and wrap
 * modulo 2^bits. */
#define INTEGER_KERNELS(tag, T, U)                                               \
    KERNEL(tag, T, T, AS_IS, AS_IS, sum,  (T)((U)a + (U)b))                      \
    KERNEL(tag, T, T, AS_IS, AS_IS, prod, (T)((U)a * (U)b))                      \
    KERNEL(tag, T, T, AS_IS, AS_IS, min,  a < b ? a : b)                         \
    KERNEL(tag, T, T, AS_IS, AS_IS, max,  a > b ? a : b)                         \
    KERNEL(tag, T, T, AS_IS, AS_IS, band, (T)(a & b))                            \
    KERNEL(tag, T, T, AS_IS, AS_IS, bor,  (T)(a | b))                            \
    KERNEL(tag, T, T, AS_IS, AS_IS, bxor, (T)(a ^ b))                            \
    INTEGER_LOGICAL_KERNELS(tag, T, U)

#define FLOAT_KERNELS(tag, T, load, store)                                       \
    KERNEL(tag, T, float_type_##tag, load, store, sum,  a + b)                   \
    KERNEL(tag, T, float_type_##tag, load, store, prod, a * b)                   \
    KERNEL(tag, T, float_type_##tag, load, store, min,  min_of_##tag(a, b))      \
    KERNEL(tag, T, float_type_##tag, load, store, max,  max_of_##tag(a, b))      \
    FLOAT_LOGICAL_KERNELS(tag, T, float_type_##tag, load, store)

/* Compute type and min/max per floating datatype. */
typedef float  float_type_float16;
typedef float  float_type_bfloat16;
typedef float  float_type_float32;
typedef double float_type_float64;
#define min_of_float16  float32_min
#define max_of_float16  float32_max
#define min_of_bfloat16 float32_min
#define max_of_bfloat16 float32_max
#define min_of_float32  float32_min
#define max_of_float32  float32_max
#define min_of_float64  float64_min
#define max_of_float64  float64_max

INTEGER_KERNELS(int8,   int8_t,   unsigned)
INTEGER_KERNELS(int16,  int16_t,  unsigned)
INTEGER_KERNELS(int32,  int32_t,  uint32_t)
INTEGER_KERNELS(int64,  int64_t,  uint64_t)
INTEGER_KERNELS(uint8,  uint8_t,  unsigned)
INTEGER_KERNELS(uint16, uint16_t, unsigned)
INTEGER_KERNELS(uint32, uint32_t, uint32_t)
INTEGER_KERNELS(uint64, uint64_t, uint64_t)
FLOAT_KERNELS(float16,  uint16_t, fold_half_to_float, fold_float_to_half)
FLOAT_KERNELS(bfloat16, uint16_t, fold_bf16_to_float, fold_float_to_bf16)
FLOAT_KERNELS(float32,  float,    AS_IS, AS_IS)
FLOAT_KERNELS(float64,  double,   AS_IS, AS_IS)

/* ---- Dispatch table ---------------------------------------------------------- */

#define LOGICAL_ROW(tag)                                                         \
    [FOLD_OP_LAND] = kernel_##tag##_land, [FOLD_OP_LOR] = kernel_##tag##_lor,    \
    [FOLD_OP_LXOR] = kernel_##tag##_lxor

#define FLOAT_ROW(tag)                                                           \
    {                                                                            \
        [FOLD_OP_SUM] = kernel_##tag##_sum, [FOLD_OP_PROD] = kernel_##tag##_prod, \
        [FOLD_OP_MIN] = kernel_##tag##_min, [FOLD_OP_MAX] = kernel_##tag##_max,  \
        LOGICAL_ROW(tag)                                                         \
    }

/* Integer rows add the bitwise ops; float rows leave them NULL (invalid). */
#define INTEGER_ROW(tag)                                                         \
    {                                                                            \
        [FOLD_OP_SUM] = kernel_##tag##_sum, [FOLD_OP_PROD] = kernel_##tag##_prod, \
        [FOLD_OP_MIN] = kernel_##tag##_min, [FOLD_OP_MAX] = kernel_##tag##_max,  \
        [FOLD_OP_BAND] = kernel_##tag##_band, [FOLD_OP_BOR] = kernel_##tag##_bor, \
        [FOLD_OP_BXOR] = kernel_##tag##_bxor, LOGICAL_ROW(tag)                   \
    }

static const kernel_fn kernels[FOLD_DTYPE_COUNT][FOLD_OP_PREDEFINED_COUNT] = {
    [FOLD_INT8]     = INTEGER_ROW(int8),    [FOLD_INT16]    = INTEGER_ROW(int16),
    [FOLD_INT32]    = INTEGER_ROW(int32),   [FOLD_INT64]    = INTEGER_ROW(int64),
    [FOLD_UINT8]    = INTEGER_ROW(uint8),   [FOLD_UINT16]   = INTEGER_ROW(uint16),
    [FOLD_UINT32]   = INTEGER_ROW(uint32),  [FOLD_UINT64]   = INTEGER_ROW(uint64),
    [FOLD_FLOAT16]  = FLOAT_ROW(float16),   [FOLD_BFLOAT16] = FLOAT_ROW(bfloat16),
    [FOLD_FLOAT32]  = FLOAT_ROW(float32),   [FOLD_FLOAT64]  = FLOAT_ROW(float64),
};

static int dtype_is_known(fold_dtype_t dtype)
{
    return (int)dtype >= 0 && dtype < FOLD_DTYPE_COUNT;
}

static int op_is_predefined(fold_op_t op)
{
    return (int)op >= 0 && op < FOLD_OP_PREDEFINED_COUNT;
}

int fold_op_dtype_valid(fold_op_t op, fold_dtype_t dtype)
{
    if (!dtype_is_known(dtype)) {
        return 0;
    }
    if (op_is_predefined(op)) {
        return kernels[dtype][op] != NULL;
    }
    fold_user_op_fn fn;
    void *arg;
    int commutative;
    return fold_user_op_lookup(op, &fn, &arg, &commutative) == FOLD_OK;
}

/* ---- Threaded split ---------------------------------------------------------- */

#define CACHE_LINE 64

/* Runs the kernel over nthreads contiguous chunks. Chunk boundaries fall on dst
 * cache-line boundaries (when dst is element-aligned), so no two threads write
 * the same line. */
static void run_threaded(kernel_fn kernel, size_t elem_size, const char *left,
                         const char *right, char *dst, size_t count, int nthreads)
{
    size_t line = CACHE_LINE / elem_size;
    size_t skew = ((uintptr_t)dst / elem_size) % line;   /* elements past a line start */
    size_t per_thread = (count + skew + (size_t)nthreads - 1) / (size_t)nthreads;
    size_t chunk = (per_thread + line - 1) / line * line;

#ifdef _OPENMP
#pragma omp parallel for num_threads(nthreads) schedule(static)
#endif
    for (int t = 0; t < nthreads; t++) {
        size_t begin = (size_t)t * chunk;
        size_t end = begin + chunk;
        begin = begin > skew ? begin - skew : 0;
        end = end - skew < count ? end - skew : count;
        if (begin < end) {
            size_t off = begin * elem_size;
            kernel(left + off, right + off, dst + off, end - begin);
        }
    }
}

/* ---- User ops ---------------------------------------------------------------- */

/* Bounded scratch for the one case that needs it (see reduce_user). */
#define USER_TMP_BYTES (16 * 1024)

/* A user fn computes inout = in op inout with `in` the left (lower-rank) operand,
 * so the right operand must sit in the buffer the fn writes. */
static void reduce_user(fold_user_op_fn fn, void *arg, int commutative,
                        fold_dtype_t dtype, const char *left, const char *right,
                        char *dst, size_t count)
{
    size_t elem_size = fold_dtype_size(dtype);

    if (dst == right && dst != left) {
        fn(left, dst, count, dtype, arg);
        return;
    }
    if (dst != left) {
        memcpy(dst, right, count * elem_size);
        fn(left, dst, count, dtype, arg);
        return;
    }
    if (commutative && right != dst) {
        fn(right, dst, count, dtype, arg);   /* right op left == left op right */
        return;
    }
    /* dst is left and the order matters (or left, right and dst are one buffer):
     * stage the right operand in chunks so the fn never sees aliased arguments. */
    _Alignas(CACHE_LINE) char tmp[USER_TMP_BYTES];
    size_t chunk = USER_TMP_BYTES / elem_size;
    for (size_t done = 0; done < count; done += chunk) {
        size_t n = count - done < chunk ? count - done : chunk;
        size_t off = done * elem_size;
        memcpy(tmp, right + off, n * elem_size);
        fn(left + off, tmp, n, dtype, arg);
        memcpy(dst + off, tmp, n * elem_size);
    }
}

/* ---- Entry point ------------------------------------------------------------- */

int fold_reduce_local(fold_op_t op, fold_dtype_t dtype, const void *left,
                      const void *right, void *dst, size_t count,
                      int nthreads, size_t thread_threshold)
{
    if (!dtype_is_known(dtype)) {
        fold_error("reduce: unknown datatype %d", (int)dtype);
        return FOLD_ERR_INVALID_ARG;
    }
    if (count > 0 && (left == NULL || right == NULL || dst == NULL)) {
        fold_error("reduce: NULL buffer for %zu elements", count);
        return FOLD_ERR_INVALID_ARG;
    }

    if (!op_is_predefined(op)) {
        fold_user_op_fn fn;
        void *arg;
        int commutative;
        if (fold_user_op_lookup(op, &fn, &arg, &commutative) != FOLD_OK) {
            fold_error("reduce: unknown op %d", (int)op);
            return FOLD_ERR_INVALID_ARG;
        }
        if (count > 0) {
            reduce_user(fn, arg, commutative, dtype, left, right, dst, count);
        }
        return FOLD_OK;
    }

    kernel_fn kernel = kernels[dtype][op];
    if (kernel == NULL) {
        fold_error("reduce: op %s is not defined on %s", fold_op_name(op),
                   fold_dtype_name(dtype));
        return FOLD_ERR_INVALID_ARG;
    }

    size_t elem_size = fold_dtype_size(dtype);
    if (nthreads > 1 && count * elem_size >= thread_threshold && count >= (size_t)nthreads) {
        run_threaded(kernel, elem_size, left, right, dst, count, nthreads);
    } else if (count > 0) {
        kernel(left, right, dst, count);
    }
    return FOLD_OK;
}
