/*
 * The codec kernels for AVX2. Non-zero bits come from a compare with zero and a
 * movemask; packing is a permutation (vpermd) whose lane indices come from small
 * tables indexed by the 8-bit (32-bit lanes) or 4-bit (64-bit lanes) mask, built
 * once at load time (pdep/pext would do without tables but are microcoded on
 * older AMD cores). AVX2 has no unsigned compare: a marker test flips the sign bit
 * of both sides and compares signed. Tails shorter than a vector go element by
 * element, as in the scalar build.
 */
#include "codec/codec_impl.h"

#ifdef CODEC_HAVE_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))

/* Byte lane indices for vpermd (after zero extension to 32 bits): compress packs
 * the selected lanes first; expand sends packed lane r to the r-th selected lane.
 * 64-bit lanes are pairs of 32-bit lanes (2e, 2e + 1). */
static uint64_t compress8_tab[256], expand8_tab[256];
static uint64_t compress4_tab[16], expand4_tab[16];

__attribute__((constructor)) static void build_tables(void)
{
    for (unsigned m = 0; m < 256; m++) {
        uint64_t c = 0, e = 0;
        unsigned r = 0;
        for (unsigned j = 0; j < 8; j++) {
            if (m & (1u << j)) {
                c |= (uint64_t)j << (8 * r);
                e |= (uint64_t)r << (8 * j);
                r++;
            }
        }
        compress8_tab[m] = c;
        expand8_tab[m] = e;
    }
    for (unsigned m = 0; m < 16; m++) {
        uint64_t c = 0, e = 0;
        unsigned r = 0;
        for (unsigned j = 0; j < 4; j++) {
            if (m & (1u << j)) {
                c |= (uint64_t)(2 * j) << (16 * r) | (uint64_t)(2 * j + 1) << (16 * r + 8);
                e |= (uint64_t)(2 * r) << (16 * j) | (uint64_t)(2 * r + 1) << (16 * j + 8);
                r++;
            }
        }
        compress4_tab[m] = c;
        expand4_tab[m] = e;
    }
}

AVX2 static inline __m256i perm_index(uint64_t bytes)
{
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)bytes));
}

/* Lanes below cnt (32-bit lanes), as a mask vector for maskload / maskstore. */
AVX2 static inline __m256i prefix32(size_t cnt)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2 static inline __m256i prefix64(size_t cnt)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)cnt), _mm256_setr_epi64x(0, 1, 2, 3));
}

/* Lane j set where bit j of m is (32-bit lanes / 64-bit lanes). */
AVX2 static inline __m256i lanes_of32(unsigned m)
{
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)m), sel), sel);
}

AVX2 static inline __m256i lanes_of64(unsigned m)
{
    const __m256i sel = _mm256_setr_epi64x(1, 2, 4, 8);
    return _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x((long long)m), sel), sel);
}

/* a + b with a as the first source operand: when both are NaN, x86 returns the
 * first one (quieted), and fold_reduce_local's loop has a first. Left to itself
 * the compiler may swap the operands of a commutative add. */
AVX2 static inline __m256i add_ps_a_first(__m256i a, __m256i b)
{
    __m256 r;
    __asm__("vaddps %2, %1, %0" : "=x"(r) : "x"(_mm256_castsi256_ps(a)), "x"(_mm256_castsi256_ps(b)));
    return _mm256_castps_si256(r);
}

AVX2 static inline __m256i add_pd_a_first(__m256i a, __m256i b)
{
    __m256d r;
    __asm__("vaddpd %2, %1, %0" : "=x"(r) : "x"(_mm256_castsi256_pd(a)), "x"(_mm256_castsi256_pd(b)));
    return _mm256_castpd_si256(r);
}

/* Elements one at a time, for the tails: the scalar build's operations. */
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

/* ---- scan / reduce ------------------------------------------------------------ */

#define ZMASK32(r) ((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(r, zero))))
#define ZMASK64(r) ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(r, zero))))
/* Lanes that are markers: u > MARK unsigned  <=>  (u ^ sign) > (MARK ^ sign) signed */
#define MARKV32(r)                                                                        \
    _mm256_cmpgt_epi32(_mm256_xor_si256(r, _mm256_set1_epi32(INT32_MIN)),                 \
                       _mm256_set1_epi32((int)(CODEC_MARK32 ^ 0x80000000u)))
