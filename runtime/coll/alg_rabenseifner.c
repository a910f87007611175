/*
 * Rabenseifner (Shan et al. section III-C; MPICH reduce_scatter_allgather and
 * reduce_scatter_gather): a recursive-halving reduce-scatter over pof2 blocks, then
 * a recursive-doubling allgather (allreduce) or a direct gather of the blocks to
 * the root (reduce, any root). Peer and block maths: block_math.h.
 *
 * Non-power-of-two sizes: the first 2*rem ranks pair as (even, odd). The even
 * sends its vector to the odd in two parts, first the half the odd gives away at
 * step 0, then the half it keeps; the odd folds the first part onto its IN segment
 * by segment and forwards each result to its step-0 partner straight from a TMP
 * slot, so that half is never stored. For allreduce the even gets the result back.
 *
 * Order: newranks stand for contiguous, increasing rank ranges, the even of a pair
 * goes on the left, and at every halving step the lower group goes on the left, so
 * each block is x0 op x1 op ... op x(p-1).
 *
 * Buffers (no copy anywhere): step 0 reads IN (or the pair result) and writes the
 * accumulator; later steps read and write the accumulator. The accumulator is OUT
 * where OUT exists; at reduce non-roots it is TMP covering only the half kept at
 * step 0 (what is given away is never stored there): count/2 elements, where
 * MPICH holds two whole vectors. Received data passes through `depth` TMP slots,
 * and the odd of a pair has `depth` more for forwarding.
 *
 * p = 4, blocks b0..b3; cell = blocks a rank holds reduced over the ranks shown.
 * The newrank's bits reversed give its block:
 *
 *              rank 0       rank 1       rank 2       rank 3
 *   step 0    b0 b1 {01}   b2 b3 {01}   b0 b1 {23}   b2 b3 {23}
 *   step 1    b0 {0123}    b2 {0123}    b1 {0123}    b3 {0123}
 *   then      allgather in reverse (allreduce) or each block to the root (reduce)
 *
 * Within a step the half received moves as segments, so the reduction of one
 * overlaps the transfer of the next (q = 3 segments):
 *
 *            t0      t1      t2      t3
 *   seg 0   xfer    red
 *   seg 1           xfer    red
 *   seg 2                   xfer    red
 */
#include "alg.h"
#include "block_math.h"

typedef struct rab_plan {
    const fold_coll_args_t *args;
    fold_sched_t *s;
    int          pof2;
    int          steps;
    int          newrank;      /* -1: the even of a pair, sitting out */
    int          pair;         /* the other rank of its pair, or -1 */
    size_t       seg;
    int          depth;
    size_t       recv_slots;   /* TMP base of the receive slots */
    size_t       fwd_slots;    /* TMP base of the forwarding slots (odd of a pair) */
    size_t       acc_base;     /* TMP base of the accumulator where OUT is missing */
    fold_range_t acc_range;    /* elements the TMP accumulator covers */
} rab_plan_t;

static fold_range_t blocks(const rab_plan_t *p, int first, int last)
{
    return fold_block_span(p->args->count, p->pof2, first, last);
}

static fold_ref_t acc_at(const rab_plan_t *p, size_t off)
{
    if (p->s->has_out) {
        return fold_ref_out(off);
    }
    return fold_ref_tmp(p->acc_base + off - p->acc_range.off);
}

static void plan_init(rab_plan_t *p, const fold_coll_args_t *args, fold_sched_t *s)
{
    const size_t depth = args->depth > 0 ? (size_t)args->depth : 1;
    const size_t seg   = args->seg_count > 0 ? args->seg_count : 1;
    size_t       pool;

    p->args    = args;
    p->s       = s;
    p->pof2    = fold_pof2_floor(args->size);
    p->steps   = fold_log2_exact(p->pof2);
    p->newrank = fold_pair_newrank(args->rank, args->size);
    p->pair    = fold_pair_partner(args->rank, args->size);
    p->seg     = seg;
    p->depth   = (int)depth;

    /* No transfer through the slots exceeds the larger half of the vector. */
    pool = blocks(p, 0, p->pof2 / 2).count;
    pool = pool < depth * seg ? pool : depth * seg;
    p->recv_slots = 0;
    p->fwd_slots  = pool;
    p->acc_base   = p->pair >= 0 ? 2 * pool : pool;
    p->acc_range  = (fold_range_t){0, 0};
    if (p->newrank >= 0 && p->steps > 0) {
        fold_halving_t h = fold_halving_step(p->newrank, p->pof2, 0);

        p->acc_range = blocks(p, h.keep_first, h.keep_last);
    }
}

/* Odd of a pair: the even's part that this rank gives away at step 0 is folded onto
 * IN and forwarded to the step-0 partner one slot at a time (even on the left). */
