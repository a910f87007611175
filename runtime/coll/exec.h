/*
 * The executor's objects: a request (one running schedule), the schedule cache
 * entries and scratch buffers a communicator keeps for it, and the calls that
 * start, drive and finish requests. Internal only.
 */
#ifndef FOLD_EXEC_H
#define FOLD_EXEC_H

#include "context.h"
#include "coll/exec_plan.h"
#include "coll/sched.h"
#include "node/node.h"
#include "fingerprint.h"

#include <stddef.h>
#include <stdint.h>

#define FOLD_SCHED_CACHE_SIZE 16   /* schedule cache entries per communicator */

typedef struct fold_sched_entry {
    fold_coll_args_t  args;
    const fold_alg_t *alg;        /* NULL for internal collectives */
    fold_sched_t      sched;
    fold_wire_plan_t  plan;       /* the executor's decisions about it (exec_plan.h) */
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

/* The call's fingerprint on a first message to a peer (exec_fp.c). */
#define FOLD_EXEC_FP_NONE 0
typedef struct fold_exec_fp {
    fold_tl_req_t beside;   /* a large message's fingerprint, sent beside it */
    size_t        off;      /* its bytes in the request's arena */
    uint8_t       mode;     /* FOLD_EXEC_FP_NONE: the step carries none */
} fold_exec_fp_t;

typedef struct fold_scratch {
    void  *buf;
    size_t size;
    int    busy;
    int    spare;   /* allocated for one call past the communicator's pool: freed after */
} fold_scratch_t;

struct fold_request {
    uint32_t            magic;
    fold_comm_t        *comm;
    fold_sched_entry_t *entry;
    const fold_sched_t *sched;
    const fold_wire_plan_t *plan;     /* entry->plan */
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
    uint8_t            *soft;         /* per step with a soft wait (exec_plan.h): SOFT_* */
    size_t              soft_left;    /* soft waits neither met nor dropped */
    size_t              nactive;
    fold_tl_req_t      *tlreq;        /* per step */
    struct fold_codec_stats *stats;   /* per step: density a reduction counted */
    fold_wire_buf_t   **staging;      /* per step: the encoded message a send holds */
    fold_exec_fp_t     *fp;           /* per step: the call's fingerprint it carries */
    char               *fp_arena;     /* their bytes (kept with the request) */
    uint64_t            fp_wire[4];   /* this call's fingerprint as it travels (exec_fp.c) */
    size_t              fp_arena_size;
    int                 codec_accept; /* encoded messages are valid for this op/dtype */
    int                 codec_mask;   /* codecs this request's sends may use */
    size_t              ndone;
    int                 status;
    unsigned            idle_polls;
    double              last_progress;
    const char         *alg_name;
    fold_coll_t         coll;
    int                 user_owned;   /* handed out by an i-call, freed by the user */
    int                 peer_published; /* IN/OUT published this call (shm_turn) */
    const char         *view;         /* a peer's bytes that reduction view_step folds
                                         where they lie (exec_plan.h), or NULL */
    uint32_t            view_step;
    uint32_t            along_made;   /* the reduction that last made its writes along
                                         (exec_plan.h), whose writes have nothing to do */
    int                 single_copy;  /* its schedule reads or writes other ranks'
                                         buffers (FOLD_ALG_SINGLE_COPY) */
    int                 memory;       /* fold_exec_args_t's, for the fingerprint */
    int                 adopt_passes; /* fold_exec_args_t's */
    int                 adopt_steps;  /* ... */
    int                 stream_out;   /* reductions into OUT stream their results
                                         (a call of at least ctx->stream_min bytes) */
    fold_node_turn_t    turn;         /* node-aware calls: its turn on the segment
                                         (epoch 0: none) */
    double             *trace;        /* FOLD_TRACE's call: per step start and end,
                                         then the start time (exec_trace.c); else NULL */
};

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
    int               fast;          /* run the node's tiny-message path (fold_coll_plan
                                        found it allowed): only coll, alg, count, root,
                                        in, out, dtype and op are set */
    int               memory;        /* the choice's (select.h): chosen for buffers in
                                        fold memory; the call's fingerprint says so */
    int               adopt_passes;  /* the pass of its buffers that adopts them
                                        (fold_select_adopt_passes); 0: never */
    int               adopt_steps;   /* the calls its adoption is spread over
                                        (fold_select_adopt_steps); <= 1: one */
} fold_exec_args_t;

int  fold_exec_start(fold_comm_t *comm, const fold_exec_args_t *args, fold_request_t **req_p);
/* A blocking call: the node's fast path where fold_coll_plan chose it (args->fast),
 * else a schedule started and waited for. */
