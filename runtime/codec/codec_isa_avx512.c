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

/* A bitmap word from four 16-lane (32-bit elements) or eight 8-lane (64-bit)
 * masks, assembled in mask registers: one move to a general register per word
 * instead of one per vector. */
AVX512 static inline uint64_t word_of16(__mmask16 k0, __mmask16 k1, __mmask16 k2, __mmask16 k3)
{
    __mmask32 lo = _mm512_kunpackw((__mmask32)k1, (__mmask32)k0);
    __mmask32 hi = _mm512_kunpackw((__mmask32)k3, (__mmask32)k2);
    return _cvtmask64_u64(_mm512_kunpackd((__mmask64)hi, (__mmask64)lo));
}

/* NaNs in the marker range (negative NaNs) are rare: the pass keeps only the
 * unsigned maximum (one instruction a vector; 512-bit work has just two ports
 * here) and counts them in a second look at the block when it has any. */
AVX512 static size_t count_marks32(const char *p, size_t len)
{
    const __m512i mark = _mm512_set1_epi32((int)CODEC_MARK32);
    size_t c = 0;
    for (size_t i = 0; i < len; i += 16) {
        __m512i v = _mm512_maskz_loadu_epi32(lanes16(len - i), p + i * 4);
        c += (size_t)__builtin_popcount(_mm512_cmpgt_epu32_mask(v, mark));
    }
    return c;
}

AVX512 static size_t count_marks64(const char *p, size_t len)
{
    const __m512i mark = _mm512_set1_epi64((long long)CODEC_MARK64);
    size_t c = 0;
    for (size_t i = 0; i < len; i += 8) {
        __m512i v = _mm512_maskz_loadu_epi64(lanes8(len - i), p + i * 8);
        c += (size_t)__builtin_popcount(_mm512_cmpgt_epu64_mask(v, mark));
    }
    return c;
}

/* The pass every reduce and scan kernel makes over a block: r = OP(va, vb) per
 * vector (vb only when HAS_B, r stored only when STORE), its non-zero bitmap, and
 * its marker-range NaNs when FLOAT (see count_marks), all tallied into t. Full 64-element words take plain loads and
 * stores; the tail word masked ones. */
#define PASS32(HAS_B, STORE, FLOAT, OP)                                                      \
    codec_tally_t tl = *t_out; /* in registers, not via t_out */          \
    const char *pa = av, *pb = bv;                                                           \
    char *po = outv;                                                                         \
    const __m512i one = _mm512_set1_epi32(1);                                                \
    __m512i vmax = _mm512_setzero_si512();                                                   \
    (void)one;                                                                               \
    (void)pb;                                                                                \
    (void)po;                                                                                \
    size_t base = 0;                                                                         \
    for (; base + 64 <= len; base += 64) {                                                   \
        __mmask16 k[4];                                                                      \
        for (int j = 0; j < 4; j++) {                                                        \
            size_t off = (base + 16 * (size_t)j) * 4;                                        \
            __m512i va = _mm512_loadu_si512(pa + off);                                       \
            __m512i vb = HAS_B ? _mm512_loadu_si512(pb + off) : va;                          \
            __m512i r = OP;                                                                  \
            (void)vb;                                                                        \
            if (STORE) {                                                                     \
                _mm512_storeu_si512(po + off, r);                                            \
            }                                                                                \
            k[j] = _mm512_test_epi32_mask(r, r);                                             \
            if (FLOAT) {                                                                     \
                vmax = _mm512_max_epu32(vmax, r);                                            \
            }                                                                                \
        }                                                                                    \
        uint64_t w_ = word_of16(k[0], k[1], k[2], k[3]);                                     \
        nz[base / 64] = w_;                                                                  \
        CODEC_TALLY(tl, w_, 64);                                                         \
    }                                                                                        \
    if (base < len) {                                                                        \
        uint64_t bits = 0;                                                                   \
        for (size_t j = 0; base + 16 * j < len; j++) {                                       \
            size_t off = (base + 16 * j) * 4;                                                \
            __mmask16 lm = lanes16(len - base - 16 * j);                                     \
            __m512i va = _mm512_maskz_loadu_epi32(lm, pa + off);                             \
            __m512i vb = HAS_B ? _mm512_maskz_loadu_epi32(lm, pb + off) : va;                \
            __m512i r = OP;                                                                  \
            (void)vb;                                                                        \
            if (STORE) {                                                                     \
                _mm512_mask_storeu_epi32(po + off, lm, r);                                   \
            }                                                                                \
            bits |= (uint64_t)_mm512_mask_test_epi32_mask(lm, r, r) << (16 * j);             \
            if (FLOAT) {                                                                     \
                vmax = _mm512_max_epu32(vmax, r); /* masked-off lanes are 0 */               \
            }                                                                                \
        }                                                                                    \
        nz[base / 64] = bits;                                                                \
        CODEC_TALLY(tl, bits, len - base);                                               \
    }                                                                                        \
    if (FLOAT && _mm512_reduce_max_epu32(vmax) > (uint32_t)CODEC_MARK32) {                     \
        tl.nans += count_marks32(STORE ? (const char *)po : pa, len);                           \
    }                                                                                        \
    *t_out = tl

