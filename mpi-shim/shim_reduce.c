/*
 * MPI_Allreduce and MPI_Reduce: decide who serves the call, then serve it.
 *
 * The decision must come out the same on every member, or some would wait in fold
 * for peers that went to PMPI. So it depends only on what MPI requires to match
 * (count, datatype, op, root, communicator), on the FOLD_MPI_* settings and on
 * fold_serve_advice (which every rank answers alike), in that order; the per-rank
 * buffer checks only catch calls MPI itself rejects, so that the application still
 * gets MPI's error for them.
 */
#include "shim.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

/* Buffers MPI rejects: the call goes to MPI so that the application gets MPI's own
 * error (or behaviour) for them. */
static int buffers_valid(const shim_call_t *call, int has_output)
{
    if (call->recvbuf == MPI_IN_PLACE) {
        return 0;
    }
    if (call->sendbuf == MPI_IN_PLACE) {
        return has_output;   /* defined for allreduce and at the reduce root only */
    }
    if (call->count == 0) {
        return 1;
    }
    return call->sendbuf != NULL &&
           (!has_output || (call->recvbuf != NULL && call->recvbuf != call->sendbuf));
}

/* An intercommunicator's arguments MPI accepts: no MPI_IN_PLACE; a reduce's root
 * MPI_ROOT or MPI_PROC_NULL in the root's group, a rank of the remote group in the
 * other. Which buffers this process gives: its input (the sending group, or both in an
 * allreduce) and its output (the root, or every process in an allreduce). */
static int inter_args_valid(const shim_call_t *call, const shim_comm_t *comm, int *has_input,
                            int *has_output)
{
    if (call->sendbuf == MPI_IN_PLACE || call->recvbuf == MPI_IN_PLACE) {
        return 0;
    }
    *has_input = *has_output = 1;
    if (call->coll == SHIM_REDUCE) {
        int receiving = call->root == MPI_ROOT || call->root == MPI_PROC_NULL;
        if (!receiving && (call->root < 0 || call->root >= comm->remote_size)) {
            return 0;
        }
        *has_input = !receiving;
        *has_output = call->root == MPI_ROOT;
    }
    return call->count == 0 || ((!*has_input || call->sendbuf != NULL) &&
                                (!*has_output || call->recvbuf != NULL));
}

/* fold's verdict, the same on every member. The cost model answers per power-of-two
 * size class, so its answers are remembered in the mapping (concurrent first calls
 * store the same value); a tuning file's ranges need not follow the classes, so
 * those are asked call by call. */
static int shim_advice(const shim_comm_t *comm, shim_coll_t coll, size_t bytes)
{
    int k = 0;
    while (k < SHIM_ADVICE_CLASSES - 1 && (bytes >> (k + 1)) != 0) {
        k++;
    }
    unsigned char *cached = (unsigned char *)&comm->advice[coll][k];
    unsigned char known = __atomic_load_n(cached, __ATOMIC_RELAXED);
    if (known != SHIM_ADVICE_UNKNOWN) {
        return known == SHIM_ADVICE_FOLD;
    }
    int serve = 0;
    const char *source = "";
    shim_fold_lock();
    int status = fold_serve_advice(comm->fold, coll == SHIM_ALLREDUCE ? "allreduce" : "reduce",
                                   bytes, &serve, &source);
    shim_fold_unlock();
    if (status != 0) {
        return 0;
    }
    if (strcmp(source, "cost model") == 0) {
        __atomic_store_n(cached, serve ? SHIM_ADVICE_FOLD : SHIM_ADVICE_MPI, __ATOMIC_RELAXED);
    }
    return serve;
}

shim_route_t shim_route(const shim_call_t *call, shim_typemap_t *map,
                        shim_fold_call_t *fcall)
{
    map->elements = 0;
    if (!shim.running) {
        return SHIM_ROUTE_OFF;
    }
    if (call->comm == MPI_COMM_NULL || call->count < 0) {
        return SHIM_ROUTE_ARGS;
    }
    shim_route_t route = shim_types_map(call->datatype, call->op, map);
    if (route != SHIM_ROUTE_FOLD) {
        map->elements = 0;
        return route;
    }
    /* A type's size fits an int, so this cannot overflow. */
    size_t count = (size_t)call->count * map->elements;
    size_t bytes = count * fold_dtype_size(map->dtype), lo, hi;
    int ranged = shim_config_range(&shim.config, call->coll, &lo, &hi);
    if (ranged && bytes < lo) {
        return SHIM_ROUTE_SMALL;
    }
    if (ranged && bytes > hi) {
        return SHIM_ROUTE_LARGE;
    }
    const shim_comm_t *comm;
    if ((route = shim_comm_get(call->comm, &comm)) != SHIM_ROUTE_FOLD) {
        return route;
    }
    if (!ranged && !shim_advice(comm, call->coll, bytes)) {
        return SHIM_ROUTE_MPI_FASTER;
    }
    int has_input = 1, has_output;
    if (comm->inter) {
        if (!inter_args_valid(call, comm, &has_input, &has_output)) {
            return SHIM_ROUTE_ARGS;
        }
    } else {
        if (call->coll == SHIM_REDUCE && (call->root < 0 || call->root >= comm->size)) {
            return SHIM_ROUTE_ARGS;
        }
        has_output = call->coll == SHIM_ALLREDUCE || comm->rank == call->root;
        if (!buffers_valid(call, has_output)) {
            return SHIM_ROUTE_ARGS;
        }
    }
    fcall->comm     = comm->fold;
    fcall->mapping  = comm;
    fcall->coll     = call->coll;
    fcall->sendbuf  = call->sendbuf == MPI_IN_PLACE ? FOLD_IN_PLACE
                    : has_input                     ? call->sendbuf
                                                    : NULL;
    /* At a reduce non-root MPI ignores recvbuf; fold must not read or write it. */
    fcall->recvbuf  = has_output ? call->recvbuf : NULL;
    fcall->count    = count;
    fcall->dtype    = map->dtype;
    fcall->op       = map->op;
    fcall->root     = call->root;
    fcall->datatype = call->datatype;
    return SHIM_ROUTE_FOLD;
}