#define MARKV64(r)                                                                        \
    _mm256_cmpgt_epi64(_mm256_xor_si256(r, _mm256_set1_epi64x(INT64_MIN)),                \
                       _mm256_set1_epi64x((long long)(CODEC_MARK64 ^ 0x8000000000000000ull)))
#define MARKS32(r) ((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(MARKV32(r))))
#define MARKS64(r) ((unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(MARKV64(r))))

/* Marker-range NaNs in x[0..len) (whole vectors only: len a multiple of 8). */
AVX2 static size_t count_marks32(const char *p, size_t len)
{
    size_t c = 0;
    for (size_t i = 0; i < len; i += 8) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 4));
        c += (size_t)__builtin_popcount(MARKS32(r));
    }
    return c;
}

AVX2 static size_t count_marks64(const char *p, size_t len)
{
    size_t c = 0;
    for (size_t i = 0; i < len; i += 4) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 8));
        c += (size_t)__builtin_popcount(MARKS64(r));
    }
    return c;
}

/* The pass of every scan and reduce kernel (see codec_isa_avx512.c): each bitmap
 * word built in a register and tallied as it is stored; NaNs flagged by an OR of
 * compares and counted in a second look at the rare blocks that have them. The
 * tail word goes element by element (SOP on scalars a, b of type T). */
