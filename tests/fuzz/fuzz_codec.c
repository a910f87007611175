/*
 * libFuzzer target for the codec decoders (runtime/codec/codec.h). Built by run.sh
 * as fuzz_bits, fuzz_idx, fuzz_rle (FUZZ_CODEC = the codec id written into the
 * message's codec byte, so the fuzzer spends its time in that payload) and fuzz_any
 * (FUZZ_CODEC unset: the header too is the fuzzer's).
 *
 * Input: one control byte, then the message.
 *    control bits 0-1  datatype: float32, float64, int32, uint64
 *                 2    expect n + 1 instead of the header's n (must be refused)
 *                 3-4  op for the fused entries: sum, bor, bxor, lor (integers)
 *                 5-6  codec for reduce_wire_encode: dense, bits, idx, rle
 *
 * Checks, besides ASan/UBSan:
 *   - every decoder entry (decode, reduce_wire, reduce_wire_encode) takes the same
 *     decision, under the portable build and under the best ISA, and gives the
 *     same bytes under both;
 *   - a refusal leaves the outputs untouched;
 *   - decode succeeds => for every codec, encoding the vector takes exactly
 *     fold_codec_size bytes, and decoding that gives the same vector back; and
 *     for dense, bits and idx, whose encodings are unique, re-encoding with the
 *     message's codec gives the message itself (so nothing invalid was accepted),
 *     unless it carries explicit zero values, which decoders accept;
 *   - reduce_wire == reduce_count over the decoded vector (bits and stats), and
 *     reduce_wire_encode decodes to the same.
 */
#include "codec/codec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H         FOLD_CODEC_HEADER_BYTES
/* Elements a message may hold. A long campaign may lower it (run.sh: FUZZ_MAX_N=4096):
 * what the decoders do does not change with n beyond loop bounds, and an execution
 * costs in proportion to it. */
#ifdef FUZZ_MAX_N
#define MAX_N     ((size_t)FUZZ_MAX_N)
#else
#define MAX_N     ((size_t)1 << 16)
#endif
#define CANARY    0x5a

static const fold_dtype_t dtypes[4] = {FOLD_FLOAT32, FOLD_FLOAT64, FOLD_INT32, FOLD_UINT64};
static const fold_op_t ops[4] = {FOLD_OP_SUM, FOLD_OP_BOR, FOLD_OP_BXOR, FOLD_OP_LOR};

static size_t esize_of(fold_dtype_t dt)
{
    return dt == FOLD_FLOAT64 || dt == FOLD_UINT64 ? 8 : 4;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_codec: invariant broken: %s\n", what);
    abort();
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        abort();
    }
    return p;
}

static int untouched(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != CANARY) {
            return 0;
        }
    }
    return 1;
}

static int stats_eq(const fold_codec_stats_t *a, const fold_codec_stats_t *b)
{
    return a->count == b->count && a->nnz == b->nnz && a->runs == b->runs && a->nans == b->nans;
}

/* What one ISA makes of the message. */
typedef struct verdict {
    int                rc_decode, rc_wire, rc_wire_enc;
    unsigned char     *dec;       /* n elements */
    unsigned char     *red;       /* n elements: a_C op b */
    fold_codec_stats_t red_st;
    unsigned char     *enc;       /* reduce_wire_encode output */
    size_t             enc_len;
} verdict_t;

static void run_entries(fold_dtype_t dt, fold_op_t op, fold_codec_id_t oc, const uint8_t *msg,
                        size_t len, size_t n, const unsigned char *b, verdict_t *v)
{
    size_t es = esize_of(dt);
    size_t bytes = n * es, cap = H + 2 * bytes + bytes / 8 + 64;
    v->dec = xmalloc(bytes);
    v->red = xmalloc(bytes);
    v->enc = xmalloc(cap);
    memset(v->dec, CANARY, bytes);
    memset(v->red, CANARY, bytes);

    v->rc_decode = fold_codec_decode(dt, msg, len, v->dec, n);
    if (v->rc_decode != FOLD_OK && !untouched(v->dec, bytes)) {
        fail("decode refused but wrote");
    }
    v->rc_wire = fold_codec_reduce_wire(op, dt, msg, len, b, v->red, n, &v->red_st);
    if (v->rc_wire != FOLD_OK && !untouched(v->red, bytes)) {
        fail("reduce_wire refused but wrote");
    }
    v->enc_len = 1;
    v->rc_wire_enc = fold_codec_reduce_wire_encode(op, dt, oc, msg, len, b, n, v->enc, cap,
                                                   &v->enc_len);
    if (v->rc_wire_enc != FOLD_OK && v->enc_len != 0) {
        fail("reduce_wire_encode refused but gave a length");
    }
    if ((v->rc_decode == FOLD_OK) != (v->rc_wire == FOLD_OK) ||
        (v->rc_decode == FOLD_OK) != (v->rc_wire_enc == FOLD_OK)) {
        fail("decode, reduce_wire and reduce_wire_encode disagree on validity");
    }
}

static void free_verdict(verdict_t *v)
{
    free(v->dec);
    free(v->red);
    free(v->enc);
}

/* Whether a valid message should be byte for byte its re-encoding: dense, and
 * bits or idx without explicit zero values (decoders accept those; only the
 * encoder's output is canonical). RLE may split runs any way: never. */
