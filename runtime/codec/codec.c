/*
 * The codec library's front: names, which (op, datatype) pairs and codecs apply,
 * stats -> sizes -> choice, the header, message validation and the choice of
 * instruction set. The passes over the data are in codec_fused.c.
 */
#include "codec/codec_impl.h"

#include <stdatomic.h>
#include <strings.h>

/* ---- Names --------------------------------------------------------------------- */

static const char *const codec_names[FOLD_CODEC_NCODECS] = {
    [FOLD_CODEC_DENSE] = "dense", [FOLD_CODEC_BITS] = "bits",
    [FOLD_CODEC_IDX] = "idx",     [FOLD_CODEC_RLE] = "rle",
};

#define CODEC_MASK_ALL ((1 << FOLD_CODEC_BITS) | (1 << FOLD_CODEC_IDX) | (1 << FOLD_CODEC_RLE))

const char *fold_codec_name(fold_codec_id_t c)
{
    return (int)c >= 0 && c < FOLD_CODEC_NCODECS ? codec_names[c] : "unknown";
}

int fold_codec_parse(const char *s, int *mask_out)
{
    if (s == NULL || mask_out == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (strcasecmp(s, "auto") == 0) {
        *mask_out = CODEC_MASK_ALL;
        return FOLD_OK;
    }
    if (strcasecmp(s, "none") == 0) {
        *mask_out = 0;
        return FOLD_OK;
    }
    int mask = 0;
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int c = FOLD_CODEC_BITS; c < FOLD_CODEC_NCODECS; c++) {
            if (len == strlen(codec_names[c]) && strncasecmp(p, codec_names[c], len) == 0) {
                mask |= 1 << c;
                found = 1;
            }
        }
        if (!found) {
            return FOLD_ERR_INVALID_ARG;   /* also an empty item: "", "bits,", ",rle" */
        }
        if (p[len] == '\0') {
            break;
        }
        p += len + 1;
    }
    *mask_out = mask;
    return FOLD_OK;
}

/* ---- Datatypes and ops ------------------------------------------------------- */

size_t codec_esize(fold_dtype_t dtype)
{
    switch (dtype) {
    case FOLD_INT32: case FOLD_UINT32: case FOLD_FLOAT32:
        return 4;
    case FOLD_INT64: case FOLD_UINT64: case FOLD_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

int codec_is_float(fold_dtype_t dtype)
{
    return dtype == FOLD_FLOAT32 || dtype == FOLD_FLOAT64;
}

codec_opk_t codec_opk(fold_op_t op, fold_dtype_t dtype)
{
    if (codec_esize(dtype) == 0) {
        return CODEC_OPK_NONE;
    }
    int is_float = codec_is_float(dtype);
    switch (op) {
    case FOLD_OP_SUM:  return is_float ? CODEC_OPK_FSUM : CODEC_OPK_ISUM;
    case FOLD_OP_BOR:  return is_float ? CODEC_OPK_NONE : CODEC_OPK_BOR;
    case FOLD_OP_BXOR: return is_float ? CODEC_OPK_NONE : CODEC_OPK_BXOR;
    case FOLD_OP_LOR:  return is_float ? CODEC_OPK_NONE : CODEC_OPK_LOR;
    default:           return CODEC_OPK_NONE;
    }
}

int fold_codec_supported(fold_op_t op, fold_dtype_t dtype)
{
    return codec_opk(op, dtype) != CODEC_OPK_NONE;
}

int fold_codec_valid_mask(fold_dtype_t dtype)
{
    if (codec_esize(dtype) == 0) {
        return 0;
    }
    return codec_is_float(dtype) ? CODEC_MASK_ALL
                                 : (1 << FOLD_CODEC_BITS) | (1 << FOLD_CODEC_IDX);
}

/* ---- Sizes and the choice ---------------------------------------------------- */

/* a * b + c, or SIZE_MAX on overflow. */
static size_t size_mul_add(size_t a, size_t b, size_t c)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) {
        return SIZE_MAX;
    }
    return r;
}

