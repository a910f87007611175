/*
 * fold_comm_split's membership rule, apart from the communication: from every
 * parent rank's (color, key), the members of one color in new-rank order (key,
 * then parent rank) as context ranks. The perf/ split benchmark builds its
 * communicators through this and fold_rankmap_init, as fold_comm_split does.
 */
#ifndef FOLD_GROUP_SPLIT_H
#define FOLD_GROUP_SPLIT_H

#include "rankmap.h"

#include <stdint.h>

/* One parent rank's part of the split's allgather. */
typedef struct fold_split_entry {
    int32_t  color;
    int32_t  key;
    uint32_t id;      /* its proposal for the new communicator's id (comm_ids.h) */
    int32_t  rank;    /* in the parent */
} fold_split_entry_t;

/* Compacts all[0 .. n) to the entries of `color`, sorts them by (key, rank) (not
 * when already in order: O(n) for the usual key = rank), and writes their context
 * ranks through the parent's map into ctx_ranks. Returns how many; *myrank is the
 * new rank of parent rank `me`, -1 if it is not among them. */
int fold_split_members(fold_split_entry_t *all, int n, int color, int me,
                       fold_rankmap_t *parent, int *ctx_ranks, int *myrank);

#endif
