/* One rank's finalized schedule for a cost-model question (model_build.h). */
#include "model_build.h"

#include "log.h"

#include <fold/fold_status.h>

fold_coll_args_t fold_model_rank_args(const fold_topo_t *topo, const fold_model_query_t *q,
                                      int rank)
{
    fold_coll_args_t args = q->proto;
    args.rank = rank;
    args.size = topo->size;
    args.topo = (q->alg->flags & FOLD_ALG_NODE_AWARE) ? topo : NULL;
    return args;
}

int fold_model_build_rank(const fold_topo_t *topo, const fold_model_query_t *q, int rank,
                          fold_sched_scratch_t *x, fold_sched_t *s)
{
    fold_coll_args_t args = fold_model_rank_args(topo, q, rank);
    fold_sched_reset(s, &args);
    fold_alg_build_fn build = fold_alg_builder(q->alg, args.coll);
    int status = build != NULL ? build(&args, s) : FOLD_ERR_INVALID_ARG;
    if (status == FOLD_OK) {
        status = s->status;
    }
    if (status == FOLD_OK) {
        status = x != NULL ? fold_sched_finalize_with(s, x) : fold_sched_finalize(s);
    }
    if (status != FOLD_OK) {
        fold_error("model: %s %s of %zu elements: building rank %d of %d failed: %s",
                   q->alg->name, fold_coll_name(args.coll), args.count, rank, args.size,
                   fold_status_string(status));
    }
    return status;
}
