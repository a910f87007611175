/*
 * The collective entry points. Each one validates its arguments, claims the
 * context (guard.h: one thread at a time), short-circuits what needs no
 * communication (count 0, one rank), selects an algorithm and hands the schedule to
 * the executor; blocking calls then wait on it.
 */
#include "comm.h"
#include "guard.h"
#include "log.h"
#include "codec/reduce_kernel.h"
#include "coll/select_online.h"

#include <stdlib.h>
#include <string.h>

static int check_comm(const fold_comm_t *comm, const char *fn)
{
    if (!fold_comm_valid(comm)) {
        fold_error("%s: invalid communicator (never created, freed, or after fold_finalize)",
                   fn);
        return FOLD_ERR_NOT_INITIALIZED;
    }
    return FOLD_OK;
}

static int check_dtype_op(fold_dtype_t dtype, fold_op_t op, int reduction, const char *fn)
{
    if (fold_dtype_size(dtype) == 0) {
        fold_error("%s: unknown datatype %d", fn, (int)dtype);
        return FOLD_ERR_INVALID_ARG;
    }
    if (reduction && !fold_op_dtype_valid(op, dtype)) {
        fold_error("%s: op %d (%s) is not defined for %s", fn, (int)op, fold_op_name(op),
                   fold_dtype_name(dtype));
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

static int check_root(const fold_comm_t *comm, int root, const char *fn)
{
    if (root < 0 || root >= comm->size) {
        fold_error("%s: root %d is out of range for a communicator of %d ranks", fn, root,
                   comm->size);
        return FOLD_ERR_INVALID_ARG;
    }
    return FOLD_OK;
}

/* A request that is complete from the start (nothing to communicate). */
static int completed_request(fold_request_t **req_p)
{
    fold_request_t *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return FOLD_ERR_NO_MEMORY;
    }
    req->magic  = FOLD_REQUEST_MAGIC;
    req->status = FOLD_OK;
    *req_p      = req;
    return FOLD_OK;
}

/* Selection for a blocking call: where the buffers' placement changes the algorithm
 * (fold_select_both), the node's ranks first agree on it, one allreduce (MIN) of
 * whether each rank's buffers lie in fold memory or will once single copy passes them
 * (adopted buffers, passed before): a rank whose buffers lie elsewhere keeps all on the
 * heap's choice instead of failing the call apart (FOLD_ERR_MISMATCH), and a loop's
 * buffers move into fold memory even where the heap's choice is another algorithm
 * (a large 2-rank reduce's is dpml_pipelined). Smaller calls, and non-blocking ones,
 * decide alone (fold_select_placed). */
static int select_agreed(fold_comm_t *comm, const fold_call_t *call, int agree,
                         fold_choice_t *choice)
{
    const size_t bytes = call->count * fold_dtype_size(call->dtype);
    if (!call->blocking || bytes < FOLD_SELECT_AGREE_MIN_BYTES) {
        return fold_select_placed(comm, call->coll, call->count, call->dtype, call->op, call->in,
                                  call->out, choice);
    }
    fold_choice_t mapped;
    int differ;
    int status = fold_select_both(comm, call->coll, call->count, call->dtype, call->op, choice,
                                  &mapped, &differ);
    if (status != FOLD_OK || !differ) {
        return status;
    }
    int64_t mine = fold_select_mappable(
                comm, call->in, call->out, bytes,
                fold_select_adopt_passes(comm, call->coll, call->count, call->dtype, call->op),
                fold_select_adopt_steps(comm, call->coll, call->count, call->dtype)),
            all = mine;
    if (agree) {   /* (a tool asking alone answers for this rank) */
        status = fold_coll_allreduce_int64(comm, &mine, &all, 1, FOLD_OP_MIN);
        if (status == FOLD_ERR_MISMATCH) {
            /* The log above names fold's own allreduce: say which call it served. */
            fold_error("%s of %zu bytes on comm %u: the ranks' calls differ (seen as they "
                       "agreed on where their buffers lie, with an allreduce of one int64 of "
                       "fold's own)", fold_coll_name(call->coll), bytes, comm->id);
        }
    }
    if (status == FOLD_OK && all) {
        *choice = mapped;
    }
    return status;
}

/* reduction_start's work, with the context claimed. */
static int reduction_run(fold_coll_t coll, const void *sendbuf, void *recvbuf, size_t count,
                         fold_dtype_t dtype, fold_op_t op, int root, fold_comm_t *comm,
                         int blocking, fold_request_t **req_p)
{
    const char *fn = fold_coll_name(coll);
    int status;
    if ((status = check_dtype_op(dtype, op, 1, fn)) != FOLD_OK ||
        (coll == FOLD_COLL_REDUCE && (status = check_root(comm, root, fn)) != FOLD_OK)) {
        return status;
    }
    int has_out = coll == FOLD_COLL_ALLREDUCE || comm->rank == root;
    int inplace = sendbuf == FOLD_IN_PLACE || (sendbuf == recvbuf && has_out);
    const void *in = sendbuf == FOLD_IN_PLACE ? recvbuf : sendbuf;
    if (count > 0 && (in == NULL || (has_out && recvbuf == NULL))) {
        fold_error("%s: NULL %s buffer with count %zu", fn, in == NULL ? "send" : "receive",
                   count);
        return FOLD_ERR_INVALID_ARG;
    }
    fold_call_t call = {.coll = coll, .in = in, .out = has_out ? recvbuf : NULL,
                        .count = count, .dtype = dtype, .op = op, .root = root,
                        .inplace = inplace, .blocking = blocking};
    /* Before the shortcuts: a rank passing count 0 must meet the others' check. */
    if (comm->ctx->config.check && comm->size > 1 &&
        (status = fold_coll_check(comm, &call)) != FOLD_OK) {
        return status;
    }
    if (count == 0) {
        return FOLD_OK;
    }
    size_t esize = fold_dtype_size(dtype);
    if (comm->size == 1) {
        if (!inplace) {
            memcpy(recvbuf, in, count * esize);
        }
        return FOLD_OK;
    }

    /* The next of a loop of identical tiny calls: selection, online trials and the plan
     * would send it where they sent the last one (select.h). */
    if (fold_select_repeats_tiny(comm, &call) && fold_coll_tiny_ready(comm, &call)) {
        return fold_exec_tiny(comm, &call);
    }
    fold_choice_t choice;
    if ((status = fold_coll_prepare(comm, coll)) != FOLD_OK ||
        (status = select_agreed(comm, &call, 1, &choice)) != FOLD_OK) {
        return status;
    }
    fold_online_key_t *timed;
    if ((status = fold_online_before(comm, &call, &choice, &timed)) != FOLD_OK) {
        return status;
    }
    fold_exec_args_t args;
    if ((status = fold_coll_plan(comm, &call, &choice, &args)) != FOLD_OK) {
        return status;
    }
    if (!args.fast && comm->node != NULL && comm->node->adopt) {
        args.adopt_passes = fold_select_adopt_passes(comm, coll, count, dtype, op);
        args.adopt_steps  = fold_select_adopt_steps(comm, coll, count, dtype);
    }
    if (!blocking) {
        return fold_exec_start(comm, &args, req_p);
    }
    double start = timed != NULL ? fold_util_time_now() : 0;
    status = fold_exec_run(comm, &args);
    if (timed != NULL && status == FOLD_OK) {
        /* In us: the model's unit. */
        status = fold_online_after(comm, timed, (fold_util_time_now() - start) * 1e6);
    }
    return status;
}

/* Starts a reduction, or runs it to the end when `blocking`; *req_p is NULL when
 * it completed here. */
static int reduction_start(fold_coll_t coll, const void *sendbuf, void *recvbuf, size_t count,
                           fold_dtype_t dtype, fold_op_t op, int root, fold_comm_t *comm,
                           int blocking, fold_request_t **req_p)
{
    const char *fn = fold_coll_name(coll);
    int status;
    const char *api = coll == FOLD_COLL_ALLREDUCE ? (blocking ? "fold_allreduce"
                                                              : "fold_iallreduce")
                                                  : (blocking ? "fold_reduce" : "fold_ireduce");
    *req_p = NULL;
    if ((status = check_comm(comm, fn)) != FOLD_OK ||
        (status = fold_guard_enter(comm->ctx, api)) != FOLD_OK) {
        return status;
    }
    status = reduction_run(coll, sendbuf, recvbuf, count, dtype, op, root, comm, blocking,
                           req_p);
    fold_guard_leave(comm->ctx);
    return status;
}

int fold_allreduce(const void *sendbuf, void *recvbuf, size_t count, fold_dtype_t dtype,
                   fold_op_t op, fold_comm_h comm)
{
    fold_request_t *req;
    return reduction_start(FOLD_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, comm,
                           1, &req);
}

int fold_reduce(const void *sendbuf, void *recvbuf, size_t count, fold_dtype_t dtype,
                fold_op_t op, int root, fold_comm_h comm)
{
    fold_request_t *req;
    return reduction_start(FOLD_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, comm,
                           1, &req);
}

static int nonblocking(int status, fold_request_t *req, fold_request_h *req_p)
{
    if (status != FOLD_OK) {
        return status;
    }
    if (req == NULL && (status = completed_request(&req)) != FOLD_OK) {
        return status;
    }
    req->user_owned = 1;
    *req_p = req;
    return FOLD_OK;
}

int fold_iallreduce(const void *sendbuf, void *recvbuf, size_t count, fold_dtype_t dtype,
                    fold_op_t op, fold_comm_h comm, fold_request_h *req_p)
{
    if (req_p == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    fold_request_t *req;
    int status = reduction_start(FOLD_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0,
                                 comm, 0, &req);
    return nonblocking(status, req, req_p);
}

int fold_ireduce(const void *sendbuf, void *recvbuf, size_t count, fold_dtype_t dtype,
                 fold_op_t op, int root, fold_comm_h comm, fold_request_h *req_p)
{
    if (req_p == NULL) {
        return FOLD_ERR_INVALID_ARG;
    }
    fold_request_t *req;
    int status = reduction_start(FOLD_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root,
                                 comm, 0, &req);
    return nonblocking(status, req, req_p);
}

static int check_request(fold_request_t *req)
{
    return (req != NULL && req->magic == FOLD_REQUEST_MAGIC && req->user_owned)
               ? FOLD_OK : FOLD_ERR_INVALID_ARG;
}

/* Drives a request one step (fold_test) or to its end (fold_wait). A request that
 * completed when it started has no communicator and nothing that changes: it needs
 * no claim on the context. */
static int request_drive(fold_request_h req, const char *call, int (*drive)(fold_request_t *))
{
    if (check_request(req) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (req->entry == NULL) {
        return req->status;
    }
    fold_context_t *ctx = req->comm->ctx;
    int status = fold_guard_enter(ctx, call);
    if (status == FOLD_OK) {
        status = drive(req);
        fold_guard_leave(ctx);
    }
    return status;
}

int fold_test(fold_request_h req)
{
    return request_drive(req, "fold_test", fold_exec_progress);
}

int fold_wait(fold_request_h req)
{
    return request_drive(req, "fold_wait", fold_exec_wait);
}

int fold_request_free(fold_request_h req)
{
    if (check_request(req) != FOLD_OK) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (req->entry == NULL) {
        req->magic = 0;
        free(req);
        return FOLD_OK;
    }
    fold_context_t *ctx = req->comm->ctx;
    int status = fold_guard_enter(ctx, "fold_request_free");
    if (status != FOLD_OK) {
        return status;
    }
    if (req->status == FOLD_INPROGRESS) {
        fold_error("fold_request_free: the collective is still running; wait for it first");
        status = FOLD_ERR_BUSY;
    } else {
        fold_exec_release(req);
    }
    fold_guard_leave(ctx);
    return status;
}

/* ---- bcast and barrier --------------------------------------------------------- */

static int internal_run(fold_comm_t *comm, fold_coll_t coll, fold_alg_build_fn build,
                        void *buf, size_t count, fold_dtype_t dtype, int root)
{
    size_t esize = fold_dtype_size(dtype);
    fold_exec_args_t args = {
        .coll  = coll,
        .build = build,
        .cargs = {.coll = coll, .rank = comm->rank, .size = comm->size, .root = root,
                  .count = count,
                  .seg_count = fold_select_seg_count(comm->ctx, 0, count * esize, esize),
                  .depth = 1, .commutative = 1},
        .in    = buf,
        .out   = buf,
        .dtype = dtype,
        .op    = FOLD_OP_SUM,
    };
    return fold_exec_run(comm, &args);
}

static int bcast_run(void *buf, size_t count, fold_dtype_t dtype, int root, fold_comm_t *comm)
{
    int status;
    if ((status = check_dtype_op(dtype, FOLD_OP_SUM, 0, "bcast")) != FOLD_OK ||
        (status = check_root(comm, root, "bcast")) != FOLD_OK) {
        return status;
    }
    if (count > 0 && buf == NULL) {
        fold_error("bcast: NULL buffer with count %zu", count);
        return FOLD_ERR_INVALID_ARG;
    }
    if (count == 0 || comm->size == 1) {
        return FOLD_OK;
    }
    return internal_run(comm, FOLD_COLL_BCAST, fold_build_bcast_binomial, buf, count, dtype,
                        root);
}

int fold_bcast(void *buf, size_t count, fold_dtype_t dtype, int root, fold_comm_h comm)
{
    int status;
    if ((status = check_comm(comm, "bcast")) != FOLD_OK ||
        (status = fold_guard_enter(comm->ctx, "fold_bcast")) != FOLD_OK) {
        return status;
    }
    status = bcast_run(buf, count, dtype, root, comm);
    fold_guard_leave(comm->ctx);
    return status;
}

int fold_barrier(fold_comm_h comm)
{
    int status;
    if ((status = check_comm(comm, "barrier")) != FOLD_OK ||
        (status = fold_guard_enter(comm->ctx, "fold_barrier")) != FOLD_OK) {
        return status;
    }
    if (comm->size > 1) {
        status = internal_run(comm, FOLD_COLL_BARRIER, fold_build_barrier_dissemination, NULL,
                              0, FOLD_UINT8, 0);
    }
    fold_guard_leave(comm->ctx);
    return status;
}

/* What every selection query opens with: its arguments checked and the context
 * claimed (FOLD_OK: fold_guard_leave after), else FOLD_ERR_INVALID_ARG or the claim's
 * refusal. */
static int selection_enter(fold_comm_h comm, const char *collective, fold_dtype_t dtype,
                           const char *caller, fold_coll_t *coll)
{
    if (!fold_comm_valid(comm) || fold_dtype_size(dtype) == 0 ||
        fold_reduction_from_name(collective, coll) != 0) {
        return FOLD_ERR_INVALID_ARG;
    }
    return fold_guard_enter(comm->ctx, caller);
}

/* Selection for a call of this kind on these buffers (NULL: on no particular ones; it
 * remembers its decisions in the communicator), for tools and logs. */
static int selected(fold_comm_h comm, const char *collective, size_t count, fold_dtype_t dtype,
                    const void *in, const void *out, const char *caller,
                    fold_choice_t *choice)
{
    fold_coll_t coll;
    int status = selection_enter(comm, collective, dtype, caller, &coll);
    if (status != FOLD_OK) {
        return status;
    }
    /* A blocking call's, as far as this rank can tell alone. */
    const fold_call_t call = {.coll = coll, .in = in, .out = (void *)(uintptr_t)out,
                              .count = count, .dtype = dtype, .op = FOLD_OP_SUM,
                              .blocking = 1};
    status = select_agreed(comm, &call, 0, choice);
    /* What the calls agreed on, where they tried rivals (any root). */
    if (status == FOLD_OK && !choice->memory) {
        fold_online_agreed(comm, coll, count, dtype, FOLD_OP_SUM, -1, choice);
    }
    fold_guard_leave(comm->ctx);
    return status;
}

static size_t segment_bytes(const fold_comm_t *comm, const fold_choice_t *choice, size_t count,
                            fold_dtype_t dtype)
{
    size_t esize = fold_dtype_size(dtype);
    return fold_select_seg_count(comm->ctx, choice->seg_bytes, count * esize, esize) * esize;
}

const char *fold_selected_algorithm(fold_comm_h comm, const char *collective, size_t count,
                                    fold_dtype_t dtype)
{
    fold_choice_t choice;
    return selected(comm, collective, count, dtype, NULL, NULL, "fold_selected_algorithm",
                    &choice) == FOLD_OK ? choice.alg->name : NULL;
}

const char *fold_selected_for_buffers(fold_comm_h comm, const char *collective,
                                      const void *sendbuf, const void *recvbuf, size_t count,
                                      fold_dtype_t dtype, size_t *segment_size)
{
    fold_choice_t choice;
    const void *in = sendbuf == FOLD_IN_PLACE ? recvbuf : sendbuf;
    if (selected(comm, collective, count, dtype, in, recvbuf, "fold_selected_for_buffers",
                 &choice) != FOLD_OK) {
        return NULL;
    }
    if (segment_size != NULL) {
        *segment_size = segment_bytes(comm, &choice, count, dtype);
    }
    return choice.alg->name;
}

int fold_selection_trying(fold_comm_h comm, const char *collective, size_t count,
                          fold_dtype_t dtype, fold_op_t op, int root, int *trying)
{
    fold_coll_t coll;
    int status = trying == NULL ? FOLD_ERR_INVALID_ARG
                                : selection_enter(comm, collective, dtype,
                                                  "fold_selection_trying", &coll);
    if (status != FOLD_OK) {
        return status;
    }
    *trying = fold_online_trying(comm, coll, count, dtype, op,
                                 coll == FOLD_COLL_REDUCE ? root : -1);
    fold_guard_leave(comm->ctx);
    return FOLD_OK;
}

size_t fold_selected_segment_size(fold_comm_h comm, const char *collective, size_t count,
                                  fold_dtype_t dtype)
{
    fold_choice_t choice;
    if (selected(comm, collective, count, dtype, NULL, NULL, "fold_selected_segment_size",
                 &choice) != FOLD_OK) {
        return 0;
    }
    return segment_bytes(comm, &choice, count, dtype);
}