#define PASS_AVX2(W, T, LANES, HAS_B, STORE, FLOAT, VOP, SOP)                             \
    codec_tally_t tl = *t_out; /* in registers, not via t_out */       \
    const char *pa = av, *pb = bv;                                                        \
    char *po = outv;                                                                      \
    const __m256i zero = _mm256_setzero_si256();                                          \
    const __m256i one = W == 32 ? _mm256_set1_epi32(1) : _mm256_set1_epi64x(1);           \
    __m256i any = _mm256_setzero_si256();                                                 \
    size_t base = 0, tail_marks = 0;                                                      \
    (void)one;                                                                            \
    (void)pb;                                                                             \
    (void)po;                                                                             \
    for (; base + 64 <= len; base += 64) {                                                \
        uint64_t w = 0;                                                                   \
        for (int j = 0; j < 64 / LANES; j++) {                                            \
            size_t off = (base + LANES * (size_t)j) * (W / 8);                            \
            __m256i va = _mm256_loadu_si256((const __m256i *)(pa + off));                 \
            __m256i vb = HAS_B ? _mm256_loadu_si256((const __m256i *)(pb + off)) : va;    \
            __m256i r = VOP;                                                              \
            (void)vb;                                                                     \
            if (STORE) {                                                                  \
                _mm256_storeu_si256((__m256i *)(po + off), r);                            \
            }                                                                             \
            w |= (uint64_t)(~ZMASK##W(r) & ((1u << LANES) - 1)) << (LANES * j);           \
            if (FLOAT) {                                                                  \
                any = _mm256_or_si256(any, MARKV##W(r));                                  \
            }                                                                             \
        }                                                                                 \
        nz[base / 64] = w;                                                                \
        CODEC_TALLY(tl, w, 64);                                                       \
    }                                                                                     \
    if (base < len) {                                                                     \
        uint64_t w = 0;                                                                   \
        for (size_t i = base; i < len; i++) {                                             \
            T a, b, r;                                                                    \
            memcpy(&a, pa + i * sizeof(T), sizeof(T));                                    \
            b = a;                                                                        \
            if (HAS_B) {                                                                  \
                memcpy(&b, pb + i * sizeof(T), sizeof(T));                                \
            }                                                                             \
            r = SOP;                                                                      \
            (void)b;                                                                      \
            if (STORE) {                                                                  \
                memcpy(po + i * sizeof(T), &r, sizeof(T));                                \
            }                                                                             \
            w |= (uint64_t)(r != 0) << (i - base);                                        \
            tail_marks += r > (T)(W == 32 ? CODEC_MARK32 : CODEC_MARK64);                  \
        }                                                                                 \
        nz[base / 64] = w;                                                                \
        CODEC_TALLY(tl, w, len - base);                                               \
    }                                                                                     \
    if (FLOAT) {                                                                          \
        tl.nans += tail_marks;                                                            \
        if (!_mm256_testz_si256(any, any)) {                                              \
            tl.nans += count_marks##W(STORE ? (const char *)po : pa, base);               \
        }                                                                                 \
    }                                                                                     \
    *t_out = tl

AVX2 static void scan32(const void *av, size_t len, uint64_t *nz, int nans, codec_tally_t *t_out)
{
    const void *bv = NULL;
    void *outv = NULL;
    PASS_AVX2(32, uint32_t, 8, 0, 0, nans, va, a);
}

AVX2 static void scan64(const void *av, size_t len, uint64_t *nz, int nans, codec_tally_t *t_out)
{
    const void *bv = NULL;
    void *outv = NULL;
    PASS_AVX2(64, uint64_t, 4, 0, 0, nans, va, a);
}

#define REDUCE_AVX2(W, T, name, LANES, FLOAT, VOP, SOP)                                   \
    AVX2 static void reduce##W##_##name(const void *av, const void *bv, void *outv,      \
                                        size_t len, uint64_t *nz, codec_tally_t *t_out)      \
    {                                                                                     \
        PASS_AVX2(W, T, LANES, 1, 1, FLOAT, VOP, SOP);                                    \
    }

#define LOR_VOP(W)                                                                        \
    _mm256_andnot_si256(_mm256_and_si256(_mm256_cmpeq_epi##W(va, zero),                   \
                                         _mm256_cmpeq_epi##W(vb, zero)),                  \
                        one)

REDUCE_AVX2(32, uint32_t, fsum, 8, 1, add_ps_a_first(va, vb), fsum32(a, b))
REDUCE_AVX2(32, uint32_t, isum, 8, 0, _mm256_add_epi32(va, vb), (uint32_t)(a + b))
REDUCE_AVX2(32, uint32_t, bor, 8, 0, _mm256_or_si256(va, vb), a | b)
REDUCE_AVX2(32, uint32_t, bxor, 8, 0, _mm256_xor_si256(va, vb), a ^ b)
REDUCE_AVX2(32, uint32_t, lor, 8, 0, LOR_VOP(32), (uint32_t)((a != 0) | (b != 0)))
REDUCE_AVX2(64, uint64_t, fsum, 4, 1, add_pd_a_first(va, vb), fsum64(a, b))
REDUCE_AVX2(64, uint64_t, isum, 4, 0, _mm256_add_epi64(va, vb), a + b)
REDUCE_AVX2(64, uint64_t, bor, 4, 0, _mm256_or_si256(va, vb), a | b)
REDUCE_AVX2(64, uint64_t, bxor, 4, 0, _mm256_xor_si256(va, vb), a ^ b)
REDUCE_AVX2(64, uint64_t, lor, 4, 0, LOR_VOP(64), (uint64_t)((a != 0) | (b != 0)))

/* ---- compress / expand --------------------------------------------------------- */

#define PACK_AVX2(W, T, LANES, TAB_C, TAB_E, PREFIX, LANES_OF, MASKLOAD, MASKSTORE)         \
    AVX2 static size_t compress##W(const void *x, size_t len, const uint64_t *nz,           \
                                   void *dst, size_t room)                                  \
    {                                                                                        \
        const char *p = x;                                                                   \
        char *d = dst;                                                                       \
        size_t k = 0, i = 0;                                                                 \
        for (; i + LANES <= len; i += LANES) {                                               \
            unsigned m = (unsigned)(nz[i / 64] >> (i % 64)) & ((1u << LANES) - 1);           \
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + i * (W / 8)));              \
            __m256i c = _mm256_permutevar8x32_epi32(v, perm_index(TAB_C[m]));               \
            size_t cnt = (size_t)__builtin_popcount(m);                                      \
            if (k + LANES <= room) {                                                         \
                _mm256_storeu_si256((__m256i *)(d + k * (W / 8)), c);                        \
            } else {                                                                         \
                MASKSTORE((void *)(d + k * (W / 8)), PREFIX(cnt), c);                        \
            }                                                                                \
            k += cnt;                                                                        \
        }                                                                                    \
        for (; i < len; i++) {                                                               \
            if ((nz[i / 64] >> (i % 64)) & 1) {                                              \
                memcpy(d + k++ * sizeof(T), p + i * sizeof(T), sizeof(T));                   \
            }                                                                                \
        }                                                                                    \
        return k;                                                                            \
    }                                                                                        \
                                                                                             \
    AVX2 static size_t expand##W(const void *src, size_t avail, size_t len,                 \
                                 const uint64_t *nz, void *out)                             \
    {                                                                                        \
        const char *s = src;                                                                 \
        char *o = out;                                                                       \
        size_t k = 0, i = 0;                                                                 \
        for (; i + LANES <= len; i += LANES) {                                               \
            unsigned m = (unsigned)(nz[i / 64] >> (i % 64)) & ((1u << LANES) - 1);           \
            size_t can = k < avail ? avail - k : 0;   /* branch-free but for the end */     \
            __m256i v = can >= LANES                                                         \
                            ? _mm256_loadu_si256((const __m256i *)(s + k * (W / 8)))         \
                            : MASKLOAD((const void *)(s + k * (W / 8)), PREFIX(can));        \
            __m256i e = _mm256_permutevar8x32_epi32(v, perm_index(TAB_E[m]));               \
            e = _mm256_and_si256(e, LANES_OF(m));                                            \
            k += (size_t)__builtin_popcount(m);                                              \
            _mm256_storeu_si256((__m256i *)(o + i * (W / 8)), e);                            \
        }                                                                                    \
        for (; i < len; i++) {                                                               \
            T v = 0;                                                                         \
            if ((nz[i / 64] >> (i % 64)) & 1) {                                              \
                memcpy(&v, s + k++ * sizeof(T), sizeof(T));                                  \
            }                                                                                \
            memcpy(o + i * sizeof(T), &v, sizeof(T));                                        \
        }                                                                                    \
        return k;                                                                            \
    }