/* Open MPI refuses predefined ops on derived types, which the shim serves where the
 * type is copies of one predefined type. Such a call that goes to MPI all the same
 * (its size, its communicator) goes as the same call on the base type, so that
 * whether it works does not depend on its route. Erroneous arguments go unchanged,
 * for MPI's own error. */
static int forward(const shim_call_t *call, shim_route_t route, const shim_typemap_t *map)
{
    int count = call->count;
    MPI_Datatype datatype = call->datatype;
    if (map->elements > 0 && map->derived && map->op < FOLD_OP_PREDEFINED_COUNT &&
        route != SHIM_ROUTE_ARGS && (size_t)count * map->elements <= INT_MAX) {
        count = (int)((size_t)count * map->elements);
        datatype = map->base;
    }
    if (call->coll == SHIM_ALLREDUCE) {
        return PMPI_Allreduce(call->sendbuf, call->recvbuf, count, datatype, call->op,
                              call->comm);
    }
    return PMPI_Reduce(call->sendbuf, call->recvbuf, count, datatype, call->op, call->root,
                       call->comm);
}

/* The MPI error class of a fold failure. Arguments were checked before fold ran,
 * so it is a mismatch between the ranks' calls (FOLD_CHECK=1 finds those) or a
 * runtime failure (a peer died, a timeout): the buffers may be half written, and MPI
 * cannot redo the call. A mismatch in the count alone is MPI_ERR_TRUNCATE, as MPI
 * reports a longer message than the receive expects; any other MPI_ERR_ARG.
 * FOLD_ERR_IN_USE (another thread inside the context) cannot come from the
 * application, since every fold call holds the shim's lock: it would be the shim's own
 * bug, so MPI_ERR_INTERN. */
static int error_class(int status, const char **name)
{
    const unsigned args = FOLD_MISMATCH_COLLECTIVE | FOLD_MISMATCH_DATATYPE | FOLD_MISMATCH_OP |
                          FOLD_MISMATCH_ROOT | FOLD_MISMATCH_IN_PLACE;
    unsigned fields = status == FOLD_ERR_MISMATCH ? fold_mismatch_fields() : 0;
    if ((fields & FOLD_MISMATCH_COUNT) && !(fields & args)) {
        status = FOLD_ERR_TRUNCATED;
    }
    switch (status) {
    case FOLD_ERR_MISMATCH:  *name = "MPI_ERR_ARG";      return MPI_ERR_ARG;
    case FOLD_ERR_TRUNCATED: *name = "MPI_ERR_TRUNCATE"; return MPI_ERR_TRUNCATE;
    case FOLD_ERR_IN_USE:    *name = "MPI_ERR_INTERN";   return MPI_ERR_INTERN;
    default:                 *name = "MPI_ERR_INTERN";   return MPI_ERR_INTERN;
    }
}

int shim_reduction(const shim_call_t *call)
{
    shim_typemap_t map;
    shim_fold_call_t fcall;
    shim_route_t route = shim_route(call, &map, &fcall);
    shim_stats_count(call->coll, route);
    if (route != SHIM_ROUTE_FOLD) {
        return forward(call, route, &map);
    }
    int status = shim_run(&fcall);
    if (status == FOLD_OK) {
        return MPI_SUCCESS;
    }
    const char *name;
    int error = error_class(status, &name);
    shim_log("%s of %d elements failed in fold: %s; reporting %s",
             call->coll == SHIM_ALLREDUCE ? "MPI_Allreduce" : "MPI_Reduce", call->count,
             fold_status_string(status), name);
    PMPI_Comm_call_errhandler(call->comm, error);
    return error;
}

SHIM_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    shim_call_t call = {SHIM_ALLREDUCE, sendbuf, recvbuf, count, datatype, op, 0, comm};
    return shim_reduction(&call);
}

SHIM_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
                           MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm)
{
    shim_call_t call = {SHIM_REDUCE, sendbuf, recvbuf, count, datatype, op, root, comm};
    return shim_reduction(&call);
}
