/*
 * The executor's plan for one cached schedule: the decisions about the wire that
 * the executor takes from a finished schedule (its steps and dependencies) and the
 * communicator's node layout, kept beside the schedule, not in its steps. A
 * schedule says what moves where and after what; the plan says where codec work
 * may ride on a reduction (exec_wire.c) and which answers wait, softly, for this
 * rank's own sends (exec.c). Built once per cached schedule (exec_plan.c).
 *
 * Soft waits. A send to a peer on another node whose data derives from a message
 * that peer sent (an answer) waits for this rank's latest earlier send to it of data
 * not derived from its messages (soft), so the link carries first what the peer
 * needs first. The wait is soft: the executor drops it when the peer's message the
 * answer derives from (soft_src) arrives dense, for then the peer was not ahead of
 * this rank and the overlap costs nothing. A soft wait is not an edge of the
 * schedule: the executor counts it on top of the step's predecessors.
 *
 * Final results. A reduction or copy into OUT that no later step reads (no send, copy,
 * reduction or write to a peer takes from that range) writes the call's result;
 * a large call may write it with streaming stores (exec.c).
 *
 * Copies made along. A reduction into the node segment whose result a copy then
 * takes, unchanged, into OUT (a dpml leader's own block: it publishes the result
 * for the others and needs it itself) writes it into OUT too, from the block it
 * folds in L1, and the copy has nothing left to do: one pass over the result
 * instead of two. Only where nothing but the reduction and posts of its range come
 * before the copy (fold_plan_copy_along), so that writing OUT early changes
 * nothing another step sees.
 *
 * Peer reads folded from where they lie. In a serial schedule (single copy), a read
 * of another rank's buffer into a range whose next user is one reduction of exactly
 * that range is taken over by the reduction: where the executor finds the bytes in a
 * mapping of the peer's fold memory (node/xmap.c), the reduction folds them from
 * there and the read copies nothing (one pass over them instead of two); where it
 * does not, the reduction makes the read's copy first. Only where the range holds
 * nothing anyone reads afterwards: the reduction writes its result over it, or the
 * next step that touches it writes all of it.
 *
 * Results written along. In a serial schedule, the writes to other ranks' OUT that
 * follow a reduction and take its result, unchanged and whole (a single-copy
 * allreduce's owner hands each rank its block; a reduce's non-root hands the root
 * its block), may be made by the reduction itself: where the executor finds every
 * such OUT in a mapping of the rank's fold memory and the call streams its results,
 * the reduction streams the result into all of them and into its own destination
 * in one pass (exec.c), and the writes have nothing left to do. Its destination is
 * left unwritten where it is not OUT and nothing reads it afterwards (dst_dead).
 */
#ifndef FOLD_EXEC_PLAN_H
#define FOLD_EXEC_PLAN_H

#include "coll/sched.h"

#include <stddef.h>
#include <stdint.h>

/* Which peers run on another node than this rank, asked per peer: a communicator
 * answers from its rank map and the node layout, so it keeps no byte per rank. */
typedef struct fold_remote {
    int  (*other_node)(void *arg, int peer);
    void  *arg;
} fold_remote_t;

static inline int fold_remote_peer(const fold_remote_t *remote, int peer)
{
    return remote != NULL && remote->other_node(remote->arg, peer);
}

/* The answer from a node index per peer (tests, tools). */
typedef struct fold_remote_nodes {
    fold_remote_t remote;
    const int    *node_of;   /* node of every peer */
    int           node;      /* this rank's */
} fold_remote_nodes_t;

/* Fills r and returns &r->remote. */
const fold_remote_t *fold_remote_nodes(fold_remote_nodes_t *r, const int *node_of, int node);

