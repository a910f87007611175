/*
 * Every pass over a vector: count, encode, decode and the fused reductions of
 * Hofmann & Ruenger sec. 3 (a_C op b -> a, a op b -> a_C, a_C op b -> c_C). Each
 * runs block by block (CODEC_BLOCK elements), so a decoded block of a_C and the
 * block of the result stay in L1 between the reader, the kernel and the writer:
 * memory sees each operand once, as in one fused loop.
 *
 *    block   reader (codec of a_C)    kernel (ISA)                 writer (codec c)
 *    i0      a = block of a_C   -->   r = a op b, bitmap of r  --> append r to wire
 *                                     + nnz/runs/NaNs of r
 *
 * A message is validated whole before the first block (codec_parse), so a
 * malformed one leaves every output untouched.
 */
#include "codec/codec_impl.h"

/* A block of values (2048 float64) and its bitmap. */
typedef struct codec_scratch {
    _Alignas(64) unsigned char data[CODEC_BLOCK * 8];
    _Alignas(64) uint64_t nz[CODEC_WORDS];
} codec_scratch_t;

/* A block's tally, runs cut at every FOLD_CODEC_RLE_SPLIT; prev_zero carries the
 * previous block's last element. */
static codec_tally_t tally_begin(size_t i0, int prev_zero)
{
    codec_tally_t t = {0, 0, 0, i0 % FOLD_CODEC_RLE_SPLIT == 0 ? 0 : prev_zero};
    return t;
}

static void stats_add(fold_codec_stats_t *st, const codec_tally_t *t)
{
    st->nnz += t->nnz;
    st->runs += t->runs;
    st->nans += t->nans;
}

static void stats_begin(fold_codec_stats_t *st, size_t n)
{
    st->count = n;
    st->nnz = st->runs = st->nans = 0;
}

static size_t block_len(size_t n, size_t i0)
{
    return codec_min(CODEC_BLOCK, n - i0);
}

/* A block of the message op b, fused where the codec has a one-pass kernel. */
static void read_reduce(codec_reader_t *r, const codec_format_t *fmt, codec_opk_t opk,
                        size_t i0, size_t len, const void *b, void *out, codec_scratch_t *s,
                        codec_tally_t *t)
{
    if (fmt->read_reduce != NULL) {
        fmt->read_reduce(r, opk, i0, len, b, out, s->data, s->nz, t);
    } else {
        const void *a = fmt->read(r, i0, len, s->data);
        r->kern->reduce[opk](a, b, out, len, s->nz, t);
    }
}

static int codec_usable(fold_codec_id_t c, fold_dtype_t dtype)
{
    return c == FOLD_CODEC_DENSE ||
           ((int)c > 0 && c < FOLD_CODEC_NCODECS && (fold_codec_valid_mask(dtype) & (1 << c)));
}

static void writer_init(codec_writer_t *w, fold_codec_id_t c, size_t es, size_t n, void *wire,
                        size_t cap, const codec_kernels_t *kern)
{
    w->codec = c;
    w->esize = es;
    w->n = n;
    w->wire = wire;
    w->cap = cap;
    w->kern = kern;
    w->k = 0;
    w->zeros = 0;
    w->full = 0;
}

static void writer_block(codec_writer_t *w, const codec_format_t *fmt, const void *x,
                         const codec_scratch_t *s, size_t i0, size_t len, const codec_tally_t *t)
{
    codec_block_t blk = {
        .x = x, .nz = s->nz, .i0 = i0, .len = len, .nnz = t->nnz, .nans = t->nans,
    };
    fmt->write(w, &blk);
}

/* ---- Counting -------------------------------------------------------------------- */

