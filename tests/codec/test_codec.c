/*
 * The sparse codecs (runtime/codec/codec.h) against references written here from
 * the format description in codec.h, sharing no code with the library: a scalar
 * encoder (the library must produce the same bytes, under every instruction set),
 * a scalar decoder that also judges validity (the library must accept exactly
 * what it accepts), scalar stats, and fold_reduce_local for every fused kernel
 * (same bits). Every case runs under each instruction set this CPU has.
 */
#include "test_rng.h"
#include <criterion/criterion.h>

#include "codec/codec.h"
#include "codec/reduce_kernel.h"

#include <fold/fold.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H FOLD_CODEC_HEADER_BYTES
#define SPLIT FOLD_CODEC_RLE_SPLIT

static const fold_dtype_t dtypes[] = {FOLD_FLOAT32, FOLD_FLOAT64, FOLD_INT32,
                                      FOLD_INT64,   FOLD_UINT32,  FOLD_UINT64};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

static const fold_codec_id_t codecs[] = {FOLD_CODEC_DENSE, FOLD_CODEC_BITS, FOLD_CODEC_IDX,
                                         FOLD_CODEC_RLE};

/* ---- Small helpers ------------------------------------------------------------- */

static double rng_unit(uint64_t *rng)
{
    return (double)(rng_next(rng) >> 11) / 9007199254740992.0;
}

static size_t esz(fold_dtype_t dt)
{
    return fold_dtype_size(dt);
}

static int is_float(fold_dtype_t dt)
{
    return dt == FOLD_FLOAT32 || dt == FOLD_FLOAT64;
}

static uint64_t get(const void *buf, size_t i, size_t es)
{
    uint64_t v = 0;
    memcpy(&v, (const unsigned char *)buf + i * es, es);   /* little-endian host */
    return v;
}

static void put(void *buf, size_t i, size_t es, uint64_t v)
{
    memcpy((unsigned char *)buf + i * es, &v, es);
}

static uint64_t mark_of(size_t es)
{
    return es == 4 ? 0xff800000ull : 0xfff0000000000000ull;
}

static uint64_t esc_of(size_t es)
{
    return es == 4 ? 0x7fffffull : 0xfffffffffffffull;
}

static int codec_valid(fold_codec_id_t c, fold_dtype_t dt)
{
    return c == FOLD_CODEC_DENSE || c == FOLD_CODEC_BITS || c == FOLD_CODEC_IDX ||
           (c == FOLD_CODEC_RLE && is_float(dt));
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    return p;
}

/* The instruction sets to run under. */
static int isas[FOLD_CODEC_ISA_COUNT];
static int nisas;

static void find_isas(void)
{
    nisas = 0;
    for (int i = FOLD_CODEC_ISA_SCALAR; i < FOLD_CODEC_ISA_COUNT; i++) {
        if (fold_codec_isa_available((fold_codec_isa_t)i)) {
            isas[nisas++] = i;
        }
    }
    cr_assert_geq(nisas, 1);
}

static void use_isa(int isa)
{
    cr_assert_eq(fold_codec_set_isa((fold_codec_isa_t)isa), FOLD_OK);
    cr_assert_eq(fold_codec_get_isa(), (fold_codec_isa_t)isa);
}

/* ---- Test data ----------------------------------------------------------------- */

/* Values that matter: signed zero, denormals, infinities, NaNs of both signs with
 * payloads, and NaNs that look exactly like RLE markers (run of 1, the escape,
 * run of 65536). */
static const uint32_t special32[] = {
    0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
    0xffc00000u, 0xff800001u, 0xffffffffu, 0xffbfffffu, 0x7f800001u, 0x7fffffffu,
    0x3f800000u, 0xff810000u, 0xfffffffeu, 0x00800000u,
};
static const uint64_t special64[] = {
    0x8000000000000000ull, 0x0000000000000001ull, 0x800fffffffffffffull,
    0x7ff0000000000000ull, 0xfff0000000000000ull, 0x7ff8000000000000ull,
    0xfff8000000000000ull, 0xfff0000000000001ull, 0xffffffffffffffffull,
    0xfff7ffffffffffffull, 0x7ff0000000000001ull, 0x7fffffffffffffffull,
    0x3ff0000000000000ull, 0xfff0000000010000ull, 0xfffffffffffffffeull,
    0x0010000000000000ull,
};

/* A non-zero element: often a special, else a "nice" value (sums stay finite),
 * else random bits. specials = 0 leaves out NaN and infinity (for sums whose NaN
 * operands would both be NaN). */
static uint64_t nonzero_elem(uint64_t *rng, fold_dtype_t dt, int specials)
{
    size_t es = esz(dt);
    uint64_t r = rng_next(rng);
    uint64_t v;
    switch (r % 8) {
    case 0:
    case 1:
        if (es == 4) {
            v = special32[(r >> 8) % (sizeof(special32) / sizeof(special32[0]))];
        } else {
            v = special64[(r >> 8) % (sizeof(special64) / sizeof(special64[0]))];
        }
        uint64_t expo = es == 4 ? 0x7f800000ull : 0x7ff0000000000000ull;
        if (!specials && is_float(dt) && (v & expo) == expo) {
            v = es == 4 ? 0x40000000ull : 0x4000000000000000ull;   /* 2.0 instead */
        }
        break;
    case 2:
    case 3:
    case 4: {
        int64_t small = (int64_t)(rng_next(rng) % 200) - 100;
        if (small == 0) {
            small = 7;
        }
        if (dt == FOLD_FLOAT32) {
            float f = (float)small * 0.25f;
            uint32_t u;
            memcpy(&u, &f, 4);
            v = u;
        } else if (dt == FOLD_FLOAT64) {
            double d = (double)small * 0.125;
            memcpy(&v, &d, 8);
        } else {
            v = (uint64_t)small;
        }
        break;
    }
    default:
        v = rng_next(rng);
        if (is_float(dt) && !specials) {
            v &= es == 4 ? 0xbfffffffull : 0xbfffffffffffffffull;   /* exponent < max */
        }
        break;
    }
    if (es == 4) {
        v &= 0xffffffffull;
    }
    return v == 0 ? 1 : v;
}

typedef enum { LAYOUT_RANDOM, LAYOUT_CLUSTERED } layout_t;

/* n elements with about `density` non-zeros, scattered or in runs. */
static void gen_vec(void *x, fold_dtype_t dt, size_t n, double density, layout_t layout,
                    int specials, uint64_t *rng)
{
    size_t es = esz(dt);
    if (layout == LAYOUT_RANDOM) {
        for (size_t i = 0; i < n; i++) {
            put(x, i, es, rng_unit(rng) < density ? nonzero_elem(rng, dt, specials) : 0);
        }
        return;
    }
    size_t i = 0;
    while (i < n) {
        size_t zr = (size_t)(rng_unit(rng) * 256.0 * (1.0 - density));
        size_t nr = (size_t)(rng_unit(rng) * 256.0 * density) + (density > 0);
        for (size_t j = 0; j < zr && i < n; j++, i++) {
            put(x, i, es, 0);
        }
        for (size_t j = 0; j < nr && i < n; j++, i++) {
            put(x, i, es, nonzero_elem(rng, dt, specials));
        }
    }
}

/* ---- References -------------------------------------------------------------------- */

static fold_codec_stats_t ref_stats(fold_dtype_t dt, const void *x, size_t n)
{
    size_t es = esz(dt);
    fold_codec_stats_t st = {n, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        uint64_t u = get(x, i, es);
        if (u != 0) {
            st.nnz++;
            st.nans += is_float(dt) && u > mark_of(es);
        } else if (i == 0 || i % SPLIT == 0 || get(x, i - 1, es) != 0) {
            st.runs++;
        }
    }
    return st;
}

static size_t ref_capacity(size_t n, size_t es)
{
    return H + 2 * n * es + n / 8 + 64 + n * 4;
}

