/*
 * Local reduction: dst = left op right, elementwise. This is the hot loop of every
 * collective, so each (datatype, op) pair gets its own plain indexed loop that
 * GCC -O3 vectorises. The loops carry no `restrict`: dst may be left or right,
 * and GCC's runtime alias check still takes the vector path when dst is exactly
 * one of them (only a partial overlap, which the contract forbids, would not).
 * float16/bfloat16 go through float32 a block at a time. Large buffers are split
 * into contiguous, cache-line-aligned chunks, one per OpenMP thread, each running
 * the same serial loop (Shan et al., sec. III). User ops always run serially: a
 * user function need not be thread-safe.
 */
#include "reduce_kernel.h"
#include "reduce_impl.h"
#include "log.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_F16C_PATH 1   /* float16 conversions by F16C when the CPU has it */
#endif

typedef fold_kernel_fn kernel_fn;

#define CACHE_LINE 64

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

/* One loop per (datatype, op): d[i] = expr over a = l[i], b = r[i]. */
#define KERNEL(tag, T, name, expr)                                               \
    VECTOR_CLONES                                                                \
    static void kernel_##tag##_##name(const void *left, const void *right,      \
                                      void *dst, size_t count)                  \
    {                                                                            \
        const T *l = left;                                                       \
        const T *r = right;                                                      \
        T *d = dst;                                                              \
        for (size_t i = 0; i < count; i++) {                                     \
            T a = l[i];                                                          \
            T b = r[i];                                                          \
            d[i] = expr;                                                         \
        }                                                                        \
    }

/* Logical ops: nonzero is true and the result is 1 or 0. For integers, bit
 * (width - 1) of x | -x is set exactly when x != 0; taking the truth value from it
 * instead of from `x != 0` lets 64-bit types vectorise on baseline x86-64, which
 * has no 64-bit vector compare. */
#define TRUTH(U, x) ((((U)(x)) | (0u - (U)(x))) >> (sizeof(U) * 8 - 1))

/* Integers: sum and prod go through the unsigned type U (at least unsigned int,
 * so narrow types never promote to a signed int that could overflow) and wrap
 * modulo 2^bits. */
#define INTEGER_KERNELS(tag, T, U)                                               \
    KERNEL(tag, T, sum,  (T)((U)a + (U)b))                                       \
    KERNEL(tag, T, prod, (T)((U)a * (U)b))                                       \
    KERNEL(tag, T, min,  a < b ? a : b)                                          \
    KERNEL(tag, T, max,  a > b ? a : b)                                          \
    KERNEL(tag, T, band, (T)(a & b))                                             \
    KERNEL(tag, T, bor,  (T)(a | b))                                             \
    KERNEL(tag, T, bxor, (T)(a ^ b))                                             \
    KERNEL(tag, T, land, (T)(TRUTH(U, a) & TRUTH(U, b)))                         \
    KERNEL(tag, T, lor,  (T)(TRUTH(U, a) | TRUTH(U, b)))                         \
    KERNEL(tag, T, lxor, (T)(TRUTH(U, a) ^ TRUTH(U, b)))

/* Floats: for the logical ops a NaN is true and -0 is false; 1.0 or 0.0 out. */
#define FLOAT_KERNELS(tag, T)                                                    \
    KERNEL(tag, T, sum,  a + b)                                                  \
    KERNEL(tag, T, prod, a * b)                                                  \
    KERNEL(tag, T, min,  tag##_min(a, b))                                        \
    KERNEL(tag, T, max,  tag##_max(a, b))                                        \
    KERNEL(tag, T, land, ((a != 0) & (b != 0)) ? (T)1 : (T)0)                    \
    KERNEL(tag, T, lor,  ((a != 0) | (b != 0)) ? (T)1 : (T)0)                    \
    KERNEL(tag, T, lxor, ((a != 0) ^ (b != 0)) ? (T)1 : (T)0)

INTEGER_KERNELS(int8,   int8_t,   unsigned)
INTEGER_KERNELS(int16,  int16_t,  unsigned)
INTEGER_KERNELS(int32,  int32_t,  uint32_t)
INTEGER_KERNELS(int64,  int64_t,  uint64_t)
INTEGER_KERNELS(uint8,  uint8_t,  unsigned)
INTEGER_KERNELS(uint16, uint16_t, unsigned)
INTEGER_KERNELS(uint32, uint32_t, uint32_t)
INTEGER_KERNELS(uint64, uint64_t, uint64_t)
FLOAT_KERNELS(float32,  float)
FLOAT_KERNELS(float64,  double)

/* ---- float16 / bfloat16 -------------------------------------------------------
 * fold.h: each step widens both operands to float32, applies the op and rounds
 * back. Done a block at a time: widen a block of each operand into float32
 * scratch (L1-resident), run the float32 kernel, narrow into dst. Both operand
 * blocks are read before dst is written, so dst may alias either. */

#define WIDE_BLOCK 1024   /* elements: two float32 blocks = 8 KiB of stack */

typedef void (*widen_fn)(const uint16_t *src, float *dst, size_t count);
typedef void (*narrow_fn)(const float *src, uint16_t *dst, size_t count);

static void widen_half(const uint16_t *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        dst[i] = fold_half_to_float(src[i]);
    }
}

static void narrow_half(const float *src, uint16_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        dst[i] = fold_float_to_half(src[i]);
    }
}

