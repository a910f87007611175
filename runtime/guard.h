/*
 * The context guard: one thread at a time per context (fold.h, "Threading"). Every
 * entry point that touches a context's mutable state (collectives, fold_test and
 * fold_wait, request and communicator creation and release, configuration,
 * selection queries, fold_finalize) claims the context with one compare-and-swap and
 * gives it back with one store. A caller that finds it claimed is refused with
 * FOLD_ERR_IN_USE and changes nothing: waiting instead could deadlock two threads
 * whose collectives are matched in different orders on different processes.
 * Internal only.
 */
#ifndef FOLD_GUARD_H
#define FOLD_GUARD_H

#include "context.h"

#include <pthread.h>
#include <stdint.h>

/* Logs why `fn` was refused (another thread holds the context, or this thread is
 * already inside a call on it: a user op or callback calling back into fold) and
 * returns FOLD_ERR_IN_USE. */
int fold_guard_refuse(const char *fn, uintptr_t holder);

/* FOLD_OK with the context claimed by this thread, or FOLD_ERR_IN_USE (logged). */
static inline int fold_guard_enter(fold_context_t *ctx, const char *fn)
{
    uintptr_t holder = 0;
    if (__atomic_compare_exchange_n(&ctx->guard, &holder, (uintptr_t)pthread_self(), 0,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return FOLD_OK;
    }
    return fold_guard_refuse(fn, holder);
}

static inline void fold_guard_leave(fold_context_t *ctx)
{
    __atomic_store_n(&ctx->guard, 0, __ATOMIC_RELEASE);
}

/* Claims the context, waiting for another thread's call to end: only for a call
 * that is half way through a protocol with other processes and must finish it
 * (fold_comm_create_group after its out-of-band allgather). */
void fold_guard_wait(fold_context_t *ctx);

#endif
