/*
 * codec_bench: throughput of the sparse codec kernels (runtime/codec/codec.h) on
 * one core, beside memcpy and the dense fold_reduce_local for scale.
 *
 *   codec_bench [--isa auto|scalar|avx2|avx512] [--layout random|clustered]
 *               [--reps N] [--quick]
 *
 * For float32 and float64, a 16 MiB vector (memory-bound) and a 256 KiB one
 * (cache-resident), and non-zero densities 0.1% to 100%: GB/s = the dense bytes of
 * ONE vector (n * element size) / thread CPU time, the median of --reps samples
 * (each sample repeats the call until it lasts 2 ms or more). So memcpy moves 2x and a reduce
 * 3x the bytes the figure names. Operands: a and b with the density asked,
 * independent positions; a_C is a encoded with the codec of the row.
 *
 *   count         fold_codec_count(a)
 *   reduce_count  out = a + b, with stats (fold_codec_reduce_count)
 *   enc C         fold_codec_encode(C, a)
 *   dec C         fold_codec_decode(a_C)
 *   rw C          out = a_C + b (fold_codec_reduce_wire, stats on)     last hop
 *   re C          (a + b) -> C (fold_codec_reduce_encode)             first hop
 *   rwe C         (a_C + b) -> C (fold_codec_reduce_wire_encode)       middle hop
 *   size C        encoded bytes of a_C as % of dense
 */
#include "codec/codec.h"
#include "codec/reduce_kernel.h"

#include <fold/fold.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NDENS 5
static const double densities[NDENS] = {0.001, 0.01, 0.1, 0.5, 1.0};

typedef struct bench {
    fold_dtype_t    dt;
    size_t          n, es, bytes;
    unsigned char  *a, *b, *out, *wire, *wire2;
    size_t          cap;
    size_t          alen[FOLD_CODEC_NCODECS];   /* encoded a per codec */
    unsigned char  *aenc[FOLD_CODEC_NCODECS];
    fold_codec_id_t c;
} bench_t;

typedef void (*op_fn)(bench_t *bn);

static volatile size_t sink;

static void op_memcpy(bench_t *bn) { memcpy(bn->out, bn->a, bn->bytes); }
static void op_local(bench_t *bn)
{
    fold_reduce_local(FOLD_OP_SUM, bn->dt, bn->a, bn->b, bn->out, bn->n, 1, 0);
}
static void op_count(bench_t *bn)
{
    fold_codec_stats_t st;
    fold_codec_count(bn->dt, bn->a, bn->n, &st);
    sink = st.nnz;
}
static void op_reduce_count(bench_t *bn)
{
    fold_codec_stats_t st;
    fold_codec_reduce_count(FOLD_OP_SUM, bn->dt, bn->a, bn->b, bn->out, bn->n, &st);
    sink = st.nnz;
}
static void op_encode(bench_t *bn)
{
    sink = fold_codec_encode(bn->c, bn->dt, bn->a, bn->n, bn->wire, bn->cap);
}
static void op_decode(bench_t *bn)
{
    sink = (size_t)fold_codec_decode(bn->dt, bn->aenc[bn->c], bn->alen[bn->c], bn->out, bn->n);
}
static void op_reduce_wire(bench_t *bn)
{
    fold_codec_stats_t st;
    sink = (size_t)fold_codec_reduce_wire(FOLD_OP_SUM, bn->dt, bn->aenc[bn->c], bn->alen[bn->c],
                                          bn->b, bn->out, bn->n, &st);
}
static void op_reduce_encode(bench_t *bn)
{
    sink = fold_codec_reduce_encode(FOLD_OP_SUM, bn->dt, bn->c, bn->a, bn->b, bn->n, bn->wire,
                                    bn->cap);
}
static void op_reduce_wire_encode(bench_t *bn)
{
    size_t len;
    fold_codec_reduce_wire_encode(FOLD_OP_SUM, bn->dt, bn->c, bn->aenc[bn->c], bn->alen[bn->c],
                                  bn->b, bn->n, bn->wire2, bn->cap, &len);
    sink = len;
}