/* The bfloat16 loops spell out fold_bf16_to_float / fold_float_to_bf16 (half.c)
 * with masks instead of branches, so that GCC vectorises them; the out-of-line
 * calls would cost ~20x. The results are bit-identical, NaNs included (checked
 * over every float32 input). */
VECTOR_CLONES
static void widen_bf16(const uint16_t *src, float *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        uint32_t nan = 0u - (uint32_t)((int32_t)(u & 0x7fffffffu) > 0x7f800000);
        u |= nan & 0x00400000u;   /* quiet */
        memcpy(&dst[i], &u, sizeof(u));
    }
}

VECTOR_CLONES
static void narrow_bf16(const float *src, uint16_t *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof(u));
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;   /* nearest, ties even */
        uint32_t quiet_nan = (u >> 16) | 0x0040u;
        uint32_t nan = 0u - (uint32_t)((int32_t)(u & 0x7fffffffu) > 0x7f800000);
        dst[i] = (uint16_t)((quiet_nan & nan) | (rounded & ~nan));
    }
}

#ifdef HAVE_F16C_PATH
/* F16C converts eight values per instruction. Its results are bit-identical to
 * half.c (checked over every float32 and every float16 input, NaNs included), and
 * the rounding is fixed to nearest-even in the instruction, whatever MXCSR says.
 * Tails go through half.c. */
__attribute__((target("avx,f16c")))
static void widen_half_f16c(const uint16_t *src, float *dst, size_t count)
{
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    widen_half(src + i, dst + i, count - i);
}

__attribute__((target("avx,f16c")))
static void narrow_half_f16c(const float *src, uint16_t *dst, size_t count)
{
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    narrow_half(src + i, dst + i, count - i);
}

/* F16C from cpuid: clang before 15 knows no "f16c" for __builtin_cpu_supports, and
 * the fuzzers (tests/fuzz) build this file with clang 14. */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#else
#define widen_half_f16c  widen_half
#define narrow_half_f16c narrow_half
static int cpu_has_f16c(void)
{
    return 0;
}
#endif

static void reduce_widened(kernel_fn kernel32, widen_fn widen, narrow_fn narrow,
                           const uint16_t *left, const uint16_t *right, uint16_t *dst,
                           size_t count)
{
    _Alignas(CACHE_LINE) float a[WIDE_BLOCK];
    _Alignas(CACHE_LINE) float b[WIDE_BLOCK];
    for (size_t done = 0; done < count; done += WIDE_BLOCK) {
        size_t n = count - done < WIDE_BLOCK ? count - done : WIDE_BLOCK;
        widen(left + done, a, n);
        widen(right + done, b, n);
        kernel32(a, b, a, n);
        narrow(a, dst + done, n);
    }
}

static void reduce_float16(kernel_fn kernel32, const void *left, const void *right,
                           void *dst, size_t count)
{
    static atomic_int f16c_state;   /* 0: not probed yet, 1: absent, 2: present */
    int state = atomic_load_explicit(&f16c_state, memory_order_relaxed);
    if (state == 0) {
        state = cpu_has_f16c() ? 2 : 1;
        atomic_store_explicit(&f16c_state, state, memory_order_relaxed);
    }
    int use_f16c = state == 2;
    reduce_widened(kernel32, use_f16c ? widen_half_f16c : widen_half,
                   use_f16c ? narrow_half_f16c : narrow_half, left, right, dst, count);
}

static void reduce_bfloat16(kernel_fn kernel32, const void *left, const void *right,
                            void *dst, size_t count)
{
    reduce_widened(kernel32, widen_bf16, narrow_bf16, left, right, dst, count);
}

#define WIDENED_KERNEL(tag, name)                                                \
    static void kernel_##tag##_##name(const void *left, const void *right,      \
                                      void *dst, size_t count)                  \
    {                                                                            \
        reduce_##tag(kernel_float32_##name, left, right, dst, count);           \
    }

#define WIDENED_KERNELS(tag)                                                     \
    WIDENED_KERNEL(tag, sum)  WIDENED_KERNEL(tag, prod) WIDENED_KERNEL(tag, min) \
    WIDENED_KERNEL(tag, max)  WIDENED_KERNEL(tag, land) WIDENED_KERNEL(tag, lor) \
    WIDENED_KERNEL(tag, lxor)

WIDENED_KERNELS(float16)
WIDENED_KERNELS(bfloat16)

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

/* Pair types take maxloc and minloc, and nothing else does (fold.h). */
#define LOC_ROW(tag)                                                             \
    {                                                                            \
        [FOLD_OP_MAXLOC] = fold_kernel_##tag##_maxloc,                           \
        [FOLD_OP_MINLOC] = fold_kernel_##tag##_minloc,                           \
    }