size_t fold_codec_size(fold_codec_id_t c, fold_dtype_t dtype, const fold_codec_stats_t *st)
{
    size_t es = codec_esize(dtype);
    const size_t h = FOLD_CODEC_HEADER_BYTES;
    if (st == NULL || es == 0) {
        return SIZE_MAX;
    }
    if (c == FOLD_CODEC_DENSE) {
        return size_mul_add(st->count, es, h);
    }
    if ((int)c < 0 || c >= FOLD_CODEC_NCODECS || !(fold_codec_valid_mask(dtype) & (1 << c))) {
        return SIZE_MAX;
    }
    switch (c) {
    case FOLD_CODEC_BITS:
        return size_mul_add(st->nnz, es, h + (st->count / 64 + (st->count % 64 != 0)) * 8);
    case FOLD_CODEC_IDX:
        if ((uint64_t)st->count > UINT32_MAX) {
            return SIZE_MAX;
        }
        return size_mul_add(st->nnz, es + 4, h);
    case FOLD_CODEC_RLE: {
        size_t words;
        if (__builtin_add_overflow(st->nnz, st->nans, &words) ||
            __builtin_add_overflow(words, st->runs, &words)) {
            return SIZE_MAX;
        }
        return size_mul_add(words, es, h);
    }
    default:
        return SIZE_MAX;
    }
}

fold_codec_id_t fold_codec_choose(fold_dtype_t dtype, const fold_codec_stats_t *st, int mask)
{
    size_t es = codec_esize(dtype);
    if (st == NULL || es == 0) {
        return FOLD_CODEC_DENSE;
    }
    fold_codec_id_t best = FOLD_CODEC_DENSE;
    size_t best_size = size_mul_add(st->count, es, 0);
    mask &= fold_codec_valid_mask(dtype);
    for (int c = FOLD_CODEC_BITS; c < FOLD_CODEC_NCODECS; c++) {
        if (mask & (1 << c)) {
            size_t s = fold_codec_size((fold_codec_id_t)c, dtype, st);
            if (s < best_size) {
                best = (fold_codec_id_t)c;
                best_size = s;
            }
        }
    }
    return best;
}

/* Any datatype's element size (fold_dtype_size, without the dependency). */
static size_t dtype_bytes(fold_dtype_t dtype)
{
    switch (dtype) {
    case FOLD_INT8: case FOLD_UINT8:
        return 1;
    case FOLD_INT16: case FOLD_UINT16: case FOLD_FLOAT16: case FOLD_BFLOAT16:
        return 2;
    default:
        return codec_esize(dtype);
    }
}

/* Elements of a whole 64-byte line of T with any bit set: a fixed trip count the
 * compiler turns into a few vector compares. */
#define LINE_NONZERO(T)                                                                   \
    do {                                                                                \
        T v[64 / sizeof(T)];                                                            \
        memcpy(v, x, 64);                                                               \
        for (size_t k = 0; k < 64 / sizeof(T); k++) {                                   \
            nonzero += v[k] != 0;                                                       \
        }                                                                               \
        return nonzero;                                                                 \
    } while (0)

/* Elements of x[0..n) of T with any bit set, for any n (one unaligned load each). */
#define ELEMS_NONZERO(T)                                                                  \
    do {                                                                                \
        for (size_t k = 0; k < n; k++) {                                                \
            T v;                                                                        \
            memcpy(&v, x + sizeof(T) * k, sizeof(T));                                   \
            nonzero += v != 0;                                                          \
        }                                                                               \
        return nonzero;                                                                 \
    } while (0)

/* Elements of x[0..n) with any bit set (-0.0 counts: it is not the neutral bits). */
static size_t count_nonzero_bits(const unsigned char *x, size_t n, size_t es)
{
    size_t nonzero = 0;
    if (n * es == 64) {
        switch (es) {
        case 8: LINE_NONZERO(uint64_t);
        case 4: LINE_NONZERO(uint32_t);
        case 2: LINE_NONZERO(uint16_t);
        case 1: LINE_NONZERO(uint8_t);
        default: break;
        }
    }
    switch (es) {
    case 8: ELEMS_NONZERO(uint64_t);
    case 4: ELEMS_NONZERO(uint32_t);
    case 2: ELEMS_NONZERO(uint16_t);
    default:
        for (size_t k = 0; k < n; k++) {
            unsigned char any = 0;
            for (size_t b = 0; b < es; b++) {
                any |= x[k * es + b];
            }
            nonzero += any != 0;
        }
        return nonzero;
    }
}

/* Sample j is around element floor((j + 1/2) n / samples): spread over the vector,
 * walked with an integer step and remainder (no overflow for any n). */
typedef struct sample_walk {
    size_t i, step, rem, acc, samples;
} sample_walk_t;

static sample_walk_t sample_walk_start(size_t n, size_t samples)
{
    sample_walk_t w = {0, n / samples, n % samples, 0, samples};
    w.i   = w.step / 2;
    w.acc = w.rem / 2;
    return w;
}

static void sample_walk_next(sample_walk_t *w)
{
    w->i += w->step;
    w->acc += w->rem;
    if (w->acc >= w->samples) {
        w->acc -= w->samples;
        w->i++;
    }
}

