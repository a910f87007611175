/* Unit tests of the pure peer/offset maths in runtime/coll/block_math.c. */
#include <criterion/criterion.h>

#include "coll/block_math.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int    sizes[]  = {1, 2, 3, 4, 5, 7, 8, 13, 16, 33};
static const size_t counts[] = {0, 1, 7, 1024, (1u << 20) + 3};

#define NSIZES  (sizeof(sizes) / sizeof(sizes[0]))
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

Test(block_math, blocks_partition_the_count)
{
    for (size_t i = 0; i < NSIZES; i++) {
        for (size_t c = 0; c < NCOUNTS; c++) {
            int    n = sizes[i];
            size_t count = counts[c], sum = 0, smallest = SIZE_MAX, largest = 0;

            cr_assert_eq(fold_block_offset(count, n, 0), 0);
            cr_assert_eq(fold_block_offset(count, n, n), count);
            for (int b = 0; b < n; b++) {
                size_t len = fold_block_count(count, n, b);

                cr_assert_eq(fold_block_offset(count, n, b), sum,
                             "n=%d count=%zu block %d not contiguous", n, count, b);
                sum += len;
                smallest = len < smallest ? len : smallest;
                largest  = len > largest ? len : largest;
                cr_assert_geq(fold_block_count(count, n, 0), len, "block 0 is a largest");
            }
            cr_assert_eq(sum, count);
            cr_assert_leq(largest - smallest, 1, "n=%d count=%zu unbalanced", n, count);
            cr_assert_eq(fold_block_max(count, n), largest);

            for (int a = 0; a <= n; a++) {
                for (int b = a; b <= n; b++) {
                    fold_range_t r = fold_block_span(count, n, a, b);

                    cr_assert_eq(r.off, fold_block_offset(count, n, a));
                    cr_assert_eq(r.off + r.count, fold_block_offset(count, n, b));
                }
            }
        }
    }
}

Test(block_math, pairing_leaves_a_power_of_two)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i], pof2 = fold_pof2_floor(size), next = 0;

        cr_assert_eq(pof2 & (pof2 - 1), 0, "size %d: %d not a power of two", size, pof2);
        cr_assert(pof2 <= size && size < 2 * pof2);
        cr_assert_eq(1 << fold_log2_exact(pof2), pof2);

        for (int rank = 0; rank < size; rank++) {
            int nr = fold_pair_newrank(rank, size), partner = fold_pair_partner(rank, size);

            if (partner >= 0) {
                cr_assert_eq(fold_pair_partner(partner, size), rank, "pairs are symmetric");
                cr_assert_eq(partner / 2, rank / 2, "pairs are (even, odd)");
            }
            if (nr < 0) {
                cr_assert(rank % 2 == 0 && partner == rank + 1,
                          "size %d: only the even of a pair sits out (rank %d)", size, rank);
                continue;
            }
            /* Participants take the newranks 0, 1, 2, ... in rank order. */
            cr_assert_eq(nr, next, "size %d rank %d: newrank %d, expected %d", size, rank,
                         nr, next);
            cr_assert_eq(fold_pair_rank(nr, size), rank);
            next++;
        }
        cr_assert_eq(next, pof2, "size %d: %d participants", size, next);
    }
}

/* The range both partners hold before `step`: [0, pof2) at step 0, else what the
 * rank kept at the previous step. */
static void range_before(int newrank, int pof2, int step, int *first, int *last)
{
    if (step == 0) {
        *first = 0;
        *last  = pof2;
    } else {
        fold_halving_t prev = fold_halving_step(newrank, pof2, step - 1);

        *first = prev.keep_first;
        *last  = prev.keep_last;
    }
}

