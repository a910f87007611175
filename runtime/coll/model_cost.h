/*
 * What the cost model charges each step of a node's schedules on its rank's CPU, for
 * simulators other than the model's own (tools' fold_sim replays the schedules in
 * SimGrid and prices the CPU's part as the model does, so that the two differ only
 * in how messages and flags move). Implemented in model.c, where the rates live.
 */
#ifndef FOLD_MODEL_COST_H
#define FOLD_MODEL_COST_H

#include "model.h"

#include <stddef.h>

/*
 * The CPU time in microseconds of every step of node `node`'s schedules on topo:
 * sched[l] is the finalized schedule of the node's local rank l (all of them, for
 * the node's working set), and cost receives their steps' times one schedule after
 * the other (local rank 0's steps first). Each is step_us plus, for copies,
 * reductions and peer reads and writes, their bytes at the rates the model gives
 * that rank on that node (model.h); a flag post's is step_us alone. Sends, receives
 * and waits cost step_us: their data and flags move without the CPU. ws_scale is
 * fold_model_query_t's. FOLD_OK or FOLD_ERR_INVALID_ARG / FOLD_ERR_NO_MEMORY.
 */
int fold_model_step_costs(const fold_model_params_t *p, const fold_topo_t *topo, int node,
                          fold_sched_t *const *sched, size_t esize, double ws_scale,
                          double *cost);

/*
 * The per-byte times (us) the model gives one rank: its node of ppn ranks touches
 * node_ws bytes in all (the segment once), the rank priv of them (its IN, OUT and
 * TMP extents) and the node's other ranks at most `theirs` each. copy and reduce for
 * its copies and reductions (reduce: per byte of result); fold_cache and stream_mem
 * the in-cache and per-stream memory parts of a fold of rows; fold a fold from the
 * segment into its own buffer; kernel a peer read or write by the kernel.
 */
typedef struct fold_model_rates {
    double copy, reduce, fold_cache, stream_mem, fold, kernel;
} fold_model_rates_t;
void fold_model_rank_rates(const fold_model_params_t *p, int ppn, double node_ws, double priv,
                           double theirs, fold_model_rates_t *r);

#endif
