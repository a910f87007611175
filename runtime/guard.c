/*
 * The context guard's slow paths (guard.h): what a refused caller is told, and the
 * one wait.
 */
#include "guard.h"
#include "log.h"

#include <sched.h>

int fold_guard_refuse(const char *fn, uintptr_t holder)
{
    if (holder == (uintptr_t)pthread_self()) {
        fold_error("%s: refused: this thread is already inside a fold call on this context "
                   "(a user op or callback calling back into fold?); nothing done", fn);
    } else {
        fold_error("%s: refused: another thread is using this context (one thread at a "
                   "time per context); nothing done", fn);
    }
    return FOLD_ERR_IN_USE;
}

void fold_guard_wait(fold_context_t *ctx)
{
    uintptr_t holder = 0, me = (uintptr_t)pthread_self();
    while (!__atomic_compare_exchange_n(&ctx->guard, &holder, me, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
        holder = 0;
        sched_yield();
    }
}
