/*
 * The runtime's core objects: context, communicator, request. Internal only.
 */
#ifndef FOLD_CORE_H
#define FOLD_CORE_H

#include <fold/fold.h>

#include "bootstrap.h"
#include "config.h"
#include "coll/alg.h"
#include "coll/model.h"
#include "coll/sched.h"
#include "coll/select.h"
#include "node/segment.h"
#include "node/node.h"
#include "util/clock.h"
#include "transport/transport.h"

#include <stdint.h>

#define FOLD_CONTEXT_MAGIC 0x464f4c44u   /* "FOLD" */
#define FOLD_COMM_MAGIC    0x434f4d4du   /* "COMM" */
#define FOLD_REQUEST_MAGIC 0x52455155u   /* "REQU" */
#define FOLD_SCHED_CACHE_SIZE 16   /* schedule cache entries per communicator */

typedef struct fold_context fold_context_t;
typedef struct fold_comm    fold_comm_t;
typedef struct fold_request fold_request_t;

/*
 * Communicator rank -> context rank. Most communicators are an arithmetic
 * progression of context ranks (world, rows, columns of a grid), stored in O(1);
 * others keep a table (the simplest case of Kumar et al.'s compressed mapping).
 */
typedef struct fold_rank_map {
    int  start;
    int  stride;    /* 0: use table */
    int *table;
} fold_rank_map_t;

static inline int fold_rank_map_get(const fold_rank_map_t *m, int rank)
{
    return m->stride ? m->start + rank * m->stride : m->table[rank];
}

/* What the sparse codecs did on this context's sends (exec_wire.c). */
typedef struct fold_wire_counters {
    uint64_t msgs[4];        /* sends per codec: dense (considered, not encoded), bits, idx, rle */
    uint64_t dense_bytes;    /* bytes those sends would have taken dense */
    uint64_t sent_bytes;     /* bytes they took */
    uint64_t fused;          /* reductions that decoded a message while reducing */
    uint64_t direct;         /* reductions that wrote their result encoded for a send */
    uint64_t held;           /* answers that waited for an own send to go first (sched.h) */
} fold_wire_counters_t;

struct fold_context {
    uint32_t             magic;
    fold_tune_t          tune;            /* parsed FOLD_TUNE */
    fold_tune_file_t     file;            /* FOLD_TUNE_FILE: rules and model parameters */
    fold_model_params_t  model;           /* the cost model's machine (defaults, file,
                                             FOLD_MODEL) */
    const fold_alg_t    *forced[FOLD_COLL_COUNT]; /* FOLD_ALLREDUCE_ALG, FOLD_REDUCE_ALG */
    fold_bootstrap_t     bs;
    const fold_tl_ops_t *tl_ops;
    fold_tl_t           *tl;
    void                *loopback_fabric;
    fold_config_t        config;
    int                  nthreads;        /* resolved FOLD_NUM_THREADS */
    long                 spin_count;      /* resolved FOLD_SPIN_COUNT */
    int                 *node_of;         /* node index of every context rank */
    int                  nnodes;
    int                  local_rank;
    int                  local_size;
    fold_comm_t         *world;
    fold_comm_t        **comms;           /* every live communicator, world first */
    int                  ncomms;
    int                  comms_cap;
    uint32_t             next_comm_id;
    fold_wire_counters_t wire;
};

typedef struct fold_sched_entry {
    fold_coll_args_t  args;
    const fold_alg_t *alg;        /* NULL for internal collectives */
    fold_sched_t      sched;
    uint64_t          last_use;
    int               refs;       /* requests running it */
    fold_request_t   *spare;      /* a finished request kept for reuse */
    uint8_t          *peer_dense; /* per rank: its latest message in this schedule
                                     carried dense data (exec_wire.c); NULL: none did */
} fold_sched_entry_t;

/* A staging buffer for encoded messages (exec_wire.c). */
typedef struct fold_wire_buf {
    void  *buf;
    size_t size;
    size_t len;    /* bytes of the encoded message it holds */
    int    busy;
} fold_wire_buf_t;
#define FOLD_WIRE_POOL 32

typedef struct fold_scratch {
    void  *buf;
    size_t size;
    int    busy;
} fold_scratch_t;

struct fold_comm {
    uint32_t            magic;
    fold_context_t     *ctx;
    int                 rank;
    int                 size;
    fold_rank_map_t     map;
    uint32_t            id;
    uint8_t             coll_seq;
    int                 active_requests;
    uint64_t            use_clock;
    fold_sched_entry_t  cache[FOLD_SCHED_CACHE_SIZE];
    fold_scratch_t      scratch[4];
    fold_wire_buf_t     wire_pool[FOLD_WIRE_POOL];
    fold_shape_t        shape;    /* nodes and ranks per node, for selection */
    fold_select_cache_t select;   /* the cost model's decisions */
    fold_node_t        *node;     /* NULL until a node-aware algorithm first runs
                                     (fold_comm_node) */
    uint8_t            *remote;   /* per rank: on another node; NULL: all on this one */
};

