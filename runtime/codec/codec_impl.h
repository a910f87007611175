/*
 * Inside the codec library (runtime/codec/codec*.c); nothing else includes this.
 *
 * Every pass over a vector goes a block of CODEC_BLOCK elements at a time:
 *
 *    reader (a message's codec)        kernels (one ISA)            writer (a codec)
 *    block of a_C -> dense, in L1  ->  out = a op b, bitmap of   ->  block -> wire
 *                                      out's non-zeros, tally
 *
 * (Bits, the common case, skips the dense copy of a: its reader hands the bitmap
 * and values to a kernel that expands straight into the reduce.)
 *
 * The kernels (codec_isa_*.c) are the only vector code: a pass over a block that
 * computes (or just reads) the values and sets one bit per non-zero element, which
 * is both the Bits bitmap and everything the stats, Idx and RLE need; and the
 * compress / expand of packed values. Readers and writers (codec_dense.c,
 * codec_bits.c, codec_idx.c, codec_rle.c) are plain C over those bitmaps; the
 * passes that join them live in codec_fused.c, the header and the choices in
 * codec.c.
 */
#ifndef FOLD_CODEC_IMPL_H
#define FOLD_CODEC_IMPL_H

#include "codec/codec.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Elements per block: a divisor of FOLD_CODEC_RLE_SPLIT and a multiple of 64, so a
 * block's bitmap is whole words and run splits fall on block starts. 2048 float64
 * are 16 KiB: a dense block and its bitmap stay in L1. */
#define CODEC_BLOCK  2048
#define CODEC_WORDS  (CODEC_BLOCK / 64)

_Static_assert(FOLD_CODEC_RLE_SPLIT % CODEC_BLOCK == 0, "blocks must divide the RLE split");
_Static_assert(FOLD_CODEC_HEADER_BYTES % 8 == 0, "header must keep 8-byte alignment");

/* RLE markers: words above these (unsigned) are negative NaNs. */
#define CODEC_MARK32  0xff800000u
#define CODEC_MARK64  0xfff0000000000000ull
#define CODEC_ESC32   0x007fffffu            /* mantissa of the escape marker */
#define CODEC_ESC64   0x000fffffffffffffull

/* The element-wise operations with an all-zero neutral element. */
typedef enum codec_opk {
    CODEC_OPK_FSUM,   /* float sum: a + b in IEEE arithmetic; when both are NaN the
                         result is a quieted, as x86 gives for a first operand a, the
                         order of fold_reduce_local's loop. Pinned, not left to the
                         compiler, which may swap a commutative add's operands. */
    CODEC_OPK_ISUM,   /* integer sum modulo 2^bits (signed and unsigned alike) */
    CODEC_OPK_BOR,
    CODEC_OPK_BXOR,
    CODEC_OPK_LOR,    /* (a != 0) | (b != 0) as 0 or 1 */
    CODEC_OPK_COUNT,
    CODEC_OPK_NONE = -1
} codec_opk_t;

/* What a block's bitmap says, added up as the kernels go: non-zeros, runs of
 * zeros that start in the block (a zero whose predecessor is non-zero; prev_zero
 * carries the last element's state from block to block, and the caller clears it
 * where runs are cut, at multiples of FOLD_CODEC_RLE_SPLIT), and the negative NaNs
 * (float types). */
typedef struct codec_tally {
    size_t nnz, runs, nans;
    int    prev_zero;
} codec_tally_t;

/* Adds one bitmap word of `bits` elements (1..64; higher bits clear) to the tally
 * t, a struct lvalue: kernels keep a local copy whose address is never taken, so
 * it lives in registers. (Each ISA file gets its own popcount instruction.) */
