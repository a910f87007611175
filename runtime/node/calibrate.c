/*
 * What fold_init measures of the node for the cost model (node.h), in tens of
 * milliseconds and 3 MiB per rank:
 *
 *   copy_gbs, shm_gbs   memcpy of 1 MiB in cache: the rate of copies and of the node
 *                       segment's transfers (shm_gbs: a core reading what another
 *                       core wrote, which can run as fast as a copy of one's own)
 *   reduce_gbs          fold's float32 c = a + b over 1 MiB, in cache
 *   copy_l2_gbs,        the same two over 64 KiB, within a core's own cache (L2, of
 *   reduce_l2_gbs,      l2_bytes, from sysconf): where the L2 is 2 MiB and the L3
 *   l2_bytes            slow, as on some Xeons, 1 MiB runs at the L3's rate while a
 *                       pipeline's 32-128 KiB chunks run at the L2's, a reduction up
 *                       to twice as fast; the model takes each by working set
 *   copy_mem_gbs,       the same with the three buffers flushed from the caches
 *   reduce_mem_gbs      first (x86 clflush, Arm dc civac): the memory-bound rates,
 *                       close to a 64 MiB stream's at a small part of its cost
 *   reduce_stream_gbs   the reduction from memory again, its result written with
 *                       non-temporal stores: where that is faster, large calls
 *                       stream their results (context.c)
 *   reduce_loop_gbs,    the 1 MiB reduction in cache, in a loop of its own, with
 *   reduce_loop_        ordinary stores and streamed (stream_rounds): where the
 *   stream_gbs          three buffers (rounds_bytes) are more than the L2 and
 *                       streaming wins although they fit the last level, results
 *                       stream from the L2's size on (context.c; it pays where the
 *                       L2s are large and the L3 is a slow mesh)
 *   cma_gbs, cma_us     process_vm_readv of 1 MiB of this process's own memory, and
 *                       its cost per call (64-byte reads)
 *   cma_mem_gbs         the same out of cache, estimated: cma_gbs slowed by the
 *                       factor memcpy slows by (copy_mem_gbs / copy_gbs). The kernel
 *                       walks and pins each page and that work slows with the
 *                       region's footprint, not only its data's: a 1 MiB read with
 *                       its lines flushed runs well above reads streaming over 64
 *                       MiB where memcpy runs alike, and this estimate lands near
 *                       the stream's. Timing such a stream here would cost fold_init
 *                       100 MiB per rank; fold_tune measures it.
 *   cma_huge_mem_gbs    the flushed read of 1 MiB that lies in a huge page: the rate
 *                       of buffers huge.c backs so (a millisecond or two more, for
 *                       the kernel to collapse one), well above the estimate above
 *                       (docs/results/node-data-path.md, "Huge pages under the
 *                       kernel's copies").
 *   adopt_gbs           moving 1 MiB of private pages into fold memory as
 *                       mem_adopt.c does (a new memfd written, mapped over them,
 *                       every page touched again): the price of adopting a buffer,
 *                       which selection weighs against what its calls then save
 *
 * Why all of them: measuring only single copy and leaving the copy rates at their
 * generic defaults can make selection take single copy on a machine whose kernel path
 * runs at a quarter of its plain copies, and fall behind Open MPI from 32 KiB up. The
 * model must compare measured with measured. fold_tune measures on real
 * transfers and whole streams, and its file overrides all of these.
 *
 * In-cache rates are the best of many rounds over at least CALIBRATE_MIN_S: a virtual
 * machine can run memory at a fraction of its speed for a few milliseconds, and a
 * best of a few short reads caught in such a spell makes selection run the wrong
 * family for the whole job; rounds over CALIBRATE_MIN_S outlast the spells. The ranks
 * of a node measure at once, so the memory-bound rates may come out low on a node
 * with many ranks: that slows every algorithm's out-of-cache copies alike in the
 * model.
 */
#define _GNU_SOURCE
#include "node/node.h"

#include "codec/reduce_kernel.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define CALIBRATE_BYTES      ((size_t)1 << 20)
#define CALIBRATE_MIN_ROUNDS 8
#define CALIBRATE_MAX_ROUNDS 512
#define CALIBRATE_MIN_S      10e-3
#define CALIBRATE_FLUSHED    6       /* rounds from memory (each one is slow) */
#define STREAM_BLOCK_S       2e-3    /* each block of stream_rounds at least */
#define CALIBRATE_L2_BYTES   ((size_t)64 << 10)
#define CALIBRATE_L2_REPEAT  4       /* operations timed together (the clock's cost) */
#define L2_MIN_BYTES         ((size_t)128 << 10)   /* sysconf's L2 believed between */
#define L2_MAX_BYTES         ((size_t)4 << 20)     /* these (VMs misreport caches) */