void fold_codec_count(fold_dtype_t dtype, const void *x, size_t n, fold_codec_stats_t *st)
{
    if (st == NULL) {
        return;
    }
    stats_begin(st, n);
    size_t es = codec_esize(dtype);
    if (es == 0 || x == NULL) {
        st->nnz = n;
        return;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    int is_float = codec_is_float(dtype), prev_zero = 0;
    codec_scratch_t s;
    for (size_t i0 = 0; i0 < n; i0 += CODEC_BLOCK) {
        size_t len = block_len(n, i0);
        codec_tally_t t = tally_begin(i0, prev_zero);
        kern->scan((const char *)x + i0 * es, len, s.nz, is_float, &t);
        stats_add(st, &t);
        prev_zero = t.prev_zero;
    }
}

/* ---- Plain encode and decode ------------------------------------------------------- */

size_t fold_codec_encode(fold_codec_id_t c, fold_dtype_t dtype, const void *x, size_t n,
                         void *wire, size_t cap)
{
    size_t es = codec_esize(dtype);
    if (es == 0 || !codec_usable(c, dtype) || wire == NULL || (x == NULL && n > 0)) {
        return 0;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    const codec_format_t *fmt = codec_format(c);
    int is_float = codec_is_float(dtype);
    codec_writer_t w;
    codec_scratch_t s;
    writer_init(&w, c, es, n, wire, cap, kern);
    fmt->begin(&w);
    for (size_t i0 = 0; i0 < n && !w.full; i0 += CODEC_BLOCK) {
        size_t len = block_len(n, i0);
        const char *xb = (const char *)x + i0 * es;
        codec_tally_t t = tally_begin(i0, 0);
        if (c != FOLD_CODEC_DENSE) {
            kern->scan(xb, len, s.nz, is_float, &t);
        }
        writer_block(&w, fmt, xb, &s, i0, len, &t);
    }
    return fmt->finish(&w);
}

int fold_codec_decode(fold_dtype_t dtype, const void *wire, size_t len, void *out, size_t n)
{
    size_t es = codec_esize(dtype);
    if (es == 0 || wire == NULL || (out == NULL && n > 0)) {
        codec_set_error("invalid argument");
        return FOLD_ERR_INVALID_ARG;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    codec_msg_t m;
    int status = codec_parse(dtype, wire, len, n, kern, &m);
    if (status != FOLD_OK) {
        return status;
    }
    const codec_format_t *fmt = codec_format(m.codec);
    codec_reader_t r = {.m = &m, .kern = kern, .pos = 0, .zeros = 0};
    for (size_t i0 = 0; i0 < n; i0 += CODEC_BLOCK) {
        size_t bl = block_len(n, i0);
        char *dst = (char *)out + i0 * es;
        const void *a = fmt->read(&r, i0, bl, dst);
        if (a != dst) {
            memcpy(dst, a, bl * es);
        }
    }
    return FOLD_OK;
}

/* ---- Fused reductions ----------------------------------------------------------- */

int fold_codec_reduce_wire(fold_op_t op, fold_dtype_t dtype, const void *wire, size_t len,
                           const void *b, void *out, size_t n, fold_codec_stats_t *st)
{
    size_t es = codec_esize(dtype);
    codec_opk_t opk = codec_opk(op, dtype);
    if (opk == CODEC_OPK_NONE || wire == NULL || ((b == NULL || out == NULL) && n > 0)) {
        codec_set_error("invalid argument");
        return FOLD_ERR_INVALID_ARG;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    codec_msg_t m;
    int status = codec_parse(dtype, wire, len, n, kern, &m);
    if (status != FOLD_OK) {
        return status;
    }
    const codec_format_t *fmt = codec_format(m.codec);
    codec_reader_t r = {.m = &m, .kern = kern, .pos = 0, .zeros = 0};
    codec_scratch_t s;
    int prev_zero = 0;
    if (st != NULL) {
        stats_begin(st, n);
    }
    for (size_t i0 = 0; i0 < n; i0 += CODEC_BLOCK) {
        size_t bl = block_len(n, i0);
        codec_tally_t t = tally_begin(i0, prev_zero);
        read_reduce(&r, fmt, opk, i0, bl, (const char *)b + i0 * es, (char *)out + i0 * es, &s,
                    &t);
        if (st != NULL) {
            stats_add(st, &t);
        }
        prev_zero = t.prev_zero;
    }
    return FOLD_OK;
}

void fold_codec_reduce_count(fold_op_t op, fold_dtype_t dtype, const void *a, const void *b,
                             void *out, size_t n, fold_codec_stats_t *st)
{
    size_t es = codec_esize(dtype);
    codec_opk_t opk = codec_opk(op, dtype);
    if (opk == CODEC_OPK_NONE || ((a == NULL || b == NULL || out == NULL) && n > 0)) {
        if (st != NULL) {
            stats_begin(st, 0);
        }
        return;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    codec_scratch_t s;
    int prev_zero = 0;
    if (st != NULL) {
        stats_begin(st, n);
    }
    for (size_t i0 = 0; i0 < n; i0 += CODEC_BLOCK) {
        size_t bl = block_len(n, i0);
        size_t off = i0 * es;
        codec_tally_t t = tally_begin(i0, prev_zero);
        kern->reduce[opk]((const char *)a + off, (const char *)b + off, (char *)out + off, bl,
                          s.nz, &t);
        if (st != NULL) {
            stats_add(st, &t);
        }
        prev_zero = t.prev_zero;
    }
}

size_t fold_codec_reduce_encode(fold_op_t op, fold_dtype_t dtype, fold_codec_id_t c,
                                const void *a, const void *b, size_t n, void *wire, size_t cap)
{
    size_t es = codec_esize(dtype);
    codec_opk_t opk = codec_opk(op, dtype);
    if (opk == CODEC_OPK_NONE || !codec_usable(c, dtype) || wire == NULL ||
        ((a == NULL || b == NULL) && n > 0)) {
        return 0;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    const codec_format_t *fmt = codec_format(c);
    codec_writer_t w;
    codec_scratch_t s;
    writer_init(&w, c, es, n, wire, cap, kern);
    fmt->begin(&w);
    for (size_t i0 = 0; i0 < n && !w.full; i0 += CODEC_BLOCK) {
        size_t bl = block_len(n, i0);
        size_t off = i0 * es;
        codec_tally_t t = tally_begin(i0, 0);
        kern->reduce[opk]((const char *)a + off, (const char *)b + off, s.data, bl, s.nz, &t);
        writer_block(&w, fmt, s.data, &s, i0, bl, &t);
    }
    return fmt->finish(&w);
}

int fold_codec_reduce_wire_encode(fold_op_t op, fold_dtype_t dtype, fold_codec_id_t c,
                                  const void *wire, size_t len, const void *b, size_t n,
                                  void *out_wire, size_t cap, size_t *out_len)
{
    size_t es = codec_esize(dtype);
    codec_opk_t opk = codec_opk(op, dtype);
    if (out_len != NULL) {
        *out_len = 0;
    }
    if (opk == CODEC_OPK_NONE || !codec_usable(c, dtype) || wire == NULL || out_wire == NULL ||
        out_len == NULL || (b == NULL && n > 0)) {
        codec_set_error("invalid argument");
        return FOLD_ERR_INVALID_ARG;
    }
    const codec_kernels_t *kern = codec_kernels_for(es);
    codec_msg_t m;
    int status = codec_parse(dtype, wire, len, n, kern, &m);
    if (status != FOLD_OK) {
        return status;
    }
    const codec_format_t *in = codec_format(m.codec), *fmt = codec_format(c);
    codec_reader_t r = {.m = &m, .kern = kern, .pos = 0, .zeros = 0};
    codec_writer_t w;
    codec_scratch_t s;
    writer_init(&w, c, es, n, out_wire, cap, kern);
    fmt->begin(&w);
    for (size_t i0 = 0; i0 < n && !w.full; i0 += CODEC_BLOCK) {
        size_t bl = block_len(n, i0);
        codec_tally_t t = tally_begin(i0, 0);
        read_reduce(&r, in, opk, i0, bl, (const char *)b + i0 * es, s.data, &s, &t);
        writer_block(&w, fmt, s.data, &s, i0, bl, &t);
    }
    *out_len = fmt->finish(&w);
    return FOLD_OK;
}
