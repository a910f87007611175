/*
 * Bits (Shan et al., sec. III-F): a bitmap of the non-zero elements, then their
 * values packed in order.
 *
 *    header | bitmap: ceil(n/64) words | values[k]          k = popcount(bitmap)
 *
 * The bitmap is exactly the one the kernels compute for a block, so encoding is
 * a copy of it plus a compress, and decoding an expand. Blocks start on bitmap
 * words (CODEC_BLOCK is a multiple of 64).
 */
#include "codec/codec_impl.h"

static size_t bitmap_bytes(size_t n)
{
    return (n / 64 + (n % 64 != 0)) * 8;
}

static const char *bits_check(const codec_msg_t *m, const codec_kernels_t *kern)
{
    size_t words = bitmap_bytes(m->n) / 8;
    if (kern->popcount(m->bitmap, words) != m->k) {
        return "bits: bitmap popcount differs from the value count";
    }
    if (m->n % 64 != 0 && (codec_ld64(m->bitmap + (words - 1) * 8) >> (m->n % 64)) != 0) {
        return "bits: bitmap bits set past the last element";
    }
    return NULL;
}

static const void *bits_read(codec_reader_t *r, size_t i0, size_t len, void *tmp)
{
    const codec_msg_t *m = r->m;
    uint64_t nz[CODEC_WORDS];
    memcpy(nz, m->bitmap + i0 / 64 * 8, (len + 63) / 64 * 8);
    /* Validation made popcount(bitmap) == k, so the values the blocks ask for are
     * there; the kernels still read no more than k - pos of them. */
    r->pos += r->kern->expand(m->vals + r->pos * m->esize, m->k - r->pos, len, nz, tmp);
    return tmp;
}

static void bits_read_reduce(codec_reader_t *r, codec_opk_t opk, size_t i0, size_t len,
                             const void *b, void *out, void *tmp, uint64_t *nz, codec_tally_t *t)
{
    const codec_msg_t *m = r->m;
    if (r->kern->reduce_bits[opk] == NULL) {
        const void *a = bits_read(r, i0, len, tmp);
        r->kern->reduce[opk](a, b, out, len, nz, t);
        return;
    }
    uint64_t anz[CODEC_WORDS];
    memcpy(anz, m->bitmap + i0 / 64 * 8, (len + 63) / 64 * 8);
    r->pos += r->kern->reduce_bits[opk](m->vals + r->pos * m->esize, m->k - r->pos, anz, b, out,
                                        len, nz, t);
}

static void bits_begin(codec_writer_t *w)
{
    if (w->cap < FOLD_CODEC_HEADER_BYTES || w->cap - FOLD_CODEC_HEADER_BYTES < bitmap_bytes(w->n)) {
        w->full = 1;
    }
}

static void bits_write(codec_writer_t *w, const codec_block_t *blk)
{
    size_t h = FOLD_CODEC_HEADER_BYTES;
    size_t off = h + bitmap_bytes(w->n) + w->k * w->esize;
    size_t room = (w->cap - off) / w->esize;   /* off <= cap: begin and the checks below */
    if (blk->nnz > room) {
        w->full = 1;
        return;
    }
    memcpy(w->wire + h + blk->i0 / 64 * 8, blk->nz, (blk->len + 63) / 64 * 8);
    w->k += w->kern->compress(blk->x, blk->len, blk->nz, w->wire + off, room);
}

static size_t bits_finish(codec_writer_t *w)
{
    if (w->full) {
        return 0;
    }
    codec_write_header(w->wire, FOLD_CODEC_BITS, w->esize, w->n, w->k);
    return FOLD_CODEC_HEADER_BYTES + bitmap_bytes(w->n) + w->k * w->esize;
}

const codec_format_t codec_format_bits = {
    .check = bits_check, .read = bits_read, .read_reduce = bits_read_reduce, .begin = bits_begin,
    .write = bits_write, .finish = bits_finish,
};
