/*
 * The codec kernels for AVX-512 (F, BW, VL). A mask register per vector gives the
 * non-zero bits directly (vptestm), 64 elements make one bitmap word, and packing
 * is the compress / expand instructions on registers (their memory forms are
 * microcoded on some CPUs). Tails use masked loads and stores, which never touch
 * the masked-off lanes, so no kernel reads or writes past its buffers.
 */
#include "codec/codec_impl.h"

#ifdef CODEC_HAVE_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,bmi,bmi2,popcnt")))

/* ---- 32-bit elements: 16 per vector, four vectors per bitmap word ------------------ */

AVX512 static inline __mmask16 lanes16(size_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

AVX512 static inline __mmask8 lanes8(size_t left)
{
    return left >= 8 ? (__mmask8)0xff : (__mmask8)((1u << left) - 1);
}

/* a + b with a as the first source operand (see codec_isa_avx2.c). */
AVX512 static inline __m512i add_ps_a_first(__m512i a, __m512i b)
{
    __m512 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(_mm512_castsi512_ps(a)), "v"(_mm512_castsi512_ps(b)));
    return _mm512_castps_si512(r);
}

AVX512 static inline __m512i add_pd_a_first(__m512i a, __m512i b)
{
    __m512d r;
    __asm__("vaddpd %2, %1, %0" : "=v"(r) : "v"(_mm512_castsi512_pd(a)), "v"(_mm512_castsi512_pd(b)));
    return _mm512_castpd_si512(r);
}

AVX512 static size_t scan32(const void *x, size_t len, uint64_t *nz, int nans)
{
    const char *p = x;
    const __m512i mark = _mm512_set1_epi32((int)CODEC_MARK32);
    size_t marks = 0;
    for (size_t base = 0; base < len; base += 64) {
        uint64_t bits = 0;
        if (len - base >= 64) {
            for (int j = 0; j < 4; j++) {
                __m512i v = _mm512_loadu_si512(p + (base + 16 * j) * 4);
                bits |= (uint64_t)_mm512_test_epi32_mask(v, v) << (16 * j);
                if (nans) {
                    marks += (size_t)__builtin_popcount(_mm512_cmpgt_epu32_mask(v, mark));
                }
            }
        } else {
            for (size_t j = 0; base + 16 * j < len; j++) {
                __mmask16 lm = lanes16(len - base - 16 * j);
                __m512i v = _mm512_maskz_loadu_epi32(lm, p + (base + 16 * j) * 4);
                bits |= (uint64_t)_mm512_test_epi32_mask(v, v) << (16 * j);
                if (nans) {
                    marks += (size_t)__builtin_popcount(_mm512_cmpgt_epu32_mask(v, mark));
                }
            }
        }
        nz[base / 64] = bits;
    }
    return marks;
}

