#include "coll_call.h"
#include "coll_reference.h"

#include <stdio.h>
#include <string.h>

int coll_call_has_result(const coll_call_t *call, int rank)
{
    return call->coll == FOLD_COLL_ALLREDUCE || rank == call->root;
}

int coll_call_run(const coll_call_t *call, int rank, fold_comm_h comm)
{
    const void *sendbuf = call->input;
    void *recvbuf = coll_call_has_result(call, rank) ? call->recv : NULL;
    if (call->inplace) {
        memcpy(call->recv, call->input, call->count * fold_dtype_size(call->dt));
        sendbuf = FOLD_IN_PLACE;
        recvbuf = call->recv;
    }
    return call->coll == FOLD_COLL_ALLREDUCE
               ? fold_allreduce(sendbuf, recvbuf, call->count, call->dt, call->op, comm)
               : fold_reduce(sendbuf, recvbuf, call->count, call->dt, call->op, call->root,
                             comm);
}

void coll_call_check(const coll_call_t *call, int rank, int status, const void *expected,
                     char *detail, size_t len)
{
    size_t es = fold_dtype_size(call->dt), n = call->count;
    detail[0] = '\0';
    if (status != FOLD_OK) {
        snprintf(detail, len, "returned %s", fold_status_string(status));
        return;
    }
    if (coll_call_has_result(call, rank)) {
        for (size_t i = 0; i < n; i++) {
            if (!ref_same_element(call->dt, call->recv, expected, i)) {
                snprintf(detail, len, "wrong result at element %zu of %zu", i, n);
                return;
            }
        }
    } else if (call->inplace && memcmp(call->recv, call->pristine, n * es) != 0) {
        snprintf(detail, len, "non-root in-place input was modified");
        return;
    }
    if (!call->inplace && memcmp(call->input, call->pristine, n * es) != 0) {
        snprintf(detail, len, "the send buffer was modified");
    }
}
