/*
 * Sparse codecs for reduction messages, and the reduce kernels fused with them.
 *
 *   Bits, Idx  Shan et al., sec. III-F: the non-zero values packed, plus a bitmap
 *              (1 bit per element) or a list of 32-bit indices.
 *   RLE        Hofmann & Ruenger, sec. 2.1: the values with every run of zeros
 *              replaced by one NaN whose mantissa is the run length; fused into the
 *              reduction as a_C op b -> a (root), a op b -> a_C (first hop) and
 *              a_C op b -> c_C (middle hops), sec. 3.
 *
 * Only (op, datatype) pairs whose neutral element is all-zero bits are compressed
 * (fold_codec_supported): an element absent from a message is a real +0 / 0 operand,
 * and every fused kernel computes `0 op b` for it, so each result has the same bits
 * as decoding and then calling fold_reduce_local(op, dtype, a, b, ...). "Zero" means
 * all bits zero: -0.0 is a non-zero value and survives, so do NaN payloads (RLE
 * escapes the NaNs that look like its markers), denormals and infinities. Every
 * codec is lossless. Codecs exist for 4- and 8-byte elements: int32, int64, uint32,
 * uint64 (Bits, Idx) and float32, float64 (Bits, Idx, RLE).
 *
 * Pure functions over buffers with explicit lengths. A decoder treats its input as
 * untrusted: it validates the whole message before writing anything, so on an error
 * the output buffer is untouched. It accepts what decodes unambiguously even where
 * the encoder would have written it otherwise (explicit zero values in bits and
 * idx, runs split differently in rle): only encoder output is canonical. Nothing here allocates or logs;
 * fold_codec_error_detail() says why the last decode on this thread failed.
 *
 * Wire format (host byte order, which is little-endian wherever fold runs; no
 * alignment is required of the buffer):
 *
 *    0       4       5       6       8               16              24
 *    +-------+-------+-------+-------+---------------+---------------+
 *    | magic | codec | esize |   0   |  n (uint64)   |  k (uint64)   |   header
 *    +-------+-------+-------+-------+---------------+---------------+
 *    magic "FDC1"; codec: fold_codec_id_t; esize: element bytes (4 or 8);
 *    n: elements in the vector; k: payload count, as below.
 *
 *    dense  header | n values                                         k = n
 *    bits   header | bitmap: ceil(n/64) uint64 words | k values       k = non-zeros
 *                    (bit i%64 of word i/64 set <=> element i non-zero;
 *                     bits from n on are zero; popcount == k)
 *    idx    header | k values | k uint32 indices                      k = non-zeros
 *                    (strictly increasing, < n; needs n < 2^32)
 *    rle    header | k words, each a literal or a marker              k = words
 *
 * RLE words (W = 32 or 64 bits, M = 23 or 52 mantissa bits). The markers are the
 * negative NaNs: as unsigned integers, the words above -inf (0xff800000 or
 * 0xfff0000000000000). A marker's mantissa m (>= 1, as NaNs have one) says
 *
 *    m <  2^M - 1   a run of m zeros (+0.0)
 *    m == 2^M - 1   escape: the next word is a literal negative NaN of the data
 *
 * and every other word is a literal element (positive NaNs included). The encoder
 * ends each run of zeros at the element indices that are multiples of
 * FOLD_CODEC_RLE_SPLIT, so that it emits exactly stats.runs markers, and escapes
 * exactly stats.nans NaNs; a decoder accepts any run length. Example (float32):
 *
 *    data     1.5  0  0  0  0  2.0  -nan(0x400001)  0
 *    words    1.5  [run 4]  2.0  [escape]  -nan(0x400001)  [run 1]        k = 6
 *
 * Encoded sizes (fold_codec_size), with s = esize and H = FOLD_CODEC_HEADER_BYTES:
 *    dense H + n s | bits H + 8 ceil(n/64) + nnz s | idx H + nnz (s + 4)
 *    rle   H + (nnz + nans + runs) s
 */
#ifndef FOLD_CODEC_H
#define FOLD_CODEC_H

