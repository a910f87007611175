/*
 * The cost model's evaluator (model.h): every rank's schedule replayed together in
 * one discrete-event simulation. Pure computation: no transport, no clock, no
 * randomness, so every rank of a job that asks the same question gets the same
 * answer, bit for bit, and can act on it without talking to the others.
 *
 * What the simulation does (times in microseconds; GB/s = 1e9 bytes/s = bytes per
 * ns, so a transfer of b bytes at g GB/s takes b / (g * 1e3) us):
 *
 *   readiness   a step becomes ready when the last of its predecessors (the
 *               dependencies fold_sched_finalize derived) is done; steps without
 *               predecessors are ready at 0. Soft waits (exec_plan.h) are left out:
 *               the model assumes dense data, and the executor drops a soft wait
 *               as soon as the message its answer derives from arrives dense.
 *   CPU         each rank has one CPU timeline. A ready step takes it for step_us
 *               (the executor's overhead), copies and reductions also for their
 *               bytes over the node's bandwidth; the CPU serves steps in the order
 *               they became ready. Sends, receives and shm waits only take the
 *               step_us to post: their data moves without the CPU. A flag post
 *               ends step_us after it is ready, whatever the CPU is busy with (the
 *               executor runs it between the other steps).
 *   bandwidth   a node's working set is what its ranks' schedules touch: each
 *               rank's IN, OUT (once when in place) and TMP extents, plus the node
 *               segment once. Up to half of cache_bytes copies run at copy_gbs and
 *               reductions at reduce_gbs (bytes of the result); from twice it on
 *               at copy_mem_gbs / reduce_mem_gbs, capped at node_mem_gbs divided by
 *               the node's ranks, since out of cache they stream together; between
 *               the two the time per byte moves linearly from one to the other.
 *               Single copy (the kernel's copies) moves from cma_gbs to cma_mem_gbs
 *               the same way. Below the last level, where fold_init found a core's
 *               own cache (l2_bytes), a rank whose own working set (its IN, OUT and
 *               TMP extents) fits half of it copies and reduces at copy_l2_gbs and
 *               reduce_l2_gbs instead of the in-cache rates, moving to them the same
 *               way up to twice it: where large L2s sit on a slow mesh, a pipeline's
 *               small chunks fold well above the rate the 1 MiB calibration (in the
 *               L3) measures.
 *   messages    the k-th send from a to b carries the k-th receive b posts from a
 *               (matched before the simulation; counts must agree). A send is
 *               posted when its CPU slot ends; its data is ready to move then if it
 *               has at most eager_bytes, else once the receive is posted too
 *               (rendezvous). It arrives lat + bytes / bandwidth after it starts
 *               moving: intra_lat_us and intra_gbs within a node, inter_lat_us and
 *               inter_gbs between nodes. Between nodes it holds one of the nics
 *               outbound links of the sender's node and one of the nics inbound
 *               links of the receiver's node (the earliest free of each); within a
 *               node the sender's outbound and the receiver's inbound channel (a
 *               rank's transport copies one message at a time; other pairs of the
 *               node do not contend; the bytes move at most at the node's copy rate
 *               and at shm_gbs, and hold the receiver's CPU, whose core copies
 *               them). Links and
 *               channels are held while the bytes
 *               go through, not for the latency: messages in flight overlap their
 *               latencies as on a NIC, else a node's 8 ranks sending small messages
 *               at once would pay 8 latencies. Messages claim links and channels in
 *               the order they become ready to move. A send is done when its data
 *               has arrived, a receive at the later of its post and the arrival.
 *               Zero-byte messages (signals) are messages like any other.
 *   shm flags   a post sets its rank's flag when its CPU slot ends; a wait is done
 *               at the later of its own post time and flag_us after the first post
 *               that brought the awaited flag to the awaited value (local -1: the
 *               latest of every other local rank's). Values are those of one call,
 *               so a wait for 0 (the previous call's FOLD_SHM_CALL_DONE) is met at
 *               once.
 *   order       events come out by (time, step, type), so ties always resolve the
 *               same way whatever the machine or the run. No event is ever queued
 *               for a time before the current one, so the queue is a radix heap over
 *               the times' bits, with the current time's events sorted by step.
 *
 * Results: the time the last step of any rank is done, the latest finish among
 * the ranks that have an output (for reduce: the root), and the steps simulated.
 * A step that never completes means the schedules do not fit each other (a
 * message or flag that never comes, a cycle): that is logged naming the rank, the
 * step and its kind, and fails with FOLD_ERR_INVALID_ARG.
 *
 * Size: predict builds one rank's schedule at a time and keeps a 48-byte record per
 * step plus 4 bytes per dependency, so a ring allreduce on 1000 ranks (5 million
 * steps) takes about 250 MB. The work is about linear in the steps, half of it
 * building and finalizing schedules (docs/results/decisions-at-scale.md).
 *
 * Cheaper, same answers (selection's questions; test_model_fast checks each against
 * its reference bit for bit):
 *   - fold_model_predict_within stops a replay as soon as its time is sure to reach
 *     a cutoff (the best candidate so far): at the first event at or after it, when
 *     one rank's CPU floor alone reaches it (before the other ranks are even built),
 *     or when some rank's CPU cannot get through its remaining steps in time. A CPU
 *     floor is what cpu_bound sums: step_us per step but flag posts, copies and
 *     reductions at the faster of the cache and memory rates, a millionth less for
 *     rounding.
 *   - Ranks whose schedules differ only in peers (and a reduction's operand order)
 *     have the same dependencies: each shape is finalized once per replay
 *     (fold_sched_finalize_like), the same local rank of every node, both sides of
 *     a recursive-doubling exchange.
 *   - On equal nodes that every schedule treats alike (node symmetry, below), node
 *     0's ranks alone are replayed, their messages to other nodes standing for the
 *     ones those nodes send them: a decision on 1024 nodes replays one node's
 *     steps (test_model_symmetry checks it against every rank's replay).
 *   - A fold_model_space_t keeps the large buffers from one replay to the next.
 */
#include "model.h"
#include "model_build.h"
#include "model_cost.h"
#include "coll/exec_plan.h"

#include "util/grow.h"
#include "util/size.h"
#include "hash.h"
#include "log.h"
#include "node/segment.h"

#include <ctype.h>
#include <errno.h>
#include <fold/fold_status.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters --------------------------------------------------------------- */

typedef enum model_param_kind {
    PARAM_TIME,    /* microseconds, >= 0 */
    PARAM_RATE,    /* GB/s, > 0 */
    PARAM_LINKS,   /* an integer >= 1 */
    PARAM_BYTES    /* fold_util_parse_size, stored as a double */
} model_param_kind_t;

typedef struct model_param {
    const char *name;
    size_t      offset;
    int         kind;
} model_param_t;

#define MODEL_PARAM(field, kind) {#field, offsetof(fold_model_params_t, field), kind}

static const model_param_t model_params[] = {
    MODEL_PARAM(step_us, PARAM_TIME),        MODEL_PARAM(flag_us, PARAM_TIME),
    MODEL_PARAM(intra_lat_us, PARAM_TIME),   MODEL_PARAM(intra_gbs, PARAM_RATE),
    MODEL_PARAM(inter_lat_us, PARAM_TIME),   MODEL_PARAM(inter_gbs, PARAM_RATE),
    MODEL_PARAM(nics, PARAM_LINKS),          MODEL_PARAM(eager_bytes, PARAM_BYTES),
    MODEL_PARAM(copy_gbs, PARAM_RATE),       MODEL_PARAM(copy_mem_gbs, PARAM_RATE),
    MODEL_PARAM(reduce_gbs, PARAM_RATE),     MODEL_PARAM(reduce_mem_gbs, PARAM_RATE),
    MODEL_PARAM(node_mem_gbs, PARAM_RATE),   MODEL_PARAM(cache_bytes, PARAM_BYTES),
    MODEL_PARAM(l2_bytes, PARAM_BYTES),      MODEL_PARAM(copy_l2_gbs, PARAM_RATE),
    MODEL_PARAM(reduce_l2_gbs, PARAM_RATE),
    MODEL_PARAM(shm_gbs, PARAM_RATE),        MODEL_PARAM(shm_reduce_gbs, PARAM_RATE),
    MODEL_PARAM(shm_write_gbs, PARAM_RATE),  MODEL_PARAM(shm_fold_gbs, PARAM_RATE),
    MODEL_PARAM(shm_fold_far_gbs, PARAM_RATE),
    MODEL_PARAM(cma_gbs, PARAM_RATE),        MODEL_PARAM(cma_mem_gbs, PARAM_RATE),
    MODEL_PARAM(cma_us, PARAM_TIME),         MODEL_PARAM(move_us, PARAM_TIME),
    MODEL_PARAM(adopt_gbs, PARAM_RATE),
};

#define MODEL_NPARAMS   (sizeof(model_params) / sizeof(model_params[0]))
#define MODEL_MAX_NICS  1024

uint64_t fold_model_hash(const fold_model_params_t *p, uint64_t h)
{
    /* Field by field: the struct's padding is never written. */
    for (size_t i = 0; i < MODEL_NPARAMS; i++) {
        const char *field = (const char *)p + model_params[i].offset;
        h = fold_hash(h, field, model_params[i].kind == PARAM_LINKS ? sizeof(int)
                                                                     : sizeof(double));
    }
    return h;
}

/*
 * A generic current server node on a 100 Gb/s network; a calibration replaces
 * them. The per-core figures are deliberately below a fast core's peak: a typical
 * node is older, and its ranks share the memory controllers.
 */
void fold_model_defaults(fold_model_params_t *p)
{
    *p = (fold_model_params_t){
        .step_us        = 0.05,   /* executor: dequeue a step, post or run it, retire it */
        .flag_us        = 0.15,   /* a flag's cache line moving to the waiting core */
        .intra_lat_us   = 0.5,    /* UCX shared-memory transport, small message */
        .intra_gbs      = 6,      /* ... large message (CMA or two copies, and the
                                     protocol's handshakes) */
        .inter_lat_us   = 2,      /* InfiniBand / RoCE class small-message latency */
        .inter_gbs      = 12.5,   /* 100 Gb/s line rate */
        .nics           = 1,
        .eager_bytes    = 8192,   /* UCX's usual tag rendezvous threshold */
        .copy_gbs       = 40,     /* memcpy within the last-level cache, one core */
        .copy_mem_gbs   = 15,     /* ... streaming from DRAM */
        .reduce_gbs     = 30,     /* c = a op b on float32, in cache, bytes of c */
        .reduce_mem_gbs = 12,     /* ... from DRAM: three streams per result */
        .node_mem_gbs   = 100,    /* what all cores of a node stream together */
        .cache_bytes    = 32.0 * 1024 * 1024,
        .l2_bytes       = 0,      /* no level below the last: fold_init measures one */
        .copy_l2_gbs    = 40,
        .reduce_l2_gbs  = 30,
        .shm_gbs        = 10,     /* one core reading what another core just wrote */
        .shm_reduce_gbs = 10,     /* ... and reducing it with its own data */
        .shm_write_gbs  = 10,     /* one core copying over lines another core read */
        .shm_fold_gbs   = 10,     /* ... into a buffer of its own */
        .shm_fold_far_gbs = 10,   /* ... with the rows past the cores' L2s */
        .cma_gbs        = 8,      /* process_vm_readv of another process's memory */
        .cma_mem_gbs    = 3,      /* ... out of cache: cma_gbs slowed as a copy is
                                     (15 / 40) */
        .cma_us         = 1,      /* ... per call (the kernel pins the pages) */
        .adopt_gbs      = 1,      /* a page copied into a new file and faulted in
                                     again */
        /* A step costs more than its bytes account for (FOLD_TRACE shows it on a
         * large reduce's folds from the segment); without it the model cuts large
         * reduces into small segments that run slower than larger ones. */
        .move_us        = 0.1,
    };
}

void fold_model_mapped(const fold_model_params_t *p, fold_model_params_t *mapped)
{
    *mapped = *p;
    /* A peer's buffer read or written through a mapping is a copy over lines
     * another core wrote or reads, as the segment's, and starts as any copy does:
     * no kernel call. The peer's published line (where its buffer lies) is in the
     * cache by then: the wait for the peer's post before it checked the line
     * (exec.c, shm_wait_check). Priced at a flag hop instead, single copy's two
     * steps make a small allreduce in fold memory look slower than shm_flat where
     * it runs faster. */
    mapped->cma_gbs = fmin(p->shm_gbs, p->shm_write_gbs);
    mapped->cma_us  = p->move_us;
    /* A read whose reduction folds its bytes where they lie copies nothing. */
    mapped->peer_views = 1;
    /* Out of cache such a copy pays what a copy out of cache pays beyond one in it. */
    double extra = 1.0 / p->copy_mem_gbs - 1.0 / p->copy_gbs;
    mapped->cma_mem_gbs = 1.0 / (1.0 / mapped->cma_gbs + fmax(0, extra));
}

void fold_model_tiny(const fold_model_params_t *p, fold_model_params_t *tiny)
{
    /* shm_flat's protocol run straight by the calling thread: no executor to dequeue,
     * post and retire steps, and no stream to start per row: a reader polls every
     * row's lines at once, so that they cross together (node/fast.c). Its copies and
     * folds by their bytes, and the flag hop, cost what the schedule's do; a step's
     * start does not (it runs at about half the schedule's time). With move_us per
     * row a 64-rank node's 8 B allreduce would pay 63 rows' starts in a row and lose
     * to a flat algorithm's six rounds. */
    *tiny = *p;
    tiny->step_us = 0;
    tiny->move_us = 0;
}