/* Writes back and evicts buf's cache lines; 0 where this CPU has no way to. */
static int flush_lines(const void *buf, size_t len)
{
#if defined(__x86_64__) || defined(__i386__)
    for (size_t off = 0; off < len; off += 64) {
        __asm__ volatile("clflush (%0)" : : "r"((const char *)buf + off) : "memory");
    }
    __asm__ volatile("mfence" : : : "memory");
    return 1;
#elif defined(__aarch64__)
    for (size_t off = 0; off < len; off += 64) {
        __asm__ volatile("dc civac, %0" : : "r"((const char *)buf + off) : "memory");
    }
    __asm__ volatile("dsb ish" : : : "memory");
    return 1;
#else
    (void)buf;
    (void)len;
    return 0;
#endif
}

/* One read of len bytes of this process's memory through the kernel. */
static int kernel_read(void *dst, void *src, size_t len)
{
    struct iovec l = {dst, len}, r = {src, len};
    return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)len;
}

/* The kernel's cost per call: the best of 8 averages over 16 small reads; < 0
 * where the kernel refuses. */
static double kernel_call_s(void *dst, void *src)
{
    const size_t small = 64;
    double best = 1e30;
    for (int i = 0; i < 8; i++) {
        double t0 = fold_util_time_now();
        for (int k = 0; k < 16; k++) {
            if (!kernel_read(dst, src, small)) {
                return -1;
            }
        }
        double t = (fold_util_time_now() - t0) / 16;
        best = t < best ? t : best;
    }
    return best;
}

typedef struct best_times {
    double copy, reduce, kernel, stream;   /* seconds for CALIBRATE_BYTES */
    double copy_l2, reduce_l2;             /* seconds for CALIBRATE_L2_BYTES */
} best_times_t;

static void keep_best(double *best, double t)
{
    *best = t < *best ? t : *best;
}

/* One round of each measured operation on a, b and c; the kernel read only while
 * *kernel_ok, the 64 KiB ones only where the core's own cache is known (l2). */
static void round_of(float *a, float *b, float *c, int l2, int *kernel_ok,
                     best_times_t *best)
{
    const size_t big = CALIBRATE_BYTES;
    double t0 = fold_util_time_now();
    memcpy(c, a, big);
    __asm__ volatile("" : : "r"(c) : "memory");   /* the copy is used */
    keep_best(&best->copy, fold_util_time_now() - t0);

    t0 = fold_util_time_now();
    fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, big / sizeof(float), 1, SIZE_MAX);
    __asm__ volatile("" : : "r"(c) : "memory");
    keep_best(&best->reduce, fold_util_time_now() - t0);

    if (*kernel_ok) {
        t0 = fold_util_time_now();
        *kernel_ok = kernel_read(c, a, big);
        keep_best(&best->kernel, fold_util_time_now() - t0);
    }
    if (!l2) {
        return;
    }

    const size_t small = CALIBRATE_L2_BYTES;
    t0 = fold_util_time_now();
    for (int k = 0; k < CALIBRATE_L2_REPEAT; k++) {
        memcpy(c, a, small);
        __asm__ volatile("" : : "r"(c) : "memory");
    }
    keep_best(&best->copy_l2, (fold_util_time_now() - t0) / CALIBRATE_L2_REPEAT);

    t0 = fold_util_time_now();
    for (int k = 0; k < CALIBRATE_L2_REPEAT; k++) {
        fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, small / sizeof(float), 1,
                          SIZE_MAX);
        __asm__ volatile("" : : "r"(c) : "memory");
    }
    keep_best(&best->reduce_l2, (fold_util_time_now() - t0) / CALIBRATE_L2_REPEAT);
}

/* The core's own cache below the last level, where the system tells and the size is
 * one a core has: 0 elsewhere (no such level in the model). */
static double l2_cache_bytes(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 >= (long)L2_MIN_BYTES && l2 <= (long)L2_MAX_BYTES) {
        return (double)l2;
    }
#endif
    return 0;
}