struct fold_request {
    uint32_t            magic;
    fold_comm_t        *comm;
    fold_sched_entry_t *entry;
    const fold_sched_t *sched;
    size_t              nsteps_cap;   /* arrays below are sized for this many steps */
    char               *buf[FOLD_BUF_COUNT];  /* IN, OUT, TMP, SHM */
    fold_scratch_t     *scratch;
    fold_dtype_t        dtype;
    fold_op_t           op;
    size_t              esize;
    uint64_t            tag_base;
    uint32_t           *pending;      /* per step: predecessors not yet done */
    uint32_t           *queue;        /* ready steps (FIFO) */
    size_t              qhead, qtail;
    uint32_t           *active;       /* posted transport steps */
    uint8_t            *soft;         /* per step with a soft wait (sched.h): SOFT_* */
    size_t              soft_left;    /* soft waits neither met nor dropped */
    size_t              nactive;
    fold_tl_req_t      *tlreq;        /* per step */
    struct fold_codec_stats *stats;   /* per step: density a reduction counted */
    fold_wire_buf_t   **staging;      /* per step: the encoded message a send holds */
    int                 codec_accept; /* encoded messages are valid for this op/dtype */
    int                 codec_mask;   /* codecs this request's sends may use */
    size_t              ndone;
    int                 status;
    unsigned            idle_polls;
    double              last_progress;
    const char         *alg_name;
    fold_coll_t         coll;
    int                 user_owned;   /* handed out by an i-call, freed by the user */
    fold_node_turn_t    turn;         /* node-aware calls: its turn on the segment
                                         (epoch 0: none) */
};

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
int  fold_comm_valid(const fold_comm_t *comm);
int  fold_context_add_comm(fold_context_t *ctx, fold_comm_t *comm);
void fold_context_remove_comm(fold_context_t *ctx, fold_comm_t *comm);

/* comm.c */
int  fold_comm_create(fold_context_t *ctx, int size, int rank, const int *ctx_ranks,
                      uint32_t id, fold_comm_t **comm_p);
void fold_comm_destroy(fold_comm_t *comm);
/* The communicator's node state, set up at the first call that needs it: collective
 * over comm (every rank must ask at the same call). */
int  fold_comm_node(fold_comm_t *comm, fold_node_t **node_p);

/* exec.c: start a schedule (blocking callers then wait on it). */
typedef struct fold_exec_args {
    fold_coll_t       coll;
    const fold_alg_t *alg;           /* NULL: internal collective with `build` */
    fold_alg_build_fn build;
    fold_coll_args_t  cargs;
    const void       *in;
    void             *out;
    fold_dtype_t      dtype;
    fold_op_t         op;
    int               fast;          /* selection allows shm_flat's tiny-message path */
} fold_exec_args_t;

int  fold_exec_start(fold_comm_t *comm, const fold_exec_args_t *args, fold_request_t **req_p);
/* A blocking call: the node's fast path where args->fast and the node allows it,
 * else a schedule started and waited for. */
int  fold_exec_run(fold_comm_t *comm, const fold_exec_args_t *args);
int  fold_exec_progress(fold_request_t *req);
int  fold_exec_wait(fold_request_t *req);
void fold_exec_release(fold_request_t *req);

/* exec_wire.c: sparse codecs on the wire (see there). */
void fold_wire_request_init(fold_request_t *req, const fold_exec_args_t *args);
void fold_wire_send_data(fold_request_t *req, uint32_t i, const void **data, size_t *len);
void fold_wire_send_done(fold_request_t *req, uint32_t i);
int  fold_wire_length_ok(const fold_request_t *req, uint32_t i, size_t len);
int  fold_wire_recv_done(fold_request_t *req, uint32_t i, char *why, size_t whylen);
int  fold_wire_reduce(fold_request_t *req, uint32_t i, char *why, size_t whylen);
void fold_wire_pool_free(fold_comm_t *comm);

/* plan.c: a selection's choice -> the executor's arguments (node-aware fields
 * included, setting up the node state on first use). */
typedef struct fold_call {
    fold_coll_t  coll;
    const void  *in;
    void        *out;     /* NULL where this rank gets no result */
    size_t       count;
    fold_dtype_t dtype;
    fold_op_t    op;
    int          root;
    int          inplace;
} fold_call_t;
int fold_coll_plan(fold_comm_t *comm, const fold_call_t *call, const fold_choice_t *choice,
                   fold_exec_args_t *args);

/* select.c (select.h has the rule language) */
/* Chooses the algorithm of a call and, for node-aware ones, the leaders per node and
 * the flat algorithm between nodes; the same on every rank of comm. */
int fold_select(fold_comm_t *comm, fold_coll_t coll, size_t count, fold_dtype_t dtype,
                fold_op_t op, fold_choice_t *choice);
/* Re-reads FOLD_TUNE, FOLD_TUNE_FILE, FOLD_MODEL and FOLD_*_ALG from ctx->config. */
int  fold_select_configure(fold_context_t *ctx);
void fold_select_cache_clear(fold_comm_t *comm);
/* Internals shared with select_advice.c: */
const fold_tune_rule_t *fold_select_find_rule(const fold_context_t *ctx, fold_coll_t coll,
                                              size_t bytes, const fold_shape_t *shape,
                                              unsigned skip_flags);
int    fold_select_class(size_t bytes);              /* power-of-two size class */
int    fold_select_topos(fold_comm_t *comm);         /* the model's view of comm */
double fold_select_predict(fold_comm_t *comm, const fold_topo_t *topo, fold_coll_t coll,
                           const fold_alg_t *alg, size_t bytes, int leaders,
                           const fold_alg_t *inter);
/* The best flat algorithm's predicted time on comm: what an MPI library would run
 * (select_advice.c). */
double fold_select_flat_us(fold_comm_t *comm, fold_coll_t coll, size_t bytes);
/* alg's predicted time on comm, with its best leaders for a node-aware one. */
double fold_select_evaluate(fold_comm_t *comm, fold_coll_t coll, const fold_alg_t *alg,
                            size_t bytes, fold_choice_t *choice);
void fold_select_cache_free(fold_comm_t *comm);
size_t fold_default_segment(const fold_alg_t *alg, size_t bytes);
/* Elements per pipeline segment for a call of `bytes` (FOLD_SEGMENT_SIZE or auto). */
size_t fold_select_seg_count(const fold_context_t *ctx, const fold_alg_t *alg, size_t bytes,
                             size_t esize);

#endif
