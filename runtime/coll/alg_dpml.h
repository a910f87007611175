/*
 * DPML (Bayatpour et al., SC17): data-partitioning multi-leader allreduce and
 * reduce. Shared by alg_dpml.c (the builder and "dpml") and alg_dpml_pipelined.c
 * ("dpml_pipelined"), which differ only in their layout.
 */
#ifndef FOLD_ALG_DPML_H
#define FOLD_ALG_DPML_H

#include "alg.h"

/*
 * How a call is cut. A chunk of at most chunk_cap = leaders * part_cap elements
 * goes through the segment at a time, in one of `stages` stage buffers (chunk k in
 * stage k mod stages), so that the phases of successive chunks overlap. Leader j
 * owns block j of each chunk; it cuts its block into `subparts` sub-partitions,
 * each reduced, exchanged between nodes and published on its own.
 *
 * Segment of a node with ppn ranks: stage s, row i (local rank i), partition j is
 *   SHM[(s * R + i) * leaders * part_cap + j * part_cap ...], part_cap elements,
 * R = ppn + results. Row i is written by rank i only: its copies of the chunk for
 * the other leaders. Where i leads partition j, it publishes the result of j in
 * place of its own copy; or, with `results` (three leaders or more), in the stage's
 * row ppn, the result row, at j's offset within the chunk: there the leaders'
 * results lie side by side as in the caller's buffer, and a rank copies a chunk out
 * in one piece after one wait instead of one of each per leader.
 */
typedef struct fold_dpml_layout {
    int    leaders;
    int    stages;
    int    subparts;
    size_t part_cap;     /* elements; leaders x part_cap a multiple of 64 unless the
                            segment is tiny */
    size_t chunk_cap;    /* leaders * part_cap */
    size_t nchunks;
    int    uses_shm;     /* some node has more than one rank */
    int    results;      /* 1: a stage ends with the result row (above) */
} fold_dpml_layout_t;

/* Pure function of args (and the variant); the same on every rank, since chunks
 * must agree between nodes. FOLD_ERR_INVALID_ARG when the segment is too small. */
int fold_dpml_layout(const fold_coll_args_t *args, int pipelined, fold_dpml_layout_t *lay);

/* Builds the DPML schedule of one rank (allreduce or reduce). */
int fold_dpml_build(const fold_coll_args_t *args, fold_sched_t *s, int pipelined);

#endif
