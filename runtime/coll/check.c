/*
 * The full check (FOLD_CHECK=1): before an allreduce or reduce, the ranks compare
 * what each was asked to do, so that mismatched calls fail on every rank with
 * FOLD_ERR_MISMATCH and one line naming the ranks and the field, instead of a wrong
 * result or a hang far from the cause.
 *
 * Each rank describes its call by a fingerprint (below). One allreduce(MAX) of the
 * fingerprint and its negation gives every rank the largest and the smallest value
 * of each field: where they differ, the call is mismatched, and every rank knows
 * it, so all of them fail and the communicator stays usable. Only then is the
 * fingerprint of every rank gathered, to say who passed what. Cost: one 112-byte
 * allreduce per call, chosen like any other (measured in the README).
 */
#include "comm.h"
#include "log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

enum { FP_COLL, FP_COUNT, FP_DTYPE, FP_OP, FP_ROOT, FP_INPLACE, FP_CALL, FP_FIELDS };

static const char *const field_names[FP_FIELDS] = {
    [FP_COLL] = "collective", [FP_COUNT] = "count", [FP_DTYPE] = "datatype",
    [FP_OP] = "op", [FP_ROOT] = "root", [FP_INPLACE] = "in place",
    [FP_CALL] = "call number"};

typedef struct fingerprint {
    int64_t f[FP_FIELDS];
} fingerprint_t;

static fingerprint_t fingerprint_of(const fold_comm_t *comm, const fold_call_t *call)
{
    int allreduce = call->coll == FOLD_COLL_ALLREDUCE;
    return (fingerprint_t){{
        [FP_COLL]  = call->coll,
        [FP_COUNT] = (int64_t)call->count,
        [FP_DTYPE] = call->dtype,
        [FP_OP]    = call->op,   /* a user op by its number: created in the same order */
        [FP_ROOT]  = allreduce ? 0 : call->root,
        /* MPI lets only a reduce's root work in place; an allreduce is all or none. */
        [FP_INPLACE] = allreduce ? call->inplace : 0,
        [FP_CALL]  = (int64_t)comm->check_calls,
    }};
}

/* One value of a field in words, for the message. */
static void describe(int field, int64_t v, char *buf, size_t len)
{
    switch (field) {
    case FP_COLL:  snprintf(buf, len, "%s", fold_coll_name((fold_coll_t)v)); break;
    case FP_DTYPE: snprintf(buf, len, "%s", fold_dtype_name((fold_dtype_t)v)); break;
    case FP_OP:    snprintf(buf, len, "%s", fold_op_name((fold_op_t)v)); break;
    case FP_INPLACE: snprintf(buf, len, "%s", v ? "in place" : "not in place"); break;
    default:       snprintf(buf, len, "%" PRId64, v); break;
    }
}

/* A blocking allreduce(MAX) of int64 over comm, as selection picks it (on one node,
 * the node's tiny-message path), without checking itself. */
static int allreduce_max(fold_comm_t *comm, const int64_t *in, int64_t *out, size_t count)
{
    fold_call_t call = {.coll = FOLD_COLL_ALLREDUCE, .in = in, .out = out, .count = count,
                        .dtype = FOLD_INT64, .op = FOLD_OP_MAX, .blocking = 1};
    fold_choice_t choice;
    fold_exec_args_t args;
    int status;
    if ((status = fold_coll_prepare(comm, FOLD_COLL_ALLREDUCE)) != FOLD_OK ||
        (status = fold_select(comm, FOLD_COLL_ALLREDUCE, count, FOLD_INT64, FOLD_OP_MAX,
                              &choice)) != FOLD_OK ||
        (status = fold_coll_plan(comm, &call, &choice, &args)) != FOLD_OK) {
        return status;
    }
    return fold_exec_run(comm, &args);
}

/* Every rank's fingerprint, to name who passed what: the first rank that differs
 * from rank 0 in each mismatched field, and how many do. */
static void report(fold_comm_t *comm, const fingerprint_t *mine, const int64_t *spread)
{
    fingerprint_t *all = calloc((size_t)comm->size, sizeof(*all));
    if (all == NULL || fold_comm_allgather(comm, mine, all, sizeof(*mine)) != FOLD_OK) {
        fold_error("%s on comm %u call %" PRId64 ": the ranks passed different arguments "
                   "(could not gather which)", fold_coll_name((fold_coll_t)mine->f[FP_COLL]),
                   comm->id, mine->f[FP_CALL]);
        free(all);
        return;
    }
    char line[512];
    int at = snprintf(line, sizeof(line), "%s on comm %u call %" PRId64 ":",
                      fold_coll_name((fold_coll_t)all[0].f[FP_COLL]), comm->id,
                      all[0].f[FP_CALL]);
    const char *sep = "";
    for (int field = 0; field < FP_FIELDS; field++) {
        if (spread[field] == -spread[FP_FIELDS + field]) {
            continue;   /* max == min: every rank agrees */
        }
        int first = -1, differ = 0;
        for (int r = 1; r < comm->size; r++) {
            if (all[r].f[field] != all[0].f[field]) {
                first = first < 0 ? r : first;
                differ++;
            }
        }
        char theirs[48], ref[48];
        describe(field, all[first].f[field], theirs, sizeof(theirs));
        describe(field, all[0].f[field], ref, sizeof(ref));
        at += snprintf(line + at, at < (int)sizeof(line) ? sizeof(line) - (size_t)at : 0,
                       "%s rank %d passed %s %s, rank 0 passed %s%s", sep, first,
                       field_names[field], theirs, ref,
                       differ > 1 ? " (and more ranks differ)" : "");
        sep = ";";
    }
    fold_error("%s", line);
    free(all);
}

int fold_coll_check(fold_comm_t *comm, const fold_call_t *call)
{
    comm->check_calls++;   /* calls are numbered from 1 in the messages */
    fingerprint_t mine = fingerprint_of(comm, call);
    int64_t in[2 * FP_FIELDS], spread[2 * FP_FIELDS];
    for (int i = 0; i < FP_FIELDS; i++) {
        in[i]            = mine.f[i];
        in[FP_FIELDS + i] = -mine.f[i];
    }
    int status = allreduce_max(comm, in, spread, 2 * FP_FIELDS);
    if (status != FOLD_OK) {
        return status;
    }
    for (int i = 0; i < FP_FIELDS; i++) {
        if (spread[i] != -spread[FP_FIELDS + i]) {
            report(comm, &mine, spread);
            return FOLD_ERR_MISMATCH;
        }
    }
    return FOLD_OK;
}
