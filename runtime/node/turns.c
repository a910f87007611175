/*
 * The order in which node-aware calls use the segment. Their flags count calls, so
 * every rank must run them in the order they were started, which is the same on
 * every rank: each call takes the next epoch and waits until it heads the queue.
 * A call given up for a mismatch asks for a resync (resync.c); any other failure
 * midway leaves the flags out of step for good: the node is then broken and
 * refuses further node-aware calls (the executor checks).
 */
#include "node/node.h"

#include <stddef.h>

void fold_node_turn_take(fold_node_t *node, fold_node_turn_t *turn)
{
    turn->epoch = ++node->epoch;
    node->fast_pos++;
    turn->pos   = fold_node_position(node);
    turn->next  = NULL;
    node->history[turn->epoch % FOLD_NODE_HISTORY] = turn->pos;
    if (node->tail != NULL) {
        node->tail->next = turn;
    } else {
        node->head = turn;
    }
    node->tail = turn;
}

/* The DONE owed for skipped epochs goes up once no earlier call is left running. */
static void pay_done(fold_node_t *node)
{
    if (node->done_owed != 0 && node->seg.base != NULL &&
        (node->head == NULL || node->head->epoch > node->done_owed)) {
        if (fold_shm_flag_read(&node->seg, node->local_rank, FOLD_NODE_FLAG_DONE) <
            node->done_owed << 32) {
            fold_shm_flag_post(&node->seg, node->local_rank, FOLD_NODE_FLAG_DONE,
                               node->done_owed << 32);
        }
        node->done_owed = 0;
    }
}

void fold_node_turn_owe_done(fold_node_t *node, uint64_t epoch)
{
    if (epoch > node->done_owed) {
        node->done_owed = epoch;
    }
    pay_done(node);
}

void fold_node_turn_leave(fold_node_t *node, fold_node_turn_t *turn, int status)
{
    if (turn->epoch == 0) {
        return;
    }
    fold_node_turn_t *prev = NULL;
    for (fold_node_turn_t *t = node->head; t != NULL; prev = t, t = t->next) {
        if (t != turn) {
            continue;
        }
        if (prev != NULL) {
            prev->next = t->next;
        } else {
            node->head = t->next;
        }
        if (node->tail == t) {
            node->tail = prev;
        }
        break;
    }
    if (status != 0) {
        fold_node_abandon(node, turn->pos, turn->epoch, status);
    }
    turn->next  = NULL;
    turn->epoch = 0;
    pay_done(node);
}
