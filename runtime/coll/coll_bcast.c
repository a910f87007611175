/*
 * Broadcast for the runtime's own use (fold_bcast): binomial tree over vranks
 * relative to the root, segmented so that large buffers pipeline down the tree.
 * The data lives in OUT on every rank; no scratch.
 */
#include "alg.h"

int fold_build_bcast_binomial(const fold_coll_args_t *a, fold_sched_t *s)
{
    int p = a->size;
    int vrank = (a->rank - a->root + p) % p;
    int mask = 1;

    /* Receive from the parent: the rank that differs in our lowest set bit. */
    while (mask < p) {
        if (vrank & mask) {
            int parent = ((vrank - mask) + a->root) % p;
            fold_sched_recv_segs(s, parent, fold_ref_out(0), a->count, a->seg_count);
            break;
        }
        mask <<= 1;
    }
    /* Forward to children, largest subtree first. */
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vrank + mask < p) {
            int child = (vrank + mask + a->root) % p;
            fold_sched_send_segs(s, child, fold_ref_out(0), a->count, a->seg_count);
        }
    }
    return s->status;
}
