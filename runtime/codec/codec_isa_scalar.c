/*
 * The codec kernels in portable C: the reference the vector builds must match
 * byte for byte, and what runs on CPUs without AVX2. One element at a time,
 * elements loaded as integers (memcpy) so no NaN ever passes through a float
 * register except in the float sum itself, which is the same IEEE addition
 * fold_reduce_local performs.
 */
#include "codec/codec_impl.h"

/* Generic helpers shared by the scalar builds of both widths. */
static inline size_t popcount64(uint64_t x)
{
    return (size_t)__builtin_popcountll(x);
}

#define SCALAR_WIDTH(W, T, MARK)                                                        \
    static inline T ld##W(const unsigned char *p, size_t i)                           \
    {                                                                                  \
        T v;                                                                           \
        memcpy(&v, p + i * sizeof(T), sizeof(T));                                      \
        return v;                                                                      \
    }                                                                                  \
                                                                                       \
    static inline void st##W(unsigned char *p, size_t i, T v)                         \
    {                                                                                  \
        memcpy(p + i * sizeof(T), &v, sizeof(T));                                      \
    }                                                                                  \
                                                                                       \
    static size_t scan##W(const void *x, size_t len, uint64_t *nz, int nans)          \
    {                                                                                  \
        const unsigned char *p = x;                                                    \
        size_t marks = 0;                                                              \
        memset(nz, 0, (len + 63) / 64 * sizeof(uint64_t));                              \
        for (size_t i = 0; i < len; i++) {                                             \
            T u = ld##W(p, i);                                                         \
            nz[i / 64] |= (uint64_t)(u != 0) << (i % 64);                              \
            marks += u > (T)MARK;                                                      \
        }                                                                              \
        return nans ? marks : 0;                                                       \
    }                                                                                  \
                                                                                       \
    static size_t compress##W(const void *x, size_t len, const uint64_t *nz, void *dst, \
                              size_t room)                                             \
    {                                                                                  \
        const unsigned char *p = x;                                                    \
        unsigned char *d = dst;                                                        \
        size_t k = 0;                                                                  \
        (void)room;                                                                    \
        for (size_t w = 0; w * 64 < len; w++) {                                        \
            for (uint64_t bits = nz[w]; bits != 0; bits &= bits - 1) {                 \
                st##W(d, k++, ld##W(p, w * 64 + (size_t)__builtin_ctzll(bits)));       \
            }                                                                          \
        }                                                                              \
        return k;                                                                      \
    }                                                                                  \
                                                                                       \
    static size_t expand##W(const void *src, size_t avail, size_t len, const uint64_t *nz, \
                            void *out)                                                 \
    {                                                                                  \
        const unsigned char *s = src;                                                  \
        unsigned char *o = out;                                                        \
        size_t k = 0;                                                                  \
        (void)avail;                                                                   \
        for (size_t i = 0; i < len; i++) {                                             \
            T v = 0;                                                                   \
            if ((nz[i / 64] >> (i % 64)) & 1) {                                        \
                v = ld##W(s, k++);                                                     \
            }                                                                          \
            st##W(o, i, v);                                                            \
        }                                                                              \
        return k;                                                                      \
    }                                                                                  \
                                                                                       \
    static size_t find_marker##W(const void *s, size_t avail)                          \
    {                                                                                  \
        const unsigned char *p = s;                                                    \
        for (size_t i = 0; i < avail; i++) {                                           \
            if (ld##W(p, i) > (T)MARK) {                                               \
                return i;                                                              \
            }                                                                          \
        }                                                                              \
        return avail;                                                                  \
    }

SCALAR_WIDTH(32, uint32_t, CODEC_MARK32)
SCALAR_WIDTH(64, uint64_t, CODEC_MARK64)