static void ref_header(unsigned char *w, fold_codec_id_t c, size_t es, size_t n, size_t k)
{
    uint32_t magic = FOLD_CODEC_MAGIC;
    uint64_t n64 = n, k64 = k;
    memcpy(w, &magic, 4);
    w[4] = (unsigned char)c;
    w[5] = (unsigned char)es;
    w[6] = w[7] = 0;
    memcpy(w + 8, &n64, 8);
    memcpy(w + 16, &k64, 8);
}

/* The expected encoding, into w (ref_capacity bytes); returns its length. */
static size_t ref_encode(fold_codec_id_t c, fold_dtype_t dt, const void *x, size_t n,
                         unsigned char *w)
{
    size_t es = esz(dt), k = 0;
    unsigned char *p = w + H;
    switch (c) {
    case FOLD_CODEC_DENSE:
        memcpy(p, x, n * es);
        k = n;
        p += n * es;
        break;
    case FOLD_CODEC_BITS: {
        size_t words = (n + 63) / 64;
        memset(p, 0, words * 8);
        unsigned char *v = p + words * 8;
        for (size_t i = 0; i < n; i++) {
            uint64_t u = get(x, i, es);
            if (u != 0) {
                p[i / 8] |= (unsigned char)(1u << (i % 8));
                put(v, k++, es, u);
            }
        }
        p = v + k * es;
        break;
    }
    case FOLD_CODEC_IDX: {
        for (size_t i = 0; i < n; i++) {
            k += get(x, i, es) != 0;
        }
        unsigned char *ix = p + k * es;
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t u = get(x, i, es);
            if (u != 0) {
                put(p, j, es, u);
                uint32_t i32 = (uint32_t)i;
                memcpy(ix + 4 * j, &i32, 4);
                j++;
            }
        }
        p = ix + 4 * k;
        break;
    }
    case FOLD_CODEC_RLE: {
        size_t zeros = 0;
        for (size_t i = 0; i <= n; i++) {
            uint64_t u = i < n ? get(x, i, es) : 1;
            if ((u != 0 || i % SPLIT == 0) && zeros > 0) {
                put(p, k++, es, mark_of(es) | zeros);
                zeros = 0;
            }
            if (i == n) {
                break;
            }
            if (u == 0) {
                zeros++;
            } else if (u > mark_of(es)) {
                put(p, k++, es, mark_of(es) | esc_of(es));
                put(p, k++, es, u);
            } else {
                put(p, k++, es, u);
            }
        }
        p += k * es;
        break;
    }
    default:
        cr_assert_fail("bad codec");
    }
    ref_header(w, c, es, n, k);
    return (size_t)(p - w);
}

/* Decodes and judges: 0 and out filled if the message is valid, -1 if not. */
static int ref_decode(fold_dtype_t dt, const unsigned char *w, size_t len, void *out, size_t n)
{
    size_t es = esz(dt);
    if (len < H) {
        return -1;
    }
    uint32_t magic;
    uint64_t hn, hk;
    memcpy(&magic, w, 4);
    memcpy(&hn, w + 8, 8);
    memcpy(&hk, w + 16, 8);
    fold_codec_id_t c = (fold_codec_id_t)w[4];
    if (magic != FOLD_CODEC_MAGIC || c >= FOLD_CODEC_NCODECS || !codec_valid(c, dt) ||
        w[5] != es || w[6] != 0 || w[7] != 0 || hn != n) {
        return -1;
    }
    const unsigned char *p = w + H;
    size_t rest = len - H;
    switch (c) {
    case FOLD_CODEC_DENSE:
        if (hk != n || rest != n * es) {
            return -1;
        }
        memcpy(out, p, n * es);
        return 0;
    case FOLD_CODEC_BITS: {
        size_t bm = (n + 63) / 64 * 8;
        if (rest < bm || hk > n || rest - bm != hk * es) {
            return -1;
        }
        size_t k = 0;
        for (size_t i = 0; i < bm * 8; i++) {
            if (p[i / 8] >> (i % 8) & 1) {
                if (i >= n) {
                    return -1;
                }
                k++;
            }
        }
        if (k != hk) {
            return -1;
        }
        k = 0;
        for (size_t i = 0; i < n; i++) {
            put(out, i, es, (p[i / 8] >> (i % 8) & 1) ? get(p + bm, k++, es) : 0);
        }
        return 0;
    }
    case FOLD_CODEC_IDX: {
        if (n > UINT32_MAX || hk > n || rest != hk * (es + 4)) {
            return -1;
        }
        const unsigned char *ix = p + hk * es;
        for (size_t j = 0; j < hk; j++) {
            uint32_t i, prev = 0;
            memcpy(&i, ix + 4 * j, 4);
            if (j > 0) {
                memcpy(&prev, ix + 4 * (j - 1), 4);
            }
            if (i >= n || (j > 0 && i <= prev)) {
                return -1;
            }
        }
        memset(out, 0, n * es);
        for (size_t j = 0; j < hk; j++) {
            uint32_t i;
            memcpy(&i, ix + 4 * j, 4);
            put(out, i, es, get(p, j, es));
        }
        return 0;
    }
    case FOLD_CODEC_RLE: {
        if (hk > 2 * n || rest != hk * es) {
            return -1;
        }
        /* First judge, then write. */
        for (int pass = 0; pass < 2; pass++) {
            size_t i = 0;
            for (size_t j = 0; j < hk; j++) {
                uint64_t u = get(p, j, es);
                if (u > mark_of(es)) {
                    uint64_t m = u & esc_of(es);
                    if (m == esc_of(es)) {
                        if (j + 1 >= hk || get(p, j + 1, es) <= mark_of(es) || i >= n) {
                            return -1;
                        }
                        if (pass) {
                            put(out, i, es, get(p, j + 1, es));
                        }
                        i++;
                        j++;
                    } else {
                        if (m > n - i) {
                            return -1;
                        }
                        for (uint64_t z = 0; pass && z < m; z++) {
                            put(out, i + z, es, 0);
                        }
                        i += m;
                    }
                } else {
                    if (i >= n) {
                        return -1;
                    }
                    if (pass) {
                        put(out, i, es, u);
                    }
                    i++;
                }
            }
            if (i != n) {
                return -1;
            }
        }
        return 0;
    }
    default:
        return -1;
    }
}

/* ---- Checks shared by the tests -------------------------------------------------- */

static void assert_stats_eq(const fold_codec_stats_t *got, const fold_codec_stats_t *want,
                            const char *what)
{
    cr_assert(got->count == want->count && got->nnz == want->nnz && got->runs == want->runs &&
                  got->nans == want->nans,
              "%s: stats {%zu %zu %zu %zu}, want {%zu %zu %zu %zu}", what, got->count, got->nnz,
              got->runs, got->nans, want->count, want->nnz, want->runs, want->nans);
}

static void assert_same_bytes(const void *got, const void *want, size_t bytes, const char *what,
                              size_t es)
{
    if (memcmp(got, want, bytes) != 0) {
        for (size_t i = 0; i < bytes; i++) {
            if (((const unsigned char *)got)[i] != ((const unsigned char *)want)[i]) {
                cr_assert_fail("%s: byte %zu differs (element %zu: %#llx, want %#llx)", what, i,
                               i / es, (unsigned long long)get(got, i / es, es),
                               (unsigned long long)get(want, i / es, es));
            }
        }
    }
}

#define CANARY 0xa5
#define SLACK  64

/* Encodes x with c (cap = exact size, then one byte less) and checks the bytes,
 * the size formula, the stats, the canaries, and the decode both ways. */