int fold_model_equal(const fold_model_params_t *a, const fold_model_params_t *b)
{
    for (size_t i = 0; i < MODEL_NPARAMS; i++) {
        const char *x = (const char *)a + model_params[i].offset;
        const char *y = (const char *)b + model_params[i].offset;
        if (model_params[i].kind == PARAM_LINKS ? *(const int *)x != *(const int *)y
                                                : *(const double *)x != *(const double *)y) {
            return 0;
        }
    }
    return 1;
}

static const model_param_t *param_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < MODEL_NPARAMS; i++) {
        if (strcmp(model_params[i].name, name) == 0) {
            return &model_params[i];
        }
    }
    return NULL;
}

/* A plain number: no sign, no blanks, no "inf" or "nan", nothing after it. */
static int parse_number(const char *text, double *out)
{
    if (text == NULL || !(isdigit((unsigned char)text[0]) || text[0] == '.')) {
        return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_param(const model_param_t *mp, const char *text, double *out)
{
    size_t bytes;
    switch (mp->kind) {
    case PARAM_TIME:
        return parse_number(text, out);
    case PARAM_RATE:
        return (parse_number(text, out) == 0 && *out > 0) ? 0 : -1;
    case PARAM_LINKS:
        if (parse_number(text, out) != 0 || *out < 1 || *out > MODEL_MAX_NICS ||
            *out != floor(*out)) {
            return -1;
        }
        return 0;
    case PARAM_BYTES:
        if (fold_util_parse_size(text, &bytes) != 0) {
            return -1;
        }
        *out = (double)bytes;
        return 0;
    }
    return -1;
}

int fold_model_set(fold_model_params_t *p, const char *name, const char *value)
{
    const model_param_t *mp = param_find(name);
    if (p == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (mp == NULL) {
        fold_error("unknown cost-model parameter '%s'", name ? name : "(null)");
        return FOLD_ERR_NOT_FOUND;
    }
    double v;
    if (parse_param(mp, value, &v) != 0) {
        static const char *const expect[] = {
            "a number of microseconds >= 0", "a bandwidth in GB/s > 0",
            "an integer from 1 to 1024", "a byte count such as 8192, 64k, 32M or inf"};
        fold_error("cost-model parameter %s: '%s' is not %s", mp->name,
                   value ? value : "(null)", expect[mp->kind]);
        return FOLD_ERR_INVALID_ARG;
    }
    char *field = (char *)p + mp->offset;
    if (mp->kind == PARAM_LINKS) {
        *(int *)field = (int)v;
    } else {
        *(double *)field = v;
    }
    return FOLD_OK;
}

/* The shortest of %.15g..%.17g that reads back as the same double, so a printed
 * set of parameters (a tuning file) reproduces the predictions exactly. */
static void format_double(double v, char *buf, size_t len)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) {
            return;
        }
    }
}

void fold_model_print(const fold_model_params_t *p, const char *prefix, void *file)
{
    FILE *out = file;
    for (size_t i = 0; i < MODEL_NPARAMS; i++) {
        const model_param_t *mp = &model_params[i];
        const char *field = (const char *)p + mp->offset;
        char value[64];
        if (mp->kind == PARAM_LINKS) {
            snprintf(value, sizeof(value), "%d", *(const int *)field);
        } else if (mp->kind == PARAM_BYTES && *(const double *)field >= (double)SIZE_MAX) {
            snprintf(value, sizeof(value), "inf");
        } else if (mp->kind == PARAM_BYTES) {
            snprintf(value, sizeof(value), "%.0f", *(const double *)field);
        } else {
            format_double(*(const double *)field, value, sizeof(value));
        }
        fprintf(out, "%s%s %s\n", prefix ? prefix : "", mp->name, value);
    }
}

/* ---- the schedules, compacted --------------------------------------------------- */

enum { STEP_WAITING, STEP_POSTED, STEP_DONE };

/*
 * One step of the whole program with its simulation state in one record (48 bytes
 * against ~120 for a fold_step_t), since the simulation jumps between ranks in time
 * order and each record it touches is a cache miss of its own.
 */
typedef struct model_step {
    double   t_post;     /* ready time until the step starts; then when its CPU part
                            ended (a message: when it was posted) */
    double   t_done;     /* when done; an shm wait before that: the latest flag time
                            it has seen, + flag_us */
    uint64_t amount;     /* send, recv, copy, reduce: bytes (reduce rows: of one row);
                            shm post/wait: flag value */
    int32_t  peer;       /* send/recv: the peer; shm wait: the owner's local index, -1
                            every other local rank */
    uint32_t npred;      /* predecessors not done yet */
    uint32_t link;       /* messages: seq, then (once matched) the other side's step;
                            shm waits: flags still awaited; reduce rows: its rows */
    uint32_t succ_off;   /* successors: succ[succ_off .. succ_off + nsucc) */
    uint32_t nsucc;
    uint8_t  kind;       /* fold_step_kind_t */
    uint8_t  flag;       /* shm post/wait */
    uint8_t  state;      /* STEP_WAITING, STEP_POSTED, STEP_DONE */
    uint8_t  shm_access; /* copy/reduce: SHM_READS and/or SHM_WRITES the node segment,
                            whose lines other cores wrote or read last */
} model_step_t;

#define SHM_READS  1
#define SHM_WRITES 2
#define PEER_VIEW  4   /* peer read: a reduction takes it over (exec_plan.h) */
#define MSG_REMOTE 8   /* a send of a one-node replay (node symmetry) to another node */

/* Every rank's schedule, one after the other; step g of the whole is step
 * g - base[r] of rank r. Successors are global step numbers. */
typedef struct model_prog {
    int           size;
    size_t        nsteps, cap;
    size_t       *base;       /* rank -> its first step; size + 1 entries */
    model_step_t *steps;
    uint32_t     *succ;
    size_t        nsucc, succ_cap;
    double       *priv_bytes; /* rank -> bytes of IN, OUT and TMP it touches */
    double       *shm_bytes;  /* rank -> bytes of the node segment it touches */
    uint8_t      *has_out;    /* rank -> has an output (reduce: the root only) */
    double       *cpu_left;   /* rank -> its steps' CPU floor (cpu_bound), or NULL */
    size_t        nrecvs;
    double        ws_scale;   /* fold_model_query_t.ws_scale */
} model_prog_t;

#define MODEL_NONE UINT32_MAX

static int prog_init(model_prog_t *g, int size)
{
    memset(g, 0, sizeof(*g));
    g->size       = size;
    g->base       = calloc((size_t)size + 1, sizeof(*g->base));
    g->priv_bytes = calloc((size_t)size, sizeof(double));
    g->shm_bytes  = calloc((size_t)size, sizeof(double));
    g->has_out    = calloc((size_t)size, 1);
    if (g->base == NULL || g->priv_bytes == NULL || g->shm_bytes == NULL || g->has_out == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    return FOLD_OK;
}

static void prog_free(model_prog_t *g)
{
    free(g->base);
    free(g->steps);
    free(g->succ);
    free(g->priv_bytes);
    free(g->shm_bytes);
    free(g->has_out);
    free(g->cpu_left);
    memset(g, 0, sizeof(*g));
}

/* Capacity for `need` elements, doubling from 256. */
static int grow_cap(void **buf, size_t *cap, size_t need, size_t elem)
{
    return fold_util_grow(buf, cap, need, elem, 256);
}

/* grow_cap from a capacity of 4. */
static int grow_small(void **buf, size_t *cap, size_t need, size_t elem)
{
    return fold_util_grow(buf, cap, need, elem, 4);
}

static void note_extent(size_t *ext, fold_ref_t r, size_t count)
{
    if (r.buf < FOLD_BUF_COUNT && r.off + count > ext[r.buf]) {
        ext[r.buf] = r.off + count;
    }
}

/*
 * The node segment's elements a schedule touches. Its slots are reused step after
 * step, so what the cache holds is the distinct slots, not the furthest offset:
 * dpml_pipelined's rows start at fixed fractions of the whole segment whatever its
 * pipeline segment, and costing the extent made an 8 MiB 2-rank reduce in 128 KiB
 * segments look 10% slower than in 32 KiB ones, where it runs 5-15% faster. A small
 * table of distinct offsets, each with its largest count; the sum, at most the
 * extent; past the table's room, the extent.
 */
#define SHM_SLOTS 1024

typedef struct shm_touch {
    size_t off[SHM_SLOTS], count[SHM_SLOTS];   /* count 0: a free slot */
    int    full;
} shm_touch_t;

static void shm_touch_note(shm_touch_t *t, fold_ref_t r, size_t count)
{
    if (r.buf != FOLD_BUF_SHM || count == 0 || t->full) {
        return;
    }
    size_t h = (size_t)((r.off * 0x9e3779b97f4a7c15ull) >> 40) % SHM_SLOTS;
    for (int probe = 0; probe < SHM_SLOTS; probe++, h = (h + 1) % SHM_SLOTS) {
        if (t->count[h] == 0 || t->off[h] == r.off) {
            t->off[h]   = r.off;
            t->count[h] = count > t->count[h] ? count : t->count[h];
            return;
        }
    }
    t->full = 1;
}

static size_t shm_touched(const shm_touch_t *t, size_t extent)
{
    size_t sum = 0;
    for (int i = 0; i < SHM_SLOTS && !t->full; i++) {
        sum += t->count[i];
    }
    return t->full || sum > extent ? extent : sum;
}

/* Bytes of each buffer the schedule touches: the rank's share of the working set. */
static void prog_note_footprint(model_prog_t *g, int rank, const fold_sched_t *s, size_t esize)
{
    size_t ext[FOLD_BUF_COUNT] = {0};
    static __thread shm_touch_t touch;
    memset(&touch, 0, sizeof(touch));
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        switch (st->kind) {
        case FOLD_STEP_REDUCE_ROWS:
            for (uint32_t k = 0; k < st->nops; k++) {
                note_extent(ext, s->ops[st->ops_off + k], st->count);
                shm_touch_note(&touch, s->ops[st->ops_off + k], st->count);
            }
            note_extent(ext, st->dst, st->count);
            shm_touch_note(&touch, st->dst, st->count);
            break;
        case FOLD_STEP_REDUCE:
            note_extent(ext, st->src2, st->count);
            shm_touch_note(&touch, st->src2, st->count);
            /* fall through */
        case FOLD_STEP_COPY:
            note_extent(ext, st->src, st->count);
            note_extent(ext, st->dst, st->count);
            shm_touch_note(&touch, st->src, st->count);
            shm_touch_note(&touch, st->dst, st->count);
            break;
        case FOLD_STEP_SEND:
            note_extent(ext, st->src, st->count);
            break;
        default:
            note_extent(ext, st->dst, st->count);
        }
    }
    size_t in = ext[FOLD_BUF_IN], out = ext[FOLD_BUF_OUT];
    size_t user = s->inplace ? (in > out ? in : out) : in + out;
    size_t tmp = ext[FOLD_BUF_TMP] > s->tmp_count ? ext[FOLD_BUF_TMP] : s->tmp_count;
    size_t shm = ext[FOLD_BUF_SHM] > s->shm_count ? ext[FOLD_BUF_SHM] : s->shm_count;
    /* The buffers grow with the call; scratch and segment are bounded. */
    double scale = g->ws_scale > 1 ? g->ws_scale : 1;
    g->priv_bytes[rank] = ((double)user * scale + (double)tmp) * (double)esize;
    g->shm_bytes[rank]  = (double)shm_touched(&touch, shm) * (double)esize;
    g->has_out[rank]    = (uint8_t)(s->has_out != 0);
}

/* How a copy or reduction touches the node segment (model_step_t.shm_access). */
static uint8_t shm_access_of(const fold_sched_t *s, const fold_step_t *st)
{
    if (st->kind != FOLD_STEP_COPY && st->kind != FOLD_STEP_REDUCE &&
        st->kind != FOLD_STEP_REDUCE_ROWS) {
        return 0;
    }
    int reads = 0;
    for (int k = 0; k < fold_step_nreads(st) && !reads; k++) {
        reads = fold_step_read(s, st, k).buf == FOLD_BUF_SHM;
    }
    return (uint8_t)((reads ? SHM_READS : 0) | (st->dst.buf == FOLD_BUF_SHM ? SHM_WRITES : 0));
}

