/*
 * The algorithm registry. One algorithm per file, each exporting a fold_alg_t; the
 * table in alg_table.c lists them in the order fold_info prints them.
 */
#ifndef FOLD_ALG_H
#define FOLD_ALG_H

#include "sched.h"

typedef int (*fold_alg_build_fn)(const fold_coll_args_t *args, fold_sched_t *s);

enum {
    /* Gives the rank-ordered result x0 op x1 op ... op x(p-1), so it serves
     * non-commutative ops; otherwise the selection falls back to one that does. */
    FOLD_ALG_ORDERED = 1u << 0,
    /* Uses the node topology and segment (args->topo, leaders, shm_count, inter). */
    FOLD_ALG_NODE_AWARE = 1u << 1,
    /* Reads and writes other local ranks' buffers (node/peer.c): one node only, and
     * only where the node's set-up found that the kernel allows it. */
    FOLD_ALG_SINGLE_COPY = 1u << 2,
    /* A rank's chunks depend on no other rank's order: the executor runs every other
     * call of a shape backward (args->backward), so that a call starts on the chunks
     * the one before ended on, still in the cache where the buffers are larger than
     * it. */
    FOLD_ALG_ALTERNATES = 1u << 3,
};

typedef struct fold_alg {
    const char        *name;
    const char        *description;   /* one line, for fold_info */
    fold_alg_build_fn  allreduce;     /* NULL: not an allreduce algorithm */
    fold_alg_build_fn  reduce;        /* NULL: not a reduce algorithm */
    unsigned           flags;
} fold_alg_t;

extern const fold_alg_t fold_alg_binomial;
extern const fold_alg_t fold_alg_rabenseifner;
extern const fold_alg_t fold_alg_ring;
extern const fold_alg_t fold_alg_chain;
extern const fold_alg_t fold_alg_bintree;
extern const fold_alg_t fold_alg_greedy;
extern const fold_alg_t fold_alg_recursive_doubling;
extern const fold_alg_t fold_alg_dpml;
extern const fold_alg_t fold_alg_dpml_pipelined;
extern const fold_alg_t fold_alg_shm_flat;
extern const fold_alg_t fold_alg_cma;

extern const fold_alg_t *const fold_alg_all[];   /* NULL-terminated */
const fold_alg_t *fold_alg_find(const char *name);
fold_alg_build_fn fold_alg_builder(const fold_alg_t *alg, fold_coll_t coll);

/* Internal collectives used by the runtime itself. */
int fold_build_bcast_binomial(const fold_coll_args_t *args, fold_sched_t *s);
int fold_build_barrier_dissemination(const fold_coll_args_t *args, fold_sched_t *s);
int fold_build_allgather_ring(const fold_coll_args_t *args, fold_sched_t *s);

#endif
