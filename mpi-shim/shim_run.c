/*
 * Running one reduction in fold. A fold context serves one thread at a time, so
 * every fold call holds the shim's lock.
 *
 * Below MPI_THREAD_MULTIPLE only one thread is in MPI at a time: the blocking call
 * runs under the lock. Under MPI_THREAD_MULTIPLE two threads may be in collectives
 * on different communicators, started in different orders on different processes;
 * holding the lock across a blocking call would then deadlock. So the collective is
 * started non-blocking and polled, and the lock is released between polls: calls
 * are serialised poll by poll, and all of them make progress.
 */
#include "shim.h"

#include <sched.h>

/* Polls before a waiting thread starts yielding its core between polls. */
#define SHIM_SPIN_POLLS 64

static int run_blocking(const shim_fold_call_t *c)
{
    if (c->coll == SHIM_ALLREDUCE) {
        return fold_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->comm);
    }
    return fold_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, c->comm);
}

static int start(const shim_fold_call_t *c, fold_request_h *req)
{
    if (c->coll == SHIM_ALLREDUCE) {
        return fold_iallreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->comm,
                               req);
    }
    return fold_ireduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, c->comm,
                        req);
}

static int run_polled(const shim_fold_call_t *c)
{
    fold_request_h req;
    shim_fold_lock();
    int status = start(c, &req);
    if (status == FOLD_OK) {
        for (unsigned polls = 0; (status = fold_test(req)) == FOLD_INPROGRESS; polls++) {
            shim_fold_unlock();
            if (polls >= SHIM_SPIN_POLLS) {
                sched_yield();
            }
            shim_fold_lock();
        }
        fold_request_free(req);
    }
    shim_fold_unlock();
    return status;
}

int shim_run(const shim_fold_call_t *fcall)
{
    shim_userop_set_datatype(fcall->datatype);
    if (fcall->mapping->inter) {   /* never under MPI_THREAD_MULTIPLE (shim_inter.c) */
        shim_fold_lock();
        int status = shim_inter_run(fcall);
        shim_fold_unlock();
        return status;
    }
    if (shim.thread_multiple) {
        return run_polled(fcall);
    }
    shim_fold_lock();
    int status = run_blocking(fcall);
    shim_fold_unlock();
    return status;
}
