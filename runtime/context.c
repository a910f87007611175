/*
 * Context: bootstrap, node locality, transport with address exchange, the world
 * communicator, and the registry of live handles (so that a call after
 * fold_finalize gets FOLD_ERR_NOT_INITIALIZED instead of touching freed memory).
 */
#define _GNU_SOURCE
#include "comm.h"
#include "node/node.h"
#include "guard.h"
#include "hash.h"
#include "log.h"
#include "net_probe.h"
#include "util/median.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- live handle registry -------------------------------------------------- */

/*
 * Every live context and communicator, so that a handle used after fold_finalize or
 * fold_comm_free is refused instead of read. An open-addressing set of fixed size:
 * lookups on every collective call take no lock; adds and removes do.
 */
#define REGISTRY_SLOTS 8192   /* power of two; live handles at once */
#define REGISTRY_TOMBSTONE ((const void *)1)

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const void *registry[REGISTRY_SLOTS];

static size_t registry_hash(const void *handle)
{
    uint64_t x = (uint64_t)(uintptr_t)handle;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (REGISTRY_SLOTS - 1);
}

static int registry_add(const void *handle)
{
    pthread_mutex_lock(&registry_lock);
    size_t i = registry_hash(handle);
    for (size_t n = 0; n < REGISTRY_SLOTS; n++, i = (i + 1) & (REGISTRY_SLOTS - 1)) {
        const void *cur = __atomic_load_n(&registry[i], __ATOMIC_RELAXED);
        if (cur == NULL || cur == REGISTRY_TOMBSTONE) {
            __atomic_store_n(&registry[i], handle, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&registry_lock);
            return FOLD_OK;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    fold_error("more than %d contexts and communicators alive at once", REGISTRY_SLOTS);
    return FOLD_ERR_NO_MEMORY;
}

static void registry_remove(const void *handle)
{
    pthread_mutex_lock(&registry_lock);
    size_t i = registry_hash(handle);
    for (size_t n = 0; n < REGISTRY_SLOTS; n++, i = (i + 1) & (REGISTRY_SLOTS - 1)) {
        const void *cur = __atomic_load_n(&registry[i], __ATOMIC_RELAXED);
        if (cur == handle) {
            __atomic_store_n(&registry[i], REGISTRY_TOMBSTONE, __ATOMIC_RELEASE);
            break;
        }
        if (cur == NULL) {
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
}

static int registry_has(const void *handle)
{
    size_t i = registry_hash(handle);
    for (size_t n = 0; n < REGISTRY_SLOTS; n++, i = (i + 1) & (REGISTRY_SLOTS - 1)) {
        const void *cur = __atomic_load_n(&registry[i], __ATOMIC_ACQUIRE);
        if (cur == handle) {
            return 1;
        }
        if (cur == NULL) {
            return 0;
        }
    }
    return 0;
}

int fold_context_valid(const fold_context_t *ctx)
{
    return ctx != NULL && registry_has(ctx) && ctx->magic == FOLD_CONTEXT_MAGIC;
}

int fold_comm_valid(const fold_comm_t *comm)
{
    return comm != NULL && registry_has(comm) && comm->magic == FOLD_COMM_MAGIC;
}

int fold_context_add_comm(fold_context_t *ctx, fold_comm_t *comm)
{
    if (ctx->ncomms == ctx->comms_cap) {
        int cap = ctx->comms_cap ? 2 * ctx->comms_cap : 8;
        fold_comm_t **c = realloc(ctx->comms, (size_t)cap * sizeof(*c));
        if (c == NULL) {
            return FOLD_ERR_NO_MEMORY;
        }
        ctx->comms     = c;
        ctx->comms_cap = cap;
    }
    int status = registry_add(comm);
    if (status == FOLD_OK) {
        ctx->comms[ctx->ncomms++] = comm;
    }
    return status;
}

void fold_context_remove_comm(fold_context_t *ctx, fold_comm_t *comm)
{
    registry_remove(comm);
    for (int i = 0; i < ctx->ncomms; i++) {
        if (ctx->comms[i] == comm) {
            ctx->comms[i] = ctx->comms[--ctx->ncomms];
            break;
        }
    }
}

/* ---- init ------------------------------------------------------------------- */

/* What every rank must agree on for its selections to match: the settings and
 * tuning file selection reads (FNV-1a over their text). */
static uint64_t hash_text(uint64_t h, const char *text)
{
    text = text ? text : "";
    return fold_hash(h, text, strlen(text) + 1);   /* the NUL separates "ab","c" from "a","bc" */
}

static uint64_t selection_hash(const fold_context_t *ctx)
{
    static const char *const vars[] = {"ALLREDUCE_ALG", "REDUCE_ALG", "TUNE", "SEGMENT_SIZE",
                                       "PIPELINE_DEPTH", "DPML_LEADERS", "SHM_SIZE", "MODEL"};
    uint64_t h = FOLD_HASH_INIT;
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        int row = fold_config_index(vars[i]);
        h = hash_text(h, row >= 0 ? ctx->config.values[row] : NULL);
    }
    for (int i = 0; i < ctx->file.rules.nrules; i++) {
        char rule[512];
        fold_tune_rule_format(&ctx->file.rules.rules[i], rule, sizeof(rule));
        h = hash_text(h, rule);
    }
    for (int i = 0; i < ctx->file.nserve; i++) {
        char rule[512];
        fold_tune_rule_format(&ctx->file.serve[i].where, rule, sizeof(rule));
        h = hash_text(h, rule);
        h = hash_text(h, ctx->file.serve[i].fold ? "fold" : "mpi");
    }
    return hash_text(h, ctx->file.params);
}

/* One rank's part of the first exchange. */
typedef struct locality_record {
    char              node_name[64];
    char              machine_id[40];   /* the kernel's boot id: nodes that share it
                                           share the cores */
    uint64_t          select_hash;
    int32_t           status;   /* this rank's configuration: FOLD_OK or why not */
    int32_t           pad;
    fold_node_calib_t calib;    /* what this rank measured of its node */
} locality_record_t;

/* The measured fields, named as the model's parameters (NULL: agreed over the
 * ranks, but not one of them); a field not measured (0) stands for the fallback
 * where it has one: until the cores are probed, the segment is costed as a core's
 * own memory. */
#define NO_FALLBACK ((size_t)-1)
static const struct {
    const char *param;
    size_t      offset;
    size_t      fallback;
    int         cma;        /* only where single copy is allowed */
} measured_fields[] = {
    {"copy_gbs", offsetof(fold_node_calib_t, copy_gbs), NO_FALLBACK, 0},
    {"l2_bytes", offsetof(fold_node_calib_t, l2_bytes), NO_FALLBACK, 0},
    {"copy_l2_gbs", offsetof(fold_node_calib_t, copy_l2_gbs), NO_FALLBACK, 0},
    {"reduce_l2_gbs", offsetof(fold_node_calib_t, reduce_l2_gbs), NO_FALLBACK, 0},
    {"shm_gbs", offsetof(fold_node_calib_t, xcopy_gbs), offsetof(fold_node_calib_t, copy_gbs), 0},
    {"reduce_gbs", offsetof(fold_node_calib_t, reduce_gbs), NO_FALLBACK, 0},
    {"shm_reduce_gbs", offsetof(fold_node_calib_t, xreduce_gbs),
     offsetof(fold_node_calib_t, reduce_gbs), 0},
    {"shm_write_gbs", offsetof(fold_node_calib_t, xwrite_gbs),
     offsetof(fold_node_calib_t, copy_gbs), 0},
    {"shm_fold_gbs", offsetof(fold_node_calib_t, xfold_gbs),
     offsetof(fold_node_calib_t, reduce_gbs), 0},
    {"shm_fold_far_gbs", offsetof(fold_node_calib_t, xfold_far_gbs),
     offsetof(fold_node_calib_t, reduce_gbs), 0},
    {"copy_mem_gbs", offsetof(fold_node_calib_t, copy_mem_gbs), NO_FALLBACK, 0},
    {"reduce_mem_gbs", offsetof(fold_node_calib_t, reduce_mem_gbs), NO_FALLBACK, 0},
    {NULL, offsetof(fold_node_calib_t, reduce_stream_gbs), NO_FALLBACK, 0},
    {NULL, offsetof(fold_node_calib_t, reduce_loop_gbs), NO_FALLBACK, 0},
    {NULL, offsetof(fold_node_calib_t, reduce_loop_stream_gbs), NO_FALLBACK, 0},
    {NULL, offsetof(fold_node_calib_t, rounds_bytes), NO_FALLBACK, 0},
    {"cma_gbs", offsetof(fold_node_calib_t, cma_gbs), NO_FALLBACK, 1},
    {"cma_mem_gbs", offsetof(fold_node_calib_t, cma_mem_gbs), NO_FALLBACK, 1},
    {NULL, offsetof(fold_node_calib_t, cma_huge_mem_gbs), NO_FALLBACK, 1},
    {"cma_us", offsetof(fold_node_calib_t, cma_us), NO_FALLBACK, 1},
    {"adopt_gbs", offsetof(fold_node_calib_t, adopt_gbs), NO_FALLBACK, 0},
};
#define NMEASURED (sizeof(measured_fields) / sizeof(measured_fields[0]))

static double field_of(const fold_node_calib_t *calib, size_t offset)
{
    double v;
    memcpy(&v, (const char *)calib + offset, sizeof(v));
    return v;
}

void fold_context_set_measured(fold_context_t *ctx, const fold_node_calib_t *calib)
{
    size_t used = 0, room = sizeof(ctx->measured);
    ctx->measured[0] = '\0';
    for (size_t i = 0; i < NMEASURED; i++) {
        double v = field_of(calib, measured_fields[i].offset);
        if (v <= 0 && measured_fields[i].fallback != NO_FALLBACK) {
            v = field_of(calib, measured_fields[i].fallback);
        }
        if (v <= 0 || (measured_fields[i].cma && !calib->single_copy) ||
            measured_fields[i].param == NULL) {
            continue;
        }
        /* Single copy was timed reading this process's own memory; in a call it reads
         * what another core wrote. The cores probe times that (xcma_gbs); without it,
         * single copy is taken to slow as memcpy does on such data. Rated from its
         * local rate alone, where the cores share no cache, single copy looks much
         * faster than it runs and the model takes it at half dpml's speed; on other
         * machines the kernel's copy does not slow at all where memcpy does
         * (probe.c). */
        if (measured_fields[i].offset == offsetof(fold_node_calib_t, cma_gbs)) {
            if (calib->xcma_gbs > 0) {
                v = calib->xcma_gbs;
            } else if (calib->xcopy_gbs > 0 && calib->copy_gbs > calib->xcopy_gbs) {
                v *= calib->xcopy_gbs / calib->copy_gbs;
            }
        }
        /* The buffers the kernel copies are backed with huge pages (node/huge.c),
         * whose pages it walks at a fraction of the cost of 4 KiB ones. */
        if (measured_fields[i].offset == offsetof(fold_node_calib_t, cma_mem_gbs) &&
            ctx->config.huge_pages && calib->cma_huge_mem_gbs > 0) {
            v = calib->cma_huge_mem_gbs;
        }
        /* A byte count is written whole: the size syntax reads no exponent. */
        int bytes = measured_fields[i].offset == offsetof(fold_node_calib_t, l2_bytes);
        int n = snprintf(ctx->measured + used, room - used, bytes ? "%s%s=%.0f" : "%s%s=%.4g",
                         used ? "," : "", measured_fields[i].param, v);
        if (n < 0 || (size_t)n >= room - used) {
            ctx->measured[used] = '\0';
            break;
        }
        used += (size_t)n;
    }
    if (ctx->net_lat_us > 0 && ctx->net_gbs > 0) {
        int n = snprintf(ctx->measured + used, room - used, "%sinter_lat_us=%.4g,inter_gbs=%.4g",
                         used ? "," : "", ctx->net_lat_us, ctx->net_gbs);
        if (n < 0 || (size_t)n >= room - used) {
            ctx->measured[used] = '\0';
        } else {
            used += (size_t)n;
        }
    }
    /* FOLD_MEASURED stands in for what was measured (another machine's figures). */
    const char *given = ctx->config.measured;
    if (given != NULL && *given != '\0' &&
        snprintf(ctx->measured + used, room - used, "%s%s", used ? "," : "", given) >=
            (int)(room - used)) {
        fold_warn("FOLD_MEASURED is too long (%zu bytes at most); ignored", room - used - 2);
        ctx->measured[used] = '\0';
    }
}


/* The median of one field of every rank's calibration (sorts v). */
static double median_of(const locality_record_t *all, int p, size_t offset, double *v)
{
    for (int r = 0; r < p; r++) {
        v[r] = field_of(&all[r].calib, offset);
    }
    return fold_util_median(v, p);
}

/* What fold_init measured, agreed by every rank: the medians over the ranks, so
 * that one rank caught by noise while it measured does not decide for all; each
 * value only where every rank measured it, single copy only where every rank may
 * use it. */
static void agree_measured(fold_context_t *ctx, const locality_record_t *all)
{
    int p = ctx->bs.size;
    fold_node_calib_t agreed = {0};
    double *v = malloc((size_t)p * sizeof(double));
    agreed.single_copy = 1;
    for (int r = 0; r < p; r++) {
        agreed.single_copy &= all[r].calib.single_copy;
    }
    for (size_t i = 0; v != NULL && i < NMEASURED; i++) {
        size_t offset = measured_fields[i].offset;
        int everywhere = 1;
        for (int r = 0; r < p; r++) {
            everywhere &= field_of(&all[r].calib, offset) > 0;
        }
        if (everywhere) {
            double m = median_of(all, p, offset, v);
            memcpy((char *)&agreed + offset, &m, sizeof(m));
        }
    }
    free(v);
    ctx->calib = agreed;
    fold_context_set_measured(ctx, &agreed);
    fold_debug("node calibrated: %s%s", ctx->measured,
               agreed.single_copy ? "" : " (single copy not available)");
}

int fold_context_set_cores(fold_context_t *ctx, const fold_node_calib_t *all, int n)
{
    static const size_t fields[] = {offsetof(fold_node_calib_t, xcopy_gbs),
                                    offsetof(fold_node_calib_t, xcma_gbs),
                                    offsetof(fold_node_calib_t, xreduce_gbs),
                                    offsetof(fold_node_calib_t, xwrite_gbs),
                                    offsetof(fold_node_calib_t, xfold_gbs),
                                    offsetof(fold_node_calib_t, xfold_far_gbs),
                                    offsetof(fold_node_calib_t, flag_us)};
    /* flag_us is logged, not the model's: the executor notices a flag through its
     * poll loop, and a call's hop takes several times the bare cache line's trip;
     * costed at the trip, dpml's three hops look cheaper than shm_flat's one at
     * 32-128 KiB, where it is slower. */
    double *v = malloc((size_t)n * sizeof(double));
    if (v == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        int m = 0;
        for (int r = 0; r < n; r++) {
            double x = field_of(&all[r], fields[f]);
            if (x > 0 && isfinite(x)) {
                v[m++] = x;
            }
        }
        if (m > 0) {
            double med = fold_util_median(v, m);
            memcpy((char *)&ctx->calib + fields[f], &med, sizeof(med));
        }
    }
    free(v);
    ctx->cores_probed = 1;
    fold_context_set_measured(ctx, &ctx->calib);
    int status = fold_model_configure(ctx->measured, ctx->file.params, ctx->config.model,
                                      &ctx->model);
    for (int i = 0; i < ctx->ncomms; i++) {
        fold_select_cache_clear(ctx->comms[i]);
    }
    fold_debug("node cores probed: a flag's trip %.3f us; %s", ctx->calib.flag_us,
               ctx->measured);
    return status;
}

/* Checks that every rank configured itself and would select alike. */
static int check_agreement(const fold_context_t *ctx, const locality_record_t *all)
{
    for (int r = 0; r < ctx->bs.size; r++) {
        if (all[r].status != FOLD_OK) {
            fold_error("rank %d could not read its configuration (%s); every rank fails "
                       "fold_init", r, fold_status_string(all[r].status));
            return all[r].status;
        }
    }
    for (int r = 1; r < ctx->bs.size; r++) {
        if (all[r].select_hash != all[0].select_hash) {
            fold_error("rank %d selects algorithms from other settings than rank 0 (FOLD_TUNE, "
                       "FOLD_TUNE_FILE's contents, FOLD_MODEL, FOLD_*_ALG, FOLD_SEGMENT_SIZE, "
                       "FOLD_PIPELINE_DEPTH, FOLD_DPML_LEADERS or FOLD_SHM_SIZE differ): the "
                       "ranks would run different algorithms", r);
            return FOLD_ERR_INVALID_ARG;
        }
    }
    return FOLD_OK;
}

/* The running kernel's boot id: the same for every process of one machine, whatever
 * namespace or container it runs in, and different on every other machine. Without
 * it, the node name stands for the machine. */
static void machine_id(char *id, size_t len, const char *node_name)
{
    memset(id, 0, len);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL || fgets(id, (int)len, f) == NULL) {
        snprintf(id, len, "node:%s", node_name);
    }
    if (f != NULL) {
        fclose(f);
    }
    id[strcspn(id, "\n")] = '\0';
}

/* Node index per rank from the gathered node names, and this rank's place on it;
 * the same exchange checks that the ranks agree on selection (config_status is
 * this rank's configuration outcome: a rank that failed still takes part). */
static int context_locality(fold_context_t *ctx, int config_status)
{
    int p = ctx->bs.size;
    locality_record_t mine;
    memset(&mine, 0, sizeof(mine));
    memcpy(mine.node_name, ctx->bs.node_name, sizeof(mine.node_name));
    machine_id(mine.machine_id, sizeof(mine.machine_id), mine.node_name);
    mine.status      = config_status;
    mine.select_hash = config_status == FOLD_OK ? selection_hash(ctx) : 0;
    if (ctx->bs.size > 1) {
        fold_node_calibrate(&mine.calib);
        fold_debug("measured here: copy %.4g GB/s (%.4g from memory), reduce %.4g (%.4g), "
                   "single copy %s%.4g GB/s and %.4g us per call", mine.calib.copy_gbs,
                   mine.calib.copy_mem_gbs, mine.calib.reduce_gbs, mine.calib.reduce_mem_gbs,
                   mine.calib.single_copy ? "" : "refused, ", mine.calib.cma_gbs,
                   mine.calib.cma_us);
    }
    locality_record_t *all = malloc((size_t)p * sizeof(*all));
    int *node_of = malloc((size_t)p * sizeof(int));
    int status = FOLD_ERR_NO_MEMORY;
    if (all == NULL || node_of == NULL) {
        goto out;
    }
    if (ctx->bs.allgather(&ctx->bs, &mine, all, sizeof(mine)) != FOLD_OK) {
        status = FOLD_ERR_BOOTSTRAP;
        goto out;
    }
    if ((status = check_agreement(ctx, all)) != FOLD_OK) {
        goto out;
    }
    agree_measured(ctx, all);
    size_t len = sizeof(mine.node_name);
    ctx->nnodes = 0;
    for (int r = 0; r < p; r++) {
        int node = -1;
        for (int q = 0; q < r && node < 0; q++) {
            if (strncmp(all[q].node_name, all[r].node_name, len) == 0) {
                node = node_of[q];
            }
        }
        node_of[r] = node >= 0 ? node : ctx->nnodes++;
    }
    ctx->local_rank = ctx->local_size = ctx->machine_size = 0;
    for (int r = 0; r < p; r++) {
        if (node_of[r] == node_of[ctx->bs.rank]) {
            ctx->local_rank += r < ctx->bs.rank;
            ctx->local_size++;
        }
        ctx->machine_size += strncmp(all[r].machine_id, mine.machine_id,
                                     sizeof(mine.machine_id)) == 0;
    }
    /* Kept as a formula where the launcher placed ranks in blocks or cyclically. */
    status = fold_nodemap_init(&ctx->nodes, p, node_of);
out:
    free(node_of);
    free(all);
    return status;
}

static int node_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Cores this process may run on (one when the launcher binds it to a core). */
static int available_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return CPU_COUNT(&set);
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Oversubscribed ranks must yield soon or they starve the rank they wait for;
 * otherwise spinning keeps the core, as MPI libraries do. The ranks that compete
 * for the cores are the machine's, which may be more than the node's. */
static void context_resolve_spin(fold_context_t *ctx)
{
    long n = ctx->config.spin_count;
    if (n < 0) {
        n = ctx->machine_size > node_cores() ? 200 : 100000;
    }
    ctx->spin_count = n;
}

/* Streaming must beat ordinary stores by this much to be taken by default. */
#define STREAM_GAIN 1.05

/* Whether streamed results beat ordinary stores for data out of a core's own cache
 * but in the last level: fold_init's loops of in-cache reductions touched more than
 * the L2 and streaming won there. A call of S bytes touches at least 2S of a rank's memory (its
 * IN and OUT, or its share of every rank's), twice the L2 from S = L2 on. */
static int stream_past_l2(const fold_node_calib_t *c)
{
    return c->l2_bytes > 0 && c->rounds_bytes > c->l2_bytes &&
           c->reduce_loop_stream_gbs > STREAM_GAIN * c->reduce_loop_gbs;
}

size_t fold_context_stream_min(const fold_context_t *ctx)
{
    const fold_config_t *cfg = &ctx->config;
    const fold_node_calib_t *c = &ctx->calib;
    const int past_l2 = stream_past_l2(c);
    const int from_memory = c->reduce_stream_gbs > 0 &&
                            c->reduce_stream_gbs > STREAM_GAIN * c->reduce_mem_gbs;
    int on = cfg->stream == FOLD_STREAM_ON ||
             (cfg->stream == FOLD_STREAM_AUTO && (past_l2 || from_memory));
    int ranks = ctx->local_size > 0 ? ctx->local_size : 1;
    size_t min = cfg->stream_min > 0 ? cfg->stream_min
               : past_l2             ? (size_t)c->l2_bytes
                                     : (size_t)(ctx->model.cache_bytes / ranks);
    return on ? (min > 0 ? min : 1) : SIZE_MAX;
}

static void context_resolve_threads(fold_context_t *ctx)
{
    long n = ctx->config.num_threads;
    if (n == 0) {
        /* Ranks share the node's cores; each takes its share for the reduction, and
         * no more than the cores it is allowed to run on. */
        n = (long)node_cores() / (ctx->machine_size > 0 ? ctx->machine_size : 1);
        n = n < available_cores() ? n : available_cores();
    }
    ctx->nthreads = n < 1 ? 1 : (int)n;
}

/* Every rank's transport address, through the bootstrap: lengths, then padded blobs. */
/* An address length that says "my transport failed": every rank still joins the
 * first exchange, so one rank's failure fails them all instead of leaving the others
 * waiting for it in the second. */
#define ADDRESS_FAILED SIZE_MAX

/* One rank's part of the first address exchange. */
typedef struct address_head {
    uint64_t len;         /* its address's bytes; ADDRESS_FAILED */
    uint64_t fell_back;   /* its transport runs on less than asked (caps.fallback) */
} address_head_t;

/* Why this rank's transport runs on less than it was asked to; NULL if it does not. */
static const char *transport_fallback(const fold_context_t *ctx)
{
    fold_tl_caps_t caps;
    return ctx->tl != NULL && ctx->tl_ops->query(ctx->tl, &caps) == FOLD_OK ? caps.fallback
                                                                            : NULL;
}

/* Once per node: the node's lowest rank whose transport fell back says why at warn
 * level, the others at info level (the ranks of a node share its /dev/shm, so they
 * mostly fall back together). */
static void report_fallback(const fold_context_t *ctx, const address_head_t *heads)
{
    const char *why = transport_fallback(ctx);
    int me = ctx->bs.rank, first = 1;
    if (why == NULL) {
        return;
    }
    for (int r = 0; r < me; r++) {
        first &= !(heads[r].fell_back &&
                   fold_context_node_of(ctx, r) == fold_context_node_of(ctx, me));
    }
    if (first) {
        fold_warn("%s transport: %s", ctx->tl_ops->name, why);
    } else {
        fold_info("%s transport: %s", ctx->tl_ops->name, why);
    }
}

/* Where transports publish their addresses in the bootstrap's directory. */
#define ADDRESS_KEY "fold.tl.addr"

/* A peer's address, for the transport on its first operation towards the peer
 * (fold_tl_resolve_fn): from the bootstrap's directory, or from the table gathered
 * at init where it has none. */
static int context_resolve(void *arg, int rank, void **addr, size_t *len)
{
    fold_context_t *ctx = arg;
    if (ctx->addr_table == NULL) {
        return ctx->bs.lookup(&ctx->bs, rank, ADDRESS_KEY, addr, len);
    }
    const char *entry = ctx->addr_table + (size_t)rank * ctx->addr_entry;
    uint64_t n;
    memcpy(&n, entry, sizeof(n));
    if ((*addr = malloc((size_t)n)) == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    memcpy(*addr, entry + sizeof(n), (size_t)n);
    *len = (size_t)n;
    return FOLD_OK;
}

/* Every rank's address into ctx->addr_table, for a bootstrap without a directory. */
static int gather_addresses(fold_context_t *ctx, const address_head_t *heads, const void *addr,
                            size_t len)
{
    int p = ctx->bs.size;
    size_t max = 0;
    for (int r = 0; r < p; r++) {
        max = heads[r].len > max ? (size_t)heads[r].len : max;
    }
    size_t entry = sizeof(uint64_t) + max;
    char *mine = calloc(1, entry);
    char *table = malloc((size_t)p * entry);
    int status = FOLD_OK;
    if (mine == NULL || table == NULL) {
        status = FOLD_ERR_NO_MEMORY;
    } else {
        uint64_t n = len;
        memcpy(mine, &n, sizeof(n));
        memcpy(mine + sizeof(n), addr, len);
        if (ctx->bs.allgather(&ctx->bs, mine, table, entry) != FOLD_OK) {
            status = FOLD_ERR_BOOTSTRAP;
        }
    }
    free(mine);
    if (status != FOLD_OK) {
        free(table);
        return status;
    }
    ctx->addr_table = table;
    ctx->addr_entry = entry;
    return FOLD_OK;
}

/* The network between nodes, measured once the transport is up (net_probe.c), for
 * the model to decide with; the in-process loopback has none to measure. */
static int context_probe_network(fold_context_t *ctx)
{
    if (ctx->nnodes < 2 || ctx->tl_ops == &fold_tl_loopback_ops) {
        return FOLD_OK;
    }
    int status = fold_net_probe(ctx, &ctx->net_lat_us, &ctx->net_gbs);
    if (status != FOLD_OK || ctx->net_lat_us <= 0 || ctx->net_gbs <= 0) {
        return status;
    }
    fold_context_set_measured(ctx, &ctx->calib);
    fold_info("network measured: %.1f us a small message, %.3g GB/s a link", ctx->net_lat_us,
              ctx->net_gbs);
    return fold_select_configure(ctx);
}

/* Makes every rank's transport reachable; `local` is this rank's status so far (a
 * failed rank has no transport but still takes part). With a directory (PMIx) each
 * rank only publishes its address, and a transport fetches a peer's on its first
 * operation towards it, so no process holds the job's addresses; an out-of-band
 * allgather gives no way to ask one rank's, so there every rank keeps them all. */
static int context_connect(fold_context_t *ctx, int local)
{
    int p = ctx->bs.size;
    const void *addr = NULL;
    size_t len = ADDRESS_FAILED;
    int status = local;
    if (status == FOLD_OK && (status = ctx->tl_ops->address(ctx->tl, &addr, &len)) == FOLD_OK &&
        ctx->bs.publish != NULL) {
        status = ctx->bs.publish(&ctx->bs, ADDRESS_KEY, addr, len);
    }
    if (status != FOLD_OK) {
        len = ADDRESS_FAILED;
    }
    address_head_t head = {len, status == FOLD_OK && transport_fallback(ctx) != NULL};
    address_head_t *heads = malloc((size_t)p * sizeof(*heads));
    if (heads == NULL) {
        /* Without room for the answers this rank cannot take part: the others will
         * wait for it until the launcher ends the job. */
        return FOLD_ERR_NO_MEMORY;
    }
    /* Also the fence after which the published addresses can be looked up. */
    if (ctx->bs.allgather(&ctx->bs, &head, heads, sizeof(head)) != FOLD_OK) {
        status = FOLD_ERR_BOOTSTRAP;
        goto out;
    }
    if (status != FOLD_OK) {
        goto out;   /* this rank's own failure, reported where it happened */
    }
    for (int r = 0; r < p; r++) {
        if (heads[r].len == (uint64_t)ADDRESS_FAILED || heads[r].len == 0) {
            fold_error("rank %d could not open its transport, so no rank can connect (its "
                       "own log says why)", r);
            status = FOLD_ERR_PEER_FAILED;
            goto out;
        }
    }
    report_fallback(ctx, heads);
    if (ctx->bs.lookup == NULL && (status = gather_addresses(ctx, heads, addr, len)) != FOLD_OK) {
        goto out;
    }
    fold_debug("transport addresses: %s", ctx->addr_table == NULL
                   ? "published, each fetched from the launcher on first use"
                   : "every rank's gathered at init (the bootstrap has no directory)");
    status = ctx->tl_ops->set_resolver(ctx->tl, context_resolve, ctx);
out:
    free(heads);
    return status;
}

static void context_destroy(fold_context_t *ctx)
{
    const fold_wire_counters_t *w = &ctx->wire;
    if (w->dense_bytes != 0) {
        fold_debug("codecs: %llu sends encoded (bits %llu, idx %llu, rle %llu), %llu left "
                   "dense; %llu of %llu bytes sent; %llu fused decodes, %llu results "
                   "encoded by their reduction; %llu answers held behind own sends",
                   (unsigned long long)(w->msgs[1] + w->msgs[2] + w->msgs[3]),
                   (unsigned long long)w->msgs[1], (unsigned long long)w->msgs[2],
                   (unsigned long long)w->msgs[3], (unsigned long long)w->msgs[0],
                   (unsigned long long)w->sent_bytes, (unsigned long long)w->dense_bytes,
                   (unsigned long long)w->fused, (unsigned long long)w->direct,
                   (unsigned long long)w->held);
    }
    /* The transport closes first: a receive that a failed collective could not cancel
     * may still land while it drains, and it must land in scratch and staging buffers
     * that are still there (the fault harness saw a peer resumed after SIGSTOP corrupt
     * the heap of a rank in fold_finalize, ofi tcp;ofi_rxm). */
    if (ctx->tl != NULL) {
        ctx->tl_ops->close(ctx->tl);
        ctx->tl = NULL;
    }
    free(ctx->addr_table);
    ctx->addr_table = NULL;
    while (ctx->ncomms > 0) {
        fold_comm_destroy(ctx->comms[ctx->ncomms - 1]);
    }
    free(ctx->comms);
    fold_node_pool_destroy(&ctx->node_pool);   /* what a freed communicator left kept */
    if (ctx->bs.finalize != NULL) {
        ctx->bs.finalize(&ctx->bs);
    }
    fold_tune_release(&ctx->tune);
    fold_tune_file_release(&ctx->file);
    fold_config_release(&ctx->config);
    fold_nodemap_free(&ctx->nodes);
    ctx->magic = 0;
    free(ctx);
}

/* A backend that opened but lacks what the executor relies on is closed again, so
 * this rank fails like one whose transport did not open. */
static int context_check_transport(fold_context_t *ctx)
{
    fold_tl_caps_t caps;
    int status = ctx->tl_ops->query(ctx->tl, &caps);
    if (status == FOLD_OK) {
        status = fold_exec_check_caps(&caps);
    }
    if (status != FOLD_OK) {
        ctx->tl_ops->close(ctx->tl);
        ctx->tl = NULL;
    }
    return status;
}

int fold_context_create(fold_bootstrap_t *bs, const char *transport, void *loopback_fabric,
                        fold_context_t **ctx_p)
{
    fold_context_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx != NULL) {
        fold_node_pool_init(&ctx->node_pool);
    }
    if (ctx == NULL) {
        bs->finalize(bs);
        return FOLD_ERR_NO_MEMORY;
    }
    ctx->bs = *bs;
    fold_log_set_rank(ctx->bs.rank);   /* the refusal of a bad FOLD_* value names it */
    /* A rank whose FOLD_* values are refused goes on with the defaults to the first
     * exchange, where every rank learns of it and fails (check_agreement), instead
     * of leaving the others waiting for it in the bootstrap. */
    int status;
    int config_status = fold_config_load(&ctx->config);
    if (config_status != FOLD_OK && (status = fold_config_defaults(&ctx->config)) != FOLD_OK) {
        goto err;
    }
    fold_log_level = ctx->config.log_level;
    if (config_status == FOLD_OK) {
        config_status = fold_select_configure(ctx);
    }

    /* From here on a rank that fails locally still takes part in the bootstrap
     * exchanges up to the address exchange, where every rank learns of it. */
    const char *tl_name = transport ? transport : ctx->config.transport;
    ctx->tl_ops = fold_tl_find(tl_name);
    int local = FOLD_OK;
    if (ctx->tl_ops == NULL) {
        fold_error("unknown transport '%s' (fold_info lists the transports)", tl_name);
        local = FOLD_ERR_NOT_FOUND;
    }
    if ((status = context_locality(ctx, config_status)) != FOLD_OK) {
        goto err;
    }
    if (ctx->measured[0] != '\0' && (status = fold_select_configure(ctx)) != FOLD_OK) {
        goto err;   /* the model again, from what was measured (same on every rank) */
    }
    context_resolve_threads(ctx);
    context_resolve_spin(ctx);
    ctx->stream_min = fold_context_stream_min(ctx);

    /* The transport sees the context's configuration, not the environment. */
    fold_tl_params_t params = {
        .rank            = ctx->bs.rank,
        .size            = ctx->bs.size,
        .loopback_fabric = loopback_fabric,
        .ofi_provider    = ctx->config.ofi_provider,
        .ucx_err_none    = ctx->config.ucx_err_mode == 0,
    };
    if (local == FOLD_OK && (local = ctx->tl_ops->open(&params, &ctx->tl)) != FOLD_OK) {
        ctx->tl = NULL;
    }
    if (local == FOLD_OK) {
        local = context_check_transport(ctx);
    }
    if ((status = context_connect(ctx, local)) != FOLD_OK ||
        (status = context_probe_network(ctx)) != FOLD_OK) {
        goto err;
    }
    ctx->magic = FOLD_CONTEXT_MAGIC;
    if ((status = registry_add(ctx)) != FOLD_OK) {
        goto err;
    }
    status = fold_comm_create(ctx, ctx->bs.size, ctx->bs.rank, NULL, 0, &ctx->world);
    if (status == FOLD_OK) {
        status = fold_comm_world_setup(ctx->world);   /* (context_destroy frees world) */
    }
    if (status != FOLD_OK) {
        registry_remove(ctx);
        goto err;
    }
    char stream[48] = "never";
    if (ctx->stream_min != SIZE_MAX) {
        snprintf(stream, sizeof(stream), "from %zu bytes", ctx->stream_min);
    }
    fold_debug("context up: rank %d of %d, node %d of %d (local rank %d of %d), "
               "%d ranks on its machine, transport %s, %d reduction threads, %ld polls "
               "before a yield, results streamed %s (reduce from memory %.3g GB/s, "
               "streamed %.3g)", ctx->bs.rank, ctx->bs.size,
               fold_context_node_of(ctx, ctx->bs.rank), ctx->nnodes, ctx->local_rank,
               ctx->local_size, ctx->machine_size, ctx->tl_ops->name, ctx->nthreads,
               ctx->spin_count, stream, ctx->calib.reduce_mem_gbs,
               ctx->calib.reduce_stream_gbs);
    *ctx_p = ctx;
    return FOLD_OK;

err:
    context_destroy(ctx);
    return status;
}

/* ---- virtual contexts --------------------------------------------------------- */

int fold_context_create_virtual(int size, const int *node_of, fold_context_t **ctx_p)
{
    fold_context_t *ctx = calloc(1, sizeof(*ctx));
    if (ctx != NULL) {
        fold_node_pool_init(&ctx->node_pool);
    }
    if (ctx == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    ctx->bs.size = size;
    int status = fold_config_load(&ctx->config);
    if (status == FOLD_OK) {
        fold_log_level = ctx->config.log_level;
        status = fold_select_configure(ctx);
    }
    if (status == FOLD_OK) {
        status = fold_nodemap_init(&ctx->nodes, size, node_of);
    }
    if (status != FOLD_OK) {
        context_destroy(ctx);
        return status;
    }
    ctx->nnodes = ctx->nodes.nnodes;
    ctx->magic = FOLD_CONTEXT_MAGIC;
    if ((status = registry_add(ctx)) != FOLD_OK) {
        context_destroy(ctx);
        return status;
    }
    status = fold_comm_create(ctx, size, 0, NULL, 0, &ctx->world);
    if (status != FOLD_OK) {
        registry_remove(ctx);
        context_destroy(ctx);
        return status;
    }
    *ctx_p = ctx;
    return FOLD_OK;
}

void fold_context_free_virtual(fold_context_t *ctx)
{
    registry_remove(ctx);
    context_destroy(ctx);
}

/* ---- public API ------------------------------------------------------------- */

void fold_context_params_init(fold_context_params_t *params)
{
    memset(params, 0, sizeof(*params));
}

int fold_init(const fold_context_params_t *params, fold_context_h *ctx_p)
{
    if (ctx_p == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    fold_bootstrap_t bs;
    int status;
    if (params != NULL && params->oob.allgather != NULL) {
        if (params->oob.size < 1 || params->oob.rank < 0 ||
            params->oob.rank >= params->oob.size) {
            fold_error("out-of-band bootstrap: rank %d / size %d is not valid",
                       params->oob.rank, params->oob.size);
            return FOLD_ERR_INVALID_ARG;
        }
        status = fold_bootstrap_oob_init(&bs, params->oob.allgather, params->oob.arg,
                                         params->oob.rank, params->oob.size);
    } else {
        status = fold_bootstrap_pmix_init(&bs);
    }
    if (status != FOLD_OK) {
        return status;
    }
    fold_context_t *ctx;
    status = fold_context_create(&bs, params ? params->transport : NULL, NULL, &ctx);
    if (status == FOLD_OK && params != NULL && params->check) {
        ctx->config.check = 1;
    }
    if (status == FOLD_OK) {
        *ctx_p = ctx;
    }
    return status;
}

int fold_finalize(fold_context_h ctx)
{
    if (!fold_context_valid(ctx)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    /* Never given back: the context is freed below. */
    int guarded = fold_guard_enter(ctx, "fold_finalize");
    if (guarded != FOLD_OK) {
        return guarded;
    }
    /* Nobody closes its endpoints while a peer may still be sending to it. */
    char token = 0, *all = malloc((size_t)ctx->bs.size);
    int status = (all != NULL && ctx->bs.allgather(&ctx->bs, &token, all, 1) == FOLD_OK)
                     ? FOLD_OK : FOLD_ERR_BOOTSTRAP;
    free(all);
    registry_remove(ctx);
    context_destroy(ctx);
    return status;
}

static int config_set(fold_context_t *ctx, const char *name, const char *value)
{
    int idx = fold_config_index(name);
    /* The transport read these when it opened. */
    if (idx >= 0 && (idx == fold_config_index("TRANSPORT") ||
                     idx == fold_config_index("OFI_PROVIDER"))) {
        fold_error("FOLD_%s cannot change after fold_init", fold_config_table.fields[idx].name);
        return FOLD_ERR_INVALID_ARG;
    }
    char *old = (idx >= 0 && ctx->config.values[idx]) ? strdup(ctx->config.values[idx]) : NULL;
    int status = fold_config_update(&ctx->config, name, value);
    /* Selection reads most settings (rules, tuning file, model, leaders, segment and
     * node-segment sizes, depth): re-read them all and forget its decisions. */
    if (status == FOLD_OK) {
        status = fold_select_configure(ctx);
        if (status != FOLD_OK && old != NULL) {
            fold_config_update(&ctx->config, name, old);
            fold_select_configure(ctx);
        }
    }
    /* What the context derives from its settings follows whichever one changed; the
     * log level is the process's, so only FOLD_LOG_LEVEL itself moves it. */
    if (status == FOLD_OK) {
        context_resolve_threads(ctx);
        context_resolve_spin(ctx);
        ctx->stream_min = fold_context_stream_min(ctx);
        if (idx == fold_config_index("LOG_LEVEL")) {
            fold_log_level = ctx->config.log_level;
        }
    }
    free(old);
    return status;
}

int fold_config_set(fold_context_h ctx, const char *name, const char *value)
{
    if (!fold_context_valid(ctx)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    int status = fold_guard_enter(ctx, "fold_config_set");
    if (status == FOLD_OK) {
        status = config_set(ctx, name, value);
        fold_guard_leave(ctx);
    }
    return status;
}

/* Claims the context too: fold_config_set frees the strings it reads. */
int fold_config_get(fold_context_h ctx, const char *name, const char **value)
{
    if (!fold_context_valid(ctx)) {
        return FOLD_ERR_NOT_INITIALIZED;
    }
    int idx = fold_config_index(name);
    if (idx < 0 || value == NULL) {
        return idx < 0 ? FOLD_ERR_NOT_FOUND : FOLD_ERR_INVALID_ARG;
    }
    int status = fold_guard_enter(ctx, "fold_config_get");
    if (status == FOLD_OK) {
        *value = ctx->config.values[idx];
        fold_guard_leave(ctx);
    }
    return status;
}
