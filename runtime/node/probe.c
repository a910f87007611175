/*
 * What two cores of a node cost each other (node.h), measured once through the
 * world's new segment by its first and last local ranks (the last is the likeliest
 * to sit on another CCD or socket): a flag's round trip, memcpy of 64 KiB the other
 * core has just written, fold's float32 sum of it into the segment, a copy into the
 * segment over lines the other core read last, the sum of 64 KiB and of 1 MiB of it
 * into the rank's own buffer, both cores at once as in a call, and the kernel's copy
 * (cross-memory attach) of 64 KiB the other core just wrote. calibrate.c
 * measures one core on its own memory; these are what the node segment's steps pay.
 * The same two vCPUs of a VM can move between sharing an L3 and not, which changes the
 * flag's round trip fivefold and a reduction reading the other core's data by a
 * quarter, so a node's costs come from what its cores measure of each other now.
 *
 * Layout in the segment's data, which no schedule uses before setup returns (the
 * allgather after the probe orders them): A's and B's words on their own lines, then
 * A's 64 KiB buffer and B's, then A's 64 KiB result area and B's; for the 1 MiB sum,
 * which runs last, A's 1 MiB buffer and B's from the same place.
 */
#define _GNU_SOURCE
#include "node/node.h"

#include "codec/reduce_kernel.h"
#include "util/clock.h"
#include "util/median.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PROBE_BYTES    ((size_t)64 << 10)
#define PROBE_FAR      ((size_t)1 << 20)   /* rows past a core's L2 with their inputs */
#define PROBE_DATA_OFF 4096
#define PROBE_TRIPS    64
#define PROBE_BATCHES  4
#define PROBE_ROUNDS   8
#define PROBE_BUDGET_S 0.05    /* at most; far less where both ranks have a core */
#define PROBE_ABORT    UINT64_MAX

typedef struct probe {
    _Atomic uint64_t *mine, *theirs;
    char             *mine_data, *their_data;
    char             *mine_out, *their_out;   /* the result areas */
    double            deadline;
    int               failed;
} probe_t;

static double median_gbs(double *t, int n, size_t bytes)
{
    if (n == 0) {
        return 0;
    }
    double s = fold_util_median(t, n);
    return s > 0 ? (double)bytes / s / 1e9 : 0;
}

/* Waits until the other side's word reaches v. On a node with more ranks than cores
 * the other side may not be running: yield, and give up once the whole probe has
 * taken PROBE_BUDGET_S (its figures would measure the scheduler anyway). */
static int wait_for(probe_t *pr, uint64_t v)
{
    for (unsigned spins = 1;; spins++) {
        uint64_t w = atomic_load_explicit(pr->theirs, memory_order_acquire);
        if (w == PROBE_ABORT) {
            pr->failed = 1;
            return 0;
        }
        if (w >= v) {
            return 1;
        }
        if ((spins & 255) == 0) {
            if (pr->failed || fold_util_time_now() > pr->deadline) {
                /* Tell the other side, so that it neither waits nor reads on. */
                atomic_store_explicit(pr->mine, PROBE_ABORT, memory_order_release);
                pr->failed = 1;
                return 0;
            }
            if (spins >= 1024) {
                sched_yield();
            }
        }
    }
}

static void post(probe_t *pr, uint64_t v)
{
    if (!pr->failed) {
        atomic_store_explicit(pr->mine, v, memory_order_release);
    }
}


/* Round trips: A posts, B answers. The best batch's mean (the others met noise). */
static double round_trip_us(probe_t *pr, int is_a, uint64_t *seq)
{
    double best = 0;
    for (int b = 0; b < PROBE_BATCHES && !pr->failed; b++) {
        double start = fold_util_time_now();
        for (int t = 0; t < PROBE_TRIPS && !pr->failed; t++) {
            uint64_t v = ++*seq;
            if (is_a) {
                post(pr, v);
                wait_for(pr, v);
            } else {
                wait_for(pr, v);
                post(pr, v);
            }
        }
        double us = (fold_util_time_now() - start) * 1e6 / PROBE_TRIPS;
        best = b == 0 || us < best ? us : best;
    }
    return best;
}

