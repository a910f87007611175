/*
 * Local reductions whose stores do not fetch the destination's lines first.
 *
 * Into shared memory (fold_reduce_local_shared): a reduction into the node segment
 * writes lines another core read last (the previous call's readers of this slot)
 * and will read next. With the kernel's plain stores each line is first fetched for
 * ownership from that core's cache, which with two cores that share no L3 takes
 * several times the reduction itself and puts every algorithm through the segment
 * behind Open MPI. memcpy's string stores take whole lines without that fetch, so
 * the result is folded into a block that stays in L1 and copied out from there: that
 * costs a fraction of the fetch, and nothing where the cores share their cache. The
 * cores probe (node/probe.c) times this very path for the cost model.
 *
 * Streamed to memory: dst = left op right with
 * non-temporal stores, which write whole cache lines without first reading them
 * (no read for ownership) and leave the caches to the inputs. For a result that is
 * larger than the cache and not read again by the call, that is one memory stream
 * of four saved, and a large reduce takes a good part less time. In cache it is
 * slower: the executor streams only a call's large results, where the calibration
 * found it faster (calibrate.c, exec.c).
 *
 * Only the ops whose vector form is the same IEEE or integer operation as the
 * ordinary kernel's, so that the bits agree: sum and product, and the bitwise ops
 * on integers. Integers are added and multiplied as unsigned (wrapping, as the
 * ordinary kernels do). Float min and max (NaN and signed-zero rules), the logical
 * ops, the half types, the pairs and user ops take the ordinary kernels.
 */
#include "reduce_kernel.h"

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target)
#define HAVE_STREAM_KERNELS 1
#endif
#endif

#ifdef HAVE_STREAM_KERNELS
#include <immintrin.h>

#define STREAM_TARGET __attribute__((target("avx2")))
#define VEC_BYTES 32

typedef void (*stream_fn)(const void *left, const void *right, void *dst, void *also,
                          size_t count);

/* The vector loop of one kernel, storing each line with vmovntdq into dst and, where
 * ALSO is 1, into also too (two loops, not a test per line: a single destination's
 * loop ran 8-13% slower with one). */
#define STREAM_LINES(ctype, expr, ALSO)                                             \
    for (; i + 2 * lanes <= count; i += 2 * lanes) {                                 \
        vec_t x0, y0, x1, y1;                                                        \
        memcpy(&x0, a + i, VEC_BYTES);                                               \
        memcpy(&y0, b + i, VEC_BYTES);                                               \
        memcpy(&x1, a + i + lanes, VEC_BYTES);                                       \
        memcpy(&y1, b + i + lanes, VEC_BYTES);                                       \
        vec_t r0, r1;                                                                \
        {                                                                            \
            vec_t x = x0, y = y0;                                                    \
            r0 = (expr);                                                             \
        }                                                                            \
        {                                                                            \
            vec_t x = x1, y = y1;                                                    \
            r1 = (expr);                                                             \
        }                                                                            \
        _mm256_stream_si256((__m256i *)(void *)(c + i), (__m256i)r0);                \
        _mm256_stream_si256((__m256i *)(void *)(c + i + lanes), (__m256i)r1);        \
        if (ALSO) {                                                                  \
            _mm256_stream_si256((__m256i *)(void *)(d + i), (__m256i)r0);            \
            _mm256_stream_si256((__m256i *)(void *)(d + i + lanes), (__m256i)r1);    \
        }                                                                            \
    }

/* One kernel: dst = left op right and, unless also is NULL, also = the same (the two
 * alike modulo 32 bytes): a head of single elements until they are 32-byte aligned,
 * then two vectors (one cache line) per step, streamed, then the tail. The vector
 * type's loads go through memcpy: the inputs need not be aligned. */