#define PASS64(HAS_B, STORE, FLOAT, OP)                                                      \
    codec_tally_t tl = *t_out; /* in registers, not via t_out */          \
    const char *pa = av, *pb = bv;                                                           \
    char *po = outv;                                                                         \
    const __m512i one = _mm512_set1_epi64(1);                                                \
    __m512i vmax = _mm512_setzero_si512();                                                   \
    (void)one;                                                                               \
    (void)pb;                                                                                \
    (void)po;                                                                                \
    size_t base = 0;                                                                         \
    for (; base + 64 <= len; base += 64) {                                                   \
        __mmask8 k[8];                                                                       \
        for (int j = 0; j < 8; j++) {                                                        \
            size_t off = (base + 8 * (size_t)j) * 8;                                         \
            __m512i va = _mm512_loadu_si512(pa + off);                                       \
            __m512i vb = HAS_B ? _mm512_loadu_si512(pb + off) : va;                          \
            __m512i r = OP;                                                                  \
            (void)vb;                                                                        \
            if (STORE) {                                                                     \
                _mm512_storeu_si512(po + off, r);                                            \
            }                                                                                \
            k[j] = _mm512_test_epi64_mask(r, r);                                             \
            if (FLOAT) {                                                                     \
                vmax = _mm512_max_epu64(vmax, r);                                            \
            }                                                                                \
        }                                                                                    \
        uint64_t w_ = word_of16(_mm512_kunpackb(k[1], k[0]), _mm512_kunpackb(k[3], k[2]),    \
                                _mm512_kunpackb(k[5], k[4]), _mm512_kunpackb(k[7], k[6]));   \
        nz[base / 64] = w_;                                                                  \
        CODEC_TALLY(tl, w_, 64);                                                         \
    }                                                                                        \
    if (base < len) {                                                                        \
        uint64_t bits = 0;                                                                   \
        for (size_t j = 0; base + 8 * j < len; j++) {                                        \
            size_t off = (base + 8 * j) * 8;                                                 \
            __mmask8 lm = lanes8(len - base - 8 * j);                                        \
            __m512i va = _mm512_maskz_loadu_epi64(lm, pa + off);                             \
            __m512i vb = HAS_B ? _mm512_maskz_loadu_epi64(lm, pb + off) : va;                \
            __m512i r = OP;                                                                  \
            (void)vb;                                                                        \
            if (STORE) {                                                                     \
                _mm512_mask_storeu_epi64(po + off, lm, r);                                   \
            }                                                                                \
            bits |= (uint64_t)_mm512_mask_test_epi64_mask(lm, r, r) << (8 * j);              \
            if (FLOAT) {                                                                     \
                vmax = _mm512_max_epu64(vmax, r); /* masked-off lanes are 0 */               \
            }                                                                                \
        }                                                                                    \
        nz[base / 64] = bits;                                                                \
        CODEC_TALLY(tl, bits, len - base);                                               \
    }                                                                                        \
    if (FLOAT && _mm512_reduce_max_epu64(vmax) > (uint64_t)CODEC_MARK64) {                     \
        tl.nans += count_marks64(STORE ? (const char *)po : pa, len);                           \
    }                                                                                        \
    *t_out = tl