static void pair_forward(const rab_plan_t *p, int to, fold_range_t part)
{
    size_t k = 0;

    for (size_t off = 0; off < part.count; off += p->seg, k++) {
        size_t     n    = part.count - off < p->seg ? part.count - off : p->seg;
        fold_ref_t slot = fold_ref_tmp(p->fwd_slots + (k % (size_t)p->depth) * p->seg);

        fold_sched_recv(p->s, p->pair, slot, n);
        fold_sched_reduce(p->s, slot, fold_ref_in(part.off + off), slot, n);
        fold_sched_send(p->s, to, slot, n);
    }
}

/* Pairing, then the recursive-halving reduce-scatter. */
static void reduce_scatter(const rab_plan_t *p)
{
    const fold_coll_args_t *a = p->args;

    if (p->newrank < 0) {
        fold_halving_t h = fold_halving_step(fold_pair_newrank(p->pair, a->size), p->pof2, 0);
        fold_range_t   away = blocks(p, h.send_first, h.send_last);
        fold_range_t   kept = blocks(p, h.keep_first, h.keep_last);

        fold_sched_send_segs(p->s, p->pair, fold_ref_in(away.off), away.count, p->seg);
        fold_sched_send_segs(p->s, p->pair, fold_ref_in(kept.off), kept.count, p->seg);
        return;
    }
    for (int k = 0; k < p->steps; k++) {
        fold_halving_t h    = fold_halving_step(p->newrank, p->pof2, k);
        int            peer = fold_pair_rank(h.partner, a->size);
        fold_range_t   give = blocks(p, h.send_first, h.send_last);
        fold_range_t   keep = blocks(p, h.keep_first, h.keep_last);
        fold_ref_t     mine = acc_at(p, keep.off);

        if (k > 0) {
            fold_sched_send_segs(p->s, peer, acc_at(p, give.off), give.count, p->seg);
        } else if (p->pair >= 0) {
            pair_forward(p, peer, give);
            fold_sched_recv_reduce_segs(p->s, p->pair, fold_ref_in(keep.off), mine,
                                        keep.count, p->seg, p->depth, p->recv_slots, 1);
        } else {
            fold_sched_send_segs(p->s, peer, fold_ref_in(give.off), give.count, p->seg);
            mine = fold_ref_in(keep.off);
        }
        fold_sched_recv_reduce_segs(p->s, peer, mine, acc_at(p, keep.off), keep.count,
                                    p->seg, p->depth, p->recv_slots, peer < a->rank);
    }
}

static int rabenseifner_allreduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    rab_plan_t p;

    plan_init(&p, args, s);
    if (p.steps == 0) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), args->count);   /* size 1 */
        return s->status;
    }
    reduce_scatter(&p);
    if (p.newrank < 0) {
        fold_sched_recv_segs(s, p.pair, fold_ref_out(0), args->count, args->seg_count);
        return s->status;
    }
    /* Recursive-doubling allgather: the halving steps backwards. */
    for (int k = p.steps - 1; k >= 0; k--) {
        fold_halving_t h    = fold_halving_step(p.newrank, p.pof2, k);
        int            peer = fold_pair_rank(h.partner, args->size);
        fold_range_t   have = blocks(&p, h.keep_first, h.keep_last);
        fold_range_t   get  = blocks(&p, h.send_first, h.send_last);

        fold_sched_send_segs(s, peer, fold_ref_out(have.off), have.count, p.seg);
        fold_sched_recv_segs(s, peer, fold_ref_out(get.off), get.count, p.seg);
    }
    if (p.pair >= 0) {
        fold_sched_send_segs(s, p.pair, fold_ref_out(0), args->count, args->seg_count);
    }
    return s->status;
}

static int rabenseifner_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    rab_plan_t p;

    plan_init(&p, args, s);
    if (p.steps == 0) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), args->count);   /* size 1 */
        return s->status;
    }
    reduce_scatter(&p);
    /* Gather: every block goes straight from its owner to the root. */
    if (args->rank == args->root) {
        for (int q = 0; q < p.pof2; q++) {
            int          b     = fold_halving_block(q, p.pof2);
            fold_range_t block = blocks(&p, b, b + 1);

            if (q != p.newrank) {
                fold_sched_recv_segs(s, fold_pair_rank(q, args->size),
                                     fold_ref_out(block.off), block.count, p.seg);
            }
        }
    } else if (p.newrank >= 0) {
        int          b     = fold_halving_block(p.newrank, p.pof2);
        fold_range_t block = blocks(&p, b, b + 1);

        fold_sched_send_segs(s, args->root, acc_at(&p, block.off), block.count, p.seg);
    }
    return s->status;
}

const fold_alg_t fold_alg_rabenseifner = {
    .name        = "rabenseifner",
    .description = "recursive-halving reduce-scatter, then recursive-doubling allgather or gather to the root",
    .allreduce   = rabenseifner_allreduce,
    .reduce      = rabenseifner_reduce,
    .flags       = FOLD_ALG_ORDERED,
};
