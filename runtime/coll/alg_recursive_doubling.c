/*
 * Recursive-doubling allreduce (MPICH): log2(pof2) rounds in which partners
 * newrank ^ 1, ^ 2, ^ 4, ... exchange their whole vector and both reduce it. For a
 * non-power-of-two size the first 2*rem ranks pair up first (block_math.h): the
 * even hands its vector to the odd, sits out, and gets the result back at the end.
 *
 * Order: after round k a partial covers an aligned group of 2^(k+1) consecutive
 * newranks (contiguous ranks), and the lower group goes on the left, so every rank
 * computes x0 op x1 op ... op x(p-1) with the same bracketing, bit for bit.
 *
 * Buffers: round 0 reads IN and writes OUT (no copy of IN into OUT first); every
 * later round reads and writes OUT. Received data passes through `depth` TMP
 * slots, so scratch is min(count, depth * seg) elements.
 *
 * Each round is cut into segments; the reduction of segment j overlaps the
 * transfer of segment j+1, and a segment enters the next round as soon as its
 * reduction is done (q = 3 segments, one rank, two rounds):
 *
 *            t0       t1       t2       t3       t4
 *   seg 0   r0 xfer  r0 red   r1 xfer  r1 red
 *   seg 1            r0 xfer  r0 red   r1 xfer  r1 red
 *   seg 2                     r0 xfer  r0 red   ...
 */
#include "alg.h"
#include "block_math.h"

static int recursive_doubling_allreduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const int    size    = args->size;
    const int    rank    = args->rank;
    const size_t count   = args->count;
    const size_t seg     = args->seg_count;
    const int    pof2    = fold_pof2_floor(size);
    const int    newrank = fold_pair_newrank(rank, size);
    const int    pair    = fold_pair_partner(rank, size);
    fold_ref_t   mine    = fold_ref_in(0);

    if (newrank < 0) {
        fold_sched_send_segs(s, pair, fold_ref_in(0), count, seg);
        fold_sched_recv_segs(s, pair, fold_ref_out(0), count, seg);
        return s->status;
    }
    if (pair >= 0) {
        /* the even partner is the lower rank: its vector goes on the left */
        fold_sched_recv_reduce_segs(s, pair, mine, fold_ref_out(0), count, seg, args->depth,
                                    0, 1);
        mine = fold_ref_out(0);
    }
    for (int mask = 1; mask < pof2; mask <<= 1) {
        int peer = fold_pair_rank(newrank ^ mask, size);

        fold_sched_send_segs(s, peer, mine, count, seg);
        fold_sched_recv_reduce_segs(s, peer, mine, fold_ref_out(0), count, seg, args->depth,
                                    0, peer < rank);
        mine = fold_ref_out(0);
    }
    if (pair >= 0) {
        fold_sched_send_segs(s, pair, fold_ref_out(0), count, seg);
    } else if (pof2 == 1) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), count);   /* size 1 */
    }
    return s->status;
}

const fold_alg_t fold_alg_recursive_doubling = {
    .name        = "recursive_doubling",
    .description = "recursive doubling, whole-vector exchanges, pairing for non-power-of-two sizes",
    .allreduce   = recursive_doubling_allreduce,
    .reduce      = NULL,
    .flags       = FOLD_ALG_ORDERED,
};
