/*
 * Allgather for the runtime's own use (communicator split): ring. IN is this rank's
 * block of `count` elements, OUT holds size * count; block j ends at OUT[j * count].
 */
#include "alg.h"

int fold_build_allgather_ring(const fold_coll_args_t *a, fold_sched_t *s)
{
    int p = a->size;
    int right = (a->rank + 1) % p;
    int left = (a->rank - 1 + p) % p;
    size_t n = a->count;

    fold_sched_copy(s, fold_ref_in(0), fold_ref_out((size_t)a->rank * n), n);
    for (int step = 0; step < p - 1; step++) {
        int send_block = (a->rank - step + p) % p;
        int recv_block = (a->rank - step - 1 + p) % p;
        fold_sched_send(s, right, fold_ref_out((size_t)send_block * n), n);
        fold_sched_recv(s, left, fold_ref_out((size_t)recv_block * n), n);
    }
    return s->status;
}