static void check_codec(fold_codec_id_t c, fold_dtype_t dt, const void *x, size_t n,
                        const char *what)
{
    size_t es = esz(dt);
    unsigned char *want = xmalloc(ref_capacity(n, es));
    size_t want_len = ref_encode(c, dt, x, n, want);

    fold_codec_stats_t st, rst = ref_stats(dt, x, n);
    fold_codec_count(dt, x, n, &st);
    assert_stats_eq(&st, &rst, what);
    cr_assert_eq(fold_codec_size(c, dt, &st), want_len, "%s: %s size %zu, encoded %zu", what,
                 fold_codec_name(c), fold_codec_size(c, dt, &st), want_len);

    unsigned char *wire = xmalloc(want_len + SLACK);
    memset(wire, CANARY, want_len + SLACK);
    size_t got = fold_codec_encode(c, dt, x, n, wire, want_len);
    cr_assert_eq(got, want_len, "%s: %s encode gave %zu bytes, want %zu", what,
                 fold_codec_name(c), got, want_len);
    assert_same_bytes(wire, want, want_len, what, es);
    for (size_t i = want_len; i < want_len + SLACK; i++) {
        cr_assert_eq(wire[i], CANARY, "%s: encode wrote past cap", what);
    }

    /* One byte short: 0, and nothing past the cap. A few caps further down too. */
    size_t max_cut = n > 1000 ? 2 : 4 * es + 3;   /* each probe is a pass */
    for (size_t cut = 1; cut <= want_len && cut < max_cut; cut += (cut < 3 ? 1 : es)) {
        size_t cap = want_len - cut;
        memset(wire, CANARY, want_len + SLACK);
        cr_assert_eq(fold_codec_encode(c, dt, x, n, wire, cap), 0, "%s: %s fits cap %zu < %zu",
                     what, fold_codec_name(c), cap, want_len);
        for (size_t i = cap; i < want_len + SLACK; i++) {
            cr_assert_eq(wire[i], CANARY, "%s: %s wrote byte %zu past cap %zu", what,
                         fold_codec_name(c), i, cap);
        }
    }

    /* Decode from an exactly sized buffer (ASan sees any over-read). */
    unsigned char *msg = xmalloc(want_len);
    memcpy(msg, want, want_len);
    void *out = xmalloc(n * es + SLACK);
    memset(out, CANARY, n * es + SLACK);
    int rc = fold_codec_decode(dt, msg, want_len, out, n);
    cr_assert_eq(rc, FOLD_OK, "%s: %s decode: %d (%s)", what, fold_codec_name(c), rc,
                 fold_codec_error_detail());
    assert_same_bytes(out, x, n * es, what, es);
    for (size_t i = n * es; i < n * es + SLACK; i++) {
        cr_assert_eq(((unsigned char *)out)[i], CANARY, "%s: decode wrote past n", what);
    }
    memset(out, 0, n * es);
    cr_assert_eq(ref_decode(dt, msg, want_len, out, n), 0, "%s: reference rejects", what);
    assert_same_bytes(out, x, n * es, what, es);

    free(out);
    free(msg);
    free(wire);
    free(want);
}

/* ---- Names, tables, choice ------------------------------------------------------------ */

Test(codec, names_and_parse)
{
    cr_assert_str_eq(fold_codec_name(FOLD_CODEC_DENSE), "dense");
    cr_assert_str_eq(fold_codec_name(FOLD_CODEC_BITS), "bits");
    cr_assert_str_eq(fold_codec_name(FOLD_CODEC_IDX), "idx");
    cr_assert_str_eq(fold_codec_name(FOLD_CODEC_RLE), "rle");
    cr_assert_str_eq(fold_codec_name((fold_codec_id_t)9), "unknown");

    int mask = -1;
    cr_assert_eq(fold_codec_parse("auto", &mask), FOLD_OK);
    cr_assert_eq(mask, (1 << 1) | (1 << 2) | (1 << 3));
    cr_assert_eq(fold_codec_parse("none", &mask), FOLD_OK);
    cr_assert_eq(mask, 0);
    cr_assert_eq(fold_codec_parse("bits", &mask), FOLD_OK);
    cr_assert_eq(mask, 1 << FOLD_CODEC_BITS);
    cr_assert_eq(fold_codec_parse("IDX", &mask), FOLD_OK);
    cr_assert_eq(mask, 1 << FOLD_CODEC_IDX);
    cr_assert_eq(fold_codec_parse("rle", &mask), FOLD_OK);
    cr_assert_eq(mask, 1 << FOLD_CODEC_RLE);
    cr_assert_eq(fold_codec_parse("bits,rle", &mask), FOLD_OK);
    cr_assert_eq(mask, (1 << FOLD_CODEC_BITS) | (1 << FOLD_CODEC_RLE));
    mask = 77;
    const char *bad[] = {"", "dense", "bit", "bits,", ",rle", "bits,,idx", "auto,bits", "zip"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(fold_codec_parse(bad[i], &mask), FOLD_ERR_INVALID_ARG, "'%s'", bad[i]);
        cr_assert_eq(mask, 77);
    }
    cr_assert_eq(fold_codec_parse(NULL, &mask), FOLD_ERR_INVALID_ARG);

    fold_codec_isa_t isa;
    cr_assert_eq(fold_codec_isa_parse("AVX512", &isa), FOLD_OK);
    cr_assert_eq(isa, FOLD_CODEC_ISA_AVX512);
    cr_assert_eq(fold_codec_isa_parse("sse", &isa), FOLD_ERR_INVALID_ARG);
    cr_assert_str_eq(fold_codec_isa_name(FOLD_CODEC_ISA_SCALAR), "scalar");
    cr_assert(fold_codec_isa_available(FOLD_CODEC_ISA_SCALAR));
    cr_assert_eq(fold_codec_set_isa(FOLD_CODEC_ISA_AUTO), FOLD_OK);
    cr_assert_neq(fold_codec_get_isa(), FOLD_CODEC_ISA_AUTO);
}

Test(codec, supported_pairs_and_masks)
{
    for (int d = 0; d < FOLD_DTYPE_COUNT; d++) {
        fold_dtype_t dt = (fold_dtype_t)d;
        int wide = dt == FOLD_INT32 || dt == FOLD_INT64 || dt == FOLD_UINT32 || dt == FOLD_UINT64;
        for (int o = 0; o < FOLD_OP_PREDEFINED_COUNT; o++) {
            fold_op_t op = (fold_op_t)o;
            int want = (op == FOLD_OP_SUM && (wide || is_float(dt))) ||
                       ((op == FOLD_OP_BOR || op == FOLD_OP_BXOR || op == FOLD_OP_LOR) && wide);
            cr_assert_eq(fold_codec_supported(op, dt), want, "%s %s", fold_op_name(op),
                         fold_dtype_name(dt));
        }
        cr_assert_eq(fold_codec_supported(FOLD_OP_USER_FIRST, dt), 0);
        int mask = is_float(dt) ? 0xe : wide ? 0x6 : 0;
        cr_assert_eq(fold_codec_valid_mask(dt), mask, "%s", fold_dtype_name(dt));
    }
}

