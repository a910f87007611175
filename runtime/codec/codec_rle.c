/*
 * RLE with NaN markers (Hofmann & Ruenger, sec. 2.1), for float32 and float64.
 *
 *    header | words[k]
 *
 * A word above -inf as an unsigned integer (a negative NaN) is a marker: its
 * mantissa m is a run of m zeros, or, at the all-ones mantissa, an escape that
 * makes the next word (a negative NaN of the data) a literal. Every other word is
 * a literal. The paper tells its markers from data NaNs by the sign bit and loses
 * that bit of the data; escaping keeps every payload bit, at one word per negative
 * NaN, and positive NaNs travel as they are.
 *
 * The encoder cuts runs at the multiples of FOLD_CODEC_RLE_SPLIT (so the run
 * count of the stats is the marker count, whatever the run lengths); the decoder
 * takes any run length a marker can carry.
 */
#include "codec/codec_impl.h"

static uint64_t mark_base(size_t es)
{
    return es == 4 ? CODEC_MARK32 : CODEC_MARK64;
}

static uint64_t esc_mantissa(size_t es)
{
    return es == 4 ? CODEC_ESC32 : CODEC_ESC64;
}

static const char *rle_check(const codec_msg_t *m, const codec_kernels_t *kern)
{
    size_t es = m->esize, k = m->k, n = m->n;
    uint64_t esc = esc_mantissa(es);
    size_t pos = 0, total = 0;
    while (pos < k) {
        size_t lit = kern->find_marker(m->vals + pos * es, k - pos);
        if (lit > n - total) {
            return "rle: more elements than n";
        }
        total += lit;
        pos += lit;
        if (pos == k) {
            break;
        }
        uint64_t mant = codec_ld(m->vals + pos * es, es) & esc;
        if (mant == esc) {
            if (pos + 1 >= k) {
                return "rle: escape at the end of the message";
            }
            if (!codec_is_marker(codec_ld(m->vals + (pos + 1) * es, es), es)) {
                return "rle: escaped word is not a negative NaN";
            }
            if (total == n) {
                return "rle: more elements than n";
            }
            total += 1;
            pos += 2;
        } else {
            if (mant > n - total) {
                return "rle: runs overflow n";
            }
            total += (size_t)mant;
            pos += 1;
        }
    }
    return total == n ? NULL : "rle: fewer elements than n";
}

static const void *rle_read(codec_reader_t *r, size_t i0, size_t len, void *tmp)
{
    const codec_msg_t *m = r->m;
    size_t es = m->esize;
    uint64_t esc = esc_mantissa(es);
    unsigned char *out = tmp;
    size_t p = 0;
    (void)i0;

    if (r->zeros == 0 && r->pos < m->k) {
        /* A block of literals only is read in place. */
        size_t lit = r->kern->find_marker(m->vals + r->pos * es, codec_min(m->k - r->pos, len));
        if (lit == len) {
            r->pos += len;
            return m->vals + (r->pos - len) * es;
        }
        memcpy(out, m->vals + r->pos * es, lit * es);
        p = lit;
        r->pos += lit;
    }
    while (p < len) {
        if (r->zeros > 0) {
            size_t t = (size_t)(r->zeros < len - p ? r->zeros : len - p);
            memset(out + p * es, 0, t * es);
            p += t;
            r->zeros -= t;
            continue;
        }
        if (r->pos >= m->k) {   /* not after validation; never read past the words */
            memset(out + p * es, 0, (len - p) * es);
            break;
        }
        uint64_t u = codec_ld(m->vals + r->pos * es, es);
        if (!codec_is_marker(u, es)) {
            size_t lit = r->kern->find_marker(m->vals + r->pos * es,
                                              codec_min(m->k - r->pos, len - p));
            memcpy(out + p * es, m->vals + r->pos * es, lit * es);
            p += lit;
            r->pos += lit;
        } else if ((u & esc) == esc && r->pos + 1 < m->k) {
            memcpy(out + p * es, m->vals + (r->pos + 1) * es, es);
            p++;
            r->pos += 2;
        } else {
            r->zeros = u & esc;
            r->pos++;
        }
    }
    return tmp;
}

static void rle_begin(codec_writer_t *w)
{
    if (w->cap < FOLD_CODEC_HEADER_BYTES) {
        w->full = 1;
    }
}

/* Room for t more words? */
static int rle_fits(codec_writer_t *w, size_t t)
{
    size_t words = (w->cap - FOLD_CODEC_HEADER_BYTES) / w->esize;
    if (t > words - w->k) {
        w->full = 1;
        return 0;
    }
    return 1;
}

static void rle_put(codec_writer_t *w, uint64_t u)
{
    codec_st(w->wire + FOLD_CODEC_HEADER_BYTES + w->k * w->esize, w->esize, u);
    w->k++;
}

static void rle_flush_zeros(codec_writer_t *w)
{
    if (w->zeros > 0 && rle_fits(w, 1)) {
        rle_put(w, mark_base(w->esize) | (uint64_t)w->zeros);
    }
    w->zeros = 0;
}

/* Where the segment of elements whose bit equals `bit` that contains p ends. */
static size_t segment_end(const uint64_t *nz, size_t p, size_t len, int bit)
{
    uint64_t flip = bit ? ~0ull : 0;
    size_t wi = p / 64;
    uint64_t d = (nz[wi] ^ flip) & (~0ull << (p % 64));
    while (d == 0) {
        wi++;
        if (wi * 64 >= len) {
            return len;
        }
        d = nz[wi] ^ flip;
    }
    return codec_min(wi * 64 + (size_t)__builtin_ctzll(d), len);
}

static void rle_literals(codec_writer_t *w, const unsigned char *x, size_t count, int nans)
{
    size_t es = w->esize;
    if (!nans) {
        if (rle_fits(w, count)) {
            memcpy(w->wire + FOLD_CODEC_HEADER_BYTES + w->k * es, x, count * es);
            w->k += count;
        }
        return;
    }
    for (size_t i = 0; i < count && !w->full; i++) {
        uint64_t u = codec_ld(x + i * es, es);
        if (codec_is_marker(u, es)) {
            if (rle_fits(w, 2)) {
                rle_put(w, mark_base(es) | esc_mantissa(es));
                rle_put(w, u);
            }
        } else if (rle_fits(w, 1)) {
            rle_put(w, u);
        }
    }
}

static void rle_write(codec_writer_t *w, const codec_block_t *blk)
{
    const unsigned char *x = blk->x;
    if (blk->i0 % FOLD_CODEC_RLE_SPLIT == 0) {
        rle_flush_zeros(w);
    }
    for (size_t p = 0; p < blk->len && !w->full;) {
        int bit = (int)((blk->nz[p / 64] >> (p % 64)) & 1);
        size_t end = segment_end(blk->nz, p, blk->len, bit);
        if (bit) {
            rle_flush_zeros(w);
            rle_literals(w, x + p * w->esize, end - p, blk->nans > 0);
        } else {
            w->zeros += end - p;
        }
        p = end;
    }
}

static size_t rle_finish(codec_writer_t *w)
{
    rle_flush_zeros(w);
    if (w->full) {
        return 0;
    }
    codec_write_header(w->wire, FOLD_CODEC_RLE, w->esize, w->n, w->k);
    return FOLD_CODEC_HEADER_BYTES + w->k * w->esize;
}

const codec_format_t codec_format_rle = {
    .check = rle_check, .read = rle_read, .begin = rle_begin,
    .write = rle_write, .finish = rle_finish,
};