double fold_codec_sample_density(fold_dtype_t dtype, const void *x, size_t n, size_t samples)
{
    size_t es = dtype_bytes(dtype);
    if (n == 0 || samples == 0 || x == NULL || es == 0) {
        return 1.0;
    }
    if (samples > n) {
        samples = n;
    }
    const unsigned char *p = x;
    /* The data is usually out of cache: ask for every line first, so the misses
     * overlap instead of following one another. */
    sample_walk_t w = sample_walk_start(n, samples);
    for (size_t j = 0; j < samples; j++, sample_walk_next(&w)) {
        __builtin_prefetch(p + w.i * es);
    }
    /* A load brings in its whole cache line, so every element of the line (within
     * the vector) is looked at: 16 float32s for the price of one. A vector not
     * aligned to its elements gets one element per sample. */
    uintptr_t base = (uintptr_t)p, end = base + n * es;
    int whole_lines = (base & (es - 1)) == 0;
    unsigned shift = (unsigned)__builtin_ctzl(es);
    size_t nonzero = 0, seen = 0;
    w = sample_walk_start(n, samples);
    for (size_t j = 0; j < samples; j++, sample_walk_next(&w)) {
        uintptr_t lo = base + w.i * es, hi = lo + es;
        if (whole_lines) {
            uintptr_t line = lo & ~(uintptr_t)63;
            lo = line > base ? line : base;
            hi = line + 64 < end ? line + 64 : end;
        }
        size_t k = (size_t)(hi - lo) >> shift;
        nonzero += count_nonzero_bits((const unsigned char *)lo, k, es);
        seen += k;
    }
    return (double)nonzero / (double)seen;
}

/* ---- Header and validation --------------------------------------------------- */

static _Thread_local const char *codec_error = "";

void codec_set_error(const char *why)
{
    codec_error = why;
}

const char *fold_codec_error_detail(void)
{
    return codec_error;
}

void codec_write_header(unsigned char *wire, fold_codec_id_t c, size_t esize, size_t n,
                        size_t k)
{
    codec_st32(wire, FOLD_CODEC_MAGIC);
    wire[4] = (unsigned char)c;
    wire[5] = (unsigned char)esize;
    wire[6] = 0;
    wire[7] = 0;
    codec_st64(wire + 8, (uint64_t)n);
    codec_st64(wire + 16, (uint64_t)k);
}

static int malformed(const char *why)
{
    codec_set_error(why);
    return FOLD_ERR_MALFORMED;
}

const codec_format_t *codec_format(fold_codec_id_t c)
{
    switch (c) {
    case FOLD_CODEC_DENSE: return &codec_format_dense;
    case FOLD_CODEC_BITS:  return &codec_format_bits;
    case FOLD_CODEC_IDX:   return &codec_format_idx;
    case FOLD_CODEC_RLE:   return &codec_format_rle;
    default:               return NULL;
    }
}

int codec_parse(fold_dtype_t dtype, const void *wire, size_t len, size_t n,
                const codec_kernels_t *kern, codec_msg_t *m)
{
    const unsigned char *w = wire;
    const size_t h = FOLD_CODEC_HEADER_BYTES;
    size_t es = codec_esize(dtype);

    if (len < h) {
        return malformed("shorter than the header");
    }
    if (codec_ld32(w) != FOLD_CODEC_MAGIC) {
        return malformed("bad magic");
    }
    fold_codec_id_t c = (fold_codec_id_t)w[4];
    if (c != FOLD_CODEC_DENSE && (c >= FOLD_CODEC_NCODECS ||
                                  !(fold_codec_valid_mask(dtype) & (1 << c)))) {
        return malformed("codec unknown or not valid for the datatype");
    }
    if (w[5] != es) {
        return malformed("element size differs from the datatype's");
    }
    if (w[6] != 0 || w[7] != 0) {
        return malformed("reserved header bytes not zero");
    }
    uint64_t hn = codec_ld64(w + 8), hk = codec_ld64(w + 16);
    if (hn != (uint64_t)n) {
        return malformed("element count differs from the expected one");
    }
    /* k <= n, or <= 2n for rle (every element an escaped NaN). */
    if (hk > (uint64_t)n && !(c == FOLD_CODEC_RLE && hk - (uint64_t)n <= (uint64_t)n)) {
        return malformed("payload count too large for the element count");
    }
    size_t k = (size_t)hk;   /* <= 2n, and n elements are addressable */

    /* The payload must fill len exactly: compare by division, no products to overflow. */
    size_t rest = len - h;
    m->codec = c;
    m->esize = es;
    m->n = n;
    m->k = k;
    m->bitmap = NULL;
    m->vals = w + h;
    m->idx = NULL;
    switch (c) {
    case FOLD_CODEC_DENSE:
        if (k != n || rest % es != 0 || rest / es != n) {
            return malformed("dense: length is not n elements");
        }
        break;
    case FOLD_CODEC_BITS: {
        size_t bm = (n / 64 + (n % 64 != 0)) * 8;
        if (rest < bm || (rest - bm) % es != 0 || (rest - bm) / es != k) {
            return malformed("bits: length is not bitmap + k values");
        }
        m->bitmap = w + h;
        m->vals = w + h + bm;
        break;
    }
    case FOLD_CODEC_IDX:
        if ((uint64_t)n > UINT32_MAX) {
            return malformed("idx: more elements than 32-bit indices reach");
        }
        if (rest % (es + 4) != 0 || rest / (es + 4) != k) {
            return malformed("idx: length is not k values + k indices");
        }
        m->idx = w + h + k * es;
        break;
    case FOLD_CODEC_RLE:
        if (rest % es != 0 || rest / es != k) {
            return malformed("rle: length is not k words");
        }
        break;
    default:
        return malformed("unknown codec");
    }
    const char *why = codec_format(c)->check(m, kern);
    if (why != NULL) {
        return malformed(why);
    }
    codec_set_error("");
    return FOLD_OK;
}