/* The memory-bound rates: copy and reduce with every buffer flushed first. */
static int flushed_rounds(float *a, float *b, float *c, best_times_t *best)
{
    const size_t big = CALIBRATE_BYTES;
    for (int i = 0; i < CALIBRATE_FLUSHED; i++) {
        if (!flush_lines(a, big) || !flush_lines(c, big)) {
            return 0;
        }
        double t0 = fold_util_time_now();
        memcpy(c, a, big);
        __asm__ volatile("" : : "r"(c) : "memory");
        keep_best(&best->copy, fold_util_time_now() - t0);

        flush_lines(a, big);
        flush_lines(b, big);
        flush_lines(c, big);
        t0 = fold_util_time_now();
        fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, big / sizeof(float), 1,
                          SIZE_MAX);
        __asm__ volatile("" : : "r"(c) : "memory");
        keep_best(&best->reduce, fold_util_time_now() - t0);

        if (fold_reduce_stream_available(FOLD_OP_SUM, FOLD_FLOAT32)) {
            flush_lines(a, big);
            flush_lines(b, big);
            flush_lines(c, big);
            t0 = fold_util_time_now();
            fold_reduce_local_stream(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c,
                                     big / sizeof(float));
            __asm__ volatile("" : : "r"(c) : "memory");
            keep_best(&best->stream, fold_util_time_now() - t0);
        }
    }
    return 1;
}

/* The in-cache reduction over the 1 MiB buffers, with ordinary stores and streamed,
 * each as a loop of calls of one kind runs it: a block of rounds of one, then of the
 * other (the streamed rounds leave c out of the cache, the ordinary ones in it; taken
 * by turns, each finds the other's lines, and the order of the two comes out reversed).
 * Seconds per reduction, best of each block. */
static void stream_rounds(const float *a, const float *b, float *c, double *ordinary,
                          double *streamed)
{
    const size_t n = CALIBRATE_BYTES / sizeof(float);
    for (int kind = 0; kind < 2; kind++) {
        double *best = kind ? streamed : ordinary, start = fold_util_time_now();
        *best = 1e30;
        for (int i = 0; i < CALIBRATE_MIN_ROUNDS || fold_util_time_now() - start < STREAM_BLOCK_S;
             i++) {
            double t0 = fold_util_time_now();
            if (kind) {
                fold_reduce_local_stream(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, n);
            } else {
                fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, a, b, c, n, 1, SIZE_MAX);
            }
            __asm__ volatile("" : : "r"(c) : "memory");
            keep_best(best, fold_util_time_now() - t0);
        }
    }
}

/* The best of CALIBRATE_FLUSHED flushed kernel reads of CALIBRATE_BYTES from a huge
 * page into dst, in seconds; 0 where the kernel gives no huge page. */
static double flushed_huge_read_s(void *dst)
{
    const size_t page = fold_node_huge_page_bytes();
    if (page < CALIBRATE_BYTES || page > ((size_t)4 << 20)) {
        return 0;   /* none, or too large to take for a measurement (arm64's 512 MiB) */
    }
    char *raw = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED) {
        return 0;
    }
    char *huge = (char *)(((uintptr_t)raw + page - 1) & ~(uintptr_t)(page - 1));
    memset(huge, 1, page);
    double best = 0;
    if (fold_node_huge_collapse(huge, page) == 0) {
        best = 1e30;
        for (int i = 0; i < CALIBRATE_FLUSHED; i++) {
            flush_lines(huge, CALIBRATE_BYTES);
            flush_lines(dst, CALIBRATE_BYTES);
            double t0 = fold_util_time_now();
            if (!kernel_read(dst, huge, CALIBRATE_BYTES)) {
                best = 0;
                break;
            }
            keep_best(&best, fold_util_time_now() - t0);
        }
    }
    munmap(raw, 2 * page);
    return best;
}

/* Seconds to adopt `bytes` of private pages as mem_adopt.c does: their bytes
 * written into a new memfd, the file mapped over them, each page touched again (the
 * first touch of each shared page faults); the best of two, 0 where it cannot. */