AVX512 static void scan32(const void *av, size_t len, uint64_t *nz, int nans, codec_tally_t *t_out)
{
    const void *bv = NULL;
    void *outv = NULL;
    PASS32(0, 0, nans, va);
}

AVX512 static void scan64(const void *av, size_t len, uint64_t *nz, int nans, codec_tally_t *t_out)
{
    const void *bv = NULL;
    void *outv = NULL;
    PASS64(0, 0, nans, va);
}

#define R32(name, FLOAT, OP)                                                                 \
    AVX512 static void reduce32_##name(const void *av, const void *bv, void *outv,          \
                                       size_t len, uint64_t *nz, codec_tally_t *t_out)          \
    {                                                                                        \
        PASS32(1, 1, FLOAT, OP);                                                             \
    }
#define R64(name, FLOAT, OP)                                                                 \
    AVX512 static void reduce64_##name(const void *av, const void *bv, void *outv,          \
                                       size_t len, uint64_t *nz, codec_tally_t *t_out)          \
    {                                                                                        \
        PASS64(1, 1, FLOAT, OP);                                                             \
    }

R32(fsum, 1, add_ps_a_first(va, vb))
R32(isum, 0, _mm512_add_epi32(va, vb))
R32(bor, 0, _mm512_or_si512(va, vb))
R32(bxor, 0, _mm512_xor_si512(va, vb))
R32(lor, 0,
    _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(va, va) | _mm512_test_epi32_mask(vb, vb), one))
R64(fsum, 1, add_pd_a_first(va, vb))
R64(isum, 0, _mm512_add_epi64(va, vb))
R64(bor, 0, _mm512_or_si512(va, vb))
R64(bxor, 0, _mm512_xor_si512(va, vb))
R64(lor, 0,
    _mm512_maskz_mov_epi64(_mm512_test_epi64_mask(va, va) | _mm512_test_epi64_mask(vb, vb), one))

/* The Bits last hop in one pass: a = expand(values, bitmap) feeds the reduce
 * directly, no dense copy of a. Each vector's first value is k plus the popcount
 * of the word's lower bits, so the loads do not wait on one another. A full word
 * whose 64 values are all readable goes without a guard or a mask; the rest (the
 * message's last values, the block's tail) with masked loads and stores. */
