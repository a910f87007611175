/*
 * Peer and offset maths of the block-based algorithms (recursive doubling,
 * Rabenseifner, ring): pure functions of (rank, size, count), no buffers, no
 * transport, so each rule is unit-tested on its own (tests/coll/test_block_math.c).
 *
 * Blocks: `count` elements split into `nblocks` contiguous blocks whose sizes differ
 * by at most one (the first count % nblocks blocks are the larger ones).
 *
 * Pairing (MPICH): with pof2 the largest power of two <= size and rem = size - pof2,
 * the first 2*rem ranks pair as (even, odd); the even hands its data to the odd and
 * sits out, the odd takes newrank rank/2, every rank >= 2*rem takes rank - rem.
 * Newranks are increasing in rank, and newrank i stands for the contiguous ranks
 * {2i, 2i+1} or {i + rem}, so an order-preserving scheme over newranks stays
 * order-preserving over ranks.
 *
 * Recursive halving over pof2 newranks, mask increasing from 1: at step k the
 * partner is newrank ^ (1 << k); both hold the same block range, split it in two,
 * the lower newrank keeps the lower half. After step k a rank's partial covers the
 * aligned group of 2^(k+1) consecutive newranks, which is why reducing with the
 * lower group on the left keeps the rank order. The block a rank ends with is its
 * newrank with the bits reversed. The allgather runs the same steps backwards.
 *
 * Ring: rank r sends to r+1 and receives from r-1. `shift` rotates which block each
 * rank ends the reduce-scatter with: rank r owns block (r + shift) mod size.
 */
#ifndef FOLD_BLOCK_MATH_H
#define FOLD_BLOCK_MATH_H

#include <stddef.h>

typedef struct fold_range {
    size_t off;     /* first element */
    size_t count;   /* elements */
} fold_range_t;

/* Blocks. `block` may equal nblocks (gives count), so blocks [a, b) span
 * [offset(a), offset(b)). */
size_t       fold_block_offset(size_t count, int nblocks, int block);
size_t       fold_block_count(size_t count, int nblocks, int block);
size_t       fold_block_max(size_t count, int nblocks);
fold_range_t fold_block_span(size_t count, int nblocks, int first, int last);

/* Powers of two. */
int fold_pof2_floor(int size);             /* largest power of two <= size, size >= 1 */
int fold_log2_exact(int pof2);             /* k with 1 << k == pof2 */

/* Pairing. */
int fold_pair_newrank(int rank, int size); /* -1 for an even that sits out */
int fold_pair_rank(int newrank, int size); /* rank of a participating newrank */
int fold_pair_partner(int rank, int size); /* the other rank of its pair, or -1 */

/* Recursive halving step `step` (0 .. log2(pof2) - 1) of `newrank`. */
typedef struct fold_halving {
    int partner;                   /* newrank */
    int keep_first, keep_last;     /* blocks [keep_first, keep_last) kept */
    int send_first, send_last;     /* blocks [send_first, send_last) sent */
} fold_halving_t;

fold_halving_t fold_halving_step(int newrank, int pof2, int step);
int            fold_halving_block(int newrank, int pof2);  /* owned after all steps */
int            fold_halving_owner(int block, int pof2);    /* inverse: its newrank */

/* Ring. Steps run 0 .. size-2 in both phases. */
int fold_ring_next(int rank, int size);
int fold_ring_prev(int rank, int size);
int fold_ring_shift(int rank, int block, int size);   /* shift making rank own block */
int fold_ring_owned_block(int rank, int shift, int size);
int fold_ring_rs_send_block(int rank, int shift, int size, int step);
int fold_ring_rs_recv_block(int rank, int shift, int size, int step);
int fold_ring_ag_send_block(int rank, int shift, int size, int step);
int fold_ring_ag_recv_block(int rank, int shift, int size, int step);
int fold_ring_block_owner(int block, int shift, int size);  /* inverse of owned */

#endif