/* The kernel's copy of what the other core just wrote, as a single-copy read of a
 * peer's buffer takes it (through this process's own mapping of the segment: the
 * same lines), in seconds: process_vm_readv of all of it, less that of one line of
 * this rank's own (the call's cost, timed on a second call: the first of a round can
 * take longer than the whole copy, under AddressSanitizer most); 0 where that leaves
 * nothing to time, -1 where the kernel refuses. It is measured, not scaled from
 * calibrate.c's rate on the rank's own memory: the kernel's copy from the other
 * core's cache need not slow as memcpy does, and scaling it so can price single copy
 * at twice its time. */
static double kernel_read_s(const probe_t *pr, float *out)
{
    const pid_t self = getpid();
    struct iovec line = {out, 64}, own_line = {pr->mine_out, 64};
    struct iovec all = {out, PROBE_BYTES}, theirs = {pr->their_data, PROBE_BYTES};
    int refused = process_vm_readv(self, &line, 1, &own_line, 1, 0) != 64;
    double start = fold_util_time_now();
    refused = refused || process_vm_readv(self, &line, 1, &own_line, 1, 0) != 64;
    double mid = fold_util_time_now();
    refused = refused || process_vm_readv(self, &all, 1, &theirs, 1, 0) != (ssize_t)PROBE_BYTES;
    double end = fold_util_time_now();
    double net = (end - mid) - (mid - start);
    return refused ? -1 : net > 0 ? net : 0;
}

/* Both write their buffer, then read the other's at once, as the ranks of a
 * node-aware call do, with memcpy or through the kernel (kernel_read_s): the median
 * rate of each side, 0 where the kernel refused. */
static double read_gbs(probe_t *pr, float *out, uint64_t *seq, int kernel)
{
    double t[PROBE_ROUNDS];
    int n = 0, refused = 0;
    for (int k = 0; k < PROBE_ROUNDS && !pr->failed; k++) {
        uint64_t written = ++*seq, read = ++*seq;
        memset(pr->mine_data, k + 1, PROBE_BYTES);
        post(pr, written);
        if (!wait_for(pr, written)) {
            break;
        }
        if (kernel && !refused) {
            double s = kernel_read_s(pr, out);
            refused = s < 0;
            t[n] = s;
            n += s > 0;
        } else if (!kernel) {
            double start = fold_util_time_now();
            memcpy(out, pr->their_data, PROBE_BYTES);
            t[n++] = fold_util_time_now() - start;
        }
        post(pr, read);
        wait_for(pr, read);   /* the other is done reading before either writes again */
    }
    return refused ? 0 : median_gbs(t, n, PROBE_BYTES);
}

/* A leader's reduction into the segment, as dpml's leaders do it: both write their
 * buffer, then sum their own with the other's into their result area of the segment
 * (fold_reduce_local_shared, the executor's path), whose lines the other core read
 * in the round before; then each reads the other's result. A sum into a private
 * buffer runs markedly faster than dpml's steps do, and timing that would make the
 * model prefer dpml where it is slower. */
static double shared_reduce_gbs(probe_t *pr, const float *own, float *out, uint64_t *seq)
{
    double t[PROBE_ROUNDS];
    int n = 0;
    for (int k = 0; k < PROBE_ROUNDS && !pr->failed; k++) {
        uint64_t written = ++*seq, reduced = ++*seq, read = ++*seq;
        memset(pr->mine_data, k + 1, PROBE_BYTES);
        post(pr, written);
        if (!wait_for(pr, written)) {
            break;
        }
        double start = fold_util_time_now();
        fold_reduce_local_shared(FOLD_OP_SUM, FOLD_FLOAT32, own, pr->their_data,
                                 pr->mine_out, PROBE_BYTES / sizeof(float));
        t[n++] = fold_util_time_now() - start;
        post(pr, reduced);
        if (!wait_for(pr, reduced)) {
            break;
        }
        memcpy(out, pr->their_out, PROBE_BYTES);
        post(pr, read);
        wait_for(pr, read);
    }
    return median_gbs(t, n, PROBE_BYTES);
}

/* shm_flat's steps: both copy `bytes` of their own into their buffer, over lines
 * the other core read the round before, then sum their own data with the other's
 * into a buffer of their own. The sum slows from rows that fit the L2 to rows whose
 * lines the other core's L2 no longer holds, where the copy rate does not, so both
 * sizes are timed; and with the cores apart a copy into the segment and one out of it
 * run at different rates. The median rates of both into *write (unless NULL) and
 * *fold. */