#define MASKLOAD32(p, m)     _mm256_maskload_epi32((const int *)(p), m)
#define MASKSTORE32(p, m, v) _mm256_maskstore_epi32((int *)(p), m, v)
#define MASKLOAD64(p, m)     _mm256_maskload_epi64((const long long *)(p), m)
#define MASKSTORE64(p, m, v) _mm256_maskstore_epi64((long long *)(p), m, v)

PACK_AVX2(32, uint32_t, 8, compress8_tab, expand8_tab, prefix32, lanes_of32, MASKLOAD32,
          MASKSTORE32)
PACK_AVX2(64, uint64_t, 4, compress4_tab, expand4_tab, prefix64, lanes_of64, MASKLOAD64,
          MASKSTORE64)

/* The Bits last hop in one pass (see codec_isa_avx512.c): a = expand(values) by
 * permutation, straight into the reduce. Element-wise tail. */
#define RBITS_AVX2(W, T, LANES, TAB_E, PREFIX, LANES_OF, MASKLOAD, name, FLOAT, VOP, SOP)   \
    AVX2 static size_t reduce_bits##W##_##name(const void *vals, size_t avail,             \
                                               const uint64_t *anz, const void *bv,        \
                                               void *outv, size_t len, uint64_t *nz,       \
                                               codec_tally_t *t_out)                           \
    {                                                                                       \
        const char *pv = vals, *pb = bv;                                                    \
        char *po = outv;                                                                    \
        codec_tally_t tl = *t_out;                                      \
        const __m256i zero = _mm256_setzero_si256();                                        \
        const __m256i one = W == 32 ? _mm256_set1_epi32(1) : _mm256_set1_epi64x(1);         \
        __m256i any = _mm256_setzero_si256();                                               \
        size_t k = 0, base = 0, tail_marks = 0;                                             \
        (void)one;                                                                          \
        for (; base + 64 <= len && k + 64 <= avail; base += 64) { /* all readable */   \
            const uint64_t am = anz[base / 64];                                             \
            uint64_t w = 0;                                                                 \
            for (int j = 0; j < 64 / LANES; j++) {                                          \
                size_t off = (base + LANES * (size_t)j) * (W / 8);                          \
                unsigned m = (unsigned)(am >> (LANES * j)) & ((1u << LANES) - 1);           \
                size_t kj = k + (size_t)__builtin_popcountll(                               \
                                    am & ((1ull << (LANES * j)) - 1));                      \
                __m256i v = _mm256_loadu_si256((const __m256i *)(pv + kj * (W / 8)));       \
                __m256i va = _mm256_and_si256(                                              \
                    _mm256_permutevar8x32_epi32(v, perm_index(TAB_E[m])), LANES_OF(m));     \
                __m256i vb = _mm256_loadu_si256((const __m256i *)(pb + off));               \
                __m256i r = VOP;                                                            \
                _mm256_storeu_si256((__m256i *)(po + off), r);                              \
                w |= (uint64_t)(~ZMASK##W(r) & ((1u << LANES) - 1)) << (LANES * j);         \
                if (FLOAT) {                                                                \
                    any = _mm256_or_si256(any, MARKV##W(r));                                \
                }                                                                           \
            }                                                                               \
            k += (size_t)__builtin_popcountll(am);                                          \
            nz[base / 64] = w;                                                              \
            CODEC_TALLY(tl, w, 64);                                                     \
        }                                                                                   \
        for (; base + 64 <= len; base += 64) {                                              \
            const uint64_t am = anz[base / 64];                                             \
            uint64_t w = 0;                                                                 \
            for (int j = 0; j < 64 / LANES; j++) {                                          \
                size_t off = (base + LANES * (size_t)j) * (W / 8);                          \
                unsigned m = (unsigned)(am >> (LANES * j)) & ((1u << LANES) - 1);           \
                size_t kj = k + (size_t)__builtin_popcountll(                               \
                                    am & ((1ull << (LANES * j)) - 1));                      \
                size_t can = kj < avail ? avail - kj : 0;                                   \
                __m256i v = can >= LANES                                                    \
                                ? _mm256_loadu_si256((const __m256i *)(pv + kj * (W / 8)))  \
                                : MASKLOAD((const void *)(pv + kj * (W / 8)),               \
                                           PREFIX(codec_min(can, LANES)));                  \
                __m256i va = _mm256_and_si256(                                              \
                    _mm256_permutevar8x32_epi32(v, perm_index(TAB_E[m])), LANES_OF(m));     \
                __m256i vb = _mm256_loadu_si256((const __m256i *)(pb + off));               \
                __m256i r = VOP;                                                            \
                _mm256_storeu_si256((__m256i *)(po + off), r);                              \
                w |= (uint64_t)(~ZMASK##W(r) & ((1u << LANES) - 1)) << (LANES * j);         \
                if (FLOAT) {                                                                \
                    any = _mm256_or_si256(any, MARKV##W(r));                                \
                }                                                                           \
            }                                                                               \
            k += (size_t)__builtin_popcountll(am);                                          \
            nz[base / 64] = w;                                                              \
            CODEC_TALLY(tl, w, 64);                                                     \
        }                                                                                   \
        if (base < len) {                                                                   \
            const uint64_t am = anz[base / 64];                                             \
            uint64_t w = 0;                                                                 \
            for (size_t i = base; i < len; i++) {                                           \
                T a = 0, b, r;                                                              \
                if (((am >> (i - base)) & 1) && k < avail) {                                \
                    memcpy(&a, pv + k++ * sizeof(T), sizeof(T));                            \
                }                                                                           \
                memcpy(&b, pb + i * sizeof(T), sizeof(T));                                  \
                r = SOP;                                                                    \
                memcpy(po + i * sizeof(T), &r, sizeof(T));                                  \
                w |= (uint64_t)(r != 0) << (i - base);                                      \
                tail_marks += r > (T)(W == 32 ? CODEC_MARK32 : CODEC_MARK64);                \
            }                                                                               \
            nz[base / 64] = w;                                                              \
            CODEC_TALLY(tl, w, len - base);                                             \
        }                                                                                   \
        if (FLOAT) {                                                                        \
            tl.nans += tail_marks;                                                          \
            if (!_mm256_testz_si256(any, any)) {                                            \
                tl.nans += count_marks##W(po, base);                                        \
            }                                                                               \
        }                                                                                   \
        *t_out = tl;                                                                   \
        return k;                                                                           \
    }

#define RB32(name, FLOAT, VOP, SOP)                                                         \
    RBITS_AVX2(32, uint32_t, 8, expand8_tab, prefix32, lanes_of32, MASKLOAD32, name, FLOAT, \
               VOP, SOP)
#define RB64(name, FLOAT, VOP, SOP)                                                         \
    RBITS_AVX2(64, uint64_t, 4, expand4_tab, prefix64, lanes_of64, MASKLOAD64, name, FLOAT, \
               VOP, SOP)

RB32(fsum, 1, add_ps_a_first(va, vb), fsum32(a, b))
RB32(isum, 0, _mm256_add_epi32(va, vb), (uint32_t)(a + b))
RB32(bor, 0, _mm256_or_si256(va, vb), a | b)
RB32(bxor, 0, _mm256_xor_si256(va, vb), a ^ b)
RB32(lor, 0, LOR_VOP(32), (uint32_t)((a != 0) | (b != 0)))
RB64(fsum, 1, add_pd_a_first(va, vb), fsum64(a, b))
RB64(isum, 0, _mm256_add_epi64(va, vb), a + b)
RB64(bor, 0, _mm256_or_si256(va, vb), a | b)
RB64(bxor, 0, _mm256_xor_si256(va, vb), a ^ b)
RB64(lor, 0, LOR_VOP(64), (uint64_t)((a != 0) | (b != 0)))

/* ---- RLE markers and bit counts ------------------------------------------------ */

AVX2 static size_t find_marker32(const void *s, size_t avail)
{
    const char *p = s;
    size_t i = 0;
    for (; i + 8 <= avail; i += 8) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 4));
        unsigned m = MARKS32(r);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
    }
    for (; i < avail; i++) {
        if (codec_ld32(p + i * 4) > CODEC_MARK32) {
            return i;
        }
    }
    return avail;
}

AVX2 static size_t find_marker64(const void *s, size_t avail)
{
    const char *p = s;
    size_t i = 0;
    for (; i + 4 <= avail; i += 4) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 8));
        unsigned m = MARKS64(r);
        if (m != 0) {
            return i + (size_t)__builtin_ctz(m);
        }
    }
    for (; i < avail; i++) {
        if (codec_ld64(p + i * 8) > CODEC_MARK64) {
            return i;
        }
    }
    return avail;
}

