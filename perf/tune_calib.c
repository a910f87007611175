/*
 * Single-core copy and reduction rates and the node's cache (tune_calib.h). A rate is
 * the best of several timings: interruptions only ever make a run slower.
 */
#define _GNU_SOURCE   /* process_vm_readv */
#include "tune_calib.h"

#include "codec/reduce_kernel.h"
#include "perf_stats.h"

#include <hwloc.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum { SAMPLES_IN_CACHE = 15, SAMPLES_IN_MEMORY = 3 };

/* Each timing repeats the operation over about this many bytes, so that a timing of
 * an in-cache buffer is long against the clock's resolution. */
#define BYTES_PER_SAMPLE ((size_t)8 << 20)

static void *alloc_touched(size_t bytes, int value)
{
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, rounded ? rounded : 4096);
    if (p != NULL) {
        memset(p, value, rounded);   /* first touch outside the timings */
    }
    return p;
}

static int samples_for(size_t bytes)
{
    return bytes <= TUNE_IN_CACHE_BYTES * 4 ? SAMPLES_IN_CACHE : SAMPLES_IN_MEMORY;
}

static size_t reps_for(size_t bytes)
{
    return bytes >= BYTES_PER_SAMPLE ? 1 : BYTES_PER_SAMPLE / bytes;
}

double tune_measure_copy(size_t bytes)
{
    unsigned char *src = alloc_touched(bytes, 1), *dst = alloc_touched(bytes, 0);
    double best = NAN;
    if (src != NULL && dst != NULL && bytes > 0) {
        size_t reps = reps_for(bytes);
        memcpy(dst, src, bytes);   /* warm */
        for (int s = 0; s < samples_for(bytes); s++) {
            double start = perf_now_us();
            for (size_t r = 0; r < reps; r++) {
                memcpy(dst, src, bytes);
                __asm__ __volatile__("" : : "r"(dst) : "memory");   /* keep every copy */
            }
            double us = perf_now_us() - start;
            double gbs = us > 0 ? (double)(bytes * reps) / (us * 1e3) : NAN;
            best = isnan(best) || gbs > best ? gbs : best;
        }
    }
    free(src);
    free(dst);
    return best;
}

double tune_measure_reduce(size_t bytes)
{
    size_t count = bytes / sizeof(float);
    float *a = alloc_touched(bytes, 0), *b = alloc_touched(bytes, 0), *c = alloc_touched(bytes, 0);
    double best = NAN;
    if (a != NULL && b != NULL && c != NULL && count > 0) {
        size_t reps = reps_for(bytes);
        fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, count, 1, SIZE_MAX);
        for (int s = 0; s < samples_for(bytes); s++) {
            double start = perf_now_us();
            for (size_t r = 0; r < reps; r++) {
                fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, count, 1, SIZE_MAX);
                __asm__ __volatile__("" : : "r"(c) : "memory");
            }
            double us = perf_now_us() - start;
            double gbs = us > 0 ? (double)(count * sizeof(float) * reps) / (us * 1e3) : NAN;
            best = isnan(best) || gbs > best ? gbs : best;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* One pass of kernel reads over bytes, 1 MiB per call: its time in us, or -1 where
 * the kernel refused. */
static double kernel_pass_us(unsigned char *dst, unsigned char *src, size_t bytes)
{
    const size_t call = (size_t)1 << 20;
    double start = perf_now_us();
    for (size_t off = 0; off < bytes; off += call) {
        size_t len = bytes - off < call ? bytes - off : call;
        struct iovec local = {dst + off, len}, remote = {src + off, len};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)len) {
            return -1;
        }
    }
    return perf_now_us() - start;
}

double tune_measure_kernel(size_t bytes)
{
    unsigned char *src = alloc_touched(bytes, 1), *dst = alloc_touched(bytes, 0);
    double best = NAN;
    /* The first pass is the kernel's first touch of the pages, many times slower
     * than the next: a call's buffers are read again and again, so it is not timed. */
    if (src != NULL && dst != NULL && bytes > 0 && kernel_pass_us(dst, src, bytes) >= 0) {
        for (int s = 0; s < SAMPLES_IN_MEMORY; s++) {
            double us = kernel_pass_us(dst, src, bytes);
            double gbs = us > 0 ? (double)bytes / (us * 1e3) : NAN;
            best = isnan(best) || gbs > best ? gbs : best;
        }
    }
    free(src);
    free(dst);
    return best;
}

double tune_llc_bytes(int *instances)
{
    static const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L4CACHE,
                                              HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE,
                                              HWLOC_OBJ_L1CACHE};
    hwloc_topology_t topo;
    double total = NAN;
    if (hwloc_topology_init(&topo) != 0) {
        return NAN;
    }
    if (hwloc_topology_load(topo) == 0) {
        for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]) && isnan(total); l++) {
            int n = hwloc_get_nbobjs_by_type(topo, levels[l]);
            double sum = 0;
            for (int i = 0; i < n; i++) {
                hwloc_obj_t obj = hwloc_get_obj_by_type(topo, levels[l], (unsigned)i);
                sum += obj != NULL && obj->attr != NULL ? (double)obj->attr->cache.size : 0;
            }
            total = sum > 0 ? sum : NAN;
            if (instances != NULL && sum > 0) {
                *instances = n;
            }
        }
    }
    hwloc_topology_destroy(topo);
    return total;
}

size_t tune_out_of_cache_bytes(double cache_bytes)
{
    size_t bytes = (size_t)64 << 20, cap = (size_t)1 << 30;
    if (isfinite(cache_bytes) && cache_bytes > (double)bytes) {
        bytes = cache_bytes >= (double)cap ? cap : (size_t)cache_bytes;
    }
    return bytes / 4096 * 4096;
}

int tune_ladder_done(const tune_ladder_t *l, size_t limit)
{
    if (l->n == 0) {
        return 0;
    }
    size_t last = l->bytes[l->n - 1];
    if (last >= limit || l->n == TUNE_LADDER_MAX) {
        return 1;
    }
    double fastest = 0;
    for (int i = 0; i < l->n; i++) {
        fastest = fmax(fastest, l->gbs[i]);
    }
    /* flat now, and clearly below what the cache gave (a flat top in a big cache is not it) */
    double now = l->gbs[l->n - 1];
    return l->n >= 2 && last >= TUNE_LADDER_MIN && now >= 0.9 * l->gbs[l->n - 2] &&
           now <= 0.8 * fastest;
}

double tune_ladder_cache_bytes(const tune_ladder_t *l)
{
    if (l->n == 0) {
        return NAN;
    }
    double memory = l->gbs[l->n - 1];
    int slow = 0;   /* the first rung past the last one still fast */
    for (int i = 0; i < l->n; i++) {
        if (l->gbs[i] >= 1.25 * memory) {
            slow = i + 1 < l->n ? i + 1 : i;
        }
    }
    return 2.0 * (double)l->bytes[slow];
}

void tune_measure_ladder(size_t limit, tune_ladder_t *l)
{
    memset(l, 0, sizeof(*l));
    for (size_t bytes = TUNE_LADDER_FIRST; !tune_ladder_done(l, limit); bytes *= 2) {
        if (bytes > limit) {
            bytes = limit;
        }
        double gbs = tune_measure_copy(bytes);
        if (!isfinite(gbs)) {
            break;   /* no memory for it: the rungs so far stand */
        }
        l->bytes[l->n] = bytes;
        l->gbs[l->n++] = gbs;
    }
}