/* One reduce kernel: out = EXPR(a, b) over integers of type T, bitmap of out. */
#define SCALAR_REDUCE(W, T, name, EXPR, COUNT_MARKS)                                   \
    static size_t reduce##W##_##name(const void *av, const void *bv, void *outv,       \
                                     size_t len, uint64_t *nz)                         \
    {                                                                                  \
        const unsigned char *pa = av, *pb = bv;                                        \
        unsigned char *po = outv;                                                      \
        size_t marks = 0;                                                              \
        memset(nz, 0, (len + 63) / 64 * sizeof(uint64_t));                              \
        for (size_t i = 0; i < len; i++) {                                             \
            T a = ld##W(pa, i), b = ld##W(pb, i);                                      \
            T r = EXPR;                                                                \
            st##W(po, i, r);                                                           \
            nz[i / 64] |= (uint64_t)(r != 0) << (i % 64);                              \
            if (COUNT_MARKS) {                                                         \
                marks += r > (T)(W == 32 ? CODEC_MARK32 : CODEC_MARK64);                \
            }                                                                          \
        }                                                                              \
        return marks;                                                                  \
    }

static inline uint32_t fsum32(uint32_t a, uint32_t b)
{
    if ((a & 0x7fffffffu) > 0x7f800000u) {
        return a | 0x00400000u;   /* a NaN: a's payload, quiet (see codec_impl.h) */
    }
    float x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    x = x + y;
    memcpy(&a, &x, 4);
    return a;
}

static inline uint64_t fsum64(uint64_t a, uint64_t b)
{
    if ((a & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) {
        return a | 0x0008000000000000ull;
    }
    double x, y;
    memcpy(&x, &a, 8);
    memcpy(&y, &b, 8);
    x = x + y;
    memcpy(&a, &x, 8);
    return a;
}

SCALAR_REDUCE(32, uint32_t, fsum, fsum32(a, b), 1)
SCALAR_REDUCE(32, uint32_t, isum, (uint32_t)(a + b), 0)
SCALAR_REDUCE(32, uint32_t, bor, a | b, 0)
SCALAR_REDUCE(32, uint32_t, bxor, a ^ b, 0)
SCALAR_REDUCE(32, uint32_t, lor, (uint32_t)((a != 0) | (b != 0)), 0)
SCALAR_REDUCE(64, uint64_t, fsum, fsum64(a, b), 1)
SCALAR_REDUCE(64, uint64_t, isum, a + b, 0)
SCALAR_REDUCE(64, uint64_t, bor, a | b, 0)
SCALAR_REDUCE(64, uint64_t, bxor, a ^ b, 0)
SCALAR_REDUCE(64, uint64_t, lor, (uint64_t)((a != 0) | (b != 0)), 0)

static size_t popcount_words(const void *p, size_t words)
{
    const unsigned char *b = p;
    size_t c = 0;
    for (size_t i = 0; i < words; i++) {
        c += popcount64(codec_ld64(b + i * 8));
    }
    return c;
}

/* Zero elements whose predecessor is non-zero, over the block's bitmap. */
static size_t run_starts(const uint64_t *nz, size_t len, int *prev_zero)
{
    size_t starts = 0;
    uint64_t carry = (uint64_t)(*prev_zero != 0);
    for (size_t w = 0; w * 64 < len; w++) {
        size_t bits = codec_min(64, len - w * 64);
        uint64_t valid = bits == 64 ? ~0ull : (1ull << bits) - 1;
        uint64_t z = ~nz[w] & valid;
        starts += popcount64(z & ~((z << 1) | carry));
        carry = (z >> (bits - 1)) & 1;
    }
    if (len > 0) {
        *prev_zero = (int)carry;
    }
    return starts;
}

#define SCALAR_TABLE(W)                                                                \
    {                                                                                  \
        .scan = scan##W,                                                               \
        .reduce = {                                                                    \
            [CODEC_OPK_FSUM] = reduce##W##_fsum, [CODEC_OPK_ISUM] = reduce##W##_isum,  \
            [CODEC_OPK_BOR] = reduce##W##_bor,   [CODEC_OPK_BXOR] = reduce##W##_bxor,  \
            [CODEC_OPK_LOR] = reduce##W##_lor,                                         \
        },                                                                             \
        .compress = compress##W, .expand = expand##W, .find_marker = find_marker##W,   \
        .popcount = popcount_words, .run_starts = run_starts,                          \
    }

const codec_kernels_t codec_kernels_scalar[2] = {SCALAR_TABLE(32), SCALAR_TABLE(64)};