#define STREAM_KERNEL(name, ctype, expr)                                            \
    STREAM_TARGET static void stream_##name(const void *left, const void *right,     \
                                            void *dst, void *also, size_t count)     \
    {                                                                                \
        typedef ctype vec_t __attribute__((vector_size(VEC_BYTES)));                 \
        const size_t lanes = VEC_BYTES / sizeof(ctype);                              \
        const ctype *a = left, *b = right;                                           \
        ctype *c = dst, *d = also;                                                   \
        size_t i = 0;                                                                \
        for (; i < count && ((uintptr_t)(c + i) & (VEC_BYTES - 1)) != 0; i++) {      \
            ctype x = a[i], y = b[i];                                                \
            c[i] = (ctype)(expr);                                                    \
            if (d != NULL) {                                                         \
                d[i] = c[i];                                                         \
            }                                                                        \
        }                                                                            \
        if (d != NULL) {                                                             \
            STREAM_LINES(ctype, expr, 1)                                             \
        } else {                                                                     \
            STREAM_LINES(ctype, expr, 0)                                             \
        }                                                                            \
        for (; i < count; i++) {                                                     \
            ctype x = a[i], y = b[i];                                                \
            c[i] = (ctype)(expr);                                                    \
            if (d != NULL) {                                                         \
                d[i] = c[i];                                                         \
            }                                                                        \
        }                                                                            \
    }

