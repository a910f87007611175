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
 *
 * Speed: RLE wins on size only when runs are long (fewer than n/32 runs for
 * float32), so reading and validating go a segment at a time, long literal
 * stretches by vector kernels, and writing a bitmap word at a time. Interleaved
 * data (every element a coin flip) is slow, and Bits is smaller there.
 * Each loop is built for each width.
 */
#include "codec/codec_impl.h"

#define H FOLD_CODEC_HEADER_BYTES

/* ---- Validation --------------------------------------------------------------------- */

/* Elements the words make; every bound checked as it goes. A literal followed by
 * a marker is counted inline; longer literal stretches by the vector search. */
#define RLE_CHECK(W, T, MARK, ESC)                                                        \
    static const char *rle_check##W(const codec_msg_t *m, const codec_kernels_t *kern)   \
    {                                                                                     \
        const unsigned char *s = m->vals;                                                 \
        const size_t k = m->k;                                                            \
        const uint64_t n = m->n;                                                          \
        uint64_t total = 0;                                                               \
        size_t pos = 0;                                                                   \
        while (pos < k) {                                                                 \
            T u, v;                                                                       \
            memcpy(&u, s + pos * sizeof(T), sizeof(T));                                   \
            if (u <= (T)MARK) {                                                           \
                size_t lit = 1;                                                           \
                if (pos + 1 < k) {                                                        \
                    memcpy(&v, s + (pos + 1) * sizeof(T), sizeof(T));                     \
                    if (v <= (T)MARK) {                                                   \
                        lit = kern->find_marker(s + pos * sizeof(T), k - pos);            \
                    }                                                                     \
                }                                                                         \
                total += lit;                                                             \
                pos += lit;                                                               \
            } else if ((u & (T)ESC) == (T)ESC) {                                          \
                if (pos + 1 >= k) {                                                       \
                    return "rle: escape at the end of the message";                       \
                }                                                                         \
                memcpy(&v, s + (pos + 1) * sizeof(T), sizeof(T));                        \
                if (v <= (T)MARK) {                                                       \
                    return "rle: escaped word is not a negative NaN";                     \
                }                                                                         \
                total += 1;                                                               \
                pos += 2;                                                                 \
            } else {                                                                      \
                total += (uint64_t)(u & (T)ESC);   /* < 2^52 a step: no wrap */           \
                pos += 1;                                                                 \
            }                                                                             \
            if (total > n) {                                                              \
                return "rle: more elements than n";                                       \
            }                                                                             \
        }                                                                                 \
        return total == n ? NULL : "rle: fewer elements than n";                          \
    }

RLE_CHECK(32, uint32_t, CODEC_MARK32, CODEC_ESC32)
RLE_CHECK(64, uint64_t, CODEC_MARK64, CODEC_ESC64)

static const char *rle_check(const codec_msg_t *m, const codec_kernels_t *kern)
{
    return m->esize == 4 ? rle_check32(m, kern) : rle_check64(m, kern);
}

/* ---- Reading ----------------------------------------------------------------------- */

/* A block: zeroed first, then literals copied in (a lone one inline, a stretch
 * by the vector copy) and runs skipped. A run past the block's end is carried in
 * r->zeros. */