Test(codec, sizes_and_choice)
{
    fold_codec_stats_t st = {1000, 10, 5, 1};
    cr_assert_eq(fold_codec_size(FOLD_CODEC_DENSE, FOLD_FLOAT32, &st), H + 4000);
    cr_assert_eq(fold_codec_size(FOLD_CODEC_BITS, FOLD_FLOAT32, &st), H + 16 * 8 + 40);
    cr_assert_eq(fold_codec_size(FOLD_CODEC_IDX, FOLD_FLOAT64, &st), H + 10 * 12);
    cr_assert_eq(fold_codec_size(FOLD_CODEC_RLE, FOLD_FLOAT64, &st), H + 16 * 8);
    cr_assert_eq(fold_codec_size(FOLD_CODEC_RLE, FOLD_INT32, &st), SIZE_MAX);
    cr_assert_eq(fold_codec_size(FOLD_CODEC_BITS, FOLD_INT8, &st), SIZE_MAX);
    fold_codec_stats_t huge = {(size_t)1 << 32, 1, 1, 0};
    cr_assert_eq(fold_codec_size(FOLD_CODEC_IDX, FOLD_FLOAT32, &huge), SIZE_MAX);
    cr_assert_eq(fold_codec_choose(FOLD_FLOAT32, &huge, 1 << FOLD_CODEC_IDX), FOLD_CODEC_DENSE);
    cr_assert_eq(fold_codec_choose(FOLD_FLOAT32, &huge, 0xe), FOLD_CODEC_RLE);

    /* The choice is the smallest actual encoding of the mask, against raw n * es. */
    uint64_t rng = 99;
    const double dens[] = {0, 0.001, 0.02, 0.05, 0.3, 0.9, 1};
    for (size_t d = 0; d < NDTYPES; d++) {
        fold_dtype_t dt = dtypes[d];
        size_t es = esz(dt), n = 3001;
        void *x = xmalloc(n * es);
        unsigned char *w = xmalloc(ref_capacity(n, es));
        for (size_t di = 0; di < sizeof(dens) / sizeof(dens[0]); di++) {
            for (int layout = 0; layout < 2; layout++) {
                gen_vec(x, dt, n, dens[di], (layout_t)layout, 1, &rng);
                fold_codec_stats_t s;
                fold_codec_count(dt, x, n, &s);
                for (int mask = 0; mask < 16; mask++) {
                    fold_codec_id_t best = FOLD_CODEC_DENSE;
                    size_t best_len = n * es;
                    for (int c = 1; c < 4; c++) {
                        if ((mask & (1 << c)) && codec_valid((fold_codec_id_t)c, dt)) {
                            size_t len = ref_encode((fold_codec_id_t)c, dt, x, n, w);
                            if (len < best_len) {
                                best = (fold_codec_id_t)c;
                                best_len = len;
                            }
                        }
                    }
                    cr_assert_eq(fold_codec_choose(dt, &s, mask), best, "%s density %g mask %d",
                                 fold_dtype_name(dt), dens[di], mask);
                }
            }
        }
        free(w);
        free(x);
    }
}

Test(codec, sample_density)
{
    size_t n = 10000;
    float *x = xmalloc(n * sizeof(float));
    memset(x, 0, n * sizeof(float));
    cr_assert_eq(fold_codec_sample_density(FOLD_FLOAT32, x, n, 64), 0.0);
    for (size_t i = 0; i < n; i++) {
        x[i] = (i % 2) ? 1.0f : 0.0f;
    }
    double d = fold_codec_sample_density(FOLD_FLOAT32, x, n, 64);
    cr_assert(d > 0.3 && d < 0.7, "density %g", d);
    /* 1% non-zero: 32 samples see whole cache lines (512 elements), so they find some. */
    for (size_t i = 0; i < n; i++) {
        x[i] = (i % 100 == 37) ? 1.0f : 0.0f;
    }
    d = fold_codec_sample_density(FOLD_FLOAT32, x, n, 32);
    cr_assert(d > 0.001 && d < 0.04, "density %g", d);
    for (size_t i = 0; i < n; i++) {
        x[i] = -0.0f;
    }
    cr_assert_eq(fold_codec_sample_density(FOLD_FLOAT32, x, n, 64), 1.0);
    cr_assert_eq(fold_codec_sample_density(FOLD_FLOAT32, x, 3, 64), 1.0);   /* samples > n */
    cr_assert_eq(fold_codec_sample_density(FOLD_FLOAT32, x, 0, 64), 1.0);
    x[n - 1] = 0;
    cr_assert_eq(fold_codec_sample_density(FOLD_FLOAT32, x + n - 1, 1, 64), 0.0);
    free(x);
}

/* ---- Round trips ---------------------------------------------------------------------- */

static void roundtrip_lengths(const size_t *lens, size_t nlens, const double *dens, size_t ndens,
                              uint64_t seed)
{
    find_isas();
    uint64_t rng = seed;
    char what[160];
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (size_t d = 0; d < NDTYPES; d++) {
            fold_dtype_t dt = dtypes[d];
            size_t es = esz(dt);
            for (size_t li = 0; li < nlens; li++) {
                size_t n = lens[li];
                void *x = xmalloc(n * es);
                for (size_t di = 0; di < ndens; di++) {
                    for (int layout = 0; layout < 2; layout++) {
                        gen_vec(x, dt, n, dens[di], (layout_t)layout, 1, &rng);
                        for (size_t c = 0; c < 4; c++) {
                            if (!codec_valid(codecs[c], dt)) {
                                continue;
                            }
                            snprintf(what, sizeof(what), "%s %s n=%zu density %g %s %s",
                                     fold_codec_isa_name((fold_codec_isa_t)isas[ii]),
                                     fold_dtype_name(dt), n, dens[di],
                                     layout ? "clustered" : "random", fold_codec_name(codecs[c]));
                            check_codec(codecs[c], dt, x, n, what);
                        }
                    }
                }
                free(x);
            }
        }
    }
}

Test(codec, roundtrip_small_lengths)
{
    size_t lens[131];
    for (size_t i = 0; i <= 130; i++) {
        lens[i] = i;
    }
    const double dens[] = {0.0, 0.1, 0.6, 1.0};
    roundtrip_lengths(lens, 131, dens, sizeof(dens) / sizeof(dens[0]), 1);
}

Test(codec, roundtrip_block_edges_and_primes)
{
    const size_t lens[] = {2047, 2048, 2049, 4095, 4097, 6143, 7919, 20011};
    const double dens[] = {0.003, 0.5};
    roundtrip_lengths(lens, sizeof(lens) / sizeof(lens[0]), dens, sizeof(dens) / sizeof(dens[0]), 2);
}

Test(codec, roundtrip_densities)
{
    const size_t lens[] = {24001};
    const double dens[] = {0.0, 0.001, 0.01, 0.1, 0.5, 0.9, 0.99, 1.0};
    roundtrip_lengths(lens, 1, dens, sizeof(dens) / sizeof(dens[0]), 3);
}

/* NaNs of every kind next to zero runs, signed zeros, denormals, infinities. */
Test(codec, roundtrip_specials)
{
    find_isas();
    char what[128];
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (int f = 0; f < 2; f++) {
            fold_dtype_t dt = f ? FOLD_FLOAT64 : FOLD_FLOAT32;
            size_t es = esz(dt);
            size_t nsp = es == 4 ? sizeof(special32) / 4 : sizeof(special64) / 8;
            /* Each special alone, between zeros, at both ends, doubled. */
            size_t n = nsp * 7 + 3;
            void *x = xmalloc(n * es);
            for (int variant = 0; variant < 4; variant++) {
                memset(x, 0, n * es);
                for (size_t s = 0; s < nsp; s++) {
                    uint64_t v = es == 4 ? special32[s] : special64[s];
                    size_t at = s * 7 + (size_t)variant;
                    put(x, at, es, v);
                    if (variant >= 2) {
                        put(x, at + 1, es, v);
                    }
                    if (variant == 3) {
                        put(x, 0, es, v);
                        put(x, n - 1, es, v);
                    }
                }
                for (size_t c = 0; c < 4; c++) {
                    snprintf(what, sizeof(what), "%s %s specials variant %d %s",
                             fold_codec_isa_name((fold_codec_isa_t)isas[ii]), fold_dtype_name(dt),
                             variant, fold_codec_name(codecs[c]));
                    check_codec(codecs[c], dt, x, n, what);
                }
            }
            /* All NaNs: RLE doubles (every one escaped). */
            for (size_t i = 0; i < n; i++) {
                put(x, i, es, es == 4 ? 0xffc00000ull : 0xfff8000000000000ull);
            }
            for (size_t c = 0; c < 4; c++) {
                check_codec(codecs[c], dt, x, n, "all negative NaNs");
            }
            free(x);
        }
    }
}

