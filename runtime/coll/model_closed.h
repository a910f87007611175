/*
 * The cost model's closed forms: a schedule's time on a communicator too large to
 * replay, in a few hundred floating-point operations whatever its size. Every rank
 * of one part of a regular schedule (a flat algorithm's ranks, dpml's leaders, its
 * other ranks) does at the same time what the others of its part do, so one
 * timeline per part gives the whole, the ranks of a fullest node standing for every
 * node's (where they lie tells which of their messages cross between nodes);
 * model_closed.c derives it from the schedule's rounds at the replay's own prices
 * (model.h, model_cost.h). test_model_closed checks each form against replays on
 * shapes both can run.
 */
#ifndef FOLD_MODEL_CLOSED_H
#define FOLD_MODEL_CLOSED_H

#include "model.h"

/* 1 if q's algorithm and collective have a closed form on topo (two ranks or more). */
int fold_model_closed_covers(const fold_topo_t *topo, const fold_model_query_t *q);

/* The closed form's time for q on topo (res->time_us and root_us; steps 0). FOLD_OK,
 * FOLD_ERR_UNSUPPORTED where fold_model_closed_covers says no, or the layout's
 * FOLD_ERR_INVALID_ARG (a node segment too small for dpml's rows). */
int fold_model_closed(const fold_model_params_t *p, const fold_topo_t *topo,
                      const fold_model_query_t *q, fold_model_result_t *res);

#endif
