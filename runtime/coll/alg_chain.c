/*
 * Chain-pipelined reduce (Tanaka section 3; Hofmann): the ranks form a chain
 * ending at the root and the message flows down it segment by segment. A middle
 * rank receives segment k into TMP slot k % depth, folds its own segment k onto
 * it (x_i op partial) and sends the slot on, so scratch is depth segments and up
 * to depth segments per link are in flight.
 *
 * p = 4, chain 3 -> 2 -> 1 -> 0, q = 3 segments. Cell = hop carrying the segment;
 * a rank may send and receive in one step:
 *
 *            t0     t1     t2     t3     t4
 *   seg 0   3>2    2>1    1>0
 *   seg 1          3>2    2>1    1>0
 *   seg 2                 3>2    2>1    1>0
 *
 * Commutative ops: the chain runs over vranks, so it ends at the root directly.
 * Non-commutative ops: it runs over real ranks p-1 -> ... -> 0, which gives
 * x0 op (x1 op (... op x(p-1))), and rank 0 forwards each segment to the root.
 */
#include "alg.h"
#include "tree_math.h"

static int chain_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const int    size  = args->size;
    const int    rank  = args->rank;
    const int    root  = args->root;
    const size_t count = args->count;
    const size_t seg   = args->seg_count;
    const size_t depth = args->depth > 0 ? (size_t)args->depth : 1;
    const size_t nsegs = fold_seg_num(count, seg);
    const size_t slot_len = nsegs > 1 ? seg : count;
    const int    end = args->commutative ? root : 0;   /* where the chain ends */
    const int    v   = fold_vrank(rank, end, size);
    const int    up   = fold_chain_upstream(v, size);
    const int    down = fold_chain_downstream(v, size);
    const int    up_rank   = up >= 0 ? fold_rank_of_vrank(up, end, size) : -1;
    const int    down_rank = down >= 0 ? fold_rank_of_vrank(down, end, size) : -1;

    for (size_t k = 0; k < nsegs; k++) {
        size_t     off  = k * seg;
        size_t     len  = fold_seg_len(count, seg, k);
        fold_ref_t part = fold_ref_in(off);
        if (up_rank >= 0) {
            fold_ref_t slot = fold_ref_tmp((k % depth) * slot_len);
            fold_ref_t dst  = (rank == end && rank == root) ? fold_ref_out(off) : slot;
            fold_sched_recv(s, up_rank, slot, len);
            fold_sched_reduce(s, fold_ref_in(off), slot, dst, len);
            part = dst;
        }
        fold_sched_ordered_forward(s, rank, root, down_rank, end, part, off, len);
    }
    return s->status;
}

const fold_alg_t fold_alg_chain = {
    .name        = "chain",
    .description = "chain pipeline ending at the root, depth segments in flight per link",
    .allreduce   = NULL,
    .reduce      = chain_reduce,
    .flags       = FOLD_ALG_ORDERED,
};