#define RBITS(W, LANES, MASKT, LANEFN, LOADZ, STOREM, EXPANDZ, TEST, MASKTEST, MAXU, CNTMARKS, \
              MARK, name, FLOAT, OP)                                                            \
    AVX512 static size_t reduce_bits##W##_##name(const void *vals, size_t avail,               \
                                                 const uint64_t *anz, const void *bv,          \
                                                 void *outv, size_t len, uint64_t *nz,         \
                                                 codec_tally_t *t_out)                         \
    {                                                                                           \
        const char *pv = vals, *pb = bv;                                                        \
        char *po = outv;                                                                        \
        codec_tally_t tl = *t_out;                                                              \
        const __m512i one = W == 32 ? _mm512_set1_epi32(1) : _mm512_set1_epi64(1);              \
        __m512i vmax = _mm512_setzero_si512();                                                  \
        (void)one;                                                                              \
        size_t k = 0, base = 0;                                                                 \
        for (; base + 64 <= len && k + 64 <= avail; base += 64) {                               \
            const uint64_t am = anz[base / 64];                                                 \
            uint64_t bits = 0;                                                                  \
            for (int j = 0; j < 64 / LANES; j++) {                                              \
                size_t off = (base + LANES * (size_t)j) * (W / 8);                              \
                MASKT mj = (MASKT)(am >> (LANES * j));                                          \
                size_t kj = k + (size_t)__builtin_popcountll(am & ((1ull << (LANES * j)) - 1)); \
                __m512i va = EXPANDZ(mj, _mm512_loadu_si512(pv + kj * (W / 8)));                \
                __m512i vb = _mm512_loadu_si512(pb + off);                                      \
                __m512i r = OP;                                                                 \
                _mm512_storeu_si512(po + off, r);                                               \
                bits |= (uint64_t)TEST(r, r) << (LANES * j);                                    \
                if (FLOAT) {                                                                    \
                    vmax = MAXU(vmax, r);                                                       \
                }                                                                               \
            }                                                                                   \
            k += (size_t)__builtin_popcountll(am);                                              \
            nz[base / 64] = bits;                                                               \
            CODEC_TALLY(tl, bits, 64);                                                          \
        }                                                                                       \
        for (; base < len; base += 64) {                                                        \
            const uint64_t am = anz[base / 64];                                                 \
            uint64_t bits = 0;                                                                  \
            for (size_t j = 0; j < 64 / LANES && base + LANES * j < len; j++) {                 \
                size_t off = (base + LANES * j) * (W / 8);                                      \
                MASKT lm = LANEFN(len - base - LANES * j);                                      \
                MASKT mj = (MASKT)(am >> (LANES * j)) & lm;                                     \
                size_t kj = k + (size_t)__builtin_popcountll(am & ((1ull << (LANES * j)) - 1)); \
                size_t can = kj < avail ? avail - kj : 0;                                       \
                __m512i v = LOADZ(LANEFN(can), pv + kj * (W / 8));                              \
                __m512i va = EXPANDZ(mj, v);                                                    \
                __m512i vb = LOADZ(lm, pb + off);                                               \
                __m512i r = OP;                                                                 \
                STOREM(po + off, lm, r);                                                        \
                bits |= (uint64_t)MASKTEST(lm, r, r) << (LANES * j);                            \
                if (FLOAT) {                                                                    \
                    vmax = MAXU(vmax, r); /* masked-off lanes are 0 */                          \
                }                                                                               \
            }                                                                                   \
            k += (size_t)__builtin_popcountll(am);                                              \
            nz[base / 64] = bits;                                                               \
            CODEC_TALLY(tl, bits, codec_min(64, len - base));                                   \
        }                                                                                       \
        if (FLOAT && CNTMARKS##_max(vmax) > MARK) {                                             \
            tl.nans += CNTMARKS(po, len);                                                       \
        }                                                                                       \
        *t_out = tl;                                                                            \
        return k;                                                                               \
    }

#define count_marks32_max(v) _mm512_reduce_max_epu32(v)
#define count_marks64_max(v) _mm512_reduce_max_epu64(v)
#define RB32(name, FLOAT, OP)                                                                   \
    RBITS(32, 16, __mmask16, lanes16, _mm512_maskz_loadu_epi32, _mm512_mask_storeu_epi32,      \
          _mm512_maskz_expand_epi32, _mm512_test_epi32_mask, _mm512_mask_test_epi32_mask,      \
          _mm512_max_epu32, count_marks32, (uint32_t)CODEC_MARK32, name, FLOAT, OP)
#define RB64(name, FLOAT, OP)                                                                   \
    RBITS(64, 8, __mmask8, lanes8, _mm512_maskz_loadu_epi64, _mm512_mask_storeu_epi64,         \
          _mm512_maskz_expand_epi64, _mm512_test_epi64_mask, _mm512_mask_test_epi64_mask,      \
          _mm512_max_epu64, count_marks64, (uint64_t)CODEC_MARK64, name, FLOAT, OP)

