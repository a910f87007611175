/*
 * Barrier: dissemination (Hensgen, Finkel, Manber) — in round k every rank signals
 * rank + 2^k and waits for rank - 2^k; ceil(log2 p) rounds, any p.
 */
#include "alg.h"

int fold_build_barrier_dissemination(const fold_coll_args_t *a, fold_sched_t *s)
{
    int p = a->size;
    for (int dist = 1; dist < p; dist <<= 1) {
        fold_sched_signal(s, (a->rank + dist) % p);
        fold_sched_wait_signal(s, (a->rank - dist + p) % p);
    }
    return s->status;
}
