/*
 * Writes the seed corpus for the codec fuzzers: valid messages of every codec and
 * datatype (control byte first, see fuzz_codec.c), over vectors with zero runs,
 * long runs, NaNs that look like RLE markers, signed zeros and denormals.
 * Usage: fuzz_seed DIR
 */
#include "codec/codec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const fold_dtype_t dtypes[4] = {FOLD_FLOAT32, FOLD_FLOAT64, FOLD_INT32, FOLD_UINT64};

static uint64_t rng = 12345;

static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

static const uint64_t specials[] = {
    0x8000000000000000ull, 1, 0xfff0000000000001ull, 0xffffffffffffffffull,
    0xfff8000000000000ull, 0x7ff8000000000001ull, 0xff800001ull, 0xffffffffull, 0xffc00000ull,
    0x80000000ull, 0x7fc00001ull,
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const size_t lens[] = {0, 1, 5, 64, 100, 300, 2049, 5000};
    const double dens[] = {0.0, 0.05, 0.5, 1.0};
    int files = 0;
    for (int d = 0; d < 4; d++) {
        fold_dtype_t dt = dtypes[d];
        size_t es = d == 1 || d == 3 ? 8 : 4;
        for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
            size_t n = lens[li];
            unsigned char *x = calloc(n ? n : 1, es);
            size_t cap = 64 + 2 * n * es + n;
            unsigned char *w = malloc(cap + 1);
            for (size_t di = 0; di < sizeof(dens) / sizeof(dens[0]); di++) {
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = 0;
                    if ((double)(next() >> 11) / 9007199254740992.0 < dens[di] || (i / 37) % 3 == 1) {
                        v = next() % 4 == 0 ? specials[next() % (sizeof(specials) / 8)] : next();
                    }
                    if ((i / 500) % 2 == 1 && n > 1000) {
                        v = 0;   /* long runs */
                    }
                    memcpy(x + i * es, &v, es);
                }
                for (int c = 0; c < FOLD_CODEC_NCODECS; c++) {
                    size_t len = fold_codec_encode((fold_codec_id_t)c, dt, x, n, w + 1, cap);
                    if (len == 0) {
                        continue;
                    }
                    w[0] = (unsigned char)(d | (int)(next() % 4) << 3 | (int)(next() % 4) << 5);
                    char path[4096];
                    snprintf(path, sizeof(path), "%s/seed_%s_%s_%zu_%zu", argv[1],
                             fold_codec_name((fold_codec_id_t)c), d == 0 ? "f32" : d == 1 ? "f64"
                             : d == 2 ? "i32" : "u64", n, di);
                    FILE *f = fopen(path, "wb");
                    if (f == NULL || fwrite(w, 1, len + 1, f) != len + 1 || fclose(f) != 0) {
                        perror(path);
                        return 1;
                    }
                    files++;
                }
            }
            free(w);
            free(x);
        }
    }
    printf("fuzz_seed: %d seeds in %s\n", files, argv[1]);
    return 0;
}