#include <fold/fold.h>

#include <stddef.h>
#include <stdint.h>

typedef enum fold_codec_id {
    FOLD_CODEC_DENSE = 0,
    FOLD_CODEC_BITS  = 1,
    FOLD_CODEC_IDX   = 2,
    FOLD_CODEC_RLE   = 3,
    FOLD_CODEC_NCODECS
} fold_codec_id_t;

#define FOLD_CODEC_HEADER_BYTES 24
#define FOLD_CODEC_MAGIC        0x31434446u   /* "FDC1" in memory */
/* RLE runs of zeros are split at element indices that are multiples of this. */
#define FOLD_CODEC_RLE_SPLIT    65536

/* "dense", "bits", "idx", "rle"; "unknown" otherwise. */
const char *fold_codec_name(fold_codec_id_t c);
/* A FOLD_CODEC value into a mask of (1 << id) bits: "auto" (bits, idx and rle),
 * "none" (0), or a comma-separated list of "bits", "idx", "rle"; case is ignored.
 * Returns FOLD_OK, or FOLD_ERR_INVALID_ARG (and leaves *mask_out alone). */
int fold_codec_parse(const char *s, int *mask_out);

/* What a vector looks like to the codecs.
 *   count  elements.
 *   nnz    elements whose bits are not all zero (-0.0 and NaNs count).
 *   runs   maximal runs of zero elements, a run also ending at each multiple of
 *          FOLD_CODEC_RLE_SPLIT (that only matters past 65536 zeros in a row):
 *          the RLE markers.
 *   nans   (float32/float64) NaNs with the sign bit set: the NaNs RLE escapes.
 *          Positive NaNs need no escape and are not counted. */
typedef struct fold_codec_stats {
    size_t count, nnz, runs, nans;
} fold_codec_stats_t;

/* 1 if (op, dtype) may be compressed: sum on float32, float64, int32, int64,
 * uint32, uint64; bor, bxor, lor on int32, int64, uint32, uint64. 0 otherwise. */
int fold_codec_supported(fold_op_t op, fold_dtype_t dtype);
/* The codecs the datatype can use, as a mask of (1 << id): bits|idx for the 4- and
 * 8-byte integers, bits|idx|rle for float32 and float64, 0 for the rest. */
int fold_codec_valid_mask(fold_dtype_t dtype);

/* Exact stats of x[0..n). For a datatype without codecs only count is meaningful
 * (nnz = n, runs = nans = 0). */
void fold_codec_count(fold_dtype_t dtype, const void *x, size_t n, fold_codec_stats_t *st);
/* The fraction of non-zero elements in at most `samples` cache lines spread evenly
 * over x[0..n) (1.0 for n == 0 or samples == 0): a few loads that rule out dense
 * data before a counting pass. */
double fold_codec_sample_density(fold_dtype_t dtype, const void *x, size_t n,
                                 size_t samples);
/* Exact size in bytes, header included, of a vector with these stats encoded with
 * c; SIZE_MAX when c cannot encode it (codec invalid for dtype, idx with
 * count >= 2^32). FOLD_CODEC_DENSE gives the header plus count * esize. */
size_t fold_codec_size(fold_codec_id_t c, fold_dtype_t dtype, const fold_codec_stats_t *st);
/* The codec of `mask` (valid for dtype) with the fewest bytes, or FOLD_CODEC_DENSE
 * when none is smaller than the raw count * esize bytes. Ties go to the lower id. */
fold_codec_id_t fold_codec_choose(fold_dtype_t dtype, const fold_codec_stats_t *st, int mask);

/* Encodes x[0..n) with codec c into wire[0..cap). Returns the bytes written
 * (== fold_codec_size of x's stats), or 0 when they would not fit cap, when c is
 * not valid for dtype, or for idx with n >= 2^32. Never writes past cap; on 0 the
 * contents of wire are unspecified. */
size_t fold_codec_encode(fold_codec_id_t c, fold_dtype_t dtype, const void *x, size_t n,
                         void *wire, size_t cap);