/* CPU time of this thread: the machine is shared, and time spent descheduled is
 * not the kernel's. (Cache and memory-bandwidth contention still show.) */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Median GB/s of `reps` samples; each sample repeats fn for >= 2 ms. */
static double measure(op_fn fn, bench_t *bn, int reps)
{
    double samples[64];
    fn(bn);   /* warm: page faults, caches */
    int iters = 1;
    for (;;) {
        double t0 = now();
        for (int i = 0; i < iters; i++) {
            fn(bn);
        }
        if (now() - t0 >= 2e-3 || iters >= (1 << 20)) {
            break;
        }
        iters *= 2;
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) {
            fn(bn);
        }
        samples[r] = (double)bn->bytes * iters / (now() - t0) / 1e9;
    }
    qsort(samples, (size_t)reps, sizeof(double), cmp_double);
    return samples[reps / 2];
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static double rng_unit(void)
{
    return (double)(rng_next() >> 11) / 9007199254740992.0;
}

/* Non-zeros are finite values in [1, 2); clustered puts them in runs (mean 64). */
static void fill(unsigned char *x, fold_dtype_t dt, size_t n, double density, int clustered)
{
    size_t es = fold_dtype_size(dt);
    int on = 0;
    for (size_t i = 0; i < n; i++) {
        int nz;
        if (clustered) {
            double flip = on ? 1.0 / 64 : density / (64 * (1 - density) + 1e-12);
            if (density >= 1.0) {
                on = 1;
            } else if (rng_unit() < flip) {
                on = !on;
            }
            nz = on;
        } else {
            nz = rng_unit() < density;
        }
        if (dt == FOLD_FLOAT32) {
            float v = nz ? 1.0f + (float)rng_unit() : 0.0f;
            memcpy(x + i * es, &v, es);
        } else {
            double v = nz ? 1.0 + rng_unit() : 0.0;
            memcpy(x + i * es, &v, es);
        }
    }
}