RB32(fsum, 1, add_ps_a_first(va, vb))
RB32(isum, 0, _mm512_add_epi32(va, vb))
RB32(bor, 0, _mm512_or_si512(va, vb))
RB32(bxor, 0, _mm512_xor_si512(va, vb))
RB32(lor, 0,
     _mm512_maskz_mov_epi32(_mm512_test_epi32_mask(va, va) | _mm512_test_epi32_mask(vb, vb), one))
RB64(fsum, 1, add_pd_a_first(va, vb))
RB64(isum, 0, _mm512_add_epi64(va, vb))
RB64(bor, 0, _mm512_or_si512(va, vb))
RB64(bxor, 0, _mm512_xor_si512(va, vb))
RB64(lor, 0,
     _mm512_maskz_mov_epi64(_mm512_test_epi64_mask(va, va) | _mm512_test_epi64_mask(vb, vb), one))

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

AVX512 static size_t copy_literals32(const void *s, size_t avail, void *out)
{
    const char *p = s;
    char *o = out;
    const __m512i mark = _mm512_set1_epi32((int)CODEC_MARK32);
    for (size_t i = 0; i < avail; i += 16) {
        __mmask16 lm = lanes16(avail - i);
        __m512i v = _mm512_maskz_loadu_epi32(lm, p + i * 4);
        __mmask16 m = _mm512_mask_cmpgt_epu32_mask(lm, v, mark);
        if (m != 0) {
            size_t c = (size_t)__builtin_ctz(m);
            _mm512_mask_storeu_epi32(o + i * 4, lanes16(c), v);
            return i + c;
        }
        _mm512_mask_storeu_epi32(o + i * 4, lm, v);
    }
    return avail;
}

AVX512 static size_t copy_literals64(const void *s, size_t avail, void *out)
{
    const char *p = s;
    char *o = out;
    const __m512i mark = _mm512_set1_epi64((long long)CODEC_MARK64);
    for (size_t i = 0; i < avail; i += 8) {
        __mmask8 lm = lanes8(avail - i);
        __m512i v = _mm512_maskz_loadu_epi64(lm, p + i * 8);
        __mmask8 m = _mm512_mask_cmpgt_epu64_mask(lm, v, mark);
        if (m != 0) {
            size_t c = (size_t)__builtin_ctz(m);
            _mm512_mask_storeu_epi64(o + i * 8, lanes8(c), v);
            return i + c;
        }
        _mm512_mask_storeu_epi64(o + i * 8, lm, v);
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

#define AVX512_TABLE(W)                                                                \
    {                                                                                  \
        .scan = scan##W,                                                               \
        .reduce = {                                                                    \
            [CODEC_OPK_FSUM] = reduce##W##_fsum, [CODEC_OPK_ISUM] = reduce##W##_isum,  \
            [CODEC_OPK_BOR] = reduce##W##_bor,   [CODEC_OPK_BXOR] = reduce##W##_bxor,  \
            [CODEC_OPK_LOR] = reduce##W##_lor,                                         \
        },                                                                             \
        .reduce_bits = {                                                               \
            [CODEC_OPK_FSUM] = reduce_bits##W##_fsum,                                  \
            [CODEC_OPK_ISUM] = reduce_bits##W##_isum,                                  \
            [CODEC_OPK_BOR] = reduce_bits##W##_bor,                                    \
            [CODEC_OPK_BXOR] = reduce_bits##W##_bxor,                                  \
            [CODEC_OPK_LOR] = reduce_bits##W##_lor,                                    \
        },                                                                             \
        .compress = compress##W, .expand = expand##W, .find_marker = find_marker##W,   \
        .copy_literals = copy_literals##W,                                             \
        .popcount = popcount_words,                                                    \
    }

const codec_kernels_t codec_kernels_avx512[2] = {AVX512_TABLE(32), AVX512_TABLE(64)};

#endif