/* Runs longer than FOLD_CODEC_RLE_SPLIT, and runs crossing the split points. */
Test(codec, long_zero_runs)
{
    find_isas();
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        const fold_dtype_t dts[] = {FOLD_FLOAT32, FOLD_FLOAT64, FOLD_INT32, FOLD_UINT64};
        for (size_t d = 0; d < 4; d++) {
            fold_dtype_t dt = dts[d];
            size_t es = esz(dt), n = 3 * SPLIT + 777;
            void *x = xmalloc(n * es);
            memset(x, 0, n * es);
            for (size_t c = 0; c < 4; c++) {
                if (codec_valid(codecs[c], dt)) {
                    check_codec(codecs[c], dt, x, n, "all zero");
                }
            }
            fold_codec_stats_t st;
            fold_codec_count(dt, x, n, &st);
            cr_assert_eq(st.runs, 4);   /* split at 65536, 131072, 196608 */
            cr_assert_eq(st.nnz, 0);
            put(x, SPLIT - 1, es, 5);   /* a non-zero right before a split */
            put(x, 2 * SPLIT, es, 6);   /* and right at one */
            put(x, n - 1, es, 7);
            for (size_t c = 0; c < 4; c++) {
                if (codec_valid(codecs[c], dt)) {
                    check_codec(codecs[c], dt, x, n, "sparse across splits");
                }
            }
            fold_codec_count(dt, x, n, &st);
            cr_assert_eq(st.runs, 4, "runs %zu", st.runs);
            free(x);
        }
    }
}

Test(codec, empty_vectors_and_bad_arguments)
{
    unsigned char wire[64];
    float x = 1.0f;
    fold_codec_stats_t st = {9, 9, 9, 9};
    fold_codec_count(FOLD_FLOAT32, NULL, 0, &st);
    cr_assert(st.count == 0 && st.nnz == 0 && st.runs == 0 && st.nans == 0);
    for (size_t c = 0; c < 4; c++) {
        size_t len = fold_codec_encode(codecs[c], FOLD_FLOAT32, &x, 0, wire, sizeof(wire));
        cr_assert_eq(len, H);
        cr_assert_eq(fold_codec_decode(FOLD_FLOAT32, wire, len, &x, 0), FOLD_OK);
        cr_assert_eq(fold_codec_encode(codecs[c], FOLD_FLOAT32, &x, 0, wire, H - 1), 0);
    }
    cr_assert_eq(fold_codec_encode(FOLD_CODEC_RLE, FOLD_INT32, &x, 1, wire, sizeof(wire)), 0);
    cr_assert_eq(fold_codec_encode(FOLD_CODEC_BITS, FOLD_INT16, &x, 1, wire, sizeof(wire)), 0);
    cr_assert_eq(fold_codec_encode((fold_codec_id_t)7, FOLD_FLOAT32, &x, 1, wire, sizeof(wire)), 0);
    cr_assert_eq(fold_codec_decode(FOLD_INT8, wire, H, &x, 0), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_codec_decode(FOLD_FLOAT32, NULL, H, &x, 0), FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_codec_reduce_wire(FOLD_OP_PROD, FOLD_FLOAT32, wire, H, &x, &x, 0, NULL),
                 FOLD_ERR_INVALID_ARG);
    cr_assert_eq(fold_codec_reduce_wire(FOLD_OP_BOR, FOLD_FLOAT32, wire, H, &x, &x, 0, NULL),
                 FOLD_ERR_INVALID_ARG);
    size_t out_len = 5;
    cr_assert_eq(fold_codec_reduce_wire_encode(FOLD_OP_MIN, FOLD_INT32, FOLD_CODEC_BITS, wire, H,
                                               &x, 0, wire + 32, 32, &out_len),
                 FOLD_ERR_INVALID_ARG);
    cr_assert_eq(out_len, 0);
    cr_assert_eq(fold_codec_reduce_encode(FOLD_OP_MAX, FOLD_INT32, FOLD_CODEC_BITS, &x, &x, 1,
                                          wire, sizeof(wire)),
                 0);
    fold_codec_reduce_count(FOLD_OP_PROD, FOLD_INT32, &x, &x, &x, 1, &st);
    cr_assert_eq(st.count, 0);
    /* int8 has no codecs: count says dense. */
    signed char bytes[5] = {0, 1, 0, 0, 2};
    fold_codec_count(FOLD_INT8, bytes, 5, &st);
    cr_assert(st.count == 5 && st.nnz == 5);
}

/* The pair and complex types have no codec (their zeros are not one neutral word, and
 * maxloc/minloc have no sparse form): every entry point refuses them or calls them
 * dense, so the wire sends them as they are. */
Test(codec, pair_and_complex_types_stay_dense)
{
    const fold_dtype_t types[] = {FOLD_FLOAT_INT, FOLD_DOUBLE_INT, FOLD_LONG_INT, FOLD_2INT,
                                  FOLD_SHORT_INT, FOLD_COMPLEX_FLOAT32, FOLD_COMPLEX_FLOAT64};
    unsigned char zeros[256] = {0}, wire[512], out[256];
    float one = 1.0f;
    size_t len = fold_codec_encode(FOLD_CODEC_BITS, FOLD_FLOAT32, &one, 1, wire, sizeof(wire));
    cr_assert_gt(len, 0);
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        fold_dtype_t dt = types[t];
        size_t n = sizeof(zeros) / fold_dtype_size(dt);
        for (int o = 0; o < FOLD_OP_PREDEFINED_COUNT; o++) {
            cr_assert_not(fold_codec_supported((fold_op_t)o, dt), "%s", fold_dtype_name(dt));
        }
        cr_assert_eq(fold_codec_valid_mask(dt), 0);
        cr_assert_eq(fold_codec_sample_density(dt, zeros, n, 4), 1.0);
        fold_codec_stats_t st;
        fold_codec_count(dt, zeros, n, &st);
        cr_assert(st.count == n && st.nnz == n, "%s counted sparse", fold_dtype_name(dt));
        for (size_t c = 0; c < 4; c++) {
            cr_assert_eq(fold_codec_encode(codecs[c], dt, zeros, n, wire, sizeof(wire)), 0);
        }
        cr_assert_eq(fold_codec_decode(dt, wire, len, out, 1), FOLD_ERR_INVALID_ARG);
        cr_assert_eq(fold_codec_reduce_wire(FOLD_OP_SUM, dt, wire, len, out, out, 1, NULL),
                     FOLD_ERR_INVALID_ARG);
    }
}

/* ---- Fused kernels ---------------------------------------------------------------------- */

typedef struct pair {
    fold_op_t    op;
    fold_dtype_t dt;
} pair_t;

static const pair_t pairs[] = {
    {FOLD_OP_SUM, FOLD_FLOAT32}, {FOLD_OP_SUM, FOLD_FLOAT64}, {FOLD_OP_SUM, FOLD_INT32},
    {FOLD_OP_SUM, FOLD_INT64},   {FOLD_OP_SUM, FOLD_UINT32},  {FOLD_OP_SUM, FOLD_UINT64},
    {FOLD_OP_BOR, FOLD_INT32},   {FOLD_OP_BOR, FOLD_UINT64},  {FOLD_OP_BXOR, FOLD_INT64},
    {FOLD_OP_BXOR, FOLD_UINT32}, {FOLD_OP_LOR, FOLD_INT32},   {FOLD_OP_LOR, FOLD_INT64},
    {FOLD_OP_LOR, FOLD_UINT32},  {FOLD_OP_LOR, FOLD_UINT64},  {FOLD_OP_BOR, FOLD_INT64},
    {FOLD_OP_BXOR, FOLD_UINT64},
};