typedef struct fold_plan_step {
    /* Sparse codecs (see exec_plan.c): */
    uint8_t  wire;        /* recv: 1 when the reduce that consumes it decodes it;
                             reduce: which operand is that receive's wire image
                             (1 src, 2 src2, 0 none) */
    uint8_t  counts;      /* reduce: a send forwards the result, so count its density;
                             2: only that send reads it, in TMP, so the reduction may
                             write it encoded straight for the send */
    uint32_t link;        /* reduce with a wire operand: the recv step; send: the
                             reduce that counted its data; FOLD_STEP_NONE otherwise */
    uint32_t fwd;         /* reduce with counts: the send forwarding its result */
    /* Soft waits (see the top): */
    uint32_t soft;        /* send: the own send this answer waits for while its peer
                             looks ahead; FOLD_STEP_NONE otherwise */
    uint32_t soft_src;    /* send with a soft wait: the latest receive from its peer
                             that its data derives from */
    uint32_t soft_first;  /* own send: the first answer softly waiting for it */
    uint32_t soft_next;   /* answer: the next one waiting for the same own send */
    /* Copies made along (see the top): */
    uint32_t copy_along;  /* reduce: the copy of its result into OUT it makes too;
                             FOLD_STEP_NONE otherwise */
    uint8_t  copied;      /* copy: its reduction made it (nothing left to do) */
    /* Streaming stores (exec.c): */
    uint8_t  final_out;   /* reduce or copy into OUT whose result no later step
                             reads (a peer write into another rank's OUT reads it):
                             the call's result, which a large call may stream to
                             memory */
    uint8_t  final_viewed;  /* reduce into OUT: the call's result, which no later step
                               reads, once its writes along are made and its viewed
                               operand (a peer read into this very range) is read
                               where it lies */
    /* Results written along (see the top): */
    uint8_t  writes_along;  /* reduce: how many peer writes right after it take its
                               result (0: none) */
    uint8_t  dst_dead;      /* reduce with writes along: no later step reads its
                               destination, which is not OUT */
    uint32_t written_by;    /* peer write: the reduce that may make it, or FOLD_STEP_NONE */
    /* Peer reads folded from where they lie (see the top): */
    uint8_t  view_operand;  /* reduce: which operand a peer read it took over fills
                               (1 src, 2 src2); 0 none */
    uint32_t viewed_by;     /* peer read: the reduce that took it over, or
                               FOLD_STEP_NONE */
    uint32_t view_of;       /* reduce: that peer read, or FOLD_STEP_NONE */
} fold_plan_step_t;

typedef struct fold_wire_plan {
    fold_plan_step_t *steps;       /* one per schedule step */
    size_t            nsteps;
    uint32_t         *soft_steps;  /* the steps with a soft wait, in order */
    size_t            nsoft;
} fold_wire_plan_t;

/* Builds the plan of a finalized schedule; remote says which peers are on another
 * node (NULL: none). FOLD_OK or FOLD_ERR_NO_MEMORY (plan then empty). */
int  fold_wire_plan_build(fold_wire_plan_t *plan, const fold_sched_t *s,
                          const fold_remote_t *remote);
void fold_wire_plan_free(fold_wire_plan_t *plan);

/* The copy reduction r (into the node segment) may make along (see the top), or
 * FOLD_STEP_NONE: it copies, unchanged and whole, the range r wrote into OUT, and
 * every step it waits for is r or a post right after r. The cost model prices such
 * a copy as one out of the core's own cache. */
uint32_t fold_plan_copy_along(const fold_sched_t *s, uint32_t r);
/* The reduction that takes peer read i over (see the top), *operand saying which of
 * its operands the read fills (1 src, 2 src2), or FOLD_STEP_NONE. The cost model
 * prices such a read through a mapping at nothing: the reduction reads its bytes. */
uint32_t fold_plan_peer_view(const fold_sched_t *s, uint32_t i, int *operand);
/* How many peer writes right after reduction r take its result, unchanged and whole,
 * into other ranks' OUT (see the top), at most FOLD_PLAN_ALONG_MAX; 0 outside serial
 * schedules. */
#define FOLD_PLAN_ALONG_MAX 15
int fold_plan_writes_along(const fold_sched_t *s, uint32_t r);

#endif
