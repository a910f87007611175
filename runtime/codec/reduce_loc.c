/*
 * MAXLOC / MINLOC on MPI's pair types: the better value with its index, and on
 * equal values the lower index (MPI's tie rule). Float values also follow fold's
 * max/min where ranks could otherwise see different bits: +0 and -0 compare equal
 * and give +0 (maxloc, AND of the bits) or -0 (minloc, OR), and a NaN wins (the
 * left one when both are), so every combining order gives the same result.
 *
 * Elements are written whole, padding as zeros: a reduced element never carries
 * uninitialised bytes onto the wire, and its bits are the same on every rank.
 *
 * Each element is read as two words (value, index with its padding) and the choice
 * made with masks instead of branches: that form GCC vectorises (SSE2 for the 8-byte
 * pairs, the AVX2 build for the 16-byte ones, which need 64-bit compares); field by
 * field with ?: it vectorised none of the float pairs.
 */
#include "reduce_impl.h"

#include <fold/fold.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "index in a word's low half");

/* The 8- and 16-byte pairs as words; the short-int pair as its fields. */
typedef struct { uint32_t v, i; } loc_words32_t;
typedef struct { uint64_t v, i; } loc_words64_t;   /* i: index, then 4 padding bytes */
typedef struct { int16_t v; uint16_t pad; int32_t i; } loc_short_int_t;

#define SAME_LAYOUT(words, pub, off_i)                                                   \
    _Static_assert(sizeof(words) == sizeof(pub) && offsetof(pub, v) == 0 &&             \
                       offsetof(pub, i) == (off_i),                                     \
                   #pub " layout")
SAME_LAYOUT(loc_words32_t, fold_float_int_t, 4);
SAME_LAYOUT(loc_words32_t, fold_2int_t, 4);
SAME_LAYOUT(loc_words64_t, fold_double_int_t, 8);
SAME_LAYOUT(loc_short_int_t, fold_short_int_t, 4);
#if LONG_MAX > INT_MAX
SAME_LAYOUT(loc_words64_t, fold_long_int_t, 8);
#define LONG_WORDS loc_words64_t
#define LONG_SIGNED int64_t
#else
SAME_LAYOUT(loc_words32_t, fold_long_int_t, 4);
#define LONG_WORDS loc_words32_t
#define LONG_SIGNED int32_t
#endif

/* Each loop is static and reached through a plain exported function: clang 14 names
 * an exported multi-versioned function's entry point "name.ifunc", which callers in
 * other files (reduce_kernel.c's table) would not find. */
#define EXPORT_LOOP(tag_name)                                                           \
    void fold_kernel_##tag_name(const void *left, const void *right, void *dst,        \
                                size_t count)                                           \
    {                                                                                   \
        loop_##tag_name(left, right, dst, count);                                       \
    }

/* W: the word type; V: the value's type (its bits are the value word); `better`:
 * > for maxloc, < for minloc; use_or: how equal values combine (see above; for
 * integers either gives the same bits). For integer values the NaN masks are
 * constant zero and vanish. */
#define LOC_WORDS_KERNEL(tag, name, P, W, V, better, use_or)                            \
    VECTOR_CLONES                                                                       \
    static void loop_##tag##_##name(const void *left, const void *right, void *dst,    \
                                    size_t count)                                       \
    {                                                                                   \
        const P *l = left;                                                              \
        const P *r = right;                                                             \
        P *d = dst;                                                                     \
        for (size_t k = 0; k < count; k++) {                                            \
            W ua = l[k].v, ub = r[k].v;                                                 \
            V av, bv;                                                                   \
            memcpy(&av, &ua, sizeof(av));                                               \
            memcpy(&bv, &ub, sizeof(bv));                                               \
            int32_t ai = (int32_t)(uint32_t)l[k].i, bi = (int32_t)(uint32_t)r[k].i;     \
            W a_nan = (W)0 - (W)(av != av);                                             \
            W ma = ((W)0 - (W)(av better bv)) | a_nan;                                  \
            W mb = ((W)0 - (W)((bv better av) | (bv != bv))) & ~a_nan;                  \
            W me = ~(ma | mb);                                                          \
            W lo = (W)(uint32_t)(ai < bi ? ai : bi);                                    \
            d[k].v = (ua & ma) | (ub & mb) | ((use_or ? ua | ub : ua & ub) & me);       \
            d[k].i = ((W)(uint32_t)ai & ma) | ((W)(uint32_t)bi & mb) | (lo & me);       \
        }                                                                               \
    }                                                                                   \
    EXPORT_LOOP(tag##_##name)

#define LOC_WORDS_KERNELS(tag, P, W, V)                                                 \
    LOC_WORDS_KERNEL(tag, maxloc, P, W, V, >, 0)                                        \
    LOC_WORDS_KERNEL(tag, minloc, P, W, V, <, 1)

LOC_WORDS_KERNELS(float_int, loc_words32_t, uint32_t, float)
LOC_WORDS_KERNELS(2int, loc_words32_t, uint32_t, int32_t)
LOC_WORDS_KERNELS(double_int, loc_words64_t, uint64_t, double)
LOC_WORDS_KERNELS(long_int, LONG_WORDS, uint64_t, LONG_SIGNED)

#define SHORT_INT_KERNEL(name, better)                                                  \
    VECTOR_CLONES                                                                       \
    static void loop_short_int_##name(const void *left, const void *right, void *dst,  \
                                      size_t count)                                     \
    {                                                                                   \
        const loc_short_int_t *l = left;                                                \
        const loc_short_int_t *r = right;                                               \
        loc_short_int_t *d = dst;                                                       \
        for (size_t k = 0; k < count; k++) {                                            \
            int av = l[k].v, bv = r[k].v, ai = l[k].i, bi = r[k].i;                     \
            int take_a = av better bv, take_b = bv better av;                           \
            d[k].v = (int16_t)(take_a ? av : bv);                                       \
            d[k].pad = 0;                                                               \
            d[k].i = take_a ? ai : take_b ? bi : ai < bi ? ai : bi;                     \
        }                                                                               \
    }                                                                                   \
    EXPORT_LOOP(short_int_##name)

SHORT_INT_KERNEL(maxloc, >)
SHORT_INT_KERNEL(minloc, <)