Test(block_math, halving_partners_and_ranges)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int pof2 = fold_pof2_floor(sizes[i]), steps = fold_log2_exact(pof2);

        for (int r = 0; r < pof2; r++) {
            for (int k = 0; k < steps; k++) {
                fold_halving_t me = fold_halving_step(r, pof2, k);
                fold_halving_t peer = fold_halving_step(me.partner, pof2, k);
                int first, last, pfirst, plast;

                cr_assert(me.partner >= 0 && me.partner < pof2);
                cr_assert_eq(peer.partner, r, "partners are symmetric");
                cr_assert_eq(peer.keep_first, me.send_first);
                cr_assert_eq(peer.keep_last, me.send_last);
                cr_assert_eq(peer.send_first, me.keep_first);
                cr_assert_eq(peer.send_last, me.keep_last);

                range_before(r, pof2, k, &first, &last);
                range_before(me.partner, pof2, k, &pfirst, &plast);
                cr_assert(first == pfirst && last == plast, "partners hold the same range");
                /* keep and send are the two equal halves of the current range */
                cr_assert_eq(me.keep_last - me.keep_first, (last - first) / 2);
                cr_assert_eq(me.send_last - me.send_first, (last - first) / 2);
                cr_assert(me.keep_first == first ? me.keep_last == me.send_first &&
                                                   me.send_last == last
                                                 : me.send_last == me.keep_first &&
                                                   me.send_first == first &&
                                                   me.keep_last == last);
                /* the lower newrank keeps the lower half */
                cr_assert_eq(r < me.partner, me.keep_first < me.send_first);

                for (size_t c = 0; c < NCOUNTS; c++) {
                    fold_range_t cur  = fold_block_span(counts[c], pof2, first, last);
                    fold_range_t keep = fold_block_span(counts[c], pof2, me.keep_first,
                                                        me.keep_last);
                    fold_range_t send = fold_block_span(counts[c], pof2, me.send_first,
                                                        me.send_last);

                    cr_assert_eq(keep.count + send.count, cur.count);
                    cr_assert(keep.off == cur.off ? send.off == keep.off + keep.count
                                                  : keep.off == send.off + send.count);
                }
            }
            if (steps > 0) {
                fold_halving_t last = fold_halving_step(r, pof2, steps - 1);

                cr_assert_eq(last.keep_last - last.keep_first, 1);
                cr_assert_eq(last.keep_first, fold_halving_block(r, pof2));
            }
        }
    }
}

Test(block_math, every_block_owned_by_one_rank_after_halving)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int  pof2 = fold_pof2_floor(sizes[i]);
        int *owners = calloc((size_t)pof2, sizeof(int));

        for (int r = 0; r < pof2; r++) {
            int b = fold_halving_block(r, pof2);

            cr_assert(b >= 0 && b < pof2);
            owners[b]++;
            cr_assert_eq(fold_halving_owner(b, pof2), r);
        }
        for (int b = 0; b < pof2; b++) {
            cr_assert_eq(owners[b], 1, "pof2 %d: block %d has %d owners", pof2, b, owners[b]);
        }
        free(owners);
    }
}

/* Replays the reduce-scatter with each partial tracked as the interval of newranks it
 * covers: every combination must join adjacent intervals with the lower one on the
 * left (order preservation), and each owner must end with [0, pof2). */
Test(block_math, halving_reduce_scatter_preserves_rank_order)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int    pof2 = fold_pof2_floor(sizes[i]), steps = fold_log2_exact(pof2);
        size_t cells = (size_t)pof2 * (size_t)pof2;
        int   *lo = malloc(cells * sizeof(int)), *hi = malloc(cells * sizeof(int));
        int   *nlo = malloc(cells * sizeof(int)), *nhi = malloc(cells * sizeof(int));

        for (int r = 0; r < pof2; r++) {
            for (int b = 0; b < pof2; b++) {
                lo[r * pof2 + b] = r;
                hi[r * pof2 + b] = r;
            }
        }
        for (int k = 0; k < steps; k++) {
            memcpy(nlo, lo, cells * sizeof(int));
            memcpy(nhi, hi, cells * sizeof(int));
            for (int r = 0; r < pof2; r++) {
                fold_halving_t h = fold_halving_step(r, pof2, k);

                for (int b = h.keep_first; b < h.keep_last; b++) {
                    int mine = r * pof2 + b, theirs = h.partner * pof2 + b;
                    int left = h.partner < r ? theirs : mine;
                    int right = h.partner < r ? mine : theirs;

                    cr_assert_eq(hi[left] + 1, lo[right],
                                 "pof2 %d step %d block %d: [%d,%d] + [%d,%d]", pof2, k, b,
                                 lo[left], hi[left], lo[right], hi[right]);
                    nlo[mine] = lo[left];
                    nhi[mine] = hi[right];
                }
            }
            memcpy(lo, nlo, cells * sizeof(int));
            memcpy(hi, nhi, cells * sizeof(int));
        }
        for (int b = 0; b < pof2; b++) {
            int owner = fold_halving_owner(b, pof2);

            cr_assert_eq(lo[owner * pof2 + b], 0);
            cr_assert_eq(hi[owner * pof2 + b], pof2 - 1);
        }
        free(lo); free(hi); free(nlo); free(nhi);
    }
}