/* A complex sum is the float sum over the real and imaginary parts alike. */
static void kernel_complex_float32_sum(const void *left, const void *right, void *dst,
                                       size_t count)
{
    kernel_float32_sum(left, right, dst, 2 * count);
}

static void kernel_complex_float64_sum(const void *left, const void *right, void *dst,
                                       size_t count)
{
    kernel_float64_sum(left, right, dst, 2 * count);
}

#define COMPLEX_ROW(tag)                                                         \
    {                                                                            \
        [FOLD_OP_SUM] = kernel_##tag##_sum, [FOLD_OP_PROD] = fold_kernel_##tag##_prod, \
    }

static const kernel_fn kernels[FOLD_DTYPE_COUNT][FOLD_OP_PREDEFINED_COUNT] = {
    [FOLD_INT8]     = INTEGER_ROW(int8),    [FOLD_INT16]    = INTEGER_ROW(int16),
    [FOLD_INT32]    = INTEGER_ROW(int32),   [FOLD_INT64]    = INTEGER_ROW(int64),
    [FOLD_UINT8]    = INTEGER_ROW(uint8),   [FOLD_UINT16]   = INTEGER_ROW(uint16),
    [FOLD_UINT32]   = INTEGER_ROW(uint32),  [FOLD_UINT64]   = INTEGER_ROW(uint64),
    [FOLD_FLOAT16]  = FLOAT_ROW(float16),   [FOLD_BFLOAT16] = FLOAT_ROW(bfloat16),
    [FOLD_FLOAT32]  = FLOAT_ROW(float32),   [FOLD_FLOAT64]  = FLOAT_ROW(float64),
    [FOLD_FLOAT_INT] = LOC_ROW(float_int),  [FOLD_DOUBLE_INT] = LOC_ROW(double_int),
    [FOLD_LONG_INT]  = LOC_ROW(long_int),   [FOLD_2INT]       = LOC_ROW(2int),
    [FOLD_SHORT_INT] = LOC_ROW(short_int),
    [FOLD_COMPLEX_FLOAT32] = COMPLEX_ROW(complex_float32),
    [FOLD_COMPLEX_FLOAT64] = COMPLEX_ROW(complex_float64),
};

/* A predefined datatype, which the kernel table covers. */
static int dtype_is_predefined(fold_dtype_t dtype)
{
    return (int)dtype >= 0 && dtype < FOLD_DTYPE_COUNT;
}

/* A predefined or opaque datatype (fold_dtype_opaque): only user ops take the latter. */
static int dtype_is_known(fold_dtype_t dtype)
{
    return fold_dtype_size(dtype) != 0;
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
        return dtype_is_predefined(dtype) && kernels[dtype][op] != NULL;
    }
    fold_user_op_fn fn;
    void *arg;
    int commutative;
    return fold_user_op_lookup(op, &fn, &arg, &commutative) == FOLD_OK;
}

/* ---- Aligned stores ------------------------------------------------------------ */

/* Runs the kernel over the elements before dst's first cache-line boundary on their
 * own, then over the rest, whose vector stores then never straddle two lines. glibc
 * gives a buffer of 128 KiB or more 16 bytes past a page, where every other 32-byte
 * store would straddle and a sum in the L2 runs a quarter slower. Buffers from one
 * allocator share the offset, so the loads align too. */
static void run_aligned(kernel_fn kernel, size_t elem_size, const char *left,
                        const char *right, char *dst, size_t count)
{
    const size_t skew = (CACHE_LINE - (uintptr_t)dst % CACHE_LINE) % CACHE_LINE;
    const size_t head = skew / elem_size;
    if (skew % elem_size != 0 || head == 0 || count <= head + CACHE_LINE / elem_size) {
        kernel(left, right, dst, count);
        return;
    }
    const size_t off = head * elem_size;
    kernel(left, right, dst, head);
    kernel(left + off, right + off, dst + off, count - head);
}

/* ---- Threaded split ---------------------------------------------------------- */

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
            run_aligned(kernel, elem_size, left + off, right + off, dst + off, end - begin);
        }
    }
}

/* ---- User ops ---------------------------------------------------------------- */

/* Bounded scratch for the one case that needs it (see reduce_user). */
#define USER_TMP_BYTES (16 * 1024)
_Static_assert(USER_TMP_BYTES >= FOLD_OPAQUE_MAX_SIZE, "the scratch holds a whole element");

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

    kernel_fn kernel = dtype_is_predefined(dtype) ? kernels[dtype][op] : NULL;
    if (kernel == NULL) {
        fold_error("reduce: op %s is not defined on %s", fold_op_name(op),
                   fold_dtype_name(dtype));
        return FOLD_ERR_INVALID_ARG;
    }

    size_t elem_size = fold_dtype_size(dtype);
    if (nthreads > 1 && count * elem_size >= thread_threshold && count >= (size_t)nthreads) {
        run_threaded(kernel, elem_size, left, right, dst, count, nthreads);
    } else if (count > 0) {
        run_aligned(kernel, elem_size, left, right, dst, count);
    }
    return FOLD_OK;
}
