/*
 * From a selection's choice to what the executor runs: the schedule builder and
 * its arguments. For a node-aware algorithm that includes the communicator's
 * node topology and segment size, so this is where a communicator's node state
 * is first asked for (fold_comm_node: collective, every rank selects alike); one
 * that cannot have it runs the node-unaware algorithms (comm->node_none). It is also
 * where a call on the node first catches up with a resync (node/resync.c).
 */
#include "comm.h"
#include "codec/reduce_kernel.h"

/* node/resync.c posts the DONE of calls a rank skips: the schedules' flag and value. */
_Static_assert(FOLD_FLAG_DONE == FOLD_NODE_FLAG_DONE && FOLD_SHM_CALL_DONE == (uint64_t)1 << 32,
               "node.h's DONE flag is the schedules'");

/* The node-aware fields: topology, segment elements, leaders, the flat algorithm
 * between nodes (selection's, or the default one when it chose none). */
static int plan_node(fold_comm_t *comm, const fold_call_t *call, fold_coll_args_t *a)
{
    fold_node_t *node;
    int status = fold_comm_node(comm, &node);
    if (status != FOLD_OK) {
        return status;
    }
    a->topo      = node->topo;
    a->shm_count = node->shm_bytes / fold_dtype_size(call->dtype);
    if (a->leaders < 1) {
        a->leaders = 1;
    }
    a->leaders = a->leaders < node->topo->min_ppn ? a->leaders : node->topo->min_ppn;
    if (node->topo->nnodes == 1) {
        a->inter = NULL;
    } else if (a->inter == NULL) {
        a->inter = call->coll == FOLD_COLL_ALLREDUCE ? &fold_alg_rabenseifner
                                                     : &fold_alg_binomial;
    }
    return FOLD_OK;
}

int fold_coll_prepare(fold_comm_t *comm, fold_coll_t coll)
{
    fold_node_t *node;
    if (!fold_comm_node_wanted(comm, coll)) {
        return FOLD_OK;   /* set up already, or none that selection could use */
    }
    int status = fold_comm_node(comm, &node);
    /* Without node shared memory selection keeps to the node-unaware algorithms. */
    return status == FOLD_ERR_UNSUPPORTED ? FOLD_OK : status;
}

int fold_coll_tiny_ready(const fold_comm_t *comm, const fold_call_t *call)
{
    const fold_node_t *node = comm->node;
    return node != NULL && !fold_node_resync_pending(node) &&
           fold_node_fast_eligible(node, call->count * fold_dtype_size(call->dtype));
}

int fold_coll_plan(fold_comm_t *comm, const fold_call_t *call, const fold_choice_t *choice,
                   fold_exec_args_t *args)
{
    const fold_context_t *ctx = comm->ctx;
    const fold_alg_t *alg = choice->alg;
    size_t esize = fold_dtype_size(call->dtype);
    if (comm->node != NULL && fold_node_resync_pending(comm->node) &&
        (choice->fast || (alg->flags & FOLD_ALG_NODE_AWARE))) {
        /* An earlier call on the node was given up for a mismatch: first back in step
         * with the node's other ranks (node/resync.c), before choosing a path. */
        int status = fold_node_resync_join(comm->node, fold_coll_name(call->coll),
                                           ctx->config.timeout_sec, ctx->spin_count);
        if (status != FOLD_OK) {
            return status;
        }
    }
    if (choice->fast && call->blocking &&
        fold_node_fast_eligible(comm->node, call->count * esize)) {
        /* The node's tiny-message path: what it reads, and no schedule. */
        args->coll  = call->coll;
        args->alg   = alg;
        args->cargs.count = call->count;
        args->cargs.root  = call->root;
        args->in    = call->in;
        args->out   = call->out;
        args->dtype = call->dtype;
        args->op    = call->op;
        args->fast  = 1;
        args->memory = 0;
        args->adopt_passes = 0;
        args->adopt_steps  = 0;
        return FOLD_OK;
    }
    *args = (fold_exec_args_t){
        .coll  = call->coll,
        .alg   = alg,
        .build = fold_alg_builder(alg, call->coll),
        .cargs = {.coll = call->coll, .rank = comm->rank, .size = comm->size,
                  .root = call->root, .count = call->count,
                  .seg_count = fold_select_seg_count(ctx, choice->seg_bytes, call->count * esize,
                                                     esize),
                  .depth = (int)ctx->config.pipeline_depth,
                  .inplace = call->out != NULL && call->inplace,
                  .commutative = fold_op_is_commutative(call->op),
                  .leaders = choice->leaders, .inter = choice->inter,
                  .root_weight = choice->root_weight},
        .in    = call->in,
        .out   = call->out,
        .dtype = call->dtype,
        .op    = call->op,
        .fast  = 0,
        .memory = choice->memory,
    };
    if (alg->flags & FOLD_ALG_NODE_AWARE) {
        return plan_node(comm, call, &args->cargs);
    }
    return FOLD_OK;
}