/* r = a op b for one vector; OP is a statement setting r from va, vb. */
#define REDUCE512(W, name, LANES, MASKT, LANEFN, LOADZ, STOREM, TEST, CMPGT, MARK, FLOAT, OP) \
    AVX512 static size_t reduce##W##_##name(const void *av, const void *bv, void *outv,      \
                                            size_t len, uint64_t *nz)                       \
    {                                                                                        \
        const char *pa = av, *pb = bv;                                                       \
        char *po = outv;                                                                     \
        const __m512i mark = MARK;                                                           \
        const __m512i one = W == 32 ? _mm512_set1_epi32(1) : _mm512_set1_epi64(1);           \
        size_t marks = 0;                                                                    \
        (void)one;                                                                           \
        (void)mark;                                                                          \
        for (size_t base = 0; base < len; base += 64) {                                      \
            uint64_t bits = 0;                                                               \
            if (len - base >= 64) {                                                          \
                for (int j = 0; j < 64 / LANES; j++) {                                       \
                    size_t off = (base + (size_t)LANES * j) * (W / 8);                       \
                    __m512i va = _mm512_loadu_si512(pa + off);                               \
                    __m512i vb = _mm512_loadu_si512(pb + off);                               \
                    __m512i r;                                                               \
                    OP;                                                                      \
                    _mm512_storeu_si512(po + off, r);                                        \
                    bits |= (uint64_t)TEST(r, r) << (LANES * j);                             \
                    if (FLOAT) {                                                             \
                        marks += (size_t)__builtin_popcount(CMPGT(r, mark));                 \
                    }                                                                        \
                }                                                                            \
            } else {                                                                         \
                for (size_t j = 0; base + LANES * j < len; j++) {                            \
                    size_t off = (base + LANES * j) * (W / 8);                               \
                    MASKT lm = LANEFN(len - base - LANES * j);                               \
                    __m512i va = LOADZ(lm, pa + off);                                        \
                    __m512i vb = LOADZ(lm, pb + off);                                        \
                    __m512i r;                                                               \
                    OP;                                                                      \
                    STOREM(po + off, lm, r);                                                 \
                    bits |= (uint64_t)(TEST(r, r) & lm) << (LANES * j);                      \
                    if (FLOAT) {                                                             \
                        marks += (size_t)__builtin_popcount(CMPGT(r, mark) & lm);            \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
            nz[base / 64] = bits;                                                            \
        }                                                                                    \
        return marks;                                                                        \
    }

#define R32(name, FLOAT, OP)                                                                 \
    REDUCE512(32, name, 16, __mmask16, lanes16, _mm512_maskz_loadu_epi32,                  \
              _mm512_mask_storeu_epi32, _mm512_test_epi32_mask, _mm512_cmpgt_epu32_mask,  \
              _mm512_set1_epi32((int)CODEC_MARK32), FLOAT, OP)
#define R64(name, FLOAT, OP)                                                                 \
    REDUCE512(64, name, 8, __mmask8, lanes8, _mm512_maskz_loadu_epi64,                     \
              _mm512_mask_storeu_epi64, _mm512_test_epi64_mask, _mm512_cmpgt_epu64_mask,  \
              _mm512_set1_epi64((long long)CODEC_MARK64), FLOAT, OP)

R32(fsum, 1, r = add_ps_a_first(va, vb))
R32(isum, 0, r = _mm512_add_epi32(va, vb))
R32(bor, 0, r = _mm512_or_si512(va, vb))
R32(bxor, 0, r = _mm512_xor_si512(va, vb))
R32(lor, 0,
    r = _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(va, va) | _mm512_test_epi32_mask(vb, vb),
                               one))
R64(fsum, 1, r = add_pd_a_first(va, vb))
R64(isum, 0, r = _mm512_add_epi64(va, vb))
R64(bor, 0, r = _mm512_or_si512(va, vb))
R64(bxor, 0, r = _mm512_xor_si512(va, vb))
R64(lor, 0,
    r = _mm512_maskz_mov_epi64(_mm512_test_epi64_mask(va, va) | _mm512_test_epi64_mask(vb, vb),
                               one))

AVX512 static size_t compress32(const void *x, size_t len, const uint64_t *nz, void *dst,
                                size_t room)
{
    const char *p = x;
    char *d = dst;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 16) {
        __mmask16 m = (__mmask16)(nz[i / 64] >> (i % 64));
        if (m == 0) {
            continue;
        }
        __m512i v = _mm512_maskz_loadu_epi32(m, p + i * 4);
        __m512i c = _mm512_maskz_compress_epi32(m, v);
        size_t cnt = (size_t)__builtin_popcount(m);
        if (k + 16 <= room) {
            _mm512_storeu_si512(d + k * 4, c);
        } else {
            _mm512_mask_storeu_epi32(d + k * 4, lanes16(cnt), c);
        }
        k += cnt;
    }
    return k;
}

AVX512 static size_t compress64(const void *x, size_t len, const uint64_t *nz, void *dst,
                                size_t room)
{
    const char *p = x;
    char *d = dst;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 8) {
        __mmask8 m = (__mmask8)(nz[i / 64] >> (i % 64));
        if (m == 0) {
            continue;
        }
        __m512i v = _mm512_maskz_loadu_epi64(m, p + i * 8);
        __m512i c = _mm512_maskz_compress_epi64(m, v);
        size_t cnt = (size_t)__builtin_popcount(m);
        if (k + 8 <= room) {
            _mm512_storeu_si512(d + k * 8, c);
        } else {
            _mm512_mask_storeu_epi64(d + k * 8, lanes8(cnt), c);
        }
        k += cnt;
    }
    return k;
}

AVX512 static size_t expand32(const void *src, size_t avail, size_t len, const uint64_t *nz,
                              void *out)
{
    const char *s = src;
    char *o = out;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 16) {
        __mmask16 lm = lanes16(len - i);
        __mmask16 m = (__mmask16)(nz[i / 64] >> (i % 64)) & lm;
        __m512i e = _mm512_setzero_si512();
        if (m != 0) {
            size_t cnt = (size_t)__builtin_popcount(m);
            __m512i v = k + 16 <= avail ? _mm512_loadu_si512(s + k * 4)
                                        : _mm512_maskz_loadu_epi32(lanes16(cnt), s + k * 4);
            e = _mm512_maskz_expand_epi32(m, v);
            k += cnt;
        }
        if (lm == 0xffff) {
            _mm512_storeu_si512(o + i * 4, e);
        } else {
            _mm512_mask_storeu_epi32(o + i * 4, lm, e);
        }
    }
    return k;
}