static int canonical(const uint8_t *msg, size_t len, size_t n, size_t es)
{
    uint64_t k;
    memcpy(&k, msg + 16, 8);
    if (msg[4] == FOLD_CODEC_DENSE) {
        return 1;
    }
    if (msg[4] != FOLD_CODEC_BITS && msg[4] != FOLD_CODEC_IDX) {
        return 0;
    }
    size_t vals = H + (msg[4] == FOLD_CODEC_BITS ? (n + 63) / 64 * 8 : 0);
    for (size_t j = 0; j < k && vals + (j + 1) * es <= len; j++) {
        uint64_t v = 0;
        memcpy(&v, msg + vals + j * es, es);
        if (v == 0) {
            return 0;
        }
    }
    return 1;
}

/* Re-encoding the decoded vector with every codec gives it back, at the size the
 * stats predict; with a canonical codec, the message is its own re-encoding. */
static void check_reencode(fold_dtype_t dt, const unsigned char *x, size_t n,
                           const uint8_t *msg, size_t len)
{
    size_t es = esize_of(dt), bytes = n * es;
    fold_codec_stats_t st;
    fold_codec_count(dt, x, n, &st);
    unsigned char *back = xmalloc(bytes);
    for (int c = 0; c < FOLD_CODEC_NCODECS; c++) {
        if (c != FOLD_CODEC_DENSE && !(fold_codec_valid_mask(dt) & (1 << c))) {
            continue;
        }
        size_t size = fold_codec_size((fold_codec_id_t)c, dt, &st);
        unsigned char *w = xmalloc(size);
        if (fold_codec_encode((fold_codec_id_t)c, dt, x, n, w, size) != size) {
            fail("re-encode size differs from fold_codec_size");
        }
        if (size > H && fold_codec_encode((fold_codec_id_t)c, dt, x, n, w, size - 1) != 0) {
            fail("re-encode fits one byte less");
        }
        if (fold_codec_encode((fold_codec_id_t)c, dt, x, n, w, size) != size ||
            fold_codec_decode(dt, w, size, back, n) != FOLD_OK || memcmp(back, x, bytes) != 0) {
            fail("re-encoded vector does not decode to itself");
        }
        if (c == msg[4] && canonical(msg, len, n, es) && (size != len || memcmp(w, msg, len) != 0)) {
            fail("accepted a message that is not the encoding of what it decodes to");
        }
        free(w);
    }
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    uint8_t ctl = data[0];
    fold_dtype_t dt = dtypes[ctl & 3];
    size_t es = esize_of(dt);
    fold_op_t op = ops[(ctl >> 3) & 3];
    if (!fold_codec_supported(op, dt)) {
        op = FOLD_OP_SUM;
    }
    fold_codec_id_t oc = (fold_codec_id_t)((ctl >> 5) & 3);
    if (oc != FOLD_CODEC_DENSE && !(fold_codec_valid_mask(dt) & (1 << oc))) {
        oc = FOLD_CODEC_BITS;
    }

    /* The message, in a buffer of exactly its size (ASan sees any over-read). */
    size_t len = size - 1;
    uint8_t *msg = xmalloc(len);
    memcpy(msg, data + 1, len);
#ifdef FUZZ_CODEC
    if (len > 4) {
        msg[4] = FUZZ_CODEC;
    }
#endif
    uint64_t hn = 0;
    if (len >= 16) {
        memcpy(&hn, msg + 8, 8);
    }
    size_t n = hn <= MAX_N ? (size_t)hn : (size_t)(hn % 97);
    if (ctl & 4) {
        n++;
    }

    unsigned char *b = xmalloc(n * es);
    for (size_t i = 0; i < n * es; i++) {
        b[i] = (unsigned char)(i % 7 == 0 ? 0 : i * 37 + 11);
    }

    verdict_t v[2];
    fold_codec_set_isa(FOLD_CODEC_ISA_SCALAR);
    run_entries(dt, op, oc, msg, len, n, b, &v[0]);
    fold_codec_set_isa(FOLD_CODEC_ISA_AUTO);
    run_entries(dt, op, oc, msg, len, n, b, &v[1]);

    size_t bytes = n * es;
    if (v[0].rc_decode != v[1].rc_decode || v[0].rc_wire != v[1].rc_wire ||
        v[0].rc_wire_enc != v[1].rc_wire_enc) {
        fail("scalar and vector builds disagree on validity");
    }
    if (v[0].rc_decode == FOLD_OK) {
        if (memcmp(v[0].dec, v[1].dec, bytes) != 0 || memcmp(v[0].red, v[1].red, bytes) != 0 ||
            !stats_eq(&v[0].red_st, &v[1].red_st) || v[0].enc_len != v[1].enc_len ||
            memcmp(v[0].enc, v[1].enc, v[0].enc_len) != 0) {
            fail("scalar and vector builds give different bytes");
        }
        /* The fused pass equals decode-then-reduce. */
        unsigned char *dense = xmalloc(bytes);
        fold_codec_stats_t st;
        fold_codec_reduce_count(op, dt, v[1].dec, b, dense, n, &st);
        if (memcmp(dense, v[1].red, bytes) != 0 || !stats_eq(&st, &v[1].red_st)) {
            fail("reduce_wire differs from decode + reduce_count");
        }
        if (v[1].enc_len == 0) {
            fail("reduce_wire_encode did not fit a generous cap");
        }
        unsigned char *back = xmalloc(bytes);
        if (fold_codec_decode(dt, v[1].enc, v[1].enc_len, back, n) != FOLD_OK ||
            memcmp(back, dense, bytes) != 0) {
            fail("reduce_wire_encode output does not decode to a op b");
        }
        free(back);
        free(dense);
        check_reencode(dt, v[1].dec, n, msg, len);
    }
    free_verdict(&v[0]);
    free_verdict(&v[1]);
    free(b);
    free(msg);
    return 0;
}