static void fold_gbs(probe_t *pr, size_t bytes, const float *own, float *out, uint64_t *seq,
                     double *write, double *fold)
{
    double tw[PROBE_ROUNDS], tf[PROBE_ROUNDS];
    int n = 0;
    for (int k = 0; k < PROBE_ROUNDS && !pr->failed; k++) {
        uint64_t written = ++*seq, read = ++*seq;
        double start = fold_util_time_now();
        fold_copy_shared(pr->mine_data, own, bytes);
        tw[n] = fold_util_time_now() - start;
        post(pr, written);
        if (!wait_for(pr, written)) {
            break;
        }
        start = fold_util_time_now();
        fold_reduce_local(FOLD_OP_SUM, FOLD_FLOAT32, own, pr->their_data, out,
                          bytes / sizeof(float), 1, 0);
        tf[n++] = fold_util_time_now() - start;
        post(pr, read);
        wait_for(pr, read);
    }
    if (write != NULL) {
        *write = median_gbs(tw, n, bytes);
    }
    *fold = median_gbs(tf, n, bytes);
}

void fold_node_probe_cores(fold_node_t *node, fold_node_calib_t *out)
{
    memset(out, 0, sizeof(*out));
    const fold_shm_seg_t *seg = &node->seg;
    int last = seg->local_size - 1;
    int is_a = node->local_rank == 0, is_b = node->local_rank == last;
    /* Only the schedules' part: the tiny-message and single-copy regions follow it. */
    if (seg->base == NULL || last < 1 || (!is_a && !is_b) ||
        node->shm_bytes < PROBE_DATA_OFF + 4 * PROBE_BYTES) {
        return;
    }
    /* Both sides decide alike whether the far rows fit: the segment is one size. */
    int far = node->shm_bytes >= PROBE_DATA_OFF + 2 * PROBE_FAR;
    size_t priv = far ? PROBE_FAR : PROBE_BYTES;
    float *own = aligned_alloc(64, priv), *buf = aligned_alloc(64, priv);
    if (own == NULL || buf == NULL) {
        free(own);
        free(buf);
        return;   /* the other side gives up after a second */
    }
    memset(own, 0, priv);
    memset(buf, 0, priv);
    _Atomic uint64_t *words = (_Atomic uint64_t *)(void *)seg->data;
    char *data_a = seg->data + PROBE_DATA_OFF, *data_b = data_a + PROBE_BYTES;
    char *out_a = data_b + PROBE_BYTES, *out_b = out_a + PROBE_BYTES;
    probe_t pr = {.mine = is_a ? &words[0] : &words[8], .theirs = is_a ? &words[8] : &words[0],
                  .mine_data = is_a ? data_a : data_b, .their_data = is_a ? data_b : data_a,
                  .mine_out = is_a ? out_a : out_b, .their_out = is_a ? out_b : out_a,
                  .deadline = fold_util_time_now() + PROBE_BUDGET_S};
    uint64_t seq = 0;
    double rtt = round_trip_us(&pr, is_a, &seq);
    double copy = read_gbs(&pr, buf, &seq, 0);
    double kernel = read_gbs(&pr, buf, &seq, 1);
    double reduce = shared_reduce_gbs(&pr, own, buf, &seq);
    double write, fold;
    fold_gbs(&pr, PROBE_BYTES, own, buf, &seq, &write, &fold);
    double fold_far = fold;
    if (far) {   /* the copy in hardly moves with the size: 64 KiB's stands */
        pr.mine_data  = is_a ? data_a : data_a + PROBE_FAR;
        pr.their_data = is_a ? data_a + PROBE_FAR : data_a;
        fold_gbs(&pr, PROBE_FAR, own, buf, &seq, NULL, &fold_far);
    }
    /* Both are done with the segment once the other side has seen the last word. */
    uint64_t bye = ++seq;
    post(&pr, bye);
    wait_for(&pr, bye);
    if (!pr.failed) {
        out->flag_us     = is_b ? rtt / 2 : 0;   /* both timed the trips: told once */
        out->xcopy_gbs   = copy;
        out->xcma_gbs    = kernel;
        out->xreduce_gbs = reduce;
        out->xwrite_gbs  = write;
        out->xfold_gbs   = fold;
        out->xfold_far_gbs = fold_far;
    }
    free(own);
    free(buf);
}