#define ARITH_KERNELS(tag, ctype)                \
    STREAM_KERNEL(tag##_sum, ctype, x + y)       \
    STREAM_KERNEL(tag##_prod, ctype, x * y)

#define BITWISE_KERNELS(tag, ctype)              \
    ARITH_KERNELS(tag, ctype)                    \
    STREAM_KERNEL(tag##_band, ctype, x & y)      \
    STREAM_KERNEL(tag##_bor, ctype, x | y)       \
    STREAM_KERNEL(tag##_bxor, ctype, x ^ y)

ARITH_KERNELS(float32, float)
ARITH_KERNELS(float64, double)
BITWISE_KERNELS(u8, uint8_t)
BITWISE_KERNELS(u16, uint16_t)
BITWISE_KERNELS(u32, uint32_t)
BITWISE_KERNELS(u64, uint64_t)

/* A complex sum is the float sum over twice the count. */
static void stream_cfloat32_sum(const void *l, const void *r, void *d, void *also, size_t n)
{
    stream_float32_sum(l, r, d, also, 2 * n);
}

static void stream_cfloat64_sum(const void *l, const void *r, void *d, void *also, size_t n)
{
    stream_float64_sum(l, r, d, also, 2 * n);
}

#define INTEGER_ROW(tag)                                                          \
    {                                                                             \
        [FOLD_OP_SUM] = stream_##tag##_sum, [FOLD_OP_PROD] = stream_##tag##_prod, \
        [FOLD_OP_BAND] = stream_##tag##_band, [FOLD_OP_BOR] = stream_##tag##_bor, \
        [FOLD_OP_BXOR] = stream_##tag##_bxor,                                     \
    }

static const stream_fn stream_kernels[FOLD_DTYPE_COUNT][FOLD_OP_PREDEFINED_COUNT] = {
    [FOLD_INT8] = INTEGER_ROW(u8),     [FOLD_UINT8] = INTEGER_ROW(u8),
    [FOLD_INT16] = INTEGER_ROW(u16),   [FOLD_UINT16] = INTEGER_ROW(u16),
    [FOLD_INT32] = INTEGER_ROW(u32),   [FOLD_UINT32] = INTEGER_ROW(u32),
    [FOLD_INT64] = INTEGER_ROW(u64),   [FOLD_UINT64] = INTEGER_ROW(u64),
    [FOLD_FLOAT32] = {[FOLD_OP_SUM] = stream_float32_sum, [FOLD_OP_PROD] = stream_float32_prod},
    [FOLD_FLOAT64] = {[FOLD_OP_SUM] = stream_float64_sum, [FOLD_OP_PROD] = stream_float64_prod},
    [FOLD_COMPLEX_FLOAT32] = {[FOLD_OP_SUM] = stream_cfloat32_sum},
    [FOLD_COMPLEX_FLOAT64] = {[FOLD_OP_SUM] = stream_cfloat64_sum},
};

/* memcpy with streaming stores: a head of bytes until dst is aligned, a cache line
 * per step, the tail. */
STREAM_TARGET static void stream_copy(void *dst, const void *src, size_t bytes)
{
    char *d = dst;
    const char *s = src;
    size_t i = 0;
    size_t head = (VEC_BYTES - ((uintptr_t)d & (VEC_BYTES - 1))) & (VEC_BYTES - 1);
    head = head < bytes ? head : bytes;
    memcpy(d, s, head);
    for (i = head; i + 2 * VEC_BYTES <= bytes; i += 2 * VEC_BYTES) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + VEC_BYTES));
        _mm256_stream_si256((__m256i *)(void *)(d + i), x0);
        _mm256_stream_si256((__m256i *)(void *)(d + i + VEC_BYTES), x1);
    }
    memcpy(d + i, s + i, bytes - i);
}

static stream_fn stream_kernel(fold_op_t op, fold_dtype_t dtype)
{
    if ((unsigned)dtype >= FOLD_DTYPE_COUNT || (unsigned)op >= FOLD_OP_PREDEFINED_COUNT ||
        !__builtin_cpu_supports("avx2")) {
        return NULL;
    }
    return stream_kernels[dtype][op];
}
#endif

int fold_reduce_stream_available(fold_op_t op, fold_dtype_t dtype)
{
#ifdef HAVE_STREAM_KERNELS
    return stream_kernel(op, dtype) != NULL;
#else
    (void)op;
    (void)dtype;
    return 0;
#endif
}

void fold_copy_stream(void *dst, const void *src, size_t bytes)
{
#ifdef HAVE_STREAM_KERNELS
    if (__builtin_cpu_supports("avx2")) {
        stream_copy(dst, src, bytes);
        _mm_sfence();
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

#define SHARED_BOUNCE_BYTES 8192

/* glibc's memcpy takes its string stores (rep movsb) only below
 * x86_rep_movsb_stop_threshold, the L2's size on AMD; above, its vector loop fetches
 * every line first, which runs copies of 1 MiB into the segment at less than half
 * the rate of smaller ones and makes large reduces through dpml much slower. */
#define SHARED_COPY_PIECE ((size_t)256 << 10)

void fold_copy_shared(void *dst, const void *src, size_t bytes)
{
    for (size_t done = 0; done < bytes; done += SHARED_COPY_PIECE) {
        size_t n = bytes - done < SHARED_COPY_PIECE ? bytes - done : SHARED_COPY_PIECE;
        memcpy((char *)dst + done, (const char *)src + done, n);
    }
}

typedef void (*copy_fn)(void *dst, const void *src, size_t bytes);

static void copy_plain(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

/* dsts[k] = left op right for every k < ndst, block by block through an L1 block that
 * copy takes out to each (esize checked by the caller): the ordinary kernel's bits, each
 * destination written once, and a block's operands read before any destination is
 * written, so that a destination may be an operand exactly. */
static int reduce_through_bounce(fold_op_t op, fold_dtype_t dtype, const void *left,
                                 const void *right, void *const *dsts, int ndst, size_t count,
                                 copy_fn copy)
{
    const size_t esize = fold_dtype_size(dtype);
    _Alignas(64) char bounce[SHARED_BOUNCE_BYTES];
    const size_t per = SHARED_BOUNCE_BYTES / esize;
    for (size_t done = 0; done < count; done += per) {
        size_t n = count - done < per ? count - done : per, off = done * esize;
        int status = fold_reduce_local(op, dtype, (const char *)left + off,
                                       (const char *)right + off, bounce, n, 1, SIZE_MAX);
        if (status != FOLD_OK) {
            return status;
        }
        for (int k = 0; k < ndst; k++) {
            copy((char *)dsts[k] + off, bounce, n * esize);
        }
    }
    return FOLD_OK;
}

int fold_reduce_local_shared(fold_op_t op, fold_dtype_t dtype, const void *left,
                             const void *right, void *dst, size_t count)
{
    return fold_reduce_local_shared_also(op, dtype, left, right, dst, NULL, count);
}

int fold_reduce_local_shared_also(fold_op_t op, fold_dtype_t dtype, const void *left,
                                  const void *right, void *dst, void *also, size_t count)
{
    size_t esize = fold_dtype_size(dtype);
    if (esize == 0 || esize > SHARED_BOUNCE_BYTES || count * esize <= SHARED_BOUNCE_BYTES) {
        int status = fold_reduce_local(op, dtype, left, right, dst, count, 1, SIZE_MAX);
        if (status == FOLD_OK && also != NULL && count > 0) {
            memcpy(also, dst, count * esize);   /* from L1, where it was just written */
        }
        return status;
    }
    void *const dsts[2] = {dst, also};
    return reduce_through_bounce(op, dtype, left, right, dsts, also != NULL ? 2 : 1, count,
                                 copy_plain);
}

int fold_reduce_local_rows(fold_op_t op, fold_dtype_t dtype, const void *const *rows, int nrows,
                           void *dst, void *also, size_t count, int how)
{
    size_t esize = fold_dtype_size(dtype);
    if (nrows < 2 || esize == 0 || esize > SHARED_BOUNCE_BYTES) {
        return FOLD_ERR_INVALID_ARG;
    }
    /* One block into a buffer of this core's is its own L1 block: no copy out of a
     * bounce. */
    const int in_dst = how == FOLD_ROWS_PRIVATE && also == NULL &&
                       count * esize <= SHARED_BOUNCE_BYTES;
    _Alignas(64) char bounce[SHARED_BOUNCE_BYTES];
    void *acc = in_dst ? dst : bounce;
    const size_t per = SHARED_BOUNCE_BYTES / esize;
    for (size_t done = 0; done < count; done += per) {
        size_t n = count - done < per ? count - done : per, off = done * esize;
        int status = fold_reduce_local(op, dtype, (const char *)rows[0] + off,
                                       (const char *)rows[1] + off, acc, n, 1, SIZE_MAX);
        for (int r = 2; r < nrows && status == FOLD_OK; r++) {
            status = fold_reduce_local(op, dtype, acc, (const char *)rows[r] + off, acc, n, 1,
                                       SIZE_MAX);
        }
        if (status != FOLD_OK || in_dst) {
            return status;
        }
        if (how == FOLD_ROWS_STREAM) {
            fold_copy_stream((char *)dst + off, bounce, n * esize);
        } else {
            memcpy((char *)dst + off, bounce, n * esize);
        }
        if (also != NULL) {
            memcpy((char *)also + off, bounce, n * esize);
        }
    }
    return FOLD_OK;
}

int fold_reduce_local_stream(fold_op_t op, fold_dtype_t dtype, const void *left,
                             const void *right, void *dst, size_t count)
{
    return fold_reduce_local_stream_to(op, dtype, left, right, &dst, 1, count);
}

#ifdef HAVE_STREAM_KERNELS
/* Whether every destination lies at the first's offset within a vector, so that one
 * head of single elements aligns them all. */
static int dsts_alike(void *const *dsts, int ndst)
{
    for (int k = 1; k < ndst; k++) {
        if ((((uintptr_t)dsts[k] ^ (uintptr_t)dsts[0]) & (VEC_BYTES - 1)) != 0) {
            return 0;
        }
    }
    return 1;
}
#endif

int fold_reduce_local_stream_to(fold_op_t op, fold_dtype_t dtype, const void *left,
                                const void *right, void *const *dsts, int ndst, size_t count)
{
    if (ndst < 1 || left == NULL || right == NULL || dsts[0] == NULL) {
        return ndst < 1 || count == 0 ? FOLD_OK : FOLD_ERR_INVALID_ARG;
    }
#ifdef HAVE_STREAM_KERNELS
    stream_fn fn = stream_kernel(op, dtype);
    if (fn != NULL && ndst <= 2 && dsts_alike(dsts, ndst)) {
        fn(left, right, dsts[0], ndst > 1 ? dsts[1] : NULL, count);
        _mm_sfence();   /* the streamed lines are visible before any flag that follows */
        return FOLD_OK;
    }
#endif
    if (ndst == 1) {
        return fold_reduce_local(op, dtype, left, right, dsts[0], count, 1, SIZE_MAX);
    }
    /* Through an L1 block, copied out to each destination (streamed where it can): a
     * destination may be an operand (in place), as it may not be for a second pass. */
    const size_t esize = fold_dtype_size(dtype);
    if (esize == 0 || esize > SHARED_BOUNCE_BYTES) {
        return FOLD_ERR_INVALID_ARG;
    }
    return reduce_through_bounce(op, dtype, left, right, dsts, ndst, count, fold_copy_stream);
}