/* ---- Instruction set ------------------------------------------------------------ */

static const char *const isa_names[FOLD_CODEC_ISA_COUNT] = {
    [FOLD_CODEC_ISA_AUTO] = "auto",     [FOLD_CODEC_ISA_SCALAR] = "scalar",
    [FOLD_CODEC_ISA_AVX2] = "avx2",     [FOLD_CODEC_ISA_AVX512] = "avx512",
};

static atomic_int codec_isa;   /* 0 (AUTO): not chosen yet */

const char *fold_codec_isa_name(fold_codec_isa_t isa)
{
    return (int)isa >= 0 && isa < FOLD_CODEC_ISA_COUNT ? isa_names[isa] : "unknown";
}

int fold_codec_isa_parse(const char *s, fold_codec_isa_t *isa)
{
    for (int i = 0; s != NULL && isa != NULL && i < FOLD_CODEC_ISA_COUNT; i++) {
        if (strcasecmp(s, isa_names[i]) == 0) {
            *isa = (fold_codec_isa_t)i;
            return FOLD_OK;
        }
    }
    return FOLD_ERR_INVALID_ARG;
}

int fold_codec_isa_available(fold_codec_isa_t isa)
{
    switch (isa) {
    case FOLD_CODEC_ISA_AUTO:
    case FOLD_CODEC_ISA_SCALAR:
        return 1;
#ifdef CODEC_HAVE_X86
    case FOLD_CODEC_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") &&
               __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
    case FOLD_CODEC_ISA_AVX512:
        return fold_codec_isa_available(FOLD_CODEC_ISA_AVX2) &&
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
#endif
    default:
        return 0;
    }
}

static fold_codec_isa_t isa_best(void)
{
    for (int i = FOLD_CODEC_ISA_COUNT - 1; i > FOLD_CODEC_ISA_SCALAR; i--) {
        if (fold_codec_isa_available((fold_codec_isa_t)i)) {
            return (fold_codec_isa_t)i;
        }
    }
    return FOLD_CODEC_ISA_SCALAR;
}

int fold_codec_set_isa(fold_codec_isa_t isa)
{
    if ((int)isa < 0 || isa >= FOLD_CODEC_ISA_COUNT || !fold_codec_isa_available(isa)) {
        return FOLD_ERR_UNSUPPORTED;
    }
    atomic_store(&codec_isa, isa == FOLD_CODEC_ISA_AUTO ? isa_best() : isa);
    return FOLD_OK;
}

fold_codec_isa_t fold_codec_get_isa(void)
{
    int isa = atomic_load_explicit(&codec_isa, memory_order_relaxed);
    if (isa == FOLD_CODEC_ISA_AUTO) {
        isa = isa_best();   /* idempotent: racing first callers store the same */
        atomic_store_explicit(&codec_isa, isa, memory_order_relaxed);
    }
    return (fold_codec_isa_t)isa;
}

const codec_kernels_t *codec_kernels_for(size_t esize)
{
    int w = esize == 8;
    switch (fold_codec_get_isa()) {
#ifdef CODEC_HAVE_X86
    case FOLD_CODEC_ISA_AVX512: return &codec_kernels_avx512[w];
    case FOLD_CODEC_ISA_AVX2:   return &codec_kernels_avx2[w];
#endif
    default:                    return &codec_kernels_scalar[w];
    }
}
