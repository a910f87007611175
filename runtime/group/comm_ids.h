/*
 * Communicator ids: 16 bits of every message tag, so at most 65,536 live at once
 * per process, but freed ids are used again.
 *
 * Reuse is safe because an id is agreed by every member of the parent (split) or
 * of the group (create_group) to be free on each of them (fold_comm_ids_agree),
 * and a process frees an id only in fold_comm_free, which refuses while a
 * collective on the communicator runs: a member completes a collective only
 * after every message addressed to it in that collective arrived, so once a
 * member has freed the id no message of the old communicator can still reach it,
 * and a process that still holds the old communicator cannot agree to the id.
 */
#ifndef FOLD_GROUP_COMM_IDS_H
#define FOLD_GROUP_COMM_IDS_H

#include <stdint.h>

#define FOLD_COMM_ID_BITS 16
#define FOLD_COMM_IDS     (1u << FOLD_COMM_ID_BITS)
#define FOLD_COMM_ID_NONE UINT32_MAX

/* The ids this process uses: a bitmap of fixed size (8 KiB), whatever the job. */
typedef struct fold_comm_ids {
    uint64_t used[FOLD_COMM_IDS / 64];
} fold_comm_ids_t;

void     fold_comm_ids_take(fold_comm_ids_t *ids, uint32_t id);
void     fold_comm_ids_release(fold_comm_ids_t *ids, uint32_t id);
int      fold_comm_ids_in_use(const fold_comm_ids_t *ids, uint32_t id);
/* The smallest free id >= from, or FOLD_COMM_ID_NONE. */
uint32_t fold_comm_ids_next_free(const fold_comm_ids_t *ids, uint32_t from);

/*
 * Agreement on an id free at every member, in rounds of one allgather each:
 * every member proposes its smallest free id from the candidate, and the
 * candidate becomes the largest proposal until all proposals are equal (each
 * round that disagrees raises it, so it ends). Members with the same free ids
 * agree in the first round.
 *
 *     uint32_t candidate = 1, id;
 *     while (!fold_comm_ids_agree(all, n, &candidate, &id))
 *         ... allgather fold_comm_ids_next_free(ids, candidate) into all ...
 *
 * Returns 1 when decided: *id is the agreed id, or FOLD_COMM_ID_NONE when a
 * member has no free id left; 0 with a new *candidate for another round.
 */
int      fold_comm_ids_agree(const uint32_t *proposals, int n, uint32_t *candidate,
                             uint32_t *id);

#endif
