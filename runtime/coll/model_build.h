/*
 * One rank's schedule for a cost-model question, built and finalized as the model
 * builds it (model.c): for tools that replay the schedules themselves (fold_sim).
 */
#ifndef FOLD_MODEL_BUILD_H
#define FOLD_MODEL_BUILD_H

#include "model.h"

/* The arguments rank `rank` builds q on topo with: q->proto with the rank, topo's
 * size and, for a node-aware algorithm, topo. */
fold_coll_args_t fold_model_rank_args(const fold_topo_t *topo, const fold_model_query_t *q,
                                      int rank);

/* Builds and finalizes rank `rank`'s schedule of q on topo into s, which holds a
 * schedule built before or one fold_sched_init made: it is reset, keeping its memory
 * (ranks after ranks), and the caller cleans it up whatever the result. The args are
 * fold_model_rank_args'; x is the
 * finalisation's working memory kept between calls (NULL: its own). FOLD_OK or the
 * build's error, logged naming the algorithm and the rank. */
int fold_model_build_rank(const fold_topo_t *topo, const fold_model_query_t *q, int rank,
                          fold_sched_scratch_t *x, fold_sched_t *s);

#endif
