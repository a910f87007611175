/*
 * What a rank was asked to do in one allreduce or reduce, to compare the ranks'
 * calls: FOLD_CHECK=1 gathers them (coll/check.c), and the node's tiny-message
 * path carries one in each slot (node/fast.c), so that mismatched calls fail with
 * FOLD_ERR_MISMATCH and a line naming the ranks and the field.
 */
#ifndef FOLD_FINGERPRINT_H
#define FOLD_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fold_fingerprint {
    int      allreduce;   /* else a reduce */
    size_t   count;
    int      dtype;
    int      op;          /* a user op by its number: created in the same order */
    int      root;        /* reduce only; 0 for an allreduce */
    int      inplace;     /* allreduce only (MPI lets only a reduce's root work in place) */
    uint64_t call;        /* the communicator's call number */
    int      memory;      /* 1: the buffers are in fold memory and selection chose for
                             that (select.h, fold_select_placed); else 0 */
} fold_fingerprint_t;

/* The fields as numbers, in a fixed order; FOLD_CHECK compares the first
 * FOLD_FINGERPRINT_CHECKED at once (memory is known only once selection has run:
 * the node's comparison of the calls catches it, node/peer.c). */
#define FOLD_FINGERPRINT_FIELDS  8
#define FOLD_FINGERPRINT_CHECKED 7
void fold_fingerprint_fields(const fold_fingerprint_t *f, int64_t *v);

/* Appends "rank a passed count X, rank b passed Y" for each field where a and b
 * differ ("; " between them) to buf; returns how many fields differ. */
int fold_fingerprint_diff(const fold_fingerprint_t *a, int rank_a, const fold_fingerprint_t *b,
                          int rank_b, char *buf, size_t len);

/* The fingerprint in 64 bits, without the call number, for calls of fewer than 2^20
 * elements (the tiny-message path's): 1 + 1 + 13 + 9 + 20 + 20 bits (flags, datatype
 * up to the last opaque one, op up to the last user op, root, count). Inline: the
 * tiny path packs a fingerprint it has just built on the stack, and out of line the
 * struct was stored field by field and loaded back 16 bytes at a time, a load the
 * store buffer cannot forward (a tenth of a 64 B reduce's time on its root). */
static inline uint64_t fold_fingerprint_pack(const fold_fingerprint_t *f)
{
    return (uint64_t)(f->allreduce & 1) | (uint64_t)(f->inplace & 1) << 1 |
           (uint64_t)(f->dtype & 0x1fff) << 2 | (uint64_t)(f->op & 0x1ff) << 15 |
           (uint64_t)(f->root & 0xfffff) << 24 | (uint64_t)(f->count & 0xfffff) << 44;
}
fold_fingerprint_t fold_fingerprint_unpack(uint64_t bits);

#endif