int  fold_exec_run(fold_comm_t *comm, const fold_exec_args_t *args);
int  fold_exec_progress(fold_request_t *req);
int  fold_exec_wait(fold_request_t *req);
void fold_exec_release(fold_request_t *req);
/* Step i's dense reduction, SRC op SRC2 -> DST: into the node segment through an L1
 * block (fold_reduce_local_shared), a large call's result streamed (final_out). */
int  fold_exec_reduce_dense(const fold_request_t *req, uint32_t i);
/* Frees a request the executor allocated (NULL: nothing). */
void fold_exec_request_free(fold_request_t *req);
/* Frees every cached schedule of comm with its plan and spare request. */
void fold_exec_cache_free(fold_comm_t *comm);
/* FOLD_OK when a transport with these caps keeps what the executor relies on;
 * otherwise logs each missing guarantee and returns FOLD_ERR_UNSUPPORTED. */
int  fold_exec_check_caps(const fold_tl_caps_t *caps);

/* exec_wire.c: sparse codecs on the wire (see there). */
void fold_wire_request_init(fold_request_t *req, const fold_exec_args_t *args);
void fold_wire_send_data(fold_request_t *req, uint32_t i, const void **data, size_t *len);
void fold_wire_send_done(fold_request_t *req, uint32_t i);
int  fold_wire_length_ok(const fold_request_t *req, uint32_t i, size_t len);
int  fold_wire_recv_done(fold_request_t *req, uint32_t i, char *why, size_t whylen);
int  fold_wire_reduce(fold_request_t *req, uint32_t i, char *why, size_t whylen);
void fold_wire_pool_free(fold_comm_t *comm);

/* exec_fp.c: the call's fingerprint on the first message to each peer (see there). */
fold_fingerprint_t fold_exec_fingerprint(const fold_request_t *req);
int  fold_exec_fp_init(fold_request_t *req);
int  fold_exec_fp_send(fold_request_t *req, uint32_t i, int peer, uint64_t tag, const void *data,
                       size_t len);
int  fold_exec_fp_recv(fold_request_t *req, uint32_t i, int peer, uint64_t tag, void *data,
                       size_t len);
/* 0 while the step's fingerprint message is still under way (1 for other steps). */
int  fold_exec_fp_done(const fold_request_t *req, uint32_t i);
void fold_exec_fp_cancel(fold_request_t *req, uint32_t i);
/* After the transfer: compares (a receive's inline fingerprint: strips it and puts
 * the data where the step wants it); FOLD_ERR_MISMATCH and why when they differ. */
int  fold_exec_fp_check(fold_request_t *req, uint32_t i, char *why, size_t whylen);
/* A receive from a peer failed its checks: FOLD_ERR_MISMATCH and why where the
 * peer's fingerprint of this call shows the calls differ, else FOLD_OK. */
int  fold_exec_fp_explain(fold_request_t *req, uint32_t i, char *why, size_t whylen);

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
    int          blocking;   /* the caller waits: the tiny-message path may serve it */
} fold_call_t;
int fold_coll_plan(fold_comm_t *comm, const fold_call_t *call, const fold_choice_t *choice,
                   fold_exec_args_t *args);
/* Whether a call that repeats a tiny one (fold_select_repeats_tiny) may go straight to
 * the node's tiny-message path, as fold_coll_plan would send it: no resync to catch up
 * with (node/resync.c), and the path still open. */
int fold_coll_tiny_ready(const fold_comm_t *comm, const fold_call_t *call);
/* exec.c: a blocking call on the node's tiny-message path (fold_exec_run's args->fast,
 * or a repeated call that fold_coll_tiny_ready let through). */
int fold_exec_tiny(fold_comm_t *comm, const fold_call_t *call);
/* check.c (FOLD_CHECK=1): compares the call with every rank's; FOLD_ERR_MISMATCH on
 * every rank, with one line naming the ranks and the field, when they differ. */
int fold_coll_check(fold_comm_t *comm, const fold_call_t *call);
/* A blocking allreduce of int64 over comm for fold's own questions (the check, the
 * agreement on buffers' placement), as selection picks it (on one node, the node's
 * tiny-message path), without checking itself. */
int fold_coll_allreduce_int64(fold_comm_t *comm, const int64_t *in, int64_t *out, size_t count,
                              fold_op_t op);
/* Before a communicator's first selection: where some of its ranks share a node
 * and a node-aware algorithm may be selected, its node state (collective; every
 * rank of comm calls it at the same call), so that selection knows what the node
 * allows (single copy). */
int fold_coll_prepare(fold_comm_t *comm, fold_coll_t coll);

#endif
