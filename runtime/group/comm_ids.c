/*
 * Communicator ids: the bitmap and the agreement rule.
 */
#include "comm_ids.h"

void fold_comm_ids_take(fold_comm_ids_t *ids, uint32_t id)
{
    ids->used[id / 64] |= 1ull << (id % 64);
}

void fold_comm_ids_release(fold_comm_ids_t *ids, uint32_t id)
{
    ids->used[id / 64] &= ~(1ull << (id % 64));
}

int fold_comm_ids_in_use(const fold_comm_ids_t *ids, uint32_t id)
{
    return (ids->used[id / 64] >> (id % 64)) & 1;
}

uint32_t fold_comm_ids_next_free(const fold_comm_ids_t *ids, uint32_t from)
{
    for (uint32_t w = from / 64; w < FOLD_COMM_IDS / 64; w++) {
        uint64_t free_bits = ~ids->used[w];
        if (w == from / 64) {
            free_bits &= ~0ull << (from % 64);
        }
        if (free_bits != 0) {
            return w * 64 + (uint32_t)__builtin_ctzll(free_bits);
        }
    }
    return FOLD_COMM_ID_NONE;
}

int fold_comm_ids_agree(const uint32_t *proposals, int n, uint32_t *candidate, uint32_t *id)
{
    uint32_t max = 0;
    int equal = 1;
    for (int i = 0; i < n; i++) {
        if (proposals[i] == FOLD_COMM_ID_NONE) {
            *id = FOLD_COMM_ID_NONE;
            return 1;
        }
        max = proposals[i] > max ? proposals[i] : max;
        equal &= proposals[i] == proposals[0];
    }
    if (equal) {
        *id = max;
        return 1;
    }
    *candidate = max;
    return 0;
}