#define RLE_READ(W, T, MARK, ESC)                                                         \
    static const void *rle_read##W(codec_reader_t *r, size_t len, unsigned char *out)     \
    {                                                                                      \
        const codec_msg_t *m = r->m;                                                       \
        const unsigned char *s = m->vals;                                                  \
        const size_t k = m->k;                                                             \
        size_t p = 0, pos = r->pos;                                                        \
        if (r->zeros == 0 && pos < k &&                                                    \
            r->kern->find_marker(s + pos * sizeof(T), codec_min(k - pos, len)) == len) {   \
            r->pos = pos + len;   /* literals only: read in place */                       \
            return s + pos * sizeof(T);                                                    \
        }                                                                                  \
        memset(out, 0, len * sizeof(T));                                                   \
        if (r->zeros > 0) {                                                                \
            p = (size_t)(r->zeros < len ? r->zeros : len);                                 \
            r->zeros -= p;                                                                 \
        }                                                                                  \
        while (p < len && pos < k) { /* pos < k: always, after validation */              \
            T u, v;                                                                        \
            memcpy(&u, s + pos * sizeof(T), sizeof(T));                                   \
            if (u <= (T)MARK) {                                                            \
                size_t lim = codec_min(k - pos, len - p);                                  \
                if (lim > 1) {                                                             \
                    memcpy(&v, s + (pos + 1) * sizeof(T), sizeof(T));                      \
                }                                                                          \
                if (lim == 1 || v > (T)MARK) {                                             \
                    memcpy(out + p * sizeof(T), &u, sizeof(T));                            \
                    p++;                                                                   \
                    pos++;                                                                 \
                } else {                                                                   \
                    size_t lit = r->kern->copy_literals(s + pos * sizeof(T), lim,          \
                                                        out + p * sizeof(T));              \
                    p += lit;                                                              \
                    pos += lit;                                                            \
                }                                                                          \
            } else if ((u & (T)ESC) == (T)ESC) {                                           \
                if (pos + 1 < k) {                                                         \
                    memcpy(out + p * sizeof(T), s + (pos + 1) * sizeof(T), sizeof(T));    \
                    p++;                                                                   \
                }                                                                          \
                pos += 2;                                                                  \
            } else {                                                                       \
                uint64_t run = u & (T)ESC;                                                 \
                pos++;                                                                     \
                if (run > len - p) {                                                       \
                    r->zeros = run - (len - p);                                            \
                    p = len;                                                               \
                } else {                                                                   \
                    p += (size_t)run;                                                      \
                }                                                                          \
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

/* ---- Writing ----------------------------------------------------------------------- */

static uint64_t mark_base(size_t es)
{
    return es == 4 ? CODEC_MARK32 : CODEC_MARK64;
}

static uint64_t esc_mantissa(size_t es)
{
    return es == 4 ? CODEC_ESC32 : CODEC_ESC64;
}

static void rle_begin(codec_writer_t *w)
{
    if (w->cap < H) {
        w->full = 1;
    }
}

/* Room for t more words? */
static int rle_fits(codec_writer_t *w, size_t t)
{
    size_t words = (w->cap - H) / w->esize;
    if (t > words - w->k) {
        w->full = 1;
        return 0;
    }
    return 1;
}

static void rle_put(codec_writer_t *w, uint64_t u)
{
    codec_st(w->wire + H + w->k * w->esize, w->esize, u);
    w->k++;
}

static void rle_flush_zeros(codec_writer_t *w)
{
    if (w->zeros > 0 && rle_fits(w, 1)) {
        rle_put(w, mark_base(w->esize) | (uint64_t)w->zeros);
    }
    w->zeros = 0;
}

/* The checked writer, an element at a time, every word against cap: for the
 * blocks that might not fit. */
static void rle_write_checked(codec_writer_t *w, const codec_block_t *blk)
{
    size_t es = w->esize;
    for (size_t i = 0; i < blk->len && !w->full; i++) {
        if (!((blk->nz[i / 64] >> (i % 64)) & 1)) {
            w->zeros++;
            continue;
        }
        rle_flush_zeros(w);
        uint64_t u = codec_ld((const unsigned char *)blk->x + i * es, es);
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

/* The fast writer, a bitmap word at a time: all zero, the run grows; all literal
 * (and no NaN to escape), 64 words copied; a few literals, jump between them;
 * a few segments, a segment at a time; else branch-free per element. No cap
 * checks: rle_write made sure the block's worst case fits, plus one word for the
 * stores that do not advance. (__builtin_popcountll without the POPCNT
 * instruction is a small libgcc routine: still cheaper than 64 elements.) */
#define RLE_WRITE(W, T, MARK, ESC)                                                         \
    static void rle_write##W(codec_writer_t *w, const codec_block_t *blk)                  \
    {                                                                                       \
        const unsigned char *x = blk->x;                                                    \
        unsigned char *o = w->wire + H;                                                     \
        size_t k = w->k;                                                                    \
        T zeros = (T)w->zeros;                                                              \
        const int nans = blk->nans > 0;                                                     \
        for (size_t wi = 0; wi * 64 < blk->len; wi++) {                                     \
            const size_t wl = codec_min(64, blk->len - wi * 64);                            \
            const uint64_t bits = blk->nz[wi];                                              \
            const unsigned char *xw = x + wi * 64 * sizeof(T);                              \
            if (bits == 0) {                                                                \
                zeros += (T)wl;                                                             \
                continue;                                                                   \
            }                                                                               \
            if (!nans && bits == (wl == 64 ? ~0ull : (1ull << wl) - 1)) {                   \
                if (zeros > 0) {                                                            \
                    T mk = (T)MARK | zeros;                                                 \
                    memcpy(o + k++ * sizeof(T), &mk, sizeof(T));                            \
                    zeros = 0;                                                              \
                }                                                                           \
                memcpy(o + k * sizeof(T), xw, wl * sizeof(T));                              \
                k += wl;                                                                    \
                continue;                                                                   \
            }                                                                               \
            if (__builtin_popcountll(bits) <= 8) { /* few literals: jump between them */  \
                size_t next = 0;                                                            \
                for (uint64_t b = bits; b != 0; b &= b - 1) {                               \
                    size_t j = (size_t)__builtin_ctzll(b);                                  \
                    zeros += (T)(j - next);                                                 \
                    if (zeros > 0) {                                                        \
                        T mk = (T)MARK | zeros;                                             \
                        memcpy(o + k++ * sizeof(T), &mk, sizeof(T));                        \
                        zeros = 0;                                                          \
                    }                                                                       \
                    T u;                                                                    \
                    memcpy(&u, xw + j * sizeof(T), sizeof(T));                              \
                    if (nans && u > (T)MARK) {                                              \
                        T e = (T)MARK | (T)ESC;                                             \
                        memcpy(o + k++ * sizeof(T), &e, sizeof(T));                         \
                    }                                                                       \
                    memcpy(o + k++ * sizeof(T), &u, sizeof(T));                             \
                    next = j + 1;                                                           \
                }                                                                           \
                zeros += (T)(wl - next);                                                    \
                continue;                                                                   \
            }                                                                               \
            if (__builtin_popcountll(bits ^ (bits << 1)) <= 16) { /* few segments */     \
                for (size_t p = 0; p < wl;) {                                               \
                    uint64_t rest = bits >> p;                                              \
                    size_t seg;                                                             \
                    if (!(rest & 1)) {                                                      \
                        seg = rest == 0 ? wl - p                                            \
                                        : codec_min((size_t)__builtin_ctzll(rest), wl - p); \
                        zeros += (T)seg;                                                    \
                        p += seg;                                                           \
                        continue;                                                           \
                    }                                                                       \
                    seg = ~rest == 0 ? 64 - p : (size_t)__builtin_ctzll(~rest);             \
                    seg = codec_min(seg, wl - p);                                           \
                    if (zeros > 0) {                                                        \
                        T mk = (T)MARK | zeros;                                             \
                        memcpy(o + k++ * sizeof(T), &mk, sizeof(T));                        \
                        zeros = 0;                                                          \
                    }                                                                       \
                    const unsigned char *src = xw + p * sizeof(T);                          \
                    if (!nans && seg > 8) {                                                 \
                        memcpy(o + k * sizeof(T), src, seg * sizeof(T));                    \
                        k += seg;                                                           \
                        p += seg;                                                           \
                        continue;                                                           \
                    }                                                                       \
                    for (size_t j = 0; j < seg; j++) {                                      \
                        T u;                                                                \
                        memcpy(&u, src + j * sizeof(T), sizeof(T));                         \
                        if (nans && u > (T)MARK) {                                          \
                            T e = (T)MARK | (T)ESC;                                         \
                            memcpy(o + k++ * sizeof(T), &e, sizeof(T));                     \
                        }                                                                   \
                        memcpy(o + k++ * sizeof(T), &u, sizeof(T));                         \
                    }                                                                       \
                    p += seg;                                                               \
                }                                                                           \
                continue;                                                                   \
            }                                                                               \
            for (size_t j = 0; j < wl; j++) { /* many segments: branch-free */             \
                T u;                                                                        \
                memcpy(&u, xw + j * sizeof(T), sizeof(T));                                  \
                size_t nzb = (size_t)((bits >> j) & 1);                                     \
                T mk = (T)MARK | zeros;                                                     \
                memcpy(o + k * sizeof(T), &mk, sizeof(T));                                  \
                k += nzb & (size_t)(zeros != 0);                                            \
                if (nans && u > (T)MARK) {                                                  \
                    T e = (T)MARK | (T)ESC;                                                 \
                    memcpy(o + k++ * sizeof(T), &e, sizeof(T));                             \
                }                                                                           \
                memcpy(o + k * sizeof(T), &u, sizeof(T));                                   \
                k += nzb;                                                                   \
                zeros = nzb ? 0 : zeros + 1;                                                \
            }                                                                               \
        }                                                                                   \
        w->k = k;                                                                           \
        w->zeros = (size_t)zeros;                                                           \
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
    /* At most a marker before each literal (nnz), an escape per NaN, and the
     * store that does not advance. */
    size_t words = (w->cap - H) / w->esize;
    if (blk->nnz == blk->len && blk->nans == 0) {   /* all literals: one copy */
        rle_flush_zeros(w);   /* a run the previous block ended with */
        if (rle_fits(w, blk->len)) {
            memcpy(w->wire + H + w->k * w->esize, blk->x, blk->len * w->esize);
            w->k += blk->len;
        }
    } else if (2 * blk->nnz + blk->nans + 1 > words - w->k) {
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
    return H + w->k * w->esize;
}

const codec_format_t codec_format_rle = {
    .check = rle_check, .read = rle_read, .begin = rle_begin,
    .write = rle_write, .finish = rle_finish,
};
