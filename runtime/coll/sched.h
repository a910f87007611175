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
 * write-after-read, write-after-write), directly or through a chain of such steps
 * (it records the last writer and the readers since, per element range). So a builder emits steps in the order they
 * would run sequentially, and reuses a scratch slot simply by naming it again.
 * Every edge is about buffers: a schedule is steps, their dependencies and the
 * buffers they use. What the executor decides beyond that (which messages a codec
 * may fuse with a reduction, which answers to a peer on another node wait for this
 * rank's own sends) is its plan, computed from the finished schedule
 * (coll/exec_plan.h).
 *
 * Message matching: the k-th send from rank a to rank b matches the k-th receive
 * posted by b from a (finalize numbers them). Both sides must therefore emit their
 * messages between a given pair in the same logical order, with equal counts.
 *
 * Node shared memory (node-aware algorithms only): SHM is the communicator's node
 * segment, shared by the ranks of this node; each of them has FOLD_SHM_NFLAGS
 * sequence flags there. A post sets one of this rank's flags once every earlier
 * step touching its range is done; a wait completes when another local rank's flag
 * reaches a value, and every later step touching its range runs after it. Both
 * count as writes of their range, so they order against readers and writers alike;
 * posts to one flag also keep their order. Flag values are per call: the executor
 * maps value v of the call with epoch e (1, 2, ...) to (e - 1) * 2^32 + v, so a
 * wait for 0 waits for the previous call's FOLD_SHM_CALL_DONE.
 *
 * Peer memory (single copy, node-aware algorithms only): PEER stands for another
 * local rank's IN or OUT, reached through the kernel (cross-memory attach). A peer
 * read copies from a local rank's IN or OUT into this rank's buffer, a peer write
 * from this rank's buffer into a local rank's OUT. The executor publishes this
 * rank's IN and OUT addresses when the call takes its turn on the segment; the
 * builder makes every peer access wait (shm wait on PEER's range) for the owner's
 * post that says it has published, for the owner's results before reading them,
 * and keeps the call open until every rank it reads or writes is done with it.
 */
#ifndef FOLD_SCHED_H
#define FOLD_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef enum fold_buf_id {
    FOLD_BUF_IN = 0, FOLD_BUF_OUT = 1, FOLD_BUF_TMP = 2, FOLD_BUF_SHM = 3,
    FOLD_BUF_PEER = 4,    /* another local rank's IN or OUT (peer steps only) */
    FOLD_BUF_COUNT
} fold_buf_id_t;

/* A post of this value says "this rank is done with the segment for this call". */
#define FOLD_SHM_CALL_DONE ((uint64_t)1 << 32)

/* What the node-aware algorithms use each flag of a rank for. */
enum {
    FOLD_FLAG_WRITTEN,     /* chunks this rank has copied into the leaders' slots */
    FOLD_FLAG_PUBLISHED,   /* (sub-)partitions this leader has finished */
    FOLD_FLAG_COPIED,      /* chunks this rank has copied out of the leaders' results */
    FOLD_FLAG_DONE         /* calls this rank is done with */
};
const char *fold_flag_name(int flag);

typedef struct fold_ref {
    uint8_t buf;    /* fold_buf_id_t */
    size_t  off;    /* element offset */
} fold_ref_t;

static inline fold_ref_t fold_ref_in(size_t off)  { fold_ref_t r = {FOLD_BUF_IN, off};  return r; }
static inline fold_ref_t fold_ref_out(size_t off) { fold_ref_t r = {FOLD_BUF_OUT, off}; return r; }
static inline fold_ref_t fold_ref_tmp(size_t off) { fold_ref_t r = {FOLD_BUF_TMP, off}; return r; }
static inline fold_ref_t fold_ref_shm(size_t off) { fold_ref_t r = {FOLD_BUF_SHM, off}; return r; }
static inline fold_ref_t fold_ref_peer(size_t off) { fold_ref_t r = {FOLD_BUF_PEER, off}; return r; }
static inline fold_ref_t fold_ref_add(fold_ref_t r, size_t n) { r.off += n; return r; }

typedef enum fold_step_kind {
    FOLD_STEP_SEND, FOLD_STEP_RECV, FOLD_STEP_REDUCE, FOLD_STEP_COPY,
    FOLD_STEP_SHM_POST, FOLD_STEP_SHM_WAIT, FOLD_STEP_PEER_READ, FOLD_STEP_PEER_WRITE,
    FOLD_STEP_REDUCE_ROWS   /* dst = ops[0] op ops[1] op ... op ops[n-1]: one step */
} fold_step_kind_t;

#define FOLD_STEP_NONE UINT32_MAX

typedef struct fold_step {
    uint8_t    kind;      /* fold_step_kind_t */
    uint8_t    flag;      /* shm post/wait: which flag of the rank; peer read/write:
                             which of the peer's buffers (FOLD_BUF_IN or _OUT) */
    int32_t    peer;      /* communicator rank (send/recv, peer read/write; shm wait:
                             the flag's owner, -1 = every other local rank) */
    int32_t    local;     /* shm wait, peer read/write: the owner's local index, -1 =
                             every other (shm wait only) */
    uint64_t   value;     /* shm post/wait: flag value within the call */
    uint32_t   seq;       /* message number within (peer, direction), set by finalize */
    uint32_t   nops;      /* reduce rows: operands, ops[ops_off .. ops_off + nops);
                             shm wait over ranges: the ranges it guards (else 0) */
    size_t     count;     /* elements */
    fold_ref_t src;       /* send: data; copy: source; reduce: left (lower-rank) operand */
    fold_ref_t src2;      /* reduce: right operand */
    fold_ref_t dst;       /* recv: target; copy, reduce: destination; shm post/wait: range */
    uint32_t   npred;     /* steps this one waits for (set by finalize) */
    uint32_t   succ_off;  /* its successors: succ[succ_off .. succ_off + nsucc) */
    uint32_t   nsucc;
    uint32_t   ops_off;   /* reduce rows: where its operands start in the schedule's ops */
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
    /* Node-aware algorithms only (zero for the others), filled by the executor: */
    const struct fold_topo *topo;   /* who shares a node, leader order */
    int    leaders;               /* leaders per node */
    int    root_weight;           /* single-copy reduce: the root's block against another
                                     owner's, in percent (0: equal); the root writes
                                     nothing back, so it can fold more */
    size_t shm_count;             /* node segment data capacity, elements */
    const struct fold_alg *inter; /* flat algorithm between nodes */
    /* FOLD_ALG_ALTERNATES only, set by the executor: this rank's chunks in descending
     * order (every other call of a shape; coll/exec.c). */
    int    backward;
} fold_coll_args_t;

typedef struct fold_sched {
    fold_step_t *steps;
    size_t       nsteps;
    size_t       cap;
    uint32_t    *succ;
    size_t       nsucc;
    size_t       succ_cap;
    fold_ref_t  *ops;         /* reduce rows' operands, in order; waits' ranges */
    size_t       nops;
    size_t       ops_cap;
    size_t       tmp_count;   /* scratch elements used */
    size_t       shm_count;   /* node segment elements used */
    int          uses_shm;    /* references SHM or has shm steps */
    int          uses_peer;   /* has peer reads or writes */
    int          uses_tl;     /* has sends or receives (set by finalize) */
    int          inplace;
    int          serial;      /* fold_sched_serial: local steps run in the order built */
    int          has_out;     /* 0: OUT must not be referenced */
    int          status;      /* sticky: first error while building */
    int          count_only;  /* fold_sched_count_only: steps counted, not kept */
    fold_step_t  discard;     /* ... where they go */
} fold_sched_t;

void fold_sched_init(fold_sched_t *s, const fold_coll_args_t *args);
void fold_sched_cleanup(fold_sched_t *s);
/* fold_sched_init on a schedule that was built before, keeping its memory for the
 * next (the cost model builds thousands in a row). */
void fold_sched_reset(fold_sched_t *s, const fold_coll_args_t *args);
/* Before building: the schedule only counts its steps (nsteps, tmp_count and the
 * rest are as usual, steps[] stays empty): the cost model sizes a replay so. */
void fold_sched_count_only(fold_sched_t *s);

/* Builder primitives. They record the first error in s->status and return nothing,
 * so builders read as straight-line code. Zero-count steps are dropped. */
void fold_sched_send(fold_sched_t *s, int peer, fold_ref_t src, size_t count);
void fold_sched_recv(fold_sched_t *s, int peer, fold_ref_t dst, size_t count);
void fold_sched_copy(fold_sched_t *s, fold_ref_t src, fold_ref_t dst, size_t count);
/* dst = left op right; left holds the lower ranks' contribution. */
void fold_sched_reduce(fold_sched_t *s, fold_ref_t left, fold_ref_t right, fold_ref_t dst,
                       size_t count);

/*
 * dst = ops[0] op ops[1] op ... op ops[nops-1], left to right, as nops-1 reductions
 * chained through dst would compute it, bit for bit, but in one step: the executor
 * folds block by block with the accumulator in L1 and writes dst once, and pays
 * its per-step cost once. A node leader folding 63 rows paid it 63 times. dst may
 * be ops[0] exactly and overlap no other operand. Two operands make a plain
 * reduction, one a copy.
 */
void fold_sched_reduce_rows(fold_sched_t *s, const fold_ref_t *ops, int nops, fold_ref_t dst,
                            size_t count);

/* What step st reads: its k-th operand, k < fold_step_nreads(st) (sends, copies and
 * peer writes read src; reductions src then src2; reduce rows their ops). */
int        fold_step_nreads(const fold_step_t *st);
fold_ref_t fold_step_read(const fold_sched_t *s, const fold_step_t *st, int k);
/* What it writes (every step but a send: dst; a wait over ranges: its ranges).
 * A post also writes its flag, which is no buffer. */
int        fold_step_nwrites(const fold_step_t *st);
fold_ref_t fold_step_write(const fold_sched_t *s, const fold_step_t *st, int k);

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

/* The end of one segment [off, off + len) at a rank of an ordered reduce (chain or
 * in-order tree) that may end at a rank other than the root. `part` holds the rank's
 * partial result; it goes to `next`, the next hop. Where the structure ends (next < 0)
 * it goes on to the root, or, at the root, into OUT (a copy where it is still IN:
 * size 1). The root receives the result from `end` when that is another rank. */
void fold_sched_ordered_forward(fold_sched_t *s, int rank, int root, int next, int end,
                                fold_ref_t part, size_t off, size_t len);

/* Node shared memory: see the top of this file. */
void fold_sched_shm_post(fold_sched_t *s, int flag, uint64_t value, fold_ref_t range,
                         size_t count);
/* local = -1 (peer -1) waits for the flag of every other local rank. A wait with
 * count 0 guards nothing and is dropped. */
void fold_sched_shm_wait(fold_sched_t *s, int peer, int local, int flag, uint64_t value,
                         fold_ref_t range, size_t count);
/* One wait for the flag of every other local rank that guards n ranges of count
 * elements each (kept like reduce rows' operands): the rows a leader folds, one
 * per rank, which lie apart in the segment. A wait per row cost a node of 64 ranks
 * 63 executor steps per fold; one wait over the whole span of the rows would order
 * this rank's own next copy into its row after it, and lose the pipeline. */
void fold_sched_shm_wait_all(fold_sched_t *s, int flag, uint64_t value,
                             const fold_ref_t *ranges, int n, size_t count);

/* Single copy (see the top). The first step of a schedule whose rank's buffers
 * others read or write: posts `flag` = 1 once the executor has published IN and OUT. */
void fold_sched_peer_publish(fold_sched_t *s, int flag, size_t count);
/* dst = the local rank's `which` buffer (FOLD_BUF_IN or
 * FOLD_BUF_OUT) from element off, count elements; and the local rank's OUT from
 * element off = src. peer is its communicator rank, local its local index. */
void fold_sched_peer_read(fold_sched_t *s, int peer, int local, int which, size_t off,
                          fold_ref_t dst, size_t count);
void fold_sched_peer_write(fold_sched_t *s, fold_ref_t src, int peer, int local, size_t off,
                           size_t count);

/* Appends the steps of `inner` (built, not finalized) with its IN, OUT and TMP
 * mapped to in, out and TMP from tmp_base, and its peer q to peers[q]. */
void fold_sched_embed(fold_sched_t *s, const fold_sched_t *inner, fold_ref_t in,
                      fold_ref_t out, size_t tmp_base, const int *peers);

/* Derives dependencies and message numbers; returns s->status. */
/* This rank's local steps (copies, reductions, peer reads and writes) run in the
 * order they were built, each after the one before, besides what their buffers
 * order: for a schedule whose local steps cannot overlap anything (every one of them
 * runs on this core) and whose builder's order keeps each chunk in the cache from
 * one step to the next. Without it the executor may run any step that is ready, and
 * runs them in the order they became ready: all of the chunks' first steps first. */
void fold_sched_serial(fold_sched_t *s);
int fold_sched_finalize(fold_sched_t *s);
/* The same with working memory kept between calls (NULL from _new: no memory). */
typedef struct fold_sched_scratch fold_sched_scratch_t;
fold_sched_scratch_t *fold_sched_scratch_new(void);
void fold_sched_scratch_free(fold_sched_scratch_t *x);
int  fold_sched_finalize_with(fold_sched_t *s, fold_sched_scratch_t *x);

/* Schedules of one shape have the same dependencies (sched.c says when): the cost
 * model finalizes one of them and copies its dependencies to the others.
 * fold_sched_finalize_like fails (FOLD_ERR_INVALID_ARG) unless s, built and not
 * finalized, has the shape of `like`, finalized. The hash is equal for schedules
 * of one shape. */
uint64_t fold_sched_shape_hash(const fold_sched_t *s);
int      fold_sched_same_shape(const fold_sched_t *a, const fold_sched_t *b);
int      fold_sched_finalize_like(fold_sched_t *s, const fold_sched_t *like);

const char *fold_step_kind_name(int kind);
const char *fold_coll_name(fold_coll_t coll);
/* "allreduce" or "reduce" -> *coll; -1 for anything else (NULL included). */
int fold_reduction_from_name(const char *name, fold_coll_t *coll);

#endif
