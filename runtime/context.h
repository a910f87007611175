/*
 * The context: one per fold_init, owning the bootstrap, the transport, the
 * configuration, the selection state (rules, tuning file, cost model) and the
 * list of live communicators. Internal only.
 */
#ifndef FOLD_CONTEXT_H
#define FOLD_CONTEXT_H

#include <fold/fold.h>

#include "bootstrap.h"
#include "config.h"
#include "coll/alg.h"
#include "coll/model.h"
#include "coll/select.h"
#include "group/comm_ids.h"
#include "group/nodemap.h"
#include "group/world_rect.h"
#include "node/node.h"
#include "transport/transport.h"

#include <stdint.h>

#define FOLD_CONTEXT_MAGIC 0x464f4c44u   /* "FOLD" */
#define FOLD_COMM_MAGIC    0x434f4d4du   /* "COMM" */
#define FOLD_REQUEST_MAGIC 0x52455155u   /* "REQU" */

typedef struct fold_context fold_context_t;
typedef struct fold_comm    fold_comm_t;
typedef struct fold_request fold_request_t;

/* What the sparse codecs did on this context's sends (exec_wire.c). */
typedef struct fold_wire_counters {
    uint64_t msgs[4];        /* sends per codec: dense (considered, not encoded), bits, idx, rle */
    uint64_t dense_bytes;    /* bytes those sends would have taken dense */
    uint64_t sent_bytes;     /* bytes they took */
    uint64_t fused;          /* reductions that decoded a message while reducing */
    uint64_t direct;         /* reductions that wrote their result encoded for a send */
    uint64_t held;           /* answers that waited for an own send to go first
                                (coll/exec_plan.h) */
} fold_wire_counters_t;

struct fold_context {
    uint32_t             magic;
    uintptr_t            guard;           /* the thread inside a call on it, or 0
                                             (guard.h) */
    fold_tune_t          tune;            /* parsed FOLD_TUNE */
    fold_tune_file_t     file;            /* FOLD_TUNE_FILE: rules and model parameters */
    fold_model_params_t  model;           /* the cost model's machine (defaults, what
                                             fold_init measured, file, FOLD_MODEL) */
    char                 measured[512];    /* "name=value,..." of what fold_init measured,
                                             the same on every rank */
    struct fold_node_calib calib;         /* the same, agreed (what the string says) */
    double               net_lat_us;      /* ... of the network between nodes
                                             (net_probe.h); 0: not measured */
    double               net_gbs;
    int                  cores_probed;    /* the world's node setup probed the cores */
    const fold_alg_t    *forced[FOLD_COLL_COUNT]; /* FOLD_ALLREDUCE_ALG, FOLD_REDUCE_ALG */
    size_t               forced_seg[FOLD_COLL_COUNT]; /* their @SIZE, 0: none */
    fold_bootstrap_t     bs;
    const fold_tl_ops_t *tl_ops;
    fold_tl_t           *tl;
    /* Peers' transport addresses when the bootstrap has no directory to ask on first
     * use (an out-of-band allgather): every rank's, gathered at init, addr_entry bytes
     * each (a uint64_t length, then the address). NULL with PMIx. */
    char                *addr_table;
    size_t               addr_entry;
    void                *loopback_fabric;
    fold_config_t        config;
    int                  nthreads;        /* resolved FOLD_NUM_THREADS */
    long                 calls_run;       /* allreduce and reduce schedules run so far
                                             (what FOLD_TRACE counts) */
    long                 spin_count;      /* resolved FOLD_SPIN_COUNT */
    size_t               stream_min;      /* resolved FOLD_STREAM and FOLD_STREAM_MIN:
                                             calls of at least this many bytes stream
                                             their results (SIZE_MAX: none) */
    fold_nodemap_t       nodes;           /* node of every context rank (block, cyclic:
                                             no per-rank array) */
    int                  nnodes;
    int                  local_rank;
    int                  local_size;
    int                  machine_size;    /* ranks on this rank's machine, which may hold
                                             several nodes (containers, namespaces) that
                                             share its cores */
    fold_comm_t         *world;
    fold_node_pool_t     node_pool;       /* the segment of the last communicator freed,
                                             kept for the next of the same ranks */
    fold_comm_t        **comms;           /* every live communicator, world first */
    int                  ncomms;
    int                  comms_cap;
    fold_comm_ids_t      comm_ids;        /* ids of live communicators (8 KiB) */
    fold_world_rects_t   worlds;          /* virtual world rectangles, built at first use */
    fold_wire_counters_t wire;
};


/* Node index of context rank r. */
static inline int fold_context_node_of(const fold_context_t *ctx, int r)
{
    return fold_nodemap_node(&ctx->nodes, r);
}

/* context.c */
int  fold_context_create(fold_bootstrap_t *bs, const char *transport, void *loopback_fabric,
                         fold_context_t **ctx_p);
int  fold_context_valid(const fold_context_t *ctx);
/* A context that only selects, for what-if questions on shapes this machine cannot
 * run (fold_info -S, tests): no bootstrap and no transport, settings from FOLD_*,
 * a world communicator of `size` ranks with rank r on node node_of[r] (0-based),
 * this process being rank 0. Only selection may use it (it has no transport). */
int  fold_context_create_virtual(int size, const int *node_of, fold_context_t **ctx_p);
void fold_context_free_virtual(fold_context_t *ctx);
/* Records what was measured of the node (node/node.h: the copy rate, single copy's
 * rate and cost per call) as the cost-model parameters ctx->measured;
 * fold_select_configure applies them. */
/* From what message size a call streams its results to memory (SIZE_MAX: never;
 * ctx->stream_min once resolved): FOLD_STREAM=auto takes it where fold_init found
 * the reduction from memory faster with streaming stores, from FOLD_STREAM_MIN,
 * whose auto is the node's last-level cache (the model's cache_bytes) over the
 * ranks on the node: from there the node's inputs and outputs span twice the
 * cache, where the model counts every byte as a miss. Below that a call's output is
 * still in the cache for the next call, and streaming it out costs more than it
 * saves. */
size_t fold_context_stream_min(const fold_context_t *ctx);

struct fold_node_calib;
void fold_context_set_measured(fold_context_t *ctx, const struct fold_node_calib *calib);
/* What the node setup of the world measured of two cores (node/probe.c), all[r] from
 * world rank r (zeros from ranks that did not measure): the medians of the values
 * measured become the model's shm_gbs and shm_reduce_gbs, under the tuning file and
 * FOLD_MODEL, on every rank alike; earlier decisions are forgotten. */
int  fold_context_set_cores(fold_context_t *ctx, const struct fold_node_calib *all, int n);
int  fold_comm_valid(const fold_comm_t *comm);
int  fold_context_add_comm(fold_context_t *ctx, fold_comm_t *comm);
void fold_context_remove_comm(fold_context_t *ctx, fold_comm_t *comm);

#endif
