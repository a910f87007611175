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
#include "fingerprint.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

#define FP_FIELDS FOLD_FINGERPRINT_CHECKED

static fold_fingerprint_t fingerprint_of(const fold_comm_t *comm, const fold_call_t *call)
{
    int allreduce = call->coll == FOLD_COLL_ALLREDUCE;
    return (fold_fingerprint_t){
        .allreduce = allreduce, .count = call->count, .dtype = call->dtype, .op = call->op,
        .root = allreduce ? 0 : call->root, .inplace = allreduce ? call->inplace : 0,
        .call = comm->check_calls};
}

int fold_coll_allreduce_int64(fold_comm_t *comm, const int64_t *in, int64_t *out, size_t count,
                              fold_op_t op)
{
    fold_call_t call = {.coll = FOLD_COLL_ALLREDUCE, .in = in, .out = out, .count = count,
                        .dtype = FOLD_INT64, .op = op, .blocking = 1};
    fold_choice_t choice;
    fold_exec_args_t args;
    int status;
    if ((status = fold_coll_prepare(comm, FOLD_COLL_ALLREDUCE)) != FOLD_OK ||
        (status = fold_select(comm, FOLD_COLL_ALLREDUCE, count, FOLD_INT64, op, &choice)) !=
            FOLD_OK ||
        (status = fold_coll_plan(comm, &call, &choice, &args)) != FOLD_OK) {
        return status;
    }
    return fold_exec_run(comm, &args);
}

/* Every rank's fingerprint, to name who passed what: the first rank that differs
 * from rank 0, and how many do. */
static void report(fold_comm_t *comm, const fold_fingerprint_t *mine)
{
    fold_fingerprint_t *all = calloc((size_t)comm->size, sizeof(*all));
    const char *coll = mine->allreduce ? "allreduce" : "reduce";
    if (all == NULL || fold_comm_allgather(comm, mine, all, sizeof(*mine)) != FOLD_OK) {
        fold_error("%s on comm %u call %llu: the ranks passed different arguments (could not "
                   "gather which)", coll, comm->id, (unsigned long long)mine->call);
        free(all);
        return;
    }
    int first = -1, differ = 0;
    char line[512] = "";
    for (int r = 1; r < comm->size; r++) {
        if (fold_fingerprint_diff(&all[r], r, &all[0], 0, line, first < 0 ? sizeof(line) : 0)) {
            first = first < 0 ? r : first;
            differ++;
        }
    }
    fold_error("%s on comm %u call %llu: %s%s", all[0].allreduce ? "allreduce" : "reduce",
               comm->id, (unsigned long long)all[0].call, line,
               differ > 1 ? " (and more ranks differ)" : "");
    free(all);
}

int fold_coll_check(fold_comm_t *comm, const fold_call_t *call)
{
    comm->check_calls++;   /* calls are numbered from 1 in the messages */
    fold_fingerprint_t mine = fingerprint_of(comm, call);
    /* Every field is written, the checked ones then followed by their negations. */
    int64_t in[FOLD_FINGERPRINT_FIELDS + FP_FIELDS], spread[2 * FP_FIELDS];
    fold_fingerprint_fields(&mine, in);
    for (int i = 0; i < FP_FIELDS; i++) {
        in[FP_FIELDS + i] = -in[i];
    }
    int status = fold_coll_allreduce_int64(comm, in, spread, 2 * FP_FIELDS, FOLD_OP_MAX);
    if (status != FOLD_OK) {
        return status;
    }
    for (int i = 0; i < FP_FIELDS; i++) {
        if (spread[i] != -spread[FP_FIELDS + i]) {
            report(comm, &mine);
            return FOLD_ERR_MISMATCH;
        }
    }
    return FOLD_OK;
}
