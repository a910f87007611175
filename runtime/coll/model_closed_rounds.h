/*
 * The parts the cost model's closed forms are made of (model_closed.c), shared by
 * the flat algorithms' forms there and the node-aware ones' (model_closed_node.c):
 * a series of rounds, its time, and the prices of a node's copies and reductions.
 */
#ifndef FOLD_MODEL_CLOSED_ROUNDS_H
#define FOLD_MODEL_CLOSED_ROUNDS_H

#include "model.h"
#include "model_cost.h"

#define MAX_ROUNDS 80   /* twice the rounds of a 2^31-rank tree, and the pairing ones */

typedef struct round {
    double times, q, lat, wire, cpu, held;
    double alone;  /* wire where the segment crosses alone: a pipeline's first one */
    int    link;   /* 1: the node's link; 0: a channel within the node */
} round_t;

typedef struct rounds {
    round_t r[MAX_ROUNDS];
    int     n;
    int     spread;   /* each round is another rank's: a chain's, a tree's levels */
} rounds_t;

typedef struct series_time {
    double time;   /* the series alone */
    double cpu;    /* its busiest rank's CPU */
    double link;   /* the node's link, over every segment */
} series_time_t;

typedef struct closed {
    const fold_model_params_t *p;
    const fold_topo_t *topo;   /* where the ranks lie; NULL: in blocks of ppn */
    int    size, nodes, ppn;   /* ranks taking part; ppn: on the fullest node */
    int    rep;                /* the node whose ranks stand for every node's: a fullest */
    double share;           /* instances of the series crossing each node's link at once */
    double depth;           /* receive slots of a stream (FOLD_PIPELINE_DEPTH) */
    double intra_pb;        /* us per byte of a message within a node */
    fold_model_rates_t rates;
} closed_t;

/* Over topo's ranks, or (topo NULL) nodes of ppn ranks in blocks; `share` instances
 * of the series cross each node's link at once; priv and shm the bytes a rank and
 * the node segment touch (model_cost.h's rates). */
void fold_closed_init(closed_t *c, const fold_model_params_t *p, const fold_topo_t *topo,
                      int nodes, int ppn, double share, int depth, double priv, double shm);

/* c's rates for a node whose ranks touch node_ws bytes in all, the rank priced priv. */
void fold_closed_working_set(closed_t *c, double node_ws, double priv);

/* A copy's or reduction's start (move_us, up to 4 KiB of it) and a reduction of `bytes`
 * on one of c's ranks, its step included. */
double fold_closed_move(const fold_model_params_t *p, double bytes);
double fold_closed_reduce(const closed_t *c, double bytes);

/* Segments of b bytes in a round of `bytes` (at least one). */
double fold_closed_segs(double bytes, double b);

series_time_t fold_closed_series(const rounds_t *rs);

/* Whether flat algorithm alg has a form for the collective, and its rounds over c's
 * ranks for n bytes (count elements) in segments of b bytes. */
int fold_closed_has_form(const fold_alg_t *alg, int allreduce);
void fold_closed_flat(rounds_t *rs, const closed_t *c, const fold_alg_t *alg, int allreduce,
                      double n, double count, double b);

/* The node-aware algorithms' forms (model_closed_node.c): FOLD_OK and *us, or the
 * layout's error. */
int fold_closed_dpml(const fold_model_params_t *p, const fold_topo_t *topo,
                     const fold_model_query_t *q, int pipelined, double *us);
int fold_closed_shm_flat(const fold_model_params_t *p, const fold_topo_t *topo,
                         const fold_model_query_t *q, double *us);
int fold_closed_cma(const fold_model_params_t *p, const fold_topo_t *topo,
                    const fold_model_query_t *q, double *us);

#endif
