/*
 * Idx (Shan et al., sec. III-F): the non-zero values packed, then their indices.
 *
 *    header | values[k] | uint32 indices[k]      strictly increasing, < n < 2^32
 *
 * Only worth it below about 1/32 density (4 bytes of index per value against 1/8
 * byte of bitmap per element), so the per-index work is plain C.
 *
 * Writing streams without knowing k: values go forward from the header and the
 * indices backward from the end of the buffer, the two meeting exactly when the
 * message no longer fits cap; finish() turns the indices around and moves them
 * behind the values.
 *
 *    during    | header | values -->        free         <-- indices (reversed) |
 *    finish    | header | values | indices |                                   cap
 */
#include "codec/codec_impl.h"

static const char *idx_check(const codec_msg_t *m, const codec_kernels_t *kern)
{
    (void)kern;
    uint64_t next = 0;   /* the smallest index allowed next */
    for (size_t j = 0; j < m->k; j++) {
        uint32_t i = codec_ld32(m->idx + j * 4);
        if (i < next) {
            return "idx: indices not strictly increasing";
        }
        next = (uint64_t)i + 1;
    }
    if (next > m->n) {
        return "idx: index out of range";
    }
    return NULL;
}

#define IDX_READ(W, T)                                                                    \
    static void idx_read##W(codec_reader_t *r, size_t i0, size_t len, unsigned char *out)  \
    {                                                                                      \
        const codec_msg_t *m = r->m;                                                       \
        size_t pos = r->pos;                                                               \
        memset(out, 0, len * sizeof(T));                                                   \
        /* Validated: increasing and < n, so each index lands in its block, in order. */  \
        for (; pos < m->k; pos++) {                                                        \
            size_t i = codec_ld32(m->idx + pos * 4);                                       \
            if (i >= i0 + len) {                                                           \
                break;                                                                     \
            }                                                                              \
            memcpy(out + (i - i0) * sizeof(T), m->vals + pos * sizeof(T), sizeof(T));      \
        }                                                                                  \
        r->pos = pos;                                                                      \
    }

IDX_READ(32, uint32_t)
IDX_READ(64, uint64_t)

static const void *idx_read(codec_reader_t *r, size_t i0, size_t len, void *tmp)
{
    if (r->m->esize == 4) {
        idx_read32(r, i0, len, tmp);
    } else {
        idx_read64(r, i0, len, tmp);
    }
    return tmp;
}

static void idx_begin(codec_writer_t *w)
{
    if ((uint64_t)w->n > UINT32_MAX || w->cap < FOLD_CODEC_HEADER_BYTES) {
        w->full = 1;
    }
}

static void idx_write(codec_writer_t *w, const codec_block_t *blk)
{
    size_t h = FOLD_CODEC_HEADER_BYTES, es = w->esize;
    size_t entries = (w->cap - h) / (es + 4);
    if (blk->nnz > entries - w->k) {   /* w->k <= entries: checked by the previous blocks */
        w->full = 1;
        return;
    }
    /* Values first: the compress may spill up to a vector of garbage into the free
     * middle, which the indices written next may then cover. */
    size_t off = h + w->k * es;
    size_t room = (w->cap - 4 * w->k - off) / es;
    w->kern->compress(blk->x, blk->len, blk->nz, w->wire + off, room);

    unsigned char *tail = w->wire + w->cap - 4 * w->k;   /* the last index written */
    for (size_t wi = 0; wi * 64 < blk->len; wi++) {
        for (uint64_t bits = blk->nz[wi]; bits != 0; bits &= bits - 1) {
            tail -= 4;
            codec_st32(tail, (uint32_t)(blk->i0 + wi * 64 + (size_t)__builtin_ctzll(bits)));
        }
    }
    w->k += blk->nnz;
}

static size_t idx_finish(codec_writer_t *w)
{
    if (w->full) {
        return 0;
    }
    size_t h = FOLD_CODEC_HEADER_BYTES, k = w->k;
    unsigned char *idx = w->wire + w->cap - 4 * k;
    for (size_t lo = 0, hi = k; hi > lo + 1; lo++, hi--) {
        uint32_t a = codec_ld32(idx + lo * 4), b = codec_ld32(idx + (hi - 1) * 4);
        codec_st32(idx + lo * 4, b);
        codec_st32(idx + (hi - 1) * 4, a);
    }
    memmove(w->wire + h + k * w->esize, idx, 4 * k);
    codec_write_header(w->wire, FOLD_CODEC_IDX, w->esize, w->n, k);
    return h + k * (w->esize + 4);
}

const codec_format_t codec_format_idx = {
    .check = idx_check, .read = idx_read, .begin = idx_begin,
    .write = idx_write, .finish = idx_finish,
};