/* Decodes an untrusted message wire[0..len) into out[0..n). It checks the magic,
 * the codec (valid for dtype), the element size (== dtype's), n (== the header's),
 * every length against len exactly, idx indices (strictly increasing, < n), the
 * bits popcount (== k) and padding, and that RLE runs and literals make exactly n
 * elements. Returns FOLD_OK, FOLD_ERR_MALFORMED (out untouched), or
 * FOLD_ERR_INVALID_ARG for a datatype without codecs or a NULL buffer. */
int fold_codec_decode(fold_dtype_t dtype, const void *wire, size_t len, void *out, size_t n);

/* Fused last hop: out[i] = a[i] op b[i], a the encoded message wire[0..len), b
 * dense. out may be b (never wire, never a partial overlap). Validates as
 * fold_codec_decode does, before writing. If st != NULL, fills the stats of out,
 * counted in the same pass. FOLD_ERR_INVALID_ARG for an unsupported (op, dtype). */
int fold_codec_reduce_wire(fold_op_t op, fold_dtype_t dtype, const void *wire, size_t len,
                           const void *b, void *out, size_t n, fold_codec_stats_t *st);
/* Dense reduce that counts: out = a op b (out may be a or b), stats of out into st
 * (st may be NULL). (op, dtype) must be supported: otherwise nothing is done and
 * st->count is 0. */
void fold_codec_reduce_count(fold_op_t op, fold_dtype_t dtype, const void *a, const void *b,
                             void *out, size_t n, fold_codec_stats_t *st);
/* Fused first hop: (a op b) encoded with c into wire[0..cap); a and b untouched.
 * Returns the bytes written, 0 when they do not fit (or c/op invalid). */
size_t fold_codec_reduce_encode(fold_op_t op, fold_dtype_t dtype, fold_codec_id_t c,
                                const void *a, const void *b, size_t n, void *wire,
                                size_t cap);
/* Fused middle hop: (a_C op b) encoded with c into out_wire[0..cap), a_C the
 * message wire[0..len). Returns FOLD_OK with *out_len the bytes written, or 0 when
 * they do not fit cap; an error (and *out_len = 0) for a malformed message or an
 * unsupported (op, dtype, c). out_wire must not overlap wire or b. */
int fold_codec_reduce_wire_encode(fold_op_t op, fold_dtype_t dtype, fold_codec_id_t c,
                                  const void *wire, size_t len, const void *b, size_t n,
                                  void *out_wire, size_t cap, size_t *out_len);

/* Why the last fold_codec_decode / reduce_wire* on this thread refused its
 * message (a static string; "" after a success). For the caller's log line. */
const char *fold_codec_error_detail(void);

/* ---- Instruction set ------------------------------------------------------------
 * The kernels exist in three builds picked once at run time, the best the CPU has:
 * AVX-512 (F, BW, VL), AVX2 (+ BMI1/2, POPCNT) and portable C. All give the same
 * bytes. Tests and benchmarks force one with fold_codec_set_isa (process-wide: not
 * while another thread runs a codec). */
typedef enum fold_codec_isa {
    FOLD_CODEC_ISA_AUTO = 0,   /* the best available */
    FOLD_CODEC_ISA_SCALAR,
    FOLD_CODEC_ISA_AVX2,
    FOLD_CODEC_ISA_AVX512,
    FOLD_CODEC_ISA_COUNT
} fold_codec_isa_t;

/* FOLD_OK, or FOLD_ERR_UNSUPPORTED when this CPU (or build) lacks it. */
int              fold_codec_set_isa(fold_codec_isa_t isa);
fold_codec_isa_t fold_codec_get_isa(void);   /* never AUTO */
int              fold_codec_isa_available(fold_codec_isa_t isa);
const char      *fold_codec_isa_name(fold_codec_isa_t isa);   /* "scalar", "avx2", ... */
/* "auto", "scalar", "avx2", "avx512" (case ignored): FOLD_OK or FOLD_ERR_INVALID_ARG. */
int              fold_codec_isa_parse(const char *s, fold_codec_isa_t *isa);

#endif
