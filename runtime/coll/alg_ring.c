/*
 * Ring (Shan et al. section III-D): the vector is cut into `size` blocks; a
 * reduce-scatter of size-1 steps around the ring (rank r sends to r+1, receives
 * from r-1) leaves every rank with one fully reduced block, then a ring allgather
 * (allreduce) or a direct send of each block to the root (reduce) finishes. Peer
 * and block maths: block_math.h. For reduce the rotation is chosen so that the root
 * ends with block 0, the largest, which it never has to receive.
 *
 * Not rank-ordered: block b is accumulated along the ring starting after its
 * owner, so the accumulation wraps from rank p-1 to rank 0.
 *
 * Buffers: step 0 sends straight from IN; each received block is reduced with IN
 * into the accumulator, which the next step forwards; nothing is copied. The
 * accumulator is OUT where OUT exists; at reduce non-roots it is one block of TMP,
 * where segment j of a block is reduced once segment j of the previous block has
 * left. Received data passes through `depth` TMP slots. A receive slot is never
 * held across a forward: with sends that complete only when received, a ring of
 * ranks each waiting for the next one to free a slot would wait on itself.
 *
 * p = 3, allreduce, rank r ends the reduce-scatter owning block r; cell = block a
 * rank receives ("+" reduced with its own, "=" stored):
 *
 *            rank 0   rank 1   rank 2
 *   rs 0     +b1      +b2      +b0
 *   rs 1     +b0      +b1      +b2
 *   ag 0     =b2      =b0      =b1
 *   ag 1     =b1      =b2      =b0
 *
 * Blocks move as segments: a rank forwards segment j of a block as soon as it has
 * reduced it, while segment j+1 is still arriving. One block, p = 3, q = 3
 * segments; cell = hop carrying the segment, reduced on arrival:
 *
 *            t0      t1      t2      t3
 *   seg 0   0>1     1>2
 *   seg 1           0>1     1>2
 *   seg 2                   0>1     1>2
 */
#include "alg.h"
#include "block_math.h"

typedef struct ring_plan {
    const fold_coll_args_t *args;
    fold_sched_t *s;
    int          next, prev;
    int          shift;        /* rank r owns block (r + shift) mod size */
    size_t       seg;
    size_t       acc_base;     /* TMP base of the accumulator where OUT is missing */
    size_t       base, larger; /* count / size and count % size: the blocks */
} ring_plan_t;

/* fold_block_span(count, size, b, b + 1), without its two divisions per block:
 * the cost model builds the 2(p-1) steps of thousands of ranks. */
static fold_range_t block_of(const ring_plan_t *p, int b)
{
    size_t i = (size_t)b;
    size_t off = i * p->base + (i < p->larger ? i : p->larger);
    fold_range_t r = {off, p->base + (i < p->larger)};
    return r;
}

/* Where the reduce-scatter partial of block b lives. */
static fold_ref_t acc_at(const ring_plan_t *p, int b)
{
    if (p->s->has_out) {
        return fold_ref_out(block_of(p, b).off);
    }
    return fold_ref_tmp(p->acc_base);
}

static void plan_init(ring_plan_t *p, const fold_coll_args_t *args, fold_sched_t *s,
                      int shift)
{
    const size_t depth = args->depth > 0 ? (size_t)args->depth : 1;
    const size_t seg   = args->seg_count > 0 ? args->seg_count : 1;
    const size_t slots = depth * seg;
    const size_t block = fold_block_max(args->count, args->size);

    p->args     = args;
    p->s        = s;
    p->next     = fold_ring_next(args->rank, args->size);
    p->prev     = fold_ring_prev(args->rank, args->size);
    p->shift    = shift;
    p->seg      = seg;
    p->acc_base = block < slots ? block : slots;   /* after the receive slots */
    p->base     = args->count / (size_t)args->size;
    p->larger   = args->count % (size_t)args->size;
}

/* Fewer elements than ranks: blocks count.. are empty, and a step whose send block
 * sb and receive block sb - 1 are both empty emits nothing. The send block goes
 * down by one a step, so the next step that may emit something is sb - count
 * steps on. (A ring over thousands of ranks with a small message is mostly such
 * steps, and the cost model builds every rank's schedule.) */
static int steps_to_skip(const ring_plan_t *p, int sb)
{
    return p->base == 0 && (size_t)sb > p->larger ? sb - (int)p->larger : 0;
}

static void reduce_scatter(const ring_plan_t *p)
{
    const fold_coll_args_t *a = p->args;

    for (int step = 0; step < a->size - 1; step++) {
        int          sb   = fold_ring_rs_send_block(a->rank, p->shift, a->size, step);
        if (steps_to_skip(p, sb) > 0) {
            step += steps_to_skip(p, sb) - 1;
            continue;
        }
        int          rb   = fold_ring_rs_recv_block(a->rank, p->shift, a->size, step);
        fold_range_t give = block_of(p, sb);
        fold_range_t get  = block_of(p, rb);
        fold_ref_t   src  = step == 0 ? fold_ref_in(give.off) : acc_at(p, sb);

        fold_sched_send_segs(p->s, p->next, src, give.count, p->seg);
        /* the partial from the left neighbour covers the ranks before this one */
        fold_sched_recv_reduce_segs(p->s, p->prev, fold_ref_in(get.off), acc_at(p, rb),
                                    get.count, p->seg, a->depth, 0, 1);
    }
}

static int ring_allreduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    ring_plan_t p;

    if (args->size == 1) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), args->count);
        return s->status;
    }
    plan_init(&p, args, s, 0);
    reduce_scatter(&p);
    for (int step = 0; step < args->size - 1; step++) {
        int          sb   = fold_ring_ag_send_block(args->rank, p.shift, args->size, step);
        if (steps_to_skip(&p, sb) > 0) {
            step += steps_to_skip(&p, sb) - 1;
            continue;
        }
        int          rb   = fold_ring_ag_recv_block(args->rank, p.shift, args->size, step);
        fold_range_t give = block_of(&p, sb);
        fold_range_t get  = block_of(&p, rb);

        fold_sched_send_segs(s, p.next, fold_ref_out(give.off), give.count, p.seg);
        fold_sched_recv_segs(s, p.prev, fold_ref_out(get.off), get.count, p.seg);
    }
    return s->status;
}

static int ring_reduce(const fold_coll_args_t *args, fold_sched_t *s)
{
    const int   size = args->size;
    const int   root = args->root;
    ring_plan_t p;

    if (size == 1) {
        fold_sched_copy(s, fold_ref_in(0), fold_ref_out(0), args->count);
        return s->status;
    }
    plan_init(&p, args, s, fold_ring_shift(root, 0, size));
    reduce_scatter(&p);
    if (args->rank != root) {
        int          b     = fold_ring_owned_block(args->rank, p.shift, size);
        fold_range_t block = block_of(&p, b);

        fold_sched_send_segs(s, root, acc_at(&p, b), block.count, p.seg);
        return s->status;
    }
    for (int q = 0; q < size; q++) {
        fold_range_t block = block_of(&p, fold_ring_owned_block(q, p.shift, size));

        if (q != root) {
            fold_sched_recv_segs(s, q, fold_ref_out(block.off), block.count, p.seg);
        }
    }
    return s->status;
}

const fold_alg_t fold_alg_ring = {
    .name        = "ring",
    .description = "ring reduce-scatter, then ring allgather or blocks straight to the root",
    .allreduce   = ring_allreduce,
    .reduce      = ring_reduce,
    .flags       = 0,
};
