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
    static void scan##W(const void *x, size_t len, uint64_t *nz, int nans,            \
                        codec_tally_t *t_out)                                              \
    {                                                                                  \
        const unsigned char *p = x;                                                    \
        size_t marks = 0;                                                              \
        codec_tally_t tl = *t_out;                                 \
        for (size_t base = 0; base < len; base += 64) {                                \
            size_t e = codec_min(64, len - base);                                      \
            uint64_t w = 0;                                                            \
            for (size_t j = 0; j < e; j++) {                                           \
                T u = ld##W(p, base + j);                                              \
                w |= (uint64_t)(u != 0) << j;                                          \
                marks += u > (T)MARK;                                                  \
            }                                                                          \
            nz[base / 64] = w;                                                         \
            CODEC_TALLY(tl, w, e);                                                 \
        }                                                                              \
        tl.nans += nans ? marks : 0;                                                   \
        *t_out = tl;                                                              \
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
        if (avail == 0) { /* then the bitmap is empty */                              \
            memset(out, 0, len * sizeof(T));                                           \
            return 0;                                                                  \
        }                                                                              \
        for (size_t i = 0; i < len; i++) { /* branch-free: load, then mask */          \
            T bit = (T)((nz[i / 64] >> (i % 64)) & 1);                                 \
            T v = ld##W(s, k < avail ? k : avail - 1) & (T)(0 - bit);                  \
            st##W(o, i, v);                                                            \
            k += (size_t)bit;                                                          \
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
    }                                                                                  \
                                                                                       \
    static size_t copy_literals##W(const void *s, size_t avail, void *out)            \
    {                                                                                  \
        size_t i = find_marker##W(s, avail);                                           \
        memcpy(out, s, i * sizeof(T));                                                 \
        return i;                                                                      \
    }

SCALAR_WIDTH(32, uint32_t, CODEC_MARK32)
SCALAR_WIDTH(64, uint64_t, CODEC_MARK64)

/* One reduce kernel: out = EXPR(a, b) over integers of type T, bitmap of out. */
#define SCALAR_REDUCE(W, T, name, EXPR, COUNT_MARKS)                                   \
    static void reduce##W##_##name(const void *av, const void *bv, void *outv,         \
                                   size_t len, uint64_t *nz, codec_tally_t *t_out)         \
    {                                                                                  \
        const unsigned char *pa = av, *pb = bv;                                        \
        unsigned char *po = outv;                                                      \
        size_t marks = 0;                                                              \
        codec_tally_t tl = *t_out;                                 \
        for (size_t base = 0; base < len; base += 64) {                                \
            size_t e = codec_min(64, len - base);                                      \
            uint64_t w = 0;                                                            \
            for (size_t j = 0; j < e; j++) {                                           \
                T a = ld##W(pa, base + j), b = ld##W(pb, base + j);                    \
                T r = EXPR;                                                            \
                st##W(po, base + j, r);                                                \
                w |= (uint64_t)(r != 0) << j;                                          \
                if (COUNT_MARKS) {                                                     \
                    marks += r > (T)(W == 32 ? CODEC_MARK32 : CODEC_MARK64);            \
                }                                                                      \
            }                                                                          \
            nz[base / 64] = w;                                                         \
            CODEC_TALLY(tl, w, e);                                                 \
        }                                                                              \
        tl.nans += marks;                                                              \
        *t_out = tl;                                                              \
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

#define SCALAR_TABLE(W)                                                                \
    {                                                                                  \
        .scan = scan##W,                                                               \
        .reduce = {                                                                    \
            [CODEC_OPK_FSUM] = reduce##W##_fsum, [CODEC_OPK_ISUM] = reduce##W##_isum,  \
            [CODEC_OPK_BOR] = reduce##W##_bor,   [CODEC_OPK_BXOR] = reduce##W##_bxor,  \
            [CODEC_OPK_LOR] = reduce##W##_lor,                                         \
        },                                                                             \
        .compress = compress##W, .expand = expand##W, .find_marker = find_marker##W,   \
        .copy_literals = copy_literals##W,                                             \
        .popcount = popcount_words,                                                    \
    }

const codec_kernels_t codec_kernels_scalar[2] = {SCALAR_TABLE(32), SCALAR_TABLE(64)};