AVX2 static size_t copy_literals32(const void *s, size_t avail, void *out)
{
    const char *p = s;
    char *o = out;
    size_t i = 0;
    for (; i + 8 <= avail; i += 8) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 4));
        unsigned m = MARKS32(r);
        if (m != 0) {
            size_t c = (size_t)__builtin_ctz(m);
            _mm256_maskstore_epi32((int *)(o + i * 4), prefix32(c), r);
            return i + c;
        }
        _mm256_storeu_si256((__m256i *)(o + i * 4), r);
    }
    for (; i < avail; i++) {
        uint32_t u = codec_ld32(p + i * 4);
        if (u > CODEC_MARK32) {
            return i;
        }
        codec_st32(o + i * 4, u);
    }
    return avail;
}

AVX2 static size_t copy_literals64(const void *s, size_t avail, void *out)
{
    const char *p = s;
    char *o = out;
    size_t i = 0;
    for (; i + 4 <= avail; i += 4) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(p + i * 8));
        unsigned m = MARKS64(r);
        if (m != 0) {
            size_t c = (size_t)__builtin_ctz(m);
            _mm256_maskstore_epi64((long long *)(o + i * 8), prefix64(c), r);
            return i + c;
        }
        _mm256_storeu_si256((__m256i *)(o + i * 8), r);
    }
    for (; i < avail; i++) {
        uint64_t u = codec_ld64(p + i * 8);
        if (u > CODEC_MARK64) {
            return i;
        }
        codec_st64(o + i * 8, u);
    }
    return avail;
}

AVX2 static size_t popcount_words(const void *p, size_t words)
{
    const unsigned char *b = p;
    size_t c = 0;
    for (size_t i = 0; i < words; i++) {
        c += (size_t)__builtin_popcountll(codec_ld64(b + i * 8));
    }
    return c;
}

#define AVX2_TABLE(W)                                                                  \
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

const codec_kernels_t codec_kernels_avx2[2] = {AVX2_TABLE(32), AVX2_TABLE(64)};

#endif