/* Appends rank `rank`'s finalized schedule; ranks come in order 0, 1, ... */
static int prog_append(model_prog_t *g, int rank, const fold_sched_t *s, size_t esize)
{
    size_t nsucc = 0;
    for (size_t i = 0; i < s->nsteps; i++) {
        nsucc += s->steps[i].nsucc;
    }
    if (g->nsteps + s->nsteps >= MODEL_NONE || g->nsucc + nsucc >= MODEL_NONE) {
        fold_error("model: more than 2^32 steps or dependencies: too large to simulate");
        return FOLD_ERR_NO_MEMORY;
    }
    if (grow_cap((void **)&g->steps, &g->cap, g->nsteps + s->nsteps, sizeof(*g->steps)) !=
            FOLD_OK ||
        grow_cap((void **)&g->succ, &g->succ_cap, g->nsucc + nsucc, sizeof(uint32_t)) !=
            FOLD_OK) {
        return FOLD_ERR_NO_MEMORY;
    }
    const size_t base = g->nsteps;
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        const int shm = st->kind == FOLD_STEP_SHM_POST || st->kind == FOLD_STEP_SHM_WAIT;
        model_step_t *to = &g->steps[base + i];
        *to = (model_step_t){
            .amount   = shm ? st->value : (uint64_t)st->count * (uint64_t)esize,
            .peer     = st->kind == FOLD_STEP_SHM_WAIT ? st->local : st->peer,
            .npred    = st->npred,
            .link     = st->kind == FOLD_STEP_REDUCE_ROWS ? st->nops : st->seq,
            .succ_off = (uint32_t)g->nsucc,
            .kind     = st->kind,
            .flag     = st->flag,
            .state    = STEP_WAITING,
            .shm_access = shm_access_of(s, st),
        };
        /* The executor's soft waits (exec_plan.h) are no edges of the schedule:
         * it drops them when the message an answer derives from arrives dense, as
         * the model assumes every message does. */
        for (uint32_t k = 0; k < st->nsucc; k++) {
            g->succ[g->nsucc++] = (uint32_t)(base + s->succ[st->succ_off + k]);
            to->nsucc++;
        }
        g->nrecvs += st->kind == FOLD_STEP_RECV;
    }
    /* A copy its reduction makes along (exec_plan.h) goes out of the core's own L1,
     * not out of the segment. */
    for (uint32_t r = 0; r < s->nsteps; r++) {
        uint32_t c = fold_plan_copy_along(s, r);
        if (c != FOLD_STEP_NONE) {
            g->steps[base + c].shm_access = 0;
        }
    }
    /* A peer read a reduction takes over (exec_plan.h): priced by the parameters. */
    for (uint32_t i = 0; s->uses_peer && s->serial && i < s->nsteps; i++) {
        int operand;
        if (fold_plan_peer_view(s, i, &operand) != FOLD_STEP_NONE) {
            g->steps[base + i].shm_access = PEER_VIEW;
        }
    }
    g->nsteps         = base + s->nsteps;
    g->base[rank + 1] = g->nsteps;
    prog_note_footprint(g, rank, s, esize);
    return FOLD_OK;
}

/* "rank 2, step 5 of 9 (recv from rank 1, 4096 bytes)", for error messages. */
static void describe_step(const model_prog_t *g, int rank, size_t gi, char *buf, size_t len)
{
    const model_step_t *st = &g->steps[gi];
    size_t i = gi - g->base[rank] + 1, n = g->base[rank + 1] - g->base[rank];
    unsigned long long amount = (unsigned long long)st->amount;
    int off = snprintf(buf, len, "rank %d, step %zu of %zu (%s", rank, i, n,
                       fold_step_kind_name(st->kind));
    if (off < 0 || (size_t)off >= len) {
        return;
    }
    buf += off;
    len -= (size_t)off;
    switch (st->kind) {
    case FOLD_STEP_SEND:
    case FOLD_STEP_RECV:
        snprintf(buf, len, " %s rank %d, %llu bytes)", st->kind == FOLD_STEP_SEND ? "to" : "from",
                 st->peer, amount);
        break;
    case FOLD_STEP_SHM_POST:
        snprintf(buf, len, " of %s = %llu)", fold_flag_name(st->flag), amount);
        break;
    case FOLD_STEP_SHM_WAIT:
        if (st->peer < 0) {
            snprintf(buf, len, " for %s >= %llu of every other local rank)",
                     fold_flag_name(st->flag), amount);
        } else {
            snprintf(buf, len, " for %s >= %llu of local rank %d)", fold_flag_name(st->flag),
                     amount, st->peer);
        }
        break;
    default:
        snprintf(buf, len, " of %llu bytes)", amount);
    }
}

/* Peers, local indices and flags within range; logs the first that is not. */
static int prog_check(const model_prog_t *g, const fold_topo_t *topo)
{
    for (int r = 0; r < g->size; r++) {
        int ppn = fold_topo_ppn(topo, topo->node_of[r]);
        for (size_t gi = g->base[r]; gi < g->base[r + 1]; gi++) {
            const model_step_t *st = &g->steps[gi];
            int msg = st->kind == FOLD_STEP_SEND || st->kind == FOLD_STEP_RECV;
            int shm = st->kind == FOLD_STEP_SHM_POST || st->kind == FOLD_STEP_SHM_WAIT;
            if ((msg && (st->peer < 0 || st->peer >= g->size)) ||
                (st->kind == FOLD_STEP_SHM_WAIT && (st->peer < -1 || st->peer >= ppn)) ||
                (shm && st->flag >= FOLD_SHM_NFLAGS) || st->kind > FOLD_STEP_REDUCE_ROWS) {
                char what[160];
                describe_step(g, r, gi, what, sizeof(what));
                fold_error("model: %s names a rank, local rank or flag that does not exist "
                           "(%d ranks, %d on this node)", what, g->size, ppn);
                return FOLD_ERR_INVALID_ARG;
            }
        }
    }
    return FOLD_OK;
}

/* ---- message matching ---------------------------------------------------------- */

/*
 * Receives by (receiver, sender, seq): per receiver the senders it hears from, in
 * increasing order, each with its receives numbered by seq. A send from a to b with
 * seq k finds a among b's senders by bisection and takes receive k. Linear in the
 * messages, plus sorting each receiver's (few) distinct senders.
 */
typedef struct recv_index {
    size_t   *sender_off;   /* receiver -> its entries in senders[]; size + 1 */
    int32_t  *senders;
    size_t   *first;        /* entry -> its receives in slots[]; nentries + 1 */
    uint32_t *slots;        /* receive steps, MODEL_NONE once matched */
    int32_t  *count_of;     /* scratch, per sender rank */
    int32_t  *entry_of;     /* scratch, per sender rank */
} recv_index_t;

static void recv_index_free(recv_index_t *x)
{
    free(x->sender_off);
    free(x->senders);
    free(x->first);
    free(x->slots);
    free(x->count_of);
    free(x->entry_of);
}

static int compare_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int match_fail(const model_prog_t *g, int rank, size_t gi, const char *why)
{
    char what[160];
    describe_step(g, rank, gi, what, sizeof(what));
    fold_error("model: %s %s: the ranks' schedules do not match", what, why);
    return FOLD_ERR_INVALID_ARG;
}

/* Files receiver b's receives by (sender, seq). */
static int recv_index_add(recv_index_t *x, const model_prog_t *g, int b, size_t *nentries)
{
    size_t e0 = *nentries;
    for (size_t gi = g->base[b]; gi < g->base[b + 1]; gi++) {
        const model_step_t *st = &g->steps[gi];
        if (st->kind == FOLD_STEP_RECV && x->count_of[st->peer]++ == 0) {
            x->senders[(*nentries)++] = st->peer;
        }
    }
    size_t e1 = *nentries;
    qsort(x->senders + e0, e1 - e0, sizeof(int32_t), compare_int32);
    for (size_t e = e0; e < e1; e++) {
        int32_t a = x->senders[e];
        x->entry_of[a]  = (int32_t)e;
        x->first[e + 1] = x->first[e] + (size_t)x->count_of[a];
        x->count_of[a]  = 0;
    }
    x->sender_off[b + 1] = e1;
    for (size_t gi = g->base[b]; gi < g->base[b + 1]; gi++) {
        const model_step_t *st = &g->steps[gi];
        if (st->kind != FOLD_STEP_RECV) {
            continue;
        }
        size_t e = (size_t)x->entry_of[st->peer], k = st->link;
        if (k >= x->first[e + 1] - x->first[e] || x->slots[x->first[e] + k] != MODEL_NONE) {
            return match_fail(g, b, gi, "has a message number out of sequence (schedule "
                                        "not finalized?)");
        }
        x->slots[x->first[e] + k] = (uint32_t)gi;
    }
    return FOLD_OK;
}