static double adopt_s(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    double best = 1e30;
    for (int round = 0; round < 2; round++) {
        char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) {
            return 0;
        }
        memset(buf, round + 1, bytes);
        const double t0 = fold_util_time_now();
        int fd = memfd_create("fold-calibrate", MFD_CLOEXEC);
        int ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0 &&
                 pwrite(fd, buf, bytes, 0) == (ssize_t)bytes &&
                 mmap(buf, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == buf;
        for (size_t at = 0; ok && at < bytes; at += page) {
            ((volatile char *)buf)[at] += 1;
        }
        const double t = fold_util_time_now() - t0;
        if (fd >= 0) {
            close(fd);
        }
        munmap(buf, bytes);
        if (!ok) {
            return 0;
        }
        best = t < best ? t : best;
    }
    return best;
}

static double gbs_over(size_t bytes, double seconds)
{
    return seconds > 0 && seconds < 1e30 ? (double)bytes / seconds / 1e9 : 0;
}

static double gbs_of(double seconds)
{
    return gbs_over(CALIBRATE_BYTES, seconds);
}

static void measure(fold_node_calib_t *out)
{
    memset(out, 0, sizeof(*out));
    float *a = aligned_alloc(4096, CALIBRATE_BYTES), *b = aligned_alloc(4096, CALIBRATE_BYTES);
    float *c = aligned_alloc(4096, CALIBRATE_BYTES);
    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return;
    }
    for (size_t i = 0; i < CALIBRATE_BYTES / sizeof(float); i++) {
        a[i] = 1.0f;
        b[i] = 2.0f;
        c[i] = 0.0f;
    }

    int kernel_ok = 1;
    out->l2_bytes = l2_cache_bytes();
    best_times_t cached  = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    best_times_t flushed = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    double start = fold_util_time_now();
    for (int i = 0; i < CALIBRATE_MAX_ROUNDS &&
                    (i < CALIBRATE_MIN_ROUNDS || fold_util_time_now() - start < CALIBRATE_MIN_S);
         i++) {
        round_of(a, b, c, out->l2_bytes > 0, &kernel_ok, &cached);
    }
    double stream_ordinary = 0, stream_streamed = 0;
    if (fold_reduce_stream_available(FOLD_OP_SUM, FOLD_FLOAT32)) {
        stream_rounds(a, b, c, &stream_ordinary, &stream_streamed);
    }
    double call = kernel_ok ? kernel_call_s(c, a) : -1;
    int have_memory = flushed_rounds(a, b, c, &flushed);
    double huge_read = kernel_ok && have_memory ? flushed_huge_read_s(c) : 0;
    out->adopt_gbs   = gbs_of(adopt_s(CALIBRATE_BYTES));
    free(a);
    free(b);
    free(c);

    out->copy_gbs   = gbs_of(cached.copy);
    out->reduce_gbs = gbs_of(cached.reduce);
    out->reduce_loop_gbs        = gbs_of(stream_ordinary);
    out->reduce_loop_stream_gbs = gbs_of(stream_streamed);
    out->rounds_bytes           = 3.0 * CALIBRATE_BYTES;
    if (out->l2_bytes > 0) {
        out->copy_l2_gbs   = gbs_over(CALIBRATE_L2_BYTES, cached.copy_l2);
        out->reduce_l2_gbs = gbs_over(CALIBRATE_L2_BYTES, cached.reduce_l2);
    }
    if (have_memory) {
        out->copy_mem_gbs   = gbs_of(flushed.copy);
        out->reduce_mem_gbs = gbs_of(flushed.reduce);
        out->reduce_stream_gbs = gbs_of(flushed.stream);
    }
    if (call >= 0 && cached.kernel > call && cached.kernel < 1e30) {
        out->single_copy = 1;
        out->cma_us      = call * 1e6;
        out->cma_gbs     = gbs_of(cached.kernel - call);
        if (out->copy_mem_gbs > 0 && out->copy_gbs > out->copy_mem_gbs) {
            out->cma_mem_gbs = out->cma_gbs * out->copy_mem_gbs / out->copy_gbs;
        }
        out->cma_huge_mem_gbs = gbs_of(huge_read);
    }
}

/* A process measures once: its later contexts (a library's own beside the
 * application's, a test's loopback ranks, which are threads of one process) run on the
 * same machine. Measured again, many loopback ranks on a few cores would take each
 * other's cores for the calibration's time, and measure one another's contention. */
static fold_node_calib_t measured;
static pthread_once_t    measured_once = PTHREAD_ONCE_INIT;

static void measure_once(void)
{
    measure(&measured);
}

void fold_node_calibrate(fold_node_calib_t *out)
{
    pthread_once(&measured_once, measure_once);
    *out = measured;
}
