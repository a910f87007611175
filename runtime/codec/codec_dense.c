/*
 * Dense "codec": the header and the n values as they are. The executor sends dense
 * data without a header; this exists so that every codec id decodes, and so that
 * a fused pass can always fall back to it.
 */
#include "codec/codec_impl.h"

static const char *dense_check(const codec_msg_t *m, const codec_kernels_t *kern)
{
    (void)m;
    (void)kern;
    return NULL;   /* any bits are values */
}

static const void *dense_read(codec_reader_t *r, size_t i0, size_t len, void *tmp)
{
    (void)len;
    (void)tmp;
    return r->m->vals + i0 * r->m->esize;
}

static void dense_begin(codec_writer_t *w)
{
    size_t need = w->n;
    if (__builtin_mul_overflow(need, w->esize, &need) ||
        __builtin_add_overflow(need, (size_t)FOLD_CODEC_HEADER_BYTES, &need) || need > w->cap) {
        w->full = 1;
    }
}

static void dense_write(codec_writer_t *w, const codec_block_t *blk)
{
    memcpy(w->wire + FOLD_CODEC_HEADER_BYTES + blk->i0 * w->esize, blk->x, blk->len * w->esize);
}

static size_t dense_finish(codec_writer_t *w)
{
    if (w->full) {
        return 0;
    }
    codec_write_header(w->wire, FOLD_CODEC_DENSE, w->esize, w->n, w->n);
    return FOLD_CODEC_HEADER_BYTES + w->n * w->esize;
}

const codec_format_t codec_format_dense = {
    .check = dense_check, .read = dense_read, .begin = dense_begin,
    .write = dense_write, .finish = dense_finish,
};
