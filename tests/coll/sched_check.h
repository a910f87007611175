/*
 * Helpers of the schedule tests (test_sched.c, test_exec_plan.c).
 */
#ifndef FOLD_TEST_SCHED_CHECK_H
#define FOLD_TEST_SCHED_CHECK_H

#include "coll/sched.h"

/* Arguments of a 4-rank collective of 100 elements in segments of 10. */
static inline fold_coll_args_t args_for(fold_coll_t coll, int rank, int inplace)
{
    fold_coll_args_t a = {.coll = coll, .rank = rank, .size = 4, .root = 0, .count = 100,
                          .seg_count = 10, .depth = 2, .inplace = inplace, .commutative = 1};
    return a;
}

/* Whether finalize made step `later` wait directly for step `earlier`. */
static inline int depends_on(const fold_sched_t *s, uint32_t later, uint32_t earlier)
{
    const fold_step_t *st = &s->steps[earlier];
    for (uint32_t k = 0; k < st->nsucc; k++) {
        if (s->succ[st->succ_off + k] == later) {
            return 1;
        }
    }
    return 0;
}

#endif
