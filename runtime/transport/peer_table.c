#include "transport/peer_table.h"

#include <fold/fold_status.h>
#include <stdint.h>
#include <stdlib.h>

#define FIRST_CAP 16

void fold_peer_table_init(fold_peer_table_t *t)
{
    *t = (fold_peer_table_t){.last_rank = -1};
}

void fold_peer_table_release(fold_peer_table_t *t)
{
    free(t->ranks);
    free(t->peers);
    fold_peer_table_init(t);
}

/* Neighbouring ranks land far apart (Fibonacci hashing). */
static size_t slot_of(int rank, size_t cap)
{
    return (size_t)(((uint64_t)(unsigned)rank * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & (cap - 1);
}

void *fold_peer_table_find(fold_peer_table_t *t, int rank)
{
    if (rank == t->last_rank && t->last != NULL) {
        return t->last;
    }
    if (t->cap == 0) {
        return NULL;
    }
    for (size_t i = slot_of(rank, t->cap);; i = (i + 1) & (t->cap - 1)) {
        if (t->ranks[i] == rank) {
            t->last_rank = rank;
            t->last      = t->peers[i];
            return t->last;
        }
        if (t->ranks[i] < 0) {
            return NULL;
        }
    }
}

static void place(int *ranks, void **peers, size_t cap, int rank, void *peer)
{
    size_t i = slot_of(rank, cap);
    while (ranks[i] >= 0) {
        i = (i + 1) & (cap - 1);
    }
    ranks[i] = rank;
    peers[i] = peer;
}

/* Doubles the table (or makes the first one); kept at most half full. */
static int grow(fold_peer_table_t *t)
{
    size_t cap = t->cap ? 2 * t->cap : FIRST_CAP;
    int *ranks = malloc(cap * sizeof(*ranks));
    void **peers = malloc(cap * sizeof(*peers));
    if (ranks == NULL || peers == NULL) {
        free(ranks);
        free(peers);
        return FOLD_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < cap; i++) {
        ranks[i] = -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (t->ranks[i] >= 0) {
            place(ranks, peers, cap, t->ranks[i], t->peers[i]);
        }
    }
    free(t->ranks);
    free(t->peers);
    t->ranks = ranks;
    t->peers = peers;
    t->cap   = cap;
    return FOLD_OK;
}

int fold_peer_table_add(fold_peer_table_t *t, int rank, void *peer)
{
    if (rank < 0) {
        return FOLD_ERR_INVALID_ARG;
    }
    if (2 * (t->count + 1) > t->cap && grow(t) != FOLD_OK) {
        return FOLD_ERR_NO_MEMORY;
    }
    place(t->ranks, t->peers, t->cap, rank, peer);
    t->count++;
    return FOLD_OK;
}