static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (p == NULL) {
        fprintf(stderr, "codec_bench: out of memory\n");
        exit(1);
    }
    memset(p, 0, n);
    return p;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--isa auto|scalar|avx2|avx512] [--layout random|clustered] "
                    "[--reps N] [--quick]\n", prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int reps = 5, quick = 0, clustered = 0;
    fold_codec_isa_t isa = FOLD_CODEC_ISA_AUTO;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            if (fold_codec_isa_parse(argv[++i], &isa) != FOLD_OK) {
                usage(argv[0]);
            }
        } else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) {
            i++;
            clustered = strcmp(argv[i], "clustered") == 0;
            if (!clustered && strcmp(argv[i], "random") != 0) {
                usage(argv[0]);
            }
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 64) {
                usage(argv[0]);
            }
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            usage(argv[0]);
        }
    }
    if (fold_codec_set_isa(isa) != FOLD_OK) {
        fprintf(stderr, "codec_bench: this CPU has no %s\n", fold_codec_isa_name(isa));
        return 1;
    }
    printf("codec_bench: isa %s, %s non-zeros, GB/s of one dense vector per core "
           "(median of %d)\n", fold_codec_isa_name(fold_codec_get_isa()),
           clustered ? "clustered" : "randomly placed", reps);

    const size_t sizes[2] = {(size_t)16 << 20, (size_t)256 << 10};
    const fold_dtype_t dts[2] = {FOLD_FLOAT32, FOLD_FLOAT64};
    const fold_codec_id_t cs[3] = {FOLD_CODEC_BITS, FOLD_CODEC_IDX, FOLD_CODEC_RLE};

    for (int d = 0; d < 2; d++) {
        for (int s = quick ? 1 : 0; s < 2; s++) {
            bench_t bn = {.dt = dts[d], .es = fold_dtype_size(dts[d])};
            bn.bytes = sizes[s];
            bn.n = bn.bytes / bn.es;
            bn.cap = FOLD_CODEC_HEADER_BYTES + 2 * bn.bytes + bn.n / 8 + 64;
            bn.a = xmalloc(bn.bytes);
            bn.b = xmalloc(bn.bytes);
            bn.out = xmalloc(bn.bytes);
            bn.wire = xmalloc(bn.cap);
            bn.wire2 = xmalloc(bn.cap);
            for (int c = 0; c < 3; c++) {
                bn.aenc[cs[c]] = xmalloc(bn.cap);
            }

            double r[32][NDENS];
            const char *names[32];
            int rows = 0;
            for (int di = 0; di < NDENS; di++) {
                fill(bn.a, bn.dt, bn.n, densities[di], clustered);
                fill(bn.b, bn.dt, bn.n, densities[di], clustered);
                for (int c = 0; c < 3; c++) {
                    bn.alen[cs[c]] = fold_codec_encode(cs[c], bn.dt, bn.a, bn.n, bn.aenc[cs[c]],
                                                       bn.cap);
                }
                int row = 0;
#define ROW(label, fn, codec)                                                           \
    do {                                                                                \
        names[row] = label;                                                             \
        bn.c = codec;                                                                   \
        r[row++][di] = measure(fn, &bn, reps);                                          \
    } while (0)
                ROW("memcpy", op_memcpy, FOLD_CODEC_DENSE);
                ROW("reduce_local", op_local, FOLD_CODEC_DENSE);
                ROW("count", op_count, FOLD_CODEC_DENSE);
                ROW("reduce_count", op_reduce_count, FOLD_CODEC_DENSE);
                static const char *const enc[] = {"enc bits", "enc idx", "enc rle"};
                static const char *const dec[] = {"dec bits", "dec idx", "dec rle"};
                static const char *const rw[] = {"rw bits", "rw idx", "rw rle"};
                static const char *const re[] = {"re bits", "re idx", "re rle"};
                static const char *const rwe[] = {"rwe bits", "rwe idx", "rwe rle"};
                static const char *const sz[] = {"size% bits", "size% idx", "size% rle"};
                for (int c = 0; c < 3; c++) {
                    ROW(enc[c], op_encode, cs[c]);
                }
                for (int c = 0; c < 3; c++) {
                    ROW(dec[c], op_decode, cs[c]);
                }
                for (int c = 0; c < 3; c++) {
                    ROW(rw[c], op_reduce_wire, cs[c]);
                }
                for (int c = 0; c < 3; c++) {
                    ROW(re[c], op_reduce_encode, cs[c]);
                }
                for (int c = 0; c < 3; c++) {
                    ROW(rwe[c], op_reduce_wire_encode, cs[c]);
                }
                for (int c = 0; c < 3; c++) {
                    names[row] = sz[c];
                    r[row++][di] = 100.0 * (double)bn.alen[cs[c]] / (double)bn.bytes;
                }
                rows = row;
            }

            printf("\n%s, %zu KiB (%zu elements)\n%-13s", fold_dtype_name(bn.dt), bn.bytes >> 10,
                   bn.n, "GB/s");
            for (int di = 0; di < NDENS; di++) {
                printf(" %8.1f%%", 100.0 * densities[di]);
            }
            printf("\n");
            for (int row = 0; row < rows; row++) {
                printf("%-13s", names[row]);
                for (int di = 0; di < NDENS; di++) {
                    printf(" %9.2f", r[row][di]);
                }
                printf("\n");
            }
            fflush(stdout);
            for (int c = 0; c < 3; c++) {
                free(bn.aenc[cs[c]]);
            }
            free(bn.a);
            free(bn.b);
            free(bn.out);
            free(bn.wire);
            free(bn.wire2);
        }
    }
    return 0;
}