AVX512 static size_t expand64(const void *src, size_t avail, size_t len, const uint64_t *nz,
                              void *out)
{
    const char *s = src;
    char *o = out;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 8) {
        __mmask8 lm = lanes8(len - i);
        __mmask8 m = (__mmask8)(nz[i / 64] >> (i % 64)) & lm;
        __m512i e = _mm512_setzero_si512();
        if (m != 0) {
            size_t cnt = (size_t)__builtin_popcount(m);
            __m512i v = k + 8 <= avail ? _mm512_loadu_si512(s + k * 8)
                                       : _mm512_maskz_loadu_epi64(lanes8(cnt), s + k * 8);
            e = _mm512_maskz_expand_epi64(m, v);
            k += cnt;
        }
        if (lm == 0xff) {
            _mm512_storeu_si512(o + i * 8, e);
        } else {
            _mm512_mask_storeu_epi64(o + i * 8, lm, e);
        }
    }
    return k;
}

AVX512 static size_t scan64(const void *x, size_t len, uint64_t *nz, int nans)
{
    const char *p = x;
    const __m512i mark = _mm512_set1_epi64((long long)CODEC_MARK64);
    size_t marks = 0;
    for (size_t base = 0; base < len; base += 64) {
        uint64_t bits = 0;
        for (size_t j = 0; j < 8 && base + 8 * j < len; j++) {
            __mmask8 lm = lanes8(len - base - 8 * j);
            __m512i v = lm == 0xff ? _mm512_loadu_si512(p + (base + 8 * j) * 8)
                                   : _mm512_maskz_loadu_epi64(lm, p + (base + 8 * j) * 8);
            bits |= (uint64_t)_mm512_test_epi64_mask(v, v) << (8 * j);
            if (nans) {
                marks += (size_t)__builtin_popcount(_mm512_cmpgt_epu64_mask(v, mark));
            }
        }
        nz[base / 64] = bits;
    }
    return marks;
}

AVX512 static size_t find_marker32(const void *s, size_t avail)
{
    const char *p = s;
    const __m512i mark = _mm512_set1_epi32((int)CODEC_MARK32);
    for (size_t i = 0; i < avail; i += 16) {
        __mmask16 lm = lanes16(avail - i);
        __m512i v = _mm512_maskz_loadu_epi32(lm, p + i * 4);
        __mmask16 m = _mm512_mask_cmpgt_epu32_mask(lm, v, mark);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
    }
    return avail;
}

AVX512 static size_t find_marker64(const void *s, size_t avail)
{
    const char *p = s;
    const __m512i mark = _mm512_set1_epi64((long long)CODEC_MARK64);
    for (size_t i = 0; i < avail; i += 8) {
        __mmask8 lm = lanes8(avail - i);
        __m512i v = _mm512_maskz_loadu_epi64(lm, p + i * 8);
        __mmask8 m = _mm512_mask_cmpgt_epu64_mask(lm, v, mark);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
    }
    return avail;
}

AVX512 static size_t popcount_words(const void *p, size_t words)
{
    const unsigned char *b = p;
    size_t c = 0;
    for (size_t i = 0; i < words; i++) {
        c += (size_t)__builtin_popcountll(codec_ld64(b + i * 8));
    }
    return c;
}

AVX512 static size_t run_starts(const uint64_t *nz, size_t len, int *prev_zero)
{
    size_t starts = 0;
    uint64_t carry = (uint64_t)(*prev_zero != 0);
    for (size_t w = 0; w * 64 < len; w++) {
        size_t bits = codec_min(64, len - w * 64);
        uint64_t valid = bits == 64 ? ~0ull : (1ull << bits) - 1;
        uint64_t z = ~nz[w] & valid;
        starts += (size_t)__builtin_popcountll(z & ~((z << 1) | carry));
        carry = (z >> (bits - 1)) & 1;
    }
    if (len > 0) {
        *prev_zero = (int)carry;
    }
    return starts;
}

#define AVX512_TABLE(W)                                                                \
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

const codec_kernels_t codec_kernels_avx512[2] = {AVX512_TABLE(32), AVX512_TABLE(64)};

#endif
