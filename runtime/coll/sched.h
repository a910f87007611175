/*
 * Schedules: what one rank does in one collective, as a list of steps (send, recv,
 * reduce, copy) over three symbolic buffers. An algorithm builds a schedule and
 * never calls a transport; the executor (exec.c) runs it.
 *
 * Buffers (offsets and counts are in elements):
 *   IN   the caller's input. With args->inplace it is the same memory as OUT (the
 *        builder must then never read IN[i] after writing OUT[i]).
 *   OUT  the caller's output. For reduce it exists at the root only: a non-root
 *        schedule that references OUT fails to build.
 *   TMP  scratch owned by the communicator; its size is the largest offset+count
 *        the schedule references. Keep it bounded (segments x depth), not O(count),
 *        wherever the algorithm allows.
 *
 * Dependencies are derived, not written: fold_sched_finalize() makes each step wait
 * for every earlier step whose buffer range it conflicts with (read-after-write,
 * write-after-read, write-after-write). So a builder emits steps in the order they
 * would run sequentially, and reuses a scratch slot simply by naming it again.
 *
 * Message matching: the k-th send from rank a to rank b matches the k-th receive
 * posted by b from a (finalize numbers them). Both sides must therefore emit their
 * messages between a given pair in the same logical order, with equal counts.
 */
#ifndef FOLD_SCHED_H
#define FOLD_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef enum fold_buf_id { FOLD_BUF_IN = 0, FOLD_BUF_OUT = 1, FOLD_BUF_TMP = 2 } fold_buf_id_t;

typedef struct fold_ref {
    uint8_t buf;    /* fold_buf_id_t */
    size_t  off;    /* element offset */
} fold_ref_t;

static inline fold_ref_t fold_ref_in(size_t off)  { fold_ref_t r = {FOLD_BUF_IN, off};  return r; }
static inline fold_ref_t fold_ref_out(size_t off) { fold_ref_t r = {FOLD_BUF_OUT, off}; return r; }
static inline fold_ref_t fold_ref_tmp(size_t off) { fold_ref_t r = {FOLD_BUF_TMP, off}; return r; }
static inline fold_ref_t fold_ref_add(fold_ref_t r, size_t n) { r.off += n; return r; }

typedef enum fold_step_kind {
    FOLD_STEP_SEND, FOLD_STEP_RECV, FOLD_STEP_REDUCE, FOLD_STEP_COPY
} fold_step_kind_t;

typedef struct fold_step {
    uint8_t    kind;      /* fold_step_kind_t */
    int32_t    peer;      /* communicator rank (send/recv) */
    uint32_t   seq;       /* message number within (peer, direction), set by finalize */
    size_t     count;     /* elements */
    fold_ref_t src;       /* send: data; copy: source; reduce: left (lower-rank) operand */
    fold_ref_t src2;      /* reduce: right operand */
    fold_ref_t dst;       /* recv: target; copy, reduce: destination */
    uint32_t   npred;     /* steps this one waits for (set by finalize) */
    uint32_t   succ_off;  /* its successors: succ[succ_off .. succ_off + nsucc) */
    uint32_t   nsucc;
} fold_step_t;

typedef enum fold_coll {
    FOLD_COLL_ALLREDUCE, FOLD_COLL_REDUCE, FOLD_COLL_BCAST, FOLD_COLL_BARRIER,
    FOLD_COLL_ALLGATHER, FOLD_COLL_COUNT
} fold_coll_t;

/* Everything a schedule may depend on: builders are pure functions of this. */
typedef struct fold_coll_args {
    fold_coll_t coll;
    int    rank;
    int    size;
    int    root;          /* reduce, bcast */
    size_t count;         /* elements (allgather: per rank) */
    size_t seg_count;     /* elements per pipeline segment, >= 1 */
    int    depth;         /* segments in flight per stream (scratch slots), >= 1 */
    int    inplace;       /* IN is OUT */
    int    commutative;   /* 0: keep the rank order x0 op x1 op ... op x(p-1) */
} fold_coll_args_t;

typedef struct fold_sched {
    fold_step_t *steps;
    size_t       nsteps;
    size_t       cap;
    uint32_t    *succ;
    size_t       nsucc;
    size_t       tmp_count;   /* scratch elements used */
    int          inplace;
    int          has_out;     /* 0: OUT must not be referenced */
    int          status;      /* sticky: first error while building */
} fold_sched_t;

void fold_sched_init(fold_sched_t *s, const fold_coll_args_t *args);
void fold_sched_cleanup(fold_sched_t *s);

/* Builder primitives. They record the first error in s->status and return nothing,
 * so builders read as straight-line code. Zero-count steps are dropped. */
void fold_sched_send(fold_sched_t *s, int peer, fold_ref_t src, size_t count);
void fold_sched_recv(fold_sched_t *s, int peer, fold_ref_t dst, size_t count);
void fold_sched_copy(fold_sched_t *s, fold_ref_t src, fold_ref_t dst, size_t count);
/* dst = left op right; left holds the lower ranks' contribution. */
void fold_sched_reduce(fold_sched_t *s, fold_ref_t left, fold_ref_t right, fold_ref_t dst,
                       size_t count);

/* Zero-byte message, for synchronisation (barrier). */
void fold_sched_signal(fold_sched_t *s, int peer);
void fold_sched_wait_signal(fold_sched_t *s, int peer);

/* Composite helpers shared by algorithms. Segmentation: `count` elements are sent
 * as ceil(count / seg) messages, so the matching calls on both sides must use the
 * same count and seg. */
void fold_sched_send_segs(fold_sched_t *s, int peer, fold_ref_t src, size_t count,
                          size_t seg);
void fold_sched_recv_segs(fold_sched_t *s, int peer, fold_ref_t dst, size_t count,
                          size_t seg);
/* Receives `count` elements from peer, segment by segment, into `depth` rotating
 * TMP slots starting at tmp_base (depth * seg elements), and reduces each segment:
 * dst = peer_is_left ? (recv op mine) : (mine op recv). */
void fold_sched_recv_reduce_segs(fold_sched_t *s, int peer, fold_ref_t mine,
                                 fold_ref_t dst, size_t count, size_t seg, int depth,
                                 size_t tmp_base, int peer_is_left);

/* Derives dependencies and message numbers; returns s->status. */
int fold_sched_finalize(fold_sched_t *s);

const char *fold_step_kind_name(int kind);
const char *fold_coll_name(fold_coll_t coll);

#endif
