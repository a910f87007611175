/*
 * fold_serve_advice (fold.h): whether fold is expected to beat the MPI library on a
 * call, for the MPI shim. fold_tune measured it where a tuning file says so;
 * elsewhere the cost model compares fold's choice with the best flat algorithm on
 * the same ranks, which is what an MPI library runs (recursive doubling, Rabenseifner,
 * ring; binomial and pipelines for reduce) over its point-to-point transport.
 */
#include "comm.h"
#include "guard.h"
#include "log.h"
#include "mem.h"
#include "node/node.h"

#include <math.h>

/* The flat family a communicator with a node per rank would get: the MPI stand-in. */
double fold_select_flat_us(fold_comm_t *comm, fold_coll_t coll, size_t bytes)
{
    fold_shape_t flat = {comm->size, comm->size, 1, 1};
    const fold_tune_rule_t *rule =
        fold_tune_match(fold_default_rules(), coll, bytes, &flat, FOLD_ALG_NODE_AWARE);
    double best = INFINITY;
    fold_select_space_enter(comm);
    for (int a = 0; rule != NULL && a < rule->nalgs; a++) {
        fold_choice_t c;
        double us = fold_select_evaluate_below(comm, coll, rule->algs[a], rule->segs[a], bytes,
                                               best, &c);
        best = us < best ? us : best;
    }
    fold_select_space_leave(comm);
    return best;
}

int fold_select_advice_class(fold_comm_t *comm, fold_coll_t coll, int k)
{
    int8_t *cached = &comm->select.advice[coll][k];
    if (*cached >= 0) {
        return *cached;
    }
    size_t at = (size_t)1 << k;
    fold_choice_t choice;
    if (fold_select_topos(comm) != FOLD_OK ||
        fold_select(comm, coll, at, FOLD_UINT8, FOLD_OP_SUM, &choice) != FOLD_OK) {
        return 0;
    }
    fold_choice_t c, mapped;
    double fold_us = fold_select_evaluate(comm, coll, choice.alg, at, &c);
    /* A loop's buffers move into fold memory where the node adopts them: through single
     * copy passing them (below FOLD_SELECT_AGREE_MIN_BYTES, where the heap's choice is
     * single copy), or as the ranks agree (coll_api.c). Such a call runs as the
     * choice for fold memory does: priced on the heap, a large 2-rank allreduce looks
     * level with a flat algorithm and goes to the MPI library, which takes several
     * times fold's time. */
    const fold_node_t *node = comm->node;
    if (node != NULL && node->adopt && fold_mem_adopt_usable() &&
        (at >= FOLD_SELECT_AGREE_MIN_BYTES || (choice.alg->flags & FOLD_ALG_SINGLE_COPY)) &&
        fold_select_in_fold_memory(comm, coll, at, FOLD_UINT8, FOLD_OP_SUM, &mapped) ==
            FOLD_OK) {
        double us = fold_select_evaluate_mapped(comm, coll, mapped.alg, at, &c);
        fold_us = us < fold_us ? us : fold_us;
    }
    double mpi_us  = fold_select_flat_us(comm, coll, at);
    *cached = fold_us < mpi_us;
    fold_debug("comm %u: %s from %zu B: fold (%s) predicted %.2f us, a flat MPI algorithm "
               "%.2f us: %s", comm->id, fold_coll_name(coll), at, choice.alg->name, fold_us,
               mpi_us, *cached ? "fold serves" : "MPI serves");
    return *cached;
}

int fold_serve_advice(fold_comm_h comm, const char *collective, size_t bytes, int *serve,
                      const char **source)
{
    fold_coll_t coll;
    if (!fold_comm_valid(comm) || serve == NULL ||
        fold_reduction_from_name(collective, &coll) != 0) {
        return FOLD_ERR_INVALID_ARG;
    }
    /* The model's answers are remembered in the communicator. */
    int status = fold_guard_enter(comm->ctx, "fold_serve_advice");
    if (status != FOLD_OK) {
        return status;
    }
    const fold_tune_file_t *file = &comm->ctx->file;
    const fold_serve_rule_t *rule = fold_tune_file_serve(file, coll, bytes, &comm->shape);
    if (rule != NULL) {
        *serve = rule->fold;
        if (source != NULL) {
            *source = file->source;
        }
    } else {
        *serve = comm->size == 1 ||
                 fold_select_advice_class(comm, coll, fold_select_class(bytes));
        if (source != NULL) {
            *source = "cost model";
        }
    }
    fold_guard_leave(comm->ctx);
    return FOLD_OK;
}
