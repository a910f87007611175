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
 * field with ?: it vectorised none of the float pairs, and short-int ran at a third
 * of the speed.
 */
#include "reduce_impl.h"

#include <fold/fold.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "index in a word's low half");

/* The pairs as two words: value (short-int: value, then 2 padding bytes), index (the
 * 16-byte pairs: index, then 4 padding bytes). */
typedef struct { uint32_t v, i; } loc_words32_t;
typedef struct { uint64_t v, i; } loc_words64_t;

#define SAME_LAYOUT(words, pub, off_i)                                                   \
    _Static_assert(sizeof(words) == sizeof(pub) && offsetof(pub, v) == 0 &&             \
                       offsetof(pub, i) == (off_i),                                     \
                   #pub " layout")
SAME_LAYOUT(loc_words32_t, fold_float_int_t, 4);
SAME_LAYOUT(loc_words32_t, fold_2int_t, 4);
SAME_LAYOUT(loc_words64_t, fold_double_int_t, 8);
SAME_LAYOUT(loc_words32_t, fold_short_int_t, 4);
#if LONG_MAX > INT_MAX
SAME_LAYOUT(loc_words64_t, fold_long_int_t, 8);
#define LONG_WORDS loc_words64_t
#define LONG_WORD uint64_t
#define LONG_SIGNED int64_t
#else
SAME_LAYOUT(loc_words32_t, fold_long_int_t, 4);
#define LONG_WORDS loc_words32_t
#define LONG_WORD uint32_t
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

/* The value a word holds: its bits as V, or (short) its low half sign-extended. */
#define VALUE_BITS(u, v) memcpy(&(v), &(u), sizeof(v))
#define VALUE_LOW16(u, v) ((v) = (int32_t)((u) << 16) >> 16)

/* W: the word type; V: the value's type; VALUE: how a word gives it; vmask: the value
 * word's bits that are value (short: the low half; above it, padding, written 0);
 * `better`: > for maxloc, < for minloc; use_or: how equal values combine (see above;
 * for integers either gives the same bits). For integer values the NaN masks are
 * constant zero and vanish. */
#define LOC_WORDS_KERNEL(tag, name, P, W, V, VALUE, vmask, better, use_or)              \
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
            VALUE(ua, av);                                                              \
            VALUE(ub, bv);                                                              \
            int32_t ai = (int32_t)(uint32_t)l[k].i, bi = (int32_t)(uint32_t)r[k].i;     \
            W a_nan = (W)0 - (W)(av != av);                                             \
            W ma = ((W)0 - (W)(av better bv)) | a_nan;                                  \
            W mb = ((W)0 - (W)((bv better av) | (bv != bv))) & ~a_nan;                  \
            W me = ~(ma | mb);                                                          \
            W lo = (W)(uint32_t)(ai < bi ? ai : bi);                                    \
            W v = (ua & ma) | (ub & mb) | ((use_or ? ua | ub : ua & ub) & me);          \
            d[k].v = v & (W)(vmask);                                                    \
            d[k].i = ((W)(uint32_t)ai & ma) | ((W)(uint32_t)bi & mb) | (lo & me);       \
        }                                                                               \
    }                                                                                   \
    EXPORT_LOOP(tag##_##name)

#define LOC_WORDS_KERNELS(tag, P, W, V, VALUE, vmask)                                   \
    LOC_WORDS_KERNEL(tag, maxloc, P, W, V, VALUE, vmask, >, 0)                          \
    LOC_WORDS_KERNEL(tag, minloc, P, W, V, VALUE, vmask, <, 1)

LOC_WORDS_KERNELS(float_int, loc_words32_t, uint32_t, float, VALUE_BITS, ~0u)
LOC_WORDS_KERNELS(2int, loc_words32_t, uint32_t, int32_t, VALUE_BITS, ~0u)
LOC_WORDS_KERNELS(short_int, loc_words32_t, uint32_t, int32_t, VALUE_LOW16, 0xffffu)
LOC_WORDS_KERNELS(double_int, loc_words64_t, uint64_t, double, VALUE_BITS, ~0ull)
LOC_WORDS_KERNELS(long_int, LONG_WORDS, LONG_WORD, LONG_SIGNED, VALUE_BITS, ~0ull)