#define CODEC_TALLY(t, w, bits)                                                     \
    do {                                                                            \
        uint64_t codec_tw_ = (w);                                                   \
        size_t codec_tb_ = (bits);                                                  \
        uint64_t codec_tz_ = ~codec_tw_ & (codec_tb_ == 64 ? ~0ull                  \
                                                           : (1ull << codec_tb_) - 1); \
        (t).nnz += (size_t)__builtin_popcountll(codec_tw_);                         \
        (t).runs += (size_t)__builtin_popcountll(                                   \
            codec_tz_ & ~((codec_tz_ << 1) | (uint64_t)(t).prev_zero));             \
        (t).prev_zero = (int)((codec_tz_ >> (codec_tb_ - 1)) & 1);                  \
    } while (0)

/* One instruction set's kernels for one element width (4 or 8 bytes). Lengths are
 * in elements, len <= CODEC_BLOCK; pointers need no alignment. Bitmaps cover the
 * block (bit i of word i/64 for element i) and the kernels clear the bits past len. */
typedef struct codec_kernels {
    /* nz := non-zero bitmap of x, tallied into t; negative NaNs counted only when
     * `nans` is set (float types). */
    void (*scan)(const void *x, size_t len, uint64_t *nz, int nans, codec_tally_t *t);
    /* out := a op b (out may be a or b), nz := its bitmap, tallied into t (NaNs
     * for FSUM only). */
    void (*reduce[CODEC_OPK_COUNT])(const void *a, const void *b, void *out, size_t len,
                                    uint64_t *nz, codec_tally_t *t);
    /* Optional (NULL: expand, then reduce): out := expand(vals, anz) op b, the two
     * in one pass, nz and t as reduce. vals holds `avail` readable elements, at
     * least popcount(anz). Returns how many values it used. */
    size_t (*reduce_bits[CODEC_OPK_COUNT])(const void *vals, size_t avail,
                                           const uint64_t *anz, const void *b, void *out,
                                           size_t len, uint64_t *nz, codec_tally_t *t);
    /* dst := x's elements whose nz bit is set, packed; returns how many. dst has
     * room for `room` elements, at least that many. */
    size_t (*compress)(const void *x, size_t len, const uint64_t *nz, void *dst,
                       size_t room);
    /* out := element i from src (in order) where nz bit i is set, else 0; src holds
     * `avail` readable elements, at least popcount(nz). Returns how many it used. */
    size_t (*expand)(const void *src, size_t avail, size_t len, const uint64_t *nz,
                     void *out);
    /* Index of the first RLE marker in s[0..avail) (float widths), or avail. */
    size_t (*find_marker)(const void *s, size_t avail);
    /* Copies the words of s[0..avail) before the first marker to out; returns how
     * many (find_marker and a copy in one pass). */
    size_t (*copy_literals)(const void *s, size_t avail, void *out);
    /* Set bits in `words` 64-bit words read from p (any alignment). */
    size_t (*popcount)(const void *p, size_t words);
} codec_kernels_t;

extern const codec_kernels_t codec_kernels_scalar[2];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CODEC_HAVE_X86 1
extern const codec_kernels_t codec_kernels_avx2[2];
extern const codec_kernels_t codec_kernels_avx512[2];
#endif

/* The kernels of the current ISA for esize 4 or 8. */
const codec_kernels_t *codec_kernels_for(size_t esize);

/* ---- Messages ---------------------------------------------------------------- */

/* A message whose header and payload were validated. */
typedef struct codec_msg {
    fold_codec_id_t      codec;
    size_t               esize;
    size_t               n;
    size_t               k;
    const unsigned char *bitmap;   /* bits */
    const unsigned char *vals;     /* values (dense, bits, idx), words (rle) */
    const unsigned char *idx;      /* idx */
} codec_msg_t;

/* Reads a message's blocks in order. */
typedef struct codec_reader {
    const codec_msg_t     *m;
    const codec_kernels_t *kern;
    size_t                 pos;    /* values / words consumed */
    uint64_t               zeros;  /* rle: zeros still owed by the last marker */
} codec_reader_t;

