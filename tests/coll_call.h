/*
 * One rank's call of a reduction collective in a correctness test, and the check of
 * what it left in the rank's buffers (the matrix tests: test_coll_loopback,
 * test_coll_codec, test_shm_dpml).
 */
#ifndef FOLD_TEST_COLL_CALL_H
#define FOLD_TEST_COLL_CALL_H

#include "comm.h"

#include <stddef.h>

typedef struct coll_call {
    fold_coll_t  coll;
    fold_dtype_t dt;
    fold_op_t    op;
    int          root;
    int          inplace;
    size_t       count;
    char        *input;      /* this rank's data */
    const char  *pristine;   /* a copy of input, to tell whether the call wrote there */
    char        *recv;       /* where the result comes (allreduce, a reduce's root); in
                                place, every rank's input and buffer */
} coll_call_t;

/* Whether rank gets a result: every rank of an allreduce, the root of a reduce. */
int coll_call_has_result(const coll_call_t *call, int rank);

/* Calls the collective on comm (in place: recv gets a copy of input first); returns
 * its status. */
int coll_call_run(const coll_call_t *call, int rank, fold_comm_h comm);

/* What is wrong after a call that returned `status`, into detail ("" when nothing):
 * the status, a result that differs from `expected`, a non-root's in-place buffer or
 * a send buffer no longer as it was. */
void coll_call_check(const coll_call_t *call, int rank, int status, const void *expected,
                     char *detail, size_t len);

#endif