/* All four fused entry points for a op b, against fold_reduce_local. */
static void check_fused(fold_op_t op, fold_dtype_t dt, const void *a, const void *b, size_t n,
                        const char *what)
{
    size_t es = esz(dt), bytes = n * es;
    void *ref = xmalloc(bytes);
    cr_assert_eq(fold_reduce_local(op, dt, a, b, ref, n, 1, 0), FOLD_OK);
    fold_codec_stats_t rst = ref_stats(dt, ref, n), st;

    unsigned char *enc = xmalloc(ref_capacity(n, es));
    unsigned char *want = xmalloc(ref_capacity(n, es));
    void *out = xmalloc(bytes + SLACK);
    void *bcopy = xmalloc(bytes);
    char w2[200];

    /* reduce_count: distinct, out == a, out == b. */
    for (int alias = 0; alias < 3; alias++) {
        memcpy(bcopy, alias == 1 ? a : b, bytes);
        void *dst = alias == 0 ? out : bcopy;
        const void *l = alias == 1 ? bcopy : a, *r = alias == 2 ? bcopy : b;
        fold_codec_reduce_count(op, dt, l, r, dst, n, &st);
        snprintf(w2, sizeof(w2), "%s: reduce_count alias %d", what, alias);
        assert_same_bytes(dst, ref, bytes, w2, es);
        assert_stats_eq(&st, &rst, w2);
    }
    fold_codec_reduce_count(op, dt, a, b, out, n, NULL);
    assert_same_bytes(out, ref, bytes, what, es);

    for (size_t c = 0; c < 4; c++) {
        fold_codec_id_t codec = codecs[c];
        if (!codec_valid(codec, dt)) {
            continue;
        }
        size_t elen = ref_encode(codec, dt, a, n, enc);
        unsigned char *msg = xmalloc(elen);   /* exact size: ASan checks the reads */
        memcpy(msg, enc, elen);

        /* reduce_wire: a_C op b -> out, and -> b in place. */
        snprintf(w2, sizeof(w2), "%s: reduce_wire(%s)", what, fold_codec_name(codec));
        memset(out, CANARY, bytes + SLACK);
        cr_assert_eq(fold_codec_reduce_wire(op, dt, msg, elen, b, out, n, &st), FOLD_OK, "%s: %s",
                     w2, fold_codec_error_detail());
        assert_same_bytes(out, ref, bytes, w2, es);
        assert_stats_eq(&st, &rst, w2);
        for (size_t i = bytes; i < bytes + SLACK; i++) {
            cr_assert_eq(((unsigned char *)out)[i], CANARY, "%s: wrote past n", w2);
        }
        memcpy(bcopy, b, bytes);
        cr_assert_eq(fold_codec_reduce_wire(op, dt, msg, elen, bcopy, bcopy, n, NULL), FOLD_OK);
        assert_same_bytes(bcopy, ref, bytes, w2, es);

        /* reduce_encode and reduce_wire_encode into every codec. */
        for (size_t c2 = 0; c2 < 4; c2++) {
            fold_codec_id_t oc = codecs[c2];
            if (!codec_valid(oc, dt)) {
                continue;
            }
            size_t wlen = ref_encode(oc, dt, ref, n, want);
            unsigned char *ow = xmalloc(wlen + SLACK);
            snprintf(w2, sizeof(w2), "%s: %s -> reduce_wire_encode -> %s", what,
                     fold_codec_name(codec), fold_codec_name(oc));
            size_t olen = 77;
            memset(ow, CANARY, wlen + SLACK);
            cr_assert_eq(fold_codec_reduce_wire_encode(op, dt, oc, msg, elen, b, n, ow, wlen, &olen),
                         FOLD_OK, "%s", w2);
            cr_assert_eq(olen, wlen, "%s: %zu bytes, want %zu", w2, olen, wlen);
            assert_same_bytes(ow, want, wlen, w2, es);
            if (wlen > 0) {
                memset(ow, CANARY, wlen + SLACK);
                cr_assert_eq(fold_codec_reduce_wire_encode(op, dt, oc, msg, elen, b, n, ow,
                                                           wlen - 1, &olen),
                             FOLD_OK);
                cr_assert_eq(olen, 0, "%s: fits one byte less", w2);
                for (size_t i = wlen - 1; i < wlen + SLACK; i++) {
                    cr_assert_eq(ow[i], CANARY, "%s: wrote past cap", w2);
                }
            }
            if (c == 0) {
                snprintf(w2, sizeof(w2), "%s: reduce_encode -> %s", what, fold_codec_name(oc));
                memset(ow, CANARY, wlen + SLACK);
                cr_assert_eq(fold_codec_reduce_encode(op, dt, oc, a, b, n, ow, wlen), wlen, "%s",
                             w2);
                assert_same_bytes(ow, want, wlen, w2, es);
                memset(ow, CANARY, wlen + SLACK);
                cr_assert_eq(fold_codec_reduce_encode(op, dt, oc, a, b, n, ow, wlen - 1), 0, "%s",
                             w2);
                for (size_t i = wlen - 1; i < wlen + SLACK; i++) {
                    cr_assert_eq(ow[i], CANARY, "%s: wrote past cap", w2);
                }
            }
            free(ow);
        }
        free(msg);
    }
    free(bcopy);
    free(out);
    free(want);
    free(enc);
    free(ref);
}

/* One pair per kernel (signed and unsigned integers share theirs). */
static const pair_t kernel_pairs[] = {
    {FOLD_OP_SUM, FOLD_FLOAT32}, {FOLD_OP_SUM, FOLD_FLOAT64}, {FOLD_OP_SUM, FOLD_INT32},
    {FOLD_OP_SUM, FOLD_UINT64},  {FOLD_OP_BOR, FOLD_UINT32},  {FOLD_OP_BOR, FOLD_INT64},
    {FOLD_OP_BXOR, FOLD_INT32},  {FOLD_OP_BXOR, FOLD_UINT64}, {FOLD_OP_LOR, FOLD_UINT32},
    {FOLD_OP_LOR, FOLD_INT64},
};

static void fused_cases(const pair_t *pl, size_t npairs, const size_t *lens, size_t nlens,
                        const double *dens, size_t ndens, int diagonal, uint64_t seed)
{
    find_isas();
    uint64_t rng = seed;
    char what[200];
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (size_t p = 0; p < npairs; p++) {
            fold_op_t op = pl[p].op;
            fold_dtype_t dt = pl[p].dt;
            size_t es = esz(dt);
            for (size_t li = 0; li < nlens; li++) {
                size_t n = lens[li];
                void *a = xmalloc(n * es), *b = xmalloc(n * es);
                for (size_t da = 0; da < ndens; da++) {
                    for (size_t db = diagonal ? da : 0; db < (diagonal ? da + 1 : ndens); db++) {
                        int layout = (int)((da + db) % 2);
                        gen_vec(a, dt, n, dens[da], (layout_t)layout, 0, &rng);
                        gen_vec(b, dt, n, dens[db], (layout_t)layout, 0, &rng);
                        snprintf(what, sizeof(what), "%s %s %s n=%zu density %g op %g",
                                 fold_codec_isa_name((fold_codec_isa_t)isas[ii]), fold_op_name(op),
                                 fold_dtype_name(dt), n, dens[da], dens[db]);
                        check_fused(op, dt, a, b, n, what);
                    }
                }
                free(a);
                free(b);
            }
        }
    }
}

#define NPAIRS(p) (sizeof(p) / sizeof(p[0]))

Test(codec, fused_small)
{
    const size_t lens[] = {0, 1, 2, 7, 16, 33, 64, 65, 127, 130};
    const double dens[] = {0.0, 0.3, 1.0};
    fused_cases(pairs, NPAIRS(pairs), lens, sizeof(lens) / sizeof(lens[0]), dens,
                sizeof(dens) / sizeof(dens[0]), 0, 11);
}

