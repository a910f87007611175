/* Pure peer/offset maths; the rules are described in block_math.h. */
#include "block_math.h"

size_t fold_block_offset(size_t count, int nblocks, int block)
{
    size_t n = (size_t)nblocks, b = (size_t)block;
    size_t base = count / n, larger = count % n;

    return b * base + (b < larger ? b : larger);
}

size_t fold_block_count(size_t count, int nblocks, int block)
{
    return fold_block_offset(count, nblocks, block + 1) -
           fold_block_offset(count, nblocks, block);
}

size_t fold_block_max(size_t count, int nblocks)
{
    return fold_block_count(count, nblocks, 0);
}

fold_range_t fold_block_span(size_t count, int nblocks, int first, int last)
{
    fold_range_t r;

    r.off   = fold_block_offset(count, nblocks, first);
    r.count = fold_block_offset(count, nblocks, last) - r.off;
    return r;
}

int fold_pof2_floor(int size)
{
    int pof2 = 1;

    while (pof2 <= size / 2) {
        pof2 *= 2;
    }
    return pof2;
}

int fold_log2_exact(int pof2)
{
    int k = 0;

    while ((1 << k) < pof2) {
        k++;
    }
    return k;
}

int fold_pair_newrank(int rank, int size)
{
    int rem = size - fold_pof2_floor(size);

    if (rank >= 2 * rem) {
        return rank - rem;
    }
    return (rank % 2) ? rank / 2 : -1;
}

int fold_pair_rank(int newrank, int size)
{
    int rem = size - fold_pof2_floor(size);

    return newrank < rem ? 2 * newrank + 1 : newrank + rem;
}

int fold_pair_partner(int rank, int size)
{
    int rem = size - fold_pof2_floor(size);

    return rank < 2 * rem ? (rank ^ 1) : -1;
}

fold_halving_t fold_halving_step(int newrank, int pof2, int step)
{
    fold_halving_t h;
    int lo = 0, hi = pof2, mid, j;

    /* Replay the earlier steps to find the range both partners hold now. */
    for (j = 0; j < step; j++) {
        if (newrank & (1 << j)) {
            lo += (hi - lo) / 2;
        } else {
            hi -= (hi - lo) / 2;
        }
    }
    mid       = lo + (hi - lo) / 2;
    h.partner = newrank ^ (1 << step);
    if (newrank & (1 << step)) {
        h.keep_first = mid; h.keep_last = hi;
        h.send_first = lo;  h.send_last = mid;
    } else {
        h.keep_first = lo;  h.keep_last = mid;
        h.send_first = mid; h.send_last = hi;
    }
    return h;
}

static int bit_reverse(int value, int bits)
{
    int out = 0, j;

    for (j = 0; j < bits; j++) {
        out |= ((value >> j) & 1) << (bits - 1 - j);
    }
    return out;
}

int fold_halving_block(int newrank, int pof2)
{
    return bit_reverse(newrank, fold_log2_exact(pof2));
}

int fold_halving_owner(int block, int pof2)
{
    return bit_reverse(block, fold_log2_exact(pof2));
}

static int mod(long value, int size)
{
    long m = value % size;

    return (int)(m < 0 ? m + size : m);
}

int fold_ring_next(int rank, int size) { return mod((long)rank + 1, size); }
int fold_ring_prev(int rank, int size) { return mod((long)rank - 1, size); }

int fold_ring_shift(int rank, int block, int size)
{
    return mod((long)block - rank, size);
}

int fold_ring_owned_block(int rank, int shift, int size)
{
    return mod((long)rank + shift, size);
}

int fold_ring_block_owner(int block, int shift, int size)
{
    return mod((long)block - shift, size);
}

/* Reduce-scatter: a rank first sends block owned-1 (the one block it never
 * receives) from its input, then forwards the block it received the step before;
 * the block it receives at the last step is the one it owns. */
int fold_ring_rs_send_block(int rank, int shift, int size, int step)
{
    return mod((long)rank + shift - 1 - step, size);
}

int fold_ring_rs_recv_block(int rank, int shift, int size, int step)
{
    return mod((long)rank + shift - 2 - step, size);
}

/* Allgather: start with the owned block, then forward what just arrived. */
int fold_ring_ag_send_block(int rank, int shift, int size, int step)
{
    return mod((long)rank + shift - step, size);
}

int fold_ring_ag_recv_block(int rank, int shift, int size, int step)
{
    return mod((long)rank + shift - 1 - step, size);
}
