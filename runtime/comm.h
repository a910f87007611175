/*
 * A communicator: its ranks (a compressed map onto the context's), what it keeps
 * for its calls (schedule cache, scratch, wire buffers, selection decisions) and
 * its node state. Internal only.
 */
#ifndef FOLD_COMM_H
#define FOLD_COMM_H

#include "context.h"
#include "coll/exec.h"
#include "coll/select.h"
#include "group/rankmap.h"
#include "node/node.h"
#include "util/clock.h"

#include <stdint.h>

struct fold_comm {
    uint32_t            magic;
    fold_context_t     *ctx;
    int                 rank;
    int                 size;
    fold_rankmap_t      map;      /* comm rank <-> context rank (group/rankmap.h) */
    uint32_t            id;
    uint8_t             coll_seq;
    uint64_t            check_calls;   /* calls FOLD_CHECK compared (coll/check.c) */
    int                 active_requests;
    uint64_t            use_clock;
    fold_sched_entry_t  cache[FOLD_SCHED_CACHE_SIZE];
    fold_scratch_t      scratch[4];
    fold_wire_buf_t     wire_pool[FOLD_WIRE_POOL];
    fold_shape_t        shape;    /* nodes and ranks per node, for selection */
    fold_select_cache_t select;   /* the cost model's decisions */
    struct fold_online *online;   /* what calls learned of them (select_online.h); NULL
                                     until a blocking call had rivals to try */
    fold_node_t        *node;     /* NULL until a node-aware algorithm first runs
                                     (fold_comm_node) */
    int                 node_none;  /* its node state could not be had (no segment):
                                       the node-unaware algorithms only */
    char                node_why[256];  /* why, the same words on every rank */
    int                 node_index;  /* this rank's node (the context's numbering) */
    fold_remote_t       remote_fn;   /* peers on another node, from the map and the
                                        context's node layout */
    const fold_remote_t *remote;  /* &remote_fn, or NULL: all on this node */
};

/* Whether comm rank `rank` runs on another node than this rank: the one answer
 * the executor's plan (soft waits, coll/exec_plan.h) and the wire codecs both use. */
static inline int fold_comm_peer_remote(const fold_comm_t *comm, int rank)
{
    return fold_remote_peer(comm->remote, rank);
}

/* Context rank of comm rank r: every translation goes through the rank map. */
static inline int fold_comm_ctx_rank(fold_comm_t *comm, int r)
{
    return fold_rankmap_ctx(&comm->map, r);
}

/* comm.c */
int  fold_comm_create(fold_context_t *ctx, int size, int rank, const int *ctx_ranks,
                      uint32_t id, fold_comm_t **comm_p);
void fold_comm_destroy(fold_comm_t *comm);
/* The communicator's node state, set up at the first call that needs it: collective
 * over comm (every rank must ask at the same call). FOLD_ERR_UNSUPPORTED, on every
 * rank alike, when a node could not have its segment (comm->node_why says why); the
 * communicator keeps to the node-unaware algorithms from then on. */
int  fold_comm_node(fold_comm_t *comm, fold_node_t **node_p);
/* Whether comm has no node state yet and selection could use one for coll: a node
 * holds several of its ranks and coll is not forced onto a node-unaware algorithm. */
int  fold_comm_node_wanted(const fold_comm_t *comm, fold_coll_t coll);
/* fold_init (FOLD_WORLD_SETUP=init): the world's node state and its selection's
 * decisions at once, over the bootstrap, so that the first collective of each size
 * costs what later ones do. A node without its segment is no error here (the world
 * keeps to node-unaware algorithms). */
int  fold_comm_world_setup(fold_comm_t *world);
/* `bytes` (a multiple of 4) from every rank of comm into all[rank]: collective. */
int  fold_comm_allgather(fold_comm_t *comm, const void *mine, void *all, size_t bytes);

#endif
