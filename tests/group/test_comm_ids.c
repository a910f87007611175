/*
 * Communicator ids are recycled safely: the bitmap and the agreement rule; more
 * than 65,536 communicators created and freed in one process while one stays
 * alive (its id is never handed out again while it lives); members whose free
 * ids differ agree on one free at all of them.
 */
#include <criterion/criterion.h>

#include "group/comm_ids.h"
#include "loopback_harness.h"

#include <stdio.h>
#include <string.h>

Test(comm_ids, next_free_and_agreement)
{
    static fold_comm_ids_t a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    for (uint32_t id = 0; id < 130; id++) {
        fold_comm_ids_take(&a, id);
    }
    fold_comm_ids_release(&a, 64);
    cr_expect_eq(fold_comm_ids_next_free(&a, 1), 64);
    cr_expect_eq(fold_comm_ids_next_free(&a, 65), 130);
    fold_comm_ids_take(&b, 130);
    /* a proposes 64, b 1; then from 64: a 64, b 64. */
    uint32_t p[2] = {fold_comm_ids_next_free(&a, 1), fold_comm_ids_next_free(&b, 1)};
    uint32_t candidate = 1, id = 0;
    int rounds = 1;
    while (!fold_comm_ids_agree(p, 2, &candidate, &id)) {
        p[0] = fold_comm_ids_next_free(&a, candidate);
        p[1] = fold_comm_ids_next_free(&b, candidate);
        rounds++;
    }
    cr_expect_eq(id, 64);
    cr_expect_eq(rounds, 2);
    cr_expect(!fold_comm_ids_in_use(&a, id) && !fold_comm_ids_in_use(&b, id));
    for (uint32_t i = 0; i < FOLD_COMM_IDS; i++) {
        fold_comm_ids_take(&b, i);
    }
    cr_expect_eq(fold_comm_ids_next_free(&b, 0), FOLD_COMM_ID_NONE);
    p[0] = 64;
    p[1] = FOLD_COMM_ID_NONE;
    cr_expect(fold_comm_ids_agree(p, 2, &candidate, &id) && id == FOLD_COMM_ID_NONE);
}

#define CYCLES 70000   /* more than the 65,536 ids of the tag */

/* Creates and frees CYCLES communicators while `kept` stays alive; every so often
 * the new one runs an allreduce (so its tags are used) and so does `kept`. */
static int many_comms(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    fold_comm_h world = fold_comm_world(ctx), kept;
    if (fold_comm_split(world, 0, rank, &kept) != FOLD_OK) {
        return 1;
    }
    uint32_t max_id = 0;
    for (int i = 0; i < CYCLES; i++) {
        fold_comm_h c;
        if (fold_comm_split(world, i % 2 ? 0 : rank % 2, -rank, &c) != FOLD_OK) {
            fprintf(stderr, "rank %d: split %d failed\n", rank, i);
            return 1;
        }
        if (c->id == kept->id) {
            fprintf(stderr, "rank %d: split %d reused the live id %u\n", rank, i, c->id);
            return 1;
        }
        max_id = c->id > max_id ? c->id : max_id;
        if (i % 5000 == 0) {
            int v = 1, w = 1;
            int want = i % 2 ? size : (size + (rank % 2 ? 0 : 1)) / 2;
            if (fold_allreduce(FOLD_IN_PLACE, &v, 1, FOLD_INT32, FOLD_OP_SUM, c) != FOLD_OK ||
                fold_allreduce(FOLD_IN_PLACE, &w, 1, FOLD_INT32, FOLD_OP_SUM, kept) != FOLD_OK ||
                v != want || w != size) {
                fprintf(stderr, "rank %d: allreduce after %d splits: %d, %d\n", rank, i, v, w);
                return 1;
            }
        }
        fold_comm_free(&c);
    }
    fold_comm_free(&kept);
    return max_id > 2;   /* freed ids came back: two at most were ever needed */
}

Test(comm_ids, more_than_65536_communicators, .timeout = 120)
{
    cr_expect_eq(lh_run(3, many_comms, NULL), 0);
}

static int self_gather(const void *in, void *out, size_t len, void *arg)
{
    (void)arg;
    memcpy(out, in, len);
    return 0;
}

/* Rank 0 holds a communicator of its own (id 1): a split over everyone agrees on
 * id 2 in a second round; once rank 0 frees it, the next split gets 1 back. */
static int different_free_ids(fold_context_t *ctx, int rank, int size, void *arg)
{
    (void)arg;
    (void)size;
    fold_comm_h world = fold_comm_world(ctx), mine = NULL, a, b;
    int me = rank, bad = 0;
    if (rank == 0) {
        bad |= fold_comm_create_group(ctx, 1, &me, 0, self_gather, NULL, &mine) != FOLD_OK;
        bad |= mine == NULL || mine->id != 1;
    }
    lh_barrier(ctx);
    bad |= fold_comm_split(world, 0, rank, &a) != FOLD_OK || a->id != 2;
    if (rank == 0) {
        fold_comm_free(&mine);
    }
    bad |= fold_comm_split(world, 0, rank, &b) != FOLD_OK || b->id != 1;
    int v = 1;
    bad |= fold_allreduce(FOLD_IN_PLACE, &v, 1, FOLD_INT32, FOLD_OP_SUM, b) != FOLD_OK ||
           v != size;
    fold_comm_free(&a);
    fold_comm_free(&b);
    return bad;
}

Test(comm_ids, members_with_different_free_ids_agree)
{
    cr_expect_eq(lh_run(3, different_free_ids, NULL), 0);
}