static int recv_index_build(recv_index_t *x, const model_prog_t *g)
{
    size_t n = g->nrecvs, size = (size_t)g->size;
    memset(x, 0, sizeof(*x));
    x->sender_off = calloc(size + 1, sizeof(size_t));
    x->senders    = malloc((n + 1) * sizeof(int32_t));
    x->first      = calloc(n + 1, sizeof(size_t));
    x->slots      = malloc((n + 1) * sizeof(uint32_t));
    x->count_of   = calloc(size, sizeof(int32_t));
    x->entry_of   = calloc(size, sizeof(int32_t));
    if (x->sender_off == NULL || x->senders == NULL || x->first == NULL ||
        x->slots == NULL || x->count_of == NULL || x->entry_of == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    memset(x->slots, 0xff, (n + 1) * sizeof(uint32_t));   /* MODEL_NONE */
    size_t nentries = 0;
    int status = FOLD_OK;
    for (int b = 0; b < g->size && status == FOLD_OK; b++) {
        status = recv_index_add(x, g, b, &nentries);
    }
    return status;
}

/* The receive of send gi (rank a to its peer), or MODEL_NONE. */
static uint32_t recv_index_take(recv_index_t *x, const model_prog_t *g, int a, size_t gi)
{
    int b = g->steps[gi].peer;
    int32_t key = a;
    const int32_t *lo = x->senders + x->sender_off[b], *hi = x->senders + x->sender_off[b + 1];
    const int32_t *at = bsearch(&key, lo, (size_t)(hi - lo), sizeof(int32_t), compare_int32);
    if (at == NULL) {
        return MODEL_NONE;
    }
    size_t e = (size_t)(at - x->senders), k = g->steps[gi].link;
    if (k >= x->first[e + 1] - x->first[e]) {
        return MODEL_NONE;
    }
    uint32_t r = x->slots[x->first[e] + k];
    x->slots[x->first[e] + k] = MODEL_NONE;
    return r;
}

/* The first receive no send took, logged. */
static int unmatched_recv(const recv_index_t *x, const model_prog_t *g)
{
    for (int b = 0; b < g->size; b++) {
        for (size_t e = x->sender_off[b]; e < x->sender_off[b + 1]; e++) {
            for (size_t k = x->first[e]; k < x->first[e + 1]; k++) {
                if (x->slots[k] != MODEL_NONE) {
                    return match_fail(g, b, x->slots[k], "has no matching send");
                }
            }
        }
    }
    return FOLD_OK;
}

static int size_mismatch(const model_prog_t *g, int a, size_t gi, uint32_t r)
{
    char what[160];
    describe_step(g, g->steps[gi].peer, r, what, sizeof(what));
    fold_error("model: rank %d, step %zu sends %llu bytes to %s: the ranks' schedules do not "
               "match", a, gi - g->base[a] + 1, (unsigned long long)g->steps[gi].amount, what);
    return FOLD_ERR_INVALID_ARG;
}

/* Pairs every send with its receive: link then names the other side. */
static int prog_match(model_prog_t *g)
{
    recv_index_t x;
    int status = recv_index_build(&x, g);
    for (int a = 0; a < g->size && status == FOLD_OK; a++) {
        for (size_t gi = g->base[a]; gi < g->base[a + 1] && status == FOLD_OK; gi++) {
            if (g->steps[gi].kind != FOLD_STEP_SEND) {
                continue;
            }
            uint32_t r = recv_index_take(&x, g, a, gi);
            if (r == MODEL_NONE) {
                status = match_fail(g, a, gi, "has no matching receive");
            } else if (g->steps[r].amount != g->steps[gi].amount) {
                status = size_mismatch(g, a, gi, r);
            } else {
                g->steps[gi].link = r;
                g->steps[r].link  = (uint32_t)gi;
            }
        }
    }
    if (status == FOLD_OK) {
        status = unmatched_recv(&x, g);
    }
    recv_index_free(&x);
    return status;
}

/* ---- the simulation ------------------------------------------------------------ */

enum { EV_READY, EV_XFER };

typedef struct model_event {
    uint64_t t;      /* the time's bits: for doubles >= 0 they order as the doubles */
    uint32_t g;      /* the step (an inter-node transfer: its send); by (rank, step) */
    uint32_t who;    /* rank << 1 | event type */
} model_event_t;

typedef struct flag_log {
    double   *t;          /* when each post of the flag landed, in order */
    uint64_t *v;          /* the flag's value from then on (never decreasing) */
    size_t    n, cap;
    uint32_t  waiters;    /* head of the waits parked on it (pool), or MODEL_NONE */
} flag_log_t;

typedef struct flag_waiter {
    uint64_t value;
    uint32_t g;
    int32_t  rank;
    uint32_t next;
} flag_waiter_t;

/* The least CPU time a step takes (model.c, cpu_bound): step_us, and for copies and
 * reductions their bytes at the fastest of their rates (L2, cache, memory), a
 * millionth less for rounding; flag posts take none. */
typedef struct cpu_floor {
    double step_us, move_us, copy, reduce;
} cpu_floor_t;

static cpu_floor_t cpu_floor_of(const fold_model_params_t *p)
{
    double copy   = fmax(p->copy_gbs, p->copy_mem_gbs);   /* the fastest rates */
    double reduce = fmax(p->reduce_gbs, p->reduce_mem_gbs);
    if (p->l2_bytes > 0) {
        copy   = fmax(copy, p->copy_l2_gbs);
        reduce = fmax(reduce, p->reduce_l2_gbs);
    }
    cpu_floor_t f = {p->step_us, p->move_us, 1.0 / (copy * 1e3), 1.0 / (reduce * 1e3)};
    f.copy *= 1 - 1e-6;
    f.reduce *= 1 - 1e-6;
    return f;
}

/* A copy's or reduction's start, move_us, grows with its bytes up to MOVE_RAMP: the
 * prefetchers ramp over the first pages of a stream, and a step of a few lines has
 * none to ramp. At move_us per 8-byte step, dpml's five on a small allreduce's
 * critical path would cost a sixth of its time, against a flat algorithm's two. */
#define MOVE_RAMP 4096.0

static double move_cost(double move_us, double bytes)
{
    return bytes >= MOVE_RAMP ? move_us : move_us * bytes / MOVE_RAMP;
}

static double step_cpu_floor(const cpu_floor_t *f, const model_step_t *st)
{
    const double move = move_cost(f->move_us, (double)st->amount);
    double cost = st->kind == FOLD_STEP_COPY   ? move + (double)st->amount * f->copy
                : st->kind == FOLD_STEP_REDUCE ? move + (double)st->amount * f->reduce
                                               : 0;
    if (st->kind == FOLD_STEP_REDUCE_ROWS) {   /* the least of its two regimes (local_cost) */
        double n = st->link, row = (double)st->amount;
        cost = move_cost(f->move_us, row) +
               row * fmin((n - 1) * f->reduce, (n + 1) * f->copy / 2);
    }
    return st->kind == FOLD_STEP_SHM_POST ? 0 : f->step_us + cost;
}

/* The event queue's buffers, which a fold_model_space_t lends from one simulation
 * to the next. */
typedef struct event_bufs {
    model_event_t *heap;
    model_event_t *run;
    model_event_t *sorted;               /* run_sort's other buffer */
    model_event_t *bucket[64];           /* bucket b: keys whose highest bit differing
                                            from now's is bit b */
    size_t         heap_cap, run_cap, sorted_cap, bucket_cap[64];
} event_bufs_t;

static void event_bufs_free(event_bufs_t *q)
{
    free(q->heap);
    free(q->run);
    free(q->sorted);
    for (int b = 0; b < 64; b++) {
        free(q->bucket[b]);
    }
}

typedef struct model_sim {
    const fold_model_params_t *p;
    const fold_topo_t         *topo;
    model_prog_t              *prog;
    model_step_t  *steps;      /* prog->steps */
    double        *cpu;        /* rank -> its CPU is free from */
    double        *links;      /* node -> nics outbound, then nics inbound: free from */
    double        *chans;      /* rank -> its outbound, then inbound channel within the
                                  node (the transport's shared-memory copies): free from */
    double        *copy_us;    /* rank -> us per byte copied */
    double        *reduce_us;  /* rank -> us per byte reduced */
    double        *fold_cache_us;  /* rank -> the in-cache part of reduce_us */
    double        *stream_mem_us;  /* rank -> the memory part of one stream of a byte
                                      (half a copy's, which reads and writes one) */
    double        *kernel_us;  /* node -> us per byte of a peer read or write */
    double        *fold_us;    /* rank -> us per byte of result folded from the segment
                                  into its own buffer */
    double         intra_us, inter_us;   /* us per byte on the wire */
    double         shm_us;               /* us per byte copied from other cores' data */
    double         shm_write_us;         /* ... over lines other cores read */
    double         shm_reduce_us;        /* us per byte of result reduced from it */
    flag_log_t    *flags;      /* rank * FOLD_SHM_NFLAGS + flag */
    flag_waiter_t *pool;
    size_t         npool, pool_cap;
    /* The event queue (see queue_push): the events of the current time in a binary
     * heap by (step, type), the later ones in radix buckets by time. */
    event_bufs_t   buf;
    size_t         nheap;
    size_t         nrun, run_at;         /* buf.run[run_at .. nrun): events of the
                                            current time, sorted by (step, type) */
    uint64_t       now;                  /* the current time's key */
    size_t         nbucket[64];
    size_t         nevents;              /* in the heap and the buckets */
    double        *cpu_left;   /* rank -> CPU floor of its steps not started yet, or
                                  NULL (prog->cpu_left) */
    cpu_floor_t    floor;
    size_t         ndone;
    int            status;
} model_sim_t;

static uint64_t time_key(double t)
{
    uint64_t k;
    memcpy(&k, &t, sizeof(k));
    return k;
}

static double key_time(uint64_t k)
{
    double t;
    memcpy(&t, &k, sizeof(t));
    return t;
}

static int ev_before(const model_event_t *a, const model_event_t *b)
{
    if (a->t != b->t) {
        return a->t < b->t;
    }
    if (a->g != b->g) {
        return a->g < b->g;
    }
    return (a->who & 1) < (b->who & 1);
}

static void heap_insert(model_sim_t *m, model_event_t ev)
{
    if (grow_cap((void **)&m->buf.heap, &m->buf.heap_cap, m->nheap + 1,
                 sizeof(*m->buf.heap)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    size_t i = m->nheap++;
    while (i > 0 && ev_before(&ev, &m->buf.heap[(i - 1) / 2])) {
        m->buf.heap[i] = m->buf.heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    m->buf.heap[i] = ev;
}

static void bucket_add(model_sim_t *m, model_event_t ev)
{
    int b = 63 - __builtin_clzll(ev.t ^ m->now);
    if (grow_cap((void **)&m->buf.bucket[b], &m->buf.bucket_cap[b], m->nbucket[b] + 1,
                 sizeof(model_event_t)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    m->buf.bucket[b][m->nbucket[b]++] = ev;
}

/*
 * Events come out by (time, step, type), as from one binary heap over all of them,
 * but most of them wait in a radix heap over the time's bits (times >= 0 order as
 * their bits do): no event is ever queued for a time before the current one (a
 * step ends, and a message moves, no sooner than the event that led to it), so
 * only the events of the current time need a heap, a small one. A binary heap
 * over the whole frontier (half a replay's steps, a large schedule's 100k+ events)
 * spent a third of the replay finding its minimum.
 */
/* The first events, ready at 0 in increasing step order: the run as it is. */
static void queue_seed(model_sim_t *m, uint32_t g, int rank)
{
    if (grow_cap((void **)&m->buf.run, &m->buf.run_cap, m->nrun + 1,
                 sizeof(*m->buf.run)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    m->buf.run[m->nrun++] = (model_event_t){time_key(0), g, ((uint32_t)rank << 1) | EV_READY};
    m->nevents++;
}

/* The run by (step, type), all of one time: short ones by insertion, long ones
 * by radix over the 33 bits of step << 1 | type, in three stable passes. */
static void run_sort(model_sim_t *m)
{
    model_event_t *v = m->buf.run;
    size_t n = m->nrun;
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            model_event_t e = v[i];
            size_t j = i;
            while (j > 0 && ev_before(&e, &v[j - 1])) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = e;
        }
        return;
    }
    if (grow_cap((void **)&m->buf.sorted, &m->buf.sorted_cap, n, sizeof(*v)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    model_event_t *from = v, *to = m->buf.sorted;
    for (int shift = 0; shift < 33; shift += 11) {
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++) {
            uint64_t key = ((uint64_t)from[i].g << 1) | (from[i].who & 1);
            count[((key >> shift) & 2047) + 1]++;
        }
        for (int d = 0; d < 2048; d++) {
            count[d + 1] += count[d];
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t key = ((uint64_t)from[i].g << 1) | (from[i].who & 1);
            to[count[(key >> shift) & 2047]++] = from[i];
        }
        model_event_t *t = from;
        from = to;
        to   = t;
    }
    if (from != v) {   /* three passes: the result is in sorted[]; swap the buffers */
        model_event_t *t = m->buf.run;
        size_t cap = m->buf.run_cap;
        m->buf.run        = m->buf.sorted;
        m->buf.run_cap    = m->buf.sorted_cap;
        m->buf.sorted     = t;
        m->buf.sorted_cap = cap;
    }
}

static void queue_push(model_sim_t *m, double t, uint32_t g, int rank, int type)
{
    model_event_t ev = {time_key(t), g, ((uint32_t)rank << 1) | (uint32_t)type};
    if (ev.t < m->now) {
        fold_error("model: an event at %g us queued at %g us (a bug in the simulation)", t,
                   key_time(m->now));
        m->status = FOLD_ERR_INVALID_ARG;
        return;
    }
    if (ev.t == m->now) {
        heap_insert(m, ev);
    } else {
        bucket_add(m, ev);
    }
    m->nevents++;
}

static model_event_t heap_pop(model_sim_t *m);

/* Once the current time's events are all out: the next time's, sorted, into the
 * run (many events share a time: the same step of many ranks). */
static void queue_refill(model_sim_t *m)
{
    if (m->nheap > 0 || m->run_at < m->nrun || m->nevents == 0) {
        return;
    }
    int b = 0;
    while (m->nbucket[b] == 0) {
        b++;
    }
    model_event_t *v = m->buf.bucket[b];
    size_t n = m->nbucket[b];
    uint64_t least = v[0].t;
    for (size_t i = 1; i < n; i++) {
        least = v[i].t < least ? v[i].t : least;
    }
    m->now        = least;
    m->nbucket[b] = 0;
    m->nrun = m->run_at = 0;
    /* Each goes to a lower bucket: it shares bit b and above with the new time. */
    for (size_t i = 0; i < n; i++) {
        if (v[i].t != least) {
            bucket_add(m, v[i]);
        } else if (grow_cap((void **)&m->buf.run, &m->buf.run_cap, m->nrun + 1,
                            sizeof(*m->buf.run)) == FOLD_OK) {
            m->buf.run[m->nrun++] = v[i];
        } else {
            m->status = FOLD_ERR_NO_MEMORY;
        }
    }
    if (m->nrun > 1) {
        run_sort(m);
    }
}

/* The run's head or the heap's, whichever comes first. */
static const model_event_t *queue_top(model_sim_t *m)
{
    queue_refill(m);
    const model_event_t *r = m->run_at < m->nrun ? &m->buf.run[m->run_at] : NULL;
    const model_event_t *h = m->nheap > 0 ? &m->buf.heap[0] : NULL;
    return r == NULL ? h : h == NULL ? r : ev_before(h, r) ? h : r;
}

static model_event_t queue_pop(model_sim_t *m)
{
    const model_event_t *top = queue_top(m);
    m->nevents--;
    if (m->nheap > 0 && top == &m->buf.heap[0]) {
        return heap_pop(m);
    }
    return m->buf.run[m->run_at++];
}

static model_event_t heap_pop(model_sim_t *m)
{
    model_event_t top = m->buf.heap[0], last = m->buf.heap[--m->nheap];
    size_t i = 0, n = m->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) {
            break;
        }
        if (c + 1 < n && ev_before(&m->buf.heap[c + 1], &m->buf.heap[c])) {
            c++;
        }
        if (!ev_before(&m->buf.heap[c], &last)) {
            break;
        }
        m->buf.heap[i] = m->buf.heap[c];
        i = c;
    }
    if (n > 0) {
        m->buf.heap[i] = last;
    }
    return top;
}

static double max2(double a, double b)
{
    return a > b ? a : b;
}

static double min2(double a, double b)
{
    return a < b ? a : b;
}

/* Step g of `rank` is done at t: its successors may become ready. */
static void sim_complete(model_sim_t *m, int rank, uint32_t g, double t)
{
    model_step_t *st = &m->steps[g];
    const uint32_t *succ = m->prog->succ + st->succ_off;
    st->state  = STEP_DONE;
    st->t_done = t;
    m->ndone++;
    for (uint32_t k = 0; k < st->nsucc; k++) {
        model_step_t *next = &m->steps[succ[k]];
        next->t_post = max2(next->t_post, t);
        if (--next->npred == 0) {
            queue_push(m, next->t_post, succ[k], rank, EV_READY);
        }
    }
}

/* ---- messages ---- */

/* Send sg of rank src has arrived at t; its receive completes if it is posted. */
static void sim_arrive(model_sim_t *m, int src, uint32_t sg, double t)
{
    const model_step_t *send = &m->steps[sg];
    uint32_t rg = send->link;
    int dst = send->peer;
    sim_complete(m, src, sg, t);
    if (m->steps[rg].state == STEP_POSTED) {
        sim_complete(m, dst, rg, max2(m->steps[rg].t_post, t));
    }
}

/* The data of send sg may start moving at t: it claims its channels in time order. */
static void sim_transfer(model_sim_t *m, int src, uint32_t sg, double t)
{
    queue_push(m, t, sg, src, EV_XFER);
}

static double *earliest_link(double *links, int n)
{
    double *best = links;
    for (int i = 1; i < n; i++) {
        if (links[i] < *best) {
            best = &links[i];
        }
    }
    return best;
}

/* A message ready to move at t: between nodes it takes the earliest free link at
 * each end, within a node the sender's outbound and the receiver's inbound channel.
 * Those are busy while the bytes go through; the latency overlaps the next message. */
static void sim_xfer(model_sim_t *m, int src, uint32_t sg, double t)
{
    const model_step_t *st = &m->steps[sg];
    const int *node_of = m->topo->node_of;
    const size_t nics = (size_t)m->p->nics;
    double *out, *in, lat, per_byte;
    const int local = node_of[src] == node_of[st->peer] && !(st->shm_access & MSG_REMOTE);
    if (local) {
        out      = &m->chans[2 * (size_t)src];
        in       = &m->chans[2 * (size_t)st->peer + 1];
        lat      = m->p->intra_lat_us;
        per_byte = m->intra_us;
    } else {
        out      = earliest_link(m->links + (size_t)node_of[src] * 2 * nics, (int)nics);
        in       = earliest_link(m->links + ((size_t)node_of[st->peer] * 2 + 1) * nics,
                                 (int)nics);
        lat      = m->p->inter_lat_us;
        per_byte = m->inter_us;
    }
    double start = max2(t, max2(*out, *in));
    if (local) {
        /* A core of the node moves the bytes (the receiver's, with single copy or out
         * of the transport's FIFO): at most at the node's copy rate for this working
         * set, and that core does nothing else meanwhile. Out of cache the message is
         * the kernel's single copy or two copies through shared memory, whichever the
         * transport makes cheaper: an MPI library's 32-64 MiB allreduce on 2 ranks
         * took 2.2-2.4x the time the plain copy rate gave it, and the shim left those
         * sizes to it. */
        const double through_memory = min2(m->kernel_us[node_of[src]],
                                           2 * m->copy_us[st->peer]);
        per_byte = max2(max2(per_byte, m->shm_us), max2(m->copy_us[st->peer], through_memory));
        start    = max2(start, m->cpu[st->peer]);
    }
    double busy  = (double)st->amount * per_byte;
    *out = *in = start + busy;
    if (local) {
        m->cpu[st->peer] = start + busy;
    }
    sim_arrive(m, src, sg, start + lat + busy);
}

static int is_eager(const model_sim_t *m, const model_step_t *st)
{
    return (double)st->amount <= m->p->eager_bytes;
}

static void sim_send_posted(model_sim_t *m, int rank, uint32_t g, double t)
{
    const model_step_t *st = &m->steps[g], *recv = &m->steps[st->link];
    if (is_eager(m, st)) {
        sim_transfer(m, rank, g, t);
    } else if (recv->state == STEP_POSTED) {
        sim_transfer(m, rank, g, max2(t, recv->t_post));
    }
}

static void sim_recv_posted(model_sim_t *m, int rank, uint32_t g, double t)
{
    const model_step_t *st = &m->steps[g], *send = &m->steps[st->link];
    if (send->state == STEP_DONE) {
        sim_complete(m, rank, g, max2(t, send->t_done));   /* already arrived */
    } else if (!is_eager(m, st) && send->state == STEP_POSTED) {
        sim_transfer(m, st->peer, st->link, max2(t, send->t_post));   /* the sender waits */
    }
}

/* ---- shm flags ---- */

static flag_log_t *flag_of(model_sim_t *m, int rank, int flag)
{
    return &m->flags[(size_t)rank * FOLD_SHM_NFLAGS + (size_t)flag];
}

/* When the flag first reached v, or -1 if it has not (yet). */
static double flag_reached(const flag_log_t *f, uint64_t v)
{
    size_t a = 0, z = f->n;
    while (a < z) {
        size_t mid = (a + z) / 2;
        if (f->v[mid] < v) {
            a = mid + 1;
        } else {
            z = mid;
        }
    }
    return a < f->n ? f->t[a] : -1.0;
}

/* One flag that wait g still needs is there at t. */
static void wait_met(model_sim_t *m, int rank, uint32_t g, double t)
{
    model_step_t *st = &m->steps[g];
    st->t_done = max2(st->t_done, t + m->p->flag_us);
    if (--st->link == 0) {
        sim_complete(m, rank, g, st->t_done);
    }
}

static void flag_post(model_sim_t *m, int rank, int flag, uint64_t value, double t)
{
    flag_log_t *f = flag_of(m, rank, flag);
    size_t cap = f->cap;
    /* Most flags are posted a few times: thousands of them, so start small. */
    if (grow_small((void **)&f->t, &cap, f->n + 1, sizeof(double)) != FOLD_OK ||
        grow_small((void **)&f->v, &f->cap, f->n + 1, sizeof(uint64_t)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    uint64_t v = (f->n > 0 && f->v[f->n - 1] > value) ? f->v[f->n - 1] : value;
    f->t[f->n]   = t;
    f->v[f->n++] = v;
    for (uint32_t *at = &f->waiters; *at != MODEL_NONE;) {
        flag_waiter_t *w = &m->pool[*at];
        if (w->value > v) {
            at = &w->next;
            continue;
        }
        *at = w->next;   /* unlinked; pool entries are not reused */
        wait_met(m, w->rank, w->g, t);
    }
}

static void flag_park(model_sim_t *m, int owner, int flag, uint64_t value, int rank, uint32_t g)
{
    if (grow_cap((void **)&m->pool, &m->pool_cap, m->npool + 1, sizeof(*m->pool)) != FOLD_OK) {
        m->status = FOLD_ERR_NO_MEMORY;
        return;
    }
    flag_log_t *f = flag_of(m, owner, flag);
    m->pool[m->npool] = (flag_waiter_t){value, g, rank, f->waiters};
    f->waiters = (uint32_t)m->npool++;
}

/* Wait g of `rank` was posted at t: done once every flag it names is there. */
static void sim_wait_posted(model_sim_t *m, int rank, uint32_t g, double t)
{
    model_step_t *st = &m->steps[g];
    const fold_topo_t *topo = m->topo;
    int node = topo->node_of[rank], me = topo->local_of[rank];
    int lo = st->peer >= 0 ? st->peer : 0;
    int hi = st->peer >= 0 ? st->peer + 1 : fold_topo_ppn(topo, node);
    uint32_t left = 0;

    st->t_done = t;
    if (st->amount == 0) {   /* the previous call's end: a single call never waits */
        sim_complete(m, rank, g, t);
        return;
    }
    for (int l = lo; l < hi; l++) {
        if (st->peer < 0 && l == me) {
            continue;
        }
        int owner = fold_topo_rank(topo, node, l);
        double at = flag_reached(flag_of(m, owner, st->flag), st->amount);
        if (at >= 0) {
            st->t_done = max2(st->t_done, at + m->p->flag_us);
        } else {
            flag_park(m, owner, st->flag, st->amount, rank, g);
            left++;
        }
    }
    st->link = left;
    if (left == 0) {
        sim_complete(m, rank, g, st->t_done);
    }
}

/* ---- the CPU ---- */

/* n rows folded through an accumulator in L1: in the cache the work of n - 1
 * reductions; from memory n rows read and one result written, where n - 1
 * reductions of their own stream three times as many bytes. From the segment, at
 * most the rate of n - 1 reductions from it (local_cost). */
static double rows_cost(const model_sim_t *m, int rank, const model_step_t *st)
{
    double n = st->link, row = (double)st->amount;
    double cost = row * ((n - 1) * m->fold_cache_us[rank] + (n + 1) * m->stream_mem_us[rank]);
    if (st->shm_access) {
        cost = max2(cost, (n - 1) * row * ((st->shm_access & SHM_WRITES) != 0
                                               ? m->shm_reduce_us : m->fold_us[rank]));
    }
    return move_cost(m->p->move_us, row) + cost;
}

static double local_cost(const model_sim_t *m, int rank, const model_step_t *st)
{
    int node = m->topo->node_of[rank];
    double per_byte;
    switch (st->kind) {
    case FOLD_STEP_COPY:   per_byte = m->copy_us[rank]; break;
    case FOLD_STEP_REDUCE: per_byte = m->reduce_us[rank]; break;
    case FOLD_STEP_REDUCE_ROWS: return rows_cost(m, rank, st);
    case FOLD_STEP_PEER_READ:
    case FOLD_STEP_PEER_WRITE:
        if ((st->shm_access & PEER_VIEW) != 0 && m->p->peer_views > 0) {
            return 0;   /* the reduction reads the bytes through the mapping */
        }
        /* The kernel pins the pages and copies on this rank's CPU. */
        return m->p->cma_us + (double)st->amount * m->kernel_us[node];
    default:               return 0;
    }
    /* The segment's lines cross between the cores: data another core wrote comes
     * through the cache-coherence fabric, and a line another core read last is
     * fetched for ownership before it is written. Each kind of step that touches
     * the segment moves at most at the cores probe's rate for it: a copy out of it
     * at shm_gbs, into it at shm_write_gbs (with the cores apart the two differ
     * most), a reduction into it at shm_reduce_gbs, and a reduction out of it into
     * the rank's own buffer at fold_us (shm_fold_gbs .. shm_fold_far_gbs, by what the
     * writers of the rows touch). Costing every reduction that read the segment at
     * shm_reduce_gbs makes shm_flat's root look much slower than it runs (2 ranks,
     * cores apart); costing the folds at the copy rate makes it look faster than
     * dpml from 512 KiB, where it is slower with the cores sharing an L3. */
    if (st->kind == FOLD_STEP_REDUCE && st->shm_access) {
        per_byte = max2(per_byte, (st->shm_access & SHM_WRITES) != 0 ? m->shm_reduce_us
                                                                    : m->fold_us[rank]);
    } else if (st->shm_access) {
        per_byte = max2(per_byte, (st->shm_access & SHM_READS) != 0 ? m->shm_us : 0);
        per_byte = max2(per_byte, (st->shm_access & SHM_WRITES) != 0 ? m->shm_write_us : 0);
    }
    return move_cost(m->p->move_us, (double)st->amount) + (double)st->amount * per_byte;
}

/* Step g of `rank` is ready at t: it takes the CPU when the CPU is free. */
static void sim_ready(model_sim_t *m, int rank, uint32_t g, double t)
{
    model_step_t *st = &m->steps[g];
    if (m->cpu_left != NULL) {
        m->cpu_left[rank] -= step_cpu_floor(&m->floor, st);
    }
    if (st->kind == FOLD_STEP_SHM_POST) {
        /* The executor runs a post the moment it is ready, between whatever else
         * it runs (exec.c, step_ready): it does not wait for the CPU. */
        double end = t + m->p->step_us;
        st->t_post = end;
        st->state  = STEP_POSTED;
        flag_post(m, rank, st->flag, st->amount, end);
        sim_complete(m, rank, g, end);
        return;
    }
    double start = max2(t, m->cpu[rank]);
    double end   = start + m->p->step_us + local_cost(m, rank, st);
    m->cpu[rank] = end;
    st->t_post   = end;
    st->state    = STEP_POSTED;
    switch (st->kind) {
    case FOLD_STEP_SEND:
        sim_send_posted(m, rank, g, end);
        break;
    case FOLD_STEP_RECV:
        sim_recv_posted(m, rank, g, end);
        break;
    case FOLD_STEP_SHM_WAIT:
        sim_wait_posted(m, rank, g, end);
        break;
    default:
        sim_complete(m, rank, g, end);
    }
}

/* The share of a working set's bytes that come from memory: none up to half the
 * cache, all from twice its size, linear between. A working set near the cache's
 * size does not stay in it whole: other data competes for it, a victim cache (AMD's
 * L3, Intel's since Skylake-SP) only holds what the L2s evicted, and a stream
 * cycling through more than an LRU-like cache misses on every line. But it does not
 * all miss either: the L2s hold their share, and replacement is not LRU. memcpy
 * over working sets of half, three quarters and all of an L3 runs at the in-cache
 * rate, a quarter of the way and less than half of the way to the memory rate, and
 * a reduce touching three times the cache still well short of it. Ending the ramp
 * at the cache's size makes the model take single copy for such a reduce at half
 * the node segment pipeline's speed. */
static double miss_fraction(double working_set, double cache_bytes)
{
    double fill = working_set / cache_bytes;
    return fill <= 0.5 ? 0 : fill >= 2 ? 1 : (fill - 0.5) / 1.5;
}

/* The time per byte of a fold from the segment into a rank's own buffer, where the
 * other ranks of its node, whose rows it reads, each touch at most `theirs` bytes
 * of their own: the cores probe's rate for 64 KiB rows (the other side touching
 * 128 KiB) up to that, its rate for 1 MiB rows (2 MiB) from that on, and between
 * the two linearly in the logarithm of the size. The more the writers touch, the
 * fewer of the rows' lines are still in their L2s. With the cores sharing an L3 this
 * follows shm_flat's folds within a few percent from 64 KiB to 1 MiB, for allreduces
 * and for reduces, whose other rank touches only its input. */
static double fold_us_for(const fold_model_params_t *p, double theirs)
{
    const double near = 128.0 * 1024, far = 2048.0 * 1024;
    double f = theirs <= near ? 0
             : theirs >= far  ? 1 : log2(theirs / near) / log2(far / near);
    return (1 - f) / (p->shm_fold_gbs * 1e3) + f / (p->shm_fold_far_gbs * 1e3);
}

void fold_model_rank_rates(const fold_model_params_t *p, int ppn, double node_ws, double priv,
                           double theirs, fold_model_rates_t *r)
{
    double share = p->node_mem_gbs / ppn;
    double copy_mem   = p->copy_mem_gbs < share ? p->copy_mem_gbs : share;
    double reduce_mem = p->reduce_mem_gbs < share ? p->reduce_mem_gbs : share;
    double miss = miss_fraction(node_ws, p->cache_bytes);
    double near = p->l2_bytes > 0 ? 1 - miss_fraction(priv, p->l2_bytes) : 0;
    double copy = near / (p->copy_l2_gbs * 1e3) + (1 - near) / (p->copy_gbs * 1e3);
    double reduce = near / (p->reduce_l2_gbs * 1e3) + (1 - near) / (p->reduce_gbs * 1e3);
    r->copy       = (1 - miss) * copy + miss / (copy_mem * 1e3);
    r->reduce     = (1 - miss) * reduce + miss / (reduce_mem * 1e3);
    r->fold_cache = (1 - miss) * reduce;
    r->stream_mem = miss / (copy_mem * 1e3) / 2;
    r->fold       = fold_us_for(p, theirs);
    /* Out of cache the kernel's rate is cma_mem_gbs, slowed further where the
     * node's share of memory is below one core's copy rate. */
    double in_cache = 1.0 / (p->cma_gbs * 1e3);
    double memory = 1.0 / (p->cma_mem_gbs * 1e3) + (1.0 / (copy_mem * 1e3) -
                                                    1.0 / (p->copy_mem_gbs * 1e3));
    r->kernel = (1 - miss) * in_cache + miss * max2(in_cache, memory);
}

/* Copy and reduce rates per node, from its working set (see the top). */
static void sim_rates(model_sim_t *m)
{
    const fold_model_params_t *p = m->p;
    const fold_topo_t *topo = m->topo;
    for (int n = 0; n < topo->nnodes; n++) {
        int ppn = fold_topo_ppn(topo, n);
        double ws = 0, shm = 0, top[2] = {0, 0};   /* the two largest ranks' bytes */
        for (int l = 0; l < ppn; l++) {
            int r = fold_topo_rank(topo, n, l);
            double priv = m->prog->priv_bytes[r];
            ws += priv;
            shm = max2(shm, m->prog->shm_bytes[r]);
            top[1] = max2(top[1], priv < top[0] ? priv : top[0]);
            top[0] = max2(top[0], priv);
        }
        for (int l = 0; l < ppn; l++) {
            int r = fold_topo_rank(topo, n, l);
            double priv = m->prog->priv_bytes[r];
            fold_model_rates_t rates;
            fold_model_rank_rates(p, ppn, ws + shm, priv, priv == top[0] ? top[1] : top[0],
                                  &rates);
            m->fold_us[r]       = rates.fold;
            m->copy_us[r]       = rates.copy;
            m->reduce_us[r]     = rates.reduce;
            m->fold_cache_us[r] = rates.fold_cache;
            m->stream_mem_us[r] = rates.stream_mem;
            m->kernel_us[n]     = rates.kernel;
        }
    }
    m->intra_us = 1.0 / (p->intra_gbs * 1e3);
    m->shm_us   = 1.0 / (p->shm_gbs * 1e3);
    m->shm_write_us = 1.0 / (p->shm_write_gbs * 1e3);
    m->shm_reduce_us = 1.0 / (p->shm_reduce_gbs * 1e3);
    m->inter_us = 1.0 / (p->inter_gbs * 1e3);
}

static void sim_free(model_sim_t *m)
{
    free(m->cpu);
    free(m->links);
    free(m->chans);
    free(m->copy_us);
    free(m->reduce_us);
    free(m->fold_cache_us);
    free(m->stream_mem_us);
    free(m->kernel_us);
    free(m->fold_us);
    for (size_t i = 0; m->flags != NULL && i < (size_t)m->prog->size * FOLD_SHM_NFLAGS; i++) {
        free(m->flags[i].t);
        free(m->flags[i].v);
    }
    free(m->flags);
    free(m->pool);
    event_bufs_free(&m->buf);
}

static int sim_init(model_sim_t *m, const fold_model_params_t *p, const fold_topo_t *topo,
                    model_prog_t *pg)
{
    size_t size = (size_t)pg->size, nodes = (size_t)topo->nnodes;
    memset(m, 0, sizeof(*m));
    m->p         = p;
    m->topo      = topo;
    m->prog      = pg;
    m->steps     = pg->steps;
    m->cpu       = calloc(size, sizeof(double));
    m->links     = calloc(nodes * 2 * (size_t)p->nics, sizeof(double));
    m->chans     = calloc(size * 2, sizeof(double));
    m->copy_us   = calloc(size, sizeof(double));
    m->reduce_us = calloc(size, sizeof(double));
    m->fold_cache_us = calloc(size, sizeof(double));
    m->stream_mem_us = calloc(size, sizeof(double));
    m->kernel_us = calloc(nodes, sizeof(double));
    m->fold_us   = calloc(size, sizeof(double));
    m->flags     = calloc(size * FOLD_SHM_NFLAGS, sizeof(flag_log_t));
    if (m->cpu == NULL || m->links == NULL || m->chans == NULL || m->copy_us == NULL ||
        m->reduce_us == NULL || m->kernel_us == NULL || m->fold_us == NULL ||
        m->fold_cache_us == NULL || m->stream_mem_us == NULL ||
        m->flags == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < size * FOLD_SHM_NFLAGS; i++) {
        m->flags[i].waiters = MODEL_NONE;
    }
    sim_rates(m);
    return FOLD_OK;
}

/* A step that never completed, logged: one that started if any (it waits for a
 * message or flag that never comes), else the first (a cycle). */
static int sim_stuck(const model_sim_t *m)
{
    const model_prog_t *pg = m->prog;
    int rank = -1, first_rank = -1;
    size_t at = 0, first = 0;
    for (int r = 0; r < pg->size && rank < 0; r++) {
        for (size_t g = pg->base[r]; g < pg->base[r + 1]; g++) {
            if (pg->steps[g].state == STEP_POSTED) {
                rank = r;
                at   = g;
                break;
            }
            if (pg->steps[g].state == STEP_WAITING && first_rank < 0) {
                first_rank = r;
                first      = g;
            }
        }
    }
    char what[160];
    if (rank >= 0) {
        describe_step(pg, rank, at, what, sizeof(what));
        fold_error("model: %s never completes (%zu of %zu steps ran): the ranks' schedules "
                   "do not match", what, m->ndone, pg->nsteps);
    } else {
        describe_step(pg, first_rank, first, what, sizeof(what));
        fold_error("model: %s never becomes ready (%zu of %zu steps ran): a cycle of "
                   "dependencies across ranks", what, m->ndone, pg->nsteps);
    }
    return FOLD_ERR_INVALID_ARG;
}

/* Whether no step of pg is priced by the kernel's or a mapping's copies. */
static int kernel_free(const model_prog_t *pg, const fold_topo_t *topo)
{
    for (size_t g = 0; g < pg->nsteps; g++) {
        const model_step_t *st = &pg->steps[g];
        if (st->kind == FOLD_STEP_PEER_READ || st->kind == FOLD_STEP_PEER_WRITE ||
            (st->kind == FOLD_STEP_SEND && !(st->shm_access & MSG_REMOTE) &&
             topo->node_of[st->peer] == topo->node_of[pg->steps[st->link].peer])) {
            return 0;
        }
    }
    return 1;
}

static void sim_result(const model_sim_t *m, fold_model_result_t *res)
{
    const model_prog_t *pg = m->prog;
    double last = 0, last_out = 0;
    int all_out = 1, any_out = 0;
    for (int r = 0; r < pg->size; r++) {
        double finish = 0;
        for (size_t g = pg->base[r]; g < pg->base[r + 1]; g++) {
            finish = max2(finish, pg->steps[g].t_done);
        }
        last = max2(last, finish);
        if (pg->has_out[r]) {
            last_out = max2(last_out, finish);
            any_out  = 1;
        } else {
            all_out = 0;
        }
    }
    res->time_us = last;
    res->root_us = (!all_out && any_out) ? last_out : last;
    res->steps   = pg->nsteps;
}

/* A finalized schedule kept for the ranks of its shape (fold_sched_same_shape). */
typedef struct shape_rep {
    uint64_t     hash;
    fold_sched_t sched;     /* steps, successors and operands only */
    size_t       steps_cap, succ_cap, ops_cap;
} shape_rep_t;

/* Shapes kept per prediction, and their steps at most (26 MB): a whole node's ranks
 * of a node-aware algorithm, for the nodes after it. */
#define SHAPE_REPS      512
#define SHAPE_REP_STEPS (1u << 18)

/* One schedule and the finalisation's working memory, reused rank after rank, and
 * the shapes finalized so far. */
typedef struct build_space {
    fold_sched_t          s;
    fold_sched_scratch_t *scratch;   /* NULL: fold_sched_finalize's own */
    shape_rep_t          *reps;
    size_t                nreps, reps_cap, rep_steps;
    size_t                hits, keep_until;   /* no hit after keep_until shapes: stop
                                                 keeping them (every rank its own) */
} build_space_t;

static void build_space_free(build_space_t *b)
{
    fold_sched_cleanup(&b->s);
    fold_sched_scratch_free(b->scratch);
    for (size_t i = 0; i < b->reps_cap; i++) {
        free(b->reps[i].sched.steps);
        free(b->reps[i].sched.succ);
        free(b->reps[i].sched.ops);
    }
    free(b->reps);
    memset(b, 0, sizeof(*b));
}

static const fold_sched_t *shape_find(const build_space_t *b, const fold_sched_t *s,
                                      uint64_t hash)
{
    for (size_t i = b->nreps; i-- > 0;) {   /* the latest most likely */
        if (b->reps[i].hash == hash && fold_sched_same_shape(&b->reps[i].sched, s)) {
            return &b->reps[i].sched;
        }
    }
    return NULL;
}

/* Keeps finalized s as its shape's representative, if there is room. */
static void shape_keep(build_space_t *b, const fold_sched_t *s, uint64_t hash)
{
    if (b->nreps == SHAPE_REPS || b->rep_steps + s->nsteps > SHAPE_REP_STEPS ||
        (b->hits == 0 && b->nreps >= b->keep_until)) {
        return;
    }
    if (b->nreps == b->reps_cap) {
        size_t cap = b->reps_cap ? 2 * b->reps_cap : 16;
        shape_rep_t *reps = realloc(b->reps, cap * sizeof(*reps));
        if (reps == NULL) {
            return;
        }
        memset(reps + b->reps_cap, 0, (cap - b->reps_cap) * sizeof(*reps));
        b->reps     = reps;
        b->reps_cap = cap;
    }
    shape_rep_t *r = &b->reps[b->nreps];
    if (grow_cap((void **)&r->sched.steps, &r->steps_cap, s->nsteps ? s->nsteps : 1,
                 sizeof(*s->steps)) != FOLD_OK ||
        grow_cap((void **)&r->sched.succ, &r->succ_cap, s->nsucc ? s->nsucc : 1,
                 sizeof(*s->succ)) != FOLD_OK ||
        grow_cap((void **)&r->sched.ops, &r->ops_cap, s->nops ? s->nops : 1,
                 sizeof(*s->ops)) != FOLD_OK) {
        return;
    }
    memcpy(r->sched.steps, s->steps, s->nsteps * sizeof(*s->steps));
    memcpy(r->sched.succ, s->succ, s->nsucc * sizeof(*s->succ));
    if (s->nops > 0) {
        memcpy(r->sched.ops, s->ops, s->nops * sizeof(*s->ops));
    }
    r->sched.nsteps  = s->nsteps;
    r->sched.nsucc   = s->nsucc;
    r->sched.nops    = s->nops;
    r->sched.inplace = s->inplace;
    r->sched.uses_tl = s->uses_tl;
    r->sched.status  = FOLD_OK;
    r->hash          = hash;
    b->rep_steps    += s->nsteps;
    b->nreps++;
}

/* Memory kept from one prediction to the next (model.h): the largest buffers, which
 * would otherwise be mapped, faulted in and unmapped every time. */
struct fold_model_space {
    build_space_t  build;
    model_step_t  *steps;
    size_t         steps_cap;
    uint32_t      *succ;
    size_t         succ_cap;
    event_bufs_t   buf;
};

fold_model_space_t *fold_model_space_new(void)
{
    fold_model_space_t *x = calloc(1, sizeof(*x));
    if (x != NULL && (x->build.scratch = fold_sched_scratch_new()) == NULL) {
        free(x);
        x = NULL;
    }
    return x;
}

void fold_model_space_free(fold_model_space_t *x)
{
    if (x != NULL) {
        build_space_free(&x->build);
        free(x->steps);
        free(x->succ);
        event_bufs_free(&x->buf);
        free(x);
    }
}

/* Trades the event queue's buffers between a simulation and the space: lent at
 * model_run's start, given back by sim_release (a swap is its own inverse). */
static void swap_queue_buffers(fold_model_space_t *space, model_sim_t *m)
{
    event_bufs_t lent = space->buf;
    space->buf = m->buf;
    m->buf     = lent;
}

/* sim_free, the heap going back to the space if there is one. */
static void sim_release(model_sim_t *m, fold_model_space_t *space)
{
    if (space != NULL) {   /* what the space had is NULL now: sim_free frees nothing */
        swap_queue_buffers(space, m);
    }
    sim_free(m);
}

/* Where one rank's step end times go (fold_model_predict_steps); NULL: nowhere. */
typedef struct rank_steps {
    int     rank;
    double *done;
    size_t  cap;
    size_t *nsteps;
} rank_steps_t;

static void rank_steps_fill(const model_prog_t *pg, const rank_steps_t *out)
{
    if (out == NULL || out->rank < 0 || out->rank >= pg->size) {
        return;
    }
    size_t n = pg->base[out->rank + 1] - pg->base[out->rank];
    for (size_t i = 0; i < n && i < out->cap; i++) {
        out->done[i] = pg->steps[pg->base[out->rank] + i].t_done;
    }
    *out->nsteps = n;
}

/* Matches the messages and runs the simulation over a complete program; stops at
 * the first event at or after cutoff (res->cut). */
static int model_run(const fold_model_params_t *p, const fold_topo_t *topo, model_prog_t *pg,
                     int matched, const rank_steps_t *out, double cutoff,
                     fold_model_space_t *space, fold_model_result_t *res)
{
    int status = prog_check(pg, topo);
    if (status == FOLD_OK && !matched) {
        status = prog_match(pg);
    }
    if (status != FOLD_OK) {
        return status;
    }
    model_sim_t m;
    status = sim_init(&m, p, topo, pg);
    if (space != NULL) {   /* sim_release gives them back */
        swap_queue_buffers(space, &m);
    }
    for (int r = 0; r < pg->size && status == FOLD_OK; r++) {
        for (size_t g = pg->base[r]; g < pg->base[r + 1]; g++) {
            if (pg->steps[g].npred == 0) {
                queue_seed(&m, (uint32_t)g, r);
            }
        }
    }
    res->cut         = 0;
    res->one_node    = 0;
    res->kernel_free = kernel_free(pg, topo);
    m.cpu_left = cutoff < INFINITY ? pg->cpu_left : NULL;
    m.floor    = cpu_floor_of(p);
    for (size_t n = 0; status == FOLD_OK && m.status == FOLD_OK && m.nevents > 0; n++) {
        const model_event_t *top = queue_top(&m);
        double least = top != NULL ? key_time(top->t) : 0;
        if (m.cpu_left != NULL && top != NULL && (n & 1023) == 1023) {
            /* A rank's CPU still has its steps not started to run, from now or from
             * when it is free, whichever is later (a millionth off for rounding). */
            double now = least;
            for (int r = 0; r < pg->size; r++) {
                double left = (max2(m.cpu[r], now) + m.cpu_left[r]) * (1 - 1e-6);
                least = max2(least, left);
            }
        }
        if (top != NULL && least >= cutoff) {
            /* Every step still to complete ends at or after this event's time, and
             * every rank's CPU is busy at least that long. */
            res->time_us = res->root_us = least;
            res->steps   = pg->nsteps;
            res->cut     = 1;
            sim_release(&m, space);
            return FOLD_OK;
        }
        model_event_t ev = queue_pop(&m);
        int rank = (int)(ev.who >> 1);
        if (m.run_at < m.nrun) {
            __builtin_prefetch(&pg->steps[m.buf.run[m.run_at].g]);   /* most likely the next */
        }
        if ((ev.who & 1) == EV_READY) {
            sim_ready(&m, rank, ev.g, key_time(ev.t));
        } else {
            sim_xfer(&m, rank, ev.g, key_time(ev.t));
        }
    }
    if (status == FOLD_OK) {
        status = m.status;
    }
    if (status == FOLD_OK && m.ndone != pg->nsteps) {
        status = sim_stuck(&m);
    }
    if (status == FOLD_OK) {
        sim_result(&m, res);
        rank_steps_fill(pg, out);
    }
    sim_release(&m, space);
    return status;
}

/* Parameters a caller filled in directly get the checks fold_model_set makes. */
static int check_params(const fold_model_params_t *p)
{
    for (size_t i = 0; i < MODEL_NPARAMS; i++) {
        const model_param_t *mp = &model_params[i];
        const char *field = (const char *)p + mp->offset;
        double v = mp->kind == PARAM_LINKS ? *(const int *)field : *(const double *)field;
        int ok = mp->kind == PARAM_LINKS ? v >= 1 && v <= MODEL_MAX_NICS
               : mp->kind == PARAM_RATE  ? isfinite(v) && v > 0
                                         : isfinite(v) && v >= 0;
        if (!ok) {
            fold_error("model: parameter %s is %g, out of range", mp->name, v);
            return FOLD_ERR_INVALID_ARG;
        }
    }
    return FOLD_OK;
}

/* ---- entry points -------------------------------------------------------------- */

int fold_model_replay(const fold_model_params_t *p, const fold_topo_t *topo,
                      fold_sched_t *const *sched, size_t esize, fold_model_result_t *res)
{
    if (p == NULL || topo == NULL || sched == NULL || res == NULL || esize == 0 ||
        check_params(p) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    model_prog_t pg;
    int status = prog_init(&pg, topo->size);
    for (int r = 0; r < topo->size && status == FOLD_OK; r++) {
        status = prog_append(&pg, r, sched[r], esize);
    }
    if (status == FOLD_OK) {
        status = model_run(p, topo, &pg, 0, NULL, INFINITY, NULL, res);
    }
    prog_free(&pg);
    return status;
}

/* model_cost.h: the CPU part of each step, priced as sim_ready prices it. */
int fold_model_step_costs(const fold_model_params_t *p, const fold_topo_t *topo, int node,
                          fold_sched_t *const *sched, size_t esize, double ws_scale,
                          double *cost)
{
    if (p == NULL || topo == NULL || sched == NULL || cost == NULL || esize == 0 ||
        node < 0 || node >= topo->nnodes || check_params(p) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    const int ppn = fold_topo_ppn(topo, node);
    model_prog_t pg;
    int status = prog_init(&pg, topo->size);
    pg.ws_scale = ws_scale;
    for (int l = 0; l < ppn && status == FOLD_OK; l++) {
        status = prog_append(&pg, fold_topo_rank(topo, node, l), sched[l], esize);
    }
    model_sim_t m;
    const int simulated = status == FOLD_OK;
    if (simulated) {
        status = sim_init(&m, p, topo, &pg);
    }
    for (int l = 0, g = 0; l < ppn && status == FOLD_OK; l++) {
        const int r = fold_topo_rank(topo, node, l);
        for (size_t i = 0; i < sched[l]->nsteps; i++, g++) {
            const model_step_t *st = &pg.steps[g];
            cost[g] = p->step_us + (st->kind == FOLD_STEP_SHM_POST ? 0 : local_cost(&m, r, st));
        }
    }
    if (simulated) {
        sim_free(&m);
    }
    prog_free(&pg);
    return status;
}

/*
 * A lower bound of the simulated time from rank r's schedule alone: its CPU runs
 * every step but flag posts for step_us, copies and reductions also for their
 * bytes at no less than the faster of the in-cache and memory rates, one step at a
 * time. The sum is taken in the schedule's order, the simulation's in the order the
 * steps became ready, so the two may round differently: the bound gives up a
 * millionth, far more than the rounding of a million additions.
 */
static double cpu_bound(const fold_model_params_t *p, model_prog_t *pg, int r)
{
    cpu_floor_t f = cpu_floor_of(p);
    double t = 0;
    for (size_t g = pg->base[r]; g < pg->base[r + 1]; g++) {
        t = t + step_cpu_floor(&f, &pg->steps[g]);
    }
    if (pg->cpu_left != NULL) {
        pg->cpu_left[r] = t;
    }
    return t * (1 - 1e-6);
}

/* The build space of one prediction on topo: space's, or `own` made afresh (freed
 * by the caller where space is NULL); shapes are per prediction. */
static build_space_t *build_space_begin(fold_model_space_t *space, build_space_t *own,
                                        const fold_topo_t *topo)
{
    build_space_t *b = space != NULL ? &space->build : own;
    if (space == NULL) {
        memset(own, 0, sizeof(*own));
        own->scratch = fold_sched_scratch_new();
    }
    b->nreps      = 0;
    b->rep_steps  = 0;
    b->hits       = 0;
    b->keep_until = (size_t)topo->max_ppn + 1;   /* a node's ranks, and one more */
    return b;
}

/* Builds and finalizes rank r's schedule in b->s. */
static int build_one(const fold_topo_t *topo, const fold_model_query_t *q,
                     fold_alg_build_fn build, int r, build_space_t *b)
{
    fold_coll_args_t args = fold_model_rank_args(topo, q, r);
    fold_sched_t *s = &b->s;
    fold_sched_reset(s, &args);
    int status = build(&args, s);
    if (status == FOLD_OK && s->status == FOLD_OK) {
        uint64_t hash = fold_sched_shape_hash(s);
        const fold_sched_t *like = shape_find(b, s, hash);
        if (like != NULL) {
            b->hits++;
            status = fold_sched_finalize_like(s, like);
        } else {
            status = b->scratch != NULL ? fold_sched_finalize_with(s, b->scratch)
                                        : fold_sched_finalize(s);
            if (status == FOLD_OK) {
                shape_keep(b, s, hash);
            }
        }
    } else if (status == FOLD_OK) {
        status = s->status;
    }
    if (status != FOLD_OK) {
        fold_error("model: %s %s of %zu elements: building rank %d of %d failed: %s",
                   q->alg->name, fold_coll_name(args.coll), args.count, r, args.size,
                   fold_status_string(status));
    }
    return status;
}

/* Builds and finalizes rank r's schedule and appends it to the program, which is
 * to hold `ranks` ranks' schedules. */
static int build_rank(const fold_topo_t *topo, const fold_model_query_t *q,
                      fold_alg_build_fn build, int r, int ranks, build_space_t *b,
                      model_prog_t *pg)
{
    int status = build_one(topo, q, build, r, b);
    if (status == FOLD_OK) {
        status = prog_append(pg, r, &b->s, q->esize);
    }
    if (status == FOLD_OK && r == 0 && pg->nsteps > 0 &&
        pg->nsteps < MODEL_NONE / (size_t)ranks) {
        /* The other ranks' schedules are most likely about as long. */
        size_t steps = pg->nsteps * (size_t)ranks, succ = pg->nsucc * (size_t)ranks;
        if (succ < MODEL_NONE) {
            grow_cap((void **)&pg->steps, &pg->cap, steps, sizeof(*pg->steps));
            grow_cap((void **)&pg->succ, &pg->succ_cap, succ, sizeof(uint32_t));
        }
    }
    return status;
}

/* ---- node symmetry --------------------------------------------------------------- */

/*
 * On a communicator of equal nodes whose ranks are numbered node by node, many
 * schedules treat every node alike: a ring over nodes (each node's picture shifted
 * by one), recursive doubling over a power of two of them (each node's picture with
 * its partners' bits flipped), dpml with either between its leaders. Then every
 * node's ranks run through the same times, and one node's replay is all of them:
 * node 0's send to rank l' of node k stands, by the symmetry that takes node k to
 * node 0, for the send rank l of some node j makes to node 0's rank l' (j = N - k
 * for the shift, k for the flip), whose receive on node 0 it completes; it holds
 * node 0's outbound link, and its inbound one for node k's. The replay costs a
 * node's steps, whatever the nodes.
 *
 * Whether a question is symmetric follows from its schedules: node 0's are built,
 * and those of nodes 1, N / 2 and N - 1 for each local rank that talks to other
 * nodes (and the first and last): each must be the image of node 0's (steps,
 * sizes, dependencies, flags, and every peer moved by the symmetry). A schedule
 * that singles out a node (a tree's root, the extra ranks of recursive doubling
 * over a count that is not a power of two) fails it and is replayed whole.
 * fold_model_full_replay turns this off (the reference of test_model_symmetry).
 */
int fold_model_full_replay;


/* Nodes of equal size, ranks numbered node by node, the same leader order on every
 * node: what the images of a node need. */
static int topo_uniform(const fold_topo_t *t)
{
    if (t->nnodes < 2 || t->min_ppn != t->max_ppn) {
        return 0;
    }
    const int ppn = t->min_ppn;
    for (int r = 0; r < t->size; r++) {
        if (t->ranks[r] != r || t->leader_order[r] != t->leader_order[r % ppn]) {
            return 0;
        }
    }
    return 1;
}

/* Where the symmetry that takes node 0 to node k takes rank p. */
static int32_t sym_image(const fold_topo_t *t, int family, int k, int32_t p)
{
    const int ppn = t->min_ppn, n = p / ppn, l = p % ppn;
    const int to = family == FOLD_MODEL_SYM_FLIP ? n ^ k : (n + k) % t->nnodes;
    return (int32_t)(to * ppn + l);
}

/* Whether finalized schedule s (rank l of node k) is the image of node 0's rank l
 * in pg. */
static int sched_is_image(const model_prog_t *pg, const fold_topo_t *t, int family, int k,
                          int l, const fold_sched_t *s, size_t esize)
{
    const size_t base = pg->base[l];
    if (s->nsteps != pg->base[l + 1] - base) {
        return 0;
    }
    for (size_t i = 0; i < s->nsteps; i++) {
        const fold_step_t *st = &s->steps[i];
        const model_step_t *m = &pg->steps[base + i];
        const int shm = st->kind == FOLD_STEP_SHM_POST || st->kind == FOLD_STEP_SHM_WAIT;
        const uint64_t amount = shm ? st->value : (uint64_t)st->count * (uint64_t)esize;
        const uint32_t link = st->kind == FOLD_STEP_REDUCE_ROWS ? st->nops : st->seq;
        if (st->kind != m->kind || amount != m->amount || st->flag != m->flag ||
            st->npred != m->npred || st->nsucc != m->nsucc || link != m->link) {
            return 0;
        }
        int32_t peer = st->kind == FOLD_STEP_SHM_WAIT ? st->local : st->peer;
        int32_t want = st->kind == FOLD_STEP_SHM_WAIT ? m->peer
                     : (st->kind == FOLD_STEP_SEND || st->kind == FOLD_STEP_RECV ||
                        st->kind == FOLD_STEP_PEER_READ || st->kind == FOLD_STEP_PEER_WRITE)
                         ? sym_image(t, family, k, m->peer) : peer;
        if (peer != want) {
            return 0;
        }
        for (uint32_t e = 0; e < st->nsucc; e++) {
            if (s->succ[st->succ_off + e] != pg->succ[m->succ_off + e] - base) {
                return 0;
            }
        }
    }
    return 1;
}

/* Whether node 0's local rank l has messages to or from other nodes. */
static int talks_across(const model_prog_t *pg, const fold_topo_t *t, int l)
{
    for (size_t g = pg->base[l]; g < pg->base[l + 1]; g++) {
        const model_step_t *m = &pg->steps[g];
        if ((m->kind == FOLD_STEP_SEND || m->kind == FOLD_STEP_RECV) &&
            t->node_of[m->peer] != 0) {
            return 1;
        }
    }
    return 0;
}

/* Whether local rank l's schedule on the sampled nodes is node 0's (in pg) under
 * family. */
static int images_of(const fold_topo_t *t, const fold_model_query_t *q,
                     fold_alg_build_fn build, build_space_t *b, const model_prog_t *pg,
                     int family, int l)
{
    const int nn = t->nnodes, nodes[3] = {1, nn / 2, nn - 1};
    for (int i = 0; i < 3; i++) {
        const int k = nodes[i];
        if (k < 1 || (i > 0 && k == nodes[i - 1])) {
            continue;
        }
        if (build_one(t, q, build, k * t->min_ppn + l, b) != FOLD_OK ||
            !sched_is_image(pg, t, family, k, l, &b->s, q->esize)) {
            return 0;
        }
    }
    return 1;
}

/* The families the first local rank's schedules (node 0's in pg) allow: a tree's
 * root, say, is told apart before the rest of node 0 is built. */
static unsigned families_of_first(const fold_topo_t *t, const fold_model_query_t *q,
                                  fold_alg_build_fn build, build_space_t *b,
                                  const model_prog_t *pg)
{
    const int nn = t->nnodes;
    unsigned families = 0;
    if ((nn & (nn - 1)) == 0 && images_of(t, q, build, b, pg, FOLD_MODEL_SYM_FLIP, 0)) {
        families |= 1u << FOLD_MODEL_SYM_FLIP;
    }
    if (images_of(t, q, build, b, pg, FOLD_MODEL_SYM_SHIFT, 0)) {
        families |= 1u << FOLD_MODEL_SYM_SHIFT;
    }
    return families;
}

/* The symmetry among `families` (bits) under which every node's schedules are node
 * 0's (in pg), or FOLD_MODEL_SYM_NONE. */
static int node_symmetry(const fold_topo_t *t, const fold_model_query_t *q,
                         fold_alg_build_fn build, build_space_t *b, const model_prog_t *pg,
                         unsigned families)
{
    const int ppn = t->min_ppn;
    int any = 0;
    for (int l = 0; l < ppn && !any; l++) {
        any = talks_across(pg, t, l);
    }
    for (int f = FOLD_MODEL_SYM_FLIP; any && f <= FOLD_MODEL_SYM_SHIFT; f++) {
        int ok = (families >> f) & 1;
        for (int l = 1; l < ppn && ok; l++) {
            if (l == ppn - 1 || talks_across(pg, t, l)) {
                ok = images_of(t, q, build, b, pg, f, l);
            }
        }
        if (ok) {
            return f;
        }
    }
    return FOLD_MODEL_SYM_NONE;
}

/* A message of the one-node replay by what pairs it: receiver's and sender's local
 * ranks, the other node it stands for (0: none), and its number. */
typedef struct sym_msg {
    int32_t  to, from, node;
    uint32_t seq, g;
    uint32_t send;   /* a receive's send, once paired */
} sym_msg_t;

static int sym_msg_order(const void *a, const void *b)
{
    const sym_msg_t *x = a, *y = b;
    if (x->to != y->to) {
        return x->to < y->to ? -1 : 1;
    }
    if (x->from != y->from) {
        return x->from < y->from ? -1 : 1;
    }
    if (x->node != y->node) {
        return x->node < y->node ? -1 : 1;
    }
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Turns node 0's ranks in pg into the one-node replay of every node: each send is
 * paired with the receive on node 0 it stands for, peers become local ranks and
 * sends to other nodes are marked MSG_REMOTE. FOLD_ERR_INVALID_ARG where the
 * pairs do not come out one to one (then pg is as it was). */
static int sym_match(model_prog_t *pg, const fold_topo_t *t, int family)
{
    const int nn = t->nnodes, ppn = t->min_ppn;
    const size_t nsteps = pg->base[ppn];
    size_t nrecv = 0, nsend = 0;
    for (size_t g = 0; g < nsteps; g++) {
        nrecv += pg->steps[g].kind == FOLD_STEP_RECV;
        nsend += pg->steps[g].kind == FOLD_STEP_SEND;
    }
    if (nrecv != nsend) {
        return FOLD_ERR_INVALID_ARG;
    }
    sym_msg_t *recvs = malloc((nrecv + 1) * sizeof(*recvs));
    uint8_t *taken = calloc(nrecv + 1, 1);
    int status = recvs != NULL && taken != NULL ? FOLD_OK : FOLD_ERR_NO_MEMORY;
    size_t n = 0;
    for (int l = 0; l < ppn && status == FOLD_OK; l++) {
        for (size_t g = pg->base[l]; g < pg->base[l + 1]; g++) {
            const model_step_t *m = &pg->steps[g];
            if (m->kind == FOLD_STEP_RECV) {
                recvs[n++] = (sym_msg_t){l, m->peer % ppn, m->peer / ppn, m->link, (uint32_t)g, 0};
            }
        }
    }
    if (status == FOLD_OK) {
        qsort(recvs, n, sizeof(*recvs), sym_msg_order);
    }
    for (int l = 0; l < ppn && status == FOLD_OK; l++) {
        for (size_t g = pg->base[l]; g < pg->base[l + 1] && status == FOLD_OK; g++) {
            const model_step_t *m = &pg->steps[g];
            if (m->kind != FOLD_STEP_SEND) {
                continue;
            }
            const int k = m->peer / ppn;
            const int stands = k == 0 ? 0 : family == FOLD_MODEL_SYM_FLIP ? k : nn - k;
            sym_msg_t key = {m->peer % ppn, l, stands, m->link, 0, 0};
            sym_msg_t *r = bsearch(&key, recvs, n, sizeof(*recvs), sym_msg_order);
            if (r == NULL || taken[r - recvs] || pg->steps[r->g].amount != m->amount) {
                status = FOLD_ERR_INVALID_ARG;
            } else {
                taken[r - recvs] = 1;
                r->send = (uint32_t)g;
            }
        }
    }
    if (status == FOLD_OK) {
        for (size_t i = 0; i < n; i++) {
            model_step_t *recv = &pg->steps[recvs[i].g], *send = &pg->steps[recvs[i].send];
            const int remote = recvs[i].node != 0;
            recv->link = recvs[i].send;
            send->link = recvs[i].g;
            recv->peer = recvs[i].from;
            send->peer = recvs[i].to;
            send->shm_access |= remote ? MSG_REMOTE : 0;
        }
        pg->size   = ppn;
        pg->nsteps = nsteps;
    }
    free(recvs);
    free(taken);
    return status;
}

/* One node of ppn ranks: what a one-node replay simulates. */
static fold_topo_t *one_node_topo(int ppn)
{
    int *key = calloc((size_t)ppn, sizeof(int)), *pkg = malloc((size_t)ppn * sizeof(int));
    fold_topo_t *t = NULL;
    if (key != NULL && pkg != NULL) {
        for (int l = 0; l < ppn; l++) {
            pkg[l] = -1;
        }
        if (fold_topo_build(ppn, key, pkg, &t) != FOLD_OK) {
            t = NULL;
        }
    }
    free(key);
    free(pkg);
    return t;
}

static int predict(const fold_model_params_t *p, const fold_topo_t *topo,
                   const fold_model_query_t *q, const rank_steps_t *out, double cutoff,
                   fold_model_space_t *space, fold_model_result_t *res)
{
    if (p == NULL || topo == NULL || q == NULL || q->alg == NULL || res == NULL ||
        q->esize == 0 || check_params(p) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    fold_alg_build_fn build = fold_alg_builder(q->alg, q->proto.coll);
    if (build == NULL || (q->proto.size != 0 && q->proto.size != topo->size)) {
        fold_error("model: %s cannot predict %s on %d ranks (topology of %d)", q->alg->name,
                   fold_coll_name(q->proto.coll), q->proto.size, topo->size);
        return FOLD_ERR_INVALID_ARG;
    }
    model_prog_t pg;
    build_space_t own, *b = build_space_begin(space, &own, topo);
    int status = prog_init(&pg, topo->size), cut = 0;
    pg.ws_scale = q->ws_scale;
    if (space != NULL) {   /* prog_free gives them back */
        pg.steps = space->steps;
        pg.cap   = space->steps_cap;
        pg.succ  = space->succ;
        pg.succ_cap = space->succ_cap;
        space->steps = NULL;
        space->succ  = NULL;
    }
    if (status == FOLD_OK && cutoff < INFINITY &&
        (pg.cpu_left = calloc((size_t)topo->size, sizeof(double))) == NULL) {
        status = FOLD_ERR_NO_MEMORY;
    }
    /* With nodes alike, node 0's ranks first: they may be all there is to replay. */
    const int uniform = !fold_model_full_replay &&
                        q->symmetry != FOLD_MODEL_SYM_NONE && topo_uniform(topo);
    const int first = uniform ? topo->min_ppn : topo->size;
    int one_node = 0;
    unsigned families = q->symmetry != FOLD_MODEL_SYM_UNKNOWN ? 1u << q->symmetry : 0;
    for (int r = 0; r < topo->size && status == FOLD_OK && !cut && !one_node; r++) {
        status = build_rank(topo, q, build, r, uniform ? first : topo->size, b, &pg);
        double least = status == FOLD_OK && cutoff < INFINITY ? cpu_bound(p, &pg, r) : 0;
        if (least >= cutoff) {
            /* This rank alone keeps its CPU busy that long: no need to build the
             * others, let alone replay them. */
            *res = (fold_model_result_t){.time_us = least, .root_us = least, .cut = 1};
            cut  = 1;
        } else if (status == FOLD_OK && uniform && r == 0 && families == 0) {
            families = families_of_first(topo, q, build, b, &pg);
        }
        if (status == FOLD_OK && !cut && uniform && r == first - 1 &&
            (families & ~(1u << FOLD_MODEL_SYM_NONE)) != 0) {
            int family = q->symmetry != FOLD_MODEL_SYM_UNKNOWN
                             ? q->symmetry : node_symmetry(topo, q, build, b, &pg, families);
            one_node = family != FOLD_MODEL_SYM_NONE && sym_match(&pg, topo, family) == FOLD_OK;
        }
    }
    if (space == NULL) {
        build_space_free(&own);
    }
    fold_topo_t *node = one_node ? one_node_topo(topo->min_ppn) : NULL;
    if (one_node && node == NULL) {
        status = FOLD_ERR_NO_MEMORY;
    }
    if (status == FOLD_OK && !cut) {
        rank_steps_t at = out != NULL ? *out : (rank_steps_t){0};
        at.rank = out != NULL && one_node ? out->rank % topo->min_ppn : at.rank;
        status  = model_run(p, one_node ? node : topo, &pg, one_node, out ? &at : NULL,
                            cutoff, space, res);
        res->one_node = one_node;
    }
    fold_topo_free(node);
    if (space != NULL) {
        space->steps     = pg.steps;
        space->steps_cap = pg.cap;
        space->succ      = pg.succ;
        space->succ_cap  = pg.succ_cap;
        pg.steps = NULL;
        pg.succ  = NULL;
    }
    prog_free(&pg);
    return status;
}

size_t fold_model_rank_steps(const fold_topo_t *topo, const fold_model_query_t *q, int rank,
                             fold_model_space_t *space)
{
    fold_alg_build_fn build = q->alg ? fold_alg_builder(q->alg, q->proto.coll) : NULL;
    if (build == NULL || rank < 0 || rank >= topo->size) {
        return 0;
    }
    fold_coll_args_t a = fold_model_rank_args(topo, q, rank);
    fold_sched_t own, *s = space != NULL ? &space->build.s : &own;
    if (space != NULL) {
        fold_sched_reset(s, &a);
    } else {
        fold_sched_init(s, &a);
    }
    fold_sched_count_only(s);
    size_t n = build(&a, s) == FOLD_OK ? s->nsteps : 0;
    if (space == NULL) {
        fold_sched_cleanup(s);
    }
    return n;
}

int fold_model_symmetry(const fold_topo_t *topo, const fold_model_query_t *q,
                        fold_model_space_t *space)
{
    fold_alg_build_fn build = q->alg ? fold_alg_builder(q->alg, q->proto.coll) : NULL;
    if (build == NULL || fold_model_full_replay || !topo_uniform(topo)) {
        return FOLD_MODEL_SYM_NONE;
    }
    build_space_t own, *b = build_space_begin(space, &own, topo);
    model_prog_t pg;
    const int ppn = topo->min_ppn;
    int status = prog_init(&pg, ppn), family = FOLD_MODEL_SYM_NONE;
    unsigned families = 0;
    for (int r = 0; r < ppn && status == FOLD_OK && (r == 0 || families != 0); r++) {
        status = build_rank(topo, q, build, r, ppn, b, &pg);
        if (status == FOLD_OK && r == 0) {
            families = families_of_first(topo, q, build, b, &pg);
        }
    }
    if (status == FOLD_OK && families != 0) {
        family = node_symmetry(topo, q, build, b, &pg, families);
        if (family != FOLD_MODEL_SYM_NONE && sym_match(&pg, topo, family) != FOLD_OK) {
            family = FOLD_MODEL_SYM_NONE;
        }
    }
    if (space == NULL) {
        build_space_free(&own);
    }
    prog_free(&pg);
    return family;
}

int fold_model_predict(const fold_model_params_t *p, const fold_topo_t *topo,
                       const fold_model_query_t *q, fold_model_result_t *res)
{
    return predict(p, topo, q, NULL, INFINITY, NULL, res);
}

int fold_model_predict_within(const fold_model_params_t *p, const fold_topo_t *topo,
                              const fold_model_query_t *q, double cutoff_us,
                              fold_model_space_t *space, fold_model_result_t *res)
{
    return predict(p, topo, q, NULL, cutoff_us, space, res);   /* NaN: never reached */
}

int fold_model_predict_steps(const fold_model_params_t *p, const fold_topo_t *topo,
                             const fold_model_query_t *q, int rank, double *done, size_t cap,
                             size_t *nsteps, fold_model_result_t *res)
{
    if (done == NULL || nsteps == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    *nsteps = 0;
    rank_steps_t out = {rank, done, cap, nsteps};
    return predict(p, topo, q, &out, INFINITY, NULL, res);
}