/* Writes a message block by block, then the header. */
typedef struct codec_writer {
    fold_codec_id_t        codec;
    size_t                 esize;
    size_t                 n;
    unsigned char         *wire;
    size_t                 cap;
    const codec_kernels_t *kern;
    size_t                 k;      /* values / words written */
    size_t                 zeros;  /* rle: zeros of the current run not yet written */
    int                    full;   /* set once something did not fit cap */
} codec_writer_t;

/* One block handed to a writer: its values, bitmap and counts. */
typedef struct codec_block {
    const void     *x;
    const uint64_t *nz;
    size_t          i0;     /* first element's index in the vector */
    size_t          len;
    size_t          nnz;
    size_t          nans;
} codec_block_t;

/* A codec's payload: validation, reading and writing. */
typedef struct codec_format {
    /* Checks the payload of m (header fields and len already matched); 0 or a
     * static reason. */
    const char *(*check)(const codec_msg_t *m, const codec_kernels_t *kern);
    /* Block [i0, i0 + len) of the vector, dense: either into tmp (returned) or a
     * pointer into the message (dense). Blocks come in order. */
    const void *(*read)(codec_reader_t *r, size_t i0, size_t len, void *tmp);
    /* Starts a message (sets w->full when even its fixed part cannot fit). */
    void (*begin)(codec_writer_t *w);
    /* Optional (NULL: read, then kern->reduce): block [i0, i0 + len) of the message
     * op b into out in one pass (tmp: a block of scratch, which out may be). */
    void (*read_reduce)(codec_reader_t *r, codec_opk_t opk, size_t i0, size_t len,
                        const void *b, void *out, void *tmp, uint64_t *nz, codec_tally_t *t);
    /* Appends a block; blocks come in order. Sets w->full when it does not fit. */
    void (*write)(codec_writer_t *w, const codec_block_t *blk);
    /* Completes the message; returns its bytes, header included, or 0 if full. */
    size_t (*finish)(codec_writer_t *w);
} codec_format_t;

extern const codec_format_t codec_format_dense;
extern const codec_format_t codec_format_bits;
extern const codec_format_t codec_format_idx;
extern const codec_format_t codec_format_rle;

const codec_format_t *codec_format(fold_codec_id_t c);

/* Header and message validation (codec.c). codec_parse() returns FOLD_OK or
 * FOLD_ERR_MALFORMED, and records the reason for fold_codec_error_detail(). */
int  codec_parse(fold_dtype_t dtype, const void *wire, size_t len, size_t n,
                 const codec_kernels_t *kern, codec_msg_t *m);
void codec_write_header(unsigned char *wire, fold_codec_id_t c, size_t esize, size_t n,
                        size_t k);
void codec_set_error(const char *why);

size_t      codec_esize(fold_dtype_t dtype);   /* 4 or 8 for codec types, else 0 */
int         codec_is_float(fold_dtype_t dtype);
codec_opk_t codec_opk(fold_op_t op, fold_dtype_t dtype);

/* Unaligned loads and stores. */
static inline uint32_t codec_ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint64_t codec_ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline void codec_st32(void *p, uint32_t v)
{
    memcpy(p, &v, sizeof(v));
}

static inline void codec_st64(void *p, uint64_t v)
{
    memcpy(p, &v, sizeof(v));
}

/* Element i of a 4- or 8-byte vector as a 64-bit integer, and back. */
static inline uint64_t codec_ld(const void *p, size_t esize)
{
    return esize == 4 ? codec_ld32(p) : codec_ld64(p);
}

static inline void codec_st(void *p, size_t esize, uint64_t v)
{
    if (esize == 4) {
        codec_st32(p, (uint32_t)v);
    } else {
        codec_st64(p, v);
    }
}

static inline int codec_is_marker(uint64_t u, size_t esize)
{
    return esize == 4 ? u > CODEC_MARK32 : u > CODEC_MARK64;
}

static inline size_t codec_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

#endif