Test(codec, fused_blocks)
{
    const size_t lens[] = {4099};
    const double dens[] = {0.002, 0.1, 0.9};
    fused_cases(kernel_pairs, NPAIRS(kernel_pairs), lens, 1, dens, sizeof(dens) / sizeof(dens[0]), 0,
                12);
    /* Past FOLD_CODEC_RLE_SPLIT: runs cut in the stats and the RLE writer. */
    const pair_t big_pairs[] = {{FOLD_OP_SUM, FOLD_FLOAT32}, {FOLD_OP_SUM, FOLD_FLOAT64},
                                {FOLD_OP_BOR, FOLD_INT64},   {FOLD_OP_LOR, FOLD_UINT32}};
    const size_t big[] = {70001};
    const double bdens[] = {0.01, 0.5};
    fused_cases(big_pairs, NPAIRS(big_pairs), big, 1, bdens, sizeof(bdens) / sizeof(bdens[0]), 1,
                13);
}

/* NaN, infinity, -0.0 and denormal operands on one side, plain values on the
 * other (0 + -0.0 = +0.0, 0 + sNaN = qNaN: computed, never copied). */
Test(codec, fused_specials)
{
    find_isas();
    uint64_t rng = 13;
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (int f = 0; f < 2; f++) {
            fold_dtype_t dt = f ? FOLD_FLOAT64 : FOLD_FLOAT32;
            size_t es = esz(dt), n = 1000;
            void *a = xmalloc(n * es), *b = xmalloc(n * es);
            for (int side = 0; side < 2; side++) {
                void *sp = side ? b : a, *plain = side ? a : b;
                gen_vec(plain, dt, n, 0.5, LAYOUT_CLUSTERED, 0, &rng);
                memset(sp, 0, n * es);
                for (size_t i = 0; i < n; i += 3) {
                    put(sp, i, es, nonzero_elem(&rng, dt, 1));
                    size_t s = (i / 3) % (es == 4 ? sizeof(special32) / 4 : sizeof(special64) / 8);
                    put(sp, i + 1 < n ? i + 1 : i, es, es == 4 ? special32[s] : special64[s]);
                }
                check_fused(FOLD_OP_SUM, dt, a, b, n, side ? "specials in b" : "specials in a");
            }
            free(a);
            free(b);
        }
    }
}

/* Both operands NaN: the result must still be fold_reduce_local's bits. */
Test(codec, fused_nan_pairs)
{
    find_isas();
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (int f = 0; f < 2; f++) {
            fold_dtype_t dt = f ? FOLD_FLOAT64 : FOLD_FLOAT32;
            size_t es = esz(dt), nsp = es == 4 ? sizeof(special32) / 4 : sizeof(special64) / 8;
            size_t n = nsp * nsp + 5;
            void *a = xmalloc(n * es), *b = xmalloc(n * es);
            memset(a, 0, n * es);
            memset(b, 0, n * es);
            for (size_t i = 0; i < nsp; i++) {
                for (size_t j = 0; j < nsp; j++) {
                    put(a, i * nsp + j, es, es == 4 ? special32[i] : special64[i]);
                    put(b, i * nsp + j, es, es == 4 ? special32[j] : special64[j]);
                }
            }
            check_fused(FOLD_OP_SUM, dt, a, b, n, "special x special");
            free(a);
            free(b);
        }
    }
}

/* ---- Malformed messages ------------------------------------------------------------------- */

/* The library must accept exactly what the reference accepts and give the same
 * vector; on a refusal every output stays untouched. The message sits in a buffer
 * of exactly len bytes. */
static void check_verdict(fold_dtype_t dt, const unsigned char *msg, size_t len, size_t n,
                          const char *what)
{
    size_t es = esz(dt), bytes = n * es;
    unsigned char *m = xmalloc(len);
    memcpy(m, msg, len);
    void *want = xmalloc(bytes), *out = xmalloc(bytes + SLACK), *b = xmalloc(bytes);
    int ref_ok = ref_decode(dt, m, len, want, n) == 0;

    memset(out, CANARY, bytes + SLACK);
    int rc = fold_codec_decode(dt, m, len, out, n);
    cr_assert_eq(rc == FOLD_OK, ref_ok, "%s: decode %d (%s), reference %s", what, rc,
                 fold_codec_error_detail(), ref_ok ? "accepts" : "rejects");
    if (ref_ok) {
        assert_same_bytes(out, want, bytes, what, es);
    } else {
        cr_assert_eq(rc, FOLD_ERR_MALFORMED, "%s", what);
        cr_assert_str_neq(fold_codec_error_detail(), "", "%s", what);
        for (size_t i = 0; i < bytes + SLACK; i++) {
            cr_assert_eq(((unsigned char *)out)[i], CANARY, "%s: refused but wrote", what);
        }
    }

    /* The fused entry points decide the same, and touch nothing on a refusal. */
    fold_op_t op = FOLD_OP_SUM;
    for (size_t i = 0; i < n; i++) {
        put(b, i, es, is_float(dt) ? (es == 4 ? 0x3f800000u : 0x3ff0000000000000ull) : 1);
    }
    memset(out, CANARY, bytes + SLACK);
    rc = fold_codec_reduce_wire(op, dt, m, len, b, out, n, NULL);
    cr_assert_eq(rc == FOLD_OK, ref_ok, "%s: reduce_wire %d", what, rc);
    if (!ref_ok) {
        for (size_t i = 0; i < bytes + SLACK; i++) {
            cr_assert_eq(((unsigned char *)out)[i], CANARY, "%s: reduce_wire wrote", what);
        }
    }
    unsigned char *ow = xmalloc(H + 2 * bytes + bytes / 8 + 64);
    size_t olen = 1;
    rc = fold_codec_reduce_wire_encode(op, dt, FOLD_CODEC_BITS, m, len, b, n, ow,
                                       H + 2 * bytes + bytes / 8 + 64, &olen);
    cr_assert_eq(rc == FOLD_OK, ref_ok, "%s: reduce_wire_encode %d", what, rc);
    cr_assert(ref_ok ? olen > 0 : olen == 0);
    free(ow);
    free(b);
    free(out);
    free(want);
    free(m);
}

/* Messages of every codec, for the refusal tests. */
static size_t make_msg(fold_codec_id_t c, fold_dtype_t dt, size_t n, uint64_t seed,
                       unsigned char *w)
{
    size_t es = esz(dt);
    void *x = xmalloc(n * es);
    uint64_t rng = seed;
    gen_vec(x, dt, n, 0.3, LAYOUT_CLUSTERED, 1, &rng);
    if (is_float(dt) && n > 4) {
        put(x, 1, es, es == 4 ? 0xffc00001u : 0xfff8000000000001ull);   /* an escape */
        put(x, 2, es, 0);
    }
    size_t len = ref_encode(c, dt, x, n, w);
    free(x);
    return len;
}

Test(codec, refuses_truncation_and_extension)
{
    find_isas();
    char what[160];
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (size_t d = 0; d < NDTYPES; d++) {
            fold_dtype_t dt = dtypes[d];
            size_t es = esz(dt), n = 150;
            unsigned char *w = xmalloc(ref_capacity(n, es) + 16);
            for (size_t c = 0; c < 4; c++) {
                if (!codec_valid(codecs[c], dt)) {
                    continue;
                }
                size_t len = make_msg(codecs[c], dt, n, 5 + c, w);
                for (size_t cut = 0; cut <= len + 8; cut++) {
                    snprintf(what, sizeof(what), "%s %s %s len %zu of %zu",
                             fold_codec_isa_name((fold_codec_isa_t)isas[ii]), fold_dtype_name(dt),
                             fold_codec_name(codecs[c]), cut, len);
                    check_verdict(dt, w, cut, n, what);
                }
                /* Expected n off by one either way, and another datatype. */
                size_t es2 = es == 4 ? 8 : 4;
                void *o = xmalloc((n + 1) * 8);
                cr_assert_eq(fold_codec_decode(dt, w, len, o, n - 1), FOLD_ERR_MALFORMED);
                cr_assert_eq(fold_codec_decode(dt, w, len, o, n + 1), FOLD_ERR_MALFORMED);
                cr_assert_eq(fold_codec_decode(es2 == 8 ? FOLD_FLOAT64 : FOLD_FLOAT32, w, len, o, n),
                             FOLD_ERR_MALFORMED);
                if (codecs[c] == FOLD_CODEC_RLE) {
                    cr_assert_eq(fold_codec_decode(es == 4 ? FOLD_INT32 : FOLD_INT64, w, len, o, n),
                                 FOLD_ERR_MALFORMED);
                }
                free(o);
            }
            free(w);
        }
    }
}

