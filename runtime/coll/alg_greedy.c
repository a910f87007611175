/*
 * Greedy pipelined reduce (Lowery and Langou, as described by Tanaka section 4).
 * Every rank runs the same simulation of the whole reduction (fold_greedy_plan in
 * tree_math.c) and emits its own transfers in plan order: segment 0 goes down a
 * binomial tree while the ranks that have already sent it run a binomial
 * reduction of segment 1 among themselves, and so on; each rank handles its
 * segments strictly in order.
 *
 * p = 4, root 0, q = 3 segments, one transfer per rank per step; cell = hops:
 *
 *            t0         t1     t2     t3     t4     t5
 *   seg 0   1>0 3>2    2>0
 *   seg 1              3>1    1>0    2>0
 *   seg 2                            3>1    1>0    2>0
 *
 * The first receive of a segment reduces IN into the accumulator (OUT at the
 * root, TMP elsewhere) and a rank that never receives a segment sends IN itself,
 * so no copy is made. Received data passes through `depth` rotating TMP slots.
 * The plan does not keep rank order, so it serves commutative ops only.
 */
#include "alg.h"
#include "tree_math.h"

#include <fold/fold_status.h>
#include <stdlib.h>

static int greedy_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const size_t count = args->count;
    const size_t seg   = args->seg_count;
    const size_t depth = args->depth > 0 ? (size_t)args->depth : 1;
    const size_t nsegs = fold_seg_num(count, seg);
    const size_t slot_len = nsegs > 1 ? seg : count;
    const int    at_root = args->rank == args->root;
    const size_t slot_base = at_root ? 0 : count;   /* non-roots keep TMP[0, count) */

    fold_greedy_xfer_t *plan = NULL;
    size_t nplan = 0;
    int status = fold_greedy_plan(args->rank, args->size, args->root, nsegs, &plan, &nplan,
                                  NULL);
    if (status != FOLD_OK) {
        if (s->status == FOLD_OK) {
            s->status = status;
        }
        return s->status;
    }

    size_t cur_seg = 0, nrecv = 0;
    int    have_acc = 0;   /* whether cur_seg has been received into the accumulator */
    for (size_t i = 0; i < nplan; i++) {
        const fold_greedy_xfer_t *x = &plan[i];
        size_t     off = x->seg * seg;
        size_t     len = fold_seg_len(count, seg, x->seg);
        fold_ref_t acc = at_root ? fold_ref_out(off) : fold_ref_tmp(off);
        if (i == 0 || x->seg != cur_seg) {
            cur_seg  = x->seg;
            have_acc = 0;
        }
        fold_ref_t part = have_acc ? acc : fold_ref_in(off);
        if (x->send) {
            fold_sched_send(s, x->peer, part, len);
        } else {
            fold_ref_t slot = fold_ref_tmp(slot_base + (nrecv++ % depth) * slot_len);
            fold_sched_recv(s, x->peer, slot, len);
            fold_sched_reduce(s, part, slot, acc, len);
            have_acc = 1;
        }
    }
    free(plan);
    if (at_root && args->size == 1) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), count);
    }
    return s->status;
}

const fold_alg_t fold_alg_greedy = {
    .name        = "greedy",
    .description = "greedy pipelined reduce (Lowery-Langou): binomial trees over segments in flight",
    .allreduce   = NULL,
    .reduce      = greedy_reduce,
    .flags       = 0,
};
