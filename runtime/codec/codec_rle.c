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

/* Literal words of a segment, one by one while it is short, then in bulk. */
#define RLE_READ(W, T, MARK, ESC)                                                         \
    static const void *rle_read##W(codec_reader_t *r, size_t len, unsigned char *out)     \
    {                                                                                      \
        const codec_msg_t *m = r->m;                                                       \
        const unsigned char *s = m->vals;                                                  \
        const size_t k = m->k;                                                             \
        size_t p = 0, pos = r->pos;                                                        \
        if (r->zeros == 0 && pos < k) {                                                    \
            /* A block of literals only is read in place. */                               \
            size_t lit = r->kern->find_marker(s + pos * sizeof(T), codec_min(k - pos, len)); \
            if (lit == len) {                                                              \
                r->pos = pos + len;                                                        \
                return s + pos * sizeof(T);                                                \
            }                                                                              \
            memcpy(out, s + pos * sizeof(T), lit * sizeof(T));                             \
            p = lit;                                                                       \
            pos += lit;                                                                    \
        }                                                                                  \
        while (p < len) {                                                                  \
            if (r->zeros > 0) {                                                            \
                size_t t = (size_t)(r->zeros < len - p ? r->zeros : len - p);              \
                memset(out + p * sizeof(T), 0, t * sizeof(T));                             \
                p += t;                                                                    \
                r->zeros -= t;                                                             \
                continue;                                                                  \
            }                                                                              \
            if (pos >= k) { /* not after validation; never read past the words */         \
                memset(out + p * sizeof(T), 0, (len - p) * sizeof(T));                     \
                break;                                                                     \
            }                                                                              \
            T u;                                                                           \
            memcpy(&u, s + pos * sizeof(T), sizeof(T));                                    \
            if (u <= (T)MARK) {                                                            \
                size_t lim = codec_min(k - pos, len - p), q = 0;                           \
                do {                                                                       \
                    memcpy(out + (p + q) * sizeof(T), &u, sizeof(T));                      \
                    if (++q == lim) {                                                      \
                        break;                                                             \
                    }                                                                      \
                    memcpy(&u, s + (pos + q) * sizeof(T), sizeof(T));                      \
                } while (u <= (T)MARK && q < 16);                                          \
                if (q == 16 && q < lim && u <= (T)MARK) {                                  \
                    size_t j = r->kern->find_marker(s + (pos + q) * sizeof(T), lim - q);   \
                    memcpy(out + (p + q) * sizeof(T), s + (pos + q) * sizeof(T),           \
                           j * sizeof(T));                                                 \
                    q += j;                                                                \
                }                                                                          \
                p += q;                                                                    \
                pos += q;                                                                  \
            } else if ((u & (T)ESC) == (T)ESC && pos + 1 < k) {                            \
                memcpy(out + p * sizeof(T), s + (pos + 1) * sizeof(T), sizeof(T));         \
                p++;                                                                       \
                pos += 2;                                                                  \
            } else {                                                                       \
                r->zeros = u & (T)ESC;                                                     \
                pos++;                                                                     \
            }                                                                              \
        }                                                                                  \
        r->pos = pos;                                                                      \
        return out;                                                                        \
    }

RLE_READ(32, uint32_t, CODEC_MARK32, CODEC_ESC32)
RLE_READ(64, uint64_t, CODEC_MARK64, CODEC_ESC64)

static const void *rle_read(codec_reader_t *r, size_t i0, size_t len, void *tmp)
{
    (void)i0;
    return r->m->esize == 4 ? rle_read32(r, len, tmp) : rle_read64(r, len, tmp);
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

/* The checked writer: every word against cap. Used for a block that might not fit. */
static void rle_write_checked(codec_writer_t *w, const codec_block_t *blk)
{
    const unsigned char *x = blk->x;
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

/* The fast writer: a bitmap word at a time (all zero: run grows; all non-zero: 64
 * literals), segments inside mixed words; no cap checks (the caller made sure the
 * block's worst case fits). */
#define RLE_WRITE(W, T, MARK, ESC)                                                       \
    static void rle_write##W(codec_writer_t *w, const codec_block_t *blk)                \
    {                                                                                     \
        const unsigned char *x = blk->x;                                                  \
        unsigned char *o = w->wire + FOLD_CODEC_HEADER_BYTES;                             \
        size_t k = w->k, zeros = w->zeros;                                                \
        const int nans = blk->nans > 0;                                                   \
        for (size_t wi = 0; wi * 64 < blk->len; wi++) {                                   \
            const size_t wl = codec_min(64, blk->len - wi * 64);                          \
            const uint64_t bits = blk->nz[wi];                                            \
            const unsigned char *xw = x + wi * 64 * sizeof(T);                            \
            size_t p = 0;                                                                 \
            while (p < wl) {                                                              \
                uint64_t rest = bits >> p;                                                \
                size_t seg;                                                               \
                if (!(rest & 1)) {                                                        \
                    seg = rest == 0 ? wl - p : codec_min((size_t)__builtin_ctzll(rest), wl - p); \
                    zeros += seg;                                                         \
                    p += seg;                                                             \
                    continue;                                                             \
                }                                                                         \
                seg = ~rest == 0 ? 64 - p : (size_t)__builtin_ctzll(~rest);               \
                seg = codec_min(seg, wl - p);                                             \
                if (zeros > 0) {                                                          \
                    T mk = (T)MARK | (T)zeros;                                            \
                    memcpy(o + k++ * sizeof(T), &mk, sizeof(T));                          \
                    zeros = 0;                                                            \
                }                                                                         \
                const unsigned char *src = xw + p * sizeof(T);                            \
                if (nans) {                                                               \
                    for (size_t j = 0; j < seg; j++) {                                    \
                        T u;                                                              \
                        memcpy(&u, src + j * sizeof(T), sizeof(T));                       \
                        if (u > (T)MARK) {                                                \
                            T e = (T)MARK | (T)ESC;                                       \
                            memcpy(o + k++ * sizeof(T), &e, sizeof(T));                   \
                        }                                                                 \
                        memcpy(o + k++ * sizeof(T), &u, sizeof(T));                       \
                    }                                                                     \
                } else if (seg <= 8) {                                                    \
                    for (size_t j = 0; j < seg; j++) {                                    \
                        memcpy(o + (k + j) * sizeof(T), src + j * sizeof(T), sizeof(T));  \
                    }                                                                     \
                    k += seg;                                                             \
                } else {                                                                  \
                    memcpy(o + k * sizeof(T), src, seg * sizeof(T));                      \
                    k += seg;                                                             \
                }                                                                         \
                p += seg;                                                                 \
            }                                                                             \
        }                                                                                 \
        w->k = k;                                                                         \
        w->zeros = zeros;                                                                 \
    }

RLE_WRITE(32, uint32_t, CODEC_MARK32, CODEC_ESC32)
RLE_WRITE(64, uint64_t, CODEC_MARK64, CODEC_ESC64)

static void rle_write(codec_writer_t *w, const codec_block_t *blk)
{
    if (blk->i0 % FOLD_CODEC_RLE_SPLIT == 0) {
        rle_flush_zeros(w);
    }
    if (w->full) {
        return;
    }
    /* At most a marker before each literal segment (<= nnz of them) plus the one
     * flushed at the start, and an escape per NaN. */
    size_t words = (w->cap - FOLD_CODEC_HEADER_BYTES) / w->esize;
    if (2 * blk->nnz + blk->nans + 1 > words - w->k) {
        rle_write_checked(w, blk);
    } else if (w->esize == 4) {
        rle_write32(w, blk);
    } else {
        rle_write64(w, blk);
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