/* Every header byte and many payload bytes changed, one at a time. */
Test(codec, refuses_corruption)
{
    find_isas();
    char what[160];
    uint64_t rng = 21;
    const unsigned char flips[] = {0x01, 0x02, 0x80, 0xff, 0x10};
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (size_t d = 0; d < NDTYPES; d++) {
            fold_dtype_t dt = dtypes[d];
            size_t es = esz(dt), n = 200;
            unsigned char *w = xmalloc(ref_capacity(n, es));
            for (size_t c = 0; c < 4; c++) {
                if (!codec_valid(codecs[c], dt)) {
                    continue;
                }
                size_t len = make_msg(codecs[c], dt, n, 40 + c, w);
                for (size_t pos = 0; pos < len; pos += pos < H ? 1 : 1 + rng_next(&rng) % 5) {
                    for (size_t f = 0; f < sizeof(flips); f++) {
                        w[pos] ^= flips[f];
                        snprintf(what, sizeof(what), "%s %s %s byte %zu ^ %#x",
                                 fold_codec_isa_name((fold_codec_isa_t)isas[ii]),
                                 fold_dtype_name(dt), fold_codec_name(codecs[c]), pos, flips[f]);
                        check_verdict(dt, w, len, n, what);
                        w[pos] ^= flips[f];
                    }
                }
            }
            free(w);
        }
    }
}

/* Well-formed lengths with bad contents, built on purpose. */
Test(codec, refuses_bad_payloads)
{
    size_t n = 100, es = 4;
    float x[100];
    memset(x, 0, sizeof(x));
    x[3] = 1.0f;
    x[10] = 2.0f;
    x[50] = 3.0f;
    unsigned char w[1024];
    uint32_t u;
    fold_dtype_t dt = FOLD_FLOAT32;

    /* idx: duplicate, decreasing, out of range (values 1, 2, 3 at 3, 10, 50) */
    size_t len = ref_encode(FOLD_CODEC_IDX, dt, x, n, w);
    unsigned char *ix = w + H + 3 * es;
    const uint32_t bad_idx[][3] = {{3, 3, 50}, {10, 3, 50}, {3, 10, 100}, {3, 10, 0xffffffffu},
                                   {3, 10, 10}};
    for (size_t t = 0; t < 5; t++) {
        unsigned char m[256];
        memcpy(m, w, len);
        memcpy(m + (ix - w), bad_idx[t], 12);
        check_verdict(dt, m, len, n, "idx indices");
        cr_assert_eq(fold_codec_decode(dt, m, len, x, n), FOLD_ERR_MALFORMED, "idx case %zu", t);
    }

    /* bits: one bitmap bit more or less than values, a padding bit */
    len = ref_encode(FOLD_CODEC_BITS, dt, x, n, w);
    for (int t = 0; t < 3; t++) {
        unsigned char m[256];
        memcpy(m, w, len);
        size_t bit = t == 0 ? 4 : t == 1 ? 3 : 100;
        m[H + bit / 8] ^= (unsigned char)(1u << (bit % 8));
        cr_assert_eq(fold_codec_decode(dt, m, len, x, n), FOLD_ERR_MALFORMED, "bits case %d", t);
        check_verdict(dt, m, len, n, "bits bitmap");
    }

    /* rle: runs too long / too short, escape at the end, escape of a non-NaN */
    len = ref_encode(FOLD_CODEC_RLE, dt, x, n, w);   /* [run 3] 1 [run 6] 2 [run 39] 3 [run 49] */
    cr_assert_eq(len, H + 7 * es);
    for (int t = 0; t < 5; t++) {
        unsigned char m[256];
        memcpy(m, w, len);
        size_t mlen = len;
        if (t == 0 || t == 1) {
            memcpy(&u, m + H, 4);
            u += t == 0 ? 1 : -1;   /* run 4 or 2 */
            memcpy(m + H, &u, 4);
        } else if (t == 2) {   /* last marker replaced by an escape */
            u = 0xffffffffu;
            memcpy(m + H + 6 * es, &u, 4);
        } else if (t == 3) {   /* escape of a literal 1.0 */
            u = 0xffffffffu;
            memcpy(m + H + 5 * es, &u, 4);
            memcpy(m + H + 6 * es, &x[50], 4);
        } else {   /* run of the largest length */
            u = 0xfffffffeu;
            memcpy(m + H, &u, 4);
        }
        cr_assert_eq(fold_codec_decode(dt, m, mlen, x, n), FOLD_ERR_MALFORMED, "rle case %d", t);
        check_verdict(dt, m, mlen, n, "rle payload");
    }
    /* A run longer than the split is fine for the decoder. */
    float big[70000];
    memset(big, 0, sizeof(big));
    uint32_t words[1] = {0xff800000u | 70000u};
    unsigned char m[H + 4];
    ref_header(m, FOLD_CODEC_RLE, 4, 70000, 1);
    memcpy(m + H, words, 4);
    big[5] = 1.0f;
    cr_assert_eq(fold_codec_decode(dt, m, sizeof(m), big, 70000), FOLD_OK);
    cr_assert_eq(big[5], 0.0f);
    check_verdict(dt, m, sizeof(m), 70000, "long run");
}

/* Random messages and random mutations of valid ones: no crash, and the verdict
 * and contents of the reference. */
Test(codec, random_messages)
{
    find_isas();
    uint64_t rng = 77;
    char what[96];
    for (int ii = 0; ii < nisas; ii++) {
        use_isa(isas[ii]);
        for (int iter = 0; iter < 400; iter++) {
            fold_dtype_t dt = dtypes[rng_next(&rng) % NDTYPES];
            size_t es = esz(dt), n = rng_next(&rng) % 90;
            fold_codec_id_t c = codecs[rng_next(&rng) % 4];
            if (!codec_valid(c, dt)) {
                c = FOLD_CODEC_BITS;
            }
            unsigned char *w = xmalloc(ref_capacity(n, es) + 8);
            size_t len = make_msg(c, dt, n, rng_next(&rng), w);
            int muts = 1 + (int)(rng_next(&rng) % 4);
            for (int k = 0; k < muts && len > 0; k++) {
                size_t pos = H + (len > H ? rng_next(&rng) % (len - H + 1) : 0);
                if (pos >= len) {
                    pos = rng_next(&rng) % len;
                }
                switch (rng_next(&rng) % 3) {
                case 0: w[pos] ^= (unsigned char)(1u << (rng_next(&rng) % 8)); break;
                case 1: w[pos] = (unsigned char)rng_next(&rng); break;
                default: /* a marker-like word */
                    if (pos + es <= len) {
                        uint64_t v = mark_of(es) | (rng_next(&rng) % 5) | ((rng_next(&rng) & 1) * esc_of(es));
                        put(w + pos, 0, es, v);
                    }
                    break;
                }
            }
            snprintf(what, sizeof(what), "iteration %d (%s %s n=%zu)", iter, fold_dtype_name(dt),
                     fold_codec_name(c), n);
            check_verdict(dt, w, len, n, what);
            free(w);
        }
    }
}