static void check_ring(int size, int shift)
{
    int *seen = malloc((size_t)size * sizeof(int));

    for (int r = 0; r < size; r++) {
        int prev = fold_ring_prev(r, size), owned = fold_ring_owned_block(r, shift, size);

        cr_assert_eq(fold_ring_next(prev, size), r);
        cr_assert_eq(fold_ring_block_owner(owned, shift, size), r);

        /* Reduce-scatter: the first block sent plus every block received. */
        memset(seen, 0, (size_t)size * sizeof(int));
        seen[fold_ring_rs_send_block(r, shift, size, 0)]++;
        for (int s = 0; s < size - 1; s++) {
            int got = fold_ring_rs_recv_block(r, shift, size, s);

            seen[got]++;
            cr_assert_eq(got, fold_ring_rs_send_block(prev, shift, size, s),
                         "size %d: rank %d receives what rank %d sends", size, r, prev);
            if (s > 0) {
                cr_assert_eq(fold_ring_rs_send_block(r, shift, size, s),
                             fold_ring_rs_recv_block(r, shift, size, s - 1),
                             "a rank forwards what it received");
            }
        }
        if (size > 1) {
            cr_assert_eq(fold_ring_rs_recv_block(r, shift, size, size - 2), owned);
        }
        for (int b = 0; b < size; b++) {
            cr_assert_eq(seen[b], 1, "size %d rank %d: reduce-scatter visits block %d %d "
                         "times", size, r, b, seen[b]);
        }

        /* Allgather: the owned block plus every block received. */
        memset(seen, 0, (size_t)size * sizeof(int));
        seen[owned]++;
        cr_assert_eq(fold_ring_ag_send_block(r, shift, size, 0), owned);
        for (int s = 0; s < size - 1; s++) {
            int got = fold_ring_ag_recv_block(r, shift, size, s);

            seen[got]++;
            cr_assert_eq(got, fold_ring_ag_send_block(prev, shift, size, s));
            if (s > 0) {
                cr_assert_eq(fold_ring_ag_send_block(r, shift, size, s),
                             fold_ring_ag_recv_block(r, shift, size, s - 1));
            }
        }
        for (int b = 0; b < size; b++) {
            cr_assert_eq(seen[b], 1, "size %d rank %d: allgather visits block %d %d times",
                         size, r, b, seen[b]);
        }
    }

    /* Every block is owned by exactly one rank. */
    memset(seen, 0, (size_t)size * sizeof(int));
    for (int r = 0; r < size; r++) {
        seen[fold_ring_owned_block(r, shift, size)]++;
    }
    for (int b = 0; b < size; b++) {
        cr_assert_eq(seen[b], 1);
    }
    free(seen);
}

Test(block_math, ring_visits_every_block_once_per_phase)
{
    for (size_t i = 0; i < NSIZES; i++) {
        for (int shift = 0; shift < sizes[i]; shift++) {
            check_ring(sizes[i], shift);
        }
    }
}

/* Counts, per block, the contributions a ring reduce-scatter accumulates: the owner
 * must end with all of them. */
Test(block_math, ring_reduce_scatter_reaches_every_rank)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int    size = sizes[i];
        size_t cells = (size_t)size * (size_t)size;
        int   *have = malloc(cells * sizeof(int)), *next = malloc(cells * sizeof(int));

        for (size_t c = 0; c < cells; c++) {
            have[c] = 1;
        }
        for (int s = 0; s < size - 1; s++) {
            memcpy(next, have, cells * sizeof(int));
            for (int r = 0; r < size; r++) {
                int prev = fold_ring_prev(r, size);
                int b = fold_ring_rs_recv_block(r, 0, size, s);

                next[r * size + b] = have[r * size + b] + have[prev * size + b];
            }
            memcpy(have, next, cells * sizeof(int));
        }
        for (int b = 0; b < size; b++) {
            cr_assert_eq(have[fold_ring_block_owner(b, 0, size) * size + b], size);
        }
        free(have);
        free(next);
    }
}

Test(block_math, ring_rotation_puts_the_block_at_the_root)
{
    for (size_t i = 0; i < NSIZES; i++) {
        int size = sizes[i];

        for (int root = 0; root < size; root++) {
            for (int block = 0; block < size; block++) {
                int shift = fold_ring_shift(root, block, size);

                cr_assert(shift >= 0 && shift < size);
                cr_assert_eq(fold_ring_owned_block(root, shift, size), block);
                cr_assert_eq(fold_ring_block_owner(block, shift, size), root);
                if (size > 1) {
                    cr_assert_eq(fold_ring_rs_recv_block(root, shift, size, size - 2),
                                 block, "the root receives its block at the last step");
                }
            }
        }
    }
}
